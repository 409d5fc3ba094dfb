/* test_memlog.c - the in-memory store against the store.h contract:
 * offsets, reads of whole batches, validation and idempotency on append,
 * time lookup, flush marks, truncation, deletion from the front, retention,
 * and regions that outlive the store. */
#include "storage/memlog.h"

#include "common/err.h"
#include "format/batch.h"
#include "format/crc32c.h"
#include "format/endian.h"
#include "testutil.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#define MLT_VALUE_SIZE 32
#define MLT_MAX_MADE 4096
#define MLT_MAX_ENTRY 8

/* One batch the test appended: enough to check it when it is read back. */
struct mlt_batch {
  int64_t base;
  int records;
  uint64_t tag;
  uint64_t source_index;
  uint8_t flags;
  size_t len;
  bool live; /* not truncated or deleted */
};

/* The store under test and every batch appended to it, oldest first. */
struct mlt {
  struct store *s;
  struct mlt_batch made[MLT_MAX_MADE];
  size_t n_made;
  uint64_t next_tag;
};

static struct mlt *mlt_open(const struct memlog_opts *opts)
{
  struct mlt *t = calloc(1, sizeof *t);
  assert_non_null(t);
  assert_int_equal(memlog_new(opts, &t->s), 0);
  t->next_tag = 1;
  return t;
}

static void mlt_close(struct mlt *t)
{
  store_close(t->s);
  free(t);
}

/* Appends one entry of nb batches; batch i has records[i] records with
 * timestamps from ts + 100 * i. Returns what store_append returned; on
 * success remembers the batches. */
static int mlt_append_ts(struct mlt *t, uint64_t source_index, size_t nb, const int *records,
                         int64_t ts, int64_t *base)
{
  assert_true(nb <= MLT_MAX_ENTRY && t->n_made + nb <= MLT_MAX_MADE);
  struct store_batch batches[MLT_MAX_ENTRY];
  uint64_t tags[MLT_MAX_ENTRY];
  for (size_t i = 0; i < nb; i++) {
    tags[i] = t->next_tag++;
    batches[i].data = tu_make_batch(tags[i], records[i], MLT_VALUE_SIZE, ts + 100 * (int64_t)i,
                                    &batches[i].len);
  }
  int64_t b = -1;
  int rv = store_append(t->s, batches, nb, source_index, &b);
  for (size_t i = 0; i < nb && rv == 0; i++) {
    struct mlt_batch *m = &t->made[t->n_made++];
    *m = (struct mlt_batch){.base = b, .records = records[i], .tag = tags[i],
                            .source_index = source_index,
                            .flags = i == nb - 1 ? BATCH_FLAG_ENTRY_END : 0,
                            .len = batches[i].len, .live = true};
    if (i == 0 && base != NULL) {
      *base = b;
    }
    b += records[i];
  }
  for (size_t i = 0; i < nb; i++) {
    free((void *)batches[i].data);
  }
  return rv;
}

static int mlt_append(struct mlt *t, uint64_t source_index, size_t nb, const int *records,
                      int64_t *base)
{
  return mlt_append_ts(t, source_index, nb, records, 1000, base);
}

/* Appends one single-batch entry and asserts it lands at want_base. */
static void mlt_append_one(struct mlt *t, uint64_t source_index, int records, int64_t want_base)
{
  int64_t base = -1;
  assert_int_equal(mlt_append(t, source_index, 1, &records, &base), 0);
  assert_int_equal(base, want_base);
}

/* The newest live batch appended at base. */
static const struct mlt_batch *mlt_find(const struct mlt *t, int64_t base)
{
  for (size_t i = t->n_made; i-- > 0;) {
    if (t->made[i].live && t->made[i].base == base) {
      return &t->made[i];
    }
  }
  return NULL;
}

/* Does a Raft entry start at offset (the live batch ending there, if any,
 * ends its entry)? */
static bool mlt_entry_starts_at(const struct mlt *t, int64_t offset)
{
  for (size_t i = t->n_made; i-- > 0;) {
    const struct mlt_batch *m = &t->made[i];
    if (m->live && m->base + m->records == offset) {
      return (m->flags & BATCH_FLAG_ENTRY_END) != 0;
    }
  }
  return true;
}

static void mlt_kill_from(struct mlt *t, int64_t offset)
{
  for (size_t i = 0; i < t->n_made; i++) {
    if (t->made[i].base >= offset) {
      t->made[i].live = false;
    }
  }
}

static void mlt_kill_below(struct mlt *t, int64_t offset)
{
  for (size_t i = 0; i < t->n_made; i++) {
    if (t->made[i].base + t->made[i].records <= offset) {
      t->made[i].live = false;
    }
  }
}

/* Checks that r holds whole, contiguous, intact batches that the test
 * appended, stamped as appended, from r->first_offset to r->next_offset.
 * Returns how many batches it holds. */
