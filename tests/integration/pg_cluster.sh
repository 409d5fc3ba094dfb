#!/usr/bin/env bash
# pg_cluster.sh - a topic stored in PostgreSQL on a real 3-node cluster:
# each cairnd has its own database in one private PostgreSQL server
# (tests/lib/pg.sh). A producer runs across a SIGKILL of the partition's
# leader; every acknowledged record must be read back once and in order by
# `cairn consume`, and a SQL query through the cairn_records view on every
# node's database must return exactly what `cairn consume` returns. Then the
# database faults: its connections dropped, and the server stopped while
# producing (what was acknowledged before the stores noticed rests on the
# Raft log; nothing after; cairn_partition_store_failed 1); once it is back the partition resumes on the same cairnd processes and
# every acknowledged record is there once, in order. Last, retention by
# size of a second pgstore topic while it is produced to: its checkpoints
# of the producer table wait for the writer's commits (store_flush answers
# CAIRN_EPENDING on the loop), and rows are deleted on every node. The
# nodes snapshot every few entries throughout (a small Raft log budget),
# so every step also runs the snapshots' settles off the loop; a follower
# that was down while retention deleted comes back through a snapshot
# install, whose delete_before runs off the loop.
# Usage: pg_cluster.sh CAIRN CAIRND
set -euo pipefail
CLI_TEST_TAG=pgcluster
. "$(cd "$(dirname "$0")/../lib" && pwd)/cli_test.sh"
. "$repo/tests/lib/pg.sh"
. "$repo/tests/lib/pg_topic.sh"

step "a private PostgreSQL server, one database per node"
# Retention passes every 200 ms (the last step's topic), and Raft
# snapshots every few entries (a 16 kB log budget): each one first settles
# what the writer has not committed, off the loop (pgstore_settle_*).
printf '#!/bin/sh\nexec %q "$@" --retention-check-ms 200 --raft-log-budget-bytes 16384\n' "$cairnd" >"$dir/cairnd-ret"
chmod +x "$dir/cairnd-ret"
cairnd="$dir/cairnd-ret"
pg_nodes_start 3

step "a 3-node cluster and a topic with --storage postgresql"
start_cluster3
expect 0 "$cli" topic create pgt -P 1 -r 3 --storage postgresql
eventually 0 "$cli" topic describe pgt
out_has "stored in PostgreSQL"
eventually 0 "$cli" topic describe pgt --json
pyj "$dir/out" 'j["config"]["storage"] == "postgresql"'
expect 2 "$cli" topic create bad -P 1 -r 3 --storage oracle

leader_of() {
  "$cli" topic describe pgt --json >"$dir/desc.json" 2>/dev/null || return 1
  python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["partitions"][0]["leader_id"])' "$dir/desc.json"
}

step "produce in rounds across a SIGKILL of the leader"
: >"$dir/acked"
rounds=30
for r in $(seq 1 "$rounds"); do
  seq 1 20 | sed "s/^/r$r-/" >"$dir/round"
  produce_round "$dir/round" 20000 || true
  if [ "$r" -eq 10 ]; then
    l=$(leader_of) || fail "no topic description"
    [ "$l" -ge 1 ] || fail "no leader for pgt-0"
    kill -KILL "$(cat "$cdir/node$l.pid")"
    echo "   killed node $l, the leader"
    killed=$l
  fi
  if [ "$r" -eq 20 ]; then
    bash "$cluster_sh" start -d "$cdir" --cairnd "$cairnd" --cli "$cli" --wait-s 90 >"$dir/restart.out" 2>&1 ||
      fail "restarting node $killed: $(cat "$dir/restart.out")"
    pids+=("$(cat "$cdir/node$killed.pid")")
  fi
done
acked=$(wc -l <"$dir/acked")
[ "$acked" -ge 400 ] || fail "only $acked of $((rounds * 20)) records were acknowledged"
echo "   $acked records acknowledged"

verify_all

record_node_pids

step "PostgreSQL drops every connection: the replicas reconnect by themselves"
# Store failures other than a COMMIT cut in flight.
not_in_doubt() { cat "$cdir"/node*.log | grep "its PostgreSQL store failed" | grep -vc "(postgresql: COMMIT: " || true; }
failures=$(not_in_doubt)
for drop in 1 2 3; do
  pg_psql postgres -c "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE backend_type = 'client backend' AND pid <> pg_backend_pid()" >/dev/null
  produce_acked "r3$drop"
