#!/usr/bin/env bash
# Build MLX (CUDA backend and Python bindings, sm_90a only) from a kit of
# bench/cuda_mlx_kit.sh (the patched tree, or the stock one for comparison)
# on a machine that reaches nothing (the H200), with that machine's CUDA
# toolkit, cuDNN (its pip package) and Python, to run there
# (bench/cuda_mlx_run_device.sh does the runs):
#   WORK/kit/mlx/python holds the importable package afterwards
#   (PYTHONPATH=WORK/kit/mlx/python; LD_LIBRARY_PATH as printed).
# The build directory is WORK/build. At --limit the script returns 124 and
# leaves ninja compiling in a session of its own (bench/ninja_session.sh): the
# same command in the next call on the same machine, before its idle release
# (30 s), waits for that ninja; on a fresh machine it starts over. Until
# session 29 the limit killed ninja, and the objects in flight started again
# from nothing: MLX's longest, copy_general_input.cu, took more than 440 s
# alone on some H200 hosts (2026-12-02 and 2026-12-03) and never finished in
# calls of 470, 150, 330 and 440 s. It and the streamed kernels start first
# (NINJA_FIRST); ninja took 355-410 s in all on the faster hosts.
# --pack DIR packs the built module into DIR (bench/cuda_mlx_pack.sh: pieces
# under 16 MiB, for DIR under $OUT); a later call, on a fresh machine too,
# given the same kit and --from-pack DIR (the pieces carried) skips the build.
# Usage: bench/cuda_mlx_build_device.sh KIT_TAR WORK OUT [--configure-only]
#   [--jobs N] [--limit SECONDS] [--pack DIR | --from-pack DIR]
# The compilers are CMake's defaults; CC/CXX (and CUDAHOSTCXX) in the
# environment choose others, as for any CMake build.
set -uo pipefail
KIT_TAR=$1
WORK=$2
OUT=$3
shift 3
CONFIGURE_ONLY=0
JOBS=$(nproc)
LIMIT=0
PACK=
FROM_PACK=
while [ $# -gt 0 ]; do
  case $1 in
    --configure-only) CONFIGURE_ONLY=1 ;;
    --pack) PACK=$2; shift ;;
    --from-pack) FROM_PACK=$2; shift ;;
    --jobs) JOBS=$2; shift ;;
    --limit) LIMIT=$2; shift ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
  shift
done
mkdir -p "$WORK" "$OUT"
K=$WORK/kit
D=$K/deps
HERE=$(dirname "$0")
[ -d "$K" ] || tar -xJf "$KIT_TAR" -C "$WORK" || exit 1
cat "$K/MANIFEST"

# NVRTC (JIT kernels) looks for MLX's, CUTLASS's and CCCL's headers in
# include/ beside the folder of the library, as in the wheel.
link_headers() {
  local inc=$K/mlx/python/include
  mkdir -p "$inc"
  ln -sfn "$K/mlx/mlx" "$inc/mlx"
  ln -sfn "$D/cutlass/include/cutlass" "$inc/cutlass"
  ln -sfn "$D/cutlass/include/cute" "$inc/cute"
  ln -sfn "$D/cccl/include" "$inc/cccl"
  ls -la "$K/mlx/python/mlx/"core*.so
  # A module with a libstdc++ of its own crashes where numpy comes first.
  bash "$HERE/cuda_stdcxx.sh" check "$K/mlx/python/mlx/"core*.so ||
    echo "warning: the module carries its own libstdc++ (above)"
}
if [ -n "$FROM_PACK" ]; then
  bash "$HERE/cuda_mlx_pack.sh" unpack "$KIT_TAR" "$WORK" "$FROM_PACK" || exit 1
  link_headers
  exit 0
fi

PY=$(command -v python3)
NV=${NVIDIA_SITE:-$("$PY" -c 'import nvidia; print(list(nvidia.__path__)[0])')}
CUDNN=${CUDNN_ROOT:-$NV/cudnn}
echo "python $("$PY" --version) ($PY), nvcc $(nvcc --version | tail -1), cudnn $CUDNN"
echo "c++: $(command -v c++ g++ | tr '\n' ' ')${CXX:+(CXX=$CXX)}"
echo "Python.h: $("$PY" -c 'import sysconfig, os; p = sysconfig.get_paths()["include"]; print(p, os.path.exists(p + "/Python.h"))')"

