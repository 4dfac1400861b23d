#!/usr/bin/env bash
# A change to launch_qmv_streamed's wave rules (qmv_streamed_full_blocks,
# qmv_streamed_takes_turns) timed and checked in one device call (session
# 51):
#  1. bench/cuda_qmv_split_rule_device.sh with BX (the queue's harness) on
#     R_SHAPES at R_BITS and R_MS: the dispatch beside its ring at full size;
#  2. bench/cuda_qmv_ab_device.sh: BX against BZ (the queue with the change)
#     at M = 1, 2, 3, 4, 8, 16 on SHAPES, 4 and 8 bits (or BITS, "4 5 6 8" say);
#  3. BZ's parity (harness_parity at 4 and 8 bits: --quick, the ragged sweep
#     and the configuration matrix, every row against stock M = 1 with the
#     negative controls).
# Each part runs under a time limit (R_S, AB_S, PARITY_S seconds), so that
# what ran comes back within one call; R_S=0 leaves part 1 out. With GOALS_S
# (seconds a run), part 0 first runs bench/cuda_qmm_sm80_device.sh on BZ
# twice (the issue's three shapes, M = 1, 2, 4, 6, 8, 12, 16 and qmm_sm80 at
# 4 to 16; no profiles) into OUT/goals/g1 and g2, and writes the pull
# request's tables of the two runs (cuda_qmm_sm80_report.py --pr) to
# OUT/goals/pr.md: the queue's own figures, as docs/benchmarks.md quotes them.
# Usage: [GOALS_S=60] [R_SHAPES=...] [R_BITS="8"] [R_MS="1 2 4 8 12 16"] [SHAPES=...]
#        [R_S=90] [AB_S=240] [PARITY_S=120] bench/cuda_qmv_wave_rule_device.sh BX BZ OUT
set -uo pipefail
BX=$(realpath "$1"); BZ=$(realpath "$2"); O=$3
H=$(dirname "$0")
. "$H/cuda_device_env.sh"
record_env "$O"
status=0
if [ "${GOALS_S:-0}" != 0 ]; then
  t0=$(date +%s)
  for g in g1 g2; do
    SPECS="0,0,0,0,1 0,0,0,0,2 0,0,0,0,4 0,0,0,0,6 0,0,0,0,8 0,0,0,0,12 0,0,0,0,16 \
sm80,4 sm80,8 sm80,12 sm80,16" SHAPES="4096,14336 14336,4096 4096,4096" NO_NCU=1 NO_WHEEL=1 \
      timeout "$GOALS_S" bash "$H/cuda_qmm_sm80_device.sh" "$BZ" "$O/goals/$g" > /dev/null 2>&1 \
      || status=1
  done
  python3 "$H/cuda_qmm_sm80_report.py" --pr "$O/goals/g1" "$O/goals/g2" > "$O/goals/pr.md" \
    || status=1
  echo "part 0 (goals, twice): $(($(date +%s) - t0)) s, status $status"
fi
t0=$(date +%s)
if [ "${R_S:-90}" != 0 ]; then
  SHAPES=${R_SHAPES:-"4096,11008 4096,12288 4096,14336 4096,15360 4096,16384 4096,17408 \
4096,20480 4096,28672 8192,28672"} BITS=${R_BITS:-8} MS=${R_MS:-"1 2 4 8 12 16"} PASSES=2 \
    timeout "${R_S:-90}" bash "$H/cuda_qmv_split_rule_device.sh" "$BX" "$O/r" > /dev/null 2>&1 || status=1
  echo "part 1 (dispatch and full size): $(($(date +%s) - t0)) s, status $status"
fi
t0=$(date +%s)
SHAPES=${SHAPES:-"4096,14336 14336,4096 4096,4096 3840,15360 4096,12288 4096,12544 \
5120,18432 4096,17920 5120,17408 4096,21504 4096,34304 8192,20480 4096,11008 \
4096,17408 4096,20480 4096,28672"} \
  timeout "${AB_S:-240}" bash "$H/cuda_qmv_ab_device.sh" "$O/ab" "$BX" "$BZ" > /dev/null 2>&1 || status=1
echo "part 2 (A/B): $(($(date +%s) - t0)) s, status $status"
t0=$(date +%s)
timeout "${PARITY_S:-120}" bash -c ". '$H/cuda_device_env.sh'; harness_parity '$O/parity' '$BZ' '4 8'" \
  || status=1
echo "part 3 (parity): $(($(date +%s) - t0)) s, status $status"
exit $status
