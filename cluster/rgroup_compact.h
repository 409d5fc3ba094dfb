/* rgroup_compact.h - a quiet partition group drops its Raft log: once its
 * applies have stopped, every replica takes a snapshot that keeps no entry
 * behind it, so an idle group holds nothing in the node-wide log (and
 * pins none of its segments) or in memory. Internal to rgroup.
 *
 * Why: raft 0.15 snapshots by count, after `threshold` applied entries,
 * and keeps `trailing` entries behind each snapshot. A group that stops
 * below its next threshold keeps up to threshold + trailing entries for
 * ever; on the node-wide log (cluster/wal.h) a segment is dropped only
 * when no group holds a live entry in it, so one idle group's tail kept
 * every segment written after it: after bench/compare's produce runs the
 * log held as many bytes as the partitions' logs (2.08 bytes on disk per
 * payload byte per replica; docs/performance.md).
 *
 * How: raft takes a snapshot right after it applies an entry (of any
 * type, a barrier too) when last_applied - snapshot index >= threshold.
 *
 *   follower applies stopped for RGROUP_COMPACT_STILL_MS with entries
 *            held: armed, threshold 1 and trailing 0 (1 on raft_uv's
 *            per-group files, whose snapshot_put takes trailing 0 for an
 *            install and drops entries after the index);
 *   leader   quiet (rgroup_pace.h: committed, every follower matched) and
 *            still for RGROUP_COMPACT_LEADER_MS with entries held: appends
 *            a barrier. The followers applied the last entry within a
 *            heartbeat of the leader, so they have been still for more
 *            than RGROUP_COMPACT_STILL_MS and are armed. The leader arms
 *            itself only then, when every follower holds its whole log: a
 *            leader that compacted while a follower was behind (frozen,
 *            cut off) would have to send that follower a snapshot (seen:
 *            1,504 InstallSnapshots after a node's SIGSTOP and SIGCONT
 *            with 200 partitions, and groups that never went quiet
 *            again). Every armed replica applies the barrier and
 *            snapshots at its index, keeping nothing behind it;
 *   leading  a replica that starts leading is disarmed at once, before
 *            its term's barrier;
 *   apply    the first entry applied disarms the replica (threshold and
 *            trailing back to the tuned ones, rgroup_fsm.c) before raft's
 *            snapshot check: a busy group snapshots as before.
 * A replica that was not armed when the barrier came (its applies stopped
 * late) keeps its tail until the group's next quiet period with entries:
 * a missed compaction costs disk, never data. A leader tries at most
 * RGROUP_COMPACT_TRIES barriers per quiet period (a snapshot refused
 * because the store is catching up would otherwise add one every period).
 *
 * Safety: the snapshot is raft's own (rgroup_fsm.c: the store made durable
 * up to it first); on the node-wide log the trailing-0 put of raft's own
 * request keeps entries after the index (raft_io_wal.h, local_put).
 *
 * Context: loop thread only. */
#ifndef CAIRN_RGROUP_COMPACT_H
#define CAIRN_RGROUP_COMPACT_H

#include "cluster/rgroup.h"

#define RGROUP_COMPACT_STILL_MS 1000  /* no apply this long: armed */
#define RGROUP_COMPACT_LEADER_MS 2000 /* a quiet leader still this long appends the barrier */
#define RGROUP_COMPACT_TRIES 3        /* barriers per quiet period */

/* Every rgroup tick (rgroup_on_raft_tick): arms a still replica, and has a
 * quiesced leader with entries held append the barrier. */
void rgroup_compact_tick(struct rgroup *rg);

/* Before the state machine applies an entry: disarms (threshold and
 * trailing back to rg->snap_threshold / rg->snap_trailing). */
void rgroup_compact_on_apply(struct rgroup *rg);

/* Disarms now: called as the replica starts leading (rgroup_raft.c),
 * before its term's barrier, which would otherwise compact a log that a
 * follower left behind (the old leader, say) still needs. */
void rgroup_compact_disarm(struct rgroup *rg);

/* Sets raft's snapshot threshold and trailing count as tuned for a busy
 * group (rgroup_fsm.c), now or, while armed, at the disarm. */
void rgroup_compact_tune(struct rgroup *rg, unsigned threshold, unsigned trailing);

#endif