static size_t mlt_check_region(const struct mlt *t, const struct store_region *r)
{
  assert_true(r->fd < 0);
  size_t pos = 0;
  size_t count = 0;
  int64_t expect = r->first_offset;
  while (pos < r->len) {
    assert_true(r->len - pos >= BATCH_HEADER_SIZE);
    struct batch_header h;
    batch_header_decode(r->mem + pos, &h);
    size_t size = batch_total_size(h.batch_length);
    assert_true(size <= r->len - pos);
    assert_int_equal(h.base_offset, expect);
    const struct mlt_batch *m = mlt_find(t, h.base_offset);
    assert_non_null(m);
    assert_int_equal(size, m->len);
    assert_int_equal(h.source_index, m->source_index);
    assert_int_equal(h.entry_flags, m->flags);
    assert_int_equal(tu_check_batch(r->mem + pos, size, m->tag, m->records, MLT_VALUE_SIZE), 0);
    expect += h.record_count;
    pos += size;
    count++;
  }
  assert_int_equal(expect, r->next_offset);
  return count;
}

static struct store_info mlt_info(const struct mlt *t)
{
  struct store_info info;
  store_info(t->s, &info);
  return info;
}

/* ---- append and read ---- */

static void test_memlog_starts_empty_at_offset_zero_with_one_segment(void **state)
{
  (void)state;
  struct mlt *t = mlt_open(NULL);
  struct store_info info = mlt_info(t);
  assert_int_equal(info.start_offset, 0);
  assert_int_equal(info.next_offset, 0);
  assert_int_equal(info.last_index, 0);
  assert_int_equal(info.durable_offset, 0);
  assert_int_equal(info.size_bytes, 0);
  assert_int_equal(info.segments, 1);
  assert_false(info.fatal);
  mlt_close(t);
}

static void test_memlog_append_assigns_gap_free_offsets(void **state)
{
  (void)state;
  struct mlt *t = mlt_open(NULL);
  int64_t base = -1;
  assert_int_equal(mlt_append(t, 0, 1, (int[]){3}, &base), 0);
  assert_int_equal(base, 0);
  assert_int_equal(mlt_append(t, 0, 3, (int[]){2, 1, 5}, &base), 0);
  assert_int_equal(base, 3);
  assert_int_equal(mlt_append(t, 0, 1, (int[]){4}, &base), 0);
  assert_int_equal(base, 11);
  struct store_info info = mlt_info(t);
  assert_int_equal(info.next_offset, 15);
  assert_int_equal(info.start_offset, 0);
  uint64_t bytes = 0;
  for (size_t i = 0; i < t->n_made; i++) {
    bytes += t->made[i].len;
  }
  assert_int_equal(info.size_bytes, bytes);
  mlt_close(t);
}

static void test_memlog_append_stamps_base_source_and_entry_end_on_last_batch(void **state)
{
  (void)state;
  struct mlt *t = mlt_open(NULL);
  assert_int_equal(mlt_append(t, 7, 3, (int[]){2, 2, 2}, NULL), 0);
  assert_int_equal(mlt_append(t, 0, 2, (int[]){1, 1}, NULL), 0);
  struct store_region r;
  assert_int_equal(store_read(t->s, 0, SIZE_MAX, &r), 0);
  /* mlt_check_region compares every stamped field with what was expected. */
  assert_int_equal(mlt_check_region(t, &r), 5);
  assert_int_equal(r.first_offset, 0);
  assert_int_equal(r.next_offset, 8);
  store_region_release(&r);
  assert_int_equal(mlt_info(t).last_index, 7);
  mlt_close(t);
}

static void test_memlog_append_never_writes_the_callers_batches(void **state)
{
  (void)state;
  struct mlt *t = mlt_open(NULL);
  mlt_append_one(t, 0, 4, 0);
  size_t len;
  uint8_t *p = tu_make_batch(99, 2, MLT_VALUE_SIZE, 5, &len);
  uint8_t *before = malloc(len);
  memcpy(before, p, len);
  struct store_batch b = {p, len};
  int64_t base;
  assert_int_equal(store_append(t->s, &b, 1, 3, &base), 0);
  assert_int_equal(base, 4);
  assert_memory_equal(p, before, len);
  /* The stored copy carries the stamps. */
  struct store_region r;
  assert_int_equal(store_read(t->s, 4, 1, &r), 0);
  struct batch_header h;
  batch_header_decode(r.mem, &h);
  assert_int_equal(h.base_offset, 4);
  assert_int_equal(h.source_index, 3);
  assert_int_equal(h.entry_flags, BATCH_FLAG_ENTRY_END);
  store_region_release(&r);
  free(before);
  free(p);
  mlt_close(t);
}

static void test_memlog_read_returns_whole_batches_up_to_max_bytes(void **state)
{
  (void)state;
  struct mlt *t = mlt_open(NULL);
  for (int i = 0; i < 4; i++) {
    mlt_append_one(t, 0, 3, 3 * i);
  }
  size_t one = t->made[0].len;
  struct store_region r;
  assert_int_equal(store_read(t->s, 0, 2 * one + one / 2, &r), 0);
  assert_int_equal(mlt_check_region(t, &r), 2);
  assert_int_equal(r.len, 2 * one);
  assert_int_equal(r.next_offset, 6);
  store_region_release(&r);

  /* Exactly three batches' worth fits three. */
  assert_int_equal(store_read(t->s, 3, 3 * one, &r), 0);
  assert_int_equal(mlt_check_region(t, &r), 3);
  assert_int_equal(r.first_offset, 3);
  assert_int_equal(r.next_offset, 12);
  store_region_release(&r);
  mlt_close(t);
}

