/* test_jsonw.c - the one JSON writer (common/jsonw.c): every control byte,
 * quotes and backslashes escaped; text that is not UTF-8 never written as
 * it is (U+FFFD in strings, null plus base64 in byte members); int64 and
 * uint64 extremes exact; base64 of every remainder; compact and pretty
 * layout; misuse and sink failures latched. Output is read back with
 * jansson's parser, including seeded random documents of random bytes. */
#include "common/b64.h"
#include "common/err.h"
#include "common/jsonw.h"
#include "testutil.h"

#include <errno.h>
#include <jansson.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

/* A growing output buffer; fail_after bytes accepted, then the sink fails. */
struct out {
  char *p;
  size_t len, cap;
  size_t fail_after;
  int calls;
};

static int out_sink(const char *p, size_t len, void *data)
{
  struct out *o = data;
  o->calls++;
  if (o->len + len > o->fail_after) {
    return -1;
  }
  if (o->len + len + 1 > o->cap) {
    o->cap = (o->len + len + 1) * 2;
    o->p = realloc(o->p, o->cap);
    assert_non_null(o->p);
  }
  memcpy(o->p + o->len, p, len);
  o->len += len;
  o->p[o->len] = '\0';
  return 0;
}

static void out_init(struct out *o)
{
  memset(o, 0, sizeof *o);
  o->fail_after = SIZE_MAX;
}

/* Parses o's text with jansson (any top-level value; integers beyond
 * int64, which jansson's parser refuses, as reals); the text must be JSON. */
static json_t *out_parse(const struct out *o)
{
  json_error_t e;
  json_t *v =
      json_loadb(o->p, o->len, JSON_DECODE_ANY | JSON_ALLOW_NUL | JSON_DECODE_INT_AS_REAL, &e);
  if (v == NULL) {
    fail_msg("not JSON (%s at %d): %.*s", e.text, e.position, (int)o->len, o->p);
  }
  return v;
}

/* The string value written for s[0..len), as text. */
static void write_string(struct out *o, const void *s, size_t len)
{
  out_init(o);
  struct jsonw w;
  jsonw_init(&w, out_sink, o, false);
  jsonw_stringn(&w, s, len);
  assert_int_equal(w.err, 0);
}

static void test_jsonw_escapes_every_control_byte_quote_and_backslash(void **state)
{
  (void)state;
  struct out o;
  write_string(&o, "a\"b\\c/\n\r\t\b\f", 11);
  assert_string_equal(o.p, "\"a\\\"b\\\\c/\\n\\r\\t\\b\\f\"");
  free(o.p);

  /* Each of 0x00..0x1f alone: escaped (no raw control byte left) and read
   * back as itself. */
  for (int c = 0; c < 0x20; c++) {
    char in = (char)c;
    write_string(&o, &in, 1);
    for (size_t i = 0; i < o.len; i++) {
      assert_true((unsigned char)o.p[i] >= 0x20);
    }
    json_t *v = out_parse(&o);
    assert_int_equal(json_string_length(v), 1);
    assert_int_equal(json_string_value(v)[0], c);
    json_decref(v);
    free(o.p);
  }
  write_string(&o, NULL, 0); /* no bytes at all */
  assert_string_equal(o.p, "\"\"");
  free(o.p);
  write_string(&o, "\x01\x1f", 2);
  assert_string_equal(o.p, "\"\\u0001\\u001F\"");
  free(o.p);
}

