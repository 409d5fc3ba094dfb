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

/* ---- the producer table between replicas (catch-up, fetch_proto.h) ---- */

/* catchup_table_wanted_fn: would the table this replica has once caught
 * up (a restored snapshot's, or its own) cover less than its log, which
 * starts at log_start (or does it lack producers already: producers_gap)? */
bool rgroup_fsm_table_wanted(struct rgroup *rg, int64_t log_start);

/* catchup_table_fn: keeps a peer's encoded table (buf untrusted) to adopt
 * once the log reaches the offset it covers, as a restored snapshot's is.
 * Returns 0 with that offset and Raft index, CAIRN_EOFFSET when it covers
 * less than this log, or the decode's error. */
int rgroup_fsm_table_take(struct rgroup *rg, const uint8_t *buf, size_t len, int64_t *offset,
                          uint64_t *index);

/* fetch_table_fn: this replica's table brought to its log's end and
 * encoded (*out malloc'd). CAIRN_EREPLICA_NOT_AVAILABLE while it is
 * catching up, has a table pending or lacks producers (producers_gap). */
int rgroup_fsm_table_share(struct rgroup *rg, uint8_t **out, size_t *len);

/* Caught up: a pending table is adopted now; a peer's is also saved to
 * <dir>/producers.cmd (a flush, then the file: blocks in fdatasync), so a
 * restart does not rebuild it from a log that lacks what it covers. A
 * failure is logged; the restart then finds the gap and asks again. */
void rgroup_fsm_caught_up(struct rgroup *rg);

/* The store committed what a checkpoint waits for (pgstore's on_durable):
 * writes the kept table if it is covered now. Context: loop. */
void rgroup_fsm_producers_durable(struct rgroup *rg);

#endif
