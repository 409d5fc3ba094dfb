/* conn.c - one client connection: bounded reads, frame dispatch, answers
 * written out of order as gather writes and sendfile regions. The state
 * diagram and the limits are in conn.h. */
#include "net/conn.h"

#include "common/err.h"
#include "common/log.h"
#include "net/frame.h"
#include "net/tls.h"
#include "net/tls_uv.h"
#include "net/wire_err.h"

#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sendfile.h>
#include <unistd.h>

#define CONN_LOG "conn"
#define CONN_POLL_SLICE_MS 100 /* how often a blocked sendfile checks for abort */
#define CONN_SWEEP_MIN_MS 10   /* the idle/write timeout sweep runs at most this often */

/* One answer: its header (L, E, envelope) then its parts. */
struct conn_out {
  struct conn_out *next;
  uint8_t *hdr;
  size_t hdr_len;
  bool hdr_issued;
  size_t issued;    /* parts [0, issued) have been handed to a write */
  unsigned pending; /* writes of this answer not yet completed */
  size_t nparts;
  struct conn_part parts[];
};

/* One uv_write: maybe the header, then parts [first, first + nparts). */
struct conn_write {
  uv_write_t req;
  struct conn *c;
  struct conn_out *o;
  size_t first, nparts;
  size_t bytes;
  uint8_t *cipher; /* with TLS: the encrypted bytes actually written (owned) */
  unsigned nbufs;
  uv_buf_t bufs[];
};

/* One file region sent on the thread pool. */
struct conn_sendfile {
  uv_work_t work;
  struct conn *c;
  struct conn_out *o;
  size_t part;
  int sock;
  unsigned timeout_ms;
  atomic_bool abort;
  int status;
  uint8_t *buf; /* with TLS: the region read by pread, to be encrypted (owned) */
};

static uint64_t conn_next_id = 1;

/* ---- Cairn's own framing (frame.h) ---- */

static int conn_cairn_unpack(const struct frame *f, uint64_t *correlation_id,
                             Cairn__Client__Api *api, uint32_t *api_version,
                             Cairn__Client__Envelope **env)
{
  int rv = frame_unpack_envelope(f, env);
  if (rv != 0) {
    return rv;
  }
  *correlation_id = (*env)->correlation_id;
  *api = (*env)->api;
  *api_version = (*env)->api_version;
  return 0;
}

static int conn_cairn_encode_header(uint64_t correlation_id, const Cairn__Client__Envelope *env,
                                    uint64_t payload_len, uint8_t **hdr, size_t *hdr_len)
{
  (void)correlation_id; /* already in env */
  size_t len = frame_header_size(env);
  uint8_t *buf = malloc(len);
  if (buf == NULL) {
    return CAIRN_ENOMEM;
  }
  int rv = frame_encode_header(env, payload_len, buf);
  if (rv != 0) {
    free(buf);
    return rv;
  }
  *hdr = buf;
  *hdr_len = len;
  return 0;
}

static const struct conn_framing conn_framing_cairn = {
    .name = "cairn",
    .size_field_bytes = FRAME_HEADER_SIZE,
    .decode = frame_decode,
    .unpack = conn_cairn_unpack,
    .encode_header = conn_cairn_encode_header,
    .answers_protocol_errors = true,
};

/* What a frame whose head does not unpack is called in the log. */
static const char *conn_unparsed_what(const struct conn *c)
{
  return c->lim.framing->answers_protocol_errors ? "the envelope does not parse"
                                                 : "the request header does not parse";
}

static const char *const conn_state_names[] = {
#define CONN_STATE_NAME(name) #name,
    CONN_STATE_TABLE(CONN_STATE_NAME)
#undef CONN_STATE_NAME
};

const char *conn_state_name(enum conn_state state)
{
  return conn_state_names[state];
}

void conn_limits_default(struct conn_limits *lim)
{
  lim->frame_timeout_ms = CONN_DEFAULT_FRAME_TIMEOUT_MS;
  lim->preauth_max_frame_bytes = 0;
  lim->budget = NULL;
  lim->framing = NULL;
  lim->max_frame_bytes = FRAME_DEFAULT_MAX_BYTES;
  lim->max_inflight_bytes = CONN_DEFAULT_MAX_INFLIGHT_BYTES;
  lim->max_inflight_requests = CONN_DEFAULT_MAX_INFLIGHT_REQUESTS;
  lim->max_write_queue_bytes = CONN_DEFAULT_MAX_WRITE_QUEUE_BYTES;
  lim->idle_timeout_ms = CONN_DEFAULT_IDLE_TIMEOUT_MS;
  lim->close_grace_ms = CONN_DEFAULT_CLOSE_GRACE_MS;
  lim->write_timeout_ms = CONN_DEFAULT_WRITE_TIMEOUT_MS;
}

static void conn_set_state(struct conn *c, enum conn_state state)
{
  /* Transitions only go forward: OPEN -> DRAINING -> CLOSING -> CLOSED,
   * and OPEN -> CLOSING directly. */
  assert(state > c->state);
  log_debug(CONN_LOG, "conn %" PRIu64 " %s: %s -> %s", c->id, c->peer, conn_state_name(c->state),
            conn_state_name(state));
  c->state = state;
}

static void conn_close_now(struct conn *c, int err);
static void conn_pump(struct conn *c);
static void conn_update_reading(struct conn *c);
static void conn_drain_check(struct conn *c);
static void conn_process(struct conn *c);
static void conn_on_timer(uv_timer_t *t);
static void conn_on_kick(uv_timer_t *t);
static void conn_direct_drop(struct conn *c);

/* ---- invariants (debug builds) ---- */

#ifndef NDEBUG
/* The counters agree with the lists they summarize; the read buffer and the
 * direct block are within their bounds. O(requests + answers): called after
 * each batch of work, never per byte. */
static void conn_check(const struct conn *c)
{
  uint32_t n = 0;
  uint64_t bytes = 0;
  for (const struct conn_request *r = c->reqs; r != NULL; r = r->next) {
    assert(r->c == c);
    assert(r->next == NULL || r->next->prev == r);
    n++;
    bytes += r->charge;
  }
  assert(n == c->nreqs);
  assert(bytes == c->inflight_bytes);
  uint32_t queued = 0;
  uint64_t unissued = 0;
  for (const struct conn_out *o = c->outq_head; o != NULL; o = o->next) {
    assert(o->next != NULL || o == c->outq_tail);
    queued++;
    unissued += o->hdr_issued ? 0 : o->hdr_len;
    for (size_t i = o->issued; i < o->nparts; i++) {
      unissued += o->parts[i].len;
    }
  }
  assert(queued <= c->nouts);
  assert(unissued <= c->write_queue_bytes);
  assert(c->rstart <= c->rend && c->rend <= c->rcap);
  assert(c->rbuf == NULL ? c->rcap == 0 : c->rcap == CONN_READ_BUF_INITIAL);
  assert(c->direct == NULL || (c->direct_have < c->direct_size &&
                               c->direct_size <= CONN_READ_BUF_LIMIT(c->lim.max_frame_bytes)));
  assert(c->state != CONN_CLOSED);
}
#else
static void conn_check(const struct conn *c)
{
  (void)c;
}
#endif

/* ---- freeing ---- */

static void conn_maybe_free(struct conn *c)
{
  conn_check(c);
  if (c->state != CONN_CLOSING || c->busy > 0 || c->handles_open > 0 || c->nreqs > 0 ||
      c->nouts > 0 || c->sf != NULL) {
    return;
  }
  conn_set_state(c, CONN_CLOSED);
  if (c->closed_cb != NULL) {
    c->closed_cb(c);
  }
  if (c->auth != NULL && c->auth_free != NULL) {
    c->auth_free(c->auth);
  }
  tls_session_free(c->tls);
  free(c->tls_in);
  free(c->rbuf);
  free(c);
}

static void conn_on_handle_closed(uv_handle_t *h)
{
  struct conn *c = h->data;
  c->handles_open--;
  conn_maybe_free(c);
}

