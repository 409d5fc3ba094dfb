/* kafka_handle_fetch.c - Fetch v4-11 as one native FetchRequest (the same
 * store reads, limits and long poll: max_wait_ms, min_bytes, at least one
 * whole batch even above max_bytes), its regions then read and each
 * stored batch converted to Kafka's layout (kafka_batch.h).
 *
 * This step reads the regions on the loop thread (pread of what the store
 * just served, normally from the page cache) straight into the answer,
 * instead of sendfile: each batch's header is converted, its records land
 * in place, and Kafka's CRC is derived from the stored one without reading
 * them. docs/kafka.md has the next step, a stored format whose bytes from
 * attributes on are Kafka's.
 *
 * No fetch sessions: session_id 0 in every answer (a client then sends
 * full requests); a request naming a session gets FETCH_SESSION_ID_NOT_FOUND. */
#include "kafka/kafka_handlers.h"

#include "common/err.h"
#include "common/log.h"
#include "format/batch.h"
#include "format/endian.h"
#include "kafka/kafka_batch.h"
#include "kafka/kafka_bufpool.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define KAFKA_FETCH_MAX_BYTES (64u * 1024 * 1024) /* of one answer's records */
#define KAFKA_FETCH_MAX_PARTS 10000

/* Fetch's error for a native code. A new leader that has not applied its
 * term's first entry yet (REPLICA_NOT_AVAILABLE, LEADER_NOT_AVAILABLE
 * elsewhere) is NOT_LEADER_OR_FOLLOWER here, as Apache Kafka answers a
 * fetch its replica cannot serve yet: every client refreshes its metadata
 * and fetches again, while kafka-python's fetcher raises
 * LeaderNotAvailableError out of poll() on LEADER_NOT_AVAILABLE (a fresh
 * topic's or partition's first fetches hit it). */
static int16_t kafka_fetch_err(Cairn__Client__ErrorCode code)
{
  if (code == CAIRN__CLIENT__ERROR_CODE__REPLICA_NOT_AVAILABLE) {
    return KAFKA_ERR_NOT_LEADER_OR_FOLLOWER;
  }
  return kafka_err_from_wire(code);
}

struct kafka_fetch_part {
  char topic[KAFKA_TOPIC_MAX + 1];
  int32_t index;
  int16_t err; /* set before relaying: not sent */
  size_t topic_at;
};

struct kafka_fetch_op {
  struct kafka_fetch_part *parts;
  size_t nparts, ntopics;
  Cairn__Client__Envelope env;
  Cairn__Client__FetchRequest fr;
  Cairn__Client__FetchPartition *fps;
  Cairn__Client__FetchPartition **fpp;
  int16_t top_err;
};

static void kafka_fetch_op_free(void *p)
{
  struct kafka_fetch_op *op = p;
  if (op == NULL) {
    return;
  }
  free(op->parts);
  free(op->fps);
  free(op->fpp);
  free(op);
}

/* The native answer's records, read in order straight into the Kafka
 * answer: memory parts are copied, file parts read with pread, so each
 * byte is copied once on its way (no gather buffer). */
struct kafka_fetch_src {
  const struct conn_part *parts;
  size_t nparts;
  size_t i;  /* the part being read */
  size_t at; /* bytes of parts[i] already read */
};

/* Reads the next n bytes into dst (NULL: skips them). Returns 0,
 * CAIRN_ETRUNCATED (the parts end first) or a negative errno. */
static int kafka_fetch_src_read(struct kafka_fetch_src *s, uint8_t *dst, size_t n)
{
  while (n > 0) {
    if (s->i >= s->nparts) {
      return CAIRN_ETRUNCATED;
    }
    const struct conn_part *p = &s->parts[s->i];
    size_t k = p->len - s->at < n ? p->len - s->at : n;
    if (dst != NULL && p->kind == CONN_PART_MEM) {
      memcpy(dst, (const uint8_t *)p->base + s->at, k);
    } else if (dst != NULL) {
      for (size_t got = 0; got < k;) {
        ssize_t r = pread(p->fd, dst + got, k - got, p->offset + (off_t)(s->at + got));
        if (r <= 0) {
          return r < 0 ? -errno : CAIRN_ETRUNCATED;
        }
        got += (size_t)r;
      }
    }
    s->at += k;
    n -= k;
    if (dst != NULL) {
      dst += k;
    }
    if (s->at == p->len) {
      s->i++;
      s->at = 0;
    }
  }
  return 0;
}

