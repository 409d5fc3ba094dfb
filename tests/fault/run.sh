#!/usr/bin/env bash
# run.sh - the fault-tolerance run: N cairnd hosts in network namespaces
# (hosts.sh), the workload/checker (cairn-fault-workload) in a client
# namespace, faults from the nemesis (nemesis.sh), then the checks:
# the workload's (acknowledged values, duplicates, order, contiguity,
# consumers), a clean SIGTERM stop of every node, no sanitizer report or
# core in any node's log, and every replica's committed log equal to the
# log read back from the leaders.
#
#   tests/fault/run.sh [--time SECONDS] [--seed N] [--nemesis kill,pause,...]
#                      [--nodes 3|5] [--partitions N] [--producers N]
#                      [--raft-log group|node] [--bin-dir DIR] [--out DIR]
#                      [--keep] [--node-flags "FLAGS"] [--retention-bytes N]
#                      [--kafka-producers N] [--idempotent auto|on|off]
#   tests/fault/run.sh --short [--bin-dir DIR]   the ctest run: 150 s, seed 7,
#                                                every nemesis, 5 nodes
#
# Defaults: 300 s, a random seed (printed), every nemesis, 5 nodes,
# build/release, the nodes' default timings (heartbeat, election, node
# timeout: what users get; --node-flags adds cairnd flags, e.g. other
# timings to compare), cairnd's own --raft-log (auto: node on the rig's
# new data directories) unless --raft-log
# is given (passed to every cairnd), no retention, one Kafka producer
# (librdkafka's idempotent producer on the nodes' Kafka ports, checked as
# the native producers are; --kafka-producers 0 runs none). --idempotent
# off makes every producer plain (no producer id, no resend of a value
# whose outcome is unknown: librdkafka's with no retries), so Produce
# without the producer table is what the faults meet; auto (the default)
# is idempotent when the nodes offer InitProducerId.
# --retention-bytes N gives the topic retention by size (segments of N/4
# bytes), which each replica applies on its own every 5 s (unless
# --node-flags gives --retention-check-ms) during the run: the log
# start is then checked against DeleteRecords only from below, replicas'
# starts are not compared, and each caught-up replica must hold at least
# N bytes unless its start is 0 or a DeleteRecords put it there
# (retention_bound.sh). Needs root, iproute2 and nftables;
# exits 77 (skipped) without them. Exit status 0 pass, 1 a violation (the seed is printed),
# 2 a setup failure. Results stay in the output directory on failure or
# with --keep: summary.txt, history.json, faults.txt, node logs.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)

time_s=300
seed=""
nemesis=""
nodes=5
parts=6
producers=4
raft_log=""
bin_dir="$root/build/release"
out=""
node_flags=""
retention=0
kafka_producers=1
idempotent=auto
keep=0
short=0
while [ $# -gt 0 ]; do
  case "$1" in
    --time) time_s=$2; shift 2 ;;
    --seed) seed=$2; shift 2 ;;
    --nemesis) nemesis=$2; shift 2 ;;
    --nodes) nodes=$2; shift 2 ;;
    --partitions) parts=$2; shift 2 ;;
    --producers) producers=$2; shift 2 ;;
    --raft-log) raft_log=$2; shift 2 ;;
    --bin-dir) bin_dir=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --keep) keep=1; shift ;;
    --node-flags) node_flags=$2; shift 2 ;;
    --short) short=1; shift ;;
    --retention-bytes) retention=$2; shift 2 ;;
    --kafka-producers) kafka_producers=$2; shift 2 ;;
    --idempotent) idempotent=$2; shift 2 ;;
    -h | --help) sed -n '2,30p' "$0"; exit 0 ;;
    *) echo "run.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
done
case "$raft_log" in
  "" | group | node) ;;
  *) echo "run.sh: --raft-log '$raft_log' is not group or node" >&2; exit 2 ;;
esac
if ((short)); then
  time_s=150
  seed=${seed:-7}
fi
seed=${seed:-$(( $(date +%s%N) % 1000000 ))}

