/* peer.c - an outbound, pipelined connection to another node's client
 * port. See peer.h. */
#include "net/peer.h"

#include "common/err.h"
#include "common/log.h"
#include "net/frame.h"
#include "net/tls.h"
#include "net/tls_uv.h"

#include <errno.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void peer_on_sweep(uv_timer_t *t);

/* An encoded request and its write: owned by the call until written, then
 * by libuv until the write callback (which fires, canceled, on close). */
struct peer_wbuf {
  uv_write_t wr;
  size_t len;
  uint8_t data[];
};

int peer_init(struct peer *p, uv_loop_t *loop, uint32_t max_frame_bytes)
{
  memset(p, 0, sizeof *p);
  p->loop = loop;
  p->max_frame_bytes = max_frame_bytes ? max_frame_bytes : FRAME_DEFAULT_MAX_BYTES;
  p->next_corr = 1;
  p->state = PEER_IDLE;
  uv_timer_init(loop, &p->sweep);
  p->sweep.data = p;
  uv_timer_start(&p->sweep, peer_on_sweep, PEER_SWEEP_MS, PEER_SWEEP_MS);
  return 0;
}

/* ---- the call list ---- */

static void peer_unlink(struct peer *p, struct peer_call *call)
{
  if (call->prev != NULL) {
    call->prev->next = call->next;
  } else {
    p->calls = call->next;
  }
  if (call->next != NULL) {
    call->next->prev = call->prev;
  } else {
    p->calls_tail = call->prev;
  }
  call->prev = call->next = NULL;
  p->ncalls--;
}

/* Ends a call: its buffer is freed unless a write still uses it (then the
 * write callback frees it). */
static void peer_finish(struct peer *p, struct peer_call *call, int status,
                        const Cairn__Client__Envelope *resp, const uint8_t *payload, size_t len)
{
  peer_unlink(p, call);
  free(call->wb); /* NULL once handed to a write */
  call->wb = NULL;
  call->cb(call, status, resp, payload, len);
}

static void peer_fail_all(struct peer *p, int status)
{
  while (p->calls != NULL) {
    peer_finish(p, p->calls, status, NULL, NULL, 0);
  }
}

/* ---- connection teardown ---- */

void peer_set_node_auth(struct peer *p, uint64_t node_id, const uint8_t *key, size_t key_len)
{
  p->node_id = node_id;
  p->node_key = key;
  p->node_key_len = key_len;
}

void peer_set_tls(struct peer *p, struct tls_ctx *ctx) { p->tls_ctx = ctx; }

static void peer_on_tcp_closed(uv_handle_t *h)
{
  struct peer *p = h->data;
  p->tcp_open = false;
  tls_session_free(p->tls);
  p->tls = NULL;
  free(p->tls_in);
  p->tls_in = NULL;
  free(p->rbuf);
  p->rbuf = NULL;
  p->rlen = p->rcap = 0;
  if (p->state == PEER_RESETTING) {
    p->state = PEER_IDLE;
  }
  if (p->state == PEER_CLOSING && --p->handles_closing == 0) {
    p->state = PEER_CLOSED;
    if (p->close_cb != NULL) {
      p->close_cb(p);
    }
  }
}

/* Drops the connection; every call in flight fails with status. */
static void peer_reset(struct peer *p, int status, const char *why)
{
  if (p->state == PEER_IDLE || p->state == PEER_RESETTING || p->state >= PEER_CLOSING) {
    return;
  }
  if (status != 0) {
    p->failures++;
    log_debug("peer", "%s: %s: %s", p->address, why, cairn_strerror(status));
  }
  bool resolving = p->state == PEER_RESOLVING;
  p->state = PEER_RESETTING;
  if (resolving) {
    uv_cancel((uv_req_t *)&p->gai); /* its callback sees RESETTING */
  }
  peer_fail_all(p, status);
  if (p->tcp_open) {
    uv_close((uv_handle_t *)&p->tcp, peer_on_tcp_closed);
  } else if (!resolving) {
    p->state = PEER_IDLE;
  }
}

/* ---- reading answers ---- */

/* Room for plaintext in rbuf, grown up to its bound. */
static void peer_room(struct peer *p, uv_buf_t *buf)
{
  size_t limit = (size_t)p->max_frame_bytes + FRAME_HEADER_SIZE;
  if (p->rcap - p->rlen < 64 * 1024 && p->rcap < limit) {
    size_t cap = p->rcap ? p->rcap * 2 : 64 * 1024;
    cap = cap > limit ? limit : cap;
    uint8_t *nb = realloc(p->rbuf, cap);
    if (nb != NULL) {
      p->rbuf = nb;
      p->rcap = cap;
    }
  }
  buf->base = (char *)p->rbuf + p->rlen;
  buf->len = p->rcap - p->rlen;
}

