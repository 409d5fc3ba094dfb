/* rgroup_fsm.c - the partition replica's state machine.
 *
 * apply:    split the entry into its batches and store_append() them with
 *           the entry's Raft index. canonical/raft 0.15 applies entries in
 *           order and sets last_applied only after apply returns, so the
 *           entry's index is raft_last_applied() + 1. An index the store
 *           already holds (a replay after a restart) is skipped.
 * snapshot: flush the store up to what is applied, then describe it (the
 *           manifest: offsets, last index, checksummed segments).
 * restore:  a descriptor the store already covers needs nothing. One that
 *           is ahead of the store starts a catch-up (catchup.h): the missing
 *           batches are fetched from a peer, and the entries Raft applies
 *           meanwhile are held and applied once the log has caught up, so no
 *           entry is ever applied on top of a hole.
 *
 * Raft keeps entries in memory until a snapshot; the snapshot threshold
 * and trailing count are retuned from the average entry size so that
 * (threshold + trailing) x average stays under the group's budget. */
#include "cluster/rgroup_fsm.h"

#include "common/err.h"
#include "common/log.h"
#include "format/batch.h"
#include "storage/manifest.h"

#include <stdlib.h>
#include <string.h>

#define RGROUP_SNAPSHOT_SLOW_NS (10u * 1000 * 1000) /* 10 ms */

static int rgroup_fsm_scratch(struct rgroup *rg, size_t n)
{
  if (n <= rg->scratch_cap) {
    return 0;
  }
  size_t cap = rg->scratch_cap ? rg->scratch_cap * 2 : 16;
  while (cap < n) {
    cap *= 2;
  }
  struct store_batch *ns = realloc(rg->scratch, cap * sizeof *ns);
  if (ns == NULL) {
    return CAIRN_ENOMEM;
  }
  rg->scratch = ns;
  rg->scratch_cap = cap;
  return 0;
}

/* Is p[0..n) the zero padding that ends an entry (fewer than 8 bytes)? */
static bool rgroup_fsm_is_padding(const uint8_t *p, size_t n)
{
  if (n >= 8) {
    return false;
  }
  for (size_t i = 0; i < n; i++) {
    if (p[i] != 0) {
      return false;
    }
  }
  return true;
}

/* Splits an entry into batches. Returns their count or a negative code. */
static int rgroup_fsm_split(struct rgroup *rg, const uint8_t *p, size_t len)
{
  size_t pos = 0;
  int n = 0;
  while (pos < len && !rgroup_fsm_is_padding(p + pos, len - pos)) {
    size_t size = 0;
    int err = 0;
    if (batch_probe(p + pos, len - pos, len - pos, &size, &err) != BATCH_PROBE_OK) {
      return err != 0 ? err : CAIRN_ETRUNCATED;
    }
    if (rgroup_fsm_scratch(rg, (size_t)n + 1) != 0) {
      return CAIRN_ENOMEM;
    }
    rg->scratch[n].data = (const uint8_t *)p + pos;
    rg->scratch[n].len = size;
    n++;
    pos += size;
  }
  return n;
}

/* Keeps Raft's in-memory log under raft_log_budget bytes: Raft 0.15
 * counts entries, not bytes, so the counts follow the entry sizes seen. */
static void rgroup_fsm_retune(struct rgroup *rg, size_t len)
{
  rg->entry_bytes_avg = rg->applies == 0 ? (double)len : rg->entry_bytes_avg * 0.97 + len * 0.03;
  if (rg->applies++ % 32 != 0 || rg->raft_log_budget == 0) {
    return;
  }
  double per = rg->entry_bytes_avg > 64 ? rg->entry_bytes_avg : 64;
  double total = (double)rg->raft_log_budget / per; /* threshold + trailing */
  unsigned threshold = total / 3 * 2 < 16 ? 16 : total / 3 * 2 > 8192 ? 8192 : (unsigned)(total / 3 * 2);
  unsigned trailing = threshold / 2 < 8 ? 8 : threshold / 2;
  raft_set_snapshot_threshold(&rg->raft, threshold);
  raft_set_snapshot_trailing(&rg->raft, trailing);
}

static int rgroup_fsm_fail(struct rgroup *rg, raft_index index, int rv)
{
  rg->fatal = true;
  log_error("rgroup", "group %llu: applying entry %llu failed: %s (%s); replica stops applying",
            (unsigned long long)rg->group_id, (unsigned long long)index, cairn_strerror(rv),
            store_errmsg(rg->store));
  return RAFT_IOERR;
}

int rgroup_fsm_apply_entry(struct rgroup *rg, const uint8_t *entry, size_t len, uint64_t index,
                           int64_t *base)
{
  int n = rgroup_fsm_split(rg, entry, len);
  if (n <= 0) {
    rgroup_fsm_fail(rg, index, n == 0 ? CAIRN_EINVAL : n);
    return n == 0 ? CAIRN_EINVAL : n;
  }
  int64_t b = -1;
  int rv = store_append(rg->store, rg->scratch, (size_t)n, index, &b);
  if (rv == CAIRN_EEXIST) {
    b = -1; /* applied before a restart: nobody waits for it */
  } else if (rv != 0) {
    rgroup_fsm_fail(rg, index, rv);
    return rv;
  }
  if (base != NULL) {
    *base = b;
  }
  if (rg->on_applied != NULL && b >= 0) {
    rg->on_applied(rg);
  }
  return 0;
}