# shellcheck source=tests/fault/hosts.sh
source "$here/hosts.sh"
# shellcheck source=tests/fault/nemesis.sh
source "$here/nemesis.sh"
# shellcheck source=tests/fault/retention_bound.sh
source "$here/retention_bound.sh"
NEM_LIST=${nemesis:-$NEM_ALL}
for f in ${NEM_LIST//,/ }; do
  case ",$NEM_ALL," in *",$f,"*) ;; *) echo "run.sh: unknown nemesis '$f' ($NEM_ALL)" >&2; exit 2 ;; esac
done

if ! why=$(hosts_supported); then
  echo "fault run SKIPPED: $why"
  exit 77
fi
for b in cairnd cairn-log cairn-fault-workload cairn-fault-ctl; do
  [ -x "$bin_dir/$b" ] || { echo "run.sh: $bin_dir/$b is missing (build first)" >&2; exit 2; }
done

out=${out:-$(mktemp -d /tmp/cairn-fault-XXXXXX)}
mkdir -p "$out"
out=$(cd "$out" && pwd)
HOSTS_DIR="$out/hosts"
HOSTS_CAIRND="$bin_dir/cairnd"
# The nodes' own timings (src/server/config.c), unless --node-flags says
# otherwise; the nemesis holds a pause for 1.5-3 election timeouts.
election_ms=1000
if [[ " $node_flags " =~ \ --election-ms\ ([0-9]+)\  ]]; then election_ms=${BASH_REMATCH[1]}; fi
HOSTS_FLAGS="--replace-delay-ms 600000 --log-level info $node_flags"
[ -n "$raft_log" ] && HOSTS_FLAGS+=" --raft-log $raft_log"
# Retention every 5 s (the default is 5 minutes, once or twice a run).
((retention == 0)) || [[ " $node_flags " == *" --retention-check-ms "* ]] || HOSTS_FLAGS+=" --retention-check-ms 5000"
NEM_CTL="$bin_dir/cairn-fault-ctl"
NEM_TOPIC=fault
NEM_PARTS=$parts
NEM_ELECTION_MS=$election_ms
NEM_FAULTS="$out/faults.txt"
NEM_CRASHES="$out/crashes.txt"
: >"$NEM_FAULTS"
: >"$NEM_CRASHES"
RANDOM=$seed

export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
# No core files (an ASan abort's would be huge) unless FAULT_CORES=1 asks
# for them (a crash of a release build: set /proc/sys/kernel/core_pattern).
[ "${FAULT_CORES:-0}" = 1 ] && ulimit -c unlimited || ulimit -c 0

wl_pid=""
finish() {
  local rc=$?
  [ -n "$wl_pid" ] && kill -9 "$wl_pid" 2>/dev/null
  hosts_down
  if ((rc != 0 && rc != 77)); then
    echo "fault run FAILED (exit $rc): seed $seed; results kept in $out"
    echo "reproduce: bash tests/fault/run.sh --time $time_s --seed $seed --nemesis $NEM_LIST --nodes $nodes${raft_log:+ --raft-log $raft_log}${node_flags:+ --node-flags \"$node_flags\"}$( ((retention == 0)) || echo " --retention-bytes $retention")$( ((kafka_producers == 1)) || echo " --kafka-producers $kafka_producers")$([ "$idempotent" = auto ] || echo " --idempotent $idempotent")"
  elif ((keep == 0 && rc == 0)); then
    rm -rf "$out"
  fi
  exit "$rc"
}
trap finish EXIT
trap 'exit 130' INT TERM

echo "fault run: seed $seed, $time_s s, $nodes nodes, nemesis $NEM_LIST, raft log ${raft_log:-default}, output $out${node_flags:+, node flags $node_flags}$( ((retention == 0)) || echo ", retention $retention bytes")"
hosts_create "$nodes" || { echo "run.sh: creating the hosts failed" >&2; exit 2; }
for ((i = 1; i <= nodes; i++)); do hosts_start "$i"; done
if ! nem_wait_alive 120; then
  echo "run.sh: the cluster did not come up within 120 s (logs in $HOSTS_DIR)" >&2
  exit 2
