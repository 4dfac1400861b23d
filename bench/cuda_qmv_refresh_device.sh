#!/usr/bin/env bash
# The pull request's figures refreshed in one device call, every part cut at
# a shared deadline so that the call returns what it has:
#  1. goals: the goals table twice (bench/cuda_qmm_sm80_device.sh on the
#     issue's three shapes, the dispatch at M = 1, 2, 4, 6, 8, 12, 16 and
#     qmm_sm80 at M = 4, 8, 12, 16, no profiles) and
#     `cuda_qmm_sm80_report.py --pr` of the two (goals/pr.md: the tables
#     that docs/benchmarks.md's upstream-pr region quotes);
#  2. ab48: OLD against NEW at 4 and 8 bits on the shapes whose launches the
#     wave rules decide (bench/cuda_qmv_ab_device.sh);
#  3. parity: NEW's rows against stock M = 1, negative controls included
#     (harness_parity at 4, 8, 5 and 6 bits, the ragged sweep, the matrix);
#  4. ab56: OLD against NEW at 5 and 6 bits.
# AA=1 runs each A/B as OLD, NEW, OLD: the report's third column is OLD
# over OLD, the spread an A/B's ratios are read against (per-process modes
# of a few launches, session 54).
# CARD, where set, names the card the figures are for: on another one
# (a call for an H200 may run on an H100) the script stops before timing
# anything, with exit code 3.
# Usage: [CARD=H200] [T=560] [GOALS_S=150] [AB48_S=170] [PARITY_S=100]
#        [AB56_S=200] [PASSES=2] [AA=1] bench/cuda_qmv_refresh_device.sh OUT OLD NEW
#   T: the deadline, seconds from the start; *_S: the most a part may take
#   (0 leaves the part out); OLD, NEW: folders holding qmv_bench (and NEW
#   qmv_matrix) from `bench/cuda_qmv.py build`.
#   OUT/parts.txt lists each part's exit code and seconds (124: cut at its
#   limit).
set -uo pipefail
here=$(dirname "$0")
. "$here/cuda_device_env.sh"
O=$1 old=$2 new=$3
ab_builds=("$old" "$new")
[ "${AA:-0}" = 1 ] && ab_builds+=("$old")
card=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>&1 | head -1)
if [ -n "${CARD:-}" ] && [[ "$card" != *"$CARD"* ]]; then
  echo "cuda_qmv_refresh_device.sh: the card is '$card', not an $CARD: nothing timed" >&2
  exit 3
fi
mkdir -p "$O"
record_env "$O" > /dev/null
end=$(($(date +%s) + ${T:-560}))
status=0
# left S: the seconds a part of limit S may take before the deadline.
left() {
  local l=$((end - $(date +%s)))
  [ "$l" -gt "$1" ] && l=$1
  [ "$l" -lt 1 ] && l=1
  echo "$l"
}
# part NAME LIMIT COMMAND...: COMMAND cut at LIMIT (or at the deadline), its
# exit code and seconds appended to OUT/parts.txt; a LIMIT of 0 leaves it out.
part() {
  local name=$1 limit=$2 t0 rc
  shift 2
  if [ "$limit" = 0 ]; then
    echo "$name left out" >> "$O/parts.txt"
    return 0
  fi
  t0=$(date +%s)
  timeout "$(left "$limit")" "$@"
  rc=$?
  echo "$name rc $rc $(($(date +%s) - t0)) s" >> "$O/parts.txt"
  [ "$rc" = 0 ] || status=1
}
: > "$O/parts.txt"
# goals: both runs and the tables whatever the first run's status (a failed
# check of the pin's qmm_sm80, its epilogue race, fails a run that timed
# everything); non-zero if any step failed.
goals() {
  local g rc=0
  for g in g1 g2; do
    SPECS="0,0,0,0,1 0,0,0,0,2 0,0,0,0,4 0,0,0,0,6 0,0,0,0,8 0,0,0,0,12 0,0,0,0,16 sm80,4 sm80,8 sm80,12 sm80,16" \
      SHAPES="4096,14336 14336,4096 4096,4096" NO_NCU=1 NO_WHEEL=1 \
      bash "$here/cuda_qmm_sm80_device.sh" "$new" "$O/goals/$g" > "$O/goals/$g.log" 2>&1 || rc=1
    python3 "$here/cuda_qmm_sm80_report.py" "$O/goals/$g" > "$O/goals/$g/report.md" 2>&1 || rc=1
  done
  python3 "$here/cuda_qmm_sm80_report.py" --pr "$O/goals/g1" "$O/goals/g2" > "$O/goals/pr.md" || rc=1
  return $rc
}
mkdir -p "$O/goals"
# Functions do not run under timeout: each part runs in a bash of its own.
export -f goals
export O new here
part goals "${GOALS_S:-150}" bash -c goals
SHAPES="4096,14336 14336,4096 4096,4096 4096,12544 4096,12288 4096,16384 4096,17408 5120,17408 5120,18432 4096,17920 4096,21504 4096,34304" \
  BITS="4 8" part ab48 "${AB48_S:-170}" bash "$here/cuda_qmv_ab_device.sh" "$O/ab48" "${ab_builds[@]}" > /dev/null
part parity "${PARITY_S:-100}" bash -c ". '$here/cuda_device_env.sh'; harness_parity '$O/parity' '$new' '4 8 5 6'" > "$O/parity.txt" 2>&1
SHAPES="4096,11008 4096,12288 4096,14336 4096,16384 4096,17408 4096,20480 4096,22016 4096,28672 4096,34304 5120,18432" \
  BITS="5 6" part ab56 "${AB56_S:-200}" bash "$here/cuda_qmv_ab_device.sh" "$O/ab56" "${ab_builds[@]}" > /dev/null
cat "$O/parts.txt"
exit $status
