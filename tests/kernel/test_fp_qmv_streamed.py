"""Proof of fp_qmv_streamed on the Metal emulator (issue 9).

Every vector an fp_qmv_streamed_impl tile serves must be bitwise equal to the
same vector computed alone by the kernel the M = 1 dispatch picks
(fp_qmv_fast_impl or fp_qmv_impl): for mxfp4, nvfp4 (with and without its
global scale) and mxfp8, float16, bfloat16 and float32, aligned and ragged K
and N, N < 8 and K shorter than one block, every M from 2 to 16 with the
dispatch's tiling (qmv_wide's rule, at most 5 vectors per tile), with
floating-point contraction off and on, batched (B = 3), and for fp_qmv_fast's
2-row (results_per_simdgroup) variant. Plus: numerics against fpemu's float64
reference, the address-space type check of the patched header for every
vecs_per_tg, a thread-to-device cast the check must reject, a reordered
qdot_thread the comparisons must catch, the negative control (stock
fp_qmv_wide differs), and the instantiations (AOT macros and the JIT
template definition) against the kernel's template parameters.

What the emulator cannot settle (the Metal compiler's contraction choices,
the hardware's simd_sum order) is settled on an Apple GPU by the upstream
tests test_fp_qmv_rows_match_single_vector and
test_qqmv_rows_match_single_vector in python/tests/test_quantized.py.
"""

from __future__ import annotations

import itertools
import re
import shutil
import subprocess

import numpy as np
import pytest

from overlay_tool.emulator import fpparity, fpquant, quant, wide_vecs_per_tg
from overlay_tool.emulator.extract import extract_sources, stable_label
from overlay_tool.emulator.fp import FpEmulator, decoder_sources
from overlay_tool.emulator.typecheck import check_source
from overlay_tool.errors import EmulatorError

DTYPES = ("float16", "bfloat16", "float32")
# (mode, global scale): every fp mode, nvfp4 with and without its global scale
VARIANTS = (("mxfp4", False), ("nvfp4", False), ("nvfp4", True), ("mxfp8", False))
VARIANT_IDS = ["mxfp4", "nvfp4", "nvfp4_gs", "mxfp8"]
M_MAX = 16
MS = range(2, M_MAX + 1)

# (N, K) and what each exercises at M = 1 (fp_qmv_fast: N % 8 == 0 and K % 512
# (4 bits) or K % 256 (8 bits) == 0; else fp_qmv). K avoids 64 and 128, which
# take fp_qmv_quad at every M. cancel=True data needs N < K.
SHAPES = {
    "aligned": (16, 512),  # fp_qmv_fast, every mode
    "aligned_2blk": (24, 1024),  # fp_qmv_fast, several K blocks
    "ragged_k": (16, 416),  # fp_qmv: full blocks, then the last one
    "ragged_n": (67, 512),  # fp_qmv: last output tile moved back
    "ragged_kn": (13, 416),
    "short_k": (24, 192),  # fp_qmv, 4 bits: no full block, only the last one
    "k400": (16, 400),  # nvfp4 only (K % 16): a partial last block
    "n5": (5, 416),  # fp_qmv, N < 8: guarded rows
    "n3": (3, 384),  # fp_qmv, N < 8: the second simdgroup returns at once
}

# Relative error bound against float64, in units of the output type's epsilon.
EPS = {"float16": 2.0**-10, "bfloat16": 2.0**-7, "float32": 2.0**-23}


def tiling(m: int) -> int:
    v = wide_vecs_per_tg(m)
    assert 1 <= v <= 5 and (m + v - 1) // v == (m + 4) // 5
    return v


def shapes_for(mode: str, shapes=SHAPES):
    gs = fpquant.mode_of(mode).group_size
    return {k: nk for k, nk in shapes.items() if nk[1] % gs == 0}


def make_case(mode, g, dtype, N, K, *, B=1, seed=0, cancel=True):
    """fp-quantized weights (fpemu's random_problem: every nonzero code, valid
    scales) and M_MAX input rows; ``cancel`` gives order-sensitive inputs.
    B > 1 stacks distinct problems (the kernel takes one global scale)."""
    parts = []
    for i in range(B):
        rng = np.random.default_rng([VARIANTS.index((mode, g)), N, K, B, seed, i,
                                     DTYPES.index(dtype)])
        parts.append(fpquant.random_problem(rng, mode=mode, M=M_MAX, N=N, K=K, dtype=dtype,
                                            global_scale=g, cancel=cancel))
    if B == 1:
        return parts[0]
    out = {k: np.stack([p[k] for p in parts]) for k in ("w", "scales", "x")}
    out["global_scale"] = parts[0]["global_scale"]
    return out


