#!/usr/bin/env bash
# kafka_clients.sh - the Kafka port with real Kafka clients on a 3-node
# cluster (docs/kafka.md): kcat (librdkafka) lists every broker and
# partition leader, produces keyed messages with acks=all and reads back
# exactly what it produced, in order per partition, also after a SIGKILL of
# a partition leader; kafka-python produces and consumes by offset; a
# Fetch right after CreateTopics never answers LEADER_NOT_AVAILABLE (which
# kafka-python's consumer raises instead of retrying);
# malformed frames (bad sizes, a 2 GiB length, unknown api keys, truncated
# bodies and flexible fields) get a closed connection (or an error answer)
# while the node keeps serving others.
#
# Usage: kafka_clients.sh CAIRN CAIRND
set -euo pipefail
CLI_TEST_TAG=kafka
. "$(dirname "$0")/../lib/cli_test.sh"
py=/usr/bin/python3 # Debian's, where python3-kafka is installed
command -v kcat >/dev/null || fail "kcat is not installed (deploy/setup.sh)"
$py -c 'import kafka' 2>/dev/null || fail "python3-kafka is not installed (deploy/setup.sh)"

step "start a 3-node cluster"
start_cluster3
k1="127.0.0.1:$((base + 3))"
k2="127.0.0.1:$((base + 13))"
k3="127.0.0.1:$((base + 23))"
all="$k1,$k2,$k3"

step "Fetch right after CreateTopics: a leader not ready yet answers NOT_LEADER_OR_FOLLOWER, never LEADER_NOT_AVAILABLE"
# kafka-python's fetcher raises LeaderNotAvailableError out of poll() on
# error 5 in a Fetch answer (it refreshes metadata only on 3 and 6): a
# consumer of a topic or partition just created failed that way.
timeout 120 $py - "$all" <<'PY' || fail "Fetch right after CreateTopics"
import sys, time, collections
from kafka import KafkaAdminClient
from kafka.admin import NewTopic
from kafka.protocol.metadata import MetadataRequest
from kafka.protocol.fetch import FetchRequest
from kafka.client_async import KafkaClient
bs = sys.argv[1].split(",")
cl = KafkaClient(bootstrap_servers=bs)
def call(node, req):
    end = time.time() + 10
    while not cl.ready(node) and time.time() < end:
        cl.poll(timeout_ms=20)
    f = cl.send(node, req)
    while not f.is_done:
        cl.poll(timeout_ms=20)
    if f.failed():
        raise f.exception
    return f.value
codes = collections.Counter()
a = KafkaAdminClient(bootstrap_servers=bs)
for k in range(5):
    t = "fresh%d" % k
    a.create_topics([NewTopic(t, 6, 3)], timeout_ms=30000)
    todo, end = set(range(6)), time.time() + 30
    while todo and time.time() < end:  # each partition fetched from its leader until served
        md = call(cl.least_loaded_node(), MetadataRequest[1]([t]))
        for perr, p, leader, *_ in md.topics[0][3]:
            if p in todo and perr == 0 and leader >= 0:
                r = call(leader, FetchRequest[4](-1, 100, 1, 1 << 20, 0, [(t, [(p, 0, 1 << 20)])]))
                err = r.topics[0][1][0][1]
                codes[err] += 1
                if err == 0:
                    todo.discard(p)
        time.sleep(0.005)
    assert not todo, "%s: partitions %s never served" % (t, sorted(todo))
print("Fetch error codes right after CreateTopics:", dict(codes))
assert not codes.get(5), "LEADER_NOT_AVAILABLE in %d Fetch answers" % codes[5]
assert set(codes) <= {0, 6}, "unexpected Fetch errors: %s" % dict(codes)
PY

step "kcat -L names every broker (by its Kafka address) and every partition leader"
expect 0 "$cli" topic create kt --partitions 3 --replication-factor 3
ok=0
for _ in $(seq 1 100); do
  kcat -b "$k2" -L -t kt -m 5 >"$dir/md" 2>&1 || true
  if grep -q " 3 brokers:" "$dir/md" && grep -q "broker 1 at $k1" "$dir/md" &&
    grep -q "broker 2 at $k2" "$dir/md" && grep -q "broker 3 at $k3" "$dir/md" &&
    [ "$(grep -c 'partition [0-2], leader [1-3],' "$dir/md")" -eq 3 ]; then
    ok=1
    break
  fi
  sleep 0.2
