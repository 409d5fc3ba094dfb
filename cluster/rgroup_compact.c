/* rgroup_compact.c - a quiet group's Raft log compacted to one entry
 * (rgroup_compact.h). */
#include "cluster/rgroup_compact.h"

#include "cluster/catchup.h"
#include "cluster/rgroup.h"
#include "cluster/rgroup_pace.h"
#include "cluster/rgroup_raft.h"
#include "common/log.h"

/* More than one entry kept past the snapshot (the first entry raft holds
 * is log.offset + 1), nothing in the way. */
static bool rgroup_compact_worth(struct rgroup *rg)
{
  struct raft *r = &rg->raft;
  return rg->state == RGROUP_RUNNING && rg->raft_open && !rg->raft_failed && !rg->stopping &&
         !rg->compact_armed && r->snapshot.pending.term == 0 && r->snapshot.put.data == NULL &&
         !catchup_active(&rg->catchup) && raft_last_index(r) > r->log.offset + 1;
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
    raft_set_snapshot_threshold(&rg->raft, threshold);
    raft_set_snapshot_trailing(&rg->raft, trailing);
  }
}

void rgroup_compact_on_follow(struct rgroup *rg)
{
  if (rgroup_compact_worth(rg)) {
    rgroup_compact_arm(rg);
  }
}

void rgroup_compact_on_acked(struct rgroup *rg)
{
  if (!rgroup_coal_all_acked(rg) || !rgroup_compact_worth(rg)) {
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

void rgroup_compact_on_snapshot_end(struct rgroup *rg)
{
  if (!rg->compact_armed) {
    return;
  }
  rg->compact_armed = false;
  raft_set_snapshot_threshold(&rg->raft, rg->snap_threshold);
  raft_set_snapshot_trailing(&rg->raft, rg->snap_trailing);
}
