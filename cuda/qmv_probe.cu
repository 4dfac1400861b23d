// Host-memory entry point for the end-to-end exactness probe
// (overlay_tool/probe_harness.py, substrate `cuda-harness`): copies the
// operands to the device, runs the qmv the stock or the patched mlx::core::qmv
// would launch, and copies the result back. Linked into libqmv_probe.so with
// the stock and patched entry objects (bench/cuda_qmv.py build).
#include <cuda_runtime.h>

#include <cstddef>

#include "qmv_api.h"

namespace {

// Whether the last patched call ran the streamed kernel (1) or fell back to
// the stock one (0): the probe reports how many products it really streamed.
int g_last_streamed = 0;

// Device copies of the operands of one call, freed on every exit path.
struct DeviceBuffers {
  void* p[5] = {};
  ~DeviceBuffers() {
    for (void* q : p) {
      cudaFree(q);
    }
  }
};

} // namespace

// impl: 0 = the stock qmv kernel (one warp per row and vector), 1 = what the
// patched mlx::core::qmv launches (qmv_streamed when x and w are aligned for
// its wide loads, the stock kernel otherwise). dtype: 0 = bfloat16,
// 1 = float16. Returns 0, a CUDA error code, or a negative harness code.
extern "C" int qmv_probe(
    int impl,
    int dtype,
    int bits,
    int group,
    const void* x,
    const void* w,
    const void* scales,
    const void* biases,
    void* out,
    int m,
    int n,
    int k) {
  const size_t x_bytes = size_t(m) * k * 2;
  const size_t w_bytes = size_t(n) * k * bits / 8;
  const size_t sb_bytes = size_t(n) * (k / group) * 2;
  const size_t out_bytes = size_t(m) * n * 2;
  const size_t sizes[5] = {x_bytes, w_bytes, sb_bytes, sb_bytes, out_bytes};
  const void* host[4] = {x, w, scales, biases};
  DeviceBuffers d;
  for (int i = 0; i < 5; ++i) {
    if (cudaError_t e = cudaMalloc(&d.p[i], sizes[i]); e != cudaSuccess) {
      return int(e);
    }
    if (i < 4) {
      cudaError_t e = cudaMemcpy(d.p[i], host[i], sizes[i], cudaMemcpyHostToDevice);
      if (e != cudaSuccess) {
        return int(e);
      }
    }
  }
  // Poison the output so that a row the kernel does not write shows up.
  if (cudaError_t e = cudaMemset(d.p[4], 0xff, out_bytes); e != cudaSuccess) {
    return int(e);
  }
  QmvArgs a{};
  a.dtype = dtype;
  a.bits = bits;
  a.group = group;
  a.x = d.p[0];
  a.w = d.p[1];
  a.scales = d.p[2];
  a.biases = d.p[3];
  a.out = d.p[4];
  a.m = m;
  a.n = n;
  a.k = k;
  a.l = 1;
  a.broadcast_w = false;
  a.stream = nullptr;
  int rc;
  if (impl == 0) {
    rc = stock_qmv(&a);
  } else if (impl == 1) {
    rc = patched_qmv_streamed_auto(&a);
    g_last_streamed = rc != -2;
    if (rc == -2) { // a shape or alignment it does not take: qmv falls back
      rc = patched_qmv(&a);
    }
  } else {
    return -10;
  }
  if (rc != 0) {
    return rc;
  }
  if (cudaError_t e = cudaDeviceSynchronize(); e != cudaSuccess) {
    return int(e);
  }
  cudaError_t e = cudaMemcpy(out, d.p[4], out_bytes, cudaMemcpyDeviceToHost);
  return int(e);
}

// The text of a code qmv_probe returned.
extern "C" const char* qmv_probe_error(int code) {
  if (code == -2) {
    return "no instantiation for this shape or alignment";
  } else if (code < 0) {
    return "no kernel for this dtype, bits or group size";
  }
  return cudaGetErrorString(cudaError_t(code));
}

// 1 when the last impl = 1 call ran the streamed kernel, 0 when it fell back.
extern "C" int qmv_probe_last_streamed() {
  return g_last_streamed;
}
