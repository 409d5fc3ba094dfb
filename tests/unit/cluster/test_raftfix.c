/* test_raftfix.c - the rules every Raft group applies to raft 0.15's
 * messages (cluster/raftfix.h). Each rule on raft's public structures
 * filled by hand; then raft 0.15 itself over a recording raft_io
 * (raft_rec.h), a follower with a snapshot at 20 and entries 21-25 of an
 * old term:
 *  - it answers a heartbeat that verified its log up to 22 with
 *    last_log_index 25, a tail the leader may not hold; the clamp cuts the
 *    answer back to 22 (raftfix_clamp);
 *  - it refuses an AppendEntries with prev_log_index 15 (committed entries
 *    it compacted away), which kept a restarted replica behind its leader;
 *    rewritten into a heartbeat at the snapshot, the same message is
 *    accepted (raftfix_below_snapshot);
 *  - taking a snapshot of its own (threshold 1), it drops an InstallSnapshot
 *    unanswered; held until its snapshot is done, the same message is
 *    installed and answered (raftfix_snapshot_hold);
 *  - as a leader whose snapshot to a follower is lost, it sends it again
 *    only after install_snapshot_timeout: 30 s by default, three election
 *    timeouts in every group (raftfix_install_snapshot_ms);
 * and a follower of term 2 that still names a leader silent for three
 * election timeouts refuses a candidate of term 3 until the vote is taken
 * as disrupting that leader (raftfix_vote_unstick). */
#include "cluster/raftfix.h"
#include "cluster/rgroup.h"
#include "cluster/rgroup_raft.h"
#include "raft_rec.h"

#include <raft.h>
#include <setjmp.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

/* An AppendEntries of `term` from replica 2 with n entries of term 1 after
 * prev (of term 1), all in one batch as a received message holds them. */
static struct raft_message append_entries(raft_term term, raft_index prev, unsigned n,
                                          raft_index commit)
{
  struct raft_message m;
  memset(&m, 0, sizeof m);
  m.type = RAFT_IO_APPEND_ENTRIES;
  m.server_id = 2;
  m.server_address = "2";
  struct raft_append_entries *ae = &m.append_entries;
  ae->term = term;
  ae->prev_log_index = prev;
  ae->prev_log_term = prev == 0 ? 0 : 1;
  ae->leader_commit = commit;
  if (n == 0) {
    return m;
  }
  ae->entries = raft_calloc(n, sizeof *ae->entries);
  assert_non_null(ae->entries);
  char *batch = raft_malloc(8 * n);
  assert_non_null(batch);
  memset(batch, 0, 8 * n);
  for (unsigned i = 0; i < n; i++) {
    ae->entries[i].term = 1;
    ae->entries[i].type = RAFT_COMMAND;
    ae->entries[i].buf.base = batch + 8 * i;
    ae->entries[i].buf.len = 8;
    ae->entries[i].batch = batch;
  }
  ae->n_entries = n;
  return m;
}

/* raft 0.15 as replica 1 over ri: a follower of term 1 with a snapshot
 * at 20 and entries 21-25 (raft_rec.h). */
static void start_follower(struct raft_rec *ri, struct raft *r, struct raft_fsm *fsm)
{
  raft_rec_init(ri);
  ri->snap_index = 20;
  ri->snap_term = 1;
  ri->n_tail = 5;
  raft_rec_start(ri, r, fsm);
}

static void test_below_snapshot_rule(void **state)
{
  (void)state;
  struct raft r;
  memset(&r, 0, sizeof r);
  r.state = RAFT_FOLLOWER;
  r.current_term = 2;
  r.log.snapshot.last_index = 20;
  r.log.snapshot.last_term = 1;
  r.log.offset = 20; /* entries 21.. in the log, none before */
  r.last_stored = 25;

  struct raft_message m = append_entries(2, 15, 2, 25);
  assert_true(raftfix_below_snapshot(&r, &m));
  assert_int_equal(m.append_entries.prev_log_index, 20);
  assert_int_equal(m.append_entries.prev_log_term, 1);
  assert_int_equal(m.append_entries.n_entries, 0);
  assert_null(m.append_entries.entries); /* freed: ASan would see a leak */
  assert_int_equal(m.append_entries.leader_commit, 20);
  assert_int_equal(m.append_entries.term, 2);

  struct raft_message later = append_entries(3, 0, 1, 3); /* prev 0, a later term */
  assert_true(raftfix_below_snapshot(&r, &later));
  assert_int_equal(later.append_entries.prev_log_index, 20);
  assert_int_equal(later.append_entries.leader_commit, 3); /* never raised */

  struct raft_message at = append_entries(2, 20, 1, 25); /* at the snapshot: raft checks it */
  assert_false(raftfix_below_snapshot(&r, &at));
  struct raft_message in_log = append_entries(2, 22, 1, 25);
  assert_false(raftfix_below_snapshot(&r, &in_log));
  struct raft_message old = append_entries(1, 15, 1, 25); /* an old leader: raft refuses it */
  assert_false(raftfix_below_snapshot(&r, &old));
  rgroup_raft_discard(&at);
  rgroup_raft_discard(&in_log);
  rgroup_raft_discard(&old);

  r.log.offset = 10; /* trailing entries 11-20 kept beside the snapshot */
  struct raft_message trailing = append_entries(2, 12, 1, 25);
  assert_false(raftfix_below_snapshot(&r, &trailing)); /* 12 is in the log */
  rgroup_raft_discard(&trailing);
  struct raft_message before = append_entries(2, 5, 1, 25);
  assert_true(raftfix_below_snapshot(&r, &before));
  assert_int_equal(before.append_entries.prev_log_index, 20);

  r.last_stored = 0; /* a snapshot being installed: left to raft */
  struct raft_message busy = append_entries(2, 5, 1, 25);
  assert_false(raftfix_below_snapshot(&r, &busy));
  rgroup_raft_discard(&busy);

  memset(&r.log, 0, sizeof r.log); /* no snapshot */
  r.last_stored = 25;
  struct raft_message none = append_entries(2, 5, 1, 25);
  assert_false(raftfix_below_snapshot(&r, &none));
  rgroup_raft_discard(&none);

  struct raft_message vote;
  memset(&vote, 0, sizeof vote);
  vote.type = RAFT_IO_REQUEST_VOTE;
  assert_false(raftfix_below_snapshot(&r, &vote));
}

