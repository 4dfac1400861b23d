// Harness API around MLX's CUDA qmv kernels (mlx/backend/cuda/quantized/qmm/qmv.cu).
// qmv_entry.cu is compiled twice: once against the stock translation unit
// (prefix stock_) and once against the patched one (prefix patched_); the mlx
// namespace is renamed per build (-Dmlx=...) so the two sets of kernels never
// merge at link time.
#pragma once

#include <cuda_runtime.h>

#include <climits>
#include <cstdint>

struct QmvArgs {
  int dtype;  // 0 = bfloat16, 1 = float16, 2 = float32 (float32: *_any only)
  int bits;   // affine: 2, 3, 4, 5, 6 or 8
  int group;  // 64 (*_any: 32, 64 or 128; fp modes: the mode's own)
  const void* x;       // [l, m, k]
  const void* w;       // [n, k * bits / 8] bytes
  const void* scales;  // [n, k / group]
  const void* biases;  // [n, k / group]; affine only
  void* out;           // [l, m, n]
  int m, n, k, l;
  bool broadcast_w;
  cudaStream_t stream;
  // *_any only: 0 = affine, 1 = mxfp4, 2 = mxfp8, 3 = nvfp4 (QMV_MODE_*).
  int mode;
  const float* global_scale;  // nvfp4 only; may be null
  // The streamed ring kernel's last wave (launch_qmv_streamed's full_blocks;
  // qmv_streamed at an explicit (W, R, V, D), and patched_qmv_streamed_any):
  // QMV_TAIL_PICKED as MLX picks it, QMV_TAIL_NONE every block at full size,
  // QMV_TAIL_HALF the last half of the row blocks at half size (forced, to
  // check those blocks on any device); QMV_TAIL_TURNS (configuration matrix
  // only) a third as many blocks as row blocks, each taking them in turn;
  // QMV_TAIL_ALL_HALF every row block at half size (twice as many blocks).
  int tail;
};

enum {
  QMV_TAIL_PICKED = 0,
  QMV_TAIL_NONE = 1,
  QMV_TAIL_HALF = 2,
  QMV_TAIL_TURNS = 3,
  QMV_TAIL_ALL_HALF = 4
};

// launch_qmv_streamed's full_blocks for a.tail, with rows_per_block rows
// (warps x rows per warp) in a full-size block.
inline int qmv_full_blocks(const QmvArgs& a, int rows_per_block) {
  switch (a.tail) {
    case QMV_TAIL_NONE:
      return INT_MAX;
    case QMV_TAIL_HALF:
      return (a.n + rows_per_block - 1) / rows_per_block / 2;
    case QMV_TAIL_ALL_HALF:
      return 0;
    default:
      return -1;
  }
}

enum { QMV_AFFINE = 0, QMV_MXFP4 = 1, QMV_MXFP8 = 2, QMV_NVFP4 = 3 };

// The launch_kernel callback MLX's launchers take, on a plain stream (the
// entry translation units pass it where MLX passes its command encoder).
struct QmvLauncher {
  cudaStream_t stream;
  void operator()(
      void* kernel,
      dim3 grid,
      dim3 block,
      void** args,
      uint32_t smem_bytes = 0) const {
    cudaLaunchKernel(kernel, grid, block, args, smem_bytes, stream);
  }
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

// The whole configuration matrix (qmv_matrix_entry.cu): every dtype, affine
// width and group size and every fp mode, through the launchers MLX calls.
// cu::qmv of the stock build (-1: a type the kernels do not take).
int stock_qmv_any(const QmvArgs* a);
// The negative control, from the stock build: qmv_kernel_impl's dequantized
// values summed in another order (one thread per row, in float, k
// increasing).
int stock_qmv_other_order(const QmvArgs* a);
// cu::qmv_streamed of the patched build as mlx::core::qmv picks it (-2 where
// QmvStreamedTraits::takes refuses it: MLX then runs cu::qmv). With a.tail
// other than QMV_TAIL_PICKED, the ring configuration it would pick wherever
// the ring's copies apply, also where takes leaves the product to cu::qmv;
// with QMV_TAIL_TURNS -2 also where that configuration cannot take row
// blocks in turn (cu::qmv_streamed_in_turn, a rest of k, too few tiles).
int patched_qmv_streamed_any(const QmvArgs* a);
// QmvStreamedTraits::takes of the patched build (1 or 0; -1: a type the
// kernels do not take). Host only: it looks at k and the pointers' alignment.
int patched_qmv_takes(const QmvArgs* a);

// qmv_matrix --sweep only (built with -DQMV_MATRIX_SWEEP): the fp modes'
// qmv_streamed_kernel at an explicit (W, R, V, D), whole tiles of k, B = 1
// (-1: not instantiated or affine; -2: not supported; -3: too much shared
// memory), and the configurations instantiated.
int patched_qmv_streamed_cfg(const QmvArgs* a, int W, int R, int V, int D);
int patched_qmv_sweep_configs(int (*wrvd)[4], int max);

// The pin's qmm_sm80_kernel (qmm_sm80_entry.cu), launched as MLX launches it
// for M <= 16: bfloat16 or float16, 4 or 8 bits, group 64, N a multiple of
// 128 (-1 otherwise). Its rows are not the M = 1 rows: tensor cores sum
// in another order.
int stock_qmm_sm80(const QmvArgs* a);
