/* test_index.c - sparse offset and time indexes: lookups, persistence,
 * truncation, and rejection of malformed files. */
#include "common/err.h"
#include "storage/index.h"
#include "testutil.h"

#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>

#include <cmocka.h>

static char *dir;
static char path[PATH_MAX];

static int setup(void **state)
{
  dir = tu_tmpdir("index");
  snprintf(path, sizeof path, "%s/00000000000000000100.index", dir);
  return 0;
}

static int teardown(void **state)
{
  tu_tmpdir_free(dir);
  return 0;
}

static void fill(struct index *ix, int n)
{
  for (int i = 0; i < n; i++) {
    assert_int_equal(index_add(ix, i * 10, (uint32_t)i * 1000), 0);
  }
}

static void test_index_floor_finds_last_entry_at_or_below(void **state)
{
  struct index ix;
  assert_int_equal(index_open(&ix, INDEX_OFFSET, path, 100), 0);
  struct index_entry e;
  assert_false(index_floor(&ix, 5, &e));
  fill(&ix, 100);
  assert_true(index_floor(&ix, 0, &e));
  assert_int_equal(e.key, 0);
  assert_true(index_floor(&ix, 55, &e));
  assert_int_equal(e.key, 50);
  assert_int_equal(e.val, 5000);
  assert_true(index_floor(&ix, 990, &e));
  assert_int_equal(e.key, 990);
  assert_true(index_floor(&ix, 100000, &e));
  assert_int_equal(e.key, 990);
  assert_true(index_floor_val(&ix, 5999, &e));
  assert_int_equal(e.val, 5000);
  assert_false(index_floor(&ix, -1, &e));
  index_close(&ix);
}

static void test_index_rejects_entries_out_of_order(void **state)
{
  struct index ix;
  assert_int_equal(index_open(&ix, INDEX_OFFSET, path, 100), 0);
  assert_int_equal(index_add(&ix, 10, 100), 0);
  assert_int_equal(index_add(&ix, 10, 200), CAIRN_EINVAL);
  assert_int_equal(index_add(&ix, 20, 100), CAIRN_EINVAL);
  assert_int_equal(index_add(&ix, 5, 300), CAIRN_EINVAL);
  index_close(&ix);
}

static void test_index_persists_and_reloads(void **state)
{
  for (int kind = INDEX_OFFSET; kind <= INDEX_TIME; kind++) {
    struct index ix;
    assert_int_equal(index_open(&ix, (enum index_kind)kind, path, 100), 0);
    fill(&ix, 50);
    assert_int_equal(index_persist(&ix, true), 0);
    fill(&ix, 0);
    assert_int_equal(index_add(&ix, 10000, 900000), 0); /* not persisted */
    index_close(&ix);
    assert_int_equal(index_open(&ix, (enum index_kind)kind, path, 100), 0);
    assert_int_equal(ix.count, 50);
    struct index_entry e;
    assert_true(index_last(&ix, &e));
    assert_int_equal(e.key, 490);
    assert_int_equal(e.val, 49000);
    index_close(&ix);
    tu_truncate(dir, "00000000000000000100.index", 0);
  }
}

static void test_index_truncate_val_drops_entries_in_file_too(void **state)
{
  struct index ix;
  assert_int_equal(index_open(&ix, INDEX_OFFSET, path, 100), 0);
  fill(&ix, 50);
  assert_int_equal(index_persist(&ix, false), 0);
  assert_int_equal(index_truncate_val(&ix, 20000), 0);
  assert_int_equal(ix.count, 20);
  index_close(&ix);
  assert_int_equal(index_open(&ix, INDEX_OFFSET, path, 100), 0);
  assert_int_equal(ix.count, 20);
  index_close(&ix);
}

/* index_reset_file skips the ftruncate for a file known to hold at most a
 * header: every path that empties or rewrites the file must still leave
 * exactly what it owes on disk, whatever the file held before. */