static void test_memlog_read_returns_the_batch_holding_the_offset_whole_even_past_max_bytes(
    void **state)
{
  (void)state;
  struct mlt *t = mlt_open(NULL);
  mlt_append_one(t, 0, 5, 0);
  mlt_append_one(t, 0, 5, 5);
  struct store_region r;
  assert_int_equal(store_read(t->s, 7, 1, &r), 0);
  assert_int_equal(mlt_check_region(t, &r), 1);
  assert_int_equal(r.first_offset, 5);
  assert_int_equal(r.next_offset, 10);
  store_region_release(&r);

  assert_int_equal(store_read(t->s, 4, 0, &r), 0);
  assert_int_equal(mlt_check_region(t, &r), 1);
  assert_int_equal(r.first_offset, 0);
  store_region_release(&r);
  mlt_close(t);
}

static void test_memlog_read_at_log_end_is_empty(void **state)
{
  (void)state;
  struct mlt *t = mlt_open(NULL);
  struct store_region r;
  assert_int_equal(store_read(t->s, 0, 4096, &r), 0);
  assert_int_equal(r.len, 0);
  assert_int_equal(r.first_offset, 0);
  assert_int_equal(r.next_offset, 0);
  assert_true(r.fd < 0);
  store_region_release(&r);

  mlt_append_one(t, 0, 3, 0);
  assert_int_equal(store_read(t->s, 3, 4096, &r), 0);
  assert_int_equal(r.len, 0);
  assert_int_equal(r.first_offset, 3);
  assert_int_equal(r.next_offset, 3);
  store_region_release(&r);
  mlt_close(t);
}

static void test_memlog_read_outside_start_and_next_fails_with_eoffset(void **state)
{
  (void)state;
  struct mlt *t = mlt_open(NULL);
  mlt_append_one(t, 0, 3, 0);
  mlt_append_one(t, 0, 3, 3);
  struct store_region r;
  assert_int_equal(store_read(t->s, -1, 4096, &r), CAIRN_EOFFSET);
  store_region_release(&r);
  assert_int_equal(store_read(t->s, 7, 4096, &r), CAIRN_EOFFSET);
  assert_non_null(strstr(store_errmsg(t->s), "read at 7"));
  store_region_release(&r);
  assert_int_equal(store_delete_before(t->s, 3), 0);
  assert_int_equal(store_read(t->s, 2, 4096, &r), CAIRN_EOFFSET);
  store_region_release(&r);
  mlt_close(t);
}

/* ---- validation and idempotency ---- */

static void test_memlog_rejects_a_corrupt_batch_with_ebadcrc_and_appends_nothing(void **state)
{
  (void)state;
  struct mlt *t = mlt_open(NULL);
  struct store_batch b[3];
  uint8_t *raw[3];
  for (int i = 0; i < 3; i++) {
    raw[i] = tu_make_batch((uint64_t)i + 1, 2, MLT_VALUE_SIZE, 10, &b[i].len);
    b[i].data = raw[i];
  }
  raw[1][b[1].len - 1] ^= 0x40; /* past the header: the CRC catches it */
  int64_t base = -1;
  assert_int_equal(store_append(t->s, b, 3, 4, &base), CAIRN_EBADCRC);
  assert_int_equal(base, -1);
  assert_int_equal(strncmp(store_errmsg(t->s), "batch 2 of 3: ", 14), 0);
  struct store_info info = mlt_info(t);
  assert_int_equal(info.next_offset, 0);
  assert_int_equal(info.size_bytes, 0);
  assert_int_equal(info.last_index, 0);
  struct store_region r;
  assert_int_equal(store_read(t->s, 0, 4096, &r), 0);
  assert_int_equal(r.len, 0);
  for (int i = 0; i < 3; i++) {
    free(raw[i]);
  }
  /* The same index, intact, is still welcome: nothing of it was applied. */
  int64_t got;
  assert_int_equal(mlt_append(t, 4, 1, (int[]){2}, &got), 0);
  assert_int_equal(got, 0);
  mlt_close(t);
}

static void test_memlog_rejects_a_batch_over_max_batch_bytes_with_etoolarge(void **state)
{
  (void)state;
  struct memlog_opts opts = {.max_batch_bytes = 200};
  struct mlt *t = mlt_open(&opts);
  assert_int_equal(mlt_append(t, 0, 1, (int[]){10}, NULL), CAIRN_ETOOLARGE);
  assert_int_equal(strncmp(store_errmsg(t->s), "batch 1 of 1: ", 14), 0);
  assert_int_equal(mlt_info(t).next_offset, 0);
  mlt_append_one(t, 0, 1, 0);
  mlt_close(t);
}

