#!/usr/bin/env bash
# The `cairn` command line end to end, against a real 3-node cluster of
# cairnd processes (deploy/cluster.sh, on free ports under a temporary
# directory): topic create/list/describe/delete; produce and consume of
# keys, headers and values with any bytes (NUL-separated input); start
# positions, counts and formats; --json output that parses; bad command
# lines (exit 2 and a message), an unreachable cluster (exit 1 within the
# timeout) and a topic that does not exist (exit 1).
#
# usage: cli_cairn.sh CAIRN CAIRND
# The processes it starts are stopped by PID whatever happens (trap);
# CAIRN_KEEP_TEST_DIR=1 keeps the directory (node logs) afterwards.
set -euo pipefail
CLI_TEST_TAG=cli-test
. "$(dirname "$0")/../lib/cli_test.sh"

step "help and bad command lines (nothing is sent: exit 2 and a message)"
expect 0 "$cli" --help
out_has "usage: cairn"
# The command list names every command (each group's subcommands as its
# own --help spells them).
for c in "topic create" "topic list" "topic describe" "topic delete" "produce" "consume" \
  "group list" "group describe" "group reset-offsets" "cluster status" "node decommission" \
  "user create" "user delete" "user list" "acl add" "acl remove" "acl list"; do
  grep -q -- "^  $c" "$dir/out" || fail "cairn --help does not name '$c'"
done
for c in "topic" "produce" "consume" "cluster" "node"; do
  expect 0 "$cli" $c --help
  out_has "usage: cairn $c"
done
expect 0 "$cli" topic create --help
out_has "replication-factor"
expect 0 "$cli" produce --help
out_has "cannot contain a newline"
expect 2 "$cli"
expect 2 "$cli" frobnicate
err_has "unknown command 'frobnicate'"
for g in topic produce consume cluster node user acl group; do err_has " $g[,;]"; done
expect 2 "$cli" topic frobnicate
err_has "unknown subcommand"
expect 2 "$cli" topic create t1
err_has "how many partitions"
expect 2 "$cli" topic create t1 --partitions 3
err_has "replication-factor"
expect 2 "$cli" topic create t1 --partitions abc --replication-factor 3
err_has "'abc' is not a number"
expect 2 "$cli" topic create t1 --partitions 0 --replication-factor 3
err_has "out of range"
expect 2 "$cli" topic create 'bad name!' --partitions 1 --replication-factor 1
err_has "not a valid topic name"
expect 2 "$cli" topic create t1 --partitions 1 --replication-factor 1 --frob
err_has "unknown option '--frob'"
expect 2 "$cli" topic describe
err_has "which topic"
expect 2 "$cli" topic create t1 --partitions
err_has "needs a value"
expect 2 "$cli" produce
err_has "which topic"
expect 2 "$cli" produce t1 -H novalue
err_has "NAME=VALUE"
expect 2 "$cli" produce t1 -D ab
err_has "one byte"
expect 2 "$cli" consume t1 -o sideways
err_has "not beginning, end"
expect 2 "$cli" consume t1 -f '%z'
err_has "not a conversion"
expect 2 "$cli" consume t1 -n 0
expect 2 "$cli" --timeout-ms never topic list
expect 2 "$cli" node decommission abc
expect 2 "$cli" -x topic list
err_has "unknown option"
for b in nonsense host:99999 host: :7400 "127.0.0.1:7400,"; do
  expect 2 "$cli" -b "$b" topic list
  err_has "is not HOST:PORT"
done
[ ! -s "$dir/out" ] || fail "a usage error printed to stdout"

