// Parity over the whole configuration matrix of MLX's CUDA qmv, and timing of
// the widths and modes outside qmv_bench's sweep.
//
// Parity: for every dtype (bfloat16, float16, float32), every affine width
// (2, 3, 4, 5, 6, 8 bits) at group sizes 32, 64 and 128, and mxfp4, mxfp8 and
// nvfp4 (with and without a global scale), on aligned and ragged K and ragged
// N and on the shapes of MLX's own row tests, every row of the streamed
// dispatch (cu::qmv_streamed as mlx::core::qmv picks it) for M = 1..16 at
// B = 1, and at B = 3 with weights per batch and broadcast, is compared
// bitwise with the stock kernel at M = 1, B = 1 on that row's vector alone;
// outputs are poisoned before each launch. Data are random (weights random
// bytes, never zeros). Negative control: per configuration, the same products
// summed in another order (stock_qmv_other_order) must be reported as
// different, or the comparison could not fail and the configuration fails.
// Timing (unless --no-time): 4096 x 14336, bfloat16 and float16, each width
// at group 64 and each fp mode: stock M = 1 and the streamed dispatch at
// M = 1, 2, 4, 8, 16 (CUDA graphs over weight sets spanning more than L2, as
// qmv_bench).
//
// --nonfinite: the parity of the whole matrix (no timing) with infinities
// and NaNs in x (in four of every five vectors: +inf; NaN; +inf and -inf;
// -inf) and, for affine types, one scale in every seventh row of w set to
// the largest finite value of the type, so that its group's dequantized
// weights overflow to infinities: rows of infinities and NaNs, which must
// come out with stock's bits too.
// --odd-time: only the part of the parity with scale rows that are not a
// multiple of 4 bytes (K = 2880, 960, 576 and 2080), then stock and the
// dispatch timed at M = 1, 2, 4, 8 and 16 on gpt-oss's and SmolLM2's shapes
// (and 3840 x 15360) at every width.
// Sweep (--sweep, a build with -DQMV_MATRIX_SWEEP): explicit configurations
// of the fp modes, checked and timed (sweep() below).
//
// Usage: qmv_matrix [--no-time | --nonfinite | --sweep | --odd-only |
//        --odd-time | --takes] [--out DIR]
#include "qmv_api.h"
#include "qmv_harness.cuh"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

// Random bytes; with no_nan, float8 e4m3 NaN codes (s.1111.111) become the
// largest finite value (MLX's quantization never writes them).
__global__ void fill_bytes(uint8_t* p, size_t n, uint32_t seed, bool no_nan) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n;
       i += size_t(gridDim.x) * blockDim.x) {
    uint8_t b = uint8_t(hash32(i, seed));
    if (no_nan && (b & 0x7f) == 0x7f) b ^= 1;
    p[i] = b;
  }
}

// Bytes base + (hash % span): float8 scales in a chosen range.
__global__ void fill_codes(uint8_t* p, size_t n, uint32_t seed, int base,
                           int span) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n;
       i += size_t(gridDim.x) * blockDim.x)
    p[i] = uint8_t(base + int(hash32(i, seed) % uint32_t(span)));
}

// Infinities and NaNs in x (vecs vectors of k elements of the dtype):
// vector i gets, by i % 5, nothing; +inf; NaN; +inf and -inf; -inf, at
// positions picked by the hash.
__global__ void poke_x(uint8_t* x, int dtype, int k, int vecs, uint32_t seed) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= vecs) return;
  // +inf, -inf and NaN of bfloat16, float16 and float32.
  const uint32_t pos_inf[] = {0x7f80, 0x7c00, 0x7f800000u};
  const uint32_t neg_inf[] = {0xff80, 0xfc00, 0xff800000u};
  const uint32_t nan[] = {0x7fc0, 0x7e00, 0x7fc00000u};
  int tsize = dtype == 2 ? 4 : 2;
  auto put = [&](int at, const uint32_t* bits) {
    uint8_t* e = x + (size_t(i) * k + at) * tsize;
    for (int b = 0; b < tsize; ++b) e[b] = uint8_t(bits[dtype] >> (8 * b));
  };
  int a = int(hash32(i, seed) % uint32_t(k));
  int b = int(hash32(i, seed + 1) % uint32_t(k));
  switch (i % 5) {
    case 1: put(a, pos_inf); break;
    case 2: put(a, nan); break;
    case 3: put(a, pos_inf); put(b, neg_inf); break;
    case 4: put(a, neg_inf); break;
  }
}

// One scale of every seventh row (of rows rows of groups scales of tsize
// bytes) set to the largest finite value of the type (bits max_bits).
__global__ void poke_scales(uint8_t* s, int tsize, int rows, int groups,
                            uint32_t max_bits, uint32_t seed) {
  int r = blockIdx.x * blockDim.x + threadIdx.x;
  if (r >= rows || r % 7 != 3) return;
  int g = int(hash32(r, seed) % uint32_t(groups));
  uint8_t* e = s + (size_t(r) * groups + g) * tsize;
  for (int b = 0; b < tsize; ++b) e[b] = uint8_t(max_bits >> (8 * b));
}

