/* rgroup.c - a partition replica's lifecycle and its produce path with
 * group commit (rgroup.h). The state machine is in rgroup_fsm.c. */
#include "cluster/rgroup.h"
#include "cluster/rgroup_cmd.h"

#include "cluster/raft_err.h"
#include "cluster/rgroup_fsm.h"
#include "cluster/rgroup_compact.h"
#include "cluster/rgroup_pace.h"
#include "cluster/rgroup_raft.h"
#include "common/err.h"
#include "common/fsutil.h"
#include "common/log.h"
#include "common/wallclock.h"
#include "format/batch.h"
#include "storage/pgstore.h"

#include <assert.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void rgroup_set_errmsg(struct rgroup *rg, const char *fmt, ...)
{
  if (rg->errmsg == NULL) {
    rg->errmsg = malloc(RGROUP_ERRMSG_SIZE);
    if (rg->errmsg == NULL) {
      return;
    }
  }
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(rg->errmsg, RGROUP_ERRMSG_SIZE, fmt, ap);
  va_end(ap);
}

const char *rgroup_errmsg(const struct rgroup *rg)
{
  return rg->errmsg != NULL ? rg->errmsg : "";
}

void rgroup_release(struct rgroup *rg)
{
  free(rg->errmsg);
  rg->errmsg = NULL;
  free(rg->probation_reason);
  rg->probation_reason = NULL;
}

static const char *rgroup_state_name(enum rgroup_state st)
{
  static const char *const names[] = {
#define RGROUP_STATE_NAME(name, text) text,
      RGROUP_STATE_TABLE(RGROUP_STATE_NAME)
#undef RGROUP_STATE_NAME
  };
  return (unsigned)st < sizeof names / sizeof names[0] ? names[st] : "?";
}

/* Is from -> to a transition of the lifecycle in rgroup.h? */
static bool rgroup_state_allowed(enum rgroup_state from, enum rgroup_state to)
{
  switch (to) {
  case RGROUP_RUNNING:
    return from == RGROUP_OPENING || from == RGROUP_RECOVERING;
  case RGROUP_TRANSFERRING:
  case RGROUP_RECOVERING:
    return from == RGROUP_RUNNING;
  case RGROUP_CLOSING:
    return from != RGROUP_CLOSING && from != RGROUP_CLOSED;
  case RGROUP_CLOSED:
    return from == RGROUP_CLOSING;
  default:
    return false;
  }
}

void rgroup_set_state(struct rgroup *rg, enum rgroup_state to)
{
  if (!rgroup_state_allowed(rg->state, to)) {
    /* A bug: loud in every build, fatal where assertions are on. */
    log_error("rgroup", "group %llu: transition %s -> %s is not in the lifecycle",
              (unsigned long long)rg->group_id, rgroup_state_name(rg->state),
              rgroup_state_name(to));
    assert(false);
  }
  log_debug("rgroup", "group %llu: replica %llu: %s -> %s", (unsigned long long)rg->group_id,
            (unsigned long long)rg->self_id, rgroup_state_name(rg->state), rgroup_state_name(to));
  rg->state = to;
}

static void rgroup_opts_fill(struct rgroup_opts *o, const struct rgroup_opts *in)
{
  if (in != NULL) {
    *o = *in;
  } else {
    memset(o, 0, sizeof *o);
    plog_opts_default(&o->plog);
  }
  /* etcd's 100/1000: a paused or cut-off leader is replaced within 1-2 s
   * (writes acknowledged again within 2 s: docs/fault-tolerance.md). An idle
   * group's leader slows its heartbeat to 400 ms (rgroup_pace.h); before
   * idle groups did, 100 ms cost a node 20-27 % of a core at 1,000 groups
   * (docs/replication.md, per-group cost). */
  if (o->heartbeat_ms == 0) o->heartbeat_ms = 100;
  if (o->election_ms == 0) o->election_ms = 1000;
  if (o->snapshot_threshold == 0) o->snapshot_threshold = 1024;
  if (o->snapshot_trailing == 0) o->snapshot_trailing = 128;
  /* raft keeps 3 open segments per group (disk: 3 MiB a group) and pays one
   * io_destroy (~35 ms here, on the loop thread) per full segment, so a node
   * appends at most segment/35 ms of Raft log: smaller costs throughput,
   * larger costs disk (docs/replication.md, per-group cost). */
  if (o->raft_segment_size == 0) o->raft_segment_size = 1u << 20;
  if (o->max_entry_bytes == 0) o->max_entry_bytes = RGROUP_DEFAULT_MAX_ENTRY_BYTES;
  if (o->raft_log_budget == 0) o->raft_log_budget = RGROUP_DEFAULT_RAFT_LOG_BUDGET;
}

/* A replica of a topic stored in PostgreSQL: its rows in the node's
 * database (pgstore.h); the Raft log stays in <dir>/raft. */
/* The node's writer failed a transaction holding this replica's rows:
 * the store latched fatal; Raft closes and the store is revived. */
static void rgroup_on_pgstore_fatal(void *arg)
{
  rgroup_raft_store_down(arg);
}

/* The store's reader fetched rows a read or lookup waited for: the
 * owner's waiting fetches ask again, as after an append. */
static void rgroup_on_pgstore_readable(void *arg)
{
  struct rgroup *rg = arg;
  if (rg->on_applied != NULL) {
    rg->on_applied(rg);
  }
}

/* The store committed up to what a checkpoint's flush asked for. */
static void rgroup_on_pgstore_durable(void *arg)
{
  rgroup_fsm_producers_durable(arg);
}

