/* batch.c - record-batch header decoding, validation and record iteration.
 * The layout is in batch.h and docs/format.md. */
#include "format/batch.h"

#include "common/err.h"
#include "format/codec.h"
#include "format/crc32c.h"
#include "format/endian.h"
#include "format/varint.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

void batch_header_decode(const uint8_t *p, struct batch_header *h)
{
  h->base_offset = (int64_t)le_get64(p + BATCH_OFF_BASE_OFFSET);
  h->batch_length = (int32_t)le_get32(p + BATCH_OFF_LENGTH);
  h->source_index = le_get64(p + BATCH_OFF_SOURCE_INDEX);
  h->entry_flags = p[BATCH_OFF_ENTRY_FLAGS];
  h->magic = p[BATCH_OFF_MAGIC];
  h->crc = le_get32(p + BATCH_OFF_CRC);
  h->attributes = (int16_t)le_get16(p + BATCH_OFF_ATTRIBUTES);
  h->last_offset_delta = (int32_t)le_get32(p + BATCH_OFF_LAST_OFFSET_DELTA);
  h->first_timestamp = (int64_t)le_get64(p + BATCH_OFF_FIRST_TIMESTAMP);
  h->max_timestamp = (int64_t)le_get64(p + BATCH_OFF_MAX_TIMESTAMP);
  h->producer_id = (int64_t)le_get64(p + BATCH_OFF_PRODUCER_ID);
  h->producer_epoch = (int16_t)le_get16(p + BATCH_OFF_PRODUCER_EPOCH);
  h->base_sequence = (int32_t)le_get32(p + BATCH_OFF_BASE_SEQUENCE);
  h->record_count = (int32_t)le_get32(p + BATCH_OFF_RECORD_COUNT);
}

static int batch_fail(char *errmsg, size_t errmsg_len, int err, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static int batch_fail(char *errmsg, size_t errmsg_len, int err, const char *fmt, ...)
{
  if (errmsg != NULL && errmsg_len > 0) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(errmsg, errmsg_len, fmt, ap);
    va_end(ap);
  }
  return err;
}

enum batch_probe batch_probe(const uint8_t *p, size_t len, size_t max_bytes, size_t *size,
                             int *err)
{
  if (len < BATCH_HEADER_SIZE) {
    return BATCH_PROBE_NEED_MORE;
  }
  int32_t blen = (int32_t)le_get32(p + BATCH_OFF_LENGTH);
  if (blen < BATCH_HEADER_SIZE - BATCH_LENGTH_FIELD_END) {
    *err = CAIRN_EBADLEN;
    return BATCH_PROBE_BAD;
  }
  if (p[BATCH_OFF_MAGIC] != BATCH_MAGIC) {
    *err = CAIRN_EBADMAGIC;
    return BATCH_PROBE_BAD;
  }
  size_t total = batch_total_size(blen);
  if (total > max_bytes) {
    *err = CAIRN_ETOOLARGE;
    return BATCH_PROBE_BAD;
  }
  *size = total;
  return total <= len ? BATCH_PROBE_OK : BATCH_PROBE_NEED_MORE;
}

int batch_check_crc(const uint8_t *p, size_t len)
{
  uint32_t want = le_get32(p + BATCH_OFF_CRC);
  uint32_t got = crc32c(p + BATCH_CRC_START, len - BATCH_CRC_START);
  return want == got ? 0 : CAIRN_EBADCRC;
}

void batch_stamp(uint8_t *p, int64_t base_offset, uint64_t source_index, uint8_t entry_flags)
{
  le_put64(p + BATCH_OFF_BASE_OFFSET, (uint64_t)base_offset);
  le_put64(p + BATCH_OFF_SOURCE_INDEX, source_index);
  p[BATCH_OFF_ENTRY_FLAGS] = entry_flags;
}

/* varint_get64 with the one- and two-byte forms decoded here, inline:
 * nearly every length and delta in a record takes one of them, and the
 * record walk is on the consumer's hot path. Same results as
 * varint_get64 (a 2-byte value never reaches the overflow checks). */
