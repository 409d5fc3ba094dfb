/* handle_fetch.c - FetchRequest: regions of the leaders' partition logs,
 * sent with sendfile (zero copy), and long polls that wait for data.
 *
 * One fetch:
 *   handle_fetch -> handle_fetch_collect: per partition, in request order,
 *     store_read() pinned regions within the limits
 *       |
 *       +-- enough bytes (>= min_bytes), an error, or no wait asked (and
 *       |   no partition's store answered CAIRN_EPENDING: it is fetching
 *       |   rows off the loop, pgstore; its end wakes the fetch as an
 *       |   append does, after HANDLE_FETCH_PENDING_WAIT_MS at most)
 *       |     -> handle_fetch_send: the regions become the response's file
 *       |        parts; each is released (store_region_release) by the
 *       |        part's release callback once written or dropped
 *       v
 *   PARKED: a struct fetch_wait in n->waits, its regions released, its
 *     timer set for the deadline
 *       |  node_wake_fetches(p): the timer is re-armed to fire at once
 *       |  (never collecting inside Raft's apply, which calls the wake)
 *       |  timer: collect again; enough, or the deadline -> send
 *       |  conn closing (handle_fetch_on_cancel) -> dropped answer
 *       |  node stop (handle_fetch_close_all) -> send what there is
 *       v
 *   ANSWERED: unlinked, timer closing -> freed in its close callback.
 *
 * Limits: a partition gets at most its max_bytes and the response at most
 * the request's max_bytes, except that the first batch of a partition is
 * sent whole when the response's budget allows it, and the first batch of
 * the response always is: a batch larger than the limits never stalls a
 * consumer. Reads never return uncommitted data: the store holds applied
 * entries only, so its next offset is the high watermark. */
#include "server/handlers.h"
#include "server/handle_target.h"

#include "common/err.h"
#include "common/log.h"
#include "net/wire_err.h"
#include "server/node.h"

#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define HANDLE_FETCH_DEFAULT_PART_BYTES (1u << 20) /* FetchPartition.max_bytes 0 */
#define HANDLE_FETCH_DEFAULT_MAX_BYTES (16u << 20) /* FetchRequest.max_bytes 0 */
#define HANDLE_FETCH_MAX_WAIT_MS (5u * 60 * 1000)  /* longer waits are cut to this */
#define HANDLE_FETCH_MAX_REGIONS_PER_PART 64       /* regions end at segment ends */
/* The least a fetch waits for rows a store is fetching off the loop
 * (pgstore): then it answers with what there is, and is asked again. */
#define HANDLE_FETCH_PENDING_WAIT_MS 1000u

/* A parked long poll (node.h forward-declares it). */
struct fetch_wait {
  struct node *n;
  struct conn_request *req; /* NULL once answered */
  uv_timer_t timer;
  uint64_t deadline;              /* uv_now() ms */
  struct fetch_wait *prev, *next; /* n->waits */
};

/* One region of the response, heap-held until its part is released. */
struct handle_fetch_region {
  struct store_region r;
  struct handle_fetch_region *next;
};

/* The response under construction. */
struct handle_fetch_result {
  size_t n;
  Cairn__Client__FetchPartitionResult *res;
  Cairn__Client__FetchPartitionResult **ptrs;
  Cairn__Client__Error *errs;
  struct handle_target *targets; /* messages and leader hints */
  struct handle_fetch_region *head, *tail;
  size_t nregions;
  uint64_t total;
  bool any_error;
  bool pending; /* a store is fetching rows off the loop (CAIRN_EPENDING) */
};

static void handle_fetch_result_free(struct handle_fetch_result *fr)
{
  for (struct handle_fetch_region *hr = fr->head, *next; hr != NULL; hr = next) {
    next = hr->next;
    store_region_release(&hr->r);
    free(hr);
  }
  free(fr->res);
  free(fr->ptrs);
  free(fr->errs);
  free(fr->targets);
  memset(fr, 0, sizeof *fr);
}

static void handle_fetch_respond_error(struct conn_request *req, Cairn__Client__ErrorCode code,
                                       const char *message)
{
  Cairn__Client__Error err = CAIRN__CLIENT__ERROR__INIT;
  err.code = code;
  err.message = (char *)message;
  Cairn__Client__FetchResponse resp = CAIRN__CLIENT__FETCH_RESPONSE__INIT;
  resp.error = &err;
  Cairn__Client__Envelope env = CAIRN__CLIENT__ENVELOPE__INIT;
  env.body_case = CAIRN__CLIENT__ENVELOPE__BODY_FETCH_RESP;
  env.fetch_resp = &resp;
  conn_respond(req, &env, NULL, 0);
}

