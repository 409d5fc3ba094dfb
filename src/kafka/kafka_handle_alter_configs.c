/* kafka_handle_alter_configs.c - AlterConfigs v0-1 and
 * IncrementalAlterConfigs v0-1 (v1 flexible: compact strings and arrays,
 * tagged fields; its answer opens with the response header v1's empty
 * tagged fields, after the correlation id the framing writes): each topic resource through the native
 * AlterTopicConfig (the core operation behind `cairn topic alter-config`:
 * keys and values checked by cluster/topic_conf.c on the controller
 * leader, one metadata command, answered once applied), one after the
 * other; validate_only is relayed (checked, nothing changed). AlterConfigs
 * replaces a topic's whole configuration, as Kafka's does: the keys that
 * can change and are not named go back to their defaults. Broker
 * resources are refused (INVALID_REQUEST: a node's settings are its
 * config file's), other types too (docs/kafka.md). */
#include "kafka/kafka_handlers.h"

#include "cluster/topic_conf.h"
#include "common/err.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define KAFKA_AC_MAX_RESOURCES 1000
#define KAFKA_AC_MAX_KEYS 1000
#define KAFKA_AC_MESSAGE_SIZE 320

enum kafka_ac_type { KAFKA_AC_TOPIC = 2, KAFKA_AC_BROKER = 4 };

/* IncrementalAlterConfigs' config_operation. */
enum kafka_ac_opcode {
  KAFKA_AC_SET = 0,
  KAFKA_AC_DELETE = 1,
  KAFKA_AC_APPEND = 2,
  KAFKA_AC_SUBTRACT = 3,
};

struct kafka_ac_res {
  int8_t type;
  char name[KAFKA_TOPIC_MAX + 1]; /* echoed; the topic's when err is 0 */
  int16_t err;
  char message[KAFKA_AC_MESSAGE_SIZE];
  /* The native request's changes; the strings are owned (strs). */
  Cairn__Client__ConfigEntry *sets;
  Cairn__Client__ConfigEntry **setp;
  char **resets;
  size_t nset, nreset;
  char **strs;
  size_t nstrs;
};

struct kafka_ac_op {
  struct kafka_ac_res *res;
  size_t nres;
  size_t next;
  bool incremental;
  bool flexible; /* IncrementalAlterConfigs v1 */
  bool validate_only;
  Cairn__Client__Envelope env;
  Cairn__Client__AlterTopicConfigRequest atc;
};

static void kafka_ac_op_free(void *p)
{
  struct kafka_ac_op *op = p;
  if (op == NULL) {
    return;
  }
  for (size_t i = 0; i < op->nres; i++) {
    struct kafka_ac_res *r = &op->res[i];
    for (size_t k = 0; k < r->nstrs; k++) {
      free(r->strs[k]);
    }
    free(r->strs);
    free(r->sets);
    free(r->setp);
    free(r->resets);
  }
  free(op->res);
  free(op);
}

/* ---- answering ---- */

static void kafka_ac_answer(struct kafka_req *kr)
{
  struct kafka_ac_op *op = kr->op;
  struct kafka_buf b;
  kafka_buf_init(&b);
  if (op->flexible) {
    kafka_put_empty_tagged_fields(&b); /* response header v1 */
  }
  kafka_put_i32(&b, 0); /* throttle_time_ms */
  if (op->flexible) {
    kafka_put_compact_array_len(&b, (int32_t)op->nres);
  } else {
    kafka_put_array_len(&b, (int32_t)op->nres);
  }
  for (size_t i = 0; i < op->nres; i++) {
    const struct kafka_ac_res *r = &op->res[i];
    const char *msg = r->err != 0 && r->message[0] != '\0' ? r->message : NULL;
    kafka_put_err(&b, r->err);
    if (op->flexible) {
      kafka_put_compact_string(&b, msg);
      kafka_put_i8(&b, r->type);
      kafka_put_compact_string(&b, r->name);
      kafka_put_empty_tagged_fields(&b);
    } else {
      kafka_put_string(&b, msg);
      kafka_put_i8(&b, r->type);
      kafka_put_string(&b, r->name);
    }
  }
  if (op->flexible) {
    kafka_put_empty_tagged_fields(&b);
  }
  kafka_req_respond(kr, &b);
}

static void kafka_ac_next(struct kafka_req *kr);

