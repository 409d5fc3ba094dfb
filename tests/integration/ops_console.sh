#!/usr/bin/env bash
# The admin port's console on a real 3-node cluster, in headless Chromium
# driven through the DevTools protocol (console_cdp.py): after produce
# traffic spread over a few seconds, a consumer group that read part of a
# topic and a JSON message with a key and a header, the page shows the
# topic's produce rate and the cluster-wide chart, the topic with the
# internal one apart, the group's lag, and the message as JSON and hex.
# The Overview's screenshot is kept in $CAIRN_TEST_ARTIFACTS (default
# test-artifacts/) as console.png. Then the actions, behind the admin
# token (the nodes run with --admin-token-file, the page opened with
# #token=...): a topic created, grown to 4 partitions, its retention.bytes
# changed (and a bad retention.ms refused), then deleted, the group's offsets reset, a
# node decommissioned; the CLI confirms their effects. Skipped (77)
# without chromium.
# usage: ops_console.sh CAIRN CAIRND
set -euo pipefail
CLI_TEST_TAG=ops-console
. "$(dirname "$0")/../lib/cli_test.sh"
py=/usr/bin/python3 # Debian's python, as the other tests use
[ -x "$py" ] || py=python3
chromium=$(command -v chromium || command -v chromium-browser || true)
if [ -z "$chromium" ]; then
  echo "chromium is not installed (Debian package chromium): skipped"
  exit 77
fi
artifacts="${CAIRN_TEST_ARTIFACTS:-test-artifacts}"
mkdir -p "$artifacts"

step "a 3-node cluster with an admin token, a topic, a JSON message and a few seconds of traffic"
# deploy/cluster.sh starts the binary it is given: a wrapper adds the token.
token=console-test-token-0123456789
printf '%s\n' "$token" >"$dir/admin-token"
chmod 600 "$dir/admin-token"
printf '#!/bin/sh\nexec %q "$@" --admin-token-file %q\n' "$cairnd" "$dir/admin-token" >"$dir/cairnd-token"
chmod +x "$dir/cairnd-token"
cairnd="$dir/cairnd-token"
start_cluster3
expect 0 "$cli" topic create orders --partitions 3 --replication-factor 3
value='{"order":1,"item":"tea","qty":2}'
echo "$value" | "$cli" produce orders -p 0 -k order-1 -H source=console-test >/dev/null
for i in $(seq 1 6); do
  seq 1 50 | sed "s/^/order-$i-/" | "$cli" produce orders >/dev/null
  sleep 1
done
expect 0 "$cli" consume -g billing orders -n 20
eventually 0 "$cli" group describe billing --json
# The lag the page must show: DescribeGroups' (the client protocol's) sum.
lag=$("$py" -c 'import json,sys; print(sum(o["lag"] for o in json.load(open(sys.argv[1]))["offsets"] if o["lag"] >= 0))' "$dir/out")
echo "billing's lag: $lag"
[ "$lag" -gt 0 ] || fail "billing has no lag to show: $(cat "$dir/out")"

step "the console in headless Chromium: tabs, rates, the group's lag, the message"
admin=$((base + 2))
"$py" "$repo/tests/integration/console_cdp.py" "$chromium" "http://127.0.0.1:$admin/#token=$token" \
  "$artifacts/console.png" billing "$lag" orders "$value"

step "the actions' effects, as the CLI sees them"
expect 1 "$cli" topic describe console-made
eventually 0 "$cli" group describe billing --json
pyj "$dir/out" 'all(o["lag"] == 0 for o in j["offsets"]) and len(j["offsets"]) > 0'
echo "PASS"
