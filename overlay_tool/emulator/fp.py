"""The emulator for MLX's floating-point quantized mat-vec kernels
(``fp_quantized.h`` with the ``fp4.h``/``fp8.h`` decoders it includes).

A launch builds its call from the kernel function's own parameter names in
the header (:data:`PARAMS`), so any function over the stock buffers runs:
the stock ``fp_qmv_fast_impl``, ``fp_qmv_impl``, ``fp_qmv_wide_impl``,
``fp_qmv_quad_impl`` and a patch's ``fp_qmv_streamed_impl``.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import numpy as np

from overlay_tool.emulator import fpquant, quant
from overlay_tool.emulator.core import (
    CXX_TYPE,
    Emulator,
    _targ,
    batched_x_bits,
    export_entry,
)
from overlay_tool.emulator.extract import Extraction, extract_sources, split_items, stable_label
from overlay_tool.errors import EmulatorError

FP_FUNCTIONS = ("fp_qmv_fast_impl", "fp_qmv_impl", "fp_qmv_wide_impl", "fp_qmv_quad_impl")
FP_OPTIONAL = ("fp_qmv_streamed_impl",)
FP_KINDS = ("qmv_fast", "qmv", "qmv_m1", "qmv_quad", "qmv_wide", "qmv_streamed")
# quantized.cpp qmv_wide(): fp modes use k_lanes = 16, rows_per_tg = (32/16)*2 = 4
FP_WIDE_K_LANES = 16

# Kernel parameter name -> the C++ argument the entry point passes
# (T is the activation type; gz selects the batch as adjust_matrix_offsets
# does for contiguous arrays).
PARAMS: dict[str, str] = {
    "w": "(const uint32_t*)a->dev[0] + (long long)gz * a->w_bstride",
    "scales": "(const uint8_t*)a->dev[1] + (long long)gz * a->s_bstride",
    "global_scale": "(const float*)a->dev[2]",
    "x": "(const T*)a->dev[3] + (long long)gz * a->x_bstride",
    "y": "(T*)a->dev[4] + (long long)gz * a->y_bstride",
    "in_vec_size": "a->K",
    "out_vec_size": "a->N",
    "M": "a->M",
    "tid": "tid",
    "simd_gid": "L->simd_gid",
    "simd_lid": "L->simd_lid",
    "quad_gid": "(L->simd_gid * 32 + L->simd_lid) / 4",
    "quad_lid": "L->simd_lid % 4",
}


def parameter_names(text: str, function: str) -> tuple[str, ...]:
    """The parameter names of the first definition of ``function`` in ``text``."""
    for it in split_items(text):
        if it.name == function and it.kind == "function":
            head = it.text.split("{", 1)[0]
            head = re.sub(r"\[\[.*?\]\]", " ", head, flags=re.S)
            m = re.search(r"\b" + re.escape(function) + r"\s*\(", head)
            if not m:
                break
            depth, i, parts, cur = 1, m.end(), [], []
            while i < len(head) and depth:
                c = head[i]
                if c in "(<":
                    depth += 1
                elif c in ")>":
                    depth -= 1
                if (c == "," and depth == 1) or depth == 0:
                    parts.append("".join(cur))
                    cur = []
                else:
                    cur.append(c)
                i += 1
            names = []
            for p in parts:
                ids = re.findall(r"[A-Za-z_]\w*", p.split("=", 1)[0])
                if ids:
                    names.append(ids[-1])
            return tuple(names)
    raise EmulatorError(f"no function named {function!r} in the header")


@dataclass(frozen=True)
class FpLaunchSpec:
    """One instantiation ``function<template_args>`` on ``dtype`` buffers,
    called with ``params`` (its parameter names, in order)."""

    function: str
    template_args: tuple[str, ...]
    dtype: str
    params: tuple[str, ...]

    @staticmethod
    def make(function: str, template_args: Sequence, dtype: str,
             params: Sequence[str]) -> "FpLaunchSpec":
        quant.check_dtype(dtype)
        unknown = [p for p in params if p not in PARAMS]
        if unknown:
            raise EmulatorError(
                f"{function}: parameter(s) {', '.join(unknown)} not known to the fp emulator "
                f"(known: {', '.join(PARAMS)})"
            )
        return FpLaunchSpec(function, tuple(_targ(a) for a in template_args), dtype, tuple(params))

    @property
    def symbol(self) -> str:
        h = hashlib.sha1(repr(("fp", self.function, self.template_args, self.dtype,
                               self.params)).encode())
        return "emu_fp_entry_" + h.hexdigest()[:20]

    def cxx(self) -> str:
        args = ",\n      ".join(PARAMS[p] for p in self.params)
        return f"""
