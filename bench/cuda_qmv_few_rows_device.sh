#!/usr/bin/env bash
# One device call for few rows at several vectors (issue 7): on SmolLM2's
# shapes (K x N = 576 x 192, 960 x 320, 576 x 576, 960 x 960, 576 x 1536,
# 1536 x 576), 2, 4 and 8 bits, bf16 and fp16, M = 4, 8 and 16: the dispatch
# and ring configurations of fewer rows per block, beside stock at the same
# M (qmv_bench --time; nothing is checked here, the parity runs check these
# kernels). SHAPES ("K,N ..."), BITS, MS and CONFIGS ("W,R,V,D ...", each
# timed at every M of MS; 0,0,0,0 is the dispatch, V = 0 the register ring)
# replace the defaults. A configuration a width does not take records a
# negative time.
# Run from the project root.
#   C: folder holding qmv_bench (`bench/cuda_qmv.py build`);
#   OUT: where cuda_qmv_time.csv and env.txt go.
# Usage: [SHAPES=...] [BITS=...] [MS=...] [CONFIGS=...]
#        bench/cuda_qmv_few_rows_device.sh C OUT
set -uo pipefail
. "$(dirname "$0")/cuda_device_env.sh"
begin_run "$1" "$2"
configs=""
for m in ${MS:-4 8 16}; do
  for c in ${CONFIGS:-0,0,0,0 2,2,4,8 4,2,4,4 2,4,4,6 8,2,4,4 4,4,4,4 4,2,8,3 \
      8,2,8,3 4,1,16,2}; do
    configs="$configs $c,$m"
  done
done
for shape in ${SHAPES:-576,192 960,320 576,576 960,960 576,1536 1536,576}; do
  for bits in ${BITS:-2 4 8}; do
    for dtype in 0 1; do
      # rc 1 where a configuration does not apply (V = 0 above 4 bits).
      # shellcheck disable=SC2086
      "$C/qmv_bench" --out "$O" --time "$dtype,$bits,$shape" $configs \
        > /dev/null 2>> "$O/stderr.txt"
      [ $? -le 1 ] || status=1
    done
  done
done
echo "status $status"
exit $status
