#!/usr/bin/env bash
# What float16's promotion and the order of the multiply-adds cost the
# scheduler (session 40): the tile loop of float16 8-bit blocks of 8 vectors
# alone (bench/cuda_promote_cost.cu, its modes 0-5),
#  1. timed at each number of warps per scheduler that fits (SM cycles per
#     iteration, the modes' results compared bitwise);
#  2. Nsight Compute at 2 warps per scheduler, the qmv profiles' sections
#     and stall reasons (cycles per issued instruction);
#  3. per-instruction stall sampling of modes 1 (tensor cores), 2 (cvt)
#     and 3 (the fmas alone, in the tile's order).
# Summary: python3 bench/cuda_qmv_ncu.py OUT/ncu.csv;
#          python3 bench/cuda_qmv_stalls.py OUT/src_1.csv
# Usage: [NCU=0] cuda_promote_cost_device.sh C OUT   (C holds promote_cost;
#   NCU=0 leaves steps 2 and 3 out)
set -uo pipefail
. "$(dirname "$0")/cuda_device_env.sh"
begin_run "$1" "$2"
BIN=$(realpath "$C")/promote_cost
for rep in 1 2; do
  "$BIN" 4096 > "$O/time_$rep.txt" 2>&1 || status=1
  cat "$O/time_$rep.txt"
done
if [ "${NCU:-1}" = 0 ]; then
  exit $status
fi
M="$(ncu_stall_metrics),$(ncu_pipe_metrics)"
ncu --version | tail -1 | tee -a "$O/env.txt"
ncu --clock-control none -k regex:tile_loop \
  --section SpeedOfLight --section Occupancy --section LaunchStats \
  --section SchedulerStats --section WarpStateStats --section InstructionStats \
  --section ComputeWorkloadAnalysis --metrics "$M" --page details --csv \
  "$BIN" 4096 2 > "$O/ncu.csv" 2>> "$O/ncu_err.txt" || status=1
echo "ncu: $(grep -c '"Duration"' "$O/ncu.csv") kernels"
# Launches go mode 0, 1, 2, 3, each a warm-up and then the timed one.
for mode in 1 2 3; do
  ncu --clock-control none -k regex:tile_loop --launch-skip $((2 * mode + 1)) \
    --launch-count 1 --section SourceCounters \
    --section WarpStateStats --page source --print-source sass --csv \
    "$BIN" 4096 2 > "$O/src_$mode.csv" 2>> "$O/ncu_err.txt" || status=1
  echo "ncu source $mode: $(wc -l < "$O/src_$mode.csv") lines"
done
exit $status
