/* offset_record.h - the records of the internal topic __cairn_offsets
 * (proto/group.proto; docs/consumer-groups.md): a committed offset, a
 * tombstone (the offset deleted), a load marker or a group's membership,
 * encoded as one record of a record batch. Pure: no I/O. The golden file
 * tests/golden/offsets_records_v1.bin fixes the bytes.
 *
 * Record layout:
 *   key   cairn.group.OffsetRecordKey {version = OFFSET_RECORD_VERSION,
 *         kind, group, topic, partition}
 *   value cairn.group.OffsetRecordValue {offset, metadata, commit_time_ms,
 *         generation} for a commit; null for a tombstone and a marker;
 *         cairn.group.GroupRecordValue for a group's membership (kind GROUP,
 *         topic "", partition 0)
 *   timestamp: the time the coordinator wrote it
 *
 * Context: any thread; no shared state. */
#ifndef CAIRN_OFFSET_RECORD_H
#define CAIRN_OFFSET_RECORD_H

#include "format/batch_builder.h"
#include "server/group/group.h"

#include <stddef.h>
#include <stdint.h>

#define OFFSET_RECORD_VERSION 1u
#define OFFSET_RECORD_NAME_MAX 249u
#define OFFSET_RECORD_METADATA_MAX 4096u

enum offset_record_kind {
  OFFSET_RECORD_COMMIT,
  OFFSET_RECORD_TOMBSTONE,
  OFFSET_RECORD_MARKER,
  OFFSET_RECORD_GROUP, /* a group's membership: the value is for offset_record_restore */
};

/* One record, decoded (strings inside) or to encode. */
struct offset_record {
  enum offset_record_kind kind;
  char group[OFFSET_RECORD_NAME_MAX + 1];
  char topic[OFFSET_RECORD_NAME_MAX + 1];
  uint32_t partition;
  int64_t offset;
  char metadata[OFFSET_RECORD_METADATA_MAX + 1];
  int64_t commit_time_ms;
  int32_t generation;
};

/* Appends r to b, stamped timestamp. Borrows r. Returns 0, CAIRN_EINVAL (a
 * name or metadata too long, an empty group or topic for a commit or
 * tombstone), CAIRN_ETOOLARGE (the batch is full: b unchanged) or
 * CAIRN_ENOMEM. */
__attribute__((warn_unused_result)) int
offset_record_add(struct batch_builder *b, const struct offset_record *r, int64_t timestamp);

/* Decodes one record's key and value (value NULL: null; an empty value is
 * a commit whose fields are all defaults)
 * into *out. Borrows both. Returns 0, or CAIRN_ECORRUPT (not an
 * OffsetRecordKey / OffsetRecordValue, a version this code does not know,
 * a name too long, a commit without a value). */
__attribute__((warn_unused_result)) int offset_record_decode(const uint8_t *key, size_t key_len,
                                                             const uint8_t *value, size_t value_len,
                                                             struct offset_record *out);

/* Appends g's membership (generation, protocol, leader, members with their
 * subscriptions and assignments; none when g is empty) as a GROUP record.
 * Borrows g. Returns 0, CAIRN_ETOOLARGE (b is full: unchanged) or
 * CAIRN_ENOMEM. */
__attribute__((warn_unused_result)) int
offset_record_add_group(struct batch_builder *b, const struct group *g, int64_t timestamp);

/* Replaces g's membership with the one a GROUP record's value holds
 * (group_restore). Borrows value. Returns 0, CAIRN_ECORRUPT (the value does
 * not parse) or group_restore's codes. */
__attribute__((warn_unused_result)) int
offset_record_restore(struct group *g, const uint8_t *value, size_t value_len,
                      const struct group_env *env, uint64_t now_ms, uint64_t wall_ms);

#endif
