/* plog.c - the segmented partition log: append, read, time lookup, flush,
 * truncation and retention over a directory of segments (plog.h). Open
 * and crash recovery live in plog_recover.c. */
#include "storage/plog_internal.h"

#include "common/err.h"
#include "common/fsutil.h"
#include "common/log.h"
#include "common/wallclock.h"
#include "format/batch.h"
#include "format/crc32c.h"
#include "storage/checkpoint.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <time.h>

#define PLOG_IOV_STACK 16

void plog_opts_default(struct plog_opts *opts)
{
  memset(opts, 0, sizeof *opts);
  opts->segment_bytes = PLOG_DEFAULT_SEGMENT_BYTES;
  opts->index_interval = PLOG_DEFAULT_INDEX_INTERVAL;
  opts->max_batch_bytes = BATCH_DEFAULT_MAX_BYTES;
  opts->now_ms = wallclock_ms;
}

void plog_set_errmsg(struct plog *pl, const char *fmt, ...)
{
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(pl->base.errmsg, sizeof pl->base.errmsg, fmt, ap);
  va_end(ap);
}

static struct segment *plog_active(struct plog *pl) { return pl->segs[pl->nsegs - 1]; }

int plog_push_segment(struct plog *pl, struct segment *s)
{
  if (pl->nsegs == pl->cap) {
    size_t cap = pl->cap ? pl->cap * 2 : 8;
    struct segment **ns = realloc(pl->segs, cap * sizeof *ns);
    if (ns == NULL) {
      return CAIRN_ENOMEM;
    }
    pl->segs = ns;
    pl->cap = cap;
  }
  pl->segs[pl->nsegs++] = s;
  return 0;
}

int plog_drop_segment(struct plog *pl, size_t i)
{
  struct segment *s = pl->segs[i];
  int rv = segment_remove(s, pl->dir);
  memmove(&pl->segs[i], &pl->segs[i + 1], (pl->nsegs - i - 1) * sizeof *pl->segs);
  pl->nsegs--;
  pl->dir_dirty = true;
  segment_unref(s); /* regions still reading it keep the fd open */
  return rv;
}

/* Latches the fatal state: the file's tail is unknown after a failed write
 * or fsync, so nothing more may be acknowledged on top of it. */
int plog_fail(struct plog *pl, int err, const char *what)
{
  pl->base.fatal = true;
  plog_set_errmsg(pl, "%s: %s: %s", pl->dir, what, cairn_strerror(err));
  log_error("plog", "%s (log is now read-only)", pl->base.errmsg);
  return err;
}

static int plog_write_checkpoint(struct plog *pl)
{
  struct checkpoint cp = {.durable_offset = pl->durable_offset,
                          .durable_index = pl->durable_index,
                          .start_offset = pl->start_offset};
  int rv = checkpoint_write(pl->dir, &cp);
  return rv == 0 ? 0 : plog_fail(pl, rv, "writing the checkpoint");
}

/* Closes the active segment (fsynced with its indexes, so only the newest
 * segment can ever hold a torn tail) and starts a new one. */
static int plog_roll(struct plog *pl)
{
  int rv = segment_sync(plog_active(pl));
  if (rv != 0) {
    return plog_fail(pl, rv, "syncing a segment at roll");
  }
  struct segment *s;
  rv = segment_create(pl->dir, pl->next_offset, pl->opts.index_interval, &s);
  if (rv != 0) {
    plog_set_errmsg(pl, "%s: creating segment %lld: %s", pl->dir, (long long)pl->next_offset,
                    cairn_strerror(rv));
    return rv;
  }
  rv = plog_push_segment(pl, s);
  if (rv != 0) {
    segment_unref(s);
    return rv;
  }
  pl->dir_dirty = true;
  log_debug("plog", "%s: rolled to segment %lld", pl->dir, (long long)pl->next_offset);
  return 0;
}

static bool plog_should_roll(struct plog *pl, uint64_t bytes, int64_t now)
{
  struct segment *a = plog_active(pl);
  if (a->size == 0) {
    return false;
  }
  if (a->size + bytes > pl->opts.segment_bytes) {
    return true;
  }
  return pl->opts.segment_ms > 0 && now - a->created_ms >= pl->opts.segment_ms;
}

