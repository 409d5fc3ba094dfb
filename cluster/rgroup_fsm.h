/* rgroup_fsm.h - a partition replica's Raft state machine: applying an
 * entry appends its batches to the store, minus an idempotent producer's
 * duplicates and refused batches; a snapshot is a small descriptor of the
 * log (its manifest and the producer table), never the data. Internal to
 * rgroup. */
#ifndef CAIRN_RGROUP_FSM_H
#define CAIRN_RGROUP_FSM_H

#include "cluster/rgroup.h"

/* The snapshot threshold (entries) for a replica whose entries average
 * entry_bytes: two thirds of what raft_log_budget holds (the rest is the
 * trailing), within [16, 8192], then scaled by a factor in [3/4, 1] drawn
 * from (group_id, self_id). Replicas taking the same traffic would
 * otherwise cross their thresholds together and snapshot at once, every
 * partition on every node in the same ~50 ms (docs/performance.md, "The
 * partition log's writeback and the ack tail under load"). A pure
 * function. */
unsigned rgroup_fsm_snapshot_threshold(size_t raft_log_budget, double entry_bytes,
                                       uint64_t group_id, uint64_t self_id);

/* Fills rg->fsm. */
void rgroup_fsm_init(struct rgroup *rg);

/* Frees the state machine's scratch memory. */
void rgroup_fsm_close(struct rgroup *rg);

/* Judges one Raft entry's batches against the producer table and appends
 * those to write to the store with its index: the apply path, also used
 * for entries held back during a catch-up. rg->applied gets one result per
 * batch (n 0 for an entry applied before a restart), valid until the next
 * call. Returns 0 or a negative code (the replica is then fatal). */
int rgroup_fsm_apply_entry(struct rgroup *rg, const uint8_t *entry, size_t len, uint64_t index);

/* Reads <dir>/producers into rg->producers (initialized, empty) after the
 * store is open, then records the headers of the batches after the point
 * it covers; without the file (or with a damaged one, logged) the table is
 * rebuilt from the log's start. Blocks (reads the log). */
void rgroup_fsm_producers_open(struct rgroup *rg);

/* After the store was revived to what it made durable (a PostgreSQL store
 * after a fault): drops the table and rebuilds it as at open, from
 * <dir>/producers and the store's batches after it. */
void rgroup_fsm_producers_reload(struct rgroup *rg);

/* Makes <dir>/producers cover the whole log, so retention may delete up to
 * its end: brings the table to the log's end, flushes the log there and
 * writes the table (rg->producers_saved_offset then is the log's end).
 * Blocks in fdatasync (retention is rare: once per check interval, and only
 * when segments are due). A store that answers the flush CAIRN_EPENDING
 * (PostgreSQL, written behind: never waited for on the loop) gets the
 * table encoded as of the log's end now and kept; it is written once the
 * store has committed that far (rgroup_fsm_producers_durable, or the next
 * call), and CAIRN_EPENDING is returned meanwhile. Returns 0, CAIRN_EEXIST
 * while a snapshot is in flight (its worker writes the same file: try
 * later), CAIRN_EPENDING, or a negative code (the store's; a failed flush
 * leaves the store fatal). */
__attribute__((warn_unused_result)) int rgroup_fsm_producers_checkpoint(struct rgroup *rg);

/* The store committed what a checkpoint waits for (pgstore's on_durable):
 * writes the kept table if it is covered now. Context: loop. */
void rgroup_fsm_producers_durable(struct rgroup *rg);

#endif
