/* metrics_sample.c - the admin port's periodic samples of the node's Raft
 * groups: terms (elections) and the partition leaders' lag samples. See
 * metrics_node.h. */
#include "admin/metrics_node.h"

#include "admin/metrics.h"
#include "server/node.h"

static bool metrics_sample_keep(uint64_t group_id, void *data)
{
  struct node *n = data;
  uint32_t topic_id = 0, partition = 0;
  if (group_id == META_GROUP_ID) {
    return true;
  }
  return meta_group_split(group_id, &topic_id, &partition) &&
         parts_find(&n->parts, topic_id, partition) != NULL;
}

void metrics_node_sample(struct node *n)
{
  struct metrics *m = &n->metrics;
  uint64_t now = uv_now(n->loop);
  metrics_prune(m, metrics_sample_keep, n);
  struct metrics_part *mp = metrics_part(m, META_GROUP_ID);
  if (mp != NULL && n->ctl.state == CTL_RUNNING) {
    metrics_note_term(m, mp, n->ctl.raft.current_term);
  }
  for (size_t i = 0; i < n->parts.n; i++) {
    struct part *p = n->parts.v[i];
    struct rgroup *rg = &p->rg;
    if (!rg->raft_open || rg->raft_closing) {
      continue;
    }
    mp = metrics_part(m, p->group_id);
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
