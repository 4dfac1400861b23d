// Parity and timing harness for MLX's CUDA qmv (stock) against the streamed
// variant (patched), called through raw device pointers (see qmv_api.h).
//
// Parity: for every shape/dtype/bits and every M in 1..16, every row of every
// streamed launch is compared bitwise with the stock kernel run at M = 1 on
// that row alone; outputs are poisoned before each launch. Numerics: a few
// rows of the stock M = 1 result against a float64 CPU reference. Negative
// control: per shape, dtype and width (and per K of the batched products),
// stock_qmv_other_order (the configuration matrix's control, linked from
// stock_matrix.o) at M = 16 must be reported as different.
// Timing: CUDA graphs of R launches, each on its own weight set (R sets span
// more than 256 MB, far beyond the 50 MB L2), replayed after a warm-up; the
// figure is the median over replays of (replay time / R), so it includes the
// small gaps between kernels of a graph.
//
// Ragged K (--ragged): K that is not a whole number of the streamed kernel's
// tiles (512 elements at 4 bits, 256 at 8), whose last elements it reads as
// stock's residue step does: parity on such shapes (and B = 3 batches), and
// the dispatch and every instantiated configuration timed at M = 1, 2, 4, 8,
// 16 on 3840 x 15360 (ragged at 4 bits) and 4096 x 14336 (whole tiles)
// against stock.
//
// Usage: qmv_bench [--quick] [--ragged] [--bits 2|3|4|5|6|8] [--out DIR]
#include "qmv_api.h"
#include "qmv_harness.cuh"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdarg>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <tuple>
#include <vector>

static FILE* g_csv = nullptr;

__global__ void fill_u32(uint32_t* p, size_t n, uint32_t seed) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n;
       i += size_t(gridDim.x) * blockDim.x)
    p[i] = hash32(i, seed);
}

static float to_float(uint16_t h, int dtype) {
  if (dtype == 0) {
    uint32_t u = uint32_t(h) << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
  }
  __half_raw r;
  r.x = h;
  return __half2float(__half(r));
}

struct Shape {
  int n, k;
  bool timed = true;
};

struct Sets {
  // R weight sets (w, scales, biases) and the x / out buffers.
  int R;
  std::vector<void*> w, s, b;

  void release() {
    for (int r = 0; r < R; ++r) {
      cudaFree(w[r]);
      cudaFree(s[r]);
      cudaFree(b[r]);
    }
  }
};

static const int kGroup = 64;
// QmvArgs::tail of the launches make_args describes.
static int g_tail = QMV_TAIL_PICKED;
// QmvArgs::l of those launches: batches of M vectors each, as x of shape
// (B, M, K) gives them (--time's B), over the same (broadcast) weights or,
// g_broadcast false, over weights of their own (w of shape (B, N, K)).
static int g_batches = 1;
static bool g_broadcast = true;

static QmvArgs make_args(int dtype, int bits, const void* x, const void* w,
                         const void* s, const void* b, void* out, int m,
                         int n, int k, cudaStream_t st) {
  QmvArgs a{};
  a.dtype = dtype;
  a.bits = bits;
  a.group = kGroup;
  a.x = x;
  a.w = w;
  a.scales = s;
  a.biases = b;
  a.out = out;
  a.m = m;
  a.n = n;
  a.k = k;
  a.l = g_batches;
  a.broadcast_w = g_broadcast;
  a.stream = st;
  a.tail = g_tail;
  return a;
}

enum Impl { STOCK = 0, PATCHED_QMV = 1, AUTO = 2, EXPLICIT = 3, QMM_SM80 = 4 };

static int launch(Impl impl, const QmvArgs& a, int R = 0, int V = 0,
                  int G = 0, int D = 0) {
  switch (impl) {
    case STOCK:
      return stock_qmv(&a);
    case PATCHED_QMV:
      return patched_qmv(&a);
    case AUTO:
      return patched_qmv_streamed_auto(&a);
    case EXPLICIT:  // G is the number of warps per block
      return patched_qmv_streamed(&a, R, V, G, D);
    case QMM_SM80:
      return stock_qmm_sm80(&a);
  }
  return -1;
}

static const char* impl_name(Impl i) {
  switch (i) {
    case STOCK:
      return "stock_qmv";
    case PATCHED_QMV:
      return "patched_qmv_kernel";
    case AUTO:
      return "streamed_auto";
    case EXPLICIT:
      return "streamed";
    case QMM_SM80:
      return "qmm_sm80";
  }
  return "?";
}

// Median time per launch (us) over graph replays of R launches, one per set.
static double time_impl(Impl impl, int dtype, int bits, const Shape& sh,
                        const Sets& sets, const void* x, void* out, int m,
                        cudaStream_t st, int R, int V, int G, int D,
                        int reps) {
  return median_graph_us(st, sets.R, reps, [&](cudaStream_t s) {
    int rc = 0;
    for (int r = 0; r < sets.R; ++r) {
      QmvArgs a = make_args(dtype, bits, x, sets.w[r], sets.s[r], sets.b[r],
                            out, m, sh.n, sh.k, s);
      rc |= launch(impl, a, R, V, G, D);
    }
    return rc;
  });
}

// Scale magnitude s0 and half range hr of the random scales and biases for
// `bits`-bit weights (fill_vals): outputs of order one.
static void quant_scale(int bits, float& s0, float& hr) {
  s0 = bits == 2   ? 0.01f
       : bits == 3 ? 0.006f
       : bits == 4 ? 0.004f
       : bits == 5 ? 0.002f
       : bits == 6 ? 0.001f
                   : 0.00025f;
  hr = ((1 << bits) - 1) / 2.0f;
}

// R weight sets of random packed weights and random scales and biases.
static Sets make_sets(int dtype, int bits, size_t w_bytes, size_t sb_elems,
                      int R, uint32_t seed, cudaStream_t st) {
  Sets sets;
  sets.R = R;
  float s0, hr;
  quant_scale(bits, s0, hr);
  for (int r = 0; r < R; ++r) {
    void *w, *s, *b;
    CK(cudaMalloc(&w, w_bytes));
    CK(cudaMalloc(&s, sb_elems * 2));
    CK(cudaMalloc(&b, sb_elems * 2));
    fill_u32<<<1024, 256, 0, st>>>((uint32_t*)w, w_bytes / 4, seed * 31 + r);
    if (dtype == 0) {
      fill_vals<<<256, 256, 0, st>>>((__nv_bfloat16*)s, sb_elems,
                                     seed * 37 + r, 1, s0, hr);
      fill_vals<<<256, 256, 0, st>>>((__nv_bfloat16*)b, sb_elems,
                                     seed * 37 + r, 2, s0, hr);
    } else {
      fill_vals<<<256, 256, 0, st>>>((__half*)s, sb_elems, seed * 37 + r, 1,
                                     s0, hr);
      fill_vals<<<256, 256, 0, st>>>((__half*)b, sb_elems, seed * 37 + r, 2,
                                     s0, hr);
    }
    CK(cudaGetLastError());
    sets.w.push_back(w);
    sets.s.push_back(s);
    sets.b.push_back(b);
  }
  return sets;
}

