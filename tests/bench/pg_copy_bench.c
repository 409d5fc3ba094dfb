/* pg_copy_bench.c - cairn-pg-copy-bench: the baseline a user would write
 * by hand to put messages into PostgreSQL, measured for bench/pg_produce
 * (issue 19, item 7): one connection, a table of (seq, ts, value), and a
 * loop of transactions that each COPY a batch of rows in binary format and
 * COMMIT. A program, not a test: it prints what it measured and asserts
 * nothing about time; it checks that the table holds every row at the end.
 *
 *   cairn-pg-copy-bench CONNINFO COUNT [SIZE [ROWS_PER_COMMIT]]
 *
 * COUNT rows of SIZE-byte values (default 100), ROWS_PER_COMMIT rows per
 * transaction (default 1000). Then reads them back as a user would page
 * through them: SELECT seq, value ... WHERE seq >= $1 ORDER BY seq LIMIT
 * ROWS_PER_COMMIT, in binary, until every row came back (checking each
 * value's length and the sequence). Prints one line: the write rows/s and
 * the read rows/s. */
#include <inttypes.h>
#include <libpq-fe.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define PGCB_TABLE "cairn_copy_baseline"

static double pgcb_now(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static int pgcb_exec(PGconn *conn, const char *sql)
{
  PGresult *res = PQexec(conn, sql);
  ExecStatusType st = PQresultStatus(res);
  PQclear(res);
  if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK && st != PGRES_COPY_IN) {
    fprintf(stderr, "cairn-pg-copy-bench: %s: %s", sql, PQerrorMessage(conn));
    return -1;
  }
  return 0;
}

static void pgcb_put16(uint8_t *p, uint16_t v)
{
  p[0] = (uint8_t)(v >> 8);
  p[1] = (uint8_t)v;
}

static void pgcb_put32(uint8_t *p, uint32_t v)
{
  for (int i = 0; i < 4; i++) {
    p[i] = (uint8_t)(v >> (24 - 8 * i));
  }
}

static void pgcb_put64(uint8_t *p, uint64_t v)
{
  for (int i = 0; i < 8; i++) {
    p[i] = (uint8_t)(v >> (56 - 8 * i));
  }
}

/* One row in COPY's binary format: 3 fields, the bigint seq, the
 * timestamptz (microseconds since 2000-01-01) and the bytea value. */
static size_t pgcb_row(uint8_t *p, uint64_t seq, int64_t pg_us, const uint8_t *value, size_t size)
{
  pgcb_put16(p, 3);
  pgcb_put32(p + 2, 8);
  pgcb_put64(p + 6, seq);
  pgcb_put32(p + 14, 8);
  pgcb_put64(p + 18, (uint64_t)pg_us);
  pgcb_put32(p + 26, (uint32_t)size);
  memcpy(p + 30, value, size);
  return 30 + size;
}

/* One transaction: COPY rows [first, first + n) and COMMIT. */
static int pgcb_batch(PGconn *conn, uint8_t *buf, uint64_t first, size_t n, const uint8_t *value,
                      size_t size)
{
  static const uint8_t header[19] = {'P', 'G', 'C', 'O', 'P', 'Y', '\n', 0xff, '\r', '\n', 0};
  if (pgcb_exec(conn, "BEGIN") != 0 ||
      pgcb_exec(conn, "COPY " PGCB_TABLE " (seq, ts, value) FROM STDIN (FORMAT binary)") != 0) {
    return -1;
  }
  struct timespec now;
  clock_gettime(CLOCK_REALTIME, &now);
  int64_t pg_us = ((int64_t)now.tv_sec - 946684800) * 1000000 + now.tv_nsec / 1000;
  size_t len = sizeof header;
  memcpy(buf, header, sizeof header);
  for (size_t i = 0; i < n; i++) {
    len += pgcb_row(buf + len, first + i, pg_us, value, size);
  }
  pgcb_put16(buf + len, 0xffff); /* the trailer */
  len += 2;
  if (PQputCopyData(conn, (const char *)buf, (int)len) != 1 || PQputCopyEnd(conn, NULL) != 1) {
    fprintf(stderr, "cairn-pg-copy-bench: COPY: %s", PQerrorMessage(conn));
    return -1;
  }
  PGresult *res = PQgetResult(conn);
  ExecStatusType st = PQresultStatus(res);
  PQclear(res);
  while ((res = PQgetResult(conn)) != NULL) {
    PQclear(res);
  }
  if (st != PGRES_COMMAND_OK) {
    fprintf(stderr, "cairn-pg-copy-bench: COPY: %s", PQerrorMessage(conn));
    return -1;
  }
  return pgcb_exec(conn, "COMMIT");
}

