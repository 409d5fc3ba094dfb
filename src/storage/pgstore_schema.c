/* pgstore_schema.c - pgstore's schema migrations (pgstore_schema.h). Each
 * migration is one SQL script; version N is migrations[N - 1]. A migration
 * is never edited once released: a change is a new version. */
#include "storage/pgstore_schema.h"

#include "common/err.h"

#include <stdbool.h>
#include <stdint.h>

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Any constant: nodes sharing a database serialize their migrations on it. */
#define PGSTORE_SCHEMA_LOCK_KEY 0x636169726e5047LL /* "cairnPG" */

/* Version 1: topics, partitions, batches, and the records view that
 * decodes batches (uncompressed ones; docs/format.md) in SQL. */
static const char pgstore_schema_v1[] =
    "CREATE TABLE cairn_topics ("
    "  topic_id bigint PRIMARY KEY,"
    "  name text NOT NULL);"
    "CREATE TABLE cairn_partitions ("
    "  topic_id bigint NOT NULL,"
    "  partition integer NOT NULL,"
    "  start_offset bigint NOT NULL,"
    "  prefix_index bigint NOT NULL,"
    "  PRIMARY KEY (topic_id, partition));"
    "CREATE TABLE cairn_batches ("
    "  topic_id bigint NOT NULL,"
    "  partition integer NOT NULL,"
    "  base_offset bigint NOT NULL,"
    "  last_offset bigint NOT NULL,"
    "  max_timestamp bigint NOT NULL,"
    "  raft_index bigint NOT NULL,"
    "  batch bytea NOT NULL,"
    "  PRIMARY KEY (topic_id, partition, base_offset));"
    "CREATE INDEX cairn_batches_last ON cairn_batches (topic_id, partition, last_offset);"
    "CREATE INDEX cairn_batches_time ON cairn_batches (topic_id, partition, max_timestamp);"
    "CREATE TYPE cairn_header AS (key bytea, value bytea);"
    /* Little-endian integers of the batch header. PostgreSQL gives every
     * operator here one precedence, hence the parentheses. */
    "CREATE FUNCTION cairn_le_i64(b bytea, pos integer) RETURNS bigint"
    " LANGUAGE sql IMMUTABLE STRICT AS $$ SELECT"
    "  (get_byte(b, pos)::bigint) | (get_byte(b, pos + 1)::bigint << 8)"
    "  | (get_byte(b, pos + 2)::bigint << 16) | (get_byte(b, pos + 3)::bigint << 24)"
    "  | (get_byte(b, pos + 4)::bigint << 32) | (get_byte(b, pos + 5)::bigint << 40)"
    "  | (get_byte(b, pos + 6)::bigint << 48) | (get_byte(b, pos + 7)::bigint << 56) $$;"
    /* A zigzag varint at pos (0-based): its value and the position after it. */
    "CREATE FUNCTION cairn_varint(b bytea, INOUT pos integer, OUT val bigint)"
    " LANGUAGE plpgsql IMMUTABLE STRICT AS $$"
    " DECLARE raw bigint := 0; shift integer := 0; byte integer;"
    " BEGIN"
    "  LOOP"
    "   byte := get_byte(b, pos);"
    "   pos := pos + 1;"
    "   raw := raw | ((byte & 127)::bigint << shift);"
    "   EXIT WHEN byte < 128;"
    "   shift := shift + 7;"
    "   IF shift > 63 THEN RAISE EXCEPTION 'cairn: malformed varint before %', pos; END IF;"
    "  END LOOP;"
    "  val := ((raw >> 1) & 9223372036854775807) # (-(raw & 1));"
    " END $$;"
    /* A byte string of a record: -1 is null. */
    "CREATE FUNCTION cairn_bytes(b bytea, INOUT pos integer, OUT val bytea)"
    " LANGUAGE plpgsql IMMUTABLE STRICT AS $$"
    " DECLARE len bigint;"
    " BEGIN"
    "  SELECT v.pos, v.val INTO pos, len FROM cairn_varint(b, pos) v;"
    "  IF len < 0 THEN val := NULL; RETURN; END IF;"
    "  val := substring(b FROM pos + 1 FOR len::integer);"
    "  pos := pos + len::integer;"
    " END $$;"
    /* The records of one stamped batch; none for a compressed one. */
    "CREATE FUNCTION cairn_batch_records(b bytea) RETURNS TABLE"
    " (r_offset bigint, r_timestamp bigint, r_key bytea, r_value bytea, r_headers cairn_header[])"
    " LANGUAGE plpgsql IMMUTABLE STRICT AS $$"
    " DECLARE pos integer := 66; rec_end integer; len bigint; delta bigint; n bigint;"
    "  base bigint; first_ts bigint; hk bytea; hv bytea;"
    " BEGIN"
    "  IF (get_byte(b, 26) & 7) <> 0 THEN RETURN; END IF;"
    "  base := cairn_le_i64(b, 0);"
    "  first_ts := cairn_le_i64(b, 32);"
    "  WHILE pos < length(b) LOOP"
    "   SELECT v.pos, v.val INTO pos, len FROM cairn_varint(b, pos) v;"
    "   rec_end := pos + len::integer;"
    "   pos := pos + 1;"
    "   SELECT v.pos, v.val INTO pos, delta FROM cairn_varint(b, pos) v;"
    "   r_timestamp := first_ts + delta;"
    "   SELECT v.pos, v.val INTO pos, delta FROM cairn_varint(b, pos) v;"
    "   r_offset := base + delta;"
    "   SELECT v.pos, v.val INTO pos, r_key FROM cairn_bytes(b, pos) v;"
    "   SELECT v.pos, v.val INTO pos, r_value FROM cairn_bytes(b, pos) v;"
    "   SELECT v.pos, v.val INTO pos, n FROM cairn_varint(b, pos) v;"
    "   r_headers := '{}';"
    "   FOR i IN 1..n LOOP"
    "    SELECT v.pos, v.val INTO pos, hk FROM cairn_bytes(b, pos) v;"
    "    SELECT v.pos, v.val INTO pos, hv FROM cairn_bytes(b, pos) v;"
    "    r_headers := r_headers || ROW(hk, hv)::cairn_header;"
    "   END LOOP;"
    "   pos := rec_end;"
    "   RETURN NEXT;"
    "  END LOOP;"
    " END $$;"
    "CREATE VIEW cairn_records AS"
    " SELECT t.name AS topic, b.partition, r.r_offset AS \"offset\","
    "  r.r_timestamp AS \"timestamp\", r.r_key AS key, r.r_value AS value,"
    "  r.r_headers AS headers"
    " FROM cairn_batches b"
    " JOIN cairn_topics t ON t.topic_id = b.topic_id"
    " JOIN cairn_partitions p ON p.topic_id = b.topic_id AND p.partition = b.partition"
    " CROSS JOIN LATERAL cairn_batch_records(b.batch) r"
    " WHERE r.r_offset >= p.start_offset;";

