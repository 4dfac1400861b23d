"""Order properties the emulator must be able to see: the negative control
(stock qmv_wide differs bitwise from the M = 1 kernel), a reordered qdot is
caught, an order-preserving streamed kernel (fixture) is bit-identical,
qmv_m1 equals literal one-row launches, batching, determinism."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from overlay_tool.emulator import Emulator
from overlay_tool.emulator.testing import random_problem, reorder_qdot, with_streamed_loop_fixture

BITS = (2, 3, 4, 5, 6, 8)
DTYPES = ("float16", "bfloat16", "float32")
GS = 64
N, K = 16, 512  # both kernels of the M = 1 dispatch see it as aligned (qmv_fast)
NR, KR = 13, 384  # ragged: the M = 1 dispatch picks qmv


@pytest.fixture(scope="module")
def wide_prepared(emu):
    cfgs = []
    for dt, bits, m in itertools.product(DTYPES, BITS, (2, 3, 4, 5)):
        for n, k in ((N, K), (NR, KR)):
            cfgs.append(dict(kind="qmv_wide", M=m, N=n, K=k, bits=bits, group_size=GS, dtype=dt))
            cfgs.append(dict(kind="qmv_m1", M=m, N=n, K=k, bits=bits, group_size=GS, dtype=dt))
    emu.prepare_qmv(cfgs)
    return emu


def test_negative_control_qmv_wide_differs_from_m1(wide_prepared, report):
    """Stock qmv_wide at M = 2..5 vs the M = 1 kernel, bitwise: the harness
    sees an order change. Share of differing outputs per dtype and bits, on
    plain normal data and on order-sensitive (cancelling) data."""
    emu = wide_prepared
    rng = np.random.default_rng(20)
    lines = []
    for dt in DTYPES:
        shares = {}
        for bits, cancel in itertools.product(BITS, (False, True)):
            diff = total = 0
            for m in (2, 3, 4, 5):
                for n, k in ((N, K), (NR, KR)):
                    p = random_problem(rng, M=m, N=n, K=k, bits=bits, group_size=GS, dtype=dt, cancel=cancel)
                    a = emu.qmv("qmv_m1", **p, bits=bits, group_size=GS, dtype=dt)
                    b = emu.qmv("qmv_wide", **p, bits=bits, group_size=GS, dtype=dt)
                    diff += int((a != b).sum())
                    total += a.size
            shares[bits, cancel] = diff / total
        for cancel in (False, True):
            lines.append(
                f"negative control (qmv_wide vs M=1 kernel, M=2..5, {'cancelling' if cancel else 'normal'} data) {dt}: "
                + ", ".join(f"{b}b {shares[b, cancel]:.0%}" for b in BITS))
        for bits in BITS:
            best = max(shares[bits, False], shares[bits, True])
            if dt == "float32":
                assert best > 0.5, (dt, bits, shares)
            elif bits != 8:
                # load_vector's T-precision sums of x alone make qmv_wide differ
                assert shares[bits, False] > 0.3, (dt, bits, shares)
            else:
                # 8 bits: no T-precision sums; only float32 order differences,
                # visible in half/bfloat16 outputs on cancelling data
                assert shares[bits, True] > 0, (dt, bits, shares)
    report.extend(lines)


def test_reordered_qdot_is_caught(stock_text, emu, report):
    """A copy of qdot whose loops run backwards (same terms, other order):
    the M = 1 kernel built on it differs bitwise from the stock one."""
    bad = Emulator(reorder_qdot(stock_text))
    rng = np.random.default_rng(21)
    lines = []
    cfgs = [dict(kind="qmv_m1", M=3, N=N, K=K, bits=b, group_size=GS, dtype=dt)
            for dt in DTYPES for b in (2, 4, 8)]
    bad.prepare_qmv(cfgs)
    emu.prepare_qmv(cfgs)
    for dt in DTYPES:
        shares = {}
        for bits in (2, 4, 8):
            diff = total = 0
            for cancel in (False, True):
                p = random_problem(rng, M=3, N=N, K=K, bits=bits, group_size=GS, dtype=dt, cancel=cancel)
                a = emu.qmv("qmv_m1", **p, bits=bits, group_size=GS, dtype=dt)
                b = bad.qmv("qmv_m1", **p, bits=bits, group_size=GS, dtype=dt)
                diff += int((a != b).sum())
                total += a.size
            shares[bits] = diff / total
        lines.append(f"reordered qdot vs stock (M=1 kernel) {dt}: "
                     + ", ".join(f"{b}b {s:.0%}" for b, s in shares.items()))
        if dt == "float32":
            assert all(s > 0.3 for s in shares.values()), shares
        else:
            # half/bfloat16 inputs: float32 partial sums of 2/4-bit products are
            # mostly exact, so the order rarely matters there; 8-bit shows it
            assert shares[8] > 0 or dt == "bfloat16", shares
    assert any("float32" in ln for ln in lines)
    report.extend(lines)


@pytest.fixture(scope="module")
def loop_emu(stock_text):
    return Emulator(with_streamed_loop_fixture(stock_text))


@pytest.mark.parametrize("dtype", DTYPES)
def test_order_preserving_streamed_fixture_is_bit_identical(loop_emu, dtype):
    """The harness the kernel helper uses: an order-preserving 'streamed'
    kernel (fixture: loops the M = 1 code per vector) equals qmv_m1 bitwise,
    for M = 1..7 (several tiles), B = 1 and 2, aligned and ragged shapes."""
    rng = np.random.default_rng(22)
    cfgs = [dict(kind=k, M=m, N=n, K=kk, bits=bits, group_size=GS, dtype=dtype)
            for k in ("qmv_streamed", "qmv_m1") for m in (1, 2, 5, 7)
            for n, kk in ((N, K), (NR, KR)) for bits in (3, 4)]
    loop_emu.prepare_qmv(cfgs)
    for m, (n, k), bits, batch in itertools.product((1, 2, 5, 7), ((N, K), (NR, KR)), (3, 4), (None, 2)):
        p = random_problem(rng, M=m, N=n, K=k, bits=bits, group_size=GS, dtype=dtype, B=batch)
        a = loop_emu.qmv("qmv_m1", **p, bits=bits, group_size=GS, dtype=dtype)
        b = loop_emu.qmv("qmv_streamed", **p, bits=bits, group_size=GS, dtype=dtype)
        assert a.shape == b.shape == (batch or 1, m, n)
        np.testing.assert_array_equal(a, b, err_msg=f"M={m} N={n} K={k} bits={bits} B={batch}")


def test_qmv_m1_is_each_row_alone(emu):
    """qmv_m1 over M rows == M literal one-row launches (grid x = 1)."""
    rng = np.random.default_rng(23)
    for n, k, dt in ((N, K, "float32"), (NR, KR, "float16")):
        p = random_problem(rng, M=4, N=n, K=k, bits=4, group_size=GS, dtype=dt)
        allrows = emu.qmv("qmv_m1", **p, bits=4, group_size=GS, dtype=dt)
        for r in range(4):
            one = emu.qmv("qmv_m1", **{**p, "x": p["x"][r:r + 1]}, bits=4, group_size=GS, dtype=dt)
            np.testing.assert_array_equal(one[0, 0], allrows[0, r])


def test_batched_offsets_per_tid_z(emu):
    """B > 1: each batch entry equals the unbatched run on its own x (shared
    w), and a batched w (B, N, ...) uses its own weights per tid.z."""
    rng = np.random.default_rng(24)
    p = random_problem(rng, M=3, N=N, K=K, bits=4, group_size=GS, dtype="float32", B=3)
    y = emu.qmv("qmv_wide", **p, bits=4, group_size=GS, dtype="float32")
    for z in range(3):
        yz = emu.qmv("qmv_wide", **{**p, "x": p["x"][z]}, bits=4, group_size=GS, dtype="float32")
        np.testing.assert_array_equal(y[z], yz[0])
    ps = [random_problem(rng, M=2, N=N, K=K, bits=4, group_size=GS, dtype="float32") for _ in range(2)]
    stacked = {key: np.stack([q[key] for q in ps]) for key in ("w", "scales", "biases", "x")}
    y = emu.qmv("qmv_m1", **stacked, bits=4, group_size=GS, dtype="float32")
    for z in range(2):
        np.testing.assert_array_equal(y[z], emu.qmv("qmv_m1", **ps[z], bits=4, group_size=GS, dtype="float32")[0])


def test_determinism(emu, stock_header, tmp_path):
    """Same inputs, same bits: twice in one library, in a freshly built
    library (other cache, other optimisation level, the portable ucontext
    lane switch instead of the x86-64 one)."""
    rng = np.random.default_rng(25)
    p = random_problem(rng, M=5, N=N, K=K, bits=4, group_size=GS, dtype="float16")
    runs = [emu.qmv(k, **p, bits=4, group_size=GS, dtype="float16") for k in ("qmv_wide", "qmv_wide", "qmv_m1", "qmv_m1")]
    np.testing.assert_array_equal(runs[0], runs[1])
    np.testing.assert_array_equal(runs[2], runs[3])
    fresh = Emulator(stock_header, cache_dir=tmp_path, opt="-O0 -DEMU_USE_UCONTEXT")
    np.testing.assert_array_equal(fresh.qmv("qmv_wide", **p, bits=4, group_size=GS, dtype="float16"), runs[0])
    np.testing.assert_array_equal(fresh.qmv("qmv_m1", **p, bits=4, group_size=GS, dtype="float16"), runs[2])
