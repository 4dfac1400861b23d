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


def test_a_project_pinned_to_a_fork_keeps_out_of_the_other_s_cache(toy_queue: Toy, tmp_path) -> None:
    """One cache per upstream URL: a fetch for a project pinned to a fork
    (here a clone that has moved on and dropped a branch) must not change
    the origin, or prune the branches, of the cache another project's
    status and drift read."""
    from overlay_tool.project import Project, cache_name, cache_root

    upstream = toy_queue.upstream
    sh_git(upstream, "branch", "release")
    collect(toy_queue.project, fetch=True)
    cache = toy_queue.project.cache_dir
    fork = tmp_path / "fork"
    sh_git(tmp_path, "clone", "-q", str(upstream), str(fork))
    (fork / "README").write_text("forked\n")
    commit_all(fork, "Fork moves on")
    pin = (toy_queue.project.root / "pin.toml").read_text().replace(str(upstream), str(fork))
    other = tmp_path / "other"
    other.mkdir()
    (other / "pin.toml").write_text(pin)
    (other / "patches").mkdir()
    (other / "patches" / "series").write_text("")
    forked = collect(Project.discover(other), fetch=True)
    assert forked.behind == 1
    assert sh_git(cache, "config", "remote.origin.url") == str(upstream)
    assert sh_git(cache, "for-each-ref", "--format=%(refname)", "refs/remotes/origin").split() == [
        "refs/remotes/origin/main", "refs/remotes/origin/release"]
    assert collect(toy_queue.project).behind == 0
    assert Project.discover(other).cache_dir != cache
    # MLX's own URL, with or without .git, keeps the cache's old name.
    assert cache_name("https://github.com/ml-explore/mlx.git") == cache_name("https://github.com/ml-explore/mlx/") \
        == "upstream.git"
    assert cache.parent == cache_root() and cache.name.startswith("upstream-") and cache.name.endswith(".git")
