/* test_client_units.c - libcairn's pure parts: the key hash pinned to
 * fixed values (it must never change), the accumulator (batching by size,
 * sealing with producer fields and sequences, order), the lz4/zstd round
 * trip of a batch, the backoff's growth, cap and jitter, and the admin
 * calls' shared checks (admin_call.h). */
#include "accumulator.h"
#include "admin_call.h"
#include "internal.h"

#include "common/err.h"
#include "format/batch.h"
#include "format/codec.h"
#include "format/endian.h"
#include "testutil.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

/* ---- partitioner ---- */

static void test_partitioner_key_hash_is_crc32c_with_pinned_values(void **state)
{
  (void)state;
  /* The CRC-32C check value, and values computed once: pinned forever. */
  assert_int_equal(lc_partition_hash("123456789", 9), 0xE3069283u);
  assert_int_equal(lc_partition_hash("a", 1), 0xC1D04330u);
  assert_int_equal(lc_partition_hash("user-1", 6), 0x14CCC4ACu);
  assert_int_equal(lc_partition_hash("order-42", 8), 0xF2452E86u);
  assert_int_equal(lc_partition_hash("", 0), 0u);
  assert_int_equal(lc_partition_for_key("user-1", 6, 8), 4);
  assert_int_equal(lc_partition_for_key("user-2", 6, 8), 0);
  assert_int_equal(lc_partition_for_key("order-42", 8, 12), 2);
  assert_int_equal(lc_partition_for_key("order-42", 8, 3), 2);
  assert_int_equal(lc_partition_for_key("123456789", 9, 8), 3);
  assert_int_equal(lc_partition_for_key("anything", 8, 1), 0);
}

/* ---- accumulator ---- */

static struct cairn_message msg_of(const char *key, const char *value)
{
  struct cairn_message m;
  cairn_message_init(&m);
  m.topic = "t";
  m.key = key;
  m.key_len = key != NULL ? strlen(key) : 0;
  m.value = value;
  m.value_len = strlen(value);
  return m;
}

static void test_accumulator_fills_batches_to_batch_bytes_in_order(void **state)
{
  (void)state;
  struct lc_acc a;
  lc_acc_init(&a);
  char value[100];
  memset(value, 'v', sizeof value - 1);
  value[sizeof value - 1] = '\0';
  int opened_count = 0;
  for (int i = 0; i < 50; i++) {
    struct cairn_message m = msg_of("k", value);
    struct lc_msg msg = {NULL, NULL, 1000 + i, 10, (uint64_t)i};
    bool opened;
    assert_int_equal(lc_acc_append(&a, 1000, 100000, 0, 5000, &m, 1000 + i, &msg, &opened), 0);
    opened_count += opened;
  }
  /* ~105 bytes per record, batches close once they hold >= 1000 bytes. */
  assert_true(opened_count >= 4 && opened_count <= 6);
  assert_int_equal(a.nbatches, (size_t)opened_count);
  size_t total = 0;
  uint64_t next_id = 0;
  for (struct lc_batch *b = a.head; b != NULL; b = b->next) {
    assert_true(b->open);
    if (b != a.tail) {
      assert_true(batch_builder_size(&b->bb) >= 1000);
    }
    for (size_t i = 0; i < b->nmsgs; i++) {
      assert_int_equal(b->msgs[i].id, next_id++); /* messages keep their order */
    }
    total += b->nmsgs;
  }
  assert_int_equal(total, 50);
  /* The tail is ready after linger or when forced, not before. */
  assert_false(lc_acc_tail_ready(&a, 1000, 5, 2, false));
  assert_true(lc_acc_tail_ready(&a, 1000, 5, 5, false));
  assert_true(lc_acc_tail_ready(&a, 1000, 5, 2, true));
  lc_acc_close(&a);
}

/* first_open names the first batch a round may have to seal: every batch
 * before it is sealed, through appends, seals in order and pops. */
