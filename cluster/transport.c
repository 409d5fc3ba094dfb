/* transport.c - one cluster port per node, shared by every Raft group:
 * preamble-routed inbound connections and preamble-sending outbound ones,
 * behind canonical/raft's raft_uv_transport interface. */
#include "cluster/transport.h"

#include "cluster/chs.h"
#include "common/err.h"
#include "common/log.h"
#include "format/crc32c.h"
#include "format/endian.h"

#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the preamble ---- */

int transport_preamble_encode(uint8_t *buf, uint16_t kind, uint64_t group_id, uint64_t sender_id,
                              const char *address)
{
  size_t n = strlen(address);
  if (n == 0 || n > TRANSPORT_ADDRESS_MAX) {
    return CAIRN_EINVAL;
  }
  le_put32(buf, TRANSPORT_MAGIC);
  le_put16(buf + 4, TRANSPORT_VERSION);
  le_put16(buf + 6, kind);
  le_put64(buf + 8, group_id);
  le_put64(buf + 16, sender_id);
  le_put16(buf + 24, (uint16_t)n);
  memcpy(buf + TRANSPORT_PREAMBLE_FIXED, address, n);
  le_put32(buf + TRANSPORT_PREAMBLE_FIXED + n, crc32c(buf, TRANSPORT_PREAMBLE_FIXED + n));
  return (int)(TRANSPORT_PREAMBLE_FIXED + n + 4);
}

/* Bytes the whole preamble takes, once its fixed part is in; 0 if unknown
 * yet; negative if the fixed part is already wrong. */
static int transport_preamble_size(const uint8_t *buf, size_t len)
{
  if (len >= 4 && le_get32(buf) != TRANSPORT_MAGIC) {
    return CAIRN_EBADMAGIC;
  }
  if (len < TRANSPORT_PREAMBLE_FIXED) {
    return 0;
  }
  uint16_t kind = le_get16(buf + 6);
  if (le_get16(buf + 4) != TRANSPORT_VERSION ||
      (kind != TRANSPORT_KIND_RAFT && kind != TRANSPORT_KIND_FETCH &&
       kind != TRANSPORT_KIND_WATCH)) {
    return CAIRN_EUNSUPPORTED;
  }
  uint16_t n = le_get16(buf + 24);
  if (n == 0 || n > TRANSPORT_ADDRESS_MAX) {
    return CAIRN_EBADLEN;
  }
  return TRANSPORT_PREAMBLE_FIXED + n + 4;
}

int transport_preamble_decode(const uint8_t *buf, size_t len, uint16_t *kind, uint64_t *group_id,
                              uint64_t *sender_id, char *address)
{
  int size = transport_preamble_size(buf, len);
  if (size <= 0 || len < (size_t)size) {
    return size < 0 ? size : 0;
  }
  size_t n = le_get16(buf + 24);
  if (le_get32(buf + TRANSPORT_PREAMBLE_FIXED + n) != crc32c(buf, TRANSPORT_PREAMBLE_FIXED + n)) {
    return CAIRN_EBADCRC;
  }
  *kind = le_get16(buf + 6);
  *group_id = le_get64(buf + 8);
  *sender_id = le_get64(buf + 16);
  memcpy(address, buf + TRANSPORT_PREAMBLE_FIXED, n);
  address[n] = '\0';
  return size;
}

/* ---- per-group state behind a raft_uv_transport ---- */

struct transport_group {
  struct transport *tr;
  struct raft_uv_transport *rt;
  uint64_t group_id;
  raft_id id;
  char *address;
  raft_uv_accept_cb accept_cb;
  struct transport_route route; /* in the node's routes while listening */
  bool listening;
  bool closing;
  unsigned connects; /* outbound attempts still running */
  uv_timer_t close_timer;
  raft_uv_transport_close_cb close_cb;
};

/* One outbound connection attempt: resolve, connect, write the preamble.
 * Either Raft's (g, req, cb set) or a transport_dial (dial set). */
struct transport_connect {
  struct transport *tr;
  struct transport_group *g;
  struct raft_uv_connect *req;
  raft_uv_connect_cb cb;
  struct transport_dial *dial;
  bool canceled;
  uv_getaddrinfo_t resolve;
  uv_connect_t connect;
  uv_write_t write;
  uv_tcp_t *tcp; /* separate allocation: Raft frees it with raft_free */
  uint8_t preamble[TRANSPORT_PREAMBLE_MAX];
  int preamble_len;
  char host[TRANSPORT_ADDRESS_MAX + 1];
  char port[8];
  /* the authenticated handshake (a cluster key is set) */
  struct chs hs;
  bool handshaking; /* linked in tr->handshaking */
  uint64_t deadline;
  struct transport_connect *prev, *next;
  uint8_t rbuf[CHS_CHALLENGE_LEN];
};

