#!/usr/bin/env bash
# Installs the Debian 12 packages Cairn builds and tests with. Idempotent:
# it installs only what is missing and runs `apt-get update` only when needed.
set -euo pipefail

PACKAGES=(
  build-essential cmake pkg-config
  libuv1-dev libprotobuf-c-dev protobuf-c-compiler
  libraft-dev libcmocka-dev
  clang libclang-rt-dev
  libinih-dev
  libssl-dev openssl      # cluster-port HMAC handshake, client-port TLS; openssl makes test certificates
  libjansson-dev          # JSON text: src/common/jsonw.c, the one writer of the admin port and the CLI's --json
  python3                 # tests/integration/cli_cairn.sh checks --json output with it
  liblz4-dev libzstd-dev   # batch codecs (src/format/codec.c)
  zlib1g-dev libsnappy-dev # gzip and snappy batches from Kafka producers (src/format/codec.c)
  kcat python3-kafka      # tests/integration/kafka_clients.sh: the Kafka port with real clients
  python3-snappy python3-lz4 python3-zstandard # kafka-python's snappy/lz4/zstd codecs (kafka_codecs.sh)
  python3-confluent-kafka # tests/integration/kafka_confluent.sh
  librdkafka-dev          # test_kafka_rdkafka and cairn-kafka-bench (bench/compare's kafka stage)
  libmicrohttpd-dev
  systemd             # deploy_systemd: systemd-analyze verify / security on the unit
  python3-yaml        # deploy_manifests: parses the Kubernetes and compose YAML
  libpq-dev postgresql  # pgstore (src/storage/pgstore.c) links libpq; its tests run a private server (tests/lib/pg.sh)
  chromium            # test_admin loads the admin port's status page headless
  prometheus          # promtool: test_admin checks /metrics, deploy/monitoring/ rules (check metrics/rules)
  # the fault-tolerance rig (tests/fault/): network namespaces, tc, nftables
  iproute2 nftables
  nats-server libnats-dev redis-server redis-tools  # the peers bench/compare measures
)

# tests/integration/kafka_kafkajs.sh runs kafkajs under node and installs it
# with npm. Debian 12's `nodejs` and `npm` only when the commands are
# missing: a machine with nodesource's nodejs (which bundles npm and
# conflicts with Debian's npm package) keeps it.
command -v node >/dev/null 2>&1 || PACKAGES+=(nodejs)
command -v npm >/dev/null 2>&1 || PACKAGES+=(npm)

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
    missing+=("$p")
  fi
done

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi

# bench/compare runs its own redis-server and nats-server processes on
# ports of their own; system services started by the packages would only
# compete for the CPUs and the disk: stop and disable them (and the
# prometheus server Debian starts with promtool: the tests use promtool only).
stop_peer_services() {
  local svc
  for svc in redis-server nats-server prometheus postgresql; do
    if command -v systemctl >/dev/null 2>&1 && systemctl is-active --quiet "$svc" 2>/dev/null; then
      $SUDO systemctl disable --now "$svc" || true
    elif command -v service >/dev/null 2>&1 && service "$svc" status >/dev/null 2>&1; then
      $SUDO service "$svc" stop || true
    fi
  done
}

if [ ${#missing[@]} -eq 0 ]; then
  stop_peer_services
  exit 0
fi

echo "setup: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
# Try without an update first (fast when the lists are fresh); update on failure.
if ! $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"; then
  $SUDO apt-get update -q
  $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
fi
stop_peer_services
