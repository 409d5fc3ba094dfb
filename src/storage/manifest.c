/* manifest.c - build, encode and decode a partition log's manifest. */
#include "storage/manifest.h"

#include "common/err.h"
#include "storage.pb-c.h"

#include <stdlib.h>
#include <string.h>

int manifest_build(struct store *s, struct manifest *m)
{
  memset(m, 0, sizeof *m);
  struct store_info info;
  store_info(s, &info);
  m->start_offset = info.start_offset;
  m->next_offset = info.next_offset;
  m->last_index = info.last_index;
  return plog_segments(s, &m->segments, &m->nsegments);
}

int manifest_encode(const struct manifest *m, uint8_t **out, size_t *len)
{
  Cairn__Storage__LogManifest msg = CAIRN__STORAGE__LOG_MANIFEST__INIT;
  msg.start_offset = m->start_offset;
  msg.next_offset = m->next_offset;
  msg.last_index = m->last_index;
  Cairn__Storage__SegmentDesc *descs = calloc(m->nsegments + 1, sizeof *descs);
  Cairn__Storage__SegmentDesc **ptrs = calloc(m->nsegments + 1, sizeof *ptrs);
  if (descs == NULL || ptrs == NULL) {
    free(descs);
    free(ptrs);
    return CAIRN_ENOMEM;
  }
  for (size_t i = 0; i < m->nsegments; i++) {
    cairn__storage__segment_desc__init(&descs[i]);
    descs[i].base_offset = m->segments[i].base_offset;
    descs[i].next_offset = m->segments[i].next_offset;
    descs[i].size_bytes = m->segments[i].size_bytes;
    descs[i].crc32c = m->segments[i].crc32c;
    ptrs[i] = &descs[i];
  }
  msg.n_segments = m->nsegments;
  msg.segments = ptrs;
  msg.producer_table.data = m->producers;
  msg.producer_table.len = m->producers_len;
  size_t n = cairn__storage__log_manifest__get_packed_size(&msg);
  uint8_t *buf = malloc(n ? n : 1);
  if (buf != NULL) {
    cairn__storage__log_manifest__pack(&msg, buf);
  }
  free(descs);
  free(ptrs);
  if (buf == NULL) {
    return CAIRN_ENOMEM;
  }
  *out = buf;
  *len = n;
  return 0;
}

/* Segments must tile [first base, next_offset) in order. */
static bool manifest_consistent(const struct manifest *m)
{
  if (m->start_offset < 0 || m->next_offset < m->start_offset) {
    return false;
  }
  for (size_t i = 0; i < m->nsegments; i++) {
    const struct plog_segment_desc *d = &m->segments[i];
    if (d->next_offset < d->base_offset || (i > 0 && d->base_offset != m->segments[i - 1].next_offset)) {
      return false;
    }
  }
  return m->nsegments == 0 || m->segments[m->nsegments - 1].next_offset == m->next_offset;
}

int manifest_decode(const uint8_t *buf, size_t len, struct manifest *m)
{
  memset(m, 0, sizeof *m);
  if (len > MANIFEST_MAX_BYTES) {
    return CAIRN_ETOOLARGE;
  }
  Cairn__Storage__LogManifest *msg = cairn__storage__log_manifest__unpack(NULL, len, buf);
  if (msg == NULL) {
    return CAIRN_ECORRUPT;
  }
  int rv = 0;
  m->start_offset = msg->start_offset;
  m->next_offset = msg->next_offset;
  m->last_index = msg->last_index;
  m->nsegments = msg->n_segments;
  m->segments = calloc(msg->n_segments + 1, sizeof *m->segments);
  if (m->segments == NULL) {
    rv = CAIRN_ENOMEM;
  }
  if (rv == 0 && msg->producer_table.len > 0) {
    m->producers = malloc(msg->producer_table.len);
    if (m->producers == NULL) {
      rv = CAIRN_ENOMEM;
    } else {
      memcpy(m->producers, msg->producer_table.data, msg->producer_table.len);
      m->producers_len = msg->producer_table.len;
    }
  }
  for (size_t i = 0; rv == 0 && i < msg->n_segments; i++) {
    m->segments[i].base_offset = msg->segments[i]->base_offset;
    m->segments[i].next_offset = msg->segments[i]->next_offset;
    m->segments[i].size_bytes = msg->segments[i]->size_bytes;
    m->segments[i].crc32c = msg->segments[i]->crc32c;
  }
  cairn__storage__log_manifest__free_unpacked(msg, NULL);
  if (rv == 0 && !manifest_consistent(m)) {
    rv = CAIRN_ECORRUPT;
  }
  if (rv != 0) {
    manifest_free(m);
  }
  return rv;
}

void manifest_free(struct manifest *m)
{
  free(m->segments);
  m->segments = NULL;
  m->nsegments = 0;
  free(m->producers);
  m->producers = NULL;
  m->producers_len = 0;
}