static void test_memlog_rejects_an_empty_append_with_einval(void **state)
{
  (void)state;
  struct mlt *t = mlt_open(NULL);
  struct store_batch b = {NULL, 0};
  int64_t base;
  assert_int_equal(store_append(t->s, &b, 0, 1, &base), CAIRN_EINVAL);
  assert_int_equal(store_append(t->s, &b, 1, 1, &base), CAIRN_EBADLEN);
  assert_int_equal(mlt_info(t).last_index, 0);
  mlt_close(t);
}

static void test_memlog_replay_of_an_applied_source_index_returns_eexist(void **state)
{
  (void)state;
  struct mlt *t = mlt_open(NULL);
  assert_int_equal(mlt_append(t, 5, 2, (int[]){1, 2}, NULL), 0);
  assert_int_equal(mlt_append(t, 5, 2, (int[]){1, 2}, NULL), CAIRN_EEXIST);
  assert_int_equal(mlt_append(t, 3, 1, (int[]){1}, NULL), CAIRN_EEXIST);
  assert_non_null(strstr(store_errmsg(t->s), "already applied"));
  struct store_info info = mlt_info(t);
  assert_int_equal(info.next_offset, 3);
  assert_int_equal(info.last_index, 5);
  /* Index 0 is not from Raft: never checked, and last_index stays. */
  assert_int_equal(mlt_append(t, 0, 1, (int[]){1}, NULL), 0);
  assert_int_equal(mlt_append(t, 0, 1, (int[]){1}, NULL), 0);
  assert_int_equal(mlt_info(t).last_index, 5);
  int64_t base;
  assert_int_equal(mlt_append(t, 6, 1, (int[]){1}, &base), 0);
  assert_int_equal(base, 5);
  assert_int_equal(mlt_info(t).last_index, 6);
  mlt_close(t);
}

/* ---- lookup_time ---- */

static int64_t mlt_lookup(const struct mlt *t, int64_t ts)
{
  int64_t off = -1;
  assert_int_equal(store_lookup_time(t->s, ts, &off), 0);
  return off;
}

static void test_memlog_lookup_time_finds_the_first_record_at_or_after_the_time(void **state)
{
  (void)state;
  struct mlt *t = mlt_open(NULL);
  /* Offsets 0-4 at times 1000-1004, 5-9 at 2000-2004. */
  assert_int_equal(mlt_append_ts(t, 0, 1, (int[]){5}, 1000, NULL), 0);
  assert_int_equal(mlt_append_ts(t, 0, 1, (int[]){5}, 2000, NULL), 0);
  assert_int_equal(mlt_lookup(t, 0), 0);
  assert_int_equal(mlt_lookup(t, 1000), 0);
  assert_int_equal(mlt_lookup(t, 1003), 3);
  assert_int_equal(mlt_lookup(t, 1500), 5);
  assert_int_equal(mlt_lookup(t, 2004), 9);
  assert_int_equal(mlt_lookup(t, 2005), 10); /* none: the log end */
  mlt_close(t);
}

static void test_memlog_lookup_time_goes_by_offset_when_timestamps_go_back(void **state)
{
  (void)state;
  struct mlt *t = mlt_open(NULL);
  /* Offsets 0-2 at 500-502, 3-5 at 100-102 (a producer's clock went back). */
  assert_int_equal(mlt_append_ts(t, 0, 1, (int[]){3}, 500, NULL), 0);
  assert_int_equal(mlt_append_ts(t, 0, 1, (int[]){3}, 100, NULL), 0);
  assert_int_equal(mlt_lookup(t, 101), 0);
  assert_int_equal(mlt_lookup(t, 502), 2);
  assert_int_equal(mlt_lookup(t, 503), 6);
  mlt_close(t);
}

static void test_memlog_lookup_time_skips_records_below_start(void **state)
{
  (void)state;
  struct mlt *t = mlt_open(NULL);
  assert_int_equal(mlt_append_ts(t, 0, 1, (int[]){5}, 1000, NULL), 0);
  assert_int_equal(store_delete_before(t->s, 3), 0);
  assert_int_equal(mlt_lookup(t, 0), 3);
  assert_int_equal(mlt_lookup(t, 1004), 4);
  mlt_close(t);
}

/* Marks tu_make_batch's output as lz4 and re-signs it: the store may not
 * look inside, so the records need not really be compressed. */
static void mlt_mark_compressed(uint8_t *p, size_t len)
{
  le_put16(p + BATCH_OFF_ATTRIBUTES, BATCH_CODEC_LZ4);
  le_put32(p + BATCH_OFF_CRC, crc32c(p + BATCH_CRC_START, len - BATCH_CRC_START));
}

static void test_memlog_lookup_time_in_a_compressed_batch_gives_its_base_offset(void **state)
{
  (void)state;
  struct mlt *t = mlt_open(NULL);
  mlt_append_one(t, 0, 2, 0);
  size_t len;
  uint8_t *p = tu_make_batch(50, 4, MLT_VALUE_SIZE, 3000, &len);
  mlt_mark_compressed(p, len);
  struct store_batch b = {p, len};
  int64_t base;
  assert_int_equal(store_append(t->s, &b, 1, 0, &base), 0);
  assert_int_equal(base, 2);
  assert_int_equal(mlt_lookup(t, 3002), 2);
  assert_int_equal(mlt_lookup(t, 3004), 6);
  assert_int_equal(store_delete_before(t->s, 4), 0);
  assert_int_equal(mlt_lookup(t, 3000), 4); /* never below start */
  free(p);
  mlt_close(t);
}

