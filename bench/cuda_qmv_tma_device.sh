#!/usr/bin/env bash
# The ring filled by the tensor memory accelerator (qmv_streamed_tma_kernel,
# session 24), in one device call: parity first (qmv_bench's own check of
# every instantiated configuration at 8 bits, the TMA ones included, and the
# configuration matrix, where the dispatch takes the TMA ring for one 8-bit
# vector), then the 8-bit M = 1 configurations timed beside the register
# ring's (2, 4, 1, 8), the dispatch and stock, twice each, and a table of
# medians (us) per shape and dtype. TMA configurations are W,R,V,D with
# D = 1000 x sync mode + 100 x tiles per stage + stages (sync mode 0: a
# block barrier per stage, thread 0 copies; 1: the copying warp rotates; 2:
# no block barrier, per-slot empty barriers). Run from the project root.
#   C: folder holding qmv_bench and qmv_matrix (`bench/cuda_qmv.py build`);
#   OUT: where the logs, CSVs, env.txt and table.txt go.
# CONFIGS (W,R,V,D,M ...) replaces the configurations timed (by default
# call 3's, those the experiment's harness.diff instantiates).
# Usage: [CONFIGS=...] bench/cuda_qmv_tma_device.sh C OUT
set -uo pipefail
C=$1; O=$2
mkdir -p "$O/parity" "$O/matrix"
. "$(dirname "$0")/cuda_device_env.sh"
record_env "$O"
status=0
timeout 240 "$C/qmv_bench" --quick --bits 8 --out "$O/parity" \
  > "$O/parity/stdout.txt" 2>&1 || status=1
grep -E "PARITY|MISMATCH|control|failed" "$O/parity/stdout.txt" | head -20
timeout 200 "$C/qmv_matrix" --out "$O/matrix" --no-time \
  > "$O/matrix/stdout.txt" 2>&1 || status=1
grep -E "^(MATRIX|CONTROL|MISMATCH)" "$O/matrix/stdout.txt" | head -20
C8=${CONFIGS:-"2,4,1,8,1 0,0,0,0,1 2,4,1,403,1 2,4,1,1403,1 2,4,1,1404,1
2,4,1,1206,1 2,4,1,1208,1 4,2,1,1402,1 4,2,1,1404,1 4,2,1,1206,1 2,4,1,1802,1"}
for pass in 1 2; do
  for s in 0,8,14336,4096 1,8,14336,4096 0,8,4096,14336 1,8,4096,14336 \
      0,8,4096,4096 1,8,4096,4096 0,8,4096,6144; do
    # shellcheck disable=SC2086
    "$C/qmv_bench" --out "$O" --time "$s" $C8 >> "$O/time_log.txt" 2>&1 || status=1
  done
done
python3 "$(dirname "$0")/cuda_qmv_medians.py" "$O/cuda_qmv_time.csv" > "$O/table.txt"
cat "$O/table.txt"
exit $status
