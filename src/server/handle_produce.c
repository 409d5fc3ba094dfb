/* handle_produce.c - ProduceRequest: each batch through its partition's
 * replica group, one answer once every batch has called back or the
 * request's timeout has passed.
 *
 * Lifecycle of one request (struct handle_produce_op):
 *
 *   handle_produce: plan (produce_plan.h), look up each partition,
 *     validate its batches, rgroup_produce() each one
 *       |
 *       v
 *   WAITING  -- the last rgroup callback (handle_produce_on_done),
 *       |       the timeout (handle_produce_on_timeout: TIMEOUT for the
 *       |       batches still out) or the conn closing
 *       |       (handle_produce_on_cancel: the answer is dropped)
 *       v
 *   ANSWERED (op->req NULL, timer closing)
 *       |  every rgroup callback has fired and the timer has closed
 *       v
 *   freed (handle_produce_maybe_free)
 *
 * Why the op outlives its answer: rgroup borrows each batch and its
 * struct rgroup_produce until its callback, which a replica may fire long
 * after the timeout (at commit, or IN_DOUBT when leadership is lost). The
 * conn frees the request, and its payload, when answered, so the op holds
 * its own copy of the payload. */
#include "server/handlers.h"
#include "server/handle_target.h"

#include "common/err.h"
#include "common/log.h"
#include "format/batch.h"
#include "net/wire_err.h"
#include "server/node.h"
#include "server/produce_plan.h"

#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define HANDLE_PRODUCE_DEFAULT_TIMEOUT_MS 30000u
#define HANDLE_PRODUCE_PENDING 1 /* a batch's status before its callback */

struct handle_produce_op;

struct handle_produce_batch {
  struct rgroup_produce rp; /* rp.data: this */
  struct handle_produce_op *op;
  struct rgroup *rg; /* the replica it was handed to */
  int status; /* HANDLE_PRODUCE_PENDING, 0 or a negative code */
  int64_t base_offset;
};

struct handle_produce_part {
  struct handle_target target; /* code OK: the batches were handed to the replica */
  int refused;                 /* the batches' own validation error, 0 none */
  char refusal[HANDLE_MESSAGE_SIZE];
};

struct handle_produce_op {
  struct node *n;
  struct conn_request *req; /* NULL once answered */
  uint8_t *payload;         /* own copy: the batches rgroup borrows */
  struct produce_plan plan;
  struct handle_produce_part *parts;    /* plan.nparts */
  struct handle_produce_batch *batches; /* plan.nbatches */
  size_t pending;                       /* rgroup callbacks still to fire */
  bool submitting;                      /* handle_produce is still queuing */
  uv_timer_t timer;
  bool timer_closed;
};

static void handle_produce_answer(struct handle_produce_op *op);

static void handle_produce_respond_error(struct conn_request *req, Cairn__Client__ErrorCode code,
                                         const char *message)
{
  Cairn__Client__Error err = CAIRN__CLIENT__ERROR__INIT;
  err.code = code;
  err.message = (char *)message;
  Cairn__Client__ProduceResponse resp = CAIRN__CLIENT__PRODUCE_RESPONSE__INIT;
  resp.error = &err;
  Cairn__Client__Envelope env = CAIRN__CLIENT__ENVELOPE__INIT;
  env.body_case = CAIRN__CLIENT__ENVELOPE__BODY_PRODUCE_RESP;
  env.produce_resp = &resp;
  conn_respond(req, &env, NULL, 0);
}

static void handle_produce_maybe_free(struct handle_produce_op *op)
{
  if (op->req != NULL || op->pending > 0 || !op->timer_closed || op->submitting) {
    return;
  }
  produce_plan_free(&op->plan);
  free(op->parts);
  free(op->batches);
  free(op->payload);
  free(op);
}

static void handle_produce_on_timer_closed(uv_handle_t *h)
{
  struct handle_produce_op *op = h->data;
  op->timer_closed = true;
  handle_produce_maybe_free(op);
}

