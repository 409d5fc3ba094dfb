/* kafka_handle_leave_group.c - LeaveGroup v0-3: the native LeaveGroup of
 * each member. v0-2 name one member by its id and answer one error; v3
 * (KIP-345) names a batch, each by member id or, for a static member, by
 * group_instance_id alone (how admin tools remove static members, which
 * never leave by themselves), and answers an error per member, one after
 * the other through the core as DeleteGroups does. A group-level refusal
 * (NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS) is the top-level error
 * with no members, as in Kafka; an unknown group answers each member
 * UNKNOWN_MEMBER_ID. */
#include "kafka/kafka_handlers.h"

#include "server/group/group.h"

#define KAFKA_LG_BATCH_VERSION 3

struct kafka_lg_member {
  char *member;   /* owned by the gop */
  char *instance; /* owned by the gop; "" for none (null on the wire) */
  int16_t err;
};

struct kafka_lg_state {
  struct kafka_lg_member *members; /* owned by the gop */
  size_t nmembers;
  size_t next;
  int16_t top; /* a group-level error: no member answered */
  Cairn__Client__LeaveGroupRequest r;
};

static struct kafka_lg_state *kafka_lg_state(struct kafka_req *kr)
{
  struct kafka_gop *op = kr->op;
  return op->blocks[0];
}

static void kafka_lg_answer(struct kafka_req *kr, const struct kafka_lg_state *st)
{
  if (kr->h.api_version < KAFKA_LG_BATCH_VERSION) {
    kafka_group_answer_err(kr, st->top != KAFKA_ERR_NONE ? st->top : st->members[0].err);
    return;
  }
  struct kafka_buf b;
  kafka_buf_init(&b);
  kafka_put_i32(&b, 0); /* throttle_time_ms */
  kafka_put_err(&b, st->top);
  size_t n = st->top == KAFKA_ERR_NONE ? st->nmembers : 0;
  kafka_put_array_len(&b, (int32_t)n);
  for (size_t i = 0; i < n; i++) {
    kafka_put_string(&b, st->members[i].member);
    kafka_put_string(&b, kafka_instance_or_null(st->members[i].instance));
    kafka_put_err(&b, st->members[i].err);
  }
  kafka_req_respond(kr, &b);
}

static void kafka_lg_next(struct kafka_req *kr);

static void kafka_lg_on_answer(struct kafka_req *kr, const Cairn__Client__Envelope *env,
                               const struct conn_part *parts, size_t nparts)
{
  (void)parts;
  (void)nparts;
  struct kafka_lg_state *st = kafka_lg_state(kr);
  Cairn__Client__ErrorCode code =
      kafka_relay_code(env, CAIRN__CLIENT__ENVELOPE__BODY_LEAVE_GROUP_RESP);
  int16_t err = kafka_group_err(code);
  if (err == KAFKA_ERR_NOT_COORDINATOR || err == KAFKA_ERR_COORDINATOR_LOAD_IN_PROGRESS) {
    st->top = err;
    kafka_lg_answer(kr, st);
    return;
  }
  if (code == CAIRN__CLIENT__ERROR_CODE__UNKNOWN_GROUP) {
    err = KAFKA_ERR_UNKNOWN_MEMBER_ID; /* Kafka: each member of an unknown group */
  }
  st->members[st->next++].err = err;
  kafka_lg_next(kr);
}

static void kafka_lg_next(struct kafka_req *kr)
{
  struct kafka_gop *op = kr->op;
  struct kafka_lg_state *st = kafka_lg_state(kr);
  while (st->next < st->nmembers && st->members[st->next].err != KAFKA_ERR_NONE) {
    st->next++;
  }
  if (st->next == st->nmembers) {
    kafka_lg_answer(kr, st);
    return;
  }
  cairn__client__envelope__init(&op->env);
  st->r.member_id = st->members[st->next].member;
  st->r.group_instance_id = st->members[st->next].instance;
  op->env.body_case = CAIRN__CLIENT__ENVELOPE__BODY_LEAVE_GROUP_REQ;
  op->env.leave_group_req = &st->r;
  kafka_req_relay(kr, CAIRN__CLIENT__API__API_LEAVE_GROUP, &op->env, NULL, 0, kafka_lg_on_answer);
}

/* One member of the request into m; false when out of memory. */
static bool kafka_lg_member(struct kafka_gop *op, struct kafka_lg_member *m,
                            struct kafka_str member, struct kafka_str instance)
{
  m->member = kafka_gop_str(op, member);
  m->instance = kafka_gop_str(op, instance);
  if (m->member == NULL || m->instance == NULL) {
    return false;
  }
  if (m->member[0] == '\0' && m->instance[0] == '\0') {
    m->err = KAFKA_ERR_UNKNOWN_MEMBER_ID; /* names nobody */
  }
  return true;
}

void kafka_handle_leave_group(struct kafka_req *kr)
{
  struct kafka_reader *rd = &kr->body;
  struct kafka_gop *op = kafka_gop_new(kr);
  /* The state is the op's first block (kafka_lg_state finds it there). */
  struct kafka_lg_state *st = op != NULL ? kafka_gop_alloc(op, sizeof *st) : NULL;
  if (st == NULL) {
    kafka_group_answer_err(kr, KAFKA_ERR_UNKNOWN_SERVER);
    return;
  }
  cairn__client__leave_group_request__init(&st->r);
  struct kafka_str group = kafka_get_string(rd);
  bool batch = kr->h.api_version >= KAFKA_LG_BATCH_VERSION;
  int32_t n = batch ? kafka_get_array_len(rd, 4) : 1;
  if (rd->err != 0 || n > (int32_t)GROUP_MAX_MEMBERS) {
    kafka_req_malformed(kr);
    return;
  }
  st->members = kafka_gop_alloc(op, (n > 0 ? (size_t)n : 1) * sizeof *st->members);
  st->r.group = kafka_gop_str(op, group);
  bool ok = st->members != NULL && st->r.group != NULL;
  for (int32_t i = 0; ok && i < n && rd->err == 0; i++) {
    struct kafka_str member = kafka_get_string(rd);
    struct kafka_str instance = batch ? kafka_get_string(rd) : (struct kafka_str){NULL, 0};
    ok = rd->err != 0 || kafka_lg_member(op, &st->members[st->nmembers++], member, instance);
  }
  if (rd->err != 0) {
    kafka_req_malformed(kr);
    return;
  }
  if (!ok) {
    kafka_group_answer_err(kr, KAFKA_ERR_UNKNOWN_SERVER);
    return;
  }
  kafka_lg_next(kr);
}
