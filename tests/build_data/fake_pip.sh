#!/usr/bin/env bash
# Stands in for "python -m pip wheel ... -w DIST CHECKOUT" in the build tests.
# FAKE_PIP_MODE: ok (transcript + a wheel), fail (a compile error), hang (sleeps).
# It records its environment in $FAKE_PIP_ENV_OUT.
dist=""
prev=""
for a in "$@"; do
  if [ "$prev" = "-w" ]; then dist="$a"; fi
  prev="$a"
done
env > "${FAKE_PIP_ENV_OUT:-/dev/null}"
here="$(dirname "$0")"
case "${FAKE_PIP_MODE:-ok}" in
  ok)
    cat "$FAKE_PIP_TRANSCRIPT"
    : > "$dist/mlx-0.32.1.dev20261130+overlay.0123456789ab-cp311-cp311-linux_x86_64.whl"
    ;;
  fail)
    echo "  -- Configuring done (1.0s)"
    echo "  [1/3] Building CXX object CMakeFiles/mlx.dir/mlx/array.cpp.o"
    echo "  FAILED: CMakeFiles/mlx.dir/mlx/backend/metal/quantized.cpp.o"
    echo "  /w/mlx/backend/cpu/quantized.cpp:42:7: error: 'qmv_streamed' was not declared in this scope"
    echo "     42 |       qmv_streamed(x);"
    echo "  ninja: build stopped: subcommand failed."
    echo "  error: subprocess-exited-with-error"
    exit 1
    ;;
  hang)
    echo $$ > "$FAKE_PIP_PID_OUT"
    echo "  [1/3] Building CXX object CMakeFiles/mlx.dir/mlx/array.cpp.o"
    exec sleep 60
    ;;
esac
