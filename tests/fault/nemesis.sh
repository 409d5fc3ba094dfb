#!/usr/bin/env bash
# nemesis.sh - named faults for the hosts of hosts.sh, combined and
# scheduled. Source it after hosts.sh; run.sh drives it.
#
# Faults (NEM_LIST, comma separated):
#   kill       SIGKILL a node and restart it 1-6 s later; the target is a
#              random node, the controller leader or a partition leader
#              (found through Metadata on the client port)
#   pause      SIGSTOP a node (same targets) for 1.5-3 election timeouts, SIGCONT
#   partition  drop traffic between nodes (nftables rules inside the
#              nodes' namespaces; the client reaches every node): a random
#              minority from the majority, the leader alone, a bridge (two
#              halves that only one node sees both of), or a ring (each
#              node sees its two neighbours only); healed after 8-20 s
#   netem      a bad network on some nodes' links for 8-20 s: tc netem
#              delay/loss/reordering when the kernel has sch_netem, else
#              random loss (nftables numgen) and a bandwidth cap (tc tbf)
#              that queues packets into delays
#   lostcache  SIGKILL a node, cut the unsynced tail off its partitions'
#              newest segments (cairn-fault-ctl cut-unsynced), restart it
#   churn      decommission a non-voter node (5 hosts), wait until it is
#              removed, stop it, wipe its data, start it again as a fresh node
#   killall    SIGKILL every node at once, restart them all 1-4 s later
#   majority   SIGKILL a majority of the nodes at once, restart them one at a
#              time, 1-4 s apart, starting 1-4 s later
#   torn       SIGKILL a node; while it is down, tear the last batch of the
#              newest Raft open segment of some of its partitions (and of its
#              metadata log) with --raft-log group, or with --raft-log node
#              the last write job of its node-wide log (half the time) and,
#              a quarter of the time, garble a record of an earlier job in
#              the middle of its metadata log (meta/wal: damage that sets
#              that log aside and has the metadata replica rebuilt from its
#              peers), and write 64 random
#              bytes into the newest log segment of one partition
#              (cairn-fault-ctl tear-raft, tear-wal, garble-wal,
#              garble-log); restart it
#   conncut    reset every client connection of a node (TCP RST for 1-2 s on
#              its client port: requests in flight are cut mid-way)
#   clock      jump one node's wall clock (not the machine's) by -2 days to
#              +2 days for 5-15 s (CAIRN_CLOCK_OFFSET_FILE, read each 0.5 s),
#              then back: what keeps calendar time (retention by time, group
#              offsets' expiry, timestamps) sees the jump, timers do not
#   delete     DeleteRecords on a random partition, 25-95 % of the way from
#              its log start to its high watermark (cairn-fault-ctl
#              delete-records); half the time a follower of that partition
#              is SIGKILLed 1-3 s before and restarted 5-20 s after, so that
#              it comes back behind the delete, through its own log or a
#              snapshot that holds it. The outcome (ack, fail, indeterminate)
#              goes into the faults file: the workload checks each
#              partition's final log start against it
#
# Each step starts one fault, or two at once (a third of the steps), keeps
# them for a while, heals them, and leaves the cluster a quiet period. The
# schedule comes from bash's RANDOM, seeded with the run's seed. Every
# fault is a line in NEM_FAULTS ("<ms> <what>": milliseconds from NEM_T0_MS,
# the wall-clock time at which the workload's clock starts, so that its
# availability figures line up with its operations). A node that exits on
# its own (not by a fault) is a crash: recorded in NEM_CRASHES and restarted.
#
# Needs: HOSTS_DIR (hosts.sh), NEM_CTL (cairn-fault-ctl), NEM_TOPIC,
# NEM_PARTS, NEM_ELECTION_MS, NEM_FAULTS, NEM_CRASHES, NEM_LIST, NEM_T0_MS
# (milliseconds since the epoch; unset: the time this file is sourced).

