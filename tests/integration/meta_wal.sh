#!/usr/bin/env bash
# meta_wal.sh - the metadata group (the controller) on the node-wide Raft
# log (src/server/node.c node_open_wal, cluster/controller.c), with three
# real cairnd on loopback:
#   1. new data dirs: the metadata group has no raft_uv files (no
#      meta/metadata1, meta/metadata2, meta/open-*); the cluster forms,
#      makes topics and users, and after a SIGKILL of every node at once
#      and a restart every topic and user is there;
#   2. the controller leader is SIGKILLed again and again while topics are
#      being created one at a time (each restarted before the next kill):
#      every creation that was acknowledged (the CLI exited 0) is there
#      after a SIGKILL of every node and a restart;
#   3. upgrade: data dirs whose metadata group is in raft_uv's files, with
#      the partitions on the node's log (the layout main wrote before the
#      metadata group moved; built here by a first start with --raft-log
#      group before any topic exists) keep the metadata group there under
#      the default, take topics and messages, and read everything back
#      after a SIGKILL of every node.
#   meta_wal.sh CAIRN CAIRND
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
. "$root/tests/lib/ports.sh"
cli=$1
cairnd=$2
export CAIRN_LOG_LEVEL=info
tmp=$(mktemp -d /tmp/cairn-metawal-XXXXXX)
declare -A pids=()
cleanup() {
  local rc=$? i
  for i in "${!pids[@]}"; do kill -9 "${pids[$i]}" 2>/dev/null || true; done
  for i in "${!pids[@]}"; do wait "${pids[$i]}" 2>/dev/null || true; done
  if [ -n "${creator:-}" ]; then kill "$creator" 2>/dev/null || true; wait "$creator" 2>/dev/null || true; fi
  if [ "$rc" -ne 0 ]; then
    echo "kept $tmp"
  else
    rm -rf "$tmp"
  fi
  exit "$rc"
}
trap cleanup EXIT
fail() {
  echo "FAIL $*"
  local f
  for f in "$tmp"/*/node*.log; do [ -e "$f" ] && { echo "--- $f"; tail -5 "$f"; }; done
  exit 1
}
ok() {
  local f
  for f in "$tmp"/*/node*.log; do
    ! grep -q "Sanitizer" "$f" || fail "a sanitizer report in $f"
  done
  echo "ok   $*"
}

base=$(free_base_port 3)
voters="1@127.0.0.1:$((base + 1)),2@127.0.0.1:$((base + 11)),3@127.0.0.1:$((base + 21))"
boot="127.0.0.1:$base,127.0.0.1:$((base + 10)),127.0.0.1:$((base + 20))"
FAST=(--heartbeat-ms 100 --election-ms 1000 --node-timeout-ms 2000 --replace-delay-ms 60000)