/* An inbound connection that has not finished its preamble. */
struct transport_inbound {
  struct transport *tr;
  uv_tcp_t *tcp; /* separate allocation: handed to Raft on success */
  uint8_t buf[TRANSPORT_PREAMBLE_MAX];
  size_t got;
  uint64_t deadline;
  struct transport_inbound *prev, *next;
  struct chs hs; /* with a cluster key: the preamble arrives inside it */
  uint8_t rbuf[CHS_ANSWER_MAX];
};

/* A write that owns a copy of its bytes, so the connection's owner may
 * change (or close the stream) while it is in flight; freed by its
 * callback, which fires even when the stream is closed first. */
struct transport_wr {
  uv_write_t req;
  size_t len;
  uint8_t bytes[];
};

static void transport_on_wr_done(uv_write_t *w, int status)
{
  (void)status; /* a failed write shows up as a failed read or a closed peer */
  free(w->data);
}

static int transport_write_copy(uv_stream_t *s, const uint8_t *bytes, size_t len)
{
  struct transport_wr *wr = malloc(sizeof *wr + len);
  if (wr == NULL) {
    return CAIRN_ENOMEM;
  }
  memcpy(wr->bytes, bytes, len);
  wr->len = len;
  wr->req.data = wr;
  uv_buf_t buf = uv_buf_init((char *)wr->bytes, (unsigned)len);
  int rv = uv_write(&wr->req, s, &buf, 1, transport_on_wr_done);
  if (rv != 0) {
    free(wr);
  }
  return rv;
}

/* Logs an authentication failure: at most one line a second per transport,
 * saying how many were not logged since the last. */
static void transport_log_auth(struct transport *tr, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void transport_log_auth(struct transport *tr, const char *fmt, ...)
{
  tr->auth_failed++;
  uint64_t now = uv_now(tr->loop);
  if (tr->auth_log_ms != 0 && now - tr->auth_log_ms < 1000) {
    tr->auth_unlogged++;
    return;
  }
  char line[TRANSPORT_ADDRESS_MAX + 256];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(line, sizeof line, fmt, ap);
  va_end(ap);
  if (tr->auth_unlogged > 0) {
    log_warn("transport", "%s (and %llu more authentication failures in the last seconds)", line,
             (unsigned long long)tr->auth_unlogged);
  } else {
    log_warn("transport", "%s", line);
  }
  tr->auth_log_ms = now;
  tr->auth_unlogged = 0;
}

static size_t transport_route_find(const struct transport *tr, uint64_t group_id, bool *found)
{
  size_t lo = 0, hi = tr->nroutes;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (tr->routes[mid]->group_id < group_id) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  *found = lo < tr->nroutes && tr->routes[lo]->group_id == group_id;
  return lo;
}

static int transport_route_insert(struct transport *tr, struct transport_route *r)
{
  bool found;
  size_t at = transport_route_find(tr, r->group_id, &found);
  if (found) {
    return CAIRN_EEXIST;
  }
  if (tr->nroutes == tr->cap) {
    size_t cap = tr->cap ? tr->cap * 2 : 16;
    struct transport_route **nr = realloc(tr->routes, cap * sizeof *nr);
    if (nr == NULL) {
      return CAIRN_ENOMEM;
    }
    tr->routes = nr;
    tr->cap = cap;
  }
  memmove(&tr->routes[at + 1], &tr->routes[at], (tr->nroutes - at) * sizeof *tr->routes);
  tr->routes[at] = r;
  tr->nroutes++;
  return 0;
}

void transport_route_remove(struct transport *tr, struct transport_route *r)
{
  bool found;
  size_t at = transport_route_find(tr, r->group_id, &found);
  if (!found || tr->routes[at] != r) {
    return;
  }
  memmove(&tr->routes[at], &tr->routes[at + 1], (tr->nroutes - at - 1) * sizeof *tr->routes);
  tr->nroutes--;
}

int transport_route_add(struct transport *tr, struct transport_route *r, uint64_t group_id,
                        transport_fetch_cb cb, void *data)
{
  *r = (struct transport_route){.group_id = group_id, .fetch_cb = cb, .fetch_data = data};
  return transport_route_insert(tr, r);
}

static int transport_group_on_init(struct raft_uv_transport *rt, raft_id id, const char *address)
{
  struct transport_group *g = rt->impl;
  g->id = id;
  free(g->address);
  g->address = strdup(address);
  return g->address == NULL ? RAFT_NOMEM : 0;
}

static int transport_group_on_listen(struct raft_uv_transport *rt, raft_uv_accept_cb cb)
{
  struct transport_group *g = rt->impl;
  g->accept_cb = cb;
  int rv = transport_route_insert(g->tr, &g->route);
  if (rv != 0) {
    snprintf(rt->errmsg, sizeof rt->errmsg, "group %llu is already listening",
             (unsigned long long)g->group_id);
    return rv == CAIRN_ENOMEM ? RAFT_NOMEM : RAFT_INVALID;
  }
  g->listening = true;
  return 0;
}

static void transport_free_handle(uv_handle_t *h) { free(h); }

static void transport_group_on_closed(uv_handle_t *h)
{
  struct transport_group *g = h->data;
  g->close_cb(g->rt);
}

/* Completes a group close once no connect attempt is running; the timer
 * handle's close callback makes the completion asynchronous, as Raft
 * expects. */
static void transport_group_maybe_closed(struct transport_group *g)
{
  if (!g->closing || g->connects > 0) {
    return;
  }
  uv_timer_init(g->tr->loop, &g->close_timer);
  g->close_timer.data = g;
  uv_close((uv_handle_t *)&g->close_timer, transport_group_on_closed);
}

/* Has the attempt's owner gone away (Raft closed the group, or the dial
 * was canceled)? */
static bool transport_connect_canceled(const struct transport_connect *c)
{
  return c->canceled || (c->g != NULL && c->g->closing) || c->tr->closing;
}

/* Ends a connect attempt: hands the stream over or reports failure. status
 * is 0 or a negative cairn code. */
static void transport_connect_done(struct transport_connect *c, int status)
{
  if (c->handshaking) {
    struct transport *tr = c->tr;
    if (c->prev != NULL) {
      c->prev->next = c->next;
    } else {
      tr->handshaking = c->next;
    }
    if (c->next != NULL) {
      c->next->prev = c->prev;
    }
    c->handshaking = false;
    uv_read_stop((uv_stream_t *)c->tcp);
  }
  if (status == 0 && transport_connect_canceled(c)) {
    status = CAIRN_ESHUTDOWN;
  }
  if (status != 0 && c->tcp != NULL) {
    uv_close((uv_handle_t *)c->tcp, transport_free_handle);
  }
  uv_stream_t *stream = status == 0 ? (uv_stream_t *)c->tcp : NULL;
  struct transport_group *g = c->g;
  if (c->dial != NULL) {
    struct transport_dial *d = c->dial;
    d->c = NULL;
    free(c);
    d->cb(d, stream, status);
    return;
  }
  int raft_status = status == 0 ? 0
                    : status == CAIRN_ESHUTDOWN ? RAFT_CANCELED
                                                : RAFT_NOCONNECTION;
  c->cb(c->req, stream, raft_status);
  free(c);
  g->connects--;
  transport_group_maybe_closed(g);
}

static void transport_on_preamble_written(uv_write_t *w, int status)
{
  struct transport_connect *c = w->data;
  transport_connect_done(c, status == 0 ? 0 : status);
}

/* "host:port" of the peer of an outbound attempt, for logs. */
static void transport_connect_peer(const struct transport_connect *c, char *buf, size_t len)
{
  snprintf(buf, len, "%s:%s", c->host, c->port);
}

static void transport_dialer_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
  struct transport_connect *c = h->data;
  /* Never read past the handshake: what follows belongs to the stream's
   * next owner. */
  size_t want = chs_want(&c->hs);
  *buf = uv_buf_init((char *)c->rbuf, (unsigned)(want < sizeof c->rbuf ? want : sizeof c->rbuf));
}

