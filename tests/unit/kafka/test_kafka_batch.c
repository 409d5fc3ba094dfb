/* test_kafka_batch.c - Kafka v2 record batches to and from Cairn's
 * (kafka_batch.h): round trips byte for byte, every header field in
 * Kafka's byte order, CRC/magic/codec/attribute refusals, every
 * truncation. */
#include "kafka/kafka_batch.h"

#include "common/err.h"
#include "format/batch.h"
#include "format/batch_builder.h"
#include "format/codec.h"
#include "format/crc32c.h"
#include "format/endian.h"
#include "kafka/kafka_codec.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

/* A Cairn batch of n records, idempotent-stamped, optionally compressed. */
static uint8_t *make_cairn(int n, enum batch_codec codec, size_t *len)
{
  struct batch_builder bb;
  assert_int_equal(batch_builder_init(&bb, 1 << 20), 0);
  batch_builder_set_producer(&bb, 0x0102030405060708LL, 0x0a0b, 0x11223344);
  for (int i = 0; i < n; i++) {
    char key[16], value[64];
    snprintf(key, sizeof key, "k%d", i);
    snprintf(value, sizeof value, "value number %d, repeated repeated repeated", i);
    assert_int_equal(batch_builder_add(&bb, 1700000000000LL + i, key, strlen(key), value,
                                       strlen(value), NULL, 0),
                     0);
  }
  uint8_t *p = NULL;
  assert_int_equal(batch_builder_finish(&bb, &p, len), 0);
  batch_builder_close(&bb);
  if (codec != BATCH_CODEC_NONE) {
    assert_int_equal(codec_batch_compress(codec, 0, &p, len), 0);
  }
  return p;
}

static void kafka_fix_crc(uint8_t *k, size_t len)
{
  kafka_put_be32(k + KAFKA_BATCH_OFF_CRC,
                 crc32c(k + KAFKA_BATCH_CRC_START, len - KAFKA_BATCH_CRC_START));
}

static void round_trip(enum batch_codec codec, uint16_t kafka_codec)
{
  size_t clen;
  uint8_t *c = make_cairn(20, codec, &clen);
  size_t klen = clen - KAFKA_BATCH_GROWTH;
  uint8_t *k = malloc(klen);
  assert_int_equal(kafka_batch_from_cairn(c, clen, k), 0);
  /* Kafka's header, big-endian */
  assert_int_equal(k[KAFKA_BATCH_OFF_MAGIC], KAFKA_BATCH_MAGIC);
  assert_int_equal(kafka_be32(k + 8), klen - 12);
  assert_int_equal((int32_t)kafka_be32(k + 12), -1);
  assert_int_equal(kafka_be16(k + 21), kafka_codec);
  assert_int_equal(kafka_be32(k + 23), 19);                 /* last offset delta */
  assert_true(kafka_be64(k + 27) == 1700000000000ULL);      /* first timestamp */
  assert_true(kafka_be64(k + 35) == 1700000000019ULL);      /* max timestamp */
  assert_true(kafka_be64(k + 43) == 0x0102030405060708ULL); /* producer id */
  assert_int_equal(kafka_be16(k + 51), 0x0a0b);
  assert_int_equal(kafka_be32(k + 53), 0x11223344);
  assert_int_equal(kafka_be32(k + 57), 20);
  assert_int_equal(kafka_be32(k + KAFKA_BATCH_OFF_CRC),
                   crc32c(k + KAFKA_BATCH_CRC_START, klen - KAFKA_BATCH_CRC_START));
  assert_memory_equal(k + KAFKA_BATCH_HEADER_SIZE, c + BATCH_HEADER_SIZE, clen - BATCH_HEADER_SIZE);
  /* The header alone, from the stored header alone, is the same. */
  uint8_t kh[KAFKA_BATCH_HEADER_SIZE];
  assert_int_equal(kafka_batch_header_from_cairn(c, clen, kh), 0);
  assert_memory_equal(kh, k, KAFKA_BATCH_HEADER_SIZE);
  /* and back: the same bytes, which Cairn's own validation accepts */
  uint8_t *back = malloc(clen);
  assert_int_equal(kafka_batch_to_cairn(k, klen, back), 0);
  assert_memory_equal(back, c, clen);
  char why[256];
  assert_int_equal(batch_validate(back, clen, 1 << 20, why, sizeof why), 0);
  free(back);
  free(k);
  free(c);
}

static void test_kafka_batch_round_trips_every_codec(void **state)
{
  (void)state;
  round_trip(BATCH_CODEC_NONE, KAFKA_CODEC_NONE);
  round_trip(BATCH_CODEC_LZ4, KAFKA_CODEC_LZ4);
  round_trip(BATCH_CODEC_ZSTD, KAFKA_CODEC_ZSTD);
  round_trip(BATCH_CODEC_GZIP, KAFKA_CODEC_GZIP);
  round_trip(BATCH_CODEC_SNAPPY, KAFKA_CODEC_SNAPPY);
}

/* A compressed batch (every codec) whose records are garbage but whose CRC
 * is right is stored as sent, as Kafka stores it: neither the conversion
 * nor the ingress check decompresses. */
