#!/usr/bin/env python3
"""Analysis (session 7): how far stock CUDA `qmv` in float16 can be from
`x @ dequantize(w)` on test_qmm's data at M = 8.

On the H200 the patched build failed test_qmm's float16 tolerance (1.5e-3)
at a subtest that could not be named (docs/benchmarks.md, "Stock and patched
MLX built and tested side by side"). Under the overlay's route its M = 8
subtests run the streamed kernel, whose rows are stock `qmv`'s bit for bit
(qmv_matrix), so the question is whether stock `qmv`'s arithmetic can miss
that tolerance. This emulates it in NumPy, as `qmv_kernel_impl` at the pin
computes it: the weights dequantized in float16 (`w * scale + bias`, with
and without the multiply-add contracted into one rounding), per lane and
element slot a float16 running sum of `x * w` for bits < 8 (float for 8),
those sums added in float32 and the result rounded to float16. The data are
test_qmm's (same keys and order), made by MLX on the CPU; the reference is
the exact product rounded to float16. Transposed subtests only (qmv does not
serve the others).

Usage: python3 bench/experiments/cuda_qmv_fp16_error.py  (needs mlx, any backend)
Result (session 7, the patched wheel's CPU build): the largest error over
the 36 configurations is 2.5e-4 (two float16 ulps at the outputs' size), six
times below the tolerance.
"""
from __future__ import annotations

from itertools import product

import mlx.core as mx
import numpy as np


def fp16(a: np.ndarray) -> np.ndarray:
    """Round to float16 and back (one correctly rounded float16 operation)."""
    return a.astype(np.float16).astype(np.float64)


def emulate_qmv(x: np.ndarray, w_dq: np.ndarray, bits: int) -> np.ndarray:
    """qmv_kernel_impl's sums for each row of x (M x K) against w_dq (N x K)."""
    M, K = x.shape
    N = w_dq.shape[0]
    ept = 16 if bits <= 4 else 8  # elems_per_thread for float16
    idx = np.arange(K)
    slot, lane, chunk = idx % ept, (idx // ept) % 32, idx // (32 * ept)
    y = np.zeros((M, N))
    for m in range(M):
        prod = x[m][None, :] * w_dq
        sums = np.zeros((N, 32, ept))
        for r in range(chunk.max() + 1):
            sel = chunk == r
            add = np.zeros_like(sums)
            mask = np.zeros((32, ept), bool)
            add[:, lane[sel], slot[sel]] = prod[:, sel]
            mask[lane[sel], slot[sel]] = True
            acc = sums + add  # one fused multiply-add: exact, then rounded once
            acc = fp16(acc) if bits < 8 else acc.astype(np.float32).astype(np.float64)
            sums = np.where(mask, acc, sums)
        y[m] = fp16(sums.astype(np.float32).sum(axis=(1, 2), dtype=np.float32).astype(np.float64))
    return y


def main() -> int:
    key = mx.random.key(0)
    k1, k2 = mx.random.split(key)
    results = []
    M = 8
    for group_size, bits, N, K in product([128, 64, 32], [2, 4, 8], [128, 256], [128, 256]):
        # The test's keys: the same data as its subtest (the draws depend on key and shape only).
        x = (mx.random.normal(shape=(M, K), key=k1) / K**0.5).astype(mx.float16)
        w = (mx.random.normal(shape=(N, K), key=k2) / K**0.5).astype(mx.float16)
        w_q, scales, biases = mx.quantize(w, group_size, bits)
        w_hat = np.array(mx.dequantize(w_q, scales, biases, group_size, bits)).astype(np.float64)
        q = np.array(mx.dequantize(w_q, mx.ones_like(scales), mx.zeros_like(biases), group_size, bits))
        s = np.repeat(np.array(scales).astype(np.float64), group_size, axis=1)
        b = np.repeat(np.array(biases).astype(np.float64), group_size, axis=1)
        xs = np.array(x).astype(np.float64)
        ref = fp16(xs @ w_hat.T)
        errs = {
            "mul, add": np.abs(emulate_qmv(xs, fp16(fp16(q * s) + b), bits) - ref).max(),
            "fma": np.abs(emulate_qmv(xs, fp16(q * s + b), bits) - ref).max(),
        }
        results.append((max(errs.values()), group_size, bits, N, K, errs))
    results.sort(key=lambda r: r[0], reverse=True)
    print(f"{len(results)} configurations (M = 8, transposed, float16); the largest errors:")
    for err, group_size, bits, N, K, errs in results[:6]:
        detail = ", ".join(f"{k} {v:.3g}" for k, v in errs.items())
        print(f"  group {group_size}, {bits} bits, N {N}, K {K}: {err:.3g} ({detail})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
