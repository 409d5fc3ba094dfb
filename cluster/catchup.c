/* catchup.c - fetching the batches a replica lacks behind its snapshot
 * descriptor from a peer (catchup.h). */
#include "cluster/catchup.h"

#include "cluster/fetch_proto.h"
#include "common/err.h"
#include "common/log.h"
#include "format/batch.h"
#include "format/crc32c.h"

#include <stdlib.h>
#include <string.h>

#define CATCHUP_START_BYTES (1u << 20)
#define CATCHUP_RUN_MAX 256 /* batches of one Raft entry appended at once */

/* One request on the wire. Each has its own write request and bytes: the
 * next request may be sent (a response already buffered was read in the
 * same read loop) before libuv ran this one's write callback, and a
 * uv_write_t still queued for its callback must not be written again
 * (libuv's queues are corrupted: the crash of soak 12/13). */
struct catchup_write {
  uv_write_t req;
  struct catchup *cu;
  uv_tcp_t *tcp; /* the connection it was written on */
  uint8_t bytes[FETCH_REQUEST_SIZE];
};

struct catchup_pending {
  struct catchup_pending *next;
  uint64_t index;
  size_t len;
  uint8_t data[];
};

static const char *const catchup_state_names[] = {"off", "dialing", "fetching", "backoff",
                                                   "closed"};

static void catchup_set_state(struct catchup *cu, enum catchup_state s)
{
  if (cu->state != s) {
    log_debug("catchup", "group %llu: %s -> %s", (unsigned long long)cu->group_id,
              catchup_state_names[cu->state], catchup_state_names[s]);
  }
  cu->state = s;
}

void catchup_init(struct catchup *cu, uv_loop_t *loop, struct transport *tr, struct store *store,
                  uint64_t group_id, uint64_t self_id, const char *self_address,
                  const struct catchup_owner *owner)
{
  memset(cu, 0, sizeof *cu);
  cu->loop = loop;
  cu->tr = tr;
  cu->store = store;
  cu->group_id = group_id;
  cu->self_id = self_id;
  cu->self_address = self_address;
  cu->pick = owner->pick;
  cu->apply = owner->apply;
  cu->done = owner->done;
  cu->table_wanted = owner->table_wanted;
  cu->table = owner->table;
  cu->apply_data = owner->data;
  cu->max_bytes = CATCHUP_START_BYTES;
  uv_timer_init(loop, &cu->timer); /* cannot fail: no system call */
  cu->timer.data = cu;
  cu->handles = 1;
}

static void catchup_free(struct catchup *cu)
{
  free(cu->payload);
  struct catchup_pending *p = cu->pending_head;
  while (p != NULL) {
    struct catchup_pending *next = p->next;
    free(p);
    p = next;
  }
  cu->pending_head = cu->pending_tail = NULL;
}

static void catchup_maybe_closed(struct catchup *cu)
{
  if (cu->state == CATCHUP_CLOSED && cu->handles == 0 && cu->dial.c == NULL &&
      cu->close_cb != NULL) {
    catchup_free(cu);
    catchup_close_cb cb = cu->close_cb;
    cu->close_cb = NULL;
    cb(cu);
  }
}

static void catchup_on_handle_closed(uv_handle_t *h)
{
  struct catchup *cu = h->data;
  if (h != (uv_handle_t *)&cu->timer) {
    free(h);
  }
  cu->handles--;
  catchup_maybe_closed(cu);
}

static void catchup_drop_connection(struct catchup *cu)
{
  if (cu->tcp != NULL) {
    cu->tcp->data = cu;
    uv_close((uv_handle_t *)cu->tcp, catchup_on_handle_closed);
    cu->tcp = NULL;
  }
  free(cu->payload);
  cu->payload = NULL;
}

static void catchup_dial(struct catchup *cu);

static void catchup_on_timer(uv_timer_t *t)
{
  struct catchup *cu = t->data;
  if (cu->state == CATCHUP_BACKOFF) {
    catchup_dial(cu);
  }
}

/* Drops the connection and dials again after a pause. */
static void catchup_retry_later(struct catchup *cu)
{
  catchup_drop_connection(cu);
  catchup_set_state(cu, CATCHUP_BACKOFF);
  uv_timer_start(&cu->timer, catchup_on_timer, CATCHUP_BACKOFF_MS, 0);
}

