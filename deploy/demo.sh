#!/usr/bin/env bash
# Sets everything up and runs the main job. Until the node daemon (cairnd)
# lands, the main job is shown in two parts: the durable partition log
# (append, read, a torn tail recovered) and a partition replicated by Raft
# across three node processes on loopback (produce, kill the leader, a new
# leader takes over, the old one comes back and catches up).
set -euo pipefail
cd "$(dirname "$0")/.."
bash deploy/setup.sh
bash deploy/build.sh release
bin=build/release/cairn-log
dir="${CAIRN_DEMO_DIR:-./data/demo-partition}"
rm -rf "$dir"
step() { printf '\n== %s\n' "$*"; }

step "append 5 batches of 4 records into $dir (small segments so it rolls)"
"$bin" append "$dir" --batches 5 --records 4 --value-size 20 --segment-bytes 512
ls -l "$dir"

step "dump the batches and their records"
"$bin" dump "$dir" --show-records

step "look up the first offset at or after a timestamp"
"$bin" lookup "$dir" --time 0

newest=$(ls "$dir"/*.log | sort | tail -1)
step "simulate a crash mid-write: cut 9 bytes off $(basename "$newest")"
echo "(these bytes were flushed, so the log also reports data lost below its checkpoint)"
truncate -s -9 "$newest"

step "open the log again: recovery keeps the intact prefix"
"$bin" verify "$dir"

step "appending goes on from the recovered end"
"$bin" append "$dir" --batches 1 --records 4 --value-size 20 --segment-bytes 512

# ---- part 2: one partition replicated across three nodes ----
drv=build/release/cairn-rgroup-driver
rdir="${CAIRN_DEMO_DIR:-./data}/demo-cluster"
rm -rf "$rdir"
mkdir -p "$rdir"
base=$((20000 + RANDOM % 20000))
replicas="1@127.0.0.1:$((base + 1)),2@127.0.0.1:$((base + 2)),3@127.0.0.1:$((base + 3))"
pids=()
cleanup() { for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null || true; done; }
trap cleanup EXIT
start_node() {
  local i=$1
  "$drv" --id "$i" --cluster "127.0.0.1:$((base + i))" --control "127.0.0.1:$((base + 10 + i))" \
    --dir "$rdir/node$i" --replicas "$replicas" >>"$rdir/node$i.log" 2>&1 &
  pids[$i]=$!
  disown "${pids[$i]}" # no job-control chatter when the demo kills it
}
# ask NODE COMMAND: one command on the node's control port, first answer line.
ask() {
  local line
  exec 9<>"/dev/tcp/127.0.0.1/$((base + 10 + $1))" || return 1
  printf '%s\n' "$2" >&9
  IFS= read -r -t 10 line <&9 || true
  exec 9>&-
  printf '%s\n' "$line"
}
leader() {
  for _ in $(seq 1 100); do
    for i in 1 2 3; do
      if [ -n "${pids[$i]:-}" ] && ask "$i" "leader 1" 2>/dev/null | grep -q " leader$"; then
        echo "$i"; return
      fi
    done
    sleep 0.2
  done
  echo "no leader" >&2; return 1
}

step "start three nodes replicating partition 1 (logs in $rdir)"
for i in 1 2 3; do start_node "$i"; done
sleep 1
l=$(leader)
echo "node $l leads"

step "produce 5 batches to the leader (acknowledged after a majority has them on disk)"
for t in 1 2 3 4 5; do ask "$l" "produce 1 $t 3 32"; done

step "kill -9 the leader (node $l)"
kill -9 "${pids[$l]}"; pids[$l]=""
nl=$(leader)
echo "node $nl leads now"
for t in 6 7 8; do ask "$nl" "produce 1 $t 3 32"; done

step "restart node $l: it catches up from its peers"
start_node "$l"
sleep 2
for i in 1 2 3; do echo "node $i: $(ask "$i" "hash 1")   (hash GROUP LOG-END CRC CATCHING-UP)"; done
echo
echo "demo done; the partition directory is $dir and the cluster's is $rdir"
