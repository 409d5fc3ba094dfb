/* kafka_handle_delete_acls.c - DeleteAcls v0-1: the native ListAcls
 * (DESCRIBE on the cluster) finds the entries each filter matches (as
 * Kafka bindings, kafka_acl.h); each entry matched by any filter is
 * removed once through the native RemoveAcl (the core operation behind
 * `cairn acl remove`: ALTER on the cluster, forwarded to the controller
 * leader), one after the other; every filter's result lists the bindings
 * it matched with the outcome of their removal. A filter with an UNKNOWN
 * element is INVALID_REQUEST and matches nothing. */
#include "kafka/kafka_acl.h"
#include "kafka/kafka_handlers.h"
#include "server/acl_wire.h"

#include <stdio.h>
#include <stdlib.h>

#define KAFKA_DA_MAX_FILTERS 1000
#define KAFKA_DA_MESSAGE_SIZE 240

struct kafka_da_filter {
  struct kafka_acl_spec f;
  int16_t err;
  char message[KAFKA_DA_MESSAGE_SIZE];
};

/* An entry some filter matched: removed once. */
struct kafka_da_victim {
  struct meta_acl a;
  struct kafka_acl_spec b; /* its Kafka view */
  int16_t err;
  char message[KAFKA_DA_MESSAGE_SIZE];
};

struct kafka_da_op {
  struct kafka_da_filter *filters;
  size_t nfilters;
  struct kafka_da_victim *victims;
  size_t nvictims;
  size_t next;
  Cairn__Client__Envelope env;
  Cairn__Client__ListAclsRequest list;
  Cairn__Client__RemoveAclRequest remove;
  Cairn__Client__AclEntry entry;
};

static void kafka_da_op_free(void *p)
{
  struct kafka_da_op *op = p;
  if (op != NULL) {
    free(op->filters);
    free(op->victims);
    free(op);
  }
}

static void kafka_da_put_match(struct kafka_buf *b, int16_t version,
                               const struct kafka_da_victim *v)
{
  kafka_put_err(b, v->err);
  kafka_put_string(b, v->err != 0 && v->message[0] != '\0' ? v->message : NULL);
  kafka_acl_put_resource(b, version, &v->b);
  kafka_acl_put_entry(b, &v->b);
}

static void kafka_da_answer(struct kafka_req *kr)
{
  struct kafka_da_op *op = kr->op;
  int16_t version = kr->h.api_version;
  struct kafka_buf b;
  kafka_buf_init(&b);
  kafka_put_i32(&b, 0); /* throttle_time_ms */
  kafka_put_array_len(&b, (int32_t)op->nfilters);
  for (size_t i = 0; i < op->nfilters; i++) {
    const struct kafka_da_filter *f = &op->filters[i];
    kafka_put_err(&b, f->err);
    kafka_put_string(&b, f->err != 0 && f->message[0] != '\0' ? f->message : NULL);
    size_t n = 0;
    for (size_t k = 0; f->err == 0 && k < op->nvictims; k++) {
      n += kafka_acl_matches(&f->f, &op->victims[k].b);
    }
    kafka_put_array_len(&b, (int32_t)n);
    for (size_t k = 0; n > 0 && k < op->nvictims; k++) {
      if (kafka_acl_matches(&f->f, &op->victims[k].b)) {
        kafka_da_put_match(&b, version, &op->victims[k]);
      }
    }
  }
  kafka_req_respond(kr, &b);
}

/* Every filter not refused yet gets err: the listing was refused. */
static void kafka_da_fail_all(struct kafka_req *kr, int16_t err, const char *msg)
{
  struct kafka_da_op *op = kr->op;
  for (size_t i = 0; i < op->nfilters; i++) {
    struct kafka_da_filter *f = &op->filters[i];
    if (f->err == 0) {
      f->err = err;
      snprintf(f->message, sizeof f->message, "%s", msg != NULL ? msg : "");
    }
  }
  kafka_da_answer(kr);
}

static void kafka_da_next(struct kafka_req *kr);

static void kafka_da_on_removed(struct kafka_req *kr, const Cairn__Client__Envelope *env,
                                const struct conn_part *parts, size_t nparts)
{
  (void)parts;
  (void)nparts;
  struct kafka_da_op *op = kr->op;
  struct kafka_da_victim *v = &op->victims[op->next++];
  v->err = kafka_cluster_err_from_wire(
      kafka_relay_code(env, CAIRN__CLIENT__ENVELOPE__BODY_REMOVE_ACL_RESP));
  const char *msg = kafka_relay_message(env);
  if (msg != NULL) {
    snprintf(v->message, sizeof v->message, "%s", msg);
  }
  kafka_da_next(kr);
}

