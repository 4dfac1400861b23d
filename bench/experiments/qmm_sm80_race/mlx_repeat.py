#!/usr/bin/env python3
"""The same mx.quantized_matmul evaluated again and again, each result
compared bitwise with the first: in MLX built whole from the queue, with
MLX_QMV_WIDE=1 upstream's route sends 12 vectors on 8192 x 28672 to
qmm_sm80 (whose epilogue races, race.cu), without it to the exact qmv.
Usage: [MLX_QMV_WIDE=1] python3 mlx_repeat.py [REPEATS]"""
import sys

import mlx.core as mx
import numpy as np

reps = int(sys.argv[1]) if len(sys.argv) > 1 else 1000
k, n, m = 8192, 28672, 12
for dt, name in ((mx.bfloat16, "bf16"), (mx.float16, "fp16")):
    w = mx.random.uniform(-1, 1, (n, k), key=mx.random.key(1)).astype(dt)
    wq, s, b = mx.quantize(w, group_size=64, bits=8)
    x = mx.random.uniform(-1, 1, (m, k), key=mx.random.key(2)).astype(dt)
    mx.eval(wq, s, b, x)

    def qmm() -> np.ndarray:
        o = mx.quantized_matmul(x, wq, s, b, transpose=True, group_size=64, bits=8)
        return np.array(o.view(mx.uint16))

    ref = qmm()
    differ = 0
    most = 0
    for _ in range(reps):
        d = int((qmm() != ref).sum())
        differ += d > 0
        most = max(most, d)
    print(f"{name} 8-bit {k}x{n} M={m}: {differ} of {reps} results differ from the first "
          f"(at most {most} of {m * n} outputs)", flush=True)
