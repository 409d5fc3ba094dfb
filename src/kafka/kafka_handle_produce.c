/* kafka_handle_produce.c - Produce v3-7: each partition's Kafka batches
 * are validated and converted to Cairn's (kafka_batch.h), then the whole
 * request runs as one native ProduceRequest: every batch through its
 * partition's Raft group, answered once committed on a majority.
 *
 * acks: -1 and 1 both answer only once committed on a majority (Cairn
 * never acknowledges an uncommitted write); 0 answers nothing, but the
 * Kafka request is finished only when the native one is, so the conn's
 * in-flight bounds still hold the bytes, and when any partition failed
 * the connection is closed instead, as Kafka does: the producer then
 * refreshes its metadata rather than sending on to a node that is no
 * longer the leader. A partition whose batches fail
 * conversion (CORRUPT_MESSAGE) is left out of the native request: nothing
 * of it is appended. Every Kafka codec is accepted and stored as sent. */
#include "kafka/kafka_handlers.h"

#include "common/err.h"
#include "common/log.h"
#include "kafka/kafka_batch.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define KAFKA_PRODUCE_MAX_PARTS 10000  /* partitions one request may name */
#define KAFKA_PRODUCE_MAX_BATCHES 4096 /* batches of one partition */

struct kafka_produce_part {
  char topic[KAFKA_TOPIC_MAX + 1];
  int32_t index;
  int16_t err;     /* set before relaying: not sent */
  int native;      /* index in the native request, -1: not sent */
  size_t topic_at; /* which Kafka topic entry it belongs to */
  uint32_t *lengths;
  size_t nbatches;
};

struct kafka_produce_op {
  int16_t acks;
  struct kafka_produce_part *parts;
  size_t nparts;
  size_t ntopics;
  uint8_t *payload; /* converted batches, in native order */
  size_t payload_len;
  Cairn__Client__Envelope env;
  Cairn__Client__ProduceRequest pr;
  Cairn__Client__ProducePartition *pps;
  Cairn__Client__ProducePartition **ppp;
};

static void kafka_produce_op_free(void *p)
{
  struct kafka_produce_op *op = p;
  if (op == NULL) {
    return;
  }
  for (size_t i = 0; i < op->nparts; i++) {
    free(op->parts[i].lengths);
  }
  free(op->parts);
  free(op->payload);
  free(op->pps);
  free(op->ppp);
  free(op);
}


/* Converts one partition's records into op->payload; sets pp->err on a
 * refusal (nothing of the partition is kept then). */
static void kafka_produce_convert(struct kafka_produce_op *op, struct kafka_produce_part *pp,
                                  struct kafka_str rec)
{
  if (rec.ptr == NULL || rec.len == 0) {
    pp->err = KAFKA_ERR_CORRUPT_MESSAGE;
    return;
  }
  /* First pass: sizes, so the payload grows once. */
  size_t n = 0, total = 0;
  for (size_t at = 0; at < rec.len;) {
    size_t size = 0;
    int rv = kafka_batch_probe(rec.ptr + at, rec.len - at, &size);
    if (rv != 0 || n == KAFKA_PRODUCE_MAX_BATCHES) {
      pp->err = KAFKA_ERR_CORRUPT_MESSAGE; /* cut inside a batch counts as corrupt */
      return;
    }
    n++;
    total += size + KAFKA_BATCH_GROWTH;
    at += size;
  }
  pp->lengths = calloc(n, sizeof *pp->lengths);
  uint8_t *grown = realloc(op->payload, op->payload_len + total);
  if (pp->lengths == NULL || grown == NULL) {
    op->payload = grown != NULL ? grown : op->payload;
    pp->err = KAFKA_ERR_UNKNOWN_SERVER;
    return;
  }
  op->payload = grown;
  size_t out = op->payload_len;
  size_t at = 0;
  for (size_t i = 0; i < n; i++) {
    size_t size = 0;
    int rv = kafka_batch_probe(rec.ptr + at, rec.len - at, &size); /* 0: the first pass saw it */
    if (rv == 0) {
      rv = kafka_batch_to_cairn(rec.ptr + at, size, op->payload + out);
    }
    if (rv != 0) {
      pp->err = KAFKA_ERR_CORRUPT_MESSAGE;
      return; /* payload_len unchanged: the partition's bytes are dropped */
    }
    pp->lengths[i] = (uint32_t)(size + KAFKA_BATCH_GROWTH);
    out += size + KAFKA_BATCH_GROWTH;
    at += size;
  }
  pp->nbatches = n;
  op->payload_len = out;
}

/* The Kafka error of partition pp in the native answer r (NULL: the
 * request failed as a whole with all_err), with its base offset and log
 * start offset (-1 when unknown). */