/* ---- flush and truncate ---- */

/* Entry 1 is two batches, offsets [0, 3) and [3, 5); entry 2 is one,
 * [5, 9). */
static struct mlt *mlt_open_two_entries(const struct memlog_opts *opts)
{
  struct mlt *t = mlt_open(opts);
  assert_int_equal(mlt_append(t, 1, 2, (int[]){3, 2}, NULL), 0);
  assert_int_equal(mlt_append(t, 2, 1, (int[]){4}, NULL), 0);
  return t;
}

static void test_memlog_flush_moves_durable_marks_to_the_batch_boundary_below(void **state)
{
  (void)state;
  struct mlt *t = mlt_open_two_entries(NULL);
  assert_int_equal(mlt_info(t).durable_offset, 0);
  assert_int_equal(store_flush(t->s, 2), 0);
  assert_int_equal(mlt_info(t).durable_offset, 0);
  /* Offset 3 ends a batch but not entry 1, so no index is covered yet. */
  assert_int_equal(store_flush(t->s, 4), 0);
  assert_int_equal(mlt_info(t).durable_offset, 3);
  assert_int_equal(mlt_info(t).durable_index, 0);
  assert_int_equal(store_flush(t->s, 5), 0);
  assert_int_equal(mlt_info(t).durable_offset, 5);
  assert_int_equal(mlt_info(t).durable_index, 1);
  assert_int_equal(store_flush(t->s, 1000), 0);
  assert_int_equal(mlt_info(t).durable_offset, 9);
  assert_int_equal(mlt_info(t).durable_index, 2);
  /* A smaller flush does not take durability back. */
  assert_int_equal(store_flush(t->s, 4), 0);
  assert_int_equal(mlt_info(t).durable_offset, 9);
  assert_int_equal(mlt_info(t).durable_index, 2);
  mlt_close(t);
}

static void test_memlog_truncate_removes_batches_from_a_boundary_and_rewinds_last_index(
    void **state)
{
  (void)state;
  struct mlt *t = mlt_open_two_entries(NULL);
  assert_int_equal(store_flush(t->s, 9), 0);
  assert_int_equal(store_truncate(t->s, 5), 0);
  mlt_kill_from(t, 5);
  struct store_info info = mlt_info(t);
  assert_int_equal(info.next_offset, 5);
  assert_int_equal(info.last_index, 1);
  assert_int_equal(info.durable_offset, 5);
  assert_int_equal(info.durable_index, 1);
  assert_int_equal(info.size_bytes, t->made[0].len + t->made[1].len);
  struct store_region r;
  assert_int_equal(store_read(t->s, 5, 4096, &r), 0);
  assert_int_equal(r.len, 0);
  store_region_release(&r);
  /* Index 2 was taken back, so its (new) entry applies at offset 5. */
  int64_t base;
  assert_int_equal(mlt_append(t, 2, 1, (int[]){1}, &base), 0);
  assert_int_equal(base, 5);
  assert_int_equal(store_read(t->s, 0, SIZE_MAX, &r), 0);
  assert_int_equal(mlt_check_region(t, &r), 3);
  store_region_release(&r);
  mlt_close(t);
}

static void test_memlog_truncate_at_log_end_changes_nothing(void **state)
{
  (void)state;
  struct mlt *t = mlt_open_two_entries(NULL);
  assert_int_equal(store_truncate(t->s, 9), 0);
  assert_int_equal(mlt_info(t).next_offset, 9);
  assert_int_equal(mlt_info(t).last_index, 2);
  mlt_close(t);
}

static void test_memlog_truncate_inside_a_batch_is_einval_and_outside_the_log_eoffset(
    void **state)
{
  (void)state;
  struct mlt *t = mlt_open_two_entries(NULL);
  assert_int_equal(store_truncate(t->s, 4), CAIRN_EINVAL);
  assert_int_equal(store_truncate(t->s, 10), CAIRN_EOFFSET);
  assert_int_equal(store_truncate(t->s, -1), CAIRN_EOFFSET);
  assert_int_equal(store_delete_before(t->s, 3), 0);
  assert_int_equal(store_truncate(t->s, 0), CAIRN_EOFFSET);
  assert_int_equal(mlt_info(t).next_offset, 9);
  mlt_close(t);
}

static void test_memlog_truncate_to_start_empties_the_store(void **state)
{
  (void)state;
  struct mlt *t = mlt_open_two_entries(NULL);
  assert_int_equal(store_flush(t->s, 9), 0);
  assert_int_equal(store_truncate(t->s, 0), 0);
  struct store_info info = mlt_info(t);
  assert_int_equal(info.next_offset, 0);
  assert_int_equal(info.last_index, 0);
  assert_int_equal(info.durable_offset, 0);
  assert_int_equal(info.durable_index, 0);
  assert_int_equal(info.size_bytes, 0);
  mlt_close(t);
}