static void test_accumulator_first_open_follows_seals_and_pops(void **state)
{
  (void)state;
  struct lc_acc a;
  lc_acc_init(&a);
  assert_null(a.first_open);
  char value[100];
  memset(value, 'v', sizeof value - 1);
  value[sizeof value - 1] = '\0';
  for (int i = 0; i < 30; i++) {
    struct cairn_message m = msg_of("k", value);
    struct lc_msg msg = {NULL, NULL, 1000 + i, 10, (uint64_t)i};
    bool opened;
    assert_int_equal(lc_acc_append(&a, 1000, 100000, 0, 5000, &m, 1000 + i, &msg, &opened), 0);
  }
  assert_true(a.nbatches >= 3);
  assert_ptr_equal(a.first_open, a.head);
  struct lc_batch *second = a.head->next;
  assert_int_equal(lc_acc_seal(&a, a.head, 42, 0, CAIRN_COMPRESSION_NONE, 0), 0);
  assert_ptr_equal(a.first_open, second);
  /* Popping the sealed head leaves it; popping the first open one moves it on. */
  lc_acc_batch_free(lc_acc_pop(&a));
  assert_ptr_equal(a.first_open, second);
  struct lc_batch *third = second->next;
  lc_acc_batch_free(lc_acc_pop(&a));
  assert_ptr_equal(a.first_open, third);
  while (a.first_open != NULL) {
    assert_int_equal(lc_acc_seal(&a, a.first_open, 42, 0, CAIRN_COMPRESSION_NONE, 0), 0);
  }
  for (struct lc_batch *b = a.head; b != NULL; b = b->next) {
    assert_false(b->open);
  }
  /* A batch opened after everything was sealed is the first open one. */
  struct cairn_message m = msg_of("k", value);
  struct lc_msg msg = {NULL, NULL, 2000, 10, 99};
  bool opened;
  assert_int_equal(lc_acc_append(&a, 1000, 100000, 0, 5000, &m, 2000, &msg, &opened), 0);
  assert_true(opened);
  assert_ptr_equal(a.first_open, a.tail);
  lc_acc_close(&a);
  assert_null(a.first_open);
}

static void test_accumulator_refuses_a_record_above_max_batch_bytes(void **state)
{
  (void)state;
  struct lc_acc a;
  lc_acc_init(&a);
  char *big = malloc(2001);
  memset(big, 'x', 2000);
  big[2000] = '\0';
  struct cairn_message m = msg_of(NULL, big);
  struct lc_msg msg = {NULL, NULL, 0, 10, 0};
  bool opened;
  assert_int_equal(lc_acc_append(&a, 1000, 2000, 0, 5000, &m, 0, &msg, &opened), CAIRN_ETOOLARGE);
  assert_null(a.head);
  /* Just below the bound fits, alone in its batch. */
  big[2000 - 66 - 12] = '\0';
  m = msg_of(NULL, big);
  assert_int_equal(lc_acc_append(&a, 1000, 2000, 0, 5000, &m, 0, &msg, &opened), 0);
  assert_true(opened);
  free(big);
  lc_acc_close(&a);
}

static void test_accumulator_seals_with_producer_fields_and_sequences(void **state)
{
  (void)state;
  struct lc_acc a;
  lc_acc_init(&a);
  for (int round = 0; round < 2; round++) {
    for (int i = 0; i < 3; i++) {
      struct cairn_message m = msg_of("k", "value");
      struct lc_msg msg = {NULL, NULL, 7, 10, 0};
      bool opened;
      assert_int_equal(lc_acc_append(&a, 1u << 20, 1u << 20, 0, 5000, &m, 7, &msg, &opened), 0);
    }
    assert_int_equal(lc_acc_seal(&a, a.tail, 42, 3, CAIRN_COMPRESSION_NONE, 0), 0);
  }
  struct lc_batch *b0 = a.head, *b1 = a.head->next;
  assert_false(b0->open);
  assert_int_equal(batch_validate(b0->bytes, b0->len, BATCH_DEFAULT_MAX_BYTES, NULL, 0), 0);
  struct batch_header h;
  batch_header_decode(b0->bytes, &h);
  assert_int_equal(h.producer_id, 42);
  assert_int_equal(h.producer_epoch, 3);
  assert_int_equal(h.base_sequence, 0);
  assert_int_equal(h.record_count, 3);
  batch_header_decode(b1->bytes, &h);
  assert_int_equal(h.base_sequence, 3); /* sequences count records per partition */
  assert_int_equal(a.next_seq, 6);
  /* Not idempotent: -1 everywhere, no sequence kept. */
  struct cairn_message m = msg_of(NULL, "x");
  struct lc_msg msg = {NULL, NULL, 7, 10, 0};
  bool opened;
  assert_int_equal(lc_acc_append(&a, 1u << 20, 1u << 20, 0, 5000, &m, 7, &msg, &opened), 0);
  assert_true(opened); /* the last batch was sealed: a new one */
  assert_int_equal(lc_acc_seal(&a, a.tail, -1, -1, CAIRN_COMPRESSION_NONE, 0), 0);
  batch_header_decode(a.tail->bytes, &h);
  assert_int_equal(h.producer_id, -1);
  assert_int_equal(h.producer_epoch, -1);
  assert_int_equal(h.base_sequence, -1);
  /* A new epoch renumbers what is sealed and not done, from 0, and the
   * batches stay valid. */
  lc_acc_restamp(&a, 42, 4);
  batch_header_decode(b0->bytes, &h);
  assert_int_equal(h.producer_epoch, 4);
  assert_int_equal(h.base_sequence, 0);
  batch_header_decode(b1->bytes, &h);
  assert_int_equal(h.base_sequence, 3);
  assert_int_equal(batch_validate(b1->bytes, b1->len, BATCH_DEFAULT_MAX_BYTES, NULL, 0), 0);
  batch_header_decode(a.tail->bytes, &h);
  assert_int_equal(h.producer_id, 42);
  assert_int_equal(h.base_sequence, 6);
  assert_int_equal(a.next_seq, 7);
  b0->done = true; /* a done batch keeps its numbers */
  lc_acc_restamp(&a, -1, -1);
  batch_header_decode(b0->bytes, &h);
  assert_int_equal(h.producer_id, 42);
  batch_header_decode(b1->bytes, &h);
  assert_int_equal(h.producer_id, -1);
  assert_int_equal(h.base_sequence, -1);
  assert_int_equal(batch_validate(b1->bytes, b1->len, BATCH_DEFAULT_MAX_BYTES, NULL, 0), 0);
  /* Pops come in order. */
  struct lc_batch *p = lc_acc_pop(&a);
  assert_ptr_equal(p, b0);
  lc_acc_batch_free(p);
  assert_ptr_equal(a.head, b1);
  lc_acc_close(&a);
  assert_null(a.head);
  assert_null(a.tail);
}

