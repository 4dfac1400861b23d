"""``upstream-pr``: the ``upstream`` patches as a branch and a series ready for ml-explore/mlx.

1. Refuses when an ``upstream`` patch depends on an ``overlay`` one: the
   upstream-only series must apply to the pin by itself, and no hunk of an
   upstream patch may touch lines an earlier overlay patch introduced
   (``git blame`` over the queue, in memory).  Both patches and the line are
   named.
2. Builds branch ``upstream-pr`` on REF (default: upstream's newest
   ``origin/<branch>``, fetched) in ``<project>/work/upstream-pr``: the
   patches are applied to the pin with ``git am`` and replayed onto REF (3-way,
   as ``rebase`` does); a conflict refuses and says to rebase first.
3. Checks MLX's formatting as its pre-commit does, on whole files the branch
   adds or changes: ``clang-format`` with MLX's ``.clang-format`` on the
   files MLX's hook covers (and ``.metal``), ``black`` and ``isort`` (MLX's
   hook arguments) on Python files, at the versions MLX's
   ``.pre-commit-config.yaml`` pins, installed from PyPI into a tool-managed
   virtual environment (``$MLX_OVERLAY_TOOLS``, default ``<cache>/tools``).
   A change on a line the patches changed is a problem; one elsewhere is a
   pre-existing upstream difference, only noted.  If the tools cannot be
   installed it fails loudly (exit 12).
4. Writes ``format-patch`` files and ``PR.md`` (a draft from the patches'
   messages, the regions of ``docs/upstream-behaviour.md`` and
   ``docs/benchmarks.md`` marked for the paths the PR changes (all of
   benchmarks.md when it has no marks), the latest parity summary and the
   upstream-or-overlay decision) to DIR (default ``dist/upstream-pr/``).

With ``--only`` the PR takes some of the upstream patches; those left out
count as overlay ones for 1.

It never pushes.  Exit codes: 0 ready, 2 bad input, 4 upstream unreachable,
5 an upstream patch depends on an overlay patch or conflicts with REF,
12 formatters cannot be installed, 13 formatting problems (files still written).
"""

from __future__ import annotations

import difflib
import fnmatch
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from overlay_tool import cache
from overlay_tool.apply import apply_series
from overlay_tool.errors import ConfigError, DirtyCheckout, FormatError, MissingTool, QueueDoesNotApply
from overlay_tool.export import FORMAT_PATCH_OPTIONS
from overlay_tool.git import Repo
from overlay_tool.patchfile import PatchFile
from overlay_tool.project import Project, cache_root
from overlay_tool.rebase import resolve_ref
from overlay_tool.replay import APPLIED, build_chain, items_for, probe, table
from overlay_tool.series import Entry, Series

Log = Callable[[str], None]

BRANCH = "upstream-pr"
DECISION = Path("docs/decisions/0001-upstream-or-overlay.md")
PARITY_SUMMARY = Path("dist/test-summary.json")  # written by `mlx-overlay test`
#: Used when MLX's config names no ``files:`` for its clang-format hook.
DEFAULT_CLANG_FILES = r"\.(h|hpp|c|cc|cpp|cu|cuh|mm)$"
_HUNK_LEN = re.compile(r"^@@ -(\d+)(?:,(\d+))?")


# -- dependency check ------------------------------------------------------------


def _left_out(entry: Entry) -> str:
    return "overlay" if entry.kind == "overlay" else "upstream, not in this PR"