static void test_jsonw_keeps_utf8_and_replaces_bytes_that_are_not(void **state)
{
  (void)state;
  struct out o;
  write_string(&o, "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80", 14);
  assert_string_equal(o.p, "\"caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80\"");
  free(o.p);

  static const struct {
    const char *in;
    size_t len;
    const char *want;
  } cases[] = {
      {"\xff", 1, "\"\xef\xbf\xbd\""},
      {"a\x80z", 3, "\"a\xef\xbf\xbdz\""},
      {"\xc0\xaf", 2, "\"\xef\xbf\xbd\xef\xbf\xbd\""},                 /* overlong '/' */
      {"\xed\xa0\x80", 3, "\"\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\""}, /* surrogate */
      {"ok\xc3", 3, "\"ok\xef\xbf\xbd\""},                             /* cut short */
      {"\xf4\x90\x80\x80", 4, "\"\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\""},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    write_string(&o, cases[i].in, cases[i].len);
    assert_string_equal(o.p, cases[i].want);
    json_decref(out_parse(&o));
    free(o.p);
  }
  assert_true(jsonw_is_utf8("a\0b", 3));
  assert_true(jsonw_is_utf8("\xf4\x8f\xbf\xbf", 4));
  assert_false(jsonw_is_utf8("\xe0\x80\xaf", 3));
  assert_false(jsonw_is_utf8("\xe2\x28\xa1", 3));
}

/* Bytes members as the CLI has always written them: text, or null and
 * base64 beside it; NULL data is null alone. */
static void test_jsonw_bytes_member_writes_text_or_null_plus_base64(void **state)
{
  (void)state;
  struct out o;
  out_init(&o);
  struct jsonw w;
  jsonw_init(&w, out_sink, &o, false);
  jsonw_object_begin(&w);
  jsonw_bytes_member(&w, "key", NULL, 0);
  jsonw_bytes_member(&w, "empty", "", 0);
  jsonw_bytes_member(&w, "text", "h\xc3\xa9\0", 4);
  jsonw_bytes_member(&w, "value", "\xff\x00\xfe", 3);
  jsonw_object_end(&w);
  assert_int_equal(jsonw_end(&w), 0);
  assert_string_equal(o.p, "{\"key\":null,\"empty\":\"\",\"text\":\"h\xc3\xa9\\u0000\","
                           "\"value\":null,\"value_base64\":\"/wD+\"}\n");
  json_decref(out_parse(&o));
  free(o.p);
}

static void test_jsonw_writes_int64_and_uint64_extremes_exactly(void **state)
{
  (void)state;
  struct out o;
  out_init(&o);
  struct jsonw w;
  jsonw_init(&w, out_sink, &o, false);
  jsonw_array_begin(&w);
  jsonw_i64(&w, INT64_MIN);
  jsonw_i64(&w, INT64_MAX);
  jsonw_i64(&w, -1);
  jsonw_i64(&w, 0);
  jsonw_u64(&w, UINT64_MAX);
  jsonw_u64(&w, (uint64_t)INT64_MAX + 1);
  jsonw_bool(&w, true);
  jsonw_bool(&w, false);
  jsonw_null(&w);
  jsonw_array_end(&w);
  assert_int_equal(jsonw_end(&w), 0);
  assert_string_equal(o.p, "[-9223372036854775808,9223372036854775807,-1,0,"
                           "18446744073709551615,9223372036854775808,true,false,null]\n");
  free(o.p);
}

/* The base64 of in[0..len) as jsonw writes it, decoded again. */
static void check_base64_round_trip(const uint8_t *in, size_t len)
{
  struct out o;
  out_init(&o);
  struct jsonw w;
  jsonw_init(&w, out_sink, &o, false);
  jsonw_base64(&w, in, len);
  assert_int_equal(w.err, 0);
  assert_int_equal(o.len, B64_ENCODED_LEN(len) + 2);
  assert_true(o.p[0] == '"' && o.p[o.len - 1] == '"');
  /* the same text as b64_encode gives in one piece */
  char *whole = malloc(B64_ENCODED_LEN(len) + 1);
  assert_non_null(whole);
  assert_int_equal(b64_encode(in, len, whole), B64_ENCODED_LEN(len));
  assert_memory_equal(whole, o.p + 1, B64_ENCODED_LEN(len));
  uint8_t *back = malloc(len + 1);
  assert_non_null(back);
  size_t got = 99;
  assert_int_equal(b64_decode(o.p + 1, o.len - 2, back, len, &got), 0); /* cap: exactly len */
  assert_int_equal(got, len);
  if (len > 0) {
    assert_memory_equal(back, in, len);
    /* one byte less room is too little */
    assert_int_equal(b64_decode(o.p + 1, o.len - 2, back, len - 1, &got), CAIRN_ETOOLARGE);
  }
  free(back);
  free(whole);
  free(o.p);
}

