#!/usr/bin/env python3
"""The median time (us) of each configuration per product in a
`qmv_bench --time` CSV, as a table: one row per configuration (W,R,V,D;
"stock", "read" for the read roofline, "dispatch", " no tail" where every
block ran at full size), one column per shape and dtype.

Usage: cuda_qmv_medians.py CUDA_QMV_TIME_CSV
"""
from __future__ import annotations

import csv
import statistics
import sys
from collections import defaultdict

NAMES = {"stock_qmv": "stock", "read_roofline": "read", "streamed_auto": "dispatch"}


def label(row: dict[str, str]) -> str:
    if row["impl"] in NAMES:
        return NAMES[row["impl"]]
    tail = " no tail" if row["impl"] == "streamed_no_tail" else ""
    return f"{row['W']},{row['R']},{row['V']},{row['D']}{tail}"


def table(path: str) -> str:
    times: dict[tuple[str, str], list[float]] = defaultdict(list)
    with open(path, newline="") as f:
        for row in csv.DictReader(f):
            times[(f"{row['shape']} {row['dtype']}", label(row))].append(float(row["us"]))
    shapes = sorted({s for s, _ in times})
    configs = sorted({c for _, c in times})
    lines = ["configuration | " + " | ".join(shapes)]
    for c in configs:
        lines.append(c + " | " + " | ".join(
            f"{statistics.median(times[(s, c)]):.2f}" if (s, c) in times else "-" for s in shapes))
    return "\n".join(lines)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        print(__doc__.rsplit("Usage: ", 1)[1].strip(), file=sys.stderr)
        sys.exit(2)
    print(table(sys.argv[1]))
