/* plog_recover.c - opening a partition log: list the directory, check or
 * scan each segment, cut a torn or corrupt tail, rebuild indexes, and leave
 * a log whose every batch is valid, in sequence and part of a whole Raft
 * entry. See plog.h for the invariants this restores. */
#include "storage/plog_internal.h"

#include "common/err.h"
#include "common/fsutil.h"
#include "common/log.h"
#include "storage/checkpoint.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* What the directory listing found. */
struct plog_listing {
  int64_t *bases; /* .log files, sorted */
  size_t n;
  size_t cap;
};

static int plog_listing_add(struct plog_listing *l, int64_t base)
{
  if (l->n == l->cap) {
    size_t cap = l->cap ? l->cap * 2 : 16;
    int64_t *nb = realloc(l->bases, cap * sizeof *nb);
    if (nb == NULL) {
      return CAIRN_ENOMEM;
    }
    l->bases = nb;
    l->cap = cap;
  }
  l->bases[l->n++] = base;
  return 0;
}

static bool plog_listing_has(const struct plog_listing *l, int64_t base)
{
  for (size_t i = 0; i < l->n; i++) {
    if (l->bases[i] == base) {
      return true;
    }
  }
  return false;
}

static int plog_cmp_base(const void *a, const void *b)
{
  int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return x < y ? -1 : x > y;
}

static bool plog_is_index_name(const char *name, int64_t *base)
{
  return segment_parse_name(name, "index", base) || segment_parse_name(name, "timeindex", base);
}

static void plog_unlink(struct plog *pl, const char *name, const char *why)
{
  char path[PATH_MAX];
  snprintf(path, sizeof path, "%s/%s", pl->dir, name);
  if (unlink(path) == 0) {
    log_info("plog", "%s: removed %s (%s)", pl->dir, name, why);
    pl->dir_dirty = true;
  }
}

/* A directory or device named like a segment is not one. */
static bool plog_is_regular(int dfd, const char *name)
{
  struct stat st;
  return fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode);
}

/* Lists the segment files; warns about and skips everything unknown. */
static int plog_list(struct plog *pl, struct plog_listing *l)
{
  DIR *d = opendir(pl->dir);
  if (d == NULL) {
    return -errno;
  }
  int rv = 0;
  struct dirent *e;
  while (rv == 0 && (e = readdir(d)) != NULL) {
    const char *name = e->d_name;
    int64_t base;
    size_t len = strlen(name);
    if (strcmp(name, ".") == 0 || strcmp(name, "..") == 0 || strcmp(name, CHECKPOINT_FILE) == 0 ||
        plog_is_index_name(name, &base)) {
      continue;
    }
    if (segment_parse_name(name, "log", &base) && plog_is_regular(dirfd(d), name)) {
      rv = plog_listing_add(l, base);
    } else if (len > 4 && strcmp(name + len - 4, ".tmp") == 0) {
      plog_unlink(pl, name, "left over from an interrupted write");
    } else {
      log_warn("plog", "%s: ignoring unknown file '%s'", pl->dir, name);
      pl->rec.files_ignored++;
    }
  }
  closedir(d);
  if (rv == 0 && l->n > 1) {
    qsort(l->bases, l->n, sizeof *l->bases, plog_cmp_base);
  }
  return rv;
}

/* Index files whose segment is gone are derived data of nothing. */
static void plog_remove_orphan_indexes(struct plog *pl, const struct plog_listing *l)
{
  DIR *d = opendir(pl->dir);
  if (d == NULL) {
    return;
  }
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    int64_t base;
    if (plog_is_index_name(e->d_name, &base) && !plog_listing_has(l, base)) {
      plog_unlink(pl, e->d_name, "index of a missing segment");
    }
  }
  closedir(d);
}

/* Full scan of a segment with rebuilt indexes, cutting what is not whole.
 * Returns 0 with *damaged true if anything was cut. */
