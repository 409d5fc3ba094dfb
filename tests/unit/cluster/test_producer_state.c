/* test_producer_state.c - the idempotent-producer table: duplicates in the
 * window, out-of-order sequences, fencing, epoch bumps, unknown producers,
 * sequence wrap, the bound (idle expiry and count), the encoding round trip
 * and damaged encodings, and a seeded random run checking that a table
 * rebuilt from the appended batches alone equals the live one. */
#include "cluster/producer_state.h"
#include "common/err.h"
#include "testutil.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <limits.h>

static struct producer_batch_info pb(int64_t id, int16_t epoch, int32_t seq, int32_t count,
                                     int64_t ts)
{
  struct producer_batch_info b = {id, epoch, seq, count, ts};
  return b;
}

/* Checks b; if it is to be appended records it at *next and advances
 * *next. Returns the check's code, 1 for a duplicate (offset in *dup). */
static int offer(struct producer_state *ps, struct producer_batch_info b, int64_t *next,
                 uint64_t index, int64_t *dup)
{
  bool duplicate = false;
  int64_t off = -1;
  int rv = producer_state_check(ps, &b, &duplicate, &off);
  if (rv != 0) {
    return rv;
  }
  if (duplicate) {
    *dup = off;
    return 1;
  }
  assert_int_equal(producer_state_record(ps, &b, *next, index), 0);
  *next += b.record_count;
  return 0;
}

static void test_producer_state_duplicate_in_window_gets_original_offset(void **state)
{
  (void)state;
  struct producer_state ps;
  producer_state_init(&ps);
  int64_t next = 100, dup = -1;
  /* One sequence number per record: batches of 3 take 0-2, 3-5, ... */
  for (int i = 0; i < PRODUCER_STATE_WINDOW; i++) {
    assert_int_equal(offer(&ps, pb(7, 0, i * 3, 3, 1000), &next, 10 + i, &dup), 0);
  }
  assert_int_equal(next, 100 + 3 * PRODUCER_STATE_WINDOW);
  /* Every batch of the window is a duplicate with its own offset. */
  for (int i = 0; i < PRODUCER_STATE_WINDOW; i++) {
    assert_int_equal(offer(&ps, pb(7, 0, i * 3, 3, 1000), &next, 20, &dup), 1);
    assert_int_equal(dup, 100 + 3 * i);
  }
  /* Same first sequence but another length is not the same batch. */
  assert_int_equal(offer(&ps, pb(7, 0, 0, 2, 1000), &next, 20, &dup), CAIRN_EOUT_OF_ORDER);
  /* The next sequence counts records, not batches. */
  assert_int_equal(offer(&ps, pb(7, 0, PRODUCER_STATE_WINDOW, 1, 1000), &next, 21, &dup),
                   CAIRN_EOUT_OF_ORDER);
  /* One more pushes the oldest out of the window: it is then too old to
   * tell from a reordering, and refused. */
  assert_int_equal(offer(&ps, pb(7, 0, 3 * PRODUCER_STATE_WINDOW, 1, 1000), &next, 21, &dup), 0);
  assert_int_equal(offer(&ps, pb(7, 0, 0, 3, 1000), &next, 22, &dup), CAIRN_EOUT_OF_ORDER);
  assert_int_equal(offer(&ps, pb(7, 0, 3, 3, 1000), &next, 22, &dup), 1);
  assert_int_equal(dup, 103);
  producer_state_close(&ps);
}

static void test_producer_state_refuses_a_sequence_that_skips_ahead(void **state)
{
  (void)state;
  struct producer_state ps;
  producer_state_init(&ps);
  int64_t next = 0, dup = -1;
  assert_int_equal(offer(&ps, pb(1, 0, 0, 1, 5), &next, 1, &dup), 0);
  assert_int_equal(offer(&ps, pb(1, 0, 2, 1, 5), &next, 2, &dup), CAIRN_EOUT_OF_ORDER);
  assert_int_equal(offer(&ps, pb(1, 0, 1, 1, 5), &next, 3, &dup), 0);
  assert_int_equal(offer(&ps, pb(1, 0, 2, 1, 5), &next, 4, &dup), 0);
  assert_int_equal(next, 3);
  /* A refused batch changed nothing. */
  const struct producer_entry *e = producer_state_find(&ps, 1);
  assert_non_null(e);
  assert_int_equal(e->nbatches, 3);
  assert_int_equal(e->batches[2].last_sequence, 2);
  /* A stamped id without a sequence. */
  assert_int_equal(offer(&ps, pb(1, 0, -1, 1, 5), &next, 5, &dup), CAIRN_EOUT_OF_ORDER);
  producer_state_close(&ps);
}

