#!/usr/bin/env bash
# with_pg.sh - runs a test binary against a private PostgreSQL server
# (pg.sh): starts it, creates a database, exports CAIRN_PG_CONNINFO (its
# libpq connection string) and CAIRN_PG_SOCK / CAIRN_PG_PORT (for tests
# that restart or query it), runs the binary, stops the server by PID.
# Usage: with_pg.sh BINARY [ARGS...]
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
. "$here/pg.sh"
dir=$(mktemp -d /tmp/cairn-pg.XXXXXX)
chmod 755 "$dir" # the server runs as nobody
cleanup() { pg_stop; rm -rf "$dir"; }
trap cleanup EXIT
pg_start "$dir/pg"
CAIRN_PG_CONNINFO=$(pg_createdb cairn_test)
export CAIRN_PG_CONNINFO CAIRN_PG_SOCK="$PG_SOCK" CAIRN_PG_PORT="$PG_PORT"
"$@"
