/* sim_io.c - the simulation's own raft_io (sim.h, "the io engine"): a
 * simulated disk per replica that keeps only what was made durable, and a
 * simulated network, both driven by one clock that jumps to the next event,
 * so that a replica can crash (its raft instance closed, every write not
 * yet durable lost or torn) and restart from what its disk kept, which
 * raft_fixture cannot do.
 *
 * Disk. Writes (appends and truncations) complete one after the other in
 * the order they were asked, each no earlier than disk_latency after it
 * was asked: raft_uv's order, which raft 0.15 relies on (docs/
 * fault-tolerance.md, seed 13263). A write becomes durable when it
 * completes, and only then does its callback fire. The term and the vote
 * are durable at once (raft_uv writes its metadata synchronously).
 * Happy path: append() queues a copy of the entries; the step that reaches
 * its completion time adds them to the durable log, then fires the
 * callback. Failure modes, at a crash (close() of a replica's io):
 *   - every queued write is lost, its callback fires with RAFT_CANCELED
 *     (raft is already unavailable; raft_uv does this at close), newest
 *     first (see sim_io_close);
 *   - with torn writes on, the write in progress (the head of the queue,
 *     if an append) may leave a prefix on the disk: whole entries, and
 *     possibly the next one cut short. Each durable record carries its
 *     declared length and a checksum; load() keeps records up to the first
 *     short or mismatching one and drops that one and everything after.
 * The early_ack mutant fires an append's callback at once and makes it
 * durable only at completion: an acknowledged write a crash can lose.
 *
 * Network. A message is copied at send() (the send callback fires at the
 * next step), delivered after the sender's latency plus a jitter of up to
 * half of it (so messages overtake one another), lost with probability
 * loss_ppm, duplicated with dup_ppm (the copy with its own delay), and
 * dropped at delivery if the link is cut or the receiver is down.
 *
 * Context: one thread; every callback into raft fires from sim_io_step(),
 * never from inside a raft_io method. */
#include "sim.h"

#include <stdlib.h>
#include <string.h>

/* One durable log record: what a replica's "file" holds for an entry. */
struct sim_io_rec {
  raft_term term;
  unsigned short type;
  uint32_t len;           /* the entry's length as declared in the record header */
  uint64_t sum;           /* of the whole entry, written in the record header */
  struct raft_buffer buf; /* the bytes that reached the disk (buf.len < len: torn) */
};

enum sim_io_op_kind { SIM_IO_APPEND, SIM_IO_TRUNCATE };

/* A disk write in flight (FIFO per replica). */
struct sim_io_op {
  enum sim_io_op_kind kind;
  int64_t done_ms;
  struct raft_io_append *req;
  struct sim_io_rec *recs; /* owned copies of the entries */
  unsigned n;
  raft_index index; /* SIM_IO_TRUNCATE: first index removed */
  bool acked;       /* its callback has fired (early_ack) */
  struct sim_io_op *next;
};

/* A send whose callback is due at the next step. */
struct sim_io_send {
  struct raft_io_send *req;
  struct sim_io_send *next;
};

/* A message on the wire. */
struct sim_io_msg {
  int64_t at_ms;
  uint64_t seq; /* ties broken by sending order */
  unsigned from, to;
  struct raft_message m; /* append entries: entries[0].batch owns the data */
  struct sim_io_msg *next;
};

static struct sim_io *sim_io_of(struct raft_io *io)
{
  return (struct sim_io *)((char *)io - offsetof(struct sim_io, io));
}

static void sim_io_rec_free(struct sim_io_rec *rec)
{
  raft_free(rec->buf.base);
  rec->buf.base = NULL;
}

static int sim_io_rec_copy(const struct raft_entry *e, struct sim_io_rec *rec)
{
  rec->term = e->term;
  rec->type = e->type;
  rec->len = (uint32_t)e->buf.len;
  rec->sum = sim_hash(e->buf.base, e->buf.len);
  rec->buf.len = e->buf.len;
  rec->buf.base = raft_malloc(e->buf.len > 0 ? e->buf.len : 1);
  if (rec->buf.base == NULL) {
    return RAFT_NOMEM;
  }
  memcpy(rec->buf.base, e->buf.base, e->buf.len);
  return 0;
}