/* pgstore's options for o; rg (NULL off the loop) receives its callbacks. */
static void rgroup_pgstore_opts(struct rgroup *rg, const struct rgroup_opts *o,
                                struct pgstore_opts *po)
{
  *po = (struct pgstore_opts){
      .conninfo = o->pg_conninfo,
      .password_file = o->pg_password_file != NULL && o->pg_password_file[0] != '\0'
                           ? o->pg_password_file
                           : NULL,
      .topic = o->topic,
      .topic_id = o->topic_id,
      .partition = o->partition,
      .retention_bytes = o->plog.retention_bytes,
      .retention_ms = o->plog.retention_ms,
      .max_batch_bytes = o->plog.max_batch_bytes,
  };
  if (rg == NULL) {
    return;
  }
  /* Written behind by the node's writer for this database: one
   * transaction per loop turn for every partition's applied entries
   * (pgwriter.h); a failed one revives the store. */
  po->loop = rg->loop;
  po->on_fatal = rgroup_on_pgstore_fatal;
  po->on_fatal_arg = rg;
  /* Reads below the store's tail, lookups and retention run off the
   * loop (pgreader.h); their end wakes the fetches waiting. */
  po->on_readable = rgroup_on_pgstore_readable;
  po->on_readable_arg = rg;
  /* A checkpoint's flush is never waited for on the loop: the table
   * is written when the writer's commit reaches it. */
  po->on_durable = rgroup_on_pgstore_durable;
  po->on_durable_arg = rg;
}

static int rgroup_pgstore_refuse(const struct rgroup_opts *o, char *err, size_t errlen)
{
  if (o->pg_conninfo != NULL && o->pg_conninfo[0] != '\0') {
    return 0;
  }
  snprintf(err, errlen,
           "the topic is stored in PostgreSQL and this node has no --pg-conninfo: it refuses "
           "to host the replica (placement puts them only on nodes with a database)");
  return CAIRN_ECONFIG;
}

int rgroup_pgstore_begin(const struct rgroup_opts *o, struct store **out, char *err,
                         size_t errlen)
{
  int rv = rgroup_pgstore_refuse(o, err, errlen);
  if (rv != 0) {
    return rv;
  }
  struct pgstore_opts po;
  rgroup_pgstore_opts(NULL, o, &po);
  return pgstore_open_begin(&po, out, err, errlen);
}

/* Opens the replica's pgstore: finishes begun (connected off the loop),
 * or connects here when there is none. */
static int rgroup_open_pgstore(struct rgroup *rg, const struct rgroup_opts *o,
                               struct store *begun, struct store **out, char *err, size_t errlen)
{
  struct pgstore_opts po;
  rgroup_pgstore_opts(rg, o, &po);
  if (begun != NULL) {
    int rv = pgstore_open_end(begun, &po, err, errlen);
    if (rv == 0) {
      *out = begun;
    }
    return rv;
  }
  int rv = rgroup_pgstore_refuse(o, err, errlen);
  return rv != 0 ? rv : pgstore_open(&po, out, err, errlen);
}

/* A partition log opened on the thread pool that no replica takes. */
static void rgroup_plog_abandon(struct store *s)
{
  if (s != NULL) {
    store_close(s);
  }
}

int rgroup_plog_begin(const char *dir, const struct rgroup_opts *o, struct store **out, char *err,
                      size_t errlen)
{
  char raft_dir[PATH_MAX];
  char log_dir[PATH_MAX];
  if (snprintf(log_dir, sizeof log_dir, "%s/log", dir) >= (int)sizeof log_dir ||
      snprintf(raft_dir, sizeof raft_dir, "%s/raft", dir) >= (int)sizeof raft_dir) {
    snprintf(err, errlen, "%s: path too long", dir);
    return CAIRN_EINVAL;
  }
  bool own_io = o->wal != NULL && o->mux != NULL; /* no raft_uv: no <dir>/raft */
  int rv = own_io ? 0 : fs_mkdir_p(raft_dir);
  if (rv != 0) {
    snprintf(err, errlen, "%s: %s", raft_dir, cairn_strerror(rv));
    return rv;
  }
  return plog_open(log_dir, &o->plog, out, err, errlen);
}

/* Creates <dir>/log (the store, unless it is in PostgreSQL) and <dir>/raft
 * (raft_uv's; none for a replica on its own raft_io, rgroup_wal_own_io); a
 * partition log opened on the thread pool (plog_begun) is taken as is. */
static int rgroup_open_store(struct rgroup *rg, const struct rgroup_opts *o, struct store *begun,
                             struct store *plog_begun)
{
  if (begun != NULL && o->storage != STORE_KIND_POSTGRESQL) {
    pgstore_open_abandon(begun); /* cannot happen: only a postgresql replica is begun */
    begun = NULL;
  }
  if (plog_begun != NULL && o->storage == STORE_KIND_POSTGRESQL) {
    store_close(plog_begun); /* cannot happen: a postgresql replica has no partition log */
    plog_begun = NULL;
  }
  if (plog_begun != NULL) {
    rg->store = plog_begun;
    return 0;
  }
  char raft_dir[PATH_MAX];
  size_t raft_dir_len = sizeof raft_dir;
  char log_dir[PATH_MAX];
  if (snprintf(log_dir, sizeof log_dir, "%s/log", rg->dir) >= (int)sizeof log_dir ||
      snprintf(raft_dir, raft_dir_len, "%s/raft", rg->dir) >= (int)raft_dir_len) {
    rgroup_set_errmsg(rg, "%s: path too long", rg->dir);
    pgstore_open_abandon(begun);
    return CAIRN_EINVAL;
  }
  bool own_io = o->wal != NULL && o->mux != NULL;
  int rv = own_io ? 0 : fs_mkdir_p(raft_dir);
  if (rv != 0) {
    rgroup_set_errmsg(rg, "%s: %s", raft_dir, cairn_strerror(rv));
    pgstore_open_abandon(begun);
    return rv;
  }
  char err[512];
  if (o->storage == STORE_KIND_POSTGRESQL) {
    rv = rgroup_open_pgstore(rg, o, begun, &rg->store, err, sizeof err);
  } else {
    rv = plog_open(log_dir, &o->plog, &rg->store, err, sizeof err);
  }
  if (rv != 0) {
    rgroup_set_errmsg(rg, "group %llu: %s", (unsigned long long)rg->group_id, err);
  }
  return rv;
}

/* Every replica bootstraps the same configuration; one that already has
 * Raft state keeps it (RAFT_CANTBOOTSTRAP). */
