/* test_wal_format.c - the node-wide log's byte layout (docs/format.md):
 * a fixed sequence of calls must write exactly tests/golden/wal_v2.bin,
 * whose first bytes are also spelled out here, and that file must replay
 * to the expected groups. tests/golden/wal_v1.bin, written by the same
 * calls before format version 2 (seeded checksums, END records), must
 * still replay, and a log opened on it goes on in a version 2 segment.
 * CAIRN_GOLDEN_WRITE=1 regenerates wal_v2.bin (only for a deliberate
 * format change, with a new WAL_FORMAT_VERSION). */
#include "cluster/wal.h"
#include "cluster/wal_internal.h"
#include "common/err.h"
#include "common/fsutil.h"
#include "format/crc32c.h"
#include "format/endian.h"
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

/* A version 1 log (before seeded checksums and END records), its file
 * ending with tail (a torn write's bytes, or nothing), replays; what is
 * appended to it goes to a new version 2 segment; both replay, again and
 * again (the version 1 segment, no longer the newest, is then read to its
 * end: a torn tail left in it would be damage). */
static void v1_goes_on_in_v2(const uint8_t *tail, size_t tail_len)
{
  size_t glen;
  uint8_t *g = golden_read_name(GOLDEN_V1_NAME, &glen);
  uint8_t *file = malloc(glen + tail_len);
  assert_non_null(file);
  memcpy(file, g, glen);
  if (tail_len > 0) {
    memcpy(file + glen, tail, tail_len);
  }
  char *dir = tu_tmpdir("walgold");
  assert_int_equal(fs_replace_file(dir, SEG_NAME, file, glen + tail_len), 0);
  free(file);
  free(g);
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
  for (int round = 0; round < 2; round++) {
    int rv = wal_open(&loop, dir, NULL, &w, errmsg);
    if (rv != 0) {
      fail_msg("reopen %d: %s", round + 1, errmsg);
    }
    struct wal_group_info info;
    assert_int_equal(wal_group_info(w, 7, &info), 0);
    assert_int_equal(info.next, 3);
    struct wal_entry got;
    assert_int_equal(wal_read(w, 7, 2, &got), 0);
    assert_int_equal(got.len, 4);
    assert_memory_equal(got.buf, "defg", 4);
    free((void *)got.buf);
    close_wal(&loop, w);
  }
  assert_int_equal(uv_loop_close(&loop), 0);
  tu_tmpdir_free(dir);
}

static void test_wal_v1_file_replays_and_goes_on_in_v2(void **state)
{
  (void)state;
  v1_goes_on_in_v2(NULL, 0);
}

/* The same after a SIGKILL tore the version 1 log's last write: the torn
 * bytes are cut off the file (found by tests/fuzz/fuzz_wal.c: they stayed
 * and the second open refused the log as damaged). */
static void test_wal_v1_torn_tail_is_cut_before_going_on_in_v2(void **state)
{
  (void)state;
  uint8_t torn[40 + 20];
  memset(torn, 0, sizeof torn);
  torn[0] = 0x5a; /* a checksum that does not match */
  torn[4] = 20;   /* len: the payload is there, the checksum is not its own */
  torn[8] = 1;    /* an ENTRY */
  torn[16] = 7;   /* of group 7 */
  torn[24] = 2;   /* at index 2 */
  memset(torn + 40, 0xab, 20);
  v1_goes_on_in_v2(torn, sizeof torn);
  v1_goes_on_in_v2(torn, 17); /* torn inside the record header */
}

/* Writes segment 1 (version 2) holding MOVE records of group 5 at the
 * given indexes, each with its checksum, into a new directory. */
