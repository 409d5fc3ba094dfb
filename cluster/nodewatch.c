/* nodewatch.c - one held-open connection per peer node on the cluster
 * port, to see a peer's process die within milliseconds (nodewatch.h). */
#include "cluster/nodewatch.h"

#include "common/err.h"
#include "common/log.h"
#include "format/crc32c.h"
#include "format/endian.h"

#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct nwatch_peer {
  struct nodewatch *nw;
  uint64_t id;
  char address[TRANSPORT_ADDRESS_MAX + 1];
  enum nwatch_state state;
  struct transport_dial dial;
  bool dialing;         /* dial's callback pending */
  uv_tcp_t *stream;     /* the connection while UP; NULL otherwise */
  bool stream_closing;  /* a closed connection's callback pending */
  bool removed;         /* no longer named: freed once nothing is pending */
  bool listed;          /* named by the nwatch_set_peers call under way */
  uint64_t up_since_ms; /* when it last connected */
  struct nwatch_write *cork; /* frames not yet handed to libuv (owned), NULL: none */
  size_t cork_hint;          /* the last cork's length: the next one's first allocation */
  unsigned writes;           /* uv_writes whose callback has not fired */
  uint64_t completions;      /* uv_writes whose callback fired */
  /* What nwatch_queued_max last saw: completions, when it last saw one (or
   * nothing pending), and how many looks since saw none. */
  uint64_t seen_completions;
  uint64_t progress_ms;
  unsigned quiet_looks;
  char rbuf[16];        /* the peer sends nothing: room to read EOF */
  struct nwatch_peer *next;
};

#define NWATCH_READ_CHUNK 65536 /* corked writes arrive in bursts: fewer reads */
#define NWATCH_CORK_MIN 16384   /* a cork's first allocation */
#define NWATCH_BUF_KEEP (2u * NWATCH_FRAME_MAX) /* an inbound buffer shrinks back above this */

struct nwatch_inbound {
  struct nodewatch *nw;
  uv_tcp_t *tcp;
  uint64_t sender_id;
  char address[TRANSPORT_ADDRESS_MAX + 1]; /* the sender's cluster address */
  uint8_t *buf;                            /* bytes read and not yet framed (at most one frame's) */
  size_t len, cap;
  char rbuf[NWATCH_READ_CHUNK];
  struct nwatch_inbound *prev, *next;
};

/* Frames being corked (len of cap bytes used), then written: freed by
 * the write callback. */
struct nwatch_write {
  uv_write_t req;
  size_t len, cap;
  uint8_t data[];
};

static const char *const nwatch_state_names[] = {
#define NWATCH_STATE_NAME(name, text) text,
    NWATCH_STATE_TABLE(NWATCH_STATE_NAME)
#undef NWATCH_STATE_NAME
};

const char *nwatch_state_name(enum nwatch_state s)
{
  return (unsigned)s < sizeof nwatch_state_names / sizeof nwatch_state_names[0]
             ? nwatch_state_names[s]
             : "?";
}

/* The one setter of p->state: asserts the transitions of nodewatch.h. */
static void nwatch_set_state(struct nwatch_peer *p, enum nwatch_state to)
{
  enum nwatch_state from = p->state;
  assert((from == NWATCH_IDLE && to == NWATCH_DIALING) ||
         (from == NWATCH_DIALING && (to == NWATCH_UP || to == NWATCH_IDLE)) ||
         (from == NWATCH_UP && (to == NWATCH_CONFIRMING || to == NWATCH_IDLE)) ||
         (from == NWATCH_CONFIRMING && (to == NWATCH_UP || to == NWATCH_IDLE)));
  log_debug("nodewatch", "node %llu at %s: %s -> %s", (unsigned long long)p->id, p->address,
            nwatch_state_name(from), nwatch_state_name(to));
  p->state = to;
}

static void nwatch_maybe_closed(struct nodewatch *nw)
{
  if (!nw->closing || nw->open > 0) {
    return;
  }
  while (nw->peers != NULL) {
    struct nwatch_peer *p = nw->peers;
    nw->peers = p->next;
    free(p);
  }
  if (nw->close_cb != NULL) {
    nw->close_cb(nw);
  }
}

