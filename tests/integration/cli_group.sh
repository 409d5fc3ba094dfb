#!/usr/bin/env bash
# `cairn consume -g` and `cairn group list|describe|reset-offsets|
# delete-offsets|delete` end to
# end, against a real 3-node cluster (deploy/cluster.sh): two group members
# share a topic's records with nothing read twice; describe shows the
# committed offsets with lag 0, list names the group; reset-offsets is
# refused while a member is active and works once the group is empty; a
# member then reads again from the reset offsets; a member SIGKILLed hands
# its partitions to the other within the session timeout with no record
# skipped; __cairn_offsets cannot be deleted; bad command lines exit 2.
#
# usage: cli_group.sh CAIRN CAIRND
# The processes it starts are stopped by PID whatever happens (trap);
# CAIRN_KEEP_TEST_DIR=1 keeps the directory (node logs) afterwards.
set -euo pipefail
CLI_TEST_TAG=cli-group
. "$(dirname "$0")/../lib/cli_test.sh"

step "help and bad command lines"
expect 0 "$cli" group --help
out_has "usage: cairn group list"
expect 2 "$cli" group frobnicate
err_has "unknown subcommand"
expect 2 "$cli" group describe
err_has "which group"
expect 2 "$cli" group reset-offsets g1
err_has "which topic"
expect 2 "$cli" group reset-offsets g1 --topic t
err_has "to where"
expect 2 "$cli" consume -g g1
err_has "which topics"
expect 2 "$cli" consume -g g1 -f '%z' jobs
err_has "not a conversion"

step "start a 3-node cluster"
start_cluster3

step "a topic of 6 partitions with 60 records"
expect 0 "$cli" topic create jobs --partitions 6 --replication-factor 3
for i in $(seq 1 60); do echo "k$i:job-$i"; done >"$dir/keyed"
seq 1 60 | sed 's/^/job-/' >"$dir/in"
expect 0 "$cli" produce jobs -K : <"$dir/keyed"

step "two members of g1 read everything once between them"
"$cli" consume -g g1 jobs >"$dir/m1.out" 2>"$dir/m1.err" &
m1=$!
"$cli" consume -g g1 jobs >"$dir/m2.out" 2>"$dir/m2.err" &
m2=$!
for _ in $(seq 1 300); do
  n=$(cat "$dir/m1.out" "$dir/m2.out" | wc -l)
  [ "$n" -ge 60 ] && break
  sleep 0.1
done
sleep 2 # both joined, auto commit done
kill -INT "$m1" "$m2"
wait "$m1" || fail "member 1 exited $?: $(cat "$dir/m1.err")"
wait "$m2" || fail "member 2 exited $?: $(cat "$dir/m2.err")"
cat "$dir/m1.out" "$dir/m2.out" | sort >"$dir/all"
sort "$dir/in" >"$dir/want"
diff "$dir/want" "$dir/all" >/dev/null || fail "the members did not read each record once: $(diff "$dir/want" "$dir/all" | head)"
echo "member 1 read $(wc -l <"$dir/m1.out"), member 2 read $(wc -l <"$dir/m2.out")"

step "describe: committed offsets at the end, lag 0; list names the group"
eventually 0 "$cli" group describe g1 --json
json_ok "$dir/out"
pyj "$dir/out" 'j["group"] == "g1" and len(j["offsets"]) == 6 and all(o["lag"] == 0 and o["committed"] == o["high_watermark"] for o in j["offsets"]) and sum(o["committed"] for o in j["offsets"]) == 60'
expect 0 "$cli" group describe g1
out_has "COMMITTED"
expect 0 "$cli" group list --json
pyj "$dir/out" 'any(g["group"] == "g1" and g["state"] == "empty" for g in j)'
expect 1 "$cli" group describe nobody
err_has "unknown group"

step "internal topics: users cannot delete them; the offsets topic has the configured replicas"
expect 1 "$cli" topic delete __cairn_offsets
err_has "internal topic"
expect 1 "$cli" topic delete __anything_internal
err_has "internal topic"
expect 0 "$cli" group list --json
pyj "$dir/out" 'any(g["group"] == "g1" for g in j)'
expect 0 "$cli" group describe g1 --json
pyj "$dir/out" 'sum(o["committed"] for o in j["offsets"]) == 60'
expect 0 "$cli" topic describe __cairn_offsets --json
pyj "$dir/out" 'j["replication_factor"] == 3 and all(len(p["replicas"]) == 3 for p in j["partitions"])'
expect 0 "$cairnd" --check-config --offsets-replication-factor 2
out_has "offsets_replication_factor = 2"
expect 2 "$cairnd" --check-config --offsets-replication-factor 8

