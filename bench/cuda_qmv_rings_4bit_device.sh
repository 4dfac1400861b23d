#!/usr/bin/env bash
# The 4-bit rings of two and four vectors against the dispatch's pick at
# M = 2 and 4 (session 47: on the H200, 4-bit M = 2 on 4096 x 14336 took
# 25.0 us where 8-bit took 21.2, the reverse of an H100's 22.5 and 25.1).
# Each shape (SHAPES, "K,N ...", default the issue's three) runs bfloat16
# and float16, twice; OUT/report.txt gives each ring's median and its
# ratio to the dispatch's.
# Usage: [SHAPES="K,N ..."] bench/cuda_qmv_rings_4bit_device.sh C OUT
#   C: a folder holding the harness's qmv_bench
set -uo pipefail
C=$1
O=$2
mkdir -p "$O"
. "$(dirname "$0")/cuda_device_env.sh"
record_env "$O"
status=0
m2="0,0,0,0,2 8,4,2,3,2 4,4,2,4,2 8,2,2,4,2 4,2,2,8,2 2,4,2,8,2 16,2,2,2,2"
m4="0,0,0,0,4 8,4,4,3,4 4,4,4,4,4 8,2,4,4,4 4,2,4,4,4 2,4,4,6,4 2,2,4,8,4 8,4,4,2,4"
for pass in 1 2; do
  for s in ${SHAPES:-4096,14336 14336,4096 4096,4096}; do
    for d in 0 1; do
      # shellcheck disable=SC2086
      "$C/qmv_bench" --out "$O" --time "$d,4,$s" 0,0,0,0,1 $m2 $m4 \
        > /dev/null 2>> "$O/stderr.txt" || status=1
    done
  done
done
python3 - "$O/cuda_qmv_time.csv" > "$O/report.txt" <<'PY' || status=1
import collections, csv, statistics, sys

times = collections.defaultdict(list)
for r in csv.DictReader(open(sys.argv[1])):
    if r["impl"] not in ("streamed_auto", "streamed") or r["M"] == "1":
        continue
    ring = "auto" if r["impl"] == "streamed_auto" else ",".join(
        r[c] for c in ("W", "R", "V", "D"))
    times[(r["shape"], r["dtype"], r["M"], ring)].append(float(r["us"]))
med = {k: statistics.median(v) for k, v in times.items()}
for (shape, dtype, m, ring), us in sorted(med.items()):
    auto = med.get((shape, dtype, m, "auto"))
    if us < 0:  # the harness writes -1 for a launch that failed
        print(f"{shape} {dtype} M={m} ({ring}): failed")
    elif auto:
        print(f"{shape} {dtype} M={m} ({ring}): {us:.2f} us, {us / auto:.3f} of the dispatch")
PY
cat "$O/report.txt"
echo "status $status"
exit $status
