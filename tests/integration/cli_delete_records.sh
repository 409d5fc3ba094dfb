#!/usr/bin/env bash
# `cairn topic delete-records` (DeleteRecords) on a real 3-node cluster:
# the log start moves on every replica at the same point of its Raft log,
# while a producer appends; what is left is exactly the acknowledged
# records from the new start on, contiguous, in order, once. The start
# holds when every node is SIGKILLed at once and restarted, and when the
# leader is SIGKILLed right after the delete was answered (the next
# leader has it). Refusals: an offset above the high watermark, an
# unknown topic or partition (exit 1, with the reason); usage errors exit
# 2. --offset end empties every partition up to its high watermark.
# usage: cli_delete_records.sh CAIRN CAIRND
set -euo pipefail
CLI_TEST_TAG=delete-records
. "$(dirname "$0")/../lib/cli_test.sh"

producer=""
test_cleanup() {
  [ -z "$producer" ] || kill -KILL "$producer" 2>/dev/null
}

step "a 3-node cluster; topic dr of 2 partitions, replication factor 3"
start_cluster3
expect 0 "$cli" topic create dr --partitions 2 --replication-factor 3
produce_range dr 0 1 200
produce_range dr 1 1 50
every_replica dr 0 's == 0 and h == 200'

step "refusals: exit 1 with the reason, nothing moves; usage errors exit 2"
expect 1 "$cli" topic delete-records dr --offset 201 --partition 0
err_has "offset 201 is above the high watermark, 200"
expect 1 "$cli" topic delete-records nosuch --offset 1
err_has "unknown topic"
expect 1 "$cli" topic delete-records dr --offset 1 --partition 7
err_has "dr/7"
expect 2 "$cli" topic delete-records dr --partition 0
err_has "below which offset"
expect 2 "$cli" topic delete-records dr --offset -3 --partition 0
expect 2 "$cli" topic delete-records dr --offset soon
every_replica dr 0 's == 0 and h == 200'

# snapshots NODE: the snapshots node NODE's replicas have taken.
snapshots() {
  curl -sf "http://127.0.0.1:$((base + 10 * ($1 - 1) + 2))/metrics" |
    awk '/^cairn_raft_snapshots_taken_total /{print $2}'
}
for i in 1 2 3; do snaps[$i]=$(snapshots "$i"); done

step "delete below 120 while a producer appends r-201..r-400: every replica starts at 120"
# The producer's own scratch files (expect writes $dir/out and $dir/err).
mkdir -p "$dir/p"
(dir="$dir/p" && produce_range dr 0 201 400 >"$dir/log" 2>&1; echo "rc $?" >>"$dir/log") &
producer=$!
sleep 0.3
expect 0 "$cli" topic delete-records dr --offset 120 --partition 0 --json
json_ok "$dir/out"
pyj "$dir/out" 'j == [{"topic": "dr", "partition": 0, "low_watermark": 120}]'
wait "$producer"
producer=""
grep -q "^rc 0" "$dir/p/log" || fail "producer: $(cat "$dir/p/log")"
every_replica dr 0 's == 120 and h == 400'
t=$(tail_ok dr 0 400)
[ "$t" = "121 280" ] || fail "read from the start: '$t', not r-121 on, 280 records"
echo "every replica: log start 120, records r-121..r-400 once each, in order"
# Each replica took a snapshot after applying the delete (a follower that
# must install one then gets a producer table that covers it).
for i in 1 2 3; do
  now=$(snapshots "$i")
  [ "${now:-0}" -gt "${snaps[$i]:-0}" ] || fail "node $i took no snapshot after the delete (${snaps[$i]} -> $now)"
done
# Below the start: nothing moves, the start is the answer.
expect 0 "$cli" topic delete-records dr --offset 50 --partition 0
out_has "dr/0: log start now 120"

step "every node SIGKILLed at once and restarted: the start holds, nothing acknowledged is lost"
for i in 1 2 3; do kill -KILL "$(cat "$cdir/node$i.pid")"; done
restart_nodes 1 2 3
every_replica dr 0 's == 120 and h == 400'
t=$(tail_ok dr 0 400)
[ "$t" = "121 280" ] || fail "after the restart: '$t'"

step "the leader SIGKILLed right after the delete was answered: the next leader has it"
produce_range dr 0 401 450
eventually 0 "$cli" topic describe dr --json
leader=$(python3 -c 'import json,sys; print([p for p in json.load(open(sys.argv[1]))["partitions"] if p["partition"] == 0][0]["leader_id"])' "$dir/out")
[ "$leader" -ge 1 ] 2>/dev/null || fail "no leader of dr/0: $(head -c 400 "$dir/out")"
expect 0 "$cli" topic delete-records dr --offset 430 --partition 0
kill -KILL "$(cat "$cdir/node$leader.pid")"
describe_has dr '[p for p in j["partitions"] if p["partition"] == 0][0]["log_start_offset"] == 430 and [p for p in j["partitions"] if p["partition"] == 0][0]["leader_id"] not in (0, '"$leader"')'
t=$(tail_ok dr 0 450)
[ "$t" = "431 20" ] || fail "after the leader's kill: '$t'"
restart_nodes "$leader"
every_replica dr 0 's == 430 and h == 450'
echo "node $leader killed after the answer; every replica starts at 430 after its restart"

step "--offset end: every partition emptied up to its high watermark"
expect 0 "$cli" topic delete-records dr --offset end
out_has "dr/0: log start now 450"
out_has "dr/1: log start now 50"
every_replica dr 1 's == 50 and h == 50'
produce_range dr 1 51 60
t=$(tail_ok dr 1 60)
[ "$t" = "51 10" ] || fail "after emptying dr/1: '$t'"
echo "PASS"
