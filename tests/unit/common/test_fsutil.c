/* test_fsutil.c - fs_raise_nofile lifts the soft open-file limit to the
 * hard one and reports it. */
#include "common/fsutil.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <sys/resource.h>

#include <cmocka.h>

static void test_fs_raise_nofile_lifts_soft_limit_to_hard(void **state)
{
  (void)state;
  struct rlimit rl;
  assert_int_equal(getrlimit(RLIMIT_NOFILE, &rl), 0);
  rlim_t hard = rl.rlim_max;
  if (hard > 64) {
    rl.rlim_cur = 64; /* like a default soft limit below the hard one */
    assert_int_equal(setrlimit(RLIMIT_NOFILE, &rl), 0);
  }
  uint64_t now = 0;
  assert_int_equal(fs_raise_nofile(&now), 0);
  assert_int_equal(getrlimit(RLIMIT_NOFILE, &rl), 0);
  assert_int_equal(rl.rlim_cur, hard);
  assert_int_equal(rl.rlim_max, hard);
  assert_int_equal(now, hard);
  /* Already raised: nothing to do, same answer. */
  assert_int_equal(fs_raise_nofile(NULL), 0);
  assert_int_equal(getrlimit(RLIMIT_NOFILE, &rl), 0);
  assert_int_equal(rl.rlim_cur, hard);
}

int main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_fs_raise_nofile_lifts_soft_limit_to_hard),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