static void peer_on_alloc(uv_handle_t *h, size_t hint, uv_buf_t *buf)
{
  struct peer *p = h->data;
  if (p->tls != NULL) {
    tls_uv_in_buf(&p->tls_in, buf);
    return;
  }
  peer_room(p, buf);
}

/* TLS: writes the ciphertext the session made on its own (handshake). */
static void peer_tls_flush(struct peer *p)
{
  if (p->tcp_open) {
    /* A failure leaves it to the call deadlines to reset the connection. */
    (void)tls_uv_flush(p->tls, (uv_stream_t *)&p->tcp);
  }
}

static struct peer_call *peer_find(struct peer *p, uint64_t corr)
{
  for (struct peer_call *c = p->calls; c != NULL; c = c->next) {
    if (c->corr == corr) {
      return c;
    }
  }
  return NULL;
}

static int peer_write(struct peer *p, struct peer_call *call);
static void peer_write_pending(struct peer *p);

/* Sends one Authenticate step of the node exchange. */
static int peer_auth_send(struct peer *p, const uint8_t *msg, size_t len)
{
  Cairn__Client__AuthenticateRequest r = CAIRN__CLIENT__AUTHENTICATE_REQUEST__INIT;
  r.mechanism = "CAIRN-NODE";
  r.message.data = (uint8_t *)msg;
  r.message.len = len;
  Cairn__Client__Envelope env = CAIRN__CLIENT__ENVELOPE__INIT;
  env.api = CAIRN__CLIENT__API__API_AUTHENTICATE;
  env.body_case = CAIRN__CLIENT__ENVELOPE__BODY_AUTHENTICATE_REQ;
  env.authenticate_req = &r;
  env.correlation_id = p->auth_corr = p->next_corr++;
  uint8_t *hdr = NULL;
  size_t hdr_len = 0;
  int rv = frame_encode(&env, NULL, 0, &hdr, &hdr_len);
  if (rv != 0) {
    return rv;
  }
  struct peer_call tmp;
  memset(&tmp, 0, sizeof tmp);
  tmp.wb = malloc(sizeof *tmp.wb + hdr_len);
  if (tmp.wb == NULL) {
    free(hdr);
    return CAIRN_ENOMEM;
  }
  memcpy(tmp.wb->data, hdr, hdr_len);
  tmp.wb->len = hdr_len;
  free(hdr);
  rv = peer_write(p, &tmp);
  if (rv != 0) {
    free(tmp.wb);
  }
  return rv;
}

/* The connection is up (TLS done): authenticate first, or be READY. */
static void peer_on_up(struct peer *p)
{
  if (p->node_key == NULL) {
    p->state = PEER_READY;
    peer_write_pending(p);
    return;
  }
  p->state = PEER_AUTHING;
  char first[64];
  int n = snprintf(first, sizeof first, "node=%llu", (unsigned long long)p->node_id);
  int rv = peer_auth_send(p, (const uint8_t *)first, (size_t)n);
  if (rv != 0) {
    peer_reset(p, rv, "authenticate");
  }
}

/* An answer to the node exchange: the nonce (answer with the proof) or
 * the verdict. Returns 0 or a negative code (the connection must go). */
static int peer_auth_answer(struct peer *p, const Cairn__Client__Envelope *env)
{
  if (env->body_case != CAIRN__CLIENT__ENVELOPE__BODY_AUTHENTICATE_RESP) {
    return CAIRN_EPROTOCOL;
  }
  const Cairn__Client__AuthenticateResponse *r = env->authenticate_resp;
  if (r->error != NULL && r->error->code != CAIRN__CLIENT__ERROR_CODE__OK) {
    log_warn("peer", "%s: node authentication refused: %s", p->address,
             r->error->message != NULL ? r->error->message : "");
    return CAIRN_EAUTH;
  }
  if (r->done) {
    p->state = PEER_READY;
    peer_write_pending(p);
    return 0;
  }
  char t[128];
  int n = snprintf(t, sizeof t, "%.*snode=%llu", (int)(r->message.len < 64 ? r->message.len : 64),
                   (const char *)r->message.data, (unsigned long long)p->node_id);
  /* HMAC-SHA256(key, label || nonce || "node=ID"), as cluster/chs.h's chs_mac */
  char labeled[160];
  int ln = snprintf(labeled, sizeof labeled, "cairn node auth v1%s", t);
  uint8_t mac[32];
  unsigned mac_len = sizeof mac;
  if (n < 0 || ln < 0 || (size_t)ln >= sizeof labeled ||
      HMAC(EVP_sha256(), p->node_key, (int)p->node_key_len, (const uint8_t *)labeled, (size_t)ln,
           mac, &mac_len) == NULL) {
    return CAIRN_EAUTH;
  }
  return peer_auth_send(p, mac, sizeof mac);
}

