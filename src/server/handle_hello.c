/* handle_hello.c - Hello: the protocol version both sides speak, this
 * node's id, the cluster id and the limits in force. */
#include "server/handlers.h"

#define HELLO_PROTOCOL_MIN 1
#define HELLO_PROTOCOL_MAX 1

static const Cairn__Client__Api hello_apis[] = {
    CAIRN__CLIENT__API__API_HELLO,          CAIRN__CLIENT__API__API_METADATA,
    CAIRN__CLIENT__API__API_CREATE_TOPIC,   CAIRN__CLIENT__API__API_DELETE_TOPIC,
    CAIRN__CLIENT__API__API_LIST_TOPICS,    CAIRN__CLIENT__API__API_DESCRIBE_TOPIC,
    CAIRN__CLIENT__API__API_PRODUCE,        CAIRN__CLIENT__API__API_FETCH,
    CAIRN__CLIENT__API__API_LIST_OFFSETS,   CAIRN__CLIENT__API__API_DESCRIBE_CLUSTER,
    CAIRN__CLIENT__API__API_DECOMMISSION_NODE,
    CAIRN__CLIENT__API__API_FIND_COORDINATOR, CAIRN__CLIENT__API__API_JOIN_GROUP,
    CAIRN__CLIENT__API__API_SYNC_GROUP,     CAIRN__CLIENT__API__API_HEARTBEAT,
    CAIRN__CLIENT__API__API_LEAVE_GROUP,    CAIRN__CLIENT__API__API_OFFSET_COMMIT,
    CAIRN__CLIENT__API__API_OFFSET_FETCH,   CAIRN__CLIENT__API__API_LIST_GROUPS,
    CAIRN__CLIENT__API__API_DESCRIBE_GROUPS, CAIRN__CLIENT__API__API_RESET_OFFSETS,
    CAIRN__CLIENT__API__API_INIT_PRODUCER_ID, CAIRN__CLIENT__API__API_AUTHENTICATE,
    CAIRN__CLIENT__API__API_UPSERT_USER,    CAIRN__CLIENT__API__API_DELETE_USER,
    CAIRN__CLIENT__API__API_LIST_USERS,     CAIRN__CLIENT__API__API_ADD_PARTITIONS,
    CAIRN__CLIENT__API__API_ALTER_TOPIC_CONFIG, CAIRN__CLIENT__API__API_DELETE_RECORDS,
};

void handle_hello(struct node *n, struct conn_request *req)
{
  const Cairn__Client__HelloRequest *hr = req->env->hello_req;
  uint32_t lo = hr->min_version ? hr->min_version : 1;
  uint32_t hi = hr->max_version ? hr->max_version : lo;
  Cairn__Client__HelloResponse resp = CAIRN__CLIENT__HELLO_RESPONSE__INIT;
  Cairn__Client__Error err = CAIRN__CLIENT__ERROR__INIT;
  if (hi < HELLO_PROTOCOL_MIN || lo > HELLO_PROTOCOL_MAX || lo > hi) {
    err.code = CAIRN__CLIENT__ERROR_CODE__UNSUPPORTED_VERSION;
    err.message = "this node speaks protocol version 1 only";
    resp.error = &err;
  } else {
    resp.version = hi < HELLO_PROTOCOL_MAX ? hi : HELLO_PROTOCOL_MAX;
  }
  resp.node_id = n->cfg.node_id;
  resp.cluster_id = (char *)ctl_state(&n->ctl)->cluster_id;
  resp.max_frame_bytes = (uint32_t)n->cfg.max_frame_bytes;
  resp.max_inflight_bytes = n->cfg.max_inflight_bytes;
  resp.n_apis = sizeof hello_apis / sizeof hello_apis[0];
  resp.apis = (Cairn__Client__Api *)hello_apis;
  Cairn__Client__Envelope env = CAIRN__CLIENT__ENVELOPE__INIT;
  env.body_case = CAIRN__CLIENT__ENVELOPE__BODY_HELLO_RESP;
  env.hello_resp = &resp;
  conn_respond(req, &env, NULL, 0);
}
