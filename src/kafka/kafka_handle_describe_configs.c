/* kafka_handle_describe_configs.c - DescribeConfigs v0-2: a topic's
 * configs from the native DescribeTopic (authorization DESCRIBE topic, as
 * the native request), mapped to Kafka's names; the asked node's own
 * settings as a broker resource (DESCRIBE cluster). Other resource types
 * get INVALID_REQUEST; synonyms are never listed (docs/kafka.md). */
#include "kafka/kafka_handlers.h"

#include "common/err.h"
#include "format/batch.h"
#include "server/authz.h"
#include "storage/plog.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define KAFKA_DC_MAX_RESOURCES 1000
#define KAFKA_DC_MAX_KEYS 1000
#define KAFKA_DC_MESSAGE_SIZE 320

enum kafka_dc_type { KAFKA_DC_TOPIC = 2, KAFKA_DC_BROKER = 4 };

/* Kafka's config_source (v1+). */
enum kafka_dc_source {
  KAFKA_DC_DYNAMIC_TOPIC = 1,
  KAFKA_DC_STATIC_BROKER = 4,
  KAFKA_DC_DEFAULT = 5,
};

struct kafka_dc_res {
  int8_t type;
  struct kafka_str name;  /* borrowed from the request */
  struct kafka_str *keys; /* owned; NULL with nkeys -1: every config */
  int32_t nkeys;
  int16_t err;
  char message[KAFKA_DC_MESSAGE_SIZE];
  Cairn__Client__TopicConfig cfg; /* a topic's, once described */
  uint32_t rf;
};

struct kafka_dc_op {
  struct kafka_dc_res *res;
  size_t nres;
  size_t next;
  Cairn__Client__Envelope env;
  Cairn__Client__DescribeTopicRequest dt;
  char topic[KAFKA_TOPIC_MAX + 1];
};

static void kafka_dc_op_free(void *p)
{
  struct kafka_dc_op *op = p;
  if (op == NULL) {
    return;
  }
  for (size_t i = 0; i < op->nres; i++) {
    free(op->res[i].keys);
  }
  free(op->res);
  free(op);
}

/* ---- encoding ---- */

struct kafka_dc_out {
  struct kafka_buf *b;
  int16_t version;
  const struct kafka_dc_res *r;
  int32_t count; /* entries written */
};

static bool kafka_dc_wanted(const struct kafka_dc_res *r, const char *name)
{
  if (r->nkeys < 0) {
    return true;
  }
  size_t len = strlen(name);
  for (int32_t i = 0; i < r->nkeys; i++) {
    if (r->keys[i].len == len && memcmp(r->keys[i].ptr, name, len) == 0) {
      return true;
    }
  }
  return false;
}

static void kafka_dc_entry(struct kafka_dc_out *o, const char *name, const char *value,
                           bool read_only, enum kafka_dc_source source)
{
  if (!kafka_dc_wanted(o->r, name)) {
    return;
  }
  kafka_put_string(o->b, name);
  kafka_put_string(o->b, value);
  kafka_put_bool(o->b, read_only);
  if (o->version == 0) {
    kafka_put_bool(o->b, source == KAFKA_DC_DEFAULT); /* is_default */
  } else {
    kafka_put_i8(o->b, (int8_t)source);
  }
  kafka_put_bool(o->b, false); /* is_sensitive */
  if (o->version >= 1) {
    kafka_put_array_len(o->b, 0); /* synonyms */
  }
  o->count++;
}

static void kafka_dc_num(struct kafka_dc_out *o, const char *name, int64_t v, bool read_only,
                         enum kafka_dc_source source)
{
  char num[24];
  snprintf(num, sizeof num, "%" PRId64, v);
  kafka_dc_entry(o, name, num, read_only, source);
}

/* Cairn's topic configuration under Kafka's names: 0 means unlimited
 * (Kafka's -1) for the retentions, the node's default for the sizes. */
