/* test_waldamage.c - setting a damaged node-wide Raft log aside: every
 * replica directory is marked (and only those) before the log moves, a
 * mark already there is kept, a failed mark leaves the log in place, a
 * rebuild moves the replica's Raft state and then the mark aside, and
 * only the newest WALDAMAGE_KEEP logs set aside are kept; the metadata
 * group's log is set aside after marking its own directory, and a discard
 * leaves a raft.damaged-* that says the replica was rebuilt. */
#include "cluster/waldamage.h"
#include "common/fsutil.h"
#include "testutil.h"

#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <cmocka.h>

/* Makes dir/sub and its missing parents. */
static void mkdirf(const char *dir, const char *sub)
{
  char path[PATH_MAX];
  assert_true(snprintf(path, sizeof path, "%s/%s", dir, sub) < (int)sizeof path);
  assert_int_equal(fs_mkdir_p(path), 0);
}

static bool exists(const char *dir, const char *name)
{
  char path[PATH_MAX];
  struct stat sb;
  assert_true(snprintf(path, sizeof path, "%s/%s", dir, name) < (int)sizeof path);
  return stat(path, &sb) == 0;
}

/* A data dir with a wal, two replica dirs, and a stray entry that is no
 * replica's. */
static char *data_dir(void)
{
  char *d = tu_tmpdir("waldamage");
  mkdirf(d, "wal");
  assert_int_equal(fs_replace_file(d, "wal/wal-0000000000000001.log", "x", 1), 0);
  mkdirf(d, "partitions/t-0.1/log");
  mkdirf(d, "partitions/t-1.1/wal-snapshots");
  mkdirf(d, "partitions/not-a-replica");
  return d;
}

static void test_waldamage_marks_every_replica_then_moves_the_log(void **state)
{
  (void)state;
  char *d = data_dir();
  char moved[PATH_MAX], err[256], why[512], r0[PATH_MAX], r1[PATH_MAX], stray[PATH_MAX];
  unsigned marked = 99;
  assert_int_equal(waldamage_set_aside(d, "wal-1.log: record at byte 64: checksum", moved,
                                       sizeof moved, &marked, err, sizeof err),
                   0);
  assert_int_equal(marked, 2);
  assert_false(exists(d, "wal"));
  assert_true(strstr(moved, "/" WALDAMAGE_PREFIX) != NULL);
  assert_true(exists(moved, "wal-0000000000000001.log"));
  snprintf(r0, sizeof r0, "%s/partitions/t-0.1", d);
  snprintf(r1, sizeof r1, "%s/partitions/t-1.1", d);
  snprintf(stray, sizeof stray, "%s/partitions/not-a-replica", d);
  assert_true(waldamage_marked(r0, why, sizeof why));
  assert_non_null(strstr(why, "record at byte 64"));
  assert_non_null(strstr(why, moved)); /* says where the log went */
  assert_true(waldamage_marked(r1, NULL, 0));
  assert_false(waldamage_marked(stray, NULL, 0));
  tu_tmpdir_free(d);
}

static void test_waldamage_keeps_an_earlier_mark(void **state)
{
  (void)state;
  char *d = data_dir();
  char r0[PATH_MAX], moved[PATH_MAX], err[256], why[512];
  snprintf(r0, sizeof r0, "%s/partitions/t-0.1", d);
  assert_int_equal(fs_replace_file(r0, WALDAMAGE_MARK, "first damage\n", 13), 0);
  unsigned marked = 0;
  assert_int_equal(waldamage_set_aside(d, "second", moved, sizeof moved, &marked, err, sizeof err),
                   0);
  assert_int_equal(marked, 2);
  assert_true(waldamage_marked(r0, why, sizeof why));
  assert_string_equal(why, "first damage");
  tu_tmpdir_free(d);
}

/* A mark that cannot be written stops before the log moves: the next
 * start finds the same damage and tries again. */
static void test_waldamage_failed_mark_leaves_the_log(void **state)
{
  (void)state;
  char *d = data_dir();
  mkdirf(d, "partitions/t-1.1/" WALDAMAGE_MARK ".tmp/x");
  char moved[PATH_MAX], err[256];
  unsigned marked = 0;
  assert_true(waldamage_set_aside(d, "damage", moved, sizeof moved, &marked, err, sizeof err) < 0);
  assert_non_null(strstr(err, "t-1.1/" WALDAMAGE_MARK));
  assert_true(exists(d, "wal/wal-0000000000000001.log"));
  assert_false(fs_dir_has_prefix(d, WALDAMAGE_PREFIX));
  tu_tmpdir_free(d);
}

/* No replica ever opened: the log still moves, nothing is marked. */
static void test_waldamage_without_replicas(void **state)
{
  (void)state;
  char *d = tu_tmpdir("waldamage");
  mkdirf(d, "wal");
  char moved[PATH_MAX], err[256];
  unsigned marked = 7;
  assert_int_equal(waldamage_set_aside(d, "damage", moved, sizeof moved, &marked, err, sizeof err),
                   0);
  assert_int_equal(marked, 0);
  assert_false(exists(d, "wal"));
  tu_tmpdir_free(d);
}

