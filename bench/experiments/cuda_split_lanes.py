#!/usr/bin/env python3
"""Experiment (session 4, tried and dropped): split each lane's elements over
two warps in the CUDA streamed qmv.

Warps 2g and 2g + 1 of a block compute the same R rows: lane i of the first
takes the first chunk of lane i's elements, lane i of the second the second,
so each warp keeps half the partial sums and a warp holds R x V = 32 (row,
vector) pairs at 4 bits (R = 4, V = 8) in the registers that 16 took. At the
end the first warp hands its partial sums over in shared memory and the
second continues them in qmv_kernel_impl's order (same bits: the parity run
found every row identical). The dispatch sends M >= 5 at 2 and 4 bits to
(8 warps, R = 4, V = 8, 3 stages, 2 warps per row group).

Usage: cuda_split_lanes.py QMV_CU: rewrites a patched qmv.cu in place (a
copy, e.g. under a folder passed to `bench/cuda_qmv.py build --patched`),
as the patch was in session 4 (the streamed kernels have since changed and
moved to qmv_streamed.cuh; this script is the record of that experiment).
Measured on the H200 and written up in docs/cuda_qmv_notes.md (session 4)
with the data in docs/data/cuda_qmv_h200_2026-11-30e/.
"""
from __future__ import annotations

import sys
from pathlib import Path

path = Path(sys.argv[1])
s = path.read_text()


def rep(old: str, new: str, cnt: int = 1) -> None:
    global s
    if s.count(old) != cnt:
        raise SystemExit(f"cuda_split_lanes: expected {cnt} of: {old[:60]!r}")
    s = s.replace(old, new)


# impl template: add splits
rep("""    bool has_bias,
    bool has_residue_k,
    typename T,
    typename Q,
    typename S>
__device__ __forceinline__ void qmv_streamed_impl(""","""    bool has_bias,
    bool has_residue_k,
    typename T,
    typename Q,
    typename S,
    int splits = 1>
__device__ __forceinline__ void qmv_streamed_impl(""")
rep("""  using Layout = QmvStreamedLayout<
      warps_per_block,
      rows_per_warp,
      vecs_per_block,
      stages,
      elems_per_thread,
      group_size,
      T,
      Q,
      S>;
  static_assert(Layout::supported_types);
  auto block = cg::this_thread_block();""","""  using Layout = QmvStreamedLayout<
      warps_per_block / splits,
      rows_per_warp,
      vecs_per_block,
      stages,
      elems_per_thread,
      group_size,
      T,
      Q,
      S>;
  static_assert(Layout::supported_types);
  static_assert(splits == 1 || splits == 2);
  static_assert(Layout::pieces % splits == 0 && Layout::chunks % splits == 0);
  static_assert(!Layout::odd_width || splits == 1);
  auto block = cg::this_thread_block();""")
rep("""  int warp_id = warp.meta_group_rank();""","""  // With splits = 2, warps 2g and 2g + 1 compute the same rows: each lane
  // of the first takes the first half of that lane's elements, the same
  // lane of the second the second half.
  int warp_id = warp.meta_group_rank() / splits;
  int part = warp.meta_group_rank() % splits;""")
rep("""  constexpr int w_passes = cuda::ceil_div(w_copies, WARP_SIZE);
  const char* w_copy[w_passes];
#pragma unroll
  for (int p = 0; p < w_passes; ++p) {
    int i = p * WARP_SIZE + lane;""","""  constexpr int w_lanes = WARP_SIZE * splits;
  constexpr int w_passes = cuda::ceil_div(w_copies, w_lanes);
  int w_lane = part * WARP_SIZE + lane;
  const char* w_copy[w_passes];
#pragma unroll
  for (int p = 0; p < w_passes; ++p) {
    int i = p * w_lanes + w_lane;""")
rep("""      warp_id * R * Layout::w_row_bytes + lane * 16;""","""      warp_id * R * Layout::w_row_bytes + w_lane * 16;""")
rep("""    for (int p = 0; p < w_passes; ++p) {
      int i = p * WARP_SIZE + lane;
      copy_flags |= uint32_t((i % w_row_copies) * 16 < rest * bits / 8) << p;""","""    for (int p = 0; p < w_passes; ++p) {
      int i = p * w_lanes + w_lane;
      copy_flags |= uint32_t((i % w_row_copies) * 16 < rest * bits / 8) << p;""")
