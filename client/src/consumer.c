/* consumer.c - the consumer: assigned partitions, start positions through
 * ListOffsets, one long-poll Fetch at a time per leader node carrying all
 * its partitions, prefetching up to prefetch_bytes per partition, and
 * records handed to the application one batch at a time per partition.
 * A fetch answer's payload is not copied: each partition's chunk holds a
 * reference to the answer's read buffer (reader.c) unless its share is
 * small beside that buffer (LC_CONS_SHARE_MIN), and records point into it.
 *
 * Pipelined fetches (fetch_pipeline; off by default): a large answer's envelope arrives before its payload
 * and names, per partition, the offset after the bytes it brings
 * (FetchPartitionResult.next_offset). lc_cons_on_fetch_head then sends the
 * next fetch for the partitions that have more to read at once, while the
 * payload still streams in, so the node reads and sends the next answer
 * during the round trip instead of after it. The pipelined fetch is sent
 * once the current answer has started arriving, so its answer comes after
 * that one on the connection; its bytes are kept only if they start where
 * the current answer's ended (else they are fetched again). At most two
 * fetches per partition are in flight, and a partition is pipelined only
 * while its buffered bytes plus those of the answer arriving stay under
 * prefetch_bytes: what a partition holds or has coming stays below
 * prefetch_bytes + partition_max_bytes, as without pipelining. A node that
 * does not send next_offset gets one fetch at a time.
 *
 * A partition's states:
 *   RESOLVE  --lc_cons_resolve (ListOffsets)--> RESOLVING
 *   RESOLVING --lc_cons_on_offset--> FETCH (or RESOLVE after a backoff)
 *   FETCH: fetched by lc_cons_fetch_all; answers append chunks
 *     (lc_cons_on_fetch); OFFSET_OUT_OF_RANGE -> RESOLVE (offset_reset)
 *     or PAUSED
 *   PAUSED: a final error, reported once; cairn_consumer_seek resumes.
 * Each seek bumps the partition's epoch: answers to older requests are
 * dropped. Leader moves, refused connections and timeouts: a backoff with
 * jitter and a metadata refresh, then the fetch goes to the new leader. */
#include "internal.h"

#include "common/err.h"
#include "format/batch.h"
#include "format/codec.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum lc_cpart_state { LC_CP_RESOLVE, LC_CP_RESOLVING, LC_CP_FETCH, LC_CP_PAUSED };

/* A chunk keeps the fetch answer's read buffer (no copy) when its share
 * is at least 1/LC_CONS_SHARE_MIN of that buffer; a smaller share is
 * copied, so that buffers kept alive are at most this many times the
 * bytes they hold for the consumer. */
#define LC_CONS_SHARE_MIN 4

/* Fetched bytes of one partition: whole batches, in a buffer held by
 * reference (the answer's own, shared with the other partitions' chunks
 * of that answer, or a copy of this share). */
struct lc_chunk {
  struct lc_chunk *next;
  struct lc_buf *buf; /* holds data: one reference, owned */
  const uint8_t *data;
  size_t len;
  size_t pos; /* the next batch starts here */
};

struct lc_cpart {
  struct lc_cpart *next;
  char *topic;
  int32_t partition;
  enum lc_cpart_state state;
  int64_t spec_offset; /* for RESOLVE: CAIRN_OFFSET_EARLIEST / _LATEST */
  bool by_time;        /* for RESOLVE: timestamp lookup */
  int64_t timestamp;
  int64_t position;     /* next offset handed out; -1 while resolving */
  int64_t fetch_offset; /* next offset to fetch */
  int64_t hw;
  uint64_t epoch;
  uint64_t fetch_req; /* id of the fetch carrying it; 0: none */
  uint64_t fetch_next; /* id of the pipelined fetch behind it; 0: none */
  size_t inflight;     /* payload bytes fetch_req's answer is bringing (told early) */
  uint64_t meta_gen;  /* metadata generation at assign/seek */
  struct lc_chunk *chunks, *chunks_tail;
  size_t buffered;
  uint64_t wake_ms;
  struct lc_backoff bk;
  int err;
  bool err_reported;
};

/* A fetch in flight to one node. */
struct lc_cfetch {
  struct lc_cfetch *next;
  struct cairn_consumer *cons;
  uint64_t id;
  char addr[LC_ADDR_MAX];
  bool piped; /* sent by lc_cons_on_fetch_head */
  size_t n;
  struct lc_cfetch_part {
    char *topic;
    int32_t partition;
    uint64_t epoch;
    int64_t offset;
  } *parts;
};

struct cairn_consumer {
  struct cairn_consumer *next; /* in c->consumers */
  struct cairn_client *c;
  struct cairn_consumer_options o;
  struct lc_cpart *parts;
  struct lc_cfetch *fetches;
  uint64_t next_fetch_id;
  uint64_t epochs; /* partition epochs handed out */
  int resolving; /* ListOffsets calls in flight */
  cairn_records_cb cb;
  void *data;
  bool started;
  bool in_cb;
  struct lc_chunk *graveyard; /* chunks dropped during a callback */
  uv_timer_t kick;
  bool kick_armed;
  bool closing;
  bool closed;
  cairn_consumer_close_cb close_cb;
  void *close_data;
};

