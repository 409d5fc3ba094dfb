/* codec.h - the compression codecs of record batches, one table: lz4 and
 * zstd frames (what libcairn's producer writes), gzip (zlib) and snappy
 * (libsnappy; raw blocks as librdkafka sends them and the xerial framing
 * kafka-python and the Java client send), all with bounded output. The
 * producer compresses a batch's records section; the consumer decompresses
 * it; the broker never does: it stores every codec's batches as sent
 * (batch_validate). See docs/format.md ("Compressed batches"). */
#ifndef CAIRN_CODEC_H
#define CAIRN_CODEC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "format/batch.h"

/* zstd frames whose window needs more than 2^CODEC_ZSTD_WINDOW_LOG_MAX
 * bytes are refused when decompressing (bounds the decoder's memory). */
#define CODEC_ZSTD_WINDOW_LOG_MAX 24

/* The codec's name ("none", "lz4", "zstd", "gzip", "snappy"), or NULL for
 * a number that is no codec. Returns borrowed (static). */
const char *codec_name(int codec);

/* Compresses src[0..len) with codec (any but BATCH_CODEC_NONE; level 0 is
 * the codec's default; snappy has no levels and writes one raw block). Returns 0 with *out (owned: free with free()) and
 * *out_len, or CAIRN_EINVAL (unknown codec), CAIRN_ECOMPRESS, CAIRN_ENOMEM.
 * Context: any thread. */
__attribute__((warn_unused_result)) int codec_compress(enum batch_codec codec, int level,
                                                       const void *src, size_t len,
                                                       uint8_t **out, size_t *out_len);

/* Decompresses one whole frame src[0..len) of codec into a buffer that
 * grows as output arrives but never beyond max_out bytes. Returns 0 with
 * *out (owned: free()) and *out_len, or CAIRN_ETOOLARGE (the output would
 * pass max_out), CAIRN_ECOMPRESS (not a valid frame, trailing bytes, a
 * truncated frame, a zstd window above the limit; for snappy a raw block
 * or xerial-framed blocks, for gzip one or more gzip members), CAIRN_EINVAL (unknown
 * codec), CAIRN_ENOMEM. Context: any thread. */
__attribute__((warn_unused_result)) int codec_decompress(enum batch_codec codec,
                                                         const void *src, size_t len,
                                                         size_t max_out, uint8_t **out,
                                                         size_t *out_len);

/* Decompresses the batch p[0..len) (a compressed one; its header is
 * trusted as far as batch_verify() checks it) into an uncompressed batch:
 * the same header with the codec bits cleared, batch_length adjusted and
 * the CRC recomputed, followed by the records. The result is at most
 * max_bytes (else CAIRN_ETOOLARGE). Returns 0 with *out (owned: free())
 * and *out_len, or a code as codec_decompress(). Context: any thread. */
__attribute__((warn_unused_result)) int codec_batch_decompress(const uint8_t *p, size_t len,
                                                               size_t max_bytes, uint8_t **out,
                                                               size_t *out_len);

/* Compresses the records section of the uncompressed batch p[0..len)
 * (made by batch_builder_finish) with codec, in place of *p: on success
 * *p and *len are replaced by a new buffer (the old one freed) with the codec
 * bits set, batch_length adjusted and the CRC recomputed. When the
 * compressed form is not smaller, the batch is left as it is and 0 is
 * returned (the codec bits stay 0). Returns 0 or a code as
 * codec_compress(). Context: any thread. */
__attribute__((warn_unused_result)) int codec_batch_compress(enum batch_codec codec, int level,
                                                             uint8_t **p, size_t *len);

#endif