# start CASE I [FLAGS...]: node I of the cluster in $tmp/CASE.
start() {
  local c=$1 i=$2 p=$((base + 10 * ($2 - 1)))
  shift 2
  "$cairnd" --node-id "$i" --data-dir "$tmp/$c/d$i" --listen "127.0.0.1:$p" \
    --cluster-listen "127.0.0.1:$((p + 1))" --admin-listen "127.0.0.1:$((p + 2))" \
    --kafka-listen off --voters "$voters" "${FAST[@]}" "$@" >>"$tmp/$c/node$i.log" 2>&1 &
  pids[$i]=$!
}
kill9() { kill -9 "${pids[$1]}" 2>/dev/null || true; wait "${pids[$1]}" 2>/dev/null || true; unset "pids[$1]"; }
kill9_all() {
  local i
  for i in "${!pids[@]}"; do kill -9 "${pids[$i]}" 2>/dev/null || true; done
  for i in "${!pids[@]}"; do wait "${pids[$i]}" 2>/dev/null || true; done
  pids=()
}
term_all() {
  local i
  for i in "${!pids[@]}"; do kill "${pids[$i]}" 2>/dev/null || true; done
  for i in "${!pids[@]}"; do wait "${pids[$i]}" || fail "node $i exited $? on SIGTERM"; done
  pids=()
}
# status I: cluster status as node I sees it, as JSON ("" if unreachable).
status() { "$cli" -b "127.0.0.1:$((base + 10 * ($1 - 1)))" --timeout-ms 2000 --json cluster status 2>/dev/null || true; }
# formed: every running node knows a controller leader and lists 3 alive nodes.
formed() {
  local i s
  for i in "${!pids[@]}"; do
    kill -0 "${pids[$i]}" 2>/dev/null || fail "node $i exited"
    s=$(status "$i")
    [ -n "$s" ] || return 1
    /usr/bin/python3 -c '
import json, sys
d = json.loads(sys.argv[1])
alive = [n for n in d["nodes"] if n["state"] == "alive"]
sys.exit(0 if d["controller_id"] != 0 and len(alive) == 3 else 1)' "$s" || return 1
  done
}
wait_formed() {
  local _
  for _ in $(seq 1 600); do formed && return 0; sleep 0.1; done
  fail "the cluster did not form within 60 s"
}
controller_id() { /usr/bin/python3 -c 'import json,sys; print(json.loads(sys.argv[1])["controller_id"])' "$(status "$1")" 2>/dev/null || echo 0; }
# topics I: the topic names node I lists, sorted, one a line.
topics() {
  "$cli" -b "127.0.0.1:$((base + 10 * ($1 - 1)))" --json topic list |
    /usr/bin/python3 -c 'import json,sys; print("\n".join(sorted(t["name"] for t in json.load(sys.stdin)["topics"])))'
}
users() {
  CAIRN_PASSWORD=admin-pw "$cli" -b "127.0.0.1:$((base + 10 * ($1 - 1)))" --user admin user list |
    awk '{print $1}' | grep -v '^NAME$' | sort
}
mkuser() {
  local u=$1 _
  for _ in $(seq 1 50); do
    if [ "$u" = admin ]; then
      printf 'admin-pw\n' | "$cli" -b "$boot" user create admin >/dev/null 2>&1 && return 0
    else
      printf '%s-pw\n' "$u" | CAIRN_PASSWORD=admin-pw "$cli" -b "$boot" --user admin user create "$u" \
        >/dev/null 2>&1 && return 0
    fi
    sleep 0.2
  done
  fail "user create $u"
}
mktopic() {
  local _
  for _ in $(seq 1 50); do
    "$cli" -b "$boot" topic create "$1" --partitions "$2" --replication-factor "$3" >/dev/null 2>&1 && return 0
    sleep 0.2
  done
  fail "topic create $1"
}
# same_everywhere WHAT WANT: every node's `WHAT I` equals WANT (retried 10 s).
same_everywhere() {
  local what=$1 want=$2 i got _
  for i in 1 2 3; do
    for _ in $(seq 1 50); do
      got=$($what "$i" 2>/dev/null || true)
      [ "$got" = "$want" ] && break
      sleep 0.2
    done
    [ "$got" = "$want" ] || fail "node $i lists $what: $(echo $got) (want $(echo $want))"
  done
}
no_uv_meta() {
  local i
  for i in 1 2 3; do
    if ls "$tmp/$1/d$i/meta"/metadata[12] "$tmp/$1/d$i/meta"/open-* >/dev/null 2>&1; then
      fail "node $i's metadata group has raft_uv files: $(ls "$tmp/$1/d$i/meta")"
    fi
    grep -q "metadata replica $i open in .* on the node's Raft log" "$tmp/$1/node$i.log" ||
      fail "node $i: no 'on the node's Raft log' line"
    ls "$tmp/$1/d$i/meta/wal"/wal-* >/dev/null 2>&1 ||
      fail "node $i: no metadata log in meta/wal: $(ls "$tmp/$1/d$i/meta")"
  done
}

# ---- 1. new data dirs: no raft_uv files; SIGKILL of every node ----
mkdir -p "$tmp/new"
for i in 1 2 3; do start new $i; done
wait_formed
mkuser admin
for u in alice bob; do mkuser $u; done
for t in a b c d e; do mktopic "$t" 2 3; done
printf 'm1\nm2\nm3\n' | "$cli" -b "$boot" produce a >/dev/null
no_uv_meta new
kill9_all
for i in 1 2 3; do start new $i; done
wait_formed
same_everywhere topics "$(printf '%s\n' a b c d e)"
same_everywhere users "$(printf '%s\n' admin alice bob)"
got=$("$cli" -b "$boot" consume a -o beginning -e -f '%v\n' | sort | tr '\n' ' ')
[ "$got" = "m1 m2 m3 " ] || fail "topic a after SIGKILL of every node: '$got'"
no_uv_meta new
ok "new data dirs: no raft_uv files for the metadata group; topics, users and messages survive a SIGKILL of every node"

