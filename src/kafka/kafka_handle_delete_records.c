/* kafka_handle_delete_records.c - DeleteRecords v0-2 (v2 flexible) as the
 * native DeleteRecords: each partition's log start moved at its leader,
 * through its Raft log (docs/kafka.md, "DeleteRecords"). Offset -1 is the
 * high watermark; an offset above it is OFFSET_OUT_OF_RANGE. */
#include "kafka/kafka_handlers.h"

#include <stdlib.h>
#include <string.h>

#define KAFKA_DR_MAX_PARTS 10000
#define KAFKA_DR_FLEXIBLE 2 /* the first flexible version */

struct kafka_dr_part {
  char topic[KAFKA_TOPIC_MAX + 1];
  int32_t index;
  int64_t offset;
  int16_t err; /* set before relaying: not sent */
  size_t topic_at;
};

struct kafka_dr_op {
  struct kafka_dr_part *parts;
  size_t nparts, ntopics;
  Cairn__Client__Envelope env;
  Cairn__Client__DeleteRecordsRequest dr;
  Cairn__Client__DeleteRecordsPartition *dps;
  Cairn__Client__DeleteRecordsPartition **dpp;
};

static void kafka_dr_op_free(void *p)
{
  struct kafka_dr_op *op = p;
  if (op != NULL) {
    free(op->parts);
    free(op->dps);
    free(op->dpp);
    free(op);
  }
}

/* The answer: the partitions in request order, grouped by topic as asked;
 * r NULL with all_err for a refusal of the whole native request. */
static void kafka_dr_answer(struct kafka_req *kr, const Cairn__Client__DeleteRecordsResponse *r,
                            int16_t all_err)
{
  struct kafka_dr_op *op = kr->op;
  bool f = kr->h.api_version >= KAFKA_DR_FLEXIBLE;
  struct kafka_buf b;
  kafka_buf_init(&b);
  kafka_put_i32(&b, 0); /* throttle_time_ms */
  kafka_put_array_len_f(&b, (int32_t)op->ntopics, f);
  size_t native = 0;
  for (size_t t = 0, i = 0; t < op->ntopics; t++) {
    size_t first = i;
    while (i < op->nparts && op->parts[i].topic_at == t) {
      i++;
    }
    kafka_put_string_f(&b, op->parts[first].topic, f);
    kafka_put_array_len_f(&b, (int32_t)(i - first), f);
    for (size_t k = first; k < i; k++) {
      const struct kafka_dr_part *dp = &op->parts[k];
      int16_t err = dp->err;
      int64_t low = -1;
      if (err == KAFKA_ERR_NONE) {
        const Cairn__Client__DeleteRecordsPartitionResult *res =
            r != NULL && native < r->n_partitions ? r->partitions[native] : NULL;
        native++;
        err = res == NULL ? (all_err != 0 ? all_err : KAFKA_ERR_UNKNOWN_SERVER)
                          : kafka_err_from_wire(res->error != NULL ? res->error->code : 0);
        if (err == KAFKA_ERR_NONE) {
          low = res->low_watermark;
        }
      }
      kafka_put_i32(&b, dp->index);
      kafka_put_i64(&b, low);
      kafka_put_err(&b, err);
      kafka_put_tags(&b, f);
    }
    kafka_put_tags(&b, f);
  }
  kafka_put_tags(&b, f);
  kafka_req_respond(kr, &b);
}

static void kafka_dr_on_answer(struct kafka_req *kr, const Cairn__Client__Envelope *env,
                               const struct conn_part *parts, size_t nparts)
{
  (void)parts;
  (void)nparts;
  const Cairn__Client__DeleteRecordsResponse *r =
      env != NULL && env->body_case == CAIRN__CLIENT__ENVELOPE__BODY_DELETE_RECORDS_RESP
          ? env->delete_records_resp
          : NULL;
  Cairn__Client__ErrorCode code = kafka_relay_error(env);
  if (code == 0 && r != NULL && r->error != NULL && r->error->code != 0) {
    code = r->error->code;
  }
  kafka_dr_answer(kr, code == 0 ? r : NULL, code == 0 ? 0 : kafka_err_from_wire(code));
}

