/* kafka_handle_create_topics.c - CreateTopics v0-4: each topic through the
 * native CreateTopic (forwarded to the controller leader by any node,
 * answered once every partition has a ready leader, within timeout_ms:
 * REQUEST_TIMED_OUT otherwise, as Kafka), one after the other.
 * num_partitions / replication_factor -1 (v4) take 1 and the controller's
 * default; manual assignments are refused (INVALID_REQUEST); the configs
 * retention.ms, retention.bytes, segment.bytes and max.message.bytes map
 * onto the topic's (cluster/topic_conf.c reads them: a bad value is
 * INVALID_CONFIG); other configs are ignored (docs/kafka.md). */
#include "kafka/kafka_handlers.h"

#include "cluster/topic_conf.h"
#include "common/err.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define KAFKA_CT_MAX_TOPICS 1000
#define KAFKA_CT_MESSAGE_SIZE 320

struct kafka_ct_topic {
  char name[KAFKA_TOPIC_MAX + 1];
  int32_t partitions;
  int16_t rf;
  int16_t err;
  char message[KAFKA_CT_MESSAGE_SIZE];
  struct meta_topic_config mcfg; /* the configs read (topic_conf) */
  Cairn__Client__TopicConfig cfg; /* mcfg, as the native request carries it */
  bool has_cfg;
};

struct kafka_ct_op {
  struct kafka_ct_topic *topics;
  size_t ntopics;
  size_t next;
  bool validate_only;
  int32_t timeout_ms; /* the request's: how long the answer waits for leaders */
  Cairn__Client__Envelope env;
  Cairn__Client__CreateTopicRequest ct;
};

static void kafka_ct_op_free(void *p)
{
  struct kafka_ct_op *op = p;
  if (op != NULL) {
    free(op->topics);
    free(op);
  }
}

static void kafka_ct_answer(struct kafka_req *kr)
{
  struct kafka_ct_op *op = kr->op;
  int16_t v = kr->h.api_version;
  struct kafka_buf b;
  kafka_buf_init(&b);
  if (v >= 2) {
    kafka_put_i32(&b, 0); /* throttle_time_ms */
  }
  kafka_put_array_len(&b, (int32_t)op->ntopics);
  for (size_t i = 0; i < op->ntopics; i++) {
    const struct kafka_ct_topic *t = &op->topics[i];
    kafka_put_string(&b, t->name);
    kafka_put_err(&b, t->err);
    if (v >= 1) {
      kafka_put_string(&b, t->err != 0 && t->message[0] != '\0' ? t->message : NULL);
    }
  }
  kafka_req_respond(kr, &b);
}

static void kafka_ct_next(struct kafka_req *kr);

static void kafka_ct_on_answer(struct kafka_req *kr, const Cairn__Client__Envelope *env,
                               const struct conn_part *parts, size_t nparts)
{
  (void)parts;
  (void)nparts;
  struct kafka_ct_op *op = kr->op;
  struct kafka_ct_topic *t = &op->topics[op->next++];
  const Cairn__Client__Error *e = NULL;
  if (env != NULL && env->body_case == CAIRN__CLIENT__ENVELOPE__BODY_CREATE_TOPIC_RESP) {
    e = env->create_topic_resp->error;
  } else if (env != NULL && env->body_case == CAIRN__CLIENT__ENVELOPE__BODY_ERROR_RESP) {
    e = env->error_resp;
  }
  t->err = env == NULL ? KAFKA_ERR_UNKNOWN_SERVER : kafka_err_from_wire(e != NULL ? e->code : 0);
  if (e != NULL && e->message != NULL) {
    snprintf(t->message, sizeof t->message, "%s", e->message);
  }
  if (t->err == KAFKA_ERR_NONE && env != NULL &&
      env->body_case == CAIRN__CLIENT__ENVELOPE__BODY_CREATE_TOPIC_RESP &&
      env->create_topic_resp->not_ready) {
    /* Kafka's answer when the partitions have no leaders within
     * timeout_ms: the topic exists all the same. */
    t->err = KAFKA_ERR_REQUEST_TIMED_OUT;
    snprintf(t->message, sizeof t->message,
             "created, but not every partition had a leader within timeout_ms %d",
             (int)op->timeout_ms);
  }
  kafka_ct_next(kr);
}