def configs(mode, g, dtype, shapes, rps=4, ms=MS):
    out = []
    for N, K in shapes.values():
        base = dict(mode=mode, N=N, K=K, dtype=dtype, global_scale=g, results_per_simdgroup=rps)
        out.append(dict(kind="qmv_m1", M=M_MAX, **base))
        out += [dict(kind="qmv_streamed", M=m, vecs_per_tg=tiling(m), **base) for m in ms]
    return out


def check_streamed_equals_m1(emu, mode, g, dtype, *, shapes=None, batches=(1,), rps=4, ms=MS):
    """Mismatch descriptions (empty: every vector bitwise equal to M = 1), and
    the number of outputs compared."""
    shapes = shapes_for(mode, SHAPES if shapes is None else shapes)
    emu.prepare_qmv(configs(mode, g, dtype, shapes, rps, ms))
    bad, compared = [], 0
    for name, (N, K) in shapes.items():
        for B in batches:
            p = make_case(mode, g, dtype, N, K, B=B)
            kw = dict(w=p["w"], scales=p["scales"], global_scale=p["global_scale"], mode=mode,
                      dtype=dtype, results_per_simdgroup=rps)
            y1 = emu.qmv("qmv_m1", x=p["x"], **kw)
            assert not (y1 == np.iinfo(y1.dtype).max).any(), "M = 1 left outputs unwritten"
            for m in ms:
                ys = emu.qmv("qmv_streamed", x=p["x"][..., :m, :], vecs_per_tg=tiling(m), **kw)
                compared += ys.size
                if not np.array_equal(ys, y1[:, :m]):
                    n = int((ys != y1[:, :m]).sum())
                    bad.append(f"{mode}{' gs' if g else ''} {dtype} {name} N={N} K={K} B={B} "
                               f"rps={rps} M={m}: {n} outputs differ")
    return bad, compared


@pytest.fixture(scope="module")
def emu(patched_fp_header) -> FpEmulator:
    return FpEmulator(patched_fp_header, contract=False)


# ---- the order property -------------------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("variant", VARIANTS, ids=VARIANT_IDS)
def test_fp_streamed_equals_m1(emu, variant, dtype):
    bad, compared = check_streamed_equals_m1(emu, *variant, dtype)
    assert compared > 0 and not bad, "\n".join(bad)


# Contraction on, as a GPU compiler does it: everything inlined. The fp qdot
# returns `scale * accum` and its caller adds that to the row's sum in another
# statement; with GCC's default inlining heuristics qdot may stay a call in
# one kernel and be inlined in the other, so the product and the add fuse in
# one only (test_fp_qmv_contraction_needs_everything_inlined: even the stock
# M = 1 kernel's bits then differ between -O1 and -O3). A Metal kernel is
# compiled with every function inlined; the contraction-on runs model that
# with -finline-limit=100000. (e8m0 scales, powers of two, make the fused and
# unfused sums equal; nvfp4's e4m3 scales do not.)
INLINE_ALL = "-finline-limit=100000"


@pytest.fixture(scope="module")
def emu_contract(patched_fp_header) -> FpEmulator:
    return FpEmulator(patched_fp_header, contract=True, opt=f"-O1 {INLINE_ALL}")


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("variant", VARIANTS, ids=VARIANT_IDS)
def test_fp_streamed_equals_m1_contraction_on(emu_contract, variant, dtype):
    bad, compared = check_streamed_equals_m1(emu_contract, *variant, dtype)
    assert compared > 0 and not bad, "\n".join(bad)


