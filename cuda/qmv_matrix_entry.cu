// The configuration matrix's entry translation unit: like qmv_entry.cu it
// includes the kernel part of a qmv.cu and exports launch functions on raw
// device pointers, but for every type MLX's CUDA qmv takes (dtypes bfloat16,
// float16 and float32; affine widths 2, 3, 4, 5, 6 and 8 at group sizes 32,
// 64 and 128; mxfp4, mxfp8 and nvfp4) through the launchers mlx::core::qmv
// calls: stock_qmv_any and a negative control (stock_qmv_other_order) from
// the stock kernels, patched_qmv_streamed_any from the patched ones.
//
// Build: nvcc -Dmlx=mlx_stockm '-DQMV_KERNELS="stock_kernels.cuh"' -c ...
//    or: nvcc -Dmlx=mlx_patchedm '-DQMV_KERNELS="patched_kernels.cuh"' \
//          -DQMV_HAVE_STREAMED -c qmv_matrix_entry.cu
#include QMV_KERNELS
#include "qmv_api.h"
#include "qmv_mlx_support.cuh"

#include <tuple>

namespace mlx::core::cu_matrix {

// One thread per (row, vector): the values qmv_kernel_impl dequantizes
// (the same packed elements, scales and biases, 8 at a time) multiplied in float
// and added into one sum of the output type with k increasing, then the
// M = 1 kernel's epilogue. The products are the same; the order of the
// additions differs (and at 8 bits, where stock sums in float, the sum's
// type), so a bitwise comparison must find it different.
template <int G, bool has_bias, typename T, typename Q, typename S>
__global__ void other_order_kernel(
    const T* x,
    const Q* w,
    const S* scales,
    const T* biases,
    const float* global_scale,
    T* out,
    int m,
    int n,
    int k,
    bool broadcast_w) {
  constexpr int E = 8;
  constexpr int bits = cute::sizeof_bits_v<Q>;
  constexpr int bytes = E * bits / 8;
  int row = blockIdx.x * blockDim.x + threadIdx.x;
  int v = blockIdx.y;
  int l = blockIdx.z;
  if (row >= n) {
    return;
  }
  int64_t wrow = row + static_cast<int64_t>(n) * (broadcast_w ? 0 : l);
  const uint8_t* wr = reinterpret_cast<const uint8_t*>(w) + wrow * k * bits / 8;
  const T* xv = x + (static_cast<int64_t>(l) * m + v) * k;
  T acc{0};
  for (int i = 0; i < k; i += E) {
    cutlass::Array<Q, E> packed;
    auto* dst = reinterpret_cast<uint8_t*>(&packed);
    for (int b = 0; b < int(sizeof(packed)); ++b) {
      dst[b] = b < bytes ? wr[i * bits / 8 + b] : 0;
    }
    int64_t g = wrow * (k / G) + i / G;
    T bias{0};
    if constexpr (has_bias) {
      bias = biases[g];
    }
    // Dequantized as qmv_kernel_impl's dequant_fma writes it.
    cutlass::NumericArrayConverter<T, Q, E> converter;
    cutlass::Array<T, E> w_dq = converter(packed);
    if constexpr (has_bias) {
      w_dq = w_dq * T(scales[g]) + bias;
    } else {
      w_dq = w_dq * T(scales[g]);
    }
    for (int j = 0; j < E; ++j) {
      acc = static_cast<T>(fmaf(
          static_cast<float>(xv[i + j]),
          static_cast<float>(w_dq[j]),
          static_cast<float>(acc)));
    }
  }
  float sum = static_cast<float>(acc);
  if constexpr (
      cuda::std::is_same_v<Q, cutlass::float_e2m1_t> &&
      cuda::std::is_same_v<S, cutlass::float_e4m3_t>) {
    if (global_scale) {
      sum *= (*global_scale / (cu::F8E4M3_MAX * cu::F4E2M1_MAX));
    }
  }
  out[(static_cast<int64_t>(l) * m + v) * n + row] = static_cast<T>(sum);
}

} // namespace mlx::core::cu_matrix

