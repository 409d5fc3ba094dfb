/* test_wal_format.c - the node-wide log's byte layout (docs/format.md):
 * a fixed sequence of calls must write exactly tests/golden/wal_v2.bin,
 * whose first bytes are also spelled out here, and that file must replay
 * to the expected groups. tests/golden/wal_v1.bin, written by the same
 * calls before format version 2 (seeded checksums, END records), must
 * still replay, and a log opened on it goes on in a version 2 segment.
 * CAIRN_GOLDEN_WRITE=1 regenerates wal_v2.bin (only for a deliberate
 * format change, with a new WAL_FORMAT_VERSION). */
#include "cluster/wal.h"
#include "common/err.h"
#include "common/fsutil.h"
#include "format/crc32c.h"
#include "testutil.h"

#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#define GOLDEN_NAME "wal_v2.bin"
#define GOLDEN_V1_NAME "wal_v1.bin"
#define SEG_NAME "wal-0000000000000001.log"

static void on_closed(void *data)
{
  *(bool *)data = true;
}

static void on_done(struct wal_req *req, int status)
{
  (void)req;
  assert_int_equal(status, 0);
}

static void close_wal(uv_loop_t *loop, struct wal *w)
{
  bool closed = false;
  wal_close(w, on_closed, &closed);
  while (!closed) {
    uv_run(loop, UV_RUN_ONCE);
  }
}

/* The fixed calls; returns the segment's bytes. */
static uint8_t *golden_build(size_t *len)
{
  uv_loop_t loop;
  assert_int_equal(uv_loop_init(&loop), 0);
  char *dir = tu_tmpdir("walgold");
  struct wal *w;
  char errmsg[WAL_ERRMSG_SIZE];
  assert_int_equal(wal_open(&loop, dir, NULL, &w, errmsg), 0);
  struct wal_req req;
  struct wal_entry e[2] = {{2, 1, "abc", 3}, {2, 2, NULL, 0}};
  assert_int_equal(wal_set_meta(w, NULL, 7, 2, 3, NULL), 0);
  assert_int_equal(wal_append(w, NULL, 7, 1, e, 2, NULL), 0);
  assert_int_equal(wal_truncate(w, NULL, 7, 2, NULL), 0);
  assert_int_equal(wal_append(w, NULL, 9, 5, e, 1, NULL), 0);
  assert_int_equal(wal_remove(w, NULL, 9, NULL), 0);
  assert_int_equal(wal_snapshot(w, &req, 7, 1, 2, 1, on_done), 0);
  uv_run(&loop, UV_RUN_DEFAULT);
  close_wal(&loop, w);
  uint8_t *buf;
  assert_int_equal(fs_read_file(dir, SEG_NAME, 1 << 20, &buf, len), 0);
  tu_tmpdir_free(dir);
  assert_int_equal(uv_loop_close(&loop), 0);
  return buf;
}

static void golden_path(char *buf, size_t n)
{
  const char *dir = getenv("CAIRN_GOLDEN_DIR");
  snprintf(buf, n, "%s", dir != NULL && dir[0] != '\0' ? dir : "tests/golden");
}

static uint8_t *golden_read_name(const char *name, size_t *len)
{
  char dir[PATH_MAX];
  golden_path(dir, sizeof dir);
  uint8_t *buf = NULL;
  int rv = fs_read_file(dir, name, 1 << 20, &buf, len);
  if (rv != 0) {
    fail_msg("cannot read %s/%s: %s (set CAIRN_GOLDEN_DIR; CAIRN_GOLDEN_WRITE=1 regenerates)", dir,
             name, cairn_strerror(rv));
  }
  return buf;
}

static uint8_t *golden_read(size_t *len)
{
  return golden_read_name(GOLDEN_NAME, len);
}

static int golden_setup(void **state)
{
  (void)state;
  const char *wr = getenv("CAIRN_GOLDEN_WRITE");
  if (wr == NULL || strcmp(wr, "1") != 0) {
    return 0;
  }
  size_t len;
  uint8_t *p = golden_build(&len);
  char dir[PATH_MAX];
  golden_path(dir, sizeof dir);
  int rv = fs_replace_file(dir, GOLDEN_NAME, p, len);
  free(p);
  fprintf(stderr, "%s %s/%s\n", rv == 0 ? "wrote" : "FAILED to write", dir, GOLDEN_NAME);
  return rv == 0 ? 0 : -1;
}

