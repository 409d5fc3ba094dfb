#!/usr/bin/env bash
# pg_faults.sh - the database faults of a --storage postgresql topic that
# leave PostgreSQL up (issue 19, item 5), on a real 3-node cluster with one
# database per node in a private server (tests/lib/pg.sh):
# - statement timeouts: every node's database gets a statement_timeout and a
#   second session holds cairn_batches in ACCESS EXCLUSIVE mode, so the
#   writer's COPY is canceled;
# - a full disk on the database side: cairn_batches moved to a tablespace on
#   a small tmpfs, produced to until PostgreSQL cannot extend its file.
# Each time the partition stops (cairn cluster status and /metrics say why:
# PostgreSQL's own message), and once the fault is lifted it resumes on the
# same cairnd processes, with every acknowledged record there once and in
# order (cairn consume and each node's cairn_records view). The full disk
# needs root and tmpfs (mount); without them that part is skipped.
# Usage: pg_faults.sh CAIRN CAIRND
set -euo pipefail
CLI_TEST_TAG=pgfaults
. "$(cd "$(dirname "$0")/../lib" && pwd)/cli_test.sh"
. "$repo/tests/lib/pg.sh"
. "$repo/tests/lib/pg_topic.sh"

small="$dir/small" # the tmpfs of the small tablespace, once mounted
lockers=()         # the psql processes holding cairn_batches locked
pg_test_cleanup() {
  local p
  for p in "${lockers[@]}"; do kill "$p" 2>/dev/null; done
  if mountpoint -q "$small"; then umount "$small"; fi
}

step "a private PostgreSQL server, one database per node, a 3-node cluster"
pg_nodes_start 3
start_cluster3
expect 0 "$cli" topic create "$PG_TOPIC" -P 1 -r 3 --storage postgresql
eventually 0 "$cli" topic describe "$PG_TOPIC"
: >"$dir/acked"
produce_acked a1
produce_acked a2
record_node_pids

# cairn's own connections to the node databases (not this test's).
cairn_backends="backend_type = 'client backend' AND datname LIKE 'cairn_node%'
  AND application_name NOT IN ('psql', 'cairn_test_lock') AND pid <> pg_backend_pid()"

# failed_gauge_seen SECONDS: polls every node's /metrics (one process, no
# pause) until one says cairn_partition_store_failed 1; prints that node.
# A store revived on a disk still full is 1 only between a failure and the
# revive (~100 ms): a slower poll would miss it.
failed_gauge_seen() {
  python3 - "$base" "$1" <<'PY'
import sys, time, urllib.request
base, deadline = int(sys.argv[1]), time.time() + float(sys.argv[2])
while time.time() < deadline:
    for i in (1, 2, 3):
        try:
            text = urllib.request.urlopen("http://127.0.0.1:%d/metrics" % (base + 10 * (i - 1) + 2),
                                          timeout=2).read().decode()
        except OSError:
            continue
        if any(l.startswith("cairn_partition_store_failed{") and l.endswith(" 1") for l in text.splitlines()):
            print("node %d" % i)
            sys.exit(0)
sys.exit(1)
PY
}

# wait_failed WHAT: `cairn cluster status --json` lists a failed store of
# the partition whose reason holds WHAT, some node's /metrics says
# cairn_partition_store_failed 1, and a node's log says why (each within
# 45 s: a store revived on a disk still full fails again, so the two
# reports may come from different moments).
wait_failed() {
  local seen_status="" seen_metrics deadline=$((SECONDS + 45))
  while [ "$SECONDS" -lt "$deadline" ] && [ -z "$seen_status" ]; do
    if "$cli" cluster status --json >"$dir/status.json" 2>/dev/null; then
      seen_status=$(python3 - "$dir/status.json" "$PG_TOPIC" "$1" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
for t in j["topics"]:
    for p in t["partitions"]:
        for f in p["store_failures"]:
            if t["name"] == sys.argv[2] and p["partition"] == 0 and sys.argv[3] in f["reason"]:
                print("node %d: %s" % (f["node_id"], f["reason"]))
                sys.exit(0)
PY
      )
    fi
    [ -n "$seen_status" ] || sleep 0.1
  done
  [ -n "$seen_status" ] || fail "cluster status never listed a failed store of $PG_TOPIC-0 with '$1'"
  seen_metrics=$(failed_gauge_seen 45) || fail "no node's /metrics said cairn_partition_store_failed 1"
  grep -q "its PostgreSQL store failed.*$1" "$cdir"/node*.log || fail "no node logged why its store failed ('$1')"
  echo "   cluster status: $seen_status; /metrics of $seen_metrics: cairn_partition_store_failed 1"
}

