#!/usr/bin/env bash
# Builds the libFuzzer targets with clang into build/fuzz and runs each one
# for SECONDS (default 20) from the seeds in tests/fuzz/seeds/<target>.
#   bash tests/fuzz/run.sh                 20 s per target (ctest's fuzz_short: 11 s)
#   bash tests/fuzz/run.sh 600             ten minutes per target
#   bash tests/fuzz/run.sh 600 frame       one target: frame | batch | producers | kafka | wal | plog | raftmux | meta | group
#   bash tests/fuzz/run.sh --build-only
# The growing corpus stays in build/fuzz/corpus/<target> (reused by later
# runs); a crashing input is saved as build/fuzz/artifacts/<target>-crash-*
# and replays with build/fuzz/fuzz_<target> <file>.
set -euo pipefail
cd "$(dirname "$0")/../.."
secs=20
build_only=0
targets=()
for a in "$@"; do
  case "$a" in
    --build-only) build_only=1 ;;
    frame|batch|producers|kafka|wal|plog|raftmux|meta|group) targets+=("$a") ;;
    *[!0-9]*|'') echo "run.sh: unknown argument '$a'" >&2; exit 2 ;;
    *) secs="$a" ;;
  esac
done
[ ${#targets[@]} -gt 0 ] || targets=(frame batch producers kafka wal plog raftmux meta group)
if ! command -v clang >/dev/null; then
  echo "run.sh: clang not found (bash deploy/setup.sh installs it)" >&2
  exit 1
fi
CC=clang cmake -S . -B build/fuzz -DCMAKE_BUILD_TYPE=Debug -DCAIRN_FUZZ=ON -DCAIRN_WERROR=ON >/dev/null
cmake --build build/fuzz --target fuzz_frame fuzz_batch fuzz_producers fuzz_kafka fuzz_wal fuzz_plog fuzz_raftmux fuzz_meta fuzz_group -j 2 >build/fuzz/build.log 2>&1 ||
  { cat build/fuzz/build.log; exit 1; }
[ "$build_only" -eq 0 ] || exit 0
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
mkdir -p build/fuzz/artifacts
for t in "${targets[@]}"; do
  corpus="build/fuzz/corpus/$t"
  mkdir -p "$corpus"
  for f in tests/fuzz/seeds/"$t"/*; do
    [ -e "$corpus/$(basename "$f")" ] || cp "$f" "$corpus/"
  done
  log="build/fuzz/fuzz_$t.log"
  # fuzz_wal: a record forged with a valid checksum may make the replay
  # allocate 2^20 index slots (cluster/wal_internal.h, WAL_MAX_HOLES);
  # inputs of at most 768 bytes (19 records) stay under the memory limit.
  extra=()
  [ "$t" != wal ] || extra=(-max_len=768)
  if ! "build/fuzz/fuzz_$t" "${extra[@]}" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 \
      -print_final_stats=1 -artifact_prefix="build/fuzz/artifacts/$t-" "$corpus" >"$log" 2>&1; then
    tail -n 60 "$log"
    echo "fuzz_$t: FAILED (log $log; inputs in build/fuzz/artifacts/)" >&2
    exit 1
  fi
  runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo '?')
  cov=$(grep -o 'cov: [0-9]*' "$log" | tail -n 1 || true)
  echo "fuzz_$t: ok, $runs inputs in ${secs}s, $cov, corpus $(ls "$corpus" | wc -l) files"
done
