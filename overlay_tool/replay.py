"""Replaying the queue onto another upstream commit, in memory, patch by patch.

Shared by ``rebase`` (which replays for real and stops on a conflict),
``drift`` (the forward check) and ``upstream-pr`` (the dependency check).
Nothing here touches a work tree: trees are built through a private index
and merged with ``git merge-tree``, so a probe of the whole queue against a
new upstream costs a few git calls per patch and no checkout.

Each patch gets one :class:`Row` of the table every command prints:

==========  =============================================================
clean       applies as is (exact context, like ``git am``)
3-way       applies with a 3-way merge (upstream changed the context)
empty       nothing left to apply: upstream already has the change
            (the upstream commit with the same patch-id is named)
conflict    the 3-way merge conflicts (files listed)
deleted     a file the patch changes was deleted upstream (commit named)
==========  =============================================================

A patch whose file upstream renamed is applied to the new name when the
3-way merge can follow it (the row says so and names the commit).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from overlay_tool.git import Repo
from overlay_tool.patchfile import PatchFile
from overlay_tool.series import Series

Log = Callable[[str], None]

APPLIED = ("clean", "3-way", "empty", "resolved", "dropped")


@dataclass
class Item:
    """One patch of the queue being replayed: its file and its commit on the old base."""

    name: str
    kind: str
    commit: str
    patch: Path

    def to_json(self) -> dict[str, str]:
        return {"name": self.name, "kind": self.kind, "commit": self.commit, "patch": str(self.patch)}

    @classmethod
    def from_json(cls, data: dict[str, str]) -> Item:
        return cls(data["name"], data["kind"], data["commit"], Path(data["patch"]))


@dataclass
class Row:
    name: str
    kind: str
    result: str
    detail: str = ""
    files: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, object]:
        return dict(self.__dict__)

    @classmethod
    def from_json(cls, data: dict) -> Row:  # type: ignore[type-arg]
        return cls(**data)


def items_for(series: Series, commits: list[str]) -> list[Item]:
    folder = series.path.parent
    return [Item(e.name, e.kind, c, folder / e.name) for e, c in zip(series.entries, commits, strict=True)]


def describe_commit(repo: Repo, commit: str) -> str:
    return repo.git("log", "-1", "--format=%h (%as) %s", commit)


def who_removed(repo: Repo, old: str, new: str, path: str) -> str:
    """``deleted upstream by <commit>`` or ``renamed to X upstream by <commit>``."""
    shas = repo.lines("log", "--format=%H", "--diff-filter=D", "--no-renames", f"{old}..{new}", "--", path)
    if not shas:
        return f"{path} is missing upstream"
    sha = shas[0]  # the newest commit that removed it
    for line in repo.lines("diff-tree", "-r", "-M", "--name-status", "--no-commit-id", f"{sha}^", sha):
        status, *paths = line.split("\t")
        if status.startswith("R") and paths[0] == path:
            return f"{path} renamed to {paths[1]} upstream by {describe_commit(repo, sha)}"
    return f"{path} deleted upstream by {describe_commit(repo, sha)}"


def _patch_ids(repo: Repo, diff: bytes) -> dict[str, str]:
    out = repo.run("patch-id", "--stable", input=diff).stdout.decode()
    return {pid: sha for pid, sha in (line.split() for line in out.splitlines())}


def upstream_equivalent(repo: Repo, old: str, new: str, commit: str, paths: list[str]) -> str | None:
    """The upstream commit in old..new whose change equals ``commit``'s (same patch-id)."""
    ours = _patch_ids(repo, repo.run("diff-tree", "-p", "--no-renames", "--root", commit).stdout)
    if not ours:
        return None
    wanted = next(iter(ours))
    theirs = repo.run("log", "-p", "--no-merges", "--no-renames", "--format=commit %H", f"{old}..{new}",
                      "--", *paths).stdout
    for pid, sha in _patch_ids(repo, theirs).items():
        if pid == wanted:
            return describe_commit(repo, sha)
    return None


def touched(repo: Repo, old: str, new: str, paths: list[str]) -> list[str]:
    """Upstream commits in old..new touching any of ``paths``, newest first, one line each."""
    if not paths:
        return []
    return repo.lines("log", "--no-merges", "--format=%h %as %s", f"{old}..{new}", "--", *paths)


def patch_paths(patch: Path) -> list[str]:
    paths: list[str] = []
    for diff in PatchFile.read(patch).files:
        for p in (diff.old_path, diff.path):
            if p not in paths:
                paths.append(p)
    return paths