/* Gives up on this peer for now and tries the next one after a pause. */
static void catchup_backoff(struct catchup *cu, const char *why)
{
  log_warn("catchup", "group %llu: catch-up from a peer failed (%s); retrying",
           (unsigned long long)cu->group_id, why);
  catchup_retry_later(cu);
}

static bool catchup_reached(struct catchup *cu)
{
  struct store_info info;
  store_info(cu->store, &info);
  return info.last_index >= cu->target_index && info.next_offset >= cu->target_next;
}

/* Applies the entries held while catching up, in order. */
static void catchup_drain(struct catchup *cu)
{
  while (cu->pending_head != NULL) {
    struct catchup_pending *p = cu->pending_head;
    cu->pending_head = p->next;
    int rv = cu->apply(cu->apply_data, p->data, p->len, p->index);
    if (rv != 0) {
      cu->failed = true;
    }
    cu->pending_bytes -= p->len;
    free(p);
  }
  cu->pending_tail = NULL;
}

static void catchup_finish(struct catchup *cu)
{
  catchup_drop_connection(cu);
  catchup_set_state(cu, CATCHUP_OFF);
  catchup_drain(cu);
  struct store_info info;
  store_info(cu->store, &info);
  log_info("catchup", "group %llu: caught up: log [%lld, %lld), raft index %llu, %llu bytes "
           "fetched", (unsigned long long)cu->group_id, (long long)info.start_offset,
           (long long)info.next_offset, (unsigned long long)info.last_index,
           (unsigned long long)cu->fetched_bytes);
  if (cu->done != NULL) {
    cu->done(cu->apply_data, cu); /* last: it may close cu */
  }
}

/* Fires before the connection's close callback, so cu is still there. A
 * failure on a connection dropped since is that connection's, not the
 * current one's. */
static void catchup_on_written(uv_write_t *req, int status)
{
  struct catchup_write *w = req->data;
  struct catchup *cu = w->cu;
  bool current = w->tcp == cu->tcp;
  free(w);
  if (status != 0 && current && cu->state == CATCHUP_FETCHING) {
    catchup_backoff(cu, uv_strerror(status));
  }
}

static void catchup_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
  struct catchup *cu = h->data;
  if (cu->header_got < FETCH_RESPONSE_SIZE) {
    *buf = uv_buf_init((char *)cu->header + cu->header_got,
                       (unsigned)(FETCH_RESPONSE_SIZE - cu->header_got));
  } else {
    *buf = uv_buf_init((char *)cu->payload + cu->payload_got,
                       (unsigned)(cu->payload_len - cu->payload_got));
  }
}

static void catchup_on_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf);

/* May a peer still be asked for its table? */
static bool catchup_tables_left(const struct catchup *cu)
{
  return cu->table != NULL && cu->table_failures < CATCHUP_TABLE_TRIES;
}

/* Should the next request ask for the peer's producer table? */
static bool catchup_wants_table(struct catchup *cu, const struct store_info *info)
{
  if (!catchup_tables_left(cu)) {
    return false;
  }
  return cu->restart_pending ||
         (cu->table_wanted != NULL && cu->table_wanted(cu->apply_data, info->start_offset));
}

/* A table request failed (refused, closed, unreadable): another peer is
 * asked, up to CATCHUP_TABLE_TRIES times in all. */
static void catchup_table_failed(struct catchup *cu)
{
  cu->asking_table = false;
  cu->restart_pending = false; /* the next answer says again whether to restart */
  if (++cu->table_failures == CATCHUP_TABLE_TRIES) {
    log_warn("catchup",
             "group %llu: no peer gave its producer table after %u tries: going on "
             "without; producers whose batches lie below this log's start may be unknown here",
             (unsigned long long)cu->group_id, cu->table_failures);
  }
}

