/* codec.c - the batch codecs (lz4, zstd, gzip, snappy) behind one table,
 * with bounded output. Each codec is a well-kept library (liblz4, libzstd,
 * zlib, libsnappy); this file only frames and bounds them. */
#include "format/codec.h"

#include "common/err.h"
#include "format/crc32c.h"
#include "format/endian.h"

#include <limits.h>
#include <lz4frame.h>
#include <snappy-c.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>
#include <zstd.h>

/* Each compressor allocates *out (free()) and sets *out_len. */
static int codec_lz4_compress(int level, const void *src, size_t len, uint8_t **out,
                              size_t *out_len)
{
  LZ4F_preferences_t prefs;
  memset(&prefs, 0, sizeof prefs);
  prefs.compressionLevel = level;
  prefs.frameInfo.contentSize = len; /* lets the decoder size its buffer */
  size_t cap = LZ4F_compressFrameBound(len, &prefs);
  uint8_t *buf = malloc(cap);
  if (buf == NULL) {
    return CAIRN_ENOMEM;
  }
  size_t n = LZ4F_compressFrame(buf, cap, src, len, &prefs);
  if (LZ4F_isError(n)) {
    free(buf);
    return CAIRN_ECOMPRESS;
  }
  *out = buf;
  *out_len = n;
  return 0;
}

static int codec_zstd_compress(int level, const void *src, size_t len, uint8_t **out,
                               size_t *out_len)
{
  size_t cap = ZSTD_compressBound(len);
  uint8_t *buf = malloc(cap);
  if (buf == NULL) {
    return CAIRN_ENOMEM;
  }
  size_t n = ZSTD_compress(buf, cap, src, len, level == 0 ? ZSTD_CLEVEL_DEFAULT : level);
  if (ZSTD_isError(n)) {
    free(buf);
    return CAIRN_ECOMPRESS;
  }
  *out = buf;
  *out_len = n;
  return 0;
}

/* One gzip member (RFC 1952), what Kafka's gzip codec holds. */
static int codec_gzip_compress(int level, const void *src, size_t len, uint8_t **out,
                               size_t *out_len)
{
  if (len > UINT_MAX / 2) {
    return CAIRN_ETOOLARGE; /* zlib counts in uInt */
  }
  z_stream zs;
  memset(&zs, 0, sizeof zs);
  if (deflateInit2(&zs, level == 0 ? Z_DEFAULT_COMPRESSION : level, Z_DEFLATED, 15 + 16, 8,
                   Z_DEFAULT_STRATEGY) != Z_OK) {
    return CAIRN_ENOMEM;
  }
  size_t cap = deflateBound(&zs, (uLong)len);
  uint8_t *buf = malloc(cap);
  if (buf == NULL) {
    deflateEnd(&zs);
    return CAIRN_ENOMEM;
  }
  zs.next_in = (Bytef *)(uintptr_t)src; /* zlib's API is not const-correct */
  zs.avail_in = (uInt)len;
  zs.next_out = buf;
  zs.avail_out = (uInt)cap;
  int zr = deflate(&zs, Z_FINISH);
  size_t n = zs.total_out;
  deflateEnd(&zs);
  if (zr != Z_STREAM_END) {
    free(buf);
    return CAIRN_ECOMPRESS;
  }
  *out = buf;
  *out_len = n;
  return 0;
}

/* One raw snappy block, as librdkafka writes it. */
static int codec_snappy_compress(int level, const void *src, size_t len, uint8_t **out,
                                 size_t *out_len)
{
  (void)level;
  size_t cap = snappy_max_compressed_length(len);
  uint8_t *buf = malloc(cap);
  if (buf == NULL) {
    return CAIRN_ENOMEM;
  }
  if (snappy_compress(src, len, (char *)buf, &cap) != SNAPPY_OK) {
    free(buf);
    return CAIRN_ECOMPRESS;
  }
  *out = buf;
  *out_len = cap;
  return 0;
}

/* The output buffer of a decompression: grows by doubling up to max. */
struct codec_out {
  uint8_t *buf;
  size_t len;
  size_t cap;
  size_t max;
};

/* Makes room for need bytes in all; CAIRN_ETOOLARGE when need passes max.
 * Codecs that say their output size up front (snappy) reserve it at once. */
