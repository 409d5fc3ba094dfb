/* test_plog_recover.c - the partition log's crash recovery: torn, corrupt
 * and zero-filled tails, damaged or missing indexes and checkpoints, gaps,
 * garbage files, Raft entries cut short, and processes killed with SIGKILL
 * at random moments. Every test checks the exact outcome: the intact prefix
 * reads back byte for byte, nothing after the damage is readable, the
 * recovery counters say what was repaired, appends go on at the right
 * offset and a second open finds nothing left to repair. */
#include "common/err.h"
#include "common/fault.h"
#include "common/fsutil.h"
#include "common/log.h"
#include "format/batch.h"
#include "storage/checkpoint.h"
#include "storage/index.h"
#include "storage/plog.h"
#include "testutil.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#define T0 1700000000000LL

static int64_t test_now = T0;
static int64_t test_clock(void)
{
  return test_now;
}

/* One batch the test appended: what it holds and where it landed. */
struct rec {
  uint64_t tag;
  int n;
  size_t vsize;
  int64_t ts;
  uint64_t sidx; /* source index of its entry */
  bool entry_end;
  int64_t base; /* offset */
  int64_t seg;  /* base offset of the segment holding it */
  int64_t pos;  /* byte position in that segment */
  size_t len;
};

struct fixture {
  char *dir;
  struct store *s;
  struct plog_opts opts;
  struct rec *recs; /* the batches the log must hold, in order */
  size_t n;
  size_t cap;
  uint64_t next_tag;
  uint64_t next_sidx;
  struct plog_recovery rec; /* of the last open */
};

static void fx_open(struct fixture *f)
{
  char err[256] = "";
  int rv = plog_open(f->dir, &f->opts, &f->s, err, sizeof err);
  if (rv != 0) {
    fail_msg("plog_open(%s): %s: %s", f->dir, cairn_strerror(rv), err);
  }
  plog_recovery_info(f->s, &f->rec);
}

static void fx_close(struct fixture *f)
{
  store_close(f->s);
  f->s = NULL;
}

static void fx_reopen(struct fixture *f)
{
  fx_close(f);
  fx_open(f);
}

static void fx_init(struct fixture *f)
{
  memset(f, 0, sizeof *f);
  f->dir = tu_tmpdir("plogrec");
  plog_opts_default(&f->opts);
  f->opts.segment_bytes = 16 * 1024;
  f->opts.index_interval = 512;
  f->opts.now_ms = test_clock;
  f->next_tag = 1;
  f->next_sidx = 1;
  fx_open(f);
}

static void fx_fini(struct fixture *f)
{
  if (f->s != NULL) {
    fx_close(f);
  }
  tu_tmpdir_free(f->dir);
  free(f->recs);
  memset(f, 0, sizeof *f);
}

static int setup(void **state)
{
  struct fixture *f = calloc(1, sizeof *f);
  fx_init(f);
  *state = f;
  return 0;
}

static int teardown(void **state)
{
  struct fixture *f = *state;
  fx_fini(f);
  free(f);
  return 0;
}

/* The shape of batch `tag`: its record count, value size and timestamp.
 * Timestamps grow with the tag, 100 ms apart, so record timestamps never
 * overlap between batches. */
static int tag_records(uint64_t tag)
{
  return 1 + (int)(tag % 5);
}
static size_t tag_vsize(uint64_t tag)
{
  return 40 + (size_t)((tag * 37) % 260);
}
static int64_t tag_ts(uint64_t tag)
{
  return T0 + 100 * (int64_t)tag;
}

static struct rec *fx_push(struct fixture *f)
{
  if (f->n == f->cap) {
    f->cap = f->cap ? f->cap * 2 : 64;
    f->recs = realloc(f->recs, f->cap * sizeof *f->recs);
    assert_non_null(f->recs);
  }
  struct rec *r = &f->recs[f->n++];
  memset(r, 0, sizeof *r);
  r->seg = -1;
  return r;
}

static int64_t fx_next_offset(const struct fixture *f)
{
  return f->n == 0 ? 0 : f->recs[f->n - 1].base + f->recs[f->n - 1].n;
}

/* The source index of the last Raft entry (entries not from Raft have 0). */
static uint64_t fx_last_index(const struct fixture *f)
{
  for (size_t i = f->n; i-- > 0;) {
    if (f->recs[i].sidx != 0) {
      return f->recs[i].sidx;
    }
  }
  return 0;
}

/* Appends one entry of nb batches, from Raft (the next source index) or
 * not (source index 0), the first batch with timestamp ts_override when
 * that is not 0. */
static void fx_append(struct fixture *f, int nb, int64_t ts_override, bool raft)
{
  struct store_batch sb[8];
  assert_true(nb >= 1 && nb <= 8);
  int64_t off = fx_next_offset(f);
  uint64_t sidx = raft ? f->next_sidx++ : 0;
  for (int j = 0; j < nb; j++) {
    struct rec *r = fx_push(f);
    r->tag = f->next_tag++;
    r->n = tag_records(r->tag);
    r->vsize = tag_vsize(r->tag);
    r->ts = j == 0 && ts_override != 0 ? ts_override : tag_ts(r->tag);
    r->sidx = sidx;
    r->entry_end = j + 1 == nb;
    r->base = off;
    off += r->n;
    sb[j].data = tu_make_batch(r->tag, r->n, r->vsize, r->ts, &sb[j].len);
    r->len = sb[j].len;
  }
  int64_t base = -1;
  int rv = store_append(f->s, sb, (size_t)nb, sidx, &base);
  for (int j = 0; j < nb; j++) {
    free((void *)sb[j].data);
  }
  assert_int_equal(rv, 0);
  assert_int_equal(base, f->recs[f->n - (size_t)nb].base);
}

static void fx_append_entry(struct fixture *f, int nb)
{
  fx_append(f, nb, 0, true);
}
static void fx_append_unindexed(struct fixture *f, int nb)
{
  fx_append(f, nb, 0, false);
}

/* Appends single-batch entries until the log has at least nsegs segments
 * and `extra` more entries after the newest one started. */
static void fx_fill(struct fixture *f, uint32_t nsegs, int extra)
{
  struct store_info info;
  do {
    fx_append_entry(f, 1);
    store_info(f->s, &info);
  } while (info.segments < nsegs);
  for (int i = 0; i < extra; i++) {
    fx_append_entry(f, 1);
  }
}

static struct plog_segment_desc *fx_segments(struct fixture *f, size_t *n)
{
  struct plog_segment_desc *d;
  assert_int_equal(plog_segments(f->s, &d, n), 0);
  return d;
}

/* Fills in where every batch landed (segment and byte position). */
static void fx_locate(struct fixture *f)
{
  size_t nseg;
  struct plog_segment_desc *d = fx_segments(f, &nseg);
  size_t k = 0;
  for (size_t i = 0; i < f->n; i++) {
    struct rec *r = &f->recs[i];
    while (k + 1 < nseg && d[k + 1].base_offset <= r->base) {
      k++;
    }
    r->seg = d[k].base_offset;
    struct store_region reg;
    assert_int_equal(store_read(f->s, r->base, 1, &reg), 0);
    assert_int_equal(reg.first_offset, r->base);
    assert_int_equal(reg.len, r->len);
    r->pos = reg.pos;
    store_region_release(&reg);
  }
  free(d);
}

/* Index of the first recorded batch in segment seg. */
static size_t fx_first_in_seg(const struct fixture *f, int64_t seg)
{
  for (size_t i = 0; i < f->n; i++) {
    if (f->recs[i].seg == seg) {
      return i;
    }
  }
  fail_msg("no batch in segment %lld", (long long)seg);
  return 0;
}

/* Index of the last recorded batch in segment seg. */
static size_t fx_last_in_seg(const struct fixture *f, int64_t seg)
{
  size_t last = fx_first_in_seg(f, seg);
  while (last + 1 < f->n && f->recs[last + 1].seg == seg) {
    last++;
  }
  return last;
}

