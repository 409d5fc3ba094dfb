/* pgreader.h - the statements of one pgstore that are not appends, off
 * the loop: reads below the store's in-memory tail, lookups by time and
 * retention (its scan, and its delete), each run as a job on the thread
 * pool over the reader's own connection, whose result the store picks up
 * when the caller asks again.
 *
 * Why: a slow or locked database must never stall the loop (every
 * partition and client of the node share it). A read that misses the
 * tail answers CAIRN_EPENDING at once and starts a job; when the job ends
 * the owner is told (opts.on_done, on the loop), wakes its waiting
 * fetches (as an append does) and they ask again: the answer then comes
 * from the reader's cache, a bounded window of the rows read.
 *
 * Happy path:  pgreader_read (miss) -> job queued, CAIRN_EPENDING ->
 *              (thread pool) SELECT -> (loop) cache filled, on_done ->
 *              pgreader_read (hit) -> the bytes.
 * Failure:     a statement fails or the connection drops: the job's
 *              error is kept and the next call asking for the same thing
 *              gets it once (CAIRN_EDATABASE with the message), then asks
 *              again; a connection lost while idle is made again once.
 *              A failed retention delete is reported to the store, which
 *              latches fatal (PostgreSQL may or may not have committed it:
 *              its revive reloads the start).
 * Staleness:   pgreader_invalidate (a truncation, a snapshot install, a
 *              revive) drops the cache and every result of a job started
 *              before it (a generation number).
 *
 * Memory: the cache holds at most cache_bytes (one batch more when a
 * single batch is larger); a job holds at most that, or PGREADER_SCAN_ROWS
 * rows of a lookup.
 *
 * Without a loop (opts.loop NULL) a job runs at once on the caller's
 * thread and every call answers directly: never CAIRN_EPENDING.
 *
 * Threading: every call on the loop thread (or the owner's thread without
 * a loop); a job's worker touches only the job and the reader's
 * connection, which nothing else uses while a job runs. */
#ifndef CAIRN_PGREADER_H
#define CAIRN_PGREADER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

/* libpq's PGconn, declared here so that including this header (through
 * pgstore.h and rgroup.h, everywhere) does not need libpq's headers. */
struct pg_conn;

#define PGREADER_DEFAULT_CACHE_BYTES (4u << 20)
#define PGREADER_SCAN_ROWS 256   /* rows of a retention scan per statement */
#define PGREADER_LOOKUP_ROWS 32  /* rows (with their bytes) of a lookup per statement */
#define PGREADER_CONNECT_MS 5000 /* a job's worker connecting */
#define PGREADER_MAX_BATCHES 64  /* a region's batches (besides max_bytes) */
#define PGREADER_MAX_BYTES (1u << 20)
/* Jobs of the readers of one loop running at once: the thread pool (4
 * workers unless UV_THREADPOOL_SIZE says more) also runs the node's Raft
 * log writes and the writer's COPY, which a locked table holding every
 * worker would stall. */
#define PGREADER_MAX_JOBS 2

struct pgreader;

enum pgreader_job_kind { PGREADER_READ, PGREADER_LOOKUP, PGREADER_SCAN, PGREADER_RETAIN };

/* What a retention delete did (pgreader_retain): the rows below start are
 * gone and the partition row says so. */
struct pgreader_retained {
  int64_t start;         /* the new log start */
  uint64_t prefix_index; /* raft_index of the newest row deleted */
  uint64_t bytes;        /* of the rows deleted */
  uint32_t count;        /* rows deleted */
};

struct pgreader_opts {
  const char *conninfo;      /* borrowed for the call */
  const char *password_file; /* NULL: libpq's own */
  uint32_t topic_id;
  int32_t partition;
  size_t cache_bytes; /* 0: PGREADER_DEFAULT_CACHE_BYTES */
  uv_loop_t *loop;    /* NULL: jobs run at once on the caller's thread */
  /* A job ended and its result is in (never from inside a call on the
   * reader when it has a loop; without one, from inside the call that ran
   * it). For a PGREADER_RETAIN job that deleted rows or moved the start, retained says what
   * (NULL otherwise); status is the job's outcome, msg (borrowed for the
   * call) its failure. May be NULL. */
  void (*on_done)(void *arg, enum pgreader_job_kind kind, int status, const char *msg,
                  const struct pgreader_retained *retained);
  void *arg;
};

/* Makes a reader; its connection is made by its first job. On success *out
 * is owned by the caller (free with pgreader_free). Returns 0 or
 * CAIRN_ENOMEM. Context: the owner's thread. */
__attribute__((warn_unused_result)) int pgreader_new(const struct pgreader_opts *o,
                                                     struct pgreader **out);

/* Frees the reader. A job in flight has its statement canceled and is
 * left to end on the thread pool (its after-work frees what remains; no
 * callback fires). Context: the owner's thread. */
void pgreader_free(struct pgreader *r);

/* Whether a region of count batches and len_so_far bytes takes one more
 * of len bytes within max_bytes and the reader's bounds (the first batch
 * always goes). The rule pgstore's tail reads follow too. */