static void fill_t(int dtype, void* p, size_t n, uint32_t seed, int kind,
                   float s0 = 0, float hr = 0) {
  if (dtype == 0)
    fill_vals<<<256, 256>>>((__nv_bfloat16*)p, n, seed, kind, s0, hr);
  else if (dtype == 1)
    fill_vals<<<256, 256>>>((__half*)p, n, seed, kind, s0, hr);
  else
    fill_vals<<<256, 256>>>((float*)p, n, seed, kind, s0, hr);
  CK(cudaGetLastError());
}

static const char* kDtypeNames[] = {"bf16", "fp16", "fp32"};

// One quantization type of the matrix.
struct QType {
  int mode, bits, group;
  bool global_scale;
  std::string name() const {
    static const char* modes[] = {"affine", "mxfp4", "mxfp8", "nvfp4"};
    char s[64];
    if (mode == QMV_AFFINE)
      snprintf(s, sizeof(s), "affine%d-g%d", bits, group);
    else
      snprintf(s, sizeof(s), "%s%s", modes[mode], global_scale ? "+gs" : "");
    return s;
  }
  int scale_bytes(int dtype) const {
    return mode == QMV_AFFINE ? (dtype == 2 ? 4 : 2) : 1;
  }
};

// One problem's buffers: L weight sets, x for L * 16 vectors, outputs.
struct Problem {
  int dtype, n, k, L;
  QType q;
  size_t w_bytes, sb_elems;
  int tsize;
  uint8_t *w = nullptr, *w_tight = nullptr, *s = nullptr, *b = nullptr,
          *x = nullptr;
  float* gs = nullptr;

  Problem(int dtype_, const QType& q_, int n_, int k_, int L_, uint32_t seed)
      : dtype(dtype_), n(n_), k(k_), L(L_), q(q_) {
    tsize = dtype == 2 ? 4 : 2;
    w_bytes = size_t(n) * k * q.bits / 8;
    sb_elems = size_t(n) * (k / q.group);
    // 64 bytes of slack for w: stock reads whole cutlass arrays, which for
    // 3, 5 and 6 bits are larger than the bytes their elements take. Scales
    // and biases have none, and the streamed launches read a copy of w
    // (w_tight) that has none, so that compute-sanitizer sees any read past
    // them (the streamed kernel's copies of rows that are not aligned).
    CK(cudaMalloc(&w, L * w_bytes + 64));
    CK(cudaMalloc(&w_tight, L * w_bytes));
    CK(cudaMalloc(&s, L * sb_elems * q.scale_bytes(dtype)));
    CK(cudaMalloc(&x, size_t(L) * 16 * k * tsize));
    fill_bytes<<<1024, 256>>>(w, L * w_bytes + 64, seed,
                              q.mode == QMV_MXFP8);
    fill_t(dtype, x, size_t(L) * 16 * k, seed + 2, 0);
    CK(cudaMemcpy(w_tight, w, L * w_bytes, cudaMemcpyDeviceToDevice));
    if (q.mode == QMV_AFFINE) {
      CK(cudaMalloc(&b, L * sb_elems * tsize));
      float hr = ((1 << q.bits) - 1) / 2.0f, s0 = 0.03f / hr;
      fill_t(dtype, s, L * sb_elems, seed + 1, 1, s0, hr);
      fill_t(dtype, b, L * sb_elems, seed + 1, 2, s0, hr);
    } else if (q.mode == QMV_NVFP4) {
      // e4m3 scales 2^-3 .. 2^-2 * (1 + m / 8).
      fill_codes<<<256, 256>>>(s, L * sb_elems, seed + 1, 0x20, 16);
    } else {
      // ue8m0 scales: 2^-5 .. 2^-3 for fp4 weights (up to 6), 2^-11 .. 2^-9
      // for fp8 ones (up to 448).
      int base = q.mode == QMV_MXFP4 ? 127 - 5 : 127 - 11;
      fill_codes<<<256, 256>>>(s, L * sb_elems, seed + 1, base, 3);
    }
    if (q.global_scale) {
      float v = 1500.0f;
      CK(cudaMalloc(&gs, sizeof(float)));
      CK(cudaMemcpy(gs, &v, sizeof(float), cudaMemcpyHostToDevice));
    }
    CK(cudaGetLastError());
    CK(cudaDeviceSynchronize());
  }
  // Infinities and NaNs where --nonfinite puts them (poke_x, poke_scales).
  void add_nonfinite(uint32_t seed) {
    int vecs = L * 16;
    poke_x<<<(vecs + 127) / 128, 128>>>(x, dtype, k, vecs, seed);
    if (q.mode == QMV_AFFINE) {
      int rows = L * n;
      uint32_t max_bits = dtype == 0 ? 0x7f7f : dtype == 1 ? 0x7bff : 0x7f7fffff;
      poke_scales<<<(rows + 127) / 128, 128>>>(s, tsize, rows, k / q.group,
                                               max_bits, seed + 3);
    }
    CK(cudaGetLastError());
    CK(cudaDeviceSynchronize());
  }
  ~Problem() {
    cudaFree(w);
    cudaFree(w_tight);
    cudaFree(s);
    cudaFree(b);
    cudaFree(x);
    cudaFree(gs);
  }

