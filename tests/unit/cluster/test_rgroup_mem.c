/* test_rgroup_mem.c - the node-wide bound on Raft's entries in memory
 * (cluster/rgroup_mem.h): how the scale follows the node's sum. The
 * effect on a cluster (idle groups compacted under a small budget) is
 * test_cluster's test_cluster_node_budget_compacts_small_quiet_logs. */
#include "cluster/rgroup_mem.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#define MIB ((uint64_t)1 << 20)

static void test_unbounded_never_scales(void **state)
{
  (void)state;
  struct rgroup_mem m;
  rgroup_mem_init(&m, 0);
  rgroup_mem_update(&m, 100 * 1024 * MIB);
  assert_true(m.scale == 1.0);
  assert_int_equal(m.bytes, 100 * 1024 * MIB);
}

static void test_over_the_budget_scales_down_in_proportion(void **state)
{
  (void)state;
  struct rgroup_mem m;
  rgroup_mem_init(&m, 1024 * MIB);
  rgroup_mem_update(&m, 512 * MIB); /* under: nothing to do */
  assert_true(m.scale == 1.0);
  rgroup_mem_update(&m, 2048 * MIB); /* twice the budget: under half, with the margin */
  assert_true(m.scale > 0.44 && m.scale < 0.46);
  double after_one = m.scale;
  for (int i = 1; i < RGROUP_MEM_CUT_TICKS; i++) {
    rgroup_mem_update(&m, 2048 * MIB); /* still over: given time to show */
    assert_true(m.scale == after_one);
  }
  rgroup_mem_update(&m, 2048 * MIB); /* then down again */
  assert_true(m.scale < after_one);
  for (int i = 0; i < 100 * RGROUP_MEM_CUT_TICKS; i++) {
    rgroup_mem_update(&m, 1024 * 1024 * MIB);
  }
  assert_true(m.scale == RGROUP_MEM_MIN_SCALE); /* never to zero */
}

/* Compactions go at a gate's pace: over a window in which the sum fell
 * by 5 % or more, the scale holds instead of piling up to its floor; a
 * window stuck over the budget cuts again. */
static void test_held_while_the_sum_already_falls(void **state)
{
  (void)state;
  struct rgroup_mem m;
  rgroup_mem_init(&m, 128 * MIB);
  rgroup_mem_update(&m, 256 * MIB);
  double first = m.scale;
  assert_true(first < 0.46);
  uint64_t bytes = 256 * MIB;
  for (int i = 0; i < 3 * RGROUP_MEM_CUT_TICKS; i++) {
    bytes = bytes / 100 * 97; /* 3 % less a tick, still over the budget */
    rgroup_mem_update(&m, bytes);
    assert_true(m.scale == first);
  }
  for (int i = 0; i < RGROUP_MEM_CUT_TICKS - 1; i++) {
    rgroup_mem_update(&m, bytes); /* stuck: the window runs */
  }
  assert_true(m.scale == first);
  rgroup_mem_update(&m, bytes); /* a whole window stuck: cut */
  assert_true(m.scale < first);
}

static void test_back_up_once_well_under_the_budget(void **state)
{
  (void)state;
  struct rgroup_mem m;
  rgroup_mem_init(&m, 1024 * MIB);
  rgroup_mem_update(&m, 4096 * MIB);
  double low = m.scale;
  rgroup_mem_update(&m, 900 * MIB); /* between 3/4 and the budget: held */
  assert_true(m.scale == low);
  int ticks = 0;
  while (m.scale < 1.0 && ticks < 100) {
    rgroup_mem_update(&m, 100 * MIB);
    ticks++;
  }
  assert_true(m.scale == 1.0);
  assert_true(ticks > 3); /* gradually: a quarter at a time */
}

int main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_unbounded_never_scales),
      cmocka_unit_test(test_over_the_budget_scales_down_in_proportion),
      cmocka_unit_test(test_held_while_the_sum_already_falls),
      cmocka_unit_test(test_back_up_once_well_under_the_budget),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
