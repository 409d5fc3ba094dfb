/* test_raft_files.c - the raft_uv directory checker on segment files built
 * byte by byte (and on real ones in tests/golden/raft): an intact
 * directory passes untouched; an open segment cut anywhere in its last
 * batch is cut back to the batch before and then parses clean; seeded
 * random garbage is repaired (at the tail) or refused with the file and
 * offset (anywhere else), never a crash; damage in a closed segment, in
 * the metadata or in a snapshot's metadata is refused.
 *
 * CAIRN_TEST_SEED replays the random garbage. */
#include "cluster/raft_files.h"
#include "common/err.h"
#include "format/endian.h"
#include "testutil.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#define OPEN_SIZE 8192 /* preallocated size of the built open segment */
#define OPEN_BATCHES 5
#define MAX_BATCHES 16

/* raft's CRC-32 bit by bit (MSB first, poly 0x04c11db7, init 0): an
 * independent check of the table the module uses. */
static uint32_t crc_bitwise(const uint8_t *p, size_t n, uint32_t crc)
{
  for (size_t i = 0; i < n; i++) {
    crc ^= (uint32_t)p[i] << 24;
    for (int k = 0; k < 8; k++) {
      crc = (crc & 0x80000000u) ? (crc << 1) ^ 0x04c11db7u : crc << 1;
    }
  }
  return crc;
}

/* A segment under construction, with its batch boundaries. */
struct seg {
  uint8_t b[OPEN_SIZE];
  size_t len;                     /* bytes written (format word + batches) */
  size_t starts[MAX_BATCHES + 1]; /* batch i spans starts[i]..starts[i+1] */
  unsigned nbatches;
  uint64_t nentries;
};

static void seg_init(struct seg *s)
{
  memset(s, 0, sizeof *s);
  le_put64(s->b, 1);
  s->len = 8;
}

/* Appends a batch of n entries (a barrier first, then commands) whose
 * lengths are multiples of 8 as raft writes them, data derived from seed. */
static void seg_batch(struct seg *s, unsigned n, uint64_t term, unsigned seed)
{
  assert_true(s->nbatches < MAX_BATCHES);
  size_t at = s->len;
  s->starts[s->nbatches] = at;
  uint8_t *h = s->b + at + 8;
  le_put64(h, n);
  size_t data_len = 0;
  for (unsigned i = 0; i < n; i++) {
    uint8_t *e = h + 8 + 16 * i;
    uint32_t len = i == 0 ? 8 : 8 * (1 + (seed + i) % 9);
    le_put64(e, term);
    e[8] = i == 0 ? 2 : 1;
    le_put32(e + 12, len);
    data_len += len;
  }
  size_t header_len = 8 + 16 * (size_t)n;
  uint8_t *data = h + header_len;
  assert_true(at + 8 + header_len + data_len <= sizeof s->b);
  for (size_t k = 0; k < data_len; k++) {
    data[k] = (uint8_t)(seed * 31 + k * 7 + 1);
  }
  le_put32(s->b + at, crc_bitwise(h, header_len, 0));
  le_put32(s->b + at + 4, crc_bitwise(data, data_len, 0));
  s->len = at + 8 + header_len + data_len;
  s->nbatches++;
  s->starts[s->nbatches] = s->len;
  s->nentries += n;
}

static void write_file(const char *dir, const char *name, const void *b, size_t len)
{
  char path[512];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  FILE *f = fopen(path, "wb");
  assert_non_null(f);
  assert_int_equal(fwrite(b, 1, len, f), len);
  assert_int_equal(fclose(f), 0);
}

static void write_metadata(const char *dir, const char *name, uint64_t format, uint64_t version)
{
  uint8_t m[32];
  le_put64(m, format);
  le_put64(m + 8, version);
  le_put64(m + 16, 2); /* term */
  le_put64(m + 24, 1); /* voted for */
  write_file(dir, name, m, sizeof m);
}

#define CLOSED_NAME "0000000000000001-0000000000000006"
#define OPEN_NAME "open-1"