static inline int batch_varint64(const uint8_t *p, size_t len, int64_t *out)
{
  if (len >= 1 && p[0] < 0x80) {
    uint64_t u = p[0];
    *out = (int64_t)(u >> 1) ^ -(int64_t)(u & 1);
    return 1;
  }
  if (len >= 2 && p[1] < 0x80) {
    uint64_t u = (uint64_t)(p[0] & 0x7f) | ((uint64_t)p[1] << 7);
    *out = (int64_t)(u >> 1) ^ -(int64_t)(u & 1);
    return 2;
  }
  return varint_get64(p, len, out);
}

static inline int batch_varint32(const uint8_t *p, size_t len, int32_t *out)
{
  if (len >= 2 && (p[0] < 0x80 || p[1] < 0x80)) {
    int64_t v;
    int rv = batch_varint64(p, len, &v);
    *out = (int32_t)v; /* at most 14 bits */
    return rv;
  }
  return varint_get32(p, len, out);
}

/* Reads a length-prefixed byte string (length -1 = null when allow_null). */
static int batch_get_bytes(const uint8_t *p, size_t len, size_t *pos, bool allow_null,
                           const uint8_t **out, size_t *out_len)
{
  int32_t n;
  int rv = batch_varint32(p + *pos, len - *pos, &n);
  if (rv < 0) {
    return rv == CAIRN_ETRUNCATED ? CAIRN_EBADRECORD : rv;
  }
  *pos += (size_t)rv;
  if (n == -1 && allow_null) {
    *out = NULL;
    *out_len = 0;
    return 0;
  }
  if (n < 0 || (size_t)n > len - *pos) {
    return CAIRN_EBADRECORD;
  }
  *out = p + *pos;
  *out_len = (size_t)n;
  *pos += (size_t)n;
  return 0;
}

/* Parses one record at p[0..len) (the rest of the batch). *used is the
 * whole record's size, including its length prefix. */
static int batch_record_parse(const uint8_t *p, size_t len, int64_t base_offset,
                              int64_t first_ts, struct batch_record *r, size_t *used)
{
  int32_t rec_len;
  int rv = batch_varint32(p, len, &rec_len);
  if (rv < 0) {
    return rv == CAIRN_ETRUNCATED ? CAIRN_EBADCOUNT : rv;
  }
  size_t pos = (size_t)rv;
  if (rec_len <= 0 || (size_t)rec_len > len - pos) {
    return CAIRN_EBADRECORD;
  }
  const uint8_t *q = p + pos; /* the record body, rec_len bytes */
  size_t qlen = (size_t)rec_len;
  size_t qpos = 1; /* attributes byte, reserved: must be 0 */
  if (q[0] != 0) {
    return CAIRN_EBADRECORD;
  }
  int64_t ts_delta;
  int32_t off_delta;
  if ((rv = batch_varint64(q + qpos, qlen - qpos, &ts_delta)) < 0) {
    return rv == CAIRN_ETRUNCATED ? CAIRN_EBADRECORD : rv;
  }
  qpos += (size_t)rv;
  if ((rv = batch_varint32(q + qpos, qlen - qpos, &off_delta)) < 0) {
    return rv == CAIRN_ETRUNCATED ? CAIRN_EBADRECORD : rv;
  }
  qpos += (size_t)rv;
  if ((rv = batch_get_bytes(q, qlen, &qpos, true, &r->key, &r->key_len)) != 0 ||
      (rv = batch_get_bytes(q, qlen, &qpos, true, &r->value, &r->value_len)) != 0) {
    return rv;
  }
  int32_t nh;
  if ((rv = batch_varint32(q + qpos, qlen - qpos, &nh)) < 0) {
    return rv == CAIRN_ETRUNCATED ? CAIRN_EBADRECORD : rv;
  }
  qpos += (size_t)rv;
  if (nh < 0) {
    return CAIRN_EBADRECORD;
  }
  r->headers = q + qpos;
  for (int32_t i = 0; i < nh; i++) {
    const uint8_t *k, *v;
    size_t kl, vl;
    if ((rv = batch_get_bytes(q, qlen, &qpos, false, &k, &kl)) != 0 ||
        (rv = batch_get_bytes(q, qlen, &qpos, true, &v, &vl)) != 0) {
      return rv;
    }
  }
  if (qpos != qlen) {
    return CAIRN_EBADRECORD; /* the length prefix disagrees with the fields */
  }
  r->headers_len = (size_t)(q + qpos - r->headers);
  r->header_count = nh;
  /* Deltas come from the producer and base_offset is outside the CRC:
   * a sum past int64 is a malformed record, not undefined behaviour
   * (found by tests/fuzz/fuzz_batch.c). */
  if (__builtin_add_overflow(base_offset, (int64_t)off_delta, &r->offset) ||
      __builtin_add_overflow(first_ts, ts_delta, &r->timestamp)) {
    return CAIRN_EBADRECORD;
  }
  *used = pos + qlen;
  return 0;
}

