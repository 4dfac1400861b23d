#!/usr/bin/env python3
"""Stock baseline through the mlx + mlx-cuda-13 wheels: mx.quantized_matmul.

For each shape (K x N), dtype and bits (affine, group 64) it times
quantized_matmul at M in {1, 2, 4, 7, 8, 16} and checks, for M = 2..16,
which rows are bit-identical to the M = 1 product of that row (the wheel
routes M * B < 8 to qmv, one warp per row and vector, and M >= 8 to
qmm_sm80 on sm90 with group 64 < K).

Timing: R weight sets (more than 256 MB together, beyond the 50 MB L2) and
`reps` products per set are built lazily and evaluated at once; the figure is
the wall time over the number of products, median over 7 evaluations, so it
includes launch gaps (MLX replays them as CUDA graphs).

Usage: python3 bench/cuda_qmv_mlx.py [--out FILE] [--quick] [--shapes KxN,...]
"""
from __future__ import annotations

import argparse
import statistics
import time

import mlx.core as mx
import numpy as np

SHAPES = [(4096, 14336), (14336, 4096), (4096, 4096)]  # K x N
MS = [1, 2, 4, 7, 8, 16]


def set_bytes(k: int, n: int, bits: int) -> int:
    """Bytes of one weight set: packed weights, bf16/fp16 scales and biases."""
    return n * k * bits // 8 + 2 * 2 * n * (k // 64)


def weight_sets(k: int, n: int, dtype: mx.Dtype, bits: int, count: int = 0) -> list[tuple[mx.array, ...]]:
    """Random N x K weights quantized (affine, group 64), seeded per shape and
    width: count sets, by default enough to span more than 256 MB (beyond
    the L2), at least 4."""
    mx.random.seed(n + k + bits)
    count = count or max(4, (256 << 20) // set_bytes(k, n, bits) + 1)
    return [mx.quantize((mx.random.normal((n, k)) * 0.02).astype(dtype), group_size=64, bits=bits)
            for _ in range(count)]


def bits_of(a: mx.array) -> np.ndarray:
    return np.array(a.view(mx.uint16))


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--shapes", help="K x N list, e.g. 3840x15360,4096x14336")
    args = ap.parse_args()
    shapes = SHAPES
    if args.shapes:
        shapes = [tuple(int(d) for d in s.split("x")) for s in args.shapes.split(",")]
    lines: list[str] = []

    def say(s: str) -> None:
        print(s, flush=True)
        lines.append(s)

    say(f"mlx {mx.__version__}, device {mx.default_device()}, "
        f"{mx.cuda.is_available() if hasattr(mx, 'cuda') else ''}")
    csv = ["shape,dtype,bits,M,us,rows_identical_to_M1,frac_elems_differ"]
    for k, n in shapes:
        for dt_name, dt in (("bf16", mx.bfloat16), ("fp16", mx.float16)):
            for bits in (4, 8):
                sets = weight_sets(k, n, dt, bits)
                x = mx.random.uniform(-1, 1, (16, k)).astype(dt)
                xs = {m: mx.contiguous(x[:m]) for m in MS + list(range(1, 17))}
                mx.eval(sets, list(xs.values()))

                def qmm(xm, s):
                    wq, sc, bi = s
                    return mx.quantized_matmul(
                        xm, wq, sc, bi, transpose=True, group_size=64, bits=bits
                    )

                # Parity: rows of M = 2..16 against M = 1 products.
                ref = [qmm(xs[1] if i == 0 else mx.contiguous(x[i : i + 1]), sets[0]) for i in range(16)]
                mx.eval(ref)
                ref_bits = np.concatenate([bits_of(r) for r in ref], axis=0)
                parity = {}
                for m in range(2, 17):
                    o = qmm(xs[m], sets[0])
                    mx.eval(o)
                    ob = bits_of(o)
                    same_rows = int((ob == ref_bits[:m]).all(axis=1).sum())
                    frac = float((ob != ref_bits[:m]).mean())
                    parity[m] = (same_rows, frac)
                label = f"{k}x{n}"
                say(f"{label} {dt_name} {bits}-bit parity (rows identical to M=1 / M, "
                    f"fraction of outputs differing): " + ", ".join(
                        f"M={m}: {parity[m][0]}/{m} {parity[m][1]:.2f}" for m in range(2, 17)))
                reps = 4 if args.quick else 10
                for m in MS:
                    # warm-up
                    mx.eval([qmm(xs[m], s) for s in sets])
                    ts = []
                    for _ in range(7):
                        outs = [qmm(xs[m], s) for _ in range(reps) for s in sets]
                        mx.synchronize()
                        t0 = time.perf_counter()
                        mx.eval(outs)
                        mx.synchronize()
                        ts.append((time.perf_counter() - t0) / len(outs) * 1e6)
                    us = statistics.median(ts)
                    same, frac = parity.get(m, (1, 0.0))
                    csv.append(f"{label},{dt_name},{bits},{m},{us:.2f},{same},{frac:.3f}")
                    say(f"{label} {dt_name} {bits}-bit M={m:2d}: {us:8.2f} us "
                        f"({set_bytes(k, n, bits) / us / 1e3:.0f} GB/s weights), rows identical to M=1: {same}/{m}")
                del sets
    if args.out:
        with open(args.out, "w") as f:
            f.write("\n".join(csv) + "\n")
        with open(args.out.replace(".csv", ".txt"), "w") as f:
            f.write("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
