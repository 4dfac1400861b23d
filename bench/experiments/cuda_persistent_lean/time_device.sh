#!/usr/bin/env bash
# Row blocks in turn with the tile loop split (session 33), one device call.
# B0: the queue's harness; B1: the queue with queue.diff, whose launch reads
# QMV_PERSIST (0: never in turn; 1: past two waves of row blocks; 2: past two
# waves where the last wave is more than half full, else the half-size last
# wave as the queue does).
#  1. bench/cuda_qmv_ab_device.sh: B0 and B1 under modes 0, 1 and 2, the
#     dispatch at M = 1, 2, 3, 4, 8, 16 and stock, eight shapes, 4 and 8 bits,
#     bfloat16 and float16;
#  2. qmm_sm80 beside the dispatch at M = 4, 8, 12, 16 on 4096 x 14336, 8 bits,
#     B0 and B1 (mode 2) in turn, twice;
#  3. B1's parity under mode 2: --quick at 4 and 8 bits, the ragged sweep and
#     the configuration matrix, every row against stock M = 1, each with its
#     negative control.
# Usage: bench/experiments/cuda_persistent_lean/time_device.sh B0 B1 OUT
set -uo pipefail
B0=$(realpath "$1"); B1=$(realpath "$2"); O=$3
H=$(dirname "$0")/../..
. "$H/cuda_device_env.sh"
record_env "$O"
status=0
wrap=$(mktemp -d)
for mode in 0 1 2; do
  bench_with_env "$wrap/m$mode" "$B1" QMV_PERSIST=$mode
done
bash "$H/cuda_qmv_ab_device.sh" "$O/ab" "$B0" "$wrap/m0" "$wrap/m1" "$wrap/m2" > /dev/null 2>&1 || status=1
export QMV_PERSIST=2
time_8bit_rings "$O/c" "$B0" "$B1" || status=1
harness_parity "$O/parity" "$B1" "4 8" || status=1
echo "status $status"
exit $status
