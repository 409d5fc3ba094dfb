/* test_rgroup_cap.c - bounded AppendEntries (rgroup_cap.h): the prefix
 * that fits the byte budget, and the leader's next_index after a success
 * that reaches the end of a bounded message. The raft instances are raft
 * 0.15's public structures filled by hand. */
#include "cluster/rgroup_cap.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

struct fixture {
  struct raft r;
  struct raft_server servers[3];
  struct raft_progress progress[3];
  struct rgroup_cap cap;
};

static struct fixture *fx_new(unsigned short state, raft_term term)
{
  struct fixture *fx = calloc(1, sizeof *fx);
  assert_non_null(fx);
  fx->r.state = state;
  fx->r.current_term = term;
  for (unsigned i = 0; i < 3; i++) {
    fx->servers[i].id = i + 1;
  }
  fx->r.configuration.servers = fx->servers;
  fx->r.configuration.n = 3;
  fx->r.leader_state.progress = fx->progress;
  return fx;
}

static void test_count_keeps_the_prefix_within_the_budget(void **state)
{
  (void)state;
  static struct raft_entry es[130];
  for (size_t i = 0; i < 130; i++) {
    es[i].term = 1;
    es[i].buf.len = 48 * 1024;
  }
  struct raft_append_entries m = {.entries = es, .n_entries = 123};
  unsigned n = rgroup_cap_count(&m);
  /* 21 entries of 48 KiB fit in 1 MiB with their headers, 22 do not. */
  assert_int_equal(n, 21);
  m.n_entries = 5;
  assert_int_equal(rgroup_cap_count(&m), 5);
  /* One entry larger than the budget still goes, alone. */
  es[0].buf.len = 3 << 20;
  m.n_entries = 4;
  assert_int_equal(rgroup_cap_count(&m), 1);
}

/* Pipeline: raft moved next_index past all 123 entries it handed over; a
 * success for the 21 sent brings it back to the first entry left out. */
static void test_success_resumes_after_the_bounded_message(void **state)
{
  (void)state;
  struct fixture *fx = fx_new(RAFT_LEADER, 2);
  struct raft_append_entries m = {.term = 2, .prev_log_index = 5, .n_entries = 123};
  rgroup_cap_sent(&fx->cap, 2, 2, &m, 21);
  fx->progress[1] = (struct raft_progress){.state = 1, .next_index = 129, .match_index = 5};
  /* An answer to an earlier message changes nothing. */
  struct raft_append_entries_result res = {.term = 2, .rejected = 0, .last_log_index = 5};
  rgroup_cap_on_result(&fx->cap, &fx->r, 2, &res);
  assert_int_equal(fx->progress[1].next_index, 129);
  /* A rejection neither. */
  res = (struct raft_append_entries_result){.term = 2, .rejected = 128, .last_log_index = 26};
  rgroup_cap_on_result(&fx->cap, &fx->r, 2, &res);
  assert_int_equal(fx->progress[1].next_index, 129);
  /* Another server's answer neither. */
  res = (struct raft_append_entries_result){.term = 2, .rejected = 0, .last_log_index = 26};
  rgroup_cap_on_result(&fx->cap, &fx->r, 3, &res);
  assert_int_equal(fx->progress[2].next_index, 0);
  /* The answer covering the bounded message. */
  rgroup_cap_on_result(&fx->cap, &fx->r, 2, &res);
  assert_int_equal(fx->progress[1].next_index, 27);
  /* Answered once: a repeat leaves raft's own bookkeeping alone. */
  fx->progress[1].next_index = 129;
  rgroup_cap_on_result(&fx->cap, &fx->r, 2, &res);
  assert_int_equal(fx->progress[1].next_index, 129);
  free(fx);
}

/* Probe state does not move next_index on send, and a bounded message of
 * an older term is no guide in a new one. */
static void test_probe_and_older_terms_are_left_to_raft(void **state)
{
  (void)state;
  struct fixture *fx = fx_new(RAFT_LEADER, 3);
  struct raft_append_entries m = {.term = 3, .prev_log_index = 5, .n_entries = 100};
  rgroup_cap_sent(&fx->cap, 3, 2, &m, 21);
  fx->progress[1] = (struct raft_progress){.state = 0, .next_index = 6, .match_index = 5};
  struct raft_append_entries_result res = {.term = 3, .rejected = 0, .last_log_index = 26};
  rgroup_cap_on_result(&fx->cap, &fx->r, 2, &res);
  assert_int_equal(fx->progress[1].next_index, 6);
  rgroup_cap_sent(&fx->cap, 3, 2, &m, 21);
  fx->r.current_term = 4;
  fx->progress[1] = (struct raft_progress){.state = 1, .next_index = 106, .match_index = 5};
  res.term = 4;
  rgroup_cap_on_result(&fx->cap, &fx->r, 2, &res);
  assert_int_equal(fx->progress[1].next_index, 106);
  free(fx);
}

int main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_count_keeps_the_prefix_within_the_budget),
      cmocka_unit_test(test_success_resumes_after_the_bounded_message),
      cmocka_unit_test(test_probe_and_older_terms_are_left_to_raft),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
