/* kafka_handle_leave_group.c - LeaveGroup v0-2: the native LeaveGroup of
 * one member (v3's batch of members is not offered). */
#include "kafka/kafka_handlers.h"

static void kafka_lg_on_answer(struct kafka_req *kr, const Cairn__Client__Envelope *env,
                               const struct conn_part *parts, size_t nparts)
{
  (void)parts;
  (void)nparts;
  Cairn__Client__ErrorCode code =
      kafka_relay_code(env, CAIRN__CLIENT__ENVELOPE__BODY_LEAVE_GROUP_RESP);
  kafka_group_answer_err(kr, kafka_group_err(code));
}

void kafka_handle_leave_group(struct kafka_req *kr)
{
  struct kafka_reader *rd = &kr->body;
  struct kafka_str group = kafka_get_string(rd);
  struct kafka_str member = kafka_get_string(rd);
  if (rd->err != 0) {
    kafka_req_malformed(kr);
    return;
  }
  struct kafka_gop *op = kafka_gop_new(kr);
  Cairn__Client__LeaveGroupRequest *r = op != NULL ? kafka_gop_alloc(op, sizeof *r) : NULL;
  if (r == NULL) {
    kafka_group_answer_err(kr, KAFKA_ERR_UNKNOWN_SERVER);
    return;
  }
  cairn__client__leave_group_request__init(r);
  r->group = kafka_gop_str(op, group);
  r->member_id = kafka_gop_str(op, member);
  if (r->group == NULL || r->member_id == NULL) {
    kafka_group_answer_err(kr, KAFKA_ERR_INVALID_REQUEST);
    return;
  }
  op->env.body_case = CAIRN__CLIENT__ENVELOPE__BODY_LEAVE_GROUP_REQ;
  op->env.leave_group_req = r;
  kafka_req_relay(kr, CAIRN__CLIENT__API__API_LEAVE_GROUP, &op->env, NULL, 0, kafka_lg_on_answer);
}