static char *moves_dir(const uint64_t *index, size_t n)
{
  size_t len = WAL_SEG_HEADER + n * (WAL_REC_HEADER + 1);
  uint8_t *p = calloc(1, len);
  assert_non_null(p);
  wal_seg_header_put(p, 1);
  uint32_t seed = wal_seg_seed(WAL_FORMAT_VERSION, 1);
  for (size_t i = 0; i < n; i++) {
    uint8_t *r = p + WAL_SEG_HEADER + i * (WAL_REC_HEADER + 1);
    le_put32(r + 4, 1);
    r[8] = WAL_REC_MOVE;
    r[9] = 1;
    le_put64(r + 16, 5);
    le_put64(r + 24, index[i]);
    le_put64(r + 32, 1);
    r[WAL_REC_HEADER] = (uint8_t)index[i];
    le_put32(r, crc32c_extend(seed, r + 4, WAL_REC_HEADER - 4 + 1));
  }
  char *dir = tu_tmpdir("walholes");
  assert_int_equal(fs_replace_file(dir, SEG_NAME, p, len), 0);
  free(p);
  return dir;
}

/* Moved entries may arrive out of order and leave holes that later ones
 * fill; one record may leave at most WAL_MAX_HOLES, refused as damage
 * beyond that before replay allocates the slots between. */
static void test_wal_replay_holes_are_bounded_per_record(void **state)
{
  (void)state;
  uv_loop_t loop;
  assert_int_equal(uv_loop_init(&loop), 0);
  struct wal *w;
  char errmsg[WAL_ERRMSG_SIZE];
  const uint64_t fills[] = {1, 3, 2};
  char *dir = moves_dir(fills, 3);
  assert_int_equal(wal_open(&loop, dir, NULL, &w, errmsg), 0);
  struct wal_group_info info;
  assert_int_equal(wal_group_info(w, 5, &info), 0);
  assert_int_equal(info.first, 1);
  assert_int_equal(info.next, 4);
  close_wal(&loop, w);
  tu_tmpdir_free(dir);

  const uint64_t apart[] = {1, 2 + WAL_MAX_HOLES + 1};
  dir = moves_dir(apart, 2);
  assert_int_equal(wal_open(&loop, dir, NULL, &w, errmsg), CAIRN_ECORRUPT);
  assert_non_null(strstr(errmsg, "too far"));
  tu_tmpdir_free(dir);
  assert_int_equal(uv_loop_close(&loop), 0);
}

/* A crash between a spare's rename to its new segment's name and the
 * write of its header (wal_job_adopt renames first) leaves a newest
 * segment with its previous life's header and records: replay removes it
 * as a torn new segment and the log goes on. The previous life here is a
 * version 1 segment (checksum seed 0) whose last record claims a later
 * job: looked through with seed 0 it would pass as a record written after
 * the damage was synced, and the log would be refused. */
