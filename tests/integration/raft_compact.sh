#!/usr/bin/env bash
# raft_compact.sh - a quiet partition group drops its Raft log
# (cluster/rgroup_compact.h), so the node-wide log keeps about one segment
# once the partitions are idle, with three real cairnd on loopback
# (--raft-log node, the default; --wal-segment-bytes 256 KiB so that a few
# MB make several segments):
#   1. 4 rounds of produces (3 partitions, rf 3, ~1.3 MB a round); after
#      each, every node's cairn_raft_log_entries drops to 0 and its log to
#      at most 2 segments (cairn_wal_segments, and the files on disk), with
#      segments deleted;
#   2. SIGKILLs at bad moments: every node right after a round was
#      acknowledged (compactions not started), every node ~2 s after one
#      (compactions running), and one node in the middle of a round;
#   3. after each restart and at the end, every acknowledged message is
#      read back from every partition once and in the order produced.
#   raft_compact.sh CAIRN CAIRND
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
. "$root/tests/lib/ports.sh"
cli=$1
cairnd=$2
export CAIRN_LOG_LEVEL=info
tmp=$(mktemp -d /tmp/cairn-compact-XXXXXX)
declare -A pids=()
cleanup() {
  local rc=$? i
  for i in "${!pids[@]}"; do kill -9 "${pids[$i]}" 2>/dev/null || true; done
  for i in "${!pids[@]}"; do wait "${pids[$i]}" 2>/dev/null || true; done
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
  for f in "$tmp"/node*.log; do [ -e "$f" ] && { echo "--- $f"; tail -5 "$f"; }; done
  exit 1
}
ok() {
  local f
  for f in "$tmp"/node*.log; do
    ! grep -q "Sanitizer" "$f" || fail "a sanitizer report in $f"
  done
  echo "ok   $*"
}

base=$(free_base_port 3)
voters="1@127.0.0.1:$((base + 1)),2@127.0.0.1:$((base + 11)),3@127.0.0.1:$((base + 21))"
boot="127.0.0.1:$base,127.0.0.1:$((base + 10)),127.0.0.1:$((base + 20))"
FLAGS=(--heartbeat-ms 100 --election-ms 1000 --node-timeout-ms 2000 --replace-delay-ms 60000
  --wal-segment-bytes 262144 --kafka-listen off)