def _preexisting(patch: Path) -> list[str]:
    """Paths the patch expects to exist (it modifies or deletes them)."""
    out = []
    for diff in PatchFile.read(patch).files:
        if not any(h.startswith(b"new file mode") for h in diff.ext_headers):
            out.append(diff.old_path)
    return out


def _exists(repo: Repo, tree: str, path: str) -> bool:
    return repo.run("cat-file", "-e", f"{tree}:{path}", check=False).returncode == 0


def classify(repo: Repo, onto: str, item: Item, old_base: str, new_base: str) -> tuple[Row, str | None]:
    """Replay ``item`` on ``onto`` in memory: its row, and the new tree when it applies."""
    tree = repo.tree_of(onto)
    notes = []
    missing = [p for p in _preexisting(item.patch) if not _exists(repo, tree, p)]
    for path in missing:
        notes.append(who_removed(repo, old_base, new_base, path))
    exact, _ = repo.apply_to_tree(tree, item.patch, check=True)
    clean, merged, files, messages = repo.merge_pick(item.commit, onto)
    if not clean:
        # git's modify/delete lines repeat, with three commit ids, what
        # `notes` already says of a missing path.
        conflicts = [line for line in messages.splitlines() if line.startswith("CONFLICT")
                     and not any(line.startswith(f"CONFLICT (modify/delete): {p} deleted in ") for p in missing)]
        deleted = [n for n in notes if " deleted upstream " in n]
        result = "deleted" if deleted else "conflict"
        detail = "; ".join(deleted or notes + conflicts[:3] or [f"conflict in {', '.join(files)}"])
        if not deleted:
            culprits = touched(repo, old_base, new_base, files)
            if culprits:
                more = f" (+{len(culprits) - 2} more)" if len(culprits) > 2 else ""
                detail += f"; upstream: {', '.join(culprits[:2])}{more}"
        return Row(item.name, item.kind, result, detail, files), None
    if merged == tree:
        paths = patch_paths(item.patch)
        twin = upstream_equivalent(repo, old_base, new_base, item.commit, paths)
        detail = f"taken upstream as {twin}" if twin else "no change left: upstream already has it"
        return Row(item.name, item.kind, "empty", detail), merged
    result = "clean" if exact is not None else "3-way"
    return Row(item.name, item.kind, result, "; ".join(notes)), merged


def make_commit(repo: Repo, tree: str, parent: str, like: str) -> str:
    """A commit of ``tree`` on ``parent`` with ``like``'s message, author and date."""
    message, env = repo.commit_meta(like)
    return repo.commit_tree(tree, [parent], message, env=env)


def probe(repo: Repo, onto: str, items: list[Item], old_base: str, new_base: str) -> tuple[list[Row], str]:
    """Replay every item in memory (a failed one is left out, the rest still tried)."""
    rows = []
    head = onto
    for item in items:
        row, tree = classify(repo, head, item, old_base, new_base)
        if tree is not None and row.result != "empty":
            head = make_commit(repo, tree, head, item.commit)
        rows.append(row)
    return rows, head


def build_chain(repo: Repo, base: str, series: Series, names: list[str] | None = None) -> list[str]:
    """Commit each patch (of ``names``, default all) on ``base`` in memory, exactly as ``am`` would apply it.

    Raises :class:`QueueDoesNotApply` naming the first patch that fails.
    """
    from overlay_tool.errors import QueueDoesNotApply

    commits = []
    head = base
    for entry in series.entries:
        if names is not None and entry.name not in names:
            continue
        path = series.path.parent / entry.name
        tree, error = repo.apply_to_tree(repo.tree_of(head), path)
        if tree is None:
            first = next((line for line in error.splitlines() if line.startswith("error:")), error.strip())
            raise QueueDoesNotApply(f"{entry.name} does not apply to {base[:12]}: {first}")
        patch = PatchFile.read(path)
        head = repo.commit_tree(tree, [head], f"{patch.subject}\n\n{patch.body}\n")
        commits.append(head)
    return commits


def table(rows: list[Row], title: str | None = None) -> list[str]:
    out = [title] if title else []
    width = max([len(r.name) for r in rows] + [5])
    out.append(f"  {'patch':<{width}}  {'kind':<8}  {'result':<9}  detail")
    for row in rows:
        out.append(f"  {row.name:<{width}}  {row.kind:<8}  {row.result:<9}  {row.detail}".rstrip())
    return out