# The nem_*_hold variables and NEM_ALL are read indirectly (${!h}) or by run.sh.
# shellcheck disable=SC2034
NEM_ALL="kill,pause,partition,netem,lostcache,churn,killall,majority,torn,conncut,clock,delete"
: "${NEM_QUIET_S:=5}"
NEM_T0_MS=${NEM_T0_MS:-$(date +%s%3N)}
declare -A nem_down=()   # nodes a fault has stopped on purpose
declare -A nem_paused=() # nodes a pause has frozen
declare -A nem_cuts=()   # node pairs ("1-3") a partition has cut apart
nem_churn_stuck=""       # nodes whose decommission never finished
nem_churn_code=""        # the wire code of the step's decommission request
nem_netem_kernel=""

nem_rand() { echo $((RANDOM % $1)); } # 0 .. $1-1
nem_elapsed() { echo $(($(date +%s%3N) - NEM_T0_MS)); } # ms

# Each line in faults.txt ends with the state right after the event: the
# nodes not up ("[down: 1 3]": stopped or paused) and the node pairs that
# cannot reach each other ("[cut: 1-2 1-4]"), so that the workload measures
# a partition's availability only while a majority of its replicas is up
# and connected (a staggered restart's first node may not bring it back; a
# pause overlapping a kill, or a bridge's middle node going down, may take
# it away).
nem_record() {
  local -A out=()
  local i
  for i in "${!nem_down[@]}" "${!nem_paused[@]}"; do out[$i]=1; done
  echo "$(nem_elapsed) $* [down: ${!out[*]}] [cut: ${!nem_cuts[*]}]" >>"$NEM_FAULTS"
  printf '%s nemesis: %s\n' "$(date -u +%H:%M:%S)" "$*" >&2
}

nem_ctl() { hosts_client "$NEM_CTL" "$@" 2>/dev/null; }

# A target node: random, the controller leader, or a partition's leader.
nem_target() {
  local n kind id
  n=$(hosts_count)
  kind=$(nem_rand 3)
  id=""
  case $kind in
    1) id=$(nem_ctl controller "$(hosts_client_list)") && id="$id controller" ;;
    2) local q; q=$(nem_rand "$NEM_PARTS")
       id=$(nem_ctl leader "$(hosts_client_list)" "$NEM_TOPIC" "$q") && id="$id leader-of-p$q" ;;
  esac
  if [ -z "$id" ] || [ -n "${nem_down[${id%% *}]:-}" ]; then
    id="$(($(nem_rand "$n") + 1)) random"
  fi
  echo "$id"
}

# ---- kill ----
nem_kill_start() {
  read -r nem_kill_node nem_kill_why < <(nem_target)
  nem_down[$nem_kill_node]=1
  hosts_kill "$nem_kill_node"
  nem_record "kill node $nem_kill_node ($nem_kill_why)"
  nem_kill_hold=$((1 + $(nem_rand 6)))
}
nem_kill_heal() {
  hosts_start "$nem_kill_node" 2>/dev/null
  unset "nem_down[$nem_kill_node]"
  nem_record "kill healed: restart node $nem_kill_node"
}

# ---- pause ----
nem_pause_start() {
  read -r nem_pause_node nem_pause_why < <(nem_target)
  hosts_pause "$nem_pause_node"
  nem_paused[$nem_pause_node]=1
  nem_record "pause node $nem_pause_node ($nem_pause_why)"
  nem_pause_hold=$(((NEM_ELECTION_MS * (15 + $(nem_rand 16)) / 10 + 999) / 1000))
}
nem_pause_heal() {
  hosts_resume "$nem_pause_node"
  unset "nem_paused[$nem_pause_node]"
  nem_record "pause healed: resume node $nem_pause_node"
}

# Deletes node $1's nftables rules that fault $2 added (their comment), and
# no other fault's: two faults of a step may both have rules on a node.
nem_nft_drop() {
  local chain h
  for chain in input output; do
    for h in $(hosts_exec "$1" nft -a list chain inet cairnfault "$chain" 2>/dev/null |
      awk -v tag="comment \"$2\"" 'index($0, tag) { print $NF }'); do
      hosts_exec "$1" nft delete rule inet cairnfault "$chain" handle "$h"
    done
  done
}