def test_contraction_on_is_not_vacuous(emu, emu_contract):
    # With contraction on the host compiler does form FMAs in these kernels:
    # the M = 1 outputs change for some inputs, so the run above is a real test.
    changed = 0
    for mode, g in VARIANTS:
        for name in ("aligned_2blk", "ragged_n"):
            N, K = SHAPES[name]
            for dtype in ("float16", "float32"):
                p = make_case(mode, g, dtype, N, K)
                kw = dict(w=p["w"], scales=p["scales"], global_scale=p["global_scale"], x=p["x"],
                          mode=mode, dtype=dtype)
                changed += int((emu.qmv("qmv_m1", **kw) != emu_contract.qmv("qmv_m1", **kw)).sum())
    assert changed > 0


def test_fp_qmv_contraction_needs_everything_inlined(patched_fp_header):
    # The stock M = 1 kernel alone, nvfp4 in the fp_qmv order (ragged K),
    # contraction on: with GCC's default inlining an -O1 and an -O3 build
    # give different bits (the last block's `result += scale * accum` fuses
    # at -O3 only); with everything inlined they agree (and agree with the
    # -O3 build). Contraction off: all agree.
    N, K = SHAPES["ragged_k"]
    p = make_case("nvfp4", False, "float16", N, K)
    kw = dict(w=p["w"], scales=p["scales"], global_scale=None, x=p["x"], mode="nvfp4",
              dtype="float16")
    opts = ("-O1", "-O3", f"-O1 {INLINE_ALL}", f"-O3 {INLINE_ALL}")
    y = {(c, o): FpEmulator(patched_fp_header, contract=c, opt=o).qmv("qmv_m1", **kw)
         for c in (False, True) for o in opts}
    for o in opts[1:]:
        assert np.array_equal(y[False, opts[0]], y[False, o])
    differ = int((y[True, "-O1"] != y[True, "-O3"]).sum())
    print(f"stock fp_qmv, nvfp4 float16 N={N} K={K}, contraction on, default inlining: "
          f"-O1 vs -O3 differ in {differ} of {y[True, '-O1'].size} outputs")
    assert differ > 0
    assert np.array_equal(y[True, f"-O1 {INLINE_ALL}"], y[True, f"-O3 {INLINE_ALL}"])
    assert np.array_equal(y[True, f"-O1 {INLINE_ALL}"], y[True, "-O3"])


@pytest.mark.parametrize("dtype", DTYPES)
def test_fp_streamed_equals_m1_batched(emu, dtype):
    # B = 3 distinct weight matrices and inputs, tid.z selecting the batch.
    bad = []
    for mode, g in VARIANTS:
        b, _ = check_streamed_equals_m1(
            emu, mode, g, dtype, batches=(3,),
            shapes={k: SHAPES[k] for k in ("aligned", "ragged_kn", "n5")})
        bad += b
    assert not bad, "\n".join(bad)


@pytest.mark.parametrize("variant", [("nvfp4", False), ("nvfp4", True), ("mxfp4", False), ("mxfp8", False)],
                         ids=["nvfp4", "nvfp4_gs", "mxfp4", "mxfp8"])
def test_fp_streamed_two_rows_per_simdgroup_equals_m1(emu, variant):
    # The M5 Max nvfp4 tile (results_per_simdgroup = 2, fast order only): the
    # streamed kernel with 2 rows per simdgroup against fp_qmv_fast with 2.
    aligned = {k: SHAPES[k] for k in ("aligned", "aligned_2blk")}
    bad = []
    for dtype in DTYPES:
        b, _ = check_streamed_equals_m1(emu, *variant, dtype, shapes=aligned, rps=2)
        bad += b
    assert not bad, "\n".join(bad)


def test_two_rows_per_simdgroup_do_not_change_a_row(emu):
    # results_per_simdgroup only sets how many rows a simdgroup serves: M = 1
    # with 2 rows equals M = 1 with 4, so either tile is "the M = 1 kernel".
    N, K = SHAPES["aligned_2blk"]
    for g in (False, True):
        p = make_case("nvfp4", g, "float16", N, K)
        kw = dict(w=p["w"], scales=p["scales"], global_scale=p["global_scale"], x=p["x"],
                  mode="nvfp4", dtype="float16")
        assert np.array_equal(emu.qmv("qmv_m1", results_per_simdgroup=2, **kw),
                              emu.qmv("qmv_m1", **kw))


