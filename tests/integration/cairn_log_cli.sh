#!/usr/bin/env bash
# End-to-end check of the cairn-log tool on a real partition directory:
# append, dump, time lookup, then damage the files the way a crash or a
# careless operator would and check that verify recovers the intact prefix.
set -euo pipefail
bin="$1"
export CAIRN_LOG_LEVEL=info # checks below read the warning lines
dir=$(mktemp -d "${TMPDIR:-/tmp}/cairn-cli-XXXXXX")
trap 'rm -rf "$dir"' EXIT
log="$dir/p0"
fail() { echo "FAIL: $*" >&2; exit 1; }

"$bin" append "$log" --batches 20 --records 5 --value-size 50 --segment-bytes 1024 >"$dir/out"
grep -q "offsets 95..99" "$dir/out" || fail "append did not report offsets 95..99"
[ "$(ls "$log"/*.log | wc -l)" -gt 2 ] || fail "expected several segments"

"$bin" dump "$log" >"$dir/dump"
[ "$(grep -c '^batch ' "$dir/dump")" -eq 20 ] || fail "dump should list 20 batches"
grep -q "^batch offset=95 count=5 .* valid$" "$dir/dump" || fail "last batch not valid in dump"
"$bin" dump "$log" --from 52 --show-records >"$dir/dump52"
head -2 "$dir/dump52" | grep -q 'record offset=50 .*key="key-50"' \
  || fail "dump --from 52 should start at the batch holding 52"

[ "$("$bin" lookup "$log" --time 0)" = "0" ] || fail "lookup of time 0 should give offset 0"
[ "$("$bin" lookup "$log" --time 99999999999999)" = "100" ] || fail "lookup past the end gives the log end"

# Garbage beside the segments: ignored and left alone.
echo junk >"$log/notes.txt"
echo junk >"$log/123.log"
"$bin" verify "$log" >"$dir/v" 2>"$dir/err"
grep -q "offsets \[0, 100)" "$dir/v" || fail "verify should keep all 100 offsets"
grep -q "2 unknown file(s) ignored" "$dir/v" || fail "unknown files should be counted"
[ -f "$log/notes.txt" ] && [ -f "$log/123.log" ] || fail "unknown files must not be deleted"

# A torn tail: cut 7 bytes off the newest segment. Only its last batch goes.
newest=$(ls "$log"/*.log | grep -v '/123.log$' | sort | tail -1)
truncate -s -7 "$newest"
"$bin" verify "$log" >"$dir/v" 2>"$dir/err"
grep -q "offsets \[0, 95)" "$dir/v" || fail "a torn last batch should leave [0, 95): $(cat "$dir/v")"
grep -q "cut from a torn" "$dir/v" || fail "verify should report the cut"
grep -q "input ends before the structure does" "$dir/err" || fail "the log line should say why"

# A lost index is rebuilt, and reads still work.
rm "$log"/00000000000000000000.index
"$bin" verify "$log" >"$dir/v" 2>"$dir/err"
grep -q "1 index(es) rebuilt" "$dir/v" || fail "the index should be rebuilt"
"$bin" dump "$log" --from 3 >"$dir/dump3"
head -1 "$dir/dump3" | grep -q "^batch offset=0 " || fail "read after rebuild"

# Appends go on from the recovered end.
"$bin" append "$log" --batches 1 --records 5 >"$dir/out"
grep -q "offsets 95..99" "$dir/out" || fail "append after recovery should continue at 95"

# Usage errors are exit code 2 with a message.
set +e
"$bin" dump "$log" --from abc 2>/dev/null; [ $? -eq 2 ] || fail "bad number should exit 2"
"$bin" frobnicate "$log" 2>/dev/null; [ $? -eq 2 ] || fail "unknown command should exit 2"
"$bin" dump "$dir/nope" 2>/dev/null; [ $? -eq 1 ] || fail "missing dir should exit 1"
set -e
echo "cairn-log CLI: all checks passed"
