/* segment.c - one segment file of a partition log and its indexes. */
#include "storage/segment.h"

#include "common/err.h"
#include "common/fault.h"
#include "common/fsutil.h"
#include "common/log.h"
#include "format/crc32c.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define SEGMENT_SCAN_CHUNK (1u << 20)

void segment_name(char *buf, int64_t base_offset, const char *ext)
{
  snprintf(buf, SEGMENT_NAME_MAX, "%020lld.%s", (long long)base_offset, ext);
}

bool segment_parse_name(const char *name, const char *ext, int64_t *base_offset)
{
  size_t ext_len = strlen(ext);
  if (strlen(name) != SEGMENT_NAME_DIGITS + 1 + ext_len || name[SEGMENT_NAME_DIGITS] != '.' ||
      strcmp(name + SEGMENT_NAME_DIGITS + 1, ext) != 0) {
    return false;
  }
  uint64_t v = 0;
  for (int i = 0; i < SEGMENT_NAME_DIGITS; i++) {
    if (name[i] < '0' || name[i] > '9') {
      return false;
    }
    if (v > (uint64_t)(INT64_MAX - 9) / 10) {
      return false; /* does not fit an offset */
    }
    v = v * 10 + (uint64_t)(name[i] - '0');
  }
  *base_offset = (int64_t)v;
  return true;
}

static int segment_path(char *buf, size_t n, const char *dir, int64_t base, const char *ext)
{
  char name[SEGMENT_NAME_MAX];
  segment_name(name, base, ext);
  return snprintf(buf, n, "%s/%s", dir, name) >= (int)n ? -ENAMETOOLONG : 0;
}

static struct segment *segment_alloc(const char *dir, int64_t base, uint32_t interval)
{
  struct segment *s = calloc(1, sizeof *s);
  if (s == NULL) {
    return NULL;
  }
  s->dir = strdup(dir);
  if (s->dir == NULL) {
    free(s);
    return NULL;
  }
  s->base_offset = base;
  s->next_offset = base;
  s->max_timestamp = INT64_MIN;
  s->max_ts_rel = -1;
  s->index_interval = interval;
  s->fd = -1;
  s->oix.fd = -1;
  s->tix.fd = -1;
  s->refs = 1;
  return s;
}

static void segment_free(struct segment *s)
{
  if (s->fd >= 0) {
    close(s->fd);
  }
  index_close(&s->oix);
  index_close(&s->tix);
  free(s->dir);
  free(s);
}

/* Opens both index files; *ok false if either had to be reset. */
static int segment_open_indexes(struct segment *s, bool *ok)
{
  char path[PATH_MAX];
  *ok = true;
  int rv = segment_path(path, sizeof path, s->dir, s->base_offset, "index");
  if (rv == 0) {
    rv = index_open(&s->oix, INDEX_OFFSET, path, s->base_offset);
  }
  if (rv == CAIRN_ECORRUPT) {
    *ok = false;
    s->index_malformed = true;
    rv = 0;
  }
  if (rv != 0) {
    return rv;
  }
  rv = segment_path(path, sizeof path, s->dir, s->base_offset, "timeindex");
  if (rv == 0) {
    rv = index_open(&s->tix, INDEX_TIME, path, s->base_offset);
  }
  if (rv == CAIRN_ECORRUPT) {
    *ok = false;
    s->index_malformed = true;
    rv = 0;
  }
  return rv;
}

int segment_create(const char *dir, int64_t base_offset, uint32_t index_interval,
                   struct segment **out)
{
  struct segment *s = segment_alloc(dir, base_offset, index_interval);
  if (s == NULL) {
    return CAIRN_ENOMEM;
  }
  char path[PATH_MAX];
  int rv = segment_path(path, sizeof path, dir, base_offset, "log");
  if (rv == 0) {
    s->fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    rv = s->fd < 0 ? (errno == EEXIST ? CAIRN_EEXIST : -errno) : 0;
  }
  bool ok;
  if (rv == 0) {
    /* Fresh files: stale indexes of an older segment with this base are
     * simply reset by the loader. */
    rv = segment_open_indexes(s, &ok);
  }
  if (rv == 0 && (!ok || s->oix.count > 0 || s->tix.count > 0)) {
    rv = index_clear(&s->oix);
    if (rv == 0) {
      rv = index_clear(&s->tix);
    }
  }
  if (rv != 0) {
    segment_free(s);
    return rv;
  }
  *out = s;
  return 0;
}