/* Reads the batch holding offset and checks it is exactly batch r. */
static void expect_batch(struct store *s, const struct rec *r, int64_t offset)
{
  struct store_region reg;
  assert_int_equal(store_read(s, offset, 1, &reg), 0);
  assert_int_equal(reg.first_offset, r->base);
  assert_int_equal(reg.next_offset, r->base + r->n);
  assert_int_equal(reg.len, r->len);
  assert_true(reg.fd >= 0);
  uint8_t *buf = tu_read_region(reg.fd, reg.pos, reg.len);
  assert_non_null(buf);
  struct batch_header h;
  batch_header_decode(buf, &h);
  assert_int_equal(h.base_offset, r->base);
  assert_int_equal(h.source_index, r->sidx);
  assert_int_equal(h.entry_flags, r->entry_end ? BATCH_FLAG_ENTRY_END : 0);
  assert_int_equal(h.first_timestamp, r->ts);
  assert_int_equal(tu_check_batch(buf, reg.len, r->tag, r->n, r->vsize), 0);
  free(buf);
  store_region_release(&reg);
}

/* The log holds exactly the recorded batches: each reads back whole and
 * byte-identical, time lookups find them, nothing beyond is readable. */
static void fx_expect_log(struct fixture *f)
{
  struct store_info info;
  store_info(f->s, &info);
  int64_t next = fx_next_offset(f);
  assert_false(info.fatal);
  assert_int_equal(info.start_offset, 0);
  assert_int_equal(info.next_offset, next);
  assert_int_equal(info.last_index, fx_last_index(f));
  uint64_t bytes = 0;
  for (size_t i = 0; i < f->n; i++) {
    const struct rec *r = &f->recs[i];
    expect_batch(f->s, r, r->base);
    if (r->n > 1) {
      expect_batch(f->s, r, r->base + r->n - 1);
    }
    bytes += r->len;
    /* The first record at or after the batch's first timestamp is its
     * first record; one ms later it is the next record. */
    int64_t off = -1;
    assert_int_equal(store_lookup_time(f->s, r->ts, &off), 0);
    assert_int_equal(off, r->base);
    if (r->ts == tag_ts(r->tag)) {
      assert_int_equal(store_lookup_time(f->s, r->ts + 1, &off), 0);
      assert_int_equal(off, r->base + 1 < next ? r->base + 1 : next);
    }
  }
  assert_int_equal(info.size_bytes, bytes);
  struct store_region reg;
  assert_int_equal(store_read(f->s, next, 1000, &reg), 0);
  assert_int_equal(reg.len, 0);
  store_region_release(&reg);
  assert_int_equal(store_read(f->s, next + 1, 1000, &reg), CAIRN_EOFFSET);
  int64_t off = -1;
  assert_int_equal(store_lookup_time(f->s, tag_ts(f->next_tag + 1000), &off), 0);
  assert_int_equal(off, next);
}

/* Forgets the recorded batches from index keep on: the damage took them. */
static void fx_keep(struct fixture *f, size_t keep)
{
  assert_true(keep <= f->n);
  f->n = keep;
  f->next_sidx = fx_last_index(f) + 1;
}

static void expect_recovery(const struct fixture *f, uint32_t scanned, uint32_t rebuilt,
                            uint32_t dropped, uint64_t bytes, uint32_t batches, uint32_t ignored)
{
  assert_int_equal(f->rec.segments_scanned, scanned);
  assert_int_equal(f->rec.indexes_rebuilt, rebuilt);
  assert_int_equal(f->rec.segments_dropped, dropped);
  assert_int_equal(f->rec.bytes_truncated, bytes);
  assert_int_equal(f->rec.batches_truncated, batches);
  assert_int_equal(f->rec.files_ignored, ignored);
  /* Open makes everything it keeps durable. */
  struct store_info info;
  store_info(f->s, &info);
  assert_int_equal(info.durable_offset, info.next_offset);
  assert_int_equal(info.durable_index, info.last_index);
}

/* New entries go on at the recovered end, and a second open finds
 * nothing to repair and the same log. */
static void fx_expect_continues_and_reopens_clean(struct fixture *f, uint32_t ignored)
{
  int64_t next = fx_next_offset(f);
  fx_append_entry(f, 1);
  assert_int_equal(f->recs[f->n - 1].base, next);
  fx_append_entry(f, 2);
  fx_expect_log(f);
  fx_reopen(f);
  expect_recovery(f, 1, 0, 0, 0, 0, ignored);
  fx_expect_log(f);
}

static int64_t seg_file_size(const char *dir, int64_t seg, const char *ext)
{
  char name[64];
  return tu_file_size(dir, tu_segname(name, seg, ext));
}

static void remove_file(const char *dir, const char *name)
{
  char path[PATH_MAX];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  assert_int_equal(unlink(path), 0);
}

static uint8_t *slurp(const char *dir, const char *name, size_t *len)
{
  int64_t size = tu_file_size(dir, name);
  assert_true(size >= 0);
  uint8_t *buf = malloc((size_t)size + 1);
  if (size > 0) {
    tu_read_at(dir, name, 0, buf, (size_t)size);
  }
  *len = (size_t)size;
  return buf;
}

static void append_zeros(const char *dir, const char *name, size_t n)
{
  uint8_t *z = calloc(1, n);
  tu_write_at(dir, name, tu_file_size(dir, name), z, n);
  free(z);
}

static void flip_byte(const char *dir, const char *name, int64_t pos)
{
  uint8_t b;
  tu_read_at(dir, name, pos, &b, 1);
  b ^= 0x5a;
  tu_write_at(dir, name, pos, &b, 1);
}

/* ---- torn, corrupt and zero-filled tails of the active segment ---- */

/* A crash in the middle of writing batch N of the active segment leaves
 * a file that ends somewhere inside it: in its header, in its records, or
 * exactly at its start. Open keeps every batch before N and nothing else. */
static void test_plog_recovers_prefix_after_active_segment_cut_mid_batch(void **state)
{
  (void)state;
  /* Cut points relative to the start of batch N; SIZE_MAX stands for
   * "one byte before its end". */
  static const size_t cuts[] = {
      0,   1,       11, 12, 40, BATCH_HEADER_SIZE - 1, BATCH_HEADER_SIZE, BATCH_HEADER_SIZE + 1,
      100, SIZE_MAX};
  for (size_t c = 0; c < sizeof cuts / sizeof cuts[0]; c++) {
    for (int which = 0; which < 3; which++) { /* first, middle, last batch */
      struct fixture fx, *f = &fx;
      fx_init(f);
      fx_fill(f, 3, 12);
      fx_locate(f);
      int64_t active = f->recs[f->n - 1].seg;
      size_t first = fx_first_in_seg(f, active), last = f->n - 1;
      size_t target = which == 0 ? first : which == 1 ? (first + last) / 2 : last;
      const struct rec *r = &f->recs[target];
      size_t within = cuts[c] == SIZE_MAX ? r->len - 1 : cuts[c];
      if (within >= r->len) {
        fx_fini(f);
        continue;
      }
      fx_close(f);
      char name[64];
      tu_segname(name, active, "log");
      tu_truncate(f->dir, name, r->pos + (int64_t)within);
      fx_keep(f, target);
      fx_open(f);
      expect_recovery(f, 1, 0, 0, within, 0, 0);
      assert_int_equal(tu_file_size(f->dir, name), r->pos);
      fx_expect_log(f);
      fx_expect_continues_and_reopens_clean(f, 0);
      fx_fini(f);
    }
  }
}

/* A flipped bit in batch N of the active segment (records, header fields
 * under the CRC, the CRC itself, or the offset stamped by the broker)
 * fails its check: open keeps the batches before N. */
static void test_plog_recovers_prefix_before_corrupt_batch_in_active_segment(void **state)
{
  (void)state;
  static const int64_t where[] = {-1 /* middle */,
                                  BATCH_OFF_CRC + 1,
                                  BATCH_OFF_RECORD_COUNT,
                                  BATCH_OFF_LENGTH,
                                  BATCH_OFF_MAGIC,
                                  BATCH_OFF_BASE_OFFSET,
                                  -2 /* last byte */};
  for (size_t w = 0; w < sizeof where / sizeof where[0]; w++) {
    struct fixture fx, *f = &fx;
    fx_init(f);
    fx_fill(f, 2, 10);
    fx_locate(f);
    int64_t active = f->recs[f->n - 1].seg;
    size_t first = fx_first_in_seg(f, active);
    size_t target = first + 4 + w % 3; /* the 5th to 7th batch of the segment */
    assert_true(target < f->n);
    const struct rec *r = &f->recs[target];
    int64_t at = where[w] == -1   ? (int64_t)r->len / 2
                 : where[w] == -2 ? (int64_t)r->len - 1
                                  : where[w];
    fx_close(f);
    char name[64];
    tu_segname(name, active, "log");
    int64_t size = tu_file_size(f->dir, name);
    flip_byte(f->dir, name, r->pos + at);
    fx_keep(f, target);
    fx_open(f);
    expect_recovery(f, 1, 0, 0, (uint64_t)(size - r->pos), 0, 0);
    assert_int_equal(tu_file_size(f->dir, name), r->pos);
    fx_expect_log(f);
    fx_expect_continues_and_reopens_clean(f, 0);
    fx_fini(f);
  }
}