// How many 16-bit outputs differ, bit for bit, in the first n.
static size_t count_diff(const std::vector<uint16_t>& a,
                         const std::vector<uint16_t>& b, size_t n) {
  size_t bad = 0;
  for (size_t i = 0; i < n; ++i) bad += a[i] != b[i];
  return bad;
}

// Batched products (B > 1), weights per batch or broadcast: every row of the
// streamed dispatch against the stock kernel at M = 1, B = 1 on that row. At
// M = 16 the negative control (stock_qmv_other_order) must differ; controls
// and controls_seen count it.
static bool batch_parity(cudaStream_t st, long long& rows_checked,
                         long long& controls, long long& controls_seen,
                         const std::vector<int>& bits_list, int K = 4096) {
  const int N = 2048, L = 3;
  bool ok = true;
  for (int dtype = 0; dtype < 2; ++dtype) {
    for (int bits : bits_list) {
      size_t w_bytes = size_t(N) * K * bits / 8, sb = size_t(N) * K / kGroup;
      size_t max_vecs = size_t(L) * 16;
      void *w, *sc, *bi, *x, *ref, *out;
      CK(cudaMalloc(&w, L * w_bytes));
      CK(cudaMalloc(&sc, L * sb * 2));
      CK(cudaMalloc(&bi, L * sb * 2));
      CK(cudaMalloc(&x, max_vecs * K * 2));
      CK(cudaMalloc(&ref, max_vecs * N * 2));
      CK(cudaMalloc(&out, max_vecs * N * 2));
      uint32_t seed = 77 + dtype * 3 + bits;
      fill_u32<<<1024, 256, 0, st>>>((uint32_t*)w, L * w_bytes / 4, seed);
      float s0, hr;
      quant_scale(bits, s0, hr);
      if (dtype == 0) {
        fill_vals<<<256, 256, 0, st>>>((__nv_bfloat16*)sc, L * sb, seed + 1, 1, s0, hr);
        fill_vals<<<256, 256, 0, st>>>((__nv_bfloat16*)bi, L * sb, seed + 1, 2, s0, hr);
        fill_vals<<<256, 256, 0, st>>>((__nv_bfloat16*)x, max_vecs * K, seed + 2, 0, 0, 0);
      } else {
        fill_vals<<<256, 256, 0, st>>>((__half*)sc, L * sb, seed + 1, 1, s0, hr);
        fill_vals<<<256, 256, 0, st>>>((__half*)bi, L * sb, seed + 1, 2, s0, hr);
        fill_vals<<<256, 256, 0, st>>>((__half*)x, max_vecs * K, seed + 2, 0, 0, 0);
      }
      CK(cudaGetLastError());
      std::vector<uint16_t> h_ref(max_vecs * N), h_out(max_vecs * N);
      for (bool bcast : {false, true}) {
        for (int m : {1, 2, 3, 4, 5, 7, 16}) {
          for (int l = 0; l < L; ++l) {
            int wl = bcast ? 0 : l;
            for (int i = 0; i < m; ++i) {
              size_t v = size_t(l) * m + i;
              QmvArgs a = make_args(dtype, bits, (const char*)x + v * K * 2,
                                    (const char*)w + wl * w_bytes,
                                    (const char*)sc + wl * sb * 2,
                                    (const char*)bi + wl * sb * 2,
                                    (char*)ref + v * N * 2, 1, N, K, st);
              if (stock_qmv(&a) != 0) return false;
            }
          }
          CK(cudaMemsetAsync(out, 0xFF, max_vecs * N * 2, st));
          QmvArgs a = make_args(dtype, bits, x, w, sc, bi, out, m, N, K, st);
          a.l = L;
          a.broadcast_w = bcast;
          if (patched_qmv_streamed_auto(&a) != 0) return false;
          CK(cudaStreamSynchronize(st));
          CK(cudaGetLastError());
          size_t cnt = size_t(L) * m * N;
          CK(cudaMemcpy(h_ref.data(), ref, cnt * 2, cudaMemcpyDeviceToHost));
          CK(cudaMemcpy(h_out.data(), out, cnt * 2, cudaMemcpyDeviceToHost));
          size_t bad = count_diff(h_ref, h_out, cnt);
          rows_checked += L * m;
          if (bad) {
            ok = false;
            logf("BATCH MISMATCH K=%d %s %d-bit B=%d M=%d broadcast=%d: %zu "
                 "of %zu\n", K, dtype == 0 ? "bf16" : "fp16", bits, L, m,
                 int(bcast), bad, cnt);
          }
          if (m == 16) {
            CK(cudaMemsetAsync(out, 0xFF, cnt * 2, st));
            if (stock_qmv_other_order(&a) != 0) return false;
            CK(cudaStreamSynchronize(st));
            CK(cudaMemcpy(h_out.data(), out, cnt * 2, cudaMemcpyDeviceToHost));
            controls++;
            if (count_diff(h_ref, h_out, cnt) > 0) {
              controls_seen++;
            } else {
              ok = false;
              logf("BATCH CONTROL NOT DETECTED K=%d %s %d-bit B=%d "
                   "broadcast=%d: the other order matched stock M=1\n",
                   K, dtype == 0 ? "bf16" : "fp16", bits, L, int(bcast));
            }
          }
        }
      }
      cudaFree(w); cudaFree(sc); cudaFree(bi); cudaFree(x); cudaFree(ref); cudaFree(out);
    }
  }
  return ok;
}

