#!/usr/bin/env bash
# Why test_throw and the fp quantize tests crash on the H200 build (session 21):
# bench/cuda_mlx_throw_device.sh found that they crash only where numpy is
# imported before mlx (the run script's conftest.py did), in the first C++
# error message (std::ostream << long calling a codecvt function). The module
# built there defines and exports libstdc++'s own symbols (it has no NEEDED
# libstdc++.so.6; the stock wheel's has). This script shows, in one call:
#   1. the import order on the built module: numpy first, mlx first (twice);
#   2. the toolchain: which libstdc++ the image's g++ links and how;
#   3. a small library formatting a long into an ostringstream, linked as the
#      module was and in the ways that would fix it, each loaded after numpy.
# Usage: bench/cuda_mlx_stdcxx_device.sh WORK OUT (WORK: the build's work folder)
set -uo pipefail
WORK=$1
OUT=$(mkdir -p "$2" && cd "$2" && pwd)
K=$WORK/kit
MOD=$(ls "$K"/mlx/python/mlx/core*.so)
. "$(dirname "$0")/cuda_device_env.sh"
LIBS=$(kit_libraries "$K") || exit 2
export LD_LIBRARY_PATH=$LIBS${LD_LIBRARY_PATH:-}
export PYTHONPATH=$K/mlx/python
unset MLX_QMV_WIDE MLX_QMV_ROUTE

echo "== 1. import order (a C++ error message: quantized_matmul's shape check)"
for order in numpy,mlx mlx,numpy; do
  for run in 1 2; do
    python3 -c "
import importlib
for name in '$order'.split(','):
    importlib.import_module({'numpy': 'numpy', 'mlx': 'mlx.core'}[name])
import mlx.core as mx
w_q, s, b = mx.quantize(mx.random.normal((32, 512)))
try:
    mx.quantized_matmul(mx.random.normal((10, 512)), w_q.T, s, b)
except ValueError as e:
    print('caught:', str(e)[:70])" >"$OUT/order_${order/,/_}_$run.txt" 2>&1
    echo "$order $run rc $?: $(head -c 120 "$OUT/order_${order/,/_}_$run.txt" | head -1)"
  done
done

echo "== 2. toolchain"
# The compiler CMake takes: CXX where set (the H200 image sets /opt/gcc/bin/g++).
cxx=${CXX:-$(command -v c++ || command -v g++)}
echo "c++: $cxx -> $(readlink -f "$cxx"); $("$cxx" --version | head -1)"
"$cxx" -v 2>&1 | grep -o -- '--\(prefix\|libdir\|enable-shared\|disable-shared\|with-static-standard-libraries\|enable-static\)[^ ]*' | tr '\n' ' '
echo
ls -d "$(dirname "$(readlink -f "$cxx")")"/../lib* 2>&1 | tr '\n' ' '
echo
for f in libstdc++.so libstdc++.so.6 libstdc++.a libstdc++_nonshared.a; do
  echo "  -print-file-name=$f: $("$cxx" -print-file-name=$f)"
done
"$cxx" -dumpspecs | grep -n -i -B1 -A1 'static-libstdc\|static-libgcc' | head -12
echo "module NEEDED: $(readelf -d "$MOD" | sed -n 's/.*Shared library: \[\(.*\)\]/\1/p' | tr '\n' ' ')"
echo "module defines $(nm -D --defined-only "$MOD" | grep -c ' _ZN\(St\|Ss\|So\|Si\|K\?St\)') std:: symbols" \
  "($(nm -D --defined-only "$MOD" | grep -c ' u ') unique)"
py_numpy=$(python3 -c 'import numpy._core._multiarray_umath as m; print(m.__file__)' 2>/dev/null ||
  python3 -c 'import numpy.core._multiarray_umath as m; print(m.__file__)')
echo "numpy's module NEEDED: $(readelf -d "$py_numpy" | sed -n 's/.*Shared library: \[\(.*\)\]/\1/p' | tr '\n' ' ')"

echo "== 3. a library formatting a long, loaded after numpy"
src=$(mktemp -d)
cat >"$src/fmt.cpp" <<'CPP'
#include <sstream>
#include <string>
extern "C" const char* fmt_long(long v) {
  static std::string s;
  std::ostringstream o;
  o << "value " << v;
  s = o.str();
  return s.c_str();
}
CPP
sysdir=$(dirname "$(ldconfig -p | sed -n 's/.*libstdc++.so.6 (libc6,x86-64) => //p' | head -1)")
# The system's runtime through a folder whose libstdc++.so names it: what the
# build would take with -L that folder (the image's g++ finds no libstdc++.so of
# its own, if the module's static copy comes from there).
mkdir -p "$src/link" && ln -sfn "$sysdir/libstdc++.so.6" "$src/link/libstdc++.so"
declare -A how=(
  [default]=""
  [static]="-static-libstdc++"
  [static_hidden]="-static-libstdc++ -Wl,--exclude-libs,ALL"
  [shared_system]="-nodefaultlibs -L$sysdir -l:libstdc++.so.6 -lm -lgcc_s -lc"
  [shared_link]="-L$src/link"
)
for name in default static static_hidden shared_system shared_link; do
  # shellcheck disable=SC2086  # the flags are a list
  "$cxx" -O1 -shared -fPIC -o "$src/$name.so" "$src/fmt.cpp" ${how[$name]} 2>"$OUT/lib_$name.txt" ||
    { echo "$name: does not link: $(head -c 200 "$OUT/lib_$name.txt")"; continue; }
  needed=$(readelf -d "$src/$name.so" | sed -n 's/.*Shared library: \[\(.*\)\]/\1/p' | tr '\n' ' ')
  exported=$(nm -D --defined-only "$src/$name.so" | grep -c ' _ZN')
  for order in numpy none; do
    python3 -c "
import ctypes, sys
if '$order' == 'numpy':
    import numpy
lib = ctypes.CDLL('$src/$name.so')
lib.fmt_long.restype = ctypes.c_char_p
print(lib.fmt_long(42).decode())" >>"$OUT/lib_$name.txt" 2>&1
    echo "$name (${how[$name]:-no flags}) after $order: rc $?; NEEDED $needed; $exported std symbols exported"
  done
done
