/* partitions.c - the partition replicas this node hosts, reconciled with
 * the metadata. See partitions.h. */
#include "cluster/partitions.h"

#include "cluster/waldamage.h"

#include "common/err.h"
#include "common/fsutil.h"
#include "common/log.h"
#include "common/wallclock.h"
#include "storage/pgstore.h"
#include "storage/store.h"

#include <dirent.h>
#include <errno.h>
#include <stddef.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* The replica dirs already here, made durable by one syncfs: their first
 * opens trust the disk (parts_synced.h). A failure only costs time: every
 * open then syncs its own files. */
static void parts_find_synced(struct parts *ps)
{
  int rv = psync_begin(&ps->found, ps->root);
  if (rv != 0) {
    log_warn("parts",
             "%s: listing the replicas and syncfs: %s (each replica's recovery syncs "
             "its own files)",
             ps->root, cairn_strerror(rv));
    return;
  }
  if (ps->found.n > 0) {
    log_info("parts", "%s: %zu replica directories made durable by one syncfs in %.1f ms", ps->root,
             ps->found.n, ps->found.syncfs_ms);
  }
}

int parts_init(struct parts *ps, uv_loop_t *loop, struct transport *tr, uint64_t self_id,
               const char *data_dir, const struct rgroup_opts *opts)
{
  memset(ps, 0, sizeof *ps);
  ps->loop = loop;
  ps->tr = tr;
  ps->self_id = self_id;
  ps->step_due = true;
  if (opts != NULL) {
    ps->opts = *opts;
  }
  size_t len = strlen(data_dir) + sizeof PARTS_DIRNAME + 2;
  ps->root = malloc(len);
  if (ps->root == NULL) {
    return CAIRN_ENOMEM;
  }
  snprintf(ps->root, len, "%s/%s", data_dir, PARTS_DIRNAME);
  int rv = fs_mkdir_p(ps->root);
  if (rv == 0) {
    parts_find_synced(ps);
    rv = gstart_init(&ps->gs, loop, 0);
  }
  if (rv == 0) {
    rv = rgroup_ticker_init(&ps->ticker, loop); /* cannot fail: libuv's timer init */
    ps->ticker.data = ps;
    ps->opts.ticker = &ps->ticker;
    vouch_init(&ps->vouch, uv_hrtime() ^ ((uint64_t)getpid() << 32) ^ self_id);
    ps->opts.vouch = &ps->vouch;
    rgroup_compact_gate_init(&ps->compact_gate, uv_now(loop));
    ps->opts.compact_gate = &ps->compact_gate;
    rgroup_mem_init(&ps->mem, ps->opts.raft_log_node_budget);
    ps->opts.mem = &ps->mem;
  }
  if (rv != 0) {
    psync_free(&ps->found);
    free(ps->root);
    ps->root = NULL;
  }
  return rv;
}

/* ---- the sorted table ---- */

static size_t parts_lower_bound(const struct parts *ps, uint64_t group_id)
{
  size_t lo = 0, hi = ps->n;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (ps->ids[mid] < group_id) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  return lo;
}

struct part *parts_get(struct parts *ps, uint64_t group_id)
{
  size_t i = parts_lower_bound(ps, group_id);
  return i < ps->n && ps->ids[i] == group_id ? ps->v[i] : NULL;
}

struct part *parts_get_next(struct parts *ps, uint64_t group_id, size_t *hint)
{
  /* A few slots on from the last one found: no search (and none of its
   * cache misses) for a list in group order, in which the groups this node
   * hosts but the list does not name (led by another node) lie between. */
  for (size_t i = *hint; i < ps->n && i < *hint + 8; i++) {
    uint64_t id = ps->ids[i];
    if (id == group_id) {
      *hint = i;
      return ps->v[i];
    }
    if (id > group_id) {
      break;
    }
  }
  size_t i = parts_lower_bound(ps, group_id);
  if (i < ps->n && ps->ids[i] == group_id) {
    *hint = i;
    return ps->v[i];
  }
  return NULL;
}

struct part *parts_find(struct parts *ps, uint32_t topic_id, uint32_t partition)
{
  struct part *p = parts_get(ps, meta_group_id(topic_id, partition));
  return p != NULL && p->state == PART_OPEN ? p : NULL;
}

void parts_node_gone(struct parts *ps, uint64_t node_id)
{
  if (ps->closing) {
    return;
  }
  for (size_t i = 0; i < ps->n; i++) {
    if (ps->v[i]->state == PART_OPEN) {
      rgroup_leader_gone(&ps->v[i]->rg, node_id);
    }
  }
}

static int parts_insert(struct parts *ps, struct part *p)
{
  if (ps->n == ps->cap) {
    size_t cap = ps->cap ? ps->cap * 2 : 16;
    struct part **nv = realloc(ps->v, cap * sizeof *nv);
    if (nv == NULL) {
      return CAIRN_ENOMEM;
    }
    ps->v = nv;
    uint64_t *ni = realloc(ps->ids, cap * sizeof *ni);
    if (ni == NULL) {
      return CAIRN_ENOMEM; /* v is merely larger than needed */
    }
    ps->ids = ni;
    ps->cap = cap;
  }
  size_t i = parts_lower_bound(ps, p->group_id);
  memmove(&ps->v[i + 1], &ps->v[i], (ps->n - i) * sizeof *ps->v);
  memmove(&ps->ids[i + 1], &ps->ids[i], (ps->n - i) * sizeof *ps->ids);
  ps->v[i] = p;
  ps->ids[i] = p->group_id;
  ps->n++;
  ps->gen++;
  return 0;
}

