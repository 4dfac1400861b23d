"""``apply``: upstream at the pin, plus one commit per patch of the queue.

The work checkout is a clone of the shared cache.  The queue goes on a branch
named after the pin (``overlay/<pin[:8]>``) with ``git am`` (no 3-way: a
patch that does not apply exactly is a failure to look at, not something to
resolve silently).  ``refs/overlay/base`` records the base; a small state file
in the git directory records the hash of the queue that was applied and the
commit it produced, which makes a second run a no-op and shows when the user
committed work that is not exported yet.
"""

from __future__ import annotations

import hashlib
import json
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from overlay_tool import cache
from overlay_tool.errors import ConfigError, DirtyCheckout, OperationInProgress, QueueDoesNotApply
from overlay_tool.git import Repo
from overlay_tool.patchfile import PatchFile
from overlay_tool.project import Project
from overlay_tool.series import Series

Log = Callable[[str], None]

BASE_REF = "refs/overlay/base"
SAVED_REFS = "refs/overlay/saved"
STATE_FILE = "mlx-overlay-state.json"
#: Bump when the way commits are made changes, so old checkouts are redone.
APPLY_FORMAT = "1"


def branch_name(commit: str) -> str:
    return f"overlay/{commit[:8]}"


def queue_hash(series: Series, pin_commit: str) -> str:
    """Identifies exactly what ``apply`` would build: pin, order, kinds, patch bytes."""
    h = hashlib.sha256(f"mlx-overlay apply {APPLY_FORMAT}\npin {pin_commit}\n".encode())
    for entry in series.entries:
        data = (series.path.parent / entry.name).read_bytes()
        h.update(f"{entry.name} {entry.kind} {hashlib.sha256(data).hexdigest()}\n".encode())
    return h.hexdigest()


@dataclass(frozen=True)
class State:
    pin: str
    queue: str
    head: str
    branch: str

    @staticmethod
    def path(repo: Repo) -> Path:
        return repo.git_dir() / STATE_FILE

    @classmethod
    def read(cls, repo: Repo) -> State | None:
        try:
            return cls(**json.loads(cls.path(repo).read_text()))
        except (FileNotFoundError, ValueError, TypeError):
            return None

    def write(self, repo: Repo) -> None:
        self.path(repo).write_text(json.dumps(self.__dict__, indent=1) + "\n")


def apply_patch(repo: Repo, patch: Path) -> str | None:
    """``git am`` one patch file; on failure undo it and return what failed."""
    proc = repo.run("am", "--quiet", "--no-3way", "--keep", "--committer-date-is-author-date",
                    str(patch.absolute()), check=False)
    if proc.returncode == 0:
        return None
    output = (proc.stdout + proc.stderr).decode(errors="replace")
    if repo.operation_in_progress() == "am":
        repo.run("am", "--abort", check=False)
    return describe_failure(PatchFile.read(patch), output)


def describe_failure(patch: PatchFile, output: str) -> str:
    """The file and hunk git am stopped at, from its messages."""
    failed = re.search(r"patch failed: (.+):(\d+)", output)
    if failed:
        path, line = failed.group(1), int(failed.group(2))
        hunk = patch.hunk_at(path, line)
        where = f"hunk #{hunk.number} {hunk.header.split(' @@')[0]} @@" if hunk else f"the hunk at line {line}"
        return f"{path}: {where} does not apply"
    for pattern, text in (
        (r"error: (.+): does not exist in index", "{}: the file does not exist in the base"),
        (r"error: (.+): already exists in index", "{}: the file already exists in the base"),
        (r"error: (.+): does not match index", "{}: the file differs from the patch's preimage"),
    ):
        m = re.search(pattern, output)
        if m:
            return text.format(m.group(1))
    errors = [line for line in output.splitlines() if line.startswith(("error:", "fatal:"))]
    return (errors or output.strip().splitlines() or ["git am failed"])[-1]


def apply_series(repo: Repo, series: Series, log: Log) -> list[str]:
    """Apply every patch on the current HEAD, one line each; the new commits in order."""
    commits: list[str] = []
    for index, entry in enumerate(series.entries):
        failure = apply_patch(repo, series.path.parent / entry.name)
        if failure:
            log(f"  FAILED   {entry.name}: {failure}")
            for later in series.entries[index + 1 :]:
                log(f"  skipped  {later.name} ({_probe(repo, series.path.parent / later.name)})")
            raise QueueDoesNotApply(f"{entry.name} does not apply: {failure}")
        commits.append(repo.git("rev-parse", "HEAD"))
        log(f"  applied  {entry.name} ({entry.kind})")
    return commits


def _probe(repo: Repo, patch: Path) -> str:
    """Whether a patch after a failed one applies without it: one failure hides no other."""
    proc = repo.run("apply", "--check", str(patch.absolute()), check=False)
    if proc.returncode == 0:
        return "applies without the failed patch"
    return "would fail too: " + describe_failure(PatchFile.read(patch), proc.stderr.decode(errors="replace"))