# lock_batches I: a psql session holding node I's cairn_batches in ACCESS
# EXCLUSIVE mode until it is terminated; returns once the lock is granted.
lock_batches() {
  PGAPPNAME=cairn_test_lock pg_psql "cairn_node$1" -c "SET statement_timeout = 0" -c "BEGIN" \
    -c "LOCK TABLE cairn_batches IN ACCESS EXCLUSIVE MODE" -c "SELECT pg_sleep(600)" \
    >/dev/null 2>&1 &
  lockers+=("$!")
  local _
  for _ in $(seq 1 100); do
    [ "$(pg_psql "cairn_node$1" -At -c "SET statement_timeout = 0" -c "SELECT count(*) FROM pg_locks
      WHERE relation = 'cairn_batches'::regclass AND mode = 'AccessExclusiveLock' AND granted")" = "1" ] &&
      return 0
    sleep 0.1
  done
  fail "node $1's cairn_batches was not locked"
}

step "statement timeouts: the writer's COPY waits on a lock past statement_timeout"
failures=$(store_failures)
for i in 1 2 3; do
  pg_psql postgres -c "ALTER DATABASE cairn_node$i SET statement_timeout = '500ms'" >/dev/null
done
# The setting applies to new sessions: cairn's connections are dropped
# while idle, and made again inside their next statement.
pg_psql postgres -c "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE $cairn_backends" >/dev/null
for i in 1 2 3; do lock_batches "$i"; done
# Written behind (pgwriter.c): a round applied before the writer's COPY is
# canceled is acknowledged on the Raft log alone, and must be in
# PostgreSQL once the lock is gone; one that fails is in doubt.
st_acked=0
for k in 1 2 3 4 5 6 7 8 9 10; do
  seq 1 20 | sed "s/^/st$k-/" >"$dir/round"
  produce_round "$dir/round" 3000 && st_acked=$((st_acked + 1))
  [ "$(store_failures)" -gt "$failures" ] && break
done
wait_failed "canceling statement due to statement timeout"
echo "   $st_acked of $k rounds acknowledged before a store failed"
# While the lock is held no store can revive (reading the rows back times
# out too): once every node's store has failed, nothing is acknowledged.
all_failed() { [ "$(store_failed_of 1)$(store_failed_of 2)$(store_failed_of 3)" = "111" ]; }
for _ in $(seq 1 150); do all_failed && break; sleep 0.2; done
all_failed || fail "not every node reports cairn_partition_store_failed 1 while the tables are locked"
seq 1 20 | sed "s/^/stdown-/" >"$dir/round"
! produce_round "$dir/round" 3000 || fail "a round was acknowledged while every store had failed"
echo "   every node's store failed; a round produced then is not acknowledged"

step "the timeout reset and the lock released: the partition resumes by itself"
for i in 1 2 3; do
  pg_psql postgres -c "ALTER DATABASE cairn_node$i RESET statement_timeout" >/dev/null
done
# The stores are down: their connections, made with the timeout, go now
# (the revives connect again without it).
pg_psql postgres -c "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE $cairn_backends
  OR application_name = 'cairn_test_lock'" >/dev/null
for p in "${lockers[@]}"; do wait "$p" 2>/dev/null || true; done
lockers=()
produce_acked b1
produce_acked b2
resumed_without_restart
[ "$(store_failures)" -gt "$failures" ] || fail "no store failed"
grep -q "the PostgreSQL store is back" "$cdir"/node*.log || fail "no node logged the store's revive"
verify_all

step "a postgresql replica opening while its database is locked: the nodes serve on"
# A new topic's replicas connect and load their rows off the loop
# (partitions.c, rgroup_pgstore_begin): with cairn_batches locked that
# load waits for the lock, and until then the nodes go on serving the
# other topics. (On the loop, the file topic's produce would wait for the
# lock too.)
expect 0 "$cli" topic create plain -P 1 -r 3
eventually 0 "$cli" topic describe plain
for i in 1 2 3; do lock_batches "$i"; done
expect 0 "$cli" topic create pgopen -P 1 -r 3 --storage postgresql
seq 1 20 | sed "s/^/plain-/" >"$dir/round"
"$cli" --timeout-ms 20000 produce plain -p 0 -f "$dir/round" >/dev/null 2>"$dir/produce.err" ||
  fail "the file topic's produce was not acknowledged while the database was locked: $(cat "$dir/produce.err")"
for p in "${lockers[@]}"; do
  kill -0 "$p" 2>/dev/null || fail "a lock ended before the file topic's produce was acknowledged"
done
"$cli" topic describe pgopen --json >"$dir/pgopen.json" || fail "topic describe pgopen"
pyj "$dir/pgopen.json" 'all(p["leader_id"] == 0 for p in j["partitions"])'
echo "   the file topic acknowledged while every node's cairn_batches was locked and pgopen's replicas waited for it"
pg_psql postgres -c "SELECT pg_terminate_backend(pid) FROM pg_stat_activity
  WHERE application_name = 'cairn_test_lock'" >/dev/null
