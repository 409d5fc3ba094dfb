/* rgroup_raft.c - the Raft instance under a partition replica: open and
 * reopen, the raft_io interposers, the latch after a failed write, the
 * barrier at the start of a term and the transfer requests (rgroup_raft.h).
 *
 * Why each interposer exists (docs/raft-0.15.md):
 *   send      refuses messages with no address (35479fc); sees the TimeoutNow
 *             of a transfer, to free the request only after it (row 7); sees
 *             a new leader's first AppendEntries (row 1); bounds the entries
 *             of an AppendEntries (rgroup_cap.h).
 *   append    sees a failed write: latch and recover (rows 2, 3); refuses
 *             every write after that, so none lands at a wrong index.
 *   set_term, set_vote, truncate
 *             the other writes: latch and recover likewise.
 *   start     to interpose the receive and tick callbacks.
 *   recv      holds back (drops) AppendEntries results of a term until the
 *             leader's first entry of that term is durable (row 1); drops
 *             everything once the instance is latched; resumes a leader
 *             right after a bounded AppendEntries (rgroup_cap.h).
 *   tick      none once the instance is latched; rgroup's own tick rides
 *             on it (one timer per group). */
#include "cluster/rgroup_raft.h"

#include "cluster/raft_err.h"
#include "cluster/raft_files.h"
#include "cluster/rgroup_compact.h"
#include "cluster/rgroup_fsm.h"
#include "cluster/rgroup_pace.h"
#include "cluster/rgroup_ticker.h"
#include "common/err.h"
#include "common/log.h"

#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* One leadership transfer. raft 0.15 embeds the TimeoutNow send in struct
 * raft_transfer and may call the transfer's callback before that send
 * completes (c6cfe58): the request lives until both are over. */
struct rgroup_transfer {
  struct raft_transfer req; /* first: raft hands back &req */
  struct rgroup *rg;
  bool done;         /* its callback fired */
  bool send_pending; /* its TimeoutNow send has not called back */
  struct rgroup_transfer *next;
};

/* One interposed append: raft's request and callback, called on completion. */
struct rgroup_append {
  struct raft_io_append req; /* the one raft_uv sees */
  struct raft_io_append *orig;
  raft_io_append_cb cb;
  struct rgroup *rg;
};

static struct rgroup *rgroup_raft_of(struct raft_io *io)
{
  return (struct rgroup *)((char *)io - offsetof(struct rgroup, wio.io));
}

/* ---- transfers ---- */

static void rgroup_raft_transfer_maybe_free(struct rgroup *rg, struct rgroup_transfer *t)
{
  if (!t->done || t->send_pending) {
    return;
  }
  for (struct rgroup_transfer **p = &rg->transfers; *p != NULL; p = &(*p)->next) {
    if (*p == t) {
      *p = t->next;
      break;
    }
  }
  free(t);
}

static void rgroup_raft_on_transfer(struct raft_transfer *req)
{
  struct rgroup_transfer *t = (struct rgroup_transfer *)req;
  struct rgroup *rg = t->rg;
  t->done = true;
  rgroup_raft_transfer_maybe_free(rg, t);
  rgroup_on_transfer_done(rg);
}

static void rgroup_raft_on_timeout_now_sent(struct raft_io_send *send, int status)
{
  (void)status;
  struct rgroup_transfer *t =
      (struct rgroup_transfer *)((char *)send - offsetof(struct rgroup_transfer, req.send));
  t->send_pending = false;
  rgroup_raft_transfer_maybe_free(t->rg, t);
}

int rgroup_raft_transfer(struct rgroup *rg, uint64_t to)
{
  struct rgroup_transfer *t = calloc(1, sizeof *t);
  if (t == NULL) {
    return RAFT_NOMEM;
  }
  t->rg = rg;
  t->req.data = rg;
  /* Listed before raft can see it, so any callback finds it listed. */
  t->next = rg->transfers;
  rg->transfers = t;
  int rv = raft_transfer(&rg->raft, &t->req, to, rgroup_raft_on_transfer);
  if (rv != 0) {
    /* raft keeps no reference when it refuses, and a TimeoutNow it failed
     * to send never calls back. */
    t->done = true;
    t->send_pending = false;
    rgroup_raft_transfer_maybe_free(rg, t);
  }
  return rv;
}

static void rgroup_raft_free_transfers(struct rgroup *rg)
{
  while (rg->transfers != NULL) {
    struct rgroup_transfer *t = rg->transfers;
    rg->transfers = t->next;
    free(t);
  }
}

/* ---- the barrier at the start of a term ---- */

void rgroup_raft_note_append(struct rgroup *rg)
{
  if (rg->term_appended != rg->raft.current_term) {
    rg->term_appended = rg->raft.current_term;
    rg->term_first_index = raft_last_index(&rg->raft);
  }
}

static void rgroup_raft_on_barrier(struct raft_barrier *req, int status)
{
  (void)status; /* failed: leadership was lost; nothing waits for it */
  free(req);
}

int rgroup_raft_barrier(struct rgroup *rg)
{
  struct raft_barrier *req = calloc(1, sizeof *req);
  if (req == NULL) {
    return RAFT_NOMEM;
  }
  req->data = rg;
  int rv = raft_barrier(&rg->raft, req, rgroup_raft_on_barrier);
  if (rv != 0) {
    free(req);
    return rv;
  }
  rgroup_raft_note_append(rg);
  return 0;
}

static void rgroup_raft_io_recv(struct raft_io *io, struct raft_message *message);
static void rgroup_raft_want_check(struct rgroup *rg);

/* Gives raft the InstallSnapshot held while its own snapshot was in
 * flight, once it is done (raftfix_snapshot_hold); until then asks again
 * at the next iteration. */