static void transport_dialer_on_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf)
{
  struct transport_connect *c = s->data;
  char peer[TRANSPORT_ADDRESS_MAX + 16];
  transport_connect_peer(c, peer, sizeof peer);
  if (n == 0) {
    return;
  }
  if (n < 0) {
    /* A listener that refuses our MAC, or has no key, closes. */
    transport_log_auth(c->tr,
                       "cluster handshake with %s: %s (does the peer have this cluster's "
                       "secret?)",
                       peer, n == UV_EOF ? "closed by the peer" : uv_strerror((int)n));
    transport_connect_done(c, CAIRN_ECLUSTER_AUTH);
    return;
  }
  int rv = chs_feed(&c->hs, (const uint8_t *)buf->base, (size_t)n);
  if (rv == CHS_SEND) {
    size_t len;
    const uint8_t *out = chs_output(&c->hs, &len);
    rv = transport_write_copy(s, out, len);
    if (rv != 0) {
      transport_connect_done(c, rv);
    }
    return;
  }
  if (rv == CHS_OK) {
    transport_connect_done(c, 0);
    return;
  }
  if (rv < 0) {
    transport_log_auth(c->tr, "cluster handshake with %s refused: %s", peer, cairn_strerror(rv));
    transport_connect_done(c, CAIRN_ECLUSTER_AUTH);
  }
}

