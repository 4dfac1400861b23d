#!/usr/bin/env bash
# The end-to-end exactness probe on an NVIDIA GPU, in one device call (#8):
# the cuda-harness substrate (MLX's CUDA qmv kernels from the pinned and the
# patched qmv.cu, libqmv_probe.so built by `bench/cuda_qmv.py build`) over
# seeds, dtypes and bits, and the cuda substrate with the stock mlx-cuda wheel
# (its qmm_sm80 serves M * B >= 8, so its verify passes must diverge).
# Run from the project root with a folder C holding libqmv_probe.so,
# mlx-sm90.tar.xz (bench/cuda_stock_wheels.py: the wheels unpacked, as for
# cuda_qmv_device.sh, but keeping mlx/include: the wheel compiles its gather
# kernel at run time and needs those headers) and site/ (pure-Python dependencies of the CLI: tomlkit).
# Usage: bench/cuda_probe_device.sh C OUTDIR [--harness-only] (writes
# OUTDIR/cuda_probe.tar.gz: one JSON report and one text report per run, and
# the GPU's name; --harness-only skips the stock wheel, which does not change
# with the queue)
set -uo pipefail
# C absolute: until session 30 PYTHONPATH took $PWD/$C/site, which an absolute
# C (/tmp/C3) turned into a folder that is not there (no tomlkit, every probe failed).
C=$(cd "$1" && pwd) || { echo "cuda_probe_device.sh: $1: no such folder" >&2; exit 2; }
DEST=$2; ONLY=${3:-}; OUT=$(mktemp -d)/cuda_probe; mkdir -p "$OUT"
export PYTHONPATH=$PWD:$C/site PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$OUT/probe_env.txt"
status=0
for dtype in bfloat16 float16; do
  for bits in 4 8; do
    for seed in 0 1 2; do
      tag=harness_${dtype}_${bits}bit_seed${seed}
      echo "== $tag"
      python3 -m overlay_tool probe --substrate cuda-harness --cuda-harness "$C/libqmv_probe.so" \
        --dtype $dtype --bits $bits --seed $seed --limit 16 --layers 4 \
        --json "$OUT/$tag.json" > "$OUT/$tag.txt" 2>&1 || status=1
      grep -E "^cuda-harness|\] |  patched K=" "$OUT/$tag.txt"
    done
  done
done
if [ "$ONLY" = --harness-only ]; then
  tar -czf "$DEST/cuda_probe.tar.gz" -C "$(dirname "$OUT")" cuda_probe
  exit $status
fi
. "$(dirname "$0")/cuda_device_env.sh"
stock_wheel_site "$C/mlx-sm90.tar.xz" || exit 2
LD_LIBRARY_PATH=$(nvidia_libraries)${LD_LIBRARY_PATH:-}
export LD_LIBRARY_PATH
for seed in 0 1; do
  tag=wheel_bfloat16_4bit_seed${seed}
  echo "== $tag"
  PYTHONPATH=$PYTHONPATH:/tmp/site python3 -m overlay_tool probe --substrate cuda --seed $seed \
    --limit 16 --layers 4 --json "$OUT/$tag.json" > "$OUT/$tag.txt" 2>&1 || status=1
  cat "$OUT/$tag.txt" | grep -vE "^      k=" ; grep -E "k=(7|8|15) " "$OUT/$tag.txt"
done
tar -czf "$DEST/cuda_probe.tar.gz" -C "$(dirname "$OUT")" cuda_probe
exit $status
