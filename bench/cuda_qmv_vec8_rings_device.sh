#!/usr/bin/env bash
# Rings for blocks of 8 vectors (session 31), one device call: qmv_bench
# --time of (W, R, 8, D) at W = 4 with D = 3, 4, 6, W = 8 with D = 3, 4 and
# (2, 2, 8, 6) at M = 6, 8 (and D = 3, 4, 6 at M = 16), 8 bits, bfloat16 and
# float16, on 4096 x 14336, 14336 x 4096 and 4096 x 4096, the dispatch and
# qmm_sm80 at M = 8 beside; then 4 bits on 4096 x 14336 (W = 4, D = 3, 4, 6
# at M = 8; the dispatch at M = 8, 16); the whole loop twice. Rows in
# OUT/cuda_qmv_time.csv (-1: a configuration the harness refused).
# Usage: cuda_qmv_vec8_rings_device.sh QMV_BENCH OUT
#   (QMV_BENCH: bench/cuda_qmv.py build's qmv_bench, whose cuda/qmv_entry.cu
#   instantiates these configurations)
set -uo pipefail
B=$1; O=$2
. "$(dirname "$0")/cuda_device_env.sh"
record_env "$O"
C8="4,2,8,3,8 4,2,8,4,8 4,2,8,6,8 8,2,8,3,8 8,2,8,4,8 2,2,8,6,8 4,2,8,3,6 4,2,8,4,6 \
4,2,8,6,6 4,2,8,3,16 4,2,8,4,16 4,2,8,6,16 0,0,0,0,8 0,0,0,0,16 sm80,8"
C4="4,2,8,3,8 4,2,8,4,8 4,2,8,6,8 0,0,0,0,8 0,0,0,0,16 4,2,8,4,16"
status=0
for rep in 1 2; do
  for s in 4096,14336 14336,4096 4096,4096; do
    for d in 0 1; do
      # shellcheck disable=SC2086
      "$B" --out "$O" --time "$d,8,$s" $C8 >> "$O/log.txt" 2>&1 || status=1
    done
  done
  for d in 0 1; do
    # shellcheck disable=SC2086
    "$B" --out "$O" --time "$d,4,4096,14336" $C4 >> "$O/log.txt" 2>&1 || status=1
  done
done
wc -l "$O/cuda_qmv_time.csv"
exit $status