/* Reads one partition's regions into fr. */
static void handle_fetch_collect_part(struct node *n, struct conn *c,
                                      const Cairn__Client__FetchRequest *fq, size_t i,
                                      struct handle_fetch_result *fr)
{
  const Cairn__Client__FetchPartition *fp = fq->partitions[i];
  Cairn__Client__FetchPartitionResult *r = &fr->res[i];
  Cairn__Client__Error *err = &fr->errs[i];
  struct handle_target *t = &fr->targets[i];
  if (handle_target_authorized(n, c, fp->topic, META_ACL_READ, t)) {
    handle_find_reader(n, fp->topic, fp->partition, t);
  }
  r->topic = fp->topic;
  r->partition = fp->partition;
  r->high_watermark = -1;
  r->log_start_offset = -1;
  if (t->code != CAIRN__CLIENT__ERROR_CODE__OK) {
    err->code = t->code;
    err->message = t->message;
    r->leader_id = t->leader_id;
    r->leader_address = (char *)handle_target_address(n, t, c);
    fr->any_error = true;
    return;
  }
  struct store *s = rgroup_store(&t->p->rg);
  struct store_info info;
  store_info(s, &info);
  r->high_watermark = info.next_offset;
  r->log_start_offset = info.start_offset;
  if (fp->offset < info.start_offset || fp->offset > info.next_offset) {
    err->code = CAIRN__CLIENT__ERROR_CODE__OFFSET_OUT_OF_RANGE;
    snprintf(t->message, sizeof t->message,
             "offset %" PRId64 " of %s/%" PRIu32 " is outside [%" PRId64 ", %" PRId64 "]",
             fp->offset, fp->topic, fp->partition, info.start_offset, info.next_offset);
    err->message = t->message;
    fr->any_error = true;
    return;
  }
  uint64_t part_max = fp->max_bytes != 0 ? fp->max_bytes : HANDLE_FETCH_DEFAULT_PART_BYTES;
  uint64_t all_max = fq->max_bytes != 0 ? fq->max_bytes : HANDLE_FETCH_DEFAULT_MAX_BYTES;
  uint64_t bytes = 0;
  int64_t cur = fp->offset;
  for (int k = 0; k < HANDLE_FETCH_MAX_REGIONS_PER_PART && cur < info.next_offset; k++) {
    uint64_t part_left = part_max > bytes ? part_max - bytes : 0;
    uint64_t all_left = all_max > fr->total ? all_max - fr->total : 0;
    uint64_t want = part_left < all_left ? part_left : all_left;
    if (want == 0 && !(bytes == 0 && fr->total == 0)) {
      break;
    }
    struct handle_fetch_region *hr = calloc(1, sizeof *hr);
    if (hr == NULL) {
      err->code = CAIRN__CLIENT__ERROR_CODE__UNKNOWN;
      err->message = (char *)cairn_strerror(CAIRN_ENOMEM);
      fr->any_error = true;
      break;
    }
    hr->r.fd = -1;
    int rv = store_read(s, cur, want > 0 ? (size_t)want : 1, &hr->r);
    if (rv == CAIRN_EPENDING) {
      fr->pending = true; /* its end wakes this fetch (node_wake_fetches) */
      rv = 0;
      hr->r.len = 0;
    }
    if (rv != 0 || hr->r.len == 0) {
      if (rv != 0) {
        err->code = wire_err_from(rv);
        snprintf(t->message, sizeof t->message, "reading %s/%" PRIu32 " at %" PRId64 ": %s",
                 fp->topic, fp->partition, cur, store_errmsg(s));
        err->message = t->message;
        fr->any_error = true;
      }
      store_region_release(&hr->r);
      free(hr);
      break;
    }
    /* Only a first batch may pass the limits: this partition's first if the
     * response has room for it, the response's first in any case. */
    bool fits = hr->r.len <= want || (bytes == 0 && (hr->r.len <= all_left || fr->total == 0));
    if (!fits) {
      store_region_release(&hr->r);
      free(hr);
      break;
    }
    if (fr->tail != NULL) {
      fr->tail->next = hr;
    } else {
      fr->head = hr;
    }
    fr->tail = hr;
    fr->nregions++;
    bytes += hr->r.len;
    fr->total += hr->r.len;
    cur = hr->r.next_offset;
    if (hr->r.len > want) {
      break;
    }
  }
  r->bytes = (uint32_t)bytes;
  r->next_offset = bytes > 0 ? cur : 0;
}

