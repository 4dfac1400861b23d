"""MLX affine quantization, dequantization and a float64 reference, in numpy.

Storage conventions (used by the whole emulator API):

* ``"float16"``  -> ``np.float16`` arrays (``np.uint16`` bit patterns also accepted);
* ``"bfloat16"`` -> ``np.uint16`` bit patterns (float32/float64 arrays are also
  accepted and rounded to bfloat16, nearest-even);
* ``"float32"``  -> ``np.float32`` arrays (``np.uint32`` bit patterns also accepted).

Kernel outputs are always returned as bit patterns: ``np.uint16`` for half and
bfloat16, ``np.uint32`` for float32; :func:`decode` turns them into float64.

:func:`quantize` follows MLX at the pin exactly: ``mlx/backend/cpu/quantized.cpp``
``quantize`` (identical to the ``affine_quantize`` fallback in ``mlx/ops.cpp``),
all in float32, ``rint`` (ties to even), scales/biases rounded to the weight
dtype at the end; checked bit for bit against ``mx.quantize`` of mlx 0.32.4
(tests/emulator/quantize_golden.py). ``variant="metal"`` reads the Metal
``affine_quantize`` kernel instead (w_max starts at 0, ``round`` ties away from
zero): what a Mac's GPU would produce, unverified on hardware; it differs from
the CPU scheme in all-negative groups and at exact ties.
"""

from __future__ import annotations

import numpy as np

from overlay_tool.errors import EmulatorError

DTYPES = ("float16", "bfloat16", "float32")
BITS = (2, 3, 4, 5, 6, 8)
GROUP_SIZES = (32, 64, 128)


def check_dtype(dtype: str) -> str:
    if dtype not in DTYPES:
        raise EmulatorError(f"dtype {dtype!r} is not one of {', '.join(DTYPES)}")
    return dtype


def bits_dtype(dtype: str) -> type:
    return np.uint32 if check_dtype(dtype) == "float32" else np.uint16


def f32_to_bf16_bits(a: np.ndarray) -> np.ndarray:
    """Round float32 values to bfloat16 (nearest-even), as bit patterns."""
    u = np.ascontiguousarray(a, dtype=np.float32).view(np.uint32).astype(np.uint64)
    nan = (u & 0x7FFFFFFF) > 0x7F800000
    r = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)
    r = np.where(nan, ((u >> 16) | 0x40).astype(np.uint16), r)
    return r.astype(np.uint16)


def bf16_bits_to_f32(b: np.ndarray) -> np.ndarray:
    return (np.asarray(b, dtype=np.uint16).astype(np.uint32) << 16).view(np.float32)


def to_bits(a: np.ndarray, dtype: str) -> np.ndarray:
    """Storage array (see module doc) -> contiguous bit-pattern array."""
    a = np.asarray(a)
    check_dtype(dtype)
    if dtype == "float16":
        if a.dtype == np.uint16:
            return np.ascontiguousarray(a)
        if a.dtype != np.float16:
            raise EmulatorError(f"float16 data must be np.float16 or uint16 bits, got {a.dtype}")
        return np.ascontiguousarray(a).view(np.uint16)
    if dtype == "bfloat16":
        if a.dtype == np.uint16:
            return np.ascontiguousarray(a)
        if a.dtype in (np.float32, np.float64):
            return f32_to_bf16_bits(a.astype(np.float32))
        raise EmulatorError(f"bfloat16 data must be uint16 bits (or float32 to round), got {a.dtype}")
    if a.dtype == np.uint32:
        return np.ascontiguousarray(a)
    if a.dtype != np.float32:
        raise EmulatorError(f"float32 data must be np.float32 or uint32 bits, got {a.dtype}")
    return np.ascontiguousarray(a).view(np.uint32)


