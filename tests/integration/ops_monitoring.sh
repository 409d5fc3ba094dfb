#!/usr/bin/env bash
# The admin ports of a real 3-node cluster after some traffic (produce,
# fetch, a consumer group that commits part of what it could read):
# `promtool check metrics` passes on every node's /metrics; the process
# metrics, cairn_build_info and consumer-group lag are there, and the lag
# in /v1/groups and in the metrics agree with the committed offsets and
# high watermarks; deploy/monitoring/'s alert rules pass `promtool check
# rules`, and every metric their expressions and the Grafana dashboard's
# name is exported by the nodes (monitoring_check.py).
# usage: ops_monitoring.sh CAIRN CAIRND
set -euo pipefail
CLI_TEST_TAG=ops-monitoring
. "$(dirname "$0")/../lib/cli_test.sh"
py=/usr/bin/python3 # Debian's python, as the other tests use
[ -x "$py" ] || py=python3
command -v promtool >/dev/null || fail "promtool is needed (Debian package prometheus, deploy/setup.sh)"
mon="$repo/deploy/monitoring"

# get PORT PATH: the body of an admin port's answer into $dir/out.
get() {
  "$py" -c 'import sys,urllib.request; sys.stdout.buffer.write(urllib.request.urlopen("http://127.0.0.1:%s%s" % (sys.argv[1], sys.argv[2]), timeout=10).read())' "$1" "$2" >"$dir/out"
}

step "the rules and the dashboard are well formed"
promtool check rules "$mon/cairn-alerts.yml" >"$dir/rules.out" 2>&1 || fail "promtool check rules: $(cat "$dir/rules.out")"
json_ok "$mon/cairn-dashboard.json"

step "a 3-node cluster with traffic and a consumer group"
start_cluster3
expect 0 "$cli" topic create orders --partitions 3 --replication-factor 3
seq 1 30 | sed 's/^/order-/' >"$dir/in"
expect 0 "$cli" produce orders -p 0 <"$dir/in"
expect 0 "$cli" consume orders -o beginning -e
expect 0 "$cli" consume -g billing orders -n 12
seq 31 40 | sed 's/^/order-/' | "$cli" produce orders -p 0 >/dev/null
# and through the Kafka port, on a topic of its own (its request metrics
# are in the dashboard too)
command -v kcat >/dev/null || fail "kcat is not installed (deploy/setup.sh)"
kafka_all="127.0.0.1:$((base + 3)),127.0.0.1:$((base + 13)),127.0.0.1:$((base + 23))"
expect 0 "$cli" topic create kevents --partitions 1 --replication-factor 3
seq 1 5 | sed 's/^/event-/' | timeout 60 kcat -b "$kafka_all" -P -t kevents -X acks=all ||
  fail "kcat produce"
[ "$(timeout 60 kcat -b "$kafka_all" -C -t kevents -o beginning -e -q | wc -l)" = 5 ] ||
  fail "kcat read back"
# What the group committed, as the client protocol's DescribeGroups says.
eventually 0 "$cli" group describe billing --json
committed=$("$py" -c 'import json,sys; print(sum(o["committed"] for o in json.load(open(sys.argv[1]))["offsets"] if o["committed"] > 0))' "$dir/out")
[ "$committed" -gt 0 ] || fail "billing committed nothing: $(cat "$dir/out")"
want=$((40 - committed))
echo "billing committed $committed of 40: lag $want"

step "without an admin token the console's actions are refused"
"$py" - "$((base + 2))" >"$dir/post" <<'PYEOF' || fail "POST without a token: $(cat "$dir/post")"
import sys, urllib.request, urllib.error
req = urllib.request.Request("http://127.0.0.1:%s/v1/actions/create-topic?name=nope&partitions=1&replication_factor=1" % sys.argv[1], method="POST")
try:
    urllib.request.urlopen(req, timeout=10)
    sys.exit("accepted")
except urllib.error.HTTPError as e:
    print(e.code, e.read().decode())
    sys.exit(0 if e.code == 403 else 1)