// One launch of stock qmv at M = 1, then of each streamed configuration (or
// of qmm_sm80 at M, for sm80,M), on random data, for a profiler (ncu) to
// measure; nothing is checked or timed.
static int profile(int argc, char** argv) {
  int dtype, bits, k, n;
  if (sscanf(argv[0], "%d,%d,%d,%d", &dtype, &bits, &k, &n) != 4) return 2;
  cudaStream_t st;
  CK(cudaStreamCreate(&st));
  size_t w_bytes = size_t(n) * k * bits / 8, sb = size_t(n) * k / kGroup;
  void *w, *sc, *bi, *x, *out;
  CK(cudaMalloc(&w, w_bytes));
  CK(cudaMalloc(&sc, sb * 2));
  CK(cudaMalloc(&bi, sb * 2));
  CK(cudaMalloc(&x, size_t(16) * k * 2));
  CK(cudaMalloc(&out, size_t(16) * n * 2));
  fill_u32<<<1024, 256, 0, st>>>((uint32_t*)w, w_bytes / 4, 5);
  float s0, hr;
  quant_scale(bits, s0, hr);
  if (dtype == 0) {
    fill_vals<<<256, 256, 0, st>>>((__nv_bfloat16*)sc, sb, 6, 1, s0, hr);
    fill_vals<<<256, 256, 0, st>>>((__nv_bfloat16*)bi, sb, 6, 2, s0, hr);
    fill_vals<<<256, 256, 0, st>>>((__nv_bfloat16*)x, size_t(16) * k, 7, 0, 0, 0);
  } else {
    fill_vals<<<256, 256, 0, st>>>((__half*)sc, sb, 6, 1, s0, hr);
    fill_vals<<<256, 256, 0, st>>>((__half*)bi, sb, 6, 2, s0, hr);
    fill_vals<<<256, 256, 0, st>>>((__half*)x, size_t(16) * k, 7, 0, 0, 0);
  }
  QmvArgs a = make_args(dtype, bits, x, w, sc, bi, out, 1, n, k, st);
  int rc = stock_qmv(&a);
  for (int i = 1; i < argc; ++i) {
    int W, R, V, D, M;
    if (sscanf(argv[i], "sm80,%d", &M) == 1) {
      a.m = M;
      rc |= launch(QMM_SM80, a);
      continue;
    }
    if (sscanf(argv[i], "%d,%d,%d,%d,%d", &W, &R, &V, &D, &M) != 5) return 2;
    a.m = M;
    rc |= W == 0 ? launch(AUTO, a) : launch(EXPLICIT, a, R, V, W, D);
  }
  CK(cudaStreamSynchronize(st));
  CK(cudaGetLastError());
  printf("profile launches rc=%d\n", rc);
  return rc ? 1 : 0;
}

// The read roofline of a product: the least time in which the device reads
// the bytes qmv reads at M = 1 (packed weights, scales and biases of one set),
// best of a few grid shapes. Each thread keeps U 16-byte loads in flight and
// folds them into one word that is stored only if it matches a value it never
// takes, so the loads stay live and nothing is written.
template <int U, bool L2_256B>
__global__ void read_sets(const uint4* w, size_t nw, const uint4* s, size_t ns,
                          const uint4* b, size_t nb, uint32_t* sink) {
  uint32_t acc = 0;
  size_t stride = size_t(gridDim.x) * blockDim.x;
  size_t i0 = blockIdx.x * size_t(blockDim.x) + threadIdx.x;
  auto load = [](const uint4* p) {
    uint4 v;
    if constexpr (L2_256B) {
      asm volatile(
          "ld.global.nc.L1::no_allocate.L2::256B.v4.u32 {%0, %1, %2, %3}, [%4];"
          : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
          : "l"(p));
    } else {
      v = __ldcs(p);
    }
    return v;
  };
  auto sweep = [&](const uint4* p, size_t n) {
    size_t j = i0;
    for (; j + (U - 1) * stride < n; j += U * stride) {
      uint4 v[U];
#pragma unroll
      for (int u = 0; u < U; ++u) v[u] = load(p + j + u * stride);
#pragma unroll
      for (int u = 0; u < U; ++u) acc ^= v[u].x ^ v[u].y ^ v[u].z ^ v[u].w;
    }
    for (; j < n; j += stride) {
      uint4 v = load(p + j);
      acc ^= v.x ^ v.y ^ v.z ^ v.w;
    }
  };
  sweep(w, nw);
  sweep(s, ns);
  sweep(b, nb);
  if (acc == 0x9E3779B9u) sink[0] = acc;
}

struct ReadConfig {
  int blocks_per_sm, threads, unroll;
  bool l2_256b;
};

// Median microseconds of one read of every set (one launch per set, as
// time_impl), for one grid shape.
static double time_read(const ReadConfig& c, const Sets& sets, size_t w_bytes,
                        size_t sb_bytes, uint32_t* sink, int sms,
                        cudaStream_t st, int reps) {
  return median_graph_us(st, sets.R, reps, [&](cudaStream_t s) {
    for (int r = 0; r < sets.R; ++r) {
      dim3 grid(c.blocks_per_sm * sms), block(c.threads);
      auto args = std::make_tuple(
          (const uint4*)sets.w[r], w_bytes / 16, (const uint4*)sets.s[r],
          sb_bytes / 16, (const uint4*)sets.b[r], sb_bytes / 16, sink);
#define READ_CASE(U, H)                                                   \
  if (c.unroll == U && c.l2_256b == H) {                                  \
    std::apply([&](auto... a) { read_sets<U, H><<<grid, block, 0, s>>>(a...); }, \
               args);                                                     \
  }
      READ_CASE(4, false) READ_CASE(8, false) READ_CASE(4, true)
      READ_CASE(8, true)
#undef READ_CASE
    }
    return int(cudaGetLastError());
  });
}