# ---- partition ----
# Drops everything between nodes a and b, both ways.
nem_cut() {
  local a=$1 b=$2
  hosts_exec "$a" nft add rule inet cairnfault input ip saddr "$(hosts_ip "$b")" drop comment partition
  hosts_exec "$a" nft add rule inet cairnfault output ip daddr "$(hosts_ip "$b")" drop comment partition
  hosts_exec "$b" nft add rule inet cairnfault input ip saddr "$(hosts_ip "$a")" drop comment partition
  hosts_exec "$b" nft add rule inet cairnfault output ip daddr "$(hosts_ip "$a")" drop comment partition
  nem_cuts[$a-$b]=1
}

# The nodes 1..n in a seeded random order.
nem_shuffle() {
  local n=$1 i j t a=()
  for ((i = 1; i <= n; i++)); do a+=("$i"); done
  for ((i = n - 1; i > 0; i--)); do
    j=$(nem_rand $((i + 1))); t=${a[i]}; a[i]=${a[j]}; a[j]=$t
  done
  echo "${a[@]}"
}

# Cuts every pair of which one side is in group A and the other in group B.
nem_cut_groups() {
  local a b
  for a in $1; do for b in $2; do nem_cut "$a" "$b"; done; done
}

nem_partition_start() {
  local n mode order k i j
  n=$(hosts_count)
  read -r -a order < <(nem_shuffle "$n")
  mode=$(nem_rand 4)
  if ((n < 4 && mode == 3)); then mode=0; fi
  case $mode in
    0) k=$(((n - 1) / 2))
       nem_cut_groups "${order[*]:0:k}" "${order[*]:k}"
       nem_record "partition majority/minority: {${order[*]:k}} | {${order[*]:0:k}}" ;;
    1) local l why
       read -r l why < <(nem_target)
       local rest=""
       for ((i = 1; i <= n; i++)); do ((i == l)) || rest+="$i "; done
       nem_cut_groups "$l" "$rest"
       nem_record "partition isolate node $l ($why) from {$rest}" ;;
    2) k=$(((n - 1) / 2))
       nem_cut_groups "${order[*]:0:k}" "${order[*]:k+1}"
       nem_record "partition bridge: {${order[*]:0:k}} - ${order[k]} - {${order[*]:k+1}}" ;;
    3) for ((i = 0; i < n; i++)); do
         for ((j = i + 2; j < n; j++)); do
           ((i == 0 && j == n - 1)) || nem_cut "${order[i]}" "${order[j]}"
         done
       done
       nem_record "partition ring: ${order[*]} (each node sees its neighbours only)" ;;
  esac
  nem_partition_hold=$((8 + $(nem_rand 13)))
}
nem_partition_heal() {
  local i n
  n=$(hosts_count)
  for ((i = 1; i <= n; i++)); do nem_nft_drop "$i" partition; done
  nem_cuts=()
  nem_record "partition healed"
}

# ---- netem ----
nem_netem_probe() {
  if [ -z "$nem_netem_kernel" ]; then
    if hosts_client tc qdisc add dev lo root netem delay 1ms 2>/dev/null; then
      hosts_client tc qdisc del dev lo root
      nem_netem_kernel=yes
    else
      nem_netem_kernel=no
    fi
  fi
}
nem_netem_start() {
  local n i delay loss what=""
  n=$(hosts_count)
  nem_netem_probe
  nem_netem_nodes=""
  for ((i = 1; i <= n; i++)); do
    (($(nem_rand 2) == 0)) || continue
    nem_netem_nodes+="$i "
    delay=$((20 + $(nem_rand 200)))
    loss=$(($(nem_rand 10) + 1))
    if [ "$nem_netem_kernel" = yes ]; then
      hosts_exec "$i" tc qdisc add dev eth0 root netem delay "${delay}ms" "$((delay / 2))ms" \
        loss "${loss}%" reorder 25% 50%
      what+=" node $i: delay ${delay}ms±$((delay / 2)) loss ${loss}% reorder 25%;"
    else
      hosts_exec "$i" nft add rule inet cairnfault input ip saddr != "$HOSTS_CLIENT_IP" \
        numgen random mod 100 '<' "$loss" drop comment netem
      hosts_exec "$i" tc qdisc add dev eth0 root tbf rate 2mbit burst 32kb latency "${delay}ms"
      what+=" node $i: loss ${loss}% rate 2mbit queue ${delay}ms;"
    fi
  done
  [ -n "$what" ] || what=" none chosen"
  nem_record "netem${nem_netem_kernel/no/ (no sch_netem: nft loss + tbf)}:$what"
  nem_netem_hold=$((8 + $(nem_rand 13)))
}
nem_netem_heal() {
  local i
  for i in $nem_netem_nodes; do
    hosts_exec "$i" tc qdisc del dev eth0 root 2>/dev/null || true
    nem_nft_drop "$i" netem
  done
  nem_record "netem healed"
}

