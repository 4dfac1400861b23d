#!/usr/bin/env bash
# Everything a machine that reaches nothing (the H200) needs to build the
# patched MLX with its CUDA backend and Python bindings
# (bench/cuda_mlx_build_device.sh): the checkout's committed tree, the sources
# MLX's CMake fetches at configure time, at the versions it names, and BLAS /
# LAPACK headers and libraries of this machine (Debian's OpenBLAS, which
# MLX's CPU backend links on Linux). Written as OUT/kit.tar.xz (about 25 MB).
#
# The git sources are fetched from their real URLs, or read from a local
# repository named by CCCL_GIT, NVTX_GIT, CUDNN_GIT, CUTLASS_GIT, FMT_GIT,
# JSON_GIT, NANOBIND_GIT (a mirror: only the paths the kit takes are read, so
# a partial one does). A tag missing there can be replaced by a ref through
# CCCL_REF, NVTX_REF, ... (the kit's MANIFEST records what went in).
# Usage: bench/cuda_mlx_kit.sh CHECKOUT OUT [FMT_DIR JSON_DIR NANOBIND_DIR]
#   FMT_DIR etc.: local fmt 12.1.0 / nlohmann json / nanobind 2.13.0 source
#   trees (default: fetched by git like the others).
set -euo pipefail
CHECKOUT=$1
OUT=$2
FMT_DIR=${3:-}
JSON_DIR=${4:-}
NANOBIND_DIR=${5:-}
CCCL_REF=${CCCL_REF:-v3.1.3}
NVTX_REF=${NVTX_REF:-v3.1.1}
CUDNN_REF=${CUDNN_REF:-v1.16.0}
CUTLASS_REF=${CUTLASS_REF:-v4.4.2}
FMT_REF=${FMT_REF:-12.1.0}
JSON_REF=${JSON_REF:-v3.11.3}
NANOBIND_REF=${NANOBIND_REF:-v2.13.0}
BLAS_LIB=${BLAS_LIB:-/usr/lib/x86_64-linux-gnu/openblas-pthread/libopenblas.so.0}

if ! git -C "$CHECKOUT" diff --quiet HEAD; then
  echo "$CHECKOUT: uncommitted changes; the kit takes the committed tree (commit them first)" >&2
  exit 2
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
kit=$tmp/kit
mkdir -p "$kit/deps" "$kit/blas/include" "$kit/blas/lib" "$OUT"
manifest=$kit/MANIFEST
echo "mlx $(git -C "$CHECKOUT" rev-parse HEAD) ($(git -C "$CHECKOUT" log -1 --format=%s))" >"$manifest"
git -C "$CHECKOUT" archive --prefix=mlx/ HEAD | tar -x -C "$kit" --exclude=mlx/docs

# fetch URL LOCAL REF DEST [PATHS...]: the tree of REF (or of its PATHS) in
# DEST, from the local repository LOCAL if set, else fetched from URL.
# A REF that is not there stops the kit, naming the source, where it was
# looked for and the variable that picks another (this machine's NVTX mirror
# lacks v3.1.1: NVTX_REF=release-v3).
fetch() {
  local url=$1 g=$2 ref=$3 dest=$4 from=$2
  shift 4
  local name
  name=$(basename "$dest")
  local missing="$name: $ref not found in ${from:-$url} (${name^^}_REF names another ref)"
  if [ -z "$g" ]; then
    g=$tmp/git-$name
    git init -q --bare "$g"
    git -C "$g" fetch -q --depth 1 "$url" "refs/tags/$ref:refs/tags/$ref" 2>/dev/null ||
      git -C "$g" fetch -q --depth 1 "$url" "$ref:refs/tags/$ref" 2>/dev/null ||
      { echo "$missing" >&2; exit 2; }
  fi
  local commit
  commit=$(git -C "$g" rev-parse -q --verify "$ref^{commit}") || { echo "$missing" >&2; exit 2; }
  mkdir -p "$dest"
  # (a partial mirror may warn about objects outside PATHS; they are not read)
  git -C "$g" archive "$commit" "$@" 2>/dev/null | tar -x -C "$dest"
  echo "$(basename "$dest") $url $ref $commit" >>"$manifest"
}
# copy_tree SRC DEST: a local source tree, without its .git.
copy_tree() {
  mkdir -p "$2"
  tar -C "$1" --exclude=.git -c . | tar -x -C "$2"
  echo "$(basename "$2") $(basename "$1") (a local tree)" >>"$manifest"
}
fetch https://github.com/NVIDIA/cccl.git "${CCCL_GIT:-}" "$CCCL_REF" "$tmp/cccl" \
  libcudacxx/include cub/cub thrust/thrust