  // Arguments for vectors [v0, v0 + m * l) of x on weight set `set` (l
  // batches of m vectors; broadcast or one weight set per batch).
  QmvArgs args(void* out, int m, int l, bool broadcast, size_t v0, int set,
               cudaStream_t st) const {
    QmvArgs a{};
    a.dtype = dtype;
    a.bits = q.bits;
    a.group = q.group;
    a.mode = q.mode;
    a.global_scale = gs;
    a.x = x + v0 * k * tsize;
    a.w = w + set * w_bytes;
    a.scales = s + set * sb_elems * q.scale_bytes(dtype);
    a.biases = b ? b + set * sb_elems * tsize : nullptr;
    a.out = out;
    a.m = m;
    a.n = n;
    a.k = k;
    a.l = l;
    a.broadcast_w = broadcast;
    a.stream = st;
    return a;
  }
};

// Elements of two outputs that differ bitwise.
static size_t count_diff(const std::vector<uint8_t>& a,
                         const std::vector<uint8_t>& b, size_t bytes,
                         int tsize) {
  size_t bad = 0;
  for (size_t i = 0; i < bytes; i += tsize)
    bad += memcmp(a.data() + i, b.data() + i, tsize) != 0;
  return bad;
}

struct Tally {
  long long launches = 0, rows = 0, unsupported = 0, controls = 0;
  // Of the launches, those forced to take row blocks in turn (QMV_TAIL_TURNS).
  long long in_turn = 0;
  bool ok = true;
};

static FILE* g_csv = nullptr;
// --nonfinite: infinities and NaNs in every problem (Problem::add_nonfinite).
static bool g_nonfinite = false;

