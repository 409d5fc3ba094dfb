/* rgroup_elect.c - a prompt election when the node of a replica's leader is
 * seen gone (nodewatch.h), instead of waiting out the election timeout.
 *
 * raft 0.15 starts an election only from its timer, and a follower that
 * still knows a leader refuses every vote request that does not carry the
 * "disrupt leader" flag of a leadership transfer (recvRequestVote). So the
 * one way to start an election at once that the other followers will
 * answer is the message a leader sends to hand over: TimeoutNow. When the
 * leader's node is gone, the surviving voter ranked first (lowest id) hands
 * itself that message, as if from the gone leader, with its own term and
 * last log position (which recvTimeoutNow requires to match): it becomes a
 * candidate with the flag, and the others, which still name the gone
 * leader, vote on their logs as usual (never while entries it received are
 * still being written: then the append's completion does it). Raft's
 * safety does not rest on the
 * flag (one vote per term, the log comparison); the flag only lets the
 * election go ahead without every follower's timer having run out.
 *
 * Until a leader is known again every survivor uses a short election
 * timeout (RGROUP_ELECT_SHORT_MS or twice the heartbeat), so a candidacy
 * that fails (the first-ranked replica's log was behind) is retried within
 * it, and the next-ranked survivor hands itself TimeoutNow after
 * rank * stagger if it still names the gone leader. Once a leader is known
 * (or after RGROUP_ELECT_GIVE_UP_MS), the configured timeout is back.
 *
 * A replica that starts (a node's start or restart, a reopen after a
 * failed write) knows no leader either, and nothing tells it whether one
 * exists: raft 0.15 gives it a full randomised timeout (T..2T) before its
 * first candidacy, which after a majority restarted was most of the wait.
 * It takes the short timeout instead until it hears of a leader
 * (RGROUP_ELECT_START in place of a gone node, nothing fired). So does a
 * replica without a leader asked to vote for a candidate whose log is
 * behind its own: it would refuse that candidate, and after a majority
 * restarted it is often the only one that can win (the survivor that
 * kept appending alone), so it should not wait out its own timer. With
 * pre-vote a candidacy that cannot win disturbs no one: a healthy group's
 * leader and followers refuse it without touching their terms, and the
 * leader's next heartbeat makes the candidate a follower again.
 *
 * And a replica whose own timer ran out (seen a candidate): raft draws its
 * next candidacy a full timeout later, so when the two followers of a
 * frozen leader stood at the same moment (their timers are only looked at
 * on the 100 ms tick, and both started at the leader's last heartbeat)
 * and split the vote, the next try came 1-1.5 s later. On the short
 * timeout it comes 200-300 ms later.
 *
 *   from                event                                  by
 *   idle (gone 0)       the leader's node seen gone            rgroup_leader_gone
 *   idle (gone 0)       started with no leader known           rgroup_elect_on_start
 *   idle (gone 0)       leaderless, asked by a shorter log     rgroup_elect_on_vote_request
 *   idle (gone 0)       seen a candidate (its timer ran out)   rgroup_elect_on_candidacy
 *   watching            rank's turn: TimeoutNow to itself      rgroup_elect_check
 *   watching            a leader known, or give up: idle       rgroup_elect_check
 *
 * Context: loop thread only. */
#include "cluster/rgroup.h"
#include "cluster/rgroup_raft.h"

#include "common/log.h"

#include <stdint.h>
#include <string.h>

/* elect_gone of a replica that started with no leader known: no node is
 * gone, no TimeoutNow is handed, only the short timeout is used. */
#define RGROUP_ELECT_START UINT64_MAX

/* Is there a Raft instance to act on (not recovering, not closing)? */
static bool rgroup_elect_raft_up(const struct rgroup *rg)
{
  return rg->state == RGROUP_RUNNING && rg->raft_open && !rg->raft_failed;
}

/* struct raft_log is a circular buffer of entries [front, back) laid out
 * in raft.h. */
raft_term rgroup_elect_last_term(const struct raft *r)
{
  const struct raft_log *l = &r->log;
  size_t n = l->back >= l->front ? l->back - l->front : l->size - l->front + l->back;
  if (n == 0) {
    return l->snapshot.last_term;
  }
  size_t last = l->back == 0 ? l->size - 1 : l->back - 1;
  return l->entries[last].term;
}

int rgroup_elect_spread_max(int min, int max)
{
  if (max <= min) {
    return min;
  }
  return min + (max - min) / 2;
}

unsigned rgroup_elect_short_timeout(unsigned heartbeat_ms, unsigned election_ms)
{
  unsigned s = 2 * heartbeat_ms;
  if (s < RGROUP_ELECT_SHORT_MS) {
    s = RGROUP_ELECT_SHORT_MS;
  }
  return s < election_ms ? s : election_ms;
}