/* ---- compression ---- */

static void test_compression_round_trips_a_batch_with_both_codecs(void **state)
{
  (void)state;
  const enum cairn_compression codecs[2] = {CAIRN_COMPRESSION_LZ4, CAIRN_COMPRESSION_ZSTD};
  for (int k = 0; k < 2; k++) {
    struct lc_acc a;
    lc_acc_init(&a);
    for (int i = 0; i < 200; i++) {
      char key[16], value[64];
      snprintf(key, sizeof key, "key-%d", i % 10);
      snprintf(value, sizeof value, "a fairly repetitive value number %d", i);
      struct cairn_message m = msg_of(key, value);
      struct lc_msg msg = {NULL, NULL, 1000, 10, 0};
      bool opened;
      assert_int_equal(lc_acc_append(&a, 1u << 20, 1u << 20, 0, 5000, &m, 1000 + i, &msg, &opened),
                       0);
    }
    size_t plain = batch_builder_size(&a.tail->bb);
    assert_int_equal(lc_acc_seal(&a, a.tail, -1, -1, codecs[k], 0), 0);
    struct lc_batch *b = a.tail;
    assert_true(b->len < plain / 2);
    assert_int_equal(le_get16(b->bytes + BATCH_OFF_ATTRIBUTES) & BATCH_ATTR_CODEC_MASK,
                     (int)codecs[k]);
    assert_int_equal(batch_validate(b->bytes, b->len, BATCH_DEFAULT_MAX_BYTES, NULL, 0), 0);
    uint8_t *out;
    size_t len;
    assert_int_equal(codec_batch_decompress(b->bytes, b->len, BATCH_DEFAULT_MAX_BYTES, &out, &len),
                     0);
    assert_int_equal(len, plain);
    struct batch_iter it;
    assert_int_equal(batch_iter_init(&it, out, len), 0);
    struct batch_record r;
    for (int i = 0; i < 200; i++) {
      assert_int_equal(batch_iter_next(&it, &r), 1);
      char value[64];
      int vl = snprintf(value, sizeof value, "a fairly repetitive value number %d", i);
      assert_int_equal(r.value_len, (size_t)vl);
      assert_memory_equal(r.value, value, (size_t)vl);
      assert_int_equal(r.timestamp, 1000 + i);
    }
    assert_int_equal(batch_iter_next(&it, &r), 0);
    /* A cap below the plain size refuses to decompress. */
    uint8_t *x;
    assert_int_equal(codec_batch_decompress(b->bytes, b->len, plain - 1, &x, &len),
                     CAIRN_ETOOLARGE);
    free(out);
    lc_acc_close(&a);
  }
}

static void test_compression_leaves_incompressible_batches_plain(void **state)
{
  (void)state;
  uint64_t seed = tu_seed("incompressible");
  struct lc_acc a;
  lc_acc_init(&a);
  uint8_t noise[200];
  for (size_t i = 0; i < sizeof noise; i++) {
    noise[i] = (uint8_t)tu_rand(&seed);
  }
  struct cairn_message m;
  cairn_message_init(&m);
  m.topic = "t";
  m.value = noise;
  m.value_len = sizeof noise;
  struct lc_msg msg = {NULL, NULL, 0, 10, 0};
  bool opened;
  assert_int_equal(lc_acc_append(&a, 1u << 20, 1u << 20, 0, 5000, &m, 0, &msg, &opened), 0);
  assert_int_equal(lc_acc_seal(&a, a.tail, -1, -1, CAIRN_COMPRESSION_ZSTD, 0), 0);
  assert_int_equal(le_get16(a.tail->bytes + BATCH_OFF_ATTRIBUTES) & BATCH_ATTR_CODEC_MASK, 0);
  lc_acc_close(&a);
}

