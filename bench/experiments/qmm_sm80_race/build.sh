#!/usr/bin/env bash
# Builds qmm_sm80_race (race.cu): the pin's qmm_sm80_kernel as
# stock_qmm_sm80 and, from a copy of its header with fixed.patch applied, as
# fixed_qmm_sm80, both through cuda/qmm_sm80_entry.cu with the harness's
# flags (bench/cuda_qmv.py build).
# Usage: build.sh MLX HEADERS FMT OUT
#   MLX: a checkout at the pin (the queue leaves the header alone);
#   HEADERS, FMT: $MLX_CUDA_HEADERS and $MLX_OVERLAY_FMT_INCLUDE (ci/cuda-headers).
set -euo pipefail
MLX=$(realpath "$1")
HEADERS=$2
FMT=$3
OUT=$4
HERE=$(cd "$(dirname "$0")" && pwd)
CUDA=$(cd "$HERE/../../../cuda" && pwd)
mkdir -p "$OUT/fixroot/mlx/backend/cuda/device"
cp "$MLX/mlx/backend/cuda/device/qmm_sm80.cuh" "$OUT/fixroot/mlx/backend/cuda/device/"
patch -s -d "$OUT/fixroot" -p1 < "$HERE/fixed.patch"
FLAGS=(-std=c++20 -O3 --extended-lambda --expt-relaxed-constexpr
  -Xcompiler=-fno-strict-aliasing
  -Xcudafe=--diag_suppress=186,--diag_suppress=2908,--diag_suppress=2361,--diag_suppress=27,--diag_suppress=997,--diag_suppress=1394,--diag_suppress=20011,--diag_suppress=20208,--diag_suppress=177,--diag_suppress=550
  -DMLX_USE_CUDA -DFMT_HEADER_ONLY=1 -gencode=arch=compute_90a,code=sm_90a
  "-I$FMT" "-I$HEADERS/cccl")
nvcc "${FLAGS[@]}" "-I$MLX" -isystem "$HEADERS" "-I$CUDA" -Dmlx=mlx_stockq \
  -c "$CUDA/qmm_sm80_entry.cu" -o "$OUT/stock.o" &
nvcc "${FLAGS[@]}" "-I$OUT/fixroot" "-I$MLX" -isystem "$HEADERS" "-I$CUDA" -Dmlx=mlx_fixq \
  -Dstock_qmm_sm80=fixed_qmm_sm80 -c "$CUDA/qmm_sm80_entry.cu" -o "$OUT/fixed.o" &
nvcc -std=c++17 -O2 -gencode=arch=compute_90a,code=sm_90a "-I$CUDA" \
  -c "$HERE/race.cu" -o "$OUT/race.o"
wait %1 %2
nvcc -gencode=arch=compute_90a,code=sm_90a "$OUT/race.o" "$OUT/stock.o" "$OUT/fixed.o" \
  -o "$OUT/qmm_sm80_race" -Xcompiler -static-libstdc++ -Xcompiler -static-libgcc
echo "built $OUT/qmm_sm80_race"