static void rgroup_raft_release_held(struct rgroup *rg)
{
  if (rg->snap_held.m == NULL || !rg->raft_open || rg->raft_failed) {
    return; /* (freed at close) */
  }
  struct raft_message *m = raftfix_snapshot_release(&rg->snap_held, &rg->raft);
  if (m == NULL) {
    rgroup_raft_want_check(rg);
    return;
  }
  rgroup_raft_io_recv(&rg->wio.io, m);
  free(m);
}

/* Runs after the poll phase of the iteration in which this replica became
 * leader, before the next poll: no follower's reply to this term's first
 * AppendEntries can have been read yet. Also after an append completed
 * while a prompt election waited for it (rgroup_elect.c), and after an
 * InstallSnapshot was held (rgroup_raft_release_held). */
static void rgroup_raft_on_check(uv_check_t *h)
{
  struct rgroup *rg = h->data;
  uv_check_stop(h);
  rgroup_raft_release_held(rg);
  struct raft *r = &rg->raft;
  if (rg->raft_open && !rg->raft_failed && rg->state == RGROUP_RUNNING) {
    rgroup_elect_check(rg);
  }
  if (rg->state != RGROUP_RUNNING || rg->raft_failed || raft_state(r) != RAFT_LEADER ||
      rg->term_appended == r->current_term) {
    return;
  }
  int rv = rgroup_raft_barrier(rg);
  if (rv != 0) {
    /* (RAFT_NOMEM: the next message received re-arms the check) */
    log_warn("rgroup", "group %llu: barrier at the start of term %llu: %s",
             (unsigned long long)rg->group_id, (unsigned long long)r->current_term,
             raft_strerror(rv));
    return;
  }
  rg->barriers++;
  log_info("rgroup", "group %llu: replica %llu leads term %llu: barrier at index %llu",
           (unsigned long long)rg->group_id, (unsigned long long)rg->self_id,
           (unsigned long long)r->current_term, (unsigned long long)rg->term_first_index);
  if (rg->on_leading != NULL) {
    rg->on_leading(rg);
  }
}

/* Runs rgroup_raft_on_check in this loop iteration's check phase. Out of
 * memory, the next tick's rgroup_raft_ensure_barrier asks again. */
static void rgroup_raft_want_check(struct rgroup *rg)
{
  if (rg->barrier_check == NULL) {
    rg->barrier_check = malloc(sizeof *rg->barrier_check);
    if (rg->barrier_check == NULL) {
      return;
    }
    uv_check_init(rg->loop, rg->barrier_check); /* cannot fail: no system call */
    rg->barrier_check->data = rg;
  }
  if (!uv_is_active((uv_handle_t *)rg->barrier_check)) {
    uv_check_start(rg->barrier_check, rgroup_raft_on_check);
  }
}

void rgroup_raft_ensure_barrier(struct rgroup *rg)
{
  if (rg->state == RGROUP_RUNNING && !rg->raft_failed && raft_state(&rg->raft) == RAFT_LEADER &&
      rg->term_appended != rg->raft.current_term) {
    rgroup_raft_want_check(rg);
  }
}

/* ---- the interposers ---- */

static int rgroup_raft_refuse(struct rgroup *rg)
{
  snprintf(rg->wio.io.errmsg, sizeof rg->wio.io.errmsg,
           "refused: an earlier Raft write of this replica failed");
  return RAFT_IOERR;
}

/* Bounds what one AppendEntries carries (rgroup_cap.h). raft_uv encodes
 * the message before its send returns, so a changed copy on the stack is
 * enough; raft's request still holds every entry it acquired and releases
 * them all on the callback. */
static int rgroup_raft_send_capped(struct rgroup *rg, struct raft_io_send *req,
                                   const struct raft_message *message, raft_io_send_cb cb)
{
  struct raft *r = &rg->raft;
  struct raft_message m = *message;
  if (m.type != RAFT_IO_APPEND_ENTRIES || r->state != RAFT_LEADER) {
    return rg->io_ops.send(&rg->wio.io, req, message, cb);
  }
  unsigned n = rgroup_cap_count(&m.append_entries);
  if (n == m.append_entries.n_entries) {
    return rg->io_ops.send(&rg->wio.io, req, message, cb);
  }
  m.append_entries.n_entries = n;
  int rv = rg->io_ops.send(&rg->wio.io, req, &m, cb);
  if (rv == 0) {
    rgroup_cap_sent(&rg->cap, r->current_term, m.server_id, &m.append_entries, n);
  }
  return rv;
}

int rgroup_raft_check_destination(const struct raft_message *m)
{
  return m->server_address == NULL ? RAFT_NOCONNECTION : 0;
}

static int rgroup_raft_io_send(struct raft_io *io, struct raft_io_send *req,
                               const struct raft_message *message, raft_io_send_cb cb)
{
  struct rgroup *rg = rgroup_raft_of(io);
  struct raft *r = &rg->raft;
  rg->raft_sent++;
  if (message->type == RAFT_IO_INSTALL_SNAPSHOT) {
    rg->snapshots_sent++; /* for the node's metrics */
  }
  int rv = rgroup_raft_check_destination(message);
  if (rv != 0) {
    return rv;
  }
  if (message->type == RAFT_IO_REQUEST_VOTE_RESULT) {
    struct raft_message copy = *message; /* encoded during the call */
    if (rgroup_elect_prevote_answer(r, &copy)) {
      return rg->io_ops.send(io, req, &copy, cb);
    }
  }
  if (message->type == RAFT_IO_APPEND_ENTRIES && r->state == RAFT_LEADER &&
      rg->term_appended != r->current_term) {
    rgroup_raft_want_check(rg); /* raft 0.15 sends heartbeats at conversion */
  }
  struct raft_message clamped; /* encoded during the send call: the stack will do */
  if (raftfix_clamp(&rg->clamp, message, &clamped)) {
    return rg->io_ops.send(io, req, &clamped, cb);
  }
  if (message->type == RAFT_IO_TIMEOUT_NOW && r->transfer != NULL && req == &r->transfer->send &&
      cb == NULL) {
    struct rgroup_transfer *t = (struct rgroup_transfer *)r->transfer;
    rv = rg->io_ops.send(io, req, message, rgroup_raft_on_timeout_now_sent);
    if (rv == 0) {
      t->send_pending = true;
    }
    return rv;
  }
  return rgroup_raft_send_capped(rg, req, message, cb);
}

