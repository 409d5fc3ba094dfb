#!/usr/bin/env bash
# kafka_admin.sh - the Kafka admin APIs with kafka-python's KafkaAdminClient
# and kcat on a 3-node cluster (docs/kafka.md): ApiVersions lists them;
# DescribeConfigs gives a topic's real configs under Kafka's names and the
# asked broker's own, and the proper errors; CreatePartitions and `cairn
# topic add-partitions` grow a topic (over the same core operation) whose
# new partitions are produced to and consumed from through both protocols,
# and refuse shrinking, and keep every acknowledged record across a
# SIGKILL of a new partition's leader and its restart; DeleteGroups drops
# an empty group's offsets (what `cairn group delete` does) and refuses a group with members; DeleteTopics
# deletes a topic and refuses the internal __cairn_offsets.
#
# Usage: kafka_admin.sh CAIRN CAIRND
set -euo pipefail
CLI_TEST_TAG=kafkaadmin
. "$(dirname "$0")/../lib/cli_test.sh"
py=/usr/bin/python3 # Debian's, where python3-kafka is installed
command -v kcat >/dev/null || fail "kcat is not installed (deploy/setup.sh)"
$py -c 'import kafka' 2>/dev/null || fail "python3-kafka is not installed (deploy/setup.sh)"

step "start a 3-node cluster"
start_cluster3
k1="127.0.0.1:$((base + 3))"
all="$k1,127.0.0.1:$((base + 13)),127.0.0.1:$((base + 23))"

step "ApiVersions lists DeleteTopics 0-3, DescribeConfigs 0-2, CreatePartitions 0-1, DeleteGroups 0-1"
python3 "$(dirname "$0")/../lib/kafka_apis.py" "$k1" 20=0-3 32=0-2 37=0-1 42=0-1 || fail "ApiVersions"

step "kafka-python: DescribeConfigs of a topic, of a broker, and their errors"
timeout 120 $py - "$all" <<'PY' || fail "DescribeConfigs"
import sys, time
from kafka import KafkaAdminClient
from kafka.admin import NewTopic, ConfigResource, ConfigResourceType
bs = sys.argv[1].split(",")
a = KafkaAdminClient(bootstrap_servers=bs, request_timeout_ms=20000)
a.create_topics([NewTopic("kc", 2, 3, topic_configs={"retention.ms": "3600000",
                                                    "segment.bytes": "8388608"}),
                 NewTopic("kd", 1, 1)])
def configs(res):
    r = a.describe_configs([res])
    out = []
    for resp in r:
        for err, msg, rtype, rname, cfgs in resp.resources:
            out.append((err, msg, rname, {c[0]: c[1] for c in cfgs}))
    return out
def settled(res):
    # the metadata of the node asked may lag the controller's for a moment
    for _ in range(50):
        [(err, msg, name, got)] = configs(res)
        if err == 0:
            break
        time.sleep(0.1)
    return err, msg, name, got
err, msg, name, kc = settled(ConfigResource(ConfigResourceType.TOPIC, "kc"))
assert err == 0 and name == "kc", (err, msg)
assert kc["retention.ms"] == "3600000", kc
assert kc["segment.bytes"] == "8388608", kc
assert kc["retention.bytes"] == "-1", kc
assert kc["cleanup.policy"] == "delete", kc
assert kc["min.insync.replicas"] == "2", kc
assert int(kc["max.message.bytes"]) > 0, kc
err, msg, name, kd = settled(ConfigResource(ConfigResourceType.TOPIC, "kd"))
assert err == 0 and kd["retention.ms"] == "-1" and kd["min.insync.replicas"] == "1", kd
# asked keys only
[(err, msg, name, only)] = configs(ConfigResource(ConfigResourceType.TOPIC, "kc",
                                                  configs={"retention.ms": None}))
assert err == 0 and list(only) == ["retention.ms"], only
# an unknown topic
[(err, msg, name, none)] = configs(ConfigResource(ConfigResourceType.TOPIC, "nosuch"))
assert err == 3 and none == {}, (err, none)
# each broker describes itself (kafka-python sends a broker resource to that broker)
for b in (1, 2, 3):
    [(err, msg, name, bc)] = configs(ConfigResource(ConfigResourceType.BROKER, str(b)))
    assert err == 0 and bc["broker.id"] == str(b), (err, msg, bc)
    assert bc["advertised.listeners"] == "PLAINTEXT://" + bs[b - 1], bc
print("DescribeConfigs: topics and brokers")
a.close()
PY

step "DescribeConfigs of another broker's id and of an unknown resource type: INVALID_REQUEST"
$py - "$k1" <<'PY' || fail "DescribeConfigs errors"
import socket, struct, sys
host, port = sys.argv[1].rsplit(":", 1)
s = socket.create_connection((host, int(port)), timeout=10)
def kstr(x):
    return struct.pack(">h", len(x)) + x
def res(t, name):
    return struct.pack(">b", t) + kstr(name) + struct.pack(">i", -1)