/* Reads every partition of fq. Returns 0 or CAIRN_ENOMEM (fr empty). */
static int handle_fetch_collect(struct node *n, struct conn *c,
                                const Cairn__Client__FetchRequest *fq,
                                struct handle_fetch_result *fr)
{
  memset(fr, 0, sizeof *fr);
  size_t np = fq->n_partitions;
  fr->n = np;
  fr->res = calloc(np > 0 ? np : 1, sizeof *fr->res);
  fr->ptrs = calloc(np > 0 ? np : 1, sizeof *fr->ptrs);
  fr->errs = calloc(np > 0 ? np : 1, sizeof *fr->errs);
  fr->targets = calloc(np > 0 ? np : 1, sizeof *fr->targets);
  if (fr->res == NULL || fr->ptrs == NULL || fr->errs == NULL || fr->targets == NULL) {
    handle_fetch_result_free(fr);
    return CAIRN_ENOMEM;
  }
  for (size_t i = 0; i < np; i++) {
    cairn__client__fetch_partition_result__init(&fr->res[i]);
    cairn__client__error__init(&fr->errs[i]);
    fr->res[i].error = &fr->errs[i];
    fr->ptrs[i] = &fr->res[i];
    handle_fetch_collect_part(n, c, fq, i, fr);
  }
  return 0;
}

static void handle_fetch_on_part_sent(void *arg, int status)
{
  struct handle_fetch_region *hr = arg;
  store_region_release(&hr->r);
  free(hr);
}

/* Sends fr as the answer to req, handing the regions to the conn (each
 * released by its part's callback). Consumes req and fr. */
static void handle_fetch_send(struct node *n, struct conn_request *req,
                              struct handle_fetch_result *fr)
{
  for (size_t i = 0; i < fr->n; i++) {
    if (fr->targets[i].p != NULL && fr->errs[i].code == CAIRN__CLIENT__ERROR_CODE__OK) {
      metrics_part_fetched(&n->metrics, fr->targets[i].p->group_id, fr->res[i].bytes);
    }
  }
  struct conn_part *parts = calloc(fr->nregions > 0 ? fr->nregions : 1, sizeof *parts);
  if (parts == NULL) {
    handle_fetch_result_free(fr);
    handle_fetch_respond_error(req, CAIRN__CLIENT__ERROR_CODE__UNKNOWN,
                               cairn_strerror(CAIRN_ENOMEM));
    return;
  }
  size_t k = 0;
  for (struct handle_fetch_region *hr = fr->head; hr != NULL; hr = hr->next, k++) {
    struct conn_part *cp = &parts[k];
    if (hr->r.fd >= 0) {
      cp->kind = CONN_PART_FILE;
      cp->fd = hr->r.fd;
      cp->offset = hr->r.pos;
    } else {
      cp->kind = CONN_PART_MEM;
      cp->base = hr->r.mem;
    }
    cp->len = hr->r.len;
    cp->release = handle_fetch_on_part_sent;
    cp->arg = hr;
  }
  fr->head = fr->tail = NULL; /* the conn owns them now */
  Cairn__Client__FetchResponse resp = CAIRN__CLIENT__FETCH_RESPONSE__INIT;
  resp.partitions = fr->ptrs;
  resp.n_partitions = fr->n;
  Cairn__Client__Envelope env = CAIRN__CLIENT__ENVELOPE__INIT;
  env.body_case = CAIRN__CLIENT__ENVELOPE__BODY_FETCH_RESP;
  env.fetch_resp = &resp;
  conn_respond(req, &env, parts, k);
  free(parts);
  handle_fetch_result_free(fr);
}

/* Collects and sends now, whatever the amount. Consumes req. */
static void handle_fetch_answer_now(struct node *n, struct conn_request *req)
{
  struct handle_fetch_result fr;
  if (handle_fetch_collect(n, req->c, req->env->fetch_req, &fr) != 0) {
    handle_fetch_respond_error(req, CAIRN__CLIENT__ERROR_CODE__UNKNOWN,
                               cairn_strerror(CAIRN_ENOMEM));
    return;
  }
  handle_fetch_send(n, req, &fr);
}

/* Whether fr is the answer now. A partition whose rows a store is still
 * fetching holds the answer back, however short the wait asked, unless
 * other partitions already filled it: sending nothing would only bring
 * the same request back at once. */
