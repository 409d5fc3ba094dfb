/* test_kafka_codec.c - the Kafka protocol's primitives (kafka_codec.h) and
 * its frame decoder (kafka_conn.h): round trips, every truncation of an
 * encoded request, malformed values, "need more" against "malformed". */
#include "kafka/kafka_codec.h"

#include "common/err.h"
#include "kafka/kafka_conn.h"
#include "net/frame.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

/* One of every type, as a request body would hold them. */
static void encode_sample(struct kafka_buf *b)
{
  kafka_put_i8(b, -3);
  kafka_put_i16(b, -12345);
  kafka_put_i32(b, 0x12345678);
  kafka_put_i64(b, -0x123456789abcdefLL);
  kafka_put_uvarint(b, 300);
  kafka_put_string(b, "topic");
  kafka_put_string(b, NULL);
  kafka_put_compact_string(b, "compact");
  kafka_put_compact_string(b, NULL);
  kafka_put_array_len(b, 2);
  kafka_put_i32(b, 7);
  kafka_put_i32(b, 8);
  kafka_put_compact_array_len(b, 1);
  kafka_put_i16(b, 9);
  /* a tagged-field section with one field (tag 3, 2 bytes) */
  kafka_put_uvarint(b, 1);
  kafka_put_uvarint(b, 3);
  kafka_put_uvarint(b, 2);
  kafka_put_i16(b, 0x7777);
  kafka_put_i32(b, 99); /* after the tags */
}

/* Decodes the sample; returns the reader's error. */
static int decode_sample(const uint8_t *p, size_t len, bool check)
{
  struct kafka_reader r;
  kafka_reader_init(&r, p, len);
  int8_t a = kafka_get_i8(&r);
  int16_t b = kafka_get_i16(&r);
  int32_t c = kafka_get_i32(&r);
  int64_t d = kafka_get_i64(&r);
  uint32_t e = kafka_get_uvarint(&r);
  struct kafka_str s1 = kafka_get_string(&r);
  struct kafka_str s2 = kafka_get_string(&r);
  struct kafka_str s3 = kafka_get_compact_string(&r);
  struct kafka_str s4 = kafka_get_compact_string(&r);
  int32_t n = kafka_get_array_len(&r, 4);
  int32_t x = kafka_get_i32(&r);
  int32_t y = kafka_get_i32(&r);
  int32_t m = kafka_get_compact_array_len(&r, 2);
  int16_t z = kafka_get_i16(&r);
  kafka_skip_tagged_fields(&r);
  int32_t last = kafka_get_i32(&r);
  if (check) {
    assert_int_equal(r.err, 0);
    assert_int_equal(a, -3);
    assert_int_equal(b, -12345);
    assert_int_equal(c, 0x12345678);
    assert_true(d == -0x123456789abcdefLL);
    assert_int_equal(e, 300);
    assert_int_equal(s1.len, 5);
    assert_memory_equal(s1.ptr, "topic", 5);
    assert_null(s2.ptr);
    assert_int_equal(s3.len, 7);
    assert_memory_equal(s3.ptr, "compact", 7);
    assert_null(s4.ptr);
    assert_int_equal(n, 2);
    assert_int_equal(x, 7);
    assert_int_equal(y, 8);
    assert_int_equal(m, 1);
    assert_int_equal(z, 9);
    assert_int_equal(last, 99);
    assert_int_equal(r.pos, len);
  }
  return r.err;
}

static void test_kafka_codec_round_trips_every_type(void **state)
{
  (void)state;
  struct kafka_buf b;
  kafka_buf_init(&b);
  encode_sample(&b);
  assert_int_equal(b.err, 0);
  assert_int_equal(decode_sample(b.p, b.len, true), 0);
  kafka_buf_free(&b);
}

static void test_kafka_codec_every_truncation_is_reported_not_overread(void **state)
{
  (void)state;
  struct kafka_buf b;
  kafka_buf_init(&b);
  encode_sample(&b);
  for (size_t cut = 0; cut < b.len; cut++) {
    uint8_t *copy = malloc(cut > 0 ? cut : 1); /* exact size: ASan sees any overread */
    memcpy(copy, b.p, cut);
    assert_int_equal(decode_sample(copy, cut, false), CAIRN_ETRUNCATED);
    free(copy);
  }
  kafka_buf_free(&b);
}