static void test_index_clear_and_rewrite_leave_the_file_exact(void **state)
{
  struct index ix;
  /* Entries written, then cleared: the file must shrink to a header. */
  assert_int_equal(index_open(&ix, INDEX_OFFSET, path, 100), 0);
  fill(&ix, 30);
  assert_int_equal(index_persist(&ix, true), 0);
  assert_true(tu_file_size(dir, "00000000000000000100.index") > INDEX_HEADER_SIZE);
  assert_int_equal(index_clear(&ix), 0);
  assert_int_equal(tu_file_size(dir, "00000000000000000100.index"), INDEX_HEADER_SIZE);
  /* Cleared twice (a rebuild right after open): still one header. */
  assert_int_equal(index_clear(&ix), 0);
  fill(&ix, 3);
  assert_int_equal(index_persist(&ix, true), 0);
  index_close(&ix);
  assert_int_equal(index_open(&ix, INDEX_OFFSET, path, 100), 0);
  assert_int_equal(ix.count, 3);
  size_t esz = (size_t)tu_file_size(dir, "00000000000000000100.index") - INDEX_HEADER_SIZE;
  assert_int_equal(esz % 3, 0);
  esz /= 3;
  /* Loaded from a file with entries, then rewritten whole (after a
   * syncfs, index_trust_disk on a cleared index): the old entries go. */
  assert_int_equal(index_clear(&ix), 0);
  index_trust_disk(&ix);
  assert_int_equal(index_add(&ix, 5, 7), 0);
  assert_int_equal(index_persist(&ix, true), 0);
  index_close(&ix);
  assert_int_equal(tu_file_size(dir, "00000000000000000100.index"), INDEX_HEADER_SIZE + esz);
  assert_int_equal(index_open(&ix, INDEX_OFFSET, path, 100), 0);
  assert_int_equal(ix.count, 1);
  /* Loaded with an entry, cut back to its header by index_truncate_val
   * (the size tracked through that ftruncate), then cleared: one header. */
  fill(&ix, 0);
  assert_int_equal(index_truncate_val(&ix, 0), 0);
  assert_int_equal(index_clear(&ix), 0);
  index_close(&ix);
  assert_int_equal(tu_file_size(dir, "00000000000000000100.index"), INDEX_HEADER_SIZE);
  /* An empty file (created, never written): opened and cleared, it holds
   * one valid header. */
  tu_truncate(dir, "00000000000000000100.index", 0);
  assert_int_equal(index_open(&ix, INDEX_TIME, path, 100), 0);
  assert_int_equal(index_clear(&ix), 0);
  index_close(&ix);
  assert_int_equal(tu_file_size(dir, "00000000000000000100.index"), INDEX_HEADER_SIZE);
  assert_int_equal(index_open(&ix, INDEX_TIME, path, 100), 0);
  assert_int_equal(ix.count, 0);
  index_close(&ix);
}

static void expect_corrupt_then_empty(void)
{
  struct index ix;
  assert_int_equal(index_open(&ix, INDEX_OFFSET, path, 100), CAIRN_ECORRUPT);
  assert_int_equal(ix.count, 0);
  assert_int_equal(index_add(&ix, 0, 0), 0); /* usable for a rebuild */
  index_close(&ix);
  assert_int_equal(tu_file_size(dir, "00000000000000000100.index"), INDEX_HEADER_SIZE);
}

static void write_index(int n)
{
  struct index ix;
  assert_int_equal(index_open(&ix, INDEX_OFFSET, path, 100), 0);
  fill(&ix, n);
  assert_int_equal(index_persist(&ix, false), 0);
  index_close(&ix);
}

static void test_index_with_torn_entry_is_corrupt(void **state)
{
  write_index(10);
  tu_truncate(dir, "00000000000000000100.index", INDEX_HEADER_SIZE + 8 * 10 - 3);
  expect_corrupt_then_empty();
}

