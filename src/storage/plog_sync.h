/* plog_sync.h - a flush of a partition log whose fsyncs run off the loop
 * thread, for Raft snapshots (cluster/rgroup_fsm.c): the loop captures what
 * the log holds now (plog_sync_begin), a thread-pool worker makes it
 * durable and checksums it (plog_sync_run), the loop records the outcome
 * (plog_sync_end). Meanwhile the loop goes on appending.
 *
 * What a job does, in order:
 *   begin (loop)  writes the indexes' pending entries (page cache, no
 *                 fsync), pins every segment and captures its fds, size,
 *                 next offset, last Raft index and CRC state, whether the
 *                 directory needs an fsync, the log's start, next offset and
 *                 last index, and the durable marks the job will reach;
 *   run (thread)  fdatasyncs each segment's indexes and log up to its
 *                 captured size, fsyncs the directory if files were created
 *                 or removed, writes the checkpoint with the new durable
 *                 marks (only after every fsync succeeded: the checkpoint
 *                 never claims more than was fsynced), and extends each
 *                 segment's CRC-32C to its captured size for the manifest;
 *   end (loop)    on success records the durable marks and what each
 *                 segment now has synced and checksummed; on failure latches
 *                 the log fatal with the job's message (a failed fsync is
 *                 never retried: the page cache may have dropped the dirty
 *                 pages, so a later fsync that succeeds proves nothing);
 *                 then unpins the segments and frees the job.
 * A successful run makes everything below the captured next offset
 * durable, so a manifest of the job (plog_sync_manifest) names only durable
 * data, which is what lets Raft drop the entries it covers.
 *
 * Why appends may go on during the run: fdatasync covers the bytes written
 * before it was called; later appends land beyond the captured sizes and
 * are not claimed. A roll during the run syncs the old segment on the loop
 * and creates a new one, which the job neither pins nor claims. Everything
 * that would change captured bytes or files, or write the checkpoint (its
 * temp file is shared), first collects the job (plog_sync_collect in
 * plog_internal.h): flush, truncate, delete_before, retention and close.
 * Collecting cancels a job no worker has started and waits for one that
 * is running (a bounded stall of the loop in rare operations; in cairnd
 * Raft's close already waits for its snapshot work, so close never waits
 * here).
 *
 * The log with a job (pl->sync != NULL: "syncing"; independent of the
 * fatal latch, which an append may set meanwhile):
 *
 *   from       event                                      to         by
 *   idle       a job is captured                          syncing    plog_sync_begin
 *   syncing    append (may roll), read, time lookup,      syncing    (allowed)
 *              info, plog_segments
 *   syncing    flush, truncate, delete_before,            idle       plog_sync_collect,
 *              retention, close                                      then the operation
 *   syncing    the owner ends the job                     idle       plog_sync_end
 *   idle/syncing  a collected job's fsync or write failed fatal      plog_sync_collect
 *
 * A job (job->state, set only by plog_sync_set_state, which asserts the
 * transition; guarded by the job's mutex):
 *
 *   from       event                                      to         by
 *   CAPTURED   a worker starts it                         RUNNING    plog_sync_run
 *   CAPTURED   the log collects it first                  CANCELED   plog_sync_collect
 *   RUNNING    its fsyncs, writes and checksums are done  DONE       plog_sync_run
 *   RUNNING    the log collects it: waits for DONE        -          plog_sync_collect
 *   CANCELED   a worker starts it: does nothing           CANCELED   plog_sync_run
 *   (any)      plog_sync_end: collected if not yet, freed -          plog_sync_end
 *
 * Invariant (checked at collect): a job's outcome is applied to its log
 * exactly once, on the loop, and only from state DONE; a canceled job
 * changes nothing but is reported as CAIRN_ESYNC_CANCELED.
 *
 * Context: begin, end and collect on the log's owner thread (the loop);
 * run and plog_sync_manifest on any one thread at a time. */
#ifndef CAIRN_PLOG_SYNC_H
#define CAIRN_PLOG_SYNC_H

#include "storage/manifest.h"
#include "storage/store.h"

#include <stdint.h>

struct plog_sync;

/* Captures a sync of the whole log s (a plog: everything appended so far)
 * and marks the log syncing. On success *out is owned by the caller, who
 * must pass it to plog_sync_end() exactly once (whether or not it ran).
 * Returns 0, CAIRN_EFATAL (the log is fatal), CAIRN_EEXIST (a job of this
 * log is already out), CAIRN_ENOMEM, or the error of an index write (the
 * log is then fatal). Context: the loop. */
__attribute__((warn_unused_result)) int plog_sync_begin(struct store *s, struct plog_sync **out);

/* Does the job's work: fdatasyncs, directory fsync, checkpoint, CRCs (see
 * above). Returns 0, CAIRN_ESYNC_CANCELED (the log collected the job
 * before it started: nothing done), or the first failure (the log becomes
 * fatal when the job is collected). Touches only the job and the files:
 * never the log object. Blocks. Context: any thread, once per job. */
__attribute__((warn_unused_result)) int plog_sync_run(struct plog_sync *job);

/* After a successful plog_sync_run(): the manifest of what the job
 * captured (start and next offset, last Raft index, each segment with its
 * CRC-32C); m->producers is left NULL. *m owns its segments (free with
 * manifest_free()). Returns 0, CAIRN_ENOMEM, or CAIRN_EINVAL when the job
 * did not succeed. Context: the thread that ran the job, or the loop after
 * it. */
__attribute__((warn_unused_result)) int plog_sync_manifest(const struct plog_sync *job,
                                                           struct manifest *m);

/* Nanoseconds the run took (0 if it never ran). */
uint64_t plog_sync_run_ns(const struct plog_sync *job);

/* Applies the job's outcome to its log if the log has not collected it
 * yet (waiting for a running job, canceling one not started), then unpins
 * and frees the job. Returns the job's status: 0, CAIRN_ESYNC_CANCELED, or
 * the failure (the log is then fatal; store_errmsg() says what failed).
 * Always consumes job. Context: the loop; the log must still be open, or
 * have collected the job when it closed (store_close does). */
int plog_sync_end(struct plog_sync *job);

#endif
