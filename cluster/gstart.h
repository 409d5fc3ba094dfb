/* gstart.h - opens many Raft groups a few at a time between loop
 * iterations, so that a node starting (or creating) hundreds of partition
 * replicas keeps serving the groups already open: their heartbeats, votes
 * and appends run between the opens instead of after all of them.
 *
 * A group open is synchronous work on the loop thread (rgroup_open: the
 * partition log's recovery, raft's directory scan and I/O probe), from
 * ~1 ms to tens of ms each (docs/replication.md, per-group cost); cairnd's
 * partitions start the log's part on the thread pool from their turn
 * (partitions.h, PARTS_LOG_OPENS_OFF_LOOP). The
 * starter queues jobs in order and, at each loop iteration, runs queued jobs
 * until budget_ms has been spent (at least one), then lets the loop poll
 * for I/O and timers before the next batch.
 *
 * Lifecycle: gstart_init -> push jobs (any time) -> gstart_close(cb): jobs
 * not yet run are called with CAIRN_ESHUTDOWN, then cb.
 *
 * Context: loop thread only. */
#ifndef CAIRN_GSTART_H
#define CAIRN_GSTART_H

#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

#define GSTART_DEFAULT_BUDGET_MS 10

struct gstart;
struct gstart_job;

/* A job's turn. status 0: run it now (open the group). CAIRN_ESHUTDOWN: the
 * starter closed before its turn; do not. */
typedef void (*gstart_job_cb)(struct gstart_job *job, int status);
typedef void (*gstart_close_cb)(struct gstart *gs);

/* One queued open; the caller allocates it and keeps it until its
 * callback. */
struct gstart_job {
  void *data; /* for the caller */
  /* private */
  gstart_job_cb cb;
  struct gstart_job *next;
};

struct gstart {
  uv_loop_t *loop;
  uv_idle_t idle;
  uint64_t budget_ns;
  struct gstart_job *head, *tail;
  unsigned queued;
  uint64_t run;   /* jobs run so far */
  uint64_t turns; /* loop iterations that ran jobs */
  bool closing;
  gstart_close_cb close_cb;
};

/* Initializes a starter on loop that spends at most budget_ms (0: the
 * default) per loop iteration on jobs. Caller allocates gs. Returns 0 or a
 * negative code (nothing to close then). */
__attribute__((warn_unused_result)) int gstart_init(struct gstart *gs, uv_loop_t *loop,
                                                    unsigned budget_ms);

/* Queues job behind the jobs already queued. Borrows job until its callback,
 * which fires exactly once if this returns 0, in a later loop iteration
 * (never from inside gstart_push); never if it fails. Returns 0 or
 * CAIRN_ECLOSED (the starter is closing). */
__attribute__((warn_unused_result)) int gstart_push(struct gstart *gs, struct gstart_job *job,
                                                    gstart_job_cb cb);

/* Jobs queued and not yet run. */
unsigned gstart_queued(const struct gstart *gs);

/* Calls every job not yet run with CAIRN_ESHUTDOWN (in order), closes the
 * starter's handle, then cb (may be NULL). May be called from a job's
 * callback: no further job runs in that turn. Callback: fires exactly once,
 * in a later loop iteration. */
void gstart_close(struct gstart *gs, gstart_close_cb cb);

#endif
