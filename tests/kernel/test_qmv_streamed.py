"""Proof of qmv_streamed on the Metal emulator (issue 4).

Every vector a qmv_streamed_impl tile serves must be bitwise equal to the same
vector computed alone by the kernel the M = 1 dispatch picks (qmv_fast_impl
or qmv_impl): for bits 2, 3, 4, 5, 6, 8, group sizes 32, 64, 128, float16,
bfloat16 and float32, aligned and ragged K and N and N < 8, every M from 2 to
16 with the dispatch's tiling (qmv_wide's rule, at most 5 vectors per tile),
with floating-point contraction off and on. Plus: numerics against a float64
reference, the address-space type check of the patched header, a thread-to-
device cast that the check must reject, and the negative control (stock
qmv_wide does differ, so these comparisons can fail).

What the emulator cannot settle (the Metal compiler's contraction choices,
the hardware's simd_sum order) is settled on an Apple GPU by the upstream
test test_qmv_rows_match_single_vector in python/tests/test_quantized.py.
"""

from __future__ import annotations

import numpy as np
import pytest

from overlay_tool.emulator import (
    Emulator,
    EmulatorError,
    decode,
    m1_uses_fast,
    reference,
    wide_vecs_per_tg,
)
from overlay_tool.emulator.testing import random_problem
from overlay_tool.emulator.typecheck import typecheck

BITS = (2, 3, 4, 5, 6, 8)
GROUP_SIZES = (32, 64, 128)
DTYPES = ("float16", "bfloat16", "float32")
M_MAX = 16
MS = range(2, M_MAX + 1)

# (K, N): which order and which output path each exercises at M = 1.
SHAPES = {
    "aligned": (512, 16),  # qmv_fast for every bits
    "ragged_k": (384, 16),  # qmv: partial last K block (load_vector_safe)
    "ragged_n": (512, 67),  # qmv: last output tile moved back
    "ragged_kn": (384, 67),
    "n5": (256, 5),  # qmv, N < 8: guarded rows; bits 2 has no full K block
    "n3": (384, 3),  # qmv, N < 8: second simdgroup returns at once
}

# Relative error bound against float64, in units of the output type's epsilon
# (the float32 sums plus load_vector's T-precision partial sums of x).
EPS = {"float16": 2.0**-10, "bfloat16": 2.0**-7, "float32": 2.0**-23}


def tiling(m: int) -> int:
    v = wide_vecs_per_tg(m)
    assert 1 <= v <= 5 and (m + v - 1) // v == (m + 4) // 5
    return v


def make_case(bits, group_size, dtype, K, N, *, B=1, seed=0, cancel=True):
    """Weights quantized with MLX's scheme and M_MAX input rows. ``cancel``
    (default) gives order-sensitive inputs (outputs tiny against the sum of
    |terms|, see overlay_tool.emulator.testing.random_problem): a one-ulp
    change of a float32 partial sum then also shows in half/bfloat16 outputs."""
    parts = []
    for i in range(B):
        rng = np.random.default_rng([bits, group_size, K, N, B, seed, i])
        parts.append(random_problem(rng, M=M_MAX, N=N, K=K, bits=bits, group_size=group_size,
                                    dtype=dtype, cancel=cancel))
    if B == 1:
        p = parts[0]
        return p["w"], p["scales"], p["biases"], p["x"]
    return tuple(np.stack([p[k] for p in parts]) for k in ("w", "scales", "biases", "x"))


def configs(dtype, bits, group_sizes=GROUP_SIZES):
    out = []
    for gs in group_sizes:
        for K, N in SHAPES.values():
            if K % gs:
                continue
            out.append(dict(kind="qmv_m1", M=M_MAX, N=N, K=K, bits=bits, group_size=gs, dtype=dtype))
            for m in MS:
                out.append(dict(kind="qmv_streamed", M=m, N=N, K=K, bits=bits, group_size=gs, dtype=dtype))
    return out