/* A power loss after the file grew but before its data reached the disk
 * leaves zeros at the end. Zeros after the last batch are cut and every
 * batch is kept; zeros over the last batch's bytes take that batch. */
static void test_plog_cuts_zero_filled_tail(void **state)
{
  (void)state;
  static const size_t zeros[] = {4096, 65536, 1, BATCH_HEADER_SIZE + 3};
  for (size_t z = 0; z < sizeof zeros / sizeof zeros[0]; z++) {
    for (int over_last = 0; over_last < 2; over_last++) {
      struct fixture fx, *f = &fx;
      fx_init(f);
      fx_fill(f, 2, 5);
      fx_locate(f);
      int64_t active = f->recs[f->n - 1].seg;
      const struct rec *last = &f->recs[f->n - 1];
      fx_close(f);
      char name[64];
      tu_segname(name, active, "log");
      int64_t cut_from = last->pos + (int64_t)last->len;
      if (over_last) {
        /* The last batch's second half never made it: zeros instead. */
        cut_from = last->pos;
        size_t half = last->len / 2;
        uint8_t *zb = calloc(1, last->len - half);
        tu_write_at(f->dir, name, last->pos + (int64_t)half, zb, last->len - half);
        free(zb);
        fx_keep(f, f->n - 1);
      }
      append_zeros(f->dir, name, zeros[z]);
      int64_t size = tu_file_size(f->dir, name);
      fx_open(f);
      expect_recovery(f, 1, 0, 0, (uint64_t)(size - cut_from), 0, 0);
      assert_int_equal(tu_file_size(f->dir, name), cut_from);
      fx_expect_log(f);
      fx_expect_continues_and_reopens_clean(f, 0);
      fx_fini(f);
    }
  }
}

/* ---- indexes ---- */

enum index_damage {
  IX_DELETE_OFFSET,
  IX_DELETE_TIME,
  IX_DELETE_BOTH,
  IX_TRUNCATE_PARTIAL_OFFSET,
  IX_TRUNCATE_PARTIAL_TIME,
  IX_EMPTY_FILE,
  IX_GARBAGE_HEADER_OFFSET,
  IX_GARBAGE_HEADER_TIME,
  IX_OUT_OF_ORDER_OFFSET,
  IX_OUT_OF_ORDER_TIME,
  IX_LAST_PAST_LOG,
  IX_LAST_NOT_A_BOUNDARY,
  IX_LAST_WRONG_OFFSET,
  IX_TIME_LAST_PAST_SEGMENT,
  IX_DAMAGE_COUNT
};

static const char *const index_damage_names[IX_DAMAGE_COUNT] = {
    "delete .index",
    "delete .timeindex",
    "delete both",
    "partial .index entry",
    "partial .timeindex entry",
    "empty .index file",
    "garbage .index header",
    "garbage .timeindex header",
    ".index out of order",
    ".timeindex out of order",
    ".index last entry past the log",
    ".index last entry not at a batch",
    ".index last entry with a wrong offset",
    ".timeindex last entry past the segment"};

static void swap_entries(const char *dir, const char *name, size_t esz, size_t a, size_t b)
{
  uint8_t ea[16], eb[16];
  tu_read_at(dir, name, INDEX_HEADER_SIZE + (int64_t)(a * esz), ea, esz);
  tu_read_at(dir, name, INDEX_HEADER_SIZE + (int64_t)(b * esz), eb, esz);
  tu_write_at(dir, name, INDEX_HEADER_SIZE + (int64_t)(a * esz), eb, esz);
  tu_write_at(dir, name, INDEX_HEADER_SIZE + (int64_t)(b * esz), ea, esz);
}

static void put_le32(uint8_t *p, uint32_t v)
{
  for (int i = 0; i < 4; i++) {
    p[i] = (uint8_t)(v >> (8 * i));
  }
}

