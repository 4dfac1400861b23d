#!/usr/bin/env bash
# Every row block at half size where the whole launch is at most half a wave
# (session 49), one device call:
#  1. qmv_bench --time with BX (the queue's harness), the dispatch beside
#     its ring with every row block at full size (T = 1), the last half of
#     them at half size (T = 2) and every one at half size (T = 4): 4-bit
#     rings of 2 and 4 vectors ((8, 4, 2, 3), (8, 4, 4, 3)) on T_SHAPES;
#     8-bit rings of 1, 2 and 4 ((2, 4, 1, 8), (2, 4, 2, 8), (2, 4, 4, 6);
#     T = 1 and 4) on 4096 x 4096 and 14336 x 4096; twice (PASSES);
#  2. bench/cuda_qmv_ab_device.sh: BX against BY (the queue with the rule
#     in launch_qmv_streamed) at M = 1, 2, 3, 4, 8, 16;
#  3. BY's parity (harness_parity at 4 and 8 bits: --quick, the ragged sweep
#     and the configuration matrix, every row against stock M = 1 with the
#     negative controls).
# Each part runs under a time limit, so that what ran comes back within one
# call; the A/B report can be made again from OUT/ab's CSVs.
# Usage: [T_SHAPES="K,N ..."] [SHAPES="K,N ..."] [PASSES=2] [AB_S=200]
#        [PARITY_S=120] bench/cuda_qmv_half_wave_device.sh BX BY OUT
#   (T_SHAPES: part 1's 4-bit shapes; SHAPES: the A/B's; AB_S and PARITY_S
#   the time limits of parts 2 and 3, in seconds.)
set -uo pipefail
BX=$(realpath "$1"); BY=$(realpath "$2"); O=$3
H=$(dirname "$0")
. "$H/cuda_device_env.sh"
record_env "$O"
status=0
t0=$(date +%s)
for p in $(seq "${PASSES:-2}"); do
  mkdir -p "$O/t$p"
  # The second pass only where the first left time for it.
  [ "$p" = 2 ] && [ $(($(date +%s) - t0)) -gt 60 ] && break
  for s in ${T_SHAPES:-4096,14336 5120,17408 4096,20480 4096,4096 14336,4096 4096,6144 4096,8192}; do
    for d in 0 1; do
      timeout 60 "$BX/qmv_bench" --out "$O/t$p" --time "$d,4,$s" 0,0,0,0,2 \
        8,4,2,3,2,1 8,4,2,3,2,2 8,4,2,3,2,4 0,0,0,0,4 8,4,4,3,4,1 8,4,4,3,4,2 \
        8,4,4,3,4,4 >> "$O/t$p/log.txt" 2>&1 || status=1
    done
  done
  for s in 4096,4096 14336,4096; do
    for d in 0 1; do
      timeout 60 "$BX/qmv_bench" --out "$O/t$p" --time "$d,8,$s" 0,0,0,0,1 \
        2,4,1,8,1,1 2,4,1,8,1,4 0,0,0,0,2 2,4,2,8,2,1 2,4,2,8,2,4 0,0,0,0,4 \
        2,4,4,6,4,1 2,4,4,6,4,4 \
        >> "$O/t$p/log.txt" 2>&1 || status=1
    done
  done
done
echo "part 1 (T = 1, 2, 4): $(($(date +%s) - t0)) s, status $status"
t0=$(date +%s)
SHAPES=${SHAPES:-"4096,14336 14336,4096 4096,4096 3840,15360 11008,4096 4096,6144 \
2880,4096 2880,2880 4096,8192 2048,8192"} \
  timeout "${AB_S:-200}" bash "$H/cuda_qmv_ab_device.sh" "$O/ab" "$BX" "$BY" > /dev/null 2>&1 || status=1
echo "part 2 (A/B): $(($(date +%s) - t0)) s, status $status"
t0=$(date +%s)
timeout "${PARITY_S:-120}" bash -c ". '$H/cuda_device_env.sh'; harness_parity '$O/parity' '$BY' '4 8'" \
  || status=1
echo "part 3 (parity): $(($(date +%s) - t0)) s, status $status"
exit $status
