#!/usr/bin/env bash
# deploy_configs.sh - exercises deploy/ where it can run here: every example
# config parses (cairnd --check-config), install.sh stages a machine install
# whose systemd ExecStart command line validates for nodes 1..3, the
# container entrypoint derives node ids and addresses from the Kubernetes
# and compose settings (taken from the manifests themselves), and
# deploy/local/cluster brings a 3-node loopback cluster up, reports it and
# takes it down.
#   deploy_configs.sh BUILD_DIR
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
. "$root/tests/lib/ports.sh"
build=$(cd "$1" && pwd)
bin="$build/cairnd"
tmp=$(mktemp -d /tmp/cairn-deploy-XXXXXX)
cleanup() {
  if [ -f "$tmp/local/cluster.conf" ]; then "$root/deploy/local/cluster" down -d "$tmp/local" >/dev/null 2>&1 || true; fi
  rm -rf "$tmp"
}
trap cleanup EXIT
. "$root/tests/lib/reaper.sh"
reaper_watch "$tmp" # deploy/local/cluster's nodes, should a timeout kill this shell
fails=0
check() { # check NAME WANT-ID CMD...: the command validates and names node WANT-ID
  local name=$1 want=$2 out
  shift 2
  if ! out=$("$@" 2>&1); then
    echo "FAIL $name: $out"; fails=$((fails + 1)); return
  fi
  if ! grep -qx "id = $want" <<<"$out"; then
    echo "FAIL $name: the settings are not node $want:"; echo "$out" | head -5; fails=$((fails + 1)); return
  fi
  echo "ok   $name"
}

# Example configs.
check "deploy/cairnd.conf" 2 "$bin" --config "$root/deploy/cairnd.conf" --check-config
for i in 1 2 3; do
  check "deploy/systemd/node-$i.conf" "$i" "$bin" --config "$root/deploy/systemd/node-$i.conf" --check-config
done
# An example that listens on every interface authenticates clients and
# nodes (auth required, a cluster secret).
for f in deploy/cairnd.conf deploy/systemd/node-1.conf deploy/systemd/node-2.conf deploy/systemd/node-3.conf; do
  out=$("$bin" --config "$root/$f" --check-config)
  open=$(grep -E '^(listen|cluster_listen|admin_listen) = (0\.0\.0\.0|\[::\]):' <<<"$out" || true)
  if [ -n "$open" ] && { ! grep -qx 'auth = required' <<<"$out" || ! grep -q '^cluster_secret_file = .' <<<"$out"; }; then
    echo "FAIL $f listens on every interface without authentication and a cluster secret:"; echo "$open"
    fails=$((fails + 1))
  else
    what="loopback only"
    [ -z "$open" ] || what="every interface, with auth required and a cluster secret"
    echo "ok   $f: $what"
  fi
done

# A broken config is refused with exit 2.
printf '[network]\nlisen = 1.2.3.4:7400\n' >"$tmp/bad.conf"
if "$bin" --config "$tmp/bad.conf" --check-config >/dev/null 2>&1; then
  echo "FAIL --check-config accepted an unknown key"; fails=$((fails + 1))
else
  st=$?; [ "$st" = 2 ] && echo "ok   --check-config refuses a bad file (exit 2)" ||
    { echo "FAIL --check-config exit $st (want 2)"; fails=$((fails + 1)); }
fi

# A staged machine install and the unit's command lines.
bash "$root/deploy/install.sh" --build-dir "$build" --destdir "$tmp/stage" >/dev/null
unit="$tmp/stage/etc/systemd/system/cairnd@.service"
for f in "$tmp/stage/usr/local/bin/cairnd" "$unit" "$tmp/stage/etc/cairn/node-1.conf"; do
  [ -e "$f" ] || { echo "FAIL install.sh did not stage $f"; fails=$((fails + 1)); }
