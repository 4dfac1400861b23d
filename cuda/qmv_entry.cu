// One harness entry translation unit: includes the kernel part of a qmv.cu
// (everything up to `} // namespace cu`, extracted by bench/cuda_qmv.py) and
// exports plain launch functions that take raw device pointers.
//
// Build: nvcc -Dmlx=mlx_<prefix> -DQMV_PREFIX=<prefix>_ \
//   -DQMV_KERNELS='"<extracted>.cuh"' [-DQMV_HAVE_STREAMED] -c qmv_entry.cu
#include QMV_KERNELS
#include "qmv_api.h"
#ifdef QMV_HAVE_STREAMED
#include "qmv_packed_experiment.cuh"
#include "qmv_smem_experiment.cuh"
#endif

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
  if (a.dtype == 0 && a.bits == 4) {
    return f.template operator()<cutlass::bfloat16_t, cutlass::uint4b_t>();
  } else if (a.dtype == 0 && a.bits == 8) {
    return f.template operator()<cutlass::bfloat16_t, uint8_t>();
  } else if (a.dtype == 1 && a.bits == 4) {
    return f.template operator()<cutlass::half_t, cutlass::uint4b_t>();
  } else if (a.dtype == 1 && a.bits == 8) {
    return f.template operator()<cutlass::half_t, uint8_t>();
  }
  return -1;
}

struct Launcher {
  cudaStream_t stream;
  void operator()(void* kernel, dim3 grid, dim3 block, void** args) const {
    cudaLaunchKernel(kernel, grid, block, args, 0, stream);
  }
};

} // namespace

int ENTRY(qmv)(const QmvArgs* a) {
  return dispatch_types(*a, [&]<typename T, typename Q>() {
    cu::qmv<64, true>(
        static_cast<const T*>(a->x),
        static_cast<const Q*>(a->w),
        static_cast<const T*>(a->scales),
        static_cast<const T*>(a->biases),
        nullptr,
        static_cast<T*>(a->out),
        a->m,
        a->n,
        a->k,
        a->l,
        a->broadcast_w,
        Launcher{a->stream});
    return int(cudaGetLastError());
  });
}

#ifdef QMV_HAVE_STREAMED

namespace {

template <typename T, typename Q, int R, int V, int D>
int launch_streamed(const QmvArgs& a, int G) {
  constexpr int E = cu::QmvStreamedTraits<T, Q>::elems_per_thread;
  constexpr int W = 4;  // warps per row group
  if (a.k % (WARP_SIZE * E) != 0 ||
      !cu::QmvStreamedTraits<T, Q>::aligned(a.x, a.w, a.k)) {
    return -2;
  }
  int m = a.m, l = a.l;
  if (a.broadcast_w) {
    m *= l;
    l = 1;
  }
  int groups = (m + V - 1) / V;
  int gpb = groups < G ? groups : G;
  dim3 grid((a.n + W * R - 1) / (W * R), (groups + gpb - 1) / gpb, l);
  dim3 block(WARP_SIZE, W * gpb);
  cu::qmv_streamed_kernel<W, R, V, D, E, 64, true, false, T, Q, T>
      <<<grid, block, 0, a.stream>>>(
          static_cast<const T*>(a.x),
          static_cast<const Q*>(a.w),
          static_cast<const T*>(a.scales),
          static_cast<const T*>(a.biases),
          nullptr,
          static_cast<T*>(a.out),
          m,
          a.n,
          a.k,
          a.broadcast_w);
  return int(cudaGetLastError());
}

// The (R, V, D) instantiations the harness can time (QMV_LEAN: one, for a
// quick compile check; the dispatch's own ones come through
// qmv_streamed_auto).
#ifdef QMV_LEAN
#define QMV_STREAMED_CONFIGS(X) X(1, 1, 2)
#else
#define QMV_STREAMED_CONFIGS(X)                                    \
  X(1, 1, 2) X(1, 1, 4) X(2, 1, 2) X(2, 1, 4) X(4, 1, 2) X(4, 1, 4) \
  X(1, 2, 2) X(2, 2, 2) X(4, 2, 2)                                  \
  X(1, 4, 2) X(2, 4, 2) X(4, 4, 2)                                  \
  X(1, 8, 2) X(2, 8, 2)
#endif

template <typename T, typename Q>
int launch_streamed_rvd(const QmvArgs& a, int R, int V, int G, int D) {
#define QMV_CASE(r, v, d)                            \
  if (R == r && V == v && D == d) {                  \
    return launch_streamed<T, Q, r, v, d>(a, G);     \
  }
  QMV_STREAMED_CONFIGS(QMV_CASE)
#undef QMV_CASE
  return -1;
}

template <typename T, typename Q, int W, int R, int V, int D>
int launch_streamed_smem(const QmvArgs& a) {
  constexpr int E = cu::QmvStreamedTraits<T, Q>::elems_per_thread;
  using Layout = cu::QmvStreamedSmem<W, R, V, D, E, 64, T, Q, T>;
  if (!Layout::supported(a.k, a.scales, a.biases) ||
      !cu::QmvStreamedTraits<T, Q>::aligned(a.x, a.w, a.k)) {
    return -2;
  }
  size_t smem = Layout::bytes(a.k);
  if (smem > 227 * 1024) {
    return -3;
  }
  auto* kernel = &cu::qmv_streamed_smem_kernel<W, R, V, D, E, 64, true, T, Q, T>;
  cudaFuncSetAttribute(
      kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem));
  int m = a.m, l = a.l;
  if (a.broadcast_w) {
    m *= l;
    l = 1;
  }
  dim3 grid((a.n + W * R - 1) / (W * R), (m + V - 1) / V, l);
  dim3 block(WARP_SIZE, W);
  kernel<<<grid, block, smem, a.stream>>>(
      static_cast<const T*>(a.x),
      static_cast<const Q*>(a.w),
      static_cast<const T*>(a.scales),
      static_cast<const T*>(a.biases),
      nullptr,
      static_cast<T*>(a.out),
      m,
      a.n,
      a.k,
      a.broadcast_w);
  return int(cudaGetLastError());
}

