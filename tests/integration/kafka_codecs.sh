#!/usr/bin/env bash
# kafka_codecs.sh - every Kafka codec through the Kafka port on a 3-node
# cluster (docs/kafka.md, "Compression"): kcat produces with -z gzip,
# snappy, lz4 and zstd, kafka-python with compression_type gzip, snappy
# (xerial framing), lz4 and zstd, and a raw Produce carries a raw-snappy
# batch (librdkafka's form, built by hand too); the stored batches hold all
# four codecs, each of kcat's batches the codec it was sent with (librdkafka
# 2.0.2 compresses gzip, snappy and lz4 only because Produce is listed from
# version 0, docs/kafka.md), and a Produce v0-v2 is answered
# UNSUPPORTED_VERSION; the partition leader is SIGKILLed;
# then kcat, kafka-python and `cairn consume` each read back every
# acknowledged message exactly once, in order. A gzip, an lz4 and a zstd
# batch each with a good CRC and garbage records are stored as Kafka
# stores them (acknowledged, never decompressed by the broker, the bytes on
# disk the bytes sent), and `cairn consume` stops at each with a clear
# error naming its offset, then reads on from past it.
#
# Usage: kafka_codecs.sh CAIRN CAIRND
set -euo pipefail
CLI_TEST_TAG=kcodecs
. "$(dirname "$0")/../lib/cli_test.sh"
py=/usr/bin/python3 # Debian's, where python3-kafka and its codecs are installed
command -v kcat >/dev/null || fail "kcat is not installed (deploy/setup.sh)"
$py -c 'import kafka, snappy, lz4.frame, zstandard' 2>/dev/null ||
  fail "python3-kafka, python3-snappy, python3-lz4, python3-zstandard: deploy/setup.sh installs them"

step "start a 3-node cluster"
start_cluster3
k1="127.0.0.1:$((base + 3))"
k2="127.0.0.1:$((base + 13))"
k3="127.0.0.1:$((base + 23))"
all="$k1,$k2,$k3"
expect 0 "$cli" topic create kc --partitions 1 --replication-factor 3
expect 0 "$cli" topic create kbad --partitions 1 --replication-factor 3

# rawprod.py MODE BOOTSTRAP TOPIC PAD: one Produce v3 (acks=-1) of a batch
# built here, to the partition's leader; prints the base offset acked.
#   rawsnappy  20 records "rs<i>|raw-snappy-<i>-PAD", snappy as one raw block
#   badgzip, badlz4, badzstd  that codec in the attributes, 2 records' worth
#              of garbage (bytes 7..70) in place of compressed records, a
#              good CRC
cat >"$dir/rawprod.py" <<'PY'
import struct, sys, time
import snappy
from kafka.client_async import KafkaClient
from kafka.protocol.produce import ProduceRequest
from kafka.record import default_records
from kafka.record.util import calc_crc32c
from kafka.structs import TopicPartition
mode, bs, topic, pad = sys.argv[1], sys.argv[2].split(","), sys.argv[3], sys.argv[4]
now = int(time.time() * 1000)
if mode == "rawsnappy":
    default_records.snappy_encode = snappy.compress  # a raw block, no xerial framing
    b = default_records.DefaultRecordBatchBuilder(2, 2, False, -1, -1, -1, 1 << 20)
    for i in range(20):
        b.append(i, now, b"rs%d" % i, ("raw-snappy-%d-%s" % (i, pad)).encode(), [])
    batch = bytes(b.build())
    assert struct.unpack_from(">h", batch, 21)[0] & 7 == 2, "not a snappy batch"
    assert not batch[61:].startswith(b"\x82SNAPPY"), "xerial framing, not a raw block"
else:
    codec = {"badgzip": 1, "badlz4": 3, "badzstd": 4}[mode]
    tail = struct.pack(">hiqqqhii", codec, 1, now, now, -1, -1, -1, 2) + bytes(range(7, 71))
    head = struct.pack(">qiib", 0, 4 + 1 + 4 + len(tail), -1, 2)
    batch = head + struct.pack(">I", calc_crc32c(tail)) + tail
