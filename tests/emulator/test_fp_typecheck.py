"""The address-space type check of the fp kernels (fp_quantized.h with fp4.h
and fp8.h): the stock kernels pass; a thread pointer passed or cast where
device is expected fails at the header line, although the erased build the
emulator runs accepts it."""

from __future__ import annotations

import re

import numpy as np
import pytest

from overlay_tool.emulator import fpquant
from overlay_tool.emulator.fp import FpEmulator, decoder_sources
from overlay_tool.emulator.fptypecheck import default_instantiations
from overlay_tool.errors import EmulatorError

OLD = "      auto wl = (const device uint8_t*)(ws + row * in_vec_size_w);\n"
PASS_THREAD = ("      uint8_t wbuf[16] = {0};\n"
               "      auto wl = (const thread uint8_t*)wbuf;\n")
CAST_THREAD = ("      uint8_t wbuf[16] = {0};\n"
               "      auto wl = (const device uint8_t*)wbuf;\n")


def test_stock_fp_kernels_pass(fp_emu):
    inst = default_instantiations(fp_emu.text)
    kernels = {f for f, _ in inst}
    assert kernels == {"fp_qmv_impl", "fp_qmv_fast_impl", "fp_qmv_wide_impl", "fp_qmv_quad_impl"}
    fp_emu.typecheck(inst)


@pytest.mark.parametrize("repl,needle", [
    (PASS_THREAD, "no matching function for call to 'qdot'"),
    (CAST_THREAD, "mismatching address spaces"),
])
def test_thread_pointer_where_device_expected_fails(fp_header, tmp_path, repl, needle):
    text = fp_header.read_text()
    at = text.index(OLD, text.index("METAL_FUNC void fp_qmv_fast_impl("))
    line = text.count("\n", 0, at) + 1
    bad = FpEmulator(text[:at] + repl + text[at + len(OLD):],
                     decoders=decoder_sources(text, fp_header), cache_dir=tmp_path / "cache")
    with pytest.raises(EmulatorError) as ei:
        bad.typecheck([("fp_qmv_fast_impl", ("half", 32, 4, False, 4))])
    msg = str(ei.value)
    assert needle in msg and "fp_quantized.h:" in msg, msg
    # the replaced lines, or the qdot call that follows them
    at_line = int(re.search(r"fp_quantized\.h:(\d+):", msg).group(1))
    assert line <= at_line <= line + 6, (line, msg)
    # ... while the erased build the emulator runs accepts it: the check is needed
    p = fpquant.random_problem(np.random.default_rng(0), mode="mxfp4", M=1, N=8, K=512,
                               dtype="float16")
    bad.qmv("qmv_fast", mode="mxfp4", dtype="float16", **p)
