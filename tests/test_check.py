import shutil
from pathlib import Path

import pytest

from conftest import Toy, commit_all, sh_git
from overlay_tool.check import check_queue
from overlay_tool.cli import main
from overlay_tool.errors import ConfigError, QueueDoesNotApply, QueueStale, UpstreamUnreachable
from overlay_tool.export import export_queue


def check(toy: Toy) -> list[str]:
    lines: list[str] = []
    check_queue(toy.project, log=lines.append)
    return lines


def exit_code(toy: Toy, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    code = main(["-C", str(toy.project.root), "check"])
    captured = capsys.readouterr()
    return code, captured.out + captured.err


def test_passes_on_a_fresh_export(toy_queue: Toy, capsys: pytest.CaptureFixture[str]) -> None:
    assert exit_code(toy_queue, capsys)[0] == 0


def test_hand_edited_patch_is_stale_with_diff(toy_queue: Toy, capsys: pytest.CaptureFixture[str]) -> None:
    patch = toy_queue.project.patches_dir / "0002-Change-b.patch"
    patch.write_text(patch.read_text().replace("+line twenty\n", "+line 2O\n"))
    code, out = exit_code(toy_queue, capsys)
    assert code == QueueStale.exit_code
    assert "patches/0002-Change-b.patch (re-exported)" in out
    fix = toy_queue.project.root.parent / "fix"
    with pytest.raises(QueueStale) as err:
        check_queue(toy_queue.project, fix_dir=fix, log=lambda _: None)
    assert err.value.hint and str(fix) in err.value.hint
    fixed = (fix / "0002-Change-b.patch").read_bytes()
    assert b"+line 2O\n" in fixed and fixed != patch.read_bytes()  # same edit, consistent index line
    assert (fix / "series").read_text() == toy_queue.project.series_path.read_text()
    assert "mlx-overlay: error: patches/ is not what apply + export produce" in out


def test_reordered_series_fails(toy_queue: Toy, capsys: pytest.CaptureFixture[str]) -> None:
    series = toy_queue.project.series_path
    text = series.read_text()
    series.write_text(text.replace("0001-Change-a.patch overlay\n0002-Change-b.patch overlay",
                                   "0002-Change-b.patch overlay\n0001-Change-a.patch overlay"))
    code, out = exit_code(toy_queue, capsys)
    assert code == ConfigError.exit_code
    assert "0002-Change-b.patch is number 2 but sits at position 1" in out


def test_patch_left_on_disk_but_not_in_series_fails(toy_queue: Toy, capsys: pytest.CaptureFixture[str]) -> None:
    series = toy_queue.project.series_path
    series.write_text(series.read_text().replace("0002-Change-b.patch overlay\n", ""))
    code, out = exit_code(toy_queue, capsys)
    assert code == ConfigError.exit_code
    assert "0002-Change-b.patch: not listed in series" in out


def test_description_and_whitespace_lint(toy_queue: Toy) -> None:
    toy_queue.add_patch("README", "toy\n", "toy \n", "No body")
    export_queue(toy_queue.project, log=lambda _: None)
    lint = "\n".join(_lint_lines(toy_queue))
    assert "0003-No-body.patch: no description" in lint
    assert "0003-No-body.patch:13: trailing whitespace added to README" in lint


def _lint_lines(toy: Toy) -> list[str]:
    lines: list[str] = []
    with pytest.raises(ConfigError, match="2 problems"):
        check_queue(toy.project, log=lines.append)
    return lines


def test_queue_that_does_not_apply(toy_queue: Toy) -> None:
    upstream = toy_queue.upstream
    (upstream / "src/a.txt").write_text("rewritten\n")
    toy_queue.project.pin.with_commit(commit_all(upstream, "upstream rewrites a"))
    with pytest.raises(QueueDoesNotApply, match="0001-Change-a.patch does not apply"):
        check(toy_queue)


def test_unreachable_upstream(toy_queue: Toy, tmp_path: Path) -> None:
    shutil.rmtree(toy_queue.project.cache_dir)
    shutil.rmtree(toy_queue.upstream)
    with pytest.raises(UpstreamUnreachable, match="cannot fetch"):
        check(toy_queue)


def test_missing_pin_commit_is_named(toy_queue: Toy) -> None:
    shutil.rmtree(toy_queue.project.cache_dir)
    toy_queue.project.pin.with_commit("0" * 40)
    with pytest.raises(UpstreamUnreachable, match="upstream.commit 0000000000000000000000000000000000000000 is not in"):
        check(toy_queue)


def test_check_leaves_no_trace(toy_queue: Toy) -> None:
    before = sorted(p.name for p in toy_queue.project.root.rglob("*") if ".git" not in p.parts)
    check(toy_queue)
    assert sorted(p.name for p in toy_queue.project.root.rglob("*") if ".git" not in p.parts) == before
    assert sh_git(toy_queue.project.cache_dir, "worktree", "list").count("\n") == 0


def test_binary_and_deleted_files_round_trip(toy_queue: Toy) -> None:
    (toy_queue.work / "blob.bin").write_bytes(bytes(range(256)) * 4)
    (toy_queue.work / "README").unlink()
    commit_all(toy_queue.work, "Binary and deletion\n\nBoth kinds of diff.")
    export_queue(toy_queue.project, log=lambda _: None)
    assert b"GIT binary patch" in (toy_queue.project.patches_dir / "0003-Binary-and-deletion.patch").read_bytes()
    check(toy_queue)
