/* looplag.h - how late the event loop runs: a repeating timer notes, each
 * time it fires, how long after its due time that was, in a histogram
 * exported as cairn_loop_lag_seconds (metrics_text.c). A callback that
 * holds the loop (a blocking fsync, a long scan) shows up as lag of every
 * timer due meanwhile; this one samples it every LOOPLAG_PERIOD_MS.
 *
 * Context: loop thread only. */
#ifndef CAIRN_LOOPLAG_H
#define CAIRN_LOOPLAG_H

#include "admin/metrics.h"

#include <stdint.h>
#include <uv.h>

#define LOOPLAG_PERIOD_MS 100

struct looplag {
  uv_timer_t timer;         /* first: the callback finds the struct from it */
  uint64_t due_ns;          /* uv_hrtime() when the timer should fire next */
  struct metrics_hist hist; /* lateness in microseconds */
};

/* Starts sampling on loop (uv_timer_init and uv_timer_start cannot fail
 * on a live loop with a callback). Ownership: ll is the caller's until the
 * timer's close callback; ll->timer.data is left to the caller (for that
 * callback). */
void looplag_start(uv_loop_t *loop, struct looplag *ll);

/* The sampling timer, for the owner to uv_close() when it stops. */
static inline uv_handle_t *looplag_handle(struct looplag *ll)
{
  return (uv_handle_t *)&ll->timer;
}

#endif
