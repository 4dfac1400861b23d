"""The address-space type check (C++ for OpenCL): stock quantized.h passes;
a thread pointer passed or cast where device is expected fails, pointing at
the header line, although the erased-address-space emulator build accepts it."""

from __future__ import annotations

import numpy as np
import pytest

from overlay_tool.emulator import Emulator, EmulatorError, typecheck
from overlay_tool.emulator.testing import random_problem

OLD = "      auto wl = (const device uint8_t*)(ws + row * in_vec_size_w);\n"


def _bad(stock_text: str, repl: str) -> tuple[str, int]:
    start = stock_text.index("METAL_FUNC void qmv_fast_impl(")
    at = stock_text.index(OLD, start)
    line = stock_text.count("\n", 0, at) + 1
    return stock_text[:at] + repl + stock_text[at + len(OLD):], line


def test_stock_header_passes(stock_header):
    typecheck(stock_header)  # every stock kernel, float and half, all bits and group sizes


def test_emulator_method(emu):
    emu.typecheck([("qmv_wide_impl", ("half", 64, 4, 5, 8), True)])


# A kernel that keeps weight bytes in registers and hands them to the device
# qdot: what the Metal compiler rejects.
PASS_THREAD = ("      uint8_t wbuf[16] = {0};\n"
               "      auto wl = (const thread uint8_t*)wbuf;\n")
CAST_THREAD = ("      uint8_t wbuf[16] = {0};\n"
               "      auto wl = (const device uint8_t*)wbuf;\n")


@pytest.mark.parametrize("repl,needle", [
    (PASS_THREAD, "no matching function for call to 'qdot'"),
    (CAST_THREAD, "mismatching address spaces"),
])
def test_thread_pointer_where_device_expected_fails(stock_text, tmp_path, repl, needle):
    text, line = _bad(stock_text, repl)
    hdr = tmp_path / "quantized.h"
    hdr.write_text(text)
    with pytest.raises(EmulatorError) as ei:
        typecheck(hdr, [("qmv_fast_impl", ("half", 64, 4), False)])
    msg = str(ei.value)
    assert needle in msg and f"{hdr}:" in msg, msg
    # ... while the erased build the emulator runs accepts it: the check is needed
    e = Emulator(hdr, cache_dir=tmp_path / "cache")
    p = random_problem(np.random.default_rng(0), M=1, N=8, K=512, bits=4, group_size=64, dtype="float16")
    e.qmv("qmv_fast", **p, bits=4, group_size=64, dtype="float16")