static void rgroup_raft_on_append(struct raft_io_append *req, int status)
{
  struct rgroup_append *a = req->data;
  struct rgroup *rg = a->rg;
  struct raft_io_append *orig = a->orig;
  raft_io_append_cb cb = a->cb;
  free(a);
  if (status != 0 && !rg->raft_closing) {
    /* Latch before raft sees the failure: its callbacks (the apply
     * callback on a leader) must find the replica recovering. (Appends
     * canceled by raft_close are no failure of the disk.) */
    rgroup_raft_fail(rg, status, "appending to the Raft log");
  } else if (status == 0 && !rgroup_store_probation(rg)) {
    rg->recover_delay_ms = 0;
  }
  cb(orig, status);
  /* A prompt election waiting for this write (rgroup_elect.c): after this
   * callback, in the check phase. */
  if (rg->elect_gone != 0) {
    rgroup_raft_want_check(rg);
  }
}

static int rgroup_raft_io_append(struct raft_io *io, struct raft_io_append *req,
                                 const struct raft_entry entries[], unsigned n,
                                 raft_io_append_cb cb)
{
  struct rgroup *rg = rgroup_raft_of(io);
  if (rg->raft_failed) {
    return rgroup_raft_refuse(rg);
  }
  struct rgroup_append *a = malloc(sizeof *a);
  if (a == NULL) {
    return RAFT_NOMEM;
  }
  a->orig = req;
  a->cb = cb;
  a->rg = rg;
  a->req.data = a;
  int rv = rg->io_ops.append(io, &a->req, entries, n, rgroup_raft_on_append);
  if (rv != 0) {
    free(a);
    rgroup_raft_fail(rg, rv, "submitting a Raft log append");
  }
  return rv;
}

static int rgroup_raft_io_set_term(struct raft_io *io, raft_term term)
{
  struct rgroup *rg = rgroup_raft_of(io);
  if (rg->raft_failed) {
    return rgroup_raft_refuse(rg);
  }
  int rv = rg->io_ops.set_term(io, term);
  if (rv != 0) {
    rgroup_raft_fail(rg, rv, "persisting the Raft term");
  }
  return rv;
}

static int rgroup_raft_io_set_vote(struct raft_io *io, raft_id server_id)
{
  struct rgroup *rg = rgroup_raft_of(io);
  if (rg->raft_failed) {
    return rgroup_raft_refuse(rg);
  }
  int rv = rg->io_ops.set_vote(io, server_id);
  if (rv != 0) {
    rgroup_raft_fail(rg, rv, "persisting the Raft vote");
  }
  return rv;
}

static int rgroup_raft_io_truncate(struct raft_io *io, raft_index index)
{
  struct rgroup *rg = rgroup_raft_of(io);
  if (rg->raft_failed) {
    return rgroup_raft_refuse(rg);
  }
  int rv = rg->io_ops.truncate(io, index);
  if (rv != 0) {
    rgroup_raft_fail(rg, rv, "truncating the Raft log");
  }
  return rv;
}

/* Frees what a received message owns, for a message raft never sees: the
 * entries of an AppendEntries (all of one message share one batch, but
 * each distinct batch is freed once) and a snapshot's data and
 * configuration. */
void rgroup_raft_discard(struct raft_message *message)
{
  if (message->type == RAFT_IO_APPEND_ENTRIES) {
    raftfix_discard_entries(&message->append_entries);
  } else if (message->type == RAFT_IO_INSTALL_SNAPSHOT) {
    raftfix_discard_snapshot(&message->install_snapshot);
  }
}

/* Messages raft 0.15 must not see, for Raft's one leader per term: a
 * second vote in a term (rgroup_elect_second_vote), and an AppendEntries
 * or InstallSnapshot of this leader's own term from another replica
 * (rgroup_elect_same_term_leader). The second cannot come from a correct
 * Raft; given to raft 0.15 (built without its assertions) it writes the
 * follower half of its state union over the leader's (the pending
 * membership change pointer takes the sender's id: a SEGV at the next
 * tick). Dropped as lost, with an error, and counted in the node's
 * metrics. Returns whether message was dropped (and freed). */
static bool rgroup_raft_one_leader_per_term(struct rgroup *rg, struct raft_message *message)
{
  struct raft *r = &rg->raft;
  if (rgroup_elect_second_vote(r, message)) {
    rg->second_votes_withheld++;
    log_info("rgroup",
             "group %llu: replica %llu: RequestVote of term %llu from %llu not given to raft: it "
             "voted for %llu in that term (the target of its leadership transfer would get a "
             "second vote)",
             (unsigned long long)rg->group_id, (unsigned long long)rg->self_id,
             (unsigned long long)message->request_vote.term,
             (unsigned long long)message->request_vote.candidate_id,
             (unsigned long long)r->voted_for);
    return true;
  }
  if (rgroup_elect_same_term_leader(r, message)) {
    bool ae = message->type == RAFT_IO_APPEND_ENTRIES;
    rg->second_leaders++;
    log_error("rgroup",
              "group %llu: replica %llu leads term %llu and replica %llu sent an %s of the same "
              "term: dropped",
              (unsigned long long)rg->group_id, (unsigned long long)rg->self_id,
              (unsigned long long)r->current_term, (unsigned long long)message->server_id,
              ae ? "AppendEntries" : "InstallSnapshot");
    rgroup_raft_discard(message);
    return true;
  }
  return false;
}