static void conn_close_handles(struct conn *c)
{
  /* The worker still uses the socket while a sendfile runs: close after it. */
  if (c->handles_closing || c->sf != NULL) {
    return;
  }
  c->handles_closing = true;
  uv_close((uv_handle_t *)&c->tcp, conn_on_handle_closed);
  uv_close((uv_handle_t *)&c->timer, conn_on_handle_closed);
  uv_close((uv_handle_t *)&c->kick, conn_on_handle_closed);
}

/* ---- the write side ---- */

static void conn_part_release(struct conn_part *p, int status)
{
  if (p->release != NULL) {
    conn_release_cb cb = p->release;
    p->release = NULL;
    cb(p->arg, status);
  }
}

static void conn_out_free(struct conn *c, struct conn_out *o)
{
  free(o->hdr);
  free(o);
  c->nouts--;
}

/* An answer whose parts are all issued and whose writes all completed. */
static void conn_out_done_check(struct conn *c, struct conn_out *o)
{
  if (o->issued == o->nparts && o->hdr_issued && o->pending == 0) {
    conn_out_free(c, o);
    c->responses++;
  }
}

static void conn_outq_pop(struct conn *c)
{
  struct conn_out *o = c->outq_head;
  c->outq_head = o->next;
  if (c->outq_head == NULL) {
    c->outq_tail = NULL;
  }
  o->next = NULL;
}

static uint64_t conn_out_unissued_bytes(const struct conn_out *o)
{
  uint64_t n = o->hdr_issued ? 0 : o->hdr_len;
  for (size_t i = o->issued; i < o->nparts; i++) {
    n += o->parts[i].len;
  }
  return n;
}

/* Drops every answer not yet fully issued (the conn is closing). */
static void conn_outq_drop(struct conn *c, int status)
{
  while (c->outq_head != NULL) {
    struct conn_out *o = c->outq_head;
    conn_outq_pop(c);
    c->write_queue_bytes -= conn_out_unissued_bytes(o);
    for (size_t i = o->issued; i < o->nparts; i++) {
      conn_part_release(&o->parts[i], status);
    }
    o->issued = o->nparts;
    o->hdr_issued = true;
    if (o->pending == 0) {
      conn_out_free(c, o);
    }
  }
}

/* what: NULL for a uv_write, else a description of the file region. */
static void conn_after_write_progress(struct conn *c, size_t bytes, int status, const char *what)
{
  c->write_queue_bytes -= bytes;
  if (status != 0) {
    if (c->state < CONN_CLOSING) {
      snprintf(c->errmsg, sizeof c->errmsg, "%s: %s", what != NULL ? what : "write",
               status == CAIRN_ETRUNCATED ? "the file ends before the region"
                                          : cairn_strerror(status));
      log_info(CONN_LOG, "conn %" PRIu64 " %s: %s", c->id, c->peer, c->errmsg);
    }
    conn_close_now(c, status);
  } else {
    c->last_activity_ms = c->last_write_ms = uv_now(c->loop);
  }
  conn_pump(c);
  conn_update_reading(c);
  conn_drain_check(c);
}

/* ---- TLS glue ---- */

/* Writes whatever ciphertext the session produced on its own (handshake,
 * alerts, close_notify), not part of any answer, in the order it was made
 * (every producer of ciphertext calls this or takes it at once). */
static void conn_tls_flush(struct conn *c)
{
  if (!c->handles_closing) {
    /* A failure: the peer times out the handshake; a close follows. */
    (void)tls_uv_flush(c->tls, (uv_stream_t *)&c->tcp);
  }
}

/* Encrypts w's plaintext buffers into w->cipher and points w's single
 * buffer at it. Returns 0 or a negative code. */
static int conn_tls_seal(struct conn *c, struct conn_write *w)
{
  for (unsigned i = 0; i < w->nbufs; i++) {
    int rv = tls_write(c->tls, (const uint8_t *)w->bufs[i].base, w->bufs[i].len);
    if (rv != 0) {
      return rv;
    }
  }
  size_t n = tls_out_pending(c->tls);
  w->cipher = malloc(n > 0 ? n : 1);
  if (w->cipher == NULL) {
    return CAIRN_ENOMEM;
  }
  n = tls_take_out(c->tls, w->cipher, n);
  w->bufs[0] = uv_buf_init((char *)w->cipher, (unsigned)n);
  w->nbufs = 1;
  return 0;
}

static void conn_on_write(uv_write_t *req, int status)
{
  struct conn_write *w = (struct conn_write *)req;
  struct conn *c = w->c;
  struct conn_out *o = w->o;
  c->busy++;
  for (size_t i = w->first; i < w->first + w->nparts; i++) {
    conn_part_release(&o->parts[i], status);
  }
  size_t bytes = w->bytes;
  free(w->cipher);
  free(w);
  c->writes_pending--;
  o->pending--;
  conn_out_done_check(c, o);
  conn_after_write_progress(c, bytes, status, NULL);
  c->busy--;
  conn_maybe_free(c);
}

static void conn_sendfile_work(uv_work_t *work)
{
  /* Thread pool: touches only the socket, the file and this struct. */
  struct conn_sendfile *sf = (struct conn_sendfile *)work;
  const struct conn_part *p = &sf->o->parts[sf->part];
  off_t off = (off_t)p->offset;
  size_t left = p->len;
  unsigned waited = 0;
  sf->status = 0;
  if (sf->buf != NULL) {
    /* TLS: read the region; the loop thread encrypts it. */
    size_t got = 0;
    while (got < p->len) {
      if (atomic_load(&sf->abort)) {
        sf->status = UV_ECANCELED;
        return;
      }
      ssize_t n = pread(p->fd, sf->buf + got, p->len - got, off + (off_t)got);
      if (n < 0 && errno == EINTR) {
        continue;
      }
      if (n < 0) {
        sf->status = -errno;
        return;
      }
      if (n == 0) {
        sf->status = CAIRN_ETRUNCATED;
        return;
      }
      got += (size_t)n;
    }
    return;
  }
  while (left > 0) {
    if (atomic_load(&sf->abort)) {
      sf->status = UV_ECANCELED;
      return;
    }
    ssize_t n = sendfile(sf->sock, p->fd, &off, left);
    if (n > 0) {
      left -= (size_t)n;
      waited = 0;
      continue;
    }
    if (n == 0) {
      sf->status = CAIRN_ETRUNCATED; /* the file is shorter than the region */
      return;
    }
    if (errno == EINTR) {
      continue;
    }
    if (errno != EAGAIN) {
      sf->status = -errno;
      return;
    }
    /* The socket is full: wait for room, a slice at a time, so a close can
     * abort us and a peer that never reads times out. */
    if (waited >= sf->timeout_ms) {
      sf->status = -ETIMEDOUT;
      return;
    }
    struct pollfd pfd = {.fd = sf->sock, .events = POLLOUT};
    int pr = poll(&pfd, 1, CONN_POLL_SLICE_MS);
    if (pr == 0) {
      waited += CONN_POLL_SLICE_MS;
    } else if (pr < 0 && errno != EINTR) {
      sf->status = -errno;
      return;
    }
  }
}

