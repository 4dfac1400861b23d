#!/usr/bin/env bash
# Every 8-bit ring the harness instantiates, timed against the dispatch's
# pick and qmm_sm80 at M = 4, 8, 12, 16 (session 39): the dispatch tables
# for 8 bits were measured before the tensor-core promotion took a fifth
# of float16's instructions off, so its picks may no longer be the fastest.
# Each M takes the rings of V vectors with M / 4 <= V <= M (at most four
# blocks along the vectors, none mostly empty); every shape of SHAPES, in
# bfloat16 and float16, twice (time_shapes_in_turn). The report gives, per
# product, the dispatch, the fastest ring and qmm_sm80 (medians of the two
# passes). MS="1" (session 42) times M = 1 with the one-vector rings, and
# MS="2" (session 43) M = 2 with the rings of one and two vectors.
# BITS=4 (session 47) times 4-bit weights, whose rings of up to 4 vectors
# are the same instantiations (M = 1, 2 and 4 only: 4 bits has no 6-stage
# rings of 8 vectors).
# Usage: [SHAPES="K,N ..."] [MS="1 2 4 8 12 16"] [BITS=4] bench/cuda_qmv_configs_8bit_device.sh C OUT
#   C: a folder holding the harness's qmv_bench
set -uo pipefail
H=$(dirname "$0")
. "$H/cuda_device_env.sh"
begin_run "$1" "$2"
# The 8-bit rings of patched_qmv_streamed_configs (W, R, V, D), by V.
RINGS_2="16,2,2,2 2,4,2,8 4,2,2,8 4,4,2,4 8,2,2,4 8,4,2,3"
RINGS_4="2,2,4,8 2,4,4,6 4,2,4,4 4,4,4,4 8,2,4,4 8,4,4,2 8,4,4,3"
RINGS_8="2,2,8,6 4,2,8,3 4,2,8,4 4,2,8,6 8,2,8,2 8,2,8,3 8,2,8,4"
RINGS_16="4,1,16,2"
RINGS_1="16,1,1,4 16,2,1,4 2,4,1,8 4,2,1,8 4,4,1,4 4,4,1,6 4,4,1,8 8,1,1,8 8,2,1,8 8,4,1,4"
bits=${BITS:-8}
configs=""
for m in ${MS:-4 8 12 16}; do
  if [ "$bits" != 8 ] && { [ "$bits" != 4 ] || [ "$m" -gt 4 ]; }; then
    echo "cuda_qmv_configs_8bit: no rings for $bits bits at M = $m (BITS=4: MS 1, 2, 4)" >&2; exit 2
  fi
  case $m in
    1) rings=$RINGS_1 ;;
    2) rings="$RINGS_1 $RINGS_2" ;;
    4) rings="$RINGS_2 $RINGS_4" ;;
    8) rings="$RINGS_2 $RINGS_4 $RINGS_8" ;;
    12) rings="$RINGS_4 $RINGS_8" ;;
    16) rings="$RINGS_4 $RINGS_8 $RINGS_16" ;;
    *) echo "cuda_qmv_configs_8bit: no rings for M = $m (MS: 1, 2, 4, 8, 12, 16)" >&2; exit 2 ;;
  esac
  configs="$configs $(configs_at "0,0,0,0 $rings" "$m")"
done
for pass in 1 2; do
  time_shapes_in_turn "$O/t" "$bits" "${SHAPES:-4096,14336 14336,4096 4096,4096}" "$configs" "$C" || status=1
done
python3 - "$O/t0/cuda_qmv_time.csv" > "$O/report.txt" <<'PY'
import csv, statistics, sys
from collections import defaultdict
t = defaultdict(list)
for r in csv.DictReader(open(sys.argv[1])):
    if r["impl"] == "read_roofline":
        continue
    ring = r["impl"] if r["impl"] in ("streamed_auto", "qmm_sm80", "stock_qmv") else "{W},{R},{V},{D}".format(**r)
    t[(r["shape"], r["dtype"], int(r["M"]), ring)].append(float(r["us"]))
med = {k: statistics.median(v) for k, v in t.items() if float(min(v)) > 0}
print("product: dispatch us | fastest ring us (its time over the dispatch's) | qmm_sm80 us")
for shape, dtype, m in sorted({k[:3] for k in med if k[3] == "streamed_auto"}):
    rings = {k[3]: v for k, v in med.items() if k[:3] == (shape, dtype, m) and "," in k[3]}
    auto = med[(shape, dtype, m, "streamed_auto")]
    best = min(rings, key=rings.get)
    sm80 = med.get((shape, dtype, m, "qmm_sm80"), float("nan"))
    print(f"{shape} {dtype} M={m:2}: {auto:7.2f} | {best:>9} {rings[best]:7.2f} ({rings[best] / auto:.3f}) | {sm80:7.2f}")
PY
cat "$O/report.txt"
pack_out "$O"
echo "status $status"
exit $status
