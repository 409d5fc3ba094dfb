/* raftmux.c - the partition groups' Raft messages over one connection per
 * peer node: the send/receive multiplexer (raftmux.h; the frame codec is
 * raftmux_codec.c). */
#include "cluster/raftmux.h"

#include "cluster/rgroup.h"
#include "common/err.h"
#include "common/log.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

/* ---- the multiplexer ---- */

/* One send whose callback is due, or one held (raftmux_hold) with its
 * encoded frame. */
struct raftmux_send {
  struct raft_io_send *req;
  raft_io_send_cb cb;
  int status;
  struct raftmux_group *mg;
  struct raftmux_send *next;
  uint64_t to;  /* held: the peer's server id */
  uint8_t *buf; /* held: the frame (owned), NULL once sent or failed */
  size_t len;
};

/* The index of gid in mx->groups, or where it would go. */
static size_t raftmux_find(const struct raftmux *mx, uint64_t gid)
{
  size_t lo = 0, hi = mx->ngroups;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (mx->groups[mid]->gid < gid) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  return lo;
}

static int raftmux_register(struct raftmux *mx, struct raftmux_group *mg)
{
  size_t i = raftmux_find(mx, mg->gid);
  if (i < mx->ngroups && mx->groups[i]->gid == mg->gid) {
    mx->groups[i] = mg; /* a reopened replica replaces the closing one */
    return 0;
  }
  if (mx->ngroups == mx->cap) {
    size_t cap = mx->cap > 0 ? mx->cap * 2 : 64;
    struct raftmux_group **g = realloc(mx->groups, cap * sizeof *g);
    if (g == NULL) {
      return CAIRN_ENOMEM;
    }
    mx->groups = g;
    mx->cap = cap;
  }
  memmove(mx->groups + i + 1, mx->groups + i, (mx->ngroups - i) * sizeof *mx->groups);
  mx->groups[i] = mg;
  mx->ngroups++;
  return 0;
}

static void raftmux_unregister(struct raftmux *mx, struct raftmux_group *mg)
{
  /* A closing group sends nothing more (raftmux_io_send). */
  free(mg->address);
  mg->address = NULL;
  size_t i = raftmux_find(mx, mg->gid);
  if (i >= mx->ngroups || mx->groups[i] != mg) {
    return; /* replaced by a newer attachment of the same gid */
  }
  memmove(mx->groups + i, mx->groups + i + 1, (mx->ngroups - i - 1) * sizeof *mx->groups);
  mx->ngroups--;
}

static void raftmux_on_idle(uv_idle_t *h);

/* Fires the raftmux_defer callbacks queued so far; those they queue wait
 * for the next iteration. */
static void raftmux_run_deferred(struct raftmux *mx)
{
  struct raftmux_group *mg = mx->defer_head;
  mx->defer_head = mx->defer_tail = NULL;
  while (mg != NULL) {
    struct raftmux_group *next = mg->defer_next;
    void (*cb)(struct raftmux_group * mg) = mg->deferred;
    mg->deferred = NULL;
    mg->defer_next = NULL;
    cb(mg); /* may free mg */
    mg = next;
  }
}

void raftmux_defer(struct raftmux_group *mg, void (*cb)(struct raftmux_group *mg))
{
  struct raftmux *mx = mg->mx;
  if (!mx->open) {
    cb(mg);
    return;
  }
  assert(mg->deferred == NULL);
  mg->deferred = cb;
  mg->defer_next = NULL;
  if (mx->defer_tail != NULL) {
    mx->defer_tail->defer_next = mg;
  } else {
    mx->defer_head = mg;
  }
  mx->defer_tail = mg;
  uv_idle_start(&mx->idle, raftmux_on_idle);
}

/* Fires every callback queued before this iteration; a callback's own
 * sends queue behind them and fire next time. */
