/* kafka_handle_join_group.c - JoinGroup v0-5: the native JoinGroup of a
 * client-assigned group (protocol_type and the protocols' opaque metadata
 * carried as they are), answered when the rebalance completes. For
 * protocol type "consumer" the subscribed topics are read from the first
 * protocol's metadata (Kafka's ConsumerProtocol Subscription: int16
 * version, array of string topics, ...) so that the coordinator knows the
 * subscription (descriptions, partition-count changes); the bytes still go
 * to the leader unchanged. group_instance_id (v5) makes a static member
 * (Kafka's KIP-345: group.h, "Static membership"). */
#include "kafka/kafka_handlers.h"

#include "server/group/group.h"

#include <string.h>

#define KAFKA_JG_MAX_PROTOCOLS GROUP_MAX_PROTOCOLS

static void kafka_jg_error(struct kafka_req *kr, int16_t err, struct kafka_str member)
{
  int16_t v = kr->h.api_version;
  struct kafka_buf b;
  kafka_buf_init(&b);
  if (v >= 2) {
    kafka_put_i32(&b, 0); /* throttle_time_ms */
  }
  kafka_put_err(&b, err);
  kafka_put_i32(&b, -1); /* generation_id */
  kafka_put_string(&b, "");
  kafka_put_string(&b, "");
  kafka_put_kstr(&b, member.ptr != NULL ? member : (struct kafka_str){(const uint8_t *)"", 0});
  kafka_put_array_len(&b, 0);
  kafka_req_respond(kr, &b);
}

static void kafka_jg_on_answer(struct kafka_req *kr, const Cairn__Client__Envelope *env,
                               const struct conn_part *parts, size_t nparts)
{
  (void)parts;
  (void)nparts;
  struct kafka_gop *op = kr->op;
  Cairn__Client__ErrorCode code =
      kafka_relay_code(env, CAIRN__CLIENT__ENVELOPE__BODY_JOIN_GROUP_RESP);
  const Cairn__Client__JoinGroupResponse *r =
      code == CAIRN__CLIENT__ERROR_CODE__OK ? env->join_group_resp : NULL;
  const char *member = op->env.join_group_req->member_id;
  if (code != CAIRN__CLIENT__ERROR_CODE__OK) {
    kafka_jg_error(kr, kafka_group_err(code),
                   (struct kafka_str){(const uint8_t *)member, strlen(member)});
    return;
  }
  int16_t v = kr->h.api_version;
  struct kafka_buf b;
  kafka_buf_init(&b);
  if (v >= 2) {
    kafka_put_i32(&b, 0); /* throttle_time_ms */
  }
  kafka_put_i16(&b, KAFKA_ERR_NONE);
  kafka_put_i32(&b, r->generation);
  kafka_put_string(&b, r->strategy);
  kafka_put_string(&b, r->leader_id);
  kafka_put_string(&b, r->member_id);
  /* Only the leader gets the members (it assigns), as in Kafka. */
  bool leader = strcmp(r->leader_id, r->member_id) == 0;
  kafka_put_array_len(&b, leader ? (int32_t)r->n_members : 0);
  for (size_t i = 0; leader && i < r->n_members; i++) {
    const Cairn__Client__GroupMember *m = r->members[i];
    kafka_put_string(&b, m->member_id);
    if (v >= 5) {
      kafka_put_string(&b, kafka_instance_or_null(m->group_instance_id));
    }
    kafka_put_bytes(&b, m->metadata.data, m->metadata.len);
  }
  kafka_req_respond(kr, &b);
}

/* The topics of a ConsumerProtocol Subscription (any version: the topics
 * come first after the version), as strings owned by op; none when the
 * bytes do not parse or name too many. */
static void kafka_jg_subscription(struct kafka_gop *op, Cairn__Client__JoinGroupRequest *r,
                                  struct kafka_str meta)
{
  struct kafka_reader rd;
  kafka_reader_init(&rd, meta.ptr, meta.len);
  (void)kafka_get_i16(&rd); /* version */
  int32_t n = kafka_get_array_len(&rd, 2);
  if (rd.err != 0 || n <= 0 || n > (int32_t)GROUP_MAX_SUBSCRIPTION) {
    return;
  }
  char **topics = kafka_gop_alloc(op, (size_t)n * sizeof *topics);
  if (topics == NULL) {
    return;
  }
  size_t k = 0;
  for (int32_t i = 0; i < n; i++) {
    struct kafka_str t = kafka_get_string(&rd);
    char name[KAFKA_TOPIC_MAX + 1];
    if (rd.err != 0) {
      return;
    }
    if (kafka_topic_name(t, name)) {
      topics[k] = kafka_gop_str(op, t);
      if (topics[k] == NULL) {
        return;
      }
      k++;
    }
  }
  r->topics = topics;
  r->n_topics = k;
}

