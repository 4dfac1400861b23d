#!/usr/bin/env bash
# The split tile loop without the loop over row blocks (session 33), one
# device call. B0: the queue's harness; BA: the queue with split.diff (the
# tile loop split as in queue.diff, one row block per block, launched with
# QMV_PERSIST=0); BM: the queue with queue.diff under QMV_PERSIST=0 and 2.
#  1. bench/cuda_qmv_ab_device.sh: B0, BA, BM (0), BM (2) at M = 1, 2, 3, 4,
#     8, 16 and stock, eight shapes, 4 and 8 bits, bfloat16 and float16;
#  2. BA's parity: --quick at 8 bits, every row against stock M = 1, with its
#     negative control.
# Usage: bench/experiments/cuda_persistent_lean/split_device.sh B0 BA BM OUT
set -uo pipefail
B0=$(realpath "$1"); BA=$(realpath "$2"); BM=$(realpath "$3"); O=$4
H=$(dirname "$0")/../..
. "$H/cuda_device_env.sh"
record_env "$O"
status=0
wrap=$(mktemp -d)
bench_with_env "$wrap/a0" "$BA" QMV_PERSIST=0
bench_with_env "$wrap/m0" "$BM" QMV_PERSIST=0
bench_with_env "$wrap/m2" "$BM" QMV_PERSIST=2
bash "$H/cuda_qmv_ab_device.sh" "$O/ab" "$B0" "$wrap/a0" "$wrap/m0" "$wrap/m2" > /dev/null 2>&1 || status=1
mkdir -p "$O/parity/quick8"
QMV_PERSIST=0 "$BA/qmv_bench" --quick --bits 8 --out "$O/parity/quick8" > "$O/parity/quick8/stdout.txt" 2>&1 || status=1
grep -E "PARITY|MISMATCH" "$O/parity/quick8/stdout.txt" | head -5
echo "status $status"
exit $status
