#!/usr/bin/env bash
# Which part of MLX's tests folder made test_throw crash on the H200: the
# statements passed in a file of their own under the same pytest (plugins
# off), and crashed in python/tests/test_quantized.py (session 20). Session 21
# found it: only with the run script's conftest.py, which imported numpy first
# (bench/cuda_stdcxx.sh says why). Each variant runs in a fresh process, twice, with the native
# stack of bench/segv_backtrace.c preloaded; one line per run:
#   VARIANT RUN rc N
# and the outputs in OUT/throw_VARIANT_RUN.txt.
#   unittest     MLX's own runner: python -m unittest test_quantized...test_throw
#   pytest       pytest on MLX's file, no conftest.py in the folder
#   conftest     the same with bench/cuda_mlx_run_device.sh's conftest.py
#   mlxcase      the body in a file of its own, in a class of mlx_tests.MLXTestCase
#   envonly      the body in a unittest.TestCase, with mlx_tests' two variables set
#   plain        the body in a unittest.TestCase (the control: passed in session 20)
#   notf32       MLX's file with mlx_tests' two variables taken out of its copy
# Usage: bench/cuda_mlx_throw_device.sh WORK OUT (WORK: the build's work folder)
set -uo pipefail
WORK=$1
OUT=$(mkdir -p "$2" && cd "$2" && pwd)
ROOT=$PWD
K=$WORK/kit
TESTS=$K/mlx/python/tests
. "$(dirname "$0")/cuda_device_env.sh"
LIBS=$(kit_libraries "$K") || exit 2
export LD_LIBRARY_PATH=$LIBS${LD_LIBRARY_PATH:-}
export PYTHONPATH=$K/mlx/python PYTHONUNBUFFERED=1 PYTEST_DISABLE_PLUGIN_AUTOLOAD=1
unset MLX_QMV_WIDE MLX_QMV_ROUTE
cc=$(command -v cc || command -v gcc || echo /opt/gcc/bin/gcc)
"$cc" -shared -fPIC -O1 -o "$WORK/segv_backtrace.so" "$ROOT/bench/segv_backtrace.c" ||
  { echo "$cc did not build bench/segv_backtrace.c" >&2; exit 2; }
export LD_PRELOAD=$WORK/segv_backtrace.so

own=$(mktemp -d)
body='        x = mx.random.normal(shape=(10, 512))
        w = mx.random.normal(shape=(32, 512))
        w_q, scales, biases = mx.quantize(w)
        with self.assertRaises(ValueError):
            mx.quantized_matmul(x, w_q.T, scales, biases)
        with self.assertRaises(ValueError):
            mx.quantized_matmul(x, w_q.T, scales.T, biases)
        with self.assertRaises(ValueError):
            mx.quantized_matmul(x, w_q, scales, biases, False)
        with self.assertRaises(ValueError):
            mx.quantized_matmul(x, w_q, scales.T, biases.T)
        y = mx.quantized_matmul(x, w_q, scales, biases, True)
        mx.eval(y)'
mkdir -p "$own/mlxcase" "$own/envonly" "$own/plain" "$own/notf32"
cp "$TESTS/mlx_tests.py" "$own/mlxcase/"
printf 'import mlx_tests\nimport mlx.core as mx\n\n\nclass T(mlx_tests.MLXTestCase):\n    def test_throw(self):\n%s\n' \
  "$body" >"$own/mlxcase/test_own.py"
printf 'import os\n\nos.environ["MLX_ENABLE_TF32"] = "0"\nos.environ["MLX_ENABLE_CACHE_THRASHING_CHECK"] = "0"\nimport unittest\n\nimport mlx.core as mx\n\n\nclass T(unittest.TestCase):\n    def test_throw(self):\n%s\n' \
  "$body" >"$own/envonly/test_own.py"
printf 'import unittest\n\nimport mlx.core as mx\n\n\nclass T(unittest.TestCase):\n    def test_throw(self):\n%s\n' \
  "$body" >"$own/plain/test_own.py"
cp "$TESTS"/*.py "$own/notf32/" && rm -f "$own/notf32/conftest.py"
sed -i '/^os.environ\["MLX_ENABLE_/d' "$own/notf32/mlx_tests.py"
# The run script's conftest.py, taken from bench/cuda_mlx_run_device.sh.
saved=$(mktemp)
sed -n "/^cat >conftest.py <<'PY'/,/^PY\$/p" "$ROOT/bench/cuda_mlx_run_device.sh" | sed '1d;$d' >"$saved"
[ -s "$saved" ] || { echo "no conftest.py in bench/cuda_mlx_run_device.sh" >&2; exit 2; }
rm -f "$TESTS/conftest.py"
node=test_quantized.py::TestQuantized::test_throw
for variant in unittest pytest conftest mlxcase envonly plain notf32; do
  for run in 1 2; do
    case $variant in
      unittest) dir=$TESTS cmd=(python3 -m unittest -v test_quantized.TestQuantized.test_throw) ;;
      pytest) dir=$TESTS cmd=(python3 -m pytest -q -p no:cacheprovider "$node") ;;
      conftest) dir=$TESTS cmd=(python3 -m pytest -q -p no:cacheprovider "$node") ;;
      notf32) dir=$own/notf32 cmd=(python3 -m pytest -q -p no:cacheprovider "$node") ;;
      *) dir=$own/$variant cmd=(python3 -m pytest -q -p no:cacheprovider test_own.py) ;;
    esac
    [ "$variant" = conftest ] && cp "$saved" "$TESTS/conftest.py"
    (cd "$dir" && timeout 120 "${cmd[@]}") >"$OUT/throw_${variant}_$run.txt" 2>&1
    rc=$?
    rm -f "$TESTS/conftest.py"
    echo "$variant $run rc $rc: $(grep -m1 -E 'passed|failed|OK|FAILED|Fatal Python error' "$OUT/throw_${variant}_$run.txt" | cut -c1-120)"
  done
done
# The first native stack printed, if any.
grep -h -m1 -A40 'segv_backtrace' "$OUT"/throw_*.txt | head -60
