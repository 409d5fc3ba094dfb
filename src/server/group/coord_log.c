/* coord_log.c - the coordinator's side of the offsets log: commit records
 * appended through the partition's Raft group, the marker that starts a
 * load, and the load itself (coord.h has the slot states).
 *
 * Records: offset_record.h (one batch per append, one record per offset). */
#include "server/group/coord.h"

#include "common/err.h"
#include "common/log.h"
#include "common/wallclock.h"
#include "format/batch.h"
#include "format/batch_builder.h"
#include "server/group/offset_record.h"
#include "server/node.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* One append in flight: rgroup borrows the batch until the callback. */
struct coord_op {
  struct rgroup_produce rp;
  struct coord *c;
  uint32_t partition;
  uint64_t epoch;
  bool marker;
  bool submitting; /* inside rgroup_produce: a callback now is a refusal */
  bool fired;
  int sync_status;
  uint8_t *batch;
  size_t len;
  coord_append_cb cb;
  void *data;
};

/* ---- applying records ---- */

/* A GROUP record: applied while loading only (once loaded, the groups in
 * memory are ahead of their records). */
static void coord_apply_group(struct coord *c, struct coord_slot *slot, const char *name,
                              const struct batch_record *rec)
{
  if (slot->state != COORD_LOADING) {
    return;
  }
  struct group *g = coord_group(slot, name, true);
  if (g == NULL) {
    return;
  }
  struct group_env env = {.partitions = coord_topic_partitions, .ctx = c->n};
  struct group_event clock = {0};
  coord_event_clock(c, &clock);
  /* The record's time is when the group last became stable or empty: an
   * empty group's retention counts from it, not from this load. */
  uint64_t wall = rec->timestamp > 0 ? (uint64_t)rec->timestamp : clock.wall_ms;
  int rv = offset_record_restore(g, rec->value, rec->value_len, &env, clock.now_ms, wall);
  if (rv != 0) {
    log_warn("coord", "group %s: its membership at offset %" PRId64 " is not restored: %s", name,
             rec->offset, cairn_strerror(rv));
  }
}

static void coord_apply_record(struct coord *c, struct coord_slot *slot,
                               const struct batch_record *rec, int64_t fallback_time)
{
  struct offset_record *r = malloc(sizeof *r);
  if (r == NULL) {
    log_warn("coord", "%s/%" PRIu32 " offset %" PRId64 ": out of memory: skipped",
             COORD_OFFSETS_TOPIC, slot->partition, rec->offset);
    return;
  }
  int rv = offset_record_decode(rec->key, rec->key_len, rec->value, rec->value_len, r);
  if (rv != 0) {
    log_warn("coord", "%s/%" PRIu32 " offset %" PRId64 ": a record that does not parse: skipped",
             COORD_OFFSETS_TOPIC, slot->partition, rec->offset);
  } else if (r->kind == OFFSET_RECORD_GROUP) {
    coord_apply_group(c, slot, r->group, rec);
  } else if (r->kind == OFFSET_RECORD_TOMBSTONE) {
    struct group *g = coord_group(slot, r->group, false);
    if (g != NULL) {
      group_offset_delete(g, r->topic, r->partition);
      if (g->noffsets == 0) {
        g->dropping = false;
      }
    }
  } else if (r->kind == OFFSET_RECORD_COMMIT) {
    struct group *g = coord_group(slot, r->group, true);
    if (g != NULL) {
      int64_t when = r->commit_time_ms != 0 ? r->commit_time_ms : fallback_time;
      rv = group_offset_set(g, r->topic, r->partition, r->offset, r->metadata, when);
      if (rv != 0) {
        log_warn("coord", "group %s: keeping the offset of %s/%" PRIu32 ": %s", r->group, r->topic,
                 r->partition, cairn_strerror(rv));
      }
      /* Generations continue from the highest a previous coordinator used. */
      if (g->nmembers == 0 && r->generation > g->generation) {
        g->generation = r->generation;
      }
      /* A group met while loading is empty since its last commit, not since
       * this load: its offsets' retention counts from the commit times. */
      if (slot->state == COORD_LOADING) {
        g->empty_since_wall_ms = 0;
      }
    }
  }
  free(r);
}

