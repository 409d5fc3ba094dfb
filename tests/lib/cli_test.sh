# cli_test.sh - the scaffolding the cairn CLI's shell tests share: the
# binaries, a temporary directory, a local cluster stopped by PID whatever
# happens (trap), and assertions on exit codes, output and JSON.
#
# Source it after `set -euo pipefail` with CLI_TEST_TAG set (names the
# temporary directory) and the test's arguments: CAIRN CAIRND.
cli="$(cd "$(dirname "$1")" && pwd)/$(basename "$1")"
cairnd="$2"
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cluster_sh="$repo/deploy/cluster.sh"
. "$repo/tests/lib/ports.sh"
export CAIRN_LOG_LEVEL="${CAIRN_LOG_LEVEL:-warn}"
unset CAIRN_BOOTSTRAP
dir=$(mktemp -d "${TMPDIR:-/tmp}/cairn-${CLI_TEST_TAG}-XXXXXX")
cdir="$dir/cluster"
pids=()

# A test that starts more than nodes (clients in the background) defines
# test_cleanup, which cleanup calls first, whatever happens.
cleanup() {
  local rc=$?
  set +e
  if declare -F test_cleanup >/dev/null; then
    test_cleanup
  fi
  if [ -f "$cdir/cluster.conf" ]; then
    bash "$cluster_sh" stop -d "$cdir" --timeout-s 15 >/dev/null 2>&1
  fi
  # Whatever stop could not do: the PIDs recorded at start, if they are
  # still our cairnd processes.
  for p in "${pids[@]}"; do
    if { tr '\0' ' ' <"/proc/$p/cmdline"; } 2>/dev/null | grep -qE -- "--data-dir ($cdir/node|$dir/first)"; then
      kill -KILL "$p" 2>/dev/null
    fi
  done
  if [ "$rc" -ne 0 ]; then
    for f in "$cdir"/node*.log; do
      [ -f "$f" ] && { echo "--- tail of $f"; tail -20 "$f"; }
    done
  fi
  if [ -n "${CAIRN_KEEP_TEST_DIR:-}" ] || [ "$rc" -ne 0 ]; then
    echo "kept $dir"
  else
    rm -rf "$dir"
  fi
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# A ctest timeout SIGKILLs this shell, and no trap runs: the reaper kills
# the nodes it leaves (tests/lib/reaper.sh).
. "$repo/tests/lib/reaper.sh"
reaper_watch "$dir"

fail() {
  echo "FAIL: $*" >&2
  exit 1
}
step() { echo "== $*"; }

# expect CODE CMD...: runs CMD with stdout/stderr in $dir/out, $dir/err and
# checks its exit status.
expect() {
  local want=$1 got=0
  shift
  "$@" >"$dir/out" 2>"$dir/err" || got=$?
  if [ "$got" -ne "$want" ]; then
    echo "stdout:" >&2; head -20 "$dir/out" >&2
    echo "stderr:" >&2; head -20 "$dir/err" >&2
    fail "exit $got, not $want: $*"
  fi
}
# eventually CODE CMD...: as expect, retried for up to 5 s (for answers
# from a node whose metadata may lag the controller's by a moment).
eventually() {
  local want=$1 got
  for _ in $(seq 1 50); do
    got=0
    "${@:2}" >"$dir/out" 2>"$dir/err" || got=$?
    [ "$got" -ne "$want" ] || return 0
    sleep 0.1
  done
  expect "$@"
}
# wait_alive N CLI ARGS...: waits (up to 30 s) until `cluster status`, asked
# with CLI ARGS, counts N alive nodes. A node started by hand answers (and
# takes users) before the controller has its first heartbeat, and a topic's
# replication factor is checked against the alive nodes.
wait_alive() {
  local n=$1
  shift
  for _ in $(seq 1 150); do
    if "$@" cluster status --json >"$dir/alive.json" 2>/dev/null &&
      [ "$(grep -c '"state": *"alive"' "$dir/alive.json")" -ge "$n" ]; then
      return 0
    fi
    sleep 0.2
  done
  fail "fewer than $n alive nodes after 30 s: $(head -c 400 "$dir/alive.json")"
}
# topics_are NAMES: waits until every node lists exactly the topics NAMES
# (comma-separated, sorted; "" for none). The node asked is the library's
# choice, and a node's metadata may lag the controller's by a moment: 6
# answers in a row must agree.
topics_are() {
  local ok=0
  for _ in $(seq 1 100); do
    "$cli" topic list --json >"$dir/out"
    if python3 -c 'import json,sys; sys.exit(0 if ",".join(sorted(t["name"] for t in json.load(open(sys.argv[1]))["topics"])) == sys.argv[2] else 1)' "$dir/out" "$1"; then
      ok=$((ok + 1))
      [ "$ok" -lt 6 ] || return 0
    else
      ok=0
      sleep 0.1
    fi
  done
  fail "topic list is not '$1' after 10 s: $(cat "$dir/out")"
}
err_has() { grep -q -- "$1" "$dir/err" || fail "stderr lacks '$1': $(cat "$dir/err")"; }
out_has() { grep -q -- "$1" "$dir/out" || fail "stdout lacks '$1': $(cat "$dir/out")"; }
json_ok() { python3 -m json.tool "$1" >/dev/null || fail "not valid JSON: $(head -c 400 "$1")"; }
# pyj FILE EXPR: evaluates a Python expression over the JSON document j.
pyj() {
  python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); sys.exit(0 if eval(sys.argv[2]) else 1)' "$1" "$2" ||
    fail "JSON check '$2' is false for $(head -c 600 "$1")"
}

