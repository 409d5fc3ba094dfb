/* kafka_handle_delete_groups.c - DeleteGroups v0-1: each group through the
 * core operation behind `cairn group delete` (the native ResetOffsets with
 * delete_group: every committed offset tombstoned in __cairn_offsets,
 * refused while the group has members), one after the other, on the
 * group's coordinator (others answer NOT_COORDINATOR, as in Kafka). */
#include "kafka/kafka_handlers.h"

#include <stdlib.h>

#define KAFKA_DG_MAX_GROUPS 1000

static char kafka_dg_empty[1]; /* the name of a group whose name could not be copied */

struct kafka_dg_group {
  char *name; /* owned by the gop */
  int16_t err;
};

struct kafka_dg_state {
  struct kafka_dg_group *groups; /* owned by the gop */
  size_t ngroups;
  size_t next;
  Cairn__Client__ResetOffsetsRequest ro;
};

static void kafka_dg_answer(struct kafka_req *kr, const struct kafka_dg_state *st)
{
  struct kafka_buf b;
  kafka_buf_init(&b);
  kafka_put_i32(&b, 0); /* throttle_time_ms (v0 has it too) */
  kafka_put_array_len(&b, (int32_t)st->ngroups);
  for (size_t i = 0; i < st->ngroups; i++) {
    kafka_put_string(&b, st->groups[i].name);
    kafka_put_err(&b, st->groups[i].err);
  }
  kafka_req_respond(kr, &b);
}

static struct kafka_dg_state *kafka_dg_state(struct kafka_req *kr)
{
  struct kafka_gop *op = kr->op;
  return op->blocks[0];
}

static void kafka_dg_next(struct kafka_req *kr);

static void kafka_dg_on_answer(struct kafka_req *kr, const Cairn__Client__Envelope *env,
                               const struct conn_part *parts, size_t nparts)
{
  (void)parts;
  (void)nparts;
  struct kafka_dg_state *st = kafka_dg_state(kr);
  Cairn__Client__ErrorCode code =
      kafka_relay_code(env, CAIRN__CLIENT__ENVELOPE__BODY_RESET_OFFSETS_RESP);
  st->groups[st->next++].err = kafka_group_err(code);
  kafka_dg_next(kr);
}

static void kafka_dg_next(struct kafka_req *kr)
{
  struct kafka_gop *op = kr->op;
  struct kafka_dg_state *st = kafka_dg_state(kr);
  while (st->next < st->ngroups && st->groups[st->next].err != 0) {
    st->next++;
  }
  if (st->next == st->ngroups) {
    kafka_dg_answer(kr, st);
    return;
  }
  cairn__client__envelope__init(&op->env);
  cairn__client__reset_offsets_request__init(&st->ro);
  st->ro.group = st->groups[st->next].name;
  st->ro.delete_group = true;
  op->env.body_case = CAIRN__CLIENT__ENVELOPE__BODY_RESET_OFFSETS_REQ;
  op->env.reset_offsets_req = &st->ro;
  kafka_req_relay(kr, CAIRN__CLIENT__API__API_RESET_OFFSETS, &op->env, NULL, 0,
                  kafka_dg_on_answer);
}

void kafka_handle_delete_groups(struct kafka_req *kr)
{
  struct kafka_reader *r = &kr->body;
  struct kafka_gop *op = kafka_gop_new(kr);
  /* The state is the op's first block (kafka_dg_state finds it there). */
  struct kafka_dg_state *st = op != NULL ? kafka_gop_alloc(op, sizeof *st) : NULL;
  int32_t n = kafka_get_array_len(r, 2);
  if (st == NULL || r->err != 0 || n > KAFKA_DG_MAX_GROUPS) {
    kafka_req_malformed(kr);
    return;
  }
  st->groups = kafka_gop_alloc(op, (n > 0 ? (size_t)n : 1) * sizeof *st->groups);
  if (st->groups == NULL) {
    kafka_req_malformed(kr);
    return;
  }
  for (int32_t i = 0; i < n && r->err == 0; i++) {
    struct kafka_dg_group *g = &st->groups[st->ngroups++];
    struct kafka_str name = kafka_get_string(r);
    g->name = kafka_gop_str(op, name);
    if (g->name == NULL) {
      g->name = kafka_dg_empty;
      g->err = KAFKA_ERR_INVALID_GROUP_ID;
    } else if (name.ptr == NULL || name.len == 0) {
      g->err = KAFKA_ERR_INVALID_GROUP_ID;
    }
  }
  if (r->err != 0) {
    kafka_req_malformed(kr);
    return;
  }
  kafka_dg_next(kr);
}