/* Applies the records of one batch below end. */
static void coord_apply_batch(struct coord *c, struct coord_slot *slot, const uint8_t *p,
                              size_t len, int64_t end)
{
  struct batch_iter it;
  if (batch_iter_init(&it, p, len) != 0) {
    log_warn("coord", "%s/%" PRIu32 ": a batch that does not iterate: skipped", COORD_OFFSETS_TOPIC,
             slot->partition);
    return;
  }
  struct batch_record rec;
  while (batch_iter_next(&it, &rec) == 1) {
    if (rec.offset >= end) {
      break;
    }
    coord_apply_record(c, slot, &rec, rec.timestamp);
  }
}

/* ---- building and appending batches ---- */

static int coord_add_record(struct batch_builder *b, const struct coord_record *r, bool tomb,
                            int64_t now)
{
  struct offset_record *x = calloc(1, sizeof *x);
  if (x == NULL) {
    return CAIRN_ENOMEM;
  }
  x->kind = tomb ? OFFSET_RECORD_TOMBSTONE : OFFSET_RECORD_COMMIT;
  int rv = 0;
  if (strlen(r->group) > OFFSET_RECORD_NAME_MAX || strlen(r->topic) > OFFSET_RECORD_NAME_MAX ||
      (r->metadata != NULL && strlen(r->metadata) > OFFSET_RECORD_METADATA_MAX)) {
    rv = CAIRN_EINVAL;
  } else {
    snprintf(x->group, sizeof x->group, "%s", r->group);
    snprintf(x->topic, sizeof x->topic, "%s", r->topic);
    snprintf(x->metadata, sizeof x->metadata, "%s", r->metadata != NULL ? r->metadata : "");
    x->partition = r->partition;
    x->offset = r->offset;
    x->commit_time_ms = now;
    x->generation = r->generation;
    rv = offset_record_add(b, x, now);
  }
  free(x);
  return rv;
}

static int coord_add_marker(struct batch_builder *b, int64_t now)
{
  struct offset_record *x = calloc(1, sizeof *x);
  if (x == NULL) {
    return CAIRN_ENOMEM;
  }
  x->kind = OFFSET_RECORD_MARKER;
  int rv = offset_record_add(b, x, now);
  free(x);
  return rv;
}

static void coord_on_produced(struct rgroup_produce *rp, int status, int64_t base_offset)
{
  struct coord_op *op = rp->data;
  if (op->submitting) {
    op->fired = true;
    op->sync_status = status != 0 ? status : CAIRN_EINVAL;
    return;
  }
  struct coord *c = op->c;
  struct coord_slot *slot = op->partition < c->nslots ? &c->slots[op->partition] : NULL;
  bool current = slot != NULL && slot->epoch == op->epoch && !c->closing;
  if (current && op->marker && slot->state == COORD_MARKING) {
    if (status == 0) {
      slot->state = COORD_LOADING;
      slot->load_next = 0;
      slot->load_end = base_offset;
    } else {
      coord_unload(c, slot, cairn_strerror(status));
    }
  } else if (current && !op->marker) {
    if (status == 0 && slot->state == COORD_LOADED) {
      coord_apply_batch(c, slot, op->batch, op->len, INT64_MAX);
    } else if (status != 0) {
      /* Perhaps in the log after all: only a reload knows. */
      coord_unload(c, slot, cairn_strerror(status));
    }
  }
  if (op->cb != NULL) {
    op->cb(op->data, status);
  }
  free(op->batch);
  free(op);
}

/* Produces the batch built by the caller (taken). Returns 0 or a code (no
 * callback then). */
