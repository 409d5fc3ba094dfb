#!/usr/bin/env bash
# pg_placement.sh - postgresql topics go only to nodes with a database, and
# `cairn cluster status` says which nodes have one and which replicas' stores
# failed. A real 3-node cluster where only nodes 1 and 2 have --pg-conninfo
# (one private PostgreSQL server, tests/lib/pg.sh):
# - cluster status (table and --json) shows nodes 1 and 2 with a database;
# - a postgresql topic with -r 2 is placed on exactly nodes 1 and 2, -r 3 is
#   refused with a message naming the 2 nodes, a file topic still uses node 3;
# - node 2 cannot be decommissioned (its postgresql replicas have nowhere to
#   go: node 3 has no database);
# - with PostgreSQL stopped, nothing is acknowledged, and cluster status,
#   topic describe and /v1/cluster asked of node 3 (which hosts no replica
#   of that topic) list exactly the failed stores nodes 1 and 2 report of
#   their own replicas, naming the node, the reason and since when; once it
#   is back every node's list empties and every acknowledged record is read
#   back once, in order;
# - node 3 restarted with a database takes a -r 3 postgresql topic; restarted
#   without it again, it refuses that replica with a log line and keeps
#   running, and the partition goes on with the other two.
# Usage: pg_placement.sh CAIRN CAIRND
set -euo pipefail
CLI_TEST_TAG=pgplace
. "$(cd "$(dirname "$0")/../lib" && pwd)/cli_test.sh"
. "$repo/tests/lib/pg.sh"
. "$repo/tests/lib/pg_topic.sh"

step "a private PostgreSQL server, a database for nodes 1 and 2 only"
pg_nodes_start 2

start_cluster3

step "cluster status shows which nodes have a database"
eventually 0 "$cli" cluster status --json
json_ok "$dir/out"
pyj "$dir/out" 'sorted((n["id"], n["has_database"]) for n in j["nodes"]) == [(1, True), (2, True), (3, False)]'
expect 0 "$cli" cluster status
out_has "DATABASE"
python3 - "$dir/out" <<'PY' || fail "the node table does not say which nodes have a database: $(cat "$dir/out")"
import sys
rows = {}
for line in open(sys.argv[1]):
    f = line.split()
    if f and f[0].rstrip("*").isdigit() and len(f) >= 6:
        rows[int(f[0].rstrip("*"))] = f[-1]
assert rows == {1: "yes", 2: "yes", 3: "no"}, rows
PY

step "a postgresql topic goes only to nodes 1 and 2; -r 3 is refused"
expect 1 "$cli" topic create pg3 -P 1 -r 3 --storage postgresql
err_has "only 2 alive nodes have a PostgreSQL database"
expect 0 "$cli" topic create pgt -P 4 -r 2 --storage postgresql
eventually 0 "$cli" topic describe pgt --json
pyj "$dir/out" 'len(j["partitions"]) == 4 and all(sorted(p["replicas"]) == [1, 2] for p in j["partitions"])'
expect 0 "$cli" topic create ft -P 1 -r 3
eventually 0 "$cli" topic describe ft --json
pyj "$dir/out" 'sorted(j["partitions"][0]["replicas"]) == [1, 2, 3]'

step "node 2 cannot be decommissioned: node 3 has no database for its replicas"
expect 1 "$cli" node decommission 2
err_has "no other alive node"

step "produce to the postgresql topic"
: >"$dir/acked"
produce_acked a
produce_acked b

# view_of I FILE: node I's /v1/cluster (its admin port: that very node's
# answer, where the CLI asks a node libcairn picks).
view_of() {
  python3 - "$((base + 10 * ($1 - 1) + 2))" "$2" <<'PY' 2>/dev/null
import sys, urllib.request
open(sys.argv[2], "wb").write(urllib.request.urlopen("http://127.0.0.1:%s/v1/cluster" % sys.argv[1], timeout=5).read())
PY
}

