#!/usr/bin/env bash
# pg_delete_records.sh - `cairn topic delete-records` (DeleteRecords) on a
# --storage postgresql topic, 3 real cairnd each with its own database
# (tests/lib/pg.sh). The log start moves on every replica when the
# command is applied (reads below it are refused at once), and the rows
# below it leave every node's database at the replica's next tick (a
# retention pass, below what its producer table covers). The start holds
# when every node is SIGKILLed right after the answer while no row could
# be deleted (cairn_batches locked in every database, so the start was in
# memory only: it comes back from the Raft log or a snapshot). What is
# left is exactly the acknowledged records from the start on, once, in
# order. --offset end empties the partition, and a follower that was down
# meanwhile comes back through a snapshot install and catches up at once
# (its store restarts empty with the peer's last Raft index: pgstore's
# store_reset). (docs/format.md, "Commands in a partition's Raft log".)
# usage: pg_delete_records.sh CAIRN CAIRND
set -euo pipefail
CLI_TEST_TAG=pgdelrec
. "$(cd "$(dirname "$0")/../lib" && pwd)/cli_test.sh"
. "$repo/tests/lib/pg.sh"
. "$repo/tests/lib/pg_topic.sh"

lockers=()
pg_test_cleanup() {
  local p
  for p in "${lockers[@]}"; do kill "$p" 2>/dev/null; done
}

step "a private PostgreSQL server, one database per node; a postgresql topic on 3 nodes"
# Raft snapshots every few entries (a 16 kB log budget): the start is also
# brought back from a snapshot, not only from the Raft log.
printf '#!/bin/sh\nexec %q "$@" --raft-log-budget-bytes 16384\n' "$cairnd" >"$dir/cairnd-snap"
chmod +x "$dir/cairnd-snap"
cairnd="$dir/cairnd-snap"
pg_nodes_start 3
start_cluster3
expect 0 "$cli" topic create pgd -P 1 -r 3 --storage postgresql
eventually 0 "$cli" topic describe pgd
produce_range pgd 0 1 200
every_replica pgd 0 's == 0 and h == 200'

# rows NODE: "START LOWEST ROWS" of pgd/0 in node NODE's database: the
# partition row's start_offset, the lowest last_offset of its rows (-1:
# none) and how many rows.
rows() {
  pg_psql "cairn_node$1" -At -F ' ' -c "SELECT p.start_offset, coalesce(min(b.last_offset), -1),
    count(b.base_offset) FROM cairn_partitions p JOIN cairn_topics t USING (topic_id)
    LEFT JOIN cairn_batches b USING (topic_id, partition) WHERE t.name = 'pgd' GROUP BY p.start_offset"
}
# rows_start NODE START: waits up to 30 s until node NODE's database says
# START and holds no row wholly below it.
rows_start() {
  local got s low n
  for _ in $(seq 1 150); do
    got=$(rows "$1")
    read -r s low n <<<"$got"
    [ "$s" = "$2" ] && { [ "$n" = 0 ] || [ "$low" -ge "$2" ]; } && return 0
    sleep 0.2
  done
  fail "node $1's database: start, lowest last offset, rows = $got, not start $2 with nothing below"
}

step "delete below 120: every replica starts there at once, the rows leave every database"
expect 0 "$cli" topic delete-records pgd --offset 120 --partition 0 --json
json_ok "$dir/out"
pyj "$dir/out" 'j == [{"topic": "pgd", "partition": 0, "low_watermark": 120}]'
every_replica pgd 0 's == 120 and h == 200'
t=$(tail_ok pgd 0 200)
[ "$t" = "121 80" ] || fail "read from the start: '$t', not r-121 on, 80 records"
for i in 1 2 3; do rows_start "$i" 120; done
echo "   every replica starts at 120; every database's partition row says 120, no row below it"
expect 0 "$cli" topic delete-records pgd --offset 50 --partition 0
out_has "pgd/0: log start now 120"

