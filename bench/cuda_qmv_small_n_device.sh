#!/usr/bin/env bash
# One device call (issue 7): the streamed kernel's block shapes at M = 2..16
# on few rows. The dispatch's 4-bit blocks hold 32 rows (8 warps x 4 rows), so
# N = 1536 makes 48 blocks for 132 multiprocessors; this times the dispatch,
# stock at the same M and blocks of 4 to 32 rows on small and large shapes,
# bf16 and fp16, to pick where smaller blocks take over. Run from the project
# root.
#   C: folder holding qmv_bench (`bench/cuda_qmv.py build`);
#   OUT: where cuda_qmv_time.csv, the report and env.txt go.
# Usage: bench/cuda_qmv_small_n_device.sh C OUT [BITS]
set -uo pipefail
C=$1; O=$2; BITS=${3:-4}
mkdir -p "$O"
. "$(dirname "$0")/cuda_device_env.sh"
record_env "$O"

# W,R,V,D candidates per M (all in qmv_bench's QMV_STREAMED_CONFIGS).
declare -A CANDIDATES=(
  [2]="8,4,2,3 4,4,2,4 8,2,2,4 4,2,2,8 2,4,2,8 16,2,2,2"
  [4]="8,4,4,3 4,4,4,4 8,2,4,4 4,2,4,4 2,4,4,6 2,2,4,8 8,4,4,2"
  [8]="8,4,4,3 4,4,4,4 8,2,4,4 4,2,4,4 2,4,4,6 4,2,8,3 8,2,8,3"
  [16]="8,4,4,3 4,4,4,4 8,2,4,4 4,2,8,3 8,2,8,3 2,4,4,6 4,1,16,2"
)
status=0
for shape in 576,1536 960,2560 2880,2880 2880,5760 2048,8192 8192,2048 \
    4096,4096 4096,14336; do
  for dtype in 0 1; do
    args=()
    for m in 2 4 8 16; do
      args+=("0,0,0,0,$m")
      for c in ${CANDIDATES[$m]}; do args+=("$c,$m"); done
    done
    "$C/qmv_bench" --out "$O" --time "$dtype,$BITS,$shape" "${args[@]}" \
      > /dev/null 2>> "$O/stderr.txt" || status=1
  done
done
python3 - "$O/cuda_qmv_time.csv" <<'EOF' | tee "$O/report.txt"
import collections, csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
stock, auto = {}, {}
best = collections.defaultdict(list)
for r in rows:
    key = (r["shape"], r["dtype"], int(r["M"]))
    us = float(r["us"])
    if r["impl"] == "stock_qmv":
        stock[key] = us
    elif r["impl"] == "streamed_auto":
        auto[key] = us
    elif us > 0:
        rows_per_block = int(r["W"]) * int(r["R"])
        cfg = f"{r['W']},{r['R']},{r['V']},{r['D']}"
        best[key].append((us, cfg, rows_per_block))
for key in sorted(auto, key=lambda k: (k[0], k[1], k[2])):
    cands = sorted(best[key])
    line = " ".join(f"{c}:{us:.2f}" for us, c, _ in cands[:4])
    print(f"{key[0]:>10} {key[1]} M={key[2]:>2}: stock {stock[key]:7.2f} "
          f"dispatch {auto[key]:7.2f} ({stock[key] / auto[key]:.2f}x) | "
          f"best {line}")
EOF
echo "status $status"
exit $status
