#!/usr/bin/env bash
# kafka_tls.sh - TLS on the Kafka port (docs/kafka.md, "TLS and SASL_SSL"),
# with certificates made here by openssl (the recipe of test_tls.c):
#  - a 3-node cluster with --tls-cert/--tls-key/--tls-ca (mutual TLS):
#    kcat -L over SSL names every broker at its Kafka address, unchanged;
#    confluent-kafka creates a topic and produces with acks=all across a
#    SIGKILL of partition 0's leader, and every acknowledged message is
#    read back once, at its acknowledged offset, in order; kcat and
#    kafka-python (security_protocol='SSL') produce and read back; kcat
#    with SASL_SSL and a client certificate logs in as another user; a
#    client without a certificate, a plaintext client and plaintext
#    garbage are refused with a log line, and the nodes go on serving;
#  - one node with TLS (no client certificates) and --auth required:
#    kafka-python and kcat with SASL_SSL / SCRAM-SHA-256, then with
#    SASL_SSL / PLAIN (checked against the SCRAM credential), produce and
#    read back, a wrong password or user refused; SSL without a login is
#    refused; after its certificate files are
#    replaced and SIGHUP, new TLS connections to its Kafka port (and client
#    port) get the new certificate and kcat reads back through it;
#  - one node without TLS: a TLS client is closed with a log line that says
#    so, and plaintext clients still work; PLAIN is not offered there.
#
# Usage: kafka_tls.sh CAIRN CAIRND
set -euo pipefail
CLI_TEST_TAG=kafkatls
. "$(dirname "$0")/../lib/cli_test.sh"
py=/usr/bin/python3 # Debian's, where python3-kafka and python3-confluent-kafka are
command -v kcat >/dev/null || fail "kcat is not installed (deploy/setup.sh)"
command -v openssl >/dev/null || fail "openssl is not installed (deploy/setup.sh)"
$py -c 'import kafka, confluent_kafka' 2>/dev/null ||
  fail "python3-kafka or python3-confluent-kafka is not installed (deploy/setup.sh)"

step() { echo "== [${SECONDS}s] $*"; }

# kafka_python_roundtrip ADDR TOPIC PROTOCOL N [MECHANISM]: kafka-python
# produces N messages to partition 0 of TOPIC with acks=all over PROTOCOL
# (SSL with alice's certificate, or SASL_SSL as alice with MECHANISM,
# SCRAM-SHA-256 by default), then reads exactly them back from the first
# one's offset.
kafka_python_roundtrip() {
  timeout 90 $py - "$@" "$t" <<'PY' || fail "kafka-python over $3"
import sys, time
from kafka import KafkaProducer, KafkaConsumer, TopicPartition
bs, topic, proto, n = [sys.argv[1]], sys.argv[2], sys.argv[3], int(sys.argv[4])
mech, t = (sys.argv[5], sys.argv[6]) if len(sys.argv) > 6 else ("SCRAM-SHA-256", sys.argv[5])
sec = dict(security_protocol=proto, ssl_cafile=t + "/ca.pem")
if proto == "SSL":
    sec.update(ssl_certfile=t + "/alice.pem", ssl_keyfile=t + "/alice.key")
else:
    sec.update(sasl_mechanism=mech, sasl_plain_username="alice",
               sasl_plain_password="alice-pw")
p = KafkaProducer(bootstrap_servers=bs, acks="all", retries=5, **sec)
sent = [p.send(topic, value=b"py%d" % i, partition=0).get(timeout=30) for i in range(n)]
p.close()
c = KafkaConsumer(bootstrap_servers=bs, group_id=None, enable_auto_commit=False, **sec)
tp = TopicPartition(topic, 0)
c.assign([tp])
c.seek(tp, sent[0].offset)
got, deadline = [], time.time() + 30
while len(got) < n and time.time() < deadline:
    for ms in c.poll(timeout_ms=200).values():
        got.extend(m.value for m in ms)
assert got == [b"py%d" % i for i in range(n)], got
print("kafka-python: %d produced and read back over %s (%s)" % (n, proto, mech))
PY
}