static void handle_produce_on_done(struct rgroup_produce *rp, int status, int64_t base_offset)
{
  struct handle_produce_batch *b = rp->data;
  struct handle_produce_op *op = b->op;
  b->status = status;
  b->base_offset = base_offset;
  op->pending--;
  if (op->req != NULL) {
    /* Phases for slow-request tracing: the last batch's times count. */
    uint64_t now = uv_hrtime();
    op->req->mark_ns[CONN_MARK_COMMITTED] = b->rg->apply_ns != 0 ? b->rg->apply_ns : now;
    op->req->mark_ns[CONN_MARK_APPLIED] = now;
  }
  if (op->submitting) {
    return; /* called back from inside rgroup_produce: handle_produce goes on */
  }
  if (op->pending == 0 && op->req != NULL) {
    handle_produce_answer(op);
  }
  handle_produce_maybe_free(op);
}

static void handle_produce_on_timeout(uv_timer_t *t)
{
  struct handle_produce_op *op = t->data;
  if (op->req != NULL) {
    handle_produce_answer(op);
  }
}

static void handle_produce_on_cancel(struct conn_request *req)
{
  struct handle_produce_op *op = req->handler_data;
  if (op->req != NULL) {
    handle_produce_answer(op); /* dropped by the conn; frees the request */
  }
}

/* The internal code a partition answers with: its batches' first failure
 * in order, a batch still out counting as a timeout. */
static int handle_produce_part_status(struct handle_produce_op *op, size_t i)
{
  const struct produce_plan_part *pp = &op->plan.parts[i];
  for (size_t b = 0; b < pp->nbatches; b++) {
    int status = op->batches[pp->first + b].status;
    if (status == HANDLE_PRODUCE_PENDING) {
      return -ETIMEDOUT;
    }
    if (status != 0) {
      return status;
    }
  }
  return 0;
}