step "reset-offsets: refused while a member is active, done once empty"
"$cli" consume -g g1 jobs >"$dir/m3.out" 2>"$dir/m3.err" &
m3=$!
for _ in $(seq 1 100); do
  "$cli" group describe g1 --json >"$dir/d.json" 2>/dev/null || true
  python3 -c 'import json,sys; sys.exit(0 if len(json.load(open(sys.argv[1]))["members"]) == 1 else 1)' "$dir/d.json" 2>/dev/null && break
  sleep 0.1
done
expect 1 "$cli" group reset-offsets g1 --topic jobs --to-earliest
err_has "has 1 members"
expect 1 "$cli" group delete-offsets g1 --topic jobs
err_has "offsets are deleted only while it is empty"
kill -INT "$m3"
wait "$m3" || fail "member 3 exited $?: $(cat "$dir/m3.err")"
[ ! -s "$dir/m3.out" ] || fail "member 3 read records already committed: $(head -3 "$dir/m3.out")"
expect 0 "$cli" group reset-offsets g1 --topic jobs --to-earliest
out_has "set to 0"
expect 0 "$cli" group reset-offsets g1 --topic jobs --partition 0 --to-offset 1
expect 0 "$cli" group describe g1 --json
pyj "$dir/out" 'sum(o["committed"] for o in j["offsets"]) == 1'

step "after the reset a member reads again from there"
expect 0 "$cli" consume -g g1 -n 59 jobs
[ "$(wc -l <"$dir/out")" -eq 59 ] || fail "read $(wc -l <"$dir/out") records after the reset, not 59"
expect 0 "$cli" consume -g g3 -n 5 -f 'p%p o%o %v|\n' jobs
[ "$(grep -cE '^p[0-9]+ o[0-9]+ job-[0-9]+[|]$' "$dir/out")" -ge 5 ] ||
  fail "consume -g -f: $(head -3 "$dir/out")"

step "reset-offsets: out of range refused unless --force; --dry-run, --shift-by, --to-datetime; group delete"
# g1 has read all 60 records: every committed offset is at the end.
p0() {
  expect 0 "$cli" group describe g1 --json
  python3 -c 'import json,sys; print([o["committed"] for o in json.load(open(sys.argv[1]))["offsets"] if o["topic"] == "jobs" and o["partition"] == 0][0])' "$dir/out"
}
end0=$(p0)
expect 1 "$cli" group reset-offsets g1 --topic jobs --partition 0 --to-offset 9999
err_has "offset 9999 is outside the partition's offsets 0..$end0"
err_has "force"
[ "$(p0)" -eq "$end0" ] || fail "a refused reset changed the offset to $(p0)"
expect 0 "$cli" group reset-offsets g1 --topic jobs --to-earliest --dry-run
out_has "would be set to 0"
out_has "dry run"
[ "$(p0)" -eq "$end0" ] || fail "--dry-run changed the offset to $(p0)"
expect 0 "$cli" group reset-offsets g1 --topic jobs --partition 0 --shift-by -2
[ "$(p0)" -eq $((end0 - 2)) ] || fail "--shift-by -2: $(p0), not $((end0 - 2))"
expect 1 "$cli" group reset-offsets g1 --topic jobs --partition 0 --shift-by 5
err_has "outside"
expect 0 "$cli" group reset-offsets g1 --topic jobs --partition 0 --to-datetime 2000-01-01T00:00:00Z
[ "$(p0)" -eq 0 ] || fail "--to-datetime 2000-01-01: $(p0), not 0"
expect 0 "$cli" group reset-offsets g1 --topic jobs --partition 0 --to-datetime "$(date -u -d '+1 hour' +%Y-%m-%dT%H:%M:%SZ)"
[ "$(p0)" -eq "$end0" ] || fail "--to-datetime an hour ahead: $(p0), not the end $end0"
expect 0 "$cli" group reset-offsets g1 --topic jobs --partition 0 --to-datetime -1h
[ "$(p0)" -eq 0 ] || fail "--to-datetime -1h: $(p0), not 0"
expect 2 "$cli" group reset-offsets g1 --topic jobs --to-datetime yesterday
err_has "not a time"
expect 2 "$cli" group reset-offsets g1 --topic jobs --to-earliest --to-latest
err_has "one of these at a time"
expect 0 "$cli" group reset-offsets g1 --topic jobs --partition 0 --to-offset 9999 --force
[ "$(p0)" -eq 9999 ] || fail "--force: $(p0), not 9999"
expect 2 "$cli" group delete-offsets g1
err_has "which topic"
expect 1 "$cli" group delete-offsets g1 --topic jobs --partition 6
err_has "partitions 0..5"
expect 1 "$cli" group delete-offsets nobody --topic jobs
err_has "unknown group"
expect 0 "$cli" group delete-offsets g1 --topic jobs --partition 0
out_has "deleted the committed offsets of g1 on jobs, partition 0"
expect 0 "$cli" group delete-offsets g1 --topic jobs --partition 1 --json
pyj "$dir/out" 'j == {"group": "g1", "topic": "jobs", "partitions": [1]}'
expect 0 "$cli" group describe g1 --json
pyj "$dir/out" 'sorted(o["partition"] for o in j["offsets"] if o["topic"] == "jobs" and o["committed"] >= 0) == [2, 3, 4, 5]'
expect 0 "$cli" group delete g1
out_has "deleted group g1"
eventually 1 "$cli" group describe g1
err_has "unknown group"
expect 1 "$cli" group delete nobody
err_has "unknown group"