static int rgroup_bootstrap(struct rgroup *rg, const struct rgroup_replica *replicas, unsigned n)
{
  struct raft_configuration conf;
  raft_configuration_init(&conf);
  int rv = 0;
  for (unsigned i = 0; i < n && rv == 0; i++) {
    rv = raft_configuration_add(&conf, replicas[i].id, replicas[i].address, RAFT_VOTER);
  }
  if (rv == 0) {
    rv = raft_bootstrap(&rg->raft, &conf);
    if (rv == RAFT_CANTBOOTSTRAP) {
      rv = 0;
    }
  }
  raft_configuration_close(&conf);
  if (rv != 0) {
    rgroup_set_errmsg(rg, "group %llu: bootstrap: %s", (unsigned long long)rg->group_id,
                      raft_errmsg(&rg->raft));
    return raft_err_to_cairn(rv);
  }
  return 0;
}

static const char *rgroup_self_address(const struct rgroup_replica *replicas, unsigned n,
                                       uint64_t self_id)
{
  for (unsigned i = 0; i < n; i++) {
    if (replicas[i].id == self_id) {
      return replicas[i].address;
    }
  }
  return NULL;
}

/* The catch-up client applies deferred entries through the state
 * machine's own path. */
static int rgroup_apply_deferred(void *data, const uint8_t *entry, size_t len, uint64_t index)
{
  return rgroup_fsm_apply_entry(data, entry, len, index);
}

/* catchup_pick_fn: the n-th of the other voters in Raft's configuration
 * (empty until raft_start returns, gone while Raft is closed). */
static const char *rgroup_catchup_pick(void *data, unsigned n)
{
  struct rgroup *rg = data;
  if (!rg->raft_open) {
    return NULL;
  }
  const struct raft_configuration *c = &rg->raft.configuration;
  unsigned others = 0;
  for (unsigned i = 0; i < c->n; i++) {
    others += c->servers[i].id != rg->self_id ? 1u : 0u;
  }
  if (others == 0) {
    return NULL;
  }
  unsigned k = n % others;
  for (unsigned i = 0; i < c->n; i++) {
    if (c->servers[i].id != rg->self_id && k-- == 0) {
      return c->servers[i].address;
    }
  }
  return NULL;
}

static void rgroup_on_catchup_closed(struct catchup *cu)
{
  struct rgroup *rg = cu->data;
  free(cu);
  rg->catchups_closing--;
  if (rg->closing_parts > 0) {
    rgroup_on_part_closed(rg); /* rgroup_close_parts counted it */
  }
}

/* Closes the catch-up (caught up, or the replica closing); its bytes stay
 * counted. */
static void rgroup_catchup_release(struct rgroup *rg)
{
  struct catchup *cu = rg->catchup;
  rg->catchup = NULL;
  rg->catchup_fetched += cu->fetched_bytes;
  rg->catchups_closing++;
  cu->data = rg;
  catchup_close(cu, rgroup_on_catchup_closed);
}

/* catchup_table_wanted_fn and catchup_table_fn: rgroup_fsm.h. */
static bool rgroup_catchup_table_wanted(void *data, int64_t log_start)
{
  return rgroup_fsm_table_wanted(data, log_start);
}

static int rgroup_catchup_table(void *data, const uint8_t *buf, size_t len, int64_t *offset,
                                uint64_t *index)
{
  return rgroup_fsm_table_take(data, buf, len, offset, index);
}

/* fetch_table_fn: this replica's table, for a peer catching up. */
static int rgroup_fetch_table(void *data, uint8_t **out, size_t *len)
{
  return rgroup_fsm_table_share(data, out, len);
}

/* catchup_done_fn: caught up, the held entries applied. */
static void rgroup_catchup_done(void *data, struct catchup *cu)
{
  struct rgroup *rg = data;
  rgroup_fsm_caught_up(rg);
  if (rg->catchup == cu) {
    rgroup_catchup_release(rg);
  }
}

int rgroup_catchup_start(struct rgroup *rg, int64_t target_next, uint64_t target_index)
{
  if (rg->catchup == NULL) {
    rg->catchup = malloc(sizeof *rg->catchup);
    if (rg->catchup == NULL) {
      return CAIRN_ENOMEM;
    }
    const struct catchup_owner owner = {.pick = rgroup_catchup_pick,
                                        .apply = rgroup_apply_deferred,
                                        .done = rgroup_catchup_done,
                                        .table_wanted = rgroup_catchup_table_wanted,
                                        .table = rgroup_catchup_table,
                                        .data = rg};
    catchup_init(rg->catchup, rg->loop, rg->tr, rg->store, rg->group_id, rg->self_id,
                 rg->self_address, &owner);
  }
  catchup_start(rg->catchup, target_next, target_index);
  return 0;
}

uint64_t rgroup_catchup_fetched(const struct rgroup *rg)
{
  return rg->catchup_fetched + (rg->catchup != NULL ? rg->catchup->fetched_bytes : 0);
}

/* Sets up serving the log to catching-up peers: raft_uv's transport
 * routes their connections (rgroup_raft.c), or, with the mux, the
 * replica's own route. Returns 0 or a negative code. */
static int rgroup_open_fetch(struct rgroup *rg)
{
  fetch_server_init(&rg->fetch, rg->loop, rg->store, rg->group_id);
  fetch_server_set_table(&rg->fetch, rgroup_fetch_table, rg);
  if (rg->rt != NULL) {
    return 0;
  }
  return transport_route_add(rg->tr, &rg->fetch_route, rg->group_id, fetch_server_accept,
                             &rg->fetch);
}

/* Undoes a partial open, before Raft was initialized. */
static void rgroup_open_failed(struct rgroup *rg, bool store_open)
{
  if (store_open) {
    store_close(rg->store);
  }
  rgroup_fsm_close(rg);
  raftfix_conf_close(&rg->conf_kept);
  raftfix_snapshot_close(&rg->snap_held);
  free(rg->dir);
  free(rg->self_address);
}