static void test_clamp_rule(void **state)
{
  (void)state;
  struct raftfix_clamp c;
  memset(&c, 0, sizeof c);
  struct raft_message res;
  memset(&res, 0, sizeof res);
  res.type = RAFT_IO_APPEND_ENTRIES_RESULT;
  res.append_entries_result.term = 2;
  res.append_entries_result.last_log_index = 25;
  struct raft_message copy;
  assert_false(raftfix_clamp(&c, &res, &copy)); /* not inside a receive */

  struct raft_message hb = append_entries(2, 22, 0, 25);
  raftfix_clamp_begin(&c, &hb);
  assert_true(raftfix_clamp(&c, &res, &copy));
  assert_int_equal(copy.append_entries_result.last_log_index, 22);
  assert_int_equal(copy.append_entries_result.term, 2);
  assert_int_equal(res.append_entries_result.last_log_index, 25); /* m is left alone */
  res.append_entries_result.rejected = 22;                        /* a refusal: as it is */
  assert_false(raftfix_clamp(&c, &res, &copy));
  res.append_entries_result.rejected = 0;
  res.append_entries_result.last_log_index = 22; /* no more than verified */
  assert_false(raftfix_clamp(&c, &res, &copy));
  struct raft_message vote;
  memset(&vote, 0, sizeof vote);
  vote.type = RAFT_IO_REQUEST_VOTE_RESULT;
  assert_false(raftfix_clamp(&c, &vote, &copy));
  raftfix_clamp_end(&c);
  res.append_entries_result.last_log_index = 25;
  assert_false(raftfix_clamp(&c, &res, &copy));
  assert_int_equal(c.clamped, 1);

  struct raft_message two = append_entries(2, 22, 2, 25); /* entries 23 and 24 */
  raftfix_clamp_begin(&c, &two);
  assert_true(raftfix_clamp(&c, &res, &copy));
  assert_int_equal(copy.append_entries_result.last_log_index, 24);
  raftfix_clamp_end(&c);
  rgroup_raft_discard(&two);
}

static void test_hold_result_rule(void **state)
{
  (void)state;
  struct raft r;
  memset(&r, 0, sizeof r);
  r.state = RAFT_LEADER;
  r.current_term = 5;
  r.last_stored = 40; /* entries of older terms */
  struct raft_message res;
  memset(&res, 0, sizeof res);
  res.type = RAFT_IO_APPEND_ENTRIES_RESULT;
  res.append_entries_result.term = 5;
  res.append_entries_result.last_log_index = 40;
  assert_true(raftfix_hold_result(&r, &res, 4, 30)); /* nothing appended in term 5 yet */
  assert_true(raftfix_hold_result(&r, &res, 5, 41)); /* its barrier (41) not on disk yet */
  r.last_stored = 41;
  assert_false(raftfix_hold_result(&r, &res, 5, 41)); /* stored: counting is safe */
  r.last_stored = 40;
  res.append_entries_result.term = 4; /* an older term's result commits nothing */
  assert_false(raftfix_hold_result(&r, &res, 4, 30));
  res.append_entries_result.term = 5;
  r.state = RAFT_FOLLOWER;
  assert_false(raftfix_hold_result(&r, &res, 4, 30));
  r.state = RAFT_LEADER;
  res.type = RAFT_IO_REQUEST_VOTE_RESULT;
  assert_false(raftfix_hold_result(&r, &res, 4, 30));
}

