"""Address-space type check of the extracted kernels, with C++ for OpenCL.

Running the kernels on the CPU erases Metal's address-space words, which would
hide the one error class the Metal compiler rejects at once: a ``thread``
pointer passed (or cast) where ``device`` is expected. C++ for OpenCL has
Metal's rules (pointers into different named address spaces are distinct
types; casts between them are errors), so the extracted functions are checked
with ``clang++ -x clcpp -cl-std=clc++2021 -fsyntax-only`` with ``device``,
``constant``, ``threadgroup``, ``thread`` defined as ``__global``,
``__constant``, ``__local``, ``__private``, every kernel instantiated with
address-space-qualified arguments (exactly the ones the ``[[kernel]]``
wrappers pass).
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
from pathlib import Path
from typing import Iterable, Sequence

from overlay_tool.emulator import build
from overlay_tool.emulator.extract import extract, relabel, stable_label
from overlay_tool.errors import EmulatorError, MissingTool

PRELUDE = build.SHIM_DIR / "typecheck_prelude.h"

Instantiation = tuple[str, Sequence, bool]  # (function, template_args, takes_M)


def default_instantiations(text: str | None = None) -> list[Instantiation]:
    out: list[Instantiation] = []
    for t in ("float", "half"):
        for bits in (2, 3, 4, 5, 6, 8):
            for gs in (32, 64, 128):
                out.append(("qmv_fast_impl", (t, gs, bits), False))
                out.append(("qmv_impl", (t, gs, bits), False))
                out.append(("qmv_wide_impl", (t, gs, bits, 5, 8), True))
                if text is not None and "qmv_streamed_impl" in text:
                    for fast in (True, False):
                        out.append(("qmv_streamed_impl", (t, gs, bits, 5, fast), True))
    return out


def _targ(a) -> str:
    if isinstance(a, bool):
        return "true" if a else "false"
    return str(a)


def clang() -> str:
    for name in ("clang++", "clang++-16", "clang++-15", "clang++-14"):
        p = shutil.which(name)
        if p:
            return p
    raise MissingTool("clang++ not found: the address-space type check needs Debian's clang (apt-get install clang)")


def source(text: str, instantiations: Iterable[Instantiation], *, label: str,
           functions: Sequence[str]) -> str:
    inst = list(instantiations)
    names = list(dict.fromkeys([*functions, *(f for f, _, _ in inst)]))
    ex = extract(text, names, label=label)
    parts = [f'#include "{PRELUDE.name}"\n', ex.source, '#line 1 "<type-check instantiations>"\n']
    for i, (fn, targs, takes_m) in enumerate(inst):
        ta = [_targ(a) for a in targs]
        t = ta[0]
        m = "    __constant int& M,\n" if takes_m else ""
        marg = " M," if takes_m else ""
        parts.append(
            f"void emu_check_{i}(\n"
            f"    __global const uint32_t* w, __global const {t}* scales,\n"
            f"    __global const {t}* biases, __global const {t}* x, __global {t}* y,\n"
            f"    __constant int& in_vec_size, __constant int& out_vec_size,\n{m}"
            f"    uint3 tid, uint simd_gid, uint simd_lid) {{\n"
            f"  {fn}<{', '.join(ta)}>(w, scales, biases, x, y, in_vec_size, out_vec_size,{marg}\n"
            f"      tid, simd_gid, simd_lid);\n}}\n"
        )
    return "".join(parts)


def typecheck(text: str, instantiations: Iterable[Instantiation] | None = None, *,
              label: str = "quantized.h", extra_functions: Sequence[str] = (),
              functions: Sequence[str] | None = None) -> str:
    """Type-check; returns the clang command line used. Raises EmulatorError
    with clang's diagnostics on failure."""
    inst = list(instantiations) if instantiations is not None else default_instantiations(text)
    funcs = list(functions) if functions is not None else list(extra_functions)
    line_label = stable_label(label)
    src = source(text, inst, label=line_label, functions=funcs)
    return check_source(src, line_label=line_label, label=label)


def check_source(src: str, *, line_label: str, label: str) -> str:
    """Run clang's C++ for OpenCL syntax check on ``src`` (cached by content,
    prelude included); returns the command line. Raises EmulatorError with
    the first diagnostic (``line_label`` put back as ``label``)."""
    cxx = clang()
    cache = build.default_cache_dir() / "typecheck"
    cache.mkdir(parents=True, exist_ok=True)
    h = hashlib.sha256(src.encode())
    for f in sorted(build.SHIM_DIR.glob("typecheck*.h")):
        h.update(f.read_bytes())
    key = h.hexdigest()[:32]
    ok = cache / f"{key}.ok"
    cmd = [cxx, "-x", "clcpp", "-cl-std=clc++2021", "-fsyntax-only",
           "-Wno-unknown-attributes", "-Wno-ignored-attributes", "-I", str(build.SHIM_DIR)]
    if ok.exists():
        return " ".join(cmd)
    cpp = cache / f"{key}.clcpp"
    cpp.write_text(src)
    r = subprocess.run([*cmd, str(cpp)], capture_output=True, text=True)
    if r.returncode != 0:
        log = cache / f"{key}.log"
        log.write_text(r.stderr)
        errs = [ln for ln in r.stderr.splitlines() if ": error:" in ln]
        first = errs[0] if errs else (r.stderr.strip().splitlines() or ["(no output)"])[0]
        raise EmulatorError(
            f"address-space type check failed ({len(errs)} error(s)): "
            + relabel(first, line_label, label),
            hint=f"full clang output: {log}; translation unit: {cpp}",
        )
    ok.write_text("")
    return " ".join(cmd)
