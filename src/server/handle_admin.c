/* handle_admin.c - CreateTopic, DeleteTopic, DecommissionNode, and the
 * forwarding of admin requests to the controller leader.
 *
 * The controller leader turns each request into one metadata command and
 * answers once the command is applied (committed on a majority of the
 * controller voters): placement happens inside the apply, so every node
 * computes the same one. */
#include "server/handlers.h"

#include "common/err.h"
#include "common/log.h"
#include "net/wire_err.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

/* Wall-clock ms, recorded in node state changes for operators. */
static uint64_t admin_wall_ms(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* ---- forwarding ---- */

struct fwd {
  struct peer_call call;
  struct conn_request *req; /* NULL once the conn canceled it */
};

static void fwd_on_cancel(struct conn_request *req)
{
  struct fwd *fw = req->handler_data;
  fw->req = NULL;
  conn_respond_error(req, CAIRN__CLIENT__ERROR_CODE__SHUTTING_DOWN, "connection closing");
}

static void fwd_on_answer(struct peer_call *call, int status, const Cairn__Client__Envelope *resp,
                          const uint8_t *payload, size_t payload_len)
{
  struct fwd *fw = call->data;
  struct conn_request *req = fw->req;
  free(fw);
  if (req == NULL) {
    return;
  }
  req->handler_data = NULL;
  if (status != 0) {
    char msg[160];
    snprintf(msg, sizeof msg, "forwarding to the controller leader: %s", cairn_strerror(status));
    conn_respond_error(req, CAIRN__CLIENT__ERROR_CODE__NOT_CONTROLLER, msg);
    return;
  }
  conn_respond(req, resp, NULL, 0);
}

bool handle_forward(struct node *n, struct conn_request *req)
{
  if (ctl_is_leader(&n->ctl)) {
    return false;
  }
  uint64_t id = 0;
  const char *cluster_addr = NULL;
  ctl_leader(&n->ctl, &id, &cluster_addr);
  const char *addr = id != 0 ? node_client_address(n, id) : NULL;
  if (addr == NULL || req->env->forwarded > 0) {
    conn_respond_error(req, CAIRN__CLIENT__ERROR_CODE__NOT_CONTROLLER,
                       "no controller leader known yet: retry shortly");
    return true;
  }
  struct fwd *fw = calloc(1, sizeof *fw);
  if (fw == NULL) {
    conn_respond_error(req, CAIRN__CLIENT__ERROR_CODE__UNKNOWN, "out of memory");
    return true;
  }
  fw->req = req;
  fw->call.data = fw;
  req->env->forwarded++;
  int rv = peer_call(&n->peer, addr, &fw->call, req->env, NULL, 0, NODE_RPC_TIMEOUT_MS,
                     fwd_on_answer);
  if (rv != 0) {
    free(fw);
    conn_respond_error(req, CAIRN__CLIENT__ERROR_CODE__NOT_CONTROLLER,
                       "the controller leader cannot be reached: retry shortly");
    return true;
  }
  req->handler_data = fw;
  conn_request_set_cancel(req, fwd_on_cancel);
  return true;
}

/* ---- proposals on behalf of a request ---- */

struct admin_op {
  struct ctl_propose prop;
  struct node *n;
  struct conn_request *req; /* NULL once canceled */
  Cairn__Client__Envelope__BodyCase resp_case;
};

static void admin_on_cancel(struct conn_request *req)
{
  struct admin_op *op = req->handler_data;
  op->req = NULL;
  conn_respond_error(req, CAIRN__CLIENT__ERROR_CODE__SHUTTING_DOWN, "connection closing");
}

/* Answers req with the body its api calls for, holding only err (and the
 * created topic's id and name for CreateTopic). */
static void admin_respond(struct conn_request *req, Cairn__Client__Envelope__BodyCase body,
                          Cairn__Client__Error *err, uint32_t topic_id)
{
  Cairn__Client__Envelope env = CAIRN__CLIENT__ENVELOPE__INIT;
  Cairn__Client__CreateTopicResponse ct = CAIRN__CLIENT__CREATE_TOPIC_RESPONSE__INIT;
  Cairn__Client__DeleteTopicResponse dt = CAIRN__CLIENT__DELETE_TOPIC_RESPONSE__INIT;
  Cairn__Client__DecommissionNodeResponse dn = CAIRN__CLIENT__DECOMMISSION_NODE_RESPONSE__INIT;
  Cairn__Client__TopicInfo ti = CAIRN__CLIENT__TOPIC_INFO__INIT;
  env.body_case = body;
  switch (body) {
  case CAIRN__CLIENT__ENVELOPE__BODY_CREATE_TOPIC_RESP:
    ct.error = err;
    if (err->code == CAIRN__CLIENT__ERROR_CODE__OK) {
      const Cairn__Client__CreateTopicRequest *r = req->env->create_topic_req;
      ti.name = r->name;
      ti.topic_id = topic_id;
      ti.partition_count = r->partitions;
      ti.replication_factor = r->replication_factor;
      ct.topic = &ti;
    }
    env.create_topic_resp = &ct;
    break;
  case CAIRN__CLIENT__ENVELOPE__BODY_DELETE_TOPIC_RESP:
    dt.error = err;
    env.delete_topic_resp = &dt;
    break;
  default:
    dn.error = err;
    env.decommission_resp = &dn;
    break;
  }
  conn_respond(req, &env, NULL, 0);
}

static void admin_on_applied(struct ctl_propose *prop, int status, const struct meta_result *res)
{
  struct admin_op *op = prop->data;
  struct conn_request *req = op->req;
  Cairn__Client__Envelope__BodyCase body = op->resp_case;
  free(op);
  if (req == NULL) {
    return;
  }
  req->handler_data = NULL;
  Cairn__Client__Error err = CAIRN__CLIENT__ERROR__INIT;
  char msg[256];
  if (status != 0) {
    err.code = status == CAIRN_ENOTLEADER || status == CAIRN_EINDOUBT
                   ? CAIRN__CLIENT__ERROR_CODE__NOT_CONTROLLER
                   : wire_err_from(status);
    snprintf(msg, sizeof msg, "the controller: %s", cairn_strerror(status));
    err.message = msg;
  } else if (res->code != 0) {
    err.code = wire_err_from(res->code);
    snprintf(msg, sizeof msg, "%s", res->msg);
    err.message = msg;
  }
  admin_respond(req, body, &err, status == 0 ? res->topic_id : 0);
}

/* Proposes cmd (consumed) for req, which the callback answers. */
static void admin_propose(struct node *n, struct conn_request *req, uint8_t *cmd, size_t len,
                          int encode_rv, Cairn__Client__Envelope__BodyCase resp_case)
{
  Cairn__Client__Error err = CAIRN__CLIENT__ERROR__INIT;
  if (encode_rv != 0) {
    err.code = encode_rv == CAIRN_EINVAL ? CAIRN__CLIENT__ERROR_CODE__INVALID_TOPIC
                                         : wire_err_from(encode_rv);
    err.message = (char *)cairn_strerror(encode_rv);
    admin_respond(req, resp_case, &err, 0);
    return;
  }
  struct admin_op *op = calloc(1, sizeof *op);
  if (op == NULL) {
    free(cmd);
    conn_respond_error(req, CAIRN__CLIENT__ERROR_CODE__UNKNOWN, "out of memory");
    return;
  }
  op->n = n;
  op->req = req;
  op->resp_case = resp_case;
  op->prop.data = op;
  int rv = ctl_propose(&n->ctl, &op->prop, cmd, len, admin_on_applied);
  free(cmd);
  if (rv != 0) {
    free(op);
    err.code = CAIRN__CLIENT__ERROR_CODE__NOT_CONTROLLER;
    err.message = (char *)cairn_strerror(rv);
    admin_respond(req, resp_case, &err, 0);
    return;
  }
  req->handler_data = op;
  conn_request_set_cancel(req, admin_on_cancel);
}

/* ---- the requests ---- */

void handle_create_topic(struct node *n, struct conn_request *req)
{
  if (handle_forward(n, req)) {
    return;
  }
  const Cairn__Client__CreateTopicRequest *r = req->env->create_topic_req;
  struct meta_topic_config cfg = {0};
  if (r->config != NULL) {
    if (r->config->retention_bytes < 0 || r->config->retention_ms < 0) {
      Cairn__Client__Error err = CAIRN__CLIENT__ERROR__INIT;
      err.code = CAIRN__CLIENT__ERROR_CODE__INVALID_TOPIC;
      err.message = "retention_bytes and retention_ms must be 0 (unlimited) or positive";
      admin_respond(req, CAIRN__CLIENT__ENVELOPE__BODY_CREATE_TOPIC_RESP, &err, 0);
      return;
    }
    cfg.retention_bytes = (uint64_t)r->config->retention_bytes;
    cfg.retention_ms = (uint64_t)r->config->retention_ms;
    cfg.segment_bytes = r->config->segment_bytes;
    cfg.max_batch_bytes = r->config->max_batch_bytes;
  }
  uint8_t *cmd = NULL;
  size_t len = 0;
  int rv = meta_cmd_create_topic(r->name, r->partitions, r->replication_factor, &cfg, &cmd, &len);
  admin_propose(n, req, cmd, len, rv, CAIRN__CLIENT__ENVELOPE__BODY_CREATE_TOPIC_RESP);
}

/* Refuses req (a DeleteTopic, or an alteration) if name is an internal
 * topic's, answering with resp_case; returns true if it did. The state
 * machine refuses it too: this answer only saves the round trip. */
static bool admin_refuse_internal(struct conn_request *req, const char *name,
                                  Cairn__Client__Envelope__BodyCase resp_case)
{
  if (!meta_topic_internal(name)) {
    return false;
  }
  char msg[320];
  snprintf(msg, sizeof msg,
           "%s is an internal topic, kept by the cluster (names starting \"__\"; "
           "__cairn_offsets holds the consumer groups' committed offsets): users may not "
           "delete or alter it",
           name);
  Cairn__Client__Error err = CAIRN__CLIENT__ERROR__INIT;
  err.code = CAIRN__CLIENT__ERROR_CODE__INTERNAL_TOPIC;
  err.message = msg;
  admin_respond(req, resp_case, &err, 0);
  return true;
}

void handle_delete_topic(struct node *n, struct conn_request *req)
{
  const char *name = req->env->delete_topic_req->name;
  if (admin_refuse_internal(req, name, CAIRN__CLIENT__ENVELOPE__BODY_DELETE_TOPIC_RESP) ||
      handle_forward(n, req)) {
    return;
  }
  uint8_t *cmd = NULL;
  size_t len = 0;
  int rv = meta_cmd_delete_topic(name, &cmd, &len);
  admin_propose(n, req, cmd, len, rv, CAIRN__CLIENT__ENVELOPE__BODY_DELETE_TOPIC_RESP);
}

void handle_decommission(struct node *n, struct conn_request *req)
{
  if (handle_forward(n, req)) {
    return;
  }
  uint8_t *cmd = NULL;
  size_t len = 0;
  int rv = meta_cmd_set_node_state(req->env->decommission_req->node_id, META_NODE_DRAINING, 0,
                                   admin_wall_ms(), &cmd, &len);
  admin_propose(n, req, cmd, len, rv, CAIRN__CLIENT__ENVELOPE__BODY_DECOMMISSION_RESP);
}