static void raftmux_on_idle(uv_idle_t *h)
{
  struct raftmux *mx = h->data;
  struct raftmux_send *s = mx->done_head;
  mx->done_head = mx->done_tail = NULL;
  uv_idle_stop(&mx->idle);
  while (s != NULL) {
    struct raftmux_send *next = s->next;
    struct raftmux_group *mg = s->mg;
    s->req->cb = s->cb;
    if (s->cb != NULL) { /* raft 0.15 sends a transfer's TimeoutNow without one */
      s->cb(s->req, s->status);
    }
    free(s);
    mg->pending--;
    if (mg->closing && mg->pending == 0 && mg->close_cb != NULL) {
      raft_io_close_cb cb = mg->close_cb;
      mg->close_cb = NULL;
      mg->uv_close(mg->io, cb);
    }
    s = next;
  }
  raftmux_run_deferred(mx);
}

static int raftmux_on_frame(struct nodewatch *nw, uint64_t sender_id, const uint8_t *payload,
                            size_t len, void *data)
{
  (void)nw;
  struct raftmux *mx = data;
  uint64_t gid;
  int rv = raftmux_peek(payload, len, &gid);
  if (rv != 0) {
    mx->malformed++;
    log_warn("raftmux", "node %llu: Raft frame of %zu bytes refused: %s",
             (unsigned long long)sender_id, len, cairn_strerror(rv));
    return rv;
  }
  size_t i = raftmux_find(mx, gid);
  struct raftmux_group *mg = i < mx->ngroups && mx->groups[i]->gid == gid ? mx->groups[i] : NULL;
  if (mg == NULL || mg->closing || mg->recv_cb == NULL) {
    mx->unknown++; /* dropped undecoded: Raft tolerates loss */
    return 0;
  }
  struct raft_message m;
  char addr[RAFTMUX_ADDRESS_MAX + 1];
  rv = raftmux_decode(payload, len, &m, &gid, addr);
  if (rv == CAIRN_ENOMEM) {
    mx->unknown++; /* lost as on a full socket; Raft retransmits */
    return 0;
  }
  if (rv != 0) {
    mx->malformed++;
    log_warn("raftmux", "node %llu: malformed Raft frame of %zu bytes for group %llu: %s",
             (unsigned long long)sender_id, len, (unsigned long long)gid, cairn_strerror(rv));
    return rv;
  }
  mx->received++;
  mg->recv_cb(mg->io, &m);
  return 0;
}

int raftmux_init(struct raftmux *mx, uv_loop_t *loop, struct nodewatch *nw)
{
  memset(mx, 0, sizeof *mx);
  mx->loop = loop;
  mx->nw = nw;
  int rv = uv_idle_init(loop, &mx->idle);
  if (rv != 0) {
    return rv;
  }
  mx->idle.data = mx;
  mx->open = true;
  nwatch_set_mux_cb(nw, RAFTMUX_TAG, RAFTMUX_MSG_MAX, raftmux_on_frame, mx);
  return 0;
}

static void raftmux_on_closed(uv_handle_t *h)
{
  struct raftmux *mx = h->data;
  raftmux_run_deferred(mx); /* none should be left: every group closed first */
  free(mx->groups);
  free(mx->scratch);
  mx->groups = NULL;
  mx->scratch = NULL;
  mx->ngroups = mx->cap = mx->scratch_cap = 0;
  if (mx->close_cb != NULL) {
    mx->close_cb(mx);
  }
}

void raftmux_close(struct raftmux *mx, void (*cb)(struct raftmux *mx))
{
  if (!mx->open) {
    if (cb != NULL) {
      cb(mx);
    }
    return;
  }
  mx->open = false;
  mx->close_cb = cb;
  nwatch_set_mux_cb(mx->nw, 0, 0, NULL, NULL);
  uv_close((uv_handle_t *)&mx->idle, raftmux_on_closed);
}

int raftmux_attach(struct raftmux *mx, struct raftmux_group *mg, struct raft_io *io, uint64_t gid,
                   uint64_t self_id, const char *address)
{
  size_t alen = address != NULL ? strlen(address) : 0;
  if (alen == 0 || alen > RAFTMUX_ADDRESS_MAX) {
    return CAIRN_EINVAL;
  }
  memset(mg, 0, sizeof *mg);
  mg->mx = mx;
  mg->io = io;
  mg->gid = gid;
  mg->self_id = self_id;
  mg->address = strdup(address);
  if (mg->address == NULL) {
    return CAIRN_ENOMEM;
  }
  mg->uv_start = io->start;
  mg->uv_close = io->close;
  int rv = raftmux_register(mx, mg);
  if (rv != 0) {
    free(mg->address);
    mg->address = NULL;
  }
  return rv;
}

