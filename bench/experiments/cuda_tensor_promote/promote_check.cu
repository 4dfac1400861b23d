// Every float16 and bfloat16 bit pattern promoted to float by one m16n8k8
// mma with the identity as B and zero as C (promote_mma in promote.diff),
// against the exact conversion (__half2float, __bfloat162float), on the GPU.
//
// Finite values: each of them in every column of an mma row (lanes 4g to
// 4g + 3 hold a row, two elements each; the row's other elements random
// finite values), in 16 rounds: the result must be the conversion's bits,
// except that -0 may come back as +0 (counted). Non-finite values: a row with
// one infinity or NaN must come back as NaN in its other elements, and the
// infinity or NaN itself must stay infinity or NaN (counted); that is the
// contamination promote_mma's caller recomputes. Prints one line per type
// and exits 1 if a finite value came back other than exactly.
//
// Negative control: the same check with B the identity's columns rotated by
// one (each element of D is its row's neighbour) must report wrong values,
// or the check could not fail and its verdict does not count (exit 1).
//
// Build: nvcc -std=c++17 -O2 -gencode=arch=compute_90a,code=sm_90a
//        promote_check.cu -o promote_check
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>

#define CK(x)                                                            \
  do {                                                                   \
    cudaError_t e = (x);                                                 \
    if (e != cudaSuccess) {                                              \
      fprintf(stderr, "%s:%d %s\n", __FILE__, __LINE__,                  \
              cudaGetErrorString(e));                                    \
      return 2;                                                          \
    }                                                                    \
  } while (0)

__device__ uint32_t hash32(uint32_t i, uint32_t seed) {
  uint32_t h = i * 0x9E3779B1u ^ seed * 0x85EBCA77u;
  h ^= h >> 15;
  h *= 0x2C1B3C6Du;
  h ^= h >> 12;
  h *= 0x297A2D39u;
  h ^= h >> 15;
  return h;
}

template <bool bf16>
__device__ bool finite_bits(uint32_t b) {
  return bf16 ? (b & 0x7f80) != 0x7f80 : (b & 0x7c00) != 0x7c00;
}

template <bool bf16>
__device__ float exact(uint32_t b) {
  if (bf16) {
    __nv_bfloat16_raw r;
    r.x = uint16_t(b);
    return __bfloat162float(__nv_bfloat16(r));
  } else {
    __half_raw r;
    r.x = uint16_t(b);
    return __half2float(__half(r));
  }
}

// B is the identity, or for the negative control the identity with its
// columns rotated by one.
template <bool bf16, bool rotated>
__device__ void mma_identity(uint32_t a0, uint32_t a1, float (&d)[4]) {
  int lane = threadIdx.x % 32;
  uint32_t one = bf16 ? 0x3f80 : 0x3c00;
  int col = (lane / 4 + (rotated ? 1 : 0)) % 8, row = 2 * (lane % 4);
  uint32_t b = (col == row ? one : 0) | (col == row + 1 ? one << 16 : 0);
  if (bf16) {
    asm("mma.sync.aligned.m16n8k8.row.col.f32.bf16.bf16.f32 "
        "{%0, %1, %2, %3}, {%4, %5}, {%6}, {%7, %8, %9, %10};\n"
        : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
        : "r"(a0), "r"(a1), "r"(b), "f"(0.0f), "f"(0.0f), "f"(0.0f),
          "f"(0.0f));
  } else {
    asm("mma.sync.aligned.m16n8k8.row.col.f32.f16.f16.f32 "
        "{%0, %1, %2, %3}, {%4, %5}, {%6}, {%7, %8, %9, %10};\n"
        : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
        : "r"(a0), "r"(a1), "r"(b), "f"(0.0f), "f"(0.0f), "f"(0.0f),
          "f"(0.0f));
  }
}