static void conn_sendfile_after(uv_work_t *work, int status)
{
  struct conn_sendfile *sf = (struct conn_sendfile *)work;
  struct conn *c = sf->c;
  struct conn_out *o = sf->o;
  int rv = status != 0 ? status : sf->status;
  size_t bytes = o->parts[sf->part].len;
  char what[96];
  snprintf(what, sizeof what, "sendfile of %zu bytes at %lld of fd %d", bytes,
           (long long)o->parts[sf->part].offset, o->parts[sf->part].fd);
  c->busy++;
  if (sf->buf != NULL && rv == 0 && c->state < CONN_CLOSING) {
    /* TLS: encrypt the region and write it; the write's callback releases
     * the part and counts the bytes, as for a memory part. */
    struct conn_write *w = calloc(1, sizeof *w + sizeof(uv_buf_t));
    rv = CAIRN_ENOMEM;
    if (w != NULL) {
      w->c = c;
      w->o = o;
      w->first = sf->part;
      w->nparts = 1;
      w->bytes = bytes;
      w->bufs[0] = uv_buf_init((char *)sf->buf, (unsigned)bytes);
      w->nbufs = 1;
      rv = conn_tls_seal(c, w);
      if (rv == 0) {
        rv = uv_write(&w->req, (uv_stream_t *)&c->tcp, w->bufs, w->nbufs, conn_on_write);
      }
      if (rv != 0) {
        free(w->cipher);
        free(w);
      }
    }
    free(sf->buf);
    sf->buf = NULL;
    if (rv == 0) {
      c->sf = NULL;
      free(sf);
      c->writes_pending++; /* o->pending passes from the region to the write */
      conn_pump(c);
      conn_update_reading(c);
      conn_drain_check(c);
      c->busy--;
      conn_maybe_free(c);
      return;
    }
    snprintf(what, sizeof what, "encrypting a file region of %zu bytes", bytes);
  }
  free(sf->buf);
  conn_part_release(&o->parts[sf->part], rv);
  c->sf = NULL;
  free(sf);
  o->pending--;
  conn_out_done_check(c, o);
  if (c->state == CONN_CLOSING) {
    conn_close_handles(c);
  }
  conn_after_write_progress(c, bytes, rv, what);
  c->busy--;
  conn_maybe_free(c);
}

/* Issues what can be issued from the head of the queue: memory parts as
 * uv_writes (libuv keeps their order), a file part once the writes before
 * it have completed, one at a time. */
static void conn_pump(struct conn *c)
{
  while (c->outq_head != NULL && c->sf == NULL && c->state < CONN_CLOSING) {
    struct conn_out *o = c->outq_head;
    size_t first = o->issued;
    size_t end = first;
    while (end < o->nparts && o->parts[end].kind == CONN_PART_MEM) {
      end++;
    }
    unsigned nbufs = (unsigned)(end - first) + (o->hdr_issued ? 0 : 1);
    if (nbufs > 0) {
      struct conn_write *w = malloc(sizeof *w + nbufs * sizeof(uv_buf_t));
      if (w == NULL) {
        snprintf(c->errmsg, sizeof c->errmsg, "out of memory for a write");
        conn_close_now(c, CAIRN_ENOMEM);
        return;
      }
      w->c = c;
      w->o = o;
      w->first = first;
      w->nparts = end - first;
      w->bytes = 0;
      w->cipher = NULL;
      w->nbufs = 0;
      if (!o->hdr_issued) {
        w->bufs[w->nbufs++] = uv_buf_init((char *)o->hdr, (unsigned)o->hdr_len);
        w->bytes += o->hdr_len;
      }
      for (size_t i = first; i < end; i++) {
        w->bufs[w->nbufs++] = uv_buf_init((char *)o->parts[i].base, (unsigned)o->parts[i].len);
        w->bytes += o->parts[i].len;
      }
      int rv = c->tls != NULL ? conn_tls_seal(c, w) : 0;
      if (rv == 0) {
        rv = uv_write(&w->req, (uv_stream_t *)&c->tcp, w->bufs, w->nbufs, conn_on_write);
      }
      if (rv != 0) {
        free(w->cipher);
        free(w);
        snprintf(c->errmsg, sizeof c->errmsg, "write: %s", cairn_strerror(rv));
        conn_close_now(c, rv);
        return;
      }
      o->hdr_issued = true;
      o->issued = end;
      o->pending++;
      c->writes_pending++;
    }
    if (o->issued < o->nparts) {
      /* A file part: the socket must carry everything before it first. */
      if (c->writes_pending > 0) {
        return;
      }
      struct conn_sendfile *sf = calloc(1, sizeof *sf);
      uv_os_fd_t sock;
      if (sf == NULL || uv_fileno((uv_handle_t *)&c->tcp, &sock) != 0) {
        free(sf);
        snprintf(c->errmsg, sizeof c->errmsg, "cannot start a sendfile");
        conn_close_now(c, CAIRN_ENOMEM);
        return;
      }
      sf->c = c;
      sf->o = o;
      sf->part = o->issued;
      sf->sock = sock;
      sf->timeout_ms = c->lim.write_timeout_ms;
      atomic_init(&sf->abort, false);
      if (c->tls != NULL) {
        /* No sendfile through TLS: the region is read, then encrypted. */
        sf->buf = malloc(o->parts[o->issued].len > 0 ? o->parts[o->issued].len : 1);
        if (sf->buf == NULL) {
          free(sf);
          snprintf(c->errmsg, sizeof c->errmsg, "no memory to read a file region for TLS");
          conn_close_now(c, CAIRN_ENOMEM);
          return;
        }
      }
      int rv = uv_queue_work(c->loop, &sf->work, conn_sendfile_work, conn_sendfile_after);
      if (rv != 0) {
        free(sf->buf);
        free(sf);
        conn_close_now(c, rv);
        return;
      }
      c->sf = sf;
      o->issued++;
      o->pending++;
    }
    if (o->issued == o->nparts) {
      conn_outq_pop(c);
      conn_out_done_check(c, o);
    }
  }
}

/* Queues one answer; returns its bytes (0 when it could not be encoded). */
static uint64_t conn_enqueue(struct conn *c, uint64_t correlation_id, Cairn__Client__Envelope *e,
                             const struct conn_part *parts, size_t nparts)
{
  uint64_t payload = 0;
  for (size_t i = 0; i < nparts; i++) {
    payload += parts[i].len;
  }
  struct conn_out *o = malloc(sizeof *o + nparts * sizeof *parts);
  size_t hdr_len = 0;
  uint8_t *hdr = NULL;
  int rv = o == NULL ? CAIRN_ENOMEM
                     : c->lim.framing->encode_header(correlation_id, e, payload, &hdr, &hdr_len);
  if (rv != 0) {
    free(o);
    free(hdr);
    for (size_t i = 0; i < nparts; i++) {
      struct conn_part p = parts[i];
      conn_part_release(&p, rv);
    }
    snprintf(c->errmsg, sizeof c->errmsg, "encoding an answer of %" PRIu64 " payload bytes: %s",
             payload, cairn_strerror(rv));
    log_warn(CONN_LOG, "conn %" PRIu64 " %s: %s", c->id, c->peer, c->errmsg);
    conn_close_now(c, rv);
    return 0;
  }
  o->next = NULL;
  o->hdr = hdr;
  o->hdr_len = hdr_len;
  o->hdr_issued = false;
  o->issued = 0;
  o->pending = 0;
  o->nparts = nparts;
  if (nparts > 0) {
    memcpy(o->parts, parts, nparts * sizeof *parts);
  }
  if (c->outq_tail != NULL) {
    c->outq_tail->next = o;
  } else {
    c->outq_head = o;
  }
  c->outq_tail = o;
  if (c->nouts == 0) {
    c->last_write_ms = uv_now(c->loop); /* the write clock starts now */
  }
  c->nouts++;
  c->write_queue_bytes += hdr_len + payload;
  if (c->write_queue_bytes > c->peak_write_queue_bytes) {
    c->peak_write_queue_bytes = c->write_queue_bytes;
  }
  conn_pump(c);
  return hdr_len + payload;
}

/* ---- requests ---- */

static void conn_request_unlink(struct conn *c, struct conn_request *req)
{
  if (req->prev != NULL) {
    req->prev->next = req->next;
  } else {
    c->reqs = req->next;
  }
  if (req->next != NULL) {
    req->next->prev = req->prev;
  }
  c->nreqs--;
  if (req->alone) {
    c->alone_running = false;
  }
  c->inflight_bytes -= req->charge;
  if (c->lim.budget != NULL) {
    rbudget_release(c->lim.budget, req->charge);
  }
}

static void conn_request_free(struct conn_request *req)
{
  if (req->relay == NULL && req->env != NULL) {
    cairn__client__envelope__free_unpacked(req->env, NULL); /* a relayed one's is borrowed */
  }
  free(req);
}

void conn_request_set_cancel(struct conn_request *req, conn_cancel_cb cb)
{
  req->cancel_cb = cb;
}

