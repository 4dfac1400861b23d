"""Helpers for tests that use the emulator: random problems and fixture kernels.

Fixture kernels are written here from scratch or derived at run time from the
header under test (never copies of upstream source).
"""

from __future__ import annotations

import numpy as np

from overlay_tool.emulator import quant
from overlay_tool.errors import EmulatorError


def nonzero_normal(rng: np.random.Generator, shape, scale: float = 1.0, floor: float = 1e-2) -> np.ndarray:
    """Normal samples with |v| >= floor*scale: never zero, also after rounding
    to half or bfloat16."""
    v = rng.standard_normal(shape) * scale
    small = np.abs(v) < floor * scale
    v[small] = np.where(v[small] < 0, -floor * scale, floor * scale) * (1 + rng.random(small.sum()))
    return v


def random_problem(rng: np.random.Generator, *, M: int, N: int, K: int, bits: int,
                   group_size: int, dtype: str, B: int | None = None,
                   w_scale: float = 0.05, cancel: bool = False) -> dict:
    """Quantized weights (MLX affine) and activations in ``dtype`` storage.

    Returns dict(w, scales, biases, x); x is (M, K), or (B, M, K) when B is given.

    ``cancel=True`` makes order-sensitive data: x spans a wide exponent range
    (so float32 partial sums of half/bfloat16 inputs are inexact) and N of its
    coordinates are solved so that the exact product is ~0 (N < K): outputs are
    tiny against the sum of |terms|, so a summation-order change that moves a
    float32 partial sum by one ulp also moves half/bfloat16 output bits.
    With plain normal data such a change shows in ~1e-4 of half outputs.
    """
    w = nonzero_normal(rng, (N, K), w_scale).astype(np.float32)
    wq, s, b = quant.quantize(w, bits, group_size, dtype)
    xshape = (M, K) if B is None else (B, M, K)
    if not cancel:
        x = nonzero_normal(rng, xshape)
    else:
        if N >= K:
            raise EmulatorError("cancel=True needs N < K")
        wd = quant.dequantize(wq, s, b, bits, group_size, dtype)  # (N, K) float64
        lo = -10 if dtype != "float16" else -8  # stay clear of half subnormals
        rows = []
        for _ in range(int(np.prod(xshape[:-1]))):
            # wide exponent range: float32 partial sums of half/bfloat16 inputs
            # are then inexact, so their order shows
            v = rng.choice([-1.0, 1.0], K) * np.exp2(rng.uniform(lo, 2, K))
            free = rng.choice(K, min(K - 1, 4 * N), replace=False)
            rest = np.setdiff1d(np.arange(K), free)
            sol = np.linalg.lstsq(wd[:, free], -wd[:, rest] @ v[rest], rcond=None)[0]
            v[free] = sol
            v[np.abs(v) < 2.0**lo] = 2.0**lo
            rows.append(v)
        x = np.array(rows).reshape(xshape)
    x = quant.round_to(x.astype(np.float32), dtype)
    return dict(w=wq, scales=s, biases=b, x=x)


# A trivially order-preserving "streamed" kernel (no weight reuse): each of the
# vecs_per_tg vectors of the threadgroup runs the M = 1 kernel's code path.
# It stands in for qmv_streamed_impl in tests of the harness itself.
STREAMED_LOOP_FIXTURE = r"""
template <typename T, int group_size, int bits, int vecs_per_tg, bool fast>
METAL_FUNC void qmv_streamed_impl(
    const device uint32_t* w,
    const device T* scales,
    const device T* biases,
    const device T* x,
    device T* y,
    const constant int& in_vec_size,
    const constant int& out_vec_size,
    const constant int& M,
    uint3 tid [[threadgroup_position_in_grid]],
    uint simd_gid [[simdgroup_index_in_threadgroup]],
    uint simd_lid [[thread_index_in_simdgroup]]) {
  for (int v = 0; v < vecs_per_tg; v++) {
    const int m = int(tid.x) * vecs_per_tg + v;
    if (m >= M) {
      break;
    }
    uint3 t = tid;
    t.x = m;
    if (fast) {
      qmv_fast_impl<T, group_size, bits>(
          w, scales, biases, x, y, in_vec_size, out_vec_size, t, simd_gid, simd_lid);
    } else {
      qmv_impl<T, group_size, bits>(
          w, scales, biases, x, y, in_vec_size, out_vec_size, t, simd_gid, simd_lid);
    }
  }
}
"""


