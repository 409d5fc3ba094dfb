/* topic_wait.c - CreateTopic answers held until the topic's partitions
 * have ready leaders in this node's metadata (topic_wait.h). */
#include "server/topic_wait.h"

#include "common/err.h"

#include <stdlib.h>

struct twait {
  struct twait *next;
  struct twaits *tw;
  struct conn_request *req;
  uint32_t topic_id;
  uint64_t deadline_ms; /* loop time */
  twait_cb cb;
};

static void twait_unlink(struct twait *w)
{
  struct twaits *tw = w->tw;
  for (struct twait **pp = &tw->head; *pp != NULL; pp = &(*pp)->next) {
    if (*pp == w) {
      *pp = w->next;
      tw->n--;
      break;
    }
  }
  if (tw->head == NULL && !tw->closing) {
    uv_timer_stop(&tw->timer);
  }
}

/* Unlinks and frees w, then answers its request. */
static void twait_finish(struct twait *w, bool ready)
{
  struct conn_request *req = w->req;
  uint32_t topic_id = w->topic_id;
  twait_cb cb = w->cb;
  twait_unlink(w);
  free(w);
  req->handler_data = NULL;
  cb(req, topic_id, ready);
}

static void twait_on_cancel(struct conn_request *req)
{
  struct twait *w = req->handler_data;
  req->handler_data = NULL;
  twait_unlink(w);
  free(w);
  conn_respond_error(req, CAIRN__CLIENT__ERROR_CODE__SHUTTING_DOWN, "connection closing");
}

/* The preferred replica's node is ALIVE: a leader elsewhere will hand
 * its leadership over to it soon. */
static bool twait_preferred_alive(const struct meta_state *st, const struct meta_partition *mp)
{
  if (mp->nreplicas == 0) {
    return false;
  }
  const struct meta_node *nd = meta_node_find(st, mp->replicas[0]);
  return nd != NULL && nd->state == META_NODE_ALIVE;
}

enum twait_stage twait_topic_stage(const struct meta_state *st, uint32_t topic_id)
{
  const struct meta_topic *t = meta_topic_find_id(st, topic_id);
  if (t == NULL) {
    return TWAIT_UNLED; /* not applied here yet (the create was forwarded) */
  }
  enum twait_stage stage = TWAIT_READY;
  for (uint32_t k = 0; k < t->npartitions; k++) {
    const struct meta_partition *mp = &t->partitions[k];
    if (mp->leader_id == 0) {
      return TWAIT_UNLED;
    }
    if (mp->nreplicas > 0 && mp->leader_id != mp->replicas[0] && twait_preferred_alive(st, mp)) {
      stage = TWAIT_LED;
    }
  }
  return stage;
}

bool twait_topic_ready(const struct meta_state *st, uint32_t topic_id)
{
  return twait_topic_stage(st, topic_id) == TWAIT_READY;
}

/* Answers the ready waits, and with expired the ones past their deadline
 * too. One pass: answering never starts another wait. */
static void twait_scan(struct twaits *tw, bool expired)
{
  const struct meta_state *st = ctl_state(tw->ctl);
  uint64_t now = uv_now(tw->timer.loop);
  struct twait *w = tw->head;
  while (w != NULL) {
    struct twait *next = w->next;
    enum twait_stage stage = twait_topic_stage(st, w->topic_id);
    if (stage == TWAIT_READY) {
      twait_finish(w, true);
    } else if (expired && now >= w->deadline_ms) {
      twait_finish(w, stage == TWAIT_LED);
    }
    w = next;
  }
}

static void twait_on_timer(uv_timer_t *h) { twait_scan(h->data, true); }

void twaits_init(struct twaits *tw, uv_loop_t *loop, struct controller *ctl)
{
  *tw = (struct twaits){.ctl = ctl};
  uv_timer_init(loop, &tw->timer);
  tw->timer.data = tw;
}

int twait_start(struct twaits *tw, struct conn_request *req, uint32_t topic_id,
                uint32_t timeout_ms, twait_cb cb)
{
  if (tw->closing) {
    return CAIRN_ESHUTDOWN;
  }
  if (twait_topic_ready(ctl_state(tw->ctl), topic_id)) {
    cb(req, topic_id, true);
    return 0;
  }
  struct twait *w = calloc(1, sizeof *w);
  if (w == NULL) {
    return CAIRN_ENOMEM;
  }
  w->tw = tw;
  w->req = req;
  w->topic_id = topic_id;
  w->deadline_ms = uv_now(tw->timer.loop) + (timeout_ms > TWAIT_MAX_MS ? TWAIT_MAX_MS : timeout_ms);
  w->cb = cb;
  w->next = tw->head;
  tw->head = w;
  tw->n++;
  req->handler_data = w;
  conn_request_set_cancel(req, twait_on_cancel);
  if (!uv_is_active((uv_handle_t *)&tw->timer)) {
    uv_timer_start(&tw->timer, twait_on_timer, TWAIT_TICK_MS, TWAIT_TICK_MS);
  }
  return 0;
}

void twait_check(struct twaits *tw)
{
  if (tw->head != NULL) {
    twait_scan(tw, false);
  }
}

static void twait_on_closed(uv_handle_t *h)
{
  struct twaits *tw = h->data;
  if (tw->closed_cb != NULL) {
    tw->closed_cb(tw->closed_data);
  }
}

void twaits_close(struct twaits *tw, void (*cb)(void *data), void *data)
{
  tw->closing = true;
  while (tw->head != NULL) {
    twait_finish(tw->head, false);
  }
  tw->closed_cb = cb;
  tw->closed_data = data;
  uv_close((uv_handle_t *)&tw->timer, twait_on_closed);
}
