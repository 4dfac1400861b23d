"""Order properties of the fp emulator: the negative control (stock
fp_qmv_wide differs bitwise from the M = 1 fp kernel), an order-preserving
fp_qmv_streamed_impl (fixture) is bit-identical through the "qmv_streamed"
launch, qmv_m1 equals literal one-row launches, batches."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from overlay_tool.emulator import fpparity, fpquant
from overlay_tool.emulator.fp import FpEmulator, decoder_sources
from overlay_tool.emulator.testing import with_fp_streamed_loop_fixture

DTYPES = ("float16", "bfloat16", "float32")
MODES = tuple(fpquant.MODES)


@pytest.mark.slow
def test_negative_control_fp_qmv_wide_differs_from_m1(fp_emu, report):
    """Stock fp_qmv_wide at M = 2..5 vs the M = 1 kernel, every fp mode and
    dtype, aligned/ragged/narrow shapes, on normal and on cancelling data."""
    shares = {}
    for dt, mode, cancel in itertools.product(DTYPES, MODES, (False, True)):
        r = fpparity.sweep(fp_emu, "qmv_wide", variants=((mode, False),), dtypes=(dt,),
                           ms=range(2, 6), cancel=cancel, seed=7)
        assert r.compared > 0
        shares[dt, mode, cancel] = r.share
    for dt, cancel in itertools.product(DTYPES, (False, True)):
        report.append(
            f"fp negative control (fp_qmv_wide vs M=1 kernel, M=2..5, "
            f"{'cancelling' if cancel else 'normal'} data) {dt}: "
            + ", ".join(f"{m} {shares[dt, m, cancel]:.1%}" for m in MODES))
    for dt, mode in itertools.product(DTYPES, MODES):
        if dt == "float32":
            assert shares[dt, mode, False] > 0.3, (dt, mode, shares)
        assert shares[dt, mode, True] > 0, (dt, mode, shares)


@pytest.fixture(scope="module")
def loop_emu(fp_header, fp_emu) -> FpEmulator:
    text = fp_header.read_text()
    return FpEmulator(with_fp_streamed_loop_fixture(text),
                      decoders=decoder_sources(text, fp_header))


@pytest.mark.slow
@pytest.mark.parametrize("rps,shapes", [
    (4, fpparity.SHAPES),
    (2, {"aligned": fpparity.SHAPES["aligned"]}),  # results_per_simdgroup is qmv_fast's
])
def test_order_preserving_streamed_fixture_is_bit_identical(loop_emu, rps, shapes, report):
    """The harness passes a kernel that keeps the M = 1 order: every mode
    (nvfp4 with its global scale too), dtype, shape, M = 2..7, cancelling data."""
    r = fpparity.sweep(loop_emu, "qmv_streamed", ms=range(2, 8), shapes=shapes,
                       results_per_simdgroup=rps)
    assert r.differing == 0, r.mismatches[:5]
    report.append(f"fp streamed loop fixture (rps={rps}): {r.compared} outputs, 0 differ")


def test_m1_equals_one_row_launches(fp_emu):
    rng = np.random.default_rng(8)
    for mode, g, (n, k) in [("mxfp4", False, (16, 512)), ("nvfp4", True, (13, 416)),
                            ("mxfp8", False, (64, 128)), ("nvfp4", False, (5, 416))]:
        p = fpquant.random_problem(rng, mode=mode, M=3, N=n, K=k, dtype="float16", global_scale=g)
        kw = dict(w=p["w"], scales=p["scales"], global_scale=p["global_scale"], mode=mode,
                  dtype="float16")
        y = fp_emu.qmv("qmv_m1", x=p["x"], **kw)
        for m in range(3):
            assert np.array_equal(y[:, m], fp_emu.qmv("qmv_m1", x=p["x"][m:m + 1], **kw)[:, 0])


def test_batches(fp_emu):
    """B > 1 (x, y and per-batch w/scales offset by tid.z) equals one launch per batch."""
    rng = np.random.default_rng(9)
    ps = [fpquant.random_problem(rng, mode="nvfp4", M=3, N=16, K=512, dtype="bfloat16",
                                 global_scale=True) for _ in range(2)]
    g = ps[0]["global_scale"]
    w = np.stack([p["w"] for p in ps])
    s = np.stack([p["scales"] for p in ps])
    x = np.stack([p["x"] for p in ps])
    y = fp_emu.qmv("qmv_m1", mode="nvfp4", w=w, scales=s, x=x, global_scale=g, dtype="bfloat16")
    for b, p in enumerate(ps):
        one = fp_emu.qmv("qmv_m1", mode="nvfp4", w=p["w"], scales=p["scales"], x=p["x"],
                         global_scale=g, dtype="bfloat16")
        assert np.array_equal(y[b], one[0])


@pytest.mark.slow
@pytest.mark.parametrize("options", [dict(contract=True), dict(simd_sum_order="sequential")])
def test_streamed_fixture_under_contraction_and_other_sum_order(fp_header, fp_emu, options, report):
    """The fixture stays bit-identical with contraction on (float32: the dtype
    where order and fusion show) and under another simd_sum order, while
    contraction does change the M = 1 kernel's own float32 bits."""
    text = fp_header.read_text()
    emu = FpEmulator(with_fp_streamed_loop_fixture(text),
                     decoders=decoder_sources(text, fp_header), **options)
    shapes = {k: fpparity.SHAPES[k] for k in ("aligned", "ragged")}
    r = fpparity.sweep(emu, "qmv_streamed", dtypes=("float32",), ms=range(2, 6), shapes=shapes)
    assert r.differing == 0, r.mismatches[:5]
    line = f"fp streamed loop fixture, {options}: {r.compared} float32 outputs, 0 differ"
    if options.get("contract"):
        p = fpquant.random_problem(np.random.default_rng(11), mode="mxfp8", M=4, N=16, K=512,
                                   dtype="float32")
        on, off = (e.qmv("qmv_m1", mode="mxfp8", dtype="float32", **p) for e in (emu, fp_emu))
        share = float((on != off).mean())
        assert share > 0.1, share
        line += f"; contraction changes {share:.0%} of fp_qmv_fast mxfp8 float32 outputs"
    report.append(line)
