/* test_group_assign.c - the three assignment strategies: every partition
 * assigned exactly once to a subscriber, evenness, and sticky keeping what
 * members held. Random cases print their seed (CAIRN_TEST_SEED replays). */
#include "common/err.h"
#include "server/group/assign.h"
#include "testutil.h"

#include <inttypes.h>
#include <stdbool.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#define MAXM 16
#define MAXT 8

/* Every partition of a subscribed topic assigned once, to a subscriber;
 * returns the spread (max - min count among subscribing members). */
static size_t check_complete(const uint32_t *counts, size_t nt, struct assign_member *m, size_t nm)
{
  for (size_t t = 0; t < nt; t++) {
    bool subscribed = false;
    for (size_t i = 0; i < nm; i++) {
      for (size_t k = 0; k < m[i].ntopics; k++) {
        subscribed = subscribed || m[i].topics[k] == t;
      }
    }
    for (uint32_t p = 0; p < counts[t]; p++) {
      int owners = 0;
      for (size_t i = 0; i < nm; i++) {
        for (size_t k = 0; k < m[i].nout; k++) {
          if (m[i].out[k].topic == t && m[i].out[k].partition == p) {
            owners++;
            bool subs = false;
            for (size_t j = 0; j < m[i].ntopics; j++) {
              subs = subs || m[i].topics[j] == t;
            }
            assert_true(subs);
          }
        }
      }
      assert_int_equal(owners, subscribed ? 1 : 0);
    }
  }
  size_t lo = SIZE_MAX, hi = 0;
  for (size_t i = 0; i < nm; i++) {
    if (m[i].ntopics == 0) {
      continue;
    }
    lo = m[i].nout < lo ? m[i].nout : lo;
    hi = m[i].nout > hi ? m[i].nout : hi;
  }
  return hi >= lo ? hi - lo : 0;
}

static void free_out(struct assign_member *m, size_t nm)
{
  for (size_t i = 0; i < nm; i++) {
    free(m[i].out);
    m[i].out = NULL;
    m[i].nout = 0;
  }
}

static void test_assign_three_members_share_twelve_partitions_evenly(void **state)
{
  uint32_t counts[1] = {12};
  uint32_t sub[1] = {0};
  for (int s = 0; s < ASSIGN_NSTRATEGIES; s++) {
    struct assign_member m[3];
    memset(m, 0, sizeof m);
    for (int i = 0; i < 3; i++) {
      m[i].topics = sub;
      m[i].ntopics = 1;
    }
    assert_int_equal(assign_run((enum assign_strategy)s, counts, 1, m, 3), 0);
    assert_int_equal(check_complete(counts, 1, m, 3), 0);
    for (int i = 0; i < 3; i++) {
      assert_int_equal(m[i].nout, 4);
    }
    free_out(m, 3);
  }
}

static void test_assign_range_gives_consecutive_ranges(void **state)
{
  uint32_t counts[1] = {7};
  uint32_t sub[1] = {0};
  struct assign_member m[3];
  memset(m, 0, sizeof m);
  for (int i = 0; i < 3; i++) {
    m[i].topics = sub;
    m[i].ntopics = 1;
  }
  assert_int_equal(assign_run(ASSIGN_RANGE, counts, 1, m, 3), 0);
  assert_int_equal(m[0].nout, 3);
  assert_int_equal(m[1].nout, 2);
  assert_int_equal(m[2].nout, 2);
  assert_int_equal(m[0].out[0].partition, 0);
  assert_int_equal(m[0].out[2].partition, 2);
  assert_int_equal(m[1].out[0].partition, 3);
  assert_int_equal(m[2].out[1].partition, 6);
  free_out(m, 3);
}

static void test_assign_sticky_keeps_what_survivors_held(void **state)
{
  /* Three members held 4 each of 12; the third leaves: the two left keep
   * their 4 and split the third's 4 evenly. */
  uint32_t counts[1] = {12};
  uint32_t sub[1] = {0};
  struct assign_member m[3];
  memset(m, 0, sizeof m);
  for (int i = 0; i < 3; i++) {
    m[i].topics = sub;
    m[i].ntopics = 1;
  }
  assert_int_equal(assign_run(ASSIGN_STICKY, counts, 1, m, 3), 0);
  struct assign_tp before[2][12];
  size_t nbefore[2] = {m[0].nout, m[1].nout};
  memcpy(before[0], m[0].out, m[0].nout * sizeof *m[0].out);
  memcpy(before[1], m[1].out, m[1].nout * sizeof *m[1].out);
  free_out(m, 3);
  struct assign_member two[2];
  memset(two, 0, sizeof two);
  for (int i = 0; i < 2; i++) {
    two[i].topics = sub;
    two[i].ntopics = 1;
    two[i].prev = before[i];
    two[i].nprev = nbefore[i];
  }
  assert_int_equal(assign_run(ASSIGN_STICKY, counts, 1, two, 2), 0);
  assert_int_equal(check_complete(counts, 1, two, 2), 0);
  for (int i = 0; i < 2; i++) {
    assert_int_equal(two[i].nout, 6);
    for (size_t k = 0; k < nbefore[i]; k++) {
      bool kept = false;
      for (size_t j = 0; j < two[i].nout; j++) {
        kept = kept || (two[i].out[j].partition == before[i][k].partition);
      }
      assert_true(kept);
    }
  }
  free_out(two, 2);
}

