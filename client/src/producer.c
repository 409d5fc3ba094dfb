/* producer.c - the producer: partitioning, buffer accounting, sealing
 * batches, sending them to partition leaders in ProduceRequests (one per
 * leader per round), retries within the delivery timeout, in-order
 * delivery callbacks, flush and close.
 *
 * Happy path: cairn_producer_send -> lc_prod_choose (partition) ->
 * lc_acc_append -> (linger, size or flush) lc_acc_seal -> lc_prod_send_all
 * -> lc_prod_on_answer -> batch done -> lc_prod_complete (callbacks in
 * partition order).
 * Failure modes: a retriable error (NOT_LEADER, IN_DOUBT, timeout, closed
 * or refused connection) puts the batch back, blocks the partition until
 * its other batches in flight return, then resends the same bytes from
 * the first unacknowledged batch, after a backoff with jitter and a
 * metadata refresh; a final error (or the delivery timeout) fails the
 * batch's messages.
 * Non-idempotent (producer id -1): a batch retried after IN_DOUBT or a
 * timeout may be written twice.
 *
 * Refused behind a gap (idempotent): OUT_OF_ORDER_SEQUENCE or
 * UNKNOWN_PRODUCER for a batch with an earlier one of its partition not
 * delivered yet is that earlier batch's gap: it is retried from the head
 * like a retriable error, not failed (produce_send.c, docs/client.md).
 *
 * Epoch bumps (idempotent): a batch that fails for good leaves a gap in
 * its partition's sequences, so the producer takes a new epoch and
 * renumbers the batches not yet delivered from sequence 0. A batch that
 * may already be written (lc_batch.maybe_written) cannot be renumbered:
 * the partition would take the new copy as a new batch. So first, with
 * sealing and other sends held, those batches are resent as they are,
 * under the old epoch (p->resolving): the partition answers a copy it
 * holds with its offset (delivered, once), appends one that is next in
 * sequence (delivered), or refuses one after the gap with
 * OUT_OF_ORDER_SEQUENCE, which proves it does not hold it (its last
 * PRODUCER_STATE_WINDOW batches are remembered, and no more than that are
 * ever in flight): that one is renumbered. Only then the new epoch. */
#include "producer.h"

#include "common/err.h"
#include "format/batch.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>


struct cairn_producer *lc_producer_next(struct cairn_producer *p) { return p->next; }

void cairn_producer_options_init(struct cairn_producer_options *o)
{
  memset(o, 0, sizeof *o);
  o->linger_ms = 5;
  o->batch_bytes = 65536;
  o->max_batch_bytes = 1048576;
  o->buffer_bytes = 33554432;
  o->compression = CAIRN_COMPRESSION_NONE;
  o->max_in_flight = 5;
  o->idempotence = true;
}

