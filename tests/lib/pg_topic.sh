# pg_topic.sh - for tests of a --storage postgresql topic on a real 3-node
# cluster: produce rounds, check every acknowledged record once and in
# order (cairn consume and each node's cairn_records view), and the
# stores' failure and revive. Source it after cli_test.sh and pg.sh; the
# topic is $PG_TOPIC (default pgt), partition 0, each node's database
# cairn_node<I>; acknowledged records are appended to $dir/acked.

PG_TOPIC="${PG_TOPIC:-pgt}"

# pg_nodes_start N: the private server in $dir/pg, databases cairn_node1..N
# (their conninfo in $dir/conninfo<I>), and $cairnd replaced by the wrapper
# that adds them (pg_cairnd_wrapper); the EXIT trap is pg_cleanup.
pg_nodes_start() {
  local i
  chmod 755 "$dir" # the PostgreSQL server runs as nobody
  trap pg_cleanup EXIT
  pg_start "$dir/pg" || fail "PostgreSQL did not start"
  for i in $(seq 1 "$1"); do
    pg_createdb "cairn_node$i" >"$dir/conninfo$i" || fail "createdb cairn_node$i"
  done
  cairnd=$(pg_cairnd_wrapper "$dir" "$cairnd")
}

# The nodes first (they hold connections), then the server, then the
# test's own pg_test_cleanup if it defines one, then the usual cleanup
# with the test's exit status.
pg_cleanup() {
  local rc=$?
  set +e
  [ -f "$cdir/cluster.conf" ] && bash "$cluster_sh" stop -d "$cdir" --timeout-s 15 >/dev/null 2>&1
  pg_stop
  declare -F pg_test_cleanup >/dev/null && pg_test_cleanup
  (exit "$rc")
  cleanup
}

# produce_round FILE TIMEOUT_MS: one cairn produce of FILE's lines; on an
# acknowledgement they are appended to $dir/acked. Never run again on
# failure: a second process is a new producer, and a batch the first one
# left in doubt would then be stored twice (a round that fails is in doubt,
# not acknowledged).
produce_round() {
  "$cli" --timeout-ms "$2" produce "$PG_TOPIC" -p 0 -f "$1" >/dev/null 2>"$dir/produce.err" || return 1
  cat "$1" >>"$dir/acked"
}

# produce_acked NAME: round NAME (20 records NAME-1..NAME-20), which must be
# acknowledged: the idempotent producer retries through leader changes
# and stores reviving by itself.
produce_acked() {
  seq 1 20 | sed "s/^/$1-/" >"$dir/round"
  produce_round "$dir/round" 60000 || fail "round $1 not acknowledged: $(cat "$dir/produce.err")"
}

# Every acknowledged record once and in order in `cairn consume` (what it
# returned in $dir/consumed).
verify_consumed() {
expect 0 "$cli" consume "$PG_TOPIC" -p 0 -e -f '%o %v\n'
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
}

# verify_consumed, and the records view of every node's database equal to
# what cairn consume returned.
verify_all() {
step "cairn consume returns every acknowledged record once, in order"
verify_consumed
step "the records view on every node's database returns what cairn consume returns"
for i in 1 2 3; do
  ok=0
  for _ in $(seq 1 100); do
    pg_psql "cairn_node$i" -At -F ' ' -c \
      "SELECT \"offset\", convert_from(value, 'UTF8') FROM cairn_records WHERE topic = '$PG_TOPIC' AND partition = 0 ORDER BY \"offset\"" \
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

# record_node_pids: the nodes' PIDs now, for resumed_without_restart.
declare -A node_pid
record_node_pids() {
  local i
  for i in 1 2 3; do node_pid[$i]=$(cat "$cdir/node$i.pid"); done
}

# How many times the nodes logged a store that failed (and a Raft reopen).
store_failures() {
  cat "$cdir"/node*.log | grep -c "its PostgreSQL store failed" || true
}