static void test_raft_015_answers_past_what_it_verified(void **state)
{
  (void)state;
  static struct raft_rec ri;
  struct raft_fsm fsm;
  static struct raft r;
  start_follower(&ri, &r, &fsm);
  assert_int_equal(r.log.snapshot.last_index, 20);
  assert_int_equal(r.last_stored, 25);

  /* Replica 2 leads term 2 and its heartbeat verified entries up to 22:
   * raft 0.15 answers with its last stored index, 25, counting entries of
   * term 1 the leader never checked. The clamp cuts the answer to 22. */
  struct raftfix_clamp c;
  memset(&c, 0, sizeof c);
  struct raft_message hb = append_entries(2, 22, 0, 20);
  raftfix_clamp_begin(&c, &hb);
  ri.recv(&ri.io, &hb);
  const struct raft_message *res = raft_rec_last(&ri, RAFT_IO_APPEND_ENTRIES_RESULT, 2);
  assert_non_null(res);
  assert_int_equal(res->append_entries_result.rejected, 0);
  assert_int_equal(res->append_entries_result.last_log_index, 25);
  struct raft_message clamped;
  assert_true(raftfix_clamp(&c, res, &clamped));
  assert_int_equal(clamped.append_entries_result.last_log_index, 22);
  raftfix_clamp_end(&c);
  raft_rec_flush(&ri);
  ri.nsent = 0;

  /* Replica 2 leads term 2 with an older snapshot and probes at 15: raft
   * 0.15 refuses, although entries 1-20 are committed and its own. If
   * this fails, the raft linked here takes such a message and the rule
   * only costs one more round trip. */
  struct raft_message probe = append_entries(2, 15, 2, 25);
  ri.recv(&ri.io, &probe);
  res = raft_rec_last(&ri, RAFT_IO_APPEND_ENTRIES_RESULT, 2);
  assert_non_null(res);
  assert_int_equal(res->append_entries_result.rejected, 15);
  raft_rec_flush(&ri);

  /* The same probe through the rule: accepted as a heartbeat at 20. raft
   * answers with its last stored index (25, a tail the leader may not
   * hold); rgroup_raft_io_send clamps that to 20, what the message
   * verified. */
  ri.nsent = 0;
  struct raft_message again = append_entries(2, 15, 2, 25);
  assert_true(raftfix_below_snapshot(&r, &again));
  ri.recv(&ri.io, &again);
  res = raft_rec_last(&ri, RAFT_IO_APPEND_ENTRIES_RESULT, 2);
  assert_non_null(res);
  assert_int_equal(res->append_entries_result.rejected, 0);
  assert_int_equal(res->append_entries_result.term, 2);
  assert_true(res->append_entries_result.last_log_index >= 20);
  assert_int_equal(r.commit_index, 20);
  assert_int_equal(ri.nappends, 0);
  raft_rec_stop(&ri, &r);
}

/* ---- a snapshot while a configuration change is in flight ---- */

static bool snap_guarded;
static struct raft *snap_raft;

static int snap_fsm_snapshot(struct raft_fsm *fsm, struct raft_buffer *bufs[], unsigned *n)
{
  (void)fsm;
  if (snap_guarded && raftfix_snapshot_refused(snap_raft)) {
    return RAFT_BUSY;
  }
  struct raft_buffer *b = raft_malloc(sizeof *b);
  assert_non_null(b);
  b->base = raft_malloc(8);
  assert_non_null(b->base);
  memset(b->base, 0, 8);
  b->len = 8;
  *bufs = b;
  *n = 1;
  return 0;
}

/* Replica 2, leader of term 1, sends entry 21 (a command) and entry 22 (a
 * configuration adding replica 4 as a voter) with leader_commit 21: the
 * change is appended, not committed. */
static struct raft_message change_in_flight(void)
{
  struct raft_message m = append_entries(1, 20, 1, 21);
  struct raft_append_entries *ae = &m.append_entries;
  struct raft_entry *two = raft_calloc(2, sizeof *two);
  assert_non_null(two);
  two[0] = ae->entries[0];
  raft_free(ae->entries);
  struct raft_configuration conf;
  raft_configuration_init(&conf);
  static const char *const addrs[] = {"1", "2", "3", "4"};
  for (raft_id id = 1; id <= 4; id++) {
    assert_int_equal(raft_configuration_add(&conf, id, addrs[id - 1], RAFT_VOTER), 0);
  }
  two[1].term = 1;
  two[1].type = RAFT_CHANGE;
  assert_int_equal(raft_configuration_encode(&conf, &two[1].buf), 0);
  two[1].batch = two[1].buf.base;
  raft_configuration_close(&conf);
  ae->entries = two;
  ae->n_entries = 2;
  return m;
}

/* raft 0.15 as a follower (snapshot at 20, voters 1-3) takes entries 21
 * and 22 as above, with a snapshot threshold of 1: applying 21 takes a
 * snapshot. Then a heartbeat commits 22. */
