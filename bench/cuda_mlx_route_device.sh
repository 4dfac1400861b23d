#!/usr/bin/env bash
# The route of 8 to 16 vectors in MLX built whole (session 25), after
# bench/cuda_mlx_build_device.sh (a build, or --from-pack) in WORK:
# bench/cuda_mlx_route_check.py, each product's rows against the rows
# computed one vector at a time and its time with every product a graph of
# its own, on
#   1. the queue's build with MLX_QMV_WIDE=1: upstream's choice, patch 0011's
#      rule (narrow products to qmv, the others to qmm_sm80);
#   2. the queue's build as it is: qmv for every product of up to 16;
#   3. the stock wheels (STOCK_TAR, bench/cuda_stock_wheels.py): qmm_sm80 for
#      every product of 8 or more.
# Any product whose rows do not match its route fails the run.
# Usage: [SHAPES=KxN,...] [BATCHED=1 [VECS=V] [OWN=1]] [ROUTES="upstream overlay"]
#          bench/cuda_mlx_route_device.sh WORK OUT STOCK_TAR
#   (BATCHED=1: x of shape (M, 1, K), the M vectors as batches; VECS=V:
#    (M / V, V, K), V vectors a batch; OWN=1: each batch over weights of its
#    own; ROUTES: the runs of the queue's build, both by default)
#   (STOCK_TAR none: the first two only, where the carry has no room for it)
set -uo pipefail
WORK=$1
OUT=$2
STOCK=$3
K=$WORK/kit
ROOT=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$OUT"
. "$(dirname "$0")/cuda_device_env.sh"
LIBS=$(kit_libraries "$K") || exit 2
export LD_LIBRARY_PATH=$LIBS${LD_LIBRARY_PATH:-}
export PYTHONUNBUFFERED=1 MLX_MAX_OPS_PER_BUFFER=0
unset MLX_QMV_WIDE MLX_QMV_ROUTE
PATCHED=$K/mlx/python
SH="${SHAPES:+--shapes $SHAPES}${BATCHED:+ --batched}${VECS:+ --vecs $VECS}${OWN:+ --own-weights}"
ROUTES=${ROUTES:-upstream overlay}
status=0
echo "built from: $(head -1 "$K/MANIFEST")"
for route in $ROUTES; do
  case $route in
    upstream) export MLX_QMV_WIDE=1 ;;
    overlay) unset MLX_QMV_WIDE ;;
    *) echo "cuda_mlx_route_device.sh: ROUTES: unknown route $route" >&2; exit 2 ;;
  esac
  # shellcheck disable=SC2086
  PYTHONPATH=$PATCHED python3 "$ROOT/bench/cuda_mlx_route_check.py" \
    --route "$route" --out "$OUT/$route.csv" $SH > "$OUT/$route.txt" 2>&1 || status=1
  tail -1 "$OUT/$route.txt"
done
unset MLX_QMV_WIDE
if [ "$STOCK" != none ]; then
  stock_wheel_site "$STOCK" || status=1
  # shellcheck disable=SC2086
  PYTHONPATH=/tmp/site python3 "$ROOT/bench/cuda_mlx_route_check.py" \
    --route stock --out "$OUT/stock.csv" $SH > "$OUT/stock.txt" 2>&1 || status=1
  tail -1 "$OUT/stock.txt"
fi
exit $status
