/* raftfix.h - rules every Raft group of a node (the partitions' groups in
 * rgroup_raft.c, the metadata group in controller.c, and the simulation in
 * tests/sim) applies to the messages raft 0.15 receives and sends, where
 * raft 0.15 itself is wrong (docs/raft-0.15.md). Each rule works on raft's
 * public structures and the message only; the caller's raft_io wraps
 * raft's receive callback and its own send with them.
 *
 * Context: the loop thread of the group's raft instance. */
#ifndef CAIRN_RAFTFIX_H
#define CAIRN_RAFTFIX_H

#include <raft.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* raft 0.15 answers an AppendEntries it has nothing to write for (an empty
 * one, or entries it already holds) at once, inside the receive callback,
 * with last_log_index = last_stored (recvAppendEntries). That counts a
 * tail this replica kept from an older term beyond what the message
 * verified, and the leader takes it as a match: it then committed its own
 * entry at that index on a count that included this replica, which held
 * another entry there, and an acknowledged produce was lost after the next
 * crash of every replica (the simulation's crash engine, seed 13488 with
 * --fault-ms 20000; docs/raft-0.15.md). Such an answer is cut back to what
 * the message verified, prev_log_index + n_entries. An answer after a
 * write needs nothing: raft writes from the first entry that differs,
 * which drops any older tail. Every group's raft_io uses it (partitions in
 * rgroup_raft.c; the metadata group in controller.c, since 2026-12-05):
 *
 *   raftfix_clamp_begin(c, m) before raft receives m, and
 *   raftfix_clamp_end(c) after; in between, the raft_io's send calls
 *   raftfix_clamp(c, m, &copy) and, when it returns true, sends copy
 *   (the result cut back) instead of m.
 *
 * Loop thread; c is the group's, zeroed at its creation. */
struct raftfix_clamp {
  bool receiving;   /* inside raft's handling of an AppendEntries */
  raft_index end;   /* its prev_log_index + n_entries: what it verified */
  uint64_t clamped; /* answers cut back */
};

void raftfix_clamp_begin(struct raftfix_clamp *c, const struct raft_message *m);
void raftfix_clamp_end(struct raftfix_clamp *c);
bool raftfix_clamp(struct raftfix_clamp *c, const struct raft_message *m,
                   struct raft_message *copy);

/* Frees the entries of a received AppendEntries and their batches (all of
 * one message share one batch, but each distinct batch is freed once), and
 * leaves ae with no entries. */
void raftfix_discard_entries(struct raft_append_entries *ae);

/* Frees the configuration and data of a received InstallSnapshot. */
void raftfix_discard_snapshot(struct raft_install_snapshot *is);

/* raft 0.15 refuses an AppendEntries whose prev_log_index lies inside the
 * replica's snapshot and no longer in its log (checkLogMatchingProperty:
 * no entry there, "reject"), although every entry up to the snapshot is
 * committed and so the same on every leader. A leader whose own snapshot
 * is older then walks next_index down past its log start, sends its
 * older snapshot (answered "have a more recent one") and probes from
 * below again: the follower stays behind until the leader snapshots past
 * it, after more writes (seen after a restart of a partition's old
 * leader: its snapshot at 895, the new leader's at 864). If m is such an
 * AppendEntries, from a leader of r's term or later, it is rewritten into
 * a heartbeat at the snapshot (prev = the snapshot's index and term, its
 * entries freed, leader_commit at most the snapshot's index) and true is
 * returned: raft accepts it and the leader goes on from there. Its answer
 * must then say the snapshot's index, not raft's last stored one (which
 * may be an uncommitted tail the leader does not hold): only a group whose
 * raft_io clamps its answers (struct raftfix_clamp, every group's) may use
 * the rule. Consumes the entries it drops; m stays the caller's. */
bool raftfix_below_snapshot(const struct raft *r, struct raft_message *m);

/* The Raft thesis (4.2.3) has a follower refuse a vote "within the minimum
 * election timeout of hearing from a current leader"; raft 0.15 refuses it
 * for as long as the follower names a leader, however long that leader has
 * been silent (recvRequestVote). So after a leader froze or was cut off, a
 * candidate (or pre-candidate) could win only once every voter it needed had
 * timed out itself: the later of their randomised timers instead of the
 * first. A follower that has not heard from its leader for the configured
 * election timeout takes a RequestVote as if it carried the "disrupt leader"
 * flag of a transfer's candidate, and votes on terms and logs as usual.
 * Safety does not rest on the rule (one vote per term, the log comparison);
 * a healthy leader's followers, and a replica back from a partition
 * (pre-vote), are still refused. election_ms is the group's configured
 * election timeout. Returns whether m was changed. */