/* Validates every batch of an entry before anything is written. */
static int plog_check_batches(struct plog *pl, const struct store_batch *b, size_t n,
                              uint64_t *total)
{
  *total = 0;
  for (size_t i = 0; i < n; i++) {
    char why[160];
    int rv = batch_verify(b[i].data, b[i].len, pl->opts.max_batch_bytes, why, sizeof why);
    if (rv != 0) {
      plog_set_errmsg(pl, "batch %zu of %zu rejected: %s", i + 1, n, why);
      return rv;
    }
    *total += b[i].len;
  }
  if (*total >= PLOG_MAX_SEGMENT_BYTES) {
    plog_set_errmsg(pl, "entry of %llu bytes is larger than a segment may be",
                    (unsigned long long)*total);
    return CAIRN_ETOOLARGE;
  }
  return 0;
}

/* The write of one entry: per batch, the stamped broker fields from our
 * own copy, then the rest of the caller's bytes, which are never written
 * (they may be a Raft entry still being sent to peers). */
struct plog_entry_io {
  struct iovec *iov;          /* 2 per batch */
  struct batch_header *hdrs;  /* as stamped */
  uint8_t (*stamps)[BATCH_BROKER_FIELDS_SIZE];
  struct iovec iov_small[2 * PLOG_IOV_STACK];
  struct batch_header hdrs_small[PLOG_IOV_STACK];
  uint8_t stamps_small[PLOG_IOV_STACK][BATCH_BROKER_FIELDS_SIZE];
};

static struct plog_entry_io *plog_entry_io_new(size_t n)
{
  size_t size = sizeof(struct plog_entry_io) + n * (2 * sizeof(struct iovec) +
                                                    sizeof(struct batch_header) +
                                                    BATCH_BROKER_FIELDS_SIZE);
  struct plog_entry_io *io = malloc(size);
  if (io == NULL) {
    return NULL;
  }
  uint8_t *p = (uint8_t *)(io + 1);
  io->iov = (struct iovec *)p;
  io->hdrs = (struct batch_header *)(p + n * 2 * sizeof(struct iovec));
  io->stamps = (void *)(p + n * (2 * sizeof(struct iovec) + sizeof(struct batch_header)));
  return io;
}

/* Stamps copies of the broker fields and lays out the iovecs. Returns the
 * offset after the entry. */
static int64_t plog_entry_io_fill(struct plog_entry_io *io, const struct store_batch *b,
                                  size_t n, int64_t base, uint64_t source_index)
{
  if (n <= PLOG_IOV_STACK) {
    io->iov = io->iov_small;
    io->hdrs = io->hdrs_small;
    io->stamps = io->stamps_small;
  }
  int64_t off = base;
  for (size_t i = 0; i < n; i++) {
    memcpy(io->stamps[i], b[i].data, BATCH_BROKER_FIELDS_SIZE);
    batch_stamp(io->stamps[i], off, source_index, i + 1 == n ? BATCH_FLAG_ENTRY_END : 0);
    batch_header_decode(b[i].data, &io->hdrs[i]);
    io->hdrs[i].base_offset = off;
    io->hdrs[i].source_index = source_index;
    io->hdrs[i].entry_flags = i + 1 == n ? BATCH_FLAG_ENTRY_END : 0;
    io->iov[2 * i].iov_base = io->stamps[i];
    io->iov[2 * i].iov_len = BATCH_BROKER_FIELDS_SIZE;
    io->iov[2 * i + 1].iov_base = (void *)(b[i].data + BATCH_BROKER_FIELDS_SIZE);
    io->iov[2 * i + 1].iov_len = b[i].len - BATCH_BROKER_FIELDS_SIZE;
    off += io->hdrs[i].record_count;
  }
  return off;
}

static int plog_append(struct store *st, struct store_batch *b, size_t n, uint64_t source_index,
                       int64_t *base_offset)
{
  struct plog *pl = (struct plog *)st;
  if (pl->base.fatal) {
    return CAIRN_EFATAL;
  }
  if (n == 0) {
    return CAIRN_EINVAL;
  }
  if (source_index != 0 && source_index <= pl->last_index) {
    return CAIRN_EEXIST; /* replay of an entry applied before */
  }
  uint64_t total;
  int rv = plog_check_batches(pl, b, n, &total);
  if (rv != 0) {
    return rv;
  }
  int64_t now = pl->opts.now_ms();
  if (plog_should_roll(pl, total, now) && (rv = plog_roll(pl)) != 0) {
    return rv;
  }
  struct plog_entry_io io_stack;
  struct plog_entry_io *io = &io_stack;
  if (n > PLOG_IOV_STACK && (io = plog_entry_io_new(n)) == NULL) {
    return CAIRN_ENOMEM;
  }
  int64_t off = plog_entry_io_fill(io, b, n, pl->next_offset, source_index);
  rv = segment_append(plog_active(pl), io->iov, io->hdrs, n, now);
  if (io != &io_stack) {
    free(io);
  }
  if (rv != 0) {
    return plog_fail(pl, rv, "appending to a segment");
  }
  *base_offset = pl->next_offset;
  pl->next_offset = off;
  if (source_index != 0) {
    pl->last_index = source_index;
  }
  return 0;
}

