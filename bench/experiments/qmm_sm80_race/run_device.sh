#!/usr/bin/env bash
# On the H200: qmm_sm80_race on the 15 shapes of bench/cuda_qmm_sm80_device.sh,
# bf16/fp16, 4/8 bits, M = 8, 12, 16, LAUNCHES launches each (default 2000),
# stock and fixed; then a summary. Usage: run_device.sh BIN OUT [LAUNCHES]
set -uo pipefail
BIN=$1
OUT=$2
N=${3:-2000}
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$OUT/env.txt"
date -u >> "$OUT/env.txt"
status=0
for s in 4096,14336 14336,4096 4096,4096 4096,1024 4096,2048 4096,6144 4096,8192 \
         4096,11008 4096,20480 4096,28672 14336,8192 2048,2048 2048,8192 8192,8192 8192,28672; do
  for d in 0 1; do
    for b in 4 8; do
      for m in 8 12 16; do
        "$BIN" "$d,$b,$s" "$m" "$N" >> "$OUT/race.txt" 2>&1 || status=1
      done
    done
  done
done
echo "stock: $(grep -c '^stock' "$OUT/race.txt") problems, $(grep '^stock' "$OUT/race.txt" | grep -vc ': 0 of') with launches that differ"
echo "fixed: $(grep -c '^fixed' "$OUT/race.txt") problems, $(grep '^fixed' "$OUT/race.txt" | grep -vc ': 0 of') with launches that differ"
grep -v ': 0 of' "$OUT/race.txt" | head -20
exit $status
