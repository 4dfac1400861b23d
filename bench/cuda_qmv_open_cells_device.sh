#!/usr/bin/env bash
# The products of issue 7's goals that are still open, profiled on today's
# kernel in one device call (session 31). Until now the profile of M = 8..16
# was session 2's, of a 4-bit kernel since rewritten. On 4096 x 14336,
# bfloat16 and float16, 4 and 8 bits:
#  1. Nsight Compute, one process per problem: stock qmv at M = 1, the
#     dispatch at M = 4, 8, 12, 16 and the pin's qmm_sm80 at M = 8, 12, 16,
#     one launch each (sections as the earlier profiles, the stall reasons
#     and the use of the FMA (heavy, lite), ALU, LSU and uniform pipes);
#  2. per-instruction stall sampling (SourceCounters, --page source) of the
#     dispatch at 8-bit M = 8, the nearest open cell, in both types;
#  3. qmv_bench --time of the same products (rotated weights, median of 30,
#     the dispatch and qmm_sm80 in the same CUDA graphs).
# Summaries: python3 bench/cuda_qmv_ncu.py OUT/ncu_D_B.csv;
#            python3 bench/cuda_qmv_stalls.py OUT/src_D.csv
# SHAPE and SPECS replace the shape and the --profile specs (session 48:
# SHAPE=4096,4096 SPECS="0,0,0,0,1 0,0,0,0,2" for one and two vectors), and
# NO_SRC=1 leaves out step 2.
# Usage: [SHAPE=K,N] [SPECS="..."] [NO_SRC=1] cuda_qmv_open_cells_device.sh C OUT
#   (C holds qmv_bench)
set -uo pipefail
. "$(dirname "$0")/cuda_device_env.sh"
begin_run "$1" "$2"
BIN=$(realpath "$C")/qmv_bench
ncu --version | tail -1 | tee -a "$O/env.txt"
SHAPE=${SHAPE:-4096,14336}
SPECS=${SPECS:-"0,0,0,0,4 0,0,0,0,8 0,0,0,0,12 0,0,0,0,16 sm80,8 sm80,12 sm80,16"}
M="$(ncu_stall_metrics),$(ncu_pipe_metrics)"
for d in 0 1; do
  for b in 4 8; do
    # shellcheck disable=SC2086
    ncu --clock-control none -k regex:'qmv|qmm' \
      --section SpeedOfLight --section Occupancy --section LaunchStats \
      --section SchedulerStats --section WarpStateStats --section InstructionStats \
      --section ComputeWorkloadAnalysis --metrics "$M" --page details --csv \
      "$BIN" --profile "$d,$b,$SHAPE" $SPECS > "$O/ncu_${d}_$b.csv" 2>> "$O/ncu_err.txt" || status=1
    echo "ncu $d,$b: $(grep -c '"Duration"' "$O/ncu_${d}_$b.csv") kernels"
  done
done
for d in $([ "${NO_SRC:-0}" = 1 ] || echo 0 1); do
  ncu --clock-control none -k regex:qmv_streamed --launch-count 1 --section SourceCounters \
    --section WarpStateStats --page source --print-source sass --csv \
    "$BIN" --profile "$d,8,$SHAPE" 0,0,0,0,8 > "$O/src_$d.csv" 2>> "$O/ncu_err.txt" || status=1
  echo "ncu source $d: $(wc -l < "$O/src_$d.csv") lines"
done
for d in 0 1; do
  for b in 4 8; do
    # shellcheck disable=SC2086
    "$BIN" --out "$O" --time "$d,$b,$SHAPE" 0,0,0,0,1 $SPECS >> "$O/time_log.txt" 2>&1 || status=1
  done
done
grep -h "qmm_sm80 check" "$O/time_log.txt" | sed -E 's/.*: (ok|QMM_SM80 CHECK FAILED)( .*)?$/\1/' | sort | uniq -c
cat "$O/cuda_qmv_time.csv"
pack_out "$O"
exit $status