static int plog_scan_segment(struct plog *pl, struct segment *s, uint64_t prev_index,
                             bool *damaged)
{
  int rv = index_clear(&s->oix);
  if (rv == 0) {
    rv = index_clear(&s->tix);
  }
  if (rv != 0) {
    return rv;
  }
  s->last_indexed = 0;
  s->max_timestamp = INT64_MIN;
  s->max_ts_rel = -1;
  struct segment_scan scan;
  rv = segment_scan(s, 0, s->base_offset, prev_index, pl->opts.max_batch_bytes, &scan);
  if (rv != 0) {
    return rv;
  }
  pl->rec.segments_scanned++;
  *damaged = scan.end != scan.file_size;
  if (!*damaged) {
    return 0;
  }
  log_warn("plog",
           "%s: segment %020lld: %s at byte %llu; keeping %llu of %llu bytes (offsets up to %lld)"
           "%s",
           pl->dir, (long long)s->base_offset,
           scan.damage ? cairn_strerror(scan.damage) : "an incomplete Raft entry",
           (unsigned long long)(scan.damage ? scan.damage_pos : scan.end),
           (unsigned long long)scan.end, (unsigned long long)scan.file_size,
           (long long)scan.next_offset - 1,
           scan.incomplete ? ", dropping the batches of an entry cut short" : "");
  pl->rec.bytes_truncated += scan.file_size - scan.end;
  pl->rec.batches_truncated += scan.incomplete;
  return segment_truncate(s, scan.end, scan.next_offset);
}

/* Opens segment base and makes it whole: a cheap tail check for closed,
 * flushed segments with sound indexes, a full scan otherwise. */
static int plog_recover_segment(struct plog *pl, int64_t base, bool full, uint64_t prev_index,
                                struct segment **out, bool *damaged)
{
  struct segment *s;
  bool indexes_ok;
  int rv = segment_open(pl->dir, base, pl->opts.index_interval, &s, &indexes_ok);
  if (rv != 0) {
    plog_set_errmsg(pl, "%s: opening segment %020lld: %s", pl->dir, (long long)base,
                    cairn_strerror(rv));
    return rv;
  }
  *damaged = false;
  if (!indexes_ok) {
    pl->rec.indexes_rebuilt++;
    /* Index entries reach the files at the log's flushes; on the node's
     * Raft log a replica's partition log is flushed lazily, so after a
     * crash an active segment's indexes are often not written yet: that
     * is expected, a malformed file is not. */
    if (s->index_malformed) {
      log_warn("plog", "%s: segment %020lld: index malformed, rebuilding", pl->dir,
               (long long)base);
    } else {
      log_info("plog", "%s: segment %020lld: index not written yet, rebuilding", pl->dir,
               (long long)base);
    }
  }
  if (!full && indexes_ok) {
    rv = segment_check_tail(s, pl->opts.max_batch_bytes);
    if (rv == CAIRN_ECORRUPT) {
      log_warn("plog", "%s: segment %020lld: index disagrees with the log, rebuilding", pl->dir,
               (long long)base);
      pl->rec.indexes_rebuilt++;
      full = true;
      rv = 0;
    }
  } else {
    full = true;
  }
  if (rv == 0 && full) {
    rv = plog_scan_segment(pl, s, prev_index, damaged);
  }
  if (rv != 0) {
    plog_set_errmsg(pl, "%s: recovering segment %020lld: %s", pl->dir, (long long)base,
                    cairn_strerror(rv));
    segment_unref(s);
    return rv;
  }
  *out = s;
  return 0;
}

/* Removes the listed segments from i on: they follow damage or a gap, so
 * their offsets cannot be reached without a hole. */
static void plog_drop_listed(struct plog *pl, const struct plog_listing *l, size_t i,
                             const char *why)
{
  static const char *const exts[] = {"log", "index", "timeindex"};
  for (; i < l->n; i++) {
    log_error("plog", "%s: removing segment %020lld: %s", pl->dir, (long long)l->bases[i], why);
    for (size_t k = 0; k < 3; k++) {
      char name[SEGMENT_NAME_MAX];
      segment_name(name, l->bases[i], exts[k]);
      plog_unlink(pl, name, why);
    }
    pl->rec.segments_dropped++;
  }
}

/* Index of the first segment to scan in full: the one holding the
 * checkpoint's durable offset (earlier ones were fsynced when rolled). */
static size_t plog_first_unflushed(const struct plog_listing *l, bool have_cp,
                                   const struct checkpoint *cp)
{
  if (!have_cp) {
    return 0;
  }
  size_t first = 0;
  for (size_t i = 0; i < l->n; i++) {
    if (l->bases[i] <= cp->durable_offset) {
      first = i;
    }
  }
  return first;
}

