/* test_plog.c - the partition log's normal operation: offsets, reads
 * across segment rolls, time lookups, reopen, flush and the checkpoint,
 * truncation, retention and the fatal state after a failed write. */
#include "common/err.h"
#include "common/fault.h"
#include "format/batch.h"
#include "storage/checkpoint.h"
#include "storage/plog.h"
#include "testutil.h"

#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

static int64_t test_now;
static int64_t test_clock(void) { return test_now; }

struct fixture {
  char *dir;
  struct store *s;
  struct plog_opts opts;
};

static int setup(void **state)
{
  struct fixture *f = calloc(1, sizeof *f);
  f->dir = tu_tmpdir("plog");
  plog_opts_default(&f->opts);
  f->opts.segment_bytes = 64 * 1024;
  f->opts.index_interval = 1024;
  f->opts.now_ms = test_clock;
  test_now = 1700000000000;
  char err[256];
  assert_int_equal(plog_open(f->dir, &f->opts, &f->s, err, sizeof err), 0);
  *state = f;
  return 0;
}

static int teardown(void **state)
{
  struct fixture *f = *state;
  if (f->s != NULL) {
    store_close(f->s);
  }
  fault_reset();
  tu_tmpdir_free(f->dir);
  free(f);
  return 0;
}

static void reopen(struct fixture *f)
{
  store_close(f->s);
  char err[256];
  assert_int_equal(plog_open(f->dir, &f->opts, &f->s, err, sizeof err), 0);
}

/* Appends batch `tag` of n records as its own entry; returns base offset. */
static int64_t append_one(struct store *s, uint64_t tag, int n, size_t vsize, int64_t ts,
                          uint64_t source_index)
{
  size_t len;
  uint8_t *b = tu_make_batch(tag, n, vsize, ts, &len);
  struct store_batch sb = {b, len};
  int64_t base = -1;
  int rv = store_append(s, &sb, 1, source_index, &base);
  free(b);
  assert_int_equal(rv, 0);
  return base;
}

/* Reads the batch holding offset and checks it is batch `tag`. */
static void expect_batch(struct store *s, int64_t offset, uint64_t tag, int n, size_t vsize)
{
  struct store_region r;
  assert_int_equal(store_read(s, offset, 1, &r), 0);
  assert_true(r.len > 0);
  assert_true(r.fd >= 0);
  uint8_t *buf = tu_read_region(r.fd, r.pos, r.len);
  assert_non_null(buf);
  struct batch_header h;
  batch_header_decode(buf, &h);
  assert_int_equal(batch_total_size(h.batch_length), r.len); /* max_bytes 1: one whole batch */
  assert_true(h.base_offset <= offset && offset <= h.base_offset + h.last_offset_delta);
  assert_int_equal(tu_check_batch(buf, r.len, tag, n, vsize), 0);
  free(buf);
  store_region_release(&r);
}

static void test_plog_assigns_gap_free_offsets(void **state)
{
  struct fixture *f = *state;
  int64_t next = 0;
  for (int i = 0; i < 50; i++) {
    int n = 1 + i % 7;
    assert_int_equal(append_one(f->s, (uint64_t)i, n, 10, test_now, 0), next);
    next += n;
  }
  struct store_info info;
  store_info(f->s, &info);
  assert_int_equal(info.start_offset, 0);
  assert_int_equal(info.next_offset, next);
}

static void test_plog_reads_every_offset_across_segment_rolls(void **state)
{
  struct fixture *f = *state;
  int64_t bases[400];
  for (int i = 0; i < 400; i++) {
    bases[i] = append_one(f->s, (uint64_t)i, 5, 100, test_now + i, 0);
  }
  struct store_info info;
  store_info(f->s, &info);
  assert_true(info.segments > 3);
  for (int i = 0; i < 400; i++) {
    for (int k = 0; k < 5; k++) {
      expect_batch(f->s, bases[i] + k, (uint64_t)i, 5, 100);
    }
  }
  reopen(f);
  for (int i = 0; i < 400; i += 7) {
    expect_batch(f->s, bases[i] + 3, (uint64_t)i, 5, 100);
  }
  store_info(f->s, &info);
  assert_int_equal(info.next_offset, 2000);
}

