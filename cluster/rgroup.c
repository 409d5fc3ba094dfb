/* rgroup.c - a partition replica's lifecycle and its produce path with
 * group commit (rgroup.h). The state machine is in rgroup_fsm.c. */
#include "cluster/rgroup.h"

#include "cluster/raft_err.h"
#include "cluster/rgroup_fsm.h"
#include "common/err.h"
#include "common/fsutil.h"
#include "common/log.h"
#include "format/batch.h"

#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void rgroup_set_errmsg(struct rgroup *rg, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void rgroup_set_errmsg(struct rgroup *rg, const char *fmt, ...)
{
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(rg->errmsg, sizeof rg->errmsg, fmt, ap);
  va_end(ap);
}

static void rgroup_opts_fill(struct rgroup_opts *o, const struct rgroup_opts *in)
{
  if (in != NULL) {
    *o = *in;
  } else {
    memset(o, 0, sizeof *o);
    plog_opts_default(&o->plog);
  }
  if (o->heartbeat_ms == 0) o->heartbeat_ms = 100;
  if (o->election_ms == 0) o->election_ms = 1000;
  if (o->snapshot_threshold == 0) o->snapshot_threshold = 1024;
  if (o->snapshot_trailing == 0) o->snapshot_trailing = 128;
  if (o->raft_segment_size == 0) o->raft_segment_size = 1u << 20;
  if (o->max_entry_bytes == 0) o->max_entry_bytes = RGROUP_DEFAULT_MAX_ENTRY_BYTES;
}

