// The pin's qmm_sm80_kernel (mlx/backend/cuda/device/qmm_sm80.cuh), the
// kernel MLX's CUDA backend runs for M * B >= 8 vectors on sm80 and sm90
// where a group does not span K, launched as mlx::core::qmm_sm80 launches it
// (quantized/qmm/qmm_sm80.cu: the same tile, grid, block and shared memory),
// so that the harness times it in the same CUDA graphs as qmv. MLX compiles
// this header at run time with NVRTC; here nvcc compiles it with the
// harness's flags.
//
// Build: nvcc -Dmlx=mlx_stockq -c qmm_sm80_entry.cu (with -I<mlx at the pin>)
#include "mlx/backend/cuda/device/qmm_sm80.cuh"
#include "qmv_api.h"

#include <algorithm>

namespace {

using namespace mlx::core;

// mlx::core::qmm_sm80 for M <= 16 (its tile_m is 16 there), group 64.
template <typename T, typename Q>
int launch(const QmvArgs& a) {
  if (a.m < 1 || a.m > 16 || a.n % 128 != 0 || a.k % 64 != 0) {
    return -1;
  }
  auto cta_tiler = cute::make_shape(cute::Int<16>{}, cute::Int<128>{},
                                    cute::Int<64>{});
  using CtaTiler = decltype(cta_tiler);
  auto [sA_layout, sB_layout, sC_layout] = cu::make_smem_layouts(cta_tiler);
  size_t smem_bytes = std::max(
      cute::cosize(sA_layout) * sizeof(T) +
          cute::cosize(sB_layout) * a.bits / 8,
      cute::cosize(sC_layout) * sizeof(T));
  auto* kernel = cu::qmm_sm80_kernel<64, T, Q, T, CtaTiler>;
  if (smem_bytes > 48000) {
    cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                         int(smem_bytes));
  }
  dim3 grid(1, uint32_t(a.n / 128), uint32_t(a.l));
  // As MLX: the block of make_tiled_mma()'s defaults (128 threads for
  // every tile).
  dim3 block(uint32_t(cute::size(cu::make_tiled_mma())));
  kernel<<<grid, block, smem_bytes, a.stream>>>(
      static_cast<const T*>(a.x), static_cast<const Q*>(a.w),
      static_cast<const T*>(a.scales), static_cast<const T*>(a.biases),
      nullptr, nullptr, static_cast<T*>(a.out), a.m, a.n, a.k, a.l,
      a.broadcast_w);
  return int(cudaGetLastError());
}

}  // namespace

int stock_qmm_sm80(const QmvArgs* a) {
  if (a->group != 64) {
    return -1;
  }
  if (a->dtype == 0 && a->bits == 4) {
    return launch<cutlass::bfloat16_t, cutlass::uint4b_t>(*a);
  } else if (a->dtype == 0 && a->bits == 8) {
    return launch<cutlass::bfloat16_t, uint8_t>(*a);
  } else if (a->dtype == 1 && a->bits == 4) {
    return launch<cutlass::half_t, cutlass::uint4b_t>(*a);
  } else if (a->dtype == 1 && a->bits == 8) {
    return launch<cutlass::half_t, uint8_t>(*a);
  }
  return -1;
}