/* A relayed request's answer goes to its front-end, not to the socket. */
static void conn_respond_relay(struct conn_request *req, const Cairn__Client__Envelope *env,
                               const struct conn_part *parts, size_t nparts)
{
  conn_relay_cb cb = req->relay;
  cb(req, env, parts, nparts);
  conn_request_free(req);
}

/* ---- answers in request order (conn_framing.ordered_answers) ---- */

/* Whether req's answer (parts, or none when unanswered) must wait for an
 * earlier request's: then it is held with req, which stays linked (its
 * in-flight charge too), and true is returned. */
static bool conn_hold_answer(struct conn *c, struct conn_request *req,
                             const struct conn_part *parts, size_t nparts, bool unanswered)
{
  if (!c->lim.framing->ordered_answers || req->seq == c->next_answer_seq || req->canceled ||
      c->state >= CONN_CLOSING) {
    return false;
  }
  req->held = true;
  req->held_unanswered = unanswered;
  if (nparts == 0) {
    return true;
  }
  req->held_parts = malloc(nparts * sizeof *req->held_parts);
  if (req->held_parts == NULL) {
    /* The answer is lost: later answers would reach the client as this
     * one's. Nothing is sent in its place; the conn closes. */
    for (size_t i = 0; i < nparts; i++) {
      struct conn_part p = parts[i];
      conn_part_release(&p, CAIRN_ENOMEM);
    }
    req->held_unanswered = true;
    snprintf(c->errmsg, sizeof c->errmsg, "out of memory holding an answer");
    conn_close(c);
    return true;
  }
  memcpy(req->held_parts, parts, nparts * sizeof *parts);
  req->held_n = nparts;
  return true;
}

/* Frees a held request: its answer goes out (status 0) or is released
 * with status. */
static void conn_send_held(struct conn *c, struct conn_request *req, int status)
{
  conn_request_unlink(c, req);
  for (size_t i = 0; i < req->held_n; i++) {
    if (status == 0 && !req->held_unanswered && c->state < CONN_CLOSING) {
      continue; /* enqueued below */
    }
    conn_part_release(&req->held_parts[i], status != 0 ? status : CAIRN_ECLOSED);
  }
  if (status == 0 && !req->held_unanswered && c->state < CONN_CLOSING) {
    (void)conn_enqueue(c, req->correlation_id, NULL, req->held_parts, req->held_n);
  }
  free(req->held_parts);
  conn_request_free(req);
}

/* The request with seq finished: the answers held behind it go out, in
 * order, up to the first request still unanswered. */
static void conn_advance_answers(struct conn *c, uint64_t seq)
{
  /* Closing: conn_cancel_requests frees the held requests. */
  if (!c->lim.framing->ordered_answers || seq != c->next_answer_seq || c->state >= CONN_CLOSING) {
    return;
  }
  c->next_answer_seq++;
  for (;;) {
    struct conn_request *r = c->reqs;
    while (r != NULL && r->seq != c->next_answer_seq) {
      r = r->next;
    }
    if (r == NULL || !r->held) {
      return;
    }
    c->next_answer_seq++;
    conn_send_held(c, r, 0);
  }
}

void conn_respond(struct conn_request *req, const Cairn__Client__Envelope *env,
                  const struct conn_part *parts, size_t nparts)
{
  if (req->relay != NULL) {
    conn_respond_relay(req, env, parts, nparts);
    return;
  }
  struct conn *c = req->c;
  /* An ordered framing has no envelopes: its answers are bytes. */
  assert(env == NULL || !c->lim.framing->ordered_answers);
  if (conn_hold_answer(c, req, parts, nparts, false)) {
    return;
  }
  uint64_t seq = req->seq;
  c->busy++;
  conn_request_unlink(c, req);
  uint64_t bytes = 0;
  if (req->canceled || c->state >= CONN_CLOSING) {
    for (size_t i = 0; i < nparts; i++) {
      struct conn_part p = parts[i];
      conn_part_release(&p, CAIRN_ECLOSED);
    }
  } else if (env == NULL) {
    bytes = conn_enqueue(c, req->correlation_id, NULL, parts, nparts);
  } else {
    Cairn__Client__Envelope e = *env; /* shallow: only packed, never freed */
    e.correlation_id = req->correlation_id;
    e.api = req->api;
    bytes = conn_enqueue(c, req->correlation_id, &e, parts, nparts);
  }
  if (c->answered != NULL && env != NULL) {
    c->answered(req, env, bytes, c->data);
  }
  conn_request_free(req);
  conn_advance_answers(c, seq);
  c->busy--;
  conn_update_reading(c);
  conn_drain_check(c);
  conn_maybe_free(c);
}

void conn_respond_error(struct conn_request *req, Cairn__Client__ErrorCode code,
                        const char *message)
{
  Cairn__Client__Error err = CAIRN__CLIENT__ERROR__INIT;
  err.code = code;
  err.message = (char *)(message != NULL ? message : "");
  Cairn__Client__Envelope env = CAIRN__CLIENT__ENVELOPE__INIT;
  env.body_case = CAIRN__CLIENT__ENVELOPE__BODY_ERROR_RESP;
  env.error_resp = &err;
  conn_respond(req, &env, NULL, 0);
}

void conn_respond_bytes(struct conn_request *req, const struct conn_part *parts, size_t nparts)
{
  conn_respond(req, NULL, parts, nparts);
}

void conn_finish_unanswered(struct conn_request *req)
{
  struct conn *c = req->c;
  if (conn_hold_answer(c, req, NULL, 0, true)) {
    return;
  }
  uint64_t seq = req->seq;
  c->busy++;
  conn_request_unlink(c, req);
  conn_request_free(req);
  conn_advance_answers(c, seq);
  c->busy--;
  conn_update_reading(c);
  conn_drain_check(c);
  conn_maybe_free(c);
}

struct conn_request *conn_request_relay(struct conn *c, Cairn__Client__Api api,
                                        Cairn__Client__Envelope *env, const uint8_t *payload,
                                        size_t payload_len, conn_relay_cb cb, void *data)
{
  struct conn_request *req = calloc(1, sizeof *req);
  if (req == NULL) {
    return NULL;
  }
  req->c = c;
  req->api = api;
  req->api_version = 1;
  req->env = env;
  req->payload = payload;
  req->payload_len = payload_len;
  req->arrival_ns = uv_hrtime();
  req->relay = cb;
  req->relay_data = data;
  return req;
}

void conn_request_cancel(struct conn_request *req)
{
  if (req->canceled) {
    return;
  }
  req->canceled = true;
  if (req->cancel_cb != NULL) {
    req->cancel_cb(req);
  }
}

/* Cancels every unanswered request; the handlers finish them later. */
static void conn_cancel_requests(struct conn *c)
{
  struct conn_request *req = c->reqs;
  while (req != NULL) {
    /* The cancel callback may finish req (conn_respond frees it). */
    struct conn_request *next = req->next;
    if (req == c->waiting_alone) {
      c->waiting_alone = NULL; /* never dispatched: no handler to tell */
      conn_request_unlink(c, req);
      conn_request_free(req);
    } else if (req->held) {
      conn_send_held(c, req, CAIRN_ECLOSED); /* answered already: nothing to cancel */
    } else if (!req->canceled) {
      req->canceled = true;
      if (req->cancel_cb != NULL) {
        req->cancel_cb(req);
      }
    }
    req = next;
  }
}

/* ---- closing ---- */

static void conn_close_now(struct conn *c, int err)
{
  if (c->state >= CONN_CLOSING) {
    return;
  }
  c->busy++;
  conn_set_state(c, CONN_CLOSING);
  if (c->reading) {
    uv_read_stop((uv_stream_t *)&c->tcp);
    c->reading = false;
  }
  uv_timer_stop(&c->timer);
  uv_timer_stop(&c->kick);
  conn_direct_drop(c);
  if (c->sf != NULL) {
    atomic_store(&c->sf->abort, true);
  }
  conn_outq_drop(c, CAIRN_ECLOSED);
  conn_cancel_requests(c);
  conn_close_handles(c);
  c->busy--;
  conn_maybe_free(c);
}