static void kafka_dc_topic_configs(struct kafka_dc_out *o)
{
  const Cairn__Client__TopicConfig *c = &o->r->cfg;
  struct plog_opts d;
  plog_opts_default(&d);
  kafka_dc_num(o, "retention.ms", c->retention_ms > 0 ? c->retention_ms : -1, false,
               c->retention_ms > 0 ? KAFKA_DC_DYNAMIC_TOPIC : KAFKA_DC_DEFAULT);
  kafka_dc_num(o, "retention.bytes", c->retention_bytes > 0 ? c->retention_bytes : -1, false,
               c->retention_bytes > 0 ? KAFKA_DC_DYNAMIC_TOPIC : KAFKA_DC_DEFAULT);
  kafka_dc_num(o, "segment.bytes",
               (int64_t)(c->segment_bytes != 0 ? c->segment_bytes : d.segment_bytes), false,
               c->segment_bytes != 0 ? KAFKA_DC_DYNAMIC_TOPIC : KAFKA_DC_DEFAULT);
  kafka_dc_num(o, "max.message.bytes",
               (int64_t)(c->max_batch_bytes != 0 ? c->max_batch_bytes : d.max_batch_bytes), false,
               c->max_batch_bytes != 0 ? KAFKA_DC_DYNAMIC_TOPIC : KAFKA_DC_DEFAULT);
  /* What Cairn does and cannot be changed: */
  kafka_dc_entry(o, "cleanup.policy", "delete", true, KAFKA_DC_DEFAULT);
  kafka_dc_entry(o, "compression.type", "producer", true, KAFKA_DC_DEFAULT);
  kafka_dc_entry(o, "message.timestamp.type", "CreateTime", true, KAFKA_DC_DEFAULT);
  /* A batch commits on a majority of the replicas. */
  kafka_dc_num(o, "min.insync.replicas", o->r->rf / 2 + 1, true, KAFKA_DC_DEFAULT);
}

static void kafka_dc_broker_configs(struct kafka_dc_out *o, const struct config *cfg)
{
  char v[CONFIG_PATH_MAX + 32];
  kafka_dc_num(o, "broker.id", (int64_t)cfg->node_id, true, KAFKA_DC_STATIC_BROKER);
  kafka_dc_entry(o, "broker.rack", cfg->rack[0] != '\0' ? cfg->rack : NULL, true,
                 KAFKA_DC_STATIC_BROKER);
  kafka_dc_entry(o, "log.dirs", cfg->data_dir, true, KAFKA_DC_STATIC_BROKER);
  snprintf(v, sizeof v, "PLAINTEXT://%s", cfg->kafka_listen.str);
  kafka_dc_entry(o, "listeners", v, true, KAFKA_DC_STATIC_BROKER);
  snprintf(v, sizeof v, "PLAINTEXT://%s", cfg->kafka_advertise.str);
  kafka_dc_entry(o, "advertised.listeners", v, true, KAFKA_DC_STATIC_BROKER);
  kafka_dc_entry(o, "auto.create.topics.enable", cfg->kafka_auto_create_topics ? "true" : "false",
                 true, KAFKA_DC_STATIC_BROKER);
  struct plog_opts d;
  plog_opts_default(&d);
  kafka_dc_num(o, "log.segment.bytes", (int64_t)d.segment_bytes, true, KAFKA_DC_DEFAULT);
  kafka_dc_num(o, "message.max.bytes", (int64_t)d.max_batch_bytes, true, KAFKA_DC_DEFAULT);
  kafka_dc_num(o, "log.retention.ms", -1, true, KAFKA_DC_DEFAULT);
  kafka_dc_num(o, "log.retention.bytes", -1, true, KAFKA_DC_DEFAULT);
  kafka_dc_num(o, "offsets.topic.num.partitions", cfg->offsets_partitions, true,
               KAFKA_DC_STATIC_BROKER);
  kafka_dc_num(o, "offsets.retention.minutes", cfg->offsets_retention_ms / 60000, true,
               KAFKA_DC_STATIC_BROKER);
  kafka_dc_num(o, "socket.request.max.bytes", (int64_t)cfg->max_frame_bytes, true,
               KAFKA_DC_STATIC_BROKER);
}