def dependencies(repo: Repo, pin: str, series: Series, wanted: list[str]) -> list[str]:
    """Every way a patch of the PR (`wanted`, upstream patches) needs a patch
    left out of it (overlay, or upstream but not selected), one line each
    (empty: independent)."""
    entries = series.entries
    full = build_chain(repo, pin, series)
    left_out = {c: e for e, c in zip(entries, full) if e.name not in wanted}
    found: list[str] = []
    for index, entry in enumerate(entries):
        if entry.name not in wanted:
            continue
        parent = full[index - 1] if index else pin
        patch = PatchFile.read(series.path.parent / entry.name)
        for diff in patch.files:
            if any(h.startswith(b"new file mode") for h in diff.ext_headers):
                continue
            for hunk in diff.hunks:
                m = _HUNK_LEN.match(hunk.header)
                length = int(m.group(2)) if m and m.group(2) is not None else 1
                if not m or length == 0:
                    continue
                out = repo.lines("blame", "--porcelain", "-L", f"{hunk.old_start},+{length}",
                                 f"{pin}..{parent}", "--", diff.old_path)
                for line in out:
                    fields = line.split()
                    if len(fields) >= 3 and fields[0] in left_out and re.fullmatch(r"[0-9a-f]{40}", fields[0]):
                        other = left_out[fields[0]]
                        found.append(f"{entry.name} (upstream) depends on {other.name} ({_left_out(other)}): "
                                     f"its hunk #{hunk.number} in {diff.old_path} touches line {fields[2]}, "
                                     f"which {other.name} introduced")
                        break
    try:
        build_chain(repo, pin, series, names=wanted)
    except QueueDoesNotApply as err:
        failing = err.message.split(" ", 1)[0]
        position = next(i for i, e in enumerate(entries) if e.name == failing)
        before = [e for e in entries[:position] if e.name not in wanted]
        m = re.search(r"patch failed: (.+):\d+|error: (.+?): (?:does not exist|already exists)", err.message)
        path = (m.group(1) or m.group(2)) if m else None
        touching = [e.name for e in before
                    if path is None or path in {p for f in PatchFile.read(series.path.parent / e.name).files
                                                for p in (f.path, f.old_path)}]
        needed = ", ".join(touching or [e.name for e in before]) or "none"
        found.append(f"{err.message} without the patch(es) before it left out of the PR that change that file: "
                     f"{needed}")
    return list(dict.fromkeys(found))


# -- formatting ------------------------------------------------------------------


@dataclass
class Hook:
    repo: str
    rev: str
    files: str | None = None
    args: list[str] = field(default_factory=list)


def precommit_hooks(text: str) -> dict[str, Hook]:
    """Hook id -> (repo, rev, files) from a ``.pre-commit-config.yaml`` (the simple layout MLX uses)."""
    hooks: dict[str, Hook] = {}
    repo = rev = ""
    current: Hook | None = None
    in_args = False
    for raw in text.splitlines():
        line = raw.split(" #")[0].rstrip() if not raw.lstrip().startswith("#") else ""
        if re.match(r"^\s*args:\s*$", line):
            in_args = True
            continue
        item = re.match(r"^\s*-\s+(\S.*)$", line)
        if in_args and item and current is not None and not re.match(r"^\s*-\s*(repo|id):", line):
            current.args.append(item.group(1).strip().strip("'\""))
            continue
        in_args = False
        m = re.match(r"^\s*-?\s*(repo|rev|id|files):\s*(.+)$", line)
        if not m:
            continue
        key, value = m.group(1), m.group(2).strip().strip("'\"")
        if key == "repo":
            repo, rev, current = value, "", None
        elif key == "rev":
            rev = value
        elif key == "id":
            current = hooks[value] = Hook(repo, rev)
        elif key == "files" and current is not None:
            current.files = value
    return hooks


def tool_versions(hooks: dict[str, Hook]) -> dict[str, str]:
    versions = {}
    for hook_id, package in (("clang-format", "clang-format"), ("black", "black"), ("isort", "isort")):
        hook = hooks.get(hook_id)
        if hook and hook.rev:
            versions[package] = hook.rev.lstrip("v")
    return versions


def tools_dir() -> Path:
    explicit = os.environ.get("MLX_OVERLAY_TOOLS")
    return Path(explicit).absolute() if explicit else cache_root() / "tools"