/* Frees a removed peer once nothing of it is pending. */
static void nwatch_peer_maybe_free(struct nwatch_peer *p)
{
  struct nodewatch *nw = p->nw;
  if (!p->removed || nw->closing || p->dialing || p->stream != NULL || p->stream_closing) {
    return;
  }
  for (struct nwatch_peer **pp = &nw->peers; *pp != NULL; pp = &(*pp)->next) {
    if (*pp == p) {
      *pp = p->next;
      break;
    }
  }
  free(p);
}

static void nwatch_on_stream_closed(uv_handle_t *h)
{
  struct nwatch_peer *p = h->data;
  struct nodewatch *nw = p->nw;
  free(h);
  p->stream_closing = false;
  nw->open--;
  nwatch_peer_maybe_free(p);
  nwatch_maybe_closed(nw);
}

static void nwatch_drop_stream(struct nwatch_peer *p)
{
  free(p->cork); /* lost with the connection, like the queued writes */
  p->cork = NULL;
  if (p->stream == NULL) {
    return;
  }
  p->stream->data = p;
  p->stream_closing = true;
  uv_close((uv_handle_t *)p->stream, nwatch_on_stream_closed);
  p->stream = NULL;
}

static void nwatch_dial(struct nwatch_peer *p);
static struct nwatch_peer *nwatch_find(const struct nodewatch *nw, uint64_t id);

static void nwatch_report(struct nwatch_peer *p, int status)
{
  struct nodewatch *nw = p->nw;
  nw->gone++;
  log_info("nodewatch", "node %llu at %s is gone (its cluster connection dropped, a new one: %s)",
           (unsigned long long)p->id, p->address, cairn_strerror(status));
  nw->gone_cb(nw, p->id, nw->data);
}

static void nwatch_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
  (void)suggested;
  struct nwatch_peer *p = h->data;
  *buf = uv_buf_init(p->rbuf, sizeof p->rbuf);
}

static void nwatch_on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf)
{
  (void)buf;
  struct nwatch_peer *p = s->data;
  struct nodewatch *nw = p->nw;
  if (nread == 0) {
    return;
  }
  if (nread > 0) {
    /* The peer's nodewatch accepted: its process is there. */
    if (p->state == NWATCH_CONFIRMING) {
      nw->blips++;
      log_info("nodewatch",
               "node %llu at %s: its cluster connection dropped but it accepts a new one: "
               "not gone",
               (unsigned long long)p->id, p->address);
    }
    if (p->state != NWATCH_UP) {
      p->up_since_ms = uv_now(nw->loop);
      nwatch_set_state(p, NWATCH_UP);
    }
    return;
  }
  nwatch_drop_stream(p);
  if (nw->closing || p->removed) {
    return;
  }
  switch (p->state) {
  case NWATCH_CONFIRMING:
    /* Connected, but closed before the peer's accept byte: a process
     * dying while its listening socket still took connections. */
    nwatch_set_state(p, NWATCH_IDLE);
    nwatch_report(p, (int)nread);
    break;
  case NWATCH_UP:
    /* Dropped again right after a reconnect: do not spin dialing a node
     * that accepts and closes; the timer dials again. */
    if (uv_now(nw->loop) - p->up_since_ms < NWATCH_RETRY_MS) {
      nwatch_set_state(p, NWATCH_IDLE);
      break;
    }
    /* Is the process gone, or was it only this connection? Ask at once. */
    nwatch_set_state(p, NWATCH_CONFIRMING);
    nwatch_dial(p);
    break;
  default:
    nwatch_set_state(p, NWATCH_IDLE);
    break;
  }
}

