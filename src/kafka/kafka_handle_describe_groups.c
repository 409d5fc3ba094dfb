/* kafka_handle_describe_groups.c - DescribeGroups v0-4: the native
 * DescribeGroups (each group asked of its coordinator: a group coordinated
 * elsewhere is NOT_COORDINATOR, as in Kafka). States map to Kafka's names;
 * an unknown group is "Dead" with no error (Kafka's answer). For a
 * Cairn-assigned group (native members) protocol_type is "" and
 * protocol_data the strategy; member metadata and assignments are then
 * empty. client_host is "" (not recorded); authorized_operations (v3+) is
 * INT32_MIN ("not computed"). */
#include "kafka/kafka_handlers.h"

#include <string.h>

static void kafka_dg_on_answer(struct kafka_req *kr, const Cairn__Client__Envelope *env,
                               const struct conn_part *parts, size_t nparts)
{
  (void)parts;
  (void)nparts;
  struct kafka_gop *op = kr->op;
  const Cairn__Client__DescribeGroupsRequest *q = op->env.describe_groups_req;
  int16_t v = kr->h.api_version;
  Cairn__Client__ErrorCode code = kafka_relay_error(env);
  const Cairn__Client__DescribeGroupsResponse *r =
      env != NULL && env->body_case == CAIRN__CLIENT__ENVELOPE__BODY_DESCRIBE_GROUPS_RESP
          ? env->describe_groups_resp
          : NULL;
  if (code == CAIRN__CLIENT__ERROR_CODE__OK && r == NULL) {
    code = CAIRN__CLIENT__ERROR_CODE__UNKNOWN;
  }
  struct kafka_buf b;
  kafka_buf_init(&b);
  if (v >= 1) {
    kafka_put_i32(&b, 0); /* throttle_time_ms */
  }
  kafka_put_array_len(&b, (int32_t)q->n_groups);
  for (size_t i = 0; i < q->n_groups; i++) {
    const Cairn__Client__GroupDescription *d =
        code == CAIRN__CLIENT__ERROR_CODE__OK && i < r->n_groups ? r->groups[i] : NULL;
    Cairn__Client__ErrorCode gc = d == NULL          ? code
                                  : d->error != NULL ? d->error->code
                                                     : CAIRN__CLIENT__ERROR_CODE__OK;
    bool dead = gc == CAIRN__CLIENT__ERROR_CODE__UNKNOWN_GROUP;
    bool ok = gc == CAIRN__CLIENT__ERROR_CODE__OK && d != NULL;
    kafka_put_err(&b, dead ? KAFKA_ERR_NONE : kafka_group_err(gc != 0 || d != NULL ? gc : 1));
    kafka_put_string(&b, q->groups[i]);
    kafka_put_string(&b, ok ? kafka_group_state(d->state) : dead ? "Dead" : "");
    kafka_put_string(&b, ok ? d->protocol_type : "");
    kafka_put_string(&b, ok ? d->strategy : "");
    size_t nm = ok ? d->n_members : 0;
    kafka_put_array_len(&b, (int32_t)nm);
    for (size_t k = 0; k < nm; k++) {
      const Cairn__Client__GroupMember *m = d->members[k];
      kafka_put_string(&b, m->member_id);
      if (v >= 4) {
        kafka_put_string(&b, kafka_instance_or_null(m->group_instance_id));
      }
      kafka_put_string(&b, m->client_id);
      kafka_put_string(&b, ""); /* client_host */
      kafka_put_bytes(&b, m->metadata.data, m->metadata.len);
      kafka_put_bytes(&b, m->assignment_data.data, m->assignment_data.len);
    }
    if (v >= 3) {
      kafka_put_i32(&b, INT32_MIN); /* authorized_operations */
    }
  }
  kafka_req_respond(kr, &b);
}

void kafka_handle_describe_groups(struct kafka_req *kr)
{
  struct kafka_reader *rd = &kr->body;
  int32_t ng = kafka_get_array_len(rd, 2);
  size_t at = rd->pos;
  for (int32_t i = 0; rd->err == 0 && i < ng; i++) {
    (void)kafka_get_string(rd);
  }
  if (kr->h.api_version >= 3) {
    (void)kafka_get_i8(rd); /* include_authorized_operations */
  }
  if (rd->err != 0 || ng < 0) {
    kafka_req_malformed(kr);
    return;
  }
  struct kafka_gop *op = kafka_gop_new(kr);
  Cairn__Client__DescribeGroupsRequest *r = op != NULL ? kafka_gop_alloc(op, sizeof *r) : NULL;
  char **names = r != NULL ? kafka_gop_alloc(op, ((size_t)ng + 1) * sizeof *names) : NULL;
  if (names == NULL) {
    kafka_req_malformed(kr);
    return;
  }
  cairn__client__describe_groups_request__init(r);
  rd->pos = at;
  for (int32_t i = 0; i < ng; i++) {
    names[i] = kafka_gop_str(op, kafka_get_string(rd));
    if (names[i] == NULL) {
      kafka_req_malformed(kr);
      return;
    }
  }
  r->groups = names;
  r->n_groups = (size_t)ng;
  op->env.body_case = CAIRN__CLIENT__ENVELOPE__BODY_DESCRIBE_GROUPS_REQ;
  op->env.describe_groups_req = r;
  kafka_req_relay(kr, CAIRN__CLIENT__API__API_DESCRIBE_GROUPS, &op->env, NULL, 0,
                  kafka_dg_on_answer);
}
