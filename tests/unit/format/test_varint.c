/* test_varint.c - zigzag varints: round trips, sizes, and the rejection of
 * truncated, overlong and overflowing input. */
#include "format/varint.h"

#include "common/err.h"
#include "testutil.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

static void check_round_trip64(int64_t v)
{
  uint8_t buf[VARINT64_MAX_BYTES + 4];
  memset(buf, 0xAA, sizeof buf);
  size_t n = varint_put64(buf, v);
  assert_true(n >= 1 && n <= VARINT64_MAX_BYTES);
  assert_int_equal(n, varint_size64(v));
  assert_int_equal(buf[n], 0xAA); /* wrote no more than it says */
  int64_t out = 0;
  assert_int_equal(varint_get64(buf, n, &out), (int)n);
  assert_true(out == v);
  /* Trailing bytes are not consumed. */
  assert_int_equal(varint_get64(buf, sizeof buf, &out), (int)n);
  assert_true(out == v);
}

static void check_round_trip32(int32_t v)
{
  uint8_t buf[VARINT64_MAX_BYTES + 4];
  memset(buf, 0xAA, sizeof buf);
  size_t n = varint_put32(buf, v);
  assert_true(n >= 1 && n <= VARINT32_MAX_BYTES);
  assert_int_equal(n, varint_size64(v));
  assert_int_equal(buf[n], 0xAA);
  int32_t out = 0;
  assert_int_equal(varint_get32(buf, n, &out), (int)n);
  assert_int_equal(out, v);
  /* A 32-bit varint is also a valid 64-bit one with the same value. */
  int64_t out64 = 0;
  assert_int_equal(varint_get64(buf, n, &out64), (int)n);
  assert_true(out64 == v);
}

static void test_varint_round_trips_edge_values_64(void **state)
{
  (void)state;
  const int64_t vals[] = {0,         1,          -1,         2,         -2,        63,
                          -64,       64,         -65,        8191,      -8192,     8192,
                          INT32_MAX, INT32_MIN,  INT64_MAX,  INT64_MIN, INT64_MAX - 1,
                          INT64_MIN + 1, (int64_t)INT32_MAX + 1, (int64_t)INT32_MIN - 1};
  for (size_t i = 0; i < sizeof vals / sizeof vals[0]; i++) {
    check_round_trip64(vals[i]);
  }
}

static void test_varint_round_trips_edge_values_32(void **state)
{
  (void)state;
  const int32_t vals[] = {0, 1, -1, 2, -2, 63, -64, 64, -65, 8191, -8192,
                          INT32_MAX, INT32_MIN, INT32_MAX - 1, INT32_MIN + 1};
  for (size_t i = 0; i < sizeof vals / sizeof vals[0]; i++) {
    check_round_trip32(vals[i]);
  }
}

static void test_varint_uses_zigzag_encoding(void **state)
{
  (void)state;
  uint8_t buf[VARINT64_MAX_BYTES];
  assert_int_equal(varint_put64(buf, 0), 1);
  assert_int_equal(buf[0], 0x00);
  assert_int_equal(varint_put64(buf, -1), 1);
  assert_int_equal(buf[0], 0x01);
  assert_int_equal(varint_put64(buf, 1), 1);
  assert_int_equal(buf[0], 0x02);
  assert_int_equal(varint_put64(buf, -64), 1);
  assert_int_equal(buf[0], 0x7F);
  assert_int_equal(varint_put64(buf, 64), 2);
  assert_int_equal(buf[0], 0x80);
  assert_int_equal(buf[1], 0x01);
  assert_int_equal(varint_put64(buf, 150), 2); /* zigzag 300 = 0xAC 0x02 */
  assert_int_equal(buf[0], 0xAC);
  assert_int_equal(buf[1], 0x02);
}

static void test_varint_extremes_use_max_bytes(void **state)
{
  (void)state;
  assert_int_equal(varint_size64(INT64_MAX), VARINT64_MAX_BYTES);
  assert_int_equal(varint_size64(INT64_MIN), VARINT64_MAX_BYTES);
  assert_int_equal(varint_size64(INT32_MAX), VARINT32_MAX_BYTES);
  assert_int_equal(varint_size64(INT32_MIN), VARINT32_MAX_BYTES);
  assert_int_equal(varint_size64(0), 1);
  assert_int_equal(varint_size64(-1), 1);
}

static void test_varint_size64_matches_bytes_written_at_every_boundary(void **state)
{
  (void)state;
  uint8_t buf[VARINT64_MAX_BYTES];
  /* zigzag(v) crosses a 7-bit boundary at v = 2^(7k-1) and -2^(7k-1)-1. */
  for (int k = 1; k <= 9; k++) {
    int64_t edge = (int64_t)1 << (7 * k - 1);
    const int64_t vals[] = {edge - 1, edge, -edge, -edge - 1};
    for (size_t i = 0; i < 4; i++) {
      size_t n = varint_put64(buf, vals[i]);
      assert_int_equal(n, varint_size64(vals[i]));
    }
    assert_int_equal(varint_size64(edge - 1), (size_t)k);
    assert_int_equal(varint_size64(edge), (size_t)k + 1);
    assert_int_equal(varint_size64(-edge), (size_t)k);
    assert_int_equal(varint_size64(-edge - 1), (size_t)k + 1);
  }
}

static void test_varint_round_trips_random_values(void **state)
{
  (void)state;
  uint64_t rs = tu_seed("test_varint_round_trips_random_values");
  for (int i = 0; i < 100000; i++) {
    uint64_t r = tu_rand(&rs);
    /* Spread over all sizes: shift by a random amount. */
    int64_t v = (int64_t)(r >> (tu_rand(&rs) % 64));
    if (tu_rand(&rs) & 1) {
      v = -v - 1;
    }
    check_round_trip64(v);
    check_round_trip32((int32_t)(uint32_t)v);
  }
}

