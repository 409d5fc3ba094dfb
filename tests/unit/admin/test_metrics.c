/* test_metrics.c - the log-linear histogram files every value in the bucket
 * whose bounds hold it, counts below bucket bounds are exact, request
 * counters land in their slots, and the replica-lag estimate follows the
 * leader's samples. */
#include "admin/metrics.h"
#include "testutil.h"

#include <inttypes.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

static void test_metrics_hist_buckets_are_contiguous_and_hold_their_values(void **state)
{
  assert_int_equal(metrics_hist_lower(0), 0);
  for (unsigned i = 0; i + 1 < METRICS_HIST_BUCKETS; i++) {
    assert_true(metrics_hist_lower(i) < metrics_hist_upper(i));
    assert_true(metrics_hist_upper(i) == metrics_hist_lower(i + 1));
    /* Both ends of each bucket map to it (the top is closed, like le). */
    assert_int_equal(metrics_hist_index(metrics_hist_upper(i)), i);
    assert_int_equal(metrics_hist_index(metrics_hist_lower(i) + 1), i);
    /* At most a quarter wide, relative to its lower bound, past the exact ones. */
    if (i >= METRICS_HIST_SUB) {
      assert_true((metrics_hist_upper(i) - metrics_hist_lower(i)) * 4 <= metrics_hist_lower(i));
    }
  }
  assert_int_equal(metrics_hist_index(0), 0);
  assert_int_equal(metrics_hist_index(1), 0);
  assert_int_equal(metrics_hist_index(2), 1);
  assert_int_equal(metrics_hist_index(UINT64_MAX), METRICS_HIST_BUCKETS - 1);
  assert_true(metrics_hist_upper(METRICS_HIST_BUCKETS - 1) == UINT64_MAX);
}

static void test_metrics_hist_counts_at_powers_of_two_are_exact(void **state)
{
  srand((unsigned)tu_seed("test_metrics_hist_counts_at_powers_of_two_are_exact"));
  struct metrics_hist *h = calloc(1, sizeof *h);
  enum { N = 20000 };
  uint64_t *v = malloc(N * sizeof *v);
  uint64_t sum = 0;
  for (int i = 0; i < N; i++) {
    /* Spread over many magnitudes, with exact powers of two mixed in. */
    int e = rand() % 30;
    v[i] = (rand() % 4 == 0) ? (uint64_t)1 << e : (uint64_t)rand() % ((uint64_t)1 << e) + 1;
    sum += v[i];
    metrics_hist_observe(h, v[i]);
  }
  assert_int_equal(h->count, N);
  assert_true(h->sum == sum);
  for (int e = 0; e <= 31; e++) {
    uint64_t bound = (uint64_t)1 << e, want = 0;
    for (int i = 0; i < N; i++) {
      want += v[i] <= bound ? 1 : 0;
    }
    assert_true(metrics_hist_count_le(h, bound) == want);
  }
  assert_true(metrics_hist_count_le(h, UINT64_MAX) == N);
  free(v);
  free(h);
}

static void test_metrics_requests_land_in_their_slots(void **state)
{
  struct metrics *m = malloc(sizeof *m);
  metrics_init(m);
  metrics_request(m, 7, 0, 100, 50, 1500);   /* produce ok, 1.5 ms */
  metrics_request(m, 7, 3, 10, 5, 20);       /* produce, code 3 */
  metrics_request(m, 8, 0, 1, 1000, 200000); /* fetch, 200 ms */
  metrics_request(m, 2, 9999, 1, 1, 1);      /* a code past the slots */
  metrics_request(m, 99, 0, 1, 1, 1);        /* an api past the slots: bytes only */
  metrics_request(m, 56, 64, 1, 1, 1);       /* ListAcls refused: AUTHORIZATION_FAILED */
  metrics_request(m, 54, 65, 1, 1, 1);       /* AddAcl... UNKNOWN_ACL (RemoveAcl's code) */
  assert_true(m->requests[7][0] == 1 && m->requests[7][3] == 1 && m->requests[8][0] == 1);
  assert_true(m->requests[2][METRICS_CODE_SLOTS - 1] == 1);
  assert_true(m->requests[56][64] == 1 && m->requests[54][65] == 1);
  assert_true(m->bytes_in == 115 && m->bytes_out == 1059);
  assert_true(m->latency[METRICS_LAT_PRODUCE].count == 2);
  assert_true(m->latency[METRICS_LAT_FETCH].count == 1);
  assert_true(metrics_hist_count_le(&m->latency[METRICS_LAT_PRODUCE], 1024) == 1);
  assert_true(metrics_hist_count_le(&m->latency[METRICS_LAT_PRODUCE], 2048) == 2);
  metrics_close(m);
  free(m);
}

