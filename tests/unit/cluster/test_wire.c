/* test_wire.c - the cluster port's byte formats: the connection preamble
 * (transport.h) and the catch-up fetch frames (fetch_proto.h). Golden bytes
 * pin the layouts; every malformed variant is refused with its own code. */
#include "cluster/fetch_proto.h"
#include "cluster/transport.h"
#include "common/err.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

/* Preamble of (kind 1, group 7, sender 2, "10.0.0.1:9"), laid out by hand. */
static const uint8_t golden_preamble[] = {
    0x43, 0x52, 0x4e, 0x31,                         /* "CRN1" */
    0x01, 0x00,                                     /* version 1 */
    0x01, 0x00,                                     /* kind: raft */
    0x07, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, /* group 7 */
    0x02, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, /* sender 2 */
    0x0a, 0x00,                                     /* address length 10 */
    '1',  '0',  '.',  '0',  '.',  '0',  '.',  '1',  ':', '9',
};

static void test_preamble_matches_documented_layout_and_round_trips(void **state)
{
  uint8_t buf[TRANSPORT_PREAMBLE_MAX];
  int n = transport_preamble_encode(buf, TRANSPORT_KIND_RAFT, 7, 2, "10.0.0.1:9");
  assert_int_equal(n, sizeof golden_preamble + 4);
  assert_memory_equal(buf, golden_preamble, sizeof golden_preamble);
  uint16_t kind;
  uint64_t group, sender;
  char addr[TRANSPORT_ADDRESS_MAX + 1];
  assert_int_equal(transport_preamble_decode(buf, (size_t)n, &kind, &group, &sender, addr), n);
  assert_int_equal(kind, TRANSPORT_KIND_RAFT);
  assert_int_equal(group, 7);
  assert_int_equal(sender, 2);
  assert_string_equal(addr, "10.0.0.1:9");
  /* Every proper prefix asks for more bytes. */
  for (int k = 0; k < n; k++) {
    assert_int_equal(transport_preamble_decode(buf, (size_t)k, &kind, &group, &sender, addr), 0);
  }
}

static void test_preamble_rejects_each_malformation(void **state)
{
  uint8_t buf[TRANSPORT_PREAMBLE_MAX];
  uint16_t kind;
  uint64_t group, sender;
  char addr[TRANSPORT_ADDRESS_MAX + 1];
  int n = transport_preamble_encode(buf, TRANSPORT_KIND_FETCH, 1, 1, "h:1");
  buf[0] = 'G'; /* an HTTP client, say */
  assert_int_equal(transport_preamble_decode(buf, 4, &kind, &group, &sender, addr),
                   CAIRN_EBADMAGIC);
  n = transport_preamble_encode(buf, TRANSPORT_KIND_FETCH, 1, 1, "h:1");
  buf[4] = 9; /* version */
  assert_int_equal(transport_preamble_decode(buf, (size_t)n, &kind, &group, &sender, addr),
                   CAIRN_EUNSUPPORTED);
  n = transport_preamble_encode(buf, 4, 1, 1, "h:1"); /* unknown kind */
  assert_int_equal(transport_preamble_decode(buf, (size_t)n, &kind, &group, &sender, addr),
                   CAIRN_EUNSUPPORTED);
  n = transport_preamble_encode(buf, TRANSPORT_KIND_RAFT, 1, 1, "h:1");
  buf[24] = 0; /* empty address */
  buf[25] = 0;
  assert_int_equal(transport_preamble_decode(buf, (size_t)n, &kind, &group, &sender, addr),
                   CAIRN_EBADLEN);
  n = transport_preamble_encode(buf, TRANSPORT_KIND_RAFT, 1, 1, "h:1");
  buf[n - 1] ^= 0x80; /* checksum */
  assert_int_equal(transport_preamble_decode(buf, (size_t)n, &kind, &group, &sender, addr),
                   CAIRN_EBADCRC);
  char long_addr[TRANSPORT_ADDRESS_MAX + 2];
  memset(long_addr, 'a', sizeof long_addr - 1);
  long_addr[sizeof long_addr - 1] = '\0';
  assert_int_equal(transport_preamble_encode(buf, TRANSPORT_KIND_RAFT, 1, 1, long_addr),
                   CAIRN_EINVAL);
  assert_int_equal(transport_preamble_encode(buf, TRANSPORT_KIND_RAFT, 1, 1, ""), CAIRN_EINVAL);
}

static void test_fetch_frames_round_trip_and_refuse_damage(void **state)
{
  uint8_t q[FETCH_REQUEST_SIZE];
  struct fetch_request in = {.offset = 123456789012, .max_bytes = 1 << 20}, out;
  fetch_request_encode(&in, q);
  assert_memory_equal(q, "CFQ1", 4);
  assert_int_equal(fetch_request_decode(q, &out), 0);
  assert_int_equal(out.kind, FETCH_KIND_BATCHES);
  assert_int_equal(out.offset, in.offset);
  assert_int_equal(out.max_bytes, in.max_bytes);
  struct fetch_request tin = {.kind = FETCH_KIND_TABLE}, tout = {.kind = FETCH_KIND_BATCHES};
  fetch_request_encode(&tin, q);
  assert_memory_equal(q, "CFT1", 4); /* a peer without tables refuses the magic */
  assert_int_equal(fetch_request_decode(q, &tout), 0);
  assert_int_equal(tout.kind, FETCH_KIND_TABLE);
  fetch_request_encode(&in, q);
  q[10] ^= 1;
  assert_int_equal(fetch_request_decode(q, &out), CAIRN_EBADCRC);
  q[0] = 'X';
  assert_int_equal(fetch_request_decode(q, &out), CAIRN_EBADMAGIC);

  uint8_t r[FETCH_RESPONSE_SIZE];
  struct fetch_response rin = {.status = CAIRN_EOFFSET, .log_start = 5, .log_next = 99,
                               .nbytes = 0, .payload_crc = 0},
                        rout;
  fetch_response_encode(&rin, r);
  assert_memory_equal(r, "CFR1", 4);
  assert_int_equal(fetch_response_decode(r, &rout), 0);
  assert_int_equal(rout.status, CAIRN_EOFFSET);
  assert_int_equal(rout.log_start, 5);
  assert_int_equal(rout.log_next, 99);
  rin.nbytes = FETCH_MAX_PAYLOAD + 1; /* a peer may not make us allocate this */
  fetch_response_encode(&rin, r);
  assert_int_equal(fetch_response_decode(r, &rout), CAIRN_ETOOLARGE);
  r[9] ^= 1;
  assert_int_equal(fetch_response_decode(r, &rout), CAIRN_EBADCRC);
}

int main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_preamble_matches_documented_layout_and_round_trips),
      cmocka_unit_test(test_preamble_rejects_each_malformation),
      cmocka_unit_test(test_fetch_frames_round_trip_and_refuse_damage),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
