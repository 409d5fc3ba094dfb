#!/usr/bin/env bash
# bench_smoke.sh - cairn-bench runs a tiny workload against one real cairnd:
# produce while tailing (end-to-end latency), then read everything back;
# both summaries must say ok and count every message; then cairn-kafka-bench
# (librdkafka) does the same through the node's Kafka port. Not a measurement.
#   bench_smoke.sh CAIRND CAIRN_BENCH CAIRN_KAFKA_BENCH
set -euo pipefail
cairnd=$1
bench=$2
kbench=$3
dir=$(mktemp -d "${TMPDIR:-/tmp}/cairn-bench-smoke.XXXXXX")
pid=""
cleanup() {
  if [ -n "$pid" ]; then kill -9 "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; fi
  rm -rf "$dir"
}
trap cleanup EXIT
# Free ports: let the kernel pick three, then hand them to cairnd.
read -r p1 p2 p3 p4 < <(python3 -c 'import socket
ss=[socket.socket() for _ in range(4)]
[s.bind(("127.0.0.1",0)) for s in ss]
print(*[s.getsockname()[1] for s in ss])')
"$cairnd" --node-id 1 --data-dir "$dir/data" --listen "127.0.0.1:$p1" \
  --cluster-listen "127.0.0.1:$p2" --admin-listen "127.0.0.1:$p3" --kafka-listen "127.0.0.1:$p4" \
  --log-level warn \
  >"$dir/cairnd.log" 2>&1 &
pid=$!
boot="127.0.0.1:$p1"
fail() { echo "bench_smoke: $*" >&2; cat "$dir/cairnd.log" >&2; exit 1; }

out=$("$bench" --bootstrap "$boot" --topic smoke --partitions 2 --producers 2 --consumers 2 \
  --count 3000 --size 64 --linger-ms 1 --json --quiet) || fail "produce+tail failed: $out"
echo "$out"
grep -q '"ok":true' <<<"$out" || fail "produce+tail not ok"
grep -q '"produce":{"messages":3000,' <<<"$out" || fail "not 3000 produced"
grep -q '"consume":{"messages":3000,' <<<"$out" || fail "not 3000 consumed"
grep -q '"e2e_latency":{"count":3000,' <<<"$out" || fail "no latency samples"

out=$("$bench" --bootstrap "$boot" --topic smoke --partitions 2 --producers 0 --consumers 2 \
  --json --quiet) || fail "read-back failed: $out"
echo "$out"
grep -q '"consume":{"messages":3000,"expected":3000,' <<<"$out" || fail "read-back count"

out=$("$bench" --bootstrap "$boot" --topic smoke --partitions 2 --producers 1 --rate 2000 \
  --duration 1 --quiet) || fail "paced run failed: $out"
echo "$out"
grep -q '^ack latency' <<<"$out" || fail "no ack latency line"

out=$("$kbench" --bootstrap "127.0.0.1:$p4" --topic ksmoke --partitions 2 --rf 1 --producers 2 \
  --count 3000 --size 64 --json) || fail "kafka produce failed: $out"
echo "$out"
grep -q '"ok":true' <<<"$out" || fail "kafka produce not ok"
grep -q '"produce":{"messages":3000,' <<<"$out" || fail "kafka: not 3000 produced"
out=$("$kbench" --bootstrap "127.0.0.1:$p4" --topic ksmoke --partitions 2 --rf 1 --producers 0 \
  --consumers 2 --json) || fail "kafka read-back failed: $out"
echo "$out"
grep -q '"consume":{"messages":3000,"expected":3000,' <<<"$out" || fail "kafka read-back count"
echo "bench_smoke: ok"
