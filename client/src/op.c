/* op.c - one request retried until a deadline: to any node (admin calls)
 * or to a partition's leader (ListOffsets). Connection failures,
 * timeouts, NOT_LEADER, NOT_CONTROLLER and the like wait a backoff with
 * jitter (refreshing metadata when routing may be wrong) and try again;
 * anything else, or the deadline, ends the op.
 *
 *   lc_op_start -> lc_op_attempt -> (route; maybe lc_meta_refresh ->
 *   lc_op_on_meta) -> lc_call -> lc_op_on_answer -> DONE: lc_op_finish
 *                                                -> RETRY: wake_ms set;
 *   lc_op_tick wakes it (lc_op_attempt) or ends it at the deadline. */
#include "internal.h"

#include "common/err.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct lc_op *lc_op_new(struct cairn_client *c)
{
  struct lc_op *op = calloc(1, sizeof *op);
  if (op != NULL) {
    op->c = c;
  }
  return op;
}

static void lc_op_finish(struct lc_op *op, int status)
{
  struct cairn_client *c = op->c;
  if (op->prev != NULL) {
    op->prev->next = op->next;
  } else {
    c->ops = op->next;
  }
  if (op->next != NULL) {
    op->next->prev = op->prev;
  }
  op->status = status;
  if (status != 0 && op->errmsg[0] == '\0') {
    lc_strlcpy(op->errmsg, cairn_strerror(status), sizeof op->errmsg);
  }
  op->done(op);
  if (op->req != NULL && op->free_req != NULL) {
    op->free_req(op->req);
  }
  free(op->topic);
  free(op);
}

/* Status to report when the deadline ends a retried op: connection
 * trouble everywhere reads as "unreachable". */
static int lc_op_final_status(const struct lc_op *op)
{
  int s = op->status;
  if (s == CAIRN_ECLOSED || s == CAIRN_EREQUEST_TIMEOUT || (s < 0 && s > -4096)) {
    return op->target == LC_OP_ANY ? CAIRN_EUNREACHABLE : s;
  }
  return s != 0 ? s : CAIRN_EREQUEST_TIMEOUT;
}

static void lc_op_retry_later(struct lc_op *op)
{
  struct cairn_client *c = op->c;
  uint64_t now = lc_now(c);
  if (!lc_retriable(op->status) || now >= op->deadline_ms) {
    int final = lc_retriable(op->status) ? lc_op_final_status(op) : op->status;
    if (final == CAIRN_EUNREACHABLE && op->status != CAIRN_EUNREACHABLE) {
      char last[LC_ERRMSG_SIZE];
      lc_strlcpy(last, op->errmsg, sizeof last);
      lc_fmt(op->errmsg, sizeof op->errmsg, "no node answered within %u ms (last: %s)",
             c->opts.request_timeout_ms, last);
    }
    lc_op_finish(op, final);
    return;
  }
  if (lc_needs_refresh(op->status)) {
    lc_meta_invalidate(c);
  }
  if (op->target == LC_OP_COORDINATOR && op->status != CAIRN_ECOORDINATOR_LOADING) {
    op->coord[0] = '\0'; /* find it again */
  }
  op->any_cursor++;
  c->stats.retries++;
  uint64_t wake = now + lc_backoff_next(&op->bk);
  op->wake_ms = wake < op->deadline_ms ? wake : op->deadline_ms;
}

static void lc_op_attempt(struct lc_op *op);

/* With fail_refused: counts a refused connection (status) to op->addr and
 * says whether every candidate address has now refused in a row (the
 * cursor moves to the next one on each retry). Refused is not a timeout:
 * nothing listens there, and waiting will not help a command line. */
static bool lc_op_all_refused(struct lc_op *op, int status)
{
  if (!op->fail_refused || status != UV_ECONNREFUSED) {
    op->refused = 0;
    op->refused_addrs[0] = '\0';
    return false;
  }
  size_t used = strlen(op->refused_addrs);
  size_t len = strlen(op->addr);
  if (strstr(op->refused_addrs, op->addr) == NULL && used + len + 3 < sizeof op->refused_addrs) {
    if (used > 0) {
      memcpy(op->refused_addrs + used, ", ", 2);
      used += 2;
    }
    memcpy(op->refused_addrs + used, op->addr, len + 1); /* fits: checked above */
  }
  size_t count = 0;
  lc_meta_candidate(op->c, 0, &count);
  return ++op->refused >= count;
}

