/* index.c - sparse offset and time indexes of a segment. */
#include "storage/index.h"

#include "common/err.h"
#include "common/fault.h"
#include "common/fsutil.h"
#include "format/crc32c.h"
#include "format/endian.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static size_t index_entry_size(enum index_kind kind) { return kind == INDEX_OFFSET ? 8 : 12; }

static uint32_t index_magic(enum index_kind kind)
{
  return kind == INDEX_OFFSET ? INDEX_MAGIC_OFFSET : INDEX_MAGIC_TIME;
}

static void index_encode_header(const struct index *ix, uint8_t *h)
{
  le_put32(h, index_magic(ix->kind));
  le_put16(h + 4, INDEX_VERSION);
  le_put16(h + 6, (uint16_t)index_entry_size(ix->kind));
  le_put64(h + 8, (uint64_t)ix->base_offset);
  le_put32(h + 16, crc32c(h, 16));
}

static void index_encode_entry(enum index_kind kind, const struct index_entry *e, uint8_t *p)
{
  if (kind == INDEX_OFFSET) {
    le_put32(p, (uint32_t)e->key);
    le_put32(p + 4, e->val);
  } else {
    le_put64(p, (uint64_t)e->key);
    le_put32(p + 8, e->val);
  }
}

static void index_decode_entry(enum index_kind kind, const uint8_t *p, struct index_entry *e)
{
  if (kind == INDEX_OFFSET) {
    e->key = le_get32(p);
    e->val = le_get32(p + 4);
  } else {
    e->key = (int64_t)le_get64(p);
    e->val = le_get32(p + 8);
  }
}

static int index_grow(struct index *ix, size_t want)
{
  if (want <= ix->cap) {
    return 0;
  }
  /* Small first: most of a node's 10,000 replicas hold a few entries
   * (docs/performance.md, "10,000 partitions"); doubling from there. */
  size_t cap = ix->cap ? ix->cap : 4;
  while (cap < want) {
    cap *= 2;
  }
  struct index_entry *ne = realloc(ix->entries, cap * sizeof *ne);
  if (ne == NULL) {
    return CAIRN_ENOMEM;
  }
  ix->entries = ne;
  ix->cap = cap;
  return 0;
}

/* Parses the file's bytes into entries. CAIRN_ECORRUPT if malformed. */
static int index_parse(struct index *ix, const uint8_t *buf, size_t len)
{
  uint8_t want[INDEX_HEADER_SIZE];
  index_encode_header(ix, want);
  if (len < INDEX_HEADER_SIZE || memcmp(buf, want, INDEX_HEADER_SIZE) != 0) {
    return CAIRN_ECORRUPT;
  }
  size_t esz = index_entry_size(ix->kind);
  size_t body = len - INDEX_HEADER_SIZE;
  if (body % esz != 0) {
    return CAIRN_ECORRUPT; /* a torn entry: rebuild rather than guess */
  }
  if (index_grow(ix, body / esz) != 0) {
    return CAIRN_ENOMEM;
  }
  for (size_t i = 0; i < body / esz; i++) {
    struct index_entry e;
    index_decode_entry(ix->kind, buf + INDEX_HEADER_SIZE + i * esz, &e);
    if (i > 0 && (e.key <= ix->entries[i - 1].key || e.val <= ix->entries[i - 1].val)) {
      ix->count = 0;
      return CAIRN_ECORRUPT;
    }
    ix->entries[i] = e;
    ix->count = i + 1;
  }
  ix->persisted = ix->count;
  ix->synced = 0; /* unknown: the next persist syncs once */
  return 0;
}

