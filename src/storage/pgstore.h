/* pgstore.h - a partition store in a PostgreSQL database (libpq): the
 * batches of one partition are rows of cairn_batches, keyed by (topic id,
 * partition, base offset), holding the stamped batch bytes exactly as plog
 * writes them. Same contract as plog (store.h), with these differences:
 *
 *   - durability is a COMMIT: appends, truncations and deletions run in a
 *     transaction the store keeps open; store_flush() commits it, and
 *     durable_offset is what PostgreSQL has committed;
 *   - truncate, delete_before and retention commit at once (they are rare,
 *     and a restart must never see rows a Raft truncation removed);
 *   - a read returns at most PGSTORE_READ_MAX_BATCHES batches and
 *     PGSTORE_READ_MAX_BYTES bytes (besides max_bytes; the first batch is
 *     always whole), served from a bounded in-memory tail of the newest
 *     batches when it holds the offset, otherwise from the database;
 *   - retention deletes rows, oldest first, by size and by the rows'
 *     max_timestamp; segments is always 1.
 *
 * Failure: any failed statement (connection lost, statement timeout, disk
 * full on the database side) rolls back what was not committed and latches
 * the store fatal (CAIRN_EFATAL from then on, reads included; info.fatal
 * set, next_offset back at durable_offset; errmsg names the statement and
 * PostgreSQL's message). Nothing is lost: what was not
 * committed is above durable_offset, which the Raft log still covers; the
 * owner closes the store and reopens it when the database is back.
 *
 * Blocking: every call is a synchronous round trip to the database on the
 * caller's thread (libpq's blocking API). */
#ifndef CAIRN_PGSTORE_H
#define CAIRN_PGSTORE_H

#include "storage/store.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define PGSTORE_READ_MAX_BATCHES 64
#define PGSTORE_READ_MAX_BYTES (1u << 20)
#define PGSTORE_DEFAULT_TAIL_BYTES (4u << 20)

struct pgstore_opts {
  const char *conninfo; /* a libpq connection string or URI; borrowed for the call */
  const char *password_file; /* a file holding the password (its first line);
                                NULL: libpq's own (PGPASSWORD, PGPASSFILE) */
  const char *topic;    /* the topic's name, for the records view */
  uint32_t topic_id;    /* the metadata group's topic id */
  int32_t partition;
  uint64_t retention_bytes; /* 0: no limit */
  int64_t retention_ms;     /* 0: no limit */
  uint32_t max_batch_bytes; /* 0: BATCH_DEFAULT_MAX_BYTES */
  size_t tail_bytes;        /* bytes of newest batches kept in memory; 0: default */
  bool commit_each_append;  /* commit at the end of every append (a replica: SQL
                               readers see each Raft entry once applied, and
                               durable_offset follows); false: at store_flush */
};

/* Connects, brings the schema up to date (pgstore_schema.h; refuses a
 * database whose version is newer than this build knows) and loads the
 * partition's state (start, next, last Raft index) from its rows. On
 * success *out is owned by the caller (free with store_close(), which
 * commits what is pending). Returns 0 or a negative code (CAIRN_EDATABASE when
 * the database cannot be reached or a statement fails, CAIRN_ESCHEMA
 * for an unknown schema version) with err filled. Context: any thread; the
 * store then belongs to that thread. */
__attribute__((warn_unused_result)) int pgstore_open(const struct pgstore_opts *o,
                                                     struct store **out, char *err, size_t errlen);

#endif