static void kafka_da_next(struct kafka_req *kr)
{
  struct kafka_da_op *op = kr->op;
  if (op->next == op->nvictims) {
    kafka_da_answer(kr);
    return;
  }
  struct meta_acl *a = &op->victims[op->next].a;
  cairn__client__envelope__init(&op->env);
  cairn__client__remove_acl_request__init(&op->remove);
  acl_wire_of(a, &op->entry);
  op->remove.entry = &op->entry;
  op->env.body_case = CAIRN__CLIENT__ENVELOPE__BODY_REMOVE_ACL_REQ;
  op->env.remove_acl_req = &op->remove;
  kafka_req_relay(kr, CAIRN__CLIENT__API__API_REMOVE_ACL, &op->env, NULL, 0, kafka_da_on_removed);
}

/* Whether any filter still standing matches b. */
static bool kafka_da_matched(const struct kafka_da_op *op, const struct kafka_acl_spec *b)
{
  for (size_t i = 0; i < op->nfilters; i++) {
    if (op->filters[i].err == 0 && kafka_acl_matches(&op->filters[i].f, b)) {
      return true;
    }
  }
  return false;
}

static void kafka_da_on_listed(struct kafka_req *kr, const Cairn__Client__Envelope *env,
                               const struct conn_part *parts, size_t nparts)
{
  (void)parts;
  (void)nparts;
  struct kafka_da_op *op = kr->op;
  Cairn__Client__ErrorCode code =
      kafka_relay_code(env, CAIRN__CLIENT__ENVELOPE__BODY_LIST_ACLS_RESP);
  if (code != CAIRN__CLIENT__ERROR_CODE__OK) {
    kafka_da_fail_all(kr, kafka_cluster_err_from_wire(code), kafka_relay_message(env));
    return;
  }
  const Cairn__Client__ListAclsResponse *resp = env->list_acls_resp;
  op->victims = calloc(resp->n_entries + 1, sizeof *op->victims);
  if (op->victims == NULL) {
    kafka_da_fail_all(kr, KAFKA_ERR_UNKNOWN_SERVER, "out of memory");
    return;
  }
  for (size_t i = 0; i < resp->n_entries; i++) {
    const Cairn__Client__AclEntry *e = resp->entries[i];
    struct kafka_da_victim *v = &op->victims[op->nvictims];
    kafka_acl_of_entry(e, &v->b);
    if (!kafka_da_matched(op, &v->b)) {
      continue;
    }
    acl_wire_to(e, &v->a);
    op->nvictims++;
  }
  kafka_da_next(kr);
}

void kafka_handle_delete_acls(struct kafka_req *kr)
{
  struct kafka_reader *r = &kr->body;
  struct kafka_da_op *op = calloc(1, sizeof *op);
  if (op == NULL) {
    kafka_req_malformed(kr);
    return;
  }
  kr->op = op;
  kr->op_free = kafka_da_op_free;
  /* type, name, principal, host (nullable: 2 bytes each), operation,
   * permission: 9 bytes at least */
  int32_t n =
      kafka_get_array_alloc(r, 9, KAFKA_DA_MAX_FILTERS, sizeof *op->filters, (void **)&op->filters);
  if (n < 0) {
    kafka_req_malformed(kr);
    return;
  }
  for (int32_t i = 0; i < n && r->err == 0; i++) {
    struct kafka_da_filter *f = &op->filters[op->nfilters++];
    kafka_acl_get_spec(r, kr->h.api_version, true, &f->f);
    if (r->err == 0 && !kafka_acl_filter_check(&f->f, f->message, sizeof f->message)) {
      f->err = KAFKA_ERR_INVALID_REQUEST;
    }
  }
  if (r->err != 0) {
    kafka_req_malformed(kr);
    return;
  }
  cairn__client__envelope__init(&op->env);
  cairn__client__list_acls_request__init(&op->list);
  op->env.body_case = CAIRN__CLIENT__ENVELOPE__BODY_LIST_ACLS_REQ;
  op->env.list_acls_req = &op->list;
  kafka_req_relay(kr, CAIRN__CLIENT__API__API_LIST_ACLS, &op->env, NULL, 0, kafka_da_on_listed);
}
