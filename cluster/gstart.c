/* gstart.c - group opens spread over loop iterations (gstart.h). */
#include "cluster/gstart.h"

#include "common/err.h"

#include <string.h>

int gstart_init(struct gstart *gs, uv_loop_t *loop, unsigned budget_ms)
{
  memset(gs, 0, sizeof *gs);
  gs->loop = loop;
  gs->budget_ns = (uint64_t)(budget_ms != 0 ? budget_ms : GSTART_DEFAULT_BUDGET_MS) * 1000000u;
  int rv = uv_idle_init(loop, &gs->idle);
  if (rv != 0) {
    return rv;
  }
  gs->idle.data = gs;
  return 0;
}

static struct gstart_job *gstart_pop(struct gstart *gs)
{
  struct gstart_job *job = gs->head;
  gs->head = job->next;
  if (gs->head == NULL) {
    gs->tail = NULL;
  }
  job->next = NULL;
  gs->queued--;
  return job;
}

/* One loop iteration's share: jobs until the budget is spent. The idle
 * handle keeps the loop from blocking in poll while jobs are queued, and is
 * stopped when none are, so an idle starter costs nothing. */
static void gstart_on_idle(uv_idle_t *idle)
{
  struct gstart *gs = idle->data;
  uint64_t t0 = uv_hrtime();
  gs->turns++;
  do {
    struct gstart_job *job = gstart_pop(gs);
    gs->run++;
    job->cb(job, 0);
  } while (gs->head != NULL && !gs->closing && uv_hrtime() - t0 < gs->budget_ns);
  if (gs->head == NULL && !gs->closing) {
    uv_idle_stop(&gs->idle);
  }
}

int gstart_push(struct gstart *gs, struct gstart_job *job, gstart_job_cb cb)
{
  if (gs->closing) {
    return CAIRN_ECLOSED;
  }
  job->cb = cb;
  job->next = NULL;
  if (gs->tail != NULL) {
    gs->tail->next = job;
  } else {
    gs->head = job;
  }
  gs->tail = job;
  gs->queued++;
  if (!uv_is_active((uv_handle_t *)&gs->idle)) {
    uv_idle_start(&gs->idle, gstart_on_idle);
  }
  return 0;
}

unsigned gstart_queued(const struct gstart *gs)
{
  return gs->queued;
}

static void gstart_on_closed(uv_handle_t *h)
{
  struct gstart *gs = h->data;
  /* Jobs pushed by a cancel callback are refused (closing), so the queue
   * is empty: every job has had its one call. */
  while (gs->head != NULL) {
    struct gstart_job *job = gstart_pop(gs);
    job->cb(job, CAIRN_ESHUTDOWN);
  }
  if (gs->close_cb != NULL) {
    gs->close_cb(gs);
  }
}

void gstart_close(struct gstart *gs, gstart_close_cb cb)
{
  gs->closing = true;
  gs->close_cb = cb;
  uv_idle_stop(&gs->idle);
  uv_close((uv_handle_t *)&gs->idle, gstart_on_closed);
}
