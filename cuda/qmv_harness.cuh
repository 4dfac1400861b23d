// What the two harness programs (qmv_bench.cu, qmv_matrix.cu) share: the
// error check, the log, the random fills and the CUDA-graph timing.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#define CK(call)                                                       \
  do {                                                                 \
    cudaError_t e_ = (call);                                           \
    if (e_ != cudaSuccess) {                                           \
      fprintf(stderr, "CUDA error %s at %s:%d: %s\n", #call, __FILE__, \
              __LINE__, cudaGetErrorString(e_));                       \
      exit(2);                                                         \
    }                                                                  \
  } while (0)

// The run's log: logf prints and, once g_log is open, writes there too.
static FILE* g_log = nullptr;

static void logf(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vprintf(fmt, ap);
  va_end(ap);
  if (g_log) {
    va_start(ap, fmt);
    vfprintf(g_log, fmt, ap);
    va_end(ap);
    fflush(g_log);
  }
  fflush(stdout);
}

__device__ __forceinline__ uint32_t hash32(uint64_t i, uint32_t seed) {
  uint64_t z = i * 0x9E3779B97F4A7C15ull + (uint64_t(seed) << 32) + seed;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return uint32_t((z ^ (z >> 31)) >> 16);
}

// kind 0: x ~ U(-1, 1); 1: scales ~ s0 * U(0.5, 1.5); 2: biases ~
// -half_range * s0 * U(0.8, 1.2), half_range = (2^bits - 1) / 2.
template <typename T>
__global__ void fill_vals(T* p, size_t n, uint32_t seed, int kind, float s0,
                          float half_range) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n;
       i += size_t(gridDim.x) * blockDim.x) {
    float u = (hash32(i, seed) & 0xFFFFFF) / float(1 << 24);
    float v;
    if (kind == 0)
      v = 2.f * u - 1.f;
    else if (kind == 1)
      v = s0 * (0.5f + u);
    else
      v = -half_range * s0 * (0.8f + 0.4f * u);
    p[i] = T(v);
  }
}

// How many weight sets of set_bytes span more than 256 MB (beyond the L2),
// at least 4: timing rotates over them.
static int sets_beyond_l2(size_t set_bytes) {
  return int(std::max<size_t>(4, (size_t(256) << 20) / set_bytes + 1));
}

// Median microseconds per launch over `reps` replays of a CUDA graph holding
// `launches` launches (each on its own weight set, beyond the L2), recorded
// by capture(stream), which returns non-zero where a launch was refused
// (then -1). Three replays warm up first.
template <typename Capture>
static double median_graph_us(cudaStream_t st, int launches, int reps,
                              Capture&& capture) {
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  CK(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal));
  int rc = capture(st);
  CK(cudaStreamEndCapture(st, &graph));
  if (rc != 0) {
    cudaGraphDestroy(graph);
    return -1;
  }
  CK(cudaGraphInstantiate(&exec, graph, 0));
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  for (int i = 0; i < 3; ++i) CK(cudaGraphLaunch(exec, st));
  std::vector<double> t;
  for (int i = 0; i < reps; ++i) {
    CK(cudaEventRecord(e0, st));
    CK(cudaGraphLaunch(exec, st));
    CK(cudaEventRecord(e1, st));
    CK(cudaEventSynchronize(e1));
    float ms;
    CK(cudaEventElapsedTime(&ms, e0, e1));
    t.push_back(ms * 1e3 / launches);
  }
  CK(cudaGetLastError());
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}
