#!/usr/bin/env bash
# Blocks of three warps at 8 bits (session 32), one device call: 9 warps per
# multiprocessor where the dispatch's blocks of 4 warps of 8 vectors (2 per
# multiprocessor) and of 2 warps of 4 vectors (4) give 8. qmv_bench --time
# of (3, 2, 8, 3|4|6) beside (4, 2, 8, 3|6), and of (3, 4, 4, 6) beside
# (2, 4, 4, 6), with the dispatch and qmm_sm80, at M = 4, 8, 12, 16, 8 bits,
# bfloat16 and float16, on 4096 x 14336, 14336 x 4096 and 4096 x 4096, the
# whole loop twice; then the same build's --quick parity at 8 bits.
# Usage: bench/experiments/cuda_three_warps/time_device.sh B OUT
#   (B: a folder holding qmv_bench from bench/cuda_qmv.py build, with
#   harness.diff's instantiations)
set -uo pipefail
B=$1; O=$2
H=$(dirname "$0")/../..
. "$H/cuda_device_env.sh"
record_env "$O"
status=0
configs=$(configs_at "3,2,8,3 3,2,8,4 3,2,8,6 4,2,8,3 4,2,8,6 3,4,4,6 2,4,4,6 0,0,0,0" "4 8 12 16")
for rep in 1 2; do
  time_shapes_in_turn "$O/b" 8 "4096,14336 14336,4096 4096,4096" "$configs" "$B" || status=1
done
mkdir -p "$O/quick"
"$B/qmv_bench" --quick --bits 8 --out "$O/quick" > "$O/quick/stdout.txt" 2>&1 || status=1
grep -E "PARITY|MISMATCH" "$O/quick/stdout.txt" | head -3
echo "status $status"
exit $status