b = struct.pack(">hhih", 32, 1, 5, 1) + b"t" + struct.pack(">i", 2) + res(4, b"2") + res(3, b"g") + b"\0"
s.sendall(struct.pack(">i", len(b)) + b)
size = struct.unpack(">i", s.recv(4, socket.MSG_WAITALL))[0]
body = s.recv(size, socket.MSG_WAITALL)
corr, throttle, n = struct.unpack(">iii", body[:12])
assert corr == 5 and n == 2, (corr, n)
pos = 12
for want_type in (4, 3):
    err, mlen = struct.unpack(">hh", body[pos:pos + 4]); pos += 4
    msg = body[pos:pos + mlen]; pos += mlen
    rtype, = struct.unpack(">b", body[pos:pos + 1]); pos += 1
    nlen, = struct.unpack(">h", body[pos:pos + 2]); pos += 2 + nlen
    ncfg, = struct.unpack(">i", body[pos:pos + 4]); pos += 4
    assert err == 42 and rtype == want_type and ncfg == 0 and mlen > 0, (err, rtype, ncfg)
    print("resource type %d: %s" % (rtype, msg.decode()))
PY

step "CreatePartitions grows a topic; the new partitions take Kafka and native records"
timeout 120 $py - "$all" <<'PY' || fail "CreatePartitions"
import sys, time
from kafka import KafkaAdminClient, KafkaProducer, KafkaConsumer, TopicPartition
from kafka.admin import NewPartitions
from kafka.errors import InvalidPartitionsError, KafkaError
bs = sys.argv[1].split(",")
a = KafkaAdminClient(bootstrap_servers=bs, request_timeout_ms=20000)
r = a.create_partitions({"kc": NewPartitions(4)})
assert r.topic_errors[0][1] == 0, r.topic_errors
# shrinking, and a count equal to the current one, are refused
for count in (2, 4):
    try:
        a.create_partitions({"kc": NewPartitions(count)})
        raise AssertionError("%d partitions accepted" % count)
    except InvalidPartitionsError as e:  # kafka-python raises the topic's error
        assert "never removed" in str(e), e
a.close()
p = KafkaProducer(bootstrap_servers=bs, acks="all", retries=20, retry_backoff_ms=200)
# the producer learns the new partitions from its metadata
deadline = time.time() + 30
while len(p.partitions_for("kc") or ()) < 4:
    assert time.time() < deadline, p.partitions_for("kc")
    p._metadata.request_update()
    time.sleep(0.2)
sent = {}
for part in range(4):
    for i in range(5):
        md = p.send("kc", value=b"p%d-%d" % (part, i), partition=part).get(timeout=30)
        sent[(md.partition, md.offset)] = b"p%d-%d" % (part, i)
p.flush()
c = KafkaConsumer(bootstrap_servers=bs, group_id=None, enable_auto_commit=False)
tps = [TopicPartition("kc", i) for i in range(4)]
c.assign(tps)
c.seek_to_beginning(*tps)
got, deadline = {}, time.time() + 30
while len(got) < len(sent) and time.time() < deadline:
    for ms in c.poll(timeout_ms=200).values():
        got.update(((m.partition, m.offset), m.value) for m in ms)
assert got == sent, (sorted(got), sorted(sent))
print("CreatePartitions: 4 partitions, 20 records read back")
PY

step "cairn topic add-partitions grows it again (a total) and refuses shrinking"
expect 0 "$cli" topic add-partitions kc --partitions 6
out_has "now has 6 partitions"
expect 1 "$cli" topic add-partitions kc --partitions 3
err_has "partitions are never removed"
expect 1 "$cli" topic add-partitions nosuch --partitions 3
expect 1 "$cli" topic add-partitions __cairn_offsets --partitions 100
err_has "internal topic"
eventually 0 "$cli" topic describe kc --json
pyj "$dir/out" 'j["partition_count"] == 6'
# native produce to the newest partition (retried while it elects a leader)
ok=0
for _ in $(seq 1 50); do
  if printf 'n1\nn2\nn3\n' | "$cli" produce kc -p 5 >"$dir/out" 2>"$dir/err"; then
    ok=1
    break
  fi
  sleep 0.2
done
[ "$ok" -eq 1 ] || fail "native produce to partition 5: $(cat "$dir/err")"
expect 0 "$cli" consume kc -p 5 -e
[ "$(cat "$dir/out")" = "$(printf 'n1\nn2\nn3')" ] || fail "native consume: $(cat "$dir/out")"
# and kcat sees 6 partitions and reads partition 5 back through the Kafka port
ok=0
for _ in $(seq 1 50); do
  kcat -b "$all" -L -t kc >"$dir/md" 2>&1 || true
  [ "$(grep -c 'partition [0-5], leader [1-3],' "$dir/md")" -eq 6 ] && { ok=1; break; }
  sleep 0.2