static void test_jsonw_base64_round_trips_every_remainder(void **state)
{
  (void)state;
  static const struct {
    const char *in, *out;
  } rfc4648[] = {{"", ""},
                 {"f", "Zg=="},
                 {"fo", "Zm8="},
                 {"foo", "Zm9v"},
                 {"foob", "Zm9vYg=="},
                 {"fooba", "Zm9vYmE="},
                 {"foobar", "Zm9vYmFy"}};
  for (size_t i = 0; i < sizeof rfc4648 / sizeof rfc4648[0]; i++) {
    char text[16];
    assert_int_equal(b64_encode(rfc4648[i].in, strlen(rfc4648[i].in), text),
                     strlen(rfc4648[i].out));
    assert_string_equal(text, rfc4648[i].out);
    check_base64_round_trip((const uint8_t *)rfc4648[i].in, strlen(rfc4648[i].in));
  }
  /* Lengths 0, 1, 2 mod 3 around the writer's chunk (3072 bytes) and
   * beyond, random bytes. */
  uint64_t seed = tu_seed("test_jsonw_base64_round_trips_every_remainder");
  uint64_t rng = seed | 1;
  static const size_t lens[] = {0,   1,    2,    3,    4,    5,    255,   256,
                                257, 3071, 3072, 3073, 3074, 6145, 100001};
  for (size_t i = 0; i < sizeof lens / sizeof lens[0]; i++) {
    uint8_t *in = malloc(lens[i] + 1);
    assert_non_null(in);
    for (size_t k = 0; k < lens[i]; k++) {
      in[k] = (uint8_t)tu_rand(&rng);
    }
    check_base64_round_trip(in, lens[i]);
    free(in);
  }
}

static void test_b64_decode_refuses_text_that_is_not_canonical(void **state)
{
  (void)state;
  static const char *const bad[] = {"Zg=",   "Zg=a", "Z===", "====",  "Zm9v\n",
                                    "Zm 9v", "Zm9",  "Zm-_", "Z\0==", "Zm9vYg=\n"};
  static const size_t bad_len[] = {3, 4, 4, 4, 5, 5, 3, 4, 4, 8};
  uint8_t out[16];
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    size_t len = 99;
    assert_int_equal(b64_decode(bad[i], bad_len[i], out, sizeof out, &len), CAIRN_EINVAL);
    assert_int_equal(len, 0);
  }
  size_t len = 99;
  assert_int_equal(b64_decode("", 0, out, 0, &len), 0);
  assert_int_equal(len, 0);
  assert_int_equal(b64_decode("AP/+", 4, out, sizeof out, &len), 0);
  assert_int_equal(len, 3);
  assert_memory_equal(out, "\x00\xff\xfe", 3);
}

static void test_jsonw_lays_out_compact_and_pretty_documents(void **state)
{
  (void)state;
  for (int pretty = 0; pretty <= 1; pretty++) {
    struct out o;
    out_init(&o);
    struct jsonw w;
    jsonw_init(&w, out_sink, &o, pretty);
    jsonw_object_begin(&w);
    jsonw_key(&w, "nodes");
    jsonw_array_begin(&w);
    jsonw_object_begin(&w);
    jsonw_key(&w, "id");
    jsonw_u64(&w, 1);
    jsonw_key(&w, "name");
    jsonw_string(&w, NULL);
    jsonw_object_end(&w);
    jsonw_array_end(&w);
    jsonw_key(&w, "empty");
    jsonw_array_begin(&w);
    jsonw_array_end(&w);
    jsonw_key(&w, "none");
    jsonw_object_begin(&w);
    jsonw_object_end(&w);
    jsonw_object_end(&w);
    assert_int_equal(jsonw_end(&w), 0);
    assert_string_equal(o.p, pretty ? "{\n"
                                      "  \"nodes\": [\n"
                                      "    {\n"
                                      "      \"id\": 1,\n"
                                      "      \"name\": null\n"
                                      "    }\n"
                                      "  ],\n"
                                      "  \"empty\": [],\n"
                                      "  \"none\": {}\n"
                                      "}\n"
                                    : "{\"nodes\":[{\"id\":1,\"name\":null}],\"empty\":[],"
                                      "\"none\":{}}\n");
    free(o.p);
  }
}

