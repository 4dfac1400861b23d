#!/usr/bin/env bash
# What bounds 8-bit M = 1 (session 23), one device call: Nsight Compute on
# stock qmv_kernel at M = 1 and on the dispatch's M = 1 configuration
# (2, 4, 1, 8), bfloat16 and float16, on 4096 x 14336 and 14336 x 4096 (one
# process per problem, all in one CSV): executed instructions, issue rate,
# pipe utilization, stalls. Then `qmv_bench --time` of the same beside stock
# (rotated weights, median of 30) and the read roofline.
# CONFIGS (W,R,V,D,M ..., default 2,4,1,8,1) names other configurations.
# Usage: [CONFIGS=...] cuda_qmv_8bit_m1_device.sh QMV_BENCH OUT
#   (QMV_BENCH: bench/cuda_qmv.py build's build/cuda_qmv/qmv_bench, carried)
# Summary: python3 bench/cuda_qmv_ncu.py OUT/ncu.csv
set -uo pipefail
BIN=$(realpath "$1"); OUT=$2
. "$(dirname "$0")/cuda_device_env.sh"
record_env "$OUT"
ncu --version | tail -1 | tee -a "$OUT/env.txt"
SPECS="0,8,4096,14336 1,8,4096,14336 0,8,14336,4096 1,8,14336,4096"
C=${CONFIGS:-2,4,1,8,1}
# Pipe utilization (the heavy and lite FMA pipes, ALU) beside the sections
# the earlier profiles read.
M="$(ncu_stall_metrics),$(ncu_pipe_metrics)"
RUNS=""
for s in $SPECS; do RUNS="$RUNS $BIN --profile $s $C;"; done
ncu --clock-control none --target-processes all -k regex:qmv \
  --section SpeedOfLight --section Occupancy --section LaunchStats \
  --section SchedulerStats --section WarpStateStats --section InstructionStats \
  --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis \
  --metrics "$M" --page details --csv bash -c "$RUNS" > "$OUT/ncu.csv" 2> "$OUT/ncu_err.txt"
status=$?
echo "ncu exit $status ($(wc -l < "$OUT/ncu.csv") lines)"
for s in $SPECS; do
  # shellcheck disable=SC2086
  "$BIN" --out "$OUT" --time "$s" $C >> "$OUT/time_log.txt" 2>&1 || status=1
done
cat "$OUT/cuda_qmv_time.csv"
exit $status