def check_streamed_equals_m1(emu, dtype, bits, group_sizes=GROUP_SIZES, batches=(1,)):
    """Returns a list of mismatch descriptions (empty when bitwise equal)."""
    emu.prepare_qmv(configs(dtype, bits, group_sizes))
    bad = []
    for gs in group_sizes:
        for name, (K, N) in SHAPES.items():
            if K % gs:
                continue
            for B in batches:
                wq, s, b, x = make_case(bits, gs, dtype, K, N, B=B)
                kw = dict(w=wq, scales=s, biases=b, bits=bits, group_size=gs, dtype=dtype)
                y1 = emu.qmv("qmv_m1", x=x, **kw)
                assert not (y1 == np.iinfo(y1.dtype).max).any(), "M = 1 left outputs unwritten"
                for m in MS:
                    ys = emu.qmv("qmv_streamed", x=x[..., :m, :], vecs_per_tg=tiling(m), **kw)
                    if not np.array_equal(ys, y1[:, :m]):
                        n = int((ys != y1[:, :m]).sum())
                        bad.append(f"{dtype} bits={bits} gs={gs} {name} K={K} N={N} B={B} M={m}: {n} outputs differ")
    return bad


@pytest.fixture(scope="module")
def emu(patched_header) -> Emulator:
    return Emulator(patched_header, contract=False)


@pytest.fixture(scope="module")
def emu_contract(patched_header) -> Emulator:
    return Emulator(patched_header, contract=True)


@pytest.mark.parametrize("bits", BITS)
@pytest.mark.parametrize("dtype", DTYPES)
def test_streamed_equals_m1(emu, dtype, bits):
    bad = check_streamed_equals_m1(emu, dtype, bits)
    assert not bad, "\n".join(bad)


@pytest.mark.parametrize("bits", BITS)
@pytest.mark.parametrize("dtype", DTYPES)
def test_streamed_equals_m1_contraction_on(emu_contract, dtype, bits):
    bad = check_streamed_equals_m1(emu_contract, dtype, bits)
    assert not bad, "\n".join(bad)


@pytest.mark.parametrize("dtype", DTYPES)
def test_streamed_equals_m1_batched(emu, dtype):
    # B = 3 distinct weight matrices and inputs, tid.z selecting the batch.
    bad = []
    for bits in (3, 4):
        bad += check_streamed_equals_m1(emu, dtype, bits, group_sizes=(64,), batches=(3,))
    assert not bad, "\n".join(bad)


@pytest.mark.parametrize("order", ["sequential", "butterfly", "reverse"])
def test_streamed_equals_m1_any_simd_sum_order(patched_header, order):
    # The hardware's simd_sum order is not known; equality must not depend on it.
    emu = Emulator(patched_header, simd_sum_order=order)
    bad = []
    for dtype in DTYPES:
        bad += check_streamed_equals_m1(emu, dtype, 4, group_sizes=(64,))
    assert not bad, "\n".join(bad)


def test_m1_kind_is_each_row_alone(emu):
    # qmv_m1 launches all rows at once; check it against literal M = 1 launches.
    bits, gs, dtype = 4, 64, "bfloat16"
    for K, N in (SHAPES["aligned"], SHAPES["ragged_n"]):
        wq, s, b, x = make_case(bits, gs, dtype, K, N)
        kw = dict(w=wq, scales=s, biases=b, bits=bits, group_size=gs, dtype=dtype)
        y1 = emu.qmv("qmv_m1", x=x, **kw)
        for i in range(M_MAX):
            assert np.array_equal(emu.qmv("qmv_m1", x=x[i : i + 1], **kw)[0, 0], y1[0, i])


@pytest.mark.parametrize("dtype", DTYPES)
def test_streamed_numerics(emu, dtype):
    worst = 0.0
    for bits in BITS:
        for gs in GROUP_SIZES:
            for name, (K, N) in SHAPES.items():
                if K % gs:
                    continue
                wq, s, b, x = make_case(bits, gs, dtype, K, N, cancel=False)
                y = decode(
                    emu.qmv("qmv_streamed", w=wq, scales=s, biases=b, x=x, bits=bits,
                            group_size=gs, dtype=dtype),
                    dtype,
                )
                ref = reference(wq, s, b, x, bits, gs, dtype)
                # Scale: the magnitude of the terms summed, per output.
                mag = np.einsum("bmk,nk->bmn", np.abs(decode(x, dtype))[None],
                                np.abs(reference_weights(wq, s, b, bits, gs, dtype)))
                err = np.abs(y - ref) / np.maximum(mag, 1e-30)
                worst = max(worst, float(err.max() / EPS[dtype]))
    # Measured worst (error / sum of |x_k w_k|, in eps of the output type):
    # 0.45 float16, 0.42 bfloat16, 0.91 float32. The bitwise tests are the
    # sharp check; this one catches gross errors (wrong rows, scales, tiles).
    assert worst <= 4.0, f"{dtype}: relative error {worst:.2f} eps"


