/* rgroup_pace.c - the heartbeat pace of a partition leader: quiesce a group
 * with nothing to replicate onto a slow heartbeat, wake it on the next
 * proposal (rgroup_pace.h). */
#include "cluster/rgroup_pace.h"

#include "cluster/rgroup_compact.h"
#include "cluster/rgroup_raft.h"
#include "cluster/vouch.h"
#include "common/log.h"

#include <string.h>

/* raft 0.15's progress states (src/progress.h, not installed): a follower
 * probed (at most one AppendEntries per heartbeat) or being streamed to, as
 * opposed to sent a snapshot. */
#define RGROUP_PACE_PROGRESS_PROBE 0
#define RGROUP_PACE_PROGRESS_PIPELINE 1

unsigned rgroup_pace_idle_ms(const struct rgroup_opts *o)
{
  /* A heartbeat goes out at most one tick (the configured heartbeat) after
   * it is due: keep the election timeout at least twice the longest gap. */
  unsigned limit = o->election_ms / 2 > o->heartbeat_ms ? o->election_ms / 2 - o->heartbeat_ms : 0;
  unsigned ms =
      o->idle_heartbeat_ms != 0 && o->idle_heartbeat_ms < limit ? o->idle_heartbeat_ms : limit;
  return ms > o->heartbeat_ms ? ms : 0;
}

/* Is raft's heartbeat timeout above the configured one? It stays so on a
 * replica that lost leadership until its next tick lowers it. */
static bool rgroup_pace_raised(const struct rgroup *rg)
{
  return rg->raft_open && rg->raft.heartbeat_timeout > rg->opts.heartbeat_ms;
}

bool rgroup_pace_idle(struct rgroup *rg)
{
  return rgroup_pace_raised(rg) && raft_state(&rg->raft) == RAFT_LEADER;
}

/* The followers that accepted this quiet period's beat stop applying the
 * node's vouch to it: the next beat to each revokes it (vouch.h). */
static void rgroup_coal_revoke(struct rgroup *rg)
{
  struct vouch_table *t = rg->opts.vouch;
  for (unsigned i = 0; i < RGROUP_COAL_ACKS; i++) {
    struct rgroup_coal_ack *a = &rg->coal_acks[i];
    if (a->node == 0) {
      continue;
    }
    struct vouch_peer *p = t != NULL ? vouch_get(t, a->node) : NULL;
    if (p != NULL && p->out_epoch == a->epoch) {
      vouch_revoke(t, a->node, rg->group_id, rg->pace_term);
    }
  }
  memset(rg->coal_acks, 0, sizeof rg->coal_acks);
}

static void rgroup_coal_vouch_leader(struct rgroup *rg, uint64_t now);

void rgroup_pace_wake(struct rgroup *rg)
{
  rg->pace_quiet_ms = 0;
  if (rg->coal_quiet) {
    /* An asleep leader is ticked every slow period only: the heartbeats
     * raft now sends need the fast tick (rgroup_ticker.h). */
    rgroup_ticker_wake(rg);
    /* What the beats told of each follower stays true until raft's next
     * contact check: without it a woken leader reports its followers out
     * of sync until their first answer (rgroup_in_sync). */
    rgroup_coal_vouch_leader(rg, uv_now(rg->loop));
    rgroup_coal_revoke(rg);
  }
  rg->coal_quiet = false;
  if (rgroup_pace_raised(rg)) {
    raft_set_heartbeat_timeout(&rg->raft, rg->opts.heartbeat_ms);
    rg->pace_wakes++;
  }
}

/* Nothing to replicate, every follower streamed to and caught up (the
 * definition in rgroup_pace.h). */