static const char *const pgstore_schema_migrations[PGSTORE_SCHEMA_VERSION] = {
    pgstore_schema_v1,
};

/* Runs sql; on failure fills err with what and PostgreSQL's message. */
static int pgstore_schema_exec(PGconn *conn, const char *what, const char *sql, char *err,
                               size_t errlen)
{
  PGresult *res = PQexec(conn, sql);
  ExecStatusType st = PQresultStatus(res);
  int rv = 0;
  if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK) {
    char msg[200];
    snprintf(msg, sizeof msg, "%s", PQerrorMessage(conn));
    msg[strcspn(msg, "\n")] = '\0';
    snprintf(err, errlen, "schema: %s: %s", what, msg);
    rv = CAIRN_EDATABASE;
  }
  PQclear(res);
  return rv;
}

/* The version the database is at (0: none yet). The table exists by now. */
static int pgstore_schema_current(PGconn *conn, long *version, char *err, size_t errlen)
{
  PGresult *res = PQexec(conn, "SELECT coalesce(max(version), 0) FROM cairn_schema_version");
  if (PQresultStatus(res) != PGRES_TUPLES_OK || PQntuples(res) != 1) {
    snprintf(err, errlen, "schema: reading cairn_schema_version: %s", PQerrorMessage(conn));
    err[strcspn(err, "\n")] = '\0';
    PQclear(res);
    return CAIRN_EDATABASE;
  }
  *version = strtol(PQgetvalue(res, 0, 0), NULL, 10);
  PQclear(res);
  return 0;
}

static int pgstore_schema_apply(PGconn *conn, long from, char *err, size_t errlen)
{
  for (long v = from + 1; v <= PGSTORE_SCHEMA_VERSION; v++) {
    char what[64];
    snprintf(what, sizeof what, "migration to version %ld", v);
    int rv = pgstore_schema_exec(conn, what, pgstore_schema_migrations[v - 1], err, errlen);
    if (rv != 0) {
      return rv;
    }
    char sql[128];
    snprintf(sql, sizeof sql, "INSERT INTO cairn_schema_version (version) VALUES (%ld)", v);
    rv = pgstore_schema_exec(conn, what, sql, err, errlen);
    if (rv != 0) {
      return rv;
    }
  }
  return 0;
}

int pgstore_schema_migrate(PGconn *conn, char *err, size_t errlen)
{
  char sql[256];
  snprintf(sql, sizeof sql,
           "SET client_min_messages TO warning; BEGIN; SELECT pg_advisory_xact_lock(%lld)",
           (long long)PGSTORE_SCHEMA_LOCK_KEY);
  int rv = pgstore_schema_exec(conn, "locking", sql, err, errlen);
  if (rv == 0) {
    rv = pgstore_schema_exec(conn, "creating cairn_schema_version",
                             "CREATE TABLE IF NOT EXISTS cairn_schema_version ("
                             " version integer PRIMARY KEY,"
                             " applied_at timestamptz NOT NULL DEFAULT now())",
                             err, errlen);
  }
  long version = 0;
  if (rv == 0) {
    rv = pgstore_schema_current(conn, &version, err, errlen);
  }
  if (rv == 0 && version > PGSTORE_SCHEMA_VERSION) {
    snprintf(err, errlen,
             "schema: the database is at version %ld, this build knows versions up to %d "
             "(a newer Cairn migrated it)",
             version, PGSTORE_SCHEMA_VERSION);
    rv = CAIRN_ESCHEMA;
  }
  if (rv == 0) {
    rv = pgstore_schema_apply(conn, version, err, errlen);
  }
  if (rv == 0) {
    return pgstore_schema_exec(conn, "committing", "COMMIT", err, errlen);
  }
  char ignored[8];
  (void)pgstore_schema_exec(conn, "rolling back", "ROLLBACK", ignored, sizeof ignored);
  return rv;
}