step "certificates: a CA, the nodes' certificate (IP 127.0.0.1), a client certificate for alice"
t="$dir/tls"
mkdir -p "$t"
(
  cd "$t"
  printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\n' >san.ext
  # P-256 keys: made in milliseconds where RSA keys take seconds on a busy machine.
  ec=(-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes)
  openssl req -x509 "${ec[@]}" -keyout ca.key -out ca.pem -days 30 -subj /CN=ca 2>/dev/null
  for who in node alice; do
    openssl req "${ec[@]}" -keyout $who.key -out $who.csr -subj /CN=$who 2>/dev/null
  done
  openssl x509 -req -in node.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out node.pem -days 30 \
    -extfile san.ext 2>/dev/null
  openssl x509 -req -in alice.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out alice.pem -days 30 \
    2>/dev/null
) || fail "openssl could not make the certificates"

# Node I (1..5) uses base+10(I-1) .. +3: client, cluster, admin, Kafka.
base=$(free_base_port 5)
port() { echo $((base + 10 * ($1 - 1) + $2)); }
kafka() { echo "127.0.0.1:$(port "$1" 3)"; }
mkdir -p "$cdir"
start_node() { # I ARGS...
  local i=$1
  shift
  "$cairnd" --data-dir "$cdir/node$i" --listen "127.0.0.1:$(port "$i" 0)" \
    --cluster-listen "127.0.0.1:$(port "$i" 1)" --admin-listen "127.0.0.1:$(port "$i" 2)" \
    --kafka-listen "$(kafka "$i")" "$@" </dev/null >>"$cdir/node$i.log" 2>&1 &
  pids+=($!)
  echo $! >"$cdir/node$i.pid"
}
mtls=(--tls-cert "$t/node.pem" --tls-key "$t/node.key" --tls-ca "$t/ca.pem")
cli_mtls=(--tls-ca "$t/ca.pem" --tls-cert "$t/alice.pem" --tls-key "$t/alice.key")

step "start a 3-node cluster with mutual TLS, a TLS node with --auth required, a plaintext node"
voters="1@127.0.0.1:$(port 1 1),2@127.0.0.1:$(port 2 1),3@127.0.0.1:$(port 3 1)"
for i in 1 2 3; do start_node "$i" --node-id "$i" --voters "$voters" "${mtls[@]}"; done
# Node 4's own copy of the certificate: the SIGHUP step below renews it.
cp "$t/node.pem" "$t/node4.pem"
cp "$t/node.key" "$t/node4.key"
start_node 4 --tls-cert "$t/node4.pem" --tls-key "$t/node4.key" --auth required
start_node 5
ready=0
for _ in $(seq 1 300); do
  ready=1
  for i in 1 2 3; do
    st=$("$cli" -b "127.0.0.1:$(port "$i" 0)" "${cli_mtls[@]}" --timeout-ms 2000 cluster status --json 2>/dev/null) || ready=0
    grep -q '"controller_id": *[1-9]' <<<"$st" || ready=0
    [ "$(grep -c '"state": *"alive"' <<<"$st")" -ge 3 ] || ready=0
    [ "$ready" -eq 1 ] || break
  done
  [ "$ready" -eq 0 ] || break
  sleep 0.3
done
[ "$ready" -eq 1 ] || fail "the TLS cluster did not come up"
grep -q "Kafka port .*: TLS (SSL, SASL_SSL), client certificates required" "$cdir/node1.log" ||
  fail "node 1 does not say its Kafka port has TLS"

all="$(kafka 1),$(kafka 2),$(kafka 3)"
ssl=(-X security.protocol=ssl -X "ssl.ca.location=$t/ca.pem"
  -X "ssl.certificate.location=$t/alice.pem" -X "ssl.key.location=$t/alice.key")

