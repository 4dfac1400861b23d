"""bench/ninja_first.py: the device build starts MLX's longest objects first,
so that a call cut by its time limit does not lose them again and again
(2026-12-02: copy_general_input.cu.o never finished in four calls)."""
from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "bench" / "ninja_first.py"
sys.path.insert(0, str(ROOT / "bench"))

import ninja_first  # noqa: E402

# A CMake-like manifest: top-level bindings and an include first, indented
# bindings, a statement continued with '$', an output with an escaped ':'.
MANIFEST = """\
ninja_required_version = 1.5
rule cc
  command = echo $out >> order.txt && touch $out
build order_depends: phony
build a.o: cc src || order_depends
  FLAGS = -O3
  DEP_FILE = a.o.d
build b$:x.o: cc src
build long_input.cu.o: cc $
    src || order_depends
  FLAGS = -x cu

build c.o: cc src
  FLAGS = -O2
build lib.a: cc a.o b$:x.o long_input.cu.o c.o
build core: cc lib.a
default core
"""


def _build_order(directory: Path) -> list[str]:
    (directory / "src").write_text("")
    subprocess.run(["ninja", "-C", str(directory), "-j1", "core"], check=True, capture_output=True)
    return (directory / "order.txt").read_text().split()


def test_moves_the_named_statements_before_the_others_and_keeps_every_line() -> None:
    text, moved, unmatched = ninja_first.reorder(MANIFEST, ["long_input", "b$:x"])
    assert moved == ["b$:x.o", "long_input.cu.o"] and unmatched == []
    assert sorted(text.splitlines()) == sorted(MANIFEST.splitlines())
    builds = [line.split(":")[0] for line in text.splitlines() if line.startswith("build ")]
    assert builds == ["build b$", "build long_input.cu.o", "build order_depends", "build a.o", "build c.o",
                      "build lib.a", "build core"]
    # Each statement keeps its continuation and bindings right below it.
    assert "build long_input.cu.o: cc $\n    src || order_depends\n  FLAGS = -x cu\n" in text
    assert "build a.o: cc src || order_depends\n  FLAGS = -O3\n  DEP_FILE = a.o.d\n" in text
    # Again: nothing changes.
    assert ninja_first.reorder(text, ["long_input", "b$:x"])[0] == text


def test_patterns_that_match_nothing_are_named_and_none_at_all_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "build.ninja"
    path.write_text(MANIFEST)
    run = subprocess.run([sys.executable, str(SCRIPT), str(path), "long_input", "qmv_streamed_"],
                         capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    assert run.stdout == "first: long_input.cu.o\n"
    assert run.stderr == f"ninja_first: {path}: no output matches qmv_streamed_\n"
    before = path.read_text()
    run = subprocess.run([sys.executable, str(SCRIPT), str(path), "nothing"], capture_output=True, text=True)
    assert run.returncode == 2 and path.read_text() == before
    assert run.stderr == f"ninja_first: {path}: no output matches nothing\n"
    run = subprocess.run([sys.executable, str(SCRIPT), str(tmp_path / "missing.ninja"), "x"],
                         capture_output=True, text=True)
    assert run.returncode == 2
    assert run.stderr == f"ninja_first: {tmp_path / 'missing.ninja'}: No such file or directory\n"


@pytest.mark.skipif(shutil.which("ninja") is None, reason="ninja is not installed here (Debian: ninja-build)")
def test_ninja_starts_the_moved_object_first(tmp_path: Path) -> None:
    """The reason for the script: ninja starts ready edges in the order the
    manifest declares them. The control is the manifest as CMake wrote it."""
    stock, moved = tmp_path / "stock", tmp_path / "moved"
    for d in (stock, moved):
        d.mkdir()
        (d / "build.ninja").write_text(MANIFEST)
    subprocess.run([sys.executable, str(SCRIPT), str(moved / "build.ninja"), "long_input"], check=True,
                   capture_output=True)
    assert _build_order(stock)[:4] == ["a.o", "b:x.o", "long_input.cu.o", "c.o"]
    assert _build_order(moved)[:4] == ["long_input.cu.o", "a.o", "b:x.o", "c.o"]


def test_the_device_build_moves_mlx_s_longest_objects() -> None:
    script = (ROOT / "bench" / "cuda_mlx_build_device.sh").read_text()
    assert "ninja_first.py\" \"$WORK/build/build.ninja\"" in script
    assert "copy/copy_general_input.cu.o qmm/qmv_streamed_" in script
