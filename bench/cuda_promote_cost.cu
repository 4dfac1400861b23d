// What float16's promotion to float costs the scheduler, apart from the
// rest of qmv_streamed's tile: the tile of float16 8-bit blocks of 8 vectors
// (2 rows a warp, 8 elements a lane: 128 fmas of 8 + 2 promoted pieces)
// repeated in a loop, its pieces read from shared memory, promoted
//   mode 0: not at all (the pieces stored as float, twice the shared reads),
//   mode 1: by the tensor cores, an m16n8k8 mma against the identity per 4
//           elements (as promote_mma in patch 0009),
//   mode 2: by cvt.f32.f16, one per element (HADD2.F32, as before it),
//   mode 3: the fmas alone, x and w promoted once before the loop (the
//           ceiling of the tile's 128 fmas at that many warps),
//   mode 4: mode 3 with the vectors innermost: consecutive fmas share w's
//           element, which ptxas then reads from the operand reuse cache,
//   mode 5: mode 1 with its fmas in mode 4's order,
// at as many warps per scheduler as every mode's registers allow. Each warp times its loop with clock64;
// the report is SM cycles per iteration and per scheduler, beside the
// instructions of an iteration (read from the SASS: cuda_sass.py loops -k
// tile_loop). Modes 0, 1, 2 and 5 must give the same bits, 3 and 4 too,
// and 3 (other sums) must differ from 0, the comparison's negative control.
// Build: nvcc -O3 -gencode=arch=compute_90a,code=sm_90a cuda_promote_cost.cu
//   -o promote_cost; run on the GPU: ./promote_cost [ITERS [WPS]] (WPS: only
// that many warps per scheduler, as bench/cuda_promote_cost_device.sh
// profiles it).
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <vector>

constexpr int kR = 2;  // rows a warp
constexpr int kV = 8;  // vectors
constexpr int kE = 8;  // elements a lane
constexpr int kSlots = 2;  // ring slots the loop walks through

#define CHECK(x)                                                    \
  do {                                                              \
    cudaError_t e = (x);                                            \
    if (e != cudaSuccess) {                                         \
      fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__,           \
              cudaGetErrorString(e));                               \
      return 1;                                                     \
    }                                                               \
  } while (0)

// As mma_identity in patch 0009: rows 2 * (lane % 4) and 2 * (lane % 4) + 1
// of column lane / 4 of the 8 x 8 float16 identity.
__device__ __forceinline__ uint32_t identity_b(int lane) {
  constexpr uint32_t one = 0x3c00;
  int col = lane / 4;
  int row = 2 * (lane % 4);
  return (col == row ? one : 0) | (col == row + 1 ? one << 16 : 0);
}

__device__ __forceinline__ void promote_mma(const uint4& h, uint32_t id,
                                            float (&f)[kE]) {
  const uint32_t* w = reinterpret_cast<const uint32_t*>(&h);
#pragma unroll
  for (int i = 0; i < kE / 4; ++i) {
    asm("mma.sync.aligned.m16n8k8.row.col.f32.f16.f16.f32 "
        "{%0, %1, %2, %3}, {%4, %5}, {%6}, {%7, %7, %7, %7};\n"
        : "=f"(f[4 * i]), "=f"(f[4 * i + 1]), "=f"(f[4 * i + 2]),
          "=f"(f[4 * i + 3])
        : "r"(w[2 * i]), "r"(w[2 * i + 1]), "r"(id), "f"(0.0f));
  }
}

__device__ __forceinline__ void promote_cvt(const uint4& h, float (&f)[kE]) {
  const __half* p = reinterpret_cast<const __half*>(&h);
#pragma unroll
  for (int i = 0; i < kE; ++i) f[i] = __half2float(p[i]);
}

// A lane's piece of 8 elements as float: stored so (mode 0), or promoted
// from float16 by the tensor cores (modes 1, 5) or by cvt (the others).
template <int Mode>
__device__ __forceinline__ void to_float(const uint4* p, uint32_t id,
                                         float (&f)[kE]) {
  if constexpr (Mode == 0) {
    uint4 a = p[0], b = p[1];
    memcpy(&f[0], &a, 16);
    memcpy(&f[4], &b, 16);
  } else if constexpr (Mode == 1 || Mode == 5) {
    promote_mma(p[0], id, f);
  } else {
    promote_cvt(p[0], f);
  }
}

// The tile's 128 multiply-adds: vectors, rows, elements (the tile's order),
// or rows, elements, vectors (VectorsInnermost: consecutive ones share w's
// element).
template <bool VectorsInnermost>
__device__ __forceinline__ void fmas(const float (&xf)[kV][kE],
                                     const float (&wf)[kR][kE],
                                     float (&acc)[kR][kV][kE]) {
  if constexpr (VectorsInnermost) {
#pragma unroll
    for (int r = 0; r < kR; ++r)
#pragma unroll
      for (int i = 0; i < kE; ++i)
#pragma unroll
        for (int v = 0; v < kV; ++v)
          acc[r][v][i] = fmaf(xf[v][i], wf[r][i], acc[r][v][i]);
  } else {
#pragma unroll
    for (int v = 0; v < kV; ++v)
#pragma unroll
      for (int r = 0; r < kR; ++r)
#pragma unroll
        for (int i = 0; i < kE; ++i)
          acc[r][v][i] = fmaf(xf[v][i], wf[r][i], acc[r][v][i]);
  }
}

