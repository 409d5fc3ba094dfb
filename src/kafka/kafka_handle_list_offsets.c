/* kafka_handle_list_offsets.c - ListOffsets v1-3 as the native
 * ListOffsets: timestamp -2 the log start, -1 the high watermark, any
 * other the first offset whose record time is at or after it (offset and
 * timestamp -1 when none is). */
#include "kafka/kafka_handlers.h"

#include <stdlib.h>
#include <string.h>

#define KAFKA_LO_MAX_PARTS 10000
#define KAFKA_LO_LATEST (-1)
#define KAFKA_LO_EARLIEST (-2)

struct kafka_lo_part {
  char topic[KAFKA_TOPIC_MAX + 1];
  int32_t index;
  int64_t timestamp;
  int16_t err; /* set before relaying: not sent */
  size_t topic_at;
};

struct kafka_lo_op {
  struct kafka_lo_part *parts;
  size_t nparts, ntopics;
  Cairn__Client__Envelope env;
  Cairn__Client__ListOffsetsRequest lr;
  Cairn__Client__ListOffsetsPartition *lps;
  Cairn__Client__ListOffsetsPartition **lpp;
};

static void kafka_lo_op_free(void *p)
{
  struct kafka_lo_op *op = p;
  if (op != NULL) {
    free(op->parts);
    free(op->lps);
    free(op->lpp);
    free(op);
  }
}

static void kafka_lo_answer(struct kafka_req *kr, const Cairn__Client__ListOffsetsResponse *r,
                            int16_t all_err)
{
  struct kafka_lo_op *op = kr->op;
  struct kafka_buf b;
  kafka_buf_init(&b);
  if (kr->h.api_version >= 2) {
    kafka_put_i32(&b, 0); /* throttle_time_ms */
  }
  kafka_put_array_len(&b, (int32_t)op->ntopics);
  size_t native = 0;
  for (size_t t = 0, i = 0; t < op->ntopics; t++) {
    size_t first = i;
    while (i < op->nparts && op->parts[i].topic_at == t) {
      i++;
    }
    kafka_put_string(&b, op->parts[first].topic);
    kafka_put_array_len(&b, (int32_t)(i - first));
    for (size_t k = first; k < i; k++) {
      const struct kafka_lo_part *lp = &op->parts[k];
      int16_t err = lp->err;
      int64_t ts = -1, offset = -1;
      if (err == KAFKA_ERR_NONE) {
        const Cairn__Client__ListOffsetsPartitionResult *res =
            r != NULL && native < r->n_partitions ? r->partitions[native] : NULL;
        native++;
        err = res == NULL ? (all_err != 0 ? all_err : KAFKA_ERR_UNKNOWN_SERVER)
                          : kafka_err_from_wire(res->error != NULL ? res->error->code : 0);
        if (err == KAFKA_ERR_NONE) {
          offset = res->offset;
          ts = lp->timestamp >= 0 ? res->timestamp : -1;
        }
      }
      kafka_put_i32(&b, lp->index);
      kafka_put_err(&b, err);
      kafka_put_i64(&b, ts);
      kafka_put_i64(&b, offset);
    }
  }
  kafka_req_respond(kr, &b);
}

static void kafka_lo_on_answer(struct kafka_req *kr, const Cairn__Client__Envelope *env,
                               const struct conn_part *parts, size_t nparts)
{
  (void)parts;
  (void)nparts;
  const Cairn__Client__ListOffsetsResponse *r =
      env != NULL && env->body_case == CAIRN__CLIENT__ENVELOPE__BODY_LIST_OFFSETS_RESP
          ? env->list_offsets_resp
          : NULL;
  Cairn__Client__ErrorCode code = kafka_relay_error(env);
  if (code == 0 && r != NULL && r->error != NULL && r->error->code != 0) {
    code = r->error->code;
  }
  kafka_lo_answer(kr, code == 0 ? r : NULL, code == 0 ? 0 : kafka_err_from_wire(code));
}

