/* store.c - the parts of the store interface shared by every
 * implementation. */
#include "storage/store.h"

#include "common/err.h"
#include "format/batch.h"

#include <stdio.h>
#include <string.h>

void store_region_release(struct store_region *r)
{
  if (r->release != NULL) {
    r->release(r);
  }
  memset(r, 0, sizeof *r);
  r->fd = -1;
}

int store_validate_entry(const struct store_batch *batches, size_t n, size_t max_batch_bytes,
                         int64_t next, char *msg, size_t msglen)
{
  int64_t records = 0;
  for (size_t i = 0; i < n; i++) {
    char why[STORE_ERRMSG_SIZE];
    int rv = batch_verify(batches[i].data, batches[i].len, max_batch_bytes, why, sizeof why);
    if (rv != 0) {
      snprintf(msg, msglen, "batch %zu of %zu: %s", i + 1, n, why);
      return rv;
    }
    struct batch_header h;
    batch_header_decode(batches[i].data, &h);
    /* delete_before may have moved next anywhere, even near INT64_MAX. */
    if (h.record_count > INT64_MAX - next - records) {
      snprintf(msg, msglen, "batch %zu of %zu: offsets would pass INT64_MAX", i + 1, n);
      return CAIRN_EOFFSET;
    }
    records += h.record_count;
  }
  return 0;
}

int store_batch_find_time(const uint8_t *data, size_t len, int64_t start, int64_t timestamp,
                          int64_t *offset, char *msg, size_t msglen)
{
  struct batch_header h;
  batch_header_decode(data, &h);
  struct batch_iter it;
  int rv = batch_iter_init(&it, data, len);
  if (rv == CAIRN_EUNSUPPORTED) {
    /* Compressed: the records are opaque here, and max_timestamp already
     * says one qualifies, so the batch is the best answer we can give. */
    *offset = h.base_offset > start ? h.base_offset : start;
    return 1;
  }
  if (rv != 0) {
    snprintf(msg, msglen, "lookup_time: batch at %lld: %s", (long long)h.base_offset,
             cairn_strerror(rv));
    return rv;
  }
  struct batch_record r;
  while ((rv = batch_iter_next(&it, &r)) == 1) {
    if (r.offset >= start && r.timestamp >= timestamp) {
      *offset = r.offset;
      return 1;
    }
  }
  if (rv < 0) {
    snprintf(msg, msglen, "lookup_time: batch at %lld: %s", (long long)h.base_offset,
             cairn_strerror(rv));
    return rv;
  }
  return 0;
}

const char *store_kind_name(uint32_t kind)
{
  switch (kind) {
  case STORE_KIND_FILE:
    return "file";
  case STORE_KIND_POSTGRESQL:
    return "postgresql";
  default:
    return "?";
  }
}

int store_kind_parse(const char *name, uint32_t *kind)
{
  if (name == NULL || name[0] == '\0' || strcmp(name, "file") == 0) {
    *kind = STORE_KIND_FILE;
    return 0;
  }
  if (strcmp(name, "postgresql") == 0) {
    *kind = STORE_KIND_POSTGRESQL;
    return 0;
  }
  return CAIRN_EINVAL;
}
