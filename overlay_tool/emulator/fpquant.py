"""MLX's floating-point quantization modes (mxfp4, nvfp4, mxfp8) in numpy:
the mode table, float64 decoders of the element and scale codes, the M = 1
dispatch rule, random test problems and a float64 reference.

Storage (the fp emulator API, see README.md): ``w`` is MLX's packed
``uint32`` array ``(N, K*bits/32)`` (or ``(B, N, ...)``), element ``j`` of a
row in bits ``[bits*j, bits*(j+1))`` of the row's little-endian bytes;
``scales`` is ``uint8`` ``(N, K/group_size)``; ``global_scale`` (nvfp4 only)
a float32 scalar or None; ``x`` as the affine emulator (:mod:`quant`).

The decoders follow the format definitions (OCP MX v1.0: E2M1, E4M3 "fn",
E8M0), not the kernel's bit tricks, so the reference is independent of the
code under test. Test data never uses the NaN codes (E4M3 0x7F/0xFF, E8M0
0xFF), which the kernel does not decode as NaN.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from overlay_tool.emulator import quant
from overlay_tool.emulator.testing import nonzero_normal
from overlay_tool.errors import EmulatorError

# fp_quantized.h: inv_scale_enc = global_scale / (F8E4M3_MAX * F4E2M1_MAX)
F8E4M3_MAX = 448.0
F4E2M1_MAX = 6.0
# quantized.cpp dispatch_qmv: K in these sizes (and no global scale) -> qmv_quad
QUAD_K = (64, 128)


@dataclass(frozen=True)
class FpMode:
    name: str
    bits: int
    group_size: int
    element: str  # "e2m1" or "e4m3"
    scale: str  # "e8m0" or "e4m3" (fp_quantized.h dequantize_scale: e4m3 iff group 16)
    global_scale: bool  # may take a global scale (ops.cpp validate_global_scale)


# mlx/ops.cpp at the pin: fp_quantize / quantization_params_from_mode
MODES: dict[str, FpMode] = {
    "mxfp4": FpMode("mxfp4", 4, 32, "e2m1", "e8m0", False),
    "nvfp4": FpMode("nvfp4", 4, 16, "e2m1", "e4m3", True),
    "mxfp8": FpMode("mxfp8", 8, 32, "e4m3", "e8m0", False),
}


def mode_of(name: str) -> FpMode:
    if name not in MODES:
        raise EmulatorError(f"mode {name!r} is not one of {', '.join(MODES)}")
    return MODES[name]


# ---- decoders -------------------------------------------------------------------
_E2M1 = np.array([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0])


def decode_e2m1(codes: np.ndarray) -> np.ndarray:
    c = np.asarray(codes).astype(np.int64) & 0xF
    return np.where(c & 8, -1.0, 1.0) * _E2M1[c & 7]


def decode_e4m3(codes: np.ndarray) -> np.ndarray:
    """E4M3 "fn": bias 7, subnormals, 0x7F/0xFF NaN, no infinities."""
    c = np.asarray(codes).astype(np.int64) & 0xFF
    e, m = (c >> 3) & 0xF, c & 7
    mag = np.where(e == 0, m / 8.0 * 2.0**-6, (1 + m / 8.0) * np.exp2(e - 7.0))
    mag = np.where((c & 0x7F) == 0x7F, np.nan, mag)
    return np.where(c & 0x80, -1.0, 1.0) * mag


def decode_e8m0(codes: np.ndarray) -> np.ndarray:
    """E8M0: 2**(c - 127), 0xFF NaN."""
    c = np.asarray(codes).astype(np.int64) & 0xFF
    return np.where(c == 0xFF, np.nan, np.exp2(c - 127.0))


DECODERS = {"e2m1": decode_e2m1, "e4m3": decode_e4m3, "e8m0": decode_e8m0}


def unpack_codes(w: np.ndarray, bits: int) -> np.ndarray:
    """Packed uint32 words (..., K*bits/32) -> element codes (..., K)."""
    b = np.ascontiguousarray(w, dtype="<u4").view(np.uint8)
    if bits == 8:
        return b.copy()
    if bits != 4:
        raise EmulatorError(f"fp modes pack 4 or 8 bits, not {bits}")
    return np.stack([b & 0xF, b >> 4], axis=-1).reshape(*b.shape[:-1], -1)


def pack_codes(codes: np.ndarray, bits: int) -> np.ndarray:
    c = np.ascontiguousarray(codes, dtype=np.uint8)
    if bits == 4:
        c = (c[..., 0::2] & 0xF) | (c[..., 1::2] << 4)
    return np.ascontiguousarray(c).view("<u4").astype(np.uint32)


def dequantize(w, scales, mode: str) -> np.ndarray:
    """float64 weights (..., N, K), scales applied, global scale not."""
    md = mode_of(mode)
    vals = DECODERS[md.element](unpack_codes(w, md.bits))
    s = DECODERS[md.scale](np.asarray(scales, dtype=np.uint8))
    return vals * np.repeat(s, md.group_size, axis=-1)


def inv_scale_enc(global_scale) -> float:
    """The kernel's float32 factor ``global_scale / (F8E4M3_MAX * F4E2M1_MAX)``."""
    return float(np.float32(global_scale) / np.float32(F8E4M3_MAX * F4E2M1_MAX))


