/* test_manifest.c - a partition log's manifest: built from a real log,
 * checksums matching the segment files, protobuf round trip, and refusal
 * of malformed or inconsistent input. */
#include "common/err.h"
#include "format/crc32c.h"
#include "storage/manifest.h"
#include "storage/plog.h"
#include "testutil.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

static void test_manifest_describes_every_segment_with_its_checksum(void **state)
{
  char *dir = tu_tmpdir("manifest");
  struct plog_opts opts;
  plog_opts_default(&opts);
  opts.segment_bytes = 16 * 1024;
  struct store *s;
  assert_int_equal(plog_open(dir, &opts, &s, NULL, 0), 0);
  for (int i = 0; i < 100; i++) {
    size_t len;
    uint8_t *b = tu_make_batch((uint64_t)i, 4, 100, 1000 + i, &len);
    struct store_batch sb = {b, len};
    int64_t base;
    assert_int_equal(store_append(s, &sb, 1, (uint64_t)i + 1, &base), 0);
    free(b);
  }
  struct manifest m;
  assert_int_equal(manifest_build(s, &m), 0);
  assert_true(m.nsegments > 3);
  assert_int_equal(m.start_offset, 0);
  assert_int_equal(m.next_offset, 400);
  assert_int_equal(m.last_index, 100);
  for (size_t i = 0; i < m.nsegments; i++) {
    char name[48];
    tu_segname(name, m.segments[i].base_offset, "log");
    int64_t size = tu_file_size(dir, name);
    assert_int_equal(size, (int64_t)m.segments[i].size_bytes);
    uint8_t *bytes = malloc((size_t)size + 1);
    tu_read_at(dir, name, 0, bytes, (size_t)size);
    assert_int_equal(crc32c(bytes, (size_t)size), m.segments[i].crc32c);
    free(bytes);
  }

  uint8_t *enc;
  size_t len;
  assert_int_equal(manifest_encode(&m, &enc, &len), 0);
  struct manifest d;
  assert_int_equal(manifest_decode(enc, len, &d), 0);
  assert_int_equal(d.nsegments, m.nsegments);
  assert_memory_equal(d.segments, m.segments, m.nsegments * sizeof *m.segments);
  assert_int_equal(d.last_index, 100);
  assert_null(d.producers); /* none given: absent, as in older snapshots */
  manifest_free(&d);

  /* The producer table travels as opaque bytes. */
  static const uint8_t table[] = {1, 2, 3, 0, 250, 7};
  m.producers = malloc(sizeof table);
  memcpy(m.producers, table, sizeof table);
  m.producers_len = sizeof table;
  free(enc);
  assert_int_equal(manifest_encode(&m, &enc, &len), 0);
  assert_int_equal(manifest_decode(enc, len, &d), 0);
  assert_int_equal(d.producers_len, sizeof table);
  assert_memory_equal(d.producers, table, sizeof table);
  assert_int_equal(d.nsegments, m.nsegments);

  /* A truncated encoding and garbage are refused, never half-read. */
  struct manifest bad;
  assert_int_equal(manifest_decode(enc, len / 2, &bad), CAIRN_ECORRUPT);
  uint8_t garbage[64];
  memset(garbage, 0xff, sizeof garbage);
  assert_int_equal(manifest_decode(garbage, sizeof garbage, &bad), CAIRN_ECORRUPT);
  assert_int_equal(manifest_decode(enc, MANIFEST_MAX_BYTES + 1, &bad), CAIRN_ETOOLARGE);

  /* Segments that do not tile the log are inconsistent. */
  m.segments[1].base_offset += 1;
  free(enc);
  assert_int_equal(manifest_encode(&m, &enc, &len), 0);
  assert_int_equal(manifest_decode(enc, len, &bad), CAIRN_ECORRUPT);

  free(enc);
  manifest_free(&m);
  manifest_free(&d);
  store_close(s);
  tu_tmpdir_free(dir);
}

/* Checks every segment's checksum in m against the file's bytes. */
static void check_crcs(const char *dir, const struct manifest *m)
{
  for (size_t i = 0; i < m->nsegments; i++) {
    char name[48];
    tu_segname(name, m->segments[i].base_offset, "log");
    size_t size = (size_t)m->segments[i].size_bytes;
    uint8_t *bytes = malloc(size + 1);
    tu_read_at(dir, name, 0, bytes, size);
    assert_int_equal(crc32c(bytes, size), m->segments[i].crc32c);
    free(bytes);
  }
}

static void append_range(struct store *s, int from, int to, uint64_t tag_base)
{
  for (int i = from; i < to; i++) {
    size_t len;
    uint8_t *b = tu_make_batch(tag_base + (uint64_t)i, 4, 100, 1000 + i, &len);
    struct store_batch sb = {b, len};
    int64_t base;
    assert_int_equal(store_append(s, &sb, 1, (uint64_t)i + 1, &base), 0);
    free(b);
  }
}

/* Manifests reuse the checksum of what they read before: after more
 * appends, and after a truncation followed by different appends that grow
 * the segment past its old size, the checksums still match the files. */
static void test_manifest_checksums_stay_right_across_appends_and_truncation(void **state)
{
  char *dir = tu_tmpdir("manifest-inc");
  struct plog_opts opts;
  plog_opts_default(&opts);
  opts.segment_bytes = 64 * 1024;
  struct store *s;
  assert_int_equal(plog_open(dir, &opts, &s, NULL, 0), 0);
  append_range(s, 0, 40, 0);
  struct manifest m;
  assert_int_equal(manifest_build(s, &m), 0);
  check_crcs(dir, &m);
  manifest_free(&m);
  append_range(s, 40, 60, 0);
  assert_int_equal(manifest_build(s, &m), 0);
  check_crcs(dir, &m);
  manifest_free(&m);
  /* Back to offset 120 (Raft index 30: batches of 4 records), then other
   * batches beyond the old end. */
  assert_int_equal(store_truncate(s, 120), 0);
  append_range(s, 30, 80, 1000);
  assert_int_equal(manifest_build(s, &m), 0);
  check_crcs(dir, &m);
  assert_int_equal(m.last_index, 80);
  manifest_free(&m);
  store_close(s);
  tu_tmpdir_free(dir);
}

int main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_manifest_describes_every_segment_with_its_checksum),
      cmocka_unit_test(test_manifest_checksums_stay_right_across_appends_and_truncation),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