// qmm_sm80 at M on weight set 0 against stock qmv at M (one warp per row
// and vector: each row the M = 1 row), outputs poisoned first: how many rows
// are bitwise identical, and the largest difference over the largest
// |stock|. A launch that misreads its operands gives order one there; the
// two summation orders, about 1e-2 or less. -1 where qmm_sm80 refused.
// misses counts the outputs off by more than 5% of the largest |stock| and
// names the first of them (row, column), to tell a misread launch (every
// row) from a few wrong tiles.
struct QmmMisses {
  int count = 0;
  int row = -1;
  int col = -1;
  int stock_changed = 0;  // outputs of stock that differ between two runs
};
static double check_qmm(int dtype, int bits, const Shape& sh, const Sets& sets,
                        const void* x, int m, cudaStream_t st,
                        int* same_rows, QmmMisses* misses) {
  size_t count = size_t(m) * sh.n;
  void *ref, *got;
  CK(cudaMalloc(&ref, count * 2));
  CK(cudaMalloc(&got, count * 2));
  CK(cudaMemsetAsync(ref, 0xff, count * 2, st));
  CK(cudaMemsetAsync(got, 0xff, count * 2, st));
  QmvArgs a = make_args(dtype, bits, x, sets.w[0], sets.s[0], sets.b[0], ref,
                        m, sh.n, sh.k, st);
  int rc = launch(STOCK, a);
  a.out = got;
  rc |= launch(QMM_SM80, a);
  CK(cudaStreamSynchronize(st));
  CK(cudaGetLastError());
  std::vector<uint16_t> r(count), g(count), r2(count);
  CK(cudaMemcpy(r.data(), ref, count * 2, cudaMemcpyDeviceToHost));
  CK(cudaMemcpy(g.data(), got, count * 2, cudaMemcpyDeviceToHost));
  // Stock again into the same buffer: a reference that changes is stock's
  // or the memory's fault, not qmm_sm80's.
  CK(cudaMemsetAsync(ref, 0xff, count * 2, st));
  a.out = ref;
  rc |= launch(STOCK, a);
  CK(cudaStreamSynchronize(st));
  CK(cudaMemcpy(r2.data(), ref, count * 2, cudaMemcpyDeviceToHost));
  cudaFree(ref);
  cudaFree(got);
  if (rc != 0) return -1;
  misses->stock_changed = 0;
  for (size_t e = 0; e < count; ++e) misses->stock_changed += r[e] != r2[e];
  double max_ref = 0, max_diff = 0;
  *same_rows = 0;
  for (int i = 0; i < m; ++i) {
    bool same = true;
    for (int j = 0; j < sh.n; ++j) {
      size_t e = size_t(i) * sh.n + j;
      float fr = to_float(r[e], dtype), fg = to_float(g[e], dtype);
      same &= r[e] == g[e];
      max_ref = std::max(max_ref, double(std::fabs(fr)));
      // NaN (an unwritten, poisoned output) counts as the largest difference.
      double d = std::fabs(double(fr) - double(fg));
      max_diff = std::isnan(d) ? INFINITY : std::max(max_diff, d);
    }
    *same_rows += same;
  }
  misses->count = 0;
  for (int i = 0; i < m; ++i)
    for (int j = 0; j < sh.n; ++j) {
      size_t e = size_t(i) * sh.n + j;
      double d = std::fabs(double(to_float(r[e], dtype)) -
                           double(to_float(g[e], dtype)));
      if (!(d <= 0.05 * max_ref)) {
        if (misses->count++ == 0) {
          misses->row = i;
          misses->col = j;
        }
      }
    }
  return max_ref > 0 ? max_diff / max_ref : INFINITY;
}

