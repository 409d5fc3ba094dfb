#!/usr/bin/env bash
# kafka_create_ready.sh - a topic is usable for Produce and Fetch as soon as
# CreateTopics answers (docs/kafka.md, "CreateTopics"): on a 3-node
# cluster, kafka-python's KafkaAdminClient creates topics of 6 partitions
# and 3 replicas one after another; right after each answer the node that
# answered names a leader for every partition in a raw Metadata, and a
# KafkaProducer with retries=0 (no retry may hide a refusal) produces to
# every partition at once: every send must succeed, and a consumer reads
# every message back at its acknowledged offset. Prints each CreateTopics'
# answer time. A timeout_ms of 0 answers at once (as Kafka does).
#
# Usage: kafka_create_ready.sh CAIRN CAIRND [TOPICS]
set -euo pipefail
CLI_TEST_TAG=kafkaready
. "$(dirname "$0")/../lib/cli_test.sh"
py=/usr/bin/python3 # Debian's, where python3-kafka is installed
$py -c 'import kafka' 2>/dev/null || fail "python3-kafka is not installed (deploy/setup.sh)"
ntopics="${3:-5}"

step "start a 3-node cluster"
start_cluster3
all="127.0.0.1:$((base + 3)),127.0.0.1:$((base + 13)),127.0.0.1:$((base + 23))"

step "create $ntopics topics (6 partitions, 3 replicas); produce to every partition at once, retries=0"
timeout 240 $py - "$all" "$ntopics" <<'PY' || fail "a produce right after CreateTopics failed"
import socket, struct, sys, time
from kafka import KafkaAdminClient, KafkaConsumer, TopicPartition
from kafka.admin import NewTopic
from kafka.record.default_records import DefaultRecordBatchBuilder

bs = sys.argv[1].split(",")
ntopics = int(sys.argv[2])

def kstr(x):
    return struct.pack(">h", len(x)) + x

def metadata(addr, topic):
    """Raw Metadata v1 of one topic from one node: [(partition, leader, replicas)]."""
    host, port = addr.rsplit(":", 1)
    s = socket.create_connection((host, int(port)), timeout=10)
    b = struct.pack(">hhih", 3, 1, 7, 1) + b"t" + struct.pack(">i", 1) + kstr(topic.encode())
    s.sendall(struct.pack(">i", len(b)) + b)
    size = struct.unpack(">i", s.recv(4, socket.MSG_WAITALL))[0]
    body = s.recv(size, socket.MSG_WAITALL)
    s.close()
    pos = 4
    def i16():
        nonlocal pos; v = struct.unpack(">h", body[pos:pos + 2])[0]; pos += 2; return v
    def i32():
        nonlocal pos; v = struct.unpack(">i", body[pos:pos + 4])[0]; pos += 4; return v
    def string():
        nonlocal pos; n = i16(); v = body[pos:pos + max(n, 0)]; pos += max(n, 0); return v
    for _ in range(i32()):
        i32(); string(); i32(); string()
    i32()  # controller_id
    out = []
    for _ in range(i32()):
        i16(); string(); pos += 1
        for _ in range(i32()):
            i16(); p = i32(); leader = i32()
            reps = [i32() for _ in range(i32())]
            [i32() for _ in range(i32())]
            out.append((p, leader, reps))
    return out

def produce(addr, topic, p, key, value):
    """One raw Produce v3 (acks -1) of one record: (error code, base offset)."""
    bb = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=False,
                                   producer_id=-1, producer_epoch=-1, base_sequence=-1,
                                   batch_size=1 << 20)
    bb.append(0, int(time.time() * 1000), key, value, [])
    records = bytes(bb.build())
    host, port = addr.rsplit(":", 1)
    s = socket.create_connection((host, int(port)), timeout=30)
    b = (struct.pack(">hhih", 0, 3, 9, 1) + b"t" + struct.pack(">hhi", -1, -1, 20000) +
         struct.pack(">i", 1) + kstr(topic.encode()) + struct.pack(">ii", 1, p) +
         struct.pack(">i", len(records)) + records)
    s.sendall(struct.pack(">i", len(b)) + b)
    size = struct.unpack(">i", s.recv(4, socket.MSG_WAITALL))[0]
    body = s.recv(size, socket.MSG_WAITALL)
    s.close()
    n = struct.unpack(">i", body[4:8])[0]
    pos = 8 + 2 + struct.unpack(">h", body[8:10])[0]
    _np, rp, err, off = struct.unpack(">iihq", body[pos:pos + 18])
    assert n == 1 and rp == p, (n, rp)
    return err, off

