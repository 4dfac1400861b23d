#!/usr/bin/env python3
"""MLX's test_qmm and test_qmv_wide loops, outside pytest, with every error.

In the device runs of 2026-11-30 and 2026-12-01 test_qmm failed its tolerance
check on the patched CUDA build, and the failing subtest could not be named:
the worker crashed formatting the message, and the stock build, run beside
it, hit the 120 s test limit before reaching the end of the loop. This script
runs the same loops (the same keys, shapes, dtypes, tolerances and order as
python/tests/test_quantized.py at the pin) in one plain process and writes,
per subtest, the maximum error against the dequantize-then-matmul reference
and whether each row is bit-identical to that row's M = 1 product. Run on the
stock and the patched build, it tells a kernel defect of the queue (a subtest
that fails on the patched build only) from a property of stock `qmv` (one whose
rows are identical to M = 1 and fail at M = 1 too).

Usage: python3 bench/cuda_mlx_tolerance.py --out FILE.csv [--suite qmm|qmv_wide|all] [--limit N]
"""
from __future__ import annotations

import argparse
import time
from itertools import islice, product
from typing import Iterator

import mlx.core as mx
import numpy as np

HEADER = "suite,group_size,bits,M,N,K,B,transposed,dtype,max_err,tol,ok,rows_identical_to_M1,max_err_M1"


def _bits(a: mx.array) -> np.ndarray:
    """The bit patterns of a (float16/bfloat16/float32) array."""
    view = mx.uint32 if a.dtype == mx.float32 else mx.uint16
    return np.array(a.view(view))


def _row_products(x: mx.array, w_q, scales, biases, transposed, group_size, bits) -> mx.array:
    """Each row of x (over every batch) multiplied alone: the M = 1 products."""
    rows = [
        mx.quantized_matmul(x[..., i : i + 1, :], w_q, scales, biases, transposed, group_size, bits)
        for i in range(x.shape[-2])
    ]
    return mx.concatenate(rows, axis=-2)


def _measure(suite, x, w_q, scales, biases, transposed, group_size, bits, y_hat, tol, params) -> str:
    y_q = mx.quantized_matmul(x, w_q, scales, biases, transposed, group_size, bits)
    y_1 = _row_products(x, w_q, scales, biases, transposed, group_size, bits)
    err = (y_q - y_hat).abs().max().item()
    err_1 = (y_1 - y_hat).abs().max().item()
    same = np.all(_bits(y_q) == _bits(y_1), axis=-1)  # per row (and batch)
    g, b, M, N, K, B = params
    return (
        f"{suite},{g},{b},{M},{N},{K},{B},{transposed},{str(x.dtype).split('.')[-1]},"
        f"{err:.6g},{tol},{err < tol},{int(same.sum())}/{same.size},{err_1:.6g}"
    )


def qmm() -> Iterator[str]:
    """test_qmm: float16 on the GPU, M in {8, 32, 33, 64}, tolerance 1.5e-3."""
    key = mx.random.key(0)
    k1, k2 = mx.random.split(key)
    dtype = mx.float16 if (mx.default_device() == mx.gpu) else mx.float32
    tests = product([128, 64, 32], [2, 4, 8], [8, 32, 33, 64], [128, 256], [128, 256], [True, False])
    for group_size, bits, M, N, K, transposed in tests:
        x = (mx.random.normal(shape=(M, K), key=k1) / K**0.5).astype(dtype)
        w = (mx.random.normal(shape=(N, K) if transposed else (K, N), key=k2) / K**0.5).astype(dtype)
        w_q, scales, biases = mx.quantize(w, group_size, bits)
        w_hat = mx.dequantize(w_q, scales, biases, group_size, bits)
        y_hat = (x @ w_hat.T) if transposed else (x @ w_hat)
        tol = 1e-3 if dtype == mx.float32 else 1.5e-3
        yield _measure("qmm", x, w_q, scales, biases, transposed, group_size, bits, y_hat, tol,
                       (group_size, bits, M, N, K, 1))


def qmv_wide() -> Iterator[str]:
    """test_qmv_wide's affine part: float32, M in 2..9, B in {1, 3}, tolerance 1e-3."""
    key = mx.random.key(0)
    k1, k2 = mx.random.split(key)
    for group_size, bits, K in product([32, 64, 128], [2, 3, 4, 5, 6, 8], [128, 512]):
        for M, N, B in product([2, 3, 4, 5, 6, 7, 9], [256, 67], [1, 3]):
            x = mx.random.normal(shape=(M, K) if B == 1 else (B, M, K), key=k1)
            w = mx.random.normal(shape=(N, K) if B == 1 else (B, N, K), key=k2)
            w_q, scales, biases = mx.quantize(w, group_size, bits)
            w_hat = mx.dequantize(w_q, scales, biases, group_size, bits)
            y_hat = x @ mx.swapaxes(w_hat, -1, -2)
            yield _measure("qmv_wide", x, w_q, scales, biases, True, group_size, bits, y_hat, 1e-3,
                           (group_size, bits, M, N, K, B))


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--suite", choices=["qmm", "qmv_wide", "all"], default="all")
    ap.add_argument("--limit", type=int, help="only the first LIMIT subtests of each suite")
    args = ap.parse_args()
    print(f"mlx {mx.__version__}, device {mx.default_device()}", flush=True)
    lines = [HEADER]
    for name, fn in (("qmm", qmm), ("qmv_wide", qmv_wide)):
        if args.suite in (name, "all"):
            t = time.perf_counter()
            rows = list(islice(fn(), args.limit))
            lines += rows
            failed = [r for r in rows if r.split(",")[11] == "False"]
            print(f"{name}: {len(rows)} subtests, {len(failed)} over tolerance, "
                  f"{time.perf_counter() - t:.1f} s", flush=True)
            for r in failed:
                print("  " + r, flush=True)
    with open(args.out, "w") as f:
        f.write("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