__device__ __forceinline__ void write_out(const float (&acc)[kR][kV][kE],
                                          float* out, long long* cycles,
                                          long long t) {
  float* o = out + (blockIdx.x * blockDim.x + threadIdx.x) * kR * kV * kE;
#pragma unroll
  for (int r = 0; r < kR; ++r)
#pragma unroll
    for (int v = 0; v < kV; ++v)
#pragma unroll
      for (int i = 0; i < kE; ++i) o[(r * kV + v) * kE + i] = acc[r][v][i];
  if (threadIdx.x % 32 == 0) {
    cycles[blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32] = t;
  }
}

template <int Mode>
__global__ void __launch_bounds__(128) tile_loop(const uint4* src, float* out,
                                                 long long* cycles, int iters) {
  // A slot: the x pieces of kV vectors and the w pieces of the warps' kR
  // rows, 16 bytes (8 halves) a lane, or 32 (8 floats) in mode 0.
  constexpr int piece = Mode == 0 ? 2 : 1;  // uint4s per piece
  constexpr int slot_pieces = (kV + 4 * kR) * 32 * piece;
  __shared__ uint4 ring[kSlots * slot_pieces];
  int lane = threadIdx.x % 32;
  int warp = threadIdx.x / 32;
  for (int i = threadIdx.x; i < kSlots * slot_pieces; i += blockDim.x) {
    ring[i] = src[i];
  }
  __syncthreads();
  uint32_t id = identity_b(lane);
  float acc[kR][kV][kE] = {};
  if constexpr (Mode == 3 || Mode == 4) {
    // The fmas alone: x and w promoted once, before the loop; mode 3 in the
    // tile's order (elements innermost), mode 4 with the vectors innermost,
    // so that consecutive fmas share w's element.
    float xf[kV][kE], wf[kR][kE];
#pragma unroll
    for (int v = 0; v < kV; ++v) promote_cvt(ring[v * 32 + lane], xf[v]);
#pragma unroll
    for (int r = 0; r < kR; ++r)
      promote_cvt(ring[kV * 32 + (warp * kR + r) * 32 + lane], wf[r]);
    long long t0 = clock64();
    for (int it = 0; it < iters; ++it) {
      fmas<Mode == 4>(xf, wf, acc);
    }
    long long t1 = clock64();
    write_out(acc, out, cycles, t1 - t0);
    return;
  }
  long long t0 = clock64();
  int slot = 0;
  for (int it = 0; it < iters; ++it) {
    const uint4* s = ring + slot * slot_pieces;
    float wf[kR][kE];
#pragma unroll
    for (int r = 0; r < kR; ++r) {
      to_float<Mode>(s + (kV * 32 + (warp * kR + r) * 32 + lane) * piece, id,
                     wf[r]);
    }
    if constexpr (Mode == 5) {
      // As mode 1, the fmas after every vector's promotion, vectors
      // innermost (consecutive fmas share w's element).
      float xf[kV][kE];
#pragma unroll
      for (int v = 0; v < kV; ++v) to_float<Mode>(s + v * 32 + lane, id, xf[v]);
      fmas<true>(xf, wf, acc);
    } else {
#pragma unroll
      for (int v = 0; v < kV; ++v) {
        float xf[kE];
        to_float<Mode>(s + (v * 32 + lane) * piece, id, xf);
#pragma unroll
        for (int r = 0; r < kR; ++r) {
#pragma unroll
          for (int i = 0; i < kE; ++i) {
            acc[r][v][i] = fmaf(xf[i], wf[r][i], acc[r][v][i]);
          }
        }
      }
    }
    slot = slot + 1 == kSlots ? 0 : slot + 1;
  }
  long long t1 = clock64();
  write_out(acc, out, cycles, t1 - t0);
}

using Kernel = void (*)(const uint4*, float*, long long*, int);

int run(Kernel k, int sms, int warps_per_scheduler, int iters, const uint4* src,
        float* out, long long* cycles, std::vector<float>& result,
        double* cyc_per_iter, float* ms) {
  // 4 schedulers a multiprocessor; blocks of 4 warps (one a scheduler),
  // warps_per_scheduler of them a multiprocessor.
  int blocks = sms * warps_per_scheduler;
  int warps = blocks * 4;
  cudaEvent_t a, b;
  CHECK(cudaEventCreate(&a));
  CHECK(cudaEventCreate(&b));
  k<<<blocks, 128>>>(src, out, cycles, iters);  // warm-up
  CHECK(cudaEventRecord(a));
  k<<<blocks, 128>>>(src, out, cycles, iters);
  CHECK(cudaEventRecord(b));
  CHECK(cudaEventSynchronize(b));
  CHECK(cudaGetLastError());
  CHECK(cudaEventElapsedTime(ms, a, b));
  std::vector<long long> c(warps);
  CHECK(cudaMemcpy(c.data(), cycles, warps * sizeof(long long),
                   cudaMemcpyDeviceToHost));
  long long sum = 0;
  for (long long x : c) sum += x;
  *cyc_per_iter = double(sum) / warps / iters;
  result.resize(size_t(warps) * 32 * kR * kV * kE);
  CHECK(cudaMemcpy(result.data(), out, result.size() * sizeof(float),
                   cudaMemcpyDeviceToHost));
  return 0;
}