/* The golden directory: metadata1 (v3) and metadata2 (v2); a closed
 * segment of entries 1..6 in three batches; open-1 with OPEN_BATCHES
 * batches, zero-filled to OPEN_SIZE; open-2 preallocated, never written. */
struct golden {
  char *dir;
  struct seg closed;
  struct seg open;
};

static void golden_make(struct golden *g)
{
  g->dir = tu_tmpdir("raft-files");
  write_metadata(g->dir, "metadata1", 1, 3);
  write_metadata(g->dir, "metadata2", 1, 2);
  seg_init(&g->closed);
  seg_batch(&g->closed, 1, 1, 1);
  seg_batch(&g->closed, 2, 1, 2);
  seg_batch(&g->closed, 3, 2, 3);
  write_file(g->dir, CLOSED_NAME, g->closed.b, g->closed.len);
  seg_init(&g->open);
  for (unsigned i = 0; i < OPEN_BATCHES; i++) {
    seg_batch(&g->open, 1 + i % 3, 2, 10 + i);
  }
  write_file(g->dir, OPEN_NAME, g->open.b, OPEN_SIZE);
  static const uint8_t zeros[OPEN_SIZE];
  write_file(g->dir, "open-2", zeros, sizeof zeros);
}

static void golden_free(struct golden *g)
{
  tu_tmpdir_free(g->dir);
}

static int check(const char *dir, struct raft_files_report *rep)
{
  int rv = raft_files_check(dir, rep);
  if (rv != 0 && rv != CAIRN_ERAFTFILES) {
    fail_msg("raft_files_check: %s: %s", cairn_strerror(rv), rep->errmsg);
  }
  return rv;
}

/* ---- tests ---- */

static void test_raft_files_crc_is_rafts(void **state)
{
  (void)state;
  uint8_t b[300];
  for (size_t i = 0; i < sizeof b; i++) {
    b[i] = (uint8_t)(i * 13 + 5);
  }
  for (size_t n = 0; n < sizeof b; n += 37) {
    assert_int_equal(raft_files_crc32(b, n, 0), crc_bitwise(b, n, 0));
    assert_int_equal(raft_files_crc32(b + n, sizeof b - n, raft_files_crc32(b, n, 0)),
                     crc_bitwise(b, sizeof b, 0));
  }
}

/* Files raft 0.15 wrote in a real cluster (a partition replica's closed
 * segments and metadata) pass as they are. */
static void test_raft_files_real_files_from_raft_pass(void **state)
{
  (void)state;
  const char *golden = getenv("CAIRN_GOLDEN_DIR");
  assert_non_null(golden);
  char dir[512];
  snprintf(dir, sizeof dir, "%s/raft", golden);
  struct raft_files_report rep;
  assert_int_equal(check(dir, &rep), 0);
  assert_int_equal(rep.segments, 2);
  assert_int_equal(rep.entries, 5);
  assert_int_equal(rep.repaired, 0);
}

static void test_raft_files_intact_dir_passes_untouched(void **state)
{
  (void)state;
  struct golden g;
  golden_make(&g);
  struct raft_files_report rep;
  assert_int_equal(check(g.dir, &rep), 0);
  assert_int_equal(rep.segments, 3);
  assert_int_equal(rep.entries, g.closed.nentries + g.open.nentries);
  assert_int_equal(rep.repaired, 0);
  assert_int_equal(tu_file_size(g.dir, OPEN_NAME), OPEN_SIZE);
  struct raft_files_scan s;
  raft_files_scan(g.open.b, OPEN_SIZE, true, 0, &s);
  assert_int_equal(s.verdict, RAFT_FILES_CLEAN);
  assert_int_equal(s.good_end, g.open.len);
  assert_int_equal(s.batches, OPEN_BATCHES);
  /* An empty directory (a replica never started) passes too. */
  char *empty = tu_tmpdir("raft-files-empty");
  assert_int_equal(check(empty, &rep), 0);
  tu_tmpdir_free(empty);
  golden_free(&g);
}

/* The open segment cut at every byte of its last batch, and inside the
 * 16 bytes after it (raft 0.15 freed the segment's buffer twice on each of
 * these): cut back to the batch before, which then parses clean. */
