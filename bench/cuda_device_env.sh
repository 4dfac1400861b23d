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
