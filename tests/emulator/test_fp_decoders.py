"""The float64 decoders of fpquant (written from the format definitions)
against known values, and against the kernel's own decoders (fp4.h, fp8.h
bit tricks) for every code: one-hot activations through the stock M = 1 fp
kernel in float32 return element * scale exactly."""

from __future__ import annotations

import numpy as np
import pytest

from overlay_tool.emulator import decode, fpquant

K = 512  # fp_qmv_fast for both bit widths
N = 16


def test_known_values():
    assert list(fpquant.decode_e2m1(np.arange(16))) == [
        0, 0.5, 1, 1.5, 2, 3, 4, 6, -0.0, -0.5, -1, -1.5, -2, -3, -4, -6]
    e4 = fpquant.decode_e4m3(np.array([0x01, 0x07, 0x08, 0x38, 0x7E, 0xFE, 0x80]))
    assert list(e4) == [2.0**-9, 7 * 2.0**-9, 2.0**-6, 1.0, 448.0, -448.0, -0.0]
    assert np.isnan(fpquant.decode_e4m3(np.array([0x7F, 0xFF]))).all()
    assert list(fpquant.decode_e8m0(np.array([0, 127, 254]))) == [2.0**-127, 1.0, 2.0**127]
    assert np.isnan(fpquant.decode_e8m0(np.array([255]))).all()
    assert fpquant.inv_scale_enc(2688.0) == 1.0


def test_pack_roundtrip():
    rng = np.random.default_rng(0)
    for bits in (4, 8):
        c = rng.integers(0, 2**bits, (3, 64)).astype(np.uint8)
        w = fpquant.pack_codes(c, bits)
        assert w.shape == (3, 64 * bits // 32) and w.dtype == np.uint32
        assert (fpquant.unpack_codes(w, bits) == c).all()


def _one_hot_run(fp_emu, mode: str, codes: np.ndarray, scales: np.ndarray, g=None):
    """y[m, n] for x = e_m (float32): element (n, m) times its scale."""
    md = fpquant.mode_of(mode)
    x = np.eye(K, dtype=np.float32)
    w = fpquant.pack_codes(codes, md.bits)
    y = fp_emu.qmv("qmv_m1", mode=mode, w=w, scales=scales, x=x, dtype="float32",
                   global_scale=g)
    return decode(y, "float32")[0].T  # (N, K)


def _layout(values: np.ndarray) -> np.ndarray:
    """Spread codes over an (N, K) array (cycled)."""
    return np.resize(values, N * K).reshape(N, K).astype(np.uint8)


@pytest.mark.parametrize("mode", ["mxfp4", "mxfp8"])
def test_every_element_code_through_the_kernel(fp_emu, mode):
    md = fpquant.mode_of(mode)
    codes = np.arange(2**md.bits)
    if md.element == "e4m3":
        codes = codes[(codes & 0x7F) != 0x7F]  # NaN codes: the kernel decodes them as 480
    c = _layout(codes)
    s = np.full((N, K // md.group_size), 127, np.uint8)  # e8m0 1.0
    got = _one_hot_run(fp_emu, mode, c, s)
    want = fpquant.DECODERS[md.element](c)
    assert np.array_equal(got, want)


@pytest.mark.parametrize("mode,global_scale", [("mxfp4", None), ("nvfp4", None), ("nvfp4", 1000.0)])
def test_every_scale_code_through_the_kernel(fp_emu, mode, global_scale):
    md = fpquant.mode_of(mode)
    codes = np.arange(255) if md.scale == "e8m0" else np.array(
        [c for c in range(256) if (c & 0x7F) != 0x7F])
    c = np.full((N, K), 0x2, np.uint8)  # e2m1 1.0
    s = np.resize(codes, N * (K // md.group_size)).reshape(N, -1).astype(np.uint8)
    got = _one_hot_run(fp_emu, mode, c, s, global_scale)
    want = np.repeat(fpquant.DECODERS[md.scale](s), md.group_size, axis=-1)
    if global_scale is not None:
        # y = float32(scale * 1.0 * inv_scale_enc): one float32 rounding
        want = (want * fpquant.inv_scale_enc(global_scale)).astype(np.float32).astype(np.float64)
    assert np.array_equal(got, want)
