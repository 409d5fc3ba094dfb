/* rgroup_pace.h - the heartbeat pace of a partition leader: a group with
 * nothing to replicate is quiesced onto a slow heartbeat, and woken back to
 * the configured one by its next proposal. Internal to rgroup.
 *
 * Why: raft 0.15 sends one empty AppendEntries per group per follower every
 * heartbeat interval, each over the group's own connection, and every one
 * is answered: at 1,000 partitions rf 3 that was ~5,300 small writes a
 * second per node and 10 % of a core with nothing produced
 * (docs/performance.md, idle CPU). An idle group needs heartbeats only to
 * keep its followers from starting an election.
 *
 * States of a leader's pace (followers keep the configured timings; only
 * a leader reads its heartbeat interval):
 *
 *   from    event                                              to      by
 *   ACTIVE  quiet (below) at every rgroup tick for at least    IDLE    rgroup_pace_tick
 *           RGROUP_PACE_QUIET_MS
 *   IDLE    a proposal or a leadership transfer starts         ACTIVE  rgroup_pace_wake
 *   IDLE    a tick finds it no longer quiet (a follower        ACTIVE  rgroup_pace_tick
 *           behind or unreachable, a new term, not leader)
 *
 * Quiet: this replica leads and is running; nothing is queued, in flight or
 * being transferred; no membership change runs; every entry is stored,
 * committed, and matched by every other server of the configuration, each
 * in raft's pipeline (not probe or snapshot) state; the term's first entry
 * (the barrier) is in; and the last index has not moved since the previous
 * tick. RGROUP_PACE_QUIET_MS is several fast heartbeats, so the followers
 * have learned the final commit index before the pace drops.
 *
 * IDLE sets raft's heartbeat timeout (raft_set_heartbeat_timeout) to the
 * idle interval. In raft 0.15 that field is read only by the leader, when
 * its tick (still every configured heartbeat, fixed at raft_start) decides
 * whether a follower is due an AppendEntries; the tick, the followers'
 * election timeout and the leader's own majority check (every election
 * timeout) are unchanged. A heartbeat is therefore sent at most one tick
 * after it is due, so the idle interval defaults to
 * election/2 - heartbeat: a follower's election timeout (at least the
 * configured one) stays at least twice the longest gap between heartbeats
 * (default timings: 400 ms idle against 1,000 ms). The election timeout
 * in force is used, not only the configured one, should another part of
 * rgroup shorten it for a while; a pace above what it allows is raised at
 * the next tick.
 *
 * The state is raft's own heartbeat timeout: IDLE when it is above the
 * configured heartbeat. A reopened instance (rgroup_raft_configure) starts
 * ACTIVE.
 *
 * Coalesced (rg->opts.coalesce, --coalesce-heartbeats): IDLE goes further.
 * Raft's heartbeat timeout is set beyond reach (RGROUP_PACE_COAL_HEARTBEAT_MS)
 * and rg->coal_quiet is set: the leader sends no Raft message at all, and
 * the node's coalesced beat (hbeat.h), one frame per node pair every beat
 * period, names (group, term, last index) for each such group instead:
 *
 *   follower   rgroup_coal_follow: still a follower of that leader in that
 *              term, holding exactly that log, committed to its end: it
 *              restarts its election timer (as a heartbeat would) and the
 *              answer accepts; otherwise the answer refuses;
 *   leader     rgroup_coal_acked: an accepting answer marks that follower
 *              heard from (raft's recent_recv), which the leader's
 *              majority check every election timeout reads, so a leader
 *              cut off from its followers still steps down;
 *              rgroup_coal_refused: a refusal, or no answer from a node
 *              for a few beat periods, or a beat that could not be sent,
 *              wakes the group (ACTIVE, Raft's heartbeats at once) and
 *              keeps it from coalescing again for RGROUP_PACE_COAL_HOLD_MS
 *              (then it goes on the idle pace instead).
 *   rgroup_coal_beat is asked at every beat; a group no longer quiet is
 *   woken there too. A proposal wakes it as before (rgroup_pace_wake).
 *
 * Context: loop thread only. */
#ifndef CAIRN_RGROUP_PACE_H
#define CAIRN_RGROUP_PACE_H

#include "cluster/rgroup.h"

#include <stdbool.h>

#define RGROUP_PACE_QUIET_MS 2000 /* quiet this long before the pace drops */
#define RGROUP_PACE_COAL_HEARTBEAT_MS (24u * 3600u * 1000u) /* coalesced: no Raft heartbeat */
#define RGROUP_PACE_COAL_HOLD_MS 5000 /* after a refused beat: not coalesced for this long */

/* The idle heartbeat interval for options o: o->idle_heartbeat_ms if set,
 * else election_ms / 2 - heartbeat_ms; 0 (never quiesce) when that is not
 * above heartbeat_ms. */
