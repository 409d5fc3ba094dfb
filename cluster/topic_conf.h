/* topic_conf.h - a topic's configuration under Kafka's key names
 * (retention.ms, retention.bytes, segment.bytes, max.message.bytes): which
 * field of struct meta_topic_config each names, how a value is read, and
 * which may change on a running topic. The one table behind the native
 * AlterTopicConfig (and so `cairn topic alter-config`, the console and
 * Kafka's AlterConfigs / IncrementalAlterConfigs, which relay to it) and
 * the metadata command that applies the change.
 *
 * Context: pure functions of their arguments; any thread. */
#ifndef CAIRN_TOPIC_CONF_H
#define CAIRN_TOPIC_CONF_H

#include "cluster/meta_state.h"

#include <stddef.h>
#include <stdint.h>

/* The fields of struct meta_topic_config, in TopicConfig's field order
 * (proto/meta.proto): bit f of a mask is TopicConfig field f + 1. Stored in
 * the metadata log: never renumber. */
enum topic_conf_field {
  TOPIC_CONF_RETENTION_BYTES = 0,
  TOPIC_CONF_RETENTION_MS = 1,
  TOPIC_CONF_SEGMENT_BYTES = 2,
  TOPIC_CONF_MAX_BATCH_BYTES = 3,
};

#define TOPIC_CONF_BIT(f) (1u << (f))

/* The fields a running topic may change: the replicas read them at every
 * retention pass. The others are fixed when the topic is created (the
 * logs are opened with them). */
#define TOPIC_CONF_LIVE                                                                        \
  (TOPIC_CONF_BIT(TOPIC_CONF_RETENTION_BYTES) | TOPIC_CONF_BIT(TOPIC_CONF_RETENTION_MS))

/* The largest message a topic_conf error holds. */
#define TOPIC_CONF_MSG_SIZE 256

/* Sets key (Kafka's name) to value (text as typed: a decimal integer; -1
 * or 0 is "no limit" for the retentions) in *cfg and its bit in *mask.
 * Returns 0, or CAIRN_EINVALID_CONFIG with msg (cap bytes) saying why: an
 * unknown key (msg lists the keys that can change), a value that is not a
 * number in range, or a key that cannot change on a running topic
 * (segment.bytes, replication.factor, storage, ...). Borrows everything. */
__attribute__((warn_unused_result)) int topic_conf_set(struct meta_topic_config *cfg,
                                                       uint32_t *mask, const char *key,
                                                       const char *value, char *msg, size_t cap);

/* As topic_conf_set for a topic being created: every key of the table
 * (those fixed at creation too: segment.bytes, max.message.bytes; -1 or 0
 * is the default). Returns 0, CAIRN_ENOTFOUND for a key the table does
 * not have (Kafka's CreateTopics ignores those), or CAIRN_EINVALID_CONFIG
 * with msg. */
__attribute__((warn_unused_result)) int topic_conf_set_new(struct meta_topic_config *cfg,
                                                           const char *key, const char *value,
                                                           char *msg, size_t cap);

/* As topic_conf_set for a key going back to its default (0). */
__attribute__((warn_unused_result)) int topic_conf_reset(struct meta_topic_config *cfg,
                                                         uint32_t *mask, const char *key,
                                                         char *msg, size_t cap);

/* The name of the i-th key a running topic may change ("retention.bytes",
 * ...), NULL past the last. Returns a static string. */
const char *topic_conf_live_name(size_t i);

/* Copies the fields whose bits are in mask from src into dst. */
void topic_conf_merge(struct meta_topic_config *dst, const struct meta_topic_config *src,
                      uint32_t mask);

#endif
