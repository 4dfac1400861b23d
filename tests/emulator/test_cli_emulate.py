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


def test_fp_stage(fp_header: Path, tmp_path: Path, capsys):
    """--fp: the fp type check and negative control on the stock headers, and
    an order-preserving fp_qmv_streamed_impl (fixture) passes."""
    from overlay_tool.emulator.testing import with_fp_streamed_loop_fixture

    kernels = fp_header.parent
    assert main(["emulate", "--quick", "--fp", "--header", str(kernels / "quantized.h")]) == 0
    out = capsys.readouterr().out
    assert "fp negative control: stock fp_qmv_wide differs" in out
    assert "fp_qmv_streamed_impl: not in this header" in out
    for name in ("quantized.h", "fp4.h", "fp8.h"):
        (tmp_path / name).write_text((kernels / name).read_text())
    (tmp_path / "fp_quantized.h").write_text(with_fp_streamed_loop_fixture(fp_header.read_text()))
    assert main(["emulate", "--quick", "--fp", "--header", str(tmp_path / "quantized.h")]) == 0
    assert "fp_qmv_streamed vs M = 1 kernel: 0 of" in capsys.readouterr().out


# An fp "streamed" kernel that forwards to fp_qmv_wide (M-row order, and its
# grid covers only half the rows the qmv_streamed launch expects): must fail.
FP_WIDE_STREAMED = r"""
template <typename T, int group_size, int bits, int vecs_per_tg, bool fast,
          bool has_global_scale, int results_per_simdgroup>
METAL_FUNC void fp_qmv_streamed_impl(
    const device uint32_t* w, const device uint8_t* scales,
    const device float* global_scale, const device T* x, device T* y,
    const constant int& in_vec_size, const constant int& out_vec_size,
    const constant int& M, uint3 tid, uint simd_gid, uint simd_lid) {
  fp_qmv_wide_impl<T, group_size, bits, vecs_per_tg, 16>(
      w, scales, x, y, in_vec_size, out_vec_size, M, tid, simd_gid, simd_lid);
}
"""


def test_fp_reordering_streamed_fails(fp_header: Path, tmp_path: Path, capsys):
    kernels = fp_header.parent
    for name in ("quantized.h", "fp4.h", "fp8.h"):
        (tmp_path / name).write_text((kernels / name).read_text())
    (tmp_path / "fp_quantized.h").write_text(fp_header.read_text() + FP_WIDE_STREAMED)
    assert main(["emulate", "--quick", "--fp", "--header", str(tmp_path / "quantized.h")]) == 10
    captured = capsys.readouterr()
    assert "MISMATCH qmv_streamed mxfp4" in captured.out
    assert "fp_qmv_streamed is not bit-identical" in captured.err
