/* memlog.c - the in-memory partition store (memlog.h): a growing array of
 * batches, each copied into its own allocation, behind the store interface
 * (store.h).
 *
 * Invariants (memlog_check() asserts the cheap ones in debug builds):
 *   - batches[0..n) are contiguous: each one's base is the previous one's
 *     next, and the last one's next is the store's next;
 *   - n > 0: batches[0].base <= start < batches[0].next, because
 *     delete_before may leave start inside a batch (reads then hand out
 *     that whole batch); n == 0: start == next;
 *   - each batch remembers the Raft index covered once it was appended
 *     (covered_index: its entry's index on the entry's last batch, the
 *     previous entry's otherwise), so flush and truncate find the index
 *     for any batch boundary without a scan; prefix_index is the same for
 *     the batches deleted from the front;
 *   - the durable marks never pass next and never go below the first
 *     batch held; flush only moves them forward, truncate pulls them back;
 *   - a region owns a copy of its bytes, so nothing the store does later
 *     (truncate, delete, close) can invalidate it.
 */
#include "storage/memlog.h"

#include "common/err.h"
#include "format/batch.h"

#include <assert.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MEMLOG_INITIAL_CAP 16

struct memlog_batch {
  int64_t base; /* offset of the first record */
  int64_t next; /* base + record_count */
  int64_t max_timestamp;
  uint64_t covered_index; /* Raft index wholly applied up to this batch */
  size_t len;
  uint8_t data[]; /* the stamped batch, len bytes */
};

struct memlog {
  struct store s; /* first: the store interface casts to it */
  size_t max_batch_bytes;
  struct memlog_batch **batches; /* [0, n) oldest first; cap allocated */
  size_t n;
  size_t cap;
  int64_t start;
  int64_t next;
  uint64_t last_index;
  uint64_t prefix_index; /* covered_index of the last batch deleted from the front */
  int64_t durable_offset;
  uint64_t durable_index;
  uint64_t size_bytes;
};

static struct memlog *memlog_from(struct store *s) { return (struct memlog *)s; }