PYEOF
grep -q "admin-token-file" "$dir/post" || fail "the refusal does not say how: $(cat "$dir/post")"
expect 1 "$cli" topic describe nope

step "promtool check metrics passes on every node"
ports=()
for i in 1 2 3; do ports+=($((base + 10 * (i - 1) + 2))); done
for i in 1 2 3; do
  get "${ports[$((i - 1))]}" /metrics
  cp "$dir/out" "$dir/metrics$i"
  promtool check metrics <"$dir/metrics$i" >"$dir/promtool$i" 2>&1 || fail "node $i: promtool check metrics: $(cat "$dir/promtool$i")"
  [ ! -s "$dir/promtool$i" ] || fail "node $i: promtool check metrics: $(cat "$dir/promtool$i")"
  for m in process_cpu_seconds_total process_resident_memory_bytes process_open_fds \
    process_start_time_seconds 'cairn_build_info{version="'; do
    grep -q "^$m" "$dir/metrics$i" || fail "node $i exports no $m"
  done
  # The node-wide Raft log's write jobs: every node wrote (the topics'
  # entries), so each phase counted jobs.
  for ph in queue io callback; do
    n=$(awk -v p="cairn_wal_job_seconds_count{phase=\"$ph\"}" '$1 == p { print $2 }' "$dir/metrics$i")
    [ "${n:-0}" -gt 0 ] || fail "node $i: cairn_wal_job_seconds counted no $ph phase (${n:-absent})"
  done
  # raft 0.15's weak spots, counted (the barriers summed below).
  for m in cairn_raft_below_snapshot_total cairn_raft_snapshots_held_total cairn_raft_results_held_total \
    cairn_raft_results_clamped_total cairn_raft_same_term_leaders_total \
    cairn_raft_barriers_total cairn_raft_log_trimmed_bytes_total \
    cairn_heap_trims_total cairn_heap_released_bytes_total; do
    grep -q "^$m " "$dir/metrics$i" || fail "node $i exports no $m"
  done
  barriers=$((${barriers:-0} + $(awk '$1 == "cairn_raft_barriers_total" { print $2 }' "$dir/metrics$i")))
  trimmed=$((${trimmed:-0} + $(awk '$1 == "cairn_raft_log_trimmed_bytes_total" { print $2 }' "$dir/metrics$i")))
  if awk '!/^#/ && /_ms[{ ]/ { f = 1 } END { exit !f }' "$dir/metrics$i"; then
    fail "node $i: a metric in milliseconds: $(grep -v '^#' "$dir/metrics$i" | grep '_ms[{ ]' | head -3)"
  fi
done
# Each partition's first leader appended a barrier as it started to lead.
[ "$barriers" -ge 4 ] || fail "cairn_raft_barriers_total summed over the nodes: $barriers, want one per partition (4) at least"
# Each partition's bootstrapping replicas started raft 0.15 with their
# configuration entry in a 256-slot reference table (8 KiB) and gave all
# but 4 slots back (32 bytes each).
[ "$trimmed" -ge $((4 * 252 * 32)) ] || fail "cairn_raft_log_trimmed_bytes_total summed over the nodes: $trimmed, want 4 x 8064 at least"
echo "promtool: 3 nodes clean"

step "the group's lag: /v1/groups of its coordinator and cairn_group_lag agree"
# One node coordinates billing; its view lists it with 40 - committed to
# read (everything is in partition 0: a partition without a commit has no
# lag to count).
found=0
for i in 1 2 3; do
  for _ in $(seq 1 50); do
    get "${ports[$((i - 1))]}" /v1/groups
    "$py" -c 'import json,sys; sys.exit(0 if "coordinator_id" in json.load(open(sys.argv[1])) else 1)' "$dir/out" || fail "bad /v1/groups: $(head -c 300 "$dir/out")"
    if ! grep -q '"group":"billing"' "$dir/out"; then break; fi
    found=$i
    "$py" -c '