void kafka_handle_join_group(struct kafka_req *kr)
{
  int16_t v = kr->h.api_version;
  struct kafka_reader *rd = &kr->body;
  struct kafka_str group = kafka_get_string(rd);
  int32_t session = kafka_get_i32(rd);
  int32_t rebalance = v >= 1 ? kafka_get_i32(rd) : session;
  struct kafka_str member = kafka_get_string(rd);
  struct kafka_str instance = v >= 5 ? kafka_get_string(rd) : (struct kafka_str){NULL, 0};
  struct kafka_str ptype = kafka_get_string(rd);
  int32_t np = kafka_get_array_len(rd, 6);
  struct kafka_str names[KAFKA_JG_MAX_PROTOCOLS], metas[KAFKA_JG_MAX_PROTOCOLS];
  for (int32_t i = 0; rd->err == 0 && i < np; i++) {
    struct kafka_str name = kafka_get_string(rd);
    struct kafka_str meta = kafka_get_bytes(rd);
    if (i < (int32_t)KAFKA_JG_MAX_PROTOCOLS) {
      names[i] = name;
      metas[i] = meta;
    }
  }
  if (rd->err != 0) {
    kafka_req_malformed(kr);
    return;
  }
  if (np <= 0 || np > (int32_t)KAFKA_JG_MAX_PROTOCOLS || ptype.len == 0 ||
      ptype.len > GROUP_PROTOCOL_NAME_MAX) {
    kafka_jg_error(kr, KAFKA_ERR_INCONSISTENT_GROUP_PROTOCOL, member);
    return;
  }
  if (session <= 0 || rebalance < 0) {
    kafka_jg_error(kr, 26 /* INVALID_SESSION_TIMEOUT */, member);
    return;
  }
  struct kafka_gop *op = kafka_gop_new(kr);
  Cairn__Client__JoinGroupRequest *r = op != NULL ? kafka_gop_alloc(op, sizeof *r) : NULL;
  Cairn__Client__GroupProtocol *pv =
      r != NULL ? kafka_gop_alloc(op, (size_t)np * sizeof *pv) : NULL;
  Cairn__Client__GroupProtocol **pp =
      pv != NULL ? kafka_gop_alloc(op, (size_t)np * sizeof *pp) : NULL;
  if (pp == NULL) {
    kafka_jg_error(kr, KAFKA_ERR_UNKNOWN_SERVER, member);
    return;
  }
  cairn__client__join_group_request__init(r);
  r->group = kafka_gop_str(op, group);
  r->member_id = kafka_gop_str(op, member);
  r->client_id = kafka_gop_str(op, kr->h.client_id);
  r->protocol_type = kafka_gop_str(op, ptype);
  r->group_instance_id = kafka_gop_str(op, instance);
  if (r->client_id != NULL && strlen(r->client_id) > GROUP_CLIENT_ID_MAX) {
    r->client_id[GROUP_CLIENT_ID_MAX] = '\0'; /* Kafka client ids may be longer */
  }
  r->session_timeout_ms = (uint32_t)session;
  r->rebalance_timeout_ms = (uint32_t)rebalance;
  bool ok = r->group != NULL && r->member_id != NULL && r->client_id != NULL &&
            r->protocol_type != NULL && r->group_instance_id != NULL;
  for (int32_t i = 0; ok && i < np; i++) {
    cairn__client__group_protocol__init(&pv[i]);
    pv[i].name = kafka_gop_str(op, names[i]);
    pv[i].metadata.data = (uint8_t *)metas[i].ptr; /* borrowed from the request */
    pv[i].metadata.len = metas[i].len;
    pp[i] = &pv[i];
    ok = pv[i].name != NULL;
  }
  if (!ok) {
    kafka_jg_error(kr, KAFKA_ERR_INVALID_REQUEST, member);
    return;
  }
  r->protocols = pp;
  r->n_protocols = (size_t)np;
  if (strcmp(r->protocol_type, "consumer") == 0) {
    kafka_jg_subscription(op, r, metas[0]);
  }
  op->env.body_case = CAIRN__CLIENT__ENVELOPE__BODY_JOIN_GROUP_REQ;
  op->env.join_group_req = r;
  kafka_req_relay(kr, CAIRN__CLIENT__API__API_JOIN_GROUP, &op->env, NULL, 0, kafka_jg_on_answer);
}
