#!/usr/bin/env python3
"""Kernel times of the stock mlx-cuda wheel's quantized products, one at a time.

`cuda_qmv_mlx.py` times the wheel by wall time over a batch of independent
products evaluated together. MLX's CUDA graphs link a kernel only to the
kernels that wrote its inputs (CommandEncoder::insert_graph_dependencies), so
independent products of one batch run concurrently, and a kernel that
occupies few multiprocessors, as `qmm_sm80` does at 8 to 16 vectors (one
block per 128 rows of N), looks several times faster per product than it
runs. This script measures what issue 7 compares against: the kernel's own
time (CUPTI, through Nsight Compute), one product at a time.

  run: evaluates each product alone (its own `mx.eval`), `--launches` per
       (shape, dtype, bits, M), on `--sets` weight sets in turn, and writes
       the plan (one line per product, in launch order). Run it under
         ncu --csv --print-units base --clock-control none \\
             --metrics gpu__time_duration.sum \\
             --kernel-name regex:'qmm_sm80_kernel|qmv_kernel' \\
             python3 bench/cuda_qmm_wheel_kernels.py run --plan PLAN
       (ncu flushes the caches before each kernel: the weights come from
       memory, as with weights rotated beyond the L2).
  parse: matches ncu's kernels to the plan in order (each product must be one
       kernel, qmm_sm80 at M >= 8 and qmv below) and writes the medians.

Usage: cuda_qmm_wheel_kernels.py run --plan FILE [--shapes KxN,...] [--ms 1,8,16]
       cuda_qmm_wheel_kernels.py parse --plan FILE --ncu FILE [--out CSV]
"""
from __future__ import annotations

import argparse
import csv
import io
import statistics
import sys

SHAPES = [(4096, 14336), (14336, 4096), (4096, 4096)]  # K x N


class PlanError(RuntimeError):
    pass


def run(args: argparse.Namespace) -> int:
    import mlx.core as mx

    shapes = [tuple(int(d) for d in s.split("x")) for s in args.shapes.split(",")]
    ms = [int(m) for m in args.ms.split(",")]
    plan = []
    for k, n in shapes:
        for dt_name, dt in (("bf16", mx.bfloat16), ("fp16", mx.float16)):
            for bits in (4, 8):
                mx.random.seed(n + k + bits)
                sets = []
                for _ in range(args.sets):
                    w = (mx.random.normal((n, k)) * 0.02).astype(dt)
                    sets.append(mx.quantize(w, group_size=64, bits=bits))
                x = mx.random.uniform(-1, 1, (16, k)).astype(dt)
                mx.eval(sets, x)
                for m in ms:
                    xm = mx.contiguous(x[:m])
                    mx.eval(xm)
                    for i in range(args.launches + 1):
                        wq, sc, bi = sets[i % len(sets)]
                        mx.eval(mx.quantized_matmul(
                            xm, wq, sc, bi, transpose=True, group_size=64, bits=bits))
                        mx.synchronize()
                        # The first is a warm-up (the JIT compiles qmm_sm80).
                        plan.append((f"{k}x{n}", dt_name, bits, m, int(i == 0)))
                del sets
    with open(args.plan, "w") as f:
        f.write("shape,dtype,bits,M,warmup\n")
        for p in plan:
            f.write(",".join(str(v) for v in p) + "\n")
    print(f"{len(plan)} products, plan in {args.plan}")
    return 0


def ncu_durations(text: str) -> list[tuple[str, float]]:
    """(kernel name, microseconds) of each kernel in ncu's CSV, in launch order."""
    lines = [ln for ln in text.splitlines() if ln.startswith('"')]
    out = []
    for rec in csv.DictReader(io.StringIO("\n".join(lines))):
        if rec.get("Metric Name") != "gpu__time_duration.sum":
            continue
        unit = rec.get("Metric Unit", "")
        scale = {"nsecond": 1e-3, "ns": 1e-3, "usecond": 1.0, "us": 1.0,
                 "msecond": 1e3, "ms": 1e3}.get(unit)
        if scale is None:
            raise PlanError(f"gpu__time_duration.sum: unit {unit!r} not known")
        value = float(rec["Metric Value"].replace(",", ""))
        # ncu writes the kernels in launch order, process after process.
        out.append((rec["Kernel Name"], value * scale))
    return out


def parse(args: argparse.Namespace) -> int:
    with open(args.plan) as f:
        plan = list(csv.DictReader(f))
    with open(args.ncu) as f:
        kernels = ncu_durations(f.read())
    if len(kernels) != len(plan):
        raise PlanError(
            f"{args.ncu}: {len(kernels)} kernels for the {len(plan)} products of "
            f"{args.plan}: each product must be one kernel")
    times: dict[tuple, list[float]] = {}
    names: dict[tuple, str] = {}
    for p, (name, us) in zip(plan, kernels):
        m = int(p["M"])
        want = "qmm_sm80_kernel" if m >= 8 else "qmv_kernel"
        if want not in name:
            raise PlanError(f"{args.ncu}: product {p} ran {name.split('(')[0]}, not {want}")
        if p["warmup"] == "1":
            continue
        key = (p["shape"], p["dtype"], int(p["bits"]), m)
        times.setdefault(key, []).append(us)
        names[key] = want
    rows = ["shape,dtype,bits,M,kernel,launches,median_us,min_us,max_us"]
    for key, ts in times.items():
        rows.append(",".join(str(v) for v in key) + f",{names[key]},{len(ts)},"
                    f"{statistics.median(ts):.2f},{min(ts):.2f},{max(ts):.2f}")
    text = "\n".join(rows) + "\n"
    if args.out:
        with open(args.out, "w") as f:
            f.write(text)
    sys.stdout.write(text)
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run")
    r.add_argument("--plan", required=True)
    r.add_argument("--shapes", default=",".join(f"{k}x{n}" for k, n in SHAPES))
    r.add_argument("--ms", default="1,8,16")
    r.add_argument("--launches", type=int, default=5)
    r.add_argument("--sets", type=int, default=3)
    p = sub.add_parser("parse")
    p.add_argument("--plan", required=True)
    p.add_argument("--ncu", required=True)
    p.add_argument("--out")
    args = ap.parse_args(argv)
    try:
        return run(args) if args.cmd == "run" else parse(args)
    except PlanError as e:
        print(f"cuda_qmm_wheel_kernels.py: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
