"""``patches/series``: the order of the queue and each patch's destination.

Format, one patch per line::

    # The queue, applied in this order.

    # Why this one exists.
    0001-Add-qmv_streamed.patch upstream
    0002-Label-the-wheel.patch overlay

``upstream`` patches are meant to be sent to ml-explore/mlx; ``overlay``
patches stay here.  The lines before the first entry up to its last blank
line are the file's header; the comment lines after that, and all lines
between two entries, belong to the entry below them and move with it when
``export`` rewrites the file.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, cast

from overlay_tool.errors import ConfigError

Kind = Literal["upstream", "overlay"]
KINDS: tuple[Kind, ...] = ("upstream", "overlay")
_NAME = re.compile(r"(\d{4})-[^/\s]*\.patch")


@dataclass(frozen=True)
class Entry:
    name: str
    kind: Kind
    comments: tuple[str, ...] = ()  # the lines above it, back to the previous entry
    line: int = 0  # 1-based line in the file (0 for entries not read from a file)

    @property
    def number(self) -> int:
        return int(self.name[:4])

    @property
    def slug(self) -> str:
        """The name without its number: stable when the queue is renumbered."""
        return self.name[5:]


@dataclass
class Series:
    path: Path
    entries: list[Entry] = field(default_factory=list)
    header: tuple[str, ...] = ()
    trailer: tuple[str, ...] = ()  # comment/blank lines after the last entry

    @property
    def names(self) -> list[str]:
        return [e.name for e in self.entries]

    def kind_of(self, name: str) -> Kind | None:
        return next((e.kind for e in self.entries if e.name == name), None)

    @classmethod
    def load(cls, path: Path) -> Series:
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            raise ConfigError(f"{path}: not found (the queue's order lives in patches/series)") from None
        return cls.parse(path, text)

    @classmethod
    def parse(cls, path: Path, text: str) -> Series:
        entries: list[Entry] = []
        header: tuple[str, ...] = ()
        pending: list[str] = []
        seen: set[str] = set()
        for lineno, raw in enumerate(text.splitlines(), start=1):
            line = raw.strip()
            if not line or line.startswith("#"):
                pending.append(raw.rstrip())
                continue
            fields = line.split()
            if len(fields) != 2 or fields[1] not in KINDS:
                raise ConfigError(
                    f"{path}:{lineno}: expected 'NNNN-name.patch upstream|overlay', got {line!r}"
                )
            name, kind = fields
            if not _NAME.fullmatch(name):
                raise ConfigError(f"{path}:{lineno}: bad patch name {name!r} (expected NNNN-name.patch)")
            if name in seen:
                raise ConfigError(f"{path}:{lineno}: {name} is listed twice")
            seen.add(name)
            if not entries and "" in pending:
                cut = len(pending) - pending[::-1].index("")
                header, pending = tuple(pending[:cut]), pending[cut:]
            entries.append(Entry(name, cast(Kind, kind), tuple(pending), lineno))
            pending = []
        if not entries:
            header, pending = tuple(pending), []
        return cls(path=path, entries=entries, header=header, trailer=tuple(pending))

    def render(self) -> str:
        out: list[str] = list(self.header)
        for entry in self.entries:
            out.extend(entry.comments)
            out.append(f"{entry.name} {entry.kind}")
        out.extend(self.trailer)
        return "\n".join(out) + "\n"

    def problems(self, *, numbering: bool = True) -> list[str]:
        """Every mismatch between the series and the files beside it, one line each.

        ``numbering`` also asks that each name's number be its position: export
        always writes it so, and ``apply`` tolerates a hand-reordered series
        (that is how a queue is reordered: edit, apply, export).
        """
        folder = self.path.parent
        found: list[str] = []
        for position, entry in enumerate(self.entries, start=1):
            if not (folder / entry.name).is_file():
                found.append(f"{self.path}:{entry.line}: {entry.name} is listed but the file does not exist")
            if numbering and entry.number != position:
                found.append(
                    f"{self.path}:{entry.line}: {entry.name} is number {entry.number} "
                    f"but sits at position {position} (reordered by hand? run apply, then export to renumber)"
                )
        listed = set(self.names)
        for path in sorted(folder.glob("*.patch")):
            if path.name not in listed:
                found.append(f"{path}: not listed in {self.path.name} (add it, or delete the file)")
        return found

    def validate(self, *, numbering: bool = True) -> None:
        """Raise :class:`ConfigError` on the first problem (for commands that need a sound queue)."""
        problems = self.problems(numbering=numbering)
        if problems:
            more = f" (and {len(problems) - 1} more: run mlx-overlay check)" if len(problems) > 1 else ""
            raise ConfigError(problems[0] + more)