static void parts_remove(struct parts *ps, struct part *p)
{
  size_t i = parts_lower_bound(ps, p->group_id);
  if (i < ps->n && ps->v[i] == p) {
    memmove(&ps->v[i], &ps->v[i + 1], (ps->n - i - 1) * sizeof *ps->v);
    memmove(&ps->ids[i], &ps->ids[i + 1], (ps->n - i - 1) * sizeof *ps->ids);
    ps->n--;
    ps->gen++;
  }
}

/* ---- open ---- */

static void parts_dir_name(char *buf, size_t len, const char *root, const char *topic,
                           uint32_t partition, uint32_t topic_id)
{
  snprintf(buf, len, "%s/%s-%" PRIu32 ".%" PRIu32, root, topic, partition, topic_id);
}

/* ---- refused replicas (partitions.h: refused, removed, rebuilt) ---- */

#define PARTS_DISCARDED_PREFIX "raft.damaged-"

static struct part_damaged *parts_damaged_find(struct parts *ps, uint64_t group_id)
{
  for (size_t i = 0; i < ps->ndamaged; i++) {
    if (ps->damaged[i].group_id == group_id) {
      return &ps->damaged[i];
    }
  }
  return NULL;
}

const struct part_damaged *parts_find_damaged(struct parts *ps, uint32_t topic_id,
                                              uint32_t partition)
{
  return parts_damaged_find(ps, meta_group_id(topic_id, partition));
}

static void parts_damaged_drop(struct parts *ps, uint64_t group_id)
{
  struct part_damaged *d = parts_damaged_find(ps, group_id);
  if (d != NULL) {
    *d = ps->damaged[--ps->ndamaged];
  }
}

/* Records a refusal of a's replica. The first one since this process
 * started names the incident (since_ms); a retried open that is refused
 * again keeps it, so the leader's confirmation still matches. */
static void parts_damaged_note(struct parts *ps, const struct meta_assignment *a,
                               const char *reason)
{
  struct part_damaged *d = parts_damaged_find(ps, a->group_id);
  if (d == NULL) {
    if (ps->ndamaged == PARTS_DAMAGED_MAX) {
      return; /* not reported: stays refused, as before rebuilds existed */
    }
    if (ps->ndamaged == ps->damaged_cap) {
      size_t cap = ps->damaged_cap ? ps->damaged_cap * 2 : 4;
      struct part_damaged *nd = realloc(ps->damaged, cap * sizeof *nd);
      if (nd == NULL) {
        return; /* the next refused open tries again */
      }
      ps->damaged = nd;
      ps->damaged_cap = cap;
    }
    d = &ps->damaged[ps->ndamaged++];
    d->group_id = a->group_id;
    d->topic_id = a->topic_id;
    d->partition = a->partition;
    int64_t now = wallclock_ms();
    d->since_ms = now > 0 ? (uint64_t)now : 1;
  }
  size_t len = strnlen(reason, sizeof d->reason - 1); /* cut, as store_faults.h does */
  memcpy(d->reason, reason, len);
  d->reason[len] = '\0';
}

/* Does dir hold Raft files moved aside by a rebuild? Then its replica
 * joins, never bootstraps: an empty Raft dir there is a discarded log, and
 * bootstrapping would make the replica a voter with none of its entries. */
static bool parts_dir_was_rebuilt(const char *dir)
{
  return fs_dir_has_prefix(dir, PARTS_DISCARDED_PREFIX);
}

/* Moves a refused replica's Raft state aside, to dir/raft.damaged-<seconds>
 * [-<k>] (a second rebuild within the same second takes the next k), and
 * makes that durable. raft_uv's (--raft-log group): dir/raft is renamed.
 * The node-wide log's (wal set): the directory is made, and the snapshot
 * files and last the mark that refused the replica (waldamage.h) move
 * into it: a crash before the mark moves leaves the replica refused. */
static int parts_discard_raft(const char *dir, bool wal, char *moved, size_t len)
{
  char from[PATH_MAX];
  if (snprintf(from, sizeof from, "%s/raft", dir) >= (int)sizeof from) {
    return CAIRN_EINVAL;
  }
  long long secs = (long long)(wallclock_ms() / 1000);
  int rv = -EEXIST;
  for (int k = 0; k < 10 && (rv == -EEXIST || rv == -ENOTEMPTY); k++) {
    int w = k == 0 ? snprintf(moved, len, "%s/" PARTS_DISCARDED_PREFIX "%lld", dir, secs)
                   : snprintf(moved, len, "%s/" PARTS_DISCARDED_PREFIX "%lld-%d", dir, secs, k);
    if (w < 0 || (size_t)w >= len) {
      return CAIRN_EINVAL;
    }
    /* rename() onto an empty directory would succeed: refuse any existing name. */
    struct stat sb;
    if (stat(moved, &sb) == 0) {
      rv = -EEXIST;
      continue;
    }
    if (wal) {
      rv = mkdir(moved, 0755) == 0 ? 0 : -errno;
    } else {
      rv = rename(from, moved) == 0 ? 0 : -errno;
    }
  }
  if (rv == 0 && wal) {
    return waldamage_move_state(dir, moved);
  }
  if (rv == 0) {
    rv = fs_fsync_dir(dir);
  }
  return rv;
}

