"""The 8-bit rings of one and two vectors against the dispatch at M = 1 and 2.

Reads cuda_qmv_time.csv files of bench/cuda_qmv_configs_8bit_device.sh
(MS="1 2"; medians of each product's passes) and prints, per product, each
ring's time over the dispatch's ("auto"), then, per M and side of N = 4096,
the rings by the geometric mean of that ratio, and the ratio of the ring the
dispatch's rule for blocks of 16 rows (session 43) picks over blocks of 8
rows (2, 4, V, 8), the rule before it, where the two differ.

Usage: python3 bench/cuda_qmv_rings_report.py CSV...
"""
from __future__ import annotations

import csv
import math
import statistics
import sys
from collections import defaultdict

import cuda_qmv_report

Key = tuple[str, str, int, str]

IGNORED = {"read_roofline", "qmm_sm80", "stock_qmv"}


def medians(paths: list[str]) -> dict[Key, float]:
    times: dict[Key, list[float]] = defaultdict(list)
    for path in paths:
        with open(path, newline="") as f:
            for r in csv.DictReader(f):
                if r["impl"] in IGNORED or float(r["us"]) <= 0:
                    continue
                ring = "auto" if r["impl"] == "streamed_auto" else "{W},{R},{V},{D}".format(**r)
                times[(r["shape"], r["dtype"], int(r["M"]), ring)].append(float(r["us"]))
    return {k: statistics.median(v) for k, v in times.items()}


def rows_16(m: int, n: int) -> bool:
    """Whether the dispatch (bench/cuda_qmv_report.py's copy of
    dispatch_streamed_tile) gives m 8-bit vectors on n rows blocks of 4
    warps of 4 rows."""
    return cuda_qmv_report.dispatch(8, m, n=n)[:3] == (4, 4, m)


def geomean(xs: list[float]) -> float:
    return math.exp(sum(map(math.log, xs)) / len(xs))


def main(paths: list[str]) -> int:
    med = medians(paths)
    products = sorted({k[:3] for k in med if k[3] == "auto"},
                      key=lambda p: (p[2], int(p[0].split("x")[1]), int(p[0].split("x")[0]), p[1]))
    if not products:
        print("no dispatch rows in", " ".join(paths))
        return 1
    print("Each ring's time over the dispatch's (medians):")
    for shape, dtype, m in products:
        auto = med[(shape, dtype, m, "auto")]
        rings = sorted((v / auto, k[3]) for k, v in med.items() if k[:3] == (shape, dtype, m) and k[3] != "auto")
        best = " ".join(f"{ring} {x:.3f}" for x, ring in rings[:4])
        print(f"  {shape:11} {dtype} M={m}: dispatch {auto:7.2f} us | {best}")
    print("Rings by geometric mean of their time over the dispatch's:")
    for m in sorted({p[2] for p in products}):
        for side, wide in (("N >= 4096", True), ("N < 4096", False)):
            group = [p for p in products if p[2] == m and (int(p[0].split("x")[1]) >= 4096) == wide]
            if not group:
                continue
            rings = {k[3] for k in med if k[2] == m and k[3] != "auto"}
            ranked = []
            for ring in rings:
                xs = [med[(s, d, m, ring)] / med[(s, d, m, "auto")] for s, d, _ in group if (s, d, m, ring) in med]
                if len(xs) == len(group):
                    ranked.append((geomean(xs), min(xs), max(xs), ring))
            print(f"  M={m} {side} ({len(group)} products):")
            for g, lo, hi, ring in sorted(ranked)[:4]:
                print(f"    {ring:9} {g:.3f} ({lo:.3f}-{hi:.3f})")
    print("Blocks of 16 rows (the rule) over blocks of 8 (2, 4, V, 8), where the rule takes them:")
    for m in sorted({p[2] for p in products}):
        xs = []
        for shape, dtype, pm in products:
            n = int(shape.split("x")[1])
            if pm != m or not rows_16(m, n):
                continue
            new, old = med.get((shape, dtype, m, f"4,4,{m},4")), med.get((shape, dtype, m, f"2,4,{m},8"))
            if new and old:
                xs.append(new / old)
                print(f"  {shape:11} {dtype} M={m}: {old:7.2f} -> {new:7.2f} us ({new / old:.3f})")
        if xs:
            print(f"  M={m}: {len(xs)} products, {min(xs):.3f}-{max(xs):.3f}, geometric mean {geomean(xs):.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