static void kafka_ct_next(struct kafka_req *kr)
{
  struct kafka_ct_op *op = kr->op;
  while (op->next < op->ntopics && (op->topics[op->next].err != 0 || op->validate_only)) {
    op->next++;
  }
  if (op->next == op->ntopics) {
    kafka_ct_answer(kr);
    return;
  }
  struct kafka_ct_topic *t = &op->topics[op->next];
  cairn__client__envelope__init(&op->env);
  cairn__client__create_topic_request__init(&op->ct);
  op->ct.name = t->name;
  op->ct.partitions = t->partitions < 0 ? 1 : (uint32_t)t->partitions;
  op->ct.replication_factor = t->rf < 0 ? 0 : (uint32_t)t->rf; /* 0: the default */
  /* As Kafka: timeout_ms 0 or less answers at once, more waits for every
   * partition's leader up to it (the native wait, topic_wait.h). */
  op->ct.ready_timeout_ms = op->timeout_ms > 0 ? op->timeout_ms : -1;
  if (t->has_cfg) {
    cairn__client__topic_config__init(&t->cfg);
    t->cfg.retention_ms = (int64_t)t->mcfg.retention_ms; /* topic_conf: at most INT64_MAX */
    t->cfg.retention_bytes = (int64_t)t->mcfg.retention_bytes;
    t->cfg.segment_bytes = t->mcfg.segment_bytes;
    t->cfg.max_batch_bytes = (uint32_t)t->mcfg.max_batch_bytes;
  }
  op->ct.config = t->has_cfg ? &t->cfg : NULL;
  op->env.body_case = CAIRN__CLIENT__ENVELOPE__BODY_CREATE_TOPIC_REQ;
  op->env.create_topic_req = &op->ct;
  kafka_req_relay(kr, CAIRN__CLIENT__API__API_CREATE_TOPIC, &op->env, NULL, 0, kafka_ct_on_answer);
}

/* s into dst[cap] as a C string; false when null, too long or holding a
 * NUL. */
static bool kafka_ct_cstr(struct kafka_str s, char *dst, size_t cap)
{
  if (s.ptr == NULL || s.len >= cap || memchr(s.ptr, '\0', s.len) != NULL) {
    return false;
  }
  memcpy(dst, s.ptr, s.len);
  dst[s.len] = '\0';
  return true;
}

/* A config the topic has an equivalent for (topic_conf.h); others, and
 * null values, are ignored. */
static void kafka_ct_config(struct kafka_ct_topic *t, struct kafka_str key, struct kafka_str val)
{
  char k[64], v[64], msg[TOPIC_CONF_MSG_SIZE];
  if (!kafka_ct_cstr(key, k, sizeof k) || val.ptr == NULL) {
    return;
  }
  if (!kafka_ct_cstr(val, v, sizeof v)) {
    snprintf(v, sizeof v, "(%zu bytes)", val.len);
  }
  int rv = topic_conf_set_new(&t->mcfg, k, v, msg, sizeof msg);
  if (rv == CAIRN_ENOTFOUND) {
    return;
  }
  if (rv != 0 && t->err == KAFKA_ERR_NONE) {
    t->err = KAFKA_ERR_INVALID_CONFIG;
    snprintf(t->message, sizeof t->message, "%s", msg);
  }
  t->has_cfg = t->has_cfg || rv == 0;
}

void kafka_handle_create_topics(struct kafka_req *kr)
{
  struct kafka_reader *r = &kr->body;
  struct kafka_ct_op *op = calloc(1, sizeof *op);
  if (op == NULL) {
    kafka_req_malformed(kr);
    return;
  }
  kr->op = op;
  kr->op_free = kafka_ct_op_free;
  int32_t n =
      kafka_get_array_alloc(r, 12, KAFKA_CT_MAX_TOPICS, sizeof *op->topics, (void **)&op->topics);
  if (n < 0) {
    kafka_req_malformed(kr);
    return;
  }
  for (int32_t i = 0; i < n && r->err == 0; i++) {
    struct kafka_ct_topic *t = &op->topics[op->ntopics++];
    struct kafka_str name = kafka_get_string(r);
    t->partitions = kafka_get_i32(r);
    t->rf = kafka_get_i16(r);
    int32_t na = kafka_get_array_len(r, 8);
    for (int32_t k = 0; k < na && r->err == 0; k++) {
      (void)kafka_get_i32(r);
      int32_t nb = kafka_get_array_len(r, 4);
      for (int32_t j = 0; j < nb && r->err == 0; j++) {
        (void)kafka_get_i32(r);
      }
    }
    int32_t nc = kafka_get_array_len(r, 4);
    for (int32_t k = 0; k < nc && r->err == 0; k++) {
      struct kafka_str key = kafka_get_string(r);
      struct kafka_str val = kafka_get_string(r);
      kafka_ct_config(t, key, val);
    }
    int16_t name_err = kafka_topic_name_echo(name, t->name);
    if (name_err != KAFKA_ERR_NONE) {
      t->err = name_err;
      snprintf(t->message, sizeof t->message, "a topic name is 1 to %d bytes", KAFKA_TOPIC_MAX);
    } else if (na > 0) {
      t->err = KAFKA_ERR_INVALID_REQUEST;
      snprintf(t->message, sizeof t->message,
               "manual replica assignment is not supported: Cairn places replicas");
    } else if (t->partitions == 0 || t->partitions < -1) {
      t->err = KAFKA_ERR_INVALID_PARTITIONS;
    } else if (t->rf == 0 || t->rf < -1) {
      t->err = KAFKA_ERR_INVALID_REPLICATION_FACTOR;
    }
  }
  op->timeout_ms = kafka_get_i32(r);
  if (kr->h.api_version >= 1) {
    op->validate_only = kafka_get_i8(r) != 0;
  }
  if (r->err != 0) {
    kafka_req_malformed(kr);
    return;
  }
  kafka_ct_next(kr);
}