static void test_index_with_garbage_header_is_corrupt(void **state)
{
  write_index(10);
  tu_write_at(dir, "00000000000000000100.index", 2, "zz", 2);
  expect_corrupt_then_empty();
}

static void test_index_of_another_segment_is_corrupt(void **state)
{
  struct index ix;
  assert_int_equal(index_open(&ix, INDEX_OFFSET, path, 999), 0); /* wrong base */
  fill(&ix, 3);
  assert_int_equal(index_persist(&ix, false), 0);
  index_close(&ix);
  expect_corrupt_then_empty();
}

static void test_index_with_entries_out_of_order_is_corrupt(void **state)
{
  write_index(10);
  uint8_t zero[8] = {0};
  tu_write_at(dir, "00000000000000000100.index", INDEX_HEADER_SIZE + 8 * 5, zero, 8);
  expect_corrupt_then_empty();
}

/* The file is open only while a sync is owed or pinned (index.h,
 * "Descriptor"); closing it loses nothing: the next write reopens it and
 * a reload finds every entry. */
static void test_index_file_closes_when_synced_and_reopens_to_write(void **state)
{
  struct index ix;
  assert_int_equal(index_open(&ix, INDEX_OFFSET, path, 100), 0);
  assert_int_equal(ix.fd, -1); /* fresh file, header written, nothing owed */
  fill(&ix, 10);
  assert_int_equal(index_persist(&ix, false), 0);
  assert_true(ix.fd >= 0); /* written, not synced: stays open */
  assert_false(index_idle(&ix));
  assert_int_equal(index_persist(&ix, true), 0);
  assert_int_equal(ix.fd, -1); /* synced: closed */
  /* A sync on another thread pins the descriptor: open until unpinned,
   * even once what it held is synced. */
  for (int i = 10; i < 20; i++) {
    assert_int_equal(index_add(&ix, i * 10, (uint32_t)i * 1000), 0);
  }
  assert_int_equal(index_persist(&ix, false), 0);
  int fd = -1;
  assert_int_equal(index_pin(&ix, &fd), 0);
  assert_int_equal(fd, ix.fd);
  index_note_synced(&ix, ix.persisted);
  assert_false(index_idle(&ix));
  index_unpin(&ix);
  assert_int_equal(ix.fd, -1);
  /* Truncation reopens the file to cut it. */
  assert_int_equal(index_truncate_val(&ix, 15000), 0);
  assert_int_equal(ix.count, 15);
  assert_int_equal(index_persist(&ix, true), 0);
  assert_int_equal(ix.fd, -1);
  index_close(&ix);
  assert_int_equal(index_open(&ix, INDEX_OFFSET, path, 100), 0);
  assert_int_equal(ix.count, 15);
  struct index_entry e;
  assert_true(index_last(&ix, &e));
  assert_int_equal(e.key, 140);
  assert_int_equal(e.val, 14000);
  assert_true(ix.fd >= 0); /* loaded entries owe one sync (the crash may have left them unsynced) */
  assert_int_equal(index_persist(&ix, true), 0);
  assert_int_equal(ix.fd, -1);
  index_close(&ix);
}

int main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_index_floor_finds_last_entry_at_or_below, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_index_rejects_entries_out_of_order, setup, teardown),
      cmocka_unit_test_setup_teardown(test_index_persists_and_reloads, setup, teardown),
      cmocka_unit_test_setup_teardown(test_index_truncate_val_drops_entries_in_file_too, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_index_clear_and_rewrite_leave_the_file_exact, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_index_with_torn_entry_is_corrupt, setup, teardown),
      cmocka_unit_test_setup_teardown(test_index_with_garbage_header_is_corrupt, setup, teardown),
      cmocka_unit_test_setup_teardown(test_index_of_another_segment_is_corrupt, setup, teardown),
      cmocka_unit_test_setup_teardown(test_index_with_entries_out_of_order_is_corrupt, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_index_file_closes_when_synced_and_reopens_to_write,
                                      setup, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