rep("""    copy_flags |= uint32_t(lane < sb_lanes) << 28;""","""    copy_flags |= uint32_t(part == 0 && lane < sb_lanes) << 28;""")
rep("""      if ((w_copies % WARP_SIZE == 0 || p * WARP_SIZE + lane < w_copies) &&
          (!partial || (copy_flags >> p) & 1)) {
        cp_async<16>(w_smem + stage + p * WARP_SIZE * 16, w_copy[p]);""","""      if ((w_copies % w_lanes == 0 || p * w_lanes + w_lane < w_copies) &&
          (!partial || (copy_flags >> p) & 1)) {
        cp_async<16>(w_smem + stage + p * w_lanes * 16, w_copy[p]);""")
rep("""    } else if (lane < sb_lanes) {""","""    } else if (part == 0 && lane < sb_lanes) {""")
# sums
rep("""  Accum sums[R][V][elems_per_thread];""","""  constexpr int part_elems = elems_per_thread / splits;
  Accum sums[R][V][part_elems];""")
# lane loads: part bytes
rep("""  constexpr int w_lane_bytes = Layout::w_lane_bytes;""","""  constexpr int w_lane_bytes = Layout::w_lane_bytes / splits;""")
rep("""  int w_lane_shift = (lane * w_lane_bytes) % 4;""","""  int w_lane_shift = (lane * Layout::w_lane_bytes) % 4;""")
rep("""        warp_id * R * Layout::w_row_bytes + lane * Layout::w_lane_bytes;""","""        warp_id * R * Layout::w_row_bytes + lane * Layout::w_lane_bytes +
        part * w_lane_bytes;""")
rep("""    for (int p = 0; p < Layout::pieces; ++p) {""","""    for (int p = 0; p < Layout::pieces / splits; ++p) {""")
rep("""        int c = p * piece_chunks + pc;
#pragma unroll
        for (int v = 0; v < V; ++v) {
          auto x_chunk = promote(*reinterpret_cast<const XChunk*>(
              xt + (v * chunks + c) * WARP_SIZE * chunk_elems));""","""        int c = p * piece_chunks + pc;
        int xc = part * (chunks / splits) + c;
#pragma unroll
        for (int v = 0; v < V; ++v) {
          auto x_chunk = promote(*reinterpret_cast<const XChunk*>(
              xt + (v * chunks + xc) * WARP_SIZE * chunk_elems));""")
# epilogue
rep("""  constexpr int P = R * V;
  float sum[P];
#pragma unroll
  for (int r = 0; r < R; ++r) {
#pragma unroll
    for (int v = 0; v < V; ++v) {
      sum[r * V + v] = 0;
#pragma unroll
      for (int i = 0; i < elems_per_thread; ++i) {
        sum[r * V + v] += to_float(sums[r][v], i);
      }
    }
  }""","""  constexpr int P = R * V;
  float sum[P];
#pragma unroll
  for (int q = 0; q < P; ++q) {
    sum[q] = 0;
  }
  if constexpr (splits > 1) {
    // The second half of each lane's sum continues from the first: the
    // first warp of the pair hands its partial sums over in shared memory.
    static_assert(
        Layout::bytes >= warps_per_block / splits * P * WARP_SIZE * 4);
    cp_async_wait<0>();
    block.sync();
    float* handed = reinterpret_cast<float*>(smem) + warp_id * P * WARP_SIZE;
    if (part == 0) {
#pragma unroll
      for (int r = 0; r < R; ++r) {
#pragma unroll
        for (int v = 0; v < V; ++v) {
          float s = 0;
#pragma unroll
          for (int i = 0; i < part_elems; ++i) {
            s += to_float(sums[r][v], i);
          }
          handed[(r * V + v) * WARP_SIZE + lane] = s;
        }
      }
    }
    block.sync();
    if (part == 0) {
      return;
    }
#pragma unroll
    for (int q = 0; q < P; ++q) {
      sum[q] = handed[q * WARP_SIZE + lane];
    }
  }
#pragma unroll
  for (int r = 0; r < R; ++r) {
#pragma unroll
    for (int v = 0; v < V; ++v) {
#pragma unroll
      for (int i = 0; i < part_elems; ++i) {
        sum[r * V + v] += to_float(sums[r][v], i);
      }
    }
  }""")
