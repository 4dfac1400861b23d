#!/usr/bin/env bash
# The dispatch's launch of 4-bit rings of 32 rows a block against the same
# ring with every row block at full size, one row block per block (session
# 50): where launch_qmv_streamed splits the last wave into half-size blocks
# (qmv_streamed_full_blocks) or lets one wave take the row blocks in turn
# (qmv_streamed_takes_turns), BX's qmv_bench --time runs the dispatch
# (0,0,0,0,M) beside T = 1 of its ring: (8, 4, 1, 4) at M = 1, (8, 4, 2, 3)
# at M = 2 and (8, 4, 4, 3) at M = 4, bfloat16 and float16, PASSES times.
# python3 bench/cuda_qmv_split_report.py OUT/t* prints the ratios.
# Usage: [SHAPES="K,N ..."] [PASSES=3] bench/cuda_qmv_split_rule_device.sh BX OUT
set -uo pipefail
BX=$(realpath "$1"); O=$2
H=$(dirname "$0")
. "$H/cuda_device_env.sh"
record_env "$O"
status=0
for p in $(seq "${PASSES:-3}"); do
  mkdir -p "$O/t$p"
  for s in ${SHAPES:-4096,14336 3840,15360 5120,17408 4096,20480 4096,11008 \
      4096,12288 5120,13824 2048,16384 8192,28672 4096,28672}; do
    for d in 0 1; do
      timeout 60 "$BX/qmv_bench" --out "$O/t$p" --time "$d,4,$s" 0,0,0,0,1 \
        8,4,1,4,1,1 0,0,0,0,2 8,4,2,3,2,1 0,0,0,0,4 8,4,4,3,4,1 \
        >> "$O/t$p/log.txt" 2>&1 || status=1
    done
  done
done
exit $status