static bool rgroup_pace_quiet(struct rgroup *rg)
{
  struct raft *r = &rg->raft;
  if (rg->state != RGROUP_RUNNING || !rg->raft_open || rg->raft_failed ||
      raft_state(r) != RAFT_LEADER || rg->transferring || rg->inflight != 0 ||
      rg->queue_head != NULL || r->transfer != NULL || r->leader_state.change != NULL ||
      r->leader_state.promotee_id != 0 || rg->term_appended != r->current_term) {
    return false;
  }
  raft_index last = raft_last_index(r);
  if (r->commit_index != last || r->last_stored != last) {
    return false;
  }
  for (unsigned i = 0; i < r->configuration.n; i++) {
    if (r->configuration.servers[i].id == r->id) {
      continue;
    }
    const struct raft_progress *p = &r->leader_state.progress[i];
    if (p->state != RGROUP_PACE_PROGRESS_PIPELINE || p->match_index != last) {
      return false;
    }
  }
  return true;
}

void rgroup_pace_on_result(struct rgroup *rg, const struct raft_message *m)
{
  struct raft *r = &rg->raft;
  const struct raft_append_entries_result *res = &m->append_entries_result;
  if (m->type != RAFT_IO_APPEND_ENTRIES_RESULT || !rg->raft_open || r->state != RAFT_LEADER ||
      res->rejected != 0 || res->term != r->current_term) {
    return;
  }
  raft_index last = raft_last_index(r);
  for (unsigned i = 0; i < r->configuration.n; i++) {
    struct raft_progress *p = &r->leader_state.progress[i];
    if (r->configuration.servers[i].id == m->server_id && p->state == RGROUP_PACE_PROGRESS_PROBE &&
        p->match_index == last && res->last_log_index >= last) {
      /* What replicationUpdate does when a probed follower's match index
       * rises (progressToPipeline sets the state, nothing else). */
      p->state = RGROUP_PACE_PROGRESS_PIPELINE;
    }
  }
}

/* May this leader stop Raft's heartbeats now (rgroup_pace.h)? */
static bool rgroup_pace_coal_allowed(const struct rgroup *rg, uint64_t now_ms)
{
  return rg->opts.coalesce && now_ms >= rg->coal_hold_ms;
}

/* Is the group on the node's list of groups the next beats name (vouch.h),
 * or is there no such list (every beat names every group)? False only
 * when out of memory: then the group does not coalesce. */
static bool rgroup_coal_listed(struct rgroup *rg)
{
  memset(rg->coal_acks, 0, sizeof rg->coal_acks); /* a new quiet period */
  if (rg->opts.vouch == NULL || rg->coal_to_name) {
    return true;
  }
  if (vouch_to_name(rg->opts.vouch, rg->group_id) != 0) {
    return false;
  }
  rg->coal_to_name = true;
  return true;
}

/* Drops the pace: to no Raft heartbeat at all when coalescing is allowed
 * (the node's coalesced beat stands in), else to idle_ms. */
static void rgroup_pace_drop(struct rgroup *rg, unsigned idle_ms, bool idle, uint64_t now_ms)
{
  if (rgroup_pace_coal_allowed(rg, now_ms) && rgroup_coal_listed(rg)) {
    raft_set_heartbeat_timeout(&rg->raft, RGROUP_PACE_COAL_HEARTBEAT_MS);
    rg->coal_quiet = true;
    rg->pace_term = rg->raft.current_term;
    rg->pace_quiesces += idle ? 0 : 1;
    log_debug("rgroup",
              "group %llu: leader quiesced: no Raft heartbeat, the coalesced beat "
              "stands in",
              (unsigned long long)rg->group_id);
    return;
  }
  if (idle) {
    return; /* already on the idle pace */
  }
  raft_set_heartbeat_timeout(&rg->raft, idle_ms);
  rg->pace_term = rg->raft.current_term;
  rg->pace_quiesces++;
  log_debug("rgroup", "group %llu: leader quiesced: heartbeat %u ms while nothing is replicated",
            (unsigned long long)rg->group_id, idle_ms);
}