bool pgreader_fits(size_t count, size_t len_so_far, size_t len, size_t max_bytes);

/* Batches read: whole ones, back to back. */
struct pgreader_slice {
  const uint8_t *data; /* borrowed: valid until the next call on the reader */
  size_t len;
  size_t count;  /* batches */
  int64_t first; /* base offset of the first */
  int64_t next;  /* the offset after the last */
};

/* The whole batches from the one holding offset, within max_bytes
 * (pgreader_fits) and ending at or below end (where the caller's own
 * batches start), from the cache: 0 with *out set; the slice stops short
 * of the bounds only at end. Otherwise CAIRN_EPENDING (a job will load
 * offset; ask again after on_done), or the failure of the job that loaded
 * offset (CAIRN_EDATABASE, CAIRN_ECORRUPT: no row holds it, CAIRN_ENOMEM)
 * with err filled, once. */
__attribute__((warn_unused_result)) int pgreader_read(struct pgreader *r, int64_t offset,
                                                      size_t max_bytes, int64_t end,
                                                      struct pgreader_slice *out, char *err,
                                                      size_t errlen);

/* The first offset at or after start whose record's timestamp is >=
 * timestamp, among the rows PostgreSQL had committed: 1 with *offset set,
 * or 0 when no row has one, with *scanned set to an offset below which
 * every row was looked at (the caller looks at its batches from there on).
 * Otherwise CAIRN_EPENDING, or a job's failure with err filled (once).
 * committed: the caller's durable offset now (rows below it exist). */
__attribute__((warn_unused_result)) int pgreader_lookup_time(struct pgreader *r, int64_t timestamp,
                                                             int64_t start, int64_t committed,
                                                             int64_t *offset, int64_t *scanned,
                                                             char *err, size_t errlen);

/* The limits and bounds of a retention pass (store.h's store_retention). */
struct pgreader_retention {
  int64_t now_ms;
  int64_t below;            /* no row holding an offset at or above it goes */
  uint64_t retention_bytes; /* 0: no limit */
  int64_t retention_ms;     /* 0: no limit */
  uint64_t size_bytes;      /* of the rows now */
  int64_t start;            /* the log start the partition row holds now */
  /* The start moves at least this far (a DeleteRecords moved the store's
   * start in memory: pgstore.h), whatever the limits say; the caller
   * keeps it at or below below. At or below start: no floor. */
  int64_t floor;
};

/* Where retention would move the start now (the start when nothing is
 * due), from a scan of the rows: 0 with *point set by a scan that ended
 * since the last call, CAIRN_EPENDING while one runs (one is started if
 * none does), or a scan's failure once. Deletes nothing. */
__attribute__((warn_unused_result)) int pgreader_scan(struct pgreader *r,
                                                      const struct pgreader_retention *rt,
                                                      int64_t *point, char *err, size_t errlen);

/* Starts deleting the rows retention allows (the same scan, then DELETE
 * and the partition row's new start, in one transaction) unless a job
 * runs. Its outcome goes to on_done (with retained). Returns 0 (started,
 * or run at once without a loop), CAIRN_EPENDING (a job runs: ask at the
 * next pass) or CAIRN_ENOMEM. */
__attribute__((warn_unused_result)) int pgreader_retain(struct pgreader *r,
                                                        const struct pgreader_retention *rt);

/* Drops the cache and the results of every job started before now (the
 * rows may have changed under them). Context: owner. */
void pgreader_invalidate(struct pgreader *r);

/* Cancels the statement of the job in flight, if any, and waits for its
 * worker; its outcome is delivered now (on_done fires before this
 * returns). For the store's own statements that change rows (truncate,
 * delete_before), so that no job races them. Blocks briefly. */
void pgreader_stop(struct pgreader *r);

/* Waits for the worker of the job in flight, if any, and delivers its
 * outcome now (on_done fires before this returns). For callers that may
 * block (store_read_wait). Blocks for as long as the database takes. */
void pgreader_wait(struct pgreader *r);

/* While on, jobs run at once on the caller's thread, as without a loop
 * (the pool's bound does not apply: no worker is taken), and calls
 * answer directly: for a caller that may block (store_read_wait), which
 * must not wait for a slot that only the loop it blocks would free.
 * Turning it on waits for the job in flight first. */
void pgreader_set_inline(struct pgreader *r, bool on);

/* Whether a job is in flight (tests). */
bool pgreader_busy(const struct pgreader *r);

/* The rows wholly below offset deleted and the partition row's start
 * moved there, in the transaction open on conn (the caller commits): for
 * retention's job and pgstore's own delete_before, so that the SQL is
 * written once. topic_id and partition as text. *out gets what went
 * (count 0: nothing; prefix_index is then prefix_before). Returns 0 or
 * CAIRN_EDATABASE with err filled. Context: the thread using conn. */
__attribute__((warn_unused_result)) int pgreader_delete_below(struct pg_conn *conn, const char *topic_id,
                                                              const char *partition, int64_t offset,
                                                              uint64_t prefix_before,
                                                              struct pgreader_retained *out,
                                                              char *err, size_t errlen);

#endif