/* Checks the records section p[0..len) of an uncompressed batch against
 * its header. Byte positions in messages count from the batch's start. */
static int batch_validate_records(const uint8_t *p, size_t len, size_t pos,
                                  const struct batch_header *h, char *errmsg, size_t errmsg_len)
{
  int64_t max_ts = INT64_MIN;
  for (int32_t i = 0; i < h->record_count; i++) {
    if (pos == len) {
      return batch_fail(errmsg, errmsg_len, CAIRN_EBADCOUNT,
                        "record_count says %d but the records end after %d", h->record_count, i);
    }
    struct batch_record r;
    size_t used;
    int rv = batch_record_parse(p + pos, len - pos, 0, h->first_timestamp, &r, &used);
    if (rv != 0) {
      return batch_fail(errmsg, errmsg_len, rv, "record %d at byte %zu: %s", i, pos,
                        cairn_strerror(rv));
    }
    if (r.offset != i) {
      return batch_fail(errmsg, errmsg_len, CAIRN_EBADRECORD,
                        "record %d at byte %zu has offset delta %lld", i, pos,
                        (long long)r.offset);
    }
    if (r.timestamp > max_ts) {
      max_ts = r.timestamp;
    }
    pos += used;
  }
  if (pos != len) {
    return batch_fail(errmsg, errmsg_len, CAIRN_EBADCOUNT,
                      "%zu bytes follow the %d records the header counts", len - pos,
                      h->record_count);
  }
  if (max_ts != h->max_timestamp) {
    return batch_fail(errmsg, errmsg_len, CAIRN_EBADRECORD,
                      "max_timestamp %lld but the records' largest is %lld",
                      (long long)h->max_timestamp, (long long)max_ts);
  }
  return 0;
}

int batch_verify(const uint8_t *p, size_t len, size_t max_bytes, char *errmsg,
                 size_t errmsg_len)
{
  if (len < BATCH_HEADER_SIZE) {
    return batch_fail(errmsg, errmsg_len, CAIRN_EBADLEN, "%zu bytes, less than the %d-byte header",
                      len, BATCH_HEADER_SIZE);
  }
  struct batch_header h;
  batch_header_decode(p, &h);
  if (h.batch_length < BATCH_HEADER_SIZE - BATCH_LENGTH_FIELD_END ||
      batch_total_size(h.batch_length) != len) {
    return batch_fail(errmsg, errmsg_len, CAIRN_EBADLEN,
                      "batch_length %d does not match the %zu bytes given", h.batch_length, len);
  }
  if (h.magic != BATCH_MAGIC) {
    return batch_fail(errmsg, errmsg_len, CAIRN_EBADMAGIC, "magic %u, expected %u", h.magic,
                      BATCH_MAGIC);
  }
  if (len > max_bytes) {
    return batch_fail(errmsg, errmsg_len, CAIRN_ETOOLARGE, "%zu bytes, the limit is %zu", len,
                      max_bytes);
  }
  uint32_t crc = crc32c(p + BATCH_CRC_START, len - BATCH_CRC_START);
  if (crc != h.crc) {
    return batch_fail(errmsg, errmsg_len, CAIRN_EBADCRC, "crc is 0x%08x, computed 0x%08x", h.crc,
                      crc);
  }
  int codec = h.attributes & BATCH_ATTR_CODEC_MASK;
  if ((h.attributes & ~BATCH_ATTR_CODEC_MASK) != 0 || codec_name(codec) == NULL) {
    return batch_fail(errmsg, errmsg_len, CAIRN_EBADATTR, "attributes 0x%04x",
                      (unsigned)(uint16_t)h.attributes);
  }
  if (h.record_count <= 0 || h.last_offset_delta != h.record_count - 1) {
    return batch_fail(errmsg, errmsg_len, CAIRN_EBADCOUNT,
                      "record_count %d with last_offset_delta %d", h.record_count,
                      h.last_offset_delta);
  }
  /* Each record takes at least BATCH_MIN_RECORD_SIZE bytes: a cheap bound
   * that also holds for compressed batches' decoded form. */
  if (codec == BATCH_CODEC_NONE &&
      (size_t)h.record_count > (len - BATCH_HEADER_SIZE) / BATCH_MIN_RECORD_SIZE) {
    return batch_fail(errmsg, errmsg_len, CAIRN_EBADCOUNT,
                      "record_count %d cannot fit in %zu bytes of records", h.record_count,
                      len - BATCH_HEADER_SIZE);
  }
  if (codec != BATCH_CODEC_NONE &&
      (size_t)h.record_count > max_bytes / BATCH_MIN_RECORD_SIZE) {
    return batch_fail(errmsg, errmsg_len, CAIRN_EBADCOUNT,
                      "record_count %d cannot fit in %zu decompressed bytes", h.record_count,
                      max_bytes);
  }
  if (h.max_timestamp < h.first_timestamp) {
    return batch_fail(errmsg, errmsg_len, CAIRN_EBADRECORD,
                      "max_timestamp %lld is before first_timestamp %lld",
                      (long long)h.max_timestamp, (long long)h.first_timestamp);
  }
  return 0;
}

