/* test_codec.c - the batch codecs (src/format/codec.c): every codec round
 * trips; snappy's two forms (raw, xerial-framed) and concatenated gzip
 * members decode; truncated and garbage input fail with CAIRN_ECOMPRESS;
 * output past the bound (a decompression bomb) fails with CAIRN_ETOOLARGE
 * before it is produced. */
#include "format/codec.h"

#include "common/err.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <snappy-c.h>

static const enum batch_codec all_codecs[] = {BATCH_CODEC_LZ4, BATCH_CODEC_ZSTD, BATCH_CODEC_GZIP,
                                              BATCH_CODEC_SNAPPY};
#define NCODECS (sizeof all_codecs / sizeof all_codecs[0])

/* Compressible but not trivial: text-like bytes from a fixed LCG. */
static uint8_t *make_input(size_t n)
{
  uint8_t *p = malloc(n == 0 ? 1 : n);
  assert_non_null(p);
  uint32_t x = 12345;
  for (size_t i = 0; i < n; i++) {
    x = x * 1103515245u + 12345u;
    p[i] = (uint8_t)('a' + (x >> 16) % 8);
  }
  return p;
}

static void expect_decompress(enum batch_codec codec, const uint8_t *z, size_t zlen, size_t max,
                              int want)
{
  uint8_t *out = NULL;
  size_t out_len = 0;
  int rv = codec_decompress(codec, z, zlen, max, &out, &out_len);
  if (rv != want) {
    print_error("%s: %zu bytes: got %s, want %s\n", codec_name(codec), zlen, cairn_errname(rv),
                cairn_errname(want));
  }
  assert_int_equal(rv, want);
  if (rv == 0) {
    free(out);
  }
}

static void test_codec_every_codec_round_trips(void **state)
{
  (void)state;
  const size_t sizes[] = {0, 1, 100, 70000, 1 << 20};
  for (size_t c = 0; c < NCODECS; c++) {
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
      uint8_t *in = make_input(sizes[s]);
      uint8_t *z, *out;
      size_t zlen, out_len;
      assert_int_equal(codec_compress(all_codecs[c], 0, in, sizes[s], &z, &zlen), 0);
      if (sizes[s] >= 70000) {
        assert_true(zlen < sizes[s]);
      }
      /* the bound is the exact size (a batch never has 0 record bytes:
       * there the decoders get room for a little output) */
      size_t max = sizes[s] > 0 ? sizes[s] : 16;
      assert_int_equal(codec_decompress(all_codecs[c], z, zlen, max, &out, &out_len), 0);
      assert_int_equal(out_len, sizes[s]);
      assert_memory_equal(out, in, sizes[s] == 0 ? 1 : sizes[s]);
      free(out);
      free(z);
      free(in);
    }
  }
}

static void test_codec_names_and_ingress_checks(void **state)
{
  (void)state;
  assert_string_equal(codec_name(BATCH_CODEC_NONE), "none");
  assert_string_equal(codec_name(BATCH_CODEC_LZ4), "lz4");
  assert_string_equal(codec_name(BATCH_CODEC_ZSTD), "zstd");
  assert_string_equal(codec_name(BATCH_CODEC_GZIP), "gzip");
  assert_string_equal(codec_name(BATCH_CODEC_SNAPPY), "snappy");
  assert_null(codec_name(BATCH_CODEC_MAX + 1));
  assert_null(codec_name(-1));
  uint8_t *out;
  size_t n;
  assert_int_equal(codec_compress(BATCH_CODEC_NONE, 0, "x", 1, &out, &n), CAIRN_EINVAL);
  assert_int_equal(codec_decompress((enum batch_codec)7, "x", 1, 10, &out, &n), CAIRN_EINVAL);
}

/* kafka-python and the Java client frame snappy the xerial way; a header,
 * then length-prefixed raw blocks. Built here with libsnappy directly. */
static void test_codec_snappy_reads_xerial_framing(void **state)
{
  (void)state;
  size_t n = 100000, block = 32768;
  uint8_t *in = make_input(n);
  size_t cap = 16 + (n / block + 1) * (4 + snappy_max_compressed_length(block));
  uint8_t *x = malloc(cap);
  assert_non_null(x);
  const uint8_t header[16] = {0x82, 'S', 'N', 'A', 'P', 'P', 'Y', 0, 0, 0, 0, 1, 0, 0, 0, 1};
  memcpy(x, header, sizeof header);
  size_t pos = sizeof header;
  for (size_t at = 0; at < n; at += block) {
    size_t chunk = n - at < block ? n - at : block;
    size_t zlen = cap - pos - 4;
    assert_int_equal(snappy_compress((const char *)in + at, chunk, (char *)x + pos + 4, &zlen),
                     SNAPPY_OK);
    x[pos] = (uint8_t)(zlen >> 24);
    x[pos + 1] = (uint8_t)(zlen >> 16);
    x[pos + 2] = (uint8_t)(zlen >> 8);
    x[pos + 3] = (uint8_t)zlen;
    pos += 4 + zlen;
  }
  uint8_t *out;
  size_t out_len;
  assert_int_equal(codec_decompress(BATCH_CODEC_SNAPPY, x, pos, n, &out, &out_len), 0);
  assert_int_equal(out_len, n);
  assert_memory_equal(out, in, n);
  free(out);
  /* The bound counts all blocks together. */
  expect_decompress(BATCH_CODEC_SNAPPY, x, pos, n - 1, CAIRN_ETOOLARGE);
  /* Cut inside a block length, inside a block; a block length past the end. */
  expect_decompress(BATCH_CODEC_SNAPPY, x, 18, n, CAIRN_ECOMPRESS);
  expect_decompress(BATCH_CODEC_SNAPPY, x, pos - 1, n, CAIRN_ECOMPRESS);
  x[16] = 0x7f;
  expect_decompress(BATCH_CODEC_SNAPPY, x, pos, n, CAIRN_ECOMPRESS);
  /* A header and no blocks is an empty stream. */
  expect_decompress(BATCH_CODEC_SNAPPY, x, 16, n, 0);
  free(x);
  free(in);
}