@pytest.mark.parametrize("order", ["sequential", "butterfly", "reverse"])
def test_fp_streamed_equals_m1_any_simd_sum_order(patched_fp_header, order):
    # The hardware's simd_sum order is not known; equality must not depend on it.
    emu = FpEmulator(patched_fp_header, simd_sum_order=order)
    shapes = {k: SHAPES[k] for k in ("aligned", "ragged_n", "n5")}
    bad = []
    for (mode, g), dtype in itertools.product(VARIANTS, ("float16", "float32")):
        b, _ = check_streamed_equals_m1(emu, mode, g, dtype, shapes=shapes, ms=range(2, 8))
        bad += b
    assert not bad, "\n".join(bad)


def test_m1_kind_is_each_row_alone(emu):
    # qmv_m1 launches all rows at once; check it against literal M = 1 launches.
    for mode, g in VARIANTS:
        for name in ("aligned", "ragged_n"):
            N, K = SHAPES[name]
            p = make_case(mode, g, "bfloat16", N, K)
            kw = dict(w=p["w"], scales=p["scales"], global_scale=p["global_scale"], mode=mode,
                      dtype="bfloat16")
            y1 = emu.qmv("qmv_m1", x=p["x"], **kw)
            for i in (0, 7, M_MAX - 1):
                assert np.array_equal(emu.qmv("qmv_m1", x=p["x"][i : i + 1], **kw)[0, 0], y1[0, i])


# ---- numerics -----------------------------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES)
def test_fp_streamed_numerics(emu, dtype, record_property):
    worst = {}
    for mode, g in VARIANTS:
        w_ = 0.0
        for name, (N, K) in shapes_for(mode).items():
            p = make_case(mode, g, dtype, N, K, cancel=False)
            gs = p["global_scale"]
            y = quant.decode(emu.qmv("qmv_streamed", w=p["w"], scales=p["scales"], global_scale=gs,
                                     x=p["x"], mode=mode, dtype=dtype), dtype)
            ref = fpquant.reference(p["w"], p["scales"], p["x"], mode, dtype, gs)
            mag = fpquant.abs_reference(p["w"], p["scales"], p["x"], mode, dtype, gs)
            err = np.abs(y - ref) / np.maximum(mag, 1e-30)
            w_ = max(w_, float(err.max() / EPS[dtype]))
        worst[f"{mode}{'_gs' if g else ''}"] = round(w_, 3)
    record_property("worst_error_eps", worst)
    print(f"{dtype}: worst |y - ref| / sum|x_k w_k| in eps: {worst}")
    # The bitwise tests are the sharp check; this one catches gross errors
    # (wrong rows, scales, tiles, global scale).
    assert max(worst.values()) <= 4.0, worst


# ---- negative controls --------------------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES)
def test_negative_control_fp_qmv_wide_differs(emu, dtype, record_property):
    # Stock fp_qmv_wide (still in the patched header) reorders the sums: it
    # must differ from M = 1 for every fp mode, or the comparisons above could
    # not fail. (The dispatch never runs it with a global scale.)
    shares = {}
    for mode in fpquant.MODES:
        r = fpparity.sweep(emu, "qmv_wide", variants=((mode, False),), dtypes=(dtype,),
                           ms=range(2, 6), cancel=True, seed=3)
        assert r.compared > 0
        shares[mode] = round(r.share, 3)
    record_property("wide_differing_share", shares)
    print(f"{dtype}: share of fp_qmv_wide outputs != M = 1: {shares}")
    assert all(v > 0 for v in shares.values()), shares


def reorder_qdot_thread(text: str) -> str:
    """The patched header with qdot_thread's 4-bit loop run backwards: the same
    terms in the opposite order (a fixture derived at run time)."""
    start = text.index("qdot_thread(const thread uint8_t* w")
    end = text.index("inline U qdot_safe_thread(")
    body = text[start:end]
    fwd = "for (int i = 0; i < (values_per_thread / 4); i++) {"
    bwd = "for (int i = (values_per_thread / 4) - 1; i >= 0; i--) {"
    assert body.count(fwd) == 1
    return text[:start] + body.replace(fwd, bwd) + text[end:]


