/* store_faults.c - the cluster-wide table of failed partition stores
 * (store_faults.h). */
#include "cluster/store_faults.h"

#include <string.h>

void sfault_init(struct sfault_table *t)
{
  t->n = 0;
}

void sfault_clear(struct sfault_table *t)
{
  t->n = 0;
}

bool sfault_add(struct sfault_table *t, uint64_t node_id, uint32_t topic_id, uint32_t partition,
                uint64_t since_ms, const char *reason)
{
  if (t->n == SFAULT_MAX) {
    return false;
  }
  struct sfault *f = &t->v[t->n++];
  f->node_id = node_id;
  f->topic_id = topic_id;
  f->partition = partition;
  f->since_ms = since_ms;
  size_t len = reason != NULL ? strnlen(reason, SFAULT_REASON_MAX) : 0;
  memcpy(f->reason, reason != NULL ? reason : "", len);
  f->reason[len] = '\0';
  f->raft_damaged = false;
  f->rebuild_ready = false;
  return true;
}

struct sfault *sfault_find(struct sfault_table *t, uint64_t node_id, uint32_t topic_id,
                           uint32_t partition)
{
  for (size_t i = 0; i < t->n; i++) {
    struct sfault *f = &t->v[i];
    if (f->node_id == node_id && f->topic_id == topic_id && f->partition == partition) {
      return f;
    }
  }
  return NULL;
}

bool sfault_raft_damaged(const struct sfault_table *t, uint64_t node_id, uint32_t topic_id,
                         uint32_t partition)
{
  const struct sfault *f = sfault_find((struct sfault_table *)t, node_id, topic_id, partition);
  return f != NULL && f->raft_damaged;
}

void sfault_drop_node(struct sfault_table *t, uint64_t node_id)
{
  size_t k = 0;
  for (size_t i = 0; i < t->n; i++) {
    if (t->v[i].node_id == node_id) {
      continue;
    }
    if (k != i) {
      t->v[k] = t->v[i];
    }
    k++;
  }
  t->n = k;
}

bool sfault_node_counts(const struct meta_state *st, uint64_t node_id)
{
  const struct meta_node *nd = meta_node_find(st, node_id);
  return nd != NULL && (nd->state == META_NODE_ALIVE || nd->state == META_NODE_DRAINING);
}
