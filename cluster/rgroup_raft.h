/* rgroup_raft.h - the Raft instance under a partition replica: opening and
 * reopening it, the raft_io methods rgroup interposes, the latch after a
 * failed write and the barrier at the start of a term. Internal to rgroup;
 * these are the application-level fixes for raft 0.15's weak spots
 * (docs/raft-0.15.md, rows 1, 2, 3 and 7).
 *
 * Failed write (rows 2, 3): every append, term, vote and truncate write goes
 * through an interposer. The first one that fails latches the instance
 * (rg->raft_failed): later writes are refused before they reach the disk,
 * rgroup proposes nothing more, the replica enters RGROUP_RECOVERING, and
 * Raft is closed and reopened from what is on disk, retrying with a backoff
 * (RGROUP_RECOVER_MIN_MS doubling up to RGROUP_RECOVER_MAX_MS) while the
 * writes keep failing.
 *
 * Store down: a PostgreSQL store whose statement failed takes the same
 * road (rgroup_raft_store_down), with its revive before the reopen.
 *
 * Start of a term (row 1): the moment this replica leads in a term in which
 * it has appended nothing, a uv_check handle appends a raft_barrier in the
 * same loop iteration; until the term's first entry is durable on the
 * leader, AppendEntries results of that term are dropped, so raft 0.15 can
 * only count replicas at an index of the current term.
 *
 * Transfers (row 7): each raft_transfer is its own allocation, freed once
 * both its callback and its TimeoutNow send have completed, or when Raft
 * has closed.
 *
 * Context: loop thread only. */
#ifndef CAIRN_RGROUP_RAFT_H
#define CAIRN_RGROUP_RAFT_H

#include "cluster/rgroup.h"

/* Implemented in rgroup.c: the one setter of rg->state; logs the change
 * and asserts that the lifecycle in rgroup.h allows it. */
void rgroup_set_state(struct rgroup *rg, enum rgroup_state to);

/* Checks <dir>/raft first (raft_files_check: a torn tail of an open
 * segment is cut; other damage returns CAIRN_ERAFTFILES, the replica stays
 * closed), then initializes the group's Raft transport, its raft_io
 * (raft_uv's, or its own: rgroup_wal_own_io) with the interposers and
 * struct raft (not started; the caller sets timeouts, bootstraps if
 * needed, and calls raft_start). Returns 0 with rg->raft_open
 * set, or a negative code with rg->errmsg set and nothing left to close. */
__attribute__((warn_unused_result)) int rgroup_raft_init(struct rgroup *rg);

/* Raft's tick, then rgroup's own (rgroup_on_raft_tick); nothing for a
 * latched instance. The node's ticker calls it (rgroup_ticker.h), or the
 * io's own timer without one. */
void rgroup_raft_tick(struct rgroup *rg);

/* Gives back the memory raft 0.15's in-memory log kept past what its
 * entries need now (raftfix_log_trim), counted in rg->log_trimmed. Called
 * after raft_start and when the ticker puts the group to sleep; never from
 * inside a raft call. Nothing for a group whose raft is not open. */
void rgroup_raft_trim(struct rgroup *rg);

/* Does the replica run on its own raft_io (riow_mux.h): opts.wal and
 * opts.mux? Otherwise on raft_uv's. (rgroup_wal.c) */
bool rgroup_wal_own_io(const struct rgroup *rg);

/* Is a term or vote record of the replica's open Raft instance not yet
 * durable (its own raft_io only; raft_uv's are durable on return)? Then
 * nothing may reveal its term (riow_mux.h, "Term and vote"): the coalesced
 * heartbeats ask this. (rgroup_wal.c) */
bool rgroup_wal_meta_pending(const struct rgroup *rg);

/* With rgroup_wal_own_io: sets up rg->wio.mux over the node's log and
 * multiplexer, driving rg->rt (set up by transport_group_init). Snapshot
 * files go to <dir>/wal-snapshots. Before the interposers. Returns 0 or a
 * negative code with rg->errmsg set. After 0: raft_close through raft, or
 * riow_mux_release if raft_init failed. (rgroup_wal.c) */
__attribute__((warn_unused_result)) int rgroup_wal_own_io_init(struct rgroup *rg);

