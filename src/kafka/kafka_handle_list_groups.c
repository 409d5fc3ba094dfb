/* kafka_handle_list_groups.c - ListGroups v0-2: the native ListGroups (the
 * groups this node coordinates, as with Kafka's brokers), with each
 * group's protocol type ("" for Cairn-assigned groups). */
#include "kafka/kafka_handlers.h"

static void kafka_lsg_on_answer(struct kafka_req *kr, const Cairn__Client__Envelope *env,
                                const struct conn_part *parts, size_t nparts)
{
  (void)parts;
  (void)nparts;
  Cairn__Client__ErrorCode code =
      kafka_relay_code(env, CAIRN__CLIENT__ENVELOPE__BODY_LIST_GROUPS_RESP);
  const Cairn__Client__ListGroupsResponse *r =
      code == CAIRN__CLIENT__ERROR_CODE__OK ? env->list_groups_resp : NULL;
  struct kafka_buf b;
  kafka_buf_init(&b);
  if (kr->h.api_version >= 1) {
    kafka_put_i32(&b, 0); /* throttle_time_ms */
  }
  kafka_put_err(&b, kafka_group_err(code));
  size_t n = code == CAIRN__CLIENT__ERROR_CODE__OK ? r->n_groups : 0;
  kafka_put_array_len(&b, (int32_t)n);
  for (size_t i = 0; i < n; i++) {
    kafka_put_string(&b, r->groups[i]->group);
    kafka_put_string(&b, r->groups[i]->protocol_type);
  }
  kafka_req_respond(kr, &b);
}

void kafka_handle_list_groups(struct kafka_req *kr)
{
  struct kafka_gop *op = kafka_gop_new(kr);
  Cairn__Client__ListGroupsRequest *r = op != NULL ? kafka_gop_alloc(op, sizeof *r) : NULL;
  if (r == NULL) {
    kafka_req_malformed(kr);
    return;
  }
  cairn__client__list_groups_request__init(r);
  op->env.body_case = CAIRN__CLIENT__ENVELOPE__BODY_LIST_GROUPS_REQ;
  op->env.list_groups_req = r;
  kafka_req_relay(kr, CAIRN__CLIENT__API__API_LIST_GROUPS, &op->env, NULL, 0, kafka_lsg_on_answer);
}