static void rgroup_raft_io_recv(struct raft_io *io, struct raft_message *message)
{
  struct rgroup *rg = rgroup_raft_of(io);
  struct raft *r = &rg->raft;
  /* A latched instance is closed at the next iteration. Until then it must
   * not act on anything: after a failed leader append raft 0.15 has
   * truncated the entry from its log but not the followers' progress, and
   * a result acknowledging that index crashed it (SEGV in libraft, seen in
   * leader_disk_full once in about 15 runs). Dropped as if lost. */
  if (rg->raft_failed) {
    rgroup_raft_discard(message);
    return;
  }
  /* Whatever the message, the group is no longer idle: back on the fast
   * tick (rgroup_ticker.h), and a follower sleeps again only once a
   * coalesced beat is all it hears (rgroup_pace_may_sleep). */
  rgroup_ticker_wake(rg);
  rg->coal_follow_ms = 0;
  /* Until the leader's first entry of this term is on its disk (row 1):
   * dropped as if lost, and the barrier is made sure of. */
  if (raftfix_hold_result(r, message, rg->term_appended, rg->term_first_index)) {
    rg->results_held++;
    rgroup_raft_want_check(rg);
    return;
  }
  if (rg->stopping && message->type == RAFT_IO_TIMEOUT_NOW) {
    log_info("rgroup",
             "group %llu: replica %llu refuses leadership from replica %llu: its node is "
             "stopping",
             (unsigned long long)rg->group_id, (unsigned long long)rg->self_id,
             (unsigned long long)message->server_id);
    rgroup_raft_discard(message);
    return;
  }
  if (rgroup_raft_one_leader_per_term(rg, message)) {
    return;
  }
  raftfix_vote_unstick(r, message, rg->opts.election_ms);
  rgroup_elect_on_vote_request(rg, message);
  if (rgroup_elect_prevote_refused(r, message)) {
    log_info("rgroup",
             "group %llu: replica %llu: pre-vote refused by replica %llu of term %llu "
             "(this one's %llu): takes that term",
             (unsigned long long)rg->group_id, (unsigned long long)rg->self_id,
             (unsigned long long)message->server_id, (unsigned long long)message->request_vote.term,
             (unsigned long long)r->current_term);
  }
  if (message->type == RAFT_IO_APPEND_ENTRIES_RESULT) {
    rgroup_cap_on_result(&rg->cap, r, message->server_id, &message->append_entries_result);
  }
  if (raftfix_below_snapshot(r, message)) {
    rg->below_snapshot++;
    log_info("rgroup",
             "group %llu: replica %llu: AppendEntries from %llu starts below its snapshot "
             "(%llu): answered as a heartbeat at the snapshot",
             (unsigned long long)rg->group_id, (unsigned long long)rg->self_id,
             (unsigned long long)message->server_id,
             (unsigned long long)r->log.snapshot.last_index);
  }
  raftfix_conf_keep(&rg->conf_kept, r, message);
  if (raftfix_conf_rollback(&rg->conf_kept, r, message)) {
    log_info("rgroup",
             "group %llu: replica %llu: leader %llu's entries replace an uncommitted "
             "configuration change: rolled back to the committed configuration (kept aside)",
             (unsigned long long)rg->group_id, (unsigned long long)rg->self_id,
             (unsigned long long)message->server_id);
  }
  if (raftfix_snapshot_hold(&rg->snap_held, r, message)) {
    rg->snapshots_held++;
    log_info("rgroup",
             "group %llu: replica %llu: InstallSnapshot from %llu held until its own snapshot "
             "is done (raft 0.15 would drop it unanswered)",
             (unsigned long long)rg->group_id, (unsigned long long)rg->self_id,
             (unsigned long long)message->server_id);
    rgroup_raft_want_check(rg);
    return;
  }
  raftfix_clamp_begin(&rg->clamp, message);
  rg->io_ops.recv(io, message);
  raftfix_clamp_end(&rg->clamp);
  rgroup_pace_on_result(rg, message);
  if (r->state == RAFT_LEADER && rg->term_appended != r->current_term) {
    rgroup_raft_want_check(rg); /* became leader on this message (a vote) */
  }
  rgroup_elect_check(rg); /* a prompt election ends with the first leader known */
}

/* As the leader: bit i set when raft heard from configuration server i
 * since its last contact check (progress[i].recent_recv). */
static uint32_t rgroup_raft_heard_now(struct rgroup *rg)
{
  const struct raft *r = &rg->raft;
  uint32_t mask = 0;
  for (unsigned i = 0; i < r->configuration.n && i < 32; i++) {
    if (r->leader_state.progress[i].recent_recv) {
      mask |= 1u << i;
    }
  }
  return mask;
}

/* Raft's periodic tick, then rgroup's; none for a latched instance
 * (heartbeats would send from the same inconsistent progress as above). */
void rgroup_raft_trim(struct rgroup *rg)
{
  if (!rg->raft_open || rg->raft_closing) {
    return;
  }
  rg->log_trimmed += raftfix_log_trim(&rg->raft);
}

void rgroup_raft_tick(struct rgroup *rg)
{
  /* A stopping replica that does not lead starts no election (rgroup.h,
   * rgroup_handoff); raft 0.15's follower and candidate ticks do nothing
   * else. */
  if (rg->stopping && raft_state(&rg->raft) != RAFT_LEADER) {
    return;
  }
  if (!rg->raft_failed) {
    /* While its term or vote record is not durable, a candidate's
     * RequestVotes (a voter's answer) are held (riow_mux.h): its election
     * clock starts when they leave, not before, or a short election
     * timeout (rgroup_elect.c) runs out under a slow write job and the
     * election restarts in a new term, which needs another record. */
    if (rgroup_wal_meta_pending(rg) && raft_state(&rg->raft) != RAFT_LEADER) {
      rg->raft.election_timer_start = rg->raft.io->time(rg->raft.io);
    }
    rgroup_coal_vouch(rg);
    bool leading = raft_state(&rg->raft) == RAFT_LEADER;
    uint32_t heard = leading ? rgroup_raft_heard_now(rg) : 0;
    raft_time checked = rg->raft.election_timer_start;
    rg->io_ops.tick(&rg->wio.io);
    /* Raft's contact check (every election timeout) cleared the flags:
     * what they said counts for one more period (rgroup_in_sync). */
    if (!leading || rg->raft.election_timer_start != checked) {
      rg->heard_prev = heard;
    }
    rgroup_on_raft_tick(rg);
  }
}