static void lc_cons_kick(struct cairn_consumer *cons);

struct cairn_consumer *lc_consumer_next(struct cairn_consumer *cons) { return cons->next; }

void cairn_consumer_options_init(struct cairn_consumer_options *o)
{
  memset(o, 0, sizeof *o);
  o->fetch_max_wait_ms = 500;
  o->fetch_min_bytes = 1;
  o->fetch_max_bytes = 16777216;
  o->partition_max_bytes = 1048576;
  o->prefetch_bytes = 4194304;
  o->offset_reset = CAIRN_OFFSET_SPEC_EARLIEST;
}

static struct lc_cpart *lc_cons_find(const struct cairn_consumer *cons, const char *topic,
                                     int32_t partition)
{
  for (struct lc_cpart *cp = cons->parts; cp != NULL; cp = cp->next) {
    if (cp->partition == partition && strcmp(cp->topic, topic) == 0) {
      return cp;
    }
  }
  return NULL;
}

static void lc_cons_drop_chunks(struct cairn_consumer *cons, struct lc_cpart *cp)
{
  struct lc_chunk *ch = cp->chunks;
  while (ch != NULL) {
    struct lc_chunk *next = ch->next;
    if (cons->in_cb) {
      ch->next = cons->graveyard; /* the callback's records may point here */
      cons->graveyard = ch;
    } else {
      lc_buf_release(ch->buf);
      free(ch);
    }
    ch = next;
  }
  cp->chunks = cp->chunks_tail = NULL;
  cp->buffered = 0;
}

static void lc_cons_bury(struct cairn_consumer *cons)
{
  while (cons->graveyard != NULL) {
    struct lc_chunk *ch = cons->graveyard;
    cons->graveyard = ch->next;
    lc_buf_release(ch->buf);
    free(ch);
  }
}

/* Points cp at offset (>= 0, or a symbolic start resolved by ListOffsets). */
static void lc_cons_set_start(struct cairn_consumer *cons, struct lc_cpart *cp, int64_t offset,
                              bool by_time, int64_t timestamp)
{
  lc_cons_drop_chunks(cons, cp);
  cp->epoch = ++cons->epochs; /* unique per consumer, across unassign/assign */
  cp->fetch_req = 0;
  cp->fetch_next = 0;
  cp->inflight = 0;
  cp->err = 0;
  cp->err_reported = false;
  cp->wake_ms = 0;
  cp->meta_gen = cons->c->meta.generation;
  cp->by_time = by_time;
  cp->timestamp = timestamp;
  if (!by_time && offset >= 0) {
    cp->state = LC_CP_FETCH;
    cp->position = cp->fetch_offset = offset;
  } else {
    cp->state = LC_CP_RESOLVE;
    cp->spec_offset = offset;
    cp->position = cp->fetch_offset = -1;
  }
  lc_cons_kick(cons);
}

int cairn_consumer_new(struct cairn_client *c, const struct cairn_consumer_options *o,
                       struct cairn_consumer **out)
{
  struct cairn_consumer_options opts;
  if (o == NULL) {
    cairn_consumer_options_init(&opts);
  } else {
    opts = *o;
  }
  if (c->closing) {
    return CAIRN_ECLOSED;
  }
  if (opts.offset_reset != -1 && opts.offset_reset != CAIRN_OFFSET_SPEC_EARLIEST &&
      opts.offset_reset != CAIRN_OFFSET_SPEC_LATEST) {
    return CAIRN_EINVAL;
  }
  if (opts.fetch_max_bytes == 0 || opts.partition_max_bytes == 0 || opts.prefetch_bytes == 0) {
    return CAIRN_EINVAL;
  }
  struct cairn_consumer *cons = calloc(1, sizeof *cons);
  if (cons == NULL) {
    return CAIRN_ENOMEM;
  }
  cons->c = c;
  cons->o = opts;
  int rv = uv_timer_init(c->loop, &cons->kick);
  if (rv != 0) {
    free(cons);
    return rv;
  }
  cons->kick.data = cons;
  cons->next = c->consumers;
  c->consumers = cons;
  c->nconsumers++;
  *out = cons;
  return 0;
}

static bool lc_cons_offset_ok(int64_t offset)
{
  return offset >= 0 || offset == CAIRN_OFFSET_EARLIEST || offset == CAIRN_OFFSET_LATEST;
}

