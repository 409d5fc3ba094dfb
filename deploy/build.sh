#!/usr/bin/env bash
# Configures and builds one build type into build/<type>.
#   deploy/build.sh sanitize   ASan+UBSan, -Werror: what the tests run
#   deploy/build.sh release    -O2, what the benchmarks run
#   deploy/build.sh debug
set -euo pipefail
cd "$(dirname "$0")/.."
type="${1:-debug}"
case "$type" in
  sanitize) cmake_type=Sanitize ;;
  release)  cmake_type=Release ;;
  debug)    cmake_type=Debug ;;
  *) echo "build.sh: unknown build type '$type' (sanitize|release|debug)" >&2; exit 2 ;;
esac
jobs=$(nproc 2>/dev/null || echo 2)
cmake -S . -B "build/$type" -DCMAKE_BUILD_TYPE="$cmake_type" -DCAIRN_WERROR=ON >/dev/null
cmake --build "build/$type" -j "$jobs"
