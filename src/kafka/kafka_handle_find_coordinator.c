/* kafka_handle_find_coordinator.c - FindCoordinator v0-2 for groups: the
 * native FindCoordinator (the leader of the group's __cairn_offsets
 * partition), answered with that node's Kafka address from the metadata.
 * Transaction coordinators (key_type 1) do not exist here. */
#include "kafka/kafka_handlers.h"

#include "net/frame.h"

#include "server/config.h"
#include "server/node.h"

#include <stdio.h>
#include <string.h>

static void kafka_fc_answer(struct kafka_req *kr, int16_t err, const char *message, int32_t id,
                            const char *host, int32_t port)
{
  int16_t v = kr->h.api_version;
  struct kafka_buf b;
  kafka_buf_init(&b);
  if (v >= 1) {
    kafka_put_i32(&b, 0); /* throttle_time_ms */
  }
  kafka_put_err(&b, err);
  if (v >= 1) {
    kafka_put_string(&b, err != 0 ? message : NULL);
  }
  kafka_put_i32(&b, err != 0 ? -1 : id);
  kafka_put_string(&b, err != 0 ? "" : host);
  kafka_put_i32(&b, err != 0 ? -1 : port);
  kafka_req_respond(kr, &b);
}

static void kafka_fc_on_answer(struct kafka_req *kr, const Cairn__Client__Envelope *env,
                               const struct conn_part *parts, size_t nparts)
{
  (void)parts;
  (void)nparts;
  Cairn__Client__ErrorCode code =
      kafka_relay_code(env, CAIRN__CLIENT__ENVELOPE__BODY_FIND_COORDINATOR_RESP);
  const Cairn__Client__FindCoordinatorResponse *r =
      code == CAIRN__CLIENT__ERROR_CODE__OK ? env->find_coordinator_resp : NULL;
  if (code != CAIRN__CLIENT__ERROR_CODE__OK) {
    /* No coordinator yet (no leader, the offsets topic being created or
     * loaded): Kafka's retriable answer to FindCoordinator. */
    int16_t err = code == CAIRN__CLIENT__ERROR_CODE__NOT_COORDINATOR ||
                          code == CAIRN__CLIENT__ERROR_CODE__COORDINATOR_LOADING ||
                          code == CAIRN__CLIENT__ERROR_CODE__SHUTTING_DOWN
                      ? KAFKA_ERR_COORDINATOR_NOT_AVAILABLE
                      : kafka_group_err(code);
    const Cairn__Client__Error *e = env != NULL ? frame_body_error(env) : NULL;
    const char *msg = e != NULL && e->message != NULL ? e->message : "no coordinator";
    kafka_fc_answer(kr, err, msg, -1, "", -1);
    return;
  }
  const struct meta_node *nd = meta_node_find(ctl_state(&kr->n->ctl), r->coordinator_id);
  char host[CONFIG_ADDR_MAX + 1];
  int32_t port = 0;
  if (r->coordinator_id == 0 || r->coordinator_id > INT32_MAX || nd == NULL ||
      !kafka_addr_split(nd->kafka_addr, host, sizeof host, &port)) {
    kafka_fc_answer(kr, KAFKA_ERR_COORDINATOR_NOT_AVAILABLE, "the coordinator has no Kafka address",
                    -1, "", -1);
    return;
  }
  kafka_fc_answer(kr, KAFKA_ERR_NONE, NULL, (int32_t)r->coordinator_id, host, port);
}

void kafka_handle_find_coordinator(struct kafka_req *kr)
{
  struct kafka_str key = kafka_get_string(&kr->body);
  int8_t key_type = kr->h.api_version >= 1 ? kafka_get_i8(&kr->body) : 0;
  if (kr->body.err != 0) {
    kafka_req_malformed(kr);
    return;
  }
  if (key_type != 0) {
    kafka_fc_answer(kr, KAFKA_ERR_COORDINATOR_NOT_AVAILABLE,
                    "no transaction coordinator: Cairn has no transactions", -1, "", -1);
    return;
  }
  struct kafka_gop *op = kafka_gop_new(kr);
  Cairn__Client__FindCoordinatorRequest *r = op != NULL ? kafka_gop_alloc(op, sizeof *r) : NULL;
  char *group = r != NULL ? kafka_gop_str(op, key) : NULL;
  if (group == NULL) {
    kafka_fc_answer(kr, KAFKA_ERR_INVALID_GROUP_ID, "bad group id", -1, "", -1);
    return;
  }
  cairn__client__find_coordinator_request__init(r);
  r->group = group;
  op->env.body_case = CAIRN__CLIENT__ENVELOPE__BODY_FIND_COORDINATOR_REQ;
  op->env.find_coordinator_req = r;
  kafka_req_relay(kr, CAIRN__CLIENT__API__API_FIND_COORDINATOR, &op->env, NULL, 0,
                  kafka_fc_on_answer);
}