static void snapshot_around_a_change(struct raft_rec *ri, bool guarded)
{
  struct raft_fsm fsm;
  static struct raft r;
  raft_rec_init(ri);
  ri->snap_index = 20;
  ri->snap_term = 1;
  raft_rec_start(ri, &r, &fsm);
  fsm.version = 1; /* snapshots closed by raft (no snapshot_finalize) */
  fsm.snapshot = snap_fsm_snapshot;
  snap_guarded = guarded;
  snap_raft = &r;
  raft_set_snapshot_threshold(&r, 1);
  raft_set_snapshot_trailing(&r, 1);
  struct raft_message m = change_in_flight();
  ri->recv(&ri->io, &m);
  raft_rec_flush(ri);
  assert_int_equal(r.last_applied, 21);
  assert_int_equal(r.configuration_uncommitted_index, 22);
  assert_int_equal(r.configuration.n, 4);
  if (!guarded) {
    raft_rec_stop(ri, &r);
    return;
  }
  /* Refused while the change is in flight; taken once it is committed. */
  assert_int_equal(ri->nputs, 0);
  struct raft_message hb = append_entries(1, 22, 0, 22);
  hb.append_entries.prev_log_term = 1;
  ri->recv(&ri->io, &hb);
  raft_rec_flush(ri);
  assert_int_equal(r.last_applied, 22);
  assert_int_equal(r.configuration_uncommitted_index, 0);
  raft_rec_stop(ri, &r);
}

/* raft 0.15 puts the uncommitted configuration (4 voters) into the
 * snapshot at 21, labelled with the committed configuration's index (1):
 * installed elsewhere, or loaded after a restart, it names a voter no
 * majority agreed on. If this fails, the raft linked here takes the last
 * committed configuration (upstream since 0.17.1) and the rule only delays
 * a snapshot. With the rule the snapshot waits until the change commits,
 * and then carries it with its own index. */
static void test_raft_015_snapshots_an_uncommitted_configuration(void **state)
{
  (void)state;
  static struct raft_rec ri;
  snapshot_around_a_change(&ri, false);
  assert_int_equal(ri.nputs, 1);
  assert_int_equal(ri.put_index, 21);
  assert_int_equal(ri.put_voters, 4);  /* replica 4: not yet agreed on */
  assert_true(ri.put_conf_index < 22); /* and labelled as the committed one */

  snapshot_around_a_change(&ri, true);
  assert_int_equal(ri.nputs, 1);
  assert_int_equal(ri.put_index, 22);
  assert_int_equal(ri.put_voters, 4);
  assert_int_equal(ri.put_conf_index, 22);
}

/* ---- rolling back a change whose committed configuration is compacted ---- */

/* A follower with a snapshot at 20 (the committed configuration, index 1,
 * no longer in its log) takes entries 21 and 22 (22: a change to 4
 * voters; 21 committed); then replica 3, leader of term 2, sends another
 * entry 22: raft 0.15 truncates the change and rolls the configuration
 * back. Returns with r's configuration after that, or crashes inside
 * raft (the unguarded case). */
static void rollback_scenario(struct raft_rec *ri, struct raft *r, bool guarded)
{
  struct raft_fsm fsm;
  raft_rec_init(ri);
  ri->snap_index = 20;
  ri->snap_term = 1;
  raft_rec_start(ri, r, &fsm);
  struct raftfix_conf k;
  raftfix_conf_init(&k);
  struct raft_message m = change_in_flight();
  raftfix_conf_keep(&k, r, &m);
  ri->recv(&ri->io, &m);
  raft_rec_flush(ri);
  assert_int_equal(r->configuration_uncommitted_index, 22);
  assert_int_equal(r->configuration_index, 1);
  assert_true(r->log.offset >= 1); /* entry 1 is in the snapshot, not in the log */
  assert_int_equal(k.index, 1);    /* kept when the change arrived */
  struct raft_message next = append_entries(2, 21, 1, 21);
  next.server_id = 3;
  next.server_address = "3";
  next.append_entries.entries[0].term = 2;
  if (guarded) {
    assert_true(raftfix_conf_rollback(&k, r, &next));
  }
  ri->recv(&ri->io, &next);
  raft_rec_flush(ri);
  assert_int_equal(r->configuration_uncommitted_index, 0);
  assert_int_equal(r->configuration.n, 3);
  assert_int_equal(raft_last_index(r), 22);
  raftfix_conf_close(&k);
  raft_rec_stop(ri, r);
}

static void on_segv(int sig)
{
  (void)sig;
  _exit(77);
}

/* raft 0.15 crashes on that rollback (a NULL entry decoded: run in a
 * child, which dies of SIGSEGV); with the kept copy the rollback is done
 * before raft looks, and the new leader's entry replaces the change. If
 * the child survives, the raft linked here keeps the committed
 * configuration itself (upstream since 0.17.1). */
