/* kafka_handle_metadata.c - Metadata v0-5 from the native Metadata answer
 * (this node's copy of the metadata, completed with what it knows first
 * hand of the partitions it hosts): every node with a Kafka address as a
 * broker, the controller leader as controller, every partition's leader,
 * replicas and in-sync replicas. Topic creation through Metadata
 * (--kafka-auto-create-topics) creates each unknown topic with the native
 * CreateTopic, one after the other, and answers LEADER_NOT_AVAILABLE for
 * it: the client asks again once the partitions have leaders. */
#include "kafka/kafka_handlers.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define KAFKA_MD_MAX_TOPICS 10000 /* names one request may list */
#define KAFKA_MD_AUTO_PARTITIONS 1

struct kafka_md_op {
  Cairn__Client__Envelope env;
  Cairn__Client__MetadataRequest mr;
  char **names; /* requested topics, NUL-terminated; NULL: all */
  size_t nnames;
  bool allow_auto;
  /* auto creation */
  Cairn__Client__CreateTopicRequest ct;
  bool *create; /* per name: create it */
  size_t next_create;
  bool created_any;
};

static void kafka_md_op_free(void *p)
{
  struct kafka_md_op *op = p;
  for (size_t i = 0; i < op->nnames; i++) {
    free(op->names[i]);
  }
  free(op->names);
  free(op->create);
  free(op);
}

static int32_t kafka_md_node_id(uint64_t id)
{
  return id == 0 || id > INT32_MAX ? -1 : (int32_t)id;
}

bool kafka_addr_split(const char *addr, char *host, size_t cap, int32_t *port)
{
  const char *colon = strrchr(addr, ':');
  if (colon == NULL || colon == addr) {
    return false;
  }
  const char *h = addr;
  size_t hn = (size_t)(colon - addr);
  if (h[0] == '[' && hn >= 2 && h[hn - 1] == ']') {
    h++;
    hn -= 2;
  }
  if (hn >= cap) {
    return false;
  }
  memcpy(host, h, hn);
  host[hn] = '\0';
  *port = atoi(colon + 1);
  return *port > 0;
}

static void kafka_md_brokers(struct kafka_buf *b, int16_t v,
                             const Cairn__Client__MetadataResponse *r)
{
  size_t at = kafka_buf_reserve(b, 4);
  int32_t count = 0;
  for (size_t i = 0; r != NULL && i < r->n_nodes; i++) {
    const Cairn__Client__NodeInfo *ni = r->nodes[i];
    char host[CONFIG_ADDR_MAX + 1];
    int32_t port;
    if (ni->kafka_address == NULL || strcmp(ni->state, "removed") == 0 ||
        kafka_md_node_id(ni->id) < 0 ||
        !kafka_addr_split(ni->kafka_address, host, sizeof host, &port)) {
      continue;
    }
    kafka_put_i32(b, (int32_t)ni->id);
    kafka_put_string(b, host);
    kafka_put_i32(b, port);
    if (v >= 1) {
      kafka_put_string(b, ni->rack != NULL && ni->rack[0] != '\0' ? ni->rack : NULL);
    }
    count++;
  }
  kafka_buf_set_i32(b, at, count);
}

static void kafka_md_id_array(struct kafka_buf *b, const uint64_t *ids, size_t n)
{
  kafka_put_array_len(b, (int32_t)n);
  for (size_t i = 0; i < n; i++) {
    kafka_put_i32(b, kafka_md_node_id(ids[i]));
  }
}