/* ---- the disk ---- */

static int sim_io_disk_push(struct sim_io_disk *d, struct sim_io_rec *rec)
{
  if (d->n == d->cap) {
    size_t cap = d->cap ? d->cap * 2 : 64;
    struct sim_io_rec *nr = realloc(d->recs, cap * sizeof *nr);
    if (nr == NULL) {
      return RAFT_NOMEM;
    }
    d->recs = nr;
    d->cap = cap;
  }
  d->recs[d->n++] = *rec; /* takes the buffer */
  rec->buf.base = NULL;
  return 0;
}

/* Drops the records from index on (index 1 is recs[0]). */
static void sim_io_disk_cut(struct sim_io_disk *d, raft_index index)
{
  while (d->n > 0 && d->n >= index) {
    sim_io_rec_free(&d->recs[--d->n]);
  }
}

void sim_io_disk_close(struct sim_io_disk *d)
{
  sim_io_disk_cut(d, 1);
  free(d->recs);
  memset(d, 0, sizeof *d);
}

static void sim_io_op_free(struct sim_io_op *op)
{
  for (unsigned i = 0; i < op->n; i++) {
    sim_io_rec_free(&op->recs[i]);
  }
  free(op->recs);
  free(op);
}

/* The head write completes: durable first, then its callback. */
static void sim_io_op_complete(struct sim_io *sio)
{
  struct sim_io_op *op = sio->ops;
  sio->ops = op->next;
  if (op->kind == SIM_IO_TRUNCATE) {
    sim_io_disk_cut(&sio->disk, op->index);
  } else {
    for (unsigned i = 0; i < op->n; i++) {
      if (sim_io_disk_push(&sio->disk, &op->recs[i]) != 0) {
        sio->net->failed = true;
      }
    }
  }
  bool fire = op->kind == SIM_IO_APPEND && !op->acked;
  struct raft_io_append *req = op->req;
  sim_io_op_free(op);
  if (fire && req->cb != NULL) {
    req->cb(req, 0);
  }
}

/* The torn write: what of the write in progress reaches the disk when the
 * replica dies (sim_io.c header). */
static void sim_io_tear(struct sim_io *sio)
{
  struct sim_io_op *op = sio->ops;
  if (op == NULL || op->kind != SIM_IO_APPEND || !sio->net->torn_writes ||
      !sim_rng_chance(&sio->net->rng, 1, 2)) {
    return;
  }
  unsigned whole = sim_rng_below(&sio->net->rng, op->n);
  for (unsigned i = 0; i < whole; i++) {
    (void)sim_io_disk_push(&sio->disk, &op->recs[i]);
  }
  sio->torn_entries += whole;
  struct sim_io_rec *cut = &op->recs[whole];
  if (cut->len > 1 && sim_rng_chance(&sio->net->rng, 1, 2)) {
    cut->buf.len = 1 + sim_rng_below(&sio->net->rng, cut->len - 1);
    (void)sim_io_disk_push(&sio->disk, cut);
    sio->torn_cut++;
  }
}

/* ---- raft_io methods ---- */

static int sim_io_init(struct raft_io *io, raft_id id, const char *address)
{
  struct sim_io *sio = sim_io_of(io);
  sio->id = id;
  (void)address;
  return 0;
}

