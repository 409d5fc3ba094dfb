#!/usr/bin/env bash
# shellcheck disable=SC2034 # HOSTS_STATUS is set for the callers to read
# hosts.sh - N test hosts as Linux network namespaces, one cairnd in each.
#
# Layout (PREFIX is "cf" and 5 hex digits from the pid and the clock, one
# no namespace has yet, so concurrent runs do not collide):
#   PREFIX-br   the bridge's own namespace: br0, and one veth end per host
#   PREFIX-nI   host I (1..N): eth0 = 10.77.0.I/24, cairnd on :7400 (client),
#               :7401 (cluster), :7402 (admin), :9092 (Kafka),
#               data in DIR/nodeI
#   PREFIX-cl   the client host: eth0 = 10.77.0.100/24 (workload, probes)
# Nothing is added to the root namespace's networking; all addresses live in
# namespaces this script made. Needs root, iproute2 and nftables. Nodes
# 1..min(N,3) are the controller voters, the others join through a voter.
#
# As a command:
#   hosts.sh up N DIR [CAIRND [FLAGS...]]   create, start, print the node list
#   hosts.sh down DIR                       stop and remove what `up` made
# As a library (source it; run.sh and nemesis.sh do): set HOSTS_DIR, then
#   hosts_create N; hosts_start I; hosts_kill I; hosts_term I; hosts_pause I;
#   hosts_resume I; hosts_exec I CMD...; hosts_client CMD...; hosts_down.
# Every process started is recorded (DIR/pid.I) and every namespace made is
# recorded (DIR/namespaces); hosts_down removes exactly those, whatever
# happened before (call it from an EXIT trap).

HOSTS_SUBNET=10.77.0
HOSTS_CLIENT_IP=$HOSTS_SUBNET.100
HOSTS_CLIENT_PORT=7400
HOSTS_KAFKA_PORT=9092
: "${HOSTS_CAIRND:=}"
: "${HOSTS_FLAGS:=}"

hosts_log() { printf '%s hosts: %s\n' "$(date -u +%H:%M:%S)" "$*" >&2; }

# The namespace of host I ("cl" for the client).
hosts_ns() { echo "$(cat "$HOSTS_DIR/prefix")-n$1"; }
hosts_client_ns() { echo "$(cat "$HOSTS_DIR/prefix")-cl"; }
hosts_ip() { echo "$HOSTS_SUBNET.$1"; }
hosts_count() { cat "$HOSTS_DIR/count"; }

# "1@10.77.0.1:7400,..." (client addresses), for the workload and probes.
hosts_client_list() {
  local n i out=""
  n=$(hosts_count)
  for ((i = 1; i <= n; i++)); do out+="${out:+,}$i@$(hosts_ip "$i"):$HOSTS_CLIENT_PORT"; done
  echo "$out"
}

# "10.77.0.1:9092,..." (Kafka ports), for the workload's Kafka producers.
hosts_kafka_list() {
  local n i out=""
  n=$(hosts_count)
  for ((i = 1; i <= n; i++)); do out+="${out:+,}$(hosts_ip "$i"):$HOSTS_KAFKA_PORT"; done
  echo "$out"
}

hosts_voter_count() { local n; n=$(hosts_count); echo $((n < 3 ? n : 3)); }

hosts_voters() {
  local v i out=""
  v=$(hosts_voter_count)
  for ((i = 1; i <= v; i++)); do out+="${out:+,}$i@$(hosts_ip "$i"):7401"; done
  echo "$out"
}

# Records a namespace, then makes it.
hosts_netns_add() {
  echo "$1" >>"$HOSTS_DIR/namespaces"
  ip netns add "$1"
  ip -n "$1" link set lo up
}

# Connects namespace $1 to the bridge through veth $2 (bridge side), with
# address $3 on its eth0.
hosts_wire() {
  local ns=$1 veth=$2 addr=$3 br
  br="$(cat "$HOSTS_DIR/prefix")-br"
  ip -n "$br" link add "$veth" type veth peer name eth0 netns "$ns"
  ip -n "$br" link set "$veth" master br0
  ip -n "$br" link set "$veth" up
  ip -n "$ns" addr add "$addr/24" dev eth0
  ip -n "$ns" link set eth0 up
}

# The nftables table the partition and lossy-link faults add rules to
# (nemesis.sh): input and output chains, empty (accept) when healed.
hosts_nft_init() {
  ip netns exec "$1" nft -f - <<'NFT'
table inet cairnfault {
  chain input { type filter hook input priority 0; policy accept; }
  chain output { type filter hook output priority 0; policy accept; }
}
NFT
}

