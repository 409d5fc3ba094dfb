/* admin_state.c - partition health and node readiness for the admin port.
 * See admin_state.h. */
#include "admin/admin_state.h"

#include "server/node.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

static bool admin_node_live(const struct meta_state *st, uint64_t id)
{
  const struct meta_node *nd = meta_node_find(st, id);
  return nd != NULL && (nd->state == META_NODE_ALIVE || nd->state == META_NODE_DRAINING);
}

enum admin_part_health admin_part_health(const struct meta_state *st, const struct meta_topic *t,
                                         const struct meta_partition *mp)
{
  uint32_t live = 0;
  for (uint32_t i = 0; i < mp->nreplicas; i++) {
    live += admin_node_live(st, mp->replicas[i]) ? 1 : 0;
  }
  if (mp->nreplicas == 0 || live <= mp->nreplicas / 2) {
    return ADMIN_PART_OFFLINE;
  }
  if (live < mp->nreplicas || mp->nreplicas < t->replication_factor) {
    return ADMIN_PART_UNDER_REPLICATED;
  }
  return ADMIN_PART_OK;
}

const char *admin_part_health_name(enum admin_part_health h)
{
  switch (h) {
  case ADMIN_PART_OK:
    return "ok";
  case ADMIN_PART_UNDER_REPLICATED:
    return "under_replicated";
  case ADMIN_PART_OFFLINE:
    return "offline";
  }
  return "?";
}

bool admin_ready(struct node *n, char *why, size_t cap)
{
  if (n->state != NODE_RUNNING) {
    snprintf(why, cap, "the node is stopping");
    return false;
  }
  const struct meta_state *st = ctl_state(&n->ctl);
  const struct meta_node *self = meta_node_find(st, n->cfg.node_id);
  if (self == NULL || self->incarnation != n->incarnation) {
    snprintf(why, cap, "node %" PRIu64 " is not registered in the metadata yet", n->cfg.node_id);
    return false;
  }
  if (self->state != META_NODE_ALIVE && self->state != META_NODE_DRAINING) {
    snprintf(why, cap, "node %" PRIu64 " is %s in the metadata", n->cfg.node_id,
             meta_node_state_name(self->state));
    return false;
  }
  struct meta_assignment *as = NULL;
  size_t nas = 0;
  if (meta_node_assignments(st, n->cfg.node_id, &as, &nas) != 0) {
    snprintf(why, cap, "out of memory");
    return false;
  }
  size_t missing = 0;
  const struct meta_assignment *first = NULL;
  for (size_t i = 0; i < nas; i++) {
    struct part *p = parts_find(&n->parts, as[i].topic_id, as[i].partition);
    if (p == NULL || p->state != PART_OPEN || p->rg.state != RGROUP_RUNNING) {
      missing++;
      if (first == NULL) {
        first = &as[i];
      }
    }
  }
  if (missing > 0) {
    const struct meta_topic *t = meta_topic_find_id(st, first->topic_id);
    snprintf(why, cap,
             "%zu of %zu assigned partition replicas not open yet (first: %s/%" PRIu32 ")", missing,
             nas, t != NULL ? t->name : "?", first->partition);
  }
  free(as);
  return missing == 0;
}
