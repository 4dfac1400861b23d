"""No test module defines a name twice at one level.

Python keeps the last of two functions of the same name, so a test defined
again further down a module silently replaces the first one, which pytest
then never collects or runs (tests/cuda/test_cuda_harness.py had two
`test_patched_quantized_cpp_compiles` until session 23: the nvcc front-end
check never ran). This scans the project's own Python files.
"""
from __future__ import annotations

import ast
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# The project's Python: the tool, its tests and the bench scripts (not the
# work checkout, builds or virtual environments).
SOURCES = ("overlay_tool", "tests", "bench", "ci")


def redefined(source: str, filename: str = "<source>") -> list[str]:
    """Names defined twice (functions or classes, module level or in the
    same class body), as `scope.name`."""

    found: list[str] = []

    def scan(body: list[ast.stmt], scope: str) -> None:
        counts = Counter(
            node.name
            for node in body
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
        )
        found.extend(f"{scope}.{name}" for name, n in counts.items() if n > 1)
        for node in body:
            if isinstance(node, ast.ClassDef):
                scan(node.body, f"{scope}.{node.name}")

    scan(ast.parse(source, filename).body, Path(filename).stem)
    return found


def test_redefined_finds_a_shadowed_test_and_passes_overloads_in_other_scopes() -> None:
    src = (
        "def test_a(): pass\n"
        "def test_b(): pass\n"
        "def test_a(): assert False\n"
        "class TestX:\n"
        "    def test_c(self): pass\n"
        "    def test_c(self): pass\n"
        "class TestY:\n"
        "    def test_b(self): pass\n"
    )
    assert redefined(src, "m.py") == ["m.test_a", "m.TestX.test_c"]
    assert redefined("def f(): pass\nclass C:\n    def f(self): pass\n") == []


def test_no_project_module_defines_a_name_twice() -> None:
    files = [p for d in SOURCES for p in sorted((ROOT / d).rglob("*.py"))
             if "node_modules" not in p.parts]
    assert len(files) > 30, files  # the scan sees the suite
    clashes = [f"{p.relative_to(ROOT)}: {name}"
               for p in files for name in redefined(p.read_text(), str(p))]
    assert clashes == [], "defined twice (the first is never run):\n" + "\n".join(clashes)
