#!/usr/bin/env python3
"""Markdown tables from a cuda_qmv run: cuda_qmv_timing.csv (harness) and
mlx_wheel.csv (stock wheel, optional), as written by cuda_qmv_device.sh.

The "dispatch" columns are the configurations that the patch's
dispatch_streamed_tile picks (dispatch() below; tests/cuda checks it against
qmv_streamed.cuh), timed as explicit launches of the same kernel in the same run; the
`streamed_auto` rows of the CSV are what the binary's own (possibly older)
dispatch launched; a run without the explicit sweep is reported from those.
Shapes are those of the CSV, in its order.

Usage: python3 bench/cuda_qmv_report.py RESULTS_DIR
       python3 bench/cuda_qmv_report.py --matrix RESULTS_DIR
       python3 bench/cuda_qmv_report.py --slower RESULTS_DIR
       python3 bench/cuda_qmv_report.py --roofline RESULTS_DIR
       python3 bench/cuda_qmv_report.py --mlx RESULTS_DIR
       python3 bench/cuda_qmv_report.py --tolerance RESULTS_DIR
       python3 bench/cuda_qmv_report.py --tail CUDA_QMV_TIME_CSV
       python3 bench/cuda_qmv_report.py --tail-configs BITS K N
(--matrix: the timing table of a qmv_matrix run, cuda_qmv_matrix_timing.csv,
as written by cuda_qmv_matrix_device.sh. --roofline: the read roofline
against stock and the dispatch, cuda_qmv_time.csv as written by
cuda_qmv_roofline_device.sh. --mlx: mx.quantized_matmul on the patched
MLX build against the stock wheels, mlx_patched.csv, mlx_patched_wide.csv and
mlx_wheel.csv as written by cuda_mlx_run_device.sh.)
"""
from __future__ import annotations

import csv
import sys
from pathlib import Path

SHAPES = ["4096x14336", "14336x4096", "4096x4096"]


def dispatch(
    bits: int, m: int, k: int | None = None, n: int | None = None
) -> tuple[int, int, int, int]:
    """(warps, rows, vectors, stages) of qmv_streamed.cuh's dispatch_streamed_tile; with
    k (and n), qmv_streamed's route before it: up to 4 bits (16-bit x) on
    rows aligned as the harness's are, one vector on rows of k <= 4096 or on
    n <= 8192 rows, or up to 3 on fewer than 2560 rows (4 on up to 1024, 8
    on up to 320, any number on up to 192) of k <= 4096, go to
    qmv_prefetch_kernel, which the harness names V = 0
    (2 warps, a ring of 2 tiles). With n, 8-bit weights on fewer than 4096
    rows take 2 rows per warp at M <= 2 (one vector on 4097 to 10240 rows
    or more than 16384, and two on 4097 to 6144 or more than 16384, blocks
    of 4 warps of 4 rows; session 43), and M >= 3 on few rows (n <= 640;
    below 8 bits n <= 320, or n <= 640 at M <= 8) smaller blocks. 5- and
    6-bit weights take blocks of 4 warps, of 2 rows per warp for one or two
    vectors on fewer than 4096 rows (one on up to 4096) or three or more on
    up to 640."""
    if k is not None and bits <= 4:
        one_vector = m == 1 and (k <= 4096 or (n is not None and n <= 8192))
        few_rows = n is not None and (
            (m <= 3 and n < 2560) or (m <= 4 and n <= 1024) or (m <= 8 and n <= 320) or n <= 192
        )
        if one_vector or (few_rows and k <= 4096):
            return (2, 1, 0, 2)
    few = n is not None and (n <= 320 or (m <= 8 and n <= 640))
    if bits in (5, 6):
        if m <= 2 and n is not None and (n < 4096 or (m == 1 and n == 4096)):
            return (4, 2, m, 8)
        if m <= 2:
            return (4, 4, m, 4)
        if n is not None and n <= 640:
            return (4, 2, 4, 4)
        return (2, 4, 4, 6) if m <= 4 else (4, 2, 8, 3)
    if bits < 8:
        if m <= 1:
            return (8, 4, 1, 4)
        if m <= 2:
            return (8, 4, 2, 3)
        return (4, 4, 4, 4) if few else (8, 4, 4, 3)
    if n is not None and n < 4096 and m <= 2:
        return (4, 2, m, 8)
    rows_16 = n is not None and 4096 < n and (n <= 6144 or n > 16384)
    if m <= 1 and (rows_16 or (n is not None and 4096 < n <= 10240)):
        return (4, 4, 1, 4)
    if m <= 1:
        return (2, 4, 1, 8)
    if m <= 2 and rows_16:
        return (4, 4, 2, 4)
    if m <= 2:
        return (2, 4, 2, 8)
    if n is not None and n <= 640:
        return (4, 2, 4, 4)
    if m <= 4 or 8 < m <= 12:
        return (2, 4, 4, 6)
    return (4, 2, 8, 6)  # bfloat16 and float16 (float32 keeps 3 stages)


