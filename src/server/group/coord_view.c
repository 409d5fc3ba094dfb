/* coord_view.c - read-only views of the groups this node coordinates, for
 * DescribeGroups and the admin port (its /v1/groups and the cairn_group_*
 * metrics): one walk over the loaded slots, and each group's committed
 * offsets beside the partitions' high watermarks (consumer lag). See
 * coord.h. */
#include "server/group/coord.h"

#include "common/err.h"
#include "server/node.h"

#include <stdlib.h>

void coord_each_group(struct coord *c, coord_group_fn fn, void *data)
{
  for (size_t i = 0; i < c->nslots; i++) {
    const struct coord_slot *s = &c->slots[i];
    if (s->state != COORD_LOADED) {
      continue; /* its groups are not known yet (or no longer) */
    }
    for (size_t k = 0; k < s->ngroups; k++) {
      fn(s->groups[k], data);
    }
  }
}

/* The high watermark of a partition this node hosts (leader or not); -1. */
static int64_t coord_view_hw(struct coord *c, const char *topic, uint32_t partition)
{
  struct part *p = node_find_part(c->n, topic, partition, NULL);
  if (p == NULL || p->state != PART_OPEN) {
    return -1;
  }
  struct store_info info;
  store_info(rgroup_store(&p->rg), &info);
  return info.next_offset;
}

static void coord_view_fill(struct coord *c, struct coord_lag *x)
{
  x->high_watermark = coord_view_hw(c, x->topic, x->partition);
  x->lag = x->high_watermark >= 0 && x->committed >= 0 ? x->high_watermark - x->committed : -1;
  if (x->lag < -1) {
    x->lag = 0; /* a follower's watermark may trail the committed offset */
  }
}

int coord_group_lag(struct coord *c, const struct group *g, struct coord_lag **out, size_t *nout)
{
  size_t cap = g->noffsets;
  for (size_t i = 0; i < g->nmembers; i++) {
    cap += g->members[i].nassigned;
  }
  struct coord_lag *v = calloc(cap + 1, sizeof *v);
  if (v == NULL) {
    return CAIRN_ENOMEM;
  }
  size_t k = 0;
  for (size_t i = 0; i < g->noffsets; i++, k++) {
    const struct group_offset *o = &g->offsets[i];
    v[k].topic = g->topics[o->topic];
    v[k].partition = o->partition;
    v[k].committed = o->offset;
    const struct group_member *owner = group_owner(g, v[k].topic, v[k].partition);
    v[k].member_id = owner != NULL ? owner->id : "";
  }
  for (size_t i = 0; i < g->nmembers; i++) {
    const struct group_member *m = &g->members[i];
    for (size_t j = 0; j < m->nassigned; j++) {
      const char *topic = g->topics[m->assigned[j].topic];
      if (group_offset_find(g, topic, m->assigned[j].partition) != NULL) {
        continue;
      }
      v[k].topic = topic;
      v[k].partition = m->assigned[j].partition;
      v[k].committed = -1;
      v[k].member_id = m->id;
      k++;
    }
  }
  for (size_t i = 0; i < k; i++) {
    coord_view_fill(c, &v[i]);
  }
  *out = v;
  *nout = k;
  return 0;
}
