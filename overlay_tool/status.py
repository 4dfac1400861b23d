"""``status``: the pin, each patch's state in the work checkout, and upstream drift."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from overlay_tool import cache
from overlay_tool.apply import BASE_REF, State, queue_hash
from overlay_tool.errors import ConfigError
from overlay_tool.export import render_queue
from overlay_tool.git import Repo
from overlay_tool.label import overlay_label
from overlay_tool.patchfile import PatchFile
from overlay_tool.project import Project

Log = Callable[[str], None]


@dataclass
class Status:
    pin: str
    branch: str
    behind: int | None  # commits on the cache's origin/<branch> beyond the pin
    patches: list[tuple[str, str, str]] = field(default_factory=list)  # (name, kind, state)
    extra_commits: list[str] = field(default_factory=list)  # in the checkout, not in patches/
    drift: list[str] = field(default_factory=list)  # upstream commits touching patched files
    label: str | None = None


def patched_paths(project: Project) -> list[str]:
    paths: set[str] = set()
    for entry in project.series.entries:
        path = project.patches_dir / entry.name
        if path.is_file():
            for diff in PatchFile.read(path).files:
                paths.update({diff.path, diff.old_path})
    return sorted(paths)


def _patch_states(project: Project, repo: Repo, status: Status) -> None:
    series = project.series
    state = State.read(repo)
    base = repo.rev_parse(BASE_REF)
    if base is None:
        status.patches = [(e.name, e.kind, "checkout not made by apply") for e in series.entries]
        return
    if state and state.queue == queue_hash(series, project.pin.commit) and state.head == repo.rev_parse("HEAD"):
        status.patches = [(e.name, e.kind, "applied") for e in series.entries]
        return
    rendered = render_queue(repo, base, series, project.series_path)
    identities = {PatchFile.parse(Path(n), data).identity: n for n, data in rendered.files.items()}
    subjects = {PatchFile.parse(Path(n), data).subject: n for n, data in rendered.files.items()}
    matched: set[str] = set()
    for entry in series.entries:
        path = project.patches_dir / entry.name
        patch = PatchFile.read(path) if path.is_file() else None
        if patch and patch.identity in identities:
            matched.add(identities[patch.identity])
            text = "applied" if base == project.pin.commit else f"applied on {base[:8]}, not the pin"
        elif patch and patch.subject in subjects:
            matched.add(subjects[patch.subject])
            text = "changed in the checkout (export to save)"
        else:
            text = "not in the checkout"
        status.patches.append((entry.name, entry.kind, text))
    status.extra_commits = [n for n in rendered.files if n not in matched]


def collect(project: Project, *, fetch: bool = False) -> Status:
    """Everything status shows; touches the network only with ``fetch``."""
    pin = project.pin
    status = Status(pin=pin.commit, branch=pin.branch, behind=None)
    if fetch or project.cache_dir.exists():
        upstream = cache.open_cache(project.cache_dir, pin.url)
        if fetch:
            cache.fetch(upstream, pin.url)
        status.behind = cache.behind(upstream, pin)
        tip = upstream.rev_parse(f"refs/remotes/origin/{pin.branch}")
        paths = patched_paths(project)
        if tip and paths and upstream.has_commit(pin.commit):
            status.drift = upstream.lines("log", "--no-merges", "--format=%h %as %s",
                                          f"{pin.commit}..{tip}", "--", *paths)
    work = project.work_dir
    if (work / ".git").exists():
        repo = Repo(work)
        if repo.operation_in_progress() is None and repo.rev_parse("HEAD"):
            try:
                _patch_states(project, repo, status)
            except ConfigError as err:
                status.patches = [(e.name, e.kind, f"unknown ({err.message})") for e in project.series.entries]
            status.label = overlay_label(repo)
        else:
            busy = "checkout busy (git operation in progress)"
            status.patches = [(e.name, e.kind, busy) for e in project.series.entries]
    else:
        status.patches = [(e.name, e.kind, "no work checkout (run apply)") for e in project.series.entries]
    return status


def report(project: Project, status: Status, log: Log = print) -> None:
    if status.behind is None:
        where = f"origin/{status.branch} unknown to the cache (status --fetch)"
    else:
        where = f"{status.behind} commit(s) behind origin/{status.branch} as last fetched"
    log(f"pin      {status.pin[:12]} ({where})")
    from overlay_tool.rebase import in_progress_note  # (issue 6) a pin bump under way

    note = in_progress_note(project)
    if note:
        log(f"rebase   {note}")
    if status.label:
        log(f"label    +{status.label} (wheel built from {project.display(project.work_dir)})")
    log(f"patches  {len(status.patches)}")
    width = max((len(name) for name, _, _ in status.patches), default=0)
    for name, kind, state in status.patches:
        log(f"  {name:<{width}}  {kind:<8}  {state}")
    for name in status.extra_commits:
        log(f"  {name:<{width}}  {'':<8}  new commit in the checkout (export to save)")
    if status.drift:
        log(f"upstream commits since the pin touching patched files: {len(status.drift)}")
        for line in status.drift:
            log(f"  {line}")
    else:
        log("upstream commits since the pin touching patched files: none")
