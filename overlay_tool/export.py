"""``export``: the work checkout's commits back into ``patches/`` and ``series``.

Deterministic: ``git format-patch`` runs with every option that shapes its
output given explicitly (and the config pinned by :mod:`overlay_tool.git`), so
the same commits give the same bytes whatever the user's git config.  Renames
are written as delete + add (``--no-renames``), which every ``git apply``
reads the same way.

Quiet: a patch whose commit carries the same message and the same pre/post
blob ids as the existing file (:attr:`PatchFile.identity`) keeps the existing
file's bytes, so hunk-header noise or a different git version never churns
the queue.

Atomic: the new folder is built beside ``patches/`` and swapped in with two
renames; :func:`overlay_tool.project.Project.discover` finishes a swap that
was interrupted between them.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from overlay_tool.apply import BASE_REF, State, queue_hash
from overlay_tool.errors import ConfigError, OperationInProgress
from overlay_tool.git import Repo
from overlay_tool.patchfile import PatchFile
from overlay_tool.project import Project
from overlay_tool.series import Entry, Kind, Series

Log = Callable[[str], None]

#: Every option that shapes format-patch's output, stated rather than inherited.
FORMAT_PATCH_OPTIONS = (
    "--keep-subject",
    "--no-numbered",
    "--no-stat",
    "--no-signature",
    "--zero-commit",
    "--full-index",
    "--no-renames",
    "--no-notes",
    "--no-cover-letter",
    "--no-thread",
    "--no-attach",
    "--no-add-header",
    "--no-to",
    "--no-cc",
    "--src-prefix=a/",
    "--dst-prefix=b/",
    "--no-color",
    "--no-relative",
    "--no-textconv",
    "--no-ext-diff",
    "--diff-algorithm=myers",
    "--unified=3",
    "--encoding=UTF-8",
)

DEFAULT_KIND: Kind = "overlay"


@dataclass
class Rendered:
    """The queue as export would write it."""

    series: Series
    files: dict[str, bytes]
    kept: list[str] = field(default_factory=list)  # names whose old bytes were kept
    new: list[str] = field(default_factory=list)  # names not matched to an old patch


def commits_to_export(repo: Repo, base: str, head: str = "HEAD") -> list[str]:
    if not repo.is_ancestor(base, head):
        raise ConfigError(f"{repo.path}: {head} is not a descendant of the base {base[:12]}")
    if repo.lines("rev-list", "--merges", f"{base}..{head}"):
        raise ConfigError(f"{repo.path}: merge commits between the base and {head} cannot be exported as patches")
    return repo.lines("rev-list", "--reverse", f"{base}..{head}")


def render_queue(repo: Repo, base: str, old_series: Series | None, series_path: Path,
                 head: str = "HEAD") -> Rendered:
    """Format base..head as patches, reusing old files whose content is unchanged."""
    commits = commits_to_export(repo, base, head)
    old: dict[tuple[bytes, tuple[bytes, ...]], tuple[Entry, bytes]] = {}
    by_slug: dict[str, Entry] = {}
    if old_series is not None:
        for entry in old_series.entries:
            by_slug[entry.slug] = entry
            try:
                patch = PatchFile.read(old_series.path.parent / entry.name)
            except ConfigError:
                continue  # a damaged old file is simply not reused
            old[patch.identity] = (entry, patch.raw)
    entries: list[Entry] = []
    files: dict[str, bytes] = {}
    rendered = Rendered(series=Series(series_path), files=files)
    if commits:
        with tempfile.TemporaryDirectory(prefix="mlx-overlay-fp-") as tmp:
            repo.git("format-patch", *FORMAT_PATCH_OPTIONS, "--output-directory", tmp, f"{base}..{head}")
            generated = sorted(Path(tmp).iterdir())
            if len(generated) != len(commits):
                raise ConfigError(f"format-patch wrote {len(generated)} files for {len(commits)} commits")
            for gen in generated:
                patch = PatchFile.read(gen)
                match = old.get(patch.identity)
                previous = match[0] if match else by_slug.get(gen.name[5:])
                if match:
                    files[gen.name] = match[1]
                    rendered.kept.append(gen.name)
                else:
                    files[gen.name] = patch.raw
                if previous is None:
                    rendered.new.append(gen.name)
                entries.append(Entry(
                    name=gen.name,
                    kind=previous.kind if previous else DEFAULT_KIND,
                    comments=previous.comments if previous else (),
                ))
    header = old_series.header if old_series else ()
    trailer = old_series.trailer if old_series else ()
    rendered.series = Series(series_path, entries, header=header, trailer=trailer)
    return rendered


def differs(rendered: Rendered, folder: Path) -> bool:
    """Whether writing ``rendered`` would change ``folder`` (series and *.patch)."""
    series_path = folder / "series"
    current = {p.name for p in folder.glob("*.patch")}
    if current != set(rendered.files):
        return True
    if not series_path.is_file() or series_path.read_text(encoding="utf-8") != rendered.series.render():
        return True
    return any((folder / name).read_bytes() != data for name, data in rendered.files.items())


def write_atomically(rendered: Rendered, folder: Path) -> None:
    """Replace ``folder`` with the rendered queue; other files in it are carried over."""
    parent = folder.parent
    tmp = Path(tempfile.mkdtemp(prefix=".patches.new-", dir=parent))
    try:
        if folder.is_dir():
            for item in folder.iterdir():
                if item.name != "series" and item.suffix != ".patch":
                    (shutil.copytree if item.is_dir() else shutil.copy2)(item, tmp / item.name)
        for name, data in rendered.files.items():
            (tmp / name).write_bytes(data)
        (tmp / "series").write_text(rendered.series.render(), encoding="utf-8")
        os.chmod(tmp, 0o755)
        if folder.exists():
            old = parent / f".patches.old-{os.getpid()}"
            folder.rename(old)
            tmp.rename(folder)
            shutil.rmtree(old)
        else:
            tmp.rename(folder)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp)


def export_queue(project: Project, checkout: Path | None = None, *, log: Log = print) -> Rendered:
    """Write the checkout's commits above the base into patches/ (unchanged files kept)."""
    path = (checkout or project.work_dir).absolute()
    shown = project.display(path)
    if not (path / ".git").exists():
        raise ConfigError(f"{shown}: no work checkout (run mlx-overlay apply first)")
    repo = Repo(path)
    with repo.locked():
        return _export(project, repo, log)