done
[ "$ok" -eq 1 ] || fail "kcat -L: $(cat "$dir/md")"
grep -q "(controller)" "$dir/md" || fail "no controller in kcat -L: $(cat "$dir/md")"

# produce FIRST LAST: messages k<i%7>:m<i> with acks=all through kcat.
produce() {
  for i in $(seq "$1" "$2"); do echo "k$((i % 7)):m$i"; done >"$dir/in"
  timeout 60 kcat -b "$all" -P -t kt -K: -X acks=all -X message.send.max.retries=10 \
    -X retry.backoff.ms=200 <"$dir/in" || fail "kcat -P exited $?"
}
# check_all N: kcat reads from the beginning exactly m0..m<N-1>, each once,
# in increasing order within each partition, each key on one partition.
check_all() {
  timeout 60 kcat -b "$all" -C -t kt -e -o beginning -f '%p %o %k %s\n' -q >"$dir/read" ||
    fail "kcat -C exited $?"
  $py - "$dir/read" "$1" <<'PY' || fail "read back: $(head -c 2000 "$dir/read")"
import sys, collections
rows = [l.split() for l in open(sys.argv[1]) if l.strip()]
n = int(sys.argv[2])
vals = sorted(int(r[3][1:]) for r in rows)
assert vals == list(range(n)), "values %s..." % vals[:20]
last = collections.defaultdict(lambda: (-1, -1))
part_of = {}
for p, o, k, v in rows:
    p, o, v = int(p), int(o), int(v[1:])
    assert o > last[p][0] and v > last[p][1], "partition %d out of order at offset %d" % (p, o)
    last[p] = (o, v)
    assert part_of.setdefault(k, p) == p, "key %s on two partitions" % k
PY
}

step "kcat produces 50 keyed messages with acks=all and reads them back in order"
produce 0 49
check_all 50

step "acks=0: the leader stores without answering; a node that is not the leader closes the connection"
# As Kafka does: with no answer to carry the error, the closed connection
# is what makes the producer refresh its metadata.
expect 0 "$cli" topic create kz --partitions 1 --replication-factor 3
zl=""
for _ in $(seq 1 100); do
  zl=$(kcat -b "$all" -L -t kz 2>/dev/null | sed -n 's/.*partition 0, leader \([1-3]\),.*/\1/p' | head -1)
  [ -n "$zl" ] && break
  sleep 0.2
done
[ -n "$zl" ] || fail "no leader of kz/0"
$py - "$all" "$zl" <<'PY' || fail "acks=0"
import socket, struct, sys, time
from kafka.record import default_records
addrs, leader = sys.argv[1].split(","), int(sys.argv[2])
def conn(node):
    host, port = addrs[node - 1].rsplit(":", 1)
    return socket.create_connection((host, int(port)), timeout=10)
def frame(key, ver, corr, body):
    b = struct.pack(">hhih", key, ver, corr, 1) + b"c" + body
    return struct.pack(">i", len(b)) + b
def produce_acks0(value, corr):
    b = default_records.DefaultRecordBatchBuilder(2, 0, False, -1, -1, -1, 1 << 20)
    b.append(0, int(time.time() * 1000), b"z", value, [])
    batch = bytes(b.build())
    body = struct.pack(">hhii", -1, 0, 1000, 1) + struct.pack(">h", 2) + b"kz"
    body += struct.pack(">iii", 1, 0, len(batch)) + batch
    return frame(0, 3, corr, body)
other = [n for n in (1, 2, 3) if n != leader][0]
s = conn(other)
s.sendall(produce_acks0(b"to-a-follower", 5))
try:
    closed = s.recv(1) == b""
except ConnectionResetError:
    closed = True