static void test_memlog_truncate_to_start_keeps_the_index_of_deleted_entries(void **state)
{
  (void)state;
  struct mlt *t = mlt_open_two_entries(NULL);
  assert_int_equal(store_delete_before(t->s, 5), 0);
  assert_int_equal(store_truncate(t->s, 5), 0);
  /* Entry 1 is deleted, not undone: it must not be applied again. */
  assert_int_equal(mlt_info(t).last_index, 1);
  assert_int_equal(mlt_append(t, 1, 1, (int[]){1}, NULL), CAIRN_EEXIST);
  mlt_close(t);
}

/* store_reset: empty past the end, the entries up to the index given
 * counted as held; below the end refused. */
static void test_memlog_reset_keeps_the_index_it_is_given(void **state)
{
  (void)state;
  struct mlt *t = mlt_open_two_entries(NULL);
  assert_int_equal(store_reset(t->s, 9, 40), CAIRN_EINVAL);
  assert_int_equal(store_reset(t->s, 20, 40), 0);
  struct store_info info = mlt_info(t);
  assert_int_equal(info.start_offset, 20);
  assert_int_equal(info.next_offset, 20);
  assert_int_equal(info.last_index, 40);
  assert_int_equal(mlt_append(t, 40, 1, (int[]){1}, NULL), CAIRN_EEXIST);
  mlt_kill_below(t, 20);
  mlt_append_one(t, 41, 2, 20);
  mlt_close(t);
}

/* ---- deleting from the front ---- */

static void test_memlog_delete_before_drops_whole_batches_and_may_start_mid_batch(void **state)
{
  (void)state;
  struct mlt *t = mlt_open_two_entries(NULL);
  assert_int_equal(store_delete_before(t->s, 4), 0);
  mlt_kill_below(t, 4);
  struct store_info info = mlt_info(t);
  assert_int_equal(info.start_offset, 4);
  assert_int_equal(info.next_offset, 9);
  assert_int_equal(info.size_bytes, t->made[1].len + t->made[2].len);
  assert_int_equal(info.durable_offset, 3); /* nothing below 3 is held */
  /* Reading at start hands out the whole batch holding it. */
  struct store_region r;
  assert_int_equal(store_read(t->s, 4, 1, &r), 0);
  assert_int_equal(mlt_check_region(t, &r), 1);
  assert_int_equal(r.first_offset, 3);
  assert_int_equal(r.next_offset, 5);
  store_region_release(&r);
  /* Moving start back is a no-op. */
  assert_int_equal(store_delete_before(t->s, 1), 0);
  assert_int_equal(mlt_info(t).start_offset, 4);
  mlt_close(t);
}

static void test_memlog_delete_before_log_end_leaves_it_empty_at_the_end(void **state)
{
  (void)state;
  struct mlt *t = mlt_open_two_entries(NULL);
  assert_int_equal(store_delete_before(t->s, 9), 0);
  struct store_info info = mlt_info(t);
  assert_int_equal(info.start_offset, 9);
  assert_int_equal(info.next_offset, 9);
  assert_int_equal(info.size_bytes, 0);
  assert_int_equal(info.last_index, 2);
  mlt_append_one(t, 3, 2, 9);
  mlt_close(t);
}

static void test_memlog_delete_before_beyond_the_end_restarts_there_keeping_last_index(
    void **state)
{
  (void)state;
  struct mlt *t = mlt_open_two_entries(NULL);
  assert_int_equal(store_delete_before(t->s, 100), 0);
  mlt_kill_below(t, 100);
  struct store_info info = mlt_info(t);
  assert_int_equal(info.start_offset, 100);
  assert_int_equal(info.next_offset, 100);
  assert_int_equal(info.size_bytes, 0);
  assert_int_equal(info.last_index, 2);
  assert_int_equal(info.durable_offset, 100);
  assert_int_equal(info.durable_index, 2);
  struct store_region r;
  assert_int_equal(store_read(t->s, 9, 4096, &r), CAIRN_EOFFSET);
  assert_int_equal(store_read(t->s, 100, 4096, &r), 0);
  assert_int_equal(r.len, 0);
  assert_int_equal(mlt_append(t, 2, 1, (int[]){1}, NULL), CAIRN_EEXIST);
  mlt_append_one(t, 3, 4, 100);
  assert_int_equal(store_read(t->s, 100, 4096, &r), 0);
  assert_int_equal(mlt_check_region(t, &r), 1);
  assert_int_equal(r.next_offset, 104);
  store_region_release(&r);
  assert_int_equal(mlt_lookup(t, 0), 100);
  mlt_close(t);
}

/* ---- retention ---- */