static void catchup_request(struct catchup *cu)
{
  struct store_info info;
  store_info(cu->store, &info);
  struct catchup_write *w = malloc(sizeof *w);
  if (w == NULL) {
    catchup_backoff(cu, "out of memory");
    return;
  }
  cu->asking_table = catchup_wants_table(cu, &info);
  struct fetch_request q = {.kind = cu->asking_table ? FETCH_KIND_TABLE : FETCH_KIND_BATCHES,
                            .offset = cu->asking_table ? 0 : info.next_offset,
                            .max_bytes = cu->asking_table ? 0 : cu->max_bytes};
  fetch_request_encode(&q, w->bytes);
  w->cu = cu;
  w->tcp = cu->tcp;
  w->req.data = w;
  cu->header_got = 0;
  cu->payload_got = 0;
  cu->payload_len = 0;
  uv_buf_t b = uv_buf_init((char *)w->bytes, FETCH_REQUEST_SIZE);
  int rv = uv_write(&w->req, (uv_stream_t *)cu->tcp, &b, 1, catchup_on_written);
  if (rv != 0) {
    free(w); /* no callback when uv_write fails */
  } else {
    rv = uv_read_start((uv_stream_t *)cu->tcp, catchup_alloc, catchup_on_read);
  }
  if (rv != 0) {
    catchup_backoff(cu, uv_strerror(rv));
  }
}

/* Appends one whole Raft entry's batches with its index. */
static int catchup_append_run(struct catchup *cu, struct store_batch *run, size_t n)
{
  struct batch_header h;
  batch_header_decode(run[0].data, &h);
  struct store_info info;
  store_info(cu->store, &info);
  if (h.base_offset != info.next_offset) {
    return CAIRN_ECORRUPT; /* the peer's batch does not continue our log */
  }
  int64_t base;
  int rv = store_append(cu->store, run, n, h.source_index, &base);
  return rv == CAIRN_EEXIST ? 0 : rv;
}

/* Appends every whole Raft entry in the payload; *appended counts them. */
static int catchup_apply_payload(struct catchup *cu, int *appended)
{
  struct store_batch run[CATCHUP_RUN_MAX];
  size_t n = 0, pos = 0;
  *appended = 0;
  while (pos < cu->payload_len) {
    size_t size = 0;
    int err = 0;
    if (batch_probe(cu->payload + pos, cu->payload_len - pos, cu->payload_len - pos, &size,
                    &err) != BATCH_PROBE_OK || n == CATCHUP_RUN_MAX) {
      return err != 0 ? err : CAIRN_ECORRUPT;
    }
    run[n].data = cu->payload + pos;
    run[n].len = size;
    n++;
    pos += size;
    struct batch_header h;
    batch_header_decode(run[n - 1].data, &h);
    if ((h.entry_flags & BATCH_FLAG_ENTRY_END) == 0) {
      continue; /* the entry goes on in the next batch */
    }
    int rv = catchup_append_run(cu, run, n);
    if (rv != 0) {
      return rv;
    }
    n = 0;
    (*appended)++;
  }
  return 0; /* a trailing partial entry is asked for again next time */
}

/* Empties our log and restarts it at the peer's start; last_index: see
 * store_reset (0: our own kept). Then asks for what follows. */
static void catchup_restart_log(struct catchup *cu, int64_t start, uint64_t last_index)
{
  struct store_info info;
  store_info(cu->store, &info);
  log_info("catchup",
           "group %llu: the peer's log starts at %lld, past ours (%lld): ours "
           "restarts there",
           (unsigned long long)cu->group_id, (long long)start, (long long)info.next_offset);
  int rv = store_reset(cu->store, start, last_index);
  if (rv == CAIRN_EPENDING) {
    /* The store deletes off the loop (pgstore): ask again after a pause,
     * which finds it done (its start moved) or still running. */
    catchup_retry_later(cu);
  } else if (rv != 0) {
    catchup_backoff(cu, cairn_strerror(rv));
  } else if (catchup_reached(cu)) {
    catchup_finish(cu);
  } else {
    catchup_request(cu);
  }
}

/* The peer's producer table arrived: the owner takes it, and the
 * catch-up goes at least to the point it covers. If our log is to restart
 * at the peer's start, it does now: when the peer's log holds no batch,
 * with the peer's last Raft index (the table's), so that the entries whose
 * batches the peer deleted are not applied here again. */
