"""Shared fixtures.

Two kinds of tests:

* Unit tests build throwaway repositories (``make_repo``, ``toy``) with git
  isolated from this machine (``git_env``: GIT_CONFIG_GLOBAL/SYSTEM are
  /dev/null, a fixed identity, a private cache).
* Integration tests use the real project and the real pinned mlx
  (``project``, ``pinned_checkout``, ``patched_checkout``) with the user's own
  git config, so a ``url.<mirror>.insteadOf`` keeps working.  They never
  skip: if upstream cannot be reached they fail and say why.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from overlay_tool.apply import apply_queue
from overlay_tool.cache import ensure_commit
from overlay_tool.errors import UpstreamUnreachable
from overlay_tool.git import Repo
from overlay_tool.project import Project, cache_root

ROOT = Path(__file__).resolve().parents[1]

IDENTITY = {
    "GIT_AUTHOR_NAME": "Test Author",
    "GIT_AUTHOR_EMAIL": "author@example.invalid",
    "GIT_COMMITTER_NAME": "Test Committer",
    "GIT_COMMITTER_EMAIL": "committer@example.invalid",
    "GIT_AUTHOR_DATE": "2026-01-02T03:04:05+00:00",
    "GIT_COMMITTER_DATE": "2026-01-02T03:04:05+00:00",
}


_USER_CACHE = pytest.StashKey[dict[Path, bytes]]()


def _cache_files() -> dict[Path, bytes]:
    """The files of the user's caches (one per upstream URL) that a fetch or
    a change of origin writes."""
    return {f: f.read_bytes() for cache in cache_root().glob("upstream*.git")
            for f in (cache / "config", cache / "FETCH_HEAD") if f.is_file()}


def pytest_sessionstart(session: pytest.Session) -> None:
    """Read the user's own cache before any test changes the environment."""
    session.config.stash[_USER_CACHE] = _cache_files()


def throwaway_traces(before: bytes, after: bytes, temp: str) -> list[str]:
    """The lines of a cache file (its config, its FETCH_HEAD) that name a
    repository under `temp` and were not there before the run. Unit tests
    must stay in their private cache: a test in the user's cache sets its
    origin to the toy upstream and fetches the toy's branches over the real
    ones, and `mlx-overlay drift` and `status` then report nonsense
    (2026-12-02: two rebase tests' monkeypatch.undo() had dropped git_env's
    settings halfway)."""
    old = set(before.decode(errors="replace").splitlines())
    return [ln.strip() for ln in after.decode(errors="replace").splitlines()
            if ln not in old and re.search(rf"(^|[\s=]){re.escape(temp)}/", ln)]


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    before = session.config.stash[_USER_CACHE]
    for path, after in _cache_files().items():  # a cache made by the run: every line is new
        traces = throwaway_traces(before.get(path, b""), after, tempfile.gettempdir())
        if traces:
            sys.stderr.write(f"\nERROR: a test wrote a throwaway repository into the user's cache: {path}: "
                             f"{traces[0]}\n")
            session.exitstatus = pytest.ExitCode.TESTS_FAILED


def sh_git(cwd: Path, *args: str, env: dict[str, str] | None = None) -> str:
    """Plain git as the user would run it (not through overlay_tool.git)."""
    proc = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True,
                          env={**os.environ, **(env or {})})
    if proc.returncode != 0:
        raise AssertionError(f"git {' '.join(args)} failed: {proc.stderr}")
    return proc.stdout.strip()


@pytest.fixture
def git_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """Git isolated from this machine's config, with a fixed identity and a private cache."""
    home = tmp_path / "home"
    home.mkdir()
    env = {
        "HOME": str(home),
        "XDG_CONFIG_HOME": str(home / ".config"),
        "GIT_CONFIG_GLOBAL": os.devnull,
        "GIT_CONFIG_SYSTEM": os.devnull,
        "GIT_CONFIG_NOSYSTEM": "1",
        "MLX_OVERLAY_CACHE": str(tmp_path / "cache"),
        **IDENTITY,
    }
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    for key in ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_OBJECT_DIRECTORY"):
        monkeypatch.delenv(key, raising=False)  # set when pytest runs from a git hook
    return env


@pytest.fixture
def make_repo(tmp_path: Path, git_env: dict[str, str]) -> Callable[..., Path]:
    """``make_repo(name, {path: text})``: a repository with those files in one commit."""

    def make(name: str, files: dict[str, str]) -> Path:
        path = tmp_path / name
        path.mkdir()
        sh_git(path, "init", "-q", "-b", "main")
        write_files(path, files)
        sh_git(path, "add", "-A")
        sh_git(path, "commit", "-q", "-m", "initial")
        return path

    return make


