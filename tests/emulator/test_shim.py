"""Self-tests of the emulator's shim and scheduler, on fixture kernels written
here: half/bfloat16 arithmetic (one IEEE rounding per operation, checked
against exact arithmetic), conversions, contraction, the 32-lane collectives
and their documented order, threadgroup memory with barriers, and the errors
(divergence, out-of-bounds, missing function, compile error)."""

from __future__ import annotations

import numpy as np
import pytest

from overlay_tool.emulator import Emulator, EmulatorError, LaunchSpec, build
from overlay_tool.emulator.quant import bf16_bits_to_f32

SIG = """(
    const device uint32_t* w,
    const device T* scales,
    const device T* biases,
    const device T* x,
    device T* y,
    const constant int& in_vec_size,
    const constant int& out_vec_size,
    uint3 tid [[threadgroup_position_in_grid]],
    uint simd_gid [[simdgroup_index_in_threadgroup]],
    uint simd_lid [[thread_index_in_simdgroup]])"""

FIXTURES = f"""
template <typename T, int OP>
METAL_FUNC void binop_impl{SIG} {{
  const int j = int(tid.y) * 64 + int(simd_gid) * 32 + int(simd_lid);
  if (j >= out_vec_size) {{
    return;
  }}
  T a = x[j];
  T b = scales[j];
  T c = biases[j];
  T r;
  if (OP == 0) r = a + b;
  else if (OP == 1) r = a - b;
  else if (OP == 2) r = a * b;
  else if (OP == 3) r = a / b;
  else if (OP == 4) r = a + b + c;
  else if (OP == 5) {{ r = a; r += b; r *= c; }}
  else if (OP == 6) r = static_cast<T>(static_cast<float>(a) * static_cast<float>(b) + static_cast<float>(c));
  else r = static_cast<T>(as_type<float>(w[j]));
  y[j] = r;
}}

template <typename T, int OP>
METAL_FUNC void simd_impl{SIG} {{
  const int j = int(tid.y) * 64 + int(simd_gid) * 32 + int(simd_lid);
  T v = x[j];
  T r = v;
  if (OP == 0) r = simd_sum(v);
  else if (OP == 1) r = simd_shuffle_down(v, 3);
  else if (OP == 2) r = simd_shuffle_xor(v, 5);
  else if (OP == 3) r = simd_shuffle_up(v, 2);
  else if (OP == 4) r = simd_broadcast(v, 7);
  else if (OP == 5) {{
    r += simd_shuffle_down(r, 16);
    r += simd_shuffle_down(r, 8);
    r += simd_shuffle_down(r, 4);
    r += simd_shuffle_down(r, 2);
    r += simd_shuffle_down(r, 1);
  }}
  else if (OP == 6) r = simd_max(v);
  y[j] = r;
}}

template <typename T>
METAL_FUNC void tgmem_impl{SIG} {{
  threadgroup float buf[64];
  const int j = int(simd_gid) * 32 + int(simd_lid);
  buf[j] = static_cast<float>(x[int(tid.y) * 64 + j]);
  threadgroup_barrier(mem_flags::mem_threadgroup);
  y[int(tid.y) * 64 + j] = static_cast<T>(buf[63 - j]);
}}

template <typename T>
METAL_FUNC void early_return_impl{SIG} {{
  if (simd_lid == 3) {{
    return;
  }}
  float r = simd_sum(1.0f);
  y[simd_gid * 32 + simd_lid] = static_cast<T>(r);
}}

template <typename T>
METAL_FUNC void branch_impl{SIG} {{
  float r;
  if (simd_lid < 16) {{
    r = simd_sum(1.0f);
  }} else {{
    r = simd_sum(2.0f);
  }}
  y[simd_gid * 32 + simd_lid] = static_cast<T>(r);
}}

template <typename T>
METAL_FUNC void trips_impl{SIG} {{
  float r = 0;
  for (int i = 0; i < int(simd_lid % 2) + 1; i++) {{
    r += simd_sum(1.0f);
  }}
  y[simd_gid * 32 + simd_lid] = static_cast<T>(r);
}}

template <typename T>
METAL_FUNC void barrier_return_impl{SIG} {{
  if (simd_gid == 1) {{
    return;
  }}
  threadgroup_barrier(mem_flags::mem_threadgroup);
  y[simd_lid] = x[simd_lid];
}}

template <typename T>
METAL_FUNC void spin_impl{SIG} {{
  volatile int spin = 1;
  while (spin) {{
  }}
}}

template <typename T>
METAL_FUNC void oob_impl{SIG} {{
  y[simd_gid * 32 + simd_lid] = x[in_vec_size + simd_lid];
}}
"""

