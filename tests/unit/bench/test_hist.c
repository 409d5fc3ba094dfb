/* test_hist.c - the benchmarks' log-linear histogram: bucket bounds,
 * exact small values, quantiles within the stated relative error against
 * a sorted array, merging, the empty case. */
#include "hist.h"

#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static void test_hist_buckets_tile_the_range(void **state)
{
  (void)state;
  /* Consecutive buckets are adjacent and every value maps into the bucket
   * whose bounds contain it. */
  for (unsigned b = 0; b + 1 < HIST_BUCKETS; b++) {
    assert_true(hist_bucket_low(b) <= hist_bucket_high(b));
    assert_int_equal(hist_bucket_high(b) + 1, hist_bucket_low(b + 1));
    assert_int_equal(hist_bucket_of(hist_bucket_low(b)), b);
    assert_int_equal(hist_bucket_of(hist_bucket_high(b)), b);
  }
  assert_int_equal(hist_bucket_of(UINT64_MAX), HIST_BUCKETS - 1);
  assert_true(hist_bucket_high(HIST_BUCKETS - 1) == UINT64_MAX);
}

static void test_hist_small_values_are_exact(void **state)
{
  (void)state;
  static struct hist h;
  hist_init(&h);
  for (uint64_t v = 1; v <= 50; v++) {
    hist_record(&h, v);
  }
  assert_int_equal(h.count, 50);
  assert_int_equal(hist_quantile(&h, 0.5), 25);
  assert_int_equal(hist_quantile(&h, 0.9), 45);
  assert_int_equal(hist_quantile(&h, 0.0), 1);
  assert_int_equal(hist_quantile(&h, 1.0), 50);
  assert_true(hist_mean(&h) > 25.49 && hist_mean(&h) < 25.51);
}

static int cmp_u64(const void *a, const void *b)
{
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return x < y ? -1 : x > y;
}

static void test_hist_quantiles_within_relative_error(void **state)
{
  (void)state;
  unsigned seed = (unsigned)time(NULL);
  printf("test_hist_quantiles_within_relative_error seed %u\n", seed);
  srand(seed);
  enum { N = 100000 };
  static uint64_t vals[N];
  static struct hist a, b;
  hist_init(&a);
  hist_init(&b);
  for (size_t i = 0; i < N; i++) {
    /* Log-uniform over 1 us .. ~1 s in ns, as latencies spread. */
    double e = 3.0 + 6.0 * (double)rand() / RAND_MAX;
    uint64_t v = (uint64_t)pow(10.0, e);
    vals[i] = v;
    hist_record(i % 2 ? &a : &b, v); /* two halves, merged below */
  }
  hist_merge(&a, &b);
  assert_int_equal(a.count, N);
  qsort(vals, N, sizeof vals[0], cmp_u64);
  assert_int_equal(a.min, vals[0]);
  assert_int_equal(a.max, vals[N - 1]);
  const double qs[] = {0.5, 0.9, 0.99, 0.999, 1.0};
  for (size_t k = 0; k < sizeof qs / sizeof qs[0]; k++) {
    size_t rank = (size_t)(qs[k] * N + 0.999999);
    uint64_t exact = vals[rank - 1];
    uint64_t got = hist_quantile(&a, qs[k]);
    /* The bucket's upper bound: never below the exact value, at most one
     * bucket width (1/HIST_SUB of the value) above it. */
    assert_true(got >= exact);
    assert_true((double)(got - exact) <= (double)exact / HIST_SUB + 1);
  }
}

static void test_hist_empty_reports_zero(void **state)
{
  (void)state;
  static struct hist h;
  hist_init(&h);
  assert_int_equal(hist_quantile(&h, 0.99), 0);
  assert_true(hist_mean(&h) == 0);
}

int main(void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_hist_buckets_tile_the_range),
    cmocka_unit_test(test_hist_small_values_are_exact),
    cmocka_unit_test(test_hist_quantiles_within_relative_error),
    cmocka_unit_test(test_hist_empty_reports_zero),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
