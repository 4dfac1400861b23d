#!/usr/bin/env bash
# One device call for the ragged sweep with its negative control (issue 7):
# `qmv_bench --quick --ragged --bits B` for each width B, into OUT/bB. Each
# run checks every instantiated configuration (and its forced half-size
# blocks) at M = 1..16 on 8 shapes, bf16 and fp16, and the batched rows
# (B = 3, per batch and broadcast), bitwise against stock M = 1, and per
# shape, dtype and width (and per batched K) the other summation order
# (stock_qmv_other_order) must be found different.
# Run from the project root.
#   C: folder holding qmv_bench (`bench/cuda_qmv.py build`);
#   OUT: where bB/ and env.txt go;
#   BITS: the widths (default "4 8 2 3 5 6"; `--bits` takes one at a time).
# Usage: bench/cuda_qmv_ragged_device.sh C OUT [BITS]
set -uo pipefail
. "$(dirname "$0")/cuda_device_env.sh"
begin_run "$1" "$2"
for bits in ${3:-4 8 2 3 5 6}; do
  mkdir -p "$O/b$bits"
  start=$(date +%s)
  timeout 280 "$C/qmv_bench" --quick --ragged --bits "$bits" --out "$O/b$bits" \
    > "$O/b$bits/stdout.txt" 2>&1 || status=1
  echo "$bits-bit: $(($(date +%s) - start)) s"
  grep -E "PARITY|MISMATCH|CONTROL" "$O/b$bits/stdout.txt" | head -8
done
exit $status