static void nwatch_on_dial(struct transport_dial *req, uv_stream_t *stream, int status)
{
  struct nwatch_peer *p = req->data;
  struct nodewatch *nw = p->nw;
  p->dialing = false;
  nw->open--;
  if (nw->closing || p->removed) {
    if (stream != NULL) {
      nw->open++;
      p->stream = (uv_tcp_t *)stream;
      nwatch_drop_stream(p);
    }
    nwatch_peer_maybe_free(p);
    nwatch_maybe_closed(nw);
    return;
  }
  bool confirming = p->state == NWATCH_CONFIRMING;
  if (status != 0) {
    nwatch_set_state(p, NWATCH_IDLE);
    if (confirming) {
      nwatch_report(p, status);
    }
    return;
  }
  /* Connected, which proves little (a dying process's listening socket
   * may still complete a connection): UP once the peer's accept byte
   * arrives (nwatch_on_read). */
  nw->open++;
  p->stream = (uv_tcp_t *)stream;
  p->stream->data = p;
  int rv = uv_read_start(stream, nwatch_alloc, nwatch_on_read);
  if (rv != 0) {
    nwatch_drop_stream(p);
    nwatch_set_state(p, NWATCH_IDLE);
    if (confirming) {
      nwatch_report(p, rv);
    }
  }
}

static void nwatch_dial(struct nwatch_peer *p)
{
  struct nodewatch *nw = p->nw;
  bool confirming = p->state == NWATCH_CONFIRMING;
  if (!confirming) {
    nwatch_set_state(p, NWATCH_DIALING);
  }
  p->dial.data = p;
  int rv = transport_dial(nw->tr, &p->dial, TRANSPORT_KIND_WATCH, 0, nw->self_id, nw->self_address,
                          p->address, nwatch_on_dial);
  if (rv != 0) {
    nwatch_set_state(p, NWATCH_IDLE);
    if (confirming) {
      nwatch_report(p, rv);
    }
    return;
  }
  p->dialing = true;
  nw->open++;
}

static void nwatch_on_timer(uv_timer_t *t)
{
  struct nodewatch *nw = t->data;
  for (struct nwatch_peer *p = nw->peers; p != NULL; p = p->next) {
    if (p->state == NWATCH_IDLE && !p->dialing && !p->removed) {
      nwatch_dial(p);
    }
  }
}

/* ---- the listening end: hold the stream until the peer closes it ---- */

static void nwatch_inbound_on_closed(uv_handle_t *h)
{
  struct nwatch_inbound *in = h->data;
  struct nodewatch *nw = in->nw;
  free(h);
  free(in->buf);
  free(in);
  nw->open--;
  nwatch_maybe_closed(nw);
}

static void nwatch_inbound_close(struct nwatch_inbound *in)
{
  struct nodewatch *nw = in->nw;
  if (in->prev != NULL) {
    in->prev->next = in->next;
  } else {
    nw->inbound = in->next;
  }
  if (in->next != NULL) {
    in->next->prev = in->prev;
  }
  uv_close((uv_handle_t *)in->tcp, nwatch_inbound_on_closed);
}

static void nwatch_inbound_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
  (void)suggested;
  struct nwatch_inbound *in = h->data;
  *buf = uv_buf_init(in->rbuf, sizeof in->rbuf);
}

/* Hands every whole frame in in->buf to the frame callback and keeps the
 * rest. Returns 0, or CAIRN_EBADLEN / CAIRN_EBADCRC for a malformed frame. */