static void test_plog_read_returns_whole_batches_within_max_bytes(void **state)
{
  struct fixture *f = *state;
  size_t one = 0;
  for (int i = 0; i < 100; i++) {
    size_t len;
    /* Tags of three digits: every batch has the same size. */
    free(tu_make_batch((uint64_t)(100 + i), 4, 50, test_now, &len));
    one = len;
    append_one(f->s, (uint64_t)(100 + i), 4, 50, test_now, 0);
  }
  struct store_region r;
  assert_int_equal(store_read(f->s, 10, one * 5 + one / 2, &r), 0);
  assert_int_equal(r.first_offset, 8);
  assert_int_equal(r.len, one * 5);
  assert_int_equal(r.next_offset, 28);
  uint8_t *buf = tu_read_region(r.fd, r.pos, r.len);
  for (int k = 0; k < 5; k++) {
    assert_int_equal(tu_check_batch(buf + k * one, one, (uint64_t)(102 + k), 4, 50), 0);
  }
  free(buf);
  store_region_release(&r);

  /* A batch larger than max_bytes still comes whole. */
  assert_int_equal(store_read(f->s, 0, 10, &r), 0);
  assert_int_equal(r.len, one);
  store_region_release(&r);

  /* At the end: empty; past it or before the start: out of range. */
  assert_int_equal(store_read(f->s, 400, 1000, &r), 0);
  assert_int_equal(r.len, 0);
  store_region_release(&r);
  assert_int_equal(store_read(f->s, 401, 1000, &r), CAIRN_EOFFSET);
  assert_int_equal(store_read(f->s, -1, 1000, &r), CAIRN_EOFFSET);
}

static void test_plog_rejects_batch_with_wrong_crc_and_writes_nothing(void **state)
{
  struct fixture *f = *state;
  append_one(f->s, 1, 3, 10, test_now, 0);
  size_t len1, len2;
  uint8_t *good = tu_make_batch(2, 3, 10, test_now, &len1);
  uint8_t *bad = tu_make_batch(3, 3, 10, test_now, &len2);
  bad[len2 - 1] ^= 0x40;
  struct store_batch sb[2] = {{good, len1}, {bad, len2}};
  int64_t base;
  assert_int_equal(store_append(f->s, sb, 2, 0, &base), CAIRN_EBADCRC);
  assert_non_null(strstr(store_errmsg(f->s), "batch 2 of 2"));
  struct store_info info;
  store_info(f->s, &info);
  assert_int_equal(info.next_offset, 3);
  free(good);
  free(bad);
}

static void test_plog_skips_raft_entries_already_applied(void **state)
{
  struct fixture *f = *state;
  append_one(f->s, 1, 2, 10, test_now, 5);
  append_one(f->s, 2, 2, 10, test_now, 6);
  size_t len;
  uint8_t *b = tu_make_batch(3, 2, 10, test_now, &len);
  struct store_batch sb = {b, len};
  int64_t base;
  assert_int_equal(store_append(f->s, &sb, 1, 6, &base), CAIRN_EEXIST);
  assert_int_equal(store_append(f->s, &sb, 1, 3, &base), CAIRN_EEXIST);
  reopen(f);
  struct store_info info;
  store_info(f->s, &info);
  assert_int_equal(info.last_index, 6);
  assert_int_equal(store_append(f->s, &sb, 1, 6, &base), CAIRN_EEXIST);
  assert_int_equal(store_append(f->s, &sb, 1, 7, &base), 0);
  assert_int_equal(base, 4);
  free(b);
}

