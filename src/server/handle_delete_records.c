/* handle_delete_records.c - DeleteRecordsRequest: each partition's log
 * start moved by a LOG_START command through its Raft group
 * (rgroup_delete_records), one answer once every partition has called back
 * or the request's timeout has passed.
 *
 * Lifecycle of one request (struct handle_dr_op), as a produce's:
 *
 *   handle_delete_records: authorize (DELETE on the topic), find each
 *     partition's leader here, rgroup_delete_records() each one
 *       |
 *       v
 *   WAITING  -- the last rgroup callback, the timeout (TIMEOUT for the
 *       |       partitions still out: their delete may still happen) or
 *       |       the conn closing (the answer is dropped)
 *       v
 *   ANSWERED (op->req NULL, timer closing)
 *       |  every rgroup callback has fired and the timer has closed
 *       v
 *   freed (handle_dr_maybe_free)
 *
 * The op outlives its answer because rgroup borrows each partition's
 * struct rgroup_produce and command buffer until its callback. */
#include "server/handlers.h"
#include "server/handle_target.h"

#include "cluster/rgroup_cmd.h"
#include "common/err.h"
#include "net/wire_err.h"
#include "server/node.h"

#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

#define HANDLE_DR_DEFAULT_TIMEOUT_MS 30000u
#define HANDLE_DR_MAX_PARTS 10000
#define HANDLE_DR_PENDING 1 /* a partition's status before its callback */

struct handle_dr_op;

struct handle_dr_part {
  struct rgroup_produce rp; /* rp.data: this */
  uint8_t cmd[RGROUP_CMD_SIZE];
  struct handle_dr_op *op;
  struct handle_target target; /* code OK: handed to the replica */
  int status;                  /* HANDLE_DR_PENDING, 0 or a negative code */
  int64_t low_watermark;
  char message[HANDLE_MESSAGE_SIZE];
};

struct handle_dr_op {
  struct node *n;
  struct conn_request *req; /* NULL once answered */
  struct handle_dr_part *parts;
  size_t nparts;
  size_t pending;  /* rgroup callbacks still to fire */
  bool submitting; /* handle_delete_records is still queuing */
  uv_timer_t timer;
  bool timer_closed;
};

static void handle_dr_answer(struct handle_dr_op *op);

static void handle_dr_maybe_free(struct handle_dr_op *op)
{
  if (op->req != NULL || op->pending > 0 || !op->timer_closed || op->submitting) {
    return;
  }
  free(op->parts);
  free(op);
}

static void handle_dr_on_timer_closed(uv_handle_t *h)
{
  struct handle_dr_op *op = h->data;
  op->timer_closed = true;
  handle_dr_maybe_free(op);
}

static void handle_dr_on_done(struct rgroup_produce *rp, int status, int64_t low_watermark)
{
  struct handle_dr_part *p = rp->data;
  struct handle_dr_op *op = p->op;
  p->status = status;
  p->low_watermark = low_watermark;
  op->pending--;
  if (op->submitting) {
    return; /* called back from inside rgroup_delete_records */
  }
  if (op->pending == 0 && op->req != NULL) {
    handle_dr_answer(op);
  }
  handle_dr_maybe_free(op);
}

static void handle_dr_on_timeout(uv_timer_t *t)
{
  struct handle_dr_op *op = t->data;
  if (op->req != NULL) {
    handle_dr_answer(op);
  }
}

static void handle_dr_on_cancel(struct conn_request *req)
{
  struct handle_dr_op *op = req->handler_data;
  if (op->req != NULL) {
    handle_dr_answer(op); /* dropped by the conn; frees the request */
  }
}

/* One partition's result into r and e (texts kept in p). */
static void handle_dr_result(struct handle_dr_op *op, struct handle_dr_part *p,
                             const Cairn__Client__DeleteRecordsPartition *dp,
                             Cairn__Client__DeleteRecordsPartitionResult *r,
                             Cairn__Client__Error *e, struct conn *c)
{
  r->topic = dp->topic;
  r->partition = dp->partition;
  r->error = e;
  r->low_watermark = -1;
  if (p->target.code != CAIRN__CLIENT__ERROR_CODE__OK) {
    e->code = p->target.code;
    e->message = p->target.message;
    r->leader_id = p->target.leader_id;
    r->leader_address = (char *)handle_target_address(op->n, &p->target, c);
    return;
  }
  int status = p->status == HANDLE_DR_PENDING ? -ETIMEDOUT : p->status;
  if (status == 0) {
    r->low_watermark = p->low_watermark;
    return;
  }
  e->code = wire_err_from(status);
  if (p->message[0] == '\0') {
    snprintf(p->message, sizeof p->message, "%s/%" PRIu32 ": %s", dp->topic, dp->partition,
             status == -ETIMEDOUT ? "not applied within the request's timeout (it may still be)"
                                  : cairn_strerror(status));
  }
  e->message = p->message;
  if (status == CAIRN_ENOTLEADER) {
    struct handle_target now;
    handle_find_leader(op->n, dp->topic, dp->partition, &now);
    r->leader_id = now.leader_id;
    r->leader_address = (char *)handle_target_address(op->n, &now, c);
  }
}