static int coord_produce(struct coord *c, struct coord_slot *slot, struct part *p, uint8_t *batch,
                         size_t len, bool marker, coord_append_cb cb, void *data)
{
  struct coord_op *op = calloc(1, sizeof *op);
  if (op == NULL) {
    free(batch);
    return CAIRN_ENOMEM;
  }
  op->c = c;
  op->partition = slot->partition;
  op->epoch = slot->epoch;
  op->marker = marker;
  op->batch = batch;
  op->len = len;
  op->cb = cb;
  op->data = data;
  op->rp.data = op;
  op->submitting = true;
  int rv = rgroup_produce(&p->rg, &op->rp, batch, len, coord_on_produced);
  op->submitting = false;
  if (rv == 0 && op->fired) {
    rv = op->sync_status;
  }
  if (rv != 0) {
    free(op->batch);
    free(op);
  }
  return rv;
}

static struct part *coord_leading_part(struct coord *c, const struct coord_slot *slot)
{
  struct part *p = node_find_part(c->n, COORD_OFFSETS_TOPIC, slot->partition, NULL);
  if (p == NULL || p->state != PART_OPEN || !rgroup_is_leader(&p->rg) ||
      rgroup_is_catching_up(&p->rg)) {
    return NULL;
  }
  return p;
}

/* What one append puts in its batch: records, or a group's membership. */
struct coord_fill {
  const struct coord_record *records;
  const bool *tombstones;
  size_t n;
  const struct group *group;
};

/* Builds f's batch and produces it (coord_append's contract). */
static int coord_append_fill(struct coord *c, struct coord_slot *slot, const struct coord_fill *f,
                             coord_append_cb cb, void *data)
{
  struct part *p = coord_leading_part(c, slot);
  if (p == NULL || slot->state != COORD_LOADED) {
    return CAIRN_ENOTLEADER;
  }
  size_t max = p->rg.max_entry_bytes < BATCH_DEFAULT_MAX_BYTES ? p->rg.max_entry_bytes
                                                               : BATCH_DEFAULT_MAX_BYTES;
  struct batch_builder b;
  int rv = batch_builder_init(&b, max);
  if (rv != 0) {
    return rv;
  }
  int64_t now = wallclock_ms();
  for (size_t i = 0; i < f->n && rv == 0; i++) {
    rv = coord_add_record(&b, &f->records[i], f->tombstones != NULL && f->tombstones[i], now);
  }
  if (rv == 0 && f->group != NULL) {
    rv = offset_record_add_group(&b, f->group, now);
  }
  uint8_t *batch = NULL;
  size_t len = 0;
  if (rv == 0) {
    rv = batch_builder_finish(&b, &batch, &len);
  }
  batch_builder_close(&b);
  if (rv != 0) {
    return rv;
  }
  return coord_produce(c, slot, p, batch, len, false, cb, data);
}

int coord_append(struct coord *c, struct coord_slot *slot, const struct coord_record *records,
                 const bool *tombstones, size_t n, coord_append_cb cb, void *data)
{
  if (n == 0 || n > COORD_MAX_COMMIT_PARTITIONS) {
    return n == 0 ? CAIRN_EINVAL : CAIRN_ETOOLARGE;
  }
  struct coord_fill f = {.records = records, .tombstones = tombstones, .n = n};
  return coord_append_fill(c, slot, &f, cb, data);
}

int coord_append_group(struct coord *c, struct coord_slot *slot, const struct group *g,
                       coord_append_cb cb, void *data)
{
  struct coord_fill f = {.group = g};
  return coord_append_fill(c, slot, &f, cb, data);
}

/* ---- loading ---- */

/* Reads a region's bytes: its memory, or a copy read from its file. */
static int coord_region_bytes(const struct store_region *r, uint8_t **copy, const uint8_t **p)
{
  *copy = NULL;
  if (r->fd < 0) {
    *p = r->mem;
    return 0;
  }
  *copy = malloc(r->len);
  if (*copy == NULL) {
    return CAIRN_ENOMEM;
  }
  for (size_t got = 0; got < r->len;) {
    ssize_t k = pread(r->fd, *copy + got, r->len - got, r->pos + (off_t)got);
    if (k <= 0) {
      free(*copy);
      *copy = NULL;
      return k < 0 ? -errno : CAIRN_ETRUNCATED;
    }
    got += (size_t)k;
  }
  *p = *copy;
  return 0;
}

