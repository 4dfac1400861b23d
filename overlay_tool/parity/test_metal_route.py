"""Metal only: the patched route is the one that runs, and the stock route is caught.

* The streamed kernels (affine and the three fp modes) are compiled into
  ``mlx.metallib`` of the wheel.
* The stock dispatch sends M >= 2 to ``qmv_wide`` on generation >= 15, and
  its rows differ from M = 1. With the overlay's benchmarking switch forcing
  that route (``MLX_QMV_ROUTE=wide``) the same comparison must find
  differing rows (negative control of the route); by default, and with
  ``MLX_QMV_ROUTE=streamed``, none, and the default's bits equal the forced
  streamed route's. Bits cannot tell ``qmv_streamed`` from plain ``qmv``
  (the same order by design): the probe reports the time of each route for
  the record, and the kernel's presence is checked in the metallib.
* The same for the fp modes (mxfp4, nvfp4, mxfp8), whose stock route is
  ``fp_qmv_wide`` on every generation.

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

from parity_lib import FP_STREAMED_KERNELS, ROUTE_ENV, STREAMED_KERNEL, metallib_has_kernel

pytestmark = pytest.mark.skipif(
    __import__("conftest").BACKEND != "metal", reason=f"Metal only (this run's backend: {__import__('conftest').BACKEND})"
)

PROBE = r"""
import json, time
import mlx.core as mx
import numpy as np
import sys
bad = 0; total = 0; digest = []
fp = len(sys.argv) > 1 and sys.argv[1] == "fp"
for bits in ((None,) if fp else (2, 4, 8)):
  for mode in (("mxfp4", "nvfp4", "mxfp8") if fp else ("affine",)):
    for dtype, uint in ((mx.float16, mx.uint16), (mx.float32, mx.uint32)):
        rng = np.random.default_rng(bits or len(mode) + ord(mode[-1]))
        K, N, M = 512, 256, 4
        x = mx.array(rng.standard_normal((M, K)).astype(np.float32)).astype(dtype)
        w = mx.array((rng.standard_normal((N, K)) / 23).astype(np.float32)).astype(dtype)
        if fp:
            wq, s = mx.quantize(w, mode=mode)
            qmm = lambda x: mx.quantized_matmul(x, wq, s, transpose=True, mode=mode)
        else:
            wq, s, b = mx.quantize(w, 64, bits)
            qmm = lambda x: mx.quantized_matmul(x, wq, s, b, True, 64, bits)
        y = np.array(qmm(x).view(uint))
        digest.append(y.tobytes().hex())
        for m in range(M):
            y1 = np.array(qmm(x[m:m+1]).view(uint))
            total += 1
            bad += int((y[m:m+1] != y1).any())
# time of one larger product (for the record only)
K, N, M = 4096, 4096, 8
x = mx.random.normal((M, K)).astype(mx.float16)
if fp:
    wq, s = mx.quantize(mx.random.normal((N, K)).astype(mx.float16) / 64, mode="mxfp4")
    qmm = lambda x: mx.quantized_matmul(x, wq, s, transpose=True, mode="mxfp4")
else:
    wq, s, b = mx.quantize(mx.random.normal((N, K)).astype(mx.float16) / 64, 64, 4)
    qmm = lambda x: mx.quantized_matmul(x, wq, s, b, True, 64, 4)
mx.eval(x, wq, s)
for _ in range(3):
    mx.eval(qmm(x))
t = time.perf_counter()
for _ in range(20):
    mx.eval(qmm(x))
us = (time.perf_counter() - t) / 20 * 1e6
print(json.dumps({"rows": total, "differing": bad, "digest": "".join(digest), "us_M8_4096x4096_4bit": round(us, 1)}))
"""


def _probe(route: str | None, kind: str = "affine") -> dict:
    env = dict(os.environ)
    env.pop(ROUTE_ENV, None)
    env.pop("MLX_QMV_WIDE", None)
    if route is not None:
        env[ROUTE_ENV] = route
    out = subprocess.run([sys.executable, "-c", PROBE, kind], env=env, capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_streamed_kernel_is_in_the_metallib():
    import mlx.core as mx

    libs = list(Path(mx.__file__).parent.parent.rglob("mlx.metallib"))
    if not libs:
        pytest.skip("no mlx.metallib in the wheel (a JIT build compiles kernels at run time)")
    assert metallib_has_kernel(libs[0].read_bytes(), STREAMED_KERNEL), f"{STREAMED_KERNEL} not in {libs[0]}"


@pytest.mark.parametrize("name", FP_STREAMED_KERNELS)
def test_fp_streamed_kernel_is_in_the_metallib(name):
    import mlx.core as mx

    libs = list(Path(mx.__file__).parent.parent.rglob("mlx.metallib"))
    if not libs:
        pytest.skip("no mlx.metallib in the wheel (a JIT build compiles kernels at run time)")
    assert metallib_has_kernel(libs[0].read_bytes(), name), f"{name} not in {libs[0]}"


@pytest.mark.parametrize("kind", ["affine", "fp"])
def test_patched_route_runs_and_stock_route_is_caught(record_property, kind):
    default = _probe(None, kind)
    streamed = _probe("streamed", kind)
    wide = _probe("wide", kind)
    for name, r in (("default", default), ("streamed", streamed), ("wide", wide)):
        record_property(f"us_{kind}_{name}", r["us_M8_4096x4096_4bit"])
    print({k: v["us_M8_4096x4096_4bit"] for k, v in (("default", default), ("streamed", streamed), ("wide", wide))})
    assert default["differing"] == 0, f"default route: {default['differing']} of {default['rows']} rows differ from M=1"
    assert streamed["differing"] == 0, f"{ROUTE_ENV}=streamed: {streamed['differing']} rows differ from M=1"
    assert default["digest"] == streamed["digest"], "the default route's bits are not the streamed route's"
    assert wide["differing"] > 0, f"negative control: {ROUTE_ENV}=wide (stock qmv_wide) matched M=1 bitwise on every row"