int rgroup_open(struct rgroup *rg, uv_loop_t *loop, struct transport *tr, uint64_t group_id,
                uint64_t self_id, const char *dir, const struct rgroup_replica *replicas,
                unsigned n, const struct rgroup_opts *opts)
{
  memset(rg, 0, sizeof *rg);
  rg->ticker_slot = SIZE_MAX;
  producer_state_init(&rg->producers);
  producer_state_init(&rg->snap_producers);
  rgroup_apply_init(&rg->ap);
  rg->loop = loop;
  rg->tr = tr;
  rg->group_id = group_id;
  rg->self_id = self_id;
  rg->preferred_id = n > 0 ? replicas[0].id : 0;
  /* Taken whatever happens: finished by rgroup_open_store, or freed. */
  struct store *begun = opts != NULL ? opts->pg_begun : NULL;
  struct store *plog_begun = opts != NULL ? opts->plog_begun : NULL;
  const char *self_address = rgroup_self_address(replicas, n, self_id);
  if (n > RGROUP_MAX_REPLICAS) {
    rgroup_set_errmsg(rg, "group %llu: %u replicas, at most %d", (unsigned long long)group_id, n,
                      RGROUP_MAX_REPLICAS);
    pgstore_open_abandon(begun);
    rgroup_plog_abandon(plog_begun);
    return CAIRN_EINVAL;
  }
  if (self_address == NULL) {
    rgroup_set_errmsg(rg, "group %llu: node %llu is not in its replica set",
                      (unsigned long long)group_id, (unsigned long long)self_id);
    pgstore_open_abandon(begun);
    rgroup_plog_abandon(plog_begun);
    return CAIRN_EINVAL;
  }
  rgroup_opts_fill(&rg->opts, opts);
  rg->opts.pg_begun = NULL; /* a reopen connects again */
  rg->opts.plog_begun = NULL; /* and opens its log again */
  rg->max_entry_bytes = rg->opts.max_entry_bytes;
  rg->raft_log_budget =
      opts != NULL && opts->snapshot_threshold != 0 ? 0 : rg->opts.raft_log_budget;
  rg->no_preferred_leader = rg->opts.no_preferred_leader;
  rg->dir = strdup(dir);
  rg->self_address = strdup(self_address);
  if (rg->dir == NULL || rg->self_address == NULL) {
    pgstore_open_abandon(begun);
    rgroup_plog_abandon(plog_begun);
    rgroup_open_failed(rg, false);
    return CAIRN_ENOMEM;
  }
  int rv = rgroup_open_store(rg, &rg->opts, begun, plog_begun);
  rg->opts.plog.disk_synced = false; /* a reopen finds what this process wrote */
  if (rv != 0) {
    rgroup_open_failed(rg, false);
    return rv;
  }
  rgroup_fsm_producers_open(rg);
  rv = rgroup_raft_init(rg);
  if (rv != 0) {
    rgroup_open_failed(rg, true);
    return rv;
  }
  /* From here on only rgroup_close releases what is open: Raft, the
   * handles, a catch-up. */
  rv = rgroup_open_fetch(rg);
  if (rv != 0) {
    rgroup_set_errmsg(rg, "group %llu: routing its fetches: %s", (unsigned long long)group_id,
                      cairn_strerror(rv));
    rgroup_close(rg, NULL);
    return rv;
  }
  rgroup_raft_configure(rg);
  rv = rg->opts.join ? 0 : rgroup_bootstrap(rg, replicas, n);
  if (rv == 0) {
    rv = raft_start(&rg->raft);
    if (rv != 0) {
      rgroup_set_errmsg(rg, "group %llu: starting raft in %s/raft: %s",
                        (unsigned long long)group_id, dir, raft_errmsg(&rg->raft));
      rv = raft_err_to_cairn(rv);
    }
  }
  if (rv == 0 && rg->raft_failed) {
    rgroup_set_errmsg(rg, "group %llu: a Raft write failed while starting: %s",
                      (unsigned long long)group_id, rg->wio.io.errmsg);
    rv = CAIRN_ERAFT;
  }
  if (rv == 0 && rgroup_ticker_add(rg) != 0) {
    rgroup_set_errmsg(rg, "group %llu: out of memory", (unsigned long long)group_id);
    rv = CAIRN_ENOMEM;
  }
  if (rv != 0) {
    rgroup_close(rg, NULL);
    return rv;
  }
  rgroup_raft_trim(rg); /* raft_start loaded the log into 8 KiB tables */
  rgroup_set_state(rg, RGROUP_RUNNING);
  rgroup_elect_on_start(rg);
  log_info("rgroup", "group %llu: replica %llu open in %s", (unsigned long long)group_id,
           (unsigned long long)self_id, dir);
  return 0;
}

/* ---- produce with group commit ---- */

static void rgroup_propose(struct rgroup *rg);
static void rgroup_note_role(struct rgroup *rg);

static void rgroup_fail_list(struct rgroup_produce *req, int status)
{
  while (req != NULL) {
    struct rgroup_produce *next = req->next;
    req->cb(req, status, -1);
    req = next;
  }
}

void rgroup_fail_queue(struct rgroup *rg, int status)
{
  struct rgroup_produce *queued = rg->queue_head;
  rg->queue_head = rg->queue_tail = NULL;
  rg->queue_bytes = 0;
  rgroup_fail_list(queued, status);
}

/* An entry that was proposed and then failed. Every failure but a refusal
 * before the append leaves the outcome open: the entry may be on followers,
 * and a later leader may commit it. A failed write (RAFT_IOERR,
 * RAFT_NOSPACE, ...) has latched the Raft instance already
 * (rgroup_raft_fail): raft 0.15 would reuse the failed entry's index for
 * the next proposal in the same term although followers may hold the
 * failed one (docs/raft-0.15.md, row 2). */
static void rgroup_entry_failed(struct rgroup *rg, struct rgroup_entry *e, int status)
{
  rgroup_fail_list(e->reqs, status == RAFT_NOTLEADER ? CAIRN_ENOTLEADER : CAIRN_EINDOUBT);
  free(e);
  /* raft 0.15 calls this while stepping down, after freeing its leader
   * state but still answering RAFT_LEADER: a raft_apply() now would read
   * freed memory. What is queued never entered the log: its producers go to
   * the next leader. */
  rgroup_fail_queue(rg, CAIRN_ENOTLEADER);
}

