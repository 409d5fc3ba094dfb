#!/usr/bin/env bash
# kafka_acls.sh - Kafka's ACL admin APIs (CreateAcls, DescribeAcls,
# DeleteAcls v0-1; docs/kafka.md "ACLs") with kafka-python's
# KafkaAdminClient against a node started with --auth required and
# --authorizer acl: bindings created over the Kafka port are Cairn's
# entries (`cairn acl list` shows them, and one added with `cairn acl add`
# is described over Kafka), they are enforced on Kafka producers (a
# PREFIXED ALL, a LITERAL "*" wildcard, a DENY for User:* that wins), the
# filters select as Kafka's do (ANY, MATCH, LITERAL, PREFIXED, principal),
# what Cairn cannot hold is refused with why, a user without ALTER on the
# cluster is refused CLUSTER_AUTHORIZATION_FAILED, and DeleteAcls removes
# what its filters match, after which the rights are gone.
#
# Usage: kafka_acls.sh CAIRN CAIRND
set -euo pipefail
CLI_TEST_TAG=kafkaacls
. "$(dirname "$0")/../lib/cli_test.sh"
py=/usr/bin/python3 # Debian's, where python3-kafka is installed
$py -c 'import kafka' 2>/dev/null || fail "python3-kafka is not installed (deploy/setup.sh)"

step "start a node with --auth required, ACLs and a Kafka port; users admin, alice, bob, carol"
start_acl_node alice bob carol
wait_alive 1 "$cli" --user admin
for t in orders logs-a logs-secret other; do
  expect 0 "$cli" --user admin topic create "$t" --partitions 1 --replication-factor 1
done

cat >"$dir/common.py" <<'PY'
import sys, time
from kafka import KafkaProducer, KafkaClient
from kafka.protocol.metadata import MetadataRequest
from kafka.admin import (KafkaAdminClient, ACL, ACLFilter, ResourcePattern,
                         ResourcePatternFilter, ACLOperation as Op,
                         ACLPermissionType as Perm, ResourceType as RT,
                         ACLResourcePatternType as PT)
from kafka.errors import (InvalidRequestError, ClusterAuthorizationFailedError,
                          TopicAuthorizationFailedError, KafkaError)
BS = [sys.argv[1]]
def sasl(user):
    return dict(security_protocol="SASL_PLAINTEXT", sasl_mechanism="SCRAM-SHA-256",
                sasl_plain_username=user, sasl_plain_password=user + "-pw")
def admin(user="admin"):
    return KafkaAdminClient(bootstrap_servers=BS, **sasl(user))
def acl(principal, op, perm, rtype, name, pattern=PT.LITERAL, host="*"):
    return ACL(principal=principal, host=host, operation=op, permission_type=perm,
               resource_pattern=ResourcePattern(rtype, name, pattern))
def filt(principal=None, op=Op.ANY, perm=Perm.ANY, rtype=RT.ANY, name=None, pattern=PT.ANY):
    return ACLFilter(principal=principal, host=None, operation=op, permission_type=perm,
                     resource_pattern=ResourcePatternFilter(rtype, name, pattern))
def key(a):
    rp = a.resource_pattern
    return (a.principal, a.host, a.operation.name, a.permission_type.name,
            rp.resource_type.name, rp.resource_name, rp.pattern_type.name)
def keys(acls):
    return sorted(key(a) for a in acls)
def metadata_error(user, topic):
    """The error code of topic in a Metadata v1 answer to user."""
    c = KafkaClient(bootstrap_servers=BS, **sasl(user))
    try:
        node, deadline = c.least_loaded_node(), time.time() + 20
        while not c.ready(node):
            assert time.time() < deadline, "no connection"
            c.poll(timeout_ms=100)
        f = c.send(node, MetadataRequest[1]([topic]))
        c.poll(future=f, timeout_ms=20000)
        assert f.succeeded(), f.exception
        assert f.value.brokers, "a Metadata answer without brokers"
        return f.value.topics[0][0]
    finally:
        c.close()
def can_produce(user, topic):
    # kafka-python 2.0.2's producer waits out max_block_ms on a refused
    # topic (its update_metadata fails the update instead of recording the
    # topic as unauthorized): so the Metadata answer is checked first.
    err = metadata_error(user, topic)
    if err == 29:
        return False
    assert err == 0, err
    p = KafkaProducer(bootstrap_servers=BS, acks="all", retries=0, max_block_ms=10000, **sasl(user))
    try:
        p.send(topic, value=b"from " + user.encode()).get(timeout=20)
        return True
    except TopicAuthorizationFailedError:
        return False
    finally:
        p.close()
PY

step "ApiVersions lists DescribeAcls, CreateAcls and DeleteAcls 0-1 (and OffsetDelete 0, OffsetFetch 1-7, ListGroups 0-4)"
python3 "$(dirname "$0")/../lib/kafka_apis.py" "$kafka" 29=0-1 30=0-1 31=0-1 47=0-0 9=1-7 16=0-4 ||
  fail "ApiVersions"