static uint32_t get_le32(const uint8_t *p)
{
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* Damages segment seg's indexes as d says. */
static void damage_index(const char *dir, int64_t seg, int64_t seg_size, enum index_damage d)
{
  char ix[64], tx[64];
  tu_segname(ix, seg, "index");
  tu_segname(tx, seg, "timeindex");
  int64_t ixn = (tu_file_size(dir, ix) - INDEX_HEADER_SIZE) / 8;
  int64_t txn = (tu_file_size(dir, tx) - INDEX_HEADER_SIZE) / 12;
  assert_true(ixn >= 3);
  assert_true(txn >= 3);
  uint8_t e[8];
  int64_t last_ix = INDEX_HEADER_SIZE + (ixn - 1) * 8;
  switch (d) {
  case IX_DELETE_OFFSET:
    remove_file(dir, ix);
    break;
  case IX_DELETE_TIME:
    remove_file(dir, tx);
    break;
  case IX_DELETE_BOTH:
    remove_file(dir, ix);
    remove_file(dir, tx);
    break;
  case IX_TRUNCATE_PARTIAL_OFFSET:
    tu_truncate(dir, ix, INDEX_HEADER_SIZE + (ixn / 2) * 8 + 3);
    break;
  case IX_TRUNCATE_PARTIAL_TIME:
    tu_truncate(dir, tx, INDEX_HEADER_SIZE + (txn / 2) * 12 + 5);
    break;
  case IX_EMPTY_FILE:
    tu_truncate(dir, ix, 0);
    break;
  case IX_GARBAGE_HEADER_OFFSET:
  case IX_GARBAGE_HEADER_TIME: {
    uint8_t g[INDEX_HEADER_SIZE];
    for (size_t i = 0; i < sizeof g; i++) {
      g[i] = (uint8_t)(0xa7 + 31 * i);
    }
    tu_write_at(dir, d == IX_GARBAGE_HEADER_OFFSET ? ix : tx, 0, g, sizeof g);
    break;
  }
  case IX_OUT_OF_ORDER_OFFSET:
    swap_entries(dir, ix, 8, 1, 2);
    break;
  case IX_OUT_OF_ORDER_TIME:
    swap_entries(dir, tx, 12, 1, 2);
    break;
  case IX_LAST_PAST_LOG:
    tu_read_at(dir, ix, last_ix, e, 8);
    put_le32(e + 4, (uint32_t)seg_size + 100);
    tu_write_at(dir, ix, last_ix, e, 8);
    break;
  case IX_LAST_NOT_A_BOUNDARY:
    tu_read_at(dir, ix, last_ix, e, 8);
    put_le32(e + 4, get_le32(e + 4) + 7);
    tu_write_at(dir, ix, last_ix, e, 8);
    break;
  case IX_LAST_WRONG_OFFSET:
    tu_read_at(dir, ix, last_ix, e, 8);
    put_le32(e, get_le32(e) + 1);
    tu_write_at(dir, ix, last_ix, e, 8);
    break;
  case IX_TIME_LAST_PAST_SEGMENT: {
    uint8_t te[12];
    int64_t at = INDEX_HEADER_SIZE + (txn - 1) * 12;
    tu_read_at(dir, tx, at, te, 12);
    put_le32(te + 8, get_le32(te + 8) + 100000);
    tu_write_at(dir, tx, at, te, 12);
    break;
  }
  case IX_DAMAGE_COUNT:
    break;
  }
}

/* An index is derived data: whichever way it is missing or wrong, open
 * rebuilds it from the log (counted), keeps every batch, and the rebuilt
 * files are byte-identical to the ones appends wrote. Done for a closed,
 * flushed segment (which open only checks cheaply) and for the active one
 * (which open always scans). */
static void test_plog_rebuilds_missing_or_damaged_index(void **state)
{
  (void)state;
  for (int active = 0; active < 2; active++) {
    for (int d = 0; d < IX_DAMAGE_COUNT; d++) {
      if (active && d >= IX_LAST_PAST_LOG) {
        continue; /* wrong-but-well-formed entries: see the test below */
      }
      print_message("index damage: %s, %s segment\n", index_damage_names[d],
                    active ? "active" : "closed");
      struct fixture fx, *f = &fx;
      fx_init(f);
      fx_fill(f, 4, 20);
      fx_locate(f);
      size_t nseg;
      struct plog_segment_desc *desc = fx_segments(f, &nseg);
      size_t victim = active ? nseg - 1 : 1;
      int64_t seg = desc[victim].base_offset;
      int64_t seg_size = (int64_t)desc[victim].size_bytes;
      free(desc);
      fx_close(f);
      char ix[64], tx[64];
      tu_segname(ix, seg, "index");
      tu_segname(tx, seg, "timeindex");
      size_t ix_len, tx_len;
      uint8_t *ix_orig = slurp(f->dir, ix, &ix_len);
      uint8_t *tx_orig = slurp(f->dir, tx, &tx_len);
      damage_index(f->dir, seg, seg_size, (enum index_damage)d);
      fx_open(f);
      /* The closed victim is scanned in full on top of the active one. */
      expect_recovery(f, active ? 1 : 2, 1, 0, 0, 0, 0);
      size_t len;
      uint8_t *now = slurp(f->dir, ix, &len);
      assert_int_equal(len, ix_len);
      assert_memory_equal(now, ix_orig, len);
      free(now);
      now = slurp(f->dir, tx, &len);
      assert_int_equal(len, tx_len);
      assert_memory_equal(now, tx_orig, len);
      free(now);
      free(ix_orig);
      free(tx_orig);
      fx_expect_log(f);
      fx_expect_continues_and_reopens_clean(f, 0);
      fx_fini(f);
    }
  }
}

/* The active segment's index is never trusted: open always rebuilds it
 * while scanning, so a well-formed but wrong one is simply replaced (and,
 * not being detected, not counted). */
static void test_plog_replaces_wrong_index_of_active_segment(void **state)
{
  (void)state;
  for (int d = IX_LAST_PAST_LOG; d < IX_DAMAGE_COUNT; d++) {
    struct fixture fx, *f = &fx;
    fx_init(f);
    fx_fill(f, 2, 20);
    fx_locate(f);
    size_t nseg;
    struct plog_segment_desc *desc = fx_segments(f, &nseg);
    int64_t seg = desc[nseg - 1].base_offset;
    int64_t seg_size = (int64_t)desc[nseg - 1].size_bytes;
    free(desc);
    fx_close(f);
    char ix[64];
    size_t ix_len, len;
    uint8_t *orig = slurp(f->dir, tu_segname(ix, seg, "index"), &ix_len);
    damage_index(f->dir, seg, seg_size, (enum index_damage)d);
    fx_open(f);
    expect_recovery(f, 1, 0, 0, 0, 0, 0);
    uint8_t *now = slurp(f->dir, ix, &len);
    assert_int_equal(len, ix_len);
    assert_memory_equal(now, orig, len);
    free(now);
    free(orig);
    fx_expect_log(f);
    fx_expect_continues_and_reopens_clean(f, 0);
    fx_fini(f);
  }
}

/* An index cut at an entry boundary is well-formed, only short: open
 * extends it from the log, and it ends up as it was. */
static void test_plog_completes_index_cut_at_entry_boundary(void **state)
{
  struct fixture *f = *state;
  fx_fill(f, 3, 10);
  fx_locate(f);
  fx_close(f);
  char ix[64];
  size_t ix_len, len;
  uint8_t *orig = slurp(f->dir, tu_segname(ix, 0, "index"), &ix_len);
  int64_t ixn = ((int64_t)ix_len - INDEX_HEADER_SIZE) / 8;
  tu_truncate(f->dir, ix, INDEX_HEADER_SIZE + (ixn / 3) * 8);
  fx_open(f);
  expect_recovery(f, 1, 0, 0, 0, 0, 0);
  uint8_t *now = slurp(f->dir, ix, &len);
  assert_int_equal(len, ix_len);
  assert_memory_equal(now, orig, len);
  free(now);
  free(orig);
  fx_expect_log(f);
  fx_expect_continues_and_reopens_clean(f, 0);
}

/* A closed segment whose newest record is not in its last batch: losing
 * the time index must not lose the segment's true largest timestamp
 * (which decides time lookups and retention by age). */
static void test_plog_rebuilds_time_index_with_true_max_timestamp(void **state)
{
  struct fixture *f = *state;
  int64_t future = tag_ts(100000);
  fx_append(f, 1, future, true); /* offset 0 holds the newest record */
  fx_fill(f, 3, 5);
  fx_locate(f);
  fx_close(f);
  char tx[64];
  remove_file(f->dir, tu_segname(tx, 0, "timeindex"));
  fx_open(f);
  expect_recovery(f, 2, 1, 0, 0, 0, 0);
  int64_t off = -1;
  assert_int_equal(store_lookup_time(f->s, future, &off), 0);
  assert_int_equal(off, 0);
  assert_int_equal(store_lookup_time(f->s, future - 50, &off), 0);
  assert_int_equal(off, 0);
  fx_reopen(f);
  expect_recovery(f, 1, 0, 0, 0, 0, 0);
  assert_int_equal(store_lookup_time(f->s, future, &off), 0);
  assert_int_equal(off, 0);
}

/* ---- damage before the active segment, gaps ---- */

/* Media damage (a flipped byte) in an older, closed segment: the log is
 * cut at the damage and every later segment is removed, since its offsets
 * could not be reached without a hole. Raft replays what was cut. Open
 * checks a closed segment covered by the checkpoint only from its last
 * offset index entry on (reading every byte of every segment at each start
 * would cost too much), so damage there is found that way; damage earlier
 * in such a segment is found when the checkpoint is gone and open scans
 * everything (second case). */
static void test_plog_cuts_log_at_damage_in_closed_segment_and_drops_later_ones(void **state)
{
  (void)state;
  for (int no_checkpoint = 0; no_checkpoint < 2; no_checkpoint++) {
    struct fixture fx, *f = &fx;
    fx_init(f);
    fx_fill(f, 5, 5);
    fx_locate(f);
    size_t nseg;
    struct plog_segment_desc *desc = fx_segments(f, &nseg);
    assert_true(nseg >= 5);
    int64_t seg = desc[1].base_offset;
    int64_t seg_size = (int64_t)desc[1].size_bytes;
    size_t target = no_checkpoint ? fx_first_in_seg(f, seg) + 2 : fx_last_in_seg(f, seg);
    const struct rec *r = &f->recs[target];
    fx_close(f);
    char name[64];
    flip_byte(f->dir, tu_segname(name, seg, "log"), r->pos + (int64_t)r->len / 2);
    if (no_checkpoint) {
      remove_file(f->dir, CHECKPOINT_FILE);
    }
    fx_keep(f, target);
    fx_open(f);
    /* With the checkpoint: the cheap check of segment 1 fails, so its index
     * is rebuilt by a full scan; without it every segment up to the damage
     * is scanned in full. */
    if (no_checkpoint) {
      expect_recovery(f, 2, 0, (uint32_t)nseg - 2, (uint64_t)(seg_size - r->pos), 0, 0);
    } else {
      expect_recovery(f, 1, 1, (uint32_t)nseg - 2, (uint64_t)(seg_size - r->pos), 0, 0);
    }
    assert_int_equal(tu_file_size(f->dir, name), r->pos);
    for (size_t i = 2; i < nseg; i++) {
      assert_int_equal(seg_file_size(f->dir, desc[i].base_offset, "log"), -1);
      assert_int_equal(seg_file_size(f->dir, desc[i].base_offset, "index"), -1);
      assert_int_equal(seg_file_size(f->dir, desc[i].base_offset, "timeindex"), -1);
    }
    free(desc);
    struct store_info info;
    store_info(f->s, &info);
    assert_int_equal(info.segments, 2);
    struct checkpoint cp;
    assert_int_equal(checkpoint_read(f->dir, &cp), 0);
    assert_int_equal(cp.durable_offset, r->base);
    fx_expect_log(f);
    fx_expect_continues_and_reopens_clean(f, 0);
    fx_fini(f);
  }
}

/* A segment missing from the middle (its files gone, or only its .log)
 * leaves a gap: the prefix before it is kept, the segments after it are
 * removed, and indexes without a log are removed as well. */
static void test_plog_keeps_prefix_before_missing_segment(void **state)
{
  (void)state;
  for (int only_log = 0; only_log < 2; only_log++) {
    struct fixture fx, *f = &fx;
    fx_init(f);
    fx_fill(f, 5, 5);
    fx_locate(f);
    size_t nseg;
    struct plog_segment_desc *desc = fx_segments(f, &nseg);
    fx_close(f);
    int64_t gone = desc[2].base_offset;
    char name[64];
    remove_file(f->dir, tu_segname(name, gone, "log"));
    if (!only_log) {
      remove_file(f->dir, tu_segname(name, gone, "index"));
      remove_file(f->dir, tu_segname(name, gone, "timeindex"));
    }
    fx_keep(f, fx_first_in_seg(f, gone));
    fx_open(f);
    expect_recovery(f, 0, 0, (uint32_t)nseg - 3, 0, 0, 0);
    for (size_t i = 2; i < nseg; i++) {
      assert_int_equal(seg_file_size(f->dir, desc[i].base_offset, "log"), -1);
      assert_int_equal(seg_file_size(f->dir, desc[i].base_offset, "index"), -1);
      assert_int_equal(seg_file_size(f->dir, desc[i].base_offset, "timeindex"), -1);
    }
    free(desc);
    assert_int_equal(fx_next_offset(f), gone);
    fx_expect_log(f);
    fx_expect_continues_and_reopens_clean(f, 0);
    fx_fini(f);
  }
}

/* ---- garbage files, checkpoint ---- */

/* Files open does not know are reported and left alone; an index whose
 * segment does not exist is derived data of nothing and is removed. */
static void test_plog_ignores_unknown_files_and_removes_orphan_index(void **state)
{
  struct fixture *f = *state;
  fx_fill(f, 3, 5);
  fx_locate(f);
  fx_close(f);
  static const char *const junk[] = {"foo.bin", "123.log", "0000000000000000000x.log",
                                     "00000000000000000000.log.bak", "000000000000000000000.log"};
  const size_t njunk = sizeof junk / sizeof junk[0];
  for (size_t i = 0; i < njunk; i++) {
    tu_write_at(f->dir, junk[i], 0, junk[i], strlen(junk[i]));
  }
  char path[PATH_MAX];
  snprintf(path, sizeof path, "%s/subdir", f->dir);
  assert_int_equal(mkdir(path, 0755), 0);
  char orphan[64], orphan_t[64];
  tu_segname(orphan, 99999, "index");
  tu_segname(orphan_t, 99999, "timeindex");
  tu_write_at(f->dir, orphan, 0, "not an index", 12);
  tu_write_at(f->dir, orphan_t, 0, "", 0);
  fx_open(f);
  expect_recovery(f, 1, 0, 0, 0, 0, (uint32_t)njunk + 1);
  fx_expect_log(f);
  for (size_t i = 0; i < njunk; i++) {
    char buf[64] = "";
    assert_int_equal(tu_file_size(f->dir, junk[i]), (int64_t)strlen(junk[i]));
    tu_read_at(f->dir, junk[i], 0, buf, strlen(junk[i]));
    assert_string_equal(buf, junk[i]);
  }
  struct stat st;
  assert_int_equal(stat(path, &st), 0);
  assert_true(S_ISDIR(st.st_mode));
  assert_int_equal(tu_file_size(f->dir, orphan), -1);
  assert_int_equal(tu_file_size(f->dir, orphan_t), -1);
  fx_expect_continues_and_reopens_clean(f, (uint32_t)njunk + 1);
}

/* A corrupt or missing checkpoint says nothing about what was flushed, so
 * open scans every segment in full, keeps all of them, and writes a sound
 * checkpoint again. */
static void test_plog_scans_every_segment_without_a_sound_checkpoint(void **state)
{
  (void)state;
  for (int kind = 0; kind < 5; kind++) {
    struct fixture fx, *f = &fx;
    fx_init(f);
    fx_fill(f, 4, 5);
    fx_locate(f);
    struct store_info info;
    store_info(f->s, &info);
    uint32_t nseg = info.segments;
    fx_close(f);
    uint8_t g[CHECKPOINT_SIZE];
    for (size_t i = 0; i < sizeof g; i++) {
      g[i] = (uint8_t)(i * 89 + 3);
    }
    switch (kind) {
    case 0: /* missing */
      remove_file(f->dir, CHECKPOINT_FILE);
      break;
    case 1: /* garbage of the right size */
      tu_write_at(f->dir, CHECKPOINT_FILE, 0, g, sizeof g);
      break;
    case 2: /* cut short */
      tu_truncate(f->dir, CHECKPOINT_FILE, 7);
      break;
    case 3: /* empty */
      tu_truncate(f->dir, CHECKPOINT_FILE, 0);
      break;
    case 4: { /* one bit flipped: the CRC catches it */
      uint8_t b;
      tu_read_at(f->dir, CHECKPOINT_FILE, 9, &b, 1);
      b ^= 0x01;
      tu_write_at(f->dir, CHECKPOINT_FILE, 9, &b, 1);
      break;
    }
    }
    fx_open(f);
    expect_recovery(f, nseg, 0, 0, 0, 0, 0);
    struct checkpoint cp;
    assert_int_equal(checkpoint_read(f->dir, &cp), 0);
    assert_int_equal(cp.durable_offset, fx_next_offset(f));
    assert_int_equal(cp.durable_index, fx_last_index(f));
    assert_int_equal(cp.start_offset, 0);
    fx_expect_log(f);
    fx_expect_continues_and_reopens_clean(f, 0);
    fx_fini(f);
  }
}

/* ---- Raft entries cut short ---- */

/* A Raft entry is applied whole or not at all. When a crash leaves only
 * the first one or two batches of a three-batch entry (index 7), open
 * drops them too, the log's last index goes back to 6, and replaying entry
 * 7 is accepted. The same holds when the entry's second batch is corrupt. */
static void test_plog_drops_batches_of_raft_entry_cut_short(void **state)
{
  (void)state;
  /* keep: whole batches of entry 7 left; extra: bytes of the next one. */
  static const struct {
    int keep;
    int extra;
    bool corrupt; /* flip a byte in batch `keep` instead of cutting */
  } cases[] = {{1, 0, false}, {2, 0, false}, {1, 30, false}, {2, 70, false},
               {1, 0, true},  {2, 0, true},  {0, 20, false}};
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    struct fixture fx, *f = &fx;
    fx_init(f);
    for (int i = 0; i < 6; i++) {
      fx_append_entry(f, 1 + i % 2); /* entries 1..6 */
    }
    size_t before = f->n;
    fx_append_entry(f, 3); /* entry 7 */
    assert_int_equal(f->recs[f->n - 1].sidx, 7);
    assert_int_equal(store_flush(f->s, INT64_MAX), 0);
    fx_locate(f);
    fx_close(f);
    char name[64];
    tu_segname(name, f->recs[before].seg, "log");
    const struct rec *r = &f->recs[before + (size_t)cases[c].keep];
    int64_t end = tu_file_size(f->dir, name);
    if (cases[c].corrupt) {
      flip_byte(f->dir, name, r->pos + (int64_t)r->len / 2);
    } else {
      tu_truncate(f->dir, name, r->pos + cases[c].extra);
      end = r->pos + cases[c].extra;
    }
    int64_t entry_start = f->recs[before].pos;
    fx_keep(f, before);
    fx_open(f);
    expect_recovery(f, 1, 0, 0, (uint64_t)(end - entry_start), (uint32_t)cases[c].keep, 0);
    assert_int_equal(tu_file_size(f->dir, name), entry_start);
    struct store_info info;
    store_info(f->s, &info);
    assert_int_equal(info.last_index, 6);
    fx_expect_log(f);
    /* Raft replays entry 7: accepted, not a duplicate. */
    assert_int_equal(f->next_sidx, 7);
    fx_append_entry(f, 3);
    store_info(f->s, &info);
    assert_int_equal(info.last_index, 7);
    fx_expect_log(f);
    /* And a second replay of 7 is one. */
    size_t len;
    uint8_t *b = tu_make_batch(999, 2, 10, T0, &len);
    struct store_batch sb = {b, len};
    int64_t base;
    assert_int_equal(store_append(f->s, &sb, 1, 7, &base), CAIRN_EEXIST);
    free(b);
    fx_expect_continues_and_reopens_clean(f, 0);
    fx_fini(f);
  }
}