// The (W, R, V, D) instantiations of the shared-memory variant.
#ifdef QMV_LEAN
#define QMV_SMEM_CONFIGS(X) X(4, 2, 1, 8)
#else
#define QMV_SMEM_CONFIGS(X)                                               \
  X(4, 1, 1, 8) X(4, 2, 1, 8) X(4, 4, 1, 4) X(4, 2, 2, 4) X(4, 4, 2, 4)     \
  X(4, 2, 4, 4) X(4, 4, 4, 4) X(4, 1, 8, 4) X(4, 2, 8, 4)                   \
  X(8, 1, 1, 8) X(8, 2, 1, 8) X(8, 4, 1, 4) X(8, 2, 2, 4) X(8, 4, 2, 4)     \
  X(8, 2, 4, 4) X(8, 4, 4, 4) X(8, 1, 8, 4) X(8, 2, 8, 4)
#endif

template <typename T, typename Q>
int launch_streamed_smem_wrvd(const QmvArgs& a, int W, int R, int V, int D) {
#define QMV_CASE(w, r, v, d)                                  \
  if (W == w && R == r && V == v && D == d) {                 \
    return launch_streamed_smem<T, Q, w, r, v, d>(a);         \
  }
  QMV_SMEM_CONFIGS(QMV_CASE)
#undef QMV_CASE
  return -1;
}

template <typename T, typename Q, int R, int V, int D>
int launch_streamed_pk(const QmvArgs& a) {
  constexpr int E = cu::QmvStreamedTraits<T, Q>::elems_per_thread;
  constexpr int W = 4;
  if (a.k % (WARP_SIZE * E) != 0 ||
      !cu::QmvStreamedTraits<T, Q>::aligned(a.x, a.w, a.k)) {
    return -2;
  }
  int m = a.m, l = a.l;
  if (a.broadcast_w) {
    m *= l;
    l = 1;
  }
  dim3 grid((a.n + W * R - 1) / (W * R), (m + V - 1) / V, l);
  dim3 block(WARP_SIZE, W);
  cu::qmv_streamed_pk_kernel<W, R, V, D, E, 64, true, false, T, Q, T>
      <<<grid, block, 0, a.stream>>>(
          static_cast<const T*>(a.x),
          static_cast<const Q*>(a.w),
          static_cast<const T*>(a.scales),
          static_cast<const T*>(a.biases),
          nullptr,
          static_cast<T*>(a.out),
          m,
          a.n,
          a.k,
          a.broadcast_w);
  return int(cudaGetLastError());
}

#ifdef QMV_LEAN
#define QMV_PK_CONFIGS(X) X(2, 1, 2)
#else
#define QMV_PK_CONFIGS(X) \
  X(1, 1, 2) X(2, 1, 2) X(1, 2, 2) X(4, 4, 2) X(2, 8, 2)
#endif

template <typename T, typename Q>
int launch_streamed_pk_rvd(const QmvArgs& a, int R, int V, int D) {
#define QMV_CASE(r, v, d)                        \
  if (R == r && V == v && D == d) {              \
    return launch_streamed_pk<T, Q, r, v, d>(a); \
  }
  QMV_PK_CONFIGS(QMV_CASE)
#undef QMV_CASE
  return -1;
}

} // namespace

int ENTRY(qmv_streamed_auto)(const QmvArgs* a) {
  return dispatch_types(*a, [&]<typename T, typename Q>() {
    if (!cu::QmvStreamedTraits<T, Q>::aligned(a->x, a->w, a->k)) {
      return -2;
    }
    cu::qmv_streamed<64, true>(
        static_cast<const T*>(a->x),
        static_cast<const Q*>(a->w),
        static_cast<const T*>(a->scales),
        static_cast<const T*>(a->biases),
        nullptr,
        static_cast<T*>(a->out),
        a->m,
        a->n,
        a->k,
        a->l,
        a->broadcast_w,
        Launcher{a->stream});
    return int(cudaGetLastError());
  });
}

int ENTRY(qmv_streamed)(const QmvArgs* a, int R, int V, int G, int D) {
  return dispatch_types(*a, [&]<typename T, typename Q>() {
    return launch_streamed_rvd<T, Q>(*a, R, V, G, D);
  });
}

int ENTRY(qmv_streamed_smem)(const QmvArgs* a, int W, int R, int V, int D) {
  return dispatch_types(*a, [&]<typename T, typename Q>() {
    return launch_streamed_smem_wrvd<T, Q>(*a, W, R, V, D);
  });
}

int ENTRY(qmv_streamed_pk)(const QmvArgs* a, int R, int V, int D) {
  return dispatch_types(*a, [&]<typename T, typename Q>() {
    return launch_streamed_pk_rvd<T, Q>(*a, R, V, D);
  });
}

#else

int ENTRY(qmv_streamed_pk)(const QmvArgs*, int, int, int) {
  return -1;
}
int ENTRY(qmv_streamed_smem)(const QmvArgs*, int, int, int, int) {
  return -1;
}
int ENTRY(qmv_streamed_auto)(const QmvArgs*) {
  return -1;
}
int ENTRY(qmv_streamed)(const QmvArgs*, int, int, int, int) {
  return -1;
}

#endif