int cairn_consumer_assign(struct cairn_consumer *cons, const char *topic, int32_t partition,
                          int64_t offset)
{
  if (cons->closing) {
    return CAIRN_ECLOSED;
  }
  if (topic == NULL || topic[0] == '\0' || partition < 0 || !lc_cons_offset_ok(offset)) {
    return CAIRN_EINVAL;
  }
  struct lc_cpart *cp = lc_cons_find(cons, topic, partition);
  if (cp == NULL) {
    if ((cp = calloc(1, sizeof *cp)) == NULL || (cp->topic = strdup(topic)) == NULL) {
      free(cp);
      return CAIRN_ENOMEM;
    }
    cp->partition = partition;
    cp->hw = -1;
    lc_backoff_init(&cp->bk, cons->c->opts.retry_backoff_ms, cons->c->opts.retry_backoff_max_ms,
                    lc_rand(cons->c));
    cp->next = cons->parts;
    cons->parts = cp;
  }
  lc_cons_set_start(cons, cp, offset, false, 0);
  return 0;
}

int cairn_consumer_unassign(struct cairn_consumer *cons, const char *topic, int32_t partition)
{
  for (struct lc_cpart **pp = &cons->parts; *pp != NULL; pp = &(*pp)->next) {
    struct lc_cpart *cp = *pp;
    if (cp->partition == partition && strcmp(cp->topic, topic) == 0) {
      *pp = cp->next;
      lc_cons_drop_chunks(cons, cp);
      free(cp->topic);
      free(cp);
      return 0;
    }
  }
  return CAIRN_ENOTFOUND;
}

int cairn_consumer_seek(struct cairn_consumer *cons, const char *topic, int32_t partition,
                        int64_t offset)
{
  if (!lc_cons_offset_ok(offset)) {
    return CAIRN_EINVAL;
  }
  struct lc_cpart *cp = lc_cons_find(cons, topic, partition);
  if (cp == NULL) {
    return CAIRN_ENOTFOUND;
  }
  lc_cons_set_start(cons, cp, offset, false, 0);
  return 0;
}

int cairn_consumer_seek_timestamp(struct cairn_consumer *cons, const char *topic,
                                  int32_t partition, int64_t timestamp_ms)
{
  struct lc_cpart *cp = lc_cons_find(cons, topic, partition);
  if (cp == NULL) {
    return CAIRN_ENOTFOUND;
  }
  lc_cons_set_start(cons, cp, CAIRN_OFFSET_LATEST, true, timestamp_ms);
  return 0;
}

int cairn_consumer_position(const struct cairn_consumer *cons, const char *topic,
                            int32_t partition, int64_t *position, int64_t *high_watermark)
{
  const struct lc_cpart *cp = lc_cons_find(cons, topic, partition);
  if (cp == NULL) {
    return CAIRN_ENOTFOUND;
  }
  *position = cp->position;
  *high_watermark = cp->hw;
  return 0;
}

uint64_t lc_consumer_epoch(const struct cairn_consumer *cons, const char *topic,
                           int32_t partition)
{
  const struct lc_cpart *cp = lc_cons_find(cons, topic, partition);
  return cp != NULL ? cp->epoch : 0;
}

int lc_consumer_held(const struct cairn_consumer *cons, const char *topic, int32_t partition,
                     size_t *buffered, size_t *inflight, bool *piped)
{
  const struct lc_cpart *cp = lc_cons_find(cons, topic, partition);
  if (cp == NULL) {
    return CAIRN_ENOTFOUND;
  }
  *buffered = cp->buffered;
  *inflight = cp->fetch_req != 0 ? cp->inflight : 0;
  *piped = cp->fetch_next != 0;
  return 0;
}

/* ---- resolving start offsets ---- */

struct lc_cresolve {
  struct cairn_consumer *cons;
  char *topic;
  int32_t partition;
  uint64_t epoch;
  bool by_time;
};

/* Leaves cp to retry later after err. */
static void lc_cons_backoff(struct cairn_consumer *cons, struct lc_cpart *cp, int err)
{
  if (lc_needs_refresh(err)) {
    lc_meta_invalidate(cons->c);
  }
  cp->wake_ms = lc_now(cons->c) + lc_backoff_next(&cp->bk);
}

static void lc_cons_pause(struct lc_cpart *cp, int err)
{
  cp->state = LC_CP_PAUSED;
  cp->err = err;
  cp->err_reported = false;
}

static void lc_cons_on_offset(struct cairn_client *c, int status, const char *errmsg,
                              int64_t offset, int64_t timestamp, void *data)
{
  struct lc_cresolve *r = data;
  struct cairn_consumer *cons = r->cons;
  cons->resolving--;
  struct lc_cpart *cp = lc_cons_find(cons, r->topic, r->partition);
  if (cp != NULL && cp->epoch == r->epoch && cp->state == LC_CP_RESOLVING && !cons->closing) {
    if (status == 0 && offset >= 0) {
      cp->state = LC_CP_FETCH;
      cp->position = cp->fetch_offset = offset;
      lc_backoff_reset(&cp->bk);
    } else if (status == 0) {
      /* No record at or after the timestamp: start at the end. */
      cp->state = LC_CP_RESOLVE;
      cp->by_time = false;
      cp->spec_offset = CAIRN_OFFSET_LATEST;
    } else if (status == CAIRN_EUNKNOWN_TOPIC || status == CAIRN_EUNKNOWN_PARTITION) {
      lc_cons_pause(cp, status);
    } else {
      cp->state = LC_CP_RESOLVE;
      lc_cons_backoff(cons, cp, status);
    }
  }
  free(r->topic);
  free(r);
  lc_cons_kick(cons);
}