step "kcat -L over SSL: every broker at its Kafka address, unchanged"
expect 0 timeout 30 kcat -b "$(kafka 2)" "${ssl[@]}" -L -m 10
for i in 1 2 3; do
  grep -q "broker $i at $(kafka "$i")" "$dir/out" || fail "kcat -L lacks broker $i at $(kafka "$i"): $(cat "$dir/out")"
done

step "confluent-kafka over SSL: create, produce with acks=all across a leader SIGKILL, read back"
timeout 150 $py - "$all" "$cdir" "$t" <<'PY' || fail "confluent-kafka over SSL"
import sys, os, signal, time
from confluent_kafka import Producer, Consumer, TopicPartition, KafkaError, OFFSET_BEGINNING
from confluent_kafka.admin import AdminClient, NewTopic
bs, cdir, t = sys.argv[1:4]
conf = {"bootstrap.servers": bs, "security.protocol": "ssl", "ssl.ca.location": t + "/ca.pem",
        "ssl.certificate.location": t + "/alice.pem", "ssl.key.location": t + "/alice.key"}
topic, nparts, n = "tls", 2, 400
admin = AdminClient(conf)
for f in admin.create_topics([NewTopic(topic, nparts, 3)], operation_timeout=30).values():
    f.result(timeout=60)
victim = -1
for _ in range(100):
    md = admin.list_topics(topic, timeout=10).topics[topic]
    if md.error is None and 0 in md.partitions and md.partitions[0].leader > 0:
        victim = md.partitions[0].leader
        break
    time.sleep(0.1)
assert victim > 0, "no leader for partition 0"

acked, failed = {}, []
def on_delivery(err, m):
    if err is None:
        acked[m.value()] = (m.partition(), m.offset())
    else:
        failed.append((m.value(), str(err)))
p = Producer(dict(conf, **{"acks": "all", "enable.idempotence": True, "linger.ms": 5,
                           "message.timeout.ms": 60000}))
killed = False
for i in range(n):
    p.produce(topic, key=b"k%d" % (i % 7), value=b"v%d" % i, on_delivery=on_delivery)
    p.poll(0)
    time.sleep(0.003)
    if not killed and len(acked) >= n // 3:
        os.kill(int(open("%s/node%d.pid" % (cdir, victim)).read()), signal.SIGKILL)
        print("killed node %d, leader of %s/0, after %d acks" % (victim, topic, len(acked)))
        killed = True
assert p.flush(90) == 0, "messages neither acknowledged nor failed"
assert killed, "the produce ended before the kill"
assert not failed, "deliveries failed: %s" % failed[:5]
print("acknowledged %d of %d" % (len(acked), n))

c = Consumer(dict(conf, **{"group.id": "tls-read", "enable.auto.commit": False,
                           "enable.partition.eof": True}))
c.assign([TopicPartition(topic, q, OFFSET_BEGINNING) for q in range(nparts)])
rows, eof, end = [], set(), time.time() + 60
while len(eof) < nparts and time.time() < end:
    m = c.poll(0.5)
    if m is None:
        continue
    if m.error():
        if m.error().code() == KafkaError._PARTITION_EOF:
            eof.add(m.partition())
        continue
    rows.append((m.partition(), m.offset(), m.value()))
c.close()
seen = {}
for part, off, v in rows:
    assert v not in seen, "read twice: %s" % v
    seen[v] = (part, off)
missing = [v for v in acked if v not in seen]
assert not missing, "acknowledged, not read: %s" % missing[:10]
moved = [v for v in acked if seen[v] != acked[v]]
assert not moved, "read elsewhere than acknowledged: %s" % moved[:10]
for q in range(nparts):
    nums = [int(v[1:]) for part, _, v in rows if part == q]
    assert nums == sorted(nums), "partition %d out of order" % q
