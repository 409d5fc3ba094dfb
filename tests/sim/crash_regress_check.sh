#!/usr/bin/env bash
# The crash engine's regression seeds for raft 0.15's false match (an
# answer to an empty AppendEntries that claims a stale tail, which lost an
# acknowledged batch: docs/fault-tolerance.md, seeds 13488 and 21681 with
# --fault-ms 20000). Each must pass with rgroup's clamp (the default, as
# on a node: cluster/rgroup_raft.c) and fail without it, so the seeds
# still reach the case. Usage: crash_regress_check.sh <sim_partition>
set -euo pipefail
sim="$1"
for seed in 13488 21681; do
  "$sim" --crash --fault-ms 20000 --seed "$seed"
  set +e
  out=$("$sim" --crash --no-clamp-results --fault-ms 20000 --seed "$seed" 2>&1)
  rc=$?
  set -e
  if [ "$rc" -ne 1 ]; then
    echo "$out"
    echo "crash_regress_check: seed $seed passes without the clamp (exit $rc): it no longer reaches the false match" >&2
    exit 1
  fi
  echo "seed $seed: passes with the clamp, fails without: $(grep -m1 -iE "diverge|differs|lost" <<<"$out")"
done
