/* test_store_faults.c - the cluster-wide table of failed stores
 * (store_faults.h): a node's new report replaces its old one and leaves
 * the others' alone, and the table and its reasons stay within their
 * bounds whatever is added. */
#include "cluster/store_faults.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

/* How many entries t holds for node_id. */
static size_t count_of(const struct sfault_table *t, uint64_t node_id)
{
  size_t k = 0;
  for (size_t i = 0; i < t->n; i++) {
    k += t->v[i].node_id == node_id;
  }
  return k;
}

static void test_sfault_report_replaces_only_its_node(void **state)
{
  (void)state;
  static struct sfault_table t;
  sfault_init(&t);
  assert_true(sfault_add(&t, 1, 7, 0, 1000, "postgresql: BEGIN: down"));
  assert_true(sfault_add(&t, 1, 7, 1, 1001, "postgresql: COMMIT: down"));
  assert_true(sfault_add(&t, 2, 7, 0, 1002, "postgresql: BEGIN: down"));
  /* Node 1 reports again: one partition recovered. */
  sfault_drop_node(&t, 1);
  assert_true(sfault_add(&t, 1, 7, 1, 1001, "postgresql: COMMIT: down"));
  assert_int_equal(t.n, 2);
  assert_int_equal(count_of(&t, 1), 1);
  assert_int_equal(count_of(&t, 2), 1);
  for (size_t i = 0; i < t.n; i++) {
    if (t.v[i].node_id == 1) {
      assert_int_equal(t.v[i].topic_id, 7);
      assert_int_equal(t.v[i].partition, 1);
      assert_int_equal(t.v[i].since_ms, 1001);
      assert_string_equal(t.v[i].reason, "postgresql: COMMIT: down");
    }
  }
  /* Node 2 is declared dead; then a copy from the controller replaces all. */
  sfault_drop_node(&t, 2);
  assert_int_equal(count_of(&t, 2), 0);
  assert_int_equal(t.n, 1);
  sfault_clear(&t);
  assert_int_equal(t.n, 0);
  assert_true(sfault_add(&t, 3, 8, 2, 0, NULL));
  assert_string_equal(t.v[0].reason, "");
}

static void test_sfault_bounds(void **state)
{
  (void)state;
  static struct sfault_table t;
  sfault_init(&t);
  char long_reason[4 * SFAULT_REASON_MAX];
  memset(long_reason, 'x', sizeof long_reason - 1);
  long_reason[sizeof long_reason - 1] = '\0';
  for (uint32_t i = 0; i < SFAULT_MAX; i++) {
    assert_true(sfault_add(&t, 1 + i % 5, 1, i, 1, long_reason));
  }
  assert_false(sfault_add(&t, 9, 1, 0, 1, "one too many"));
  assert_int_equal(t.n, SFAULT_MAX);
  assert_int_equal(count_of(&t, 9), 0);
  for (size_t i = 0; i < t.n; i++) {
    assert_int_equal(strlen(t.v[i].reason), SFAULT_REASON_MAX);
  }
  /* Room again once a node's entries go. */
  sfault_drop_node(&t, 1);
  assert_int_equal(t.n, SFAULT_MAX - (SFAULT_MAX + 4) / 5);
  assert_true(sfault_add(&t, 9, 1, 0, 1, "fits"));
}

/* A replica refused for its Raft files is found by node and partition;
 * a new entry starts neither damaged nor confirmed. */
static void test_sfault_raft_damaged_is_found_by_replica(void **state)
{
  (void)state;
  static struct sfault_table t;
  sfault_init(&t);
  assert_true(sfault_add(&t, 1, 7, 0, 1000, "postgresql: BEGIN: down"));
  assert_true(sfault_add(&t, 2, 7, 0, 2000, "raft/open-1: batch at byte 8"));
  assert_false(t.v[1].raft_damaged);
  assert_false(t.v[1].rebuild_ready);
  t.v[1].raft_damaged = true;
  assert_true(sfault_raft_damaged(&t, 2, 7, 0));
  assert_false(sfault_raft_damaged(&t, 1, 7, 0)); /* a store failure, not Raft damage */
  assert_false(sfault_raft_damaged(&t, 2, 7, 1));
  assert_false(sfault_raft_damaged(&t, 3, 7, 0));
  struct sfault *f = sfault_find(&t, 2, 7, 0);
  assert_non_null(f);
  assert_int_equal(f->since_ms, 2000);
  assert_null(sfault_find(&t, 2, 8, 0));
  sfault_drop_node(&t, 2);
  assert_false(sfault_raft_damaged(&t, 2, 7, 0));
}

int main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_sfault_report_replaces_only_its_node),
      cmocka_unit_test(test_sfault_bounds),
      cmocka_unit_test(test_sfault_raft_damaged_is_found_by_replica),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