static void test_plog_finds_first_offset_at_or_after_timestamp(void **state)
{
  struct fixture *f = *state;
  /* batch i holds records with timestamps 1000*i .. 1000*i+9 */
  for (int i = 0; i < 300; i++) {
    append_one(f->s, (uint64_t)i, 10, 60, 1000 * i, 0);
  }
  int64_t off;
  assert_int_equal(store_lookup_time(f->s, 0, &off), 0);
  assert_int_equal(off, 0);
  assert_int_equal(store_lookup_time(f->s, 5000, &off), 0);
  assert_int_equal(off, 50);
  assert_int_equal(store_lookup_time(f->s, 5003, &off), 0);
  assert_int_equal(off, 53);
  assert_int_equal(store_lookup_time(f->s, 5010, &off), 0);
  assert_int_equal(off, 60); /* between batches: the next batch's first */
  assert_int_equal(store_lookup_time(f->s, 250005, &off), 0);
  assert_int_equal(off, 2505);
  assert_int_equal(store_lookup_time(f->s, 10000000, &off), 0);
  assert_int_equal(off, 3000); /* none: the log end */
  reopen(f);
  assert_int_equal(store_lookup_time(f->s, 123004, &off), 0);
  assert_int_equal(off, 1234);
}

static void test_plog_flush_writes_checkpoint(void **state)
{
  struct fixture *f = *state;
  append_one(f->s, 1, 10, 10, test_now, 3);
  append_one(f->s, 2, 10, 10, test_now, 4);
  struct store_info info;
  store_info(f->s, &info);
  assert_int_equal(info.durable_offset, 0);
  assert_int_equal(store_flush(f->s, 20), 0);
  store_info(f->s, &info);
  assert_int_equal(info.durable_offset, 20);
  assert_int_equal(info.durable_index, 4);
  struct checkpoint cp;
  assert_int_equal(checkpoint_read(f->dir, &cp), 0);
  assert_int_equal(cp.durable_offset, 20);
  assert_int_equal(cp.durable_index, 4);
  assert_int_equal(cp.start_offset, 0);
}

/* store_close_unflushed (a node stopping many replicas) leaves the
 * checkpoint where the last flush put it; the next open finds every batch
 * again by scanning, as after a SIGKILL, and nothing is lost. */
static void test_plog_close_unflushed_keeps_every_batch(void **state)
{
  struct fixture *f = *state;
  append_one(f->s, 1, 10, 10, test_now, 3);
  assert_int_equal(store_flush(f->s, 10), 0);
  append_one(f->s, 2, 10, 10, test_now, 4);
  append_one(f->s, 3, 5, 10, test_now, 5);
  store_close_unflushed(f->s);
  struct checkpoint cp;
  assert_int_equal(checkpoint_read(f->dir, &cp), 0);
  assert_int_equal(cp.durable_offset, 10);
  assert_int_equal(cp.durable_index, 3);
  char err[256];
  assert_int_equal(plog_open(f->dir, &f->opts, &f->s, err, sizeof err), 0);
  struct store_info info;
  store_info(f->s, &info);
  assert_int_equal(info.next_offset, 25);
  assert_int_equal(info.last_index, 5);
  expect_batch(f->s, 0, 1, 10, 10);
  expect_batch(f->s, 10, 2, 10, 10);
  expect_batch(f->s, 20, 3, 5, 10);
  /* A plain close still flushes: the checkpoint covers everything. */
  reopen(f);
  assert_int_equal(checkpoint_read(f->dir, &cp), 0);
  assert_int_equal(cp.durable_offset, 25);
  assert_int_equal(cp.durable_index, 5);
}

static void test_plog_truncate_removes_suffix_and_later_segments(void **state)
{
  struct fixture *f = *state;
  int64_t bases[300];
  for (int i = 0; i < 300; i++) {
    bases[i] = append_one(f->s, (uint64_t)i, 3, 100, test_now, (uint64_t)i + 1);
  }
  assert_int_equal(store_flush(f->s, INT64_MAX), 0);
  assert_int_equal(store_truncate(f->s, bases[100] + 1), CAIRN_EINVAL);
  assert_int_equal(store_truncate(f->s, bases[100]), 0);
  struct store_info info;
  store_info(f->s, &info);
  assert_int_equal(info.next_offset, bases[100]);
  assert_int_equal(info.last_index, 100);
  assert_true(info.durable_offset <= bases[100]);
  assert_int_equal(append_one(f->s, 999, 3, 100, test_now, 101), bases[100]);
  reopen(f);
  expect_batch(f->s, bases[100], 999, 3, 100);
  expect_batch(f->s, bases[99], 99, 3, 100);
  store_info(f->s, &info);
  assert_int_equal(info.next_offset, bases[100] + 3);
}