static int plog_read_checkpoint(struct plog *pl, struct checkpoint *cp, bool *have_cp)
{
  int rv = checkpoint_read(pl->dir, cp);
  *have_cp = rv == 0;
  if (rv == -ENOENT) {
    return 0;
  }
  if (rv == CAIRN_ECORRUPT) {
    log_warn("plog", "%s: checkpoint is corrupt, scanning every segment", pl->dir);
    return 0;
  }
  if (rv != 0) {
    plog_set_errmsg(pl, "%s: reading the checkpoint: %s", pl->dir, cairn_strerror(rv));
  }
  return rv;
}

/* Sets start, next and last index from the recovered segments. */
static void plog_settle_offsets(struct plog *pl, bool have_cp, const struct checkpoint *cp)
{
  struct segment *last = pl->segs[pl->nsegs - 1];
  pl->next_offset = last->next_offset;
  pl->start_offset = pl->segs[0]->base_offset;
  if (have_cp && cp->start_offset > pl->start_offset) {
    pl->start_offset = cp->start_offset < pl->next_offset ? cp->start_offset : pl->next_offset;
  }
  pl->last_index = 0;
  for (size_t i = pl->nsegs; i-- > 0;) {
    if (pl->segs[i]->last_index != 0) { /* batches not from Raft carry none */
      pl->last_index = pl->segs[i]->last_index;
      break;
    }
  }
  /* An empty log after a snapshot reset: the checkpoint's index, unless
   * the checkpoint names batches the log no longer has (then the entries
   * it counts as applied are gone, and claiming them would keep Raft from
   * applying them again). */
  bool lost = have_cp && cp->durable_offset > pl->next_offset;
  if (pl->last_index == 0 && have_cp && !lost) {
    pl->last_index = cp->durable_index;
  }
  if (lost) {
    log_error("plog", "%s: the checkpoint says offsets below %lld were durable but the log "
              "ends at %lld: data was lost below the file system",
              pl->dir, (long long)cp->durable_offset, (long long)pl->next_offset);
  }
  pl->durable_offset = pl->start_offset;
  pl->durable_index = 0;
}

/* Walks the listed segments in order, keeping the contiguous, valid prefix. */
static int plog_recover_segments(struct plog *pl, const struct plog_listing *l, size_t first_full)
{
  uint64_t prev_index = 0;
  for (size_t i = 0; i < l->n; i++) {
    if (pl->nsegs > 0 && l->bases[i] != pl->segs[pl->nsegs - 1]->next_offset) {
      plog_drop_listed(pl, l, i, "it does not follow the previous segment's last offset");
      break;
    }
    struct segment *s;
    bool damaged;
    int rv = plog_recover_segment(pl, l->bases[i], i >= first_full, prev_index, &s, &damaged);
    if (rv != 0) {
      return rv;
    }
    rv = plog_push_segment(pl, s);
    if (rv != 0) {
      segment_unref(s);
      return rv;
    }
    if (s->last_index != 0) {
      prev_index = s->last_index;
    }
    if (damaged && i + 1 < l->n) {
      plog_drop_listed(pl, l, i + 1, "it follows a damaged segment");
      break;
    }
  }
  return 0;
}

/* The disk already holds what recovery kept (plog_opts.disk_synced: a
 * syncfs after the writer stopped, and recovery cut nothing): every
 * segment's bytes count as synced and the log as durable to its end. The
 * checkpoint still names the old durable offset, so a crash before the
 * next flush scans the same segments again; the indexes rebuilt here are
 * written and synced by that flush, before the checkpoint that covers
 * them. A recovery that cut a tail or dropped segments syncs as usual
 * (false): its truncations are not covered by the syncfs. */
static bool plog_trust_disk(struct plog *pl)
{
  if (!pl->opts.disk_synced || pl->rec.bytes_truncated != 0 || pl->rec.batches_truncated != 0 ||
      pl->rec.segments_dropped != 0) {
    return false;
  }
  for (size_t i = 0; i < pl->nsegs; i++) {
    segment_trust_disk(pl->segs[i]);
  }
  pl->durable_offset = pl->next_offset;
  pl->durable_index = pl->last_index;
  return true;
}

