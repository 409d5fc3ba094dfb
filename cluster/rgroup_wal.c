/* rgroup_wal.c - a partition replica's Raft over the node-wide log
 * (--raft-log node): with --raft-mux on, the replica's own raft_io
 * (riow_mux.h: the node's log and multiplexer, no raft_uv); without it,
 * points the storage methods of the replica's raft_uv io at
 * cluster/raft_io_wal.c (riow_uv.h). Either keyed by the replica's group
 * id, before rgroup_raft.c wraps the io with its interposers; refuses a
 * replica whose Raft state is in raft_uv's files. */
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
  rgroup_set_errmsg(
      rg,
      "group %llu: replica %llu stays closed: its Raft state was in the node's Raft log, "
      "found damaged and set aside: %s",
      (unsigned long long)rg->group_id, (unsigned long long)rg->self_id, why);
  return CAIRN_ERAFTFILES;
}

/* Refuses a replica whose Raft state is raft_uv's; fills dir with the
 * replica's snapshot directory. */
static int rgroup_wal_prepare(struct rgroup *rg, char *dir, size_t len)
{
  if (rgroup_wal_has_uv_state(rg)) {
    rgroup_set_errmsg(
        rg,
        "group %llu: %.200s/raft holds raft_uv's log (written with --raft-log group): "
        "switching --raft-log on existing data is not supported",
        (unsigned long long)rg->group_id, rg->dir);
    return CAIRN_ECONFIG;
  }
  if (snprintf(dir, len, "%s/wal-snapshots", rg->dir) >= (int)len) {
    rgroup_set_errmsg(rg, "group %llu: %.200s: path too long", (unsigned long long)rg->group_id,
                      rg->dir);
    return CAIRN_EINVAL;
  }
  return 0;
}

bool rgroup_wal_own_io(const struct rgroup *rg)
{
  return rg->opts.wal != NULL && rg->opts.mux != NULL;
}

bool rgroup_wal_meta_pending(const struct rgroup *rg)
{
  return rgroup_wal_own_io(rg) && (rg->raft_open || rg->raft_closing) &&
         riow_mux_meta_pending(&rg->wio.mux);
}

/* A term or vote record of the replica failed to become durable (the log
 * is fatal): raft holds a term or vote the disk may not, so the replica
 * closes and reopens from disk, as after any failed write. */
static void rgroup_wal_on_meta_failed(struct riow_mux *m, int status)
{
  (void)status;
  struct rgroup *rg = (struct rgroup *)((char *)m - offsetof(struct rgroup, wio.mux));
  if (!rg->raft_closing) { /* closing anyway: a reopen starts from disk */
    rgroup_raft_fail(rg, RAFT_IOERR, "persisting the Raft term or vote");
  }
}

/* --raft-mux on: the replica's own raft_io (riow_mux.h); the node's
 * listener routes the group's catch-up fetches by rg->fetch_route. No
 * raft_uv: no directory probe, AIO context, transport or connection. */
int rgroup_wal_own_io_init(struct rgroup *rg)
{
  char dir[PATH_MAX];
  int rv = rgroup_wal_prepare(rg, dir, sizeof dir);
  if (rv != 0) {
    return rv;
  }
  rv = riow_mux_init(&rg->wio.mux, rg->loop, rg->opts.wal, rg->group_id, dir, rg->opts.mux,
                     rg->self_id, rg->self_address, NULL);
  if (rv != 0) {
    rgroup_set_errmsg(rg, "group %llu: the replica's Raft I/O (%.200s): %s",
                      (unsigned long long)rg->group_id, dir, cairn_strerror(rv));
    return rv;
  }
  riow_mux_on_failed(&rg->wio.mux, rgroup_wal_on_meta_failed);
  riow_mux_set_group_commit(&rg->wio.mux, rg->opts.meta_group_commit);
  return 0;
}

int rgroup_wal_attach(struct rgroup *rg)
{
  char dir[PATH_MAX];
  int rv = rgroup_wal_prepare(rg, dir, sizeof dir);
  if (rv != 0) {
    return rv;
  }
  rv = riow_uv_attach(&rg->wio.uv, rg->loop, rg->opts.wal, rg->group_id, dir);
  if (rv != 0) {
    rgroup_set_errmsg(rg, "group %llu: %.200s: %s", (unsigned long long)rg->group_id, dir,
                      cairn_strerror(rv));
  }
  return rv;
}
