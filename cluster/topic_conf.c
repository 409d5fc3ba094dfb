/* topic_conf.c - a topic's configuration keys by Kafka's names: one table
 * (topic_conf.h). */
#include "cluster/topic_conf.h"

#include "common/err.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct topic_conf_key {
  const char *name;
  enum topic_conf_field field;
};

static const struct topic_conf_key topic_conf_keys[] = {
    {"retention.bytes", TOPIC_CONF_RETENTION_BYTES},
    {"retention.ms", TOPIC_CONF_RETENTION_MS},
    {"segment.bytes", TOPIC_CONF_SEGMENT_BYTES},
    {"max.message.bytes", TOPIC_CONF_MAX_BATCH_BYTES},
};
#define TOPIC_CONF_NKEYS (sizeof topic_conf_keys / sizeof topic_conf_keys[0])

/* Keys a user may know from Kafka or from `cairn topic create` that name
 * something a running topic cannot change: refused with the reason, not
 * as unknown. */
static const struct {
  const char *name;
  const char *why;
} topic_conf_fixed[] = {
    {"replication.factor", "the replication factor is chosen when the topic is created"},
    {"storage", "where the partitions keep their log is chosen when the topic is created"},
    {"partitions", "partitions are added with `cairn topic add-partitions`"},
    {"cleanup.policy", "Cairn deletes by retention only (cleanup.policy=delete)"},
    {"compression.type", "Cairn stores batches as the producer compressed them"},
    {"message.timestamp.type", "Cairn keeps the producer's timestamps (CreateTime)"},
    {"min.insync.replicas", "a batch commits on a majority of the replicas, always"},
};

static const struct topic_conf_key *topic_conf_find(const char *key)
{
  for (size_t i = 0; i < TOPIC_CONF_NKEYS; i++) {
    if (strcmp(topic_conf_keys[i].name, key) == 0) {
      return &topic_conf_keys[i];
    }
  }
  return NULL;
}

/* Finds a key a running topic may change; else fills msg and returns
 * NULL. */
static const struct topic_conf_key *topic_conf_live_key(const char *key, char *msg, size_t cap)
{
  const struct topic_conf_key *k = topic_conf_find(key);
  if (k != NULL && (TOPIC_CONF_LIVE & TOPIC_CONF_BIT(k->field)) != 0) {
    return k;
  }
  if (k != NULL) {
    snprintf(msg, cap, "%s cannot change on a running topic: it is fixed when the topic is "
                       "created (the logs are opened with it)",
             key);
    return NULL;
  }
  for (size_t i = 0; i < sizeof topic_conf_fixed / sizeof topic_conf_fixed[0]; i++) {
    if (strcmp(topic_conf_fixed[i].name, key) == 0) {
      snprintf(msg, cap, "%s cannot change: %s", key, topic_conf_fixed[i].why);
      return NULL;
    }
  }
  snprintf(msg, cap, "unknown config key '%.64s' (those that can change: retention.ms, "
                     "retention.bytes)",
           key);
  return NULL;
}

static uint64_t *topic_conf_slot(struct meta_topic_config *cfg, enum topic_conf_field f)
{
  switch (f) {
  case TOPIC_CONF_RETENTION_BYTES:
    return &cfg->retention_bytes;
  case TOPIC_CONF_RETENTION_MS:
    return &cfg->retention_ms;
  case TOPIC_CONF_SEGMENT_BYTES:
    return &cfg->segment_bytes;
  case TOPIC_CONF_MAX_BATCH_BYTES:
    return &cfg->max_batch_bytes;
  }
  return NULL;
}

/* A retention: a decimal integer, -1 (Kafka's "no limit") or 0 (Cairn's)
 * up to INT64_MAX (the stores compare it as signed milliseconds). */
static bool topic_conf_parse_limit(const char *value, uint64_t *out)
{
  if (value == NULL || value[0] == '\0') {
    return false;
  }
  char *end = NULL;
  errno = 0;
  long long v = strtoll(value, &end, 10);
  if (errno != 0 || end == value || *end != '\0' || v < -1) {
    return false;
  }
  *out = v <= 0 ? 0 : (uint64_t)v;
  return true;
}

/* Stores value, read, in k's field of cfg. Returns 0 or
 * CAIRN_EINVALID_CONFIG with msg. */
static int topic_conf_store(struct meta_topic_config *cfg, const struct topic_conf_key *k,
                            const char *value, char *msg, size_t cap)
{
  uint64_t v;
  if (!topic_conf_parse_limit(value, &v)) {
    snprintf(msg, cap, "%s: '%.32s' is not a whole number from -1 (no limit) up", k->name,
             value != NULL ? value : "");
    return CAIRN_EINVALID_CONFIG;
  }
  if (k->field == TOPIC_CONF_MAX_BATCH_BYTES && v > UINT32_MAX) {
    snprintf(msg, cap, "%s: at most %u", k->name, UINT32_MAX);
    return CAIRN_EINVALID_CONFIG;
  }
  *topic_conf_slot(cfg, k->field) = v;
  return 0;
}

int topic_conf_set(struct meta_topic_config *cfg, uint32_t *mask, const char *key,
                   const char *value, char *msg, size_t cap)
{
  const struct topic_conf_key *k = topic_conf_live_key(key != NULL ? key : "", msg, cap);
  if (k == NULL) {
    return CAIRN_EINVALID_CONFIG;
  }
  int rv = topic_conf_store(cfg, k, value, msg, cap);
  if (rv == 0) {
    *mask |= TOPIC_CONF_BIT(k->field);
  }
  return rv;
}

int topic_conf_set_new(struct meta_topic_config *cfg, const char *key, const char *value,
                       char *msg, size_t cap)
{
  const struct topic_conf_key *k = topic_conf_find(key != NULL ? key : "");
  return k != NULL ? topic_conf_store(cfg, k, value, msg, cap) : CAIRN_ENOTFOUND;
}

int topic_conf_reset(struct meta_topic_config *cfg, uint32_t *mask, const char *key, char *msg,
                     size_t cap)
{
  const struct topic_conf_key *k = topic_conf_live_key(key != NULL ? key : "", msg, cap);
  if (k == NULL) {
    return CAIRN_EINVALID_CONFIG;
  }
  *topic_conf_slot(cfg, k->field) = 0;
  *mask |= TOPIC_CONF_BIT(k->field);
  return 0;
}

const char *topic_conf_live_name(size_t i)
{
  for (size_t k = 0; k < TOPIC_CONF_NKEYS; k++) {
    if ((TOPIC_CONF_LIVE & TOPIC_CONF_BIT(topic_conf_keys[k].field)) != 0 && i-- == 0) {
      return topic_conf_keys[k].name;
    }
  }
  return NULL;
}

void topic_conf_merge(struct meta_topic_config *dst, const struct meta_topic_config *src,
                      uint32_t mask)
{
  struct meta_topic_config from = *src; /* (topic_conf_slot hands out writable slots) */
  for (size_t i = 0; i < TOPIC_CONF_NKEYS; i++) {
    enum topic_conf_field f = topic_conf_keys[i].field;
    if ((mask & TOPIC_CONF_BIT(f)) != 0) {
      *topic_conf_slot(dst, f) = *topic_conf_slot(&from, f);
    }
  }
}