// Parity of one (dtype, type, shape): B = 1 at M = 1..16, B = 3 at M in
// {1, 2, 3, 5, 16} per batch and broadcast, and the negative control.
static void parity(int dtype, const QType& q, int n, int k, Tally& t,
                   cudaStream_t st) {
  const int L = 3, kMaxM = 16;
  uint32_t seed = 9001 + 131 * dtype + 17 * q.mode + 7 * q.bits + q.group + k;
  Problem p(dtype, q, n, k, L, seed);
  if (g_nonfinite) p.add_nonfinite(seed + 5);
  size_t row_bytes = size_t(n) * p.tsize;
  size_t out_bytes = size_t(L) * kMaxM * row_bytes;
  uint8_t *ref, *out;
  CK(cudaMalloc(&ref, out_bytes));
  CK(cudaMalloc(&out, out_bytes));
  std::vector<uint8_t> h_ref(out_bytes), h_out(out_bytes);
  const std::string label = std::string(kDtypeNames[dtype]) + " " + q.name() +
      " K=" + std::to_string(k) + " N=" + std::to_string(n);

  // Reference rows: stock at M = 1 on vector v of x and weight set `set`.
  auto reference = [&](int m, int l, bool broadcast) {
    for (int li = 0; li < l; ++li)
      for (int v = 0; v < m; ++v) {
        size_t vi = size_t(li) * m + v;
        QmvArgs a = p.args(ref + vi * row_bytes, 1, 1, true, vi,
                           broadcast ? 0 : li, st);
        if (stock_qmv_any(&a) != 0) {
          logf("%s: stock launch failed\n", label.c_str());
          exit(2);
        }
      }
    CK(cudaMemcpyAsync(h_ref.data(), ref, size_t(l) * m * row_bytes,
                       cudaMemcpyDeviceToHost, st));
  };
  // tail: QMV_TAIL_PICKED (the launch as MLX makes it), QMV_TAIL_HALF (the
  // last half of the ring's row blocks at half size, whatever the device) or
  // QMV_TAIL_TURNS (a third as many blocks, taking the row blocks in turn).
  auto check = [&](int m, int l, bool broadcast, int tail) {
    CK(cudaMemsetAsync(out, 0xFF, out_bytes, st));
    QmvArgs a = p.args(out, m, l, broadcast, 0, 0, st);
    a.w = p.w_tight;
    a.tail = tail;
    int rc = patched_qmv_streamed_any(&a);
    const char* status = "ok";
    size_t bad = 0, cnt = size_t(l) * m * n;
    if (rc == -2) {
      status = tail == QMV_TAIL_TURNS ? "not in turn (the configuration cannot)"
                                      : "not supported (stock runs)";
      t.unsupported += tail != QMV_TAIL_TURNS;
    } else if (rc != 0) {
      status = "launch failed";
      t.ok = false;
      logf("%s: streamed launch failed rc=%d M=%d B=%d\n", label.c_str(), rc,
           m, l);
    } else {
      CK(cudaMemcpyAsync(h_out.data(), out, size_t(l) * m * row_bytes,
                         cudaMemcpyDeviceToHost, st));
      CK(cudaStreamSynchronize(st));
      CK(cudaGetLastError());
      bad = count_diff(h_ref, h_out, size_t(l) * m * row_bytes, p.tsize);
      t.launches++;
      t.in_turn += tail == QMV_TAIL_TURNS;
      t.rows += l * m;
      if (bad) {
        status = "MISMATCH";
        t.ok = false;
        logf("MISMATCH %s M=%d B=%d broadcast=%d: %zu of %zu outputs differ "
             "from stock M=1\n",
             label.c_str(), m, l, int(broadcast), bad, cnt);
      }
    }
    fprintf(g_csv, "%s,%s,%d,%d,%d,%d,%d,%d,%d,%s,%zu,%zu,%s\n",
            kDtypeNames[dtype], q.name().c_str(), q.bits, q.group, k, n, l,
            int(broadcast), m,
            tail == QMV_TAIL_HALF    ? "streamed_half_tail"
            : tail == QMV_TAIL_TURNS ? "streamed_in_turn"
                                     : "streamed",
            cnt,
            bad, status);
  };

  reference(kMaxM, 1, true);
  for (int m = 1; m <= kMaxM; ++m) {
    check(m, 1, true, QMV_TAIL_PICKED);
    check(m, 1, true, QMV_TAIL_HALF);
    check(m, 1, true, QMV_TAIL_TURNS);
  }
  // Negative control at M = 16, B = 1.
  {
    CK(cudaMemsetAsync(out, 0xFF, out_bytes, st));
    QmvArgs a = p.args(out, kMaxM, 1, true, 0, 0, st);
    if (stock_qmv_other_order(&a) != 0) {
      logf("%s: control launch failed\n", label.c_str());
      exit(2);
    }
    CK(cudaMemcpyAsync(h_out.data(), out, kMaxM * row_bytes,
                       cudaMemcpyDeviceToHost, st));
    CK(cudaStreamSynchronize(st));
    size_t cnt = size_t(kMaxM) * n;
    size_t bad = count_diff(h_ref, h_out, kMaxM * row_bytes, p.tsize);
    t.controls++;
    bool seen = bad > 0;
    if (!seen) {
      t.ok = false;
      logf("CONTROL NOT DETECTED %s: the other order matched stock on all %zu "
           "outputs\n",
           label.c_str(), cnt);
    }
    fprintf(g_csv, "%s,%s,%d,%d,%d,%d,1,1,%d,other_order,%zu,%zu,%s\n",
            kDtypeNames[dtype], q.name().c_str(), q.bits, q.group, k, n,
            kMaxM, cnt, bad, seen ? "different (control ok)" : "NOT DETECTED");
  }
  for (bool broadcast : {false, true})
    for (int m : {1, 2, 3, 5, 16}) {
      reference(m, L, broadcast);
      check(m, L, broadcast, QMV_TAIL_PICKED);
      check(m, L, broadcast, QMV_TAIL_HALF);
      check(m, L, broadcast, QMV_TAIL_TURNS);
    }
  fflush(g_csv);
  cudaFree(ref);
  cudaFree(out);
}

static double time_launches(const Problem& p, void* out, int m, bool streamed,
                            cudaStream_t st, int reps) {
  return median_graph_us(st, p.L, reps, [&](cudaStream_t s) {
    int rc = 0;
    for (int set = 0; set < p.L; ++set) {
      QmvArgs a = p.args(out, m, 1, true, 0, set, s);
      rc |= streamed ? patched_qmv_streamed_any(&a) : stock_qmv_any(&a);
    }
    return rc;
  });
}

