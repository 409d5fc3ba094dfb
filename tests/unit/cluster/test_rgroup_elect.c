/* test_rgroup_elect.c - one leader per term (rgroup_elect_second_vote,
 * cluster/rgroup.h). First the rule on raft 0.15's public structures
 * filled by hand; then raft 0.15 itself, one instance over a raft_io that
 * only records, driven message by message: a leader that asked for a
 * transfer to replica 2, stepped down and voted for replica 3 in term 3,
 * grants replica 2 a second vote in term 3 (electionVote's is_transferee).
 * That is the message the rule keeps from raft. */
#include "cluster/rgroup.h"

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

/* ---- raft 0.15 over a recording raft_io ---- */

#define MAX_SENT 32

struct rec_io {
  struct raft_io io;
  raft_io_tick_cb tick;
  raft_io_recv_cb recv;
  raft_time now;
  raft_term term;
  raft_id vote;
  struct raft_io_send *reqs[MAX_SENT];
  raft_io_send_cb cbs[MAX_SENT];
  struct raft_message sent[MAX_SENT];
  unsigned nsent;
};

static int rec_init(struct raft_io *io, raft_id id, const char *address)
{
  (void)io, (void)id, (void)address;
  return 0;
}

/* Term 1, no vote, one entry: the configuration of voters 1, 2 and 3. */
static int rec_load(struct raft_io *io, raft_term *term, raft_id *voted_for,
                    struct raft_snapshot **snapshot, raft_index *start_index,
                    struct raft_entry **entries, size_t *n_entries)
{
  struct rec_io *ri = io->impl;
  struct raft_configuration conf;
  raft_configuration_init(&conf);
  for (raft_id id = 1; id <= 3; id++) {
    assert_int_equal(raft_configuration_add(&conf, id,
                                            id == 1   ? "1"
                                            : id == 2 ? "2"
                                                      : "3",
                                            RAFT_VOTER),
                     0);
  }
  struct raft_entry *e = raft_calloc(1, sizeof *e);
  assert_non_null(e);
  e->term = 1;
  e->type = RAFT_CHANGE;
  assert_int_equal(raft_configuration_encode(&conf, &e->buf), 0);
  e->batch = e->buf.base;
  raft_configuration_close(&conf);
  ri->term = 1;
  *term = 1;
  *voted_for = 0;
  *snapshot = NULL;
  *start_index = 1;
  *entries = e;
  *n_entries = 1;
  return 0;
}

static int rec_start(struct raft_io *io, unsigned msecs, raft_io_tick_cb tick, raft_io_recv_cb recv)
{
  (void)msecs;
  struct rec_io *ri = io->impl;
  ri->tick = tick;
  ri->recv = recv;
  return 0;
}

static int rec_set_term(struct raft_io *io, raft_term term)
{
  struct rec_io *ri = io->impl;
  ri->term = term;
  ri->vote = 0;
  return 0;
}

static int rec_set_vote(struct raft_io *io, raft_id id)
{
  struct rec_io *ri = io->impl;
  ri->vote = id;
  return 0;
}

static int rec_send(struct raft_io *io, struct raft_io_send *req, const struct raft_message *m,
                    raft_io_send_cb cb)
{
  struct rec_io *ri = io->impl;
  assert_true(ri->nsent < MAX_SENT);
  ri->reqs[ri->nsent] = req;
  ri->cbs[ri->nsent] = cb;
  ri->sent[ri->nsent] = *m; /* the fields read here hold no pointers */
  ri->nsent++;
  return 0;
}

static raft_time rec_time(struct raft_io *io)
{
  return ((struct rec_io *)io->impl)->now;
}

static int rec_random(struct raft_io *io, int min, int max)
{
  (void)io, (void)max;
  return min;
}

static void rec_close(struct raft_io *io, raft_io_close_cb cb)
{
  if (cb != NULL) {
    cb(io);
  }
}

/* Every send done (outside raft's calls, as an I/O backend would). */
static void rec_flush(struct rec_io *ri)
{
  for (unsigned i = 0; i < ri->nsent; i++) {
    if (ri->cbs[i] != NULL) {
      ri->cbs[i](ri->reqs[i], 0);
    }
    ri->cbs[i] = NULL;
  }
}

/* The last RequestVote result raft sent to id: its vote_granted. */
static bool rec_granted(const struct rec_io *ri, raft_id to)
{
  for (unsigned i = ri->nsent; i-- > 0;) {
    if (ri->sent[i].type == RAFT_IO_REQUEST_VOTE_RESULT && ri->sent[i].server_id == to) {
      return ri->sent[i].request_vote_result.vote_granted;
    }
  }
  fail_msg("no RequestVote result sent to %llu", (unsigned long long)to);
  return false;
}

static int fsm_apply(struct raft_fsm *fsm, const struct raft_buffer *buf, void **result)
{
  (void)fsm, (void)buf;
  *result = NULL;
  return 0;
}

static bool transfer_done;
static void on_transfer(struct raft_transfer *req)
{
  (void)req;
  transfer_done = true;
}

static bool closed;
static void on_close(struct raft *r)
{
  (void)r;
  closed = true;
}

static void test_raft_015_votes_twice_for_its_transferee(void **state)
{
  (void)state;
  static struct rec_io ri;
  memset(&ri, 0, sizeof ri);
  ri.io.impl = &ri;
  ri.io.init = rec_init;
  ri.io.load = rec_load;
  ri.io.start = rec_start;
  ri.io.set_term = rec_set_term;
  ri.io.set_vote = rec_set_vote;
  ri.io.send = rec_send;
  ri.io.time = rec_time;
  ri.io.random = rec_random;
  ri.io.close = rec_close;
  struct raft_fsm fsm;
  memset(&fsm, 0, sizeof fsm);
  fsm.apply = fsm_apply;
  static struct raft r;
  assert_int_equal(raft_init(&r, &ri.io, &fsm, 1, "1"), 0);
  assert_int_equal(raft_start(&r), 0);
  assert_int_equal(raft_state(&r), RAFT_FOLLOWER);

  /* Term 2: replica 1 stands and wins with replica 2's vote. */
  ri.now = 10 * r.election_timeout;
  ri.tick(&ri.io);
  assert_int_equal(raft_state(&r), RAFT_CANDIDATE);
  assert_int_equal(r.current_term, 2);
  struct raft_message res;
  memset(&res, 0, sizeof res);
  res.type = RAFT_IO_REQUEST_VOTE_RESULT;
  res.server_id = 2;
  res.server_address = "2";
  res.request_vote_result.term = 2;
  res.request_vote_result.vote_granted = true;
  res.request_vote_result.pre_vote = raft_tribool_false;
  ri.recv(&ri.io, &res);
  assert_int_equal(raft_state(&r), RAFT_LEADER);
  rec_flush(&ri);

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
  rec_flush(&ri);
  raft_close(&r, on_close);
  rec_flush(&ri);
  assert_true(closed);
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
