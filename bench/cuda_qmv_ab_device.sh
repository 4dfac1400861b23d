#!/usr/bin/env bash
# Builds of the harness timed against each other in one device call: the
# dispatch (qmv_streamed as mlx::core::qmv picks it) at M = 1, 2, 3, 4, 8, 16
# and stock qmv, on the reference shapes and the real models' ones (or those
# given in SHAPES, "K,N ..."), bf16 and fp16, 4 and 8 bits (or the widths
# given in BITS, "3 5 6" say). Each shape runs
# every build in turn, PASSES times (default 2: launches with bimodal
# passes, such as 8 vectors on 4096 x 20480 on an H100, want more); the
# report gives, per product, the median of each build's passes and its
# ratio to the first build's, then the products whose passes spread more
# than 3% in some build (session 54: 5- and 6-bit M = 8 on 4096 x 20480 on
# an H100 runs about 54 or 57.5 us by process, in every build).
# Run from the project root.
#   OUT: where b0/, b1/, ... (CSVs), env.txt and report.txt go;
#   DIR...: folders holding qmv_bench (`bench/cuda_qmv.py build`), the first
#     the reference (e.g. the last session's build).
# Usage: [SHAPES="K,N ..."] [BITS="B ..."] [PASSES=N] bench/cuda_qmv_ab_device.sh OUT DIR0 DIR1 [DIR2 ...]
set -uo pipefail
O=$1; shift
builds=("$@")
. "$(dirname "$0")/cuda_device_env.sh"
record_env "$O"
status=0
ms="0,0,0,0,1 0,0,0,0,2 0,0,0,0,3 0,0,0,0,4 0,0,0,0,8 0,0,0,0,16"
shapes=${SHAPES:-"4096,14336 14336,4096 4096,4096 3840,15360 11008,4096 4096,6144 2880,4096 2880,2880"}
for shape in $shapes; do
  for bits in ${BITS:-4 8}; do
    for dtype in 0 1; do
      for _ in $(seq "${PASSES:-2}"); do
        for i in "${!builds[@]}"; do
          mkdir -p "$O/b$i"
          # shellcheck disable=SC2086
          "${builds[$i]}/qmv_bench" --out "$O/b$i" --time "$dtype,$bits,$shape" $ms \
            > /dev/null 2>> "$O/b$i/stderr.txt" || status=1
        done
      done
    done
  done
done
python3 - "$O" "${#builds[@]}" > "$O/report.txt" <<'EOF'
import csv, statistics, sys
from collections import defaultdict
out, count = sys.argv[1], int(sys.argv[2])
def load(i):
    d = defaultdict(list)
    for r in csv.DictReader(open(f"{out}/b{i}/cuda_qmv_time.csv")):
        if r["impl"] in ("streamed_auto", "stock_qmv"):
            key = (r["shape"], r["dtype"], r["bits"], r["impl"], int(r["M"]))
            d[key].append(float(r["us"]))
    return d
passes = [load(i) for i in range(count)]
runs = [{k: statistics.median(v) for k, v in p.items()} for p in passes]
print("shape dtype bits M: stock (b0) | dispatch us per build (b0 / bi)")
for k in sorted(k for k in runs[0] if k[3] == "streamed_auto"):
    s = runs[0].get(k[:3] + ("stock_qmv", k[4]))
    times = " ".join(
        f"{r[k]:7.2f} ({runs[0][k] / r[k]:.3f})" for r in runs if k in r
    )
    print(f"{k[0]:>10} {k[1]} {k[2]}-bit M={k[4]:>2}: stock {s:7.2f} | {times}")
# Launches whose passes (one process each) spread more than 3% in some build:
# their medians' ratios are not to be read as a difference between builds.
spread = [
    k for k in sorted(k for k in passes[0] if k[3] == "streamed_auto")
    if any(k in p and max(p[k]) > 1.03 * min(p[k]) for p in passes)
]
if spread:
    print("passes more than 3% apart (us, each build's passes in order):")
for k in spread:
    times = " | ".join(" ".join(f"{t:.2f}" for t in p[k]) for p in passes if k in p)
    print(f"  {k[0]} {k[1]} {k[2]} bits, {k[4]} vectors: {times}")
EOF
cat "$O/report.txt"
echo "status $status"
exit $status