/* The segment that holds offset: the last one whose base is <= offset. */
static size_t plog_find_segment(const struct plog *pl, int64_t offset)
{
  size_t lo = 0, hi = pl->nsegs;
  while (hi - lo > 1) {
    size_t mid = lo + (hi - lo) / 2;
    if (pl->segs[mid]->base_offset <= offset) {
      lo = mid;
    } else {
      hi = mid;
    }
  }
  return lo;
}

static void plog_region_release(struct store_region *r) { segment_unref(r->pin); }

static int plog_read(struct store *st, int64_t offset, size_t max_bytes, struct store_region *out)
{
  struct plog *pl = (struct plog *)st;
  memset(out, 0, sizeof *out);
  out->fd = -1;
  if (offset < pl->start_offset || offset > pl->next_offset) {
    plog_set_errmsg(pl, "offset %lld is outside the log [%lld, %lld)", (long long)offset,
                    (long long)pl->start_offset, (long long)pl->next_offset);
    return CAIRN_EOFFSET;
  }
  out->first_offset = out->next_offset = offset;
  if (offset == pl->next_offset) {
    return 0;
  }
  struct segment *s = pl->segs[plog_find_segment(pl, offset)];
  uint64_t pos, end;
  struct batch_header h;
  int rv = segment_locate(s, offset, &pos, &h);
  if (rv == 0) {
    rv = segment_span(s, pos, max_bytes, &end, &out->next_offset);
  }
  if (rv != 0) {
    plog_set_errmsg(pl, "%s: reading offset %lld: %s", pl->dir, (long long)offset,
                    cairn_strerror(rv));
    return rv;
  }
  segment_ref(s);
  out->fd = s->fd;
  out->pos = (int64_t)pos;
  out->len = (size_t)(end - pos);
  out->first_offset = h.base_offset;
  out->pin = s;
  out->release = plog_region_release;
  return 0;
}

/* The first record at or after start_offset with timestamp >= ts in the
 * batch at pos (whose max_timestamp reaches ts); -1 if there is none. */
static int plog_find_record(struct plog *pl, struct segment *s, uint64_t pos,
                            const struct batch_header *h, int64_t ts, int64_t *offset)
{
  if ((h->attributes & BATCH_ATTR_CODEC_MASK) != BATCH_CODEC_NONE) {
    *offset = h->base_offset >= pl->start_offset ? h->base_offset : -1;
    return 0; /* compressed: the batch is the finest grain the log sees */
  }
  size_t len = batch_total_size(h->batch_length);
  uint8_t *buf = malloc(len);
  size_t got = 0;
  int rv = buf == NULL ? CAIRN_ENOMEM : fs_pread_full(s->fd, buf, len, (off_t)pos, &got);
  struct batch_iter it;
  if (rv == 0 && (got != len || batch_iter_init(&it, buf, len) != 0)) {
    rv = CAIRN_ECORRUPT;
  }
  *offset = -1;
  struct batch_record r;
  while (rv == 0 && (rv = batch_iter_next(&it, &r)) == 1) {
    rv = 0;
    if (r.timestamp >= ts && r.offset >= pl->start_offset) {
      *offset = r.offset;
      break;
    }
  }
  free(buf);
  return rv < 0 ? rv : 0;
}

