/* admin_call.c - one admin call as an lc_op: the answer's body and its
 * wire Error checked here, the rest left to the owner (admin_call.h). */
#include "admin_call.h"

#include "common/err.h"
#include "net/frame.h"

#include <stdlib.h>
#include <string.h>

void lc_acall_init(struct lc_acall *ac, const struct lc_acall_ops *ops, Cairn__Client__Api api,
                   Cairn__Client__Envelope__BodyCase body,
                   Cairn__Client__Envelope__BodyCase answer_body)
{
  cairn__client__envelope__init(&ac->env);
  ac->env.api = api;
  ac->env.body_case = body;
  ac->ops = ops;
  ac->answer_body = answer_body;
}

int lc_acall_check(const struct cairn_client *c, bool valid)
{
  if (!valid) {
    return CAIRN_EINVAL;
  }
  return c->closing ? CAIRN_ECLOSED : 0;
}

enum lc_op_verdict lc_acall_verdict(struct lc_op *op, const Cairn__Client__Error *e)
{
  if (e == NULL || e->code == CAIRN__CLIENT__ERROR_CODE__OK) {
    op->status = 0;
    return LC_OP_DONE;
  }
  op->status = lc_wire_err((int)e->code);
  lc_fmt(op->errmsg, sizeof op->errmsg, "%s%s%s", cairn_strerror(op->status),
         e->message != NULL && e->message[0] != '\0' ? ": " : "",
         e->message != NULL ? e->message : "");
  return lc_retriable(op->status) ? LC_OP_RETRY : LC_OP_DONE;
}

static enum lc_op_verdict lc_acall_on_answer(struct lc_op *op, Cairn__Client__Envelope *env)
{
  struct lc_acall *ac = op->data;
  if (env->body_case != ac->answer_body) {
    op->status = CAIRN_EPROTOCOL;
    return LC_OP_DONE;
  }
  enum lc_op_verdict v = lc_acall_verdict(op, frame_body_error(env));
  if (op->status != 0 || ac->ops->answer == NULL) {
    return v;
  }
  return ac->ops->answer(ac, op, env);
}

static void lc_acall_on_done(struct lc_op *op)
{
  struct lc_acall *ac = op->data;
  ac->ops->done(ac, op->c, op->status, op->status == 0 ? "" : op->errmsg);
}

/* The op's free_req: env is the first member of the lc_acall. */
static void lc_acall_free_req(Cairn__Client__Envelope *env)
{
  struct lc_acall *ac = (struct lc_acall *)env;
  ac->ops->free(ac);
}

int lc_acall_start(struct cairn_client *c, struct lc_acall *ac, enum lc_op_target target,
                   const char *topic, int32_t partition)
{
  struct lc_op *op = lc_op_new(c);
  if (op == NULL || (topic != NULL && (op->topic = strdup(topic)) == NULL)) {
    free(op);
    ac->ops->free(ac);
    return CAIRN_ENOMEM;
  }
  op->target = target;
  op->partition = partition;
  op->req = &ac->env;
  op->free_req = lc_acall_free_req;
  op->answer = lc_acall_on_answer;
  op->done = lc_acall_on_done;
  op->data = ac;
  lc_op_start(c, op);
  return 0;
}
