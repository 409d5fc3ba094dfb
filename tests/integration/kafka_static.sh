#!/usr/bin/env bash
# kafka_static.sh - static group membership (Kafka's group.instance.id,
# KIP-345) with confluent-kafka (librdkafka) on a 3-node cluster
# (docs/kafka.md, docs/consumer-groups.md): two static consumers share a
# topic; one is SIGKILLed and started again under the same instance id:
# it gets its partitions back in the same generation while the other sees
# no rebalance, and every message produced after is read once; a second
# process started under a live instance id takes over and the first is
# fenced (FENCED_INSTANCE_ID: a fatal error for librdkafka); DescribeGroups
# v4 (a raw request) names the instance ids; after a
# SIGKILL of the group's coordinator node, the instance restarts once more
# into the same partitions and generation at the new coordinator (which
# read the instance ids from the group's record). `cairn group describe`
# shows the instance ids; a raw LeaveGroup v3 removes i-b by its instance
# id alone (an unknown instance gets UNKNOWN_MEMBER_ID) and i-a goes on alone.
#
# Usage: kafka_static.sh CAIRN CAIRND
set -euo pipefail
CLI_TEST_TAG=kafkastatic
. "$(dirname "$0")/../lib/cli_test.sh"
py=/usr/bin/python3 # Debian's, where python3-confluent-kafka is installed
$py -c 'import confluent_kafka' 2>/dev/null ||
  fail "python3-confluent-kafka is not installed (deploy/setup.sh)"

# The consumers are this script's children: stopped by PID whatever happens
# (cleanup calls test_cleanup).
members=()
test_cleanup() {
  local p
  for p in "${members[@]}"; do kill -KILL "$p" 2>/dev/null; done
}

step "start a 3-node cluster, a topic of 4 partitions"
start_cluster3
all="127.0.0.1:$((base + 3)),127.0.0.1:$((base + 13)),127.0.0.1:$((base + 23))"
expect 0 "$cli" topic create st --partitions 4 --replication-factor 3

# One static consumer: logs its assignments, messages and errors as JSON
# lines; stops at a fatal error or when $dir/stop exists.
cat >"$dir/member.py" <<'PY'
import json, os, sys, time
from confluent_kafka import Consumer
bs, instance, out, stop = sys.argv[1:5]
log = open(out, "a", buffering=1)
def emit(**kw):
    kw["t"] = time.time()
    log.write(json.dumps(kw) + "\n")
def on_error(e):
    emit(ev="error", name=e.name(), fatal=e.fatal(), text=e.str())
c = Consumer({"bootstrap.servers": bs, "group.id": "sg", "group.instance.id": instance,
              "session.timeout.ms": 60000, "heartbeat.interval.ms": 300,
              "auto.offset.reset": "earliest", "enable.auto.commit": False,
              "partition.assignment.strategy": "range", "error_cb": on_error})
c.subscribe(["st"],
            on_assign=lambda c, ps: emit(ev="assign", parts=sorted(p.partition for p in ps)),
            on_revoke=lambda c, ps: emit(ev="revoke", parts=sorted(p.partition for p in ps)))
while not os.path.exists(stop):
    m = c.poll(0.2)
    if m is None:
        continue
    if m.error():
        emit(ev="error", name=m.error().name(), fatal=m.error().fatal(), text=m.error().str())
        if m.error().fatal():
            break
        continue
    emit(ev="msg", part=m.partition(), off=m.offset(), value=m.value().decode())
emit(ev="exit")
c.close()
PY
# One raw Kafka request (what no client here sends: DescribeGroups v4,
# LeaveGroup v3) on a new connection, and a reader of its answer.
cat >"$dir/kraw.py" <<'PY'
import socket, struct

def kstr(v):
    return struct.pack(">h", -1) if v is None else struct.pack(">h", len(v)) + v.encode()