/* Entries not from Raft (source index 0) do not move last_index: after a
 * reopen, and after recovery cut the log, last_index is still that of the
 * last Raft entry, so replaying it is refused and the next one accepted,
 * exactly as before the reopen. Covers a closed segment whose tail (the
 * part open checks cheaply) holds only such entries. */
static void test_plog_keeps_last_raft_index_across_entries_not_from_raft(void **state)
{
  (void)state;
  for (int cut = 0; cut < 2; cut++) {
    struct fixture fx, *f = &fx;
    fx_init(f);
    fx_append_entry(f, 1);
    fx_append_entry(f, 2);
    fx_append_entry(f, 1); /* Raft entries 1..3 */
    struct store_info info;
    do {
      fx_append_unindexed(f, 1 + (int)(f->n % 2));
      store_info(f->s, &info);
    } while (info.segments < 3);
    fx_append_unindexed(f, 2);
    store_info(f->s, &info);
    assert_int_equal(info.last_index, 3);
    fx_locate(f);
    fx_close(f);
    if (cut) {
      const struct rec *r = &f->recs[f->n - 1];
      char name[64];
      tu_truncate(f->dir, tu_segname(name, r->seg, "log"), r->pos + 10);
      fx_keep(f, f->n - 2); /* the entry's first batch goes too */
    }
    fx_open(f);
    store_info(f->s, &info);
    assert_int_equal(info.last_index, 3);
    assert_int_equal(info.durable_index, 3);
    struct checkpoint cp;
    assert_int_equal(checkpoint_read(f->dir, &cp), 0);
    assert_int_equal(cp.durable_index, 3);
    size_t len;
    uint8_t *b = tu_make_batch(999, 2, 10, T0, &len);
    struct store_batch sb = {b, len};
    int64_t base;
    assert_int_equal(store_append(f->s, &sb, 1, 3, &base), CAIRN_EEXIST);
    free(b);
    for (size_t i = 0; i < f->n; i++) {
      expect_batch(f->s, &f->recs[i], f->recs[i].base);
    }
    assert_int_equal(f->next_sidx, 4);
    fx_append_entry(f, 1); /* Raft entry 4 */
    fx_reopen(f);
    store_info(f->s, &info);
    assert_int_equal(info.last_index, 4);
    fx_expect_log(f);
    fx_fini(f);
  }
}