static void {self.symbol}_body(void* u, unsigned gx, unsigned gy, unsigned gz,
                               const emu::Lane* L) {{
  auto* a = (emu_args*)u;
  typedef {CXX_TYPE[self.dtype]} T;
  uint3 tid(gx, gy, gz);
  (void)tid;
  {self.function}<{", ".join(self.template_args)}>(
      {args});
}}
""" + export_entry(self.symbol, "global_scale")


def decoder_sources(text: str, header: Path | None) -> list[tuple[str, str]]:
    """``(text, label)`` of the quoted ``#include``s of the header that lie in
    its folder (fp4.h, fp8.h for fp_quantized.h), in include order."""
    if header is None:
        return []
    out = []
    for inc in re.findall(r'(?m)^\s*#\s*include\s+"([^"]+)"', text):
        p = header.parent / Path(inc).name
        if p.exists():
            out.append((p.read_text(encoding="utf-8"), stable_label(str(p))))
    return out


class FpEmulator(Emulator):
    """Runs the fp kernels of ``fp_quantized.h`` (stock or patched) on the CPU.

    ``header``: a Path (its folder supplies the included ``fp4.h``/``fp8.h``)
    or source text with ``decoders`` given as ``[(text, label), ...]``.
    Other options as :class:`Emulator`.
    """

    default_functions = FP_FUNCTIONS
    optional_functions = FP_OPTIONAL

    def __init__(self, header: Path | str, *,
                 decoders: Sequence[tuple[str, str]] | None = None, **kw) -> None:
        self._decoders = decoders
        self._params: dict[str, tuple[str, ...]] = {}  # function -> parameter names
        super().__init__(header, **kw)

    def _extract(self) -> Extraction:
        if self.header is None and self.label == "quantized.h":  # source text given
            self.label = self.line_label = "fp_quantized.h"
        if self._decoders is None:
            path = self.header if self.header is not None else Path(self.label)
            self._decoders = decoder_sources(self.text, path if path.exists() else None)
        return extract_sources([*self._decoders, (self.text, self.line_label)],
                               self.functions, optional=self.optional_functions)

    def parameters(self, function: str) -> tuple[str, ...]:
        if function not in self._params:
            self._params[function] = parameter_names(self.text, function)
        return self._params[function]

    def spec(self, function: str, template_args: Sequence, dtype: str) -> FpLaunchSpec:
        return FpLaunchSpec.make(function, template_args, dtype, self.parameters(function))

    # ---- running -------------------------------------------------------------
    def launch(self, function: str, template_args: Sequence, *, w: np.ndarray,
               scales: np.ndarray, x: np.ndarray, global_scale=None, M: int, N: int,
               K: int, grid: tuple[int, int, int],
               threadgroup: tuple[int, int, int] = (32, 2, 1), dtype: str) -> np.ndarray:
        """Run ``function<template_args>`` over ``grid`` threadgroups; the call
        passes each parameter by its name (:data:`PARAMS`). Returns y bit
        patterns (B, M, N), pre-filled with all-ones (NaN)."""
        spec = self.spec(function, template_args, dtype)
        fn = self._entry(spec)
        xb = batched_x_bits(x, dtype, M, K)
        B = xb.shape[0]
        wb = np.ascontiguousarray(w, dtype=np.uint32)
        sb = np.ascontiguousarray(scales, dtype=np.uint8)
        if wb.ndim not in (2, 3) or wb.shape[-2] != N or sb.shape[-2] != N:
            raise EmulatorError(f"w {wb.shape} / scales {sb.shape} do not have N={N} rows")
        if wb.ndim == 3 and wb.shape[0] != B:
            raise EmulatorError(f"w has batch {wb.shape[0]}, x has {B}")
        if grid[2] > B:
            raise EmulatorError(f"grid z={grid[2]} exceeds the batch {B}")
        # without a global scale the buffer holds a NaN: a read would show
        gb = np.array([np.nan if global_scale is None else global_scale], dtype=np.float32)
        y = np.full((B, M, N), np.iinfo(quant.bits_dtype(dtype)).max, dtype=quant.bits_dtype(dtype))
        self._call(fn, spec, [wb, sb, gb, xb, y], K=K, N=N, M=M, grid=grid,
                   threadgroup=threadgroup)
        return y

    def qmv_spec(self, kind: str, *, mode: str, M: int, N: int, K: int, dtype: str,
                 global_scale: bool = False, vecs_per_tg: int | None = None,
                 results_per_simdgroup: int = 4, B: int = 1,
                 ) -> tuple[FpLaunchSpec, tuple[int, int, int], tuple[int, int, int]]:
        """(instantiation, grid, threadgroup) of ``kind`` as quantized.cpp
        launches it (see README.md)."""
        md = fpquant.mode_of(mode)
        t = CXX_TYPE[quant.check_dtype(dtype)]
        gs, bits, hgs = md.group_size, md.bits, bool(global_scale)
        if hgs and not md.global_scale:
            raise EmulatorError(f"{mode} takes no global scale")
        if kind not in FP_KINDS:
            raise EmulatorError(f"kind {kind!r} is not one of {', '.join(FP_KINDS)}")
        if K % gs:
            raise EmulatorError(f"K={K} is not a multiple of {mode}'s group size {gs}")
        if results_per_simdgroup not in (2, 4):
            raise EmulatorError(f"results_per_simdgroup must be 2 or 4, not {results_per_simdgroup}")
        fast = quant.m1_uses_fast(N, K, bits)
        if kind == "qmv_m1":
            kind = fpquant.m1_kind(N, K, mode, hgs)
        # the dispatch's narrow variant exists for the fast kernel only
        rps = results_per_simdgroup if kind in ("qmv_fast", "qmv_streamed") and fast else 4
        tg = (32, 2, 1)
        if kind in ("qmv_quad", "qmv_wide") and hgs:
            raise EmulatorError(f"dispatch_qmv never runs {kind} with a global scale")
        if kind == "qmv_fast":
            if not fast:
                raise EmulatorError(
                    f"qmv_fast needs N % 8 == 0 and K % {quant.qmv_fast_k_alignment(bits)} == 0 "
                    f"(N={N}, K={K}); use kind='qmv' or 'qmv_m1'")
            return (self.spec("fp_qmv_fast_impl", (t, gs, bits, hgs, rps), dtype),
                    (M, -(-N // (2 * rps)), B), tg)
        if kind == "qmv":
            return self.spec("fp_qmv_impl", (t, gs, bits, hgs), dtype), (M, -(-N // 8), B), tg
        if kind == "qmv_quad":
            if K not in fpquant.QUAD_K:
                raise EmulatorError(f"qmv_quad is instantiated for K in {fpquant.QUAD_K}, not {K}")
            # quads_per_simd 8 x results_per_quadgroup 8 = 64 rows per threadgroup
            return (self.spec("fp_qmv_quad_impl", (t, gs, bits, K), dtype),
                    (M, -(-N // 64), B), (32, 1, 1))
        v = vecs_per_tg if vecs_per_tg is not None else quant.wide_vecs_per_tg(M)
        if kind == "qmv_wide":
            rows = (32 // FP_WIDE_K_LANES) * 2
            return (self.spec("fp_qmv_wide_impl", (t, gs, bits, v, FP_WIDE_K_LANES), dtype),
                    (-(-M // v), -(-N // rows), B), tg)
        return (self.spec("fp_qmv_streamed_impl", (t, gs, bits, v, fast, hgs, rps), dtype),
                (-(-M // v), -(-N // (2 * rps)), B), tg)

    def qmv(self, kind: str, *, mode: str, w: np.ndarray, scales: np.ndarray,
            x: np.ndarray, dtype: str, global_scale=None, vecs_per_tg: int | None = None,
            results_per_simdgroup: int = 4) -> np.ndarray:
        """Run an fp mat-vec the way dispatch_qmv launches ``kind``; returns
        the output bit patterns (B, M, N)."""
        xs = np.shape(x)
        if len(xs) not in (2, 3):
            raise EmulatorError(f"x must be (M, K) or (B, M, K), got shape {xs}")
        M, K = xs[-2], xs[-1]
        B = xs[0] if len(xs) == 3 else 1
        N = np.shape(w)[-2]
        bits = fpquant.mode_of(mode).bits
        if np.shape(w)[-1] * 32 != K * bits:
            raise EmulatorError(f"w has {np.shape(w)[-1]} words per row; K={K} at {bits} bits "
                                f"needs {K * bits // 32}")
        spec, grid, tg = self.qmv_spec(
            kind, mode=mode, M=M, N=N, K=K, dtype=dtype, global_scale=global_scale is not None,
            vecs_per_tg=vecs_per_tg, results_per_simdgroup=results_per_simdgroup, B=B)
        return self.launch(spec.function, spec.template_args, w=w, scales=scales, x=x,
                           global_scale=global_scale, M=M, N=N, K=K, grid=grid,
                           threadgroup=tg, dtype=dtype)

    def prepare_qmv(self, configs, *, jobs: int = 2) -> None:
        """Compile in one go what qmv(**config) will need; each config holds
        kind, mode, M, N, K, dtype (optional global_scale: bool, vecs_per_tg,
        results_per_simdgroup)."""
        self.prepare([self.qmv_spec(**c)[0] for c in configs], jobs=jobs)

    def typecheck(self, instantiations=None) -> None:
        from overlay_tool.emulator.fptypecheck import typecheck

        typecheck(self, instantiations)
