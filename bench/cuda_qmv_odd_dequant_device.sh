#!/usr/bin/env bash
# One device call for 3-, 5- and 6-bit weights (issue 7): their elements made
# in bfloat16 and float16 by odd_width_to() and their ring configurations.
#   1. odd_scales_parity (bench/cuda_device_env.sh) with --odd-time: the
#      configuration matrix's part for scale rows off 16 bytes with its
#      negative control and timing, that part under memcheck, the whole
#      matrix and the ragged sweep, into OUT/{odd,sanitizer,matrix,ragged};
#   2. with OLD builds: the dispatch of each OLD and of C, in turn and twice,
#      at 3, 5 and 6 bits on the widths sweep's shapes (Llama-3-8B's
#      4096 x 14336 and 14336 x 4096, gemma's 3840 x 15360 and gpt-oss-20b's
#      2880 x 5760), M = 1, 2, 3, 4, 8, 16, stock beside
#      (bench/cuda_qmv_ab_device.sh, into OUT/ab; OUT/ab/report.txt gives
#      each build's time over the first's).
# Run from the project root.
#   C: folder holding qmv_bench and qmv_matrix (`bench/cuda_qmv.py build`);
#   OUT: where the logs, CSVs and env.txt go;
#   OLD: earlier builds' folders, the first the reference.
# Usage: bench/cuda_qmv_odd_dequant_device.sh C OUT [OLD ...]
set -uo pipefail
. "$(dirname "$0")/cuda_device_env.sh"
begin_run "$1" "$2"
shift 2
odd_scales_parity "$C" "$O" --odd-time || status=1
if [ $# -gt 0 ]; then
  SHAPES="4096,14336 14336,4096 3840,15360 2880,5760" BITS="3 5 6" \
    bash bench/cuda_qmv_ab_device.sh "$O/ab" "$@" "$C" > /dev/null || status=1
  cat "$O/ab/report.txt"
fi
echo "status $status"
exit $status
