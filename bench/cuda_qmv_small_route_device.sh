#!/usr/bin/env bash
# One device call (issue 7): where small products should go. On few rows and
# short k the streamed ring has a floor of about 3.5 us, which stock qmv
# beats at M = 1..2; this times stock, the dispatch and qmv_prefetch_kernel
# launched once per vector (V = 0, 2 and 4 warps; up to 4 bits) at M = 1, 2,
# 3, 4 on small shapes, with and without a rest of k and aligned scale rows,
# bf16 and fp16, 4 and 8 bits. Run from the project root.
#   C: folder holding qmv_bench (`bench/cuda_qmv.py build`);
#   OUT: where cuda_qmv_time.csv, the report and env.txt go.
# Usage: bench/cuda_qmv_small_route_device.sh C OUT
set -uo pipefail
. "$(dirname "$0")/cuda_device_env.sh"
begin_run "$1" "$2"
for shape in 512,1536 576,1536 960,2560 1024,1024 1024,4096 2048,2048 \
    2048,8192 2880,2880; do
  for bits in 4 8; do
    for dtype in 0 1; do
      args=()
      for m in 1 2 3 4; do
        args+=("0,0,0,0,$m" "2,1,0,2,$m" "4,1,0,2,$m")
      done
      # rc 1 where a configuration does not apply (V = 0 at 8 bits).
      "$C/qmv_bench" --out "$O" --time "$dtype,$bits,$shape" "${args[@]}" \
        > /dev/null 2>> "$O/stderr.txt"
      [ $? -le 1 ] || status=1
    done
  done
done
python3 - "$O/cuda_qmv_time.csv" <<'EOF' | tee "$O/report.txt"
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
t = {}
for r in rows:
    key = (r["shape"], r["dtype"], r["bits"], int(r["M"]))
    name = {"stock_qmv": "stock", "streamed_auto": "dispatch"}.get(
        r["impl"], f"pf{r['W']}")
    if r["impl"] != "read_roofline":
        t[key, name] = float(r["us"])
keys = sorted({k for k, _ in t}, key=lambda k: (k[2], k[0], k[1], k[3]))
for k in keys:
    s = t[k, "stock"]
    cells = [f"{n} {t[k, n]:6.2f} ({s / t[k, n]:.2f}x)"
             for n in ("dispatch", "pf2", "pf4") if t.get((k, n), -1) > 0]
    print(f"{k[0]:>10} {k[1]} {k[2]}-bit M={k[3]}: stock {s:6.2f} | "
          + " | ".join(cells))
EOF
echo "status $status"
exit $status