/* Puts s on the queue of callbacks for the loop's next idle phase. */
static void raftmux_done_push(struct raftmux *mx, struct raftmux_send *s)
{
  s->next = NULL;
  if (mx->done_tail != NULL) {
    mx->done_tail->next = s;
  } else {
    mx->done_head = s;
    uv_idle_start(&mx->idle, raftmux_on_idle);
  }
  mx->done_tail = s;
}

/* Queues req's callback for the loop's next idle phase. */
static int raftmux_complete(struct raftmux_group *mg, struct raft_io_send *req, raft_io_send_cb cb,
                            int status)
{
  struct raftmux_send *s = malloc(sizeof *s);
  if (s == NULL) {
    return RAFT_NOMEM;
  }
  *s = (struct raftmux_send){.req = req, .cb = cb, .status = status, .mg = mg};
  mg->pending++;
  raftmux_done_push(mg->mx, s);
  return 0;
}

/* Encodes m into mx's scratch buffer: its length, or why it could not. */
static long raftmux_encode_scratch(struct raftmux_group *mg, const struct raft_message *m)
{
  struct raftmux *mx = mg->mx;
  size_t need = raftmux_encoded_size(m, strlen(mg->address));
  if (need == 0) {
    return CAIRN_EINVAL;
  }
  if (need > RAFTMUX_MSG_MAX) {
    return CAIRN_ETOOLARGE;
  }
  if (need > mx->scratch_cap) {
    uint8_t *b = realloc(mx->scratch, need);
    if (b == NULL) {
      return CAIRN_ENOMEM;
    }
    mx->scratch = b;
    mx->scratch_cap = need;
  }
  return raftmux_encode(mx->scratch, mx->scratch_cap, mg->gid, mg->self_id, mg->address, m);
}

/* A large scratch buffer is not kept for the rare large message. */
static void raftmux_scratch_trim(struct raftmux *mx, size_t used)
{
  if (mx->scratch_cap > (1u << 20) && used <= (1u << 20)) {
    free(mx->scratch);
    mx->scratch = NULL;
    mx->scratch_cap = 0;
  }
}

/* Queues an encoded frame to node to: 0, or why it was not. */
static int raftmux_put(struct raftmux *mx, uint64_t to, const uint8_t *frame, size_t len)
{
  int rv = nwatch_send_bounded(mx->nw, to, frame, len, RAFTMUX_SENDQ_MAX);
  if (rv == 0) {
    mx->sent++;
    mx->sent_bytes += (uint64_t)len;
  } else {
    mx->dropped++;
  }
  return rv;
}

/* Encodes m and queues it: 0, or why it was not. */
static int raftmux_queue(struct raftmux_group *mg, const struct raft_message *m)
{
  struct raftmux *mx = mg->mx;
  long n = raftmux_encode_scratch(mg, m);
  if (n < 0) {
    mx->dropped++;
    return (int)n;
  }
  int rv = raftmux_put(mx, m->server_id, mx->scratch, (size_t)n);
  raftmux_scratch_trim(mx, (size_t)n);
  return rv;
}

/* Encodes m into a frame of its own and holds it behind the group's
 * earlier held sends: 0, or why it could not (then nothing is held). A
 * group over its held bytes' bound drops the send (Raft retransmits). */
static int raftmux_hold_send(struct raftmux_group *mg, struct raft_io_send *req,
                             const struct raft_message *m, raft_io_send_cb cb)
{
  struct raftmux *mx = mg->mx;
  long n = raftmux_encode_scratch(mg, m);
  if (n >= 0 && mg->held_bytes + (size_t)n > RAFTMUX_SENDQ_MAX) {
    n = CAIRN_EQUEUE_FULL;
  }
  if (n < 0) {
    mx->dropped++;
    return (int)n;
  }
  struct raftmux_send *s = malloc(sizeof *s);
  uint8_t *frame = malloc((size_t)n);
  if (s == NULL || frame == NULL) {
    free(s);
    free(frame);
    mx->dropped++;
    return CAIRN_ENOMEM;
  }
  memcpy(frame, mx->scratch, (size_t)n);
  raftmux_scratch_trim(mx, (size_t)n);
  *s = (struct raftmux_send){
      .req = req, .cb = cb, .mg = mg, .to = m->server_id, .buf = frame, .len = (size_t)n};
  if (mg->held_tail != NULL) {
    mg->held_tail->next = s;
  } else {
    mg->held_head = s;
  }
  mg->held_tail = s;
  mg->held_bytes += (size_t)n;
  mg->pending++;
  mx->held++;
  return 0;
}

