#!/usr/bin/env bash
# The 8-bit rings of one and two vectors against the dispatch's pick at
# M = 1 and 2 (bench/cuda_qmv_configs_8bit_device.sh with MS="1 2") on 37
# shapes of real models, N = 1024 to 28672 (session 43: the sweep behind
# the dispatch's blocks of 16 rows for one and two 8-bit vectors). Two
# halves, OUT/a and OUT/b, each timed twice; then
# bench/cuda_qmv_rings_report.py prints each ring's time over the
# dispatch's, and the picks of the dispatch in the harness's build against
# the queue's rule before (OUT/report.txt).
# Usage: bench/cuda_qmv_rings_m1_m2_device.sh C OUT
#   C: a folder holding the harness's qmv_bench
set -uo pipefail
H=$(dirname "$0")
C=$1
O=$2
mkdir -p "$O"
A="4096,1024 4096,2048 4096,3072 4096,4096 4096,6144 4096,11008 4096,14336
14336,4096 3840,15360 15360,3840 2048,8192 8192,2048 3072,8192 8192,3072
5120,13824 13824,5120 8192,8192 8192,28672 2880,5760"
B="3584,18944 18944,3584 3584,4608 5120,27648 27648,5120 5120,7168 4096,28672
3072,5120 8192,10240 1536,8960 8960,1536 2560,9728 4096,12288 12288,4096
5120,17408 2048,6144 6144,2048 4096,5120"
status=0
MS="1 2" SHAPES="$(echo $A)" bash "$H/cuda_qmv_configs_8bit_device.sh" "$C" "$O/a" > /dev/null || status=1
MS="1 2" SHAPES="$(echo $B)" bash "$H/cuda_qmv_configs_8bit_device.sh" "$C" "$O/b" > /dev/null || status=1
# The CSVs hold what the logs do; at most 8 files come back.
rm -f "$O"/a/t0/log.txt "$O"/b/t0/log.txt
python3 "$H/cuda_qmv_rings_report.py" "$O"/a/t0/cuda_qmv_time.csv "$O"/b/t0/cuda_qmv_time.csv > "$O/report.txt" || status=1
cat "$O/report.txt"
echo "status $status"
exit $status
