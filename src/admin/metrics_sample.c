/* metrics_sample.c - the admin port's periodic samples of the node's Raft
 * groups: terms (elections) and the partition leaders' lag samples. See
 * metrics_node.h. At 1,000 idle partitions a walk over every replica four
 * times a second was a fifth of an idle node's CPU time (cache misses on
 * each part): lag samples now follow applies, terms are walked every few
 * seconds (docs/performance.md, idle CPU). */
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

/* The replica's Raft, if open and not closing. */
static struct rgroup *metrics_sample_rgroup(struct part *p)
{
  struct rgroup *rg = &p->rg;
  return rg->raft_open && !rg->raft_closing ? rg : NULL;
}

/* One lag sample of the partition if this node leads it. Returns false
 * when the sample is due later (the last one is too recent). */
static bool metrics_sample_lag(struct metrics_part *mp, struct rgroup *rg, uint64_t now)
{
  if (!rgroup_is_leader(rg)) {
    return true;
  }
  struct store_info si;
  store_info(rgroup_store(rg), &si);
  return metrics_lag_sample(mp, now, si.last_index, si.next_offset);
}

/* Every hosted group: its term (elections) and, with lag, a lag sample if
 * led here. A walk over every replica touches cold memory for each, so it
 * runs only every METRICS_TERM_SAMPLES samples (an election is counted a
 * few seconds late) or when the hosted set changed. */
static void metrics_sample_all(struct node *n, uint64_t now, bool lag)
{
  struct metrics *m = &n->metrics;
  size_t at = 0;
  for (size_t i = 0; i < n->parts.n; i++) {
    struct part *p = n->parts.v[i];
    struct rgroup *rg = metrics_sample_rgroup(p);
    if (rg == NULL) {
      continue;
    }
    struct metrics_part *mp = metrics_sample_part(m, &at, p->group_id);
    if (mp == NULL) {
      continue;
    }
    metrics_note_term(m, mp, rg->raft.current_term);
    if (lag) {
      (void)metrics_sample_lag(mp, rg, now);
    }
  }
}

/* The groups that applied entries since the last sample: a lag sample for
 * each one led here. One whose sample is due later stays listed. */
static void metrics_sample_applied(struct node *n, uint64_t now)
{
  struct metrics *m = &n->metrics;
  size_t kept = 0;
  for (size_t i = 0; i < m->napplied; i++) {
    uint64_t gid = m->applied[i];
    struct metrics_part *mp = metrics_part_find(m, gid);
    if (mp == NULL) {
      continue; /* pruned */
    }
    struct part *p = parts_get(&n->parts, gid);
    struct rgroup *rg = p != NULL && p->state == PART_OPEN ? metrics_sample_rgroup(p) : NULL;
    if (rg != NULL && !metrics_sample_lag(mp, rg, now)) {
      m->applied[kept++] = gid;
      continue;
    }
    mp->applied = false;
  }
  m->napplied = kept;
}

void metrics_node_applied(struct node *n, struct part *p)
{
  struct metrics *m = &n->metrics;
  struct metrics_part *mp = metrics_part(m, p->group_id);
  struct rgroup *rg = metrics_sample_rgroup(p);
  if (mp == NULL || mp->applied || rg == NULL) {
    return; /* counted out of memory, or already due later */
  }
  if (!metrics_sample_lag(mp, rg, uv_now(n->loop))) {
    metrics_part_mark(m, mp);
  }
}

void metrics_node_sample(struct node *n)
{
  struct metrics *m = &n->metrics;
  uint64_t now = uv_now(n->loop);
  bool changed = m->pruned_gen != n->parts.gen;
  /* Metrics of replicas no longer open go only when the hosted set
   * changed. */
  if (changed) {
    struct metrics_sample_walk w = {.ps = &n->parts, .at = 0};
    metrics_prune(m, metrics_sample_keep, &w);
    m->pruned_gen = n->parts.gen;
  }
  struct metrics_part *mp = metrics_part(m, META_GROUP_ID);
  if (mp != NULL && n->ctl.state == CTL_RUNNING) {
    metrics_note_term(m, mp, n->ctl.raft.current_term);
  }
  bool lost = m->applied_lost;
  if (changed || lost || m->term_countdown == 0) {
    m->applied_lost = false;
    m->term_countdown = METRICS_TERM_SAMPLES;
    metrics_sample_all(n, now, lost);
  }
  m->term_countdown--;
  metrics_sample_applied(n, now);
}
