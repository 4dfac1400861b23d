// Experiment, not part of the upstream patch: a shared-memory variant of the
// patched qmv_streamed kernel (x of the block's vectors staged in shared
// memory once, each warp's weights/scales/biases streamed through a private
// cp.async ring). Measured on H200 (docs/benchmarks.md): no faster than the
// register variant at the same rows x vectors per warp (the kernel is bound by
// instruction issue, not load latency), so the patch leaves it out. Included
// by qmv_entry.cu after the patched kernels; uses their RegTile, dequant and
// fma_accumulate, so its arithmetic is the same code.
#pragma once

namespace mlx::core::cu {

// Asynchronous copies (sm80+) for the shared-memory variant below.
__device__ __forceinline__ void cp_async(void* smem, const void* gmem, int bytes) {
  uint32_t dst = static_cast<uint32_t>(__cvta_generic_to_shared(smem));
  if (bytes == 16) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(dst),
                 "l"(gmem));
  } else if (bytes == 8) {
    asm volatile("cp.async.ca.shared.global [%0], [%1], 8;\n" ::"r"(dst),
                 "l"(gmem));
  } else {
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4;\n" ::"r"(dst),
                 "l"(gmem));
  }
}

__device__ __forceinline__ void cp_async_commit() {
  asm volatile("cp.async.commit_group;\n" ::);
}

template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

// Shared-memory layout of qmv_streamed_smem_kernel.
template <
    int warps,
    int rows_per_warp,
    int vecs_per_warp,
    int stages,
    int elems_per_thread,
    int group_size,
    typename T,
    typename Q,
    typename S>
struct QmvStreamedSmem {
  static constexpr int bits = cute::sizeof_bits_v<Q>;
  static constexpr int elems_per_warp = WARP_SIZE * elems_per_thread;
  // Packed weights of one row of one tile, for the whole warp.
  static constexpr int w_bytes = elems_per_warp * bits / 8;
  // Scales (or biases) of one row of one tile.
  static constexpr int sb_bytes = elems_per_warp / group_size * sizeof(S);
  static constexpr int sb_chunk = sb_bytes >= 16 ? 16 : sb_bytes;
  static constexpr int stage_bytes =
      rows_per_warp * (w_bytes + 2 * ((sb_bytes + 15) / 16 * 16));
  static constexpr int ring_bytes = warps * stages * stage_bytes;

  static size_t bytes(int k) {
    return static_cast<size_t>(vecs_per_warp) * k * sizeof(T) + ring_bytes;
  }
  // Alignment of x and w as for the register variant, plus rows of scales and
  // biases aligned to the copy chunk.
  static bool supported(int k, const void* scales, const void* biases) {
    int64_t sb_row = static_cast<int64_t>(k / group_size) * sizeof(S);
    return (k % elems_per_warp == 0) && (sb_bytes % 4 == 0) &&
        (sb_row % sb_chunk == 0) &&
        (reinterpret_cast<uintptr_t>(scales) % sb_chunk == 0) &&
        (reinterpret_cast<uintptr_t>(biases) % sb_chunk == 0);
  }
};

// qmv_streamed_impl's arithmetic, fed through shared memory: the block's V
// vectors of x are copied to shared memory once, and each warp streams its
// rows' packed weights, scales and biases through a private ring of
// `stages` tiles filled by cp.async. This takes the load latency off the
// registers, so that large rows_per_warp x vecs_per_warp tiles (few warps
// per SM) still keep enough bytes in flight. Every (row, vector) keeps
// qmv_kernel_impl's order exactly, as in qmv_streamed_impl.
template <
    int warps,
    int rows_per_warp,
    int vecs_per_warp,
    int stages,
    int elems_per_thread,
    int group_size,
    bool has_bias,
    typename T,
    typename Q,
    typename S>
