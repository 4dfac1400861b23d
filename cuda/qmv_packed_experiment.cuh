// Experiment, not part of the upstream patch: qmv_streamed_kernel with the
// scale/bias step done as packed fma.rn (bf16x2 / f16x2) instead of
// `w_dq * T(scale) + bias` on cutlass arrays. ptxas contracts that expression
// in qmv_kernel into one scalar HFMA2 per element (single rounding, then PRMT
// packing); the packed fma.rn pins the same single rounding per element with
// a quarter of the instructions. Same bits only because of that contraction:
// the harness checks them against the stock kernel.
#pragma once

namespace mlx::core::cu {

template <int N, bool has_bias, typename T, typename Q, typename S>
__device__ __forceinline__ cutlass::Array<T, N>
dequant_packed(const cutlass::Array<Q, N>& w_vec, S scale, T bias) {
  if constexpr (
      has_bias && N % 2 == 0 &&
      (cuda::std::is_same_v<T, cutlass::bfloat16_t> ||
       cuda::std::is_same_v<T, cutlass::half_t>)) {
    cutlass::NumericArrayConverter<T, Q, N> converter_tq;
    cutlass::Array<T, N> w_dq = converter_tq(w_vec);
    T s = T(scale);
    if constexpr (cuda::std::is_same_v<T, cutlass::bfloat16_t>) {
      auto* p = reinterpret_cast<__nv_bfloat162*>(&w_dq);
      __nv_bfloat162 s2 = __bfloat162bfloat162(s.to_nv_bfloat16());
      __nv_bfloat162 b2 = __bfloat162bfloat162(bias.to_nv_bfloat16());
#pragma unroll
      for (int i = 0; i < N / 2; ++i) {
        p[i] = __hfma2(p[i], s2, b2);
      }
    } else {
      auto* p = reinterpret_cast<__half2*>(&w_dq);
      __half2 s2 = __half2half2(s.to_half());
      __half2 b2 = __half2half2(bias.to_half());
#pragma unroll
      for (int i = 0; i < N / 2; ++i) {
        p[i] = __hfma2(p[i], s2, b2);
      }
    }
    return w_dq;
  } else {
    return dequant<N, has_bias>(w_vec, scale, bias);
  }
}

// Streamed variant of qmv_kernel_impl: one warp computes rows_per_warp rows
// for up to vecs_per_warp vectors. Each weight element is read and
// dequantized once and applied to every vector, and each x element is read
// once and applied to every row. For every (row, vector) pair it keeps
// qmv_kernel_impl's order exactly: the same lane to element mapping, the same
// dequant and multiply-add per tile on the same values, the same sums[]
// accumulation in increasing k and the same warp reduction. So each row of
// the result is bit-identical to qmv_kernel's result for that vector alone.
// Only the loads differ: x and w are read with wide vector loads, and w,
// scales and biases are prefetched prefetch_tiles tiles ahead, which changes
// no arithmetic.
template <
    int rows_per_warp,
    int vecs_per_warp,
    int prefetch_tiles,
    int elems_per_thread,
    int group_size,
    bool has_bias,
    bool has_residue_k,
    typename T,
    typename Q,
    typename S>
__device__ __forceinline__ void qmv_streamed_pk_impl(
    const T* x,
    const Q* w,
    const S* scales,
    const T* biases,
    const float* global_scale,
    T* out,
    int row,
    int w_batch,
    int n,
    int k,
    int num_vecs) {
  auto warp = cg::tiled_partition<WARP_SIZE>(cg::this_thread_block());

  constexpr int R = rows_per_warp;
  constexpr int V = vecs_per_warp;
  constexpr int bits = cute::sizeof_bits_v<Q>;
  auto w_step = [&](int idx) { return idx * cuda::std::min(8, bits) / 8; };

  // How many groups (and scales/biases) in a row.
  int groups_per_row = k / group_size;

  // Rows of w/scales/biases; past n the last row is repeated (its results
  // are not written).
  const Q* ws[R];
  const S* ss[R];
  const T* bs[R];
#pragma unroll
  for (int r = 0; r < R; ++r) {
    int64_t rr = cuda::std::min(row + r, n - 1) +
        static_cast<int64_t>(n) * w_batch;
    ws[r] = w + rr * w_step(k);
    ss[r] = scales + rr * groups_per_row;
    bs[r] = has_bias ? biases + rr * groups_per_row : biases;
  }

  // Vectors of x; past num_vecs the last one is repeated (its results are not
  // written).
  const T* xs[V];
#pragma unroll
  for (int v = 0; v < V; ++v) {
    xs[v] = x + static_cast<int64_t>(cuda::std::min(v, num_vecs - 1)) * k;
  }

  // Accumulations of every (row, vector) pair.
  using Accum = cuda::std::conditional_t<(bits >= 8), float, T>;
  Accum sums[R][V][elems_per_thread] = {};

  using XVec = cutlass::Array<T, elems_per_thread>;
  using WVec = cutlass::Array<Q, elems_per_thread>;
  using XTile = RegTile<sizeof(XVec)>;
  // sizeof(WVec) can exceed the tile's packed bytes (3, 5 and 6 bits); like
  // dequant_fma, read the whole array.
  using WTile = RegTile<sizeof(WVec), elems_per_thread * bits / 8>;

  // Register ring of the next prefetch_tiles tiles of w/scales/biases.
  WTile w_buf[prefetch_tiles][R];
  S s_buf[prefetch_tiles][R];
  T b_buf[prefetch_tiles][R];
  auto load_tile = [&](int j, int idx) {
#pragma unroll
    for (int r = 0; r < R; ++r) {
      w_buf[j][r].load_streaming(ws[r] + w_step(idx));
      s_buf[j][r] = ss[r][idx / group_size];
      b_buf[j][r] = T{0};
      if constexpr (has_bias) {
        b_buf[j][r] = bs[r][idx / group_size];
      }
    }
  };

  // One tile from ring slot j: x read once per vector, w dequantized once per
  // row. The slot is refilled with tile next_idx (if >= 0) before the math.
  auto dequant_fma_tile = [&](int j, int idx, int next_idx) {
    WTile w_tile[R];
    S scale[R];
    T bias[R];
#pragma unroll
    for (int r = 0; r < R; ++r) {
      w_tile[r] = w_buf[j][r];
      scale[r] = s_buf[j][r];
      bias[r] = b_buf[j][r];
    }
    XTile x_tile[V];
#pragma unroll
    for (int v = 0; v < V; ++v) {
      x_tile[v].load(xs[v] + idx);
    }
    if (next_idx >= 0) {
      load_tile(j, next_idx);
    }
#pragma unroll
    for (int r = 0; r < R; ++r) {
      auto w_dq = dequant_packed<elems_per_thread, has_bias>(
          w_tile[r].template as<WVec>(), scale[r], bias[r]);
#pragma unroll
      for (int v = 0; v < V; ++v) {
        fma_accumulate(x_tile[v].template as<XVec>(), w_dq, sums[r][v]);
      }
    }
  };

  // Loop over k dimension.
  constexpr int elems_per_warp = WARP_SIZE * elems_per_thread;
  int num_tiles = k / elems_per_warp;
  int lane_idx = warp.thread_rank() * elems_per_thread;
#pragma unroll
  for (int j = 0; j < prefetch_tiles; ++j) {
    if (j < num_tiles) {
      load_tile(j, lane_idx + j * elems_per_warp);
    }
  }
  for (int t0 = 0; t0 < num_tiles; t0 += prefetch_tiles) {
#pragma unroll
    for (int j = 0; j < prefetch_tiles; ++j) {
      int t = t0 + j;
      if (t < num_tiles) {
        int next = t + prefetch_tiles;
        dequant_fma_tile(
            j,
            lane_idx + t * elems_per_warp,
            next < num_tiles ? lane_idx + next * elems_per_warp : -1);
      }
    }
  }

  // Handle remaining elements in k dimension.
  if constexpr (has_residue_k) {
    int rest = k % elems_per_warp;
    int idx = lane_idx + k - rest;
    if (idx < k) {
      load_tile(0, idx);
      dequant_fma_tile(0, idx, -1);
    }
  }

  // Results, reduced as qmv_kernel_impl does.
#pragma unroll
  for (int r = 0; r < R; ++r) {
#pragma unroll
    for (int v = 0; v < V; ++v) {
      float sum{0};
#pragma unroll
      for (int i = 0; i < elems_per_thread; ++i) {
        sum += sums[r][v][i];
      }
      sum = cg::reduce(warp, sum, cg::plus<float>{});

      if (warp.thread_rank() == 0 && v < num_vecs && row + r < n) {
        if constexpr (
            cuda::std::is_same_v<Q, cutlass::float_e2m1_t> &&
            cuda::std::is_same_v<S, cutlass::float_e4m3_t>) {
          // Only nvfp4 supports global scale.
          if (global_scale) {
            sum *= (*global_scale / (F8E4M3_MAX * F4E2M1_MAX));
          }
        }
        out[static_cast<int64_t>(v) * n + row + r] = static_cast<T>(sum);
      }
    }
  }
}

// The warps of a block are warps_per_row_group x (blockDim.y /
// warps_per_row_group) groups of vecs_per_warp vectors; each warp computes
// rows_per_warp consecutive rows. Warps of one row read the same weights, so
// all but the first are served from L1.
template <
    int warps_per_row_group,
    int rows_per_warp,
    int vecs_per_warp,
    int prefetch_tiles,
    int elems_per_thread,
    int group_size,
    bool has_bias,
    bool has_residue_k,
    typename T,
    typename Q,
    typename S>
__global__ void qmv_streamed_pk_kernel(
    const T* x,
    const Q* w,
    const S* scales,
    const T* biases,
    const float* global_scale,
    T* out,
    int m,
    int n,
    int k,
    bool broadcast_w) {
  auto block = cg::this_thread_block();
  auto warp = cg::tiled_partition<WARP_SIZE>(block);

  int warp_id = warp.meta_group_rank();
  int vec_groups_per_block = block.dim_threads().y / warps_per_row_group;
  int row = (block.group_index().x * warps_per_row_group +
             warp_id % warps_per_row_group) *
      rows_per_warp;
  int vec = (block.group_index().y * vec_groups_per_block +
             warp_id / warps_per_row_group) *
      vecs_per_warp;
  if (row >= n || vec >= m) {
    return;
  }

  // Advance pointers of x/out for M and batch dimensions.
  int l = block.group_index().z;
  x += (static_cast<int64_t>(l) * m + vec) * k;
  out += (static_cast<int64_t>(l) * m + vec) * n;
  int w_batch = broadcast_w ? 0 : l;

  qmv_streamed_pk_impl<
      rows_per_warp,
      vecs_per_warp,
      prefetch_tiles,
      elems_per_thread,
      group_size,
      has_bias,
      has_residue_k>(
      x,
      w,
      scales,
      biases,
      global_scale,
      out,
      row,
      w_batch,
      n,
      k,
      cuda::std::min(vecs_per_warp, m - vec));
}

} // namespace mlx::core::cu
