/* raft_files.c - checks (and repairs a torn tail of) a raft_uv directory
 * before raft 0.15 loads it. See raft_files.h for the format and the rules;
 * the format was read in canonical/raft v0.15.0's uv_segment.c,
 * uv_encoding.c, uv_metadata.c, uv_snapshot.c and uv_list.c. */
#include "cluster/raft_files.h"

#include "common/err.h"
#include "common/fsutil.h"
#include "format/endian.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define RAFT_FILES_PREAMBLE 16 /* two crc32 and the entry count */
#define RAFT_FILES_ENTRY_HEADER 16
#define RAFT_FILES_METADATA_SIZE 32
#define RAFT_FILES_SNAPSHOT_HEADER 32
#define RAFT_FILES_MAX_CONF ((uint64_t)1024 * 1024)
#define RAFT_FILES_MAX_SEGMENTS 100000

/* ---- checksum ---- */

static uint32_t raft_files_crc_table[256];
static pthread_once_t raft_files_crc_once = PTHREAD_ONCE_INIT;

/* raft's CRC is the MSB-first form (libiberty's crc32), not zlib's. */
static void raft_files_crc_init(void)
{
  for (uint32_t i = 0; i < 256; i++) {
    uint32_t c = i << 24;
    for (int k = 0; k < 8; k++) {
      c = (c & 0x80000000u) ? (c << 1) ^ 0x04c11db7u : c << 1;
    }
    raft_files_crc_table[i] = c;
  }
}

uint32_t raft_files_crc32(const void *p, size_t n, uint32_t crc)
{
  pthread_once(&raft_files_crc_once, raft_files_crc_init);
  const uint8_t *b = p;
  for (size_t i = 0; i < n; i++) {
    crc = (crc << 8) ^ raft_files_crc_table[((crc >> 24) ^ b[i]) & 0xff];
  }
  return crc;
}

/* ---- one batch ---- */

/* Checks the batch at off; on success *end is the byte after it and *n its
 * entry count. Returns false with why filled otherwise. Mirrors
 * uvLoadEntriesBatch and uvDecodeBatchHeader, so a batch accepted here is
 * one raft accepts. */
static bool raft_files_batch(const uint8_t *buf, size_t len, size_t off, size_t *end, uint64_t *n,
                             char *why, size_t why_len)
{
  if (len - off < RAFT_FILES_PREAMBLE) {
    snprintf(why, why_len, "only %zu bytes left for a %d-byte batch preamble", len - off,
             RAFT_FILES_PREAMBLE);
    return false;
  }
  uint64_t count = le_get64(buf + off + 8);
  if (count == 0 || count > RAFT_FILES_MAX_BATCH_ENTRIES) {
    snprintf(why, why_len, "implausible entry count %" PRIu64, count);
    return false;
  }
  size_t header_len = 8 + RAFT_FILES_ENTRY_HEADER * (size_t)count;
  if (len - off - 8 < header_len) {
    snprintf(why, why_len, "header of %" PRIu64 " entries runs past the end of the file", count);
    return false;
  }
  const uint8_t *header = buf + off + 8;
  if (raft_files_crc32(header, header_len, 0) != le_get32(buf + off)) {
    snprintf(why, why_len, "header checksum mismatch");
    return false;
  }
  size_t data_len = 0;
  for (uint64_t i = 0; i < count; i++) {
    const uint8_t *e = header + 8 + RAFT_FILES_ENTRY_HEADER * i;
    uint8_t type = e[8];
    if (type < 1 || type > 3) { /* RAFT_COMMAND, RAFT_BARRIER, RAFT_CHANGE */
      snprintf(why, why_len, "entry %" PRIu64 " has unknown type %u", i, type);
      return false;
    }
    data_len += le_get32(e + 12);
  }
  size_t data_at = off + 8 + header_len;
  if (len - data_at < data_len) {
    snprintf(why, why_len, "data of %zu bytes runs past the end of the file", data_len);
    return false;
  }
  if (raft_files_crc32(buf + data_at, data_len, 0) != le_get32(buf + off + 4)) {
    snprintf(why, why_len, "data checksum mismatch");
    return false;
  }
  *end = data_at + data_len;
  *n = count;
  return true;
}