bool raftfix_vote_unstick(const struct raft *r, struct raft_message *m, unsigned election_ms);

/* raft 0.15 puts its current configuration into a snapshot, an
 * uncommitted one included, labelled with the committed one's index
 * (replication.c, takeSnapshot; upstream takes the last committed one since
 * 0.17.1: docs/raft-0.15.md, row 14). A follower that installs such a
 * snapshot, or this replica restarting from it, takes a configuration that
 * no majority has agreed on and that may yet be rolled back. Seen: the
 * metadata group's leader appended "node 1 is a voter" for a rebuilt node,
 * took a snapshot before that change committed and sent it to node 1; the
 * leader died before node 2 had the change: node 1 counted itself a voter
 * and needed node 2's vote, node 2 (its log longer, node 1 not a voter in
 * its configuration) needed the dead leader's, and the group had no leader
 * until that node came back. So every group's state machine refuses a
 * snapshot (RAFT_BUSY, which raft retries at its next apply) while r holds
 * an uncommitted configuration; returns whether it must. */
bool raftfix_snapshot_refused(const struct raft *r);

/* raft 0.15 drops an InstallSnapshot that arrives while the replica takes
 * a snapshot of its own or installs another (replicationInstallSnapshot:
 * "already taking or installing snapshot", RAFT_BUSY, no answer; "the
 * leader will eventually retry"). The leader keeps the replica in its
 * snapshot state until install_snapshot_timeout (30 s) has passed: it
 * sends it only heartbeats, whose prev_log_index the replica does not
 * hold, and ignores the refusals in that state. Seen: a follower that
 * caught up from the AppendEntries its leader had queued while it was
 * down, snapshotting as it applied them, while the leader sent it a
 * snapshot, stayed 60 entries behind for those 30 s (test_replication's
 * retention catch-up over raft_uv's transport, 1 run in about 90; upstream
 * still drops it in 0.18). So such a message is held, the newest one (a
 * held one it replaces is freed), and given to raft once the replica's
 * own snapshot is done:
 *
 *   raftfix_snapshot_hold(h, r, m) before raft receives m: true when h
 *   took m (raft must not see it now);
 *   raftfix_snapshot_release(h, r) when r may be done: the held message
 *   when it may go to raft now, else NULL. The caller owns it, passes it
 *   through its receive path (which takes its configuration and data, or
 *   holds it again) and then free()s it; h holds nothing then.
 *   raftfix_snapshot_close(h) frees a held message (the group closes).
 *
 * h is the group's, zeroed at its creation (8 bytes while nothing is
 * held). Loop thread. */
struct raftfix_held {
  struct raft_message *m; /* NULL: none held */
};

bool raftfix_snapshot_hold(struct raftfix_held *h, const struct raft *r, struct raft_message *m);
struct raft_message *raftfix_snapshot_release(struct raftfix_held *h, const struct raft *r);
void raftfix_snapshot_close(struct raftfix_held *h);

/* raft 0.15 waits install_snapshot_timeout (30 s by default) for the
 * answer to an InstallSnapshot before it sends it again, and meanwhile
 * sends that follower only heartbeats and ignores its refusals. A snapshot
 * lost on the way (queued on a connection that dropped as the follower
 * restarted, reported sent) left the follower behind for those 30 s. Every
 * group sets its timeout to RAFTFIX_INSTALL_SNAPSHOT_ELECTIONS election
 * timeouts: a partition's snapshot is a descriptor installed in
 * milliseconds (its data follows by catch-up); the metadata group's is the
 * whole metadata state, restored in 17 ms at 10,100 partitions (166 KB,
 * docs/raft-0.15.md). An install slower than the timeout costs a second
 * send, which the follower holds while it installs the first
 * (raftfix_snapshot_hold) and installs again after: never a stall. */
#define RAFTFIX_INSTALL_SNAPSHOT_ELECTIONS 3
unsigned raftfix_install_snapshot_ms(unsigned election_ms);