static void lc_cons_resolve(struct cairn_consumer *cons, struct lc_cpart *cp)
{
  struct lc_cresolve *r = calloc(1, sizeof *r);
  if (r == NULL || (r->topic = strdup(cp->topic)) == NULL) {
    free(r);
    return; /* tried again next round */
  }
  r->cons = cons;
  r->partition = cp->partition;
  r->epoch = cp->epoch;
  enum cairn_offset_spec spec = cp->by_time ? CAIRN_OFFSET_SPEC_TIMESTAMP
                                : cp->spec_offset == CAIRN_OFFSET_EARLIEST
                                    ? CAIRN_OFFSET_SPEC_EARLIEST
                                    : CAIRN_OFFSET_SPEC_LATEST;
  int rv = cairn_list_offsets(cons->c, cp->topic, cp->partition, spec, cp->timestamp,
                              lc_cons_on_offset, r);
  if (rv != 0) {
    free(r->topic);
    free(r);
    cp->wake_ms = lc_now(cons->c) + lc_backoff_next(&cp->bk);
    return;
  }
  cp->state = LC_CP_RESOLVING;
  cons->resolving++;
}

/* ---- fetching ---- */

static void lc_cons_fetch_free(struct lc_cfetch *f)
{
  for (size_t i = 0; i < f->n; i++) {
    free(f->parts[i].topic);
  }
  free(f->parts);
  free(f);
}

/* Appends the whole batches of data[0..len) (inside buf) to cp and moves
 * its fetch offset past them. Takes a reference to buf (always consumes
 * it). */
static void lc_cons_add_chunk(struct lc_cpart *cp, struct lc_buf *buf, const uint8_t *data,
                              size_t len)
{
  size_t pos = 0;
  int64_t next = cp->fetch_offset;
  while (pos < len) {
    size_t size;
    int err;
    if (batch_probe(data + pos, len - pos, SIZE_MAX, &size, &err) != BATCH_PROBE_OK) {
      break; /* a partial batch at the end (or garbage): fetched again */
    }
    struct batch_header h;
    batch_header_decode(data + pos, &h);
    if (h.base_offset + h.last_offset_delta + 1 > next) {
      next = h.base_offset + h.last_offset_delta + 1;
    }
    pos += size;
  }
  if (pos == 0) {
    lc_buf_release(buf);
    return;
  }
  struct lc_chunk *ch = calloc(1, sizeof *ch);
  if (ch == NULL) {
    lc_buf_release(buf);
    return; /* fetched again from the same offset */
  }
  ch->buf = buf;
  ch->data = data;
  ch->len = pos;
  if (cp->chunks_tail != NULL) {
    cp->chunks_tail->next = ch;
  } else {
    cp->chunks = ch;
  }
  cp->chunks_tail = ch;
  cp->buffered += pos;
  cp->fetch_offset = next;
}

/* fp's result in resp, or NULL. */
static const Cairn__Client__FetchPartitionResult *
lc_cons_result(const Cairn__Client__FetchResponse *resp, const struct lc_cfetch_part *fp)
{
  for (size_t k = 0; k < resp->n_partitions; k++) {
    if (resp->partitions[k]->topic != NULL &&
        strcmp(resp->partitions[k]->topic, fp->topic) == 0 &&
        resp->partitions[k]->partition == (uint32_t)fp->partition) {
      return resp->partitions[k];
    }
  }
  return NULL;
}

