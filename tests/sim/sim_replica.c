/* sim_replica.c - one simulated replica: a raft_fsm whose apply is Cairn's
 * rgroup_apply_entry() over a memlog store and a producer table (what
 * rgroup_fsm_apply does on a node, minus the catch-up and the libuv
 * timing), the leader's produce queue as rgroup.c keeps it (one entry in
 * flight, the rest coalesced into the next, entries zero-padded to 8
 * bytes), and the start-of-term rules of rgroup_raft.c re-stated for
 * raft_fixture's I/O: a barrier right after a replica becomes leader, and
 * AppendEntries results of its term dropped until its first entry of the
 * term is on its disk (docs/raft-0.15.md, row 1). */
#include "sim.h"

#include "cluster/rgroup_cmd.h"

#include "cluster/producer_state.h"
#include "cluster/rgroup.h"
#include "cluster/rgroup_apply.h"
#include "common/err.h"
#include "storage/memlog.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

struct raft *sim_replica_raft(struct sim_replica *rep)
{
  if (rep->sim->opts.engine == SIM_ENGINE_IO) {
    return rep->raft;
  }
  return raft_fixture_get(&rep->sim->f, rep->index);
}

bool sim_replica_up(struct sim_replica *rep)
{
  if (rep->sim->opts.engine == SIM_ENGINE_IO) {
    return rep->raft != NULL;
  }
  return raft_fixture_alive(&rep->sim->f, rep->index);
}

/* raft_init sets io->data to the instance, whichever engine runs it. */
static struct sim_replica *sim_replica_of_io(struct raft_io *io)
{
  return ((struct raft *)io->data)->fsm->data;
}

/* ---- the state machine ---- */

/* As rgroup_fsm_producers_cover before a command: the log flushed to its
 * end (no crash cuts below it) and the table as of that end saved. */
static int sim_replica_producers_cover(struct sim_replica *rep)
{
  struct store_info info;
  store_info(rep->store, &info);
  free(rep->cmd_table);
  rep->cmd_table = NULL;
  int rv = producer_state_encode(&rep->producers, info.next_offset, info.last_index,
                                 &rep->cmd_table, &rep->cmd_table_len);
  if (rv == 0) {
    rep->flushed_offset = info.next_offset;
  }
  return rv;
}

/* The producer table as a restarted node rebuilds it (rgroup_fsm.c): the
 * saved one when the store still reaches what it covers, then the batches
 * after it; otherwise from the log's start. */
static int sim_replica_producers_rebuild(struct sim_replica *rep)
{
  struct store_info info;
  store_info(rep->store, &info);
  producer_state_close(&rep->producers);
  producer_state_init(&rep->producers);
  int64_t from = info.start_offset;
  if (rep->cmd_table != NULL) {
    int64_t covers = 0;
    int rv =
        producer_state_decode(&rep->producers, rep->cmd_table, rep->cmd_table_len, &covers, NULL);
    if (rv != 0) {
      return rv;
    }
    if (covers < info.start_offset || covers > info.next_offset) {
      sim_fail(rep->sim,
               "replica %u: its saved producer table covers offset %lld, outside its "
               "log [%lld, %lld]",
               rep->index, (long long)covers, (long long)info.start_offset,
               (long long)info.next_offset);
      return CAIRN_ECORRUPT;
    }
    from = covers;
    rep->cmd_tables_used++;
  }
  return rgroup_apply_scan(rep->store, &rep->producers, from, info.next_offset);
}

static int sim_replica_apply(struct raft_fsm *fsm, const struct raft_buffer *buf, void **result)
{
  struct sim_replica *rep = fsm->data;
  struct sim *s = rep->sim;
  /* As rgroup_fsm_apply: raft 0.15 sets last_applied after apply returns. */
  uint64_t index = raft_last_applied(sim_replica_raft(rep)) + 1;
  *result = NULL;
  struct store_info info;
  store_info(rep->store, &info);
  int rv = 0;
  if (rgroup_apply_has_command(buf->base, buf->len)) {
    rv = sim_replica_producers_cover(rep);
  }
  if (rv == 0) {
    rv = rgroup_apply_entry(&rep->ap, rep->store, &rep->producers, buf->base, buf->len, index,
                            &rep->applied);
  }
  if (rv != 0) {
    sim_fail(s, "replica %u: applying entry %llu: %s (%s)", rep->index, (unsigned long long)index,
             cairn_strerror(rv), store_errmsg(rep->store));
    return RAFT_IOERR;
  }
  rep->applies++;
  sim_trace(s, "apply r%u index=%llu batches=%zu appended=%zu at=%lld", rep->index,
            (unsigned long long)index, rep->applied.n, rep->applied.appended,
            (long long)info.next_offset);
  sim_check_applied(s, rep, index, info.next_offset);
  *result = &rep->applied;
  return 0;
}

