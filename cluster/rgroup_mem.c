/* rgroup_mem.c - the node-wide bound on Raft's in-memory entries
 * (rgroup_mem.h). */
#include "cluster/rgroup_mem.h"

#include "cluster/rgroup.h"

#include <stdbool.h>

void rgroup_mem_init(struct rgroup_mem *m, uint64_t budget)
{
  *m = (struct rgroup_mem){.budget = budget, .scale = 1.0, .since_cut = RGROUP_MEM_CUT_TICKS};
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
  const struct raft_log *l = &rg->raft.log;
  uint64_t n = rgroup_mem_entries(l);
  /* Every entry of a short log; else RGROUP_MEM_SAMPLES spread evenly,
   * scaled up: the walk stays O(1) per group at every tick, and a
   * compacted group's one barrier counts as what it is (an average of
   * the entries applied would count it as a batch). */
  uint64_t step = n <= RGROUP_MEM_SAMPLES ? 1 : n / RGROUP_MEM_SAMPLES;
  uint64_t seen = 0, bytes = 0;
  for (uint64_t k = 0; k < n && seen < RGROUP_MEM_SAMPLES; k += step, seen++) {
    bytes += l->entries[(l->front + k) % l->size].buf.len;
  }
  return seen == 0 ? 0 : bytes * n / seen;
}

void rgroup_mem_update(struct rgroup_mem *m, uint64_t bytes)
{
  m->bytes = bytes;
  m->since_cut++;
  if (m->budget == 0) {
    m->scale = 1.0;
    return;
  }
  if (bytes > m->budget && m->since_cut >= RGROUP_MEM_CUT_TICKS) {
    /* Aim a little under the budget: the estimate trails the snapshots.
     * At most once a window of RGROUP_MEM_CUT_TICKS calls, and not when
     * the sum fell by 5 % over the window: snapshots come at the groups'
     * next applies and compactions at the gate's pace
     * (RGROUP_COMPACT_PER_S), and cutting meanwhile only piles up (down to
     * the floor: every busy group snapshotting every 16 entries). */
    if (bytes * 20 > m->bytes_at_cut * 19) {
      m->scale *= (double)m->budget / (double)bytes * 0.9;
    }
    m->since_cut = 0;
    m->bytes_at_cut = bytes;
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
