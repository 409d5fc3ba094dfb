#!/usr/bin/env bash
# `cairn acl add|remove|list` end to end against a real cairnd started
# with --authorizer acl --super-users User:admin: bad command lines exit 2
# with nothing sent; entries added (one per operation), listed (table,
# filters, --json), removed; removing a missing entry and a malformed
# principal are refused by the node (exit 1, its reason); a connection
# that did not log in is User:ANONYMOUS and may not list or add entries.
#
# usage: cli_acl.sh CAIRN CAIRND
# The node is stopped by PID whatever happens (trap); CAIRN_KEEP_TEST_DIR=1
# keeps the directory (node log) afterwards.
set -euo pipefail
CLI_TEST_TAG=cli-acl
. "$(dirname "$0")/../lib/cli_test.sh"

step "help and bad command lines"
expect 0 "$cli" acl --help
out_has "usage: cairn acl add"
expect 2 "$cli" acl
expect 2 "$cli" acl frobnicate
err_has "unknown subcommand"
expect 2 "$cli" acl add --topic t --operation read
err_has "whose entry"
expect 2 "$cli" acl add --principal User:a --operation read
err_has "on what"
expect 2 "$cli" acl add --principal User:a --topic t
err_has "which --operation"
expect 2 "$cli" acl add --principal User:a --topic t --operation fly
err_has "'fly' is not read"
expect 2 "$cli" acl add --principal User:a --topic t --group g --operation read
err_has "one resource"
expect 2 "$cli" acl add --principal User:a --topic t --operation read --allow --deny
err_has "not both"
expect 2 "$cli" acl add --principal User:a --topic '' --operation read
err_has "an empty name"
expect 2 "$cli" acl list --operation read
err_has "filters on --principal"
expect 2 "$cli" acl remove --principal User:a --topic t --operation read extra
err_has "unexpected argument"

step "start a node with the authorizer"
base=$(free_base_port 1)
mkdir -p "$cdir"
"$cairnd" --data-dir "$cdir/node1" --listen "127.0.0.1:$base" --cluster-listen "127.0.0.1:$((base + 1))" \
  --admin-listen "127.0.0.1:$((base + 2))" --authorizer acl --super-users User:admin \
  >"$cdir/node1.log" 2>&1 &
pids+=($!)
export CAIRN_BOOTSTRAP="127.0.0.1:$base"
printf 'admin-pw\n' >"$dir/pw"
for _ in $(seq 1 100); do
  "$cli" user create admin <"$dir/pw" >/dev/null 2>&1 && break
  sleep 0.2
done
export CAIRN_PASSWORD=admin-pw

step "not logged in: User:ANONYMOUS"
expect 1 "$cli" acl list
err_has "User:ANONYMOUS may not DESCRIBE the cluster"
expect 1 "$cli" acl add --principal User:ANONYMOUS --cluster --operation alter
err_has "may not ALTER the cluster"

step "add, list, remove as the super-user"
expect 0 "$cli" --user admin acl add --principal User:alice --topic-prefix orders. --operation read,write
out_has "added: allow User:alice read topic orders.\*"
out_has "added: allow User:alice write topic orders.\*"
expect 0 "$cli" --user admin acl add --principal '*' --group billing --operation describe --deny
expect 0 "$cli" --user admin acl add --principal User:ops --cluster --operation create
expect 0 "$cli" --user admin acl add --principal User:ops --cluster --operation create
expect 0 "$cli" --user admin acl list
out_has "User:alice  allow       read       topic orders.\*"
out_has "group billing"
[ "$(grep -c 'User:ops' "$dir/out")" = 1 ] || fail "the same entry added twice is listed twice: $(cat "$dir/out")"
expect 0 "$cli" --user admin acl list --json
json_ok "$dir/out"
pyj "$dir/out" 'len(j) == 4'
pyj "$dir/out" '{"principal": "*", "resource_type": "group", "resource": "billing", "prefix": False, "operation": "describe", "permission": "deny"} in j'
expect 0 "$cli" --user admin acl list --principal User:alice --json
pyj "$dir/out" 'len(j) == 2 and all(e["prefix"] and e["resource"] == "orders." for e in j)'
expect 0 "$cli" --user admin acl list --topic-prefix orders. --json
pyj "$dir/out" 'len(j) == 2'
expect 0 "$cli" --user admin acl list --topic orders. --json
pyj "$dir/out" 'len(j) == 0'
expect 0 "$cli" --user admin acl list --cluster --json
pyj "$dir/out" 'len(j) == 1 and j[0]["principal"] == "User:ops"'
expect 0 "$cli" --user admin acl remove --principal User:alice --topic-prefix orders. --operation write
out_has "removed: allow User:alice write"
expect 0 "$cli" --user admin acl list --principal User:alice --json
pyj "$dir/out" 'len(j) == 1 and j[0]["operation"] == "read"'
expect 0 "$cli" --user admin acl add --principal User:carol --group-prefix etl. --operation all
out_has "added: allow User:carol all group etl.\*"
expect 0 "$cli" --user admin acl list --principal User:carol --json
pyj "$dir/out" 'len(j) == 1 and j[0]["operation"] == "all" and j[0]["prefix"]'
expect 0 "$cli" --user admin acl remove --principal User:carol --group-prefix etl. --operation all

step "the node's refusals"
expect 1 "$cli" --user admin acl remove --principal User:alice --topic-prefix orders. --operation write
err_has "no such access control entry"
expect 1 "$cli" --user admin acl add --principal alice --topic t --operation read
err_has "principal 'alice'"
expect 1 "$cli" --user admin acl add --principal "User:$(printf 'x%.0s' $(seq 1 70))" --topic t --operation read
err_has "not \*, User:NAME"
grep -q "refused: User:ANONYMOUS may not DESCRIBE the cluster" "$cdir/node1.log" ||
  fail "the node did not log the refusal"
step "delete-records needs DELETE on the topic"
printf 'bob-pw\n' | "$cli" --user admin user create bob >/dev/null || fail "user bob"
expect 0 "$cli" --user admin topic create recs --partitions 1 --replication-factor 1
seq 1 30 | "$cli" --user admin produce recs >/dev/null || fail "produce to recs"
expect 0 "$cli" --user admin acl add --principal User:bob --topic recs --operation read,write,describe
expect 1 env CAIRN_PASSWORD=bob-pw "$cli" --user bob topic delete-records recs --offset 10 --partition 0
err_has "User:bob may not DELETE topic 'recs'"
expect 0 "$cli" --user admin acl add --principal User:bob --topic recs --operation delete
expect 0 env CAIRN_PASSWORD=bob-pw "$cli" --user bob topic delete-records recs --offset 10 --partition 0
out_has "recs/0: log start now 10"
echo "cli_acl: ok"
