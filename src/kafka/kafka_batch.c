/* kafka_batch.c - Kafka v2 record batches to and from Cairn's (kafka_batch.h). */
#include "kafka/kafka_batch.h"

#include "common/err.h"
#include "format/batch.h"
#include "format/crc32c.h"
#include "format/endian.h"
#include "kafka/kafka_codec.h"

#include <string.h>

#define KAFKA_ATTR_CODEC_MASK 0x0007
#define KAFKA_ATTR_UNSUPPORTED 0x0038 /* timestamp type, transactional, control */
#define KAFKA_NO_LEADER_EPOCH (-1)

/* The fixed fields from attributes on, with their widths: the same order
 * and widths in both formats (Kafka [21, 61), Cairn [26, 66)). */
static const uint8_t kafka_batch_field_widths[] = {2, 4, 8, 8, 8, 2, 4, 4};
#define KAFKA_BATCH_NFIELDS (sizeof kafka_batch_field_widths / sizeof kafka_batch_field_widths[0])
#define KAFKA_BATCH_FIELDS_SIZE 40

/* Copies the 40 header bytes from src to dst, reversing each field's byte
 * order (big-endian <-> little-endian). */
static void kafka_batch_swap_fields(const uint8_t *src, uint8_t *dst)
{
  size_t at = 0;
  for (size_t f = 0; f < KAFKA_BATCH_NFIELDS; f++) {
    size_t w = kafka_batch_field_widths[f];
    for (size_t i = 0; i < w; i++) {
      dst[at + i] = src[at + w - 1 - i];
    }
    at += w;
  }
}

int kafka_batch_probe(const uint8_t *p, size_t len, size_t *size)
{
  if (len < KAFKA_BATCH_LENGTH_FIELD_END) {
    return KAFKA_BATCH_NEED_MORE;
  }
  int32_t bl = (int32_t)kafka_be32(p + 8);
  if (bl < KAFKA_BATCH_HEADER_SIZE - KAFKA_BATCH_LENGTH_FIELD_END) {
    return CAIRN_EBADLEN;
  }
  size_t total = (size_t)bl + KAFKA_BATCH_LENGTH_FIELD_END;
  if (len < total) {
    return KAFKA_BATCH_NEED_MORE;
  }
  *size = total;
  return 0;
}

/* Kafka's codec number -> Cairn's stored one (batch.h), indexed by Kafka's
 * number; kafka_codec_from_cairn() reads it backwards. */
static const uint8_t kafka_codec_map[] = {
    [KAFKA_CODEC_NONE] = BATCH_CODEC_NONE,     [KAFKA_CODEC_GZIP] = BATCH_CODEC_GZIP,
    [KAFKA_CODEC_SNAPPY] = BATCH_CODEC_SNAPPY, [KAFKA_CODEC_LZ4] = BATCH_CODEC_LZ4,
    [KAFKA_CODEC_ZSTD] = BATCH_CODEC_ZSTD,
};
#define KAFKA_NCODECS (sizeof kafka_codec_map / sizeof kafka_codec_map[0])

static int kafka_codec_to_cairn(int kafka, int *cairn)
{
  if (kafka < 0 || (size_t)kafka >= KAFKA_NCODECS) {
    return CAIRN_EBADATTR;
  }
  *cairn = kafka_codec_map[kafka];
  return 0;
}

static int kafka_codec_from_cairn(int cairn, uint16_t *kafka)
{
  for (size_t k = 0; k < KAFKA_NCODECS; k++) {
    if (kafka_codec_map[k] == cairn) {
      *kafka = (uint16_t)k;
      return 0;
    }
  }
  return CAIRN_EBADATTR;
}

