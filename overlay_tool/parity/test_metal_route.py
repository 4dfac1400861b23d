"""Metal only: the patched route is the one that runs, and the stock route is caught.

* The streamed kernel is compiled into ``mlx.metallib`` of the wheel.
* The stock dispatch sends M >= 2 to ``qmv_wide`` on generation >= 15, and
  its rows differ from M = 1. With the overlay's benchmarking switch forcing
  that route (``MLX_QMV_ROUTE=wide``) the same comparison must find
  differing rows (negative control of the route); by default, and with
  ``MLX_QMV_ROUTE=streamed``, none, and the default's bits equal the forced
  streamed route's. Bits cannot tell ``qmv_streamed`` from plain ``qmv``
  (the same order by design): the probe reports the time of each route for
  the record, and the kernel's presence is checked in the metallib.

The switch is read by MLX when the process starts, so each side runs in a
subprocess of this python.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from parity_lib import ROUTE_ENV, STREAMED_KERNEL, metallib_has_kernel

pytestmark = pytest.mark.skipif(
    __import__("conftest").BACKEND != "metal", reason=f"Metal only (this run's backend: {__import__('conftest').BACKEND})"
)

PROBE = r"""
import json, time
import mlx.core as mx
import numpy as np
bad = 0; total = 0; digest = []
for bits in (2, 4, 8):
    for dtype, uint in ((mx.float16, mx.uint16), (mx.float32, mx.uint32)):
        rng = np.random.default_rng(bits)
        K, N, M = 512, 256, 4
        x = mx.array(rng.standard_normal((M, K)).astype(np.float32)).astype(dtype)
        w = mx.array((rng.standard_normal((N, K)) / 23).astype(np.float32)).astype(dtype)
        wq, s, b = mx.quantize(w, 64, bits)
        y = np.array(mx.quantized_matmul(x, wq, s, b, True, 64, bits).view(uint))
        digest.append(y.tobytes().hex())
        for m in range(M):
            y1 = np.array(mx.quantized_matmul(x[m:m+1], wq, s, b, True, 64, bits).view(uint))
            total += 1
            bad += int((y[m:m+1] != y1).any())
# time of one larger product (for the record only)
K, N, M = 4096, 4096, 8
x = mx.random.normal((M, K)).astype(mx.float16)
wq, s, b = mx.quantize(mx.random.normal((N, K)).astype(mx.float16) / 64, 64, 4)
mx.eval(x, wq, s, b)
for _ in range(3):
    mx.eval(mx.quantized_matmul(x, wq, s, b, True, 64, 4))
t = time.perf_counter()
for _ in range(20):
    mx.eval(mx.quantized_matmul(x, wq, s, b, True, 64, 4))
us = (time.perf_counter() - t) / 20 * 1e6
print(json.dumps({"rows": total, "differing": bad, "digest": "".join(digest), "us_M8_4096x4096_4bit": round(us, 1)}))
"""


def _probe(route: str | None) -> dict:
    env = dict(os.environ)
    env.pop(ROUTE_ENV, None)
    env.pop("MLX_QMV_WIDE", None)
    if route is not None:
        env[ROUTE_ENV] = route
    out = subprocess.run([sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_streamed_kernel_is_in_the_metallib():
    import mlx.core as mx

    libs = list(Path(mx.__file__).parent.parent.rglob("mlx.metallib"))
    if not libs:
        pytest.skip("no mlx.metallib in the wheel (a JIT build compiles kernels at run time)")
    assert metallib_has_kernel(libs[0].read_bytes(), STREAMED_KERNEL), f"{STREAMED_KERNEL} not in {libs[0]}"


def test_patched_route_runs_and_stock_route_is_caught(record_property):
    default = _probe(None)
    streamed = _probe("streamed")
    wide = _probe("wide")
    for name, r in (("default", default), ("streamed", streamed), ("wide", wide)):
        record_property(f"us_{name}", r["us_M8_4096x4096_4bit"])
    print({k: v["us_M8_4096x4096_4bit"] for k, v in (("default", default), ("streamed", streamed), ("wide", wide))})
    assert default["differing"] == 0, f"default route: {default['differing']} of {default['rows']} rows differ from M=1"
    assert streamed["differing"] == 0, f"{ROUTE_ENV}=streamed: {streamed['differing']} rows differ from M=1"
    assert default["digest"] == streamed["digest"], "the default route's bits are not the streamed route's"
    assert wide["differing"] > 0, f"negative control: {ROUTE_ENV}=wide (stock qmv_wide) matched M=1 bitwise on every row"
