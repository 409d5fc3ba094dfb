/* handle_group_offsets.c - OffsetCommit, ResetOffsets and OffsetFetch at a
 * group's coordinator. A commit is checked against the group (member,
 * generation, ownership of each partition) and each partition against the
 * ACLs (READ on its topic: a refused one is answered AUTHORIZATION_FAILED
 * on its own, the others are committed, as Kafka does), appended to the group's
 * offsets partition as one batch, and answered when that batch is
 * committed by Raft (coord_append); ResetOffsets is a commit outside
 * membership that only an empty group accepts, and with delete_offsets
 * (Kafka's OffsetDelete) it appends tombstones for the partitions named
 * instead. */
#include "server/handlers.h"
#include "server/handle_group.h"

#include "common/err.h"
#include "common/log.h"
#include "net/wire_err.h"
#include "server/authz.h"
#include "server/node.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* One commit (or reset) waiting for its batch. */
struct handle_commit_op {
  struct conn_request *req; /* NULL once the conn canceled it */
  bool reset;
  char group[GROUP_NAME_MAX + 1];
  size_t n;
  int *codes; /* per partition: its refusal, or HANDLE_COMMIT_SENT */
  int status; /* the batch's outcome */
};

#define HANDLE_COMMIT_SENT 1

static void handle_commit_answer(struct conn_request *req, bool reset,
                                 const struct handle_group_err *he,
                                 Cairn__Client__OffsetCommitPartitionResult **res, size_t n)
{
  Cairn__Client__Envelope env = CAIRN__CLIENT__ENVELOPE__INIT;
  Cairn__Client__Error e = he->e;
  Cairn__Client__OffsetCommitResponse oc = CAIRN__CLIENT__OFFSET_COMMIT_RESPONSE__INIT;
  Cairn__Client__ResetOffsetsResponse ro = CAIRN__CLIENT__RESET_OFFSETS_RESPONSE__INIT;
  if (reset) {
    ro.error = &e;
    ro.partitions = res;
    ro.n_partitions = n;
    ro.coordinator_id = he->coordinator_id;
    ro.coordinator_address = (char *)he->coordinator_address;
    env.body_case = CAIRN__CLIENT__ENVELOPE__BODY_RESET_OFFSETS_RESP;
    env.reset_offsets_resp = &ro;
  } else {
    oc.error = &e;
    oc.partitions = res;
    oc.n_partitions = n;
    oc.coordinator_id = he->coordinator_id;
    oc.coordinator_address = (char *)he->coordinator_address;
    env.body_case = CAIRN__CLIENT__ENVELOPE__BODY_OFFSET_COMMIT_RESP;
    env.offset_commit_resp = &oc;
  }
  conn_respond(req, &env, NULL, 0);
}

static const Cairn__Client__OffsetCommitPartition *const *
handle_commit_parts(const struct conn_request *req, size_t *n)
{
  if (req->env->body_case == CAIRN__CLIENT__ENVELOPE__BODY_RESET_OFFSETS_REQ) {
    *n = req->env->reset_offsets_req->n_partitions;
    return (const Cairn__Client__OffsetCommitPartition *const *)
        req->env->reset_offsets_req->partitions;
  }
  *n = req->env->offset_commit_req->n_partitions;
  return (const Cairn__Client__OffsetCommitPartition *const *)
      req->env->offset_commit_req->partitions;
}