def write_files(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        target = root / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)


def commit_all(repo: Path, message: str, env: dict[str, str] | None = None) -> str:
    sh_git(repo, "add", "-A")
    sh_git(repo, "commit", "-q", "-m", message, env=env)
    return sh_git(repo, "rev-parse", "HEAD")


SERIES_HEADER = "# the toy queue\n\n"
LINES = "".join(f"line {i}\n" for i in range(1, 41))


@dataclass
class Toy:
    """A project whose pin is a throwaway upstream; ``work`` is its work checkout."""

    project: Project
    upstream: Path

    @property
    def work(self) -> Path:
        return self.project.work_dir

    def add_patch(self, path: str, old: str, new: str, message: str) -> str:
        """Commit an edit in the work checkout (apply must have run) and return its id."""
        target = self.work / path
        text = target.read_text()
        assert old in text, f"{old!r} not in {path}"
        target.write_text(text.replace(old, new, 1))
        return commit_all(self.work, message)


@pytest.fixture
def toy(tmp_path: Path, make_repo: Callable[..., Path]) -> Toy:
    """A project pinned to a toy upstream, with an empty queue (no checkout yet)."""
    upstream = make_repo("upstream", {"src/a.txt": LINES, "src/b.txt": LINES, "README": "toy\n"})
    commit = sh_git(upstream, "rev-parse", "HEAD")
    root = tmp_path / "project"
    write_files(root, {
        "pin.toml": f'# the toy pin\n[upstream]\nurl = "{upstream}"\ncommit = "{commit}"  # keep me\nbranch = "main"\n',
        "patches/series": SERIES_HEADER,
    })
    return Toy(project=Project.discover(root), upstream=upstream)


@pytest.fixture
def toy_queue(toy: Toy) -> Toy:
    """The toy with a queue of two exported patches, freshly applied by the tool."""
    from overlay_tool.export import export_queue

    apply_queue(toy.project, log=lambda _: None)
    toy.add_patch("src/a.txt", "line 10\n", "line 10\nadded to a\n", "Change a\n\nBecause a needs it.")
    toy.add_patch("src/b.txt", "line 20\n", "line twenty\n", "Change b\n\nBecause b needs it.")
    export_queue(toy.project, log=lambda _: None)
    shutil.rmtree(toy.work)
    apply_queue(toy.project, log=lambda _: None)
    return toy


# -- the real project and the real pinned mlx ---------------------------------


@pytest.fixture(scope="session")
def project() -> Project:
    return Project.discover(ROOT)


@pytest.fixture(scope="session")
def upstream_cache(project: Project) -> Repo:
    """The shared cache holding the pin; a loud failure (never a skip) when unreachable."""
    try:
        return ensure_commit(project.cache_dir, project.pin)
    except UpstreamUnreachable as err:
        pytest.fail(f"integration tests need upstream mlx and it cannot be reached: {err.message} ({err.hint})")


@pytest.fixture(scope="session")
def pinned_checkout(tmp_path_factory: pytest.TempPathFactory, project: Project, upstream_cache: Repo) -> Path:
    """A checkout of upstream at the pin, without patches."""
    path = tmp_path_factory.mktemp("pinned") / "mlx"
    repo = Repo.clone(upstream_cache.path, path, shared=True)
    repo.git("checkout", "--quiet", "--detach", project.pin.commit)
    return path


@pytest.fixture(scope="session")
def patched_checkout(tmp_path_factory: pytest.TempPathFactory, project: Project, upstream_cache: Repo) -> Path:
    """A checkout with the queue applied (by apply_queue)."""
    path = tmp_path_factory.mktemp("patched") / "mlx"
    return apply_queue(project, path, log=lambda _: None)


@pytest.fixture(scope="session")
def mlx_python() -> str:
    """A python that imports mlx: the patched wheel's test venv (ci/test sets
    MLX_OVERLAY_PROBE_PYTHON to it after `mlx-overlay test`), else this one if
    it has mlx. In CI a missing one fails: the tests that use it never skip there."""
    given = os.environ.get("MLX_OVERLAY_PROBE_PYTHON")
    if given:
        return given
    if importlib.util.find_spec("mlx") is None:
        if os.environ.get("CI"):
            pytest.fail("CI must run the tests on the patched wheel: set MLX_OVERLAY_PROBE_PYTHON to its python")
        pytest.skip("no mlx here: set MLX_OVERLAY_PROBE_PYTHON to a python with the patched wheel")
    return sys.executable
