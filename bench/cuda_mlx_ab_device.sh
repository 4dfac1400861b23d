#!/usr/bin/env bash
# Stock and patched MLX side by side on the device (issue 7): the same kit
# script, the same build and the same test run for both trees, so that a
# test that fails on the patched build can be told apart from one that fails
# on MLX as built there. Two phases, one device call each (a build of both
# takes about as long as a call may run; the second call must find the
# machine warm, or it builds again):
#   build: both kits built at once, half of the cores each
#          (bench/cuda_mlx_build_device.sh, resumable);
#   test:  MLX's test_quantized.py on each build, one GPU each where the
#          machine has two (bench/cuda_mlx_run_device.sh without its benches);
#   tolerance: test_qmm's and test_qmv_wide's loops on each build, every
#          subtest's error and rows recorded (bench/cuda_mlx_tolerance.py).
#   wheel-tolerance: one call, no stock build: STOCK_KIT is the stock wheels'
#          pack (bench/cuda_stock_wheels.py, mlx 0.32.1, whose
#          backend/cuda/quantized is the pin's); its tolerance run takes GPU 1
#          while the patched tree builds with every core, then the patched
#          tolerance runs (the rows land as wheel-* and patched-*);
#          PATCHED_KIT "-" runs the wheels' side alone.
# Kits: bench/cuda_mlx_kit.sh on a pinned checkout and on the patched one.
# Usage: bench/cuda_mlx_ab_device.sh build|test|tolerance|wheel-tolerance STOCK_KIT PATCHED_KIT OUT [--limit SECONDS]
set -uo pipefail
PHASE=$1
STOCK_KIT=$2
PATCHED_KIT=$3
OUT=$4
LIMIT=${6:-540}
[ "${5:-}" = "--limit" ] || [ -z "${5:-}" ] || { echo "unknown option $5" >&2; exit 2; }
mkdir -p "$OUT"
. "$(dirname "$0")/cuda_device_env.sh"
# One side's step, its output in $OUT/$side-$step.txt.
tests() { # MLX's test_quantized.py (bench/cuda_mlx_run_device.sh without its benches)
  SKIP_BENCH=1 bash bench/cuda_mlx_run_device.sh "/tmp/cmx-$1" "$OUT/$1-tests" none
}
tolerance() { # test_qmm's and test_qmv_wide's loops outside pytest, every error recorded
  local K=/tmp/cmx-$1/kit libs
  libs=$(kit_libraries "$K") || return 2
  LD_LIBRARY_PATH=$libs PYTHONPATH=$K/mlx/python \
    timeout "$LIMIT" python3 bench/cuda_mlx_tolerance.py --out "$OUT/$1-tolerance.csv"
  echo "rc $?"
}
wheel_tolerance() { # the stock wheels' pack unpacked as a site folder, its own GPU
  local site=/tmp/cmx-wheel/site
  local nv e
  mkdir -p "$site" && tar -xJf "$1" -C "$site" || return 1
  # The machine's nvidia packages give the libraries; their cu13/include
  # lacks crt/ (mma.h includes crt/mma.h), which the wheels' JIT of qmm_sm90
  # needs. So link everything but cu13/include: MLX then takes the toolkit's
  # headers (CUDA_HOME, else /usr/local/cuda).
  nv=$(nvidia_site) || return 1
  mkdir -p "$site/nvidia/cu13"
  for e in "$nv"/*; do [ "${e##*/}" = cu13 ] || ln -sfn "$e" "$site/nvidia/"; done
  for e in "$nv"/cu13/*; do [ "${e##*/}" = include ] || ln -sfn "$e" "$site/nvidia/cu13/"; done
  PYTHONPATH=$site timeout "$LIMIT" python3 bench/cuda_mlx_tolerance.py --out "$OUT/wheel-tolerance.csv"
  echo "rc $?"
}
# each_side_on_its_gpu STEP: STEP for stock and patched, one GPU each where
# the machine has two (side by side), else one after the other.
each_side_on_its_gpu() {
  local step=$1 gpus gpu=0 side
  gpus=$(nvidia-smi -L | wc -l)
  for side in stock patched; do
    CUDA_VISIBLE_DEVICES=$((gpu % gpus)) "$step" "$side" >"$OUT/$side-$step.txt" 2>&1 &
    [ "$gpus" -gt 1 ] || wait
    gpu=$((gpu + 1))
  done
  wait
  for side in stock patched; do
    echo "== $side"
    cut -c1-240 "$OUT/$side-$step.txt" | head -80
  done
}

case $PHASE in
  build)
    jobs=$(($(nproc) / 2))
    for side in stock patched; do
      kit=$STOCK_KIT
      [ $side = patched ] && kit=$PATCHED_KIT
      bash bench/cuda_mlx_build_device.sh "$kit" "/tmp/cmx-$side" "$OUT/$side-build" \
        --jobs "$jobs" --limit "$LIMIT" >"$OUT/$side-build.txt" 2>&1 &
    done
    wait
    for side in stock patched; do
      echo "== $side: $(grep -E '^ninja rc' "$OUT/$side-build.txt" || tail -1 "$OUT/$side-build.txt")"
    done
    ;;
  test)
    each_side_on_its_gpu tests
    ;;
  tolerance)
    each_side_on_its_gpu tolerance
    python3 bench/cuda_qmv_report.py --tolerance "$OUT"
    ;;
  wheel-tolerance)
    gpu=$(($(nvidia-smi -L | wc -l) - 1))
    CUDA_VISIBLE_DEVICES=$gpu wheel_tolerance "$STOCK_KIT" >"$OUT/wheel-tolerance.txt" 2>&1 &
    # PATCHED_KIT "-": the stock wheels only (a patched row at M <= 16 is
    # stock qmv's M = 1 row, as bench/cuda_qmv_matrix_device.sh shows, so
    # the wheels' max_err_M1 is the patched build's error there).
    [ "$PATCHED_KIT" = - ] && { wait; cut -c1-240 "$OUT/wheel-tolerance.txt" | head -60;
      python3 bench/cuda_qmv_report.py --tolerance "$OUT"; exit 0; }
    bash bench/cuda_mlx_build_device.sh "$PATCHED_KIT" /tmp/cmx-patched "$OUT/patched-build" \
      --limit "$LIMIT" >"$OUT/patched-build.txt" 2>&1
    echo "== patched build: $(grep -E '^ninja rc' "$OUT/patched-build.txt" || tail -1 "$OUT/patched-build.txt")"
    CUDA_VISIBLE_DEVICES=0 tolerance patched >"$OUT/patched-tolerance.txt" 2>&1
    wait
    for side in wheel patched; do
      echo "== $side"
      cut -c1-240 "$OUT/$side-tolerance.txt" | head -60
    done
    python3 bench/cuda_qmv_report.py --tolerance "$OUT"
    ;;
  *)
    echo "unknown phase $PHASE (build, test, tolerance or wheel-tolerance)" >&2
    exit 2
    ;;
esac