static void catchup_on_table(struct catchup *cu)
{
  int64_t offset = 0;
  uint64_t index = 0;
  int rv = cu->table(cu->apply_data, cu->payload, cu->payload_len, &offset, &index);
  free(cu->payload);
  cu->payload = NULL;
  if (rv != 0) {
    catchup_table_failed(cu);
    catchup_backoff(cu, cairn_strerror(rv));
    return;
  }
  cu->asking_table = false;
  bool restart = cu->restart_pending;
  cu->restart_pending = false;
  log_info("catchup",
           "group %llu: producer table from a peer, covering offsets up to %lld "
           "(raft index %llu): catching up at least that far",
           (unsigned long long)cu->group_id, (long long)offset, (unsigned long long)index);
  if (offset > cu->target_next) {
    cu->target_next = offset;
  }
  if (index > cu->target_index) {
    cu->target_index = index;
  }
  const struct fetch_response *r = &cu->response;
  struct store_info info;
  store_info(cu->store, &info);
  if (restart && info.next_offset < r->log_start) {
    catchup_restart_log(cu, r->log_start, r->log_next == r->log_start ? index : 0);
    return;
  }
  if (catchup_reached(cu)) {
    catchup_finish(cu);
    return;
  }
  catchup_request(cu);
}

static void catchup_on_payload(struct catchup *cu, const struct fetch_response *r)
{
  if (crc32c(cu->payload, cu->payload_len) != r->payload_crc) {
    if (cu->asking_table) {
      catchup_table_failed(cu);
    }
    catchup_backoff(cu, "payload checksum mismatch");
    return;
  }
  if (cu->asking_table) {
    catchup_on_table(cu);
    return;
  }
  int appended;
  int rv = catchup_apply_payload(cu, &appended);
  cu->fetched_bytes += cu->payload_len;
  free(cu->payload);
  cu->payload = NULL;
  if (rv != 0) {
    catchup_backoff(cu, cairn_strerror(rv));
    return;
  }
  if (appended == 0) {
    if (cu->max_bytes >= FETCH_MAX_BYTES) {
      catchup_backoff(cu, "an entry larger than the largest fetch");
      return;
    }
    cu->max_bytes *= 2; /* one entry did not fit: ask for more */
  }
  if (catchup_reached(cu)) {
    catchup_finish(cu);
    return;
  }
  catchup_request(cu);
}

/* Makes room for the payload r announces; returns false (backing off)
 * without memory. */
static bool catchup_expect_payload(struct catchup *cu, const struct fetch_response *r)
{
  cu->payload = malloc(r->nbytes);
  if (cu->payload == NULL) {
    catchup_backoff(cu, "out of memory");
    return false;
  }
  cu->payload_len = r->nbytes;
  cu->payload_got = 0;
  return true;
}

/* Reacts to a response header; returns true if a payload follows. */
static bool catchup_on_header(struct catchup *cu, struct fetch_response *r)
{
  struct store_info info;
  store_info(cu->store, &info);
  if (cu->asking_table && (r->status != 0 || r->nbytes == 0)) {
    catchup_table_failed(cu);
    catchup_backoff(cu, r->status != 0 ? cairn_strerror(r->status) : "an empty producer table");
    return false;
  }
  if (cu->asking_table) {
    return catchup_expect_payload(cu, r);
  }
  if (r->status == CAIRN_EOFFSET && info.next_offset < r->log_start) {
    /* The peer no longer has what follows our log (retention, a
     * LOG_START): our log restarts where the peer's starts, with its
     * producer table (catchup_on_table); a peer without tables: without. */
    if (catchup_tables_left(cu)) {
      cu->restart_pending = true;
      catchup_request(cu);
    } else {
      catchup_restart_log(cu, r->log_start, 0);
    }
    return false;
  }
  if (r->status != 0) {
    catchup_backoff(cu, cairn_strerror(r->status));
    return false;
  }
  if (r->nbytes == 0) {
    if (catchup_reached(cu)) {
      catchup_finish(cu);
    } else {
      catchup_backoff(cu, "the peer is behind the snapshot too");
    }
    return false;
  }
  return catchup_expect_payload(cu, r);
}