# The layout of cccl's release zip, which MLX's CMake takes.
mkdir -p "$kit/deps/cccl/include"
mv "$tmp"/cccl/libcudacxx/include/* "$tmp/cccl/cub/cub" "$tmp/cccl/thrust/thrust" \
  "$kit/deps/cccl/include/"
fetch https://github.com/NVIDIA/NVTX.git "${NVTX_GIT:-}" "$NVTX_REF" "$kit/deps/nvtx" c
fetch https://github.com/NVIDIA/cudnn-frontend.git "${CUDNN_GIT:-}" "$CUDNN_REF" "$kit/deps/cudnn" \
  CMakeLists.txt cudnn_frontend-config.cmake.in include cmake LICENSE.txt
fetch https://github.com/NVIDIA/cutlass.git "${CUTLASS_GIT:-}" "$CUTLASS_REF" "$kit/deps/cutlass" include
if [ -n "$FMT_DIR" ]; then
  copy_tree "$FMT_DIR" "$kit/deps/fmt"
else
  fetch https://github.com/fmtlib/fmt.git "${FMT_GIT:-}" "$FMT_REF" "$kit/deps/fmt" CMakeLists.txt include src support LICENSE \
    README.md ChangeLog.md
fi
rm -rf "$kit/deps/fmt/doc" "$kit/deps/fmt/test"
if [ -n "$JSON_DIR" ]; then
  copy_tree "$JSON_DIR" "$kit/deps/json"
else
  fetch https://github.com/nlohmann/json.git "${JSON_GIT:-}" "$JSON_REF" "$kit/deps/json" single_include CMakeLists.txt cmake
fi
if [ -n "$NANOBIND_DIR" ]; then
  copy_tree "$NANOBIND_DIR" "$kit/deps/nanobind"
else
  fetch https://github.com/wjakob/nanobind.git "${NANOBIND_GIT:-}" "$NANOBIND_REF" "$kit/deps/nanobind"
fi

# OpenBLAS (BLAS and LAPACK in one library) with the libraries it needs.
cp -L /usr/include/x86_64-linux-gnu/cblas.h /usr/include/x86_64-linux-gnu/openblas_config.h \
  /usr/include/lapack.h "$kit/blas/include/"
cp -L "$BLAS_LIB" "$kit/blas/lib/libopenblas.so.0"
ln -s libopenblas.so.0 "$kit/blas/lib/libopenblas.so"
for dep in $(ldd "$BLAS_LIB" | awk '/libgfortran|libquadmath/ {print $3}'); do
  cp -L "$dep" "$kit/blas/lib/"
done
echo "blas $BLAS_LIB ($(dpkg-query -W -f '${Package} ${Version}' libopenblas0-pthread 2>/dev/null || echo '?'))" >>"$manifest"

# The same inputs give the same bytes (names sorted, times and owners fixed,
# xz in one thread): a module packed from this kit (bench/cuda_mlx_pack.sh)
# is tied to the kit's sha256, and a kit made again must still match it.
tar -C "$tmp" --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner --format=gnu -cf - kit |
  xz -6 -T1 >"$OUT/kit.tar.xz.part"
mv "$OUT/kit.tar.xz.part" "$OUT/kit.tar.xz"
cat "$manifest"
du -h "$OUT/kit.tar.xz"
