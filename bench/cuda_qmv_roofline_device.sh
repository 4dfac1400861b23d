#!/usr/bin/env bash
# One device call for the read roofline (issue 7): for each shape x dtype x
# width of the sweep, the least time in which the H200 reads the bytes of
# the M = 1 product (w, scales, biases; best of 24 grid shapes, weights
# rotated beyond the L2), stock qmv at M = 1 and the patched dispatch at
# the given M, in one run (`qmv_bench --time`). Run from the project root.
#   C: folder holding qmv_bench (built by `bench/cuda_qmv.py build`);
#   OUT: where cuda_qmv_time.csv, the log and env.txt go.
# Usage: bench/cuda_qmv_roofline_device.sh C OUT [M ...]   (default M: 1 4)
set -uo pipefail
C=$1; O=$2; shift 2
MS=${*:-1 4}
mkdir -p "$O"
. "$(dirname "$0")/cuda_device_env.sh"
record_env "$O"
rc=0
for shape in 4096,14336 14336,4096 4096,4096; do
  for dtype in 0 1; do
    for bits in 4 8; do
      cfgs=""
      for m in $MS; do cfgs="$cfgs 0,0,0,0,$m"; done
      "$C/qmv_bench" --out "$O" --time "$dtype,$bits,$shape" $cfgs \
        >> "$O/time_log.txt" 2>&1 || rc=1
    done
  done
done
cat "$O/time_log.txt"
echo "roofline rc $rc"
exit $rc