static void rgroup_on_applied(struct raft_apply *apply, int status, void *result)
{
  struct rgroup_entry *e = apply->data;
  struct rgroup *rg = e->rg;
  const struct rgroup_applied *ap = result;
  rg->inflight--;
  if (status != 0 || ap == NULL || ap->n == 0) {
    rgroup_entry_failed(rg, e, status);
    return;
  }
  /* The entry holds one batch per request, in order. */
  size_t i = 0;
  for (struct rgroup_produce *req = e->reqs, *next; req != NULL; req = next, i++) {
    next = req->next;
    if (i < ap->n) {
      req->cb(req, ap->results[i].status, ap->results[i].offset);
    } else {
      req->cb(req, CAIRN_EINDOUBT, -1); /* cannot happen: an entry is its requests */
    }
  }
  free(e);
  if (rg->state == RGROUP_RUNNING) {
    rgroup_propose(rg);
  }
  rgroup_note_role(rg);
}

/* Takes requests off the queue, up to max_entry_bytes (at least one). */
static struct rgroup_produce *rgroup_take(struct rgroup *rg, size_t *bytes)
{
  struct rgroup_produce *head = rg->queue_head, *last = NULL;
  *bytes = 0;
  for (struct rgroup_produce *r = head; r != NULL; r = r->next) {
    if (last != NULL && *bytes + r->len > rg->max_entry_bytes) {
      break;
    }
    *bytes += r->len;
    last = r;
  }
  rg->queue_head = last->next;
  if (rg->queue_head == NULL) {
    rg->queue_tail = NULL;
  }
  last->next = NULL;
  rg->queue_bytes -= *bytes;
  return head;
}

/* Proposes the queued requests as one Raft entry, unless
 * RGROUP_MAX_INFLIGHT are in flight (the next apply proposes then). */
static void rgroup_propose(struct rgroup *rg)
{
  if (rg->inflight >= RGROUP_MAX_INFLIGHT || rg->queue_head == NULL ||
      rg->state != RGROUP_RUNNING || rg->raft_failed) {
    return;
  }
  size_t bytes;
  struct rgroup_produce *reqs = rgroup_take(rg, &bytes);
  struct rgroup_entry *e = calloc(1, sizeof *e);
  /* raft 0.15 sends an entry's bytes unpadded but its receiver steps over
   * them as if padded to 8 bytes (uvDecodeEntriesBatch), so a follower
   * reads the wrong bytes for every entry after one whose length is not a
   * multiple of 8. Entries are therefore zero-padded to 8; the state
   * machine skips the padding (docs/replication.md, raft 0.15 weak spots). */
  size_t padded = (bytes + 7) & ~(size_t)7;
  struct raft_buffer buf = {.base = raft_malloc(padded), .len = padded};
  if (e == NULL || buf.base == NULL) {
    free(e);
    raft_free(buf.base);
    rgroup_fail_list(reqs, CAIRN_ENOMEM);
    return;
  }
  size_t pos = 0;
  for (struct rgroup_produce *r = reqs; r != NULL; r = r->next) {
    memcpy((uint8_t *)buf.base + pos, r->batch, r->len);
    pos += r->len;
  }
  memset((uint8_t *)buf.base + pos, 0, padded - pos);
  e->rg = rg;
  e->reqs = reqs;
  e->apply.data = e;
  rgroup_pace_wake(rg); /* a follower in probe state is sent one message per heartbeat */
  int rv = raft_apply(&rg->raft, &e->apply, &buf, 1, rgroup_on_applied);
  if (rv != 0) {
    /* Never entered the log (raft 0.15 discards the entry when the append
     * cannot be submitted). */
    raft_free(buf.base);
    free(e);
    rgroup_fail_list(reqs, rg->raft_failed || rv == RAFT_NOTLEADER ? CAIRN_ENOTLEADER
                                                                    : raft_err_to_cairn(rv));
    return;
  }
  rg->entries_pipelined += rg->inflight > 0;
  rg->inflight++;
  rg->entries_proposed++;
  rgroup_raft_note_append(rg);
}

/* Whether this replica may propose now: 0, CAIRN_ENOTLEADER, CAIRN_ESHUTDOWN
 * or CAIRN_EFATAL. */
static int rgroup_can_propose(struct rgroup *rg)
{
  if (rg->state != RGROUP_RUNNING) {
    return rg->state == RGROUP_TRANSFERRING || rg->state == RGROUP_RECOVERING ? CAIRN_ENOTLEADER
                                                                              : CAIRN_ESHUTDOWN;
  }
  if (rg->fatal) {
    return CAIRN_EFATAL;
  }
  if (raft_state(&rg->raft) != RAFT_LEADER || rgroup_is_catching_up(rg) || rg->raft_failed) {
    return CAIRN_ENOTLEADER;
  }
  return 0;
}

static void rgroup_enqueue(struct rgroup *rg, struct rgroup_produce *req, const uint8_t *item,
                           size_t len, int32_t records, rgroup_produce_cb cb);

int rgroup_produce(struct rgroup *rg, struct rgroup_produce *req, const uint8_t *batch, size_t len,
                   rgroup_produce_cb cb)
{
  int ok = rgroup_can_propose(rg);
  if (ok != 0) {
    return ok;
  }
  /* A malformed batch must never reach the Raft log: every replica would
   * fail to apply it. */
  char why[160];
  int rv = batch_validate(batch, len, rg->max_entry_bytes, why, sizeof why);
  if (rv != 0) {
    rgroup_set_errmsg(rg, "batch rejected: %s", why);
    return rv;
  }
  struct batch_header h;
  batch_header_decode(batch, &h);
  rg->batches_proposed++;
  rgroup_enqueue(rg, req, batch, len, h.record_count, cb);
  return 0;
}

/* Queues one validated item (a batch or a command) for the next entry. */
static void rgroup_enqueue(struct rgroup *rg, struct rgroup_produce *req, const uint8_t *item,
                           size_t len, int32_t records, rgroup_produce_cb cb)
{
  req->rg = rg;
  req->batch = item;
  req->len = len;
  req->records = records;
  req->cb = cb;
  req->next = NULL;
  if (rg->queue_tail != NULL) {
    rg->queue_tail->next = req;
  } else {
    rg->queue_head = req;
  }
  rg->queue_tail = req;
  rg->queue_bytes += len;
  rgroup_propose(rg);
}

