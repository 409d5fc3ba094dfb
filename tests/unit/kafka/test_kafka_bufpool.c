/* test_kafka_bufpool.c - the Kafka port's answer-buffer pool
 * (kafka_bufpool.h): a large buffer given back is handed out again, and
 * the idle list never passes its bounds. */
#include "kafka/kafka_bufpool.h"

#include "kafka/kafka_codec.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#define MIB (1024u * 1024)

static int drain(void **state)
{
  (void)state;
  kafka_bufpool_drain();
  return 0;
}

static void test_kafka_bufpool_reuses_a_large_buffer(void **state)
{
  (void)state;
  size_t cap = 0, cap2 = 0, n = 0, bytes = 0;
  uint8_t *p = kafka_bufpool_get(3 * MIB + 5, &cap);
  assert_non_null(p);
  assert_true(cap >= 3 * MIB + 5);
  memset(p, 0xab, cap); /* the whole capacity is usable */
  kafka_bufpool_put(p);
  kafka_bufpool_idle(&n, &bytes);
  assert_int_equal(n, 1);
  assert_int_equal(bytes, cap);
  uint8_t *q = kafka_bufpool_get(2 * MIB, &cap2);
  assert_ptr_equal(q, p);
  assert_int_equal(cap2, cap);
  kafka_bufpool_idle(&n, &bytes);
  assert_int_equal(n, 0);
  assert_int_equal(bytes, 0);
  kafka_bufpool_put(q);
}

static void test_kafka_bufpool_frees_small_buffers(void **state)
{
  (void)state;
  size_t cap = 0, n = 0, bytes = 0;
  void *p = kafka_bufpool_get(100, &cap);
  assert_non_null(p);
  assert_true(cap >= 100);
  kafka_bufpool_put(p);
  kafka_bufpool_idle(&n, &bytes);
  assert_int_equal(n, 0);
  kafka_bufpool_put(NULL);
}

static void test_kafka_bufpool_idle_list_stays_bounded(void **state)
{
  (void)state;
  void *held[2 * KAFKA_BUFPOOL_SLOTS];
  size_t cap = 0, n = 0, bytes = 0;
  for (size_t i = 0; i < 2 * KAFKA_BUFPOOL_SLOTS; i++) {
    held[i] = kafka_bufpool_get(8 * MIB, &cap);
    assert_non_null(held[i]);
  }
  for (size_t i = 0; i < 2 * KAFKA_BUFPOOL_SLOTS; i++) {
    kafka_bufpool_put(held[i]);
    kafka_bufpool_idle(&n, &bytes);
    assert_true(n <= KAFKA_BUFPOOL_SLOTS);
    assert_true(bytes <= KAFKA_BUFPOOL_IDLE_MAX);
  }
  assert_true(n > 0);
  /* Larger than the idle bound: never kept. */
  void *big = kafka_bufpool_get(KAFKA_BUFPOOL_IDLE_MAX + 1, &cap);
  assert_non_null(big);
  kafka_bufpool_drain();
  kafka_bufpool_put(big);
  kafka_bufpool_idle(&n, &bytes);
  assert_int_equal(n, 0);
  assert_int_equal(bytes, 0);
}

/* The writer takes its memory from the pool: a buffer sized ahead does not
 * move while it is filled, and is given back on free. */
static void test_kafka_buf_sized_ahead_does_not_move(void **state)
{
  (void)state;
  struct kafka_buf b;
  assert_int_equal(kafka_buf_init_cap(&b, 2 * MIB), 0);
  uint8_t *start = b.p;
  for (int i = 0; i < 2 * (int)MIB / 8; i++) {
    kafka_put_i64(&b, i);
  }
  assert_int_equal(b.err, 0);
  assert_ptr_equal(b.p, start);
  kafka_put_i64(&b, -1); /* past the capacity: grows, keeps the bytes */
  assert_int_equal(b.err, 0);
  assert_int_equal(b.len, 2 * MIB + 8);
  assert_int_equal(b.p[2 * MIB - 1], 0xff & ((2 * MIB / 8) - 1));
  kafka_buf_free(&b);
  size_t n = 0, bytes = 0;
  kafka_bufpool_idle(&n, &bytes);
  assert_true(n >= 1);
}

int main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_teardown(test_kafka_bufpool_reuses_a_large_buffer, drain),
      cmocka_unit_test_teardown(test_kafka_bufpool_frees_small_buffers, drain),
      cmocka_unit_test_teardown(test_kafka_bufpool_idle_list_stays_bounded, drain),
      cmocka_unit_test_teardown(test_kafka_buf_sized_ahead_does_not_move, drain),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
