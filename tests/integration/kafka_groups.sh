#!/usr/bin/env bash
# kafka_groups.sh - Kafka consumer groups on Cairn's coordinator with real
# Kafka clients on a 3-node cluster (docs/kafka.md): two kafka-python
# KafkaConsumers in one group (one joining late, one leaving) read every
# message exactly once, the group's committed offsets are what
# `cairn group describe` shows, and a member keeps its member id and
# generation across a SIGKILL of its coordinator (its commit at the new
# coordinator is accepted, as Kafka's persisted group metadata allows),
# also when the SIGKILL comes the moment SyncGroup hands out the
# assignment (the answer waits for the membership record to commit).
#
# Usage: kafka_groups.sh CAIRN CAIRND
set -euo pipefail
CLI_TEST_TAG=kafkagroups
. "$(dirname "$0")/../lib/cli_test.sh"
py=/usr/bin/python3 # Debian's, where python3-kafka is installed
$py -c 'import kafka' 2>/dev/null || fail "python3-kafka is not installed (deploy/setup.sh)"

step "start a 3-node cluster"
start_cluster3
all="127.0.0.1:$((base + 3)),127.0.0.1:$((base + 13)),127.0.0.1:$((base + 23))"
expect 0 "$cli" topic create kg --partitions 4 --replication-factor 3

step "kafka-python: two consumers in one group, one joining late and one leaving, read every message once"
timeout 150 $py - "$all" <<'PY' || fail "kafka-python group"
import sys, threading, time, collections
from kafka import KafkaProducer, KafkaConsumer
bs = sys.argv[1].split(",")
p = KafkaProducer(bootstrap_servers=bs, acks="all", retries=10, retry_backoff_ms=200)
def produce(a, b):
    for f in [p.send("kg", key=b"k%d" % (i % 11), value=b"v%d" % i) for i in range(a, b)]:
        f.get(timeout=30)
seen, lock = [], threading.Lock()
def consume(name, stop):
    # Auto-commit: kafka-python commits what poll() returned, synchronously,
    # before it rejoins and when it closes (with its generation: refused, it
    # only logs "likely to cause duplicate message delivery"), so nothing is
    # read twice as long as the coordinator keeps the member, also when the
    # coordinator moves (a leader change of its __cairn_offsets partition,
    # e.g. the hand-over to the preferred replica just after creation).
    c = KafkaConsumer("kg", bootstrap_servers=bs, group_id="kg-g", client_id=name,
                      auto_offset_reset="earliest", enable_auto_commit=True,
                      auto_commit_interval_ms=500, session_timeout_ms=6000,
                      heartbeat_interval_ms=500, max_poll_interval_ms=20000)
    while not stop.is_set():
        for tp, ms in c.poll(timeout_ms=200).items():
            with lock:
                seen.extend((name, m.partition, m.offset, m.value) for m in ms)
    c.close()  # commits, then LeaveGroup
def wait_for(n, what, timeout=60):
    end = time.time() + timeout
    while time.time() < end:
        with lock:
            if len(seen) >= n:
                return
        time.sleep(0.1)
    with lock:
        raise SystemExit("%s: %d of %d read" % (what, len(seen), n))
produce(0, 100)
sa, sb = threading.Event(), threading.Event()
ta = threading.Thread(target=consume, args=("a", sa)); ta.start()
wait_for(100, "a alone")
tb = threading.Thread(target=consume, args=("b", sb)); tb.start()
time.sleep(3)  # b joins: a rebalance
produce(100, 200)
wait_for(200, "a and b")
sa.set(); ta.join(30)
assert not ta.is_alive(), "consumer a did not close"
produce(200, 300)
wait_for(300, "b after a left")
time.sleep(1)
sb.set(); tb.join(30)
assert not tb.is_alive(), "consumer b did not close"
vals = collections.Counter(int(v[1:]) for _, _, _, v in seen)
dups = [v for v, k in vals.items() if k > 1]
assert not dups, "read twice: %s" % ["v%d: %s" % (v, [(n, q, o) for n, q, o, x in seen if x == b"v%d" % v]) for v in dups[:10]]
assert sorted(vals) == list(range(300)), "missing: %s" % sorted(set(range(300)) - set(vals))[:20]
by = collections.Counter(n for n, _, _, _ in seen)
assert by["a"] > 0 and by["b"] > 0, "reads per consumer: %s" % dict(by)
print("kafka-python group: 300 read once each, by consumer %s" % dict(by))
PY