static int sim_replica_snapshot(struct raft_fsm *fsm, struct raft_buffer *bufs[], unsigned *n)
{
  (void)fsm;
  (void)bufs;
  (void)n;
  return RAFT_BUSY; /* not simulated: the threshold is never reached */
}

static int sim_replica_restore(struct raft_fsm *fsm, struct raft_buffer *buf)
{
  struct sim_replica *rep = fsm->data;
  (void)buf;
  sim_fail(rep->sim, "replica %u: a snapshot restore, which the simulation never takes",
           rep->index);
  return RAFT_CORRUPT;
}

int sim_replica_init(struct sim *s, struct sim_replica *rep, unsigned index)
{
  memset(rep, 0, sizeof *rep);
  rep->sim = s;
  rep->index = index;
  producer_state_init(&rep->producers);
  rgroup_apply_init(&rep->ap);
  struct memlog_opts mo = {0};
  int rv = memlog_new(&mo, &rep->store);
  if (rv != 0) {
    return rv;
  }
  rep->fsm.version = 1;
  rep->fsm.data = rep;
  rep->fsm.apply = sim_replica_apply;
  rep->fsm.snapshot = sim_replica_snapshot;
  rep->fsm.restore = sim_replica_restore;
  return 0;
}

static void sim_replica_on_closed(struct raft *r);

void sim_replica_close(struct sim_replica *rep)
{
  if (rep->raft != NULL) {
    raft_close(rep->raft, sim_replica_on_closed); /* sim_io closes at once */
    rep->raft = NULL;
  }
  sim_io_disk_close(&rep->sio.disk);
  if (rep->store != NULL) {
    store_close(rep->store);
    rep->store = NULL;
  }
  producer_state_close(&rep->producers);
  rgroup_apply_close(&rep->ap);
  free(rep->cmd_table);
  rep->cmd_table = NULL;
}

/* ---- the produce queue (rgroup.c) ---- */

static void sim_replica_fail_list(struct sim_replica *rep, struct sim_req *req, int status)
{
  while (req != NULL) {
    struct sim_req *next = req->next;
    sim_workload_on_result(rep->sim, req, status, -1);
    free(req);
    req = next;
  }
}

static void sim_replica_fail_queue(struct sim_replica *rep, int status)
{
  struct sim_req *q = rep->queue_head;
  rep->queue_head = rep->queue_tail = NULL;
  sim_replica_fail_list(rep, q, status);
}

static void sim_replica_note_append(struct sim_replica *rep)
{
  struct raft *r = sim_replica_raft(rep);
  if (rep->term_appended != r->current_term) {
    rep->term_appended = r->current_term;
    rep->term_first_index = raft_last_index(r);
  }
}

static void sim_replica_propose(struct sim_replica *rep);

static void sim_replica_on_applied(struct raft_apply *apply, int status, void *result)
{
  struct sim_entry *e = apply->data;
  struct sim_replica *rep = e->rep;
  const struct rgroup_applied *ap = result;
  rep->inflight = NULL;
  if (status != 0 || ap == NULL || ap->n == 0) {
    /* rgroup_entry_failed: in doubt unless refused before the append. */
    sim_trace(rep->sim, "entry failed r%u status=%s", rep->index, raft_strerror(status));
    sim_replica_fail_list(rep, e->reqs,
                          status == RAFT_NOTLEADER ? CAIRN_ENOTLEADER : CAIRN_EINDOUBT);
    free(e);
    sim_replica_fail_queue(rep, CAIRN_ENOTLEADER);
    return;
  }
  size_t i = 0;
  for (struct sim_req *req = e->reqs, *next; req != NULL; req = next, i++) {
    next = req->next;
    if (i < ap->n) {
      sim_workload_on_result(rep->sim, req, ap->results[i].status, ap->results[i].offset);
    } else {
      sim_workload_on_result(rep->sim, req, CAIRN_EINDOUBT, -1);
    }
    free(req);
  }
  free(e);
  sim_replica_propose(rep);
}

