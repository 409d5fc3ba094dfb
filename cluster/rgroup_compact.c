/* rgroup_compact.c - a quiet partition group drops its Raft log
 * (rgroup_compact.h). */
#include "cluster/rgroup_compact.h"

#include "cluster/rgroup_pace.h"
#include "common/log.h"

#include <stdlib.h>

/* Entries raft holds (in memory, and in the log behind it). */
static raft_index rgroup_compact_held(const struct rgroup *rg)
{
  return raft_last_index((struct raft *)&rg->raft) - rg->raft.log.offset;
}

void rgroup_compact_tune(struct rgroup *rg, unsigned threshold, unsigned trailing)
{
  rg->snap_threshold = threshold;
  rg->snap_trailing = trailing;
  if (rg->compact_armed) {
    return;
  }
  raft_set_snapshot_threshold(&rg->raft, threshold);
  raft_set_snapshot_trailing(&rg->raft, trailing);
}

void rgroup_compact_on_apply(struct rgroup *rg)
{
  rg->compact_still_ms = uv_now(rg->loop);
  rg->compact_tries = 0;
  rgroup_compact_disarm(rg);
}

void rgroup_compact_disarm(struct rgroup *rg)
{
  if (!rg->compact_armed) {
    return;
  }
  rg->compact_armed = false;
  raft_set_snapshot_threshold(&rg->raft, rg->snap_threshold);
  raft_set_snapshot_trailing(&rg->raft, rg->snap_trailing);
}

static void rgroup_compact_arm(struct rgroup *rg)
{
  if (rg->compact_armed) {
    return;
  }
  rg->compact_armed = true;
  raft_set_snapshot_threshold(&rg->raft, 1);
  /* raft_uv's snapshot_put takes trailing 0 for an install (rgroup_compact.h) */
  raft_set_snapshot_trailing(&rg->raft, rg->opts.wal != NULL ? 0 : 1);
}

static void rgroup_compact_on_barrier(struct raft_barrier *req, int status)
{
  (void)status; /* failed: leadership was lost; the next quiet period tries again */
  free(req);
}

static void rgroup_compact_barrier(struct rgroup *rg)
{
  struct raft_barrier *req = calloc(1, sizeof *req);
  if (req == NULL) {
    return; /* tried again at the next tick */
  }
  req->data = rg;
  rgroup_compact_arm(rg);
  int rv = raft_barrier(&rg->raft, req, rgroup_compact_on_barrier);
  if (rv != 0) {
    rgroup_compact_disarm(rg);
    free(req);
    log_debug("rgroup", "group %llu: compaction barrier: %s", (unsigned long long)rg->group_id,
              raft_strerror(rv));
    return;
  }
  rg->compact_tries++;
  rg->compactions++;
  log_debug("rgroup", "group %llu: quiet with %llu entries held: barrier for a compaction",
            (unsigned long long)rg->group_id, (unsigned long long)rgroup_compact_held(rg));
}

void rgroup_compact_tick(struct rgroup *rg)
{
  struct raft *r = &rg->raft;
  if (rg->state != RGROUP_RUNNING || !rg->raft_open || rg->raft_closing || rg->raft_failed ||
      rg->fatal || rg->store_down) {
    return;
  }
  uint64_t now = uv_now(rg->loop);
  int role = raft_state(r);
  if (r->last_applied != rg->compact_applied) {
    rg->compact_applied = r->last_applied;
    rg->compact_still_ms = now;
    if (role != RAFT_FOLLOWER) {
      rgroup_compact_disarm(rg); /* a leader's barrier was applied (and compacted) */
    }
    return;
  }
  if (role != RAFT_FOLLOWER && role != RAFT_LEADER) {
    rgroup_compact_disarm(rg); /* a candidate (a leader is disarmed as it starts) */
  }
  if ((role != RAFT_LEADER && role != RAFT_FOLLOWER) || rgroup_compact_held(rg) == 0 ||
      now - rg->compact_still_ms < RGROUP_COMPACT_STILL_MS) {
    return;
  }
  if (role == RAFT_FOLLOWER) {
    rgroup_compact_arm(rg);
    return;
  }
  if (!rg->compact_armed && now - rg->compact_still_ms >= RGROUP_COMPACT_LEADER_MS &&
      rg->compact_tries < RGROUP_COMPACT_TRIES && r->last_applied == raft_last_index(r) &&
      rgroup_pace_quiet(rg)) {
    rgroup_compact_barrier(rg);
  }
}
