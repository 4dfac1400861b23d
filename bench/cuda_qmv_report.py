#!/usr/bin/env python3
"""Markdown tables from a cuda_qmv run: cuda_qmv_timing.csv (harness) and
mlx_wheel.csv (stock wheel, optional), as written by cuda_qmv_device.sh.

Usage: python3 bench/cuda_qmv_report.py RESULTS_DIR
"""
from __future__ import annotations

import csv
import sys
from pathlib import Path

SHAPES = ["4096x14336", "14336x4096", "4096x4096"]


def main(argv: list[str]) -> int:
    d = Path(argv[1])
    rows = list(csv.DictReader(open(d / "cuda_qmv_timing.csv")))
    wheel = {}
    if (d / "mlx_wheel.csv").is_file():
        for r in csv.DictReader(open(d / "mlx_wheel.csv")):
            wheel[(r["shape"], r["dtype"], r["bits"], int(r["M"]))] = r

    def t(shape, dt, bits, impl, m):
        c = [float(r["us"]) for r in rows if r["shape"] == shape and r["dtype"] == dt
             and r["bits"] == bits and r["impl"] == impl and int(r["M"]) == m]
        return c[0] if c else None

    def best(shape, dt, bits, m):
        c = [(float(r["us"]), r) for r in rows if r["shape"] == shape and r["dtype"] == dt
             and r["bits"] == bits
             and r["impl"] in ("streamed", "streamed_smem", "streamed_packed")
             and int(r["M"]) == m]
        return min(c, key=lambda x: x[0]) if c else None

    print("Kernel times in us (harness, CUDA-graph replay over rotated weights; "
          "streamed = the patch's dispatch; x = speed-up over stock M = 1)\n")
    print("| K x N | dtype | bits | stock M=1 | streamed M=1 | M=2 | M=4 | M=8 | M=16 "
          "| stock qmv M=4 | M=16 | wheel qmm_sm80 M=8 | M=16 |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for shape in SHAPES:
        for dt in ("bf16", "fp16"):
            for bits in ("4", "8"):
                s1 = t(shape, dt, bits, "stock_qmv", 1)
                cells = []
                for m in (1, 2, 4, 8, 16):
                    a = t(shape, dt, bits, "streamed_auto", m)
                    cells.append(f"{a:.1f} ({s1 / a:.2f}x)" if m == 1 else f"{a:.1f}")
                w = [wheel.get((shape, dt, bits, m)) for m in (8, 16)]
                wcells = [f"{float(r['us']):.1f}" if r else "" for r in w]
                print(f"| {shape} | {dt} | {bits} | {s1:.1f} | " + " | ".join(cells)
                      + f" | {t(shape, dt, bits, 'stock_qmv', 4):.1f}"
                      + f" | {t(shape, dt, bits, 'stock_qmv', 16):.1f} | "
                      + " | ".join(wcells) + " |")
    print("\nBest explicit configuration per M (us; reg = the patch's kernel with R rows x "
          "V vectors per warp, packed = packed-fma dequant experiment, smem = "
          "shared-memory experiment with W warps per block):\n")
    print("| K x N | dtype | bits | M=1 | M=4 | M=8 | M=16 |")
    print("|---|---|---|---|---|---|---|")
    for shape in SHAPES:
        for dt in ("bf16", "fp16"):
            for bits in ("4", "8"):
                cells = []
                for m in (1, 4, 8, 16):
                    b = best(shape, dt, bits, m)
                    if b is None:
                        cells.append("")
                        continue
                    us, r = b
                    if r["impl"] == "streamed":
                        cells.append(f"{us:.1f} reg R{r['R']}V{r['V']}")
                    elif r["impl"] == "streamed_packed":
                        cells.append(f"{us:.1f} packed R{r['R']}V{r['V']}")
                    else:
                        cells.append(f"{us:.1f} smem W{r['G']}R{r['R']}V{r['V']}")
                print(f"| {shape} | {dt} | {bits} | " + " | ".join(cells) + " |")
    if wheel:
        print("\nStock wheel (mx.quantized_matmul, wall time per product over a lazily "
              "built batch; rows identical to M = 1 / M):\n")
        print("| K x N | dtype | bits | M=1 | M=2 | M=4 | M=7 | M=8 | M=16 |")
        print("|---|---|---|---|---|---|---|---|---|")
        for shape in SHAPES:
            for dt in ("bf16", "fp16"):
                for bits in ("4", "8"):
                    cells = []
                    for m in (1, 2, 4, 7, 8, 16):
                        r = wheel.get((shape, dt, bits, m))
                        cells.append(f"{float(r['us']):.1f} ({r['rows_identical_to_M1']}/{m})" if r else "")
                    print(f"| {shape} | {dt} | {bits} | " + " | ".join(cells) + " |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