fi

: >"$out/workload.log"
hosts_client "$bin_dir/cairn-fault-workload" --nodes "$(hosts_client_list)" --out "$out" \
  --topic "$NEM_TOPIC" --partitions "$parts" --rf 3 --producers "$producers" --consumers 2 \
  --time "$time_s" --seed "$seed" --ready-file "$out/ready" --faults "$NEM_FAULTS" \
  --retention-bytes "$retention" --kafka "$(hosts_kafka_list)" --kafka-producers "$kafka_producers" --idempotent "$idempotent" \
  >"$out/workload.log" 2>&1 &
wl_pid=$!
for ((k = 0; k < 180; k++)); do
  grep -q "topic .* ready" "$out/workload.log" && break
  kill -0 "$wl_pid" 2>/dev/null || break
  sleep 1
done
if ! grep -q "topic .* ready" "$out/workload.log"; then
  cat "$out/workload.log"
  echo "run.sh: the workload never started" >&2
  exit 2
fi
# The nemesis stamps its events on the workload's clock.
NEM_T0_MS=$(sed -n 's/^workload: topic .* ready; .* from \([0-9]*\) ms since the epoch$/\1/p' "$out/workload.log")
[ -n "$NEM_T0_MS" ] || { echo "run.sh: the workload's start time is missing from its log" >&2; exit 2; }

# The nemesis shrugs off a failed probe or rule (a node may be down): no -e.
set +e
nem_run "$((time_s > 10 ? time_s - 5 : time_s))"
nem_heal_all
if ! nem_wait_alive 180; then
  states=""
  for ((i = 1; i <= nodes; i++)); do
    states+=" node $i: $(nem_ctl state "$(hosts_client_list)" "$i" || echo unknown);"
  done
  nem_record "not every node is alive 180 s after healing:$states"
  echo "not every node is alive 180 s after healing:$states" >>"$NEM_CRASHES"
fi
touch "$out/ready"
wait "$wl_pid"
wl_rc=$?
wl_pid=""
grep -v "^[0-9T:.-]*Z " "$out/workload.log" || true

violations=0
fail() { echo "VIOLATION: $*"; echo "$*" >>"$out/violations.txt"; violations=$((violations + 1)); }
((wl_rc == 0)) || fail "the workload's checks failed (exit $wl_rc): see above and $out/history.json"

# Crashes seen during the run.
while read -r line; do fail "crash: $line"; done <"$NEM_CRASHES"

# A clean stop: SIGTERM, exit 0 (after a moment for followers to apply
# the last commits, so the replica comparison sees them).
sleep 3
for ((i = 1; i <= nodes; i++)); do
  hosts_term "$i" 60
  st=$HOSTS_STATUS
  [ "$st" = 0 ] || fail "node $i exited $st on SIGTERM (expected a clean stop, 0)"
done

# Sanitizer reports and cores.
for ((i = 1; i <= nodes; i++)); do
  if grep -n -m3 -E "ERROR: (Address|Leak|Thread)Sanitizer|runtime error:|SUMMARY: |Assertion .* failed|core dumped" \
    "$HOSTS_DIR/node$i.log" >"$out/sanitizer-node$i.txt"; then
    fail "node $i's log has a crash report: $(head -1 "$out/sanitizer-node$i.txt")"
  fi
done
if ls "$HOSTS_DIR"/node*/core* >/dev/null 2>&1; then fail "core files: $(ls "$HOSTS_DIR"/node*/core*)"; fi

