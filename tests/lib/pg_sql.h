/* pg_sql.h - the test programs' side of a private PostgreSQL server
 * (tests/lib/with_pg.sh sets CAIRN_PG_CONNINFO): a connection string, a
 * connection and a statement that fail the running cmocka test on any
 * error. Context: a cmocka test's thread. */
#ifndef CAIRN_TEST_PG_SQL_H
#define CAIRN_TEST_PG_SQL_H

#include <libpq-fe.h>
#include <stdint.h>

/* CAIRN_PG_CONNINFO; fails the test when it is not set. */
const char *pg_sql_conninfo(void);

/* A new connection (free with PQfinish); fails the test on an error. */
PGconn *pg_sql_connect(void);

/* Runs q; returns its result (free with PQclear); fails the test unless q
 * succeeded. */
PGresult *pg_sql(PGconn *conn, const char *q);

/* The first column of q's first row as a number, on a connection of its
 * own; fails the test on an error. */
int64_t pg_sql_value(const char *q);

#endif
