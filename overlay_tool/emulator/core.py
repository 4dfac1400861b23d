"""The emulator: extract kernels from a header, compile them against the shim,
launch them lane by lane on numpy data."""

from __future__ import annotations

import ctypes
import hashlib
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Sequence

import numpy as np

from overlay_tool.emulator import build, quant
from overlay_tool.emulator.extract import Extraction, extract, header_text, relabel, stable_label
from overlay_tool.errors import EmulatorError

DEFAULT_FUNCTIONS = (
    "get_pack_factor", "get_bytes_per_pack", "load_vector", "load_vector_safe",
    "qdot", "qdot_safe", "dequantize", "qmv_fast_impl", "qmv_impl", "qmv_wide_impl",
)
# Taken when the header has them (the patched header adds the streamed kernel).
OPTIONAL_FUNCTIONS = ("qmv_streamed_impl",)

CXX_TYPE = {"float16": "half", "bfloat16": "bfloat16_t", "float32": "float"}
KINDS = ("qmv", "qmv_fast", "qmv_wide", "qmv_m1", "qmv_streamed")
SIMD_SUM_ORDERS = {"tree": 0, "sequential": 1, "butterfly": 2, "reverse": 3}

ERRLEN = 4096
# A launch installs process-wide SIGSEGV/SIGBUS handlers for its duration
# (guard pages): one launch at a time per process.
_LAUNCH_LOCK = threading.Lock()


def _targ(a) -> str:
    if isinstance(a, bool):
        return "true" if a else "false"
    if isinstance(a, (int, np.integer)):
        return str(int(a))
    if isinstance(a, str):
        return a
    raise EmulatorError(f"template argument {a!r} is not a str, int or bool")


def batched_x_bits(x, dtype: str, M: int, K: int) -> np.ndarray:
    """x (B, M, K) or (M, K) as (B, M, K) bit patterns of ``dtype``."""
    xb = quant.to_bits(x, dtype)
    if xb.ndim == 2:
        xb = xb[None]
    if xb.ndim != 3 or xb.shape[1:] != (M, K):
        raise EmulatorError(f"x has shape {np.shape(x)}, expected (B, {M}, {K}) or ({M}, {K})")
    return xb


def export_entry(symbol: str, third_buffer: str) -> str:
    """The exported C entry that launches ``<symbol>_body`` over the five
    buffers w, scales, ``third_buffer`` (biases or global_scale), x, y."""
    return f"""EMU_EXPORT int {symbol}(void** host, long long* bytes, int K, int N, int M,
    int gx, int gy, int gz, int tgx, int tgy, int tgz, long long* bstrides,
    char* err, int errlen, long long timeout_ms) {{
  emu_args a;
  a.K = K; a.N = N; a.M = M;
  a.w_bstride = bstrides[0]; a.s_bstride = bstrides[1]; a.b_bstride = bstrides[2];
  a.x_bstride = bstrides[3]; a.y_bstride = bstrides[4];
  emu::HostBuf hb[5] = {{
      {{"w", host[0], (size_t)bytes[0], 1, 0}},
      {{"scales", host[1], (size_t)bytes[1], 1, 0}},
      {{"{third_buffer}", host[2], (size_t)bytes[2], 1, 0}},
      {{"x", host[3], (size_t)bytes[3], 1, 0}},
      {{"y", host[4], (size_t)bytes[4], 1, 1}}}};
  return emu::launch(&{symbol}_body, &a, a.dev, hb, 5, gx, gy, gz, tgx, tgy, tgz,
                     err, errlen, (long)timeout_ms);
}}
"""


@dataclass(frozen=True)
class LaunchSpec:
    """One kernel instantiation: function<template_args> on buffers of dtype."""

    function: str
    template_args: tuple[str, ...]
    dtype: str
    takes_M: bool

    @staticmethod
    def make(function: str, template_args: Sequence, dtype: str, takes_M: bool) -> "LaunchSpec":
        quant.check_dtype(dtype)
        return LaunchSpec(function, tuple(_targ(a) for a in template_args), dtype, bool(takes_M))

    @property
    def symbol(self) -> str:
        h = hashlib.sha1(repr((self.function, self.template_args, self.dtype, self.takes_M)).encode())
        return "emu_entry_" + h.hexdigest()[:20]

    def cxx(self) -> str:
        t = CXX_TYPE[self.dtype]
        targs = ", ".join(self.template_args)
        m_arg = "\n      a->M," if self.takes_M else ""
        return f"""
static void {self.symbol}_body(void* u, unsigned gx, unsigned gy, unsigned gz,
                               const emu::Lane* L) {{
  auto* a = (emu_args*)u;
  typedef {t} T;
  const uint32_t* w = (const uint32_t*)a->dev[0] + (long long)gz * a->w_bstride;
  const T* scales = (const T*)a->dev[1] + (long long)gz * a->s_bstride;
  const T* biases = (const T*)a->dev[2] + (long long)gz * a->b_bstride;
  const T* x = (const T*)a->dev[3] + (long long)gz * a->x_bstride;
  T* y = (T*)a->dev[4] + (long long)gz * a->y_bstride;
  uint3 tid(gx, gy, gz);
  {self.function}<{targs}>(
      w, scales, biases, x, y,
      a->K,
      a->N,{m_arg}
      tid,
      L->simd_gid,
      L->simd_lid);
}}
""" + export_entry(self.symbol, "biases")