/* rgroup_propose: the queue (up to SIM_MAX_ENTRY_BYTES, at least one batch)
 * as one entry, zero-padded to 8 bytes. */
static void sim_replica_propose(struct sim_replica *rep)
{
  if (rep->inflight != NULL || rep->queue_head == NULL) {
    return;
  }
  struct sim_req *head = rep->queue_head, *last = NULL;
  size_t bytes = 0;
  for (struct sim_req *r = head; r != NULL; r = r->next) {
    if (last != NULL && bytes + r->b->len > SIM_MAX_ENTRY_BYTES) {
      break;
    }
    bytes += r->b->len;
    last = r;
  }
  rep->queue_head = last->next;
  if (rep->queue_head == NULL) {
    rep->queue_tail = NULL;
  }
  last->next = NULL;
  size_t padded = (bytes + 7) & ~(size_t)7;
  struct sim_entry *e = calloc(1, sizeof *e);
  struct raft_buffer buf = {.base = raft_malloc(padded), .len = padded};
  if (e == NULL || buf.base == NULL) {
    free(e);
    raft_free(buf.base);
    sim_replica_fail_list(rep, head, CAIRN_ENOMEM);
    return;
  }
  size_t pos = 0;
  for (struct sim_req *r = head; r != NULL; r = r->next) {
    memcpy((uint8_t *)buf.base + pos, r->b->bytes, r->b->len);
    pos += r->b->len;
  }
  memset((uint8_t *)buf.base + pos, 0, padded - pos);
  e->rep = rep;
  e->reqs = head;
  e->apply.data = e;
  struct raft *r = sim_replica_raft(rep);
  int rv = raft_apply(r, &e->apply, &buf, 1, sim_replica_on_applied);
  if (rv != 0) {
    raft_free(buf.base);
    free(e);
    sim_replica_fail_list(rep, head, CAIRN_ENOTLEADER);
    return;
  }
  rep->inflight = e;
  rep->sim->stats.entries++;
  sim_trace(rep->sim, "propose r%u index=%llu bytes=%zu term=%llu", rep->index,
            (unsigned long long)raft_last_index(r), padded, (unsigned long long)r->current_term);
  sim_replica_note_append(rep);
}

struct sim_cmd_entry {
  struct raft_apply apply;
  struct sim_replica *rep;
};

static void sim_replica_on_command(struct raft_apply *apply, int status, void *result)
{
  (void)result;
  struct sim_cmd_entry *e = apply->data;
  sim_trace(e->rep->sim, "log-start r%u status=%s", e->rep->index,
            status == 0 ? "ok" : raft_strerror(status));
  free(e);
}

int sim_replica_log_start(struct sim_replica *rep, int64_t offset)
{
  struct raft *r = sim_replica_raft(rep);
  if (raft_state(r) != RAFT_LEADER) {
    return CAIRN_ENOTLEADER;
  }
  struct sim_cmd_entry *e = calloc(1, sizeof *e);
  struct raft_buffer buf = {.base = raft_malloc(RGROUP_CMD_SIZE), .len = RGROUP_CMD_SIZE};
  if (e == NULL || buf.base == NULL) {
    free(e);
    raft_free(buf.base);
    return CAIRN_ENOMEM;
  }
  struct rgroup_cmd c = {.kind = RGROUP_CMD_LOG_START, .offset = offset};
  rgroup_cmd_encode(&c, buf.base); /* 40 bytes: already a multiple of 8 */
  e->rep = rep;
  e->apply.data = e;
  int rv = raft_apply(r, &e->apply, &buf, 1, sim_replica_on_command);
  if (rv != 0) {
    raft_free(buf.base);
    free(e);
    return -rv;
  }
  sim_trace(rep->sim, "propose r%u log-start %lld index=%llu", rep->index, (long long)offset,
            (unsigned long long)raft_last_index(r));
  sim_replica_note_append(rep);
  return 0;
}