/* With a cluster key: wait for the listener's challenge (chs.h). */
static int transport_dialer_start(struct transport_connect *c)
{
  struct transport *tr = c->tr;
  uint8_t nonce[CHS_NONCE_LEN];
  int rv = chs_random(nonce, sizeof nonce);
  if (rv == 0) {
    rv = chs_dialer_init(&c->hs, tr->key, tr->key_len, nonce, c->preamble, (size_t)c->preamble_len);
  }
  if (rv != 0) {
    return rv;
  }
  c->tcp->data = c;
  rv = uv_read_start((uv_stream_t *)c->tcp, transport_dialer_alloc, transport_dialer_on_read);
  if (rv != 0) {
    return rv;
  }
  c->deadline = uv_now(tr->loop) + tr->preamble_timeout_ms;
  c->handshaking = true;
  c->prev = NULL;
  c->next = tr->handshaking;
  if (tr->handshaking != NULL) {
    tr->handshaking->prev = c;
  }
  tr->handshaking = c;
  return 0;
}

static void transport_on_connected(uv_connect_t *cr, int status)
{
  struct transport_connect *c = cr->data;
  if (status != 0 || transport_connect_canceled(c)) {
    transport_connect_done(c, status != 0 ? status : CAIRN_ESHUTDOWN);
    return;
  }
  if (c->tr->key != NULL) {
    int rv = transport_dialer_start(c);
    if (rv != 0) {
      transport_connect_done(c, rv);
    }
    return;
  }
  uv_buf_t buf = uv_buf_init((char *)c->preamble, (unsigned)c->preamble_len);
  c->write.data = c;
  int rv = uv_write(&c->write, (uv_stream_t *)c->tcp, &buf, 1, transport_on_preamble_written);
  if (rv != 0) {
    transport_connect_done(c, rv);
  }
}

/* An outbound cluster connection gives up on a peer that stopped
 * acknowledging: data unacknowledged for TRANSPORT_USER_TIMEOUT_MS aborts
 * it (TCP_USER_TIMEOUT), and a connect whose SYN is not answered fails
 * after one retry, about 3 s (TCP_SYNCNT). Without them a link cut for a
 * while came back only at the kernel's next retransmission, on its
 * exponential backoff: the fault rig saw a follower cut off for 15 s hear
 * from its leader again 13 s after the cut healed (its leader then lost
 * its majority when another node was cut, and the partition had no leader
 * for 9 s). Raft's transport then reconnects; a stopped (paused)
 * process's kernel still acknowledges, so that is not cut. Best effort:
 * without the options the kernel's defaults apply. */
static void transport_tune_socket(uv_tcp_t *tcp)
{
  uv_os_fd_t fd;
  if (uv_fileno((uv_handle_t *)tcp, &fd) != 0) {
    return;
  }
#ifdef TCP_USER_TIMEOUT
  unsigned int user_timeout = TRANSPORT_USER_TIMEOUT_MS;
  (void)setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &user_timeout, sizeof user_timeout);
#endif
#ifdef TCP_SYNCNT
  int syncnt = 1;
  (void)setsockopt(fd, IPPROTO_TCP, TCP_SYNCNT, &syncnt, sizeof syncnt);
#endif
}

static void transport_on_resolved(uv_getaddrinfo_t *req, int status, struct addrinfo *res)
{
  struct transport_connect *c = req->data;
  if (status != 0 || res == NULL || transport_connect_canceled(c)) {
    if (res != NULL) {
      uv_freeaddrinfo(res);
    }
    transport_connect_done(c, status != 0 ? status : res == NULL ? -EHOSTUNREACH : CAIRN_ESHUTDOWN);
    return;
  }
  int rv = CAIRN_ENOMEM;
  c->tcp = malloc(sizeof *c->tcp);
  if (c->tcp != NULL) {
    rv = uv_tcp_init_ex(c->tr->loop, c->tcp, (unsigned)res->ai_family);
    if (rv != 0) {
      free(c->tcp); /* never initialised: nothing to close */
      c->tcp = NULL;
      uv_freeaddrinfo(res);
      transport_connect_done(c, rv);
      return;
    }
    transport_tune_socket(c->tcp);
    uv_tcp_nodelay(c->tcp, 1);
    c->connect.data = c;
    rv = uv_tcp_connect(&c->connect, c->tcp, res->ai_addr, transport_on_connected);
  }
  uv_freeaddrinfo(res);
  if (rv != 0) {
    transport_connect_done(c, rv);
  }
}

/* Splits "host:port" or "[v6]:port". */
static int transport_split_address(const char *address, char *host, size_t host_len, char *port,
                                   size_t port_len)
{
  const char *colon = strrchr(address, ':');
  if (colon == NULL || colon == address || colon[1] == '\0' || strlen(colon + 1) >= port_len) {
    return CAIRN_EINVAL;
  }
  const char *h = address;
  size_t n = (size_t)(colon - address);
  if (h[0] == '[' && n >= 2 && h[n - 1] == ']') {
    h++;
    n -= 2;
  }
  if (n >= host_len) {
    return CAIRN_EINVAL;
  }
  memcpy(host, h, n);
  host[n] = '\0';
  strcpy(port, colon + 1);
  return 0;
}

