#!/usr/bin/env bash
# Blocks that take several row blocks in turn, the ring running on from one
# to the next (session 32), one device call. The harness built from the
# queue (B0) and from the queue with queue.diff (B1):
#  1. bench/cuda_qmv_ab_device.sh: the dispatch at M = 1, 2, 3, 4, 8, 16,
#     stock beside, on its eight shapes, 4 and 8 bits, bfloat16 and float16;
#  2. the ring configurations of 8 and 4 vectors at 8 bits, (4, 2, 8, 3|6)
#     and (2, 4, 4, 6), and qmm_sm80, at M = 4, 8, 12, 16 on 4096 x 14336,
#     the builds in turn, twice;
#  3. B1's parity: qmv_bench --quick (4 and 8 bits), the ragged sweep and
#     the configuration matrix, every row against stock M = 1 with each its
#     negative control.
# Usage: bench/experiments/cuda_persistent/time_device.sh B0 B1 OUT
set -uo pipefail
B0=$1; B1=$2; O=$3
H=$(dirname "$0")/../..
. "$H/cuda_device_env.sh"
record_env "$O"
status=0
bash "$H/cuda_qmv_ab_device.sh" "$O/ab" "$B0" "$B1" > /dev/null 2>&1 || status=1
head -200 "$O/ab/report.txt"
time_8bit_rings "$O/c" "$B0" "$B1" || status=1
harness_parity "$O" "$B1" "4 8" || status=1
echo "status $status"
exit $status