__global__ void __launch_bounds__(warps* WARP_SIZE)
    qmv_streamed_smem_kernel(
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
  using Layout = QmvStreamedSmem<
      warps,
      rows_per_warp,
      vecs_per_warp,
      stages,
      elems_per_thread,
      group_size,
      T,
      Q,
      S>;
  constexpr int R = rows_per_warp;
  constexpr int V = vecs_per_warp;
  constexpr int bits = Layout::bits;
  constexpr int elems_per_warp = Layout::elems_per_warp;
  constexpr int sb_stride = (Layout::sb_bytes + 15) / 16 * 16;
  auto w_step = [&](int idx) { return idx * cuda::std::min(8, bits) / 8; };

  extern __shared__ __align__(16) uint8_t smem[];
  auto block = cg::this_thread_block();
  auto warp = cg::tiled_partition<WARP_SIZE>(block);
  int lane = warp.thread_rank();
  int warp_id = warp.meta_group_rank();

  int vec = block.group_index().y * V;
  if (vec >= m) {
    return;
  }
  int num_vecs = cuda::std::min(V, m - vec);
  int l = block.group_index().z;
  x += (static_cast<int64_t>(l) * m + vec) * k;
  out += (static_cast<int64_t>(l) * m + vec) * n;
  int w_batch = broadcast_w ? 0 : l;

  // x of the block's vectors -> shared memory (the last one repeated).
  T* xs = reinterpret_cast<T*>(smem);
  {
    int chunks_per_vec = k * sizeof(T) / 16;
    for (int c = block.thread_rank(); c < V * chunks_per_vec;
         c += block.num_threads()) {
      int v = c / chunks_per_vec;
      int off = c - v * chunks_per_vec;
      cp_async(
          reinterpret_cast<uint8_t*>(xs) + static_cast<int64_t>(c) * 16,
          reinterpret_cast<const uint8_t*>(
              x + static_cast<int64_t>(cuda::std::min(v, num_vecs - 1)) * k) +
              static_cast<int64_t>(off) * 16,
          16);
    }
    cp_async_commit();
  }

  int row = (block.group_index().x * warps + warp_id) * R;
  int groups_per_row = k / group_size;
  const uint8_t* ws[R];
  const uint8_t* ss[R];
  const uint8_t* bs[R];
#pragma unroll
  for (int r = 0; r < R; ++r) {
    int64_t rr = cuda::std::min(row + r, n - 1) +
        static_cast<int64_t>(n) * w_batch;
    ws[r] = reinterpret_cast<const uint8_t*>(w) + rr * w_step(k);
    ss[r] = reinterpret_cast<const uint8_t*>(scales + rr * groups_per_row);
    bs[r] = reinterpret_cast<const uint8_t*>(
        has_bias ? biases + rr * groups_per_row : biases);
  }
  uint8_t* ring = smem + static_cast<size_t>(V) * k * sizeof(T) +
      warp_id * stages * Layout::stage_bytes;
  auto w_slot = [&](int slot, int r) {
    return ring + slot * Layout::stage_bytes + r * Layout::w_bytes;
  };
  auto s_slot = [&](int slot, int r) {
    return ring + slot * Layout::stage_bytes + R * Layout::w_bytes +
        r * sb_stride;
  };
  auto b_slot = [&](int slot, int r) {
    return ring + slot * Layout::stage_bytes + R * Layout::w_bytes +
        (R + r) * sb_stride;
  };
  constexpr int lane_w_bytes = elems_per_thread * bits / 8;
  constexpr int sb_chunks = Layout::sb_bytes / Layout::sb_chunk;
  auto issue = [&](int t, int slot) {
    int idx = lane * elems_per_thread + t * elems_per_warp;
#pragma unroll
    for (int r = 0; r < R; ++r) {
      cp_async(
          w_slot(slot, r) + lane * lane_w_bytes,
          ws[r] + w_step(idx),
          lane_w_bytes);
    }
    // Lanes 0..R*sb_chunks-1 copy scales, the next ones biases.
    int sb_off = t * Layout::sb_bytes;
    if (lane < R * sb_chunks) {
      int r = lane / sb_chunks, c = lane % sb_chunks;
#pragma unroll
      for (int rr = 0; rr < R; ++rr) {
        if (rr == r) {
          cp_async(
              s_slot(slot, rr) + c * Layout::sb_chunk,
              ss[rr] + sb_off + c * Layout::sb_chunk,
              Layout::sb_chunk);
        }
      }
    } else if (has_bias && lane < 2 * R * sb_chunks) {
      int r = (lane - R * sb_chunks) / sb_chunks, c = lane % sb_chunks;
#pragma unroll
      for (int rr = 0; rr < R; ++rr) {
        if (rr == r) {
          cp_async(
              b_slot(slot, rr) + c * Layout::sb_chunk,
              bs[rr] + sb_off + c * Layout::sb_chunk,
              Layout::sb_chunk);
        }
      }
    }
  };

  int num_tiles = k / elems_per_warp;
#pragma unroll
  for (int t = 0; t < stages - 1; ++t) {
    if (t < num_tiles) {
      issue(t, t);
    }
    cp_async_commit();
  }
  // x is the oldest group: wait for it and share it with the block.
  cp_async_wait<stages - 1>();
  block.sync();
  if (row >= n) {
    return;
  }

  using Accum = cuda::std::conditional_t<(bits >= 8), float, T>;
  Accum sums[R][V][elems_per_thread] = {};
  using XTile = RegTile<elems_per_thread * sizeof(T)>;
  using WTile = RegTile<lane_w_bytes>;
  using XVec = cutlass::Array<T, elems_per_thread>;
  using WVec = cutlass::Array<Q, elems_per_thread>;

  for (int t = 0; t < num_tiles; ++t) {
    int slot = t % stages;
    // Everyone is done with the slot refilled now (read at t - 1).
    warp.sync();
    if (t + stages - 1 < num_tiles) {
      issue(t + stages - 1, (t + stages - 1) % stages);
    }
    cp_async_commit();
    cp_async_wait<stages - 1>();
    warp.sync();

    int idx = lane * elems_per_thread + t * elems_per_warp;
    int g = lane * elems_per_thread / group_size;
    XTile x_tile[V];
#pragma unroll
    for (int v = 0; v < V; ++v) {
      x_tile[v] = *reinterpret_cast<const XTile*>(xs + v * k + idx);
    }
#pragma unroll
    for (int r = 0; r < R; ++r) {
      WTile w_tile =
          *reinterpret_cast<const WTile*>(w_slot(slot, r) + lane * lane_w_bytes);
      S scale = reinterpret_cast<const S*>(s_slot(slot, r))[g];
      T bias{0};
      if constexpr (has_bias) {
        bias = reinterpret_cast<const T*>(b_slot(slot, r))[g];
      }
      auto w_dq = dequant<elems_per_thread, has_bias>(
          w_tile.template as<WVec>(), scale, bias);
#pragma unroll
      for (int v = 0; v < V; ++v) {
        fma_accumulate(x_tile[v].template as<XVec>(), w_dq, sums[r][v]);
      }
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

      if (lane == 0 && v < num_vecs && row + r < n) {
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

} // namespace mlx::core::cu