static void test_raft_015_rolls_back_to_a_configuration_it_no_longer_holds(void **state)
{
  (void)state;
  static struct raft_rec ri;
  static struct raft r;
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_segv;
    sigaction(SIGSEGV, &sa, NULL);
    rollback_scenario(&ri, &r, false);
    _exit(0);
  }
  int st = 0;
  assert_int_equal(waitpid(pid, &st, 0), pid);
  assert_true(WIFEXITED(st));
  assert_int_equal(WEXITSTATUS(st), 77); /* raft 0.15 read through a NULL entry */
  rollback_scenario(&ri, &r, true);
}

/* After a restart with the change in the loaded log after a snapshot at 20
 * (whose configuration is the committed one): raft 0.15 takes the change as
 * committed, and when leader 3 replaces entry 22 it would keep the 4-voter
 * configuration of an entry no longer in its log. The snapshot's, kept as
 * raft loads it (raftfix_conf_keep_loaded, as every group's raft_io load
 * does), is put back instead. */
static struct raftfix_conf loaded_kept;
static int (*rec_load)(struct raft_io *io, raft_term *term, raft_id *voted_for,
                       struct raft_snapshot **snapshot, raft_index *start_index,
                       struct raft_entry *entries[], size_t *n_entries);

static int load_keeping(struct raft_io *io, raft_term *term, raft_id *voted_for,
                        struct raft_snapshot **snapshot, raft_index *start_index,
                        struct raft_entry *entries[], size_t *n_entries)
{
  int rv = rec_load(io, term, voted_for, snapshot, start_index, entries, n_entries);
  if (rv == 0) {
    raftfix_conf_keep_loaded(&loaded_kept, *snapshot, *entries, *n_entries);
  }
  return rv;
}

static void test_restarted_with_a_change_rolls_back_from_the_snapshots_configuration(void **state)
{
  (void)state;
  static struct raft_rec ri;
  static struct raft r;
  struct raft_fsm fsm;
  raft_rec_init(&ri);
  ri.snap_index = 20;
  ri.snap_term = 1;
  ri.n_tail = 2;
  ri.tail_change = true;
  rec_load = ri.io.load;
  ri.io.load = load_keeping;
  raftfix_conf_init(&loaded_kept);
  raft_rec_start(&ri, &r, &fsm);
  /* 0.15 takes the change as committed (start.c: restoreEntries). */
  assert_int_equal(r.configuration_uncommitted_index, 0);
  assert_int_equal(r.configuration_index, 22);
  assert_int_equal(r.configuration.n, 4);
  assert_int_equal(loaded_kept.index, 1);
  assert_int_equal(loaded_kept.conf.n, 3);
  struct raft_message next = append_entries(2, 21, 1, 21);
  next.server_id = 3;
  next.server_address = "3";
  next.append_entries.entries[0].term = 2;
  assert_true(raftfix_conf_rollback(&loaded_kept, &r, &next));
  ri.recv(&ri.io, &next);
  raft_rec_flush(&ri);
  assert_int_equal(raft_last_index(&r), 22);
  assert_int_equal(r.configuration_uncommitted_index, 0);
  assert_int_equal(r.configuration_index, 1);
  assert_int_equal(r.configuration.n, 3);
  raftfix_conf_close(&loaded_kept);
  raft_rec_stop(&ri, &r);
}

/* A follower of replica 2 in term 2, asked by replica 3 for term 3. */
static void test_raft_015_refuses_votes_while_it_names_a_silent_leader(void **state)
{
  (void)state;
  static struct raft_rec ri;
  raft_rec_init(&ri);
  struct raft_fsm fsm;
  static struct raft r;
  raft_rec_start(&ri, &r, &fsm);
  unsigned election_ms = r.election_timeout;
  struct raft_message hb = append_entries(2, 1, 0, 1);
  hb.append_entries.prev_log_term = 1;
  ri.recv(&ri.io, &hb);
  assert_int_equal(r.follower_state.current_leader.id, 2);
  raft_rec_flush(&ri);

  struct raft_message vote;
  memset(&vote, 0, sizeof vote);
  vote.type = RAFT_IO_REQUEST_VOTE;
  vote.server_id = 3;
  vote.server_address = "3";
  vote.request_vote.term = 3;
  vote.request_vote.candidate_id = 3;
  vote.request_vote.last_log_index = 1;
  vote.request_vote.last_log_term = 1;

  /* Within the election timeout of the leader's last word: refused, by
   * raft and by the rule alike. */
  ri.now = election_ms / 2;
  struct raft_message early = vote;
  assert_false(raftfix_vote_unstick(&r, &early, election_ms));
  ri.recv(&ri.io, &early);
  const struct raft_message *res = raft_rec_last(&ri, RAFT_IO_REQUEST_VOTE_RESULT, 3);
  assert_non_null(res);
  assert_false(res->request_vote_result.vote_granted);

  /* The leader silent for longer: raft 0.15 still refuses, for as long as
   * it names that leader (its own timer has not fired: the tick is not
   * called here). */
  ri.now = 3 * election_ms;
  struct raft_message late = vote;
  ri.recv(&ri.io, &late);
  res = raft_rec_last(&ri, RAFT_IO_REQUEST_VOTE_RESULT, 3);
  assert_false(res->request_vote_result.vote_granted);
  assert_int_equal(r.current_term, 2);

  /* Through the rule: granted, on terms and logs as usual. */
  late = vote;
  assert_true(raftfix_vote_unstick(&r, &late, election_ms));
  ri.recv(&ri.io, &late);
  res = raft_rec_last(&ri, RAFT_IO_REQUEST_VOTE_RESULT, 3);
  assert_true(res->request_vote_result.vote_granted);
  assert_int_equal(r.current_term, 3);
  assert_int_equal(r.voted_for, 3);
  raft_rec_stop(&ri, &r);
}