unsigned rgroup_pace_idle_ms(const struct rgroup_opts *o);

/* Once per rgroup tick (about RGROUP_TICK_MS): notes since when the group
 * has been quiet, drops the pace after RGROUP_PACE_QUIET_MS, and raises it
 * again when the group is no longer quiet. */
void rgroup_pace_tick(struct rgroup *rg);

/* Back to the configured heartbeat at once: call before proposing an entry
 * or starting a transfer, so the followers are not left on the idle pace
 * while entries flow (a follower in raft's probe state is sent at most one
 * message per heartbeat interval). */
void rgroup_pace_wake(struct rgroup *rg);

/* After raft took message m: an AppendEntries result accepting every
 * entry of this leader from a follower it still probes moves that
 * follower to the pipeline state. raft 0.15 does so only when a result
 * raises the follower's match index, so a follower back from a restart or
 * a cut holding every entry stayed probed until the next write, and its
 * idle groups never counted as quiet (their leaders kept Raft's
 * heartbeats). */
void rgroup_pace_on_result(struct rgroup *rg, const struct raft_message *m);

/* Is this replica a leader on the idle pace (coalesced or not)? */
bool rgroup_pace_idle(struct rgroup *rg);

/* Coalesced heartbeats (above). Context: loop thread, called by the node's
 * hbeat. */

/* Is this replica a coalesced leader whose beat goes out now? Fills the
 * term and last index to name. A coalesced group no longer quiet, or with
 * a term or vote record not yet durable (rgroup_wal_meta_pending), is
 * woken and false returned. */
bool rgroup_coal_beat(struct rgroup *rg, raft_term *term, raft_index *index);

/* A beat for this replica from node leader_id: true (and its election
 * timer restarted) if it still follows that leader in that term at
 * exactly that last and commit index, and its own term and vote are
 * durable (no record pending: an acceptance reveals the term). An
 * acceptance is remembered with the leader node's generation gen
 * (vouch_peer.in_gen): later beats of that node vouch for the group
 * (rgroup_coal_vouch). */
bool rgroup_coal_follow(struct rgroup *rg, uint64_t leader_id, uint64_t gen, raft_term term,
                        raft_index index);

/* Is this replica a coalesced leader naming (term, index) now? */
bool rgroup_coal_names(struct rgroup *rg, raft_term term, raft_index index);

/* Node follower_id accepted this leader's beat of (term, index), sent in
 * this node's epoch for it (vouch_peer.out_epoch); ignored unless the
 * leader still names exactly that (rgroup_coal_names). */
void rgroup_coal_acked(struct rgroup *rg, uint64_t follower_id, raft_term term, raft_index index,
                       uint64_t epoch);

/* Has every follower accepted this quiet period's beat in its current
 * epoch (rgroup_coal_acked_by)? */
bool rgroup_coal_all_acked(const struct rgroup *rg);

/* Has node follower_id accepted this quiet period's beat in this node's
 * current epoch for it (so the node's beats vouch for the group there)? */
bool rgroup_coal_acked_by(const struct rgroup *rg, uint64_t follower_id);

/* As a coalesced leader: has follower_id accepted this quiet period's beat
 * (rgroup_coal_acked_by), and has its node answered a beat within an
 * election timeout of now (the loop's time)? What an AppendEntries result
 * told the leader while every beat named the group. */
bool rgroup_coal_heard_from(const struct rgroup *rg, uint64_t follower_id, uint64_t now);

/* Applies the node's sparse beats (vouch.h) to this replica before its
 * Raft tick: as a coalesced leader, the followers that accepted it and
 * whose node answers count as heard from; as a follower vouched for by
 * its leader's node, the latest beat restarts its election timer, or, if
 * the group's state moved, it is refused back to the leader. Cheap when
 * there is nothing to do. */
void rgroup_coal_vouch(struct rgroup *rg);

/* The replica is closing: its followers' acceptances are revoked and its
 * own vouch dropped. */
void rgroup_coal_forget(struct rgroup *rg);

/* A beat of term term was refused, unanswered or unsendable: back to
 * Raft's heartbeats, no coalescing for RGROUP_PACE_COAL_HOLD_MS. */
void rgroup_coal_refused(struct rgroup *rg, raft_term term);

/* May this replica be ticked only every slow period (rgroup_ticker.h)?
 * Running with nothing under way (no prompt election or short election
 * timeout, no transfer, no catch-up), and either a coalesced leader that
 * is its group's preferred replica (or has none), or a follower that knows
 * its leader and accepted a coalesced beat within the last half election
 * timeout, with no Raft message received since. */
bool rgroup_pace_may_sleep(struct rgroup *rg);

#endif