step "an unreachable cluster fails within the timeout"
start=$SECONDS
expect 1 "$cli" -b 127.0.0.1:1 --timeout-ms 2000 topic list
[ $((SECONDS - start)) -le 10 ] || fail "unreachable bootstrap took $((SECONDS - start)) s with a 2 s timeout"
err_has "could not reach any node of 127.0.0.1:1"
err_has "deploy/cluster.sh"
start=$SECONDS
CAIRN_BOOTSTRAP=127.0.0.1:1,127.0.0.1:2 expect 1 "$cli" --timeout-ms 2000 cluster status
[ $((SECONDS - start)) -le 10 ] || fail "unreachable CAIRN_BOOTSTRAP took $((SECONDS - start)) s"
err_has "127.0.0.1:1,127.0.0.1:2"
# Refused everywhere is not a timeout: it fails at once and says refused,
# naming the addresses (the default timeout is 10 s).
t0=$(date +%s%N)
expect 1 "$cli" -b 127.0.0.1:1,127.0.0.1:2 topic list
ms=$((($(date +%s%N) - t0) / 1000000))
[ "$ms" -lt 3000 ] || fail "an all-refused bootstrap took $ms ms"
err_has "connection refused by"
err_has "127.0.0.1:1"
err_has "127.0.0.1:2"

step "a topic create the moment a fresh node accepts connections succeeds"
# Its controller has not yet applied the bootstrap nor the node's own
# registration: it answers NOT_CONTROLLER (retriable), and the CLI retries,
# instead of a definite refusal ("0 alive nodes", "not bootstrapped").
p1=$(free_base_port 1)
"$cairnd" --node-id 1 --data-dir "$dir/first" --listen "127.0.0.1:$p1" \
  --cluster-listen "127.0.0.1:$((p1 + 1))" --admin-listen "127.0.0.1:$((p1 + 2))" \
  --kafka-listen off >"$dir/first.log" 2>&1 &
pids+=($!)
for _ in $(seq 1 2000); do
  (exec 3<>"/dev/tcp/127.0.0.1/$p1") 2>/dev/null && break
  sleep 0.005
done
expect 0 "$cli" -b "127.0.0.1:$p1" topic create first --partitions 1 --replication-factor 1
kill "${pids[0]}"
wait "${pids[0]}" 2>/dev/null || true
pids=()

step "start a 3-node cluster"
start_cluster3
echo "bootstrap $CAIRN_BOOTSTRAP, pids ${pids[*]}"

step "cluster status"
expect 0 "$cli" cluster status
out_has "controller leader: node"
out_has "alive"
# (Each node answers from its own copy of the metadata, which may lag the
# controller's by a moment: retry briefly.)
all_alive='j["controller_id"] in (1,2,3) and sorted(n["id"] for n in j["nodes"]) == [1,2,3] and all(n["state"] == "alive" for n in j["nodes"])'
for _ in $(seq 1 50); do
  expect 0 "$cli" cluster status --json
  cp "$dir/out" "$dir/status.json"
  json_ok "$dir/status.json"
  python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); sys.exit(0 if eval(sys.argv[2]) else 1)' "$dir/status.json" "$all_alive" && break
  sleep 0.2
done
pyj "$dir/status.json" "$all_alive"
# Only one node in the bootstrap list is enough.
expect 0 "$cli" -b "${CAIRN_BOOTSTRAP##*,}" cluster status --json
# A node's admin (HTTP) port is not its client port, and the CLI says so.
first_node=${CAIRN_BOOTSTRAP%%,*}
admin="127.0.0.1:$((${first_node##*:} + 2))"
expect 1 "$cli" -b "$admin" --timeout-ms 2000 topic list
err_has "$admin answers HTTP: it is a node's admin port"

