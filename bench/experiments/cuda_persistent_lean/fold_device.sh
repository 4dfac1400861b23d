#!/usr/bin/env bash
# The fold of row blocks in turn (session 34's branch in-turn) and its
# variant whole_loop.diff (session 35: float16 blocks of 2 vectors of 4-bit
# weights keep the queue's one checked tile loop), one device call. B0: the
# queue's harness (qmv_bench); BE: in-turn's (qmv_bench, qmv_matrix); BF:
# in-turn with whole_loop.diff (qmv_bench).
#  1. bench/cuda_qmv_ab_device.sh: B0, BE, BF at M = 1, 2, 3, 4, 8, 16 and
#     stock, eight shapes, 4 and 8 bits, bfloat16 and float16;
#  2. the 8-bit rings of 8 and 4 vectors and qmm_sm80 at M = 4, 8, 12, 16 on
#     4096 x 14336, B0 and BE in turn, twice (BF's 8-bit code is BE's);
#  3. BE's parity: --quick at 4 and 8 bits, the ragged sweep and the
#     configuration matrix with its forced blocks in turn; BF's: --quick at
#     4 bits. Every row against stock M = 1, each with its negative control.
# Usage: bench/experiments/cuda_persistent_lean/fold_device.sh B0 BE BF OUT
set -uo pipefail
B0=$1; BE=$2; BF=$3; O=$4
H=$(dirname "$0")/../..
. "$H/cuda_device_env.sh"
record_env "$O"
status=0
bash "$H/cuda_qmv_ab_device.sh" "$O/ab" "$B0" "$BE" "$BF" > /dev/null 2>&1 || status=1
head -250 "$O/ab/report.txt"
time_8bit_rings "$O/c" "$B0" "$BE" || status=1
harness_parity "$O" "$BE" "4 8" || status=1
mkdir -p "$O/whole/quick4"
"$BF/qmv_bench" --quick --bits 4 --out "$O/whole/quick4" > "$O/whole/quick4/stdout.txt" 2>&1 || status=1
grep -E "PARITY|MISMATCH" "$O/whole/quick4/stdout.txt" | head -5
echo "status $status"
exit $status