assert closed, "node %d (not the leader) answered or kept an acks=0 Produce's conn" % other
s = conn(leader)
s.sendall(produce_acks0(b"to-the-leader", 6) + frame(18, 0, 7, b""))
size = struct.unpack(">i", s.recv(4, socket.MSG_WAITALL))[0]
corr, err = struct.unpack(">ih", s.recv(size, socket.MSG_WAITALL)[:6])
assert (corr, err) == (7, 0), "after an acks=0 Produce the leader answered corr %d" % corr
print("acks=0: node %d closed the conn, leader %d stored without an answer" % (other, leader))
PY
[ "$(timeout 60 kcat -b "$all" -C -t kz -e -o beginning -q -f '%s\n')" = "to-the-leader" ] ||
  fail "kz/0 does not hold exactly the leader's acks=0 message"

step "SIGKILL the leader of partition 0 between produce and consume"
leader=$(sed -n 's/.*partition 0, leader \([0-9]\),.*/\1/p' "$dir/md" | head -1)
kcat -b "$k1" -L -t kt >"$dir/md" 2>&1 || true
leader=$(sed -n 's/.*partition 0, leader \([0-9]\),.*/\1/p' "$dir/md" | head -1)
[ -n "$leader" ] || fail "no leader of partition 0: $(cat "$dir/md")"
produce 50 99
lpid=$(cat "$cdir/node$leader.pid")
kill -KILL "$lpid"
echo "killed node $leader (pid $lpid)"
check_all 100

step "after the failover kcat produces again and still reads everything once, in order"
produce 100 149
check_all 150

step "kafka-python produces and consumes keyed messages by offset"
$py - "$all" <<'PY' || fail "kafka-python"
import sys
from kafka import KafkaProducer, KafkaConsumer, TopicPartition
bs = sys.argv[1].split(",")
p = KafkaProducer(bootstrap_servers=bs, acks="all", retries=10, retry_backoff_ms=200)
fs = [p.send("kt", key=b"py%d" % (i % 5), value=b"pv%d" % i) for i in range(40)]
p.flush()
sent = {}
for i, f in enumerate(fs):
    md = f.get(timeout=30)
    sent[(md.partition, md.offset)] = b"pv%d" % i
c = KafkaConsumer(bootstrap_servers=bs, group_id=None, enable_auto_commit=False,
                  consumer_timeout_ms=5000)
tps = [TopicPartition("kt", i) for i in range(3)]
c.assign(tps)
c.seek_to_beginning(*tps)
got = {(m.partition, m.offset): m.value for m in c if m.value.startswith(b"pv")}
assert got == sent, "consumed %d of %d" % (len(got), len(sent))
print("kafka-python: %d produced and read back" % len(got))
PY

step "malformed frames close that connection; the node keeps serving"
alive=$k1
[ "$leader" != 1 ] || alive=$k2
$py - "$alive" <<'PY' || fail "malformed frames"
import socket, struct, sys
host, port = sys.argv[1].rsplit(":", 1)
def conn():
    s = socket.create_connection((host, int(port)), timeout=10)
    return s
def closed(s):
    try:
        return s.recv(1) == b""
    except ConnectionResetError:
        return True
def hdr(key, ver, corr):
    return struct.pack(">hhih", key, ver, corr, 1) + b"c"
cases = {
    "zero size": struct.pack(">i", 0),
    "size below a header": struct.pack(">i", 5) + b"\0" * 5,
    "2 GiB length": struct.pack(">I", 0x80000000) + b"\0" * 16,
    "1 GiB length": struct.pack(">I", 0x40000000) + b"\0" * 16,
    "unknown api key": (lambda b: struct.pack(">i", len(b)) + b)(hdr(9999, 0, 7)),
    "truncated metadata": (lambda b: struct.pack(">i", len(b)) + b)(hdr(3, 1, 8) + struct.pack(">i", 5)),
    "truncated produce": (lambda b: struct.pack(">i", len(b)) + b)(hdr(0, 7, 9) + struct.pack(">hhi", -1, -1, 100)),
    # ApiVersions v3's header is flexible: one tagged field of 10 bytes, none sent
    "truncated flexible header": (lambda b: struct.pack(">i", len(b)) + b)(hdr(18, 3, 10) + b"\x01\x00\x0a"),
    # a tagged-field count no encoder makes (a varint of 6 bytes)
    "malformed tagged fields": (lambda b: struct.pack(">i", len(b)) + b)(hdr(18, 3, 11) + b"\xff" * 6),
}
for name, data in cases.items():
    s = conn()
    s.sendall(data)
    assert closed(s), name + ": not closed"
    s.close()
