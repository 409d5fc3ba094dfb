/* test_rgroup_apply.c - the partition state machine's pure core with
 * commands in the log (rgroup_cmd.h): a LOG_START moves the log start on
 * the store, at the same point for every replica, capped at the log's end,
 * idempotent when replayed; the command format refuses what is not one. */
#include "cluster/rgroup_apply.h"
#include "cluster/rgroup_cmd.h"
#include "common/err.h"
#include "format/batch.h"
#include "format/batch_builder.h"
#include "format/endian.h"
#include "storage/memlog.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

/* One batch of n records, owned by the caller. */
static uint8_t *batch_of(int n, size_t *len)
{
  struct batch_builder b;
  assert_int_equal(batch_builder_init(&b, BATCH_DEFAULT_MAX_BYTES), 0);
  for (int i = 0; i < n; i++) {
    char v[16];
    int vl = snprintf(v, sizeof v, "v%d", i);
    assert_int_equal(batch_builder_add(&b, 1000 + i, NULL, 0, v, (size_t)vl, NULL, 0), 0);
  }
  uint8_t *out = NULL;
  assert_int_equal(batch_builder_finish(&b, &out, len), 0);
  batch_builder_close(&b);
  return out;
}

/* An entry of the given items, zero-padded to 8 bytes as rgroup_propose
 * makes them. */
static uint8_t *entry_of(const uint8_t *const *items, const size_t *lens, int n, size_t *len)
{
  size_t total = 0;
  for (int i = 0; i < n; i++) {
    total += lens[i];
  }
  size_t padded = (total + 7) & ~(size_t)7;
  uint8_t *e = calloc(1, padded);
  size_t pos = 0;
  for (int i = 0; i < n; i++) {
    memcpy(e + pos, items[i], lens[i]);
    pos += lens[i];
  }
  *len = padded;
  return e;
}

struct fx {
  struct store *store;
  struct producer_state ps;
  struct rgroup_apply ap;
};

static int fx_setup(void **state)
{
  struct fx *f = calloc(1, sizeof *f);
  struct memlog_opts o = {0};
  assert_int_equal(memlog_new(&o, &f->store), 0);
  producer_state_init(&f->ps);
  rgroup_apply_init(&f->ap);
  *state = f;
  return 0;
}

static int fx_teardown(void **state)
{
  struct fx *f = *state;
  rgroup_apply_close(&f->ap);
  producer_state_close(&f->ps);
  store_close(f->store);
  free(f);
  return 0;
}

static int apply_items(struct fx *f, const uint8_t *const *items, const size_t *lens, int n,
                       uint64_t index, struct rgroup_applied *out)
{
  size_t len;
  uint8_t *e = entry_of(items, lens, n, &len);
  int rv = rgroup_apply_entry(&f->ap, f->store, &f->ps, e, len, index, out);
  free(e);
  return rv;
}

static void append_batches(struct fx *f, int batches, int records, uint64_t *index)
{
  for (int i = 0; i < batches; i++) {
    size_t len;
    uint8_t *b = batch_of(records, &len);
    const uint8_t *items[] = {b};
    struct rgroup_applied out;
    assert_int_equal(apply_items(f, items, &len, 1, ++*index, &out), 0);
    assert_int_equal(out.n, 1);
    assert_int_equal(out.appended, 1);
    free(b);
  }
}

static struct store_info info_of(struct fx *f)
{
  struct store_info i;
  store_info(f->store, &i);
  return i;
}

