/* riow_mux.c - a replica's own raft_io: the node-wide log for storage, the
 * node's multiplexer for messages, a timer for the tick (riow_mux.h). */
#include "cluster/riow_mux.h"

#include "common/err.h"
#include "common/fsutil.h"
#include "common/log.h"

#include <assert.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

/* One async_work request on the thread pool. */
struct riow_mux_work {
  uv_work_t work;
  struct riow_mux *m;
  struct raft_io_async_work *req;
  raft_io_async_work_cb cb;
  int status;
};

static struct riow_mux *riow_mux_of(struct raft_io *io)
{
  return (struct riow_mux *)((char *)io - offsetof(struct riow_mux, io));
}

/* ---- storage: the node-wide log (raft_io_wal.h) ---- */

static int riow_mux_load(struct raft_io *io, raft_term *term, raft_id *vote,
                         struct raft_snapshot **s, raft_index *start, struct raft_entry **es,
                         size_t *n)
{
  return riow_load(&riow_mux_of(io)->riow, term, vote, s, start, es, n);
}

static int riow_mux_bootstrap(struct raft_io *io, const struct raft_configuration *c)
{
  return riow_bootstrap(&riow_mux_of(io)->riow, c);
}

static int riow_mux_recover(struct raft_io *io, const struct raft_configuration *c)
{
  return riow_recover(&riow_mux_of(io)->riow, c);
}

/* Term and vote: the record is queued in the log, and the group's sends
 * are held until it is durable (riow_mux.h, "Term and vote"). */
static int riow_mux_set_term(struct raft_io *io, raft_term term)
{
  struct riow_mux *m = riow_mux_of(io);
  int rv = riow_set_term(&m->riow, term);
  if (rv == 0 && m->riow.on_meta != NULL) {
    raftmux_hold(&m->mxg);
  }
  return rv;
}

static int riow_mux_set_vote(struct raft_io *io, raft_id id)
{
  struct riow_mux *m = riow_mux_of(io);
  int rv = riow_set_vote(&m->riow, id);
  if (rv == 0 && m->riow.on_meta != NULL) {
    raftmux_hold(&m->mxg);
  }
  return rv;
}

/* A term or vote record is durable (0), failed (the log is fatal) or was
 * never written (the log closed): its hold on the sends ends. */
static void riow_mux_on_meta(struct riow *x, int status)
{
  struct riow_mux *m = (struct riow_mux *)((char *)x - offsetof(struct riow_mux, riow));
  int code = status == 0 ? 0 : status == CAIRN_ECLOSED ? RAFT_CANCELED : RAFT_IOERR;
  raftmux_release(&m->mxg, code);
  if (code == RAFT_IOERR) {
    m->meta_failures++;
    if (m->on_failed != NULL) {
      m->on_failed(m, status);
    }
  }
}

static int riow_mux_append(struct raft_io *io, struct raft_io_append *req,
                           const struct raft_entry es[], unsigned n, raft_io_append_cb cb)
{
  return riow_append(&riow_mux_of(io)->riow, req, es, n, cb);
}

static int riow_mux_truncate(struct raft_io *io, raft_index index)
{
  return riow_truncate(&riow_mux_of(io)->riow, index);
}

static int riow_mux_snapshot_put(struct raft_io *io, unsigned trailing,
                                 struct raft_io_snapshot_put *req, const struct raft_snapshot *s,
                                 raft_io_snapshot_put_cb cb)
{
  return riow_snapshot_put(&riow_mux_of(io)->riow, trailing, req, s, cb);
}

static int riow_mux_snapshot_get(struct raft_io *io, struct raft_io_snapshot_get *req,
                                 raft_io_snapshot_get_cb cb)
{
  return riow_snapshot_get(&riow_mux_of(io)->riow, req, cb);
}

/* ---- messages: the node's multiplexer (raftmux.h) ---- */

static int riow_mux_send(struct raft_io *io, struct raft_io_send *req, const struct raft_message *m,
                         raft_io_send_cb cb)
{
  return raftmux_io_send(&riow_mux_of(io)->mxg, req, m, cb);
}

