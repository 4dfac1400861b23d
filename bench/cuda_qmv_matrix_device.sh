#!/usr/bin/env bash
# One device call for the configuration matrix (issue 7): parity of every
# dtype, affine width and group size and fp mode on aligned and ragged
# shapes, with the negative control, then the timing of each width and mode
# on 4096 x 14336 (cuda/qmv_matrix.cu). Run from the project root.
#   C: folder holding qmv_matrix (built by `bench/cuda_qmv.py build`);
#   OUT: where the log, the two CSVs and env.txt go.
# Usage: bench/cuda_qmv_matrix_device.sh C OUT [--no-time]
set -uo pipefail
C=$1; O=$2; shift 2
mkdir -p "$O"
. "$(dirname "$0")/cuda_device_env.sh"
record_env "$O"
"$C/qmv_matrix" --out "$O" "$@" > "$O/stdout.txt" 2>&1
rc=$?
grep -E "^(device|MATRIX|CONTROL|MISMATCH|timing|bf16|fp16)" "$O/stdout.txt"
echo "qmv_matrix rc $rc"
exit $rc
