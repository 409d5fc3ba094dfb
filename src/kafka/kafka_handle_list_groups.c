/* kafka_handle_list_groups.c - ListGroups v0-4: the native ListGroups (the
 * groups this node coordinates, as with Kafka's brokers), with each
 * group's protocol type ("" for Cairn-assigned groups). v3 and v4 are
 * flexible; v4 (librdkafka's rd_kafka_ListConsumerGroups) adds a states
 * filter, matched without regard to case as Kafka does, and each group's
 * state (kafka_group_state). */
#include "kafka/kafka_handlers.h"

#include <string.h>
#include <strings.h>

#define KAFKA_LSG_FLEXIBLE 3 /* the first flexible version */

/* Whether state passes the request's states filter (v4; none or an empty
 * one passes every state). Reads the filter from a copy of the body. */
static bool kafka_lsg_wanted(const struct kafka_req *kr, const char *state)
{
  if (kr->h.api_version < 4) {
    return true;
  }
  struct kafka_reader rd = kr->body;
  rd.pos = kr->body_at;
  rd.err = 0;
  int32_t n = kafka_get_compact_array_len(&rd, 1);
  if (n <= 0) {
    return true;
  }
  size_t len = strlen(state);
  for (int32_t i = 0; i < n && rd.err == 0; i++) {
    struct kafka_str s = kafka_get_compact_string(&rd);
    if (s.ptr != NULL && s.len == len && strncasecmp((const char *)s.ptr, state, len) == 0) {
      return true;
    }
  }
  return false;
}

static void kafka_lsg_on_answer(struct kafka_req *kr, const Cairn__Client__Envelope *env,
                                const struct conn_part *parts, size_t nparts)
{
  (void)parts;
  (void)nparts;
  int16_t v = kr->h.api_version;
  bool f = v >= KAFKA_LSG_FLEXIBLE;
  Cairn__Client__ErrorCode code =
      kafka_relay_code(env, CAIRN__CLIENT__ENVELOPE__BODY_LIST_GROUPS_RESP);
  const Cairn__Client__ListGroupsResponse *r =
      code == CAIRN__CLIENT__ERROR_CODE__OK ? env->list_groups_resp : NULL;
  size_t n = r != NULL ? r->n_groups : 0;
  int32_t kept = 0;
  for (size_t i = 0; i < n; i++) {
    kept += kafka_lsg_wanted(kr, kafka_group_state(r->groups[i]->state));
  }
  struct kafka_buf b;
  kafka_buf_init(&b);
  kafka_put_tags(&b, f); /* response header v1 */
  if (v >= 1) {
    kafka_put_i32(&b, 0); /* throttle_time_ms */
  }
  kafka_put_err(&b, kafka_group_err(code));
  kafka_put_array_len_f(&b, kept, f);
  for (size_t i = 0; i < n; i++) {
    const char *state = kafka_group_state(r->groups[i]->state);
    if (!kafka_lsg_wanted(kr, state)) {
      continue;
    }
    kafka_put_string_f(&b, r->groups[i]->group, f);
    kafka_put_string_f(&b, r->groups[i]->protocol_type, f);
    if (v >= 4) {
      kafka_put_compact_string(&b, state);
    }
    kafka_put_tags(&b, f);
  }
  kafka_put_tags(&b, f);
  kafka_req_respond(kr, &b);
}

void kafka_handle_list_groups(struct kafka_req *kr)
{
  struct kafka_reader *rd = &kr->body;
  bool f = kr->h.api_version >= KAFKA_LSG_FLEXIBLE;
  if (kr->h.api_version >= 4) {
    int32_t n = kafka_get_compact_array_len(rd, 1); /* states_filter */
    for (int32_t i = 0; i < n && rd->err == 0; i++) {
      (void)kafka_get_compact_string(rd);
    }
  }
  kafka_get_tags(rd, f);
  struct kafka_gop *op = rd->err == 0 ? kafka_gop_new(kr) : NULL;
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