static int plog_lookup_time(struct store *st, int64_t ts, int64_t *offset)
{
  struct plog *pl = (struct plog *)st;
  for (size_t i = 0; i < pl->nsegs; i++) {
    struct segment *s = pl->segs[i];
    if (s->max_timestamp < ts || s->next_offset <= pl->start_offset) {
      continue;
    }
    uint64_t pos;
    struct batch_header h;
    int rv = segment_find_time(s, ts, &pos, &h);
    while (rv == 0) {
      int64_t found;
      rv = plog_find_record(pl, s, pos, &h, ts, &found);
      if (rv != 0) {
        break;
      }
      if (found >= 0) {
        *offset = found;
        return 0;
      }
      /* Only records below the log start reached ts: look further. */
      pos += batch_total_size(h.batch_length);
      rv = pos < s->size ? segment_read_header(s, pos, &h) : CAIRN_ENOTFOUND;
      while (rv == 0 && h.max_timestamp < ts) {
        pos += batch_total_size(h.batch_length);
        rv = pos < s->size ? segment_read_header(s, pos, &h) : CAIRN_ENOTFOUND;
      }
    }
    if (rv != CAIRN_ENOTFOUND) {
      plog_set_errmsg(pl, "%s: time lookup: %s", pl->dir, cairn_strerror(rv));
      return rv;
    }
  }
  *offset = pl->next_offset;
  return 0;
}

int plog_do_flush(struct plog *pl, int64_t up_to)
{
  if (up_to > pl->next_offset) {
    up_to = pl->next_offset;
  }
  int64_t durable = pl->durable_offset;
  uint64_t durable_index = pl->durable_index;
  for (size_t i = 0; i < pl->nsegs && pl->segs[i]->base_offset <= up_to; i++) {
    struct segment *s = pl->segs[i];
    int rv = segment_sync(s);
    if (rv != 0) {
      return plog_fail(pl, rv, "fsync of a segment");
    }
    if (s->next_offset > durable || (s->size > 0 && s->last_index > durable_index)) {
      durable = s->next_offset;
      if (s->size > 0 && s->last_index > durable_index) {
        durable_index = s->last_index;
      }
    }
  }
  if (pl->dir_dirty) {
    int rv = fs_fsync_dir(pl->dir);
    if (rv != 0) {
      return plog_fail(pl, rv, "fsync of the directory");
    }
    pl->dir_dirty = false;
  }
  if (durable == pl->durable_offset && durable_index == pl->durable_index) {
    return 0;
  }
  pl->durable_offset = durable;
  pl->durable_index = durable_index;
  return plog_write_checkpoint(pl);
}

static int plog_flush(struct store *st, int64_t up_to)
{
  struct plog *pl = (struct plog *)st;
  plog_sync_collect(pl); /* its checkpoint first; fatal if it failed */
  if (pl->base.fatal) {
    return CAIRN_EFATAL;
  }
  return plog_do_flush(pl, up_to);
}

/* Lowers the durable marks to the log end after a truncation, durably: a
 * checkpoint must never claim batches that are gone. */
static int plog_clamp_durable(struct plog *pl)
{
  if (pl->durable_offset <= pl->next_offset) {
    return 0;
  }
  pl->durable_offset = pl->next_offset;
  pl->durable_index = pl->last_index;
  return plog_write_checkpoint(pl);
}

/* Recomputes last_index after segments were cut: the last Raft batch kept
 * (a segment of batches not from Raft only has none). */
static void plog_refresh_last_index(struct plog *pl)
{
  for (size_t i = pl->nsegs; i-- > 0;) {
    if (pl->segs[i]->last_index != 0) {
      pl->last_index = pl->segs[i]->last_index;
      return;
    }
  }
  pl->last_index = 0;
}

static int plog_truncate(struct store *st, int64_t offset)
{
  struct plog *pl = (struct plog *)st;
  plog_sync_collect(pl); /* it must not sync bytes cut here, nor race the checkpoint */
  if (pl->base.fatal) {
    return CAIRN_EFATAL;
  }
  if (offset < pl->start_offset || offset > pl->next_offset) {
    return CAIRN_EOFFSET;
  }
  if (offset == pl->next_offset) {
    return 0;
  }
  size_t i = plog_find_segment(pl, offset);
  struct segment *s = pl->segs[i];
  uint64_t pos = 0;
  if (offset > s->base_offset) {
    struct batch_header h;
    int rv = segment_locate(s, offset, &pos, &h);
    if (rv != 0) {
      return rv;
    }
    if (h.base_offset != offset) {
      plog_set_errmsg(pl, "offset %lld is inside the batch at %lld", (long long)offset,
                      (long long)h.base_offset);
      return CAIRN_EINVAL;
    }
    struct batch_header prev;
    uint64_t prev_pos;
    rv = segment_locate(s, offset - 1, &prev_pos, &prev);
    if (rv != 0) {
      return rv;
    }
    if ((prev.entry_flags & BATCH_FLAG_ENTRY_END) == 0) {
      plog_set_errmsg(pl, "offset %lld is inside a Raft entry", (long long)offset);
      return CAIRN_EINVAL;
    }
  }
  while (pl->nsegs > i + 1) {
    int rv = plog_drop_segment(pl, pl->nsegs - 1);
    if (rv != 0) {
      return plog_fail(pl, rv, "removing a segment in truncation");
    }
  }
  int rv = segment_truncate(s, pos, offset);
  if (rv != 0) {
    return plog_fail(pl, rv, "truncating a segment");
  }
  pl->next_offset = offset;
  plog_refresh_last_index(pl);
  return plog_clamp_durable(pl);
}

