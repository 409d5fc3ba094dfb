#!/usr/bin/env bash
# The main job, in one step from a fresh clone: installs what is needed,
# builds, starts a local 3-node Cairn cluster from scratch (real cairnd
# processes on 127.0.0.1:7400/7410/7420, data under ./cairn-local),
# creates a topic replicated on all three nodes, produces and consumes a
# few messages with the `cairn` command line, shows the cluster's status,
# and says what to do next.
#
# The cluster is LEFT RUNNING at the end so you can use it; the last lines
# say how to stop it (bash deploy/cluster.sh stop). Running the demo again
# stops the previous demo cluster and starts over with an empty one in the
# same directory; nothing outside that directory is touched.
#
# CAIRN_DEMO_DIR (default ./cairn-local) and CAIRN_DEMO_BASE_PORT (default
# 7400) change where it runs.
set -euo pipefail
cd "$(dirname "$0")/.."
bash deploy/setup.sh
bash deploy/build.sh release
cli="$PWD/build/release/cairn"
dir="${CAIRN_DEMO_DIR:-./cairn-local}"
base="${CAIRN_DEMO_BASE_PORT:-7400}"
export CAIRN_LOG_LEVEL="${CAIRN_LOG_LEVEL:-warn}"
step() { printf '\n== %s\n' "$*"; }
show() {
  printf '$ %s\n' "$*"
  "$@"
}

step "start a local 3-node cluster under $dir (ports $base, $((base + 10)), $((base + 20)))"
if [ -f "$dir/cluster.conf" ]; then
  echo "(a cluster from an earlier run is in $dir: stopping it and starting over)"
  bash deploy/cluster.sh stop -d "$dir"
fi
bash deploy/cluster.sh start -d "$dir" -n 3 --base-port "$base" --fresh --cli "$cli"
export CAIRN_BOOTSTRAP
CAIRN_BOOTSTRAP=$(cat "$dir/bootstrap")
# The cairn command finds the cluster through CAIRN_BOOTSTRAP (or -b);
# shown below as plain `cairn`.
cairn() { "$cli" "$@"; }

step "create a topic of 3 partitions, each replicated on all 3 nodes"
show cairn topic create demo --partitions 3 --replication-factor 3
# Each partition elects its own Raft leader: wait until all have one.
for _ in $(seq 1 100); do
  if cairn topic describe demo --json | grep -q '"leader_id": 0'; then sleep 0.2; else break; fi
done
show cairn topic describe demo

step "produce 6 messages, one per line, key and value split at ':'"
printf '%s\n' 'alice:hello' 'bob:how are you' 'carol:fine, thanks' \
  'alice:the same key goes to the same partition' 'bob:every message is on 2 of 3 disks before it is acknowledged' \
  'dave:bye' >"$dir/demo-messages.txt"
cat "$dir/demo-messages.txt"
printf '$ cairn produce demo -K : < %s\n' "$dir/demo-messages.txt"
cairn produce demo -K : <"$dir/demo-messages.txt"

step "consume them back from the beginning (-e: stop at the end)"
echo "\$ cairn consume demo -o beginning -e -f 'partition %p offset %o  %k: %v\\n'"
cairn consume demo -o beginning -e -f 'partition %p offset %o  %k: %v\n'

# The same topic through each node's Kafka port (client port + 3), as any
# Kafka client sees it: kcat (deploy/setup.sh installs it) reads it back.
kafka="127.0.0.1:$((base + 3)),127.0.0.1:$((base + 13)),127.0.0.1:$((base + 23))"
step "the same messages through the Kafka port, with kcat (docs/kafka.md)"
show kcat -b "$kafka" -C -t demo -e -q -f 'partition %p offset %o  %k: %s\n'

step "the cluster: nodes, controller leader, each partition's leader and replicas"
# Leaders report their partitions' state to the controller once a second.
sleep 2
show cairn cluster status

cat <<EOF

== done: the cluster is still running

Try it yourself. In your shell, the first line makes \`cairn\` a command;
the second names the nodes (any one would do; with the default ports,
127.0.0.1:7400 is also cairn's default):

  export PATH="$PWD/build/release:\$PATH"
  export CAIRN_BOOTSTRAP=$CAIRN_BOOTSTRAP

  echo 'hello again' | cairn produce demo           # one message per line
  cairn consume demo -o beginning -e                 # values, one per line
  cairn consume demo                                 # keep reading (Ctrl-C stops)
  cairn consume demo --json -e                       # JSON Lines for scripts
  cairn topic create mytopic --partitions 6 --replication-factor 3
  cairn cluster status
  cairn --help                                       # every command; each has --help

Any Kafka client works too, on the Kafka ports ($kafka):

  kcat -b $kafka -C -t demo -e
  /usr/bin/python3 -c 'import kafka; p = kafka.KafkaProducer(bootstrap_servers="127.0.0.1:$((base + 3))", acks="all"); p.send("demo", b"from kafka-python"); p.flush()'

Kill a node and watch the cluster carry on (its partitions get new leaders
within a second; the controller marks it dead after --node-timeout-ms,
10 s by default):

  kill -9 \$(cat $dir/node1.pid); echo 'still here' | cairn produce demo
  sleep 12; cairn cluster status
  bash deploy/cluster.sh start -d $dir                # restarts the stopped node

Stop the cluster (its data stays in $dir; start brings it back):

  bash deploy/cluster.sh stop -d $dir
  bash deploy/cluster.sh status -d $dir

Node logs: $dir/node1.log, node2.log, node3.log.
EOF