static void test_kafka_batch_stores_compressed_records_unread(void **state)
{
  (void)state;
  static const int codecs[] = {BATCH_CODEC_GZIP, BATCH_CODEC_SNAPPY, BATCH_CODEC_LZ4,
                               BATCH_CODEC_ZSTD};
  for (size_t i = 0; i < sizeof codecs / sizeof codecs[0]; i++) {
    size_t clen;
    uint8_t *c = make_cairn(20, codecs[i], &clen);
    size_t klen = clen - KAFKA_BATCH_GROWTH;
    uint8_t *k = malloc(klen);
    assert_int_equal(kafka_batch_from_cairn(c, clen, k), 0);
    memset(k + KAFKA_BATCH_HEADER_SIZE, 0xEE, klen - KAFKA_BATCH_HEADER_SIZE);
    kafka_fix_crc(k, klen);
    assert_int_equal(kafka_batch_to_cairn(k, klen, c), 0);
    assert_int_equal(le_get16(c + BATCH_OFF_ATTRIBUTES), codecs[i]);
    assert_int_equal(batch_validate(c, clen, 1 << 20, NULL, 0), 0);
    assert_memory_equal(c + BATCH_HEADER_SIZE, k + KAFKA_BATCH_HEADER_SIZE,
                        klen - KAFKA_BATCH_HEADER_SIZE);
    free(k);
    free(c);
  }
}

/* Kafka's CRC is derived from the stored one, not recomputed over the
 * stored bytes: a record byte damaged in the store after its CRC was
 * written shows as a bad CRC to the Kafka client, as it would natively. */
static void test_kafka_batch_damage_in_the_store_shows_in_kafka_crc(void **state)
{
  (void)state;
  size_t clen;
  uint8_t *c = make_cairn(20, BATCH_CODEC_NONE, &clen);
  c[clen - 3] ^= 0x40;
  size_t klen = clen - KAFKA_BATCH_GROWTH;
  uint8_t *k = malloc(klen);
  assert_int_equal(kafka_batch_from_cairn(c, clen, k), 0);
  assert_int_not_equal(kafka_be32(k + KAFKA_BATCH_OFF_CRC),
                       crc32c(k + KAFKA_BATCH_CRC_START, klen - KAFKA_BATCH_CRC_START));
  assert_int_equal(kafka_batch_to_cairn(k, klen, c), CAIRN_EBADCRC);
  free(k);
  free(c);
}

/* A valid Kafka batch (from a Cairn one) for the refusal tests. */
static uint8_t *make_kafka(size_t *klen)
{
  size_t clen;
  uint8_t *c = make_cairn(5, BATCH_CODEC_NONE, &clen);
  *klen = clen - KAFKA_BATCH_GROWTH;
  uint8_t *k = malloc(*klen);
  assert_int_equal(kafka_batch_from_cairn(c, clen, k), 0);
  free(c);
  return k;
}

static void test_kafka_batch_refuses_crc_magic_codecs_and_transactions(void **state)
{
  (void)state;
  size_t klen;
  uint8_t *k = make_kafka(&klen);
  uint8_t *out = malloc(klen + KAFKA_BATCH_GROWTH);
  assert_int_equal(kafka_batch_to_cairn(k, klen, out), 0);

  k[klen - 1] ^= 1; /* a record byte */
  assert_int_equal(kafka_batch_to_cairn(k, klen, out), CAIRN_EBADCRC);
  k[klen - 1] ^= 1;

  k[KAFKA_BATCH_OFF_MAGIC] = 1;
  assert_int_equal(kafka_batch_to_cairn(k, klen, out), CAIRN_EBADMAGIC);
  k[KAFKA_BATCH_OFF_MAGIC] = KAFKA_BATCH_MAGIC;

  static const struct {
    uint16_t attrs;
    int want;
  } cases[] = {
      {5, CAIRN_EBADATTR},
      {7, CAIRN_EBADATTR},
      {0x08, CAIRN_EBADATTR}, /* LogAppendTime */
      {0x10, CAIRN_EBADATTR},
      {0x20, CAIRN_EBADATTR}, /* transactional, control */
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    kafka_put_be16(k + KAFKA_BATCH_OFF_ATTRIBUTES, cases[i].attrs);
    kafka_fix_crc(k, klen);
    assert_int_equal(kafka_batch_to_cairn(k, klen, out), cases[i].want);
  }
  free(out);
  free(k);
}

static void test_kafka_batch_every_truncation_needs_more_or_is_refused(void **state)
{
  (void)state;
  size_t klen;
  uint8_t *k = make_kafka(&klen);
  size_t size = 0;
  assert_int_equal(kafka_batch_probe(k, klen, &size), 0);
  assert_int_equal(size, klen);
  for (size_t cut = 0; cut < klen; cut++) {
    uint8_t *copy = malloc(cut > 0 ? cut : 1);
    memcpy(copy, k, cut);
    assert_int_equal(kafka_batch_probe(copy, cut, &size), KAFKA_BATCH_NEED_MORE);
    uint8_t *out = malloc(cut + KAFKA_BATCH_GROWTH);
    int rv = kafka_batch_to_cairn(copy, cut, out);
    assert_true(rv == KAFKA_BATCH_NEED_MORE || rv == CAIRN_EBADLEN);
    assert_true(rv != 0);
    free(out);
    free(copy);
  }
  /* a length shorter than a header is malformed, not "need more" */
  kafka_put_be32(k + 8, 10);
  assert_int_equal(kafka_batch_probe(k, klen, &size), CAIRN_EBADLEN);
  free(k);
}

int main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_kafka_batch_round_trips_every_codec),
      cmocka_unit_test(test_kafka_batch_stores_compressed_records_unread),
      cmocka_unit_test(test_kafka_batch_damage_in_the_store_shows_in_kafka_crc),
      cmocka_unit_test(test_kafka_batch_refuses_crc_magic_codecs_and_transactions),
      cmocka_unit_test(test_kafka_batch_every_truncation_needs_more_or_is_refused),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
