/* kafka_codec.c - the Kafka protocol's primitive types (kafka_codec.h). */
#include "kafka/kafka_codec.h"

#include "common/err.h"
#include "kafka/kafka_bufpool.h"

#include <stdlib.h>
#include <string.h>

#define KAFKA_UVARINT_MAX_BYTES 5 /* 32 bits */

void kafka_reader_init(struct kafka_reader *r, const uint8_t *p, size_t len)
{
  r->p = p;
  r->len = len;
  r->pos = 0;
  r->err = 0;
}

size_t kafka_reader_left(const struct kafka_reader *r)
{
  return r->err != 0 ? 0 : r->len - r->pos;
}

static void kafka_fail(struct kafka_reader *r, int err)
{
  if (r->err == 0) {
    r->err = err;
  }
}

/* The next n bytes, or NULL (truncated: latched). */
static const uint8_t *kafka_take(struct kafka_reader *r, size_t n)
{
  if (r->err != 0) {
    return NULL;
  }
  if (r->len - r->pos < n) {
    kafka_fail(r, CAIRN_ETRUNCATED);
    return NULL;
  }
  const uint8_t *p = r->p + r->pos;
  r->pos += n;
  return p;
}

int8_t kafka_get_i8(struct kafka_reader *r)
{
  const uint8_t *p = kafka_take(r, 1);
  return p != NULL ? (int8_t)p[0] : 0;
}

int16_t kafka_get_i16(struct kafka_reader *r)
{
  const uint8_t *p = kafka_take(r, 2);
  return p != NULL ? (int16_t)kafka_be16(p) : 0;
}

int32_t kafka_get_i32(struct kafka_reader *r)
{
  const uint8_t *p = kafka_take(r, 4);
  return p != NULL ? (int32_t)kafka_be32(p) : 0;
}

int64_t kafka_get_i64(struct kafka_reader *r)
{
  const uint8_t *p = kafka_take(r, 8);
  return p != NULL ? (int64_t)kafka_be64(p) : 0;
}

uint32_t kafka_get_uvarint(struct kafka_reader *r)
{
  uint32_t v = 0;
  for (int i = 0; i < KAFKA_UVARINT_MAX_BYTES; i++) {
    const uint8_t *p = kafka_take(r, 1);
    if (p == NULL) {
      return 0;
    }
    if (i == KAFKA_UVARINT_MAX_BYTES - 1 && (p[0] & 0xf0) != 0) {
      break; /* more than 32 bits */
    }
    v |= (uint32_t)(p[0] & 0x7f) << (7 * i);
    if ((p[0] & 0x80) == 0) {
      return v;
    }
  }
  kafka_fail(r, CAIRN_EBADREQUEST);
  return 0;
}

int32_t kafka_get_varint(struct kafka_reader *r)
{
  uint32_t u = kafka_get_uvarint(r);
  return (int32_t)((u >> 1) ^ (~(u & 1) + 1));
}

static struct kafka_str kafka_get_sized(struct kafka_reader *r, int64_t n)
{
  struct kafka_str s = {NULL, 0};
  if (r->err != 0) {
    return s;
  }
  if (n == -1) {
    return s;
  }
  if (n < -1) {
    kafka_fail(r, CAIRN_EBADREQUEST);
    return s;
  }
  const uint8_t *p = kafka_take(r, (size_t)n);
  if (p != NULL) {
    s.ptr = p;
    s.len = (size_t)n;
  }
  return s;
}

struct kafka_str kafka_get_string(struct kafka_reader *r)
{
  int16_t n = kafka_get_i16(r);
  return kafka_get_sized(r, n);
}

struct kafka_str kafka_get_compact_string(struct kafka_reader *r)
{
  uint32_t n = kafka_get_uvarint(r);
  return kafka_get_sized(r, (int64_t)n - 1);
}

struct kafka_str kafka_get_bytes(struct kafka_reader *r)
{
  int32_t n = kafka_get_i32(r);
  return kafka_get_sized(r, n);
}

static int32_t kafka_check_count(struct kafka_reader *r, int64_t n, size_t min_elem_bytes)
{
  if (r->err != 0) {
    return 0;
  }
  if (n < -1) {
    kafka_fail(r, CAIRN_EBADREQUEST);
    return 0;
  }
  if (n > 0 && (uint64_t)n * (min_elem_bytes > 0 ? min_elem_bytes : 1) > r->len - r->pos) {
    kafka_fail(r, (uint64_t)n > r->len ? CAIRN_EBADREQUEST : CAIRN_ETRUNCATED);
    return 0;
  }
  return (int32_t)n;
}

