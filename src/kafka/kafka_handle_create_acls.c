/* kafka_handle_create_acls.c - CreateAcls v0-1: each binding mapped to a
 * Cairn access control entry (kafka_acl.h) and added through the native
 * AddAcl (the core operation behind `cairn acl add`: ALTER on the cluster,
 * forwarded to the controller leader, answered once applied), one after
 * the other. A binding Cairn cannot hold is INVALID_REQUEST with why; an
 * entry that exists already is no change, answered without error (as
 * Kafka does). */
#include "kafka/kafka_acl.h"
#include "kafka/kafka_handlers.h"
#include "server/acl_wire.h"

#include <stdio.h>
#include <stdlib.h>

#define KAFKA_CA_MAX 1000
#define KAFKA_CA_MESSAGE_SIZE 240

struct kafka_ca_item {
  struct meta_acl a;
  int16_t err;
  char message[KAFKA_CA_MESSAGE_SIZE];
};

struct kafka_ca_op {
  struct kafka_ca_item *items;
  size_t nitems;
  size_t next;
  Cairn__Client__Envelope env;
  Cairn__Client__AddAclRequest add;
  Cairn__Client__AclEntry entry;
};

static void kafka_ca_op_free(void *p)
{
  struct kafka_ca_op *op = p;
  if (op != NULL) {
    free(op->items);
    free(op);
  }
}

static void kafka_ca_answer(struct kafka_req *kr)
{
  struct kafka_ca_op *op = kr->op;
  struct kafka_buf b;
  kafka_buf_init(&b);
  kafka_put_i32(&b, 0); /* throttle_time_ms */
  kafka_put_array_len(&b, (int32_t)op->nitems);
  for (size_t i = 0; i < op->nitems; i++) {
    const struct kafka_ca_item *it = &op->items[i];
    kafka_put_err(&b, it->err);
    kafka_put_string(&b, it->err != 0 && it->message[0] != '\0' ? it->message : NULL);
  }
  kafka_req_respond(kr, &b);
}

static void kafka_ca_next(struct kafka_req *kr);

static void kafka_ca_on_answer(struct kafka_req *kr, const Cairn__Client__Envelope *env,
                               const struct conn_part *parts, size_t nparts)
{
  (void)parts;
  (void)nparts;
  struct kafka_ca_op *op = kr->op;
  struct kafka_ca_item *it = &op->items[op->next++];
  it->err = kafka_cluster_err_from_wire(
      kafka_relay_code(env, CAIRN__CLIENT__ENVELOPE__BODY_ADD_ACL_RESP));
  const char *msg = kafka_relay_message(env);
  if (msg != NULL) {
    snprintf(it->message, sizeof it->message, "%s", msg);
  }
  kafka_ca_next(kr);
}

static void kafka_ca_next(struct kafka_req *kr)
{
  struct kafka_ca_op *op = kr->op;
  while (op->next < op->nitems && op->items[op->next].err != 0) {
    op->next++;
  }
  if (op->next == op->nitems) {
    kafka_ca_answer(kr);
    return;
  }
  struct meta_acl *a = &op->items[op->next].a;
  cairn__client__envelope__init(&op->env);
  cairn__client__add_acl_request__init(&op->add);
  acl_wire_of(a, &op->entry);
  op->add.entry = &op->entry;
  op->env.body_case = CAIRN__CLIENT__ENVELOPE__BODY_ADD_ACL_REQ;
  op->env.add_acl_req = &op->add;
  kafka_req_relay(kr, CAIRN__CLIENT__API__API_ADD_ACL, &op->env, NULL, 0, kafka_ca_on_answer);
}

void kafka_handle_create_acls(struct kafka_req *kr)
{
  struct kafka_reader *r = &kr->body;
  struct kafka_ca_op *op = calloc(1, sizeof *op);
  if (op == NULL) {
    kafka_req_malformed(kr);
    return;
  }
  kr->op = op;
  kr->op_free = kafka_ca_op_free;
  /* type, name, principal, host, operation, permission: 9 bytes at least */
  int32_t n = kafka_get_array_alloc(r, 9, KAFKA_CA_MAX, sizeof *op->items, (void **)&op->items);
  if (n < 0) {
    kafka_req_malformed(kr);
    return;
  }
  for (int32_t i = 0; i < n && r->err == 0; i++) {
    struct kafka_ca_item *it = &op->items[op->nitems++];
    struct kafka_acl_spec spec;
    kafka_acl_get_spec(r, kr->h.api_version, false, &spec);
    if (r->err == 0 && !kafka_acl_to_entry(&spec, &it->a, it->message, sizeof it->message)) {
      it->err = KAFKA_ERR_INVALID_REQUEST;
    }
  }
  if (r->err != 0) {
    kafka_req_malformed(kr);
    return;
  }
  kafka_ca_next(kr);
}