int parts_rebuild(struct parts *ps, uint32_t topic_id, uint32_t partition, uint64_t since_ms)
{
  uint64_t gid = meta_group_id(topic_id, partition);
  struct part_damaged *d = parts_damaged_find(ps, gid);
  const struct meta_topic *t = ps->st != NULL ? meta_topic_find_id(ps->st, topic_id) : NULL;
  if (ps->closing || d == NULL || d->since_ms != since_ms || parts_get(ps, gid) != NULL ||
      t == NULL) {
    return 0;
  }
  char dir[PATH_MAX];
  parts_dir_name(dir, sizeof dir, ps->root, t->name, partition, topic_id);
  /* Records in the node-wide log go first: a crash before the rename then
   * leaves the files refused again (a new refusal, the same path). */
  int rv = ps->opts.wal != NULL ? wal_remove(ps->opts.wal, NULL, gid, NULL) : 0;
  if (rv == CAIRN_ENOTFOUND) {
    rv = 0;
  }
  char moved[PATH_MAX];
  if (rv == 0) {
    rv = parts_discard_raft(dir, ps->opts.wal != NULL, moved, sizeof moved);
  }
  if (rv != 0) {
    log_error("parts", "%s-%u: rebuilding the replica: moving its Raft files aside: %s", t->name,
              partition, cairn_strerror(rv));
    return rv;
  }
  log_warn("parts",
           "%s-%u: the group's leader removed this replica from its configuration: its damaged "
           "Raft files are in %s; the replica rejoins empty and is caught up from its peers",
           t->name, partition, moved);
  ps->rebuilds++;
  waldamage_prune(dir, PARTS_DISCARDED_PREFIX, PARTS_DAMAGED_KEEP);
  parts_damaged_drop(ps, gid);
  parts_reconcile(ps, ps->st, ps->synced);
  return 0;
}

/* The replica set to open the group with, with each node's cluster
 * address: the initial replicas for a node that bootstraps, the current
 * target for one that joins. Returns the count, 0 if an address is unknown. */
static unsigned parts_replica_set(const struct meta_state *st, const struct meta_partition *mp,
                                  bool bootstraps, struct rgroup_replica *out)
{
  const uint64_t *ids = bootstraps ? mp->initial_replicas : mp->replicas;
  unsigned n = bootstraps ? mp->ninitial : mp->nreplicas;
  for (unsigned i = 0; i < n; i++) {
    const struct meta_node *nd = meta_node_find(st, ids[i]);
    if (nd == NULL || nd->cluster_addr[0] == '\0') {
      return 0;
    }
    out[i].id = ids[i];
    out[i].address = nd->cluster_addr;
  }
  return n;
}

/* A hosted replica leads a new term: its membership may need a step, and
 * the owner may want to know. */
static void parts_on_leading(struct rgroup *rg)
{
  struct part *p = rg->owner_data;
  p->owner->step_due = true;
  if (p->owner->on_leading != NULL) {
    p->owner->on_leading(rg);
  }
}

/* The options of topic t's replica a (topic: its name, borrowed). */
static void parts_replica_opts(const struct parts *ps, const struct meta_topic *t,
                               const struct meta_assignment *a, const char *topic,
                               struct rgroup_opts *o)
{
  *o = ps->opts;
  if (t->config.segment_bytes != 0) {
    o->plog.segment_bytes = t->config.segment_bytes;
  }
  if (t->config.max_batch_bytes != 0) {
    o->plog.max_batch_bytes = (uint32_t)t->config.max_batch_bytes;
  }
  o->plog.retention_bytes = t->config.retention_bytes;
  o->plog.retention_ms = (int64_t)t->config.retention_ms;
  o->storage = t->config.storage;
  o->topic = topic;
  o->topic_id = t->id;
  o->partition = (int32_t)a->partition;
}

/* Frees p and what it owns (NULL: nothing). Its rgroup is closed or was
 * never opened. */
static void parts_free(struct part *p)
{
  if (p == NULL) {
    return;
  }
  rgroup_release(&p->rg);
  free(p->topic);
  free(p->dir);
  free(p);
}

/* A replica whose open failed once its Raft was up (rgroup_open) has
 * closed. It never entered ps. */
static void parts_on_open_failed_closed(struct rgroup *rg)
{
  struct part *p = (struct part *)((char *)rg - offsetof(struct part, rg));
  parts_free(p);
}

/* Opens replica a. pg_begun: its pgstore, connected off the loop;
 * plog_begun: its partition log, opened off the loop (NULL: none; both
 * taken in any case). */