step "before any entry: alice may not produce to orders or logs-a"
timeout 60 $py - "$kafka" <<PY || fail "before"
exec(open("$dir/common.py").read())
assert not can_produce("alice", "orders")
assert not can_produce("alice", "logs-a")
print("alice refused")
PY

step "CreateAcls as admin: seven bindings taken, three Cairn cannot hold refused with why"
timeout 60 $py - "$kafka" <<PY || fail "CreateAcls"
exec(open("$dir/common.py").read())
a = admin()
good = [
    acl("User:alice", Op.WRITE, Perm.ALLOW, RT.TOPIC, "orders"),
    acl("User:alice", Op.ALL, Perm.ALLOW, RT.TOPIC, "logs-", PT.PREFIXED),
    acl("User:*", Op.ALL, Perm.DENY, RT.TOPIC, "logs-secret"),
    acl("User:bob", Op.READ, Perm.ALLOW, RT.TOPIC, "*"),
    acl("User:bob", Op.READ, Perm.ALLOW, RT.GROUP, "*"),
    acl("User:alice", Op.ALTER, Perm.ALLOW, RT.CLUSTER, "kafka-cluster"),
    acl("User:alice", Op.DESCRIBE, Perm.ALLOW, RT.TOPIC, "orders"),
]
bad = [
    acl("User:alice", Op.DESCRIBE_CONFIGS, Perm.ALLOW, RT.TOPIC, "orders"),
    acl("User:alice", Op.READ, Perm.ALLOW, RT.TOPIC, "orders", host="10.1.2.3"),
    acl("User:alice", Op.WRITE, Perm.ALLOW, RT.TRANSACTIONAL_ID, "tx"),
]
r = a.create_acls(good + bad)
assert keys(r["succeeded"]) == keys(good), r
assert len(r["failed"]) == 3 and all(e is InvalidRequestError for _, e in r["failed"]), r["failed"]
# the same binding again: no change, no error
r = a.create_acls([good[0]])
assert len(r["succeeded"]) == 1, r
print("created", len(good), "refused", len(bad))
PY

step "cairn acl list shows them as Cairn entries; one added natively is described over Kafka"
expect 0 "$cli" --user admin acl list --json
python3 - "$dir/out" <<'PY' || fail "acl list: $(cat "$dir/out")"
import json, sys
j = json.load(open(sys.argv[1]))
want = {("User:alice", "topic", "orders", False, "write", "allow"),
        ("User:alice", "topic", "logs-", True, "all", "allow"),
        ("*", "topic", "logs-secret", False, "all", "deny"),
        ("User:bob", "topic", "", True, "read", "allow"),
        ("User:bob", "group", "", True, "read", "allow"),
        ("User:alice", "cluster", "", False, "alter", "allow"),
        ("User:alice", "topic", "orders", False, "describe", "allow")}
got = {(e["principal"], e["resource_type"], e["resource"], e["prefix"], e["operation"],
        e["permission"]) for e in j}
assert got == want, got ^ want
PY
expect 0 "$cli" --user admin acl add --principal User:carol --topic other --operation write
timeout 60 $py - "$kafka" <<PY || fail "native entry over Kafka"
exec(open("$dir/common.py").read())
acls, err = admin().describe_acls(filt(principal="User:carol"))
assert keys(acls) == [("User:carol", "*", "WRITE", "ALLOW", "TOPIC", "other", "LITERAL")], keys(acls)
print("carol's native entry described")
PY

step "the entries apply to Kafka producers: a prefix ALL, a deny for User:* that wins, a literal name"
timeout 120 $py - "$kafka" <<PY || fail "enforced"
exec(open("$dir/common.py").read())
assert can_produce("alice", "orders")
assert can_produce("alice", "logs-a")
assert not can_produce("alice", "logs-secret")
assert not can_produce("alice", "other")
assert can_produce("carol", "other")
assert not can_produce("bob", "orders")
print("enforced")
PY

step "DescribeAcls filters: ANY, MATCH, LITERAL '*', PREFIXED, principal, operation, permission"
timeout 60 $py - "$kafka" <<PY || fail "DescribeAcls"
exec(open("$dir/common.py").read())
a = admin()
def names(f):
    acls, err = a.describe_acls(f)
    return sorted((x.principal, x.operation.name, x.resource_pattern.resource_name,
                   x.resource_pattern.pattern_type.name) for x in acls)
assert len(names(filt())) == 8
assert names(filt(rtype=RT.TOPIC, name="logs-x", pattern=PT.MATCH)) == [
    ("User:alice", "ALL", "logs-", "PREFIXED"), ("User:bob", "READ", "*", "LITERAL")]