static void test_producer_state_unknown_producer_must_start_at_zero(void **state)
{
  (void)state;
  struct producer_state ps;
  producer_state_init(&ps);
  int64_t next = 0, dup = -1;
  assert_int_equal(offer(&ps, pb(9, 0, 4, 1, 5), &next, 1, &dup), CAIRN_EUNKNOWN_PRODUCER);
  assert_null(producer_state_find(&ps, 9));
  assert_int_equal(offer(&ps, pb(9, 0, 0, 1, 5), &next, 1, &dup), 0);
  /* Without a producer id nothing is checked or recorded. */
  assert_int_equal(offer(&ps, pb(-1, -1, -1, 4, 5), &next, 2, &dup), 0);
  assert_int_equal(offer(&ps, pb(-1, -1, -1, 4, 5), &next, 3, &dup), 0);
  assert_int_equal(ps.n, 1);
  assert_int_equal(next, 9);
  producer_state_close(&ps);
}

static void test_producer_state_fences_older_epoch_and_resets_on_newer(void **state)
{
  (void)state;
  struct producer_state ps;
  producer_state_init(&ps);
  int64_t next = 0, dup = -1;
  assert_int_equal(offer(&ps, pb(3, 1, 0, 1, 5), &next, 1, &dup), 0);
  assert_int_equal(offer(&ps, pb(3, 1, 1, 1, 5), &next, 2, &dup), 0);
  assert_int_equal(offer(&ps, pb(3, 0, 2, 1, 5), &next, 3, &dup), CAIRN_EPRODUCER_FENCED);
  /* A newer epoch must start at 0. */
  assert_int_equal(offer(&ps, pb(3, 2, 2, 1, 5), &next, 3, &dup), CAIRN_EOUT_OF_ORDER);
  assert_int_equal(offer(&ps, pb(3, 2, 0, 1, 5), &next, 3, &dup), 0);
  const struct producer_entry *e = producer_state_find(&ps, 3);
  assert_int_equal(e->epoch, 2);
  assert_int_equal(e->nbatches, 1);
  /* The old epoch is fenced now, even a batch it once wrote. */
  assert_int_equal(offer(&ps, pb(3, 1, 1, 1, 5), &next, 4, &dup), CAIRN_EPRODUCER_FENCED);
  assert_int_equal(offer(&ps, pb(3, 2, 0, 1, 5), &next, 4, &dup), 1);
  assert_int_equal(dup, 2);
  producer_state_close(&ps);
}

static void test_producer_state_sequence_wraps_to_zero(void **state)
{
  (void)state;
  struct producer_state ps;
  producer_state_init(&ps);
  int64_t next = 0, dup = -1;
  /* A producer close to the end (recorded directly: record does not judge). */
  struct producer_batch_info near = pb(5, 0, INT32_MAX - 3, 2, 5); /* MAX-3, MAX-2 */
  assert_int_equal(producer_state_record(&ps, &near, next, 2), 0);
  next += 2;
  assert_int_equal(offer(&ps, pb(5, 0, INT32_MAX - 1, 3, 5), &next, 3, &dup), 0);
  const struct producer_entry *e = producer_state_find(&ps, 5);
  assert_int_equal(e->batches[e->nbatches - 1].last_sequence, 0); /* MAX-1, MAX, 0 */
  assert_int_equal(offer(&ps, pb(5, 0, INT32_MAX - 1, 3, 5), &next, 4, &dup), 1);
  assert_int_equal(offer(&ps, pb(5, 0, 2, 1, 5), &next, 4, &dup), CAIRN_EOUT_OF_ORDER);
  assert_int_equal(offer(&ps, pb(5, 0, 1, 1, 5), &next, 4, &dup), 0); /* after 0 comes 1 */
  producer_state_close(&ps);
}