static void lc_cons_on_fetch(struct cairn_client *c, int status, Cairn__Client__Envelope *env,
                             const uint8_t *payload, size_t len, struct lc_buf *buf,
                              void *data)
{
  struct lc_cfetch *f = data;
  struct cairn_consumer *cons = f->cons;
  for (struct lc_cfetch **pp = &cons->fetches; *pp != NULL; pp = &(*pp)->next) {
    if (*pp == f) {
      *pp = f->next;
      break;
    }
  }
  const Cairn__Client__FetchResponse *resp = NULL;
  if (status == 0) {
    if (env->body_case != CAIRN__CLIENT__ENVELOPE__BODY_FETCH_RESP) {
      status = CAIRN_EPROTOCOL;
    } else {
      resp = env->fetch_resp;
      if (resp->error != NULL && resp->error->code != CAIRN__CLIENT__ERROR_CODE__OK) {
        status = lc_wire_err((int)resp->error->code);
      }
    }
  }
  size_t pos = 0;
  for (size_t i = 0; i < f->n; i++) {
    struct lc_cfetch_part *fp = &f->parts[i];
    const Cairn__Client__FetchPartitionResult *pr =
        resp != NULL && status == 0 ? lc_cons_result(resp, fp) : NULL;
    /* This partition's share of the payload (in request order). */
    size_t share = 0;
    if (pr != NULL) {
      share = pr->bytes;
      if (share > len - pos) {
        share = len - pos;
      }
    }
    const uint8_t *bytes = payload != NULL ? payload + pos : NULL;
    pos += share;
    struct lc_cpart *cp = lc_cons_find(cons, fp->topic, fp->partition);
    if (cp == NULL) {
      continue; /* unassigned since */
    }
    bool piped = f->piped;
    if (cp->fetch_req == f->id) {
      cp->fetch_req = cp->fetch_next; /* the pipelined one is current now */
      cp->fetch_next = 0;
      cp->inflight = 0;
    } else if (cp->fetch_next == f->id) {
      cp->fetch_next = 0; /* failed before the current one (a closing conn) */
    } else {
      continue; /* moved on since */
    }
    if (cp->epoch != fp->epoch || cp->state != LC_CP_FETCH || cons->closing) {
      continue;
    }
    int err = status != 0 ? status : pr == NULL ? CAIRN_EPROTOCOL
                                   : pr->error != NULL ? lc_wire_err((int)pr->error->code)
                                                       : 0;
    if (err == 0) {
      cp->hw = pr->high_watermark;
      lc_backoff_reset(&cp->bk);
      if (share > 0 && cp->fetch_offset != fp->offset && piped) {
        c->stats.fetch_pipe_lost++;
      }
      if (share > 0 && cp->fetch_offset == fp->offset) {
        if (buf != NULL && share * LC_CONS_SHARE_MIN >= buf->cap) {
          lc_cons_add_chunk(cp, lc_buf_ref(buf), bytes, share);
        } else {
          struct lc_buf *copy = lc_buf_new(share);
          if (copy != NULL) { /* else fetched again from the same offset */
            memcpy(copy->data, bytes, share);
            lc_cons_add_chunk(cp, copy, copy->data, share);
          }
        }
      }
      continue;
    }
    if (err == CAIRN_ENOTLEADER) {
      c->stats.not_leader++;
      lc_meta_set_leader(c, cp->topic, cp->partition, pr->leader_id, pr->leader_address);
      cp->wake_ms = lc_now(c) + 1;
      if (pr->leader_id == 0) {
        lc_cons_backoff(cons, cp, err);
      }
    } else if (err == CAIRN_EOFFSET) {
      if (cons->o.offset_reset < 0) {
        lc_cons_pause(cp, CAIRN_EOFFSET);
      } else {
        lc_cons_drop_chunks(cons, cp);
        cp->state = LC_CP_RESOLVE;
        cp->by_time = false;
        cp->spec_offset = cons->o.offset_reset == CAIRN_OFFSET_SPEC_EARLIEST
                              ? CAIRN_OFFSET_EARLIEST
                              : CAIRN_OFFSET_LATEST;
        cp->position = -1;
      }
    } else if (lc_retriable(err) || err == CAIRN_EUNKNOWN_TOPIC ||
               err == CAIRN_EUNKNOWN_PARTITION) {
      /* Unknown at this node: the routing decides once metadata is fresh. */
      lc_meta_invalidate(c);
      lc_cons_backoff(cons, cp, err);
    } else {
      lc_cons_pause(cp, err);
    }
  }
  lc_cons_fetch_free(f);
  lc_cons_kick(cons);
}

static void lc_cons_on_fetch_head(struct cairn_client *c, const Cairn__Client__Envelope *env,
                                  void *data);

/* Sends f (addr and parts, with their offsets, filled) as a FetchRequest.
 * Returns 0 (f is in cons->fetches until lc_cons_on_fetch frees it) or a
 * negative code (f untouched: the caller frees it). */
static int lc_cons_send(struct cairn_consumer *cons, struct lc_cfetch *f)
{
  struct cairn_client *c = cons->c;
  size_t n = f->n > 0 ? f->n : 1;
  Cairn__Client__FetchPartition *fps = calloc(n, sizeof *fps);
  Cairn__Client__FetchPartition **fpp = calloc(n, sizeof *fpp);
  if (fps == NULL || fpp == NULL) {
    free(fps);
    free(fpp);
    return CAIRN_ENOMEM;
  }
  for (size_t k = 0; k < f->n; k++) {
    cairn__client__fetch_partition__init(&fps[k]);
    fps[k].topic = f->parts[k].topic;
    fps[k].partition = (uint32_t)f->parts[k].partition;
    fps[k].offset = f->parts[k].offset;
    fps[k].max_bytes = cons->o.partition_max_bytes;
    fpp[k] = &fps[k];
  }
  Cairn__Client__FetchRequest req = CAIRN__CLIENT__FETCH_REQUEST__INIT;
  req.max_wait_ms = cons->closing ? 0 : cons->o.fetch_max_wait_ms;
  req.min_bytes = cons->o.fetch_min_bytes;
  req.max_bytes = cons->o.fetch_max_bytes;
  req.n_partitions = f->n;
  req.partitions = fpp;
  Cairn__Client__Envelope env = CAIRN__CLIENT__ENVELOPE__INIT;
  env.api = CAIRN__CLIENT__API__API_FETCH;
  env.body_case = CAIRN__CLIENT__ENVELOPE__BODY_FETCH_REQ;
  env.fetch_req = &req;
  int rv = lc_call_head(c, f->addr, &env, c->opts.request_timeout_ms + cons->o.fetch_max_wait_ms,
                        cons->o.fetch_pipeline ? lc_cons_on_fetch_head : NULL, lc_cons_on_fetch,
                        f);
  free(fps);
  free(fpp);
  if (rv == 0) {
    f->next = cons->fetches;
    cons->fetches = f;
  }
  return rv;
}