static void test_jsonw_latches_misuse(void **state)
{
  (void)state;
  struct out o;
  struct jsonw w;

  out_init(&o);
  jsonw_init(&w, out_sink, &o, false);
  jsonw_object_begin(&w);
  jsonw_u64(&w, 1); /* a value without its key */
  assert_int_equal(w.err, CAIRN_EINVAL);
  size_t len = o.len;
  jsonw_key(&w, "k"); /* nothing more is written */
  jsonw_object_end(&w);
  assert_int_equal(o.len, len);
  free(o.p);

  out_init(&o);
  jsonw_init(&w, out_sink, &o, false);
  jsonw_key(&w, "top"); /* a key outside an object */
  assert_int_equal(w.err, CAIRN_EINVAL);
  free(o.p);

  out_init(&o);
  jsonw_init(&w, out_sink, &o, false);
  jsonw_array_begin(&w);
  jsonw_object_end(&w); /* closing what is not open */
  assert_int_equal(w.err, CAIRN_EINVAL);
  free(o.p);

  out_init(&o);
  jsonw_init(&w, out_sink, &o, false);
  for (int i = 0; i < JSONW_MAX_DEPTH; i++) {
    jsonw_array_begin(&w);
  }
  assert_int_equal(w.err, 0);
  jsonw_array_begin(&w); /* one deeper than allowed */
  assert_int_equal(w.err, CAIRN_EINVAL);
  free(o.p);

  out_init(&o);
  jsonw_init(&w, out_sink, &o, false);
  jsonw_object_begin(&w);
  assert_int_equal(jsonw_end(&w), CAIRN_EINVAL); /* still open */
  free(o.p);
}

static void test_jsonw_stops_at_the_first_sink_failure(void **state)
{
  (void)state;
  struct out o;
  out_init(&o);
  o.fail_after = 5;
  struct jsonw w;
  jsonw_init(&w, out_sink, &o, false);
  jsonw_array_begin(&w);
  jsonw_string(&w, "longer than five bytes");
  assert_int_equal(w.err, -EIO);
  int calls = o.calls;
  jsonw_u64(&w, 7);
  jsonw_array_end(&w);
  assert_int_equal(jsonw_end(&w), -EIO);
  assert_int_equal(o.calls, calls); /* the sink is not called again */
  free(o.p);

  /* One string alone, for reports otherwise written by hand. */
  out_init(&o);
  assert_int_equal(jsonw_quote(out_sink, &o, "a\"\n\xff", 4), 0);
  assert_string_equal(o.p, "\"a\\\"\\n\xef\xbf\xbd\"");
  o.fail_after = o.len;
  assert_int_equal(jsonw_quote(out_sink, &o, "x", 1), -EIO);
  free(o.p);
}

/* Random documents of random keys, strings (any bytes, often not UTF-8),
 * numbers and byte members, nested: the output is always JSON, compact or
 * pretty, and the bytes members decode back to what went in. */
static void write_random_value(struct jsonw *w, uint64_t *rng, int depth, json_t *want);

static void random_bytes(uint64_t *rng, char *buf, size_t *len)
{
  static const char pool[] =
      "a\"\\\n\x01\x7f\xc3\xa9\xff\x80\xe2\x82\xac\xf0\x9f\x98\x80\xed\xa0\x80";
  *len = tu_rand(rng) % 24;
  for (size_t i = 0; i < *len; i++) {
    buf[i] = (tu_rand(rng) % 3 == 0) ? (char)tu_rand(rng) : pool[tu_rand(rng) % (sizeof pool - 1)];
  }
}