static void test_metrics_kafka_requests_land_in_their_slots(void **state)
{
  struct metrics *m = malloc(sizeof *m);
  metrics_init(m);
  metrics_kafka_request(m, 0, true, 0, 1500);   /* Produce NONE, 1.5 ms */
  metrics_kafka_request(m, 0, true, 6, 20);     /* Produce NOT_LEADER_OR_FOLLOWER */
  metrics_kafka_request(m, 0, false, 99, 30);   /* Produce closed: the code is ignored */
  metrics_kafka_request(m, 1, true, 0, 500000); /* Fetch, 500 ms (a long poll) */
  metrics_kafka_request(m, 3, true, -1, 1);     /* Metadata UNKNOWN_SERVER_ERROR */
  metrics_kafka_request(m, 18, true, 500, 1);   /* a code past the slots */
  metrics_kafka_request(m, 9999, false, 0, 1);  /* an unknown api key */
  metrics_kafka_request(m, -5, false, 0, 1);
  assert_true(m->kafka_requests[0][metrics_kafka_code_slot(true, 0)] == 1);
  assert_true(m->kafka_requests[0][metrics_kafka_code_slot(true, 6)] == 1);
  assert_true(m->kafka_requests[0][0] == 1);
  assert_true(m->kafka_requests[1][metrics_kafka_code_slot(true, 0)] == 1);
  assert_true(m->kafka_requests[3][1] == 1);
  assert_true(m->kafka_requests[18][METRICS_KAFKA_CODE_SLOTS - 1] == 1);
  assert_true(m->kafka_requests[METRICS_KAFKA_API_SLOTS - 1][0] == 2);
  assert_true(m->kafka_latency[METRICS_LAT_PRODUCE].count == 3);
  assert_true(m->kafka_latency[METRICS_LAT_FETCH].count == 1);
  assert_true(metrics_hist_count_le(&m->kafka_latency[METRICS_LAT_PRODUCE], 1024) == 2);
  assert_true(m->latency[METRICS_LAT_PRODUCE].count == 0); /* the native port's are apart */
  /* the slots map back to what was counted */
  bool answered;
  int code;
  metrics_kafka_slot_code(0, &answered, &code);
  assert_false(answered);
  for (int c = -1; c <= 126; c++) {
    metrics_kafka_slot_code(metrics_kafka_code_slot(true, c), &answered, &code);
    assert_true(answered && code == c);
  }
  metrics_close(m);
  free(m);
}

static bool test_keep_even(uint64_t group_id, void *data)
{
  return group_id % 2 == 0;
}

static void test_metrics_parts_are_found_sorted_and_pruned(void **state)
{
  struct metrics *m = malloc(sizeof *m);
  metrics_init(m);
  for (uint64_t g = 100; g > 0; g--) {
    metrics_part_produced(m, g * 3, g);
  }
  metrics_part_fetched(m, 30, 7);
  assert_int_equal(m->nparts, 100);
  for (size_t i = 1; i < m->nparts; i++) {
    assert_true(m->parts[i - 1].group_id < m->parts[i].group_id);
  }
  struct metrics_part *mp = metrics_part(m, 30);
  assert_true(mp->produced_bytes == 10 && mp->produced_batches == 1 && mp->fetched_bytes == 7 &&
              mp->fetches == 1);
  /* Leaders' lag rings: the pruned parts' go with them (the leak check). */
  assert_null(metrics_part(m, 33)->ring);
  for (uint64_t g = 1; g <= 100; g++) {
    assert_true(metrics_lag_sample(metrics_part(m, g * 3), 1000, 5, 10));
  }
  assert_non_null(metrics_part(m, 33)->ring);
  metrics_prune(m, test_keep_even, NULL);
  assert_int_equal(m->nparts, 50);
  assert_true(metrics_part(m, 30)->produced_bytes == 10);
  assert_true(metrics_part(m, 33)->produced_bytes == 0); /* forgotten: new at zero */
  metrics_close(m);
  free(m);
}