def reference_weights(wq, s, b, bits, gs, dtype):
    from overlay_tool.emulator import dequantize

    return dequantize(wq, s, b, bits, gs, dtype)


@pytest.mark.parametrize("dtype", DTYPES)
def test_negative_control_qmv_wide_differs(emu, dtype):
    # Stock qmv_wide reorders the sums: it must differ from M = 1 for every
    # bits, or the bitwise comparisons above could not fail. (Shares measured
    # with these inputs: 1.0 for bits 2..6; bits 8 about 0.02 in bfloat16,
    # whose 8-bit mantissa hides most one-ulp float32 changes.)
    gs = 64
    shares = {}
    for bits in BITS:
        differ = total = 0
        for K, N in (SHAPES["aligned"], SHAPES["ragged_n"]):
            wq, s, b, x = make_case(bits, gs, dtype, K, N)
            kw = dict(w=wq, scales=s, biases=b, bits=bits, group_size=gs, dtype=dtype)
            y1 = emu.qmv("qmv_m1", x=x, **kw)
            for m in range(2, 6):
                d = emu.qmv("qmv_wide", x=x[:m], **kw) != y1[:, :m]
                differ += int(d.sum())
                total += d.size
        shares[bits] = differ / total
    assert all(v > 0 for v in shares.values()), shares
    assert sum(shares.values()) / len(shares) > 0.1, shares


def streamed_instantiations():
    out = []
    for t in ("float", "half"):  # the prelude only declares bfloat16_t
        for bits in BITS:
            for gs in GROUP_SIZES:
                out.append(("qmv_fast_impl", (t, gs, bits), False))
                out.append(("qmv_impl", (t, gs, bits), False))
                for v in range(1, 6):
                    for fast in (True, False):
                        out.append(("qmv_streamed_impl", (t, gs, bits, v, fast), True))
    return out


def test_typecheck_patched(patched_header):
    typecheck(patched_header.read_text(), streamed_instantiations(), label=str(patched_header))


def test_typecheck_rejects_thread_to_device_cast(patched_header):
    # Feeding the register copy of the weights to the device qdot through a
    # cast is the error the Metal compiler would reject; the check must too.
    text = patched_header.read_text()
    good = "result[row][v] += qdot_thread<U, values_per_thread, bits>(\n            w_thread[row],"
    assert good in text
    bad = text.replace(
        good,
        "result[row][v] += qdot<U, values_per_thread, bits>(\n            (const device uint8_t*)w_thread[row],",
    )
    with pytest.raises(EmulatorError, match="address-space type check failed"):
        typecheck(bad, [("qmv_streamed_impl", ("float", 64, 4, 2, True), True)], label="mutated")


def test_stock_header_has_no_streamed_kernel(stock_header):
    # The queue, not upstream, brings the kernel: the stock header lacks it.
    assert "qmv_streamed_impl" not in stock_header.read_text()


def reorder_qdot_thread(text: str) -> str:
    """The patched header with qdot_thread's 4-bit loop run backwards: the same
    terms in the opposite order (a fixture derived at run time)."""
    start = text.index("inline U qdot_thread(")
    end = text.index("inline U qdot_safe_thread(")
    body = text[start:end]
    i4 = body.index("else if (bits == 4)")
    fwd = "for (int i = 0; i < (values_per_thread / 4); i++) {"
    bwd = "for (int i = (values_per_thread / 4) - 1; i >= 0; i--) {"
    assert fwd in body[i4:]
    body = body[:i4] + body[i4:].replace(fwd, bwd, 1)
    return text[:start] + body + text[end:]


@pytest.mark.parametrize("dtype", ["float16", "float32"])
def test_reordered_qdot_thread_is_caught(patched_header, dtype):
    # The comparisons must see a reordering inside the streamed kernel itself:
    # with qdot_thread's 4-bit terms summed backwards, streamed != M = 1.
    # (Not bfloat16: its 8-bit inputs times 4-bit weights leave float32 sums
    # of four steps exact, so this reordering cannot change a bit there.)
    emu = Emulator(reorder_qdot_thread(patched_header.read_text()))
    K, N = SHAPES["aligned"]
    wq, s, b, x = make_case(4, 64, dtype, K, N)
    kw = dict(w=wq, scales=s, biases=b, bits=4, group_size=64, dtype=dtype)
    y1 = emu.qmv("qmv_m1", x=x, **kw)
    ys = emu.qmv("qmv_streamed", x=x[:5], **kw)
    share = float((ys != y1[:, :5]).mean())
    assert share > 0.05, share