/* Replaces every segment by one empty segment at offset. */
static int plog_reset_at(struct plog *pl, int64_t offset)
{
  while (pl->nsegs > 0) {
    int rv = plog_drop_segment(pl, pl->nsegs - 1);
    if (rv != 0) {
      return plog_fail(pl, rv, "removing a segment");
    }
  }
  struct segment *s;
  int rv = segment_create(pl->dir, offset, pl->opts.index_interval, &s);
  if (rv == 0 && (rv = plog_push_segment(pl, s)) != 0) {
    segment_unref(s);
  }
  if (rv != 0) {
    return plog_fail(pl, rv, "creating a segment");
  }
  pl->start_offset = pl->next_offset = offset;
  pl->durable_offset = offset;
  pl->durable_index = pl->last_index;
  int r2 = fs_fsync_dir(pl->dir);
  if (r2 != 0) {
    return plog_fail(pl, r2, "fsync of the directory");
  }
  pl->dir_dirty = false;
  return plog_write_checkpoint(pl);
}

static int plog_reset(struct store *st, int64_t offset, uint64_t last_index)
{
  struct plog *pl = (struct plog *)st;
  plog_sync_collect(pl); /* its checkpoint names the old start: ours must be the last */
  if (pl->base.fatal) {
    return CAIRN_EFATAL;
  }
  if (offset <= pl->next_offset) {
    plog_set_errmsg(pl, "%s: reset at %lld: not past the log's end", pl->dir, (long long)offset);
    return CAIRN_EINVAL;
  }
  if (last_index > pl->last_index) {
    pl->last_index = last_index; /* kept by plog_reset_at's checkpoint */
  }
  return plog_reset_at(pl, offset);
}

static int plog_delete_before(struct store *st, int64_t offset)
{
  struct plog *pl = (struct plog *)st;
  plog_sync_collect(pl); /* its checkpoint names the old start: ours must be the last */
  if (pl->base.fatal) {
    return CAIRN_EFATAL;
  }
  if (offset <= pl->start_offset) {
    return 0;
  }
  if (offset > pl->next_offset) {
    return plog_reset_at(pl, offset);
  }
  while (pl->nsegs > 1 && pl->segs[0]->next_offset <= offset) {
    int rv = plog_drop_segment(pl, 0);
    if (rv != 0) {
      return plog_fail(pl, rv, "removing a segment");
    }
  }
  pl->start_offset = offset;
  return plog_write_checkpoint(pl);
}

static uint64_t plog_total_bytes(const struct plog *pl)
{
  uint64_t total = 0;
  for (size_t i = 0; i < pl->nsegs; i++) {
    total += pl->segs[i]->size;
  }
  return total;
}

/* The first segment that retention keeps (nsegs - 1 at most: the active
 * one always stays), segments wholly below below being the only ones it
 * may drop; *total_out: the bytes from it on. */
static size_t plog_retention_keep(const struct plog *pl, int64_t now_ms, int64_t below,
                                  uint64_t *total_out)
{
  uint64_t total = plog_total_bytes(pl);
  size_t k = 0;
  while (k + 1 < pl->nsegs && pl->segs[k + 1]->base_offset <= below) {
    const struct segment *s = pl->segs[k];
    bool by_size = pl->base.retention_bytes > 0 && total > pl->base.retention_bytes &&
                   total - pl->base.retention_bytes >= s->size;
    bool by_age = pl->base.retention_ms > 0 && s->max_timestamp < now_ms - pl->base.retention_ms;
    if (!by_size && !by_age) {
      break;
    }
    total -= s->size;
    k++;
  }
  *total_out = total;
  return k;
}