static void test_plog_truncate_refuses_the_middle_of_a_raft_entry(void **state)
{
  struct fixture *f = *state;
  append_one(f->s, 1, 2, 10, test_now, 1);
  size_t l1, l2;
  uint8_t *b1 = tu_make_batch(2, 2, 10, test_now, &l1);
  uint8_t *b2 = tu_make_batch(3, 2, 10, test_now, &l2);
  struct store_batch sb[2] = {{b1, l1}, {b2, l2}};
  int64_t base;
  assert_int_equal(store_append(f->s, sb, 2, 2, &base), 0); /* one entry, two batches */
  assert_int_equal(store_truncate(f->s, 4), CAIRN_EINVAL);   /* between its batches */
  assert_non_null(strstr(store_errmsg(f->s), "inside a Raft entry"));
  assert_int_equal(store_truncate(f->s, 2), 0); /* the entry's start */
  struct store_info info;
  store_info(f->s, &info);
  assert_int_equal(info.next_offset, 2);
  assert_int_equal(info.last_index, 1);
  free(b1);
  free(b2);
}

static void test_plog_retention_by_bytes_deletes_oldest_segments(void **state)
{
  struct fixture *f = *state;
  f->opts.retention_bytes = 200 * 1024;
  reopen(f);
  for (int i = 0; i < 1000; i++) {
    append_one(f->s, (uint64_t)i, 5, 100, test_now, 0);
  }
  struct store_info before, after;
  store_info(f->s, &before);
  uint32_t deleted;
  int64_t point = store_retention_point(f->s, test_now);
  assert_true(point > 2500);
  /* The caller's bound first: nothing that holds offset 2500 or above. */
  assert_int_equal(store_retention(f->s, test_now, 2500, &deleted), 0);
  store_info(f->s, &after);
  assert_true(deleted > 0);
  assert_true(after.start_offset > 0 && after.start_offset <= 2500);
  struct store_region r;
  assert_int_equal(store_read(f->s, 2500, 100, &r), 0);
  store_region_release(&r);
  uint32_t more;
  assert_int_equal(store_retention(f->s, test_now, INT64_MAX, &more), 0);
  deleted += more;
  store_info(f->s, &after);
  assert_true(more > 0);
  assert_int_equal(after.segments, before.segments - deleted);
  assert_true(after.size_bytes <= 200 * 1024 + 64 * 1024);
  assert_true(after.size_bytes >= 200 * 1024);
  assert_true(after.start_offset > 2500);
  assert_int_equal(after.start_offset, point); /* as the dry run said */
  assert_int_equal(store_retention_point(f->s, test_now), point); /* nothing more due */
  assert_int_equal(store_read(f->s, after.start_offset - 1, 100, &r), CAIRN_EOFFSET);
  expect_batch(f->s, after.start_offset, (uint64_t)(after.start_offset / 5), 5, 100);
  reopen(f);
  struct store_info again;
  store_info(f->s, &again);
  assert_int_equal(again.start_offset, after.start_offset);
}

/* 600 batches of 5 records, stamped 1 s apart from 0. */
static void append_by_the_second(struct fixture *f)
{
  for (int i = 0; i < 600; i++) {
    append_one(f->s, (uint64_t)i, 5, 100, (int64_t)i * 1000, 0);
  }
}

static void test_plog_retention_by_age_uses_record_timestamps(void **state)
{
  struct fixture *f = *state;
  f->opts.retention_ms = 60000;
  reopen(f);
  append_by_the_second(f);
  uint32_t deleted;
  assert_int_equal(store_retention(f->s, 600 * 1000, INT64_MAX, &deleted), 0);
  assert_true(deleted > 0);
  struct store_info info;
  store_info(f->s, &info);
  /* Nothing newer than a minute was removed. */
  int64_t off;
  assert_int_equal(store_lookup_time(f->s, 540 * 1000, &off), 0);
  assert_true(info.start_offset <= off);
}

