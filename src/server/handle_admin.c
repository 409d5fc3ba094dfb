/* handle_admin.c - CreateTopic, DeleteTopic, AddPartitions,
 * AlterTopicConfig, DecommissionNode, and the
 * forwarding of admin requests to the controller leader.
 *
 * The controller leader turns each request into one metadata command and
 * answers once the command is applied (committed on a majority of the
 * controller voters): placement happens inside the apply, so every node
 * computes the same one. */
#include "server/handlers.h"

#include "cluster/topic_conf.h"
#include "common/err.h"
#include "common/log.h"
#include "common/wallclock.h"
#include "net/wire_err.h"
#include "server/topic_wait.h"
#include "storage/store.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

/* Wall-clock ms, recorded in node state changes for operators. */
/* ---- forwarding ---- */

struct fwd {
  struct peer_call call;
  struct node *n;
  struct conn_request *req; /* NULL once the conn canceled it */
};

static void admin_created(struct node *n, struct conn_request *req, uint32_t topic_id, bool hold);

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
  struct node *n = fw->n;
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
  if (resp->body_case == CAIRN__CLIENT__ENVELOPE__BODY_CREATE_TOPIC_RESP &&
      resp->create_topic_resp->topic != NULL &&
      (resp->create_topic_resp->error == NULL ||
       resp->create_topic_resp->error->code == CAIRN__CLIENT__ERROR_CODE__OK)) {
    /* Created: this node holds the answer until its own metadata shows
     * the topic ready (the controller leader answered once applied). */
    admin_created(n, req, resp->create_topic_resp->topic->topic_id, true);
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
  fw->n = n;
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
 * created topic's id and name for CreateTopic, and not_ready). */
static void admin_respond_ex(struct conn_request *req, Cairn__Client__Envelope__BodyCase body,
                             Cairn__Client__Error *err, uint32_t topic_id, bool not_ready)
{
  Cairn__Client__Envelope env = CAIRN__CLIENT__ENVELOPE__INIT;
  Cairn__Client__CreateTopicResponse ct = CAIRN__CLIENT__CREATE_TOPIC_RESPONSE__INIT;
  Cairn__Client__DeleteTopicResponse dt = CAIRN__CLIENT__DELETE_TOPIC_RESPONSE__INIT;
  Cairn__Client__AddPartitionsResponse ap = CAIRN__CLIENT__ADD_PARTITIONS_RESPONSE__INIT;
  Cairn__Client__AlterTopicConfigResponse ac = CAIRN__CLIENT__ALTER_TOPIC_CONFIG_RESPONSE__INIT;
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
      ct.not_ready = not_ready;
    }
    env.create_topic_resp = &ct;
    break;
  case CAIRN__CLIENT__ENVELOPE__BODY_DELETE_TOPIC_RESP:
    dt.error = err;
    env.delete_topic_resp = &dt;
    break;
  case CAIRN__CLIENT__ENVELOPE__BODY_ADD_PARTITIONS_RESP:
    ap.error = err;
    env.add_partitions_resp = &ap;
    break;
  case CAIRN__CLIENT__ENVELOPE__BODY_ALTER_TOPIC_CONFIG_RESP:
    ac.error = err;
    env.alter_topic_config_resp = &ac;
    break;
  default:
    dn.error = err;
    env.decommission_resp = &dn;
    break;
  }
  conn_respond(req, &env, NULL, 0);
}

static void admin_respond(struct conn_request *req, Cairn__Client__Envelope__BodyCase body,
                          Cairn__Client__Error *err, uint32_t topic_id)
{
  admin_respond_ex(req, body, err, topic_id, false);
}

static void admin_on_topic_ready(struct conn_request *req, uint32_t topic_id, bool ready)
{
  Cairn__Client__Error err = CAIRN__CLIENT__ERROR__INIT;
  admin_respond_ex(req, CAIRN__CLIENT__ENVELOPE__BODY_CREATE_TOPIC_RESP, &err, topic_id, !ready);
}

/* topic_id was created for req: with hold, answers it once the topic is
 * ready for Produce as this node's metadata shows it (topic_wait.h),
 * within the request's ready_timeout_ms; without, at once (a request
 * forwarded here: the node the client asked holds it). */
static void admin_created(struct node *n, struct conn_request *req, uint32_t topic_id, bool hold)
{
  int32_t ms = req->env->create_topic_req->ready_timeout_ms;
  if (ms < 0 || !hold) {
    admin_on_topic_ready(req, topic_id, true);
    return;
  }
  int rv = twait_start(&n->twaits, req, topic_id, ms == 0 ? TWAIT_DEFAULT_MS : (uint32_t)ms,
                       admin_on_topic_ready);
  if (rv != 0) {
    admin_on_topic_ready(req, topic_id, false);
  }
}