static void test_raft_files_truncated_last_batch_is_cut_to_previous_batch(void **state)
{
  (void)state;
  struct golden g;
  golden_make(&g);
  size_t last = g.open.starts[OPEN_BATCHES - 1];
  size_t end = g.open.len;
  for (size_t cut = last; cut < end + 16; cut++) {
    write_file(g.dir, OPEN_NAME, g.open.b, cut);
    struct raft_files_report rep;
    assert_int_equal(check(g.dir, &rep), 0);
    size_t want = cut < end ? last : end;
    bool cut_expected = cut != last && cut != end;
    if (rep.repaired != (cut_expected ? 1u : 0u) ||
        tu_file_size(g.dir, OPEN_NAME) != (int64_t)want) {
      fail_msg("cut at %zu: repaired %u, size %lld, want %zu", cut, rep.repaired,
               (long long)tu_file_size(g.dir, OPEN_NAME), want);
    }
    if (cut_expected) {
      assert_non_null(strstr(rep.note, OPEN_NAME ": torn tail cut at byte"));
    }
    assert_int_equal(check(g.dir, &rep), 0);
    assert_int_equal(rep.repaired, 0);
    assert_int_equal(rep.entries, g.closed.nentries + g.open.nentries -
                                      (cut < end ? 1 + (OPEN_BATCHES - 1) % 3 : 0));
  }
  /* Cut inside the first batch: nothing is left, the file is emptied
   * (raft removes an empty open segment; one holding only the format word
   * it cannot load). */
  write_file(g.dir, OPEN_NAME, g.open.b, 20);
  struct raft_files_report rep;
  assert_int_equal(check(g.dir, &rep), 0);
  assert_int_equal(rep.repaired, 1);
  assert_int_equal(tu_file_size(g.dir, OPEN_NAME), 0);
  golden_free(&g);
}

/* The batch holding byte at, or -1 when at lies after the last batch. */
static int batch_of(const struct seg *s, size_t at)
{
  for (unsigned i = 0; i < s->nbatches; i++) {
    if (at >= s->starts[i] && at < s->starts[i + 1]) {
      return (int)i;
    }
  }
  return -1;
}

/* Garbage in the open segment: in its last batch or after it, the tail is
 * cut; in an earlier batch (whole batches follow), refused naming the
 * batch. Garbage in the closed segment: refused. */
static void garbage_once(uint64_t *rnd)
{
  struct golden g;
  golden_make(&g);
  bool in_closed = tu_rand(rnd) % 4 == 0;
  const struct seg *s = in_closed ? &g.closed : &g.open;
  const char *name = in_closed ? CLOSED_NAME : OPEN_NAME;
  size_t file_len = in_closed ? s->len : OPEN_SIZE;
  size_t span = in_closed ? s->len : s->len + 64; /* some of the zero tail too */
  size_t at = (size_t)(tu_rand(rnd) % span);
  size_t n = 1 + (size_t)(tu_rand(rnd) % 48);
  if (at + n > file_len) {
    n = file_len - at;
  }
  uint8_t bytes[48], orig[48];
  for (size_t k = 0; k < n; k++) {
    bytes[k] = (uint8_t)tu_rand(rnd);
  }
  memcpy(orig, s->b + at, n);
  size_t first = SIZE_MAX, last = 0; /* bytes actually changed */
  for (size_t k = 0; k < n; k++) {
    if (bytes[k] != orig[k]) {
      first = first == SIZE_MAX ? at + k : first;
      last = at + k;
    }
  }
  tu_write_at(g.dir, name, (int64_t)at, bytes, n);
  struct raft_files_report rep;
  int rv = check(g.dir, &rep);
  if (first == SIZE_MAX) {
    assert_int_equal(rv, 0);
    assert_int_equal(rep.repaired, 0);
  } else if (first < 8) {
    assert_int_equal(rv, CAIRN_ERAFTFILES);
    assert_non_null(strstr(rep.errmsg, ": header at byte 0: format version"));
  } else {
    int b = batch_of(s, first);
    /* A tail unless a whole batch follows the damage. */
    int final = (int)s->nbatches - 1;
    bool tail = !in_closed && (b == -1 || b == final || s->starts[final] <= last);
    char want[300];
    if (tail) {
      assert_int_equal(rv, 0);
      assert_int_equal(rep.repaired, 1);
      assert_int_equal(tu_file_size(g.dir, name),
                       b == -1 ? (int64_t)s->len : (int64_t)s->starts[b]);
      assert_int_equal(check(g.dir, &rep), 0);
      assert_int_equal(rep.repaired, 0);
    } else {
      if (rv != CAIRN_ERAFTFILES) {
        fail_msg("garbage at %zu (batch %d of %s) was not refused", first, b, name);
      }
      snprintf(want, sizeof want, "%s/%s: batch at byte %zu: ", g.dir, name,
               b == -1 ? s->len : s->starts[b]);
      if (strstr(rep.errmsg, want) == NULL) {
        fail_msg("errmsg \"%s\" does not say \"%s\"", rep.errmsg, want);
      }
      assert_int_equal(tu_file_size(g.dir, name), (int64_t)file_len); /* untouched */
    }
  }
  golden_free(&g);
}