def reference(w, scales, x, mode: str, dtype: str, global_scale=None) -> np.ndarray:
    """float64 y = x @ W^T (B, M, N) from the decoded codes and scales, times
    the kernel's float32 ``inv_scale_enc`` when a global scale is given."""
    wd = dequantize(w, scales, mode)
    xd = quant.decode(quant.to_bits(x, dtype), dtype)
    if xd.ndim == 2:
        xd = xd[None]
    y = xd @ np.swapaxes(wd, -1, -2)
    if global_scale is not None:
        y = y * inv_scale_enc(global_scale)
    return y


def abs_reference(w, scales, x, mode: str, dtype: str, global_scale=None) -> np.ndarray:
    """float64 sum of |terms| per output (the scale of the rounding errors)."""
    wd = np.abs(dequantize(w, scales, mode))
    xd = np.abs(quant.decode(quant.to_bits(x, dtype), dtype))
    if xd.ndim == 2:
        xd = xd[None]
    y = xd @ np.swapaxes(wd, -1, -2)
    if global_scale is not None:
        y = y * inv_scale_enc(global_scale)
    return y


# ---- dispatch -------------------------------------------------------------------
def m1_kind(n: int, k: int, mode: str, has_global_scale: bool) -> str:
    """The kernel dispatch_qmv (quantized.cpp at the pin) runs at M = 1:
    qmv_quad for K in (64, 128) without a global scale (both fp bit widths are
    powers of 2), else qmv_fast when N % 8 == 0 and K % qmv_fast_k_alignment
    == 0, else qmv."""
    md = mode_of(mode)
    if k in QUAD_K and not has_global_scale:
        return "qmv_quad"
    return "qmv_fast" if quant.m1_uses_fast(n, k, md.bits) else "qmv"


# ---- random problems ------------------------------------------------------------
def _random_codes(rng: np.random.Generator, fmt: str, shape, lo: int, hi: int) -> np.ndarray:
    """Random codes in [lo, hi] of a format, never a NaN code nor zero."""
    c = rng.integers(lo, hi + 1, shape)
    if fmt == "e2m1":
        c = np.where((c & 7) == 0, c | 1, c)
    elif fmt == "e4m3":
        c = np.where((c & 0x7F) == 0, c | 1, c)
        c = np.where((c & 0x7F) == 0x7F, c - 1, c)
    return c.astype(np.uint8)


def random_problem(rng: np.random.Generator, *, mode: str, M: int, N: int, K: int,
                   dtype: str, B: int | None = None, global_scale: bool = False,
                   cancel: bool = False) -> dict:
    """Random packed codes (every nonzero element code, both signs), random
    valid scales, never-zero activations: dict(w, scales, x, global_scale).

    Scales keep outputs inside half's range: e8m0 2**-8..2**-2 (mxfp4),
    2**-12..2**-6 (mxfp8, whose elements reach 448); nvfp4's e4m3 scales span
    2**-3..2**4 with a global scale 2**6..2**12 (the kernel multiplies by
    global_scale / 2688), or 2**-6..2**-1 without one. ``cancel=True`` solves
    N coordinates of each x row so that the exact products are ~0 (see
    :func:`overlay_tool.emulator.testing.random_problem`): order-sensitive data.
    """
    md = mode_of(mode)
    quant.check_dtype(dtype)
    if K % md.group_size:
        raise EmulatorError(f"K={K} is not a multiple of {mode}'s group size {md.group_size}")
    if global_scale and not md.global_scale:
        raise EmulatorError(f"{mode} takes no global scale")
    codes = _random_codes(rng, md.element, (N, K), 0, 2**md.bits - 1)
    w = pack_codes(codes, md.bits)
    g = None
    if md.scale == "e8m0":
        lo, hi = (127 - 12, 127 - 6) if md.bits == 8 else (127 - 8, 127 - 2)
        s = _random_codes(rng, "e8m0", (N, K // md.group_size), lo, hi)
    elif global_scale:
        s = _random_codes(rng, "e4m3", (N, K // md.group_size), 0x20, 0x5F)
        g = np.float32(np.exp2(rng.uniform(6, 12)))
    else:
        s = _random_codes(rng, "e4m3", (N, K // md.group_size), 0x08, 0x30)
    xshape = (M, K) if B is None else (B, M, K)
    if not cancel:
        x = nonzero_normal(rng, xshape)
    else:
        x = _cancelling_x(rng, dequantize(w, s, mode), xshape, dtype)
    x = quant.round_to(x.astype(np.float32), dtype)
    return dict(w=w, scales=s, x=x, global_scale=g)


def _cancelling_x(rng: np.random.Generator, wd: np.ndarray, xshape, dtype: str) -> np.ndarray:
    n, k = wd.shape
    if n >= k:
        raise EmulatorError("cancel=True needs N < K")
    # half: clear of its subnormals; bfloat16/float32: wide enough that float32
    # sums of products over one nvfp4 group are inexact
    lo = -16 if dtype != "float16" else -8
    rows = []
    for _ in range(int(np.prod(xshape[:-1]))):
        v = rng.choice([-1.0, 1.0], k) * np.exp2(rng.uniform(lo, 2, k))
        free = rng.choice(k, min(k - 1, 4 * n), replace=False)
        rest = np.setdiff1d(np.arange(k), free)
        v[free] = np.linalg.lstsq(wd[:, free], -wd[:, rest] @ v[rest], rcond=None)[0]
        v[np.abs(v) < 2.0**lo] = 2.0**lo
        rows.append(v)
    return np.array(rows).reshape(xshape)
