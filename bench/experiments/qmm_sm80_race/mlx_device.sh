#!/usr/bin/env bash
# Patch 0012 in MLX built whole (session 27), after
# bench/cuda_mlx_build_device.sh built the queue's kit in WORK:
#   fixed:   the build as it is (the wait and barrier of patch 0012);
#   unfixed: the same tree with fixed.patch reversed (the pin's epilogue),
#            rebuilt in place (ninja: qmm_sm80's JIT source and the links);
#            run it second, on the same warm machine; or a tree that was
#            built with fixed.patch reversed (session 28: kit unpacked,
#            patch reversed, then built), run as it is.
# Each phase runs, with MLX_QMV_WIDE=1 (upstream's route: these products go to
# qmm_sm80), mlx_repeat.py over PROBLEMS, mlx_modes.py on the test's product
# and the queue's test_qmm_repeatable TEST_RUNS times, each in a process of
# its own; and the test once more without it (the overlay's route: qmv).
# Each phase has a PTX cache of its own, so no kernel compiled before the
# change is reused; the first problem is the test's, so its qmm_sm80 is
# compiled before the test's runs (session 27: runs killed by their limit
# while compiling it never filled the cache). Session 27 found the race
# only where results are read on the host between evaluations (mlx_modes.py).
# Usage: [REPS=N] [TEST_RUNS=N] [PROBLEMS="K,N,M,BITS,DTYPE[,DATA] ..."]
#   mlx_device.sh WORK OUT fixed|unfixed
set -uo pipefail
WORK=$1
OUT=$2
PHASE=$3
K=$WORK/kit
HERE=$(cd "$(dirname "$0")" && pwd)
REPS=${REPS:-1000}
TEST_RUNS=${TEST_RUNS:-10}
PROBLEMS=${PROBLEMS:-8192,28672,12,4,fp16,test 8192,28672,12,4,bf16,test 8192,28672,12,8,bf16 8192,28672,12,8,fp16 8192,8192,12,8,fp16,test 14336,8192,12,8,fp16}
mkdir -p "$OUT"
. "$HERE/../../cuda_device_env.sh"
LIBS=$(kit_libraries "$K") || exit 2
export LD_LIBRARY_PATH=$LIBS${LD_LIBRARY_PATH:-}
export PYTHONPATH=$K/mlx/python PYTHONUNBUFFERED=1
export MLX_PTX_CACHE_DIR=$WORK/ptx-$PHASE
unset MLX_QMV_WIDE MLX_QMV_ROUTE
rm -rf "$MLX_PTX_CACHE_DIR"
mkdir -p "$MLX_PTX_CACHE_DIR"
header=$K/mlx/mlx/backend/cuda/device/qmm_sm80.cuh
case $PHASE in
  fixed)
    patch -s --dry-run -R -p1 -d "$K/mlx" < "$HERE/fixed.patch" ||
      { echo "$header: patch 0012's wait is not there"; exit 2; } ;;
  unfixed)
    # A tree built without the wait (fixed.patch reversed before the build,
    # to fit build and runs in one call) needs no rebuild.
    if patch -s --dry-run -p1 -d "$K/mlx" < "$HERE/fixed.patch" > /dev/null; then
      echo "$PHASE: the tree was built without the wait"
    else
      patch -s -R -p1 -d "$K/mlx" < "$HERE/fixed.patch" || { echo "$header: cannot reverse fixed.patch"; exit 2; }
      start=$(date +%s)
      ninja -C "$WORK/build" core > "$OUT/rebuild.log" 2>&1 || { tail -20 "$OUT/rebuild.log"; exit 2; }
      echo "rebuilt without the wait in $(($(date +%s) - start)) s: $(grep -c '^\[' "$OUT/rebuild.log") steps"
      grep '^\[' "$OUT/rebuild.log" | sed 's/^/  /' | head -8
    fi ;;
  *) echo "phase $PHASE: fixed or unfixed" >&2; exit 2 ;;
esac
grep -c "cp_async_wait<0>" "$header" | sed "s/^/$PHASE: cp_async_wait<0> in the header: /"
# shellcheck disable=SC2086  # PROBLEMS is a list
MLX_QMV_WIDE=1 python3 "$HERE/mlx_repeat.py" "$REPS" $PROBLEMS 2>&1 | tee "$OUT/repeat.txt"
MLX_QMV_WIDE=1 python3 "$HERE/mlx_modes.py" 4 fp16 200 2>&1 | tee "$OUT/modes.txt"
cd "$K/mlx/python/tests" || exit 2
test_run() { # $1: label; the environment chooses the route
  local failed=0 i
  for i in $(seq "$TEST_RUNS"); do
    timeout 120 python3 -m unittest test_quantized.TestQuantized.test_qmm_repeatable \
      >> "$OUT/test-$1.log" 2>&1 || failed=$((failed + 1))
  done
  echo "$PHASE $1: test_qmm_repeatable failed $failed of $TEST_RUNS runs"
}
MLX_QMV_WIDE=1 test_run upstream | tee -a "$OUT/summary.txt"
TEST_RUNS=1 test_run overlay | tee -a "$OUT/summary.txt"