static void sim_io_close(struct raft_io *io, raft_io_close_cb cb)
{
  struct sim_io *sio = sim_io_of(io);
  sio->up = false;
  sio->started = false;
  sim_io_tear(sio);
  if (!sio->net->cancel_oldest_first) {
    /* A crash fires nothing on a node, so the order is free here; newest
     * first, because raft 0.15 cannot take raft_uv's order (oldest first)
     * when a leader has two appends cancelled: appendLeaderCb truncates its
     * log from the first one's index, and the second one's logTruncate then
     * starts past the log's end (removeSuffix's assert is compiled out in
     * Debian's build; the count underflows) and walks off the log: SEGV.
     * --cancel-oldest-first reproduces it (docs/fault-tolerance.md). */
    struct sim_io_op *rev = NULL;
    while (sio->ops != NULL) {
      struct sim_io_op *op = sio->ops;
      sio->ops = op->next;
      op->next = rev;
      rev = op;
    }
    sio->ops = rev;
  }
  while (sio->ops != NULL) {
    struct sim_io_op *op = sio->ops;
    sio->ops = op->next;
    bool fire = op->kind == SIM_IO_APPEND && !op->acked;
    struct raft_io_append *req = op->req;
    sim_io_op_free(op);
    if (fire && req->cb != NULL) {
      req->cb(req, RAFT_CANCELED);
    }
  }
  while (sio->sends != NULL) {
    struct sim_io_send *snd = sio->sends;
    sio->sends = snd->next;
    struct raft_io_send *req = snd->req;
    free(snd);
    if (req->cb != NULL) {
      req->cb(req, RAFT_CANCELED);
    }
  }
  if (cb != NULL) {
    cb(io);
  }
}

/* Reads the durable log: records up to the first torn or corrupt one (that
 * one and everything after it dropped from the disk, as a loader repairs a
 * torn tail), copied into one batch that raft takes. */
static int sim_io_load(struct raft_io *io, raft_term *term, raft_id *voted_for,
                       struct raft_snapshot **snapshot, raft_index *start_index,
                       struct raft_entry *entries[], size_t *n_entries)
{
  struct sim_io *sio = sim_io_of(io);
  struct sim_io_disk *d = &sio->disk;
  size_t good = 0, bytes = 0;
  while (good < d->n && d->recs[good].buf.len == d->recs[good].len &&
         sim_hash(d->recs[good].buf.base, d->recs[good].buf.len) == d->recs[good].sum) {
    bytes += d->recs[good].len;
    good++;
  }
  if (good < d->n) {
    sio->torn_dropped += d->n - good;
    sim_io_disk_cut(d, good + 1);
  }
  *term = d->term;
  *voted_for = d->vote;
  *snapshot = NULL;
  *start_index = 1;
  *n_entries = good;
  *entries = NULL;
  if (good == 0) {
    return 0;
  }
  struct raft_entry *es = raft_malloc(good * sizeof *es);
  uint8_t *batch = raft_malloc(bytes > 0 ? bytes : 1);
  if (es == NULL || batch == NULL) {
    raft_free(es);
    raft_free(batch);
    return RAFT_NOMEM;
  }
  size_t pos = 0;
  for (size_t i = 0; i < good; i++) {
    es[i].term = d->recs[i].term;
    es[i].type = d->recs[i].type;
    es[i].buf.base = batch + pos;
    es[i].buf.len = d->recs[i].len;
    es[i].batch = batch;
    memcpy(batch + pos, d->recs[i].buf.base, d->recs[i].len);
    pos += d->recs[i].len;
  }
  *entries = es;
  return 0;
}

static int sim_io_start(struct raft_io *io, unsigned msecs, raft_io_tick_cb tick,
                        raft_io_recv_cb recv)
{
  struct sim_io *sio = sim_io_of(io);
  sio->tick_ms = msecs;
  sio->next_tick_ms = sio->net->now + msecs;
  sio->tick = tick;
  sio->recv = recv;
  sio->started = true;
  sio->up = true;
  return 0;
}

static int sim_io_bootstrap(struct raft_io *io, const struct raft_configuration *conf)
{
  struct sim_io *sio = sim_io_of(io);
  if (sio->disk.n != 0 || sio->disk.term != 0) {
    return RAFT_CANTBOOTSTRAP;
  }
  struct raft_buffer buf;
  int rv = raft_configuration_encode(conf, &buf);
  if (rv != 0) {
    return rv;
  }
  struct raft_entry e = {.term = 1, .type = RAFT_CHANGE, .buf = buf};
  struct sim_io_rec rec;
  rv = sim_io_rec_copy(&e, &rec);
  raft_free(buf.base);
  if (rv == 0) {
    rv = sim_io_disk_push(&sio->disk, &rec);
  }
  if (rv != 0) {
    sim_io_rec_free(&rec);
    return rv;
  }
  sio->disk.term = 1;
  sio->disk.vote = 0;
  return 0;
}