void rgroup_pace_tick(struct rgroup *rg)
{
  raft_index last = rg->raft_open ? raft_last_index(&rg->raft) : 0;
  bool moved = last != rg->pace_last_index;
  rg->pace_last_index = last;
  /* The election timeout in force, not only the configured one: another
   * part of rgroup may shorten it for a while. */
  struct rgroup_opts now = rg->opts;
  now.election_ms = rg->raft_open ? rg->raft.election_timeout : rg->opts.election_ms;
  unsigned idle_ms = rgroup_pace_idle_ms(&now);
  bool idle = rgroup_pace_raised(rg);
  bool stale = idle && (rg->pace_term != rg->raft.current_term ||
                        (!rg->coal_quiet && rg->raft.heartbeat_timeout > idle_ms));
  if (moved || !rgroup_pace_quiet(rg) || stale) {
    rgroup_pace_wake(rg);
    return;
  }
  if (idle_ms == 0 || rg->coal_quiet) {
    return;
  }
  uint64_t now_ms = uv_now(rg->loop);
  if (!idle) {
    if (rg->pace_quiet_ms == 0) {
      rg->pace_quiet_ms = now_ms;
    }
    if (now_ms - rg->pace_quiet_ms < RGROUP_PACE_QUIET_MS) {
      return;
    }
  }
  rgroup_pace_drop(rg, idle_ms, idle, now_ms);
}

/* ---- coalesced heartbeats (hbeat.h) ---- */

bool rgroup_coal_beat(struct rgroup *rg, raft_term *term, raft_index *index)
{
  if (!rg->coal_quiet) {
    return false;
  }
  /* An asleep leader was quiet when it went to sleep, and anything that
   * could change that since (a message received, a proposal, a transfer)
   * woke it; its slow tick looks again (rgroup_pace_tick). So only an
   * awake one is looked at here. A term not yet durable is not named
   * (riow_mux.h, "Term and vote"): Raft's own heartbeats, held until it
   * is, go instead. */
  if ((!rg->ticker_asleep && !rgroup_pace_quiet(rg)) || rg->pace_term != rg->raft.current_term ||
      rgroup_wal_meta_pending(rg)) {
    rgroup_pace_wake(rg);
    return false;
  }
  *term = rg->raft.current_term;
  *index = raft_last_index(&rg->raft);
  return true;
}

bool rgroup_coal_follow(struct rgroup *rg, uint64_t leader_id, uint64_t gen, raft_term term,
                        raft_index index)
{
  struct raft *r = &rg->raft;
  if (rg->state != RGROUP_RUNNING || !rg->raft_open || rg->raft_failed || rg->raft_closing ||
      raft_state(r) != RAFT_FOLLOWER || r->current_term != term ||
      r->follower_state.current_leader.id != leader_id) {
    return false;
  }
  /* An acceptance says "I follow you in this term": not before the term
   * (or a vote in it) is durable here. The refusal names only the
   * leader's term. */
  if (rgroup_wal_meta_pending(rg)) {
    return false;
  }
  /* The follower holds exactly the leader's log and knows it committed:
   * nothing a heartbeat would bring it. */
  if (raft_last_index(r) != index || r->last_stored != index || r->commit_index != index) {
    return false;
  }
  /* What recvAppendEntries does for a heartbeat of the current leader
   * (raft 0.15): restart the election timer. */
  r->election_timer_start = r->io->time(r->io);
  rg->coal_follow_ms = uv_now(rg->loop);
  rg->coal_vouch_node = leader_id;
  rg->coal_vouch_gen = gen;
  rg->coal_vouch_term = term;
  rg->coal_vouch_index = index;
  rgroup_compact_on_follow(rg);
  return true;
}

/* Notes that node accepted this quiet period's beat in its epoch. */
static void rgroup_coal_note_ack(struct rgroup *rg, uint64_t node, uint64_t epoch)
{
  struct rgroup_coal_ack *free_slot = NULL;
  for (unsigned i = 0; i < RGROUP_COAL_ACKS; i++) {
    struct rgroup_coal_ack *a = &rg->coal_acks[i];
    if (a->node == node) {
      a->epoch = epoch;
      return;
    }
    if (a->node == 0 && free_slot == NULL) {
      free_slot = a;
    }
  }
  if (free_slot != NULL) {
    *free_slot = (struct rgroup_coal_ack){.node = node, .epoch = epoch};
  }
}