static void conn_on_shutdown(uv_shutdown_t *req, int status)
{
  struct conn *c = req->data;
  if (status == 0 && c->peer_eof) {
    conn_close_now(c, 0);
  }
  /* Otherwise the peer's EOF or the grace timer closes. */
}

/* DRAINING: once nothing is owed to the peer, send FIN and close when the
 * peer has closed its side too. */
static void conn_drain_check(struct conn *c)
{
  if (c->state != CONN_DRAINING || c->nreqs > 0 || c->nouts > 0 || c->sf != NULL) {
    return;
  }
  if (c->peer_eof && c->shutdown_sent) {
    conn_close_now(c, 0);
    return;
  }
  if (!c->shutdown_sent) {
    c->shutdown_sent = true;
    if (c->tls != NULL) {
      tls_shutdown(c->tls);
      conn_tls_flush(c);
    }
    c->shutdown_req.data = c;
    if (uv_shutdown(&c->shutdown_req, (uv_stream_t *)&c->tcp, conn_on_shutdown) != 0) {
      conn_close_now(c, 0);
    }
  }
}

static void conn_start_draining(struct conn *c)
{
  if (c->state != CONN_OPEN) {
    return;
  }
  conn_set_state(c, CONN_DRAINING);
  uv_timer_stop(&c->kick);
  uv_timer_start(&c->timer, conn_on_timer, c->lim.close_grace_ms, 0);
  c->rstart = c->rend = 0; /* nothing more is dispatched */
  conn_direct_drop(c);
  conn_update_reading(c);
  conn_drain_check(c);
}

void conn_close(struct conn *c)
{
  c->busy++;
  conn_start_draining(c);
  c->busy--;
  conn_maybe_free(c);
}

/* Answers a frame that cannot be handled with error_resp (correlation id 0
 * when unknown), logs one line, and drains. */
static void conn_protocol_error(struct conn *c, int err, uint64_t correlation_id, const char *what)
{
  Cairn__Client__ErrorCode code = wire_err_from(err);
  if (!c->lim.framing->answers_protocol_errors) {
    snprintf(c->errmsg, sizeof c->errmsg, "%s (%s): closing", what, cairn_errname(err));
    log_warn(CONN_LOG, "conn %" PRIu64 " %s (%s): %s", c->id, c->peer, c->lim.framing->name,
             c->errmsg);
    conn_start_draining(c);
    return;
  }
  snprintf(c->errmsg, sizeof c->errmsg, "%s (%s): answered %s and closing", what,
           cairn_errname(err), wire_err_name(code));
  log_warn(CONN_LOG, "conn %" PRIu64 " %s: %s", c->id, c->peer, c->errmsg);
  Cairn__Client__Error e = CAIRN__CLIENT__ERROR__INIT;
  e.code = code;
  e.message = (char *)what;
  Cairn__Client__Envelope env = CAIRN__CLIENT__ENVELOPE__INIT;
  env.correlation_id = correlation_id;
  env.body_case = CAIRN__CLIENT__ENVELOPE__BODY_ERROR_RESP;
  env.error_resp = &e;
  conn_enqueue(c, correlation_id, &env, NULL, 0);
  conn_start_draining(c);
}

/* ---- the read side ---- */

static bool conn_under_limits(const struct conn *c)
{
  return c->inflight_bytes < c->lim.max_inflight_bytes && c->nreqs < c->lim.max_inflight_requests &&
         c->waiting_alone == NULL && !c->alone_running &&
         c->write_queue_bytes < c->lim.max_write_queue_bytes && !c->budget_blocked &&
         (c->lim.budget == NULL || !rbudget_over(c->lim.budget));
}

/* The shared budget made room: try again from the kick timer (never from
 * the releasing caller's stack). */
static void conn_on_budget(struct rbudget_waiter *w)
{
  struct conn *c = (struct conn *)((char *)w - offsetof(struct conn, bwait));
  c->budget_blocked = false;
  if (c->state == CONN_OPEN && !uv_is_active((uv_handle_t *)&c->kick)) {
    uv_timer_start(&c->kick, conn_on_kick, 0, 0);
  }
}

/* Stops reading until the shared budget can grant need bytes (0: until
 * it is no longer over) (conn_on_budget). */
static void conn_budget_block(struct conn *c, uint64_t need)
{
  c->budget_blocked = true;
  c->frame_since_ms = 0; /* waiting is not trickling */
  rbudget_wait(c->lim.budget, &c->bwait, need);
}

/* Gives back a grant the conn did not use. */
static void conn_budget_return(struct conn *c)
{
  if (c->lim.budget != NULL) {
    rbudget_cancel(c->lim.budget, &c->bwait);
    uint64_t g = c->bwait.granted;
    c->bwait.granted = 0;
    c->budget_blocked = false;
    if (g > 0) {
      rbudget_release(c->lim.budget, g);
    }
  }
}

/* The frame bound now: smaller before authentication when so set. */
static uint32_t conn_max_frame(const struct conn *c)
{
  if (c->lim.preauth_max_frame_bytes != 0 && c->principal[0] == '\0' &&
      c->lim.preauth_max_frame_bytes < c->lim.max_frame_bytes) {
    return c->lim.preauth_max_frame_bytes;
  }
  return c->lim.max_frame_bytes;
}

/* Where the next plaintext bytes go: a large frame's block, or rbuf. */
static void conn_plain_target(struct conn *c, uv_buf_t *buf)
{
  if (c->direct != NULL) {
    /* A large frame is read straight into its request's block, never past
     * its end. */
    uint8_t *frame = (uint8_t *)(c->direct + 1);
    *buf = uv_buf_init((char *)frame + c->direct_have, (unsigned)(c->direct_size - c->direct_have));
    return;
  }
  if (c->rbuf == NULL) {
    /* Freed while the conn was idle (conn_on_timer). On failure libuv
     * reports UV_ENOBUFS to conn_on_read, which closes. */
    c->rbuf = malloc(CONN_READ_BUF_INITIAL);
    c->rcap = c->rbuf != NULL ? CONN_READ_BUF_INITIAL : 0;
    c->rstart = c->rend = 0;
  }
  if (c->state != CONN_OPEN) {
    c->rstart = c->rend = 0; /* draining: read to discard */
  } else if (c->rend == c->rcap && c->rstart > 0) {
    memmove(c->rbuf, c->rbuf + c->rstart, c->rend - c->rstart);
    c->rend -= c->rstart;
    c->rstart = 0;
  }
  *buf = uv_buf_init((char *)c->rbuf + c->rend, (unsigned)(c->rcap - c->rend));
}

static void conn_on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
  struct conn *c = h->data;
  if (c->tls != NULL) {
    /* Ciphertext: at most one buffer per read, so what waits inside the
     * session while reading is paused stays bounded. */
    tls_uv_in_buf(&c->tls_in, buf);
    return;
  }
  conn_plain_target(c, buf);
}

static void conn_direct_drop(struct conn *c)
{
  if (c->direct != NULL && c->lim.budget != NULL) {
    rbudget_release(c->lim.budget, c->direct_size);
  }
  conn_budget_return(c);
  free(c->direct);
  c->direct = NULL;
  c->direct_size = c->direct_have = 0;
}

/* Links req (its payload in place) and hands it to the handler. */
/* What the framing read from a frame's head. */
struct conn_head {
  uint64_t correlation_id;
  Cairn__Client__Api api;
  uint32_t api_version;
  Cairn__Client__Envelope *env; /* NULL for a framing without envelopes */
};