/* Reads the request's topics into op->parts; false when it does not parse. */
static bool kafka_dr_read(struct kafka_req *kr, struct kafka_dr_op *op, int32_t *timeout_ms)
{
  struct kafka_reader *r = &kr->body;
  bool f = kr->h.api_version >= KAFKA_DR_FLEXIBLE;
  int32_t ntopics = kafka_get_array_len_f(r, f ? 2 : 6, f);
  size_t cap = 0;
  for (int32_t t = 0; t < ntopics && r->err == 0; t++) {
    struct kafka_str name = kafka_get_string_f(r, f);
    int32_t np = kafka_get_array_len_f(r, 12, f);
    if (r->err != 0 || op->nparts + (size_t)np > KAFKA_DR_MAX_PARTS ||
        kafka_reserve((void **)&op->parts, &cap, op->nparts + (size_t)np, sizeof *op->parts) != 0) {
      return false;
    }
    for (int32_t i = 0; i < np && r->err == 0; i++) {
      struct kafka_dr_part *dp = &op->parts[op->nparts++];
      memset(dp, 0, sizeof *dp);
      dp->topic_at = op->ntopics;
      dp->index = kafka_get_i32(r);
      dp->offset = kafka_get_i64(r);
      kafka_get_tags(r, f);
      if (!kafka_topic_name(name, dp->topic)) {
        dp->err = KAFKA_ERR_INVALID_TOPIC;
      } else if (dp->index < 0) {
        dp->err = KAFKA_ERR_UNKNOWN_TOPIC_OR_PARTITION;
      } else if (dp->offset < -1) {
        dp->err = KAFKA_ERR_OFFSET_OUT_OF_RANGE;
      }
    }
    kafka_get_tags(r, f);
    /* A topic without partitions is left out: the answer names each topic
     * from its first partition. */
    op->ntopics += np > 0 ? 1 : 0;
  }
  *timeout_ms = kafka_get_i32(r);
  kafka_get_tags(r, f);
  return r->err == 0;
}

void kafka_handle_delete_records(struct kafka_req *kr)
{
  struct kafka_dr_op *op = calloc(1, sizeof *op);
  if (op == NULL) {
    kafka_req_malformed(kr);
    return;
  }
  kr->op = op;
  kr->op_free = kafka_dr_op_free;
  int32_t timeout_ms = 0;
  if (!kafka_dr_read(kr, op, &timeout_ms)) {
    kafka_req_malformed(kr);
    return;
  }
  op->dps = calloc(op->nparts > 0 ? op->nparts : 1, sizeof *op->dps);
  op->dpp = calloc(op->nparts > 0 ? op->nparts : 1, sizeof *op->dpp);
  if (op->dps == NULL || op->dpp == NULL) {
    kafka_req_malformed(kr);
    return;
  }
  size_t k = 0;
  for (size_t i = 0; i < op->nparts; i++) {
    const struct kafka_dr_part *dp = &op->parts[i];
    if (dp->err != KAFKA_ERR_NONE) {
      continue;
    }
    Cairn__Client__DeleteRecordsPartition *p = &op->dps[k];
    cairn__client__delete_records_partition__init(p);
    p->topic = op->parts[i].topic;
    p->partition = (uint32_t)dp->index;
    p->offset = dp->offset;
    op->dpp[k++] = p;
  }
  if (k == 0) {
    kafka_dr_answer(kr, NULL, 0);
    return;
  }
  cairn__client__envelope__init(&op->env);
  cairn__client__delete_records_request__init(&op->dr);
  op->dr.partitions = op->dpp;
  op->dr.n_partitions = k;
  op->dr.timeout_ms = timeout_ms > 0 ? (uint32_t)timeout_ms : 0;
  op->env.body_case = CAIRN__CLIENT__ENVELOPE__BODY_DELETE_RECORDS_REQ;
  op->env.delete_records_req = &op->dr;
  kafka_req_relay(kr, CAIRN__CLIENT__API__API_DELETE_RECORDS, &op->env, NULL, 0,
                  kafka_dr_on_answer);
}