/* raftmux learns raft's receive callback here, then calls riow_mux_on_start. */
static int riow_mux_start(struct raft_io *io, unsigned msecs, raft_io_tick_cb tick,
                          raft_io_recv_cb recv)
{
  return raftmux_io_start(&riow_mux_of(io)->mxg, msecs, tick, recv);
}

/* raftmux waits for the group's sends, then calls riow_mux_on_close. */
static void riow_mux_close(struct raft_io *io, raft_io_close_cb cb)
{
  raftmux_io_close(&riow_mux_of(io)->mxg, cb);
}

/* ---- the group's transport: catch-up fetches only ---- */

/* A raft_uv connection from a peer that runs without --raft-mux: this
 * replica has no raft_uv to hand it to. The stream is the transport's
 * malloc'd uv_tcp_t. */
static void riow_mux_on_stream_closed(uv_handle_t *h)
{
  free(h);
}

static void riow_mux_on_accept(struct raft_uv_transport *rt, raft_id id, const char *address,
                               struct uv_stream_s *stream)
{
  struct riow_mux *m = rt->data;
  if (m->refused++ == 0) {
    log_warn("riow",
             "group %llu: refused a Raft connection from server %llu at %s: this "
             "replica takes Raft messages through the multiplexer only (--raft-mux on "
             "on every node)",
             (unsigned long long)m->riow.gid, (unsigned long long)id, address);
  }
  uv_close((uv_handle_t *)stream, riow_mux_on_stream_closed);
}

/* ---- lifecycle ---- */

static void riow_mux_set_state(struct riow_mux *m, enum riow_mux_state to)
{
  /* Forward only, one step at a time, or straight from INIT to CLOSING. */
  assert(to == m->state + 1 || (m->state == RIOW_MUX_INIT && to == RIOW_MUX_CLOSING));
  m->state = to;
}

static int riow_mux_init_io(struct raft_io *io, raft_id id, const char *address)
{
  struct riow_mux *m = riow_mux_of(io);
  if (m->rt == NULL) {
    return 0;
  }
  int rv = m->rt->init(m->rt, id, address);
  if (rv != 0) {
    snprintf(io->errmsg, sizeof io->errmsg, "transport: %.200s", m->rt->errmsg);
    return rv;
  }
  m->rt_init = true;
  return 0;
}

static void riow_mux_on_timer(uv_timer_t *t)
{
  struct riow_mux *m = t->data;
  if (m->state == RIOW_MUX_STARTED) {
    m->tick_cb(&m->io);
  }
}

/* raft_io->start, under raftmux's (which keeps recv). */
static int riow_mux_on_start(struct raft_io *io, unsigned msecs, raft_io_tick_cb tick,
                             raft_io_recv_cb recv)
{
  (void)recv;
  struct riow_mux *m = riow_mux_of(io);
  if (m->state != RIOW_MUX_INIT) {
    return RAFT_BUSY;
  }
  if (m->rt != NULL) {
    int rv = m->rt->listen(m->rt, riow_mux_on_accept);
    if (rv != 0) {
      snprintf(io->errmsg, sizeof io->errmsg, "transport: %.200s", m->rt->errmsg);
      return rv;
    }
  }
  m->tick_cb = tick;
  if (msecs > 0) { /* 0: the owner ticks raft itself */
    m->timer = malloc(sizeof *m->timer);
    if (m->timer == NULL) {
      snprintf(io->errmsg, sizeof io->errmsg, "tick timer: out of memory");
      return RAFT_NOMEM;
    }
    (void)uv_timer_init(m->loop, m->timer); /* cannot fail: no system call */
    m->timer->data = m;
    uv_timer_start(m->timer, riow_mux_on_timer, msecs, msecs);
  }
  riow_mux_set_state(m, RIOW_MUX_STARTED);
  return 0;
}

static raft_time riow_mux_time(struct raft_io *io)
{
  return uv_now(riow_mux_of(io)->loop);
}