static int sim_io_recover(struct raft_io *io, const struct raft_configuration *conf)
{
  (void)io;
  (void)conf;
  return RAFT_IOERR; /* not simulated */
}

static int sim_io_set_term(struct raft_io *io, raft_term term)
{
  struct sim_io *sio = sim_io_of(io);
  sio->disk.term = term;
  sio->disk.vote = 0;
  return 0;
}

static int sim_io_set_vote(struct raft_io *io, raft_id server_id)
{
  sim_io_of(io)->disk.vote = server_id;
  return 0;
}

static void sim_io_msg_free(struct sim_io_msg *msg)
{
  if (msg->m.type == RAFT_IO_APPEND_ENTRIES && msg->m.append_entries.entries != NULL) {
    raft_free(msg->m.append_entries.entries[0].batch);
    raft_free(msg->m.append_entries.entries);
  }
  free(msg);
}

/* A deep copy of m (append entries: one batch), or NULL. */
static struct sim_io_msg *sim_io_msg_copy(const struct raft_message *m)
{
  struct sim_io_msg *msg = calloc(1, sizeof *msg);
  if (msg == NULL) {
    return NULL;
  }
  msg->m = *m;
  if (m->type != RAFT_IO_APPEND_ENTRIES) {
    return msg;
  }
  const struct raft_append_entries *ae = &m->append_entries;
  msg->m.append_entries.entries = NULL;
  if (ae->n_entries == 0) {
    return msg;
  }
  size_t bytes = 0;
  for (unsigned i = 0; i < ae->n_entries; i++) {
    bytes += ae->entries[i].buf.len;
  }
  struct raft_entry *es = raft_malloc(ae->n_entries * sizeof *es);
  uint8_t *batch = raft_malloc(bytes > 0 ? bytes : 1);
  if (es == NULL || batch == NULL) {
    raft_free(es);
    raft_free(batch);
    free(msg);
    return NULL;
  }
  size_t pos = 0;
  for (unsigned i = 0; i < ae->n_entries; i++) {
    es[i] = ae->entries[i];
    es[i].buf.base = batch + pos;
    es[i].batch = batch;
    memcpy(batch + pos, ae->entries[i].buf.base, ae->entries[i].buf.len);
    pos += ae->entries[i].buf.len;
  }
  msg->m.append_entries.entries = es;
  return msg;
}

static void sim_io_msg_queue(struct sim_net *net, struct sim_io_msg *msg, unsigned from)
{
  unsigned lat = net->latency[from];
  msg->at_ms = net->now + lat + sim_rng_below(&net->rng, lat / 2 + 1);
  msg->seq = net->seq++;
  msg->next = net->msgs;
  net->msgs = msg;
}

static int sim_io_send(struct raft_io *io, struct raft_io_send *req, const struct raft_message *m,
                       raft_io_send_cb cb)
{
  struct sim_io *sio = sim_io_of(io);
  struct sim_net *net = sio->net;
  struct sim_io_send *snd = calloc(1, sizeof *snd);
  if (snd == NULL) {
    return RAFT_NOMEM;
  }
  req->cb = cb;
  snd->req = req;
  struct sim_io_send **tail = &sio->sends;
  while (*tail != NULL) {
    tail = &(*tail)->next;
  }
  *tail = snd;
  unsigned to = (unsigned)(m->server_id - 1);
  if (to >= net->n || sim_rng_below(&net->rng, 1000000) < net->loss_ppm) {
    net->lost++;
    return 0; /* gone on the wire: the send itself succeeded */
  }
  unsigned copies = sim_rng_below(&net->rng, 1000000) < net->dup_ppm ? 2 : 1;
  for (unsigned c = 0; c < copies; c++) {
    struct sim_io_msg *msg = sim_io_msg_copy(m);
    if (msg == NULL) {
      net->failed = true;
      return 0;
    }
    msg->from = sio->index;
    msg->to = to;
    sim_io_msg_queue(net, msg, sio->index);
  }
  net->duplicated += copies - 1;
  return 0;
}

