// Harness API around MLX's CUDA qmv kernels (mlx/backend/cuda/quantized/qmm/qmv.cu).
// qmv_entry.cu is compiled twice: once against the stock translation unit
// (prefix stock_) and once against the patched one (prefix patched_); the mlx
// namespace is renamed per build (-Dmlx=...) so the two sets of kernels never
// merge at link time.
#pragma once

#include <cuda_runtime.h>

struct QmvArgs {
  int dtype;  // 0 = bfloat16, 1 = float16
  int bits;   // 2, 4 or 8 (affine, with biases)
  int group;  // 64
  const void* x;       // [l, m, k]
  const void* w;       // [n, k * bits / 32] uint32
  const void* scales;  // [n, k / group]
  const void* biases;  // [n, k / group]
  void* out;           // [l, m, n]
  int m, n, k, l;
  bool broadcast_w;
  cudaStream_t stream;
};

#define QMV_DECLARE(prefix)                                                  \
  /* cu::qmv: the stock launcher (one warp per row and vector). */          \
  int prefix##qmv(const QmvArgs* a);                                         \
  /* cu::qmv_streamed as mlx::core::qmv picks it (patched only; -1 else). */ \
  int prefix##qmv_streamed_auto(const QmvArgs* a);                           \
  /* qmv_streamed_kernel: W warps per block, R rows per warp, V vectors  \
     per block, D tiles of weight prefetch (patched only; -1 where not     \
     instantiated). */                                                     \
  int prefix##qmv_streamed(const QmvArgs* a, int R, int V, int W, int D);    \
  /* The (W, R, V, D) instantiated: writes up to max of them, returns how  \
     many there are (0 where the streamed kernel is absent). */            \
  int prefix##qmv_streamed_configs(int (*wrvd)[4], int max);

QMV_DECLARE(stock_)
QMV_DECLARE(patched_)
