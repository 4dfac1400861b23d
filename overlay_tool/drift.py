"""``drift``: how far upstream has moved under the queue, and would the queue still apply.

Two answers, for people and for CI:

1. The upstream commits since the pin that touch files the queue patches,
   grouped by patch (a commit touching two patches' files is listed under both).
2. A forward check: the queue replayed in memory onto REF (default: the
   newest ``origin/<branch>`` the cache knows; ``--fetch`` updates it first),
   one row per patch as ``rebase`` would print it.  Nothing is checked out and
   nothing in the project changes.

The result is the exit code: 0 the queue applies to REF (cleanly, with 3-way
merges, or with patches upstream already has), 5 it does not (a conflict, or a
patched file deleted upstream), 2 bad input, 4 upstream unreachable.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from overlay_tool import cache
from overlay_tool.errors import QueueDoesNotApply
from overlay_tool.git import Repo
from overlay_tool.project import Project
from overlay_tool.rebase import resolve_ref
from overlay_tool.replay import APPLIED, Row, build_chain, items_for, patch_paths, probe, table, touched

Log = Callable[[str], None]


@dataclass
class Drift:
    ref: str
    target: str
    behind: int
    commits: dict[str, list[str]] = field(default_factory=dict)  # patch -> upstream commits touching its files
    rows: list[Row] = field(default_factory=list)

    @property
    def applies(self) -> bool:
        return all(r.result in APPLIED for r in self.rows)


def collect(project: Project, against: str | None = None, *, fetch: bool = False, log: Log = print) -> Drift:
    pin = project.pin
    series = project.series
    series.validate(numbering=False)
    ref = against or f"origin/{pin.branch}"
    upstream, target = resolve_ref(project, ref, fetch=True if fetch else (None if against else False), log=log)
    cache.ensure_commit(project.cache_dir, pin)
    result = Drift(ref=ref, target=target, behind=int(upstream.git("rev-list", "--count", f"{pin.commit}..{target}")))
    with tempfile.TemporaryDirectory(prefix="mlx-overlay-drift-") as tmp:
        # A shared clone without a checkout: the probe's objects land in it, not in the cache.
        scratch = Repo.clone(upstream.path, Path(tmp) / "mlx", shared=True)
        for entry in series.entries:
            result.commits[entry.name] = touched(scratch, pin.commit, target,
                                                 patch_paths(project.patches_dir / entry.name))
        commits = build_chain(scratch, pin.commit, series)
        result.rows, _ = probe(scratch, target, items_for(series, commits), pin.commit, target)
    return result


def report(project: Project, drift: Drift, log: Log = print) -> None:
    pin = project.pin
    touching = {c for commits in drift.commits.values() for c in commits}
    log(f"pin {pin.short} -> {drift.ref} {drift.target[:8]}: {drift.behind} upstream commit(s), "
        f"{len(touching)} touch patched files")
    kinds = {e.name: e.kind for e in project.series.entries}
    for name, commits in drift.commits.items():
        log(f"  {name} ({kinds.get(name)}): {len(commits) or 'no'} upstream commit(s)")
        for line in commits:
            log(f"    {line}")
    log("")
    log("\n".join(table(drift.rows, f"forward check: the queue replayed onto {drift.ref} ({drift.target[:8]})")))
    counts: dict[str, int] = {}
    for row in drift.rows:
        counts[row.result] = counts.get(row.result, 0) + 1
    summary = ", ".join(f"{n} {r}" for r, n in counts.items()) or "empty queue"
    log(f"the queue applies to {drift.ref}: {'yes' if drift.applies else 'NO'} ({summary})")


def to_json(project: Project, drift: Drift) -> dict:  # type: ignore[type-arg]
    return {
        "pin": project.pin.commit, "ref": drift.ref, "target": drift.target, "behind": drift.behind,
        "applies": drift.applies, "commits": drift.commits, "rows": [r.to_json() for r in drift.rows],
    }


def check_drift(project: Project, against: str | None = None, *, fetch: bool = False,
                json_path: Path | None = None, log: Log = print) -> Drift:
    """Report, then raise :class:`QueueDoesNotApply` (exit 5) when the queue does not apply to REF."""
    drift = collect(project, against, fetch=fetch, log=log)
    report(project, drift, log)
    if json_path is not None:
        json_path.parent.mkdir(parents=True, exist_ok=True)
        json_path.write_text(json.dumps(to_json(project, drift), indent=1) + "\n", encoding="utf-8")
    if not drift.applies:
        bad = [r for r in drift.rows if r.result not in APPLIED]
        more = f" (and {len(bad) - 1} more: the table above)" if len(bad) > 1 else ""
        raise QueueDoesNotApply(
            f"{len(bad)} patch(es) would not apply to {drift.ref} ({drift.target[:12]}): "
            f"{bad[0].name}: {bad[0].detail or bad[0].result}{more}",
            hint=f"mlx-overlay rebase --to {drift.target} resolves them one by one")
    return drift
