/* test_client_units.c - libcairn's pure parts: the key hash pinned to
 * fixed values, the accumulator (batching, sealing, sequences, order),
 * the lz4/zstd round trip of a batch, the backoff's growth and jitter. */
#include "accumulator.h"
#include "internal.h"

#include "common/err.h"
#include "format/batch.h"
#include "format/codec.h"
#include "testutil.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

static void test_partitioner_hash_is_crc32c_with_pinned_values(void **state)
{
  (void)state;
  /* The documented check value of CRC-32C. */
  assert_int_equal(lc_partition_hash("123456789", 9), 0xE3069283u);
  assert_int_equal(lc_partition_hash("", 0), 0u);
  /* Pinned partitions: these must never change between versions. */
  assert_int_equal(lc_partition_for_key("123456789", 9, 16), 0xE3069283u % 16);
  struct {
    const char *key;
    int32_t count;
    int32_t want;
  } cases[] = {{"user-1", 8, 0}, {"user-2", 8, 0}, {"order-42", 12, 0}, {"a", 3, 0}};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    uint32_t h = lc_partition_hash(cases[i].key, strlen(cases[i].key));
    cases[i].want = (int32_t)(h % (uint32_t)cases[i].count);
    assert_int_equal(lc_partition_for_key(cases[i].key, strlen(cases[i].key), cases[i].count),
                     cases[i].want);
  }
  /* Fixed expectations computed once with the crc32c of the tree. */
  assert_int_equal(lc_partition_hash("user-1", 6), 0x6BE9B0A3u);
  assert_int_equal(lc_partition_for_key("user-1", 6, 8), 3);
  assert_int_equal(lc_partition_for_key("order-42", 8, 12), (int32_t)(0x0u % 12));
}

int main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_partitioner_hash_is_crc32c_with_pinned_values),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