/* Handles the whole frames in the buffer. Returns 0 or a negative code
 * (the connection must go). */
static int peer_consume(struct peer *p)
{
  size_t pos = 0;
  while (p->state == PEER_READY || p->state == PEER_AUTHING) {
    struct frame f;
    int rv = frame_decode(p->rbuf + pos, p->rlen - pos, p->max_frame_bytes, &f);
    if (rv == FRAME_NEED_MORE) {
      break;
    }
    if (rv < 0) {
      return rv;
    }
    Cairn__Client__Envelope *env = NULL;
    rv = frame_unpack_envelope(&f, &env);
    if (rv != 0) {
      return rv;
    }
    if (p->state == PEER_AUTHING && env->correlation_id == p->auth_corr) {
      rv = peer_auth_answer(p, env);
      cairn__client__envelope__free_unpacked(env, NULL);
      if (rv != 0) {
        return rv;
      }
      pos += f.size;
      continue;
    }
    struct peer_call *call = peer_find(p, env->correlation_id);
    if (call != NULL) {
      peer_finish(p, call, 0, env, f.payload, f.payload_len);
    }
    cairn__client__envelope__free_unpacked(env, NULL);
    pos += f.size;
  }
  memmove(p->rbuf, p->rbuf + pos, p->rlen - pos);
  p->rlen -= pos;
  return 0;
}

static void peer_write_pending(struct peer *p);

/* TLS: decrypts into rbuf; the handshake's end makes the peer READY.
 * Returns 0 or a negative code (the connection must go). */
static int peer_tls_pull(struct peer *p, const uint8_t *data, size_t len)
{
  if (tls_feed(p->tls, data, len) != 0) {
    return CAIRN_ENOMEM;
  }
  for (;;) {
    uv_buf_t b;
    peer_room(p, &b);
    bool was_done = tls_handshake_done(p->tls);
    char why[TLS_ERRMSG_SIZE];
    int n = tls_read(p->tls, (uint8_t *)b.base, b.len, why, sizeof why);
    peer_tls_flush(p);
    if (!was_done && tls_handshake_done(p->tls) && p->state == PEER_CONNECTING) {
      peer_on_up(p);
    }
    if (n > 0) {
      p->rlen += (size_t)n;
      if (b.len == (size_t)n && p->rlen == p->rcap) {
        return 0; /* full: the size check below decides */
      }
      continue;
    }
    if (n == TLS_WANT_READ) {
      return 0;
    }
    if (n == TLS_EOF) {
      return -ECONNRESET;
    }
    log_warn("peer", "%s: %s", p->address, why);
    return CAIRN_ETLS;
  }
}

static void peer_on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf)
{
  struct peer *p = s->data;
  if (nread == 0) {
    return;
  }
  if (nread < 0) {
    peer_reset(p, nread == UV_EOF ? -ECONNRESET : (int)nread, "read");
    return;
  }
  if (p->tls != NULL) {
    int rv = peer_tls_pull(p, (const uint8_t *)buf->base, (size_t)nread);
    if (rv != 0) {
      peer_reset(p, rv, "TLS");
      return;
    }
  } else {
    p->rlen += (size_t)nread;
  }
  int rv = peer_consume(p);
  if (rv != 0) {
    peer_reset(p, rv, "answer");
  } else if (p->rlen == p->rcap && p->rcap >= (size_t)p->max_frame_bytes + FRAME_HEADER_SIZE) {
    peer_reset(p, CAIRN_ETOOLARGE, "answer");
  }
}

/* ---- writing calls ---- */

static void peer_on_written(uv_write_t *wr, int status)
{
  struct peer *p = wr->data;
  free((struct peer_wbuf *)wr);
  if (status != 0 && status != UV_ECANCELED && p->state == PEER_READY) {
    peer_reset(p, status, "write");
  }
}