/* raft 0.15 rolls a follower's configuration back when an AppendEntries
 * truncates an uncommitted configuration change (replication.c,
 * deleteConflictingEntries -> membershipRollback) by decoding the last
 * committed configuration from its log entry. When a snapshot has
 * compacted that entry out of the in-memory log, 0.15 decodes a NULL entry
 * (its assertions are compiled out in Debian's build): the node crashes.
 * Upstream keeps the committed configuration aside since 0.17.1
 * (configuration_previous; docs/raft-0.15.md row 14). So a group keeps a
 * copy of its committed configuration when a change arrives while that
 * entry is already compacted (raftfix_conf_keep, before raft receives each
 * message; raftfix_conf_keep_now before the group's own raft_add,
 * raft_assign or raft_remove), and raftfix_conf_rollback, before raft
 * receives an AppendEntries that would make 0.15 roll back without the
 * entry, rolls back from the copy itself: raft then finds no uncommitted
 * change to undo and truncates as usual. (No snapshot is taken while a
 * change is uncommitted, raftfix_snapshot_refused, so an entry in memory
 * when the change arrives stays there until it commits or rolls back.)
 * A replica restarted with a change uncommitted in its log keeps its
 * snapshot's configuration as it loads (raftfix_conf_keep_loaded): 0.15
 * then takes the log's last configuration as committed (start.c,
 * restoreEntries) and, when a new leader truncates that entry, would keep
 * it; the rule goes back to the snapshot's instead. */
struct raftfix_conf {
  struct raft_configuration conf; /* the copy; n 0: none */
  raft_index index;               /* r->configuration_index it is the content of */
};

void raftfix_conf_init(struct raftfix_conf *k);
void raftfix_conf_close(struct raftfix_conf *k);

/* Before raft receives m: keeps the committed configuration if m brings
 * a change while none is uncommitted and the committed entry is no longer
 * in the log. A failed copy (no memory) leaves none. */
void raftfix_conf_keep(struct raftfix_conf *k, const struct raft *r, const struct raft_message *m);

/* The same before the group proposes a change itself. */
void raftfix_conf_keep_now(struct raftfix_conf *k, const struct raft *r);

/* What raft_io's load gave raft at its start: with a change among the
 * entries after the snapshot (uncommitted until a leader says otherwise),
 * keeps the snapshot's configuration, the committed one, which raft
 * replaces with the change's. */
void raftfix_conf_keep_loaded(struct raftfix_conf *k, const struct raft_snapshot *snapshot,
                              const struct raft_entry *entries, size_t n);

/* Before raft receives m (after any other rule rewrote it): if raft would
 * roll back a change whose committed entry is gone, and k holds that
 * configuration, rolls r back from k and returns true. */
bool raftfix_conf_rollback(const struct raftfix_conf *k, struct raft *r,
                           const struct raft_message *m);

/* raft 0.15 commits by counting replicas at its last stored index, of
 * whatever term (docs/raft-0.15.md, row 1: the Raft paper's figure 8), and
 * appends nothing when it wins an election. So every group's leader
 * appends a barrier in the iteration in which it starts to lead a term
 * (partitions: rgroup_raft.c; the metadata group: controller.c), and until
 * its first entry of that term is on its own disk an AppendEntries result
 * of the term could make it commit an older term's entry. Returns whether
 * m is such a result: the caller drops it as if lost (it owns nothing),
 * and the follower is asked again at the next heartbeat. term_appended is
 * the last term in which this replica appended as leader and first_index
 * the index of its first entry in that term. Results of other terms cannot
 * commit anything. */
bool raftfix_hold_result(const struct raft *r, const struct raft_message *m,
                         raft_term term_appended, raft_index first_index);

/* raft 0.15's in-memory log only grows until raft_close: the table that
 * counts references to its entries starts at 256 slots (8 KiB) with the
 * first entry and doubles whenever the entries held outgrow it, and the
 * entries' circular array doubles likewise; neither shrinks when a
 * snapshot leaves a few entries (log.c: refsInit, refsGrow,
 * ensureCapacity). At 10,000 replicas per node the table alone was 8 KiB
 * of the ~29 KiB each replica cost (docs/performance.md). This rebuilds
 * both at the size the entries now held need: the table at the least
 * power of two, at least RAFTFIX_REFS_MIN, in which every live reference
 * (an entry in the log, or one an I/O request still holds) has a slot of
 * its own; the array at those entries plus two. Each only when that frees
 * memory; raft grows them again by its own rules. A table with two terms
 * at one index (a truncated entry still held by an I/O request) is left
 * as it is, as is anything when memory runs out. O(1) when the tables are
 * at most about twice what the entries need, else a walk over the table.
 * Must not be called from inside a raft call (from a callback raft is
 * running): the rgroup calls it after raft_start and when a group falls
 * asleep (rgroup_ticker.h), the controller at each tick (its log grows to
 * hundreds of thousands of entries while creating 10,000 partitions, and
 * is snapshotted every CTL_SNAPSHOT_THRESHOLD). Returns the bytes freed. */
#define RAFTFIX_REFS_MIN 4
size_t raftfix_log_trim(struct raft *r);

#endif