class Reader:
    def __init__(self, data):
        self.data, self.at = data, 0
    def take(self, n):
        self.at += n
        return self.data[self.at - n:self.at]
    def i16(self):
        return struct.unpack(">h", self.take(2))[0]
    def i32(self):
        return struct.unpack(">i", self.take(4))[0]
    def string(self):
        n = self.i16()
        return None if n < 0 else self.take(n).decode()
    def blob(self):
        return self.take(max(self.i32(), 0))

def call(addr, key, version, corr, body):
    host, port = addr.rsplit(":", 1)
    s = socket.create_connection((host, int(port)), timeout=10)
    req = struct.pack(">hhih", key, version, corr, 1) + b"c" + body
    s.sendall(struct.pack(">i", len(req)) + req)
    def read(n):
        b = b""
        while len(b) < n:
            chunk = s.recv(n - len(b))
            assert chunk, "closed"
            b += chunk
        return b
    data = read(struct.unpack(">i", read(4))[0])
    s.close()
    return Reader(data)
PY
member() { # member NAME INSTANCE: starts one in the background, logging to $dir/NAME.log
  $py "$dir/member.py" "$all" "$2" "$dir/$1.log" "$dir/stop" >"$dir/$1.out" 2>&1 &
  members+=($!)
  eval "pid_$1=$!"
}
# events NAME KIND: the JSON lines of that kind in NAME's log
events() { grep "\"ev\": \"$2\"" "$dir/$1.log" 2>/dev/null || true; }
last_parts() { events "$1" assign | tail -1 | $py -c 'import json,sys; print(json.loads(sys.stdin.read())["parts"])'; }
# wait_for SECONDS CONDITION...: until the shell condition holds
wait_for() {
  local s=$1 i
  shift
  for i in $(seq 1 $((s * 5))); do
    if eval "$*"; then return 0; fi
    sleep 0.2
  done
  return 1
}
# restart OLD NEW SECONDS: SIGKILLs member OLD's process (no LeaveGroup),
# starts NEW under i-b, and checks it gets i-b's partitions back.
restart() {
  eval "kill -KILL \"\$pid_$1\"; wait \"\$pid_$1\" 2>/dev/null || true"
  member "$2" i-b
  wait_for "$3" "[ -n \"\$(events $2 assign)\" ]" || fail "i-b not assigned again: $(cat "$dir/$2.log" "$dir/$2.out" 2>/dev/null)"
  [ "$(last_parts "$2")" = "$parts_b" ] || fail "i-b came back with $(last_parts "$2"), held $parts_b"
}
describe() { "$cli" group describe sg --json >"$dir/desc.json" 2>"$dir/desc.err" && cat "$dir/desc.json"; }

step "two static consumers (instances i-a, i-b) share the topic"
member a i-a
member b i-b
wait_for 60 '[ -n "$(events a assign)" ] && [ -n "$(events b assign)" ]' ||
  fail "not both assigned: $(cat "$dir/a.log" "$dir/b.log" "$dir/a.out" "$dir/b.out" 2>/dev/null)"
# The first to join may form a generation alone and give up half its
# partitions when the other joins: the baseline is once both hold two.
split() { $py -c 'import sys; a, b = eval(sys.argv[1]), eval(sys.argv[2]); sys.exit(0 if len(a) == 2 and sorted(a + b) == [0, 1, 2, 3] else 1)' "$(last_parts a)" "$(last_parts b)"; }
wait_for 30 'split && describe | $py -c "import json,sys; j=json.load(sys.stdin); sys.exit(0 if j[\"state\"] == \"stable\" and len(j[\"members\"]) == 2 else 1)"' ||
  fail "the group is not stable with 2 members of 2 partitions: $(cat "$dir/desc.json" "$dir/desc.err" "$dir/a.log" "$dir/b.log")"
sleep 1 # an assignment still on its way would show now
parts_a=$(last_parts a)
parts_b=$(last_parts b)
gen=$(describe | $py -c 'import json,sys; print(json.load(sys.stdin)["generation"])')
old_b=$(describe | $py -c 'import json,sys; print([m["member_id"] for m in json.load(sys.stdin)["members"] if m["group_instance_id"] == "i-b"][0])')
assigns_a=$(events a assign | wc -l)
revokes_a=$(events a revoke | wc -l)
echo "generation $gen: i-a holds $parts_a, i-b ($old_b) holds $parts_b"
[ "$parts_a" != "[]" ] && [ "$parts_b" != "[]" ] || fail "a member holds nothing: $parts_a $parts_b"
expect 0 "$cli" group describe sg
out_has "INSTANCE"
out_has "i-b"