# hosts_create N: the namespaces, the bridge and the wires; no process yet.
hosts_create() {
  local n=$1 prefix i
  mkdir -p "$HOSTS_DIR"
  # Not from RANDOM: run.sh seeds it, and two runs of one seed must not clash.
  local salt=$(($$ ^ 10#$(date +%N)))
  prefix="cf$(printf '%05x' $((salt & 0xfffff)))"
  while ip netns list | grep -q "^$prefix-"; do
    salt=$((salt + 1))
    prefix="cf$(printf '%05x' $((salt & 0xfffff)))"
  done
  echo "$prefix" >"$HOSTS_DIR/prefix"
  echo "$n" >"$HOSTS_DIR/count"
  : >"$HOSTS_DIR/namespaces"
  hosts_netns_add "$prefix-br" || return 1
  ip -n "$prefix-br" link add br0 type bridge || return 1
  ip -n "$prefix-br" link set br0 up
  for ((i = 1; i <= n; i++)); do
    hosts_netns_add "$prefix-n$i" || return 1
    hosts_wire "$prefix-n$i" "v$i" "$(hosts_ip "$i")" || return 1
    hosts_nft_init "$prefix-n$i" || return 1
    mkdir -p "$HOSTS_DIR/node$i"
  done
  hosts_netns_add "$prefix-cl" || return 1
  hosts_wire "$prefix-cl" vcl "$HOSTS_CLIENT_IP" || return 1
  hosts_log "created $n hosts ($prefix-n1..n$n, bridge $prefix-br, client $prefix-cl)"
}

# The pid of host I's cairnd ("" when none is recorded).
hosts_pid() { cat "$HOSTS_DIR/pid.$1" 2>/dev/null || true; }

# hosts_owns PID DIR: whether PID is a process with DIR among its
# arguments. A pid is reused once bash has reaped its process, and on a
# shared machine the next owner may be another run's or another test's
# cairnd: "is it a cairnd" is not enough (a killall here once SIGKILLed
# another test's node), so a process is ours only with our data dir.
hosts_owns() {
  [ -n "$1" ] && { tr '\0' '\n' <"/proc/$1/cmdline"; } 2>/dev/null | grep -qxF -- "$2"
}

# Whether the recorded pid of host I is its live cairnd (not a reused pid).
hosts_alive() {
  hosts_owns "$(hosts_pid "$1")" "$HOSTS_DIR/node$1"
}

# hosts_start I [--fresh]: starts cairnd in host I (after wiping its data
# dir with --fresh). Voters get the voter list, the others --join a voter.
hosts_start() {
  local i=$1 ip join_host ns v
  ip=$(hosts_ip "$i")
  ns=$(hosts_ns "$i")
  v=$(hosts_voter_count)
  # Two faults that stopped the same node both restart it: the second finds
  # it running (a second process would fail on its ports, and its pid would
  # hide the first one's).
  if hosts_alive "$i"; then
    hosts_log "node $i already runs (pid $(hosts_pid "$i"))"
    return 0
  fi
  if [ "${2:-}" = --fresh ]; then rm -rf "$HOSTS_DIR/node$i"; mkdir -p "$HOSTS_DIR/node$i"; fi
  local args=(--node-id "$i" --data-dir "$HOSTS_DIR/node$i"
    --listen "$ip:7400" --cluster-listen "$ip:7401" --admin-listen "$ip:7402"
    --kafka-listen "$ip:$HOSTS_KAFKA_PORT")
  if ((i <= v)); then
    args+=(--voters "$(hosts_voters)")
  else
    join_host=$(hosts_ip $(((i - 1) % v + 1)))
    args+=(--join "$join_host:7400")
  fi
  # shellcheck disable=SC2086 # HOSTS_FLAGS is a list of flags
  # The clock nemesis writes a wall-clock offset here (src/common/wallclock.h).
  CAIRN_CLOCK_OFFSET_FILE="$HOSTS_DIR/clock.$i" \
    ip netns exec "$ns" "$HOSTS_CAIRND" "${args[@]}" $HOSTS_FLAGS \
    >>"$HOSTS_DIR/node$i.log" 2>&1 </dev/null &
  echo $! >"$HOSTS_DIR/pid.$i"
  echo "$! $HOSTS_DIR/node$i" >>"$HOSTS_DIR/all-pids"
  hosts_log "started node $i (pid $!)"
}

# Reaps host I's process (a child of this shell: call it directly, not in
# $(...)); sets HOSTS_STATUS to its exit status (128+N after signal N).
HOSTS_STATUS=0
hosts_reap() {
  local pid
  HOSTS_STATUS=0
  pid=$(hosts_pid "$1")
  [ -n "$pid" ] || return 0
  wait "$pid" 2>/dev/null || HOSTS_STATUS=$?
}

hosts_kill() {
  local pid
  pid=$(hosts_pid "$1")
  if hosts_alive "$1"; then kill -9 "$pid" 2>/dev/null || true; fi
  hosts_reap "$1"
  rm -f "$HOSTS_DIR/pid.$1"
}

# hosts_term I [TIMEOUT_S]: SIGTERM, waits; HOSTS_STATUS gets the exit
# status (137 when it had to be killed). Call it directly, not in $(...).
hosts_term() {
  local i=$1 t=${2:-30} pid k
  pid=$(hosts_pid "$i")
  HOSTS_STATUS=0
  [ -n "$pid" ] || return 0
  if hosts_alive "$i"; then
    kill -CONT "$pid" 2>/dev/null || true
    kill -TERM "$pid" 2>/dev/null || true
  fi
  for ((k = 0; k < t * 10; k++)); do
    hosts_alive "$i" || break
    sleep 0.1
  done
  if hosts_alive "$i"; then kill -9 "$pid" 2>/dev/null || true; fi
  hosts_reap "$i"
  rm -f "$HOSTS_DIR/pid.$i"
}

# Whether any process runs with host I's data dir (recorded or not).
hosts_dir_in_use() {
  local f
  for f in /proc/[0-9]*/cmdline; do
    if { tr '\0' '\n' <"$f"; } 2>/dev/null | grep -qxF -- "$HOSTS_DIR/node$1"; then return 0; fi
  done
  return 1
}

hosts_pause() { if hosts_alive "$1"; then kill -STOP "$(hosts_pid "$1")" 2>/dev/null || true; fi; }
hosts_resume() { if hosts_alive "$1"; then kill -CONT "$(hosts_pid "$1")" 2>/dev/null || true; fi; }

# Runs a command inside host I's namespace / the client's.
hosts_exec() { local i=$1; shift; ip netns exec "$(hosts_ns "$i")" "$@"; }
hosts_client() { ip netns exec "$(hosts_client_ns)" "$@"; }

# Stops every process this run started and removes every namespace it made.
hosts_down() {
  [ -n "${HOSTS_DIR:-}" ] && [ -d "$HOSTS_DIR" ] || return 0
  local pid ns
  if [ -f "$HOSTS_DIR/all-pids" ]; then
    # "pid dir" lines: only a process that still has that host's data dir
    while read -r pid dir; do
      if hosts_owns "$pid" "$dir"; then
        kill -CONT "$pid" 2>/dev/null || true
        kill -9 "$pid" 2>/dev/null || true
      fi
    done <"$HOSTS_DIR/all-pids"
    rm -f "$HOSTS_DIR/all-pids" "$HOSTS_DIR"/pid.*
  fi
  if [ -f "$HOSTS_DIR/namespaces" ]; then
    while read -r ns; do
      if [ -n "$ns" ]; then ip netns del "$ns" 2>/dev/null || true; fi
    done <"$HOSTS_DIR/namespaces"
    : >"$HOSTS_DIR/namespaces"
  fi
}

# Whether this machine can run the rig: root and network namespaces.
hosts_supported() {
  if [ "$(id -u)" -ne 0 ]; then echo "needs root (network namespaces)"; return 1; fi
  if ! command -v ip >/dev/null || ! command -v tc >/dev/null || ! command -v nft >/dev/null; then
    echo "needs iproute2 (ip, tc) and nftables (nft): bash deploy/setup.sh"; return 1
  fi
  local probe="cfprobe$$"
  if ! ip netns add "$probe" 2>/dev/null; then echo "cannot create network namespaces"; return 1; fi
  ip netns del "$probe"
  return 0
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
  set -euo pipefail
  cmd=${1:-}
  case "$cmd" in
    up)
      [ $# -ge 3 ] || { echo "usage: hosts.sh up N DIR [CAIRND [FLAGS...]]" >&2; exit 2; }
      HOSTS_DIR=$(realpath -m "$3")
      HOSTS_CAIRND=${4:-$(dirname "$0")/../../build/release/cairnd}
      HOSTS_CAIRND=$(realpath "$HOSTS_CAIRND")
      HOSTS_FLAGS="${*:5}"
      why=$(hosts_supported) || { echo "hosts.sh: $why" >&2; exit 77; }
      trap 'hosts_down' ERR
      hosts_create "$2"
      for ((i = 1; i <= $2; i++)); do hosts_start "$i"; done
      # The processes outlive this shell: forget them as jobs.
      disown -a
      echo "nodes: $(hosts_client_list)"
      echo "client namespace: $(hosts_client_ns) (ip netns exec $(hosts_client_ns) ...)"
      ;;
    down)
      [ $# -eq 2 ] || { echo "usage: hosts.sh down DIR" >&2; exit 2; }
      HOSTS_DIR=$(realpath -m "$2")
      hosts_down
      echo "removed the hosts of $HOSTS_DIR"
      ;;
    *) echo "usage: hosts.sh up N DIR [CAIRND [FLAGS...]] | down DIR" >&2; exit 2 ;;
  esac
fi
