/* test_frame.c - the client port's frame: golden bytes, every decode
 * result, frames split at every byte, and encode/decode round trips. */
#include "common/err.h"
#include "net/frame.h"
#include "testutil.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

/* Envelope {correlation_id 1, api API_HELLO} and payload "abc", by hand. */
static const uint8_t golden_frame[] = {
    0x00, 0x00, 0x00, 0x0b, /* L = 11: E field + envelope + payload */
    0x00, 0x00, 0x00, 0x04, /* E = 4 */
    0x08, 0x01,             /* field 1 (correlation_id), varint 1 */
    0x10, 0x01,             /* field 2 (api), varint 1 = API_HELLO */
    'a',  'b',  'c',        /* payload */
};

static void put_u32be(uint8_t *p, uint32_t v)
{
  p[0] = (uint8_t)(v >> 24);
  p[1] = (uint8_t)(v >> 16);
  p[2] = (uint8_t)(v >> 8);
  p[3] = (uint8_t)v;
}

static void test_frame_encode_matches_golden_bytes(void **state)
{
  Cairn__Client__Envelope env = CAIRN__CLIENT__ENVELOPE__INIT;
  env.correlation_id = 1;
  env.api = CAIRN__CLIENT__API__API_HELLO;
  struct iovec iov = {.iov_base = "abc", .iov_len = 3};
  uint8_t *hdr;
  size_t hdr_len;
  assert_int_equal(frame_encode(&env, &iov, 1, &hdr, &hdr_len), 0);
  assert_int_equal(hdr_len, 12);
  assert_int_equal(frame_header_size(&env), 12);
  assert_memory_equal(hdr, golden_frame, 12);
  free(hdr);
}

static void test_frame_decodes_golden_bytes_and_envelope(void **state)
{
  struct frame f;
  assert_int_equal(frame_decode(golden_frame, sizeof golden_frame, 1024, &f), FRAME_WHOLE);
  assert_int_equal(f.size, sizeof golden_frame);
  assert_int_equal(f.length, 11);
  assert_ptr_equal(f.envelope, golden_frame + 8);
  assert_int_equal(f.envelope_len, 4);
  assert_ptr_equal(f.payload, golden_frame + 12);
  assert_int_equal(f.payload_len, 3);
  Cairn__Client__Envelope *env;
  assert_int_equal(frame_unpack_envelope(&f, &env), 0);
  assert_int_equal(env->correlation_id, 1);
  assert_int_equal(env->api, CAIRN__CLIENT__API__API_HELLO);
  assert_int_equal(env->body_case, CAIRN__CLIENT__ENVELOPE__BODY__NOT_SET);
  cairn__client__envelope__free_unpacked(env, NULL);
}

static void test_frame_every_prefix_needs_exactly_the_missing_bytes(void **state)
{
  for (size_t k = 0; k < sizeof golden_frame; k++) {
    struct frame f;
    assert_int_equal(frame_decode(golden_frame, k, 1024, &f), FRAME_NEED_MORE);
    size_t expect = k < FRAME_HEADER_SIZE ? FRAME_HEADER_SIZE - k : sizeof golden_frame - k;
    assert_int_equal(f.need, expect);
    assert_int_equal(f.length, k >= 4 ? 11 : 0);
  }
}

/* Feeding a stream of frames one byte at a time yields each frame once,
 * whole and unchanged, at exactly the byte that completes it. */
