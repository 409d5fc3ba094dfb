/* pgstore.h - a partition store in a PostgreSQL database (libpq): the
 * batches of one partition are rows of cairn_batches, keyed by (topic id,
 * partition, base offset), holding the stamped batch bytes exactly as plog
 * writes them. Same contract as plog (store.h), with these differences:
 *
 *   - durability is a COMMIT: durable_offset is what PostgreSQL has
 *     committed. Without a loop, appends, truncations and deletions run in
 *     a transaction the store keeps open and store_flush() commits it;
 *     with one, appends are written behind (below);
 *   - truncate, delete_before and retention commit at once (they are rare,
 *     and a restart must never see rows a Raft truncation removed);
 *   - a read returns at most PGSTORE_READ_MAX_BATCHES batches and
 *     PGSTORE_READ_MAX_BYTES bytes (besides max_bytes; the first batch is
 *     always whole), served from a bounded in-memory tail of the newest
 *     batches when it holds the offset (the tail holds at least every
 *     batch not committed), otherwise from the database through the
 *     store's reader (pgreader.h): with a loop, such a read, a lookup by
 *     time and retention answer from what a job on the thread pool found,
 *     and CAIRN_EPENDING while it runs (below);
 *   - retention deletes rows, oldest first, by size and by the rows'
 *     max_timestamp; segments is always 1.
 *
 * Failure: any failed statement (connection lost, statement timeout, disk
 * full on the database side) rolls back what was not committed and latches
 * the store fatal (CAIRN_EFATAL from then on, reads included; info.fatal
 * set, next_offset back at durable_offset; errmsg names the statement and
 * PostgreSQL's message). Nothing is lost: what was not
 * committed is above durable_offset, which the Raft log still covers; the
 * owner revives the store when the database is back (pgstore_revive_*:
 * a fresh connection made off the loop, the state reloaded from the rows
 * PostgreSQL committed) and replays the Raft entries above last_index.
 *
 * Except a connection lost between transactions (nothing pending: the
 * server restarted a backend, a proxy dropped it while idle): the store
 * connects again at once, within PGSTORE_RECONNECT_MS on the caller's
 * thread (up to PGSTORE_RECONNECT_TRIES connections when each new one is
 * lost at once), checks that the partition's rows still end where it
 * committed, and runs the statement again; only if that fails does it
 * latch fatal.
 *
 * Written behind (opts.loop set, what a replica uses): an append touches
 * no database. It stamps the batches into the tail, which then holds
 * every batch PostgreSQL has not committed (the tail trims only committed
 * batches, so reads see everything applied), and hands them to the loop's
 * writer (pgwriter.h): once per loop turn, one transaction with one COPY
 * for the batches of every store on that loop and database, on the thread
 * pool. durable_offset / durable_index advance when that commit is
 * reported back on the loop; a Raft snapshot's descriptor is made only
 * once they cover what it describes (a settle, pgstore_settle_*), so the
 * Raft log still covers every batch PostgreSQL lacks. A failed transaction latches
 * every store in it fatal and calls opts.on_fatal: the owner revives the
 * store, which reloads the committed rows, and replays Raft above them.
 * store_flush never waits on the loop: when rows below its target are not
 * committed it answers CAIRN_EPENDING (the writer's next job, or the one
 * in flight, commits them) and calls opts.on_durable once the writer's
 * commit reaches the target. store_close never waits either (pgstore_open).
 * delete_before within the log (offset <= next: a DeleteRecords applied)
 * moves the start in memory and answers 0: reads below it are refused at
 * once, store_info's saved_start_offset stays where the partition row
 * is, and the rows go at the owner's next store_retention, as far as its
 * below allows (the retention delete moves the row's start with them);
 * a reopen finds the saved start, so the owner keeps what asked for the
 * move (the command in its Raft log or snapshot) until saved_start_offset
 * has reached it.
 * truncate, and delete_before and reset above the log's end (a snapshot
 * install, a catch-up to an emptied log: reset keeps the Raft index
 * asked in the partition row's prefix_index) answer CAIRN_EPENDING and run as a job on the
 * loop's thread pool over the store's connection, in one transaction: the
 * batches PostgreSQL lacks, then the cut or delete, then COMMIT; the job
 * starts (from the call, or the same call asked again) only when no job of
 * the writer holds the store's rows and no job of the reader runs, and
 * until it ends the writer collects nothing of the store and appends are
 * refused (-EBUSY); its end calls opts.on_durable (ask again: 0, or once
 * its refusal such as CAIRN_EINVAL; a database failure latches the store
 * and calls on_fatal instead). A close meanwhile is finished by the job's
 * end; a revive is refused (-EBUSY) while a job of the writer holds rows
 * of the store, or a settle or op job runs.
 *
 * Never blocking the loop on a read (opts.loop set): a read that misses
 * the tail, a lookup by time, retention_point and retention start a job
 * of the store's reader (its own connection, on the thread pool) and
 * return at once: store_read and store_lookup_time with CAIRN_EPENDING,
 * retention_point with the start (nothing due yet), retention with 0
 * deleted. When the job ends, on the loop, the store applies a retention
 * delete to its state and calls opts.on_readable; the caller asks again
 * and is answered from the reader's bounded cache. A failed read or
 * lookup is answered once with CAIRN_EDATABASE (the store is not latched:
 * nothing it holds is in question); a failed retention delete latches
 * the store fatal (its COMMIT may or may not have happened) and calls
 * on_fatal. store_read_wait (a caller that may block: the producer
 * table's rebuild at open) runs the reader's statement on the caller's
 * thread instead. truncate and delete_before without a loop, and a
 * revive, cancel the reader's job in flight first (PQcancel; they block
 * until it has ended, which a cancel makes short) so that no job races
 * the rows they change, and drop what it cached; written behind, truncate and delete_before wait
 * for it instead (CAIRN_EPENDING until it has ended), and a settle before
 * a snapshot runs off the loop (pgstore_settle_*).
 *
 * Blocking, without a loop: every store call is a synchronous round trip
 * to the database on the caller's thread (libpq's blocking API; the
 * reader's jobs run at once, and retention commits the store's open
 * transaction first so that the reader's connection sees every row); only
 * a revive's connection (pgstore_revive_run) is meant for another
 * thread. */