int sim_replica_produce(struct sim_replica *rep, struct sim_req *req)
{
  if (raft_state(sim_replica_raft(rep)) != RAFT_LEADER) {
    return CAIRN_ENOTLEADER;
  }
  req->next = NULL;
  if (rep->queue_tail != NULL) {
    rep->queue_tail->next = req;
  } else {
    rep->queue_head = req;
  }
  rep->queue_tail = req;
  sim_replica_propose(rep);
  return 0;
}

/* ---- the start of a term (rgroup_raft.c) ---- */

static void sim_replica_on_barrier(struct raft_barrier *req, int status)
{
  (void)status;
  free(req);
}

/* Runs after every fixture step: a replica that became leader during it
 * has not read any reply to its first AppendEntries yet (they need the
 * network latency, at least 1 ms), as rgroup's uv_check runs before the
 * next poll. */
void sim_replica_after_step(struct sim_replica *rep)
{
  struct raft *r = sim_replica_raft(rep);
  if (sim_replica_up(rep) && rep->sim->opts.engine == SIM_ENGINE_IO &&
      !rep->sim->opts.wide_timers && !rep->start_short && raft_state(r) == RAFT_CANDIDATE) {
    /* rgroup_elect_on_candidacy: a candidate retries on the short timeout */
    rep->start_short = rgroup_elect_start_timer(r, 2 * SIM_HEARTBEAT_MS);
    rep->started_at = r->io->time(r->io);
    rep->start_short_used += rep->start_short;
  }
  if (!sim_replica_up(rep) || raft_state(r) != RAFT_LEADER ||
      rep->term_appended == r->current_term) {
    return;
  }
  struct raft_barrier *req = calloc(1, sizeof *req);
  if (req == NULL) {
    return;
  }
  if (raft_barrier(r, req, sim_replica_on_barrier) != 0) {
    free(req);
    return;
  }
  sim_replica_note_append(rep);
  rep->barriers++;
  sim_trace(rep->sim, "barrier r%u term=%llu index=%llu", rep->index,
            (unsigned long long)r->current_term, (unsigned long long)rep->term_first_index);
}

/* With --trace: the Raft messages a replica receives, with what a replay
 * of a divergence needs (terms, indexes, the entries' terms). */
static void sim_replica_trace_msg(struct sim_replica *rep, const struct raft_message *m)
{
  struct sim *s = rep->sim;
  if (!s->opts.trace) {
    return;
  }
  unsigned from = (unsigned)m->server_id - 1;
  switch (m->type) {
  case RAFT_IO_APPEND_ENTRIES: {
    const struct raft_append_entries *ae = &m->append_entries;
    sim_trace(s, "recv r%u<-r%u ae term=%llu prev=%llu/%llu n=%u first-term=%llu commit=%llu",
              rep->index, from, (unsigned long long)ae->term,
              (unsigned long long)ae->prev_log_index, (unsigned long long)ae->prev_log_term,
              ae->n_entries, ae->n_entries ? (unsigned long long)ae->entries[0].term : 0ull,
              (unsigned long long)ae->leader_commit);
    break;
  }
  case RAFT_IO_APPEND_ENTRIES_RESULT: {
    const struct raft_append_entries_result *ar = &m->append_entries_result;
    sim_trace(s, "recv r%u<-r%u ae-result term=%llu rejected=%llu last=%llu", rep->index, from,
              (unsigned long long)ar->term, (unsigned long long)ar->rejected,
              (unsigned long long)ar->last_log_index);
    break;
  }
  case RAFT_IO_REQUEST_VOTE: {
    const struct raft_request_vote *rv = &m->request_vote;
    sim_trace(s, "recv r%u<-r%u vote term=%llu last=%llu/%llu pre=%d", rep->index, from,
              (unsigned long long)rv->term, (unsigned long long)rv->last_log_index,
              (unsigned long long)rv->last_log_term, (int)rv->pre_vote);
    break;
  }
  case RAFT_IO_REQUEST_VOTE_RESULT:
    sim_trace(s, "recv r%u<-r%u vote-result term=%llu granted=%d", rep->index, from,
              (unsigned long long)m->request_vote_result.term,
              (int)m->request_vote_result.vote_granted);
    break;
  default:
    sim_trace(s, "recv r%u<-r%u type=%u", rep->index, from, (unsigned)m->type);
    break;
  }
}

