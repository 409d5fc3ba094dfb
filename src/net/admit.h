/* admit.h - admission control at the client ports: while the bytes queued
 * to any peer node on its watch connection (every partition's Raft traffic
 * and the coalesced beats, cluster/nodewatch.h) are above ADMIT_HIGH_BYTES,
 * the client and Kafka ports read no new request (the shared request
 * budget is held, net/rbudget.h); they read again once every such queue is
 * below ADMIT_LOW_BYTES.
 *
 * Why: the queue to a peer is what a produce fills. Left to grow, it
 * delays every Raft message behind it, heartbeats and answers included: at
 * 10,000 partitions a queue of 16 MiB (RAFTMUX_SENDQ_MAX) took longer to
 * drain than the election timeout, leaders stepped down and followers
 * elected by the thousand, and the mux dropped what did not fit
 * (docs/performance.md, "Admission control"). Holding the reads instead
 * keeps the queue, and so the delay, near ADMIT_HIGH_BYTES, and lets the
 * TCP window carry the backpressure to the producers, as Kafka's muted
 * channels do. Requests already read are served; a frame begun on a held
 * conn is not timed out for it (waiting is not trickling: conn.h). The
 * idle timeout (--idle-timeout-ms, 10 min by default) still runs, far above
 * any hold measured (docs/performance.md).
 *
 * States: ADMIT_OPEN -(a queue above high)-> ADMIT_HELD
 *         ADMIT_HELD -(every queue below low)-> ADMIT_OPEN
 * looked at once per loop iteration, after the loop has polled (uv_check:
 * a queue drains in the write callbacks the poll runs).
 *
 * Context: loop thread only. */
#ifndef CAIRN_ADMIT_H
#define CAIRN_ADMIT_H

#include "net/rbudget.h"

#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#define ADMIT_HIGH_BYTES (4u << 20) /* a queue to a peer above this holds the reads */
#define ADMIT_LOW_BYTES (1u << 20)  /* every queue below this: reading again */

enum admit_state { ADMIT_OPEN, ADMIT_HELD };

/* The most bytes queued to any one peer now (the node passes
 * nwatch_queued_max of its watch connections). */
typedef size_t (*admit_queued_cb)(void *data);

struct admit {
  uv_check_t check;
  admit_queued_cb queued;
  void *queued_data;
  struct rbudget *budget; /* borrowed: the ports' request budget */
  enum admit_state state;
  uint64_t held_since_ns; /* uv_hrtime() when the reads were held */
  /* Counters (metrics). */
  uint64_t holds;       /* times the reads were held */
  uint64_t held_ns;     /* total time held, the current hold excluded */
  uint64_t peak_queued; /* the largest queue to a peer seen */
};

/* Starts looking at the queues (queued(data)) every loop iteration,
 * holding b's reads as above. Ownership: a is the caller's until its
 * handle's close callback; borrows b and data, which must outlive it;
 * a->check.data is left to the caller. */
void admit_start(uv_loop_t *loop, struct admit *a, admit_queued_cb queued, void *data,
                 struct rbudget *b);

/* The handle, for the owner to uv_close() when it stops (the budget is
 * released first: conns still open read again). */
uv_handle_t *admit_stop(struct admit *a);

/* The time spent held so far, the current hold included, in seconds. */
double admit_held_seconds(const struct admit *a);

#endif
