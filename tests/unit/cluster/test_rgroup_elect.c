/* test_rgroup_elect.c - one leader per term (rgroup_elect_second_vote,
 * cluster/rgroup.h). First the rule on raft 0.15's public structures
 * filled by hand; then raft 0.15 itself, one instance over a raft_io that
 * only records, driven message by message: a leader that asked for a
 * transfer to replica 2, stepped down and voted for replica 3 in term 3,
 * grants replica 2 a second vote in term 3 (electionVote's is_transferee).
 * That is the message the rule keeps from raft. */
#include "cluster/rgroup.h"
#include "raft_rec.h"

#include <raft.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

static struct raft_message vote_request(raft_term term, raft_id candidate, bool pre_vote)
{
  struct raft_message m;
  memset(&m, 0, sizeof m);
  m.type = RAFT_IO_REQUEST_VOTE;
  m.server_id = candidate;
  m.server_address = candidate == 2 ? "2" : "3";
  m.request_vote.term = term;
  m.request_vote.candidate_id = candidate;
  m.request_vote.last_log_index = 1;
  m.request_vote.last_log_term = 1;
  m.request_vote.disrupt_leader = true;
  m.request_vote.pre_vote = pre_vote;
  return m;
}

static void test_second_vote_rule(void **state)
{
  (void)state;
  struct raft r;
  memset(&r, 0, sizeof r);
  struct raft_transfer t;
  memset(&t, 0, sizeof t);
  t.id = 2;
  r.state = RAFT_FOLLOWER;
  r.current_term = 8;
  r.voted_for = 3;
  struct raft_message m = vote_request(8, 2, false);
  assert_false(rgroup_elect_second_vote(&r, &m)); /* no transfer pending */
  r.transfer = &t;
  assert_true(rgroup_elect_second_vote(&r, &m)); /* voted for 3 in 8, 2 is the transferee */
  struct raft_message pre = vote_request(8, 2, true);
  assert_false(rgroup_elect_second_vote(&r, &pre)); /* a pre-vote is no vote */
  struct raft_message later = vote_request(9, 2, false);
  assert_false(rgroup_elect_second_vote(&r, &later)); /* raft clears the vote first */
  struct raft_message other = vote_request(8, 3, false);
  assert_false(rgroup_elect_second_vote(&r, &other)); /* raft refuses it by itself */
  r.voted_for = 2;
  assert_false(rgroup_elect_second_vote(&r, &m)); /* the same vote again */
  r.voted_for = 0;
  assert_false(rgroup_elect_second_vote(&r, &m)); /* no vote yet in that term */
  r.state = RAFT_LEADER;                          /* a leader voted for itself */
  r.voted_for = 1;
  assert_true(rgroup_elect_second_vote(&r, &m));
  m.type = RAFT_IO_APPEND_ENTRIES;
  assert_false(rgroup_elect_second_vote(&r, &m));
}

static void test_same_term_leader_rule(void **state)
{
  (void)state;
  struct raft r;
  memset(&r, 0, sizeof r);
  r.state = RAFT_LEADER;
  r.current_term = 8;
  struct raft_message m;
  memset(&m, 0, sizeof m);
  m.type = RAFT_IO_APPEND_ENTRIES;
  m.append_entries.term = 8;
  assert_true(rgroup_elect_same_term_leader(&r, &m));
  m.append_entries.term = 9; /* a later leader: raft steps down, as it should */
  assert_false(rgroup_elect_same_term_leader(&r, &m));
  m.append_entries.term = 7; /* an old one: raft refuses it */
  assert_false(rgroup_elect_same_term_leader(&r, &m));
  memset(&m, 0, sizeof m);
  m.type = RAFT_IO_INSTALL_SNAPSHOT;
  m.install_snapshot.term = 8;
  assert_true(rgroup_elect_same_term_leader(&r, &m));
  r.state = RAFT_FOLLOWER; /* a follower's leader of its term: the usual case */
  assert_false(rgroup_elect_same_term_leader(&r, &m));
  r.state = RAFT_LEADER;
  m.type = RAFT_IO_REQUEST_VOTE;
  assert_false(rgroup_elect_same_term_leader(&r, &m));
}

/* ---- raft 0.15 over a recording raft_io (raft_rec.h) ---- */

/* The last RequestVote result raft sent to id: its vote_granted. */
static bool rec_granted(const struct raft_rec *ri, raft_id to)
{
  const struct raft_message *m = raft_rec_last(ri, RAFT_IO_REQUEST_VOTE_RESULT, to);
  if (m == NULL) {
    fail_msg("no RequestVote result sent to %llu", (unsigned long long)to);
  }
  return m->request_vote_result.vote_granted;
}

static bool transfer_done;
static void on_transfer(struct raft_transfer *req)
{
  (void)req;
  transfer_done = true;
}

static void test_raft_015_votes_twice_for_its_transferee(void **state)
{
  (void)state;
  static struct raft_rec ri;
  raft_rec_init(&ri);
  struct raft_fsm fsm;
  static struct raft r;
  raft_rec_start(&ri, &r, &fsm);

  /* Term 2: replica 1 stands and wins with replica 2's vote. */
  raft_rec_lead(&ri, &r, 2);
  assert_int_equal(r.current_term, 2);
  raft_rec_flush(&ri);

  /* It hands leadership to replica 2 (shutting down, say); before replica
   * 2 stands, replica 3 asks for term 3 with the disrupt flag (a transfer
   * of its own, or rgroup_elect's prompt election): 1 steps down and votes
   * for 3. Its transfer stays pending. */
  static struct raft_transfer treq;
  assert_int_equal(raft_transfer(&r, &treq, 2, on_transfer), 0);
  assert_non_null(r.transfer);
  struct raft_message v3 = vote_request(3, 3, false);
  assert_false(rgroup_elect_second_vote(&r, &v3));
  ri.recv(&ri.io, &v3);
  assert_int_equal(raft_state(&r), RAFT_FOLLOWER);
  assert_int_equal(r.current_term, 3);
  assert_int_equal(r.voted_for, 3);
  assert_true(rec_granted(&ri, 3));
  assert_non_null(r.transfer);

  /* Replica 2 asks for the same term: the rule sees a second vote. */
  struct raft_message v2 = vote_request(3, 2, false);
  assert_true(rgroup_elect_second_vote(&r, &v2));
  /* Given to raft 0.15 anyway, it grants it: 3 and 2 could each count a
   * majority of term 3 ({3, 1} and {2, 1}). If this fails, the raft
   * linked here no longer votes twice and the rule only costs a lost
   * message. */
  ri.recv(&ri.io, &v2);
  assert_true(rec_granted(&ri, 2));
  raft_rec_stop(&ri, &r);
}

int main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_second_vote_rule),
      cmocka_unit_test(test_same_term_leader_rule),
      cmocka_unit_test(test_raft_015_votes_twice_for_its_transferee),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