/* Answers op->req with each partition's code. */
static void handle_commit_finish(struct handle_commit_op *op)
{
  struct conn_request *req = op->req;
  size_t n = 0;
  const Cairn__Client__OffsetCommitPartition *const *parts = handle_commit_parts(req, &n);
  Cairn__Client__OffsetCommitPartitionResult *res = calloc(n + 1, sizeof *res);
  Cairn__Client__OffsetCommitPartitionResult **ptrs = calloc(n + 1, sizeof *ptrs);
  Cairn__Client__Error *errs = calloc(n + 1, sizeof *errs);
  struct handle_group_err he;
  /* A group delete has no partitions: its outcome is the whole answer's. */
  handle_group_err_set(&he, n == 0 ? op->status : 0, op->group, 0, NULL);
  if (res == NULL || ptrs == NULL || errs == NULL) {
    handle_group_err_set(&he, CAIRN_ENOMEM, op->group, 0, NULL);
    handle_commit_answer(req, op->reset, &he, NULL, 0);
  } else {
    for (size_t i = 0; i < n; i++) {
      cairn__client__offset_commit_partition_result__init(&res[i]);
      cairn__client__error__init(&errs[i]);
      int code = op->codes[i] == HANDLE_COMMIT_SENT ? op->status : op->codes[i];
      errs[i].code = wire_err_from(code);
      errs[i].message = code != 0 ? (char *)cairn_strerror(code) : "";
      res[i].topic = parts[i]->topic;
      res[i].partition = parts[i]->partition;
      res[i].error = &errs[i];
      ptrs[i] = &res[i];
    }
    handle_commit_answer(req, op->reset, &he, ptrs, n);
  }
  free(res);
  free(ptrs);
  free(errs);
}

static void handle_commit_free(struct handle_commit_op *op)
{
  free(op->codes);
  free(op);
}

static void handle_commit_on_cancel(struct conn_request *req)
{
  struct handle_commit_op *op = req->handler_data;
  op->req = NULL;
  req->handler_data = NULL;
  conn_respond_error(req, CAIRN__CLIENT__ERROR_CODE__SHUTTING_DOWN, "connection closing");
}

static void handle_commit_on_appended(void *data, int status)
{
  struct handle_commit_op *op = data;
  if (op->req != NULL) {
    op->req->handler_data = NULL;
    conn_request_set_cancel(op->req, NULL);
    /* Not committed: the client retries at the coordinator FindCoordinator
     * names (IN_DOUBT: the offsets may be in the log after all). */
    op->status =
        status == CAIRN_ENOTLEADER || status == CAIRN_ESHUTDOWN ? CAIRN_ENOT_COORDINATOR : status;
    handle_commit_finish(op);
  }
  handle_commit_free(op);
}

/* The check of one partition before it is appended: 0 or its code. The
 * ACL comes before the topic's existence, which it must not reveal. */
static int handle_commit_check_part(struct node *n, struct conn *c, const struct group *g,
                                    const char *member, bool drop,
                                    const Cairn__Client__OffsetCommitPartition *p)
{
  if (!meta_topic_name_valid(p->topic)) {
    return CAIRN_EUNKNOWN_TOPIC;
  }
  char msg[META_RESOURCE_MAX + META_PRINCIPAL_MAX + 64];
  if (authz_check(n, c, META_ACL_TOPIC, p->topic, META_ACL_READ, msg, sizeof msg) != 0) {
    return CAIRN_EAUTHZ;
  }
  const struct meta_topic *t = meta_topic_find(ctl_state(&n->ctl), p->topic);
  if (t == NULL) {
    return CAIRN_EUNKNOWN_TOPIC;
  }
  if (p->partition >= t->npartitions) {
    return CAIRN_EUNKNOWN_PARTITION;
  }
  if (!drop && (p->offset < 0 || strlen(p->metadata) > GROUP_METADATA_MAX)) {
    return CAIRN_EINVALID_GROUP;
  }
  if (!group_member_owns(g, member, p->topic, p->partition)) {
    return CAIRN_ENOT_ASSIGNED;
  }
  return 0;
}

/* The records of a commit: one per partition that passes its check (its
 * code HANDLE_COMMIT_SENT; the others keep their refusal in codes); with
 * tomb (drop), a tombstone each. Returns how many. */