static int16_t kafka_produce_part_err(const struct kafka_produce_part *pp,
                                      const Cairn__Client__ProduceResponse *r, int16_t all_err,
                                      int64_t *base, int64_t *log_start)
{
  *base = -1;
  *log_start = -1;
  if (pp->err != KAFKA_ERR_NONE) {
    return pp->err;
  }
  const Cairn__Client__ProducePartitionResult *res =
      r != NULL && pp->native >= 0 && (size_t)pp->native < r->n_partitions
          ? r->partitions[pp->native]
          : NULL;
  if (res == NULL) {
    return all_err != KAFKA_ERR_NONE ? all_err : KAFKA_ERR_UNKNOWN_SERVER;
  }
  int16_t err = kafka_err_from_wire(res->error != NULL ? res->error->code : 0);
  *base = err == KAFKA_ERR_NONE ? res->base_offset : -1;
  *log_start = res->log_start_offset;
  return err;
}

/* The first partition error of the request (KAFKA_ERR_NONE: none). */
static int16_t kafka_produce_first_err(const struct kafka_produce_op *op,
                                       const Cairn__Client__ProduceResponse *r, int16_t all_err)
{
  for (size_t i = 0; i < op->nparts; i++) {
    int64_t base, log_start;
    int16_t err = kafka_produce_part_err(&op->parts[i], r, all_err, &base, &log_start);
    if (err != KAFKA_ERR_NONE) {
      return err;
    }
  }
  return KAFKA_ERR_NONE;
}

/* acks 0: nothing is answered; an error closes the connection (above). */
static void kafka_produce_finish_acks0(struct kafka_req *kr,
                                       const Cairn__Client__ProduceResponse *r, int16_t all_err)
{
  int16_t err = kafka_produce_first_err(kr->op, r, all_err);
  if (err == KAFKA_ERR_NONE) {
    kafka_req_finish_silent(kr);
    return;
  }
  struct conn *c = kr->req->c;
  log_debug("kafka", "conn %" PRIu64 " %s: Produce with acks 0 failed (error %d): closing", c->id,
            c->peer, err);
  kafka_req_close(kr);
}

static void kafka_produce_answer(struct kafka_req *kr, const Cairn__Client__ProduceResponse *r,
                                 int16_t all_err)
{
  struct kafka_produce_op *op = kr->op;
  int16_t v = kr->h.api_version;
  struct kafka_buf b;
  kafka_buf_init(&b);
  kafka_put_array_len(&b, (int32_t)op->ntopics);
  for (size_t t = 0, i = 0; t < op->ntopics; t++) {
    size_t first = i;
    while (i < op->nparts && op->parts[i].topic_at == t) {
      i++;
    }
    kafka_put_string(&b, op->parts[first].topic);
    kafka_put_array_len(&b, (int32_t)(i - first));
    for (size_t k = first; k < i; k++) {
      const struct kafka_produce_part *pp = &op->parts[k];
      int64_t base, log_start;
      int16_t err = kafka_produce_part_err(pp, r, all_err, &base, &log_start);
      kafka_put_i32(&b, pp->index);
      kafka_put_err(&b, err);
      kafka_put_i64(&b, base);
      kafka_put_i64(&b, -1); /* log_append_time_ms: CreateTime only */
      if (v >= 5) {
        kafka_put_i64(&b, log_start);
      }
    }
  }
  kafka_put_i32(&b, 0); /* throttle_time_ms */
  kafka_req_respond(kr, &b);
}

static void kafka_produce_on_answer(struct kafka_req *kr, const Cairn__Client__Envelope *env,
                                    const struct conn_part *parts, size_t nparts)
{
  (void)parts;
  (void)nparts;
  struct kafka_produce_op *op = kr->op;
  const Cairn__Client__ProduceResponse *r =
      env != NULL && env->body_case == CAIRN__CLIENT__ENVELOPE__BODY_PRODUCE_RESP
          ? env->produce_resp
          : NULL;
  Cairn__Client__ErrorCode code = kafka_relay_error(env);
  if (code == 0 && r != NULL && r->error != NULL && r->error->code != 0) {
    code = r->error->code; /* the request as a whole was refused */
  }
  const Cairn__Client__ProduceResponse *ok = code == 0 ? r : NULL;
  int16_t all_err = code == 0 ? KAFKA_ERR_NONE : kafka_err_from_wire(code);
  if (op->acks == 0) {
    kafka_produce_finish_acks0(kr, ok, all_err);
    return;
  }
  kafka_produce_answer(kr, ok, all_err);
}