/* raft 0.15 keeps its log's tables at their largest; raftfix_log_trim
 * rebuilds them at what the entries held need, and raft goes on with
 * them: it grows them again, an append in flight while they were rebuilt
 * completes through the new table, a truncation, and raft_close checks
 * that every entry still has its one reference. */
static void test_log_trim(void **state)
{
  (void)state;
  static struct raft_rec ri;
  struct raft_fsm fsm;
  static struct raft r;
  start_follower(&ri, &r, &fsm);
  assert_int_equal(r.log.refs_size, 256); /* raft 0.15's first table: 8 KiB */
  size_t freed = raftfix_log_trim(&r);
  assert_true(freed >= (256 - 8) * sizeof(struct raft_entry_ref));
  assert_int_equal(r.log.refs_size, 8);      /* 5 live entries, 21-25 */
  assert_int_equal(raftfix_log_trim(&r), 0); /* nothing more to give back */

  /* 300 entries from the leader of term 2: raft grows both again. */
  struct raft_message big = append_entries(2, 25, 300, 20);
  ri.recv(&ri.io, &big);
  raft_rec_flush(&ri);
  assert_int_equal(r.last_stored, 325);
  assert_true(r.log.refs_size >= 305);
  assert_true(r.log.size >= 305);

  /* A leader of term 3 replaces 27-325 with its own entry 27: raft keeps
   * seven entries in tables sized for 305. The append of 27 is in flight
   * (its request holds a second reference) while they are rebuilt. */
  struct raft_message cut = append_entries(3, 26, 1, 20);
  cut.append_entries.entries[0].term = 3;
  ri.recv(&ri.io, &cut);
  assert_int_equal(raft_last_index(&r), 27);
  size_t refs_before = r.log.refs_size;
  assert_true(raftfix_log_trim(&r) > 0);
  assert_true(r.log.refs_size < refs_before);
  assert_true(r.log.refs_size <= 16);
  assert_int_equal(r.log.size, 9);
  assert_int_equal(r.log.back - r.log.front, 7);
  raft_rec_flush(&ri); /* raft releases the request's reference */
  assert_int_equal(r.last_stored, 27);

  /* And goes on from there. */
  struct raft_message more = append_entries(3, 27, 3, 27);
  more.append_entries.prev_log_term = 3;
  ri.recv(&ri.io, &more);
  raft_rec_flush(&ri);
  assert_int_equal(r.last_stored, 30);
  assert_int_equal(r.commit_index, 27);
  const struct raft_message *res = raft_rec_last(&ri, RAFT_IO_APPEND_ENTRIES_RESULT, 2);
  assert_non_null(res);
  assert_int_equal(res->append_entries_result.rejected, 0);
  raft_rec_stop(&ri, &r); /* logClose: every entry has exactly one reference */
}

/* ---- an InstallSnapshot while the follower snapshots ---- */

/* An InstallSnapshot of term 1 from replica 2: a snapshot at index (of
 * term 1) with voters 1-3 and 8 bytes of data. */
static struct raft_message install_snapshot_at(raft_index index)
{
  struct raft_message m;
  memset(&m, 0, sizeof m);
  m.type = RAFT_IO_INSTALL_SNAPSHOT;
  m.server_id = 2;
  m.server_address = "2";
  struct raft_install_snapshot *is = &m.install_snapshot;
  is->term = 1;
  is->last_index = index;
  is->last_term = 1;
  is->conf_index = 1;
  raft_configuration_init(&is->conf);
  static const char *const addrs[] = {"1", "2", "3"};
  for (raft_id id = 1; id <= 3; id++) {
    assert_int_equal(raft_configuration_add(&is->conf, id, addrs[id - 1], RAFT_VOTER), 0);
  }
  is->data.base = raft_malloc(8);
  assert_non_null(is->data.base);
  memset(is->data.base, 0, 8);
  is->data.len = 8;
  return m;
}

