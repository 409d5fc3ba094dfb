/* pg_sql.c - see pg_sql.h. */
#include "pg_sql.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>

const char *pg_sql_conninfo(void)
{
  const char *c = getenv("CAIRN_PG_CONNINFO");
  if (c == NULL) {
    fail_msg("CAIRN_PG_CONNINFO is not set: run through tests/lib/with_pg.sh");
  }
  return c;
}

PGconn *pg_sql_connect(void)
{
  PGconn *conn = PQconnectdb(pg_sql_conninfo());
  if (PQstatus(conn) != CONNECTION_OK) {
    fail_msg("connecting to %s: %s", pg_sql_conninfo(), PQerrorMessage(conn));
  }
  return conn;
}

PGresult *pg_sql(PGconn *conn, const char *q)
{
  PGresult *res = PQexec(conn, q);
  ExecStatusType st = PQresultStatus(res);
  if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK) {
    fail_msg("%s: %s", q, PQerrorMessage(conn));
  }
  return res;
}

int64_t pg_sql_value(const char *q)
{
  PGconn *conn = pg_sql_connect();
  PGresult *res = pg_sql(conn, q);
  if (PQntuples(res) == 0) {
    fail_msg("%s: no row", q);
  }
  int64_t v = strtoll(PQgetvalue(res, 0, 0), NULL, 10);
  PQclear(res);
  PQfinish(conn);
  return v;
}