/* ---- connecting ---- */

/* Milliseconds on the monotonic clock, for a connection's deadline. */
static int64_t pgstore_schema_now_ms(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* The first line of the password file into buf. */
static int pgstore_schema_read_password(const char *path, char *buf, size_t len, char *err,
                                        size_t errlen)
{
  FILE *f = fopen(path, "r");
  if (f == NULL) {
    snprintf(err, errlen, "password file %s: %s", path, strerror(errno));
    return CAIRN_ECONFIG;
  }
  bool ok = fgets(buf, (int)len, f) != NULL;
  fclose(f);
  if (!ok) {
    snprintf(err, errlen, "password file %s: empty", path);
    return CAIRN_ECONFIG;
  }
  buf[strcspn(buf, "\r\n")] = '\0';
  return 0;
}

/* Waits until libpq's connection attempt can go on (want: what
 * PQconnectPoll asked for) or deadline_ms (0: no deadline) passes.
 * Returns 0, or CAIRN_EREQUEST_TIMEOUT. */
static int pgstore_schema_connect_wait(PGconn *conn, PostgresPollingStatusType want,
                                       int64_t deadline_ms)
{
  struct pollfd pfd = {.fd = PQsocket(conn),
                       .events = want == PGRES_POLLING_READING ? POLLIN : POLLOUT};
  for (;;) {
    int wait_ms = -1;
    if (deadline_ms != 0) {
      int64_t left = deadline_ms - pgstore_schema_now_ms();
      if (left <= 0) {
        return CAIRN_EREQUEST_TIMEOUT;
      }
      wait_ms = (int)left;
    }
    int n = poll(&pfd, 1, wait_ms);
    if (n > 0 || (n < 0 && errno != EINTR)) {
      return 0; /* ready, or an error PQconnectPoll will report */
    }
  }
}

int pgstore_schema_connect(const char *conninfo, const char *password_file, int timeout_ms,
                           PGconn **out, char *err, size_t errlen)
{
  const char *keys[3] = {"dbname", NULL, NULL};
  const char *values[3] = {conninfo, NULL, NULL};
  char password[256];
  if (password_file != NULL) {
    int rv = pgstore_schema_read_password(password_file, password, sizeof password, err, errlen);
    if (rv != 0) {
      return rv;
    }
    keys[1] = "password";
    values[1] = password;
  }
  PGconn *conn = PQconnectStartParams(keys, values, 1);
  memset(password, 0, sizeof password);
  if (conn == NULL) {
    snprintf(err, errlen, "postgresql: connecting: out of memory");
    return CAIRN_ENOMEM;
  }
  int64_t deadline = timeout_ms > 0 ? pgstore_schema_now_ms() + timeout_ms : 0;
  PostgresPollingStatusType st = PGRES_POLLING_WRITING;
  while (PQstatus(conn) != CONNECTION_BAD && st != PGRES_POLLING_OK &&
         st != PGRES_POLLING_FAILED) {
    if (pgstore_schema_connect_wait(conn, st, deadline) != 0) {
      snprintf(err, errlen, "postgresql: connecting: no answer within %d ms", timeout_ms);
      PQfinish(conn);
      return CAIRN_EDATABASE;
    }
    st = PQconnectPoll(conn);
  }
  if (PQstatus(conn) != CONNECTION_OK) {
    char msg[200];
    snprintf(msg, sizeof msg, "%s", PQerrorMessage(conn));
    msg[strcspn(msg, "\n")] = '\0';
    snprintf(err, errlen, "postgresql: connecting: %s", msg);
    PQfinish(conn);
    return CAIRN_EDATABASE;
  }
  *out = conn;
  return 0;
}

bool pgstore_schema_conn_lost(PGconn *conn, const PGresult *res)
{
  if (conn == NULL || PQstatus(conn) == CONNECTION_BAD) {
    return true;
  }
  if (res == NULL) {
    return false;
  }
  const char *sev = PQresultErrorField(res, PG_DIAG_SEVERITY_NONLOCALIZED);
  if (sev != NULL && (strcmp(sev, "FATAL") == 0 || strcmp(sev, "PANIC") == 0)) {
    return true;
  }
  const char *state = PQresultErrorField(res, PG_DIAG_SQLSTATE);
  return state != NULL && (strncmp(state, "08", 2) == 0 || strncmp(state, "57P", 3) == 0);
}
