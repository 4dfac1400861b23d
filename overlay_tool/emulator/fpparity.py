"""Order parity for the fp modes: every row of a multi-row fp kernel (a
patch's fp_qmv_streamed, or stock fp_qmv_wide as the negative control)
against the same row computed by the kernel dispatch_qmv runs at M = 1,
bitwise."""

from __future__ import annotations

import itertools
from typing import Iterable, Sequence

import numpy as np

from overlay_tool.emulator import fpquant, quant
from overlay_tool.emulator.fp import FpEmulator
from overlay_tool.emulator.parity import ParityResult

# (N, K): aligned (fp_qmv_fast at M = 1 for both bit widths), ragged K and N
# (fp_qmv), N < 8. K avoids 64 and 128 (those go to fp_qmv_quad at every M).
SHAPES: dict[str, tuple[int, int]] = {
    "aligned": (16, 512),
    "ragged": (13, 416),
    "narrow": (5, 416),
}
# (mode, global scale): every fp mode, nvfp4 with and without its global scale
VARIANTS: tuple[tuple[str, bool], ...] = (
    ("mxfp4", False), ("nvfp4", False), ("nvfp4", True), ("mxfp8", False),
)


def sweep(
    emu: FpEmulator,
    kind: str = "qmv_streamed",
    *,
    variants: Sequence[tuple[str, bool]] = VARIANTS,
    dtypes: Sequence[str] = quant.DTYPES,
    ms: Iterable[int] = range(2, 8),
    shapes: dict[str, tuple[int, int]] = SHAPES,
    seed: int = 0,
    cancel: bool = True,
    results_per_simdgroup: int = 4,
) -> ParityResult:
    """Compare ``kind`` (qmv_streamed or qmv_wide) with qmv_m1, row by row.
    Variants with a global scale are skipped for qmv_wide (the dispatch never
    runs it with one)."""
    ms = list(ms)
    mmax = max(ms)
    rps = dict(results_per_simdgroup=results_per_simdgroup)
    cases = [(mode, g, dt, name, nk) for (mode, g), dt, (name, nk)
             in itertools.product(variants, dtypes, shapes.items())
             if not (g and kind == "qmv_wide") and nk[1] % fpquant.mode_of(mode).group_size == 0]
    cfgs = []
    for mode, g, dt, _, (n, k) in cases:
        base = dict(mode=mode, N=n, K=k, dtype=dt, global_scale=g, **rps)
        cfgs.append(dict(kind="qmv_m1", M=mmax, **base))
        cfgs += [dict(kind=kind, M=m, **base) for m in ms]
    emu.prepare_qmv(cfgs)
    res = ParityResult(kind)
    for mode, g, dt, name, (n, k) in cases:
        rng = np.random.default_rng([seed, list(fpquant.MODES).index(mode), g, n, k,
                                     quant.DTYPES.index(dt)])
        p = fpquant.random_problem(rng, mode=mode, M=mmax, N=n, K=k, dtype=dt,
                                   global_scale=g, cancel=cancel)
        kw = dict(w=p["w"], scales=p["scales"], global_scale=p["global_scale"],
                  mode=mode, dtype=dt, **rps)
        y1 = emu.qmv("qmv_m1", x=p["x"], **kw)
        for m in ms:
            ym = emu.qmv(kind, x=p["x"][:m], **kw)
            d = int((ym != y1[:, :m]).sum())
            res.compared += ym.size
            res.differing += d
            if d:
                gs = " global_scale" if g else ""
                res.mismatches.append(f"{kind} {mode}{gs} {dt} {name} N={n} K={k} M={m}: "
                                      f"{d} of {ym.size} outputs differ from the M = 1 kernel")
    return res
