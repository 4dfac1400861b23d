import shutil

from conftest import Toy, commit_all, sh_git
from overlay_tool.status import collect, report


def test_fresh_queue_is_applied_and_labelled(toy_queue: Toy) -> None:
    status = collect(toy_queue.project)
    assert [s for _, _, s in status.patches] == ["applied", "applied"]
    tree = sh_git(toy_queue.work, "rev-parse", "HEAD^{tree}")
    assert status.label == f"overlay.{tree[:12]}"


def test_changed_and_new_commits_and_drift(toy_queue: Toy) -> None:
    work = toy_queue.work
    sh_git(work, "reset", "-q", "--soft", "HEAD~1")
    commit_all(work, "Change b\n\nReworded.")
    toy_queue.add_patch("README", "toy\n", "toy!\n", "Third\n\nNew one.")
    upstream = toy_queue.upstream
    (upstream / "src/a.txt").write_text((upstream / "src/a.txt").read_text() + "more\n")
    commit_all(upstream, "Upstream touches a")
    (upstream / "README").write_text("elsewhere\n")
    commit_all(upstream, "Upstream touches something else")
    status = collect(toy_queue.project, fetch=True)
    assert [s for _, _, s in status.patches] == ["applied", "changed in the checkout (export to save)"]
    assert status.extra_commits == ["0003-Third.patch"]
    assert status.behind == 2
    assert [line.split(" ", 2)[2] for line in status.drift] == ["Upstream touches a"]
    lines: list[str] = []
    report(toy_queue.project, status, lines.append)
    assert lines[0].endswith("(2 commit(s) behind origin/main as last fetched)")
    assert "upstream commits since the pin touching patched files: 1" in lines


def test_without_a_checkout(toy_queue: Toy) -> None:
    shutil.rmtree(toy_queue.work)
    status = collect(toy_queue.project)
    assert {s for _, _, s in status.patches} == {"no work checkout (run apply)"}
    assert status.label is None


def test_offline_without_a_cache(toy_queue: Toy) -> None:
    shutil.rmtree(toy_queue.project.cache_dir)
    shutil.rmtree(toy_queue.upstream)
    status = collect(toy_queue.project)
    assert status.behind is None and status.drift == []
    assert [s for _, _, s in status.patches] == ["applied", "applied"]
    assert not toy_queue.project.cache_dir.exists()