static int codec_out_reserve(struct codec_out *o, size_t need)
{
  if (need > o->max) {
    return CAIRN_ETOOLARGE;
  }
  if (need <= o->cap) {
    return 0;
  }
  uint8_t *nb = realloc(o->buf, need);
  if (nb == NULL) {
    return CAIRN_ENOMEM;
  }
  o->buf = nb;
  o->cap = need;
  return 0;
}

/* Makes room for more output by doubling; CAIRN_ETOOLARGE once at max. */
static int codec_out_grow(struct codec_out *o)
{
  if (o->cap >= o->max) {
    return CAIRN_ETOOLARGE;
  }
  size_t cap = o->cap == 0 ? 4096 : o->cap * 2;
  return codec_out_reserve(o, cap < o->max ? cap : o->max);
}

static int codec_lz4_decompress(const uint8_t *src, size_t len, struct codec_out *o)
{
  LZ4F_dctx *dctx;
  if (LZ4F_isError(LZ4F_createDecompressionContext(&dctx, LZ4F_VERSION))) {
    return CAIRN_ENOMEM;
  }
  size_t in = 0;
  int rv = 0;
  size_t hint = 1;
  while (hint != 0) {
    if (o->len == o->cap && (rv = codec_out_grow(o)) != 0) {
      break;
    }
    size_t dst_size = o->cap - o->len;
    size_t src_size = len - in;
    hint = LZ4F_decompress(dctx, o->buf + o->len, &dst_size, src + in, &src_size, NULL);
    if (LZ4F_isError(hint)) {
      rv = CAIRN_ECOMPRESS;
      break;
    }
    in += src_size;
    o->len += dst_size;
    if (hint != 0 && in == len && dst_size == 0 && o->len < o->cap) {
      rv = CAIRN_ECOMPRESS; /* the frame is cut short */
      break;
    }
  }
  if (rv == 0 && in != len) {
    rv = CAIRN_ECOMPRESS; /* bytes after the frame */
  }
  LZ4F_freeDecompressionContext(dctx);
  return rv;
}

static int codec_zstd_decompress(const uint8_t *src, size_t len, struct codec_out *o)
{
  ZSTD_DCtx *dctx = ZSTD_createDCtx();
  if (dctx == NULL) {
    return CAIRN_ENOMEM;
  }
  if (ZSTD_isError(ZSTD_DCtx_setParameter(dctx, ZSTD_d_windowLogMax, CODEC_ZSTD_WINDOW_LOG_MAX))) {
    ZSTD_freeDCtx(dctx);
    return CAIRN_ECOMPRESS;
  }
  ZSTD_inBuffer inb = {src, len, 0};
  int rv = 0;
  size_t left = 1;
  while (left != 0) {
    if (o->len == o->cap && (rv = codec_out_grow(o)) != 0) {
      break;
    }
    ZSTD_outBuffer outb = {o->buf, o->cap, o->len};
    size_t before_in = inb.pos;
    left = ZSTD_decompressStream(dctx, &outb, &inb);
    if (ZSTD_isError(left)) {
      rv = CAIRN_ECOMPRESS;
      break;
    }
    size_t made = outb.pos - o->len;
    o->len = outb.pos;
    if (left != 0 && inb.pos == inb.size && made == 0 && inb.pos == before_in &&
        o->len < o->cap) {
      rv = CAIRN_ECOMPRESS; /* the frame is cut short */
      break;
    }
  }
  if (rv == 0 && inb.pos != inb.size) {
    rv = CAIRN_ECOMPRESS; /* bytes after the frame */
  }
  ZSTD_freeDCtx(dctx);
  return rv;
}

/* One or more gzip members back to back (Java's GZIPInputStream reads
 * concatenated members too). zlib's window is at most 32 KiB: the decoder's
 * own memory is bounded; the output is bounded by o->max. */
