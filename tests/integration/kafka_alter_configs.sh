#!/usr/bin/env bash
# kafka_alter_configs.sh - Kafka AlterConfigs (33, v0-1) and
# IncrementalAlterConfigs (44, v0) on a 3-node cluster, over the same core
# operation as `cairn topic alter-config` (docs/kafka.md): ApiVersions
# lists them; kafka-python's KafkaAdminClient.alter_configs and
# confluent_kafka's AdminClient.alter_configs change a topic's retention,
# which describe_configs (either client) and `cairn topic describe` then
# show; AlterConfigs replaces the whole configuration (a key not named
# goes back to its default); validate_only changes nothing; a bad value, a
# key that cannot change, an unknown topic, the internal offsets topic and
# a broker resource get Kafka's errors (and CreateTopics, which reads its
# configs with the same code, refuses the same bad value).
# IncrementalAlterConfigs v0 and v1 (flexible; no client in Debian 12
# sends either) are spoken over a raw socket: SET and DELETE, APPEND
# refused.
#
# Usage: kafka_alter_configs.sh CAIRN CAIRND
set -euo pipefail
CLI_TEST_TAG=kafkaalter
. "$(dirname "$0")/../lib/cli_test.sh"
py=/usr/bin/python3 # Debian's, where python3-kafka and python3-confluent-kafka are installed
$py -c 'import kafka, confluent_kafka' 2>/dev/null ||
  fail "python3-kafka and python3-confluent-kafka are needed (deploy/setup.sh)"

step "start a 3-node cluster; a topic"
start_cluster3
k1="127.0.0.1:$((base + 3))"
all="$k1,127.0.0.1:$((base + 13)),127.0.0.1:$((base + 23))"
expect 0 "$cli" topic create ka --partitions 1 --replication-factor 3

step "kafka-python: AlterConfigs sets, replaces and refuses; DescribeConfigs shows it"
timeout 120 $py - "$all" <<'PY' || fail "kafka-python AlterConfigs"
import sys, time
from kafka import KafkaAdminClient
from kafka.admin import ConfigResource, ConfigResourceType
bs = sys.argv[1].split(",")
a = KafkaAdminClient(bootstrap_servers=bs, request_timeout_ms=20000)
def alter(name, configs, rtype=ConfigResourceType.TOPIC):
    r = a.alter_configs([ConfigResource(rtype, name, configs=configs)])
    [(err, msg, _, rname)] = r.resources
    return err, msg, rname
def described(name, want):
    # every node's metadata follows the controller within a moment
    deadline = time.time() + 10
    while True:
        [resp] = a.describe_configs([ConfigResource(ConfigResourceType.TOPIC, name)])
        [(err, msg, _, _, cfgs)] = resp.resources
        got = {c[0]: c[1] for c in cfgs}
        if err == 0 and all(got.get(k) == v for k, v in want.items()):
            return got
        assert time.time() < deadline, (err, msg, got, want)
        time.sleep(0.2)
assert alter("ka", {"retention.ms": "3600000"})[0] == 0
described("ka", {"retention.ms": "3600000", "retention.bytes": "-1"})
# AlterConfigs replaces the whole set: retention.ms, not named, goes back to -1
assert alter("ka", {"retention.bytes": "1048576"})[0] == 0
described("ka", {"retention.ms": "-1", "retention.bytes": "1048576"})
err, msg, _ = alter("ka", {"retention.ms": "soon"})
assert err == 40 and "retention.ms" in msg, (err, msg)          # INVALID_CONFIG
err, msg, _ = alter("ka", {"segment.bytes": "8192"})
assert err == 40 and "segment.bytes" in msg, (err, msg)
err, msg, _ = alter("nosuch", {"retention.ms": "1000"})
assert err == 3, (err, msg)                                      # UNKNOWN_TOPIC_OR_PARTITION
err, msg, _ = alter("__cairn_offsets", {"retention.ms": "1000"})
assert err == 29 and "internal" in msg, (err, msg)              # TOPIC_AUTHORIZATION_FAILED
err, msg, rname = alter("1", {"log.retention.ms": "1000"}, ConfigResourceType.BROKER)
assert err == 42 and rname == "1" and "config file" in msg, (err, msg)  # INVALID_REQUEST
# nothing refused changed anything
described("ka", {"retention.ms": "-1", "retention.bytes": "1048576"})
# CreateTopics reads its configs with the same code: the same refusal
from kafka.admin import NewTopic
from kafka.errors import InvalidConfigurationError
try:
    a.create_topics([NewTopic("kbad", 1, 1, topic_configs={"retention.ms": "soon"})])
    raise SystemExit("CreateTopics took retention.ms=soon")
except InvalidConfigurationError as e:
    assert "retention.ms" in str(e), e
a.close()
print("kafka-python: AlterConfigs and DescribeConfigs")
PY
describe_has ka 'j["config"]["retention_bytes"] == 1048576 and j["config"]["retention_ms"] == 0'

step "confluent_kafka (librdkafka): alter_configs, validate_only, describe_configs"
timeout 120 $py - "$all" <<'PY' || fail "confluent_kafka AlterConfigs"
import sys, time
from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient, ConfigResource
a = AdminClient({"bootstrap.servers": sys.argv[1]})
def alter(configs, validate_only=False):
    fs = a.alter_configs([ConfigResource("topic", "ka", set_config=configs)],
                         validate_only=validate_only, request_timeout=20)
    for f in fs.values():
        f.result(timeout=30)