int segment_open(const char *dir, int64_t base_offset, uint32_t index_interval,
                 struct segment **out, bool *indexes_ok)
{
  struct segment *s = segment_alloc(dir, base_offset, index_interval);
  if (s == NULL) {
    return CAIRN_ENOMEM;
  }
  char path[PATH_MAX];
  int rv = segment_path(path, sizeof path, dir, base_offset, "log");
  if (rv == 0) {
    s->fd = open(path, O_RDWR | O_CLOEXEC);
    rv = s->fd < 0 ? -errno : 0;
  }
  struct stat st;
  if (rv == 0 && fstat(s->fd, &st) != 0) {
    rv = -errno;
  }
  if (rv == 0) {
    s->size = (uint64_t)st.st_size;
    rv = segment_open_indexes(s, indexes_ok);
  }
  if (rv != 0) {
    segment_free(s);
    return rv;
  }
  /* Both indexes hold an entry for the first batch of a segment that has
   * any: an empty one was missing (index_open just created it) or never
   * written, and trusting it would lose the summary it carries (the time
   * index's last entry is the segment's largest timestamp). */
  if (s->size > 0 && (s->oix.count == 0 || s->tix.count == 0)) {
    *indexes_ok = false;
  }
  *out = s;
  return 0;
}

void segment_ref(struct segment *s) { s->refs++; }

void segment_unref(struct segment *s)
{
  if (--s->refs == 0) {
    segment_free(s);
  }
}

/* Accounts for one batch at pos: sizes, offsets, timestamps and, every
 * index_interval bytes, an index entry. Shared by append and scan so both
 * build exactly the same indexes. */
static int segment_note_batch(struct segment *s, uint64_t pos, const struct batch_header *h)
{
  int64_t rel = h->base_offset - s->base_offset;
  if (h->max_timestamp > s->max_timestamp) {
    s->max_timestamp = h->max_timestamp;
    s->max_ts_rel = rel;
  }
  if (pos == 0 || pos - s->last_indexed >= s->index_interval) {
    struct index_entry last;
    if (!index_last(&s->oix, &last) || (last.key < rel && last.val < pos)) {
      if (index_add(&s->oix, rel, (uint32_t)pos) != 0) {
        return CAIRN_ENOMEM;
      }
    }
    s->last_indexed = pos;
    if (!index_last(&s->tix, &last) ||
        (last.key < s->max_timestamp && last.val < (uint32_t)s->max_ts_rel)) {
      if (index_add(&s->tix, s->max_timestamp, (uint32_t)s->max_ts_rel) != 0) {
        return CAIRN_ENOMEM;
      }
    }
  }
  s->size = pos + batch_total_size(h->batch_length);
  s->next_offset = h->base_offset + h->last_offset_delta + 1;
  if (h->source_index != 0) {
    s->last_index = h->source_index; /* a batch not from Raft applies no index */
  }
  return 0;
}

/* Starts writeback of each full SEGMENT_WRITEBACK_BYTES written, without
 * waiting for it, so the disk works while the loop goes on and a later
 * fsync (roll, flush) finds little left to do. Advisory: a failure
 * changes nothing. */
static void segment_kick_writeback(struct segment *s)
{
  if (s->size - s->kicked_size < SEGMENT_WRITEBACK_BYTES) {
    return;
  }
  int rv = sync_file_range(s->fd, (off_t)s->kicked_size, (off_t)(s->size - s->kicked_size),
                           SYNC_FILE_RANGE_WRITE);
  (void)rv;
  s->kicked_size = s->size;
}

int segment_append(struct segment *s, const struct iovec *iov, const struct batch_header *hdrs,
                   size_t n, int64_t now_ms)
{
  int rv = fault_check(FAULT_SEGMENT_WRITE);
  if (rv != 0) {
    /* Injected failure: leave part of a batch behind, as a real short
     * write followed by an error could. */
    int r2 = fs_pwritev_all(s->fd, iov, 1, (off_t)s->size);
    (void)r2;
    return rv;
  }
  rv = fs_pwritev_all(s->fd, iov, 2 * n, (off_t)s->size);
  if (rv != 0) {
    return rv;
  }
  if (s->size == 0) {
    s->created_ms = now_ms;
  }
  uint64_t pos = s->size;
  for (size_t i = 0; i < n; i++) {
    rv = segment_note_batch(s, pos, &hdrs[i]);
    if (rv != 0) {
      return rv;
    }
    pos += batch_total_size(hdrs[i].batch_length);
  }
  segment_kick_writeback(s);
  return 0;
}