print("read %d: every acknowledged message once, in order" % len(rows))
PY
alive=$(for i in 1 2 3; do if kill -0 "$(cat "$cdir/node$i.pid")" 2>/dev/null; then echo "$i"; fi; done)
[ "$(wc -l <<<"$alive")" -eq 2 ] || fail "expected 2 nodes alive after the kill: $alive"
alive=$(head -1 <<<"$alive")

step "kcat and kafka-python over SSL produce and read back (node $alive bootstraps)"
seq 1 20 | sed 's/^/kc/' >"$dir/in"
expect 0 timeout 60 kcat -b "$(kafka "$alive")" "${ssl[@]}" -P -t tls -p 1 -X acks=all "$dir/in"
expect 0 timeout 60 kcat -b "$(kafka "$alive")" "${ssl[@]}" -C -t tls -p 1 -e -o beginning -q
grep '^kc' "$dir/out" | diff - "$dir/in" >/dev/null || fail "kcat read back: $(cat "$dir/out")"
kafka_python_roundtrip "$(kafka "$alive")" tls SSL 20

step "SASL_SSL on top of mutual TLS: a SCRAM login replaces the certificate's principal"
printf 'bob-pw\n' | "$cli" -b "127.0.0.1:$(port "$alive" 0)" "${cli_mtls[@]}" user create bob >/dev/null ||
  fail "user bob"
for _ in $(seq 1 10); do # the user reaches node $alive's metadata within a moment
  got=0
  timeout 30 kcat -b "$(kafka "$alive")" "${ssl[@]}" -X security.protocol=SASL_SSL \
    -X sasl.mechanisms=SCRAM-SHA-256 -X sasl.username=bob -X sasl.password=bob-pw -L -m 3 \
    >"$dir/out" 2>"$dir/err" || got=$?
  [ "$got" -ne 0 ] || break
  sleep 0.2
done
[ "$got" -eq 0 ] || fail "kcat SASL_SSL with a client certificate: $(cat "$dir/err")"
grep -q "authenticated as User:bob" "$cdir/node$alive.log" || fail "no SASL login logged on node $alive"

step "refused with a log line: no client certificate, plaintext Kafka, plaintext garbage; the node serves on"
log="$cdir/node$alive.log"
refused() { grep -c "TLS handshake failed" "$log" || true; }
before=$(refused)
expect 1 timeout 30 kcat -b "$(kafka "$alive")" -X security.protocol=ssl -X "ssl.ca.location=$t/ca.pem" -L -m 2
[ "$(refused)" -gt "$before" ] || fail "no log line for the client without a certificate"
before=$(refused)
expect 1 timeout 30 kcat -b "$(kafka "$alive")" -L -m 2
[ "$(refused)" -gt "$before" ] || fail "no log line for the plaintext kcat"
before=$(refused)
timeout 30 $py - "$(kafka "$alive")" <<'PY' || fail "plaintext garbage on the TLS port"
import socket, sys
host, port = sys.argv[1].rsplit(":", 1)
s = socket.create_connection((host, int(port)), timeout=10)
try:
    s.sendall(b"\x00\x00\x00\x10" + b"\xab" * (2 << 20))  # a Kafka-looking size, then 2 MiB
except (BrokenPipeError, ConnectionResetError):
    pass
got = 0
try:
    while True:  # at most a TLS alert, then the close (a timeout fails)
        b = s.recv(1 << 16)
        if not b:
            break
        got += len(b)
except ConnectionResetError:
    pass
assert got < 64, "%d bytes answered to garbage" % got
print("plaintext garbage: closed after %d bytes" % got)
PY
[ "$(refused)" -gt "$before" ] || fail "no log line for the plaintext garbage"
expect 0 timeout 30 kcat -b "$(kafka "$alive")" "${ssl[@]}" -L -m 10 -t tls
out_has "topic \"tls\" with 2 partitions"

