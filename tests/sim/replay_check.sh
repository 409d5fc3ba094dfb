#!/usr/bin/env bash
# A seed replays exactly: the step traces of two runs of the same seeds are
# byte-identical (and not empty). Usage: replay_check.sh <sim_partition>
set -euo pipefail
sim="$1"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for seed in 7 12345; do
  "$sim" --seed "$seed" --trace > "$tmp/a" 2>/dev/null
  "$sim" --seed "$seed" --trace > "$tmp/b" 2>/dev/null
  lines=$(wc -l < "$tmp/a")
  if [ "$lines" -lt 1000 ]; then
    echo "replay_check: seed $seed: only $lines trace lines" >&2
    exit 1
  fi
  if ! cmp -s "$tmp/a" "$tmp/b"; then
    echo "replay_check: seed $seed: the two traces differ:" >&2
    diff "$tmp/a" "$tmp/b" | head -20 >&2
    exit 1
  fi
  echo "replay_check: seed $seed: $lines trace lines, identical twice"
done