static void test_plog_retention_follows_limits_set_while_open(void **state)
{
  struct fixture *f = *state;
  reopen(f); /* no limits */
  append_by_the_second(f);
  uint32_t deleted;
  assert_int_equal(store_retention(f->s, 600 * 1000, INT64_MAX, &deleted), 0);
  assert_int_equal(deleted, 0);
  /* a topic's retention.ms lowered on the running log */
  store_set_retention(f->s, 0, 60000);
  assert_int_equal(store_retention(f->s, 600 * 1000, INT64_MAX, &deleted), 0);
  assert_true(deleted > 0);
  struct store_info info;
  store_info(f->s, &info);
  int64_t off;
  assert_int_equal(store_lookup_time(f->s, 540 * 1000, &off), 0);
  assert_true(info.start_offset > 0 && info.start_offset <= off);
  /* back to no limit: nothing more goes */
  store_set_retention(f->s, 0, 0);
  assert_int_equal(store_retention(f->s, 10 * 600 * 1000, INT64_MAX, &deleted), 0);
  assert_int_equal(deleted, 0);
}

static void test_plog_rolls_segment_by_age(void **state)
{
  struct fixture *f = *state;
  f->opts.segment_ms = 1000;
  reopen(f);
  append_one(f->s, 1, 1, 10, test_now, 0);
  test_now += 500;
  append_one(f->s, 2, 1, 10, test_now, 0);
  struct store_info info;
  store_info(f->s, &info);
  assert_int_equal(info.segments, 1);
  test_now += 600;
  append_one(f->s, 3, 1, 10, test_now, 0);
  store_info(f->s, &info);
  assert_int_equal(info.segments, 2);
}

static void test_plog_delete_before_past_end_resets_log(void **state)
{
  struct fixture *f = *state;
  for (int i = 0; i < 10; i++) {
    append_one(f->s, (uint64_t)i, 2, 10, test_now, (uint64_t)i + 1);
  }
  assert_int_equal(store_delete_before(f->s, 5), 0);
  struct store_info info;
  store_info(f->s, &info);
  assert_int_equal(info.start_offset, 5);
  expect_batch(f->s, 5, 2, 2, 10);
  assert_int_equal(store_delete_before(f->s, 1000), 0);
  store_info(f->s, &info);
  assert_int_equal(info.start_offset, 1000);
  assert_int_equal(info.next_offset, 1000);
  assert_int_equal(info.last_index, 10);
  reopen(f);
  store_info(f->s, &info);
  assert_int_equal(info.start_offset, 1000);
  assert_int_equal(info.next_offset, 1000);
  assert_int_equal(info.last_index, 10);
  assert_int_equal(append_one(f->s, 11, 2, 10, test_now, 11), 1000);
}

/* store_reset: the log restarts empty past its end and counts the Raft
 * entries up to the index it is given as held, across a reopen (a
 * catch-up whose peer deleted every batch); below the end it is refused
 * without latching anything. */
static void test_plog_reset_keeps_the_index_it_is_given(void **state)
{
  struct fixture *f = *state;
  for (int i = 0; i < 4; i++) {
    append_one(f->s, (uint64_t)i, 2, 10, test_now, (uint64_t)i + 1);
  }
  assert_int_equal(store_reset(f->s, 8, 7), CAIRN_EINVAL);
  assert_int_equal(store_reset(f->s, 500, 90), 0);
  struct store_info info;
  store_info(f->s, &info);
  assert_false(info.fatal);
  assert_int_equal(info.start_offset, 500);
  assert_int_equal(info.next_offset, 500);
  assert_int_equal(info.last_index, 90);
  reopen(f);
  store_info(f->s, &info);
  assert_int_equal(info.start_offset, 500);
  assert_int_equal(info.next_offset, 500);
  assert_int_equal(info.last_index, 90);
  assert_int_equal(store_reset(f->s, 600, 3), 0); /* the index never goes back */
  store_info(f->s, &info);
  assert_int_equal(info.last_index, 90);
  assert_int_equal(append_one(f->s, 11, 2, 10, test_now, 91), 600);
}