static int peer_write(struct peer *p, struct peer_call *call)
{
  if (p->tls != NULL) {
    /* Replace the plaintext by its ciphertext. */
    struct peer_wbuf *plain = call->wb;
    int rv = tls_write(p->tls, plain->data, plain->len);
    size_t n = tls_out_pending(p->tls);
    struct peer_wbuf *enc = rv == 0 ? malloc(sizeof *enc + n) : NULL;
    if (enc == NULL) {
      return rv != 0 ? rv : CAIRN_ENOMEM;
    }
    enc->len = tls_take_out(p->tls, enc->data, n);
    free(plain);
    call->wb = enc;
  }
  struct peer_wbuf *wb = call->wb;
  uv_buf_t b = uv_buf_init((char *)wb->data, (unsigned)wb->len);
  wb->wr.data = p;
  int rv = uv_write(&wb->wr, (uv_stream_t *)&p->tcp, &b, 1, peer_on_written);
  if (rv == 0) {
    call->wb = NULL;
  }
  return rv;
}

static void peer_write_pending(struct peer *p)
{
  for (struct peer_call *c = p->calls; c != NULL && p->state == PEER_READY; c = c->next) {
    if (c->wb != NULL) {
      int rv = peer_write(p, c);
      if (rv != 0) {
        peer_reset(p, rv, "write");
        return;
      }
    }
  }
}

/* ---- connecting ---- */

static void peer_on_connect(uv_connect_t *req, int status)
{
  struct peer *p = req->data;
  if (p->state != PEER_CONNECTING) {
    return;
  }
  if (status != 0) {
    peer_reset(p, status, "connect");
    return;
  }
  uv_tcp_nodelay(&p->tcp, 1);
  if (p->tls_ctx != NULL) {
    /* READY once the handshake is done (peer_tls_pull). */
    int rv = tls_client_session_new(p->tls_ctx, p->host, &p->tls);
    if (rv == 0) {
      rv = uv_read_start((uv_stream_t *)&p->tcp, peer_on_alloc, peer_on_read);
    }
    if (rv != 0) {
      peer_reset(p, rv, "TLS start");
      return;
    }
    char why[TLS_ERRMSG_SIZE];
    rv = tls_read(p->tls, NULL, 0, why, sizeof why); /* the ClientHello */
    peer_tls_flush(p);
    if (rv < 0) {
      log_warn("peer", "%s: %s", p->address, why);
      peer_reset(p, rv, "TLS start");
    }
    return;
  }
  int rv = uv_read_start((uv_stream_t *)&p->tcp, peer_on_alloc, peer_on_read);
  if (rv != 0) {
    peer_reset(p, rv, "read start");
    return;
  }
  peer_on_up(p);
}

static void peer_on_resolved(uv_getaddrinfo_t *req, int status, struct addrinfo *res)
{
  struct peer *p = req->data;
  if (p->state != PEER_RESOLVING) {
    uv_freeaddrinfo(res);
    if (p->state == PEER_RESETTING) {
      p->state = PEER_IDLE;
    } else if (p->state == PEER_CLOSING && --p->handles_closing == 0) {
      p->state = PEER_CLOSED;
      if (p->close_cb != NULL) {
        p->close_cb(p);
      }
    }
    return;
  }
  if (status != 0 || res == NULL) {
    uv_freeaddrinfo(res);
    peer_reset(p, status != 0 ? status : -EHOSTUNREACH, "resolve");
    return;
  }
  uv_tcp_init(p->loop, &p->tcp);
  p->tcp.data = p;
  p->tcp_open = true;
  p->connect_req.data = p;
  p->state = PEER_CONNECTING;
  int rv = uv_tcp_connect(&p->connect_req, &p->tcp, res->ai_addr, peer_on_connect);
  uv_freeaddrinfo(res);
  if (rv != 0) {
    peer_reset(p, rv, "connect");
  }
}

/* Splits "host:port" or "[v6]:port". */
static int peer_split(const char *address, char *host, size_t hostlen, char *port, size_t portlen)
{
  const char *colon = strrchr(address, ':');
  if (colon == NULL || colon == address || colon[1] == '\0') {
    return CAIRN_EINVAL;
  }
  const char *h = address;
  size_t n = (size_t)(colon - address);
  if (h[0] == '[' && n >= 2 && h[n - 1] == ']') {
    h++;
    n -= 2;
  }
  if (n >= hostlen || strlen(colon + 1) >= portlen) {
    return CAIRN_EINVAL;
  }
  memcpy(host, h, n);
  host[n] = '\0';
  snprintf(port, portlen, "%s", colon + 1);
  return 0;
}