static int rgroup_fsm_apply(struct raft_fsm *fsm, const struct raft_buffer *buf, void **result)
{
  struct rgroup *rg = fsm->data;
  raft_index index = raft_last_applied(&rg->raft) + 1;
  *result = NULL;
  rg->apply_ns = uv_hrtime(); /* the entry is committed: slow-request tracing */
  if (rg->fatal) {
    return RAFT_IOERR;
  }
  rgroup_fsm_retune(rg, buf->len);
  if (catchup_active(&rg->catchup)) {
    /* Behind the snapshot: hold the entry until the log has caught up. */
    if (catchup_defer(&rg->catchup, buf->base, buf->len, index) != 0) {
      return rgroup_fsm_fail(rg, index, CAIRN_ETOOLARGE);
    }
    return 0;
  }
  if (rgroup_fsm_apply_entry(rg, buf->base, buf->len, index, &rg->applied_base) != 0) {
    return RAFT_IOERR;
  }
  *result = &rg->applied_base;
  return 0;
}

static int rgroup_fsm_snapshot(struct raft_fsm *fsm, struct raft_buffer *bufs[], unsigned *n)
{
  struct rgroup *rg = fsm->data;
  if (catchup_active(&rg->catchup) || rg->fatal) {
    /* The log does not hold what Raft applied: a descriptor of it now
     * would let Raft drop entries the log still lacks. */
    return RAFT_BUSY;
  }
  /* Both steps block the loop thread: the flush in fdatasync, the manifest
   * in reading every segment for its CRC (docs/replication.md, snapshot
   * cost). Timed so that the cost shows in the log. */
  uint64_t t0 = uv_hrtime();
  int rv = store_flush(rg->store, INT64_MAX);
  uint64_t t1 = uv_hrtime();
  struct manifest m;
  if (rv == 0) {
    rv = manifest_build(rg->store, &m);
  }
  uint64_t t2 = uv_hrtime();
  if (rv == 0) {
    rg->snapshots++;
    rg->snapshot_flush_ns += t1 - t0;
    rg->snapshot_manifest_ns += t2 - t1;
    /* Worth a line at info level only when it stalled the loop. */
    log_write(t2 - t0 >= RGROUP_SNAPSHOT_SLOW_NS ? LOG_INFO : LOG_DEBUG, "rgroup",
              "group %llu: snapshot at index %llu: flush %.3f ms, manifest %.3f ms "
              "(%zu segments, next offset %lld)", (unsigned long long)rg->group_id,
              (unsigned long long)raft_last_applied(&rg->raft), (double)(t1 - t0) / 1e6,
              (double)(t2 - t1) / 1e6, m.nsegments, (long long)m.next_offset);
  }
  uint8_t *enc = NULL;
  size_t len = 0;
  if (rv == 0) {
    rv = manifest_encode(&m, &enc, &len);
    manifest_free(&m);
  }
  if (rv != 0) {
    log_error("rgroup", "group %llu: snapshot: %s", (unsigned long long)rg->group_id,
              cairn_strerror(rv));
    return RAFT_IOERR;
  }
  struct raft_buffer *b = raft_malloc(sizeof *b);
  void *copy = raft_malloc(len ? len : 1);
  if (b == NULL || copy == NULL) {
    raft_free(b);
    raft_free(copy);
    free(enc);
    return RAFT_NOMEM;
  }
  memcpy(copy, enc, len);
  free(enc);
  b->base = copy;
  b->len = len;
  *bufs = b;
  *n = 1;
  return 0;
}

static int rgroup_fsm_restore(struct raft_fsm *fsm, struct raft_buffer *buf)
{
  struct rgroup *rg = fsm->data;
  rg->restores++;
  struct manifest m;
  int rv = manifest_decode(buf->base, buf->len, &m);
  if (rv != 0) {
    log_error("rgroup", "group %llu: snapshot descriptor is malformed: %s",
              (unsigned long long)rg->group_id, cairn_strerror(rv));
    return RAFT_CORRUPT;
  }
  struct store_info info;
  store_info(rg->store, &info);
  manifest_free(&m);
  raft_free(buf->base); /* ours on success */
  if (info.last_index >= m.last_index && info.next_offset >= m.next_offset) {
    return 0;
  }
  catchup_start(&rg->catchup, m.next_offset, m.last_index);
  return 0;
}

void rgroup_fsm_init(struct rgroup *rg)
{
  memset(&rg->fsm, 0, sizeof rg->fsm);
  rg->fsm.version = 1;
  rg->fsm.data = rg;
  rg->fsm.apply = rgroup_fsm_apply;
  rg->fsm.snapshot = rgroup_fsm_snapshot;
  rg->fsm.restore = rgroup_fsm_restore;
}

void rgroup_fsm_close(struct rgroup *rg)
{
  free(rg->scratch);
  rg->scratch = NULL;
  rg->scratch_cap = 0;
}