step "topic create / list / describe"
expect 0 "$cli" topic create t3 --partitions 3 --replication-factor 3
out_has "created topic t3"
expect 1 "$cli" topic create t3 --partitions 3 --replication-factor 3
err_has "exists"
! grep -q "already exists.*already exists" "$dir/err" || fail "the message repeats itself: $(cat "$dir/err")"
expect 1 "$cli" topic create big --partitions 1 --replication-factor 5
err_has "replication factor"
expect 0 "$cli" topic create t1 --partitions 1 --replication-factor 3 --json
json_ok "$dir/out"
pyj "$dir/out" 'j["created"] == "t1"'
topics_are t1,t3
expect 0 "$cli" topic list
out_has "^t3 *3 *3"
out_has "^t1 *1 *3"
expect 0 "$cli" topic list --json
cp "$dir/out" "$dir/list.json"
json_ok "$dir/list.json"
pyj "$dir/list.json" 'sorted(t["name"] for t in j["topics"]) == ["t1","t3"]'
# Partitions get their leaders shortly after creation.
for _ in $(seq 1 100); do
  "$cli" topic describe t3 --json >"$dir/desc.json"
  python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); sys.exit(0 if all(p["leader_id"] > 0 for p in j["partitions"]) else 1)' "$dir/desc.json" && break
  sleep 0.2
done
json_ok "$dir/desc.json"
pyj "$dir/desc.json" 'j["name"] == "t3" and j["partition_count"] == 3 and len(j["partitions"]) == 3 and all(sorted(p["replicas"]) == [1,2,3] and p["leader_id"] in p["replicas"] for p in j["partitions"])'
expect 0 "$cli" topic describe t3
out_has "PARTITION"
[ "$(grep -c '^[0-2] ' "$dir/out")" -eq 3 ] || fail "describe should list 3 partitions: $(cat "$dir/out")"

step "keys: -k KEY is every message's key, -K SEP splits; long options match exactly"
expect 0 "$cli" topic create kt --partitions 1 --replication-factor 1
printf 'one\ntwo\n' | expect 0 "$cli" produce kt --key mykey
printf 'v1\n' | expect 0 "$cli" produce kt -k k2
printf 'a:b\n' | expect 0 "$cli" produce kt -K :
printf 'c:d\n' | expect 0 "$cli" produce kt --key-separator=:
expect 0 "$cli" consume kt -e -f '%k|%v\n'
[ "$(tr '\n' ' ' <"$dir/out")" = "mykey|one mykey|two k2|v1 a|b c|d " ] || fail "-k/--key/-K: $(cat "$dir/out")"
# The old separator spelling fails loudly rather than becoming a key.
printf 'x:y\n' | expect 2 "$cli" produce kt -k :
err_has "use -K ':'"
printf 'x:y\n' | expect 2 "$cli" produce kt --key '\t'
err_has "-K"
printf 'x:y\n' | expect 2 "$cli" produce kt --key-sep :
err_has "matched exactly"
printf 'x:y\n' | expect 2 "$cli" produce kt -k k -K :
err_has "do not go together"
expect 2 "$cli" topic create kt2 --part 1 --replication-factor 1
err_has "unknown option '--part'"
expect 0 "$cli" consume kt -e
[ "$(wc -l <"$dir/out")" -eq 5 ] || fail "a refused command line sent something: $(cat "$dir/out")"
expect 0 "$cli" topic delete kt

step "a topic that does not exist is an error"
expect 1 "$cli" topic describe nosuch
err_has "nosuch"
err_has "cairn topic list"
expect 1 "$cli" consume nosuch -e
err_has "nosuch"
echo x | expect 1 "$cli" produce nosuch
err_has "nosuch"
expect 1 "$cli" topic delete nosuch
err_has "nosuch"
! grep -q "create" "$dir/err" || fail "topic delete nosuch suggests creating a topic: $(cat "$dir/err")"
expect 1 "$cli" consume t3 -p 7 -e
err_has "partitions 0..2"

step "produce and consume keys, values and headers"
printf 'k1:v1\nk2:v2:with colon\nno key here\n\nk5:\n' >"$dir/in"
expect 0 "$cli" produce t3 -K : -H a=1 -H b=x=y <"$dir/in"
out_has "produced 5 message(s) to t3"
expect 0 "$cli" consume t3 -o beginning -e -f '%K|%k|%v|%h|%S\n'
sort "$dir/out" >"$dir/got"
printf '%s\n' '-1||no key here|a=1,b=x=y|11' '-1|||a=1,b=x=y|0' '2|k1|v1|a=1,b=x=y|2' \
  '2|k2|v2:with colon|a=1,b=x=y|13' '2|k5||a=1,b=x=y|0' | sort >"$dir/want"
