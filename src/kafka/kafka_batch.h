/* kafka_batch.h - Kafka's record batch (magic 2) converted to and from
 * Cairn's stored batch (format/batch.h) at the Kafka port's edge.
 *
 * Kafka's layout, big-endian (KAFKA_BATCH_MAGIC = 2):
 *
 *   off size field
 *    0   8   baseOffset
 *    8   4   batchLength            bytes after this field
 *   12   4   partitionLeaderEpoch
 *   16   1   magic                  2
 *   17   4   crc                    CRC-32C of bytes [21, end)
 *   21   2   attributes             bits 0-2 codec (0 none, 1 gzip, 2 snappy,
 *                                   3 lz4, 4 zstd), bit 3 timestamp type,
 *                                   bit 4 transactional, bit 5 control
 *   23   4   lastOffsetDelta
 *   27   8   firstTimestamp
 *   35   8   maxTimestamp
 *   43   8   producerId
 *   51   2   producerEpoch
 *   53   4   baseSequence
 *   57   4   recordCount
 *   61   ... records, byte for byte Cairn's
 *
 * Cairn's header is 66 bytes (little-endian, broker fields source_index
 * and entry_flags in place of partitionLeaderEpoch, magic 1, its own codec
 * numbers): the 40 bytes from attributes on hold the same fields in the
 * same order, so conversion swaps those fields' byte order, maps the codec
 * and recomputes the CRC over the converted bytes; the records are copied
 * unchanged. A converted batch is KAFKA_BATCH_GROWTH bytes longer (to
 * Cairn) or shorter (to Kafka).
 *
 * Codecs: all of Kafka's, mapped to Cairn's numbers (none 0->0, gzip 1->3,
 * snappy 2->4, lz4 3->1, zstd 4->2) and back; the compressed records are
 * copied as they are, never decompressed here.
 * Transactional and control batches and LogAppendTime are refused
 * (CAIRN_EBADATTR): this slice has no transactions.
 *
 * Context: any thread; pure functions. */
#ifndef CAIRN_KAFKA_BATCH_H
#define CAIRN_KAFKA_BATCH_H

#include <stddef.h>
#include <stdint.h>

#define KAFKA_BATCH_MAGIC 2
#define KAFKA_BATCH_HEADER_SIZE 61
#define KAFKA_BATCH_LENGTH_FIELD_END 12 /* batchLength counts from here */
#define KAFKA_BATCH_CRC_START 21
#define KAFKA_BATCH_OFF_MAGIC 16
#define KAFKA_BATCH_OFF_CRC 17
#define KAFKA_BATCH_OFF_ATTRIBUTES 21
#define KAFKA_BATCH_GROWTH 5 /* Cairn's header (66) minus Kafka's (61) */
#define KAFKA_BATCH_NEED_MORE 1

enum kafka_codec {
  KAFKA_CODEC_NONE = 0,
  KAFKA_CODEC_GZIP = 1,
  KAFKA_CODEC_SNAPPY = 2,
  KAFKA_CODEC_LZ4 = 3,
  KAFKA_CODEC_ZSTD = 4,
};

/* The size of the Kafka batch at the start of p[0..len): returns 0 with
 * *size, KAFKA_BATCH_NEED_MORE when fewer than its header's or its
 * length's bytes are there (a records field cut inside a batch), or
 * CAIRN_EBADLEN (a length shorter than a header). Borrows p. */
__attribute__((warn_unused_result)) int kafka_batch_probe(const uint8_t *p, size_t len,
                                                          size_t *size);

/* Validates the whole Kafka batch p[0..len) (length, magic 2, CRC-32C,
 * attributes) and writes Cairn's form into out (len + KAFKA_BATCH_GROWTH
 * bytes). Returns 0, or CAIRN_EBADLEN, CAIRN_EBADMAGIC, CAIRN_EBADCRC,
 * CAIRN_EBADATTR (also an unknown codec number); nothing useful is in out
 * then. Borrows both. */
__attribute__((warn_unused_result)) int kafka_batch_to_cairn(const uint8_t *p, size_t len,
                                                             uint8_t *out);

/* Writes the Kafka form of Cairn's stored batch p[0..len) (as read from a
 * partition log, already verified there) into out (len - KAFKA_BATCH_GROWTH
 * bytes), with partitionLeaderEpoch -1. Returns 0, or CAIRN_EBADLEN /
 * CAIRN_EBADMAGIC / CAIRN_EBADATTR when p is not such a batch. */
__attribute__((warn_unused_result)) int kafka_batch_from_cairn(const uint8_t *p, size_t len,
                                                               uint8_t *out);

/* The same for the header alone: p holds the stored batch's first
 * BATCH_HEADER_SIZE bytes, len is the whole batch's size (as its length
 * field says), out gets KAFKA_BATCH_HEADER_SIZE bytes; the records that
 * follow are the same bytes in both forms. Kafka's CRC is derived from
 * the stored CRC (crc32c_combine) without reading the records, so a batch
 * whose stored CRC does not match its bytes gets a Kafka CRC that does
 * not match either: the client sees the damage. Returns as
 * kafka_batch_from_cairn. */
__attribute__((warn_unused_result)) int kafka_batch_header_from_cairn(const uint8_t *p, size_t len,
                                                                      uint8_t *out);

#endif
