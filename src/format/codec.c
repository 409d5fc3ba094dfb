/* codec.c - lz4 and zstd frames for batch records, with bounded output. */
#include "format/codec.h"

#include "common/err.h"
#include "format/crc32c.h"
#include "format/endian.h"

#include <lz4frame.h>
#include <stdlib.h>
#include <string.h>
#include <zstd.h>

int codec_compress(enum batch_codec codec, int level, const void *src, size_t len,
                   uint8_t **out, size_t *out_len)
{
  size_t cap;
  uint8_t *buf;
  size_t n;
  switch (codec) {
  case BATCH_CODEC_LZ4: {
    LZ4F_preferences_t prefs;
    memset(&prefs, 0, sizeof prefs);
    prefs.compressionLevel = level;
    prefs.frameInfo.contentSize = len; /* lets the decoder size its buffer */
    cap = LZ4F_compressFrameBound(len, &prefs);
    if ((buf = malloc(cap)) == NULL) {
      return CAIRN_ENOMEM;
    }
    n = LZ4F_compressFrame(buf, cap, src, len, &prefs);
    if (LZ4F_isError(n)) {
      free(buf);
      return CAIRN_ECOMPRESS;
    }
    break;
  }
  case BATCH_CODEC_ZSTD:
    cap = ZSTD_compressBound(len);
    if ((buf = malloc(cap)) == NULL) {
      return CAIRN_ENOMEM;
    }
    n = ZSTD_compress(buf, cap, src, len, level == 0 ? ZSTD_CLEVEL_DEFAULT : level);
    if (ZSTD_isError(n)) {
      free(buf);
      return CAIRN_ECOMPRESS;
    }
    break;
  default:
    return CAIRN_EINVAL;
  }
  *out = buf;
  *out_len = n;
  return 0;
}

/* The output buffer of a decompression: grows by doubling up to max. */
struct codec_out {
  uint8_t *buf;
  size_t len;
  size_t cap;
  size_t max;
};

/* Makes room for more output; CAIRN_ETOOLARGE once at max. */
static int codec_out_grow(struct codec_out *o)
{
  if (o->cap >= o->max) {
    return CAIRN_ETOOLARGE;
  }
  size_t cap = o->cap == 0 ? 4096 : o->cap * 2;
  if (cap > o->max) {
    cap = o->max;
  }
  uint8_t *nb = realloc(o->buf, cap);
  if (nb == NULL) {
    return CAIRN_ENOMEM;
  }
  o->buf = nb;
  o->cap = cap;
  return 0;
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

int codec_decompress(enum batch_codec codec, const void *src, size_t len, size_t max_out,
                     uint8_t **out, size_t *out_len)
{
  struct codec_out o = {NULL, 0, 0, max_out};
  int rv;
  switch (codec) {
  case BATCH_CODEC_LZ4:
    rv = codec_lz4_decompress(src, len, &o);
    break;
  case BATCH_CODEC_ZSTD:
    rv = codec_zstd_decompress(src, len, &o);
    break;
  default:
    return CAIRN_EINVAL;
  }
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
