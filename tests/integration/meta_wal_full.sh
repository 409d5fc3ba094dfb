#!/usr/bin/env bash
# meta_wal_full.sh - a node whose metadata group's Raft log (meta/wal, a
# node-wide log of its own: src/server/node.c node_open_wal) fails a write
# (cluster/controller.h, "Failed write"), with a real single-node cairnd:
# <data>/meta/wal is a small tmpfs that a filler file then fills, and topics are created one at a time until a write to the
# log fails. The metadata group must not go on over the dead log: the node
# stops by itself with exit 2, saying so; once the space is back a restart
# holds every topic whose creation was acknowledged, and takes new ones.
# Needs root for mount(2); skips otherwise.
#   meta_wal_full.sh CAIRN CAIRND
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
. "$root/tests/lib/ports.sh"
cli=$1
cairnd=$2
export CAIRN_LOG_LEVEL=info
tmp=$(mktemp -d /tmp/cairn-metawalfull-XXXXXX)
pid=""
mounted=0
cleanup() {
  local rc=$?
  if [ -n "$pid" ]; then kill -9 "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; fi
  if [ "$mounted" = 1 ]; then umount -l "$tmp/d/meta/wal" || true; fi
  if [ "$rc" -ne 0 ]; then
    echo "kept $tmp"
  else
    rm -rf "$tmp"
  fi
  exit "$rc"
}
trap cleanup EXIT
fail() { echo "FAIL $*"; tail -20 "$tmp/node.log"; exit 1; }
ok() {
  ! grep -q "Sanitizer" "$tmp/node.log" || fail "a sanitizer report in $tmp/node.log"
  echo "ok   $*"
}

mkdir -p "$tmp/d/meta/wal"
if ! mount -t tmpfs -o size=1m,mode=0755 tmpfs "$tmp/d/meta/wal" 2>"$tmp/mount.err"; then
  echo "cannot mount a tmpfs ($(cat "$tmp/mount.err")): skipping (needs root)"
  exit 0
fi
mounted=1
port=$(free_base_port 1)
b="127.0.0.1:$port"
start() {
  "$cairnd" --node-id 1 --data-dir "$tmp/d" --listen "$b" --cluster-listen "127.0.0.1:$((port + 1))" \
    --admin-listen "127.0.0.1:$((port + 2))" --kafka-listen off >>"$tmp/node.log" 2>&1 &
  pid=$!
  for _ in $(seq 1 300); do
    "$cli" -b "$b" --timeout-ms 1000 topic list >/dev/null 2>&1 && return 0
    kill -0 "$pid" 2>/dev/null || fail "cairnd exited at start"
    sleep 0.1
  done
  fail "cairnd did not serve within 30 s"
}
create() { "$cli" -b "$b" --timeout-ms 3000 topic create "$1" --partitions 1 --replication-factor 1 >/dev/null 2>&1; }

start
: >"$tmp/acked"
for n in 1 2 3; do
  create "t$n" || fail "topic create t$n"
  echo "t$n" >>"$tmp/acked"
done
grep -q "metadata replica 1 open in .* on the node's Raft log" "$tmp/node.log" ||
  fail "the metadata group is not on the node's log"
# Fill the log's filesystem: from now on the log's next page cannot be had.
dd if=/dev/zero of="$tmp/d/meta/wal/filler" bs=4096 2>/dev/null || true
code=""
for n in $(seq 4 400); do
  if create "t$n"; then echo "t$n" >>"$tmp/acked"; fi
  if ! kill -0 "$pid" 2>/dev/null; then
    rc=0
    wait "$pid" || rc=$?
    code=$rc
    pid=""
    break
  fi
done
[ -n "$code" ] || fail "cairnd still runs after 400 topic creations on a full log"
[ "$code" = 2 ] || fail "cairnd exited $code, not 2"
grep -q "the metadata group's write to the node's Raft log failed" "$tmp/node.log" ||
  fail "no line saying the metadata group's write failed"
ok "a full node-wide log stops the node (exit 2) after $(wc -l <"$tmp/acked") acknowledged creations"

rm -f "$tmp/d/meta/wal/filler"
start
have=$("$cli" -b "$b" --json topic list |
  /usr/bin/python3 -c 'import json,sys; print("\n".join(sorted(t["name"] for t in json.load(sys.stdin)["topics"])))')
missing=$(sort "$tmp/acked" | comm -23 - <(echo "$have" | sort))
[ -z "$missing" ] || fail "acknowledged topics lost: $(echo $missing)"
create after || fail "no topic made after the restart"
kill "$pid"
wait "$pid" || fail "cairnd exited $? on SIGTERM after the restart"
pid=""
ok "after the space is back, a restart holds all $(wc -l <"$tmp/acked") acknowledged topics and makes new ones"