/* raft 0.15 as a follower (snapshot at 20, entries 21-25 of term 1, a
 * snapshot threshold of 1): a heartbeat commits 25, it applies and takes a
 * snapshot, whose put is in flight when an InstallSnapshot at 40 arrives.
 * Unguarded, raft drops it: no answer, then or after its own snapshot is
 * done, so its leader would wait for install_snapshot_timeout. Guarded,
 * the message is held (the sender's address copied), released once the
 * put completed, installed and answered with a match at 40. */
static void snapshot_while_snapshotting(bool guarded)
{
  struct raft_rec ri;
  static struct raft r;
  struct raft_fsm fsm;
  start_follower(&ri, &r, &fsm);
  fsm.version = 1; /* snapshots closed by raft (no snapshot_finalize) */
  fsm.snapshot = snap_fsm_snapshot;
  snap_guarded = false;
  snap_raft = &r;
  raft_set_snapshot_threshold(&r, 1);
  raft_set_snapshot_trailing(&r, 1);
  struct raft_message hb = append_entries(1, 25, 0, 25);
  ri.recv(&ri.io, &hb);
  assert_int_equal(r.last_applied, 25);
  assert_non_null(ri.put); /* its own snapshot at 25, in flight */
  unsigned sent = ri.nsent;
  struct raft_message is = install_snapshot_at(40);
  if (!guarded) {
    ri.recv(&ri.io, &is);
    raft_rec_flush(&ri);
    assert_int_equal(ri.nsent, sent);
    assert_int_equal(r.log.snapshot.last_index, 25);
    raft_rec_stop(&ri, &r);
    return;
  }
  struct raftfix_held h = {0};
  assert_true(raftfix_snapshot_hold(&h, &r, &is));
  assert_null(raftfix_snapshot_release(&h, &r)); /* still busy */
  raft_rec_flush(&ri);
  assert_int_equal(r.log.snapshot.last_index, 25);
  struct raft_message *m = raftfix_snapshot_release(&h, &r);
  assert_non_null(m);
  assert_null(h.m);
  assert_string_equal(m->server_address, "2");
  ri.recv(&ri.io, m);
  free(m);
  raft_rec_flush(&ri);
  assert_int_equal(r.log.snapshot.last_index, 40);
  const struct raft_message *a = raft_rec_last(&ri, RAFT_IO_APPEND_ENTRIES_RESULT, 2);
  assert_non_null(a);
  assert_int_equal(a->append_entries_result.rejected, 0);
  assert_int_equal(a->append_entries_result.last_log_index, 40);
  /* A newer message replaces a held one; close frees what is held. */
  struct raft_message hb2 = append_entries(1, 40, 0, 40);
  hb2.append_entries.prev_log_term = 1;
  ri.recv(&ri.io, &hb2);
  raft_rec_stop(&ri, &r);
  raftfix_snapshot_close(&h);
}

static void test_raft_015_drops_a_snapshot_while_it_snapshots(void **state)
{
  (void)state;
  snapshot_while_snapshotting(false);
}

static void test_snapshot_held_while_snapshotting(void **state)
{
  (void)state;
  snapshot_while_snapshotting(true);
}

/* The hold rule alone: only an InstallSnapshot of the current term or
 * later, only while busy; the newest one kept. */
static void test_snapshot_hold_rule(void **state)
{
  (void)state;
  struct raft r;
  memset(&r, 0, sizeof r);
  r.current_term = 2;
  struct raftfix_held h = {0};
  struct raft_message is = install_snapshot_at(40);
  is.install_snapshot.term = 2;
  assert_false(raftfix_snapshot_hold(&h, &r, &is)); /* not busy */
  r.snapshot.pending.term = 2;
  struct raft_message hb = append_entries(2, 0, 0, 0);
  assert_false(raftfix_snapshot_hold(&h, &r, &hb));
  is.install_snapshot.term = 1;
  assert_false(raftfix_snapshot_hold(&h, &r, &is)); /* older term: raft refuses it */
  is.install_snapshot.term = 2;
  assert_true(raftfix_snapshot_hold(&h, &r, &is));
  struct raft_message is2 = install_snapshot_at(50);
  is2.install_snapshot.term = 3;
  assert_true(raftfix_snapshot_hold(&h, &r, &is2)); /* frees the first */
  assert_null(raftfix_snapshot_release(&h, &r));
  r.snapshot.pending.term = 0;
  struct raft_message *m = raftfix_snapshot_release(&h, &r);
  assert_non_null(m);
  assert_int_equal(m->install_snapshot.last_index, 50);
  raftfix_discard_snapshot(&m->install_snapshot);
  free(m);
  assert_null(raftfix_snapshot_release(&h, &r));
}

/* ---- a snapshot lost on the way ---- */

