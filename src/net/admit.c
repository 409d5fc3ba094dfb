/* admit.c - admission control at the client ports (admit.h). */
#include "net/admit.h"

#include "common/log.h"

static void admit_set(struct admit *a, enum admit_state to, size_t queued)
{
  a->state = to;
  if (to == ADMIT_HELD) {
    a->holds++;
    a->held_since_ns = uv_hrtime();
    log_debug("admit", "reads held: %zu bytes queued to a peer", queued);
    rbudget_hold(a->budget, true);
    return;
  }
  a->held_ns += uv_hrtime() - a->held_since_ns;
  log_debug("admit", "reads resumed: %zu bytes queued to a peer", queued);
  rbudget_hold(a->budget, false); /* wakes the conns waiting */
}

static void admit_on_check(uv_check_t *h)
{
  struct admit *a = (struct admit *)((char *)h - offsetof(struct admit, check));
  size_t queued = a->queued(a->queued_data);
  if (queued > a->peak_queued) {
    a->peak_queued = queued;
  }
  if (a->state == ADMIT_OPEN && queued > ADMIT_HIGH_BYTES) {
    admit_set(a, ADMIT_HELD, queued);
  } else if (a->state == ADMIT_HELD && queued < ADMIT_LOW_BYTES) {
    admit_set(a, ADMIT_OPEN, queued);
  }
}

void admit_start(uv_loop_t *loop, struct admit *a, admit_queued_cb queued, void *data,
                 struct rbudget *b)
{
  a->queued = queued;
  a->queued_data = data;
  a->budget = b;
  a->state = ADMIT_OPEN;
  a->holds = 0;
  a->held_ns = 0;
  a->peak_queued = 0;
  uv_check_init(loop, &a->check);
  uv_check_start(&a->check, admit_on_check);
}

uv_handle_t *admit_stop(struct admit *a)
{
  if (a->state == ADMIT_HELD) {
    admit_set(a, ADMIT_OPEN, 0);
  }
  uv_check_stop(&a->check);
  return (uv_handle_t *)&a->check;
}

double admit_held_seconds(const struct admit *a)
{
  uint64_t ns = a->held_ns;
  if (a->state == ADMIT_HELD) {
    ns += uv_hrtime() - a->held_since_ns;
  }
  return (double)ns / 1e9;
}