/* The short election timeout used while no leader is known. */
static unsigned rgroup_elect_short_ms(const struct rgroup *rg)
{
  unsigned s = rgroup_elect_short_timeout(rg->opts.heartbeat_ms, rg->opts.election_ms);
  if (rg->opts.meta_group_commit && rgroup_wal_own_io(rg) && s < RGROUP_ELECT_SHORT_GROUP_MS) {
    s = RGROUP_ELECT_SHORT_GROUP_MS < rg->opts.election_ms ? RGROUP_ELECT_SHORT_GROUP_MS
                                                           : rg->opts.election_ms;
  }
  return s;
}

/* Does this replica, a follower, still name node_id as its leader? */
static bool rgroup_elect_follows(struct rgroup *rg, uint64_t node_id, const char **address)
{
  raft_id lid = 0;
  const char *addr = NULL;
  if (!rgroup_elect_raft_up(rg) || raft_state(&rg->raft) != RAFT_FOLLOWER) {
    return false;
  }
  raft_leader(&rg->raft, &lid, &addr);
  *address = addr;
  return lid != 0 && lid == node_id && addr != NULL;
}

/* Hands this replica the TimeoutNow a leader sends to transfer
 * leadership, as from the gone leader: it starts an election at once. */
static void rgroup_elect_fire(struct rgroup *rg)
{
  rg->elect_fired = true;
  const char *address;
  if (!rgroup_elect_follows(rg, rg->elect_gone, &address)) {
    return; /* an election is already under way, on the short timer */
  }
  struct raft *r = &rg->raft;
  struct raft_message m;
  memset(&m, 0, sizeof m);
  m.type = RAFT_IO_TIMEOUT_NOW;
  m.server_id = rg->elect_gone;
  m.server_address = address;
  m.timeout_now.term = r->current_term;
  m.timeout_now.last_log_index = raft_last_index(r);
  m.timeout_now.last_log_term = rgroup_elect_last_term(r);
  raft_term before = r->current_term;
  rg->io_ops.recv(&rg->wio.io, &m);
  rg->elections_prompted++;
  log_info("rgroup", "group %llu: replica %llu starts an election (term %llu -> %llu, %s): "
           "node %llu, its leader, is gone",
           (unsigned long long)rg->group_id, (unsigned long long)rg->self_id,
           (unsigned long long)before, (unsigned long long)r->current_term,
           raft_state(r) == RAFT_CANDIDATE ? "candidate" : "not started",
           (unsigned long long)rg->elect_gone);
}

static void rgroup_elect_end(struct rgroup *rg, const char *why)
{
  if (rg->raft_open) {
    rgroup_elect_restore_timer(&rg->raft, rg->opts.election_ms);
  }
  unsigned long long waited = (unsigned long long)(uv_now(rg->loop) - rg->elect_since_ms);
  if (rg->elect_gone == RGROUP_ELECT_START) {
    log_info("rgroup", "group %llu: replica %llu: %s %llu ms after it took the short timeout",
             (unsigned long long)rg->group_id, (unsigned long long)rg->self_id, why, waited);
  } else {
    log_info("rgroup", "group %llu: replica %llu: %s %llu ms after node %llu was seen gone",
             (unsigned long long)rg->group_id, (unsigned long long)rg->self_id, why, waited,
             (unsigned long long)rg->elect_gone);
  }
  rg->elect_gone = 0;
}

void rgroup_leader_gone(struct rgroup *rg, uint64_t node_id)
{
  const char *address;
  if (rg->stopping || rg->elect_gone != 0 || !rgroup_elect_follows(rg, node_id, &address)) {
    return;
  }
  /* Rank among the surviving voters, by id: the first goes at once. */
  const struct raft_configuration *cf = &rg->raft.configuration;
  unsigned rank = 0;
  bool voter = false;
  for (unsigned i = 0; i < cf->n; i++) {
    const struct raft_server *s = &cf->servers[i];
    if (s->role != RAFT_VOTER || s->id == node_id) {
      continue;
    }
    if (s->id == rg->self_id) {
      voter = true;
    } else if (s->id < rg->self_id) {
      rank++;
    }
  }
  if (!voter) {
    return;
  }
  rgroup_ticker_wake(rg); /* the short timers need the fast tick */
  rg->elect_gone = node_id;
  rg->elect_rank = rank;
  rg->elect_since_ms = uv_now(rg->loop);
  rg->elect_fired = false;
  raft_set_election_timeout(&rg->raft, rgroup_elect_short_ms(rg));
  rgroup_elect_check(rg); /* the first-ranked goes now (once its log is on disk) */
}