int kafka_batch_to_cairn(const uint8_t *p, size_t len, uint8_t *out)
{
  size_t size = 0;
  int rv = kafka_batch_probe(p, len, &size);
  if (rv != 0 || size != len) {
    return rv < 0 ? rv : CAIRN_EBADLEN;
  }
  if (p[KAFKA_BATCH_OFF_MAGIC] != KAFKA_BATCH_MAGIC) {
    return CAIRN_EBADMAGIC;
  }
  uint32_t crc = kafka_be32(p + KAFKA_BATCH_OFF_CRC);
  if (crc32c(p + KAFKA_BATCH_CRC_START, len - KAFKA_BATCH_CRC_START) != crc) {
    return CAIRN_EBADCRC;
  }
  uint16_t attrs = kafka_be16(p + KAFKA_BATCH_OFF_ATTRIBUTES);
  if ((attrs & ~(KAFKA_ATTR_CODEC_MASK | KAFKA_ATTR_UNSUPPORTED)) != 0 ||
      (attrs & KAFKA_ATTR_UNSUPPORTED) != 0) {
    return CAIRN_EBADATTR;
  }
  int codec = 0;
  rv = kafka_codec_to_cairn(attrs & KAFKA_ATTR_CODEC_MASK, &codec);
  if (rv != 0) {
    return rv;
  }
  size_t clen = len + KAFKA_BATCH_GROWTH;
  memset(out, 0, BATCH_BROKER_FIELDS_SIZE); /* base offset, source index, flags: the broker's */
  le_put32(out + BATCH_OFF_LENGTH, (uint32_t)(clen - BATCH_LENGTH_FIELD_END));
  out[BATCH_OFF_MAGIC] = BATCH_MAGIC;
  kafka_batch_swap_fields(p + KAFKA_BATCH_CRC_START, out + BATCH_CRC_START);
  le_put16(out + BATCH_OFF_ATTRIBUTES, (uint16_t)codec);
  memcpy(out + BATCH_HEADER_SIZE, p + KAFKA_BATCH_HEADER_SIZE, len - KAFKA_BATCH_HEADER_SIZE);
  le_put32(out + BATCH_OFF_CRC, crc32c(out + BATCH_CRC_START, clen - BATCH_CRC_START));
  return 0;
}

int kafka_batch_header_from_cairn(const uint8_t *p, size_t len, uint8_t *out)
{
  if (len < BATCH_HEADER_SIZE || le_get32(p + BATCH_OFF_LENGTH) != len - BATCH_LENGTH_FIELD_END) {
    return CAIRN_EBADLEN;
  }
  if (p[BATCH_OFF_MAGIC] != BATCH_MAGIC) {
    return CAIRN_EBADMAGIC;
  }
  uint16_t kcodec;
  if (kafka_codec_from_cairn(le_get16(p + BATCH_OFF_ATTRIBUTES) & BATCH_ATTR_CODEC_MASK, &kcodec) !=
      0) {
    return CAIRN_EBADATTR;
  }
  size_t klen = len - KAFKA_BATCH_GROWTH;
  kafka_put_be64(out, le_get64(p + BATCH_OFF_BASE_OFFSET));
  kafka_put_be32(out + 8, (uint32_t)(klen - KAFKA_BATCH_LENGTH_FIELD_END));
  kafka_put_be32(out + 12, (uint32_t)KAFKA_NO_LEADER_EPOCH);
  out[KAFKA_BATCH_OFF_MAGIC] = KAFKA_BATCH_MAGIC;
  kafka_batch_swap_fields(p + BATCH_CRC_START, out + KAFKA_BATCH_CRC_START);
  kafka_put_be16(out + KAFKA_BATCH_OFF_ATTRIBUTES, kcodec);
  /* Both CRCs cover 40 header bytes then the same records: Kafka's is the
   * stored one with the header's difference shifted over the records. */
  uint32_t diff = crc32c(p + BATCH_CRC_START, KAFKA_BATCH_FIELDS_SIZE) ^
                  crc32c(out + KAFKA_BATCH_CRC_START, KAFKA_BATCH_FIELDS_SIZE);
  kafka_put_be32(out + KAFKA_BATCH_OFF_CRC,
                 le_get32(p + BATCH_OFF_CRC) ^ crc32c_combine(diff, 0, len - BATCH_HEADER_SIZE));
  return 0;
}

int kafka_batch_from_cairn(const uint8_t *p, size_t len, uint8_t *out)
{
  int rv = kafka_batch_header_from_cairn(p, len, out);
  if (rv == 0) {
    memcpy(out + KAFKA_BATCH_HEADER_SIZE, p + BATCH_HEADER_SIZE, len - BATCH_HEADER_SIZE);
  }
  return rv;
}