// --time DTYPE,BITS,K,N W,R,V,D,M[,T] ...: on weight sets rotated beyond the
// L2 as in the sweep, the read roofline of the M = 1 product (best grid
// shape), stock at M = 1 and at each other M listed (what MLX runs for M
// vectors where the streamed kernel does not), and each listed configuration
// (W = 0: the dispatch; T = 1: every block at full size, impl
// streamed_no_tail; T = 2: the last half of the row blocks at half size,
// impl streamed_half_tail; T = 4: every row block at half size, impl
// streamed_all_half; else the last wave as the launch picks it), as CSV
// rows (appended to DIR/cuda_qmv_time.csv with --out DIR). auto,M,B and
// sm80,M,B time the dispatch and qmm_sm80 on B batches of M vectors over
// broadcast weights (x of shape (B, M, K); impl *_bB), auto,M,B,1 and
// sm80,M,B,1 over weights of their own per batch (w of shape (B, N, K), as
// many sets rotated as that size needs; impl *_bBw). A spec sm80,M
// times the pin's qmm_sm80_kernel at M as MLX launches it (what MLX runs for
// 8 to 16 vectors), and checks it against stock qmv (check_qmm; a difference
// over 5% of the largest output fails the run). Nothing else is checked: the
// parity runs check these kernels.
static int time_configs(int argc, char** argv, const std::string& outdir,
                        int reps) {
  int dtype, bits, k, n;
  if (argc < 1 || sscanf(argv[0], "%d,%d,%d,%d", &dtype, &bits, &k, &n) != 4 ||
      dtype < 0 || dtype > 1 || bits < 2 || bits > 8 || bits == 7 ||
      k <= 0 || k % kGroup != 0 || n <= 0) {
    fprintf(stderr,
            "qmv_bench: --time %s: expected DTYPE,BITS,K,N (BITS 2, 3, 4, 5, "
            "6 or 8; K a multiple of the group size, 64)\n",
            argc < 1 ? "" : argv[0]);
    return 2;
  }
  cudaStream_t st;
  CK(cudaStreamCreate(&st));
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, 0));
  Shape sh{n, k};
  size_t w_bytes = size_t(n) * k * bits / 8;
  size_t sb_elems = size_t(n) * (k / kGroup);
  size_t set_bytes = w_bytes + 2 * sb_elems * 2;
  Sets sets = make_sets(dtype, bits, w_bytes, sb_elems,
                        sets_beyond_l2(set_bytes), 11, st);
  void *x, *out;
  uint32_t* sink;
  CK(cudaMalloc(&x, size_t(16) * k * 2));
  CK(cudaMalloc(&out, size_t(16) * n * 2));
  CK(cudaMalloc(&sink, 4));
  if (dtype == 0)
    fill_vals<<<256, 256, 0, st>>>((__nv_bfloat16*)x, size_t(16) * k, 17, 0, 0, 0);
  else
    fill_vals<<<256, 256, 0, st>>>((__half*)x, size_t(16) * k, 17, 0, 0, 0);
  CK(cudaStreamSynchronize(st));
  CK(cudaGetLastError());

  FILE* csv = fopen((outdir + "/cuda_qmv_time.csv").c_str(), "a");
  if (!csv) {
    fprintf(stderr, "qmv_bench: cannot append to %s/cuda_qmv_time.csv\n",
            outdir.c_str());
    return 2;
  }
  if (ftell(csv) == 0)
    fputs("shape,dtype,bits,impl,W,R,V,D,M,us,bytes,GBps\n", csv);
  char label[64];
  snprintf(label, sizeof(label), "%dx%d", k, n);
  const char* dname = dtype == 0 ? "bf16" : "fp16";
  // bytes: what one product reads of its weights, scales and biases.
  auto row = [&](const char* impl, int W, int R, int V, int D, int M,
                 double us, size_t bytes = 0) {
    if (bytes == 0) bytes = set_bytes;
    char line[256];
    snprintf(line, sizeof(line), "%s,%s,%d,%s,%d,%d,%d,%d,%d,%.2f,%zu,%.0f\n",
             label, dname, bits, impl, W, R, V, D, M, us, bytes,
             us > 0 ? bytes / (us * 1e-6) / 1e9 : 0.0);
    fputs(line, csv);
    fflush(csv);
    logf("%s", line);
  };
  double best_read = 1e30;
  ReadConfig best_cfg{};
  for (int bps : {2, 4, 8})
    for (int threads : {256, 512})
      for (int unroll : {4, 8})
        for (bool hint : {false, true}) {
          if (bps * threads > 2048) continue;
          ReadConfig c{bps, threads, unroll, hint};
          double us = time_read(c, sets, w_bytes, sb_elems * 2, sink,
                                prop.multiProcessorCount, st, reps);
          if (us > 0 && us < best_read) {
            best_read = us;
            best_cfg = c;
          }
        }
  row("read_roofline", best_cfg.blocks_per_sm, best_cfg.threads,
      best_cfg.unroll, best_cfg.l2_256b, 1, best_read);
  row("stock_qmv", 0, 0, 0, 0, 1,
      time_impl(STOCK, dtype, bits, sh, sets, x, out, 1, st, 0, 0, 0, 0, reps));
  int rc = 0;
  bool stock_timed[17] = {false, true};
  // Weight sets of B batches each (w of shape (B, N, K)), made on first use.
  std::map<int, Sets> batch_sets;
  // impl on B batches of M vectors (x of shape (B, M, K), as batched
  // decoding gives it) over broadcast weights, as impl_bB, or over weights
  // of their own per batch, as impl_bBw.
  auto time_batches = [&](Impl impl, const char* name, int M, int B,
                          bool own) {
    if (own && !batch_sets.count(B))
      batch_sets[B] = make_sets(dtype, bits, w_bytes * B, sb_elems * B,
                                sets_beyond_l2(set_bytes * B), 13, st);
    g_batches = B;
    g_broadcast = !own;
    double us = time_impl(impl, dtype, bits, sh, own ? batch_sets[B] : sets,
                          x, out, M, st, 0, 0, 0, 0, reps);
    g_batches = 1;
    g_broadcast = true;
    if (us < 0) rc = 1;
    char batched[32];
    snprintf(batched, sizeof(batched), "%s_b%d%s", name, B, own ? "w" : "");
    row(batched, 0, 0, 0, 0, M, us, own ? set_bytes * B : set_bytes);
  };
  for (int i = 1; i < argc; ++i) {
    int M, B = 1, own = 0;
    bool dispatch = sscanf(argv[i], "auto,%d,%d,%d", &M, &B, &own) >= 2;
    if (dispatch || sscanf(argv[i], "sm80,%d,%d,%d", &M, &B, &own) >= 1) {
      if (M < 1 || B < 1 || M * B > 16 || own < 0 || own > 1) {
        fprintf(stderr,
                "qmv_bench: --time %s: expected auto,M,B[,P] or sm80,M[,B[,P]] "
                "(M * B <= 16; P 1: weights per batch)\n",
                argv[i]);
        return 2;
      }
      if (dispatch || B > 1 || own) {
        time_batches(dispatch ? AUTO : QMM_SM80,
                     dispatch ? "streamed_auto" : "qmm_sm80", M, B, own == 1);
        continue;
      }
      double us = time_impl(QMM_SM80, dtype, bits, sh, sets, x, out, M, st, 0,
                            0, 0, 0, reps);
      int same = 0;
      QmmMisses misses;
      double rel = check_qmm(dtype, bits, sh, sets, x, M, st, &same, &misses);
      bool ok = us > 0 && rel >= 0 && rel < 0.05;
      if (!ok) rc = 1;
      row("qmm_sm80", 0, 0, 0, 0, M, us);
      logf("qmm_sm80 check %s %s %d-bit M=%d: rows identical to M = 1: %d/%d, "
           "max |qmm - stock| / max |stock| = %.3g: %s",
           label, dname, bits, M, same, M, rel,
           ok ? "ok" : "QMM_SM80 CHECK FAILED");
      if (misses.count > 0)
        logf(" (%d of %d outputs off by over 5%%, the first row %d column %d)",
             misses.count, M * n, misses.row, misses.col);
      if (misses.stock_changed > 0) {
        rc = 1;
        logf(" STOCK NOT REPEATABLE: %d outputs changed", misses.stock_changed);
      }
      logf("\n");
      continue;
    }
    int W, R, V, D, T = QMV_TAIL_PICKED;
    int fields = sscanf(argv[i], "%d,%d,%d,%d,%d,%d", &W, &R, &V, &D, &M, &T);
    if (fields < 5 || M < 1 || M > 16 ||
        (T != QMV_TAIL_PICKED && T != QMV_TAIL_NONE && T != QMV_TAIL_HALF &&
         T != QMV_TAIL_ALL_HALF)) {
      fprintf(stderr,
              "qmv_bench: --time %s: expected W,R,V,D,M[,T] (M 1..16; T 1: "
              "no half-size blocks in the last wave, 2: the last half of the "
              "row blocks at half size, 4: every row block at half size)\n",
              argv[i]);
      return 2;
    }
    if (!stock_timed[M]) {
      stock_timed[M] = true;
      row("stock_qmv", 0, 0, 0, 0, M,
          time_impl(STOCK, dtype, bits, sh, sets, x, out, M, st, 0, 0, 0, 0,
                    reps));
    }
    g_tail = T;
    double us = W == 0 ? time_impl(AUTO, dtype, bits, sh, sets, x, out, M, st,
                                   0, 0, 0, 0, reps)
                       : time_impl(EXPLICIT, dtype, bits, sh, sets, x, out, M,
                                   st, R, V, W, D, reps);
    g_tail = QMV_TAIL_PICKED;
    if (us < 0) rc = 1;
    row(W == 0                  ? "streamed_auto"
        : T == QMV_TAIL_NONE    ? "streamed_no_tail"
        : T == QMV_TAIL_HALF    ? "streamed_half_tail"
        : T == QMV_TAIL_ALL_HALF ? "streamed_all_half"
                                : "streamed",
        W, R, V, D, M, us);
  }
  fclose(csv);
  sets.release();
  for (auto& [b, bs] : batch_sets) bs.release();
  cudaFree(x);
  cudaFree(out);
  cudaFree(sink);
  return rc;
}

