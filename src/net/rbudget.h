/* rbudget.h - a node-wide budget for request bytes received and not yet
 * answered (Kafka's queued.max.request.bytes): every conn of a port charges
 * the frames it holds to one budget, so that many connections each sending
 * a large frame slowly cannot take the machine's memory.
 *
 * Charging rules (conn.c applies them):
 *   - a frame larger than the conn's read buffer is read into a block of
 *     its size only once rbudget_take() grants that size; otherwise the
 *     conn stops reading and waits (rbudget_wait) until releases make room;
 *   - a frame that fits the read buffer (already allocated, so reading it
 *     costs nothing more) is charged with rbudget_force() when it becomes
 *     a request, and the conn stops reading while rbudget_over() says the
 *     budget is exceeded by more than a quarter: small requests keep
 *     flowing when large ones wait, yet their total stays bounded;
 *   - a request's charge is released when it is answered, a block's when
 *     its conn drops it.
 * Memory held by frames is therefore at most max * 5 / 4 plus one
 * read buffer per conn.
 *
 * Waiters are woken in FIFO order, from the releasing call's stack: a
 * waiter's callback must only schedule work (conn.c starts its kick timer).
 *
 * Context: loop thread only. */
#ifndef CAIRN_RBUDGET_H
#define CAIRN_RBUDGET_H

#include <stdbool.h>
#include <stdint.h>

struct rbudget_waiter;
typedef void (*rbudget_wake_cb)(struct rbudget_waiter *w);

/* Caller-allocated, embedded in the waiting object. */
struct rbudget_waiter {
  struct rbudget_waiter *prev, *next;
  rbudget_wake_cb cb;
  uint64_t need;    /* bytes wanted (0: only for the budget to be not over) */
  uint64_t granted; /* charged on the waiter's behalf when it was woken: the
                     * owner uses it or gives it back (rbudget_release) */
  bool queued;
};

struct rbudget {
  uint64_t max;
  uint64_t used;
  uint64_t peak;
  uint64_t waits; /* times a conn stopped reading for want of budget */
  bool held;      /* rbudget_hold: nothing granted, over whatever is used */
  struct rbudget_waiter *head, *tail;
};

/* Caller allocates b; max is the bound in bytes (> 0). */
void rbudget_init(struct rbudget *b, uint64_t max);

/* Charges n bytes if they fit under max; returns whether they did. */
bool rbudget_take(struct rbudget *b, uint64_t n);

/* Charges n bytes whatever the bound (a frame already in memory). */
void rbudget_force(struct rbudget *b, uint64_t n);

/* Whether the budget is exceeded by more than a quarter of max, or held. */
bool rbudget_over(const struct rbudget *b);

/* Holds the budget (held: rbudget_take grants nothing and rbudget_over is
 * true, so every conn stops reading new requests and waits), or lifts the
 * hold and wakes the waiters it can serve. For admission control
 * (net/admit.h): the request bytes themselves are not the limit then. */
void rbudget_hold(struct rbudget *b, bool held);

/* Gives n charged bytes back, then wakes waiters in FIFO order: the head
 * waiter wanting need bytes once they fit (they are charged for it first:
 * w->granted = need), one wanting 0 once the budget is not over; the first
 * that cannot be served stops the round (no overtaking). */
void rbudget_release(struct rbudget *b, uint64_t n);

/* Queues w (cb set by the caller) for need bytes until a release can serve
 * it; w fires at most once per queuing. Queuing a queued waiter does
 * nothing. */
void rbudget_wait(struct rbudget *b, struct rbudget_waiter *w, uint64_t need);

/* Takes w out of the queue if it is in it (its owner is going away). */
void rbudget_cancel(struct rbudget *b, struct rbudget_waiter *w);

#endif