@pytest.mark.parametrize("dtype", ["float16", "float32"])
def test_reordered_qdot_thread_is_caught(patched_fp_header, dtype, tmp_path):
    # The comparisons must see a reordering inside the streamed kernel itself:
    # with qdot_thread's 4-bit terms summed backwards, streamed != M = 1.
    text = patched_fp_header.read_text()
    emu = FpEmulator(reorder_qdot_thread(text), decoders=decoder_sources(text, patched_fp_header))
    bad, _ = check_streamed_equals_m1(emu, "mxfp4", False, dtype,
                                      shapes={"aligned": SHAPES["aligned"]}, ms=range(2, 6))
    assert bad, "a reordered qdot_thread went unnoticed"


# ---- address spaces and instantiations ----------------------------------------------


def streamed_instantiations():
    out = []
    for t in ("float", "half"):  # the prelude only declares bfloat16_t
        for md in fpquant.MODES.values():
            gs, bits = md.group_size, md.bits
            for g in ((False, True) if md.global_scale else (False,)):
                out.append(("fp_qmv_impl", (t, gs, bits, g)))
                for rps in (2, 4):
                    out.append(("fp_qmv_fast_impl", (t, gs, bits, g, rps)))
                for v in range(1, 6):
                    out.append(("fp_qmv_streamed_impl", (t, gs, bits, v, False, g, 4)))
                    for rps in (2, 4):
                        out.append(("fp_qmv_streamed_impl", (t, gs, bits, v, True, g, rps)))
    return out


def test_typecheck_patched(emu):
    emu.typecheck(streamed_instantiations())


def test_typecheck_rejects_thread_to_device_cast(patched_fp_header):
    # Feeding the register copy of the weights to the device qdot through a
    # cast is the error the Metal compiler would reject; the check must too.
    text = patched_fp_header.read_text()
    good = ("result[row][v] += qdot_thread<U, values_per_thread, bits>(\n"
            "            (const thread uint8_t*)w_thread[row], x_thread, s[row]);")
    assert good in text
    bad = text.replace(good, "result[row][v] += qdot<U, values_per_thread, bits>(\n"
                             "            (const device uint8_t*)w_thread[row], x_thread, s[row]);")
    emu = FpEmulator(bad, decoders=decoder_sources(text, patched_fp_header))
    with pytest.raises(EmulatorError, match="mismatching address spaces"):
        emu.typecheck([("fp_qmv_streamed_impl", ("float", 32, 4, 2, True, False, 4))])


def test_stock_header_has_no_fp_streamed_kernel(stock_fp_header):
    assert "fp_qmv_streamed" not in stock_fp_header.read_text()


# The [[kernel]] wrapper and what instantiates it: fp_quantized.metal's macros
# (AOT) and the template definition qmv_streamed() in quantized.cpp builds for
# the JIT (get_template_definition: "fp_qmv_streamed<type, gs, bits, V, fast,
# batched, hgs, rps>", bools as 0/1). Both are compiled as explicit
# instantiations of the kernel, against the patched header, in C++ for OpenCL.
KERNEL_STUB = r"""
template <typename IdxT = int64_t>
IdxT elem_to_loc(IdxT elem, __constant const int* shape, __constant const int64_t* strides, int ndim);
ulong2 elem_to_loc_broadcast(uint elem, __constant const int* shape, __constant const int64_t* a_strides,
                             __constant const int64_t* b_strides, int ndim);
"""
INSTANTIATE = "#define instantiate_kernel(name, func, ...) template decltype(func<__VA_ARGS__>) func<__VA_ARGS__>;\n"
TYPES = {"float": "float", "float16_t": "half"}  # bfloat16_t is only declared by the prelude


def kernel_check_source(header, body: str) -> tuple[str, str]:
    text = header.read_text()
    label = stable_label(str(header))
    ex = extract_sources([*decoder_sources(text, header), (text, label)], ["fp_qmv_streamed"])
    return ('#include "typecheck_fp_prelude.h"\n' + KERNEL_STUB + ex.source
            + '#line 1 "<instantiations>"\n' + body), label


def metal_streamed_macros(metal: str) -> str:
    """fp_quantized.metal's #defines with every instantiation but the streamed
    ones made empty."""
    defs = metal[metal.index("#define"):metal.index("instantiate_quantized_types(float)\n")]
    return (defs + "#undef instantiate_quantized_modes\n"
            "#define instantiate_quantized_modes(type, mode, group_size, bits) "
            "instantiate_quantized_all_streamed(type, mode, group_size, bits)\n"
            "#undef instantiate_quantize_dequantize\n#define instantiate_quantize_dequantize(...)\n"
            "#undef instantiate_quantized_qmv_fast_r2\n#define instantiate_quantized_qmv_fast_r2(...)\n")


