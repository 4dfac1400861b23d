#!/usr/bin/env bash
# One device call for 3- and 5-bit weights on rows of K = 64 x an odd number
# (gpt-oss's 2880, SmolLM2's 960 and 576), whose rows of w start 8 bytes off
# 16 and which the ring copies in halves of 8 bytes (issue 7):
#   1. the configuration matrix's part for those K (qmv_matrix --odd-time):
#      parity of every dtype, width and group size, with the negative control,
#      then stock at M = 1, 2, 4, 8, 16 and the dispatch timed on gpt-oss-20b's
#      and SmolLM2-135M's and -360M's shapes and on 3840 x 15360, at 2, 3, 4,
#      5, 6 and 8 bits (group 64) and 3 and 5 bits (group 32), bf16 and fp16;
#   2. that part under compute-sanitizer memcheck (scales, biases and the
#      streamed launches' w allocated to their exact size);
#   3. the whole configuration matrix, no timing, and the ragged sweep
#      (qmv_bench --quick --ragged);
#   4. with OLD (an earlier harness build): the 2-bit dispatch at M = 1, 2,
#      4, 8, 16 on 3840 x 15360 (rows on 16 bytes with a rest of k) with
#      OLD's qmv_bench and C's, in turn, twice.
# Run from the project root.
#   C: folder holding qmv_bench and qmv_matrix (`bench/cuda_qmv.py build`);
#   OUT: where the logs, CSVs and env.txt go.
# Usage: bench/cuda_qmv_odd_widths_device.sh C OUT [OLD]
set -uo pipefail
. "$(dirname "$0")/cuda_device_env.sh"
begin_run "$1" "$2"

odd_scales_parity "$C" "$O" --odd-time || status=1
grep -E "^(timing|bf16|fp16)" "$O/odd/stdout.txt"

if [ -n "${3:-}" ]; then
  for rep in 1 2; do
    for build in old new; do
      b=$C; [ "$build" = old ] && b=$3
      for dtype in 0 1; do
        time_dispatch "$b/qmv_bench" "$O/ab/$build$rep" "$dtype,2,3840,15360" ||
          status=1
      done
    done
  done
  python3 - "$O/ab" <<'PY'
import csv, statistics, sys
from pathlib import Path
t = {}
for f in Path(sys.argv[1]).glob("*/cuda_qmv_time.csv"):
    build = f.parent.name[:3]
    for r in csv.DictReader(open(f)):
        if r["impl"] == "streamed_auto":
            t.setdefault((r["dtype"], int(r["M"]), build), []).append(float(r["us"]))
for (dtype, m, build) in sorted(k for k in t if k[2] == "new"):
    old = statistics.median(t[(dtype, m, "old")])
    new = statistics.median(t[(dtype, m, "new")])
    print(f"3840x15360 {dtype} 2-bit M={m:>2}: old {old:7.2f} us, new {new:7.2f} us "
          f"(new / old {new / old:.3f})")
PY
fi
echo "status $status"
exit $status
