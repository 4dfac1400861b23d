#!/usr/bin/env python3
"""Tables of bench/cuda_qmm_sm80_device.sh's output.

1. Per shape, dtype and width: the streamed dispatch at M = 1..16 and the
   pin's qmm_sm80 at M = 4..16, timed in the same CUDA graphs
   (OUT/cuda_qmv_time.csv), with the dispatch's time over qmm_sm80's.
2. Nsight Compute kernel times, one launch each: the harness's stock M = 1,
   dispatch and qmm_sm80 at M = 8 and 16 (OUT/harness_ncu_D_B_K_N.csv, one
   per problem), beside the stock wheel's products run one at a time
   (OUT/wheel_kernels.csv).
3. Batched products, where the run timed the batched specs (auto,M,B and
   sm80,M,B: B batches of M vectors over broadcast weights, as batched
   decoding gives them; auto,M,B,1 and sm80,M,B,1: over weights of their
   own per batch): per product the dispatch and qmm_sm80 in the same
   graphs, their ratio, and for broadcast weights qmm_sm80 on the same
   M * B vectors as one batch beside.

With --pr, the pull request's two tables (docs/benchmarks.md, "Main vs this
patch series") from one or more runs (the median of their times): main's
qmv (stock, launched once per vector) over the dispatch at M = 1, 2, 4 and
6, and qmm_sm80 over the dispatch at M = 8, 12 and 16 where patch 0011's
rule takes qmv on a device of --sms multiprocessors.

Usage: python3 bench/cuda_qmm_sm80_report.py OUT
       python3 bench/cuda_qmm_sm80_report.py --pr [--sms 132] OUT [OUT ...]
"""
from __future__ import annotations

import csv
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from cuda_mlx_route_check import rule_takes_qmv  # noqa: E402
from cuda_qmm_wheel_kernels import ncu_durations  # noqa: E402

MS = (1, 2, 4, 8, 12, 16)
SM80_MS = (4, 8, 12, 16)
# The kernels of one `qmv_bench --profile DTYPE,BITS,K,N 0,0,0,0,8
# 0,0,0,0,16 sm80,8 sm80,16` process, in launch order.
PROFILE = ("stock M=1", "dispatch M=8", "dispatch M=16", "qmm_sm80 M=8", "qmm_sm80 M=16")
PROFILED = [(s, d, b) for s in ("4096x14336", "14336x4096", "4096x4096")
            for d in ("bf16", "fp16") for b in (4, 8)]
DTYPES = {"bf16": 0, "fp16": 1}


def profile_file(out: Path, shape: str, dtype: str, bits: int) -> Path:
    """The device script's ncu CSV of one problem."""
    return out / f"harness_ncu_{DTYPES[dtype]}_{bits}_{shape.replace('x', '_')}.csv"


def graph_table(rows: list[dict]) -> str:
    t: dict[tuple, dict[str, float]] = {}
    for r in rows:
        key = (r["shape"], r["dtype"], int(r["bits"]))
        impl, m = r["impl"], int(r["M"])
        if impl == "streamed_auto":
            t.setdefault(key, {})[f"d{m}"] = float(r["us"])
        elif impl == "qmm_sm80":
            t.setdefault(key, {})[f"q{m}"] = float(r["us"])
        elif impl == "stock_qmv" and m == 1:
            t.setdefault(key, {})["s1"] = float(r["us"])
    head = (["K x N", "dtype", "bits", "stock M=1"] + [f"M={m}" for m in MS]
            + [f"sm80 M={m}" for m in SM80_MS] + ["d/sm80 M=8", "M=12", "M=16"])
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]

    def f(v: float | None) -> str:
        return "-" if v is None else f"{v:.1f}"

    def order(key: tuple) -> tuple:
        k, n = (int(v) for v in key[0].split("x"))
        return (k, n, key[1], key[2])

    for key in sorted(t, key=order):
        v = t[key]
        cells = [key[0], key[1], str(key[2]), f(v.get("s1"))]
        cells += [f(v.get(f"d{m}")) for m in MS] + [f(v.get(f"q{m}")) for m in SM80_MS]
        for m in (8, 12, 16):
            d, q = v.get(f"d{m}"), v.get(f"q{m}")
            cells.append("-" if d is None or q is None else f"{d / q:.2f}")
        out.append("| " + " | ".join(cells) + " |")
    return "\n".join(out) + "\n"


def batched_table(rows: list[dict]) -> str:
    """The batched products (impl streamed_auto_bB / qmm_sm80_bB, and
    *_bBw for weights per batch), one line each; empty where the run timed
    none."""
    t: dict[tuple, dict[str, float]] = {}
    single: dict[tuple, float] = {}
    for r in rows:
        impl, m, us = r["impl"], int(r["M"]), float(r["us"])
        key = (r["shape"], r["dtype"], int(r["bits"]))
        for name, tag in (("streamed_auto_b", "d"), ("qmm_sm80_b", "q")):
            if impl.startswith(name):
                rest = impl[len(name):]
                own = rest.endswith("w")
                b = int(rest.removesuffix("w"))
                t.setdefault(key + (m, b, own), {})[tag] = us
        if impl == "qmm_sm80":
            single[key + (m,)] = us
    if not t:
        return ""
    head = ["K x N", "dtype", "bits", "M", "B", "weights", "dispatch", "qmm_sm80",
            "dispatch / qmm_sm80", "qmm_sm80 on M x B vectors, one batch"]
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]

    def order(key: tuple) -> tuple:
        k, n = (int(v) for v in key[0].split("x"))
        return (k, n, key[1], key[2], key[5], key[3] * key[4], key[4])

    for key in sorted(t, key=order):
        d, q = t[key].get("d"), t[key].get("q")
        one = None if key[5] else single.get(key[:3] + (key[3] * key[4],))
        out.append("| " + " | ".join([
            key[0], key[1], str(key[2]), str(key[3]), str(key[4]),
            "per batch" if key[5] else "broadcast",
            "-" if d is None else f"{d:.1f}", "-" if q is None else f"{q:.1f}",
            "-" if d is None or q is None else f"{d / q:.2f}",
            "-" if one is None else f"{one:.1f}"]) + " |")
    return "\n".join(out) + "\n"