# ---- 2. SIGKILL of the controller leader while topics are created ----
: >"$tmp/new/acked"
rm -f "$tmp/new/stop"
(
  n=0
  while [ ! -e "$tmp/new/stop" ]; do
    n=$((n + 1))
    if "$cli" -b "$boot" --timeout-ms 4000 topic create "c$n" --partitions 1 --replication-factor 1 \
      >/dev/null 2>&1; then
      echo "c$n" >>"$tmp/new/acked"
    fi
  done
) &
creator=$!
kills=0
for _ in $(seq 1 6); do
  sleep 1.5
  lid=0
  for _ in $(seq 1 100); do
    for i in 1 2 3; do lid=$(controller_id $i); [ "$lid" != 0 ] && break; done
    [ "$lid" != 0 ] && break
    sleep 0.1
  done
  [ "$lid" != 0 ] || fail "no controller leader known"
  kill9 "$lid"
  kills=$((kills + 1))
  sleep 0.5
  start new "$lid"
  wait_formed
done
touch "$tmp/new/stop"
wait "$creator" || true
creator=""
nacked=$(wc -l <"$tmp/new/acked")
[ "$nacked" -ge 5 ] || fail "only $nacked topic creations acknowledged during the kills"
kill9_all
for i in 1 2 3; do start new $i; done
wait_formed
# A restarted follower applies what follows its snapshot once the leader
# tells it the commit index (raft 0.15 starts at the snapshot's), so its
# list may lag the leader's for a moment after the cluster formed (seen
# once under CI's parallel load: c14 and c15 missing on node 1 at 0.1 s,
# there on every node when the same data directories were started again).
# Missing for 30 s is a loss.
for i in 1 2 3; do
  for _ in $(seq 1 150); do
    have=$(topics $i)
    missing=$(sort "$tmp/new/acked" | comm -23 - <(echo "$have" | sort))
    [ -z "$missing" ] && break
    sleep 0.2
  done
  [ -z "$missing" ] || fail "node $i lost acknowledged topic creations: $(echo $missing)"
done
ok "$kills SIGKILLs of the controller leader during creations: all $nacked acknowledged topics there after a SIGKILL of every node"
kill9_all

# ---- 3. upgrade: the metadata group in raft_uv's files ----
mkdir -p "$tmp/old"
for i in 1 2 3; do start old $i --raft-log group; done
wait_formed
mkuser admin
mkuser carol
term_all
for i in 1 2 3; do
  ls "$tmp/old/d$i/meta"/metadata[12] >/dev/null 2>&1 || fail "node $i: no raft_uv metadata files"
  [ ! -e "$tmp/old/d$i/wal" ] || fail "node $i: --raft-log group made a node-wide log"
done
for i in 1 2 3; do start old $i; done
wait_formed
for i in 1 2 3; do
  grep -q "metadata group: raft_uv files in .*/meta (kept" "$tmp/old/node$i.log" ||
    fail "node $i did not keep the metadata group in raft_uv's files"
done
mktopic u 2 3
printf 'u1\nu2\n' | "$cli" -b "$boot" produce u >/dev/null
kill9_all
for i in 1 2 3; do start old $i; done
wait_formed
same_everywhere topics "u"
same_everywhere users "$(printf '%s\n' admin carol)"
got=$("$cli" -b "$boot" consume u -o beginning -e -f '%v\n' | sort | tr '\n' ' ')
[ "$got" = "u1 u2 " ] || fail "topic u after the upgrade and a SIGKILL of every node: '$got'"
for i in 1 2 3; do
  ls "$tmp/old/d$i/wal"/wal-* >/dev/null 2>&1 || fail "node $i: the partitions are not on the node's log"
  ls "$tmp/old/d$i/partitions"/*/raft/metadata* >/dev/null 2>&1 &&
    fail "node $i: partitions in raft_uv files"
done
ok "data dirs with the metadata group in raft_uv's files keep it there and read everything back"
term_all
