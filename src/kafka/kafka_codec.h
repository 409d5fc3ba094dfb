/* kafka_codec.h - the Kafka protocol's primitive types: a bounded reader
 * over a whole request and a growing writer for an answer's body.
 *
 * Types (all integers big-endian; Apache Kafka's protocol guide):
 *   int8..int64              fixed width
 *   uvarint / varint         7 bits a byte, least significant first;
 *                            varint is zigzag (at most 5 bytes for 32 bits)
 *   string                   int16 length, then bytes; nullable: -1 = null
 *   bytes                    int32 length, then bytes; nullable: -1 = null
 *   array                    int32 count, then elements; nullable: -1 = null
 *   compact string/bytes/array (flexible versions): uvarint N+1, 0 = null
 *   tagged fields            uvarint count, then (uvarint tag, uvarint size,
 *                            size bytes) each; every tag is skipped here
 *
 * The reader works on a whole frame (kafka_conn.c has waited for all of
 * it), so a field running past the end is malformed, not "need more": the
 * first failure latches in r->err, CAIRN_ETRUNCATED for a field cut short,
 * CAIRN_EBADREQUEST for a value no encoder makes (a length below -1, a
 * varint too long, an array count larger than the bytes left could hold).
 * Later reads return zero values, so a decoder checks r->err once at the
 * end.
 *
 * The writer grows up to KAFKA_BUF_MAX bytes; past it (or without memory)
 * it latches b->err and drops further writes.
 *
 * Context: any thread; no global state. */
#ifndef CAIRN_KAFKA_CODEC_H
#define CAIRN_KAFKA_CODEC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The largest answer body one buffer may hold: a Fetch answer is bounded
 * by the request's max_bytes (capped at KAFKA_FETCH_MAX_BYTES) plus
 * headers. */
#define KAFKA_BUF_MAX (80u * 1024 * 1024)

static inline uint16_t kafka_be16(const uint8_t *p)
{
  return (uint16_t)((p[0] << 8) | p[1]);
}
static inline uint32_t kafka_be32(const uint8_t *p)
{
  return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3];
}
static inline uint64_t kafka_be64(const uint8_t *p)
{
  return ((uint64_t)kafka_be32(p) << 32) | kafka_be32(p + 4);
}
static inline void kafka_put_be16(uint8_t *p, uint16_t v)
{
  p[0] = (uint8_t)(v >> 8);
  p[1] = (uint8_t)v;
}
static inline void kafka_put_be32(uint8_t *p, uint32_t v)
{
  p[0] = (uint8_t)(v >> 24);
  p[1] = (uint8_t)(v >> 16);
  p[2] = (uint8_t)(v >> 8);
  p[3] = (uint8_t)v;
}
static inline void kafka_put_be64(uint8_t *p, uint64_t v)
{
  kafka_put_be32(p, (uint32_t)(v >> 32));
  kafka_put_be32(p + 4, (uint32_t)v);
}

struct kafka_reader {
  const uint8_t *p; /* borrowed */
  size_t len;
  size_t pos;
  int err; /* 0, CAIRN_ETRUNCATED or CAIRN_EBADREQUEST: the first failure */
};

/* A string or bytes field: borrowed from the reader's buffer; ptr NULL for
 * null (len 0). Not NUL-terminated. */
struct kafka_str {
  const uint8_t *ptr;
  size_t len;
};

void kafka_reader_init(struct kafka_reader *r, const uint8_t *p, size_t len);
size_t kafka_reader_left(const struct kafka_reader *r);

int8_t kafka_get_i8(struct kafka_reader *r);
int16_t kafka_get_i16(struct kafka_reader *r);
int32_t kafka_get_i32(struct kafka_reader *r);
int64_t kafka_get_i64(struct kafka_reader *r);
uint32_t kafka_get_uvarint(struct kafka_reader *r);
int32_t kafka_get_varint(struct kafka_reader *r);
/* int16-length string; nullable ones give ptr NULL for -1. A non-nullable
 * field may still be null on the wire: the caller decides. */
struct kafka_str kafka_get_string(struct kafka_reader *r);
struct kafka_str kafka_get_compact_string(struct kafka_reader *r);
/* int32-length bytes, -1 = null. */
struct kafka_str kafka_get_bytes(struct kafka_reader *r);
/* An array's count: -1 for null, else 0..n with n * min_elem_bytes not
 * past the end (so a hostile count cannot make the caller allocate more
 * than the frame could describe). */
