/* test_crc32c.c - CRC-32C: published vectors, chaining, and the hardware
 * path against the table fallback. */
#include "format/crc32c.h"

#include "testutil.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

/* Vectors from RFC 3720 appendix B.4 (iSCSI) and the usual check value. */
static void test_crc32c_matches_check_value_of_123456789(void **state)
{
  (void)state;
  const char *s = "123456789";
  assert_int_equal(crc32c(s, 9), 0xE3069283u);
  assert_int_equal(crc32c_extend(0, s, 9), 0xE3069283u);
  assert_int_equal(crc32c_extend_sw(0, s, 9), 0xE3069283u);
}

static void test_crc32c_matches_vector_of_32_zero_bytes(void **state)
{
  (void)state;
  uint8_t buf[32];
  memset(buf, 0, sizeof buf);
  assert_int_equal(crc32c(buf, sizeof buf), 0x8A9136AAu);
  assert_int_equal(crc32c_extend_sw(0, buf, sizeof buf), 0x8A9136AAu);
}

static void test_crc32c_matches_vector_of_32_ff_bytes(void **state)
{
  (void)state;
  uint8_t buf[32];
  memset(buf, 0xFF, sizeof buf);
  assert_int_equal(crc32c(buf, sizeof buf), 0x62A8AB43u);
  assert_int_equal(crc32c_extend_sw(0, buf, sizeof buf), 0x62A8AB43u);
}

static void test_crc32c_matches_vector_of_incrementing_bytes(void **state)
{
  (void)state;
  uint8_t up[32], down[32];
  for (int i = 0; i < 32; i++) {
    up[i] = (uint8_t)i;
    down[i] = (uint8_t)(31 - i);
  }
  assert_int_equal(crc32c(up, sizeof up), 0x46DD794Eu);
  assert_int_equal(crc32c_extend_sw(0, up, sizeof up), 0x46DD794Eu);
  assert_int_equal(crc32c(down, sizeof down), 0x113FDB5Cu);
  assert_int_equal(crc32c_extend_sw(0, down, sizeof down), 0x113FDB5Cu);
}

static void test_crc32c_of_empty_input_is_zero_and_extend_of_empty_is_identity(void **state)
{
  (void)state;
  uint8_t b = 0;
  assert_int_equal(crc32c(&b, 0), 0u);
  assert_int_equal(crc32c_extend(0xE3069283u, &b, 0), 0xE3069283u);
  assert_int_equal(crc32c_extend_sw(0xE3069283u, &b, 0), 0xE3069283u);
}

static void test_crc32c_extend_chained_equals_one_shot(void **state)
{
  (void)state;
  uint64_t rs = tu_seed("test_crc32c_extend_chained_equals_one_shot");
  enum { N = 1000 };
  uint8_t *buf = malloc(N);
  assert_non_null(buf);
  for (size_t i = 0; i < N; i++) {
    buf[i] = (uint8_t)tu_rand(&rs);
  }
  uint32_t whole = crc32c(buf, N);
  assert_int_equal(crc32c_extend_sw(0, buf, N), whole);
  /* Every split point in two pieces. */
  for (size_t cut = 0; cut <= N; cut++) {
    uint32_t c = crc32c_extend(0, buf, cut);
    assert_int_equal(crc32c_extend(c, buf + cut, N - cut), whole);
    uint32_t s = crc32c_extend_sw(0, buf, cut);
    assert_int_equal(crc32c_extend_sw(s, buf + cut, N - cut), whole);
  }
  /* Random many-piece splits, mixing the two implementations. */
  for (int round = 0; round < 200; round++) {
    uint32_t c = 0;
    size_t pos = 0;
    while (pos < N) {
      size_t piece = (size_t)(tu_rand(&rs) % 40);
      if (piece > N - pos) {
        piece = N - pos;
      }
      c = (tu_rand(&rs) & 1) ? crc32c_extend(c, buf + pos, piece)
                             : crc32c_extend_sw(c, buf + pos, piece);
      pos += piece;
    }
    assert_int_equal(c, whole);
  }
  free(buf);
}

static void test_crc32c_chained_vector_matches_check_value(void **state)
{
  (void)state;
  uint32_t c = crc32c_extend(0, "1234", 4);
  c = crc32c_extend(c, "56789", 5);
  assert_int_equal(c, 0xE3069283u);
}

static void test_crc32c_hw_path_equals_sw_for_random_lengths_and_alignments(void **state)
{
  (void)state;
  uint64_t rs = tu_seed("test_crc32c_hw_path_equals_sw_for_random_lengths_and_alignments");
  enum { MAXLEN = 4200, PAD = 16 };
  uint8_t *buf = malloc(MAXLEN + PAD);
  assert_non_null(buf);
  for (size_t i = 0; i < MAXLEN + PAD; i++) {
    buf[i] = (uint8_t)tu_rand(&rs);
  }
  /* Every length up to 300 at every misalignment 0..15, then random. */
  for (size_t len = 0; len <= 300; len++) {
    for (size_t off = 0; off < PAD; off++) {
      uint32_t seed_crc = (uint32_t)tu_rand(&rs);
      assert_int_equal(crc32c_extend(0, buf + off, len), crc32c_extend_sw(0, buf + off, len));
      assert_int_equal(crc32c_extend(seed_crc, buf + off, len),
                       crc32c_extend_sw(seed_crc, buf + off, len));
    }
  }
  for (int round = 0; round < 2000; round++) {
    size_t len = (size_t)(tu_rand(&rs) % (MAXLEN + 1));
    size_t off = (size_t)(tu_rand(&rs) % PAD);
    uint32_t seed_crc = (uint32_t)tu_rand(&rs);
    uint32_t hw = crc32c_extend(seed_crc, buf + off, len);
    uint32_t sw = crc32c_extend_sw(seed_crc, buf + off, len);
    if (hw != sw) {
      print_error("len %zu off %zu crc 0x%08x: extend 0x%08x, sw 0x%08x\n", len, off,
                  (unsigned)seed_crc, (unsigned)hw, (unsigned)sw);
    }
    assert_int_equal(hw, sw);
  }
  free(buf);
}