int32_t kafka_get_array_len(struct kafka_reader *r, size_t min_elem_bytes)
{
  int32_t n = kafka_get_i32(r);
  return kafka_check_count(r, n, min_elem_bytes);
}

int32_t kafka_get_compact_array_len(struct kafka_reader *r, size_t min_elem_bytes)
{
  uint32_t n = kafka_get_uvarint(r);
  return kafka_check_count(r, (int64_t)n - 1, min_elem_bytes);
}

void kafka_skip_tagged_fields(struct kafka_reader *r)
{
  uint32_t n = kafka_get_uvarint(r);
  for (uint32_t i = 0; i < n && r->err == 0; i++) {
    (void)kafka_get_uvarint(r); /* tag */
    uint32_t size = kafka_get_uvarint(r);
    (void)kafka_take(r, size);
  }
}

struct kafka_str kafka_get_string_f(struct kafka_reader *r, bool flexible)
{
  return flexible ? kafka_get_compact_string(r) : kafka_get_string(r);
}

int32_t kafka_get_array_len_f(struct kafka_reader *r, size_t min_elem_bytes, bool flexible)
{
  return flexible ? kafka_get_compact_array_len(r, min_elem_bytes)
                  : kafka_get_array_len(r, min_elem_bytes);
}

void kafka_get_tags(struct kafka_reader *r, bool flexible)
{
  if (flexible) {
    kafka_skip_tagged_fields(r);
  }
}

/* ---- writer ---- */

void kafka_buf_init(struct kafka_buf *b)
{
  memset(b, 0, sizeof *b);
}

int kafka_buf_init_cap(struct kafka_buf *b, size_t cap)
{
  memset(b, 0, sizeof *b);
  if (cap > KAFKA_BUF_MAX) {
    cap = KAFKA_BUF_MAX;
  }
  b->p = kafka_bufpool_get(cap > 0 ? cap : 1, &b->cap);
  return b->p != NULL ? 0 : CAIRN_ENOMEM;
}

void kafka_buf_free(struct kafka_buf *b)
{
  kafka_bufpool_put(b->p);
  memset(b, 0, sizeof *b);
}

/* Room for n more bytes, or NULL (latched). */
static uint8_t *kafka_grow(struct kafka_buf *b, size_t n)
{
  if (b->err != 0) {
    return NULL;
  }
  if (n > KAFKA_BUF_MAX - b->len) {
    b->err = CAIRN_ETOOLARGE;
    return NULL;
  }
  if (b->len + n > b->cap) {
    size_t cap = b->cap > 0 ? b->cap : 256;
    while (cap < b->len + n) {
      cap *= 2;
    }
    if (cap > KAFKA_BUF_MAX) {
      cap = KAFKA_BUF_MAX;
    }
    /* From the pool: a large answer then reuses a buffer whose pages are
     * already mapped (kafka_bufpool.h). */
    size_t got = 0;
    uint8_t *p = kafka_bufpool_get(cap, &got);
    if (p == NULL) {
      b->err = CAIRN_ENOMEM;
      return NULL;
    }
    if (b->len > 0) {
      memcpy(p, b->p, b->len);
    }
    kafka_bufpool_put(b->p);
    b->p = p;
    b->cap = got;
  }
  uint8_t *at = b->p + b->len;
  b->len += n;
  return at;
}

void kafka_put_raw(struct kafka_buf *b, const void *p, size_t n)
{
  uint8_t *at = kafka_grow(b, n);
  if (at != NULL && n > 0) {
    memcpy(at, p, n);
  }
}

void kafka_put_i8(struct kafka_buf *b, int8_t v)
{
  uint8_t *at = kafka_grow(b, 1);
  if (at != NULL) {
    at[0] = (uint8_t)v;
  }
}

void kafka_put_err(struct kafka_buf *b, int16_t code)
{
  if (b->first_err == 0) {
    b->first_err = code;
  }
  kafka_put_i16(b, code);
}

void kafka_put_i16(struct kafka_buf *b, int16_t v)
{
  uint8_t *at = kafka_grow(b, 2);
  if (at != NULL) {
    kafka_put_be16(at, (uint16_t)v);
  }
}