int plog_recover(struct plog *pl)
{
  struct plog_listing l = {0};
  struct checkpoint cp;
  bool have_cp;
  int rv = plog_read_checkpoint(pl, &cp, &have_cp);
  if (rv == 0) {
    rv = plog_list(pl, &l);
  }
  if (rv == 0) {
    rv = plog_recover_segments(pl, &l, plog_first_unflushed(&l, have_cp, &cp));
  }
  if (rv == 0) {
    plog_remove_orphan_indexes(pl, &l);
  }
  free(l.bases);
  if (rv != 0) {
    return rv;
  }
  if (pl->nsegs == 0) {
    int64_t start = have_cp ? cp.start_offset : 0;
    if (have_cp && cp.durable_offset > start) {
      log_error("plog", "%s: no segment files, yet the checkpoint says offsets below %lld "
                "were durable", pl->dir, (long long)cp.durable_offset);
    }
    struct segment *s;
    rv = segment_create(pl->dir, start, pl->opts.index_interval, &s);
    if (rv == 0 && (rv = plog_push_segment(pl, s)) != 0) {
      segment_unref(s);
    }
    if (rv != 0) {
      plog_set_errmsg(pl, "%s: creating the first segment: %s", pl->dir, cairn_strerror(rv));
      return rv;
    }
    pl->dir_dirty = true;
  }
  plog_settle_offsets(pl, have_cp, &cp);
  if (plog_trust_disk(pl)) {
    return 0;
  }
  /* Everything kept is now made durable, so the checkpoint can say so. */
  rv = plog_do_flush(pl, pl->next_offset);
  if (rv == 0 && pl->durable_offset < pl->next_offset) {
    pl->durable_offset = pl->next_offset;
    pl->durable_index = pl->last_index;
  }
  return rv;
}

int plog_open(const char *dir, const struct plog_opts *opts, struct store **out, char *errmsg,
              size_t errmsg_len)
{
  struct plog *pl = calloc(1, sizeof *pl);
  if (pl == NULL) {
    return CAIRN_ENOMEM;
  }
  pl->base.ops = &plog_ops;
  plog_opts_default(&pl->opts);
  if (opts != NULL) {
    struct plog_opts d = pl->opts;
    pl->opts = *opts;
    if (pl->opts.segment_bytes == 0) pl->opts.segment_bytes = d.segment_bytes;
    if (pl->opts.index_interval == 0) pl->opts.index_interval = d.index_interval;
    if (pl->opts.max_batch_bytes == 0) pl->opts.max_batch_bytes = d.max_batch_bytes;
    if (pl->opts.now_ms == NULL) pl->opts.now_ms = d.now_ms;
  }
  if (pl->opts.segment_bytes > PLOG_MAX_SEGMENT_BYTES) {
    pl->opts.segment_bytes = PLOG_MAX_SEGMENT_BYTES;
  }
  store_set_retention(&pl->base, pl->opts.retention_bytes, pl->opts.retention_ms);
  int rv = CAIRN_ENOMEM;
  pl->dir = strdup(dir);
  if (pl->dir != NULL) {
    rv = fs_mkdir_p(dir);
    if (rv != 0) {
      plog_set_errmsg(pl, "%s: creating the directory: %s", dir, cairn_strerror(rv));
    }
  }
  if (rv == 0) {
    rv = plog_recover(pl);
  }
  if (rv != 0) {
    if (errmsg != NULL) {
      snprintf(errmsg, errmsg_len, "%s", pl->base.errmsg[0] ? pl->base.errmsg : cairn_strerror(rv));
    }
    pl->base.fatal = true; /* close without flushing a half-recovered log */
    plog_ops.close(&pl->base);
    return rv;
  }
  if (pl->rec.bytes_truncated || pl->rec.segments_dropped || pl->rec.indexes_rebuilt) {
    /* Only indexes rebuilt: what a crash leaves (see plog_recover_segment). */
    bool cut = pl->rec.bytes_truncated || pl->rec.segments_dropped;
    log_write(cut ? LOG_WARN : LOG_INFO, "plog",
           "%s: recovered: %u segment(s) scanned, %u index(es) rebuilt, %llu byte(s) cut, %u "
           "segment(s) removed; log is [%lld, %lld)",
           dir, pl->rec.segments_scanned, pl->rec.indexes_rebuilt,
           (unsigned long long)pl->rec.bytes_truncated, pl->rec.segments_dropped,
           (long long)pl->start_offset, (long long)pl->next_offset);
  }
  *out = &pl->base;
  return 0;
}