/* Builds and sends the answer, finishing op->req; stops the timer. */
static void handle_dr_answer(struct handle_dr_op *op)
{
  struct conn_request *req = op->req;
  op->req = NULL;
  const Cairn__Client__DeleteRecordsRequest *dq = req->env->delete_records_req;
  size_t np = op->nparts;
  Cairn__Client__DeleteRecordsPartitionResult *res = calloc(np > 0 ? np : 1, sizeof *res);
  Cairn__Client__DeleteRecordsPartitionResult **ptrs = calloc(np > 0 ? np : 1, sizeof *ptrs);
  Cairn__Client__Error *errs = calloc(np > 0 ? np : 1, sizeof *errs);
  if (res == NULL || ptrs == NULL || errs == NULL) {
    conn_respond_error(req, CAIRN__CLIENT__ERROR_CODE__UNKNOWN, cairn_strerror(CAIRN_ENOMEM));
  } else {
    for (size_t i = 0; i < np; i++) {
      cairn__client__delete_records_partition_result__init(&res[i]);
      cairn__client__error__init(&errs[i]);
      ptrs[i] = &res[i];
      handle_dr_result(op, &op->parts[i], dq->partitions[i], &res[i], &errs[i], req->c);
    }
    Cairn__Client__DeleteRecordsResponse resp = CAIRN__CLIENT__DELETE_RECORDS_RESPONSE__INIT;
    resp.partitions = ptrs;
    resp.n_partitions = np;
    Cairn__Client__Envelope env = CAIRN__CLIENT__ENVELOPE__INIT;
    env.body_case = CAIRN__CLIENT__ENVELOPE__BODY_DELETE_RECORDS_RESP;
    env.delete_records_resp = &resp;
    conn_respond(req, &env, NULL, 0);
  }
  free(res);
  free(ptrs);
  free(errs);
  if (!uv_is_closing((uv_handle_t *)&op->timer)) {
    uv_close((uv_handle_t *)&op->timer, handle_dr_on_timer_closed);
  }
}

/* Hands one partition's command to its leader replica here. */
static void handle_dr_submit(struct handle_dr_op *op, size_t i,
                             const Cairn__Client__DeleteRecordsPartition *dp)
{
  struct handle_dr_part *p = &op->parts[i];
  p->op = op;
  p->rp.data = p;
  p->status = CAIRN_ENOTLEADER;
  if (!handle_target_authorized(op->n, op->req->c, dp->topic, META_ACL_DELETE, &p->target)) {
    return;
  }
  /* A reader's checks: a new leader must have applied its term's first
   * entry, or its high watermark (the bound of the offset) may be behind. */
  handle_find_reader(op->n, dp->topic, dp->partition, &p->target);
  if (p->target.code != CAIRN__CLIENT__ERROR_CODE__OK) {
    return;
  }
  struct rgroup *rg = &p->target.p->rg;
  p->status = HANDLE_DR_PENDING;
  op->pending++;
  int rv = rgroup_delete_records(rg, &p->rp, p->cmd, dp->offset, handle_dr_on_done);
  if (rv != 0) {
    op->pending--;
    p->status = rv;
    if (rv == CAIRN_EOFFSET || rv == CAIRN_EPOLICY) {
      snprintf(p->message, sizeof p->message, "%s", rgroup_errmsg(rg));
    }
  }
}

void handle_delete_records(struct node *n, struct conn_request *req)
{
  if (req->env->body_case != CAIRN__CLIENT__ENVELOPE__BODY_DELETE_RECORDS_REQ) {
    conn_respond_error(req, CAIRN__CLIENT__ERROR_CODE__MALFORMED_REQUEST,
                       "API_DELETE_RECORDS without a delete_records_req body");
    return;
  }
  if (n->state != NODE_RUNNING) {
    conn_respond_error(req, CAIRN__CLIENT__ERROR_CODE__SHUTTING_DOWN, "the node is stopping");
    return;
  }
  const Cairn__Client__DeleteRecordsRequest *dq = req->env->delete_records_req;
  if (dq->n_partitions > HANDLE_DR_MAX_PARTS) {
    conn_respond_error(req, CAIRN__CLIENT__ERROR_CODE__MALFORMED_REQUEST,
                       "more than 10000 partitions in one DeleteRecords");
    return;
  }
  struct handle_dr_op *op = calloc(1, sizeof *op);
  struct handle_dr_part *parts = calloc(dq->n_partitions > 0 ? dq->n_partitions : 1, sizeof *parts);
  if (op == NULL || parts == NULL) {
    free(op);
    free(parts);
    conn_respond_error(req, CAIRN__CLIENT__ERROR_CODE__UNKNOWN, cairn_strerror(CAIRN_ENOMEM));
    return;
  }
  op->n = n;
  op->parts = parts;
  op->nparts = dq->n_partitions;
  uv_timer_init(n->loop, &op->timer);
  op->timer.data = op;
  op->req = req;
  req->handler_data = op;
  conn_request_set_cancel(req, handle_dr_on_cancel);
  /* rgroup may call back from inside rgroup_delete_records (a proposal
   * failing at once): submitting holds the answer until all are queued. */
  op->submitting = true;
  for (size_t i = 0; i < op->nparts; i++) {
    handle_dr_submit(op, i, dq->partitions[i]);
  }
  op->submitting = false;
  if (op->pending == 0) {
    handle_dr_answer(op);
    return;
  }
  uint32_t timeout = dq->timeout_ms != 0 ? dq->timeout_ms : HANDLE_DR_DEFAULT_TIMEOUT_MS;
  uv_timer_start(&op->timer, handle_dr_on_timeout, timeout, 0);
}
