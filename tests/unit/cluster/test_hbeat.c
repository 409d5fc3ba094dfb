/* test_hbeat.c - the coalesced heartbeat payload (hbeat.h): lists encode
 * and decode entry for entry, with the header's epoch, sequence and flags;
 * a frame of no entry (a beat that only vouches) is valid; a wrong
 * version, type, count or length is refused with its own code, never read
 * past; the beat period follows the idle heartbeat; the vouch table's
 * epochs (vouch.h) differ between peers and runs and change on a bump. */
#include "cluster/hbeat.h"
#include "cluster/vouch.h"
#include "common/err.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

/* Builds a payload of type with n entries (group i+1, term 7, index 100+i). */
static uint8_t *build(enum hbeat_type type, uint32_t n, size_t *len)
{
  struct hbeat_list l = {0};
  for (uint32_t i = 0; i < n; i++) {
    assert_int_equal(hbeat_list_add(&l, i + 1, 7, 100 + i), 0);
  }
  assert_int_equal(hbeat_list_reserve(&l, n), 0);
  struct hbeat_hdr h = {
      .type = type, .flags = HBEAT_F_RESET, .n = n, .epoch = 0x1122334455667788ull, .seq = 42};
  hbeat_encode_header(l.buf, &h);
  *len = HBEAT_HEADER + (size_t)n * HBEAT_ENTRY;
  return l.buf;
}

static void test_hbeat_payload_round_trips_every_entry(void **state)
{
  (void)state;
  size_t len;
  uint8_t *p = build(HBEAT_BEAT, 1000, &len);
  struct hbeat_hdr h;
  assert_int_equal(hbeat_decode(p, len, &h), 0);
  assert_int_equal(h.type, HBEAT_BEAT);
  assert_int_equal(h.n, 1000);
  assert_int_equal(h.flags, HBEAT_F_RESET);
  assert_true(h.epoch == 0x1122334455667788ull);
  assert_int_equal(h.seq, 42);
  uint32_t n = h.n;
  for (uint32_t i = 0; i < n; i++) {
    uint64_t g, t, x;
    hbeat_entry(p, i, &g, &t, &x);
    assert_int_equal(g, i + 1);
    assert_int_equal(t, 7);
    assert_int_equal(x, 100 + i);
  }
  free(p);
}

static void test_hbeat_malformed_payloads_are_refused(void **state)
{
  (void)state;
  size_t len;
  uint8_t *p = build(HBEAT_ACK, 3, &len);
  struct hbeat_hdr h;
  assert_int_equal(hbeat_decode(p, HBEAT_HEADER - 1, &h), CAIRN_EBADLEN);
  assert_int_equal(hbeat_decode(p, len - 1, &h), CAIRN_EBADLEN); /* cut */
  p[0] = HBEAT_VERSION - 1; /* version 1 (every beat named every group) */
  assert_int_equal(hbeat_decode(p, len, &h), CAIRN_EUNSUPPORTED);
  p[0] = HBEAT_VERSION;
  p[1] = 9;
  assert_int_equal(hbeat_decode(p, len, &h), CAIRN_EUNSUPPORTED);
  p[1] = 0;
  assert_int_equal(hbeat_decode(p, len, &h), CAIRN_EUNSUPPORTED);
  struct hbeat_hdr w = {.type = HBEAT_NACK, .n = 4}; /* claims more than it holds */
  hbeat_encode_header(p, &w);
  assert_int_equal(hbeat_decode(p, len, &h), CAIRN_EBADLEN);
  w.n = 0; /* nothing named: valid, and then exactly a header long */
  hbeat_encode_header(p, &w);
  assert_int_equal(hbeat_decode(p, HBEAT_HEADER, &h), 0);
  assert_int_equal(h.n, 0);
  assert_int_equal(hbeat_decode(p, len, &h), CAIRN_EBADLEN);
  w.n = HBEAT_MAX_GROUPS + 1;
  hbeat_encode_header(p, &w);
  assert_int_equal(hbeat_decode(p, len, &h), CAIRN_EBADLEN);
  w.n = 3;
  hbeat_encode_header(p, &w);
  assert_int_equal(hbeat_decode(p, len, &h), 0);
  assert_int_equal(h.type, HBEAT_NACK);
  free(p);
}

static void test_hbeat_period_is_half_the_idle_heartbeat(void **state)
{
  (void)state;
  assert_int_equal(hbeat_period_ms(100, 400), 200); /* the default timings */
  assert_int_equal(hbeat_period_ms(100, 150), 100); /* never below the heartbeat */
  assert_int_equal(hbeat_period_ms(100, 0), 0);     /* leaders never quiesce */
}

static void test_vouch_epochs_differ_by_peer_and_run_and_change_on_bump(void **state)
{
  (void)state;
  struct vouch_table a, b;
  vouch_init(&a, 1);
  vouch_init(&b, 2); /* the same node in another run */
  struct vouch_peer *a2 = vouch_add(&a, 2);
  assert_non_null(a2);
  uint64_t e2 = a2->out_epoch;
  struct vouch_peer *a3 = vouch_add(&a, 3);
  assert_non_null(a3);
  a2 = vouch_get(&a, 2); /* the table may have moved */
  assert_true(e2 != 0 && a3->out_epoch != 0);
  assert_true(e2 != a3->out_epoch);
  assert_true(vouch_add(&b, 2)->out_epoch != e2);
  assert_ptr_equal(vouch_add(&a, 2), a2); /* not added twice */
  /* Revocations wait for the next beat; a bump drops them with the
   * acceptances they would have revoked, and asks for a full beat. */
  vouch_revoke(&a, 2, 77, 5);
  assert_int_equal(a2->revokes.n, 1);
  assert_true(a2->revokes.v[0].index == VOUCH_REVOKED);
  vouch_revoke(&a, 9, 77, 5); /* never beaten: nothing to revoke */
  assert_null(vouch_get(&a, 9));
  a2->answered_ms = 1234;
  vouch_bump(a2);
  assert_true(a2->out_epoch != e2 && a2->out_epoch != 0);
  assert_true(a2->out_bumped);
  assert_int_equal(a2->revokes.n, 0);
  assert_int_equal(a2->answered_ms, 0);
  vouch_nack(&a, 3, 78, 6, 9);
  assert_int_equal(a3->nacks.n, 1);
  assert_int_equal(vouch_to_name(&a, 78), 0);
  assert_int_equal(a.nto_name, 1);
  vouch_free(&a);
  vouch_free(&b);
}

int main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_hbeat_payload_round_trips_every_entry),
      cmocka_unit_test(test_hbeat_malformed_payloads_are_refused),
      cmocka_unit_test(test_hbeat_period_is_half_the_idle_heartbeat),
      cmocka_unit_test(test_vouch_epochs_differ_by_peer_and_run_and_change_on_bump),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