step "SASL_SSL (SCRAM-SHA-256) on node 4: kafka-python and kcat produce and read back as alice"
for _ in $(seq 1 100); do
  printf 'alice-pw\n' | "$cli" -b "127.0.0.1:$(port 4 0)" --tls-ca "$t/ca.pem" user create alice \
    >/dev/null 2>&1 && break
  sleep 0.2
done
export CAIRN_PASSWORD=alice-pw
expect 0 "$cli" -b "127.0.0.1:$(port 4 0)" --tls-ca "$t/ca.pem" --user alice topic create ss \
  --partitions 1 --replication-factor 1
kafka_python_roundtrip "$(kafka 4)" ss SASL_SSL 15
sasl_ssl=(-b "$(kafka 4)" -X security.protocol=SASL_SSL -X "ssl.ca.location=$t/ca.pem"
  -X sasl.mechanisms=SCRAM-SHA-256 -X sasl.username=alice)
seq 1 10 | sed 's/^/ks/' >"$dir/in"
expect 0 timeout 60 kcat "${sasl_ssl[@]}" -X sasl.password=alice-pw -P -t ss -X acks=all "$dir/in"
expect 0 timeout 60 kcat "${sasl_ssl[@]}" -X sasl.password=alice-pw -C -t ss -e -o beginning -q
[ "$(grep -c '^py' "$dir/out")" -eq 15 ] || fail "kcat read back: $(cat "$dir/out")"
grep '^ks' "$dir/out" | diff - "$dir/in" >/dev/null || fail "kcat read back: $(cat "$dir/out")"
grep -q "authenticated as User:alice" "$cdir/node4.log" || fail "no SASL login logged on node 4"
expect 1 timeout 30 kcat "${sasl_ssl[@]}" -X sasl.password=wrong -L -m 2
expect 1 timeout 30 kcat -b "$(kafka 4)" -X security.protocol=ssl -X "ssl.ca.location=$t/ca.pem" -L -m 2
grep -q "before SASL authentication" "$cdir/node4.log" || fail "SSL without a login was not refused"

step "SASL_SSL with PLAIN on node 4 (checked against alice's SCRAM credential): kafka-python and kcat"
# kafka-python sends PLAIN as a raw token after SaslHandshake v0; kcat in a
# SaslAuthenticate after v1.
expect 0 "$cli" -b "127.0.0.1:$(port 4 0)" --tls-ca "$t/ca.pem" --user alice topic create sp \
  --partitions 1 --replication-factor 1
kafka_python_roundtrip "$(kafka 4)" sp SASL_SSL 5 PLAIN
plain=(-b "$(kafka 4)" -X security.protocol=SASL_SSL -X "ssl.ca.location=$t/ca.pem"
  -X sasl.mechanisms=PLAIN -X sasl.username=alice)
seq 1 10 | sed 's/^/kp/' >"$dir/in"
expect 0 timeout 60 kcat "${plain[@]}" -X sasl.password=alice-pw -P -t sp -X acks=all "$dir/in"
expect 0 timeout 60 kcat "${plain[@]}" -X sasl.password=alice-pw -C -t sp -e -o beginning -q
grep '^kp' "$dir/out" | diff - "$dir/in" >/dev/null || fail "kcat PLAIN read back: $(cat "$dir/out")"
[ "$(grep -c '^py' "$dir/out")" -eq 5 ] || fail "kcat PLAIN read back: $(cat "$dir/out")"
grep -q "authenticated as User:alice (PLAIN)" "$cdir/node4.log" || fail "no PLAIN login logged on node 4"
expect 1 timeout 30 kcat "${plain[@]}" -X sasl.password=alice-pw-not -L -m 2
err_has "Authentication failed"
expect 1 timeout 30 kcat "${plain[@]/alice/mallory}" -X sasl.password=alice-pw -L -m 2
err_has "Authentication failed"

