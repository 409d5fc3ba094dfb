/* batch.h - the record-batch format: one layout used unchanged by the
 * produce request, the Raft log entry, the segment file and the fetch
 * response. The broker stamps the broker fields in place and never decodes
 * or re-encodes records on the produce or fetch path. See docs/format.md.
 *
 * Byte layout, all integers little-endian (version BATCH_MAGIC = 1):
 *
 *   off size field              written by
 *    0   8   base_offset   i64   broker, on append (outside the CRC)
 *    8   4   batch_length  i32   producer: bytes that follow this field
 *   12   8   source_index  u64   broker: Raft index of the entry that carried
 *                                the batch, 0 if none (outside the CRC)
 *   20   1   entry_flags   u8    broker: bit 0 = last batch of its Raft entry
 *                                (outside the CRC)
 *   21   1   magic         u8    producer: format version, 1
 *   22   4   crc           u32   CRC-32C of bytes [26, end)
 *   26   2   attributes    i16   bits 0-2 codec (0 none, 1 lz4, 2 zstd,
 *                                3 gzip, 4 snappy; codec.h); other bits
 *                                reserved, must be 0
 *   28   4   last_offset_delta i32  record_count - 1
 *   32   8   first_timestamp   i64  ms since the epoch
 *   40   8   max_timestamp     i64
 *   48   8   producer_id       i64  -1 when not idempotent
 *   56   2   producer_epoch    i16  -1 when not idempotent
 *   58   4   base_sequence     i32  -1 when not idempotent
 *   62   4   record_count      i32
 *   66   ... records (compressed as a whole when the codec is not none)
 *
 * Each record (all varints zigzag, see varint.h):
 *   length varint (bytes after it), attributes i8 (0), timestamp_delta
 *   varlong, offset_delta varint, key_length varint (-1 = null), key,
 *   value_length varint (-1 = null), value, header_count varint, then per
 *   header: key_length varint (>= 0), key, value_length varint (-1 = null),
 *   value.
 */
#ifndef CAIRN_BATCH_H
#define CAIRN_BATCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define BATCH_MAGIC 1
#define BATCH_HEADER_SIZE 66
#define BATCH_LENGTH_FIELD_END 12 /* batch_length counts bytes from here */
#define BATCH_CRC_START 26        /* the CRC covers bytes from here on */
#define BATCH_MIN_RECORD_SIZE 7   /* the smallest record encoding, 1 length byte + 6 */
#define BATCH_DEFAULT_MAX_BYTES (16u * 1024 * 1024)

#define BATCH_OFF_BASE_OFFSET 0
#define BATCH_OFF_LENGTH 8
#define BATCH_OFF_SOURCE_INDEX 12
#define BATCH_OFF_ENTRY_FLAGS 20
#define BATCH_OFF_MAGIC 21
#define BATCH_OFF_CRC 22
#define BATCH_OFF_ATTRIBUTES 26
#define BATCH_OFF_LAST_OFFSET_DELTA 28
#define BATCH_OFF_FIRST_TIMESTAMP 32
#define BATCH_OFF_MAX_TIMESTAMP 40
#define BATCH_OFF_PRODUCER_ID 48
#define BATCH_OFF_PRODUCER_EPOCH 56
#define BATCH_OFF_BASE_SEQUENCE 58
#define BATCH_OFF_RECORD_COUNT 62

#define BATCH_FLAG_ENTRY_END 0x01
#define BATCH_BROKER_FIELDS_SIZE 21 /* bytes [0, 21): base_offset .. entry_flags */

/* Codec numbers are stored on disk: never renumber, only append. gzip and
 * snappy came later (Kafka producers' codecs, stored as sent). */
enum batch_codec {
  BATCH_CODEC_NONE = 0,
  BATCH_CODEC_LZ4 = 1,
  BATCH_CODEC_ZSTD = 2,
  BATCH_CODEC_GZIP = 3,
  BATCH_CODEC_SNAPPY = 4,
};
#define BATCH_CODEC_MAX BATCH_CODEC_SNAPPY
#define BATCH_ATTR_CODEC_MASK 0x0007

/* The decoded fixed header. */
struct batch_header {
  int64_t base_offset;
  int32_t batch_length;
  uint64_t source_index;
  uint8_t entry_flags;
  uint8_t magic;
  uint32_t crc;
  int16_t attributes;
  int32_t last_offset_delta;
  int64_t first_timestamp;
  int64_t max_timestamp;
  int64_t producer_id;
  int16_t producer_epoch;
  int32_t base_sequence;
  int32_t record_count;
};

/* Decodes the fixed header from p (at least BATCH_HEADER_SIZE bytes). No
 * checks. Context: any thread. */
void batch_header_decode(const uint8_t *p, struct batch_header *h);