/* Builds and sends the ProduceResponse, finishing op->req; stops the timer. */
static void handle_produce_answer(struct handle_produce_op *op)
{
  struct produce_plan *plan = &op->plan;
  Cairn__Client__ProducePartitionResult *res = calloc(plan->nparts, sizeof *res);
  Cairn__Client__ProducePartitionResult **ptrs = calloc(plan->nparts, sizeof *ptrs);
  Cairn__Client__Error *errs = calloc(plan->nparts, sizeof *errs);
  int64_t *offsets = calloc(plan->nbatches, sizeof *offsets);
  char(*messages)[HANDLE_MESSAGE_SIZE] = calloc(plan->nparts, sizeof *messages);
  struct conn_request *req = op->req;
  op->req = NULL;
  if (res == NULL || ptrs == NULL || errs == NULL || offsets == NULL || messages == NULL) {
    conn_respond_error(req, CAIRN__CLIENT__ERROR_CODE__UNKNOWN, cairn_strerror(CAIRN_ENOMEM));
  } else {
    for (size_t i = 0; i < plan->nparts; i++) {
      const struct produce_plan_part *pp = &plan->parts[i];
      struct handle_produce_part *hp = &op->parts[i];
      Cairn__Client__ProducePartitionResult *r = &res[i];
      cairn__client__produce_partition_result__init(r);
      cairn__client__error__init(&errs[i]);
      ptrs[i] = r;
      r->topic = pp->req->topic;
      r->partition = pp->req->partition;
      r->error = &errs[i];
      r->log_start_offset = -1;
      r->base_offset = -1;
      r->base_offsets = &offsets[pp->first];
      r->n_base_offsets = pp->nbatches;
      for (size_t b = 0; b < pp->nbatches; b++) {
        const struct handle_produce_batch *hb = &op->batches[pp->first + b];
        offsets[pp->first + b] = hb->status == 0 ? hb->base_offset : -1;
        if (hb->status == 0) {
          metrics_part_produced(&op->n->metrics, hb->rg->group_id, pp->batches[b].len);
        }
      }
      r->base_offset = offsets[pp->first];
      if (hp->target.code != CAIRN__CLIENT__ERROR_CODE__OK) {
        errs[i].code = hp->target.code;
        errs[i].message = hp->target.message;
        r->leader_id = hp->target.leader_id;
        r->leader_address = (char *)handle_target_address(op->n, &hp->target, req->c);
        continue;
      }
      if (hp->refused != 0) {
        errs[i].code = wire_err_from(hp->refused);
        errs[i].message = hp->refusal;
        continue;
      }
      /* The replica's view now: log start, and who leads if it moved. */
      struct handle_target now;
      handle_find_leader(op->n, pp->req->topic, pp->req->partition, &now);
      if (now.p != NULL) {
        struct store_info info;
        store_info(rgroup_store(&now.p->rg), &info);
        r->log_start_offset = info.start_offset;
      }
      int status = handle_produce_part_status(op, i);
      errs[i].code = wire_err_from(status);
      if (status == 0) {
        continue;
      }
      if (status == CAIRN_ENOTLEADER && now.code == CAIRN__CLIENT__ERROR_CODE__NOT_LEADER) {
        hp->target = now; /* the fresher leader hint */
        errs[i].message = hp->target.message;
        r->leader_id = hp->target.leader_id;
        r->leader_address = (char *)handle_target_address(op->n, &hp->target, req->c);
        continue;
      }
      if (status == -ETIMEDOUT) {
        snprintf(messages[i], HANDLE_MESSAGE_SIZE,
                 "not acknowledged within %" PRIu32 " ms: the batches without an offset may "
                 "still be committed",
                 req->env->produce_req->timeout_ms != 0 ? req->env->produce_req->timeout_ms
                                                        : HANDLE_PRODUCE_DEFAULT_TIMEOUT_MS);
      } else {
        snprintf(messages[i], HANDLE_MESSAGE_SIZE, "%s/%" PRIu32 ": %s", pp->req->topic,
                 pp->req->partition, cairn_strerror(status));
      }
      errs[i].message = messages[i];
    }
    Cairn__Client__ProduceResponse resp = CAIRN__CLIENT__PRODUCE_RESPONSE__INIT;
    resp.partitions = ptrs;
    resp.n_partitions = plan->nparts;
    Cairn__Client__Envelope env = CAIRN__CLIENT__ENVELOPE__INIT;
    env.body_case = CAIRN__CLIENT__ENVELOPE__BODY_PRODUCE_RESP;
    env.produce_resp = &resp;
    conn_respond(req, &env, NULL, 0);
  }
  free(res);
  free(ptrs);
  free(errs);
  free(offsets);
  free(messages);
  if (!uv_is_closing((uv_handle_t *)&op->timer)) {
    uv_close((uv_handle_t *)&op->timer, handle_produce_on_timer_closed);
  }
}

/* Hands one partition's batches to its replica, in order. A refusal stops
 * the partition there: the later batches are not produced (same status). */
static void handle_produce_submit_part(struct handle_produce_op *op, size_t i)
{
  const struct produce_plan_part *pp = &op->plan.parts[i];
  struct handle_produce_part *hp = &op->parts[i];
  for (size_t b = 0; b < pp->nbatches; b++) {
    op->batches[pp->first + b].status = CAIRN_ENOTLEADER; /* until handed over */
  }
  if (!handle_target_authorized(op->n, op->req->c, pp->req->topic, META_ACL_WRITE,
                                &hp->target)) {
    return;
  }
  handle_find_leader(op->n, pp->req->topic, pp->req->partition, &hp->target);
  if (hp->target.code != CAIRN__CLIENT__ERROR_CODE__OK) {
    return;
  }
  struct rgroup *rg = &hp->target.p->rg;
  /* All of a partition's batches are checked before any is produced, with
   * the replica's own bound, so rgroup_produce cannot refuse one halfway. */
  size_t max_bytes =
      rg->max_entry_bytes < BATCH_DEFAULT_MAX_BYTES ? rg->max_entry_bytes : BATCH_DEFAULT_MAX_BYTES;
  hp->refused = produce_plan_validate_part(pp, max_bytes, hp->refusal, sizeof hp->refusal);
  if (hp->refused != 0) {
    return;
  }
  for (size_t b = 0; b < pp->nbatches; b++) {
    struct handle_produce_batch *hb = &op->batches[pp->first + b];
    hb->op = op;
    hb->rg = rg;
    hb->rp.data = hb;
    hb->status = HANDLE_PRODUCE_PENDING;
    op->pending++;
    if (op->req->mark_ns[CONN_MARK_PROPOSED] == 0) {
      op->req->mark_ns[CONN_MARK_PROPOSED] = uv_hrtime();
    }
    int rv =
        rgroup_produce(rg, &hb->rp, pp->batches[b].p, pp->batches[b].len, handle_produce_on_done);
    if (rv != 0) {
      op->pending--;
      for (size_t rest = b; rest < pp->nbatches; rest++) {
        op->batches[pp->first + rest].status = rv;
      }
      if (rv != CAIRN_ENOTLEADER) {
        log_warn("produce", "%s/%" PRIu32 ": batch %zu refused: %s (%s)", pp->req->topic,
                 pp->req->partition, b, cairn_strerror(rv), rgroup_errmsg(rg));
      }
      return;
    }
  }
}

