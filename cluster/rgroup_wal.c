/* rgroup_wal.c - a partition replica's Raft over the node-wide log
 * (--raft-log node): points the storage methods of the replica's raft_uv
 * io at cluster/raft_io_wal.c, keyed by the replica's group id, before
 * rgroup_raft.c wraps them with its interposers. raft_uv keeps the network,
 * the timers and randomness. */
#include "cluster/raft_io_wal.h"
#include "cluster/rgroup_raft.h"
#include "cluster/waldamage.h"
#include "common/err.h"
#include "common/fsutil.h"

#include <limits.h>
#include <stdbool.h>
#include <sys/stat.h>
#include <stddef.h>
#include <stdio.h>

static struct riow *rgroup_wal_of(struct raft_io *io)
{
  return &((struct rgroup *)((char *)io - offsetof(struct rgroup, io)))->riow;
}

static int rgroup_wal_load(struct raft_io *io, raft_term *term, raft_id *vote,
                           struct raft_snapshot **s, raft_index *start, struct raft_entry **es,
                           size_t *n)
{
  return riow_load(rgroup_wal_of(io), term, vote, s, start, es, n);
}

static int rgroup_wal_bootstrap(struct raft_io *io, const struct raft_configuration *c)
{
  return riow_bootstrap(rgroup_wal_of(io), c);
}

static int rgroup_wal_recover(struct raft_io *io, const struct raft_configuration *c)
{
  return riow_recover(rgroup_wal_of(io), c);
}

static int rgroup_wal_set_term(struct raft_io *io, raft_term term)
{
  return riow_set_term(rgroup_wal_of(io), term);
}

static int rgroup_wal_set_vote(struct raft_io *io, raft_id id)
{
  return riow_set_vote(rgroup_wal_of(io), id);
}

static int rgroup_wal_append(struct raft_io *io, struct raft_io_append *req,
                             const struct raft_entry es[], unsigned n, raft_io_append_cb cb)
{
  return riow_append(rgroup_wal_of(io), req, es, n, cb);
}

static int rgroup_wal_truncate(struct raft_io *io, raft_index index)
{
  return riow_truncate(rgroup_wal_of(io), index);
}

static int rgroup_wal_snapshot_put(struct raft_io *io, unsigned trailing,
                                   struct raft_io_snapshot_put *req, const struct raft_snapshot *s,
                                   raft_io_snapshot_put_cb cb)
{
  return riow_snapshot_put(rgroup_wal_of(io), trailing, req, s, cb);
}

static int rgroup_wal_snapshot_get(struct raft_io *io, struct raft_io_snapshot_get *req,
                                   raft_io_snapshot_get_cb cb)
{
  return riow_snapshot_get(rgroup_wal_of(io), req, cb);
}

/* raft_uv closes once every wal request of this replica has called back:
 * raft may be freed after its close callback. */
static void rgroup_wal_on_idle(struct riow *x)
{
  struct rgroup *rg = x->close_data;
  rg->wal_uv_close(&rg->io, rg->wal_close_cb);
}

static void rgroup_wal_close(struct raft_io *io, raft_io_close_cb cb)
{
  struct rgroup *rg = (struct rgroup *)((char *)io - offsetof(struct rgroup, io));
  rg->wal_close_cb = cb;
  riow_close(&rg->riow, rgroup_wal_on_idle, rg);
}

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
  int rv = fs_mkdir_p(dir);
  if (rv == 0) {
    rv = riow_init(&rg->riow, rg->loop, rg->opts.wal, rg->group_id, dir, rg->io.errmsg);
  }
  if (rv != 0) {
    snprintf(rg->errmsg, sizeof rg->errmsg, "group %llu: %.200s: %s",
             (unsigned long long)rg->group_id, dir, cairn_strerror(rv));
    return rv;
  }
  rg->wal_uv_close = rg->io.close;
  rg->io.close = rgroup_wal_close;
  rg->io.load = rgroup_wal_load;
  rg->io.bootstrap = rgroup_wal_bootstrap;
  rg->io.recover = rgroup_wal_recover;
  rg->io.set_term = rgroup_wal_set_term;
  rg->io.set_vote = rgroup_wal_set_vote;
  rg->io.append = rgroup_wal_append;
  rg->io.truncate = rgroup_wal_truncate;
  rg->io.snapshot_put = rgroup_wal_snapshot_put;
  rg->io.snapshot_get = rgroup_wal_snapshot_get;
  return 0;
}