static int peer_connect(struct peer *p, const char *address)
{
  char host[PEER_ADDRESS_MAX + 1], port[16];
  int rv = peer_split(address, host, sizeof host, port, sizeof port);
  if (rv != 0) {
    return rv;
  }
  snprintf(p->address, sizeof p->address, "%s", address);
  snprintf(p->host, sizeof p->host, "%s", host);
  struct addrinfo hints;
  memset(&hints, 0, sizeof hints);
  hints.ai_socktype = SOCK_STREAM;
  p->gai.data = p;
  p->state = PEER_RESOLVING;
  rv = uv_getaddrinfo(p->loop, &p->gai, peer_on_resolved, host, port, &hints);
  if (rv != 0) {
    p->state = PEER_IDLE;
  }
  return rv;
}

/* ---- the API ---- */

int peer_call(struct peer *p, const char *address, struct peer_call *call,
              Cairn__Client__Envelope *env, const uint8_t *payload, size_t payload_len,
              unsigned timeout_ms, peer_call_cb cb)
{
  if (p->state >= PEER_CLOSING) {
    return CAIRN_ESHUTDOWN;
  }
  if (p->ncalls >= PEER_MAX_CALLS) {
    return -EBUSY;
  }
  if (p->state != PEER_IDLE && strcmp(p->address, address) != 0) {
    peer_reset(p, -ECONNABORTED, "another address");
  }
  if (p->state == PEER_RESETTING) {
    return -EAGAIN; /* the old connection is still closing: retry shortly */
  }
  void *data = call->data;
  memset(call, 0, sizeof *call);
  call->data = data;
  env->correlation_id = p->next_corr++;
  struct iovec iov = {.iov_base = (void *)payload, .iov_len = payload_len};
  uint8_t *hdr = NULL;
  size_t hdr_len = 0;
  int rv = frame_encode(env, &iov, payload_len > 0 ? 1 : 0, &hdr, &hdr_len);
  if (rv != 0) {
    return rv;
  }
  call->wb = malloc(sizeof *call->wb + hdr_len + payload_len);
  if (call->wb == NULL) {
    free(hdr);
    return CAIRN_ENOMEM;
  }
  memcpy(call->wb->data, hdr, hdr_len);
  if (payload_len > 0) {
    memcpy(call->wb->data + hdr_len, payload, payload_len);
  }
  free(hdr);
  call->wb->len = hdr_len + payload_len;
  call->p = p;
  call->corr = env->correlation_id;
  call->cb = cb;
  call->deadline = uv_now(p->loop) + timeout_ms;
  call->prev = p->calls_tail;
  if (p->calls_tail != NULL) {
    p->calls_tail->next = call;
  } else {
    p->calls = call;
  }
  p->calls_tail = call;
  p->ncalls++;
  if (p->state == PEER_IDLE) {
    rv = peer_connect(p, address);
    if (rv != 0) {
      peer_unlink(p, call);
      free(call->wb);
      call->wb = NULL;
      return rv;
    }
  } else if (p->state == PEER_READY) {
    rv = peer_write(p, call);
    if (rv != 0) {
      peer_reset(p, rv, "write"); /* fails this call too, through its callback */
    }
  }
  return 0;
}

static void peer_on_sweep(uv_timer_t *t)
{
  struct peer *p = t->data;
  uint64_t now = uv_now(p->loop);
  bool expired = false;
  for (struct peer_call *c = p->calls; c != NULL; c = c->next) {
    if (now >= c->deadline) {
      expired = true;
      break;
    }
  }
  if (expired) {
    /* An answer overdue means the peer or the path is in trouble: drop the
     * connection rather than keep a late answer's slot. */
    peer_reset(p, -ETIMEDOUT, "answer overdue");
  }
}

static void peer_on_sweep_closed(uv_handle_t *h)
{
  struct peer *p = h->data;
  if (--p->handles_closing == 0) {
    p->state = PEER_CLOSED;
    if (p->close_cb != NULL) {
      p->close_cb(p);
    }
  }
}

void peer_close(struct peer *p, peer_close_cb cb)
{
  if (p->state >= PEER_CLOSING) {
    return;
  }
  bool resolving = p->state == PEER_RESOLVING;
  p->state = PEER_CLOSING;
  p->close_cb = cb;
  peer_fail_all(p, CAIRN_ESHUTDOWN);
  p->handles_closing = 1;
  uv_close((uv_handle_t *)&p->sweep, peer_on_sweep_closed);
  if (resolving) {
    p->handles_closing++;
    uv_cancel((uv_req_t *)&p->gai);
  }
  if (p->tcp_open && !uv_is_closing((uv_handle_t *)&p->tcp)) {
    p->handles_closing++;
    uv_close((uv_handle_t *)&p->tcp, peer_on_tcp_closed);
  } else if (p->tcp_open) {
    p->handles_closing++; /* a reset is closing it: its callback counts */
  }
}