static void kafka_dc_answer(struct kafka_req *kr)
{
  struct kafka_dc_op *op = kr->op;
  struct kafka_buf b;
  kafka_buf_init(&b);
  kafka_put_i32(&b, 0); /* throttle_time_ms */
  kafka_put_array_len(&b, (int32_t)op->nres);
  for (size_t i = 0; i < op->nres; i++) {
    const struct kafka_dc_res *r = &op->res[i];
    kafka_put_err(&b, r->err);
    kafka_put_string(&b, r->err != 0 && r->message[0] != '\0' ? r->message : NULL);
    kafka_put_i8(&b, r->type);
    kafka_put_kstr(&b, r->name);
    size_t at = kafka_buf_reserve(&b, 4);
    struct kafka_dc_out o = {.b = &b, .version = kr->h.api_version, .r = r};
    if (r->err == 0 && r->type == KAFKA_DC_TOPIC) {
      kafka_dc_topic_configs(&o);
    } else if (r->err == 0) {
      kafka_dc_broker_configs(&o, &kr->n->cfg);
    }
    if (at != SIZE_MAX) {
      kafka_buf_set_i32(&b, at, o.count);
    }
  }
  kafka_req_respond(kr, &b);
}

/* ---- the topics, one native DescribeTopic each ---- */

static void kafka_dc_next(struct kafka_req *kr);

static void kafka_dc_on_answer(struct kafka_req *kr, const Cairn__Client__Envelope *env,
                               const struct conn_part *parts, size_t nparts)
{
  (void)parts;
  (void)nparts;
  struct kafka_dc_op *op = kr->op;
  struct kafka_dc_res *r = &op->res[op->next++];
  Cairn__Client__ErrorCode code =
      kafka_relay_code(env, CAIRN__CLIENT__ENVELOPE__BODY_DESCRIBE_TOPIC_RESP);
  const Cairn__Client__TopicInfo *t =
      code == CAIRN__CLIENT__ERROR_CODE__OK ? env->describe_topic_resp->topic : NULL;
  if (code == CAIRN__CLIENT__ERROR_CODE__OK && t == NULL) {
    code = CAIRN__CLIENT__ERROR_CODE__UNKNOWN_TOPIC;
  }
  r->err = kafka_err_from_wire(code);
  if (t != NULL) {
    cairn__client__topic_config__init(&r->cfg);
    if (t->config != NULL) {
      r->cfg.retention_ms = t->config->retention_ms;
      r->cfg.retention_bytes = t->config->retention_bytes;
      r->cfg.segment_bytes = t->config->segment_bytes;
      r->cfg.max_batch_bytes = t->config->max_batch_bytes;
    }
    r->rf = t->replication_factor;
  }
  kafka_dc_next(kr);
}

static void kafka_dc_next(struct kafka_req *kr)
{
  struct kafka_dc_op *op = kr->op;
  while (op->next < op->nres &&
         (op->res[op->next].err != 0 || op->res[op->next].type != KAFKA_DC_TOPIC)) {
    op->next++;
  }
  if (op->next == op->nres) {
    kafka_dc_answer(kr);
    return;
  }
  struct kafka_dc_res *r = &op->res[op->next];
  memcpy(op->topic, r->name.ptr, r->name.len);
  op->topic[r->name.len] = '\0';
  cairn__client__envelope__init(&op->env);
  cairn__client__describe_topic_request__init(&op->dt);
  op->dt.name = op->topic;
  op->env.body_case = CAIRN__CLIENT__ENVELOPE__BODY_DESCRIBE_TOPIC_REQ;
  op->env.describe_topic_req = &op->dt;
  kafka_req_relay(kr, CAIRN__CLIENT__API__API_DESCRIBE_TOPIC, &op->env, NULL, 0,
                  kafka_dc_on_answer);
}