static void rgroup_raft_io_tick(struct raft_io *io)
{
  rgroup_raft_tick(rgroup_raft_of(io));
}

/* raft_uv's own tick timer while a ticker drives the group: it still
 * fires, once an hour (one extra tick is harmless). */
#define RGROUP_TICK_PARKED_MS (3600u * 1000u)

static int rgroup_raft_io_start(struct raft_io *io, unsigned msecs, raft_io_tick_cb tick,
                                raft_io_recv_cb recv)
{
  struct rgroup *rg = rgroup_raft_of(io);
  rg->io_ops.recv = recv;
  rg->io_ops.tick = tick;
  rg->raft_tick_ms = msecs;
  /* Ticked by the node's ticker: riow_mux then keeps no timer at all
   * (msecs 0); raft_uv's is parked. */
  unsigned io_ms = rg->opts.ticker == NULL ? msecs
                   : rgroup_wal_own_io(rg) ? 0
                                           : RGROUP_TICK_PARKED_MS;
  return rg->io_ops.start(io, io_ms, rgroup_raft_io_tick, rgroup_raft_io_recv);
}

/* Election timers from [T, 1.5T] (rgroup_elect_spread_max). */
static int rgroup_raft_io_random(struct raft_io *io, int min, int max)
{
  struct rgroup *rg = rgroup_raft_of(io);
  return rg->io_ops.random(io, min, rgroup_elect_spread_max(min, max));
}

/* What raft starts from: a change uncommitted in it keeps the snapshot's
 * configuration aside (raftfix_conf_keep_loaded). */
static int rgroup_raft_io_load(struct raft_io *io, raft_term *term, raft_id *voted_for,
                               struct raft_snapshot **snapshot, raft_index *start_index,
                               struct raft_entry *entries[], size_t *n_entries)
{
  struct rgroup *rg = rgroup_raft_of(io);
  int rv = rg->io_ops.load(io, term, voted_for, snapshot, start_index, entries, n_entries);
  if (rv == 0) {
    raftfix_conf_keep_loaded(&rg->conf_kept, *snapshot, *entries, *n_entries);
  }
  return rv;
}

static void rgroup_raft_interpose(struct rgroup *rg)
{
  rg->io_ops.send = rg->wio.io.send;
  rg->io_ops.append = rg->wio.io.append;
  rg->io_ops.start = rg->wio.io.start;
  rg->io_ops.set_term = rg->wio.io.set_term;
  rg->io_ops.set_vote = rg->wio.io.set_vote;
  rg->io_ops.truncate = rg->wio.io.truncate;
  rg->io_ops.random = rg->wio.io.random;
  rg->io_ops.load = rg->wio.io.load;
  rg->wio.io.load = rgroup_raft_io_load;
  rg->wio.io.send = rgroup_raft_io_send;
  rg->wio.io.append = rgroup_raft_io_append;
  rg->wio.io.start = rgroup_raft_io_start;
  rg->wio.io.set_term = rgroup_raft_io_set_term;
  rg->wio.io.set_vote = rgroup_raft_io_set_vote;
  rg->wio.io.truncate = rgroup_raft_io_truncate;
  rg->wio.io.random = rgroup_raft_io_random;
}

/* ---- open, close, recover ---- */

/* raft 0.15 aborts the process on some damaged logs and silently drops
 * valid entries on others (raft_files.h): the files are checked first, a
 * torn tail is cut, anything else keeps this replica closed. */
static int rgroup_raft_check_files(struct rgroup *rg, const char *raft_dir)
{
  struct raft_files_report rep;
  int rv = raft_files_check(raft_dir, &rep);
  if (rv != 0) {
    rgroup_set_errmsg(rg, "group %llu: replica %llu stays closed: its Raft files are refused: %s",
                      (unsigned long long)rg->group_id, (unsigned long long)rg->self_id,
                      rep.errmsg);
    return rv;
  }
  if (rep.repaired > 0) {
    log_warn("rgroup", "group %llu: replica %llu: %s", (unsigned long long)rg->group_id,
             (unsigned long long)rg->self_id, rep.note);
  }
  return 0;
}

/* The replica's raft_io, before the interposers: its own on the node's log
 * with the mux (riow_mux.h), else raft_uv's, with its storage in the
 * node's log under --raft-log node (riow_uv.h). Returns 0 or a negative
 * code with rg->errmsg set; nothing of the io to undo then. */
static int rgroup_raft_io_init(struct rgroup *rg, const char *raft_dir)
{
  if (rgroup_wal_own_io(rg)) {
    return rgroup_wal_own_io_init(rg);
  }
  int rv = raft_uv_init(&rg->wio.io, rg->loop, raft_dir, rg->rt);
  if (rv != 0) {
    rgroup_set_errmsg(rg, "group %llu: raft I/O in %.120s: %.100s",
                      (unsigned long long)rg->group_id, raft_dir, rg->wio.io.errmsg);
    return raft_err_to_cairn(rv);
  }
  raft_uv_set_segment_size(&rg->wio.io, rg->opts.raft_segment_size);
  /* Its recovery moves a corrupt segment aside and loads without it:
   * entries this replica reported durable would vanish. Fail instead. */
  raft_uv_set_auto_recovery(&rg->wio.io, false);
  raft_uv_set_connect_retry_delay(&rg->wio.io, 100);
  if (rg->opts.wal != NULL) {
    rv = rgroup_wal_attach(rg);
    if (rv != 0) {
      raft_uv_close(&rg->wio.io);
      return rv;
    }
  }
  return 0;
}