static void test_frame_split_byte_by_byte_stream(void **state)
{
  uint64_t seed = tu_seed(__func__);
  uint64_t rng = seed;
  enum { NFRAMES = 50 };
  uint8_t *stream = NULL;
  size_t slen = 0;
  size_t ends[NFRAMES];
  size_t plens[NFRAMES];
  for (int i = 0; i < NFRAMES; i++) {
    Cairn__Client__Envelope env = CAIRN__CLIENT__ENVELOPE__INIT;
    env.correlation_id = (uint64_t)i + 100;
    env.api = CAIRN__CLIENT__API__API_FETCH;
    size_t plen = tu_rand(&rng) % 300;
    uint8_t *payload = malloc(plen + 1);
    for (size_t j = 0; j < plen; j++) {
      payload[j] = (uint8_t)(i + j);
    }
    struct iovec iov = {.iov_base = payload, .iov_len = plen};
    uint8_t *hdr;
    size_t hdr_len;
    assert_int_equal(frame_encode(&env, &iov, 1, &hdr, &hdr_len), 0);
    stream = realloc(stream, slen + hdr_len + plen);
    memcpy(stream + slen, hdr, hdr_len);
    memcpy(stream + slen + hdr_len, payload, plen);
    slen += hdr_len + plen;
    ends[i] = slen;
    plens[i] = plen;
    free(hdr);
    free(payload);
  }
  size_t start = 0;
  int got = 0;
  for (size_t have = 0; have <= slen; have++) {
    struct frame f;
    int rv = frame_decode(stream + start, have - start, 1 << 20, &f);
    if (rv == FRAME_NEED_MORE) {
      assert_true(got < NFRAMES);
      assert_true(have < ends[got]);
      continue;
    }
    assert_int_equal(rv, FRAME_WHOLE);
    assert_int_equal(have, ends[got]);
    assert_int_equal(f.payload_len, plens[got]);
    for (size_t j = 0; j < f.payload_len; j++) {
      assert_int_equal(f.payload[j], (uint8_t)(got + j));
    }
    Cairn__Client__Envelope *env;
    assert_int_equal(frame_unpack_envelope(&f, &env), 0);
    assert_int_equal(env->correlation_id, (uint64_t)got + 100);
    cairn__client__envelope__free_unpacked(env, NULL);
    start += f.size;
    got++;
  }
  assert_int_equal(got, NFRAMES);
  free(stream);
}

static void test_frame_too_large_is_reported_from_the_length_field_alone(void **state)
{
  uint8_t b[4];
  put_u32be(b, 1025);
  struct frame f;
  assert_int_equal(frame_decode(b, 4, 1024, &f), CAIRN_ETOOLARGE);
  assert_int_equal(f.length, 1025);
  put_u32be(b, 1024); /* exactly the limit is fine */
  assert_int_equal(frame_decode(b, 4, 1024, &f), FRAME_NEED_MORE);
  assert_int_equal(f.need, 4);
  put_u32be(b, 0xffffffffu);
  assert_int_equal(frame_decode(b, 4, UINT32_MAX, &f), CAIRN_ETOOLARGE); /* capped at 1 GiB */
}

static void test_frame_zero_length_is_its_own_result(void **state)
{
  uint8_t b[8] = {0};
  struct frame f;
  assert_int_equal(frame_decode(b, 4, 1024, &f), CAIRN_EFRAMEEMPTY);
  assert_int_equal(frame_decode(b, 8, 1024, &f), CAIRN_EFRAMEEMPTY);
}

static void test_frame_rejects_lengths_that_cannot_hold_the_envelope(void **state)
{
  uint8_t b[16] = {0};
  struct frame f;
  for (uint32_t l = 1; l < 4; l++) {
    put_u32be(b, l);
    assert_int_equal(frame_decode(b, 4, 1024, &f), CAIRN_EBADFRAME);
  }
  put_u32be(b, 8);
  put_u32be(b + 4, 5); /* E > L - 4 = 4: known from the header alone */
  assert_int_equal(frame_decode(b, 8, 1024, &f), CAIRN_EBADFRAME);
  put_u32be(b + 4, 0xffffffffu);
  assert_int_equal(frame_decode(b, 8, 1024, &f), CAIRN_EBADFRAME);
  put_u32be(b + 4, 4); /* E = L - 4: no payload */
  assert_int_equal(frame_decode(b, 12, 1024, &f), FRAME_WHOLE);
  assert_int_equal(f.envelope_len, 4);
  assert_int_equal(f.payload_len, 0);
}