static size_t handle_commit_records(struct node *n, struct conn_request *req, const struct group *g,
                                    const char *member, int32_t generation, bool drop,
                                    struct coord_record *recs, bool *tomb, int *codes)
{
  size_t np = 0;
  const Cairn__Client__OffsetCommitPartition *const *parts = handle_commit_parts(req, &np);
  size_t nrec = 0;
  for (size_t i = 0; i < np; i++) {
    codes[i] = handle_commit_check_part(n, req->c, g, member, drop, parts[i]);
    if (codes[i] != 0) {
      continue;
    }
    codes[i] = HANDLE_COMMIT_SENT;
    recs[nrec].group = g->name;
    recs[nrec].topic = parts[i]->topic;
    recs[nrec].partition = parts[i]->partition;
    recs[nrec].offset = drop ? 0 : parts[i]->offset;
    recs[nrec].metadata = drop ? "" : parts[i]->metadata;
    recs[nrec].generation = generation;
    if (tomb != NULL) {
      tomb[nrec] = true;
    }
    nrec++;
  }
  return nrec;
}

/* Why a commit is refused before any record: 0, or its code. g is NULL
 * when there is no such group, or (create) when making it failed. */
static int handle_commit_refusal(struct node *n, struct conn_request *req, struct group *g,
                                 bool create, const char *member, const char *instance,
                                 int32_t generation, bool reset)
{
  if (g == NULL) {
    return create ? CAIRN_ENOMEM : CAIRN_EUNKNOWN_GROUP;
  }
  if (reset && g->nmembers > 0) {
    return CAIRN_EGROUP_NOT_EMPTY;
  }
  int rv = group_commit_check(g, member, instance, generation, uv_now(n->loop));
  size_t np = 0;
  (void)handle_commit_parts(req, &np);
  if (rv == 0 && (np == 0 || np > COORD_MAX_COMMIT_PARTITIONS)) {
    rv = np == 0 ? CAIRN_EBADREQUEST : CAIRN_ETOOLARGE;
  }
  return rv;
}

/* OffsetCommit (reset false), ResetOffsets (reset true) and its
 * delete_offsets (drop: tombstones, for a group that exists). */
static void handle_commit(struct node *n, struct conn_request *req, const char *group,
                          const char *member, const char *instance, int32_t generation, bool reset,
                          bool drop)
{
  struct handle_group_err he;
  struct coord_slot *slot = NULL;
  if (handle_group_lookup(n, group, &slot, &he) != 0) {
    handle_commit_answer(req, reset, &he, NULL, 0);
    return;
  }
  bool outside = member[0] == '\0' && generation == -1;
  bool create = outside && !drop; /* deleting offsets makes no group */
  struct group *g = coord_group(slot, group, create);
  int rv = handle_commit_refusal(n, req, g, create, member, instance, generation, reset);
  if (rv != 0) {
    handle_group_err_set(&he, rv, group, 0, NULL);
    if (rv == CAIRN_EGROUP_NOT_EMPTY) {
      snprintf(he.msg, sizeof he.msg,
               "group %.200s has %zu members: offsets are %s only while it is empty", group,
               g->nmembers, drop ? "deleted" : "reset");
    }
    handle_commit_answer(req, reset, &he, NULL, 0);
    return;
  }
  size_t np = 0;
  (void)handle_commit_parts(req, &np);
  struct handle_commit_op *op = calloc(1, sizeof *op);
  struct coord_record *recs = calloc(np, sizeof *recs);
  bool *tomb = drop ? calloc(np, sizeof *tomb) : NULL; /* a commit has none */
  int *codes = calloc(np, sizeof *codes);
  if (op == NULL || recs == NULL || (drop && tomb == NULL) || codes == NULL) {
    free(op);
    free(recs);
    free(tomb);
    free(codes);
    handle_group_err_set(&he, CAIRN_ENOMEM, group, 0, NULL);
    handle_commit_answer(req, reset, &he, NULL, 0);
    return;
  }
  op->req = req;
  op->reset = reset;
  op->n = np;
  op->codes = codes;
  snprintf(op->group, sizeof op->group, "%s", group);
  size_t nrec =
      handle_commit_records(n, req, g, member, outside ? -1 : generation, drop, recs, tomb, codes);
  rv =
      nrec > 0 ? coord_append(&n->coord, slot, recs, tomb, nrec, handle_commit_on_appended, op) : 0;
  free(recs);
  free(tomb);
  if (nrec == 0 || rv != 0) {
    op->status = rv == CAIRN_ENOTLEADER ? CAIRN_ENOT_COORDINATOR : rv;
    handle_commit_finish(op);
    handle_commit_free(op);
    return;
  }
  if (drop) {
    log_info("coord", "group %s: %zu committed offsets deleted by a request", group, nrec);
  }
  req->handler_data = op;
  conn_request_set_cancel(req, handle_commit_on_cancel);
}