/* As rgroup_elect_check ends rgroup_elect_on_start's short timeout: once
 * a leader is known, or after RGROUP_ELECT_GIVE_UP_MS. */
static void sim_replica_start_short_end(struct sim_replica *rep, struct raft *r)
{
  if (!rep->start_short) {
    return;
  }
  bool leader = r->state == RAFT_LEADER ||
                (r->state == RAFT_FOLLOWER && r->follower_state.current_leader.id != 0);
  if (leader || r->io->time(r->io) - rep->started_at >= RGROUP_ELECT_GIVE_UP_MS) {
    rgroup_elect_restore_timer(r, SIM_ELECTION_MS);
    rep->start_short = false;
  }
}

static void sim_replica_io_recv(struct raft_io *io, struct raft_message *m)
{
  struct sim_replica *rep = sim_replica_of_io(io);
  struct raft *r = sim_replica_raft(rep);
  sim_replica_start_short_end(rep, r);
  if (rep->sim->opts.engine == SIM_ENGINE_IO && !rep->start_short && rgroup_elect_outlogged(r, m)) {
    rep->start_short = rgroup_elect_start_timer(r, 2 * SIM_HEARTBEAT_MS); /* rgroup_raft_io_recv */
    rep->started_at = r->io->time(r->io);
    rep->start_short_used += rep->start_short;
  }
  if (!rep->sim->opts.no_second_vote_guard && rgroup_elect_second_vote(r, m)) {
    rep->second_votes_withheld++; /* rgroup_raft_io_recv: a RequestVote owns nothing */
    return;
  }
  if (!rep->sim->opts.no_prevote_terms && rgroup_elect_prevote_refused(r, m)) {
    rep->prevote_terms_taken++; /* rgroup_raft_io_recv */
  }
  if (rep->sim->opts.engine == SIM_ENGINE_IO) {
    sim_replica_trace_msg(rep, m); /* the fixture engine's traces stay as they were */
  }
  if (!rep->sim->opts.no_clamp_results && m->type == RAFT_IO_APPEND_ENTRIES) {
    /* Answered inside this call when nothing is to be written (see
     * sim_replica_io_send); the end is read before raft takes the entries. */
    raftfix_clamp_begin(&rep->clamp, m);
    rep->raft_recv(io, m);
    raftfix_clamp_end(&rep->clamp);
    return;
  }
  if (raftfix_hold_result(r, m, rep->term_appended, rep->term_first_index)) {
    /* rgroup_raft_io_recv: dropped as if lost; nothing of it is owned. */
    rep->results_held++;
    return;
  }
  /* raftfix_vote_unstick: a follower that has not heard from its leader
   * for the election timeout votes as if the request could disrupt that
   * leader. */
  if (raftfix_vote_unstick(r, m, SIM_ELECTION_MS)) {
    rep->votes_unstuck++;
  }
  rep->raft_recv(io, m);
}

/* What raftfix_clamp does on a node (cluster/rgroup.h), the
 * fix for seed 13488 (docs/fault-tolerance.md; --no-clamp-results leaves it
 * out):
 * raft 0.15 answers an AppendEntries it needs to write nothing for (an
 * empty one, or entries it already holds) at once, inside the receive
 * callback, with last_log_index = last_stored, which counts a stale tail
 * of an older term beyond what the message verified; the leader then takes
 * that tail as a match. Clamped here to prev_log_index + n_entries. An
 * answer after a write needs nothing: the write replaced any tail past the
 * first entry that differed, and raft only writes when one did. */
static int sim_replica_io_send(struct raft_io *io, struct raft_io_send *req,
                               const struct raft_message *m, raft_io_send_cb cb)
{
  struct sim_replica *rep = sim_replica_of_io(io);
  if (m->type == RAFT_IO_REQUEST_VOTE_RESULT && !rep->sim->opts.no_prevote_terms) {
    struct raft_message answer = *m; /* rgroup_raft_io_send */
    if (rgroup_elect_prevote_answer(sim_replica_raft(rep), &answer)) {
      return rep->io_send(io, req, &answer, cb);
    }
  }
  struct raft_message copy; /* sim_io copies it again: nothing of it is kept */
  if (!raftfix_clamp(&rep->clamp, m, &copy)) {
    return rep->io_send(io, req, m, cb);
  }
  sim_trace(rep->sim, "clamp r%u result last=%llu to %llu", rep->index,
            (unsigned long long)m->append_entries_result.last_log_index,
            (unsigned long long)copy.append_entries_result.last_log_index);
  return rep->io_send(io, req, &copy, cb);
}