/* Reads the request into op; returns false when it does not parse. */
static bool kafka_produce_read(struct kafka_req *kr, struct kafka_produce_op *op, int32_t *timeout)
{
  struct kafka_reader *r = &kr->body;
  struct kafka_str tid = kafka_get_string(r);
  op->acks = kafka_get_i16(r);
  *timeout = kafka_get_i32(r);
  int32_t ntopics = kafka_get_array_len(r, 6);
  size_t cap = 0;
  for (int32_t t = 0; t < ntopics && r->err == 0; t++) {
    struct kafka_str name = kafka_get_string(r);
    int32_t np = kafka_get_array_len(r, 8);
    if (r->err != 0 || op->nparts + (size_t)np > KAFKA_PRODUCE_MAX_PARTS) {
      return false;
    }
    if (kafka_reserve((void **)&op->parts, &cap, op->nparts + (size_t)np, sizeof *op->parts) != 0) {
      return false;
    }
    for (int32_t i = 0; i < np && r->err == 0; i++) {
      struct kafka_produce_part *pp = &op->parts[op->nparts++];
      memset(pp, 0, sizeof *pp);
      pp->topic_at = op->ntopics;
      pp->native = -1;
      pp->index = kafka_get_i32(r);
      struct kafka_str rec = kafka_get_bytes(r);
      if (r->err != 0) {
        return false;
      }
      if (!kafka_topic_name(name, pp->topic)) {
        pp->err = KAFKA_ERR_INVALID_TOPIC;
        snprintf(pp->topic, sizeof pp->topic, "%.*s",
                 (int)(name.len > KAFKA_TOPIC_MAX ? KAFKA_TOPIC_MAX : name.len),
                 name.ptr != NULL ? (const char *)name.ptr : "");
        continue;
      }
      if (tid.ptr != NULL) {
        pp->err = KAFKA_ERR_TRANSACTIONAL_ID_AUTHORIZATION_FAILED; /* no transactions yet */
        continue;
      }
      if (op->acks != 0 && op->acks != 1 && op->acks != -1) {
        pp->err = KAFKA_ERR_INVALID_REQUIRED_ACKS;
        continue;
      }
      if (pp->index < 0) {
        pp->err = KAFKA_ERR_UNKNOWN_TOPIC_OR_PARTITION;
        continue;
      }
      kafka_produce_convert(op, pp, rec);
    }
    /* A topic without partitions is left out of the answer, as Kafka builds
     * it from the partitions asked (the answer takes each topic's name from
     * its first partition). */
    op->ntopics += np > 0 ? 1 : 0;
  }
  return r->err == 0;
}

void kafka_handle_produce(struct kafka_req *kr)
{
  struct kafka_produce_op *op = calloc(1, sizeof *op);
  if (op == NULL) {
    kafka_req_malformed(kr);
    return;
  }
  kr->op = op;
  kr->op_free = kafka_produce_op_free;
  int32_t timeout = 0;
  if (!kafka_produce_read(kr, op, &timeout)) {
    kafka_req_malformed(kr);
    return;
  }
  size_t nsend = 0;
  for (size_t i = 0; i < op->nparts; i++) {
    nsend += op->parts[i].err == KAFKA_ERR_NONE;
  }
  if (nsend == 0) {
    if (op->acks == 0) {
      kafka_produce_finish_acks0(kr, NULL, KAFKA_ERR_NONE);
    } else {
      kafka_produce_answer(kr, NULL, KAFKA_ERR_NONE);
    }
    return;
  }
  op->pps = calloc(nsend, sizeof *op->pps);
  op->ppp = calloc(nsend, sizeof *op->ppp);
  if (op->pps == NULL || op->ppp == NULL) {
    kafka_req_malformed(kr);
    return;
  }
  size_t k = 0;
  for (size_t i = 0; i < op->nparts; i++) {
    struct kafka_produce_part *pp = &op->parts[i];
    if (pp->err != KAFKA_ERR_NONE) {
      continue;
    }
    cairn__client__produce_partition__init(&op->pps[k]);
    op->pps[k].topic = pp->topic;
    op->pps[k].partition = (uint32_t)pp->index;
    op->pps[k].batch_lengths = pp->lengths;
    op->pps[k].n_batch_lengths = pp->nbatches;
    op->ppp[k] = &op->pps[k];
    pp->native = (int)k++;
  }
  cairn__client__envelope__init(&op->env);
  cairn__client__produce_request__init(&op->pr);
  op->pr.acks = CAIRN__CLIENT__ACKS__ACKS_ALL;
  op->pr.timeout_ms = timeout > 0 ? (uint32_t)timeout : 0;
  op->pr.partitions = op->ppp;
  op->pr.n_partitions = nsend;
  op->env.body_case = CAIRN__CLIENT__ENVELOPE__BODY_PRODUCE_REQ;
  op->env.produce_req = &op->pr;
  kafka_req_relay(kr, CAIRN__CLIENT__API__API_PRODUCE, &op->env, op->payload, op->payload_len,
                  kafka_produce_on_answer);
}
