#!/usr/bin/env bash
# kafka_sasl.sh - SASL SCRAM-SHA-256 and SCRAM-SHA-512 on the Kafka port
# of a node started with --auth required and --authorizer acl
# (docs/kafka.md): kafka-python
# (SaslHandshake v0, then raw tokens) and kcat (librdkafka: SaslHandshake
# v1, then SaslAuthenticate) produce and consume with good credentials;
# a bad password is refused (kcat prints why, the node logs it); a conn
# that has not authenticated gets ApiVersions and nothing else (a
# Metadata or Produce closes it); and the ACLs apply to the authenticated
# user as to a native client.
#
# Usage: kafka_sasl.sh CAIRN CAIRND
set -euo pipefail
CLI_TEST_TAG=kafkasasl
. "$(dirname "$0")/../lib/cli_test.sh"
py=/usr/bin/python3 # Debian's, where python3-kafka is installed
command -v kcat >/dev/null || fail "kcat is not installed (deploy/setup.sh)"
$py -c 'import kafka' 2>/dev/null || fail "python3-kafka is not installed (deploy/setup.sh)"

step "start a node with --auth required, ACLs and a Kafka port; users admin, alice, bob"
start_acl_node alice bob
wait_alive 1 "$cli" --user admin
expect 0 "$cli" --user admin topic create ks --partitions 2 --replication-factor 1
expect 0 "$cli" --user admin acl add --principal User:alice --topic ks --operation read,write
expect 0 "$cli" --user admin acl add --principal User:bob --topic ks --operation read

step "not authenticated: ApiVersions is answered (listing SaslHandshake 0-1, SaslAuthenticate 0-1); Metadata and Produce close the conn"
$py - "$kafka" <<'PY' || fail "unauthenticated"
import socket, struct, sys
host, port = sys.argv[1].rsplit(":", 1)
def conn():
    return socket.create_connection((host, int(port)), timeout=10)
def closed(s):
    try:
        return s.recv(1) == b""
    except ConnectionResetError:
        return True
def frame(key, ver, corr, body=b""):
    b = struct.pack(">hhih", key, ver, corr, 1) + b"t" + body
    return struct.pack(">i", len(b)) + b
s = conn()
s.sendall(frame(18, 0, 1))
size = struct.unpack(">i", s.recv(4, socket.MSG_WAITALL))[0]
body = s.recv(size, socket.MSG_WAITALL)
corr, err, n = struct.unpack(">ihi", body[:10])
apis = {struct.unpack(">h", body[10 + 6 * i:12 + 6 * i])[0]:
        struct.unpack(">hh", body[12 + 6 * i:16 + 6 * i]) for i in range(n)}
assert err == 0 and apis[17] == (0, 1) and apis[36] == (0, 1), apis
s.sendall(frame(3, 1, 2, struct.pack(">i", -1)))
assert closed(s), "Metadata before authentication answered"
s = conn()
# Produce v3: transactional_id null, acks -1, timeout, one topic, one partition, empty records
s.sendall(frame(0, 3, 3, struct.pack(">hhii", -1, -1, 1000, 1) + struct.pack(">h", 2) + b"ks" +
                struct.pack(">iii", 1, 0, 0)))
assert closed(s), "Produce before authentication answered"
print("unauthenticated: ApiVersions only")
PY
grep -q "before SASL authentication" "$cdir/node1.log" || fail "no log line for the refused request"

step "kafka-python (SaslHandshake v0, raw tokens) produces and consumes as alice"
timeout 90 $py - "$kafka" <<'PY' || fail "kafka-python SASL"
import sys, time
from kafka import KafkaProducer, KafkaConsumer, TopicPartition
bs = [sys.argv[1]]
sasl = dict(security_protocol="SASL_PLAINTEXT", sasl_mechanism="SCRAM-SHA-256",
            sasl_plain_username="alice", sasl_plain_password="alice-pw")
p = KafkaProducer(bootstrap_servers=bs, acks="all", retries=5, **sasl)
sent = {}
for i in range(20):
    md = p.send("ks", key=b"k%d" % (i % 3), value=b"py%d" % i).get(timeout=30)
    sent[(md.partition, md.offset)] = b"py%d" % i
p.close()
c = KafkaConsumer(bootstrap_servers=bs, group_id=None, enable_auto_commit=False, **sasl)
tps = [TopicPartition("ks", i) for i in range(2)]
c.assign(tps)
c.seek_to_beginning(*tps)
got, deadline = {}, time.time() + 30
while len(got) < len(sent) and time.time() < deadline:
    for ms in c.poll(timeout_ms=200).values():
        got.update(((m.partition, m.offset), m.value) for m in ms)
assert got == sent, (len(got), len(sent))
print("kafka-python: 20 produced and read back as alice")
PY

step "kcat (SaslHandshake v1, SaslAuthenticate) produces and consumes as alice"
kc=(-b "$kafka" -X security.protocol=SASL_PLAINTEXT -X sasl.mechanisms=SCRAM-SHA-256)
seq 1 15 | sed 's/^/kc/' >"$dir/in"
expect 0 timeout 60 kcat "${kc[@]}" -X sasl.username=alice -X sasl.password=alice-pw -P -t ks -p 1 -X acks=all "$dir/in"
expect 0 timeout 60 kcat "${kc[@]}" -X sasl.username=alice -X sasl.password=alice-pw -C -t ks -p 1 -e -o beginning -q
[ "$(grep -c '^kc' "$dir/out")" -eq 15 ] || fail "kcat read back: $(cat "$dir/out")"
grep '^kc' "$dir/out" | diff - "$dir/in" >/dev/null || fail "kcat read back out of order: $(cat "$dir/out")"
grep -q "authenticated as User:alice" "$cdir/node1.log" || fail "no authentication logged"

