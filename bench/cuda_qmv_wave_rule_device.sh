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
# what ran comes back within one call.
# Usage: [R_SHAPES=...] [R_BITS="8"] [R_MS="1 2 4 8 12 16"] [SHAPES=...]
#        [R_S=90] [AB_S=240] [PARITY_S=120] bench/cuda_qmv_wave_rule_device.sh BX BZ OUT
set -uo pipefail
BX=$(realpath "$1"); BZ=$(realpath "$2"); O=$3
H=$(dirname "$0")
. "$H/cuda_device_env.sh"
record_env "$O"
status=0
t0=$(date +%s)
SHAPES=${R_SHAPES:-"4096,11008 4096,12288 4096,14336 4096,15360 4096,16384 4096,17408 \
4096,20480 4096,28672 8192,28672"} BITS=${R_BITS:-8} MS=${R_MS:-"1 2 4 8 12 16"} PASSES=2 \
  timeout "${R_S:-90}" bash "$H/cuda_qmv_split_rule_device.sh" "$BX" "$O/r" > /dev/null 2>&1 || status=1
echo "part 1 (dispatch and full size): $(($(date +%s) - t0)) s, status $status"
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