bool rgroup_coal_names(struct rgroup *rg, raft_term term, raft_index index)
{
  struct raft *r = &rg->raft;
  return rg->coal_quiet && rg->raft_open && !rg->raft_failed && raft_state(r) == RAFT_LEADER &&
         r->current_term == term && raft_last_index(r) == index;
}

void rgroup_coal_acked(struct rgroup *rg, uint64_t follower_id, raft_term term, raft_index index,
                       uint64_t epoch)
{
  struct raft *r = &rg->raft;
  /* An acceptance of an earlier quiet period (another last index) vouches
   * for nothing now. */
  if (!rgroup_coal_names(rg, term, index)) {
    return;
  }
  /* What replicationUpdate does on an AppendEntries result (raft 0.15):
   * the leader's majority check (every election timeout) counts it. */
  for (unsigned i = 0; i < r->configuration.n; i++) {
    if (r->configuration.servers[i].id == follower_id) {
      r->leader_state.progress[i].recent_recv = true;
    }
  }
  rgroup_coal_note_ack(rg, follower_id, epoch);
  rgroup_compact_on_acked(rg);
}

bool rgroup_coal_acked_by(const struct rgroup *rg, uint64_t follower_id)
{
  const struct vouch_table *t = rg->opts.vouch;
  for (unsigned i = 0; i < RGROUP_COAL_ACKS; i++) {
    const struct rgroup_coal_ack *a = &rg->coal_acks[i];
    if (a->node == follower_id) {
      const struct vouch_peer *p = t != NULL ? vouch_get((struct vouch_table *)t, a->node) : NULL;
      return p != NULL && p->out_epoch == a->epoch;
    }
  }
  return false;
}

bool rgroup_coal_all_acked(const struct rgroup *rg)
{
  const struct raft_configuration *cf = &rg->raft.configuration;
  for (unsigned i = 0; i < cf->n; i++) {
    if (cf->servers[i].id != rg->raft.id && !rgroup_coal_acked_by(rg, cf->servers[i].id)) {
      return false;
    }
  }
  return true;
}

bool rgroup_coal_heard_from(const struct rgroup *rg, uint64_t follower_id, uint64_t now)
{
  const struct raft *r = &rg->raft;
  if (!rg->coal_quiet || !rg->raft_open || r->state != RAFT_LEADER ||
      r->current_term != rg->pace_term || !rgroup_coal_acked_by(rg, follower_id)) {
    return false;
  }
  const struct vouch_peer *p = vouch_get(rg->opts.vouch, follower_id);
  return p != NULL && p->answered_ms != 0 && now - p->answered_ms < r->election_timeout;
}

/* As the leader: the followers heard from through the node's beats
 * (rgroup_coal_heard_from) count as heard from for raft (recent_recv),
 * as each answer did when every beat named the group. */
static void rgroup_coal_vouch_leader(struct rgroup *rg, uint64_t now)
{
  struct raft *r = &rg->raft;
  /* What rgroup_coal_heard_from checks first, once per group rather than
   * per server: two thirds of a node's groups are followers, and at
   * 10,000 groups this walk was 14 % of an idle node's samples. */
  if (!rg->coal_quiet || r->state != RAFT_LEADER) {
    return;
  }
  for (unsigned i = 0; i < r->configuration.n; i++) {
    uint64_t id = r->configuration.servers[i].id;
    if (id != r->id && rgroup_coal_heard_from(rg, id, now)) {
      r->leader_state.progress[i].recent_recv = true;
    }
  }
}

/* As a follower: the group still holds what it accepted from its leader's
 * node, and that node's beats have followed on since: the latest one
 * restarts the election timer, as accepting it by name would have. A group
 * whose state moved is refused back to the leader (vouch.h). */