step "SIGKILL i-b's process (no LeaveGroup) and start it again: same partitions, same generation, no rebalance for i-a"
restart b b2 60
sleep 2 # a rebalance, had one started, would reach i-a by now (heartbeats every 300 ms)
[ "$(events a revoke | wc -l)" -eq "$revokes_a" ] || fail "i-a saw a revoke: $(events a revoke)"
[ "$(events a assign | wc -l)" -eq "$assigns_a" ] || fail "i-a was assigned again: $(events a assign)"
describe >/dev/null || fail "describe: $(cat "$dir/desc.err")"
pyj "$dir/desc.json" "j['generation'] == $gen and j['state'] == 'stable' and len(j['members']) == 2"
pyj "$dir/desc.json" "sorted(m['group_instance_id'] for m in j['members']) == ['i-a', 'i-b']"
pyj "$dir/desc.json" "'$old_b' not in [m['member_id'] for m in j['members']]"

step "produce 40 keyed messages: the two read each exactly once, each from its own partitions"
timeout 60 $py - "$all" <<'PY' || fail "produce"
import sys
from confluent_kafka import Producer
acked = []
p = Producer({"bootstrap.servers": sys.argv[1], "acks": "all"})
for i in range(40):
    p.produce("st", key=b"k%d" % i, value=b"v%d" % i,
              on_delivery=lambda e, m: acked.append(m) if e is None else None)
assert p.flush(30) == 0 and len(acked) == 40, "acknowledged %d of 40" % len(acked)
PY
wait_for 30 '[ $(( $(events a msg | wc -l) + $(events b2 msg | wc -l) )) -ge 40 ]' ||
  fail "read $(events a msg | wc -l) + $(events b2 msg | wc -l) of 40"
$py - "$dir/a.log" "$dir/b2.log" "$parts_a" "$parts_b" <<'PY' || fail "what the consumers read"
import json, sys
seen = []
for log, parts in ((sys.argv[1], json.loads(sys.argv[3])), (sys.argv[2], json.loads(sys.argv[4]))):
    for line in open(log):
        e = json.loads(line)
        if e["ev"] == "msg":
            assert e["part"] in parts, "%s read partition %d, holds %s" % (log, e["part"], parts)
            seen.append(e["value"])
assert sorted(seen) == sorted("v%d" % i for i in range(40)), "read %s" % sorted(seen)
print("40 messages read once each")
PY

step "a second process under the live instance i-b takes over; the first is fenced"
member b3 i-b
wait_for 60 '[ -n "$(events b3 assign)" ]' || fail "the new i-b was not assigned: $(cat "$dir/b3.log" "$dir/b3.out" 2>/dev/null)"
[ "$(last_parts b3)" = "$parts_b" ] || fail "the new i-b got $(last_parts b3), i-b held $parts_b"
# librdkafka hands a fatal error to error_cb as _FATAL, its cause in the text.
wait_for 30 'events b2 error | grep -q "_FATAL\|\"fatal\": true"' ||
  fail "the replaced i-b was not fenced: $(cat "$dir/b2.log")"
events b2 error | grep -qi "fenced" || fail "the replaced i-b's error does not say fenced: $(events b2 error)"
[ "$(events a revoke | wc -l)" -eq "$revokes_a" ] || fail "i-a saw a revoke: $(events a revoke)"
describe >/dev/null || fail "describe: $(cat "$dir/desc.err")"
pyj "$dir/desc.json" "j['generation'] == $gen and len(j['members']) == 2"

