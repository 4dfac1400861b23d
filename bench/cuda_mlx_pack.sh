#!/usr/bin/env bash
# The libraries a device build made (bench/cuda_mlx_build_device.sh: the
# Python module, sm_90a), packed so that they come back from the device and a
# later session carries them instead of building again. The build takes about
# 430 s of a 600 s call and 1800 s of device time a session (sessions 17 and
# 18 built the same tree, 38af8609, twice); unpacking takes seconds.
#
# pack: WORK/kit/mlx/python/mlx/*.so, stripped, as module.tar.xz cut into
#   pieces module.tar.xz.NN of at most PACK_PIECE_BYTES (15000000: a file
#   from $OUT may have 16 MiB), beside module.sha256, which names the kit tar
#   they were built from and the pack's own sum.
# unpack: the pieces of DIR into WORK/kit/mlx/python/mlx (the kit extracted
#   there first if it is not), only if KIT_TAR is the kit they were built
#   from and the pieces are whole: a module of another tree would run tests
#   against code that is not the queue's.
# Usage: bench/cuda_mlx_pack.sh pack|unpack KIT_TAR WORK DIR
set -euo pipefail
[ $# = 4 ] || { echo "usage: $0 pack|unpack KIT_TAR WORK DIR" >&2; exit 2; }
CMD=$1
KIT_TAR=$2
WORK=$3
DIR=$4
K=$WORK/kit
PIECE=${PACK_PIECE_BYTES:-15000000}
[ -f "$KIT_TAR" ] || { echo "$KIT_TAR: no such kit" >&2; exit 2; }
kit_sum=$(sha256sum "$KIT_TAR" | cut -d' ' -f1)

case $CMD in
pack)
  shopt -s nullglob
  libs=("$K"/mlx/python/mlx/*.so)
  [ ${#libs[@]} -gt 0 ] || { echo "$K/mlx/python/mlx: no built library to pack" >&2; exit 1; }
  stage=$(mktemp -d)
  trap 'rm -rf "$stage"' EXIT
  for lib in "${libs[@]}"; do
    cp "$lib" "$stage/"
    strip --strip-unneeded "$stage/$(basename "$lib")" 2>/dev/null || true
  done
  mkdir -p "$DIR"
  rm -f "$DIR"/module.tar.xz.* "$DIR/module.sha256"
  (cd "$stage" && tar -cf - ./*.so) | xz -T0 -6 | split -b "$PIECE" -d -a 2 - "$DIR/module.tar.xz."
  pack_sum=$(cat "$DIR"/module.tar.xz.* | sha256sum | cut -d' ' -f1)
  printf 'kit %s\npack %s\n' "$kit_sum" "$pack_sum" >"$DIR/module.sha256"
  echo "packed $(basename -a "${libs[@]}" | tr '\n' ' ')into $(ls "$DIR"/module.tar.xz.* | wc -l) piece(s)," \
    "$(cat "$DIR"/module.tar.xz.* | wc -c) bytes: $DIR"
  ;;
unpack)
  [ -f "$DIR/module.sha256" ] || { echo "$DIR/module.sha256: no pack here" >&2; exit 1; }
  want_kit=$(sed -n 's/^kit //p' "$DIR/module.sha256")
  want_pack=$(sed -n 's/^pack //p' "$DIR/module.sha256")
  if [ "$want_kit" != "$kit_sum" ]; then
    echo "$DIR: built from another kit ($want_kit), not $KIT_TAR ($kit_sum): build again" >&2
    exit 1
  fi
  shopt -s nullglob
  pieces=("$DIR"/module.tar.xz.*)
  got_pack=$(cat "${pieces[@]}" /dev/null | sha256sum | cut -d' ' -f1)
  if [ "$got_pack" != "$want_pack" ]; then
    echo "$DIR: the pieces module.tar.xz.* are not the pack module.sha256 names (${#pieces[@]} piece(s))" >&2
    exit 1
  fi
  mkdir -p "$WORK"
  [ -d "$K" ] || tar -xJf "$KIT_TAR" -C "$WORK"
  cat "${pieces[@]}" | tar -xJf - -C "$K/mlx/python/mlx"
  echo "unpacked into $K/mlx/python/mlx: $(cat "${pieces[@]}" | tar -tJf - | sed 's|^\./||' | tr '\n' ' ')"
  ;;
*)
  echo "usage: $0 pack|unpack KIT_TAR WORK DIR" >&2
  exit 2
  ;;
esac