/* Election timers from the nodes' spread (rgroup_elect_spread_max), unless
 * --wide-timers asks for raft 0.15's own [T, 2T]. */
static int sim_replica_io_random(struct raft_io *io, int min, int max)
{
  struct sim_replica *rep = sim_replica_of_io(io);
  return rep->io_random(io, min, rep->sim->opts.wide_timers ? max : rgroup_elect_spread_max(min, max));
}

static int sim_replica_io_start(struct raft_io *io, unsigned msecs, raft_io_tick_cb tick,
                                raft_io_recv_cb recv)
{
  struct sim_replica *rep = sim_replica_of_io(io);
  rep->raft_recv = recv;
  return rep->io_start(io, msecs, tick, sim_replica_io_recv);
}

/* Each append completes no earlier than the one asked before it (see
 * disk_latency in sim.h): the latency of this one is raised just enough. */
static int sim_replica_io_append(struct raft_io *io, struct raft_io_append *req,
                                 const struct raft_entry entries[], unsigned n,
                                 raft_io_append_cb cb)
{
  struct sim_replica *rep = sim_replica_of_io(io);
  raft_time now = io->time(io);
  unsigned ms = rep->disk_latency;
  if (rep->append_done > now + ms) {
    ms = (unsigned)(rep->append_done - now);
  }
  raft_fixture_set_disk_latency(&rep->sim->f, rep->index, ms);
  int rv = rep->io_append(io, req, entries, n, cb);
  if (rv == 0) {
    rep->append_done = now + ms;
  }
  return rv;
}

void sim_replica_set_disk_latency(struct sim_replica *rep, unsigned ms)
{
  rep->disk_latency = ms;
  if (rep->sim->opts.engine == SIM_ENGINE_IO) {
    rep->sio.disk_latency = ms; /* sim_io.c completes writes in order itself */
    return;
  }
  raft_fixture_set_disk_latency(&rep->sim->f, rep->index, ms);
}

void sim_replica_interpose(struct sim_replica *rep)
{
  if (rep->sim->opts.engine == SIM_ENGINE_IO) {
    struct raft_io *io = &rep->sio.io;
    rep->io_start = io->start;
    io->start = sim_replica_io_start;
    rep->io_send = io->send;
    io->send = sim_replica_io_send;
    rep->io_random = io->random;
    io->random = sim_replica_io_random;
    return;
  }
  /* raft_fixture's own io: its random answers the timer the driver set
   * (sim_partition.c draws it from the nodes' spread); its sends get the
   * nodes' clamp and pre-vote answer as the io engine's do. */
  struct raft_io *io = &rep->sim->f.servers[rep->index].io;
  rep->io_start = io->start;
  io->start = sim_replica_io_start;
  rep->io_append = io->append;
  io->append = sim_replica_io_append;
  rep->io_send = io->send;
  io->send = sim_replica_io_send;
}

/* ---- crash and restart (the io engine) ---- */