static bool handle_fetch_ready(const struct handle_fetch_result *fr,
                               const Cairn__Client__FetchRequest *fq, bool deadline_passed)
{
  if (fr->any_error || deadline_passed) {
    return true;
  }
  if (fr->pending) {
    return fr->total > 0 && fr->total >= fq->min_bytes;
  }
  return fr->total >= fq->min_bytes || fq->max_wait_ms == 0;
}

static void handle_fetch_on_timer_closed(uv_handle_t *h)
{
  free(h->data);
}

/* Unlinks w and closes its timer (w is freed then); returns its request. */
static struct conn_request *handle_fetch_unpark(struct fetch_wait *w)
{
  struct node *n = w->n;
  if (w->prev != NULL) {
    w->prev->next = w->next;
  } else {
    n->waits = w->next;
  }
  if (w->next != NULL) {
    w->next->prev = w->prev;
  }
  w->prev = w->next = NULL;
  struct conn_request *req = w->req;
  w->req = NULL;
  req->handler_data = NULL;
  uv_close((uv_handle_t *)&w->timer, handle_fetch_on_timer_closed);
  return req;
}

static void handle_fetch_on_timer(uv_timer_t *timer)
{
  struct fetch_wait *w = timer->data;
  struct node *n = w->n;
  const Cairn__Client__FetchRequest *fq = w->req->env->fetch_req;
  uint64_t now = uv_now(n->loop);
  struct handle_fetch_result fr;
  if (handle_fetch_collect(n, w->req->c, fq, &fr) != 0) {
    handle_fetch_respond_error(handle_fetch_unpark(w), CAIRN__CLIENT__ERROR_CODE__UNKNOWN,
                               cairn_strerror(CAIRN_ENOMEM));
    return;
  }
  if (handle_fetch_ready(&fr, fq, now >= w->deadline) || n->state != NODE_RUNNING) {
    handle_fetch_send(n, handle_fetch_unpark(w), &fr);
    return;
  }
  handle_fetch_result_free(&fr);
  uv_timer_start(&w->timer, handle_fetch_on_timer, w->deadline - now, 0);
}

static void handle_fetch_on_cancel(struct conn_request *req)
{
  struct fetch_wait *w = req->handler_data;
  if (w != NULL && w->req == req) {
    handle_fetch_respond_error(handle_fetch_unpark(w), CAIRN__CLIENT__ERROR_CODE__SHUTTING_DOWN,
                               "the connection is closing");
  }
}

void handle_fetch(struct node *n, struct conn_request *req)
{
  if (req->env->body_case != CAIRN__CLIENT__ENVELOPE__BODY_FETCH_REQ) {
    handle_fetch_respond_error(req, CAIRN__CLIENT__ERROR_CODE__MALFORMED_REQUEST,
                               "API_FETCH without a fetch_req body");
    return;
  }
  const Cairn__Client__FetchRequest *fq = req->env->fetch_req;
  if (n->state != NODE_RUNNING) {
    handle_fetch_respond_error(req, CAIRN__CLIENT__ERROR_CODE__SHUTTING_DOWN,
                               "the node is stopping");
    return;
  }
  struct handle_fetch_result fr;
  if (handle_fetch_collect(n, req->c, fq, &fr) != 0) {
    handle_fetch_respond_error(req, CAIRN__CLIENT__ERROR_CODE__UNKNOWN,
                               cairn_strerror(CAIRN_ENOMEM));
    return;
  }
  if (handle_fetch_ready(&fr, fq, false)) {
    handle_fetch_send(n, req, &fr);
    return;
  }
  /* Park: nothing stays pinned while waiting. */
  bool pending = fr.pending;
  handle_fetch_result_free(&fr);
  struct fetch_wait *w = calloc(1, sizeof *w);
  if (w == NULL) {
    handle_fetch_answer_now(n, req);
    return;
  }
  uint32_t wait_ms =
      fq->max_wait_ms < HANDLE_FETCH_MAX_WAIT_MS ? fq->max_wait_ms : HANDLE_FETCH_MAX_WAIT_MS;
  if (pending && wait_ms < HANDLE_FETCH_PENDING_WAIT_MS) {
    wait_ms = HANDLE_FETCH_PENDING_WAIT_MS; /* held back for a store's read (handle_fetch_ready) */
  }
  w->n = n;
  w->req = req;
  w->deadline = uv_now(n->loop) + wait_ms;
  uv_timer_init(n->loop, &w->timer);
  w->timer.data = w;
  w->next = n->waits;
  if (n->waits != NULL) {
    n->waits->prev = w;
  }
  n->waits = w;
  req->handler_data = w;
  conn_request_set_cancel(req, handle_fetch_on_cancel);
  uv_timer_start(&w->timer, handle_fetch_on_timer, wait_ms, 0);
}