def matrix_table(d: Path) -> str:
    """Streamed dispatch at M = 1..16 against stock M = 1, per dtype and type
    (and per shape where the run timed several). Where stock was also timed
    at M (qmv_matrix --odd-time), a cell adds stock's time at M over the
    dispatch's in brackets; `*` marks a product the dispatch leaves to
    qmv_kernel (dispatch_stock)."""
    rows = list(csv.DictReader(open(d / "cuda_qmv_matrix_timing.csv")))
    dispatch = ("streamed_auto", "dispatch_stock")
    ms = sorted({int(r["M"]) for r in rows if r["impl"] in dispatch})
    shapes = len({r["shape"] for r in rows}) > 1
    out = [
        ("| shape " if shapes else "")
        + "| dtype | type | stock M = 1 (us) | "
        + " | ".join(f"M = {m}" for m in ms)
        + " |",
        ("|---" if shapes else "") + "|---|---|---|" + "---|" * len(ms),
    ]
    keys = list(dict.fromkeys((r["shape"], r["dtype"], r["type"]) for r in rows))
    for sh, dt, ty in keys:
        sel = [r for r in rows if (r["shape"], r["dtype"], r["type"]) == (sh, dt, ty)]
        stock = {int(r["M"]): float(r["us"]) for r in sel if r["impl"] == "stock_qmv"}
        s1 = stock[1]
        cells = []
        for m in ms:
            r = next((r for r in sel if r["impl"] in dispatch and int(r["M"]) == m), None)
            if r is None:
                cells.append("")
                continue
            us = float(r["us"])
            star = "*" if r["impl"] == "dispatch_stock" else ""
            cell = f"{us:.1f}{star} ({us / s1:.2f}x)"
            if m > 1 and m in stock:
                cell += f" [{stock[m] / us:.2f}]"
            cells.append(cell)
        out.append(("| " + sh + " " if shapes else "") + f"| {dt} | {ty} | {s1:.1f} | " + " | ".join(cells) + " |")
    return "\n".join(out) + "\n"


def slower_table(d: Path, tolerance: float = 0.03) -> str:
    """The products of a qmv_matrix --odd-time run where the dispatch takes
    more than (1 + tolerance) times stock's time at the same M, slowest
    first: dispatch over stock, shape, dtype, type, M."""
    rows = list(csv.DictReader(open(d / "cuda_qmv_matrix_timing.csv")))
    stock = {(r["shape"], r["dtype"], r["type"], r["M"]): float(r["us"])
             for r in rows if r["impl"] == "stock_qmv"}
    slow = []
    for r in rows:
        key = (r["shape"], r["dtype"], r["type"], r["M"])
        if r["impl"] == "streamed_auto" and key in stock:
            ratio = float(r["us"]) / stock[key]
            if ratio > 1 + tolerance:
                slow.append((ratio, key))
    out = [f"{len(slow)} products where the dispatch takes more than "
           f"{1 + tolerance:.2f}x stock's time at the same M:"]
    out += [f"{ratio:.2f} {sh} {dt} {ty} M={m}" for ratio, (sh, dt, ty, m) in sorted(slow, reverse=True)]
    return "\n".join(out) + "\n"


