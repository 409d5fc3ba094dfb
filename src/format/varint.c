/* varint.c - zigzag varints. */
#include "format/varint.h"

#include "common/err.h"

static uint64_t varint_zigzag(int64_t v) { return ((uint64_t)v << 1) ^ (uint64_t)(v >> 63); }

static int64_t varint_unzigzag(uint64_t u) { return (int64_t)(u >> 1) ^ -(int64_t)(u & 1); }

size_t varint_put64(uint8_t *p, int64_t v)
{
  uint64_t u = varint_zigzag(v);
  size_t n = 0;
  while (u >= 0x80) {
    p[n++] = (uint8_t)(u | 0x80);
    u >>= 7;
  }
  p[n++] = (uint8_t)u;
  return n;
}

size_t varint_put32(uint8_t *p, int32_t v) { return varint_put64(p, v); }

size_t varint_size64(int64_t v)
{
  uint64_t u = varint_zigzag(v);
  size_t n = 1;
  while (u >= 0x80) {
    u >>= 7;
    n++;
  }
  return n;
}

/* Reads an unsigned LEB128 of at most max_bytes whose value fits in
 * max_bits. */
static int varint_get_raw(const uint8_t *p, size_t len, size_t max_bytes, unsigned max_bits,
                          uint64_t *out)
{
  uint64_t u = 0;
  for (size_t i = 0; i < max_bytes; i++) {
    if (i >= len) {
      return CAIRN_ETRUNCATED;
    }
    uint64_t b = p[i] & 0x7f;
    unsigned shift = (unsigned)(7 * i);
    /* The last allowed byte may only carry the bits that remain. */
    if (shift + 7 > max_bits && (b >> (max_bits - shift)) != 0) {
      return CAIRN_EBADVARINT;
    }
    u |= b << shift;
    if ((p[i] & 0x80) == 0) {
      *out = u;
      return (int)(i + 1);
    }
  }
  return CAIRN_EBADVARINT;
}

int varint_get64(const uint8_t *p, size_t len, int64_t *out)
{
  uint64_t u;
  int n = varint_get_raw(p, len, VARINT64_MAX_BYTES, 64, &u);
  if (n > 0) {
    *out = varint_unzigzag(u);
  }
  return n;
}

int varint_get32(const uint8_t *p, size_t len, int32_t *out)
{
  uint64_t u;
  int n = varint_get_raw(p, len, VARINT32_MAX_BYTES, 32, &u);
  if (n > 0) {
    *out = (int32_t)varint_unzigzag(u);
  }
  return n;
}