static void test_cmd_roundtrip_and_refusals(void **state)
{
  (void)state;
  uint8_t c[RGROUP_CMD_SIZE];
  struct rgroup_cmd in = {.kind = RGROUP_CMD_LOG_START, .offset = 123456789012LL}, out;
  rgroup_cmd_encode(&in, c);
  size_t size = 0;
  assert_int_equal(rgroup_cmd_probe(c, sizeof c, &out, &size), 1);
  assert_int_equal(size, RGROUP_CMD_SIZE);
  assert_int_equal(out.kind, RGROUP_CMD_LOG_START);
  assert_true(out.offset == in.offset);
  /* A batch is not a command: batch_probe reads it. */
  size_t blen;
  uint8_t *b = batch_of(3, &blen);
  assert_int_equal(rgroup_cmd_probe(b, blen, &out, &size), 0);
  free(b);
  /* Malformed commands are refused, each with its reason. */
  assert_int_equal(rgroup_cmd_probe(c, RGROUP_CMD_SIZE - 1, &out, &size), CAIRN_ETRUNCATED);
  uint8_t bad[RGROUP_CMD_SIZE];
  memcpy(bad, c, sizeof bad);
  bad[35] ^= 1; /* the offset, under the CRC */
  assert_int_equal(rgroup_cmd_probe(bad, sizeof bad, &out, &size), CAIRN_EBADCRC);
  memcpy(bad, c, sizeof bad);
  le_put32(bad + BATCH_OFF_LENGTH, 29);
  assert_int_equal(rgroup_cmd_probe(bad, sizeof bad, &out, &size), CAIRN_EBADLEN);
  struct rgroup_cmd neg = {.kind = RGROUP_CMD_LOG_START, .offset = -5};
  rgroup_cmd_encode(&neg, bad);
  assert_int_equal(rgroup_cmd_probe(bad, sizeof bad, &out, &size), CAIRN_EOFFSET);
  struct rgroup_cmd unknown = {.kind = (enum rgroup_cmd_kind)7, .offset = 1};
  rgroup_cmd_encode(&unknown, bad);
  assert_int_equal(rgroup_cmd_probe(bad, sizeof bad, &out, &size), CAIRN_EUNSUPPORTED);
}

static void test_log_start_moves_within_the_log(void **state)
{
  struct fx *f = *state;
  uint64_t index = 0;
  append_batches(f, 3, 10, &index); /* offsets 0..29 */
  uint8_t c[RGROUP_CMD_SIZE];
  struct rgroup_cmd cmd = {.kind = RGROUP_CMD_LOG_START, .offset = 15};
  rgroup_cmd_encode(&cmd, c);
  const uint8_t *items[] = {c};
  size_t lens[] = {sizeof c};
  struct rgroup_applied out;
  assert_int_equal(apply_items(f, items, lens, 1, ++index, &out), 0);
  assert_int_equal(out.n, 1);
  assert_int_equal(out.appended, 0);
  assert_int_equal(out.results[0].status, 0);
  assert_int_equal(out.results[0].offset, 15);
  struct store_info i = info_of(f);
  assert_int_equal(i.start_offset, 15);
  assert_int_equal(i.next_offset, 30);
  /* Below the start: nothing moves, the answer is the start. */
  cmd.offset = 3;
  rgroup_cmd_encode(&cmd, c);
  assert_int_equal(apply_items(f, items, lens, 1, ++index, &out), 0);
  assert_int_equal(out.results[0].offset, 15);
  assert_int_equal(info_of(f).start_offset, 15);
  /* Above the end (a replica cannot see one: the leader refuses it, but
   * the cap keeps every replica alike): the log's end. */
  cmd.offset = 500;
  rgroup_cmd_encode(&cmd, c);
  assert_int_equal(apply_items(f, items, lens, 1, ++index, &out), 0);
  assert_int_equal(out.results[0].offset, 30);
  i = info_of(f);
  assert_int_equal(i.start_offset, 30);
  assert_int_equal(i.next_offset, 30);
  /* Offsets go on gap-free after the emptied log. */
  append_batches(f, 1, 5, &index);
  i = info_of(f);
  assert_int_equal(i.start_offset, 30);
  assert_int_equal(i.next_offset, 35);
}

