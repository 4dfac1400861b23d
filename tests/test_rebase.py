"""rebase on throwaway repositories: each row of the table, --continue/--skip/--abort, rerere, interruptions."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import Toy, commit_all, sh_git
from overlay_tool import rebase as rebase_mod
from overlay_tool import replay
from overlay_tool.apply import BASE_REF
from overlay_tool.cli import main
from overlay_tool.errors import ConfigError, OperationInProgress, QueueDoesNotApply
from overlay_tool.rebase import Rebase, Rebaser, state_dir


def bump(toy: Toy, message: str, edits: dict[str, str | None] | None = None,
         moves: dict[str, str] | None = None) -> str:
    """Commit to the toy upstream: replace text (old -> new as 'old=>new'), delete (None), or git mv."""
    up = toy.upstream
    for path, edit in (edits or {}).items():
        if edit is None:
            sh_git(up, "rm", "-q", path)
            continue
        old, new = edit.split("=>")
        text = (up / path).read_text()
        assert old in text, (old, path)
        (up / path).write_text(text.replace(old, new, 1))
    for src, dst in (moves or {}).items():
        sh_git(up, "mv", src, dst)
    return commit_all(up, message)


def snapshot(toy: Toy) -> dict[str, bytes]:
    root = toy.project.root
    files = {"pin.toml": (root / "pin.toml").read_bytes()}
    for p in sorted(toy.project.patches_dir.iterdir()):
        files[f"patches/{p.name}"] = p.read_bytes()
    return files


def rebaser(toy: Toy, lines: list[str]) -> Rebaser:
    return Rebaser(toy.project, log=lines.append)


def rows_of(lines: list[str]) -> dict[str, str]:
    """patch name -> result, from the last table printed."""
    out: dict[str, str] = {}
    for line in "\n".join(lines).splitlines():
        fields = line.split()
        if len(fields) >= 3 and fields[0].endswith(".patch"):
            out[fields[0]] = fields[2]
    return out


A1, B2 = "0001-Change-a.patch", "0002-Change-b.patch"


def test_clean_bump_moves_pin_keeps_comments_and_unchanged_patch_bytes(toy_queue: Toy) -> None:
    # pin.toml as this project's: a version-and-date note right above the commit.
    pin_path = toy_queue.project.root / "pin.toml"
    pin_path.write_text(pin_path.read_text().replace("commit = ", "# v0.1-3, 2026-08-17\ncommit = "))
    before = snapshot(toy_queue)
    new = bump(toy_queue, "upstream edits the README", {"README": "toy=>toy, now bigger"})
    sh_git(toy_queue.upstream, "tag", "v0.2", f"{new}~1")
    date = sh_git(toy_queue.upstream, "log", "-1", "--format=%cs", new)
    lines: list[str] = []
    rebaser(toy_queue, lines).start("main")
    assert rows_of(lines) == {A1: "clean", B2: "clean"}
    pin = pin_path.read_text()
    assert f'# v0.2-1, {date}\ncommit = "{new}"  # keep me' in pin and pin.startswith("# the toy pin\n")
    after = snapshot(toy_queue)
    assert after[f"patches/{A1}"] == before[f"patches/{A1}"] and after[f"patches/{B2}"] == before[f"patches/{B2}"]
    assert any("range-diff" in line for line in lines) and any(" = " in line for line in lines)
    assert any("re-export unchanged" in line for line in lines)  # check ran
    assert not state_dir(toy_queue.project).exists()
    work = toy_queue.work
    assert sh_git(work, "rev-parse", "--abbrev-ref", "HEAD") == f"overlay/{new[:8]}"
    assert sh_git(work, "rev-parse", BASE_REF) == new


def test_three_way_row_rewrites_only_that_patch(toy_queue: Toy) -> None:
    before = snapshot(toy_queue)
    bump(toy_queue, "upstream edits the context of 0001", {"src/a.txt": "line 13\n=>line thirteen\n"})
    lines: list[str] = []
    rebaser(toy_queue, lines).start("main")
    assert rows_of(lines) == {A1: "3-way", B2: "clean"}
    after = snapshot(toy_queue)
    assert after[f"patches/{A1}"] != before[f"patches/{A1}"]
    assert b"+added to a" in after[f"patches/{A1}"] and b" line thirteen" in after[f"patches/{A1}"]
    assert after[f"patches/{B2}"] == before[f"patches/{B2}"]


def test_patch_taken_upstream_is_dropped_and_named(toy_queue: Toy) -> None:
    took = bump(toy_queue, "Take b upstream", {"src/b.txt": "line 20\n=>line twenty\n"})
    lines: list[str] = []
    rebaser(toy_queue, lines).start("main")
    assert rows_of(lines) == {A1: "clean", B2: "empty"}
    assert any(f"taken upstream as {took[:12]}" in line and "Take b upstream" in line for line in lines)
    assert toy_queue.project.series.names == [A1]
    assert not (toy_queue.project.patches_dir / B2).exists()


def test_file_renamed_upstream_follows_and_names_commit(toy_queue: Toy) -> None:
    moved = bump(toy_queue, "Move a to c", moves={"src/a.txt": "src/c.txt"})
    lines: list[str] = []
    rebaser(toy_queue, lines).start("main")
    assert rows_of(lines)[A1] == "3-way"
    assert any(f"src/a.txt renamed to src/c.txt upstream by {moved[:12]}" in line for line in lines)
    assert b"+++ b/src/c.txt" in (toy_queue.project.patches_dir / A1).read_bytes()


def test_file_deleted_upstream_stops_names_commit_and_skip_drops_it(toy_queue: Toy) -> None:
    before = snapshot(toy_queue)
    gone = bump(toy_queue, "Remove b", {"src/b.txt": None})
    lines: list[str] = []
    with pytest.raises(QueueDoesNotApply, match=f"src/b.txt deleted upstream by {gone[:12]}"):
        rebaser(toy_queue, lines).start("main")
    assert rows_of(lines) == {A1: "clean", B2: "deleted"}
    assert snapshot(toy_queue) == before  # nothing written yet
    rebaser(toy_queue, lines).continue_(skip=True)
    assert toy_queue.project.series.names == [A1]
    assert sh_git(toy_queue.project.root, "--version")  # (sanity)
    assert f'commit = "{gone}"' in (toy_queue.project.root / "pin.toml").read_text()


def conflict_on_a(toy: Toy) -> str:
    return bump(toy, "upstream rewrites line 10", {"src/a.txt": "line 10\n=>line ten (upstream)\n"})


def test_conflict_stops_with_files_and_hunks_then_continue(toy_queue: Toy) -> None:
    before = snapshot(toy_queue)
    new = conflict_on_a(toy_queue)
    lines: list[str] = []
    with pytest.raises(QueueDoesNotApply, match=A1):
        rebaser(toy_queue, lines).start("main")
    text = "\n".join(lines)
    assert rows_of(lines) == {A1: "conflict", B2: "pending"}
    assert "probe without 0001-Change-a.patch: clean" in text
    assert "src/a.txt" in text and "<<<<<<<" in text and "line ten (upstream)" in text
    assert snapshot(toy_queue) == before
    with pytest.raises(OperationInProgress, match="stopped on a conflict at patch 1/2"):
        rebaser(toy_queue, lines).start("main")
    # continue before resolving: refused, names the file
    with pytest.raises(QueueDoesNotApply, match="still conflicted.*src/a.txt"):
        rebaser(toy_queue, lines).continue_()
    work = toy_queue.work
    (work / "src/a.txt").write_text((toy_queue.upstream / "src/a.txt").read_text().replace(
        "line ten (upstream)\n", "line ten (upstream)\nadded to a\n"))
    sh_git(work, "add", "src/a.txt")
    lines.clear()
    rebaser(toy_queue, lines).continue_()
    assert rows_of(lines) == {A1: "resolved", B2: "clean"}
    patch = (toy_queue.project.patches_dir / A1).read_bytes()
    assert b" line ten (upstream)\n+added to a\n" in patch
    assert snapshot(toy_queue)[f"patches/{B2}"] == before[f"patches/{B2}"]
    assert f'commit = "{new}"' in (toy_queue.project.root / "pin.toml").read_text()
    assert not state_dir(toy_queue.project).exists()


def test_continue_refuses_conflict_markers(toy_queue: Toy) -> None:
    conflict_on_a(toy_queue)
    with pytest.raises(QueueDoesNotApply):
        rebaser(toy_queue, []).start("main")
    sh_git(toy_queue.work, "add", "src/a.txt")  # staged with the markers still in
    with pytest.raises(QueueDoesNotApply, match="conflict markers left in src/a.txt"):
        rebaser(toy_queue, []).continue_()


def test_abort_restores_everything(toy_queue: Toy) -> None:
    work = toy_queue.work
    before = snapshot(toy_queue)
    head, branch = sh_git(work, "rev-parse", "HEAD"), sh_git(work, "rev-parse", "--abbrev-ref", "HEAD")
    base = sh_git(work, "rev-parse", BASE_REF)
    new = conflict_on_a(toy_queue)
    with pytest.raises(QueueDoesNotApply):
        rebaser(toy_queue, []).start("main")
    assert sh_git(work, "rev-parse", "--abbrev-ref", "HEAD") == f"overlay/{new[:8]}"
    lines: list[str] = []
    rebaser(toy_queue, lines).abort()
    assert snapshot(toy_queue) == before
    assert sh_git(work, "rev-parse", "HEAD") == head
    assert sh_git(work, "rev-parse", "--abbrev-ref", "HEAD") == branch
    assert sh_git(work, "rev-parse", BASE_REF) == base
    assert sh_git(work, "status", "--porcelain") == ""
    assert f"overlay/{new[:8]}" not in sh_git(work, "branch", "--list")
    assert not state_dir(toy_queue.project).exists()
    with pytest.raises(ConfigError, match="no rebase in progress"):
        rebaser(toy_queue, []).continue_()


def test_retried_bump_replays_recorded_resolution(toy_queue: Toy) -> None:
    bump(toy_queue, "upstream rewrites lines 10 and 20",
         {"src/a.txt": "line 10\n=>line ten (upstream)\n", "src/b.txt": "line 20\n=>line 20 (upstream)\n"})
    work = toy_queue.work
    with pytest.raises(QueueDoesNotApply, match=A1):
        rebaser(toy_queue, []).start("main")
    (work / "src/a.txt").write_text((toy_queue.upstream / "src/a.txt").read_text().replace(
        "line ten (upstream)\n", "line ten (upstream)\nadded to a\n"))
    sh_git(work, "add", "src/a.txt")
    with pytest.raises(QueueDoesNotApply, match=B2):
        rebaser(toy_queue, []).continue_()
    rebaser(toy_queue, []).abort()
    assert (toy_queue.project.root / ".overlay" / "rr-cache").is_dir()
    lines: list[str] = []
    with pytest.raises(QueueDoesNotApply, match=B2):  # asks only about the second one
        rebaser(toy_queue, lines).start("main")
    rows = rows_of(lines)
    assert rows[A1] == "resolved" and rows[B2] == "conflict"
    assert any("recorded resolution (rerere)" in line for line in lines)


def test_interrupted_in_the_replay_is_detected_and_resumed(toy_queue: Toy,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    bump(toy_queue, "upstream edits the README", {"README": "toy=>toy2"})
    before = snapshot(toy_queue)
    real = replay.make_commit
    calls = []

    def killed_on_second(*args: object) -> str:
        calls.append(1)
        if len(calls) == 2:
            raise KeyboardInterrupt  # the process dies here
        return real(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(rebase_mod, "make_commit", killed_on_second)
    with pytest.raises(KeyboardInterrupt):
        rebaser(toy_queue, []).start("main")
    monkeypatch.setattr(rebase_mod, "make_commit", real)
    state = Rebase.load(toy_queue.project)
    assert state is not None and state.index == 1 and state.phase == "running"
    assert snapshot(toy_queue) == before
    with pytest.raises(OperationInProgress, match="interrupted at patch 2/2"):
        rebaser(toy_queue, []).start("main")
    assert main(["-C", str(toy_queue.project.root), "rebase", "--to", "main"]) == 8
    lines: list[str] = []
    rebaser(toy_queue, lines).continue_()
    assert rows_of(lines) == {A1: "clean", B2: "clean"}
    assert not state_dir(toy_queue.project).exists()


def test_interrupted_while_writing_can_be_aborted(toy_queue: Toy, monkeypatch: pytest.MonkeyPatch) -> None:
    before = snapshot(toy_queue)
    bump(toy_queue, "Take b upstream", {"src/b.txt": "line 20\n=>line twenty\n"})

    def dies(*args: object, **kw: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(rebase_mod.Pin, "with_commit", dies)  # patches/ written, pin.toml not yet
    with pytest.raises(KeyboardInterrupt):
        rebaser(toy_queue, []).start("main")
    assert Rebase.load(toy_queue.project).phase == "finishing"  # type: ignore[union-attr]
    assert snapshot(toy_queue) != before
    rebaser(toy_queue, []).abort()
    assert snapshot(toy_queue) == before


def test_cli_exit_codes(toy_queue: Toy) -> None:
    root = str(toy_queue.project.root)
    conflict_on_a(toy_queue)
    assert main(["-C", root, "rebase", "--to", "main"]) == 5
    assert main(["-C", root, "rebase", "--to", "main"]) == 8
    assert main(["-C", root, "rebase", "--abort"]) == 0
    assert main(["-C", root, "rebase", "--continue"]) == 2
    assert main(["-C", root, "rebase", "--to", "no-such-ref"]) == 2


def test_refuses_unexported_work(toy_queue: Toy) -> None:
    bump(toy_queue, "upstream edits the README", {"README": "toy=>toy2"})
    (toy_queue.work / "src/a.txt").write_text("local edit\n")
    with pytest.raises(Exception, match="uncommitted changes"):
        rebaser(toy_queue, []).start("main")
    assert not state_dir(toy_queue.project).exists()


def test_unused_path_helper(tmp_path: Path) -> None:
    assert rebase_mod.conflict_hunks(tmp_path / "absent")[0].startswith("    (file not in the work tree")


def test_killed_right_after_git_stopped_on_the_conflict(toy_queue: Toy, monkeypatch: pytest.MonkeyPatch) -> None:
    before = snapshot(toy_queue)
    conflict_on_a(toy_queue)

    def dies(*args: object, **kw: object) -> None:
        raise KeyboardInterrupt

    # monkeypatch.context(), not monkeypatch.undo(): undo() would also drop
    # git_env's settings (the private cache, the isolated git config), and
    # the rest of the test would fetch into the user's real cache.
    with monkeypatch.context() as patch:
        patch.setattr(Rebaser, "_report_stop", dies)
        with pytest.raises(KeyboardInterrupt):
            rebaser(toy_queue, []).start("main")
    assert Rebase.load(toy_queue.project).phase in ("picking", "stopped")  # type: ignore[union-attr]
    lines: list[str] = []
    with pytest.raises(QueueDoesNotApply, match=A1):  # --continue shows the conflict it never reported
        rebaser(toy_queue, lines).continue_()
    assert "<<<<<<<" in "\n".join(lines)
    rebaser(toy_queue, []).abort()
    assert snapshot(toy_queue) == before


@pytest.mark.parametrize("delay", [0.0, 0.1, 0.3])
def test_sigkill_at_any_moment_leaves_a_resumable_or_finished_rebase(toy_queue: Toy, delay: float) -> None:
    """Black box: kill -9 the real command part-way; then the state is consistent whatever the moment."""
    import os
    import signal
    import subprocess
    import sys
    import time

    from conftest import ROOT

    before = snapshot(toy_queue)
    new = bump(toy_queue, "upstream edits the README", {"README": "toy=>toy2"})
    root = str(toy_queue.project.root)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    cmd = [sys.executable, "-m", "overlay_tool", "-C", root, "rebase"]
    proc = subprocess.Popen([*cmd, "--to", "main"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    marker = Rebase.path(toy_queue.project)
    deadline = time.monotonic() + 60
    while not marker.exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.005)
    time.sleep(delay)  # after the rebase has begun: mid-replay, mid-write or after the end
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    state = Rebase.load(toy_queue.project)
    if state is None:  # killed before it began or after it finished: all or nothing
        assert snapshot(toy_queue) in (before,) or f'commit = "{new}"' in (toy_queue.project.root / "pin.toml").read_text()
        return
    again = subprocess.run([*cmd, "--to", "main"], env=env, capture_output=True, text=True)
    assert again.returncode == 8 and "in progress" in again.stderr
    done = subprocess.run([*cmd, "--continue"], env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert f'commit = "{new}"' in (toy_queue.project.root / "pin.toml").read_text()
    assert snapshot(toy_queue)[f"patches/{A1}"] == before[f"patches/{A1}"]
    assert not state_dir(toy_queue.project).exists()


def test_status_shows_a_rebase_in_progress(toy_queue: Toy) -> None:
    from overlay_tool.status import collect, report

    conflict_on_a(toy_queue)
    with pytest.raises(QueueDoesNotApply):
        rebaser(toy_queue, []).start("main")
    lines: list[str] = []
    report(toy_queue.project, collect(toy_queue.project), lines.append)
    assert any(line.startswith("rebase   a rebase from") and "stopped on a conflict at patch 1/2" in line
               for line in lines)


def test_killed_after_the_real_pick_committed_adopts_that_commit(toy_queue: Toy,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    from overlay_tool.apply import apply_queue

    before = snapshot(toy_queue)
    conflict_on_a(toy_queue)
    work = toy_queue.work
    with pytest.raises(QueueDoesNotApply):
        rebaser(toy_queue, []).start("main")
    (work / "src/a.txt").write_text((toy_queue.upstream / "src/a.txt").read_text().replace(
        "line ten (upstream)\n", "line ten (upstream)\nadded to a\n"))
    sh_git(work, "add", "src/a.txt")
    rebaser(toy_queue, []).continue_()  # done, and the resolution is recorded
    for rel, data in before.items():  # back to the old pin and queue, as a second try would start
        (toy_queue.project.root / rel).write_bytes(data)
    apply_queue(toy_queue.project, force=True, log=lambda _: None)
    real = Rebaser._commit_pick

    def commit_then_die(self: Rebaser, repo: object, item: object) -> None:
        real(self, repo, item)  # type: ignore[arg-type]
        raise KeyboardInterrupt

    with monkeypatch.context() as patch:  # not undo(): see test_killed_right_after_git_stopped_on_the_conflict
        patch.setattr(Rebaser, "_commit_pick", commit_then_die)
        with pytest.raises(KeyboardInterrupt):
            rebaser(toy_queue, []).start("main")  # rerere resolves 0001; killed right after its commit
    assert Rebase.load(toy_queue.project).phase == "picking"  # type: ignore[union-attr]
    lines: list[str] = []
    rebaser(toy_queue, lines).continue_()
    assert rows_of(lines) == {A1: "3-way", B2: "clean"}
    assert any("committed before the interruption" in line for line in lines)
    assert b" line ten (upstream)\n+added to a\n" in (toy_queue.project.patches_dir / A1).read_bytes()


def test_a_throwaway_repository_in_the_user_s_cache_is_caught() -> None:
    """The guard of tests/conftest.py (pytest_sessionfinish) against tests
    that leave their private cache: the cache's config or FETCH_HEAD naming a
    repository under the temporary folder, as the rebase tests'
    monkeypatch.undo() once caused."""
    from conftest import throwaway_traces

    toy = "/tmp/pytest-of-root/pytest-73/test_killed_after_the_real_pic0/upstream"
    config = b'[remote "origin"]\n\turl = https://github.com/ml-explore/mlx.git\n'
    assert throwaway_traces(config, config.replace(b"https://github.com/ml-explore/mlx.git", toy.encode()),
                            "/tmp") == [f"url = {toy}"]
    fetched = f"30c9999d070d9cf639876759947b22a867ef7516\t\tbranch 'main' of {toy}\n".encode()
    assert throwaway_traces(b"", fetched, "/tmp") == [fetched.decode().strip()]
    assert throwaway_traces(fetched, fetched, "/tmp") == []  # there before the run: not this run's doing
    mirror = b"846d176227a0ac13d2667e58d2bb68b322109ab0\t\tbranch 'main' of /work/.mirror/ml-explore+mlx/repo\n"
    assert throwaway_traces(b"", mirror, "/tmp") == []
    assert throwaway_traces(b"", b"\turl = /tmpfs/mirror\n", "/tmp") == []
