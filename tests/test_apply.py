import shutil
from pathlib import Path

import pytest

from conftest import Toy, commit_all, sh_git
from overlay_tool.apply import BASE_REF, apply_queue
from overlay_tool.errors import DirtyCheckout, OperationInProgress, QueueDoesNotApply
from overlay_tool.git import COMMITTER_NAME, Repo


def run_apply(toy: Toy, **kw: object) -> list[str]:
    lines: list[str] = []
    apply_queue(toy.project, log=lines.append, **kw)  # type: ignore[arg-type]
    return lines


def test_one_commit_per_patch_on_pin_branch(toy_queue: Toy) -> None:
    shutil.rmtree(toy_queue.work)
    lines = run_apply(toy_queue)
    work = toy_queue.work
    pin = toy_queue.project.pin
    assert sh_git(work, "rev-parse", "--abbrev-ref", "HEAD") == f"overlay/{pin.commit[:8]}"
    assert sh_git(work, "rev-parse", BASE_REF) == pin.commit
    assert sh_git(work, "log", "--format=%s|%cn", f"{pin.commit}..HEAD").splitlines() == [
        f"Change b|{COMMITTER_NAME}", f"Change a|{COMMITTER_NAME}"]
    assert [line.split()[0] for line in lines[1:]] == ["applied", "applied"]


def test_same_queue_gives_same_commits_whatever_the_user_config(toy_queue: Toy, tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    first = apply_queue(toy_queue.project, tmp_path / "one", log=lambda _: None)
    hostile = tmp_path / "hostile.gitconfig"
    hostile.write_text("[am]\n\tthreeWay = true\n\tkeepcr = true\n[commit]\n\tgpgSign = true\n"
                       "[user]\n\tname = Other\n[core]\n\tautocrlf = true\n")
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(hostile))
    monkeypatch.setenv("GIT_COMMITTER_DATE", "2030-01-01T00:00:00+00:00")
    second = apply_queue(toy_queue.project, tmp_path / "two", log=lambda _: None)
    assert sh_git(first, "rev-parse", "HEAD") == sh_git(second, "rev-parse", "HEAD")


def test_second_run_does_nothing(toy_queue: Toy) -> None:
    run_apply(toy_queue, force=True)
    head = sh_git(toy_queue.work, "rev-parse", "HEAD")
    lines = run_apply(toy_queue)
    assert len(lines) == 1 and "is up to date" in lines[0]
    assert sh_git(toy_queue.work, "rev-parse", "HEAD") == head


def test_changed_queue_is_reapplied(toy_queue: Toy) -> None:
    run_apply(toy_queue, force=True)
    series = toy_queue.project.series_path
    series.write_text(series.read_text().replace("0002-Change-b.patch overlay", "0002-Change-b.patch upstream"))
    assert "applying 2 patch(es)" in run_apply(toy_queue)[0]


def test_conflict_names_patch_file_and_hunk(toy_queue: Toy) -> None:
    upstream = toy_queue.upstream
    (upstream / "src/b.txt").write_text((upstream / "src/b.txt").read_text().replace("line 20\n", "line XX\n"))
    new_pin = commit_all(upstream, "upstream moves on")
    toy_queue.project.pin.with_commit(new_pin)
    with pytest.raises(QueueDoesNotApply) as err:
        run_apply(toy_queue, force=True)
    assert err.value.message == ("0002-Change-b.patch does not apply: "
                                 "src/b.txt: hunk #1 @@ -17,7 +17,7 @@ does not apply")
    work = toy_queue.work
    assert sh_git(work, "log", "-1", "--format=%s") == "Change a"  # stopped cleanly after the good one
    assert not (work / ".git" / "rebase-apply").exists()


def test_conflict_reports_every_patch(toy_queue: Toy) -> None:
    upstream = toy_queue.upstream
    (upstream / "src/a.txt").write_text("rewritten\n")
    toy_queue.project.pin.with_commit(commit_all(upstream, "upstream rewrites a"))
    lines: list[str] = []
    with pytest.raises(QueueDoesNotApply, match="0001-Change-a.patch does not apply: src/a.txt: hunk #1"):
        apply_queue(toy_queue.project, log=lines.append, force=True)
    assert [line.split()[0] for line in lines if line.startswith("  ")] == ["FAILED", "skipped"]
    assert lines[-1] == "  skipped  0002-Change-b.patch (applies without the failed patch)"