done
resumed_without_restart
# Each replica connects again inside its next statement; a transaction
# the drop cut before its COMMIT (the writer's or a snapshot's settle) is
# sent once more on the new connection: no store fails. A COMMIT the drop
# cut in flight is in doubt (it may have committed): that store fails and
# revives by itself (docs/format.md), which resumed_without_restart
# checked; any other failure is the test's.
[ "$(not_in_doubt)" = "$failures" ] ||
  fail "a dropped idle connection failed a store: $(grep -h "its PostgreSQL store failed" "$cdir"/node*.log | grep -v "(postgresql: COMMIT: " | tail -1)"
echo "   produced again on the same processes after the connections were dropped, no store failed$(
  n=$(cat "$cdir"/node*.log | grep "its PostgreSQL store failed" | grep -c "(postgresql: COMMIT: " || true)
  [ "$n" = 0 ] || echo " except $n whose COMMIT the drop cut in flight (in doubt: revived)")"

step "PostgreSQL stops while producing: the stores fail, and then nothing is acknowledged"
pg_stop
# Appends are written behind (pgwriter.h): an entry applied before the
# node's writer found the database gone is acknowledged on the Raft log
# alone (committed on a majority) and must be in PostgreSQL once it is
# back; once the stores have failed, nothing more is acknowledged.
down_acked=0
for k in 1 2 3 4; do
  seq 1 20 | sed "s/^/down$k-/" >"$dir/round"
  # Not acknowledged: the entry may still be in the Raft log (applied once
  # the database is back: in doubt, not lost).
  if produce_round "$dir/round" 3000; then
    [ "$down_acked" -eq $((k - 1)) ] && [ "$k" -lt 4 ] ||
      fail "round down$k was acknowledged after a round was refused (the stores had failed)"
    down_acked=$((down_acked + 1))
  fi
done
failed=0
for i in 1 2 3; do
  [ "$(store_failed_of "$i")" = "1" ] && failed=$((failed + 1))
done
[ "$failed" -ge 1 ] || fail "no node reports cairn_partition_store_failed 1 while PostgreSQL is down"
echo "   $down_acked round(s) acknowledged before the stores failed (on the Raft log), none after; $failed node(s) report cairn_partition_store_failed 1"

step "PostgreSQL comes back: the partition resumes without restarting cairnd"
pg_resume || fail "PostgreSQL did not start again"
for r in $(seq 40 43); do
  produce_acked "r$r"
done
resumed_without_restart
grep -q "its PostgreSQL store failed" "$cdir"/node*.log || fail "no node logged why its store failed"
grep -q "the PostgreSQL store is back" "$cdir"/node*.log || fail "no node logged the store's revive"
verify_all

step "retention by size of a pgstore topic while producing: rows deleted on every node"
expect 0 "$cli" topic create pgret -P 1 -r 3 --storage postgresql --retention-bytes 30000
eventually 0 "$cli" topic describe pgret
for r in $(seq 1 15); do
  # 20 records of ~500 bytes a round: ~10 kB, so retention is due from the 4th
  head -c 7500 /dev/urandom | base64 -w 500 | head -20 | sed "s/^/ret$r-/" >"$dir/round"
  "$cli" --timeout-ms 20000 produce pgret -p 0 -f "$dir/round" >/dev/null ||
    fail "round ret$r not acknowledged"
done
start=0
for _ in $(seq 1 100); do
  "$cli" topic describe pgret --json >"$dir/ret.json" 2>/dev/null &&
    start=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["partitions"][0]["log_start_offset"])' "$dir/ret.json")
  [ "$start" -gt 0 ] && break
  sleep 0.2
