#!/usr/bin/env bash
# One device call for the ring's last wave (issue 7): launch_qmv_streamed runs
# the rows of a partial last wave of at most half the device's blocks as twice
# as many blocks of half as many rows per warp (qmv_streamed_full_blocks).
#   parity: the ragged sweep and the quick sweep (qmv_bench --quick [--ragged];
#     every instantiated (W, R, V, D) also with the last half of its row blocks
#     forced to half size, QMV_TAIL_HALF), the configuration matrix (B = 1
#     and B = 3 also forced), no timing, and its part for unaligned scale rows
#     (K = 2880, 960, 576) under compute-sanitizer memcheck;
#   time: the dispatch's configuration at M = 1, 2, 3, 4, 6, 8, 12, 16 with the
#     last wave as picked (impl streamed) and with every block at full size
#     (streamed_no_tail), beside stock at the same M, on shapes whose waves
#     split (4096 x 14336: 3.39 waves of 8-row blocks; 5120 x 13824, 4096 x
#     6144, 3584 x 18944) and on ones that do not (14336 x 4096 and
#     4096 x 4096: one wave; 2880 x 4096); bf16 and fp16, 4 and 8 bits.
# Run from the project root.
#   C: folder holding qmv_bench and qmv_matrix (`bench/cuda_qmv.py build`);
#   OUT: where the logs, CSVs and env.txt go.
# Usage: bench/cuda_qmv_tail_device.sh C OUT [parity] [time]
set -uo pipefail
C=$1; O=$2; shift 2
parts=${*:-parity time}
. "$(dirname "$0")/cuda_device_env.sh"
record_env "$O"
status=0

if [[ " $parts " == *" parity "* ]]; then
  mkdir -p "$O/ragged" "$O/quick" "$O/matrix" "$O/sanitizer"
  "$C/qmv_bench" --quick --ragged --out "$O/ragged" > "$O/ragged/stdout.txt" 2>&1 || status=1
  grep -E "PARITY|MISMATCH" "$O/ragged/stdout.txt" | head -5
  "$C/qmv_bench" --quick --out "$O/quick" > "$O/quick/stdout.txt" 2>&1 || status=1
  grep -E "PARITY|MISMATCH" "$O/quick/stdout.txt" | head -5
  bash bench/cuda_qmv_matrix_device.sh "$C" "$O/matrix" --no-time || status=1
  memcheck_odd_scales "$C" "$O/sanitizer"
fi

if [[ " $parts " == *" time "* ]]; then
  mkdir -p "$O/time"
  for shape in 4096,14336 5120,13824 4096,6144 3584,18944 14336,4096 4096,4096 \
      2880,4096; do
    for bits in 4 8; do
      for dtype in 0 1; do
        k=${shape%,*}; n=${shape#*,}
        configs=$(python3 bench/cuda_qmv_report.py --tail-configs "$bits" "$k" "$n")
        "$C/qmv_bench" --out "$O/time" --time "$dtype,$bits,$shape" $configs \
          > /dev/null 2>> "$O/time/stderr.txt" || status=1
      done
    done
  done
  python3 bench/cuda_qmv_report.py --tail "$O/time/cuda_qmv_time.csv" \
    | tee "$O/time/report.txt"
fi
echo "status $status"
exit $status