static void test_command_beside_batches_in_one_entry(void **state)
{
  struct fx *f = *state;
  uint64_t index = 0;
  append_batches(f, 2, 10, &index); /* 0..19 */
  size_t l1, l2;
  uint8_t *b1 = batch_of(4, &l1), *b2 = batch_of(6, &l2);
  uint8_t c[RGROUP_CMD_SIZE];
  struct rgroup_cmd cmd = {.kind = RGROUP_CMD_LOG_START, .offset = 12};
  rgroup_cmd_encode(&cmd, c);
  const uint8_t *items[] = {b1, c, b2};
  size_t lens[] = {l1, sizeof c, l2};
  struct rgroup_applied out;
  assert_int_equal(apply_items(f, items, lens, 3, ++index, &out), 0);
  assert_int_equal(out.n, 3);
  assert_int_equal(out.appended, 2);
  assert_int_equal(out.results[0].status, 0);
  assert_int_equal(out.results[0].offset, 20);
  assert_int_equal(out.results[1].offset, 12); /* the command: the new start */
  assert_int_equal(out.results[2].offset, 24);
  struct store_info i = info_of(f);
  assert_int_equal(i.start_offset, 12);
  assert_int_equal(i.next_offset, 30);
  assert_int_equal(i.last_index, index);
  free(b1);
  free(b2);
}

static void test_replayed_command_applies_again(void **state)
{
  struct fx *f = *state;
  uint64_t index = 0;
  append_batches(f, 3, 10, &index); /* 0..29, last index 3 */
  uint8_t c[RGROUP_CMD_SIZE];
  struct rgroup_cmd cmd = {.kind = RGROUP_CMD_LOG_START, .offset = 21};
  rgroup_cmd_encode(&cmd, c);
  const uint8_t *items[] = {c};
  size_t lens[] = {sizeof c};
  struct rgroup_applied out;
  /* An entry at an index the store holds already (a restart's replay,
   * whose command's effect may not have reached the disk): the command
   * runs, nobody is answered. */
  assert_int_equal(apply_items(f, items, lens, 1, 2, &out), 0);
  assert_int_equal(out.n, 0);
  assert_int_equal(info_of(f).start_offset, 21);
  assert_int_equal(info_of(f).last_index, 3);
}

static void test_has_command(void **state)
{
  (void)state;
  size_t l1, len;
  uint8_t *b1 = batch_of(3, &l1);
  uint8_t c[RGROUP_CMD_SIZE];
  struct rgroup_cmd cmd = {.kind = RGROUP_CMD_LOG_START, .offset = 1};
  rgroup_cmd_encode(&cmd, c);
  const uint8_t *only_batch[] = {b1};
  uint8_t *e = entry_of(only_batch, &l1, 1, &len);
  assert_false(rgroup_apply_has_command(e, len));
  free(e);
  const uint8_t *mixed[] = {b1, c};
  size_t lens[] = {l1, sizeof c};
  e = entry_of(mixed, lens, 2, &len);
  assert_true(rgroup_apply_has_command(e, len));
  /* A length field that does not walk: false, the apply refuses it. */
  le_put32(e + BATCH_OFF_LENGTH, 0);
  assert_false(rgroup_apply_has_command(e, len));
  le_put32(e + BATCH_OFF_LENGTH, 0x7fffffff);
  assert_false(rgroup_apply_has_command(e, len));
  free(e);
  free(b1);
}

static void test_malformed_command_fails_the_entry(void **state)
{
  struct fx *f = *state;
  uint64_t index = 0;
  append_batches(f, 1, 10, &index);
  uint8_t c[RGROUP_CMD_SIZE];
  struct rgroup_cmd cmd = {.kind = RGROUP_CMD_LOG_START, .offset = 5};
  rgroup_cmd_encode(&cmd, c);
  c[33] ^= 0x40;
  const uint8_t *items[] = {c};
  size_t lens[] = {sizeof c};
  struct rgroup_applied out;
  assert_int_equal(apply_items(f, items, lens, 1, ++index, &out), CAIRN_EBADCRC);
  assert_int_equal(info_of(f).start_offset, 0);
}

int main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_cmd_roundtrip_and_refusals),
      cmocka_unit_test(test_has_command),
      cmocka_unit_test_setup_teardown(test_log_start_moves_within_the_log, fx_setup, fx_teardown),
      cmocka_unit_test_setup_teardown(test_command_beside_batches_in_one_entry, fx_setup,
                                      fx_teardown),
      cmocka_unit_test_setup_teardown(test_replayed_command_applies_again, fx_setup, fx_teardown),
      cmocka_unit_test_setup_teardown(test_malformed_command_fails_the_entry, fx_setup,
                                      fx_teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