static void kafka_md_topic(struct kafka_buf *b, int16_t v, const char *name,
                           const Cairn__Client__TopicInfo *ti, int16_t err)
{
  if (ti != NULL && ti->error != NULL && ti->error->code != 0) {
    err = kafka_err_from_wire(ti->error->code);
  }
  kafka_put_err(b, err);
  kafka_put_string(b, name);
  if (v >= 1) {
    kafka_put_bool(b, strncmp(name, "__", 2) == 0); /* Cairn's own (__cairn_offsets) */
  }
  if (err != KAFKA_ERR_NONE || ti == NULL) {
    kafka_put_array_len(b, 0);
    return;
  }
  kafka_put_array_len(b, (int32_t)ti->n_partitions);
  for (size_t i = 0; i < ti->n_partitions; i++) {
    const Cairn__Client__PartitionInfo *pi = ti->partitions[i];
    int32_t leader = kafka_md_node_id(pi->leader_id);
    kafka_put_err(b, leader < 0 ? KAFKA_ERR_LEADER_NOT_AVAILABLE : KAFKA_ERR_NONE);
    kafka_put_i32(b, (int32_t)pi->partition);
    kafka_put_i32(b, leader);
    kafka_md_id_array(b, pi->replicas, pi->n_replicas);
    kafka_md_id_array(b, pi->isr, pi->n_isr);
    if (v >= 5) {
      kafka_put_array_len(b, 0); /* offline_replicas: the isr says who is behind */
    }
  }
}

static const Cairn__Client__TopicInfo *kafka_md_find(const Cairn__Client__MetadataResponse *r,
                                                     const char *name)
{
  for (size_t i = 0; r != NULL && i < r->n_topics; i++) {
    if (r->topics[i]->name != NULL && strcmp(r->topics[i]->name, name) == 0) {
      return r->topics[i];
    }
  }
  return NULL;
}

static void kafka_md_answer(struct kafka_req *kr, const Cairn__Client__MetadataResponse *r)
{
  struct kafka_md_op *op = kr->op;
  int16_t v = kr->h.api_version;
  struct kafka_buf b;
  kafka_buf_init(&b);
  if (v >= 3) {
    kafka_put_i32(&b, 0); /* throttle_time_ms */
  }
  kafka_md_brokers(&b, v, r);
  if (v >= 2) {
    kafka_put_string(
        &b, r != NULL && r->cluster_id != NULL && r->cluster_id[0] != '\0' ? r->cluster_id : NULL);
  }
  if (v >= 1) {
    kafka_put_i32(&b, r != NULL ? kafka_md_node_id(r->controller_id) : -1);
  }
  if (op->names == NULL) {
    kafka_put_array_len(&b, r != NULL ? (int32_t)r->n_topics : 0);
    for (size_t i = 0; r != NULL && i < r->n_topics; i++) {
      kafka_md_topic(&b, v, r->topics[i]->name, r->topics[i], KAFKA_ERR_NONE);
    }
  } else {
    kafka_put_array_len(&b, (int32_t)op->nnames);
    for (size_t i = 0; i < op->nnames; i++) {
      const Cairn__Client__TopicInfo *ti = kafka_md_find(r, op->names[i]);
      int16_t err = r == NULL                             ? KAFKA_ERR_UNKNOWN_SERVER
                    : op->create != NULL && op->create[i] ? KAFKA_ERR_LEADER_NOT_AVAILABLE
                    : ti == NULL                          ? KAFKA_ERR_UNKNOWN_TOPIC_OR_PARTITION
                                                          : KAFKA_ERR_NONE;
      kafka_md_topic(&b, v, op->names[i], err == KAFKA_ERR_LEADER_NOT_AVAILABLE ? NULL : ti, err);
    }
  }
  kafka_req_respond(kr, &b);
}

static void kafka_md_on_answer(struct kafka_req *kr, const Cairn__Client__Envelope *env,
                               const struct conn_part *parts, size_t nparts);

/* Creates the next topic marked for creation, or asks the metadata again
 * once all are done. */
static void kafka_md_create_next(struct kafka_req *kr)
{
  struct kafka_md_op *op = kr->op;
  while (op->next_create < op->nnames && !op->create[op->next_create]) {
    op->next_create++;
  }
  if (op->next_create == op->nnames) {
    kafka_req_relay(kr, CAIRN__CLIENT__API__API_METADATA, &op->env, NULL, 0, kafka_md_on_answer);
    return;
  }
  cairn__client__create_topic_request__init(&op->ct);
  op->ct.name = op->names[op->next_create];
  op->ct.partitions = KAFKA_MD_AUTO_PARTITIONS;
  op->ct.replication_factor = 0; /* the controller's default */
  op->ct.ready_timeout_ms = -1;   /* answered LEADER_NOT_AVAILABLE: the client asks again */
  cairn__client__envelope__init(&op->env);
  op->env.body_case = CAIRN__CLIENT__ENVELOPE__BODY_CREATE_TOPIC_REQ;
  op->env.create_topic_req = &op->ct;
  kafka_req_relay(kr, CAIRN__CLIENT__API__API_CREATE_TOPIC, &op->env, NULL, 0, kafka_md_on_answer);
}