# describe_has TOPIC PYEXPR [CLI OPTIONS...]: `cairn [OPTIONS] topic
# describe TOPIC --json` satisfies PYEXPR (over j) within 10 s: the node
# asked may lag the controller's metadata by a moment after a change.
describe_has() {
  local topic=$1 expr=$2
  shift 2
  for _ in $(seq 1 50); do
    if "$cli" "$@" topic describe "$topic" --json >"$dir/out" 2>"$dir/err" &&
      python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); sys.exit(0 if eval(sys.argv[2]) else 1)' "$dir/out" "$expr"; then
      return 0
    fi
    sleep 0.2
  done
  fail "topic describe $topic: '$expr' is false: $(head -c 600 "$dir/out") $(cat "$dir/err")"
}

# group_committed GROUP PARTITIONS TOTAL: `cairn group describe` shows
# GROUP's committed offsets on PARTITIONS partitions summing to TOTAL, with
# no lag (a node's answer may lag the commit by a moment: retried).
group_committed() {
  eventually 0 "$cli" group describe "$1" --json
  json_ok "$dir/out"
  pyj "$dir/out" "len(j['offsets']) == $2 and sum(o['committed'] for o in j['offsets']) == $3 and all(o['lag'] == 0 for o in j['offsets'])"
}

command -v python3 >/dev/null || fail "python3 is needed (deploy/setup.sh installs it)"

# Starts one node in $cdir/node1 with --auth required, --authorizer acl,
# super-user User:admin and a Kafka port (node1_args: its arguments, to
# start it again), creates the user admin (password admin-pw: the first
# user is open), then each user NAME given (password NAME-pw); records the
# PID, exports CAIRN_BOOTSTRAP and CAIRN_PASSWORD (admin's); sets base and
# kafka (the Kafka address).
start_acl_node() {
  local u
  base=$(free_base_port 1)
  kafka="127.0.0.1:$((base + 3))"
  mkdir -p "$cdir"
  node1_args=(--data-dir "$cdir/node1" --listen "127.0.0.1:$base"
    --cluster-listen "127.0.0.1:$((base + 1))" --admin-listen "127.0.0.1:$((base + 2))"
    --kafka-listen "$kafka" --auth required --authorizer acl --super-users User:admin)
  "$cairnd" "${node1_args[@]}" >"$cdir/node1.log" 2>&1 &
  pids+=($!)
  export CAIRN_BOOTSTRAP="127.0.0.1:$base"
  for _ in $(seq 1 100); do
    printf 'admin-pw\n' | "$cli" user create admin >/dev/null 2>&1 && break
    sleep 0.2
  done
  export CAIRN_PASSWORD=admin-pw
  for u in "$@"; do
    printf '%s-pw\n' "$u" | "$cli" --user admin user create "$u" >/dev/null || fail "user $u"
  done
}