int segment_read_header(const struct segment *s, uint64_t pos, struct batch_header *h)
{
  uint8_t buf[BATCH_HEADER_SIZE];
  size_t got;
  if (pos + BATCH_HEADER_SIZE > s->size) {
    return CAIRN_ETRUNCATED;
  }
  int rv = fs_pread_full(s->fd, buf, sizeof buf, (off_t)pos, &got);
  if (rv != 0) {
    return rv;
  }
  if (got != sizeof buf) {
    return CAIRN_ETRUNCATED;
  }
  batch_header_decode(buf, h);
  return 0;
}

/* Reads headers forward from the batch boundary pos until the batch that
 * satisfies stop(). */
static int segment_walk(const struct segment *s, uint64_t pos,
                        bool (*stop)(const struct batch_header *h, int64_t arg), int64_t arg,
                        uint64_t *at, struct batch_header *h)
{
  while (pos < s->size) {
    int rv = segment_read_header(s, pos, h);
    if (rv != 0) {
      return rv;
    }
    if (stop(h, arg)) {
      *at = pos;
      return 0;
    }
    pos += batch_total_size(h->batch_length);
  }
  return CAIRN_ENOTFOUND;
}

static bool segment_holds_offset(const struct batch_header *h, int64_t offset)
{
  return h->base_offset + h->last_offset_delta >= offset;
}

static bool segment_reaches_time(const struct batch_header *h, int64_t ts)
{
  return h->max_timestamp >= ts;
}

int segment_locate(const struct segment *s, int64_t offset, uint64_t *pos,
                   struct batch_header *h)
{
  if (offset < s->base_offset || offset >= s->next_offset) {
    return CAIRN_EOFFSET;
  }
  struct index_entry e;
  uint64_t start = index_floor(&s->oix, offset - s->base_offset, &e) ? e.val : 0;
  int rv = segment_walk(s, start, segment_holds_offset, offset, pos, h);
  return rv == CAIRN_ENOTFOUND ? CAIRN_ECORRUPT : rv;
}

int segment_span(const struct segment *s, uint64_t pos, size_t max_bytes, uint64_t *end,
                 int64_t *next_offset)
{
  struct batch_header h;
  int rv = segment_read_header(s, pos, &h);
  if (rv != 0) {
    return rv;
  }
  uint64_t e = pos + batch_total_size(h.batch_length);
  int64_t next = h.base_offset + h.last_offset_delta + 1;
  /* Saturated: a caller may ask for "all of it" with SIZE_MAX. */
  uint64_t limit = max_bytes >= s->size - pos ? s->size : pos + max_bytes;
  /* Every indexed position is a batch boundary: jump to the last one
   * within the limit instead of reading each header up to it. */
  struct index_entry ie;
  if (limit < s->size && index_floor_val(&s->oix, (uint32_t)limit, &ie) && ie.val > e) {
    e = ie.val;
    next = s->base_offset + ie.key;
  } else if (limit >= s->size) {
    *end = s->size;
    *next_offset = s->next_offset;
    return 0;
  }
  while (e < s->size) {
    rv = segment_read_header(s, e, &h);
    if (rv != 0) {
      return rv;
    }
    uint64_t after = e + batch_total_size(h.batch_length);
    if (after > limit) {
      break;
    }
    e = after;
    next = h.base_offset + h.last_offset_delta + 1;
  }
  *end = e;
  *next_offset = next;
  return 0;
}

int segment_find_time(const struct segment *s, int64_t ts, uint64_t *pos, struct batch_header *h)
{
  if (s->max_timestamp < ts) {
    return CAIRN_ENOTFOUND;
  }
  /* The last time entry below ts: no batch at or before its batch reaches
   * ts, so the first one that does comes after it. */
  uint64_t start = 0;
  struct index_entry te, oe;
  if (ts > INT64_MIN && index_floor(&s->tix, ts - 1, &te) &&
      index_floor(&s->oix, te.val, &oe)) {
    start = oe.val;
  }
  return segment_walk(s, start, segment_reaches_time, ts, pos, h);
}

/* Re-derives the timestamp summary and index cursor after a truncation by
 * walking the headers that remain. */