def aot_kernel_names(metal: str) -> set[str]:
    cc = shutil.which("clang") or shutil.which("gcc")
    src = ("#define instantiate_kernel(name, func, ...) KNAME name ;\n" + metal_streamed_macros(metal)
           + "".join(f"instantiate_quantized_types({t})\n" for t in ("float", "float16_t", "bfloat16_t")))
    out = subprocess.run([cc, "-E", "-P", "-x", "c", "-"], input=src, capture_output=True, text=True,
                         check=True).stdout
    return {"".join(re.findall(r'"([^"]*)"', m)) for m in re.findall(r"KNAME ([^;]*);", out)}


def jit_kname_and_def(mode, type_string, V, fast, batched, hgs, rps):
    """The kernel name and template definition qmv_streamed() in the patched
    quantized.cpp builds for an fp mode."""
    md = fpquant.mode_of(mode)
    kname = (f"{mode}_qmv_streamed_{type_string}_gs_{md.group_size}_b_{md.bits}_nv_{V}"
             f"_fast_{int(fast)}{'_r_2' if rps == 2 else ''}_batch_{int(batched)}{'_hgs' if hgs else ''}")
    targs = [type_string, md.group_size, md.bits, V, int(fast), int(batched), int(hgs), rps]
    return kname, f"fp_qmv_streamed<{', '.join(map(str, targs))}>"


def dispatchable(vs=range(2, 6)):
    for mode, t, V, fast, batched in itertools.product(fpquant.MODES, ("float", "float16_t", "bfloat16_t"),
                                                       vs, (False, True), (False, True)):
        for hgs in ((False, True) if mode == "nvfp4" else (False,)):
            for rps in ((2, 4) if mode == "nvfp4" and fast else (4,)):
                yield mode, t, V, fast, batched, hgs, rps


def test_aot_instantiations_compile(patched_checkout):
    kernels = patched_checkout / "mlx/backend/metal/kernels"
    metal = (kernels / "fp_quantized.metal").read_text()
    body = INSTANTIATE + metal_streamed_macros(metal) + "".join(
        f"instantiate_quantized_types({t})\n" for t in TYPES)
    src, label = kernel_check_source(kernels / "fp_quantized.h", body)
    check_source(src, line_label=label, label="fp_quantized.h")


def test_aot_library_has_every_kernel_the_dispatch_names(patched_checkout):
    metal = (patched_checkout / "mlx/backend/metal/kernels/fp_quantized.metal").read_text()
    names = aot_kernel_names(metal)
    # upstream: vecs_per_tg 2..5; the overlay adds 1 (MLX_QMV_ROUTE=streamed:1)
    wanted = {jit_kname_and_def(*c)[0] for c in dispatchable(range(1, 6))}
    assert wanted <= names, sorted(wanted - names)[:5]
    assert len(names) == len(wanted) == 300


def test_jit_template_definitions_compile(patched_checkout):
    header = patched_checkout / "mlx/backend/metal/kernels/fp_quantized.h"
    cpp = (patched_checkout / "mlx/backend/metal/quantized.cpp").read_text()
    assert '"qmv_streamed",' in cpp and "global_scale.has_value(),\n" in cpp
    body = "".join(
        f"template decltype({d}) {d};\n"
        for c in dispatchable(range(1, 6)) if c[1] in TYPES
        for d in [jit_kname_and_def(*c)[1]])
    src, label = kernel_check_source(header, body)
    check_source(src, line_label=label, label="fp_quantized.h")


def test_jit_template_definition_of_the_wrong_arity_fails(patched_checkout):
    # The pin's qmv() passes results_per_simdgroup to kernels that do not take
    # it; the check must see an arity mismatch like that.
    header = patched_checkout / "mlx/backend/metal/kernels/fp_quantized.h"
    d = "fp_qmv_streamed<float, 32, 4, 2, 1, 0, 0, 4, 1>"
    src, label = kernel_check_source(header, f"template decltype({d}) {d};\n")
    with pytest.raises(EmulatorError):
        check_source(src, line_label=label, label="fp_quantized.h")