/* Allocates an attempt with its preamble and starts resolving the peer. */
static int transport_connect_start(struct transport *tr, uint16_t kind, uint64_t group_id,
                                   uint64_t sender_id, const char *sender_address,
                                   const char *peer_address, struct transport_connect **out)
{
  struct transport_connect *c = calloc(1, sizeof *c);
  if (c == NULL) {
    return CAIRN_ENOMEM;
  }
  c->tr = tr;
  c->preamble_len =
      transport_preamble_encode(c->preamble, kind, group_id, sender_id, sender_address);
  if (c->preamble_len < 0 || transport_split_address(peer_address, c->host, sizeof c->host,
                                                     c->port, sizeof c->port) != 0) {
    free(c);
    return CAIRN_EINVAL;
  }
  c->resolve.data = c;
  *out = c;
  return 0;
}

static int transport_connect_resolve(struct transport_connect *c)
{
  struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM};
  return uv_getaddrinfo(c->tr->loop, &c->resolve, transport_on_resolved, c->host, c->port,
                        &hints);
}

static int transport_group_on_connect(struct raft_uv_transport *rt, struct raft_uv_connect *req,
                                      raft_id id, const char *address, raft_uv_connect_cb cb)
{
  struct transport_group *g = rt->impl;
  struct transport_connect *c;
  int rv = transport_connect_start(g->tr, TRANSPORT_KIND_RAFT, g->group_id, g->id, g->address,
                                   address, &c);
  if (rv != 0) {
    snprintf(rt->errmsg, sizeof rt->errmsg, "bad address '%s'", address);
    return rv == CAIRN_ENOMEM ? RAFT_NOMEM : RAFT_INVALID;
  }
  c->g = g;
  c->req = req;
  c->cb = cb;
  if (transport_connect_resolve(c) != 0) {
    free(c);
    return RAFT_NOCONNECTION;
  }
  g->connects++;
  return 0;
}

int transport_dial(struct transport *tr, struct transport_dial *req, uint16_t kind,
                   uint64_t group_id, uint64_t sender_id, const char *sender_address,
                   const char *peer_address, transport_dial_cb cb)
{
  if (tr->closing) {
    return CAIRN_ESHUTDOWN;
  }
  struct transport_connect *c;
  int rv = transport_connect_start(tr, kind, group_id, sender_id, sender_address, peer_address,
                                   &c);
  if (rv != 0) {
    return rv;
  }
  c->dial = req;
  req->c = c;
  req->cb = cb;
  rv = transport_connect_resolve(c);
  if (rv != 0) {
    req->c = NULL;
    free(c);
  }
  return rv;
}

void transport_dial_cancel(struct transport_dial *req)
{
  if (req->c != NULL) {
    req->c->canceled = true;
  }
}

void transport_group_set_fetch(struct raft_uv_transport *rt, transport_fetch_cb cb, void *data)
{
  struct transport_group *g = rt->impl;
  g->route.fetch_cb = cb;
  g->route.fetch_data = data;
}

static void transport_group_on_close(struct raft_uv_transport *rt, raft_uv_transport_close_cb cb)
{
  struct transport_group *g = rt->impl;
  g->closing = true;
  g->close_cb = cb;
  if (g->listening) {
    transport_route_remove(g->tr, &g->route);
    g->listening = false;
  }
  /* Running attempts see `closing` at their next step and end with
   * RAFT_CANCELED; the last one completes the close. */
  transport_group_maybe_closed(g);
}

int transport_group_init(struct transport *tr, struct raft_uv_transport *rt, uint64_t group_id)
{
  struct transport_group *g = calloc(1, sizeof *g);
  if (g == NULL) {
    return CAIRN_ENOMEM;
  }
  g->tr = tr;
  g->rt = rt;
  g->group_id = group_id;
  g->route.group_id = group_id;
  g->route.g = g;
  memset(rt, 0, sizeof *rt);
  rt->impl = g;
  rt->init = transport_group_on_init;
  rt->listen = transport_group_on_listen;
  rt->connect = transport_group_on_connect;
  rt->close = transport_group_on_close;
  return 0;
}

void transport_group_release(struct raft_uv_transport *rt)
{
  struct transport_group *g = rt->impl;
  if (g == NULL) {
    return;
  }
  free(g->address);
  free(g);
  rt->impl = NULL;
}

/* ---- the listener ---- */

static uint64_t transport_now(const struct transport *tr) { return uv_now(tr->loop); }

static void transport_inbound_unlink(struct transport_inbound *in)
{
  struct transport *tr = in->tr;
  if (in->prev != NULL) {
    in->prev->next = in->next;
  } else {
    tr->pending = in->next;
  }
  if (in->next != NULL) {
    in->next->prev = in->prev;
  }
  tr->npending--;
}

/* Closes an inbound connection that will not reach a group. */
static void transport_inbound_reject(struct transport_inbound *in, const char *why)
{
  struct transport *tr = in->tr;
  log_warn("transport", "closing inbound cluster connection: %s", why);
  tr->rejected++;
  transport_inbound_unlink(in);
  uv_close((uv_handle_t *)in->tcp, transport_free_handle);
  free(in);
}

