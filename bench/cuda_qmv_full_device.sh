#!/usr/bin/env bash
# The whole recorded CUDA run in one device call (issue 7): the harness sweep
# with the wheel baseline and an Nsight Compute summary of the 8-bit dispatch
# (cuda_qmv_device.sh), the ragged-K parity and sweep, per-instruction stall
# sampling of two configurations, and the probe on the harness substrate
# (cuda_probe_device.sh --harness-only). Run from the project root.
#   C: folder for cuda_qmv_device.sh (qmv_bench, cuda_qmv_mlx.py,
#      mlx-sm90.tar.xz); P: folder for cuda_probe_device.sh (libqmv_probe.so,
#      site/); OUT: where h.tar.gz, r.tar.gz, s.tar.gz and p.tar.gz go (four
#      files: the device tool returns at most eight).
# Usage: bench/cuda_qmv_full_device.sh C P OUT
set -uo pipefail
C=$1; P=$2; O=$3
mkdir -p "$O/h" "$O/r" "$O/s" "$O/p"
bash bench/cuda_qmv_device.sh "$C" "$O/h" --ncu "0,8,4096,14336 0,0,0,0,1 0,0,0,0,4" \
  > "$O/h/stdout.txt" 2>&1
echo "main sweep rc $?"; grep -E "PARITY" "$O/h/cuda_qmv_log.txt"
bash bench/cuda_qmv_device.sh "$C" "$O/r" --quick --ragged --no-wheel > "$O/r/stdout.txt" 2>&1
echo "ragged rc $?"; grep -E "PARITY" "$O/r/cuda_qmv_log.txt"
for spec in "0,4,4096,14336 8,4,4,3,16" "0,8,4096,14336 4,2,4,4,4"; do
  tag=$(echo "$spec" | tr ', ' '__')
  ncu --clock-control none -k regex:qmv_streamed --launch-count 1 --section SourceCounters \
    --section WarpStateStats --page source --print-source sass --csv \
    "$C/qmv_bench" --profile $spec > "$O/s/src_$tag.csv" 2> "$O/s/err_$tag.txt"
  echo "ncu source $spec rc $? $(wc -l < "$O/s/src_$tag.csv") lines"
done
bash bench/cuda_probe_device.sh "$P" "$O/p" --harness-only > "$O/p/stdout.txt" 2>&1
echo "probe rc $?"
cd "$O" && for d in h r s p; do tar -czf $d.tar.gz $d && rm -rf $d; done
