/* rgroup_cap.h - bounded AppendEntries for raft 0.15, and follower answers
 * that claim only what a leader's messages verified.
 *
 * raft 0.15 puts every entry from a follower's next_index into one
 * AppendEntries (a TODO in its sendAppendEntries) and, in probe state,
 * sends that whole message again every heartbeat until the follower
 * answers, which it does only once the entries are on its disk. A follower
 * back after an outage was sent 123 entries of 48 KiB (6 MB) again every
 * 60 ms while its append took 0.9 s on a loaded machine; its loop read a
 * backlog of 30 MB of copies in one iteration, so raft's cached clock was
 * 0.4 s old when it last reset its election timer, and it started an
 * election (docs/raft-0.15.md, "Bounded AppendEntries").
 *
 * Leader side: the send interposer passes on only the longest prefix of
 * the entries within RGROUP_CAP_BYTES (at least one entry). raft does not
 * know: in pipeline state it has already moved next_index past every entry
 * it handed over. So when a follower's success reaches the end of a
 * bounded message, next_index is set back to just after it before raft
 * reads the result, and raft sends the next part at once.
 *
 * Follower side: raft 0.15 answers success with last_log_index =
 * last_stored, its whole stored log, which may hold a tail of an older term
 * beyond what the message covered. With whole messages only empty ones can
 * do that (docs/raft-0.15.md); with bounded ones any prefix could, and the
 * leader would count this follower for entries it does not hold. So a
 * follower's success never claims more than the highest index up to which
 * a message of the current leader's term verified its log: index x is
 * verified once the follower's log holds the leader's term at x (by the
 * Log Matching Property the logs then agree up to x).
 *
 * Context: the loop thread, from rgroup_raft.c's interposers. */
#ifndef CAIRN_CLUSTER_RGROUP_CAP_H
#define CAIRN_CLUSTER_RGROUP_CAP_H

#include <raft.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Entry bytes per AppendEntries; a larger single entry still goes alone. */
#define RGROUP_CAP_BYTES ((size_t)1 << 20)
#define RGROUP_CAP_PEERS 16 /* peers tracked; beyond them nothing is bounded */

/* A message as far as verification goes: the follower's log agrees with
 * the leader's up to index end once it holds term end_term there. */
struct rgroup_cap_mark {
  raft_term term; /* of the message */
  raft_index end;
  raft_term end_term; /* 0: nothing to verify */
};

struct rgroup_cap_peer {
  raft_id id;
  raft_term term; /* of the bounded message */
  raft_index end; /* its last entry; 0: none outstanding */
};

struct rgroup_cap {
  struct rgroup_cap_peer peers[RGROUP_CAP_PEERS]; /* leader side */
  raft_term verified_term; /* follower side: verified_end holds in this term */
  raft_index verified_end;
  struct rgroup_cap_mark cur;  /* the message raft is receiving; end_term 0: none */
  struct rgroup_cap_mark snap; /* last InstallSnapshot, checked once installed */
  uint64_t bounded;            /* AppendEntries sent as a prefix */
  uint64_t clamped;            /* successes answered with less than last_stored */
};

/* Leader: how many of m's entries to send (m->n_entries if all fit). */
unsigned rgroup_cap_count(const struct raft_append_entries *m);

/* Leader: m went to server id with only its first n entries. */
void rgroup_cap_sent(struct rgroup_cap *cap, raft_term term, raft_id id,
                     const struct raft_append_entries *m, unsigned n);

/* Leader: before raft reads result res from server id. Moves the server's
 * next_index back to just after a bounded message the result covers. */
void rgroup_cap_on_result(struct rgroup_cap *cap, struct raft *r, raft_id id,
                          const struct raft_append_entries_result *res);

/* Follower: around raft's receive of message m (AppendEntries or
 * InstallSnapshot). Call begin before and end after raft's recv. */
void rgroup_cap_recv_begin(struct rgroup_cap *cap, const struct raft_message *m);
void rgroup_cap_recv_end(struct rgroup_cap *cap, struct raft *r);

/* Follower: the last_log_index a success result may claim (<= stored). */
raft_index rgroup_cap_bound(struct rgroup_cap *cap, struct raft *r, raft_index stored);

#endif