# failures_in FILE: "topic/partition/node reason" per failed store in a
# cluster status --json document, sorted; prints nothing when none.
failures_in() {
  python3 - "$1" <<'PY'
import json, sys, time
j = json.load(open(sys.argv[1]))
now = time.time() * 1000
for t in j["topics"]:
    for p in t["partitions"]:
        for f in p["store_failures"]:
            assert f["node_id"] in (1, 2), f
            assert 0 < f["since_ms"] <= now + 5000, f
            print("%s/%d/%d %s" % (t["name"], p["partition"], f["node_id"], f["reason"]))
PY
}

step "PostgreSQL stops: cluster status shows the failed stores and why"
pg_stop
seq 1 5 | sed "s/^/down-/" >"$dir/round"
# The store is written behind (pgwriter.c): an acknowledgement rests on the
# Raft log alone, so this first produce may be acknowledged before the
# writer finds the database gone (then it must be there once PostgreSQL is
# back), or time out once the store has latched. Either way the write
# attempt makes the stores fail.
if produce_round "$dir/round" 3000; then
  echo "   acknowledged before the store noticed: checked after PostgreSQL is back"
fi
# Node 3 hosts no replica of pgt, yet its answers name every failed store
# (the controller leader gathers them from the heartbeats and hands them
# back): wait until its view lists exactly the failures that nodes 1 and 2
# each report of their own replica, with the right node and reason.
own_failures() { # I: node I's view, its own replica's failure of pgt-0 only
  view_of "$1" "$dir/own$1.json" && failures_in "$dir/own$1.json" | grep "^pgt/0/$1 " || true
}
ok=0
deadline=$((SECONDS + 45))
while [ "$SECONDS" -lt "$deadline" ]; do
  own=$({ own_failures 1; own_failures 2; } | cut -d' ' -f1 | sort)
  if [ -n "$own" ] && view_of 3 "$dir/status3.json"; then
    failures_in "$dir/status3.json" >"$dir/failures" ||
      fail "bad store_failures: $(head -c 600 "$dir/status3.json")"
    if [ "$(grep "^pgt/0/" "$dir/failures" | cut -d' ' -f1 | sort)" = "$own" ] &&
      ! awk '!/ postgresql/ && /^pgt\// { f = 1 } END { exit !f }' "$dir/failures"; then
      ok=1
      break
    fi
  fi
  sleep 0.2
done
[ "$ok" -eq 1 ] || fail "node 3's /v1/cluster does not list the failed stores of nodes 1 and 2 (${own:-none seen}): $(cat "$dir/failures" 2>/dev/null)"
grep -q "^ft/" "$dir/failures" && fail "a file topic's store is reported failed: $(cat "$dir/failures")"
echo "   node 3 (no replica of pgt) names them: $(tr '\n' ';' <"$dir/failures")"
# failed_nodes: the nodes of pgt-0's failures node 3 listed, one a line.
failed_nodes() { grep "^pgt/0/" "$dir/failures" | cut -d' ' -f1 | cut -d/ -f3; }
node3=(-b "127.0.0.1:$((base + 20))")
# rows_named FILE: every node in failed_nodes has a table row in FILE, with
# since when and the store's reason.
rows_named() {
  local i
  for i in $(failed_nodes); do
    grep -E "^pgt +0 +$i +[0-9]{4}-[0-9]{2}-[0-9]{2} .*postgresql" "$1" >/dev/null || return 1
  done
}
# The tables (cluster status, topic describe) and --json asked of node 3.
ok=0
for _ in $(seq 1 50); do
  expect 0 "$cli" "${node3[@]}" cluster status
  cp "$dir/out" "$dir/status.txt"
  expect 0 "$cli" "${node3[@]}" topic describe pgt
  if rows_named "$dir/status.txt" && rows_named "$dir/out" && grep -q "store failed" "$dir/out"; then
    ok=1
    break
  fi
  sleep 0.2
done
[ "$ok" -eq 1 ] || fail "no table row naming node(s) $(failed_nodes | tr '\n' ' ')for pgt-0: $(cat "$dir/status.txt" "$dir/out")"
seen=$(failed_nodes | head -1)
ok=0
for _ in $(seq 1 50); do
  expect 0 "$cli" "${node3[@]}" cluster status --json
  failures_in "$dir/out" >"$dir/cli_failures" || fail "bad store_failures: $(head -c 600 "$dir/out")"
  grep -q "^pgt/0/$seen postgresql" "$dir/cli_failures" && { ok=1; break; }
  sleep 0.2
