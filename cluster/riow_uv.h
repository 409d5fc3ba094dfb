/* riow_uv.h - a raft_uv io whose storage methods go to the node-wide log:
 * the one set of raft_io trampolines into raft_io_wal.h, shared by every
 * Raft group that runs on the node's log (the partitions' replicas,
 * cluster/rgroup_wal.c, and the metadata group, cluster/controller.c).
 *
 * The owner embeds a struct riow_uv, raft_uv_init's its io (raft_uv keeps
 * the network, the timers and randomness), calls riow_uv_attach, wraps
 * whatever methods it interposes on top, and hands &u->io to raft_init.
 * The trampolines find the riow from the io they are called with, so the
 * io must stay inside its struct riow_uv.
 *
 * Close: raft's close of the io (raft_close) first waits for every request
 * of the group in the log to call back (riow_close), then closes raft_uv;
 * raft's close callback therefore fires only once nothing of the group is
 * pending in the log. The owner still calls raft_uv_close from it.
 *
 * Context: the loop thread. */
#ifndef CAIRN_RIOW_UV_H
#define CAIRN_RIOW_UV_H

#include "cluster/raft_io_wal.h"

#include <raft.h>
#include <stdint.h>
#include <uv.h>

struct riow_uv {
  struct raft_io io; /* raft_uv's, with the storage methods replaced */
  struct riow riow;
  /* private */
  void (*uv_close)(struct raft_io *io, raft_io_close_cb cb);
  raft_io_close_cb close_cb;
};

/* Points u->io's storage methods (load, bootstrap, recover, set_term,
 * set_vote, append, truncate, snapshot_put, snapshot_get) at group gid of
 * w, and its close behind the group's pending requests. u->io must have
 * been raft_uv_init'ed, with no method replaced yet. snap_dir (created if
 * missing) holds the group's snapshot files. Ownership: borrows w (must
 * outlive the io) and snap_dir (copied: riow_release(&u->riow) frees it
 * if raft_init then fails; raft's close frees it otherwise). Returns 0,
 * CAIRN_EINVAL (snap_dir too long), CAIRN_ENOMEM or the error of creating
 * snap_dir; on failure u->io is unchanged. */
__attribute__((warn_unused_result)) int riow_uv_attach(struct riow_uv *u, uv_loop_t *loop,
                                                       struct wal *w, uint64_t gid,
                                                       const char *snap_dir);

#endif
