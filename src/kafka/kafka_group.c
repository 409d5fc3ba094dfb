/* kafka_group.c - what the Kafka consumer-group handlers share: memory for
 * the native request they build, and the group error mapping. */
#include "kafka/kafka_handlers.h"

#include <stdlib.h>
#include <string.h>

static void kafka_gop_free(void *p)
{
  struct kafka_gop *op = p;
  if (op == NULL) {
    return;
  }
  for (size_t i = 0; i < op->nblocks; i++) {
    free(op->blocks[i]);
  }
  free(op->blocks);
  free(op);
}

struct kafka_gop *kafka_gop_new(struct kafka_req *kr)
{
  struct kafka_gop *op = calloc(1, sizeof *op);
  if (op == NULL) {
    return NULL;
  }
  cairn__client__envelope__init(&op->env);
  kr->op = op;
  kr->op_free = kafka_gop_free;
  return op;
}

void *kafka_gop_alloc(struct kafka_gop *op, size_t size)
{
  if (op->nblocks == op->cap) {
    size_t cap = op->cap ? op->cap * 2 : 16;
    void **v = realloc(op->blocks, cap * sizeof *v);
    if (v == NULL) {
      return NULL;
    }
    op->blocks = v;
    op->cap = cap;
  }
  void *p = calloc(1, size > 0 ? size : 1);
  if (p != NULL) {
    op->blocks[op->nblocks++] = p;
  }
  return p;
}

char *kafka_gop_str(struct kafka_gop *op, struct kafka_str s)
{
  if (s.len > 0 && memchr(s.ptr, 0, s.len) != NULL) {
    return NULL;
  }
  char *p = kafka_gop_alloc(op, s.len + 1);
  if (p != NULL && s.len > 0) {
    memcpy(p, s.ptr, s.len);
  }
  return p;
}

const char *kafka_instance_or_null(const char *instance_id)
{
  return instance_id != NULL && instance_id[0] != '\0' ? instance_id : NULL;
}

int16_t kafka_group_err(Cairn__Client__ErrorCode code)
{
  switch (code) {
  case CAIRN__CLIENT__ERROR_CODE__NOT_COORDINATOR:
    return KAFKA_ERR_NOT_COORDINATOR;
  case CAIRN__CLIENT__ERROR_CODE__COORDINATOR_LOADING:
    return KAFKA_ERR_COORDINATOR_LOAD_IN_PROGRESS;
  /* A stopping coordinator: the client looks for the new one. */
  case CAIRN__CLIENT__ERROR_CODE__SHUTTING_DOWN:
  case CAIRN__CLIENT__ERROR_CODE__NOT_LEADER:
    return KAFKA_ERR_NOT_COORDINATOR;
  case CAIRN__CLIENT__ERROR_CODE__UNKNOWN_MEMBER_ID:
    return KAFKA_ERR_UNKNOWN_MEMBER_ID;
  case CAIRN__CLIENT__ERROR_CODE__ILLEGAL_GENERATION:
    return KAFKA_ERR_ILLEGAL_GENERATION;
  case CAIRN__CLIENT__ERROR_CODE__REBALANCE_IN_PROGRESS:
    return KAFKA_ERR_REBALANCE_IN_PROGRESS;
  case CAIRN__CLIENT__ERROR_CODE__INCONSISTENT_PROTOCOL:
    return KAFKA_ERR_INCONSISTENT_GROUP_PROTOCOL;
  case CAIRN__CLIENT__ERROR_CODE__GROUP_NOT_EMPTY:
    return KAFKA_ERR_NON_EMPTY_GROUP;
  /* Only Cairn-assigned groups check ownership; for Kafka: join again. */
  case CAIRN__CLIENT__ERROR_CODE__NOT_ASSIGNED:
    return KAFKA_ERR_ILLEGAL_GENERATION;
  case CAIRN__CLIENT__ERROR_CODE__UNKNOWN_GROUP:
    return KAFKA_ERR_GROUP_ID_NOT_FOUND;
  case CAIRN__CLIENT__ERROR_CODE__INVALID_GROUP:
    return KAFKA_ERR_INVALID_GROUP_ID;
  case CAIRN__CLIENT__ERROR_CODE__FENCED_INSTANCE_ID:
    return KAFKA_ERR_FENCED_INSTANCE_ID;
  case CAIRN__CLIENT__ERROR_CODE__AUTHORIZATION_FAILED:
    return KAFKA_ERR_GROUP_AUTHORIZATION_FAILED;
  default:
    return kafka_err_from_wire(code);
  }
}

void kafka_group_answer_err(struct kafka_req *kr, int16_t err)
{
  struct kafka_buf b;
  kafka_buf_init(&b);
  if (kr->h.api_version >= 1) {
    kafka_put_i32(&b, 0); /* throttle_time_ms */
  }
  kafka_put_err(&b, err);
  kafka_req_respond(kr, &b);
}

const char *kafka_group_state(const char *s)
{
  if (s == NULL || s[0] == '\0') {
    return "Dead";
  }
  if (strcmp(s, "empty") == 0) {
    return "Empty";
  }
  if (strcmp(s, "preparing") == 0) {
    return "PreparingRebalance";
  }
  if (strcmp(s, "completing") == 0 || strcmp(s, "storing") == 0) {
    return "CompletingRebalance";
  }
  if (strcmp(s, "stable") == 0) {
    return "Stable";
  }
  return "Unknown";
}
