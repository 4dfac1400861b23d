// One harness entry translation unit: includes the kernel part of a qmv.cu
// (everything up to `} // namespace cu`, extracted by bench/cuda_qmv.py) and
// exports plain launch functions that take raw device pointers.
//
// Build: nvcc -Dmlx=mlx_<prefix> -DQMV_PREFIX=<prefix>_ \
//   -DQMV_KERNELS='"<extracted>.cuh"' [-DQMV_HAVE_STREAMED] -c qmv_entry.cu
#include QMV_KERNELS
#include "qmv_api.h"
#include "qmv_mlx_support.cuh"

#define QMV_CAT2(a, b) a##b
#define QMV_CAT(a, b) QMV_CAT2(a, b)
#define ENTRY(name) QMV_CAT(QMV_PREFIX, name)

namespace {

using namespace mlx::core;

template <typename F>
int dispatch_types(const QmvArgs& a, F&& f) {
  if (a.group != 64) {
    return -1;
  }
  auto widths = [&]<typename T>() {
    switch (a.bits) {
      case 2:
        return f.template operator()<T, cutlass::uint2b_t>();
      case 3:
        return f.template operator()<T, cutlass::uint3b_t>();
      case 4:
        return f.template operator()<T, cutlass::uint4b_t>();
      case 5:
        return f.template operator()<T, cutlass::uint5b_t>();
      case 6:
        return f.template operator()<T, cutlass::uint6b_t>();
      case 8:
        return f.template operator()<T, uint8_t>();
      default:
        return -1;
    }
  };
  if (a.dtype == 0) {
    return widths.template operator()<cutlass::bfloat16_t>();
  } else if (a.dtype == 1) {
    return widths.template operator()<cutlass::half_t>();
  }
  return -1;
}

// Calls `launch` (a cu:: launcher) with the problem of `a` as T and Q.
template <typename T, typename Q, typename F>
int call_launcher(const QmvArgs& a, F&& launch) {
  launch(
      static_cast<const T*>(a.x),
      static_cast<const Q*>(a.w),
      static_cast<const T*>(a.scales),
      static_cast<const T*>(a.biases),
      nullptr,
      static_cast<T*>(a.out),
      a.m,
      a.n,
      a.k,
      a.l,
      a.broadcast_w,
      QmvLauncher{a.stream});
  return int(cudaGetLastError());
}

} // namespace

int ENTRY(qmv)(const QmvArgs* a) {
  return dispatch_types(*a, [&]<typename T, typename Q>() {
    return call_launcher<T, Q>(
        *a, [](auto... args) { cu::qmv<64, true>(args...); });
  });
}

#ifdef QMV_HAVE_STREAMED