def _save_work(repo: Repo, state: State | None, head: str | None, dirty: list[str], log: Log) -> None:
    """Keep what --force would overwrite under refs/overlay/saved/ and say how to get it back."""
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    where = repo.path
    if dirty:
        repo.git("stash", "push", "--include-untracked", "--quiet", "-m", f"mlx-overlay apply --force {stamp}")
        ref = f"{SAVED_REFS}/{stamp}-uncommitted"
        repo.update_ref(ref, repo.git("rev-parse", "refs/stash"))
        log(f"saved uncommitted work as {ref}; recover it with: git -C {where} stash apply {ref}")
    if head and (state is None or head != state.head):
        ref = f"{SAVED_REFS}/{stamp}-head"
        repo.update_ref(ref, head)
        since = state.head if state else "<base>"
        log(f"saved the previous HEAD as {ref}; recover it with: git -C {where} cherry-pick {since}..{ref}")


def _open_checkout(project: Project, path: Path) -> Repo:
    """The checkout at ``path``, cloned from the cache when absent."""
    if (path / ".git").exists():
        return Repo(path)
    if path.exists() and any(path.iterdir()):
        raise ConfigError(f"{path}: exists and is not a git checkout (move it away, or pass another checkout)")
    cache.ensure_commit(project.cache_dir, project.pin)
    return Repo.clone(project.cache_dir, path)


def apply_queue(project: Project, checkout: Path | None = None, *, force: bool = False,
                log: Log = print) -> Path:
    """Make ``checkout`` (default: the project's work checkout) hold the pin plus the queue.

    Returns the checkout path.  Idempotent: when the checkout already holds
    exactly this queue on this pin, nothing is run.
    """
    series = project.series
    series.validate(numbering=False)
    for entry in series.entries:
        PatchFile.read(series.path.parent / entry.name)  # a damaged file fails here, by name
    path = (checkout or project.work_dir).absolute()
    repo = _open_checkout(project, path)
    with repo.locked():
        _apply(project, repo, series, force, log)
    return path


def _apply(project: Project, repo: Repo, series: Series, force: bool, log: Log) -> None:
    pin = project.pin
    shown = project.display(repo.path)
    wanted = queue_hash(series, pin.commit)
    branch = branch_name(pin.commit)
    op = repo.operation_in_progress()
    if op:
        raise OperationInProgress(f"{shown}: a git {op} is in progress",
                                  hint=f"finish it, or run: git -C {shown} {op} --abort")
    state = State.read(repo)
    head = repo.rev_parse("HEAD")
    dirty = repo.dirty_files()
    if state and state.queue == wanted and state.head == head and not dirty and repo.current_branch() == branch:
        log(f"{shown} is up to date: {branch} = {pin.short} + {len(series.entries)} patch(es)")
        return
    # A HEAD the tool did not leave (or no record at all) may hold the user's commits.
    moved = head is not None and (state is None or head != state.head)
    if (dirty or moved) and not force:
        if dirty:
            listed = ", ".join(dirty[:5]) + (f" (+{len(dirty) - 5} more)" if len(dirty) > 5 else "")
            raise DirtyCheckout(f"{shown} has uncommitted changes: {listed}",
                                hint="commit them (then mlx-overlay export), or re-run with --force to set them aside")
        raise DirtyCheckout(f"{shown} has commits that are not in patches/ (HEAD is not where apply left it)",
                            hint="run mlx-overlay export first, or re-run with --force to set them aside")
    if dirty or moved:
        _save_work(repo, state, head, dirty, log)
    State.path(repo).unlink(missing_ok=True)

    if not repo.has_commit(pin.commit):
        upstream = cache.ensure_commit(project.cache_dir, pin)
        repo.git("fetch", "--quiet", str(upstream.path), pin.commit)
    repo.git("checkout", "--quiet", "--force", "-B", branch, pin.commit)
    repo.update_ref(BASE_REF, pin.commit)
    log(f"{shown}: {branch} at {pin.short}, applying {len(series.entries)} patch(es)")
    try:
        apply_series(repo, series, log)
    except QueueDoesNotApply as err:
        # Record where the tool stopped, so commits made on top are never reset silently.
        State(pin=pin.commit, queue="incomplete", head=repo.git("rev-parse", "HEAD"), branch=branch).write(repo)
        err.hint = (f"{shown} stops before it; to resolve by hand: git -C {shown} am -3 <patch>, "
                    "fix, git am --continue, apply the rest the same way, then mlx-overlay export")
        raise
    State(pin=pin.commit, queue=wanted, head=repo.git("rev-parse", "HEAD"), branch=branch).write(repo)