static void admin_on_applied(struct ctl_propose *prop, int status, const struct meta_result *res)
{
  struct admin_op *op = prop->data;
  struct conn_request *req = op->req;
  struct node *n = op->n;
  Cairn__Client__Envelope__BodyCase body = op->resp_case;
  free(op);
  if (req == NULL) {
    return;
  }
  req->handler_data = NULL;
  if (body == CAIRN__CLIENT__ENVELOPE__BODY_CREATE_TOPIC_RESP && status == 0 && res->code == 0) {
    admin_created(n, req, res->topic_id, req->env->forwarded == 0);
    return;
  }
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
  if (meta_alive_count(ctl_state(&n->ctl)) == 0) {
    /* The controller leader has not applied any node's registration yet
     * (its own comes moments after it is elected): a replication factor
     * checked now would be refused for a passing reason, so the answer is
     * retriable (clients retry NOT_CONTROLLER) rather than definite. */
    Cairn__Client__Error err = CAIRN__CLIENT__ERROR__INIT;
    err.code = CAIRN__CLIENT__ERROR_CODE__NOT_CONTROLLER;
    err.message = "the controller has not registered any node yet (it has just started): "
                  "retry in a moment";
    admin_respond(req, CAIRN__CLIENT__ENVELOPE__BODY_CREATE_TOPIC_RESP, &err, 0);
    return;
  }
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
    if (store_kind_parse(r->config->storage, &cfg.storage) != 0) {
      Cairn__Client__Error err = CAIRN__CLIENT__ERROR__INIT;
      err.code = CAIRN__CLIENT__ERROR_CODE__INVALID_TOPIC;
      err.message = "storage must be \"file\" or \"postgresql\"";
      admin_respond(req, CAIRN__CLIENT__ENVELOPE__BODY_CREATE_TOPIC_RESP, &err, 0);
      return;
    }
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

void handle_add_partitions(struct node *n, struct conn_request *req)
{
  const Cairn__Client__AddPartitionsRequest *r = req->env->add_partitions_req;
  if (admin_refuse_internal(req, r->name, CAIRN__CLIENT__ENVELOPE__BODY_ADD_PARTITIONS_RESP) ||
      handle_forward(n, req)) {
    return;
  }
  uint8_t *cmd = NULL;
  size_t len = 0;
  int rv = meta_cmd_add_partitions(r->name, r->partitions, &cmd, &len);
  admin_propose(n, req, cmd, len, rv, CAIRN__CLIENT__ENVELOPE__BODY_ADD_PARTITIONS_RESP);
}

/* Answers an AlterTopicConfig with code and "name: msg". */
static void admin_alter_refuse(struct conn_request *req, Cairn__Client__ErrorCode code,
                               const char *name, const char *msg)
{
  char text[TOPIC_CONF_MSG_SIZE + 300];
  snprintf(text, sizeof text, "alter config of %.255s: %s", name, msg);
  Cairn__Client__Error err = CAIRN__CLIENT__ERROR__INIT;
  err.code = code;
  err.message = text;
  admin_respond(req, CAIRN__CLIENT__ENVELOPE__BODY_ALTER_TOPIC_CONFIG_RESP, &err, 0);
}

/* Reads r's changes (each key once) into *cfg and *mask. Returns 0, or
 * CAIRN_EINVALID_CONFIG with msg saying which and why. */
static int admin_alter_changes(const Cairn__Client__AlterTopicConfigRequest *r,
                               struct meta_topic_config *cfg, uint32_t *mask, char *msg,
                               size_t cap)
{
  size_t total = r->n_set + r->n_reset;
  for (size_t i = 0; i < total; i++) {
    uint32_t one = 0;
    const char *key = i < r->n_set ? r->set[i]->key : r->reset[i - r->n_set];
    int rv = i < r->n_set ? topic_conf_set(cfg, &one, key, r->set[i]->value, msg, cap)
                          : topic_conf_reset(cfg, &one, key, msg, cap);
    if (rv != 0) {
      return rv;
    }
    if ((*mask & one) != 0) {
      snprintf(msg, cap, "%.64s is named twice (one change per key)", key);
      return CAIRN_EINVALID_CONFIG;
    }
    *mask |= one;
  }
  if (*mask == 0) {
    snprintf(msg, cap, "nothing to change (set KEY=VALUE or delete KEY)");
    return CAIRN_EINVALID_CONFIG;
  }
  return 0;
}

void handle_alter_topic_config(struct node *n, struct conn_request *req)
{
  const Cairn__Client__AlterTopicConfigRequest *r = req->env->alter_topic_config_req;
  if (admin_refuse_internal(req, r->name, CAIRN__CLIENT__ENVELOPE__BODY_ALTER_TOPIC_CONFIG_RESP) ||
      handle_forward(n, req)) {
    return;
  }
  struct meta_topic_config cfg = {0};
  uint32_t mask = 0;
  char msg[TOPIC_CONF_MSG_SIZE];
  if (admin_alter_changes(r, &cfg, &mask, msg, sizeof msg) != 0) {
    admin_alter_refuse(req, CAIRN__CLIENT__ERROR_CODE__INVALID_CONFIG, r->name, msg);
    return;
  }
  if (r->validate_only) {
    /* This node leads the controller (handle_forward): its state is the
     * one the command would meet. */
    bool known = meta_topic_find(ctl_state(&n->ctl), r->name) != NULL;
    admin_alter_refuse(req,
                       known ? CAIRN__CLIENT__ERROR_CODE__OK
                             : CAIRN__CLIENT__ERROR_CODE__UNKNOWN_TOPIC,
                       r->name, known ? "valid (validate only: nothing changed)" : "no such topic");
    return;
  }
  uint8_t *cmd = NULL;
  size_t len = 0;
  int rv = meta_cmd_alter_topic_config(r->name, mask, &cfg, &cmd, &len);
  admin_propose(n, req, cmd, len, rv, CAIRN__CLIENT__ENVELOPE__BODY_ALTER_TOPIC_CONFIG_RESP);
}

/* Lists in msg (cap bytes) the partitions on node id that no other node
 * could take: every ALIVE node other than id (with the capabilities the
 * topic needs: a database for a postgresql topic) already holds a replica of
 * them. Returns how many there are. The planner only moves a replica to
 * an ALIVE node outside the partition's replicas, so a decommission with
 * any such partition would stay DRAINING for good. */
static uint32_t admin_stranded(const struct meta_state *st, uint64_t id, char *msg, size_t cap)
{
  uint32_t stranded = 0;
  size_t used = 0;
  msg[0] = '\0';
  for (size_t t = 0; t < st->ntopics; t++) {
    const struct meta_topic *tp = &st->topics[t];
    for (uint32_t k = 0; k < tp->npartitions; k++) {
      const struct meta_partition *p = &tp->partitions[k];
      uint32_t need = meta_topic_needs(&tp->config);
      bool holds = false, free_node = false;
      for (uint32_t r = 0; r < p->nreplicas; r++) {
        holds = holds || p->replicas[r] == id;
      }
      for (size_t i = 0; holds && !free_node && i < st->nnodes; i++) {
        const struct meta_node *nd = &st->nodes[i];
        bool in = false;
        for (uint32_t r = 0; r < p->nreplicas; r++) {
          in = in || p->replicas[r] == nd->id;
        }
        free_node = nd->id != id && nd->state == META_NODE_ALIVE && !in &&
                    (nd->caps & need) == need;
      }
      if (holds && !free_node) {
        if (stranded < 8 && used < cap) {
          int w = snprintf(msg + used, cap - used, "%s%s/%" PRIu32, stranded > 0 ? ", " : "",
                           tp->name, k);
          used += w > 0 ? (size_t)w : 0;
        }
        stranded++;
      }
    }
  }
  return stranded;
}

/* Answers req with err and msg (a decommission refused before proposing). */
static void admin_refuse(struct conn_request *req, int err, const char *msg)
{
  Cairn__Client__Error e = CAIRN__CLIENT__ERROR__INIT;
  e.code = wire_err_from(err);
  e.message = (char *)msg;
  admin_respond(req, CAIRN__CLIENT__ENVELOPE__BODY_DECOMMISSION_RESP, &e, 0);
}

void handle_decommission(struct node *n, struct conn_request *req)
{
  if (handle_forward(n, req)) {
    return;
  }
  const Cairn__Client__DecommissionNodeRequest *r = req->env->decommission_req;
  const struct meta_state *st = ctl_state(&n->ctl);
  const struct meta_node *nd = meta_node_find(st, r->node_id);
  char parts[400];
  char msg[600];
  if (nd != NULL && r->recommission && nd->state != META_NODE_DRAINING) {
    snprintf(msg, sizeof msg, "node %" PRIu64 " is %s, not being decommissioned: nothing to cancel",
             r->node_id, meta_node_state_name(nd->state));
    admin_refuse(req, CAIRN_EINVAL, msg);
    return;
  }
  uint32_t stranded = 0;
  if (nd != NULL && !r->recommission && nd->state != META_NODE_DRAINING &&
      (stranded = admin_stranded(st, r->node_id, parts, sizeof parts)) > 0) {
    snprintf(msg, sizeof msg,
             "node %" PRIu64 " cannot be decommissioned: %" PRIu32 " partition(s) it holds have "
             "no other alive node to move to (%s%s): add a node first, or delete those topics",
             r->node_id, stranded, parts, stranded > 8 ? ", ..." : "");
    log_warn("admin", "%s", msg);
    admin_refuse(req, CAIRN_EINVALID_RF, msg);
    return;
  }
  uint8_t *cmd = NULL;
  size_t len = 0;
  int rv = meta_cmd_set_node_state(r->node_id, r->recommission ? META_NODE_ALIVE : META_NODE_DRAINING,
                                   0, (uint64_t)wallclock_ms(), &cmd, &len);
  if (rv == 0 && nd != NULL) {
    uint32_t replicas = 0, leaders = 0;
    meta_node_load(st, r->node_id, &replicas, &leaders);
    log_info("admin", "node %" PRIu64 ": %s (%" PRIu32 " replicas on it)", r->node_id,
             r->recommission ? "recommissioned: back to ALIVE, replicas stay"
                             : "decommissioning: its replicas move to other nodes",
             replicas);
  }
  admin_propose(n, req, cmd, len, rv, CAIRN__CLIENT__ENVELOPE__BODY_DECOMMISSION_RESP);
}