static void parts_open_one(struct parts *ps, const struct meta_state *st,
                           const struct meta_assignment *a, struct store *pg_begun,
                           struct store *plog_begun)
{
  const struct meta_topic *t = meta_topic_find_id(st, a->topic_id);
  const struct meta_partition *mp = meta_partition_find(st, a->topic_id, a->partition);
  struct rgroup_replica reps[META_MAX_REPLICAS];
  unsigned n = t != NULL && mp != NULL ? parts_replica_set(st, mp, a->bootstraps, reps) : 0;
  if (t != NULL && mp != NULL && n == 0) {
    log_warn("parts", "%s-%u: a replica's address is unknown yet", t->name, a->partition);
  }
  struct part *p = n > 0 ? calloc(1, sizeof *p) : NULL;
  char dir[PATH_MAX];
  if (p != NULL) {
    parts_dir_name(dir, sizeof dir, ps->root, t->name, a->partition, t->id);
  }
  if (p == NULL || (p->dir = strdup(dir)) == NULL || (p->topic = strdup(t->name)) == NULL) {
    parts_free(p);
    pgstore_open_abandon(pg_begun);
    if (plog_begun != NULL) {
      store_close(plog_begun);
    }
    return;
  }
  p->owner = ps;
  p->group_id = a->group_id;
  p->topic_id = a->topic_id;
  p->partition = a->partition;
  struct rgroup_opts o;
  parts_replica_opts(ps, t, a, p->topic, &o);
  o.plog.disk_synced = plog_begun == NULL && psync_take(&ps->found, dir);
  o.join = !a->bootstraps || parts_dir_was_rebuilt(dir);
  o.pg_begun = pg_begun;
  o.plog_begun = plog_begun; /* rgroup_open takes both */
  int rv = rgroup_open(&p->rg, ps->loop, ps->tr, p->group_id, ps->self_id, dir, reps, n, &o);
  if (rv != 0) {
    bool damaged = rv == CAIRN_ERAFTFILES;
    /* The only replica has no peer to be rebuilt from: its log may hold
     * acknowledged entries only it has, so it stays refused (an operator
     * restores the files or recreates the topic). */
    bool alone = damaged && mp->nreplicas == 1 && mp->replicas[0] == ps->self_id;
    log_error("parts", "%s-%u: %s%s", t->name, a->partition, rgroup_errmsg(&p->rg),
              alone     ? " (it is the partition's only replica: it stays refused, as nothing can "
                          "rebuild it; restore its Raft state or recreate the topic)"
              : damaged ? " (the replica is rebuilt from its peers once the partition's leader has "
                          "removed it from the group)"
                        : "");
    if (damaged) {
      parts_damaged_note(ps, a, rgroup_errmsg(&p->rg));
    }
    if (p->rg.state == RGROUP_CLOSING) {
      /* Raft was up when the open failed: p goes once it has closed. */
      p->rg.close_cb = parts_on_open_failed_closed;
      return;
    }
    parts_free(p);
    return;
  }
  parts_damaged_drop(ps, a->group_id); /* files restored by an operator */
  p->rg.owner_data = p;
  p->rg.on_applied = ps->on_applied;
  p->rg.on_leading = parts_on_leading;
  if (parts_insert(ps, p) != 0) {
    p->state = PART_CLOSING;
    p->owner->gen++;
    rgroup_close(&p->rg, NULL); /* leaks p on this out-of-memory path only */
    return;
  }
  log_info("parts", "%s-%u: replica open (%s)", t->name, a->partition,
           o.join ? "joining" : "bootstrapped");
}

/* ---- queued opens ---- */

/* Fibonacci hashing: group ids of one topic differ in their low bits. */
static size_t parts_open_bucket(uint64_t group_id)
{
  return (size_t)((group_id * 0x9E3779B97F4A7C15ull) >> 52) & (PARTS_OPEN_BUCKETS - 1);
}

static bool parts_is_opening(const struct parts *ps, uint64_t group_id)
{
  for (const struct part_open *o = ps->opening[parts_open_bucket(group_id)]; o != NULL;
       o = o->next) {
    if (o->a.group_id == group_id) {
      return true;
    }
  }
  return false;
}

static void parts_unqueue(struct parts *ps, struct part_open *o)
{
  for (struct part_open **pp = &ps->opening[parts_open_bucket(o->a.group_id)]; *pp != NULL;
       pp = &(*pp)->next) {
    if (*pp == o) {
      *pp = o->next;
      return;
    }
  }
}

/* Does the latest state still assign replica a here, not yet open? */
static bool parts_still_wanted(struct parts *ps, const struct meta_assignment *a)
{
  const struct meta_partition *mp =
      !ps->closing ? meta_partition_find(ps->st, a->topic_id, a->partition) : NULL;
  return mp != NULL && meta_replicas_contain(mp->replicas, mp->nreplicas, ps->self_id) &&
         parts_get(ps, a->group_id) == NULL;
}

static void parts_release(struct parts *ps);

/* On the thread pool: the database half of a postgresql replica's open,
 * or a partition log's open (its recovery's syncs included). */
static void parts_pg_work(uv_work_t *w)
{
  struct part_open *o = w->data;
  if (o->plog) {
    o->pg_rv =
        rgroup_plog_begin(o->plog_dir, &o->pg_opts, &o->pg_store, o->pg_err, sizeof o->pg_err);
  } else {
    o->pg_rv = rgroup_pgstore_begin(&o->pg_opts, &o->pg_store, o->pg_err, sizeof o->pg_err);
  }
  if (o->pg_rv != 0) {
    o->pg_store = NULL;
  }
}

/* Frees what an off-loop open made, when no replica takes it. */
static void parts_begun_abandon(struct part_open *o)
{
  if (o->plog) {
    if (o->pg_store != NULL) {
      store_close(o->pg_store);
    }
  } else {
    pgstore_open_abandon(o->pg_store);
  }
  o->pg_store = NULL;
}

/* Back on the loop: finishes the open if the replica is still wanted. */
static void parts_pg_done(uv_work_t *w, int status)
{
  struct part_open *o = w->data;
  struct parts *ps = o->ps;
  ps->pg_opening--;
  ps->plog_opening -= o->plog ? 1 : 0;
  parts_unqueue(ps, o);
  if (status == 0 && o->pg_rv == 0 && parts_still_wanted(ps, &o->a)) {
    struct store *s = o->pg_store;
    o->pg_store = NULL;
    parts_open_one(ps, ps->st, &o->a, o->plog ? NULL : s, o->plog ? s : NULL);
  } else {
    if (o->pg_rv != 0 && !ps->closing) {
      log_error("parts", "%s-%u: %s", o->pg_topic, o->a.partition, o->pg_err);
    }
    parts_begun_abandon(o);
  }
  free(o->plog_dir);
  free(o);
  if (ps->closing && --ps->closing_count == 0) {
    parts_release(ps);
  }
}