static int segment_rescan_headers(struct segment *s)
{
  s->max_timestamp = INT64_MIN;
  s->max_ts_rel = -1;
  s->last_index = 0;
  uint64_t pos = 0;
  struct batch_header h;
  while (pos < s->size) {
    int rv = segment_read_header(s, pos, &h);
    if (rv != 0) {
      return rv;
    }
    if (h.source_index != 0) {
      s->last_index = h.source_index;
    }
    if (h.max_timestamp > s->max_timestamp) {
      s->max_timestamp = h.max_timestamp;
      s->max_ts_rel = h.base_offset - s->base_offset;
    }
    pos += batch_total_size(h.batch_length);
  }
  struct index_entry e;
  s->last_indexed = index_last(&s->oix, &e) ? e.val : 0;
  return 0;
}

int segment_truncate(struct segment *s, uint64_t pos, int64_t next_offset)
{
  if (ftruncate(s->fd, (off_t)pos) != 0 || fdatasync(s->fd) != 0) {
    return -errno;
  }
  s->size = pos;
  s->next_offset = next_offset;
  if (s->crc_prefix_size > pos) {
    s->crc_prefix = 0;
    s->crc_prefix_size = 0;
  }
  if (s->synced_size > pos) {
    s->synced_size = pos;
  }
  if (s->kicked_size > pos) {
    s->kicked_size = pos;
  }
  int rv = index_truncate_val(&s->oix, (uint32_t)pos);
  if (rv == 0) {
    rv = index_truncate_val(&s->tix, (uint32_t)(next_offset - s->base_offset));
  }
  if (rv == 0) {
    rv = segment_rescan_headers(s);
  }
  return rv;
}

/* The scan's reading window over the file. */
struct segment_window {
  uint8_t *buf;
  size_t cap;
  uint64_t start; /* file position of buf[0] */
  size_t len;
};

/* Makes the window hold [pos, pos + need) if the file has it. */
static int segment_window_fill(struct segment *s, struct segment_window *w, uint64_t pos,
                               size_t need, uint64_t file_size)
{
  if (pos >= w->start && pos + need <= w->start + w->len) {
    return 0;
  }
  size_t want = need > SEGMENT_SCAN_CHUNK ? need : SEGMENT_SCAN_CHUNK;
  if (want > w->cap) {
    uint8_t *nb = realloc(w->buf, want);
    if (nb == NULL) {
      return CAIRN_ENOMEM;
    }
    w->buf = nb;
    w->cap = want;
  }
  uint64_t avail = file_size > pos ? file_size - pos : 0;
  size_t n = avail < w->cap ? (size_t)avail : w->cap;
  w->start = pos;
  return fs_pread_full(s->fd, w->buf, n, (off_t)pos, &w->len);
}

/* Is the source index of batch h allowed after the batches before it?
 * prev_batch is the previous batch's source index, last_raft the last
 * non-zero one so far (entries not from Raft carry 0). */
static bool segment_index_in_order(const struct batch_header *h, uint64_t prev_batch,
                                   uint64_t last_raft, bool prev_ended)
{
  if (!prev_ended) {
    return h->source_index == prev_batch; /* the same entry goes on */
  }
  return h->source_index == 0 || h->source_index > last_raft;
}