done
[ "$ok" -eq 1 ] || fail "kcat -L after add-partitions: $(cat "$dir/md")"
expect 0 timeout 30 kcat -b "$all" -C -t kc -p 5 -e -o beginning -q
[ "$(cat "$dir/out")" = "$(printf 'n1\nn2\nn3')" ] || fail "kcat partition 5: $(cat "$dir/out")"

step "SIGKILL the leader of a new partition, then restart it: every acknowledged record is there once, in order"
# kcat exits 0 only once every message is acknowledged (acks=all: committed on a majority)
kput() { # PARTITION FIRST LAST
  seq "$2" "$3" | sed "s/^/p$1-/" >"$dir/in"
  expect 0 timeout 60 kcat -b "$all" -P -t kc -p "$1" -X acks=all -X message.send.max.retries=20 \
    -X retry.backoff.ms=200 "$dir/in"
}
kput 4 1 20
kput 5 1 20
kcat -b "$all" -L -t kc >"$dir/md" 2>&1 || true
leader=$(sed -n 's/.*partition 5, leader \([0-9]\),.*/\1/p' "$dir/md" | head -1)
[ -n "$leader" ] || fail "no leader of partition 5: $(cat "$dir/md")"
kill -KILL "$(cat "$cdir/node$leader.pid")"
echo "killed node $leader, the leader of kc/5"
kput 5 21 40
kput 4 21 40
bash "$cluster_sh" start -d "$cdir" --cairnd "$cairnd" --cli "$cli" --wait-s 90 >"$dir/restart.out" 2>&1 || fail "restart: $(cat "$dir/restart.out")"
pids+=("$(cat "$cdir/node$leader.pid")")
# the restarted node rebuilt the grown topic from its metadata log (it opens
# from its last snapshot and applies the rest once the leader tells it what
# is committed: a moment after it answers)
describe_has kc 'j["partition_count"] == 6' -b "127.0.0.1:$((base + 10 * (leader - 1)))"
for p in 4 5; do
  seq 1 40 | sed "s/^/p$p-/" >"$dir/want"
  expect 0 timeout 60 kcat -b "$all" -C -t kc -p "$p" -e -o beginning -q
  grep "^p$p-" "$dir/out" | diff "$dir/want" - >/dev/null ||
    fail "kc/$p after the SIGKILL: $(tr '\n' ' ' <"$dir/out")"
done

step "DeleteGroups: an empty group's offsets are dropped; a group with members is refused"
timeout 120 $py - "$all" <<'PY' || fail "DeleteGroups"
import sys, time
from kafka import KafkaAdminClient, KafkaConsumer, TopicPartition, OffsetAndMetadata
from kafka.errors import GroupIdNotFoundError, NonEmptyGroupError
bs = sys.argv[1].split(",")
def member(group):
    c = KafkaConsumer("kd", bootstrap_servers=bs, group_id=group, auto_offset_reset="earliest",
                      enable_auto_commit=False, session_timeout_ms=6000,
                      heartbeat_interval_ms=500)
    deadline = time.time() + 60
    while not c.assignment():
        assert time.time() < deadline, "no assignment"
        c.poll(timeout_ms=200)
    return c
c = member("kg-del")
c.commit({TopicPartition("kd", 0): OffsetAndMetadata(0, "")})
busy = member("kg-busy")
c.close()
a = KafkaAdminClient(bootstrap_servers=bs, request_timeout_ms=20000)
offsets = a.list_consumer_group_offsets("kg-del")
assert TopicPartition("kd", 0) in offsets, offsets
def delete(group):
    # kafka-python gives (group, the error class) per group
    r = a.delete_consumer_groups([group])
    return dict(r)[group].errno
err = delete("kg-busy")
assert err == NonEmptyGroupError.errno, err
err = delete("kg-del")
assert err == 0, err
assert a.list_consumer_group_offsets("kg-del") == {}, a.list_consumer_group_offsets("kg-del")
err = delete("kg-never")
assert err == GroupIdNotFoundError.errno, err
busy.close()
print("DeleteGroups: deleted, refused while busy, unknown")
PY
expect 1 "$cli" group describe kg-del

step "DeleteTopics deletes a topic and refuses the internal __cairn_offsets"
timeout 120 $py - "$all" <<'PY' || fail "DeleteTopics"
import sys, time
from kafka import KafkaAdminClient
from kafka.errors import TopicAuthorizationFailedError, UnknownTopicOrPartitionError
bs = sys.argv[1].split(",")
a = KafkaAdminClient(bootstrap_servers=bs, request_timeout_ms=20000)
r = a.delete_topics(["kd"])
assert r.topic_error_codes == [("kd", 0)], r.topic_error_codes
# kafka-python raises a topic's error
for name, error in (("__cairn_offsets", TopicAuthorizationFailedError),
                    ("nosuch", UnknownTopicOrPartitionError)):
    try:
        a.delete_topics([name])
        raise AssertionError(name + " deleted")
    except error:
        pass
print("DeleteTopics: deleted, internal refused, unknown")
PY
topics_are "__cairn_offsets,kc"

echo "PASS"