// Times stock M = 1 and the streamed dispatch at M = 1, 2, 4, 8 and 16 on
// N x K for each of `types`, bfloat16 and float16 (with stock_each_m also
// stock at each M, one warp per row and vector as MLX runs it up to M = 7):
// a CSV row per time, a log line per type.
static void time_shape(FILE* tcsv, int n, int k,
                       const std::vector<QType>& types, bool stock_each_m,
                       cudaStream_t st) {
  const int reps = 20;
  char shape[32];
  snprintf(shape, sizeof(shape), "%dx%d", k, n);
  logf("timing %s (us per launch; ratio: streamed M over stock M=1%s)\n",
       shape, stock_each_m ? ", then stock M over streamed M" : "");
  for (int dtype = 0; dtype < 2; ++dtype)
    for (const QType& q : types) {
      if (k % q.group != 0) continue;
      size_t set_bytes = size_t(n) * k * q.bits / 8 +
          size_t(n) * (k / q.group) * q.scale_bytes(dtype) *
              (q.mode == QMV_AFFINE ? 2 : 1);
      int L = sets_beyond_l2(set_bytes);
      Problem p(dtype, q, n, k, L, 4242 + q.bits + 10 * q.mode);
      void* out;
      CK(cudaMalloc(&out, size_t(16) * n * p.tsize));
      double s1 = time_launches(p, out, 1, false, st, reps);
      fprintf(tcsv, "%s,%s,%s,stock_qmv,1,%.2f,%.2f\n", shape,
              kDtypeNames[dtype], q.name().c_str(), s1, s1);
      std::string line;
      for (int m : {1, 2, 4, 8, 16}) {
        // Where the dispatch does not take the product, MLX runs qmv_kernel
        // (dispatch_stock).
        QmvArgs a = p.args(out, m, 1, true, 0, 0, st);
        bool taken = patched_qmv_takes(&a) == 1;
        double us = time_launches(p, out, m, taken, st, reps);
        fprintf(tcsv, "%s,%s,%s,%s,%d,%.2f,%.2f\n", shape, kDtypeNames[dtype],
                q.name().c_str(), taken ? "streamed_auto" : "dispatch_stock",
                m, us, s1);
        char c[96];
        snprintf(c, sizeof(c), "  M=%d %.2f%s (%.2fx)", m, us,
                 taken ? "" : " stock", us / s1);
        line += c;
        if (stock_each_m && m > 1) {
          // Where the dispatch left the product to stock, that is this time.
          double sm = taken ? time_launches(p, out, m, false, st, reps) : us;
          fprintf(tcsv, "%s,%s,%s,stock_qmv,%d,%.2f,%.2f\n", shape,
                  kDtypeNames[dtype], q.name().c_str(), m, sm, s1);
          snprintf(c, sizeof(c), " [%.2fx]", sm / us);
          line += c;
        }
      }
      logf("%s %-14s stock M=1 %.2f |%s\n", kDtypeNames[dtype],
           q.name().c_str(), s1, line.c_str());
      cudaFree(out);
    }
}