static void conn_dispatch_request(struct conn *c, struct conn_request *req,
                                  const struct conn_head *h, const uint8_t *payload,
                                  size_t payload_len, size_t frame_size, bool charged)
{
  if (c->lim.budget != NULL && !charged) {
    rbudget_force(c->lim.budget, frame_size); /* already in memory: charged as it is */
  }
  memset(req, 0, sizeof *req);
  req->c = c;
  req->correlation_id = h->correlation_id;
  req->api = h->api;
  req->api_version = h->api_version;
  req->env = h->env;
  req->payload = payload;
  req->payload_len = payload_len;
  req->charge = frame_size;
  req->arrival_ns = uv_hrtime();
  req->seq = c->next_seq++;
  req->next = c->reqs;
  if (c->reqs != NULL) {
    c->reqs->prev = req;
  }
  c->reqs = req;
  c->nreqs++;
  c->inflight_bytes += req->charge;
  if (c->inflight_bytes > c->peak_inflight_bytes) {
    c->peak_inflight_bytes = c->inflight_bytes;
  }
  c->requests++;
  if (c->lim.framing->runs_alone != NULL && c->lim.framing->runs_alone(req)) {
    if (c->nreqs > 1) {
      c->waiting_alone = req; /* dispatched by conn_start_waiting */
      return;
    }
    req->alone = true;
    c->alone_running = true;
  }
  c->dispatch(req, c->data);
}

/* The request waiting to run alone: once it is the conn's only one, it is
 * dispatched from the kick timer (from_kick), never on the stack of the
 * conn_respond() that finished the last earlier request: that answer may
 * come from inside a Raft callback (a partition's leader stepping down
 * fails its proposals), where the next handler would read the group's
 * state half changed. Dropped unanswered when the conn stops serving. */
static void conn_start_waiting(struct conn *c, bool from_kick)
{
  struct conn_request *req = c->waiting_alone;
  if (req == NULL || (c->state == CONN_OPEN && c->nreqs > 1)) {
    return;
  }
  if (c->state == CONN_OPEN && !from_kick) {
    if (!uv_is_active((uv_handle_t *)&c->kick)) {
      uv_timer_start(&c->kick, conn_on_kick, 0, 0);
    }
    return;
  }
  c->waiting_alone = NULL;
  if (c->state != CONN_OPEN) {
    conn_request_unlink(c, req);
    conn_request_free(req);
    return;
  }
  req->alone = true;
  c->alone_running = true;
  c->busy++;
  c->dispatch(req, c->data);
  c->busy--;
}

/* A whole frame in rbuf: its payload is copied into the request (small
 * frames only: at most CONN_READ_BUF_INITIAL bytes). */
static int conn_dispatch_buffered(struct conn *c, const struct frame *f)
{
  struct conn_head h = {0};
  int rv = c->lim.framing->unpack(f, &h.correlation_id, &h.api, &h.api_version, &h.env);
  if (rv != 0) {
    return rv;
  }
  struct conn_request *req = malloc(sizeof *req + f->payload_len);
  if (req == NULL) {
    if (h.env != NULL) {
      cairn__client__envelope__free_unpacked(h.env, NULL);
    }
    return CAIRN_ENOMEM;
  }
  uint8_t *copy = (uint8_t *)(req + 1);
  if (f->payload_len > 0) {
    memcpy(copy, f->payload, f->payload_len);
  }
  /* Consumed before the handler runs: it may close the conn. */
  c->rstart += f->size;
  conn_dispatch_request(c, req, &h, copy, f->payload_len, f->size, false);
  return 0;
}

/* The direct block is full: dispatch it, the payload left in place. */
static int conn_dispatch_direct(struct conn *c)
{
  struct conn_request *req = c->direct;
  const uint8_t *frame = (const uint8_t *)(req + 1);
  struct frame f;
  int rv = c->lim.framing->decode(frame, c->direct_size, FRAME_MAX_BYTES_LIMIT, &f);
  assert(rv == FRAME_WHOLE); /* its header was checked before the block was made */
  struct conn_head h = {0};
  rv = c->lim.framing->unpack(&f, &h.correlation_id, &h.api, &h.api_version, &h.env);
  size_t size = c->direct_size;
  c->direct = NULL; /* the request owns the block from here, or it is freed */
  c->direct_size = c->direct_have = 0;
  if (rv != 0) {
    free(req);
    return rv;
  }
  conn_dispatch_request(c, req, &h, f.payload, f.payload_len, size, c->lim.budget != NULL);
  return 0;
}

/* Moves the start of a large frame (header checked, f->size bytes in all)
 * out of rbuf into a block that will become its request, and reads the
 * rest there: no copy of the payload, and rbuf never grows. */
static int conn_direct_start(struct conn *c, size_t frame_size)
{
  assert(frame_size <= CONN_READ_BUF_LIMIT(c->lim.max_frame_bytes));
  if (c->lim.budget != NULL) {
    if (c->bwait.granted == frame_size) {
      c->bwait.granted = 0; /* reserved for this frame when the conn was woken */
    } else {
      conn_budget_return(c);
      if (!rbudget_take(c->lim.budget, frame_size)) {
        conn_budget_block(c, frame_size);
        return UV_EAGAIN;
      }
    }
  }
  struct conn_request *block = malloc(sizeof *block + frame_size);
  if (block == NULL) {
    if (c->lim.budget != NULL) {
      rbudget_release(c->lim.budget, frame_size);
    }
    return CAIRN_ENOMEM;
  }
  size_t have = c->rend - c->rstart;
  memcpy(block + 1, c->rbuf + c->rstart, have);
  c->rstart = c->rend = 0;
  c->direct = block;
  c->direct_size = frame_size;
  c->direct_have = have;
  if (frame_size > c->peak_rbuf) {
    c->peak_rbuf = frame_size;
  }
  return 0;
}

/* Dispatches the whole frames in the buffer while the limits allow. */
static void conn_process(struct conn *c)
{
  c->busy++;
  while (c->state == CONN_OPEN && conn_under_limits(c) && c->direct == NULL &&
         c->rend > c->rstart) {
    struct frame f;
    size_t have = c->rend - c->rstart;
    uint32_t max_frame = conn_max_frame(c);
    int rv = c->lim.framing->decode(c->rbuf + c->rstart, have, max_frame, &f);
    if (rv == FRAME_NEED_MORE) {
      size_t frame_size = have + f.need;
      if (have >= c->lim.framing->size_field_bytes && frame_size > c->rcap) {
        rv = conn_direct_start(c, frame_size);
        if (rv != 0 && rv != UV_EAGAIN) {
          conn_protocol_error(c, rv, 0, "no memory for the frame");
        }
      } else if (c->rstart + frame_size > c->rcap) {
        memmove(c->rbuf, c->rbuf + c->rstart, have);
        c->rstart = 0;
        c->rend = have;
      }
      break;
    }
    if (rv < 0) {
      char what[160];
      if (rv == CAIRN_ETOOLARGE) {
        snprintf(what, sizeof what, "frame of %" PRIu32 " bytes above the limit of %" PRIu32 "%s",
                 f.length, max_frame,
                 max_frame < c->lim.max_frame_bytes ? " before authentication" : "");
      } else if (rv == CAIRN_EFRAMEEMPTY || rv == CAIRN_EBADFRAME) {
        snprintf(what, sizeof what, "malformed frame header (length %" PRIu32 ")", f.length);
      } else {
        snprintf(what, sizeof what, "%s", cairn_strerror(rv)); /* a framing's own reason */
      }
      conn_protocol_error(c, rv, 0, what);
      break;
    }
    rv = conn_dispatch_buffered(c, &f);
    if (rv != 0) {
      conn_protocol_error(c, rv, 0, conn_unparsed_what(c));
      break;
    }
  }
  c->backlog = c->state == CONN_OPEN && c->rend > c->rstart && !conn_under_limits(c);
  if (c->rstart == c->rend) {
    c->rstart = c->rend = 0;
  }
  /* A frame begun and not complete, while the conn reads: timed. */
  bool partial = c->state == CONN_OPEN && !c->budget_blocked && !c->backlog &&
                 (c->direct != NULL || c->rend > c->rstart);
  if (!partial) {
    c->frame_since_ms = 0;
  } else if (c->frame_since_ms == 0) {
    c->frame_since_ms = uv_now(c->loop);
  }
  c->busy--;
  conn_update_reading(c);
}