def roofline_table(d: Path, goal: float = 1.8) -> str:
    """Per shape, dtype and width: the read roofline of the M = 1 bytes, stock
    M = 1, the dispatch at each M timed, and the time the M = 1 goal asks
    (stock / goal) as a share of the roofline (over 100%: faster than the
    device reads the bytes)."""
    rows = list(csv.DictReader(open(d / "cuda_qmv_time.csv")))
    ms = sorted({int(r["M"]) for r in rows if r["impl"] == "streamed_auto"})
    head = (
        "| K x N | dtype | bits | MB | read roofline us (GB/s) | stock M=1 | "
        + " | ".join(f"dispatch M={m}" for m in ms)
        + f" | {goal}x goal us | goal / roofline | dispatch M=1 / roofline |"
    )
    out = [head, "|---" * (9 + len(ms)) + "|"]
    keys = list(dict.fromkeys((r["shape"], r["dtype"], r["bits"]) for r in rows))
    for shape, dt, bits in keys:
        sel = [r for r in rows if (r["shape"], r["dtype"], r["bits"]) == (shape, dt, bits)]

        def us(impl: str, m: int = 1) -> float:
            return float(next(r["us"] for r in sel if r["impl"] == impl and int(r["M"]) == m))

        read, stock = us("read_roofline"), us("stock_qmv")
        mb = int(sel[0]["bytes"]) / 1e6
        gbps = int(sel[0]["bytes"]) / (read * 1e-6) / 1e9
        disp = [us("streamed_auto", m) for m in ms]
        cells = [f"{t:.2f} ({stock / t:.2f}x)" for t in disp]
        target = stock / goal
        d1 = disp[ms.index(1)] if 1 in ms else float("nan")
        out.append(
            f"| {shape} | {dt} | {bits} | {mb:.1f} | {read:.2f} ({gbps:.0f}) | {stock:.2f} | "
            + " | ".join(cells)
            + f" | {target:.2f} | {100 * read / target:.0f}% | {100 * read / d1:.0f}% |"
        )
    return "\n".join(out) + "\n"


def mlx_table(d: Path) -> str:
    """mx.quantized_matmul per shape, dtype and width: the stock wheels, the
    patched build and the patched build with MLX_QMV_WIDE=1 (us per product,
    rows identical to M = 1 over M in brackets where not all are), with the
    patched build's speed-up over the wheel at the same M. The last column is
    the spread of patched over MLX_QMV_WIDE=1 at M <= 7, where both run the
    same kernels: the run's own noise."""
    def load(name: str) -> dict[tuple[str, str, str, int], tuple[float, int]]:
        return {
            (r["shape"], r["dtype"], r["bits"], int(r["M"])): (float(r["us"]), int(r["rows_identical_to_M1"]))
            for r in csv.DictReader(open(d / name))
        }

    stock, patched, wide = load("mlx_wheel.csv"), load("mlx_patched.csv"), load("mlx_patched_wide.csv")
    ms = sorted({k[3] for k in patched})

    def cell(t: tuple[float, int], m: int) -> str:
        return f"{t[0]:.1f}" + ("" if t[1] == m else f" ({t[1]}/{m})")

    head = "| K x N | dtype | bits | " + " | ".join(
        f"M={m} stock / patched / wide (x)" for m in ms
    ) + " | patched / wide, M <= 7 |"
    out = [head, "|---" * (4 + len(ms)) + "|"]
    for key in dict.fromkeys(k[:3] for k in patched):
        cells = []
        for m in ms:
            s_, p_, w_ = stock[(*key, m)], patched[(*key, m)], wide[(*key, m)]
            cells.append(f"{cell(s_, m)} / {cell(p_, m)} / {cell(w_, m)} ({s_[0] / p_[0]:.2f}x)")
        spread = [patched[(*key, m)][0] / wide[(*key, m)][0] for m in ms if m <= 7]
        out.append(f"| {' | '.join(key)} | " + " | ".join(cells) + f" | {min(spread):.2f}-{max(spread):.2f} |")
    return "\n".join(out) + "\n"


TOLERANCE_KEY = ("suite", "mode", "group_size", "bits", "M", "N", "K", "B", "transposed", "dtype")