/* Is r without a leader: a candidate, or a follower that names none? */
static bool rgroup_elect_leaderless(const struct raft *r)
{
  return r->state == RAFT_CANDIDATE ||
         (r->state == RAFT_FOLLOWER && r->follower_state.current_leader.id == 0);
}

bool rgroup_elect_start_timer(struct raft *r, unsigned short_ms)
{
  if (!rgroup_elect_leaderless(r) || short_ms == 0 || short_ms >= r->election_timeout ||
      short_ms <= r->heartbeat_timeout) {
    return false;
  }
  unsigned voters = 0;
  bool self_votes = false;
  for (unsigned i = 0; i < r->configuration.n; i++) {
    const struct raft_server *s = &r->configuration.servers[i];
    if (s->role == RAFT_VOTER) {
      voters++;
      self_votes = self_votes || s->id == r->id;
    }
  }
  if (!self_votes || voters < 2) {
    return false;
  }
  raft_set_election_timeout(r, short_ms);
  /* What raft's electionResetTimer draws, with the short timeout, counted
   * from the running timer's start; never later than that timer. */
  unsigned *timer = r->state == RAFT_FOLLOWER ? &r->follower_state.randomized_election_timeout
                                              : &r->candidate_state.randomized_election_timeout;
  raft_time now = r->io->time(r->io);
  raft_time elapsed = now > r->election_timer_start ? now - r->election_timer_start : 0;
  raft_time due = elapsed + (raft_time)r->io->random(r->io, (int)short_ms, 2 * (int)short_ms);
  if (due < *timer) {
    *timer = (unsigned)due;
  }
  return true;
}

void rgroup_elect_restore_timer(struct raft *r, unsigned election_ms)
{
  raft_set_election_timeout(r, election_ms);
  if (r->state != RAFT_FOLLOWER && r->state != RAFT_CANDIDATE) {
    return;
  }
  /* raft 0.15 draws the timer's length only when the role changes
   * (electionResetTimer); a heartbeat restarts the timer with the length
   * it has. A follower that learned its leader while on the short timeout
   * would keep it, and with the idle heartbeat (400 ms) time out between
   * two heartbeats. */
  unsigned *timer = r->state == RAFT_FOLLOWER ? &r->follower_state.randomized_election_timeout
                                              : &r->candidate_state.randomized_election_timeout;
  *timer = (unsigned)r->io->random(r->io, (int)election_ms, 2 * (int)election_ms);
}

bool rgroup_elect_outlogged(struct raft *r, const struct raft_message *m)
{
  if (m->type != RAFT_IO_REQUEST_VOTE || !rgroup_elect_leaderless(r)) {
    return false;
  }
  raft_term term = rgroup_elect_last_term(r);
  const struct raft_request_vote *rv = &m->request_vote;
  return rv->last_log_term < term ||
         (rv->last_log_term == term && rv->last_log_index < raft_last_index(r));
}

bool rgroup_elect_prevote_answer(const struct raft *r, struct raft_message *m)
{
  struct raft_request_vote_result *res = &m->request_vote_result;
  if (m->type != RAFT_IO_REQUEST_VOTE_RESULT || res->pre_vote != raft_tribool_true ||
      res->vote_granted || r->current_term <= res->term) {
    return false;
  }
  res->term = r->current_term;
  return true;
}

bool rgroup_elect_prevote_refused(const struct raft *r, struct raft_message *m)
{
  const struct raft_request_vote_result *res = &m->request_vote_result;
  if (m->type != RAFT_IO_REQUEST_VOTE_RESULT || r->state != RAFT_CANDIDATE ||
      !r->candidate_state.in_pre_vote || res->pre_vote != raft_tribool_true ||
      res->vote_granted || res->term <= r->current_term + 1) {
    return false;
  }
  /* The pre-vote asked for current_term + 1: a refusal of a later term
   * comes from a voter at that term (rgroup_elect_prevote_answer). Taking
   * a term some replica holds is always safe; the vote this RequestVote
   * asks for is granted only if this replica's log is empty (then the
   * voter's is at least as long, as the log rule requires). */
  raft_term term = res->term;
  struct raft_request_vote *rv = &m->request_vote;
  memset(rv, 0, sizeof *rv);
  m->type = RAFT_IO_REQUEST_VOTE;
  rv->term = term;
  rv->candidate_id = m->server_id;
  rv->last_log_index = 0;
  rv->last_log_term = 0;
  rv->disrupt_leader = false;
  rv->pre_vote = false;
  return true;
}

