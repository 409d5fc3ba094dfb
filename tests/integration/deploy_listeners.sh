#!/usr/bin/env bash
# deploy_listeners.sh - per-listener advertised addresses (issue 17,
# finding 3), with real cairnd processes:
#   1. three nodes (with a cluster secret), each with its client port and
#      an external client port (--external-listen / --external-advertise),
#      all registered (the registration proof covers the external address);
#      Metadata asked through a client port names every node's client
#      address, asked through an external port every node's external
#      address; a topic of three
#      partitions (replication factor 3) is produced to and read back in
#      order through the external ports only;
#   2. one node that advertises a client address nobody can resolve
#      (cairn-0.invalid, as the compose file once handed host clients
#      cairn-0:7400): a produce through its client port fails, and the
#      error names the address it could not reach; through its external
#      port, advertised as 127.0.0.1, the same produce is delivered.
#   deploy_listeners.sh BUILD_DIR
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
. "$root/tests/lib/ports.sh"
build=$(cd "$1" && pwd)
cairnd="$build/cairnd"
cli="$build/cairn"
tmp=$(mktemp -d /tmp/cairn-listeners-XXXXXX)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  rm -rf "$tmp"
}
trap cleanup EXIT
fails=0
fail() { echo "FAIL $*"; fails=$((fails + 1)); }

