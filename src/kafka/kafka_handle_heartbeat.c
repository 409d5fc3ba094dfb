/* kafka_handle_heartbeat.c - Heartbeat v0-3: the native Heartbeat
 * (REBALANCE_IN_PROGRESS tells the member to join again).
 * group_instance_id (v3): a static member's (group.h). */
#include "kafka/kafka_handlers.h"

static void kafka_hb_on_answer(struct kafka_req *kr, const Cairn__Client__Envelope *env,
                               const struct conn_part *parts, size_t nparts)
{
  (void)parts;
  (void)nparts;
  Cairn__Client__ErrorCode code =
      kafka_relay_code(env, CAIRN__CLIENT__ENVELOPE__BODY_HEARTBEAT_RESP);
  kafka_group_answer_err(kr, kafka_group_err(code));
}

void kafka_handle_heartbeat(struct kafka_req *kr)
{
  struct kafka_reader *rd = &kr->body;
  struct kafka_str group = kafka_get_string(rd);
  int32_t generation = kafka_get_i32(rd);
  struct kafka_str member = kafka_get_string(rd);
  struct kafka_str instance =
      kr->h.api_version >= 3 ? kafka_get_string(rd) : (struct kafka_str){NULL, 0};
  if (rd->err != 0) {
    kafka_req_malformed(kr);
    return;
  }
  struct kafka_gop *op = kafka_gop_new(kr);
  Cairn__Client__HeartbeatRequest *r = op != NULL ? kafka_gop_alloc(op, sizeof *r) : NULL;
  if (r == NULL) {
    kafka_group_answer_err(kr, KAFKA_ERR_UNKNOWN_SERVER);
    return;
  }
  cairn__client__heartbeat_request__init(r);
  r->group = kafka_gop_str(op, group);
  r->member_id = kafka_gop_str(op, member);
  r->group_instance_id = kafka_gop_str(op, instance);
  r->generation = generation;
  if (r->group == NULL || r->member_id == NULL || r->group_instance_id == NULL) {
    kafka_group_answer_err(kr, KAFKA_ERR_INVALID_REQUEST);
    return;
  }
  op->env.body_case = CAIRN__CLIENT__ENVELOPE__BODY_HEARTBEAT_REQ;
  op->env.heartbeat_req = r;
  kafka_req_relay(kr, CAIRN__CLIENT__API__API_HEARTBEAT, &op->env, NULL, 0, kafka_hb_on_answer);
}
