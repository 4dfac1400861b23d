"""Verbatim extraction of top-level items (functions, structs, constants,
macros) from a Metal header, by name, with ``#line`` markers.

The header is split into its top-level items with a small lexer that knows
comments, string/char literals, preprocessor lines and brace nesting. Each
item gets a name (the function, struct, constant or macro it defines). The
selection is the requested names plus everything they reference, closed
transitively over the names the header defines, emitted in file order, each
item preceded by ``#line N "file"`` so compiler messages point at the
original header.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Sequence

from overlay_tool.errors import EmulatorError

_IDENT = re.compile(r"[A-Za-z_]\w*")
_KEYWORDS = {
    "template", "typename", "class", "struct", "inline", "constexpr", "const",
    "static", "void", "int", "short", "bool", "float", "unsigned", "using",
    "namespace", "return", "if", "else", "for", "while", "do", "typedef",
    "union", "enum", "operator", "METAL_FUNC", "constant", "device", "thread",
    "threadgroup", "kernel", "auto", "char", "long", "uint", "half",
}


@dataclass(frozen=True)
class Item:
    name: str | None
    kind: str  # "function", "struct", "variable", "macro", "other"
    text: str
    line: int  # 1-based line of the first character of text
    idents: frozenset[str]


def _strip_comments_and_literals(text: str) -> str:
    """Replace comments and string/char literals by spaces (newlines kept)."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c == "/" and i + 1 < n and text[i + 1] == "/":
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif c == "/" and i + 1 < n and text[i + 1] == "*":
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif c in "\"'":
            j = i + 1
            while j < n and text[j] != c:
                j += 2 if text[j] == "\\" else 1
            j = min(j + 1, n)
            out.append(c + re.sub(r"[^\n]", " ", text[i + 1 : j - 1]) + (c if j - i >= 2 else ""))
            i = j
        else:
            out.append(c)
            i += 1
    return "".join(out)


def split_items(text: str) -> list[Item]:
    """Split a header into its top-level items."""
    clean = _strip_comments_and_literals(text)
    assert len(clean) == len(text)
    items: list[Item] = []
    n = len(clean)
    i = 0
    line_starts = [0] + [m.end() for m in re.finditer("\n", text)]

    def line_of(pos: int) -> int:
        lo, hi = 0, len(line_starts) - 1
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if line_starts[mid] <= pos:
                lo = mid
            else:
                hi = mid - 1
        return lo + 1

    while i < n:
        # skip whitespace (comments are already blanks)
        while i < n and clean[i].isspace():
            i += 1
        if i >= n:
            break
        start = i
        if clean[i] == "#":
            # preprocessor line, with continuations
            j = i
            while True:
                k = clean.find("\n", j)
                if k < 0:
                    k = n
                    break
                if clean[k - 1] == "\\":
                    j = k + 1
                    continue
                break
            end = k
            seg = clean[start:end]
            m = re.match(r"#\s*define\s+([A-Za-z_]\w*)", seg)
            kind = "macro" if m else "other"
            name = m.group(1) if m else None
            body_idents = seg[m.end():] if m else ""
            items.append(
                Item(name, kind, text[start:end], line_of(start),
                     frozenset(_IDENT.findall(body_idents)) - {name}))
            i = end
            continue
        # ordinary item: up to ';' at depth 0, or a '}' closing depth 1 (plus
        # an optional trailing ';' for struct definitions)
        depth = 0
        paren = 0
        j = i
        end = None
        saw_brace = False
        while j < n:
            c = clean[j]
            if c == "{":
                depth += 1
                saw_brace = True
            elif c == "}":
                depth -= 1
                if depth == 0:
                    k = j + 1
                    while k < n and clean[k] in " \t":
                        k += 1
                    if k < n and clean[k] == ";":
                        end = k + 1
                    else:
                        end = j + 1
                    break
            elif c == "(":
                paren += 1
            elif c == ")":
                paren -= 1
            elif c == ";" and depth == 0 and paren == 0:
                end = j + 1
                break
            elif c == "#" and depth > 0:
                pass
            j += 1
        if end is None:
            end = n
        seg_clean = clean[start:end]
        name, kind = _name_of(seg_clean, saw_brace)
        idents = frozenset(_IDENT.findall(seg_clean))
        if name:
            idents = idents - {name}
        items.append(Item(name, kind, text[start:end], line_of(start), idents))
        i = end
    return items


def _name_of(seg: str, has_body: bool) -> tuple[str | None, str]:
    head = seg.split("{", 1)[0] if has_body else seg
    head = re.sub(r"\[\[.*?\]\]", " ", head, flags=re.S)
    # drop leading template <...> headers (balanced angle brackets)
    while True:
        m = re.match(r"\s*template\s*<", head)
        if not m:
            break
        d, k = 1, m.end()
        while k < len(head) and d:
            if head[k] == "<":
                d += 1
            elif head[k] == ">":
                d -= 1
            k += 1
        head = head[k:]
    if re.match(r"\s*(using|typedef)\b", head):
        m = re.match(r"\s*using\s+([A-Za-z_]\w*)\s*=", head)
        if m:
            return m.group(1), "variable"
        m = re.search(r"([A-Za-z_]\w*)\s*;?\s*$", head.strip())
        if head.lstrip().startswith("typedef") and m:
            return m.group(1), "variable"
        return None, "other"
    m = re.match(r"\s*(?:struct|class|union|enum(?:\s+class)?)\s+([A-Za-z_]\w*)", head)
    if m and "(" not in head[: m.end()]:
        return m.group(1), "struct"
    p = head.find("(")
    eq = head.find("=")
    if p >= 0 and (eq < 0 or p < eq):
        before = head[:p].rstrip()
        m = re.search(r"([A-Za-z_]\w*)\s*$", before)
        if m and m.group(1) not in _KEYWORDS:
            return m.group(1), "function"
        return None, "other"
    # variable: identifier before '=' or ';' or '['
    cut = len(head)
    for ch in "=;[":
        k = head.find(ch)
        if 0 <= k < cut:
            cut = k
    m = re.search(r"([A-Za-z_]\w*)\s*$", head[:cut].rstrip())
    if m and m.group(1) not in _KEYWORDS:
        return m.group(1), "variable"
    return None, "other"