static void test_wal_adopted_spare_cut_before_its_header(void **state)
{
  (void)state;
  uv_loop_t loop;
  assert_int_equal(uv_loop_init(&loop), 0);
  char *dir = tu_tmpdir("walspare");
  struct wal_opts opts = {.segment_bytes = 4096};
  struct wal *w;
  char errmsg[WAL_ERRMSG_SIZE];
  assert_int_equal(wal_open(&loop, dir, &opts, &w, errmsg), 0);
  char payload[1000];
  memset(payload, 'x', sizeof payload);
  /* Appends until one lands in a new segment (the one before it then ends
   * with its END record): the crash comes right after that segment's
   * rename, so its entry never was written. */
  struct wal_stats st;
  uint64_t lost = 0;
  for (uint64_t i = 1; lost == 0; i++) {
    struct wal_entry e = {1, 1, payload, sizeof payload};
    struct wal_req req;
    assert_int_equal(wal_append(w, &req, 3, i, &e, 1, on_done), 0);
    uv_run(&loop, UV_RUN_DEFAULT);
    wal_get_stats(w, &st);
    lost = st.last_seq >= 3 ? i : 0;
  }
  close_wal(&loop, w);

  size_t glen;
  uint8_t *old = golden_read_name(GOLDEN_V1_NAME, &glen);
  /* The golden log's last record gets job_back 0 (its job would start
   * at the record itself, after byte 0) and its seed-0 checksum again. */
  size_t last = 0;
  for (size_t off = 24; off + 40 <= glen;) {
    last = off;
    off += 40 + le_get32(old + off + 4);
  }
  le_put32(old + last + 12, 0);
  le_put32(old + last, crc32c_extend(0, old + last + 4, 36 + le_get32(old + last + 4)));
  char name[64];
  snprintf(name, sizeof name, "wal-%016llx.log", (unsigned long long)st.last_seq);
  assert_int_equal(fs_replace_file(dir, name, old, glen), 0);
  free(old);

  for (int round = 0; round < 2; round++) {
    int rv = wal_open(&loop, dir, &opts, &w, errmsg);
    if (rv != 0) {
      fail_msg("open %d: %s", round + 1, errmsg);
    }
    struct wal_group_info info;
    assert_int_equal(wal_group_info(w, 3, &info), 0);
    assert_int_equal(info.next, lost + (uint64_t)round);
    for (uint64_t i = 1; i < info.next; i++) {
      struct wal_entry got;
      assert_int_equal(wal_read(w, 3, i, &got), 0);
      free((void *)got.buf);
    }
    struct wal_entry e = {1, 1, payload, sizeof payload};
    struct wal_req req;
    assert_int_equal(wal_append(w, &req, 3, info.next, &e, 1, on_done), 0);
    uv_run(&loop, UV_RUN_DEFAULT);
    close_wal(&loop, w);
  }
  assert_int_equal(uv_loop_close(&loop), 0);
  tu_tmpdir_free(dir);
}

/* The write calls refuse an index replay would take as damage (at or
 * above WAL_MAX_INDEX): found by tests/fuzz/fuzz_wal.c, an append at 2^62
 * was acknowledged and then cut at the next open as a torn tail. */
static void test_wal_refuses_indexes_replay_would_refuse(void **state)
{
  (void)state;
  uv_loop_t loop;
  assert_int_equal(uv_loop_init(&loop), 0);
  char *dir = tu_tmpdir("walmax");
  struct wal *w;
  char errmsg[WAL_ERRMSG_SIZE];
  assert_int_equal(wal_open(&loop, dir, NULL, &w, errmsg), 0);
  struct wal_entry e = {1, 1, "x", 1};
  struct wal_req req;
  assert_int_equal(wal_append(w, &req, 1, WAL_MAX_INDEX - 1, &e, 1, on_done), CAIRN_EINVAL);
  assert_int_equal(wal_append(w, &req, 1, WAL_MAX_INDEX - 2, &e, 1, on_done), 0);
  uv_run(&loop, UV_RUN_DEFAULT);
  assert_int_equal(wal_truncate(w, NULL, 1, WAL_MAX_INDEX, NULL), CAIRN_EINVAL);
  assert_int_equal(wal_snapshot(w, NULL, 1, WAL_MAX_INDEX, 1, 1, NULL), CAIRN_EINVAL);
  assert_int_equal(wal_reset(w, NULL, 1, WAL_MAX_INDEX - 1, 1, NULL), CAIRN_EINVAL);
  close_wal(&loop, w);
  assert_int_equal(wal_open(&loop, dir, NULL, &w, errmsg), 0);
  struct wal_group_info info;
  assert_int_equal(wal_group_info(w, 1, &info), 0);
  assert_int_equal(info.first, WAL_MAX_INDEX - 2);
  assert_int_equal(info.next, WAL_MAX_INDEX - 1);
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
      cmocka_unit_test(test_wal_v1_torn_tail_is_cut_before_going_on_in_v2),
      cmocka_unit_test(test_wal_replay_holes_are_bounded_per_record),
      cmocka_unit_test(test_wal_adopted_spare_cut_before_its_header),
      cmocka_unit_test(test_wal_refuses_indexes_replay_would_refuse),
  };
  return cmocka_run_group_tests(tests, golden_setup, NULL);
}