static void test_varint_rejects_truncated_input(void **state)
{
  (void)state;
  uint8_t buf[VARINT64_MAX_BYTES] = {0};
  int64_t v64;
  int32_t v32;
  /* Empty input. */
  assert_int_equal(varint_get64(buf, 0, &v64), CAIRN_ETRUNCATED);
  assert_int_equal(varint_get32(buf, 0, &v32), CAIRN_ETRUNCATED);
  /* Every proper prefix of a valid encoding. */
  size_t n = varint_put64(buf, INT64_MIN);
  assert_int_equal(n, VARINT64_MAX_BYTES);
  for (size_t len = 0; len < n; len++) {
    assert_int_equal(varint_get64(buf, len, &v64), CAIRN_ETRUNCATED);
  }
  n = varint_put32(buf, INT32_MAX);
  assert_int_equal(n, VARINT32_MAX_BYTES);
  for (size_t len = 0; len < n; len++) {
    assert_int_equal(varint_get32(buf, len, &v32), CAIRN_ETRUNCATED);
  }
  /* A continuation bit on the last byte available. */
  const uint8_t cont[] = {0x80};
  assert_int_equal(varint_get64(cont, 1, &v64), CAIRN_ETRUNCATED);
  assert_int_equal(varint_get32(cont, 1, &v32), CAIRN_ETRUNCATED);
}

static void test_varint_rejects_overlong_64(void **state)
{
  (void)state;
  uint8_t buf[11];
  memset(buf, 0x80, sizeof buf);
  int64_t v = 0;
  assert_int_equal(varint_get64(buf, sizeof buf, &v), CAIRN_EBADVARINT);
  /* 10 continuation bytes then a terminator: 11 bytes, one too many. */
  buf[10] = 0x00;
  assert_int_equal(varint_get64(buf, sizeof buf, &v), CAIRN_EBADVARINT);
  /* Ten bytes all with continuation: overlong even though input ends. */
  assert_int_equal(varint_get64(buf, 10, &v), CAIRN_EBADVARINT);
}

static void test_varint_rejects_overlong_32(void **state)
{
  (void)state;
  const uint8_t six[] = {0x80, 0x80, 0x80, 0x80, 0x80, 0x00};
  int32_t v = 0;
  assert_int_equal(varint_get32(six, sizeof six, &v), CAIRN_EBADVARINT);
  const uint8_t five_cont[] = {0x80, 0x80, 0x80, 0x80, 0x80};
  assert_int_equal(varint_get32(five_cont, sizeof five_cont, &v), CAIRN_EBADVARINT);
}

static void test_varint_rejects_overflowing_last_byte_64(void **state)
{
  (void)state;
  /* Tenth byte may carry only bit 63 (value 0 or 1). */
  uint8_t buf[VARINT64_MAX_BYTES];
  memset(buf, 0xFF, sizeof buf);
  buf[9] = 0x01;
  int64_t v = 0;
  assert_int_equal(varint_get64(buf, sizeof buf, &v), VARINT64_MAX_BYTES);
  assert_true(v == INT64_MIN); /* zigzag 2^64-1 */
  for (unsigned last = 0x02; last <= 0x7F; last++) {
    buf[9] = (uint8_t)last;
    assert_int_equal(varint_get64(buf, sizeof buf, &v), CAIRN_EBADVARINT);
  }
  buf[9] = 0x81; /* bit 63 with a continuation: overlong */
  assert_int_equal(varint_get64(buf, sizeof buf, &v), CAIRN_EBADVARINT);
}

static void test_varint_rejects_overflowing_last_byte_32(void **state)
{
  (void)state;
  /* Fifth byte may carry only bits 28..31 (value 0..15). */
  uint8_t buf[VARINT32_MAX_BYTES];
  memset(buf, 0xFF, sizeof buf);
  buf[4] = 0x0F;
  int32_t v = 0;
  assert_int_equal(varint_get32(buf, sizeof buf, &v), VARINT32_MAX_BYTES);
  assert_int_equal(v, INT32_MIN); /* zigzag 2^32-1 */
  for (unsigned last = 0x10; last <= 0x7F; last++) {
    buf[4] = (uint8_t)last;
    assert_int_equal(varint_get32(buf, sizeof buf, &v), CAIRN_EBADVARINT);
  }
  /* A 64-bit value too big for 32 bits is rejected by the 32-bit reader. */
  uint8_t big[VARINT64_MAX_BYTES];
  size_t n = varint_put64(big, (int64_t)INT32_MAX + 1);
  assert_int_equal(varint_get32(big, n, &v), CAIRN_EBADVARINT);
  n = varint_put64(big, (int64_t)INT32_MIN - 1);
  assert_int_equal(varint_get32(big, n, &v), CAIRN_EBADVARINT);
}

int main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_varint_round_trips_edge_values_64),
      cmocka_unit_test(test_varint_round_trips_edge_values_32),
      cmocka_unit_test(test_varint_uses_zigzag_encoding),
      cmocka_unit_test(test_varint_extremes_use_max_bytes),
      cmocka_unit_test(test_varint_size64_matches_bytes_written_at_every_boundary),
      cmocka_unit_test(test_varint_round_trips_random_values),
      cmocka_unit_test(test_varint_rejects_truncated_input),
      cmocka_unit_test(test_varint_rejects_overlong_64),
      cmocka_unit_test(test_varint_rejects_overlong_32),
      cmocka_unit_test(test_varint_rejects_overflowing_last_byte_64),
      cmocka_unit_test(test_varint_rejects_overflowing_last_byte_32),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