#ifdef QMV_MATRIX_SWEEP
// --sweep: for the fp modes in bfloat16 and float16 on 4096 x 14336 and
// 14336 x 4096, every instantiated configuration at M = 1, 2, 4, 8 and 16
// (V < 2M): every row bitwise against stock M = 1 on weight set 0, then
// timed as the matrix's timing is, beside stock M = 1 and the dispatch.
// Negative control per type and shape: stock_qmv_other_order must differ.
static int sweep(const std::string& outdir, cudaStream_t st) {
  int cfgs[64][4];
  int ncfg = patched_qmv_sweep_configs(cfgs, 64);
  FILE* csv = fopen((outdir + "/cuda_qmv_sweep.csv").c_str(), "w");
  if (!csv) return 2;
  fprintf(csv, "shape,dtype,type,impl,W,R,V,D,M,us,stock_m1_us,differ\n");
  const std::vector<QType> types = {{QMV_MXFP4, 4, 32, false},
                                    {QMV_MXFP8, 8, 32, false},
                                    {QMV_NVFP4, 4, 16, false}};
  const int sweep_shapes[][2] = {{14336, 4096}, {4096, 14336}};
  bool ok = true;
  for (const auto& sh : sweep_shapes)
    for (int dtype = 0; dtype < 2; ++dtype)
      for (const QType& q : types) {
        const int N = sh[0], K = sh[1], reps = 20;
        size_t set_bytes = size_t(N) * K * q.bits / 8 +
            size_t(N) * (K / q.group) * q.scale_bytes(dtype);
        int L = sets_beyond_l2(set_bytes);
        Problem p(dtype, q, N, K, L, 777 + q.bits + 10 * q.mode);
        size_t row_bytes = size_t(N) * p.tsize;
        uint8_t *ref, *out;
        CK(cudaMalloc(&ref, 16 * row_bytes));
        CK(cudaMalloc(&out, 16 * row_bytes));
        for (int v = 0; v < 16; ++v) {
          QmvArgs a = p.args(ref + v * row_bytes, 1, 1, true, v, 0, st);
          if (stock_qmv_any(&a) != 0) return 2;
        }
        std::vector<uint8_t> h_ref(16 * row_bytes), h_out(16 * row_bytes);
        CK(cudaMemcpy(h_ref.data(), ref, 16 * row_bytes, cudaMemcpyDeviceToHost));
        {
          QmvArgs a = p.args(out, 16, 1, true, 0, 0, st);
          if (stock_qmv_other_order(&a) != 0) return 2;
          CK(cudaMemcpy(h_out.data(), out, 16 * row_bytes,
                        cudaMemcpyDeviceToHost));
          if (count_diff(h_ref, h_out, 16 * row_bytes, p.tsize) == 0) {
            ok = false;
            logf("SWEEP CONTROL NOT DETECTED %s %s\n", kDtypeNames[dtype],
                 q.name().c_str());
          }
        }
        char shape[32];
        snprintf(shape, sizeof(shape), "%dx%d", K, N);
        double s1 = time_launches(p, out, 1, false, st, reps);
        for (int m : {1, 2, 4, 8, 16}) {
          double auto_us = time_launches(p, out, m, true, st, reps);
          fprintf(csv, "%s,%s,%s,streamed_auto,0,0,0,0,%d,%.2f,%.2f,0\n", shape,
                  kDtypeNames[dtype], q.name().c_str(), m, auto_us, s1);
          double best = 1e30;
          int bi = -1;
          for (int c = 0; c < ncfg; ++c) {
            int W = cfgs[c][0], R = cfgs[c][1], V = cfgs[c][2], D = cfgs[c][3];
            if (V >= 2 * m) continue;
            CK(cudaMemsetAsync(out, 0xFF, 16 * row_bytes, st));
            QmvArgs a = p.args(out, m, 1, true, 0, 0, st);
            int rc = patched_qmv_streamed_cfg(&a, W, R, V, D);
            if (rc != 0) continue;
            CK(cudaMemcpyAsync(h_out.data(), out, m * row_bytes,
                               cudaMemcpyDeviceToHost, st));
            CK(cudaStreamSynchronize(st));
            size_t bad = count_diff(h_ref, h_out, m * row_bytes, p.tsize);
            if (bad) {
              ok = false;
              logf("SWEEP MISMATCH %s %s %s (%d,%d,%d,%d) M=%d: %zu differ\n",
                   shape, kDtypeNames[dtype], q.name().c_str(), W, R, V, D, m,
                   bad);
            }
            double us = median_graph_us(st, p.L, reps, [&](cudaStream_t s) {
              int r = 0;
              for (int set = 0; set < p.L; ++set) {
                QmvArgs b = p.args(out, m, 1, true, 0, set, s);
                r |= patched_qmv_streamed_cfg(&b, W, R, V, D);
              }
              return r;
            });
            fprintf(csv, "%s,%s,%s,streamed,%d,%d,%d,%d,%d,%.2f,%.2f,%zu\n",
                    shape, kDtypeNames[dtype], q.name().c_str(), W, R, V, D, m,
                    us, s1, bad);
            if (us > 0 && us < best) {
              best = us;
              bi = c;
            }
          }
          if (bi >= 0)
            logf("%s %s %-6s M=%2d stock M=1 %6.2f dispatch %6.2f best %6.2f "
                 "(%d,%d,%d,%d)\n",
                 shape, kDtypeNames[dtype], q.name().c_str(), m, s1, auto_us,
                 best, cfgs[bi][0], cfgs[bi][1], cfgs[bi][2], cfgs[bi][3]);
        }
        fflush(csv);
        cudaFree(ref);
        cudaFree(out);
      }
  fclose(csv);
  logf("SWEEP PARITY %s\n", ok ? "OK" : "FAILED");
  return ok ? 0 : 1;
}
#endif

// --takes: whether the streamed dispatch takes each dtype and affine width
// and group on K in {4096, 3840, 2880, 960, 576, 2080} (whole tiles; a rest;
// rows of 3- and 5-bit w 8 bytes off 16 bytes; at 2080, groups of 32 only,
// rows of 2- and 6-bit w 8 bytes off and of 3- and 5-bit w 4 bytes off,
// which it refuses) at M = 4 on N = 4096 rows, and at (N, M) = (1024, 4),
// (1024, 5), (1536, 2), (1536, 3) and (2048, 1) (the few short rows where
// the ring is slower than qmv_kernel), pointers on 256 bytes. Host only (no
// GPU needed).
static int print_takes() {
  const int ks[] = {4096, 3840, 2880, 960, 576, 2080};
  const int nms[][2] = {{4096, 4}, {1024, 4}, {1024, 5}, {1536, 2},
                        {1536, 3}, {2048, 1}};
  for (int dtype = 0; dtype < 3; ++dtype)
    for (int bits : {2, 3, 4, 5, 6, 8})
      for (int group : {32, 64, 128})
        for (int k : ks)
          for (const auto& nm : nms) {
            if (k % group != 0) continue;
            QmvArgs a{};
            a.dtype = dtype;
            a.bits = bits;
            a.group = group;
            a.mode = QMV_AFFINE;
            a.x = a.w = a.scales = a.biases = reinterpret_cast<void*>(256);
            a.m = nm[1];
            a.n = nm[0];
            a.k = k;
            a.l = 1;
            a.broadcast_w = true;
            printf("takes %s affine%d-g%d K=%d N=%d M=%d: %d\n",
                   kDtypeNames[dtype], bits, group, k, a.n, a.m,
                   patched_qmv_takes(&a));
          }
  return 0;
}