int segment_scan(struct segment *s, uint64_t pos, int64_t expect_offset, uint64_t prev_index,
                 uint32_t max_batch_bytes, struct segment_scan *out)
{
  struct stat st;
  if (fstat(s->fd, &st) != 0) {
    return -errno;
  }
  memset(out, 0, sizeof *out);
  out->file_size = (uint64_t)st.st_size;
  out->end = out->valid_end = pos;
  out->next_offset = expect_offset;
  out->last_index = prev_index;
  /* The in-memory state follows the scan batch by batch. */
  s->size = pos;
  s->crc_prefix = 0;
  s->crc_prefix_size = 0;
  s->next_offset = expect_offset;
  s->last_index = prev_index;

  struct segment_window w = {0};
  bool ended = true;
  uint64_t idx = prev_index; /* source index of the previous batch */
  uint64_t raft_idx = prev_index;
  int rv = 0;
  char why[160];
  while (pos < out->file_size) {
    rv = segment_window_fill(s, &w, pos, BATCH_HEADER_SIZE, out->file_size);
    if (rv != 0) {
      break;
    }
    const uint8_t *p = w.buf + (pos - w.start);
    size_t have = w.len - (size_t)(pos - w.start);
    size_t size = 0;
    int err = 0;
    enum batch_probe pr = batch_probe(p, have, max_batch_bytes, &size, &err);
    if (pr == BATCH_PROBE_NEED_MORE && size > have) {
      rv = segment_window_fill(s, &w, pos, size, out->file_size);
      if (rv != 0) {
        break;
      }
      p = w.buf + (pos - w.start);
      have = w.len - (size_t)(pos - w.start);
      pr = batch_probe(p, have, max_batch_bytes, &size, &err);
    }
    if (pr == BATCH_PROBE_NEED_MORE) {
      out->damage = CAIRN_ETRUNCATED; /* the file ends inside a batch */
      break;
    }
    if (pr == BATCH_PROBE_BAD || (err = batch_verify(p, size, max_batch_bytes, why,
                                                        sizeof why)) != 0) {
      out->damage = err;
      break;
    }
    struct batch_header h;
    batch_header_decode(p, &h);
    if (h.base_offset != s->next_offset || !segment_index_in_order(&h, idx, raft_idx, ended)) {
      out->damage = CAIRN_ECORRUPT;
      break;
    }
    rv = segment_note_batch(s, pos, &h);
    if (rv != 0) {
      break;
    }
    pos += size;
    idx = h.source_index;
    raft_idx = idx != 0 ? idx : raft_idx;
    ended = (h.entry_flags & BATCH_FLAG_ENTRY_END) != 0;
    out->valid_end = pos;
    if (ended) {
      out->end = pos;
      out->next_offset = s->next_offset;
      out->last_index = raft_idx;
      out->incomplete = 0;
    } else {
      out->incomplete++;
    }
  }
  if (out->damage != 0) {
    out->damage_pos = pos;
  }
  free(w.buf);
  return rv;
}

void segment_trust_disk(struct segment *s)
{
  s->synced_size = s->size;
  index_trust_disk(&s->oix);
  index_trust_disk(&s->tix);
}

int segment_sync(struct segment *s)
{
  int rv = index_persist(&s->oix, true);
  if (rv == 0) {
    rv = index_persist(&s->tix, true);
  }
  if (rv == 0 && s->synced_size != s->size) {
    rv = fault_check(FAULT_SEGMENT_SYNC);
    if (rv == 0 && fdatasync(s->fd) != 0) {
      rv = -errno;
    }
  }
  if (rv == 0) {
    s->synced_size = s->size;
  }
  return rv;
}

int segment_sync_capture(struct segment *s, struct segment_sync *ss)
{
  int rv = index_persist(&s->oix, false);
  if (rv == 0) {
    rv = index_persist(&s->tix, false);
  }
  if (rv != 0) {
    return rv;
  }
  /* An index file is open only while a sync is owed to it (index.h): the
   * pins keep the ones this sync needs open until segment_sync_release. */
  bool sync_oix = s->oix.synced != s->oix.persisted;
  bool sync_tix = s->tix.synced != s->tix.persisted;
  int oix_fd = -1, tix_fd = -1;
  if (sync_oix && (rv = index_pin(&s->oix, &oix_fd)) != 0) {
    return rv;
  }
  if (sync_tix && (rv = index_pin(&s->tix, &tix_fd)) != 0) {
    if (sync_oix) {
      index_unpin(&s->oix);
    }
    return rv;
  }
  memset(ss, 0, sizeof *ss);
  ss->sync_oix = sync_oix;
  ss->sync_tix = sync_tix;
  ss->oix_fd = oix_fd;
  ss->tix_fd = tix_fd;
  segment_ref(s);
  ss->s = s;
  ss->fd = s->fd;
  ss->base_offset = s->base_offset;
  ss->next_offset = s->next_offset;
  ss->last_index = s->last_index;
  ss->size = s->size;
  ss->oix_persisted = s->oix.persisted;
  ss->tix_persisted = s->tix.persisted;
  ss->sync_log = s->synced_size != s->size;
  ss->crc = s->crc_prefix;
  ss->crc_size = s->crc_prefix_size;
  return 0;
}

static int segment_fdatasync(int fd)
{
  int rv = fault_check(FAULT_SEGMENT_SYNC);
  if (rv == 0 && fdatasync(fd) != 0) {
    rv = -errno;
  }
  return rv;
}

