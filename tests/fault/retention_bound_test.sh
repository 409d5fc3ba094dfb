#!/usr/bin/env bash
# retention_bound_test.sh - checks run.sh's retention bound
# (retention_bound.sh) on real partition logs written by `cairn-log`: a
# whole log and one whose oldest segments retention could have dropped
# pass; one that dropped more than its retention allows is reported,
# unless a DeleteRecords could have moved its start there.
#   tests/fault/retention_bound_test.sh CAIRN_LOG
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=tests/fault/retention_bound.sh
source "$here/retention_bound.sh"
cairn_log=$1
dir=$(mktemp -d /tmp/cairn-retention-bound-XXXXXX)
trap 'rm -rf "$dir"' EXIT
failures=0
expect() { # expect WHAT pass|report START BYTES RETENTION CEILING
  local what=$1 want=$2 why
  why=$(retention_bound_why "$3" "$4" "$5" "$6")
  if { [ "$want" = pass ] && [ -n "$why" ]; } || { [ "$want" = report ] && [ -z "$why" ]; }; then
    echo "FAIL: $what: expected $want, got '${why:-nothing}'"
    failures=$((failures + 1))
  else
    echo "ok: $what${why:+: $why}"
  fi
}

# 40 batches of 10 records of 100 bytes in segments of 8 KiB: 7 segments.
"$cairn_log" append "$dir/log" --batches 40 --records 10 --value-size 100 \
  --segment-bytes 8192 >/dev/null
read -r start bytes < <(retention_bound_read "$cairn_log" "$dir/log")
if [ "$start" != 0 ] || ((bytes <= 40000)); then echo "FAIL: a whole log read as '$start $bytes'"; exit 1; fi
whole=$bytes
expect "a whole log, retention above its size" pass "$start" "$bytes" $((whole * 2)) 0

# Its three oldest segments gone, as retention drops them.
segs=("$dir"/log/*.log)
for s in "${segs[@]:0:3}"; do rm "$s" "${s%.log}.index" "${s%.log}.timeindex"; done
read -r start bytes < <(retention_bound_read "$cairn_log" "$dir/log")
((start > 0 && bytes < whole)) || { echo "FAIL: the cut log read as '$start $bytes'"; exit 1; }
echo "the cut log: start $start, $bytes of $whole bytes"
expect "cut to what a retention of its bytes keeps" pass "$start" "$bytes" "$bytes" 0
expect "cut below its retention" report "$start" "$bytes" $((bytes + 1)) 0
expect "cut below its retention, a DeleteRecords to its start" pass "$start" "$bytes" $((bytes + 1)) "$start"
expect "cut below its retention, a DeleteRecords below its start" report "$start" "$bytes" $((bytes + 1)) $((start - 1))
expect "no retention" pass "$start" "$bytes" 0 0
expect "nothing dropped, small" pass 0 100 $((whole * 2)) 0
((failures == 0)) || exit 1
echo "retention bound checks passed"