/* ---- decoding ---- */

/* A resource's error found before any core call (bad name, type, broker). */
static void kafka_dc_check(struct kafka_req *kr, struct kafka_dc_res *r)
{
  char name[KAFKA_TOPIC_MAX + 1];
  if (r->type == KAFKA_DC_TOPIC) {
    if (!kafka_topic_name(r->name, name)) {
      r->err = KAFKA_ERR_INVALID_TOPIC;
    }
    return;
  }
  if (r->type != KAFKA_DC_BROKER) {
    r->err = KAFKA_ERR_INVALID_REQUEST;
    snprintf(r->message, sizeof r->message,
             "resource type %d is not supported: Cairn describes topics (2) and brokers (4)",
             r->type);
    return;
  }
  char id[24];
  snprintf(id, sizeof id, "%" PRIu64, kr->n->cfg.node_id);
  if (r->name.len != 0 && (r->name.len != strlen(id) || memcmp(r->name.ptr, id, r->name.len))) {
    r->err = KAFKA_ERR_INVALID_REQUEST;
    snprintf(r->message, sizeof r->message,
             "unexpected broker id %.*s: this is broker %s (ask each broker for its own configs)",
             (int)(r->name.len > 40 ? 40 : r->name.len), (const char *)r->name.ptr, id);
    return;
  }
  char msg[256];
  if (authz_check(kr->n, kr->req->c, META_ACL_CLUSTER, "", META_ACL_DESCRIBE, msg, sizeof msg) !=
      0) {
    r->err = KAFKA_ERR_CLUSTER_AUTHORIZATION_FAILED;
    snprintf(r->message, sizeof r->message, "%s", msg);
  }
}

static int kafka_dc_read_keys(struct kafka_reader *rd, struct kafka_dc_res *r)
{
  r->nkeys = kafka_get_array_len(rd, 2);
  if (rd->err != 0 || r->nkeys > KAFKA_DC_MAX_KEYS) {
    return CAIRN_EBADREQUEST;
  }
  if (r->nkeys <= 0) {
    return 0;
  }
  r->keys = calloc((size_t)r->nkeys, sizeof *r->keys);
  if (r->keys == NULL) {
    return CAIRN_ENOMEM;
  }
  for (int32_t k = 0; k < r->nkeys && rd->err == 0; k++) {
    r->keys[k] = kafka_get_string(rd);
  }
  return rd->err;
}

void kafka_handle_describe_configs(struct kafka_req *kr)
{
  struct kafka_reader *rd = &kr->body;
  struct kafka_dc_op *op = calloc(1, sizeof *op);
  if (op == NULL) {
    kafka_req_malformed(kr);
    return;
  }
  kr->op = op;
  kr->op_free = kafka_dc_op_free;
  int32_t n =
      kafka_get_array_alloc(rd, 7, KAFKA_DC_MAX_RESOURCES, sizeof *op->res, (void **)&op->res);
  if (n < 0) {
    kafka_req_malformed(kr);
    return;
  }
  for (int32_t i = 0; i < n; i++) {
    struct kafka_dc_res *r = &op->res[op->nres++];
    r->type = kafka_get_i8(rd);
    r->name = kafka_get_string(rd);
    if (kafka_dc_read_keys(rd, r) != 0) {
      kafka_req_malformed(kr);
      return;
    }
  }
  if (kr->h.api_version >= 1) {
    (void)kafka_get_i8(rd); /* include_synonyms: none are listed */
  }
  if (rd->err != 0) {
    kafka_req_malformed(kr);
    return;
  }
  for (size_t i = 0; i < op->nres; i++) {
    kafka_dc_check(kr, &op->res[i]);
  }
  kafka_dc_next(kr);
}