done
for key in ExecStart ExecStartPre; do
  line=$(sed -n "s/^$key=//p" "$unit")
  for i in 1 2 3; do
    cmd=${line//%i/$i}
    cmd=${cmd//\/usr\/local\/bin\/cairnd/$tmp/stage/usr/local/bin/cairnd}
    cmd=${cmd//\/etc\/cairn/$tmp/stage/etc/cairn}
    read -r -a argv <<<"$cmd"
    [[ " ${argv[*]} " == *" --check-config "* ]] || argv+=(--check-config)
    check "cairnd@$i.service $key" "$i" "${argv[@]}"
  done
done

# The container entrypoint with the manifests' own settings.
k8s_voters=$(sed -n '/name: CAIRN_VOTERS/{n;s/.*value: "\(.*\)"/\1/p}' "$root/deploy/k8s/cairn.yaml")
k8s_voters=${k8s_voters//\$(POD_NAMESPACE)/default}
compose_voters=$(sed -n 's/^ *CAIRN_VOTERS: *//p' "$root/deploy/docker/compose.yaml")
[ -n "$k8s_voters" ] && [ -n "$compose_voters" ] || { echo "FAIL voters not found in the manifests"; fails=$((fails + 1)); }
for o in 0 1 2; do
  check "k8s pod cairn-$o" $((o + 1)) env HOSTNAME="cairn-$o" CAIRND="$bin" CAIRN_DATA_DIR="$tmp/k8s" \
    CAIRN_ADVERTISE="cairn-$o.cairn.default.svc.cluster.local" CAIRN_VOTERS="$k8s_voters" \
    sh "$root/deploy/docker/entrypoint.sh" --check-config
  ext=$(sed -n "s/.*CAIRN_ADVERTISE: cairn-$o, CAIRN_EXTERNAL_ADVERTISE: \"\([^\"]*\)\".*/\1/p" \
    "$root/deploy/docker/compose.yaml")
  check "compose service cairn-$o" $((o + 1)) env HOSTNAME="cairn-$o" CAIRND="$bin" CAIRN_DATA_DIR="$tmp/c" \
    CAIRN_ADVERTISE="cairn-$o" CAIRN_VOTERS="$compose_voters" CAIRN_EXTERNAL_ADVERTISE="$ext" \
    sh "$root/deploy/docker/entrypoint.sh" --check-config
  out=$(env HOSTNAME="cairn-$o" CAIRND="$bin" CAIRN_DATA_DIR="$tmp/c" CAIRN_ADVERTISE="cairn-$o" \
    CAIRN_VOTERS="$compose_voters" CAIRN_EXTERNAL_ADVERTISE="$ext" \
    sh "$root/deploy/docker/entrypoint.sh" --check-config 2>&1 || true)
  if [ -n "$ext" ] && grep -qx "external_advertise = $ext" <<<"$out" &&
    grep -qx "external_listen = 0.0.0.0:7500" <<<"$out" && grep -qx "advertise_client = cairn-$o:7400" <<<"$out"; then
    echo "ok   compose service cairn-$o: clients in the network get cairn-$o:7400, on the host $ext"
  else
    echo "FAIL compose service cairn-$o: external listener not set up (CAIRN_EXTERNAL_ADVERTISE '$ext')"
    fails=$((fails + 1))
  fi
done

# Under compose (CAIRN_CONFIG_ERROR_EXIT=0) a configuration error ends the
# container with 0, which `restart: on-failure` leaves stopped.
st=0
env HOSTNAME=cairn-0 CAIRND="$bin" CAIRN_DATA_DIR="$tmp/c" CAIRN_CONFIG_ERROR_EXIT=0 \
  sh "$root/deploy/docker/entrypoint.sh" --voters "1@elsewhere:7401" >"$tmp/ep.out" 2>&1 || st=$?
if [ "$st" = 0 ] && grep -q "exit 2" "$tmp/ep.out" && grep -q "not restarting" "$tmp/ep.out"; then
  echo "ok   entrypoint: a configuration error under compose ends with 0, saying why"
else
  echo "FAIL entrypoint with CAIRN_CONFIG_ERROR_EXIT=0 and a bad setting: exit $st"; cat "$tmp/ep.out"
  fails=$((fails + 1))
fi
st=0
env HOSTNAME=cairn-0 CAIRND="$bin" CAIRN_DATA_DIR="$tmp/c" \
  sh "$root/deploy/docker/entrypoint.sh" --voters "1@elsewhere:7401" >/dev/null 2>&1 || st=$?
[ "$st" = 2 ] && echo "ok   entrypoint: without CAIRN_CONFIG_ERROR_EXIT the exit status stays 2" ||
  { echo "FAIL entrypoint without CAIRN_CONFIG_ERROR_EXIT: exit $st (want 2)"; fails=$((fails + 1)); }

# The image's runtime packages hold every shared library cairnd links.
if command -v dpkg >/dev/null; then
  runtime=$(sed -n 's/.*apt-get install -y --no-install-recommends \(.*\) \\$/\1/p' "$root/deploy/docker/Dockerfile")
  missing=""
  # The libraries cairnd names itself (NEEDED), not what they pull in.
  ma=$(gcc -print-multiarch 2>/dev/null || echo x86_64-linux-gnu)
  for lib in $(readelf -d "$bin" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p'); do
    pkg=$(dpkg -S "/lib/$ma/$lib" "/usr/lib/$ma/$lib" 2>/dev/null |
      head -1 | cut -d: -f1) || pkg=""
    case "$pkg" in "" | libc6 | libgcc-s1 | libasan* | libubsan* | libstdc++*) continue ;; esac
    [[ " $runtime " == *" $pkg "* ]] || missing+=" $pkg"
  done
  if [ -n "$missing" ]; then
    echo "FAIL the Dockerfile's runtime stage lacks:$missing"; fails=$((fails + 1))
  else
    echo "ok   the Dockerfile installs every library cairnd links ($runtime)"
  fi
fi

# The local cluster on loopback.
if [ -f "$root/deploy/cluster.sh" ]; then
  port=$(free_base_port 3)
  if out=$("$root/deploy/local/cluster" up 3 -d "$tmp/local" --base-port "$port" --cairnd "$bin" 2>&1) &&
    grep -q "^bootstrap: 127.0.0.1:$port,127.0.0.1:$((port + 10)),127.0.0.1:$((port + 20))$" <<<"$out" &&
    [ "$(grep -c "admin 127.0.0.1:" <<<"$out")" = 3 ]; then
    echo "ok   deploy/local/cluster up 3"
  else
    echo "FAIL deploy/local/cluster up 3:"; echo "$out"; fails=$((fails + 1))
  fi
  # The image's health check against a running node's admin port: ready.
  # (up returns once the nodes answer; registering takes a moment more)
  for _ in $(seq 1 150); do
    out=$(bash "$root/deploy/docker/healthcheck.sh" "127.0.0.1:$((port + 2))" 2>&1) && break
    sleep 0.2
  done
  if [ "$out" = ready ]; then
    echo "ok   cairn-healthcheck: node 1 ready"
  else
    echo "FAIL cairn-healthcheck on node 1: $out"; fails=$((fails + 1))
  fi
  if "$root/deploy/local/cluster" status -d "$tmp/local" >"$tmp/status" 2>&1 &&
    [ "$(grep -c ": running" "$tmp/status")" = 3 ]; then
    echo "ok   deploy/local/cluster status"
  else
    echo "FAIL deploy/local/cluster status:"; cat "$tmp/status"; fails=$((fails + 1))
  fi
  "$root/deploy/local/cluster" down -d "$tmp/local" >/dev/null
  if out=$(bash "$root/deploy/docker/healthcheck.sh" "127.0.0.1:$((port + 2))" 2>&1); then
    echo "FAIL cairn-healthcheck says a stopped node is healthy: $out"; fails=$((fails + 1))
  else
    echo "ok   cairn-healthcheck: a stopped node is unhealthy ($out)"
  fi
  if "$root/deploy/local/cluster" status -d "$tmp/local" >"$tmp/status" 2>&1 ||
    [ "$(grep -c ": stopped" "$tmp/status")" != 3 ]; then
    echo "FAIL deploy/local/cluster down left nodes running:"; cat "$tmp/status"; fails=$((fails + 1))
  else
    echo "ok   deploy/local/cluster down"
  fi
else
  echo "skip deploy/local/cluster: deploy/cluster.sh is not in this tree"
fi

if ((fails > 0)); then echo "$fails failure(s)"; exit 1; fi
echo "all deploy checks passed"