bool rgroup_elect_second_vote(const struct raft *r, const struct raft_message *m)
{
  if (m->type != RAFT_IO_REQUEST_VOTE || m->request_vote.pre_vote || r->transfer == NULL) {
    return false;
  }
  const struct raft_request_vote *rv = &m->request_vote;
  /* A later term clears the vote before raft counts it (recvBumpCurrentTerm):
   * only a request of the term already voted in is a second vote. */
  return rv->candidate_id == r->transfer->id && rv->term == r->current_term && r->voted_for != 0 &&
         r->voted_for != rv->candidate_id;
}

bool rgroup_elect_same_term_leader(const struct raft *r, const struct raft_message *m)
{
  if (r->state != RAFT_LEADER) {
    return false;
  }
  if (m->type == RAFT_IO_APPEND_ENTRIES) {
    return m->append_entries.term == r->current_term;
  }
  return m->type == RAFT_IO_INSTALL_SNAPSHOT && m->install_snapshot.term == r->current_term;
}

/* The short election timeout until a leader is known, without a gone node
 * (RGROUP_ELECT_START). */
static bool rgroup_elect_hurry(struct rgroup *rg)
{
  if (rg->elect_gone != 0 || !rgroup_elect_raft_up(rg) ||
      !rgroup_elect_start_timer(&rg->raft, rgroup_elect_short_ms(rg))) {
    return false;
  }
  rg->elect_gone = RGROUP_ELECT_START;
  rg->elect_rank = 0;
  rg->elect_since_ms = uv_now(rg->loop);
  rg->elect_fired = true; /* nothing to hand itself: the timer does it */
  return true;
}

/* A replica of a group just bootstrapped (nothing in its log but the
 * configuration) that is not the preferred leader: it lets the preferred
 * replica's short timeout run out first. When the preferred replica does
 * not stand (its node is down), raft's full timeout elects another, and
 * from its first candidacy on it hurries as usual. */
static bool rgroup_elect_defers_at_birth(struct rgroup *rg)
{
  return !rg->opts.join && !rg->no_preferred_leader && rg->preferred_id != 0 &&
         rg->preferred_id != rg->self_id && raft_last_index(&rg->raft) <= 1;
}

void rgroup_elect_on_start(struct rgroup *rg)
{
  if (rgroup_elect_defers_at_birth(rg)) {
    return;
  }
  (void)rgroup_elect_hurry(rg);
}

void rgroup_elect_on_candidacy(struct rgroup *rg)
{
  if (rgroup_elect_hurry(rg)) {
    log_debug("rgroup", "group %llu: replica %llu stands: short election timeout until a leader "
              "is known",
              (unsigned long long)rg->group_id, (unsigned long long)rg->self_id);
  }
}

void rgroup_elect_on_vote_request(struct rgroup *rg, const struct raft_message *m)
{
  if (rg->elect_gone != 0 || !rgroup_elect_raft_up(rg) || !rgroup_elect_outlogged(&rg->raft, m)) {
    return;
  }
  if (rgroup_elect_hurry(rg)) {
    log_info("rgroup", "group %llu: replica %llu: no leader, and its log is ahead of candidate "
             "%llu's: short election timeout",
             (unsigned long long)rg->group_id, (unsigned long long)rg->self_id,
             (unsigned long long)m->request_vote.candidate_id);
  }
}

void rgroup_elect_check(struct rgroup *rg)
{
  if (rg->elect_gone == 0) {
    return;
  }
  if (!rgroup_elect_raft_up(rg)) {
    rgroup_elect_end(rg, "no longer running");
    return;
  }
  raft_id lid = 0;
  const char *addr = NULL;
  raft_leader(&rg->raft, &lid, &addr);
  if (lid != 0 && lid != rg->elect_gone) {
    rgroup_elect_end(rg, lid == rg->self_id ? "leads" : "a new leader is known");
    return;
  }
  uint64_t waited = uv_now(rg->loop) - rg->elect_since_ms;
  if (waited >= RGROUP_ELECT_GIVE_UP_MS) {
    rgroup_elect_end(rg, "no leader yet, back to the configured election timeout");
    return;
  }
  /* Not while entries received are still being written: raft 0.15 would
   * ask for votes with a last index that is only in memory (docs/raft-0.15.md,
   * rows 4 and 5; upstream later ignores TimeoutNow then). The append's
   * completion checks again (rgroup_raft.c). */
  unsigned stagger = rgroup_elect_short_ms(rg);
  if (!rg->elect_fired && waited >= (uint64_t)rg->elect_rank * stagger &&
      rg->raft.last_stored >= raft_last_index(&rg->raft)) {
    rgroup_elect_fire(rg);
  }
}
