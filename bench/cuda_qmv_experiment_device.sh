#!/usr/bin/env bash
# An experiment on the streamed kernels measured in one device call
# (session 39; first for bench/experiments/cuda_fp16_in_turn). B0: the
# queue's harness, B1: the harness built with the experiment's diff (each
# qmv_bench and qmv_matrix).
#  1. bench/cuda_qmv_ab_device.sh at BITS (default 8): B0 and B1 at M = 1,
#     2, 3, 4, 8, 16 and stock, eight shapes, bfloat16 and float16;
#  2. the 8-bit rings of 8 and 4 vectors and qmm_sm80 at M = 4, 8, 12, 16
#     on 4096 x 14336, B0 and B1 in turn, twice;
#  3. B1's parity: --quick at BITS, the ragged sweep, the configuration
#     matrix and the matrix with infinities and NaNs (--nonfinite), every
#     row against stock M = 1, each with its negative control;
#  4. Nsight Compute on B1's open cells (bench/cuda_qmv_open_cells_device.sh;
#     NCU=0 leaves it out).
# Files over 4 MiB (the matrix's per-row CSVs) are deleted, the rest packed
# (pack_out): the verdicts are in each stdout.txt. Every step runs; the exit
# status is non-zero if any failed.
# Usage: [NCU=0] [BITS="4 8"] bench/cuda_qmv_experiment_device.sh B0 B1 OUT
set -uo pipefail
H=$(dirname "$0")
. "$H/cuda_device_env.sh"
B0=$1
begin_run "$2" "$3"
B1=$C
BITS=${BITS:-8} bash "$H/cuda_qmv_ab_device.sh" "$O/ab" "$B0" "$B1" > /dev/null 2>&1 || status=1
head -150 "$O/ab/report.txt"
time_8bit_rings "$O/c" "$B0" "$B1" || status=1
harness_parity "$O" "$B1" "${BITS:-8}" || status=1
d=$O/nonfinite
mkdir -p "$d"
"$B1/qmv_matrix" --nonfinite --out "$d" > "$d/stdout.txt" 2>&1 || status=1
grep -E "MATRIX PARITY|MISMATCH" "$d/stdout.txt" | head -5
if [ "${NCU:-1}" != 0 ]; then
  bash "$H/cuda_qmv_open_cells_device.sh" "$B1" "$O/ncu" > "$O/ncu_stdout.txt" 2>&1 || status=1
fi
find "$O" -type f -size +4M -print -delete
pack_out "$O"
echo "status $status"
exit $status