static void kafka_ac_on_answer(struct kafka_req *kr, const Cairn__Client__Envelope *env,
                               const struct conn_part *parts, size_t nparts)
{
  (void)parts;
  (void)nparts;
  struct kafka_ac_op *op = kr->op;
  struct kafka_ac_res *r = &op->res[op->next++];
  r->err = kafka_err_from_wire(
      kafka_relay_code(env, CAIRN__CLIENT__ENVELOPE__BODY_ALTER_TOPIC_CONFIG_RESP));
  const char *msg = kafka_relay_message(env);
  if (msg != NULL) {
    snprintf(r->message, sizeof r->message, "%s", msg);
  }
  kafka_ac_next(kr);
}

static void kafka_ac_next(struct kafka_req *kr)
{
  struct kafka_ac_op *op = kr->op;
  while (op->next < op->nres && op->res[op->next].err != 0) {
    op->next++;
  }
  if (op->next == op->nres) {
    kafka_ac_answer(kr);
    return;
  }
  struct kafka_ac_res *r = &op->res[op->next];
  cairn__client__envelope__init(&op->env);
  cairn__client__alter_topic_config_request__init(&op->atc);
  op->atc.name = r->name;
  op->atc.set = r->setp;
  op->atc.n_set = r->nset;
  op->atc.reset = r->resets;
  op->atc.n_reset = r->nreset;
  op->atc.validate_only = op->validate_only;
  op->env.body_case = CAIRN__CLIENT__ENVELOPE__BODY_ALTER_TOPIC_CONFIG_REQ;
  op->env.alter_topic_config_req = &op->atc;
  kafka_req_relay(kr, CAIRN__CLIENT__API__API_ALTER_TOPIC_CONFIG, &op->env, NULL, 0,
                  kafka_ac_on_answer);
}

/* ---- decoding ---- */

/* s as an owned NUL-terminated copy kept by r, or NULL (no memory, or s
 * holds a NUL). */
static char *kafka_ac_keep(struct kafka_ac_res *r, struct kafka_str s)
{
  if (s.ptr != NULL && memchr(s.ptr, '\0', s.len) != NULL) {
    return NULL;
  }
  char *copy = strndup(s.ptr != NULL ? (const char *)s.ptr : "", s.len);
  if (copy != NULL) {
    r->strs[r->nstrs++] = copy;
  }
  return copy;
}

static void kafka_ac_refuse(struct kafka_ac_res *r, int16_t err, const char *msg)
{
  if (r->err == 0) {
    r->err = err;
    snprintf(r->message, sizeof r->message, "%s", msg);
  }
}

/* One config of a resource: a set (value), a reset (value NULL with
 * reset), or refused. */
static void kafka_ac_add(struct kafka_ac_res *r, struct kafka_str key, struct kafka_str value,
                         bool reset)
{
  char *k = kafka_ac_keep(r, key);
  char *v = reset ? NULL : kafka_ac_keep(r, value);
  if (k == NULL || (!reset && v == NULL)) {
    kafka_ac_refuse(r, KAFKA_ERR_INVALID_REQUEST, "a config name or value holds a NUL byte");
    return;
  }
  if (reset) {
    r->resets[r->nreset++] = k;
    return;
  }
  Cairn__Client__ConfigEntry *e = &r->sets[r->nset];
  cairn__client__config_entry__init(e);
  e->key = k;
  e->value = v;
  r->setp[r->nset++] = e;
}

/* AlterConfigs replaces the whole configuration: every key that can
 * change and is not named goes back to its default. */
static void kafka_ac_reset_unnamed(struct kafka_ac_res *r)
{
  for (size_t i = 0; topic_conf_live_name(i) != NULL; i++) {
    const char *name = topic_conf_live_name(i);
    bool named = false;
    for (size_t k = 0; k < r->nset && !named; k++) {
      named = strcmp(r->sets[k].key, name) == 0;
    }
    for (size_t k = 0; k < r->nreset && !named; k++) {
      named = strcmp(r->resets[k], name) == 0;
    }
    if (!named) {
      struct kafka_str s = {(const uint8_t *)name, strlen(name)};
      kafka_ac_add(r, s, s, true);
    }
  }
}

/* Room for n configs and the live keys AlterConfigs may add. Returns 0 or
 * CAIRN_ENOMEM. */
static int kafka_ac_reserve(struct kafka_ac_res *r, int32_t n)
{
  size_t cap = (size_t)(n > 0 ? n : 0) + 8;
  r->sets = calloc(cap, sizeof *r->sets);
  r->setp = calloc(cap, sizeof *r->setp);
  r->resets = calloc(cap, sizeof *r->resets);
  r->strs = calloc(2 * cap, sizeof *r->strs);
  return r->sets && r->setp && r->resets && r->strs ? 0 : CAIRN_ENOMEM;
}

/* Reads one resource's configs. Returns 0, or -1 for a malformed or
 * too large body, or no memory. */
