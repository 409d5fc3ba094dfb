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
 *           is ahead of the store needs the data fetched from a peer, which
 *           is not built yet: it is refused, so Raft retries and the replica
 *           never applies entries on top of a hole (docs/replication.md). */
#include "cluster/rgroup_fsm.h"

#include "common/err.h"
#include "common/log.h"
#include "format/batch.h"
#include "storage/manifest.h"

#include <stdlib.h>
#include <string.h>

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

static int rgroup_fsm_fail(struct rgroup *rg, raft_index index, int rv)
{
  rg->fatal = true;
  log_error("rgroup", "group %llu: applying entry %llu failed: %s (%s); replica stops applying",
            (unsigned long long)rg->group_id, (unsigned long long)index, cairn_strerror(rv),
            store_errmsg(rg->store));
  return RAFT_IOERR;
}

static int rgroup_fsm_apply(struct raft_fsm *fsm, const struct raft_buffer *buf, void **result)
{
  struct rgroup *rg = fsm->data;
  raft_index index = raft_last_applied(&rg->raft) + 1;
  *result = NULL;
  if (rg->fatal) {
    return RAFT_IOERR;
  }
  int n = rgroup_fsm_split(rg, buf->base, buf->len);
  if (n <= 0) {
    return rgroup_fsm_fail(rg, index, n == 0 ? CAIRN_EINVAL : n);
  }
  int64_t base = -1;
  int rv = store_append(rg->store, rg->scratch, (size_t)n, index, &base);
  if (rv == CAIRN_EEXIST) {
    base = -1; /* applied before a restart: nobody waits for it */
  } else if (rv != 0) {
    return rgroup_fsm_fail(rg, index, rv);
  }
  rg->applied_base = base;
  *result = &rg->applied_base;
  return 0;
}

static int rgroup_fsm_snapshot(struct raft_fsm *fsm, struct raft_buffer *bufs[], unsigned *n)
{
  struct rgroup *rg = fsm->data;
  int rv = store_flush(rg->store, INT64_MAX);
  struct manifest m;
  if (rv == 0) {
    rv = manifest_build(rg->store, &m);
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
  if (info.last_index >= m.last_index && info.next_offset >= m.next_offset) {
    raft_free(buf->base); /* ours on success */
    return 0;
  }
  log_error("rgroup",
            "group %llu: snapshot describes offsets up to %lld (raft index %llu) but this "
            "replica holds up to %lld (index %llu): catch-up from a peer is not available yet",
            (unsigned long long)rg->group_id, (long long)m.next_offset,
            (unsigned long long)m.last_index, (long long)info.next_offset,
            (unsigned long long)info.last_index);
  return RAFT_IOERR;
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