# served_fingerprint ADDR: the SHA-256 fingerprint of the certificate a new
# TLS connection to ADDR is given ("" if none).
served_fingerprint() {
  timeout 20 openssl s_client -connect "$1" -CAfile "$t/ca.pem" </dev/null 2>/dev/null |
    openssl x509 -noout -fingerprint -sha256 2>/dev/null || true
}
fingerprint_of() { openssl x509 -in "$1" -noout -fingerprint -sha256; }

step "SIGHUP on node 4: new TLS connections to its Kafka port get the renewed certificate"
old=$(fingerprint_of "$t/node4.pem")
[ "$(served_fingerprint "$(kafka 4)")" = "$old" ] || fail "node 4's Kafka port does not serve node4.pem"
(
  cd "$t"
  openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout renewed.key \
    -out renewed.csr -subj /CN=node-renewed 2>/dev/null
  openssl x509 -req -in renewed.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out renewed.pem \
    -days 30 -extfile san.ext 2>/dev/null
) || fail "openssl could not make the renewed certificate"
new=$(fingerprint_of "$t/renewed.pem")
[ "$new" != "$old" ] || fail "the renewed certificate is the old one"
cp "$t/renewed.key" "$t/node4.key"
cp "$t/renewed.pem" "$t/node4.pem"
kill -HUP "$(cat "$cdir/node4.pid")"
ok=0
for _ in $(seq 1 50); do
  if [ "$(served_fingerprint "$(kafka 4)")" = "$new" ]; then ok=1; break; fi
  sleep 0.2
done
[ "$ok" -eq 1 ] || fail "node 4's Kafka port still serves the old certificate after SIGHUP: $(served_fingerprint "$(kafka 4)")"
[ "$(served_fingerprint "127.0.0.1:$(port 4 0)")" = "$new" ] ||
  fail "node 4's client port does not serve the renewed certificate"
grep -q "TLS certificate and key reloaded" "$cdir/node4.log" || fail "node 4 did not log the reload"
expect 0 timeout 60 kcat "${sasl_ssl[@]}" -X sasl.password=alice-pw -C -t ss -e -o beginning -q
[ "$(grep -c '^py' "$dir/out")" -eq 15 ] || fail "kcat over the renewed certificate: $(cat "$dir/out")"
echo "   Kafka and client ports serve the renewed certificate; kcat SASL_SSL reads back through it"

step "a TLS client on node 5's plaintext Kafka port: closed, logged as such; plaintext clients go on"
# kcat fails (1); kcat 1.7.1 sometimes crashes on its way out after the
# failed metadata request instead (139, SIGSEGV in the client, seen once in
# CI under load): either way it got no metadata. What is checked is the
# node's side: the handshake closed at once, the reason logged, serving on.
got=0
timeout 30 kcat -b "$(kafka 5)" -X security.protocol=ssl -X "ssl.ca.location=$t/ca.pem" -L -m 2 \
  >"$dir/out" 2>"$dir/err" || got=$?
[ "$got" = 1 ] || [ "$got" = 139 ] || fail "kcat over TLS on a plaintext port: exit $got, not 1: $(head -5 "$dir/err")"
err_has "in state SSL_HANDSHAKE" # closed during the handshake, not left waiting
grep -q "a TLS handshake on a port without TLS" "$cdir/node5.log" ||
  fail "node 5 does not say why it closed the TLS client: $(tail -5 "$cdir/node5.log")"
expect 0 timeout 30 kcat -b "$(kafka 5)" -L -m 10
out_has "broker 1 at $(kafka 5)"

step "PLAIN is not offered on node 5's plaintext Kafka port (the password would cross in the clear)"
expect 1 timeout 30 kcat -b "$(kafka 5)" -X security.protocol=SASL_PLAINTEXT -X sasl.mechanisms=PLAIN \
  -X sasl.username=alice -X sasl.password=alice-pw -L -m 2
err_has "Unsupported SASL mechanism"
err_has "SCRAM-SHA-256"
err_has "SCRAM-SHA-512"

echo "PASS"
