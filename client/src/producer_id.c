/* producer_id.c - the idempotent producer's id and epoch: InitProducerId
 * when the cluster offers it (else producer id -1 from the start), and a
 * new epoch with the unsent batches renumbered after a sequenced batch
 * failed for good. Once it has an id the producer keeps one: an error
 * answer is retried or fails the unsent messages, never drops the id. */
#include "producer.h"

#include "common/err.h"
#include "format/batch.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the producer id ---- */

struct lc_prod_pid_req {
  Cairn__Client__Envelope env;
  Cairn__Client__InitProducerIdRequest ir;
  struct cairn_producer *p;
};

/* Renumbers every partition's unsent batches for the producer id and
 * epoch now in force. */
static void lc_prod_restamp(struct cairn_producer *p)
{
  for (size_t i = 0; i < p->ntopics; i++) {
    for (int32_t k = 0; k < p->topics[i]->count; k++) {
      lc_acc_restamp(&p->topics[i]->parts[k].acc, p->pid, p->epoch);
    }
  }
}

static void lc_prod_pid_free(Cairn__Client__Envelope *env) { free(env); }

static enum lc_op_verdict lc_prod_pid_on_answer(struct lc_op *op, Cairn__Client__Envelope *env)
{
  struct lc_prod_pid_req *r = op->data;
  /* The node's Hello did not list InitProducerId: a cluster that never
   * offered it runs the producer non-idempotent (lc_prod_pid_on_done). */
  if (lc_conn_has_api(op->c, op->addr, CAIRN__CLIENT__API__API_INIT_PRODUCER_ID) == 0) {
    op->status = CAIRN_EUNSUPPORTED;
    return LC_OP_DONE;
  }
  if (env->body_case == CAIRN__CLIENT__ENVELOPE__BODY_ERROR_RESP) {
    /* A refusal of the request as a whole: NOT_CONTROLLER while the
     * controller elects, SHUTTING_DOWN, ... Its code says whether to
     * retry; it never means "not offered" (the Hello says that). */
    op->status = env->error_resp->code != CAIRN__CLIENT__ERROR_CODE__OK
                     ? lc_wire_err((int)env->error_resp->code)
                     : CAIRN_EPROTOCOL;
    return lc_retriable(op->status) ? LC_OP_RETRY : LC_OP_DONE;
  }
  if (env->body_case != CAIRN__CLIENT__ENVELOPE__BODY_INIT_PRODUCER_ID_RESP) {
    op->status = CAIRN_EPROTOCOL;
    return LC_OP_DONE;
  }
  const Cairn__Client__InitProducerIdResponse *ir = env->init_producer_id_resp;
  if (ir->error != NULL && ir->error->code != CAIRN__CLIENT__ERROR_CODE__OK) {
    op->status = lc_wire_err((int)ir->error->code);
    return lc_retriable(op->status) ? LC_OP_RETRY : LC_OP_DONE;
  }
  r->p->pid = (int64_t)ir->producer_id;
  r->p->epoch = (int16_t)ir->producer_epoch;
  op->status = 0;
  return LC_OP_DONE;
}

/* Fails every message the producer holds that is not in flight (sealed or
 * not) with status: the producer cannot stamp them. */
static void lc_prod_fail_unsent(struct cairn_producer *p, int status)
{
  for (size_t i = 0; i < p->ntopics; i++) {
    struct lc_ptopic *t = p->topics[i];
    for (int32_t k = 0; k < t->count; k++) {
      for (struct lc_batch *b = t->parts[k].acc.head; b != NULL; b = b->next) {
        if (!b->in_flight && !b->done) {
          if (b->open) {
            batch_builder_close(&b->bb); /* no record joins a failed batch */
            b->open = false;
          }
          lc_prod_batch_done(b, status, -1);
        }
      }
      lc_prod_complete(p, t, k);
    }
  }
}

/* The outcome of an InitProducerId:
 *   0                       the id and epoch are in force (a bump
 *                           renumbers the unsent batches);
 *   CAIRN_EUNSUPPORTED      the cluster does not offer idempotence and
 *                           the producer never had an id: it runs without
 *                           one (producer id -1), as documented;
 *   retriable (no node, NOT_CONTROLLER, timeout...) ask again after a
 *                           backoff; batches wait (their delivery timeout
 *                           still runs);
 *   anything else           a refusal (no permission, ...): the unsent
 *                           messages fail with it, and the next round asks
 *                           again after a backoff.
 * A producer that had an id never drops to -1: it would silently stop
 * being idempotent, and retries could store a batch twice or out of
 * order. */
static void lc_prod_pid_on_done(struct lc_op *op)
{
  struct lc_prod_pid_req *r = op->data;
  struct cairn_producer *p = r->p;
  bool never_had_id = p->pid < 0;
  if (op->status == 0 || p->closing ||
      (op->status == CAIRN_EUNSUPPORTED && never_had_id && !p->bump_needed)) {
    if (op->status != 0 && !p->closing) {
      p->pid = -1;
      p->epoch = -1;
    }
    p->pid_state = LC_PID_READY;
    if (op->status == 0 && p->bump_needed) {
      lc_prod_restamp(p);
      p->bump_needed = false;
    }
    lc_prod_kick(p);
    return;
  }
  p->pid_state = LC_PID_UNKNOWN;
  p->pid_wake_ms = lc_now(op->c) + op->c->opts.retry_backoff_max_ms;
  if (!lc_retriable(op->status) && op->status != CAIRN_EUNREACHABLE) {
    lc_prod_fail_unsent(p, op->status);
  }
  lc_prod_kick(p);
}

void lc_prod_ask_pid(struct cairn_producer *p)
{
  struct lc_prod_pid_req *r = calloc(1, sizeof *r);
  struct lc_op *op = lc_op_new(p->c);
  if (r == NULL || op == NULL) {
    free(r);
    free(op);
    return; /* the next round asks again */
  }
  cairn__client__envelope__init(&r->env);
  cairn__client__init_producer_id_request__init(&r->ir);
  r->env.api = CAIRN__CLIENT__API__API_INIT_PRODUCER_ID;
  r->env.body_case = CAIRN__CLIENT__ENVELOPE__BODY_INIT_PRODUCER_ID_REQ;
  r->env.init_producer_id_req = &r->ir;
  r->ir.producer_id = p->pid >= 0 ? (uint64_t)p->pid : 0; /* known: bump its epoch */
  r->p = p;
  op->target = LC_OP_ANY;
  op->answer_errors = true;
  op->req = &r->env;
  op->free_req = lc_prod_pid_free;
  op->answer = lc_prod_pid_on_answer;
  op->done = lc_prod_pid_on_done;
  op->data = r;
  p->pid_state = LC_PID_ASKING;
  lc_op_start(p->c, op);
}

