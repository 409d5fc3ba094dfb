/* raft_rec.c - raft 0.15 over a recording raft_io (raft_rec.h). */
#include "raft_rec.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

static int raft_rec_init_io(struct raft_io *io, raft_id id, const char *address)
{
  (void)io, (void)id, (void)address;
  return 0;
}

static void raft_rec_conf(struct raft_configuration *conf)
{
  static const char *const addrs[] = {"1", "2", "3"};
  raft_configuration_init(conf);
  for (raft_id id = 1; id <= 3; id++) {
    assert_int_equal(raft_configuration_add(conf, id, addrs[id - 1], RAFT_VOTER), 0);
  }
}

static struct raft_snapshot *raft_rec_snapshot(const struct raft_rec *ri)
{
  struct raft_snapshot *s = raft_calloc(1, sizeof *s);
  assert_non_null(s);
  s->index = ri->snap_index;
  s->term = ri->snap_term;
  raft_rec_conf(&s->configuration);
  s->configuration_index = 1;
  s->bufs = raft_calloc(1, sizeof *s->bufs);
  assert_non_null(s->bufs);
  s->bufs[0].base = raft_malloc(8);
  assert_non_null(s->bufs[0].base);
  s->bufs[0].len = 8;
  memset(s->bufs[0].base, 0, 8);
  s->n_bufs = 1;
  return s;
}

/* The configuration entry, or n_tail command entries after a snapshot. */
static int raft_rec_load(struct raft_io *io, raft_term *term, raft_id *voted_for,
                         struct raft_snapshot **snapshot, raft_index *start_index,
                         struct raft_entry **entries, size_t *n_entries)
{
  struct raft_rec *ri = io->impl;
  bool snap = ri->snap_index != 0;
  size_t n = snap ? ri->n_tail : 1;
  raft_term t = snap ? ri->snap_term : 1;
  struct raft_entry *e = n == 0 ? NULL : raft_calloc(n, sizeof *e);
  assert_true(n == 0 || e != NULL);
  for (size_t i = 0; i < n; i++) {
    e[i].term = t;
    if (snap && ri->tail_change && i + 1 == n) {
      struct raft_configuration conf;
      raft_rec_conf(&conf);
      assert_int_equal(raft_configuration_add(&conf, 4, "4", RAFT_VOTER), 0);
      e[i].type = RAFT_CHANGE;
      assert_int_equal(raft_configuration_encode(&conf, &e[i].buf), 0);
      raft_configuration_close(&conf);
    } else if (snap) {
      e[i].type = RAFT_COMMAND;
      e[i].buf.base = raft_malloc(8);
      assert_non_null(e[i].buf.base);
      memset(e[i].buf.base, 0, 8);
      e[i].buf.len = 8;
    } else {
      struct raft_configuration conf;
      raft_rec_conf(&conf);
      e[i].type = RAFT_CHANGE;
      assert_int_equal(raft_configuration_encode(&conf, &e[i].buf), 0);
      raft_configuration_close(&conf);
    }
    e[i].batch = e[i].buf.base;
  }
  ri->term = t;
  *term = t;
  *voted_for = 0;
  *snapshot = snap ? raft_rec_snapshot(ri) : NULL;
  *start_index = snap ? ri->snap_index + 1 : 1;
  *entries = e;
  *n_entries = n;
  return 0;
}

static int raft_rec_io_start(struct raft_io *io, unsigned msecs, raft_io_tick_cb tick,
                             raft_io_recv_cb recv)
{
  (void)msecs;
  struct raft_rec *ri = io->impl;
  ri->tick = tick;
  ri->recv = recv;
  return 0;
}

static int raft_rec_set_term(struct raft_io *io, raft_term term)
{
  struct raft_rec *ri = io->impl;
  ri->term = term;
  ri->vote = 0;
  return 0;
}

static int raft_rec_set_vote(struct raft_io *io, raft_id id)
{
  struct raft_rec *ri = io->impl;
  ri->vote = id;
  return 0;
}

static int raft_rec_send(struct raft_io *io, struct raft_io_send *req, const struct raft_message *m,
                         raft_io_send_cb cb)
{
  struct raft_rec *ri = io->impl;
  assert_true(ri->nsent < RAFT_REC_MAX);
  ri->reqs[ri->nsent] = req;
  ri->cbs[ri->nsent] = cb;
  ri->sent[ri->nsent] = *m;
  ri->nsent++;
  return 0;
}

static int raft_rec_append(struct raft_io *io, struct raft_io_append *req,
                           const struct raft_entry entries[], unsigned n, raft_io_append_cb cb)
{
  (void)entries, (void)n;
  struct raft_rec *ri = io->impl;
  assert_true(ri->nappends < RAFT_REC_MAX);
  ri->appends[ri->nappends] = req;
  ri->append_cbs[ri->nappends] = cb;
  ri->nappends++;
  return 0;
}

static int raft_rec_snapshot_put(struct raft_io *io, unsigned trailing,
                                 struct raft_io_snapshot_put *req,
                                 const struct raft_snapshot *snapshot, raft_io_snapshot_put_cb cb)
{
  (void)trailing;
  struct raft_rec *ri = io->impl;
  assert_null(ri->put_cb); /* raft takes one at a time */
  ri->put = req;
  ri->put_cb = cb;
  ri->nputs++;
  ri->put_index = snapshot->index;
  ri->put_conf_index = snapshot->configuration_index;
  ri->put_servers = snapshot->configuration.n;
  ri->put_voters = 0;
  for (unsigned i = 0; i < snapshot->configuration.n; i++) {
    ri->put_voters += snapshot->configuration.servers[i].role == RAFT_VOTER ? 1u : 0u;
  }
  return 0;
}