static void test_kafka_codec_malformed_values_are_not_truncations(void **state)
{
  (void)state;
  struct kafka_reader r;
  const uint8_t neg_string[] = {0xff, 0xfe, 'a'}; /* length -2 */
  kafka_reader_init(&r, neg_string, sizeof neg_string);
  (void)kafka_get_string(&r);
  assert_int_equal(r.err, CAIRN_EBADREQUEST);

  const uint8_t long_varint[] = {0xff, 0xff, 0xff, 0xff, 0xff, 0x01};
  kafka_reader_init(&r, long_varint, sizeof long_varint);
  (void)kafka_get_uvarint(&r);
  assert_int_equal(r.err, CAIRN_EBADREQUEST);

  /* an array count no frame of this size could hold */
  const uint8_t huge_array[] = {0x7f, 0xff, 0xff, 0xff, 0, 0, 0, 0};
  kafka_reader_init(&r, huge_array, sizeof huge_array);
  assert_int_equal(kafka_get_array_len(&r, 4), 0);
  assert_int_equal(r.err, CAIRN_EBADREQUEST);

  const uint8_t neg_array[] = {0xff, 0xff, 0xff, 0xfe};
  kafka_reader_init(&r, neg_array, sizeof neg_array);
  (void)kafka_get_array_len(&r, 1);
  assert_int_equal(r.err, CAIRN_EBADREQUEST);

  /* null array (-1) is valid */
  const uint8_t null_array[] = {0xff, 0xff, 0xff, 0xff};
  kafka_reader_init(&r, null_array, sizeof null_array);
  assert_int_equal(kafka_get_array_len(&r, 1), -1);
  assert_int_equal(r.err, 0);

  /* once failed, reads give zeros */
  kafka_reader_init(&r, neg_string, 1);
  (void)kafka_get_i16(&r);
  assert_int_equal(kafka_get_i8(&r), 0);
  assert_int_equal(r.err, CAIRN_ETRUNCATED);
}

/* The _f forms write and read the version's form: classic lengths, or
 * compact ones and tagged-field sections; a null string and array too. */
static void test_kafka_codec_flexible_forms_round_trip(void **state)
{
  (void)state;
  for (int flexible = 0; flexible <= 1; flexible++) {
    struct kafka_buf b;
    kafka_buf_init(&b);
    kafka_put_string_f(&b, "orders", flexible);
    kafka_put_string_f(&b, NULL, flexible);
    struct kafka_str k = {(const uint8_t *)"g1", 2};
    kafka_put_kstr_f(&b, k, flexible);
    kafka_put_array_len_f(&b, 1, flexible); /* bounded by the bytes left */
    kafka_put_array_len_f(&b, -1, flexible);
    kafka_put_tags(&b, flexible);
    assert_int_equal(b.err, 0);
    /* classic: 2+6, 2, 2+2, 4, 4; compact: 1+6, 1, 1+2, 1, 1, 1 */
    assert_int_equal(b.len, flexible ? 14u : 22u);
    struct kafka_reader r;
    kafka_reader_init(&r, b.p, b.len);
    struct kafka_str s1 = kafka_get_string_f(&r, flexible);
    assert_true(s1.len == 6 && memcmp(s1.ptr, "orders", 6) == 0);
    assert_null(kafka_get_string_f(&r, flexible).ptr);
    struct kafka_str s3 = kafka_get_string_f(&r, flexible);
    assert_true(s3.len == 2 && memcmp(s3.ptr, "g1", 2) == 0);
    assert_int_equal(kafka_get_array_len_f(&r, 0, flexible), 1);
    assert_int_equal(kafka_get_array_len_f(&r, 0, flexible), -1);
    kafka_get_tags(&r, flexible);
    assert_int_equal(r.err, 0);
    assert_int_equal(kafka_reader_left(&r), 0);
    kafka_buf_free(&b);
  }
}

static void test_kafka_codec_writer_has_a_limit(void **state)
{
  (void)state;
  struct kafka_buf b;
  kafka_buf_init(&b);
  size_t at = kafka_buf_reserve(&b, KAFKA_BUF_MAX + 1);
  assert_int_equal(at, SIZE_MAX);
  assert_int_equal(b.err, CAIRN_ETOOLARGE);
  kafka_put_i32(&b, 1); /* dropped */
  assert_int_equal(b.len, 0);
  kafka_buf_free(&b);
}

