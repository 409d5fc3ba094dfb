#!/usr/bin/env bash
# Starts, stops and shows a local cluster of real cairnd processes on one
# machine, each node with its own data dir, ports and log under one
# directory. The PIDs are recorded there, so `stop` ends exactly those
# processes (SIGTERM, then SIGKILL after a bound) and nothing else.
#
# Layout of DIR (default ./cairn-local):
#   cluster.conf     the settings `start` chose (nodes, base port, binary)
#   bootstrap        the client addresses, for `cairn -b "$(cat DIR/bootstrap)"`
#   nodeI/           node I's data dir
#   nodeI.log        its output
#   nodeI.pid        its PID while it runs
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
repo="$(dirname "$here")"
prog="deploy/cluster.sh"

usage() {
  cat <<EOF
usage: $prog start  [-n NODES] [-d DIR] [--base-port PORT] [--cairnd PATH] [--cli PATH]
                     [--fresh] [--wait-s S]
       $prog stop   [-d DIR] [--timeout-s S]
       $prog status [-d DIR] [--cli PATH]

Runs a local Cairn cluster of NODES cairnd processes (default 3) on
127.0.0.1 under DIR (default ./cairn-local, or \$CAIRN_CLUSTER_DIR).
Node I (1..NODES) listens on PORT+10*(I-1) for clients, +1 for the
cluster, +2 for admin, +3 for Kafka clients (default PORT 7400: 7400,
7410, 7420, ...; Kafka 7403, 7413, ...). The
first three nodes are the controller's voters; the others join them.

  start       start every node in the background and wait until the
              cluster answers (controller elected, every node alive).
              A DIR used before keeps its data and settings (a restart);
              with some nodes running, only the stopped ones start;
              --fresh removes the nodes' data and logs first.
  stop        SIGTERM each recorded PID, SIGKILL after --timeout-s
              (default 40) if it has not exited; data is kept.
  status      each node's PID and whether it runs (exit 0 when all do), then
              \`cairn cluster status\` when the CLI is built.

  --cairnd PATH   the cairnd binary (default: build/release/cairnd, else
                  build/sanitize/cairnd, else \`cairnd\` on PATH)
  --cli PATH      the cairn CLI start and status use (default:
                  build/release/cairn, else build/sanitize/cairn, else
                  \`cairn\` on PATH; without one start only waits for ports)
  --wait-s S      how long start waits for the cluster (default 60)

Then:  export CAIRN_BOOTSTRAP=\$(cat DIR/bootstrap)
       cairn topic create demo --partitions 3 --replication-factor 3
EOF
}

die() {
  echo "$prog: $*" >&2
  exit 1
}

cmd="${1:-}"
case "$cmd" in
  start | stop | status) shift ;;
  -h | --help | help)
    usage
    exit 0
    ;;
  "")
    usage >&2
    exit 2
    ;;
  *)
    echo "$prog: unknown command '$cmd' (start, stop or status)" >&2
    exit 2
    ;;
esac

nodes=""
dir="${CAIRN_CLUSTER_DIR:-./cairn-local}"
base_port=""
cairnd=""
cli="${CAIRN_CLI:-}"
fresh=0
wait_s=60
stop_timeout_s=40
need() { [ $# -ge 2 ] || { echo "$prog: $1 needs a value" >&2; exit 2; }; }
is_num() { [[ "$1" =~ ^[0-9]+$ ]]; }
while [ $# -gt 0 ]; do
  case "$1" in
    -n | --nodes) need "$@"; nodes="$2"; shift 2 ;;
    -d | --dir) need "$@"; dir="$2"; shift 2 ;;
    --base-port) need "$@"; base_port="$2"; shift 2 ;;
    --cairnd) need "$@"; cairnd="$2"; shift 2 ;;
    --cli) need "$@"; cli="$2"; shift 2 ;;
    --fresh) fresh=1; shift ;;
    --wait-s) need "$@"; wait_s="$2"; shift 2 ;;
    --timeout-s) need "$@"; stop_timeout_s="$2"; shift 2 ;;
    -h | --help) usage; exit 0 ;;
    *) echo "$prog: unknown option '$1' (see $prog --help)" >&2; exit 2 ;;
  esac
done
for v in "$nodes" "$base_port" "$wait_s" "$stop_timeout_s"; do
  [ -z "$v" ] || is_num "$v" || { echo "$prog: '$v' is not a number" >&2; exit 2; }
done

# pid_of I: node I's recorded PID if that process still runs and is the
# cairnd started for this directory (a PID reused by another program is
# never signalled); nothing otherwise.
pid_of() {
  local f="$dir/node$1.pid" pid
  [ -f "$f" ] || return 0
  pid=$(cat "$f")
  is_num "$pid" || return 0
  [ -r "/proc/$pid/cmdline" ] || return 0
  # The node's data dir is on its command line: check it is this node's.
  if tr '\0' '\n' <"/proc/$pid/cmdline" 2>/dev/null | grep -qxF -- "$(cd "$dir" && pwd)/node$1"; then
    echo "$pid"
  fi
}

load_conf() {
  [ -f "$dir/cluster.conf" ] || return 1
  # shellcheck disable=SC1091
  . "$dir/cluster.conf"
}

port_in_use() {
  (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

cli_bin() {
  local b
  if [ -n "$cli" ]; then echo "$cli"; return; fi
  for b in "$repo/build/release/cairn" "$repo/build/sanitize/cairn"; do
    if [ -x "$b" ]; then echo "$b"; return; fi
  done
  command -v cairn || true
}

do_stop() {
  load_conf || { echo "$prog: no cluster in $dir (nothing to stop)"; return 0; }
  local i pid pids=() ids=()
  for i in $(seq 1 "$NODES"); do
    pid=$(pid_of "$i")
    if [ -n "$pid" ]; then
      kill -TERM "$pid" 2>/dev/null || true
      pids+=("$pid")
      ids+=("$i")
    fi
    rm -f "$dir/node$i.pid.stopping"
  done
  if [ ${#pids[@]} -eq 0 ]; then
    echo "$prog: no node of $dir is running"
    rm -f "$dir"/node*.pid
    return 0
  fi
  echo "stopping node(s) ${ids[*]} (SIGTERM; SIGKILL after ${stop_timeout_s}s)"
  local deadline=$((SECONDS + stop_timeout_s)) alive k
  while :; do
    alive=0
    for k in "${!pids[@]}"; do
      if kill -0 "${pids[$k]}" 2>/dev/null; then alive=1; fi
    done
    [ "$alive" -eq 1 ] || break
    if [ "$SECONDS" -ge "$deadline" ]; then
      for k in "${!pids[@]}"; do
        if kill -0 "${pids[$k]}" 2>/dev/null; then
          echo "node ${ids[$k]} (pid ${pids[$k]}) did not stop in ${stop_timeout_s}s: SIGKILL"
          kill -KILL "${pids[$k]}" 2>/dev/null || true
        fi
      done
      break
    fi
    sleep 0.2
  done
  rm -f "$dir"/node*.pid
  echo "stopped; data kept in $dir ($prog start -d $dir restarts it, --fresh wipes it)"
}

do_status() {
  load_conf || die "no cluster in $dir (start one: $prog start -d $dir)"
  local i pid running=0
  for i in $(seq 1 "$NODES"); do
    pid=$(pid_of "$i")
    local p=$((BASE_PORT + 10 * (i - 1)))
    if [ -n "$pid" ]; then
      running=$((running + 1))
      echo "node $i: running, pid $pid, client 127.0.0.1:$p, log $dir/node$i.log"
    else
      echo "node $i: stopped, client 127.0.0.1:$p, log $dir/node$i.log"
    fi
  done
  local c
  c=$(cli_bin)
  if [ "$running" -gt 0 ] && [ -n "$c" ]; then
    echo
    "$c" -b "$(cat "$dir/bootstrap")" cluster status || true
  fi
  [ "$running" -eq "$NODES" ]
}

do_start() {
  mkdir -p "$dir"
  local running=""
  if load_conf; then
    local i
    for i in $(seq 1 "$NODES"); do
      [ -z "$(pid_of "$i")" ] || running="$running $i"
    done
    if [ -n "$running" ] && { [ "$fresh" -eq 1 ] || [ -n "$nodes$base_port" ]; }; then
      die "node(s)$running of $dir are running; stop them first: $prog stop -d $dir"
    fi
    if [ "$fresh" -eq 1 ]; then
      # Only what this script made: the nodes' dirs, logs and settings.
      for i in $(seq 1 "$NODES"); do rm -rf "$dir/node$i" "$dir/node$i.log" "$dir/node$i.pid"; done
      rm -f "$dir/cluster.conf" "$dir/bootstrap"
    elif [ -n "$nodes$base_port" ] && { [ "${nodes:-$NODES}" != "$NODES" ] || [ "${base_port:-$BASE_PORT}" != "$BASE_PORT" ]; }; then
      die "$dir holds a cluster of $NODES node(s) on base port $BASE_PORT; restart it as it was, or use --fresh (removes its data) or another -d DIR"
    else
      nodes="${nodes:-$NODES}"
      base_port="${base_port:-$BASE_PORT}"
      cairnd="${cairnd:-$CAIRND}"
    fi
  elif [ -n "$(ls -A "$dir" 2>/dev/null)" ]; then
    die "$dir is not empty and holds no cluster started by this script; choose another -d DIR"
  fi
  nodes="${nodes:-3}"
  base_port="${base_port:-7400}"
  [ "$nodes" -ge 1 ] && [ "$nodes" -le 20 ] || die "-n: $nodes nodes is out of range (1..20)"
  [ "$base_port" -ge 1024 ] && [ $((base_port + 10 * nodes)) -le 65535 ] ||
    die "--base-port: $base_port is out of range (1024..$((65535 - 10 * nodes)) for $nodes nodes)"
  if [ -z "$cairnd" ]; then
    local b
    for b in "$repo/build/release/cairnd" "$repo/build/sanitize/cairnd"; do
      if [ -x "$b" ]; then cairnd="$b"; break; fi
    done
    [ -n "$cairnd" ] || cairnd=$(command -v cairnd || true)
    [ -n "$cairnd" ] || die "no cairnd binary: build one (bash deploy/build.sh release) or pass --cairnd PATH"
  fi
  [ -x "$cairnd" ] || die "--cairnd: $cairnd is not an executable"
  cairnd="$(cd "$(dirname "$cairnd")" && pwd)/$(basename "$cairnd")"

  local i p voters="" bootstrap="" nvoters=$((nodes < 3 ? nodes : 3))
  for i in $(seq 1 "$nodes"); do
    p=$((base_port + 10 * (i - 1)))
    for q in "$p" $((p + 1)) $((p + 2)); do
      [[ " $running " != *" $i "* ]] || continue
      port_in_use "$q" && die "port $q on 127.0.0.1 is in use (another cluster? $prog status); choose another --base-port"
    done
    if [ "$i" -le "$nvoters" ]; then voters="$voters${voters:+,}$i@127.0.0.1:$((p + 1))"; fi
    bootstrap="$bootstrap${bootstrap:+,}127.0.0.1:$p"
  done
  printf 'NODES=%s\nBASE_PORT=%s\nCAIRND=%q\n' "$nodes" "$base_port" "$cairnd" >"$dir/cluster.conf"
  echo "$bootstrap" >"$dir/bootstrap"
  NODES=$nodes
  local adir
  adir="$(cd "$dir" && pwd)"
  for i in $(seq 1 "$nodes"); do
    [[ " $running " != *" $i "* ]] || continue
    p=$((base_port + 10 * (i - 1)))
    local args=(--node-id "$i" --data-dir "$adir/node$i" --listen "127.0.0.1:$p"
      --cluster-listen "127.0.0.1:$((p + 1))" --admin-listen "127.0.0.1:$((p + 2))"
      --kafka-listen "127.0.0.1:$((p + 3))")
    if [ "$i" -le "$nvoters" ]; then args+=(--voters "$voters"); else args+=(--join "127.0.0.1:$base_port"); fi
    echo "=== $(date -u +%FT%TZ) start: $cairnd ${args[*]}" >>"$adir/node$i.log"
    "$cairnd" "${args[@]}" </dev/null >>"$adir/node$i.log" 2>&1 &
    echo $! >"$dir/node$i.pid"
  done
  if [ -n "$running" ]; then
    echo "node(s)$running already running; started the others under $dir (logs: $dir/node*.log)"
  else
    echo "started $nodes node(s) under $dir (logs: $dir/node*.log)"
  fi

  # Wait: every process up and its client port open, then (with the CLI)
  # a controller and every node alive.
  local deadline=$((SECONDS + wait_s)) c ready
  c=$(cli_bin)
  while :; do
    ready=1
    for i in $(seq 1 "$nodes"); do
      if [ -z "$(pid_of "$i")" ] && ! kill -0 "$(cat "$dir/node$i.pid" 2>/dev/null)" 2>/dev/null; then
        # (pid_of alone can miss a node still being exec'd by a wrapper
        # of --cairnd: its command line reads empty for that moment.)
        echo "$prog: node $i exited; the end of $dir/node$i.log:" >&2
        tail -5 "$dir/node$i.log" >&2
        do_stop >&2
        exit 1
      fi
      port_in_use $((base_port + 10 * (i - 1))) || ready=0
    done
    if [ "$ready" -eq 1 ] && [ -n "$c" ]; then
      # Each node answers from its own copy of the metadata: ask each.
      local st
      for i in $(seq 1 "$nodes"); do
        [ "$ready" -eq 1 ] || break
        st=$("$c" -b "127.0.0.1:$((base_port + 10 * (i - 1)))" --timeout-ms 2000 cluster status --json 2>/dev/null) || ready=0
        grep -q '"controller_id": *[1-9]' <<<"$st" || ready=0
        [ "$(grep -c '"state": *"alive"' <<<"$st")" -ge "$nodes" ] || ready=0
      done
    fi
    [ "$ready" -eq 0 ] || break
    if [ "$SECONDS" -ge "$deadline" ]; then
      echo "$prog: the cluster did not come up within ${wait_s}s; see $dir/node*.log" >&2
      exit 1
    fi
    sleep 0.3
  done
  echo "cluster ready: bootstrap $bootstrap"
}

case "$cmd" in
  start) do_start ;;
  stop) do_stop ;;
  status) do_status ;;
esac