step "SCRAM-SHA-512 (as managed Kafka services offer it): kcat and kafka-python log in as alice, a wrong password is refused"
k5=(-b "$kafka" -X security.protocol=SASL_PLAINTEXT -X sasl.mechanisms=SCRAM-SHA-512)
seq 1 10 | sed 's/^/k5-/' >"$dir/in5"
expect 0 timeout 60 kcat "${k5[@]}" -X sasl.username=alice -X sasl.password=alice-pw -P -t ks -p 0 -X acks=all "$dir/in5"
expect 0 timeout 60 kcat "${k5[@]}" -X sasl.username=alice -X sasl.password=alice-pw -C -t ks -p 0 -e -o beginning -q
grep '^k5-' "$dir/out" | diff - "$dir/in5" >/dev/null || fail "kcat SCRAM-SHA-512 read back: $(cat "$dir/out")"
expect 1 timeout 30 kcat "${k5[@]}" -X sasl.username=alice -X sasl.password=wrong -L -m 5
grep -qi "Authentication failed" "$dir/err" || fail "kcat's error: $(cat "$dir/err")"
timeout 90 $py - "$kafka" <<'PY' || fail "kafka-python SCRAM-SHA-512"
import sys, time
from kafka import KafkaProducer, KafkaConsumer, TopicPartition
from kafka.errors import NoBrokersAvailable, KafkaError
bs = [sys.argv[1]]
sasl = dict(security_protocol="SASL_PLAINTEXT", sasl_mechanism="SCRAM-SHA-512",
            sasl_plain_username="alice", sasl_plain_password="alice-pw")
p = KafkaProducer(bootstrap_servers=bs, acks="all", retries=5, **sasl)
md = [p.send("ks", partition=0, value=b"py512-%d" % i).get(timeout=30) for i in range(5)]
p.close()
c = KafkaConsumer(bootstrap_servers=bs, group_id=None, enable_auto_commit=False, **sasl)
tp = TopicPartition("ks", 0)
c.assign([tp])
c.seek(tp, md[0].offset)
got, deadline = [], time.time() + 30
while len(got) < 5 and time.time() < deadline:
    for ms in c.poll(timeout_ms=200).values():
        got += [m.value for m in ms]
assert got[:5] == [b"py512-%d" % i for i in range(5)], got
c.close()
try:
    KafkaProducer(bootstrap_servers=bs, security_protocol="SASL_PLAINTEXT",
                  sasl_mechanism="SCRAM-SHA-512", sasl_plain_username="alice",
                  sasl_plain_password="wrong", api_version_auto_timeout_ms=5000)
    raise AssertionError("connected with a wrong password")
except (NoBrokersAvailable, KafkaError) as e:
    print("kafka-python SCRAM-SHA-512: 5 produced and read back; a wrong password refused:", type(e).__name__)
PY

step "a bad password is refused: kcat says why, kafka-python cannot connect"
expect 1 timeout 30 kcat "${kc[@]}" -X sasl.username=alice -X sasl.password=wrong -L -m 5
grep -qi "Authentication failed" "$dir/err" || fail "kcat's error: $(cat "$dir/err")"
timeout 60 $py - "$kafka" <<'PY' || fail "kafka-python bad password"
import sys
from kafka import KafkaProducer
from kafka.errors import NoBrokersAvailable, KafkaError
try:
    KafkaProducer(bootstrap_servers=[sys.argv[1]], security_protocol="SASL_PLAINTEXT",
                  sasl_mechanism="SCRAM-SHA-256", sasl_plain_username="alice",
                  sasl_plain_password="wrong", api_version_auto_timeout_ms=5000)
    raise AssertionError("connected with a wrong password")
except (NoBrokersAvailable, KafkaError) as e:
    print("kafka-python refused:", type(e).__name__)
PY
grep -q "SASL (raw tokens) refused" "$cdir/node1.log" || fail "no log line for the raw refusal"

step "the ACLs apply to the authenticated user: bob may read ks but not write it"
expect 0 timeout 60 kcat "${kc[@]}" -X sasl.username=bob -X sasl.password=bob-pw -C -t ks -p 1 -e -o beginning -q
[ "$(grep -c '^kc' "$dir/out")" -eq 15 ] || fail "bob's read: $(cat "$dir/out")"
echo bobs >"$dir/bob"
expect 1 timeout 60 kcat "${kc[@]}" -X sasl.username=bob -X sasl.password=bob-pw -P -t ks -p 0 -X acks=all \
  -X message.timeout.ms=10000 "$dir/bob"
grep -qi "authoriz" "$dir/err" || fail "bob's produce error: $(cat "$dir/err")"
expect 0 "$cli" --user admin consume ks -p 0 -e
! grep -q bobs "$dir/out" || fail "bob's refused message was stored"

echo "PASS"