namespace {

using namespace mlx::core;

// f<T, Q, S, group_size>() for the type a names (as dispatch_quant_types
// maps MLX's modes and widths); -1 for one MLX does not have.
template <typename F>
int dispatch_any(const QmvArgs& a, F&& f) {
  auto with_t = [&]<typename T>() -> int {
    switch (a.mode) {
      case QMV_MXFP4:
        return a.group == 32
            ? f.template operator()<
                  T,
                  cutlass::float_e2m1_t,
                  cutlass::float_ue8m0_t,
                  32>()
            : -1;
      case QMV_MXFP8:
        return a.group == 32
            ? f.template operator()<
                  T,
                  cutlass::float_e4m3_t,
                  cutlass::float_ue8m0_t,
                  32>()
            : -1;
      case QMV_NVFP4:
        return a.group == 16
            ? f.template operator()<
                  T,
                  cutlass::float_e2m1_t,
                  cutlass::float_e4m3_t,
                  16>()
            : -1;
      case QMV_AFFINE:
        break;
      default:
        return -1;
    }
    auto with_group = [&]<int G>() -> int {
      switch (a.bits) {
        case 2:
          return f.template operator()<T, cutlass::uint2b_t, T, G>();
        case 3:
          return f.template operator()<T, cutlass::uint3b_t, T, G>();
        case 4:
          return f.template operator()<T, cutlass::uint4b_t, T, G>();
        case 5:
          return f.template operator()<T, cutlass::uint5b_t, T, G>();
        case 6:
          return f.template operator()<T, cutlass::uint6b_t, T, G>();
        case 8:
          return f.template operator()<T, uint8_t, T, G>();
      }
      return -1;
    };
    switch (a.group) {
      case 32:
        return with_group.template operator()<32>();
      case 64:
        return with_group.template operator()<64>();
      case 128:
        return with_group.template operator()<128>();
    }
    return -1;
  };
  switch (a.dtype) {
    case 0:
      return with_t.template operator()<cutlass::bfloat16_t>();
    case 1:
      return with_t.template operator()<cutlass::half_t>();
    case 2:
      return with_t.template operator()<float>();
  }
  return -1;
}

template <typename T, typename Q, typename S>
auto args_of(const QmvArgs& a) {
  return std::make_tuple(
      static_cast<const T*>(a.x),
      static_cast<const Q*>(a.w),
      static_cast<const S*>(a.scales),
      static_cast<const T*>(a.biases),
      a.global_scale,
      static_cast<T*>(a.out));
}

} // namespace

#ifndef QMV_HAVE_STREAMED

int stock_qmv_any(const QmvArgs* a) {
  return dispatch_any(*a, [&]<typename T, typename Q, typename S, int G>() {
    constexpr bool has_bias = !cutlass::has_negative_zero_v<Q>;
    auto [x, w, s, b, gs, out] = args_of<T, Q, S>(*a);
    cu::qmv<G, has_bias>(
        x, w, s, b, gs, out, a->m, a->n, a->k, a->l, a->broadcast_w,
        QmvLauncher{a->stream});
    return int(cudaGetLastError());
  });
}

int stock_qmv_other_order(const QmvArgs* a) {
  return dispatch_any(*a, [&]<typename T, typename Q, typename S, int G>() {
    constexpr bool has_bias = !cutlass::has_negative_zero_v<Q>;
    auto [x, w, s, b, gs, out] = args_of<T, Q, S>(*a);
    dim3 grid((a->n + 127) / 128, a->m, a->l);
    cu_matrix::other_order_kernel<G, has_bias><<<grid, 128, 0, a->stream>>>(
        x, w, s, b, gs, out, a->m, a->n, a->k, a->broadcast_w);
    return int(cudaGetLastError());
  });
}

#else

