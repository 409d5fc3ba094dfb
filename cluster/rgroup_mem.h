/* rgroup_mem.h - a node-wide bound on the bytes of entries its partition
 * replicas' Raft instances hold in memory. Internal to rgroup and parts.
 *
 * Why: raft 0.15 keeps every entry of a group's log in memory until a
 * snapshot, and each group's share is bounded by its own budget
 * (rgroup_opts.raft_log_budget, 64 MiB by default: rgroup_fsm.c sizes the
 * snapshot threshold from it), so 10,000 partitions on a node were bounded
 * by 10,000 times that. After a produce over 10,000 partitions every node
 * held ~500 MB (docs/performance.md), and an idle group below the quiet
 * compaction's floor (RGROUP_COMPACT_MIN_BYTES) keeps its entries for as
 * long as it stays idle.
 *
 * How: the node sums, at its tick, an estimate of each replica's bytes
 * (rgroup_mem_bytes: a few of the entries raft holds, sampled) and keeps one
 * scale in (0, 1]: multiplied down while the sum is above the budget,
 * back up while it is well below. Each group's budget (so its snapshot
 * threshold, at its next retune) and the quiet compaction's floor are
 * multiplied by it: busy groups snapshot sooner, idle ones compact
 * sooner (at the compaction gate's pace), and with the sum under the
 * budget nothing changes.
 *
 * Context: loop thread. */
#ifndef CAIRN_RGROUP_MEM_H
#define CAIRN_RGROUP_MEM_H

#include <stdint.h>

struct rgroup;

/* The lowest the scale goes: a 64 MiB budget becomes 16 KiB (the snapshot
 * threshold's floor of 16 entries holds below that anyway). */
#define RGROUP_MEM_MIN_SCALE (1.0 / 4096)

/* Calls of rgroup_mem_update (node ticks of 500 ms) between two cuts of
 * the scale: the time for snapshots and compactions to show. */
#define RGROUP_MEM_CUT_TICKS 4

struct rgroup_mem {
  uint64_t budget;       /* bytes for every replica of the node; 0: unbounded */
  double scale;          /* each group's budget and the compaction floor, times this */
  uint64_t bytes;        /* the last sum (rgroup_mem_update) */
  uint64_t bytes_at_cut; /* the sum at the start of this window of calls */
  unsigned since_cut;    /* calls in it (from RGROUP_MEM_CUT_TICKS at init) */
};

/* Unbounded when budget is 0 (the scale stays 1). */
void rgroup_mem_init(struct rgroup_mem *m, uint64_t budget);

/* Entries of a group's log rgroup_mem_bytes looks at, at most. */
#define RGROUP_MEM_SAMPLES 16

/* An estimate of the bytes of entries rg's Raft holds (0 when it is not
 * open): exact for up to RGROUP_MEM_SAMPLES entries, else from that many
 * spread over its log. */
uint64_t rgroup_mem_bytes(const struct rgroup *rg);

/* Takes the sum of rgroup_mem_bytes over the node's replicas and moves
 * the scale: times budget / bytes (and a
 * margin) when above the budget, at most once a window of
 * RGROUP_MEM_CUT_TICKS calls and not when the sum fell by 5 % over it;
 * up by a quarter, to at most 1, when below three quarters of the
 * budget. */
void rgroup_mem_update(struct rgroup_mem *m, uint64_t bytes);

/* What rg's budget and compaction floor are multiplied by now (1 without a
 * node bound). */
double rgroup_mem_scale(const struct rgroup *rg);

#endif
