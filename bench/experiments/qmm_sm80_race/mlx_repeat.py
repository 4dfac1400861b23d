#!/usr/bin/env python3
"""The same mx.quantized_matmul evaluated again and again, each result
compared bitwise with the first, in MLX built whole from the queue. With
MLX_QMV_WIDE=1 upstream's route sends these products to qmm_sm80 (whose
epilogue raced before patch 0012, race.cu), without it to the exact qmv.

Each PROBLEM is K,N,M,BITS,DTYPE[,DATA]: DATA "uniform" (default: weights
and vectors uniform in [-1, 1], keys 1 and 2) or "test" (the data of
test_qmm_repeatable in the queue's test_quantized.py: normal, key 0 split).
Without problems it runs session 26's (8192,28672,12,8,bf16 and fp16).
Usage: [MLX_QMV_WIDE=1] python3 mlx_repeat.py [REPEATS] [PROBLEM ...]"""
import sys

import mlx.core as mx
import numpy as np

DTYPES = {"bf16": mx.bfloat16, "fp16": mx.float16, "fp32": mx.float32}


def data(k: int, n: int, m: int, dt: mx.Dtype, kind: str) -> tuple[mx.array, mx.array]:
    if kind == "test":
        k1, k2 = mx.random.split(mx.random.key(0))
        x = mx.random.normal(shape=(m, k), key=k1).astype(dt)
        w = mx.random.normal(shape=(n, k), key=k2).astype(dt)
    elif kind == "uniform":
        w = mx.random.uniform(-1, 1, (n, k), key=mx.random.key(1)).astype(dt)
        x = mx.random.uniform(-1, 1, (m, k), key=mx.random.key(2)).astype(dt)
    else:
        raise SystemExit(f"mlx_repeat.py: unknown data {kind!r} (uniform or test)")
    return x, w


def repeat(spec: str, reps: int) -> int:
    parts = spec.split(",")
    if len(parts) not in (5, 6) or parts[4] not in DTYPES:
        raise SystemExit(f"mlx_repeat.py: bad problem {spec!r} (K,N,M,BITS,DTYPE[,DATA])")
    k, n, m, bits = map(int, parts[:4])
    kind = parts[5] if len(parts) == 6 else "uniform"
    x, w = data(k, n, m, DTYPES[parts[4]], kind)
    wq, s, b = mx.quantize(w, group_size=64, bits=bits)
    mx.eval(wq, s, b, x)

    def qmm() -> np.ndarray:
        o = mx.quantized_matmul(x, wq, s, b, transpose=True, group_size=64, bits=bits)
        return np.array(o.view(mx.uint16 if o.dtype != mx.float32 else mx.uint32))

    ref = qmm()
    differ = 0
    most = 0
    for _ in range(reps):
        d = int((qmm() != ref).sum())
        differ += d > 0
        most = max(most, d)
    print(f"{parts[4]} {bits}-bit {k}x{n} M={m} {kind}: {differ} of {reps} results differ "
          f"from the first (at most {most} of {m * n} outputs)", flush=True)
    return differ


def main() -> None:
    reps = int(sys.argv[1]) if len(sys.argv) > 1 else 1000
    specs = sys.argv[2:] or ["8192,28672,12,8,bf16", "8192,28672,12,8,fp16"]
    for spec in specs:
        repeat(spec, reps)


if __name__ == "__main__":
    main()
