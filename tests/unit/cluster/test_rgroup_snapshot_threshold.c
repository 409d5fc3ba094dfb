/* test_rgroup_snapshot_threshold.c - the snapshot threshold from the Raft
 * log budget, spread per replica so that replicas taking the same traffic
 * do not all snapshot at once (rgroup_fsm_snapshot_threshold). */
#include "cluster/rgroup_fsm.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#define MIB ((size_t)1 << 20)

static void test_within_a_quarter_below_the_budget_share(void **state)
{
  (void)state;
  /* 64 MiB of 64 KiB entries: 1,024 in all, two thirds before a snapshot. */
  unsigned full = 682, lo = full, hi = 0;
  for (uint64_t g = 1; g <= 1000; g++) {
    unsigned t = rgroup_fsm_snapshot_threshold(64 * MIB, 65536.0, g, 2);
    assert_true(t <= full && t >= full - full / 4);
    lo = t < lo ? t : lo;
    hi = t > hi ? t : hi;
    assert_int_equal(t, rgroup_fsm_snapshot_threshold(64 * MIB, 65536.0, g, 2)); /* pure */
  }
  /* Spread over the range, not bunched at one end. */
  assert_true(lo < full - full / 4 + 20);
  assert_true(hi > full - 20);
}

static void test_replicas_and_groups_differ(void **state)
{
  (void)state;
  unsigned seen[8193];
  memset(seen, 0, sizeof seen);
  unsigned same_across_nodes = 0, distinct = 0;
  for (uint64_t g = 1; g <= 300; g++) {
    unsigned a = rgroup_fsm_snapshot_threshold(64 * MIB, 10000.0, g, 1);
    unsigned b = rgroup_fsm_snapshot_threshold(64 * MIB, 10000.0, g, 2);
    same_across_nodes += a == b;
    distinct += seen[a]++ == 0;
  }
  assert_true(same_across_nodes < 30); /* a group's replicas snapshot apart */
  /* 256 steps of the quarter: ~177 distinct expected for 300 groups */
  assert_true(distinct > 140);
}

static void test_bounds_hold(void **state)
{
  (void)state;
  for (uint64_t g = 1; g <= 200; g++) {
    /* A tiny budget: at least 16 entries. */
    assert_int_equal(rgroup_fsm_snapshot_threshold(4096, 1 << 20, g, 3), 16);
    /* Tiny entries: at most 8,192, at least three quarters of it. */
    unsigned t = rgroup_fsm_snapshot_threshold(64 * MIB, 10.0, g, 3);
    assert_true(t <= 8192 && t >= 6144);
  }
}

int main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_within_a_quarter_below_the_budget_share),
      cmocka_unit_test(test_replicas_and_groups_differ),
      cmocka_unit_test(test_bounds_hold),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
