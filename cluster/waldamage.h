/* waldamage.h - a node-wide Raft log (wal.h) damaged beyond a torn tail
 * takes no node down: the log is set aside whole and every partition
 * replica whose Raft state it held is refused until the cluster has
 * rebuilt it from its peers (docs/fault-tolerance.md, "A damaged node-wide
 * Raft log").
 *
 * Happy path at node start (node.c), when wal_open returns CAIRN_ECORRUPT:
 *   mark     waldamage_set_aside writes WALDAMAGE_MARK (the damage's
 *            message, one text line) into every replica directory under
 *            <data>/partitions, each fsynced with its directory: those
 *            replicas had (or may have had) their term, vote and entries in
 *            the damaged log;
 *   move     then renames <data>/wal to <data>/wal.damaged-<unix seconds>
 *            [-<k>] and fsyncs <data> (the newest WALDAMAGE_KEEP kept);
 *   reopen   the node opens a new, empty log.
 *   refused  a replica whose directory holds the mark is refused at open
 *            (rgroup_wal.c: CAIRN_ERAFTFILES), and partitions.h's rebuild
 *            takes over: reported, removed from its group by the leader,
 *   rebuilt  then waldamage_move_state moves its Raft state (snapshot files)
 *            and last the mark into raft.damaged-<seconds>, and it rejoins
 *            empty, never bootstrapping.
 *
 * The metadata group's own log (<data>/meta/wal) uses the same pieces on
 * its directory: waldamage_set_aside_log marks <data>/meta itself, and
 * metaheal.h's rebuild ends with waldamage_discard (docs/metadata.md, "A
 * damaged metadata log").
 *
 * Failure modes: a crash before the move leaves the damaged log in place:
 * the next start finds the same damage and marks again (idempotent). A
 * crash after it leaves a new empty log and every mark durable: no replica
 * that had state comes back as an empty voter (which could elect a leader
 * lacking acknowledged entries). Marks are never removed but by a rebuild,
 * or with their replica's directory.
 *
 * Context: node start and the loop thread; every function blocks on file
 * I/O (small: a few renames and fsyncs per replica). */
#ifndef CAIRN_WALDAMAGE_H
#define CAIRN_WALDAMAGE_H

#include <stdbool.h>
#include <stddef.h>

/* In a replica directory: its Raft state was in a damaged node-wide log. */
#define WALDAMAGE_MARK "raft.refused"
/* In the data directory: a damaged node-wide log set aside. */
#define WALDAMAGE_PREFIX "wal.damaged-"
#define WALDAMAGE_KEEP 3
/* In a replica directory: Raft state moved aside by a rebuild. */
#define WALDAMAGE_DISCARDED_PREFIX "raft.damaged-"

/* Marks every replica directory under <data_dir>/partitions with why
 * (one that holds a mark already keeps its own), then moves <data_dir>/wal
 * aside, durably, and prunes older wal.damaged-* beyond WALDAMAGE_KEEP.
 * moved (len bytes) gets the new path of the log; *marked how many
 * replicas hold a mark now. Returns 0 or -errno; on failure errmsg (errlen
 * bytes) says which step and file, and the log is still in place when any
 * mark failed. Ownership: borrows every argument. */
__attribute__((warn_unused_result)) int waldamage_set_aside(const char *data_dir, const char *why,
                                                            char *moved, size_t len,
                                                            unsigned *marked, char *errmsg,
                                                            size_t errlen);

/* The metadata group's log (<meta>/wal, its own: docs/metadata.md) damaged:
 * marks dir (<data>/meta) itself with why, unless it holds a mark
 * already, durably, then moves dir/wal to dir/wal.damaged-<seconds>[-<k>]
 * as waldamage_set_aside does. moved (len bytes) gets the new path.
 * Returns 0 or -errno, errmsg (errlen bytes) saying which step and file;
 * the log is still in place when the mark failed. Ownership: borrows
 * every argument. */
__attribute__((warn_unused_result)) int waldamage_set_aside_log(const char *dir, const char *why,
                                                                char *moved, size_t len,
                                                                char *errmsg, size_t errlen);

/* Writes the mark into dir with why (one line), durably, unless dir holds
 * one already (kept: it names the first damage). Returns 0 or -errno with
 * errmsg (errlen bytes) naming the file. */
__attribute__((warn_unused_result)) int waldamage_mark(const char *dir, const char *why,
                                                       char *errmsg, size_t errlen);

/* Does dir hold Raft state moved aside by a rebuild (a
 * WALDAMAGE_DISCARDED_PREFIX entry)? Then its replica joins, never
 * bootstraps: an empty log there is a discarded one. */
bool waldamage_was_rebuilt(const char *dir);

/* Makes dir/raft.damaged-<seconds>[-<k>] (its path into moved, len bytes)
 * and moves dir's Raft state and last its mark into it
 * (waldamage_move_state), durably. Returns 0 or -errno; a failure before
 * the mark moved leaves dir refused. */
__attribute__((warn_unused_result)) int waldamage_discard(const char *dir, char *moved, size_t len);

/* Does replica dir hold the mark? reason (may be NULL; len bytes) gets its
 * text. */
bool waldamage_marked(const char *dir, char *reason, size_t len);

/* Rebuild of replica dir, whose leader removed it from its group: moves
 * its Raft state (wal-snapshots/, raft/, when present) into moved (an
 * existing empty directory), makes that durable, then moves the mark into
 * it and makes that durable. Returns 0 or -errno. */
__attribute__((warn_unused_result)) int waldamage_move_state(const char *dir, const char *moved);

/* Removes the oldest entries of dir named <prefix><seconds>[-<k>] beyond
 * keep (by their number). Each removal is logged at info level. */
void waldamage_prune(const char *dir, const char *prefix, unsigned keep);

#endif