diff "$dir/want" "$dir/got" || fail "keys, values or headers did not round-trip"
# The default output: one value per line.
expect 0 "$cli" consume t3 -e
[ "$(sort "$dir/out" | tr '\n' '|')" = "||no key here|v1|v2:with colon|" ] ||
  fail "default consume output: $(cat "$dir/out")"
# The same key always lands in the same partition.
printf 'k1:again\n' | expect 0 "$cli" produce t3 -K :
expect 0 "$cli" consume t3 -e -f '%k %p\n'
[ "$(grep -c '^k1 ' "$dir/out")" -eq 2 ] && [ "$(grep '^k1 ' "$dir/out" | sort -u | wc -l)" -eq 1 ] ||
  fail "key k1 went to two partitions: $(cat "$dir/out")"
# An explicit partition.
printf 'p2a\np2b\n' | expect 0 "$cli" produce t3 -p 2 --json
json_ok "$dir/out"
pyj "$dir/out" 'j["produced"] == 2 and j["failed"] == 0 and [p["partition"] for p in j["partitions"]] == [2]'
expect 0 "$cli" consume t3 -p 2 -o -2 -e
[ "$(tr '\n' '|' <"$dir/out")" = "p2a|p2b|" ] || fail "-p 2 -o -2: $(cat "$dir/out")"