# The same stand-in for fp_quantized.h: fp_qmv_streamed_impl with the template
# and parameters the fp emulator's "qmv_streamed" kind launches.
FP_STREAMED_LOOP_FIXTURE = r"""
template <
    typename T,
    int group_size,
    int bits,
    int vecs_per_tg,
    bool fast,
    bool has_global_scale,
    int results_per_simdgroup>
METAL_FUNC void fp_qmv_streamed_impl(
    const device uint32_t* w,
    const device uint8_t* scales,
    const device float* global_scale,
    const device T* x,
    device T* y,
    const constant int& in_vec_size,
    const constant int& out_vec_size,
    const constant int& M,
    uint3 tid [[threadgroup_position_in_grid]],
    uint simd_gid [[simdgroup_index_in_threadgroup]],
    uint simd_lid [[thread_index_in_simdgroup]]) {
  for (int v = 0; v < vecs_per_tg; v++) {
    const int m = int(tid.x) * vecs_per_tg + v;
    if (m >= M) {
      break;
    }
    uint3 t = tid;
    t.x = m;
    if (fast) {
      fp_qmv_fast_impl<T, group_size, bits, has_global_scale, results_per_simdgroup>(
          w, scales, global_scale, x, y, in_vec_size, out_vec_size, t, simd_gid, simd_lid);
    } else {
      fp_qmv_impl<T, group_size, bits, has_global_scale>(
          w, scales, global_scale, x, y, in_vec_size, out_vec_size, t, simd_gid, simd_lid);
    }
  }
}
"""


def with_fp_streamed_loop_fixture(header_text: str) -> str:
    if "fp_qmv_streamed_impl" in header_text:
        raise EmulatorError("the header already defines fp_qmv_streamed_impl")
    return header_text + "\n" + FP_STREAMED_LOOP_FIXTURE


def with_streamed_loop_fixture(header_text: str) -> str:
    if "qmv_streamed_impl" in header_text:
        raise EmulatorError("the header already defines qmv_streamed_impl")
    return header_text + "\n" + STREAMED_LOOP_FIXTURE


def reorder_qdot(header_text: str) -> str:
    """A copy of the header whose ``qdot`` (not ``qdot_safe``) runs its 2-, 4-
    and 8-bit loops over i backwards: the same terms, accumulated into
    ``accum`` in the opposite order. Derived from the header text at run time.

    (Re-associating the four products inside one 2/4-bit step is no test:
    with half or bfloat16 inputs those products and their sums are exact in
    float32, so the bits cannot change.)
    """
    start = header_text.find("inline U qdot(")
    end = header_text.find("inline U qdot_safe(")
    if start < 0 or end < 0:
        raise EmulatorError("cannot find qdot / qdot_safe in the header")
    body = header_text[start:end]
    fwd4 = "for (int i = 0; i < (values_per_thread / 4); i++) {"
    bwd4 = "for (int i = (values_per_thread / 4) - 1; i >= 0; i--) {"
    fwd1 = "for (int i = 0; i < values_per_thread; i++) {"
    bwd1 = "for (int i = values_per_thread - 1; i >= 0; i--) {"
    i2 = body.find("if (bits == 2)")
    i4 = body.find("else if (bits == 4)")
    i5 = body.find("else if (bits == 5)")
    i8 = body.find("else if (bits == 8)")
    if min(i2, i4, i5, i8) < 0 or body.count(fwd4) < 2 or body.count(fwd1) != 1:
        raise EmulatorError("qdot does not have the expected 2/4/8-bit loops")
    parts = [body[:i4].replace(fwd4, bwd4, 1), body[i4:i5].replace(fwd4, bwd4, 1),
             body[i5:i8], body[i8:].replace(fwd1, bwd1, 1)]
    return header_text[:start] + "".join(parts) + header_text[end:]
