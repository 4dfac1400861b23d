#!/usr/bin/env python3
"""Experiment (session 23, measured and dropped): peel the ring's last steps
off the tile loop of the CUDA streamed qmv.

qmv_streamed_impl's loop refills a ring slot on every step but the last
stages - 1, so each step tests whether a tile is left to copy and ptxas puts
the copies out of line behind a branch (docs/benchmarks.md, "Instructions
per element at M = 1"). Here the steps whose refill is a whole tile run in a
loop of their own, with no test, and the last ones in the loop as it was
(kept as it was with a rest of k: there the second copy of the tile's code
took up to 40 more registers). The bfloat16 8-bit M = 1 tile goes from 204
to 198 instructions; the order of every sum is unchanged (the H200 parity
run found every row identical to stock M = 1, docs/data/
cuda_qmv_h200_2026-12-03/call2).

Measured on the H200 against the queue (same call, A/B): 1.5-5.5% faster at
M = 2..4 in float16 and for 4-bit float16 at M = 8 and 16, within 1% at
M = 1, and 1-5% slower at 8 bits for M = 8 and 16 (the (4, 2, 8, 3) blocks,
up to 14 more registers), so the queue keeps one loop.

Usage: cuda_peeled_ring.py QMV_STREAMED_CUH: rewrites the header of a patched
checkout in place (a copy, e.g. under a folder passed to
`bench/cuda_qmv.py build --patched`).
"""
from __future__ import annotations

import sys
from pathlib import Path

OLD = """  uint32_t slot = 0;
  for (int t = 0; t < num_tiles + (has_residue_k ? 1 : 0); ++t) {
    // Tile t is in (slot t % stages) and every warp is done with tile t - 1,
    // whose slot is refilled with tile t + stages - 1.
    cp_async_wait<stages - 2>();
"""
NEW = """  uint32_t slot = 0;
  int t = 0;
  // Tile t is in (slot t % stages) and every warp is done with tile t - 1,
  // whose slot is refilled with tile t + stages - 1. While that is a whole
  // tile, the steps run in a loop of their own, whose copies need no test.
  if constexpr (!has_residue_k) {
    for (; t + stages - 1 < num_tiles; ++t) {
      cp_async_wait<stages - 2>();
      block.sync();
      load_stage(t + stages - 1, false);
      cp_async_commit();
      dequant_fma_tile(slot);
      slot = next_slot(slot);
    }
  }
  for (; t < num_tiles + (has_residue_k ? 1 : 0); ++t) {
    cp_async_wait<stages - 2>();
"""


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(__doc__.rsplit("Usage: ", 1)[1].strip(), file=sys.stderr)
        return 2
    path = Path(argv[1])
    text = path.read_text()
    if text.count(OLD) != 1:
        print(f"{path}: the ring loop of qmv_streamed_impl is not there as expected", file=sys.stderr)
        return 1
    path.write_text(text.replace(OLD, NEW))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
