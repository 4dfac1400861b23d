#!/usr/bin/env python3
"""Which kernel MLX built whole takes for products of 8 to 16 vectors, by its
rows, and how long each product takes (session 25).

For each shape, dtype and width (affine, group 64) and M in --ms, the
product's rows are compared bitwise with the rows computed one vector at a
time: qmv gives every row equal, `qmm_sm80` (tensor cores, another order)
does not. The route the build should take is predicted from patch 0011's
rule (`qmv_faster_than_qmm_sm80`: sm90, K >= 2048, N * M * B <= 512 per
multiprocessor, 768 at 4 bits with K >= 4096; or batches of at most 2
vectors, or of at most 4 at 4 bits with K >= 4096, over broadcast weights
or with --own-weights weights of their own) with --route upstream (the queue's build with
MLX_QMV_WIDE=1, which gives 8 to 16 vectors back to upstream's choice), or
is qmv for every product with --route overlay (the default build), or
`qmm_sm80` for every product of 8 or more with --route stock (the stock
wheel). A product that does not match its prediction fails the run.

Timing: set MLX_MAX_OPS_PER_BUFFER=0 before starting Python, so that each
product is committed as a graph of its own and the graphs run one after
another on the stream (a batch evaluated at once runs independent products concurrently,
see bench/cuda_qmm_wheel_kernels.py): the figure is the wall time per
product over `--reps` rounds of R weight sets (beyond the L2), median of 5,
the gaps between graphs included.

Usage: MLX_MAX_OPS_PER_BUFFER=0 [MLX_QMV_WIDE=1] python3 bench/cuda_mlx_route_check.py
         --route upstream|overlay|stock --out CSV [--shapes KxN,...] [--ms 8,12,16]
         [--batched]   (x of shape (M, 1, K): B = M batches, M = 1 each)
         [--vecs V]   (with --batched: x of shape (M / V, V, K), V vectors a batch)
         [--own-weights]   (with --batched: each batch over weights of its own,
                            w of shape (B, N, K), as a mixture of experts gives)
         [--sms 132]   (the device's multiprocessors: 132 on the H200)
         [--sets N]   (N weight sets a shape, not enough to pass the L2: for a
                       check of the rows alone, on MLX's CPU backend too)
       python3 bench/cuda_mlx_route_check.py table STOCK_CSV UPSTREAM_CSV OVERLAY_CSV
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from typing import NamedTuple

SHAPES = [(4096, 4096), (14336, 4096), (4096, 8192), (2048, 8192), (4096, 14336), (4096, 28672)]
class Rule(NamedTuple):
    """Patch 0011's rule (`qmv_faster_than_qmm_sm80` in
    mlx/backend/cuda/quantized/qmm/qmm.cu), for affine weights in groups of
    64 on sm90: qmv where N * M * B is at most per_sm per multiprocessor
    (wide_per_sm at wide_bits bits with K >= wide_k_min) and K >= k_min;
    and, over broadcast weights or weights of their own alike, at any N for
    batches of at most batch_vecs vectors, and of at most wide_vecs at
    wide_bits bits with K >= wide_k_min."""

    per_sm: int
    k_min: int
    batch_vecs: int
    wide_vecs: int
    wide_bits: int
    wide_k_min: int
    wide_per_sm: int


RULE = Rule(per_sm=512, k_min=2048, batch_vecs=2, wide_vecs=4, wide_bits=4, wide_k_min=4096, wide_per_sm=768)


def rule_takes_qmv(k: int, n: int, bits: int, m: int, b: int, sm_count: int, rule: Rule = RULE) -> bool:
    """Whether the rule takes qmv for B = b batches of m vectors each."""
    if m * b > 16 or k < rule.k_min:
        return False
    if b > 1 and (m <= rule.batch_vecs or (m <= rule.wide_vecs and bits == rule.wide_bits
                                           and k >= rule.wide_k_min)):
        return True
    wide = bits == rule.wide_bits and k >= rule.wide_k_min
    return n * m * b <= (rule.wide_per_sm if wide else rule.per_sm) * sm_count


def takes_qmv(route: str, m: int, n: int, k: int, bits: int, sm_count: int, batches: int = 1) -> bool:
    """Whether the build should take qmv for a product of m vectors of
    `bits`-bit weights, as `batches` batches of m / batches vectors each."""
    if m < 8 or route == "overlay":
        return True
    if route == "stock":
        return False
    return rule_takes_qmv(k, n, bits, m // batches, batches, sm_count)


def verdict(route: str, m: int, n: int, k: int, bits: int, sm_count: int, same_rows: int,
            batches: int = 1) -> str:
    """ok, or what went wrong: qmv's rows are all the M = 1 rows, and a
    product with none of them equal (or some not) came from another kernel."""
    want = takes_qmv(route, m, n, k, bits, sm_count, batches)
    if want and same_rows != m:
        return f"FAIL: {same_rows}/{m} rows equal to M = 1, qmv expected"
    if not want and same_rows == m:
        return f"FAIL: every row equal to M = 1, qmm_sm80 expected"
    return "ok"


def table(stock_csv: str, upstream_csv: str, overlay_csv: str) -> str:
    """The three runs side by side: us per product (rows equal to M = 1 over
    M where not all are), and upstream's time over stock's."""
    import csv

    runs = []
    for path in (stock_csv, upstream_csv, overlay_csv):
        with open(path) as f:
            runs.append({(r["shape"], r["dtype"], r["bits"], int(r["M"])): r for r in csv.DictReader(f)})

    def cell(r: dict, m: int) -> str:
        same = int(r["rows_identical_to_M1"])
        return r["us"] + ("" if same == m else f" ({same}/{m})")

    out = ["| K x N | dtype | bits | M | stock | upstream (MLX_QMV_WIDE=1) | overlay | upstream / stock |",
           "|---|---|---|---|---|---|---|---|"]
    for key, s in runs[0].items():
        u, o = runs[1][key], runs[2][key]
        m = key[3]
        out.append(f"| {' | '.join(key[:3])} | {m} | {cell(s, m)} | {cell(u, m)} | {cell(o, m)} | "
                   f"{float(u['us']) / float(s['us']):.2f} |")
    return "\n".join(out) + "\n"


def main(argv: list[str] | None = None) -> int:
    if argv is None:
        argv = sys.argv[1:]
    if argv[:1] == ["table"]:
        if len(argv) != 4:
            print("usage: cuda_mlx_route_check.py table STOCK_CSV UPSTREAM_CSV OVERLAY_CSV", file=sys.stderr)
            return 2
        sys.stdout.write(table(*argv[1:]))
        return 0
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--route", choices=("upstream", "overlay", "stock"), required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--shapes", default=",".join(f"{k}x{n}" for k, n in SHAPES))
    ap.add_argument("--ms", default="8,12,16")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--sms", type=int, default=132)
    ap.add_argument("--sets", type=int, default=0,
                    help="weight sets a shape (default: enough to span more than 256 MB)")
    ap.add_argument("--batched", action="store_true",
                    help="x of shape (M, 1, K): M = 1 and B = M batches of broadcast weights, "
                         "as in batched decoding")
    ap.add_argument("--own-weights", action="store_true",
                    help="with --batched: each batch over weights of its own, w of shape (B, N, K)")
    ap.add_argument("--vecs", type=int, default=1,
                    help="with --batched: vectors per batch, x of shape (M / V, V, K)")
    args = ap.parse_args(argv)
    if (args.own_weights or args.vecs != 1) and not args.batched:
        print("cuda_mlx_route_check.py: --own-weights and --vecs need --batched", file=sys.stderr)
        return 2
    ms = [int(m) for m in args.ms.split(",")]
    if args.vecs < 1 or any(m % args.vecs for m in ms):
        print(f"cuda_mlx_route_check.py: --vecs {args.vecs} does not divide every M of --ms {args.ms}",
              file=sys.stderr)
        return 2
    if os.environ.get("MLX_MAX_OPS_PER_BUFFER") != "0":
        print("cuda_mlx_route_check.py: MLX_MAX_OPS_PER_BUFFER=0 must be set (the products "
              "of a batch would run concurrently)", file=sys.stderr)
        return 2
    import mlx.core as mx
    import numpy as np
    from cuda_qmv_mlx import weight_sets  # bench/, beside this script

    sm_count = args.sms
    shapes = [tuple(int(d) for d in s.split("x")) for s in args.shapes.split(",")]
    rows = ["route,shape,dtype,bits,M,qmv_expected,rows_identical_to_M1,us,verdict"]
    failed = 0
    for k, n in shapes:
        for dt_name, dt in (("bf16", mx.bfloat16), ("fp16", mx.float16)):
            for bits in (4, 8):
                sets = weight_sets(k, n, dt, bits, args.sets)
                x = mx.random.uniform(-1, 1, (16, k)).astype(dt)
                mx.eval(sets, x)

                def qmm(xm: mx.array, s: tuple) -> mx.array:
                    return mx.quantized_matmul(xm, *s, transpose=True, group_size=64, bits=bits)

                # The reference row of vector i: alone, over the weights its
                # product uses (its batch's own with --own-weights: batch
                # i // V of the first stack below).
                own = ([sets[(i // args.vecs) % len(sets)] for i in range(16)] if args.own_weights
                       else [sets[0]] * 16)
                alone = [qmm(mx.contiguous(x[i:i + 1]), own[i]) for i in range(16)]
                if args.own_weights:
                    # Two stacks of 16 to time over (batches of one vector:
                    # each beyond the L2 from M = 8; with --vecs 4 the two or
                    # four matrices of a product may not be).
                    stacks = [tuple(mx.stack([sets[(i + j) % len(sets)][c] for i in range(16)])
                                    for c in range(3)) for j in (0, 16)]
                    mx.eval(stacks)
                mx.eval(alone)
                ref = np.concatenate([np.array(a.view(mx.uint16)).reshape(1, n) for a in alone])
                for m in ms:
                    batches = m // args.vecs if args.batched else 1
                    xm = mx.contiguous(x[:m].reshape(batches, args.vecs, k) if args.batched else x[:m])
                    timed = sets
                    if args.own_weights:
                        timed = [tuple(mx.contiguous(a[:batches]) for a in st) for st in stacks]
                        mx.eval(timed)
                    o = qmm(xm, timed[0])
                    mx.eval(o)
                    got = np.array(o.view(mx.uint16)).reshape(m, n)
                    same = int((got == ref[:m]).all(axis=1).sum())
                    mx.eval([qmm(xm, s) for s in timed])  # warm-up
                    ts = []
                    for _ in range(5):
                        outs = [qmm(xm, s) for _ in range(args.reps) for s in timed]
                        mx.synchronize()
                        t0 = time.perf_counter()
                        mx.eval(outs)
                        mx.synchronize()
                        ts.append((time.perf_counter() - t0) / len(outs) * 1e6)
                    v = verdict(args.route, m, n, k, bits, sm_count, same, batches)
                    failed += v != "ok"
                    kind = "-own-weights" if args.own_weights else "-batched" if args.batched else ""
                    kind += f"-v{args.vecs}" if args.vecs != 1 else ""
                    rows.append(f"{args.route}{kind},{k}x{n},{dt_name},{bits},{m},"
                                f"{int(takes_qmv(args.route, m, n, k, bits, sm_count, batches))},{same},"
                                f"{statistics.median(ts):.2f},{v}")
                    print(rows[-1], flush=True)
                del sets, own
                if args.own_weights:
                    del stacks
    with open(args.out, "w") as f:
        f.write("\n".join(rows) + "\n")
    print(f"{len(rows) - 1} products, {failed} not as predicted (multiprocessors: {sm_count})")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