static void kafka_md_on_answer(struct kafka_req *kr, const Cairn__Client__Envelope *env,
                               const struct conn_part *parts, size_t nparts)
{
  (void)parts;
  (void)nparts;
  struct kafka_md_op *op = kr->op;
  if (env != NULL && env->body_case == CAIRN__CLIENT__ENVELOPE__BODY_CREATE_TOPIC_RESP) {
    op->next_create++; /* whatever the outcome: the client asks again */
    cairn__client__envelope__init(&op->env);
    op->env.body_case = CAIRN__CLIENT__ENVELOPE__BODY_METADATA_REQ;
    op->env.metadata_req = &op->mr;
    kafka_md_create_next(kr);
    return;
  }
  const Cairn__Client__MetadataResponse *r =
      env != NULL && env->body_case == CAIRN__CLIENT__ENVELOPE__BODY_METADATA_RESP
          ? env->metadata_resp
          : NULL;
  if (r != NULL && op->allow_auto && op->names != NULL && op->create == NULL) {
    op->create = calloc(op->nnames, sizeof *op->create);
    bool any = false;
    for (size_t i = 0; op->create != NULL && i < op->nnames; i++) {
      op->create[i] = kafka_md_find(r, op->names[i]) == NULL && !r->behind;
      any = any || op->create[i];
    }
    if (any) {
      kafka_md_create_next(kr);
      return;
    }
  }
  kafka_md_answer(kr, r);
}

void kafka_handle_metadata(struct kafka_req *kr)
{
  int16_t v = kr->h.api_version;
  struct kafka_md_op *op = calloc(1, sizeof *op);
  if (op == NULL) {
    kafka_req_close(kr);
    return;
  }
  kr->op = op;
  kr->op_free = kafka_md_op_free;
  int32_t n = kafka_get_array_len(&kr->body, 2);
  if (kr->body.err == 0 && n > KAFKA_MD_MAX_TOPICS) {
    kr->body.err = -1;
  }
  /* v0: an empty list means every topic; v1+: null does. */
  bool all = n < 0 || (v == 0 && n == 0);
  if (!all && kr->body.err == 0) {
    op->names = calloc(n > 0 ? (size_t)n : 1, sizeof *op->names);
    if (op->names == NULL) {
      kafka_req_close(kr);
      return;
    }
    for (int32_t i = 0; i < n && kr->body.err == 0; i++) {
      struct kafka_str s = kafka_get_string(&kr->body);
      char *name = s.ptr != NULL ? strndup((const char *)s.ptr, s.len) : strdup("");
      if (name == NULL) {
        break;
      }
      op->names[op->nnames++] = name;
    }
  }
  bool allow = true;
  if (v >= 4) {
    allow = kafka_get_i8(&kr->body) != 0;
  }
  if (kr->body.err != 0 || (!all && op->nnames != (size_t)n)) {
    kafka_req_malformed(kr);
    return;
  }
  op->allow_auto = allow && kr->n->cfg.kafka_auto_create_topics != 0;
  cairn__client__envelope__init(&op->env);
  cairn__client__metadata_request__init(&op->mr);
  op->mr.topics = op->names;
  op->mr.n_topics = op->nnames;
  op->env.body_case = CAIRN__CLIENT__ENVELOPE__BODY_METADATA_REQ;
  op->env.metadata_req = &op->mr;
  kafka_req_relay(kr, CAIRN__CLIENT__API__API_METADATA, &op->env, NULL, 0, kafka_md_on_answer);
}