static void test_frame_minimal_frame_is_an_empty_envelope(void **state)
{
  uint8_t b[8] = {0, 0, 0, 4, 0, 0, 0, 0};
  struct frame f;
  assert_int_equal(frame_decode(b, 8, 1024, &f), FRAME_WHOLE);
  assert_int_equal(f.size, 8);
  Cairn__Client__Envelope *env;
  assert_int_equal(frame_unpack_envelope(&f, &env), 0);
  assert_int_equal(env->correlation_id, 0);
  assert_int_equal(env->api, CAIRN__CLIENT__API__API_NONE);
  cairn__client__envelope__free_unpacked(env, NULL);
}

static void test_frame_envelope_garbage_does_not_unpack(void **state)
{
  /* Field 1 with wire type 7 (invalid), then a truncated varint. */
  static const uint8_t bad[][3] = {{0x0f, 0x00, 0x00}, {0x08, 0xff, 0xff}, {0x52, 0x05, 0x00}};
  for (size_t i = 0; i < 3; i++) {
    uint8_t b[11];
    put_u32be(b, 7);
    put_u32be(b + 4, 3);
    memcpy(b + 8, bad[i], 3);
    struct frame f;
    assert_int_equal(frame_decode(b, sizeof b, 1024, &f), FRAME_WHOLE);
    Cairn__Client__Envelope *env = (void *)1;
    assert_int_equal(frame_unpack_envelope(&f, &env), CAIRN_EBADENVELOPE);
    assert_null(env);
  }
}

/* protobuf-c takes an overlong field number 0 (0x80 0x00) as an unknown
 * field that would pack into bytes no parser accepts: refused. */
static void test_frame_envelope_with_field_number_zero_is_refused(void **state)
{
  uint8_t top[] = {0, 0, 0, 8, 0, 0, 0, 4, 0x80, 0x00, 0xc0, 0x13};
  struct frame f;
  assert_int_equal(frame_decode(top, sizeof top, 1024, &f), FRAME_WHOLE);
  Cairn__Client__Envelope *env;
  assert_int_equal(frame_unpack_envelope(&f, &env), CAIRN_EBADENVELOPE);
  /* Nested: hello_req (field 10) holding the same field. */
  uint8_t nested[] = {0, 0, 0, 10, 0, 0, 0, 6, 0x52, 0x04, 0x80, 0x00, 0xc0, 0x13};
  assert_int_equal(frame_decode(nested, sizeof nested, 1024, &f), FRAME_WHOLE);
  assert_int_equal(frame_unpack_envelope(&f, &env), CAIRN_EBADENVELOPE);
  /* The same hello_req with a real unknown field (number 15) is fine. */
  uint8_t unknown[] = {0, 0, 0, 10, 0, 0, 0, 6, 0x52, 0x04, 0x78, 0x01, 0x1a, 0x00};
  assert_int_equal(frame_decode(unknown, sizeof unknown, 1024, &f), FRAME_WHOLE);
  assert_int_equal(frame_unpack_envelope(&f, &env), 0);
  assert_int_equal(env->body_case, CAIRN__CLIENT__ENVELOPE__BODY_HELLO_REQ);
  cairn__client__envelope__free_unpacked(env, NULL);
}