static int codec_gzip_decompress(const uint8_t *src, size_t len, struct codec_out *o)
{
  if (len > UINT_MAX) {
    return CAIRN_ETOOLARGE;
  }
  z_stream zs;
  memset(&zs, 0, sizeof zs);
  if (inflateInit2(&zs, 15 + 16) != Z_OK) {
    return CAIRN_ENOMEM;
  }
  zs.next_in = (Bytef *)(uintptr_t)src;
  zs.avail_in = (uInt)len;
  int rv = 0;
  for (;;) {
    if (o->len == o->cap && (rv = codec_out_grow(o)) != 0) {
      break;
    }
    size_t room = o->cap - o->len;
    uInt given = room > UINT_MAX ? UINT_MAX : (uInt)room; /* zlib counts in uInt */
    zs.next_out = o->buf + o->len;
    zs.avail_out = given;
    int zr = inflate(&zs, Z_NO_FLUSH);
    o->len += given - zs.avail_out;
    if (zr == Z_STREAM_END) {
      if (zs.avail_in == 0) {
        break;
      }
      if (inflateReset(&zs) != Z_OK) {
        rv = CAIRN_ECOMPRESS;
        break;
      }
      continue; /* another member; garbage after the first fails as a header */
    }
    if (zr == Z_MEM_ERROR) {
      rv = CAIRN_ENOMEM;
      break;
    }
    if (zr == Z_BUF_ERROR && zs.avail_out != 0) {
      rv = CAIRN_ECOMPRESS; /* all input used, no end of stream: cut short */
      break;
    }
    if (zr != Z_OK && zr != Z_BUF_ERROR) {
      rv = CAIRN_ECOMPRESS;
      break;
    }
  }
  inflateEnd(&zs);
  return rv;
}

/* xerial's framing (snappy-java's SnappyOutputStream, kafka-python's
 * default): a 16-byte header, the magic below then version and compatible
 * version (big-endian u32 each), then blocks of a big-endian u32 length
 * followed by one raw snappy block. */
static const uint8_t codec_xerial_magic[8] = {0x82, 'S', 'N', 'A', 'P', 'P', 'Y', 0};
#define CODEC_XERIAL_HEADER_SIZE 16

/* Appends one raw snappy block; its declared size is checked against
 * o->max before anything is allocated. */
static int codec_snappy_block(const uint8_t *src, size_t len, struct codec_out *o)
{
  size_t n;
  if (snappy_uncompressed_length((const char *)src, len, &n) != SNAPPY_OK) {
    return CAIRN_ECOMPRESS;
  }
  if (n > o->max - o->len) {
    return CAIRN_ETOOLARGE;
  }
  int rv = codec_out_reserve(o, o->len + n);
  if (rv != 0) {
    return rv;
  }
  size_t got = n;
  if (snappy_uncompress((const char *)src, len, (char *)o->buf + o->len, &got) != SNAPPY_OK ||
      got != n) {
    return CAIRN_ECOMPRESS;
  }
  o->len += n;
  return 0;
}

/* Raw snappy (librdkafka) or xerial-framed blocks (kafka-python, Java):
 * the magic tells them apart, as librdkafka's own reader does. */
static int codec_snappy_decompress(const uint8_t *src, size_t len, struct codec_out *o)
{
  if (len < CODEC_XERIAL_HEADER_SIZE || memcmp(src, codec_xerial_magic, 8) != 0) {
    return codec_snappy_block(src, len, o);
  }
  size_t pos = CODEC_XERIAL_HEADER_SIZE;
  while (pos < len) {
    if (len - pos < 4) {
      return CAIRN_ECOMPRESS; /* a block length cut short */
    }
    uint32_t blen = ((uint32_t)src[pos] << 24) | ((uint32_t)src[pos + 1] << 16) |
                    ((uint32_t)src[pos + 2] << 8) | src[pos + 3];
    pos += 4;
    if (blen > len - pos) {
      return CAIRN_ECOMPRESS;
    }
    int rv = codec_snappy_block(src + pos, blen, o);
    if (rv != 0) {
      return rv;
    }
    pos += blen;
  }
  return 0;
}

/* The codec table: every number the stored format knows, in number order. */
struct codec_ops {
  const char *name;
  int (*compress)(int level, const void *src, size_t len, uint8_t **out, size_t *out_len);
  int (*decompress)(const uint8_t *src, size_t len, struct codec_out *o);
};

static const struct codec_ops codec_table[] = {
    [BATCH_CODEC_NONE] = {"none", NULL, NULL},
    [BATCH_CODEC_LZ4] = {"lz4", codec_lz4_compress, codec_lz4_decompress},
    [BATCH_CODEC_ZSTD] = {"zstd", codec_zstd_compress, codec_zstd_decompress},
    [BATCH_CODEC_GZIP] = {"gzip", codec_gzip_compress, codec_gzip_decompress},
    [BATCH_CODEC_SNAPPY] = {"snappy", codec_snappy_compress, codec_snappy_decompress},
};
_Static_assert(sizeof codec_table / sizeof codec_table[0] == BATCH_CODEC_MAX + 1,
               "one table entry per codec number");