// counts: 0 finite checked, 1 finite wrong, 2 -0 as +0, 3 non-finite rows,
// 4 non-finite rows not all NaN around the special, 5 special not kept.
template <bool bf16, bool rotated>
__global__ void check(unsigned long long* counts, int round) {
  int lane = threadIdx.x % 32;
  int warp = (blockIdx.x * blockDim.x + threadIdx.x) / 32;
  // Warp w tests patterns 32 w .. 32 w + 31 (all 65536 with 2048 warps):
  // pattern 32 w + j goes to row j % 16 (the lanes of row g: 4g..4g+3 for
  // g < 8 in a0/a1's words, rows 8..15 in a1), column picked by the round.
  // Every element first gets a random finite value.
  uint16_t e[4];
  for (int i = 0; i < 4; ++i) {
    uint32_t h = hash32(warp * 128 + lane * 4 + i, 977 * round + 13);
    uint16_t v = uint16_t(h);
    // Random finite: clear one exponent bit where all are set.
    if (!finite_bits<bf16>(v)) v ^= bf16 ? 0x0080 : 0x0400;
    e[i] = v;
  }
  // Element i of a lane: a0 lo/hi (row lane/4, columns 2(lane%4), +1),
  // a1 lo/hi (row lane/4 + 8). Row r, column c is lane 4 (r % 8) + c / 2,
  // element (r >= 8 ? 2 : 0) + c % 2.
  int tested_pattern[4] = {-1, -1, -1, -1};
  for (int j = 0; j < 32; ++j) {
    int pattern = warp * 32 + j;
    if (pattern >= 65536) break;
    int r = j % 16;
    int c = (j / 16 * 4 + round) % 8;  // two patterns per row, columns apart
    int l = 4 * (r % 8) + c / 2;
    int i = (r >= 8 ? 2 : 0) + c % 2;
    if (lane == l) {
      e[i] = uint16_t(pattern);
      tested_pattern[i] = pattern;
    }
  }
  uint32_t a0 = e[0] | uint32_t(e[1]) << 16;
  uint32_t a1 = e[2] | uint32_t(e[3]) << 16;
  float d[4];
  mma_identity<bf16, rotated>(a0, a1, d);
  // Does this element's row hold a non-finite value? The row's 4 lanes.
  bool special[4];
  for (int i = 0; i < 4; ++i) special[i] = !finite_bits<bf16>(e[i]);
  bool row_lo = special[0] || special[1];
  bool row_hi = special[2] || special[3];
  unsigned grp = 0xFu << (4 * (lane / 4));
  row_lo = (__ballot_sync(0xffffffffu, row_lo) & grp) != 0;
  row_hi = (__ballot_sync(0xffffffffu, row_hi) & grp) != 0;
  for (int i = 0; i < 4; ++i) {
    bool in_special_row = i < 2 ? row_lo : row_hi;
    uint32_t got = __float_as_uint(d[i]);
    if (in_special_row) {
      if (tested_pattern[i] >= 0) atomicAdd(&counts[3], 1ull);
      if (special[i]) {
        // The infinity or NaN itself: a NaN, or the infinity when alone.
        if (!isnan(d[i]) && !isinf(d[i])) atomicAdd(&counts[5], 1ull);
      } else if (!isnan(d[i])) {
        atomicAdd(&counts[4], 1ull);
      }
      continue;
    }
    uint32_t want = __float_as_uint(exact<bf16>(e[i]));
    if (tested_pattern[i] >= 0) atomicAdd(&counts[0], 1ull);
    if (got == want) continue;
    if (want == 0x80000000u && got == 0) {
      atomicAdd(&counts[2], 1ull);
      continue;
    }
    atomicAdd(&counts[1], 1ull);
    if (!rotated && counts[1] < 8)
      printf("%s: pattern 0x%04x (round %d) came back as 0x%08x, want 0x%08x\n",
             bf16 ? "bf16" : "fp16", e[i], round, got, want);
  }
}

template <bool bf16, bool rotated>
int run(unsigned long long (&h)[6]) {
  unsigned long long* counts;
  CK(cudaMalloc(&counts, 6 * sizeof(unsigned long long)));
  CK(cudaMemset(counts, 0, 6 * sizeof(unsigned long long)));
  for (int round = 0; round < 16; ++round) {
    check<bf16, rotated><<<2048 / 4, 128>>>(counts, round);
    CK(cudaGetLastError());
  }
  CK(cudaMemcpy(h, counts, sizeof(h), cudaMemcpyDeviceToHost));
  cudaFree(counts);
  return 0;
}

template <bool bf16>
int run(const char* name) {
  unsigned long long h[6], control[6];
  if (run<bf16, true>(control) || run<bf16, false>(h)) return 2;
  if (control[1] == 0) {
    printf("MMA PROMOTE %s FAILED: the negative control (identity rotated "
           "by a column) was not reported as different\n",
           name);
    return 1;
  }
  printf("MMA PROMOTE %s negative control: %llu elements reported as "
         "different with the identity rotated by a column\n",
         name, control[1]);
  bool ok = h[1] == 0 && h[0] > 0;
  printf("MMA PROMOTE %s %s: %llu elements in rows of finite values (every "
         "finite pattern in 16 rounds, 8 columns), %llu not the exact "
         "conversion, %llu -0 as +0; %llu tested in rows with an infinity or "
         "NaN, %llu of their neighbours not NaN, %llu specials not kept\n",
         name, ok ? "OK" : "FAILED", h[0], h[1], h[2], h[3], h[4], h[5]);
  return ok ? 0 : 1;
}

int main() {
  int rc = run<false>("fp16");
  rc |= run<true>("bf16");
  return rc;
}
