#!/usr/bin/env python3
"""Move the build statements of the named outputs to the front of a build.ninja.

Ninja starts ready edges of equal critical-path weight in the order the
manifest declares them (1.11 and 1.13 alike), and CMake declares objects in
the order of the sources. MLX's longest object, copy_general_input.cu.o, then
starts wherever its source falls among 240 steps. A device call has at most
600 s, and a build cut by its limit loses every object in flight: on
2026-12-02 that object alone ran for more than 440 s, so it never finished
within the limit, and each later call compiled it again from the start.
Started first, it runs beside everything else.

Usage: bench/ninja_first.py BUILD_NINJA PATTERN...
  Every `build` statement with an output whose path contains a PATTERN moves,
  in the file's order, before the first `build` statement; the rest keeps its
  order. The file is replaced at once (never left half-written). Prints the
  outputs moved, and on stderr each PATTERN that matches none (the stock
  tree has no qmv_streamed_*); exit 2 when none matches.
"""
from __future__ import annotations

import os
import re
import sys
import tempfile
from pathlib import Path

# The outputs of a build line: up to the first ':' that '$' does not escape.
_OUTPUTS = re.compile(r"^build ((?:[^:$]|\$.)*):")


def _continues(line: str) -> bool:
    """Whether line ends in an unescaped '$' (the statement goes on below)."""
    body = line.rstrip("\n")
    return (len(body) - len(body.rstrip("$"))) % 2 == 1


def _statements(lines: list[str]) -> list[list[str]]:
    """lines cut into chunks: each `build` statement with its continuation and
    indented binding lines is one chunk; every other line is a chunk alone."""
    chunks: list[list[str]] = []
    i = 0
    while i < len(lines):
        chunk = [lines[i]]
        is_build = lines[i].startswith("build ")
        while _continues(chunk[-1]) and i + 1 < len(lines):
            i += 1
            chunk.append(lines[i])
        if is_build:
            while i + 1 < len(lines) and lines[i + 1][:1] in (" ", "\t") and lines[i + 1].strip():
                i += 1
                chunk.append(lines[i])
                while _continues(chunk[-1]) and i + 1 < len(lines):
                    i += 1
                    chunk.append(lines[i])
        chunks.append(chunk)
        i += 1
    return chunks


def _outputs(chunk: list[str]) -> list[str]:
    if not chunk[0].startswith("build "):
        return []
    head = "".join(line.rstrip("\n").removesuffix("$") if _continues(line) else line for line in chunk)
    m = _OUTPUTS.match(head)
    return re.split(r"(?<!\$) +", m.group(1).strip()) if m else []


def reorder(text: str, patterns: list[str]) -> tuple[str, list[str], list[str]]:
    """text with the matching statements first; the outputs moved, and the
    patterns that matched nothing."""
    chunks = _statements(text.splitlines(keepends=True))
    moved = [c for c in chunks if any(p in o for o in _outputs(c) for p in patterns)]
    unmatched = [p for p in patterns if not any(p in o for c in moved for o in _outputs(c))]
    rest = [c for c in chunks if not any(c is m for m in moved)]
    first = next((i for i, c in enumerate(rest) if c[0].startswith("build ")), len(rest))
    ordered = rest[:first] + moved + rest[first:]
    names = [o for c in moved for o in _outputs(c)]
    return "".join(line for c in ordered for line in c), names, unmatched


def main(argv: list[str]) -> int:
    if len(argv) < 3:
        print(__doc__.split("Usage: ")[1].split("\n")[0], file=sys.stderr)
        return 2
    path, patterns = Path(argv[1]), argv[2:]
    try:
        text = path.read_text()
    except OSError as e:
        print(f"ninja_first: {path}: {e.strerror}", file=sys.stderr)
        return 2
    new, moved, unmatched = reorder(text, patterns)
    if unmatched:
        print(f"ninja_first: {path}: no output matches {', '.join(unmatched)}", file=sys.stderr)
    if not moved:
        return 2
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name + ".")
    with os.fdopen(fd, "w") as f:
        f.write(new)
    os.chmod(tmp, path.stat().st_mode & 0o777)
    os.replace(tmp, path)
    print("first: " + " ".join(moved))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
