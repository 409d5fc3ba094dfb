/* rgroup_wal.c - a partition replica's Raft over the node-wide log
 * (--raft-log node): points the storage methods of the replica's raft_uv
 * io at cluster/raft_io_wal.c (riow_uv.h), keyed by the replica's group id,
 * before rgroup_raft.c wraps them with its interposers; refuses a replica
 * whose Raft state is in raft_uv's files. */
#include "cluster/rgroup_raft.h"
#include "cluster/waldamage.h"
#include "common/err.h"

#include <limits.h>
#include <stdbool.h>
#include <sys/stat.h>
#include <stddef.h>
#include <stdio.h>

/* raft_uv's term-and-vote files exist once a replica ran with
 * --raft-log group: its Raft state is there, not in the node's log. */
static bool rgroup_wal_has_uv_state(const struct rgroup *rg)
{
  static const char *const names[] = {"metadata1", "metadata2"};
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
    char path[PATH_MAX];
    struct stat st;
    snprintf(path, sizeof path, "%.4000s/raft/%s", rg->dir, names[i]);
    if (stat(path, &st) == 0) {
      return true;
    }
  }
  return false;
}

int rgroup_wal_check_mark(struct rgroup *rg)
{
  char why[320];
  if (rg->opts.wal == NULL || !waldamage_marked(rg->dir, why, sizeof why)) {
    return 0;
  }
  snprintf(rg->errmsg, sizeof rg->errmsg,
           "group %llu: replica %llu stays closed: its Raft state was in the node's Raft log, "
           "found damaged and set aside: %s",
           (unsigned long long)rg->group_id, (unsigned long long)rg->self_id, why);
  return CAIRN_ERAFTFILES;
}

/* ---- --raft-mux: the replica's Raft messages over the node's
 * multiplexer (raftmux.h) instead of raft_uv's connections ---- */

static struct rgroup *rgroup_wal_of(struct raft_io *io)
{
  return (struct rgroup *)((char *)io - offsetof(struct rgroup, wio.io));
}

static int rgroup_wal_mux_send(struct raft_io *io, struct raft_io_send *req,
                               const struct raft_message *m, raft_io_send_cb cb)
{
  return raftmux_io_send(&rgroup_wal_of(io)->mxg, req, m, cb);
}

static int rgroup_wal_mux_start(struct raft_io *io, unsigned msecs, raft_io_tick_cb tick,
                                raft_io_recv_cb recv)
{
  return raftmux_io_start(&rgroup_wal_of(io)->mxg, msecs, tick, recv);
}

static void rgroup_wal_mux_close(struct raft_io *io, raft_io_close_cb cb)
{
  raftmux_io_close(&rgroup_wal_of(io)->mxg, cb);
}

/* After riow_uv_attach, so that a close first waits for the group's sends
 * (raftmux), then for its requests in the log (riow_uv), then closes
 * raft_uv. Raft never calls raft_uv's own send: no per-group connection
 * is dialed. raft_uv still listens, so a peer without --raft-mux reaches
 * this replica as before. */
static int rgroup_wal_mux_attach(struct rgroup *rg)
{
  int rv = raftmux_attach(rg->opts.mux, &rg->mxg, &rg->wio.io, rg->group_id, rg->self_id,
                          rg->self_address);
  if (rv != 0) {
    snprintf(rg->errmsg, sizeof rg->errmsg, "group %llu: multiplexed Raft messages: %s",
             (unsigned long long)rg->group_id, cairn_strerror(rv));
    return rv;
  }
  rg->wio.io.send = rgroup_wal_mux_send;
  rg->wio.io.start = rgroup_wal_mux_start;
  rg->wio.io.close = rgroup_wal_mux_close;
  return 0;
}

void rgroup_wal_detach(struct rgroup *rg)
{
  if (rg->opts.wal != NULL && rg->opts.mux != NULL) {
    raftmux_detach(&rg->mxg);
  }
}

int rgroup_wal_attach(struct rgroup *rg)
{
  if (rgroup_wal_has_uv_state(rg)) {
    snprintf(rg->errmsg, sizeof rg->errmsg,
             "group %llu: %.200s/raft holds raft_uv's log (written with --raft-log group): "
             "switching --raft-log on existing data is not supported",
             (unsigned long long)rg->group_id, rg->dir);
    return CAIRN_ECONFIG;
  }
  char dir[PATH_MAX];
  if (snprintf(dir, sizeof dir, "%s/wal-snapshots", rg->dir) >= (int)sizeof dir) {
    return CAIRN_EINVAL;
  }
  int rv = riow_uv_attach(&rg->wio, rg->loop, rg->opts.wal, rg->group_id, dir);
  if (rv != 0) {
    snprintf(rg->errmsg, sizeof rg->errmsg, "group %llu: %.200s: %s",
             (unsigned long long)rg->group_id, dir, cairn_strerror(rv));
    return rv;
  }
  return rg->opts.mux != NULL ? rgroup_wal_mux_attach(rg) : 0;
}