namespace {

// qmv_streamed_kernel at (W, R, V, D); V = 0: qmv_prefetch_kernel (W warps,
// a ring of D tiles in registers, one row per warp; R = 1).
template <typename T, typename Q, int W, int R, int V, int D>
int launch_streamed(const QmvArgs& a) {
  using Traits = cu::QmvStreamedTraits<T, Q, T>;
  if constexpr (V == 0) {
    if (!Traits::template prefetch_supported<64>(a.x, a.w, a.k)) {
      return -2;
    }
    return call_launcher<T, Q>(a, [](auto... args) {
      cu::launch_qmv_prefetch<W, D, 64, true>(args...);
    });
  } else {
    if (!Traits::template supported<64>(a.x, a.w, a.scales, a.biases, a.k)) {
      return -2;
    }
    using Layout = typename Traits::template Layout<W, R, V, D, 64, true>;
    // Too much shared memory, or too few threads to copy a tile of x per
    // pass.
    if constexpr (Layout::bytes > 48 * 1024 || W < Layout::chunks) {
      return -3;
    } else {
      int full_blocks = qmv_full_blocks(a, W * R);
      return call_launcher<T, Q>(a, [&](auto... args) {
        cu::launch_qmv_streamed<W, R, V, D, 64, true>(args..., full_blocks);
      });
    }
  }
}

// The (W, R, V, D) instantiations the harness can time: W warps per block, R
// rows per warp, V vectors per block (0: qmv_prefetch_kernel, one vector
// per warp), a ring of D tiles (QMV_LEAN:
// one, for a quick compile check; the dispatch's own ones come through
// qmv_streamed_auto).
#ifdef QMV_LEAN
#define QMV_STREAMED_CONFIGS(X) X(4, 2, 8, 3) X(4, 1, 0, 2)
#else
#define QMV_STREAMED_CONFIGS(X)                                        \
  X(4, 2, 1, 8) X(4, 4, 1, 8) X(8, 2, 1, 8) X(8, 1, 1, 8) X(16, 2, 1, 4) \
  X(16, 1, 1, 4) X(4, 4, 1, 4) X(8, 4, 1, 4) X(4, 4, 1, 6) X(2, 4, 1, 8) \
  X(4, 2, 2, 8) X(4, 4, 2, 4) X(8, 2, 2, 4) X(16, 2, 2, 2) X(8, 4, 2, 3)  \
  X(4, 4, 4, 4) X(8, 4, 4, 3) X(8, 4, 4, 2) X(4, 2, 4, 4) X(8, 2, 4, 4)  \
  X(2, 4, 4, 6) X(2, 2, 4, 8) X(4, 2, 8, 3) X(8, 2, 8, 3) X(8, 2, 8, 2)  \
  X(4, 1, 16, 2) X(2, 4, 2, 8) X(1, 1, 0, 2) X(2, 1, 0, 2) X(4, 1, 0, 2)  \
  X(8, 1, 0, 2) X(4, 1, 0, 3) X(4, 1, 0, 4) X(4, 2, 8, 4) X(4, 2, 8, 6)  \
  X(8, 2, 8, 4) X(2, 2, 8, 6)
#endif

template <typename T, typename Q>
int launch_streamed_wrvd(const QmvArgs& a, int W, int R, int V, int D) {
#define QMV_CASE(w, r, v, d)                         \
  if (W == w && R == r && V == v && D == d) {        \
    return launch_streamed<T, Q, w, r, v, d>(a);     \
  }
  QMV_STREAMED_CONFIGS(QMV_CASE)
#undef QMV_CASE
  return -1;
}

} // namespace

int ENTRY(qmv_streamed_auto)(const QmvArgs* a) {
  return dispatch_types(*a, [&]<typename T, typename Q>() {
    if (!cu::QmvStreamedTraits<T, Q, T>::template takes<64>(
            a->x, a->w, a->scales, a->biases, a->m, a->n, a->k, a->l,
            a->broadcast_w)) {
      return -2;
    }
    return call_launcher<T, Q>(
        *a, [](auto... args) { cu::qmv_streamed<64, true>(args...); });
  });
}

int ENTRY(qmv_streamed)(const QmvArgs* a, int R, int V, int W, int D) {
  return dispatch_types(*a, [&]<typename T, typename Q>() {
    return launch_streamed_wrvd<T, Q>(*a, W, R, V, D);
  });
}

int ENTRY(qmv_streamed_configs)(int (*wrvd)[4], int max) {
  int count = 0;
#define QMV_LIST(w, r, v, d)                   \
  if (count < max) {                           \
    wrvd[count][0] = w;                        \
    wrvd[count][1] = r;                        \
    wrvd[count][2] = v;                        \
    wrvd[count][3] = d;                        \
  }                                            \
  count++;
  QMV_STREAMED_CONFIGS(QMV_LIST)
#undef QMV_LIST
  return count;
}

#else

int ENTRY(qmv_streamed_auto)(const QmvArgs*) {
  return -1;
}
int ENTRY(qmv_streamed)(const QmvArgs*, int, int, int, int) {
  return -1;
}
int ENTRY(qmv_streamed_configs)(int (*)[4], int) {
  return 0;
}

#endif