_TG_DECL = re.compile(r"(?m)^(\s*)threadgroup(\s+)(?=[^;()*&]*\[[^;]*;)")


def _rewrite_threadgroup_decls(text: str) -> str:
    """``threadgroup T buf[N];`` inside a function -> shared per threadgroup.

    All threads of a threadgroup run on one OS thread, so a function-local
    ``static thread_local`` array is exactly one allocation per threadgroup
    (threadgroups of a launch run one after another). Pointer parameters
    (``threadgroup T* p``) keep the erased address-space word.
    """
    return _TG_DECL.sub(lambda m: f"{m.group(1)}EMU_THREADGROUP_DECL{m.group(2)}", text)


@dataclass
class Extraction:
    source: str  # C++ text with #line markers
    names: list[str]  # names of the items taken, in file order
    file_label: str


def header_text(header: Path | str) -> tuple[str, str]:
    """Return (text, label): a Path or an existing path string is read; any
    other string is taken as source text."""
    if isinstance(header, Path):
        try:
            return header.read_text(encoding="utf-8"), str(header)
        except OSError as e:
            raise EmulatorError(f"{header}: cannot read the header ({e.strerror})") from e
    if "\n" not in header and len(header) < 4096:
        p = Path(header)
        if p.exists():
            return p.read_text(encoding="utf-8"), str(p)
        raise EmulatorError(f"{header}: no such header file")
    return header, "quantized.h"


def stable_label(label: str) -> str:
    """The name ``#line`` markers use: for a file inside a git checkout, its
    path relative to the checkout root (``mlx/backend/metal/kernels/quantized.h``),
    so that the same header in another (temporary) clone gives the same
    translation unit and hits the compile cache; for another file, its base
    name (the cache key holds the whole text anyway; messages get the full
    path back through :func:`relabel`)."""
    p = Path(label)
    if not p.is_absolute() or not p.exists():
        return label
    for parent in p.parents:
        if (parent / ".git").exists():
            return p.relative_to(parent).as_posix()
    return p.name


def relabel(message: str, line_label: str, label: str) -> str:
    """Put the full path back into a diagnostic that names ``line_label``."""
    if line_label == label:
        return message
    return re.sub(r"(?<![\w/.-])" + re.escape(line_label), lambda _: label, message)


def extract(text: str, names: Iterable[str], *, label: str = "quantized.h",
            optional: Iterable[str] = ()) -> Extraction:
    """Take the named items (all overloads of each name) and their transitive
    dependencies among the header's own items. A missing required name raises
    EmulatorError; names in ``optional`` are taken only when present."""
    return extract_sources([(text, label)], names, optional=optional)


def extract_sources(sources: Sequence[tuple[str, str]], names: Iterable[str], *,
                    optional: Iterable[str] = ()) -> Extraction:
    """:func:`extract` over several headers, given as ``(text, label)`` in
    include order (e.g. ``fp4.h``, ``fp8.h``, ``fp_quantized.h``): names
    resolve across all of them; items come out source by source, each in file
    order under its own ``#line`` label."""
    items: list[tuple[str, Item]] = [
        (label, it) for text, label in sources for it in split_items(text)
    ]
    main_label = sources[-1][1]
    by_name: dict[str, list[int]] = {}
    for idx, (_, it) in enumerate(items):
        if it.name:
            by_name.setdefault(it.name, []).append(idx)
    wanted = list(dict.fromkeys(names))
    missing = [n for n in wanted if n not in by_name]
    if missing:
        raise EmulatorError(
            f"{main_label}: no top-level function or item named "
            + ", ".join(repr(m) for m in missing)
        )
    roots = wanted + [n for n in optional if n in by_name and n not in wanted]
    take: set[int] = set()
    stack = list(roots)
    seen: set[str] = set()
    while stack:
        nm = stack.pop()
        if nm in seen:
            continue
        seen.add(nm)
        for idx in by_name.get(nm, []):
            take.add(idx)
            for dep in items[idx][1].idents:
                if dep in by_name and dep not in seen:
                    stack.append(dep)
    parts = []
    taken = []
    for idx in sorted(take):
        label, it = items[idx]
        esc = label.replace("\\", "\\\\").replace('"', '\\"')
        taken.append(it.name or "")
        body = _rewrite_threadgroup_decls(it.text) if it.kind == "function" else it.text
        parts.append(f'#line {it.line} "{esc}"\n{body}\n')
    return Extraction("".join(parts), taken, main_label)


def defined_names(text: str) -> list[str]:
    return [it.name for it in split_items(text) if it.name]


def find_function_signature(text: str, name: str) -> str | None:
    for it in split_items(text):
        if it.name == name and it.kind == "function":
            return it.text.split("{", 1)[0]
    return None


__all__: Sequence[str] = ["extract", "extract_sources", "split_items", "Extraction", "header_text", "defined_names"]
