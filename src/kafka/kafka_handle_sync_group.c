/* kafka_handle_sync_group.c - SyncGroup v0-3: the native SyncGroup of a
 * client-assigned group. The leader's assignments (opaque bytes per
 * member) go to the coordinator as they are; every member's SyncGroup is
 * answered with its own bytes once the leader's have arrived and the
 * group's membership with them is committed in __cairn_offsets (the
 * coordinator holds the answers until then, as Kafka's storeGroup does).
 * group_instance_id (v3): a static member's (group.h). */
#include "kafka/kafka_handlers.h"

#include "server/group/group.h"

static void kafka_sg_answer(struct kafka_req *kr, int16_t err, const uint8_t *p, size_t len)
{
  struct kafka_buf b;
  kafka_buf_init(&b);
  if (kr->h.api_version >= 1) {
    kafka_put_i32(&b, 0); /* throttle_time_ms */
  }
  kafka_put_err(&b, err);
  kafka_put_bytes(&b, p, err == 0 ? len : 0);
  kafka_req_respond(kr, &b);
}

static void kafka_sg_on_answer(struct kafka_req *kr, const Cairn__Client__Envelope *env,
                               const struct conn_part *parts, size_t nparts)
{
  (void)parts;
  (void)nparts;
  Cairn__Client__ErrorCode code =
      kafka_relay_code(env, CAIRN__CLIENT__ENVELOPE__BODY_SYNC_GROUP_RESP);
  const Cairn__Client__SyncGroupResponse *r =
      code == CAIRN__CLIENT__ERROR_CODE__OK ? env->sync_group_resp : NULL;
  if (code != CAIRN__CLIENT__ERROR_CODE__OK) {
    kafka_sg_answer(kr, kafka_group_err(code), NULL, 0);
    return;
  }
  kafka_sg_answer(kr, KAFKA_ERR_NONE, r->assignment_data.data, r->assignment_data.len);
}

void kafka_handle_sync_group(struct kafka_req *kr)
{
  int16_t v = kr->h.api_version;
  struct kafka_reader *rd = &kr->body;
  struct kafka_str group = kafka_get_string(rd);
  int32_t generation = kafka_get_i32(rd);
  struct kafka_str member = kafka_get_string(rd);
  struct kafka_str instance = v >= 3 ? kafka_get_string(rd) : (struct kafka_str){NULL, 0};
  int32_t na = kafka_get_array_len(rd, 6);
  size_t at = rd->pos; /* the assignments, read again below */
  for (int32_t i = 0; rd->err == 0 && i < na; i++) {
    (void)kafka_get_string(rd);
    (void)kafka_get_bytes(rd);
  }
  if (rd->err != 0) {
    kafka_req_malformed(kr);
    return;
  }
  if (na > (int32_t)GROUP_MAX_MEMBERS) {
    kafka_sg_answer(kr, KAFKA_ERR_INVALID_REQUEST, NULL, 0);
    return;
  }
  struct kafka_gop *op = kafka_gop_new(kr);
  Cairn__Client__SyncGroupRequest *r = op != NULL ? kafka_gop_alloc(op, sizeof *r) : NULL;
  size_t n = na > 0 ? (size_t)na : 0;
  Cairn__Client__MemberAssignment *av = r != NULL ? kafka_gop_alloc(op, n * sizeof *av) : NULL;
  Cairn__Client__MemberAssignment **ap = av != NULL ? kafka_gop_alloc(op, n * sizeof *ap) : NULL;
  if (ap == NULL) {
    kafka_sg_answer(kr, KAFKA_ERR_UNKNOWN_SERVER, NULL, 0);
    return;
  }
  cairn__client__sync_group_request__init(r);
  r->group = kafka_gop_str(op, group);
  r->member_id = kafka_gop_str(op, member);
  r->group_instance_id = kafka_gop_str(op, instance);
  r->generation = generation;
  bool ok = r->group != NULL && r->member_id != NULL && r->group_instance_id != NULL;
  rd->pos = at;
  for (size_t i = 0; ok && i < n; i++) {
    struct kafka_str m = kafka_get_string(rd);
    struct kafka_str data = kafka_get_bytes(rd);
    cairn__client__member_assignment__init(&av[i]);
    av[i].member_id = kafka_gop_str(op, m);
    av[i].data.data = (uint8_t *)data.ptr; /* borrowed from the request */
    av[i].data.len = data.len;
    ap[i] = &av[i];
    ok = av[i].member_id != NULL;
  }
  if (!ok) {
    kafka_sg_answer(kr, KAFKA_ERR_INVALID_REQUEST, NULL, 0);
    return;
  }
  r->assignments = ap;
  r->n_assignments = n;
  op->env.body_case = CAIRN__CLIENT__ENVELOPE__BODY_SYNC_GROUP_REQ;
  op->env.sync_group_req = r;
  kafka_req_relay(kr, CAIRN__CLIENT__API__API_SYNC_GROUP, &op->env, NULL, 0, kafka_sg_on_answer);
}