/* A postgresql replica on a node with a database: starts its database
 * half on the thread pool. A partition-log replica, while fewer than
 * PARTS_LOG_OPENS_OFF_LOOP are under way: opens its log there (a
 * recovery's syncs no longer stall the loop, and several overlap). o stays
 * queued until parts_pg_done. Returns whether it did. */
static bool parts_pg_begin(struct parts *ps, struct part_open *o)
{
  const struct meta_topic *t = meta_topic_find_id(ps->st, o->a.topic_id);
  if (t == NULL) {
    return false;
  }
  if (t->config.storage == STORE_KIND_POSTGRESQL) {
    if (ps->opts.pg_conninfo == NULL || ps->opts.pg_conninfo[0] == '\0') {
      return false;
    }
  } else {
    char dir[PATH_MAX];
    if (ps->plog_opening >= PARTS_LOG_OPENS_OFF_LOOP) {
      return false;
    }
    parts_dir_name(dir, sizeof dir, ps->root, t->name, o->a.partition, t->id);
    if ((o->plog_dir = strdup(dir)) == NULL) {
      return false;
    }
    o->plog = true;
  }
  snprintf(o->pg_topic, sizeof o->pg_topic, "%s", t->name);
  parts_replica_opts(ps, t, &o->a, o->pg_topic, &o->pg_opts);
  o->pg_opts.plog.disk_synced = o->plog && psync_take(&ps->found, o->plog_dir);
  o->pg_store = NULL;
  o->pg_work.data = o;
  if (uv_queue_work(ps->loop, &o->pg_work, parts_pg_work, parts_pg_done) != 0) {
    free(o->plog_dir);
    o->plog_dir = NULL;
    o->plog = false;
    return false;
  }
  ps->pg_opening++;
  ps->plog_opening += o->plog ? 1 : 0;
  return true;
}

/* Its turn: opens the replica if the latest state still assigns it here. */
static void parts_on_open_turn(struct gstart_job *job, int status)
{
  struct part_open *o = job->data;
  struct parts *ps = o->ps;
  if (status == 0 && parts_still_wanted(ps, &o->a)) {
    if (parts_pg_begin(ps, o)) {
      return;
    }
    parts_unqueue(ps, o);
    parts_open_one(ps, ps->st, &o->a, NULL, NULL);
  } else {
    parts_unqueue(ps, o);
  }
  free(o);
}

static void parts_queue_open(struct parts *ps, const struct meta_assignment *a)
{
  if (parts_is_opening(ps, a->group_id)) {
    return;
  }
  struct part_open *o = calloc(1, sizeof *o);
  if (o == NULL) {
    return; /* the next reconcile tries again */
  }
  o->ps = ps;
  o->a = *a;
  o->job.data = o;
  if (gstart_push(&ps->gs, &o->job, parts_on_open_turn) != 0) {
    free(o);
    return;
  }
  size_t b = parts_open_bucket(a->group_id);
  o->next = ps->opening[b];
  ps->opening[b] = o;
}

/* ---- close ---- */

static void parts_release(struct parts *ps);
static bool parts_close_next(struct parts *ps);
static void parts_close_queued_next(struct parts *ps);

static void parts_on_closed(struct rgroup *rg)
{
  struct part *p = rg->owner_data;
  struct parts *ps = p->owner;
  if (p->remove_data) {
    if (ps->opts.wal != NULL && wal_remove(ps->opts.wal, NULL, p->group_id, NULL) != 0) {
      log_warn("parts", "%s-%u: the node's Raft log keeps its records: %s", p->topic, p->partition,
               wal_errmsg(ps->opts.wal));
    }
    int rv = rgroup_delete(p->dir);
    if (rv != 0) {
      log_error("parts", "%s-%u: removing %s: %s", p->topic, p->partition, p->dir,
                cairn_strerror(rv));
    } else {
      log_info("parts", "%s-%u: replica removed", p->topic, p->partition);
    }
  }
  parts_remove(ps, p);
  parts_free(p);
  if (ps->closing) {
    parts_close_next(ps);
    if (--ps->closing_count == 0) {
      parts_release(ps);
    }
    return;
  }
  ps->reconcile_closing = false; /* outside a node stop, the one in flight */
  parts_close_queued_next(ps);
}

/* Starts the next queued close unless one is under way: replicas the
 * metadata drops (a deleted topic's, one moved away) shut down one at a
 * time, as at node stop (parts_close_all), since canonical/raft 0.15
 * crashes when several instances close at once. */
static void parts_close_queued_next(struct parts *ps)
{
  if (ps->closing || ps->reconcile_closing) {
    return;
  }
  for (size_t i = 0; i < ps->n; i++) {
    struct part *p = ps->v[i];
    if (p->close_queued) {
      p->close_queued = false;
      ps->reconcile_closing = true;
      /* Hand leadership to a peer first, so producers see no gap. */
      rgroup_shutdown(&p->rg, parts_on_closed);
      return;
    }
  }
}

static void parts_close_one(struct part *p, bool remove_data)
{
  if (p->state != PART_OPEN) {
    return;
  }
  p->state = PART_CLOSING;
  p->owner->gen++;
  p->remove_data = remove_data;
  p->close_queued = true;
  parts_close_queued_next(p->owner);
}

/* ---- reconcile ---- */

/* as is sorted by group id (parts_sort_assignments): a binary search, as a
 * node with 10,000 replicas asks once per replica at every reconcile. */
static bool parts_assigned(const struct meta_assignment *as, size_t n, uint64_t group_id)
{
  size_t lo = 0, hi = n;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (as[mid].group_id < group_id) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  return lo < n && as[lo].group_id == group_id;
}