static void catchup_on_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf)
{
  struct catchup *cu = s->data;
  if (n == 0) {
    return;
  }
  if (n < 0) {
    if (cu->asking_table) {
      catchup_table_failed(cu); /* a peer without tables closes on the request */
    }
    catchup_backoff(cu, n == UV_EOF ? "the peer closed the connection" : uv_strerror((int)n));
    return;
  }
  struct fetch_response *r = &cu->response;
  if (cu->header_got < FETCH_RESPONSE_SIZE) {
    cu->header_got += (size_t)n;
    if (cu->header_got < FETCH_RESPONSE_SIZE) {
      return;
    }
    int rv = fetch_response_decode(cu->header, r);
    if (rv != 0) {
      catchup_backoff(cu, cairn_strerror(rv));
      return;
    }
    uv_read_stop(s);
    if (!catchup_on_header(cu, r)) {
      return;
    }
    uv_read_start(s, catchup_alloc, catchup_on_read);
    return;
  }
  cu->payload_got += (size_t)n;
  if (cu->payload_got == cu->payload_len) {
    uv_read_stop(s);
    catchup_on_payload(cu, r);
  }
}

static void catchup_on_dialed(struct transport_dial *d, uv_stream_t *stream, int status)
{
  struct catchup *cu = d->data;
  if (cu->state == CATCHUP_CLOSED) {
    if (stream != NULL) {
      cu->handles++;
      stream->data = cu;
      uv_close((uv_handle_t *)stream, catchup_on_handle_closed);
    }
    catchup_maybe_closed(cu);
    return;
  }
  if (status != 0) {
    catchup_backoff(cu, cairn_strerror(status));
    return;
  }
  cu->tcp = (uv_tcp_t *)stream;
  cu->tcp->data = cu;
  cu->handles++;
  catchup_set_state(cu, CATCHUP_FETCHING);
  catchup_request(cu);
}

static void catchup_dial(struct catchup *cu)
{
  const char *address = cu->pick(cu->apply_data, cu->next_peer++);
  if (address == NULL) {
    catchup_backoff(cu, "no peer replica known yet");
    return;
  }
  catchup_set_state(cu, CATCHUP_DIALING);
  cu->dial.data = cu;
  int rv = transport_dial(cu->tr, &cu->dial, TRANSPORT_KIND_FETCH, cu->group_id, cu->self_id,
                          cu->self_address, address, catchup_on_dialed);
  if (rv != 0) {
    catchup_set_state(cu, CATCHUP_BACKOFF);
    uv_timer_start(&cu->timer, catchup_on_timer, CATCHUP_BACKOFF_MS, 0);
  }
}

void catchup_start(struct catchup *cu, int64_t target_next, uint64_t target_index)
{
  if (target_next > cu->target_next) {
    cu->target_next = target_next;
  }
  if (target_index > cu->target_index) {
    cu->target_index = target_index;
  }
  if (cu->state != CATCHUP_OFF) {
    return; /* already on its way: the new target is picked up */
  }
  log_info("catchup", "group %llu: log is behind the snapshot (offsets up to %lld, raft index "
           "%llu): fetching from a peer", (unsigned long long)cu->group_id,
           (long long)cu->target_next, (unsigned long long)cu->target_index);
  cu->max_bytes = CATCHUP_START_BYTES;
  catchup_set_state(cu, CATCHUP_BACKOFF); /* dials from the loop, right away */
  uv_timer_start(&cu->timer, catchup_on_timer, 0, 0);
}

int catchup_defer(struct catchup *cu, const uint8_t *entry, size_t len, uint64_t index)
{
  if (cu->pending_bytes + len > CATCHUP_MAX_PENDING_BYTES) {
    cu->failed = true;
    return CAIRN_ETOOLARGE;
  }
  struct catchup_pending *p = malloc(sizeof *p + len);
  if (p == NULL) {
    cu->failed = true;
    return CAIRN_ENOMEM;
  }
  p->next = NULL;
  p->index = index;
  p->len = len;
  memcpy(p->data, entry, len);
  if (cu->pending_tail != NULL) {
    cu->pending_tail->next = p;
  } else {
    cu->pending_head = p;
  }
  cu->pending_tail = p;
  cu->pending_bytes += len;
  return 0;
}

void catchup_close(struct catchup *cu, catchup_close_cb cb)
{
  catchup_set_state(cu, CATCHUP_CLOSED);
  cu->close_cb = cb;
  transport_dial_cancel(&cu->dial);
  catchup_drop_connection(cu);
  uv_timer_stop(&cu->timer);
  uv_close((uv_handle_t *)&cu->timer, catchup_on_handle_closed);
}