cl = KafkaClient(bootstrap_servers=bs)
tp = TopicPartition(topic, 0)
leader = None
for _ in range(100):
    cl.poll(future=cl.cluster.request_update(), timeout_ms=2000)
    leader = cl.cluster.leader_for_partition(tp)
    if leader is not None and leader >= 0:
        break
    time.sleep(0.1)
assert leader is not None and leader >= 0, "no leader for %s/0" % topic
for _ in range(100):
    if cl.ready(leader):
        break
    cl.poll(timeout_ms=100)
req = ProduceRequest[3](transactional_id=None, required_acks=-1, timeout=10000,
                        topics=[(topic, [(0, batch)])])
f = cl.send(leader, req)
cl.poll(future=f, timeout_ms=15000)
assert f.succeeded(), f.exception
part = f.value.topics[0][1][0]
assert part[1] == 0, "answered %r" % (part,)
print(part[2])
PY

# Values long and repetitive enough that every codec really compresses.
pad=$(printf 'x%.0s' $(seq 1 200))
: >"$dir/expected"

step "kcat produces 60 keyed messages with each codec (acks=all)"
for z in gzip snappy lz4 zstd; do
  for i in $(seq 0 59); do echo "k$i|kcat-$z-$i-$pad"; done >"$dir/in"
  cat "$dir/in" >>"$dir/expected"
  timeout 60 kcat -b "$all" -P -t kc -K'|' -z "$z" -X acks=all -X linger.ms=20 \
    -X message.send.max.retries=10 -X retry.backoff.ms=200 <"$dir/in" ||
    fail "kcat -P -z $z exited $?"
done

step "kafka-python produces 60 keyed messages with each codec (acks=all)"
for z in gzip snappy lz4 zstd; do
  for i in $(seq 0 59); do echo "py$i|py-$z-$i-$pad"; done >>"$dir/expected"
done
$py - "$all" "$pad" <<'PY' || fail "kafka-python produce"
import sys
from kafka import KafkaProducer
bs, pad = sys.argv[1].split(","), sys.argv[2]
for z in ("gzip", "snappy", "lz4", "zstd"):
    p = KafkaProducer(bootstrap_servers=bs, acks="all", retries=10, retry_backoff_ms=200,
                      compression_type=z, linger_ms=20, max_in_flight_requests_per_connection=1)
    fs = [p.send("kc", key=b"py%d" % i, value=("py-%s-%d-%s" % (z, i, pad)).encode())
          for i in range(60)]
    p.flush()
    offs = [f.get(timeout=30).offset for f in fs]
    assert offs == sorted(offs), "%s: acknowledged out of order: %s" % (z, offs)
    p.close()
print("kafka-python: 4 x 60 produced")
PY
step "a raw Produce carries a raw-snappy batch (librdkafka's form of snappy)"
off=$($py "$dir/rawprod.py" rawsnappy "$all" kc "$pad") || fail "raw snappy produce"
[ "$off" -eq 480 ] || fail "raw snappy batch acked at offset $off, want 480"
for i in $(seq 0 19); do echo "rs$i|raw-snappy-$i-$pad"; done >>"$dir/expected"
n=$(wc -l <"$dir/expected")
[ "$n" -eq 500 ] || fail "expected 500 lines, built $n"

# stored.py LOGDIR: every stored batch of a partition's segments, one
# line each: base offset, Cairn codec number, the records section in hex.
cat >"$dir/stored.py" <<'PY'
import glob, struct, sys
for seg in sorted(glob.glob(sys.argv[1] + "/*.log")):
    d = open(seg, "rb").read()
    pos = 0
    while pos + 66 <= len(d):
        blen = struct.unpack_from("<i", d, pos + 8)[0]
        if blen <= 0:
            break
        print(struct.unpack_from("<q", d, pos)[0], struct.unpack_from("<H", d, pos + 26)[0] & 7,
              d[pos + 66:pos + 12 + blen].hex())
        pos += blen + 12