/* crc32c_combine joins two CRCs without the bytes, for every split of
 * random buffers (lengths 0..70,000: past the hardware lanes' blocks), and
 * rewrites a header in front of bytes it never reads. */
static void test_crc32c_combine_equals_crc_of_concatenation(void **state)
{
  (void)state;
  uint64_t rs = tu_seed("test_crc32c_combine_equals_crc_of_concatenation");
  enum { MAXLEN = 70000 };
  uint8_t *buf = malloc(MAXLEN);
  assert_non_null(buf);
  for (size_t i = 0; i < MAXLEN; i++) {
    buf[i] = (uint8_t)tu_rand(&rs);
  }
  for (int round = 0; round < 300; round++) {
    size_t len = (size_t)(tu_rand(&rs) % (MAXLEN + 1));
    size_t cut = len > 0 ? (size_t)(tu_rand(&rs) % (len + 1)) : 0;
    uint32_t a = crc32c(buf, cut), b = crc32c(buf + cut, len - cut);
    assert_int_equal(crc32c_combine(a, b, len - cut), crc32c(buf, len));
  }
  assert_int_equal(crc32c_combine(crc32c("1234", 4), crc32c("56789", 5), 5), 0xE3069283u);
  assert_int_equal(crc32c_combine(crc32c("123456789", 9), 0, 0), 0xE3069283u);
  /* A new 40-byte header in front of 65,000 unread bytes. */
  uint8_t head[40];
  memcpy(head, buf, sizeof head);
  uint32_t old_crc = crc32c(buf, 40 + 65000);
  uint32_t old_head = crc32c(head, sizeof head);
  for (size_t i = 0; i < sizeof head; i++) {
    buf[i] = (uint8_t)tu_rand(&rs);
  }
  uint32_t d = crc32c_combine(old_head ^ crc32c(buf, sizeof head), 0, 65000);
  assert_int_equal(old_crc ^ d, crc32c(buf, 40 + 65000));
  free(buf);
}

static void test_crc32c_detects_single_bit_flips(void **state)
{
  (void)state;
  uint8_t buf[64];
  for (int i = 0; i < 64; i++) {
    buf[i] = (uint8_t)(i * 7 + 3);
  }
  uint32_t orig = crc32c(buf, sizeof buf);
  for (size_t bit = 0; bit < sizeof buf * 8; bit++) {
    buf[bit / 8] ^= (uint8_t)(1u << (bit % 8));
    assert_int_not_equal(crc32c(buf, sizeof buf), orig);
    buf[bit / 8] ^= (uint8_t)(1u << (bit % 8));
  }
  assert_int_equal(crc32c(buf, sizeof buf), orig);
}

/* The hardware path interleaves three lanes over blocks of 256 and 8192
 * bytes and joins them: check it against the table version around and well
 * past those sizes, at odd offsets. */
static void test_crc32c_interleaved_lanes_match_table_version(void **state)
{
  size_t n = (1u << 20) + 64;
  uint8_t *b = malloc(n);
  uint64_t x = 88172645463325252ull;
  for (size_t i = 0; i < n; i++) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    b[i] = (uint8_t)x;
  }
  const size_t lens[] = {767, 768, 769, 1536, 2311, 24575, 24576, 24577, 49160, 73729,
                         100003, 1u << 20};
  for (size_t k = 0; k < sizeof lens / sizeof *lens; k++) {
    for (size_t off = 0; off < 8; off += 3) {
      assert_int_equal(crc32c_extend(0xdeadbeef, b + off, lens[k]),
                       crc32c_extend_sw(0xdeadbeef, b + off, lens[k]));
    }
  }
  free(b);
}

int main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_crc32c_matches_check_value_of_123456789),
      cmocka_unit_test(test_crc32c_matches_vector_of_32_zero_bytes),
      cmocka_unit_test(test_crc32c_matches_vector_of_32_ff_bytes),
      cmocka_unit_test(test_crc32c_matches_vector_of_incrementing_bytes),
      cmocka_unit_test(test_crc32c_of_empty_input_is_zero_and_extend_of_empty_is_identity),
      cmocka_unit_test(test_crc32c_extend_chained_equals_one_shot),
      cmocka_unit_test(test_crc32c_chained_vector_matches_check_value),
      cmocka_unit_test(test_crc32c_hw_path_equals_sw_for_random_lengths_and_alignments),
      cmocka_unit_test(test_crc32c_combine_equals_crc_of_concatenation),
      cmocka_unit_test(test_crc32c_detects_single_bit_flips),
      cmocka_unit_test(test_crc32c_interleaved_lanes_match_table_version),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