void handle_produce(struct node *n, struct conn_request *req)
{
  if (req->env->body_case != CAIRN__CLIENT__ENVELOPE__BODY_PRODUCE_REQ) {
    handle_produce_respond_error(req, CAIRN__CLIENT__ERROR_CODE__MALFORMED_REQUEST,
                                 "API_PRODUCE without a produce_req body");
    return;
  }
  if (n->state != NODE_RUNNING) {
    handle_produce_respond_error(req, CAIRN__CLIENT__ERROR_CODE__SHUTTING_DOWN,
                                 "the node is stopping");
    return;
  }
  const Cairn__Client__ProduceRequest *pr = req->env->produce_req;
  struct handle_produce_op *op = calloc(1, sizeof *op);
  uint8_t *payload = malloc(req->payload_len > 0 ? req->payload_len : 1);
  if (op == NULL || payload == NULL) {
    free(op);
    free(payload);
    handle_produce_respond_error(req, CAIRN__CLIENT__ERROR_CODE__UNKNOWN,
                                 cairn_strerror(CAIRN_ENOMEM));
    return;
  }
  memcpy(payload, req->payload, req->payload_len);
  op->n = n;
  op->payload = payload;
  char why[PRODUCE_PLAN_ERRMSG_SIZE];
  int rv = produce_plan_build(&op->plan, pr, payload, req->payload_len, why, sizeof why);
  if (rv == 0) {
    op->parts = calloc(op->plan.nparts, sizeof *op->parts);
    op->batches = calloc(op->plan.nbatches, sizeof *op->batches);
    if (op->parts == NULL || op->batches == NULL) {
      rv = CAIRN_ENOMEM;
      snprintf(why, sizeof why, "%s", cairn_strerror(rv));
    }
  }
  if (rv != 0) {
    handle_produce_respond_error(req,
                                 rv == CAIRN_EBADREQUEST
                                     ? CAIRN__CLIENT__ERROR_CODE__MALFORMED_REQUEST
                                     : CAIRN__CLIENT__ERROR_CODE__UNKNOWN,
                                 why);
    op->timer_closed = true;
    handle_produce_maybe_free(op);
    return;
  }
  uv_timer_init(n->loop, &op->timer);
  op->timer.data = op;
  op->req = req;
  req->handler_data = op;
  conn_request_set_cancel(req, handle_produce_on_cancel);

  /* rgroup may call back from inside rgroup_produce (a proposal failing at
   * once): submitting holds the answer until every partition is queued. */
  op->submitting = true;
  for (size_t i = 0; i < op->plan.nparts; i++) {
    handle_produce_submit_part(op, i);
  }
  op->submitting = false;
  if (op->pending == 0) {
    handle_produce_answer(op);
    return;
  }
  uint32_t timeout = pr->timeout_ms != 0 ? pr->timeout_ms : HANDLE_PRODUCE_DEFAULT_TIMEOUT_MS;
  uv_timer_start(&op->timer, handle_produce_on_timeout, timeout, 0);
}