/* nread plaintext bytes arrived where conn_plain_target() said. */
static void conn_plain_input(struct conn *c, size_t nread)
{
  if (c->state == CONN_OPEN) {
    c->last_activity_ms = uv_now(c->loop);
    if (c->direct != NULL) {
      c->direct_have += nread;
      if (c->direct_have == c->direct_size) {
        int rv = conn_dispatch_direct(c);
        if (rv != 0) {
          conn_protocol_error(c, rv, 0, conn_unparsed_what(c));
        }
      }
    } else {
      c->rend += nread;
    }
    conn_process(c);
  } else {
    c->rstart = c->rend = 0; /* draining: discarded */
  }
}

static void conn_on_eof(struct conn *c)
{
  c->peer_eof = true;
  if (c->reading) {
    uv_read_stop((uv_stream_t *)&c->tcp);
    c->reading = false;
  }
  if (c->state == CONN_OPEN) {
    log_debug(CONN_LOG, "conn %" PRIu64 " %s: peer closed its side", c->id, c->peer);
    conn_start_draining(c);
  } else {
    conn_drain_check(c);
  }
}

/* TLS: pulls plaintext out of the session while the conn may read. What is
 * left stays in the session until reading resumes (conn_update_reading
 * starts the kick timer for it). */
static void conn_tls_pull(struct conn *c)
{
  while (c->state == CONN_DRAINING || (c->state == CONN_OPEN && conn_under_limits(c))) {
    uv_buf_t b;
    conn_plain_target(c, &b);
    if (b.len == 0 || b.base == NULL) {
      break;
    }
    bool was_done = tls_handshake_done(c->tls);
    char why[TLS_ERRMSG_SIZE];
    int n = tls_read(c->tls, (uint8_t *)b.base, b.len, why, sizeof why);
    conn_tls_flush(c);
    if (!was_done && tls_handshake_done(c->tls)) {
      const char *who = tls_peer_principal(c->tls);
      if (who[0] != '\0' && c->principal[0] == '\0') {
        /* mutual TLS: the verified certificate is the principal */
        snprintf(c->principal, sizeof c->principal, "User:%s", who);
      }
      log_debug(CONN_LOG, "conn %" PRIu64 " %s: %s %s%s%s", c->id, c->peer, tls_version(c->tls),
                tls_cipher(c->tls), who[0] != '\0' ? ", client certificate " : "", who);
    }
    if (n > 0) {
      conn_plain_input(c, (size_t)n);
      continue;
    }
    if (n == TLS_WANT_READ) {
      break;
    }
    if (n == TLS_EOF) {
      conn_on_eof(c);
      break;
    }
    snprintf(c->errmsg, sizeof c->errmsg, "%s", why);
    log_warn(CONN_LOG, "conn %" PRIu64 " %s: %s, closing", c->id, c->peer, c->errmsg);
    /* The alert goes out if the socket takes it now; the close follows. */
    size_t pending = tls_out_pending(c->tls);
    if (pending > 0 && pending <= TLS_UV_IN_SIZE && c->tls_in != NULL) {
      size_t k = tls_take_out(c->tls, c->tls_in, pending);
      uv_buf_t alert = uv_buf_init((char *)c->tls_in, (unsigned)k);
      (void)uv_try_write((uv_stream_t *)&c->tcp, &alert, 1);
    }
    conn_close_now(c, CAIRN_ETLS);
    break;
  }
}

static void conn_on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf)
{
  struct conn *c = s->data;
  c->busy++;
  if (nread > 0 && c->tls != NULL) {
    if (tls_feed(c->tls, (const uint8_t *)buf->base, (size_t)nread) != 0) {
      snprintf(c->errmsg, sizeof c->errmsg, "no memory for TLS input");
      conn_close_now(c, CAIRN_ENOMEM);
    } else {
      conn_tls_pull(c);
    }
  } else if (nread > 0) {
    if (c->state == CONN_OPEN) {
      c->last_activity_ms = uv_now(c->loop);
      if (c->direct != NULL) {
        c->direct_have += (size_t)nread;
        if (c->direct_have == c->direct_size) {
          int rv = conn_dispatch_direct(c);
          if (rv != 0) {
            conn_protocol_error(c, rv, 0, conn_unparsed_what(c));
          }
        }
      } else {
        c->rend += (size_t)nread;
      }
      conn_process(c);
    } else {
      c->rstart = c->rend = 0; /* draining: discarded */
    }
  } else if (nread == UV_EOF) {
    conn_on_eof(c);
  } else if (nread < 0) {
    if (c->state < CONN_CLOSING) {
      snprintf(c->errmsg, sizeof c->errmsg, "read: %s", uv_strerror((int)nread));
      log_info(CONN_LOG, "conn %" PRIu64 " %s: %s", c->id, c->peer, c->errmsg);
    }
    conn_close_now(c, (int)nread);
  }
  c->busy--;
  conn_maybe_free(c);
}

static void conn_on_kick(uv_timer_t *t)
{
  struct conn *c = t->data;
  c->busy++;
  if (c->tls != NULL) {
    conn_tls_pull(c); /* what waited in the session while reading was paused */
  }
  conn_start_waiting(c, true);
  conn_process(c);
  c->busy--;
  conn_maybe_free(c);
}

/* Starts or stops reading as the state and the limits say. Resuming with
 * whole frames already buffered dispatches them from the kick timer, never
 * from the caller's stack (a handler calling conn_respond() is not
 * re-entered). */
static void conn_update_reading(struct conn *c)
{
  conn_start_waiting(c, false);
  bool want;
  if (c->state == CONN_OPEN) {
    want = conn_under_limits(c);
    if (!want && !c->budget_blocked && c->lim.budget != NULL && rbudget_over(c->lim.budget)) {
      conn_budget_block(c, 0); /* woken once the budget is no longer over */
    }
    if (want && (c->backlog || (c->tls != NULL && tls_read_pending(c->tls))) &&
        !uv_is_active((uv_handle_t *)&c->kick)) {
      uv_timer_start(&c->kick, conn_on_kick, 0, 0);
    }
  } else {
    want = c->state == CONN_DRAINING && !c->peer_eof;
  }
  if (want && !c->reading) {
    int rv = uv_read_start((uv_stream_t *)&c->tcp, conn_on_alloc, conn_on_read);
    if (rv != 0) {
      snprintf(c->errmsg, sizeof c->errmsg, "read start: %s", uv_strerror(rv));
      conn_close_now(c, rv);
      return;
    }
    c->reading = true;
  } else if (!want && c->reading) {
    uv_read_stop((uv_stream_t *)&c->tcp);
    c->reading = false;
  }
}