for p in "${lockers[@]}"; do wait "$p" 2>/dev/null || true; done
lockers=()
seq 1 20 | sed "s/^/pgopen-/" >"$dir/round"
"$cli" --timeout-ms 60000 produce pgopen -p 0 -f "$dir/round" >/dev/null 2>"$dir/produce.err" ||
  fail "pgopen not acknowledged after the lock: $(cat "$dir/produce.err")"
got=$("$cli" consume pgopen -p 0 -e 2>/dev/null | tr '\n' ' ')
[ "$got" = "$(tr '\n' ' ' <"$dir/round")" ] || fail "pgopen read back '$got'"
echo "   once the lock went, pgopen's replicas opened and its records were acknowledged and read back"

step "a full disk on the database side: cairn_batches on a small tmpfs"
if [ "$(id -u)" -ne 0 ] || ! mkdir "$small" || ! mount -t tmpfs -o size=4m,mode=0700 tmpfs "$small" 2>"$dir/mount.err"; then
  echo "   SKIPPED: cannot mount a tmpfs (needs root): $(cat "$dir/mount.err" 2>/dev/null)"
  echo "PASS (the full disk part skipped)"
  exit 0
fi
chown nobody:nogroup "$small"
pg_psql postgres -c "CREATE TABLESPACE cairn_small LOCATION '$small'" >/dev/null
for i in 1 2 3; do
  pg_psql "cairn_node$i" -c "ALTER TABLE cairn_batches SET TABLESPACE cairn_small" >/dev/null
done
failures=$(store_failures)
# Rounds of incompressible records (~200 KB, stored on 3 databases)
# until PostgreSQL fails to extend a file; each acknowledged or in doubt.
full_acked=0
full=0
for k in $(seq 1 40); do
  head -c 150000 /dev/urandom | base64 -w 2000 | sed "s/^/full$k-/" >"$dir/round"
  produce_round "$dir/round" 3000 && full_acked=$((full_acked + 1))
  if [ "$(store_failures)" -gt "$failures" ]; then
    full=$k
    break
  fi
done
[ "$full" -gt 0 ] || fail "40 rounds and no store failed on a 4 MB tablespace: $(df -h "$small" | tail -1)"
wait_failed "No space left on device"
echo "   a store failed at round $full; $full_acked rounds acknowledged ($(df -h "$small" | tail -1 | awk '{print $3 " of " $2}') used)"
# A revive first proves that the database takes a write (pgstore.c,
# pgstore_probe: it must extend a file in cairn_batches' tablespace), so
# while the disk stays full every failed store stays failed and its replica
# stays closed: across several revive cycles no round is acknowledged, no
# store comes back and no replica reopens Raft. (Once two of the three
# stores have failed the third gets nothing more to write: no quorum.)
step "the disk stays full: revives fail their write probe; nothing is acknowledged"
failed_count() { printf '%s%s%s' "$(store_failed_of 1)" "$(store_failed_of 2)" "$(store_failed_of 3)" | tr -cd 1 | wc -c; }
for _ in $(seq 1 60); do
  [ "$(failed_count)" -ge 2 ] && break
  # a replica whose store has not written yet fails on the next round
  seq 1 5 | sed "s/^/fullpush-/" >"$dir/round"
  produce_round "$dir/round" 1000 || true
  sleep 0.2
done
nfailed=$(failed_count)
[ "$nfailed" -ge 2 ] || fail "fewer than 2 nodes report cairn_partition_store_failed 1 on the full disk"
log_count() { cat "$cdir"/node*.log | grep -c "$1" || true; }
probes0=$(log_count "the PostgreSQL store is still down.*probe.*No space left on device")
back0=$(log_count "the PostgreSQL store is back")
reopen0=$(log_count "reopened Raft from disk")
down_rounds=0
for k in $(seq 1 15); do
  seq 1 20 | sed "s/^/fulldown$k-/" >"$dir/round"
  ! produce_round "$dir/round" 3000 || fail "round fulldown$k was acknowledged while the disk was full"
  down_rounds=$k
  [ "$(failed_count)" -ge "$nfailed" ] || fail "a node stopped reporting its failed store while the disk was full"
  [ "$k" -ge 3 ] && [ "$(($(log_count "the PostgreSQL store is still down.*probe.*No space left on device") - probes0))" -ge 6 ] && break
done
probes=$(($(log_count "the PostgreSQL store is still down.*probe.*No space left on device") - probes0))
[ "$probes" -ge 6 ] || fail "only $probes revives failed their write probe in $down_rounds rounds"
[ "$(log_count "the PostgreSQL store is back")" = "$back0" ] || fail "a store was revived while the disk was full"
[ "$(log_count "reopened Raft from disk")" = "$reopen0" ] || fail "a replica reopened Raft while the disk was full"
echo "   $nfailed stores failed; $down_rounds rounds not acknowledged; $probes revives failed their write probe; no store came back, no replica reopened"

step "the disk grows: the partition resumes by itself"
mount -o remount,size=64m "$small"
produce_acked c1
produce_acked c2
resumed_without_restart
verify_all
echo "PASS"