namespace {

// QMV_TAIL_TURNS: the launch of launch_qmv_streamed with a third as many
// blocks as full-size row blocks (rounded up), so that each block takes two
// or three row blocks in turn, and where the kernel lets them the last eighth
// of the row blocks at half size after them, also with several rows of
// blocks (vectors, batches), which MLX's launch never runs in turn. -2 where
// the configuration cannot.
template <
    int W,
    int R,
    int V,
    int D,
    int G,
    bool has_bias,
    typename T,
    typename Q,
    typename S>
int launch_in_turn(
    const QmvArgs& a,
    const T* x,
    const Q* w,
    const S* s,
    const T* b,
    const float* gs,
    T* out) {
  using Traits = cu::QmvStreamedTraits<T, Q, S>;
  constexpr int elems_per_warp = WARP_SIZE * Traits::elems_per_thread;
  if constexpr (!cu::qmv_streamed_in_turn<T, Q, V>()) {
    return -2;
  } else {
    if (a.k % elems_per_warp != 0 || a.k / elems_per_warp < D - 1) {
      return -2;
    }
    using L = typename Traits::template Layout<W, R, V, D, G, false>;
    auto* kernel = &cu::qmv_streamed_kernel<
        W, R, V, D, Traits::elems_per_thread, G, has_bias, false, T, Q, S>;
    int m = a.m, n = a.n, k = a.k, l = a.l;
    bool bw = a.broadcast_w;
    if (bw) {
      m *= l;
      l = 1;
    }
    int row_blocks = (n + W * R - 1) / (W * R);
    // Where the kernel lets them (qmv_streamed_half_turns, R even), the last
    // eighth of the row blocks at half size, one to each of the launch's
    // last blocks, where that leaves blocks to take turns.
    constexpr bool halves = R % 2 == 0 && cu::qmv_streamed_half_turns<T, Q, V>();
    int full_blocks = halves ? row_blocks - row_blocks / 8 : row_blocks;
    int rest = n - full_blocks * W * R;
    int blocks = (full_blocks + 2) / 3 +
        (rest > 0 ? (rest + W * R / 2 - 1) / (W * R / 2) : 0);
    if (blocks >= full_blocks) {
      full_blocks = row_blocks;
      blocks = (row_blocks + 2) / 3;
    }
    dim3 grid(blocks, (m + V - 1) / V, l);
    void* args[] = {&x, &w, &s, &b, &gs, &out, &m, &n, &k, &bw, &full_blocks};
    QmvLauncher{a.stream}(
        reinterpret_cast<void*>(kernel), grid, dim3(WARP_SIZE, W), args,
        L::bytes);
    return int(cudaGetLastError());
  }
}

} // namespace

int patched_qmv_streamed_any(const QmvArgs* a) {
  return dispatch_any(*a, [&]<typename T, typename Q, typename S, int G>() {
    constexpr bool has_bias = !cutlass::has_negative_zero_v<Q>;
    auto [x, w, s, b, gs, out] = args_of<T, Q, S>(*a);
    using Traits = cu::QmvStreamedTraits<T, Q, S>;
    bool taken = Traits::template takes<G>(
        x, w, s, b, a->m, a->n, a->k, a->l, a->broadcast_w);
    bool picked = a->tail == QMV_TAIL_PICKED;
    if (picked && !taken) {
      return -2;
    }
    if (picked ||
        (taken && a->tail != QMV_TAIL_TURNS &&
         Traits::template prefetch<G>(
             x, w, a->m, a->n, a->k, a->l, a->broadcast_w))) {
      cu::qmv_streamed<G, has_bias>(
          x, w, s, b, gs, out, a->m, a->n, a->k, a->l, a->broadcast_w,
          QmvLauncher{a->stream});
    } else if (!Traits::template supported<G>(x, w, s, b, a->k)) {
      return -2;
    } else if constexpr (Traits::template Layout<1, 1, 1, 2, G>::
                             supported_types) {
      int rc = 0;
      // The ring configuration qmv_streamed picks, with the last wave as
      // a->tail sets it; also where the dispatch leaves the product to
      // qmv_kernel (few short rows), so that the ring is checked there too.
      int vecs = a->broadcast_w ? a->m * a->l : a->m;
      cu::dispatch_streamed_tile<cute::sizeof_bits_v<Q>, T>(
          vecs, a->n, [&](auto warps, auto rows, auto vecs, auto stages) {
            if (a->tail == QMV_TAIL_TURNS) {
              rc = launch_in_turn<
                  warps.value, rows.value, vecs.value, stages.value, G,
                  has_bias>(*a, x, w, s, b, gs, out);
              return;
            }
            int full_blocks = qmv_full_blocks(*a, warps.value * rows.value);
            cu::launch_qmv_streamed<
                warps.value,
                rows.value,
                vecs.value,
                stages.value,
                G,
                has_bias>(
                x, w, s, b, gs, out, a->m, a->n, a->k, a->l, a->broadcast_w,
                QmvLauncher{a->stream}, full_blocks);
          });
      if (rc != 0) {
        return rc;
      }
    }
    return int(cudaGetLastError());
  });
}

