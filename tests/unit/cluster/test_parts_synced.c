/* test_parts_synced.c - the replica directories found at start
 * (cluster/parts_synced.h): only directories of root's own file system are
 * listed (not files, not symlinks), each is handed out once, a path's last
 * component is what counts, and an unreadable root leaves the set empty. */
#include "cluster/parts_synced.h"
#include "testutil.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

static void mkdir_in(const char *root, const char *name)
{
  char path[512];
  snprintf(path, sizeof path, "%s/%s", root, name);
  assert_int_equal(mkdir(path, 0755), 0);
}

static void test_psync_lists_directories_and_hands_each_out_once(void **state)
{
  (void)state;
  char *root = tu_tmpdir("psync");
  mkdir_in(root, "orders-0.1");
  mkdir_in(root, "orders-1.1");
  mkdir_in(root, "audit-3.2");
  char path[512], target[512];
  snprintf(path, sizeof path, "%s/stray-file", root);
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  fclose(f);
  snprintf(target, sizeof target, "%s/orders-0.1", root);
  snprintf(path, sizeof path, "%s/linked-0.9", root);
  assert_int_equal(symlink(target, path), 0);

  struct psync ps = {0};
  assert_int_equal(psync_begin(&ps, root), 0);
  assert_int_equal(ps.n, 3);
  assert_int_equal(psync_left(&ps), 3);
  snprintf(path, sizeof path, "%s/orders-1.1", root);
  assert_true(psync_take(&ps, path));
  assert_false(psync_take(&ps, path)); /* a reopen finds this process's writes */
  assert_true(psync_take(&ps, "audit-3.2"));
  assert_false(psync_take(&ps, "stray-file"));
  assert_false(psync_take(&ps, "linked-0.9"));
  assert_false(psync_take(&ps, "orders-2.1")); /* created after the start */
  assert_int_equal(psync_left(&ps), 1);
  psync_free(&ps);
  assert_false(psync_take(&ps, "orders-0.1"));
  tu_tmpdir_free(root);
}

static void test_psync_of_a_missing_root_is_empty(void **state)
{
  (void)state;
  struct psync ps = {0};
  assert_true(psync_begin(&ps, "/nonexistent/cairn/partitions") < 0);
  assert_int_equal(ps.n, 0);
  assert_false(psync_take(&ps, "orders-0.1"));
  psync_free(&ps);
}

int main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_psync_lists_directories_and_hands_each_out_once),
      cmocka_unit_test(test_psync_of_a_missing_root_is_empty),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
