/* kafka_handle_create_partitions.c - CreatePartitions v0-1: each topic
 * through the native AddPartitions (the core operation behind `cairn topic
 * add-partitions`: forwarded to the controller leader, answered once the
 * metadata command is applied), one after the other. `count` is the new
 * total; a count not above the current one is INVALID_PARTITIONS; manual
 * assignments are refused (INVALID_REQUEST: Cairn places replicas);
 * validate_only checks the request's own fields only (docs/kafka.md). */
#include "kafka/kafka_handlers.h"

#include <stdio.h>
#include <stdlib.h>

#define KAFKA_CP_MAX_TOPICS 1000
#define KAFKA_CP_MESSAGE_SIZE 200

struct kafka_cp_topic {
  char name[KAFKA_TOPIC_MAX + 1];
  int32_t count;
  int16_t err;
  char message[KAFKA_CP_MESSAGE_SIZE];
};

struct kafka_cp_op {
  struct kafka_cp_topic *topics;
  size_t ntopics;
  size_t next;
  bool validate_only;
  Cairn__Client__Envelope env;
  Cairn__Client__AddPartitionsRequest ap;
};

static void kafka_cp_op_free(void *p)
{
  struct kafka_cp_op *op = p;
  if (op != NULL) {
    free(op->topics);
    free(op);
  }
}

static void kafka_cp_answer(struct kafka_req *kr)
{
  struct kafka_cp_op *op = kr->op;
  struct kafka_buf b;
  kafka_buf_init(&b);
  kafka_put_i32(&b, 0); /* throttle_time_ms */
  kafka_put_array_len(&b, (int32_t)op->ntopics);
  for (size_t i = 0; i < op->ntopics; i++) {
    const struct kafka_cp_topic *t = &op->topics[i];
    kafka_put_string(&b, t->name);
    kafka_put_err(&b, t->err);
    kafka_put_string(&b, t->err != 0 && t->message[0] != '\0' ? t->message : NULL);
  }
  kafka_req_respond(kr, &b);
}

static void kafka_cp_next(struct kafka_req *kr);

static void kafka_cp_on_answer(struct kafka_req *kr, const Cairn__Client__Envelope *env,
                               const struct conn_part *parts, size_t nparts)
{
  (void)parts;
  (void)nparts;
  struct kafka_cp_op *op = kr->op;
  struct kafka_cp_topic *t = &op->topics[op->next++];
  t->err = kafka_err_from_wire(
      kafka_relay_code(env, CAIRN__CLIENT__ENVELOPE__BODY_ADD_PARTITIONS_RESP));
  const char *msg = kafka_relay_message(env);
  if (msg != NULL) {
    snprintf(t->message, sizeof t->message, "%s", msg);
  }
  kafka_cp_next(kr);
}

static void kafka_cp_next(struct kafka_req *kr)
{
  struct kafka_cp_op *op = kr->op;
  while (op->next < op->ntopics && (op->topics[op->next].err != 0 || op->validate_only)) {
    op->next++;
  }
  if (op->next == op->ntopics) {
    kafka_cp_answer(kr);
    return;
  }
  const struct kafka_cp_topic *t = &op->topics[op->next];
  cairn__client__envelope__init(&op->env);
  cairn__client__add_partitions_request__init(&op->ap);
  op->ap.name = op->topics[op->next].name;
  op->ap.partitions = (uint32_t)t->count;
  op->env.body_case = CAIRN__CLIENT__ENVELOPE__BODY_ADD_PARTITIONS_REQ;
  op->env.add_partitions_req = &op->ap;
  kafka_req_relay(kr, CAIRN__CLIENT__API__API_ADD_PARTITIONS, &op->env, NULL, 0,
                  kafka_cp_on_answer);
}

/* Skips a topic's assignments (an array of int32 arrays; null: none) and
 * says whether it had any. */
static bool kafka_cp_skip_assignments(struct kafka_reader *r)
{
  int32_t na = kafka_get_array_len(r, 4);
  for (int32_t k = 0; k < na && r->err == 0; k++) {
    int32_t nb = kafka_get_array_len(r, 4);
    for (int32_t j = 0; j < nb && r->err == 0; j++) {
      (void)kafka_get_i32(r);
    }
  }
  return na >= 0;
}

void kafka_handle_create_partitions(struct kafka_req *kr)
{
  struct kafka_reader *r = &kr->body;
  struct kafka_cp_op *op = calloc(1, sizeof *op);
  if (op == NULL) {
    kafka_req_malformed(kr);
    return;
  }
  kr->op = op;
  kr->op_free = kafka_cp_op_free;
  int32_t n =
      kafka_get_array_alloc(r, 10, KAFKA_CP_MAX_TOPICS, sizeof *op->topics, (void **)&op->topics);
  if (n < 0) {
    kafka_req_malformed(kr);
    return;
  }
  for (int32_t i = 0; i < n && r->err == 0; i++) {
    struct kafka_cp_topic *t = &op->topics[op->ntopics++];
    struct kafka_str name = kafka_get_string(r);
    t->count = kafka_get_i32(r);
    bool assigned = kafka_cp_skip_assignments(r);
    t->err = kafka_topic_name_echo(name, t->name);
    if (t->err != KAFKA_ERR_NONE) {
      /* answered as is */
    } else if (assigned) {
      t->err = KAFKA_ERR_INVALID_REQUEST;
      snprintf(t->message, sizeof t->message,
               "manual replica assignment is not supported: Cairn places replicas");
    } else if (t->count <= 0) {
      t->err = KAFKA_ERR_INVALID_PARTITIONS;
      snprintf(t->message, sizeof t->message, "the partition count must be positive");
    }
  }
  (void)kafka_get_i32(r); /* timeout_ms: the answer comes once applied */
  op->validate_only = kafka_get_i8(r) != 0;
  if (r->err != 0) {
    kafka_req_malformed(kr);
    return;
  }
  kafka_cp_next(kr);
}
