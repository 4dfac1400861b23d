#!/usr/bin/env python3
"""Two ways of repeating test_qmm_repeatable's product (12 vectors against
28672 x 8192 weights, group 64) in MLX built whole, to tell qmm_sm80's race
from other reasons for a result to differ (session 27: mlx_repeat.py found
200 of 200 4-bit results different from the first where the test passed):
  test: the test's own loop (lazy inputs, mx.array_equal on the device);
  host: every result copied to the host: how many distinct results there
        are and how often each came, in order of first appearance.
Usage: MLX_QMV_WIDE=1 python3 mlx_modes.py BITS DTYPE REPEATS"""
import collections
import hashlib
import sys

import mlx.core as mx
import numpy as np
from mlx_repeat import DTYPES, data

bits, reps = int(sys.argv[1]), int(sys.argv[3])
x, w = data(8192, 28672, 12, DTYPES[sys.argv[2]], "test")
w_q, scales, biases = mx.quantize(w, 64, bits)


def qmm() -> mx.array:
    return mx.quantized_matmul(x, w_q, scales, biases, True, 64, bits)


y = qmm()
unequal = sum(not mx.array_equal(qmm(), y).item() for _ in range(reps))
print(f"{sys.argv[2]} {bits}-bit test loop: {unequal} of {reps} unequal to the first", flush=True)

seen: dict[str, int] = {}
counts: collections.Counter[str] = collections.Counter()
for _ in range(reps):
    h = hashlib.sha1(np.array(qmm().view(mx.uint16)).tobytes()).hexdigest()
    seen.setdefault(h, len(seen))
    counts[h] += 1
order = sorted(counts, key=seen.__getitem__)
print(f"{sys.argv[2]} {bits}-bit host copies: {len(counts)} distinct results of {reps}, "
      f"counts in order of first appearance: {[counts[h] for h in order][:12]}", flush=True)