void kafka_handle_list_offsets(struct kafka_req *kr)
{
  struct kafka_reader *r = &kr->body;
  struct kafka_lo_op *op = calloc(1, sizeof *op);
  if (op == NULL) {
    kafka_req_malformed(kr);
    return;
  }
  kr->op = op;
  kr->op_free = kafka_lo_op_free;
  cairn__client__list_offsets_request__init(&op->lr);
  (void)kafka_get_i32(r); /* replica_id */
  if (kr->h.api_version >= 2) {
    (void)kafka_get_i8(r); /* isolation_level */
  }
  int32_t ntopics = kafka_get_array_len(r, 6);
  size_t cap = 0;
  for (int32_t t = 0; t < ntopics && r->err == 0; t++) {
    struct kafka_str name = kafka_get_string(r);
    int32_t np = kafka_get_array_len(r, 12);
    if (r->err != 0 || op->nparts + (size_t)np > KAFKA_LO_MAX_PARTS) {
      kafka_req_malformed(kr);
      return;
    }
    if (kafka_reserve((void **)&op->parts, &cap, op->nparts + (size_t)np, sizeof *op->parts) != 0) {
      kafka_req_malformed(kr);
      return;
    }
    for (int32_t i = 0; i < np && r->err == 0; i++) {
      struct kafka_lo_part *lp = &op->parts[op->nparts++];
      memset(lp, 0, sizeof *lp);
      lp->topic_at = op->ntopics;
      lp->index = kafka_get_i32(r);
      lp->timestamp = kafka_get_i64(r);
      if (!kafka_topic_name(name, lp->topic)) {
        lp->err = KAFKA_ERR_INVALID_TOPIC;
      } else if (lp->index < 0) {
        lp->err = KAFKA_ERR_UNKNOWN_TOPIC_OR_PARTITION;
      } else if (lp->timestamp < KAFKA_LO_EARLIEST) {
        lp->err = KAFKA_ERR_INVALID_REQUEST;
      }
    }
    /* A topic without partitions is left out of the answer, as Kafka builds
     * it from the partitions asked (the answer takes each topic's name from
     * its first partition). */
    op->ntopics += np > 0 ? 1 : 0;
  }
  if (r->err != 0) {
    kafka_req_malformed(kr);
    return;
  }
  op->lps = calloc(op->nparts > 0 ? op->nparts : 1, sizeof *op->lps);
  op->lpp = calloc(op->nparts > 0 ? op->nparts : 1, sizeof *op->lpp);
  if (op->lps == NULL || op->lpp == NULL) {
    kafka_req_malformed(kr);
    return;
  }
  size_t k = 0;
  for (size_t i = 0; i < op->nparts; i++) {
    const struct kafka_lo_part *lp = &op->parts[i];
    if (lp->err != KAFKA_ERR_NONE) {
      continue;
    }
    Cairn__Client__ListOffsetsPartition *p = &op->lps[k];
    cairn__client__list_offsets_partition__init(p);
    p->topic = op->parts[i].topic;
    p->partition = (uint32_t)lp->index;
    if (lp->timestamp == KAFKA_LO_LATEST) {
      p->spec = CAIRN__CLIENT__OFFSET_SPEC__OFFSET_LATEST;
    } else if (lp->timestamp == KAFKA_LO_EARLIEST) {
      p->spec = CAIRN__CLIENT__OFFSET_SPEC__OFFSET_EARLIEST;
    } else {
      p->spec = CAIRN__CLIENT__OFFSET_SPEC__OFFSET_TIMESTAMP;
      p->timestamp = lp->timestamp;
    }
    op->lpp[k++] = p;
  }
  if (k == 0) {
    kafka_lo_answer(kr, NULL, 0);
    return;
  }
  cairn__client__envelope__init(&op->env);
  op->lr.partitions = op->lpp;
  op->lr.n_partitions = k;
  op->env.body_case = CAIRN__CLIENT__ENVELOPE__BODY_LIST_OFFSETS_REQ;
  op->env.list_offsets_req = &op->lr;
  kafka_req_relay(kr, CAIRN__CLIENT__API__API_LIST_OFFSETS, &op->env, NULL, 0, kafka_lo_on_answer);
}