static void test_kafka_frame_needs_more_until_whole_and_refuses_bad_sizes(void **state)
{
  (void)state;
  uint8_t req[4 + 10] = {0, 0, 0, 10, 0, 18, 0, 0, 0, 0, 0, 5, 0xff, 0xff};
  struct frame f;
  for (size_t have = 0; have < sizeof req; have++) {
    assert_int_equal(kafka_conn_framing.decode(req, have, 1 << 20, &f), FRAME_NEED_MORE);
    assert_true(f.need > 0);
  }
  assert_int_equal(kafka_conn_framing.decode(req, sizeof req, 1 << 20, &f), FRAME_WHOLE);
  assert_int_equal(f.size, sizeof req);
  assert_int_equal(f.payload_len, 10);
  uint64_t corr = 0;
  Cairn__Client__Api api;
  uint32_t version = 9;
  Cairn__Client__Envelope *env = (void *)1;
  assert_int_equal(kafka_conn_framing.unpack(&f, &corr, &api, &version, &env), 0);
  assert_int_equal(corr, 5);
  assert_int_equal(version, 0);
  assert_null(env);
  struct kafka_header h;
  struct kafka_reader r;
  assert_int_equal(kafka_header_read(f.payload, f.payload_len, false, &h, &r), 0);
  assert_int_equal(h.api_key, 18);
  assert_null(h.client_id.ptr);
  assert_int_equal(kafka_reader_left(&r), 0);

  const uint8_t zero[] = {0, 0, 0, 0};
  assert_int_equal(kafka_conn_framing.decode(zero, 4, 1 << 20, &f), CAIRN_EFRAMEEMPTY);
  const uint8_t small[] = {0, 0, 0, 5};
  assert_int_equal(kafka_conn_framing.decode(small, 4, 1 << 20, &f), CAIRN_EBADFRAME);
  const uint8_t twogib[] = {0x80, 0, 0, 0};
  assert_int_equal(kafka_conn_framing.decode(twogib, 4, 1 << 20, &f), CAIRN_EBADFRAME);
  const uint8_t big[] = {0, 0x20, 0, 0};
  assert_int_equal(kafka_conn_framing.decode(big, 4, 1 << 20, &f), CAIRN_ETOOLARGE);
  assert_int_equal(f.length, 0x200000);
}

/* A TLS client on a plaintext Kafka port: its ClientHello's record header
 * reads as a ~369 MB size; it is named for what it is, even under a limit
 * that would allow that size. */
static void test_kafka_frame_refuses_a_tls_client_hello(void **state)
{
  (void)state;
  const uint8_t hello[] = {0x16, 0x03, 0x01, 0x02, 0x00, 0x01, 0x00, 0x01, 0xfc, 0x03, 0x03};
  struct frame f;
  assert_int_equal(kafka_conn_framing.decode(hello, 3, 1 << 20, &f), FRAME_NEED_MORE);
  assert_int_equal(kafka_conn_framing.decode(hello, sizeof hello, 1 << 20, &f),
                   CAIRN_ETLS_ON_PLAIN);
  assert_int_equal(kafka_conn_framing.decode(hello, sizeof hello, 1u << 30, &f),
                   CAIRN_ETLS_ON_PLAIN);
  assert_true(frame_looks_like_tls(hello, 3));
  assert_false(frame_looks_like_tls(hello, 2));
  const uint8_t tls13_record[] = {0x16, 0x03, 0x03, 0x00};
  assert_true(frame_looks_like_tls(tls13_record, sizeof tls13_record));
  /* Sizes that start with 0x16 but are no TLS record header. */
  const uint8_t other[] = {0x16, 0x04, 0x00, 0x00};
  assert_false(frame_looks_like_tls(other, sizeof other));
  assert_int_equal(kafka_conn_framing.decode(other, sizeof other, 1 << 20, &f), CAIRN_ETOOLARGE);
  const uint8_t small[] = {0, 0, 0, 10};
  assert_false(frame_looks_like_tls(small, sizeof small));
}

int main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_kafka_codec_round_trips_every_type),
      cmocka_unit_test(test_kafka_codec_every_truncation_is_reported_not_overread),
      cmocka_unit_test(test_kafka_codec_malformed_values_are_not_truncations),
      cmocka_unit_test(test_kafka_codec_flexible_forms_round_trip),
      cmocka_unit_test(test_kafka_codec_writer_has_a_limit),
      cmocka_unit_test(test_kafka_frame_needs_more_until_whole_and_refuses_bad_sizes),
      cmocka_unit_test(test_kafka_frame_refuses_a_tls_client_hello),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
