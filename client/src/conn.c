/* conn.c - one TCP connection per node address: resolve, connect, Hello,
 * then pipelined requests matched to answers by correlation id, each with
 * its own deadline.
 *
 * States (lc_conn_set_state):
 *   RESOLVING --lc_conn_on_resolved--> CONNECTING --lc_conn_on_connect-->
 *   HELLO --lc_conn_on_hello--> READY
 *   any --lc_conn_fail--> CLOSING (requests fail; freed when libuv has
 *   called back for every handle and request it holds)
 * Requests made before READY wait in cn->reqs unwritten and are written
 * when Hello is answered. With TLS (opts.tls) CONNECTING lasts until the
 * handshake is done (src/net/tls.h, memory BIOs: nothing blocks); Hello
 * goes out then, and every frame is encrypted when written, every read
 * decrypted into the reader. The connect deadline covers the handshake.
 * Answers are cut into frames by the reader (reader.c): a large answer is
 * read into a buffer of its own size, which callbacks may keep (lc_buf_ref)
 * instead of copying its payload. While one arrives, SO_RCVLOWAT makes the
 * socket wake us per LC_RCVLOWAT_MAX bytes (or the frame's rest), not per
 * segment (lc_conn_lowat).
 * A failed connection is unlinked at once, so the next lc_conn_get for its
 * address dials a fresh one. */
#include "internal.h"

#include "common/err.h"
#include "net/frame.h"
#include "net/scram.h"
#include "net/tls.h"
#include "net/tls_uv.h"

#include <openssl/rand.h>

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

/* Answers larger than this close the connection (a named bound on what
 * a peer can make us buffer). */
#define LC_MAX_ANSWER_BYTES (256u * 1024 * 1024)

/* The most SO_RCVLOWAT asks for while a large answer arrives. */
#define LC_RCVLOWAT_MAX (1024 * 1024)

static void lc_conn_set_state(struct lc_conn *cn, enum lc_conn_state s) { cn->state = s; }

static void lc_conn_maybe_free(struct lc_conn *cn)
{
  if (cn->state != LC_CONN_CLOSING || cn->handles > 0) {
    return;
  }
  tls_session_free(cn->tls);
  free(cn->tls_in);
  if (cn->scram != NULL) {
    scram_client_wipe(cn->scram);
    free(cn->scram);
  }
  lc_reader_close(&cn->rd);
  free(cn);
}

static void lc_req_release(struct lc_req *r)
{
  if (--r->refs == 0) {
    free(r->frame);
    free(r->cipher);
    free(r);
  }
}

static void lc_req_unlink(struct lc_conn *cn, struct lc_req *r)
{
  if (r->prev != NULL) {
    r->prev->next = r->next;
  } else {
    cn->reqs = r->next;
  }
  if (r->next != NULL) {
    r->next->prev = r->prev;
  }
  r->prev = r->next = NULL;
}

/* Answers r (once): unlinks it, calls back, drops the answer's ref. */
static void lc_req_finish(struct lc_conn *cn, struct lc_req *r, int status,
                          Cairn__Client__Envelope *env, const uint8_t *payload, size_t len,
                          struct lc_buf *buf)
{
  lc_req_unlink(cn, r);
  r->answered = true;
  r->cb(cn->c, status, env, payload, len, buf, r->data);
  lc_req_release(r);
}

static void lc_conn_on_close(uv_handle_t *h)
{
  struct lc_conn *cn = h->data;
  cn->handles--;
  lc_conn_maybe_free(cn);
}

