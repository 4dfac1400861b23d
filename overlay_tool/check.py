"""``check``: the CI gate.

1. Lint ``patches/``: series and files agree, numbers follow the order, every
   patch parses, has a description and adds no trailing whitespace.
   (:class:`ConfigError`, exit 2, listing every problem.)
2. Apply the queue to the pin in a scratch clone of the cache
   (:class:`QueueDoesNotApply`, exit 5; :class:`UpstreamUnreachable`, exit 4).
3. Re-export it and compare with ``patches/`` (:class:`QueueStale`, exit 6,
   with the diff).
"""

from __future__ import annotations

import difflib
import tempfile
from collections.abc import Callable
from pathlib import Path

from overlay_tool import cache
from overlay_tool.apply import apply_series
from overlay_tool.errors import ConfigError, QueueStale
from overlay_tool.export import Rendered, differs, render_queue, write_atomically
from overlay_tool.git import Repo
from overlay_tool.patchfile import PatchFile
from overlay_tool.project import Project
from overlay_tool.series import Series

Log = Callable[[str], None]


def lint(project: Project) -> list[str]:
    """Every problem in patches/ that needs no git to see, one line each."""
    series = project.series
    problems = [p.replace(f"{project.root}/", "") for p in series.problems()]
    for entry in series.entries:
        path = project.patches_dir / entry.name
        if not path.is_file():
            continue
        shown = project.display(path)
        try:
            patch = PatchFile.read(path)
        except ConfigError as err:
            problems.append(err.message.replace(str(path), shown))
            continue
        if not patch.body:
            problems.append(f"{shown}: no description (the commit message needs a body saying why)")
        for diff in patch.files:
            for line, text in diff.added:
                if text.rstrip(b" \t\r") != text:
                    problems.append(f"{shown}:{line}: trailing whitespace added to {diff.path}")
    return problems


def stale_diff(rendered: Rendered, folder: Path, shown: str) -> str:
    """A unified diff from ``folder`` to what export would write."""
    want = dict(rendered.files)
    want["series"] = rendered.series.render().encode()
    have = {p.name: p.read_bytes() for p in folder.iterdir() if p.name == "series" or p.suffix == ".patch"}
    out: list[str] = []
    for name in sorted(set(want) | set(have)):
        a, b = have.get(name), want.get(name)
        if a == b:
            continue
        out.extend(difflib.unified_diff(
            (a or b"").decode(errors="replace").splitlines(keepends=True),
            (b or b"").decode(errors="replace").splitlines(keepends=True),
            fromfile=f"{shown}/{name}" if a is not None else "/dev/null",
            tofile=f"{shown}/{name} (re-exported)" if b is not None else "/dev/null",
        ))
    return "".join(line if line.endswith("\n") else line + "\n" for line in out)


def check_queue(project: Project, *, fix_dir: Path | None = None, log: Log = print) -> None:
    """Raise the matching error unless patches/ is exactly what apply + export reproduce.

    With ``fix_dir``, a stale queue is also written there as export would
    write it, for CI to publish (the fix is then one copy away).
    """
    problems = lint(project)
    if len(problems) == 1:
        raise ConfigError(problems[0])
    if problems:
        for problem in problems:
            log(f"  problem  {problem}")
        raise ConfigError(f"{len(problems)} problems in {project.display(project.patches_dir)}/ (listed above)")
    pin = project.pin
    series: Series = project.series
    upstream = cache.ensure_commit(project.cache_dir, pin)
    with tempfile.TemporaryDirectory(prefix="mlx-overlay-check-") as tmp:
        scratch = Repo.clone(upstream.path, Path(tmp) / "mlx", shared=True)
        scratch.git("checkout", "--quiet", "--detach", pin.commit)
        log(f"applying {len(series.entries)} patch(es) to {pin.short} in a scratch checkout")
        apply_series(scratch, series, log)
        rendered = render_queue(scratch, pin.commit, series, project.series_path)
    shown = project.display(project.patches_dir)
    if differs(rendered, project.patches_dir):
        log(stale_diff(rendered, project.patches_dir, shown).rstrip("\n"))
        hint = "run mlx-overlay apply && mlx-overlay export, then commit patches/"
        if fix_dir is not None:
            fix_dir.parent.mkdir(parents=True, exist_ok=True)
            write_atomically(rendered, fix_dir.absolute())
            hint = f"the re-exported queue is in {fix_dir}: copy it over patches/, or {hint}"
        raise QueueStale(f"{shown}/ is not what apply + export produce (diff above)", hint=hint)
    log(f"{shown}/ is up to date: {len(series.entries)} patch(es) apply to {pin.short} and re-export unchanged")