def tolerance_table(d: Path) -> str:
    """bench/cuda_mlx_tolerance.py on each side (SIDE-tolerance.csv: stock,
    patched, wheel, as bench/cuda_mlx_ab_device.sh names them): every subtest
    over its tolerance on some side, with each side's error and rows identical
    to M = 1, then per suite how many fail on which sides. A subtest that one
    side did not reach (a run cut by its time limit) shows "-"."""
    sides = {}
    for f in sorted(d.glob("*-tolerance.csv")):
        rows = list(csv.DictReader(open(f)))
        sides[f.name.removesuffix("-tolerance.csv")] = {tuple(r[k] for k in TOLERANCE_KEY): r for r in rows}
    names = list(sides)
    keys = list(dict.fromkeys(k for rows in sides.values() for k in rows))

    def failed(name: str, key: tuple[str, ...]) -> bool:
        r = sides[name].get(key)
        return r is not None and r["ok"] in ("False", "error")

    def m1_over(name: str, key: tuple[str, ...]) -> bool:
        """The rows computed one vector at a time miss the tolerance: what a
        build that serves this M with rows identical to M = 1 would report."""
        r = sides[name].get(key)
        return r is not None and r["ok"] != "error" and float(r["max_err_M1"]) >= float(r["tol"])

    def cell(name: str, key: tuple[str, ...]) -> str:
        r = sides[name].get(key)
        if r is None:
            return "-"
        if r["ok"] == "error":
            return f"ERROR: {r.get('error', '')[:80]}"
        return (f"{r['max_err']}{' FAIL' if failed(name, key) else ''} ({r['rows_identical_to_M1']}); "
                f"M=1 rows {r['max_err_M1']}{' FAIL' if m1_over(name, key) else ''}")

    out = ["| " + " | ".join(TOLERANCE_KEY) + " | tol | "
           + " | ".join(f"{n}: max err (rows = M=1); M=1 rows' max err" for n in names) + " |",
           "|---" * (len(TOLERANCE_KEY) + 1 + len(names)) + "|"]
    for key in keys:
        if any(failed(n, key) or m1_over(n, key) for n in names):
            tol = next(sides[n][key]["tol"] for n in names if key in sides[n])
            out.append("| " + " | ".join(key) + f" | {tol} | " + " | ".join(cell(n, key) for n in names) + " |")
    out.append("")
    for suite in dict.fromkeys(k[0] for k in keys):
        ks = [k for k in keys if k[0] == suite]
        ran = ", ".join(f"{n} {sum(k in sides[n] for k in ks)}" for n in names)
        by = {}
        for k in ks:
            who = tuple(n for n in names if failed(n, k))
            if who:
                by[who] = by.get(who, 0) + 1
        fails = "; ".join(f"{c} on {' and '.join(w)} only" if len(w) < len(names) else f"{c} on every side"
                          for w, c in by.items()) or "none"
        m1 = ", ".join(f"{n} {sum(m1_over(n, k) for k in ks)}" for n in names)
        out.append(f"- {suite}: {len(ks)} subtests (ran: {ran}); over tolerance or error: {fails}; "
                   f"M = 1 rows over tolerance: {m1}")
        for n in names:
            out.append(f"  - {n}, {routed_summary([sides[n][k] for k in ks if k in sides[n]])}")
    return "\n".join(out) + "\n"


def routed_summary(rows: list[dict[str, str]]) -> str:
    """What a side's subtests say of the products the queue routes to the
    streamed kernel (M * B <= 16): how many are within tolerance, how many
    have every row bitwise equal to that row alone, the largest error."""
    routed = [r for r in rows if int(r["M"]) * int(r["B"]) <= 16 and r["ok"] != "error"]
    if not routed:
        return "products of at most 16 vectors: none ran"
    within = sum(r["ok"] == "True" for r in routed)
    identical = 0
    for r in routed:
        same, total = r["rows_identical_to_M1"].split("/")
        identical += same == total
    largest = max(float(r["max_err"]) for r in routed)
    return (f"products of at most 16 vectors: {len(routed)}, {within} within tolerance, {identical} with "
            f"every row identical to M = 1; largest error {largest:.3g}")


