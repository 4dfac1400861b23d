"""The shared cache: a bare clone of upstream that every checkout is made from.

Fetching happens only when a needed commit is missing (or on request), so a
warm cache works offline.  Mirrors are honoured through the user's
``url.<mirror>.insteadOf`` (see :mod:`overlay_tool.git`).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from overlay_tool.errors import GitError, UpstreamUnreachable
from overlay_tool.git import Repo, run_git
from overlay_tool.pin import Pin

_FETCH_REFSPECS = ("+refs/heads/*:refs/remotes/origin/*", "+refs/tags/*:refs/tags/*")


def open_cache(path: Path, url: str) -> Repo:
    """The cache at ``path``, cloned if absent; its origin follows pin.toml's URL."""
    if not (path / "HEAD").is_file():
        _create(path, url)
    repo = Repo(path)
    if repo.git("config", "--get", "remote.origin.url") != url:
        repo.git("config", "remote.origin.url", url)
    return repo


def _create(path: Path, url: str) -> None:
    """Clone upstream bare, then file its branches under ``refs/remotes/origin/``.

    A clone rather than init + fetch: when ``url`` resolves (through
    insteadOf) to a local mirror, git hardlinks its objects in a fraction of
    a second instead of packing them anew.
    """
    tmp = path.with_name(f"{path.name}.tmp-{os.getpid()}")
    path.parent.mkdir(parents=True, exist_ok=True)
    proc = run_git(["clone", "--bare", "--quiet", url, str(tmp)], check=False)
    if proc.returncode != 0:
        shutil.rmtree(tmp, ignore_errors=True)
        raise _unreachable(url, proc.stderr)
    repo = Repo(tmp)
    repo.git("config", "--replace-all", "remote.origin.fetch", _FETCH_REFSPECS[0])
    moves = "".join(
        f"create refs/remotes/origin/{ref[len('refs/heads/'):]} {sha}\ndelete {ref} {sha}\n"
        for sha, ref in (line.split(" ", 1) for line in repo.lines(
            "for-each-ref", "--format=%(objectname) %(refname)", "refs/heads/"))
    )
    repo.run("update-ref", "--stdin", input=moves.encode())
    tmp.rename(path)


def _unreachable(url: str, stderr: bytes) -> UpstreamUnreachable:
    lines = stderr.decode(errors="replace").strip().splitlines()
    return UpstreamUnreachable(
        f"cannot fetch {url}: {lines[-1] if lines else 'git failed without a message'}",
        hint=f"offline? point git at a mirror: git config --global url.<mirror>.insteadOf {url}",
    )


def fetch(repo: Repo, url: str) -> None:
    """Update every branch and tag of the cache from upstream."""
    proc = repo.run("fetch", "--quiet", "--prune", "origin", *_FETCH_REFSPECS, check=False)
    if proc.returncode != 0:
        raise _unreachable(url, proc.stderr)


def ensure_commit(path: Path, pin: Pin, commit: str | None = None) -> Repo:
    """The cache, holding ``commit`` (default: the pin), fetching only when it is missing."""
    commit = commit or pin.commit
    repo = open_cache(path, pin.url)
    if repo.has_commit(commit):
        return repo
    fetch(repo, pin.url)
    if not repo.has_commit(commit):
        # Not on any branch or tag: ask for the commit itself (GitHub allows it).
        proc = repo.run("fetch", "--quiet", "origin", commit, check=False)
        if proc.returncode != 0 or not repo.has_commit(commit):
            raise UpstreamUnreachable(f"{pin.path}: upstream.commit {commit} is not in {pin.url}")
    return repo


def behind(repo: Repo, pin: Pin) -> int | None:
    """How many commits the cache's ``origin/<branch>`` has beyond the pin (None: branch unknown)."""
    tip = repo.rev_parse(f"refs/remotes/origin/{pin.branch}")
    if tip is None:
        return None
    try:
        return int(repo.git("rev-list", "--count", f"{pin.commit}..{tip}"))
    except GitError:
        return None
