/* handle_list_offsets.c - ListOffsetsRequest: a partition's log start, high
 * watermark, or first offset at or after a timestamp, from its leader. */
#include "server/handlers.h"
#include "server/handle_target.h"

#include "common/err.h"
#include "net/wire_err.h"
#include "server/node.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void handle_list_offsets_respond_error(struct conn_request *req,
                                              Cairn__Client__ErrorCode code, const char *message)
{
  Cairn__Client__Error err = CAIRN__CLIENT__ERROR__INIT;
  err.code = code;
  err.message = (char *)message;
  Cairn__Client__ListOffsetsResponse resp = CAIRN__CLIENT__LIST_OFFSETS_RESPONSE__INIT;
  resp.error = &err;
  Cairn__Client__Envelope env = CAIRN__CLIENT__ENVELOPE__INIT;
  env.body_case = CAIRN__CLIENT__ENVELOPE__BODY_LIST_OFFSETS_RESP;
  env.list_offsets_resp = &resp;
  conn_respond(req, &env, NULL, 0);
}

/* Answers one partition into r (its error in *err, texts in *t). */
static void handle_list_offsets_one(struct node *n, const Cairn__Client__ListOffsetsPartition *lp,
                                    Cairn__Client__ListOffsetsPartitionResult *r,
                                    Cairn__Client__Error *err, struct handle_target *t)
{
  r->topic = lp->topic;
  r->partition = lp->partition;
  r->offset = -1;
  r->timestamp = -1;
  handle_find_leader(n, lp->topic, lp->partition, t);
  if (t->code != CAIRN__CLIENT__ERROR_CODE__OK) {
    err->code = t->code;
    err->message = t->message;
    r->leader_id = t->leader_id;
    r->leader_address = t->leader_address;
    return;
  }
  struct store *s = rgroup_store(&t->p->rg);
  struct store_info info;
  store_info(s, &info);
  switch (lp->spec) {
  case CAIRN__CLIENT__OFFSET_SPEC__OFFSET_LATEST:
    r->offset = info.next_offset;
    return;
  case CAIRN__CLIENT__OFFSET_SPEC__OFFSET_EARLIEST:
    r->offset = info.start_offset;
    return;
  case CAIRN__CLIENT__OFFSET_SPEC__OFFSET_TIMESTAMP: {
    int64_t offset = -1;
    int rv = store_lookup_time(s, lp->timestamp, &offset);
    if (rv != 0) {
      err->code = wire_err_from(rv);
      snprintf(t->message, sizeof t->message, "%s/%" PRIu32 ": looking up time %" PRId64 ": %s",
               lp->topic, lp->partition, lp->timestamp, store_errmsg(s));
      err->message = t->message;
      return;
    }
    /* The log end means no record has such a timestamp yet. */
    r->offset = offset < info.next_offset ? offset : -1;
    return;
  }
  default:
    err->code = CAIRN__CLIENT__ERROR_CODE__MALFORMED_REQUEST;
    snprintf(t->message, sizeof t->message, "unknown offset spec %d", (int)lp->spec);
    err->message = t->message;
    return;
  }
}

void handle_list_offsets(struct node *n, struct conn_request *req)
{
  if (req->env->body_case != CAIRN__CLIENT__ENVELOPE__BODY_LIST_OFFSETS_REQ) {
    handle_list_offsets_respond_error(req, CAIRN__CLIENT__ERROR_CODE__MALFORMED_REQUEST,
                                      "API_LIST_OFFSETS without a list_offsets_req body");
    return;
  }
  const Cairn__Client__ListOffsetsRequest *lq = req->env->list_offsets_req;
  size_t np = lq->n_partitions;
  Cairn__Client__ListOffsetsPartitionResult *res = calloc(np > 0 ? np : 1, sizeof *res);
  Cairn__Client__ListOffsetsPartitionResult **ptrs = calloc(np > 0 ? np : 1, sizeof *ptrs);
  Cairn__Client__Error *errs = calloc(np > 0 ? np : 1, sizeof *errs);
  struct handle_target *targets = calloc(np > 0 ? np : 1, sizeof *targets);
  if (res == NULL || ptrs == NULL || errs == NULL || targets == NULL) {
    handle_list_offsets_respond_error(req, CAIRN__CLIENT__ERROR_CODE__UNKNOWN,
                                      cairn_strerror(CAIRN_ENOMEM));
  } else {
    for (size_t i = 0; i < np; i++) {
      cairn__client__list_offsets_partition_result__init(&res[i]);
      cairn__client__error__init(&errs[i]);
      res[i].error = &errs[i];
      ptrs[i] = &res[i];
      handle_list_offsets_one(n, lq->partitions[i], &res[i], &errs[i], &targets[i]);
    }
    Cairn__Client__ListOffsetsResponse resp = CAIRN__CLIENT__LIST_OFFSETS_RESPONSE__INIT;
    resp.partitions = ptrs;
    resp.n_partitions = np;
    Cairn__Client__Envelope env = CAIRN__CLIENT__ENVELOPE__INIT;
    env.body_case = CAIRN__CLIENT__ENVELOPE__BODY_LIST_OFFSETS_RESP;
    env.list_offsets_resp = &resp;
    conn_respond(req, &env, NULL, 0);
  }
  free(res);
  free(ptrs);
  free(errs);
  free(targets);
}
