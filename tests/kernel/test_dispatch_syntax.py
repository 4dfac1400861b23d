"""quantized.cpp of the patched checkout type-checks (clang -fsyntax-only).

No Metal toolchain exists on Linux, so nothing else compiles the dispatch
patches before a Mac does. This compiles the patched
mlx/backend/metal/quantized.cpp syntax-only against a stub of the metal-cpp
names MLX's headers use (tests/kernel/stub/Metal/Metal.hpp): C++ errors in
the patches (types, calls, signatures) show here.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

STUB = Path(__file__).parent / "stub"


def syntax_check(checkout: Path, source: Path) -> subprocess.CompletedProcess:
    cxx = shutil.which("clang++") or shutil.which("g++")
    assert cxx, "clang++ or g++ is needed"
    return subprocess.run(
        [cxx, "-std=c++20", "-fsyntax-only", "-I", str(checkout), "-I", str(STUB), str(source)],
        capture_output=True, text=True,
    )


def test_patched_quantized_cpp_type_checks(patched_checkout):
    src = patched_checkout / "mlx/backend/metal/quantized.cpp"
    assert "qmv_streamed(" in src.read_text()
    r = syntax_check(patched_checkout, src)
    assert r.returncode == 0, r.stderr[-4000:]


def test_syntax_check_sees_errors(patched_checkout, tmp_path):
    # The stub must not make the check vacuous: a broken line is reported.
    text = (patched_checkout / "mlx/backend/metal/quantized.cpp").read_text()
    bad = tmp_path / "quantized_bad.cpp"
    bad.write_text(text.replace("int vecs_per_tg = 0) {", "int vecs_per_tg = 0) {\n  undeclared_name += 1;", 1))
    r = syntax_check(patched_checkout, bad)
    assert r.returncode != 0 and "undeclared_name" in r.stderr