void node_wake_fetches(struct node *n, struct part *p)
{
  for (struct fetch_wait *w = n->waits; w != NULL; w = w->next) {
    const Cairn__Client__FetchRequest *fq = w->req->env->fetch_req;
    for (size_t i = 0; i < fq->n_partitions; i++) {
      if (fq->partitions[i]->partition == p->partition &&
          strcmp(fq->partitions[i]->topic, p->topic) == 0) {
        /* Collect on the next loop turn, outside the caller (Raft's apply). */
        uv_timer_start(&w->timer, handle_fetch_on_timer, 0, 0);
        break;
      }
    }
  }
}

void handle_fetch_close_all(struct node *n)
{
  while (n->waits != NULL) {
    struct fetch_wait *w = n->waits;
    struct conn_request *req = handle_fetch_unpark(w);
    handle_fetch_answer_now(n, req);
  }
}

/* ---- reads for the admin port ---- */

/* Appends region r's bytes to out->data. */
static int handle_fetch_copy_region(const struct store_region *r, struct handle_fetch_copy *out)
{
  uint8_t *grown = realloc(out->data, out->len + r->len);
  if (grown == NULL) {
    return CAIRN_ENOMEM;
  }
  out->data = grown;
  if (r->mem != NULL) {
    memcpy(out->data + out->len, r->mem, r->len);
  } else {
    size_t done = 0;
    while (done < r->len) {
      ssize_t got =
          pread(r->fd, out->data + out->len + done, r->len - done, (off_t)(r->pos + (int64_t)done));
      if (got <= 0) {
        return got < 0 ? -errno : CAIRN_ECORRUPT;
      }
      done += (size_t)got;
    }
  }
  out->len += r->len;
  return 0;
}

int handle_fetch_copy(struct node *n, const char *topic, uint32_t partition, int64_t offset,
                      int64_t timestamp, size_t max_bytes, struct handle_fetch_copy *out)
{
  memset(out, 0, sizeof *out);
  out->offset = offset;
  out->log_start_offset = -1;
  out->high_watermark = -1;
  handle_find_reader(n, topic, partition, &out->t);
  if (out->t.code != CAIRN__CLIENT__ERROR_CODE__OK) {
    return 0;
  }
  struct store *s = rgroup_store(&out->t.p->rg);
  struct store_info info;
  store_info(s, &info);
  out->log_start_offset = info.start_offset;
  out->high_watermark = info.next_offset;
  if (timestamp >= 0) {
    int rv = store_lookup_time(s, timestamp, &out->offset);
    if (rv != 0) {
      snprintf(out->t.message, sizeof out->t.message, "looking up time %" PRId64 ": %s", timestamp,
               store_errmsg(s));
      return rv;
    }
  }
  if (out->offset < info.start_offset || out->offset > info.next_offset) {
    out->t.code = CAIRN__CLIENT__ERROR_CODE__OFFSET_OUT_OF_RANGE;
    snprintf(out->t.message, sizeof out->t.message,
             "offset %" PRId64 " of %s/%" PRIu32 " is outside [%" PRId64 ", %" PRId64 "]",
             out->offset, topic, partition, info.start_offset, info.next_offset);
    return 0;
  }
  int64_t cur = out->offset;
  for (int k = 0; k < HANDLE_FETCH_MAX_REGIONS_PER_PART && cur < info.next_offset; k++) {
    size_t want = max_bytes > out->len ? max_bytes - out->len : 0;
    if (want == 0) {
      break;
    }
    struct store_region r = {.fd = -1};
    int rv = store_read(s, cur, want, &r);
    if (rv == 0 && r.len > 0 && (r.len <= want || out->len == 0)) {
      rv = handle_fetch_copy_region(&r, out);
      cur = r.next_offset;
    } else {
      cur = info.next_offset; /* the end, or the next batch would pass max_bytes */
    }
    store_region_release(&r);
    if (rv != 0) {
      snprintf(out->t.message, sizeof out->t.message, "reading %s/%" PRIu32 " at %" PRId64 ": %s",
               topic, partition, cur, rv == CAIRN_ENOMEM ? cairn_strerror(rv) : store_errmsg(s));
      return rv;
    }
  }
  return 0;
}