#ifndef CAIRN_PGSTORE_H
#define CAIRN_PGSTORE_H

#include "storage/pgreader.h"
#include "storage/store.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#define PGSTORE_READ_MAX_BATCHES PGREADER_MAX_BATCHES
#define PGSTORE_READ_MAX_BYTES PGREADER_MAX_BYTES
#define PGSTORE_DEFAULT_TAIL_BYTES (4u << 20)
/* Bytes a written-behind store holds that PostgreSQL has not committed
 * (opts.loop set): above, append latches the store fatal (CAIRN_EDB_BEHIND)
 * and its owner revives it once the writer's job has ended. */
#define PGSTORE_DEFAULT_PENDING_BYTES (64u << 20)

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
  bool commit_each_append;  /* without loop: commit at the end of every append;
                               false: at store_flush */
  /* Non-NULL: appends are written behind (pgwriter.h) by the writer this
   * loop shares for this database; commit_each_append is then ignored.
   * Every call on the store is then made on this loop's thread. */
  uv_loop_t *loop;
  size_t pending_bytes;     /* with loop: the bound on uncommitted bytes; 0: default */
  /* With loop: called when the writer's transaction holding this store's
   * batches failed and the store latched fatal (never from inside a call
   * on the store). The owner revives the store. May be NULL. */
  void (*on_fatal)(void *arg);
  void *on_fatal_arg;
  /* With loop: a job of the store's reader ended, so a read or lookup
   * that got CAIRN_EPENDING may now be answered (wake the waiting
   * fetches, as an append does). Fires on the loop, never from inside a
   * call on the store except truncate, delete_before and a revive (which
   * end the job in flight). May be NULL. */
  void (*on_readable)(void *arg);
  void *on_readable_arg;
  /* With loop: a store_flush that answered CAIRN_EPENDING is done (the
   * writer committed up to its target; ask again: 0). Fires on the loop,
   * never from inside a call on the store; a failure calls on_fatal
   * instead, and a settle (pgstore_settle_end, or inside truncate or
   * delete_before) satisfies the flush without it. May be NULL. */
  void (*on_durable)(void *arg);
  void *on_durable_arg;
  size_t read_cache_bytes; /* the reader's cache bound; 0: PGREADER_DEFAULT_CACHE_BYTES */
};

/* Connects, brings the schema up to date (pgstore_schema.h; refuses a
 * database whose version is newer than this build knows) and loads the
 * partition's state (start, next, last Raft index) from its rows. On
 * success *out is owned by the caller (free with store_close(), which
 * commits what is pending without a loop; written behind it never waits:
 * the writer's job in flight commits on its own, and what was not sent is
 * left to the owner's Raft replay at the next open). Returns 0 or a negative code (CAIRN_EDATABASE when
 * the database cannot be reached or a statement fails, CAIRN_ESCHEMA
 * for an unknown schema version) with err filled. Context: any thread; the
 * store then belongs to that thread. */
__attribute__((warn_unused_result)) int pgstore_open(const struct pgstore_opts *o,
                                                     struct store **out, char *err, size_t errlen);

/* pgstore_open in two halves, so that an owner on a loop can run the half
 * that waits on the database on the thread pool:
 *
 * pgstore_open_begin: connects, migrates and loads (everything that talks
 * to PostgreSQL); reads only the connection, topic, retention and size
 * fields of o (no loop, no callbacks). Context: any thread. On success
 * *out is an unfinished store: give it to pgstore_open_end on the thread
 * that will own it, or free it with pgstore_open_abandon.
 *
 * pgstore_open_end: takes o's callbacks, sets up the reader and joins
 * o->loop's writer (neither talks to the database on the caller's thread).
 * Context: the loop thread when o->loop is set. On failure s is freed.
 * Returns 0 or a negative code with err filled, as pgstore_open. */