static const struct codec_ops *codec_get(int codec)
{
  return codec >= 0 && codec <= BATCH_CODEC_MAX ? &codec_table[codec] : NULL;
}

const char *codec_name(int codec)
{
  const struct codec_ops *ops = codec_get(codec);
  return ops != NULL ? ops->name : NULL;
}

int codec_compress(enum batch_codec codec, int level, const void *src, size_t len,
                   uint8_t **out, size_t *out_len)
{
  const struct codec_ops *ops = codec_get((int)codec);
  if (ops == NULL || ops->compress == NULL) {
    return CAIRN_EINVAL;
  }
  return ops->compress(level, src, len, out, out_len);
}

int codec_decompress(enum batch_codec codec, const void *src, size_t len, size_t max_out,
                     uint8_t **out, size_t *out_len)
{
  const struct codec_ops *ops = codec_get((int)codec);
  if (ops == NULL || ops->decompress == NULL) {
    return CAIRN_EINVAL;
  }
  struct codec_out o = {NULL, 0, 0, max_out};
  int rv = ops->decompress(src, len, &o);
  if (rv != 0) {
    free(o.buf);
    return rv;
  }
  if (o.buf == NULL && (o.buf = malloc(1)) == NULL) {
    return CAIRN_ENOMEM;
  }
  *out = o.buf;
  *out_len = o.len;
  return 0;
}

/* Rewrites the header fields that depend on the records section. */
static void codec_batch_fix_header(uint8_t *p, size_t len, int codec)
{
  uint16_t attr = le_get16(p + BATCH_OFF_ATTRIBUTES);
  attr = (uint16_t)((attr & ~BATCH_ATTR_CODEC_MASK) | (unsigned)codec);
  le_put16(p + BATCH_OFF_ATTRIBUTES, attr);
  le_put32(p + BATCH_OFF_LENGTH, (uint32_t)(len - BATCH_LENGTH_FIELD_END));
  le_put32(p + BATCH_OFF_CRC, crc32c(p + BATCH_CRC_START, len - BATCH_CRC_START));
}

int codec_batch_decompress(const uint8_t *p, size_t len, size_t max_bytes, uint8_t **out,
                           size_t *out_len)
{
  if (len < BATCH_HEADER_SIZE || max_bytes < BATCH_HEADER_SIZE) {
    return CAIRN_EBADLEN;
  }
  int codec = le_get16(p + BATCH_OFF_ATTRIBUTES) & BATCH_ATTR_CODEC_MASK;
  uint8_t *rec;
  size_t rec_len;
  int rv = codec_decompress((enum batch_codec)codec, p + BATCH_HEADER_SIZE,
                            len - BATCH_HEADER_SIZE, max_bytes - BATCH_HEADER_SIZE, &rec, &rec_len);
  if (rv != 0) {
    return rv;
  }
  size_t n = BATCH_HEADER_SIZE + rec_len;
  uint8_t *b = malloc(n);
  if (b == NULL) {
    free(rec);
    return CAIRN_ENOMEM;
  }
  memcpy(b, p, BATCH_HEADER_SIZE);
  memcpy(b + BATCH_HEADER_SIZE, rec, rec_len);
  free(rec);
  codec_batch_fix_header(b, n, BATCH_CODEC_NONE);
  *out = b;
  *out_len = n;
  return 0;
}

int codec_batch_compress(enum batch_codec codec, int level, uint8_t **p, size_t *len)
{
  if (*len < BATCH_HEADER_SIZE) {
    return CAIRN_EBADLEN;
  }
  uint8_t *z;
  size_t zlen;
  int rv = codec_compress(codec, level, *p + BATCH_HEADER_SIZE, *len - BATCH_HEADER_SIZE, &z, &zlen);
  if (rv != 0) {
    return rv;
  }
  if (zlen >= *len - BATCH_HEADER_SIZE) {
    free(z);
    return 0; /* incompressible: send it as it is */
  }
  size_t n = BATCH_HEADER_SIZE + zlen;
  uint8_t *b = malloc(n);
  if (b == NULL) {
    free(z);
    return CAIRN_ENOMEM;
  }
  memcpy(b, *p, BATCH_HEADER_SIZE);
  memcpy(b + BATCH_HEADER_SIZE, z, zlen);
  free(z);
  codec_batch_fix_header(b, n, (int)codec);
  free(*p);
  *p = b;
  *len = n;
  return 0;
}