/* Creates <dir>/log (the store) and <dir>/raft. */
static int rgroup_open_store(struct rgroup *rg, const struct rgroup_opts *o, char *raft_dir,
                             size_t raft_dir_len)
{
  char log_dir[PATH_MAX];
  if (snprintf(log_dir, sizeof log_dir, "%s/log", rg->dir) >= (int)sizeof log_dir ||
      snprintf(raft_dir, raft_dir_len, "%s/raft", rg->dir) >= (int)raft_dir_len) {
    rgroup_set_errmsg(rg, "%s: path too long", rg->dir);
    return CAIRN_EINVAL;
  }
  int rv = fs_mkdir_p(raft_dir);
  if (rv != 0) {
    rgroup_set_errmsg(rg, "%s: %s", raft_dir, cairn_strerror(rv));
    return rv;
  }
  char err[256];
  rv = plog_open(log_dir, &o->plog, &rg->store, err, sizeof err);
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

/* Undoes a partial open, in reverse order. */
static void rgroup_open_failed(struct rgroup *rg, int stage)
{
  if (stage >= 3) {
    raft_uv_close(&rg->io);
  }
  if (stage >= 2) {
    transport_group_release(&rg->rt);
  }
  if (stage >= 1) {
    store_close(rg->store);
  }
  rgroup_fsm_close(rg);
  free(rg->dir);
}

int rgroup_open(struct rgroup *rg, uv_loop_t *loop, struct transport *tr, uint64_t group_id,
                uint64_t self_id, const char *dir, const struct rgroup_replica *replicas,
                unsigned n, const struct rgroup_opts *opts)
{
  memset(rg, 0, sizeof *rg);
  rg->loop = loop;
  rg->group_id = group_id;
  rg->self_id = self_id;
  const char *self_address = rgroup_self_address(replicas, n, self_id);
  if (self_address == NULL) {
    rgroup_set_errmsg(rg, "group %llu: node %llu is not in its replica set",
                      (unsigned long long)group_id, (unsigned long long)self_id);
    return CAIRN_EINVAL;
  }
  struct rgroup_opts o;
  rgroup_opts_fill(&o, opts);
  rg->max_entry_bytes = o.max_entry_bytes;
  rg->dir = strdup(dir);
  if (rg->dir == NULL) {
    return CAIRN_ENOMEM;
  }
  char raft_dir[PATH_MAX];
  int rv = rgroup_open_store(rg, &o, raft_dir, sizeof raft_dir);
  if (rv != 0) {
    rgroup_open_failed(rg, 0);
    return rv;
  }
  rv = transport_group_init(tr, &rg->rt, group_id);
  if (rv != 0) {
    rgroup_open_failed(rg, 1);
    return rv;
  }
  rv = raft_uv_init(&rg->io, loop, raft_dir, &rg->rt);
  if (rv != 0) {
    rgroup_set_errmsg(rg, "group %llu: raft I/O in %s: %s", (unsigned long long)group_id,
                      raft_dir, rg->io.errmsg);
    rgroup_open_failed(rg, 2);
    return raft_err_to_cairn(rv);
  }
  raft_uv_set_segment_size(&rg->io, o.raft_segment_size);
  raft_uv_set_connect_retry_delay(&rg->io, 100);
  rgroup_fsm_init(rg);
  rv = raft_init(&rg->raft, &rg->io, &rg->fsm, self_id, self_address);
  if (rv != 0) {
    rgroup_set_errmsg(rg, "group %llu: raft_init: %s", (unsigned long long)group_id,
                      raft_errmsg(&rg->raft));
    rgroup_open_failed(rg, 3);
    return raft_err_to_cairn(rv);
  }
  rg->raft.data = rg;
  raft_set_heartbeat_timeout(&rg->raft, o.heartbeat_ms);
  raft_set_election_timeout(&rg->raft, o.election_ms);
  raft_set_snapshot_threshold(&rg->raft, o.snapshot_threshold);
  raft_set_snapshot_trailing(&rg->raft, o.snapshot_trailing);
  rv = rgroup_bootstrap(rg, replicas, n);
  if (rv == 0) {
    rv = raft_start(&rg->raft);
    if (rv != 0) {
      rgroup_set_errmsg(rg, "group %llu: starting raft in %s: %s", (unsigned long long)group_id,
                        raft_dir, raft_errmsg(&rg->raft));
      rv = raft_err_to_cairn(rv);
    }
  }
  if (rv != 0) {
    /* raft_init succeeded: only raft_close may release it now. */
    rg->state = RGROUP_CLOSING;
    rgroup_close(rg, NULL);
    return rv;
  }
  rg->state = RGROUP_RUNNING;
  log_info("rgroup", "group %llu: replica %llu open in %s", (unsigned long long)group_id,
           (unsigned long long)self_id, dir);
  return 0;
}

/* ---- produce with group commit ---- */

static void rgroup_propose(struct rgroup *rg);

static void rgroup_fail_list(struct rgroup_produce *req, int status)
{
  while (req != NULL) {
    struct rgroup_produce *next = req->next;
    req->cb(req, status, -1);
    req = next;
  }
}

static void rgroup_on_applied(struct raft_apply *apply, int status, void *result)
{
  struct rgroup_entry *e = apply->data;
  struct rgroup *rg = e->rg;
  rg->inflight = NULL;
  if (status != 0 || result == NULL || *(int64_t *)result < 0) {
    int err = status != 0 ? raft_err_to_cairn(status) : CAIRN_ERAFT;
    rgroup_fail_list(e->reqs, err);
  } else {
    int64_t offset = *(int64_t *)result;
    for (struct rgroup_produce *req = e->reqs, *next; req != NULL; req = next) {
      next = req->next;
      int64_t base = offset;
      offset += req->records;
      req->cb(req, 0, base);
    }
  }
  free(e);
  if (rg->state == RGROUP_RUNNING) {
    rgroup_propose(rg);
  }
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

/* Proposes the queued requests as one Raft entry, if none is in flight. */
static void rgroup_propose(struct rgroup *rg)
{
  if (rg->inflight != NULL || rg->queue_head == NULL) {
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
  int rv = raft_apply(&rg->raft, &e->apply, &buf, 1, rgroup_on_applied);
  if (rv != 0) {
    raft_free(buf.base);
    free(e);
    rgroup_fail_list(reqs, raft_err_to_cairn(rv));
    return;
  }
  rg->inflight = e;
  rg->entries_proposed++;
}

int rgroup_produce(struct rgroup *rg, struct rgroup_produce *req, const uint8_t *batch,
                   size_t len, rgroup_produce_cb cb)
{
  if (rg->state != RGROUP_RUNNING) {
    return CAIRN_ESHUTDOWN;
  }
  if (rg->fatal) {
    return CAIRN_EFATAL;
  }
  if (raft_state(&rg->raft) != RAFT_LEADER) {
    return CAIRN_ENOTLEADER;
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
  req->rg = rg;
  req->batch = batch;
  req->len = len;
  req->records = h.record_count;
  req->cb = cb;
  req->next = NULL;
  if (rg->queue_tail != NULL) {
    rg->queue_tail->next = req;
  } else {
    rg->queue_head = req;
  }
  rg->queue_tail = req;
  rg->queue_bytes += len;
  rg->batches_proposed++;
  rgroup_propose(rg);
  return 0;
}

void rgroup_leader(struct rgroup *rg, uint64_t *id, const char **address)
{
  raft_id lid = 0;
  const char *addr = NULL;
  raft_leader(&rg->raft, &lid, &addr);
  *id = lid;
  *address = addr;
}

bool rgroup_is_leader(struct rgroup *rg) { return raft_state(&rg->raft) == RAFT_LEADER; }

struct store *rgroup_store(struct rgroup *rg) { return rg->store; }

/* ---- close ---- */

static void rgroup_on_raft_closed(struct raft *r)
{
  struct rgroup *rg = r->data;
  raft_uv_close(&rg->io);
  transport_group_release(&rg->rt);
  store_close(rg->store);
  rg->store = NULL;
  rgroup_fsm_close(rg);
  free(rg->dir);
  rg->dir = NULL;
  rg->state = RGROUP_CLOSED;
  log_info("rgroup", "group %llu: replica %llu closed", (unsigned long long)rg->group_id,
           (unsigned long long)rg->self_id);
  if (rg->close_cb != NULL) {
    rg->close_cb(rg);
  }
}

void rgroup_close(struct rgroup *rg, rgroup_close_cb cb)
{
  rg->state = RGROUP_CLOSING;
  rg->close_cb = cb;
  struct rgroup_produce *queued = rg->queue_head;
  rg->queue_head = rg->queue_tail = NULL;
  rg->queue_bytes = 0;
  rgroup_fail_list(queued, CAIRN_ESHUTDOWN);
  /* An entry in flight gets RAFT_CANCELED from raft_close. */
  rg->raft.data = rg;
  raft_close(&rg->raft, rgroup_on_raft_closed);
}

int rgroup_delete(const char *dir) { return fs_remove_tree(dir); }
