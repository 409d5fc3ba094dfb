#!/usr/bin/env bash
# A seed replays exactly: the step traces of two runs of the same seeds are
# byte-identical (and not empty), with either engine (raft_fixture, and the
# crash engine of sim_io.c). Usage: replay_check.sh <sim_partition>
set -euo pipefail
sim="$1"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for run in "7" "12345" "7 --crash" "12345 --crash"; do
  read -r seed flags <<< "$run"
  # shellcheck disable=SC2086 # flags is empty or one word
  "$sim" --seed "$seed" $flags --trace > "$tmp/a" 2>/dev/null
  # shellcheck disable=SC2086
  "$sim" --seed "$seed" $flags --trace > "$tmp/b" 2>/dev/null
  lines=$(wc -l < "$tmp/a")
  if [ "$lines" -lt 1000 ]; then
    echo "replay_check: seed $seed $flags: only $lines trace lines" >&2
    exit 1
  fi
  if ! cmp -s "$tmp/a" "$tmp/b"; then
    echo "replay_check: seed $seed $flags: the two traces differ:" >&2
    diff "$tmp/a" "$tmp/b" | head -20 >&2
    exit 1
  fi
  echo "replay_check: seed $seed $flags: $lines trace lines, identical twice"
done