# Starts a 3-node cluster in $cdir with deploy/cluster.sh on ports below
# the kernel's ephemeral range (another base if one is taken), records the
# nodes' PIDs for cleanup, and exports CAIRN_BOOTSTRAP; sets base.
start_cluster3() {
  local started=0 attempt f
  for attempt in 1 2 3 4 5; do
    base=$(free_base_port 3)
    if bash "$cluster_sh" start -d "$cdir" -n 3 --base-port "$base" --cairnd "$cairnd" --cli "$cli" \
      --fresh --wait-s 90 >"$dir/start.out" 2>&1; then
      started=1
      break
    fi
    cat "$dir/start.out"
    grep -q "in use" "$dir/start.out" || break
  done
  for f in "$cdir"/node*.pid; do [ -f "$f" ] && pids+=("$(cat "$f")"); done
  [ "$started" -eq 1 ] || fail "the cluster did not start"
  [ "${#pids[@]}" -eq 3 ] || fail "expected 3 PIDs, got ${#pids[*]}"
  export CAIRN_BOOTSTRAP
  CAIRN_BOOTSTRAP=$(cat "$cdir/bootstrap")
}

# restart_nodes I...: starts again the stopped nodes of the start_cluster3
# cluster (cluster.sh start starts only those), waits for the cluster, and
# adds nodes I... to the PIDs the cleanup kills.
restart_nodes() {
  local i
  bash "$cluster_sh" start -d "$cdir" --cairnd "$cairnd" --cli "$cli" --wait-s 90 >"$dir/restart.out" 2>&1 ||
    fail "restarting node(s) $*: $(cat "$dir/restart.out")"
  for i in "$@"; do pids+=("$(cat "$cdir/node$i.pid")"); done
}

# produce_range TOPIC PART FIRST LAST: records r-FIRST..r-LAST (100 bytes
# each, r-%05g then filler) to TOPIC/PART, one produce (one batch) per 40,
# each acknowledged (exit 0) before the next.
produce_range() {
  local topic=$1 part=$2 from=$3 last=$4 to
  while [ "$from" -le "$last" ]; do
    to=$((from + 39))
    [ "$to" -le "$last" ] || to=$last
    seq -f 'r-%05g' "$from" "$to" | sed 's/$/-..........................................................................................-/' |
      cut -c1-100 >"$dir/batch"
    expect 0 "$cli" produce "$topic" -p "$part" <"$dir/batch"
    from=$((to + 1))
  done
}
# replica NODE TOPIC PART: "LOG_START HIGH_WATERMARK HOSTED" of node NODE's
# replica of TOPIC/PART as its admin port shows it (a start_cluster3 node).
replica() {
  curl -sf "http://127.0.0.1:$((base + 10 * ($1 - 1) + 2))/v1/topics/$2" |
    python3 -c 'import json,sys; p=[p for p in json.load(sys.stdin)["partitions"] if p["partition"] == int(sys.argv[1])][0]; print(p["log_start_offset"], p["high_watermark"], p["hosted_here"])' "$3"
}
# every_replica TOPIC PART PYEXPR: waits up to 30 s until, on every node,
# the replica of TOPIC/PART (s: log start, h: high watermark) satisfies
# PYEXPR.
every_replica() {
  local i ok s h hosted
  for _ in $(seq 1 150); do
    ok=1
    for i in 1 2 3; do
      read -r s h hosted < <(replica "$i" "$1" "$2" || echo "-1 -1 False")
      python3 -c "import sys; s, h = $s, $h; sys.exit(0 if '$hosted' == 'True' and ($3) else 1)" || ok=0
    done
    [ "$ok" -eq 0 ] || return 0
    sleep 0.2
  done
  for i in 1 2 3; do echo "node $i: $(replica "$i" "$1" "$2" || true)"; done
  fail "not every replica of $1/$2 has $3 after 30 s"
}
# tail_ok TOPIC PART LAST: `consume` from the log start reads a contiguous
# run of produce_range's records ending at r-LAST, each once, in order;
# prints the first one's number and how many.
tail_ok() {
  expect 0 "$cli" consume "$1" -p "$2" -o beginning -e
  cut -c1-7 "$dir/out" >"$dir/got"
  local first
  first=$(head -1 "$dir/got" | sed 's/^r-0*//')
  [ -n "$first" ] || fail "nothing read"
  seq -f 'r-%05g' "$first" "$3" | diff - "$dir/got" >/dev/null ||
    fail "not a contiguous tail ending at r-$3: $(head -3 "$dir/got" | tr '\n' ' ') ... $(tail -3 "$dir/got" | tr '\n' ' ')"
  echo "$first $(wc -l <"$dir/got")"
}
