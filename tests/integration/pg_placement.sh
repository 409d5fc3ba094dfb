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
# - with PostgreSQL stopped, cluster status lists the failed stores with the
#   reason and since when, nothing is acknowledged; once it is back the list
#   empties and every acknowledged record is read back once, in order.
# Usage: pg_placement.sh CAIRN CAIRND
set -euo pipefail
CLI_TEST_TAG=pgplace
. "$(cd "$(dirname "$0")/../lib" && pwd)/cli_test.sh"
. "$repo/tests/lib/pg.sh"

chmod 755 "$dir" # the PostgreSQL server runs as nobody
# The nodes first (they hold connections), then the server, then the
# usual cleanup with the test's exit status.
trap 'rc=$?; set +e; [ -f "$cdir/cluster.conf" ] && bash "$cluster_sh" stop -d "$cdir" --timeout-s 15 >/dev/null 2>&1; pg_stop; (exit $rc); cleanup' EXIT

step "a private PostgreSQL server, a database for nodes 1 and 2 only"
pg_start "$dir/pg" || fail "PostgreSQL did not start"
for i in 1 2; do
  pg_createdb "cairn_node$i" >"$dir/conninfo$i" || fail "createdb cairn_node$i"
done

# cluster.sh starts "cairnd ARGS": this wrapper adds the node's database
# when it has one.
real_cairnd="$cairnd"
cairnd="$dir/cairnd-pg"
cat >"$cairnd" <<WRAP
#!/usr/bin/env bash
id=""
prev=""
for a in "\$@"; do
  [ "\$prev" = "--node-id" ] && id="\$a"
  prev="\$a"
done
[ -f "$dir/conninfo\$id" ] || exec "$real_cairnd" "\$@"
exec "$real_cairnd" "\$@" --pg-conninfo "\$(cat "$dir/conninfo\$id")"
WRAP
chmod +x "$cairnd"

start_cluster3
node1="127.0.0.1:$base"

step "cluster status shows which nodes have a database"
eventually 0 "$cli" -b "$node1" cluster status --json
json_ok "$dir/out"
pyj "$dir/out" 'sorted((n["id"], n["has_database"]) for n in j["nodes"]) == [(1, True), (2, True), (3, False)]'
expect 0 "$cli" -b "$node1" cluster status
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
produce_acked() {
  seq 1 20 | sed "s/^/$1-/" >"$dir/round"
  "$cli" --timeout-ms 60000 produce pgt -p 0 -f "$dir/round" >/dev/null 2>"$dir/produce.err" ||
    fail "round $1 not acknowledged: $(cat "$dir/produce.err")"
  cat "$dir/round" >>"$dir/acked"
}
produce_acked a
produce_acked b

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
if "$cli" --timeout-ms 3000 produce pgt -p 0 -f "$dir/round" >/dev/null 2>"$dir/produce.err"; then
  fail "a produce was acknowledged while PostgreSQL was down"
fi
# Each node lists its own replicas' failures: the replica that applied the
# entry fails its store, on node 1 or node 2. Ask both.
seen=""
deadline=$((SECONDS + 45))
while [ "$SECONDS" -lt "$deadline" ]; do
  for i in 1 2; do
    "$cli" --timeout-ms 3000 -b "127.0.0.1:$((base + 10 * (i - 1)))" cluster status --json \
      >"$dir/status$i.json" 2>/dev/null || continue
    failures_in "$dir/status$i.json" >"$dir/failures" ||
      fail "bad store_failures: $(head -c 600 "$dir/status$i.json")"
    if grep -q "^pgt/0/$i postgresql" "$dir/failures"; then
      seen=$i
      break 2
    fi
  done
  sleep 0.2
done
[ -n "$seen" ] || fail "cluster status on nodes 1 and 2 shows no failed store of pgt-0"
grep -q "^ft/" "$dir/failures" && fail "a file topic's store is reported failed: $(cat "$dir/failures")"
echo "   node $seen: $(grep "^pgt/0/" "$dir/failures")"
expect 0 "$cli" -b "127.0.0.1:$((base + 10 * (seen - 1)))" cluster status
out_has "store failed"
out_has "postgresql"
grep -E "^pgt +0 +$seen +[0-9]{4}-[0-9]{2}-[0-9]{2} " "$dir/out" >/dev/null ||
  fail "no table row for pgt-0 on node $seen with since when: $(cat "$dir/out")"
# The admin JSON API of that node says the same.
python3 - "$((base + 10 * (seen - 1) + 2))" "$seen" <<'PY' || fail "/v1/cluster on node $seen shows no failed store of pgt-0"
import json, sys, urllib.request
j = json.load(urllib.request.urlopen("http://127.0.0.1:%s/v1/cluster" % sys.argv[1], timeout=5))
p = [p for t in j["topics"] if t["name"] == "pgt" for p in t["partitions"] if p["partition"] == 0][0]
f = p["store_failures"]
assert len(f) == 1 and f[0]["node_id"] == int(sys.argv[2]) and f[0]["reason"].startswith("postgresql") and f[0]["since_ms"] > 0, f
PY

step "PostgreSQL comes back: no failed store any more, every acknowledged record there"
pg_resume || fail "PostgreSQL did not start again"
produce_acked c
ok=0
deadline=$((SECONDS + 60))
while [ "$SECONDS" -lt "$deadline" ]; do
  if "$cli" --timeout-ms 3000 -b "$node1" cluster status --json >"$dir/status1.json" 2>/dev/null &&
    "$cli" --timeout-ms 3000 -b "127.0.0.1:$((base + 10))" cluster status --json >"$dir/status2.json" 2>/dev/null &&
    [ -z "$(failures_in "$dir/status1.json")" ] && [ -z "$(failures_in "$dir/status2.json")" ]; then
    ok=1
    break
  fi
  sleep 0.2
done
[ "$ok" -eq 1 ] || fail "cluster status still shows failed stores: $(failures_in "$dir/status1.json") $(failures_in "$dir/status2.json")"
expect 0 "$cli" -b "127.0.0.1:$((base + 10 * (seen - 1)))" cluster status
grep -q "store failed" "$dir/out" && fail "cluster status still lists a failed store: $(cat "$dir/out")"
expect 0 "$cli" consume pgt -p 0 -e -f '%o %v\n'
python3 - "$dir/acked" "$dir/out" <<'PY' || fail "consumed records do not hold the acknowledged ones once and in order"
import sys
acked = [l.rstrip("\n") for l in open(sys.argv[1])]
got = [l.rstrip("\n").split(" ", 1) for l in open(sys.argv[2]) if l.strip()]
values = [v for _, v in got]
offsets = [int(o) for o, _ in got]
assert offsets == list(range(offsets[0], offsets[0] + len(offsets))), "offsets not contiguous"
assert len(set(values)) == len(values), "a duplicate"
pos = {v: i for i, v in enumerate(values)}
assert all(v in pos for v in acked), "an acknowledged record is missing"
order = [pos[v] for v in acked]
assert order == sorted(order), "out of order"
print("   %d consumed, %d acknowledged: all there once, in order" % (len(values), len(acked)))
PY
echo "PASS"