int main(int argc, char** argv) {
  bool timing = true, do_sweep = false, odd_only = false, odd_time = false;
  std::string outdir = ".";
  for (int i = 1; i < argc; ++i) {
    if (!strcmp(argv[i], "--help")) {
      printf("usage: qmv_matrix [--no-time | --nonfinite | --sweep | "
             "--odd-only | --odd-time | --takes] [--out DIR]\n"
             "  --nonfinite: the parity with infinities and NaNs in x and "
             "scales whose groups overflow, no timing\n"
             "  --odd-only: only the part with scale rows that are not a "
             "multiple of 4 bytes, no timing (short enough for "
             "compute-sanitizer)\n"
             "  --odd-time: that part, then stock and the dispatch timed on "
             "gpt-oss's and SmolLM2's shapes at every width\n"
             "  --takes: whether the streamed dispatch takes each affine "
             "type on a few K (host only)\n");
      return 0;
    } else if (!strcmp(argv[i], "--no-time")) {
      timing = false;
    } else if (!strcmp(argv[i], "--nonfinite")) {
      g_nonfinite = true;
      timing = false;
    } else if (!strcmp(argv[i], "--odd-only")) {
      odd_only = true;
      timing = false;
    } else if (!strcmp(argv[i], "--takes")) {
      return print_takes();
    } else if (!strcmp(argv[i], "--odd-time")) {
      odd_only = true;
      odd_time = true;
      timing = false;
    } else if (!strcmp(argv[i], "--sweep")) {
      do_sweep = true;
    } else if (!strcmp(argv[i], "--out") && i + 1 < argc) {
      outdir = argv[++i];
    } else {
      fprintf(stderr, "qmv_matrix: unknown argument %s\n", argv[i]);
      return 2;
    }
  }
  g_log = fopen((outdir + "/cuda_qmv_matrix_log.txt").c_str(), "w");
  g_csv = fopen((outdir + "/cuda_qmv_matrix_parity.csv").c_str(), "w");
  if (!g_log || !g_csv) {
    fprintf(stderr, "qmv_matrix: cannot write to %s\n", outdir.c_str());
    return 2;
  }
  fprintf(g_csv, "dtype,type,bits,group,K,N,B,broadcast,M,impl,outputs,"
                 "differ,status\n");
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, 0));
  logf("device: %s, %d SMs, cc %d.%d\n", prop.name, prop.multiProcessorCount,
       prop.major, prop.minor);
  cudaStream_t st;
  CK(cudaStreamCreate(&st));
  if (do_sweep) {
#ifdef QMV_MATRIX_SWEEP
    return sweep(outdir, st);
#else
    fprintf(stderr, "qmv_matrix: --sweep needs a build with -DQMV_MATRIX_SWEEP\n");
    return 2;
#endif
  }

  std::vector<QType> types;
  for (int bits : {2, 3, 4, 5, 6, 8})
    for (int group : {32, 64, 128}) types.push_back({QMV_AFFINE, bits, group, false});
  types.push_back({QMV_MXFP4, 4, 32, false});
  types.push_back({QMV_MXFP8, 8, 32, false});
  types.push_back({QMV_NVFP4, 4, 16, false});
  types.push_back({QMV_NVFP4, 4, 16, true});

  // {N, K}: K = 4096 whole tiles; 3840 and 3968 ragged (the last tile
  // partial at 512- and 256-element tiles); N = 2000 and 2056 not whole
  // blocks of rows. Then the shapes of MLX's own row tests
  // (test_qmv_rows_match_single_vector, test_fp_qmv_rows_match_single_vector
  // in python/tests/test_quantized.py): K = 512 and 384 (shorter than one
  // 4-bit tile), N = 256, 67 and 5 (fewer rows than one block); and of
  // test_qmm and test_qmv_wide, which the overlay's route sends to the
  // streamed kernel at M * B in [8, 16]: K = 128 and 256 (a fraction of a
  // tile), N = 128. K = 640 (the row test's third K) leaves a rest of k
  // with rows of 5, 10 or 20 scales, which do not start on 16 bytes; at
  // K = 576 (its fourth) rows of 3- and 5-bit weights do not either.
  const int shapes[][2] = {{2000, 4096}, {2056, 3840}, {2000, 3968},
                           {256, 512},   {67, 512},    {5, 512},
                           {256, 384},   {67, 384},    {5, 384},
                           {256, 640},   {67, 640},    {5, 640},
                           {256, 576},   {67, 576},    {5, 576},
                           {256, 128},   {128, 128},   {67, 128},
                           {256, 256},   {128, 256}};
  const size_t num_shapes = sizeof(shapes) / sizeof(shapes[0]);
  Tally t;
  for (int dtype = 0; dtype < 3 && !odd_only; ++dtype)
    for (const QType& q : types)
      for (const auto& sh : shapes) parity(dtype, q, sh[0], sh[1], t, st);
  if (!odd_only)
    logf("MATRIX PARITY%s %s: %lld streamed launches, %lld rows bitwise equal "
         "to stock M=1 (dtypes bf16/fp16/fp32 x %zu types x %zu shapes, M = "
         "1..16 at B = 1, M in {1,2,3,5,16} at B = 3 per batch and "
         "broadcast; %lld launches taking row blocks in turn); %lld launches "
         "not supported (stock runs); negative control detected in %lld of "
         "%lld configurations\n",
         g_nonfinite ? " (inf and NaN in x, overflowing scales)" : "",
         t.ok ? "OK" : "FAILED", t.launches, t.rows, types.size(), num_shapes,
         t.in_turn, t.unsupported, t.ok ? t.controls : -1LL, t.controls);
  // Rows of scales that are not a multiple of 4 bytes, as real models have
  // them (gpt-oss's K = 2880: 45 groups of 64, 90 mxfp4 groups; SmolLM2's 960
  // and 576: 15 and 9 groups of 64), with a rest of k past the whole tiles:
  // one vector takes qmv_prefetch_kernel, several the ring, whose copies of
  // such rows start before them and stop at their last byte. At 3 and 5 bits
  // the rows of w are 8 bytes off 16 there too, and copied in halves. At
  // K = 2080 (65 groups of 32, rows of 65 scales) those of 2, 3, 5 and 6 bits
  // are 4 or 8 bytes off 16, and run stock.
  const int odd_shapes[][2] = {{256, 2880}, {67, 960}, {5, 576}, {67, 2080}};
  Tally odd;
  size_t odd_types = 0;
  for (int dtype = 0; dtype < 3; ++dtype)
    for (const QType& q : types)
      for (const auto& sh : odd_shapes)
        if (sh[1] % q.group == 0) {
          parity(dtype, q, sh[0], sh[1], odd, st);
          odd_types++;
        }
  logf("MATRIX PARITY (scale rows not a multiple of 4 bytes%s) %s: %lld "
       "streamed launches, %lld rows bitwise equal to stock M=1 (%zu "
       "dtype x type x shape, K = 2880, 960, 576, 2080; %lld launches "
       "taking row blocks in turn); %lld launches not supported (stock "
       "runs); negative control detected in %lld of %lld configurations\n",
       g_nonfinite ? "; inf and NaN in x, overflowing scales" : "",
       odd.ok ? "OK" : "FAILED", odd.launches, odd.rows, odd_types,
       odd.in_turn, odd.unsupported, odd.ok ? odd.controls : -1LL,
       odd.controls);
  t.ok = t.ok && odd.ok;
  fclose(g_csv);

  if (timing || odd_time) {
    FILE* tcsv = fopen((outdir + "/cuda_qmv_matrix_timing.csv").c_str(), "w");
    fprintf(tcsv, "shape,dtype,type,impl,M,us,stock_m1_us\n");
    if (timing) {
      std::vector<QType> timed;
      for (const QType& q : types)
        if (q.mode != QMV_AFFINE || q.group == 64) timed.push_back(q);
      time_shape(tcsv, 14336, 4096, timed, false, st);
    }
    if (odd_time) {
      // The widths whose rows of w are 8 bytes off 16 at K = 2880, 960 and
      // 576, beside the others for reference.
      std::vector<QType> timed;
      for (int bits : {2, 3, 4, 5, 6, 8})
        timed.push_back({QMV_AFFINE, bits, 64, false});
      for (int bits : {3, 5}) timed.push_back({QMV_AFFINE, bits, 32, false});
      // {N, K}: gpt-oss-20b's experts and attention (K x N = 2880 x 2880,
      // 2880 x 5760, 2880 x 4096, 4096 x 2880), SmolLM2-135M's and -360M's
      // attention and MLP (576 x 576, 576 x 192, 576 x 1536, 1536 x 576;
      // 960 x 960, 960 x 320, 960 x 2560, 2560 x 960), and 3840 x 15360
      // (rows on 16 bytes with a rest of k, for reference).
      const int odd_time_shapes[][2] = {
          {2880, 2880}, {5760, 2880}, {4096, 2880}, {2880, 4096},
          {576, 576},   {192, 576},   {1536, 576},  {576, 1536},
          {960, 960},   {320, 960},   {2560, 960},  {960, 2560},
          {15360, 3840}};
      for (const auto& sh : odd_time_shapes)
        time_shape(tcsv, sh[0], sh[1], timed, true, st);
    }
    fclose(tcsv);
  }
  fclose(g_log);
  return t.ok ? 0 : 1;
}