step "topic describe shows every partition leader's log start and high watermark, asked of any node"
# Right after a produce: a node that does not lead the partition knows
# only the last report of its leader (about once a second).
n=8
for b in ${CAIRN_BOOTSTRAP//,/ }; do
  for _ in 1 2; do
    printf 'x\n' | expect 0 "$cli" produce t3 -p 1
    n=$((n + 1))
    expect 0 "$cli" -b "$b" topic describe t3 --json
    pyj "$dir/out" "sum(p['high_watermark'] for p in j['partitions']) == $n and all(p['log_start_offset'] == 0 for p in j['partitions'])"
    expect 0 "$cli" -b "$b" topic describe t3
    ! grep -q '?' "$dir/out" || fail "describe through $b shows '?': $(cat "$dir/out")"
  done
done

step "values with any bytes (NUL-separated input)"
# Every byte value but NUL, newlines and tabs inside values, an empty value,
# and bytes that are not UTF-8.
python3 - "$dir/bytes.in" <<'EOF'
import sys
vals = [bytes(range(1, 256)), b"line1\nline2\n", b"tab\there", b"", b"\xff\xfe\x80",
        "h\u00e9llo \u20ac".encode(), b"\\x00 not an escape", b"%v %k %%"]
with open(sys.argv[1], "wb") as f:
    f.write(b"\0".join(vals) + b"\0")
EOF
expect 0 "$cli" produce t1 --null <"$dir/bytes.in"
out_has "produced 8 message(s) to t1: partition 0 offsets 0..7"
expect 0 "$cli" consume t1 -o beginning -e -f '%v\0'
cmp "$dir/bytes.in" "$dir/out" || fail "values did not round-trip byte for byte"
# With a length prefix, NUL-containing values can be read back too.
printf 'a\0b\x01' | expect 0 "$cli" produce t1 -D '\x01'
expect 0 "$cli" consume t1 -o 8 -e -f '%S:%v'
printf '3:a\0b' | cmp - "$dir/out" || fail "a value with a NUL byte did not round-trip"
# JSON Lines: text as text, other bytes as base64.
expect 0 "$cli" consume t1 -o beginning -e --json
cp "$dir/out" "$dir/records.jsonl"
python3 - "$dir/records.jsonl" "$dir/bytes.in" <<'EOF' || fail "consume --json did not give back the bytes"
import base64, json, sys
recs = [json.loads(l) for l in open(sys.argv[1], encoding="utf-8")]
want = open(sys.argv[2], "rb").read().split(b"\0")[:-1] + [b"a\0b"]
got = []
for r in recs:
    assert r["topic"] == "t1" and r["partition"] == 0 and r["key"] is None
    got.append(base64.b64decode(r["value_base64"]) if r["value"] is None else r["value"].encode())
assert [r["offset"] for r in recs] == list(range(9)), [r["offset"] for r in recs]
assert got == want, (got, want)
assert recs[5]["value"] == "h\u00e9llo \u20ac"
EOF

step "start positions and counts"
expect 0 "$cli" consume t1 -o end -e
[ ! -s "$dir/out" ] || fail "-o end -e should print nothing"
expect 0 "$cli" consume t1 -o 6 -e -f '%o\n'
[ "$(tr '\n' ' ' <"$dir/out")" = "6 7 8 " ] || fail "-o 6: $(cat "$dir/out")"
expect 0 "$cli" consume t1 -o beginning -n 2 -f '%o\n'
[ "$(tr '\n' ' ' <"$dir/out")" = "0 1 " ] || fail "-n 2: $(cat "$dir/out")"
expect 0 "$cli" consume t1 -o @0 -e -f '%o\n'
[ "$(wc -l <"$dir/out")" -eq 9 ] || fail "-o @0 should read everything"
# Times as ISO 8601 or relative to now, wherever epoch ms are taken.
expect 0 "$cli" consume t1 -o @2000-01-01T00:00:00Z -e -f '%o\n'
[ "$(wc -l <"$dir/out")" -eq 9 ] || fail "-o @2000-01-01T00:00:00Z should read everything"
expect 0 "$cli" consume t1 -o @-1h -e -f '%o\n'
[ "$(wc -l <"$dir/out")" -eq 9 ] || fail "-o @-1h should read everything (produced seconds ago)"
expect 0 "$cli" consume t1 -o "@$(date -u -d '+1 hour' +%Y-%m-%dT%H:%M:%SZ)" -e
[ ! -s "$dir/out" ] || fail "-o @(ISO, an hour ahead) should print nothing"
expect 2 "$cli" consume t1 -o @yesterday -e
err_has "not a time"
expect 0 "$cli" consume t1 -o "@$(($(date +%s) * 1000 + 3600000))" -e
[ ! -s "$dir/out" ] || fail "-o @(an hour ahead) should print nothing"
expect 1 "$cli" consume t1 -o 100 -e
err_has "offsets 0..8"
# Records produced while consuming arrive; the consumer stops at -n.
# (From offset 9, the end now: -o end would race with the produce below.)
"$cli" consume t1 -o 9 -n 2 -f '%v\n' >"$dir/live" 2>"$dir/live.err" &
live=$!
sleep 0.5
printf 'live1\nlive2\n' | expect 0 "$cli" produce t1
for _ in $(seq 1 100); do kill -0 "$live" 2>/dev/null || break; sleep 0.1; done
if kill -0 "$live" 2>/dev/null; then kill "$live"; fail "consume -o 9 -n 2 did not see 2 new records"; fi
wait "$live" || fail "consume -o 9 -n 2 failed: $(cat "$dir/live.err")"
[ "$(tr '\n' ' ' <"$dir/live")" = "live1 live2 " ] || fail "live records: $(cat "$dir/live")"
# A reader that goes away early is not an error.
"$cli" consume t1 -o beginning -e | head -c 1 >/dev/null || fail "consume | head failed"

step "--json everywhere parses"
for args in "cluster status" "topic list" "topic describe t3" "topic describe t1"; do
  expect 0 "$cli" $args --json
  json_ok "$dir/out"
done
expect 0 "$cli" cluster status --json
cp "$dir/out" "$dir/status.json"
pyj "$dir/status.json" 'sorted(t["name"] for t in j["topics"]) == ["t1","t3"] and all(p["high_watermark"] >= 0 and len(p["isr"]) >= 1 for t in j["topics"] for p in t["partitions"])'
pyj "$dir/status.json" '[p["high_watermark"] for t in j["topics"] if t["name"] == "t1" for p in t["partitions"]] == [11]'
expect 0 "$cli" cluster status
out_has "HIGH-WATERMARK"
out_has "^t1 *0 "

step "a message above the limit is reported (line, size, limit); the others are still sent; exit 1"
{ echo a; head -c 10000000 /dev/zero | tr '\0' x; echo; echo b; } >"$dir/big.in"
expect 1 "$cli" produce t3 -p 0 <"$dir/big.in"
err_has "line 2: 10000000 bytes, above the limit of 1048576 bytes"
out_has "produced 2 message(s)"
expect 0 "$cli" consume t3 -p 0 -o -2 -e
[ "$(tr '\n' ' ' <"$dir/out")" = "a b " ] || fail "the lines around the oversized one: $(cat "$dir/out")"
expect 1 "$cli" produce t3 -p 0 --json <"$dir/big.in"
pyj "$dir/out" 'j["produced"] == 2 and j["too_large"] == 1 and j["failed"] == 1'

step "produce -f FILE; consume -c N (kcat's spelling of -n)"
printf 'f1\nf2\nf3\n' >"$dir/msgs"
expect 0 "$cli" produce t3 -p 1 -f "$dir/msgs"
out_has "produced 3 message(s)"
expect 0 "$cli" consume t3 -p 1 -o -3 -c 2
[ "$(tr '\n' ' ' <"$dir/out")" = "f1 f2 " ] || fail "produce -f / consume -c 2: $(cat "$dir/out")"
expect 2 "$cli" produce t3 -f "$dir/nosuch"
err_has "nosuch"

step "node decommission of an unknown node"
expect 1 "$cli" node decommission 99
err_has "99"

step "a decommission that cannot complete is refused, naming the partitions; recommission"
# t1 and t3 have replication factor 3 on 3 nodes: node 3's replicas have
# nowhere to go.
expect 1 "$cli" node decommission 3
err_has "node 3 cannot be decommissioned"
err_has "t1/0"
err_has "no other alive node"
expect 0 "$cli" cluster status --json
pyj "$dir/out" '[n["state"] for n in j["nodes"] if n["id"] == 3] == ["alive"]'
expect 1 "$cli" node recommission 3
err_has "not being decommissioned"

step "topic delete"
expect 0 "$cli" topic delete t3
out_has "deleted topic t3"
# The answer comes once the controller leader applied the deletion; the
# node that answers the next call may apply it a moment later.
topics_are t1
eventually 1 "$cli" topic describe t3
expect 0 "$cli" topic delete t1 --json
pyj "$dir/out" 'j["deleted"] == "t1"'
topics_are ""
expect 0 "$cli" topic list
out_has "no topics"

step "node decommission (no topics left: node 3 drains at once)"
expect 0 "$cli" node decommission 3
out_has "node 3 is being decommissioned"
for _ in $(seq 1 50); do
  "$cli" cluster status --json >"$dir/status.json"
  python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); sys.exit(0 if [n["state"] for n in j["nodes"] if n["id"] == 3][0] in ("draining","removed") else 1)' "$dir/status.json" && break
  sleep 0.2
done
pyj "$dir/status.json" '[n["state"] for n in j["nodes"] if n["id"] == 3][0] in ("draining","removed")'

step "stop the cluster by its PIDs"
bash "$cluster_sh" stop -d "$cdir" --timeout-s 30 >"$dir/stop.out"
for p in "${pids[@]}"; do
  ! kill -0 "$p" 2>/dev/null || fail "pid $p still runs after stop"
done
echo "cairn CLI: all checks passed"