static void test_codec_gzip_reads_concatenated_members(void **state)
{
  (void)state;
  uint8_t *a = make_input(5000);
  uint8_t *za, *zb;
  size_t zalen, zblen;
  assert_int_equal(codec_compress(BATCH_CODEC_GZIP, 0, a, 3000, &za, &zalen), 0);
  assert_int_equal(codec_compress(BATCH_CODEC_GZIP, 0, a + 3000, 2000, &zb, &zblen), 0);
  uint8_t *both = malloc(zalen + zblen + 4);
  assert_non_null(both);
  memcpy(both, za, zalen);
  memcpy(both + zalen, zb, zblen);
  uint8_t *out;
  size_t out_len;
  assert_int_equal(codec_decompress(BATCH_CODEC_GZIP, both, zalen + zblen, 5000, &out, &out_len),
                   0);
  assert_int_equal(out_len, 5000);
  assert_memory_equal(out, a, 5000);
  free(out);
  /* Bytes after a member that are not a member. */
  memcpy(both + zalen, "junk", 4);
  expect_decompress(BATCH_CODEC_GZIP, both, zalen + 4, 5000, CAIRN_ECOMPRESS);
  free(both);
  free(za);
  free(zb);
  free(a);
}

/* Every prefix of a valid stream, and garbage, fail cleanly; none crashes or
 * reads past its input (ASan watches). */
static void test_codec_truncated_and_garbage_input_fail(void **state)
{
  (void)state;
  size_t n = 20000;
  uint8_t *in = make_input(n);
  for (size_t c = 0; c < NCODECS; c++) {
    uint8_t *z;
    size_t zlen;
    assert_int_equal(codec_compress(all_codecs[c], 0, in, n, &z, &zlen), 0);
    for (size_t cut = 0; cut < zlen; cut += cut < 64 ? 1 : 97) {
      uint8_t *part = malloc(cut == 0 ? 1 : cut); /* exact size: ASan sees overreads */
      assert_non_null(part);
      memcpy(part, z, cut);
      uint8_t *out;
      size_t out_len;
      int rv = codec_decompress(all_codecs[c], part, cut, n, &out, &out_len);
      if (rv != CAIRN_ECOMPRESS) {
        print_error("%s cut at %zu of %zu: %s\n", codec_name(all_codecs[c]), cut, zlen,
                    cairn_errname(rv));
      }
      assert_int_equal(rv, CAIRN_ECOMPRESS);
      free(part);
    }
    uint8_t garbage[300];
    for (size_t i = 0; i < sizeof garbage; i++) {
      garbage[i] = (uint8_t)(0xEE ^ i);
    }
    expect_decompress(all_codecs[c], garbage, sizeof garbage, n, CAIRN_ECOMPRESS);
    free(z);
  }
  free(in);
}

/* 64 MiB of zeros compress to almost nothing; decompressing with a 1 MiB
 * bound stops at the bound (snappy: before allocating, from its declared
 * length). */
static void test_codec_refuses_decompression_bomb(void **state)
{
  (void)state;
  size_t n = 64u << 20;
  uint8_t *zeros = calloc(1, n);
  assert_non_null(zeros);
  for (size_t c = 0; c < NCODECS; c++) {
    uint8_t *z;
    size_t zlen;
    assert_int_equal(codec_compress(all_codecs[c], 0, zeros, n, &z, &zlen), 0);
    assert_true(zlen < n / 16);
    expect_decompress(all_codecs[c], z, zlen, 1u << 20, CAIRN_ETOOLARGE);
    free(z);
  }
  free(zeros);
}

int main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_codec_every_codec_round_trips),
      cmocka_unit_test(test_codec_names_and_ingress_checks),
      cmocka_unit_test(test_codec_snappy_reads_xerial_framing),
      cmocka_unit_test(test_codec_gzip_reads_concatenated_members),
      cmocka_unit_test(test_codec_truncated_and_garbage_input_fail),
      cmocka_unit_test(test_codec_refuses_decompression_bomb),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
