/* rgroup_compact.h - a quiet group's Raft log compacted to one entry, so
 * the node-wide log (wal.h) can drop what its partitions no longer need.
 * Internal to rgroup.
 *
 * Why: raft 0.15 takes a snapshot only when an apply brings it threshold
 * entries past the last one, and keeps trailing entries behind it; both
 * are sized from the group's Raft log budget (64 MiB by default:
 * rgroup_fsm.c). A group that stops taking writes keeps up to that much
 * in the node-wide log for as long as it stays idle: every payload byte
 * on disk twice, once in the partition log (1.5-1.6 bytes on disk per
 * payload byte per replica at rest in bench/compare, against a target of
 * 1.1: docs/performance.md, "Cleaning the node-wide log").
 *
 * How: every replica of a quiet group "arms": its snapshot threshold goes
 * to 1 and its trailing to 1 (raft_io_wal reads a trailing of 0 as an
 * installed snapshot that drops the whole log, entries after it too), so
 * its next apply takes a snapshot that leaves only the entry applied. A
 * follower arms when it accepts its leader's coalesced beat (it holds
 * exactly the leader's log, committed to its end: rgroup_coal_follow); the
 * leader arms once every follower has accepted this quiet period's beat
 * (rgroup_coal_acked) and proposes a barrier, which every armed replica
 * applies next. The snapshot flushes the partition log first (as every
 * snapshot does), so what leaves the Raft log is durable in the partition
 * log. Its end (snapshot_finalize, failed or not) puts the tuned values
 * back; an armed replica whose leader never proposes the barrier takes
 * its one snapshot at the next entry it applies, whatever it is.
 *
 * A group is worth compacting while its log holds more than one entry
 * and at least RGROUP_COMPACT_MIN_BYTES of entries (what raft keeps, its
 * trailing ones included) and no snapshot
 * is under way; a replica catching up from a peer (catchup.h) is left
 * alone. Leaders start at most RGROUP_COMPACT_PER_S a second per node.
 * Without coalesced heartbeats (--coalesce-heartbeats off) or a gate
 * (rgroup_opts.compact_gate) nothing arms.
 *
 * Context: loop thread. */
#ifndef CAIRN_RGROUP_COMPACT_H
#define CAIRN_RGROUP_COMPACT_H

#include <raft.h>
#include <stdint.h>

struct rgroup;

/* Compactions a node's leaders start per second, in bursts of at most as
 * many (rgroup_compact_gate): each is a barrier on every replica and a snapshot
 * flushing a partition log on the libuv thread pool, which the node-wide
 * log's writes share. Without a bound, 10,000 partitions going quiet
 * together after their creation queued 10,000 snapshots there at once:
 * idle CPU 16-29 % per node, elections, and the next produce found
 * partitions without a leader. */
#define RGROUP_COMPACT_PER_S 20

/* A group is compacted only when its Raft log holds at least this many
 * bytes of entries (trailing ones included): below, the disk and memory it frees
 * do not pay for a barrier and a snapshot. */
#define RGROUP_COMPACT_MIN_BYTES (64u * 1024)

/* The node's token bucket of compactions (one per node, shared by its
 * replicas through rgroup_opts.compact_gate; NULL there: none compact). */
struct rgroup_compact_gate {
  double tokens;    /* compactions that may start now */
  uint64_t last_ms; /* uv_now of the last refill */
};

/* An empty gate that fills at RGROUP_COMPACT_PER_S from now_ms. */
void rgroup_compact_gate_init(struct rgroup_compact_gate *g, uint64_t now_ms);

/* Sets the snapshot threshold and trailing count raft uses outside a
 * compaction (at open, and from rgroup_fsm.c's retuning); applied to raft
 * at once unless the replica is armed (then at the compaction's end). */
void rgroup_compact_tune(struct rgroup *rg, unsigned threshold, unsigned trailing);

/* As a follower that accepted its leader's coalesced beat: arms if the
 * group is worth compacting. */
void rgroup_compact_on_follow(struct rgroup *rg);

/* As a coalesced leader, after a follower accepted this quiet period's
 * beat, and at its ticks: once every follower has, arms and proposes the
 * barrier if the group is worth compacting and the node's gate lets it
 * (otherwise a later tick tries again). */
void rgroup_compact_on_acked(struct rgroup *rg);

/* A snapshot ended (snapshot_finalize): disarms, back to the tuned values. */
void rgroup_compact_on_snapshot_end(struct rgroup *rg, raft_index index);

/* A snapshot at the next apply, keeping the trailing entries (not a
 * compaction), and again at the next ones until one covers index: after a
 * LOG_START command at index, so that a follower that must install a
 * snapshot gets one whose producer table covers the delete (a snapshot
 * from before it would leave the follower without the producers whose
 * batches the delete removed: docs/kafka.md, "DeleteRecords"). The end of
 * a snapshot at or past index puts the tuned threshold back. */
void rgroup_compact_snapshot_soon(struct rgroup *rg, raft_index index);

#endif