static int kafka_ac_read_configs(struct kafka_reader *rd, struct kafka_ac_res *r, bool incremental,
                                 bool flexible)
{
  int32_t n = flexible ? kafka_get_compact_array_len(rd, 4)
                       : kafka_get_array_len(rd, incremental ? 5 : 4);
  if (rd->err != 0 || n > KAFKA_AC_MAX_KEYS || kafka_ac_reserve(r, n) != 0) {
    return -1;
  }
  for (int32_t k = 0; k < n && rd->err == 0; k++) {
    struct kafka_str key = flexible ? kafka_get_compact_string(rd) : kafka_get_string(rd);
    int8_t opcode = incremental ? kafka_get_i8(rd) : KAFKA_AC_SET;
    struct kafka_str value = flexible ? kafka_get_compact_string(rd) : kafka_get_string(rd);
    if (flexible) {
      kafka_skip_tagged_fields(rd);
    }
    if (rd->err != 0) {
      return -1;
    }
    if (opcode == KAFKA_AC_APPEND || opcode == KAFKA_AC_SUBTRACT) {
      kafka_ac_refuse(r, KAFKA_ERR_INVALID_CONFIG,
                      "APPEND and SUBTRACT apply to list configs; Cairn's topic configs are "
                      "numbers (use SET or DELETE)");
    } else if (opcode != KAFKA_AC_SET && opcode != KAFKA_AC_DELETE) {
      kafka_ac_refuse(r, KAFKA_ERR_INVALID_REQUEST, "unknown config operation");
    }
    /* A null value: AlterConfigs' way of asking for the default. */
    kafka_ac_add(r, key, value, opcode == KAFKA_AC_DELETE || value.ptr == NULL);
  }
  if (!incremental) {
    kafka_ac_reset_unnamed(r);
  }
  return rd->err != 0 ? -1 : 0;
}

/* A resource's error found before any core call (name, type). */
static void kafka_ac_check(struct kafka_ac_res *r, struct kafka_str name)
{
  int16_t err = kafka_topic_name_echo(name, r->name);
  if (r->type == KAFKA_AC_BROKER) {
    kafka_ac_refuse(r, KAFKA_ERR_INVALID_REQUEST,
                    "broker configs cannot change at run time: a node's settings come from "
                    "its config file and flags (docs/configuration.md)");
  } else if (r->type != KAFKA_AC_TOPIC) {
    char msg[120];
    snprintf(msg, sizeof msg, "resource type %d is not supported: Cairn alters topics (2)",
             r->type);
    kafka_ac_refuse(r, KAFKA_ERR_INVALID_REQUEST, msg);
  } else if (err != KAFKA_ERR_NONE) {
    kafka_ac_refuse(r, err, "invalid topic name");
  }
}

static void kafka_ac_handle(struct kafka_req *kr, bool incremental)
{
  struct kafka_reader *rd = &kr->body;
  struct kafka_ac_op *op = calloc(1, sizeof *op);
  if (op == NULL) {
    kafka_req_malformed(kr);
    return;
  }
  kr->op = op;
  kr->op_free = kafka_ac_op_free;
  op->incremental = incremental;
  op->flexible = incremental && kr->h.api_version >= 1;
  int32_t n = op->flexible ? kafka_get_compact_array_len(rd, 4) : kafka_get_array_len(rd, 7);
  if (rd->err != 0 || n > KAFKA_AC_MAX_RESOURCES ||
      (n > 0 && (op->res = calloc((size_t)n, sizeof *op->res)) == NULL)) {
    kafka_req_malformed(kr);
    return;
  }
  for (int32_t i = 0; i < n; i++) {
    struct kafka_ac_res *r = &op->res[op->nres++];
    r->type = kafka_get_i8(rd);
    struct kafka_str name = op->flexible ? kafka_get_compact_string(rd) : kafka_get_string(rd);
    if (rd->err != 0 || kafka_ac_read_configs(rd, r, incremental, op->flexible) != 0) {
      kafka_req_malformed(kr);
      return;
    }
    if (op->flexible) {
      kafka_skip_tagged_fields(rd);
    }
    kafka_ac_check(r, name);
  }
  op->validate_only = kafka_get_i8(rd) != 0;
  if (op->flexible) {
    kafka_skip_tagged_fields(rd);
  }
  if (rd->err != 0) {
    kafka_req_malformed(kr);
    return;
  }
  kafka_ac_next(kr);
}

void kafka_handle_alter_configs(struct kafka_req *kr) { kafka_ac_handle(kr, false); }

void kafka_handle_incremental_alter_configs(struct kafka_req *kr) { kafka_ac_handle(kr, true); }
