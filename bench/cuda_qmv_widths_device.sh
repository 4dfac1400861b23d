#!/usr/bin/env bash
# One device call for the widths the ring's configurations were never picked
# for (issue 7): 3-, 5- and 6-bit weights, bf16 and fp16, groups of 64, on
# Llama-3-8B's 4096 x 14336 and 14336 x 4096, gemma's 3840 x 15360 and
# gpt-oss-20b's 2880 x 5760, M = 1, 2, 4, 8 and 16: the dispatch and the
# ring (and at M = 1 the register ring) at each instantiated configuration
# worth trying at that M, stock beside at the same M (qmv_bench --time;
# nothing is checked here, the parity runs check these kernels). Then Nsight
# Compute's instruction and issue counts of the dispatch at M = 1 and 4 on
# 3840 x 15360 bf16 at 3, 4, 5, 6 and 8 bits.
# Run from the project root.
#   C: folder holding qmv_bench (`bench/cuda_qmv.py build`);
#   OUT: where cuda_qmv_time.csv, ncu.csv and env.txt go.
#   BITS: the widths to sweep (default "3 5 6").
# Usage: bench/cuda_qmv_widths_device.sh C OUT [BITS]
set -uo pipefail
. "$(dirname "$0")/cuda_device_env.sh"
begin_run "$1" "$2"
widths=${3:-3 5 6}
declare -A per_m=(
  [1]="0,0,0,0 8,4,1,4 4,4,1,4 4,4,1,6 16,2,1,4 4,2,1,8 2,4,1,8 4,4,1,8 8,2,1,8 2,1,0,2 4,1,0,2 4,1,0,4 8,1,0,2"
  [2]="0,0,0,0 8,4,2,3 4,4,2,4 8,2,2,4 16,2,2,2 4,2,2,8 2,4,2,8"
  [4]="0,0,0,0 8,4,4,3 8,4,4,2 4,4,4,4 8,2,4,4 4,2,4,4 2,4,4,6 2,2,4,8"
  [8]="0,0,0,0 8,4,4,3 2,4,4,6 4,2,8,3 8,2,8,3 8,2,8,2"
  [16]="0,0,0,0 8,4,4,3 2,4,4,6 4,2,8,3 8,2,8,3 4,1,16,2"
)
configs=""
for m in 1 2 4 8 16; do
  for c in ${per_m[$m]}; do
    configs="$configs $c,$m"
  done
done
for shape in 4096,14336 14336,4096 3840,15360 2880,5760; do
  for bits in $widths; do
    for dtype in 0 1; do
      # A configuration the harness does not launch for this width (the
      # register ring below 16 elements per lane) records a negative time.
      # shellcheck disable=SC2086
      "$C/qmv_bench" --out "$O" --time "$dtype,$bits,$shape" $configs \
        > /dev/null 2>> "$O/stderr.txt"
    done
  done
done
echo "timed $(($(wc -l < "$O/cuda_qmv_time.csv") - 1)) products"
if command -v ncu > /dev/null; then
  for bits in 3 4 5 6 8; do
    ncu --clock-control none -k regex:qmv \
      --section SpeedOfLight --section Occupancy --section LaunchStats \
      --section SchedulerStats --section WarpStateStats \
      --section InstructionStats --page details --csv \
      "$C/qmv_bench" --profile "0,$bits,3840,15360" 0,0,0,0,1 0,0,0,0,4 \
      > "$O/ncu_$bits.csv" 2>> "$O/ncu_err.txt" || status=1
  done
  echo "ncu done (status $status)"
else
  echo "SKIPPED ncu: not on this machine"
fi
echo "status $status"
exit $status
