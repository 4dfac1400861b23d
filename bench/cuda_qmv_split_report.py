"""The dispatch's time over its ring's at full size (T = 1), per shape,
dtype and M, from qmv_bench --time CSVs (bench/cuda_qmv_split_rule_device.sh):
the fastest of each folder's passes, and what the launch does with the row
blocks on a device of `--sms` multiprocessors (the 4-bit rings' blocks per
multiprocessor from ptxas's registers and the ring's shared memory, 256
threads a block; other widths name their ring)."""
from __future__ import annotations

import argparse
import csv
from collections import defaultdict
from pathlib import Path

import cuda_qmv_report

# ptxas's registers per thread for the dispatch's 4-bit rings (warps, rows
# per warp, vectors, stages) of 1, 2 and 4 vectors.
REGISTERS = {(8, 4, 1, 4): 80, (8, 4, 2, 3): 128, (8, 4, 4, 3): 216}
# k per tile at 4 bits: 32 lanes of 16 elements.
TILE_K = 512
# Hopper's multiprocessor: 65536 registers in 4 partitions, given to a warp
# in units of 256 (8 a thread); 64 warps; 228 KiB of shared memory of which
# the runtime keeps 1 KiB per block.
SM_REGISTERS = 65536
SM_PARTITIONS = 4
REGISTER_UNIT = 256
SM_WARPS = 64
SM_SHARED = 228 * 1024
BLOCK_RESERVED_SHARED = 1024


def ring_bytes(ring: tuple[int, int, int, int], group_size: int = 64) -> int:
    """QmvStreamedLayout::bytes of a 4-bit ring of 16-bit x, scales and
    biases (no residue): per stage the block's x tiles, its rows' packed w
    and their scales and biases."""
    warps, rows, vecs, stages = ring
    x = vecs * TILE_K * 2
    w = warps * rows * TILE_K * 4 // 8
    sb = warps * rows * (TILE_K // group_size) * 2
    return stages * (x + w + 2 * sb)


def blocks_per_sm(ring: tuple[int, int, int, int]) -> int | None:
    """cudaOccupancyMaxActiveBlocksPerMultiprocessor of the ring's blocks,
    or None for a ring whose registers are not known: the lesser of what
    the warps, the registers and the shared-memory ring allow. Registers
    are counted as cuda_occupancy.h counts them: a warp's rounded up to the
    allocation unit, and whole warps in each partition of the file."""
    regs = REGISTERS.get(ring)
    if regs is None:
        return None
    per_warp = -(-regs * 32 // REGISTER_UNIT) * REGISTER_UNIT
    warps = SM_REGISTERS // SM_PARTITIONS // per_warp * SM_PARTITIONS
    by_registers = min(warps, SM_WARPS) // ring[0]
    by_shared = SM_SHARED // (ring_bytes(ring) + BLOCK_RESERVED_SHARED)
    return min(by_registers, by_shared)


def launch(dtype: str, k: int, n: int, m: int, sms: int) -> str:
    """What the dispatch (cuda_qmv_report.dispatch) does with k x n at m
    vectors (4 bits): qmv_prefetch_kernel, or the ring's
    launch_qmv_streamed, whose blocks take no turns with a rest of k or in
    float16 blocks of 2 vectors (qmv_streamed_tiles), and split a last wave
    of at most half a wave (3/8 for blocks of at most 3 a multiprocessor
    with fewer than 16 tiles) where 2 or more blocks fit a multiprocessor
    (qmv_streamed_full_blocks, session 51)."""
    ring = cuda_qmv_report.dispatch(4, m, k, n)
    warps, rows, vecs, _ = ring
    if vecs == 0:
        return "qmv_prefetch_kernel"
    per_sm = blocks_per_sm(ring)
    if per_sm is None:
        return f"ring {ring}, blocks per multiprocessor not known"
    wave = per_sm * sms
    row_blocks = -(-n // (warps * rows))
    last = row_blocks % wave
    waves = f"{row_blocks / wave:.2f} waves"
    in_turn = k % TILE_K == 0 and not (dtype == "fp16" and vecs == 2)
    if in_turn and takes_turns(wave, row_blocks, vecs):
        return f"{waves}, in turn"
    short_large = k // TILE_K < 16 and per_sm <= 3
    if per_sm < 2 or row_blocks <= wave or 8 * last > (3 if short_large else 4) * wave:
        return f"{waves}, full"
    return f"{waves}, last {last} split"


def takes_turns(wave: int, row_blocks: int, vecs: int) -> bool:
    """qmv_streamed_takes_turns (session 51): blocks of more than 4 vectors
    past four waves or past two with the last more than half full; of up to
    4 past six waves, or past four (of 3 or 4 vectors, two) with the last
    more than half full, or (of up to 2) past two with it more than 70%
    full."""
    waves, last = divmod(row_blocks, wave)
    fuller = 2 * last > wave
    if vecs > 4:
        return waves >= 2 and (row_blocks > 4 * wave or fuller)
    if waves >= 6:
        return row_blocks > 6 * wave
    if waves >= 4 or (waves >= 2 and vecs > 2):
        return fuller
    return waves >= 2 and 10 * last > 7 * wave


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("folders", nargs="+", type=Path)
    parser.add_argument("--sms", type=int, default=132)
    args = parser.parse_args()
    best: dict[tuple[str, str, int, int, str], float] = defaultdict(lambda: float("inf"))
    for folder in args.folders:
        with open(folder / "cuda_qmv_time.csv", newline="") as f:
            for row in csv.DictReader(f):
                impl = {"streamed_auto": "auto", "streamed_no_tail": "full"}.get(row["impl"])
                if impl:
                    key = (row["shape"], row["dtype"], int(row["bits"]), int(row["M"]), impl)
                    best[key] = min(best[key], float(row["us"]))
    print("shape dtype bits M: launch | dispatch us | full-size us | dispatch / full")
    for shape, dtype, bits, m in sorted({k[:4] for k in best}):
        if (shape, dtype, bits, m, "full") not in best or (shape, dtype, bits, m, "auto") not in best:
            continue  # timed without its pair
        auto, full = best[(shape, dtype, bits, m, "auto")], best[(shape, dtype, bits, m, "full")]
        k, n = (int(v) for v in shape.split("x"))
        what = (launch(dtype, k, n, m, args.sms) if bits == 4
                else f"ring {cuda_qmv_report.dispatch(bits, m, None, n)}")
        print(f"{shape:>10} {dtype} {bits}-bit M={m}: {what:24} | "
              f"{auto:7.2f} | {full:7.2f} | {auto / full:.3f}")


if __name__ == "__main__":
    main()
