#!/usr/bin/env bash
# The dispatch's launch of 4-bit rings of 32 rows a block against the same
# ring with every row block at full size, one row block per block (session
# 50): where launch_qmv_streamed splits the last wave into half-size blocks
# (qmv_streamed_full_blocks) or lets one wave take the row blocks in turn
# (qmv_streamed_takes_turns), BX's qmv_bench --time runs the dispatch
# (0,0,0,0,M) beside T = 1 of its ring: (8, 4, 1, 4) at M = 1, (8, 4, 2, 3)
# at M = 2 and (8, 4, 4, 3) at M = 4, bfloat16 and float16, PASSES times;
# with BITS ("4 8" say) and MS ("1 2 4 8" say), those widths and vector
# counts, each beside the ring cuda_qmv_report.dispatch gives it on N rows
# (where the dispatch takes qmv_prefetch_kernel, the ring it takes for more
# vectors or a longer k).
# python3 bench/cuda_qmv_split_report.py OUT/t* prints the ratios.
# Usage: [SHAPES="K,N ..."] [BITS="4"] [MS="1 2 4"] [PASSES=3] bench/cuda_qmv_split_rule_device.sh BX OUT
set -uo pipefail
BX=$(realpath "$1"); O=$2
H=$(dirname "$0")
. "$H/cuda_device_env.sh"
record_env "$O"
status=0
# qmv_bench --time's specs for BITS-bit weights on N rows at each of MS.
specs() {
  python3 -c '
import sys
sys.path.insert(0, sys.argv[1])
from cuda_qmv_report import dispatch
bits, n = int(sys.argv[2]), int(sys.argv[3])
print(" ".join(f"0,0,0,0,{m} " + ",".join(map(str, dispatch(bits, int(m), None, n))) + f",{m},1"
               for m in sys.argv[4].split()))' "$H" "$1" "$2" "${MS:-1 2 4}"
}
for p in $(seq "${PASSES:-3}"); do
  mkdir -p "$O/t$p"
  for s in ${SHAPES:-4096,14336 3840,15360 5120,17408 4096,20480 4096,11008 \
      4096,12288 5120,13824 2048,16384 8192,28672 4096,28672}; do
    for bits in ${BITS:-4}; do
      spec=$(specs "$bits" "${s#*,}") || exit 1
      for d in 0 1; do
        # shellcheck disable=SC2086
        timeout 60 "$BX/qmv_bench" --out "$O/t$p" --time "$d,$bits,$s" $spec \
          >> "$O/t$p/log.txt" 2>&1 || status=1
      done
    done
  done
done
exit $status
