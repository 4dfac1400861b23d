"""``rebase``: move the queue (and the pin) to another upstream commit.

The queue is replayed patch by patch onto the new commit.  Patches that apply
(cleanly, with a 3-way merge, or not at all because upstream already has
them) are committed in memory (:mod:`overlay_tool.replay`); the first one that
conflicts is cherry-picked for real in the work checkout, with ``rerere``
on, and the command stops there with the conflicted files and hunks, so the
user resolves it where they edit everything else.  ``--continue`` picks up,
``--skip`` drops the patch, ``--abort`` puts everything back.

Nothing in ``patches/`` or ``pin.toml`` changes until the whole queue has
applied; then the queue is re-exported (unchanged patches keep their bytes),
the pin is moved (comments kept), ``git range-diff`` shows the old series
against the new one, and ``check`` runs.

State lives in ``<project>/.overlay/rebase/state.json`` (written atomically
after every step), together with copies of ``pin.toml``, ``patches/`` and the
checkout's apply record, so a rebase killed half-way is detected by the next
command and can be continued or aborted.  Recorded resolutions live in
``<project>/.overlay/rr-cache`` (the checkout's ``rr-cache`` points there), so
they survive an abort, a deleted checkout and a retried bump.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from overlay_tool import cache
from overlay_tool.apply import BASE_REF, STATE_FILE, State, apply_queue, branch_name, queue_hash
from overlay_tool.check import check_queue
from overlay_tool.errors import ConfigError, OperationInProgress, QueueDoesNotApply
from overlay_tool.export import Rendered, differs, render_queue, write_atomically
from overlay_tool.git import Repo
from overlay_tool.pin import Pin
from overlay_tool.project import Project
from overlay_tool.replay import Item, Row, classify, items_for, make_commit, probe, table
from overlay_tool.series import Series

Log = Callable[[str], None]

FORMAT = 1
#: Settings for the real cherry-pick of a conflicting patch, pinned like the rest of git.
PICK_CONFIG = ("-c", "rerere.enabled=true", "-c", "rerere.autoUpdate=true", "-c", "merge.renames=true",
               "-c", "merge.conflictStyle=diff3", "-c", "pull.rebase=false")
_MARKER = re.compile(rb"^(<{7}|>{7})( |$)", re.M)


def tool_dir(project: Project) -> Path:
    return project.root / ".overlay"


def state_dir(project: Project) -> Path:
    return tool_dir(project) / "rebase"


def rr_cache(project: Project) -> Path:
    return tool_dir(project) / "rr-cache"


def write_json_atomically(path: Path, data: object) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        json.dump(data, f, indent=1)
        f.write("\n")
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


@dataclass
class Rebase:
    """What ``state.json`` holds."""

    ref: str
    old_pin: str
    new_pin: str
    checkout: str
    orig_branch: str | None
    orig_head: str
    base_before: str | None
    new_branch: str
    new_branch_before: str | None
    items: list[Item]
    rows: list[Row] = field(default_factory=list)
    head: str = ""  # the new series so far
    # pin.toml's note for new_pin (``v0.32.1-26, 2026-08-22``), read from the
    # cache, whose tags the checkout lacks; "" in states of earlier versions
    new_note: str = ""
    phase: str = "running"  # running | picking | stopped | finishing
    format: int = FORMAT

    @property
    def index(self) -> int:
        return len(self.rows)

    @staticmethod
    def path(project: Project) -> Path:
        return state_dir(project) / "state.json"

    @classmethod
    def load(cls, project: Project) -> Rebase | None:
        path = cls.path(project)
        if not path.exists():
            return None
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            data["items"] = [Item.from_json(i) for i in data["items"]]
            data["rows"] = [Row.from_json(r) for r in data["rows"]]
            return cls(**data)
        except (ValueError, KeyError, TypeError) as err:
            raise ConfigError(f"{path}: unreadable rebase state ({err}); "
                              f"inspect it, then delete {state_dir(project)} to start over") from None

    def save(self, project: Project) -> None:
        data = dict(self.__dict__)
        data["items"] = [i.to_json() for i in self.items]
        data["rows"] = [r.to_json() for r in self.rows]
        write_json_atomically(self.path(project), data)


# -- helpers -------------------------------------------------------------------


def resolve_ref(project: Project, ref: str, *, fetch: bool | None = None, log: Log = print) -> tuple[Repo, str]:
    """``ref`` (commit, tag, branch of upstream) as a full commit id in the cache.

    ``fetch``: True fetches first, False never, None (default) fetches when
    ``ref`` names a branch (to get its newest commit) or is unknown; a failed
    fetch of a known branch falls back to what the cache has, with a warning.
    """
    pin = project.pin
    upstream = cache.open_cache(project.cache_dir, pin.url)
    if re.fullmatch(r"[0-9a-f]{40}", ref):
        return cache.ensure_commit(project.cache_dir, pin, ref), ref

    def lookup() -> str | None:
        for cand in (f"refs/remotes/origin/{ref}", f"refs/tags/{ref}", ref):
            sha = upstream.rev_parse(f"{cand}^{{commit}}")
            if sha:
                return sha
        return None

    is_branch = upstream.rev_parse(f"refs/remotes/origin/{ref}") is not None or ref.startswith("origin/")
    found = lookup()
    if fetch or (fetch is None and (found is None or is_branch)):
        try:
            cache.fetch(upstream, pin.url)
        except Exception as err:  # noqa: BLE001 - an unreachable upstream is fine if the cache knows ref
            if found is None:
                raise
            log(f"warning: could not fetch upstream ({getattr(err, 'message', err)}); using the cache's {ref}")
        found = lookup()
    if found is None:
        raise ConfigError(f"{ref}: not a commit, tag or branch of {pin.url}")
    return upstream, found


def _link_rr_cache(project: Project, repo: Repo) -> None:
    """Point the checkout's rr-cache at the project's, so resolutions outlive the checkout."""
    target = rr_cache(project)
    target.mkdir(parents=True, exist_ok=True)
    link = repo.git_dir() / "rr-cache"
    if link.is_symlink():
        if Path(os.readlink(link)) == target:
            return
        link.unlink()
    elif link.is_dir():
        shutil.copytree(link, target, dirs_exist_ok=True)
        shutil.rmtree(link)
    link.symlink_to(target, target_is_directory=True)


def _pick(repo: Repo, commit: str, *args: str) -> int:
    _, env = repo.commit_meta(commit)
    return repo.run_with(*PICK_CONFIG, "cherry-pick", *args, check=False,
                         env={"GIT_COMMITTER_DATE": env.get("GIT_COMMITTER_DATE", "")}).returncode


def conflict_hunks(path: Path, limit: int = 40) -> list[str]:
    """The conflict-marker regions of a file, with line numbers."""
    try:
        lines = path.read_bytes().decode("utf-8", errors="replace").splitlines()
    except (FileNotFoundError, IsADirectoryError):
        return ["    (file not in the work tree: a modify/delete conflict; keep it with git add, drop it with git rm)"]
    out: list[str] = []
    inside = False
    for number, line in enumerate(lines, start=1):
        if line.startswith("<<<<<<<"):
            inside = True
        if inside:
            out.append(f"    {number:>5} | {line}")
        if line.startswith(">>>>>>>"):
            inside = False
            out.append("    ------")
        if len(out) >= limit:
            out.append("    ... (more in the file)")
            break
    return out or ["    (no conflict markers left)"]


class Rebaser:
    def __init__(self, project: Project, log: Log = print) -> None:
        self.project = project
        self.log = log

    # -- entry points ----------------------------------------------------------
    def start(self, ref: str, checkout: Path | None = None) -> None:
        project, log = self.project, self.log
        existing = Rebase.load(project)
        if existing:
            raise self._in_progress(existing)
        pin = project.pin
        series = project.series
        series.validate()
        upstream, new = resolve_ref(project, ref, log=log)
        if new == pin.commit:
            log(f"{project.display(pin.path)} already pins {new[:12]} ({ref}): nothing to do")
            return
        path = apply_queue(project, checkout, log=log)  # the old queue, committed: refuses unsaved work
        repo = Repo(path)
        with repo.locked():
            self._begin(repo, ref, new, upstream)

    def _begin(self, repo: Repo, ref: str, new: str, upstream: Repo) -> None:
        project, log = self.project, self.log
        pin, series, path = project.pin, project.series, repo.path
        old_head = repo.git("rev-parse", "HEAD")
        commits = repo.lines("rev-list", "--reverse", f"{pin.commit}..{old_head}")
        if len(commits) != len(series.entries):
            raise ConfigError(f"{project.display(path)}: {len(commits)} commit(s) above the pin "
                              f"for {len(series.entries)} patch(es); run mlx-overlay apply --force")
        if not repo.has_commit(new):
            repo.git("fetch", "--quiet", str(upstream.path), new)
        _link_rr_cache(project, repo)
        new_branch = branch_name(new)
        state = Rebase(
            ref=ref, old_pin=pin.commit, new_pin=new, checkout=str(path),
            orig_branch=repo.current_branch(), orig_head=old_head,
            base_before=repo.rev_parse(BASE_REF), new_branch=new_branch,
            new_branch_before=repo.rev_parse(f"refs/heads/{new_branch}"),
            items=items_for(series, commits), head=new, new_note=upstream.version_and_date(new),
        )
        self._backup(repo)
        state.save(project)
        # From here on export refuses (the base is not the pin) and apply refuses (HEAD moved).
        repo.update_ref(BASE_REF, new)
        behind = repo.git("rev-list", "--count", f"{pin.commit}..{new}")
        log(f"rebasing {len(state.items)} patch(es) from {pin.short} to {new[:8]} ({ref}, {behind} upstream commit(s))")
        self._drive(state, repo)

    def continue_(self, *, skip: bool = False) -> None:
        state = self._require()
        repo = Repo(Path(state.checkout))
        with repo.locked():
            self._continue(state, repo, skip)

    def _continue(self, state: Rebase, repo: Repo, skip: bool) -> None:
        if state.phase == "finishing":
            return self._finish(state, repo)
        in_pick = repo.operation_in_progress() == "cherry-pick"
        if state.phase in ("picking", "stopped") and in_pick and repo.conflicted_files() and not skip:
            # Not resolved yet (or killed before the conflict was shown): show it (again).
            item = state.items[state.index]
            row, _ = classify(repo, state.head, item, state.old_pin, state.new_pin)
            state.phase = "stopped"
            state.save(self.project)
            self._report_stop(state, repo, row, still=True)
        if state.phase == "picking" and not in_pick:
            # Killed before or after the real cherry-pick: take its commit if it made one, else retry.
            self._adopt_or_reset(state, repo, adopt=True)
        elif state.phase in ("picking", "stopped"):
            self._resolved(state, repo, skip=skip)
        elif state.phase == "running":
            if skip:
                raise ConfigError("--skip: no patch is stopped on a conflict (use --continue)")
            self._adopt_or_reset(state, repo, adopt=False)
        self._drive(state, repo)

    def abort(self) -> None:
        state = self._require()
        repo = Repo(Path(state.checkout))
        with repo.locked():
            self._abort(state, repo)

    def _abort(self, state: Rebase, repo: Repo) -> None:
        project, log = self.project, self.log
        if repo.operation_in_progress() == "cherry-pick":
            repo.run("cherry-pick", "--quit", check=False)
        if state.orig_branch:
            repo.git("checkout", "--quiet", "--force", state.orig_branch)
            if repo.git("rev-parse", "HEAD") != state.orig_head:
                repo.git("reset", "--quiet", "--hard", state.orig_head)
        else:
            repo.git("checkout", "--quiet", "--force", "--detach", state.orig_head)
        if state.new_branch != state.orig_branch:
            if state.new_branch_before:
                repo.update_ref(f"refs/heads/{state.new_branch}", state.new_branch_before)
            elif repo.rev_parse(f"refs/heads/{state.new_branch}"):
                repo.git("branch", "--quiet", "-D", state.new_branch)
        if state.base_before:
            repo.update_ref(BASE_REF, state.base_before)
        else:
            repo.run("update-ref", "-d", BASE_REF, check=False)
        self._restore(repo)
        shutil.rmtree(state_dir(project))
        log(f"rebase to {state.new_pin[:8]} aborted: {project.display(Path(state.checkout))} is back on "
            f"{state.orig_branch or state.orig_head[:12]}, pin.toml and patches/ unchanged "
            f"(recorded resolutions kept in {project.display(rr_cache(project))})")

    # -- the loop --------------------------------------------------------------
    def _drive(self, state: Rebase, repo: Repo) -> None:
        project = self.project
        while state.index < len(state.items):
            item = state.items[state.index]
            row, tree = classify(repo, state.head, item, state.old_pin, state.new_pin)
            if tree is not None:
                if row.result != "empty":
                    state.head = make_commit(repo, tree, state.head, item.commit)
                state.rows.append(row)
                state.save(project)
                self.log(f"  {row.result:<9} {item.name}" + (f"  ({row.detail})" if row.detail else ""))
                continue
            # A conflict: do it for real in the checkout, where rerere may already know the answer.
            state.phase = "picking"
            state.save(project)
            repo.git("checkout", "--quiet", "--force", "-B", state.new_branch, state.head)
            rc = _pick(repo, item.commit, "--allow-empty", "--keep-redundant-commits", item.commit)
            if rc == 0 or (repo.operation_in_progress() == "cherry-pick" and not repo.conflicted_files()):
                how = "3-way merge" if rc == 0 else "your recorded resolution (rerere)"
                if rc != 0:
                    self._commit_pick(repo, item)
                row.result = "resolved" if rc != 0 else "3-way"
                row.detail = f"conflict resolved by {how}" + (f"; {row.detail}" if row.detail else "")
                state.rows.append(row)
                state.head = repo.git("rev-parse", "HEAD")
                state.phase = "running"
                state.save(project)
                self.log(f"  {row.result:<9} {item.name}  ({row.detail})")
                continue
            state.phase = "stopped"
            state.save(project)
            self._report_stop(state, repo, row)
        self._finish(state, repo)

    def _commit_pick(self, repo: Repo, item: Item) -> None:
        if repo.run("diff", "--cached", "--quiet", "HEAD", check=False).returncode == 0:
            repo.run("cherry-pick", "--skip", check=False)
            return
        if _pick(repo, item.commit, "--continue") != 0:
            raise QueueDoesNotApply(f"{item.name}: git cherry-pick --continue failed in {repo.path}")

    def _resolved(self, state: Rebase, repo: Repo, *, skip: bool) -> None:
        """The user resolved (or skips) the stopped patch: commit it and move on."""
        item = state.items[state.index]
        shown = self.project.display(repo.path)
        in_pick = repo.operation_in_progress() == "cherry-pick"
        if skip:
            if in_pick:
                repo.run("cherry-pick", "--quit", check=False)
            repo.git("reset", "--quiet", "--hard", state.head)
            row = Row(item.name, item.kind, "dropped", "skipped by you (--skip): not in the new queue")
        elif in_pick:
            unmerged = repo.conflicted_files()
            if unmerged:
                raise QueueDoesNotApply(
                    f"{item.name}: still conflicted in {shown}: {', '.join(unmerged)}",
                    hint=f"edit them, git -C {shown} add (or rm) them, then mlx-overlay rebase --continue")
            staged = repo.lines("diff", "--cached", "--name-only", "HEAD")
            marked = [p for p in staged if (repo.path / p).is_file() and _MARKER.search((repo.path / p).read_bytes())]
            if marked:
                raise QueueDoesNotApply(f"{item.name}: conflict markers left in {', '.join(marked)} ({shown})",
                                        hint="remove them, git add, then mlx-overlay rebase --continue")
            empty = repo.run("diff", "--cached", "--quiet", "HEAD", check=False).returncode == 0
            self._commit_pick(repo, item)
            row = (Row(item.name, item.kind, "dropped", "empty after your resolution: not in the new queue")
                   if empty else Row(item.name, item.kind, "resolved", "conflict resolved by you (recorded by rerere)"))
        else:
            head = repo.git("rev-parse", "HEAD")
            if repo.rev_parse(f"{head}^") == state.head and head != state.head:
                row = Row(item.name, item.kind, "resolved", "conflict resolved by you (committed by hand)")
            else:
                raise QueueDoesNotApply(
                    f"{item.name}: not applied and no cherry-pick in progress in {shown}",
                    hint="mlx-overlay rebase --skip drops it, --abort stops the rebase")
        state.rows.append(row)
        state.head = repo.git("rev-parse", "HEAD")
        state.phase = "running"
        state.save(self.project)
        self.log(f"  {row.result:<9} {item.name}  ({row.detail})")

    def _adopt_or_reset(self, state: Rebase, repo: Repo, *, adopt: bool) -> None:
        """After an interruption: keep a commit the real pick made (``adopt``); the loop redoes the rest.

        Nothing else needs undoing: in-memory steps leave the work tree alone,
        and the loop checks the branch out afresh before a real pick.
        """
        head = repo.rev_parse("HEAD")
        on_branch = repo.current_branch() == state.new_branch
        if adopt and on_branch and head and head != state.head and repo.rev_parse(f"{head}^") == state.head:
            item = state.items[state.index]
            state.rows.append(Row(item.name, item.kind, "3-way", "committed before the interruption"))
            state.head = head
        state.phase = "running"
        state.save(self.project)
        self.log(f"resuming the rebase to {state.new_pin[:8]} at patch {state.index + 1} of {len(state.items)}")

    def _report_stop(self, state: Rebase, repo: Repo, row: Row, still: bool = False) -> None:
        project, log = self.project, self.log
        rest = state.items[state.index + 1:]
        probed, _ = probe(repo, state.head, rest, state.old_pin, state.new_pin)
        for p in probed:
            p.detail = f"(not yet applied; probe without {row.name}: {p.result}{', ' + p.detail if p.detail else ''})"
            p.result = "pending"
        log("")
        log("\n".join(table(state.rows + [row] + probed, f"rebase {state.old_pin[:8]} -> {state.new_pin[:8]}:")))
        shown = project.display(repo.path)
        log("")
        log(f"stopped at {row.name} in {shown} (branch {state.new_branch}); conflicted:")
        for path in repo.conflicted_files():
            log(f"  {path}")
            for line in conflict_hunks(repo.path / path):
                log(line)
        if still:
            raise QueueDoesNotApply(
                f"{row.name}: still conflicted in {shown}: {', '.join(repo.conflicted_files())}",
                hint=f"edit them, git -C {shown} add (or rm) them, then mlx-overlay rebase --continue "
                     f"(or --skip to drop {row.name}, --abort to put everything back)")
        raise QueueDoesNotApply(
            f"{row.name} conflicts with {state.new_pin[:12]}: {row.detail or ', '.join(row.files)}",
            hint=f"resolve in {shown}, git add the files, then: mlx-overlay rebase --continue "
                 f"(or --skip to drop {row.name}, --abort to put everything back)")

    # -- the end -------------------------------------------------------------
    def _finish(self, state: Rebase, repo: Repo) -> None:
        project, log = self.project, self.log
        state.phase = "finishing"
        state.save(project)
        repo.git("checkout", "--quiet", "--force", "-B", state.new_branch, state.head)
        old_series = Series.load(state_dir(project) / "backup" / "patches" / "series")  # old files read from here
        rendered = render_queue(repo, state.new_pin, old_series, project.series_path)
        if differs(rendered, project.patches_dir):
            write_atomically(rendered, project.patches_dir)
        if project.pin.commit != state.new_pin:
            staged = state_dir(project) / "pin.toml.new"
            shutil.copy2(state_dir(project) / "backup" / "pin.toml", staged)
            # core's edit: comments and layout kept, the version-and-date note above the commit renewed
            Pin.load(staged).with_commit(state.new_pin, note=state.new_note or None)
            os.replace(staged, project.pin_path)
        repo.update_ref(BASE_REF, state.new_pin)
        State(pin=state.new_pin, queue=queue_hash(project.series, state.new_pin),
              head=state.head, branch=state.new_branch).write(repo)
        log("")
        log("\n".join(table(state.rows, f"rebase {state.old_pin[:8]} -> {state.new_pin[:8]}: done")))
        kept = len(rendered.kept)
        log(f"wrote {project.display(project.patches_dir)}: {len(rendered.files)} patch(es), {kept} unchanged; "
            f"{project.display(project.pin_path)} now pins {state.new_pin[:12]}")
        log("")
        log(f"range-diff {state.old_pin[:8]}..old queue -> {state.new_pin[:8]}..new queue:")
        diff = repo.git("range-diff", "--no-color", "--creation-factor=95",
                        f"{state.old_pin}..{state.orig_head}", f"{state.new_pin}..{state.head}")
        log(diff or "  (empty)")
        shutil.rmtree(state_dir(project))
        log("")
        check_queue(project, log=log)

    # -- bookkeeping -----------------------------------------------------------
    def _require(self) -> Rebase:
        state = Rebase.load(self.project)
        if state is None:
            raise ConfigError(f"no rebase in progress (no {self.project.display(Rebase.path(self.project))})")
        if not (Path(state.checkout) / ".git").exists():
            raise ConfigError(f"{state.checkout}: the rebase's checkout is gone; "
                              f"delete {self.project.display(state_dir(self.project))} to forget the rebase")
        return state

    def _in_progress(self, state: Rebase) -> OperationInProgress:
        where = state.index + 1
        stopped = state.items[state.index].name if state.index < len(state.items) else "the export"
        how = {"stopped": "stopped on a conflict", "picking": "interrupted", "running": "interrupted",
               "finishing": "interrupted while writing"}.get(state.phase, state.phase)
        return OperationInProgress(
            f"a rebase from {state.old_pin[:8]} to {state.new_pin[:8]} is in progress ({how} at patch "
            f"{where}/{len(state.items)}: {stopped})",
            hint="mlx-overlay rebase --continue, or mlx-overlay rebase --abort")

    def _backup(self, repo: Repo) -> None:
        project = self.project
        backup = state_dir(project) / "backup"
        if backup.exists():
            shutil.rmtree(backup)
        backup.mkdir(parents=True)
        shutil.copy2(project.pin_path, backup / "pin.toml")
        shutil.copytree(project.patches_dir, backup / "patches")
        record = State.path(repo)
        if record.exists():
            shutil.copy2(record, backup / STATE_FILE)

    def _restore(self, repo: Repo) -> None:
        project = self.project
        backup = state_dir(project) / "backup"
        if (backup / "pin.toml").read_bytes() != project.pin_path.read_bytes():
            staged = state_dir(project) / "pin.toml.old"
            shutil.copy2(backup / "pin.toml", staged)
            os.replace(staged, project.pin_path)
        saved = Series.load(backup / "patches" / "series")
        files = {e.name: (backup / "patches" / e.name).read_bytes() for e in saved.entries}
        rendered = Rendered(series=saved, files=files)
        current = {p.name for p in project.patches_dir.glob("*")} if project.patches_dir.exists() else set()
        wanted = {p.name for p in (backup / "patches").iterdir()}
        if current != wanted or differs(rendered, project.patches_dir):
            shutil.rmtree(project.patches_dir.with_name(".patches.restore"), ignore_errors=True)
            tmp = project.patches_dir.with_name(".patches.restore")
            shutil.copytree(backup / "patches", tmp)
            old = project.patches_dir.with_name(f".patches.old-{os.getpid()}")
            if project.patches_dir.exists():
                project.patches_dir.rename(old)
            tmp.rename(project.patches_dir)
            shutil.rmtree(old, ignore_errors=True)
        record = backup / STATE_FILE
        if record.exists():
            shutil.copy2(record, State.path(repo))


def in_progress_note(project: Project) -> str | None:
    """One line for ``status`` when a rebase is under way (None otherwise)."""
    try:
        state = Rebase.load(project)
    except ConfigError as err:
        return err.message
    if state is None:
        return None
    return Rebaser(project)._in_progress(state).message + " (rebase --continue or --abort)"