# kernel
rep("""    bool has_bias,
    bool has_residue_k,
    typename T,
    typename Q,
    typename S>
__global__ void qmv_streamed_kernel(""","""    bool has_bias,
    bool has_residue_k,
    typename T,
    typename Q,
    typename S,
    int splits = 1>
__global__ void qmv_streamed_kernel(""")
rep("""  int row0 = block.group_index().x * warps_per_block * rows_per_warp;""","""  int row0 = block.group_index().x * (warps_per_block / splits) * rows_per_warp;""")
rep("""      has_bias,
      has_residue_k>(
      x,
      w,
      scales,""","""      has_bias,
      has_residue_k,
      T,
      Q,
      S,
      splits>(
      x,
      w,
      scales,""")
rep("""    int group_size,
    bool has_bias,
    typename T,
    typename Q,
    typename S,
    typename F>
void launch_qmv_streamed(""","""    int group_size,
    bool has_bias,
    int splits = 1,
    typename T,
    typename Q,
    typename S,
    typename F>
void launch_qmv_streamed(""")
rep("""  using Layout =
      typename Traits::template Layout<warps, rows, vecs, stages, group_size>;""","""  using Layout = typename Traits::
      template Layout<warps / splits, rows, vecs, stages, group_size>;""")
rep("""      uint32_t(cuda::ceil_div(n, warps * rows)),""","""      uint32_t(cuda::ceil_div(n, warps / splits * rows)),""")
rep("""        has_residue_k.value,
        T,
        Q,
        S>;
    launch_kernel(
        reinterpret_cast<void*>(kernel),
        num_blocks,
        block_dims,
        args,
        Layout::bytes);""","""        has_residue_k.value,
        T,
        Q,
        S,
        splits>;
    launch_kernel(
        reinterpret_cast<void*>(kernel),
        num_blocks,
        block_dims,
        args,
        Layout::bytes);""")
# dispatch: bits<8, m>=5 -> split config (8 warps, 4 rows, 8 vecs, 3 stages, splits 2) where T is 16-bit
rep("""        vecs, [&](auto warps, auto rows, auto vecs, auto stages) {
          launch_qmv_streamed<
              warps.value,
              rows.value,
              vecs.value,
              stages.value,
              group_size,
              has_bias>(""","""        vecs, [&](auto warps, auto rows, auto vecs, auto stages) {
          constexpr bool split_ok =
              QmvStreamedTraits<T, Q, S>::template Layout<
                  1, 1, 1, 2, group_size>::chunks == 2 &&
              !QmvStreamedTraits<T, Q, S>::template Layout<
                  1, 1, 1, 2, group_size>::odd_width &&
              cute::sizeof_bits_v<Q> < 8;
          if constexpr (split_ok && SPLIT_VECS > 0) {
            if ((broadcast_w ? m * l : m) >= SPLIT_MIN_M) {
              launch_qmv_streamed<SPLIT_W, SPLIT_R, SPLIT_VECS, SPLIT_S, group_size, has_bias, 2>(
                  x, w, scales, biases, global_scale, out, m, n, k, l,
                  broadcast_w, launch_kernel);
              return;
            }
          }
          launch_qmv_streamed<
              warps.value,
              rows.value,
              vecs.value,
              stages.value,
              group_size,
              has_bias>(""")
s=s.replace("namespace cu {\n","namespace cu {\n#ifndef SPLIT_VECS\n#define SPLIT_VECS 8\n#define SPLIT_W 8\n#define SPLIT_R 4\n#define SPLIT_S 3\n#define SPLIT_MIN_M 5\n#endif\n",1)
path.write_text(s)