import json,sys
g=[g for g in json.load(open(sys.argv[1]))["groups"] if g["group"]=="billing"][0]
offs=[o for o in g["offsets"] if o["topic"]=="orders"]
ok = g["state"]=="empty" and sum(o["committed"] for o in offs)==int(sys.argv[2]) and all(o["lag"]==o["high_watermark"]-o["committed"] for o in offs) and g["lag_total"]==int(sys.argv[3])
sys.exit(0 if ok else 1)' "$dir/out" "$committed" "$want" && break
    sleep 0.1
  done
  [ "$found" -eq 0 ] || break
done
[ "$found" -ne 0 ] || fail "no node's /v1/groups lists billing"
pyj "$dir/out" "[g for g in j['groups'] if g['group']=='billing'][0]['lag_total'] == $want"
get "${ports[$((found - 1))]}" /metrics
lag=$(awk '/^cairn_group_lag\{group="billing",topic="orders"/ {s += $2} END {print s + 0}' "$dir/out")
[ "$lag" = "$want" ] || fail "cairn_group_lag of billing sums to $lag, not $want: $(grep cairn_group_ "$dir/out")"
grep -q '^cairn_group_members{group="billing"} 0$' "$dir/out" || fail "no cairn_group_members of billing"
cp "$dir/out" "$dir/metrics$found"

step "the message browser reads on the leader, from an offset or a time"
"$py" - "${ports[0]}" <<'PYEOF' || fail "/v1/messages"
import json, sys, urllib.request, urllib.error
def get(base, q):
    try:
        r = urllib.request.urlopen(base + "/v1/messages?" + q, timeout=10)
        return r.status, json.load(r)
    except urllib.error.HTTPError as e:
        return e.code, json.load(e)
base = "http://127.0.0.1:" + sys.argv[1]
st, j = get(base, "topic=orders&partition=0&offset=0&limit=3")
if st == 421:  # not the leader here: it names the one to ask
    base = "http://" + j["leader_admin_address"]
    st, j = get(base, "topic=orders&partition=0&offset=0&limit=3")
vals = [bytes.fromhex(r["value"]).decode() for r in j["records"]]
assert st == 200 and vals == ["order-1", "order-2", "order-3"], (st, j)
assert j["high_watermark"] == 40 and j["records"][0]["offset"] == 0, j
t5 = j["records"][2]["timestamp"]
st, j = get(base, "topic=orders&partition=0&timestamp=%d&limit=1" % t5)
assert st == 200 and j["records"] and j["records"][0]["timestamp"] >= t5, (st, j)
st, j = get(base, "topic=orders&partition=0&offset=41")
assert st == 409 and "outside" in j["error"], (st, j)
st, j = get(base, "topic=nosuch&partition=0&offset=0")
assert st == 404, (st, j)
st, j = get(base, "topic=orders&partition=0&offset=0&limit=0")
assert st == 400 and "usage" in j["error"], (st, j)
print("browse: offsets 0..2 read, by time, out of range 409, unknown topic 404, bad limit 400")
PYEOF

step "cross-origin reads only for the cluster's own admin addresses"
"$py" - "${ports[0]}" "${ports[1]}" <<'PYEOF' || fail "CORS"
import sys, urllib.request
def acao(origin):
    r = urllib.request.urlopen(urllib.request.Request("http://127.0.0.1:%s/v1/history" % sys.argv[1], headers={"Origin": origin}), timeout=10)
    return r.headers.get("Access-Control-Allow-Origin")
own = "http://127.0.0.1:%s" % sys.argv[2]
assert acao(own) == own, acao(own)
assert acao("http://evil.example") is None
assert acao("http://127.0.0.1:1") is None
print("CORS: node 2's console allowed, other origins not")
PYEOF

step "every metric the rules and the dashboard use is exported"
"$py" "$repo/tests/integration/monitoring_check.py" "$mon/cairn-alerts.yml" "$mon/cairn-dashboard.json" \
  "$dir/metrics1" "$dir/metrics2" "$dir/metrics3"
echo "PASS"
