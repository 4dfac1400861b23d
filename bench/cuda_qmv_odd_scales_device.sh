#!/usr/bin/env bash
# One device call for scale rows that are not a multiple of 4 bytes (issue 7):
# gpt-oss's K = 2880 (45 groups of 64), SmolLM2's 960 and 576 (15 and 9).
#   1. parity of the matrix's part for those K (qmv_matrix --odd-only), then
#      the same under compute-sanitizer memcheck (scales and biases are
#      allocated to their exact size there, so a copy that read past a row's
#      last scale would be reported); skipped with the reason where the
#      machine's runtime has no sanitizer;
#   2. the whole configuration matrix, no timing (the ragged shapes' copies
#      changed with these);
#   3. the ragged sweep (qmv_bench --quick --ragged), and the dispatch against
#      stock at M = 1, 2, 4, 8, 16 on the real models' shapes (gpt-oss-20b's
#      attention: K x N = 2880 x 4096, 2880 x 512, 4096 x 2880) and on two
#      reference shapes (K = 3840: rows aligned to 8 bytes, with a residue;
#      K = 4096: whole tiles), bf16 and fp16, 4 and 8 bits.
# Run from the project root.
#   C: folder holding qmv_bench and qmv_matrix (`bench/cuda_qmv.py build`);
#   OUT: where the logs, CSVs and env.txt go.
# Usage: bench/cuda_qmv_odd_scales_device.sh C OUT
set -uo pipefail
. "$(dirname "$0")/cuda_device_env.sh"
begin_run "$1" "$2"

odd_scales_parity "$C" "$O" --odd-only || status=1

for shape in 2880,2880 2880,5760 960,2560 576,1536 2880,4096 2880,512 \
    4096,2880 3840,15360 4096,14336; do
  for bits in 4 8; do
    for dtype in 0 1; do
      time_dispatch "$C/qmv_bench" "$O/time" "$dtype,$bits,$shape" || status=1
    done
  done
done
python3 - "$O/time/cuda_qmv_time.csv" <<'EOF'
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
stock = {(r["shape"], r["dtype"], r["bits"], r["M"]): float(r["us"])
         for r in rows if r["impl"] == "stock_qmv"}
for r in rows:
    if r["impl"] != "streamed_auto":
        continue
    key = (r["shape"], r["dtype"], r["bits"], r["M"])
    s, s1 = stock[key], stock[key[:3] + ("1",)]
    print(f"{r['shape']:>10} {r['dtype']} {r['bits']}-bit M={r['M']:>2}: "
          f"stock {s:7.2f} us, dispatch {float(r['us']):7.2f} us "
          f"({s / float(r['us']):.2f}x; stock M=1 {s1:.2f})")
EOF
echo "status $status"
exit $status
