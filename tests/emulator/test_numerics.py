"""Numerics of the stock qmv_fast_impl and qmv_impl, run in the emulator,
against a float64 reference of the dequantized product (MLX affine
quantization), over bits x group sizes x dtypes x aligned and ragged shapes."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from overlay_tool.emulator import decode, dequantize
from overlay_tool.emulator.testing import random_problem

BITS = (2, 3, 4, 5, 6, 8)
GROUPS = (32, 64, 128)
DTYPES = ("float16", "bfloat16", "float32")
UNIT = {"float16": 2.0**-11, "bfloat16": 2.0**-8, "float32": 2.0**-24}
M = 2
# (kind, N, K): aligned for qmv_fast (K % 512 == 0 serves every bits), then
# ragged for qmv: K not a multiple of 512, N % 8 != 0, N < 8.
SHAPES = (("qmv_fast", 16, 512), ("qmv", 16, 512), ("qmv", 13, 384), ("qmv", 5, 640))
CONFIGS = list(itertools.product(DTYPES, BITS, GROUPS))


@pytest.fixture(scope="module")
def prepared(emu):
    emu.prepare_qmv(
        dict(kind=kind, M=M, N=n, K=k, bits=bits, group_size=gs, dtype=dt)
        for dt, bits, gs in CONFIGS
        for kind, n, k in SHAPES
    )
    return emu


def chunk(bits: int) -> int:
    """load_vector adds x values in T in aligned runs of 4 (bits 2, 4, 6),
    8 (bits 3, 5) or 1 (bits 8) before adding the run to its float sum."""
    return {2: 4, 3: 8, 4: 4, 5: 8, 6: 4, 8: 1}[bits]


def t_sums(x, bits: int, dtype: str) -> np.ndarray:
    """The runs of x summed left to right in T precision (numpy float16 adds
    round once per add; bfloat16 emulated with float32 + RNE), as float64,
    shape (M, K / chunk)."""
    from overlay_tool.emulator.quant import bf16_bits_to_f32, f32_to_bf16_bits

    c = chunk(bits)
    xv = decode(x, dtype).reshape(x.shape[0], -1, c)
    if dtype == "float32" or c == 1:
        acc = xv[..., 0].astype(np.float32) if dtype == "float32" else xv[..., 0]
        for i in range(1, c):
            acc = (acc + xv[..., i].astype(np.float32)).astype(np.float32)
        return acc.astype(np.float64)
    if dtype == "float16":
        acc = xv[..., 0].astype(np.float16)
        for i in range(1, c):
            acc = acc + xv[..., i].astype(np.float16)
        return acc.astype(np.float64)
    acc = xv[..., 0].astype(np.float32)
    for i in range(1, c):
        acc = bf16_bits_to_f32(f32_to_bf16_bits(acc + xv[..., i].astype(np.float32)))
    return acc.astype(np.float64)


def structured_reference(p, bits: int, gs: int, dtype: str):
    """float64 product with the bias term on T-precision runs of x, as the
    kernels compute it: y = sum_k s q_k x_k + sum_runs b * T(sum of run)."""
    from overlay_tool.emulator.quant import unpack

    x = decode(p["x"], dtype)  # (M, K)
    k = x.shape[-1]
    s = decode(p["scales"], dtype)
    b = decode(p["biases"], dtype)
    q = unpack(p["w"], bits, k).astype(np.float64)  # (N, K)
    sq = q * np.repeat(s, gs, axis=-1)
    runs = t_sums(p["x"], bits, dtype)  # (M, K/c)
    bc = np.repeat(b, gs // chunk(bits), axis=-1)  # (N, K/c)
    y = x @ sq.T + runs @ bc.T
    # |terms| of the float32 accumulation (products exact in float32)
    terms = np.abs(x) @ np.abs(sq).T + np.abs(runs) @ np.abs(bc).T
    return y, terms


def tight_bound(terms, out_abs, k: int, dtype: str):
    """float32 accumulation and one rounding to T. Every term passes through at
    most d float32 additions: <= 32 inside qdot (values_per_thread), one per
    K block (<= K/32 blocks), 2 in qdot's return, 5 in simd_sum's tree; the
    classic bound is then d*u*sum|terms| (d*u << 1)."""
    d = 32 + k // 32 + 2 + 5 + 1
    return d * 2.0**-24 * terms + UNIT[dtype] * out_abs + 1e-30


def loose_bound(p, bits, gs, dtype, out_abs):
    """Forward bound against the exact float64 product: adds the T-precision
    runs of x (chunk-1 roundings each, times the group's |bias|)."""
    x = np.abs(decode(p["x"], dtype))
    k = x.shape[-1]
    b = np.repeat(np.abs(decode(p["biases"], dtype)), gs, axis=-1)
    _, terms = structured_reference(p, bits, gs, dtype)
    e_runs = (chunk(bits) - 1) * UNIT[dtype] * (x @ b.T) if dtype != "float32" else 0.0
    return e_runs + tight_bound(terms, out_abs, k, dtype)


@pytest.mark.parametrize("dtype", DTYPES)
def test_qmv_fast_and_qmv_match_float64_reference(prepared, dtype, report):
    emu = prepared
    rng = np.random.default_rng(10 + DTYPES.index(dtype))
    worst = worst_loose = rel = 0.0
    for (_, bits, gs), (kind, n, k) in itertools.product(
        [c for c in CONFIGS if c[0] == dtype], SHAPES
    ):
        p = random_problem(rng, M=M, N=n, K=k, bits=bits, group_size=gs, dtype=dtype)
        assert all(np.count_nonzero(decode(p[a], dtype)) == np.size(p[a]) for a in ("x", "scales"))
        y = emu.qmv(kind, **p, bits=bits, group_size=gs, dtype=dtype)
        assert y.shape == (1, M, n)
        out = decode(y, dtype)[0]
        assert np.isfinite(out).all(), f"{kind} {bits}b gs{gs} N={n} K={k}: unwritten outputs"
        from overlay_tool.emulator import reference

        ref = reference(p["w"], p["scales"], p["biases"], p["x"], bits, gs, dtype)[0]
        sref, terms = structured_reference(p, bits, gs, dtype)
        tight = tight_bound(terms, np.abs(sref), k, dtype)
        rt = np.abs(out - sref) / tight
        rl = np.abs(out - ref) / loose_bound(p, bits, gs, dtype, np.abs(ref))
        worst = max(worst, float(rt.max()))
        worst_loose = max(worst_loose, float(rl.max()))
        rel = max(rel, float(np.median(tight / np.abs(sref))))
        where = f"{kind} {dtype} bits={bits} gs={gs} N={n} K={k}"
        assert (rt <= 1).all(), f"{where}: |err| {np.abs(out - sref).max():.3g} exceeds the tight bound ({rt.max():.3g})"
        assert (rl <= 1).all(), f"{where}: |err| vs float64 product exceeds the bound ({rl.max():.3g})"
        # the tight bound is not vacuous: a few output ulps at most
        assert np.median(tight / np.abs(sref)) < {"float16": 4e-3, "bfloat16": 2e-2, "float32": 1e-3}[dtype]
    report.append(
        f"numerics {dtype}: {len(CONFIGS) // 3 * len(SHAPES)} runs; worst |err|/tight bound = {worst:.3f}, "
        f"worst |err|/bound vs float64 product = {worst_loose:.3f}, median tight bound / |y| <= {rel:.2e}"
    )
