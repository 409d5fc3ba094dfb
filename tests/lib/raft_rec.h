/* raft_rec.h - raft 0.15 over a raft_io that only records, for unit tests
 * that drive one raft instance message by message (test_rgroup_elect.c,
 * test_rgroup_snapshot.c).
 *
 * The instance is replica 1 of voters 1, 2 and 3 (addresses "1", "2",
 * "3"). What load returns is set before raft_start: by default term 1, no
 * vote, no snapshot and one entry, the configuration; with snap_index set,
 * a snapshot at snap_index of term snap_term (the configuration in it,
 * one empty buffer of data) and n_tail command entries of term snap_term
 * after it. Sends and appends are recorded and complete only at
 * raft_rec_flush, outside raft's calls, as an I/O backend's would; so do
 * snapshot puts, of which the last one's index, configuration index and
 * configuration (servers, voters) are kept, and snapshot gets (the loaded
 * snapshot). The
 * clock is `now`, set by the test; `tick` and `recv` are raft's callbacks.
 *
 * Single-threaded; the struct must outlive the raft instance. */
#ifndef CAIRN_TEST_RAFT_REC_H
#define CAIRN_TEST_RAFT_REC_H

#include <raft.h>
#include <stdbool.h>

#define RAFT_REC_MAX 32

struct raft_rec {
  struct raft_io io;
  raft_io_tick_cb tick;
  raft_io_recv_cb recv;
  raft_time now;
  raft_term term;
  raft_id vote;
  raft_index snap_index; /* 0: no snapshot */
  raft_term snap_term;
  unsigned n_tail;
  bool tail_change; /* the last of the n_tail entries is a change to voters 1-4 */
  struct raft_io_send *reqs[RAFT_REC_MAX];
  raft_io_send_cb cbs[RAFT_REC_MAX];
  struct raft_message sent[RAFT_REC_MAX]; /* copies: pointers in them are not to be followed */
  unsigned nsent;
  struct raft_io_append *appends[RAFT_REC_MAX];
  raft_io_append_cb append_cbs[RAFT_REC_MAX];
  unsigned nappends;
  /* snapshot puts: the one pending, and what the last one held */
  struct raft_io_snapshot_put *put;
  raft_io_snapshot_put_cb put_cb;
  unsigned nputs;
  raft_index put_index;
  raft_index put_conf_index;
  unsigned put_servers;
  unsigned put_voters;
  /* snapshot gets (a leader sending its snapshot): the one pending */
  struct raft_io_snapshot_get *get;
  raft_io_snapshot_get_cb get_cb;
  unsigned ngets;
};

/* Zeroes ri and fills its raft_io; set snap_index, snap_term and n_tail
 * after this, before raft_start. */
void raft_rec_init(struct raft_rec *ri);

/* Completes every recorded send and append (status 0), a pending snapshot
 * put, and a pending snapshot get (with the loaded snapshot). */
void raft_rec_flush(struct raft_rec *ri);

/* raft_rec_flush, then forgets the recorded sends (for tests that run
 * longer than RAFT_REC_MAX sends). */
void raft_rec_forget_sent(struct raft_rec *ri);

/* The last message of type sent to replica `to`, or NULL. */
const struct raft_message *raft_rec_last(const struct raft_rec *ri, unsigned short type,
                                         raft_id to);

/* Starts r as replica 1 over ri (raft_init, raft_start with an fsm whose
 * apply does nothing and whose restore frees the snapshot's buffer):
 * asserts that it starts as a follower. ri, r and fsm must outlive it. */
void raft_rec_start(struct raft_rec *ri, struct raft *r, struct raft_fsm *fsm);

/* r (a follower of term t, no pre-vote) stands at its election timeout
 * and wins term t + 1 with voter's vote: asserts it leads. */
void raft_rec_lead(struct raft_rec *ri, struct raft *r, raft_id voter);

/* Completes what is pending, closes r and asserts that it closed. */
void raft_rec_stop(struct raft_rec *ri, struct raft *r);

#endif