_ENTRY_PRELUDE = """
#line 1 "<emulator entry points>"
namespace {
struct emu_args {
  void* dev[5];
  int K, N, M;
  long long w_bstride, s_bstride, b_bstride, x_bstride, y_bstride;
};
}
"""


class Emulator:
    """Runs MLX's Metal quantized mat-vec kernels from ``header`` on the CPU.

    ``header``: path to a quantized.h (stock or patched) or its source text.
    ``contract``: False (default) builds with -ffp-contract=off; True with
    -ffp-contract=fast -mfma (EmulatorError when the CPU lacks FMA).
    ``extra_functions``: more top-level names to extract (their dependencies
    come along). ``simd_sum_order``: "tree" (default), "sequential",
    "butterfly" or "reverse" (see docs/emulator.md). ``functions`` replaces
    the default set of required names (for headers that are not quantized.h,
    e.g. test fixtures). ``opt``: optimisation flag(s) for the host compiler.
    ``timeout_s``: a launch running longer (a lane in an endless loop) is
    stopped and reported as EmulatorError (None: no limit; a per-thread
    SIGALRM timer, Python's own SIGALRM handler is restored afterwards).
    """

    default_functions: tuple[str, ...] = DEFAULT_FUNCTIONS
    optional_functions: tuple[str, ...] = OPTIONAL_FUNCTIONS

    def __init__(
        self,
        header: Path | str,
        *,
        contract: bool = False,
        extra_functions: Sequence[str] = (),
        cache_dir: Path | None = None,
        simd_sum_order: str = "tree",
        opt: str = "-O1",
        functions: Sequence[str] | None = None,
        timeout_s: float | None = 600.0,
    ) -> None:
        self.text, self.label = header_text(header)
        # #line markers name the header relative to its checkout, so clones in
        # different places share compiled libraries; messages get the full path
        self.line_label = stable_label(self.label)
        self.header = header if isinstance(header, Path) else None
        self.contract = contract
        self.cache_dir = Path(cache_dir) if cache_dir is not None else build.default_cache_dir()
        if simd_sum_order not in SIMD_SUM_ORDERS:
            raise EmulatorError(
                f"simd_sum_order {simd_sum_order!r} is not one of {', '.join(SIMD_SUM_ORDERS)}"
            )
        self.simd_sum_order = simd_sum_order
        self.timeout_s = timeout_s
        base = self.default_functions if functions is None else tuple(functions)
        self.functions = tuple(dict.fromkeys([*base, *extra_functions]))
        self.extraction = self._extract()
        self.flags = build.flags(
            contract=contract, opt=opt,
            defines={"EMU_SIMD_SUM_ORDER": str(SIMD_SUM_ORDERS[simd_sum_order])},
        )
        self._entries: dict[str, ctypes._CFuncPtr] = {}
        self._libs: list[ctypes.CDLL] = []

    # ---- building ------------------------------------------------------------
    def _extract(self) -> Extraction:
        return extract(self.text, self.functions, label=self.line_label,
                       optional=self.optional_functions)

    def source(self, specs: Iterable[LaunchSpec]) -> str:
        parts = ['#include "metal_shim.h"\n', self.extraction.source, _ENTRY_PRELUDE]
        for s in specs:
            parts.append(s.cxx())
        return "".join(parts)

    def prepare(self, specs: Iterable[LaunchSpec], *, jobs: int = 2) -> None:
        """Compile every spec not yet loaded, split over ``jobs`` libraries
        compiled side by side (each cached by content)."""
        todo = [s for s in dict.fromkeys(specs) if s.symbol not in self._entries]
        if not todo:
            return
        jobs = max(1, min(jobs, len(todo)))
        chunks = [todo[i::jobs] for i in range(jobs)]
        pend = [build.Pending(self.source(c), self.flags, self.cache_dir) for c in chunks]
        errors = []
        for p, c in zip(pend, chunks):
            try:
                so = p.wait()
            except EmulatorError as e:
                errors.append(EmulatorError(self._relabel(e.message), hint=e.hint))
                continue
            self._load(so, c)
        if errors:
            raise errors[0]

    def _relabel(self, message: str) -> str:
        return relabel(message, self.line_label, self.label)

    def _load(self, so: Path, specs: Sequence[LaunchSpec]) -> None:
        lib = ctypes.CDLL(str(so))
        self._libs.append(lib)
        for s in specs:
            fn = getattr(lib, s.symbol)
            fn.restype = ctypes.c_int
            fn.argtypes = [
                ctypes.POINTER(ctypes.c_void_p), ctypes.POINTER(ctypes.c_longlong),
                ctypes.c_int, ctypes.c_int, ctypes.c_int,
                ctypes.c_int, ctypes.c_int, ctypes.c_int,
                ctypes.c_int, ctypes.c_int, ctypes.c_int,
                ctypes.POINTER(ctypes.c_longlong), ctypes.c_char_p, ctypes.c_int,
                ctypes.c_longlong,
            ]
            self._entries[s.symbol] = fn

    def _entry(self, spec: LaunchSpec):
        if spec.symbol not in self._entries:
            self.prepare([spec], jobs=1)
        return self._entries[spec.symbol]

    # ---- running -------------------------------------------------------------
    def launch(
        self,
        function: str,
        template_args: Sequence,
        *,
        w: np.ndarray,
        scales: np.ndarray,
        biases: np.ndarray,
        x: np.ndarray,
        M: int,
        N: int,
        K: int,
        grid: tuple[int, int, int],
        threadgroup: tuple[int, int, int] = (32, 2, 1),
        takes_M: bool,
        dtype: str,
    ) -> np.ndarray:
        """Run ``function<template_args>(w, scales, biases, x, y, K, N, [M,] tid,
        simd_gid, simd_lid)`` over ``grid`` threadgroups of ``threadgroup``
        threads. x is (B, M, K) or (M, K); w (N, K*bits/32) shared by the batch
        or (B, N, ...); tid.z selects the batch (offsets as adjust_matrix_offsets
        computes them for contiguous arrays). Returns y bit patterns (B, M, N),
        pre-filled with all-ones (a NaN) so unwritten outputs show."""
        spec = LaunchSpec.make(function, template_args, dtype, takes_M)
        fn = self._entry(spec)
        xb = batched_x_bits(x, dtype, M, K)
        B = xb.shape[0]
        wb = np.ascontiguousarray(w, dtype=np.uint32)
        sb = quant.to_bits(scales, dtype)
        bb = quant.to_bits(biases, dtype)
        if wb.ndim not in (2, 3) or wb.shape[-2] != N:
            raise EmulatorError(f"w has shape {wb.shape}, expected (N={N}, K*bits/32) or (B, N, ...)")
        if sb.shape != bb.shape or sb.shape[-2] != N:
            raise EmulatorError(f"scales {sb.shape} / biases {bb.shape} do not match N={N}")
        if wb.ndim == 3 and wb.shape[0] != B:
            raise EmulatorError(f"w has batch {wb.shape[0]}, x has {B}")
        y = np.full((B, M, N), np.iinfo(quant.bits_dtype(dtype)).max, dtype=quant.bits_dtype(dtype))
        if grid[2] > B:
            raise EmulatorError(f"grid z={grid[2]} exceeds the batch {B}")
        self._call(fn, spec, [wb, sb, bb, xb, y], K=K, N=N, M=M, grid=grid,
                   threadgroup=threadgroup)
        return y

    def _call(self, fn, spec, arrays: list, *, K: int, N: int, M: int,
              grid: tuple[int, int, int], threadgroup: tuple[int, int, int]) -> None:
        """Call an exported entry (see :func:`export_entry`) on the five host
        buffers w, scales, biases or global_scale, x, y (x is (B, M, K), y
        (B, M, N)); a 3-d array among the first three is per batch."""
        host = (ctypes.c_void_p * 5)(*[a.ctypes.data for a in arrays])
        nbytes = (ctypes.c_longlong * 5)(*[a.nbytes for a in arrays])
        bstr = (ctypes.c_longlong * 5)(
            *[a[0].size if a.ndim == 3 else 0 for a in arrays[:3]], M * K, M * N)
        err = ctypes.create_string_buffer(ERRLEN)
        with _LAUNCH_LOCK:
            rc = fn(host, nbytes, K, N, M, *grid, *threadgroup, bstr, err, ERRLEN,
                    int(self.timeout_s * 1000) if self.timeout_s else 0)
        if rc != 0:
            msg = self._relabel(err.value.decode(errors="replace"))
            raise EmulatorError(f"{spec.function}<{', '.join(spec.template_args)}>: {msg}")

    def qmv_spec(
        self, kind: str, *, M: int, N: int, K: int, bits: int, group_size: int, dtype: str,
        vecs_per_tg: int | None = None, fast: bool | None = None, B: int = 1,
    ) -> tuple[LaunchSpec, tuple[int, int, int]]:
        """The (instantiation, grid) the dispatch in quantized.cpp uses for ``kind``."""
        t = CXX_TYPE[quant.check_dtype(dtype)]
        if kind not in KINDS:
            raise EmulatorError(f"kind {kind!r} is not one of {', '.join(KINDS)}")
        if kind == "qmv_m1":
            kind = "qmv_fast" if quant.m1_uses_fast(N, K, bits) else "qmv"
        if kind == "qmv_fast":
            if not quant.m1_uses_fast(N, K, bits):
                raise EmulatorError(
                    f"qmv_fast needs N % 8 == 0 and K % {quant.qmv_fast_k_alignment(bits)} == 0 "
                    f"(N={N}, K={K}, bits={bits}); use kind='qmv' or 'qmv_m1'"
                )
            return (LaunchSpec.make("qmv_fast_impl", (t, group_size, bits), dtype, False),
                    (M, (N + 7) // 8, B))
        if kind == "qmv":
            return (LaunchSpec.make("qmv_impl", (t, group_size, bits), dtype, False),
                    (M, (N + 7) // 8, B))
        v = vecs_per_tg if vecs_per_tg is not None else quant.wide_vecs_per_tg(M)
        if kind == "qmv_wide":
            # quantized.cpp qmv_wide(): affine k_lanes = 8, rows_per_tg = (32/8)*2 = 8
            return (LaunchSpec.make("qmv_wide_impl", (t, group_size, bits, v, 8), dtype, True),
                    ((M + v - 1) // v, (N + 7) // 8, B))
        f = fast if fast is not None else quant.m1_uses_fast(N, K, bits)
        return (LaunchSpec.make("qmv_streamed_impl", (t, group_size, bits, v, bool(f)), dtype, True),
                ((M + v - 1) // v, (N + 7) // 8, B))

    def qmv(
        self,
        kind: str,
        *,
        w: np.ndarray,
        scales: np.ndarray,
        biases: np.ndarray,
        x: np.ndarray,
        bits: int,
        group_size: int,
        dtype: str,
        vecs_per_tg: int | None = None,
        fast: bool | None = None,
    ) -> np.ndarray:
        """Run a quantized mat-vec the way dispatch_qmv launches it; returns the
        output bit patterns, shape (B, M, N). See README.md for ``kind``."""
        xs = np.shape(x)
        if len(xs) not in (2, 3):
            raise EmulatorError(f"x must be (M, K) or (B, M, K), got shape {xs}")
        M, K = xs[-2], xs[-1]
        B = xs[0] if len(xs) == 3 else 1
        N = np.shape(w)[-2]
        if K % group_size:
            raise EmulatorError(f"K={K} is not a multiple of group_size={group_size}")
        if np.shape(w)[-1] * 32 != K * bits:
            raise EmulatorError(f"w has {np.shape(w)[-1]} words per row; K={K} at {bits} bits needs {K * bits // 32}")
        spec, grid = self.qmv_spec(kind, M=M, N=N, K=K, bits=bits, group_size=group_size,
                                   dtype=dtype, vecs_per_tg=vecs_per_tg, fast=fast, B=B)
        return self.launch(spec.function, spec.template_args, w=w, scales=scales, biases=biases,
                           x=x, M=M, N=N, K=K, grid=grid, takes_M=spec.takes_M, dtype=dtype)

    def prepare_qmv(self, configs: Iterable[dict], *, jobs: int = 2) -> None:
        """Compile, in one go, the instantiations that qmv(**config) will need;
        each config holds kind, M, N, K, bits, group_size, dtype (and optional
        vecs_per_tg, fast)."""
        self.prepare([self.qmv_spec(**c)[0] for c in configs], jobs=jobs)

    def typecheck(self, instantiations=None) -> None:
        from overlay_tool.emulator.typecheck import typecheck

        typecheck(self.text, instantiations, label=self.label,
                  extra_functions=self.functions)
