// Experiment, not part of the upstream patch: qmv_streamed_kernel with the
// scale/bias step done as packed fma.rn (bf16x2 / f16x2) instead of
// `w_dq * T(scale) + bias` on cutlass arrays. ptxas contracts that expression
// in qmv_kernel into one scalar HFMA2 per element (single rounding, then PRMT
// packing); the packed fma.rn pins the same single rounding per element with
// a quarter of the instructions. Same bits only because of that contraction:
// the harness checks them against the stock kernel.
#pragma once

namespace mlx::core::cu {

template <int N, bool has_bias, typename T, typename Q, typename S>
__device__ __forceinline__ cutlass::Array<T, N>
dequant_packed(const cutlass::Array<Q, N>& w_vec, S scale, T bias) {
  if constexpr (
      has_bias && N % 2 == 0 &&
      (cuda::std::is_same_v<T, cutlass::bfloat16_t> ||
       cuda::std::is_same_v<T, cutlass::half_t>)) {
    cutlass::NumericArrayConverter<T, Q, N> converter_tq;
    cutlass::Array<T, N> w_dq = converter_tq(w_vec);
    T s = T(scale);
    if constexpr (cuda::std::is_same_v<T, cutlass::bfloat16_t>) {
      auto* p = reinterpret_cast<__nv_bfloat162*>(&w_dq);
      __nv_bfloat162 s2 = __bfloat162bfloat162(s.to_nv_bfloat16());
      __nv_bfloat162 b2 = __bfloat162bfloat162(bias.to_nv_bfloat16());
#pragma unroll
      for (int i = 0; i < N / 2; ++i) {
        p[i] = __hfma2(p[i], s2, b2);
      }
    } else {
      auto* p = reinterpret_cast<__half2*>(&w_dq);
      __half2 s2 = __half2half2(s.to_half());
      __half2 b2 = __half2half2(bias.to_half());
#pragma unroll
      for (int i = 0; i < N / 2; ++i) {
        p[i] = __hfma2(p[i], s2, b2);
      }
    }
    return w_dq;
  } else {
    return dequant<N, has_bias>(w_vec, scale, bias);
  }
}

// qmv_streamed_impl / qmv_streamed_kernel of the patched qmv.cu, renamed to
// qmv_streamed_pk_* and calling dequant_packed: generated at build time by
// bench/cuda_qmv.py (packed_variant()), so the experiment never drifts from
// the patch.
#include "patched_packed_kernels.cuh"

} // namespace mlx::core::cu