static void write_random_value(struct jsonw *w, uint64_t *rng, int depth, json_t *want)
{
  char buf[32];
  size_t len;
  switch (depth >= 5 ? 2 + tu_rand(rng) % 3 : tu_rand(rng) % 5) {
  case 0:
    jsonw_array_begin(w);
    for (uint64_t n = tu_rand(rng) % 5; n > 0; n--) {
      write_random_value(w, rng, depth + 1, NULL);
    }
    jsonw_array_end(w);
    break;
  case 1:
    jsonw_object_begin(w);
    for (uint64_t n = tu_rand(rng) % 5; n > 0; n--) {
      buf[0] = 'k'; /* never "b", the byte members' key */
      random_bytes(rng, buf + 1, &len);
      buf[len + 1] = '\0';
      jsonw_key(w, buf); /* keys: NUL-terminated, maybe cut at a NUL */
      write_random_value(w, rng, depth + 1, NULL);
    }
    jsonw_object_end(w);
    break;
  case 2:
    random_bytes(rng, buf, &len);
    jsonw_stringn(w, buf, len);
    break;
  case 3:
    jsonw_u64(w, tu_rand(rng) >> (tu_rand(rng) % 64));
    break;
  default:
    random_bytes(rng, buf, &len);
    jsonw_object_begin(w);
    jsonw_bytes_member(w, "b", buf, len);
    jsonw_object_end(w);
    if (want != NULL) {
      json_array_append_new(want, json_stringn_nocheck(buf, len));
    }
  }
}

static void test_jsonw_random_documents_are_always_json(void **state)
{
  (void)state;
  uint64_t seed = tu_seed("test_jsonw_random_documents_are_always_json");
  uint64_t rng = seed | 1;
  for (int doc = 0; doc < 2000; doc++) {
    struct out o;
    out_init(&o);
    struct jsonw w;
    jsonw_init(&w, out_sink, &o, doc % 2 == 1);
    json_t *want = json_array();
    jsonw_array_begin(&w);
    for (uint64_t n = 1 + tu_rand(&rng) % 4; n > 0; n--) {
      write_random_value(&w, &rng, 1, want);
    }
    jsonw_array_end(&w);
    assert_int_equal(jsonw_end(&w), 0);
    json_t *got = out_parse(&o);
    /* the top level's byte members come back as the same bytes */
    size_t k = 0;
    for (size_t i = 0; i < json_array_size(got); i++) {
      json_t *m = json_array_get(got, i);
      json_t *b = json_is_object(m) && json_object_size(m) >= 1 ? json_object_get(m, "b") : NULL;
      if (b == NULL) {
        continue;
      }
      const char *wb = json_string_value(json_array_get(want, k));
      size_t wl = json_string_length(json_array_get(want, k));
      k++;
      if (json_is_string(b)) {
        assert_int_equal(json_string_length(b), wl);
        assert_memory_equal(json_string_value(b), wb, wl);
        continue;
      }
      assert_true(json_is_null(b));
      json_t *b64 = json_object_get(m, "b_base64");
      assert_non_null(b64);
      uint8_t back[32];
      size_t bl = 0;
      assert_int_equal(
          b64_decode(json_string_value(b64), json_string_length(b64), back, sizeof back, &bl), 0);
      assert_int_equal(bl, wl);
      assert_memory_equal(back, wb, wl);
    }
    assert_int_equal(k, json_array_size(want));
    json_decref(got);
    json_decref(want);
    free(o.p);
  }
}

int main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_jsonw_escapes_every_control_byte_quote_and_backslash),
      cmocka_unit_test(test_jsonw_keeps_utf8_and_replaces_bytes_that_are_not),
      cmocka_unit_test(test_jsonw_bytes_member_writes_text_or_null_plus_base64),
      cmocka_unit_test(test_jsonw_writes_int64_and_uint64_extremes_exactly),
      cmocka_unit_test(test_jsonw_base64_round_trips_every_remainder),
      cmocka_unit_test(test_b64_decode_refuses_text_that_is_not_canonical),
      cmocka_unit_test(test_jsonw_lays_out_compact_and_pretty_documents),
      cmocka_unit_test(test_jsonw_latches_misuse),
      cmocka_unit_test(test_jsonw_stops_at_the_first_sink_failure),
      cmocka_unit_test(test_jsonw_random_documents_are_always_json),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