void lc_conn_fail(struct lc_conn *cn, int status, const char *why)
{
  if (cn->state == LC_CONN_CLOSING) {
    return;
  }
  lc_conn_set_state(cn, LC_CONN_CLOSING);
  cn->fail_status = status;
  if (status != UV_ECANCELED) {
    cn->c->stats.conn_failures++;
  }
  lc_fmt(cn->errmsg, sizeof cn->errmsg, "%s: %s: %s", cn->addr, why, cairn_strerror(status));
  struct cairn_client *c = cn->c;
  for (struct lc_conn **pp = &c->conns; *pp != NULL; pp = &(*pp)->next) {
    if (*pp == cn) {
      *pp = cn->next;
      break;
    }
  }
  cn->handles++; /* held while failing requests, so callbacks cannot free cn */
  while (cn->reqs != NULL) {
    lc_req_finish(cn, cn->reqs, status, NULL, NULL, 0, NULL);
  }
  if (cn->gai_active) {
    uv_cancel((uv_req_t *)&cn->gai);
  }
  if (cn->tcp_open) {
    cn->tcp_open = false;
    cn->handles++;
    uv_close((uv_handle_t *)&cn->tcp, lc_conn_on_close);
  }
  cn->handles--;
  lc_conn_maybe_free(cn);
}

static void lc_conn_on_write(uv_write_t *w, int status)
{
  struct lc_req *r = w->data;
  struct lc_conn *cn = r->cn;
  cn->handles--;
  r->written = true;
  lc_req_release(r);
  if (status < 0 && status != UV_ECANCELED) {
    lc_conn_fail(cn, status, "write");
  }
  lc_conn_maybe_free(cn);
}

/* Writes the ciphertext the session made on its own (handshake, alerts),
 * in the order it was made; the write never touches cn. */
static void lc_conn_tls_flush(struct lc_conn *cn)
{
  if (cn->tcp_open) {
    /* A failure leaves it to the connect deadline to fail the connection. */
    (void)tls_uv_flush(cn->tls, (uv_stream_t *)&cn->tcp);
  }
}

static int lc_conn_write(struct lc_conn *cn, struct lc_req *r)
{
  uv_buf_t b = uv_buf_init((char *)r->frame, (unsigned)r->frame_len);
  if (cn->tls != NULL) {
    int rv = tls_write(cn->tls, r->frame, r->frame_len);
    size_t n = tls_out_pending(cn->tls);
    if (rv != 0 || (r->cipher = malloc(n > 0 ? n : 1)) == NULL) {
      return rv != 0 ? rv : CAIRN_ENOMEM;
    }
    n = tls_take_out(cn->tls, r->cipher, n);
    b = uv_buf_init((char *)r->cipher, (unsigned)n);
  }
  r->wr.data = r;
  int rv = uv_write(&r->wr, (uv_stream_t *)&cn->tcp, &b, 1, lc_conn_on_write);
  if (rv != 0) {
    return rv;
  }
  r->refs++;
  cn->handles++;
  return 0;
}

/* Builds the frame of env + payload into r->frame. */
static int lc_req_build(struct lc_req *r, Cairn__Client__Envelope *env, const uv_buf_t *payload,
                        int npayload)
{
  uint64_t plen = 0;
  for (int i = 0; i < npayload; i++) {
    plen += payload[i].len;
  }
  size_t hl = frame_header_size(env);
  if (hl + plen > FRAME_MAX_BYTES_LIMIT) {
    return CAIRN_ETOOLARGE;
  }
  r->frame_len = hl + (size_t)plen;
  if ((r->frame = malloc(r->frame_len)) == NULL) {
    return CAIRN_ENOMEM;
  }
  int rv = frame_encode_header(env, plen, r->frame);
  if (rv != 0) {
    free(r->frame);
    r->frame = NULL;
    return rv;
  }
  size_t pos = hl;
  for (int i = 0; i < npayload; i++) {
    if (payload[i].len > 0) {
      memcpy(r->frame + pos, payload[i].base, payload[i].len);
      pos += payload[i].len;
    }
  }
  return 0;
}

/* Queues a request on cn (writes it now if READY, or in HELLO for the
 * Hello itself). */
