#!/usr/bin/env bash
# Why x promoted to float once per block is slower (session 32), one device
# call: Nsight Compute on one launch of (4, 2, 8, 4) and (2, 4, 4, 6) at
# M = 8 and 4, 8 bits, 4096 x 14336, bfloat16 and float16, in the build
# before (B0) and the one with float tiles of x (B1): instructions, shared
# memory wavefronts and bank conflicts, the LSU and FMA pipes, the issue
# rate and the stall reasons (MIO throttle and short scoreboard are shared
# memory's).
# Summary: python3 bench/cuda_qmv_ncu.py OUT/ncu_bI_D.csv
# Usage: bench/experiments/cuda_float_x/ncu_device.sh B0 B1 OUT
set -uo pipefail
B0=$1; B1=$2
. "$(dirname "$0")/../../cuda_device_env.sh"
begin_run "$B0" "$3"
ncu --version | tail -1 | tee -a "$O/env.txt"
M="$(ncu_stall_metrics),$(ncu_pipe_metrics)"
M="$M,l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum"
M="$M,l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum"
M="$M,l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum"
M="$M,l1tex__data_pipe_lsu_wavefronts_mem_shared.avg.pct_of_peak_sustained_elapsed"
for i in 0 1; do
  b=$B0; [ "$i" = 1 ] && b=$B1
  for d in 0 1; do
    ncu --clock-control none -k regex:qmv_streamed \
      --section SpeedOfLight --section Occupancy --section LaunchStats \
      --section SchedulerStats --section WarpStateStats --section InstructionStats \
      --metrics "$M" --page details --csv \
      "$(realpath "$b")/qmv_bench" --profile "$d,8,4096,14336" 4,2,8,4,8 2,4,4,6,4 \
      > "$O/ncu_b${i}_$d.csv" 2>> "$O/ncu_err.txt" || status=1
    echo "ncu b$i $d: $(grep -c '"Duration"' "$O/ncu_b${i}_$d.csv") kernels"
  done
done
pack_out "$O"
exit $status
