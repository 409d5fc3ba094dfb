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
  rgroup_mem_update(&m, 100 * 1024 * MIB, 10000);
  assert_true(m.scale == 1.0);
  assert_int_equal(m.bytes, 100 * 1024 * MIB);
  assert_int_equal(m.groups, 10000);
}

static void test_over_the_budget_scales_down_in_proportion(void **state)
{
  (void)state;
  struct rgroup_mem m;
  rgroup_mem_init(&m, 1024 * MIB);
  rgroup_mem_update(&m, 512 * MIB, 100); /* under: nothing to do */
  assert_true(m.scale == 1.0);
  rgroup_mem_update(&m, 2048 * MIB, 100); /* twice the budget: under half, with the margin */
  assert_true(m.scale > 0.44 && m.scale < 0.46);
  double after_one = m.scale;
  rgroup_mem_update(&m, 2048 * MIB, 100); /* still over: down again */
  assert_true(m.scale < after_one);
  for (int i = 0; i < 100; i++) {
    rgroup_mem_update(&m, 1024 * 1024 * MIB, 100);
  }
  assert_true(m.scale == RGROUP_MEM_MIN_SCALE); /* never to zero */
}

static void test_back_up_once_well_under_the_budget(void **state)
{
  (void)state;
  struct rgroup_mem m;
  rgroup_mem_init(&m, 1024 * MIB);
  rgroup_mem_update(&m, 4096 * MIB, 100);
  double low = m.scale;
  rgroup_mem_update(&m, 900 * MIB, 100); /* between 3/4 and the budget: held */
  assert_true(m.scale == low);
  int ticks = 0;
  while (m.scale < 1.0 && ticks < 100) {
    rgroup_mem_update(&m, 100 * MIB, 100);
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
      cmocka_unit_test(test_back_up_once_well_under_the_budget),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