int main(int argc, char** argv) {
  bool quick = false, batch_only = false, ragged = false;
  // Weight widths: 4 and 8 bits unless --bits names one (2, 3, 4, 5, 6 or 8).
  std::vector<int> bits_list = {4, 8};
  std::string outdir = ".";
  for (int i = 1; i < argc; ++i) {
    if (!strcmp(argv[i], "--help")) {
      printf("usage: qmv_bench [--quick] [--ragged] [--batch-only] [--bits 2|3|4|5|6|8] [--out DIR]\n"
             "       qmv_bench --profile DTYPE,BITS,K,N W,R,V,D,M ...\n"
             "  --profile: launch stock M=1 and each streamed configuration\n"
             "  once (for ncu), no checks; DTYPE 0 = bf16, 1 = fp16;\n"
             "  W = 0 means the dispatch (qmv_streamed_auto); sm80,M\n"
             "  the pin's qmm_sm80 kernel at M (--profile and --time);\n"
             "  auto,M,B and sm80,M,B: B batches of broadcast weights (--time);\n"
             "  auto,M,B,1 and sm80,M,B,1: B batches of weights per batch\n"
             "       qmv_bench [--out DIR] [--quick] --time DTYPE,BITS,K,N W,R,V,D,M[,T] ...\n"
             "  --time: time the read roofline, stock M=1 and each\n"
             "  configuration on rotated weights (CSV; no checks);\n"
             "  BITS 2, 3, 4, 5, 6 or 8 (--time and --profile)\n");
      return 0;
    }
    if (!strcmp(argv[i], "--quick")) quick = true;
    if (!strcmp(argv[i], "--batch-only")) batch_only = true;
    if (!strcmp(argv[i], "--ragged")) ragged = true;
    if (!strcmp(argv[i], "--bits") && i + 1 < argc) {
      int bits = atoi(argv[++i]);
      if (bits < 2 || bits > 8 || bits == 7) {
        fprintf(stderr, "qmv_bench: --bits %s: 2, 3, 4, 5, 6 or 8\n", argv[i]);
        return 2;
      }
      bits_list = {bits};
    }
    if (!strcmp(argv[i], "--out") && i + 1 < argc) outdir = argv[++i];
    if (!strcmp(argv[i], "--profile") && i + 1 < argc)
      return profile(argc - i - 1, argv + i + 1);
    if (!strcmp(argv[i], "--time") && i + 1 < argc)
      return time_configs(argc - i - 1, argv + i + 1, outdir,
                          quick ? 10 : 30);
  }
  g_csv = fopen((outdir + "/cuda_qmv_timing.csv").c_str(), "w");
  g_log = fopen((outdir + "/cuda_qmv_log.txt").c_str(), "w");
  if (!g_csv || !g_log) {
    fprintf(stderr, "qmv_bench: cannot write to %s\n", outdir.c_str());
    return 2;
  }
  fprintf(g_csv, "shape,dtype,bits,impl,R,V,G,D,M,us,GBps,stock_m1_us\n");

  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, 0));
  int rt, drv;
  cudaRuntimeGetVersion(&rt);
  cudaDriverGetVersion(&drv);
  logf("device: %s, %d SMs, L2 %d MB, cc %d.%d, runtime %d, driver %d\n",
       prop.name, prop.multiProcessorCount, prop.l2CacheSize >> 20,
       prop.major, prop.minor, rt, drv);

  cudaStream_t st;
  CK(cudaStreamCreate(&st));

  // Copy-bandwidth ceiling: 2 GiB device-to-device copy.
  {
    size_t bytes = size_t(2) << 30;
    void *a, *b;
    CK(cudaMalloc(&a, bytes));
    CK(cudaMalloc(&b, bytes));
    CK(cudaMemsetAsync(a, 1, bytes, st));
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    std::vector<double> t;
    for (int i = 0; i < 6; ++i) {
      CK(cudaEventRecord(e0, st));
      CK(cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice, st));
      CK(cudaEventRecord(e1, st));
      CK(cudaEventSynchronize(e1));
      float ms;
      CK(cudaEventElapsedTime(&ms, e0, e1));
      if (i > 0) t.push_back(2.0 * bytes / (ms * 1e-3) / 1e9);
    }
    std::sort(t.begin(), t.end());
    logf("copy bandwidth (read + write): %.0f GB/s\n", t[t.size() / 2]);
    cudaFree(a);
    cudaFree(b);
  }

  long long batch_controls = 0, batch_controls_seen = 0;
  {
    // Ragged: K = 3840 (4-bit residue 256) and 3968 (8-bit residue 128).
    std::vector<int> ks = {4096};
    if (ragged) ks = {4096, 3840, 3968};
    bool bok = true;
    for (int K : ks) {
      long long batch_rows = 0, controls = 0, seen = 0;
      bool kok = batch_parity(st, batch_rows, controls, seen, bits_list, K);
      logf("BATCH PARITY %s: K = %d, N = 2048, B = 3, weights per batch and "
           "broadcast, M in {1,2,3,4,5,7,16}, %lld rows bitwise against "
           "stock M=1 B=1; negative control detected in %lld of %lld\n",
           kok ? "OK" : "FAILED", K, batch_rows, seen, controls);
      batch_controls += controls;
      batch_controls_seen += seen;
      bok &= kok;
    }
    if (batch_only) return bok ? 0 : 1;
    if (!bok) return 1;
  }
  // {N, K}; parity only: N where one or two 8-bit vectors take blocks of 16
  // rows (4096 < N <= 6144, N > 16384) or one does (N <= 10240), and where
  // 5- and 6-bit blocks of 4 vectors run two full waves and then half-size
  // row blocks (N = 20480; K of at least 5 tiles, for the turns).
  std::vector<Shape> shapes = {{14336, 4096},       {4096, 14336},
                               {4096, 4096},        {6144, 4096, false},
                               {8192, 2048, false}, {20480, 2048, false}};
  if (ragged) {
    // {N, K}. Residue at 4 / 8 bits: 3840: 256 / 0; 4096 + 256: 256 / 0;
    // 3840 + 128: 384 / 128; 11008: 256 / 0; 4096 + 64: 64 / 64 (scale rows
    // of 130 bytes: not supported, the stock kernel runs); 15360: 0 / 0.
    shapes = {{2048, 3840, false},  {2048, 4352, false},
              {2048, 3968, false},  {2048, 11008, false},
              {2048, 4160, false},  {3840, 15360, false},
              {15360, 3840, true},  {14336, 4096, true}};
  }
  const int reps = quick ? 10 : 30;
  const int kMaxM = 16;
  bool all_ok = true;
  long long rows_checked = 0, launches_checked = 0, controls = 0,
            controls_seen = 0;

  for (const Shape& sh : shapes) {
    for (int dtype = 0; dtype < 2; ++dtype) {
      for (int bits : bits_list) {
        const char* dname = dtype == 0 ? "bf16" : "fp16";
        char label[64];
        snprintf(label, sizeof(label), "%dx%d", sh.k, sh.n);
        size_t w_bytes = size_t(sh.n) * sh.k * bits / 8;
        size_t sb_elems = size_t(sh.n) * (sh.k / kGroup);
        size_t set_bytes = w_bytes + 2 * sb_elems * 2;
        uint32_t seed = 1000 * sh.n + sh.k + 7 * dtype + bits;
        // (parity-only shapes: weight set 0 alone)
        Sets sets = make_sets(dtype, bits, w_bytes, sb_elems,
                              sh.timed ? sets_beyond_l2(set_bytes) : 1, seed,
                              st);
        size_t x_elems = size_t(kMaxM) * sh.k;
        void* x;
        CK(cudaMalloc(&x, x_elems * 2));
        if (dtype == 0)
          fill_vals<<<256, 256, 0, st>>>((__nv_bfloat16*)x, x_elems,
                                         seed * 41, 0, 0, 0);
        else
          fill_vals<<<256, 256, 0, st>>>((__half*)x, x_elems, seed * 41, 0,
                                         0, 0);
        size_t out_elems = size_t(kMaxM) * sh.n;
        void *ref, *out;
        CK(cudaMalloc(&ref, out_elems * 2));
        CK(cudaMalloc(&out, out_elems * 2));
        CK(cudaStreamSynchronize(st));

        // ---- Parity, on weight set 0 ----
        // Reference: stock qmv at M = 1, one launch per row of x.
        for (int i = 0; i < kMaxM; ++i) {
          QmvArgs a = make_args(dtype, bits, (const char*)x + size_t(i) * sh.k * 2,
                                sets.w[0], sets.s[0], sets.b[0],
                                (char*)ref + size_t(i) * sh.n * 2, 1, sh.n,
                                sh.k, st);
          if (stock_qmv(&a) != 0) {
            logf("stock launch failed\n");
            return 2;
          }
        }
        CK(cudaStreamSynchronize(st));
        std::vector<uint16_t> h_ref(out_elems), h_out(out_elems);
        CK(cudaMemcpy(h_ref.data(), ref, out_elems * 2, cudaMemcpyDeviceToHost));

        // Numerics: stock M = 1 rows 0..3 of vector 0 and 5 against float64.
        {
          int rows[4] = {0, 1, sh.n / 2, sh.n - 1};
          std::vector<uint8_t> hw(size_t(sh.k) * bits / 8);
          std::vector<uint16_t> hs(sh.k / kGroup), hb(sh.k / kGroup), hx(sh.k);
          double max_rel = 0;
          for (int vi : {0, 5}) {
            CK(cudaMemcpy(hx.data(), (const char*)x + size_t(vi) * sh.k * 2,
                          sh.k * 2, cudaMemcpyDeviceToHost));
            for (int row : rows) {
              CK(cudaMemcpy(hw.data(), (const char*)sets.w[0] + size_t(row) * hw.size(),
                            hw.size(), cudaMemcpyDeviceToHost));
              CK(cudaMemcpy(hs.data(), (const char*)sets.s[0] + size_t(row) * hs.size() * 2,
                            hs.size() * 2, cudaMemcpyDeviceToHost));
              CK(cudaMemcpy(hb.data(), (const char*)sets.b[0] + size_t(row) * hb.size() * 2,
                            hb.size() * 2, cudaMemcpyDeviceToHost));
              double acc = 0, mag = 0;
              for (int j = 0; j < sh.k; ++j) {
                // Element j's bits, which at 3, 5 and 6 bits can span two
                // bytes.
                size_t byte = size_t(j) * bits / 8;
                uint32_t window = hw[byte] |
                    (byte + 1 < hw.size() ? uint32_t(hw[byte + 1]) << 8 : 0);
                int q = (window >> (j * bits % 8)) & ((1 << bits) - 1);
                double wd = q * (double)to_float(hs[j / kGroup], dtype) +
                    (double)to_float(hb[j / kGroup], dtype);
                double xv = to_float(hx[j], dtype);
                acc += wd * xv;
                mag += std::fabs(wd * xv);
              }
              double got = to_float(h_ref[size_t(vi) * sh.n + row], dtype);
              max_rel = std::max(max_rel, std::fabs(got - acc) / mag);
            }
          }
          bool ok = max_rel < 2e-2;
          all_ok &= ok;
          logf("%s %s %d-bit: stock M=1 vs float64 max |err|/sum|x*w| = %.2e %s\n",
               label, dname, bits, max_rel, ok ? "ok" : "FAIL");
        }

        struct Variant {
          Impl impl;
          int R, V, G, D;
          int tail = QMV_TAIL_PICKED;
        };
        std::vector<Variant> variants = {{STOCK, 0, 0, 0, 0},
                                         {PATCHED_QMV, 0, 0, 0, 0},
                                         {AUTO, 0, 0, 0, 0}};
        // The (W, R, V, D) instantiated in qmv_entry.cu (D: stages of the
        // ring); W goes in the G field.
        int wrvd[64][4];
        int configs = std::min(64, patched_qmv_streamed_configs(wrvd, 64));
        for (int c = 0; c < configs; ++c) {
          variants.push_back(
              {EXPLICIT, wrvd[c][1], wrvd[c][2], wrvd[c][0], wrvd[c][3]});
          // The ring's half-size blocks, forced on the last half of the row
          // blocks (the launch picks them only for some grids and devices).
          if (wrvd[c][2] > 0 && wrvd[c][1] % 2 == 0)
            variants.push_back({EXPLICIT, wrvd[c][1], wrvd[c][2], wrvd[c][0],
                                wrvd[c][3], QMV_TAIL_HALF});
        }
        int mismatched_launches = 0, unsupported_launches = 0;
        for (const Variant& v : variants) {
          for (int m = 1; m <= kMaxM; ++m) {
            CK(cudaMemsetAsync(out, 0xFF, out_elems * 2, st));
            g_tail = v.tail;
            QmvArgs a = make_args(dtype, bits, x, sets.w[0], sets.s[0],
                                  sets.b[0], out, m, sh.n, sh.k, st);
            g_tail = QMV_TAIL_PICKED;
            int rc = launch(v.impl, a, v.R, v.V, v.G, v.D);
            if (rc == -3) continue;  // does not fit in shared memory
            if (rc == -2 && v.impl != STOCK && v.impl != PATCHED_QMV) {
              // Not supported: MLX's dispatch runs the stock kernel.
              unsupported_launches++;
              continue;
            }
            if (rc != 0) {
              logf("launch %s R=%d V=%d G=%d D=%d failed rc=%d\n",
                   impl_name(v.impl), v.R, v.V, v.G, v.D, rc);
              all_ok = false;
              continue;
            }
            CK(cudaStreamSynchronize(st));
            CK(cudaGetLastError());
            CK(cudaMemcpy(h_out.data(), out, size_t(m) * sh.n * 2,
                          cudaMemcpyDeviceToHost));
            size_t bad = count_diff(h_ref, h_out, size_t(m) * sh.n);
            rows_checked += m;
            launches_checked++;
            if (bad) {
              mismatched_launches++;
              all_ok = false;
              logf("MISMATCH %s %s %d-bit %s R=%d V=%d G=%d D=%d tail=%d M=%d: "
                   "%zu of %zu outputs differ from stock M=1\n",
                   label, dname, bits, impl_name(v.impl), v.R, v.V, v.G, v.D,
                   v.tail, m, bad, size_t(m) * sh.n);
            }
          }
        }
        // Negative control: the same dequantized products summed in
        // another order must be reported as different from stock M = 1.
        {
          CK(cudaMemsetAsync(out, 0xFF, out_elems * 2, st));
          QmvArgs a = make_args(dtype, bits, x, sets.w[0], sets.s[0],
                                sets.b[0], out, kMaxM, sh.n, sh.k, st);
          if (stock_qmv_other_order(&a) != 0) {
            logf("control launch failed\n");
            return 2;
          }
          CK(cudaStreamSynchronize(st));
          CK(cudaMemcpy(h_out.data(), out, out_elems * 2,
                        cudaMemcpyDeviceToHost));
          controls++;
          if (count_diff(h_ref, h_out, out_elems) > 0) {
            controls_seen++;
          } else {
            all_ok = false;
            logf("CONTROL NOT DETECTED %s %s %d-bit: the other order matched "
                 "stock M=1 on all %zu outputs\n",
                 label, dname, bits, out_elems);
          }
        }
        logf("%s %s %d-bit: parity %s (%zu variants x M=1..16, bitwise vs "
             "stock M=1; %d launches not supported by the streamed kernel)\n",
             label, dname, bits, mismatched_launches ? "FAILED" : "ok",
             variants.size(), unsupported_launches);

        auto free_all = [&]() {
          sets.release();
          cudaFree(x);
          cudaFree(ref);
          cudaFree(out);
        };

        // ---- Timing ----
        if (!sh.timed) {
          free_all();
          continue;
        }
        double stock1 = time_impl(STOCK, dtype, bits, sh, sets, x, out, 1, st,
                                  0, 0, 0, 0, reps);
        auto record = [&](Impl impl, int R, int V, int G, int D, int m,
                          double us) {
          double gbps = us > 0 ? set_bytes / (us * 1e-6) / 1e9 : 0;
          fprintf(g_csv, "%s,%s,%d,%s,%d,%d,%d,%d,%d,%.2f,%.0f,%.2f\n", label,
                  dname, bits, impl_name(impl), R, V, G, D, m, us, gbps, stock1);
          fflush(g_csv);
        };
        record(STOCK, 0, 0, 0, 0, 1, stock1);
        std::vector<int> ms_stock = {2, 4, 8, 16};
        std::vector<double> auto_us(kMaxM + 1, 0), stock_us(kMaxM + 1, 0);
        stock_us[1] = stock1;
        for (int m : ms_stock) {
          stock_us[m] = time_impl(STOCK, dtype, bits, sh, sets, x, out, m, st,
                                  0, 0, 0, 0, reps);
          record(STOCK, 0, 0, 0, 0, m, stock_us[m]);
        }
        for (int m = 1; m <= kMaxM; ++m) {
          if (quick && m != 1 && m != 2 && m != 4 && m != 8 && m != 16)
            continue;
          auto_us[m] = time_impl(AUTO, dtype, bits, sh, sets, x, out, m, st,
                                 0, 0, 0, 0, reps);
          record(AUTO, 0, 0, 0, 0, m, auto_us[m]);
        }
        // Explicit configurations at M in {1, 2, 3, 4, 6, 8, 12, 16}.
        double best[kMaxM + 1];
        int bestR[kMaxM + 1], bestV[kMaxM + 1], bestG[kMaxM + 1],
            bestD[kMaxM + 1];
        // (--ragged: a shorter sweep, for the dispatch of ragged K.)
        const std::vector<int> ms_explicit =
            ragged ? std::vector<int>{1, 2, 4, 8, 16}
                   : std::vector<int>{1, 2, 3, 4, 6, 8, 12, 16};
        for (int m : ms_explicit) {
          best[m] = 1e30;
          for (const Variant& v : variants) {
            if (v.impl != EXPLICIT || v.tail != QMV_TAIL_PICKED) continue;
            if (v.V >= 2 * m) continue;  // mostly idle vectors
            if (v.V == 0 && m > 2) continue;  // qmv_prefetch_kernel: M = 1's
            double us = time_impl(v.impl, dtype, bits, sh, sets, x, out, m,
                                  st, v.R, v.V, v.G, v.D, reps);
            if (us < 0) continue;
            record(v.impl, v.R, v.V, v.G, v.D, m, us);
            if (us > 0 && us < best[m]) {
              best[m] = us;
              bestR[m] = v.R;
              bestV[m] = v.V;
              bestG[m] = v.G;
              bestD[m] = v.D;
            }
          }
        }
        double stock1_again = time_impl(STOCK, dtype, bits, sh, sets, x, out,
                                        1, st, 0, 0, 0, 0, reps);
        record(STOCK, 0, 0, 0, 0, 1, stock1_again);
        logf("%s %s %d-bit timing (us/launch; stock M=1 %.2f us = %.0f GB/s; "
             "timed again at the end: %.2f us)\n",
             label, dname, bits, stock1, set_bytes / (stock1 * 1e-6) / 1e9,
             stock1_again);
        logf("   M | stock qmv | streamed(auto) | auto/stockM1 | best explicit\n");
        for (int m = 1; m <= kMaxM; ++m) {
          bool has_best = std::find(ms_explicit.begin(), ms_explicit.end(), m) !=
              ms_explicit.end();
          if (auto_us[m] == 0 && !has_best) continue;
          char sb[32] = "", bb[96] = "";
          if (stock_us[m] > 0) snprintf(sb, sizeof(sb), "%9.2f", stock_us[m]);
          if (has_best)
            snprintf(bb, sizeof(bb), "%7.2f W,R,V,D (%d,%d,%d,%d)", best[m],
                     bestG[m], bestR[m], bestV[m], bestD[m]);
          logf("  %2d | %9s | %14.2f | %12.2f | %s\n", m, sb, auto_us[m],
               auto_us[m] / stock1, bb);
        }
        free_all();
      }
    }
  }
  logf("PARITY %s: %lld launches, %lld rows checked bitwise against stock "
       "M=1; negative control detected in %lld of %lld\n",
       all_ok ? "OK" : "FAILED", launches_checked, rows_checked,
       controls_seen + batch_controls_seen, controls + batch_controls);
  fclose(g_csv);
  fclose(g_log);
  return all_ok ? 0 : 1;
}
