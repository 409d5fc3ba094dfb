/* metrics_sample.c - the admin port's periodic samples of the node's Raft
 * groups: terms (elections) and the partition leaders' lag samples. See
 * metrics_node.h. */
#include "admin/metrics_node.h"

#include "admin/metrics.h"
#include "server/node.h"

/* Both lists are ascending by group id, so each is walked once with a
 * cursor in the other, not searched per group: at 1,000 partitions two
 * binary searches per group four times a second were most of an idle
 * node's own work (docs/performance.md, idle CPU). */
struct metrics_sample_walk {
  const struct parts *ps;
  size_t at; /* the first hosted part whose group id is not below the last asked */
};

/* Called by metrics_prune in ascending group id order. */
static bool metrics_sample_keep(uint64_t group_id, void *data)
{
  struct metrics_sample_walk *w = data;
  if (group_id == META_GROUP_ID) {
    return true;
  }
  while (w->at < w->ps->n && w->ps->v[w->at]->group_id < group_id) {
    w->at++;
  }
  return w->at < w->ps->n && w->ps->v[w->at]->group_id == group_id &&
         w->ps->v[w->at]->state == PART_OPEN;
}

/* The metrics of group_id, found from *at onwards (ascending calls) or
 * added there. */
static struct metrics_part *metrics_sample_part(struct metrics *m, size_t *at, uint64_t group_id)
{
  while (*at < m->nparts && m->parts[*at].group_id < group_id) {
    (*at)++;
  }
  if (*at < m->nparts && m->parts[*at].group_id == group_id) {
    return &m->parts[*at];
  }
  return metrics_part(m, group_id); /* inserted at *at: ascending order */
}

void metrics_node_sample(struct node *n)
{
  struct metrics *m = &n->metrics;
  uint64_t now = uv_now(n->loop);
  /* Metrics of replicas no longer open go only when the hosted set
   * changed: the walk touches every part, four times a second. */
  if (m->pruned_gen != n->parts.gen) {
    struct metrics_sample_walk w = {.ps = &n->parts, .at = 0};
    metrics_prune(m, metrics_sample_keep, &w);
    m->pruned_gen = n->parts.gen;
  }
  struct metrics_part *mp = metrics_part(m, META_GROUP_ID);
  if (mp != NULL && n->ctl.state == CTL_RUNNING) {
    metrics_note_term(m, mp, n->ctl.raft.current_term);
  }
  size_t at = 0;
  for (size_t i = 0; i < n->parts.n; i++) {
    struct part *p = n->parts.v[i];
    struct rgroup *rg = &p->rg;
    if (!rg->raft_open || rg->raft_closing) {
      continue;
    }
    mp = metrics_sample_part(m, &at, p->group_id);
    if (mp == NULL) {
      continue;
    }
    metrics_note_term(m, mp, rg->raft.current_term);
    if (rgroup_is_leader(rg)) {
      struct store_info si;
      store_info(rgroup_store(rg), &si);
      metrics_lag_sample(mp, now, si.last_index, si.next_offset);
    }
  }
}