static void test_raft_files_random_garbage_is_cut_at_tail_or_refused(void **state)
{
  (void)state;
  uint64_t rnd = tu_seed("test_raft_files_random_garbage_is_cut_at_tail_or_refused");
  for (int i = 0; i < 400; i++) {
    garbage_once(&rnd);
  }
}

static void test_raft_files_closed_segment_damage_is_refused(void **state)
{
  (void)state;
  struct golden g;
  golden_make(&g);
  struct raft_files_report rep;
  /* One byte of the last batch's data. */
  uint8_t x = (uint8_t)(g.closed.b[g.closed.len - 3] ^ 0x40);
  tu_write_at(g.dir, CLOSED_NAME, (int64_t)g.closed.len - 3, &x, 1);
  assert_int_equal(check(g.dir, &rep), CAIRN_ERAFTFILES);
  char want[300];
  snprintf(want, sizeof want, "%s/" CLOSED_NAME ": batch at byte %zu: data checksum mismatch",
           g.dir, g.closed.starts[2]);
  assert_string_equal(rep.errmsg, want);
  /* Cut short: refused too (a closed segment has no torn tail). */
  write_file(g.dir, CLOSED_NAME, g.closed.b, g.closed.len - 8);
  assert_int_equal(check(g.dir, &rep), CAIRN_ERAFTFILES);
  assert_non_null(strstr(rep.errmsg, "runs past the end of the file"));
  /* Whole, but its name promises more entries. */
  write_file(g.dir, CLOSED_NAME, g.closed.b, g.closed.len);
  assert_int_equal(check(g.dir, &rep), 0);
  char path[512], path2[512];
  snprintf(path, sizeof path, "%s/" CLOSED_NAME, g.dir);
  snprintf(path2, sizeof path2, "%s/0000000000000001-0000000000000007", g.dir);
  assert_int_equal(rename(path, path2), 0);
  assert_int_equal(check(g.dir, &rep), CAIRN_ERAFTFILES);
  assert_non_null(strstr(rep.errmsg, "6 entries, its name says 7"));
  golden_free(&g);
}

/* A torn open-1 while open-2 holds a batch is not a tail: refused. */
static void test_raft_files_torn_segment_before_a_written_one_is_refused(void **state)
{
  (void)state;
  struct golden g;
  golden_make(&g);
  struct seg next;
  seg_init(&next);
  seg_batch(&next, 1, 2, 99);
  write_file(g.dir, "open-2", next.b, sizeof next.b);
  write_file(g.dir, OPEN_NAME, g.open.b, g.open.len - 5);
  struct raft_files_report rep;
  assert_int_equal(check(g.dir, &rep), CAIRN_ERAFTFILES);
  assert_non_null(strstr(rep.errmsg, "later segment open-2 holds batches"));
  assert_int_equal(tu_file_size(g.dir, OPEN_NAME), (int64_t)g.open.len - 5);
  golden_free(&g);
}