static void lc_op_on_answer(struct cairn_client *c, int status, Cairn__Client__Envelope *env,
                            const uint8_t *payload, size_t len, struct lc_buf *buf,
                              void *data)
{
  struct lc_op *op = data;
  op->in_flight = false;
  if (op->canceled || (status == UV_ECANCELED && c->closing)) {
    lc_op_finish(op, UV_ECANCELED);
    return;
  }
  if (status != 0) {
    op->status = status;
    lc_fmt(op->errmsg, sizeof op->errmsg, "%s: %s", op->addr, cairn_strerror(status));
    if (lc_op_all_refused(op, status)) {
      char list[sizeof op->refused_addrs];
      lc_strlcpy(list, op->refused_addrs, sizeof list);
      lc_fmt(op->errmsg, sizeof op->errmsg, "connection refused by %s", list);
      lc_op_finish(op, CAIRN_EUNREACHABLE);
      return;
    }
    lc_op_retry_later(op);
    return;
  }
  op->errmsg[0] = '\0';
  if (env->body_case == CAIRN__CLIENT__ENVELOPE__BODY_ERROR_RESP && op->answer_errors == false) {
    /* The node refused the request as a whole (unknown api, malformed). */
    op->status = env->error_resp->code != CAIRN__CLIENT__ERROR_CODE__OK
                     ? lc_wire_err((int)env->error_resp->code)
                     : CAIRN_EPROTOCOL;
    lc_fmt(op->errmsg, sizeof op->errmsg, "%s: %s", cairn_strerror(op->status),
           env->error_resp->message != NULL ? env->error_resp->message : "");
    if (lc_retriable(op->status)) {
      lc_op_retry_later(op);
    } else {
      lc_op_finish(op, op->status);
    }
    return;
  }
  if (op->answer(op, env) == LC_OP_DONE) {
    lc_op_finish(op, op->status);
    return;
  }
  lc_op_retry_later(op);
}

static void lc_op_on_meta(struct cairn_client *c, int status, const char *errmsg, void *data)
{
  struct lc_op *op = data;
  op->in_flight = false;
  if (op->canceled || status == UV_ECANCELED) {
    lc_op_finish(op, UV_ECANCELED);
    return;
  }
  if (status != 0) {
    op->status = status;
    lc_strlcpy(op->errmsg, errmsg, sizeof op->errmsg);
    lc_op_retry_later(op);
    return;
  }
  const char *addr;
  int rv = lc_route(c, op->topic, op->partition, op->meta_gen, &addr);
  if (rv < 0) {
    lc_op_finish(op, rv);
    return;
  }
  if (rv == LC_ROUTE_WAIT) {
    op->status = CAIRN_ENOTLEADER; /* no leader known yet */
    lc_strlcpy(op->errmsg, "no leader known for the partition", sizeof op->errmsg);
    lc_op_retry_later(op);
    return;
  }
  lc_op_attempt(op);
}

/* FindCoordinator's answer for an LC_OP_COORDINATOR op. */
static void lc_op_on_coord(struct cairn_client *c, int status, Cairn__Client__Envelope *env,
                           const uint8_t *payload, size_t len, struct lc_buf *buf,
                              void *data)
{
  struct lc_op *op = data;
  op->in_flight = false;
  if (op->canceled || (status == UV_ECANCELED && c->closing)) {
    lc_op_finish(op, UV_ECANCELED);
    return;
  }
  if (status == 0 && env->body_case != CAIRN__CLIENT__ENVELOPE__BODY_FIND_COORDINATOR_RESP) {
    status = env->body_case == CAIRN__CLIENT__ENVELOPE__BODY_ERROR_RESP
                 ? lc_wire_err((int)env->error_resp->code)
                 : CAIRN_EPROTOCOL;
  }
  if (status != 0) {
    op->status = status;
    const char *said = env != NULL &&
                               env->body_case == CAIRN__CLIENT__ENVELOPE__BODY_ERROR_RESP &&
                               env->error_resp->message != NULL
                           ? env->error_resp->message
                           : "";
    lc_fmt(op->errmsg, sizeof op->errmsg, "finding the coordinator at %s: %s%s%s", op->addr,
           cairn_strerror(status), said[0] != '\0' ? ": " : "", said);
    if (lc_retriable(status)) {
      lc_op_retry_later(op);
    } else {
      lc_op_finish(op, status);
    }
    return;
  }
  const Cairn__Client__FindCoordinatorResponse *r = env->find_coordinator_resp;
  int code = r->error != NULL ? lc_wire_err((int)r->error->code) : 0;
  if (code == 0 && (r->coordinator_address == NULL || r->coordinator_address[0] == '\0')) {
    code = CAIRN_ENOT_COORDINATOR;
  }
  if (code != 0) {
    op->status = code;
    lc_fmt(op->errmsg, sizeof op->errmsg, "%s", r->error != NULL && r->error->message != NULL
                                                    ? r->error->message
                                                    : cairn_strerror(code));
    if (lc_retriable(code)) {
      lc_op_retry_later(op);
    } else {
      lc_op_finish(op, code);
    }
    return;
  }
  lc_strlcpy(op->coord, r->coordinator_address, sizeof op->coord);
  lc_op_attempt(op);
}

