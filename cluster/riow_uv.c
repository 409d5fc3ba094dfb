/* riow_uv.c - the raft_io trampolines from a raft_uv io into the node-wide
 * log's storage methods (riow_uv.h). */
#include "cluster/riow_uv.h"

#include "common/fsutil.h"

#include <stddef.h>

static struct riow_uv *riow_uv_of(struct raft_io *io)
{
  return (struct riow_uv *)((char *)io - offsetof(struct riow_uv, io));
}

static int riow_uv_load(struct raft_io *io, raft_term *term, raft_id *vote,
                        struct raft_snapshot **s, raft_index *start, struct raft_entry **es,
                        size_t *n)
{
  return riow_load(&riow_uv_of(io)->riow, term, vote, s, start, es, n);
}

static int riow_uv_bootstrap(struct raft_io *io, const struct raft_configuration *c)
{
  return riow_bootstrap(&riow_uv_of(io)->riow, c);
}

static int riow_uv_recover(struct raft_io *io, const struct raft_configuration *c)
{
  return riow_recover(&riow_uv_of(io)->riow, c);
}

static int riow_uv_set_term(struct raft_io *io, raft_term term)
{
  return riow_set_term(&riow_uv_of(io)->riow, term);
}

static int riow_uv_set_vote(struct raft_io *io, raft_id id)
{
  return riow_set_vote(&riow_uv_of(io)->riow, id);
}

static int riow_uv_append(struct raft_io *io, struct raft_io_append *req,
                          const struct raft_entry es[], unsigned n, raft_io_append_cb cb)
{
  return riow_append(&riow_uv_of(io)->riow, req, es, n, cb);
}

static int riow_uv_truncate(struct raft_io *io, raft_index index)
{
  return riow_truncate(&riow_uv_of(io)->riow, index);
}

static int riow_uv_snapshot_put(struct raft_io *io, unsigned trailing,
                                struct raft_io_snapshot_put *req, const struct raft_snapshot *s,
                                raft_io_snapshot_put_cb cb)
{
  return riow_snapshot_put(&riow_uv_of(io)->riow, trailing, req, s, cb);
}

static int riow_uv_snapshot_get(struct raft_io *io, struct raft_io_snapshot_get *req,
                                raft_io_snapshot_get_cb cb)
{
  return riow_snapshot_get(&riow_uv_of(io)->riow, req, cb);
}

/* raft_uv closes once every request of the group in the log has called
 * back: raft may be freed after its close callback. */
static void riow_uv_on_idle(struct riow *x)
{
  struct riow_uv *u = x->close_data;
  u->uv_close(&u->io, u->close_cb);
}

static void riow_uv_close(struct raft_io *io, raft_io_close_cb cb)
{
  struct riow_uv *u = riow_uv_of(io);
  u->close_cb = cb;
  riow_close(&u->riow, riow_uv_on_idle, u);
}

int riow_uv_attach(struct riow_uv *u, uv_loop_t *loop, struct wal *w, uint64_t gid,
                   const char *snap_dir)
{
  int rv = fs_mkdir_p(snap_dir);
  if (rv == 0) {
    rv = riow_init(&u->riow, loop, w, gid, snap_dir, u->io.errmsg);
  }
  if (rv != 0) {
    return rv;
  }
  u->uv_close = u->io.close;
  u->io.close = riow_uv_close;
  u->io.load = riow_uv_load;
  u->io.bootstrap = riow_uv_bootstrap;
  u->io.recover = riow_uv_recover;
  u->io.set_term = riow_uv_set_term;
  u->io.set_vote = riow_uv_set_vote;
  u->io.append = riow_uv_append;
  u->io.truncate = riow_uv_truncate;
  u->io.snapshot_put = riow_uv_snapshot_put;
  u->io.snapshot_get = riow_uv_snapshot_get;
  return 0;
}
