/* test_metaheal.c - the refused metadata replica's side (metaheal.h): its
 * frames encode and parse (another module's frames and malformed ones are
 * told apart), a meta dir with the mark starts REFUSED, only the OUT of
 * this process's refusal moves its state aside (mark last) and makes it
 * JOINING, and JOINING becomes DONE only once synced. */
#include "cluster/metaheal.h"
#include "cluster/waldamage.h"
#include "common/err.h"
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

static void test_metaheal_frames_round_trip(void **state)
{
  (void)state;
  uint8_t f[MHEAL_FRAME];
  enum mheal_type types[] = {MHEAL_REFUSED_FRAME, MHEAL_OUT_FRAME, MHEAL_REJOINED_FRAME};
  for (size_t i = 0; i < 3; i++) {
    mheal_encode(f, types[i], 0x0123456789abcdefULL + i);
    enum mheal_type t = 0;
    uint64_t id = 0;
    assert_int_equal(mheal_decode(f, sizeof f, &t, &id), 0);
    assert_int_equal(t, types[i]);
    assert_true(id == 0x0123456789abcdefULL + i);
  }
  /* Golden bytes: tag, type, version 1 LE, 4 zero bytes, id LE. */
  mheal_encode(f, MHEAL_OUT_FRAME, 0x0807060504030201ULL);
  const uint8_t golden[MHEAL_FRAME] = {0x81, 2, 1, 0, 0, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8};
  assert_memory_equal(f, golden, sizeof golden);
}

static void test_metaheal_decode_tells_other_and_malformed_frames(void **state)
{
  (void)state;
  enum mheal_type t;
  uint64_t id;
  uint8_t hb[8] = {1, 1, 0, 0, 1, 0, 0, 0}; /* hbeat's version byte */
  assert_int_equal(mheal_decode(hb, sizeof hb, &t, &id), CAIRN_EINVAL);
  assert_int_equal(mheal_decode(hb, 0, &t, &id), CAIRN_EINVAL);
  uint8_t f[MHEAL_FRAME];
  mheal_encode(f, MHEAL_REFUSED_FRAME, 7);
  assert_int_equal(mheal_decode(f, sizeof f - 1, &t, &id), CAIRN_ECORRUPT);
  f[1] = 9; /* unknown type */
  assert_int_equal(mheal_decode(f, sizeof f, &t, &id), CAIRN_ECORRUPT);
  mheal_encode(f, MHEAL_REFUSED_FRAME, 7);
  f[2] = 2; /* another version */
  assert_int_equal(mheal_decode(f, sizeof f, &t, &id), CAIRN_ECORRUPT);
}

static bool exists(const char *dir, const char *name)
{
  char path[PATH_MAX];
  struct stat sb;
  assert_true(snprintf(path, sizeof path, "%s/%s", dir, name) < (int)sizeof path);
  return stat(path, &sb) == 0;
}

static void test_metaheal_intact_dir_is_off(void **state)
{
  (void)state;
  char *d = tu_tmpdir("metaheal");
  struct mheal mh;
  assert_int_equal(mheal_begin(&mh, d, 5, 1000), MHEAL_OFF);
  assert_false(mh.rebuilt_before);
  assert_int_equal(mheal_rebuild(&mh, 5, 2000), 0); /* not refused: nothing */
  assert_int_equal(mh.state, MHEAL_OFF);
  tu_tmpdir_free(d);
}

static void test_metaheal_only_its_own_out_rebuilds(void **state)
{
  (void)state;
  char *d = tu_tmpdir("metaheal");
  char sub[PATH_MAX], moved[PATH_MAX], err[256];
  snprintf(sub, sizeof sub, "%s/wal", d);
  assert_int_equal(fs_mkdir_p(sub), 0);
  snprintf(sub, sizeof sub, "%s/wal-snapshots", d);
  assert_int_equal(fs_mkdir_p(sub), 0);
  assert_int_equal(fs_replace_file(d, "wal-snapshots/snap-1-1", "s", 1), 0);
  assert_int_equal(
      waldamage_set_aside_log(d, "record at byte 8", moved, sizeof moved, err, sizeof err), 0);
  struct mheal mh;
  assert_int_equal(mheal_begin(&mh, d, 42, 1000), MHEAL_REFUSED);
  assert_non_null(strstr(mh.reason, "record at byte 8"));
  /* Another process's refusal: ignored, the mark stays. */
  assert_int_equal(mheal_rebuild(&mh, 41, 1500), 0);
  assert_int_equal(mh.state, MHEAL_REFUSED);
  assert_true(waldamage_marked(d, NULL, 0));
  assert_int_equal(mheal_rebuild(&mh, 42, 2000), 1);
  assert_int_equal(mh.state, MHEAL_JOINING);
  assert_true(mh.rebuilt_before);
  assert_false(waldamage_marked(d, NULL, 0));
  assert_false(exists(d, "wal-snapshots"));
  assert_true(waldamage_was_rebuilt(d));
  /* Restarted now: not refused, but never bootstraps. */
  struct mheal again;
  assert_int_equal(mheal_begin(&again, d, 43, 3000), MHEAL_OFF);
  assert_true(again.rebuilt_before);
  tu_tmpdir_free(d);
}

int main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_metaheal_frames_round_trip),
      cmocka_unit_test(test_metaheal_decode_tells_other_and_malformed_frames),
      cmocka_unit_test(test_metaheal_intact_dir_is_off),
      cmocka_unit_test(test_metaheal_only_its_own_out_rebuilds),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