a = KafkaAdminClient(bootstrap_servers=bs, request_timeout_ms=30000)
times = []
failed = 0
unled = 0  # topics whose answering node named no leader for some partition
for i in range(ntopics):
    topic = "ready%d" % i
    t0 = time.monotonic()
    r = a.create_topics([NewTopic(topic, 6, 3)], timeout_ms=10000)
    dt = (time.monotonic() - t0) * 1000
    times.append(dt)
    errs = [(t[0], t[1]) for t in r.topic_errors]
    assert all(e == 0 for _, e in errs), errs
    ctl = a._controller_id  # CreateTopics went to the controller; broker n is bs[n - 1]
    md = metadata(bs[ctl - 1], topic)
    led = [p for p, leader, reps in md if leader >= 0]
    preferred = [p for p, leader, reps in md if reps and leader == reps[0]]
    # At once, each to the leader that node names (its preferred replica
    # when it names none): no sleep, no retry.
    got = {}
    for p, leader, reps in md:
        to = leader if leader >= 0 else reps[0]
        err, off = produce(bs[to - 1], topic, p, b"k%d" % p, b"%s/%d" % (topic.encode(), p))
        if err == 0:
            got[p] = off
        else:
            failed += 1
            print("  %s/%d: Produce to node %d: error %d" % (topic, p, to, err))
    print("%s: CreateTopics answered in %.0f ms; node %d named a leader for %d/6, the preferred "
          "one for %d/6; %d/6 produces acknowledged" % (topic, dt, ctl, len(led), len(preferred),
                                                       len(got)))
    if len(md) != 6 or len(led) != 6:
        unled += 1
        print("  %s: node %d's metadata right after the answer: %s" % (topic, ctl, md))
    if len(got) == 6:
        c = KafkaConsumer(bootstrap_servers=bs, enable_auto_commit=False, consumer_timeout_ms=20000)
        tps = [TopicPartition(topic, p) for p in range(6)]
        c.assign(tps)
        c.seek_to_beginning(*tps)
        seen = {}
        for m in c:
            seen[m.partition] = (m.offset, m.value)
            if len(seen) == 6:
                break
        c.close()
        for p in range(6):
            assert seen.get(p) == (got[p], b"%s/%d" % (topic.encode(), p)), (p, seen.get(p), got[p])
# timeout_ms 0: answered once applied, without waiting for leaders (Kafka's
# rule; a raw CreateTopics v0, as kafka-python turns 0 into its default).
def create_raw(addr, topic, timeout_ms):
    host, port = addr.rsplit(":", 1)
    s = socket.create_connection((host, int(port)), timeout=30)
    b = (struct.pack(">hhih", 19, 0, 11, 1) + b"t" + struct.pack(">i", 1) + kstr(topic.encode()) +
         struct.pack(">ihii", 6, 3, 0, 0) + struct.pack(">i", timeout_ms))
    s.sendall(struct.pack(">i", len(b)) + b)
    size = struct.unpack(">i", s.recv(4, socket.MSG_WAITALL))[0]
    body = s.recv(size, socket.MSG_WAITALL)
    s.close()
    n, nl = struct.unpack(">ih", body[4:10])
    err, = struct.unpack(">h", body[10 + nl:12 + nl])
    assert n == 1, n
    return err
t0 = time.monotonic()
err = create_raw(bs[a._controller_id - 1], "ready-nowait", 0)
dt0 = (time.monotonic() - t0) * 1000
assert err == 0, err
# timeout_ms 1: the partitions cannot have leaders that soon: REQUEST_TIMED_OUT
# (7), as Kafka answers, and the topic exists all the same.
t0 = time.monotonic()
err = create_raw(bs[a._controller_id - 1], "ready-short", 1)
dt1 = (time.monotonic() - t0) * 1000
assert err == 7, err
assert create_raw(bs[a._controller_id - 1], "ready-short", 0) == 36  # TOPIC_ALREADY_EXISTS
# A client that leaves while its answer is held: the node frees the wait
# (the sanitizer's leak check at the nodes' stop, below, would say).
for k in range(3):
    host, port = bs[k].rsplit(":", 1)
    s = socket.create_connection((host, int(port)), timeout=30)
    b = (struct.pack(">hhih", 19, 0, 12, 1) + b"t" + struct.pack(">i", 1) +
         kstr(b"ready-gone%d" % k) + struct.pack(">ihii", 6, 3, 0, 0) + struct.pack(">i", 30000))
    s.sendall(struct.pack(">i", len(b)) + b)
    s.close()
a.close()
print("CreateTopics answer times (ms): %s; with timeout_ms 0: %.0f ms; with 1: %.0f ms" %
      (" ".join("%.0f" % t for t in times), dt0, dt1))
assert failed == 0 and unled == 0, "%d produces failed; %d topics without every leader" % (failed, unled)
PY
step "a CreateTopics held while the nodes stop is answered; no sanitizer report"
timeout 60 $py - "$all" <<'PY' &
import socket, struct, sys
host, port = sys.argv[1].split(",")[0].rsplit(":", 1)
s = socket.create_connection((host, int(port)), timeout=50)
name = b"ready-stop"
b = (struct.pack(">hhih", 19, 0, 13, 1) + b"t" + struct.pack(">i", 1) + struct.pack(">h", len(name)) +
     name + struct.pack(">ihii", 6, 3, 0, 0) + struct.pack(">i", 30000))
s.sendall(struct.pack(">i", len(b)) + b)
try:
    print("held CreateTopics:", s.recv(64))
except OSError as e:
    print("held CreateTopics:", e)
PY
held=$!
sleep 0.3
bash "$cluster_sh" stop -d "$cdir" --timeout-s 40 >/dev/null 2>&1 || fail "the cluster did not stop cleanly"
wait "$held" || true
for f in "$cdir"/node*.log; do
  ! grep -q "Sanitizer" "$f" || { grep -A30 "Sanitizer" "$f" | head -60; fail "a sanitizer report in $f"; }
done
echo "PASS"
