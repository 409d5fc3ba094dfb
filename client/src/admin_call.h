/* admin_call.h - the scaffolding libcairn's admin calls share (admin.c,
 * acl.c, user.c; prefix lc_acall_): one request envelope sent as an lc_op
 * (op.c, so retried within request_timeout_ms), whose answer must carry
 * one expected body; the wire Error in that body ends the call, or
 * retries it when retriable, before the owner reads the rest.
 *
 *   owner: calloc its call struct (struct lc_acall first) -> lc_acall_init
 *   -> fills its request body -> lc_acall_start -> ops->answer (for an
 *   answer with the expected body and no error) -> ops->done (exactly
 *   once) -> ops->free.
 *
 * Context: the client's loop thread, like every lc_ call; the ops
 * callbacks run on it too. */
#ifndef CAIRN_LC_ADMIN_CALL_H
#define CAIRN_LC_ADMIN_CALL_H

#include "internal.h"

#include <stdbool.h>

struct lc_acall;

/* What an owner does at each step of its calls: one static const table
 * per kind of call. */
struct lc_acall_ops {
  /* Reads an answer that has the expected body and no error in it
   * (op->status is 0 on entry). Returns LC_OP_DONE (op->status 0 or a
   * final code; may set op->errmsg) or LC_OP_RETRY (op->status: the
   * retriable code). env is borrowed for the call. NULL: the answer has
   * nothing more to read. */
  enum lc_op_verdict (*answer)(struct lc_acall *ac, struct lc_op *op,
                               Cairn__Client__Envelope *env);
  /* Tells the application: fires exactly once per lc_acall_start that
   * returned 0, with status 0 (errmsg ""), a negative code (errmsg says
   * why) or UV_ECANCELED when the client closes. errmsg is borrowed for
   * the call. A result handed to the application must be taken out of
   * the owner's struct here, or ops->free frees it. */
  void (*done)(struct lc_acall *ac, struct cairn_client *c, int status, const char *errmsg);
  /* Frees the owner's struct around ac and everything it holds. Called
   * exactly once: after done, or by lc_acall_start when that fails. */
  void (*free)(struct lc_acall *ac);
};

/* The head of an owner's call struct: its first member, so the ops
 * callbacks cast ac back to the owner's struct. */
struct lc_acall {
  Cairn__Client__Envelope env; /* the request; its body points into the owner's struct */
  const struct lc_acall_ops *ops;
  Cairn__Client__Envelope__BodyCase answer_body; /* the body the answer must carry */
};

/* Sets up ac: an empty envelope with api and body (the owner then points
 * the envelope's body field at its request), the answer body expected,
 * and ops (borrowed: static). */
void lc_acall_init(struct lc_acall *ac, const struct lc_acall_ops *ops, Cairn__Client__Api api,
                   Cairn__Client__Envelope__BodyCase body,
                   Cairn__Client__Envelope__BodyCase answer_body);

/* The checks every admin call opens with: CAIRN_EINVAL unless valid (the
 * caller's test of its arguments), else CAIRN_ECLOSED when c is closing,
 * else 0. */
__attribute__((warn_unused_result)) int lc_acall_check(const struct cairn_client *c, bool valid);

/* Sends ac's request as an lc_op to target: LC_OP_ANY (topic NULL), or
 * LC_OP_LEADER of (topic, partition) (topic copied). Ownership: always
 * consumes ac (on failure ops->free frees it). Callback: ops->done fires
 * exactly once if this returned 0, never if it failed. Returns 0 or
 * CAIRN_ENOMEM. */
__attribute__((warn_unused_result)) int lc_acall_start(struct cairn_client *c, struct lc_acall *ac,
                                                       enum lc_op_target target, const char *topic,
                                                       int32_t partition);

/* Sets op->status from a wire Error e (NULL or OK: 0) and, for an error,
 * op->errmsg to "<strerror>: <e's message>"; returns the verdict:
 * LC_OP_RETRY for a retriable code, else LC_OP_DONE. e is borrowed. For
 * errors inside an answer's body (a partition's), besides the body's own
 * that lc_acall checks. */
enum lc_op_verdict lc_acall_verdict(struct lc_op *op, const Cairn__Client__Error *e);

#endif