static void raftmux_log_drop(struct raftmux_group *mg, const struct raft_message *m, int rv)
{
  struct raftmux *mx = mg->mx;
  uint64_t now = uv_now(mx->loop);
  if (rv != CAIRN_EUNREACHABLE && now - mx->bad_log_ms >= 1000) {
    mx->bad_log_ms = now;
    log_warn("raftmux", "group %llu: Raft message type %u to server %llu dropped: %s",
             (unsigned long long)mg->gid, (unsigned)m->type, (unsigned long long)m->server_id,
             cairn_strerror(rv));
  }
}

int raftmux_io_send(struct raftmux_group *mg, struct raft_io_send *req,
                    const struct raft_message *m, raft_io_send_cb cb)
{
  struct raftmux *mx = mg->mx;
  if (mg->closing || !mx->open) {
    return RAFT_CANCELED;
  }
  if (mg->failed != 0) {
    return raftmux_complete(mg, req, cb, mg->failed);
  }
  int rv;
  if (mg->holds > 0) {
    rv = raftmux_hold_send(mg, req, m, cb);
    if (rv == 0) {
      return 0;
    }
  } else {
    rv = raftmux_queue(mg, m);
  }
  if (rv != 0) {
    raftmux_log_drop(mg, m, rv);
  }
  return raftmux_complete(mg, req, cb, rv != 0 ? RAFT_NOCONNECTION : 0);
}

void raftmux_hold(struct raftmux_group *mg)
{
  mg->holds++;
}

bool raftmux_holding(const struct raftmux_group *mg)
{
  return mg->holds > 0;
}

/* Sends (status 0) or fails every held send, in order; their callbacks
 * fire from the loop's next idle phase. */
static void raftmux_flush_held(struct raftmux_group *mg, int status)
{
  struct raftmux *mx = mg->mx;
  struct raftmux_send *s = mg->held_head;
  mg->held_head = mg->held_tail = NULL;
  mg->held_bytes = 0;
  while (s != NULL) {
    struct raftmux_send *next = s->next;
    s->status = status;
    if (status == 0) {
      s->status = raftmux_put(mx, s->to, s->buf, s->len) == 0 ? 0 : RAFT_NOCONNECTION;
    }
    free(s->buf);
    s->buf = NULL;
    raftmux_done_push(mx, s); /* counted in pending since it was held */
    s = next;
  }
}

void raftmux_release(struct raftmux_group *mg, int status)
{
  assert(mg->holds > 0);
  mg->holds--;
  if (status != 0 && mg->failed == 0) {
    mg->failed = status; /* the record's outcome is unknown: never reveal it */
  }
  if (mg->failed != 0) {
    raftmux_flush_held(mg, mg->failed);
    return;
  }
  if (mg->holds > 0) {
    return;
  }
  raftmux_flush_held(mg, mg->closing || !mg->mx->open ? RAFT_CANCELED : 0);
}

int raftmux_io_start(struct raftmux_group *mg, unsigned msecs, raft_io_tick_cb tick,
                     raft_io_recv_cb recv)
{
  int rv = mg->uv_start(mg->io, msecs, tick, recv);
  if (rv == 0) {
    mg->recv_cb = recv;
  }
  return rv;
}

void raftmux_io_close(struct raftmux_group *mg, raft_io_close_cb cb)
{
  mg->closing = true;
  raftmux_unregister(mg->mx, mg);
  if (mg->pending > 0) {
    mg->close_cb = cb; /* raftmux_on_idle closes it after the last callback */
    return;
  }
  mg->uv_close(mg->io, cb);
}

void raftmux_detach(struct raftmux_group *mg)
{
  mg->closing = true;
  raftmux_unregister(mg->mx, mg);
}