void kafka_put_i32(struct kafka_buf *b, int32_t v)
{
  uint8_t *at = kafka_grow(b, 4);
  if (at != NULL) {
    kafka_put_be32(at, (uint32_t)v);
  }
}

void kafka_put_i64(struct kafka_buf *b, int64_t v)
{
  uint8_t *at = kafka_grow(b, 8);
  if (at != NULL) {
    kafka_put_be64(at, (uint64_t)v);
  }
}

void kafka_put_uvarint(struct kafka_buf *b, uint32_t v)
{
  uint8_t tmp[KAFKA_UVARINT_MAX_BYTES];
  size_t n = 0;
  do {
    uint8_t byte = v & 0x7f;
    v >>= 7;
    tmp[n++] = (uint8_t)(byte | (v != 0 ? 0x80 : 0));
  } while (v != 0);
  kafka_put_raw(b, tmp, n);
}

void kafka_put_bool(struct kafka_buf *b, bool v)
{
  kafka_put_i8(b, v ? 1 : 0);
}

void kafka_put_kstr(struct kafka_buf *b, struct kafka_str s)
{
  if (s.ptr == NULL) {
    kafka_put_i16(b, -1);
    return;
  }
  size_t n = s.len > INT16_MAX ? INT16_MAX : s.len;
  kafka_put_i16(b, (int16_t)n);
  kafka_put_raw(b, s.ptr, n);
}

void kafka_put_bytes(struct kafka_buf *b, const uint8_t *p, size_t len)
{
  if (len > INT32_MAX) {
    b->err = b->err != 0 ? b->err : CAIRN_ETOOLARGE;
    return;
  }
  kafka_put_i32(b, (int32_t)len);
  kafka_put_raw(b, p, len);
}

void kafka_put_string(struct kafka_buf *b, const char *s)
{
  if (s == NULL) {
    kafka_put_i16(b, -1);
    return;
  }
  size_t n = strlen(s);
  if (n > INT16_MAX) {
    n = INT16_MAX; /* names are far shorter; never produce a negative length */
  }
  kafka_put_i16(b, (int16_t)n);
  kafka_put_raw(b, s, n);
}

void kafka_put_compact_string(struct kafka_buf *b, const char *s)
{
  if (s == NULL) {
    kafka_put_uvarint(b, 0);
    return;
  }
  size_t n = strlen(s);
  kafka_put_uvarint(b, (uint32_t)n + 1);
  kafka_put_raw(b, s, n);
}

void kafka_put_string_f(struct kafka_buf *b, const char *s, bool flexible)
{
  if (flexible) {
    kafka_put_compact_string(b, s);
  } else {
    kafka_put_string(b, s);
  }
}

void kafka_put_kstr_f(struct kafka_buf *b, struct kafka_str s, bool flexible)
{
  if (!flexible) {
    kafka_put_kstr(b, s);
    return;
  }
  if (s.ptr == NULL) {
    kafka_put_uvarint(b, 0);
    return;
  }
  size_t n = s.len > INT16_MAX ? INT16_MAX : s.len;
  kafka_put_uvarint(b, (uint32_t)n + 1);
  kafka_put_raw(b, s.ptr, n);
}

void kafka_put_array_len_f(struct kafka_buf *b, int32_t n, bool flexible)
{
  if (flexible) {
    kafka_put_compact_array_len(b, n);
  } else {
    kafka_put_array_len(b, n);
  }
}

void kafka_put_tags(struct kafka_buf *b, bool flexible)
{
  if (flexible) {
    kafka_put_empty_tagged_fields(b);
  }
}

void kafka_put_array_len(struct kafka_buf *b, int32_t n)
{
  kafka_put_i32(b, n);
}

void kafka_put_compact_array_len(struct kafka_buf *b, int32_t n)
{
  kafka_put_uvarint(b, n < 0 ? 0 : (uint32_t)n + 1);
}

void kafka_put_empty_tagged_fields(struct kafka_buf *b)
{
  kafka_put_uvarint(b, 0);
}

size_t kafka_buf_reserve(struct kafka_buf *b, size_t n)
{
  uint8_t *at = kafka_grow(b, n);
  if (at == NULL) {
    return SIZE_MAX;
  }
  memset(at, 0, n);
  return (size_t)(at - b->p);
}

void kafka_buf_set_i32(struct kafka_buf *b, size_t at, int32_t v)
{
  if (b->err == 0 && at != SIZE_MAX && at + 4 <= b->len) {
    kafka_put_be32(b->p + at, (uint32_t)v);
  }
}
