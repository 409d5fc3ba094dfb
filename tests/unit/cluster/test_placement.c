/* test_placement.c - replica placement: evenness of replicas and preferred
 * leaders (within a topic and against what the cluster already holds), rack
 * spreading, eligibility, and the one-replica pick used by repairs. */
#include "cluster/meta_state.h"
#include "cluster/placement.h"
#include "common/err.h"
#include "testutil.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

/* Applies an encoded command that must succeed; takes cmd. */
static void apply_ok(struct meta_state *st, int enc_rc, uint8_t *cmd, size_t len)
{
  assert_int_equal(enc_rc, 0);
  struct meta_result res;
  int rc = meta_apply(st, cmd, len, 0, &res);
  free(cmd);
  if (rc != 0)
    fail_msg("apply: %s: %s", cairn_errname(rc), res.msg);
}

/* A cluster of n ALIVE nodes 1..n; racks[i] is node i+1's rack (NULL: none). */
static void make_cluster(struct meta_state *st, int n, const char *const *racks)
{
  uint8_t *cmd;
  size_t len;
  meta_state_init(st);
  int rc_enc = meta_cmd_bootstrap("c", (uint64_t[]){1}, 1, &cmd, &len);
  apply_ok(st, rc_enc, cmd, len);
  for (int i = 0; i < n; i++) {
    struct meta_node_info info = {(uint64_t)i + 1, 7, "h:1", "h:2", "", racks ? racks[i] : "", NULL, NULL, 0};
    int rc_node = meta_cmd_register_node(&info, 0, &cmd, &len);
    apply_ok(st, rc_node, cmd, len);
  }
}

static void create(struct meta_state *st, const char *name, uint32_t parts, uint32_t rf)
{
  uint8_t *cmd;
  size_t len;
  int rc_enc = meta_cmd_create_topic(name, parts, rf, NULL, &cmd, &len);
  apply_ok(st, rc_enc, cmd, len);
}

static void set_state(struct meta_state *st, uint64_t id, enum meta_node_state s)
{
  uint8_t *cmd;
  size_t len;
  int rc_enc = meta_cmd_set_node_state(id, s, 0, 0, &cmd, &len);
  apply_ok(st, rc_enc, cmd, len);
}

static void assert_load(const struct meta_state *st, uint64_t node, uint32_t replicas,
                        uint32_t leaders)
{
  uint32_t r, l;
  meta_node_load(st, node, &r, &l);
  if (r != replicas || l != leaders)
    fail_msg("node %llu: %u replicas %u leaders, want %u and %u", (unsigned long long)node, r, l,
             replicas, leaders);
}

static const char *rack_of(const struct meta_state *st, uint64_t id)
{
  return meta_node_find(st, id)->rack;
}

static void test_placement_six_partitions_rf3_on_three_nodes_is_even(void **state)
{
  struct meta_state st;
  make_cluster(&st, 3, NULL);
  create(&st, "t", 6, 3);
  for (uint64_t id = 1; id <= 3; id++)
    assert_load(&st, id, 6, 2);
  meta_state_close(&st);
}

static void test_placement_four_nodes_is_even(void **state)
{
  struct meta_state st;
  make_cluster(&st, 4, NULL);
  create(&st, "a", 4, 3);
  for (uint64_t id = 1; id <= 4; id++)
    assert_load(&st, id, 3, 1);
  create(&st, "b", 8, 2);
  for (uint64_t id = 1; id <= 4; id++)
    assert_load(&st, id, 3 + 4, 1 + 2);
  /* Distinct nodes in every partition. */
  const struct meta_topic *t = meta_topic_find(&st, "a");
  for (uint32_t p = 0; p < t->npartitions; p++)
    for (uint32_t r = 1; r < 3; r++)
      assert_false(
          meta_replicas_contain(t->partitions[p].replicas, r, t->partitions[p].replicas[r]));
  meta_state_close(&st);
}