static void test_assign_sticky_moves_only_what_evenness_needs(void **state)
{
  /* One member held all 12; a second joins: the first keeps 6 of its own,
   * and nothing moves that evenness does not require. */
  uint32_t counts[1] = {12};
  uint32_t sub[1] = {0};
  struct assign_tp all[12];
  for (uint32_t p = 0; p < 12; p++) {
    all[p].topic = 0;
    all[p].partition = p;
  }
  struct assign_member m[2];
  memset(m, 0, sizeof m);
  m[0].topics = m[1].topics = sub;
  m[0].ntopics = m[1].ntopics = 1;
  m[1].prev = all; /* the joiner is second in order, the old holder first */
  m[1].nprev = 12;
  assert_int_equal(assign_run(ASSIGN_STICKY, counts, 1, m, 2), 0);
  assert_int_equal(check_complete(counts, 1, m, 2), 0);
  assert_int_equal(m[1].nout, 6);
  assert_int_equal(m[0].nout, 6);
  free_out(m, 2);
}

static void test_assign_random_cases_are_complete_even_and_sticky(void **state)
{
  uint64_t seed = tu_seed("test_assign_random");
  srandom((unsigned)seed);
  for (int round = 0; round < 500; round++) {
    size_t nt = 1 + (size_t)random() % MAXT;
    size_t nm = 1 + (size_t)random() % MAXM;
    uint32_t counts[MAXT];
    uint32_t all[MAXT];
    for (size_t t = 0; t < nt; t++) {
      counts[t] = (uint32_t)(random() % 20);
      all[t] = (uint32_t)t;
    }
    bool same = random() % 2 == 0; /* identical subscriptions: even */
    uint32_t subs[MAXM][MAXT];
    struct assign_member m[MAXM];
    memset(m, 0, sizeof m);
    for (size_t i = 0; i < nm; i++) {
      if (same) {
        m[i].topics = all;
        m[i].ntopics = nt;
        continue;
      }
      size_t k = 0;
      for (size_t t = 0; t < nt; t++) {
        if (random() % 2 == 0) {
          subs[i][k++] = (uint32_t)t;
        }
      }
      m[i].topics = subs[i];
      m[i].ntopics = k;
    }
    for (int s = 0; s < ASSIGN_NSTRATEGIES; s++) {
      int rv = assign_run((enum assign_strategy)s, counts, nt, m, nm);
      assert_int_equal(rv, 0);
      size_t spread = check_complete(counts, nt, m, nm);
      if (same && s != ASSIGN_RANGE) {
        if (spread > 1) {
          fail_msg("seed %" PRIu64 " round %d strategy %s: spread %zu", seed, round,
                   assign_strategy_name((enum assign_strategy)s), spread);
        }
      }
      if (s == ASSIGN_STICKY && same && nm > 1) {
        /* Drop the last member: the others keep everything they held. */
        struct assign_tp *prev[MAXM];
        size_t nprev[MAXM];
        for (size_t i = 0; i < nm; i++) {
          prev[i] = m[i].out;
          nprev[i] = m[i].nout;
          m[i].out = NULL;
          m[i].nout = 0;
          m[i].prev = prev[i];
          m[i].nprev = nprev[i];
        }
        assert_int_equal(assign_run(ASSIGN_STICKY, counts, nt, m, nm - 1), 0);
        assert_true(check_complete(counts, nt, m, nm - 1) <= 1);
        for (size_t i = 0; i < nm - 1; i++) {
          for (size_t k = 0; k < nprev[i]; k++) {
            bool kept = false;
            for (size_t j = 0; j < m[i].nout; j++) {
              kept = kept || (m[i].out[j].topic == prev[i][k].topic &&
                              m[i].out[j].partition == prev[i][k].partition);
            }
            if (!kept) {
              fail_msg("seed %" PRIu64 " round %d: member %zu lost a partition", seed, round, i);
            }
          }
          m[i].prev = NULL;
          m[i].nprev = 0;
        }
        for (size_t i = 0; i < nm; i++) {
          free(prev[i]);
        }
        m[nm - 1].out = NULL;
        m[nm - 1].nout = 0;
      }
      free_out(m, nm);
    }
  }
}

static void test_assign_names_round_trip(void **state)
{
  for (int s = 0; s < ASSIGN_NSTRATEGIES; s++) {
    assert_int_equal(assign_strategy_parse(assign_strategy_name((enum assign_strategy)s)), s);
  }
  assert_int_equal(assign_strategy_parse("cooperative-sticky"), -1);
  uint32_t counts[1] = {3};
  uint32_t bad[1] = {5};
  struct assign_member m[1];
  memset(m, 0, sizeof m);
  m[0].topics = bad;
  m[0].ntopics = 1;
  assert_int_equal(assign_run(ASSIGN_RANGE, counts, 1, m, 1), CAIRN_EINVAL);
  assert_null(m[0].out);
}

int main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_assign_three_members_share_twelve_partitions_evenly),
      cmocka_unit_test(test_assign_range_gives_consecutive_ranges),
      cmocka_unit_test(test_assign_sticky_keeps_what_survivors_held),
      cmocka_unit_test(test_assign_sticky_moves_only_what_evenness_needs),
      cmocka_unit_test(test_assign_random_cases_are_complete_even_and_sticky),
      cmocka_unit_test(test_assign_names_round_trip),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