/* ---- one segment ---- */

static bool raft_files_all_zero(const uint8_t *buf, size_t from, size_t len)
{
  for (size_t i = from; i < len; i++) {
    if (buf[i] != 0) {
      return false;
    }
  }
  return true;
}

/* The first 8-byte aligned offset after from where a whole valid batch
 * starts, or 0. Batches are 8-aligned because raft pads every entry. */
static size_t raft_files_next_valid(const uint8_t *buf, size_t len, size_t from)
{
  char why[128];
  for (size_t off = (from + 8) & ~(size_t)7; off + RAFT_FILES_PREAMBLE <= len; off += 8) {
    size_t end;
    uint64_t n;
    if (raft_files_batch(buf, len, off, &end, &n, why, sizeof why)) {
      return off;
    }
  }
  return 0;
}

static void raft_files_bad(struct raft_files_scan *s, const uint8_t *buf, size_t len, bool open,
                           size_t at)
{
  s->bad_at = at;
  s->valid_after = raft_files_next_valid(buf, len, at);
  s->verdict = open && s->valid_after == 0 ? RAFT_FILES_TORN : RAFT_FILES_DAMAGED;
}

/* Walks the batches from byte 8 on; stops at the end, at an open
 * segment's zero end marker, or at the first bad batch. */
static void raft_files_walk(const uint8_t *buf, size_t len, bool open, struct raft_files_scan *s)
{
  size_t off = 8;
  s->good_end = off;
  while (off < len) {
    if (open && len - off >= RAFT_FILES_PREAMBLE && le_get64(buf + off + 8) == 0 &&
        raft_files_all_zero(buf, off, len)) {
      return; /* the preallocated zero tail: raft stops here too */
    }
    size_t end;
    uint64_t n;
    if (!raft_files_batch(buf, len, off, &end, &n, s->why, sizeof s->why)) {
      if (open && raft_files_all_zero(buf, off, len)) {
        /* Zeros too short for raft's preamble read: it would fail the
         * read (and free the buffer twice). Cut them. */
        snprintf(s->why, sizeof s->why, "%zu zero bytes, short of a batch preamble", len - off);
      }
      raft_files_bad(s, buf, len, open, off);
      return;
    }
    s->entries += n;
    s->batches++;
    off = end;
    s->good_end = off;
  }
}

void raft_files_scan(const uint8_t *buf, size_t len, bool open, uint64_t want_entries,
                     struct raft_files_scan *s)
{
  memset(s, 0, sizeof *s);
  s->verdict = RAFT_FILES_CLEAN;
  if (len == 0) {
    if (!open) {
      snprintf(s->why, sizeof s->why, "closed segment is empty");
      s->verdict = RAFT_FILES_DAMAGED;
    }
    return; /* an empty open segment: raft removes it */
  }
  uint64_t format = len >= 8 ? le_get64(buf) : 0;
  if (open && format == 0 && raft_files_all_zero(buf, 0, len)) {
    return; /* allocated, never written: raft removes it */
  }
  if (len < 8 || format != RAFT_FILES_FORMAT) {
    if (len < 8) {
      snprintf(s->why, sizeof s->why, "file of %zu bytes, short of the format word", len);
    } else {
      snprintf(s->why, sizeof s->why, "format version %" PRIu64 ", not %d", format,
               RAFT_FILES_FORMAT);
    }
    raft_files_bad(s, buf, len, open, 0);
    return;
  }
  raft_files_walk(buf, len, open, s);
  if (s->verdict == RAFT_FILES_CLEAN && !open && want_entries != 0 && s->entries != want_entries) {
    snprintf(s->why, sizeof s->why, "%" PRIu64 " entries, its name says %" PRIu64, s->entries,
             want_entries);
    s->bad_at = len;
    s->verdict = RAFT_FILES_DAMAGED;
  }
  if (s->verdict == RAFT_FILES_CLEAN && !open && s->batches == 0) {
    snprintf(s->why, sizeof s->why, "closed segment holds no batch");
    s->bad_at = 8;
    s->verdict = RAFT_FILES_DAMAGED;
  }
}

/* ---- the directory ---- */

