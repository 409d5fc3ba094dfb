/* rgroup_mem.c - the node-wide bound on Raft's in-memory entries
 * (rgroup_mem.h). */
#include "cluster/rgroup_mem.h"

#include "cluster/rgroup.h"

void rgroup_mem_init(struct rgroup_mem *m, uint64_t budget)
{
  *m = (struct rgroup_mem){.budget = budget, .scale = 1.0};
}

/* Entries in raft's log: a circular buffer of [front, back). */
static uint64_t rgroup_mem_entries(const struct raft_log *l)
{
  if (l->size == 0) {
    return 0;
  }
  return l->front <= l->back ? l->back - l->front : l->size - l->front + l->back;
}

uint64_t rgroup_mem_bytes(const struct rgroup *rg)
{
  if (!rg->raft_open) {
    return 0;
  }
  return (uint64_t)((double)rgroup_mem_entries(&rg->raft.log) * rg->entry_bytes_avg);
}

void rgroup_mem_update(struct rgroup_mem *m, uint64_t bytes, uint64_t groups)
{
  m->bytes = bytes;
  m->groups = groups;
  if (m->budget == 0) {
    m->scale = 1.0;
    return;
  }
  if (bytes > m->budget) {
    /* Aim a little under the budget: the estimate trails the snapshots. */
    m->scale *= (double)m->budget / (double)bytes * 0.9;
  } else if (bytes < m->budget / 4 * 3) {
    m->scale *= 1.25;
  }
  m->scale = m->scale > 1.0                    ? 1.0
             : m->scale < RGROUP_MEM_MIN_SCALE ? RGROUP_MEM_MIN_SCALE
                                               : m->scale;
}

double rgroup_mem_scale(const struct rgroup *rg)
{
  return rg->opts.mem != NULL ? rg->opts.mem->scale : 1.0;
}
