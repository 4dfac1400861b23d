"""Order parity on the emulator: every row of a multi-row kernel (the streamed
one, or stock qmv_wide as a negative control) against the same row computed by
the kernel the M = 1 dispatch picks, bitwise."""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Iterable, Sequence

import numpy as np

from overlay_tool.emulator import quant
from overlay_tool.emulator.core import Emulator
from overlay_tool.emulator.testing import random_problem

# (N, K): aligned (qmv_fast at M = 1 for every bits), ragged K and N (qmv), N < 8.
SHAPES: dict[str, tuple[int, int]] = {
    "aligned": (16, 512),
    "ragged": (13, 384),
    "narrow": (5, 384),
}


@dataclass
class ParityResult:
    kind: str
    compared: int = 0  # outputs compared
    differing: int = 0
    mismatches: list[str] = field(default_factory=list)  # one line per differing case

    @property
    def share(self) -> float:
        return self.differing / self.compared if self.compared else 0.0


def sweep(
    emu: Emulator,
    kind: str = "qmv_streamed",
    *,
    dtypes: Sequence[str] = quant.DTYPES,
    bits: Sequence[int] = quant.BITS,
    group_sizes: Sequence[int] = (64,),
    ms: Iterable[int] = range(2, 8),
    shapes: dict[str, tuple[int, int]] = SHAPES,
    seed: int = 0,
    cancel: bool = True,
) -> ParityResult:
    """Compare ``kind`` (qmv_streamed or qmv_wide) with qmv_m1, row by row."""
    ms = list(ms)
    mmax = max(ms)
    cfgs = []
    for dt, b, gs, (n, k) in itertools.product(dtypes, bits, group_sizes, shapes.values()):
        if k % gs:
            continue
        cfgs.append(dict(kind="qmv_m1", M=mmax, N=n, K=k, bits=b, group_size=gs, dtype=dt))
        cfgs += [dict(kind=kind, M=m, N=n, K=k, bits=b, group_size=gs, dtype=dt) for m in ms]
    emu.prepare_qmv(cfgs)
    res = ParityResult(kind)
    for dt, b, gs, (name, (n, k)) in itertools.product(dtypes, bits, group_sizes, shapes.items()):
        if k % gs:
            continue
        rng = np.random.default_rng([seed, b, gs, n, k, quant.DTYPES.index(dt)])
        p = random_problem(rng, M=mmax, N=n, K=k, bits=b, group_size=gs, dtype=dt, cancel=cancel)
        kw = dict(w=p["w"], scales=p["scales"], biases=p["biases"], bits=b, group_size=gs, dtype=dt)
        y1 = emu.qmv("qmv_m1", x=p["x"], **kw)
        for m in ms:
            ym = emu.qmv(kind, x=p["x"][:m], **kw)
            d = int((ym != y1[:, :m]).sum())
            res.compared += ym.size
            res.differing += d
            if d:
                res.mismatches.append(f"{kind} {dt} bits={b} gs={gs} {name} N={n} K={k} M={m}: "
                                      f"{d} of {ym.size} outputs differ from the M = 1 kernel")
    return res