int32_t kafka_get_array_len(struct kafka_reader *r, size_t min_elem_bytes);
int32_t kafka_get_compact_array_len(struct kafka_reader *r, size_t min_elem_bytes);
/* Skips a tagged-field section (every tag is optional to us). */
void kafka_skip_tagged_fields(struct kafka_reader *r);

/* A field in the form of the request's version: flexible (compact strings
 * and arrays, tagged-field sections) or classic (int16/int32 lengths, no
 * tags). kafka_get_tags skips a tagged-field section when flexible and
 * reads nothing otherwise. */
struct kafka_str kafka_get_string_f(struct kafka_reader *r, bool flexible);
int32_t kafka_get_array_len_f(struct kafka_reader *r, size_t min_elem_bytes, bool flexible);
void kafka_get_tags(struct kafka_reader *r, bool flexible);

struct kafka_buf {
  uint8_t *p; /* owned: free with kafka_buf_free, or taken by the caller
               * (then given back with kafka_bufpool_put, not free) */
  size_t len, cap;
  int err; /* 0, CAIRN_ENOMEM or CAIRN_ETOOLARGE */
  int16_t first_err; /* the first non-zero code put with kafka_put_err, 0 none:
                      * what the node's metrics count the answer as */
};

void kafka_buf_init(struct kafka_buf *b);
/* Like kafka_buf_init with room for cap bytes already (capped at
 * KAFKA_BUF_MAX), for an answer whose size is known ahead: one buffer from
 * the pool instead of a doubling series. Returns 0 or CAIRN_ENOMEM (b is
 * then empty and usable; kafka_buf_free is still right). */
__attribute__((warn_unused_result)) int kafka_buf_init_cap(struct kafka_buf *b, size_t cap);
void kafka_buf_free(struct kafka_buf *b);
void kafka_put_raw(struct kafka_buf *b, const void *p, size_t n);
void kafka_put_i8(struct kafka_buf *b, int8_t v);
void kafka_put_i16(struct kafka_buf *b, int16_t v);
/* A Kafka error code field (top-level or per partition): kafka_put_i16,
 * and the first non-zero one is kept in b->first_err. */
void kafka_put_err(struct kafka_buf *b, int16_t code);
void kafka_put_i32(struct kafka_buf *b, int32_t v);
void kafka_put_i64(struct kafka_buf *b, int64_t v);
void kafka_put_uvarint(struct kafka_buf *b, uint32_t v);
void kafka_put_bool(struct kafka_buf *b, bool v);
/* s NUL-terminated; NULL writes null (-1) */
void kafka_put_string(struct kafka_buf *b, const char *s);
void kafka_put_compact_string(struct kafka_buf *b, const char *s);
/* A string read from a request (ptr NULL writes null). */
void kafka_put_kstr(struct kafka_buf *b, struct kafka_str s);
/* int32-length bytes (never null). */
void kafka_put_bytes(struct kafka_buf *b, const uint8_t *p, size_t len);
void kafka_put_array_len(struct kafka_buf *b, int32_t n);
void kafka_put_compact_array_len(struct kafka_buf *b, int32_t n); /* -1: null */
void kafka_put_empty_tagged_fields(struct kafka_buf *b);
/* The writing side of kafka_get_*_f: the answer's form for its version.
 * kafka_put_tags writes an empty tagged-field section when flexible
 * (also the response header v1's, first in a flexible answer body). */
void kafka_put_string_f(struct kafka_buf *b, const char *s, bool flexible);
void kafka_put_kstr_f(struct kafka_buf *b, struct kafka_str s, bool flexible);
void kafka_put_array_len_f(struct kafka_buf *b, int32_t n, bool flexible);
void kafka_put_tags(struct kafka_buf *b, bool flexible);
/* Reserves n bytes and returns their offset (to fill with
 * kafka_buf_set_i32 once known); SIZE_MAX after a failure. */
size_t kafka_buf_reserve(struct kafka_buf *b, size_t n);
void kafka_buf_set_i32(struct kafka_buf *b, size_t at, int32_t v);

#endif
