/* rgroup_compact.c - a quiet group's Raft log compacted to one entry
 * (rgroup_compact.h). */
#include "cluster/rgroup_compact.h"

#include "cluster/catchup.h"
#include "cluster/rgroup.h"
#include "cluster/rgroup_mem.h"
#include "cluster/rgroup_pace.h"
#include "cluster/rgroup_raft.h"
#include "common/log.h"

void rgroup_compact_gate_init(struct rgroup_compact_gate *g, uint64_t now_ms)
{
  g->tokens = 0;
  g->last_ms = now_ms;
}

/* Takes one token from the node's gate if it has one. */
static bool rgroup_compact_gate_take(struct rgroup_compact_gate *g, uint64_t now_ms)
{
  if (now_ms > g->last_ms) {
    g->tokens += (double)(now_ms - g->last_ms) * RGROUP_COMPACT_PER_S / 1000.0;
    if (g->tokens > RGROUP_COMPACT_PER_S) {
      g->tokens = RGROUP_COMPACT_PER_S; /* a burst of at most one second's */
    }
    g->last_ms = now_ms;
  }
  if (g->tokens < 1) {
    return false;
  }
  g->tokens -= 1;
  return true;
}

/* Bytes of the entries raft keeps past its snapshot, counting up to min
 * (the first entry raft holds is log.offset + 1; the log is a circular
 * buffer of entries [front, back)). */
static size_t rgroup_compact_log_bytes(const struct raft *r, size_t min)
{
  const struct raft_log *l = &r->log;
  size_t bytes = 0;
  for (size_t i = l->front; i != l->back && bytes < min; i = (i + 1) % l->size) {
    bytes += l->entries[i].buf.len;
  }
  return bytes;
}

/* More than one entry and RGROUP_COMPACT_MIN_BYTES kept past the
 * snapshot, nothing in the way. */
static bool rgroup_compact_worth(struct rgroup *rg)
{
  struct raft *r = &rg->raft;
  if (rg->opts.compact_gate == NULL || rg->state != RGROUP_RUNNING || !rg->raft_open ||
      rg->raft_failed || rg->stopping || rg->compact_armed || r->snapshot.pending.term != 0 ||
      r->snapshot.put.data != NULL || rgroup_is_catching_up(rg) ||
      raft_last_index(r) <= r->log.offset + 1) {
    return false;
  }
  /* The floor comes down with the node's memory scale (rgroup_mem.h). The
   * walk once per log end: a small log stays small until it grows, or
   * until the floor comes down (then the walks are short). */
  double scale = rgroup_mem_scale(rg);
  size_t min = (size_t)((double)RGROUP_COMPACT_MIN_BYTES * scale);
  if (rg->compact_small_at == raft_last_index(r) && scale >= 1.0) {
    return false;
  }
  if (rgroup_compact_log_bytes(r, min) < min) {
    rg->compact_small_at = raft_last_index(r);
    return false;
  }
  return true;
}

static void rgroup_compact_arm(struct rgroup *rg)
{
  rg->compact_armed = true;
  raft_set_snapshot_threshold(&rg->raft, 1);
  raft_set_snapshot_trailing(&rg->raft, 1);
}

void rgroup_compact_tune(struct rgroup *rg, unsigned threshold, unsigned trailing)
{
  rg->snap_threshold = threshold;
  rg->snap_trailing = trailing;
  if (!rg->compact_armed) {
    raft_set_snapshot_threshold(&rg->raft, rg->snapshot_soon ? 1 : threshold);
    raft_set_snapshot_trailing(&rg->raft, trailing);
  }
}

void rgroup_compact_snapshot_soon(struct rgroup *rg, raft_index index)
{
  rg->snapshot_soon = true;
  rg->snapshot_soon_index = index;
  raft_set_snapshot_threshold(&rg->raft, 1);
}

void rgroup_compact_on_follow(struct rgroup *rg)
{
  if (rgroup_compact_worth(rg)) {
    rgroup_compact_arm(rg);
  }
}

void rgroup_compact_on_acked(struct rgroup *rg)
{
  if (!rg->coal_quiet || !rgroup_coal_all_acked(rg) || !rgroup_compact_worth(rg) ||
      !rgroup_compact_gate_take(rg->opts.compact_gate, uv_now(rg->loop))) {
    return;
  }
  rgroup_compact_arm(rg);
  rgroup_pace_wake(rg); /* a proposal: Raft's heartbeats carry its commit */
  int rv = rgroup_raft_barrier(rg);
  if (rv != 0) {
    log_warn("rgroup", "group %llu: barrier to compact the quiet log: %s",
             (unsigned long long)rg->group_id, raft_strerror(rv));
    return; /* stays armed: its next apply compacts */
  }
  rg->compactions++;
  log_debug("rgroup", "group %llu: quiet: barrier at %llu compacts its Raft log",
            (unsigned long long)rg->group_id, (unsigned long long)raft_last_index(&rg->raft));
}

void rgroup_compact_on_snapshot_end(struct rgroup *rg, raft_index index)
{
  if (!rg->compact_armed && !rg->snapshot_soon) {
    return;
  }
  rg->compact_armed = false;
  if (rg->snapshot_soon && index >= rg->snapshot_soon_index) {
    rg->snapshot_soon = false;
  }
  raft_set_snapshot_threshold(&rg->raft, rg->snapshot_soon ? 1 : rg->snap_threshold);
  raft_set_snapshot_trailing(&rg->raft, rg->snap_trailing);
}