int rgroup_delete_records(struct rgroup *rg, struct rgroup_produce *req, uint8_t *cmd,
                          int64_t offset, rgroup_produce_cb cb)
{
  int rv = rgroup_can_propose(rg);
  if (rv != 0) {
    return rv;
  }
  if (!rgroup_leader_caught_up(rg)) {
    return CAIRN_ENOTLEADER; /* its store may be behind what is committed */
  }
  struct store_info info;
  store_info(rg->store, &info);
  if (offset == -1) {
    offset = info.next_offset;
  }
  if (offset < 0) {
    rgroup_set_errmsg(rg, "offset %lld: not an offset (-1 names the high watermark)",
                      (long long)offset);
    return CAIRN_EOFFSET;
  }
  if (offset > info.next_offset) {
    rgroup_set_errmsg(rg, "offset %lld is above the high watermark, %lld", (long long)offset,
                      (long long)info.next_offset);
    return CAIRN_EOFFSET;
  }
  struct rgroup_cmd c = {.kind = RGROUP_CMD_LOG_START, .offset = offset};
  rgroup_cmd_encode(&c, cmd);
  rgroup_enqueue(rg, req, cmd, RGROUP_CMD_SIZE, 0, cb);
  return 0;
}

/* Is there a Raft instance to ask (not recovering, not closing)? */
static bool rgroup_raft_up(const struct rgroup *rg)
{
  return (rg->state == RGROUP_RUNNING || rg->state == RGROUP_TRANSFERRING) && rg->raft_open &&
         !rg->raft_failed;
}

void rgroup_leader(struct rgroup *rg, uint64_t *id, const char **address)
{
  raft_id lid = 0;
  const char *addr = NULL;
  if (rgroup_raft_up(rg)) {
    raft_leader(&rg->raft, &lid, &addr);
  }
  *id = lid;
  *address = addr;
}

bool rgroup_is_leader(struct rgroup *rg)
{
  return rgroup_raft_up(rg) && raft_state(&rg->raft) == RAFT_LEADER;
}

bool rgroup_leader_caught_up(struct rgroup *rg)
{
  struct raft *r = &rg->raft;
  return rgroup_is_leader(rg) && rg->term_appended == r->current_term &&
         raft_last_applied(r) >= rg->term_first_index;
}

struct store *rgroup_store(struct rgroup *rg) { return rg->store; }

void rgroup_note_store_failed(struct rgroup *rg)
{
  if (rg->store_failed_ms == 0) {
    /* failing again on probation: the same failure as before the revive */
    rg->store_failed_ms =
        rg->store_probation ? rg->probation_since_ms : (uint64_t)wallclock_ms();
  }
}

/* Ends a revived store's probation once it has committed a write past
 * what it held when it came back, or has had nothing to write for
 * RGROUP_PROBATION_IDLE_MS (an idle partition after a database restart). */
static bool rgroup_store_on_probation(struct rgroup *rg, const struct store_info *si)
{
  if (!rg->store_probation) {
    return false;
  }
  bool wrote = si->durable_offset > rg->probation_offset;
  bool idle = si->durable_offset >= si->next_offset &&
              uv_now(rg->loop) >= rg->probation_start + RGROUP_PROBATION_IDLE_MS;
  if (wrote || idle) {
    rg->store_probation = false;
  }
  return rg->store_probation;
}

void rgroup_store_failure(struct rgroup *rg, struct rgroup_store_failure *out)
{
  /* The node's heartbeat asks every replica once a second: the common
   * answer without a store_info call. */
  if (!store_fatal(rg->store) && !rg->fatal && !rg->store_down && !rg->store_probation) {
    out->failed = false;
    out->reason = "";
    out->since_ms = 0;
    return;
  }
  struct store_info si;
  store_info(rg->store, &si);
  out->failed = si.fatal || rg->fatal || rg->store_down;
  out->reason = out->failed ? store_errmsg(rg->store) : "";
  out->since_ms = out->failed ? rg->store_failed_ms : 0;
  if (!out->failed && rgroup_store_on_probation(rg, &si)) {
    out->failed = true;
    out->reason = rg->probation_reason != NULL ? rg->probation_reason : "revived, no write since";
    out->since_ms = rg->probation_since_ms;
  }
}

bool rgroup_store_probation(struct rgroup *rg)
{
  struct store_info si;
  store_info(rg->store, &si);
  return rgroup_store_on_probation(rg, &si);
}

/* ---- leadership ---- */

void rgroup_on_transfer_done(struct rgroup *rg)
{
  rg->transferring = false;
  uint64_t lid;
  const char *addr;
  rgroup_leader(rg, &lid, &addr);
  log_info("rgroup", "group %llu: leadership transfer done, leader is now %llu",
           (unsigned long long)rg->group_id, (unsigned long long)lid);
  if (rg->state == RGROUP_TRANSFERRING) {
    rgroup_close(rg, rg->close_cb);
  }
}

/* Starts handing leadership to `to` (0: any caught-up voter). Returns 0 or
 * a negative code. */
static int rgroup_transfer(struct rgroup *rg, uint64_t to, const char *why)
{
  if (rg->transferring) {
    return 0;
  }
  /* A fresh request each time, freed only once raft cannot reference it
   * (rgroup_raft.c; docs/raft-0.15.md, row 7). */
  rgroup_pace_wake(rg);
  int rv = rgroup_raft_transfer(rg, to);
  if (rv != 0) {
    return raft_err_to_cairn(rv);
  }
  rg->transferring = true;
  rg->last_transfer_ms = uv_now(rg->loop);
  log_info("rgroup", "group %llu: handing leadership to %s (%s)", (unsigned long long)rg->group_id,
           to ? "the preferred replica" : "a caught-up replica", why);
  return 0;
}

/* As the leader: has it heard from server i of its configuration lately?
 * An AppendEntries result since raft's last contact check or in the
 * period before it (raft clears recent_recv at every election timeout:
 * rg->heard_prev keeps the period before), or, while the group is quiet,
 * the follower's node answering the coalesced beat. */
static bool rgroup_heard_from(struct rgroup *rg, unsigned i)
{
  struct raft *r = &rg->raft;
  return r->leader_state.progress[i].recent_recv || (i < 32 && (rg->heard_prev >> i & 1u)) ||
         rgroup_coal_heard_from(rg, r->configuration.servers[i].id, uv_now(rg->loop));
}

/* Leading, with the per-follower progress to read. raft 0.15 frees the
 * progress array before it fails the pending proposals of a leader that
 * steps down, and sets the new state only after: a callback of those
 * failures (a produce answered NOT_LEADER) that asks about the followers
 * must see "not leading", not read a NULL array. */