static int lc_conn_submit(struct lc_conn *cn, Cairn__Client__Envelope *env,
                          const uv_buf_t *payload, int npayload, uint32_t timeout_ms,
                          bool write_now, lc_req_cb cb, void *data)
{
  struct lc_req *r = calloc(1, sizeof *r);
  if (r == NULL) {
    return CAIRN_ENOMEM;
  }
  r->cn = cn;
  r->corr = ++cn->next_corr;
  env->correlation_id = r->corr;
  int rv = lc_req_build(r, env, payload, npayload);
  if (rv != 0) {
    free(r);
    return rv;
  }
  r->refs = 1;
  r->cb = cb;
  r->data = data;
  r->deadline_ms = lc_now(cn->c) + timeout_ms;
  if (write_now && (rv = lc_conn_write(cn, r)) != 0) {
    free(r->frame);
    free(r);
    return rv;
  }
  r->next = cn->reqs;
  if (cn->reqs != NULL) {
    cn->reqs->prev = r;
  }
  cn->reqs = r;
  return 0;
}

int lc_conn_call(struct lc_conn *cn, Cairn__Client__Envelope *env, const uv_buf_t *payload,
                 int npayload, uint32_t timeout_ms, lc_req_cb cb, void *data)
{
  if (cn->state == LC_CONN_CLOSING) {
    return CAIRN_ECLOSED;
  }
  uint64_t plen = 0;
  for (int i = 0; i < npayload; i++) {
    plen += payload[i].len;
  }
  if (plen + frame_header_size(env) > (uint64_t)cn->max_frame_bytes + FRAME_LENGTH_FIELD_SIZE) {
    return CAIRN_ETOOLARGE; /* the node would refuse the frame and close */
  }
  return lc_conn_submit(cn, env, payload, npayload, timeout_ms, cn->state == LC_CONN_READY, cb,
                        data);
}

int lc_call(struct cairn_client *c, const char *addr, Cairn__Client__Envelope *env,
            const uv_buf_t *payload, int npayload, uint32_t timeout_ms, lc_req_cb cb, void *data)
{
  struct lc_conn *cn;
  int rv = lc_conn_get(c, addr, &cn);
  if (rv != 0) {
    return rv;
  }
  return lc_conn_call(cn, env, payload, npayload, timeout_ms, cb, data);
}

int lc_call_head(struct cairn_client *c, const char *addr, Cairn__Client__Envelope *env,
                 uint32_t timeout_ms, lc_head_cb head, lc_req_cb cb, void *data)
{
  struct lc_conn *cn;
  int rv = lc_conn_get(c, addr, &cn);
  if (rv != 0) {
    return rv;
  }
  if ((rv = lc_conn_call(cn, env, NULL, 0, timeout_ms, cb, data)) != 0) {
    return rv;
  }
  cn->reqs->head = head; /* lc_conn_submit put the new request first */
  return 0;
}

static void lc_conn_ready(struct lc_conn *cn);

/* ---- login: SCRAM-SHA-256 after Hello (opts.user) ---- */

static int lc_conn_auth_send(struct lc_conn *cn, const char *msg, size_t len, lc_req_cb cb)
{
  Cairn__Client__AuthenticateRequest r = CAIRN__CLIENT__AUTHENTICATE_REQUEST__INIT;
  r.mechanism = "SCRAM-SHA-256";
  r.message.data = (uint8_t *)msg;
  r.message.len = len;
  Cairn__Client__Envelope env = CAIRN__CLIENT__ENVELOPE__INIT;
  env.api = CAIRN__CLIENT__API__API_AUTHENTICATE;
  env.body_case = CAIRN__CLIENT__ENVELOPE__BODY_AUTHENTICATE_REQ;
  env.authenticate_req = &r;
  return lc_conn_submit(cn, &env, NULL, 0, cn->c->opts.connect_timeout_ms, true, cb, cn);
}

