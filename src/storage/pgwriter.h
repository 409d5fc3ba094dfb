/* pgwriter.h - writes the batches of PostgreSQL stores behind the loop:
 * one writer per (loop, database), shared by every pgstore opened on that
 * loop with that connection string. Once per loop turn (a uv_idle started
 * by pgwriter_ready) it gathers the batches its members have not sent yet
 * into one job, and runs the job on the thread pool over the writer's own
 * connection: BEGIN; COPY cairn_batches FROM STDIN (FORMAT binary);
 * COMMIT. One job is in flight at a time; what members hand over meanwhile
 * goes into the next one. The job's outcome goes back to each member on
 * the loop: committed (its durable offset advances) or failed (every member
 * in the job latches fatal; its owner revives it).
 *
 * Happy path:  pgstore_append -> pgwriter_ready -> (idle) collect from
 *              every ready member -> (thread pool) BEGIN/COPY/COMMIT ->
 *              (loop) done(0) to every member of the job.
 * Failure:     a statement fails or the connection drops: ROLLBACK (or the
 *              connection is dropped and made again for the next job), and
 *              done(err) to every member of the job. A COMMIT whose
 *              outcome is unknown is reported as failed: the member's
 *              revive reloads what PostgreSQL holds.
 * Lost idle:   a connection that dropped between jobs (BEGIN fails on a
 *              bad connection) is made again once and BEGIN runs again:
 *              nothing was sent, nothing is lost.
 * Lost in COPY: a connection lost after BEGIN and before COMMIT took the
 *              transaction with it: the job is sent once more (BEGIN on a
 *              new connection, COPY); a second loss fails it.
 *
 * Threading: everything here is called on the loop thread; the job's
 * statements run on a thread-pool worker that touches only the job and
 * the writer's connection. */
#ifndef CAIRN_PGWRITER_H
#define CAIRN_PGWRITER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

/* How long a job's worker may take to connect before the job fails. */
#define PGWRITER_CONNECT_MS 5000

struct pgwriter;
struct pgwriter_job;
struct pgwriter_member;

struct pgwriter_member_ops {
  /* Adds the member's batches not sent yet to job (pgwriter_job_add).
   * Returns 0 or a negative code (the job then goes without them and the
   * member is told done(code) with it). Context: loop. */
  int (*collect)(struct pgwriter_member *m, struct pgwriter_job *job);
  /* The job holding what collect added ended: status 0 committed, or
   * the failure with msg (borrowed for the call). Fires exactly once per
   * successful collect. Context: loop. */
  void (*done)(struct pgwriter_member *m, int status, const char *msg);
};

/* Embedded in its owner (a pgstore); the writer borrows it between
 * pgwriter_join and pgwriter_leave. */
struct pgwriter_member {
  const struct pgwriter_member_ops *ops;
  /* private */
  struct pgwriter_member *next_ready;
  bool ready;    /* in the writer's ready list */
  bool inflight; /* has rows in the job in flight */
};

/* The writer for (loop, conninfo, password_file), made on first use and
 * shared: each call takes a reference (pgwriter_release). The connection is
 * made by the first job, on the thread pool. Returns 0 or CAIRN_ENOMEM /
 * a libuv error. Borrows the strings. Context: the loop's thread. */
__attribute__((warn_unused_result)) int pgwriter_acquire(uv_loop_t *loop, const char *conninfo,
                                                         const char *password_file,
                                                         struct pgwriter **out);

/* Drops a reference; the last one closes the writer (its handle closes on
 * the loop; a job's after-work still queued is waited for). Every member
 * must have left. Context: loop. */
void pgwriter_release(struct pgwriter *w);

/* Makes m a member (borrowed until pgwriter_leave). Context: loop. */
void pgwriter_join(struct pgwriter *w, struct pgwriter_member *m, const struct pgwriter_member_ops *ops);

/* m has batches to send: they go into the job of the next loop turn (or
 * the one after the job in flight). Context: loop. */
void pgwriter_ready(struct pgwriter *w, struct pgwriter_member *m);

/* m is no longer a member, at once: if it has rows in the job in flight
 * the job goes on without it (those rows commit or not; m's done is not
 * called), so leaving never waits for the database. Context: loop. */
void pgwriter_leave(struct pgwriter *w, struct pgwriter_member *m);

/* Adds one row of cairn_batches to job, copying data. Returns 0 or
 * CAIRN_ENOMEM. Context: loop, from a collect callback. */
__attribute__((warn_unused_result)) int pgwriter_job_add(struct pgwriter_job *job, int64_t topic_id,
                                                         int32_t partition, int64_t base_offset,
                                                         int64_t last_offset, int64_t max_timestamp,
                                                         uint64_t raft_index, const uint8_t *data,
                                                         size_t len);

/* Jobs run and transactions committed since the writer was made (for
 * tests and metrics). Context: loop. */
uint64_t pgwriter_commits(const struct pgwriter *w);

#endif