static void test_raft_files_unusable_metadata_is_refused(void **state)
{
  (void)state;
  struct golden g;
  golden_make(&g);
  struct raft_files_report rep;
  uint8_t junk[32];
  memset(junk, 0xa5, sizeof junk);
  write_file(g.dir, "metadata1", junk, sizeof junk);
  write_file(g.dir, "metadata2", junk, sizeof junk);
  assert_int_equal(check(g.dir, &rep), CAIRN_ERAFTFILES);
  assert_non_null(strstr(rep.errmsg, "/metadata1: at byte 0: format version"));
  /* One bad one: raft refuses it as well (no checksum tells which was newer). */
  write_metadata(g.dir, "metadata2", 1, 2);
  assert_int_equal(check(g.dir, &rep), CAIRN_ERAFTFILES);
  write_metadata(g.dir, "metadata1", 1, 0);
  assert_int_equal(check(g.dir, &rep), CAIRN_ERAFTFILES);
  assert_non_null(strstr(rep.errmsg, "metadata1: at byte 8: version is zero"));
  write_metadata(g.dir, "metadata1", 1, 2);
  assert_int_equal(check(g.dir, &rep), CAIRN_ERAFTFILES);
  assert_non_null(strstr(rep.errmsg, "both at version 2"));
  /* A torn (short) write of one is raft's to delete; the other counts. */
  write_file(g.dir, "metadata1", junk, 20);
  assert_int_equal(check(g.dir, &rep), 0);
  /* Both torn or gone while segments exist: the term and vote are lost. */
  write_file(g.dir, "metadata2", junk, 7);
  assert_int_equal(check(g.dir, &rep), CAIRN_ERAFTFILES);
  assert_non_null(strstr(rep.errmsg, "no usable metadata1 or metadata2"));
  golden_free(&g);
}

static void test_raft_files_snapshot_meta_damage_is_refused(void **state)
{
  (void)state;
  struct golden g;
  golden_make(&g);
  uint8_t m[32 + 24];
  memset(m, 0, sizeof m);
  le_put64(m, 1);
  le_put64(m + 16, 1);  /* configuration index */
  le_put64(m + 24, 24); /* configuration length */
  for (int k = 0; k < 24; k++) {
    m[32 + k] = (uint8_t)(k + 1);
  }
  uint32_t crc = crc_bitwise(m + 16, 16, 0);
  le_put64(m + 8, crc_bitwise(m + 32, 24, crc));
  write_file(g.dir, "snapshot-2-4-1000.meta", m, sizeof m);
  write_file(g.dir, "snapshot-2-4-1000", "data", 4);
  struct raft_files_report rep;
  assert_int_equal(check(g.dir, &rep), 0);
  m[40] ^= 1;
  write_file(g.dir, "snapshot-2-4-1000.meta", m, sizeof m);
  assert_int_equal(check(g.dir, &rep), CAIRN_ERAFTFILES);
  assert_non_null(strstr(rep.errmsg, "snapshot-2-4-1000.meta: at byte 8: checksum mismatch"));
  /* Without its data file raft ignores (and removes) the metadata. */
  char path[512];
  snprintf(path, sizeof path, "%s/snapshot-2-4-1000", g.dir);
  assert_int_equal(remove(path), 0);
  assert_int_equal(check(g.dir, &rep), 0);
  golden_free(&g);
}

int main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_raft_files_crc_is_rafts),
      cmocka_unit_test(test_raft_files_real_files_from_raft_pass),
      cmocka_unit_test(test_raft_files_intact_dir_passes_untouched),
      cmocka_unit_test(test_raft_files_truncated_last_batch_is_cut_to_previous_batch),
      cmocka_unit_test(test_raft_files_random_garbage_is_cut_at_tail_or_refused),
      cmocka_unit_test(test_raft_files_closed_segment_damage_is_refused),
      cmocka_unit_test(test_raft_files_torn_segment_before_a_written_one_is_refused),
      cmocka_unit_test(test_raft_files_unusable_metadata_is_refused),
      cmocka_unit_test(test_raft_files_snapshot_meta_damage_is_refused),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
