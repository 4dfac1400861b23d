#!/usr/bin/env bash
# qmm_sm80, what MLX runs for 8 to 16 vectors, against the streamed dispatch,
# one product at a time (session 25), in one device call:
#  1. qmv_bench --time on the issue's three shapes and on sweeps of N and K:
#     the dispatch at M = 1, 2, 4, 8, 12, 16 and the pin's qmm_sm80 (compiled
#     into the harness, launched as MLX launches it) at M = 4, 8, 12, 16, in
#     the same CUDA graphs (weights rotated beyond the L2, median of the
#     replays); each qmm_sm80 result checked against stock qmv (a difference
#     over 5% of the largest output fails the run).
#  2. Nsight Compute's kernel time (gpu__time_duration, caches flushed before
#     each kernel) of one launch each of stock M = 1, the dispatch and
#     qmm_sm80 at M = 8 and 16 in the harness, and of the stock wheel's
#     products evaluated one at a time (bench/cuda_qmm_wheel_kernels.py): the
#     qmm_sm80 that the wheel compiles at run time beside the harness's.
# Usage: [SHAPES="K,N ..."] [BITS="4 8"] [SPECS="..."] [NO_NCU=1] [NO_WHEEL=1]
#        cuda_qmm_sm80_device.sh C OUT
#   (NO_NCU leaves out the harness's profile, NO_WHEEL the wheel's; SPECS
#   replaces the --time specs, e.g. with the batched auto,M,B and sm80,M,B,
#   or auto,M,B,1 and sm80,M,B,1 for weights per batch.)
#   C holds qmv_bench (bench/cuda_qmv.py build), mlx-sm90.tar.xz
#   (bench/cuda_stock_wheels.py) and cuda_qmm_wheel_kernels.py.
# Tables: python3 bench/cuda_qmm_sm80_report.py OUT
set -uo pipefail
. "$(dirname "$0")/cuda_device_env.sh"
begin_run "$1" "$2"
C=$(realpath "$C")
BIN=$C/qmv_bench
ncu --version | tail -1 | tee -a "$O/env.txt"
SHAPES=${SHAPES:-"4096,14336 14336,4096 4096,4096 4096,1024 4096,2048 4096,6144 \
4096,8192 4096,11008 4096,20480 4096,28672 14336,8192 2048,2048 2048,8192 \
8192,8192 8192,28672"}
SPECS=${SPECS:-"0,0,0,0,1 0,0,0,0,2 0,0,0,0,4 0,0,0,0,8 0,0,0,0,12 0,0,0,0,16 \
sm80,4 sm80,8 sm80,12 sm80,16"}
t0=$(date +%s)
for s in $SHAPES; do
  for d in 0 1; do
    for b in ${BITS:-4 8}; do
      # shellcheck disable=SC2086
      "$BIN" --out "$O" --time "$d,$b,$s" $SPECS >> "$O/time_log.txt" 2>&1 || status=1
    done
  done
done
echo "harness timing: $(($(date +%s) - t0)) s, status $status"
# One verdict per check: "ok" or "QMM_SM80 CHECK FAILED" (then what missed).
grep -h "qmm_sm80 check" "$O/time_log.txt" \
  | sed -E 's/.*: (ok|QMM_SM80 CHECK FAILED)( .*)?$/\1/' | sort | uniq -c
grep -h "CHECK FAILED" "$O/time_log.txt" | head -5
if [ "${NO_NCU:-0}" != 1 ]; then
  # One ncu per problem: with several processes in one run ncu does not
  # write them in the order they ran.
  for s in 4096,14336 14336,4096 4096,4096; do
    for d in 0 1; do
      for b in 4 8; do
        ncu --csv --print-units base --clock-control none \
          --metrics gpu__time_duration.sum -k regex:'qmv|qmm' \
          "$BIN" --profile "$d,$b,$s" 0,0,0,0,8 0,0,0,0,16 sm80,8 sm80,16 \
          > "$O/harness_ncu_${d}_${b}_${s/,/_}.csv" 2>> "$O/harness_ncu_err.txt" || status=1
      done
    done
  done
  echo "harness ncu: $(cat "$O"/harness_ncu_*.csv | grep -c gpu__time_duration) kernels"
fi
if [ "${NO_WHEEL:-0}" != 1 ]; then
  stock_wheel_site "$C/mlx-sm90.tar.xz" || status=1
  export PYTHONPATH=/tmp/site
  LD_LIBRARY_PATH=$(nvidia_libraries)${LD_LIBRARY_PATH:-}
  export LD_LIBRARY_PATH
  t0=$(date +%s)
  timeout "${WHEEL_LIMIT:-240}" ncu --csv --print-units base --clock-control none \
    --metrics gpu__time_duration.sum -k regex:'qmm_sm80_kernel|qmv_kernel' \
    --target-processes all python3 "$C/cuda_qmm_wheel_kernels.py" run \
    --launches 3 --plan "$O/wheel_plan.csv" > "$O/wheel_ncu.csv" 2> "$O/wheel_ncu_err.txt" || status=1
  echo "wheel under ncu: $(($(date +%s) - t0)) s"
  python3 "$C/cuda_qmm_wheel_kernels.py" parse --plan "$O/wheel_plan.csv" \
    --ncu "$O/wheel_ncu.csv" --out "$O/wheel_kernels.csv" || status=1
fi
exit $status
