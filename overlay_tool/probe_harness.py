"""The probe's CUDA harness substrate (``cuda-harness``): the decoder in numpy
(as on the emulator), every quantized product run on an NVIDIA GPU by MLX's
own CUDA qmv kernels, compiled from the pinned and the patched qmv.cu (with
the streamed kernels' header, qmv_streamed.cuh) into
``libqmv_probe.so`` (``bench/cuda_qmv.py build``; entry point
``cuda/qmv_probe.cu``). No CUDA build of all of MLX is needed.

Arms:

* ``patched``: every product, M = 1 included, takes what the patched
  ``mlx::core::qmv`` launches (the streamed kernel; the overlay dispatch sends
  M * B up to 16 there): must pass.
* ``control``: M >= 2 products dequantize in float32 and then multiply, the
  probe's negative control on this substrate: must diverge.

The stock dispatch on this GPU (``qmm_sm80`` for M * B >= 8) is the ``cuda``
substrate run with a stock mlx-cuda wheel (``adjust_for_stock_wheel``).
"""

from __future__ import annotations

import ctypes
import os
from pathlib import Path

import numpy as np

from overlay_tool.probe_model import ProbeConfig

ENV = "MLX_OVERLAY_CUDA_HARNESS"
STOCK, PATCHED = 0, 1
_DTYPES = {"bfloat16": 0, "float16": 1}


class HarnessUnavailable(Exception):
    """The harness cannot run here (reason in the message)."""


def config_problem(cfg: ProbeConfig) -> str | None:
    """The harness instantiates MLX's affine kernels at group 64, 4 and 8 bits,
    bfloat16 and float16 (cuda/qmv_entry.cu)."""
    if cfg.dtype not in _DTYPES:
        return f"dtype {cfg.dtype} (the harness has bfloat16 and float16)"
    if cfg.bits not in (4, 8) or cfg.group_size != 64:
        return f"bits {cfg.bits}, group size {cfg.group_size} (the harness has 4/8 bits, group 64)"
    return None


class Harness:
    """ctypes binding of ``qmv_probe`` in libqmv_probe.so."""

    def __init__(self, library: str | os.PathLike | None) -> None:
        path = library or os.environ.get(ENV)
        if not path:
            raise HarnessUnavailable(
                f"no harness library: pass --cuda-harness or set {ENV} to a libqmv_probe.so "
                "built by bench/cuda_qmv.py build (needs nvcc and an sm_90 GPU)")
        if not Path(path).is_file():
            raise HarnessUnavailable(f"{path}: no such harness library")
        try:
            lib = ctypes.CDLL(str(path))
        except OSError as e:
            raise HarnessUnavailable(f"{path}: cannot load ({e})")
        fn = lib.qmv_probe
        fn.restype = ctypes.c_int
        fn.argtypes = [ctypes.c_int] * 4 + [ctypes.c_void_p] * 5 + [ctypes.c_int] * 3
        err = lib.qmv_probe_error
        err.restype = ctypes.c_char_p
        err.argtypes = [ctypes.c_int]
        last = lib.qmv_probe_last_streamed
        last.restype = ctypes.c_int
        self.path, self._fn, self._err, self._last = str(path), fn, err, last
        # (M, K, N) of the patched products -> whether the streamed kernel ran
        self.streamed: dict[tuple[int, int, int], bool] = {}

    def product(self, impl: int, cfg: ProbeConfig, x, wq, scales, biases) -> np.ndarray:
        """(M, N) result bits of x (M, K) times the quantized (N, K) weights."""
        arrays = [np.ascontiguousarray(a).view(np.uint16 if a.itemsize == 2 else a.dtype)
                  for a in (x, wq, scales, biases)]
        m, k = arrays[0].shape
        n = arrays[1].shape[0]
        out = np.empty((m, n), dtype=np.uint16)
        ptr = [a.ctypes.data for a in arrays]
        rc = self._fn(impl, _DTYPES[cfg.dtype], cfg.bits, cfg.group_size, *ptr,
                      out.ctypes.data, m, n, k)
        if rc != 0:
            text = self._err(rc).decode(errors="replace")
            raise RuntimeError(f"{self.path}: qmv_probe(impl={impl}, M={m}, N={n}, K={k}): {text} ({rc})")
        if impl == PATCHED:
            self.streamed[(m, k, n)] = bool(self._last())
        return out

    def coverage(self) -> dict:
        """Which (K, N) products ran the streamed kernel at which M, so that a
        pass is not mistaken for one where everything fell back to stock."""
        out: dict = {}
        for (m, k, n), streamed in sorted(self.streamed.items()):
            out.setdefault(f"K={k} N={n}", {"streamed": [], "fallback": []})[
                "streamed" if streamed else "fallback"].append(m)
        return out