step "the rows cannot go (cairn_batches locked in every database): every node SIGKILLed right after the answer"
produce_range pgd 0 201 300
every_replica pgd 0 's == 120 and h == 300'
for i in 1 2 3; do
  pg_psql "cairn_node$i" -c "BEGIN; LOCK TABLE cairn_batches IN SHARE MODE; SELECT pg_sleep(600)" >/dev/null 2>&1 &
  lockers+=($!)
done
held=0
for _ in $(seq 1 100); do
  held=$(pg_psql postgres -At -c "SELECT count(*) FROM pg_locks WHERE locktype = 'relation' AND mode = 'ShareLock' AND granted")
  [ "$held" -ge 3 ] && break
  sleep 0.1
done
[ "$held" -ge 3 ] || fail "the locks were not taken ($held of 3)"
expect 0 "$cli" topic delete-records pgd --offset 260 --partition 0
out_has "pgd/0: log start now 260"
for i in 1 2 3; do kill -KILL "$(cat "$cdir/node$i.pid")"; done
for i in 1 2 3; do
  read -r s _ _ <<<"$(rows "$i")"
  [ "$s" = 120 ] || fail "node $i's database saved the start ($s) through the lock"
done
# The sessions sleep: ended by the server, which releases their locks (the
# killed nodes' blocked statements then fail: no COMMIT ever comes).
pg_psql postgres -At -c "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE query LIKE '%pg_sleep(600)%' AND pid <> pg_backend_pid()" >/dev/null
for p in "${lockers[@]}"; do wait "$p" 2>/dev/null || true; done
lockers=()
echo "   answered 'log start now 260'; killed; every database still says 120"

step "restarted: every replica starts at 260 again, the rows below it go, nothing acknowledged is lost"
restart_nodes 1 2 3
every_replica pgd 0 's == 260 and h == 300'
t=$(tail_ok pgd 0 300)
[ "$t" = "261 40" ] || fail "after the restart: '$t', not r-261 on, 40 records"
for i in 1 2 3; do rows_start "$i" 260; done
from_snap=$(cat "$cdir"/node*.log | grep -c "log start 260 from the snapshot" || true)
echo "   every replica at 260 again ($from_snap of them from a snapshot, the others from the Raft log); every database says 260"

step "a follower down while the partition is emptied (--offset end): back through a snapshot install, caught up at once"
eventually 0 "$cli" topic describe pgd --json
leader=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["partitions"][0]["leader_id"])' "$dir/out")
[ "$leader" -ge 1 ] 2>/dev/null || fail "no leader of pgd/0: $(head -c 400 "$dir/out")"
down=$((leader % 3 + 1))
kill -KILL "$(cat "$cdir/node$down.pid")"
# 34 entries while it is down: the live replicas snapshot every 16 (the
# least the 16 kB budget allows) and keep 8 behind, so the down node is
# sent a snapshot (as in pg_cluster.sh).
produce_range pgd 0 301 1660
expect 0 "$cli" topic delete-records pgd --offset end
out_has "pgd/0: log start now 1660"
restart_nodes "$down"
# The peer's log holds no batch: ours restarts empty at its start with the
# peer's last Raft index (pgstore's store_reset), so the catch-up ends at
# once rather than waiting for the next batch.
ok=0
for _ in $(seq 1 150); do
  grep -q "caught up: log \[1660, 1660)" "$cdir/node$down.log" && { ok=1; break; }
  sleep 0.2
done
[ "$ok" -eq 1 ] || fail "node $down did not catch up to the emptied log: $(grep catchup "$cdir/node$down.log" | tail -3)"
grep -q "the peer's log starts at 1660" "$cdir/node$down.log" ||
  fail "node $down did not restart its log at the peer's start (no snapshot install?)"
every_replica pgd 0 's == 1660 and h == 1660'
for i in 1 2 3; do rows_start "$i" 1660; done
produce_range pgd 0 1661 1670
t=$(tail_ok pgd 0 1670)
[ "$t" = "1661 10" ] || fail "after emptying pgd/0: '$t'"
echo "   node $down came back through a snapshot install and caught up to the emptied log at once; every database empty below 1660"
echo "PASS"