def test_later_failures_are_reported_too(toy_queue: Toy) -> None:
    upstream = toy_queue.upstream
    for name in ("src/a.txt", "src/b.txt"):
        (upstream / name).write_text("rewritten\n")
    toy_queue.project.pin.with_commit(commit_all(upstream, "upstream rewrites a and b"))
    lines: list[str] = []
    with pytest.raises(QueueDoesNotApply):
        apply_queue(toy_queue.project, log=lines.append, force=True)
    assert lines[-1] == ("  skipped  0002-Change-b.patch (would fail too: "
                         "src/b.txt: hunk #1 @@ -17,7 +17,7 @@ does not apply)")


def test_dirty_checkout_refused_naming_files(toy_queue: Toy) -> None:
    (toy_queue.work / "src/a.txt").write_text("my edit\n")
    (toy_queue.work / "new.txt").write_text("untracked\n")
    with pytest.raises(DirtyCheckout, match="uncommitted changes: src/a.txt, new.txt"):
        run_apply(toy_queue)
    assert (toy_queue.work / "src/a.txt").read_text() == "my edit\n"


def test_force_saves_work_and_says_how_to_recover(toy_queue: Toy) -> None:
    work = toy_queue.work
    (work / "src/a.txt").write_text("my edit\n")
    (work / "new.txt").write_text("untracked\n")
    lines = run_apply(toy_queue, force=True)
    saved = [line for line in lines if line.startswith("saved uncommitted work as ")]
    assert saved, lines
    ref = saved[0].split()[4].rstrip(";")
    assert (work / "src/a.txt").read_text() != "my edit\n" and not (work / "new.txt").exists()
    sh_git(work, "stash", "apply", ref)
    assert (work / "src/a.txt").read_text() == "my edit\n" and (work / "new.txt").exists()


def test_unexported_commits_refused_then_saved(toy_queue: Toy) -> None:
    toy_queue.add_patch("README", "toy\n", "toy!\n", "Not exported\n\nYet.")
    with pytest.raises(DirtyCheckout, match="commits that are not in patches/"):
        run_apply(toy_queue)
    lines = run_apply(toy_queue, force=True)
    ref = next(line for line in lines if line.startswith("saved the previous HEAD")).split()[5].rstrip(";")
    assert sh_git(toy_queue.work, "log", "-1", "--format=%s", ref) == "Not exported"


def test_refused_during_am(toy_queue: Toy) -> None:
    (toy_queue.work / ".git" / "rebase-apply").mkdir()
    (toy_queue.work / ".git" / "rebase-apply" / "applying").touch()
    with pytest.raises(OperationInProgress, match="a git am is in progress"):
        run_apply(toy_queue, force=True)


def test_corrupted_patch_named_before_anything_runs(toy_queue: Toy) -> None:
    patch = toy_queue.project.patches_dir / "0001-Change-a.patch"
    patch.write_text(patch.read_text().replace("+added to a\n", ""))
    with pytest.raises(Exception) as err:
        run_apply(toy_queue, force=True)
    assert "0001-Change-a.patch" in str(err.value) and "corrupt patch" in str(err.value)


def test_commits_made_after_a_failure_are_not_reset(toy_queue: Toy) -> None:
    upstream = toy_queue.upstream
    (upstream / "src/b.txt").write_text("rewritten\n")
    toy_queue.project.pin.with_commit(commit_all(upstream, "upstream rewrites b"))
    with pytest.raises(QueueDoesNotApply):
        run_apply(toy_queue, force=True)
    toy_queue.add_patch("src/b.txt", "rewritten\n", "fixed by hand\n", "Change b\n\nResolved.")
    with pytest.raises(DirtyCheckout, match="commits that are not in patches/"):
        run_apply(toy_queue)


def test_checkout_not_made_by_the_tool_is_not_reset(toy: Toy) -> None:
    sh_git(toy.upstream, "clone", "-q", str(toy.upstream), str(toy.work))
    with pytest.raises(DirtyCheckout, match="commits that are not in patches/"):
        run_apply(toy)


def test_a_second_run_on_the_same_checkout_is_refused(toy_queue: Toy) -> None:
    with Repo(toy_queue.work).locked(), pytest.raises(OperationInProgress, match="another mlx-overlay command"):
        run_apply(toy_queue)
