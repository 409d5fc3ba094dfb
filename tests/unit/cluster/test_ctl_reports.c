/* test_ctl_reports.c - the controller's partition report table
 * (cluster/ctl_reports.h): random reports, deltas and drops checked
 * against a plain model (one slot per partition, the rules of the header:
 * a report replaces one of a lower or equal term), the table kept sorted,
 * and the rules one by one. */
#include "cluster/ctl_reports.h"
#include "cluster/meta_state.h"
#include "testutil.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#define TOPICS 7
#define PARTS 40
#define NODES 5

static struct ctl_report report_of(uint32_t topic, uint32_t partition, uint64_t term,
                                   uint64_t epoch)
{
  struct ctl_report r;
  memset(&r, 0, sizeof r);
  r.topic_id = topic;
  r.partition = partition;
  r.term = term;
  r.replica_epoch = epoch;
  r.nvoters = 1 + (size_t)(epoch % META_MAX_REPLICAS);
  for (size_t i = 0; i < r.nvoters; i++) {
    r.voters[i] = epoch * 10 + i;
  }
  return r;
}

/* The model: a slot per (topic, partition); present or not. */
struct model {
  bool has[TOPICS][PARTS];
  struct ctl_report r[TOPICS][PARTS];
};

static void model_put(struct model *m, uint64_t node, const struct ctl_report *rs, size_t n)
{
  for (size_t i = 0; i < n; i++) {
    struct ctl_report r = rs[i];
    r.leader_id = node;
    bool *has = &m->has[r.topic_id][r.partition];
    struct ctl_report *o = &m->r[r.topic_id][r.partition];
    if (!*has || o->term <= r.term) {
      *o = r;
      *has = true;
    }
  }
}

static void check_equal(const struct ctl_reports *t, const struct model *m)
{
  size_t want = 0;
  for (uint32_t tp = 0; tp < TOPICS; tp++) {
    for (uint32_t p = 0; p < PARTS; p++) {
      const struct ctl_report *got = ctl_reports_find(t, meta_group_id(tp, p));
      if (!m->has[tp][p]) {
        assert_null(got);
        continue;
      }
      want++;
      assert_non_null(got);
      const struct ctl_report *w = &m->r[tp][p];
      assert_int_equal(got->leader_id, w->leader_id);
      assert_int_equal(got->term, w->term);
      assert_int_equal(got->replica_epoch, w->replica_epoch);
      assert_int_equal(got->nvoters, w->nvoters);
      assert_memory_equal(got->voters, w->voters, w->nvoters * sizeof w->voters[0]);
    }
  }
  assert_int_equal(t->n, want);
  for (size_t i = 1; i < t->n; i++) {
    assert_true(meta_group_id(t->v[i - 1].topic_id, t->v[i - 1].partition) <
                meta_group_id(t->v[i].topic_id, t->v[i].partition));
  }
}

static void test_random_reports_match_the_model(void **state)
{
  (void)state;
  srand(4242);
  struct ctl_reports t;
  ctl_reports_init(&t);
  struct model *m = calloc(1, sizeof *m);
  assert_non_null(m);
  struct ctl_report rs[TOPICS * PARTS];
  for (int round = 0; round < 3000; round++) {
    uint64_t node = 1 + (uint64_t)(rand() % NODES);
    int what = rand() % 10;
    if (what < 6) { /* a report of distinct partitions, in any order */
      size_t n = (size_t)(rand() % 60);
      bool used[TOPICS][PARTS] = {{false}};
      size_t k = 0;
      for (size_t i = 0; i < n; i++) {
        uint32_t tp = (uint32_t)(rand() % TOPICS), p = (uint32_t)(rand() % PARTS);
        if (used[tp][p]) {
          continue;
        }
        used[tp][p] = true;
        rs[k++] = report_of(tp, p, 1 + (uint64_t)(rand() % 20), (uint64_t)(rand() % 1000));
      }
      assert_int_equal(ctl_reports_put(&t, node, rs, k), 0);
      model_put(m, node, rs, k);
    } else if (what < 9) { /* a partition stopped */
      uint32_t tp = (uint32_t)(rand() % TOPICS), p = (uint32_t)(rand() % PARTS);
      ctl_reports_drop(&t, node, meta_group_id(tp, p));
      if (m->has[tp][p] && m->r[tp][p].leader_id == node) {
        m->has[tp][p] = false;
      }
    } else { /* a full report replaces the node's: its old ones go first */
      ctl_reports_drop_node(&t, node);
      for (uint32_t tp = 0; tp < TOPICS; tp++) {
        for (uint32_t p = 0; p < PARTS; p++) {
          if (m->has[tp][p] && m->r[tp][p].leader_id == node) {
            m->has[tp][p] = false;
          }
        }
      }
    }
    check_equal(&t, m);
  }
  ctl_reports_clear(&t);
  assert_int_equal(t.n, 0);
  assert_null(ctl_reports_find(&t, meta_group_id(1, 1)));
  ctl_reports_free(&t);
  free(m);
}

static void test_rules_one_by_one(void **state)
{
  (void)state;
  struct ctl_reports t;
  ctl_reports_init(&t);
  struct ctl_report a = report_of(3, 1, 5, 10);
  assert_int_equal(ctl_reports_put(&t, 1, &a, 1), 0);
  /* A lower term from another node does not replace it... */
  struct ctl_report b = report_of(3, 1, 4, 11);
  assert_int_equal(ctl_reports_put(&t, 2, &b, 1), 0);
  assert_int_equal(ctl_reports_find(&t, meta_group_id(3, 1))->leader_id, 1);
  /* ...an equal or higher one does. */
  b.term = 5;
  assert_int_equal(ctl_reports_put(&t, 2, &b, 1), 0);
  assert_int_equal(ctl_reports_find(&t, meta_group_id(3, 1))->leader_id, 2);
  assert_int_equal(ctl_reports_find(&t, meta_group_id(3, 1))->replica_epoch, 11);
  /* A drop by a node that did not make the report changes nothing. */
  ctl_reports_drop(&t, 1, meta_group_id(3, 1));
  assert_non_null(ctl_reports_find(&t, meta_group_id(3, 1)));
  ctl_reports_drop(&t, 2, meta_group_id(3, 1));
  assert_null(ctl_reports_find(&t, meta_group_id(3, 1)));
  /* The same partition twice in one report: the higher term counts. */
  struct ctl_report two[2] = {report_of(2, 0, 9, 1), report_of(2, 0, 8, 2)};
  assert_int_equal(ctl_reports_put(&t, 3, two, 2), 0);
  assert_int_equal(t.n, 1);
  assert_int_equal(ctl_reports_find(&t, meta_group_id(2, 0))->term, 9);
  /* Partitions far apart keep the order of their group ids. */
  struct ctl_report many[3] = {report_of(9, 0, 1, 1), report_of(1, 7, 1, 1),
                               report_of(2, (1u << META_PARTITION_BITS) - 1, 1, 1)};
  assert_int_equal(ctl_reports_put(&t, 4, many, 3), 0);
  assert_int_equal(t.n, 4);
  assert_int_equal(t.v[0].topic_id, 1);
  assert_int_equal(t.v[1].topic_id, 2);
  assert_int_equal(t.v[1].partition, 0);
  assert_int_equal(t.v[2].topic_id, 2);
  assert_int_equal(t.v[3].topic_id, 9);
  ctl_reports_drop_node(&t, 4);
  assert_int_equal(t.n, 1);
  ctl_reports_free(&t);
}

int main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_random_reports_match_the_model),
      cmocka_unit_test(test_rules_one_by_one),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
