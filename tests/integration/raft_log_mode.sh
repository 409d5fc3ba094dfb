#!/usr/bin/env bash
# raft_log_mode.sh - which Raft log a node uses for its partition replicas
# (--raft-log, src/server/node.c node_resolve_raft_log), with a real
# single-node cairnd:
#   - a new data directory with the default (auto) gets the node-wide log
#     (<data>/wal) and no per-replica raft_uv files;
#   - a data directory written with --raft-log group keeps that kind under
#     the default after a restart, and its acknowledged messages are read
#     back in order;
#   - --raft-log node on group data, and --raft-log group on node data, are
#     refused at start (exit 1, naming the directory), changing nothing.
#   raft_log_mode.sh CAIRN CAIRND
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
. "$root/tests/lib/ports.sh"
cli=$1
cairnd=$2
export CAIRN_LOG_LEVEL=info
tmp=$(mktemp -d /tmp/cairn-raftlog-XXXXXX)
pid=""
stop() {
  if [ -n "$pid" ]; then kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; fi
  pid=""
}
cleanup() {
  local rc=$?
  stop
  if [ "$rc" -ne 0 ]; then
    echo "kept $tmp"
  else
    rm -rf "$tmp"
  fi
  exit "$rc"
}
trap cleanup EXIT
fail() { echo "FAIL $*"; exit 1; }
ok() { echo "ok   $*"; }

port=$(free_base_port 1)
flags() {
  echo --node-id 1 --data-dir "$1" --listen "127.0.0.1:$port" --cluster-listen "127.0.0.1:$((port + 1))" \
    --admin-listen "127.0.0.1:$((port + 2))" --kafka-listen off
}
# start DIR LOG [FLAGS...]: a node on DIR, its log in LOG; waits until it
# serves (a topic list answers).
start() {
  local d=$1 log=$2
  shift 2
  # shellcheck disable=SC2046
  "$cairnd" $(flags "$d") "$@" >"$log" 2>&1 &
  pid=$!
  for _ in $(seq 1 300); do
    "$cli" -b "127.0.0.1:$port" --timeout-ms 1000 topic list >/dev/null 2>&1 && return 0
    kill -0 "$pid" 2>/dev/null || fail "cairnd exited: $(tail -5 "$log")"
    sleep 0.1
  done
  fail "cairnd did not serve within 30 s: $(tail -5 "$log")"
}
# refused DIR LOG FLAGS...: cairnd exits 1 at start, its message naming what.
refused() {
  local d=$1 log=$2 rc=0
  shift 2
  # shellcheck disable=SC2046
  timeout 30 "$cairnd" $(flags "$d") "$@" >"$log" 2>&1 || rc=$?
  [ "$rc" -eq 1 ] || fail "cairnd $* on $d: exit $rc, not 1: $(tail -3 "$log")"
}
produce() {
  printf 'k%s\tv%s\n' 1 1 2 2 3 3 | "$cli" -b "127.0.0.1:$port" produce t -K $'\t' >/dev/null
}
consumed() {
  "$cli" -b "127.0.0.1:$port" consume t -p 0 -o beginning -e -f '%k=%v\n' 2>/dev/null | tr '\n' ' '
}

# 1. A new data directory: the node-wide log.
start "$tmp/new" "$tmp/new.log"
"$cli" -b "127.0.0.1:$port" topic create t --partitions 1 --replication-factor 1 >/dev/null
produce
stop
ls "$tmp/new/wal"/wal-* >/dev/null 2>&1 || fail "a new data directory has no node-wide log in wal/"
if ls "$tmp/new/partitions"/*/raft/metadata* >/dev/null 2>&1; then
  fail "a new data directory holds per-replica raft files: $(ls "$tmp/new/partitions"/*/raft/)"
fi
grep -q "Raft log: node (--raft-log auto: a new data directory)" "$tmp/new.log" ||
  fail "no 'Raft log: node' line in the log"
ok "a new data directory gets the node-wide log"

# 2. Group data keeps group under the default, and reads back.
start "$tmp/grp" "$tmp/grp1.log" --raft-log group
"$cli" -b "127.0.0.1:$port" topic create t --partitions 1 --replication-factor 1 >/dev/null
produce
stop
ls "$tmp/grp/partitions"/*/raft/metadata* >/dev/null 2>&1 || fail "--raft-log group wrote no raft files"
start "$tmp/grp" "$tmp/grp2.log"
grep -q "Raft log: group (--raft-log auto: the data directory holds per-replica Raft files)" \
  "$tmp/grp2.log" || fail "the default did not keep group: $(grep 'Raft log' "$tmp/grp2.log")"
got=$(consumed)
[ "$got" = "k1=v1 k2=v2 k3=v3 " ] || fail "group data after a restart with the default: '$got'"
produce
got=$(consumed)
[ "$got" = "k1=v1 k2=v2 k3=v3 k1=v1 k2=v2 k3=v3 " ] || fail "group data takes writes: '$got'"
stop
[ ! -e "$tmp/grp/wal" ] || ! ls "$tmp/grp/wal"/wal-* >/dev/null 2>&1 ||
  fail "a group data directory got a node-wide log"
ok "group data keeps group under the default; every acknowledged message read back in order"

# 3. The other kind is refused, changing nothing.
refused "$tmp/grp" "$tmp/grp3.log" --raft-log node
grep -q "holds per-replica Raft files (written with --raft-log group)" "$tmp/grp3.log" ||
  fail "--raft-log node on group data: $(tail -3 "$tmp/grp3.log")"
refused "$tmp/new" "$tmp/new2.log" --raft-log group
grep -q "wal holds the node-wide Raft log" "$tmp/new2.log" ||
  fail "--raft-log group on node data: $(tail -3 "$tmp/new2.log")"
start "$tmp/grp" "$tmp/grp4.log"
got=$(consumed)
[ "$got" = "k1=v1 k2=v2 k3=v3 k1=v1 k2=v2 k3=v3 " ] || fail "group data after the refusal: '$got'"
stop
ok "--raft-log node on group data and group on node data are refused; the data is untouched"
