#!/usr/bin/env bash
# reaper.sh - checks tests/lib/reaper.sh: a test shell SIGKILLed (as a
# ctest timeout does) leaves behind processes it started whose parents have
# exited (as deploy/cluster.sh's nodes); the reaper the shell started must
# kill those whose --data-dir is under the test's directory, leave every
# other process alone, and exit.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
tmp=$(mktemp -d /tmp/cairn-reaper-XXXXXX)
other=$(mktemp -d /tmp/cairn-reaper-other-XXXXXX)
shell_pid=""
cleanup() {
  local f
  [ -z "$shell_pid" ] || kill -KILL "$shell_pid" 2>/dev/null || true
  for f in "$tmp"/*.pid "$other"/*.pid; do
    [ -f "$f" ] && kill -KILL "$(cat "$f")" 2>/dev/null || true
  done
  rm -rf "$tmp" "$other"
}
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
# The PID of the reaper watching process $1 (from /proc: no procps needed).
reaper_of() {
  local p args
  for p in /proc/[0-9]*; do
    args=()
    mapfile -d '' args <"$p/cmdline" 2>/dev/null || continue
    if [[ " ${args[*]} " == *"tests/lib/reaper.sh $1 "* ]]; then
      echo "${p#/proc/}"
      return 0
    fi
  done
  return 1
}

# The test shell: starts its reaper, then a "node" under its directory and
# one under another directory, each from a subshell that exits at once (so
# neither is its child), then waits to be killed.
# shellcheck disable=SC2016 # expanded by the inner shell
bash -c '
  . "$1/tests/lib/reaper.sh"
  reaper_watch "$2"
  (python3 -c "import time; time.sleep(300)" --data-dir "$2/node1" </dev/null >/dev/null 2>&1 &
   echo $! >"$2/node.pid")
  (python3 -c "import time; time.sleep(300)" --data-dir "$3/node1" </dev/null >/dev/null 2>&1 &
   echo $! >"$3/node.pid")
  sleep 300' test-shell "$root" "$tmp" "$other" </dev/null >/dev/null 2>&1 &
shell_pid=$!
disown "$shell_pid" # its SIGKILL below is the point: no job report of it
for _ in $(seq 1 100); do
  [ -s "$tmp/node.pid" ] && [ -s "$other/node.pid" ] && break
  sleep 0.1
done
mine=$(cat "$tmp/node.pid")
theirs=$(cat "$other/node.pid")
kill -0 "$mine" && kill -0 "$theirs" || fail "the nodes did not start"
reaper=$(reaper_of "$shell_pid") || fail "no reaper watches the test shell"

kill -KILL "$shell_pid"
shell_pid=""
for _ in $(seq 1 50); do
  kill -0 "$mine" 2>/dev/null || break
  sleep 0.1
done
! kill -0 "$mine" 2>/dev/null || fail "the node under the test's directory outlived the test shell by 5 s"
kill -0 "$theirs" 2>/dev/null || fail "the reaper killed a process of another directory"
for _ in $(seq 1 30); do
  kill -0 "$reaper" 2>/dev/null || break
  sleep 0.1
done
! kill -0 "$reaper" 2>/dev/null || fail "the reaper did not exit"
echo "reaper: the killed test's node was killed, another directory's was not, the reaper exited"
