# Sourced by the bench/cuda_*_device.sh scripts.

# record_env DIR: the GPU, its driver and clocks, and the date, into
# DIR/env.txt and on stdout.
record_env() {
  mkdir -p "$1"
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem \
    --format=csv > "$1/env.txt" 2>&1
  date -u >> "$1/env.txt"
  cat "$1/env.txt"
}

# ncu_stall_metrics: the --metrics list of the profiles (stall reasons, in
# cycles per issued instruction), comma-separated.
ncu_stall_metrics() {
  local m="" r
  for r in barrier long_scoreboard short_scoreboard wait math_pipe_throttle \
      mio_throttle lg_throttle not_selected selected dispatch_stall \
      no_instruction branch_resolving drain membar imc_miss sleeping \
      tex_throttle misc; do
    m="$m,smsp__average_warps_issue_stalled_${r}_per_issue_active.ratio"
  done
  echo "${m#,}"
}

# ncu_pipe_metrics: the --metrics list of the instructions issued to the
# FMA-heavy, FMA-lite, ALU, LSU and uniform pipes (% of peak while active),
# comma-separated; bench/cuda_qmv_ncu.py prints them as "pipes".
ncu_pipe_metrics() {
  local m="" p
  for p in fmaheavy fmalite alu lsu uniform; do
    m="$m,sm__inst_executed_pipe_${p}.avg.pct_of_peak_sustained_active"
  done
  echo "${m#,}"
}

# begin_run C OUT: for a device script's first two arguments, sets C and
# O, makes OUT, records the environment there and sets status=0.
begin_run() {
  C=$1
  O=$2
  mkdir -p "$O"
  record_env "$O"
  status=0
}

# memcheck_odd_scales C DIR: the configuration matrix's part for scale rows
# off 16 bytes (C/qmv_matrix --odd-only, scales, biases and the streamed
# launches' w allocated to their exact size) under compute-sanitizer's
# memcheck, into DIR; says so where the machine has no sanitizer.
memcheck_odd_scales() {
  mkdir -p "$2"
  if command -v compute-sanitizer > /dev/null; then
    timeout 300 compute-sanitizer --tool memcheck --print-limit 20 \
      "$1/qmv_matrix" --odd-only --out "$2" > "$2/stdout.txt" 2>&1
    echo "compute-sanitizer rc $?"
    grep -E "^(MATRIX|=========)" "$2/stdout.txt" | tail -8
  else
    echo "SKIPPED compute-sanitizer: not on this machine" | tee "$2/stdout.txt"
  fi
}

# odd_scales_parity C DIR FLAG: C/qmv_matrix FLAG (--odd-only, or --odd-time
# to time too) into DIR/odd, that part under memcheck into DIR/sanitizer, the
# whole configuration matrix (no timing) into DIR/matrix and the ragged
# sweep into DIR/ragged; non-zero if any of them failed.
odd_scales_parity() {
  local c=$1 o=$2 rc=0
  mkdir -p "$o/odd" "$o/ragged"
  "$c/qmv_matrix" "$3" --out "$o/odd" > "$o/odd/stdout.txt" 2>&1 || rc=1
  grep -E "^(device|MATRIX|MISMATCH|CONTROL)" "$o/odd/stdout.txt"
  memcheck_odd_scales "$c" "$o/sanitizer"
  bash bench/cuda_qmv_matrix_device.sh "$c" "$o/matrix" --no-time || rc=1
  "$c/qmv_bench" --quick --ragged --out "$o/ragged" > "$o/ragged/stdout.txt" 2>&1 || rc=1
  grep -E "PARITY|MISMATCH" "$o/ragged/stdout.txt" | head -5
  return $rc
}

# harness_parity OUT BUILD "BITS": the parity runs of BUILD (a folder holding
# qmv_bench and qmv_matrix), every row against stock M = 1 with the negative
# controls: qmv_bench --quick at each of BITS (OUT/quickB), the ragged sweep
# (OUT/ragged) and the configuration matrix (OUT/matrix); prints their
# verdicts; non-zero if one of them failed.
harness_parity() {
  local o=$1 b=$2 bits rc=0
  for bits in $3; do
    mkdir -p "$o/quick$bits"
    "$b/qmv_bench" --quick --bits "$bits" --out "$o/quick$bits" \
      > "$o/quick$bits/stdout.txt" 2>&1 || rc=1
    grep -E "PARITY|MISMATCH" "$o/quick$bits/stdout.txt" | head -5
  done
  mkdir -p "$o/ragged"
  "$b/qmv_bench" --quick --ragged --out "$o/ragged" > "$o/ragged/stdout.txt" 2>&1 || rc=1
  grep -E "PARITY|MISMATCH" "$o/ragged/stdout.txt" | tail -2
  bash "$(dirname "${BASH_SOURCE[0]}")/cuda_qmv_matrix_device.sh" "$b" "$o/matrix" --no-time || rc=1
  return $rc
}

# time_8bit_rings PREFIX BUILD...: the 8-bit rings of 8 and 4 vectors
# ((4, 2, 8, 3), (4, 2, 8, 6), (2, 4, 4, 6)), the dispatch and qmm_sm80 at
# M = 4, 8, 12, 16 on 4096 x 14336, bfloat16 and float16, the builds in turn,
# twice (time_shapes_in_turn); non-zero if one of them failed.
time_8bit_rings() {
  local prefix=$1 configs rep rc=0
  shift
  configs=$(configs_at "4,2,8,3 4,2,8,6 2,4,4,6 0,0,0,0" "4 8 12 16")
  for rep in 1 2; do
    time_shapes_in_turn "$prefix" 8 "4096,14336" "$configs" "$@" || rc=1
  done
  return $rc
}