static int parts_cmp_assignment(const void *x, const void *y)
{
  uint64_t a = ((const struct meta_assignment *)x)->group_id;
  uint64_t b = ((const struct meta_assignment *)y)->group_id;
  return a < b ? -1 : a > b;
}

/* meta_node_assignments lists topics by id, so group ids ascend already;
 * sorted here all the same (one pass when they do) since parts_assigned
 * depends on it. */
static void parts_sort_assignments(struct meta_assignment *as, size_t n)
{
  for (size_t i = 1; i < n; i++) {
    if (as[i - 1].group_id >= as[i].group_id) {
      qsort(as, n, sizeof *as, parts_cmp_assignment);
      return;
    }
  }
}

/* A topic id below next_topic_id that the state no longer has was
 * deleted: such data can go whatever the state's age. */
static bool parts_topic_deleted(const struct meta_state *st, uint32_t topic_id)
{
  return topic_id < st->next_topic_id && meta_topic_find_id(st, topic_id) == NULL;
}

/* Directories of partitions not open: left from before a restart. Removed
 * when their topic was deleted, or when the state is current and does not
 * assign them here. */
static void parts_sweep_dirs(struct parts *ps, const struct meta_state *st,
                             const struct meta_assignment *as, size_t n, bool synced)
{
  DIR *d = opendir(ps->root);
  if (d == NULL) {
    return;
  }
  struct dirent *de;
  while ((de = readdir(d)) != NULL) {
    const char *dot = strrchr(de->d_name, '.');
    const char *dash = strrchr(de->d_name, '-');
    if (de->d_name[0] == '.' || dot == NULL || dash == NULL || dash > dot) {
      continue;
    }
    char *end = NULL;
    unsigned long tid = strtoul(dot + 1, &end, 10);
    unsigned long part = strtoul(dash + 1, NULL, 10);
    if (*end != '\0' || tid == 0 || tid > UINT32_MAX || part >= META_MAX_PARTITIONS) {
      continue;
    }
    uint64_t gid = meta_group_id((uint32_t)tid, (uint32_t)part);
    /* Not one being opened either: its log may be recovering on the
     * thread pool right now (parts_pg_begin). */
    if (parts_get(ps, gid) != NULL || parts_assigned(as, n, gid) || parts_is_opening(ps, gid)) {
      continue;
    }
    bool deleted = parts_topic_deleted(st, (uint32_t)tid);
    if (!deleted && !(synced && (uint32_t)tid < st->next_topic_id)) {
      continue;
    }
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/%s", ps->root, de->d_name);
    int rv = fs_remove_tree(path);
    int wrv = ps->opts.wal != NULL ? wal_remove(ps->opts.wal, NULL, gid, NULL) : 0;
    if (wrv != 0 && wrv != CAIRN_ENOTFOUND) {
      log_warn("parts", "%s: the node's Raft log keeps its records: %s", path, cairn_strerror(wrv));
    }
    log_info("parts", "removed %s (%s)%s%s", path, deleted ? "topic deleted" : "not assigned",
             rv != 0 ? ": " : "", rv != 0 ? cairn_strerror(rv) : "");
  }
  closedir(d);
}

void parts_reconcile(struct parts *ps, const struct meta_state *st, bool synced)
{
  if (ps->closing || st->cluster_id[0] == '\0') {
    return;
  }
  struct meta_assignment *as = NULL;
  size_t n = 0;
  if (meta_node_assignments(st, ps->self_id, &as, &n) != 0) {
    return;
  }
  parts_sort_assignments(as, n);
  /* Close what is no longer assigned (iterate over a snapshot of the table:
   * closing removes entries later, never now). */
  for (size_t i = 0; i < ps->n; i++) {
    struct part *p = ps->v[i];
    if (p->state == PART_OPEN && !parts_assigned(as, n, p->group_id)) {
      bool deleted = parts_topic_deleted(st, p->topic_id);
      if (deleted || synced) {
        parts_close_one(p, true);
      }
    }
  }
  ps->st = st;
  for (size_t i = 0; i < ps->ndamaged;) {
    if (parts_assigned(as, n, ps->damaged[i].group_id)) {
      i++;
    } else {
      parts_damaged_drop(ps, ps->damaged[i].group_id); /* moved away or deleted */
    }
  }
  for (size_t i = 0; i < n; i++) {
    struct part *p = parts_get(ps, as[i].group_id);
    if (p == NULL) {
      parts_queue_open(ps, &as[i]);
      continue;
    }
    const struct meta_partition *mp = meta_partition_find(st, as[i].topic_id, as[i].partition);
    if (p->state == PART_OPEN && mp != NULL && mp->nreplicas > 0) {
      rgroup_set_preferred(&p->rg, mp->replicas[0]);
    }
  }
  if (synced && !ps->synced) {
    parts_sweep_dirs(ps, st, as, n, synced);
  }
  ps->synced = synced;
  free(as);
}

/* ---- membership (leader side) ---- */

static void parts_on_change_done(struct raft_change *req, int status);

static bool parts_is_voter(const struct raft_configuration *c, uint64_t id)
{
  for (unsigned i = 0; i < c->n; i++) {
    if (c->servers[i].id == id) {
      return c->servers[i].role == RAFT_VOTER;
    }
  }
  return false;
}

static bool parts_in_conf(const struct raft_configuration *c, uint64_t id)
{
  for (unsigned i = 0; i < c->n; i++) {
    if (c->servers[i].id == id) {
      return true;
    }
  }
  return false;
}

