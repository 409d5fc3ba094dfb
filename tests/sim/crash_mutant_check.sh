#!/usr/bin/env bash
# The crash engine finds lost acknowledged data: over the same seeds,
# sim_partition --crash passes and sim_partition --early-ack (sim_io.c's
# mutant: an append's callback fires before the write is durable, so a
# crash loses entries raft counted as stored) must be caught losing
# committed batches, seen as replicas that diverge at an offset, a log
# that ends short, or replicas whose producer tables differ after the same
# index (what the lost entries held). Usage: crash_mutant_check.sh <sim_partition> [seeds]
set -euo pipefail
sim="$1" seeds="${2:-150}"
"$sim" --crash --seeds "$seeds" --start 1
set +e
out=$("$sim" --early-ack --seeds "$seeds" --start 1 2>&1)
rc=$?
set -e
echo "$out"
if [ "$rc" -ne 1 ]; then
  echo "crash_mutant_check: the mutant passed $seeds seeds (exit $rc): the crash model missed it" >&2
  exit 1
fi
if ! grep -qE "replicas diverge|committed batches lost|differs from another replica's" <<< "$out"; then
  echo "crash_mutant_check: the mutant failed, but not on lost committed data" >&2
  exit 1
fi
echo "crash_mutant_check: the mutant was caught"