/* The answer's SCRAM message, or a failure of cn (returns NULL). */
static const ProtobufCBinaryData *lc_conn_auth_answer(struct lc_conn *cn, int status,
                                                      const Cairn__Client__Envelope *env)
{
  if (status != 0) {
    if (cn->state != LC_CONN_CLOSING) {
      lc_conn_fail(cn, status, "authenticate");
    }
    return NULL;
  }
  if (env->body_case != CAIRN__CLIENT__ENVELOPE__BODY_AUTHENTICATE_RESP) {
    lc_conn_fail(cn, CAIRN_EPROTOCOL, "authenticate answered with another api");
    return NULL;
  }
  const Cairn__Client__AuthenticateResponse *r = env->authenticate_resp;
  if (r->error != NULL && r->error->code != CAIRN__CLIENT__ERROR_CODE__OK) {
    lc_conn_fail(cn, lc_wire_err((int)r->error->code), "login refused");
    return NULL;
  }
  return &r->message;
}

static void lc_conn_on_auth_final(struct cairn_client *c, int status, Cairn__Client__Envelope *env,
                                  const uint8_t *payload, size_t len, struct lc_buf *buf,
                                  void *data)
{
  struct lc_conn *cn = data;
  const ProtobufCBinaryData *m = lc_conn_auth_answer(cn, status, env);
  if (m == NULL) {
    return;
  }
  int rv = scram_client_verify(cn->scram, (const char *)m->data, m->len);
  scram_client_wipe(cn->scram);
  free(cn->scram);
  cn->scram = NULL;
  if (rv != 0) {
    lc_conn_fail(cn, CAIRN_EAUTH, "the node did not prove it knows the credential");
    return;
  }
  lc_conn_ready(cn);
}

static void lc_conn_on_auth_first(struct cairn_client *c, int status, Cairn__Client__Envelope *env,
                                  const uint8_t *payload, size_t len, struct lc_buf *buf,
                                  void *data)
{
  struct lc_conn *cn = data;
  const ProtobufCBinaryData *m = lc_conn_auth_answer(cn, status, env);
  if (m == NULL) {
    return;
  }
  char out[SCRAM_MSG_MAX + 1];
  int n = scram_client_final(cn->scram, (const char *)m->data, m->len, out, sizeof out);
  if (n < 0 || lc_conn_auth_send(cn, out, (size_t)n, lc_conn_on_auth_final) != 0) {
    lc_conn_fail(cn, n < 0 ? n : CAIRN_ENOMEM, "login");
  }
}

static void lc_conn_login(struct lc_conn *cn)
{
  struct cairn_client *c = cn->c;
  uint8_t raw[SCRAM_NONCE_RAW];
  char nonce[SCRAM_NONCE_TEXT];
  char out[SCRAM_MSG_MAX + 1];
  cn->scram = calloc(1, sizeof *cn->scram);
  if (cn->scram == NULL || RAND_bytes(raw, sizeof raw) != 1) {
    lc_conn_fail(cn, CAIRN_ENOMEM, "login");
    return;
  }
  scram_nonce(raw, nonce);
  int n = scram_client_start(cn->scram, c->user, c->password, nonce, out, sizeof out);
  if (n < 0 || lc_conn_auth_send(cn, out, (size_t)n, lc_conn_on_auth_first) != 0) {
    lc_conn_fail(cn, n < 0 ? n : CAIRN_ENOMEM, "login");
  }
}