static void test_memlog_retention_by_bytes_drops_oldest_batches_but_never_the_newest(
    void **state)
{
  (void)state;
  size_t one;
  free(tu_make_batch(1, 2, MLT_VALUE_SIZE, 0, &one)); /* every batch here is this size */
  struct memlog_opts opts = {.retention_bytes = 2 * one + one / 2};
  struct mlt *t = mlt_open(&opts);
  for (int i = 0; i < 5; i++) {
    mlt_append_one(t, (uint64_t)i + 1, 2, 2 * i);
  }
  assert_int_equal(t->made[0].len, one);
  uint32_t deleted = 99;
  assert_int_equal(store_retention_point(t->s, 0), 6); /* changes nothing */
  assert_int_equal(mlt_info(t).start_offset, 0);
  /* The caller's bound: batch [4, 6) holds offset 5, so it stays. */
  assert_int_equal(store_retention(t->s, 0, 5, &deleted), 0);
  assert_int_equal(deleted, 2);
  assert_int_equal(mlt_info(t).start_offset, 4);
  assert_int_equal(store_retention(t->s, 0, INT64_MAX, &deleted), 0);
  assert_int_equal(deleted, 1);
  struct store_info info = mlt_info(t);
  assert_int_equal(info.start_offset, 6);
  assert_int_equal(info.size_bytes, 2 * one);
  assert_int_equal(info.durable_offset, 6);
  assert_int_equal(info.durable_index, 3);
  assert_int_equal(store_retention(t->s, 0, INT64_MAX, &deleted), 0);
  assert_int_equal(deleted, 0);
  mlt_close(t);

  opts.retention_bytes = 1;
  t = mlt_open(&opts);
  mlt_append_one(t, 0, 2, 0);
  mlt_append_one(t, 0, 2, 2);
  assert_int_equal(store_retention(t->s, 0, INT64_MAX, &deleted), 0);
  assert_int_equal(deleted, 1);
  assert_int_equal(mlt_info(t).start_offset, 2);
  assert_int_equal(mlt_info(t).size_bytes, one);
  mlt_close(t);
}

static void test_memlog_retention_by_age_drops_old_batches_but_never_the_newest(void **state)
{
  (void)state;
  struct memlog_opts opts = {.retention_ms = 1500};
  struct mlt *t = mlt_open(&opts);
  /* Newest records at 1001, 2001, 3001. */
  assert_int_equal(mlt_append_ts(t, 0, 1, (int[]){2}, 1000, NULL), 0);
  assert_int_equal(mlt_append_ts(t, 0, 1, (int[]){2}, 2000, NULL), 0);
  assert_int_equal(mlt_append_ts(t, 0, 1, (int[]){2}, 3000, NULL), 0);
  uint32_t deleted = 99;
  assert_int_equal(store_retention(t->s, 2501, INT64_MAX, &deleted), 0);
  assert_int_equal(deleted, 0); /* 1001 is not older than 2501 - 1500 */
  assert_int_equal(store_retention(t->s, 3600, INT64_MAX, &deleted), 0);
  assert_int_equal(deleted, 2);
  assert_int_equal(mlt_info(t).start_offset, 4);
  assert_int_equal(store_retention(t->s, 1000000, INT64_MAX, &deleted), 0);
  assert_int_equal(deleted, 0);
  assert_int_equal(mlt_info(t).start_offset, 4);
  assert_int_equal(mlt_info(t).next_offset, 6);
  mlt_close(t);
}

static void test_memlog_retention_without_limits_deletes_nothing(void **state)
{
  (void)state;
  struct mlt *t = mlt_open_two_entries(NULL);
  uint32_t deleted = 99;
  assert_int_equal(store_retention(t->s, INT64_MAX, INT64_MAX, &deleted), 0);
  assert_int_equal(deleted, 0);
  assert_int_equal(store_retention(t->s, INT64_MIN, INT64_MAX, &deleted), 0);
  assert_int_equal(deleted, 0);
  assert_int_equal(mlt_info(t).start_offset, 0);
  mlt_close(t);
}

/* ---- regions ---- */

static void test_memlog_region_stays_valid_after_truncate_delete_and_close(void **state)
{
  (void)state;
  struct mlt *t = mlt_open_two_entries(NULL);
  struct store_region r;
  assert_int_equal(store_read(t->s, 0, SIZE_MAX, &r), 0);
  assert_int_equal(store_truncate(t->s, 5), 0);
  assert_int_equal(store_delete_before(t->s, 100), 0);
  /* Check against the batches as they were appended. */
  for (size_t i = 0; i < t->n_made; i++) {
    t->made[i].live = true;
  }
  store_close(t->s);
  t->s = NULL;
  assert_int_equal(mlt_check_region(t, &r), 3);
  store_region_release(&r);
  assert_null(r.mem);
  store_region_release(&r); /* twice is safe */
  free(t);
}

/* ---- randomized ---- */

/* Random appends, truncates, deletes and flushes, each followed by reads at
 * every offset with random limits, checked against the batches appended. */
