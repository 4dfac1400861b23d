"""drift on throwaway repositories: commits grouped by patch, the forward check, exit codes."""

from __future__ import annotations

import json

import pytest

from conftest import Toy
from overlay_tool.cli import main
from overlay_tool.drift import check_drift, collect
from overlay_tool.errors import QueueDoesNotApply
from test_rebase import A1, B2, bump, rows_of


def test_no_drift(toy_queue: Toy, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["-C", str(toy_queue.project.root), "drift"]) == 0
    out = capsys.readouterr().out
    assert "0 upstream commit(s), 0 touch patched files" in out
    assert "the queue applies to origin/main: yes (2 clean)" in out


def test_commits_grouped_by_patch_and_three_way_still_applies(toy_queue: Toy) -> None:
    readme = bump(toy_queue, "Touch only the README", {"README": "toy=>toy2"})
    near_a = bump(toy_queue, "Edit near 0001", {"src/a.txt": "line 13\n=>line thirteen\n"})
    lines: list[str] = []
    drift = check_drift(toy_queue.project, "main", log=lines.append)  # a branch: fetched first
    assert drift.commits[A1][0].startswith(near_a[:12]) and drift.commits[B2] == []
    assert not any(readme[:12] in line for line in lines)
    assert rows_of(lines) == {A1: "3-way", B2: "clean"} and drift.applies
    assert any("2 upstream commit(s), 1 touch patched files" in line for line in lines)


def test_default_ref_is_what_the_cache_knows_until_fetch(toy_queue: Toy) -> None:
    bump(toy_queue, "upstream rewrites line 10", {"src/a.txt": "line 10\n=>line ten\n"})
    assert collect(toy_queue.project, log=lambda _: None).applies  # cache not fetched: still the pin
    with pytest.raises(QueueDoesNotApply, match=f"{A1}"):
        check_drift(toy_queue.project, fetch=True, log=lambda _: None)


def test_exit_codes(toy_queue: Toy, capsys: pytest.CaptureFixture[str]) -> None:
    root = str(toy_queue.project.root)
    gone = bump(toy_queue, "Remove b", {"src/b.txt": None})
    assert main(["-C", root, "drift", "--against", "main", "--json", str(toy_queue.project.root / "d.json")]) == 5
    data = json.loads((toy_queue.project.root / "d.json").read_text())
    assert data["applies"] is False and data["rows"][1]["result"] == "deleted" and data["target"] == gone
    captured = capsys.readouterr()
    assert f"src/b.txt deleted upstream by {gone[:12]}" in captured.out
    assert "the queue applies to main: NO" in captured.out
    assert "mlx-overlay: error: 1 patch(es) would not apply" in captured.err
    assert main(["-C", root, "drift", "--against", "nope"]) == 2
    assert not (toy_queue.project.root / "work" / "mlx" / ".git" / "rebase-merge").exists()


def test_a_ref_without_the_patched_files_is_one_clear_line(toy_queue: Toy,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    """Against an unrelated history (here an orphan branch with none of the
    patched files, as a toy repository once fetched into the real cache
    looked): each row says which file is missing, without git's
    modify/delete lines and their commit ids, and the error names the first
    patch and how many more."""
    from conftest import commit_all, sh_git

    up = toy_queue.upstream
    sh_git(up, "checkout", "-q", "--orphan", "other")
    sh_git(up, "rm", "-q", "-r", "--cached", ".")
    for f in ("src/a.txt", "src/b.txt"):
        (up / f).unlink()
    commit_all(up, "unrelated")
    sh_git(up, "checkout", "-q", "-f", "main")
    assert main(["-C", str(toy_queue.project.root), "drift", "--against", "other"]) == 5
    captured = capsys.readouterr()
    rows = {line.split()[0]: line for line in captured.out.splitlines() if line.startswith("  000")}
    assert rows[A1].split(None, 3)[3] == "src/a.txt is missing upstream"
    assert rows[B2].split(None, 3)[3] == "src/b.txt is missing upstream"
    error = [line for line in captured.err.splitlines() if line.startswith("mlx-overlay: error:")]
    assert len(error) == 1 and error[0].endswith(
        f"2 patch(es) would not apply to other ({sh_git(up, 'rev-parse', 'other')[:12]}): "
        f"{A1}: src/a.txt is missing upstream (and 1 more: the table above)")