/* A follower's answer to the leader's AppendEntries of term 2. */
static struct raft_message append_result(raft_id from, raft_index rejected, raft_index last)
{
  static const char *const addrs[] = {"", "1", "2", "3"};
  struct raft_message m;
  memset(&m, 0, sizeof m);
  m.type = RAFT_IO_APPEND_ENTRIES_RESULT;
  m.server_id = from;
  m.server_address = addrs[from];
  m.append_entries_result.term = 2;
  m.append_entries_result.rejected = rejected;
  m.append_entries_result.last_log_index = last;
  return m;
}

/* raft 0.15 as the leader of term 2 (snapshot at 20, log 21-25): replica 2
 * says it holds only 3, so it gets the snapshot, which is lost (no answer).
 * Replica 3 answers every heartbeat; replica 2 refuses them (their
 * prev_log_index is past its log). Returns the ms after which the leader
 * sends the snapshot again (0: not within 40 s). */
static raft_time snapshot_resent_after(unsigned install_snapshot_ms)
{
  static struct raft_rec ri;
  static struct raft r;
  struct raft_fsm fsm;
  start_follower(&ri, &r, &fsm);
  if (install_snapshot_ms != 0) {
    raft_set_install_snapshot_timeout(&r, install_snapshot_ms);
  }
  raft_rec_lead(&ri, &r, 3);
  raft_rec_forget_sent(&ri);
  struct raft_message refused = append_result(2, 25, 3);
  ri.recv(&ri.io, &refused);
  ri.now += r.heartbeat_timeout; /* a probe sends once per heartbeat */
  ri.tick(&ri.io);
  raft_rec_flush(&ri); /* the snapshot read: sent */
  assert_int_equal(ri.ngets, 1);
  assert_non_null(raft_rec_last(&ri, RAFT_IO_INSTALL_SNAPSHOT, 2));
  raft_rec_forget_sent(&ri); /* ... and lost */
  raft_time sent_at = ri.now, resent = 0;
  while (resent == 0 && ri.now - sent_at < 40000) {
    ri.now += r.heartbeat_timeout;
    ri.tick(&ri.io);
    raft_rec_flush(&ri); /* a snapshot read started by the tick: sent */
    /* What each replica answers to what it was sent. */
    struct raft_message answers[RAFT_REC_MAX];
    unsigned n = 0;
    for (unsigned i = 0; i < ri.nsent; i++) {
      const struct raft_message *m = &ri.sent[i];
      if (m->type == RAFT_IO_INSTALL_SNAPSHOT && m->server_id == 2) {
        resent = ri.now - sent_at;
      } else if (m->type == RAFT_IO_APPEND_ENTRIES && m->server_id == 3) {
        answers[n++] = append_result(3, 0, 25);
      } else if (m->type == RAFT_IO_APPEND_ENTRIES && m->server_id == 2) {
        answers[n++] = append_result(2, m->append_entries.prev_log_index, 3);
      }
    }
    raft_rec_forget_sent(&ri);
    for (unsigned i = 0; i < n && resent == 0; i++) {
      ri.recv(&ri.io, &answers[i]);
    }
    assert_int_equal(raft_state(&r), RAFT_LEADER);
  }
  raft_rec_stop(&ri, &r);
  return resent;
}

/* raft's default: the follower waits 30 s for the snapshot again; with a
 * partition group's timeout (rgroup_raft_configure) three election
 * timeouts. */
static void test_raft_015_resends_a_lost_snapshot_after_its_timeout(void **state)
{
  (void)state;
  raft_time dflt = snapshot_resent_after(0);
  print_message("snapshot sent again after %llu ms with raft's default\n",
                (unsigned long long)dflt);
  assert_true(dflt >= 30000);
  unsigned ms = raftfix_install_snapshot_ms(1000);
  raft_time ours = snapshot_resent_after(ms);
  print_message("snapshot sent again after %llu ms with %u ms\n", (unsigned long long)ours, ms);
  assert_true(ours >= ms && ours <= ms + 200);
}

int main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_clamp_rule),
      cmocka_unit_test(test_below_snapshot_rule),
      cmocka_unit_test(test_hold_result_rule),
      cmocka_unit_test(test_log_trim),
      cmocka_unit_test(test_raft_015_answers_past_what_it_verified),
      cmocka_unit_test(test_raft_015_refuses_votes_while_it_names_a_silent_leader),
      cmocka_unit_test(test_raft_015_snapshots_an_uncommitted_configuration),
      cmocka_unit_test(test_raft_015_rolls_back_to_a_configuration_it_no_longer_holds),
      cmocka_unit_test(test_restarted_with_a_change_rolls_back_from_the_snapshots_configuration),
      cmocka_unit_test(test_snapshot_hold_rule),
      cmocka_unit_test(test_raft_015_drops_a_snapshot_while_it_snapshots),
      cmocka_unit_test(test_snapshot_held_while_snapshotting),
      cmocka_unit_test(test_raft_015_resends_a_lost_snapshot_after_its_timeout),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
