#!/usr/bin/env bash
# Runs ninja in a process session of its own and waits for it at most LIMIT
# seconds (0: until it ends). A device call that ends at its limit kills the
# processes it started, and ninja compiles the objects it had in flight
# again from nothing in the next call: on a slow H200 host (session 29)
# MLX's copy_general_input.cu, which alone takes more than 440 s there, was
# cut that way by two calls in a row and never finished. The device keeps a
# process in a session of its own until the machine goes back, so when the
# limit comes this script leaves ninja compiling and says so; run it again
# in the next call, before the machine's idle release, and it waits for the
# same ninja instead of starting another.
#
# STATE (a folder) keeps ninja.pid, ninja.rc (its exit status, once it has
# ended) and ninja.log (its output, appended; copied to LOG whenever this
# script returns).
# Usage: bench/ninja_session.sh STATE LIMIT LOG NINJA_ARGS...
# Exit status: ninja's, or 124 while it is still running.
set -uo pipefail
[ $# -ge 3 ] || { echo "usage: $0 STATE LIMIT LOG NINJA_ARGS..." >&2; exit 2; }
STATE=$1
LIMIT=$2
LOG=$3
shift 3
mkdir -p "$STATE"
PID_FILE=$STATE/ninja.pid
RC_FILE=$STATE/ninja.rc
running() {
  [ -f "$PID_FILE" ] && [ ! -f "$RC_FILE" ] && kill -0 "$(cat "$PID_FILE")" 2>/dev/null
}
if running; then
  echo "waiting for the ninja an earlier call left running (pid $(cat "$PID_FILE"))"
else
  rm -f "$RC_FILE" "$PID_FILE"
  # The session's shell writes its own pid (setsid may fork) and, once ninja
  # has ended, ninja's exit status.
  # shellcheck disable=SC2016  # expanded by the session's shell
  setsid bash -c 'log=$0 pid=$1 rc=$2; shift 2; echo $$ > "$pid"; ninja "$@" >> "$log" 2>&1; echo $? > "$rc"' \
    "$STATE/ninja.log" "$PID_FILE" "$RC_FILE" "$@" < /dev/null > /dev/null 2>&1 &
  for _ in $(seq 50); do [ -s "$PID_FILE" ] && break; sleep 0.1; done
fi
start=$(date +%s)
while [ ! -f "$RC_FILE" ]; do
  if [ "$LIMIT" -gt 0 ] && [ $(($(date +%s) - start)) -ge "$LIMIT" ]; then
    break
  fi
  if ! running && [ ! -f "$RC_FILE" ]; then
    sleep 1
    [ -f "$RC_FILE" ] || { echo "ninja (pid $(cat "$PID_FILE" 2>/dev/null)) ended without an exit status"; \
      cp "$STATE/ninja.log" "$LOG" 2>/dev/null; exit 1; }
  fi
  sleep 1
done
cp "$STATE/ninja.log" "$LOG" 2>/dev/null
if [ -f "$RC_FILE" ]; then
  exit "$(cat "$RC_FILE")"
fi
echo "ninja still running after ${LIMIT} s (pid $(cat "$PID_FILE")): run the same command in the next call," \
  "before the machine goes back, to wait for it"
exit 124
