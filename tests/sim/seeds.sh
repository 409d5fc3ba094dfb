#!/usr/bin/env bash
# The simulation's bounded run over thousands of seeds: sim_partition of the
# Release tree (tests/run.sh builds it beside the sanitizer tree), which runs
# about 50 seeds a second where the ASan build (sim_short) runs 2. Skipped
# (77) when there is no Release build. Extra flags go to sim_partition
# (--crash: the crash engine). Usage: seeds.sh SEEDS [FLAG...]
# The Release tree is build/release beside this checkout, or $CAIRN_SIM_RELEASE.
set -euo pipefail
seeds="$1"
shift
release="${CAIRN_SIM_RELEASE:-$(cd "$(dirname "$0")/../.." && pwd)/build/release}"
sim="$release/sim_partition"
if [ ! -x "$sim" ]; then
  echo "seeds.sh: no $sim (bash deploy/build.sh release): skipped" >&2
  exit 77
fi
exec "$sim" "$@" --seeds "$seeds" --start 1