# bench_with_env DIR BUILD NAME=VALUE: makes DIR a build folder whose
# qmv_bench runs BUILD's with NAME=VALUE in its environment (a build timed
# under several settings of an experiment's switch, as builds of their own).
bench_with_env() {
  mkdir -p "$1"
  printf '#!/bin/sh\nexport %s\nexec "%s/qmv_bench" "$@"\n' "$3" "$(realpath "$2")" > "$1/qmv_bench"
  chmod +x "$1/qmv_bench"
}

# time_dispatch BENCH DIR DTYPE,BITS,K,N: BENCH (a qmv_bench) times the
# dispatch at M = 1, 2, 4, 8 and 16, stock beside, into
# DIR/cuda_qmv_time.csv (its stderr appended to DIR/stderr.txt).
time_dispatch() {
  mkdir -p "$2"
  "$1" --out "$2" --time "$3" 0,0,0,0,1 0,0,0,0,2 0,0,0,0,4 0,0,0,0,8 \
    0,0,0,0,16 > /dev/null 2>> "$2/stderr.txt"
}

# time_in_turn PREFIX SPEC CONFIGS BUILD...: the qmv_bench of each BUILD (a
# folder) times CONFIGS ("W,R,V,D,M ...") on SPEC (DTYPE,BITS,K,N), the builds
# in turn, into PREFIX0, PREFIX1, ... (cuda_qmv_time.csv, log.txt); non-zero
# if one of them failed.
time_in_turn() {
  local prefix=$1 spec=$2 configs=$3 rc=0 i=0 b
  shift 3
  for b in "$@"; do
    mkdir -p "$prefix$i"
    # shellcheck disable=SC2086
    "$b/qmv_bench" --out "$prefix$i" --time "$spec" $configs \
      >> "$prefix$i/log.txt" 2>&1 || rc=1
    i=$((i + 1))
  done
  return $rc
}

# configs_at "CONFIGS" "MS": each of CONFIGS ("W,R,V,D ...", 0,0,0,0 for the
# dispatch) at each of MS, with qmm_sm80 at each: qmv_bench --time's list.
configs_at() {
  local out="" m c
  for m in $2; do
    for c in $1; do out="$out $c,$m"; done
    out="$out sm80,$m"
  done
  echo "${out# }"
}

# time_shapes_in_turn PREFIX BITS "SHAPES" CONFIGS BUILD...: time_in_turn of
# CONFIGS on each of SHAPES ("K,N ..."), bfloat16 then float16; non-zero if
# one of them failed.
time_shapes_in_turn() {
  local prefix=$1 bits=$2 shapes=$3 configs=$4 rc=0 s d
  shift 4
  for s in $shapes; do
    for d in 0 1; do
      time_in_turn "$prefix" "$d,$bits,$s" "$configs" "$@" || rc=1
    done
  done
  return $rc
}

# nvidia_site: the folder of the machine's nvidia pip packages (cuDNN,
# cuBLAS, NCCL: the H200 has them as packages, not in the system).
nvidia_site() {
  python3 -c 'import nvidia; print(list(nvidia.__path__)[0])'
}

# nvidia_libraries: the lib folders of the nvidia packages, colon-terminated
# (LD_LIBRARY_PATH entries: the stock wheels and MLX built from a kit load
# cuDNN, cuBLAS and NCCL from them).
nvidia_libraries() {
  local nv
  nv=$(nvidia_site) || return 1
  ls -d "$nv"/*/lib | tr '\n' ':'
}

# kit_libraries K: the LD_LIBRARY_PATH entries, colon-terminated, that MLX
# built from the kit in K (bench/cuda_mlx_build_device.sh) needs at run time:
# the kit's BLAS and the lib folders of the nvidia packages.
kit_libraries() {
  local libs
  libs=$(nvidia_libraries) || return 1
  echo "$1/blas/lib:$libs"
}

# stock_wheel_site TAR: the stock wheels (TAR of bench/cuda_stock_wheels.py)
# unpacked into /tmp/site beside a link to the nvidia packages, so that
# PYTHONPATH=/tmp/site imports them (with nvidia_libraries on the path).
stock_wheel_site() {
  local nv
  nv=$(nvidia_site) || return 1
  mkdir -p /tmp/site && tar -xJf "$1" -C /tmp/site && ln -sfn "$nv" /tmp/site/nvidia
}

# pack_out DIR: the device returns at most 8 files from $OUT (session 29 lost
# a call's route tables to that). Where DIR holds more, its files under 4 MiB
# go into DIR/out.tar.gz (the originals removed; folders kept as paths in the
# archive), so that all of them come back; larger ones (a module's pieces)
# stay as they are.
pack_out() {
  local dir=$1 n tmp
  n=$(find "$dir" -type f | wc -l)
  [ "$n" -le 8 ] && return 0
  tmp=$(mktemp -d)
  (cd "$dir" && find . -type f -size -4M -print0 | tar -czf "$tmp/out.tar.gz" --null -T - --remove-files) ||
    { echo "pack_out: could not pack $dir" >&2; rm -rf "$tmp"; return 1; }
  find "$dir" -mindepth 1 -type d -empty -delete
  mv "$tmp/out.tar.gz" "$dir/out.tar.gz" && rmdir "$tmp"
  echo "pack_out: $n files under $dir, those under 4 MiB in $dir/out.tar.gz"
}
