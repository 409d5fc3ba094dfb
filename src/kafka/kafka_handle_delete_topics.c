/* kafka_handle_delete_topics.c - DeleteTopics v0-3: each topic through the
 * native DeleteTopic (forwarded to the controller leader by any node,
 * answered once the command is applied), one after the other. An internal
 * topic (a name starting "__", Cairn's __cairn_offsets) is refused by the
 * core and answered TOPIC_AUTHORIZATION_FAILED (docs/kafka.md).
 * timeout_ms is not used: the answer comes when the command is applied. */
#include "kafka/kafka_handlers.h"

#include <stdlib.h>

#define KAFKA_DT_MAX_TOPICS 1000

struct kafka_dt_topic {
  char name[KAFKA_TOPIC_MAX + 1];
  int16_t err;
};

struct kafka_dt_op {
  struct kafka_dt_topic *topics;
  size_t ntopics;
  size_t next;
  Cairn__Client__Envelope env;
  Cairn__Client__DeleteTopicRequest dt;
};

static void kafka_dt_op_free(void *p)
{
  struct kafka_dt_op *op = p;
  if (op != NULL) {
    free(op->topics);
    free(op);
  }
}

static void kafka_dt_answer(struct kafka_req *kr)
{
  struct kafka_dt_op *op = kr->op;
  struct kafka_buf b;
  kafka_buf_init(&b);
  if (kr->h.api_version >= 1) {
    kafka_put_i32(&b, 0); /* throttle_time_ms */
  }
  kafka_put_array_len(&b, (int32_t)op->ntopics);
  for (size_t i = 0; i < op->ntopics; i++) {
    kafka_put_string(&b, op->topics[i].name);
    kafka_put_err(&b, op->topics[i].err);
  }
  kafka_req_respond(kr, &b);
}

static void kafka_dt_next(struct kafka_req *kr);

static void kafka_dt_on_answer(struct kafka_req *kr, const Cairn__Client__Envelope *env,
                               const struct conn_part *parts, size_t nparts)
{
  (void)parts;
  (void)nparts;
  struct kafka_dt_op *op = kr->op;
  struct kafka_dt_topic *t = &op->topics[op->next++];
  Cairn__Client__ErrorCode code =
      kafka_relay_code(env, CAIRN__CLIENT__ENVELOPE__BODY_DELETE_TOPIC_RESP);
  t->err = kafka_err_from_wire(code); /* INTERNAL_TOPIC: TOPIC_AUTHORIZATION_FAILED */
  kafka_dt_next(kr);
}

static void kafka_dt_next(struct kafka_req *kr)
{
  struct kafka_dt_op *op = kr->op;
  while (op->next < op->ntopics && op->topics[op->next].err != 0) {
    op->next++;
  }
  if (op->next == op->ntopics) {
    kafka_dt_answer(kr);
    return;
  }
  cairn__client__envelope__init(&op->env);
  cairn__client__delete_topic_request__init(&op->dt);
  op->dt.name = op->topics[op->next].name;
  op->env.body_case = CAIRN__CLIENT__ENVELOPE__BODY_DELETE_TOPIC_REQ;
  op->env.delete_topic_req = &op->dt;
  kafka_req_relay(kr, CAIRN__CLIENT__API__API_DELETE_TOPIC, &op->env, NULL, 0, kafka_dt_on_answer);
}

void kafka_handle_delete_topics(struct kafka_req *kr)
{
  struct kafka_reader *r = &kr->body;
  struct kafka_dt_op *op = calloc(1, sizeof *op);
  if (op == NULL) {
    kafka_req_malformed(kr);
    return;
  }
  kr->op = op;
  kr->op_free = kafka_dt_op_free;
  int32_t n =
      kafka_get_array_alloc(r, 2, KAFKA_DT_MAX_TOPICS, sizeof *op->topics, (void **)&op->topics);
  if (n < 0) {
    kafka_req_malformed(kr);
    return;
  }
  for (int32_t i = 0; i < n && r->err == 0; i++) {
    struct kafka_dt_topic *t = &op->topics[op->ntopics++];
    t->err = kafka_topic_name_echo(kafka_get_string(r), t->name);
  }
  (void)kafka_get_i32(r); /* timeout_ms */
  if (r->err != 0) {
    kafka_req_malformed(kr);
    return;
  }
  kafka_dt_next(kr);
}