void handle_offset_commit(struct node *n, struct conn_request *req)
{
  const Cairn__Client__OffsetCommitRequest *r = req->env->offset_commit_req;
  handle_commit(n, req, r->group, r->member_id, r->group_instance_id, r->generation, false, false);
}

/* ResetOffsets with delete_group: tombstones for every offset of g (which
 * has no members), answered once they are committed; the coordinator's
 * tick then forgets the group (no members, no offsets). */
static void handle_delete_group(struct node *n, struct conn_request *req, struct coord_slot *slot,
                                struct group *g)
{
  struct handle_group_err he;
  size_t np = g->noffsets;
  struct handle_commit_op *op = calloc(1, sizeof *op);
  struct coord_record *recs = calloc(np + 1, sizeof *recs);
  bool *tomb = calloc(np + 1, sizeof *tomb);
  int rv = op == NULL || recs == NULL || tomb == NULL ? CAIRN_ENOMEM : 0;
  if (rv == 0) {
    op->req = req;
    op->reset = true;
    snprintf(op->group, sizeof op->group, "%s", g->name);
    for (size_t k = 0; k < np; k++) {
      recs[k].group = g->name;
      recs[k].topic = g->topics[g->offsets[k].topic];
      recs[k].partition = g->offsets[k].partition;
      recs[k].metadata = "";
      tomb[k] = true;
    }
    rv = np > 0 ? coord_append(&n->coord, slot, recs, tomb, np, handle_commit_on_appended, op) : 0;
  }
  free(recs);
  free(tomb);
  if (rv != 0 || np == 0) {
    handle_group_err_set(&he, rv == CAIRN_ENOTLEADER ? CAIRN_ENOT_COORDINATOR : rv, g->name, 0,
                         NULL);
    handle_commit_answer(req, true, &he, NULL, 0);
    free(op);
    return;
  }
  g->dropping = true;
  log_info("coord", "group %s: deleted by a request: dropping %zu offsets", g->name, np);
  req->handler_data = op;
  conn_request_set_cancel(req, handle_commit_on_cancel);
}

void handle_reset_offsets(struct node *n, struct conn_request *req)
{
  const Cairn__Client__ResetOffsetsRequest *r = req->env->reset_offsets_req;
  if (!r->delete_group) {
    handle_commit(n, req, r->group, "", "", -1, true, r->delete_offsets);
    return;
  }
  struct handle_group_err he;
  struct coord_slot *slot = NULL;
  if (handle_group_lookup(n, r->group, &slot, &he) != 0) {
    handle_commit_answer(req, true, &he, NULL, 0);
    return;
  }
  struct group *g = coord_group(slot, r->group, false);
  int rv = g == NULL ? CAIRN_EUNKNOWN_GROUP : g->nmembers > 0 ? CAIRN_EGROUP_NOT_EMPTY : 0;
  if (rv != 0) {
    handle_group_err_set(&he, rv, r->group, 0, NULL);
    if (rv == CAIRN_EGROUP_NOT_EMPTY) {
      snprintf(he.msg, sizeof he.msg,
               "group %.200s has %zu members: a group is deleted only while it is empty "
               "(stop its consumers first)",
               r->group, g->nmembers);
    }
    handle_commit_answer(req, true, &he, NULL, 0);
    return;
  }
  handle_delete_group(n, req, slot, g);
}