def tail_configs(bits: int, k: int, n: int) -> str:
    """qmv_bench --time arguments for bench/cuda_qmv_tail_device.sh: at M = 1,
    2, 3, 4, 6, 8, 12, 16 the dispatch, and its ring configuration with the
    last wave as picked (T = 0) and with every block at full size (T = 1)."""
    out = []
    for m in (1, 2, 3, 4, 6, 8, 12, 16):
        w, r, v, d = dispatch(bits, m, k, n)
        out.append(f"0,0,0,0,{m}")
        if v > 0:
            out += [f"{w},{r},{v},{d},{m},0", f"{w},{r},{v},{d},{m},1"]
    return " ".join(out)


def tail_report(path: Path) -> str:
    """One line per product of a qmv_bench --time CSV: stock at M and at
    M = 1, the dispatch, and where timed both ways the ring with the last wave
    as picked and whole (whole / picked: above 1, the split is faster)."""
    rows = list(csv.DictReader(open(path)))

    def times(impl: str) -> dict[tuple[str, ...], float]:
        return {(r["shape"], r["dtype"], r["bits"], r["M"]): float(r["us"])
                for r in rows if r["impl"] == impl}

    stock, split, whole = times("stock_qmv"), times("streamed"), times("streamed_no_tail")
    out = []
    for key, us in times("streamed_auto").items():
        shape, dtype, bits, m = key
        line = (f"{shape:>10} {dtype} {bits}-bit M={m:>2}: stock {stock[key]:7.2f} "
                f"(M=1 {stock[key[:3] + ('1',)]:6.2f}) dispatch {us:7.2f}")
        if key in whole:
            line += (f" | ring picked {split[key]:7.2f} whole {whole[key]:7.2f}"
                     f" ({whole[key] / split[key]:.3f}x)")
        out.append(line)
    return "\n".join(out) + "\n"