static void lc_conn_on_hello(struct cairn_client *c, int status, Cairn__Client__Envelope *env,
                             const uint8_t *payload, size_t len, struct lc_buf *buf,
                                  void *data)
{
  struct lc_conn *cn = data;
  if (status != 0) {
    if (cn->state != LC_CONN_CLOSING) {
      lc_conn_fail(cn, status, "hello");
    }
    return;
  }
  if (env->body_case != CAIRN__CLIENT__ENVELOPE__BODY_HELLO_RESP) {
    lc_conn_fail(cn, CAIRN_EPROTOCOL, "hello answered with another api");
    return;
  }
  Cairn__Client__HelloResponse *hr = env->hello_resp;
  if (hr->error != NULL && hr->error->code != CAIRN__CLIENT__ERROR_CODE__OK) {
    lc_conn_fail(cn, lc_wire_err((int)hr->error->code), "hello refused");
    return;
  }
  cn->node_id = hr->node_id;
  if (hr->max_frame_bytes != 0) {
    cn->max_frame_bytes = hr->max_frame_bytes;
  }
  for (size_t i = 0; i < hr->n_apis; i++) {
    if ((int)hr->apis[i] >= 0 && (int)hr->apis[i] < LC_MAX_APIS) {
      cn->apis[hr->apis[i]] = true;
    }
  }
  if (cn->c->user[0] != '\0') {
    lc_conn_login(cn);
    return;
  }
  lc_conn_ready(cn);
}

/* READY: writes what waited, oldest first (the list is newest first). */
static void lc_conn_ready(struct lc_conn *cn)
{
  lc_conn_set_state(cn, LC_CONN_READY);
  struct lc_req *last = cn->reqs;
  while (last != NULL && last->next != NULL) {
    last = last->next;
  }
  for (struct lc_req *r = last; r != NULL;) {
    struct lc_req *prev = r->prev;
    if (!r->written && r->refs == 1) {
      int rv = lc_conn_write(cn, r);
      if (rv != 0) {
        lc_conn_fail(cn, rv, "write");
        return;
      }
    }
    r = prev;
  }
}

/* Where the next plaintext goes (the reader's room). */
static void lc_conn_room(struct lc_conn *cn, uv_buf_t *buf)
{
  uint8_t *p;
  size_t len;
  if (lc_reader_room(&cn->rd, &p, &len) != 0) {
    *buf = uv_buf_init(NULL, 0); /* libuv reports UV_ENOBUFS */
    return;
  }
  if (len > UINT_MAX) {
    len = UINT_MAX;
  }
  *buf = uv_buf_init((char *)p, (unsigned)len);
}

/* After a read: while a large frame arrives, the socket wakes us only
 * once LC_RCVLOWAT_MAX bytes of it (or its rest) are there: fewer wake-ups
 * on both sides of the connection. Never above what is still to come. */
static void lc_conn_lowat(struct lc_conn *cn)
{
  int want = 1;
  size_t have = cn->rd.end - cn->rd.start;
  if (cn->tls == NULL && cn->rd.want > LC_READ_CHUNK && cn->rd.want > have) {
    size_t rest = cn->rd.want - have;
    want = rest < LC_RCVLOWAT_MAX ? (int)rest : LC_RCVLOWAT_MAX;
  }
  int cur = cn->rcvlowat > 0 ? cn->rcvlowat : 1;
  if (want == cur || (want > cur && cur > 1)) {
    return; /* raised once per frame; lowered as its rest shrinks */
  }
  uv_os_fd_t fd;
  int rv = uv_fileno((uv_handle_t *)&cn->tcp, &fd);
  if (rv == 0 && setsockopt(fd, SOL_SOCKET, SO_RCVLOWAT, &want, sizeof want) != 0) {
    rv = -errno;
  }
  if (rv == 0) {
    cn->rcvlowat = want;
  } else if (want < cur) {
    /* A mark left above what is still to come would never wake us. */
    lc_conn_fail(cn, rv, "lowering SO_RCVLOWAT");
  }
}

static void lc_conn_on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
  struct lc_conn *cn = h->data;
  if (cn->tls != NULL) {
    tls_uv_in_buf(&cn->tls_in, buf);
    return;
  }
  lc_conn_room(cn, buf);
}

/* Tells the request of a large answer still arriving its envelope, once.
 * A broken envelope is left for lc_conn_process to report once whole. */