/* Total bytes of the batch starting at p (which holds at least 12 bytes),
 * from its length field. */
static inline size_t batch_total_size(int32_t batch_length)
{
  return (size_t)batch_length + BATCH_LENGTH_FIELD_END;
}

/* The outcome of batch_check_header(), for a stream of batches. */
enum batch_probe {
  BATCH_PROBE_OK,        /* a whole batch of *size bytes starts at p */
  BATCH_PROBE_NEED_MORE, /* fewer bytes than the header or the batch says */
  BATCH_PROBE_BAD        /* malformed; *err says why */
};

/* Looks at the header at p[0..len) without checking the CRC: is there a
 * whole batch, how big, or is the header malformed (bad length, unknown
 * magic, too large for max_bytes). Parsers use it to tell "need more bytes"
 * from "malformed". Context: any thread. */
enum batch_probe batch_probe(const uint8_t *p, size_t len, size_t max_bytes, size_t *size,
                             int *err);

/* Checks one batch's integrity, occupying exactly p[0..len): length field,
 * magic, size limit, CRC, attributes, record count against the length and
 * last offset delta, timestamps in order; not the records one by one. This
 * is what the partition log checks on append and at recovery: the CRC proves
 * the bytes are the ones the producer validated. Returns 0 or a precise
 * CAIRN_E* code with a message as batch_validate(). Context: any thread. */
__attribute__((warn_unused_result)) int batch_verify(const uint8_t *p, size_t len,
                                                     size_t max_bytes, char *errmsg,
                                                     size_t errmsg_len);

/* Fully validates one batch occupying exactly p[0..len): everything
 * batch_verify() checks and, for an uncompressed batch, every record
 * (varints, lengths, offset deltas 0..n-1, record count, max timestamp).
 * A compressed batch (any codec) gets batch_verify()'s checks only and is
 * never decompressed: it is stored as sent, its records checked by the
 * reader that decompresses them (docs/format.md, "Compressed batches").
 * This is the ingress check for bytes from a producer. Returns 0 or a precise CAIRN_E* code and, when errmsg is not NULL,
 * a message (at most errmsg_len bytes, NUL-terminated) saying what and where.
 * Context: any thread. */
__attribute__((warn_unused_result)) int batch_validate(const uint8_t *p, size_t len,
                                                       size_t max_bytes, char *errmsg,
                                                       size_t errmsg_len);

/* Checks only the CRC of the batch at p[0..len) (len as its length field
 * says). Returns 0 or CAIRN_EBADCRC. */
__attribute__((warn_unused_result)) int batch_check_crc(const uint8_t *p, size_t len);

/* Writes the broker fields: base offset, source Raft index and entry flags.
 * The CRC does not cover them, so it stays valid. Touches only bytes
 * [0, BATCH_BROKER_FIELDS_SIZE), so p may be a copy of just those. */
void batch_stamp(uint8_t *p, int64_t base_offset, uint64_t source_index, uint8_t entry_flags);

/* One decoded record. Pointers borrow from the batch buffer and are valid
 * until that buffer is freed or changed. A NULL key or value (length -1)
 * has ptr NULL and len 0; an empty one has a non-NULL ptr and len 0. */
struct batch_record {
  int64_t offset;    /* base_offset + offset_delta */
  int64_t timestamp; /* first_timestamp + timestamp_delta */
  const uint8_t *key;
  size_t key_len;
  const uint8_t *value;
  size_t value_len;
  int32_t header_count;
  const uint8_t *headers; /* the encoded headers, for batch_iter_header() */
  size_t headers_len;
};

/* Iterates the records of one uncompressed batch. Borrows the buffer. */
struct batch_iter {
  const uint8_t *batch;
  size_t len;
  size_t pos;
  int32_t index;
  struct batch_header h;
};

/* Starts iteration over the batch at p[0..len). Returns 0,
 * CAIRN_EUNSUPPORTED for a compressed batch, or a validation error from the
 * header. Does not check the CRC (call batch_validate first for untrusted
 * input). */
__attribute__((warn_unused_result)) int batch_iter_init(struct batch_iter *it, const uint8_t *p,
                                                        size_t len);

/* Decodes the next record into *r. Returns 1 when a record was produced, 0
 * at the end, or a negative error for a malformed record. */
int batch_iter_next(struct batch_iter *it, struct batch_record *r);

/* Decodes header number i of r into key/value (borrowed as in
 * batch_record). Walks from the first header: headers are rare and few.
 * Returns 0 or a negative error. */
__attribute__((warn_unused_result)) int batch_record_header(const struct batch_record *r,
                                                            int32_t i, const uint8_t **key,
                                                            size_t *key_len,
                                                            const uint8_t **value,
                                                            size_t *value_len);

#endif