/* ---- backoff ---- */

static void test_backoff_doubles_to_the_cap_with_bounded_jitter(void **state)
{
  (void)state;
  uint64_t seed = tu_seed("backoff");
  struct lc_backoff b;
  lc_backoff_init(&b, 100, 1000, seed);
  const uint32_t base[] = {100, 200, 400, 800, 1000, 1000, 1000};
  for (size_t i = 0; i < sizeof base / sizeof base[0]; i++) {
    uint32_t d = lc_backoff_next(&b);
    uint32_t lo = base[i] * 8 / 10;
    uint32_t hi = base[i] * 12 / 10 < 1000 ? base[i] * 12 / 10 : 1000;
    if (d < lo || d > hi) {
      fail_msg("delay %zu: %u not in [%u, %u]", i, d, lo, hi);
    }
  }
  lc_backoff_reset(&b);
  uint32_t d = lc_backoff_next(&b);
  assert_true(d >= 80 && d <= 120);
  /* Jitter: many first delays are not all equal, and they spread over
   * the range. */
  uint32_t min = UINT32_MAX, max = 0;
  for (int i = 0; i < 1000; i++) {
    lc_backoff_reset(&b);
    d = lc_backoff_next(&b);
    min = d < min ? d : min;
    max = d > max ? d : max;
  }
  assert_true(min <= 85 && max >= 115);
  /* Never 0 with a base; and 0 stays 0. */
  lc_backoff_init(&b, 1, 1, seed);
  assert_int_equal(lc_backoff_next(&b), 1);
  lc_backoff_init(&b, 0, 0, seed);
  assert_int_equal(lc_backoff_next(&b), 0);
}

/* ---- admin_call ---- */

static void test_admin_call_verdict_retries_only_retriable_wire_errors(void **state)
{
  (void)state;
  struct lc_op op;
  memset(&op, 0, sizeof op);
  op.status = CAIRN_EPROTOCOL;
  assert_int_equal(lc_acall_verdict(&op, NULL), LC_OP_DONE);
  assert_int_equal(op.status, 0);

  Cairn__Client__Error e = CAIRN__CLIENT__ERROR__INIT;
  e.code = CAIRN__CLIENT__ERROR_CODE__OK;
  op.status = CAIRN_EPROTOCOL;
  assert_int_equal(lc_acall_verdict(&op, &e), LC_OP_DONE);
  assert_int_equal(op.status, 0);

  char want[LC_ERRMSG_SIZE];
  e.code = CAIRN__CLIENT__ERROR_CODE__NOT_LEADER;
  e.message = "leader moved";
  assert_int_equal(lc_acall_verdict(&op, &e), LC_OP_RETRY);
  assert_int_equal(op.status, CAIRN_ENOTLEADER);
  snprintf(want, sizeof want, "%s: leader moved", cairn_strerror(CAIRN_ENOTLEADER));
  assert_string_equal(op.errmsg, want);

  e.code = CAIRN__CLIENT__ERROR_CODE__TOPIC_EXISTS;
  e.message = "";
  assert_int_equal(lc_acall_verdict(&op, &e), LC_OP_DONE);
  assert_int_equal(op.status, CAIRN_ETOPIC_EXISTS);
  assert_string_equal(op.errmsg, cairn_strerror(CAIRN_ETOPIC_EXISTS));
}

static void test_admin_call_check_refuses_bad_arguments_before_a_closing_client(void **state)
{
  (void)state;
  struct cairn_client c;
  memset(&c, 0, sizeof c);
  assert_int_equal(lc_acall_check(&c, true), 0);
  assert_int_equal(lc_acall_check(&c, false), CAIRN_EINVAL);
  c.closing = true;
  assert_int_equal(lc_acall_check(&c, true), CAIRN_ECLOSED);
  assert_int_equal(lc_acall_check(&c, false), CAIRN_EINVAL);
}

int main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_partitioner_key_hash_is_crc32c_with_pinned_values),
      cmocka_unit_test(test_accumulator_fills_batches_to_batch_bytes_in_order),
      cmocka_unit_test(test_accumulator_first_open_follows_seals_and_pops),
      cmocka_unit_test(test_accumulator_refuses_a_record_above_max_batch_bytes),
      cmocka_unit_test(test_accumulator_seals_with_producer_fields_and_sequences),
      cmocka_unit_test(test_compression_round_trips_a_batch_with_both_codecs),
      cmocka_unit_test(test_compression_leaves_incompressible_batches_plain),
      cmocka_unit_test(test_backoff_doubles_to_the_cap_with_bounded_jitter),
      cmocka_unit_test(test_admin_call_verdict_retries_only_retriable_wire_errors),
      cmocka_unit_test(test_admin_call_check_refuses_bad_arguments_before_a_closing_client),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
