#!/usr/bin/env bash
# install.sh - installs a built Cairn node: cairnd (and cairn-log, and the
# cairn CLI when built) into PREFIX/bin, the client library libcairn
# (PREFIX/lib: libcairn.so, libcairn.a), its headers (PREFIX/include/cairn)
# and PREFIX/lib/pkgconfig/cairn.pc, the systemd unit template
# cairnd@.service, the example configs into /etc/cairn (never over an
# existing file), the docs, and a `cairn` system user. A program then
# builds with: cc prog.c $(pkg-config --cflags --libs cairn)
#
#   bash deploy/install.sh [--build-dir DIR] [--prefix /usr/local] [--destdir DIR]
#
# --build-dir: where the binaries are (default build/release; build it
# first: bash deploy/build.sh release). --destdir: stage everything under
# DIR (packaging, the Dockerfile, the tests): then no user is created and
# systemd is not told. The unit's paths assume --prefix /usr/local.
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir=build/release
prefix=/usr/local
destdir=""
while [ $# -gt 0 ]; do
  case "$1" in
    --build-dir) build_dir=$2; shift 2 ;;
    --prefix) prefix=$2; shift 2 ;;
    --destdir) destdir=$2; shift 2 ;;
    -h | --help) sed -n '2,16p' "$0"; exit 0 ;;
    *) echo "install.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
[ -x "$build_dir/cairnd" ] || { echo "install.sh: no $build_dir/cairnd (bash deploy/build.sh release)" >&2; exit 1; }

install -d "$destdir$prefix/bin" "$destdir/etc/cairn" "$destdir/etc/systemd/system" \
  "$destdir$prefix/share/doc/cairn"
install -m 0755 "$build_dir/cairnd" "$destdir$prefix/bin/cairnd"
for b in cairn-log cairn; do
  if [ -x "$build_dir/$b" ]; then install -m 0755 "$build_dir/$b" "$destdir$prefix/bin/$b"; fi
done
# libcairn, its headers and cairn.pc: the CMake install rules (one list
# of what the library installs, also for `cmake --install`).
DESTDIR="$destdir" cmake --install "$build_dir" --prefix "$prefix" >/dev/null
install -m 0644 deploy/systemd/cairnd@.service "$destdir/etc/systemd/system/cairnd@.service"
for f in deploy/systemd/node-*.conf; do
  t="$destdir/etc/cairn/$(basename "$f")"
  [ -e "$t" ] || install -m 0644 "$f" "$t"
done
install -m 0644 docs/configuration.md docs/operations.md docs/security.md docs/client.md \
  docs/fault-tolerance.md "$destdir$prefix/share/doc/cairn/"
if [ -z "$destdir" ]; then
  if ! id cairn >/dev/null 2>&1; then
    useradd --system --home-dir /var/lib/cairn --shell /usr/sbin/nologin cairn
  fi
  install -d -o cairn -g cairn -m 0750 /var/lib/cairn
  if command -v ldconfig >/dev/null; then ldconfig; fi
  if command -v systemctl >/dev/null && [ -d /run/systemd/system ]; then systemctl daemon-reload; fi
  echo "installed; edit /etc/cairn/node-N.conf, then: systemctl enable --now cairnd@N"
else
  echo "staged under $destdir"
fi
