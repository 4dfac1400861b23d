#!/usr/bin/env bash
# One device call: environment, harness (parity + timing), optionally an
# Nsight Compute profile of chosen configurations, and the stock wheel
# baseline. Run from a folder C holding: qmv_bench (built by cuda_qmv.py
# build), cuda_qmv_mlx.py, mlx-sm90.tar.xz (the mlx + mlx-cuda-13 wheels
# unpacked, libmlx.so stripped and its non-sm_90 cubins zeroed to fit the
# transfer limit: bench/cuda_stock_wheels.py) and optionally fallback.tar.xz + qmv_entry.cu/qmv_bench.cu
# /qmv_api.h to rebuild on the device when the carried binary does not run.
# Usage: cuda_qmv_device.sh C OUTDIR [--quick] [--ragged] [--bits 2|4|8] [--no-wheel]
#        [--no-bench] [--ncu "DTYPE,BITS,K,N W,R,V,D,M ..."]
#        [--wheel-shapes KxN,...]
set -uo pipefail
C=$1; OUT=$2; shift 2
QUICK=""; RAGGED=""; BITS=""; WHEEL=1; BENCH=1; NCU=""; WSHAPES=""
while [ $# -gt 0 ]; do
  case $1 in
    --quick) QUICK=--quick ;;
    --ragged) RAGGED=--ragged ;;
    --bits) BITS="--bits $2"; shift ;;
    --wheel-shapes) WSHAPES="--shapes $2"; shift ;;
    --no-wheel) WHEEL=0 ;;
    --no-bench) BENCH=0 ;;
    --ncu) NCU=$2; shift ;;
  esac
  shift
done
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem,power.draw,temperature.gpu --format=csv > "$OUT/env.txt" 2>&1
{ nvcc --version | tail -1; python3 --version; uname -r; date -u; } >> "$OUT/env.txt" 2>&1
cat "$OUT/env.txt"
BIN=$C/qmv_bench
if ! "$BIN" --help >/dev/null 2>&1 && [ -f "$C/fallback.tar.xz" ]; then
  echo "carried binary does not run; rebuilding on the device"
  B=/tmp/fb; mkdir -p $B && tar -xJf "$C/fallback.tar.xz" -C $B
  F="-std=c++20 -O3 -gencode=arch=compute_90a,code=sm_90a --extended-lambda --expt-relaxed-constexpr -Xcompiler=-fno-strict-aliasing -DMLX_USE_CUDA -DFMT_HEADER_ONLY=1 -I$B/include -I$B/cccl -I$B/src -isystem $B -I$B -I$C"
  nvcc $F -Dmlx=mlx_stock -DQMV_PREFIX=stock_ '-DQMV_KERNELS="stock_kernels.cuh"' -c $C/qmv_entry.cu -o $B/s.o &
  nvcc $F -Dmlx=mlx_patched -DQMV_PREFIX=patched_ '-DQMV_KERNELS="patched_kernels.cuh"' -DQMV_HAVE_STREAMED -c $C/qmv_entry.cu -o $B/p.o &
  nvcc -std=c++17 -O2 -gencode=arch=compute_90a,code=sm_90a -I$C -c $C/qmv_bench.cu -o $B/m.o &
  wait
  nvcc -gencode=arch=compute_90a,code=sm_90a $B/m.o $B/s.o $B/p.o -o $B/qmv_bench && BIN=$B/qmv_bench
fi
if [ -n "$NCU" ]; then
  # Hardware counters of one launch per configuration (clocks left alone).
  . "$(dirname "$0")/cuda_device_env.sh"
  M=$(ncu_stall_metrics)
  ncu --clock-control none -k regex:qmv \
    --section SpeedOfLight --section Occupancy --section LaunchStats \
    --section SchedulerStats --section WarpStateStats \
    --section MemoryWorkloadAnalysis --section InstructionStats \
    --section SourceCounters --metrics "$M" \
    --page details --csv "$BIN" --profile $NCU > "$OUT/ncu.csv" 2> "$OUT/ncu_err.txt"
  echo "ncu exit $? ($(wc -l < "$OUT/ncu.csv") lines)"
fi
if [ $BENCH = 1 ]; then
  "$BIN" --out "$OUT" $QUICK $RAGGED $BITS
  echo "qmv_bench exit $?"
fi
if [ $WHEEL = 1 ]; then
  . "$(dirname "$0")/cuda_device_env.sh"
  stock_wheel_site "$C/mlx-sm90.tar.xz"
  export PYTHONPATH=/tmp/site
  LD_LIBRARY_PATH=$(nvidia_libraries)${LD_LIBRARY_PATH:-}
  export LD_LIBRARY_PATH
  python3 -u "$C/cuda_qmv_mlx.py" --out "$OUT/mlx_wheel.csv" $QUICK $WSHAPES
  echo "mlx baseline exit $?"
fi