static void conn_on_timer(uv_timer_t *t)
{
  struct conn *c = t->data;
  c->busy++;
  if (c->state == CONN_OPEN) {
    uint64_t now = uv_now(c->loop);
    /* Part of a large uv_write went out: progress, though no write completed. */
    size_t unsent = uv_stream_get_write_queue_size((uv_stream_t *)&c->tcp);
    if (unsent != c->last_unsent) {
      c->last_unsent = unsent;
      c->last_write_ms = now;
    }
    /* A file region on the thread pool times out by itself. */
    if (c->tls != NULL && !tls_handshake_done(c->tls) &&
        now - c->created_ms >= TLS_HANDSHAKE_TIMEOUT_MS) {
      snprintf(c->errmsg, sizeof c->errmsg, "no TLS handshake within %u ms",
               TLS_HANDSHAKE_TIMEOUT_MS);
      log_warn(CONN_LOG, "conn %" PRIu64 " %s: %s, closing", c->id, c->peer, c->errmsg);
      conn_close_now(c, -ETIMEDOUT);
    } else if (c->nouts > 0 && c->sf == NULL && now - c->last_write_ms >= c->lim.write_timeout_ms) {
      snprintf(c->errmsg, sizeof c->errmsg,
               "the peer took nothing for %u ms with %" PRIu64 " answer bytes queued",
               c->lim.write_timeout_ms, c->write_queue_bytes);
      log_info(CONN_LOG, "conn %" PRIu64 " %s: %s, closing", c->id, c->peer, c->errmsg);
      conn_close_now(c, -ETIMEDOUT);
    } else if (c->lim.frame_timeout_ms > 0 && c->frame_since_ms != 0 &&
               now - c->frame_since_ms >= c->lim.frame_timeout_ms) {
      size_t have = c->direct != NULL ? c->direct_have : c->rend - c->rstart;
      snprintf(c->errmsg, sizeof c->errmsg,
               "a frame not complete within %u ms (%zu of %zu bytes received)",
               c->lim.frame_timeout_ms, have, c->direct != NULL ? c->direct_size : have);
      log_warn(CONN_LOG, "conn %" PRIu64 " %s: %s, closing", c->id, c->peer, c->errmsg);
      c->frame_timed_out = true;
      conn_close_now(c, -ETIMEDOUT);
    } else if (c->lim.idle_timeout_ms > 0 && c->nreqs == 0 && c->nouts == 0 &&
               now - c->last_activity_ms >= c->lim.idle_timeout_ms) {
      /* In flight (a long poll) or writing is not idle. */
      snprintf(c->errmsg, sizeof c->errmsg, "idle for %u ms", c->lim.idle_timeout_ms);
      log_info(CONN_LOG, "conn %" PRIu64 " %s: %s, closing", c->id, c->peer, c->errmsg);
      conn_close_now(c, -ETIMEDOUT);
    } else if (c->rbuf != NULL && c->rstart == c->rend && c->direct == NULL &&
               now - c->last_activity_ms >= c->sweep_ms) {
      /* Nothing read for a sweep: give the read buffer back, so idle
       * conns cost their struct only. conn_on_alloc makes a new one. */
      free(c->rbuf);
      c->rbuf = NULL;
      c->rcap = c->rstart = c->rend = 0;
    }
  } else if (c->state == CONN_DRAINING) {
    if (c->nreqs > 0 || c->nouts > 0) {
      log_info(CONN_LOG,
               "conn %" PRIu64 " %s: close grace of %u ms over with %" PRIu32
               " requests and %" PRIu32 " answers unfinished",
               c->id, c->peer, c->lim.close_grace_ms, c->nreqs, c->nouts);
    }
    conn_close_now(c, -ETIMEDOUT);
  }
  c->busy--;
  conn_maybe_free(c);
}

/* ---- creation ---- */

static void conn_on_accept_failed_closed(uv_handle_t *h)
{
  struct conn *c = h->data;
  if (--c->handles_open == 0) {
    free(c->rbuf);
    free(c);
  }
}

int conn_new(uv_loop_t *loop, uv_stream_t *server, const struct conn_limits *lim,
             conn_dispatch_cb dispatch, void *data, conn_closed_cb closed_cb, struct conn **out)
{
  struct conn *c = calloc(1, sizeof *c);
  if (c == NULL) {
    return CAIRN_ENOMEM;
  }
  c->loop = loop;
  c->lim = *lim;
  /* A zero bound would never let a request in: it means the default. */
  struct conn_limits def;
  conn_limits_default(&def);
  if (c->lim.max_frame_bytes == 0) {
    c->lim.max_frame_bytes = def.max_frame_bytes;
  }
  if (c->lim.max_frame_bytes > FRAME_MAX_BYTES_LIMIT) {
    c->lim.max_frame_bytes = FRAME_MAX_BYTES_LIMIT;
  }
  if (c->lim.max_inflight_bytes == 0) {
    c->lim.max_inflight_bytes = def.max_inflight_bytes;
  }
  if (c->lim.max_inflight_requests == 0) {
    c->lim.max_inflight_requests = def.max_inflight_requests;
  }
  if (c->lim.max_write_queue_bytes == 0) {
    c->lim.max_write_queue_bytes = def.max_write_queue_bytes;
  }
  if (c->lim.write_timeout_ms == 0) {
    c->lim.write_timeout_ms = def.write_timeout_ms;
  }
  if (c->lim.framing == NULL) {
    c->lim.framing = &conn_framing_cairn;
  }
  c->bwait.cb = conn_on_budget;
  c->id = conn_next_id++;
  c->dispatch = dispatch;
  c->data = data;
  c->closed_cb = closed_cb;
  c->rbuf = malloc(CONN_READ_BUF_INITIAL);
  c->rcap = CONN_READ_BUF_INITIAL;
  c->peak_rbuf = c->rcap;
  snprintf(c->peer, sizeof c->peer, "?");
  int rv = c->rbuf == NULL ? CAIRN_ENOMEM : uv_tcp_init(loop, &c->tcp);
  if (rv != 0) {
    free(c->rbuf);
    free(c);
    return rv;
  }
  c->tcp.data = c;
  c->timer.data = c;
  c->kick.data = c;
  c->handles_open = 1;
  rv = uv_accept(server, (uv_stream_t *)&c->tcp);
  if (rv == 0) {
    rv = uv_timer_init(loop, &c->timer);
    if (rv == 0) {
      c->handles_open++;
      rv = uv_timer_init(loop, &c->kick);
      if (rv == 0) {
        c->handles_open++;
      }
    }
  }
  if (rv != 0) {
    uv_close((uv_handle_t *)&c->tcp, conn_on_accept_failed_closed);
    if (c->handles_open >= 2) {
      uv_close((uv_handle_t *)&c->timer, conn_on_accept_failed_closed);
    }
    return rv;
  }
  struct sockaddr_storage ss;
  int len = sizeof ss;
  if (uv_tcp_getpeername(&c->tcp, (struct sockaddr *)&ss, &len) == 0) {
    char host[48] = "?";
    int port = 0;
    if (ss.ss_family == AF_INET) {
      uv_ip4_name((struct sockaddr_in *)&ss, host, sizeof host);
      port = ntohs(((struct sockaddr_in *)&ss)->sin_port);
    } else if (ss.ss_family == AF_INET6) {
      uv_ip6_name((struct sockaddr_in6 *)&ss, host, sizeof host);
      port = ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
    }
    snprintf(c->peer, sizeof c->peer, "%s:%d", host, port);
  }
  (void)uv_tcp_nodelay(&c->tcp, 1);
  /* One periodic sweep checks both the idle and the write timeouts, each
   * within a quarter of its length. */
  uint64_t period = c->lim.write_timeout_ms;
  if (c->lim.idle_timeout_ms > 0 && c->lim.idle_timeout_ms < period) {
    period = c->lim.idle_timeout_ms;
  }
  if (c->lim.frame_timeout_ms > 0 && c->lim.frame_timeout_ms < period) {
    period = c->lim.frame_timeout_ms;
  }
  period = period / 4 > CONN_SWEEP_MIN_MS ? period / 4 : CONN_SWEEP_MIN_MS;
  c->last_activity_ms = c->last_write_ms = c->created_ms = uv_now(loop);
  c->sweep_ms = period;
  uv_timer_start(&c->timer, conn_on_timer, period, period);
  c->state = CONN_OPEN;
  conn_update_reading(c);
  if (c->state != CONN_OPEN) {
    /* Reading could not start: it closes itself, closed_cb never fires. */
    c->closed_cb = NULL;
    return CAIRN_ECLOSED;
  }
  log_debug(CONN_LOG, "conn %" PRIu64 " %s: accepted", c->id, c->peer);
  *out = c;
  return 0;
}

int conn_start_tls(struct conn *c, struct tls_ctx *ctx)
{
  int rv = tls_session_new(ctx, &c->tls);
  if (rv != 0) {
    snprintf(c->errmsg, sizeof c->errmsg, "no memory for a TLS session");
    return rv;
  }
  /* The handshake deadline is checked by the sweep: run it often enough. */
  if (c->sweep_ms > TLS_HANDSHAKE_TIMEOUT_MS / 4) {
    uv_timer_start(&c->timer, conn_on_timer, TLS_HANDSHAKE_TIMEOUT_MS / 4,
                   TLS_HANDSHAKE_TIMEOUT_MS / 4);
  }
  return 0;
}

bool conn_encrypted(const struct conn *c)
{
  return c->tls != NULL;
}

const char *conn_tls_principal(const struct conn *c)
{
  return c->tls != NULL ? tls_peer_principal(c->tls) : "";
}