static void rgroup_coal_vouch_follower(struct rgroup *rg, uint64_t now)
{
  struct raft *r = &rg->raft;
  struct vouch_table *t = rg->opts.vouch;
  struct vouch_peer *p = vouch_get(t, rg->coal_vouch_node);
  if (p == NULL || p->in_gen != rg->coal_vouch_gen) {
    rg->coal_vouch_node = 0; /* a beat was missed: the leader names it again */
    return;
  }
  raft_index last = raft_last_index(r);
  bool same = rg->state == RGROUP_RUNNING && raft_state(r) == RAFT_FOLLOWER &&
              r->current_term == rg->coal_vouch_term &&
              r->follower_state.current_leader.id == rg->coal_vouch_node &&
              last == rg->coal_vouch_index && r->last_stored == last && r->commit_index == last &&
              !rgroup_wal_meta_pending(rg);
  if (!same) {
    vouch_nack(t, rg->coal_vouch_node, rg->group_id, rg->coal_vouch_term, rg->coal_vouch_index);
    rg->coal_vouch_node = 0;
    return;
  }
  if (p->in_ms <= rg->coal_follow_ms || now - p->in_ms >= r->election_timeout) {
    return;
  }
  raft_time at = r->io->time(r->io) - (now - p->in_ms);
  if (at > r->election_timer_start) {
    r->election_timer_start = at;
  }
  rg->coal_follow_ms = p->in_ms;
}

void rgroup_coal_vouch(struct rgroup *rg)
{
  if (rg->opts.vouch == NULL || !rg->raft_open || rg->raft_failed) {
    return;
  }
  uint64_t now = uv_now(rg->loop);
  rgroup_coal_vouch_leader(rg, now);
  if (rg->coal_vouch_node != 0) {
    rgroup_coal_vouch_follower(rg, now);
  }
}

void rgroup_coal_forget(struct rgroup *rg)
{
  if (rg->coal_quiet) {
    rgroup_coal_revoke(rg);
  }
  rg->coal_vouch_node = 0;
}

void rgroup_coal_refused(struct rgroup *rg, raft_term term)
{
  if (!rg->coal_quiet || !rg->raft_open || rg->raft.current_term != term) {
    return;
  }
  rg->coal_refusals++;
  rg->coal_hold_ms = uv_now(rg->loop) + RGROUP_PACE_COAL_HOLD_MS;
  rgroup_pace_wake(rg);
}

/* ---- asleep groups (rgroup_ticker.h) ---- */

/* Nothing under way that needs the fast tick: running, no prompt election
 * or short election timeout, no transfer, no catch-up. */
static bool rgroup_pace_settled(struct rgroup *rg)
{
  const struct raft *r = &rg->raft;
  return rg->state == RGROUP_RUNNING && rg->raft_open && !rg->raft_failed && !rg->raft_closing &&
         rg->elect_gone == 0 && r->election_timeout == rg->opts.election_ms && !rg->transferring &&
         r->transfer == NULL && !rgroup_is_catching_up(rg);
}

bool rgroup_pace_may_sleep(struct rgroup *rg)
{
  if (!rgroup_pace_settled(rg)) {
    return false;
  }
  const struct raft *r = &rg->raft;
  if (r->state == RAFT_LEADER) {
    /* Coalesced, and not waiting to hand leadership to the preferred
     * replica (rgroup's tick counts that in ticks). */
    return rg->coal_quiet && (rg->no_preferred_leader || rg->self_id == rg->preferred_id);
  }
  if (r->state != RAFT_FOLLOWER || r->follower_state.current_leader.id == 0 ||
      rg->coal_follow_ms == 0) {
    return false;
  }
  /* Its leader's beats keep coming (several per election timeout). */
  uint64_t now = uv_now(rg->loop);
  return now - rg->coal_follow_ms < rg->opts.election_ms / 2;
}
