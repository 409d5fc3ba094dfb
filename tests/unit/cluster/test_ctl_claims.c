/* test_ctl_claims.c - the controller leader's ReportLeader proposals in
 * flight (cluster/ctl_claims.h): the rules on one partition, then random
 * takes and ends over a few hundred partitions checked against a plain
 * array (every claim found after the set grew and after removals moved
 * entries back). */
#include "cluster/ctl_claims.h"
#include "testutil.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

static void test_claims_one_partition(void **state)
{
  (void)state;
  struct ctl_claims c;
  ctl_claims_init(&c);
  assert_true(ctl_claims_take(&c, 1, 0, 2, 5));
  assert_false(ctl_claims_take(&c, 1, 0, 2, 5)); /* in flight: not again */
  assert_false(ctl_claims_take(&c, 1, 0, 2, 4)); /* an older term of it */
  assert_true(ctl_claims_take(&c, 1, 0, 2, 6));  /* a newer term */
  assert_true(ctl_claims_take(&c, 1, 0, 3, 6));  /* another node */
  assert_int_equal(c.n, 1);
  ctl_claims_end(&c, 1, 0, 2, 6); /* replaced: nothing forgotten */
  assert_false(ctl_claims_take(&c, 1, 0, 3, 6));
  ctl_claims_end(&c, 1, 0, 3, 6);
  assert_int_equal(c.n, 0);
  assert_true(ctl_claims_take(&c, 1, 0, 3, 6)); /* ended: may go again */
  assert_true(ctl_claims_take(&c, 0, 0, 1, 1)); /* topic 0 partition 0 is a key too */
  assert_false(ctl_claims_take(&c, 0, 0, 1, 1));
  ctl_claims_clear(&c);
  assert_int_equal(c.n, 0);
  assert_true(ctl_claims_take(&c, 1, 0, 3, 6));
  ctl_claims_free(&c);
  assert_null(c.v);
}

#define PARTS 300

struct model {
  bool used;
  uint64_t node_id, term;
};

/* nparts (at most PARTS) partitions: 31 keep the set at its first 64
 * slots, nearly half full (long probe runs, some wrapping at the end);
 * 300 make it grow. */
static void claims_against_a_model(uint32_t nparts)
{
  uint64_t rs = tu_seed("test_claims_against_a_model") | 1;
  struct ctl_claims c;
  ctl_claims_init(&c);
  static struct model m[PARTS];
  memset(m, 0, sizeof m);
  for (int step = 0; step < 200000; step++) {
    uint32_t p = (uint32_t)(tu_rand(&rs) % nparts);
    uint32_t topic = p % 7, part = p / 7; /* (topic, partition) pairs map one to one to p */
    uint64_t node = 1 + tu_rand(&rs) % 3, term = 1 + tu_rand(&rs) % 4;
    if (tu_rand(&rs) % 2 == 0) {
      bool want = !(m[p].used && m[p].node_id == node && m[p].term >= term);
      assert_int_equal(ctl_claims_take(&c, topic, part, node, term), want);
      if (want) {
        m[p] = (struct model){.used = true, .node_id = node, .term = term};
      }
    } else {
      /* End the claim in flight half of the time, a stale one otherwise. */
      if (m[p].used && tu_rand(&rs) % 2 == 0) {
        node = m[p].node_id;
        term = m[p].term;
      }
      ctl_claims_end(&c, topic, part, node, term);
      if (m[p].used && m[p].node_id == node && m[p].term == term) {
        m[p].used = false;
      }
    }
    size_t n = 0;
    for (uint32_t i = 0; i < nparts; i++) {
      n += m[i].used ? 1 : 0;
    }
    assert_int_equal(c.n, n);
  }
  ctl_claims_free(&c);
}

static void test_claims_against_a_model(void **state)
{
  (void)state;
  claims_against_a_model(31);
  claims_against_a_model(300);
}

int main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_claims_one_partition),
      cmocka_unit_test(test_claims_against_a_model),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
