#!/usr/bin/env bash
# reaper.sh - the watchdog of a test script killed before its EXIT trap
# could run (a ctest timeout sends SIGKILL): nodes that deploy/cluster.sh
# started have exited parents, so a kill of the test's process tree misses
# them and they would outlive the test.
#
# Sourced: `reaper_watch DIR` starts the watchdog for the sourcing shell,
# outside its process tree (the subshell exits at once, so the watchdog is
# nobody's child there) and off its output (ctest waits for the test's
# pipes to close).
#
# Run: `reaper.sh PID START DIR` waits until process PID, started at START
# (field 22 of /proc/PID/stat, so that a reused PID is not taken for it),
# is gone, then SIGKILLs every process whose command line names a data
# directory under DIR (--data-dir DIR/...), and exits.
reaper_watch() {
  (bash "${BASH_SOURCE[0]}" "$$" "$(awk '{ print $22 }' /proc/$$/stat)" "$1" \
    </dev/null >/dev/null 2>&1 &)
}
if [ "${BASH_SOURCE[0]}" != "$0" ]; then return 0; fi

pid=$1
start=$2
dir=$3
alive() { [ "$(awk '{ print $22 }' "/proc/$pid/stat" 2>/dev/null)" = "$start" ]; }
while alive; do sleep 1; done
for p in /proc/[0-9]*; do
  args=()
  mapfile -d '' args <"$p/cmdline" 2>/dev/null || continue # no fork per process: a quick pass
  if [[ " ${args[*]} " == *" --data-dir $dir/"* ]]; then
    kill -KILL "${p#/proc/}" 2>/dev/null
  fi
done
exit 0