/* A leader reads its snapshot to send it: the loaded one (snap_index),
 * handed over at the next raft_rec_flush. */
static int raft_rec_snapshot_get(struct raft_io *io, struct raft_io_snapshot_get *req,
                                 raft_io_snapshot_get_cb cb)
{
  struct raft_rec *ri = io->impl;
  assert_null(ri->get_cb); /* one at a time here */
  ri->get = req;
  ri->get_cb = cb;
  ri->ngets++;
  return 0;
}

/* Truncations complete at once: nothing is stored to cut. */
static int raft_rec_truncate(struct raft_io *io, raft_index index)
{
  (void)io, (void)index;
  return 0;
}

static raft_time raft_rec_time(struct raft_io *io)
{
  return ((struct raft_rec *)io->impl)->now;
}

static int raft_rec_random(struct raft_io *io, int min, int max)
{
  (void)io, (void)max;
  return min;
}

static void raft_rec_close(struct raft_io *io, raft_io_close_cb cb)
{
  if (cb != NULL) {
    cb(io);
  }
}

void raft_rec_init(struct raft_rec *ri)
{
  memset(ri, 0, sizeof *ri);
  ri->io.impl = ri;
  ri->io.init = raft_rec_init_io;
  ri->io.load = raft_rec_load;
  ri->io.start = raft_rec_io_start;
  ri->io.set_term = raft_rec_set_term;
  ri->io.set_vote = raft_rec_set_vote;
  ri->io.send = raft_rec_send;
  ri->io.append = raft_rec_append;
  ri->io.truncate = raft_rec_truncate;
  ri->io.snapshot_put = raft_rec_snapshot_put;
  ri->io.snapshot_get = raft_rec_snapshot_get;
  ri->io.time = raft_rec_time;
  ri->io.random = raft_rec_random;
  ri->io.close = raft_rec_close;
}

void raft_rec_flush(struct raft_rec *ri)
{
  for (unsigned i = 0; i < ri->nsent; i++) {
    if (ri->cbs[i] != NULL) {
      ri->cbs[i](ri->reqs[i], 0);
    }
    ri->cbs[i] = NULL;
  }
  for (unsigned i = 0; i < ri->nappends; i++) {
    if (ri->append_cbs[i] != NULL) {
      ri->append_cbs[i](ri->appends[i], 0);
    }
    ri->append_cbs[i] = NULL;
  }
  if (ri->put_cb != NULL) {
    raft_io_snapshot_put_cb cb = ri->put_cb;
    ri->put_cb = NULL;
    cb(ri->put, 0);
  }
  if (ri->get_cb != NULL) {
    raft_io_snapshot_get_cb cb = ri->get_cb;
    ri->get_cb = NULL;
    cb(ri->get, raft_rec_snapshot(ri), 0); /* raft frees it after the send */
  }
}

void raft_rec_lead(struct raft_rec *ri, struct raft *r, raft_id voter)
{
  static const char *const addrs[] = {"", "1", "2", "3"};
  raft_term term = r->current_term + 1;
  ri->now += 10 * r->election_timeout;
  ri->tick(&ri->io);
  assert_int_equal(raft_state(r), RAFT_CANDIDATE);
  assert_int_equal(r->current_term, term);
  struct raft_message res;
  memset(&res, 0, sizeof res);
  res.type = RAFT_IO_REQUEST_VOTE_RESULT;
  res.server_id = voter;
  res.server_address = addrs[voter];
  res.request_vote_result.term = term;
  res.request_vote_result.vote_granted = true;
  res.request_vote_result.pre_vote = raft_tribool_false;
  ri->recv(&ri->io, &res);
  assert_int_equal(raft_state(r), RAFT_LEADER);
}

void raft_rec_forget_sent(struct raft_rec *ri)
{
  raft_rec_flush(ri);
  ri->nsent = 0;
}

const struct raft_message *raft_rec_last(const struct raft_rec *ri, unsigned short type, raft_id to)
{
  for (unsigned i = ri->nsent; i-- > 0;) {
    if (ri->sent[i].type == type && ri->sent[i].server_id == to) {
      return &ri->sent[i];
    }
  }
  return NULL;
}

static int raft_rec_apply(struct raft_fsm *fsm, const struct raft_buffer *buf, void **result)
{
  (void)fsm, (void)buf;
  *result = NULL;
  return 0;
}

static int raft_rec_restore(struct raft_fsm *fsm, struct raft_buffer *buf)
{
  (void)fsm;
  raft_free(buf->base);
  return 0;
}

void raft_rec_start(struct raft_rec *ri, struct raft *r, struct raft_fsm *fsm)
{
  memset(fsm, 0, sizeof *fsm);
  fsm->apply = raft_rec_apply;
  fsm->restore = raft_rec_restore;
  assert_int_equal(raft_init(r, &ri->io, fsm, 1, "1"), 0);
  assert_int_equal(raft_start(r), 0);
  assert_int_equal(raft_state(r), RAFT_FOLLOWER);
}

static bool raft_rec_closed;
static void raft_rec_on_close(struct raft *r)
{
  (void)r;
  raft_rec_closed = true;
}

void raft_rec_stop(struct raft_rec *ri, struct raft *r)
{
  raft_rec_flush(ri);
  raft_rec_closed = false;
  raft_close(r, raft_rec_on_close);
  raft_rec_flush(ri);
  assert_true(raft_rec_closed);
}
