/* rgroup_cap.h - bounded AppendEntries for raft 0.15: the leader sends at
 * most RGROUP_CAP_BYTES of entries per message and resumes right after.
 *
 * raft 0.15 puts every entry from a follower's next_index into one
 * AppendEntries (a TODO in its sendAppendEntries) and, in probe state,
 * sends that whole message again every heartbeat until the follower
 * answers, which it does only once the entries are on its disk. A follower
 * back after an outage was sent 123 entries of 48 KiB (6 MB) again every
 * 60 ms while its append took 0.9 s on a loaded machine; its loop read a
 * backlog of copies in one iteration, so raft's cached clock was more
 * than 0.4 s old when it last reset its election timer, and it started an
 * election (docs/raft-0.15.md, "Bounded AppendEntries").
 *
 * Leader side: the send interposer passes on only the longest prefix of
 * the entries within RGROUP_CAP_BYTES (at least one entry). raft does not
 * know: in pipeline state it has already moved next_index past every entry
 * it handed over. So when a follower's success reaches the end of a
 * bounded message, next_index is set back to just after it before raft
 * reads the result, and raft sends the next part at once.
 *
 * Follower side: nothing more. A bounded message is a prefix the follower
 * may already hold, followed by a tail of an older term; raft 0.15 would
 * answer it with last_stored, counting that tail, but such answers (sent
 * from inside the receive callback) are cut back to prev_log_index +
 * n_entries by raftfix_clamp; an answer after a write ends at
 * the message's end anyway (raft replaced the tail from the first entry
 * that differed).
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
/* Peers tracked: a replica set's others (META_MAX_REPLICAS is 8, so at
 * most 7); beyond them a bounded message's answer reaches raft as is (in
 * pipeline state a rejection and a probe follow). */
#define RGROUP_CAP_PEERS 8

struct rgroup_cap_peer {
  raft_id id;
  raft_term term; /* of the bounded message */
  raft_index end; /* its last entry; 0: none outstanding */
};

struct rgroup_cap {
  struct rgroup_cap_peer peers[RGROUP_CAP_PEERS];
  uint64_t bounded; /* AppendEntries sent as a prefix */
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

#endif
