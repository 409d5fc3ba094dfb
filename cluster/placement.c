/* placement.c - deterministic replica placement over a load table built from
 * the metadata state (rules in placement.h). */
#include "cluster/placement.h"

#include "common/err.h"

#include <stdlib.h>
#include <string.h>

static struct placement_node *placement_node_find(struct placement_table *t, uint64_t id)
{
  size_t lo = 0, hi = t->nnodes;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (t->nodes[mid].id == id)
      return &t->nodes[mid];
    if (t->nodes[mid].id < id)
      lo = mid + 1;
    else
      hi = mid;
  }
  return NULL;
}

/* Eligible and with the capabilities the table requires. */
static bool placement_usable(const struct placement_table *t, const struct placement_node *pn)
{
  return pn->eligible && (pn->caps & t->need) == t->need;
}

static void placement_count(struct placement_table *t)
{
  t->neligible = 0;
  for (size_t i = 0; i < t->nnodes; i++)
    if (placement_usable(t, &t->nodes[i]))
      t->neligible++;
}

void placement_table_require(struct placement_table *t, uint32_t caps)
{
  if (t->need == caps)
    return; /* the planner asks per partition: recount only on a change */
  t->need = caps;
  placement_count(t);
}

int placement_table_build(const struct meta_state *st, struct placement_table *t)
{
  memset(t, 0, sizeof *t);
  if (st->nnodes == 0)
    return 0;
  t->nodes = calloc(st->nnodes, sizeof *t->nodes);
  if (t->nodes == NULL)
    return CAIRN_ENOMEM;
  for (size_t i = 0; i < st->nnodes; i++) {
    const struct meta_node *n = &st->nodes[i];
    if (n->state == META_NODE_REMOVED)
      continue;
    struct placement_node *pn = &t->nodes[t->nnodes++];
    pn->id = n->id;
    memcpy(pn->rack, n->rack, sizeof pn->rack);
    pn->eligible = n->state == META_NODE_ALIVE;
    pn->caps = n->caps;
  }
  placement_count(t);
  /* st->nodes is ascending by id, so the table is too. */
  for (size_t i = 0; i < st->ntopics; i++) {
    const struct meta_topic *tp = &st->topics[i];
    for (uint32_t p = 0; p < tp->npartitions; p++) {
      const struct meta_partition *part = &tp->partitions[p];
      for (uint32_t r = 0; r < part->nreplicas; r++) {
        struct placement_node *pn = placement_node_find(t, part->replicas[r]);
        if (pn == NULL)
          continue;
        pn->replicas++;
        if (r == 0)
          pn->leaders++;
      }
    }
  }
  return 0;
}

void placement_table_free(struct placement_table *t)
{
  free(t->nodes);
  memset(t, 0, sizeof *t);
}

/* How many of chosen[0..n) sit on the rack of pn. */
static uint32_t placement_rack_uses(struct placement_table *t, const struct placement_node *pn,
                                    const uint64_t *chosen, uint32_t n)
{
  uint32_t uses = 0;
  for (uint32_t i = 0; i < n; i++) {
    struct placement_node *c = placement_node_find(t, chosen[i]);
    if (c != NULL && strcmp(c->rack, pn->rack) == 0)
      uses++;
  }
  return uses;
}

static bool placement_in(const uint64_t *ids, uint32_t n, uint64_t id)
{
  for (uint32_t i = 0; i < n; i++)
    if (ids[i] == id)
      return true;
  return false;
}

/* The best follower for a partition that already has chosen[0..n): fewest
 * same-rack replicas among racks_of[0..nracks_of), then fewest replicas, then
 * lowest id (the table is in id order, so the first best wins). */
static struct placement_node *placement_best_follower(struct placement_table *t,
                                                      const uint64_t *exclude, uint32_t nexclude,
                                                      const uint64_t *racks_of, uint32_t nracks_of)
{
  struct placement_node *best = NULL;
  uint32_t best_uses = 0;
  for (size_t i = 0; i < t->nnodes; i++) {
    struct placement_node *pn = &t->nodes[i];
    if (!placement_usable(t, pn) || placement_in(exclude, nexclude, pn->id))
      continue;
    uint32_t uses = placement_rack_uses(t, pn, racks_of, nracks_of);
    if (best == NULL || uses < best_uses || (uses == best_uses && pn->replicas < best->replicas)) {
      best = pn;
      best_uses = uses;
    }
  }
  return best;
}

int placement_assign(struct placement_table *t, uint32_t partitions, uint32_t rf, uint64_t *out)
{
  if (rf == 0 || rf > META_MAX_RF || rf > t->neligible)
    return CAIRN_EINVALID_RF;
  for (uint32_t p = 0; p < partitions; p++) {
    uint64_t *row = &out[(size_t)p * rf];
    struct placement_node *leader = NULL;
    for (size_t i = 0; i < t->nnodes; i++) {
      struct placement_node *pn = &t->nodes[i];
      if (!placement_usable(t, pn))
        continue;
      if (leader == NULL || pn->leaders < leader->leaders ||
          (pn->leaders == leader->leaders && pn->replicas < leader->replicas))
        leader = pn;
    }
    row[0] = leader->id;
    leader->leaders++;
    leader->replicas++;
    for (uint32_t r = 1; r < rf; r++) {
      /* rf <= neligible, so a node not yet in the row always exists. */
      struct placement_node *pn = placement_best_follower(t, row, r, row, r);
      row[r] = pn->id;
      pn->replicas++;
    }
  }
  return 0;
}

int placement_pick(struct placement_table *t, const uint64_t *current, uint32_t ncurrent,
                   uint64_t leaving, uint64_t *out)
{
  uint64_t staying[META_MAX_REPLICAS];
  uint32_t nstaying = 0;
  for (uint32_t i = 0; i < ncurrent && nstaying < META_MAX_REPLICAS; i++)
    if (current[i] != leaving)
      staying[nstaying++] = current[i];
  struct placement_node *pn = placement_best_follower(t, current, ncurrent, staying, nstaying);
  if (pn == NULL)
    return CAIRN_ENOTFOUND;
  pn->replicas++;
  *out = pn->id;
  return 0;
}

void placement_unload(struct placement_table *t, uint64_t from, bool was_leader)
{
  struct placement_node *pn = placement_node_find(t, from);
  if (pn == NULL)
    return;
  if (pn->replicas > 0)
    pn->replicas--;
  if (was_leader && pn->leaders > 0)
    pn->leaders--;
}

void placement_set_eligible(struct placement_table *t, uint64_t id, bool eligible)
{
  struct placement_node *pn = placement_node_find(t, id);
  if (pn == NULL || pn->eligible == eligible)
    return;
  pn->eligible = eligible;
  placement_count(t);
}