/* Appends the batches of the next len bytes of src, each in Kafka's form:
 * its header converted (kafka_batch_header_from_cairn), its records read
 * in place. */
static int kafka_fetch_put_batches(struct kafka_buf *b, struct kafka_fetch_src *src, size_t len)
{
  size_t left = len;
  while (left >= BATCH_HEADER_SIZE) {
    uint8_t h[BATCH_HEADER_SIZE];
    int rv = kafka_fetch_src_read(src, h, sizeof h);
    if (rv != 0) {
      return rv;
    }
    size_t size = (size_t)le_get32(h + BATCH_OFF_LENGTH) + BATCH_LENGTH_FIELD_END;
    if (size < BATCH_HEADER_SIZE || size > left) {
      return CAIRN_ECORRUPT; /* the store verified these: never expected */
    }
    size_t off = kafka_buf_reserve(b, size - KAFKA_BATCH_GROWTH);
    if (off == SIZE_MAX) {
      return b->err;
    }
    rv = kafka_batch_header_from_cairn(h, size, b->p + off);
    if (rv == 0) {
      rv =
          kafka_fetch_src_read(src, b->p + off + KAFKA_BATCH_HEADER_SIZE, size - BATCH_HEADER_SIZE);
    }
    if (rv != 0) {
      return rv;
    }
    left -= size;
  }
  return kafka_fetch_src_read(src, NULL, left); /* never expected: a partial batch */
}

/* Appends one partition's records field (int32 size, then the batches of
 * the next len bytes of src). When the store's bytes cannot be read, the
 * field is left empty, *err becomes STORAGE_ERROR and src is emptied (the
 * partitions after this one cannot be found in it any more). Returns 0 or
 * b->err (the answer cannot be built). */
static int kafka_fetch_put_records(struct kafka_buf *b, struct kafka_fetch_src *src, size_t len,
                                   int16_t *err)
{
  size_t at_size = kafka_buf_reserve(b, 4);
  size_t start = b->len;
  int rv = kafka_fetch_put_batches(b, src, len);
  if (rv != 0 && b->err == 0) {
    log_warn("kafka", "fetch: reading the regions served: %s", cairn_strerror(rv));
    b->len = start;
    src->nparts = 0;
    *err = kafka_err_from_wire(CAIRN__CLIENT__ERROR_CODE__STORAGE_ERROR);
  }
  if (b->err != 0) {
    return b->err;
  }
  kafka_buf_set_i32(b, at_size, (int32_t)(b->len - start));
  return 0;
}

static void kafka_fetch_answer(struct kafka_req *kr, const Cairn__Client__FetchResponse *r,
                               int16_t all_err, struct kafka_fetch_src *src, size_t data_len)
{
  struct kafka_fetch_op *op = kr->op;
  int16_t v = kr->h.api_version;
  /* Sized ahead (records never grow in conversion; a partition's fixed
   * fields and its topic's name are bounded): one pooled buffer. */
  size_t need = 64 + data_len;
  for (size_t i = 0; i < op->nparts; i++) {
    need += 64 + strlen(op->parts[i].topic);
  }
  struct kafka_buf b;
  if (kafka_buf_init_cap(&b, need) != 0) {
    kafka_buf_init(&b); /* grows as needed, or latches ENOMEM */
  }
  kafka_put_i32(&b, 0); /* throttle_time_ms */
  if (v >= 7) {
    kafka_put_err(&b, op->top_err);
    kafka_put_i32(&b, 0); /* session_id: none */
  }
  kafka_put_array_len(&b, op->top_err != 0 ? 0 : (int32_t)op->ntopics);
  size_t native = 0, data_at = 0;
  for (size_t t = 0, i = 0; op->top_err == 0 && t < op->ntopics; t++) {
    size_t first = i;
    while (i < op->nparts && op->parts[i].topic_at == t) {
      i++;
    }
    kafka_put_string(&b, op->parts[first].topic);
    kafka_put_array_len(&b, (int32_t)(i - first));
    for (size_t k = first; k < i; k++) {
      const struct kafka_fetch_part *fp = &op->parts[k];
      int16_t err = fp->err;
      const Cairn__Client__FetchPartitionResult *res = NULL;
      if (err == KAFKA_ERR_NONE) {
        res = r != NULL && native < r->n_partitions ? r->partitions[native] : NULL;
        native++;
        err = res == NULL ? (all_err != 0 ? all_err : KAFKA_ERR_UNKNOWN_SERVER)
                          : kafka_fetch_err(res->error != NULL ? res->error->code : 0);
      }
      int64_t hw = res != NULL ? res->high_watermark : -1;
      kafka_put_i32(&b, fp->index);
      size_t err_at = b.len;
      kafka_put_err(&b, err);
      kafka_put_i64(&b, hw);
      kafka_put_i64(&b, hw); /* last_stable_offset: no transactions */
      if (v >= 5) {
        kafka_put_i64(&b, res != NULL ? res->log_start_offset : -1);
      }
      kafka_put_array_len(&b, 0); /* aborted_transactions */
      if (v >= 11) {
        kafka_put_i32(&b, -1); /* preferred_read_replica: the leader */
      }
      size_t bytes = res != NULL ? res->bytes : 0;
      if (bytes > data_len - data_at) {
        bytes = data_len - data_at;
      }
      int16_t read_err = KAFKA_ERR_NONE;
      data_at += bytes;
      if (kafka_fetch_put_records(&b, src, bytes, &read_err) == 0 && read_err != KAFKA_ERR_NONE) {
        kafka_put_be16(b.p + err_at, (uint16_t)read_err);
      }
    }
  }
  kafka_req_respond(kr, &b);
}