step "Kafka's DescribeGroups v4 at the coordinator names each member's group_instance_id"
coord=$($py -c 'import json,sys; print(json.load(open(sys.argv[1]))["coordinator"])' "$dir/desc.json")
timeout 30 $py - "127.0.0.1:$((base + 10 * (coord - 1) + 3))" "$dir" <<'PY' || fail "DescribeGroups v4"
import struct, sys
sys.path.insert(0, sys.argv[2])
from kraw import call, kstr
r = call(sys.argv[1], 15, 4, 7, struct.pack(">i", 1) + kstr("sg") + b"\0")  # no operations
assert r.i32() == 7, "correlation id"
r.i32()  # throttle_time_ms
assert r.i32() == 1, "one group"
err, group, state, ptype, proto = r.i16(), r.string(), r.string(), r.string(), r.string()
assert (err, group, state, ptype) == (0, "sg", "Stable", "consumer"), (err, group, state, ptype)
instances = []
for _ in range(r.i32()):
    member, instance, client, host = r.string(), r.string(), r.string(), r.string()
    r.blob(), r.blob()
    instances.append(instance)
print("DescribeGroups v4: members' instance ids %s" % sorted(instances))
assert sorted(instances) == ["i-a", "i-b"], instances
PY

step "SIGKILL the group's coordinator node, then restart i-b: the new coordinator knows the instance (its record), no rebalance"
b3_id=$($py -c 'import json,sys; print([m["member_id"] for m in json.load(open(sys.argv[1]))["members"] if m["group_instance_id"] == "i-b"][0])' "$dir/desc.json")
kill -KILL "$(cat "$cdir/node$coord.pid")"
echo "killed node $coord, the coordinator; i-b is $b3_id"
restart b3 b4 90 # at the new coordinator
wait_for 60 'describe >/dev/null && $py -c "import json,sys; j=json.load(open(sys.argv[1])); sys.exit(0 if j[\"coordinator\"] != $coord and len(j[\"members\"]) == 2 and \"$b3_id\" not in [m[\"member_id\"] for m in j[\"members\"]] else 1)" "$dir/desc.json"' ||
  fail "the new coordinator's view: $(cat "$dir/desc.json" "$dir/desc.err")"
pyj "$dir/desc.json" "j['generation'] == $gen and j['state'] == 'stable'"
[ "$(events a revoke | wc -l)" -eq "$revokes_a" ] || fail "i-a saw a revoke across the coordinator's move: $(events a revoke)"

step "i-b's process goes for good; Kafka's LeaveGroup v3 removes its member by instance id alone (as admin tools do), without waiting for its session"
kill -KILL "$pid_b4"
wait "$pid_b4" 2>/dev/null || true
coord=$($py -c 'import json,sys; print(json.load(open(sys.argv[1]))["coordinator"])' "$dir/desc.json")
timeout 30 $py - "127.0.0.1:$((base + 10 * (coord - 1) + 3))" "$dir" <<'PY' || fail "LeaveGroup v3"
import struct, sys
sys.path.insert(0, sys.argv[2])
from kraw import call, kstr
body = kstr("sg") + struct.pack(">i", 2) + kstr("") + kstr("i-b") + kstr("") + kstr("i-none")
r = call(sys.argv[1], 13, 3, 9, body)
corr, throttle, err = r.i32(), r.i32(), r.i16()
got = []
for _ in range(r.i32()):
    member, instance = r.string(), r.string()
    got.append((instance, r.i16()))
print("LeaveGroup v3: top-level error %d, members %s" % (err, got))
assert (corr, err) == (9, 0) and got == [("i-b", 0), ("i-none", 25)], (corr, err, got)
PY
wait_for 60 'describe >/dev/null && $py -c "import json,sys; j=json.load(open(sys.argv[1])); sys.exit(0 if j[\"state\"] == \"stable\" and [m[\"group_instance_id\"] for m in j[\"members\"]] == [\"i-a\"] else 1)" "$dir/desc.json"' ||
  fail "i-b is still in the group, or i-a did not rejoin alone: $(cat "$dir/desc.json")"

touch "$dir/stop"
wait_for 30 '[ -n "$(events a exit)" ]' || fail "the consumers did not stop"
echo "PASS"