def has_ensurepip() -> bool:
    return subprocess.run([sys.executable, "-c", "import ensurepip"], capture_output=True).returncode == 0


def install_formatters(versions: dict[str, str], log: Log) -> dict[str, Path]:
    """clang-format and black at MLX's versions, from PyPI, in a venv kept between runs."""
    if not {"clang-format", "black"} <= set(versions):
        raise MissingTool(f"MLX's .pre-commit-config.yaml pins no version for {sorted({'clang-format', 'black'} - set(versions))}")
    name = "format-" + "-".join(f"{k}-{v}" for k, v in sorted(versions.items()))
    venv = tools_dir() / name
    exes = {k: venv / "bin" / k for k in versions}
    done = venv / "mlx-overlay-complete"  # a venv cannot be moved into place: mark it when whole
    if done.is_file() and all(p.is_file() for p in exes.values()):
        return exes
    log(f"installing {', '.join(f'{k}=={v}' for k, v in sorted(versions.items()))} from PyPI into {venv}")
    shutil.rmtree(venv, ignore_errors=True)
    pins = [f"{k}=={v}" for k, v in sorted(versions.items())]
    steps = [[sys.executable, "-m", "venv", str(venv)],
             [str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet", "--disable-pip-version-check", *pins]]
    if not has_ensurepip():
        # Debian's python without python3-venv: an empty venv, filled by this interpreter's pip.
        steps = [[sys.executable, "-m", "venv", "--without-pip", str(venv)],
                 [sys.executable, "-m", "pip", "--python", str(venv / "bin" / "python"), "install", "--quiet",
                  "--disable-pip-version-check", *pins]]
    for step in steps:
        proc = subprocess.run(step, capture_output=True, text=True)
        if proc.returncode != 0:
            shutil.rmtree(venv, ignore_errors=True)
            last = (proc.stderr.strip().splitlines() or ["(no message)"])[-1]
            raise MissingTool(
                f"FORMATTING NOT CHECKED: cannot install {', '.join(f'{k}=={v}' for k, v in versions.items())} "
                f"from PyPI into {venv}: {last}",
                hint="make PyPI reachable (or set PIP_INDEX_URL), or put a venv with both at $MLX_OVERLAY_TOOLS/" + name)
    done.write_text("ok\n")
    return exes


def changed_ranges(repo: Repo, base: str, path: str) -> list[tuple[int, int]]:
    ranges = []
    for line in repo.lines("diff", "-U0", "--no-renames", f"{base}..HEAD", "--", path):
        m = re.match(r"^@@ -\S+ \+(\d+)(?:,(\d+))? @@", line)
        if m:
            start, count = int(m.group(1)), int(m.group(2)) if m.group(2) is not None else 1
            if count:
                ranges.append((start, start + count - 1))
    return ranges


@dataclass
class FormatProblem:
    path: str
    tool: str
    diff: str  # the tool's changes on the lines the patches changed
    elsewhere: int = 0  # changes it would also make to lines the patches did not touch


def _hunks(original: list[str], formatted: list[str]) -> list[tuple[int, int, str]]:
    """(first, last) original lines (1-based; an insertion covers its neighbours) and the hunk text."""
    out = []
    matcher = difflib.SequenceMatcher(None, original, formatted, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            continue
        text = [f"@@ -{i1 + 1},{i2 - i1} +{j1 + 1},{j2 - j1} @@\n"]
        text += ["-" + line for line in original[i1:i2]] + ["+" + line for line in formatted[j1:j2]]
        text = [line if line.endswith("\n") else line + "\n" for line in text]
        out.append((i1 if i2 == i1 else i1 + 1, max(i2, i1 + 1), "".join(text)))
    return out


def _format(tool: str, exe: Path, path: str, hooks: dict[str, Hook], cwd: Path, text: str) -> str:
    """The whole file as ``tool`` would write it (read from stdin, config found from ``path``)."""
    if tool == "clang-format":
        args = [str(exe), "--style=file", f"--assume-filename={path}"]
    elif tool == "black":
        args = [str(exe), "--quiet", f"--stdin-filename={path}", "-"]
    else:
        args = [str(exe), *hooks["isort"].args, f"--filename={path}", "-"]
    proc = subprocess.run(args, cwd=cwd, input=text, capture_output=True, text=True)
    if proc.returncode != 0:
        raise FormatError(f"{path}: {tool} failed: {proc.stderr.strip()}")
    return proc.stdout


def check_formatting(repo: Repo, base: str, exes: dict[str, Path], hooks: dict[str, Hook],
                     versions: dict[str, str]) -> tuple[list[str], list[FormatProblem], list[str]]:
    """MLX's formatters on each file base..HEAD adds or changes; (files checked, problems).

    Each tool formats the whole file, as MLX's pre-commit does; a change it
    would make on a line the patches changed is a problem, one elsewhere (a
    pre-existing upstream difference) is only counted.
    """
    clang_hook = hooks.get("clang-format")
    clang_files = re.compile(f"(?:{clang_hook.files if clang_hook and clang_hook.files else DEFAULT_CLANG_FILES})|\\.metal$")
    checked: list[str] = []
    problems: list[FormatProblem] = []
    notes: list[str] = []
    for path in repo.lines("diff", "--name-only", "--no-renames", "--diff-filter=AM", f"{base}..HEAD"):
        ranges = changed_ranges(repo, base, path)
        if not ranges:
            continue
        if clang_files.search(path):
            tools = ["clang-format"]
        elif path.endswith((".py", ".pyi")):
            tools = ["black"] + (["isort"] if "isort" in exes else [])
        else:
            continue
        original = (repo.path / path).read_text(encoding="utf-8")
        for tool in tools:
            formatted = _format(tool, exes[tool], path, hooks, repo.path, original)
            checked.append(f"{path} ({tool} {versions[tool]})")
            ours, elsewhere = [], 0
            for first, last, text in _hunks(original.splitlines(keepends=True), formatted.splitlines(keepends=True)):
                if any(first <= b and a <= last for a, b in ranges):
                    ours.append(text)
                else:
                    elsewhere += 1
            if ours:
                problems.append(FormatProblem(path, f"{tool} {versions[tool]}", "".join(ours), elsewhere))
            elif elsewhere:
                notes.append(f"{path}: {tool} would also change {elsewhere} place(s) the patches do not touch "
                             f"(pre-existing upstream; MLX's pre-commit formats whole files)")
    return checked, problems, notes


# -- the PR description ----------------------------------------------------------


def parity_section(project: Project, summary: Path | None) -> str:
    path = summary or project.root / PARITY_SUMMARY
    if not path.is_file():
        return f"Parity tests: not run (no {project.display(path)}; `mlx-overlay test` writes it).\n"
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except ValueError as err:
        return f"Parity tests: summary {project.display(path)} unreadable ({err}).\n"
    lines = [f"Parity summary ({project.display(path)}): **{'passed' if data.get('ok') else 'FAILED'}** "
             f"on {data.get('backend', '?')} ({data.get('device', '?')}), mlx {data.get('mlx', '?')}.", ""]
    suites = data.get("suites") or []
    if suites:
        lines += ["| suite | backend | passed | failed | errors | skipped |", "|---|---|---|---|---|---|"]
        for s in suites:
            lines.append(f"| {s.get('name')} | {s.get('backend')} | {s.get('passed', '?')} | {s.get('failed', '?')} "
                         f"| {s.get('errors', '?')} | {s.get('skipped', '?')} |")
    return "\n".join(lines) + "\n"


def _headings(markdown: str) -> list[bool]:
    """Whether each line is a heading: lines inside fenced code blocks are
    code (a shell comment is not a heading)."""
    out = []
    fence = ""  # the opening fence of the code block we are in
    for line in markdown.splitlines(keepends=True):
        marker = re.match(r" {0,3}(`{3,}|~{3,})", line)
        if not fence:
            fence = marker[1] if marker else ""
            out.append(not marker and bool(re.match(r"#+ ", line)))
            continue
        if marker and marker[1][0] == fence[0] and len(marker[1]) >= len(fence) and not line[marker.end():].strip():
            fence = ""
        out.append(False)
    return out


def _demote(markdown: str, levels: int = 2) -> str:
    """Every heading `levels` levels down (benchmarks.md goes under
    "## Benchmarks"); code in fences stays as it is."""
    lines = markdown.splitlines(keepends=True)
    return "".join("#" * levels + ln if heading else ln for ln, heading in zip(lines, _headings(markdown)))


#: Lines of a document between these two (each alone on its line) are what
#: PR.md quotes of it. ``<!-- upstream-pr: PREFIX ... -->`` opens a region
#: quoted only when the PR changes a path under a PREFIX. docs/benchmarks.md
#: without markers is quoted whole; but a project's benchmarks grow with its
#: own history (sessions, experiments, tooling), which is not what a reviewer
#: upstream reads.
PR_BEGIN, PR_END = "<!-- upstream-pr -->", "<!-- /upstream-pr -->"
_PR_BEGIN = re.compile(r"<!-- upstream-pr(?:: (\S.*?))? -->")
BENCHMARKS = Path("docs/benchmarks.md")
#: What the upstream patches change for models, in regions by path.
BEHAVIOUR = Path("docs/upstream-behaviour.md")
#: Where the upstream patches' tests ran besides CI's CPU (a GPU the project
#: borrowed, MLX built whole), in regions by path: MLX's CI has the GPUs, and
#: a reviewer asks whether the tests passed on one.
TESTS_RUN = Path("docs/upstream-tests.md")


def _regions(where: str, text: str, paths: set[str]) -> list[str] | None:
    """The regions of `text` (the file `where`) for the PR's `paths`; None
    when it has no markers. Unbalanced markers are a ConfigError naming the
    line."""
    lines = text.splitlines(keepends=True)
    regions: list[str] = []
    marked = False
    start: int | None = None
    scope: list[str] = []
    for n, line in enumerate(lines, start=1):
        begin = _PR_BEGIN.fullmatch(line.strip())
        if begin:
            if start is not None:
                raise ConfigError(f"{where}:{n}: {line.strip()} inside the region opened at line {start} "
                                  f"(close that one with {PR_END} first)")
            start, scope, marked = n, (begin[1] or "").split(), True
        elif line.strip() == PR_END:
            if start is None:
                raise ConfigError(f"{where}:{n}: {PR_END} without an opening {PR_BEGIN}")
            if not scope or any(p.startswith(prefix) for p in paths for prefix in scope):
                regions.append("".join(lines[start:n - 1]))
            start = None
    if start is not None:
        raise ConfigError(f"{where}:{start}: {lines[start - 1].strip()} is never closed by {PR_END}")
    return regions if marked else None


def _at_level_3(markdown: str) -> str:
    """markdown with its top headings at level 3 (under a "## " section)."""
    levels = [len(ln) - len(ln.lstrip("#")) for ln, heading in zip(markdown.splitlines(), _headings(markdown))
              if heading]
    return _demote(markdown, 3 - min(levels, default=3)).strip()


def pr_benchmarks(project: Project, paths: set[str]) -> str:
    """The "## Benchmarks" body of PR.md: benchmarks.md's regions for the
    PR's `paths` and where the rest is; the whole file when nothing is
    marked."""
    bench = project.root / BENCHMARKS
    if not bench.is_file():
        return f"({BENCHMARKS} not found: MLX asks for main-vs-PR numbers and the script that made them)"
    text = bench.read_text(encoding="utf-8")
    regions = _regions(project.display(bench), text, paths)
    if regions is None:
        return _demote(text).strip()
    if not regions:
        return (f"(no region of {BENCHMARKS} marked for the paths these patches change: MLX asks for "
                f"main-vs-PR numbers and the script that made them)")
    quoted = _at_level_3("\n\n".join(regions))
    return (f"{quoted}\n\nMethod, machines, every run and the commands that made them: `{BENCHMARKS}` of "
            f"the mlx-overlay project ({len(text.splitlines())} lines, not quoted here).")


def _doc_regions(project: Project, doc: Path, paths: set[str]) -> list[str]:
    """PR.md lines: the regions of `doc` for the PR's `paths`, each followed
    by a blank line (none where the file or a region for them is missing)."""
    path = project.root / doc
    if not path.is_file():
        return []
    regions = _regions(project.display(path), path.read_text(encoding="utf-8"), paths) or []
    return [ln for r in regions for ln in (r.strip("\n"), "")]


def behaviour_section(project: Project, paths: set[str]) -> list[str]:
    """PR.md lines on what changes for models: the regions of
    docs/upstream-behaviour.md for the PR's `paths` (none: no section)."""
    lines = _doc_regions(project, BEHAVIOUR, paths)
    return ["## What changes for models", "", *lines] if lines else []


def tests_run_lines(project: Project, paths: set[str]) -> list[str]:
    """PR.md lines, under "## Tests", on where the tests ran besides the
    CPU: the regions of docs/upstream-tests.md for the PR's `paths`."""
    return _doc_regions(project, TESTS_RUN, paths)


def why_section(project: Project, paths: set[str]) -> list[str]:
    """PR.md lines on why these patches go upstream: the decision record's
    regions for the PR's `paths`, quoted (without marks, its first paragraph)."""
    decision = project.root / DECISION
    if not decision.is_file():
        return [f"Decision record `{DECISION}` not written yet.", ""]
    text = decision.read_text(encoding="utf-8")
    regions = _regions(project.display(decision), text, paths)
    if regions is None:
        regions = [p for p in text.split("\n\n")
                   if p.strip() and not p.lstrip().startswith("#")][:1]
    out = [f"Decision record: `{DECISION}` in the mlx-overlay project.", ""]
    for region in regions:
        out += ["> " + region.strip("\n").replace("\n", "\n> "), ""]
    return out


def draft_pr(project: Project, patches: list[PatchFile], ref: str, onto: str, checked: list[str],
             problems: list[FormatProblem], versions: dict[str, str], parity: Path | None, benchmarks: str,
             behaviour: list[str], tests_run: list[str], why: list[str]) -> str:
    title = patches[0].subject if len(patches) == 1 else f"{patches[0].subject} (+{len(patches) - 1} more)"
    out = [f"# {title}", "",
           "<!-- Drafted by `mlx-overlay upstream-pr` from the patches' messages. MLX asks that PR descriptions "
           "be written by the author: read, cut and rewrite before opening the PR. -->", "",
           f"Based on ml-explore/mlx `{onto[:12]}` ({ref}); {len(patches)} commit(s).", "", "## Changes", ""]
    for n, patch in enumerate(patches, start=1):
        files = ", ".join(f"`{f.path}`" for f in patch.files)
        out += [f"### {n}. {patch.subject}", "", patch.body or "(no description)", "", f"Files: {files}", ""]
    out += behaviour
    tests = [f.path for p in patches for f in p.files if "/tests/" in f"/{f.path}"]
    out += ["## Tests", ""]
    out += ([f"- `{t}` (new or changed)" for t in dict.fromkeys(tests)]
            or ["- (no test files in these patches: MLX asks for tests that fail on main)"])
    out += ["", *tests_run, parity_section(project, parity), "## Benchmarks", "", benchmarks, ""]
    out += ["## Formatting", ""]
    tools = ", ".join(f"{k} {v}" for k, v in sorted(versions.items()))
    if problems:
        paths = list(dict.fromkeys(p.path for p in problems))
        out.append(f"**{len(paths)} file(s) need formatting** ({tools}): "
                   + ", ".join(f"{p.path} ({p.tool})" for p in problems) + ".")
    else:
        out.append(f"{tools} (MLX's pre-commit versions and settings) report nothing on the lines these "
                   f"commits change ({len(checked)} check(s)).")
    out += ["", "## Why upstream (and what stays in the overlay)", "", *why]
    out += ["## Checklist", "", "- [ ] Tests fail on main and pass here",
            "- [ ] Benchmarks main vs PR attached", f"- [{' ' if problems else 'x'}] pre-commit formatting (clang-format, black)",
            "- [ ] Description rewritten by the author", ""]
    return "\n".join(out)


# -- the command ------------------------------------------------------------------


@dataclass
class Result:
    branch_head: str
    out: Path
    files: list[Path] = field(default_factory=list)
    problems: list[FormatProblem] = field(default_factory=list)


def _checkout(project: Project, upstream: Repo) -> Repo:
    path = project.root / "work" / BRANCH
    if not (path / ".git").exists():
        if path.exists() and any(path.iterdir()):
            raise DirtyCheckout(f"{project.display(path)}: exists and is not a git checkout (move it away)")
        return Repo.clone(upstream.path, path)
    repo = Repo(path)
    dirty = repo.dirty_files()
    if dirty or repo.operation_in_progress():
        raise DirtyCheckout(f"{project.display(path)} (the upstream-pr checkout) has uncommitted changes: "
                            f"{', '.join(dirty[:5]) or repo.operation_in_progress()}",
                            hint=f"fix them in the queue instead (the branch is rebuilt each run); discard with "
                                 f"git -C {project.display(path)} reset --hard")
    return repo


def select(series: Series, only: list[str] | None, where: str) -> list[str]:
    """The names of the PR's patches, in queue order: every upstream patch, or
    those `only` names (a patch's file name, its number such as ``0009``, or
    a glob). MLX reviews each backend on its own, so one queue may make
    several PRs."""
    upstream = [e.name for e in series.entries if e.kind == "upstream"]
    if not upstream:
        raise QueueDoesNotApply(f"{where}: no patch is marked upstream")
    if not only:
        return upstream
    chosen: set[str] = set()
    for pattern in only:
        hits = [e for e in series.entries
                if e.name == pattern or e.name.startswith(f"{pattern}-") or fnmatch.fnmatchcase(e.name, pattern)]
        if not hits:
            raise ConfigError(f"{where}: no patch matches --only {pattern!r}")
        if all(e.kind != "upstream" for e in hits):
            raise ConfigError(f"{where}: --only {pattern!r} names {hits[0].name}, an {hits[0].kind} patch "
                              f"(upstream-pr sends upstream patches only)")
        chosen.update(e.name for e in hits if e.kind == "upstream")
    return [name for name in upstream if name in chosen]


def upstream_pr(project: Project, onto_ref: str | None = None, out: Path | None = None, *,
                parity: Path | None = None, only: list[str] | None = None, log: Log = print) -> Result:
    pin = project.pin
    series = project.series
    series.validate()
    wanted = select(series, only, project.display(project.series_path))
    paths = {p for name in wanted for f in PatchFile.read(series.path.parent / name).files
             for p in (f.path, f.old_path)}
    backends = sorted({p.split("/")[2] for p in paths if p.startswith("mlx/backend/") and p.count("/") > 2})
    if not only and len(backends) > 1:
        log(f"note: these {len(wanted)} patches change the {', '.join(backends)} backends; MLX reviews each on its "
            f"own: --only PATCH makes a PR of some of them")
    # Before anything is written: the documents' markers may be at fault.
    benchmarks = pr_benchmarks(project, paths)
    behaviour = behaviour_section(project, paths)
    tests_run = tests_run_lines(project, paths)
    why = why_section(project, paths)
    ref = onto_ref or f"origin/{pin.branch}"
    upstream, onto = resolve_ref(project, ref, log=log)
    cache.ensure_commit(project.cache_dir, pin)
    repo = _checkout(project, upstream)
    shown = project.display(repo.path)
    for commit in (pin.commit, onto):
        if not repo.has_commit(commit):
            repo.git("fetch", "--quiet", str(upstream.path), commit)

    problems = dependencies(repo, pin.commit, series, wanted)
    if problems:
        for line in problems:
            log(f"  depends  {line}")
        raise QueueDoesNotApply(f"refusing: {problems[0]}" + (f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""),
                                hint="move the needed change into an upstream patch, or reorder the queue")

    # The upstream patches as real commits on the pin, then replayed onto REF.
    repo.git("checkout", "--quiet", "--force", "--detach", pin.commit)
    subset = Series(series.path, [e for e in series.entries if e.name in wanted])
    log(f"{shown}: {len(wanted)} upstream patch(es) on {pin.short}, replayed onto {ref} ({onto[:8]})")
    commits = apply_series(repo, subset, lambda _: None)
    rows, head = probe(repo, onto, items_for(subset, commits), pin.commit, onto)
    log("\n".join(table(rows)))
    bad = [r for r in rows if r.result not in APPLIED]
    if bad:
        raise QueueDoesNotApply(f"{bad[0].name} does not apply to {ref} ({onto[:12]}): {bad[0].detail or bad[0].result}",
                                hint=f"mlx-overlay rebase --to {onto} first")
    repo.git("checkout", "--quiet", "--force", "-B", BRANCH, head)

    hooks = precommit_hooks(repo.git("show", f"{onto}:.pre-commit-config.yaml"))
    versions = tool_versions(hooks)
    exes = install_formatters(versions, log)
    checked, fmt_problems, notes = check_formatting(repo, onto, exes, hooks, versions)
    for note in notes:
        log(f"format: note: {note}")
    for p in fmt_problems:
        log(f"format: {p.path}: {p.tool} would change the patched lines:")
        log(p.diff.rstrip("\n"))
    if not fmt_problems:
        log(f"format: {len(checked)} check(s) of the changed files clean under "
            + ", ".join(f"{k} {v}" for k, v in sorted(versions.items())))

    target = (out or project.root / "dist" / "upstream-pr").absolute()
    target.mkdir(parents=True, exist_ok=True)
    for old in list(target.glob("*.patch")) + [target / "PR.md"]:
        old.unlink(missing_ok=True)
    with tempfile.TemporaryDirectory(prefix="mlx-overlay-pr-") as tmp:
        repo.git("format-patch", *FORMAT_PATCH_OPTIONS, "--output-directory", tmp, f"{onto}..HEAD")
        files = []
        for gen in sorted(Path(tmp).iterdir()):
            shutil.copy2(gen, target / gen.name)
            files.append(target / gen.name)
    patches = [PatchFile.read(f) for f in files]
    (target / "PR.md").write_text(draft_pr(project, patches, ref, onto, checked, fmt_problems, versions, parity,
                                           benchmarks, behaviour, tests_run, why),
                                  encoding="utf-8")
    log(f"wrote {project.display(target)}: {len(files)} patch(es) and PR.md")
    log(f"branch {BRANCH} in {shown} at {repo.git('rev-parse', '--short=12', 'HEAD')} (not pushed; to open the PR: "
        f"git -C {shown} push <your-fork> {BRANCH})")
    result = Result(branch_head=repo.git("rev-parse", "HEAD"), out=target, files=files, problems=fmt_problems)
    if fmt_problems:
        raise FormatError(f"{len({p.path for p in fmt_problems})} file(s) fail MLX's formatting: "
                          + ", ".join(f"{p.path} ({p.tool})" for p in fmt_problems),
                          hint="fix the patches (apply, edit, export), then run upstream-pr again")
    return result