/* Undoes rgroup_raft_io_init for an io raft_init refused. */
static void rgroup_raft_io_release(struct rgroup *rg)
{
  if (rgroup_wal_own_io(rg)) {
    riow_mux_release(&rg->wio.mux);
    return;
  }
  if (rg->opts.wal != NULL) {
    riow_release(&rg->wio.uv.riow);
  }
  raft_uv_close(&rg->wio.io);
}

/* raft_uv's transport (--raft-mux off), made with each Raft instance: it
 * routes Raft's connections and this replica's fetches. With the mux the
 * replica's fetch route does (rgroup_open_fetch) and none is made. */
static int rgroup_raft_transport_init(struct rgroup *rg)
{
  if (rgroup_wal_own_io(rg)) {
    return 0;
  }
  rg->rt = malloc(sizeof *rg->rt);
  int rv = rg->rt == NULL ? CAIRN_ENOMEM : transport_group_init(rg->tr, rg->rt, rg->group_id);
  if (rv != 0) {
    free(rg->rt);
    rg->rt = NULL;
    return rv;
  }
  /* The fetch server (initialized once, at open) keeps serving across a
   * reopen; the new transport routes to it. */
  transport_group_set_fetch(rg->rt, fetch_server_accept, &rg->fetch);
  return 0;
}

static void rgroup_raft_transport_release(struct rgroup *rg)
{
  if (rg->rt != NULL) {
    transport_group_release(rg->rt);
    free(rg->rt);
    rg->rt = NULL;
  }
}

int rgroup_raft_init(struct rgroup *rg)
{
  char raft_dir[PATH_MAX];
  if (snprintf(raft_dir, sizeof raft_dir, "%s/raft", rg->dir) >= (int)sizeof raft_dir) {
    rgroup_set_errmsg(rg, "%s: path too long", rg->dir);
    return CAIRN_EINVAL;
  }
  int rv = rgroup_wal_check_mark(rg);
  if (rv == 0) {
    rv = rgroup_raft_check_files(rg, raft_dir);
  }
  if (rv != 0) {
    return rv;
  }
  rv = rgroup_raft_transport_init(rg);
  if (rv != 0) {
    rgroup_set_errmsg(rg, "group %llu: transport: %s", (unsigned long long)rg->group_id,
                      cairn_strerror(rv));
    return rv;
  }
  rv = rgroup_raft_io_init(rg, raft_dir);
  if (rv != 0) {
    rgroup_raft_transport_release(rg);
    return rv;
  }
  rgroup_raft_interpose(rg);
  /* raft 0.15's raft_uv implements async_work (uv_work.c) but still says
   * io->version 1, and raft_init refuses an fsm with snapshot_async on an
   * io below version 2 (upstream 269e541, 0.17.1, sets 2). The method is
   * there, so say so: the snapshot's fsyncs then run on the thread pool
   * (rgroup_fsm.c; docs/raft-0.15.md, "Asynchronous snapshots"). */
  if (rg->wio.io.version < 2 && rg->wio.io.async_work != NULL) {
    rg->wio.io.version = 2;
  }
  rgroup_fsm_init(rg);
  rv = raft_init(&rg->raft, &rg->wio.io, &rg->fsm, rg->self_id, rg->self_address);
  if (rv != 0) {
    rgroup_set_errmsg(rg, "group %llu: raft_init: %s", (unsigned long long)rg->group_id,
                      raft_errmsg(&rg->raft));
    rgroup_raft_io_release(rg);
    rgroup_raft_transport_release(rg);
    return raft_err_to_cairn(rv);
  }
  rg->raft.data = rg;
  rg->raft_open = true;
  rg->raft_failed = false;
  rg->term_appended = 0;
  rg->term_first_index = 0;
  rg->last_role = RAFT_UNAVAILABLE;
  uint64_t bounded = rg->cap.bounded; /* a counter for the node's life */
  memset(&rg->cap, 0, sizeof rg->cap);
  rg->cap.bounded = bounded;
  return 0;
}

void rgroup_raft_configure(struct rgroup *rg)
{
  raft_set_heartbeat_timeout(&rg->raft, rg->opts.heartbeat_ms);
  raft_set_install_snapshot_timeout(&rg->raft, raftfix_install_snapshot_ms(rg->opts.election_ms));
  rg->coal_quiet = false; /* a reopened instance starts ACTIVE (rgroup_pace.h) */
  memset(rg->coal_acks, 0, sizeof rg->coal_acks);
  rg->coal_vouch_node = 0;
  raft_set_election_timeout(&rg->raft, rg->opts.election_ms);
  /* Pre-vote: a candidate first asks whether it could win, without bumping
   * its term. Without it, raft 0.15's first follower to time out after a
   * leader froze bumped its term, lost (the others still named the leader),
   * and the next round came another randomized timeout (T..2T) later. With
   * it and raftfix_vote_unstick, the first follower whose timer runs
   * out wins (with three replicas the earlier of two timers: 1.33T on
   * average), and a replica cut off and back does not depose a healthy
   * leader with a bumped term. Transfers and prompt elections (TimeoutNow:
   * rgroup_elect.c) skip it. */
  raft_set_pre_vote(&rg->raft, true);
  rg->compact_armed = false; /* a new instance */
  rg->snapshot_soon = false;
  rgroup_compact_tune(rg, rg->opts.snapshot_threshold, rg->opts.snapshot_trailing);
}