static void transport_inbound_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
  struct transport_inbound *in = h->data;
  if (in->tr->key != NULL) {
    /* Never read past the handshake's answer: the dialer sends nothing
     * more before our proof. */
    *buf = uv_buf_init((char *)in->rbuf, (unsigned)chs_want(&in->hs));
    return;
  }
  /* Never read past the preamble: what follows belongs to Raft. */
  int size = transport_preamble_size(in->buf, in->got);
  size_t want = size > 0 ? (size_t)size : TRANSPORT_PREAMBLE_FIXED;
  *buf = uv_buf_init((char *)in->buf + in->got, (unsigned)(want - in->got));
}

/* Sends the handshake's proof (with a cluster key) and hands the stream
 * over: returns it, or NULL after rejecting the connection. */
static uv_tcp_t *transport_inbound_take(struct transport_inbound *in)
{
  struct transport *tr = in->tr;
  uv_read_stop((uv_stream_t *)in->tcp);
  if (tr->key != NULL) {
    /* The dialer waits for our proof before its first byte; the write
     * owns its bytes, so the stream can change hands at once. */
    size_t len;
    const uint8_t *proof = chs_output(&in->hs, &len);
    int rv = transport_write_copy((uv_stream_t *)in->tcp, proof, len);
    if (rv != 0) {
      char why[128];
      snprintf(why, sizeof why, "sending the handshake proof: %s", cairn_strerror(rv));
      transport_inbound_reject(in, why);
      return NULL;
    }
  }
  transport_inbound_unlink(in);
  uv_tcp_t *tcp = in->tcp;
  free(in);
  tcp->data = NULL;
  tr->accepted++;
  return tcp;
}

/* A node watching this one's liveness (nodewatch.h). */
static void transport_inbound_route_watch(struct transport_inbound *in, uint64_t sender,
                                          const char *address)
{
  struct transport *tr = in->tr;
  if (tr->watch_cb == NULL) {
    char why[TRANSPORT_ADDRESS_MAX + 128];
    snprintf(why, sizeof why, "liveness watch from node %llu at %s: not served",
             (unsigned long long)sender, address);
    transport_inbound_reject(in, why);
    return;
  }
  uv_tcp_t *tcp = transport_inbound_take(in);
  if (tcp != NULL) {
    tr->watch_cb(tr->watch_data, sender, address, (uv_stream_t *)tcp);
  }
}

static void transport_inbound_route(struct transport_inbound *in)
{
  struct transport *tr = in->tr;
  uint64_t group_id, sender;
  uint16_t kind;
  char address[TRANSPORT_ADDRESS_MAX + 1];
  char why[TRANSPORT_ADDRESS_MAX + 128];
  int rv = transport_preamble_decode(in->buf, in->got, &kind, &group_id, &sender, address);
  if (rv < 0) {
    snprintf(why, sizeof why, "bad preamble: %s", cairn_strerror(rv));
    transport_inbound_reject(in, why);
    return;
  }
  if (rv == 0) {
    return; /* more to come */
  }
  if (kind == TRANSPORT_KIND_WATCH) {
    transport_inbound_route_watch(in, sender, address);
    return;
  }
  bool found;
  size_t at = transport_route_find(tr, group_id, &found);
  if (!found) {
    snprintf(why, sizeof why, "unknown group %llu (from node %llu at %s)",
             (unsigned long long)group_id, (unsigned long long)sender, address);
    transport_inbound_reject(in, why);
    return;
  }
  struct transport_route *r = tr->routes[at];
  const char *refused = kind == TRANSPORT_KIND_FETCH && r->fetch_cb == NULL ? "fetches"
                        : kind != TRANSPORT_KIND_FETCH && r->g == NULL
                            ? "Raft connections (its Raft messages go over the multiplexer)"
                            : NULL;
  if (refused != NULL) {
    snprintf(why, sizeof why, "group %llu takes no %s (from node %llu at %s)",
             (unsigned long long)group_id, refused, (unsigned long long)sender, address);
    transport_inbound_reject(in, why);
    return;
  }
  uv_tcp_t *tcp = transport_inbound_take(in);
  if (tcp == NULL) {
    return;
  }
  if (kind == TRANSPORT_KIND_FETCH) {
    r->fetch_cb(r->fetch_data, sender, (uv_stream_t *)tcp);
    return;
  }
  r->g->accept_cb(r->g->rt, sender, address, (uv_stream_t *)tcp);
}