static int64_t lc_prod_wallclock_ms(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* ---- delivery ---- */

static void lc_prod_flush_progress(struct cairn_producer *p, uint64_t id)
{
  for (struct lc_flush *f = p->flushes; f != NULL; f = f->next) {
    if (id < f->upto && f->remaining > 0) {
      f->remaining--;
    }
  }
}

/* Tells one message's outcome and releases what it held. */
static void lc_prod_deliver(struct cairn_producer *p, const struct lc_msg *msg, int status,
                            const char *topic, int32_t partition, int64_t offset,
                            const char *error)
{
  p->mem -= msg->mem;
  p->pending--;
  lc_prod_flush_progress(p, msg->id);
  if (msg->cb != NULL) {
    struct cairn_delivery d = {topic, partition, status == 0 ? offset : -1, msg->timestamp,
                               status == 0 ? NULL : (error != NULL ? error : cairn_strerror(status))};
    msg->cb(p, status, &d, msg->data);
  }
}

/* A failed batch's error in words. A delivery timeout says where the
 * batch was going and why it did not get there: the usual cause is an
 * advertised address this client cannot resolve or reach (docs/client.md,
 * "Advertised addresses"), which the bare code would hide. */
static void lc_prod_batch_error(const struct lc_batch *b, const struct lc_ptopic *t,
                                int32_t partition, char *out, size_t cap)
{
  const struct lc_ppart *pp = &t->parts[partition];
  if (b->status != CAIRN_EDELIVERY_TIMEOUT) {
    snprintf(out, cap, "%s", cairn_strerror(b->status));
  } else if (pp->last_addr[0] == '\0') {
    snprintf(out, cap, "%s: no leader of %s/%" PRId32 " was known (no node answered with one)",
             cairn_strerror(b->status), t->name, partition);
  } else if (b->last_err != 0) {
    snprintf(out, cap, "%s: %s/%" PRId32 "'s leader %s was not reached: %s",
             cairn_strerror(b->status), t->name, partition, pp->last_addr,
             cairn_strerror(b->last_err));
  } else {
    snprintf(out, cap, "%s: %s/%" PRId32 "'s leader %s did not answer in time",
             cairn_strerror(b->status), t->name, partition, pp->last_addr);
  }
}

/* Pops and reports the done batches at the head of a partition queue, so
 * callbacks come in partition order. */
void lc_prod_complete(struct cairn_producer *p, struct lc_ptopic *t, int32_t partition)
{
  struct lc_acc *a = &t->parts[partition].acc;
  while (a->head != NULL && a->head->done) {
    struct lc_batch *b = lc_acc_pop(a);
    char error[LC_ERRMSG_SIZE + LC_ADDR_MAX];
    if (b->status != 0) {
      lc_prod_batch_error(b, t, partition, error, sizeof error);
    }
    for (size_t i = 0; i < b->nmsgs; i++) {
      lc_prod_deliver(p, &b->msgs[i], b->status, t->name, partition,
                      b->base_offset >= 0 ? b->base_offset + (int64_t)i : -1,
                      b->status != 0 ? error : NULL);
    }
    lc_acc_batch_free(b);
  }
}

void lc_prod_batch_done(struct lc_batch *b, int status, int64_t base_offset)
{
  b->done = true;
  b->in_flight = false;
  b->status = status;
  b->base_offset = base_offset;
}

/* A batch failed for good. If it carried a sequence, the partition's
 * sequences now have a gap (or an unknown outcome): the producer bumps
 * its epoch and renumbers what is not sent yet before sending more. */
void lc_prod_batch_failed_for_good(struct cairn_producer *p, struct lc_batch *b, int status)
{
  lc_prod_batch_done(b, status, -1);
  if (b->base_seq >= 0 && !p->closing) {
    p->bump_needed = true;
  }
}

/* ---- topics and partitioning ---- */

static struct lc_ptopic *lc_prod_topic(struct cairn_producer *p, const char *name)
{
  for (size_t i = 0; i < p->ntopics; i++) {
    if (strcmp(p->topics[i]->name, name) == 0) {
      return p->topics[i];
    }
  }
  return NULL;
}

/* The producer's state for a topic the metadata knows with count
 * partitions (grown if the count grew). NULL on no memory. */
static struct lc_ptopic *lc_prod_topic_get(struct cairn_producer *p, const char *name,
                                           int32_t count)
{
  struct lc_ptopic *t = lc_prod_topic(p, name);
  if (t != NULL && t->count >= count) {
    return t;
  }
  if (t == NULL) {
    struct lc_ptopic **nt = realloc(p->topics, (p->ntopics + 1) * sizeof *nt);
    if (nt == NULL) {
      return NULL;
    }
    p->topics = nt;
    if ((t = calloc(1, sizeof *t)) == NULL || (t->name = strdup(name)) == NULL) {
      free(t);
      return NULL;
    }
    t->sticky = -1;
    p->topics[p->ntopics++] = t;
  }
  struct lc_ppart *parts = realloc(t->parts, (size_t)count * sizeof *parts);
  if (parts == NULL) {
    return NULL;
  }
  for (int32_t i = t->count; i < count; i++) {
    memset(&parts[i], 0, sizeof parts[i]);
    lc_acc_init(&parts[i].acc);
    lc_backoff_init(&parts[i].bk, p->c->opts.retry_backoff_ms, p->c->opts.retry_backoff_max_ms,
                    lc_rand(p->c));
  }
  t->parts = parts;
  t->count = count;
  return t;
}

/* The partition for m in t (count > 0). */
static int32_t lc_prod_choose(struct cairn_producer *p, struct lc_ptopic *t,
                              const struct cairn_message *m)
{
  if (m->partition != CAIRN_PARTITION_ANY) {
    return m->partition;
  }
  if (m->key != NULL) {
    return lc_partition_for_key(m->key, m->key_len, t->count);
  }
  /* Sticky: stay while the chosen partition's batch is open and not
   * full; once it is full or sealed, move on to another partition at
   * random. */
  const struct lc_batch *tail =
      t->sticky >= 0 && t->sticky < t->count ? t->parts[t->sticky].acc.tail : NULL;
  bool done = tail == NULL || !tail->open || batch_builder_size(&tail->bb) >= p->o.batch_bytes;
  if (t->sticky < 0 || t->sticky >= t->count || (done && t->sticky_used)) {
    int32_t old = t->sticky;
    int32_t next = (int32_t)(lc_rand(p->c) % (uint64_t)t->count);
    if (t->count > 1 && next == old) {
      next = (next + 1) % t->count;
    }
    t->sticky = next;
    t->sticky_used = false;
  }
  t->sticky_used = true;
  return t->sticky;
}

/* Bytes a message counts against buffer_bytes, and a bound on its encoded
 * record's size. */
static size_t lc_prod_msg_bytes(const struct cairn_message *m)
{
  size_t n = m->key_len + m->value_len;
  for (size_t i = 0; i < m->header_count; i++) {
    n += m->headers[i].key_len + m->headers[i].value_len + 10;
  }
  return n;
}

/* Appends m (already checked) to its partition. Returns 0 or a code for
 * the delivery callback. */
static int lc_prod_append(struct cairn_producer *p, struct lc_ptopic *t, int32_t partition,
                          const struct cairn_message *m, const struct lc_msg *msg,
                          uint64_t deadline_ms)
{
  if (partition < 0 || partition >= t->count) {
    return CAIRN_EUNKNOWN_PARTITION;
  }
  struct lc_ppart *pp = &t->parts[partition];
  bool opened;
  int rv = lc_acc_append(&pp->acc, p->o.batch_bytes, p->o.max_batch_bytes, lc_now(p->c),
                         deadline_ms, m, msg->timestamp, msg, &opened);
  /* A full batch, or any batch with linger 0, goes on the next loop turn
   * rather than at the next tick (LC_TICK_MS): without this, linger 0
   * still waited 5 ms on average. */
  if (rv == 0 && pp->acc.tail != NULL &&
      (p->o.linger_ms == 0 || batch_builder_size(&pp->acc.tail->bb) >= p->o.batch_bytes)) {
    lc_prod_kick(p);
  } else if (rv == 0 && opened) {
    /* A new batch is due after linger_ms exactly, not at a later tick. */
    lc_prod_kick_at(p, lc_now(p->c) + p->o.linger_ms);
  }
  return rv;
}

/* ---- held messages (topic not in the cache yet) ---- */

static void lc_prod_held_free(struct lc_held *h)
{
  free(h->topic);
  free(h->headers);
  free(h->buf);
  free(h);
}

static int lc_prod_hold(struct cairn_producer *p, const struct cairn_message *m,
                        const struct lc_msg *msg, uint64_t deadline_ms)
{
  struct lc_held *h = calloc(1, sizeof *h);
  if (h == NULL) {
    return CAIRN_ENOMEM;
  }
  size_t n = m->key_len + m->value_len;
  for (size_t i = 0; i < m->header_count; i++) {
    n += m->headers[i].key_len + m->headers[i].value_len;
  }
  h->topic = strdup(m->topic);
  h->buf = malloc(n + 1);
  h->headers = calloc(m->header_count + 1, sizeof *h->headers);
  if (h->topic == NULL || h->buf == NULL || h->headers == NULL) {
    lc_prod_held_free(h);
    return CAIRN_ENOMEM;
  }
  uint8_t *w = h->buf;
  h->m = *m;
  h->m.topic = h->topic;
#define LC_COPY(dst, src, len)          \
  do {                                  \
    if ((src) != NULL) {                \
      memcpy(w, (src), (len));          \
      (dst) = w;                        \
      w += (len);                       \
    }                                   \
  } while (0)
  LC_COPY(h->m.key, m->key, m->key_len);
  LC_COPY(h->m.value, m->value, m->value_len);
  for (size_t i = 0; i < m->header_count; i++) {
    h->headers[i] = m->headers[i];
    LC_COPY(h->headers[i].key, m->headers[i].key, m->headers[i].key_len);
    if (h->headers[i].key == NULL) {
      h->headers[i].key = w; /* a header key is never null */
    }
    LC_COPY(h->headers[i].value, m->headers[i].value, m->headers[i].value_len);
  }
#undef LC_COPY
  h->m.headers = h->headers;
  h->msg = *msg;
  h->deadline_ms = deadline_ms;
  h->meta_gen = p->c->meta.generation;
  if (p->held_tail != NULL) {
    p->held_tail->next = h;
  } else {
    p->held = h;
  }
  p->held_tail = h;
  return 0;
}

/* Whether a message for topic waits in the held list. */
static bool lc_prod_holds_topic(const struct cairn_producer *p, const char *topic)
{
  if (p->held_tail != NULL && strcmp(p->held_tail->topic, topic) == 0) {
    return true; /* the usual case: a burst to one topic not known yet */
  }
  for (const struct lc_held *h = p->held; h != NULL; h = h->next) {
    if (strcmp(h->topic, topic) == 0) {
      return true;
    }
  }
  return false;
}

static void lc_prod_on_held_meta(struct cairn_client *c, int status, const char *errmsg,
                                 void *data)
{
  struct cairn_producer *p = data;
  p->held_refreshing = false;
  if (status != 0) {
    /* Nobody answered: ask again after a backoff, not at once. */
    p->held_wake_ms = lc_now(c) + lc_backoff_next(&p->held_bk);
  } else {
    lc_backoff_reset(&p->held_bk);
  }
  lc_prod_kick(p);
}

/* Routes held messages whose topic is now known; fails those whose topic
 * or partition a refresh after they were held says does not exist. */
static void lc_prod_route_held(struct cairn_producer *p)
{
  if (p->held == NULL) {
    return;
  }
  struct cairn_client *c = p->c;
  uint64_t now = lc_now(c);
  bool need_refresh = false;
  struct lc_held **pp = &p->held;
  struct lc_held *prev = NULL;
  while (*pp != NULL) {
    struct lc_held *h = *pp;
    const struct lc_topic *mt = lc_meta_topic(c, h->topic);
    bool fresh = c->meta.generation > h->meta_gen;
    int status = 1; /* 1: keep holding */
    if (p->closing) {
      status = UV_ECANCELED;
    } else if (mt != NULL && mt->count > 0 &&
               (h->m.partition == CAIRN_PARTITION_ANY || h->m.partition < mt->count)) {
      struct lc_ptopic *t = lc_prod_topic_get(p, h->topic, mt->count);
      status = t == NULL ? CAIRN_ENOMEM
                         : lc_prod_append(p, t, lc_prod_choose(p, t, &h->m), &h->m, &h->msg,
                                          h->deadline_ms);
      if (status == 0) {
        status = -1; /* appended: its callback comes with the batch */
      }
    } else if (fresh) {
      status = mt == NULL ? CAIRN_EUNKNOWN_TOPIC : CAIRN_EUNKNOWN_PARTITION;
    } else if (now >= h->deadline_ms) {
      status = CAIRN_EDELIVERY_TIMEOUT;
    } else {
      need_refresh = true;
      lc_prod_kick_at(p, h->deadline_ms); /* failed on time if still held then */
    }
    if (status == 1) {
      prev = h;
      pp = &h->next;
      continue;
    }
    *pp = h->next;
    if (p->held_tail == h) {
      p->held_tail = prev;
    }
    if (status != -1) {
      /* Never sent: the topic's metadata did not come. The last refresh's
       * error names the nodes it could not reach. */
      char error[LC_ERRMSG_SIZE * 3];
      snprintf(error, sizeof error, "%s: no metadata for topic %s%s%s", cairn_strerror(status),
               h->topic, c->meta.errmsg[0] != '\0' ? ": " : "", c->meta.errmsg);
      lc_prod_deliver(p, &h->msg, status, h->topic,
                      h->m.partition == CAIRN_PARTITION_ANY ? -1 : h->m.partition, -1,
                      status == CAIRN_EDELIVERY_TIMEOUT ? error : NULL);
    }
    lc_prod_held_free(h);
  }
  if (need_refresh && !p->held_refreshing && now >= p->held_wake_ms) {
    p->held_refreshing = true;
    if (lc_meta_refresh(c, lc_prod_on_held_meta, p) != 0) {
      p->held_refreshing = false;
    }
  }
}

/* ---- send ---- */

int cairn_producer_new(struct cairn_client *c, const struct cairn_producer_options *o,
                       struct cairn_producer **out)
{
  struct cairn_producer_options opts;
  if (o == NULL) {
    cairn_producer_options_init(&opts);
  } else {
    opts = *o;
  }
  if (c->closing) {
    return CAIRN_ECLOSED;
  }
  if (opts.batch_bytes == 0 || opts.max_batch_bytes < 128 ||
      opts.batch_bytes > opts.max_batch_bytes || opts.compression < CAIRN_COMPRESSION_NONE ||
      opts.compression > CAIRN_COMPRESSION_ZSTD || opts.buffer_bytes == 0) {
    return CAIRN_EINVAL;
  }
  if (opts.max_in_flight == 0) {
    opts.max_in_flight = 1;
  }
  if (opts.idempotence && opts.max_in_flight > LC_PROD_MAX_IDEMPOTENT_IN_FLIGHT) {
    /* A partition remembers its last 5 batches per producer: more in
     * flight could not all be recognized as duplicates on a retry. */
    opts.max_in_flight = LC_PROD_MAX_IDEMPOTENT_IN_FLIGHT;
  }
  struct cairn_producer *p = calloc(1, sizeof *p);
  if (p == NULL) {
    return CAIRN_ENOMEM;
  }
  p->c = c;
  p->o = opts;
  p->pid = -1;
  p->epoch = -1;
  p->pid_state = opts.idempotence ? LC_PID_UNKNOWN : LC_PID_READY;
  lc_backoff_init(&p->held_bk, c->opts.retry_backoff_ms, c->opts.retry_backoff_max_ms,
                  lc_rand(c));
  int rv = uv_timer_init(c->loop, &p->kick);
  if (rv != 0) {
    free(p);
    return rv;
  }
  p->kick.data = p;
  p->next = c->producers;
  c->producers = p;
  c->nproducers++;
  *out = p;
  lc_prod_kick(p); /* ask for the producer id early */
  return 0;
}

int cairn_producer_send(struct cairn_producer *p, const struct cairn_message *m,
                        cairn_delivery_cb cb, void *data)
{
  if (p->closing) {
    return CAIRN_ECLOSED;
  }
  if (m == NULL || m->topic == NULL || m->topic[0] == '\0' ||
      (m->partition < 0 && m->partition != CAIRN_PARTITION_ANY) ||
      (m->header_count > 0 && m->headers == NULL) || m->header_count > INT32_MAX) {
    return CAIRN_EINVAL;
  }
  size_t bytes = lc_prod_msg_bytes(m);
  if (bytes + BATCH_HEADER_SIZE + BATCH_MIN_RECORD_SIZE > p->o.max_batch_bytes) {
    return CAIRN_ETOOLARGE;
  }
  size_t mem = bytes + LC_ACC_MSG_OVERHEAD;
  if (p->mem + mem > p->o.buffer_bytes) {
    return CAIRN_EQUEUE_FULL;
  }
  struct lc_msg msg = {cb, data,
                       m->timestamp_ms == CAIRN_TIMESTAMP_NOW ? lc_prod_wallclock_ms()
                                                              : m->timestamp_ms,
                       mem, p->next_id};
  uint64_t deadline = lc_now(p->c) + p->c->opts.delivery_timeout_ms;
  const struct lc_topic *mt = lc_meta_topic(p->c, m->topic);
  int rv;
  /* Behind a held message of the same topic, a message waits its turn
   * even when the topic is known now: the held one was sent first and
   * must be appended first (lc_prod_route_held, next round). */
  if (mt != NULL && mt->count > 0 && !lc_prod_holds_topic(p, m->topic) &&
      (m->partition == CAIRN_PARTITION_ANY || m->partition < mt->count)) {
    struct lc_ptopic *t = lc_prod_topic_get(p, m->topic, mt->count);
    rv = t == NULL ? CAIRN_ENOMEM
                   : lc_prod_append(p, t, lc_prod_choose(p, t, m), m, &msg, deadline);
  } else {
    rv = lc_prod_hold(p, m, &msg, deadline);
    lc_prod_kick(p);
  }
  if (rv != 0) {
    return rv;
  }
  p->next_id++;
  p->mem += mem;
  p->pending++;
  return 0;
}

/* ---- the round: route held messages, seal, expire, send ---- */

static void lc_prod_free(uv_handle_t *h)
{
  struct cairn_producer *p = h->data;
  for (size_t i = 0; i < p->ntopics; i++) {
    for (int32_t k = 0; k < p->topics[i]->count; k++) {
      lc_acc_close(&p->topics[i]->parts[k].acc);
    }
    free(p->topics[i]->parts);
    free(p->topics[i]->name);
    free(p->topics[i]);
  }
  free(p->topics);
  if (p->close_cb != NULL) {
    p->close_cb(p, 0, p->close_data); /* p must not be used from here on */
  }
  free(p);
}

static void lc_prod_fire_flushes(struct cairn_producer *p, int status)
{
  struct lc_flush **pp = &p->flushes;
  while (*pp != NULL) {
    struct lc_flush *f = *pp;
    if (f->remaining == 0 || status != 0) {
      *pp = f->next;
      f->cb(p, status, f->data);
      free(f);
    } else {
      pp = &f->next;
    }
  }
}

static bool lc_prod_idle(const struct cairn_producer *p)
{
  if (p->held != NULL || p->reqs_in_flight > 0 || p->pid_state == LC_PID_ASKING) {
    return false;
  }
  for (size_t i = 0; i < p->ntopics; i++) {
    for (int32_t k = 0; k < p->topics[i]->count; k++) {
      if (p->topics[i]->parts[k].acc.head != NULL) {
        return false;
      }
    }
  }
  return true;
}

/* Whether a batch not yet answered for good may already be written. */
static bool lc_prod_any_maybe_written(const struct cairn_producer *p)
{
  for (size_t i = 0; i < p->ntopics; i++) {
    for (int32_t k = 0; k < p->topics[i]->count; k++) {
      for (const struct lc_batch *b = p->topics[i]->parts[k].acc.head; b != NULL; b = b->next) {
        if (b->maybe_written && !b->done) {
          return true;
        }
      }
    }
  }
  return false;
}

static void lc_prod_round(struct cairn_producer *p)
{
  struct cairn_client *c = p->c;
  uint64_t now = lc_now(c);
  if (p->closed) {
    return;
  }
  if (p->pid_state == LC_PID_UNKNOWN && !p->closing && now >= p->pid_wake_ms) {
    lc_prod_ask_pid(p);
  }
  p->resolving = p->bump_needed && lc_prod_any_maybe_written(p);
  if (p->bump_needed && !p->resolving && p->pid_state == LC_PID_READY &&
      p->reqs_in_flight == 0 && !p->closing) {
    lc_prod_ask_pid(p); /* nothing in flight or in doubt: a new epoch, then renumber */
  }
  bool can_seal = p->pid_state == LC_PID_READY && !p->bump_needed && !p->closing;
  bool can_send = can_seal || (p->resolving && p->pid_state == LC_PID_READY && !p->closing);
  lc_prod_route_held(p);
  bool force = p->force_seal || p->closing;
  p->force_seal = false;
  for (size_t ti = 0; ti < p->ntopics; ti++) {
    struct lc_ptopic *t = p->topics[ti];
    for (int32_t pi = 0; pi < t->count; pi++) {
      struct lc_acc *a = &t->parts[pi].acc;
      /* Seal the open tail when due (only once the producer id is known:
       * it is part of the sealed bytes). */
      if (can_seal) {
        bool tail_ready = lc_acc_tail_ready(a, p->o.batch_bytes, p->o.linger_ms, now, force);
        /* Open batches before the tail take no more records: seal them in
         * order, and the tail when it is due. */
        for (struct lc_batch *b = a->first_open; b != NULL; b = b->next) {
          if (b->open && (b != a->tail || tail_ready) &&
              lc_acc_seal(a, b, p->pid, p->epoch, p->o.compression, p->o.compression_level) != 0) {
            break; /* out of memory: try again next round */
          }
        }
        /* A tail not due yet: a round when it is. The kick armed when it
         * opened may have been replaced by an earlier one (a request's
         * probe), whose round is this one; without this the tail waited
         * for the client's tick (LC_TICK_MS), not linger_ms. */
        if (a->tail != NULL && a->tail->open && !tail_ready) {
          lc_prod_kick_at(p, a->tail->created_ms + p->o.linger_ms);
        }
      }
      /* Expire or cancel batches not in flight, from the head on (their
       * deadlines grow along the queue). Before the head's deadline none
       * has passed, and a round at that deadline looks again: the walk
       * (up to max_in_flight batches in flight per partition) is skipped. */
      struct lc_batch *from = a->head;
      if (!p->closing && from != NULL && now < from->deadline_ms) {
        lc_prod_kick_at(p, from->deadline_ms);
        from = NULL;
      }
      for (struct lc_batch *b = from; b != NULL; b = b->next) {
        if (b->in_flight || b->done) {
          continue;
        }
        if (p->closing) {
          lc_prod_batch_done(b, UV_ECANCELED, -1);
        } else if (now >= b->deadline_ms) {
          lc_prod_batch_failed_for_good(p, b,
                                        b->last_err != 0 && !lc_retriable(b->last_err)
                                            ? b->last_err
                                            : CAIRN_EDELIVERY_TIMEOUT);
        } else {
          /* A round then fails it on time, whatever the retry backoff or
           * the connection attempts are doing meanwhile. */
          lc_prod_kick_at(p, b->deadline_ms);
          break;
        }
      }
      if (a->head != NULL && a->head->done) {
        lc_prod_complete(p, t, pi);
      }
    }
  }
  lc_prod_probe_leaders(p);
  if (can_send) {
    lc_prod_send_all(p);
  }
  lc_prod_fire_flushes(p, 0);
  if (p->closing && lc_prod_idle(p)) {
    lc_prod_fire_flushes(p, UV_ECANCELED);
    struct cairn_producer **pp = &c->producers;
    while (*pp != p) {
      pp = &(*pp)->next;
    }
    *pp = p->next;
    c->nproducers--;
    p->closed = true;
    uv_timer_stop(&p->kick);
    uv_close((uv_handle_t *)&p->kick, lc_prod_free);
  }
}

static void lc_prod_on_kick(uv_timer_t *t)
{
  struct cairn_producer *p = t->data;
  p->kick_armed = false;
  lc_prod_round(p);
}

void lc_prod_kick_at(struct cairn_producer *p, uint64_t due_ms)
{
  if (p->closed || (p->kick_armed && p->kick_due_ms <= due_ms)) {
    return; /* a round comes at least as early */
  }
  uint64_t now = lc_now(p->c);
  p->kick_armed = true;
  p->kick_due_ms = due_ms;
  uv_timer_start(&p->kick, lc_prod_on_kick, due_ms > now ? due_ms - now : 0, 0);
}

/* Runs a round on the next loop iteration (never inside the caller). */
void lc_prod_kick(struct cairn_producer *p) { lc_prod_kick_at(p, 0); }

void lc_producer_tick(struct cairn_producer *p) { lc_prod_round(p); }

int cairn_producer_flush(struct cairn_producer *p, cairn_producer_cb cb, void *data)
{
  if (cb == NULL) {
    return CAIRN_EINVAL;
  }
  if (p->closing) {
    return CAIRN_ECLOSED;
  }
  struct lc_flush *f = calloc(1, sizeof *f);
  if (f == NULL) {
    return CAIRN_ENOMEM;
  }
  f->upto = p->next_id;
  f->remaining = p->pending;
  f->cb = cb;
  f->data = data;
  f->next = p->flushes;
  p->flushes = f;
  p->force_seal = true;
  lc_prod_kick(p);
  return 0;
}

size_t cairn_producer_pending(const struct cairn_producer *p) { return p->pending; }

void cairn_producer_id(const struct cairn_producer *p, int64_t *producer_id, int16_t *epoch)
{
  *producer_id = p->pid_state == LC_PID_READY ? p->pid : -1;
  *epoch = p->pid_state == LC_PID_READY ? p->epoch : -1;
}

void cairn_producer_close(struct cairn_producer *p, cairn_producer_cb cb, void *data)
{
  if (p->closing) {
    return;
  }
  p->closing = true;
  p->close_cb = cb;
  p->close_data = data;
  lc_prod_kick(p);
}