static void kafka_fetch_on_answer(struct kafka_req *kr, const Cairn__Client__Envelope *env,
                                  const struct conn_part *parts, size_t nparts)
{
  const Cairn__Client__FetchResponse *r =
      env != NULL && env->body_case == CAIRN__CLIENT__ENVELOPE__BODY_FETCH_RESP ? env->fetch_resp
                                                                                : NULL;
  Cairn__Client__ErrorCode code = kafka_relay_error(env);
  if (code == 0 && r != NULL && r->error != NULL && r->error->code != 0) {
    code = r->error->code;
  }
  size_t data_len = 0;
  for (size_t i = 0; code == 0 && i < nparts; i++) {
    data_len += parts[i].len;
  }
  /* On an error the answer carries no records: an empty source. */
  struct kafka_fetch_src src = {.parts = parts, .nparts = code == 0 ? nparts : 0};
  kafka_fetch_answer(kr, code == 0 ? r : NULL, code == 0 ? 0 : kafka_fetch_err(code), &src,
                     data_len);
  for (size_t i = 0; i < nparts; i++) {
    if (parts[i].release != NULL) {
      parts[i].release(parts[i].arg, 0);
    }
  }
}

void kafka_handle_fetch(struct kafka_req *kr)
{
  int16_t v = kr->h.api_version;
  struct kafka_reader *r = &kr->body;
  struct kafka_fetch_op *op = calloc(1, sizeof *op);
  if (op == NULL) {
    kafka_req_malformed(kr);
    return;
  }
  kr->op = op;
  kr->op_free = kafka_fetch_op_free;
  cairn__client__fetch_request__init(&op->fr);
  (void)kafka_get_i32(r); /* replica_id: consumers send -1 */
  int32_t max_wait = kafka_get_i32(r);
  int32_t min_bytes = kafka_get_i32(r);
  int32_t max_bytes = kafka_get_i32(r);
  (void)kafka_get_i8(r); /* isolation_level: everything is committed */
  int32_t session_id = 0, session_epoch = -1;
  if (v >= 7) {
    session_id = kafka_get_i32(r);
    session_epoch = kafka_get_i32(r);
  }
  int32_t ntopics = kafka_get_array_len(r, 6);
  size_t cap = 0;
  for (int32_t t = 0; t < ntopics && r->err == 0; t++) {
    struct kafka_str name = kafka_get_string(r);
    int32_t np = kafka_get_array_len(r, 16);
    if (r->err != 0 || op->nparts + (size_t)np > KAFKA_FETCH_MAX_PARTS) {
      kafka_req_malformed(kr);
      return;
    }
    if (kafka_reserve((void **)&op->parts, &cap, op->nparts + (size_t)np, sizeof *op->parts) != 0) {
      kafka_req_malformed(kr);
      return;
    }
    for (int32_t i = 0; i < np && r->err == 0; i++) {
      struct kafka_fetch_part *fp = &op->parts[op->nparts++];
      memset(fp, 0, sizeof *fp);
      fp->topic_at = op->ntopics;
      fp->index = kafka_get_i32(r);
      if (v >= 9) {
        (void)kafka_get_i32(r); /* current_leader_epoch: Metadata here has none */
      }
      int64_t offset = kafka_get_i64(r);
      if (v >= 5) {
        (void)kafka_get_i64(r); /* log_start_offset: a follower's */
      }
      int32_t pmax = kafka_get_i32(r);
      if (!kafka_topic_name(name, fp->topic)) {
        fp->err = KAFKA_ERR_INVALID_TOPIC;
      } else if (fp->index < 0) {
        fp->err = KAFKA_ERR_UNKNOWN_TOPIC_OR_PARTITION;
      } else if (offset < 0) {
        fp->err = KAFKA_ERR_OFFSET_OUT_OF_RANGE;
      }
      if (fp->err == KAFKA_ERR_NONE) {
        Cairn__Client__FetchPartition *grown =
            realloc(op->fps, (op->fr.n_partitions + 1) * sizeof *grown);
        if (grown == NULL) {
          kafka_req_malformed(kr);
          return;
        }
        op->fps = grown;
        Cairn__Client__FetchPartition *np_ = &op->fps[op->fr.n_partitions++];
        cairn__client__fetch_partition__init(np_);
        np_->partition = (uint32_t)fp->index;
        np_->offset = offset;
        np_->max_bytes = pmax > 0 ? (uint32_t)pmax : 1;
      }
    }
    /* A topic without partitions is left out of the answer, as Kafka builds
     * it from the partitions asked (the answer takes each topic's name from
     * its first partition). */
    op->ntopics += np > 0 ? 1 : 0;
  }
  if (v >= 7) {
    int32_t nforgotten = kafka_get_array_len(r, 6);
    for (int32_t i = 0; i < nforgotten && r->err == 0; i++) {
      (void)kafka_get_string(r);
      int32_t n = kafka_get_array_len(r, 4);
      for (int32_t k = 0; k < n && r->err == 0; k++) {
        (void)kafka_get_i32(r);
      }
    }
    if (v >= 11) {
      (void)kafka_get_string(r); /* rack_id comes after the forgotten topics */
    }
  }
  if (r->err != 0) {
    kafka_req_malformed(kr);
    return;
  }
  if (session_id != 0 || session_epoch > 0) {
    op->top_err = KAFKA_ERR_FETCH_SESSION_ID_NOT_FOUND;
    kafka_fetch_answer(kr, NULL, 0, NULL, 0);
    return;
  }
  /* Topic names into the native partitions (they point into op->parts,
   * whose array no longer moves). */
  op->fpp = calloc(op->fr.n_partitions > 0 ? op->fr.n_partitions : 1, sizeof *op->fpp);
  if (op->fpp == NULL) {
    kafka_req_malformed(kr);
    return;
  }
  for (size_t i = 0, k = 0; i < op->nparts; i++) {
    if (op->parts[i].err == KAFKA_ERR_NONE) {
      op->fps[k].topic = op->parts[i].topic;
      op->fpp[k] = &op->fps[k];
      k++;
    }
  }
  if (op->fr.n_partitions == 0) {
    kafka_fetch_answer(kr, NULL, 0, NULL, 0);
    return;
  }
  cairn__client__envelope__init(&op->env);
  op->fr.partitions = op->fpp;
  op->fr.max_wait_ms = max_wait > 0 ? (uint32_t)max_wait : 0;
  op->fr.min_bytes = min_bytes > 0 ? (uint32_t)min_bytes : 0;
  op->fr.max_bytes = max_bytes > 0 && (uint32_t)max_bytes < KAFKA_FETCH_MAX_BYTES
                         ? (uint32_t)max_bytes
                         : KAFKA_FETCH_MAX_BYTES;
  op->env.body_case = CAIRN__CLIENT__ENVELOPE__BODY_FETCH_REQ;
  op->env.fetch_req = &op->fr;
  kafka_req_relay(kr, CAIRN__CLIENT__API__API_FETCH, &op->env, NULL, 0, kafka_fetch_on_answer);
}