int sim_replica_start(struct sim_replica *rep, const struct raft_configuration *bootstrap)
{
  struct raft *r = calloc(1, sizeof *r);
  if (r == NULL) {
    return CAIRN_ENOMEM;
  }
  int rv = raft_init(r, &rep->sio.io, &rep->fsm, (raft_id)rep->index + 1, rep->sio.address);
  if (rv != 0) {
    free(r);
    return CAIRN_ERAFT;
  }
  /* raft_fixture's values, so that both engines run the same protocol. */
  raft_set_election_timeout(r, SIM_ELECTION_MS);
  raft_set_heartbeat_timeout(r, SIM_HEARTBEAT_MS);
  raft_set_snapshot_threshold(r, 1u << 30); /* snapshots are not simulated */
  raft_set_pre_vote(r, true);                /* as rgroup_raft_configure */
  if (bootstrap != NULL) {
    rv = raft_bootstrap(r, bootstrap);
  }
  struct store_info info;
  store_info(rep->store, &info);
  rep->store_index_at_start = info.last_index;
  rep->term_appended = 0;
  rep->term_first_index = 0;
  rep->raft = r;
  if (rv == 0) {
    rv = raft_start(r);
  }
  if (rv != 0) {
    sim_fail(rep->sim, "replica %u: raft_start: %s (%s)", rep->index, raft_strerror(rv),
             raft_errmsg(r));
    return CAIRN_ERAFT;
  }
  /* rgroup_elect_on_start (a restarted node's replica, as on a node) */
  rep->start_short = rgroup_elect_start_timer(r, 2 * SIM_HEARTBEAT_MS);
  rep->started_at = r->io->time(r->io);
  rep->start_short_used += rep->start_short;
  sim_trace(rep->sim, "start r%u term=%llu last=%llu store-index=%llu", rep->index,
            (unsigned long long)r->current_term, (unsigned long long)raft_last_index(r),
            (unsigned long long)info.last_index);
  return 0;
}

static void sim_replica_on_closed(struct raft *r)
{
  free(r);
}

/* The store after a crash: what a node's store keeps is its flushed prefix
 * (plog: durable_offset; replayed entries the store still holds are skipped
 * by rgroup_apply_entry). Modelled as a cut at a random entry boundary of
 * what was applied (or none), chosen from the checked reference log, which
 * the store equals up to checked_batches. */
static int sim_replica_cut_store(struct sim_replica *rep)
{
  struct sim *s = rep->sim;
  const struct sim_check *c = &s->check;
  size_t n = rep->checked_batches;
  if (n == 0 || sim_rng_chance(&s->rng, 1, 2)) {
    return 0;
  }
  /* Not below what was flushed before a LOG_START ran (an entry's
   * boundary: the log's end then). */
  size_t lo = 0;
  while (lo < n && c->ref[lo].base_offset < rep->flushed_offset) {
    lo++;
  }
  if (lo == n) {
    return 0;
  }
  size_t k = lo + sim_rng_below(&s->rng, (uint32_t)(n - lo));
  while (k > lo && c->ref[k].source_index == c->ref[k - 1].source_index) {
    k--; /* back to the first batch of its entry */
  }
  rep->store_cut_batches += n - k;
  return store_truncate(rep->store, c->ref[k].base_offset);
}

void sim_replica_crash(struct sim_replica *rep)
{
  struct sim *s = rep->sim;
  if (rep->raft == NULL) {
    return;
  }
  rep->crashes++;
  sim_trace(
      s, "crash r%u term=%llu last=%llu stored=%llu applied=%llu", rep->index,
      (unsigned long long)rep->raft->current_term, (unsigned long long)raft_last_index(rep->raft),
      (unsigned long long)rep->raft->last_stored, (unsigned long long)raft_last_applied(rep->raft));
  /* The clients' connections drop: what was queued was never proposed. */
  sim_replica_fail_queue(rep, CAIRN_ENOTLEADER);
  struct raft *r = rep->raft;
  if (raft_last_applied(r) > rep->applied_at_crash) {
    rep->applied_at_crash = raft_last_applied(r);
  }
  raft_close(r, sim_replica_on_closed); /* sim_io closes at once: in flight fails, in doubt */
  rep->raft = NULL;
  sim_replica_fail_queue(rep, CAIRN_ENOTLEADER);
  /* The state machine as a restarted node rebuilds it (rgroup_fsm.c): the
   * store's durable prefix, the producer table scanned from it. */
  int rv = sim_replica_cut_store(rep);
  struct store_info info;
  store_info(rep->store, &info);
  if (rv == 0) {
    rv = sim_replica_producers_rebuild(rep);
  }
  if (rv != 0) {
    sim_fail(s, "replica %u: rebuilding its state after a crash: %s", rep->index,
             cairn_strerror(rv));
    return;
  }
  sim_check_rewind(s, rep);
  sim_trace(s, "crashed r%u store=%lld index=%llu", rep->index, (long long)info.next_offset,
            (unsigned long long)info.last_index);
}