static void rgroup_raft_on_closed(struct raft *r)
{
  struct rgroup *rg = r->data;
  if (!rgroup_wal_own_io(rg)) {
    raft_uv_close(&rg->wio.io); /* frees raft_uv's state; its handles are closed */
  }
  rgroup_raft_transport_release(rg);
  /* Nothing of this instance can reference a transfer any more. */
  rgroup_raft_free_transfers(rg);
  rg->transferring = false;
  if (rg->barrier_check != NULL) {
    uv_check_stop(rg->barrier_check);
  }
  rg->raft_closing = false;
  rgroup_on_raft_closed(rg);
}

void rgroup_raft_close(struct rgroup *rg)
{
  rgroup_coal_forget(rg);
  rgroup_ticker_remove(rg);
  rg->raft_open = false;
  rg->raft_closing = true;
  rg->raft.data = rg;
  raft_close(&rg->raft, rgroup_raft_on_closed);
}

/* ---- reviving a PostgreSQL store (rgroup_raft_store_down) ---- */

static void rgroup_raft_reopen(struct rgroup *rg);

static void rgroup_raft_revive_work(uv_work_t *w)
{
  struct rgroup *rg = w->data;
  (void)pgstore_revive_run(rg->revive_job); /* its status goes to revive_end */
}

static void rgroup_raft_revive_done(uv_work_t *w, int status)
{
  struct rgroup *rg = w->data;
  free(w);
  struct pgstore_revive *job = rg->revive_job;
  rg->revive_job = NULL;
  rg->revive_busy = false;
  if (rg->revive_counted) {
    /* The replica closes: the store is closed once every part is. */
    rg->revive_counted = false;
    (void)pgstore_revive_end(NULL, job);
    rgroup_on_part_closed(rg);
    return;
  }
  if (rg->state != RGROUP_RECOVERING || status != 0) {
    (void)pgstore_revive_end(NULL, job);
    if (rg->state == RGROUP_RECOVERING) {
      rgroup_raft_backoff(rg);
    }
    return;
  }
  char reason[200];
  snprintf(reason, sizeof reason, "%.199s", store_errmsg(rg->store)); /* the revive clears it */
  uint64_t since = rg->store_failed_ms;
  int rv = pgstore_revive_end(rg->store, job);
  if (rv != 0) {
    log_warn("rgroup", "group %llu: the PostgreSQL store is still down: %s",
             (unsigned long long)rg->group_id, store_errmsg(rg->store));
    rgroup_raft_backoff(rg);
    return;
  }
  struct store_info info;
  store_info(rg->store, &info);
  rg->store_down = false;
  rg->store_failed_ms = 0;
  rg->store_revives++;
  rg->store_probation = true;
  rg->probation_offset = info.durable_offset;
  rg->probation_start = uv_now(rg->loop);
  rg->probation_since_ms = since;
  /* Kept until the next revive or rgroup_release; without memory the
   * report says only the second half. */
  free(rg->probation_reason);
  rg->probation_reason = malloc(RGROUP_PROBATION_REASON_SIZE);
  if (rg->probation_reason != NULL) {
    snprintf(rg->probation_reason, RGROUP_PROBATION_REASON_SIZE, "%.199s (revived, no write since)",
             reason);
  }
  rgroup_fsm_producers_reload(rg);
  log_warn("rgroup",
           "group %llu: replica %llu: the PostgreSQL store is back (committed up to offset "
           "%lld, Raft index %llu); Raft reopens and applies what follows",
           (unsigned long long)rg->group_id, (unsigned long long)rg->self_id,
           (long long)info.next_offset, (unsigned long long)info.last_index);
  rgroup_raft_reopen(rg);
}

/* Starts a revive of the store on the thread pool (one at a time); its
 * completion reopens Raft, or backs off. */
static void rgroup_raft_revive(struct rgroup *rg)
{
  if (rg->revive_busy) {
    return;
  }
  int rv = pgstore_revive_begin(rg->store, &rg->revive_job);
  if (rv != 0) {
    log_warn("rgroup", "group %llu: reviving the PostgreSQL store: %s",
             (unsigned long long)rg->group_id, cairn_strerror(rv));
    rgroup_raft_backoff(rg);
    return;
  }
  /* Allocated per revive: a replica on another store never needs one. */
  uv_work_t *w = malloc(sizeof *w);
  rv = w == NULL ? UV_ENOMEM : 0;
  if (w != NULL) {
    w->data = rg;
    rv = uv_queue_work(rg->loop, w, rgroup_raft_revive_work, rgroup_raft_revive_done);
  }
  if (rv != 0) {
    free(w);
    (void)pgstore_revive_end(NULL, rg->revive_job);
    rg->revive_job = NULL;
    log_warn("rgroup", "group %llu: reviving the PostgreSQL store: %s",
             (unsigned long long)rg->group_id, uv_strerror(rv));
    rgroup_raft_backoff(rg);
    return;
  }
  rg->revive_busy = true;
}

/* Opens Raft again from what is on disk; on failure, closes what was
 * opened and tries again later. */
static void rgroup_raft_reopen(struct rgroup *rg)
{
  if (rg->store_down) {
    rgroup_raft_revive(rg); /* then the reopen, from its completion */
    return;
  }
  /* A failed write latched the node's log for every group: the first
   * group to reopen rebuilds it from the disk (the others find it so). */
  if (rg->opts.wal != NULL && wal_fatal(rg->opts.wal) != 0) {
    char why[WAL_ERRMSG_SIZE];
    if (wal_revive(rg->opts.wal, why) != 0) {
      log_warn("rgroup", "group %llu: the node's Raft log stays fatal: %s",
               (unsigned long long)rg->group_id, why[0] ? why : "a write is still in flight");
      rgroup_raft_backoff(rg);
      return;
    }
  }
  int rv = rgroup_raft_init(rg);
  if (rv != 0) {
    log_warn("rgroup", "group %llu: reopening Raft: %s", (unsigned long long)rg->group_id,
             rgroup_errmsg(rg));
    rgroup_raft_backoff(rg);
    return;
  }
  rgroup_raft_configure(rg);
  rv = raft_start(&rg->raft);
  if (rv == 0 && !rg->raft_failed && rgroup_ticker_add(rg) != 0) {
    rg->raft_failed = true; /* not ticked: closed and reopened later */
  }
  if (rv != 0 || rg->raft_failed) {
    log_warn("rgroup", "group %llu: restarting Raft: %s", (unsigned long long)rg->group_id,
             rv != 0 ? raft_errmsg(&rg->raft) : "a write failed");
    rgroup_raft_recover_stop(rg);
    rg->raft_failed = true;
    rgroup_raft_close(rg); /* then rgroup_on_raft_closed: backoff */
    return;
  }
  rgroup_raft_trim(rg); /* raft_start loaded the log into 8 KiB tables */
  rgroup_set_state(rg, RGROUP_RUNNING);
  rgroup_elect_on_start(rg);
  rg->recoveries++;
  log_warn("rgroup",
           "group %llu: replica %llu reopened Raft from disk after a failed write "
           "(recovery %llu)",
           (unsigned long long)rg->group_id, (unsigned long long)rg->self_id,
           (unsigned long long)rg->recoveries);
}