/* The envelope of f's answer, its payload still arriving: sends the next
 * fetch at once for the partitions that have more to read and room in
 * their prefetch window (the top of this file). */
static void lc_cons_on_fetch_head(struct cairn_client *c, const Cairn__Client__Envelope *env,
                                  void *data)
{
  struct lc_cfetch *f = data;
  struct cairn_consumer *cons = f->cons;
  if (cons->closing || env->body_case != CAIRN__CLIENT__ENVELOPE__BODY_FETCH_RESP) {
    return;
  }
  const Cairn__Client__FetchResponse *resp = env->fetch_resp;
  if (resp->error != NULL && resp->error->code != CAIRN__CLIENT__ERROR_CODE__OK) {
    return;
  }
  struct lc_cfetch *next = calloc(1, sizeof *next);
  if (next == NULL || (next->parts = calloc(f->n > 0 ? f->n : 1, sizeof *next->parts)) == NULL) {
    free(next);
    return; /* the next fetch goes out once the answer is whole */
  }
  next->cons = cons;
  next->piped = true;
  lc_strlcpy(next->addr, f->addr, sizeof next->addr);
  size_t k = 0;
  for (size_t i = 0; i < f->n; i++) {
    const struct lc_cfetch_part *fp = &f->parts[i];
    const Cairn__Client__FetchPartitionResult *pr = lc_cons_result(resp, fp);
    struct lc_cpart *cp = lc_cons_find(cons, fp->topic, fp->partition);
    if (pr == NULL || cp == NULL || cp->fetch_req != f->id || cp->epoch != fp->epoch ||
        cp->state != LC_CP_FETCH ||
        (pr->error != NULL && pr->error->code != CAIRN__CLIENT__ERROR_CODE__OK)) {
      continue;
    }
    cp->inflight = pr->bytes;
    /* next_offset 0 (a node without it) never passes the first test. */
    if (cp->fetch_next != 0 || pr->bytes == 0 || pr->next_offset <= fp->offset ||
        pr->next_offset >= pr->high_watermark ||
        cp->buffered + cp->inflight >= cons->o.prefetch_bytes) {
      continue;
    }
    if ((next->parts[k].topic = strdup(cp->topic)) == NULL) {
      break;
    }
    next->parts[k].partition = cp->partition;
    next->parts[k].epoch = cp->epoch;
    next->parts[k].offset = pr->next_offset;
    k++;
  }
  next->n = k;
  next->id = ++cons->next_fetch_id;
  if (k == 0 || lc_cons_send(cons, next) != 0) {
    lc_cons_fetch_free(next);
    return;
  }
  c->stats.fetch_piped++;
  for (size_t i = 0; i < k; i++) {
    lc_cons_find(cons, next->parts[i].topic, next->parts[i].partition)->fetch_next = next->id;
  }
}

static bool lc_cons_node_busy(const struct cairn_consumer *cons, const char *addr)
{
  for (const struct lc_cfetch *f = cons->fetches; f != NULL; f = f->next) {
    if (strcmp(f->addr, addr) == 0) {
      return true;
    }
  }
  return false;
}

/* Sends one Fetch per leader node that has fetchable partitions and no
 * fetch in flight. */