/* One change towards the target: first bring in what is missing (a spare
 * is added, then assigned the voter role, which raft grants only once it
 * has caught up), then remove what is no longer listed. */
static void parts_step_one(struct part *p, const struct meta_state *st,
                           const struct meta_partition *mp, const struct sfault_table *faults)
{
  struct raft *r = &p->rg.raft;
  const struct raft_configuration *c = &r->configuration;
  int rv = 0;
  const char *what = NULL;
  uint64_t who = 0;
  /* A replica whose Raft files were refused goes first: it must be out of
   * the configuration before its node may discard them (partitions.h). */
  for (unsigned i = 0; i < c->n && what == NULL; i++) {
    who = c->servers[i].id;
    if (who != p->rg.self_id && sfault_raft_damaged(faults, who, p->topic_id, p->partition)) {
      what = "remove damaged";
      raftfix_conf_keep_now(&p->rg.conf_kept, r); /* before a change of its own */
      rv = raft_remove(r, &p->change, who, parts_on_change_done);
    }
  }
  for (uint32_t i = 0; i < mp->nreplicas && what == NULL; i++) {
    who = mp->replicas[i];
    if (parts_is_voter(c, who) || sfault_raft_damaged(faults, who, p->topic_id, p->partition)) {
      continue;
    }
    const struct meta_node *nd = meta_node_find(st, who);
    if (nd == NULL) {
      return;
    }
    if (!parts_in_conf(c, who)) {
      what = "add";
      raftfix_conf_keep_now(&p->rg.conf_kept, r);
      rv = raft_add(r, &p->change, who, nd->cluster_addr, parts_on_change_done);
    } else {
      what = "promote";
      raftfix_conf_keep_now(&p->rg.conf_kept, r);
      rv = raft_assign(r, &p->change, who, RAFT_VOTER, parts_on_change_done);
    }
  }
  for (unsigned i = 0; i < c->n && what == NULL; i++) {
    who = c->servers[i].id;
    if (!meta_replicas_contain(mp->replicas, mp->nreplicas, who) && who != p->rg.self_id) {
      what = "remove";
      raftfix_conf_keep_now(&p->rg.conf_kept, r); /* before a change of its own */
      rv = raft_remove(r, &p->change, who, parts_on_change_done);
    }
  }
  if (what == NULL) {
    return;
  }
  if (rv != 0) {
    log_warn("parts", "%s-%u: %s replica %llu: %s", p->topic, p->partition, what,
             (unsigned long long)who, raft_errmsg(r));
    p->owner->step_due = true; /* try again at the next tick */
    return;
  }
  p->changing = true;
  if (strcmp(what, "remove damaged") == 0) {
    log_warn("parts",
             "%s-%u: remove damaged replica %llu (its Raft files were refused; it is "
             "added back once its node has discarded them)",
             p->topic, p->partition, (unsigned long long)who);
    return;
  }
  log_info("parts", "%s-%u: %s replica %llu", p->topic, p->partition, what,
           (unsigned long long)who);
}

static void parts_on_change_done(struct raft_change *req, int status)
{
  struct part *p = req->data;
  p->changing = false;
  p->owner->step_due = true; /* the next step, or a retry */
  if (status != 0) {
    log_warn("parts", "%s-%u: membership change: %s", p->topic, p->partition,
             raft_strerror(status));
  } else {
    log_info("parts", "%s-%u: membership change done", p->topic, p->partition);
  }
}

void parts_faults_changed(struct parts *ps, const struct sfault_table *faults)
{
  bool damaged = false;
  for (size_t i = 0; i < faults->n && !damaged; i++) {
    damaged = faults->v[i].raft_damaged;
  }
  if (damaged || ps->faults_damaged) {
    ps->step_due = true;
  }
  ps->faults_damaged = damaged;
}

bool parts_replica_out(struct parts *ps, uint32_t topic_id, uint32_t partition, uint64_t node_id)
{
  struct part *p = parts_find(ps, topic_id, partition);
  if (p == NULL || !rgroup_is_leader(&p->rg)) {
    return false;
  }
  const struct raft *r = &p->rg.raft;
  /* raft applies a configuration when it is appended: with a change
   * pending, the current one may still be lost with a leader change. */
  return r->configuration_index != 0 && r->configuration_uncommitted_index == 0 &&
         !parts_in_conf(&r->configuration, node_id);
}

void parts_mem_tick(struct parts *ps)
{
  uint64_t bytes = 0;
  for (size_t i = 0; i < ps->n; i++) {
    bytes += rgroup_mem_bytes(&ps->v[i]->rg);
  }
  rgroup_mem_update(&ps->mem, bytes);
}

void parts_step_membership(struct parts *ps, const struct meta_state *st,
                           const struct sfault_table *faults)
{
  uint64_t now = uv_now(ps->loop);
  if (!ps->step_due && st->last_index == ps->step_index &&
      now - ps->step_last_ms < PARTS_STEP_SWEEP_MS) {
    return;
  }
  ps->step_due = false;
  ps->step_index = st->last_index;
  ps->step_last_ms = now;
  ps->step_walks++;
  for (size_t i = 0; i < ps->n; i++) {
    struct part *p = ps->v[i];
    if (p->state != PART_OPEN || p->changing || !rgroup_is_leader(&p->rg)) {
      continue;
    }
    const struct meta_partition *mp = meta_partition_find(st, p->topic_id, p->partition);
    if (mp == NULL) {
      continue;
    }
    p->change.data = p;
    parts_step_one(p, st, mp, faults);
  }
}

/* ---- shutdown ---- */