/* Makes sure the file is open (it is closed while idle). */
static int index_reopen(struct index *ix)
{
  if (ix->fd >= 0) {
    return 0;
  }
  ix->fd = open(ix->path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  return ix->fd < 0 ? -errno : 0;
}

bool index_idle(struct index *ix)
{
  if (ix->fd >= 0 && ix->pins == 0 && ix->synced == ix->persisted) {
    close(ix->fd);
    ix->fd = -1;
  }
  return ix->fd < 0;
}

int index_pin(struct index *ix, int *fd)
{
  int rv = index_reopen(ix);
  if (rv != 0) {
    return rv;
  }
  ix->pins++;
  *fd = ix->fd;
  return 0;
}

void index_unpin(struct index *ix)
{
  if (ix->pins > 0) {
    ix->pins--;
  }
  index_idle(ix);
}

/* Truncates the file to a fresh header. A file known to hold no more
 * than a header is not truncated: on ext4 each ftruncate is a journal
 * transaction (~0.2 ms), and a restart after a crash reset every active
 * segment's two indexes twice (docs/performance.md, "Opens without
 * ftruncate"). The header itself is always written, through this
 * descriptor (index_trust_disk). */
static int index_reset_file(struct index *ix)
{
  int rv = index_reopen(ix);
  if (rv != 0) {
    return rv;
  }
  uint8_t h[INDEX_HEADER_SIZE];
  index_encode_header(ix, h);
  if (ix->file_bytes < 0 || ix->file_bytes > INDEX_HEADER_SIZE) {
    ix->file_bytes = -1;
    if (ftruncate(ix->fd, 0) != 0) {
      return -errno;
    }
  }
  rv = fs_pwrite_all(ix->fd, h, sizeof h, 0);
  ix->file_bytes = rv == 0 ? INDEX_HEADER_SIZE : -1;
  return rv;
}

int index_open(struct index *ix, enum index_kind kind, const char *path, int64_t base_offset)
{
  memset(ix, 0, sizeof *ix);
  ix->kind = kind;
  ix->base_offset = base_offset;
  ix->fd = -1;
  ix->file_bytes = -1;
  ix->path = strdup(path);
  if (ix->path == NULL) {
    return CAIRN_ENOMEM;
  }
  int orv = index_reopen(ix);
  if (orv != 0) {
    index_close(ix);
    return orv;
  }
  struct stat st;
  if (fstat(ix->fd, &st) != 0) {
    int rv = -errno;
    index_close(ix);
    return rv;
  }
  ix->file_bytes = (int64_t)st.st_size;
  if (st.st_size == 0) {
    int rv = index_reset_file(ix);
    if (rv != 0) {
      index_close(ix);
    } else {
      index_idle(ix);
    }
    return rv;
  }
  /* An index holds at most 2^31 / interval entries: bounded by the
   * segment size limit, never by what the file claims. */
  size_t len = (size_t)st.st_size;
  uint8_t *buf = malloc(len);
  size_t got = 0;
  int rv = buf == NULL ? CAIRN_ENOMEM : fs_pread_full(ix->fd, buf, len, 0, &got);
  if (rv == 0) {
    rv = index_parse(ix, buf, got);
  }
  free(buf);
  if (rv == CAIRN_ECORRUPT) {
    ix->count = 0;
    ix->persisted = 0;
    int r2 = index_reset_file(ix);
    if (r2 != 0) {
      index_close(ix);
      return r2;
    }
    return CAIRN_ECORRUPT;
  }
  if (rv != 0) {
    index_close(ix);
  } else {
    index_idle(ix); /* a loaded file is synced once by the next persist; an empty one is idle */
  }
  return rv;
}

void index_close(struct index *ix)
{
  if (ix->fd >= 0) {
    close(ix->fd);
  }
  ix->fd = -1;
  free(ix->path);
  ix->path = NULL;
  ix->pins = 0;
  free(ix->entries);
  ix->entries = NULL;
  ix->count = ix->cap = ix->persisted = 0;
}

int index_add(struct index *ix, int64_t key, uint32_t val)
{
  if (ix->count > 0) {
    const struct index_entry *last = &ix->entries[ix->count - 1];
    if (key <= last->key || val <= last->val) {
      return CAIRN_EINVAL;
    }
  }
  if (index_grow(ix, ix->count + 1) != 0) {
    return CAIRN_ENOMEM;
  }
  ix->entries[ix->count].key = key;
  ix->entries[ix->count].val = val;
  ix->count++;
  return 0;
}

/* The last entry whose key (by_val false) or val (by_val true) is <= x.
 * Both increase strictly, so one binary search serves both. */
static bool index_floor_by(const struct index *ix, bool by_val, int64_t x, struct index_entry *out)
{
  size_t lo = 0, hi = ix->count; /* the first entry above x is in [lo, hi] */
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    int64_t v = by_val ? (int64_t)ix->entries[mid].val : ix->entries[mid].key;
    if (v <= x) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  if (lo == 0) {
    return false;
  }
  *out = ix->entries[lo - 1];
  return true;
}

bool index_floor(const struct index *ix, int64_t key, struct index_entry *out)
{
  return index_floor_by(ix, false, key, out);
}

bool index_floor_val(const struct index *ix, uint32_t val, struct index_entry *out)
{
  return index_floor_by(ix, true, val, out);
}

bool index_last(const struct index *ix, struct index_entry *out)
{
  if (ix->count == 0) {
    return false;
  }
  *out = ix->entries[ix->count - 1];
  return true;
}

int index_truncate_val(struct index *ix, uint32_t val)
{
  size_t keep = ix->count;
  while (keep > 0 && ix->entries[keep - 1].val >= val) {
    keep--;
  }
  if (keep == ix->count) {
    return 0;
  }
  ix->count = keep;
  if (ix->persisted > keep) {
    ix->persisted = keep;
    ix->synced = 0; /* the shorter file must be synced again */
    off_t size = (off_t)(INDEX_HEADER_SIZE + keep * index_entry_size(ix->kind));
    int rv = index_reopen(ix);
    if (rv != 0) {
      return rv;
    }
    ix->file_bytes = -1;
    if (ftruncate(ix->fd, size) != 0) {
      return -errno;
    }
    ix->file_bytes = (int64_t)size;
  }
  return 0;
}

void index_trust_disk(struct index *ix)
{
  if (ix->synced == (size_t)-1) {
    ix->persisted = 0;
    ix->rewrite = true;
  } else {
    ix->synced = ix->persisted;
  }
  if (ix->fd >= 0 && ix->pins == 0) {
    close(ix->fd);
    ix->fd = -1;
  }
}

int index_clear(struct index *ix)
{
  ix->rewrite = false;
  ix->count = 0;
  ix->persisted = 0;
  ix->synced = (size_t)-1; /* differs from persisted: the reset file is synced once */
  return index_reset_file(ix);
}

int index_persist(struct index *ix, bool sync)
{
  size_t esz = index_entry_size(ix->kind);
  size_t n = ix->count - ix->persisted;
  bool owed = sync && ix->synced != ix->persisted;
  if (n > 0 || owed || ix->rewrite) {
    int rv = index_reopen(ix);
    if (rv != 0) {
      return rv;
    }
  }
  if (ix->rewrite) {
    int rv = index_reset_file(ix);
    if (rv != 0) {
      return rv;
    }
    ix->rewrite = false;
  }
  if (n > 0) {
    uint8_t *buf = malloc(n * esz);
    if (buf == NULL) {
      return CAIRN_ENOMEM;
    }
    for (size_t i = 0; i < n; i++) {
      index_encode_entry(ix->kind, &ix->entries[ix->persisted + i], buf + i * esz);
    }
    off_t at = (off_t)(INDEX_HEADER_SIZE + ix->persisted * esz);
    int rv = fs_pwrite_all(ix->fd, buf, n * esz, at);
    free(buf);
    if (rv != 0) {
      ix->file_bytes = -1;
      return rv;
    }
    if (ix->file_bytes >= 0 && ix->file_bytes < (int64_t)(at + (off_t)(n * esz))) {
      ix->file_bytes = (int64_t)(at + (off_t)(n * esz));
    }
    ix->persisted = ix->count;
  }
  if (!sync || ix->synced == ix->persisted) {
    return 0; /* nothing new to make durable: one fdatasync saved */
  }
  int rv = fault_check(FAULT_SEGMENT_SYNC);
  if (rv != 0) {
    return rv;
  }
  if (fdatasync(ix->fd) != 0) {
    return -errno;
  }
  ix->synced = ix->persisted;
  index_idle(ix);
  return 0;
}

void index_note_synced(struct index *ix, size_t n)
{
  /* (size_t)-1 marks a reset file never synced (index_clear). */
  if (ix->synced == (size_t)-1 || ix->synced < n) {
    ix->synced = n;
  }
}
