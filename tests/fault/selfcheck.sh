#!/usr/bin/env bash
# selfcheck.sh - checks the checker: runs the workload against 3 hosts,
# kills every node, deletes partition 0's replicas on all of them (data loss
# Cairn does not survive, by design), restarts them, and requires the
# workload to fail, reporting acknowledged values missing and consumer reads
# the final log does not hold, the Kafka producer's lost values among them;
# a DeleteRecords the faults file claims acknowledged, which never
# happened, reported as a log start below it; the Kafka group's commits,
# lost by deleting the __cairn_offsets replicas on every node too (the
# coordinator comes back without them), reported lost; and a commit
# claimed acknowledged (--claim-commit) above what the group holds,
# reported lost; and a faults line longer than 1 KiB read as one event.
#   tests/fault/selfcheck.sh [--bin-dir DIR]     (exit 77: skipped, no root/netns)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
bin_dir="$here/../../build/release"
[ "${1:-}" = --bin-dir ] && bin_dir=$2
# shellcheck source=tests/fault/hosts.sh
source "$here/hosts.sh"
if ! why=$(hosts_supported); then echo "checker self-check SKIPPED: $why"; exit 77; fi
out=$(mktemp -d /tmp/cairn-fault-selfcheck-XXXXXX)
HOSTS_DIR="$out/hosts"
HOSTS_CAIRND="$bin_dir/cairnd"
# raft_uv's per-replica files: deleting a replica's directory then deletes
# its Raft log too (the node-wide log, the default, would keep the group's
# entries in <data>/wal and rebuild the partition from them).
HOSTS_FLAGS="--raft-log group --heartbeat-ms 200 --election-ms 2000 --node-timeout-ms 5000 --replace-delay-ms 600000"
wl=""
finish() {
  local rc=$?
  [ -z "$wl" ] || kill -9 "$wl" 2>/dev/null || true
  hosts_down
  if ((rc == 0)); then rm -rf "$out"; else echo "checker self-check FAILED; kept $out"; fi
  exit "$rc"
}
trap finish EXIT
hosts_create 3
for i in 1 2 3; do hosts_start "$i"; done
: >"$out/workload.log"
# A DeleteRecords of partition 1 below offset 5 that the faults file says
# was acknowledged but no node ever received: its start stays 0, which the
# check must report as deleted records come back.
echo "1000 delete p1: ack target 5 code 0 low 5 node 1 [down: ] [cut: ]" >"$out/faults.txt"
# And a lostcache line longer than any line buffer (one names every
# replica it cut): it must be read as one event, of kind lostcache (a
# line read in pieces made its rest an event of a kind "of").
cuts=""
for ((k = 0; k < 40; k++)); do cuts+="durable offset $k, cut 233 of 1001 bytes (from 768); "; done
echo "2000 lostcache node 3 (random): $cuts [down: 3] [cut: ]" >>"$out/faults.txt"
hosts_client "$bin_dir/cairn-fault-workload" --nodes "$(hosts_client_list)" --out "$out" \
  --partitions 2 --time 20 --seed 9 --ready-file "$out/ready" --faults "$out/faults.txt" \
  --producers 4 --kafka "$(hosts_kafka_list)" --claim-commit 1000000000 \
  >"$out/workload.log" 2>&1 &
wl=$!
for ((k = 0; k < 120; k++)); do grep -q "topic .* ready" "$out/workload.log" && break; sleep 1; done
sleep 15
for i in 1 2 3; do hosts_kill "$i"; done
rm -rf "$HOSTS_DIR"/node*/partitions/fault-0.*
# And the group offsets topic on every node: the coordinator comes back
# without the commits it acknowledged, a real loss for the lost-commit check.
rm -rf "$HOSTS_DIR"/node*/partitions/__cairn_offsets-*
for i in 1 2 3; do hosts_start "$i"; done
touch "$out/ready"
st=0
wait "$wl" || st=$?
wl=""
tail -6 "$out/workload.log"
kafka_id=6 # --producers 4: 0-3 pick a partition per value, 4-5 one per partition, 6 is the Kafka one
if ((st == 1)) && grep -q "acknowledged value .* is missing from the final log" "$out/workload.log" &&
  grep -q "consumer [0-9] read .* but the final log has" "$out/history.json" &&
  grep -q "acknowledged value 'p$kafka_id s[0-9]* q0 .* is missing from the final log" "$out/history.json" &&
  grep -q "partition 1 starts at 0 but an acknowledged DeleteRecords moved its start to 5" "$out/history.json" &&
  grep -q "partition 0's committed offset is -\?[0-9]* after the run, below the 1000000000 the coordinator acknowledged: a commit was lost" "$out/history.json" &&
  [ "$(grep "^workload: after " "$out/workload.log" | awk '{print $3}' | sort -u)" = lostcache ] &&
  grep -q "partition 1's committed offset is -\?[0-9]* [a-z ]*, below the [0-9]* the coordinator acknowledged: a commit was lost" "$out/history.json"; then
  echo "checker self-check passed: the wiped partition's losses (the Kafka producer's too), the undone delete, the commits lost with the wiped offsets topic and the claimed one were reported"
else
  echo "checker self-check: the workload exited $st without reporting the losses" >&2
  exit 1
fi