/* Opens dir holding one empty segment at base and the checkpoint cp;
 * returns the log's Raft index. */
static uint64_t open_empty_with_checkpoint(int64_t base, const struct checkpoint *cp)
{
  char *dir = tu_tmpdir("plogcp");
  char name[64];
  assert_int_equal(fs_replace_file(dir, tu_segname(name, base, "log"), "", 0), 0);
  assert_int_equal(checkpoint_write(dir, cp), 0);
  struct plog_opts opts;
  plog_opts_default(&opts);
  struct store *s;
  char errmsg[256];
  assert_int_equal(plog_open(dir, &opts, &s, errmsg, sizeof errmsg), 0);
  struct store_info info;
  store_info(s, &info);
  assert_int_equal(info.next_offset, base);
  store_close(s);
  tu_tmpdir_free(dir);
  return info.last_index;
}

/* An empty log after a snapshot reset (the checkpoint at its end) keeps
 * the checkpoint's Raft index; one whose checkpoint names batches it no
 * longer has (lost below the file system) does not: the entries that
 * index counts are gone, and claiming them applied would keep Raft from
 * applying them again (found by tests/fuzz/fuzz_plog.c). */
static void test_plog_lost_batches_do_not_lend_the_checkpoints_index(void **state)
{
  (void)state;
  struct checkpoint reset = {.durable_offset = 5, .durable_index = 7, .start_offset = 5};
  assert_int_equal(open_empty_with_checkpoint(5, &reset), 7);
  struct checkpoint lost = {.durable_offset = 10, .durable_index = 7, .start_offset = 0};
  assert_int_equal(open_empty_with_checkpoint(0, &lost), 0);
}

/* ---- processes killed at bad moments ---- */

/* The batches of Raft entry idx in the kill tests: 1-3 of them, shapes
 * derived from idx so the parent can check what the child wrote. */
static int kill_entry_batches(uint64_t idx)
{
  return 1 + (int)(idx % 3);
}
static uint64_t kill_tag(uint64_t idx, int j)
{
  return idx * 4 + (uint64_t)j;
}
static int kill_records(uint64_t idx, int j)
{
  return 1 + (int)((idx + (uint64_t)j) % 4);
}
static size_t kill_vsize(uint64_t idx, int j)
{
  return 16 + (size_t)((idx * 31 + (uint64_t)j * 7) % 200);
}

static void kill_opts(struct plog_opts *o)
{
  plog_opts_default(o);
  o->segment_bytes = 16 * 1024;
  o->index_interval = 512;
}

struct kill_ack {
  int64_t next_offset;
  uint64_t last_index;
};

static void child_write(int fd, const void *p, size_t n)
{
  if (write(fd, p, n) != (ssize_t)n) {
    _exit(5);
  }
}

/* Appends entry idx in the child; exits on failure (the parent sees it). */
static void child_append(struct store *s, uint64_t idx)
{
  struct store_batch sb[3];
  int nb = kill_entry_batches(idx);
  for (int j = 0; j < nb; j++) {
    sb[j].data = tu_make_batch(kill_tag(idx, j), kill_records(idx, j), kill_vsize(idx, j),
                               T0 + (int64_t)idx * 10 + j, &sb[j].len);
  }
  int64_t base;
  int rv = store_append(s, sb, (size_t)nb, idx, &base);
  for (int j = 0; j < nb; j++) {
    free((void *)sb[j].data);
  }
  if (rv != 0) {
    _exit(3);
  }
}

static void child_ack(struct store *s, int fd)
{
  if (store_flush(s, INT64_MAX) != 0) {
    _exit(4);
  }
  struct store_info info;
  store_info(s, &info);
  struct kill_ack a = {info.next_offset, info.last_index};
  child_write(fd, &a, sizeof a);
}

/* Checks the whole log: entries 1, 2, ... each whole, once, in order, with
 * the content the child wrote, ending on an entry boundary. */
static void verify_kill_log(struct store *s, struct store_info *info)
{
  store_info(s, info);
  assert_false(info->fatal);
  assert_int_equal(info->start_offset, 0);
  int64_t off = 0;
  uint64_t idx = 1;
  int j = 0;
  while (off < info->next_offset) {
    struct store_region r;
    assert_int_equal(store_read(s, off, 1, &r), 0);
    uint8_t *buf = tu_read_region(r.fd, r.pos, r.len);
    assert_non_null(buf);
    struct batch_header h;
    batch_header_decode(buf, &h);
    assert_int_equal(h.base_offset, off);
    assert_int_equal(h.source_index, idx);
    int nb = kill_entry_batches(idx);
    assert_true(j < nb);
    assert_int_equal(h.entry_flags, j + 1 == nb ? BATCH_FLAG_ENTRY_END : 0);
    if (tu_check_batch(buf, r.len, kill_tag(idx, j), kill_records(idx, j), kill_vsize(idx, j)) !=
        0) {
      fail_msg("entry %llu batch %d at offset %lld: content differs", (unsigned long long)idx, j,
               (long long)off);
    }
    off = r.next_offset;
    assert_int_equal(off, h.base_offset + h.last_offset_delta + 1);
    free(buf);
    store_region_release(&r);
    if (++j == nb) {
      idx++;
      j = 0;
    }
  }
  assert_int_equal(off, info->next_offset);
  assert_int_equal(j, 0);
  assert_int_equal(info->last_index, idx - 1);
}

/* A child's open of the log (kill_opts): *last_index is the entry it goes
 * on from. Exits the child if the open fails. */
static struct store *child_open(const char *dir, uint64_t *last_index)
{
  log_set_level(LOG_ERROR);
  struct plog_opts o;
  kill_opts(&o);
  struct store *s;
  if (plog_open(dir, &o, &s, NULL, 0) != 0) {
    _exit(2);
  }
  struct store_info info;
  store_info(s, &info);
  *last_index = info.last_index;
  return s;
}

/* The child of the kill test: opens the log, goes on from its last entry,
 * acknowledges what each flush made durable, until killed. */
static void kill_child(const char *dir, int fd, uint64_t rng)
{
  uint64_t idx;
  struct store *s = child_open(dir, &idx);
  for (int k = 0; k < 2500; k++) {
    child_append(s, ++idx);
    if (tu_rand(&rng) % 4 == 0) {
      child_ack(s, fd);
    }
  }
  for (;;) {
    pause();
  }
}