static bool rgroup_leading(const struct rgroup *rg)
{
  const struct raft *r = &rg->raft;
  return rg->raft_open && r->state == RAFT_LEADER && r->leader_state.progress != NULL;
}

size_t rgroup_in_sync(struct rgroup *rg, raft_index max_lag, uint64_t *out)
{
  struct raft *r = &rg->raft;
  size_t k = 0;
  if (!rgroup_leading(rg)) {
    return 0;
  }
  raft_index last = raft_last_index(r);
  for (unsigned i = 0; i < r->configuration.n; i++) {
    const struct raft_server *s = &r->configuration.servers[i];
    if (s->role != RAFT_VOTER) {
      continue;
    }
    bool self = s->id == r->id;
    if (self ||
        (rgroup_heard_from(rg, i) && r->leader_state.progress[i].match_index + max_lag >= last)) {
      out[k++] = s->id;
    }
  }
  return k;
}

/* Is the preferred replica reachable and (nearly) caught up? */
static bool rgroup_preferred_caught_up(struct rgroup *rg)
{
  struct raft *r = &rg->raft;
  if (!rgroup_leading(rg)) {
    return false;
  }
  for (unsigned i = 0; i < r->configuration.n; i++) {
    if (r->configuration.servers[i].id != rg->preferred_id) {
      continue;
    }
    if (r->configuration.servers[i].role != RAFT_VOTER) {
      return false; /* still being added: not a transfer target yet */
    }
    /* Fully caught up: raft 0.15 sends TimeoutNow without waiting for the
     * target to persist what it lacks (docs/raft-0.15.md). */
    return rgroup_heard_from(rg, i) &&
           r->leader_state.progress[i].match_index >= raft_last_index(r);
  }
  return false;
}

static void rgroup_note_role(struct rgroup *rg)
{
  int role = raft_state(&rg->raft);
  if (role == rg->last_role) {
    return;
  }
  static const char *const names[] = {"unavailable", "follower", "candidate", "leader"};
  log_info("rgroup", "group %llu: replica %llu is now %s (term %llu)",
           (unsigned long long)rg->group_id, (unsigned long long)rg->self_id,
           role >= 0 && role <= 3 ? names[role] : "?", (unsigned long long)rg->raft.current_term);
  rg->last_role = role;
  rg->preferred_ready = 0;
  if (role == RAFT_CANDIDATE) {
    rgroup_elect_on_candidacy(rg);
  }
}

/* A PostgreSQL store whose start a DeleteRecords moved in memory deletes
 * the rows below it at a retention pass: run one now rather than at the
 * node's next (--retention-check-ms), so that the rows go within a few
 * ticks and the command's entry need not be kept for the reopen. */
static void rgroup_save_start(struct rgroup *rg)
{
  if (rg->opts.storage != STORE_KIND_POSTGRESQL) {
    return;
  }
  struct store_info info;
  store_info(rg->store, &info);
  if (info.saved_start_offset >= info.start_offset || info.fatal) {
    return; /* (a failed store: its revive reopens, and the next pass deletes) */
  }
  uint32_t deleted = 0;
  int rv = rgroup_retention(rg, wallclock_ms(), &deleted);
  (void)rv;                      /* logged; the next tick tries again */
  rg->retained_early += deleted; /* reported by the node's next pass */
}

/* Periodic checks that need no event from Raft (0.15 has no state-change
 * callback): leadership away while catching up, back to the preferred
 * replica when it is ready; a PostgreSQL store's rows below a start moved
 * by a command deleted. */
void rgroup_on_raft_tick(struct rgroup *rg)
{
  uint64_t now = uv_now(rg->loop);
  if (rg->state != RGROUP_RUNNING ||
      now - rg->tick_ms + rg->opts.heartbeat_ms / 2 < RGROUP_TICK_MS) {
    return;
  }
  rg->tick_ms = now;
  rgroup_note_role(rg);
  rgroup_elect_check(rg);
  rgroup_save_start(rg);
  rgroup_raft_ensure_barrier(rg);
  rgroup_pace_tick(rg);
  rgroup_compact_on_acked(rg); /* again: the node's gate may have said no */
  /* A stopping replica handed off once already (rgroup_handoff). */
  if (raft_state(&rg->raft) != RAFT_LEADER || rg->transferring || rg->stopping) {
    return;
  }
  if (rgroup_is_catching_up(rg)) {
    int rv = rgroup_transfer(rg, 0, "this replica is catching up");
    (void)rv; /* retried at the next tick */
    return;
  }
  if (rg->no_preferred_leader || rg->self_id == rg->preferred_id) {
    return;
  }
  rg->preferred_ready = rgroup_preferred_caught_up(rg) ? rg->preferred_ready + 1 : 0;
  if (rg->preferred_ready >= 4 && uv_now(rg->loop) - rg->last_transfer_ms >= 5000) {
    int rv = rgroup_transfer(rg, rg->preferred_id, "it is healthy and caught up");
    (void)rv;
  }
}

bool rgroup_is_catching_up(const struct rgroup *rg)
{
  return rg->catchup != NULL && catchup_active(rg->catchup);
}

int rgroup_retention(struct rgroup *rg, int64_t now_ms, uint32_t *deleted)
{
  *deleted = 0;
  bool serving = rg->state == RGROUP_RUNNING || rg->state == RGROUP_TRANSFERRING;
  if (!serving || rgroup_is_catching_up(rg) || rg->snap != NULL) {
    return 0; /* (a snapshot in flight writes <dir>/producers: the next check) */
  }
  *deleted = rg->retained_early;
  rg->retained_early = 0;
  struct store_info info;
  store_info(rg->store, &info);
  int64_t point = store_retention_point(rg->store, now_ms);
  bool unsaved = info.saved_start_offset < info.start_offset; /* a pgstore's, moved by a command */
  if (point <= info.start_offset && !unsaved) {
    return 0; /* nothing due */
  }
  int rv = 0;
  if (rg->producers_saved_offset < (point > info.start_offset ? point : info.start_offset)) {
    rv = rgroup_fsm_producers_checkpoint(rg);
  }
  if (rv == CAIRN_EPENDING) {
    return 0; /* the store is committing what the checkpoint covers: a later pass */
  }
  if (rv == 0) {
    uint32_t now_deleted = 0;
    rv = store_retention(rg->store, now_ms, rg->producers_saved_offset, &now_deleted);
    *deleted += now_deleted;
  }
  if (rv != 0) {
    log_warn("rgroup", "group %llu: retention: %s", (unsigned long long)rg->group_id,
             store_errmsg(rg->store));
  }
  return rv;
}

