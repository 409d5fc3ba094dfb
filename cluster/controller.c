/* controller.c - the metadata Raft group: bootstrap, state machine glue,
 * and the leader's once-a-second duties (membership of the group itself,
 * liveness, repair planning). See controller.h. */
#include "cluster/controller.h"

#include "cluster/raft_err.h"
#include "cluster/raft_files.h"
#include "cluster/raftfix.h"
#include "cluster/rgroup.h"
#include "common/err.h"
#include "common/fsutil.h"
#include "common/log.h"
#include "common/wallclock.h"

#include <limits.h>
#include <stddef.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define CTL_ENTRY_HEADER 4

static void ctl_set_errmsg(struct controller *ctl, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void ctl_set_errmsg(struct controller *ctl, const char *fmt, ...)
{
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(ctl->errmsg, sizeof ctl->errmsg, fmt, ap);
  va_end(ap);
}

static void ctl_start_short_end(struct controller *ctl, bool leader_known);

/* ---- state machine ---- */

static int ctl_fsm_apply(struct raft_fsm *fsm, const struct raft_buffer *buf, void **result)
{
  struct controller *ctl = fsm->data;
  const uint8_t *p = buf->base;
  *result = NULL;
  if (buf->len < CTL_ENTRY_HEADER) {
    log_error("ctl", "entry of %zu bytes: too short, skipped", buf->len);
    return 0;
  }
  uint32_t len = (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
  if (len > buf->len - CTL_ENTRY_HEADER) {
    log_error("ctl", "entry length %u beyond its %zu bytes, skipped", len, buf->len);
    return 0;
  }
  /* raft 0.15 applies in order and advances last_applied after apply. */
  uint64_t index = raft_last_applied(&ctl->raft) + 1;
  memset(&ctl->result, 0, sizeof ctl->result);
  int rv = meta_apply(&ctl->st, p + CTL_ENTRY_HEADER, len, index, &ctl->result);
  if (rv == CAIRN_ENOMEM) {
    /* Replicas would diverge if this one went on without the command. */
    log_error("ctl", "out of memory applying metadata entry %llu: stopping the controller",
              (unsigned long long)index);
    return RAFT_NOMEM;
  }
  *result = &ctl->result;
  ctl_start_short_end(ctl, true);
  if (ctl->on_change != NULL) {
    ctl->on_change(ctl, ctl->change_data);
  }
  return 0;
}

static int ctl_fsm_snapshot(struct raft_fsm *fsm, struct raft_buffer *bufs[], unsigned *n_bufs)
{
  struct controller *ctl = fsm->data;
  if (raftfix_snapshot_refused(&ctl->raft)) {
    return RAFT_BUSY; /* a configuration change in flight would go into it */
  }
  uint8_t *enc = NULL;
  size_t len = 0;
  int rv = meta_snapshot_encode(&ctl->st, &enc, &len);
  if (rv != 0) {
    log_error("ctl", "snapshot: %s", cairn_strerror(rv));
    return RAFT_NOMEM;
  }
  /* raft frees what it is given with raft_free(). */
  size_t padded = (len + 7) & ~(size_t)7;
  struct raft_buffer *b = raft_malloc(sizeof *b);
  void *copy = raft_malloc(padded > 0 ? padded : 8);
  if (b == NULL || copy == NULL) {
    raft_free(b);
    raft_free(copy);
    free(enc);
    return RAFT_NOMEM;
  }
  memset(copy, 0, padded > 0 ? padded : 8);
  memcpy(copy, enc, len);
  free(enc);
  b->base = copy;
  b->len = len;
  *bufs = b;
  *n_bufs = 1;
  return 0;
}

static int ctl_fsm_restore(struct raft_fsm *fsm, struct raft_buffer *buf)
{
  struct controller *ctl = fsm->data;
  uint64_t t0 = uv_hrtime();
  size_t len = buf->len;
  struct meta_state fresh;
  meta_state_init(&fresh);
  int rv = meta_snapshot_decode(&fresh, buf->base, buf->len);
  raft_free(buf->base);
  if (rv != 0) {
    meta_state_close(&fresh);
    log_error("ctl", "snapshot restore: %s", cairn_strerror(rv));
    return RAFT_CORRUPT;
  }
  meta_state_close(&ctl->st);
  ctl->st = fresh;
  if (ctl->on_change != NULL) {
    ctl->on_change(ctl, ctl->change_data);
  }
  /* How long a restore takes (the install_snapshot_timeout above it) */
  log_info("ctl", "metadata restored from a snapshot (%zu bytes, %.1f ms)", len,
           (double)(uv_hrtime() - t0) / 1e6);
  return 0;
}

/* ---- raft's messages: the pre-vote fix of the partitions' groups ---- */

static struct controller *ctl_of_io(struct raft_io *io)
{
  return (struct controller *)((char *)io - offsetof(struct controller, wio.io));
}

static int ctl_io_send(struct raft_io *io, struct raft_io_send *req, const struct raft_message *m,
                       raft_io_send_cb cb)
{
  struct controller *ctl = ctl_of_io(io);
  int rv = rgroup_raft_check_destination(m); /* raft_uv would crash on it */
  if (rv != 0) {
    return rv;
  }
  if (m->type == RAFT_IO_REQUEST_VOTE_RESULT) {
    struct raft_message copy = *m; /* encoded during the call */
    if (rgroup_elect_prevote_answer(&ctl->raft, &copy)) {
      return ctl->io_send(io, req, &copy, cb);
    }
  }
  struct raft_message clamped; /* encoded during the call */
  if (raftfix_clamp(&ctl->clamp, m, &clamped)) {
    return ctl->io_send(io, req, &clamped, cb);
  }
  return ctl->io_send(io, req, m, cb);
}

static void ctl_maybe_barrier(struct controller *ctl);

/* What raft starts from: a change uncommitted in it keeps the snapshot's
 * configuration aside (raftfix_conf_keep_loaded). */
static int ctl_io_load(struct raft_io *io, raft_term *term, raft_id *voted_for,
                       struct raft_snapshot **snapshot, raft_index *start_index,
                       struct raft_entry *entries[], size_t *n_entries)
{
  struct controller *ctl = ctl_of_io(io);
  int rv = ctl->io_load(io, term, voted_for, snapshot, start_index, entries, n_entries);
  if (rv == 0) {
    raftfix_conf_keep_loaded(&ctl->conf_kept, *snapshot, *entries, *n_entries);
  }
  return rv;
}

static void ctl_on_held_check(uv_check_t *h);

static void ctl_io_recv(struct raft_io *io, struct raft_message *m)
{
  struct controller *ctl = ctl_of_io(io);
  if (ctl->raft_failed) {
    rgroup_raft_discard(m); /* latched: no answer, no vote, no write */
    return;
  }
  if (raftfix_hold_result(&ctl->raft, m, ctl->barrier_issued_term, ctl->barrier_index)) {
    return; /* until the barrier of the term is on disk: as if lost */
  }
  if (rgroup_elect_same_term_leader(&ctl->raft, m)) {
    /* never from a correct Raft; raft 0.15 would corrupt its leader state */
    log_error("ctl",
              "metadata replica %llu leads term %llu and replica %llu sent a message of "
              "its leader of the same term: dropped",
              (unsigned long long)ctl->self_id, (unsigned long long)ctl->raft.current_term,
              (unsigned long long)m->server_id);
    rgroup_raft_discard(m);
    return;
  }
  if (!ctl->start_short && rgroup_elect_outlogged(&ctl->raft, m)) {
    ctl->start_short = rgroup_elect_start_timer(
        &ctl->raft, rgroup_elect_short_timeout(ctl->opts.heartbeat_ms, ctl->opts.election_ms));
    ctl->started_ms = uv_now(ctl->loop);
  }
  if (raftfix_vote_unstick(&ctl->raft, m, ctl->opts.election_ms)) {
    log_info("ctl",
             "metadata replica %llu: its leader silent for the election timeout, votes on the "
             "RequestVote of replica %llu for term %llu",
             (unsigned long long)ctl->self_id, (unsigned long long)m->server_id,
             (unsigned long long)m->request_vote.term);
  }
  if (rgroup_elect_prevote_refused(&ctl->raft, m)) {
    log_info("ctl", "metadata replica %llu: pre-vote refused by replica %llu of term %llu: "
             "takes that term",
             (unsigned long long)ctl->self_id, (unsigned long long)m->server_id,
             (unsigned long long)m->request_vote.term);
  }
  if (raftfix_below_snapshot(&ctl->raft, m)) {
    log_info("ctl",
             "metadata replica %llu: AppendEntries from %llu starts below its snapshot "
             "(%llu): answered as a heartbeat at the snapshot",
             (unsigned long long)ctl->self_id, (unsigned long long)m->server_id,
             (unsigned long long)ctl->raft.log.snapshot.last_index);
  }
  raftfix_conf_keep(&ctl->conf_kept, &ctl->raft, m);
  if (raftfix_conf_rollback(&ctl->conf_kept, &ctl->raft, m)) {
    log_info("ctl",
             "metadata replica %llu: leader %llu's entries replace an uncommitted configuration "
             "change: rolled back to the committed configuration (kept aside)",
             (unsigned long long)ctl->self_id, (unsigned long long)m->server_id);
  }
  if (raftfix_snapshot_hold(&ctl->snap_held, &ctl->raft, m)) {
    log_info("ctl",
             "metadata replica %llu: InstallSnapshot from %llu held until its own snapshot is "
             "done (raft 0.15 would drop it unanswered)",
             (unsigned long long)ctl->self_id, (unsigned long long)m->server_id);
    if (ctl->state == CTL_RUNNING) {
      uv_check_start(&ctl->held_check, ctl_on_held_check);
    }
    return; /* given to raft once it is done (ctl_on_held_check), or freed at close */
  }
  raftfix_clamp_begin(&ctl->clamp, m);
  ctl->raft_recv(io, m);
  raftfix_clamp_end(&ctl->clamp);
  /* Leading from this message on (a vote): the barrier before any result
   * of the term can be read (raftfix_hold_result). */
  ctl_maybe_barrier(ctl);
}

/* Runs after each poll while an InstallSnapshot is held (ctl_io_recv):
 * gives it to raft in the iteration in which the replica's own snapshot
 * is done (its completion wakes the loop), not at the next 1 s tick. */
static void ctl_on_held_check(uv_check_t *h)
{
  struct controller *ctl = h->data;
  uv_check_stop(h);
  if (ctl->state != CTL_RUNNING || ctl->raft_failed) {
    return; /* (freed at close) */
  }
  struct raft_message *held = raftfix_snapshot_release(&ctl->snap_held, &ctl->raft);
  if (held == NULL) {
    if (ctl->snap_held.m != NULL) {
      uv_check_start(h, ctl_on_held_check); /* still busy: the next iteration */
    }
    return;
  }
  ctl_io_recv(&ctl->wio.io, held);
  free(held);
}

static void ctl_io_tick(struct raft_io *io)
{
  struct controller *ctl = ctl_of_io(io);
  if (!ctl->raft_failed) {
    ctl->raft_tick(io); /* latched: no heartbeat, no election */
  }
}

static int ctl_io_start(struct raft_io *io, unsigned msecs, raft_io_tick_cb tick,
                        raft_io_recv_cb recv)
{
  struct controller *ctl = ctl_of_io(io);
  ctl->raft_recv = recv;
  ctl->raft_tick = tick;
  return ctl->io_start(io, msecs, ctl_io_tick, ctl_io_recv);
}

/* ---- on the node's log: latching a failed write (controller.h) ---- */

/* One interposed append: raft's request and callback. */
struct ctl_append {
  struct raft_io_append req; /* the one the log sees */
  struct raft_io_append *orig;
  raft_io_append_cb cb;
  struct controller *ctl;
  int status;              /* a failure held back (ctl_on_append) */
  struct ctl_append *next; /* in ctl->failed */
};

static void ctl_on_tick(uv_timer_t *t);

static void ctl_fail(struct controller *ctl, int status, const char *what)
{
  if (ctl->raft_failed) {
    return;
  }
  ctl->raft_failed = true;
  if (ctl->state != CTL_RUNNING) {
    return; /* closing anyway; later writes are refused */
  }
  log_error("ctl",
            "metadata replica %llu: %s failed (%s: %s); it acknowledges, votes and proposes "
            "nothing more",
            (unsigned long long)ctl->self_id, what, cairn_strerror(raft_err_to_cairn(status)),
            ctl->wio.io.errmsg);
  if (ctl->ticking) {
    uv_timer_start(&ctl->tick, ctl_on_tick, 0, CTL_TICK_MS); /* on_fatal, from the loop */
  }
}

static int ctl_refuse(struct controller *ctl)
{
  snprintf(ctl->wio.io.errmsg, sizeof ctl->wio.io.errmsg,
           "refused: an earlier write of the metadata group failed");
  return RAFT_IOERR;
}

/* Hands raft the failed appends held back, the newest first. */
static void ctl_deliver_failed(struct controller *ctl)
{
  while (ctl->failed != NULL) {
    struct ctl_append *a = ctl->failed;
    ctl->failed = a->next;
    struct raft_io_append *orig = a->orig;
    raft_io_append_cb cb = a->cb;
    int status = a->status;
    free(a);
    cb(orig, status);
  }
}

/* A failed write fails every append in flight behind it (the log is
 * fatal), and raft 0.15's leader cuts its in-memory log at each failed
 * append's first index as it learns of it (appendLeaderCb: logTruncate):
 * told in log order, the second cut is past the end of what the first left
 * and raft reads freed memory. So failures are held back until no append
 * of the group is in flight, then told newest first: each cut is then at
 * the end of the log. Before the log's close can complete (riow_close
 * waits for these callbacks). */
static void ctl_on_append(struct raft_io_append *req, int status)
{
  struct ctl_append *a = req->data;
  struct controller *ctl = a->ctl;
  ctl->appends_inflight--;
  if (status != 0) {
    /* Latch before raft sees the failure. */
    ctl_fail(ctl, status, "appending to the node's Raft log");
    a->status = status;
    a->next = ctl->failed;
    ctl->failed = a;
  } else {
    struct raft_io_append *orig = a->orig;
    raft_io_append_cb cb = a->cb;
    free(a);
    cb(orig, status);
  }
  if (ctl->appends_inflight == 0) {
    ctl_deliver_failed(ctl);
  }
}

static int ctl_io_append(struct raft_io *io, struct raft_io_append *req,
                         const struct raft_entry entries[], unsigned n, raft_io_append_cb cb)
{
  struct controller *ctl = ctl_of_io(io);
  if (ctl->raft_failed) {
    return ctl_refuse(ctl);
  }
  struct ctl_append *a = malloc(sizeof *a);
  if (a == NULL) {
    return RAFT_NOMEM;
  }
  a->orig = req;
  a->cb = cb;
  a->ctl = ctl;
  a->req.data = a;
  a->status = 0;
  a->next = NULL;
  int rv = ctl->io_append(io, &a->req, entries, n, ctl_on_append);
  if (rv != 0) {
    free(a);
    ctl_fail(ctl, rv, "submitting an append to the node's Raft log");
    return rv;
  }
  ctl->appends_inflight++;
  return 0;
}

static int ctl_io_set_term(struct raft_io *io, raft_term term)
{
  struct controller *ctl = ctl_of_io(io);
  if (ctl->raft_failed) {
    return ctl_refuse(ctl);
  }
  int rv = ctl->io_set_term(io, term);
  if (rv != 0) {
    ctl_fail(ctl, rv, "persisting the Raft term");
  }
  return rv;
}

static int ctl_io_set_vote(struct raft_io *io, raft_id id)
{
  struct controller *ctl = ctl_of_io(io);
  if (ctl->raft_failed) {
    return ctl_refuse(ctl);
  }
  int rv = ctl->io_set_vote(io, id);
  if (rv != 0) {
    ctl_fail(ctl, rv, "persisting the Raft vote");
  }
  return rv;
}

static int ctl_io_truncate(struct raft_io *io, raft_index index)
{
  struct controller *ctl = ctl_of_io(io);
  if (ctl->raft_failed) {
    return ctl_refuse(ctl);
  }
  int rv = ctl->io_truncate(io, index);
  if (rv != 0) {
    ctl_fail(ctl, rv, "truncating the Raft log");
  }
  return rv;
}

/* Storage in the node's log, and the latch over its writes. Returns 0 or
 * a negative code with ctl->errmsg set. */
static int ctl_attach_wal(struct controller *ctl)
{
  char snap[PATH_MAX];
  if (snprintf(snap, sizeof snap, "%s/wal-snapshots", ctl->dir) >= (int)sizeof snap) {
    ctl_set_errmsg(ctl, "metadata group: %s: path too long", ctl->dir);
    return CAIRN_EINVAL;
  }
  int rv = riow_uv_attach(&ctl->wio, ctl->loop, ctl->opts.wal, CTL_GROUP_ID, snap);
  if (rv != 0) {
    ctl_set_errmsg(ctl, "metadata group: %s: %s", snap, cairn_strerror(rv));
    return rv;
  }
  struct raft_io *io = &ctl->wio.io;
  ctl->io_append = io->append;
  ctl->io_set_term = io->set_term;
  ctl->io_set_vote = io->set_vote;
  ctl->io_truncate = io->truncate;
  io->append = ctl_io_append;
  io->set_term = ctl_io_set_term;
  io->set_vote = ctl_io_set_vote;
  io->truncate = ctl_io_truncate;
  return 0;
}

int ctl_self_role(const struct controller *ctl)
{
  if (ctl->state != CTL_RUNNING) {
    return -1;
  }
  const struct raft_configuration *c = &ctl->raft.configuration;
  for (unsigned i = 0; i < c->n; i++) {
    if (c->servers[i].id == ctl->self_id) {
      return c->servers[i].role;
    }
  }
  return -1;
}

bool ctl_failed(const struct controller *ctl)
{
  return ctl->raft_failed;
}

/* Election timers from [T, 1.5T], as the partitions' (rgroup_elect_spread_max). */
static int ctl_io_random(struct raft_io *io, int min, int max)
{
  struct controller *ctl = ctl_of_io(io);
  return ctl->io_random(io, min, rgroup_elect_spread_max(min, max));
}

/* ---- open ---- */

static void ctl_opts_fill(struct ctl_opts *o, const struct ctl_opts *in)
{
  memset(o, 0, sizeof *o);
  if (in != NULL) {
    *o = *in;
  }
  o->heartbeat_ms = o->heartbeat_ms ? o->heartbeat_ms : 100;
  o->election_ms = o->election_ms ? o->election_ms : 1000;
  o->raft_segment_size = o->raft_segment_size ? o->raft_segment_size : (1u << 20);
  o->node_timeout_ms = o->node_timeout_ms ? o->node_timeout_ms : 10000;
  o->replace_delay_ms = o->replace_delay_ms ? o->replace_delay_ms : 60000;
}

/* Every voter bootstraps the same configuration; a restart finds its log
 * and raft refuses (RAFT_CANTBOOTSTRAP), which is the normal case. */
static int ctl_bootstrap(struct controller *ctl, const struct ctl_voter *voters, unsigned n)
{
  struct raft_configuration conf;
  raft_configuration_init(&conf);
  int rv = 0;
  for (unsigned i = 0; i < n && rv == 0; i++) {
    rv = raft_configuration_add(&conf, voters[i].id, voters[i].address, RAFT_VOTER);
  }
  if (rv == 0) {
    rv = raft_bootstrap(&ctl->raft, &conf);
    if (rv == RAFT_CANTBOOTSTRAP) {
      rv = 0;
    }
  }
  raft_configuration_close(&conf);
  if (rv != 0) {
    ctl_set_errmsg(ctl, "metadata group: bootstrap: %s", raft_errmsg(&ctl->raft));
    return raft_err_to_cairn(rv);
  }
  return 0;
}

static void ctl_on_raft_closed(struct raft *r);

static int ctl_check_voters(struct controller *ctl, const struct ctl_voter *voters, unsigned n)
{
  /* No voters: a node that joins an existing cluster learns them from the
   * group's log. */
  if (n > CTL_MAX_VOTERS) {
    ctl_set_errmsg(ctl, "metadata group: %u voters (at most %d)", n, CTL_MAX_VOTERS);
    return CAIRN_EINVAL;
  }
  for (unsigned i = 0; i < n; i++) {
    if (voters[i].id == ctl->self_id) {
      ctl->voter = true;
      if (strcmp(voters[i].address, ctl->self_address) != 0) {
        ctl_set_errmsg(ctl, "metadata group: voter %llu is at %s but this node's cluster address is %s",
                       (unsigned long long)voters[i].id, voters[i].address, ctl->self_address);
        return CAIRN_EINVAL;
      }
    }
  }
  return 0;
}

/* The metadata log is checked before raft reads it (raft_files.h): a torn
 * tail is cut; anything else stops the node, which cannot serve without
 * its metadata, with the file and offset instead of raft 0.15's abort. */
static int ctl_check_files(struct controller *ctl, const char *dir)
{
  struct raft_files_report rep;
  int rv = raft_files_check(dir, &rep);
  if (rv != 0) {
    ctl_set_errmsg(ctl, "metadata group: Raft files refused: %s", rep.errmsg);
    return rv;
  }
  if (rep.repaired > 0) {
    log_warn("ctl", "metadata group: %s", rep.note);
  }
  return 0;
}

/* Frees what ctl_open's first part made (no Raft, no I/O). */
static void ctl_free_unstarted(struct controller *ctl)
{
  meta_state_close(&ctl->st);
  raftfix_conf_close(&ctl->conf_kept);
  raftfix_snapshot_close(&ctl->snap_held);
  free(ctl->self_address);
  free(ctl->dir);
  ctl->self_address = NULL;
  ctl->dir = NULL;
}

/* Starts Raft: the group's transport, its I/O, raft_init, the bootstrap
 * of a configured voter on a fresh log (not with opts.no_bootstrap),
 * raft_start, the tick. Returns 0 (CTL_RUNNING), or a negative code with
 * errmsg set: before raft_init nothing of it is left and the state is
 * unchanged; after, the controller is CTL_CLOSING (raft closing). */
static int ctl_start_raft(struct controller *ctl, const struct ctl_voter *voters, unsigned nvoters)
{
  int rv = transport_group_init(ctl->tr, &ctl->rt, CTL_GROUP_ID);
  if (rv != 0) {
    ctl_set_errmsg(ctl, "metadata group: transport: %s", cairn_strerror(rv));
    return rv;
  }
  struct raft_io *io = &ctl->wio.io;
  rv = raft_uv_init(io, ctl->loop, ctl->dir, &ctl->rt);
  if (rv != 0) {
    ctl_set_errmsg(ctl, "metadata group: raft I/O in %s: %s", ctl->dir, io->errmsg);
    transport_group_release(&ctl->rt);
    return raft_err_to_cairn(rv);
  }
  raft_uv_set_segment_size(io, ctl->opts.raft_segment_size);
  raft_uv_set_auto_recovery(io, false); /* as rgroup_raft_init: never drop entries */
  raft_uv_set_connect_retry_delay(io, 100);
  if (ctl->opts.wal != NULL) {
    rv = ctl_attach_wal(ctl);
    if (rv != 0) {
      raft_uv_close(io);
      transport_group_release(&ctl->rt);
      return rv;
    }
  }
  ctl->io_send = io->send;
  ctl->io_start = io->start;
  ctl->io_random = io->random;
  ctl->io_load = io->load;
  io->load = ctl_io_load;
  io->send = ctl_io_send;
  io->start = ctl_io_start;
  io->random = ctl_io_random;
  ctl->fsm.version = 1;
  ctl->fsm.data = ctl;
  ctl->fsm.apply = ctl_fsm_apply;
  ctl->fsm.snapshot = ctl_fsm_snapshot;
  ctl->fsm.restore = ctl_fsm_restore;
  rv = raft_init(&ctl->raft, io, &ctl->fsm, ctl->self_id, ctl->self_address);
  if (rv != 0) {
    ctl_set_errmsg(ctl, "metadata group: raft_init: %s", raft_errmsg(&ctl->raft));
    if (ctl->opts.wal != NULL) {
      riow_release(&ctl->wio.riow);
    }
    raft_uv_close(io);
    transport_group_release(&ctl->rt);
    return raft_err_to_cairn(rv);
  }
  ctl->raft.data = ctl;
  raft_set_heartbeat_timeout(&ctl->raft, ctl->opts.heartbeat_ms);
  raft_set_election_timeout(&ctl->raft, ctl->opts.election_ms);
  raft_set_install_snapshot_timeout(&ctl->raft, raftfix_install_snapshot_ms(ctl->opts.election_ms));
  raft_set_pre_vote(&ctl->raft, true); /* as the partitions' groups: rgroup_raft.c */
  /* A restarted node knows the metadata only as of its last snapshot until
   * a leader tells it what is committed (raft 0.15 applies nothing past
   * the snapshot before that): it opens the replicas that state assigns
   * to it at once, so that a partition whose majority it completes writes
   * again even while the metadata group has no majority. A snapshot every
   * 16 entries keeps that state close to the last one; the state is small
   * (docs/metadata.md). */
  raft_set_snapshot_threshold(&ctl->raft, CTL_SNAPSHOT_THRESHOLD);
  raft_set_snapshot_trailing(&ctl->raft, 64);
  /* A replica rebuilt once joins like a standby even when it is a
   * configured voter: its empty log is a discarded one, and bootstrapping
   * would make it a voter with none of the entries it acknowledged. */
  rv = ctl->voter && !ctl->opts.no_bootstrap ? ctl_bootstrap(ctl, voters, nvoters) : 0;
  if (rv == 0) {
    rv = raft_start(&ctl->raft);
    if (rv != 0) {
      ctl_set_errmsg(ctl, "metadata group: starting raft in %s: %s", ctl->dir,
                     raft_errmsg(&ctl->raft));
      rv = raft_err_to_cairn(rv);
    }
  }
  if (rv != 0) {
    ctl->state = CTL_CLOSING;
    ctl->closing_parts = 1;
    raft_close(&ctl->raft, ctl_on_raft_closed);
    return rv;
  }
  /* As a partition's replica (rgroup_elect_on_start): after a restart of
   * every node the partitions open only once the metadata group has a
   * leader and has applied its log, so its first election should not wait
   * a full randomised timeout either. */
  ctl->start_short = rgroup_elect_start_timer(
      &ctl->raft, rgroup_elect_short_timeout(ctl->opts.heartbeat_ms, ctl->opts.election_ms));
  ctl->started_ms = uv_now(ctl->loop);
  uv_timer_init(ctl->loop, &ctl->tick);
  ctl->tick.data = ctl;
  uv_check_init(ctl->loop, &ctl->held_check);
  ctl->held_check.data = ctl;
  uv_timer_start(&ctl->tick, ctl_on_tick, ctl->raft_failed ? 0 : CTL_TICK_MS, CTL_TICK_MS);
  ctl->ticking = true;
  ctl->state = CTL_RUNNING;
  log_info("ctl", "metadata replica %llu open in %s (%s%s, %s)", (unsigned long long)ctl->self_id,
           ctl->dir, ctl->voter ? "voter" : "standby",
           ctl->voter && ctl->opts.no_bootstrap ? ", rebuilt once: joins without bootstrapping"
                                                : "",
           ctl->opts.wal != NULL ? "on the node's Raft log" : "raft_uv files");
  return 0;
}

int ctl_open(struct controller *ctl, uv_loop_t *loop, struct transport *tr, uint64_t self_id,
             const char *self_address, const char *dir, const struct ctl_voter *voters,
             unsigned nvoters, const struct ctl_opts *opts, ctl_change_cb on_change,
             void *change_data)
{
  memset(ctl, 0, sizeof *ctl);
  ctl->loop = loop;
  ctl->tr = tr;
  ctl->self_id = self_id;
  ctl->on_change = on_change;
  ctl->change_data = change_data;
  ctl_opts_fill(&ctl->opts, opts);
  ctl->self_address = strdup(self_address);
  ctl->dir = strdup(dir);
  if (ctl->self_address == NULL || ctl->dir == NULL) {
    free(ctl->self_address);
    free(ctl->dir);
    return CAIRN_ENOMEM;
  }
  meta_state_init(&ctl->st);
  ctl->state = CTL_REFUSED; /* no Raft yet */
  int rv = ctl_check_voters(ctl, voters, nvoters);
  if (rv == 0) {
    rv = fs_mkdir_p(dir);
    if (rv != 0) {
      ctl_set_errmsg(ctl, "metadata group: mkdir %s: %s", dir, cairn_strerror(rv));
    }
  }
  if (rv == 0 && ctl->opts.wal == NULL) {
    rv = ctl_check_files(ctl, dir);
  }
  if (rv != 0) {
    ctl_free_unstarted(ctl);
    return rv;
  }
  if (ctl->opts.refused) {
    log_warn("ctl",
             "metadata replica %llu refused in %s: no Raft until the leader has removed it "
             "from the group",
             (unsigned long long)self_id, dir);
    return 0;
  }
  rv = ctl_start_raft(ctl, voters, nvoters);
  if (rv != 0 && ctl->state == CTL_REFUSED) {
    ctl_free_unstarted(ctl);
  }
  return rv;
}

int ctl_rejoin(struct controller *ctl)
{
  if (ctl->state != CTL_REFUSED) {
    return CAIRN_EINVAL;
  }
  ctl->opts.refused = false;
  ctl->opts.no_bootstrap = true;
  return ctl_start_raft(ctl, NULL, 0);
}

/* ---- proposals ---- */

static void ctl_on_applied(struct raft_apply *apply, int status, void *result)
{
  struct ctl_propose *req = apply->data;
  int rv = 0;
  if (status != 0) {
    rv = status == RAFT_LEADERSHIPLOST ? CAIRN_EINDOUBT : raft_err_to_cairn(status);
    result = NULL;
  }
  req->cb(req, rv, result);
}

int ctl_propose(struct controller *ctl, struct ctl_propose *req, const uint8_t *cmd, size_t len,
                ctl_propose_cb cb)
{
  if (ctl->state != CTL_RUNNING) {
    return CAIRN_ESHUTDOWN;
  }
  if (ctl->raft_failed || raft_state(&ctl->raft) != RAFT_LEADER) {
    return CAIRN_ENOTLEADER;
  }
  if (len > UINT32_MAX - 16) {
    return CAIRN_ETOOLARGE;
  }
  size_t padded = (CTL_ENTRY_HEADER + len + 7) & ~(size_t)7;
  struct raft_buffer buf = {.base = raft_malloc(padded), .len = padded};
  if (buf.base == NULL) {
    return CAIRN_ENOMEM;
  }
  uint8_t *p = buf.base;
  memset(p, 0, padded);
  p[0] = (uint8_t)len;
  p[1] = (uint8_t)(len >> 8);
  p[2] = (uint8_t)(len >> 16);
  p[3] = (uint8_t)(len >> 24);
  memcpy(p + CTL_ENTRY_HEADER, cmd, len);
  req->ctl = ctl;
  req->cb = cb;
  req->apply.data = req;
  int rv = raft_apply(&ctl->raft, &req->apply, &buf, 1, ctl_on_applied);
  if (rv != 0) {
    raft_free(buf.base);
    return rv == RAFT_NOTLEADER ? CAIRN_ENOTLEADER : raft_err_to_cairn(rv);
  }
  return 0;
}

/* ---- queries ---- */

const struct meta_state *ctl_state(const struct controller *ctl) { return &ctl->st; }

void ctl_leader(struct controller *ctl, uint64_t *id, const char **address)
{
  raft_id lid = 0;
  const char *addr = NULL;
  if (ctl->state == CTL_RUNNING && !ctl->raft_failed) {
    raft_leader(&ctl->raft, &lid, &addr);
  }
  *id = lid;
  *address = addr;
}

bool ctl_is_leader(struct controller *ctl)
{
  return ctl->state == CTL_RUNNING && !ctl->raft_failed && raft_state(&ctl->raft) == RAFT_LEADER;
}

uint64_t ctl_applied_index(struct controller *ctl)
{
  return ctl->state == CTL_RUNNING ? raft_last_applied(&ctl->raft) : 0;
}

static void ctl_on_barrier(struct raft_barrier *b, int status)
{
  struct controller *ctl = b->data;
  ctl->barrier_inflight = false;
  if (status == 0 && ctl->state == CTL_RUNNING) {
    ctl->barrier_term = ctl->barrier_issued_term;
  }
}

/* A new leader's state may lack entries that earlier leaders committed
 * until an entry of its own term commits (raft 0.15 appends none at an
 * election): a barrier is that entry. */
static void ctl_maybe_barrier(struct controller *ctl)
{
  if (!ctl_is_leader(ctl) || ctl->barrier_inflight ||
      ctl->barrier_term == ctl->raft.current_term) {
    return;
  }
  ctl->barrier.data = ctl;
  if (raft_barrier(&ctl->raft, &ctl->barrier, ctl_on_barrier) == 0) {
    ctl->barrier_inflight = true;
    ctl->barrier_issued_term = ctl->raft.current_term;
    ctl->barrier_index = raft_last_index(&ctl->raft);
  }
}

uint64_t ctl_leader_applied_index(struct controller *ctl)
{
  ctl_maybe_barrier(ctl);
  if (!ctl_is_leader(ctl) || ctl->barrier_term != ctl->raft.current_term) {
    return 0;
  }
  return raft_last_applied(&ctl->raft);
}

/* ---- liveness (leader only) ---- */

static struct ctl_seen *ctl_seen_find(const struct controller *ctl, uint64_t node_id)
{
  for (size_t i = 0; i < ctl->nseen; i++) {
    if (ctl->seen[i].node_id == node_id) {
      return &ctl->seen[i];
    }
  }
  return NULL;
}

static struct ctl_seen *ctl_seen_get(struct controller *ctl, uint64_t node_id)
{
  struct ctl_seen *s = ctl_seen_find(ctl, node_id);
  if (s != NULL) {
    return s;
  }
  if (ctl->nseen == ctl->seen_cap) {
    size_t cap = ctl->seen_cap ? ctl->seen_cap * 2 : 16;
    struct ctl_seen *ns = realloc(ctl->seen, cap * sizeof *ns);
    if (ns == NULL) {
      return NULL;
    }
    ctl->seen = ns;
    ctl->seen_cap = cap;
  }
  s = &ctl->seen[ctl->nseen++];
  memset(s, 0, sizeof *s);
  s->node_id = node_id;
  return s;
}

/* A new leader has heard from nobody: it gives every node a full timeout
 * before calling it dead. */
static void ctl_reset_liveness(struct controller *ctl)
{
  uint64_t now = uv_now(ctl->loop);
  ctl->nseen = 0;
  ctl_reports_clear(&ctl->reports);
  ctl->nrefused = 0;
  for (size_t i = 0; i < ctl->st.nnodes; i++) {
    struct ctl_seen *s = ctl_seen_get(ctl, (&ctl->st.nodes[i])->id);
    if (s != NULL) {
      s->last_ms = now;
    }
  }
  ctl->leader_term = ctl->raft.current_term;
}

uint64_t ctl_note_heartbeat(struct controller *ctl, uint64_t node_id, uint64_t incarnation,
                            const struct ctl_node_report *rep)
{
  if (!ctl_is_leader(ctl)) {
    return 0;
  }
  if (ctl->leader_term != ctl->raft.current_term) {
    ctl_reset_liveness(ctl);
  }
  struct ctl_seen *s = ctl_seen_get(ctl, node_id);
  if (s == NULL) {
    return 0;
  }
  s->last_ms = uv_now(ctl->loop);
  bool same = s->incarnation == incarnation;
  s->incarnation = incarnation;
  if (rep->base != 0 && (!same || s->report_seq != rep->base)) {
    s->report_seq = 0; /* not the report this delta was made on */
    return 0;
  }
  if (rep->base == 0) {
    ctl_reports_drop_node(&ctl->reports, node_id);
  }
  for (size_t i = 0; i < rep->nstopped && rep->base != 0; i++) {
    ctl_reports_drop(&ctl->reports, node_id, rep->stopped[i]);
  }
  if (ctl_reports_put(&ctl->reports, node_id, rep->reports, rep->n) != 0) {
    s->report_seq = 0;
    return 0;
  }
  s->report_seq = rep->seq;
  return rep->seq;
}

bool ctl_node_is_live(const struct controller *ctl, uint64_t node_id)
{
  const struct ctl_seen *s = ctl_seen_find(ctl, node_id);
  return s != NULL && uv_now(ctl->loop) - s->last_ms < ctl->opts.node_timeout_ms;
}

bool ctl_incarnation_is_live(const struct controller *ctl, uint64_t node_id,
                             uint64_t incarnation)
{
  const struct ctl_seen *s = ctl_seen_find(ctl, node_id);
  return s != NULL && s->incarnation == incarnation &&
         uv_now(ctl->loop) - s->last_ms < ctl->opts.node_timeout_ms;
}

/* Wall-clock ms: what the planner stamps into node state changes, for
 * operators (liveness itself runs on the loop's monotonic clock). */
/* ---- the leader's tick ---- */

static void ctl_on_change_done(struct raft_change *req, int status)
{
  struct controller *ctl = req->data;
  ctl->changing = false;
  if (status != 0) {
    log_warn("ctl", "metadata group membership change: %s", raft_strerror(status));
  }
}

static const struct raft_server *ctl_conf_find(const struct controller *ctl, uint64_t id)
{
  const struct raft_configuration *c = &ctl->raft.configuration;
  for (unsigned i = 0; i < c->n; i++) {
    if (c->servers[i].id == id) {
      return &c->servers[i];
    }
  }
  return NULL;
}

/* ---- refused replicas of other nodes (leader only; metaheal.h) ---- */

static struct ctl_refused *ctl_refused_find(struct controller *ctl, uint64_t node_id)
{
  for (size_t i = 0; i < ctl->nrefused; i++) {
    if (ctl->refused[i].node_id == node_id) {
      return &ctl->refused[i];
    }
  }
  return NULL;
}

/* Was node_id's replica reported refused within CTL_REFUSED_HOLD_MS? */
static bool ctl_refused_recent(struct controller *ctl, uint64_t node_id)
{
  struct ctl_refused *f = ctl_refused_find(ctl, node_id);
  return f != NULL && uv_now(ctl->loop) - f->heard_ms < CTL_REFUSED_HOLD_MS;
}

int ctl_note_refused(struct controller *ctl, uint64_t node_id)
{
  if (!ctl_is_leader(ctl)) {
    return CAIRN_ENOTLEADER;
  }
  if (node_id == ctl->self_id) {
    return 0;
  }
  struct ctl_refused *f = ctl_refused_find(ctl, node_id);
  if (f == NULL) {
    size_t i = 0;
    for (; i < ctl->nrefused; i++) {
      if (!ctl_refused_recent(ctl, ctl->refused[i].node_id)) {
        break; /* an expired entry is reused */
      }
    }
    if (i == CTL_MAX_REFUSED) {
      return 0; /* full: this report is not kept; the node reports again */
    }
    if (i == ctl->nrefused) {
      ctl->nrefused++;
    }
    f = &ctl->refused[i];
    f->node_id = node_id;
    log_warn("ctl",
             "metadata group: node %llu reports its metadata replica refused (its log was "
             "damaged): it is removed from the group, then added back empty",
             (unsigned long long)node_id);
  }
  f->heard_ms = uv_now(ctl->loop);
  return ctl_conf_find(ctl, node_id) == NULL && !ctl->changing &&
         ctl->raft.configuration_uncommitted_index == 0;
}

void ctl_note_rejoined(struct controller *ctl, uint64_t node_id)
{
  struct ctl_refused *f = ctl_is_leader(ctl) ? ctl_refused_find(ctl, node_id) : NULL;
  if (f != NULL) {
    *f = ctl->refused[--ctl->nrefused];
  }
}

/* Is id one of the cluster's configured controller voters (Bootstrap)? */
static bool ctl_configured_voter(const struct controller *ctl, uint64_t id)
{
  for (uint32_t i = 0; i < ctl->st.nvoters; i++) {
    if (ctl->st.voters[i] == id) {
      return true;
    }
  }
  return false;
}

/* A member whose replica is refused leaves first, voter or not: until the
 * committed configuration lacks it, what it acknowledged and voted before
 * its log was damaged still counts, and it may not discard its state. */
static bool ctl_step_refused(struct controller *ctl)
{
  const struct raft_configuration *c = &ctl->raft.configuration;
  for (unsigned i = 0; i < c->n; i++) {
    uint64_t id = c->servers[i].id;
    if (id == ctl->self_id || !ctl_refused_recent(ctl, id)) {
      continue;
    }
    int rv = raft_remove(&ctl->raft, &ctl->change, id, ctl_on_change_done);
    if (rv == 0) {
      ctl->changing = true;
      log_warn("ctl", "metadata group: remove node %llu (its metadata replica is refused)",
               (unsigned long long)id);
    } else {
      log_warn("ctl", "metadata group: remove node %llu (refused): %s", (unsigned long long)id,
               raft_errmsg(&ctl->raft));
    }
    return true;
  }
  return false;
}

/* Brings the group's membership one step closer to the node list: a
 * member whose replica is refused is removed (ctl_step_refused); a
 * registered node not in it is added (as a spare) then made a voter (a
 * configured voter: one rebuilt after its log was damaged) or a standby;
 * a removed node that is a standby leaves. Configured voters that are
 * voters are never changed here; a node reported refused is not added. */
static void ctl_step_membership(struct controller *ctl)
{
  if (ctl->changing) {
    return;
  }
  raftfix_conf_keep_now(&ctl->conf_kept, &ctl->raft); /* before a change of its own */
  ctl->change.data = ctl;
  if (ctl_step_refused(ctl)) {
    return;
  }
  for (size_t i = 0; i < ctl->st.nnodes; i++) {
    const struct meta_node *nd = (&ctl->st.nodes[i]);
    const struct raft_server *srv = ctl_conf_find(ctl, nd->id);
    bool voter = ctl_configured_voter(ctl, nd->id);
    int rv = 0;
    const char *what = NULL;
    if (nd->state == META_NODE_REMOVED) {
      if (srv != NULL && srv->role != RAFT_VOTER) {
        what = "remove";
        rv = raft_remove(&ctl->raft, &ctl->change, nd->id, ctl_on_change_done);
      }
    } else if (ctl_refused_recent(ctl, nd->id)) {
      continue; /* it rejoins empty first */
    } else if (srv == NULL) {
      what = "add";
      rv = raft_add(&ctl->raft, &ctl->change, nd->id, nd->cluster_addr, ctl_on_change_done);
    } else if (voter && srv->role != RAFT_VOTER) {
      /* raft 0.15 appends the change only once the server caught up */
      what = "assign voter";
      rv = raft_assign(&ctl->raft, &ctl->change, nd->id, RAFT_VOTER, ctl_on_change_done);
    } else if (srv->role == RAFT_SPARE) {
      what = "assign standby";
      rv = raft_assign(&ctl->raft, &ctl->change, nd->id, RAFT_STANDBY, ctl_on_change_done);
    }
    if (what == NULL) {
      continue;
    }
    if (rv == 0) {
      ctl->changing = true;
      log_info("ctl", "metadata group: %s node %llu", what, (unsigned long long)nd->id);
    } else {
      log_warn("ctl", "metadata group: %s node %llu: %s", what, (unsigned long long)nd->id,
               raft_errmsg(&ctl->raft));
    }
    return;
  }
}

static void ctl_on_plan_applied(struct ctl_propose *req, int status, const struct meta_result *res)
{
  struct controller *ctl = req->data;
  ctl->plan_inflight--;
  if (status != 0) {
    log_warn("ctl", "repair command not applied: %s", cairn_strerror(status));
  } else if (res != NULL && res->code != 0) {
    log_warn("ctl", "repair command refused: %s", res->msg);
  }
  free(req);
}

static void ctl_propose_plan(struct controller *ctl, const struct meta_plan_out *out)
{
  for (size_t i = 0; i < out->ncmds; i++) {
    struct ctl_propose *req = calloc(1, sizeof *req);
    if (req == NULL) {
      return;
    }
    req->data = ctl;
    int rv = ctl_propose(ctl, req, out->cmds[i].cmd, out->cmds[i].len, ctl_on_plan_applied);
    if (rv != 0) {
      free(req);
      return;
    }
    log_info("ctl", "repair: %s", out->cmds[i].why);
    ctl->plan_inflight++;
  }
}

/* Runs the planner on the leader's liveness view and the partition
 * reports, and proposes what it asks for. */
static void ctl_plan(struct controller *ctl)
{
  if (ctl->plan_inflight > 0) {
    return; /* one round at a time: the planner sees its own results */
  }
  uint64_t now = uv_now(ctl->loop);
  size_t nn = ctl->st.nnodes;
  struct meta_plan_liveness *live = calloc(nn > 0 ? nn : 1, sizeof *live);
  struct meta_plan_config *confs = calloc(ctl->reports.n > 0 ? ctl->reports.n : 1, sizeof *confs);
  if (live == NULL || confs == NULL) {
    free(live);
    free(confs);
    return;
  }
  size_t nlive = 0;
  for (size_t i = 0; i < nn; i++) {
    struct ctl_seen *s = ctl_seen_find(ctl, ctl->st.nodes[i].id);
    if (s == NULL && ctl->st.nodes[i].state != META_NODE_ALIVE) {
      continue; /* only a heartbeat brings a dead node back */
    }
    if (s == NULL) {
      /* Registered (alive) after this leader took over, when
       * ctl_reset_liveness gave the nodes it knew a full timeout, and not
       * heard from since: its timeout starts now. Without this a node
       * whose heartbeats never reached the leader was never declared
       * dead. */
      s = ctl_seen_get(ctl, ctl->st.nodes[i].id);
      if (s == NULL) {
        continue;
      }
      s->last_ms = now;
    }
    live[nlive].node_id = s->node_id;
    /* A node heard from by no one yet keeps the registered incarnation. */
    live[nlive].incarnation = s->incarnation ? s->incarnation : ctl->st.nodes[i].incarnation;
    live[nlive].ms_since_heartbeat = now - s->last_ms;
    nlive++;
  }
  for (size_t i = 0; i < ctl->reports.n; i++) {
    const struct ctl_report *r = &ctl->reports.v[i];
    confs[i].topic_id = r->topic_id;
    confs[i].partition = r->partition;
    confs[i].replica_epoch = r->replica_epoch;
    confs[i].voters = r->voters;
    confs[i].nvoters = r->nvoters;
  }
  struct meta_plan_input in = {.st = &ctl->st, .live = live, .nlive = nlive, .configs = confs,
                               .nconfigs = ctl->reports.n, .now_ms = (uint64_t)wallclock_ms()};
  meta_plan_opts_default(&in.opts);
  in.opts.node_timeout_ms = ctl->opts.node_timeout_ms;
  in.opts.replace_delay_ms = ctl->opts.replace_delay_ms;
  struct meta_plan_out out;
  int rv = meta_plan_run(&in, &out);
  free(live);
  free(confs);
  if (rv != 0) {
    log_warn("ctl", "planner: %s", cairn_strerror(rv));
    return;
  }
  ctl_propose_plan(ctl, &out);
  meta_plan_out_free(&out);
}

/* Back to the configured election timeout once a leader is known (an
 * entry applied: committed, so some leader is), or after
 * RGROUP_ELECT_GIVE_UP_MS without one. */
static void ctl_start_short_end(struct controller *ctl, bool leader_known)
{
  if (!ctl->start_short) {
    return;
  }
  uint64_t id = 0;
  const char *addr = NULL;
  ctl_leader(ctl, &id, &addr);
  if (!leader_known && id == 0 && uv_now(ctl->loop) - ctl->started_ms < RGROUP_ELECT_GIVE_UP_MS) {
    return;
  }
  rgroup_elect_restore_timer(&ctl->raft, ctl->opts.election_ms);
  ctl->start_short = false;
  log_info("ctl", "metadata replica %llu: election timeout back to %u ms after %llu ms",
           (unsigned long long)ctl->self_id, ctl->opts.election_ms,
           (unsigned long long)(uv_now(ctl->loop) - ctl->started_ms));
}

/* Logs the replica's role and the leader it knows when either changed
 * since the last tick (raft 0.15 has no state-change callback): an
 * operator reading a node's log sees the metadata group's elections. */
static void ctl_note_role(struct controller *ctl)
{
  int role = raft_state(&ctl->raft);
  uint64_t leader = 0;
  const char *addr = NULL;
  ctl_leader(ctl, &leader, &addr);
  if (role == ctl->last_role && leader == ctl->last_leader) {
    return;
  }
  static const char *const names[] = {"unavailable", "follower", "candidate", "leader"};
  log_info("ctl", "metadata replica %llu is now %s (term %llu, leader %llu, %s)",
           (unsigned long long)ctl->self_id, role >= 0 && role <= 3 ? names[role] : "?",
           (unsigned long long)ctl->raft.current_term, (unsigned long long)leader,
           ctl_self_role(ctl) == RAFT_VOTER ? "a voter" : "not a voter");
  ctl->last_role = role;
  ctl->last_leader = leader;
}

static void ctl_on_tick(uv_timer_t *t)
{
  struct controller *ctl = t->data;
  if (ctl->raft_failed) {
    if (!ctl->fatal_reported && ctl->state == CTL_RUNNING) {
      ctl->fatal_reported = true;
      if (ctl->opts.on_fatal != NULL) {
        ctl->opts.on_fatal(ctl, ctl->change_data);
      }
    }
    return;
  }
  ctl_start_short_end(ctl, false);
  ctl_note_role(ctl);
  size_t trimmed = raftfix_log_trim(&ctl->raft);
  if (trimmed > 0) {
    log_debug("controller", "metadata log: %zu bytes of raft's tables given back", trimmed);
  }
  if (!ctl_is_leader(ctl)) {
    return;
  }
  ctl_maybe_barrier(ctl);
  if (ctl->leader_term != ctl->raft.current_term) {
    ctl_reset_liveness(ctl);
    return; /* give everyone a timeout before judging */
  }
  ctl_step_membership(ctl);
  ctl_plan(ctl);
}

/* ---- close ---- */

static void ctl_on_part_closed(struct controller *ctl)
{
  if (--ctl->closing_parts > 0) {
    return;
  }
  meta_state_close(&ctl->st);
  raftfix_conf_close(&ctl->conf_kept);
  raftfix_snapshot_close(&ctl->snap_held);
  free(ctl->seen);
  ctl_reports_free(&ctl->reports);
  free(ctl->self_address);
  free(ctl->dir);
  ctl->seen = NULL;
  ctl->self_address = NULL;
  ctl->dir = NULL;
  ctl->state = CTL_CLOSED;
  if (ctl->close_cb != NULL) {
    ctl->close_cb(ctl);
  }
}

static void ctl_on_raft_closed(struct raft *r)
{
  struct controller *ctl = r->data;
  raft_uv_close(&ctl->wio.io);
  transport_group_release(&ctl->rt);
  ctl_on_part_closed(ctl);
}

static void ctl_on_tick_closed(uv_handle_t *h) { ctl_on_part_closed(h->data); }

void ctl_close(struct controller *ctl, ctl_close_cb cb)
{
  if (ctl->state == CTL_REFUSED) {
    ctl_free_unstarted(ctl); /* no Raft, no I/O, no tick */
    ctl->state = CTL_CLOSED;
    cb(ctl);
    return;
  }
  if (ctl->state == CTL_CLOSED) {
    cb(ctl); /* a failed ctl_rejoin closed it already */
    return;
  }
  if (ctl->state == CTL_CLOSING && ctl->close_cb == NULL) {
    ctl->close_cb = cb; /* a failed ctl_rejoin: its raft_close calls back */
    return;
  }
  if (ctl->state != CTL_RUNNING) {
    return;
  }
  ctl->state = CTL_CLOSING;
  ctl->close_cb = cb;
  ctl->closing_parts = 3;
  uv_close((uv_handle_t *)&ctl->tick, ctl_on_tick_closed);
  uv_close((uv_handle_t *)&ctl->held_check, ctl_on_tick_closed);
  raft_close(&ctl->raft, ctl_on_raft_closed);
}
