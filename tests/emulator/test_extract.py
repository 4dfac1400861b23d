"""Extraction: verbatim text, #line markers that map onto the header, the
dependency closure, overloads, threadgroup declarations."""

from __future__ import annotations

import re

import pytest

from overlay_tool.emulator import DEFAULT_FUNCTIONS, EmulatorError
from overlay_tool.emulator.extract import extract, split_items


def test_default_functions_verbatim_with_line_markers(stock_text):
    ex = extract(stock_text, DEFAULT_FUNCTIONS, label="q.h")
    lines = stock_text.splitlines()
    blocks = re.split(r'^#line (\d+) "q\.h"\n', ex.source, flags=re.M)[1:]
    assert len(blocks) == 2 * len(ex.names)
    for start, body in zip(blocks[::2], blocks[1::2]):
        start = int(start)
        body_lines = body.rstrip("\n").splitlines()
        # every line is the header's line at the marker's offset
        assert body_lines == lines[start - 1: start - 1 + len(body_lines)]
    # the closure brings the constants the kernels use, and nothing unrelated
    assert {"MLX_MTL_CONST", "SIMD_SIZE", *DEFAULT_FUNCTIONS} <= set(ex.names)
    assert "QuantizedBlockLoader" not in ex.names and "qmm_t_impl" not in ex.names


def test_overloads_and_items(stock_text):
    items = split_items(stock_text)
    names = [it.name for it in items if it.name]
    assert names.count("adjust_matrix_offsets") == 2
    ex = extract(stock_text, ["adjust_matrix_offsets"], label="q.h")
    assert ex.names.count("adjust_matrix_offsets") == 2
    kinds = {it.name: it.kind for it in items if it.name}
    assert kinds["QuantizedBlockLoader"] == "struct" and kinds["SIMD_SIZE"] == "variable"
    assert kinds["MLX_MTL_CONST"] == "macro" and kinds["qmv_fast_impl"] == "function"


def test_missing_name():
    with pytest.raises(EmulatorError, match="'nope'"):
        extract("inline int f() { return 1; }\n", ["f", "nope"])


def test_threadgroup_array_declarations_become_shared():
    text = ("template <typename T>\nvoid k(threadgroup T* p) {\n"
            "  threadgroup float buf[2][8];\n  threadgroup T* q = p;\n}\n")
    src = extract(text, ["k"]).source
    assert "  EMU_THREADGROUP_DECL float buf[2][8];" in src
    assert "void k(threadgroup T* p)" in src and "  threadgroup T* q = p;" in src