static void parts_on_ticker_closed(struct rgroup_ticker *t)
{
  struct parts *ps = t->data;
  if (ps->close_cb != NULL) {
    ps->close_cb(ps);
  }
}

/* Every replica is closed: the ticker goes last. */
static void parts_release(struct parts *ps)
{
  /* The replicas closed unflushed (rgroup_handoff marked them stopping). */
  double ms;
  int rv = ps->root != NULL ? psync_end(ps->root, &ms) : 0;
  if (rv != 0) {
    log_warn("parts",
             "%s: syncfs at stop: %s (each replica's Raft log holds what its partition "
             "log had not flushed)",
             ps->root, cairn_strerror(rv));
  } else if (ps->root != NULL) {
    log_info("parts", "%s: replica logs made durable by one syncfs in %.1f ms", ps->root, ms);
  }
  free(ps->v);
  ps->v = NULL;
  free(ps->ids);
  ps->ids = NULL;
  vouch_free(&ps->vouch);
  free(ps->damaged);
  ps->damaged = NULL;
  ps->ndamaged = ps->damaged_cap = 0;
  psync_free(&ps->found);
  free(ps->root);
  ps->root = NULL;
  rgroup_ticker_close(&ps->ticker, parts_on_ticker_closed);
}

static void parts_on_gstart_closed(struct gstart *gs)
{
  struct parts *ps = (struct parts *)((char *)gs - offsetof(struct parts, gs));
  if (--ps->closing_count == 0) {
    parts_release(ps);
  }
}

/* Shuts down the next open replica, if any (one at a time: see
 * parts_close). Returns whether one was started. */
static bool parts_close_next(struct parts *ps)
{
  for (size_t i = 0; i < ps->n; i++) {
    struct part *p = ps->v[i];
    if (p->state == PART_OPEN) {
      p->state = PART_CLOSING;
      p->owner->gen++;
      ps->closing_count++;
      rgroup_shutdown(&p->rg, parts_on_closed);
      return true;
    }
  }
  return false;
}

/* The closes proper, one replica at a time: canonical/raft 0.15 crashes
 * when many of its instances close at once (a segment writer's poll handle
 * is closed after its memory was freed: SIGTERM of a node with 4 or more
 * partitions holding data failed every time; one at a time never did).
 * Each close is quick once leadership is handed off. */
static void parts_close_all(struct parts *ps)
{
  /* Parts already closing count too: they call parts_on_closed. */
  for (size_t i = 0; i < ps->n; i++) {
    if (ps->v[i]->state == PART_CLOSING) {
      ps->closing_count++;
    }
  }
  parts_close_next(ps);
  if (--ps->closing_count == 0) {
    parts_release(ps);
  }
}

static void parts_on_handoff_closed(uv_handle_t *h)
{
  parts_close_all(h->data);
}

/* Waits for the leadership transfers started by parts_close to end (or
 * for the deadline), then closes. */
static void parts_on_handoff_tick(uv_timer_t *t)
{
  struct parts *ps = t->data;
  bool busy = false;
  for (size_t i = 0; i < ps->n && !busy; i++) {
    busy = ps->v[i]->state == PART_OPEN && rgroup_handing_off(&ps->v[i]->rg);
  }
  if (busy && uv_now(ps->loop) < ps->handoff_deadline) {
    return;
  }
  uv_timer_stop(t);
  uv_close((uv_handle_t *)t, parts_on_handoff_closed);
}

void parts_close(struct parts *ps, parts_close_cb cb)
{
  ps->closing = true;
  ps->close_cb = cb;
  /* Replicas still waiting for their turn to close go back to the stop's
   * own sequence (their data is still removed once closed). */
  for (size_t i = 0; i < ps->n; i++) {
    if (ps->v[i]->close_queued) {
      ps->v[i]->close_queued = false;
      ps->v[i]->state = PART_OPEN;
      ps->gen++;
    }
  }
  /* Held until every close has started; the starter counts as one part
   * (queued opens end with CAIRN_ESHUTDOWN and are freed). */
  ps->closing_count = 2 + ps->pg_opening; /* each connecting replica: parts_pg_done */
  gstart_close(&ps->gs, parts_on_gstart_closed);
  /* Every leadership is handed off at once (producers see a new leader,
   * not a gap), then the replicas close one by one. */
  for (size_t i = 0; i < ps->n; i++) {
    if (ps->v[i]->state == PART_OPEN && rgroup_handoff(&ps->v[i]->rg) != 0) {
      log_warn("parts", "%s-%u: handing off leadership failed", ps->v[i]->topic,
               ps->v[i]->partition);
    }
  }
  uv_timer_init(ps->loop, &ps->handoff_timer);
  ps->handoff_timer.data = ps;
  ps->handoff_deadline = uv_now(ps->loop) + PARTS_HANDOFF_MAX_MS;
  uv_timer_start(&ps->handoff_timer, parts_on_handoff_tick, 0, 20);
}

uint32_t parts_retention(struct parts *ps, const struct meta_state *st, int64_t now_ms)
{
  uint32_t total = 0;
  for (size_t i = 0; i < ps->n; i++) {
    struct part *p = ps->v[i];
    uint32_t deleted = 0;
    if (p->state != PART_OPEN) {
      continue;
    }
    const struct meta_topic *t = meta_topic_find_id(st, p->topic_id);
    if (t != NULL) {
      rgroup_set_retention(&p->rg, t->config.retention_bytes, (int64_t)t->config.retention_ms);
    }
    if (rgroup_retention(&p->rg, now_ms, &deleted) == 0) {
      total += deleted;
    }
  }
  return total;
}