static void lc_conn_head(struct lc_conn *cn)
{
  struct frame f;
  Cairn__Client__Envelope *env;
  if (!lc_reader_head(&cn->rd, &f) || frame_unpack_envelope(&f, &env) != 0) {
    return;
  }
  struct lc_req *r = cn->reqs;
  while (r != NULL && r->corr != env->correlation_id) {
    r = r->next;
  }
  if (r != NULL && r->head != NULL) {
    r->head(cn->c, env, r->data);
  }
  cairn__client__envelope__free_unpacked(env, NULL);
}

/* Handles every whole frame read. */
static void lc_conn_process(struct lc_conn *cn)
{
  while (cn->state != LC_CONN_CLOSING) {
    struct frame f;
    struct lc_buf *buf;
    int rv = lc_reader_next(&cn->rd, &f, &buf);
    if (rv == FRAME_NEED_MORE) {
      lc_conn_head(cn);
      break;
    }
    if (rv != FRAME_WHOLE) {
      lc_conn_fail(cn, CAIRN_EPROTOCOL, "malformed frame from the node");
      return;
    }
    Cairn__Client__Envelope *env;
    if ((rv = frame_unpack_envelope(&f, &env)) != 0) {
      lc_conn_fail(cn, CAIRN_EPROTOCOL, "envelope does not parse");
      return;
    }
    if (env->body_case == CAIRN__CLIENT__ENVELOPE__BODY_ERROR_RESP &&
        env->correlation_id == 0) {
      /* The node could not decode a frame of ours: it closes after this. */
      char why[LC_ERRMSG_SIZE];
      lc_fmt(why, sizeof why, "the node refused a frame (%s)",
               env->error_resp->message != NULL ? env->error_resp->message : "");
      cairn__client__envelope__free_unpacked(env, NULL);
      lc_conn_fail(cn, CAIRN_EPROTOCOL, why);
      return;
    }
    struct lc_req *r = cn->reqs;
    while (r != NULL && r->corr != env->correlation_id) {
      r = r->next;
    }
    if (r != NULL) { /* else: an answer after its request timed out */
      lc_req_finish(cn, r, 0, env, f.payload, f.payload_len, buf);
    }
    cairn__client__envelope__free_unpacked(env, NULL);
  }
}

static void lc_conn_send_hello(struct lc_conn *cn);

/* TLS: decrypts what was fed into the reader; sends Hello once the handshake is
 * done. Returns false when the connection failed. */
static bool lc_conn_tls_pull(struct lc_conn *cn)
{
  for (;;) {
    uv_buf_t b;
    lc_conn_room(cn, &b);
    if (b.base == NULL) {
      lc_conn_fail(cn, CAIRN_ENOMEM, "read buffer");
      return false;
    }
    bool was_done = tls_handshake_done(cn->tls);
    char why[TLS_ERRMSG_SIZE];
    int n = tls_read(cn->tls, (uint8_t *)b.base, b.len, why, sizeof why);
    lc_conn_tls_flush(cn);
    if (!was_done && tls_handshake_done(cn->tls)) {
      lc_conn_send_hello(cn);
      if (cn->state == LC_CONN_CLOSING) {
        return false;
      }
    }
    if (n > 0) {
      lc_reader_commit(&cn->rd, (size_t)n);
      continue;
    }
    if (n == TLS_WANT_READ) {
      return true;
    }
    if (n == TLS_EOF) {
      lc_conn_fail(cn, CAIRN_ECLOSED, "read");
      return false;
    }
    lc_conn_fail(cn, CAIRN_ETLS, why);
    return false;
  }
}