static void test_frame_round_trips_a_produce_request_with_payload_regions(void **state)
{
  Cairn__Client__ProducePartition pp = CAIRN__CLIENT__PRODUCE_PARTITION__INIT;
  pp.topic = "orders";
  pp.partition = 3;
  uint32_t lens[2] = {5, 7};
  pp.batch_lengths = lens;
  pp.n_batch_lengths = 2;
  Cairn__Client__ProducePartition *pps[1] = {&pp};
  Cairn__Client__ProduceRequest req = CAIRN__CLIENT__PRODUCE_REQUEST__INIT;
  req.timeout_ms = 1500;
  req.partitions = pps;
  req.n_partitions = 1;
  Cairn__Client__Envelope env = CAIRN__CLIENT__ENVELOPE__INIT;
  env.correlation_id = 0x123456789abcULL;
  env.api = CAIRN__CLIENT__API__API_PRODUCE;
  env.api_version = 2;
  env.body_case = CAIRN__CLIENT__ENVELOPE__BODY_PRODUCE_REQ;
  env.produce_req = &req;
  struct iovec iov[2] = {{.iov_base = "11111", .iov_len = 5},
                         {.iov_base = "2222222", .iov_len = 7}};
  assert_int_equal(frame_iov_len(iov, 2), 12);
  uint8_t *hdr;
  size_t hdr_len;
  assert_int_equal(frame_encode(&env, iov, 2, &hdr, &hdr_len), 0);
  uint8_t wire[512];
  memcpy(wire, hdr, hdr_len);
  memcpy(wire + hdr_len, "11111", 5);
  memcpy(wire + hdr_len + 5, "2222222", 7);
  free(hdr);
  struct frame f;
  assert_int_equal(frame_decode(wire, hdr_len + 12, FRAME_DEFAULT_MAX_BYTES, &f), FRAME_WHOLE);
  assert_int_equal(f.size, hdr_len + 12);
  assert_int_equal(f.payload_len, 12);
  assert_memory_equal(f.payload, "111112222222", 12);
  Cairn__Client__Envelope *out;
  assert_int_equal(frame_unpack_envelope(&f, &out), 0);
  assert_int_equal(out->correlation_id, 0x123456789abcULL);
  assert_int_equal(out->api, CAIRN__CLIENT__API__API_PRODUCE);
  assert_int_equal(out->api_version, 2);
  assert_int_equal(out->body_case, CAIRN__CLIENT__ENVELOPE__BODY_PRODUCE_REQ);
  assert_int_equal(out->produce_req->timeout_ms, 1500);
  assert_int_equal(out->produce_req->n_partitions, 1);
  assert_string_equal(out->produce_req->partitions[0]->topic, "orders");
  assert_int_equal(out->produce_req->partitions[0]->n_batch_lengths, 2);
  assert_int_equal(out->produce_req->partitions[0]->batch_lengths[1], 7);
  cairn__client__envelope__free_unpacked(out, NULL);
}

static void test_frame_encode_refuses_a_payload_past_the_hard_limit(void **state)
{
  Cairn__Client__Envelope env = CAIRN__CLIENT__ENVELOPE__INIT;
  uint8_t buf[64];
  assert_int_equal(frame_encode_header(&env, FRAME_MAX_BYTES_LIMIT, buf), CAIRN_ETOOLARGE);
  assert_int_equal(frame_encode_header(&env, FRAME_MAX_BYTES_LIMIT - 4, buf), 0);
}

int main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_frame_encode_matches_golden_bytes),
      cmocka_unit_test(test_frame_decodes_golden_bytes_and_envelope),
      cmocka_unit_test(test_frame_every_prefix_needs_exactly_the_missing_bytes),
      cmocka_unit_test(test_frame_split_byte_by_byte_stream),
      cmocka_unit_test(test_frame_too_large_is_reported_from_the_length_field_alone),
      cmocka_unit_test(test_frame_zero_length_is_its_own_result),
      cmocka_unit_test(test_frame_rejects_lengths_that_cannot_hold_the_envelope),
      cmocka_unit_test(test_frame_minimal_frame_is_an_empty_envelope),
      cmocka_unit_test(test_frame_envelope_garbage_does_not_unpack),
      cmocka_unit_test(test_frame_envelope_with_field_number_zero_is_refused),
      cmocka_unit_test(test_frame_round_trips_a_produce_request_with_payload_regions),
      cmocka_unit_test(test_frame_encode_refuses_a_payload_past_the_hard_limit),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
