#!/usr/bin/env bash
# The crash engine's regression seeds, first for raft 0.15's false match (an
# answer to an empty AppendEntries that claims a stale tail: it lost an
# acknowledged batch in seeds 13488 and 21681 before pre-vote was on in
# the simulation, docs/fault-tolerance.md; with pre-vote, seeds 13015 and
# 16725 at --fault-ms 20000 were the first of 30,000 to reach it, where a
# follower the leader wrongly takes as matching never catches up; since a
# replica that starts with no leader elects on the short timeout
# (rgroup_elect.c), runs take other courses and seeds 4021 and 25564 are
# the first to reach it, with replicas that diverge). These seeds were
# found with raft 0.15's election timers ([T, 2T], a candidate's next try
# a full timeout later) and run with them (--wide-timers) since the nodes
# draw from [T, 1.5T] and retry a candidacy on the short timeout
# (rgroup_elect_spread_max, rgroup_elect_on_candidacy): the same course
# as when they were found.
# Each must pass with rgroup's clamp (the default, as on a node:
# cluster/rgroup_raft.c) and fail without it, so the seeds still reach the
# case. Usage: crash_regress_check.sh <sim_partition>
set -euo pipefail
sim="$1"
for seed in 4021 25564; do
  "$sim" --crash --wide-timers --fault-ms 20000 --seed "$seed"
  set +e
  out=$("$sim" --crash --wide-timers --no-clamp-results --fault-ms 20000 --seed "$seed" 2>&1)
  rc=$?
  set -e
  if [ "$rc" -ne 1 ]; then
    echo "$out"
    echo "crash_regress_check: seed $seed passes without the clamp (exit $rc): it no longer reaches the false match" >&2
    exit 1
  fi
  echo "seed $seed: passes with the clamp, fails without: $(grep -m1 "VIOLATION" <<<"$out")"
done

# raft 0.15's pre-vote stall (rgroup_elect_prevote_answer/_refused,
# docs/raft-0.15.md): the replica with the longest log holds the lowest
# term, every voter refuses its pre-vote for its term and it refuses
# theirs for their logs, for good (first seen as seed 12012; seed 80036 is
# the one of the first 100,000 that reaches it now, with --wide-timers as
# above). It must settle with
# the fix (the default, as on a node) and stall without it.
for seed in 80036; do
  "$sim" --crash --wide-timers --seed "$seed"
  set +e
  out=$("$sim" --crash --wide-timers --no-prevote-terms --seed "$seed" 2>&1)
  rc=$?
  set -e
  if [ "$rc" -ne 1 ] || ! grep -q "not settled" <<<"$out"; then
    echo "$out"
    echo "crash_regress_check: seed $seed does not stall without the pre-vote fix (exit $rc): it no longer reaches the stall" >&2
    exit 1
  fi
  echo "seed $seed: settles with the pre-vote fix, stalls without: $(grep -m1 "VIOLATION" <<<"$out")"
done