wait_ready() { # wait_ready ADMIN_ADDR...: every node's /ready answers 200 (60 s at most)
  local a
  for a in "$@"; do
    for _ in $(seq 1 300); do
      bash "$root/deploy/docker/healthcheck.sh" "$a" >/dev/null 2>&1 && continue 2
      sleep 0.2
    done
    fail "node with admin port $a never became ready"
    for f in "$tmp"/*.log; do echo "--- $f"; tail -5 "$f"; done
    return 1
  done
}

# ---- 1. three nodes, two client ports each ----
base=$(free_base_port 3)
ext_base=$(free_base_port 3)
while [ "$ext_base" = "$base" ]; do ext_base=$(free_base_port 3); done
voters="1@127.0.0.1:$((base + 1)),2@127.0.0.1:$((base + 11)),3@127.0.0.1:$((base + 21))"
# With a cluster secret: each registration's proof covers the external
# address (a node whose proof did not match would never be registered).
openssl rand -hex 32 >"$tmp/secret"
chmod 600 "$tmp/secret"
admins=()
for i in 1 2 3; do
  p=$((base + 10 * (i - 1)))
  e=$((ext_base + 10 * (i - 1)))
  "$cairnd" --node-id "$i" --data-dir "$tmp/d$i" --listen "127.0.0.1:$p" \
    --cluster-listen "127.0.0.1:$((p + 1))" --admin-listen "127.0.0.1:$((p + 2))" \
    --external-listen "127.0.0.1:$e" --external-advertise "127.0.0.1:$e" \
    --voters "$voters" --kafka-listen off --cluster-secret-file "$tmp/secret" >"$tmp/node$i.log" 2>&1 &
  pids+=($!)
  admins+=("127.0.0.1:$((p + 2))")
done
wait_ready "${admins[@]}"

nodes_seen() { # nodes_seen BOOTSTRAP: "id client_address" lines from cluster status
  "$cli" -b "$1" --json cluster status | /usr/bin/python3 -c '
import json, sys
for n in sorted(json.load(sys.stdin)["nodes"], key=lambda n: n["id"]):
    print(n["id"], n["client_address"])'
}
want_int=$(printf '1 127.0.0.1:%d\n2 127.0.0.1:%d\n3 127.0.0.1:%d' "$base" $((base + 10)) $((base + 20)))
want_ext=$(printf '1 127.0.0.1:%d\n2 127.0.0.1:%d\n3 127.0.0.1:%d' "$ext_base" $((ext_base + 10)) $((ext_base + 20)))
# Registrations reach every node's copy of the metadata within a heartbeat
# or so: ask until the answer is whole (10 s at most).
for _ in $(seq 1 50); do
  got_int=$(nodes_seen "127.0.0.1:$((base + 10))" 2>/dev/null || true)
  got_ext=$(nodes_seen "127.0.0.1:$((ext_base + 10))" 2>/dev/null || true)
  [ "$got_int" = "$want_int" ] && [ "$got_ext" = "$want_ext" ] && break
  sleep 0.2
done
[ "$got_int" = "$want_int" ] && echo "ok   Metadata through a client port names the client addresses" ||
  { fail "through the client port node 2 names:"; echo "$got_int"; }
[ "$got_ext" = "$want_ext" ] && echo "ok   Metadata through an external port names the external addresses" ||
  { fail "through the external port node 2 names:"; echo "$got_ext"; }

ext_boot="127.0.0.1:$ext_base,127.0.0.1:$((ext_base + 10)),127.0.0.1:$((ext_base + 20))"
"$cli" -b "$ext_boot" topic create ext3 --partitions 3 --replication-factor 3 >/dev/null
seq 1 300 | sed 's/^/m/' >"$tmp/sent"
if "$cli" -b "$ext_boot" produce ext3 <"$tmp/sent" >"$tmp/produce.out" 2>&1; then
  echo "ok   300 messages produced through the external ports"
else
  fail "produce through the external ports:"; cat "$tmp/produce.out"
fi
"$cli" -b "$ext_boot" consume ext3 -e -f '%p %o %v\n' >"$tmp/got" 2>"$tmp/consume.err" || true
offsets_in_order() { # every partition's offsets in $tmp/got count up from 0
  local p
  for p in 0 1 2; do awk -v p=$p '$1 == p { if ($2 != n++) exit 1 }' "$tmp/got" || return 1; done
}
if [ "$(cut -d' ' -f3 "$tmp/got" | sort)" = "$(sort "$tmp/sent")" ] && offsets_in_order; then
  echo "ok   read back through the external ports: every message once, offsets in order"
else
  fail "read back $(wc -l <"$tmp/got") records through the external ports:"; head -5 "$tmp/got"; cat "$tmp/consume.err"
fi
for p in "${pids[@]}"; do kill "$p"; done
for p in "${pids[@]}"; do wait "$p" || true; done
pids=()

# ---- 2. an unresolvable advertised client address ----
port=$(free_base_port 1)
ext=$(free_base_port 1)
while [ "$ext" = "$port" ]; do ext=$(free_base_port 1); done
bad="cairn-0.invalid:$port"
"$cairnd" --node-id 1 --data-dir "$tmp/single" --listen "127.0.0.1:$port" --advertise-client "$bad" \
  --cluster-listen "127.0.0.1:$((port + 1))" --admin-listen "127.0.0.1:$((port + 2))" \
  --external-listen "127.0.0.1:$ext" --external-advertise "127.0.0.1:$ext" \
  --kafka-listen off >"$tmp/single.log" 2>&1 &
pids+=($!)
wait_ready "127.0.0.1:$((port + 2))"
"$cli" -b "127.0.0.1:$ext" topic create t1 --partitions 1 --replication-factor 1 >/dev/null
st=0
echo hello | "$cli" -b "127.0.0.1:$port" --timeout-ms 3000 produce t1 >"$tmp/bad.out" 2>&1 || st=$?
if [ "$st" != 0 ] && grep -q "not delivered within the delivery timeout" "$tmp/bad.out" &&
  grep -qF "$bad" "$tmp/bad.out"; then
  echo "ok   through the client port: the delivery timeout names $bad"
else
  fail "produce through the client port (exit $st) does not name $bad:"; cat "$tmp/bad.out"
fi
if echo hello | "$cli" -b "127.0.0.1:$ext" --timeout-ms 10000 produce t1 >"$tmp/good.out" 2>&1 &&
  [ "$("$cli" -b "127.0.0.1:$ext" consume t1 -e -f '%v\n' 2>/dev/null)" = hello ]; then
  echo "ok   through the external port (advertised 127.0.0.1): delivered and read back"
else
  fail "produce through the external port:"; cat "$tmp/good.out"
fi

if ((fails > 0)); then echo "$fails failure(s)"; exit 1; fi
echo "all listener checks passed"