static void test_plog_failed_write_latches_fatal_state(void **state)
{
  struct fixture *f = *state;
  append_one(f->s, 1, 2, 10, test_now, 1);
  assert_int_equal(store_flush(f->s, INT64_MAX), 0);
  fault_arm(FAULT_SEGMENT_WRITE, 0, -ENOSPC);
  size_t len;
  uint8_t *b = tu_make_batch(2, 2, 10, test_now, &len);
  struct store_batch sb = {b, len};
  int64_t base;
  assert_int_equal(store_append(f->s, &sb, 1, 2, &base), -ENOSPC);
  assert_non_null(strstr(store_errmsg(f->s), "No space left on device"));
  assert_int_equal(store_append(f->s, &sb, 1, 2, &base), CAIRN_EFATAL);
  assert_int_equal(store_flush(f->s, INT64_MAX), CAIRN_EFATAL);
  struct store_info info;
  store_info(f->s, &info);
  assert_true(info.fatal);
  /* What was acknowledged before stays readable, and a reopen cuts the
   * half-written batch. */
  expect_batch(f->s, 0, 1, 2, 10);
  reopen(f);
  store_info(f->s, &info);
  assert_false(info.fatal);
  assert_int_equal(info.next_offset, 2);
  assert_int_equal(store_append(f->s, &sb, 1, 2, &base), 0);
  assert_int_equal(base, 2);
  free(b);
}

static void test_plog_failed_fsync_latches_fatal_state(void **state)
{
  struct fixture *f = *state;
  append_one(f->s, 1, 2, 10, test_now, 1);
  fault_arm(FAULT_SEGMENT_SYNC, 0, -EIO);
  assert_int_equal(store_flush(f->s, INT64_MAX), -EIO);
  assert_int_equal(store_flush(f->s, INT64_MAX), CAIRN_EFATAL);
  size_t len;
  uint8_t *b = tu_make_batch(2, 2, 10, test_now, &len);
  struct store_batch sb = {b, len};
  int64_t base;
  assert_int_equal(store_append(f->s, &sb, 1, 2, &base), CAIRN_EFATAL);
  free(b);
}

static void test_plog_region_outlives_deleted_segment(void **state)
{
  struct fixture *f = *state;
  for (int i = 0; i < 400; i++) {
    append_one(f->s, (uint64_t)i, 5, 100, test_now, 0);
  }
  struct store_region r;
  assert_int_equal(store_read(f->s, 0, 4096, &r), 0);
  assert_int_equal(store_delete_before(f->s, 1500), 0);
  uint8_t *buf = tu_read_region(r.fd, r.pos, r.len);
  assert_non_null(buf);
  struct batch_header h;
  batch_header_decode(buf, &h);
  assert_int_equal(tu_check_batch(buf, batch_total_size(h.batch_length), 0, 5, 100), 0);
  free(buf);
  store_region_release(&r);
}

int main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_plog_assigns_gap_free_offsets, setup, teardown),
      cmocka_unit_test_setup_teardown(test_plog_reads_every_offset_across_segment_rolls, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_plog_read_returns_whole_batches_within_max_bytes, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_plog_rejects_batch_with_wrong_crc_and_writes_nothing,
                                      setup, teardown),
      cmocka_unit_test_setup_teardown(test_plog_skips_raft_entries_already_applied, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_plog_finds_first_offset_at_or_after_timestamp, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_plog_flush_writes_checkpoint, setup, teardown),
      cmocka_unit_test_setup_teardown(test_plog_close_unflushed_keeps_every_batch, setup, teardown),
      cmocka_unit_test_setup_teardown(test_plog_truncate_removes_suffix_and_later_segments, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_plog_truncate_refuses_the_middle_of_a_raft_entry, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_plog_retention_by_bytes_deletes_oldest_segments, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_plog_retention_by_age_uses_record_timestamps, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_plog_retention_follows_limits_set_while_open, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_plog_rolls_segment_by_age, setup, teardown),
      cmocka_unit_test_setup_teardown(test_plog_delete_before_past_end_resets_log, setup, teardown),
      cmocka_unit_test_setup_teardown(test_plog_reset_keeps_the_index_it_is_given, setup, teardown),
      cmocka_unit_test_setup_teardown(test_plog_failed_write_latches_fatal_state, setup, teardown),
      cmocka_unit_test_setup_teardown(test_plog_failed_fsync_latches_fatal_state, setup, teardown),
      cmocka_unit_test_setup_teardown(test_plog_region_outlives_deleted_segment, setup, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