static void test_metrics_lag_follows_the_leaders_samples(void **state)
{
  struct metrics_part *mp = calloc(1, sizeof *mp);
  /* The leader appends 10 offsets per entry, one entry per 250 ms. */
  for (uint64_t k = 0; k < 10; k++) {
    metrics_lag_sample(mp, 1000 + k * METRICS_LAG_SAMPLE_MS, 5 + k, (int64_t)(10 * (k + 1)));
  }
  assert_int_equal(mp->ring_len, 10);
  /* Too soon (due later: false), or the same index (nothing new: true):
   * not recorded. */
  assert_false(metrics_lag_sample(mp, 1000 + 9 * METRICS_LAG_SAMPLE_MS + 1, 99, 999));
  assert_true(metrics_lag_sample(mp, 1000 + 20 * METRICS_LAG_SAMPLE_MS, 14, 100));
  assert_int_equal(mp->ring_len, 10);
  uint64_t now = 1000 + 9 * METRICS_LAG_SAMPLE_MS;
  int64_t off = -1;
  uint64_t ms = 1;
  metrics_lag_estimate(mp, now, 14, 100, 14, &off, &ms);
  assert_true(off == 0 && ms == 0); /* caught up */
  metrics_lag_estimate(mp, now, 14, 100, 11, &off, &ms);
  /* At index 11 the leader had 70; the first entry past it came at k = 7. */
  assert_int_equal(off, 30);
  assert_true(ms == 2 * METRICS_LAG_SAMPLE_MS);
  metrics_lag_estimate(mp, now, 14, 100, 1, &off, &ms);
  /* Behind every sample: at least back to the oldest. */
  assert_int_equal(off, 90);
  assert_true(ms == 9 * METRICS_LAG_SAMPLE_MS);
  /* The ring wraps and keeps the newest. */
  for (uint64_t k = 10; k < 10 + 2 * METRICS_LAG_SAMPLES; k++) {
    metrics_lag_sample(mp, 1000 + k * METRICS_LAG_SAMPLE_MS, 5 + k, (int64_t)(10 * (k + 1)));
  }
  assert_int_equal(mp->ring_len, METRICS_LAG_SAMPLES);
  free(mp->ring); /* the part's owner (struct metrics) frees it otherwise */
  free(mp);
}

static void test_metrics_marks_list_each_group_once(void **state)
{
  struct metrics *m = malloc(sizeof *m);
  metrics_init(m);
  for (uint64_t g = 1; g <= 200; g++) {
    metrics_part_mark(m, metrics_part(m, g));
    metrics_part_mark(m, metrics_part(m, g)); /* already listed */
  }
  assert_int_equal(m->napplied, 200);
  assert_false(m->applied_lost);
  for (size_t i = 0; i < m->napplied; i++) {
    assert_true(m->applied[i] == i + 1);
    assert_true(metrics_part_find(m, i + 1)->applied);
  }
  assert_null(metrics_part_find(m, 999));
  metrics_close(m);
  free(m);
}

static void test_metrics_elections_count_term_rises(void **state)
{
  struct metrics *m = malloc(sizeof *m);
  metrics_init(m);
  struct metrics_part *mp = metrics_part(m, 5);
  metrics_note_term(m, mp, 7); /* first sight: recorded only */
  metrics_note_term(m, mp, 7);
  metrics_note_term(m, mp, 9);
  assert_true(m->elections == 2);
  metrics_close(m);
  free(m);
}

int main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_metrics_hist_buckets_are_contiguous_and_hold_their_values),
      cmocka_unit_test(test_metrics_hist_counts_at_powers_of_two_are_exact),
      cmocka_unit_test(test_metrics_requests_land_in_their_slots),
      cmocka_unit_test(test_metrics_kafka_requests_land_in_their_slots),
      cmocka_unit_test(test_metrics_parts_are_found_sorted_and_pruned),
      cmocka_unit_test(test_metrics_lag_follows_the_leaders_samples),
      cmocka_unit_test(test_metrics_marks_list_each_group_once),
      cmocka_unit_test(test_metrics_elections_count_term_rises),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