static void lc_op_attempt(struct lc_op *op)
{
  struct cairn_client *c = op->c;
  const char *addr = NULL;
  lc_req_cb cb = lc_op_on_answer;
  Cairn__Client__Envelope *req = op->req;
  Cairn__Client__FindCoordinatorRequest fc = CAIRN__CLIENT__FIND_COORDINATOR_REQUEST__INIT;
  Cairn__Client__Envelope fenv = CAIRN__CLIENT__ENVELOPE__INIT;
  if (op->target == LC_OP_COORDINATOR && op->coord[0] != '\0') {
    addr = op->coord;
  } else if (op->target == LC_OP_COORDINATOR) {
    size_t count;
    lc_meta_candidate(c, 0, &count);
    if (count == 0) {
      lc_op_finish(op, CAIRN_EUNREACHABLE);
      return;
    }
    addr = lc_meta_candidate(c, op->any_cursor % count, &count);
    fc.group = op->topic;
    fenv.api = CAIRN__CLIENT__API__API_FIND_COORDINATOR;
    fenv.body_case = CAIRN__CLIENT__ENVELOPE__BODY_FIND_COORDINATOR_REQ;
    fenv.find_coordinator_req = &fc;
    req = &fenv;
    cb = lc_op_on_coord;
  } else if (op->target == LC_OP_LEADER) {
    int rv = lc_route(c, op->topic, op->partition, op->meta_gen, &addr);
    if (rv < 0) {
      lc_op_finish(op, rv);
      return;
    }
    if (rv == LC_ROUTE_WAIT) {
      op->in_flight = true;
      rv = lc_meta_refresh(c, lc_op_on_meta, op);
      if (rv != 0) {
        op->in_flight = false;
        lc_op_finish(op, rv);
      }
      return;
    }
  } else {
    size_t count;
    lc_meta_candidate(c, 0, &count);
    if (count == 0) {
      lc_op_finish(op, CAIRN_EUNREACHABLE);
      return;
    }
    addr = lc_meta_candidate(c, op->any_cursor % count, &count);
  }
  uint64_t now = lc_now(c);
  uint64_t left = op->deadline_ms > now ? op->deadline_ms - now : 1;
  uint32_t timeout = op->timeout_ms != 0 ? op->timeout_ms : c->opts.request_timeout_ms;
  if (left < timeout) {
    timeout = (uint32_t)left;
  }
  lc_strlcpy(op->addr, addr, sizeof op->addr);
  op->in_flight = true;
  int rv = lc_call(c, addr, req, NULL, 0, timeout, cb, op);
  if (rv != 0) {
    op->in_flight = false;
    op->status = rv;
    lc_op_retry_later(op);
  }
}

void lc_op_start(struct cairn_client *c, struct lc_op *op)
{
  op->c = c;
  op->deadline_ms =
      lc_now(c) + (op->timeout_ms != 0 ? op->timeout_ms : c->opts.request_timeout_ms);
  op->meta_gen = c->meta.generation;
  op->any_cursor = (size_t)lc_rand(c);
  lc_backoff_init(&op->bk, c->opts.retry_backoff_ms, c->opts.retry_backoff_max_ms, lc_rand(c));
  op->next = c->ops;
  if (c->ops != NULL) {
    c->ops->prev = op;
  }
  c->ops = op;
  lc_op_attempt(op);
}

/* Finds one op to wake or expire; the callbacks may change the list. */
static bool lc_op_tick_one(struct cairn_client *c, uint64_t now)
{
  for (struct lc_op *op = c->ops; op != NULL; op = op->next) {
    if (op->in_flight) {
      continue;
    }
    if (op->wake_ms != 0 && now >= op->wake_ms) {
      op->wake_ms = 0;
      if (now >= op->deadline_ms) {
        lc_op_retry_later(op); /* past the deadline: finishes it */
      } else {
        lc_op_attempt(op);
      }
      return true;
    }
  }
  return false;
}

void lc_op_tick(struct cairn_client *c)
{
  uint64_t now = lc_now(c);
  for (int i = 0; i < 1000 && lc_op_tick_one(c, now); i++) {
  }
}

void lc_op_cancel_all(struct cairn_client *c)
{
  struct lc_op *op = c->ops;
  while (op != NULL) {
    struct lc_op *next = op->next;
    if (op->in_flight) {
      op->canceled = true; /* its request or refresh calls back canceled */
    } else {
      lc_op_finish(op, UV_ECANCELED);
    }
    op = next;
  }
}
