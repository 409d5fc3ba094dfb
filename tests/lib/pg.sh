# pg.sh - for tests: a private PostgreSQL server (Debian's postgresql 15).
# Source it, then:
#   pg_start DIR        (DIR's parents searchable by all) initdb into DIR/data
#                       as an unprivileged user, start
#                       the server on a free port with its unix socket in
#                       DIR (no TCP); sets PG_PID, PG_PORT, PG_SOCK
#   pg_createdb NAME    creates a database; prints its libpq connection string
#   pg_psql DB ARGS...  psql against database DB
#   pg_stop             stops the server by PID (fast shutdown), waits
# The server runs as user nobody when the tests run as root (PostgreSQL
# refuses to run as root); the superuser role is "cairn", trust auth. fsync
# is off (PG_FSYNC, default off; benchmarks set it on): the tests kill
# processes, never the machine, and commits must not wait on a disk shared
# with every other test.

PG_BIN="${PG_BIN:-/usr/lib/postgresql/15/bin}"
PG_PID=""
PG_PORT=""
PG_SOCK=""

pg_as_server_user() {
  if [ "$(id -u)" -eq 0 ]; then
    setpriv --reuid=nobody --regid=nogroup --clear-groups --reset-env -- "$@"
  else
    "$@"
  fi
}

# Starts the server of DIR on PG_PORT in the background; PG_PID is the
# postmaster's own PID (setpriv execs it: no shell in between, so a signal
# to PG_PID reaches the server).
pg_launch() {
  local dir="$1"
  local cmd=("$PG_BIN/postgres" -D "$dir/data" -p "$PG_PORT" -k "$dir"
    -c listen_addresses='' -c max_connections=200 -c shared_buffers=32MB -c fsync="${PG_FSYNC:-off}")
  if [ "$(id -u)" -eq 0 ]; then
    cmd=(setpriv --reuid=nobody --regid=nogroup --clear-groups --reset-env -- "${cmd[@]}")
  fi
  "${cmd[@]}" >>"$dir/server.log" 2>&1 &
  PG_PID=$!
}

pg_free_port() {
  local tries=0 p
  while [ $tries -lt 200 ]; do
    tries=$((tries + 1))
    p=$((33000 + RANDOM % 5000))
    # above the cairnd blocks (ports.sh), below most ephemeral ranges' busy end
    if ! ss -Htln "sport = :$p" 2>/dev/null | grep -q .; then
      echo "$p"
      return 0
    fi
  done
  echo "pg_free_port: no free port" >&2
  return 1
}

pg_start() {
  local dir="$1" i
  [ -x "$PG_BIN/postgres" ] || { echo "pg_start: $PG_BIN/postgres missing (apt-get install postgresql)" >&2; return 1; }
  mkdir -p "$dir"
  chmod 755 "$dir"
  if [ "$(id -u)" -eq 0 ]; then chown nobody:nogroup "$dir"; fi
  PG_SOCK="$dir"
  pg_as_server_user "$PG_BIN/initdb" -D "$dir/data" -U cairn --auth=trust -E UTF8 \
    --no-sync >"$dir/initdb.log" 2>&1 || { cat "$dir/initdb.log" >&2; return 1; }
  PG_PORT=$(pg_free_port) || return 1
  pg_launch "$dir"
  for i in $(seq 1 300); do
    if "$PG_BIN/pg_isready" -q -U cairn -d postgres -h "$dir" -p "$PG_PORT" 2>/dev/null; then
      return 0
    fi
    if ! kill -0 "$PG_PID" 2>/dev/null; then
      cat "$dir/server.log" >&2
      return 1
    fi
    sleep 0.1
  done
  echo "pg_start: server not ready after 30 s" >&2
  cat "$dir/server.log" >&2
  return 1
}

pg_psql() {
  local db="$1"
  shift
  psql -X -q -v ON_ERROR_STOP=1 -h "$PG_SOCK" -p "$PG_PORT" -U cairn -d "$db" "$@"
}

pg_createdb() {
  pg_psql postgres -c "CREATE DATABASE \"$1\"" >/dev/null || return 1
  echo "host=$PG_SOCK port=$PG_PORT user=cairn dbname=$1"
}

# Starts the stopped server again (same port and data) and waits until it
# answers.
pg_resume() {
  local dir="$PG_SOCK"
  pg_launch "$dir"
  local i
  for i in $(seq 1 300); do
    "$PG_BIN/pg_isready" -q -U cairn -d postgres -h "$dir" -p "$PG_PORT" 2>/dev/null && return 0
    sleep 0.1
  done
  return 1
}

# Restarts the server (same port and data): a fault for the tests.
pg_restart() {
  pg_stop
  pg_resume
}

# SIGINT (fast shutdown: clients are disconnected), then SIGKILL if it is
# still up after 10 s.
pg_stop() {
  local i
  if [ -n "$PG_PID" ] && kill -0 "$PG_PID" 2>/dev/null; then
    kill -INT "$PG_PID" 2>/dev/null
    for i in $(seq 1 100); do
      kill -0 "$PG_PID" 2>/dev/null || break
      sleep 0.1
    done
    kill -KILL "$PG_PID" 2>/dev/null || true
    wait "$PG_PID" 2>/dev/null || true
  fi
  PG_PID=""
}

# pg_cairnd_wrapper DIR CAIRND: writes DIR/cairnd-pg, a cairnd for
# deploy/cluster.sh (--cairnd) that adds --pg-conninfo "$(cat DIR/conninfoI)"
# for node I when that file exists (a node without one has no database,
# and a file written or removed before a restart takes effect then);
# prints its path.
pg_cairnd_wrapper() {
  local dir="$1" real="$2"
  cat >"$dir/cairnd-pg" <<WRAP
#!/usr/bin/env bash
id=""
prev=""
for a in "\$@"; do
  [ "\$prev" = "--node-id" ] && id="\$a"
  prev="\$a"
done
[ -f "$dir/conninfo\$id" ] || exec "$real" "\$@"
exec "$real" "\$@" --pg-conninfo "\$(cat "$dir/conninfo\$id")"
WRAP
  chmod +x "$dir/cairnd-pg"
  echo "$dir/cairnd-pg"
}