/* With rg->opts.wal and no mux: points the storage methods of raft_uv's
 * io (rg->wio.uv) at the node-wide log, and its close behind the log's
 * pending requests. Snapshot files go to <dir>/wal-snapshots. Call after
 * raft_uv_init, before the interposers. Returns 0 or a negative code with
 * rg->errmsg set. (rgroup_wal.c) */
__attribute__((warn_unused_result)) int rgroup_wal_attach(struct rgroup *rg);

/* With rg->opts.wal: CAIRN_ERAFTFILES (rg->errmsg naming the damage) when
 * the replica's directory holds the mark of a damaged node-wide log
 * (waldamage.h): its Raft state was lost with that log, and it stays
 * closed until rebuilt (partitions.h). Otherwise 0. (rgroup_wal.c) */
__attribute__((warn_unused_result)) int rgroup_wal_check_mark(struct rgroup *rg);

/* Applies rg->opts' timeouts and snapshot counts to rg->raft. */
void rgroup_raft_configure(struct rgroup *rg);

/* Stops the recovery timer, if it was ever started. */
void rgroup_raft_recover_stop(struct rgroup *rg);

/* Closes the recovery timer and the barrier check, which are allocated
 * only once needed (a failure; leadership or a prompt election): done is
 * called from the loop once per handle closed. Returns how many calls
 * will come (0, 1 or 2). */
unsigned rgroup_raft_handles_close(struct rgroup *rg, void (*done)(struct rgroup *rg));

/* Closes the Raft instance (rg->raft_open must be set); rgroup_on_raft_closed
 * fires exactly once when it is closed, after the raft_io, the transport and
 * every raft_transfer were released. */
void rgroup_raft_close(struct rgroup *rg);

/* Implemented in rgroup.c: raft's periodic tick happened (rgroup's own
 * tick runs from it, at most every RGROUP_TICK_MS). */
void rgroup_on_raft_tick(struct rgroup *rg);

/* Implemented in rgroup.c: the Raft instance closed (rgroup_raft_close). */
void rgroup_on_raft_closed(struct rgroup *rg);

/* Implemented in rgroup.c: fails every queued (not yet proposed) request
 * with status. */
void rgroup_fail_queue(struct rgroup *rg, int status);

/* Implemented in rgroup.c: one of the parts rgroup_close_parts waits for
 * closed (a revive of the store in flight is one). */
void rgroup_on_part_closed(struct rgroup *rg);

/* Implemented in rgroup.c: a leadership transfer finished. */
void rgroup_on_transfer_done(struct rgroup *rg);

/* After the Raft instance closed while recovering: schedules the reopen
 * after the backoff delay. */
void rgroup_raft_backoff(struct rgroup *rg);

/* Latches the instance after a failed write (status: a RAFT_* code) and
 * starts the recovery. Idempotent for one instance. */
void rgroup_raft_fail(struct rgroup *rg, int status, const char *what);

/* The replica's PostgreSQL store failed (it is fatal): the replica stops
 * applying and acknowledging, Raft is closed as after a failed write, and
 * before it is reopened the store is revived on the thread pool
 * (pgstore_revive_*), retried with the backoff while the database does not
 * answer. The reopened Raft applies again the entries above what
 * PostgreSQL committed. Idempotent. */
void rgroup_raft_store_down(struct rgroup *rg);

/* Records that rgroup appended an entry as leader (after raft_apply). */
void rgroup_raft_note_append(struct rgroup *rg);

/* As the leader: appends a barrier entry (raft_barrier; nothing waits
 * for its outcome). Returns 0 or a RAFT_* code. */
__attribute__((warn_unused_result)) int rgroup_raft_barrier(struct rgroup *rg);

/* A leader that has appended nothing in its term yet gets its barrier (a
 * single-voter group sends no heartbeat that would trigger it). */
void rgroup_raft_ensure_barrier(struct rgroup *rg);

/* Starts a leadership transfer to `to` (0: any caught-up voter) with a
 * fresh struct raft_transfer; rgroup_on_transfer_done fires once if this
 * returns 0. Returns 0 or a RAFT_* code. */
__attribute__((warn_unused_result)) int rgroup_raft_transfer(struct rgroup *rg, uint64_t to);

#endif