start() {
  local i=$1 p=$((base + 10 * ($1 - 1)))
  "$cairnd" --node-id "$i" --data-dir "$tmp/d$i" --listen "127.0.0.1:$p" \
    --cluster-listen "127.0.0.1:$((p + 1))" --admin-listen "127.0.0.1:$((p + 2))" \
    --voters "$voters" "${FLAGS[@]}" >>"$tmp/node$i.log" 2>&1 &
  pids[$i]=$!
}
start_all() { local i; for i in 1 2 3; do start $i; done; }
kill9() { kill -9 "${pids[$1]}" 2>/dev/null || true; wait "${pids[$1]}" 2>/dev/null || true; unset "pids[$1]"; }
kill9_all() { local i; for i in "${!pids[@]}"; do kill9 "$i"; done; }
# metric I NAME: node I's value of NAME ("" when unreachable).
metric() {
  curl -sf --max-time 2 "http://127.0.0.1:$((base + 10 * ($1 - 1) + 2))/metrics" 2>/dev/null |
    awk -v m="$2" '$1 == m { print $2 }'
}
wait_serving() { # every partition takes a produce (retried by the CLI for up to 60 s)
  local p
  for p in 0 1 2; do
    printf 'probe\n' | "$cli" -b "$boot" --timeout-ms 60000 produce c -p "$p" >/dev/null ||
      fail "partition $p takes no produce after a restart"
    echo "probe" >>"$tmp/acked.$p"
  done
}
# produce_round R: ~1.3 MB into each partition, one CLI per partition at
# once; a message is acknowledged when its CLI exited 0 (it waits for all).
produce_round() {
  local r=$1 p pid rc=0
  local -a cp=()
  for p in 0 1 2; do
    seq 1 1500 | awk -v r="$r" -v p="$p" '{ printf "r%d-p%d-%05d-%0300d\n", r, p, $1, 0 }' \
      >"$tmp/round.$r.$p"
    "$cli" -b "$boot" --timeout-ms 60000 produce c -p "$p" -f "$tmp/round.$r.$p" >/dev/null &
    cp[$p]=$!
  done
  for p in 0 1 2; do
    if wait "${cp[$p]}"; then
      cat "$tmp/round.$r.$p" >>"$tmp/acked.$p"
    else
      rc=1
      cat "$tmp/round.$r.$p" >>"$tmp/maybe.$p"
    fi
  done
  return $rc
}
# check_all: every partition holds exactly its acknowledged messages (plus
# any of a failed produce), each once, in order.
check_all() {
  local p
  for p in 0 1 2; do
    "$cli" -b "$boot" --timeout-ms 30000 consume c -p "$p" -o beginning -e >"$tmp/got.$p" ||
      fail "consume partition $p"
    /usr/bin/python3 - "$tmp/acked.$p" "$tmp/got.$p" "$tmp/maybe.$p" "$p" <<'PY' || fail "partition $p: $1"
import sys
acked = [l for l in open(sys.argv[1]).read().split("\n") if l]
got = [l for l in open(sys.argv[2]).read().split("\n") if l]
try:
    maybe = set(l for l in open(sys.argv[3]).read().split("\n") if l)
except FileNotFoundError:
    maybe = set()
# Messages of a produce that failed may or may not be there; every other
# message must be exactly the acknowledged ones, in order, each once.
kept = [l for l in got if l not in maybe]
if kept != acked:
    for i, (a, b) in enumerate(zip(kept, acked)):
        if a != b:
            sys.exit("partition %s: at %d read %s, acknowledged %s" % (sys.argv[4], i, a[:20], b[:20]))
    sys.exit("partition %s: read %d messages, %d acknowledged" % (sys.argv[4], len(kept), len(acked)))
PY
  done
}
# compacted: on every node the Raft logs hold no entry and the node-wide log
# has at most 2 segments (the one being written and, at a roll, its
# predecessor), on disk too.
compacted() {
  local i e s f
  for i in 1 2 3; do
    e=$(metric "$i" cairn_raft_log_entries)
    s=$(metric "$i" cairn_wal_segments)
    f=$(ls "$tmp/d$i/wal" | grep -c '^wal-' || true)
    [ "$e" = 0 ] && [ -n "$s" ] && [ "$s" -le 2 ] && [ "$f" -le 2 ] || return 1
  done
}
wait_compacted() {
  local _ i
  for _ in $(seq 1 300); do compacted && return 0; sleep 0.1; done
  for i in 1 2 3; do
    echo "node $i: entries $(metric "$i" cairn_raft_log_entries), segments $(metric "$i" cairn_wal_segments), files: $(ls "$tmp/d$i/wal" | tr '\n' ' ')"
  done
  fail "$1: not compacted within 30 s"
}

start_all
for _ in $(seq 1 100); do
  "$cli" -b "$boot" topic create c --partitions 3 --replication-factor 3 >/dev/null 2>&1 && break
  sleep 0.2
done
wait_serving

# ---- 1. idle groups drop their logs; segments go ----
produce_round 1 || fail "round 1 not acknowledged"
segs_during=$(ls "$tmp/d1/wal" | grep -c '^wal-')
[ "$segs_during" -ge 3 ] || fail "round 1 made only $segs_during segments (want several)"
wait_compacted "after round 1"
deleted=$(metric 1 cairn_wal_segments_deleted_total)
[ "${deleted:-0}" -ge 1 ] || fail "no segment deleted on node 1"
comp=0
for i in 1 2 3; do comp=$((comp + $(metric "$i" cairn_raft_compactions_total))); done
[ "$comp" -ge 3 ] || fail "only $comp compaction barriers for 3 quiet groups"
check_all
ok "idle: every node's Raft logs empty, node 1's log down from $segs_during segments ($deleted deleted), $comp compactions"

# ---- 2. SIGKILL of every node right after a round was acknowledged ----
produce_round 2 || fail "round 2 not acknowledged"
kill9_all
start_all
wait_serving
check_all
wait_compacted "after round 2 and a restart"
ok "SIGKILL of every node before the compaction: every acknowledged message once, in order; compacted after"

# ---- 3. SIGKILL of every node while the groups compact ----
produce_round 3 || fail "round 3 not acknowledged"
sleep 2.3
kill9_all
start_all
wait_serving
check_all
wait_compacted "after round 3 and a restart"
ok "SIGKILL of every node during the compactions: every acknowledged message once, in order"

# ---- 4. SIGKILL of one node during a round, restart, compaction ----
produce_round 4 &
rp=$!
sleep 0.5
kill9 2
start 2
wait "$rp" || echo "     (round 4: a produce failed during the kill; its messages count as maybe)"
wait_serving
wait_compacted "after round 4"
check_all
kill9_all
start_all
wait_serving
check_all
ok "SIGKILL of a node during a round, then of every node: every acknowledged message once, in order"