static int sim_io_append(struct raft_io *io, struct raft_io_append *req,
                         const struct raft_entry entries[], unsigned n, raft_io_append_cb cb)
{
  struct sim_io *sio = sim_io_of(io);
  struct sim_io_op *op = calloc(1, sizeof *op);
  struct sim_io_rec *recs = calloc(n > 0 ? n : 1, sizeof *recs);
  if (op == NULL || recs == NULL) {
    free(op);
    free(recs);
    return RAFT_NOMEM;
  }
  op->kind = SIM_IO_APPEND;
  op->recs = recs;
  for (unsigned i = 0; i < n; i++) {
    if (sim_io_rec_copy(&entries[i], &recs[i]) != 0) {
      sim_io_op_free(op);
      return RAFT_NOMEM;
    }
    op->n++;
  }
  req->cb = cb;
  op->req = req;
  int64_t done = sio->net->now + sio->disk_latency;
  op->done_ms = done > sio->last_done_ms ? done : sio->last_done_ms;
  sio->last_done_ms = op->done_ms;
  struct sim_io_op **tail = &sio->ops;
  while (*tail != NULL) {
    tail = &(*tail)->next;
  }
  *tail = op;
  return 0;
}

static int sim_io_truncate(struct raft_io *io, raft_index index)
{
  struct sim_io *sio = sim_io_of(io);
  struct sim_io_op *op = calloc(1, sizeof *op);
  if (op == NULL) {
    return RAFT_NOMEM;
  }
  op->kind = SIM_IO_TRUNCATE;
  op->index = index;
  op->acked = true;
  op->done_ms = sio->net->now > sio->last_done_ms ? sio->net->now : sio->last_done_ms;
  sio->last_done_ms = op->done_ms;
  struct sim_io_op **tail = &sio->ops;
  while (*tail != NULL) {
    tail = &(*tail)->next;
  }
  *tail = op;
  return 0;
}

static int sim_io_snapshot_put(struct raft_io *io, unsigned trailing,
                               struct raft_io_snapshot_put *req,
                               const struct raft_snapshot *snapshot, raft_io_snapshot_put_cb cb)
{
  (void)io;
  (void)trailing;
  (void)req;
  (void)snapshot;
  (void)cb;
  return RAFT_IOERR; /* snapshots are not simulated (the threshold is never reached) */
}

static int sim_io_snapshot_get(struct raft_io *io, struct raft_io_snapshot_get *req,
                               raft_io_snapshot_get_cb cb)
{
  (void)io;
  (void)req;
  (void)cb;
  return RAFT_IOERR;
}

static raft_time sim_io_time(struct raft_io *io)
{
  return (raft_time)sim_io_of(io)->net->now;
}

static int sim_io_random(struct raft_io *io, int min, int max)
{
  struct sim_net *net = sim_io_of(io)->net;
  return max > min ? min + (int)sim_rng_below(&net->rng, (uint32_t)(max - min)) : min;
}

void sim_io_init_replica(struct sim_io *sio, struct sim_net *net, unsigned index)
{
  memset(sio, 0, sizeof *sio);
  sio->net = net;
  sio->index = index;
  sio->disk_latency = 1;
  snprintf(sio->address, sizeof sio->address, "%u", index + 1);
  struct raft_io *io = &sio->io;
  io->version = 1;
  io->impl = sio;
  io->init = sim_io_init;
  io->close = sim_io_close;
  io->load = sim_io_load;
  io->start = sim_io_start;
  io->bootstrap = sim_io_bootstrap;
  io->recover = sim_io_recover;
  io->set_term = sim_io_set_term;
  io->set_vote = sim_io_set_vote;
  io->send = sim_io_send;
  io->append = sim_io_append;
  io->truncate = sim_io_truncate;
  io->snapshot_put = sim_io_snapshot_put;
  io->snapshot_get = sim_io_snapshot_get;
  io->time = sim_io_time;
  io->random = sim_io_random;
  net->ios[index] = sio;
  if (index >= net->n) {
    net->n = index + 1;
  }
}

/* ---- the driver's side ---- */

void sim_net_close(struct sim_net *net)
{
  while (net->msgs != NULL) {
    struct sim_io_msg *msg = net->msgs;
    net->msgs = msg->next;
    sim_io_msg_free(msg);
  }
}