/* Reads up to COORD_LOAD_BYTES_PER_TICK of the log into the slot. */
static void coord_load_some(struct coord *c, struct coord_slot *slot, struct part *p)
{
  struct store *s = rgroup_store(&p->rg);
  struct store_info info;
  store_info(s, &info);
  if (slot->load_next < info.start_offset) {
    slot->load_next = info.start_offset;
  }
  size_t budget = COORD_LOAD_BYTES_PER_TICK;
  while (slot->load_next < slot->load_end && budget > 0) {
    struct store_region r;
    memset(&r, 0, sizeof r);
    r.fd = -1;
    int rv = store_read(s, slot->load_next, budget, &r);
    if ((rv == 0 && r.len == 0) || rv == CAIRN_EPENDING) {
      store_region_release(&r); /* pending: a PostgreSQL store's read, the next tick asks again */
      break;
    }
    uint8_t *copy = NULL;
    const uint8_t *bytes = NULL;
    if (rv == 0) {
      rv = coord_region_bytes(&r, &copy, &bytes);
    }
    if (rv != 0) {
      store_region_release(&r);
      char why[160];
      snprintf(why, sizeof why, "reading at %" PRId64 ": %s", slot->load_next, cairn_strerror(rv));
      coord_unload(c, slot, why);
      return;
    }
    for (size_t pos = 0; pos + BATCH_HEADER_SIZE <= r.len;) {
      struct batch_header h;
      batch_header_decode(bytes + pos, &h);
      size_t size = batch_total_size(h.batch_length);
      if (size < BATCH_HEADER_SIZE || pos + size > r.len) {
        break;
      }
      coord_apply_batch(c, slot, bytes + pos, size, slot->load_end);
      pos += size;
    }
    free(copy);
    slot->load_next = r.next_offset > slot->load_next ? r.next_offset : slot->load_end;
    budget -= r.len < budget ? r.len : budget;
    store_region_release(&r);
  }
  if (slot->load_next >= slot->load_end) {
    slot->state = COORD_LOADED;
    log_info("coord", "%s/%" PRIu32 ": coordinating (term %" PRIu64 "): %zu groups loaded",
             COORD_OFFSETS_TOPIC, slot->partition, slot->term, slot->ngroups);
  }
}

void coord_load_step(struct coord *c, struct coord_slot *slot)
{
  if (c->closing) {
    return;
  }
  struct part *p = coord_leading_part(c, slot);
  if (p == NULL) {
    if (slot->state != COORD_UNLOADED) {
      coord_unload(c, slot, "not the leader");
    }
    return;
  }
  uint64_t term = p->rg.raft.current_term;
  if (slot->state != COORD_UNLOADED && slot->term != term) {
    coord_unload(c, slot, "a new term");
  }
  switch (slot->state) {
  case COORD_UNLOADED: {
    struct batch_builder b;
    uint8_t *batch = NULL;
    size_t len = 0;
    int rv = batch_builder_init(&b, 4096);
    if (rv == 0) {
      rv = coord_add_marker(&b, wallclock_ms());
      if (rv == 0) {
        rv = batch_builder_finish(&b, &batch, &len);
      }
      batch_builder_close(&b);
    }
    slot->state = COORD_MARKING;
    slot->term = term;
    if (rv == 0) {
      rv = coord_produce(c, slot, p, batch, len, true, NULL, NULL);
    }
    if (rv != 0) {
      slot->state = COORD_UNLOADED;
      log_warn("coord", "%s/%" PRIu32 ": the load marker: %s", COORD_OFFSETS_TOPIC, slot->partition,
               cairn_strerror(rv));
    }
    return;
  }
  case COORD_LOADING:
    coord_load_some(c, slot, p);
    return;
  default:
    return;
  }
}
