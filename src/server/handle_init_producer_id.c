/* handle_init_producer_id.c - InitProducerId: an idempotent producer's id
 * and epoch, handed out by the controller leader (other nodes forward the
 * request there, handle_forward) as one AllocateProducerId metadata command,
 * answered once the command is applied. Ids come from a replicated counter,
 * so they are unique in the cluster and never handed out twice, whichever
 * node leads the controller (docs/metadata.md, "Producer ids"). */
#include "server/handlers.h"

#include "common/err.h"
#include "net/wire_err.h"

#include <stdio.h>
#include <stdlib.h>

struct init_pid_op {
  struct ctl_propose prop;
  struct conn_request *req; /* NULL once canceled */
};

static void init_pid_respond(struct conn_request *req, Cairn__Client__ErrorCode code,
                             const char *message, uint64_t producer_id, uint32_t epoch)
{
  Cairn__Client__Error err = CAIRN__CLIENT__ERROR__INIT;
  err.code = code;
  err.message = (char *)message;
  Cairn__Client__InitProducerIdResponse r = CAIRN__CLIENT__INIT_PRODUCER_ID_RESPONSE__INIT;
  r.error = &err;
  r.producer_id = producer_id;
  r.producer_epoch = epoch;
  Cairn__Client__Envelope env = CAIRN__CLIENT__ENVELOPE__INIT;
  env.body_case = CAIRN__CLIENT__ENVELOPE__BODY_INIT_PRODUCER_ID_RESP;
  env.init_producer_id_resp = &r;
  conn_respond(req, &env, NULL, 0);
}

static void init_pid_on_cancel(struct conn_request *req)
{
  struct init_pid_op *op = req->handler_data;
  op->req = NULL;
  conn_respond_error(req, CAIRN__CLIENT__ERROR_CODE__SHUTTING_DOWN, "connection closing");
}

static void init_pid_on_applied(struct ctl_propose *prop, int status, const struct meta_result *res)
{
  struct init_pid_op *op = prop->data;
  struct conn_request *req = op->req;
  free(op);
  if (req == NULL) {
    return;
  }
  req->handler_data = NULL;
  char msg[256];
  if (status != 0) {
    snprintf(msg, sizeof msg, "the controller: %s", cairn_strerror(status));
    init_pid_respond(req,
                     status == CAIRN_ENOTLEADER || status == CAIRN_EINDOUBT
                         ? CAIRN__CLIENT__ERROR_CODE__NOT_CONTROLLER
                         : wire_err_from(status),
                     msg, 0, 0);
    return;
  }
  if (res->code != 0) {
    snprintf(msg, sizeof msg, "%s", res->msg);
    init_pid_respond(req, wire_err_from(res->code), msg, 0, 0);
    return;
  }
  init_pid_respond(req, CAIRN__CLIENT__ERROR_CODE__OK, NULL, res->producer_id, res->producer_epoch);
}

void handle_init_producer_id(struct node *n, struct conn_request *req)
{
  if (handle_forward(n, req)) {
    return;
  }
  uint8_t *cmd = NULL;
  size_t len = 0;
  int rv = meta_cmd_allocate_producer_id(req->env->init_producer_id_req->producer_id, &cmd, &len);
  if (rv != 0) {
    init_pid_respond(req, wire_err_from(rv), cairn_strerror(rv), 0, 0);
    return;
  }
  struct init_pid_op *op = calloc(1, sizeof *op);
  if (op == NULL) {
    free(cmd);
    init_pid_respond(req, CAIRN__CLIENT__ERROR_CODE__UNKNOWN, cairn_strerror(CAIRN_ENOMEM), 0, 0);
    return;
  }
  op->req = req;
  op->prop.data = op;
  rv = ctl_propose(&n->ctl, &op->prop, cmd, len, init_pid_on_applied);
  free(cmd);
  if (rv != 0) {
    free(op);
    init_pid_respond(req, CAIRN__CLIENT__ERROR_CODE__NOT_CONTROLLER, cairn_strerror(rv), 0, 0);
    return;
  }
  req->handler_data = op;
  conn_request_set_cancel(req, init_pid_on_cancel);
}