def _export(project: Project, repo: Repo, log: Log) -> Rendered:
    shown = project.display(repo.path)
    op = repo.operation_in_progress()
    if op:
        raise OperationInProgress(f"{shown}: a git {op} is in progress; refusing to export a half-done queue",
                                  hint=f"finish it (git -C {shown} {op} --continue) or abort it, then export")
    base = repo.rev_parse(BASE_REF)
    if base is None:
        raise ConfigError(f"{shown}: no {BASE_REF} (this checkout was not made by mlx-overlay apply)")
    pin = project.pin
    if base != pin.commit:
        raise ConfigError(f"{shown} is based on {base[:12]} but {project.display(pin.path)} pins {pin.short}",
                          hint="run mlx-overlay apply (or finish the rebase) first")
    old_series = project.series if project.series_path.exists() else None
    rendered = render_queue(repo, base, old_series, project.series_path)
    if not rendered.files:
        raise ConfigError(f"{shown}: no commits on top of the pin; refusing to export an empty queue "
                          f"(it would delete every patch)")
    if repo.dirty_files():
        log(f"note: uncommitted changes in {shown} are not exported (commit them first)")
    for name in rendered.new:
        log(f"  new      {name} (marked {DEFAULT_KIND}; change it in patches/series if it is for upstream)")
    if not differs(rendered, project.patches_dir):
        log(f"{project.display(project.patches_dir)}/ is up to date ({len(rendered.files)} patch(es))")
    else:
        write_atomically(rendered, project.patches_dir)
        changed = [n for n in rendered.files if n not in rendered.kept]
        log(f"wrote {project.display(project.patches_dir)}/: {len(rendered.files)} patch(es), "
            f"{len(changed)} changed, {len(rendered.kept)} unchanged")
    # The checkout now holds exactly the queue: a later apply has nothing to do.
    State(pin=pin.commit, queue=queue_hash(project.series, pin.commit),
          head=repo.git("rev-parse", "HEAD"), branch=repo.current_branch() or "").write(repo)
    return rendered
