"""`mlx-overlay emulate`: the type check, the negative control and, when the
header has it, qmv_streamed's row parity with the M = 1 kernel."""

from __future__ import annotations

from pathlib import Path

import pytest

from overlay_tool.cli import main
from overlay_tool.emulator.testing import with_streamed_loop_fixture

# A "streamed" kernel that forwards to qmv_wide: fast, and not order-preserving.
WIDE_STREAMED = r"""
template <typename T, int group_size, int bits, int vecs_per_tg, bool fast>
METAL_FUNC void qmv_streamed_impl(
    const device uint32_t* w, const device T* scales, const device T* biases,
    const device T* x, device T* y, const constant int& in_vec_size,
    const constant int& out_vec_size, const constant int& M, uint3 tid,
    uint simd_gid, uint simd_lid) {
  qmv_wide_impl<T, group_size, bits, vecs_per_tg, 8>(
      w, scales, biases, x, y, in_vec_size, out_vec_size, M, tid, simd_gid, simd_lid);
}
"""


def test_stock_header(stock_header: Path, capsys):
    assert main(["emulate", "--quick", "--header", str(stock_header)]) == 0
    out = capsys.readouterr().out
    assert "type check:" in out and "negative control: stock qmv_wide differs" in out
    assert "not in this header" in out


def test_order_preserving_streamed_passes(stock_text: str, tmp_path: Path, capsys):
    hdr = tmp_path / "quantized.h"
    hdr.write_text(with_streamed_loop_fixture(stock_text))
    assert main(["emulate", "--quick", "--header", str(hdr)]) == 0
    assert "qmv_streamed vs M = 1 kernel: 0 of" in capsys.readouterr().out


def test_reordering_streamed_fails(stock_text: str, tmp_path: Path, capsys):
    hdr = tmp_path / "quantized.h"
    hdr.write_text(stock_text + WIDE_STREAMED)
    assert main(["emulate", "--quick", "--header", str(hdr)]) == 10
    captured = capsys.readouterr()
    assert "MISMATCH" in captured.out and "not bit-identical" in captured.err


def test_missing_header_is_a_config_error(tmp_path: Path):
    assert main(["emulate", "--header", str(tmp_path / "nope.h")]) == 2