static void lc_conn_on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf)
{
  struct lc_conn *cn = s->data;
  if (nread < 0) {
    lc_conn_fail(cn, nread == UV_EOF ? CAIRN_ECLOSED : (int)nread, "read");
    return;
  }
  cn->handles++; /* callbacks below must not free cn under us */
  if (cn->tls != NULL) {
    if (nread > 0 && tls_feed(cn->tls, (const uint8_t *)buf->base, (size_t)nread) != 0) {
      lc_conn_fail(cn, CAIRN_ENOMEM, "TLS input");
    } else if (nread > 0) {
      (void)lc_conn_tls_pull(cn);
    }
  } else {
    lc_reader_commit(&cn->rd, (size_t)nread);
  }
  lc_conn_process(cn);
  if (cn->state != LC_CONN_CLOSING) {
    lc_conn_lowat(cn);
  }
  cn->handles--;
  lc_conn_maybe_free(cn);
}

static void lc_conn_on_connect(uv_connect_t *req, int status)
{
  struct lc_conn *cn = req->data;
  cn->handles--;
  if (cn->state == LC_CONN_CLOSING) {
    lc_conn_maybe_free(cn);
    return;
  }
  if (status < 0) {
    lc_conn_fail(cn, status, "connect");
    return;
  }
  uv_tcp_nodelay(&cn->tcp, 1);
  int rv = uv_read_start((uv_stream_t *)&cn->tcp, lc_conn_on_alloc, lc_conn_on_read);
  if (rv != 0) {
    lc_conn_fail(cn, rv, "read start");
    return;
  }
  if (cn->c->tls != NULL) {
    /* Hello waits for the handshake (lc_conn_tls_pull). */
    rv = tls_client_session_new(cn->c->tls, cn->host, &cn->tls);
    if (rv != 0) {
      lc_conn_fail(cn, rv, "TLS session");
      return;
    }
    char why[TLS_ERRMSG_SIZE];
    rv = tls_read(cn->tls, NULL, 0, why, sizeof why); /* the ClientHello */
    lc_conn_tls_flush(cn);
    if (rv < 0) {
      lc_conn_fail(cn, CAIRN_ETLS, why);
    }
    return;
  }
  lc_conn_send_hello(cn);
}

static void lc_conn_send_hello(struct lc_conn *cn)
{
  lc_conn_set_state(cn, LC_CONN_HELLO);
  Cairn__Client__HelloRequest hr = CAIRN__CLIENT__HELLO_REQUEST__INIT;
  hr.min_version = 1;
  hr.max_version = 1;
  hr.client_id = cn->c->client_id;
  Cairn__Client__Envelope env = CAIRN__CLIENT__ENVELOPE__INIT;
  env.api = CAIRN__CLIENT__API__API_HELLO;
  env.body_case = CAIRN__CLIENT__ENVELOPE__BODY_HELLO_REQ;
  env.hello_req = &hr;
  int rv =
      lc_conn_submit(cn, &env, NULL, 0, cn->c->opts.connect_timeout_ms, true, lc_conn_on_hello, cn);
  if (rv != 0) {
    lc_conn_fail(cn, rv, "hello");
  }
}

static void lc_conn_on_resolved(uv_getaddrinfo_t *gai, int status, struct addrinfo *res)
{
  struct lc_conn *cn = gai->data;
  cn->handles--;
  cn->gai_active = false;
  if (cn->state == LC_CONN_CLOSING) {
    uv_freeaddrinfo(res);
    lc_conn_maybe_free(cn);
    return;
  }
  if (status < 0) {
    lc_conn_fail(cn, status, "resolve");
    return;
  }
  int rv = uv_tcp_init(cn->c->loop, &cn->tcp);
  if (rv == 0) {
    cn->tcp.data = cn;
    cn->tcp_open = true;
    cn->connect_req.data = cn;
    rv = uv_tcp_connect(&cn->connect_req, &cn->tcp, res->ai_addr, lc_conn_on_connect);
  }
  uv_freeaddrinfo(res);
  if (rv != 0) {
    lc_conn_fail(cn, rv, "connect");
    return;
  }
  cn->handles++;
  lc_conn_set_state(cn, LC_CONN_CONNECTING);
}

