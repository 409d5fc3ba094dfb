#!/usr/bin/env bash
# deploy_libcairn.sh - a program builds against the *installed* libcairn
# the way docs/client.md says: deploy/install.sh stages the library, its
# headers and cairn.pc under a temporary prefix; client/examples' producer
# and consumer compile with `cc prog.c $(pkg-config --cflags --libs cairn)`
# (PKG_CONFIG_PATH naming only that prefix), link the staged libcairn.so,
# and produce to / consume from a real cairnd. Also: the build tree's
# cairn-uninstalled.pc points at files that exist.
#   deploy_libcairn.sh BUILD_DIR
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
. "$root/tests/lib/ports.sh"
build=$(cd "$1" && pwd)
tmp=$(mktemp -d /tmp/cairn-libcairn-XXXXXX)
pid=""
cleanup() {
  if [ -n "$pid" ]; then kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; fi
  rm -rf "$tmp"
}
trap cleanup EXIT
fails=0
fail() { echo "FAIL $*"; fails=$((fails + 1)); }

prefix=/opt/cairn
stage="$tmp/stage"
bash "$root/deploy/install.sh" --build-dir "$build" --destdir "$stage" --prefix "$prefix" >/dev/null
lib="$stage$prefix/lib"
for f in "$lib/libcairn.so" "$lib/libcairn.a" "$lib/pkgconfig/cairn.pc" \
  "$stage$prefix/include/cairn/cairn.h" "$stage$prefix/include/cairn/err.h" \
  "$stage$prefix/include/cairn/group.h"; do
  [ -e "$f" ] || fail "install.sh did not install $f"
done

export PKG_CONFIG_PATH="$lib/pkgconfig"
cflags=$(pkg-config --cflags cairn)
libs=$(pkg-config --libs cairn)
inc=$(pkg-config --variable=includedir cairn)
[ "$(cd "$inc" 2>/dev/null && pwd -P)" = "$(cd "$stage$prefix/include" && pwd -P)" ] ||
  fail "the installed cairn.pc's includedir $inc is not the installed include dir"
echo "ok   pkg-config --cflags --libs cairn: $cflags $libs"

# A sanitizer build's library needs the programs built with the same
# runtime (ASan must come first); a release build's does not.
san=""
if grep -q '^CMAKE_BUILD_TYPE:STRING=Sanitize' "$build/CMakeCache.txt"; then san="-fsanitize=address,undefined"; fi
for ex in producer consumer; do
  # shellcheck disable=SC2086
  if ! cc $san -o "$tmp/$ex" "$root/client/examples/$ex.c" $cflags $libs 2>"$tmp/cc.err"; then
    fail "cc $ex.c \$(pkg-config --cflags --libs cairn):"; cat "$tmp/cc.err"
  fi
done
export LD_LIBRARY_PATH="$lib"
# ldd's output is captured first: `ldd | grep -q` under pipefail fails
# whenever grep exits on its match before ldd has finished writing
# (SIGPIPE), which a CI run hit.
deps=""
[ -x "$tmp/producer" ] && deps=$(ldd "$tmp/producer" 2>&1 || true)
if grep -qF "libcairn.so.0 => $lib/libcairn.so.0" <<<"$deps"; then
  echo "ok   the example links the installed libcairn.so.0"
else
  fail "the example does not load $lib/libcairn.so.0: $(grep cairn <<<"$deps")"
fi

# The build tree's pkg-config file names directories that exist.
ucflags=$(PKG_CONFIG_PATH="$build" pkg-config --cflags cairn)
for d in $ucflags $(PKG_CONFIG_PATH="$build" pkg-config --libs-only-L cairn); do
  [ -d "${d#-[IL]}" ] || fail "build tree cairn-uninstalled.pc names $d, which does not exist"
done

# Against a real node.
port=$(free_base_port 1)
"$build/cairnd" --node-id 1 --data-dir "$tmp/data" --listen "127.0.0.1:$port" \
  --cluster-listen "127.0.0.1:$((port + 1))" --admin-listen "127.0.0.1:$((port + 2))" \
  --kafka-listen off >"$tmp/cairnd.log" 2>&1 &
pid=$!
for _ in $(seq 1 300); do
  bash "$root/deploy/docker/healthcheck.sh" "127.0.0.1:$((port + 2))" >/dev/null 2>&1 && break
  sleep 0.2
done
if out=$("$tmp/producer" "127.0.0.1:$port" installed-lib 5 2>&1) && grep -q "delivered 5" <<<"$out"; then
  echo "ok   the installed-library producer delivered 5 messages"
else
  fail "producer: $out"; tail -5 "$tmp/cairnd.log"
fi
want=$(printf '%s\n' "0 key-0 message-0" "1 key-1 message-1" "2 key-2 message-2" "3 key-3 message-3" "4 key-4 message-4")
if out=$("$tmp/consumer" "127.0.0.1:$port" installed-lib 0 5 2>&1) && [ "$out" = "$want" ]; then
  echo "ok   the installed-library consumer read them back in order"
else
  fail "consumer read:"; echo "$out"
fi

if ((fails > 0)); then echo "$fails failure(s)"; exit 1; fi
echo "all libcairn install checks passed"