/* Reads the table back in pages of per rows. Returns 0 when rows [0,
 * count) came back in order with size-byte values, -1 otherwise. */
static int pgcb_read_back(PGconn *conn, uint64_t count, size_t size, size_t per)
{
  char limit[24];
  snprintf(limit, sizeof limit, "%zu", per);
  uint64_t seq = 0;
  while (seq < count) {
    char from[24];
    snprintf(from, sizeof from, "%" PRIu64, seq);
    const char *values[2] = {from, limit};
    PGresult *res = PQexecParams(
        conn, "SELECT seq, value FROM " PGCB_TABLE " WHERE seq >= $1 ORDER BY seq LIMIT $2", 2,
        NULL, values, NULL, NULL, 1);
    int rows = PQresultStatus(res) == PGRES_TUPLES_OK ? PQntuples(res) : -1;
    for (int i = 0; i < rows; i++, seq++) {
      const uint8_t *p = (const uint8_t *)PQgetvalue(res, i, 0);
      uint64_t got = 0;
      for (int k = 0; k < 8; k++) {
        got = got << 8 | p[k];
      }
      if (got != seq || (size_t)PQgetlength(res, i, 1) != size) {
        rows = -1;
        break;
      }
    }
    PQclear(res);
    if (rows <= 0) {
      fprintf(stderr, "cairn-pg-copy-bench: reading back at %" PRIu64 ": %s\n", seq,
              rows < 0 ? PQerrorMessage(conn) : "no rows");
      return -1;
    }
  }
  return 0;
}

/* The rows the table holds, or -1. */
static long long pgcb_count(PGconn *conn)
{
  PGresult *res = PQexec(conn, "SELECT count(*) FROM " PGCB_TABLE);
  long long n =
      PQresultStatus(res) == PGRES_TUPLES_OK ? strtoll(PQgetvalue(res, 0, 0), NULL, 10) : -1;
  PQclear(res);
  return n;
}

int main(int argc, char **argv)
{
  if (argc < 3) {
    fprintf(stderr, "usage: cairn-pg-copy-bench CONNINFO COUNT [SIZE [ROWS_PER_COMMIT]]\n");
    return 2;
  }
  uint64_t count = strtoull(argv[2], NULL, 10);
  size_t size = argc > 3 ? strtoul(argv[3], NULL, 10) : 100;
  size_t per = argc > 4 ? strtoul(argv[4], NULL, 10) : 1000;
  if (count == 0 || size == 0 || size > 1 << 20 || per == 0 || per > 100000) {
    fprintf(stderr, "cairn-pg-copy-bench: COUNT, SIZE (<= 1 MiB) and ROWS_PER_COMMIT "
                    "(<= 100000) must be positive\n");
    return 2;
  }
  PGconn *conn = PQconnectdb(argv[1]);
  if (PQstatus(conn) != CONNECTION_OK) {
    fprintf(stderr, "cairn-pg-copy-bench: connecting: %s", PQerrorMessage(conn));
    PQfinish(conn);
    return 1;
  }
  uint8_t *value = malloc(size);
  uint8_t *buf = malloc(19 + per * (30 + size) + 2);
  int rv = value == NULL || buf == NULL ? -1 : 0;
  if (rv == 0) {
    for (size_t i = 0; i < size; i++) {
      value[i] = (uint8_t)('a' + i % 26);
    }
    rv = pgcb_exec(conn, "DROP TABLE IF EXISTS " PGCB_TABLE);
  }
  if (rv == 0) {
    rv = pgcb_exec(conn, "CREATE TABLE " PGCB_TABLE " (seq bigint PRIMARY KEY, ts timestamptz "
                         "NOT NULL, value bytea NOT NULL)");
  }
  double t0 = pgcb_now();
  for (uint64_t done = 0; rv == 0 && done < count; done += per) {
    size_t n = count - done < per ? (size_t)(count - done) : per;
    rv = pgcb_batch(conn, buf, done, n, value, size);
  }
  double secs = pgcb_now() - t0;
  long long held = rv == 0 ? pgcb_count(conn) : -1;
  if (rv == 0 && held != (long long)count) {
    fprintf(stderr, "cairn-pg-copy-bench: the table holds %lld rows, not %" PRIu64 "\n", held,
            count);
    rv = -1;
  }
  double t1 = pgcb_now();
  if (rv == 0) {
    rv = pgcb_read_back(conn, count, size, per);
  }
  double read_secs = pgcb_now() - t1;
  if (rv == 0) {
    printf("%.0f %.0f\n", (double)count / secs, (double)count / read_secs);
  }
  free(value);
  free(buf);
  PQfinish(conn);
  return rv == 0 ? 0 : 1;
}