static int nwatch_inbound_frames(struct nwatch_inbound *in)
{
  struct nodewatch *nw = in->nw;
  size_t off = 0;
  while (in->len - off >= NWATCH_FRAME_HEADER) {
    const uint8_t *h = in->buf + off;
    uint32_t n = le_get32(h);
    if (n == 0) {
      return CAIRN_EBADLEN;
    }
    if (n > NWATCH_FRAME_MAX) {
      /* Only a mux frame may be longer, and only here while the mux is
       * on: its first payload byte decides, before the buffer grows. */
      if (in->len - off == NWATCH_FRAME_HEADER) {
        break; /* need more bytes */
      }
      if (n > nwatch_frame_limit(nw, h[NWATCH_FRAME_HEADER])) {
        return CAIRN_EBADLEN;
      }
    }
    if (in->len - off - NWATCH_FRAME_HEADER < n) {
      break; /* need more bytes */
    }
    const uint8_t *payload = h + NWATCH_FRAME_HEADER;
    if (crc32c(payload, n) != le_get32(h + 4)) {
      return CAIRN_EBADCRC;
    }
    nw->frames_received++;
    if (nw->mux_cb != NULL && payload[0] == nw->mux_tag && !nw->closing) {
      int rv = nw->mux_cb(nw, in->sender_id, payload, n, nw->mux_data);
      if (rv != 0) {
        return rv;
      }
    } else if (nw->frame_cb != NULL && !nw->closing) {
      nw->frame_cb(nw, in->sender_id, payload, n, nw->frame_data);
    }
    off += NWATCH_FRAME_HEADER + n;
  }
  memmove(in->buf, in->buf + off, in->len - off);
  in->len -= off;
  /* A large mux frame's buffer is not kept for the small ones after it. */
  if (in->cap > NWATCH_BUF_KEEP && in->len <= NWATCH_READ_CHUNK) {
    uint8_t *b = realloc(in->buf, NWATCH_READ_CHUNK);
    if (b != NULL) {
      in->buf = b;
      in->cap = NWATCH_READ_CHUNK;
    }
  }
  return 0;
}

/* Appends what was read to in->buf, bounded by one whole frame. */
static int nwatch_inbound_take(struct nwatch_inbound *in, const char *data, size_t n)
{
  size_t need = in->len + n;
  size_t frame_max = nwatch_frame_limit(in->nw, in->nw->mux_tag);
  if (need > NWATCH_FRAME_HEADER + frame_max + NWATCH_READ_CHUNK) {
    return CAIRN_EBADLEN; /* cannot happen with whole frames framed out */
  }
  if (need > in->cap) {
    size_t cap = in->cap > 0 ? in->cap : NWATCH_READ_CHUNK;
    while (cap < need) {
      cap *= 2;
    }
    uint8_t *b = realloc(in->buf, cap);
    if (b == NULL) {
      return CAIRN_ENOMEM;
    }
    in->buf = b;
    in->cap = cap;
  }
  memcpy(in->buf + in->len, data, n);
  in->len = need;
  return 0;
}

static void nwatch_inbound_on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf)
{
  struct nwatch_inbound *in = s->data;
  struct nodewatch *nw = in->nw;
  if (nread < 0) {
    nwatch_inbound_close(in);
    return;
  }
  if (nread == 0) {
    return;
  }
  int rv = nwatch_inbound_take(in, buf->base, (size_t)nread);
  if (rv == 0) {
    rv = nwatch_inbound_frames(in);
  }
  if (rv != 0) {
    nw->frames_bad++;
    log_warn("nodewatch", "node %llu: malformed frame on its watch connection (%s): closed",
             (unsigned long long)in->sender_id, cairn_strerror(rv));
    nwatch_inbound_close(in);
  }
}

static void nwatch_free_handle(uv_handle_t *h)
{
  free(h);
}

static void nwatch_accept(void *data, uint64_t sender_id, const char *address, uv_stream_t *stream)
{
  struct nodewatch *nw = data;
  struct nwatch_inbound *in = calloc(1, sizeof *in);
  if (in == NULL || nw->closing) {
    free(in);
    uv_close((uv_handle_t *)stream, nwatch_free_handle);
    return;
  }
  in->nw = nw;
  in->sender_id = sender_id;
  snprintf(in->address, sizeof in->address, "%s", address);
  in->tcp = (uv_tcp_t *)stream;
  stream->data = in;
  in->next = nw->inbound;
  if (nw->inbound != NULL) {
    nw->inbound->prev = in;
  }
  nw->inbound = in;
  nw->open++;
  /* One byte says this node's watch took the connection (the dialer is
   * UP only then); then frames, until EOF. */
  static char accept_byte = 1;
  uv_buf_t b = uv_buf_init(&accept_byte, 1);
  if (uv_try_write(stream, &b, 1) != 1 ||
      uv_read_start(stream, nwatch_inbound_alloc, nwatch_inbound_on_read) != 0) {
    nwatch_inbound_close(in);
    return;
  }
  /* The sender's process is up: if this node's own connection to it is
   * down (it restarted), dial now, not at the next retry tick, so frames
   * to it (Raft messages with --raft-mux) flow within a round trip. */
  struct nwatch_peer *p = nwatch_find(nw, sender_id);
  if (p != NULL && p->state == NWATCH_IDLE && !p->dialing) {
    nwatch_dial(p);
  }
}