done
[ "$start" -gt 0 ] || fail "retention never moved pgret's log start"
for i in 1 2 3; do
  ok=0
  for _ in $(seq 1 100); do
    first=$(pg_psql "cairn_node$i" -At -c "SELECT coalesce(min(b.base_offset), -1) FROM cairn_batches b
      JOIN cairn_topics t USING (topic_id) WHERE t.name = 'pgret'")
    [ "$first" -gt 0 ] && { ok=1; break; }
    sleep 0.2
  done
  [ "$ok" -eq 1 ] || fail "node $i's database still holds pgret's first rows (first offset $first)"
done
expect 0 "$cli" consume pgret -p 0 -e -f '%v\n'
tail -20 "$dir/round" | cmp -s - <(tail -20 "$dir/out") || fail "pgret's newest round is not what consume returns last"
echo "   log start $start; every node's rows start above 0; the newest round reads back"

step "a follower down while retention deletes: back through a snapshot install"
part_field() { # FIELD: pgret-0's field in topic describe --json
  "$cli" topic describe pgret --json >"$dir/ret.json" 2>/dev/null &&
    python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["partitions"][0][sys.argv[2]])' "$dir/ret.json" "$1"
}
leader=$(part_field leader_id) || fail "no description of pgret"
down=$((leader % 3 + 1))
hw_before=$(part_field high_watermark)
kill -KILL "$(cat "$cdir/node$down.pid")"
# 34 entries while it is down: the live replicas snapshot every 16 (the
# least the 16 kB budget allows, rgroup_fsm_snapshot_threshold) and keep 8
# behind, so at least two snapshots fall in the gap and the last one's
# kept entries start past the down node's end: it must be sent the
# snapshot. (15 rounds left that to where the gap fell between snapshots.)
for r in $(seq 16 49); do
  head -c 7500 /dev/urandom | base64 -w 500 | head -20 | sed "s/^/ret$r-/" >"$dir/round"
  "$cli" --timeout-ms 20000 produce pgret -p 0 -f "$dir/round" >/dev/null ||
    fail "round ret$r not acknowledged with node $down down"
done
for _ in $(seq 1 100); do
  [ "$(part_field log_start_offset)" -gt "$hw_before" ] && break
  sleep 0.2
done
start=$(part_field log_start_offset)
[ "$start" -gt "$hw_before" ] || fail "retention did not move pgret's start past $hw_before"
# The catch-up may fetch from either live replica, and each deletes by its
# own retention pass: wait until both start past the down node's end, or a
# lagging one would serve the whole gap and no delete_before would run.
q="SELECT p.start_offset, coalesce(max(b.last_offset), -1) FROM cairn_partitions p
  JOIN cairn_topics t USING (topic_id) LEFT JOIN cairn_batches b USING (topic_id, partition)
  WHERE t.name = 'pgret' GROUP BY p.start_offset"
down_end=$(pg_psql "cairn_node$down" -At -F ' ' -c "$q" | awk '{print $2 + 1}')
for i in 1 2 3; do
  [ "$i" -eq "$down" ] && continue
  ok=0
  for _ in $(seq 1 150); do
    got=$(pg_psql "cairn_node$i" -At -F ' ' -c "$q")
    [ "${got%% *}" -gt "$down_end" ] && { ok=1; break; }
    sleep 0.2
  done
  [ "$ok" -eq 1 ] || fail "node $i's rows of pgret ($got) still start at or before node $down's end $down_end"
done
bash "$cluster_sh" start -d "$cdir" --cairnd "$cairnd" --cli "$cli" --wait-s 90 >"$dir/restart.out" 2>&1 ||
  fail "restarting node $down: $(cat "$dir/restart.out")"
pids+=("$(cat "$cdir/node$down.pid")")
# Its store ended at or below $hw_before, under the peers' start: the
# catch-up moves its start (delete_before, off the loop) and fetches the rest.
want=$(pg_psql "cairn_node$leader" -At -F ' ' -c "$q" | awk '{print $2}')
ok=0
for _ in $(seq 1 300); do
  got=$(pg_psql "cairn_node$down" -At -F ' ' -c "$q")
  if [ "${got%% *}" -gt "$hw_before" ] && [ "${got##* }" = "$want" ]; then ok=1; break; fi
  sleep 0.2
done
[ "$ok" -eq 1 ] || fail "node $down's rows of pgret ($got) did not catch up past $hw_before to $want"
grep -q "the peer's log starts at .*: ours restarts there" "$cdir/node$down.log" ||
  fail "node $down did not restart its log at the peer's start (a snapshot install's delete_before)"
retries=$(grep -c "catch-up from a peer failed" "$cdir/node$down.log" || true)
echo "   node $down restarted behind the start ($hw_before < $start); its store now starts at ${got%% *} and ends at $want ($retries catch-up retries logged)"

snaps=0
for i in 1 2 3; do
  n=$(curl -fsS "http://127.0.0.1:$((base + 10 * (i - 1) + 2))/metrics" | awk '$1 == "cairn_raft_snapshots_taken_total" {print $2}')
  snaps=$((snaps + ${n:-0}))
done
[ "$snaps" -gt 0 ] || fail "no Raft snapshot was taken (the settle path never ran)"
echo "   $snaps Raft snapshots taken on the 3 nodes"
echo "PASS"