static int64_t plog_retention_point(struct store *st, int64_t now_ms)
{
  struct plog *pl = (struct plog *)st;
  uint64_t total;
  size_t k = pl->base.fatal ? 0 : plog_retention_keep(pl, now_ms, INT64_MAX, &total);
  return k > 0 ? pl->segs[k]->base_offset : pl->start_offset;
}

static int plog_retention(struct store *st, int64_t now_ms, int64_t below, uint32_t *deleted)
{
  struct plog *pl = (struct plog *)st;
  *deleted = 0;
  plog_sync_collect(pl); /* as delete_before */
  if (pl->base.fatal) {
    return CAIRN_EFATAL;
  }
  uint64_t total;
  size_t k = plog_retention_keep(pl, now_ms, below, &total);
  for (size_t i = 0; i < k; i++) {
    int rv = plog_drop_segment(pl, 0);
    if (rv != 0) {
      return plog_fail(pl, rv, "removing a segment for retention");
    }
    (*deleted)++;
  }
  if (*deleted == 0 || pl->segs[0]->base_offset <= pl->start_offset) {
    return 0;
  }
  pl->start_offset = pl->segs[0]->base_offset;
  log_info("plog", "%s: retention removed %u segment(s), log starts at %lld", pl->dir, *deleted,
           (long long)pl->start_offset);
  return plog_write_checkpoint(pl);
}

static void plog_info(struct store *st, struct store_info *out)
{
  struct plog *pl = (struct plog *)st;
  out->start_offset = pl->start_offset;
  out->saved_start_offset = pl->start_offset;
  out->next_offset = pl->next_offset;
  out->last_index = pl->last_index;
  out->durable_offset = pl->durable_offset;
  out->durable_index = pl->durable_index;
  out->size_bytes = plog_total_bytes(pl);
  out->segments = (uint32_t)pl->nsegs;
  out->fatal = pl->base.fatal;
}

static void plog_close(struct store *st)
{
  struct plog *pl = (struct plog *)st;
  /* A job's outcome first (its segments stay pinned by it until its owner
   * ends it). */
  plog_sync_collect(pl);
  /* A clean close leaves nothing to recover: all of it durable (unless the
   * caller's Raft log holds it: store_close_unflushed). */
  bool flush = !pl->base.fatal && pl->nsegs > 0 && !st->close_unflushed;
  if (flush && plog_do_flush(pl, pl->next_offset) != 0) {
    log_error("plog", "%s: flush at close failed: %s", pl->dir, pl->base.errmsg);
  }
  for (size_t i = 0; i < pl->nsegs; i++) {
    segment_unref(pl->segs[i]);
  }
  free(pl->segs);
  free(pl->dir);
  free(pl);
}

void plog_recovery_info(struct store *st, struct plog_recovery *out)
{
  *out = ((struct plog *)st)->rec;
}

/* The CRC-32C of a segment's valid bytes, reading only what was appended
 * since the last call (the rest is cached in the segment). */
static int plog_segment_crc(struct segment *s, uint32_t *out)
{
  uint32_t crc = s->crc_prefix;
  uint64_t pos = s->crc_prefix_size;
  if (pos > s->size) {
    crc = 0;
    pos = 0;
  }
  int rv = segment_crc_extend(s->fd, crc, pos, s->size, &crc);
  if (rv == 0) {
    s->crc_prefix = crc;
    s->crc_prefix_size = s->size;
  }
  *out = crc;
  return rv;
}

int plog_segments(struct store *st, struct plog_segment_desc **out, size_t *n)
{
  struct plog *pl = (struct plog *)st;
  struct plog_segment_desc *d = calloc(pl->nsegs, sizeof *d);
  if (d == NULL) {
    return CAIRN_ENOMEM;
  }
  for (size_t i = 0; i < pl->nsegs; i++) {
    struct segment *s = pl->segs[i];
    d[i].base_offset = s->base_offset;
    d[i].next_offset = s->next_offset;
    d[i].size_bytes = s->size;
    int rv = plog_segment_crc(s, &d[i].crc32c);
    if (rv != 0) {
      free(d);
      return rv;
    }
  }
  *out = d;
  *n = pl->nsegs;
  return 0;
}

const struct store_ops plog_ops = {
    .append = plog_append,
    .read = plog_read,
    .lookup_time = plog_lookup_time,
    .flush = plog_flush,
    .truncate = plog_truncate,
    .delete_before = plog_delete_before,
    .reset = plog_reset,
    .retention = plog_retention,
    .retention_point = plog_retention_point,
    .info = plog_info,
    .close = plog_close,
};