/* With a cluster key: the dialer's answer, holding the preamble. */
static void transport_inbound_on_handshake(struct transport_inbound *in, const uint8_t *bytes,
                                           size_t n)
{
  struct transport *tr = in->tr;
  /* A dialer without the key sends a plain preamble: say so. */
  bool plain = in->hs.got == 0 && n >= 4 && le_get32(bytes) == TRANSPORT_MAGIC;
  int rv = chs_feed(&in->hs, bytes, n);
  if (rv == CHS_AGAIN) {
    return;
  }
  if (rv == CHS_OK) {
    size_t len;
    const uint8_t *pre = chs_payload(&in->hs, &len);
    if (len > sizeof in->buf) {
      transport_inbound_reject(in, "bad preamble: too long");
      return;
    }
    memcpy(in->buf, pre, len);
    in->got = len;
    int size = transport_preamble_size(in->buf, in->got);
    if (size <= 0 || (size_t)size != len) {
      transport_inbound_reject(in, size < 0 ? "bad preamble in the handshake"
                                            : "bad preamble: wrong length in the handshake");
      return;
    }
    transport_inbound_route(in);
    return;
  }
  char peer[64] = "?";
  struct sockaddr_storage sa;
  int salen = sizeof sa;
  if (uv_tcp_getpeername(in->tcp, (struct sockaddr *)&sa, &salen) == 0) {
    uv_ip_name((struct sockaddr *)&sa, peer, sizeof peer);
  }
  transport_log_auth(tr, "closing inbound cluster connection from %s: %s", peer,
                     plain ? "a plain preamble without the handshake (a node without the "
                             "cluster secret?)"
                           : cairn_strerror(rv < 0 ? rv : CAIRN_EINVAL));
  /* Logged above (rate-limited): close without a second line. */
  tr->rejected++;
  transport_inbound_unlink(in);
  uv_close((uv_handle_t *)in->tcp, transport_free_handle);
  free(in);
}

static void transport_inbound_on_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf)
{
  struct transport_inbound *in = s->data;
  if (n == 0) {
    return;
  }
  if (n < 0) {
    transport_inbound_reject(in, n == UV_EOF ? "peer closed during the preamble"
                                             : uv_strerror((int)n));
    return;
  }
  if (in->tr->key != NULL) {
    transport_inbound_on_handshake(in, (const uint8_t *)buf->base, (size_t)n);
    return;
  }
  in->got += (size_t)n;
  int size = transport_preamble_size(in->buf, in->got);
  if (size < 0) {
    char why[96];
    snprintf(why, sizeof why, "bad preamble: %s", cairn_strerror(size));
    transport_inbound_reject(in, why);
    return;
  }
  if (size > 0 && in->got == (size_t)size) {
    transport_inbound_route(in);
  }
}

static void transport_on_connection(uv_stream_t *server, int status)
{
  struct transport *tr = server->data;
  if (status != 0) {
    log_warn("transport", "accept failed: %s", uv_strerror(status));
    return;
  }
  uv_tcp_t *tcp = malloc(sizeof *tcp);
  struct transport_inbound *in = calloc(1, sizeof *in);
  if (tcp == NULL || in == NULL) {
    free(tcp);
    free(in);
    return; /* the connection waits in the backlog; the kernel bounds it */
  }
  uv_tcp_init(tr->loop, tcp);
  if (uv_accept(server, (uv_stream_t *)tcp) != 0) {
    uv_close((uv_handle_t *)tcp, transport_free_handle);
    free(in);
    return;
  }
  uv_tcp_nodelay(tcp, 1);
  in->tr = tr;
  in->tcp = tcp;
  in->deadline = transport_now(tr) + tr->preamble_timeout_ms;
  tcp->data = in;
  in->next = tr->pending;
  if (tr->pending != NULL) {
    tr->pending->prev = in;
  }
  tr->pending = in;
  tr->npending++;
  if (tr->npending > TRANSPORT_MAX_PENDING) {
    transport_inbound_reject(in, "too many connections still in their preamble");
    return;
  }
  if (tr->key != NULL) {
    uint8_t nonce[CHS_NONCE_LEN];
    int rv = chs_random(nonce, sizeof nonce);
    if (rv == 0) {
      chs_listener_init(&in->hs, tr->key, tr->key_len, nonce);
      size_t len;
      const uint8_t *challenge = chs_output(&in->hs, &len);
      rv = transport_write_copy((uv_stream_t *)tcp, challenge, len);
    }
    if (rv != 0) {
      char why[96];
      snprintf(why, sizeof why, "sending the handshake challenge: %s", cairn_strerror(rv));
      transport_inbound_reject(in, why);
      return;
    }
  }
  uv_read_start((uv_stream_t *)tcp, transport_inbound_alloc, transport_inbound_on_read);
}

/* Ends outbound handshakes past their deadline, and those whose owner went
 * away (they wait on a read that may never come). */
