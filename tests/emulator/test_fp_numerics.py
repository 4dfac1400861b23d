"""Numerics of the stock fp mat-vec kernels (fp_qmv_fast incl. its
results_per_simdgroup = 2 variant, fp_qmv, fp_qmv_quad, fp_qmv_wide), run in
the emulator, against a float64 reference that decodes the codes and scales
itself (fpquant), for every fp mode (nvfp4 with and without its global
scale), float16, bfloat16, float32, aligned, ragged and narrow shapes.

Bound: the element and scale values are exact in float32 and so are the
products x * w of half/bfloat16 activations (<= 11 + 4 significant bits);
every term then passes through at most d = 32 + K/32 + 10 float32 roundings
(<= 32 in one qdot or quad qdot, one per K block, the scale product, 5 in
simd_sum's tree, the product of float32 activations, the global scale
product), so |y - ref| <= u_T |ref| + (1 + u_T) d 2**-24 sum|terms|.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from overlay_tool.emulator import decode, fpquant
from overlay_tool.emulator.fpparity import VARIANTS

DTYPES = ("float16", "bfloat16", "float32")
UNIT = {"float16": 2.0**-11, "bfloat16": 2.0**-8, "float32": 2.0**-24}
M = 2
# (kind, N, K, results_per_simdgroup)
SHAPES = (
    ("qmv_fast", 16, 512, 4), ("qmv_fast", 16, 512, 2), ("qmv", 16, 512, 4),
    ("qmv", 13, 416, 4), ("qmv", 5, 416, 4),
    ("qmv_quad", 64, 128, 4), ("qmv_quad", 128, 64, 4), ("qmv_wide", 13, 416, 4),
)
# the dispatch runs neither qmv_quad nor qmv_wide with a global scale
CASES = [(dt, mode, g, s) for dt, (mode, g), s in itertools.product(DTYPES, VARIANTS, SHAPES)
         if not (g and s[0] in ("qmv_quad", "qmv_wide"))]


@pytest.fixture(scope="module")
def prepared(fp_emu):
    fp_emu.prepare_qmv(
        dict(kind=kind, mode=mode, global_scale=g, M=M, N=n, K=k, dtype=dt,
             results_per_simdgroup=r)
        for dt, mode, g, (kind, n, k, r) in CASES)
    return fp_emu


def bound(terms: np.ndarray, ref: np.ndarray, k: int, dtype: str) -> np.ndarray:
    d = 32 + k // 32 + 10
    return UNIT[dtype] * np.abs(ref) + (1 + UNIT[dtype]) * d * 2.0**-24 * terms + 1e-30


@pytest.mark.parametrize("dtype", DTYPES)
def test_fp_kernels_match_float64_reference(prepared, dtype, report):
    rng = np.random.default_rng(30 + DTYPES.index(dtype))
    worst, rel, runs = 0.0, 0.0, 0
    for _, mode, g, (kind, n, k, r) in [c for c in CASES if c[0] == dtype]:
        p = fpquant.random_problem(rng, mode=mode, M=M, N=n, K=k, dtype=dtype, global_scale=g)
        assert np.count_nonzero(decode(p["x"], dtype)) == p["x"].size
        y = prepared.qmv(kind, mode=mode, dtype=dtype, results_per_simdgroup=r, **p)
        assert y.shape == (1, M, n)
        out = decode(y, dtype)[0]
        where = f"{kind} {mode}{' global_scale' if g else ''} r={r} {dtype} N={n} K={k}"
        assert np.isfinite(out).all(), f"{where}: unwritten or non-finite outputs"
        args = (p["w"], p["scales"], p["x"], mode, dtype, p["global_scale"])
        ref = fpquant.reference(*args)[0]
        b = bound(fpquant.abs_reference(*args)[0], ref, k, dtype)
        ratio = np.abs(out - ref) / b
        assert (ratio <= 1).all(), f"{where}: |err| exceeds the bound ({ratio.max():.3g})"
        # the bound is not vacuous: a few output ulps at most
        med = float(np.median(b / np.abs(ref)))
        assert med < {"float16": 4e-3, "bfloat16": 2e-2, "float32": 1e-3}[dtype], (where, med)
        worst, rel, runs = max(worst, float(ratio.max())), max(rel, med), runs + 1
    report.append(f"fp numerics {dtype}: {runs} runs; worst |err|/bound = {worst:.3f}, "
                  f"median bound / |y| <= {rel:.2e}")
