"""The one module that runs git.

Every call goes through :func:`run_git`, which pins git's behaviour so the
same queue gives the same commits and the same patch bytes on every machine:

* The user's configuration does not leak in.  ``GIT_CONFIG_NOSYSTEM`` is set
  and ``GIT_CONFIG_GLOBAL`` points at a file this module writes, holding only
  the user's ``url.<base>.insteadOf`` entries (read from their real system and
  global config first) so that a local mirror of upstream keeps working.
  ``XDG_CONFIG_HOME`` is redirected too, which hides a personal
  ``git/attributes`` or ``git/ignore``.
* Settings that change output or behaviour are forced with ``-c`` on the
  command line, which also beats a repository's own ``.git/config``.
* Identity and dates of the commits the tool makes are fixed (``git am`` runs
  with ``--committer-date-is-author-date`` and a constant committer).
* Inherited ``GIT_*`` variables that would redirect or reconfigure git are
  dropped; the ones that carry credentials or transport settings are kept.

Failures raise :class:`~overlay_tool.errors.GitError` with git's stderr.
With :func:`set_verbose`, each command is echoed to stderr before it runs.
"""

from __future__ import annotations

import atexit
import contextlib
import fcntl
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

from overlay_tool.errors import GitError, MissingTool, OperationInProgress

#: Committer of every commit the tool creates; authors come from the patches.
COMMITTER_NAME = "mlx-overlay"
COMMITTER_EMAIL = "mlx-overlay@invalid"

#: Forced on every call (``-c key=value``).  Each key is one a user or a
#: repository could set to change what git writes or how it applies patches.
PINNED_CONFIG: tuple[tuple[str, str], ...] = (
    ("core.autocrlf", "false"),
    ("core.safecrlf", "false"),
    ("core.eol", "lf"),
    ("core.abbrev", "12"),
    ("core.quotePath", "true"),
    ("core.attributesFile", os.devnull),
    ("core.hooksPath", os.devnull),
    ("core.fsmonitor", "false"),
    ("commit.gpgSign", "false"),
    ("tag.gpgSign", "false"),
    ("log.showSignature", "false"),
    ("i18n.commitEncoding", "UTF-8"),
    ("i18n.logOutputEncoding", "UTF-8"),
    ("color.ui", "never"),
    ("color.diff", "never"),
    ("diff.noprefix", "false"),
    ("diff.mnemonicPrefix", "false"),
    ("diff.renames", "false"),
    ("diff.algorithm", "myers"),
    ("diff.indentHeuristic", "true"),
    ("diff.context", "3"),
    ("diff.interHunkContext", "0"),
    ("diff.suppressBlankEmpty", "false"),
    ("diff.orderFile", os.devnull),
    ("diff.relative", "false"),
    ("diff.submodule", "short"),
    ("format.signature", ""),
    ("format.signOff", "false"),
    ("format.coverLetter", "false"),
    ("format.numbered", "false"),
    ("format.thread", "false"),
    ("format.useAutoBase", "false"),
    ("format.from", "false"),
    ("format.forceInBodyFrom", "false"),
    ("format.encodeEmailHeaders", "true"),
    ("format.filenameMaxLength", "64"),
    ("format.mboxrd", "false"),
    ("format.suffix", ".patch"),
    ("format.noprefix", "false"),
    ("am.threeWay", "false"),
    ("am.keepCR", "false"),
    ("am.messageId", "false"),
    ("mailinfo.scissors", "false"),
    ("apply.whitespace", "nowarn"),
    ("apply.ignoreWhitespace", "no"),
    ("gc.auto", "0"),
    ("maintenance.auto", "false"),
    ("advice.detachedHead", "false"),
    ("init.defaultBranch", "main"),
)

#: Inherited variables kept: transport, credentials, proxies, tracing.
_KEPT_GIT_VARS = frozenset(
    {
        "GIT_SSH",
        "GIT_SSH_COMMAND",
        "GIT_SSH_VARIANT",
        "GIT_ASKPASS",
        "GIT_PROXY_COMMAND",
        "GIT_SSL_NO_VERIFY",
        "GIT_SSL_CAINFO",
        "GIT_CURL_VERBOSE",
        "GIT_TRACE",
        "GIT_TRACE_PACKET",
        "GIT_TRACE_PERFORMANCE",
        "GIT_TRACE2",
        "GIT_HTTP_USER_AGENT",
        "GIT_HTTP_LOW_SPEED_LIMIT",
        "GIT_HTTP_LOW_SPEED_TIME",
    }
)

_verbose = False


