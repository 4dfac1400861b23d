#!/usr/bin/env bash
# x promoted to float once per block at 8 bits (session 32), one device call.
# Two harness builds, the one before (B0) and the one with the float tiles
# (B1), time in turn, twice, on 4096 x 14336, 14336 x 4096 and 4096 x 4096,
# bfloat16 and float16, 8 bits, at M = 4, 8, 12 and 16: the ring
# configurations (4, 2, 8, 3|4|5|6), (2, 4, 4, 4|6) and (4, 4, 4, 6), the
# dispatch with stock beside, and qmm_sm80. Then B1's parity: qmv_bench
# --quick --bits 8, the ragged sweep and the configuration matrix (every row
# against stock M = 1, each with its negative control).
# Rows in OUT/b0 and OUT/b1 (cuda_qmv_time.csv; -1: a configuration the
# build refused, as (4, 2, 8, 6) with float tiles, past 48 KB).
# Usage: bench/experiments/cuda_float_x/time_device.sh B0 B1 OUT
#   (B0, B1: folders holding qmv_bench (and B1 qmv_matrix) from
#   bench/cuda_qmv.py build)
set -uo pipefail
B0=$1; B1=$2; O=$3
. "$(dirname "$0")/../../cuda_device_env.sh"
record_env "$O"
status=0
configs=$(configs_at "4,2,8,3 4,2,8,4 4,2,8,5 4,2,8,6 2,4,4,4 2,4,4,6 4,4,4,6 0,0,0,0" "4 8 12 16")
for rep in 1 2; do
  time_shapes_in_turn "$O/b" 8 "4096,14336 14336,4096 4096,4096" "$configs" "$B0" "$B1" || status=1
done
mkdir -p "$O/quick" "$O/ragged"
"$B1/qmv_bench" --quick --bits 8 --out "$O/quick" > "$O/quick/stdout.txt" 2>&1 || status=1
grep -E "PARITY|MISMATCH|CONTROL" "$O/quick/stdout.txt" | head -5
"$B1/qmv_bench" --quick --ragged --out "$O/ragged" > "$O/ragged/stdout.txt" 2>&1 || status=1
grep -E "PARITY|MISMATCH|CONTROL" "$O/ragged/stdout.txt" | head -5
bash "$(dirname "$0")/../../cuda_qmv_matrix_device.sh" "$B1" "$O/matrix" --no-time || status=1
echo "status $status"
exit $status
