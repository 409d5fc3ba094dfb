/* looplag.c - the loop-lag sampler (looplag.h). */
#include "admin/looplag.h"

#include <string.h>

#define LOOPLAG_PERIOD_NS ((uint64_t)LOOPLAG_PERIOD_MS * 1000000)

static void looplag_on_timer(uv_timer_t *t)
{
  struct looplag *ll = (struct looplag *)t; /* timer is the first member */
  uint64_t now = uv_hrtime();
  uint64_t late = now > ll->due_ns ? now - ll->due_ns : 0;
  metrics_hist_observe(&ll->hist, late / 1000);
  /* The next due time counts from now: uv re-arms a repeating timer from
   * the loop's time when it fires, so lateness does not accumulate. */
  ll->due_ns = now + LOOPLAG_PERIOD_NS;
}

void looplag_start(uv_loop_t *loop, struct looplag *ll)
{
  void *data = ll->timer.data;
  memset(&ll->hist, 0, sizeof ll->hist);
  uv_timer_init(loop, &ll->timer);
  ll->timer.data = data;
  ll->due_ns = uv_hrtime() + LOOPLAG_PERIOD_NS;
  uv_timer_start(&ll->timer, looplag_on_timer, LOOPLAG_PERIOD_MS, LOOPLAG_PERIOD_MS);
}
