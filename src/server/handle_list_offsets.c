/* handle_list_offsets.c - ListOffsetsRequest: a partition's log start, high
 * watermark, or first offset at or after a timestamp, from its leader. */
#include "server/handlers.h"
#include "server/handle_target.h"

#include "common/err.h"
#include "format/batch.h"
#include "net/wire_err.h"
#include "server/node.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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

/* The timestamp of the record at offset, from its batch: 0 with *ts (-1
 * when the batch is compressed), or a negative code. Reads one batch with
 * pread on the loop thread, as the time index lookup before it does: a
 * batch is at most the group's entry bound. */
static int handle_list_offsets_record_time(struct store *s, int64_t offset, int64_t *ts)
{
  *ts = -1;
  struct store_region r;
  memset(&r, 0, sizeof r);
  r.fd = -1;
  int rv = store_read(s, offset, 1, &r); /* 1 byte: the first batch alone, whole */
  if (rv != 0 || r.len < BATCH_HEADER_SIZE) {
    store_region_release(&r);
    return rv;
  }
  uint8_t *copy = NULL;
  const uint8_t *p = r.mem;
  if (r.fd >= 0) {
    copy = malloc(r.len);
    if (copy == NULL) {
      store_region_release(&r);
      return CAIRN_ENOMEM;
    }
    for (size_t got = 0; got < r.len;) {
      ssize_t k = pread(r.fd, copy + got, r.len - got, r.pos + (off_t)got);
      if (k <= 0) {
        rv = k < 0 ? -errno : CAIRN_ETRUNCATED;
        break;
      }
      got += (size_t)k;
    }
    p = copy;
  }
  struct batch_header h;
  batch_header_decode(p, &h);
  size_t len = batch_total_size(h.batch_length);
  struct batch_iter it;
  if (rv == 0 && len <= r.len && batch_iter_init(&it, p, len) == 0) {
    struct batch_record rec;
    while (batch_iter_next(&it, &rec) == 1) {
      if (rec.offset == offset) {
        *ts = rec.timestamp;
        break;
      }
    }
  }
  free(copy);
  store_region_release(&r);
  return rv;
}

/* Answers one partition into r (its error in *err, texts in *t). */
static void handle_list_offsets_one(struct node *n, struct conn *c,
                                    const Cairn__Client__ListOffsetsPartition *lp,
                                    Cairn__Client__ListOffsetsPartitionResult *r,
                                    Cairn__Client__Error *err, struct handle_target *t)
{
  r->topic = lp->topic;
  r->partition = lp->partition;
  r->offset = -1;
  r->timestamp = -1;
  if (handle_target_authorized(n, c, lp->topic, META_ACL_READ, t)) {
    handle_find_reader(n, lp->topic, lp->partition, t);
  }
  if (t->code != CAIRN__CLIENT__ERROR_CODE__OK) {
    err->code = t->code;
    err->message = t->message;
    r->leader_id = t->leader_id;
    r->leader_address = (char *)handle_target_address(n, t, c);
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
    if (offset >= info.next_offset) {
      r->offset = -1;
      return;
    }
    r->offset = offset;
    rv = handle_list_offsets_record_time(s, offset, &r->timestamp);
    if (rv != 0) {
      err->code = wire_err_from(rv);
      snprintf(t->message, sizeof t->message, "%s/%" PRIu32 ": reading offset %" PRId64 ": %s",
               lp->topic, lp->partition, offset, cairn_strerror(rv));
      err->message = t->message;
    }
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
      handle_list_offsets_one(n, req->c, lq->partitions[i], &res[i], &errs[i], &targets[i]);
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
