"""Metal only: the patched route is the one that runs, and the stock route is caught.

* The streamed kernel is compiled into ``mlx.metallib`` of the wheel.
* On Apple GPU generation >= 15 the stock dispatch sends M >= 2 to
  ``qmv_wide``, whose rows differ from M = 1. With the overlay's switch back
  to the stock route (``STOCK_ROUTE_ENV``) the same comparison must find
  differing rows (negative control of the route); without it, none. Together
  they show the default product did not run through ``qmv_wide``.

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

from parity_lib import STOCK_ROUTE_ENV, STREAMED_KERNEL, metallib_has_kernel, uses_qmv_wide

pytestmark = pytest.mark.skipif(
    __import__("conftest").BACKEND != "metal", reason=f"Metal only (this run's backend: {__import__('conftest').BACKEND})"
)

PROBE = r"""
import json, sys
import mlx.core as mx
import numpy as np
bad = 0; total = 0
for bits in (2, 4, 8):
    for dtype, uint in ((mx.float16, mx.uint16), (mx.float32, mx.uint32)):
        rng = np.random.default_rng(bits)
        K, N, M = 512, 256, 4
        x = mx.array(rng.standard_normal((M, K)).astype(np.float32)).astype(dtype)
        w = mx.array((rng.standard_normal((N, K)) / 23).astype(np.float32)).astype(dtype)
        wq, s, b = mx.quantize(w, 64, bits)
        y = np.array(mx.quantized_matmul(x, wq, s, b, True, 64, bits).view(uint))
        for m in range(M):
            y1 = np.array(mx.quantized_matmul(x[m:m+1], wq, s, b, True, 64, bits).view(uint))
            total += 1
            bad += int((y[m:m+1] != y1).any())
print(json.dumps({"rows": total, "differing": bad}))
"""


def _probe(extra_env: dict[str, str]) -> dict:
    env = dict(os.environ)
    env.pop(STOCK_ROUTE_ENV, None)
    env.update(extra_env)
    out = subprocess.run([sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_streamed_kernel_is_in_the_metallib():
    import mlx.core as mx

    libs = list(Path(mx.__file__).parent.parent.rglob("mlx.metallib"))
    if not libs:
        pytest.skip("no mlx.metallib in the wheel (a JIT build compiles kernels at run time)")
    assert metallib_has_kernel(libs[0].read_bytes(), STREAMED_KERNEL), f"{STREAMED_KERNEL} not in {libs[0]}"


def test_patched_route_runs_and_stock_route_is_caught(arch):
    if not uses_qmv_wide(arch):
        pytest.skip(f"{arch}: generation < 15 routes M >= 2 to qmv (already exact); qmv_wide never runs here")
    default = _probe({})
    stock = _probe({STOCK_ROUTE_ENV: "1"})
    assert default["differing"] == 0, f"patched route: {default}"
    assert stock["differing"] > 0, f"negative control: the stock qmv_wide route ({STOCK_ROUTE_ENV}=1) matched M=1 bitwise: {stock}"
