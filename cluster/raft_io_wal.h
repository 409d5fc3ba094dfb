/* raft_io_wal.h - canonical/raft 0.15's storage methods of struct raft_io
 * (load, bootstrap, recover, set_term, set_vote, append, truncate,
 * snapshot_put, snapshot_get) over the node-wide log (cluster/wal.h), one
 * Raft group per wal group id. The network, timer and random methods stay
 * raft_uv's: the owner keeps a raft_uv io and points its storage methods
 * at small trampolines that call these (cluster/rgroup_raft.c does).
 *
 * Snapshots: the log holds a group's snapshot index and term; the data and
 * configuration go to one file per snapshot in the group's directory,
 * snap-TTTTTTTTTTTTTTTT-IIIIIIIIIIIIIIII (term, index; 16 hex digits),
 * written to a temporary file, fsynced and renamed (fs_replace_file) on the
 * thread pool before the log records the snapshot; older files are
 * removed by the next snapshot_put once the log no longer names them.
 * Layout: 8 magic "CAIRNSNP", u32 version 1, u32 CRC-32C of everything
 * after these 16 bytes, u64 index, u64 term, u64 configuration index, u64
 * configuration length C; C bytes of the configuration in raft's encoding
 * (raft_configuration_encode); then the data.
 *
 * Contracts are raft 0.15's (raft.h, struct raft_io): append and
 * snapshot_put/get call back exactly once if they returned 0; bootstrap
 * and recover are durable when they return (a blocking wal_flush_sync, as
 * raft_uv's metadata write is), and so are set_term and set_vote unless
 * the owner chose group commit for them (riow_set_meta_async).
 *
 * Term and vote by group commit (riow_set_meta_async; riow_mux.h uses it):
 * set_term and set_vote queue their record in the log and return 0 at
 * once; the record becomes durable with the next write job, together with
 * every other group's records, and on_meta(x, status) fires from the loop
 * when it is (status 0) or when its write failed (the log is then fatal,
 * status the error) or the log closed (CAIRN_ECLOSED). So raft 0.15's
 * "durable on return" no longer holds, and the owner must make up for it:
 * nothing that reveals the term or vote may leave the node before on_meta
 * reported it durable (riow_mux holds the group's sends; docs/replication.md,
 * "Term and vote by group commit", has the argument). Entries appended
 * after the record are after it in the log, so durable only after it.
 * x->meta_pending counts the records in flight; riow_close waits for
 * them like for any request. Close: riow_close waits for every request to
 * call back before the io close it wraps.
 *
 * Context: the loop thread; file work runs on the thread pool. */
#ifndef CAIRN_RAFT_IO_WAL_H
#define CAIRN_RAFT_IO_WAL_H

#include "cluster/wal.h"

#include <limits.h>
#include <raft.h>
#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

#define RIOW_SNAP_VERSION 1
#define RIOW_SNAP_HEADER 48
#define RIOW_MAX_SNAPSHOT_BYTES ((size_t)1 << 30)

struct riow {
  uv_loop_t *loop;
  struct wal *w; /* borrowed: the node's log outlives every group */
  uint64_t gid;
  char *dir;             /* snapshot files; owned (riow_release) */
  char *errmsg;          /* the raft_io's errmsg (RAFT_ERRMSG_BUF_SIZE) */
  unsigned pending;      /* requests that have not called back */
  unsigned meta_pending; /* of which term/vote records (group-commit mode) */
  /* Group-commit mode for set_term/set_vote (NULL: blocking flush). */
  void (*on_meta)(struct riow *x, int status);
  bool closing;
  void (*on_idle)(struct riow *x); /* set by riow_close */
  void *close_data;
};

/* Sets up x for group gid of w, its snapshot files in dir. errmsg: the
 * raft_io's buffer. Ownership: borrows w (must outlive x) and dir (copied
 * to the heap: riow_close frees it, or riow_release for an x never
 * closed). Returns 0, CAIRN_EINVAL (dir too long) or CAIRN_ENOMEM. */
__attribute__((warn_unused_result)) int riow_init(struct riow *x, uv_loop_t *loop, struct wal *w,
                                                  uint64_t gid, const char *dir, char *errmsg);

/* Makes set_term and set_vote of x group-committed: they return once the
 * record is queued, and on_meta fires (from the loop, exactly once per
 * record queued) when it is durable (status 0) or when it failed (the
 * error; the log is fatal) or the log closed (CAIRN_ECLOSED). Call before
 * the io is used. The caller must hold back whatever reveals the term or
 * vote until then (above). */
void riow_set_meta_async(struct riow *x, void (*on_meta)(struct riow *x, int status));

/* The storage methods: raft_io's, with x for io. Return 0 or a RAFT_*
 * code. */
int riow_load(struct riow *x, raft_term *term, raft_id *voted_for, struct raft_snapshot **snapshot,
              raft_index *start_index, struct raft_entry *entries[], size_t *n_entries);
int riow_bootstrap(struct riow *x, const struct raft_configuration *conf);
int riow_recover(struct riow *x, const struct raft_configuration *conf);
int riow_set_term(struct riow *x, raft_term term);
int riow_set_vote(struct riow *x, raft_id server_id);
int riow_append(struct riow *x, struct raft_io_append *req, const struct raft_entry entries[],
                unsigned n, raft_io_append_cb cb);
int riow_truncate(struct riow *x, raft_index index);
int riow_snapshot_put(struct riow *x, unsigned trailing, struct raft_io_snapshot_put *req,
                      const struct raft_snapshot *snapshot, raft_io_snapshot_put_cb cb);
int riow_snapshot_get(struct riow *x, struct raft_io_snapshot_get *req, raft_io_snapshot_get_cb cb);

/* Calls on_idle (once, from the loop or at once) when no request of x is
 * pending any more, after freeing what riow_init allocated; no new request
 * may start. */
void riow_close(struct riow *x, void (*on_idle)(struct riow *x), void *data);

/* Frees what riow_init allocated, for an x whose io raft never closed
 * (raft_init failed). Idempotent. */
void riow_release(struct riow *x);

#endif