static void test_wal_writes_the_golden_bytes(void **state)
{
  (void)state;
  size_t len, glen;
  uint8_t *p = golden_build(&len);
  uint8_t *g = golden_read(&glen);
  assert_int_equal(len, glen);
  assert_memory_equal(p, g, len);
  /* The segment header and the first record's header, by hand. */
  static const uint8_t head[] = {
      'C', 'A', 'I', 'R', 'N', 'W', 'A', 'L', /* magic */
      1,   0,   0,   0,   0,   0,   0,   0,   /* sequence 1 */
      2,   0,   0,   0,                       /* format version 2 */
  };
  assert_memory_equal(g, head, sizeof head);
  static const uint8_t rec1[] = {
      40, 0, 0, 0,             /* len: the META payload */
      3,  0, 0, 0,             /* type META, etype, reserved */
      24, 0, 0, 0,             /* job_back: its job began with the segment header */
      7,  0, 0, 0, 0, 0, 0, 0, /* group 7 */
  };
  assert_memory_equal(g + 24 + 4, rec1, sizeof rec1);
  /* Its checksum is seeded with the CRC-32C of the sequence (8 bytes). */
  static const uint8_t seq1[8] = {1, 0, 0, 0, 0, 0, 0, 0};
  uint32_t crc = crc32c_extend(crc32c(seq1, sizeof seq1), g + 24 + 4, 36 + 40);
  uint32_t stored =
      (uint32_t)g[24] | (uint32_t)g[25] << 8 | (uint32_t)g[26] << 16 | (uint32_t)g[27] << 24;
  assert_int_equal(stored, crc);
  assert_int_not_equal(stored, crc32c(g + 24 + 4, 36 + 40));
  free(p);
  free(g);
}

/* Opens a log on dir holding one golden segment and checks group 7 (and
 * that group 9 is gone). */
static void golden_check_groups(struct wal *w)
{
  struct wal_group_info info;
  assert_int_equal(wal_group_info(w, 9, &info), CAIRN_ENOTFOUND);
  assert_int_equal(wal_group_info(w, 7, &info), 0);
  assert_int_equal(info.term, 2);
  assert_int_equal(info.vote, 3);
  assert_int_equal(info.snap_index, 1);
  assert_int_equal(info.snap_term, 2);
  assert_int_equal(info.first, 1);
  assert_int_equal(info.next, 2);
  struct wal_entry e;
  assert_int_equal(wal_read(w, 7, 1, &e), 0);
  assert_int_equal(e.term, 2);
  assert_int_equal(e.type, 1);
  assert_int_equal(e.len, 3);
  assert_memory_equal(e.buf, "abc", 3);
  free((void *)e.buf);
  assert_int_equal(wal_read(w, 7, 2, &e), CAIRN_EOFFSET);
}

static char *golden_dir(const char *golden)
{
  size_t glen;
  uint8_t *g = golden_read_name(golden, &glen);
  char *dir = tu_tmpdir("walgold");
  assert_int_equal(fs_replace_file(dir, SEG_NAME, g, glen), 0);
  free(g);
  return dir;
}

static void test_wal_golden_file_replays_to_the_expected_groups(void **state)
{
  (void)state;
  char *dir = golden_dir(GOLDEN_NAME);
  uv_loop_t loop;
  assert_int_equal(uv_loop_init(&loop), 0);
  struct wal *w;
  char errmsg[WAL_ERRMSG_SIZE];
  assert_int_equal(wal_open(&loop, dir, NULL, &w, errmsg), 0);
  golden_check_groups(w);
  close_wal(&loop, w);
  assert_int_equal(uv_loop_close(&loop), 0);
  tu_tmpdir_free(dir);
}

/* A version 1 log (before seeded checksums and END records) replays, and
 * what is appended to it goes to a new version 2 segment; both replay. */
static void test_wal_v1_file_replays_and_goes_on_in_v2(void **state)
{
  (void)state;
  char *dir = golden_dir(GOLDEN_V1_NAME);
  uv_loop_t loop;
  assert_int_equal(uv_loop_init(&loop), 0);
  struct wal *w;
  char errmsg[WAL_ERRMSG_SIZE];
  assert_int_equal(wal_open(&loop, dir, NULL, &w, errmsg), 0);
  golden_check_groups(w);
  struct wal_entry e = {3, 1, "defg", 4};
  struct wal_req req;
  assert_int_equal(wal_append(w, &req, 7, 2, &e, 1, on_done), 0);
  uv_run(&loop, UV_RUN_DEFAULT);
  close_wal(&loop, w);
  uint8_t *seg2;
  size_t len2;
  assert_int_equal(fs_read_file(dir, "wal-0000000000000002.log", 1 << 20, &seg2, &len2), 0);
  assert_true(len2 >= 24);
  assert_int_equal(seg2[16], 2); /* format version 2 */
  free(seg2);
  assert_int_equal(wal_open(&loop, dir, NULL, &w, errmsg), 0);
  struct wal_group_info info;
  assert_int_equal(wal_group_info(w, 7, &info), 0);
  assert_int_equal(info.next, 3);
  struct wal_entry got;
  assert_int_equal(wal_read(w, 7, 2, &got), 0);
  assert_int_equal(got.len, 4);
  assert_memory_equal(got.buf, "defg", 4);
  free((void *)got.buf);
  close_wal(&loop, w);
  assert_int_equal(uv_loop_close(&loop), 0);
  tu_tmpdir_free(dir);
}

int main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_wal_writes_the_golden_bytes),
      cmocka_unit_test(test_wal_golden_file_replays_to_the_expected_groups),
      cmocka_unit_test(test_wal_v1_file_replays_and_goes_on_in_v2),
  };
  return cmocka_run_group_tests(tests, golden_setup, NULL);
}