static void test_memlog_random_operations_keep_reads_whole_and_contiguous(void **state)
{
  (void)state;
  uint64_t rng = tu_seed(__func__);
  struct mlt *t = mlt_open(NULL);
  uint64_t index = 0;
  for (int step = 0; step < 300 && t->n_made + MLT_MAX_ENTRY <= MLT_MAX_MADE; step++) {
    struct store_info info = mlt_info(t);
    uint64_t op = tu_rand(&rng) % 10;
    if (op < 6) {
      int rec[MLT_MAX_ENTRY];
      size_t nb = 1 + tu_rand(&rng) % 3;
      for (size_t i = 0; i < nb; i++) {
        rec[i] = 1 + (int)(tu_rand(&rng) % 5);
      }
      int64_t base;
      assert_int_equal(mlt_append(t, ++index, nb, rec, &base), 0);
      assert_int_equal(base, info.next_offset);
    } else if (op == 6) {
      int64_t off = info.start_offset + (int64_t)(tu_rand(&rng) % 8);
      int rv = store_truncate(t->s, off);
      const struct mlt_batch *m = mlt_find(t, off);
      bool boundary = off == info.next_offset ||
                      (m != NULL && off >= info.start_offset && mlt_entry_starts_at(t, off));
      assert_int_equal(rv, off > info.next_offset ? CAIRN_EOFFSET
                           : boundary             ? 0
                                                  : CAIRN_EINVAL);
      if (rv == 0) {
        mlt_kill_from(t, off);
        index = mlt_info(t).last_index;
      }
    } else if (op == 7) {
      int64_t off = info.start_offset + (int64_t)(tu_rand(&rng) % 6);
      assert_int_equal(store_delete_before(t->s, off), 0);
      mlt_kill_below(t, off);
    } else {
      assert_int_equal(store_flush(t->s, info.start_offset + (int64_t)(tu_rand(&rng) % 20)), 0);
    }
    info = mlt_info(t);
    assert_true(info.start_offset <= info.next_offset);
    assert_true(info.durable_offset <= info.next_offset);
    assert_true(info.durable_index <= info.last_index);
    for (int64_t off = info.start_offset; off <= info.next_offset; off++) {
      struct store_region r;
      size_t max = (size_t)(tu_rand(&rng) % 600);
      assert_int_equal(store_read(t->s, off, max, &r), 0);
      size_t count = mlt_check_region(t, &r);
      assert_true(r.first_offset <= off && (off < r.next_offset || r.len == 0));
      assert_true(count <= 1 || r.len <= max);
      store_region_release(&r);
    }
  }
  mlt_close(t);
}

int main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_memlog_starts_empty_at_offset_zero_with_one_segment),
      cmocka_unit_test(test_memlog_append_assigns_gap_free_offsets),
      cmocka_unit_test(test_memlog_append_stamps_base_source_and_entry_end_on_last_batch),
      cmocka_unit_test(test_memlog_append_never_writes_the_callers_batches),
      cmocka_unit_test(test_memlog_read_returns_whole_batches_up_to_max_bytes),
      cmocka_unit_test(
          test_memlog_read_returns_the_batch_holding_the_offset_whole_even_past_max_bytes),
      cmocka_unit_test(test_memlog_read_at_log_end_is_empty),
      cmocka_unit_test(test_memlog_read_outside_start_and_next_fails_with_eoffset),
      cmocka_unit_test(test_memlog_rejects_a_corrupt_batch_with_ebadcrc_and_appends_nothing),
      cmocka_unit_test(test_memlog_rejects_a_batch_over_max_batch_bytes_with_etoolarge),
      cmocka_unit_test(test_memlog_rejects_an_empty_append_with_einval),
      cmocka_unit_test(test_memlog_replay_of_an_applied_source_index_returns_eexist),
      cmocka_unit_test(test_memlog_lookup_time_finds_the_first_record_at_or_after_the_time),
      cmocka_unit_test(test_memlog_lookup_time_goes_by_offset_when_timestamps_go_back),
      cmocka_unit_test(test_memlog_lookup_time_skips_records_below_start),
      cmocka_unit_test(test_memlog_lookup_time_in_a_compressed_batch_gives_its_base_offset),
      cmocka_unit_test(test_memlog_flush_moves_durable_marks_to_the_batch_boundary_below),
      cmocka_unit_test(test_memlog_truncate_removes_batches_from_a_boundary_and_rewinds_last_index),
      cmocka_unit_test(test_memlog_truncate_at_log_end_changes_nothing),
      cmocka_unit_test(test_memlog_truncate_inside_a_batch_is_einval_and_outside_the_log_eoffset),
      cmocka_unit_test(test_memlog_truncate_to_start_empties_the_store),
      cmocka_unit_test(test_memlog_truncate_to_start_keeps_the_index_of_deleted_entries),
      cmocka_unit_test(test_memlog_delete_before_drops_whole_batches_and_may_start_mid_batch),
      cmocka_unit_test(test_memlog_delete_before_log_end_leaves_it_empty_at_the_end),
      cmocka_unit_test(test_memlog_delete_before_beyond_the_end_restarts_there_keeping_last_index),
      cmocka_unit_test(test_memlog_retention_by_bytes_drops_oldest_batches_but_never_the_newest),
      cmocka_unit_test(test_memlog_retention_by_age_drops_old_batches_but_never_the_newest),
      cmocka_unit_test(test_memlog_reset_keeps_the_index_it_is_given),
      cmocka_unit_test(test_memlog_retention_without_limits_deletes_nothing),
      cmocka_unit_test(test_memlog_region_stays_valid_after_truncate_delete_and_close),
      cmocka_unit_test(test_memlog_random_operations_keep_reads_whole_and_contiguous),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