static void test_producer_state_expires_idle_producers_by_batch_time(void **state)
{
  (void)state;
  struct producer_state ps;
  producer_state_init(&ps);
  int64_t next = 0, dup = -1;
  int64_t t0 = 1700000000000;
  assert_int_equal(offer(&ps, pb(1, 0, 0, 1, t0), &next, 1, &dup), 0);
  assert_int_equal(offer(&ps, pb(2, 0, 0, 1, t0 + 1000), &next, 2, &dup), 0);
  /* Producer 2 stays active; producer 1 idles past the horizon. */
  assert_int_equal(offer(&ps, pb(2, 0, 1, 1, t0 + PRODUCER_STATE_IDLE_MS), &next, 3, &dup), 0);
  assert_non_null(producer_state_find(&ps, 1)); /* expiry runs on a new producer only */
  assert_int_equal(offer(&ps, pb(3, 0, 0, 1, t0 + PRODUCER_STATE_IDLE_MS + 1), &next, 4, &dup), 0);
  assert_null(producer_state_find(&ps, 1));
  assert_non_null(producer_state_find(&ps, 2));
  assert_int_equal(ps.expired, 1);
  assert_int_equal(offer(&ps, pb(1, 0, 1, 1, t0), &next, 5, &dup), CAIRN_EUNKNOWN_PRODUCER);
  producer_state_close(&ps);
}

static void test_producer_state_count_bound_drops_least_recently_appended(void **state)
{
  (void)state;
  struct producer_state ps;
  producer_state_init(&ps);
  int64_t next = 0, dup = -1;
  for (uint32_t i = 0; i < PRODUCER_STATE_MAX; i++) {
    /* Ids in descending order of index, so the oldest is not the first. */
    assert_int_equal(offer(&ps, pb(PRODUCER_STATE_MAX - i, 0, 0, 1, 5), &next, 1 + i, &dup), 0);
  }
  assert_int_equal(ps.n, PRODUCER_STATE_MAX);
  /* Touch the oldest (id MAX, index 1) so that id MAX-1 is the oldest. */
  assert_int_equal(offer(&ps, pb(PRODUCER_STATE_MAX, 0, 1, 1, 5), &next, 50000, &dup), 0);
  assert_int_equal(offer(&ps, pb(PRODUCER_STATE_MAX + 1, 0, 0, 1, 5), &next, 50001, &dup), 0);
  assert_int_equal(ps.n, PRODUCER_STATE_MAX);
  assert_null(producer_state_find(&ps, PRODUCER_STATE_MAX - 1));
  assert_non_null(producer_state_find(&ps, PRODUCER_STATE_MAX));
  assert_non_null(producer_state_find(&ps, PRODUCER_STATE_MAX + 1));
  producer_state_close(&ps);
}

static void test_producer_state_encoding_round_trips(void **state)
{
  (void)state;
  struct producer_state ps;
  producer_state_init(&ps);
  int64_t next = 0, dup = -1;
  for (int p = 1; p <= 20; p++) {
    for (int s = 0; s < p % 8; s++) {
      assert_int_equal(offer(&ps, pb(p * 11, (int16_t)(p % 3), s * 2, 2, 1000 + p), &next,
                             (uint64_t)(p * 100 + s), &dup),
                       0);
    }
  }
  uint8_t *enc = NULL;
  size_t len = 0;
  assert_int_equal(producer_state_encode(&ps, next, 4242, &enc, &len), 0);
  struct producer_state back;
  producer_state_init(&back);
  int64_t off = -1;
  uint64_t idx = 0;
  assert_int_equal(producer_state_decode(&back, enc, len, &off, &idx), 0);
  assert_int_equal(off, next);
  assert_int_equal(idx, 4242);
  assert_int_equal(back.n, ps.n);
  assert_int_equal(back.max_timestamp, ps.max_timestamp);
  assert_memory_equal(back.entries, ps.entries, ps.n * sizeof *ps.entries);
  /* Equal tables encode to equal bytes. */
  uint8_t *enc2 = NULL;
  size_t len2 = 0;
  assert_int_equal(producer_state_encode(&back, next, 4242, &enc2, &len2), 0);
  assert_int_equal(len2, len);
  assert_memory_equal(enc2, enc, len);
  /* Damage: truncated bytes fail and leave the table unchanged. */
  assert_int_not_equal(producer_state_decode(&back, enc, len - 1, NULL, NULL), 0);
  assert_int_equal(back.n, ps.n);
  assert_int_equal(producer_state_decode(&back, enc, PRODUCER_STATE_MAX_BYTES + 1, NULL, NULL),
                   CAIRN_ETOOLARGE);
  enc[len - 1] ^= 0x40; /* a flipped bit in the payload */
  assert_int_equal(producer_state_decode(&back, enc, len, NULL, NULL), CAIRN_EBADCRC);
  enc[len - 1] ^= 0x40;
  enc[0] ^= 1;
  assert_int_equal(producer_state_decode(&back, enc, len, NULL, NULL), CAIRN_EBADMAGIC);
  enc[0] ^= 1;
  assert_int_equal(back.n, ps.n);
  free(enc);
  free(enc2);
  /* Ids out of order are refused. */
  struct producer_state bad;
  producer_state_init(&bad);
  assert_int_equal(offer(&bad, pb(2, 0, 0, 1, 5), &next, 1, &dup), 0);
  assert_int_equal(offer(&bad, pb(1, 0, 0, 1, 5), &next, 2, &dup), 0);
  struct producer_entry tmp = bad.entries[0];
  bad.entries[0] = bad.entries[1];
  bad.entries[1] = tmp;
  assert_int_equal(producer_state_encode(&bad, 0, 0, &enc, &len), 0);
  assert_int_equal(producer_state_decode(&back, enc, len, NULL, NULL), CAIRN_ECORRUPT);
  free(enc);
  /* An empty table round-trips too. */
  struct producer_state empty;
  producer_state_init(&empty);
  assert_int_equal(producer_state_encode(&empty, 0, 0, &enc, &len), 0);
  assert_int_equal(producer_state_decode(&back, enc, len, NULL, NULL), 0);
  assert_int_equal(back.n, 0);
  free(enc);
  producer_state_close(&bad);
  producer_state_close(&back);
  producer_state_close(&ps);
}

