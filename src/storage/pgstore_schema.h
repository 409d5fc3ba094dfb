/* pgstore_schema.h - the PostgreSQL schema Cairn owns for pgstore
 * (docs/format.md, "The PostgreSQL store"): versioned migrations recorded
 * in cairn_schema_version, applied in order under an advisory lock so that
 * nodes sharing a database migrate it once. */
#ifndef CAIRN_PGSTORE_SCHEMA_H
#define CAIRN_PGSTORE_SCHEMA_H

#include <libpq-fe.h>
#include <stdbool.h>
#include <stddef.h>

/* The newest schema version this build knows. */
#define PGSTORE_SCHEMA_VERSION 1

/* Brings the database conn is connected to up to PGSTORE_SCHEMA_VERSION,
 * in one transaction. Returns 0; CAIRN_ESCHEMA if the database is at a
 * version this build does not know (a newer Cairn migrated it: nothing is
 * changed); CAIRN_EDATABASE if a statement fails. err is filled on failure.
 * Borrows conn, which must be idle (no transaction open). Context: the
 * thread that owns conn; blocks on the database. */
__attribute__((warn_unused_result)) int pgstore_schema_migrate(PGconn *conn, char *err,
                                                               size_t errlen);

/* Connects to the database conninfo names (a libpq connection string or
 * URI), with the first line of password_file as the password (NULL:
 * libpq's own, PGPASSWORD or PGPASSFILE), within timeout_ms (0: as long
 * as libpq takes, its connect_timeout if the string sets one). On success
 * *out is owned by the caller (free with PQfinish). Returns 0,
 * CAIRN_ECONFIG (the password file), CAIRN_ENOMEM or CAIRN_EDATABASE, with
 * err filled. Borrows everything. Context: any thread; blocks. */
__attribute__((warn_unused_result)) int pgstore_schema_connect(const char *conninfo,
                                                               const char *password_file,
                                                               int timeout_ms, PGconn **out,
                                                               char *err, size_t errlen);

/* Did the statement whose failed result is res (NULL: none) lose the
 * connection? True when libpq has marked conn bad, and also when the
 * server ended the session with the error itself (severity FATAL or
 * PANIC, or SQLSTATE class 08 or 57P: pg_terminate_backend, a restart):
 * libpq returns that error as the statement's result before it has read
 * the end of the stream, so PQstatus can still say CONNECTION_OK. A
 * caller that had nothing pending on conn may connect again and retry.
 * Borrows both. Context: the thread that owns conn. */
bool pgstore_schema_conn_lost(PGconn *conn, const PGresult *res);

#endif