size_t nwatch_watchers(const struct nodewatch *nw, uint64_t *ids, const char **addresses,
                       size_t cap)
{
  size_t k = 0;
  for (const struct nwatch_inbound *in = nw->inbound; in != NULL && k < cap; in = in->next) {
    bool seen = false;
    for (size_t j = 0; j < k && !seen; j++) {
      seen = ids[j] == in->sender_id;
    }
    if (!seen && in->address[0] != '\0') {
      ids[k] = in->sender_id;
      addresses[k++] = in->address;
    }
  }
  return k;
}

/* ---- lifecycle ---- */

int nwatch_init(struct nodewatch *nw, uv_loop_t *loop, struct transport *tr, uint64_t self_id,
                const char *self_address, nwatch_gone_cb cb, void *data)
{
  memset(nw, 0, sizeof *nw);
  if (strlen(self_address) > TRANSPORT_ADDRESS_MAX) {
    return CAIRN_EINVAL;
  }
  nw->loop = loop;
  nw->tr = tr;
  nw->self_id = self_id;
  strcpy(nw->self_address, self_address);
  nw->gone_cb = cb;
  nw->data = data;
  uv_timer_init(loop, &nw->timer);
  nw->timer.data = nw;
  uv_timer_start(&nw->timer, nwatch_on_timer, NWATCH_RETRY_MS, NWATCH_RETRY_MS);
  uv_prepare_init(loop, &nw->flush_prepare);
  nw->flush_prepare.data = nw;
  uv_check_init(loop, &nw->flush_check);
  nw->flush_check.data = nw;
  nw->open = 3;
  transport_set_watch(tr, nwatch_accept, nw);
  return 0;
}

static struct nwatch_peer *nwatch_find(const struct nodewatch *nw, uint64_t id)
{
  for (struct nwatch_peer *p = nw->peers; p != NULL; p = p->next) {
    if (p->id == id && !p->removed) {
      return p;
    }
  }
  return NULL;
}

/* Stops watching p; it is freed once its dial or stream has closed. */
static void nwatch_remove(struct nwatch_peer *p)
{
  p->removed = true;
  if (p->dialing) {
    transport_dial_cancel(&p->dial);
  }
  nwatch_drop_stream(p);
  nwatch_peer_maybe_free(p);
}

int nwatch_set_peers(struct nodewatch *nw, const uint64_t *ids, const char *const *addresses,
                     size_t n)
{
  if (nw->closing) {
    return 0;
  }
  for (struct nwatch_peer *p = nw->peers; p != NULL; p = p->next) {
    p->listed = false;
  }
  int rv = 0;
  for (size_t i = 0; i < n; i++) {
    if (ids[i] == nw->self_id || addresses[i] == NULL || addresses[i][0] == '\0' ||
        strlen(addresses[i]) > TRANSPORT_ADDRESS_MAX) {
      continue;
    }
    struct nwatch_peer *p = nwatch_find(nw, ids[i]);
    if (p != NULL && strcmp(p->address, addresses[i]) == 0) {
      p->listed = true;
      continue;
    }
    if (p != NULL) {
      nwatch_remove(p); /* moved: watch the new address afresh */
    }
    p = calloc(1, sizeof *p);
    if (p == NULL) {
      rv = CAIRN_ENOMEM;
      break;
    }
    p->nw = nw;
    p->id = ids[i];
    strcpy(p->address, addresses[i]);
    p->state = NWATCH_IDLE;
    p->listed = true;
    p->next = nw->peers;
    nw->peers = p;
    nwatch_dial(p);
  }
  if (rv != 0) {
    return rv; /* keep what is watched rather than drop the unlisted */
  }
  struct nwatch_peer *p = nw->peers;
  while (p != NULL) {
    struct nwatch_peer *next = p->next;
    if (!p->listed && !p->removed) {
      nwatch_remove(p);
    }
    p = next;
  }
  return 0;
}