if [ ! -f "$WORK/build/build.ninja" ]; then
  # The module needs the system's libstdc++.so.6, as MLX's wheels do, where the
  # compiler would link its static one (the H200 image's; bench/cuda_stdcxx.sh).
  STDCXX_L=$(bash "$HERE/cuda_stdcxx.sh" link-flags "${CXX:-c++}" "$WORK/stdcxx")
  echo "libstdc++: ${STDCXX_L:-as ${CXX:-c++} links it}"
  cmake -S "$K/mlx" -B "$WORK/build" -G Ninja \
    -DCMAKE_BUILD_TYPE=Release \
    -DMLX_BUILD_CUDA=ON -DMLX_BUILD_METAL=OFF -DMLX_CUDA_ARCHITECTURES=90a \
    -DMLX_BUILD_PYTHON_BINDINGS=ON -DMLX_BUILD_PYTHON_STUBS=OFF \
    -DMLX_BUILD_TESTS=OFF -DMLX_BUILD_EXAMPLES=OFF -DMLX_BUILD_GGUF=OFF \
    -DMLX_USE_CCACHE=OFF \
    -DPython_EXECUTABLE="$PY" \
    -DCMAKE_LIBRARY_OUTPUT_DIRECTORY="$K/mlx/python/mlx" \
    -DCMAKE_SHARED_LINKER_FLAGS="$STDCXX_L" -DCMAKE_MODULE_LINKER_FLAGS="$STDCXX_L" \
    -DFETCHCONTENT_FULLY_DISCONNECTED=ON \
    -DFETCHCONTENT_SOURCE_DIR_CCCL="$D/cccl" \
    -DFETCHCONTENT_SOURCE_DIR_NVTX3="$D/nvtx" \
    -DFETCHCONTENT_SOURCE_DIR_CUDNN="$D/cudnn" \
    -DFETCHCONTENT_SOURCE_DIR_CUTLASS="$D/cutlass" \
    -DFETCHCONTENT_SOURCE_DIR_FMT="$D/fmt" \
    -DFETCHCONTENT_SOURCE_DIR_JSON="$D/json" \
    -DFETCHCONTENT_SOURCE_DIR_NANOBIND="$D/nanobind" \
    -DCUDNN_INCLUDE_PATH="$CUDNN/include" -DCUDNN_LIBRARY_PATH="$CUDNN/lib" \
    -DBLA_VENDOR=OpenBLAS -DCMAKE_LIBRARY_PATH="$K/blas/lib" \
    -DBLAS_INCLUDE_DIRS="$K/blas/include" -DLAPACK_INCLUDE_DIRS="$K/blas/include" \
    >"$OUT/configure.log" 2>&1
  rc=$?
  tail -25 "$OUT/configure.log"
  [ $rc = 0 ] || { echo "configure failed ($rc)"; exit $rc; }
fi
# nanobind links the module with LTO. The H200 image's g++ (/opt/gcc, GNU
# 13.3) has no lto-wrapper ("ld: error: could not run lto-wrapper", run of
# 2026-11-30), so there the flags come out of the generated build: the module
# is then built as MLX's other objects are, without LTO.
CXX_USED=$(sed -n 's/^CMAKE_CXX_COMPILER:[A-Z]*=//p' "$WORK/build/CMakeCache.txt")
if ! [ -x "$("$CXX_USED" -print-prog-name=lto-wrapper)" ]; then
  echo "$CXX_USED has no lto-wrapper: building the Python module without LTO"
  sed -i 's/ -flto=auto -fno-fat-lto-objects//g; s/ -flto=auto//g' "$WORK/build/build.ninja"
fi
# The longest objects first (bench/ninja_first.py says why); NINJA_FIRST
# lists substrings of their outputs.
# shellcheck disable=SC2086  # NINJA_FIRST is a list
python3 "$HERE/ninja_first.py" "$WORK/build/build.ninja" \
  ${NINJA_FIRST:-copy/copy_general_input.cu.o qmm/qmv_streamed_} || exit 2
[ $CONFIGURE_ONLY = 1 ] && exit 0

start=$(date +%s)
# At --limit ninja is left compiling (bench/ninja_session.sh says why): the
# same command in the next call, before the machine goes back, waits for it.
bash "$HERE/ninja_session.sh" "$WORK/ninja" "$LIMIT" "$OUT/build.log" -C "$WORK/build" -j "$JOBS" core
rc=$?
# Each step's start and end (ms since that ninja started), to see how long
# the longest objects took.
cp "$WORK/build/.ninja_log" "$OUT/ninja_log.txt" 2>/dev/null
echo "ninja rc $rc after $(($(date +%s) - start)) s; $(grep -c '^\[' "$OUT/build.log") steps logged"
if [ $rc = 124 ]; then
  echo "still compiling, last step started: $(grep '^\[' "$OUT/build.log" | tail -1)"
  exit 124
fi
if [ $rc != 0 ]; then
  grep -B2 -A12 -m3 "error" "$OUT/build.log" | head -60
  tail -5 "$OUT/build.log"
  exit $rc
fi

link_headers
if [ -n "$PACK" ]; then
  bash "$HERE/cuda_mlx_pack.sh" pack "$KIT_TAR" "$WORK" "$PACK" || exit 1
fi
