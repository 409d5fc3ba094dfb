#!/usr/bin/env bash
# Static group members of libcairn (`cairn consume -g --group-instance-id`,
# docs/consumer-groups.md "Static membership") on a 3-node cluster: a
# member SIGKILLed and started again under its instance id takes its
# partitions back in the same generation and goes on from the committed
# offsets (every record read, the other member never rebalanced); a
# second process under a live instance id takes over and the first exits
# with "another member now holds this group instance id"; a static member
# that exits does not leave the group, and `cairn group remove-member
# --group-instance-id` takes it out at once (the other member then reads
# every partition).
#
# usage: cli_group_static.sh CAIRN CAIRND
set -euo pipefail
CLI_TEST_TAG=cli-group-static
. "$(dirname "$0")/../lib/cli_test.sh"

# The members are this script's children: stopped by PID whatever happens
# (cleanup calls test_cleanup).
members=()
test_cleanup() {
  local p
  for p in "${members[@]}"; do kill -KILL "$p" 2>/dev/null; done
}

member() { # member NAME INSTANCE: `cairn consume -g sg` in the background; sets pid_NAME
  "$cli" consume -g sg --group-instance-id "$2" st >"$dir/$1.out" 2>"$dir/$1.err" &
  members+=($!)
  eval "pid_$1=$!"
}
desc() { "$cli" group describe sg --json >"$dir/d.json" 2>/dev/null; }
# until JSON check over the group's description holds (30 s)
until_desc() {
  local i
  for i in $(seq 1 150); do
    if desc && python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); sys.exit(0 if eval(sys.argv[2]) else 1)' "$dir/d.json" "$1" 2>/dev/null; then
      return 0
    fi
    sleep 0.2
  done
  fail "the group never got to '$1': $(cat "$dir/d.json" 2>/dev/null)"
}
instance_member() { python3 -c 'import json,sys; print([m["member_id"] for m in json.load(open(sys.argv[1]))["members"] if m["group_instance_id"] == sys.argv[2]][0])' "$dir/d.json" "$1"; }

step "help names the flag"
expect 0 "$cli" group --help
out_has "group-instance-id"

start_cluster3
step "a topic of 4 partitions with 40 records; static members i1 and i2"
expect 0 "$cli" topic create st --partitions 4 --replication-factor 3
for i in $(seq 1 40); do echo "k$i:r-$i"; done | "$cli" produce st -K : >/dev/null
member a i1
member b i2
until_desc 'j["state"] == "stable" and len(j["members"]) == 2 and all(len(m["partitions"]) == 2 for m in j["members"]) and sum(o["committed"] for o in j["offsets"]) == 40'
gen=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["generation"])' "$dir/d.json")
old_b=$(instance_member i2)
parts_b=$(python3 -c 'import json,sys; print(sorted(p["partition"] for m in json.load(open(sys.argv[1]))["members"] if m["group_instance_id"] == "i2" for p in m["partitions"]))' "$dir/d.json")
echo "generation $gen, i2 is $old_b holding $parts_b"
expect 0 "$cli" group describe sg
out_has "INSTANCE"

step "SIGKILL i2 and start it again: the same partitions, generation $gen, from the committed offsets"
kill -KILL "$pid_b"
wait "$pid_b" 2>/dev/null || true
for i in $(seq 41 80); do echo "k$i:r-$i"; done | "$cli" produce st -K : >/dev/null
member b2 i2
until_desc "j['generation'] == $gen and j['state'] == 'stable' and '$old_b' not in [m['member_id'] for m in j['members']] and len(j['members']) == 2 and sum(o['committed'] for o in j['offsets']) == 80"
python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); m=[m for m in j["members"] if m["group_instance_id"] == "i2"][0]; sys.exit(0 if sorted(p["partition"] for p in m["partitions"]) == eval(sys.argv[2]) else 1)' "$dir/d.json" "$parts_b" ||
  fail "i2 came back with other partitions: $(cat "$dir/d.json")"
cat "$dir/a.out" "$dir/b.out" "$dir/b2.out" | sort -u >"$dir/all"
seq 1 80 | sed 's/^/r-/' | sort >"$dir/want"
cmp -s "$dir/want" "$dir/all" || fail "records not read: $(comm -23 "$dir/want" "$dir/all" | head | tr '\n' ' ')"
# i1 went on in the same generation: it read every record of its own
# partitions once (a rebalance would not lose any, but would show in the
# generation above).
[ "$(sort "$dir/a.out" | uniq -d | wc -l)" -eq 0 ] || fail "i1 read records twice"

step "a second process under the live i2 takes over; the first exits fenced"
desc || fail "describe"
id_b2=$(instance_member i2)
member b3 i2
rc=0
for _ in $(seq 1 150); do
  kill -0 "$pid_b2" 2>/dev/null || break
  sleep 0.2
done
wait "$pid_b2" || rc=$?
[ "$rc" -ne 0 ] || fail "the replaced i2 exited 0"
grep -q "another member now holds this group instance id" "$dir/b2.err" ||
  fail "the replaced i2 did not say it was fenced: $(cat "$dir/b2.err")"
until_desc "j['generation'] == $gen and len(j['members']) == 2 and '$id_b2' not in [m['member_id'] for m in j['members']]"

step "a static member that exits does not leave: the group keeps it until its session expires"
kill -INT "$pid_a"
wait "$pid_a" || fail "i1 exited $?: $(cat "$dir/a.err")"
desc || fail "describe"
pyj "$dir/d.json" "len(j['members']) == 2 and j['generation'] == $gen"

step "group remove-member takes the gone i1 out now: the group rebalances, i2 holds every partition"
expect 2 "$cli" group remove-member sg
err_has "which member"
expect 1 "$cli" group remove-member sg --group-instance-id i9
err_has "i9"
expect 0 "$cli" group remove-member sg --group-instance-id i1
out_has "removed i1 from group sg"
# At once, not by i1's session timeout (10 s): the next description lacks it.
desc || fail "describe"
pyj "$dir/d.json" "[m['group_instance_id'] for m in j['members']] == ['i2']"
until_desc "j['state'] == 'stable' and j['generation'] > $gen and len(j['members']) == 1 and j['members'][0]['group_instance_id'] == 'i2' and len(j['members'][0]['partitions']) == 4"
for i in $(seq 81 100); do echo "k$i:r-$i"; done | "$cli" produce st -K : >/dev/null
until_desc "sum(o['committed'] for o in j['offsets']) == 100"
cat "$dir/a.out" "$dir/b.out" "$dir/b2.out" "$dir/b3.out" | sort -u >"$dir/all"
seq 1 100 | sed 's/^/r-/' | sort >"$dir/want"
cmp -s "$dir/want" "$dir/all" || fail "records not read: $(comm -23 "$dir/want" "$dir/all" | head | tr '\n' ' ')"
expect 1 "$cli" group remove-member sg --group-instance-id i1
echo "PASS"
