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
# every acknowledged record is there once, in order.
# Usage: pg_cluster.sh CAIRN CAIRND
set -euo pipefail
CLI_TEST_TAG=pgcluster
. "$(cd "$(dirname "$0")/../lib" && pwd)/cli_test.sh"
. "$repo/tests/lib/pg.sh"

chmod 755 "$dir" # the PostgreSQL server runs as nobody
# The nodes first (they hold connections), then the server, then the
# usual cleanup with the test's exit status.
trap 'rc=$?; set +e; [ -f "$cdir/cluster.conf" ] && bash "$cluster_sh" stop -d "$cdir" --timeout-s 15 >/dev/null 2>&1; pg_stop; (exit $rc); cleanup' EXIT

step "a private PostgreSQL server, one database per node"
pg_start "$dir/pg" || fail "PostgreSQL did not start"
for i in 1 2 3; do
  pg_createdb "cairn_node$i" >"$dir/conninfo$i" || fail "createdb cairn_node$i"
done

# cluster.sh starts "cairnd ARGS": this wrapper adds each node's database.
cairnd=$(pg_cairnd_wrapper "$dir" "$cairnd")

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
  if "$cli" --timeout-ms 20000 produce pgt -p 0 -f "$dir/round" >/dev/null 2>"$dir/produce.err"; then
    cat "$dir/round" >>"$dir/acked"
  fi
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

# Every acknowledged record once and in order in `cairn consume`, and the
# records view of every node's database equal to what it returned.
verify_all() {
step "cairn consume returns every acknowledged record once, in order"
expect 0 "$cli" consume pgt -p 0 -e -f '%o %v\n'
cp "$dir/out" "$dir/consumed"
python3 - "$dir/acked" "$dir/consumed" <<'PY' || fail "consumed records do not hold the acknowledged ones once and in order"
import sys
acked = [l.rstrip("\n") for l in open(sys.argv[1])]
got = [l.rstrip("\n").split(" ", 1) for l in open(sys.argv[2]) if l.strip()]
values = [v for _, v in got]
offsets = [int(o) for o, _ in got]
assert offsets == list(range(offsets[0], offsets[0] + len(offsets))), "offsets not contiguous"
pos = {}
for i, v in enumerate(values):
    assert v not in pos, "duplicate " + v
    pos[v] = i
missing = [v for v in acked if v not in pos]
assert not missing, "lost %d acknowledged records, e.g. %s" % (len(missing), missing[:3])
order = [pos[v] for v in acked]
assert order == sorted(order), "acknowledged records out of order"
print("   %d consumed, %d acknowledged: all there once, in order" % (len(values), len(acked)))
PY

step "the records view on every node's database returns what cairn consume returns"
for i in 1 2 3; do
  ok=0
  for _ in $(seq 1 100); do
    pg_psql "cairn_node$i" -At -F ' ' -c \
      "SELECT \"offset\", convert_from(value, 'UTF8') FROM cairn_records WHERE topic = 'pgt' AND partition = 0 ORDER BY \"offset\"" \
      >"$dir/sql$i" 2>"$dir/sql.err" || true
    if cmp -s "$dir/sql$i" "$dir/consumed"; then
      ok=1
      break
    fi
    sleep 0.2
  done
  [ "$ok" -eq 1 ] || fail "node $i's records view differs from cairn consume: $(diff "$dir/sql$i" "$dir/consumed" | head -5) $(cat "$dir/sql.err")"
done
echo "   3 databases agree with cairn consume"
}

verify_all

# The cairn_partition_store_failed gauge of node i (1, 0, or "" when the
# node does not answer).
store_failed_of() {
  python3 - "$((base + 10 * ($1 - 1) + 2))" <<'PY' 2>/dev/null
import sys, urllib.request
text = urllib.request.urlopen("http://127.0.0.1:%s/metrics" % sys.argv[1], timeout=5).read().decode()
vals = [l.rsplit(" ", 1)[1] for l in text.splitlines() if l.startswith("cairn_partition_store_failed{")]
print("1" if "1" in vals else "0")
PY
}

# Every node's gauge back at 0, and the same processes as before (the
# replicas resumed by themselves: no cairnd was restarted).
resumed_without_restart() {
  local i ok
  for i in 1 2 3; do
    kill -0 "$(cat "$cdir/node$i.pid")" 2>/dev/null || fail "node $i is gone"
    [ "$(cat "$cdir/node$i.pid")" = "${node_pid[$i]}" ] || fail "node $i was restarted"
    ok=0
    for _ in $(seq 1 150); do
      [ "$(store_failed_of "$i")" = "0" ] && { ok=1; break; }
      sleep 0.2
    done
    [ "$ok" -eq 1 ] || fail "node $i still reports cairn_partition_store_failed 1"
  done
}

declare -A node_pid
for i in 1 2 3; do node_pid[$i]=$(cat "$cdir/node$i.pid"); done

# One round r, which must be acknowledged: one cairn produce, whose
# idempotent producer retries through leader changes itself. Never run
# again on failure: a second process is a new producer, and a batch the
# first one left in doubt would then be stored twice.
produce_acked() {
  seq 1 20 | sed "s/^/r$1-/" >"$dir/round"
  "$cli" --timeout-ms 60000 produce pgt -p 0 -f "$dir/round" >/dev/null 2>"$dir/produce.err" ||
    fail "round r$1 not acknowledged: $(cat "$dir/produce.err")"
  cat "$dir/round" >>"$dir/acked"
}

# How many times the nodes logged a store that failed (and a Raft reopen).
store_failures() {
  cat "$cdir"/node*.log | grep -c "its PostgreSQL store failed" || true
}

step "PostgreSQL drops every connection: the replicas reconnect by themselves"
failures=$(store_failures)
for drop in 1 2 3; do
  pg_psql postgres -c "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE backend_type = 'client backend' AND pid <> pg_backend_pid()" >/dev/null
  produce_acked "3$drop"
done
resumed_without_restart
# Nothing was pending when the connections went: each replica connects
# again inside its next statement, without failing its store.
[ "$(store_failures)" = "$failures" ] ||
  fail "a dropped idle connection failed a store: $(grep -h "its PostgreSQL store failed" "$cdir"/node*.log | tail -1)"
echo "   produced again on the same processes after the connections were dropped, no store failed"

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
  if "$cli" --timeout-ms 3000 produce pgt -p 0 -f "$dir/round" >/dev/null 2>"$dir/produce.err"; then
    [ "$down_acked" -eq $((k - 1)) ] && [ "$k" -lt 4 ] ||
      fail "round down$k was acknowledged after a round was refused (the stores had failed)"
    cat "$dir/round" >>"$dir/acked"
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
  produce_acked "$r"
done
resumed_without_restart
grep -q "its PostgreSQL store failed" "$cdir"/node*.log || fail "no node logged why its store failed"
grep -q "the PostgreSQL store is back" "$cdir"/node*.log || fail "no node logged the store's revive"
verify_all
echo "PASS"
