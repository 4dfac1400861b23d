#!/usr/bin/env bash
# The C++ runtime of the module bench/cuda_mlx_build_device.sh builds.
#
# The H200 image's compiler (CXX=/opt/gcc/bin/g++, GNU 13.3) finds only
# libstdc++.a beside it, so it links libstdc++ into the module statically and
# exports its symbols, 109 of them STB_GNU_UNIQUE (the facets' std::locale::id
# among them). The dynamic linker binds a unique symbol to its first
# definition in the process: where numpy (whose module needs the system's
# libstdc++.so.6, GCC 14's) is imported before mlx, the module's own locale
# code numbers its facets with ids from both runtimes, and the first C++
# error message (std::ostream << long) calls a codecvt function for num_put
# and dies of SIGSEGV (session 21, bench/cuda_mlx_stdcxx_device.sh). MLX's
# wheels need libstdc++.so.6 and do not have that problem.
#
#   link-flags CXX DIR  prints the linker flags under which CXX links a shared
#                       library against libstdc++.so.6: nothing where it
#                       already does; else "-LDIR", DIR holding a libstdc++.so
#                       that names the system's libstdc++.so.6.
#   check MODULE        one line on stderr, exit status 1, where MODULE carries
#                       a libstdc++ of its own with unique symbols exported.
set -uo pipefail

needs_shared_runtime() {  # the NEEDED entries of $1 name libstdc++.so.6
  readelf -d "$1" | grep -q 'Shared library: \[libstdc++\.so\.6\]'
}

case ${1:-} in
  link-flags)
    [ $# = 3 ] || { echo "usage: $0 link-flags CXX DIR" >&2; exit 2; }
    cxx=$2
    dir=$3
    probe=$(mktemp -d)
    trap 'rm -rf "$probe"' EXIT
    printf '#include <sstream>\nextern "C" int f(long v) { std::ostringstream o; o << v; return o.str().size(); }\n' \
      >"$probe/f.cpp"
    "$cxx" -shared -fPIC -o "$probe/f.so" "$probe/f.cpp" 2>"$probe/err" ||
      { echo "$cxx does not link a shared library: $(head -c 200 "$probe/err")" >&2; exit 1; }
    needs_shared_runtime "$probe/f.so" && exit 0
    system=$(ldconfig -p 2>/dev/null | sed -n 's/.*libstdc++\.so\.6 (libc6,x86-64) => //p' | head -1)
    [ -n "$system" ] || { echo "$cxx links libstdc++ statically and ldconfig knows no libstdc++.so.6" >&2; exit 1; }
    mkdir -p "$dir" && dir=$(cd "$dir" && pwd)
    ln -sfn "$system" "$dir/libstdc++.so"
    "$cxx" -shared -fPIC -o "$probe/f.so" "$probe/f.cpp" "-L$dir" 2>"$probe/err" && needs_shared_runtime "$probe/f.so" ||
      { echo "$cxx links libstdc++ statically even with -L$dir ($system)" >&2; exit 1; }
    echo "-L$dir"
    ;;
  check)
    [ $# = 2 ] || { echo "usage: $0 check MODULE" >&2; exit 2; }
    needs_shared_runtime "$2" && exit 0
    unique=$(nm -D --defined-only "$2" 2>/dev/null | grep -c ' u ')
    [ "$unique" = 0 ] && exit 0
    echo "$2: carries its own libstdc++ and exports $unique unique symbols of it: import mlx before numpy" \
      "(a C++ error message crashes otherwise; bench/cuda_stdcxx.sh)" >&2
    exit 1
    ;;
  *)
    echo "usage: $0 link-flags CXX DIR | check MODULE" >&2
    exit 2
    ;;
esac
