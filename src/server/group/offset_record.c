/* offset_record.c - encoding and decoding the records of __cairn_offsets
 * (offset_record.h). */
#include "server/group/offset_record.h"

#include "common/err.h"
#include "group.pb-c.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

int offset_record_add(struct batch_builder *b, const struct offset_record *r, int64_t timestamp)
{
  bool marker = r->kind == OFFSET_RECORD_MARKER;
  if (strlen(r->group) > OFFSET_RECORD_NAME_MAX || strlen(r->topic) > OFFSET_RECORD_NAME_MAX ||
      strlen(r->metadata) > OFFSET_RECORD_METADATA_MAX ||
      (!marker && (r->group[0] == '\0' || r->topic[0] == '\0'))) {
    return CAIRN_EINVAL;
  }
  Cairn__Group__OffsetRecordKey key = CAIRN__GROUP__OFFSET_RECORD_KEY__INIT;
  key.version = OFFSET_RECORD_VERSION;
  key.kind =
      marker ? CAIRN__GROUP__RECORD_KIND__RECORD_MARKER : CAIRN__GROUP__RECORD_KIND__RECORD_OFFSET;
  key.group = (char *)(marker ? "" : r->group);
  key.topic = (char *)(marker ? "" : r->topic);
  key.partition = marker ? 0 : r->partition;
  Cairn__Group__OffsetRecordValue val = CAIRN__GROUP__OFFSET_RECORD_VALUE__INIT;
  val.offset = r->offset;
  val.metadata = (char *)r->metadata;
  val.commit_time_ms = r->commit_time_ms;
  val.generation = r->generation;
  bool has_value = r->kind == OFFSET_RECORD_COMMIT;
  size_t klen = cairn__group__offset_record_key__get_packed_size(&key);
  size_t vlen = has_value ? cairn__group__offset_record_value__get_packed_size(&val) : 0;
  uint8_t *kb = malloc(klen + 1), *vb = malloc(vlen + 1);
  int rv = CAIRN_ENOMEM;
  if (kb != NULL && vb != NULL) {
    cairn__group__offset_record_key__pack(&key, kb);
    if (has_value) {
      cairn__group__offset_record_value__pack(&val, vb);
    }
    rv = batch_builder_add(b, timestamp, kb, klen, has_value ? vb : NULL, vlen, NULL, 0);
  }
  free(kb);
  free(vb);
  return rv;
}

static int offset_record_copy(char *dst, size_t cap, const char *src)
{
  size_t len = src != NULL ? strlen(src) : 0;
  if (len >= cap) {
    return CAIRN_ECORRUPT;
  }
  memcpy(dst, src != NULL ? src : "", len + 1);
  return 0;
}

int offset_record_decode(const uint8_t *key, size_t key_len, const uint8_t *value, size_t value_len,
                         struct offset_record *out)
{
  memset(out, 0, sizeof *out);
  if (key == NULL || key_len == 0) {
    return CAIRN_ECORRUPT;
  }
  Cairn__Group__OffsetRecordKey *k = cairn__group__offset_record_key__unpack(NULL, key_len, key);
  if (k == NULL) {
    return CAIRN_ECORRUPT;
  }
  int rv = k->version == OFFSET_RECORD_VERSION ? 0 : CAIRN_ECORRUPT;
  if (rv == 0) {
    rv = offset_record_copy(out->group, sizeof out->group, k->group);
  }
  if (rv == 0) {
    rv = offset_record_copy(out->topic, sizeof out->topic, k->topic);
  }
  out->partition = k->partition;
  bool marker = k->kind == CAIRN__GROUP__RECORD_KIND__RECORD_MARKER;
  if (rv == 0 && !marker && k->kind != CAIRN__GROUP__RECORD_KIND__RECORD_OFFSET) {
    rv = CAIRN_ECORRUPT;
  }
  cairn__group__offset_record_key__free_unpacked(k, NULL);
  if (rv != 0) {
    return rv;
  }
  if (marker) {
    out->kind = OFFSET_RECORD_MARKER;
    return 0;
  }
  if (out->group[0] == '\0' || out->topic[0] == '\0') {
    return CAIRN_ECORRUPT;
  }
  if (value == NULL) {
    out->kind = OFFSET_RECORD_TOMBSTONE;
    return 0;
  }
  Cairn__Group__OffsetRecordValue *v =
      cairn__group__offset_record_value__unpack(NULL, value_len, value);
  if (v == NULL) {
    return CAIRN_ECORRUPT;
  }
  out->kind = OFFSET_RECORD_COMMIT;
  out->offset = v->offset;
  out->commit_time_ms = v->commit_time_ms;
  out->generation = v->generation;
  rv = offset_record_copy(out->metadata, sizeof out->metadata, v->metadata);
  cairn__group__offset_record_value__free_unpacked(v, NULL);
  return rv;
}