step "the group's committed offsets are visible in cairn group describe"
eventually 0 "$cli" group describe kg-g --json
json_ok "$dir/out"
pyj "$dir/out" 'len(j["offsets"]) == 4 and sum(o["committed"] for o in j["offsets"]) == 300 and all(o["lag"] == 0 for o in j["offsets"])'
expect 0 "$cli" group describe kg-g
out_has "COMMITTED"

step "kafka-python: a member's commit after its coordinator is SIGKILLed is accepted (same member, same generation)"
timeout 120 $py - "$all" "$cdir" <<'PY' || fail "commit across a coordinator move"
import os, signal, sys, time
from kafka import KafkaConsumer
bs, cdir = sys.argv[1].split(","), sys.argv[2]
c = KafkaConsumer("kg", bootstrap_servers=bs, group_id="kg-move", client_id="m",
                  auto_offset_reset="earliest", enable_auto_commit=False,
                  session_timeout_ms=10000, heartbeat_interval_ms=500, max_poll_interval_ms=60000)
got, end = 0, time.time() + 60
while got < 300 and time.time() < end:
    got += sum(len(ms) for ms in c.poll(timeout_ms=500).values())
assert got == 300, "read %d of 300" % got
co = c._coordinator
gen = (co._generation.generation_id, co._generation.member_id)
node = int(str(co.coordinator_id).rsplit("-", 1)[-1])
os.kill(int(open("%s/node%d.pid" % (cdir, node)).read()), signal.SIGKILL)
print("killed the coordinator, node %d; member %s, generation %d" % (node, gen[1], gen[0]))
c.commit()  # finds the new coordinator; refused there, it raises CommitFailedError
now = (co._generation.generation_id, co._generation.member_id)
assert now == gen, "generation/member changed across the move: %s -> %s" % (gen, now)
parts = c.assignment()
committed = {tp.partition: c.committed(tp) for tp in parts}
assert all(committed[tp.partition] == c.position(tp) for tp in parts), "committed %s" % committed
assert sum(committed.values()) == 300, "committed %s" % committed
c.close()
print("commit accepted by the new coordinator: %s" % committed)
PY

step "restart the killed node"
bash "$cluster_sh" start -d "$cdir" --cairnd "$cairnd" --cli "$cli" --wait-s 90 >"$dir/restart.out" 2>&1 ||
  fail "restart: $(cat "$dir/restart.out")"
for f in "$cdir"/node*.pid; do pids+=("$(cat "$f")"); done

step "kafka-python: the coordinator SIGKILLed the moment SyncGroup hands out the assignment; the new one keeps the member and generation"
# The SyncGroup answer waits until the group's membership record is
# committed (Kafka's storeGroup), so the new coordinator has it.
timeout 120 $py - "$all" "$cdir" <<'PY' || fail "kill right after SyncGroup"
import os, signal, sys, time
from kafka import KafkaConsumer, ConsumerRebalanceListener
bs, cdir = sys.argv[1].split(","), sys.argv[2]
c = KafkaConsumer(bootstrap_servers=bs, group_id="kg-sync", client_id="s",
                  auto_offset_reset="earliest", enable_auto_commit=False,
                  session_timeout_ms=10000, heartbeat_interval_ms=500, max_poll_interval_ms=60000)
killed = {}
class KillOnAssign(ConsumerRebalanceListener):
    def on_partitions_revoked(self, revoked):
        pass
    def on_partitions_assigned(self, assigned):
        if killed:
            return
        co = c._coordinator
        killed["gen"] = (co._generation.generation_id, co._generation.member_id)
        killed["node"] = int(str(co.coordinator_id).rsplit("-", 1)[-1])
        os.kill(int(open("%s/node%d.pid" % (cdir, killed["node"])).read()), signal.SIGKILL)
c.subscribe(["kg"], listener=KillOnAssign())
got, end = 0, time.time() + 90
while got < 300 and time.time() < end:
    got += sum(len(ms) for ms in c.poll(timeout_ms=500).values())
assert killed, "never assigned"
print("killed the coordinator, node %d, as member %s got generation %d" % (killed["node"], killed["gen"][1], killed["gen"][0]))
assert got == 300, "read %d of 300" % got
c.commit()  # at the new coordinator; refused there, it raises CommitFailedError
co = c._coordinator
now = (co._generation.generation_id, co._generation.member_id)
assert now == killed["gen"], "generation/member changed across the move: %s -> %s" % (killed["gen"], now)
committed = {tp.partition: c.committed(tp) for tp in c.assignment()}
assert sum(committed.values()) == 300, "committed %s" % committed
c.close()
print("the new coordinator accepted the commit of generation %d: %s" % (now[0], committed))
PY

echo "PASS"