void rgroup_set_retention(struct rgroup *rg, uint64_t bytes, int64_t ms)
{
  if (rg->opts.plog.retention_bytes == bytes && rg->opts.plog.retention_ms == ms) {
    return;
  }
  log_info("rgroup", "group %llu: retention now %llu bytes, %lld ms (0: no limit)",
           (unsigned long long)rg->group_id, (unsigned long long)bytes, (long long)ms);
  rg->opts.plog.retention_bytes = bytes;
  rg->opts.plog.retention_ms = ms;
  if (rg->store != NULL) {
    store_set_retention(rg->store, bytes, ms);
  }
}

void rgroup_set_preferred(struct rgroup *rg, uint64_t id)
{
  if (rg->preferred_id != id) {
    rg->preferred_id = id;
    rg->preferred_ready = 0;
  }
}

int rgroup_handoff(struct rgroup *rg)
{
  rg->stopping = true;
  if (rg->state != RGROUP_RUNNING || !rgroup_is_leader(rg) || rg->raft.configuration.n < 2) {
    return 0;
  }
  rgroup_fail_queue(rg, CAIRN_ENOTLEADER);
  return rgroup_transfer(rg, 0, "shutting down");
}

bool rgroup_handing_off(struct rgroup *rg) { return rg->transferring; }

void rgroup_shutdown(struct rgroup *rg, rgroup_close_cb cb)
{
  if (rg->state == RGROUP_RECOVERING) {
    rgroup_close(rg, cb); /* nothing to hand over */
    return;
  }
  if (rg->state != RGROUP_RUNNING) {
    return;
  }
  rg->close_cb = cb;
  /* A stopping replica handed off once (rgroup_handoff): what still leads
   * found no peer that took it, and those peers are stopping too. */
  bool hand_off = !rg->stopping || rg->transferring;
  if (raft_state(&rg->raft) != RAFT_LEADER || rg->raft.configuration.n < 2 || !hand_off) {
    rgroup_close(rg, cb);
    return;
  }
  rgroup_set_state(rg, RGROUP_TRANSFERRING);
  /* Queued requests would only be refused by the next leader's term: send
   * their producers there now. */
  rgroup_fail_queue(rg, CAIRN_ENOTLEADER);
  if (rg->transferring) {
    return; /* the running transfer's callback closes */
  }
  if (rgroup_transfer(rg, 0, "shutting down") != 0) {
    rgroup_close(rg, cb);
  }
}

/* ---- close ---- */

/* The last part of a close: everything that used the store is gone. */
void rgroup_on_part_closed(struct rgroup *rg)
{
  if (--rg->closing_parts > 0) {
    return;
  }
  if (rg->stopping) {
    store_close_unflushed(rg->store); /* its node syncs once (parts_close) */
  } else {
    store_close(rg->store);
  }
  rg->store = NULL;
  rgroup_fsm_close(rg);
  raftfix_conf_close(&rg->conf_kept);
  raftfix_snapshot_close(&rg->snap_held);
  free(rg->dir);
  rg->dir = NULL;
  free(rg->self_address);
  rg->self_address = NULL;
  rgroup_set_state(rg, RGROUP_CLOSED);
  log_info("rgroup", "group %llu: replica %llu closed", (unsigned long long)rg->group_id,
           (unsigned long long)rg->self_id);
  if (rg->close_cb != NULL) {
    rg->close_cb(rg);
  }
}

static void rgroup_on_fetch_closed(struct fetch_server *srv)
{
  rgroup_on_part_closed((struct rgroup *)((char *)srv - offsetof(struct rgroup, fetch)));
}

/* Closes everything that uses the store, then the store (Raft is closed). */
static void rgroup_close_parts(struct rgroup *rg)
{
  /* One count held until every close below has started (the fetch
   * server may call back at once), then one per part: the fetch server,
   * the handles rgroup_raft.c allocated, each catch-up still closing and
   * a revive of the store in flight. */
  rg->closing_parts = 1;
  if (rg->revive_busy) {
    /* Its worker reads only its job, but its completion must find rg. */
    rg->revive_counted = true;
    rg->closing_parts++;
  }
  if (rg->catchup != NULL) {
    rgroup_catchup_release(rg);
  }
  rg->closing_parts += (int)rg->catchups_closing;
  rg->closing_parts++;
  transport_route_remove(rg->tr, &rg->fetch_route); /* no-op unless added */
  fetch_server_close(&rg->fetch, rgroup_on_fetch_closed);
  rg->closing_parts += (int)rgroup_raft_handles_close(rg, rgroup_on_part_closed);
  rgroup_on_part_closed(rg);
}

void rgroup_on_raft_closed(struct rgroup *rg)
{
  if (rg->state == RGROUP_RECOVERING) {
    rgroup_raft_backoff(rg); /* then reopen */
    return;
  }
  rgroup_close_parts(rg);
}

void rgroup_close(struct rgroup *rg, rgroup_close_cb cb)
{
  if (rg->state == RGROUP_CLOSING || rg->state == RGROUP_CLOSED) {
    return;
  }
  rgroup_set_state(rg, RGROUP_CLOSING);
  rg->close_cb = cb;
  rgroup_fail_queue(rg, CAIRN_ESHUTDOWN);
  rgroup_raft_recover_stop(rg);
  if (rg->raft_open) {
    /* An entry in flight gets RAFT_CANCELED from raft_close. */
    rgroup_raft_close(rg);
  } else if (!rg->raft_closing) {
    rgroup_close_parts(rg); /* recovering, between a close and a reopen */
  }
  /* else: a recovery's raft_close is under way; rgroup_on_raft_closed goes on. */
}

int rgroup_delete(const char *dir) { return fs_remove_tree(dir); }