static void test_waldamage_move_state_moves_the_mark_last(void **state)
{
  (void)state;
  char *d = data_dir();
  char moved[PATH_MAX], err[256], r1[PATH_MAX / 2], aside[PATH_MAX];
  unsigned marked = 0;
  assert_int_equal(waldamage_set_aside(d, "damage", moved, sizeof moved, &marked, err, sizeof err),
                   0);
  snprintf(r1, sizeof r1, "%s/partitions/t-1.1", d);
  assert_int_equal(fs_replace_file(r1, "wal-snapshots/snap-1-1", "s", 1), 0);
  snprintf(aside, sizeof aside, "%s/raft.damaged-1", r1);
  assert_int_equal(fs_mkdir_p(aside), 0);
  assert_int_equal(waldamage_move_state(r1, aside), 0);
  assert_false(waldamage_marked(r1, NULL, 0));
  assert_false(exists(r1, "wal-snapshots"));
  assert_true(exists(aside, WALDAMAGE_MARK));
  assert_true(exists(aside, "wal-snapshots/snap-1-1"));
  /* Nothing left to move: still fine (a repeated rebuild). */
  snprintf(aside, sizeof aside, "%s/raft.damaged-2", r1);
  assert_int_equal(fs_mkdir_p(aside), 0);
  assert_int_equal(waldamage_move_state(r1, aside), 0);
  tu_tmpdir_free(d);
}

static void test_waldamage_prune_keeps_the_newest(void **state)
{
  (void)state;
  char *d = tu_tmpdir("waldamage");
  const char *names[] = {"wal.damaged-100", "wal.damaged-100-1", "wal.damaged-99",
                         "wal.damaged-200", "wal.damaged-150",   "other"};
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
    mkdirf(d, names[i]);
  }
  waldamage_prune(d, WALDAMAGE_PREFIX, WALDAMAGE_KEEP);
  assert_false(exists(d, "wal.damaged-99"));
  assert_false(exists(d, "wal.damaged-100"));
  assert_true(exists(d, "wal.damaged-100-1"));
  assert_true(exists(d, "wal.damaged-150"));
  assert_true(exists(d, "wal.damaged-200"));
  assert_true(exists(d, "other"));
  tu_tmpdir_free(d);
}

/* The metadata group's log: the meta dir itself is marked (an earlier mark
 * kept), then its wal moves; a discard then moves the snapshots and last
 * the mark into raft.damaged-*, which says "never bootstrap" from then on. */
static void test_waldamage_meta_log_set_aside_then_discarded(void **state)
{
  (void)state;
  char *d = tu_tmpdir("waldamage");
  mkdirf(d, "wal");
  mkdirf(d, "wal-snapshots");
  assert_int_equal(fs_replace_file(d, "wal/wal-0000000000000001.log", "x", 1), 0);
  assert_int_equal(fs_replace_file(d, "wal-snapshots/snap-1-9", "s", 1), 0);
  char moved[PATH_MAX], err[256], why[512], aside[PATH_MAX];
  assert_int_equal(waldamage_set_aside_log(d, "wal-1.log: record at byte 488: checksum", moved,
                                           sizeof moved, err, sizeof err),
                   0);
  assert_false(exists(d, "wal"));
  assert_true(exists(moved, "wal-0000000000000001.log"));
  assert_true(waldamage_marked(d, why, sizeof why));
  assert_non_null(strstr(why, "record at byte 488"));
  assert_non_null(strstr(why, moved));
  assert_false(waldamage_was_rebuilt(d));
  /* A second damage (a crash, the new log damaged too) keeps the first mark. */
  mkdirf(d, "wal");
  assert_int_equal(waldamage_set_aside_log(d, "second", moved, sizeof moved, err, sizeof err), 0);
  assert_true(waldamage_marked(d, why, sizeof why));
  assert_non_null(strstr(why, "record at byte 488"));
  assert_int_equal(waldamage_discard(d, aside, sizeof aside), 0);
  assert_false(waldamage_marked(d, NULL, 0));
  assert_true(waldamage_was_rebuilt(d));
  assert_true(strstr(aside, "/" WALDAMAGE_DISCARDED_PREFIX) != NULL);
  assert_true(exists(aside, WALDAMAGE_MARK));
  assert_true(exists(aside, "wal-snapshots/snap-1-9"));
  assert_false(exists(d, "wal-snapshots"));
  tu_tmpdir_free(d);
}

/* A mark that cannot be written leaves the metadata log in place. */
static void test_waldamage_meta_failed_mark_leaves_the_log(void **state)
{
  (void)state;
  char *d = tu_tmpdir("waldamage");
  mkdirf(d, "wal");
  mkdirf(d, WALDAMAGE_MARK ".tmp/x");
  char moved[PATH_MAX], err[256];
  assert_true(waldamage_set_aside_log(d, "damage", moved, sizeof moved, err, sizeof err) < 0);
  assert_non_null(strstr(err, WALDAMAGE_MARK));
  assert_true(exists(d, "wal"));
  assert_false(fs_dir_has_prefix(d, WALDAMAGE_PREFIX));
  tu_tmpdir_free(d);
}

int main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_waldamage_marks_every_replica_then_moves_the_log),
      cmocka_unit_test(test_waldamage_keeps_an_earlier_mark),
      cmocka_unit_test(test_waldamage_failed_mark_leaves_the_log),
      cmocka_unit_test(test_waldamage_without_replicas),
      cmocka_unit_test(test_waldamage_move_state_moves_the_mark_last),
      cmocka_unit_test(test_waldamage_prune_keeps_the_newest),
      cmocka_unit_test(test_waldamage_meta_log_set_aside_then_discarded),
      cmocka_unit_test(test_waldamage_meta_failed_mark_leaves_the_log),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