constexpr int kModes = 6;
const Kernel kKernels[kModes] = {tile_loop<0>, tile_loop<1>, tile_loop<2>,
                                 tile_loop<3>, tile_loop<4>, tile_loop<5>};

int main(int argc, char** argv) {
  int iters = argc > 1 ? atoi(argv[1]) : 4096;
  int only = argc > 2 ? atoi(argv[2]) : 0;
  int dev, sms;
  CHECK(cudaGetDevice(&dev));
  CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  int regs[kModes], fits[kModes], fit_all = 4;
  for (int m = 0; m < kModes; ++m) {
    cudaFuncAttributes attr;
    CHECK(cudaFuncGetAttributes(&attr, kKernels[m]));
    regs[m] = attr.numRegs;
    CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&fits[m], kKernels[m],
                                                        128, 0));
    fit_all = fits[m] < fit_all ? fits[m] : fit_all;
  }

  // Random float16 pieces (finite, never zero), and the same values as
  // float for mode 0: all modes multiply the same numbers.
  constexpr int slot_pieces = (kV + 4 * kR) * 32;
  size_t n = size_t(kSlots) * slot_pieces * 8;
  std::vector<__half> h(n);
  std::vector<float> f(n);
  uint32_t s = 12345;
  for (size_t i = 0; i < n; ++i) {
    s = s * 1664525u + 1013904223u;
    float v = ((s >> 9) % 2000 + 1) / 1024.0f * ((s >> 5) & 1 ? 1 : -1);
    h[i] = __float2half(v);
    f[i] = __half2float(h[i]);
  }
  uint4 *src_h, *src_f;
  float* out;
  long long* cycles;
  int max_warps = sms * 4 * 4;
  CHECK(cudaMalloc(&src_h, n * sizeof(__half)));
  CHECK(cudaMalloc(&src_f, n * sizeof(float)));
  CHECK(cudaMalloc(&out, size_t(max_warps) * 32 * kR * kV * kE * sizeof(float)));
  CHECK(cudaMalloc(&cycles, max_warps * sizeof(long long)));
  CHECK(cudaMemcpy(src_h, h.data(), n * sizeof(__half), cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(src_f, f.data(), n * sizeof(float), cudaMemcpyHostToDevice));

  printf("sms %d, %d iterations\n", sms, iters);
  for (int m = 0; m < kModes; ++m) {
    printf("mode %d: %d registers, %d warps per scheduler fit\n", m, regs[m],
           fits[m]);
  }
  printf("warps/scheduler,mode,cycles_per_iter_per_warp,"
         "cycles_per_iter_per_scheduler,ms\n");
  int bad = 0;
  for (int wps = 1; wps <= fit_all; ++wps) {
    if (only && wps != only) {
      continue;
    }
    std::vector<float> r[kModes];
    for (int m = 0; m < kModes; ++m) {
      double c;
      float ms;
      if (run(kKernels[m], sms, wps, iters, m == 0 ? src_f : src_h, out,
              cycles, r[m], &c, &ms)) {
        return 1;
      }
      printf("%d,%d,%.1f,%.1f,%.3f\n", wps, m, c, c / wps, ms);
    }
    // The tile's modes must agree bitwise (the values are exact in
    // float16), and the fma-only ones with each other.
    size_t bytes = r[0].size() * sizeof(float);
    if (memcmp(r[1].data(), r[0].data(), bytes) != 0 ||
        memcmp(r[2].data(), r[0].data(), bytes) != 0 ||
        memcmp(r[5].data(), r[0].data(), bytes) != 0 ||
        memcmp(r[4].data(), r[3].data(), bytes) != 0) {
      printf("MISMATCH at %d warps per scheduler\n", wps);
      bad = 1;
    }
    // The negative control: modes 3 and 4 sum other products (slot 0's in
    // every iteration), so the comparison must report them different.
    if (memcmp(r[3].data(), r[0].data(), bytes) == 0) {
      printf("CONTROL FAILED at %d warps per scheduler: mode 3 equals mode 0\n",
             wps);
      bad = 1;
    }
  }
  printf(bad ? "RESULT: modes differ\n"
             : "RESULT: modes 0, 1, 2, 5 bitwise equal; 3, 4 equal; control "
               "(3 against 0) different\n");
  return bad;
}
