#!/usr/bin/env bash
# Sets everything up and runs the main job. For now Cairn's main job is its
# durable partition log (the node daemon comes with the replication and
# cairnd issues): this demo appends batches to a real log directory, reads
# them back, tears the tail the way a crash would, and shows the log
# recovering the intact prefix.
set -euo pipefail
cd "$(dirname "$0")/.."
bash deploy/setup.sh
bash deploy/build.sh release
bin=build/release/cairn-log
dir="${CAIRN_DEMO_DIR:-./data/demo-partition}"
rm -rf "$dir"
step() { printf '\n== %s\n' "$*"; }

step "append 5 batches of 4 records into $dir (small segments so it rolls)"
"$bin" append "$dir" --batches 5 --records 4 --value-size 20 --segment-bytes 512
ls -l "$dir"

step "dump the batches and their records"
"$bin" dump "$dir" --show-records

step "look up the first offset at or after a timestamp"
"$bin" lookup "$dir" --time 0

newest=$(ls "$dir"/*.log | sort | tail -1)
step "simulate a crash mid-write: cut 9 bytes off $(basename "$newest")"
truncate -s -9 "$newest"

step "open the log again: recovery keeps the intact prefix"
"$bin" verify "$dir"

step "appending goes on from the recovered end"
"$bin" append "$dir" --batches 1 --records 4 --value-size 20 --segment-bytes 512
echo
echo "demo done; the partition directory is $dir (cairn-log --help for more)"