PY

step "the stored batches hold every codec, as the producers sent them"
node_log=$(ls -d "$cdir"/node*/partitions/kc-0.*/log | head -1)
$py "$dir/stored.py" "$node_log" >"$dir/stored" || fail "reading the stored batches"
$py - "$dir/stored" <<'PY' || fail "stored codecs"
import sys
seen = [tuple(map(int, line.split()[:2])) for line in open(sys.argv[1])]
print("stored (offset, cairn codec):", seen)
names = {1: "lz4", 2: "zstd", 3: "gzip", 4: "snappy"}
missing = [names[c] for c in names if c not in {c for _, c in seen}]
assert not missing, "no stored batch with codec " + ", ".join(missing)
# kcat sent offsets 0-59 with gzip, 60-119 snappy, 120-179 lz4, 180-239 zstd
for first, codec in ((0, 3), (60, 4), (120, 1), (180, 2)):
    got = {c for off, c in seen if first <= off < first + 60}
    assert got == {codec}, "kcat's %s batches at %d-%d stored with codecs %s" % (
        names[codec], first, first + 59, sorted(got))
print("kcat's gzip, snappy, lz4 and zstd batches stored compressed, as sent")
PY

step "Produce is listed from version 0 (as Kafka 4.0 lists it) but v0-v2 are refused"
$py - "$k1" <<'PY' || fail "Produce versions"
import socket, struct, sys
host, port = sys.argv[1].rsplit(":", 1)
s = socket.create_connection((host, int(port)), timeout=10)
def call(key, ver, corr, body=b""):
    b = struct.pack(">hhih", key, ver, corr, 1) + b"c" + body
    s.sendall(struct.pack(">i", len(b)) + b)
    size = struct.unpack(">i", s.recv(4, socket.MSG_WAITALL))[0]
    return s.recv(size, socket.MSG_WAITALL)
r = call(18, 0, 1)  # ApiVersions v0: error, [api_key, min, max]
err, n = struct.unpack_from(">hi", r, 4)
apis = {k: (lo, hi) for k, lo, hi in (struct.unpack_from(">hhh", r, 10 + 6 * i) for i in range(n))}
assert err == 0 and apis[0] == (0, 7), apis.get(0)
for v in (0, 1, 2):  # acks -1, timeout, no topics: refused before the body is read
    r = call(0, v, 10 + v, struct.pack(">hii", -1, 1000, 0))
    assert struct.unpack(">ih", r[:6]) == (10 + v, 35), (v, r[:6])
r = call(18, 0, 20)  # the conn is still served
assert struct.unpack(">ih", r[:6]) == (20, 0)
print("Produce listed 0-7, v0-v2 answered UNSUPPORTED_VERSION")
PY

step "SIGKILL the leader of kc/0; every acknowledged message is still there"
kcat -b "$all" -L -t kc >"$dir/md" 2>&1 || true
leader=$(sed -n 's/.*partition 0, leader \([0-9]\),.*/\1/p' "$dir/md" | head -1)
[ -n "$leader" ] || fail "no leader of kc/0: $(cat "$dir/md")"
lpid=$(cat "$cdir/node$leader.pid")
kill -KILL "$lpid"
echo "killed node $leader (pid $lpid)"

step "kcat reads back every message exactly, in order"
timeout 90 kcat -b "$all" -C -t kc -e -o beginning -f '%k|%s\n' -q >"$dir/kcat.out" ||
  fail "kcat -C exited $?"
diff "$dir/expected" "$dir/kcat.out" >"$dir/diff" || fail "kcat read back: $(head -c 1500 "$dir/diff")"

