/* kafka_handle_describe_acls.c - DescribeAcls v0-1: the native ListAcls
 * (the core operation behind `cairn acl list`: DESCRIBE on the cluster,
 * answered from the node's copy of the metadata), its entries seen as
 * Kafka bindings (kafka_acl.h), kept when the request's filter matches
 * them, grouped by resource (type, pattern, name). */
#include "kafka/kafka_acl.h"
#include "kafka/kafka_handlers.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct kafka_dsa_op {
  struct kafka_acl_spec filter;
  Cairn__Client__Envelope env;
  Cairn__Client__ListAclsRequest list;
};

static void kafka_dsa_op_free(void *p)
{
  free(p);
}

static void kafka_dsa_answer_err(struct kafka_req *kr, int16_t err, const char *msg)
{
  struct kafka_buf b;
  kafka_buf_init(&b);
  kafka_put_i32(&b, 0); /* throttle_time_ms */
  kafka_put_err(&b, err);
  kafka_put_string(&b, msg);
  kafka_put_array_len(&b, 0);
  kafka_req_respond(kr, &b);
}

/* Resources in one order: type, then pattern, then name. */
static int kafka_dsa_cmp(const void *x, const void *y)
{
  const struct kafka_acl_spec *a = x, *b = y;
  if (a->resource_type != b->resource_type) {
    return a->resource_type < b->resource_type ? -1 : 1;
  }
  if (a->pattern != b->pattern) {
    return a->pattern < b->pattern ? -1 : 1;
  }
  return strcmp(a->name, b->name);
}

/* Encodes the matching bindings (sorted) grouped by resource. */
static void kafka_dsa_put(struct kafka_buf *b, int16_t version, const struct kafka_acl_spec *m,
                          size_t n)
{
  size_t groups = 0;
  for (size_t i = 0; i < n; i++) {
    groups += i == 0 || kafka_dsa_cmp(&m[i - 1], &m[i]) != 0;
  }
  kafka_put_array_len(b, (int32_t)groups);
  for (size_t i = 0; i < n;) {
    size_t j = i + 1;
    while (j < n && kafka_dsa_cmp(&m[i], &m[j]) == 0) {
      j++;
    }
    kafka_acl_put_resource(b, version, &m[i]);
    kafka_put_array_len(b, (int32_t)(j - i));
    for (size_t k = i; k < j; k++) {
      kafka_acl_put_entry(b, &m[k]);
    }
    i = j;
  }
}

static void kafka_dsa_on_answer(struct kafka_req *kr, const Cairn__Client__Envelope *env,
                                const struct conn_part *parts, size_t nparts)
{
  (void)parts;
  (void)nparts;
  struct kafka_dsa_op *op = kr->op;
  Cairn__Client__ErrorCode code =
      kafka_relay_code(env, CAIRN__CLIENT__ENVELOPE__BODY_LIST_ACLS_RESP);
  if (code != CAIRN__CLIENT__ERROR_CODE__OK) {
    kafka_dsa_answer_err(kr, kafka_cluster_err_from_wire(code), kafka_relay_message(env));
    return;
  }
  const Cairn__Client__ListAclsResponse *resp = env->list_acls_resp;
  struct kafka_acl_spec *m = calloc(resp->n_entries + 1, sizeof *m);
  if (m == NULL) {
    kafka_dsa_answer_err(kr, KAFKA_ERR_UNKNOWN_SERVER, "out of memory");
    return;
  }
  size_t n = 0;
  for (size_t i = 0; i < resp->n_entries; i++) {
    kafka_acl_of_entry(resp->entries[i], &m[n]);
    n += kafka_acl_matches(&op->filter, &m[n]);
  }
  qsort(m, n, sizeof *m, kafka_dsa_cmp);
  struct kafka_buf b;
  kafka_buf_init(&b);
  kafka_put_i32(&b, 0); /* throttle_time_ms */
  kafka_put_err(&b, KAFKA_ERR_NONE);
  kafka_put_string(&b, NULL);
  kafka_dsa_put(&b, kr->h.api_version, m, n);
  free(m);
  kafka_req_respond(kr, &b);
}

void kafka_handle_describe_acls(struct kafka_req *kr)
{
  struct kafka_dsa_op *op = calloc(1, sizeof *op);
  if (op == NULL) {
    kafka_req_malformed(kr);
    return;
  }
  kr->op = op;
  kr->op_free = kafka_dsa_op_free;
  kafka_acl_get_spec(&kr->body, kr->h.api_version, true, &op->filter);
  if (kr->body.err != 0) {
    kafka_req_malformed(kr);
    return;
  }
  char why[200];
  if (!kafka_acl_filter_check(&op->filter, why, sizeof why)) {
    kafka_dsa_answer_err(kr, KAFKA_ERR_INVALID_REQUEST, why);
    return;
  }
  cairn__client__envelope__init(&op->env);
  cairn__client__list_acls_request__init(&op->list);
  op->env.body_case = CAIRN__CLIENT__ENVELOPE__BODY_LIST_ACLS_REQ;
  op->env.list_acls_req = &op->list;
  kafka_req_relay(kr, CAIRN__CLIENT__API__API_LIST_ACLS, &op->env, NULL, 0, kafka_dsa_on_answer);
}
