#!/usr/bin/env bash
# Both kits of the side-by-side device run (bench/cuda_mlx_ab_device.sh),
# made here in one step: the stock tree at the pin in .devcarry-s/kit.tar.xz
# and the queue's tree (work/mlx, brought up to date by `mlx-overlay apply`)
# in .devcarry-b/kit.tar.xz, folders that .git/info/exclude ignores so that
# they travel only where a device call names them in `carry`.
# The sources MLX's CMake fetches are taken as bench/cuda_mlx_kit.sh takes
# them (CCCL_GIT, ..., *_REF for mirrors); nanobind from PyPI's source
# distribution unless NANOBIND_DIR names a tree.
# Usage: bench/cuda_mlx_ab_kits.sh   (from anywhere in the project)
set -euo pipefail
cd "$(dirname "$0")/.."
NANOBIND_VERSION=2.13.0
pin=$(python3 -c 'import tomllib; print(tomllib.load(open("pin.toml", "rb"))["upstream"]["commit"])')
mlx-overlay apply
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
git clone -q --no-checkout "${MLX_OVERLAY_CACHE:-$HOME/.cache/mlx-overlay}/upstream.git" "$tmp/stock"
git -C "$tmp/stock" -c advice.detachedHead=false checkout -q "$pin"
nanobind=${NANOBIND_DIR:-}
if [ -z "$nanobind" ]; then
  python3 -m pip download -q --no-deps --no-binary :all: -d "$tmp/nb" "nanobind==$NANOBIND_VERSION"
  tar -xzf "$tmp/nb/nanobind-$NANOBIND_VERSION.tar.gz" -C "$tmp"
  nanobind=$tmp/nanobind-$NANOBIND_VERSION
  rm -rf "$nanobind/docs" "$nanobind/tests"
fi
exclude=$(git rev-parse --git-path info/exclude)
mkdir -p "$(dirname "$exclude")"
grep -qxF '/.devcarry-*/' "$exclude" 2>/dev/null || echo '/.devcarry-*/' >>"$exclude"
bash bench/cuda_mlx_kit.sh "$tmp/stock" .devcarry-s "" "" "$nanobind"
bash bench/cuda_mlx_kit.sh work/mlx .devcarry-b "" "" "$nanobind"
