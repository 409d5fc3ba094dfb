/* admin_history.c - the node's traffic history for the status page. See
 * admin_history.h. */
#include "admin/admin_history.h"

#include "admin/metrics.h"
#include "common/err.h"
#include "common/wallclock.h"
#include "server/node.h"

#include <stdlib.h>
#include <string.h>

#define ADMIN_HISTORY_OTHER (ADMIN_HISTORY_TOPICS + 1)

int admin_history_init(struct admin_history *h)
{
  memset(h, 0, sizeof *h);
  h->ring = calloc(ADMIN_HISTORY_POINTS, sizeof *h->ring);
  return h->ring != NULL ? 0 : CAIRN_ENOMEM;
}

void admin_history_close(struct admin_history *h)
{
  free(h->ring);
  memset(h, 0, sizeof *h);
}

/* The series slot of topic (1-based), given one when it has traffic and
 * one is free; ADMIN_HISTORY_OTHER when none. *fresh: just given. */
static unsigned admin_history_slot(struct admin_history *h, const char *topic, bool traffic,
                                   bool *fresh)
{
  *fresh = false;
  int free_at = -1;
  for (unsigned i = 0; i < ADMIN_HISTORY_TOPICS; i++) {
    struct admin_history_topic *t = &h->topics[i];
    if (t->name[0] != '\0' && strcmp(t->name, topic) == 0) {
      return i + 1;
    }
    /* Free: unused, or no traffic anywhere in the ring. */
    bool idle = t->name[0] == '\0' || t->seen + ADMIN_HISTORY_POINTS < h->samples;
    if (free_at < 0 && idle) {
      free_at = (int)i;
    }
  }
  if (!traffic || free_at < 0 || strlen(topic) > ADMIN_HISTORY_NAME_MAX) {
    return ADMIN_HISTORY_OTHER;
  }
  struct admin_history_topic *t = &h->topics[free_at];
  memset(t, 0, sizeof *t);
  strcpy(t->name, topic);
  t->seen = h->samples;
  *fresh = true;
  return (unsigned)free_at + 1;
}

/* Bytes per second from a counter's step; 0 when it fell. */
static uint32_t admin_history_rate(uint64_t now, uint64_t before, uint64_t step_ms)
{
  if (now <= before || step_ms == 0) {
    return 0;
  }
  uint64_t r = (now - before) * 1000 / step_ms;
  return r > UINT32_MAX ? UINT32_MAX : (uint32_t)r;
}

void admin_history_sample(struct admin_history *h, struct node *n)
{
  uint64_t prod[ADMIN_HISTORY_TOPICS + 2] = {0}, fetch[ADMIN_HISTORY_TOPICS + 2] = {0};
  bool fresh_slot[ADMIN_HISTORY_TOPICS + 2] = {false};
  /* The hosted parts are sorted by group id, not by topic: each finds its
   * topic's slot (at most ADMIN_HISTORY_TOPICS compares). */
  for (size_t i = 0; i < n->parts.n; i++) {
    struct part *p = n->parts.v[i];
    const struct metrics_part *mp = metrics_part_find(&n->metrics, p->group_id);
    if (mp == NULL) {
      continue;
    }
    bool fresh = false;
    unsigned s =
        admin_history_slot(h, p->topic, mp->produced_bytes + mp->fetched_bytes > 0, &fresh);
    fresh_slot[s] = fresh_slot[s] || fresh;
    prod[s] += mp->produced_bytes;
    fetch[s] += mp->fetched_bytes;
  }
  uint64_t now = uv_now(n->loop);
  uint64_t step = now - h->last_ms;
  bool first = h->samples == 0;
  struct admin_history_point pt = {.wall_ms = wallclock_ms()};
  for (unsigned s = 1; s <= ADMIN_HISTORY_OTHER; s++) {
    uint64_t *bp = s <= ADMIN_HISTORY_TOPICS ? &h->topics[s - 1].produced : &h->other_produced;
    uint64_t *bf = s <= ADMIN_HISTORY_TOPICS ? &h->topics[s - 1].fetched : &h->other_fetched;
    if (!first && !fresh_slot[s]) {
      pt.produce[s] = admin_history_rate(prod[s], *bp, step);
      pt.fetch[s] = admin_history_rate(fetch[s], *bf, step);
    }
    *bp = prod[s];
    *bf = fetch[s];
    if (s <= ADMIN_HISTORY_TOPICS && pt.produce[s] + pt.fetch[s] > 0) {
      h->topics[s - 1].seen = h->samples;
    }
    pt.produce[0] += pt.produce[s];
    pt.fetch[0] += pt.fetch[s];
  }
  h->last_ms = now;
  h->samples++;
  if (first) {
    return;
  }
  h->ring[h->next] = pt;
  h->next = (h->next + 1) % ADMIN_HISTORY_POINTS;
  h->len += h->len < ADMIN_HISTORY_POINTS ? 1 : 0;
}

/* The i-th point, oldest first. */
static const struct admin_history_point *admin_history_at(const struct admin_history *h, unsigned i)
{
  unsigned start = (h->next + ADMIN_HISTORY_POINTS - h->len) % ADMIN_HISTORY_POINTS;
  return &h->ring[(start + i) % ADMIN_HISTORY_POINTS];
}

static void admin_history_series(const struct admin_history *h, struct admin_json *w, unsigned s,
                                 bool produce)
{
  admin_json_array_begin(w);
  for (unsigned i = 0; i < h->len; i++) {
    const struct admin_history_point *pt = admin_history_at(h, i);
    admin_json_u64(w, produce ? pt->produce[s] : pt->fetch[s]);
  }
  admin_json_array_end(w);
}

/* Has series s any traffic in the ring? */
static bool admin_history_used(const struct admin_history *h, unsigned s)
{
  for (unsigned i = 0; i < h->len; i++) {
    const struct admin_history_point *pt = admin_history_at(h, i);
    if (pt->produce[s] + pt->fetch[s] > 0) {
      return true;
    }
  }
  return false;
}

void admin_history_write(const struct admin_history *h, struct node *n, struct admin_json *w)
{
  admin_json_object_begin(w);
  admin_json_key(w, "node_id");
  admin_json_u64(w, n->cfg.node_id);
  admin_json_key(w, "step_ms");
  admin_json_u64(w, ADMIN_HISTORY_STEP_MS);
  admin_json_key(w, "t");
  admin_json_array_begin(w);
  for (unsigned i = 0; i < h->len; i++) {
    admin_json_i64(w, admin_history_at(h, i)->wall_ms);
  }
  admin_json_array_end(w);
  admin_json_key(w, "produce");
  admin_history_series(h, w, 0, true);
  admin_json_key(w, "fetch");
  admin_history_series(h, w, 0, false);
  admin_json_key(w, "topics");
  admin_json_array_begin(w);
  for (unsigned s = 1; s <= ADMIN_HISTORY_OTHER; s++) {
    if (!admin_history_used(h, s)) {
      continue;
    }
    admin_json_object_begin(w);
    admin_json_key(w, "topic");
    admin_json_string(w, s <= ADMIN_HISTORY_TOPICS ? h->topics[s - 1].name : "(other topics)");
    admin_json_key(w, "produce");
    admin_history_series(h, w, s, true);
    admin_json_key(w, "fetch");
    admin_history_series(h, w, s, false);
    admin_json_object_end(w);
  }
  admin_json_array_end(w);
  admin_json_object_end(w);
}
