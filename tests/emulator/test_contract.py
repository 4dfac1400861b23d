"""Contraction sensitivity: the stock kernels built with contraction off (the
default, -ffp-contract=off) and on (-ffp-contract=fast with FMA); reports
which outputs change. The emulator cannot say what Apple's compiler fuses:
this measures how much the bits depend on it."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from overlay_tool.emulator import Emulator, build
from overlay_tool.emulator.testing import random_problem, with_streamed_loop_fixture

BITS = (2, 3, 4, 5, 6, 8)
DTYPES = ("float16", "bfloat16", "float32")
GS = 64
SHAPES = {"qmv_fast": (16, 512), "qmv": (13, 384), "qmv_wide": (16, 512)}
M = 4


@pytest.fixture(scope="module")
def fused(stock_header):
    if not build.has_fma():
        pytest.skip("this CPU has no FMA: contraction cannot be modelled here (docs/emulator.md)")
    return Emulator(stock_header, contract=True)


def test_contraction_on_vs_off_report(emu, fused, report):
    cfgs = [dict(kind=k, M=M, N=n, K=kk, bits=b, group_size=GS, dtype=dt)
            for k, (n, kk) in SHAPES.items() for b in BITS for dt in DTYPES]
    emu.prepare_qmv(cfgs)
    fused.prepare_qmv(cfgs)
    rng = np.random.default_rng(30)
    changed_any = 0
    for kind, dt in itertools.product(SHAPES, DTYPES):
        n, k = SHAPES[kind]
        parts = []
        for bits in BITS:
            p = random_problem(rng, M=M, N=n, K=k, bits=bits, group_size=GS, dtype=dt)
            a = emu.qmv(kind, **p, bits=bits, group_size=GS, dtype=dt)
            b = fused.qmv(kind, **p, bits=bits, group_size=GS, dtype=dt)
            ch = a != b
            changed_any += int(ch.sum())
            idx = np.argwhere(ch[0])
            first = f" e.g. (m,n)={tuple(int(i) for i in idx[0])}" if len(idx) else ""
            parts.append(f"{bits}b {ch.mean():.0%}{first}")
        report.append(f"contraction on vs off, {kind} {dt} (M={M}, N={n}, K={k}): " + ", ".join(parts))
    # the switch works: float32 outputs of the stock kernels do change
    assert changed_any > 0


def test_streamed_fixture_parity_survives_contraction(stock_text):
    """With contraction on, an order-preserving kernel that inlines the same
    M = 1 code is still bit-identical here; Apple's compiler may decide
    otherwise per call site, which only the GPU run can settle."""
    if not build.has_fma():
        pytest.skip("no FMA on this CPU")
    e = Emulator(with_streamed_loop_fixture(stock_text), contract=True)
    rng = np.random.default_rng(31)
    for dt, bits in itertools.product(("float16", "float32"), (4, 6)):
        p = random_problem(rng, M=5, N=16, K=512, bits=bits, group_size=GS, dtype=dt)
        np.testing.assert_array_equal(
            e.qmv("qmv_m1", **p, bits=bits, group_size=GS, dtype=dt),
            e.qmv("qmv_streamed", **p, bits=bits, group_size=GS, dtype=dt),
        )