done
[ "$ok" -eq 1 ] || fail "cluster status --json shows no failed store of pgt-0 on node $seen"

step "PostgreSQL comes back: no failed store any more, every acknowledged record there"
pg_resume || fail "PostgreSQL did not start again"
produce_acked c
ok=0
deadline=$((SECONDS + 60))
while [ "$SECONDS" -lt "$deadline" ]; do
  if view_of 1 "$dir/status1.json" && view_of 2 "$dir/status2.json" &&
    view_of 3 "$dir/status3.json" && [ -z "$(failures_in "$dir/status1.json")" ] &&
    [ -z "$(failures_in "$dir/status2.json")" ] && [ -z "$(failures_in "$dir/status3.json")" ]; then
    ok=1
    break
  fi
  sleep 0.2
done
[ "$ok" -eq 1 ] || fail "cluster status still shows failed stores: $(failures_in "$dir/status1.json") $(failures_in "$dir/status2.json") $(failures_in "$dir/status3.json")"
for _ in 1 2 3; do
  expect 0 "$cli" "${node3[@]}" cluster status
  grep -q "store failed" "$dir/out" && fail "cluster status still lists a failed store: $(cat "$dir/out")"
done
verify_consumed
# restart_node3: SIGTERM node 3, wait for it to exit, start it again with
# what its wrapper finds now (a database or none).
restart_node3() {
  local pid
  pid=$(cat "$cdir/node3.pid")
  kill -TERM "$pid"
  for _ in $(seq 1 150); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.2
  done
  kill -0 "$pid" 2>/dev/null && fail "node 3 did not stop"
  bash "$cluster_sh" start -d "$cdir" --cairnd "$cairnd" --cli "$cli" --wait-s 90 >"$dir/restart.out" 2>&1 ||
    fail "restarting node 3: $(cat "$dir/restart.out")"
  pids+=("$(cat "$cdir/node3.pid")")
}

# node3_has_database WANT: waits until cluster status says so of node 3.
node3_has_database() {
  for _ in $(seq 1 100); do
    "$cli" --timeout-ms 3000 cluster status --json >"$dir/status3.json" 2>/dev/null &&
      python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); sys.exit(0 if [n["has_database"] for n in j["nodes"] if n["id"] == 3] == [sys.argv[2] == "true"] else 1)' \
        "$dir/status3.json" "$1" && return 0
    sleep 0.2
  done
  fail "node 3's has_database is not $1: $(head -c 600 "$dir/status3.json")"
}

step "node 3 restarts with a database: a postgresql topic with -r 3 goes on all three"
pg_createdb cairn_node3 >"$dir/conninfo3" || fail "createdb cairn_node3"
restart_node3
node3_has_database true
expect 0 "$cli" topic create pg3 -P 1 -r 3 --storage postgresql
eventually 0 "$cli" topic describe pg3 --json
pyj "$dir/out" 'sorted(j["partitions"][0]["replicas"]) == [1, 2, 3]'

step "node 3 restarts without it: it refuses its replica of pg3 and keeps running"
rm "$dir/conninfo3"
restart_node3
node3_has_database false
ok=0
for _ in $(seq 1 100); do
  grep -q "pg3-0: .*has no --pg-conninfo: it refuses to host the replica" "$cdir/node3.log" && { ok=1; break; }
  sleep 0.2
done
[ "$ok" -eq 1 ] || fail "node 3 did not log that it refuses pg3-0: $(tail -5 "$cdir/node3.log")"
"$cli" --timeout-ms 60000 produce pg3 -p 0 -f "$dir/round" >/dev/null 2>"$dir/produce.err" ||
  fail "pg3 takes no produce with 2 of 3 replicas: $(cat "$dir/produce.err")"
kill -0 "$(cat "$cdir/node3.pid")" 2>/dev/null || fail "node 3 is gone"
echo "   node 3 logged: $(grep -o "has no --pg-conninfo: it refuses to host the replica" "$cdir/node3.log" | head -1)"
echo "PASS"
