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
  python3                 # tests/integration/cli_cairn.sh checks --json output with it
  liblz4-dev libzstd-dev
  libmicrohttpd-dev
  chromium            # test_admin loads the admin port's status page headless
  # the fault-tolerance rig (tests/fault/): network namespaces, tc, nftables
  iproute2 nftables
)

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi

echo "setup: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
# Try without an update first (fast when the lists are fresh); update on failure.
if ! $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"; then
  $SUDO apt-get update -q
  $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
fi
