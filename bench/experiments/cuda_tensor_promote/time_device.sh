#!/usr/bin/env bash
# x (and float16's w) promoted to float by the tensor cores at 8 bits
# (session 36, promote.diff), one device call. B0: the queue's harness
# (qmv_bench, qmv_matrix); B1: the harness built with promote.diff
# (qmv_bench, qmv_matrix, promote_check).
#  1. promote_check: every float16 and bfloat16 pattern through the mma
#     against the exact conversion (the premise; nothing else is worth
#     reading if it fails);
#  2. bench/cuda_qmv_ab_device.sh, 8 bits: B0, B1 (and the further builds
#     given after OUT) at M = 1, 2, 3, 4, 8, 16 and stock, eight shapes,
#     bfloat16 and float16;
#  3. the 8-bit rings of 8 and 4 vectors and qmm_sm80 at M = 4, 8, 12, 16
#     on 4096 x 14336, B0 and B1 in turn, twice;
#  4. B1's parity: --quick --bits 8, the ragged sweep and the configuration
#     matrix; then the matrix with infinities and NaNs (--nonfinite) on B1
#     and on B0 (the NaN rows that B1 computes again). Every row against
#     stock M = 1, each with its negative control.
#  5. Nsight Compute on B1's open cells (bench/cuda_qmv_open_cells_device.sh;
#     NCU=0 leaves it out).
# The exit status is non-zero if any step failed; every step runs.
# Usage: [NCU=0] bench/experiments/cuda_tensor_promote/time_device.sh B0 B1 OUT [B2 ...]
set -uo pipefail
H=$(dirname "$0")/../..
. "$H/cuda_device_env.sh"
B0=$1
begin_run "$2" "$3"
B1=$C
shift 3
"$B1/promote_check" | tee "$O/promote_check.txt" || status=1
BITS=8 bash "$H/cuda_qmv_ab_device.sh" "$O/ab" "$B0" "$B1" "$@" > /dev/null 2>&1 || status=1
head -150 "$O/ab/report.txt"
time_8bit_rings "$O/c" "$B0" "$B1" || status=1
harness_parity "$O" "$B1" "8" || status=1
for b in 1 0; do
  d=$O/nonfinite_b$b
  mkdir -p "$d"
  bin=$B1; [ "$b" = 0 ] && bin=$B0
  "$bin/qmv_matrix" --nonfinite --out "$d" > "$d/stdout.txt" 2>&1 || status=1
  grep -E "MATRIX PARITY|MISMATCH" "$d/stdout.txt" | head -5
done
if [ "${NCU:-1}" != 0 ]; then
  bash "$H/cuda_qmv_open_cells_device.sh" "$B1" "$O/ncu" > "$O/ncu_stdout.txt" 2>&1 || status=1
fi
echo "status $status"
exit $status
