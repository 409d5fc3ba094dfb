#!/usr/bin/env bash
# The simulation finds bugs: over the same seeds, the real state machine
# passes and sim_partition_mutant (a copy of the duplicate check that lets a
# retried batch through: sim_mutant.c) must be caught with a duplicate.
# Usage: mutant_check.sh <sim_partition> <sim_partition_mutant> [seeds]
set -euo pipefail
real="$1" mutant="$2" seeds="${3:-60}"
"$real" --seeds "$seeds" --start 1
set +e
out=$("$mutant" --seeds "$seeds" --start 1 2>&1)
rc=$?
set -e
echo "$out"
if [ "$rc" -ne 1 ]; then
  echo "mutant_check: the mutant passed $seeds seeds (exit $rc): the simulation missed the bug" >&2
  exit 1
fi
if ! grep -q "a duplicate or a reorder" <<< "$out"; then
  echo "mutant_check: the mutant failed, but not on the duplicate it carries" >&2
  exit 1
fi
echo "mutant_check: the mutant was caught"
