"""``pin.toml``: which upstream, which commit.

Read with :mod:`tomllib` into one typed :class:`Pin`; every problem is a
one-line :class:`ConfigError` naming the file and the key.  Edits go through
:mod:`tomlkit` so the user's comments and layout survive.
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import tomlkit

from overlay_tool.errors import ConfigError

_FULL_SHA = re.compile(r"[0-9a-f]{40}")

#: The keys pin.toml may hold: table -> key -> (required, type).
SCHEMA: dict[str, dict[str, tuple[bool, type]]] = {
    "upstream": {
        "url": (True, str),
        "commit": (True, str),
        "branch": (False, str),
    },
}


@dataclass(frozen=True)
class Pin:
    """The upstream repository and the commit the queue applies to."""

    path: Path
    url: str
    commit: str
    branch: str = "main"

    @property
    def short(self) -> str:
        return self.commit[:8]

    @classmethod
    def load(cls, path: Path) -> Pin:
        try:
            data = tomllib.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise ConfigError(f"{path}: not found (every project has a pin.toml at its root)") from None
        except tomllib.TOMLDecodeError as err:
            raise ConfigError(f"{path}: invalid TOML: {err}") from None
        values = _check_schema(path, data)
        commit = values["upstream.commit"]
        if not _FULL_SHA.fullmatch(commit):
            raise ConfigError(
                f"{path}: upstream.commit must be a full 40-hex-digit lowercase commit id, got {commit!r}"
            )
        url = values["upstream.url"]
        if not url.strip():
            raise ConfigError(f"{path}: upstream.url is empty")
        branch = values.get("upstream.branch", "main")
        return cls(path=path, url=url, commit=commit, branch=branch)

    def with_commit(self, commit: str, note: str | None = None) -> Pin:
        """Write ``commit`` into the file (keeping its comments) and return the new pin.

        ``note`` (``v0.32.1-26, 2026-08-22``) replaces the comment line right
        above ``commit`` where that line has the same form: it described the
        old commit, and kept it would now say something false. Any other
        comment is the user's and stays as it is."""
        if not _FULL_SHA.fullmatch(commit):
            raise ConfigError(f"{self.path}: refusing to write upstream.commit = {commit!r} (not a full commit id)")
        doc = tomlkit.parse(self.path.read_text(encoding="utf-8"))
        doc["upstream"]["commit"] = commit  # type: ignore[index]
        text = tomlkit.dumps(doc)
        if note is not None:
            text = _renote(text, commit, note)
        self.path.write_text(text, encoding="utf-8")
        return Pin.load(self.path)


#: The comment `with_commit` keeps up to date above ``commit``: a version and a date.
_NOTE = re.compile(r"(?P<indent>[ \t]*)# \S+, \d{4}-\d{2}-\d{2}[ \t]*")


def _renote(text: str, commit: str, note: str) -> str:
    lines = text.split("\n")
    for i, line in enumerate(lines):
        if i and re.fullmatch(rf"\s*commit\s*=\s*[\"']{commit}[\"'].*", line):
            above = _NOTE.fullmatch(lines[i - 1])
            if above:
                lines[i - 1] = f"{above['indent']}# {note}"
    return "\n".join(lines)


def _check_schema(path: Path, data: dict[str, Any]) -> dict[str, Any]:
    values: dict[str, Any] = {}
    for table, body in data.items():
        if table not in SCHEMA:
            raise ConfigError(f"{path}: unknown key {table!r} (known: {', '.join(SCHEMA)})")
        if not isinstance(body, dict):
            raise ConfigError(f"{path}: {table!r} must be a table ([{table}])")
        for key, value in body.items():
            spec = SCHEMA[table].get(key)
            if spec is None:
                raise ConfigError(
                    f"{path}: unknown key '{table}.{key}' (known: {', '.join(SCHEMA[table])})"
                )
            if not isinstance(value, spec[1]):
                raise ConfigError(f"{path}: {table}.{key} must be a {spec[1].__name__}, got {value!r}")
            values[f"{table}.{key}"] = value
    for table, keys in SCHEMA.items():
        for key, (required, _) in keys.items():
            if required and f"{table}.{key}" not in values:
                raise ConfigError(f"{path}: missing key '{table}.{key}'")
    return values