static void test_placement_counts_the_load_already_in_the_cluster(void **state)
{
  struct meta_state st;
  make_cluster(&st, 4, NULL);
  create(&st, "first", 1, 1); /* lands on node 1 */
  assert_load(&st, 1, 1, 1);
  create(&st, "second", 3, 1); /* fills the other three */
  for (uint64_t id = 1; id <= 4; id++)
    assert_load(&st, id, 1, 1);
  /* A new node joins empty: the next topics go to it first. */
  uint8_t *cmd;
  size_t len;
  struct meta_node_info info = {5, 7, "h:1", "h:2", "", "", NULL, NULL, 0};
  int rc_enc = meta_cmd_register_node(&info, 0, &cmd, &len);
  apply_ok(&st, rc_enc, cmd, len);
  create(&st, "third", 1, 1);
  assert_load(&st, 5, 1, 1);
  meta_state_close(&st);
}

static void test_placement_many_topics_stay_balanced(void **state)
{
  uint64_t seed = tu_seed("test_placement_many_topics_stay_balanced");
  uint64_t rnd = seed | 1;
  struct meta_state st;
  make_cluster(&st, 7, NULL);
  for (int i = 0; i < 60; i++) {
    char name[16];
    snprintf(name, sizeof name, "t%d", i);
    create(&st, name, 1 + (uint32_t)(tu_rand(&rnd) % 9), 1 + (uint32_t)(tu_rand(&rnd) % 3));
  }
  uint32_t rmin = UINT32_MAX, rmax = 0, lmin = UINT32_MAX, lmax = 0;
  for (uint64_t id = 1; id <= 7; id++) {
    uint32_t r, l;
    meta_node_load(&st, id, &r, &l);
    rmin = r < rmin ? r : rmin;
    rmax = r > rmax ? r : rmax;
    lmin = l < lmin ? l : lmin;
    lmax = l > lmax ? l : lmax;
  }
  printf("replicas %u..%u, preferred leaders %u..%u\n", rmin, rmax, lmin, lmax);
  assert_true(lmax - lmin <= 1); /* each leader goes to a least-led node */
  assert_true(rmax - rmin <= 2);
  meta_state_close(&st);
}

static void test_placement_spreads_a_partition_over_racks(void **state)
{
  static const char *const racks[] = {"r1", "r1", "r2", "r2", "r3", "r3"};
  struct meta_state st;
  make_cluster(&st, 6, racks);
  create(&st, "t", 6, 3);
  const struct meta_topic *t = meta_topic_find(&st, "t");
  for (uint32_t p = 0; p < 6; p++) {
    const uint64_t *r = t->partitions[p].replicas;
    assert_string_not_equal(rack_of(&st, r[0]), rack_of(&st, r[1]));
    assert_string_not_equal(rack_of(&st, r[0]), rack_of(&st, r[2]));
    assert_string_not_equal(rack_of(&st, r[1]), rack_of(&st, r[2]));
  }
  for (uint64_t id = 1; id <= 6; id++)
    assert_load(&st, id, 3, 1);
  meta_state_close(&st);
}

static void test_placement_uses_the_rare_rack_where_racks_are_uneven(void **state)
{
  /* Node 4 is alone in its rack: every rf 2 partition needs it to span
   * two racks. */
  static const char *const racks[] = {"a", "a", "a", "b"};
  struct meta_state st;
  make_cluster(&st, 4, racks);
  create(&st, "t", 6, 2);
  const struct meta_topic *t = meta_topic_find(&st, "t");
  for (uint32_t p = 0; p < 6; p++)
    assert_true(meta_replicas_contain(t->partitions[p].replicas, 2, 4));
  /* Two racks, rf 3: both racks in every partition. */
  create(&st, "u", 4, 3);
  t = meta_topic_find(&st, "u");
  for (uint32_t p = 0; p < 4; p++)
    assert_true(meta_replicas_contain(t->partitions[p].replicas, 3, 4));
  meta_state_close(&st);
}

static void test_placement_skips_dead_draining_and_removed_nodes(void **state)
{
  struct meta_state st;
  make_cluster(&st, 5, NULL);
  set_state(&st, 2, META_NODE_DEAD);
  set_state(&st, 3, META_NODE_DRAINING);
  set_state(&st, 3, META_NODE_REMOVED);
  set_state(&st, 4, META_NODE_DRAINING);
  struct placement_table t;
  assert_int_equal(placement_table_build(&st, &t), 0);
  assert_int_equal(t.neligible, 2);
  assert_int_equal(t.nnodes, 4); /* REMOVED is not in the table */
  uint64_t out[8];
  assert_int_equal(placement_assign(&t, 1, 3, out), CAIRN_EINVALID_RF);
  assert_int_equal(placement_assign(&t, 1, 0, out), CAIRN_EINVALID_RF);
  assert_int_equal(placement_assign(&t, 4, 2, out), 0);
  for (int i = 0; i < 8; i++)
    assert_true(out[i] == 1 || out[i] == 5);
  placement_table_free(&t);
  meta_state_close(&st);
}

