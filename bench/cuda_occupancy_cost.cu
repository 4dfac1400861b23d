// Host cost of the occupancy query launch_qmv_streamed makes on every ring
// launch (qmv_streamed_full_blocks: cudaGetDevice, the multiprocessor count,
// cudaOccupancyMaxActiveBlocksPerMultiprocessor), beside a kernel launch's.
// Build: nvcc -O2 -gencode=arch=compute_90a,code=sm_90a cuda_occupancy_cost.cu
//   -o occ; run on the GPU: ./occ
#include <chrono>
#include <cstdio>
#include <cuda_runtime.h>
__global__ void k(float* p, int n) {
  extern __shared__ float s[];
  float acc = 0;
  for (int i = threadIdx.x; i < n; i += blockDim.x) acc += p[i] * s[i % 256];
  p[threadIdx.x] = acc;
}
int main() {
  int dev, sms, per;
  cudaFree(0);
  cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per, k, 64, 25344);  // warm
  const int N = 100000;
  auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < N; ++i) {
    cudaGetDevice(&dev);
    cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
    cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per, k, 64, 25344);
  }
  auto t1 = std::chrono::steady_clock::now();
  double us = std::chrono::duration<double, std::micro>(t1 - t0).count() / N;
  printf("sms %d blocks/SM %d: %.3f us per query (getDevice + attribute + occupancy)\n", sms, per, us);
  t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < N; ++i) cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per, k, 64, 25344);
  t1 = std::chrono::steady_clock::now();
  printf("occupancy alone: %.3f us\n", std::chrono::duration<double, std::micro>(t1 - t0).count() / N);
  float* p; cudaMalloc(&p, 4096);
  cudaStream_t st; cudaStreamCreate(&st);
  t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < 20000; ++i) k<<<1, 64, 1024, st>>>(p, 64);
  t1 = std::chrono::steady_clock::now();
  cudaStreamSynchronize(st);
  printf("a kernel launch for scale: %.3f us\n", std::chrono::duration<double, std::micro>(t1 - t0).count() / 20000);
  return 0;
}