/* A segment or snapshot file found in the directory. */
struct raft_files_entry {
  char name[64];
  bool open;
  uint64_t a, b, c; /* open: counter; closed: first, last; snapshot: term, index, ms */
};

struct raft_files_dir {
  const char *dir;
  struct raft_files_report *rep;
  struct raft_files_entry *segs; /* closed ones, then open ones */
  size_t nsegs;
  struct raft_files_entry snap; /* the newest snapshot's .meta, if has_snap */
  bool has_snap;
  unsigned metadata_files; /* metadata1/2 present (any size) */
};

static int raft_files_fail(struct raft_files_dir *d, int rv, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int raft_files_fail(struct raft_files_dir *d, int rv, const char *fmt, ...)
{
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(d->rep->errmsg, sizeof d->rep->errmsg, fmt, ap);
  va_end(ap);
  return rv;
}

/* Parses decimal digits at *p; advances *p. False if there are none. */
static bool raft_files_u64(const char **p, uint64_t *v)
{
  const char *s = *p;
  uint64_t x = 0;
  while (*s >= '0' && *s <= '9') {
    if (x > (UINT64_MAX - 9) / 10) {
      return false;
    }
    x = x * 10 + (uint64_t)(*s - '0');
    s++;
  }
  if (s == *p) {
    return false;
  }
  *p = s;
  *v = x;
  return true;
}

/* Names raft_uv's UvList takes as segments: "open-N" and "S-E". */
static bool raft_files_parse_segment(const char *name, struct raft_files_entry *e)
{
  const char *p = name;
  memset(e, 0, sizeof *e);
  if (strncmp(p, "open-", 5) == 0) {
    p += 5;
    e->open = true;
    return raft_files_u64(&p, &e->a) && *p == '\0';
  }
  return raft_files_u64(&p, &e->a) && *p++ == '-' && raft_files_u64(&p, &e->b) && *p == '\0';
}

/* "snapshot-T-I-MS.meta". */
static bool raft_files_parse_snapshot_meta(const char *name, struct raft_files_entry *e)
{
  const char *p = name;
  memset(e, 0, sizeof *e);
  if (strncmp(p, "snapshot-", 9) != 0) {
    return false;
  }
  p += 9;
  return raft_files_u64(&p, &e->a) && *p++ == '-' && raft_files_u64(&p, &e->b) && *p++ == '-' &&
         raft_files_u64(&p, &e->c) && strcmp(p, ".meta") == 0;
}

/* Like raft (UvSnapshotInfoAppendIfMatch), a snapshot counts only if its
 * data file exists and is not empty. */
static bool raft_files_snapshot_complete(const char *dir, const char *meta_name)
{
  char path[PATH_MAX];
  int n = snprintf(path, sizeof path, "%s/%.*s", dir, (int)(strlen(meta_name) - 5), meta_name);
  struct stat st;
  return n < (int)sizeof path && stat(path, &st) == 0 && st.st_size > 0;
}

static bool raft_files_snapshot_newer(const struct raft_files_entry *x,
                                      const struct raft_files_entry *y)
{
  if (x->a != y->a) {
    return x->a > y->a;
  }
  return x->b != y->b ? x->b > y->b : x->c > y->c;
}

/* Closed segments first (by first index), then open ones (by counter):
 * raft's load order. */
static int raft_files_seg_cmp(const void *p1, const void *p2)
{
  const struct raft_files_entry *x = p1, *y = p2;
  if (x->open != y->open) {
    return x->open ? 1 : -1;
  }
  return x->a < y->a ? -1 : x->a > y->a;
}

static int raft_files_add_segment(struct raft_files_dir *d, const struct raft_files_entry *e)
{
  if (d->nsegs == RAFT_FILES_MAX_SEGMENTS) {
    return raft_files_fail(d, CAIRN_ERAFTFILES, "%s: more than %d segment files", d->dir,
                           RAFT_FILES_MAX_SEGMENTS);
  }
  if ((d->nsegs & (d->nsegs - 1)) == 0) { /* grow at powers of two */
    size_t cap = d->nsegs == 0 ? 16 : d->nsegs * 2;
    struct raft_files_entry *v = realloc(d->segs, cap * sizeof *v);
    if (v == NULL) {
      return raft_files_fail(d, CAIRN_ENOMEM, "%s: out of memory", d->dir);
    }
    d->segs = v;
  }
  d->segs[d->nsegs++] = *e;
  return 0;
}

/* Lists the directory's segments, metadata files and newest snapshot. */
static int raft_files_list(struct raft_files_dir *d)
{
  DIR *dh = opendir(d->dir);
  if (dh == NULL) {
    return errno == ENOENT ? 0 : raft_files_fail(d, -errno, "%s: %s", d->dir, strerror(errno));
  }
  int rv = 0;
  struct dirent *de;
  while (rv == 0 && (de = readdir(dh)) != NULL) {
    struct raft_files_entry e;
    if (strcmp(de->d_name, "metadata1") == 0 || strcmp(de->d_name, "metadata2") == 0) {
      d->metadata_files++;
    } else if (strlen(de->d_name) >= sizeof e.name) {
      continue; /* raft ignores names this long as well */
    } else if (raft_files_parse_snapshot_meta(de->d_name, &e)) {
      memcpy(e.name, de->d_name, strlen(de->d_name) + 1); /* length checked above */
      if (raft_files_snapshot_complete(d->dir, e.name) &&
          (!d->has_snap || raft_files_snapshot_newer(&e, &d->snap))) {
        d->snap = e;
        d->has_snap = true;
      }
    } else if (raft_files_parse_segment(de->d_name, &e)) {
      memcpy(e.name, de->d_name, strlen(de->d_name) + 1); /* length checked above */
      rv = raft_files_add_segment(d, &e);
    }
  }
  closedir(dh);
  if (rv == 0 && d->nsegs > 1) {
    qsort(d->segs, d->nsegs, sizeof *d->segs, raft_files_seg_cmp);
  }
  return rv;
}

static int raft_files_read(struct raft_files_dir *d, const char *name, uint8_t **buf, size_t *len)
{
  int rv = fs_read_file(d->dir, name, RAFT_FILES_MAX_FILE_BYTES, buf, len);
  if (rv == CAIRN_ETOOLARGE) {
    return raft_files_fail(d, CAIRN_ERAFTFILES, "%s/%s: larger than %zu bytes", d->dir, name,
                           RAFT_FILES_MAX_FILE_BYTES);
  }
  if (rv != 0) {
    return raft_files_fail(d, rv, "%s/%s: read: %s", d->dir, name, cairn_strerror(rv));
  }
  return 0;
}

/* ---- metadata ---- */

/* Reads metadata<n>: *version 0 when absent or torn (shorter than 32
 * bytes, which raft deletes); refuses what raft would refuse. */
static int raft_files_metadata_one(struct raft_files_dir *d, int n, uint64_t *version)
{
  char name[16];
  snprintf(name, sizeof name, "metadata%d", n);
  *version = 0;
  uint8_t *buf = NULL;
  size_t len = 0;
  int rv = fs_read_file(d->dir, name, 4096, &buf, &len);
  if (rv == -ENOENT) {
    return 0;
  }
  if (rv != 0 && rv != CAIRN_ETOOLARGE) {
    return raft_files_fail(d, rv, "%s/%s: read: %s", d->dir, name, cairn_strerror(rv));
  }
  if (rv == CAIRN_ETOOLARGE || len > RAFT_FILES_METADATA_SIZE) {
    rv = raft_files_fail(d, CAIRN_ERAFTFILES, "%s/%s: %s bytes, not %d", d->dir, name,
                         rv == 0 ? "more than 32" : "over 4096", RAFT_FILES_METADATA_SIZE);
  } else if (len == RAFT_FILES_METADATA_SIZE && le_get64(buf) != RAFT_FILES_FORMAT) {
    rv = raft_files_fail(d, CAIRN_ERAFTFILES,
                         "%s/%s: at byte 0: format version %" PRIu64
                         ", not %d (the term and vote it holds are unknown)",
                         d->dir, name, le_get64(buf), RAFT_FILES_FORMAT);
  } else if (len == RAFT_FILES_METADATA_SIZE && le_get64(buf + 8) == 0) {
    rv = raft_files_fail(d, CAIRN_ERAFTFILES, "%s/%s: at byte 8: version is zero", d->dir, name);
  } else if (len == RAFT_FILES_METADATA_SIZE) {
    *version = le_get64(buf + 8);
  }
  free(buf);
  return rv;
}

/* Without a usable metadata file raft would start at term 0 with no vote
 * (and Cairn would bootstrap over the log): refused while a log exists. */
static int raft_files_metadata(struct raft_files_dir *d)
{
  uint64_t v1, v2;
  int rv = raft_files_metadata_one(d, 1, &v1);
  if (rv == 0) {
    rv = raft_files_metadata_one(d, 2, &v2);
  }
  if (rv != 0) {
    return rv;
  }
  if (v1 != 0 && v1 == v2) {
    return raft_files_fail(d, CAIRN_ERAFTFILES,
                           "%s: metadata1 and metadata2 both at version %" PRIu64, d->dir, v1);
  }
  if (v1 == 0 && v2 == 0 && (d->nsegs > 0 || d->has_snap)) {
    return raft_files_fail(
        d, CAIRN_ERAFTFILES,
        "%s: no usable metadata1 or metadata2 (%u present) but %zu segment(s)%s: "
        "the term and vote are lost",
        d->dir, d->metadata_files, d->nsegs, d->has_snap ? " and a snapshot" : "");
  }
  return 0;
}

/* ---- snapshot ---- */

/* The newest complete snapshot's .meta: the one raft loads. */
static int raft_files_snapshot(struct raft_files_dir *d)
{
  if (!d->has_snap) {
    return 0;
  }
  const char *name = d->snap.name;
  uint8_t *buf = NULL;
  size_t len = 0;
  int rv = raft_files_read(d, name, &buf, &len);
  if (rv != 0) {
    return rv;
  }
  uint64_t conf_len = len >= RAFT_FILES_SNAPSHOT_HEADER ? le_get64(buf + 24) : 0;
  if (len < RAFT_FILES_SNAPSHOT_HEADER) {
    rv = raft_files_fail(d, CAIRN_ERAFTFILES, "%s/%s: %zu bytes, short of its %d-byte header",
                         d->dir, name, len, RAFT_FILES_SNAPSHOT_HEADER);
  } else if (le_get64(buf) != RAFT_FILES_FORMAT) {
    rv = raft_files_fail(d, CAIRN_ERAFTFILES, "%s/%s: at byte 0: format version %" PRIu64, d->dir,
                         name, le_get64(buf));
  } else if (conf_len == 0 || conf_len > RAFT_FILES_MAX_CONF ||
             conf_len > len - RAFT_FILES_SNAPSHOT_HEADER) {
    rv = raft_files_fail(d, CAIRN_ERAFTFILES,
                         "%s/%s: at byte 24: configuration length %" PRIu64 " in a %zu-byte file",
                         d->dir, name, conf_len, len);
  } else {
    uint32_t crc = raft_files_crc32(buf + 16, 16, 0);
    crc = raft_files_crc32(buf + RAFT_FILES_SNAPSHOT_HEADER, (size_t)conf_len, crc);
    if (crc != (uint32_t)le_get64(buf + 8)) {
      rv =
          raft_files_fail(d, CAIRN_ERAFTFILES, "%s/%s: at byte 8: checksum mismatch", d->dir, name);
    }
  }
  free(buf);
  return rv;
}

/* ---- segments ---- */

static int raft_files_refuse_segment(struct raft_files_dir *d, const char *name,
                                     const struct raft_files_scan *s, const char *extra)
{
  char follows[96] = "";
  if (s->valid_after != 0) {
    snprintf(follows, sizeof follows, " (a valid batch follows at byte %zu)", s->valid_after);
  }
  return raft_files_fail(d, CAIRN_ERAFTFILES, "%s/%s: %s at byte %zu: %s%s%s", d->dir, name,
                         s->bad_at >= 8 ? "batch" : "header", s->bad_at, s->why, follows, extra);
}

/* Scans one segment file into *s. */
static int raft_files_scan_file(struct raft_files_dir *d, const struct raft_files_entry *e,
                                struct raft_files_scan *s)
{
  uint8_t *buf = NULL;
  size_t len = 0;
  int rv = raft_files_read(d, e->name, &buf, &len);
  if (rv != 0) {
    return rv;
  }
  uint64_t want = !e->open && e->b >= e->a ? e->b - e->a + 1 : 0;
  if (!e->open && e->b < e->a) {
    free(buf);
    return raft_files_fail(d, CAIRN_ERAFTFILES, "%s/%s: last index below first", d->dir, e->name);
  }
  raft_files_scan(buf, len, e->open, want, s);
  free(buf);
  d->rep->segments++;
  d->rep->entries += s->entries;
  return 0;
}

/* Cuts a torn open segment at its last valid batch (to nothing if it has
 * none: raft cannot load a segment that is only its format word). */
static int raft_files_cut(struct raft_files_dir *d, const char *name,
                          const struct raft_files_scan *s)
{
  char path[PATH_MAX];
  snprintf(path, sizeof path, "%s/%s", d->dir, name);
  off_t at = s->batches == 0 ? 0 : (off_t)s->good_end;
  int fd = open(path, O_WRONLY | O_CLOEXEC);
  int rv = fd < 0 ? -errno : 0;
  if (rv == 0 && ftruncate(fd, at) != 0) {
    rv = -errno;
  }
  if (rv == 0 && fsync(fd) != 0) {
    rv = -errno;
  }
  if (fd >= 0) {
    close(fd);
  }
  if (rv != 0) {
    return raft_files_fail(d, rv, "%s: truncate to %lld bytes: %s", path, (long long)at,
                           cairn_strerror(rv));
  }
  size_t used = strlen(d->rep->note);
  snprintf(d->rep->note + used, sizeof d->rep->note - used,
           "%s%s: torn tail cut at byte %lld (%s at byte %zu; %u whole batch(es) kept)",
           used > 0 ? "; " : "", path, (long long)at, s->why, s->bad_at, s->batches);
  d->rep->repaired++;
  return 0;
}

/* Checks closed segments (any damage refused), then the open ones newest
 * first: a torn tail may be cut only if no later open segment holds a
 * batch. Nothing is cut unless every file passed. */
static int raft_files_segments(struct raft_files_dir *d)
{
  struct raft_files_scan *scans = calloc(d->nsegs + 1, sizeof *scans);
  if (scans == NULL) {
    return raft_files_fail(d, CAIRN_ENOMEM, "%s: out of memory", d->dir);
  }
  int rv = 0;
  for (size_t i = 0; i < d->nsegs && rv == 0; i++) {
    rv = raft_files_scan_file(d, &d->segs[i], &scans[i]);
    if (rv == 0 && scans[i].verdict == RAFT_FILES_DAMAGED) {
      rv = raft_files_refuse_segment(d, d->segs[i].name, &scans[i], "");
    }
  }
  const char *later = NULL; /* a later open segment that holds batches */
  for (size_t i = d->nsegs; rv == 0 && i-- > 0 && d->segs[i].open;) {
    if (scans[i].verdict == RAFT_FILES_TORN && later != NULL) {
      char extra[96];
      snprintf(extra, sizeof extra, "; later segment %s holds batches", later);
      rv = raft_files_refuse_segment(d, d->segs[i].name, &scans[i], extra);
    }
    if (scans[i].batches > 0) {
      later = d->segs[i].name;
    }
  }
  for (size_t i = 0; i < d->nsegs && rv == 0; i++) {
    if (scans[i].verdict == RAFT_FILES_TORN) {
      rv = raft_files_cut(d, d->segs[i].name, &scans[i]);
    }
  }
  free(scans);
  return rv;
}

int raft_files_check(const char *dir, struct raft_files_report *rep)
{
  memset(rep, 0, sizeof *rep);
  struct raft_files_dir d = {.dir = dir, .rep = rep};
  int rv = raft_files_list(&d);
  if (rv == 0) {
    rv = raft_files_metadata(&d);
  }
  if (rv == 0) {
    rv = raft_files_snapshot(&d);
  }
  if (rv == 0) {
    rv = raft_files_segments(&d);
  }
  free(d.segs);
  return rv;
}
