#!/usr/bin/env bash
# The ring's M = 1 configurations at 8 bits timed against each other and
# stock (session 23): W warps, R rows per warp, S stages, and the last
# wave's half-size blocks on (default) or off (T = 1), on the reference
# shapes and two real models' ones, each twice; then per shape and dtype
# every configuration's median (us). Run from the project root.
# Usage: bench/cuda_qmv_m1_configs_device.sh QMV_BENCH OUT
set -uo pipefail
B=$1; O=$2
mkdir -p "$O"
C="2,4,1,8,1 4,2,1,8,1 4,4,1,8,1 8,2,1,8,1 8,1,1,8,1 16,2,1,4,1 16,1,1,4,1"
C="$C 4,4,1,4,1 8,4,1,4,1 4,4,1,6,1 2,4,1,8,1,1 4,2,1,8,1,1"
status=0
for pass in 1 2; do
  for s in 0,8,14336,4096 1,8,14336,4096 0,8,4096,14336 1,8,4096,14336 \
      0,8,4096,4096 1,8,4096,4096 0,8,11008,4096 0,8,4096,6144; do
    # shellcheck disable=SC2086
    "$B" --out "$O" --time "$s" $C >> "$O/log.txt" 2>&1 || status=1
  done
done
python3 "$(dirname "$0")/cuda_qmv_medians.py" "$O/cuda_qmv_time.csv"
exit $status