int batch_validate(const uint8_t *p, size_t len, size_t max_bytes, char *errmsg,
                   size_t errmsg_len)
{
  int rv = batch_verify(p, len, max_bytes, errmsg, errmsg_len);
  if (rv != 0) {
    return rv;
  }
  struct batch_header h;
  batch_header_decode(p, &h);
  int codec = h.attributes & BATCH_ATTR_CODEC_MASK;
  if (codec != BATCH_CODEC_NONE) {
    /* Compressed (any codec): stored as the producer sent it, as Kafka
     * stores v2 batches; batch_verify() checked the header, length, CRC
     * and counts. Readers decompress and check the records. */
    return 0;
  }
  return batch_validate_records(p, len, BATCH_HEADER_SIZE, &h, errmsg, errmsg_len);
}

int batch_iter_init(struct batch_iter *it, const uint8_t *p, size_t len)
{
  if (len < BATCH_HEADER_SIZE) {
    return CAIRN_EBADLEN;
  }
  memset(it, 0, sizeof *it);
  batch_header_decode(p, &it->h);
  if (batch_total_size(it->h.batch_length) != len) {
    return CAIRN_EBADLEN;
  }
  if (it->h.magic != BATCH_MAGIC) {
    return CAIRN_EBADMAGIC;
  }
  if ((it->h.attributes & BATCH_ATTR_CODEC_MASK) != BATCH_CODEC_NONE) {
    return CAIRN_EUNSUPPORTED;
  }
  it->batch = p;
  it->len = len;
  it->pos = BATCH_HEADER_SIZE;
  return 0;
}

int batch_iter_next(struct batch_iter *it, struct batch_record *r)
{
  if (it->index >= it->h.record_count) {
    return 0;
  }
  size_t used;
  int rv = batch_record_parse(it->batch + it->pos, it->len - it->pos, it->h.base_offset,
                              it->h.first_timestamp, r, &used);
  if (rv != 0) {
    return rv;
  }
  it->pos += used;
  it->index++;
  return 1;
}

int batch_record_header(const struct batch_record *r, int32_t i, const uint8_t **key,
                        size_t *key_len, const uint8_t **value, size_t *value_len)
{
  if (i < 0 || i >= r->header_count) {
    return CAIRN_EINVAL;
  }
  size_t pos = 0;
  for (int32_t k = 0; k <= i; k++) {
    int rv = batch_get_bytes(r->headers, r->headers_len, &pos, false, key, key_len);
    if (rv == 0) {
      rv = batch_get_bytes(r->headers, r->headers_len, &pos, true, value, value_len);
    }
    if (rv != 0) {
      return rv;
    }
  }
  return 0;
}
