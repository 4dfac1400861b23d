"""overlay_tool.emulator.quantize is MLX's affine quantization bit for bit
(golden digests recorded from mx.quantize, see quantize_golden.py), and
dequantize/pack round-trip."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from overlay_tool.emulator import decode, quantize, round_to
from overlay_tool.emulator.quant import _pack, unpack

from .quantize_golden import BITS, DTYPES, GOLDEN, GROUPS, digest, weights


@pytest.mark.parametrize("dtype", DTYPES)
def test_quantize_matches_mlx_bit_for_bit(dtype):
    for bits, gs in itertools.product(BITS, GROUPS):
        w = weights(dtype, bits, gs)
        wq, s, b = quantize(w, bits, gs, dtype)
        got = digest(wq, decode(s, dtype).astype(np.float32), decode(b, dtype).astype(np.float32))
        assert got == GOLDEN[dtype, bits, gs], f"{dtype} bits={bits} gs={gs}"


@pytest.mark.parametrize("bits", BITS)
def test_pack_is_mlx_bit_stream(bits):
    rng = np.random.default_rng(bits)
    q = rng.integers(0, 2**bits, (3, 256))
    p = _pack(q, bits)
    assert p.dtype == np.uint32 and p.shape == (3, 256 * bits // 32)
    assert (unpack(p, bits, 256) == q).all()
    stream = np.unpackbits(p.view(np.uint8), axis=-1, bitorder="little").reshape(3, 256, bits)
    assert ((stream.astype(np.int64) << np.arange(bits)).sum(-1) == q).all()