__attribute__((warn_unused_result)) int pgstore_open_begin(const struct pgstore_opts *o,
                                                           struct store **out, char *err,
                                                           size_t errlen);
__attribute__((warn_unused_result)) int pgstore_open_end(struct store *s,
                                                         const struct pgstore_opts *o, char *err,
                                                         size_t errlen);

/* Frees a store pgstore_open_begin made that will not be finished, without
 * a statement (the connection is closed). Context: any thread. */
void pgstore_open_abandon(struct store *s);

/* ---- a settle off the loop ----
 *
 * Written behind, a Raft snapshot (raft 0.15 snapshots at its last
 * applied index, right after an apply the writer has not committed yet)
 * needs everything applied committed before Raft drops the entries. A
 * settle commits it on the store's own connection off the loop, in three
 * steps as plog_sync_* (rgroup_fsm.c: capture, snapshot_async, finalize):
 *   begin (owner)  copies the batches PostgreSQL lacks ([durable, next))
 *                  into a job; from then until end the writer collects
 *                  nothing of s (so no later row commits before these)
 *                  and the store's connection is the job's;
 *   run (any)      BEGIN, the rows, COMMIT (a connection lost while idle
 *                  is made again first, as pgstore_reconnect); blocks;
 *                  touches only the job;
 *   end (owner)    committed: durable_offset / durable_index reach what
 *                  next / last_index were at begin; failed: the store
 *                  latches fatal (its COMMIT may or may not have happened:
 *                  the revive reads back); never run: the rows go back to
 *                  the writer. Then the writer takes what was applied
 *                  meanwhile.
 * While a settle runs, truncate and delete_before wait (CAIRN_EPENDING:
 * ask again) and a revive is refused; s must not be closed before end. */
struct pgstore_settle;

/* Starts a settle of s. Returns 0 with *out (pass it to
 * pgstore_settle_end exactly once), -EBUSY (a job of the writer holds rows
 * of s, a settle runs, or s has no writer: nothing done), CAIRN_EFATAL or
 * CAIRN_ENOMEM. Context: s's owner. */
__attribute__((warn_unused_result)) int pgstore_settle_begin(struct store *s,
                                                             struct pgstore_settle **out);

/* Writes and commits the job's rows; a connection lost before COMMIT
 * (the transaction died with it) is made again and the rows sent once
 * more. Returns 0 or the failure (CAIRN_EDATABASE). Blocks. Context: any one thread, at most once
 * per job, while the owner does not end it. */
int pgstore_settle_run(struct pgstore_settle *job);

/* Applies the job's outcome to its store (see above) and frees the job.
 * Returns 0, the run's failure (the store fatal), CAIRN_ESYNC_CANCELED
 * (it never ran: nothing changed) or CAIRN_EFATAL (the store latched
 * meanwhile). Context: the store's owner. */
int pgstore_settle_end(struct pgstore_settle *job);

/* ---- reviving a fatal store ----
 *
 * After a failed statement the store is fatal. Its owner revives it in
 * three steps, so that the (possibly slow) connection is made off the
 * owner's thread:
 *   begin (owner)  copies what a connection needs (connection string,
 *                  password file, topic, partition) into a job;
 *   run (any)      connects, checks the schema and reads the partition's
 *                  committed state (start, next, last Raft index, size)
 *                  into the job, then proves the database takes a write
 *                  (a rolled-back transaction that takes cairn_batches'
 *                  write lock and extends a file in its tablespace: a full
 *                  disk, a lock held or a statement timeout fails it, so
 *                  the owner does not apply again while they last);
 *                  blocks; touches only the job;
 *   end (owner)    on success the store takes the job's connection and
 *                  state (its tail starts empty: it may hold rows a failed
 *                  transaction rolled back) and is no longer fatal; on
 *                  failure it stays fatal with the job's message.
 * What the store had applied above the committed state is gone from it:
 * the owner applies those Raft entries again (the store refuses none,
 * since last_index is the committed one), so nothing is duplicated and
 * nothing skipped. */
struct pgstore_revive;

/* Starts a revive of s, which must be a fatal pgstore. *out is owned by
 * the caller, who passes it to pgstore_revive_end() exactly once. Returns
 * 0, CAIRN_EINVAL (s is not fatal), -EBUSY (written behind: a job of the
 * writer still holds rows of s; try again later) or CAIRN_ENOMEM.
 * Context: s's owner. */
__attribute__((warn_unused_result)) int pgstore_revive_begin(struct store *s,
                                                             struct pgstore_revive **out);

/* Connects and loads (see above). Returns 0 or the failure
 * (CAIRN_EDATABASE, CAIRN_ESCHEMA, CAIRN_ECONFIG). Blocks. Context: any
 * one thread, at most once per job, while the owner does not touch job. */
int pgstore_revive_run(struct pgstore_revive *job);

/* Applies the job's outcome to s (see above) and frees the job; s NULL
 * just frees it (the store closed meanwhile). Returns the run's status
 * (CAIRN_EDATABASE if it never ran); on failure store_errmsg(s) says why.
 * Context: s's owner. */
int pgstore_revive_end(struct store *s, struct pgstore_revive *job);

#endif