def described(want):
    deadline = time.time() + 10
    while True:
        fs = a.describe_configs([ConfigResource("topic", "ka")], request_timeout=20)
        got = {k: v.value for f in fs.values() for k, v in f.result(timeout=30).items()}
        if all(got.get(k) == v for k, v in want.items()):
            return got
        assert time.time() < deadline, (got, want)
        time.sleep(0.2)
alter({"retention.ms": "7200000", "retention.bytes": "2097152"})
described({"retention.ms": "7200000", "retention.bytes": "2097152"})
alter({"retention.ms": "5000"}, validate_only=True)
time.sleep(1)
described({"retention.ms": "7200000", "retention.bytes": "2097152"})
try:
    alter({"replication.factor": "1"})
    raise SystemExit("replication.factor was accepted")
except KafkaException as e:
    err = e.args[0]
    assert err.code() == 40 and "replication.factor" in err.str(), err   # INVALID_CONFIG
print("confluent_kafka: alter_configs, validate_only, describe_configs")
PY

step "IncrementalAlterConfigs v0 and v1 (flexible) over a raw socket: SET, DELETE, APPEND refused; ApiVersions"
timeout 60 $py - "$k1" <<'PY' || fail "IncrementalAlterConfigs"
import socket, struct, sys
host, port = sys.argv[1].rsplit(":", 1)
s = socket.create_connection((host, int(port)), timeout=20)
def kstr(v):
    if v is None:
        return struct.pack(">h", -1)
    b = v.encode()
    return struct.pack(">h", len(b)) + b
def call(key, version, body, flexible=False):
    # request header v2 (flexible) ends with empty tagged fields
    req = struct.pack(">hhi", key, version, 7) + kstr("t") + (b"\0" if flexible else b"") + body
    s.sendall(struct.pack(">i", len(req)) + req)
    size = struct.unpack(">i", s.recv(4, socket.MSG_WAITALL))[0]
    resp = s.recv(size, socket.MSG_WAITALL)
    assert struct.unpack(">i", resp[:4])[0] == 7
    return resp[4:]
body = call(18, 0, b"")
err, n = struct.unpack(">hi", body[:6])
apis = {}
for i in range(n):
    k, lo, hi = struct.unpack(">hhh", body[6 + 6 * i:12 + 6 * i])
    apis[k] = (lo, hi)
assert apis.get(33) == (0, 1) and apis.get(44) == (0, 1), (apis.get(33), apis.get(44))
def incremental(configs, validate_only=False):
    b = struct.pack(">i", 1) + struct.pack(">b", 2) + kstr("ka") + struct.pack(">i", len(configs))
    for name, op, value in configs:
        b += kstr(name) + struct.pack(">b", op) + kstr(value)
    b += struct.pack(">b", 1 if validate_only else 0)
    r = call(44, 0, b)
    throttle, n = struct.unpack(">ii", r[:8])
    assert n == 1
    err, mlen = struct.unpack(">hh", r[8:12])
    msg = r[12:12 + mlen].decode() if mlen >= 0 else None
    return err, msg
# SET one key: the other (retention.bytes) stays
assert incremental([("retention.ms", 0, "600000")]) == (0, None)
# DELETE: back to the default
assert incremental([("retention.bytes", 1, None)]) == (0, None)
err, msg = incremental([("retention.ms", 2, "1")])
assert err == 40 and "APPEND" in msg, (err, msg)
# v1: compact strings and arrays (length + 1), tagged fields
def cstr(v):
    if v is None:
        return b"\0"
    b = v.encode()
    return bytes([len(b) + 1]) + b
def uvarint(buf, at):
    v = shift = 0
    while True:
        byte = buf[at]
        at += 1
        v |= (byte & 0x7f) << shift
        shift += 7
        if byte < 0x80:
            return v, at
def incremental_v1(configs):
    b = bytes([2]) + struct.pack(">b", 2) + cstr("ka") + bytes([len(configs) + 1])
    for name, op, value in configs:
        b += cstr(name) + struct.pack(">b", op) + cstr(value) + b"\0"
    b += b"\0" + struct.pack(">b", 0) + b"\0"
    r = call(44, 1, b, flexible=True)
    assert r[0] == 0, r            # response header v1: no tagged fields
    throttle = struct.unpack(">i", r[1:5])[0]
    assert r[5] == 2, r            # one result
    err = struct.unpack(">h", r[6:8])[0]
    mlen, at = uvarint(r, 8)
    mlen -= 1
    msg = r[at:at + mlen].decode() if mlen >= 0 else None
    at += max(mlen, 0)
    assert r[at] == 2, r            # resource type TOPIC
    nlen = r[at + 1] - 1
    assert r[at + 2:at + 2 + nlen] == b"ka", r
    assert r[at + 2 + nlen:] == b"\0\0", r   # the result's and the body's tagged fields
    return err, msg
assert incremental_v1([("retention.ms", 0, "600000"), ("retention.bytes", 0, "4096")]) == (0, None)
err, msg = incremental_v1([("segment.bytes", 0, "4096")])
assert err == 40 and "segment.bytes" in msg, (err, msg)
assert incremental_v1([("retention.bytes", 1, None)]) == (0, None)
print("IncrementalAlterConfigs: v0 and v1, SET, DELETE, APPEND refused")
PY
describe_has ka 'j["config"]["retention_ms"] == 600000 and j["config"]["retention_bytes"] == 0'
echo "PASS"