void nwatch_set_frame_cb(struct nodewatch *nw, nwatch_frame_cb cb, void *data)
{
  nw->frame_cb = cb;
  nw->frame_data = data;
}

static void nwatch_on_written(uv_write_t *req, int status)
{
  (void)status; /* a lost frame is not retried (nodewatch.h) */
  struct nwatch_peer *p = req->handle->data; /* freed only after its streams close */
  p->writes--;
  p->completions++;
  free(req->data);
}

void nwatch_set_mux_cb(struct nodewatch *nw, uint8_t tag, size_t frame_max, nwatch_mux_cb cb,
                       void *data)
{
  nw->mux_tag = tag;
  nw->mux_cb = cb;
  nw->mux_data = data;
  nw->mux_frame_max = frame_max < NWATCH_FRAME_MAX ? NWATCH_FRAME_MAX
                      : frame_max > UINT32_MAX     ? UINT32_MAX
                                                   : frame_max;
}

size_t nwatch_frame_limit(const struct nodewatch *nw, uint8_t first)
{
  return nw->mux_cb != NULL && first == nw->mux_tag ? nw->mux_frame_max : NWATCH_FRAME_MAX;
}

int nwatch_send(struct nodewatch *nw, uint64_t node_id, const uint8_t *payload, size_t len)
{
  return nwatch_send_bounded(nw, node_id, payload, len, NWATCH_SENDQ_MAX);
}

/* Hands p's corked frames to libuv: one write. */
static void nwatch_flush_peer(struct nwatch_peer *p)
{
  struct nwatch_write *w = p->cork;
  p->cork = NULL;
  if (w == NULL) {
    return;
  }
  p->cork_hint = w->len < NWATCH_CORK_FLUSH ? w->len : NWATCH_CORK_FLUSH;
  w->req.data = w;
  uv_buf_t b = uv_buf_init((char *)w->data, (unsigned)w->len);
  if (p->stream == NULL ||
      uv_write(&w->req, (uv_stream_t *)p->stream, &b, 1, nwatch_on_written) != 0) {
    free(w); /* lost, as a frame queued on a connection that drops */
    return;
  }
  p->writes++;
}

static void nwatch_flush(struct nodewatch *nw)
{
  if (!nw->flush_armed) {
    return;
  }
  nw->flush_armed = false;
  uv_prepare_stop(&nw->flush_prepare);
  uv_check_stop(&nw->flush_check);
  for (struct nwatch_peer *p = nw->peers; p != NULL; p = p->next) {
    nwatch_flush_peer(p);
  }
}

static void nwatch_on_flush_prepare(uv_prepare_t *h) { nwatch_flush(h->data); }

static void nwatch_on_flush_check(uv_check_t *h) { nwatch_flush(h->data); }

/* Room for need more bytes in p's cork: 0 or CAIRN_ENOMEM. */
static int nwatch_cork_reserve(struct nwatch_peer *p, size_t need)
{
  size_t len = p->cork != NULL ? p->cork->len : 0;
  size_t cap = p->cork != NULL ? p->cork->cap : 0;
  if (len + need <= cap) {
    return 0;
  }
  /* A new cork starts at the last one's size: doubling from 16 KiB to a
   * loop phase's few hundred KiB copied each byte about twice more. */
  size_t ncap = cap > 0 ? cap * 2 : p->cork_hint > NWATCH_CORK_MIN ? p->cork_hint : NWATCH_CORK_MIN;
  while (ncap < len + need) {
    ncap *= 2;
  }
  struct nwatch_write *w = realloc(p->cork, sizeof *w + ncap);
  if (w == NULL) {
    return CAIRN_ENOMEM;
  }
  w->len = len;
  w->cap = ncap;
  p->cork = w;
  return 0;
}

/* Whether p's peer has taken nothing for a while: no write completed over
 * more than NWATCH_STUCK_LOOKS looks spanning NWATCH_STUCK_MS, writes
 * pending. Counted in looks too: one long turn of this loop (no poll, so no
 * completion seen) is not the peer's doing. */
