#!/usr/bin/env bash
# MLX built whole and its route of 8 to 16 vectors checked in two device
# calls on one warm machine (session 30), the second started within the
# machine's idle release (30 s) of the first:
#   call 1: bench/cuda_mlx_build_device.sh cut at --limit LIM (default 200 s),
#           which leaves ninja compiling in a session of its own; meanwhile
#           the harness times the dispatch and the pin's qmm_sm80 on the
#           issue's three shapes (bench/cuda_qmm_sm80_device.sh, no ncu);
#   call 2: the same build command, which waits for that ninja; then
#           bench/cuda_mlx_route_device.sh (upstream's route, the overlay's,
#           the stock wheels'), again with batches of 4 vectors over weights
#           of their own, and bench/cuda_mlx_run_device.sh's benches
#           (SKIP_TESTS=1, --quick: patched, MLX_QMV_WIDE=1, stock wheels).
#   call 3 (any machine): the stock-wheel parts the first two leave out:
#           bench/cuda_qmv_device.sh --quick (harness parity and times, the
#           stock wheel's bench), bench/cuda_probe_device.sh (the probe on
#           the harness and on the stock wheel) and cuda_qmm_sm80_device.sh's
#           Nsight Compute run of the stock wheel (4096 x 4096 4-bit timing).
# Each call ends with pack_out, so that every file comes back.
# Carry: the kit (.devcarry-b/kit.tar.xz, bench/cuda_mlx_kit.sh), the stock
# wheels (.devcarry-w/mlx-sm90.tar.xz, bench/cuda_stock_wheels.py) and the
# harness (.devcarry-h/qmv_bench, bench/cuda_qmv.py build); KIT, WHEELS and
# HARNESS name others. Call 3 also takes libqmv_probe.so beside the harness
# and the CLI's pure-Python dependencies in .devcarry-h/site
# (pip install --target .devcarry-h/site tomlkit).
# Usage: [LIM=SECONDS] bash bench/cuda_mlx_route_calls_device.sh 1|2|3
set -x
KIT=${KIT:-.devcarry-b/kit.tar.xz}
WHEELS=${WHEELS:-.devcarry-w/mlx-sm90.tar.xz}
HARNESS=${HARNESS:-.devcarry-h/qmv_bench}
W=/tmp/W
B=/tmp/bo
mkdir -p "$B"
case ${1:-} in
  1)
    nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv | tee "$OUT/env.txt"
    (bash bench/cuda_mlx_build_device.sh "$KIT" "$W" "$B" --limit "${LIM:-200}" > "$B/build1.log" 2>&1
      echo $? > "$B/rc1") &
    build=$!
    C=/tmp/C
    mkdir -p "$C"
    cp "$HARNESS" "$WHEELS" bench/cuda_qmm_wheel_kernels.py "$C"
    SHAPES="4096,14336 14336,4096 4096,4096" BITS="4 8" NO_NCU=1 NO_WHEEL=1 timeout 240 \
      bash bench/cuda_qmm_sm80_device.sh "$C" "$OUT/q" > "$OUT/q.log" 2>&1
    echo "qmm_sm80 script rc $?"
    tail -n 5 "$OUT/q.log"
    wait $build
    echo "build call-1 rc $(cat "$B/rc1")"
    tail -n 4 "$B/build1.log"
    cp "$B/build1.log" "$OUT/"
    ps -eo pid,sid,etimes,cmd | grep "[n]inja " | head -3 | cut -c1-150
    ;;
  2)
    bash bench/cuda_mlx_build_device.sh "$KIT" "$W" "$B" --limit 400 > "$B/build2.log" 2>&1
    rc=$?
    echo "build call-2 rc $rc"
    tail -n 4 "$B/build2.log"
    cp "$B/build2.log" "$OUT/"
    if [ $rc = 0 ]; then
      timeout 150 bash bench/cuda_mlx_route_device.sh "$W" "$OUT/r1" "$WHEELS"
      echo "route r1 rc $?"
      BATCHED=1 VECS=4 OWN=1 timeout 100 bash bench/cuda_mlx_route_device.sh "$W" "$OUT/r2" none
      echo "route r2 rc $?"
      SKIP_TESTS=1 timeout 150 bash bench/cuda_mlx_run_device.sh "$W" "$OUT/t" "$WHEELS" --quick
      echo "run rc $?"
    fi
    ;;
  3)
    C=/tmp/C3
    H=$(dirname "$HARNESS")
    mkdir -p "$C" "$OUT/qmv" "$OUT/probe"
    cp "$HARNESS" "$H/libqmv_probe.so" "$WHEELS" bench/cuda_qmv_mlx.py bench/cuda_qmm_wheel_kernels.py "$C"
    cp -r "$H/site" "$C/site"
    timeout 180 bash bench/cuda_qmv_device.sh "$C" "$OUT/qmv" --quick > "$OUT/qmv.log" 2>&1
    echo "cuda_qmv_device.sh rc $?"
    tail -n 5 "$OUT/qmv.log"
    timeout 130 bash bench/cuda_probe_device.sh "$C" "$OUT/probe" > "$OUT/probe.log" 2>&1
    echo "cuda_probe_device.sh rc $?"
    grep -E "^== |verdict|identical|DIVERGE|diverge" "$OUT/probe.log" | head -30
    SHAPES="4096,4096" BITS=4 NO_NCU=1 WHEEL_LIMIT=200 timeout 230 \
      bash bench/cuda_qmm_sm80_device.sh "$C" "$OUT/q" > "$OUT/q.log" 2>&1
    echo "qmm_sm80 script rc $?"
    tail -n 5 "$OUT/q.log"
    ;;
  *)
    echo "usage: [LIM=SECONDS] $0 1|2|3" >&2
    exit 2
    ;;
esac
. bench/cuda_device_env.sh
pack_out "$OUT"