step "-n is exact with -g and commits only what was printed; -e works with -g"
committed_sum() {
  expect 0 "$cli" group describe "$1" --json
  python3 -c 'import json,sys; print(sum(max(o["committed"], 0) for o in json.load(open(sys.argv[1]))["offsets"]))' "$dir/out"
}
expect 0 "$cli" consume -g g5 -n 1 jobs
cp "$dir/out" "$dir/g5.1"
[ "$(wc -l <"$dir/g5.1")" -eq 1 ] || fail "consume -g -n 1 printed $(wc -l <"$dir/g5.1") records"
[ "$(committed_sum g5)" -eq 1 ] || fail "consume -g -n 1 committed $(committed_sum g5) records, not 1"
expect 0 "$cli" consume -g g5 -n 10 jobs
cp "$dir/out" "$dir/g5.10"
[ "$(wc -l <"$dir/g5.10")" -eq 10 ] || fail "consume -g -n 10 printed $(wc -l <"$dir/g5.10") records"
[ "$(committed_sum g5)" -eq 11 ] || fail "after -n 1 and -n 10, $(committed_sum g5) committed, not 11"
expect 0 "$cli" consume -g g5 -e jobs
cp "$dir/out" "$dir/g5.e"
[ "$(wc -l <"$dir/g5.e")" -eq 49 ] || fail "consume -g -e printed $(wc -l <"$dir/g5.e") records, not the 49 left"
cat "$dir/g5.1" "$dir/g5.10" "$dir/g5.e" | sort >"$dir/g5.all"
cmp -s "$dir/want" "$dir/g5.all" || fail "-n 1, -n 10, -e did not read each record once: $(diff "$dir/want" "$dir/g5.all" | head -5)"
[ "$(committed_sum g5)" -eq 60 ] || fail "after -e, $(committed_sum g5) committed, not 60"
expect 0 "$cli" consume -g g5 -e jobs
[ ! -s "$dir/out" ] || fail "consume -g -e at the end printed $(wc -l <"$dir/out") records"
expect 0 "$cli" consume -g g6 -c 3 jobs
[ "$(wc -l <"$dir/out")" -eq 3 ] || fail "consume -g -c 3 printed $(wc -l <"$dir/out") records"

step "a member SIGKILLed: the other takes its partitions; nothing skipped"
"$cli" consume -g g2 jobs >"$dir/m4.out" 2>"$dir/m4.err" &
m4=$!
"$cli" consume -g g2 jobs >"$dir/m5.out" 2>"$dir/m5.err" &
m5=$!
for _ in $(seq 1 200); do
  "$cli" group describe g2 --json >"$dir/d.json" 2>/dev/null || true
  python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); sys.exit(0 if j["state"] == "stable" and len(j["members"]) == 2 and all(len(m["partitions"]) == 3 for m in j["members"]) else 1)' "$dir/d.json" 2>/dev/null && break
  sleep 0.1
done
pyj "$dir/d.json" 'len(j["members"]) == 2'
expect 1 "$cli" group delete g2
err_has "has 2 members"
kill -KILL "$m5"
wait "$m5" 2>/dev/null || true
killed=$SECONDS
for i in $(seq 61 120); do echo "k$i:job-$i"; done >"$dir/keyed2"
expect 0 "$cli" produce jobs -K : <"$dir/keyed2"
seq 1 120 | sed 's/^/job-/' | sort >"$dir/want2"
for _ in $(seq 1 300); do
  cat "$dir/m4.out" "$dir/m5.out" | sort -u >"$dir/all2"
  cmp -s "$dir/want2" "$dir/all2" && break
  sleep 0.1
done
cmp -s "$dir/want2" "$dir/all2" || fail "records skipped after the SIGKILL: $(comm -23 "$dir/want2" "$dir/all2" | head | tr '\n' ' ')"
echo "every record read $((SECONDS - killed)) s after the SIGKILL (session timeout 10 s); $(cat "$dir/m4.out" "$dir/m5.out" | sort | uniq -d | wc -l) read twice"
kill -INT "$m4"
wait "$m4" || fail "member 4 exited $?: $(cat "$dir/m4.err")"

step "stop the cluster"
bash "$cluster_sh" stop -d "$cdir" --timeout-s 30 >"$dir/stop.out"
echo "PASS"