static pid_t spawn(void (*body)(const char *, int, uint64_t), const char *dir, uint64_t rng,
                   int *rfd)
{
  int p[2];
  assert_int_equal(pipe(p), 0);
  fflush(stdout);
  fflush(stderr);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    close(p[0]);
    body(dir, p[1], rng);
    _exit(0);
  }
  close(p[1]);
  *rfd = p[0];
  return pid;
}

/* Kills pid, reaps it, and checks it died of the kill (not of an error of
 * its own). */
static void kill_and_reap(pid_t pid)
{
  assert_int_equal(kill(pid, SIGKILL), 0);
  int status;
  assert_int_equal(waitpid(pid, &status, 0), pid);
  if (!WIFSIGNALED(status) || WTERMSIG(status) != SIGKILL) {
    fail_msg("child did not die of SIGKILL: status %d", status);
  }
}

/* Reads acks until EOF; returns the last one (zero when none). */
static struct kill_ack read_last_ack(int fd)
{
  struct kill_ack last = {0, 0}, a;
  size_t got = 0;
  for (;;) {
    ssize_t n = read(fd, (uint8_t *)&a + got, sizeof a - got);
    if (n < 0 && errno == EINTR) {
      continue;
    }
    if (n <= 0) {
      break;
    }
    got += (size_t)n;
    if (got == sizeof a) {
      last = a;
      got = 0;
    }
  }
  close(fd);
  return last;
}

static void sleep_ms(uint64_t ms)
{
  struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

/* A writer killed with SIGKILL at random moments, over and over on the
 * same directory: after each kill every acknowledged (flushed) entry is
 * there, once, in order, whole; whatever lies past the acknowledged end is
 * whole entries in sequence too, never garbage. */
static void test_plog_keeps_every_acknowledged_entry_across_sigkill(void **state)
{
  (void)state;
  uint64_t rng = tu_seed(__func__);
  char *dir = tu_tmpdir("plogkill");
  struct kill_ack prev = {0, 0};
  for (int round = 0; round < 20; round++) {
    int fd;
    pid_t pid = spawn(kill_child, dir, tu_rand(&rng) | 1, &fd);
    sleep_ms(2 + tu_rand(&rng) % 200);
    kill_and_reap(pid);
    struct kill_ack ack = read_last_ack(fd);
    struct plog_opts o;
    kill_opts(&o);
    struct store *s;
    char err[256];
    int rv = plog_open(dir, &o, &s, err, sizeof err);
    if (rv != 0) {
      fail_msg("round %d: open: %s", round, err);
    }
    struct store_info info;
    verify_kill_log(s, &info);
    /* Everything acknowledged, in this round and before, is there. */
    assert_true(info.next_offset >= ack.next_offset);
    assert_true(info.last_index >= ack.last_index);
    assert_true(info.next_offset >= prev.next_offset);
    assert_true(info.last_index >= prev.last_index);
    struct plog_recovery rec;
    plog_recovery_info(s, &rec);
    assert_int_equal(rec.segments_dropped, 0);
    assert_int_equal(rec.files_ignored, 0);
    print_message("round %d: acked index %llu, log holds %llu entries, %u segments, "
                  "%llu bytes cut\n",
                  round, (unsigned long long)ack.last_index, (unsigned long long)info.last_index,
                  info.segments, (unsigned long long)rec.bytes_truncated);
    prev.next_offset = info.next_offset;
    prev.last_index = info.last_index;
    store_close(s);
  }
  tu_tmpdir_free(dir);
}

/* The child of the power-loss test: appends a few entries, flushes, then
 * appends more without flushing, says so, and waits to be killed. */
static void powerloss_child(const char *dir, int fd, uint64_t rng)
{
  uint64_t idx;
  struct store *s = child_open(dir, &idx);
  int durable = 1 + (int)(tu_rand(&rng) % 30);
  int volatile_n = 1 + (int)(tu_rand(&rng) % 30);
  for (int k = 0; k < durable; k++) {
    child_append(s, ++idx);
  }
  child_ack(s, fd);
  for (int k = 0; k < volatile_n; k++) {
    child_append(s, ++idx);
  }
  struct kill_ack done = {-1, idx};
  child_write(fd, &done, sizeof done);
  for (;;) {
    pause();
  }
}

/* The newest .log in dir. */
static int64_t newest_segment(const char *dir)
{
  DIR *d = opendir(dir);
  assert_non_null(d);
  int64_t best = -1;
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    size_t l = strlen(e->d_name);
    if (l == 24 && strcmp(e->d_name + 20, ".log") == 0) {
      int64_t base = strtoll(e->d_name, NULL, 10);
      best = base > best ? base : best;
    }
  }
  closedir(d);
  return best;
}

/* Walks the batch headers of a .log up to size bytes: the position of the
 * first batch at or after offset `at` (size if none), and the end (position,
 * next offset) of the last whole Raft entry. */
static void walk_log(const char *dir, const char *name, int64_t seg, int64_t size, int64_t at,
                     int64_t *at_pos, int64_t *entry_end, int64_t *entry_next)
{
  int64_t pos = 0;
  *at_pos = -1;
  *entry_end = 0;
  *entry_next = seg;
  while (pos + BATCH_HEADER_SIZE <= size) {
    uint8_t hb[BATCH_HEADER_SIZE];
    tu_read_at(dir, name, pos, hb, sizeof hb);
    struct batch_header h;
    batch_header_decode(hb, &h);
    if (*at_pos < 0 && h.base_offset >= at) {
      *at_pos = pos;
    }
    int64_t after = pos + (int64_t)batch_total_size(h.batch_length);
    if (after > size) {
      break;
    }
    pos = after;
    if (h.entry_flags & BATCH_FLAG_ENTRY_END) {
      *entry_end = pos;
      *entry_next = h.base_offset + h.last_offset_delta + 1;
    }
  }
  if (*at_pos < 0) {
    *at_pos = pos;
  }
}

/* A power loss: the file system keeps what was fsynced and an arbitrary
 * prefix of the rest of the active segment, maybe followed by zeros. After
 * a writer is killed with unflushed entries, the active .log is cut at a
 * random byte at or after the durable end the checkpoint records (and
 * sometimes extended with zeros). Open keeps everything durable, and the
 * log ends exactly after the last whole entry the cut left. */
static void test_plog_keeps_durable_prefix_after_simulated_power_loss(void **state)
{
  (void)state;
  uint64_t rng = tu_seed(__func__);
  char *dir = tu_tmpdir("plogpower");
  for (int round = 0; round < 12; round++) {
    int fd;
    pid_t pid = spawn(powerloss_child, dir, tu_rand(&rng) | 1, &fd);
    struct kill_ack ack, done;
    ssize_t n1 = read(fd, &ack, sizeof ack);
    ssize_t n2 = read(fd, &done, sizeof done);
    kill_and_reap(pid);
    close(fd);
    assert_int_equal(n1, sizeof ack);
    assert_int_equal(n2, sizeof done);
    assert_int_equal(done.next_offset, -1);

    struct checkpoint cp;
    assert_int_equal(checkpoint_read(dir, &cp), 0);
    assert_int_equal(cp.durable_offset, ack.next_offset);
    assert_int_equal(cp.durable_index, ack.last_index);
    int64_t seg = newest_segment(dir);
    char name[64];
    tu_segname(name, seg, "log");
    int64_t size = tu_file_size(dir, name);
    int64_t durable_pos, e_end, e_next;
    walk_log(dir, name, seg, size, cp.durable_offset, &durable_pos, &e_end, &e_next);
    int64_t cut = durable_pos + (int64_t)(tu_rand(&rng) % (uint64_t)(size - durable_pos + 1));
    tu_truncate(dir, name, cut);
    walk_log(dir, name, seg, cut, cp.durable_offset, &durable_pos, &e_end, &e_next);
    size_t zeros = tu_rand(&rng) % 3 == 0 ? 1 + tu_rand(&rng) % 8192 : 0;
    if (zeros > 0) {
      append_zeros(dir, name, zeros);
    }

    struct plog_opts o;
    kill_opts(&o);
    struct store *s;
    char err[256];
    int rv = plog_open(dir, &o, &s, err, sizeof err);
    if (rv != 0) {
      fail_msg("round %d: open: %s", round, err);
    }
    struct plog_recovery rec;
    plog_recovery_info(s, &rec);
    struct store_info info;
    verify_kill_log(s, &info);
    print_message("round %d: durable %lld, cut at byte %lld of segment %lld (+%zu zeros): "
                  "log ends at %lld\n",
                  round, (long long)cp.durable_offset, (long long)cut, (long long)seg, zeros,
                  (long long)info.next_offset);
    assert_true(info.next_offset >= cp.durable_offset);
    assert_true(info.last_index >= cp.durable_index);
    assert_int_equal(info.next_offset, e_next);
    assert_int_equal(rec.bytes_truncated, (uint64_t)(cut + (int64_t)zeros - e_end));
    assert_int_equal(rec.segments_dropped, 0);
    assert_int_equal(tu_file_size(dir, name), e_end);
    store_close(s);

    /* A second open has nothing to repair. */
    assert_int_equal(plog_open(dir, &o, &s, err, sizeof err), 0);
    plog_recovery_info(s, &rec);
    assert_int_equal(rec.bytes_truncated, 0);
    assert_int_equal(rec.batches_truncated, 0);
    assert_int_equal(rec.indexes_rebuilt, 0);
    struct store_info again;
    verify_kill_log(s, &again);
    assert_int_equal(again.next_offset, info.next_offset);
    store_close(s);
  }
  tu_tmpdir_free(dir);
}

