// One harness entry translation unit: includes the kernel part of a qmv.cu
// (everything up to `} // namespace cu`, extracted by bench/cuda_qmv.py) and
// exports plain launch functions that take raw device pointers.
//
// Build: nvcc -Dmlx=mlx_<prefix> -DQMV_PREFIX=<prefix>_ \
//   -DQMV_KERNELS='"<extracted>.cuh"' [-DQMV_HAVE_STREAMED] -c qmv_entry.cu
#include QMV_KERNELS
#include "qmv_api.h"

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

template <typename T, typename Q, int V, int D>
int launch_streamed(const QmvArgs& a, int G) {
  constexpr int E = cu::QmvStreamedTraits<T, Q>::elems_per_thread;
  constexpr int R = 4;
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
  dim3 grid((a.n + R - 1) / R, (groups + gpb - 1) / gpb, l);
  dim3 block(WARP_SIZE, R * gpb);
  cu::qmv_streamed_kernel<R, V, D, E, 64, true, false, T, Q, T>
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

template <typename T, typename Q>
int launch_streamed_vd(const QmvArgs& a, int V, int G, int D) {
#define QMV_CASE(v, d)                          \
  if (V == v && D == d) {                       \
    return launch_streamed<T, Q, v, d>(a, G);   \
  }
  QMV_CASE(1, 2) QMV_CASE(1, 4) QMV_CASE(1, 8)
  QMV_CASE(2, 2) QMV_CASE(2, 4)
  QMV_CASE(4, 2) QMV_CASE(4, 4)
  QMV_CASE(8, 2) QMV_CASE(8, 4)
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

int ENTRY(qmv_streamed)(const QmvArgs* a, int V, int G, int D) {
  return dispatch_types(*a, [&]<typename T, typename Q>() {
    return launch_streamed_vd<T, Q>(*a, V, G, D);
  });
}

#else

int ENTRY(qmv_streamed_auto)(const QmvArgs*) {
  return -1;
}
int ENTRY(qmv_streamed)(const QmvArgs*, int, int, int) {
  return -1;
}

#endif