/* Splits "host:port" / "[v6]:port" into host and port. */
static int lc_split_addr(const char *addr, char *host, size_t hostlen, char *port,
                         size_t portlen)
{
  const char *colon = strrchr(addr, ':');
  if (colon == NULL || colon[1] == '\0' || colon == addr) {
    return CAIRN_EINVAL;
  }
  const char *h = addr;
  size_t hl = (size_t)(colon - addr);
  if (h[0] == '[' && hl >= 2 && h[hl - 1] == ']') {
    h++;
    hl -= 2;
  }
  if (hl == 0 || hl >= hostlen || strlen(colon + 1) >= portlen) {
    return CAIRN_EINVAL;
  }
  memcpy(host, h, hl);
  host[hl] = '\0';
  strcpy(port, colon + 1);
  return 0;
}

int lc_conn_get(struct cairn_client *c, const char *addr, struct lc_conn **out)
{
  for (struct lc_conn *cn = c->conns; cn != NULL; cn = cn->next) {
    if (strcmp(cn->addr, addr) == 0) {
      *out = cn;
      return 0;
    }
  }
  if (c->closing) {
    return CAIRN_ECLOSED;
  }
  char host[LC_ADDR_MAX], port[16];
  int rv = lc_split_addr(addr, host, sizeof host, port, sizeof port);
  if (rv != 0) {
    return rv;
  }
  struct lc_conn *cn = calloc(1, sizeof *cn);
  if (cn == NULL) {
    return CAIRN_ENOMEM;
  }
  cn->c = c;
  lc_strlcpy(cn->addr, addr, sizeof cn->addr);
  lc_strlcpy(cn->host, host, sizeof cn->host);
  cn->max_frame_bytes = FRAME_DEFAULT_MAX_BYTES;
  lc_reader_init(&cn->rd, LC_MAX_ANSWER_BYTES);
  cn->connect_deadline_ms = lc_now(c) + c->opts.connect_timeout_ms;
  cn->gai.data = cn;
  struct addrinfo hints;
  memset(&hints, 0, sizeof hints);
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  lc_conn_set_state(cn, LC_CONN_RESOLVING);
  rv = uv_getaddrinfo(c->loop, &cn->gai, lc_conn_on_resolved, host, port, &hints);
  if (rv != 0) {
    free(cn);
    return rv;
  }
  cn->gai_active = true;
  cn->handles++;
  cn->next = c->conns;
  c->conns = cn;
  *out = cn;
  return 0;
}

int lc_conn_has_api(struct cairn_client *c, const char *addr, int api)
{
  for (struct lc_conn *cn = c->conns; cn != NULL; cn = cn->next) {
    if (strcmp(cn->addr, addr) == 0 && cn->state == LC_CONN_READY) {
      return api >= 0 && api < LC_MAX_APIS && cn->apis[api];
    }
  }
  return -1;
}

/* Finds one expired request or connection and fails it; returns whether
 * it did (callbacks may change every list, so the sweep restarts). */
static bool lc_conn_sweep_one(struct cairn_client *c, uint64_t now)
{
  for (struct lc_conn *cn = c->conns; cn != NULL; cn = cn->next) {
    if (cn->state != LC_CONN_READY && now >= cn->connect_deadline_ms) {
      lc_conn_fail(cn, UV_ETIMEDOUT, "connect or hello timed out");
      return true;
    }
    for (struct lc_req *r = cn->reqs; r != NULL; r = r->next) {
      if (now >= r->deadline_ms) {
        cn->handles++;
        lc_req_finish(cn, r, CAIRN_EREQUEST_TIMEOUT, NULL, NULL, 0, NULL);
        cn->handles--;
        lc_conn_maybe_free(cn);
        return true;
      }
    }
  }
  return false;
}

void lc_conn_sweep(struct cairn_client *c)
{
  uint64_t now = lc_now(c);
  while (lc_conn_sweep_one(c, now)) {
  }
}