assert names(filt(rtype=RT.TOPIC, name="logs-secret", pattern=PT.MATCH)) == [
    ("User:*", "ALL", "logs-secret", "LITERAL"), ("User:alice", "ALL", "logs-", "PREFIXED"),
    ("User:bob", "READ", "*", "LITERAL")]
assert names(filt(rtype=RT.TOPIC, name="*", pattern=PT.LITERAL)) == [("User:bob", "READ", "*", "LITERAL")]
assert names(filt(pattern=PT.PREFIXED)) == [("User:alice", "ALL", "logs-", "PREFIXED")]
assert names(filt(principal="User:bob")) == [("User:bob", "READ", "*", "LITERAL")] * 2
assert names(filt(op=Op.DESCRIBE)) == [("User:alice", "DESCRIBE", "orders", "LITERAL")]
assert names(filt(perm=Perm.DENY)) == [("User:*", "ALL", "logs-secret", "LITERAL")]
assert names(filt(rtype=RT.CLUSTER)) == [("User:alice", "ALTER", "kafka-cluster", "LITERAL")]
assert names(filt(rtype=RT.TRANSACTIONAL_ID)) == []
print("filters select as Kafka's")
PY

step "bob (no ALTER on the cluster) is refused CLUSTER_AUTHORIZATION_FAILED; alice (ALTER) may create and describe"
timeout 60 $py - "$kafka" <<PY || fail "cluster authorization"
exec(open("$dir/common.py").read())
b = admin("bob")
r = b.create_acls([acl("User:bob", Op.WRITE, Perm.ALLOW, RT.TOPIC, "orders")])
assert [e for _, e in r["failed"]] == [ClusterAuthorizationFailedError], r
try:
    b.describe_acls(filt())
    raise AssertionError("bob described the ACLs")
except ClusterAuthorizationFailedError:
    pass
r = b.delete_acls([filt()])
assert r[0][2] is ClusterAuthorizationFailedError and r[0][1] == [], r
al = admin("alice")
r = al.create_acls([acl("User:carol", Op.READ, Perm.ALLOW, RT.TOPIC, "orders")])
assert len(r["succeeded"]) == 1, r
acls, _ = al.describe_acls(filt(principal="User:carol"))
assert len(acls) == 2, keys(acls)
print("bob refused, alice allowed")
PY
grep -q "User:bob may not ALTER the cluster" "$cdir/node1.log" || fail "no refusal logged for bob"

step "DeleteAcls: each filter lists what it matched; an entry matched twice is removed once; the rights are gone"
timeout 120 $py - "$kafka" <<PY || fail "DeleteAcls"
exec(open("$dir/common.py").read())
a = admin()
r = a.delete_acls([
    filt(pattern=PT.PREFIXED),
    filt(principal="User:alice", rtype=RT.TOPIC, name="logs-", pattern=PT.ANY),
    filt(principal="User:bob", rtype=RT.GROUP),
    filt(principal="User:nobody"),
])
(f0, m0, e0), (f1, m1, e1), (f2, m2, e2), (f3, m3, e3) = r
assert [key(x) for x, _ in m0] == [("User:alice", "*", "ALL", "ALLOW", "TOPIC", "logs-", "PREFIXED")], m0
assert [key(x) for x, _ in m1] == [key(x) for x, _ in m0], m1
assert [key(x) for x, _ in m2] == [("User:bob", "*", "READ", "ALLOW", "GROUP", "*", "LITERAL")], m2
assert m3 == [] and all(e.__name__ == "NoError" for e in (e0, e1, e2, e3)), r
assert all(err.__name__ == "NoError" for _, err in m0 + m1 + m2), r
acls, _ = a.describe_acls(filt())
assert len(acls) == 7, keys(acls)
assert not can_produce("alice", "logs-a")
assert can_produce("alice", "orders")
print("deleted")
PY
expect 0 "$cli" --user admin acl list --principal User:alice --json
pyj "$dir/out" 'not any(e["resource"] == "logs-" for e in j)'
expect 0 "$cli" --user admin acl list --principal User:bob --json
pyj "$dir/out" '[e["resource_type"] for e in j] == ["topic"]'

step "the entries outlive a restart of the node"
kill -TERM "${pids[0]}"
wait "${pids[0]}" || true
"$cairnd" "${node1_args[@]}" >>"$cdir/node1.log" 2>&1 &
pids[0]=$!
wait_alive 1 "$cli" --user admin
timeout 90 $py - "$kafka" <<PY || fail "after restart"
exec(open("$dir/common.py").read())
deadline = time.time() + 30
while True:
    try:
        acls, _ = admin().describe_acls(filt())
        break
    except KafkaError:
        if time.time() > deadline:
            raise
        time.sleep(0.5)
assert len(acls) == 7, keys(acls)
assert can_produce("alice", "orders") and not can_produce("alice", "logs-a")
print("kept across a restart")
PY
echo "PASS"
