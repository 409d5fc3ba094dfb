#!/usr/bin/env bash
# kafka_confluent.sh - confluent-kafka (Python over librdkafka) against the
# Kafka port of a 3-node cluster (docs/kafka.md): the client creates a
# topic, produces keyed messages with acks=all (idempotent) while the leader
# of partition 0 is SIGKILLed, reads them back by offset and in a consumer
# group that commits; every acknowledged message is read exactly once, in
# order per partition, and the group's committed offsets are what
# `cairn group describe` shows.
#
# Usage: kafka_confluent.sh CAIRN CAIRND
set -euo pipefail
CLI_TEST_TAG=kafkaconfluent
. "$(dirname "$0")/../lib/cli_test.sh"
py=/usr/bin/python3 # Debian's, where python3-confluent-kafka is installed
$py -c 'import confluent_kafka' 2>/dev/null ||
  fail "python3-confluent-kafka is not installed (deploy/setup.sh)"

step "start a 3-node cluster"
start_cluster3
all="127.0.0.1:$((base + 3)),127.0.0.1:$((base + 13)),127.0.0.1:$((base + 23))"

step "confluent-kafka: create, produce across a leader SIGKILL, read by offset and in a group"
timeout 200 $py - "$all" "$cdir" "$dir/acked" <<'PY' || fail "confluent-kafka"
import sys, os, signal, time, collections
from confluent_kafka import Producer, Consumer, TopicPartition, KafkaError, OFFSET_BEGINNING
from confluent_kafka.admin import AdminClient, NewTopic
bs, cdir, acked_file = sys.argv[1], sys.argv[2], sys.argv[3]
topic, nparts, n = "ck", 3, 600

admin = AdminClient({"bootstrap.servers": bs})
for t, f in admin.create_topics([NewTopic(topic, nparts, 3)], operation_timeout=30).items():
    f.result(timeout=60)
def leader_of(part):
    # A topic is usable as soon as CreateTopics answers, but a leader may
    # take a moment to be known to the node asked.
    for _ in range(100):
        md = admin.list_topics(topic, timeout=10).topics[topic]
        if md.error is None and part in md.partitions and md.partitions[part].leader > 0:
            return md.partitions[part].leader
        time.sleep(0.1)
    raise SystemExit("no leader for %s/%d" % (topic, part))
victim = leader_of(0)
# Cairn creates __cairn_offsets at a group's first use, and only while as
# many nodes as its replicas are alive: the group's first use (an
# OffsetFetch through its coordinator) comes before the kill.
w = Consumer({"bootstrap.servers": bs, "group.id": "ck-g"})
assert all(tp.offset < 0 for tp in w.committed([TopicPartition(topic, 0)], timeout=60))
w.close()

acked, failed = {}, []
def on_delivery(err, m):
    if err is not None:
        failed.append((m.value(), str(err)))
    else:
        acked[m.value()] = (m.partition(), m.offset(), m.key())
p = Producer({"bootstrap.servers": bs, "acks": "all", "enable.idempotence": True,
              "linger.ms": 5, "retry.backoff.ms": 100, "message.timeout.ms": 60000})
killed = False
for i in range(n):
    p.produce(topic, key=b"k%d" % (i % 13), value=b"v%d" % i, on_delivery=on_delivery)
    p.poll(0)
    time.sleep(0.003)  # spread the produce over a couple of seconds
    if not killed and len(acked) >= n // 3:
        pid = int(open("%s/node%d.pid" % (cdir, victim)).read())
        os.kill(pid, signal.SIGKILL)
        print("killed node %d (pid %d), leader of %s/0, after %d acks" % (victim, pid, topic, len(acked)))
        killed = True
left = p.flush(90)
assert killed, "the produce ended before the kill"
assert left == 0, "%d messages neither acknowledged nor failed" % left
for v, e in failed:
    print("delivery failed: %s: %s" % (v.decode(), e))
print("acknowledged %d of %d, %d failed" % (len(acked), n, len(failed)))
assert len(acked) + len(failed) == n
# The idempotent producer retries through the failover: nothing fails.
assert not failed, "deliveries failed across the failover"

def check(rows, what):
    """rows: (partition, offset, key, value) as read. Every acknowledged
    value once, at its acknowledged place; offsets and values increasing
    per partition; each key on one partition."""
    count = collections.Counter(v for _, _, _, v in rows)
    dups = [v for v, c in count.items() if c > 1]
    assert not dups, "%s: read twice: %s" % (what, dups[:10])
    missing = [v for v in acked if v not in count]
    assert not missing, "%s: acknowledged but not read: %s" % (what, missing[:10])
    last, part_of = {}, {}
    for part, off, key, v in rows:
        if v in acked:
            assert acked[v][:2] == (part, off), "%s: %s at %d/%d, acked at %s" % (what, v, part, off, acked[v][:2])
        num = int(v[1:])
        lo, lv = last.get(part, (-1, -1))
        assert off > lo and num > lv, "%s: partition %d out of order at offset %d" % (what, part, off)
        last[part] = (off, num)
        assert part_of.setdefault(key, part) == part, "%s: key %s on two partitions" % (what, key)

def drain(c, total, what):
    rows, end = [], time.time() + 60
    while len(rows) < total and time.time() < end:
        m = c.poll(0.5)
        if m is None:
            continue
        if m.error():
            if m.error().code() == KafkaError._PARTITION_EOF:
                continue
            print("%s: %s" % (what, m.error()))
            continue
        rows.append((m.partition(), m.offset(), m.key(), m.value()))
    return rows

# The topic's end: everything written (acknowledged or not).
hw = Consumer({"bootstrap.servers": bs, "group.id": "ck-probe"})
total = sum(hw.get_watermark_offsets(TopicPartition(topic, q), timeout=30)[1] for q in range(nparts))
hw.close()
assert total >= len(acked), (total, len(acked))

c = Consumer({"bootstrap.servers": bs, "group.id": "ck-byoffset", "enable.auto.commit": False})
c.assign([TopicPartition(topic, q, OFFSET_BEGINNING) for q in range(nparts)])
rows = drain(c, total, "by offset")
c.close()
check(rows, "by offset")
print("by offset: %d read, every acknowledged one once, in order" % len(rows))

g = Consumer({"bootstrap.servers": bs, "group.id": "ck-g", "auto.offset.reset": "earliest",
              "enable.auto.commit": False, "session.timeout.ms": 6000})
g.subscribe([topic])
rows = drain(g, total, "group")
g.commit(asynchronous=False)
g.close()
check(rows, "group")
print("group: %d read and committed" % len(rows))
open(acked_file, "w").write("%d\n" % total)
PY
total=$(cat "$dir/acked")

step "the group's committed offsets are visible in cairn group describe"
group_committed ck-g 3 "$total"

echo "PASS"
