"""Reading one patch file of the queue (``git format-patch`` mail format).

The parser is strict enough to turn a damaged file into a one-line error that
names the file and line (instead of a puzzling ``git am`` failure), and it
gives the pieces other modules need: the description, the patched paths, the
hunks (to name the one that failed) and the added lines (for lint).
"""

from __future__ import annotations

import email.parser
import email.policy
import re
from dataclasses import dataclass, field
from pathlib import Path

from overlay_tool.errors import ConfigError

_HUNK = re.compile(rb"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")
#: Extended header lines of a ``diff --git`` section: together with the full
#: blob ids in ``index`` lines they pin the patch's content exactly.
_EXT_HEADERS = (
    b"diff --git ",
    b"index ",
    b"old mode ",
    b"new mode ",
    b"new file mode ",
    b"deleted file mode ",
    b"similarity index ",
    b"dissimilarity index ",
    b"rename from ",
    b"rename to ",
    b"copy from ",
    b"copy to ",
)


@dataclass(frozen=True)
class Hunk:
    number: int  # 1-based within its file
    old_start: int
    new_start: int
    header: str  # the ``@@ ... @@`` line
    line: int  # line number in the patch file


@dataclass
class FileDiff:
    path: str  # the post-image path (``b/...`` without the prefix)
    old_path: str
    ext_headers: list[bytes] = field(default_factory=list)
    hunks: list[Hunk] = field(default_factory=list)
    added: list[tuple[int, bytes]] = field(default_factory=list)  # (patch line, text)


@dataclass
class PatchFile:
    path: Path
    raw: bytes
    author: str
    subject: str
    body: str
    files: list[FileDiff]
    head: bytes  # mail header and message: everything between the From line and the diff

    @property
    def identity(self) -> tuple[bytes, tuple[bytes, ...]]:
        """Two patches with equal identity carry the same commit.

        Same message and metadata bytes, same paths, modes and pre/post blob
        ids: only the rendering of the hunks (line numbers, function names in
        hunk headers, git version quirks) may differ, and that is noise.
        """
        return self.head, tuple(h for f in self.files for h in f.ext_headers)

    def hunk_at(self, path: str, old_line: int) -> Hunk | None:
        """The hunk of ``path`` that starts at ``old_line`` in the pre-image."""
        for diff in self.files:
            if path in (diff.path, diff.old_path):
                for hunk in diff.hunks:
                    if hunk.old_start == old_line:
                        return hunk
        return None

    @classmethod
    def read(cls, path: Path) -> PatchFile:
        try:
            raw = path.read_bytes()
        except FileNotFoundError:
            raise ConfigError(f"{path}: patch file not found") from None
        return cls.parse(path, raw)

    @classmethod
    def parse(cls, path: Path, raw: bytes) -> PatchFile:
        lines = raw.split(b"\n")
        if not lines[0].startswith(b"From "):
            raise ConfigError(f"{path}:1: not a patch in git format-patch form (no 'From ' line)")
        try:
            first_diff = next(i for i, line in enumerate(lines) if line.startswith(b"diff --git "))
        except StopIteration:
            raise ConfigError(f"{path}: not a patch: no 'diff --git' section") from None
        head_lines = lines[1:first_diff]
        head = b"\n".join(head_lines) + b"\n"
        try:
            blank = head_lines.index(b"")
        except ValueError:
            raise ConfigError(f"{path}: malformed mail header (no blank line before the message)") from None
        msg = email.parser.BytesHeaderParser(policy=email.policy.default).parsebytes(
            b"\n".join(head_lines[:blank]) + b"\n\n"
        )
        subject = str(msg.get("Subject", "")).strip()
        author = str(msg.get("From", "")).strip()
        if not subject or not author:
            raise ConfigError(f"{path}: malformed mail header (missing Subject: or From:)")
        message = head_lines[blank + 1 :]
        if b"---" in message:
            message = message[: message.index(b"---")]
        body = b"\n".join(message).decode("utf-8", errors="replace").strip()
        files = _parse_diffs(path, lines, first_diff)
        return cls(path=path, raw=raw, author=author, subject=subject, body=body, files=files, head=head)