static void transport_sweep_dialers(struct transport *tr, uint64_t now)
{
  struct transport_connect *c = tr->handshaking;
  while (c != NULL) {
    struct transport_connect *next = c->next;
    if (transport_connect_canceled(c)) {
      transport_connect_done(c, CAIRN_ESHUTDOWN);
    } else if (now >= c->deadline) {
      char peer[TRANSPORT_ADDRESS_MAX + 16];
      transport_connect_peer(c, peer, sizeof peer);
      transport_log_auth(tr, "cluster handshake with %s: %s", peer,
                         "no challenge before the deadline (does the peer have the cluster "
                         "secret?)");
      transport_connect_done(c, CAIRN_ECLUSTER_AUTH);
    }
    c = next;
  }
}

static void transport_on_sweep(uv_timer_t *t)
{
  struct transport *tr = t->data;
  uint64_t now = transport_now(tr);
  struct transport_inbound *in = tr->pending;
  while (in != NULL) {
    struct transport_inbound *next = in->next;
    if (now >= in->deadline) {
      transport_inbound_reject(in, tr->key != NULL ? "no handshake before the deadline"
                                                   : "no preamble before the deadline");
    }
    in = next;
  }
  transport_sweep_dialers(tr, now);
}

static int transport_parse_bind(const char *address, struct sockaddr_storage *sa)
{
  char host[TRANSPORT_ADDRESS_MAX + 1], port[8];
  int rv = transport_split_address(address, host, sizeof host, port, sizeof port);
  if (rv != 0) {
    return rv;
  }
  int p = atoi(port);
  if (uv_ip4_addr(host, p, (struct sockaddr_in *)sa) == 0 ||
      uv_ip6_addr(host, p, (struct sockaddr_in6 *)sa) == 0) {
    return 0;
  }
  return CAIRN_EINVAL;
}

int transport_init(struct transport *tr, uv_loop_t *loop, const char *bind_address)
{
  memset(tr, 0, sizeof *tr);
  tr->loop = loop;
  tr->preamble_timeout_ms = TRANSPORT_DEFAULT_PREAMBLE_TIMEOUT_MS;
  struct sockaddr_storage sa;
  int rv = transport_parse_bind(bind_address, &sa);
  if (rv != 0) {
    snprintf(tr->errmsg, sizeof tr->errmsg,
             "cluster address '%s' is not an IP literal with a port", bind_address);
    return rv;
  }
  tr->bind_address = strdup(bind_address);
  if (tr->bind_address == NULL) {
    return CAIRN_ENOMEM;
  }
  uv_tcp_init(loop, &tr->listener);
  tr->listener.data = tr;
  rv = uv_tcp_bind(&tr->listener, (struct sockaddr *)&sa, 0);
  if (rv == 0) {
    rv = uv_listen((uv_stream_t *)&tr->listener, 128, transport_on_connection);
  }
  if (rv != 0) {
    snprintf(tr->errmsg, sizeof tr->errmsg, "listening on %s: %s", bind_address,
             uv_strerror(rv));
    uv_close((uv_handle_t *)&tr->listener, NULL);
    free(tr->bind_address);
    tr->bind_address = NULL;
    return rv;
  }
  uv_timer_init(loop, &tr->sweeper);
  tr->sweeper.data = tr;
  uv_timer_start(&tr->sweeper, transport_on_sweep, 250, 250);
  uv_unref((uv_handle_t *)&tr->sweeper); /* never keeps the loop alive alone */
  tr->handles_open = 2;
  return 0;
}

void transport_set_key(struct transport *tr, const uint8_t *key, size_t key_len)
{
  tr->key = key;
  tr->key_len = key_len;
}

void transport_set_watch(struct transport *tr, transport_watch_cb cb, void *data)
{
  tr->watch_cb = cb;
  tr->watch_data = data;
}

int transport_port(const struct transport *tr)
{
  struct sockaddr_storage sa;
  int len = sizeof sa;
  if (uv_tcp_getsockname(&tr->listener, (struct sockaddr *)&sa, &len) != 0) {
    return -1;
  }
  return sa.ss_family == AF_INET ? ntohs(((struct sockaddr_in *)&sa)->sin_port)
                                 : ntohs(((struct sockaddr_in6 *)&sa)->sin6_port);
}

static void transport_on_handle_closed(uv_handle_t *h)
{
  struct transport *tr = h->data;
  if (--tr->handles_open > 0) {
    return;
  }
  free(tr->routes);
  free(tr->bind_address);
  tr->routes = NULL;
  tr->bind_address = NULL;
  if (tr->close_cb != NULL) {
    tr->close_cb(tr);
  }
}

void transport_close(struct transport *tr, transport_close_cb cb)
{
  tr->closing = true;
  tr->close_cb = cb;
  while (tr->pending != NULL) {
    transport_inbound_reject(tr->pending, "node shutting down");
  }
  while (tr->handshaking != NULL) {
    transport_connect_done(tr->handshaking, CAIRN_ESHUTDOWN);
  }
  uv_close((uv_handle_t *)&tr->listener, transport_on_handle_closed);
  uv_close((uv_handle_t *)&tr->sweeper, transport_on_handle_closed);
}