/* ---- OffsetFetch ---- */

static void handle_fetch_offsets_answer(struct conn_request *req, const struct handle_group_err *he,
                                        Cairn__Client__OffsetFetchPartitionResult **res, size_t n)
{
  Cairn__Client__OffsetFetchResponse resp = CAIRN__CLIENT__OFFSET_FETCH_RESPONSE__INIT;
  Cairn__Client__Error e = he->e;
  resp.error = &e;
  resp.partitions = res;
  resp.n_partitions = n;
  resp.coordinator_id = he->coordinator_id;
  resp.coordinator_address = (char *)he->coordinator_address;
  Cairn__Client__Envelope env = CAIRN__CLIENT__ENVELOPE__INIT;
  env.body_case = CAIRN__CLIENT__ENVELOPE__BODY_OFFSET_FETCH_RESP;
  env.offset_fetch_resp = &resp;
  conn_respond(req, &env, NULL, 0);
}

void handle_offset_fetch(struct node *n, struct conn_request *req)
{
  const Cairn__Client__OffsetFetchRequest *r = req->env->offset_fetch_req;
  struct handle_group_err he;
  struct coord_slot *slot = NULL;
  if (handle_group_lookup(n, r->group, &slot, &he) != 0) {
    handle_fetch_offsets_answer(req, &he, NULL, 0);
    return;
  }
  const struct group *g = coord_group(slot, r->group, false);
  if (g == NULL) {
    handle_group_err_set(&he, CAIRN_EUNKNOWN_GROUP, r->group, 0, NULL);
    handle_fetch_offsets_answer(req, &he, NULL, 0);
    return;
  }
  size_t n_out = 0;
  for (size_t i = 0; i < r->n_partitions; i++) {
    n_out += r->partitions[i]->n_partitions;
  }
  bool all = r->n_partitions == 0;
  if (all) {
    n_out = g->noffsets;
  }
  Cairn__Client__OffsetFetchPartitionResult *res = calloc(n_out + 1, sizeof *res);
  Cairn__Client__OffsetFetchPartitionResult **ptrs = calloc(n_out + 1, sizeof *ptrs);
  Cairn__Client__Error *errs = calloc(n_out + 1, sizeof *errs);
  if (res == NULL || ptrs == NULL || errs == NULL) {
    handle_group_err_set(&he, CAIRN_ENOMEM, r->group, 0, NULL);
    handle_fetch_offsets_answer(req, &he, NULL, 0);
  } else {
    size_t k = 0;
    for (size_t i = 0; i < (all ? 1 : r->n_partitions); i++) {
      size_t np = all ? g->noffsets : r->partitions[i]->n_partitions;
      for (size_t j = 0; j < np; j++, k++) {
        cairn__client__offset_fetch_partition_result__init(&res[k]);
        cairn__client__error__init(&errs[k]);
        res[k].error = &errs[k];
        ptrs[k] = &res[k];
        const struct group_offset *o;
        if (all) {
          o = &g->offsets[j];
          res[k].topic = g->topics[o->topic];
          res[k].partition = o->partition;
        } else {
          res[k].topic = r->partitions[i]->topic;
          res[k].partition = r->partitions[i]->partitions[j];
          o = group_offset_find(g, res[k].topic, res[k].partition);
        }
        res[k].offset = o != NULL ? o->offset : -1;
        res[k].metadata = o != NULL ? o->metadata : "";
        res[k].commit_time_ms = o != NULL ? o->commit_time_ms : 0;
      }
    }
    handle_fetch_offsets_answer(req, &he, ptrs, n_out);
  }
  free(res);
  free(ptrs);
  free(errs);
}