FUNCS = ["binop_impl", "simd_impl", "tgmem_impl", "early_return_impl", "branch_impl",
         "trips_impl", "barrier_return_impl", "oob_impl", "spin_impl"]
DT = ("float16", "bfloat16", "float32")


@pytest.fixture(scope="module")
def femu() -> Emulator:
    e = Emulator(FIXTURES, functions=FUNCS)
    specs = [LaunchSpec.make("binop_impl", (t, op), d, False)
             for d, t in zip(DT, ("half", "bfloat16_t", "float")) for op in range(8)]
    specs += [LaunchSpec.make("simd_impl", (t, op), d, False)
              for d, t in zip(DT, ("half", "bfloat16_t", "float")) for op in range(7)]
    specs += [LaunchSpec.make(f, ("float",), "float32", False)
              for f in FUNCS if f not in ("binop_impl", "simd_impl")]
    e.prepare(specs)
    return e


def _run(e: Emulator, fn: str, targs, dtype: str, x, s=None, b=None, wbits=None, grid=None):
    n = x.shape[-1]
    s = x if s is None else s
    b = x if b is None else b
    w = np.zeros((n, 1), np.uint32) if wbits is None else wbits.reshape(n, 1)
    return e.launch(fn, targs, w=w, scales=s.reshape(n, 1), biases=b.reshape(n, 1),
                    x=x.reshape(1, n), M=1, N=n, K=n, grid=grid or (1, (n + 63) // 64, 1),
                    takes_M=False, dtype=dtype)[0, 0]


# ---- exact references -------------------------------------------------------
def _half_vals(rng, n):
    b = rng.integers(0, 0x10000, n, dtype=np.uint32).astype(np.uint16)
    v = b.view(np.float16)
    ok = np.isfinite(v) & (np.abs(v.astype(np.float64)) > 0)
    return v[ok]


def _round_f64_to_bf16_bits(v: np.ndarray) -> np.ndarray:
    """Correct RNE float64 -> bfloat16 (normal range), independent of the shim."""
    u = v.astype(np.float64).view(np.uint64)
    u = (u + np.uint64((1 << 44) - 1) + ((u >> np.uint64(45)) & np.uint64(1))) & ~np.uint64((1 << 45) - 1)
    return (u.view(np.float64).astype(np.float32).view(np.uint32) >> 16).astype(np.uint16)


OPS = {
    0: lambda a, b, c: a + b,
    1: lambda a, b, c: a - b,
    2: lambda a, b, c: a * b,
    3: lambda a, b, c: a / b,
}


def test_half_one_rounding_per_operation(femu):
    rng = np.random.default_rng(1)
    n = 4096
    a, b, c = (_half_vals(rng, 3 * n)[:n] for _ in range(3))
    n = min(len(a), len(b), len(c))
    a, b, c = a[:n], b[:n], c[:n]
    a64, b64, c64 = (v.astype(np.float64) for v in (a, b, c))
    for op, f in OPS.items():
        got = _run(femu, "binop_impl", ("half", op), "float16", a, b, c)
        # + - * of two halves are exact in float64, and / rounded to float64
        # first is innocuous (53 >= 2*11 + 2): one correct rounding to half.
        with np.errstate(all="ignore"):
            want = f(a64, b64, c64).astype(np.float16).view(np.uint16)
        np.testing.assert_array_equal(got, want, err_msg=f"half op {op}")
    # a + b + c is two roundings (no excess precision), r += b; r *= c too
    got = _run(femu, "binop_impl", ("half", 4), "float16", a, b, c)
    with np.errstate(all="ignore"):
        want = ((a64 + b64).astype(np.float16).astype(np.float64) + c64).astype(np.float16)
        once = (a64 + b64 + c64).astype(np.float16)
    np.testing.assert_array_equal(got, want.view(np.uint16))
    assert (want.view(np.uint16) != once.view(np.uint16)).any()  # the check has teeth
    got = _run(femu, "binop_impl", ("half", 5), "float16", a, b, c)
    with np.errstate(all="ignore"):
        want = ((a64 + b64).astype(np.float16).astype(np.float64) * c64).astype(np.float16)
    np.testing.assert_array_equal(got, want.view(np.uint16))


def test_bfloat16_one_rounding_per_operation(femu):
    rng = np.random.default_rng(2)
    n = 4096

    def vals():
        # normal-range bfloat16 values within 2^+-20 (sums exact in float64)
        v = rng.choice([-1, 1], n) * np.exp2(rng.uniform(-20, 20, n))
        return _round_f64_to_bf16_bits(v)

    a, b, c = vals(), vals(), vals()
    a64, b64, c64 = (bf16_bits_to_f32(v).astype(np.float64) for v in (a, b, c))
    for op, f in OPS.items():
        got = _run(femu, "binop_impl", ("bfloat16_t", op), "bfloat16", a, b, c)
        np.testing.assert_array_equal(got, _round_f64_to_bf16_bits(f(a64, b64, c64)), err_msg=f"bf16 op {op}")
    got = _run(femu, "binop_impl", ("bfloat16_t", 4), "bfloat16", a, b, c)
    ab = bf16_bits_to_f32(_round_f64_to_bf16_bits(a64 + b64)).astype(np.float64)
    np.testing.assert_array_equal(got, _round_f64_to_bf16_bits(ab + c64))


def test_float_to_narrow_conversion_rounds_to_nearest_even(femu):
    rng = np.random.default_rng(3)
    f = (rng.standard_normal(2048) * np.exp2(rng.integers(-20, 14, 2048))).astype(np.float32)
    # exact ties of half and bfloat16 as well
    h = _half_vals(rng, 512).astype(np.float32)
    f = np.concatenate([f, h + np.spacing(h.astype(np.float16)).astype(np.float32) / 2])
    n = len(f)
    x16 = np.ones(n, np.float16)
    got = _run(femu, "binop_impl", ("half", 7), "float16", x16, wbits=f.view(np.uint32))
    np.testing.assert_array_equal(got, f.astype(np.float16).view(np.uint16))
    xb = np.full(n, 0x3F80, np.uint16)
    got = _run(femu, "binop_impl", ("bfloat16_t", 7), "bfloat16", xb, wbits=f.view(np.uint32))
    np.testing.assert_array_equal(got, _round_f64_to_bf16_bits(f.astype(np.float64)))


def test_contraction_flag_controls_fma():
    if not build.has_fma():
        pytest.skip("no FMA on this CPU: contraction cannot be modelled (reported in docs)")
    rng = np.random.default_rng(4)
    n = 1024
    a, b, c = (rng.standard_normal(n).astype(np.float32) for _ in range(3))
    outs = {}
    for contract in (False, True):
        e = Emulator(FIXTURES, functions=FUNCS, contract=contract)
        outs[contract] = _run(e, "binop_impl", ("float", 6), "float32", a, b, c)
    a64, b64, c64 = (v.astype(np.float64) for v in (a, b, c))
    unfused = ((a64 * b64).astype(np.float32).astype(np.float64) + c64).astype(np.float32)
    fused = (a64 * b64 + c64).astype(np.float32)  # a*b exact in double: one rounding
    np.testing.assert_array_equal(outs[False], unfused.view(np.uint32))
    np.testing.assert_array_equal(outs[True], fused.view(np.uint32))


def _tree_sum(v: np.ndarray) -> np.ndarray:
    v = v.copy()
    off = 16
    while off:
        v[:off] = v[:off] + v[off:2 * off]
        off //= 2
    return v[0]


@pytest.mark.parametrize("dtype,t,npt", [("float32", "float", np.float32), ("float16", "half", np.float16)])
def test_simd_sum_order_and_shuffles(femu, dtype, t, npt):
    rng = np.random.default_rng(5)
    # magnitudes spread so the reduction order shows
    v = (rng.standard_normal(64) * np.exp2(rng.integers(-12, 12, 64))).astype(npt)
    # simdgroup 0: 1 followed by 31 half-ulps: a left-to-right sum stays 1,
    # the tree sums the small ones first
    v[0] = 1
    v[1:32] = np.finfo(npt).eps / 2
    bits = v.view(np.uint32 if npt == np.float32 else np.uint16)
    got = _run(femu, "simd_impl", (t, 0), dtype, v)
    for g in range(2):
        lane = v[32 * g: 32 * g + 32]
        tree = _tree_sum(lane)
        seq = lane[0]
        for k in range(1, 32):
            seq = npt(seq + lane[k])
        assert (got[32 * g: 32 * g + 32] == np.array([tree]).view(bits.dtype)[0]).all()
        if g == 0:
            assert tree != seq  # the data distinguish the two orders
    # the ladder of simd_shuffle_down in kernel code gives the tree result in lane 0
    lad = _run(femu, "simd_impl", (t, 5), dtype, v)
    assert lad[0] == got[0] and lad[32] == got[32]
    idx = np.arange(32)
    for op, src in ((1, np.where(idx + 3 < 32, idx + 3, idx)), (2, idx ^ 5),
                    (3, np.where(idx >= 2, idx - 2, idx)), (4, np.full(32, 7))):
        out = _run(femu, "simd_impl", (t, op), dtype, v)
        for g in range(2):
            np.testing.assert_array_equal(out[32 * g: 32 * g + 32], bits[32 * g + src], err_msg=f"op {op}")
    out = _run(femu, "simd_impl", (t, 6), dtype, v)
    assert out[0] == bits[:32][np.argmax(v[:32])]


def test_simd_sum_sequential_order_option():
    e = Emulator(FIXTURES, functions=["simd_impl"], simd_sum_order="sequential")
    rng = np.random.default_rng(6)
    v = (rng.standard_normal(64) * np.exp2(rng.integers(-12, 12, 64))).astype(np.float32)
    got = _run(e, "simd_impl", ("float", 0), "float32", v)
    seq = v[0]
    for k in range(1, 32):
        seq = np.float32(seq + v[k])
    assert got[0] == np.array([seq], np.float32).view(np.uint32)[0]


def test_threadgroup_memory_and_barrier(femu):
    x = np.arange(1, 129, dtype=np.float32)
    got = _run(femu, "tgmem_impl", ("float",), "float32", x, grid=(1, 2, 1)).view(np.float32)
    want = np.concatenate([x[:64][::-1], x[64:][::-1]])
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("fn,needle", [
    ("early_return_impl", "lane 3 had returned"),
    ("branch_impl", "different collectives"),
    ("trips_impl", "collective #2"),
    ("barrier_return_impl", "had returned"),
])
def test_divergence_is_a_clear_error(femu, fn, needle):
    x = np.ones(64, np.float32)
    with pytest.raises(EmulatorError) as ei:
        _run(femu, fn, ("float",), "float32", x)
    msg = str(ei.value)
    assert "divergent" in msg and needle in msg, msg


def test_out_of_bounds_read_is_a_clear_error(femu):
    x = np.ones(64, np.float32)
    with pytest.raises(EmulatorError, match=r"invalid memory access.*buffer 'x' at byte offset 256"):
        _run(femu, "oob_impl", ("float",), "float32", x)
    # and the emulator is still usable afterwards
    np.testing.assert_array_equal(_run(femu, "tgmem_impl", ("float",), "float32", x).view(np.float32), x[::-1])


def test_endless_lane_is_stopped_by_the_timeout():
    e = Emulator(FIXTURES, functions=["spin_impl", "tgmem_impl"], timeout_s=0.5)
    x = np.ones(64, np.float32)
    with pytest.raises(EmulatorError, match=r"did not finish within 0.5 s"):
        _run(e, "spin_impl", ("float",), "float32", x)
    np.testing.assert_array_equal(_run(e, "tgmem_impl", ("float",), "float32", x).view(np.float32), x[::-1])


def test_missing_function_is_a_clear_error(stock_header):
    with pytest.raises(EmulatorError, match=r"no top-level function or item named 'qmv_nonexistent_impl'"):
        Emulator(stock_header, extra_functions=["qmv_nonexistent_impl"])
    with pytest.raises(EmulatorError, match="no top-level function"):
        Emulator("template <typename T> void f() {}\n", functions=["qdot"])


def test_compile_error_points_at_the_header_line(stock_text, tmp_path):
    lines = stock_text.splitlines(keepends=True)
    at = next(i for i, ln in enumerate(lines) if "inline U qdot(" in ln) + 10
    lines.insert(at, "  this_is_not_metal = ;\n")
    bad = tmp_path / "quantized.h"
    bad.write_text("".join(lines))
    e = Emulator(bad, cache_dir=tmp_path / "cache")
    with pytest.raises(EmulatorError) as ei:
        e.qmv("qmv_fast", w=np.zeros((8, 64), np.uint32), scales=np.ones((8, 8), np.float32),
              biases=np.ones((8, 8), np.float32), x=np.ones((1, 512), np.float32),
              bits=4, group_size=64, dtype="float32")
    assert f"{bad}:{at + 1}:" in str(ei.value), str(ei.value)
    assert ei.value.hint and "compiler output" in ei.value.hint


def test_double_rounding_argument_exhaustive_half_add():
    """The shim computes half ops in float and rounds once more; exhaustive
    over all finite a and a sample of b: float(a)+float(b) rounded to half
    equals the exactly rounded sum (Figueroa: 24 >= 2*11+2)."""
    a = np.arange(0x10000, dtype=np.uint32).astype(np.uint16).view(np.float16)
    a = a[np.isfinite(a)]
    rng = np.random.default_rng(7)
    for bv in _half_vals(rng, 64)[:16]:
        with np.errstate(all="ignore"):
            via_f32 = (a.astype(np.float32) + np.float32(bv)).astype(np.float16)
            exact = (a.astype(np.float64) + np.float64(bv)).astype(np.float16)
        np.testing.assert_array_equal(via_f32.view(np.uint16), exact.view(np.uint16))