static void test_placement_pick_adds_an_outside_node_on_a_missing_rack(void **state)
{
  static const char *const racks[] = {"r1", "r1", "r2", "r2", "r3"};
  struct meta_state st;
  make_cluster(&st, 5, racks);
  struct placement_table t;
  assert_int_equal(placement_table_build(&st, &t), 0);
  /* A third replica for a partition on 1 (r1) and 3 (r2): r3 -> node 5. */
  uint64_t cur[2] = {1, 3}, pick;
  assert_int_equal(placement_pick(&t, cur, 2, 0, &pick), 0);
  assert_int_equal(pick, 5);
  /* Replacing 3 (r2) among {1, 5, 3}: node 4 (r2) or 2 (r1); r2 then holds
   * nothing else, r1 holds node 1 -> node 4. */
  uint64_t cur2[3] = {1, 5, 3};
  assert_int_equal(placement_pick(&t, cur2, 3, 3, &pick), 0);
  assert_int_equal(pick, 4);
  /* Nothing left outside the partition. */
  uint64_t all[5] = {1, 2, 3, 4, 5};
  assert_int_equal(placement_pick(&t, all, 5, 0, &pick), CAIRN_ENOTFOUND);
  placement_table_free(&t);
  meta_state_close(&st);
}

/* A table that requires a capability chooses only nodes that have it, for
 * whole partitions and for single picks; lifting it makes all eligible. */
static void test_placement_requires_a_capability_when_asked(void **state)
{
  struct meta_state st;
  make_cluster(&st, 4, NULL);
  uint8_t *cmd;
  size_t len;
  for (uint64_t id = 2; id <= 3; id++) {
    struct meta_node_info info = {id, 7, "h:1", "h:2", "", "", NULL, NULL, META_NODE_CAP_POSTGRESQL};
    int rc_node = meta_cmd_register_node(&info, 0, &cmd, &len);
    apply_ok(&st, rc_node, cmd, len);
  }
  struct placement_table t;
  assert_int_equal(placement_table_build(&st, &t), 0);
  assert_int_equal(t.neligible, 4);
  placement_table_require(&t, META_NODE_CAP_POSTGRESQL);
  assert_int_equal(t.neligible, 2);
  uint64_t out[8];
  assert_int_equal(placement_assign(&t, 1, 3, out), CAIRN_EINVALID_RF);
  assert_int_equal(placement_assign(&t, 4, 2, out), 0);
  for (int i = 0; i < 8; i++)
    assert_true(out[i] == 2 || out[i] == 3);
  uint64_t cur[1] = {2}, pick;
  assert_int_equal(placement_pick(&t, cur, 1, 0, &pick), 0);
  assert_int_equal(pick, 3);
  uint64_t both[2] = {2, 3};
  assert_int_equal(placement_pick(&t, both, 2, 0, &pick), CAIRN_ENOTFOUND);
  /* A capable node going dead leaves one. */
  placement_set_eligible(&t, 3, false);
  assert_int_equal(t.neligible, 1);
  placement_set_eligible(&t, 3, true);
  placement_table_require(&t, 0);
  assert_int_equal(t.neligible, 4);
  assert_int_equal(placement_pick(&t, both, 2, 0, &pick), 0);
  assert_true(pick == 1 || pick == 4);
  placement_table_free(&t);
  meta_state_close(&st);
}

int main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_placement_six_partitions_rf3_on_three_nodes_is_even),
      cmocka_unit_test(test_placement_four_nodes_is_even),
      cmocka_unit_test(test_placement_counts_the_load_already_in_the_cluster),
      cmocka_unit_test(test_placement_many_topics_stay_balanced),
      cmocka_unit_test(test_placement_spreads_a_partition_over_racks),
      cmocka_unit_test(test_placement_uses_the_rare_rack_where_racks_are_uneven),
      cmocka_unit_test(test_placement_skips_dead_draining_and_removed_nodes),
      cmocka_unit_test(test_placement_pick_adds_an_outside_node_on_a_missing_rack),
      cmocka_unit_test(test_placement_requires_a_capability_when_asked),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
