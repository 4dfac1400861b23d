"""The address-space type check (see typecheck.py) for the fp kernels: the
extraction of an :class:`~overlay_tool.emulator.fp.FpEmulator` (fp4.h, fp8.h,
fp_quantized.h) compiled as C++ for OpenCL, each kernel instantiated through
a wrapper built from its parameter names with the address-space-qualified
types the ``[[kernel]]`` wrappers pass."""

from __future__ import annotations

from typing import Iterable, Sequence

from overlay_tool.emulator import fpquant
from overlay_tool.emulator.core import _targ
from overlay_tool.emulator.fp import FpEmulator
from overlay_tool.emulator.typecheck import check_source
from overlay_tool.errors import EmulatorError

PRELUDE_NAME = "typecheck_fp_prelude.h"

Instantiation = tuple[str, Sequence]  # (function, template_args)

# parameter name -> its declaration in the wrapper (T: the activation type)
DECLS: dict[str, str] = {
    "w": "__global const uint32_t* w",
    "scales": "__global const uint8_t* scales",
    "global_scale": "__global const float* global_scale",
    "x": "__global const T* x",
    "y": "__global T* y",
    "in_vec_size": "__constant int& in_vec_size",
    "out_vec_size": "__constant int& out_vec_size",
    "M": "__constant int& M",
    "tid": "uint3 tid",
    "simd_gid": "uint simd_gid",
    "simd_lid": "uint simd_lid",
    "quad_gid": "uint quad_gid",
    "quad_lid": "uint quad_lid",
}


def default_instantiations(text: str) -> list[Instantiation]:
    """Every stock fp mat-vec kernel as the dispatch instantiates it, for
    float and half (bfloat16_t is only declared), with and without the global
    scale, both results_per_simdgroup; fp_qmv_streamed_impl when present."""
    out: list[Instantiation] = []
    streamed = "fp_qmv_streamed_impl" in text
    for t in ("float", "half"):
        for md in fpquant.MODES.values():
            gs, bits = md.group_size, md.bits
            for g in ((False, True) if md.global_scale else (False,)):
                out.append(("fp_qmv_impl", (t, gs, bits, g)))
                for rps in (2, 4):
                    out.append(("fp_qmv_fast_impl", (t, gs, bits, g, rps)))
                    if streamed:
                        for fast in (True, False):
                            out.append(("fp_qmv_streamed_impl", (t, gs, bits, 5, fast, g, rps)))
            out.append(("fp_qmv_wide_impl", (t, gs, bits, 5, 16)))
            for d in fpquant.QUAD_K:
                out.append(("fp_qmv_quad_impl", (t, gs, bits, d)))
    return out


def source(emu: FpEmulator, instantiations: Iterable[Instantiation]) -> str:
    parts = [f'#include "{PRELUDE_NAME}"\n', emu.extraction.source,
             '#line 1 "<type-check instantiations>"\n']
    for i, (fn, targs) in enumerate(instantiations):
        ta = [_targ(a) for a in targs]
        params = emu.parameters(fn)
        unknown = [p for p in params if p not in DECLS]
        if unknown:
            raise EmulatorError(f"{fn}: parameter(s) {', '.join(unknown)} unknown to the type check")
        decls = ",\n    ".join(DECLS[p].replace("T", ta[0]) if p in ("x", "y") else DECLS[p]
                               for p in params)
        parts.append(f"void emu_check_{i}(\n    {decls}) {{\n"
                     f"  {fn}<{', '.join(ta)}>({', '.join(params)});\n}}\n")
    return "".join(parts)


def typecheck(emu: FpEmulator, instantiations: Iterable[Instantiation] | None = None) -> str:
    """Type-check the emulator's fp kernels; returns the clang command line.
    Raises EmulatorError with clang's first diagnostic (header file:line)."""
    inst = list(instantiations) if instantiations is not None else default_instantiations(emu.text)
    return check_source(source(emu, inst), line_label=emu.line_label, label=emu.label)