def ncu_table(out: Path, wheel: list[dict]) -> str:
    w = {(r["shape"], r["dtype"], int(r["bits"]), int(r["M"])): float(r["median_us"])
         for r in wheel}
    head = ["K x N", "dtype", "bits", "stock M=1", "wheel qmv M=1", "dispatch M=8",
            "qmm_sm80 M=8", "wheel qmm_sm80 M=8", "dispatch M=16", "qmm_sm80 M=16",
            "wheel qmm_sm80 M=16"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for shape, dt, bits in PROFILED:
        f = profile_file(out, shape, dt, bits)
        ks = ncu_durations(f.read_text())
        if len(ks) != len(PROFILE):
            raise SystemExit(f"{f}: {len(ks)} kernels, expected {len(PROFILE)}")
        us = dict(zip(PROFILE, (u for _, u in ks)))

        def wf(m: int) -> str:
            v = w.get((shape, dt, bits, m))
            return "-" if v is None else f"{v:.1f}"

        lines.append("| " + " | ".join([
            shape, dt, str(bits), f"{us['stock M=1']:.1f}", wf(1),
            f"{us['dispatch M=8']:.1f}", f"{us['qmm_sm80 M=8']:.1f}", wf(8),
            f"{us['dispatch M=16']:.1f}", f"{us['qmm_sm80 M=16']:.1f}", wf(16)]) + " |")
    return "\n".join(lines) + "\n"


def pr_tables(runs: list[list[dict]], sms: int = 132) -> str:
    """The pull request's tables: per product the median over `runs` of
    main's time (stock_qmv at M) and the dispatch's (streamed_auto), then of
    qmm_sm80's and the dispatch's at 8 to 16 vectors where patch 0011 takes
    qmv, in the order the first run timed them. A product missing from a run
    is left out of its median; one that no run timed is a "-", and a column
    of M = 1 to 6 that no run timed is left out."""
    times: dict[tuple, list[float]] = {}
    for rows in runs:
        for r in rows:
            if r["impl"] in ("stock_qmv", "streamed_auto", "qmm_sm80"):
                key = (r["shape"], r["dtype"], int(r["bits"]), r["impl"], int(r["M"]))
                times.setdefault(key, []).append(float(r["us"]))
    us = {k: statistics.median(v) for k, v in times.items()}
    products = list(dict.fromkeys(k[:3] for k in us))

    def pair(p: tuple, base: str, m: int) -> str:
        b, d = us.get(p + (base, m)), us.get(p + ("streamed_auto", m))
        return "-" if b is None or d is None else f"{b:.1f} / {d:.1f} ({b / d:.2f}x)"

    def head(ms: tuple[int, ...]) -> list[str]:
        cells = ["K x N", "dtype", "bits"] + [f"M = {m}" for m in ms]
        return ["| " + " | ".join(cells) + " |", "|" + "---|" * len(cells)]

    def row(p: tuple, base: str, ms: tuple[int, ...]) -> str:
        cells = [p[0].replace("x", " x "), p[1], str(p[2])]
        return "| " + " | ".join(cells + [pair(p, base, m) for m in ms]) + " |"

    # The columns of M = 1, 2, 4 and 6 that some run timed.
    small = tuple(m for m in (1, 2, 4, 6) if any(k[3:] == ("streamed_auto", m) for k in us))
    out = head(small) + [row(p, "stock_qmv", small) for p in products]
    wide = (8, 12, 16)
    out += [""] + head(wide)
    for p in products:
        k, n = (int(v) for v in p[0].split("x"))
        if all(rule_takes_qmv(k, n, p[2], m, 1, sms) for m in wide):
            out.append(row(p, "qmm_sm80", wide))
    return "\n".join(out) + "\n"


def main(argv: list[str]) -> int:
    if argv[:1] == ["--pr"]:
        sms = 132
        rest = argv[1:]
        if rest[:1] == ["--sms"] and len(rest) > 1:
            sms, rest = int(rest[1]), rest[2:]
        if not rest:
            print(__doc__, file=sys.stderr)
            return 2
        runs = []
        for d in rest:
            with open(Path(d) / "cuda_qmv_time.csv") as f:
                runs.append(list(csv.DictReader(f)))
        print(pr_tables(runs, sms), end="")
        return 0
    if len(argv) != 1:
        print(__doc__, file=sys.stderr)
        return 2
    out = Path(argv[0])
    with open(out / "cuda_qmv_time.csv") as f:
        rows = list(csv.DictReader(f))
    print(graph_table(rows))
    batched = batched_table(rows)
    if batched:
        print(batched)
    if profile_file(out, *PROFILED[0]).is_file():
        wk = out / "wheel_kernels.csv"
        wheel = list(csv.DictReader(open(wk))) if wk.is_file() else []
        print(ncu_table(out, wheel))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
