#!/usr/bin/env bash
# deploy_systemd.sh - the systemd unit passes systemd's own linters, and
# cairnd speaks its notification protocol:
#   - `systemd-analyze verify` on the staged unit (ExecStart pointing at
#     the staged cairnd) prints nothing (it exits 0 even on unknown keys,
#     so its output is the verdict);
#   - `systemd-analyze security --offline=yes --threshold=20` (2.0) accepts the
#     unit (the unit before sandboxing rated 9.2 UNSAFE);
#   - the unit's writable path is each example node's data dir;
#   - tests/integration/sd_notify.py: READY=1 / WATCHDOG=1 / STOPPING=1
#     from real cairnd processes to a socket this test listens on.
#   deploy_systemd.sh BUILD_DIR
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
. "$root/tests/lib/ports.sh"
build=$(cd "$1" && pwd)
tmp=$(mktemp -d /tmp/cairn-systemd-XXXXXX)
trap 'rm -rf "$tmp"' EXIT
fails=0
threshold=20 # tenths of the 0..10 scale systemd-analyze prints: 20 = 2.0

if ! command -v systemd-analyze >/dev/null; then
  echo "FAIL systemd-analyze is not installed (deploy/setup.sh installs systemd)"; exit 1
fi
bash "$root/deploy/install.sh" --build-dir "$build" --destdir "$tmp/stage" >/dev/null
unit_dir="$tmp/units"
mkdir -p "$unit_dir"
sed "s|/usr/local/bin/cairnd|$tmp/stage/usr/local/bin/cairnd|g" \
  "$tmp/stage/etc/systemd/system/cairnd@.service" >"$unit_dir/cairnd@.service"
for u in "cairnd@.service" "cairnd@1.service"; do
  if out=$(cd "$unit_dir" && systemd-analyze verify "$u" 2>&1) && [ -z "$out" ]; then
    echo "ok   systemd-analyze verify $u"
  else
    echo "FAIL systemd-analyze verify $u:"; echo "$out"; fails=$((fails + 1))
  fi
done

unit="$tmp/stage/etc/systemd/system/cairnd@.service"
if out=$(systemd-analyze security --offline=yes --threshold="$threshold" "$unit" 2>&1); then
  echo "ok   systemd-analyze security: $(grep -o 'Overall exposure level.*' <<<"$out")"
else
  echo "FAIL systemd-analyze security --threshold=$threshold:"
  grep -E '^✗|Overall' <<<"$out"; fails=$((fails + 1))
fi
grep -qx 'Type=notify' "$unit" || { echo "FAIL the unit is not Type=notify"; fails=$((fails + 1)); }
grep -q '^WatchdogSec=[1-9]' "$unit" || { echo "FAIL the unit has no WatchdogSec"; fails=$((fails + 1)); }

# ProtectSystem=strict leaves only ReadWritePaths= (and the StateDirectory)
# writable: it must be each example node's data dir.
rw=$(sed -n 's/^ReadWritePaths=//p' "$unit")
state=$(sed -n 's/^StateDirectory=//p' "$unit")
for i in 1 2 3; do
  dd=$("$build/cairnd" --config "$root/deploy/systemd/node-$i.conf" --check-config | sed -n 's/^data_dir = //p')
  if [ "${rw//%i/$i}" = "$dd" ] && [ "/var/lib/${state//%i/$i}" = "$dd" ]; then
    echo "ok   node-$i.conf's data dir $dd is the unit's writable StateDirectory"
  else
    echo "FAIL node-$i.conf's data dir $dd; the unit writes ${rw//%i/$i}, state /var/lib/${state//%i/$i}"
    fails=$((fails + 1))
  fi
done

base=$(free_base_port 4)
if /usr/bin/python3 "$root/tests/integration/sd_notify.py" "$build/cairnd" "$base"; then :; else
  fails=$((fails + 1))
fi
if ((fails > 0)); then echo "$fails failure(s)"; exit 1; fi
echo "all systemd checks passed"