static void sim_io_deliver(struct sim_net *net, struct sim_io_msg *msg)
{
  struct sim_io *to = net->ios[msg->to];
  struct sim_io *from = net->ios[msg->from];
  if (!to->up || !to->started || net->cut[msg->from][msg->to]) {
    net->dropped++;
    sim_io_msg_free(msg);
    return;
  }
  msg->m.server_id = from->id;
  msg->m.server_address = from->address;
  net->delivered++;
  to->recv(&to->io, &msg->m); /* raft takes the entries */
  free(msg);
}

/* Fires the earliest event: a send callback, an early acknowledgement, a
 * disk write's completion, a message's delivery or a tick, ties broken in
 * that order, then by replica, then by sending order. Advances now to its
 * time (never past until_ms: then nothing fires). Returns the event kind
 * (SIM_IO_EV_*), or SIM_IO_EV_NONE, with *who its replica. */
enum sim_io_event sim_net_step(struct sim_net *net, int64_t until_ms, unsigned *who)
{
  int64_t best = INT64_MAX;
  enum sim_io_event kind = SIM_IO_EV_NONE;
  unsigned bi = 0;
  struct sim_io_op *bop = NULL;
  struct sim_io_msg **bmsg = NULL;
  for (unsigned i = 0; i < net->n; i++) {
    struct sim_io *sio = net->ios[i];
    if (!sio->up) {
      continue;
    }
    if (sio->sends != NULL && net->now < best) {
      best = net->now, kind = SIM_IO_EV_SEND, bi = i;
    }
  }
  for (unsigned i = 0; i < net->n && kind == SIM_IO_EV_NONE; i++) {
    struct sim_io *sio = net->ios[i];
    for (struct sim_io_op *op = sio->up ? sio->ops : NULL; op != NULL; op = op->next) {
      if (!op->acked && net->early_ack && op->kind == SIM_IO_APPEND && net->now < best) {
        best = net->now, kind = SIM_IO_EV_ACK, bi = i, bop = op;
      }
    }
  }
  for (unsigned i = 0; i < net->n; i++) {
    struct sim_io *sio = net->ios[i];
    if (sio->up && sio->ops != NULL && sio->ops->done_ms < best) {
      best = sio->ops->done_ms, kind = SIM_IO_EV_DISK, bi = i;
    }
  }
  for (struct sim_io_msg **pm = &net->msgs; *pm != NULL; pm = &(*pm)->next) {
    struct sim_io_msg *m = *pm;
    if (m->at_ms < best || (m->at_ms == best && kind == SIM_IO_EV_NET && m->seq < (*bmsg)->seq)) {
      best = m->at_ms, kind = SIM_IO_EV_NET, bi = m->to, bmsg = pm;
    }
  }
  for (unsigned i = 0; i < net->n; i++) {
    struct sim_io *sio = net->ios[i];
    if (sio->up && sio->started && sio->next_tick_ms < best) {
      best = sio->next_tick_ms, kind = SIM_IO_EV_TICK, bi = i;
    }
  }
  if (kind == SIM_IO_EV_NONE || best > until_ms) {
    if (until_ms > net->now) {
      net->now = until_ms;
    }
    return SIM_IO_EV_NONE;
  }
  if (best > net->now) {
    net->now = best;
  }
  *who = bi;
  struct sim_io *sio = net->ios[bi];
  switch (kind) {
  case SIM_IO_EV_SEND: {
    struct sim_io_send *snd = sio->sends;
    sio->sends = snd->next;
    struct raft_io_send *req = snd->req;
    free(snd);
    if (req->cb != NULL) {
      req->cb(req, 0);
    }
    break;
  }
  case SIM_IO_EV_ACK:
    bop->acked = true;
    if (bop->req->cb != NULL) {
      bop->req->cb(bop->req, 0);
    }
    break;
  case SIM_IO_EV_DISK:
    sim_io_op_complete(sio);
    break;
  case SIM_IO_EV_NET: {
    struct sim_io_msg *m = *bmsg;
    *bmsg = m->next;
    sim_io_deliver(net, m);
    break;
  }
  case SIM_IO_EV_TICK:
    sio->next_tick_ms = net->now + sio->tick_ms;
    sio->tick(&sio->io);
    break;
  default:
    break;
  }
  return kind;
}
