"""The four core commands through the command line, on the toy project."""

import shutil
from pathlib import Path

import pytest

from conftest import Toy
from overlay_tool.cli import main
from overlay_tool.errors import DirtyCheckout


def run(toy: Toy, capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["-C", str(toy.project.root), *args])
    out = capsys.readouterr()
    return code, out.out, out.err


def test_apply_export_status_check_round_trip(toy_queue: Toy, capsys: pytest.CaptureFixture[str]) -> None:
    shutil.rmtree(toy_queue.work)
    code, out, _ = run(toy_queue, capsys, "apply")
    assert code == 0 and out.splitlines()[1:] == [
        "  applied  0001-Change-a.patch (overlay)", "  applied  0002-Change-b.patch (overlay)"]
    code, out, _ = run(toy_queue, capsys, "export")
    assert (code, out) == (0, "patches/ is up to date (2 patch(es))\n")
    code, out, _ = run(toy_queue, capsys, "status")
    assert code == 0 and "0002-Change-b.patch  overlay   applied" in out
    code, out, _ = run(toy_queue, capsys, "check")
    assert code == 0 and out.endswith("re-export unchanged\n")


def test_errors_are_one_line_with_exit_code_and_hint(toy_queue: Toy, capsys: pytest.CaptureFixture[str]) -> None:
    (toy_queue.work / "src/a.txt").write_text("edit\n")
    code, _, err = run(toy_queue, capsys, "apply")
    assert code == DirtyCheckout.exit_code
    assert err.splitlines() == [
        "mlx-overlay: error: work/mlx has uncommitted changes: src/a.txt",
        "mlx-overlay: hint: commit them (then mlx-overlay export), or re-run with --force to set them aside",
    ]
    code, out, _ = run(toy_queue, capsys, "apply", "--force")
    assert code == 0 and "saved uncommitted work as refs/overlay/saved/" in out


def test_verbose_echoes_git(toy_queue: Toy, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(toy_queue, capsys, "-v", "status")
    assert code == 0 and "+ (cd " in err and "git rev-parse" in err


def test_no_project(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["-C", str(tmp_path), "status"]) == 2
    assert "no pin.toml in" in capsys.readouterr().err