# an ApiVersions version not offered is answered (v0 layout, UNSUPPORTED_VERSION)
s = conn()
b = hdr(18, 9, 42)
s.sendall(struct.pack(">i", len(b)) + b)
size = struct.unpack(">i", s.recv(4, socket.MSG_WAITALL))[0]
body = s.recv(size, socket.MSG_WAITALL)
corr, err = struct.unpack(">ih", body[:6])
assert corr == 42 and err == 35, (corr, err)
# a Metadata version not offered: answered, the conn stays usable
b = hdr(3, 99, 43)
s.sendall(struct.pack(">i", len(b)) + b)
size = struct.unpack(">i", s.recv(4, socket.MSG_WAITALL))[0]
body = s.recv(size, socket.MSG_WAITALL)
assert struct.unpack(">ih", body[:6]) == (43, 35), body[:6]
# a truncated frame (header sent, the rest never): the others go on
t = conn()
t.sendall(struct.pack(">i", 100) + b"\0\3")
b = hdr(18, 0, 44)
s.sendall(struct.pack(">i", len(b)) + b)
size = struct.unpack(">i", s.recv(4, socket.MSG_WAITALL))[0]
body = s.recv(size, socket.MSG_WAITALL)
assert struct.unpack(">ih", body[:6]) == (44, 0), body[:6]
t.close()
print("malformed frames: every case closed, others served")
PY

step "the Kafka port's requests are in /metrics, by Kafka's api and error names"
alive_node=1
[ "$alive" = "$k1" ] || alive_node=2
metrics() { curl -fsS "http://127.0.0.1:$((base + 10 * ($1 - 1) + 2))/metrics"; }
# metric NODE SERIES: its value on that node (0 when absent or the node is down)
metric() { { metrics "$1" 2>/dev/null || true; } | awk -v s="$2" '$1 == s {v = $2} END {print v + 0}'; }
# metric_sum SERIES: summed over the nodes that are up (the leader killed above is not)
metric_sum() { local t=0 i; for i in 1 2 3; do t=$((t + $(metric $i "$1"))); done; echo $t; }
for s in 'cairn_kafka_requests_total{api="Metadata",code="CLOSED"}' \
  'cairn_kafka_requests_total{api="Produce",code="CLOSED"}' \
  'cairn_kafka_requests_total{api="other",code="CLOSED"}' \
  'cairn_kafka_requests_total{api="ApiVersions",code="UNSUPPORTED_VERSION"}' \
  'cairn_kafka_requests_total{api="Metadata",code="UNSUPPORTED_VERSION"}'; do
  [ "$(metric $alive_node "$s")" -ge 1 ] || fail "node $alive_node: $s is not counted: $(metrics $alive_node | grep '^cairn_kafka_requests_total')"
done
# what the clients above did, on whichever nodes led
produced=$(metric_sum 'cairn_kafka_requests_total{api="Produce",code="NONE"}')
timed=$(metric_sum 'cairn_kafka_request_duration_seconds_count{api="Produce"}')
fetched=$(metric_sum 'cairn_kafka_request_duration_seconds_count{api="Fetch"}')
[ "$produced" -ge 1 ] && [ "$timed" -ge "$produced" ] && [ "$fetched" -ge 1 ] ||
  fail "Kafka Produce/Fetch not counted: produced $produced, timed $timed, fetched $fetched"
[ "$(metric_sum cairn_kafka_connections_accepted_total)" -ge 10 ] || fail "Kafka connections not counted"
echo "metrics: $produced Produce answered without error, $fetched Fetch timed"
expect 0 timeout 20 kcat -b "$alive" -L -t kt
out_has "partition 0"

echo "PASS"