/* xorshift64*: each io draws from its own sequence, seeded apart. */
static uint64_t riow_mux_next(struct riow_mux *m)
{
  uint64_t x = m->rand_state;
  x ^= x >> 12;
  x ^= x << 25;
  x ^= x >> 27;
  m->rand_state = x;
  return x * 0x2545F4914F6CDD1DULL;
}

/* Uniform enough in [min, max), like raft_uv's. */
static int riow_mux_random(struct raft_io *io, int min, int max)
{
  if (max <= min) {
    return min;
  }
  uint64_t span = (uint64_t)((int64_t)max - (int64_t)min);
  return (int)((int64_t)min + (int64_t)(riow_mux_next(riow_mux_of(io)) % span));
}

static void riow_mux_seed(struct riow_mux *m, uint64_t gid)
{
  uint64_t seed = 0;
  if (getrandom(&seed, sizeof seed, GRND_NONBLOCK) != (ssize_t)sizeof seed) {
    /* No entropy yet (early boot): time, process and group still differ. */
    seed = uv_hrtime() ^ ((uint64_t)getpid() << 32) ^ (gid * 0x9E3779B97F4A7C15ULL);
  }
  m->rand_state = seed != 0 ? seed : 0x9E3779B97F4A7C15ULL;
}

/* ---- async_work: raft's snapshot fsyncs on the thread pool ---- */

static void riow_mux_closing_step(struct riow_mux *m);

static void riow_mux_work_run(uv_work_t *w)
{
  struct riow_mux_work *aw = w->data;
  aw->status = aw->req->work(aw->req);
}

static void riow_mux_work_done(uv_work_t *w, int status)
{
  struct riow_mux_work *aw = w->data;
  struct riow_mux *m = aw->m;
  struct raft_io_async_work *req = aw->req;
  raft_io_async_work_cb cb = aw->cb;
  /* uv_cancel is never called: the work always ran. */
  int rv = status != 0 ? RAFT_CANCELED : aw->status;
  free(aw);
  m->works--;
  cb(req, rv);
  if (m->state == RIOW_MUX_CLOSING) {
    riow_mux_closing_step(m);
  }
}

static int riow_mux_async_work(struct raft_io *io, struct raft_io_async_work *req,
                               raft_io_async_work_cb cb)
{
  struct riow_mux *m = riow_mux_of(io);
  if (m->state != RIOW_MUX_STARTED) {
    return RAFT_CANCELED;
  }
  struct riow_mux_work *aw = malloc(sizeof *aw);
  if (aw == NULL) {
    return RAFT_NOMEM;
  }
  *aw = (struct riow_mux_work){.m = m, .req = req, .cb = cb};
  aw->work.data = aw;
  int rv = uv_queue_work(m->loop, &aw->work, riow_mux_work_run, riow_mux_work_done);
  if (rv != 0) {
    free(aw);
    snprintf(io->errmsg, sizeof io->errmsg, "async work: %s", uv_strerror(rv));
    return RAFT_IOERR;
  }
  m->works++;
  return 0;
}

/* ---- close ---- */

/* The last step of a close, from the loop. */
static void riow_mux_closed(struct riow_mux *m)
{
  raft_io_close_cb cb = m->close_cb;
  riow_mux_set_state(m, RIOW_MUX_CLOSED);
  if (cb != NULL) {
    cb(&m->io); /* raft may free m from here */
  }
}

static void riow_mux_on_timer_closed(uv_handle_t *h)
{
  struct riow_mux *m = h->data;
  free(h);
  riow_mux_closed(m);
}

static void riow_mux_on_deferred(struct raftmux_group *mg)
{
  riow_mux_closed((struct riow_mux *)((char *)mg - offsetof(struct riow_mux, mxg)));
}

/* Closes the timer, or without one (never started, or ticked by its
 * owner) still calls back from the loop. */
static void riow_mux_close_timer(struct riow_mux *m)
{
  if (m->timer == NULL) {
    raftmux_defer(&m->mxg, riow_mux_on_deferred);
    return;
  }
  uv_close((uv_handle_t *)m->timer, riow_mux_on_timer_closed);
  m->timer = NULL;
}