def decode(bits: np.ndarray, dtype: str) -> np.ndarray:
    """Bit patterns (or storage arrays) of ``dtype`` -> float64."""
    b = to_bits(bits, dtype)
    if dtype == "float16":
        return b.view(np.float16).astype(np.float64)
    if dtype == "bfloat16":
        return bf16_bits_to_f32(b).astype(np.float64)
    return b.view(np.float32).astype(np.float64)


def round_to(a: np.ndarray, dtype: str) -> np.ndarray:
    """Round float values to ``dtype`` storage (nearest-even)."""
    a = np.asarray(a)
    if dtype == "float16":
        return a.astype(np.float16)
    if dtype == "bfloat16":
        return f32_to_bf16_bits(a.astype(np.float32))
    return a.astype(np.float32)


def _pack_geometry(bits: int) -> tuple[int, int]:
    """(values per pack, bytes per pack): the smallest whole-byte pack."""
    vpp = {2: 4, 3: 8, 4: 2, 5: 8, 6: 4, 8: 1}[bits]
    return vpp, vpp * bits // 8


def _pack(q: np.ndarray, bits: int) -> np.ndarray:
    """(rows, K) integer codes -> (rows, K*bits/32) uint32, MLX layout.

    Every MLX affine layout (uint32 words for 2/4/8 bits, 3-byte packs of 8
    values for 3, 5-byte packs for 5, 3-byte packs of 4 for 6) is the same
    little-endian bit stream: value i at bit offset i*bits of the row.
    """
    rows, k = q.shape
    if (k * bits) % 32:
        raise EmulatorError(f"K={k} at {bits} bits is not a whole number of uint32 words")
    vpp, bpp = _pack_geometry(bits)
    qp = q.astype(np.uint64).reshape(rows, k // vpp, vpp)
    shifts = (np.arange(vpp, dtype=np.uint64) * np.uint64(bits))
    packs = (qp << shifts).sum(axis=-1, dtype=np.uint64)  # (rows, k/vpp)
    byte_shifts = np.arange(bpp, dtype=np.uint64) * np.uint64(8)
    by = ((packs[..., None] >> byte_shifts) & np.uint64(0xFF)).astype(np.uint8)
    return np.ascontiguousarray(by.reshape(rows, -1)).view(np.uint32)


def unpack(wq: np.ndarray, bits: int, k: int) -> np.ndarray:
    """Inverse of the packing: (..., K*bits/32) uint32 -> (..., K) int codes."""
    wq = np.ascontiguousarray(wq, dtype=np.uint32)
    lead = wq.shape[:-1]
    vpp, bpp = _pack_geometry(bits)
    by = wq.view(np.uint8).reshape(*lead, -1, bpp).astype(np.uint64)
    packs = (by << (np.arange(bpp, dtype=np.uint64) * np.uint64(8))).sum(axis=-1, dtype=np.uint64)
    shifts = np.arange(vpp, dtype=np.uint64) * np.uint64(bits)
    q = (packs[..., None] >> shifts) & np.uint64((1 << bits) - 1)
    return q.reshape(*lead, -1)[..., :k].astype(np.int64)


def quantize(w, bits: int, group_size: int, dtype: str = "float16", *, variant: str = "cpu"):
    """MLX affine quantization of w (..., N, K) -> (wq, scales, biases).

    ``w`` is first rounded to ``dtype`` (MLX quantizes arrays of that dtype).
    Returns wq uint32 (..., N, K*bits/32) and scales/biases (..., N, K/group_size)
    in ``dtype`` storage (see module doc).
    """
    check_dtype(dtype)
    if bits not in BITS:
        raise EmulatorError(f"bits={bits} is not one of {BITS}")
    if group_size not in GROUP_SIZES:
        raise EmulatorError(f"group_size={group_size} is not one of {GROUP_SIZES}")
    w = np.asarray(w)
    if w.shape[-1] % group_size:
        raise EmulatorError(f"K={w.shape[-1]} is not a multiple of group_size={group_size}")
    lead = w.shape[:-1]
    k = w.shape[-1]
    wt = decode(round_to(w, dtype), dtype).astype(np.float32)  # values of dtype, as float32
    g = wt.reshape(-1, k // group_size, group_size)
    f32 = np.float32
    n_bins = f32((1 << bits) - 1)
    eps = f32(1e-7)
    with np.errstate(divide="ignore", invalid="ignore"):
        w_max = g.max(axis=-1, keepdims=True)
        w_min = g.min(axis=-1, keepdims=True)
        if variant == "metal":
            w_max = np.maximum(w_max, f32(0))
        elif variant != "cpu":
            raise EmulatorError(f"quantize variant {variant!r} is not 'cpu' or 'metal'")
        mask = np.abs(w_min) > np.abs(w_max)
        scale = np.maximum((w_max - w_min) / n_bins, eps).astype(f32)
        scale = np.where(mask, scale, -scale).astype(f32)
        edge = np.where(mask, w_min, w_max).astype(f32)
        rnd = np.rint if variant == "cpu" else (lambda v: np.sign(v) * np.floor(np.abs(v) + f32(0.5)))
        q0 = rnd((edge / scale).astype(f32)).astype(f32)
        nz = q0 != 0
        scale = np.where(nz, (edge / np.where(nz, q0, f32(1))).astype(f32), scale).astype(f32)
        bias = np.where(nz, edge, f32(0)).astype(f32)
        q = rnd(((g - bias).astype(f32) / scale).astype(f32))
        q = np.minimum(np.maximum(q, f32(0)), n_bins)
    q = q.astype(np.uint32).reshape(-1, k)
    wq = _pack(q, bits).reshape(*lead, k * bits // 32)
    scales = round_to(scale.reshape(*lead, k // group_size), dtype)
    biases = round_to(bias.reshape(*lead, k // group_size), dtype)
    return wq, scales, biases


def dequantize(wq, scales, biases, bits: int, group_size: int, dtype: str) -> np.ndarray:
    """Exact float64 dequantization: scale * q + bias with the stored
    (dtype-rounded) scale and bias. Shape (..., N, K)."""
    s = decode(scales, dtype)
    b = decode(biases, dtype)
    k = s.shape[-1] * group_size
    q = unpack(wq, bits, k).astype(np.float64)
    q = q.reshape(*q.shape[:-1], k // group_size, group_size)
    return (q * s[..., None] + b[..., None]).reshape(*s.shape[:-1], k)


def reference(wq, scales, biases, x, bits: int, group_size: int, dtype: str) -> np.ndarray:
    """float64 reference of the quantized product: x (B, M, K) or (M, K) with the
    dequantized weights (N, K) or (B, N, K) -> (B, M, N) float64."""
    xd = decode(x, dtype)
    if xd.ndim == 2:
        xd = xd[None]
    wd = dequantize(wq, scales, biases, bits, group_size, dtype)
    if wd.ndim == 2:
        return np.einsum("bmk,nk->bmn", xd, wd)
    return np.einsum("bmk,bnk->bmn", xd, wd)


def qmv_fast_k_alignment(bits: int) -> int:
    """quantized.cpp: pack_factor<bits, 32> * (bits == 2 ? 1 : 2) * 32."""
    pack_factor = 8 if bits in (3, 5) else (4 if bits == 6 else 32 // bits)
    return pack_factor * (1 if bits == 2 else 2) * 32


def m1_uses_fast(n: int, k: int, bits: int) -> bool:
    """What dispatch_qmv's qmv() picks at M = 1 (bn = 8)."""
    return n % 8 == 0 and k % qmv_fast_k_alignment(bits) == 0


def wide_vecs_per_tg(m: int) -> int:
    """quantized.cpp qmv_wide(): n_tiles = ceil(M/5); vecs_per_tg = ceil(M/n_tiles)."""
    n_tiles = (m + 4) // 5
    return (m + n_tiles - 1) // n_tiles