/* Random producers retrying, skipping and bumping epochs: replaying only the
 * appended batches (what a replica rebuilds from its log) gives the same
 * table, byte for byte. */
static void test_producer_state_rebuilt_from_appends_equals_live(void **state)
{
  (void)state;
  srand((unsigned)tu_seed(__func__));
  struct producer_state live, rebuilt;
  producer_state_init(&live);
  producer_state_init(&rebuilt);
  struct {
    struct producer_batch_info b;
    int64_t off;
    uint64_t idx;
  } *log = calloc(20000, sizeof *log);
  assert_non_null(log);
  size_t nlog = 0;
  int32_t seqs[8] = {0};
  int16_t epochs[8] = {0};
  int64_t next = 0;
  for (uint64_t idx = 1; idx <= 20000; idx++) {
    int p = rand() % 8;
    int32_t seq = seqs[p];
    switch (rand() % 6) {
    case 0:
      seq = seq > 2 ? seq - 1 - rand() % 2 : seq; /* a retry */
      break;
    case 1:
      seq += 1 + rand() % 3; /* skips ahead */
      break;
    case 2:
      if (rand() % 20 == 0) {
        epochs[p]++;
        seqs[p] = 0;
        seq = 0;
      }
      break;
    default:
      break;
    }
    struct producer_batch_info b = pb(100 + p, epochs[p], seq, 1 + rand() % 3, (int64_t)idx * 1000);
    bool dup;
    int64_t off;
    int rv = producer_state_check(&live, &b, &dup, &off);
    if (rv != 0 || dup) {
      continue;
    }
    assert_int_equal(producer_state_record(&live, &b, next, idx), 0);
    log[nlog].b = b;
    log[nlog].off = next;
    log[nlog].idx = idx;
    nlog++;
    next += b.record_count;
    seqs[p] = seq + b.record_count;
  }
  for (size_t i = 0; i < nlog; i++) {
    assert_int_equal(producer_state_record(&rebuilt, &log[i].b, log[i].off, log[i].idx), 0);
  }
  uint8_t *a = NULL, *b = NULL;
  size_t alen = 0, blen = 0;
  assert_int_equal(producer_state_encode(&live, next, 20000, &a, &alen), 0);
  assert_int_equal(producer_state_encode(&rebuilt, next, 20000, &b, &blen), 0);
  assert_int_equal(alen, blen);
  assert_memory_equal(a, b, alen);
  assert_true(nlog > 1000);
  free(a);
  free(b);
  free(log);
  producer_state_close(&live);
  producer_state_close(&rebuilt);
}

int main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_producer_state_duplicate_in_window_gets_original_offset),
      cmocka_unit_test(test_producer_state_refuses_a_sequence_that_skips_ahead),
      cmocka_unit_test(test_producer_state_unknown_producer_must_start_at_zero),
      cmocka_unit_test(test_producer_state_fences_older_epoch_and_resets_on_newer),
      cmocka_unit_test(test_producer_state_sequence_wraps_to_zero),
      cmocka_unit_test(test_producer_state_expires_idle_producers_by_batch_time),
      cmocka_unit_test(test_producer_state_count_bound_drops_least_recently_appended),
      cmocka_unit_test(test_producer_state_encoding_round_trips),
      cmocka_unit_test(test_producer_state_rebuilt_from_appends_equals_live),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