static void riow_mux_on_rt_closed(struct raft_uv_transport *rt)
{
  struct riow_mux *m = rt->data;
  riow_mux_close_timer(m);
}

/* Continues a close once the log's requests and the async work are done:
 * the transport (it stops routing the group's fetches), then the timer. */
static void riow_mux_closing_step(struct riow_mux *m)
{
  if (m->works > 0 || !m->wal_idle || m->drained) {
    return;
  }
  m->drained = true;
  if (m->rt_init) {
    m->rt_init = false;
    m->rt->close(m->rt, riow_mux_on_rt_closed);
    return;
  }
  riow_mux_close_timer(m);
}

static void riow_mux_on_wal_idle(struct riow *x)
{
  struct riow_mux *m = x->close_data;
  m->wal_idle = true;
  riow_mux_closing_step(m);
}

/* raft_io->close, under raftmux's: every send has called back. */
static void riow_mux_on_close(struct raft_io *io, raft_io_close_cb cb)
{
  struct riow_mux *m = riow_mux_of(io);
  if (m->timer != NULL) {
    uv_timer_stop(m->timer);
  }
  m->close_cb = cb;
  riow_mux_set_state(m, RIOW_MUX_CLOSING);
  riow_close(&m->riow, riow_mux_on_wal_idle, m);
}

int riow_mux_init(struct riow_mux *m, uv_loop_t *loop, struct wal *w, uint64_t gid,
                  const char *snap_dir, struct raftmux *mx, uint64_t self_id,
                  const char *self_address, struct raft_uv_transport *rt)
{
  memset(m, 0, sizeof *m);
  m->loop = loop;
  m->rt = rt;
  int rv = fs_mkdir_p(snap_dir);
  if (rv == 0) {
    rv = riow_init(&m->riow, loop, w, gid, snap_dir, m->io.errmsg);
  }
  if (rv != 0) {
    return rv;
  }
  struct raft_io *io = &m->io;
  io->version = 2; /* async_work */
  io->init = riow_mux_init_io;
  io->start = riow_mux_on_start; /* raftmux saves these two and wraps them */
  io->close = riow_mux_on_close;
  rv = raftmux_attach(mx, &m->mxg, io, gid, self_id, self_address);
  if (rv != 0) {
    riow_release(&m->riow);
    return rv;
  }
  io->start = riow_mux_start;
  io->close = riow_mux_close;
  io->send = riow_mux_send;
  io->load = riow_mux_load;
  io->bootstrap = riow_mux_bootstrap;
  io->recover = riow_mux_recover;
  io->set_term = riow_mux_set_term;
  io->set_vote = riow_mux_set_vote;
  io->append = riow_mux_append;
  io->truncate = riow_mux_truncate;
  io->snapshot_put = riow_mux_snapshot_put;
  io->snapshot_get = riow_mux_snapshot_get;
  io->time = riow_mux_time;
  io->random = riow_mux_random;
  io->async_work = riow_mux_async_work;
  if (rt != NULL) {
    rt->data = m;
  }
  riow_set_meta_async(&m->riow, riow_mux_on_meta);
  riow_mux_seed(m, gid);
  m->state = RIOW_MUX_INIT;
  return 0;
}

void riow_mux_set_group_commit(struct riow_mux *m, bool on)
{
  riow_set_meta_async(&m->riow, on ? riow_mux_on_meta : NULL);
}

void riow_mux_on_failed(struct riow_mux *m, void (*cb)(struct riow_mux *m, int status))
{
  m->on_failed = cb;
}

bool riow_mux_meta_pending(const struct riow_mux *m)
{
  return m->riow.meta_pending > 0;
}

void riow_mux_release(struct riow_mux *m)
{
  assert(m->state == RIOW_MUX_INIT);
  raftmux_detach(&m->mxg);
  riow_release(&m->riow);
  m->rt_init = false; /* the owner releases rt; it never listened */
}
