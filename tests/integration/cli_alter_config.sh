#!/usr/bin/env bash
# `cairn topic alter-config` on a real 3-node cluster (issue 17, finding
# 10): retention.bytes and retention.ms lowered on a running topic delete
# its old segments on every replica at their next retention pass, without
# a restart; what is left is a contiguous tail of what was acknowledged,
# in order, once. A node SIGKILLed and restarted keeps the new value (its
# metadata log and snapshot) and nothing acknowledged after it is lost.
# Refusals: a bad value, a key that cannot change, an unknown key, an
# internal topic, an unknown topic, with the reason and exit code 1; usage
# errors exit 2. --json and `topic describe` show the values.
# usage: cli_alter_config.sh CAIRN CAIRND
set -euo pipefail
CLI_TEST_TAG=alter-config
. "$(dirname "$0")/../lib/cli_test.sh"

step "a 3-node cluster whose replicas run retention every 200 ms; a topic of 4 KiB segments"
# deploy/cluster.sh starts the binary it is given: a wrapper adds the flag.
printf '#!/bin/sh\nexec %q "$@" --retention-check-ms 200\n' "$cairnd" >"$dir/cairnd-ret"
chmod +x "$dir/cairnd-ret"
cairnd="$dir/cairnd-ret"
start_cluster3
expect 0 "$cli" topic create ret --partitions 1 --replication-factor 3 --segment-bytes 4096

produce_range ret 0 1 200
every_replica ret 0 's == 0 and h == 200'
echo "200 records on every replica, log start 0"

step "refusals: clear reasons, exit 1; usage errors exit 2"
expect 1 "$cli" topic alter-config ret --set retention.ms=soon
err_has "retention.ms: 'soon' is not a whole number"
expect 1 "$cli" topic alter-config ret --set replication.factor=1
err_has "replication.factor cannot change"
expect 1 "$cli" topic alter-config ret --set segment.bytes=8192
err_has "segment.bytes cannot change on a running topic"
expect 1 "$cli" topic alter-config ret --set no.such.key=1
err_has "unknown config key 'no.such.key'"
expect 1 "$cli" topic alter-config ret --set retention.ms=1000 --delete retention.ms
err_has "named twice"
expect 1 "$cli" topic alter-config __cairn_offsets --set retention.ms=1000
err_has "internal topic"
expect 1 "$cli" topic alter-config nosuch --set retention.ms=1000
err_has "unknown topic"
expect 2 "$cli" topic alter-config ret
err_has "what to change"
expect 2 "$cli" topic alter-config ret --set retention.ms
err_has "KEY=VALUE"
expect 2 "$cli" topic alter-config ret --delete retention.ms=5
# nothing changed by any of them
expect 0 "$cli" topic describe ret --json
pyj "$dir/out" 'j["config"]["retention_bytes"] == 0 and j["config"]["retention_ms"] == 0'

step "retention.bytes lowered to 8 KiB: old segments go on every replica, no restart"
expect 0 "$cli" topic alter-config ret --set retention.bytes=8192 --json
json_ok "$dir/out"
pyj "$dir/out" 'j == {"topic": "ret", "set": {"retention.bytes": "8192"}, "deleted": []}'
for _ in $(seq 1 50); do
  "$cli" topic describe ret >"$dir/out" 2>&1 && grep -q "retention 8192 bytes per partition" "$dir/out" && break
  sleep 0.2
done
out_has "retention 8192 bytes per partition"
every_replica ret 0 's > 0 and h == 200 and h - s <= 160'
n=$(tail_ok ret 0 200)
echo "retention left the last ${n#* } records on every replica"

step "a node SIGKILLed and restarted keeps the value; acknowledged records survive"
kill -KILL "$(cat "$cdir/node2.pid")"
produce_range ret 0 201 240
bash "$cluster_sh" start -d "$cdir" --cairnd "$cairnd" --cli "$cli" --wait-s 90 >"$dir/restart.out" 2>&1 ||
  fail "restart: $(cat "$dir/restart.out")"
pids+=("$(cat "$cdir/node2.pid")")
describe_has ret 'j["config"]["retention_bytes"] == 8192' -b "127.0.0.1:$((base + 10))"
produce_range ret 0 241 280
every_replica ret 0 's > 0 and h == 280 and h - s <= 160'
n=$(tail_ok ret 0 280)
echo "after the restart: the last ${n#* } records, contiguous, on every replica"

step "retention.bytes back to its default; retention.ms lowered deletes by age"
expect 0 "$cli" topic alter-config ret --delete retention.bytes
out_has "retention.bytes back to its default"
describe_has ret 'j["config"]["retention_bytes"] == 0'
produce_range ret 0 281 400
every_replica ret 0 'h == 400'
read -r before _ _ < <(replica 1 ret 0)
sleep 2.5
expect 0 "$cli" topic alter-config ret --set retention.ms=2000
every_replica ret 0 "s > $before and h == 400"
n=$(tail_ok ret 0 400)
echo "retention.ms 2000: the last ${n#* } records left"
expect 0 "$cli" topic alter-config ret --set retention.ms=-1
describe_has ret 'j["config"]["retention_ms"] == 0'
echo "PASS"