static void rgroup_raft_on_timer(uv_timer_t *t)
{
  struct rgroup *rg = t->data;
  switch (rg->state) {
  case RGROUP_TRANSFERRING:
    /* Shutting down anyway: close rather than reopen. */
    rgroup_close(rg, rg->close_cb);
    break;
  case RGROUP_RECOVERING:
    if (rg->raft_open) {
      rgroup_raft_close(rg);
    } else if (!rg->raft_closing) {
      rgroup_raft_reopen(rg);
    }
    break;
  default:
    break;
  }
}

/* Runs rgroup_raft_on_timer after ms. Out of memory, the replica stays
 * RECOVERING (logged, and in its error message): nothing is acknowledged
 * meanwhile, nothing is lost. */
static void rgroup_raft_recover_after(struct rgroup *rg, unsigned ms)
{
  if (rg->recover_timer == NULL) {
    rg->recover_timer = malloc(sizeof *rg->recover_timer);
    if (rg->recover_timer == NULL) {
      rgroup_set_errmsg(rg, "group %llu: out of memory scheduling Raft's reopen",
                        (unsigned long long)rg->group_id);
      log_error("rgroup", "%s", rgroup_errmsg(rg));
      return;
    }
    uv_timer_init(rg->loop, rg->recover_timer); /* cannot fail: no system call */
    rg->recover_timer->data = rg;
  }
  uv_timer_start(rg->recover_timer, rgroup_raft_on_timer, ms, 0);
}

void rgroup_raft_recover_stop(struct rgroup *rg)
{
  if (rg->recover_timer != NULL) {
    uv_timer_stop(rg->recover_timer);
  }
}

void rgroup_raft_backoff(struct rgroup *rg)
{
  unsigned d = rg->recover_delay_ms;
  d = d == 0                           ? RGROUP_RECOVER_MIN_MS
      : d >= RGROUP_RECOVER_MAX_MS / 2 ? RGROUP_RECOVER_MAX_MS
                                       : d * 2;
  rg->recover_delay_ms = d;
  rgroup_raft_recover_after(rg, d);
}

/* Enters RECOVERING and closes Raft on the next iteration (not from
 * inside raft's own callbacks). */
static void rgroup_raft_latch(struct rgroup *rg)
{
  if (rg->state == RGROUP_RUNNING) {
    rgroup_set_state(rg, RGROUP_RECOVERING);
    /* Never entered the log: their producers go to the next leader. */
    rgroup_fail_queue(rg, CAIRN_ENOTLEADER);
  }
  rgroup_raft_recover_after(rg, 0);
}

void rgroup_raft_fail(struct rgroup *rg, int status, const char *what)
{
  if (rg->raft_failed) {
    return;
  }
  rg->raft_failed = true;
  if (rg->state == RGROUP_CLOSING || rg->state == RGROUP_CLOSED) {
    return; /* closing anyway; later writes are refused */
  }
  log_error("rgroup",
            "group %llu: replica %llu: %s failed (%s: %s); no more proposals, Raft is "
            "closed and reopened from disk",
            (unsigned long long)rg->group_id, (unsigned long long)rg->self_id, what,
            cairn_strerror(raft_err_to_cairn(status)), rg->wio.io.errmsg);
  rgroup_raft_latch(rg);
}

void rgroup_raft_store_down(struct rgroup *rg)
{
  if (rg->store_down) {
    return;
  }
  rg->store_down = true;
  rgroup_note_store_failed(rg);
  bool latched = rg->raft_failed; /* a failed write's recovery already runs */
  rg->raft_failed = true;
  if (latched || rg->state == RGROUP_CLOSING || rg->state == RGROUP_CLOSED) {
    return;
  }
  log_error("rgroup",
            "group %llu: replica %llu: its PostgreSQL store failed (%s); it stops applying "
            "and acknowledging until the database answers again",
            (unsigned long long)rg->group_id, (unsigned long long)rg->self_id,
            store_errmsg(rg->store));
  rgroup_raft_latch(rg);
}

static void rgroup_raft_on_handle_closed(uv_handle_t *h)
{
  struct rgroup *rg = h->data;
  free(h);
  rg->handle_closed_cb(rg);
}

unsigned rgroup_raft_handles_close(struct rgroup *rg, void (*done)(struct rgroup *rg))
{
  unsigned n = 0;
  rg->handle_closed_cb = done;
  if (rg->recover_timer != NULL) {
    uv_close((uv_handle_t *)rg->recover_timer, rgroup_raft_on_handle_closed);
    rg->recover_timer = NULL;
    n++;
  }
  if (rg->barrier_check != NULL) {
    uv_close((uv_handle_t *)rg->barrier_check, rgroup_raft_on_handle_closed);
    rg->barrier_check = NULL;
    n++;
  }
  return n;
}