static bool nwatch_peer_stuck(struct nwatch_peer *p, uint64_t now)
{
  if (p->writes == 0 || p->completions != p->seen_completions) {
    p->seen_completions = p->completions;
    p->progress_ms = now;
    p->quiet_looks = 0;
    return false;
  }
  p->quiet_looks++;
  return p->quiet_looks > NWATCH_STUCK_LOOKS && now - p->progress_ms > NWATCH_STUCK_MS;
}

size_t nwatch_queued_max(struct nodewatch *nw)
{
  size_t most = 0;
  uint64_t now = uv_hrtime() / 1000000; /* not the loop's time, cached at the turn's start */
  for (struct nwatch_peer *p = nw->peers; p != NULL; p = p->next) {
    if (p->stream == NULL || nwatch_peer_stuck(p, now)) {
      continue; /* not connected, or not reading (stopped, cut off): not a queue that drains */
    }
    size_t q = uv_stream_get_write_queue_size((uv_stream_t *)p->stream) +
               (p->cork != NULL ? p->cork->len : 0);
    most = q > most ? q : most;
  }
  return most;
}

int nwatch_send_bounded(struct nodewatch *nw, uint64_t node_id, const uint8_t *payload, size_t len,
                        size_t queue_max)
{
  if (len == 0 || len > nwatch_frame_limit(nw, payload[0])) {
    return CAIRN_EINVAL;
  }
  struct nwatch_peer *p = nwatch_find(nw, node_id);
  if (nw->closing || p == NULL || p->state != NWATCH_UP || p->stream == NULL) {
    nw->frames_refused++;
    return CAIRN_EUNREACHABLE;
  }
  size_t corked = p->cork != NULL ? p->cork->len : 0;
  if (uv_stream_get_write_queue_size((uv_stream_t *)p->stream) + corked > queue_max) {
    nw->frames_refused++;
    return CAIRN_EQUEUE_FULL;
  }
  if (nwatch_cork_reserve(p, NWATCH_FRAME_HEADER + len) != 0) {
    return CAIRN_ENOMEM;
  }
  uint8_t *d = p->cork->data + p->cork->len;
  le_put32(d, (uint32_t)len);
  le_put32(d + 4, crc32c(payload, len));
  memcpy(d + NWATCH_FRAME_HEADER, payload, len);
  p->cork->len += NWATCH_FRAME_HEADER + len;
  nw->frames_sent++;
  if (p->cork->len >= NWATCH_CORK_FLUSH) {
    nwatch_flush_peer(p);
    return 0;
  }
  if (!nw->flush_armed) {
    nw->flush_armed = true;
    uv_prepare_start(&nw->flush_prepare, nwatch_on_flush_prepare);
    uv_check_start(&nw->flush_check, nwatch_on_flush_check);
  }
  return 0;
}

enum nwatch_state nwatch_peer_state(const struct nodewatch *nw, uint64_t node_id)
{
  const struct nwatch_peer *p = nwatch_find(nw, node_id);
  return p != NULL ? p->state : NWATCH_IDLE;
}

static void nwatch_on_timer_closed(uv_handle_t *h)
{
  struct nodewatch *nw = h->data;
  nw->open--;
  nwatch_maybe_closed(nw);
}

void nwatch_close(struct nodewatch *nw, nwatch_close_cb cb)
{
  nwatch_flush(nw); /* as before corking: what was sent is handed to the socket */
  nw->closing = true;
  nw->close_cb = cb;
  transport_set_watch(nw->tr, NULL, NULL);
  for (struct nwatch_peer *p = nw->peers; p != NULL; p = p->next) {
    if (p->dialing) {
      transport_dial_cancel(&p->dial);
    }
    nwatch_drop_stream(p);
  }
  while (nw->inbound != NULL) {
    nwatch_inbound_close(nw->inbound);
  }
  uv_close((uv_handle_t *)&nw->timer, nwatch_on_timer_closed);
  uv_close((uv_handle_t *)&nw->flush_prepare, nwatch_on_timer_closed);
  uv_close((uv_handle_t *)&nw->flush_check, nwatch_on_timer_closed);
}