def _parse_diffs(path: Path, lines: list[bytes], start: int) -> list[FileDiff]:
    files: list[FileDiff] = []
    i = start
    n = len(lines)
    while i < n:
        line = lines[i]
        if line.startswith(b"diff --git "):
            a, b = _diff_paths(path, i + 1, line)
            current = FileDiff(path=b, old_path=a, ext_headers=[line])
            files.append(current)
            i += 1
            while i < n and lines[i].startswith(_EXT_HEADERS[1:]):
                current.ext_headers.append(lines[i])
                i += 1
            continue
        if line.startswith(b"@@ "):
            if not files:
                raise ConfigError(f"{path}:{i + 1}: hunk outside a file diff")
            i = _read_hunk(path, lines, i, files[-1])
            continue
        if line.startswith(b"GIT binary patch"):
            i += 1
            while i < n and not lines[i].startswith(b"diff --git "):
                i += 1
            continue
        if line.startswith((b"--- ", b"+++ ", b"Binary files ")) or line == b"" or line == b"-- ":
            i += 1
            continue
        if files and lines[i - 1] == b"-- ":  # the signature, if any: the rest is not diff
            break
        raise ConfigError(f"{path}:{i + 1}: corrupt patch: unexpected line {line[:60]!r}")
    return files


def _read_hunk(path: Path, lines: list[bytes], i: int, diff: FileDiff) -> int:
    match = _HUNK.match(lines[i])
    if not match:
        raise ConfigError(f"{path}:{i + 1}: corrupt hunk header {lines[i][:60]!r}")
    new_len = int(match.group(4)) if match.group(4) is not None else 1
    old_len = int(match.group(2)) if match.group(2) is not None else 1
    hunk = Hunk(
        number=len(diff.hunks) + 1,
        old_start=int(match.group(1)),
        new_start=int(match.group(3)),
        header=lines[i].decode("utf-8", errors="replace"),
        line=i + 1,
    )
    diff.hunks.append(hunk)
    i += 1
    old_seen = new_seen = 0
    while old_seen < old_len or new_seen < new_len:
        if i >= len(lines):
            raise ConfigError(f"{path}:{hunk.line}: corrupt patch: hunk #{hunk.number} of {diff.path} is truncated")
        line = lines[i]
        tag = line[:1]
        if tag == b" " or line == b"":
            old_seen += 1
            new_seen += 1
        elif tag == b"-":
            old_seen += 1
        elif tag == b"+":
            new_seen += 1
            diff.added.append((i + 1, line[1:]))
        elif tag != b"\\":
            raise ConfigError(
                f"{path}:{i + 1}: corrupt patch: hunk #{hunk.number} of {diff.path} "
                f"has fewer lines than its header ({hunk.header.split('@@')[1].strip()}) says"
            )
        i += 1
    if old_seen != old_len or new_seen != new_len:
        raise ConfigError(
            f"{path}:{hunk.line}: corrupt patch: hunk #{hunk.number} of {diff.path} line counts do not match its header"
        )
    while i < len(lines) and lines[i].startswith(b"\\"):
        i += 1
    return i


def _diff_paths(path: Path, lineno: int, line: bytes) -> tuple[str, str]:
    rest = line[len(b"diff --git ") :].decode("utf-8", errors="replace")
    if rest.startswith('"'):
        # Quoted names (core.quotePath): fall back to the last quoted token.
        parts = re.findall(r'"((?:[^"\\]|\\.)*)"', rest)
        if len(parts) != 2:
            raise ConfigError(f"{path}:{lineno}: cannot read the paths of {line[:80]!r}")
        a, b = parts
    else:
        half = (len(rest) - 1) // 2
        a, b = rest[:half], rest[half + 1 :]
    if not (a.startswith("a/") and b.startswith("b/")):
        raise ConfigError(f"{path}:{lineno}: diff paths lack the a/ b/ prefixes: {line[:80]!r}")
    return a[2:], b[2:]