def set_verbose(verbose: bool) -> None:
    """Echo each git command to stderr before running it (``mlx-overlay -v``)."""
    global _verbose
    _verbose = verbose


#: Private config homes (holding the user's insteadOf rules and nothing else),
#: one per set of values of the variables below (tests change them).
_isolations: dict[tuple[str | None, ...], Path] = {}

# The variables that decide which config files the user's own git reads.
_CONFIG_LOCATORS = (
    "HOME",
    "XDG_CONFIG_HOME",
    "GIT_CONFIG_GLOBAL",
    "GIT_CONFIG_SYSTEM",
    "GIT_CONFIG_NOSYSTEM",
)


def _quote(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def read_user_insteadof() -> list[tuple[str, str]]:
    """The ``(base, prefix)`` pairs of the user's ``url.<base>.insteadOf``.

    Read from the system and global config as the user's own git would see
    them (``--includes``), outside any repository.
    """
    env = dict(os.environ)
    for name in ("GIT_DIR", "GIT_WORK_TREE", "GIT_CONFIG_PARAMETERS", "GIT_CONFIG_COUNT"):
        env.pop(name, None)
    proc = _spawn(
        ["git", "config", "--includes", "--null", "--get-regexp", r"^url\..*\.insteadof$"],
        cwd=Path(os.path.abspath(os.sep)),
        env=env,
    )
    if proc.returncode not in (0, 1):  # 1: no such key
        raise GitError(f"cannot read your git config: {proc.stderr.decode(errors='replace').strip()}")
    pairs = []
    for record in proc.stdout.decode().split("\0"):
        if not record:
            continue
        key, _, value = record.partition("\n")
        base = key[len("url.") : -len(".insteadof")]
        pairs.append((base, value))
    return pairs


def _isolation() -> Path:
    key = tuple(os.environ.get(name) for name in _CONFIG_LOCATORS)
    home = _isolations.get(key)
    if home is None:
        home = Path(tempfile.mkdtemp(prefix="mlx-overlay-git-"))
        atexit.register(shutil.rmtree, home, True)
        lines = [f"[url {_quote(base)}]\n\tinsteadOf = {_quote(prefix)}\n" for base, prefix in read_user_insteadof()]
        (home / "gitconfig").write_text("".join(lines), encoding="utf-8")
        _isolations[key] = home
    return home


def git_environment() -> dict[str, str]:
    """The environment every git call runs in (see the module docstring)."""
    home = _isolation()
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_") or k in _KEPT_GIT_VARS}
    env.update(
        GIT_CONFIG_NOSYSTEM="1",
        GIT_CONFIG_GLOBAL=str(home / "gitconfig"),
        XDG_CONFIG_HOME=str(home),
        GIT_TERMINAL_PROMPT="0",
        GIT_EDITOR="true",
        GIT_PAGER="cat",
        GIT_AUTHOR_NAME=COMMITTER_NAME,
        GIT_AUTHOR_EMAIL=COMMITTER_EMAIL,
        GIT_COMMITTER_NAME=COMMITTER_NAME,
        GIT_COMMITTER_EMAIL=COMMITTER_EMAIL,
        LC_ALL="C",
        LANGUAGE="C",
        TZ="UTC",
    )
    return env


def git_command(args: list[str]) -> list[str]:
    """``git -c k=v ... <args>``: the full argument vector for a call."""
    cmd = ["git"]
    for key, value in PINNED_CONFIG:
        cmd += ["-c", f"{key}={value}"]
    return cmd + list(args)


def _spawn(cmd: list[str], *, cwd: Path | None, env: dict[str, str],
           input: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
    try:
        return subprocess.run(cmd, cwd=cwd, env=env, input=input, capture_output=True)
    except FileNotFoundError:
        if shutil.which("git", path=env.get("PATH")) is None:
            raise MissingTool("git is not installed (or not on PATH); install it, e.g. apt-get install git") from None
        raise


def run_git(
    args: list[str],
    *,
    cwd: Path | None = None,
    check: bool = True,
    input: bytes | None = None,
) -> subprocess.CompletedProcess[bytes]:
    """Run git with the pinned config; raise :class:`GitError` on failure when ``check``."""
    if _verbose:
        where = f"(cd {shlex.quote(str(cwd))} && " if cwd else ""
        print(f"+ {where}git {shlex.join(args)}{')' if cwd else ''}", file=sys.stderr)
    proc = _spawn(git_command(args), cwd=cwd, env=git_environment(), input=input)
    if check and proc.returncode != 0:
        raise GitError(
            f"git {' '.join(args[:2])} failed in {cwd or os.getcwd()}: {_last_lines(proc.stderr)}"
        )
    return proc


def _last_lines(stderr: bytes, n: int = 3) -> str:
    lines = [line for line in stderr.decode(errors="replace").splitlines() if line.strip()]
    return " | ".join(lines[-n:]) if lines else "(no message)"


class Repo:
    """A git repository (a work tree, or a bare repository such as the cache)."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)

    def __repr__(self) -> str:
        return f"Repo({str(self.path)!r})"

    # -- plumbing -------------------------------------------------------
    def run(self, *args: str, check: bool = True, input: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
        return run_git(list(args), cwd=self.path, check=check, input=input)

    def git(self, *args: str) -> str:
        """Run and return stdout as text, without the trailing newline."""
        return self.run(*args).stdout.decode().rstrip("\n")

    def lines(self, *args: str) -> list[str]:
        out = self.git(*args)
        return out.splitlines() if out else []

    # -- creation -------------------------------------------------------
    @classmethod
    def clone(cls, source: Path | str, path: Path, *, shared: bool = False) -> Repo:
        """A non-bare clone without a checkout (the caller checks out what it needs)."""
        path.parent.mkdir(parents=True, exist_ok=True)
        args = ["clone", "--quiet", "--no-checkout"]
        if shared:
            args.append("--shared")
        run_git([*args, str(source), str(path)])
        return cls(path)

    # -- queries --------------------------------------------------------
    def rev_parse(self, rev: str) -> str | None:
        """The full object id of ``rev``, or None when it does not resolve."""
        proc = self.run("rev-parse", "--verify", "--quiet", "--end-of-options", rev, check=False)
        return proc.stdout.decode().strip() if proc.returncode == 0 else None

    def version_and_date(self, commit: str) -> str:
        """``v0.32.1-26, 2026-08-22``: the nearest tag and the distance from it
        (``git describe --tags``, without the hash), and the committer date; the
        short hash in place of the tag where no tag reaches ``commit``."""
        date = self.git("log", "-1", "--format=%cs", commit)
        proc = self.run("describe", "--tags", "--long", "--end-of-options", commit, check=False)
        described = proc.stdout.decode().strip() if proc.returncode == 0 else ""
        version = described.rsplit("-g", 1)[0] if described else commit[:8]
        return f"{version}, {date}"

    def has_commit(self, sha: str) -> bool:
        return self.run("cat-file", "-e", f"{sha}^{{commit}}", check=False).returncode == 0

    def git_dir(self) -> Path:
        return Path(self.git("rev-parse", "--absolute-git-dir"))

    def current_branch(self) -> str | None:
        proc = self.run("symbolic-ref", "--quiet", "--short", "HEAD", check=False)
        return proc.stdout.decode().strip() if proc.returncode == 0 else None

    def is_ancestor(self, ancestor: str, rev: str) -> bool:
        return self.run("merge-base", "--is-ancestor", ancestor, rev, check=False).returncode == 0

    def dirty_files(self) -> list[str]:
        """Paths with uncommitted changes, untracked (not ignored) files included."""
        out = self.run("status", "--porcelain=v1", "-z", "--untracked-files=all").stdout.decode()
        entries = out.split("\0")
        paths = []
        i = 0
        while i < len(entries):
            entry = entries[i]
            if entry:
                paths.append(entry[3:])
                if entry[0] in "RC":  # a rename/copy carries its source next
                    i += 1
            i += 1
        return paths

    def operation_in_progress(self) -> str | None:
        """The name of an unfinished am/rebase/merge/cherry-pick/revert/bisect, or None."""
        gd = self.git_dir()
        markers = {
            "rebase-apply/applying": "am",
            "rebase-apply": "rebase",
            "rebase-merge": "rebase",
            "MERGE_HEAD": "merge",
            "CHERRY_PICK_HEAD": "cherry-pick",
            "REVERT_HEAD": "revert",
            "BISECT_LOG": "bisect",
        }
        for marker, name in markers.items():
            if (gd / marker).exists():
                return name
        return None

    @contextlib.contextmanager
    def locked(self) -> Iterator[None]:
        """Hold an exclusive lock on this repository for the tool's own read-modify-write steps.

        Two ``mlx-overlay`` runs on one checkout (a shell and an editor
        plugin, say) would otherwise interleave ``git am`` and ``export``.
        """
        with open(self.git_dir() / "mlx-overlay.lock", "w") as handle:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                raise OperationInProgress(f"{self.path}: another mlx-overlay command is working here") from None
            yield

    def update_ref(self, ref: str, value: str, message: str = "mlx-overlay") -> None:
        self.git("update-ref", "-m", message, ref, value)

    # -- in-memory replay (rebase, drift, upstream-pr) ------------------
    # Appended for issue 6; each works without touching a work tree.
    def run_with(self, *args: str, env: dict[str, str], check: bool = True,
                 input: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
        """:meth:`run` with extra environment (a private index, an author, a date)."""
        if _verbose:
            print(f"+ (cd {shlex.quote(str(self.path))} && {' '.join(f'{k}={v}' for k, v in env.items())} "
                  f"git {shlex.join(args)})", file=sys.stderr)
        proc = _spawn(git_command(list(args)), cwd=self.path, env={**git_environment(), **env}, input=input)
        if check and proc.returncode != 0:
            raise GitError(f"git {' '.join(args[:2])} failed in {self.path}: {_last_lines(proc.stderr)}")
        return proc

    def tree_of(self, rev: str) -> str:
        return self.git("rev-parse", f"{rev}^{{tree}}")

    def apply_to_tree(self, tree: str, patch: Path, *, check: bool = False) -> tuple[str | None, str]:
        """Apply ``patch`` (exact context, as ``git am``) to ``tree`` through a private index.

        Returns ``(new tree, "")``, or ``(None, git's message)`` when it does not apply.
        With ``check`` nothing is written and the tree returned is ``tree``.
        """
        with tempfile.TemporaryDirectory(prefix="mlx-overlay-idx-") as tmp:
            env = {"GIT_INDEX_FILE": str(Path(tmp) / "index")}
            self.run_with("read-tree", tree, env=env)
            args = ["apply", "--cached", *(["--check"] if check else []), str(Path(patch).absolute())]
            proc = self.run_with(*args, check=False, env=env)
            if proc.returncode != 0:
                return None, proc.stderr.decode(errors="replace")
            return (tree if check else self.run_with("write-tree", env=env).stdout.decode().strip()), ""

    def commit_tree(self, tree: str, parents: list[str], message: str,
                    env: dict[str, str] | None = None) -> str:
        args = ["commit-tree", tree]
        for parent in parents:
            args += ["-p", parent]
        return self.run_with(*args, input=message.encode(), env=env or {}).stdout.decode().strip()

    def commit_meta(self, commit: str) -> tuple[str, dict[str, str]]:
        """The raw message of ``commit`` and the environment that recreates its author (and date as committer date)."""
        raw = self.run("cat-file", "commit", commit).stdout.decode()
        header, _, message = raw.partition("\n\n")
        env: dict[str, str] = {}
        for line in header.splitlines():
            if line.startswith("author "):
                who, _, when = line[len("author "):].rpartition("> ")
                name, _, email = who.partition(" <")
                env = {"GIT_AUTHOR_NAME": name, "GIT_AUTHOR_EMAIL": email,
                       "GIT_AUTHOR_DATE": f"@{when}", "GIT_COMMITTER_DATE": f"@{when}"}
        return message, env

    def merge_pick(self, commit: str, onto: str) -> tuple[bool, str, list[str], str]:
        """Cherry-pick ``commit`` onto ``onto`` in memory (3-way, renames followed).

        Returns ``(clean, tree, conflicted paths, git's messages)``.  git 2.39's
        ``merge-tree`` has no ``--merge-base``; a throwaway commit with ``onto``'s
        tree and ``commit``'s parent makes that parent the merge base.
        """
        fake = self.commit_tree(self.tree_of(onto), [f"{commit}^"], "mlx-overlay probe\n")
        proc = self.run("-c", "merge.renames=true", "-c", "merge.conflictStyle=merge",
                        "merge-tree", "--write-tree", "--name-only", "--messages", fake, commit, check=False)
        if proc.returncode not in (0, 1):
            if b"write-tree" in proc.stderr or b"usage:" in proc.stderr:
                raise MissingTool("git 2.38 or newer is needed (merge-tree --write-tree); "
                                  f"this is {self.git('--version')}")
            raise GitError(f"git merge-tree failed in {self.path}: {_last_lines(proc.stderr)}")
        out = proc.stdout.decode(errors="replace")
        first, _, rest = out.partition("\n")
        files_part, _, messages = rest.partition("\n\n") if proc.returncode else ("", "", rest)
        files = list(dict.fromkeys(line for line in files_part.splitlines() if line))
        return proc.returncode == 0, first.strip(), files, messages.strip()

    def conflicted_files(self) -> list[str]:
        return list(dict.fromkeys(self.lines("diff", "--name-only", "--diff-filter=U")))