def main(argv: list[str]) -> int:
    if len(argv) == 3 and argv[1] == "--tolerance":
        print(tolerance_table(Path(argv[2])), end="")
        return 0
    if len(argv) == 3 and argv[1] == "--mlx":
        print(mlx_table(Path(argv[2])), end="")
        return 0
    if len(argv) == 3 and argv[1] == "--slower":
        print(slower_table(Path(argv[2])), end="")
        return 0
    if len(argv) == 3 and argv[1] == "--matrix":
        print(matrix_table(Path(argv[2])), end="")
        return 0
    if len(argv) == 3 and argv[1] == "--roofline":
        print(roofline_table(Path(argv[2])), end="")
        return 0
    if len(argv) == 3 and argv[1] == "--tail":
        print(tail_report(Path(argv[2])), end="")
        return 0
    if len(argv) == 5 and argv[1] == "--tail-configs":
        print(tail_configs(*(int(a) for a in argv[2:])))
        return 0
    if len(argv) != 2 or argv[1].startswith("-"):
        print(__doc__, end="")
        return 0 if len(argv) == 2 and argv[1] in ("-h", "--help") else 2
    d = Path(argv[1])
    if not (d / "cuda_qmv_timing.csv").is_file():
        print(f"cuda_qmv_report.py: error: {d}: no cuda_qmv_timing.csv (a cuda_qmv_device.sh "
              "results folder)", file=sys.stderr)
        return 2
    rows = list(csv.DictReader(open(d / "cuda_qmv_timing.csv")))
    wheel = {}
    if (d / "mlx_wheel.csv").is_file():
        for r in csv.DictReader(open(d / "mlx_wheel.csv")):
            wheel[(r["shape"], r["dtype"], r["bits"], int(r["M"]))] = r

    def t(shape, dt, bits, impl, m, cfg=None):
        c = [float(r["us"]) for r in rows if r["shape"] == shape and r["dtype"] == dt
             and r["bits"] == bits and r["impl"] == impl and int(r["M"]) == m
             and (cfg is None or (int(r["G"]), int(r["R"]), int(r["V"]), int(r["D"])) == cfg)]
        return c[0] if c else None

    def best(shape, dt, bits, m):
        c = [(float(r["us"]), r) for r in rows if r["shape"] == shape and r["dtype"] == dt
             and r["bits"] == bits and r["impl"] == "streamed" and int(r["M"]) == m]
        return min(c, key=lambda x: x[0]) if c else None

    def disp(shape, dt, bits, m):
        k, n = (int(v) for v in shape.split("x"))
        a = t(shape, dt, bits, "streamed", m, dispatch(int(bits), m, k, n))
        return a if a is not None else t(shape, dt, bits, "streamed_auto", m)

    def f1(v):
        return "" if v is None else f"{v:.1f}"

    shapes = list(dict.fromkeys(r["shape"] for r in rows)) or SHAPES
    # The widths the run has (qmv_bench --bits picks one), narrowest first.
    widths = sorted({r["bits"] for r in rows}, key=int) or ["4", "8"]

    print("Kernel times in us (harness, CUDA-graph replay over rotated weights; "
          "dispatch = the configuration the patch's dispatch picks, timed in the "
          "same run; x = speed-up over stock M = 1; vs sm80 = dispatch time over "
          "the wheel's qmm_sm80 time at the same M)\n")
    print("| K x N | dtype | bits | stock M=1 | dispatch M=1 | M=2 | M=4 | M=8 | M=16 "
          "| stock qmv M=4 | M=16 | wheel qmm_sm80 M=8 | M=16 | vs sm80 M=8 | M=16 |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for shape in shapes:
        for dt in ("bf16", "fp16"):
            for bits in widths:
                s1 = t(shape, dt, bits, "stock_qmv", 1)
                if s1 is None:
                    continue
                cells = []
                for m in (1, 2, 4, 8, 16):
                    a = disp(shape, dt, bits, m)
                    cells.append(f"{a:.1f} ({s1 / a:.2f}x)" if m == 1 and a else f1(a))
                w = [wheel.get((shape, dt, bits, m)) for m in (8, 16)]
                wcells = [f"{float(r['us']):.1f}" if r else "" for r in w]
                ratio = [f"{disp(shape, dt, bits, m) / float(r['us']):.2f}"
                         if r and disp(shape, dt, bits, m) else ""
                         for m, r in zip((8, 16), w)]
                print(f"| {shape} | {dt} | {bits} | {s1:.1f} | " + " | ".join(cells)
                      + f" | {f1(t(shape, dt, bits, 'stock_qmv', 4))}"
                      + f" | {f1(t(shape, dt, bits, 'stock_qmv', 16))} | "
                      + " | ".join(wcells) + " | " + " | ".join(ratio) + " |")
    explicit = [sh for sh in shapes if any(
        r["shape"] == sh and r["impl"] == "streamed" for r in rows)]
    if explicit:
        print("\nBest explicit configuration per M (us, W warps per block, R rows per "
              "warp, V vectors per block, S stages):\n")
        print("| K x N | dtype | bits | M=1 | M=2 | M=4 | M=8 | M=16 |")
        print("|---|---|---|---|---|---|---|---|")
    for shape in explicit:
        for dt in ("bf16", "fp16"):
            for bits in widths:
                cells = []
                for m in (1, 2, 4, 8, 16):
                    b = best(shape, dt, bits, m)
                    if b is None:
                        cells.append("")
                        continue
                    us, r = b
                    cells.append(f"{us:.1f} W{r['G']}R{r['R']}V{r['V']}S{r['D']}")
                print(f"| {shape} | {dt} | {bits} | " + " | ".join(cells) + " |")
    if wheel:
        print("\nStock wheel (mx.quantized_matmul, wall time per product over a lazily "
              "built batch; rows identical to M = 1 / M):\n")
        print("| K x N | dtype | bits | M=1 | M=2 | M=4 | M=7 | M=8 | M=16 |")
        print("|---|---|---|---|---|---|---|---|---|")
        for shape in list(dict.fromkeys(k[0] for k in wheel)):
            for dt in ("bf16", "fp16"):
                for bits in widths:
                    cells = []
                    for m in (1, 2, 4, 7, 8, 16):
                        r = wheel.get((shape, dt, bits, m))
                        cells.append(f"{float(r['us']):.1f} ({r['rows_identical_to_M1']}/{m})" if r else "")
                    print(f"| {shape} | {dt} | {bits} | " + " | ".join(cells) + " |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