int patched_qmv_takes(const QmvArgs* a) {
  return dispatch_any(*a, [&]<typename T, typename Q, typename S, int G>() {
    auto [x, w, s, b, gs, out] = args_of<T, Q, S>(*a);
    return int(cu::QmvStreamedTraits<T, Q, S>::template takes<G>(
        x, w, s, b, a->m, a->n, a->k, a->l, a->broadcast_w));
  });
}

#ifdef QMV_MATRIX_SWEEP
// The (W, R, V, D) an fp sweep can time (qmv_matrix --sweep): W warps per
// block, R rows per warp, V vectors per block, D stages; whole tiles of k
// only. Not in the default build (one instantiation per fp type each).
#define QMV_SWEEP_CONFIGS(X)                                              \
  X(8, 4, 1, 4) X(16, 2, 1, 4) X(4, 4, 1, 8) X(8, 2, 1, 8) X(4, 2, 1, 8)  \
  X(16, 1, 1, 4) X(2, 4, 1, 8) X(8, 4, 2, 3) X(4, 4, 2, 4) X(8, 2, 2, 4)  \
  X(2, 4, 2, 8) X(8, 4, 4, 3) X(4, 4, 4, 4) X(8, 2, 4, 4) X(2, 4, 4, 6)   \
  X(4, 2, 8, 3) X(8, 2, 8, 3)

int patched_qmv_streamed_cfg(const QmvArgs* a, int W, int R, int V, int D) {
  if (a->mode == QMV_AFFINE) {
    return -1;
  }
  return dispatch_any(*a, [&]<typename T, typename Q, typename S, int G>() {
    auto [x, w, s, b, gs, out] = args_of<T, Q, S>(*a);
    using Traits = cu::QmvStreamedTraits<T, Q, S>;
    if (!Traits::template supported<G>(x, w, s, b, a->k) ||
        a->k % (WARP_SIZE * Traits::elems_per_thread) != 0 || a->l != 1) {
      return -2;
    }
    int rc = -1;
    auto launch = [&]<int w_, int r_, int v_, int d_>() {
      using L = typename Traits::template Layout<w_, r_, v_, d_, G>;
      if constexpr (L::bytes <= 48 * 1024 && w_ >= L::chunks) {
        auto* kernel = &cu::qmv_streamed_kernel<
            w_, r_, v_, d_, Traits::elems_per_thread, G, false, false, T, Q,
            S>;
        int m = a->m, n = a->n, k = a->k;
        bool bw = true;
        dim3 grid((n + w_ * r_ - 1) / (w_ * r_), (m + v_ - 1) / v_, 1);
        int full_blocks = grid.x;
        void* args[] = {&x, &w, &s, &b, &gs, &out, &m, &n, &k, &bw, &full_blocks};
        QmvLauncher{a->stream}(
            reinterpret_cast<void*>(kernel), grid, dim3(WARP_SIZE, w_), args,
            L::bytes);
        rc = int(cudaGetLastError());
      } else {
        rc = -3;
      }
    };
#define QMV_SWEEP_CASE(w_, r_, v_, d_)                  \
  if (W == w_ && R == r_ && V == v_ && D == d_) {       \
    launch.template operator()<w_, r_, v_, d_>();       \
  }
    QMV_SWEEP_CONFIGS(QMV_SWEEP_CASE)
#undef QMV_SWEEP_CASE
    return rc;
  });
}

int patched_qmv_sweep_configs(int (*wrvd)[4], int max) {
  int count = 0;
#define QMV_SWEEP_LIST(w_, r_, v_, d_) \
  if (count < max) {                   \
    wrvd[count][0] = w_;               \
    wrvd[count][1] = r_;               \
    wrvd[count][2] = v_;               \
    wrvd[count][3] = d_;               \
  }                                    \
  count++;
  QMV_SWEEP_CONFIGS(QMV_SWEEP_LIST)
#undef QMV_SWEEP_LIST
  return count;
}
#endif

#endif