# Every replica's log against the final read-back: no two may disagree on
# an offset below the high watermark read from the leader.
replicas=0
lagging=0
for ((q = 0; q < parts; q++)); do
  final="$out/final-p$q.txt"
  [ -f "$final" ] || continue
  for ((i = 1; i <= nodes; i++)); do
    for d in "$HOSTS_DIR/node$i/partitions/$NEM_TOPIC-$q".*/log; do
      [ -d "$d" ] || continue
      dump="$out/replica-n$i-p$q.txt"
      if ! "$bin_dir/cairn-log" dump "$d" --show-records >"$dump.raw" 2>"$dump.err"; then
        fail "node $i partition $q: cairn-log dump failed: $(head -1 "$dump.err")"
        continue
      fi
      sed -n 's/^  record offset=\([0-9]*\) ts=[0-9-]* key=null value="\(.*\)" headers=0$/\1 \2/p' "$dump.raw" >"$dump"
      replicas=$((replicas + 1))
      # Its log start against the leader's (DeleteRecords moved it: a
      # replica below it kept deleted records, one above it lost some).
      read -r rstart rbytes < <(retention_bound_read "$bin_dir/cairn-log" "$d") || true
      fstart=$(cat "$out/final-p$q.start" 2>/dev/null || echo 0)
      ceiling=$(cat "$out/final-p$q.ceiling" 2>/dev/null || echo 0)
      held=${rstart:-0} # its start, for the retention bound
      # With retention each replica moves its own start: its records are
      # compared from there, and the starts are not.
      from=$fstart
      if ((retention > 0)); then
        [ -z "$rstart" ] || ((rstart <= fstart)) || from=$rstart
        rstart=""
      fi
      if [ -n "$rstart" ] && ((rstart > fstart)); then
        fail "node $i partition $q starts at $rstart, above the leader's log start $fstart"
      fi
      res=$(awk -v who="node $i partition $q" -v from="$from" '
        NR == FNR { want[$1] = substr($0, length($1) + 2); n += $1 >= from; next }
        ($1 in want) && want[$1] != substr($0, length($1) + 2) {
          if (bad++ < 3) printf "%s offset %s: replica has \"%s\", the leader had \"%s\"\n", who, $1, substr($0, length($1) + 2), want[$1]
        }
        $1 >= from { have++ }
        END { printf "END %d %d %d\n", bad + 0, have + 0, n + 0 }' "$final" "$dump")
      while read -r line; do
        case "$line" in
          END*) read -r _ _ have n <<<"$line"
                if ((have >= n)) && [ -n "$rstart" ] && ((rstart < fstart)); then
                  fail "node $i partition $q starts at $rstart, below the leader's log start $fstart: it holds deleted records"
                fi
                if ((have >= n)); then
                  why=$(retention_bound_why "$held" "${rbytes:-0}" "$retention" "$ceiling")
                  [ -z "$why" ] || fail "node $i partition $q $why"
                fi
                ((have >= n)) || { lagging=$((lagging + 1)); echo "note: node $i partition $q holds $have of $n committed records (lagging)"; } ;;
          *) fail "replicas disagree: $line" ;;
        esac
      done <<<"$res"
    done
  done
done
echo "replicas compared: $replicas (lagging: $lagging)"

nfaults=$(grep -c -v -E "healed|restart node|resume node|skipped|churn: node .* (is|stopped)" "$NEM_FAULTS" || true)
{
  echo "seed $seed, $time_s s, $nodes nodes, nemesis $NEM_LIST${node_flags:+, node flags $node_flags}"
  grep "^workload: " "$out/workload.log" || true
  echo "faults injected: $nfaults (list in faults.txt)"
  kinds=""
  for k in "kill:kill node" "pause:pause node" "partition:partition (majority|isolate|bridge|ring)" \
    "netem:netem( \(|:)" "lostcache:lostcache node" "churn:churn: decommission" \
    "killall:killall: every" "majority:majority: nodes" "torn:torn node" "conncut:conncut node" "clock:clock node" \
    "delete:delete p[0-9]+: (ack|indeterminate)" "crash:CRASH"; do
    kinds+="${kinds:+, }${k%%:*} $(grep -c -E "^[0-9]+ ${k#*:}" "$NEM_FAULTS" || true)"
  done
  echo "by kind: $kinds"
  echo "replicas compared: $replicas (lagging: $lagging)"
  echo "violations: $violations"
} >"$out/summary.txt"
cat "$out/summary.txt"
if ((violations > 0)); then
  exit 1
fi
echo "fault run PASSED: seed $seed"
