# Sourced by the bench/cuda_*_device.sh scripts. record_env DIR: the GPU,
# its driver and clocks, and the date, into DIR/env.txt and on stdout.
record_env() {
  mkdir -p "$1"
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem \
    --format=csv > "$1/env.txt" 2>&1
  date -u >> "$1/env.txt"
  cat "$1/env.txt"
}
