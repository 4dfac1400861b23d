"""Count the weight bytes the fp quantized mat-vec kernels read, on the emulator.

The counting build of tests/kernel/traffic.py (clang -O0 with
``-fsanitize-coverage=trace-loads``: every load of the kernel source calls a
counter with its address and width) applied to the fp emulator
(``overlay_tool.emulator.fp.FpEmulator``): buffer 0 is the packed weights,
1 the uint8 scales, 2 the global scale. Per threadgroup the counter keeps the
distinct bytes touched: the traffic of a bandwidth-bound GPU whose
threadgroups share nothing.

Run ``python -m tests.kernel.fp_traffic [patched fp_quantized.h]`` for the
table in docs/benchmarks.md.
"""

from __future__ import annotations

import ctypes
import sys
from pathlib import Path

import numpy as np

from overlay_tool.emulator import fpquant, wide_vecs_per_tg
from overlay_tool.emulator.fp import FpEmulator

from .traffic import CountingEmulator, Counts


class CountingFpEmulator(FpEmulator):
    """An FpEmulator whose kernels count their loads (clang -O0, trace-loads)."""

    prepare = CountingEmulator.prepare

    def __init__(self, header, **kw):
        super().__init__(header, **kw)
        self._counter_of: dict[str, ctypes.CDLL] = {}

    def count(self, kind: str, *, mode: str, w, scales, x, dtype: str, global_scale=None,
              vecs_per_tg=None, results_per_simdgroup: int = 4) -> Counts:
        xs = np.shape(x)
        spec, _, _ = self.qmv_spec(
            kind, mode=mode, M=xs[-2], N=np.shape(w)[-2], K=xs[-1], dtype=dtype,
            global_scale=global_scale is not None, vecs_per_tg=vecs_per_tg,
            results_per_simdgroup=results_per_simdgroup, B=xs[0] if len(xs) == 3 else 1,
        )
        self.prepare([spec])
        lib = self._counter_of[spec.symbol]
        lib.emu_count_reset()
        self.qmv(kind, mode=mode, w=w, scales=scales, x=x, dtype=dtype, global_scale=global_scale,
                 vecs_per_tg=vecs_per_tg, results_per_simdgroup=results_per_simdgroup)
        out = (ctypes.c_longlong * 9)()
        lib.emu_count_get(out)
        # sb_*: the scales plus the global scale (buffer 2)
        return Counts(out[0], out[1], out[2], out[4] + out[7], out[5] + out[8])


def case(mode: str, dtype: str, K: int, N: int, M: int, global_scale: bool = False) -> dict:
    rng = np.random.default_rng(0)
    p = fpquant.random_problem(rng, mode=mode, M=M, N=N, K=K, dtype=dtype, global_scale=global_scale)
    return dict(mode=mode, dtype=dtype, **p)


VARIANTS = (("mxfp4", False), ("nvfp4", False), ("nvfp4", True), ("mxfp8", False))


def table(header: Path, *, K=512, N=64, dtype="float16", Ms=range(1, 17)) -> str:
    emu = CountingFpEmulator(header)
    head = "| M | " + " | ".join(
        f"{m}{' +gs' if g else ''}: M = 1 kernel / stock / streamed" for m, g in VARIANTS) + " |"
    rows = [head, "|---|" + "---|" * len(VARIANTS)]
    for m in Ms:
        v = wide_vecs_per_tg(m)
        cells = []
        for mode, g in VARIANTS:
            kw = case(mode, dtype, K, N, m, g)
            matrix = N * K * fpquant.mode_of(mode).bits // 8
            q = emu.count("qmv_m1", **kw).weight_bytes / matrix
            st = emu.count("qmv_streamed", **kw).weight_bytes / matrix
            if m == 1:
                stock = q
            elif g:  # dispatch_qmv at the pin: a global scale keeps fp_qmv per vector
                stock = q
            else:
                stock = emu.count("qmv_wide", **kw).weight_bytes / matrix
            cells.append(f"{q:.2f} / {stock:.2f} / {st:.2f} ({v})")
        rows.append(f"| {m} | " + " | ".join(cells) + " |")
    return "\n".join(rows)


if __name__ == "__main__":
    print(table(Path(sys.argv[1])))
