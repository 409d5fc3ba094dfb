/* test_hbeat.c - the coalesced heartbeat payload (hbeat.h): lists encode
 * and decode entry for entry; a wrong version, type, count or length is
 * refused with its own code, never read past; the beat period follows the
 * idle heartbeat. */
#include "cluster/hbeat.h"
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
  hbeat_encode_header(l.buf, type, n);
  *len = HBEAT_HEADER + (size_t)n * HBEAT_ENTRY;
  return l.buf;
}

static void test_hbeat_payload_round_trips_every_entry(void **state)
{
  (void)state;
  size_t len;
  uint8_t *p = build(HBEAT_BEAT, 1000, &len);
  enum hbeat_type type;
  uint32_t n;
  assert_int_equal(hbeat_decode(p, len, &type, &n), 0);
  assert_int_equal(type, HBEAT_BEAT);
  assert_int_equal(n, 1000);
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
  enum hbeat_type type;
  uint32_t n;
  assert_int_equal(hbeat_decode(p, HBEAT_HEADER - 1, &type, &n), CAIRN_EBADLEN);
  assert_int_equal(hbeat_decode(p, len - 1, &type, &n), CAIRN_EBADLEN); /* cut */
  p[0] = HBEAT_VERSION + 1;
  assert_int_equal(hbeat_decode(p, len, &type, &n), CAIRN_EUNSUPPORTED);
  p[0] = HBEAT_VERSION;
  p[1] = 9;
  assert_int_equal(hbeat_decode(p, len, &type, &n), CAIRN_EUNSUPPORTED);
  p[1] = 0;
  assert_int_equal(hbeat_decode(p, len, &type, &n), CAIRN_EUNSUPPORTED);
  hbeat_encode_header(p, HBEAT_NACK, 4); /* claims more than it holds */
  assert_int_equal(hbeat_decode(p, len, &type, &n), CAIRN_EBADLEN);
  hbeat_encode_header(p, HBEAT_NACK, 0);
  assert_int_equal(hbeat_decode(p, HBEAT_HEADER, &type, &n), CAIRN_EBADLEN);
  hbeat_encode_header(p, HBEAT_NACK, HBEAT_MAX_GROUPS + 1);
  assert_int_equal(hbeat_decode(p, len, &type, &n), CAIRN_EBADLEN);
  hbeat_encode_header(p, HBEAT_NACK, 3);
  assert_int_equal(hbeat_decode(p, len, &type, &n), 0);
  assert_int_equal(type, HBEAT_NACK);
  free(p);
}

static void test_hbeat_period_is_half_the_idle_heartbeat(void **state)
{
  (void)state;
  assert_int_equal(hbeat_period_ms(100, 400), 200); /* the default timings */
  assert_int_equal(hbeat_period_ms(100, 150), 100); /* never below the heartbeat */
  assert_int_equal(hbeat_period_ms(100, 0), 0);     /* leaders never quiesce */
}

int main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_hbeat_payload_round_trips_every_entry),
      cmocka_unit_test(test_hbeat_malformed_payloads_are_refused),
      cmocka_unit_test(test_hbeat_period_is_half_the_idle_heartbeat),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