static void lc_cons_fetch_all(struct cairn_consumer *cons)
{
  struct cairn_client *c = cons->c;
  uint64_t now = lc_now(c);
  for (;;) {
    /* Pick the first node with work, then gather all its partitions. */
    const char *addr = NULL;
    size_t n = 0;
    for (struct lc_cpart *cp = cons->parts; cp != NULL; cp = cp->next) {
      if (cp->state != LC_CP_FETCH || cp->fetch_req != 0 || now < cp->wake_ms ||
          cp->buffered >= cons->o.prefetch_bytes) {
        continue;
      }
      const char *a;
      int rv = lc_route(c, cp->topic, cp->partition, cp->meta_gen, &a);
      if (rv < 0) {
        lc_cons_pause(cp, rv);
        continue;
      }
      if (rv == LC_ROUTE_WAIT) {
        lc_cons_backoff(cons, cp, CAIRN_ENOTLEADER);
        continue;
      }
      if (lc_cons_node_busy(cons, a)) {
        continue;
      }
      if (addr == NULL) {
        addr = a;
      }
      if (strcmp(addr, a) == 0) {
        n++;
      }
    }
    if (addr == NULL) {
      return;
    }
    struct lc_cfetch *f = calloc(1, sizeof *f);
    if (f == NULL || (f->parts = calloc(n, sizeof *f->parts)) == NULL) {
      free(f);
      return;
    }
    f->cons = cons;
    f->id = ++cons->next_fetch_id;
    lc_strlcpy(f->addr, addr, sizeof f->addr);
    size_t k = 0;
    for (struct lc_cpart *cp = cons->parts; cp != NULL && k < n; cp = cp->next) {
      const char *a;
      if (cp->state != LC_CP_FETCH || cp->fetch_req != 0 || now < cp->wake_ms ||
          cp->buffered >= cons->o.prefetch_bytes ||
          lc_route(c, cp->topic, cp->partition, cp->meta_gen, &a) != 0 ||
          strcmp(a, f->addr) != 0) {
        continue;
      }
      if ((f->parts[k].topic = strdup(cp->topic)) == NULL) {
        break;
      }
      f->parts[k].partition = cp->partition;
      f->parts[k].epoch = cp->epoch;
      f->parts[k].offset = cp->fetch_offset;
      cp->fetch_req = f->id;
      k++;
    }
    f->n = k;
    int rv = lc_cons_send(cons, f);
    if (rv != 0) {
      for (struct lc_cpart *cp = cons->parts; cp != NULL; cp = cp->next) {
        if (cp->fetch_req == f->id) {
          cp->fetch_req = 0;
          lc_cons_backoff(cons, cp, rv);
        }
      }
      lc_cons_fetch_free(f);
      continue;
    }
  }
}

/* ---- handing records out ---- */

/* Decodes the next batch of cp's first chunk into records with offset >=
 * position and hands them to the callback. Returns whether it did work. */
static bool lc_cons_deliver_one(struct cairn_consumer *cons, struct lc_cpart *cp)
{
  struct lc_chunk *ch = cp->chunks;
  if (ch == NULL) {
    return false;
  }
  const uint8_t *p = ch->data + ch->pos;
  size_t size;
  int err = 0;
  if (batch_probe(p, ch->len - ch->pos, SIZE_MAX, &size, &err) != BATCH_PROBE_OK) {
    lc_cons_drop_chunks(cons, cp);
    lc_cons_pause(cp, CAIRN_ECORRUPT);
    return true;
  }
  /* Take the batch off the chunk first: the callback may seek. */
  ch->pos += size;
  cp->buffered -= size;
  if (ch->pos >= ch->len) {
    cp->chunks = ch->next;
    if (cp->chunks == NULL) {
      cp->chunks_tail = NULL;
    }
    ch->next = cons->graveyard;
    cons->graveyard = ch;
  }
  uint8_t *plain = NULL;
  size_t plain_len = size;
  const uint8_t *b = p;
  struct batch_header h;
  batch_header_decode(p, &h);
  int rv = batch_check_crc(p, size);
  if (rv == 0 && (h.attributes & BATCH_ATTR_CODEC_MASK) != BATCH_CODEC_NONE) {
    rv = codec_batch_decompress(p, size, BATCH_DEFAULT_MAX_BYTES, &plain, &plain_len);
    b = plain;
  }
  struct batch_iter it;
  if (rv == 0) {
    rv = batch_iter_init(&it, b, plain_len);
  }
  size_t cap = h.record_count > 0 ? (size_t)h.record_count : 1;
  struct cairn_record *recs = rv == 0 ? calloc(cap, sizeof *recs) : NULL;
  struct cairn_header *hdrs = NULL;
  size_t nrec = 0, nhdr = 0, hcap = 0;
  if (rv == 0 && recs == NULL) {
    rv = CAIRN_ENOMEM;
  }
  struct batch_record r;
  while (rv == 0 && nrec < cap && (rv = batch_iter_next(&it, &r)) == 1) {
    rv = 0;
    if (r.offset < cp->position) {
      continue;
    }
    struct cairn_record *cr = &recs[nrec++];
    cr->topic = cp->topic;
    cr->partition = cp->partition;
    cr->offset = r.offset;
    cr->timestamp_ms = r.timestamp;
    cr->key = r.key;
    cr->key_len = r.key_len;
    cr->value = r.value;
    cr->value_len = r.value_len;
    cr->header_count = (size_t)r.header_count;
    /* Headers go into one array for the batch; records keep indexes
     * until it stops moving. */
    cr->headers = (const struct cairn_header *)(uintptr_t)nhdr;
    for (int32_t i = 0; i < r.header_count && rv == 0; i++) {
      if (nhdr == hcap) {
        hcap = hcap == 0 ? 16 : hcap * 2;
        struct cairn_header *nh = realloc(hdrs, hcap * sizeof *nh);
        if (nh == NULL) {
          rv = CAIRN_ENOMEM;
          break;
        }
        hdrs = nh;
      }
      const uint8_t *k, *v;
      size_t kl, vl;
      rv = batch_record_header(&r, i, &k, &kl, &v, &vl);
      hdrs[nhdr++] = (struct cairn_header){k, kl, v, vl};
    }
  }
  if (rv < 0) {
    free(recs);
    free(hdrs);
    free(plain);
    lc_cons_drop_chunks(cons, cp);
    lc_cons_pause(cp, rv == CAIRN_ENOMEM ? rv : CAIRN_ECORRUPT);
    return true;
  }
  for (size_t i = 0; i < nrec; i++) {
    size_t idx = (size_t)(uintptr_t)recs[i].headers;
    recs[i].headers = recs[i].header_count > 0 ? &hdrs[idx] : NULL;
  }
  int64_t end = h.base_offset + h.last_offset_delta + 1;
  if (end > cp->position) {
    cp->position = end;
  }
  if (nrec > 0) {
    cons->in_cb = true;
    cons->cb(cons, 0, cp->topic, cp->partition, recs, nrec, cons->data);
    cons->in_cb = false;
  }
  free(recs);
  free(hdrs);
  free(plain);
  lc_cons_bury(cons);
  return true;
}