static int memlog_fail(struct memlog *m, int err, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int memlog_fail(struct memlog *m, int err, const char *fmt, ...)
{
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(m->s.errmsg, sizeof m->s.errmsg, fmt, ap);
  va_end(ap);
  return err;
}

static void memlog_check(const struct memlog *m)
{
#ifndef NDEBUG
  /* O(1) on purpose: a full walk on every call would make a debug build's
   * ephemeral topic quadratic. The unit tests walk the whole array. */
  assert(m->n <= m->cap);
  assert(m->durable_offset <= m->next);
  if (m->n == 0) {
    assert(m->start == m->next && m->durable_offset == m->next);
    return;
  }
  assert(m->batches[0]->base <= m->start && m->start < m->batches[0]->next);
  assert(m->batches[m->n - 1]->next == m->next);
  assert(m->durable_offset >= m->batches[0]->base);
#else
  (void)m;
#endif
}

/* The number of batches that end at or below offset. When a batch holds
 * offset this is its index. */
static size_t memlog_count_below(const struct memlog *m, int64_t offset)
{
  size_t lo = 0;
  size_t hi = m->n;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (m->batches[mid]->next <= offset) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  return lo;
}

/* The Raft index wholly applied by the first k batches held (and the ones
 * deleted before them). */
static uint64_t memlog_index_below(const struct memlog *m, size_t k)
{
  return k == 0 ? m->prefix_index : m->batches[k - 1]->covered_index;
}

/* ---- append ---- */

/* Validates every batch before any is written, so a bad batch anywhere in
 * the entry leaves the store untouched. */
__attribute__((warn_unused_result)) static int
memlog_validate(struct memlog *m, const struct store_batch *batches, size_t n)
{
  return store_validate_entry(batches, n, m->max_batch_bytes, m->next, m->s.errmsg,
                              sizeof m->s.errmsg);
}

/* Makes room for extra more batch pointers, doubling. */
__attribute__((warn_unused_result)) static int memlog_reserve(struct memlog *m, size_t extra)
{
  if (extra <= m->cap - m->n) {
    return 0;
  }
  size_t cap = m->cap > 0 ? m->cap : MEMLOG_INITIAL_CAP;
  while (cap - m->n < extra) {
    if (cap > SIZE_MAX / 2 / sizeof *m->batches) {
      return memlog_fail(m, CAIRN_ENOMEM, "batch array cannot hold %zu more", extra);
    }
    cap *= 2;
  }
  struct memlog_batch **grown = realloc(m->batches, cap * sizeof *grown);
  if (grown == NULL) {
    return memlog_fail(m, CAIRN_ENOMEM, "growing the batch array to %zu", cap);
  }
  m->batches = grown;
  m->cap = cap;
  return 0;
}

/* Allocates the n batches of an entry into the reserved slots after the
 * last batch, all or none: a failure frees what it got. */
__attribute__((warn_unused_result)) static int
memlog_alloc_tail(struct memlog *m, const struct store_batch *batches, size_t n)
{
  struct memlog_batch **tail = m->batches + m->n;
  for (size_t i = 0; i < n; i++) {
    tail[i] = malloc(sizeof **tail + batches[i].len);
    if (tail[i] == NULL) {
      for (size_t k = 0; k < i; k++) {
        free(tail[k]);
      }
      return memlog_fail(m, CAIRN_ENOMEM, "copying batch %zu of %zu (%zu bytes)", i + 1, n,
                         batches[i].len);
    }
  }
  return 0;
}

/* Copies the caller's batch into b and stamps the copy (the caller's
 * bytes are never written: store.h). */
static void memlog_fill(struct memlog_batch *b, const struct store_batch *src, int64_t base,
                        uint64_t source_index, uint8_t flags, uint64_t covered_index)
{
  memcpy(b->data, src->data, src->len);
  batch_stamp(b->data, base, source_index, flags);
  struct batch_header h;
  batch_header_decode(b->data, &h);
  b->base = base;
  b->next = base + h.record_count;
  b->max_timestamp = h.max_timestamp;
  b->covered_index = covered_index;
  b->len = src->len;
}

static int memlog_append(struct store *s, struct store_batch *batches, size_t n,
                         uint64_t source_index, int64_t *base_offset)
{
  struct memlog *m = memlog_from(s);
  if (batches == NULL || n == 0) {
    return memlog_fail(m, CAIRN_EINVAL, "append of no batches");
  }
  if (source_index != 0 && source_index <= m->last_index) {
    return memlog_fail(m, CAIRN_EEXIST, "entry %llu already applied (last index %llu)",
                       (unsigned long long)source_index, (unsigned long long)m->last_index);
  }
  int rv = memlog_validate(m, batches, n);
  if (rv == 0) {
    rv = memlog_reserve(m, n);
  }
  if (rv == 0) {
    rv = memlog_alloc_tail(m, batches, n);
  }
  if (rv != 0) {
    return rv;
  }
  /* Only the entry's last batch completes it, so only that one covers its
   * index: a flush or truncate between its batches must not claim it. */
  uint64_t done = source_index != 0 ? source_index : m->last_index;
  int64_t base = m->next;
  for (size_t i = 0; i < n; i++) {
    bool last = i == n - 1;
    struct memlog_batch *b = m->batches[m->n + i];
    memlog_fill(b, &batches[i], base, source_index, last ? BATCH_FLAG_ENTRY_END : 0,
                last ? done : m->last_index);
    base = b->next;
    m->size_bytes += b->len;
  }
  if (base_offset != NULL) {
    *base_offset = m->next;
  }
  m->n += n;
  m->next = base;
  m->last_index = done;
  memlog_check(m);
  return 0;
}

/* ---- read ---- */

static void memlog_region_release(struct store_region *r) { free(r->pin); }

static int memlog_read(struct store *s, int64_t offset, size_t max_bytes, struct store_region *out)
{
  struct memlog *m = memlog_from(s);
  memset(out, 0, sizeof *out);
  out->fd = -1;
  if (offset < m->start || offset > m->next) {
    return memlog_fail(m, CAIRN_EOFFSET, "read at %lld outside [%lld, %lld]", (long long)offset,
                       (long long)m->start, (long long)m->next);
  }
  if (offset == m->next) {
    out->first_offset = offset;
    out->next_offset = offset;
    return 0;
  }
  size_t first = memlog_count_below(m, offset);
  size_t end = first + 1;
  size_t len = m->batches[first]->len;
  while (end < m->n && len <= max_bytes && m->batches[end]->len <= max_bytes - len) {
    len += m->batches[end]->len;
    end++;
  }
  /* A copy, not a pointer into the batches: the region must outlive a
   * truncate, delete or close that frees them. */
  uint8_t *buf = malloc(len);
  if (buf == NULL) {
    return memlog_fail(m, CAIRN_ENOMEM, "read at %lld: copying %zu bytes", (long long)offset,
                       len);
  }
  size_t pos = 0;
  for (size_t i = first; i < end; i++) {
    memcpy(buf + pos, m->batches[i]->data, m->batches[i]->len);
    pos += m->batches[i]->len;
  }
  out->mem = buf;
  out->len = len;
  out->first_offset = m->batches[first]->base;
  out->next_offset = m->batches[end - 1]->next;
  out->release = memlog_region_release;
  out->pin = buf;
  return 0;
}

/* ---- lookup_time ---- */

/* Looks for the first readable record of b with a timestamp >= timestamp.
 * Returns 1 with *offset set, 0 if b has none, or a negative code. */
__attribute__((warn_unused_result)) static int
memlog_batch_lookup_time(struct memlog *m, const struct memlog_batch *b, int64_t timestamp,
                         int64_t *offset)
{
  return store_batch_find_time(b->data, b->len, m->start, timestamp, offset, m->s.errmsg,
                               sizeof m->s.errmsg);
}

static int memlog_lookup_time(struct store *s, int64_t timestamp, int64_t *offset)
{
  struct memlog *m = memlog_from(s);
  /* Timestamps need not grow with offsets, so every batch is a candidate;
   * max_timestamp lets us skip most without decoding them. */
  for (size_t i = 0; i < m->n; i++) {
    if (m->batches[i]->max_timestamp < timestamp) {
      continue;
    }
    int rv = memlog_batch_lookup_time(m, m->batches[i], timestamp, offset);
    if (rv != 0) {
      return rv < 0 ? rv : 0;
    }
  }
  *offset = m->next;
  return 0;
}

/* ---- flush and truncate ---- */

static int memlog_flush(struct store *s, int64_t up_to)
{
  struct memlog *m = memlog_from(s);
  int64_t target = up_to < m->next ? up_to : m->next;
  if (target <= m->durable_offset) {
    return 0; /* durability is never taken back by a smaller flush */
  }
  /* The boundary at or below target: the end of the last whole batch. */
  size_t k = memlog_count_below(m, target);
  if (k == 0) {
    return 0; /* target is inside the first batch: nothing whole below it */
  }
  m->durable_offset = m->batches[k - 1]->next;
  m->durable_index = memlog_index_below(m, k);
  memlog_check(m);
  return 0;
}

static int memlog_truncate(struct store *s, int64_t offset)
{
  struct memlog *m = memlog_from(s);
  if (offset < m->start || offset > m->next) {
    return memlog_fail(m, CAIRN_EOFFSET, "truncate at %lld outside [%lld, %lld]",
                       (long long)offset, (long long)m->start, (long long)m->next);
  }
  size_t k = memlog_count_below(m, offset);
  if (k < m->n && m->batches[k]->base != offset) {
    return memlog_fail(m, CAIRN_EINVAL, "truncate at %lld: inside the batch at %lld",
                       (long long)offset, (long long)m->batches[k]->base);
  }
  if (k > 0 && k < m->n &&
      (m->batches[k - 1]->data[BATCH_OFF_ENTRY_FLAGS] & BATCH_FLAG_ENTRY_END) == 0) {
    return memlog_fail(m, CAIRN_EINVAL, "truncate at %lld: inside a Raft entry",
                       (long long)offset);
  }
  for (size_t i = k; i < m->n; i++) {
    m->size_bytes -= m->batches[i]->len;
    free(m->batches[i]);
  }
  m->n = k;
  m->next = offset;
  m->last_index = memlog_index_below(m, k);
  if (m->durable_offset > offset) {
    m->durable_offset = offset;
    m->durable_index = m->last_index;
  }
  memlog_check(m);
  return 0;
}

/* ---- deleting from the front ---- */

/* Frees the k oldest batches. The caller then moves start. */
static void memlog_drop_front(struct memlog *m, size_t k)
{
  if (k == 0) {
    return;
  }
  m->prefix_index = m->batches[k - 1]->covered_index;
  for (size_t i = 0; i < k; i++) {
    m->size_bytes -= m->batches[i]->len;
    free(m->batches[i]);
  }
  memmove(m->batches, m->batches + k, (m->n - k) * sizeof *m->batches);
  m->n -= k;
}

/* Offsets no longer held cannot be lost, so the durable marks rise to the
 * first batch still held (or next when none is). */
static void memlog_raise_durable(struct memlog *m)
{
  int64_t low = m->n > 0 ? m->batches[0]->base : m->next;
  if (m->durable_offset >= low) {
    return;
  }
  m->durable_offset = low;
  if (m->durable_index < m->prefix_index) {
    m->durable_index = m->prefix_index;
  }
}

static int memlog_delete_before(struct store *s, int64_t offset)
{
  struct memlog *m = memlog_from(s);
  if (offset < 0) {
    return memlog_fail(m, CAIRN_EOFFSET, "delete_before %lld: negative", (long long)offset);
  }
  if (offset <= m->start) {
    return 0; /* the start never moves back */
  }
  if (offset > m->next) {
    /* A snapshot install: the entries below offset are applied elsewhere,
     * so last_index stays and the store restarts empty at offset. */
    memlog_drop_front(m, m->n);
    m->prefix_index = m->last_index;
    m->next = offset;
  } else {
    memlog_drop_front(m, memlog_count_below(m, offset));
  }
  m->start = offset;
  memlog_raise_durable(m);
  memlog_check(m);
  return 0;
}

static int memlog_reset(struct store *s, int64_t offset, uint64_t last_index)
{
  struct memlog *m = memlog_from(s);
  if (offset <= m->next) {
    return memlog_fail(m, CAIRN_EINVAL, "reset at %lld: not past the end", (long long)offset);
  }
  if (last_index > m->last_index) {
    m->last_index = last_index;
  }
  return memlog_delete_before(s, offset);
}

/* Whether retention deletes b, given the bytes held from b on. */
static bool memlog_expired(const struct memlog *m, const struct memlog_batch *b, uint64_t held,
                           int64_t cutoff)
{
  if (m->s.retention_bytes > 0 && held > m->s.retention_bytes) {
    return true;
  }
  return m->s.retention_ms > 0 && b->max_timestamp < cutoff;
}

/* How many batches from the front retention drops at now_ms, none holding
 * an offset at or above below. The newest batch stays, as plog keeps its
 * active segment: the log end must stay readable for lookups and the next
 * append. */
static size_t memlog_retention_count(const struct memlog *m, int64_t now_ms, int64_t below)
{
  int64_t cutoff = now_ms - m->s.retention_ms;
  if (m->s.retention_ms > 0 && now_ms < INT64_MIN + m->s.retention_ms) {
    cutoff = INT64_MIN; /* nothing can be that old */
  }
  size_t k = 0;
  uint64_t held = m->size_bytes;
  while (k + 1 < m->n && k < UINT32_MAX && m->batches[k + 1]->base <= below &&
         memlog_expired(m, m->batches[k], held, cutoff)) {
    held -= m->batches[k]->len;
    k++;
  }
  return k;
}

static int64_t memlog_retention_point(struct store *s, int64_t now_ms)
{
  struct memlog *m = memlog_from(s);
  size_t k = memlog_retention_count(m, now_ms, INT64_MAX);
  return k > 0 ? m->batches[k]->base : m->start;
}

static int memlog_retention(struct store *s, int64_t now_ms, int64_t below, uint32_t *deleted)
{
  struct memlog *m = memlog_from(s);
  size_t k = memlog_retention_count(m, now_ms, below);
  memlog_drop_front(m, k);
  if (m->n > 0 && m->batches[0]->base > m->start) {
    m->start = m->batches[0]->base;
  }
  memlog_raise_durable(m);
  *deleted = (uint32_t)k;
  memlog_check(m);
  return 0;
}

/* ---- info and close ---- */

static void memlog_info(struct store *s, struct store_info *out)
{
  struct memlog *m = memlog_from(s);
  memset(out, 0, sizeof *out);
  out->start_offset = m->start;
  out->saved_start_offset = m->start;
  out->next_offset = m->next;
  out->last_index = m->last_index;
  out->durable_offset = m->durable_offset;
  out->durable_index = m->durable_index;
  out->size_bytes = m->size_bytes;
  out->segments = 1;
  out->fatal = false; /* nothing here can fail halfway */
}

static void memlog_close(struct store *s)
{
  struct memlog *m = memlog_from(s);
  for (size_t i = 0; i < m->n; i++) {
    free(m->batches[i]);
  }
  free(m->batches);
  free(m);
}

static const struct store_ops memlog_ops = {
    .append = memlog_append,
    .read = memlog_read,
    .lookup_time = memlog_lookup_time,
    .flush = memlog_flush,
    .truncate = memlog_truncate,
    .delete_before = memlog_delete_before,
    .reset = memlog_reset,
    .retention = memlog_retention,
    .retention_point = memlog_retention_point,
    .info = memlog_info,
    .close = memlog_close,
};

int memlog_new(const struct memlog_opts *opts, struct store **out)
{
  struct memlog *m = calloc(1, sizeof *m);
  if (m == NULL) {
    return CAIRN_ENOMEM;
  }
  m->s.ops = &memlog_ops;
  if (opts != NULL) {
    store_set_retention(&m->s, opts->retention_bytes, opts->retention_ms);
    m->max_batch_bytes = opts->max_batch_bytes;
  }
  if (m->max_batch_bytes == 0) {
    m->max_batch_bytes = BATCH_DEFAULT_MAX_BYTES;
  }
  *out = &m->s;
  return 0;
}