# ---- lostcache ----
nem_lostcache_start() {
  local d
  read -r nem_lc_node nem_lc_why < <(nem_target)
  nem_down[$nem_lc_node]=1
  hosts_kill "$nem_lc_node"
  # Never cut the files of a live process (that is not a fault Cairn claims
  # to survive): a run whose bookkeeping lost a process says so instead.
  if hosts_dir_in_use "$nem_lc_node"; then
    nem_record "lostcache node $nem_lc_node skipped: a process still has its data dir"
    echo "node $nem_lc_node: a process the rig does not know has its data dir" >>"$NEM_CRASHES"
    nem_lostcache_hold=1
    return
  fi
  local cut=""
  for d in "$HOSTS_DIR/node$nem_lc_node"/partitions/*/log; do
    [ -d "$d" ] || continue
    cut+="$("$NEM_CTL" cut-unsynced "$d" "$((RANDOM * 65536 + RANDOM))" | sed 's/.*: durable/durable/'); "
  done
  nem_record "lostcache node $nem_lc_node ($nem_lc_why): $cut"
  nem_lostcache_hold=$((1 + $(nem_rand 3)))
}
nem_lostcache_heal() {
  hosts_start "$nem_lc_node" 2>/dev/null
  unset "nem_down[$nem_lc_node]"
  nem_record "lostcache healed: restart node $nem_lc_node"
}

# ---- killall ----
nem_killall_start() {
  local i n
  n=$(hosts_count)
  for ((i = 1; i <= n; i++)); do
    nem_down[$i]=1
    hosts_kill "$i"
  done
  nem_record "killall: every node SIGKILLed"
  nem_killall_hold=$((1 + $(nem_rand 4)))
}
nem_killall_heal() {
  local i n
  n=$(hosts_count)
  for ((i = 1; i <= n; i++)); do
    hosts_start "$i" 2>/dev/null
    unset "nem_down[$i]"
  done
  nem_record "killall healed: restart every node"
}

# ---- majority ----
nem_majority_start() {
  local n k order
  n=$(hosts_count)
  k=$((n / 2 + 1))
  read -r -a order < <(nem_shuffle "$n")
  nem_majority_nodes="${order[*]:0:k}"
  for i in $nem_majority_nodes; do
    nem_down[$i]=1
    hosts_kill "$i"
  done
  nem_record "majority: nodes {$nem_majority_nodes} SIGKILLed"
  nem_majority_hold=$((1 + $(nem_rand 4)))
}
nem_majority_heal() {
  local i first=1
  for i in $nem_majority_nodes; do
    ((first)) || sleep $((1 + $(nem_rand 4)))
    first=0
    hosts_start "$i" 2>/dev/null
    unset "nem_down[$i]"
    nem_record "majority healed: restart node $i (staggered)"
  done
}

# ---- torn ----
nem_torn_start() {
  local d k=0 what=""
  nem_torn_log=""
  read -r nem_torn_node nem_torn_why < <(nem_target)
  nem_down[$nem_torn_node]=1
  hosts_kill "$nem_torn_node"
  if hosts_dir_in_use "$nem_torn_node"; then
    nem_record "torn node $nem_torn_node skipped: a process still has its data dir"
    echo "node $nem_torn_node: a process the rig does not know has its data dir" >>"$NEM_CRASHES"
    nem_torn_hold=1
    return
  fi
  for d in "$HOSTS_DIR/node$nem_torn_node"/partitions/*/raft "$HOSTS_DIR/node$nem_torn_node/meta"; do
    [ -d "$d" ] || continue
    (($(nem_rand 2) == 0)) || continue
    what+="$("$NEM_CTL" tear-raft "$d" "$((RANDOM * 65536 + RANDOM))" | sed "s#$HOSTS_DIR/##"); "
  done
  d="$HOSTS_DIR/node$nem_torn_node/wal"
  if [ -d "$d" ] && (($(nem_rand 2) == 0)); then
    what+="$("$NEM_CTL" tear-wal "$d" "$((RANDOM * 65536 + RANDOM))" | sed "s#$HOSTS_DIR/##"); "
  fi
  d="$HOSTS_DIR/node$nem_torn_node/meta/wal"
  if [ -d "$d" ]; then
    if (($(nem_rand 4) == 0)); then
      what+="$("$NEM_CTL" garble-wal "$d" "$((RANDOM * 65536 + RANDOM))" | sed "s#$HOSTS_DIR/##"); "
    fi
  fi
  for d in "$HOSTS_DIR/node$nem_torn_node"/partitions/*/log; do
    [ -d "$d" ] || continue
    k=$((k + 1))
    (($(nem_rand k) == 0)) || continue
    nem_torn_log=$d
  done
  if [ -n "${nem_torn_log:-}" ]; then
    what+="$("$NEM_CTL" garble-log "$nem_torn_log" "$((RANDOM * 65536 + RANDOM))" | sed "s#$HOSTS_DIR/##")"
  fi
  nem_record "torn node $nem_torn_node ($nem_torn_why): $what"
  nem_torn_hold=$((1 + $(nem_rand 3)))
}
nem_torn_heal() {
  hosts_start "$nem_torn_node" 2>/dev/null
  unset "nem_down[$nem_torn_node]"
  nem_record "torn healed: restart node $nem_torn_node"
}

# ---- conncut ----
nem_conncut_start() {
  read -r nem_cc_node nem_cc_why < <(nem_target)
  hosts_exec "$nem_cc_node" nft add rule inet cairnfault input ip saddr "$HOSTS_CLIENT_IP" \
    tcp dport "$HOSTS_CLIENT_PORT" reject with tcp reset comment conncut
  nem_record "conncut node $nem_cc_node ($nem_cc_why): client connections reset"
  nem_conncut_hold=$((1 + $(nem_rand 2)))
}
nem_conncut_heal() {
  nem_nft_drop "$nem_cc_node" conncut
  nem_record "conncut healed: node $nem_cc_node"
}

# ---- clock ----
nem_clock_start() {
  local ms
  read -r nem_ck_node nem_ck_why < <(nem_target)
  # minutes to two days, either way: past retention checks and group
  # offsets' expiry, not just past timeouts
  ms=$(((60 + RANDOM * 5) * 1000))
  ((RANDOM % 2)) && ms=$((-ms))
  echo "$ms" >"$HOSTS_DIR/clock.$nem_ck_node"
  nem_record "clock node $nem_ck_node ($nem_ck_why): wall clock offset ${ms} ms"
  nem_clock_hold=$((5 + $(nem_rand 11)))
}
nem_clock_heal() {
  echo 0 >"$HOSTS_DIR/clock.$nem_ck_node"
  nem_record "clock healed: node $nem_ck_node"
}

# ---- churn ----
nem_churn_start() {
  local n v
  n=$(hosts_count)
  v=$(hosts_voter_count)
  nem_churn_node=""
  nem_churn_hold=0
  if ((n <= v)); then
    nem_record "churn skipped (no non-voter node with $n hosts)"
    return
  fi
  nem_churn_node=$((v + 1 + $(nem_rand $((n - v)))))
  # A node another fault of this step has stopped would be restarted by
  # that fault's heal while it drains: a restarted process of a removed
  # node rejoins (docs/metadata.md), and the drain would never be seen
  # finished.
  if [ -n "${nem_down[$nem_churn_node]:-}" ]; then
    nem_record "churn skipped (node $nem_churn_node is down by another fault of this step)"
    nem_churn_node=""
    return
  fi
  # A decommission lands on the registered process: one started before it
  # but registered after it takes the id over as a new incarnation and the
  # node is ALIVE again (docs/metadata.md), so a just-restarted node (its
  # registration is refused while its old process still looks live) is
  # given up to 15 s to register first.
  local w=0
  while ((w++ < 30)) && ! nem_registered "$nem_churn_node"; do sleep 0.5; done
  if [[ " $nem_churn_stuck " == *" $nem_churn_node "* ]]; then
    nem_record "churn skipped (node $nem_churn_node's decommission never finished)"
    nem_churn_node=""
    return
  fi
  nem_churn_code=$(nem_ctl decommission "$(hosts_client_list)" "$nem_churn_node")
  nem_record "churn: decommission node $nem_churn_node (code ${nem_churn_code:-none})"
}
# Succeeds if node $1's running process has registered: its log has a
# "registered" line after its last "up:" line.
nem_registered() {
  local log="$HOSTS_DIR/node$1.log" up reg
  up=$(grep -n "\[node\] node $1 up:" "$log" 2>/dev/null | tail -1 | cut -d: -f1)
  reg=$(grep -n "\[node\] node $1 registered" "$log" 2>/dev/null | tail -1 | cut -d: -f1)
  [ -n "$reg" ] && [ "$reg" -gt "${up:-0}" ]
}

# Runs after the step's other faults are healed (nem_run), so a drain is
# judged on a healthy network: one still draining after 240 s is a finding.
nem_churn_heal() {
  [ -n "$nem_churn_node" ] || return 0
  local k state="" st
  # Refused while other faults of the step held (NOT_CONTROLLER with the
  # metadata voters down, a timeout): asked again now the network is
  # healed, so the drain awaited below is one the cluster accepted. A
  # refusal on a healed network is a finding.
  if [ "${nem_churn_code:-}" != 0 ]; then
    nem_churn_code=$(nem_ctl decommission "$(hosts_client_list)" "$nem_churn_node")
    nem_record "churn: decommission node $nem_churn_node again after the heal (code ${nem_churn_code:-none})"
    if [ "${nem_churn_code:-}" != 0 ]; then
      echo "decommission of node $nem_churn_node refused on a healed network (code ${nem_churn_code:-none})" >>"$NEM_CRASHES"
      nem_churn_stuck="$nem_churn_stuck $nem_churn_node"
      return 0
    fi
  fi
  for ((k = 0; k < 240; k++)); do
    state=$(nem_ctl state "$(hosts_client_list)" "$nem_churn_node") || state=""
    [ "$state" = removed ] && break
    # A node that dies while this drain is awaited is restarted (and
    # reported) at once: a drain that needs it would otherwise wait for it.
    nem_check_crashes
    sleep 1
  done
  nem_record "churn: node $nem_churn_node is ${state:-unknown} after ${k} s"
  if [ "$state" != removed ]; then
    echo "node $nem_churn_node still ${state:-unknown} 240 s after its decommission (network healed)" >>"$NEM_CRASHES"
    nem_churn_stuck="$nem_churn_stuck $nem_churn_node"
    return 0
  fi
  nem_down[$nem_churn_node]=1
  hosts_term "$nem_churn_node" 30
  st=$HOSTS_STATUS
  nem_record "churn: node $nem_churn_node stopped (exit $st); restarting it as a fresh node"
  if [ "$st" != 0 ]; then
    echo "node $nem_churn_node exited $st on SIGTERM (churn)" >>"$NEM_CRASHES"
  fi
  hosts_start "$nem_churn_node" --fresh 2>/dev/null
  unset "nem_down[$nem_churn_node]"
}

# Restarts any node that died without a fault stopping it, and says so.
nem_check_crashes() {
  local i n st
  n=$(hosts_count)
  for ((i = 1; i <= n; i++)); do
    [ -z "${nem_down[$i]:-}" ] || continue
    if [ -f "$HOSTS_DIR/pid.$i" ] && ! hosts_alive "$i"; then
      hosts_reap "$i"
      st=$HOSTS_STATUS
      nem_record "CRASH: node $i exited by itself (status $st); restarting it"
      echo "node $i exited by itself (status $st) at $(nem_elapsed) ms" >>"$NEM_CRASHES"
      hosts_start "$i" 2>/dev/null
    fi
  done
}

# Heals everything: rules, qdiscs, paused and stopped nodes.
nem_heal_all() {
  local i n
  n=$(hosts_count)
  for ((i = 1; i <= n; i++)); do
    hosts_exec "$i" nft flush chain inet cairnfault input
    hosts_exec "$i" nft flush chain inet cairnfault output
    hosts_exec "$i" tc qdisc del dev eth0 root 2>/dev/null || true
    hosts_resume "$i"
  done
  nem_check_crashes
  for ((i = 1; i <= n; i++)); do
    if ! hosts_alive "$i"; then hosts_start "$i" 2>/dev/null; fi
  done
  nem_down=()
  nem_paused=()
  nem_cuts=()
  nem_record "healed everything"
}

# Waits until every node is alive in the controller's metadata (timeout s).
nem_wait_alive() {
  local t=$1 k i n ok state
  n=$(hosts_count)
  for ((k = 0; k < t; k++)); do
    ok=1
    for ((i = 1; i <= n; i++)); do
      state=$(nem_ctl state "$(hosts_client_list)" "$i") || state=""
      # A node whose drain never finished is already reported.
      if [ "$state" = draining ] && [[ " $nem_churn_stuck " == *" $i "* ]]; then continue; fi
      [ "$state" = alive ] || { ok=0; break; }
    done
    ((ok)) && return 0
    sleep 1
  done
  return 1
}

# ---- delete ----
nem_delete_start() {
  local q leader r res candidates=()
  q=$(nem_rand "$NEM_PARTS")
  nem_delete_node=""
  if (($(nem_rand 2) == 0)); then
    leader=$(nem_ctl leader "$(hosts_client_list)" "$NEM_TOPIC" "$q")
    for r in $(nem_ctl replicas "$(hosts_client_list)" "$NEM_TOPIC" "$q"); do
      [ "$r" = "$leader" ] || [ -n "${nem_down[$r]:-}" ] || [ -n "${nem_paused[$r]:-}" ] ||
        candidates+=("$r")
    done
    ((${#candidates[@]} == 0)) || nem_delete_node=${candidates[$(nem_rand ${#candidates[@]})]}
  fi
  if [ -n "$nem_delete_node" ]; then
    nem_down[$nem_delete_node]=1
    hosts_kill "$nem_delete_node"
    nem_record "kill node $nem_delete_node (a follower of p$q, before a delete)"
    sleep $((1 + $(nem_rand 3)))
  fi
  # One line the workload's check reads: "delete pQ: OUTCOME target T ...".
  res=$(nem_ctl delete-records "$(hosts_client_list)" "$NEM_TOPIC" "$q" $((25 + $(nem_rand 71)))) ||
    res="skipped: no leader to ask"
  nem_record "delete p$q: $res"
  nem_delete_hold=$((5 + $(nem_rand 16)))
}
nem_delete_heal() {
  [ -n "$nem_delete_node" ] || return 0
  hosts_start "$nem_delete_node" 2>/dev/null
  unset "nem_down[$nem_delete_node]"
  nem_record "delete healed: restart node $nem_delete_node"
}

# nem_run SECONDS: the schedule.
nem_run() {
  local end=$((SECONDS + $1)) list faults f g h i w slept order holds
  IFS=, read -r -a list <<<"$NEM_LIST"
  while ((SECONDS < end)); do
    nem_check_crashes
    faults=("${list[$(nem_rand ${#list[@]})]}")
    if ((${#list[@]} > 1 && $(nem_rand 3) == 0)); then
      g=${list[$(nem_rand ${#list[@]})]}
      [ "$g" = "${faults[0]}" ] || faults+=("$g")
    fi
    holds=()
    for f in "${faults[@]}"; do
      "nem_${f}_start"
      h="nem_${f}_hold"
      holds+=("${!h}")
    done
    # Each fault is healed once its own hold is over (a conncut's 1-2 s is
    # not stretched to a partition's 20 s), a tie in reverse order; churn
    # last: its heal waits for the drain.
    order=(0)
    if ((${#faults[@]} == 2)); then
      if ((holds[0] < holds[1])); then order=(0 1); else order=(1 0); fi
    fi
    slept=0
    for i in "${order[@]}"; do
      [ "${faults[i]}" != churn ] || continue
      w=$((holds[i] - slept))
      ((SECONDS + w < end)) || w=$((end - SECONDS > 1 ? end - SECONDS : 1))
      if ((w > 0)); then sleep "$w"; slept=$((slept + w)); fi
      "nem_${faults[i]}_heal"
    done
    for f in "${faults[@]}"; do [ "$f" != churn ] || nem_churn_heal; done
    sleep "$NEM_QUIET_S"
  done
}