/* ---- the round ---- */

static void lc_cons_free(uv_handle_t *h)
{
  struct cairn_consumer *cons = h->data;
  while (cons->parts != NULL) {
    struct lc_cpart *cp = cons->parts;
    cons->parts = cp->next;
    lc_cons_drop_chunks(cons, cp);
    free(cp->topic);
    free(cp);
  }
  lc_cons_bury(cons);
  if (cons->close_cb != NULL) {
    cons->close_cb(cons, cons->close_data); /* cons must not be used from here on */
  }
  free(cons);
}

static void lc_cons_round(struct cairn_consumer *cons)
{
  struct cairn_client *c = cons->c;
  if (cons->closed) {
    return;
  }
  if (cons->closing) {
    if (cons->fetches == NULL && cons->resolving == 0) {
      struct cairn_consumer **pp = &c->consumers;
      while (*pp != cons) {
        pp = &(*pp)->next;
      }
      *pp = cons->next;
      c->nconsumers--;
      cons->closed = true;
      uv_timer_stop(&cons->kick);
      uv_close((uv_handle_t *)&cons->kick, lc_cons_free);
    }
    return;
  }
  uint64_t now = lc_now(c);
  for (struct lc_cpart *cp = cons->parts; cp != NULL; cp = cp->next) {
    if (cp->state == LC_CP_RESOLVE && now >= cp->wake_ms) {
      lc_cons_resolve(cons, cp);
    }
  }
  lc_cons_fetch_all(cons);
  /* Hand out at most one batch per partition per round, then yield. */
  bool more = false;
  for (struct lc_cpart *cp = cons->parts; cp != NULL && cons->started;) {
    struct lc_cpart *next = cp->next; /* the callback may unassign cp */
    if (cp->state == LC_CP_PAUSED && !cp->err_reported) {
      cp->err_reported = true;
      cons->in_cb = true;
      cons->cb(cons, cp->err, cp->topic, cp->partition, NULL, 0, cons->data);
      cons->in_cb = false;
      lc_cons_bury(cons);
      more = true;
    } else if (cp->state == LC_CP_FETCH && lc_cons_deliver_one(cons, cp)) {
      more = true;
    }
    if (cons->closing) {
      break;
    }
    cp = next;
  }
  if (more) {
    lc_cons_kick(cons);
  }
}

static void lc_cons_on_kick(uv_timer_t *t)
{
  struct cairn_consumer *cons = t->data;
  cons->kick_armed = false;
  lc_cons_round(cons);
}

static void lc_cons_kick(struct cairn_consumer *cons)
{
  if (!cons->kick_armed && !cons->closed) {
    cons->kick_armed = true;
    uv_timer_start(&cons->kick, lc_cons_on_kick, 0, 0);
  }
}

void lc_consumer_tick(struct cairn_consumer *cons) { lc_cons_round(cons); }

int cairn_consumer_start(struct cairn_consumer *cons, cairn_records_cb cb, void *data)
{
  if (cons->closing) {
    return CAIRN_ECLOSED;
  }
  if (cb == NULL) {
    return CAIRN_EINVAL;
  }
  cons->cb = cb;
  cons->data = data;
  cons->started = true;
  lc_cons_kick(cons);
  return 0;
}

void cairn_consumer_stop(struct cairn_consumer *cons) { cons->started = false; }

void cairn_consumer_close(struct cairn_consumer *cons, cairn_consumer_close_cb cb, void *data)
{
  if (cons->closing) {
    return;
  }
  cons->closing = true;
  cons->started = false;
  cons->close_cb = cb;
  cons->close_data = data;
  lc_cons_kick(cons);
}