/* The first open of a log whose files a syncfs made durable
 * (plog_opts.disk_synced, parts_synced.h) after a writer was killed with
 * entries it never flushed: recovery syncs nothing and writes no
 * checkpoint (every sync and checkpoint write is armed to fail), keeps
 * every whole entry and counts it durable; the indexes it rebuilt are
 * written and synced by the next flush, so a later open without the flag
 * has nothing to repair. The same open without the flag syncs (the armed
 * fault fails it): what the test relies on is real. */
/* Appends entries and flushes (one ack: the durable end), appends a few
 * more it never flushes (a second message: the log's end), then waits to
 * be killed. */
static void unflushed_child(const char *dir, int fd, uint64_t rng)
{
  uint64_t idx;
  struct store *s = child_open(dir, &idx);
  for (int k = 0; k < 20 + (int)(rng % 20); k++) {
    child_append(s, ++idx);
  }
  child_ack(s, fd);
  for (int k = 0; k < 1 + (int)(rng % 5); k++) {
    child_append(s, ++idx);
  }
  struct store_info info;
  store_info(s, &info);
  struct kill_ack end = {info.next_offset, info.last_index};
  child_write(fd, &end, sizeof end);
  for (;;) {
    pause();
  }
}

/* Runs unflushed_child on dir and kills it: *ack is what it flushed,
 * *end the log it left. */
static void kill_with_unflushed_tail(const char *dir, uint64_t rng, struct kill_ack *ack,
                                     struct kill_ack *end)
{
  int fd;
  pid_t pid = spawn(unflushed_child, dir, rng, &fd);
  assert_int_equal(read(fd, ack, sizeof *ack), (ssize_t)sizeof *ack);
  assert_int_equal(read(fd, end, sizeof *end), (ssize_t)sizeof *end);
  kill_and_reap(pid);
  close(fd);
  assert_true(end->next_offset > ack->next_offset);
}

/* Index files this process holds open (their descriptors). */
static int open_index_files(void)
{
  DIR *d = opendir("/proc/self/fd");
  assert_non_null(d);
  int n = 0;
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    char link[300], target[PATH_MAX];
    snprintf(link, sizeof link, "/proc/self/fd/%s", e->d_name);
    ssize_t len = readlink(link, target, sizeof target - 1);
    if (len <= 0) {
      continue;
    }
    target[len] = '\0';
    n += strstr(target, "index") != NULL ? 1 : 0;
  }
  closedir(d);
  return n;
}

static void test_plog_trusts_a_synced_disk_at_first_open(void **state)
{
  (void)state;
  uint64_t rng = tu_seed(__func__);
  char *dir = tu_tmpdir("plogsyncfs");
  struct kill_ack ack, end;
  kill_with_unflushed_tail(dir, tu_rand(&rng), &ack, &end);

  struct plog_opts o;
  kill_opts(&o);
  struct store *s;
  char err[256] = "";
  fault_arm(FAULT_SEGMENT_SYNC, 0, -EIO);
  assert_int_not_equal(plog_open(dir, &o, &s, err, sizeof err), 0); /* it syncs: fails */
  fault_reset();

  /* Killed again with unflushed entries: what the flagged open must keep. */
  kill_with_unflushed_tail(dir, tu_rand(&rng), &ack, &end);
  struct checkpoint cp;
  assert_int_equal(checkpoint_read(dir, &cp), 0);
  assert_int_equal(cp.durable_offset, ack.next_offset);
  o.disk_synced = true;
  fault_arm(FAULT_SEGMENT_SYNC, 0, -EIO);
  fault_arm(FAULT_CHECKPOINT_WRITE, 0, -EIO);
  int rv = plog_open(dir, &o, &s, err, sizeof err);
  fault_reset();
  if (rv != 0) {
    fail_msg("open trusting the disk synced or wrote a checkpoint: %s", err);
  }
  /* No index file is held open for the sync it owes (a node opens
   * 10,000 replicas this way under a 20,000 descriptor limit). */
  assert_int_equal(open_index_files(), 0);
  struct store_info info;
  verify_kill_log(s, &info);
  assert_int_equal(info.next_offset, end.next_offset);
  assert_int_equal(info.last_index, end.last_index);
  assert_int_equal(info.durable_offset, info.next_offset);
  assert_int_equal(info.durable_index, info.last_index);
  assert_int_equal(checkpoint_read(dir, &cp), 0);
  assert_int_equal(cp.durable_offset, ack.next_offset); /* not rewritten */
  print_message("flushed up to %lld, log ends at %lld: durable to its end, checkpoint still at "
                "%lld\n",
                (long long)ack.next_offset, (long long)info.next_offset,
                (long long)cp.durable_offset);

  /* The next flush writes what recovery rebuilt, then the checkpoint. */
  child_append(s, info.last_index + 1);
  assert_int_equal(store_flush(s, INT64_MAX), 0);
  store_info(s, &info);
  store_close(s);
  assert_int_equal(checkpoint_read(dir, &cp), 0);
  assert_int_equal(cp.durable_offset, info.next_offset);
  o.disk_synced = false;
  assert_int_equal(plog_open(dir, &o, &s, err, sizeof err), 0);
  struct plog_recovery rec;
  plog_recovery_info(s, &rec);
  assert_int_equal(rec.indexes_rebuilt, 0);
  assert_int_equal(rec.bytes_truncated, 0);
  struct store_info again;
  verify_kill_log(s, &again);
  assert_int_equal(again.next_offset, info.next_offset);
  store_close(s);
  tu_tmpdir_free(dir);
}

int main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_plog_recovers_prefix_after_active_segment_cut_mid_batch),
      cmocka_unit_test(test_plog_recovers_prefix_before_corrupt_batch_in_active_segment),
      cmocka_unit_test(test_plog_cuts_zero_filled_tail),
      cmocka_unit_test(test_plog_rebuilds_missing_or_damaged_index),
      cmocka_unit_test(test_plog_replaces_wrong_index_of_active_segment),
      cmocka_unit_test_setup_teardown(test_plog_completes_index_cut_at_entry_boundary, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_plog_rebuilds_time_index_with_true_max_timestamp, setup,
                                      teardown),
      cmocka_unit_test(test_plog_cuts_log_at_damage_in_closed_segment_and_drops_later_ones),
      cmocka_unit_test(test_plog_keeps_prefix_before_missing_segment),
      cmocka_unit_test_setup_teardown(test_plog_ignores_unknown_files_and_removes_orphan_index,
                                      setup, teardown),
      cmocka_unit_test(test_plog_scans_every_segment_without_a_sound_checkpoint),
      cmocka_unit_test(test_plog_drops_batches_of_raft_entry_cut_short),
      cmocka_unit_test(test_plog_keeps_last_raft_index_across_entries_not_from_raft),
      cmocka_unit_test(test_plog_lost_batches_do_not_lend_the_checkpoints_index),
      cmocka_unit_test(test_plog_keeps_every_acknowledged_entry_across_sigkill),
      cmocka_unit_test(test_plog_keeps_durable_prefix_after_simulated_power_loss),
      cmocka_unit_test(test_plog_trusts_a_synced_disk_at_first_open),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