step "kafka-python reads back every message exactly, in order"
$py - "$all" >"$dir/py.out" <<'PY' || fail "kafka-python consume"
import sys
from kafka import KafkaConsumer, TopicPartition
c = KafkaConsumer(bootstrap_servers=sys.argv[1].split(","), group_id=None,
                  enable_auto_commit=False, consumer_timeout_ms=8000)
tp = TopicPartition("kc", 0)
c.assign([tp])
c.seek_to_beginning(tp)
for m in c:
    sys.stdout.write("%s|%s\n" % (m.key.decode(), m.value.decode()))
PY
diff "$dir/expected" "$dir/py.out" >"$dir/diff" ||
  fail "kafka-python read back: $(head -c 1500 "$dir/diff")"

step "cairn consume reads back every message exactly, in order"
expect 0 timeout 90 "$cli" consume kc -e -f '%k|%v\n'
diff "$dir/expected" "$dir/out" >"$dir/diff" ||
  fail "cairn consume read back: $(head -c 1500 "$dir/diff")"

step "gzip, lz4 and zstd batches with a good CRC and garbage records are stored as sent"
# kbad: good 0-2, bad gzip 3-4, good 5-7, bad lz4 8-9, good 10-12, bad zstd
# 13-14, good 15-17 (the good ones gzip from kcat).
good() { # good FROM: three good messages g<FROM>..g<FROM+2> into kbad, kept in $dir/good<FROM>
  for i in $(seq "$1" $(($1 + 2))); do echo "g$i|good-$i-$pad"; done >"$dir/good$1"
  timeout 60 kcat -b "$all" -P -t kbad -K'|' -z gzip -X acks=all <"$dir/good$1" ||
    fail "kcat -P kbad"
}
good 0
at=3
for z in gzip lz4 zstd; do
  off=$($py "$dir/rawprod.py" "bad$z" "$all" kbad "$pad") || fail "raw produce of a bad $z batch"
  [ "$off" -eq "$at" ] || fail "bad $z batch acked at offset $off, want $at"
  good $((at + 2))
  at=$((at + 5))
done

step "the bad batches are on disk as sent, with their codecs"
# On a node still running (node $leader was killed): with one of three
# down, an acknowledged batch is on both of the others.
bad_log=$(ls -d "$cdir"/node*/partitions/kbad-0.*/log | grep -v "/node$leader/" | head -1)
$py "$dir/stored.py" "$bad_log" >"$dir/stored" || fail "reading the stored batches"
$py - "$dir/stored" <<'PY' || fail "stored bad batches"
import sys
found = {}
for line in open(sys.argv[1]):
    off, codec, recs = line.split()
    found[int(off)] = (int(codec), bytes.fromhex(recs))
for off, codec, name in ((3, 3, "gzip"), (8, 1, "lz4"), (13, 2, "zstd")):
    assert off in found, "no stored batch at %d: %s" % (off, sorted(found))
    c, recs = found[off]
    assert c == codec, "%s batch at %d stored with codec %d" % (name, off, c)
    assert recs == bytes(range(7, 71)), "%s batch at %d: records not as sent" % (name, off)
print("bad gzip, lz4, zstd batches stored as sent at 3, 8, 13")
PY

at=0
for z in gzip lz4 zstd; do
  step "cairn consume from $at prints what comes before the bad $z batch, then stops clearly"
  expect 1 timeout 60 "$cli" consume kbad -o "$at" -e -f '%k|%v\n'
  diff "$dir/good$at" "$dir/out" >"$dir/diff" || fail "before the bad $z batch: $(cat "$dir/diff")"
  err_has "kbad partition 0 at offset $((at + 3)): data is corrupt"
  err_has "cannot be decoded"
  at=$((at + 5))
done
step "cairn consume reads on from past the last bad batch"
expect 0 timeout 60 "$cli" consume kbad -o 15 -e -f '%k|%v\n'
diff "$dir/good15" "$dir/out" >"$dir/diff" || fail "after the bad batches: $(cat "$dir/diff")"

echo "PASS"