int segment_sync_run(struct segment_sync *ss)
{
  int rv = 0;
  if (ss->sync_oix) {
    rv = segment_fdatasync(ss->oix_fd);
  }
  if (rv == 0 && ss->sync_tix) {
    rv = segment_fdatasync(ss->tix_fd);
  }
  if (rv == 0 && ss->sync_log) {
    rv = segment_fdatasync(ss->fd);
  }
  return rv;
}

int segment_crc_extend(int fd, uint32_t crc, uint64_t from, uint64_t to, uint32_t *out)
{
  enum { CHUNK = 1 << 20 };
  uint8_t *buf = from < to ? malloc(CHUNK) : NULL;
  if (from < to && buf == NULL) {
    return CAIRN_ENOMEM;
  }
  int rv = 0;
  while (rv == 0 && from < to) {
    size_t want = to - from < CHUNK ? (size_t)(to - from) : CHUNK;
    size_t got = 0;
    rv = fs_pread_full(fd, buf, want, (off_t)from, &got);
    if (rv == 0 && got != want) {
      rv = CAIRN_ETRUNCATED;
    }
    if (rv == 0) {
      crc = crc32c_extend(crc, buf, got);
      from += got;
    }
  }
  free(buf);
  *out = crc;
  return rv;
}

int segment_sync_crc(struct segment_sync *ss)
{
  if (ss->crc_size > ss->size) {
    ss->crc = 0; /* cached beyond what is captured: cannot be (no truncation), start over */
    ss->crc_size = 0;
  }
  uint32_t crc;
  int rv = segment_crc_extend(ss->fd, ss->crc, ss->crc_size, ss->size, &crc);
  if (rv == 0) {
    ss->crc = crc;
    ss->crc_size = ss->size;
  }
  return rv;
}

void segment_sync_commit(const struct segment_sync *ss)
{
  struct segment *s = ss->s;
  if (s->synced_size < ss->size) {
    s->synced_size = ss->size;
  }
  index_note_synced(&s->oix, ss->oix_persisted);
  index_note_synced(&s->tix, ss->tix_persisted);
  if (ss->crc_size == ss->size && ss->crc_size > s->crc_prefix_size && ss->size <= s->size) {
    s->crc_prefix = ss->crc;
    s->crc_prefix_size = ss->crc_size;
  }
}

void segment_sync_release(struct segment_sync *ss)
{
  if (ss->s != NULL) {
    if (ss->sync_oix) {
      index_unpin(&ss->s->oix);
    }
    if (ss->sync_tix) {
      index_unpin(&ss->s->tix);
    }
    segment_unref(ss->s);
    ss->s = NULL;
  }
}

int segment_remove(struct segment *s, const char *dir)
{
  static const char *const exts[] = {"log", "index", "timeindex"};
  int rv = 0;
  for (size_t i = 0; i < 3; i++) {
    char path[PATH_MAX];
    int r = segment_path(path, sizeof path, dir, s->base_offset, exts[i]);
    if (r == 0 && unlink(path) != 0 && errno != ENOENT) {
      r = -errno;
    }
    if (r != 0 && rv == 0) {
      rv = r;
    }
  }
  s->removed = true;
  return rv;
}

int segment_check_tail(struct segment *s, uint32_t max_batch_bytes)
{
  uint64_t file_size = s->size; /* segment_open set it from the file */
  uint64_t pos = 0;
  int64_t expect = s->base_offset;
  struct index_entry oe, te;
  if (index_last(&s->oix, &oe)) {
    if (oe.val >= file_size) {
      return CAIRN_ECORRUPT;
    }
    pos = oe.val;
    expect = s->base_offset + oe.key;
  }
  s->last_indexed = pos;
  if (index_last(&s->tix, &te)) {
    s->max_timestamp = te.key;
    s->max_ts_rel = te.val;
  }
  struct segment_scan scan;
  int rv = segment_scan(s, pos, expect, 0, max_batch_bytes, &scan);
  if (rv != 0) {
    return rv;
  }
  /* A closed segment ends with a whole Raft entry, and its time index
   * points at batches it holds. */
  if (scan.damage != 0 || scan.end != file_size ||
      (s->max_ts_rel >= 0 && s->base_offset + s->max_ts_rel >= s->next_offset)) {
    return CAIRN_ECORRUPT;
  }
  /* The tail held only batches not from Raft: the segment's last Raft
   * index, if any, is before it. Rare, so read the headers for it. */
  if (s->last_index == 0 && pos > 0) {
    return segment_rescan_headers(s);
  }
  return 0;
}
