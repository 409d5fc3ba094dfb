/* test_admin_json.c - the admin port's JSON writer escapes every byte JSON
 * requires, keeps commas and nesting right, refuses misuse, and its buffer
 * keeps to its limit. */
#include "admin/admin_buf.h"
#include "admin/admin_json.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

static char *test_quote(const char *s)
{
  struct admin_buf b;
  admin_buf_init(&b, 1 << 20);
  admin_json_quote(&b, s);
  size_t len = 0;
  char *out = admin_buf_take(&b, &len);
  assert_non_null(out);
  assert_int_equal(strlen(out), len);
  return out;
}

static void test_admin_json_escapes_quotes_backslashes_and_controls(void **state)
{
  struct {
    const char *in, *want;
  } cases[] = {
      {"", "\"\""},
      {"plain-topic.1", "\"plain-topic.1\""},
      {"a\"b", "\"a\\\"b\""},
      {"back\\slash", "\"back\\\\slash\""},
      {"line\nfeed\ttab\rcr", "\"line\\nfeed\\ttab\\rcr\""},
      {"\b\f", "\"\\b\\f\""},
      /* jansson's \u00XX is upper-case; DEL needs no escape (RFC 8259) */
      {"\x01\x1f\x7f", "\"\\u0001\\u001F\x7f\""},
      {"</script>", "\"</script>\""},
      {"caf\xc3\xa9", "\"caf\xc3\xa9\""},             /* UTF-8 passes through */
      {"a\xff\xc3", "\"a\xef\xbf\xbd\xef\xbf\xbd\""}, /* not UTF-8: U+FFFD, never raw */
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    char *out = test_quote(cases[i].in);
    assert_string_equal(out, cases[i].want);
    free(out);
  }
  /* Every control byte comes out escaped: no raw byte below 0x20 remains. */
  char all[32];
  for (int c = 1; c < 32; c++) {
    all[c - 1] = (char)c;
  }
  all[31] = '\0';
  char *out = test_quote(all);
  for (const char *p = out; *p != '\0'; p++) {
    assert_true((unsigned char)*p >= 0x20);
  }
  free(out);
}

static void test_admin_json_writes_nested_values_with_commas(void **state)
{
  struct admin_buf b;
  admin_buf_init(&b, 4096);
  struct admin_json w;
  admin_json_init(&w, &b);
  admin_json_object_begin(&w);
  admin_json_key(&w, "name");
  admin_json_string(&w, "t");
  admin_json_key(&w, "ids");
  admin_json_array_begin(&w);
  admin_json_u64(&w, 1);
  admin_json_u64(&w, 18446744073709551615u);
  admin_json_i64(&w, -1);
  admin_json_array_end(&w);
  admin_json_key(&w, "empty");
  admin_json_object_begin(&w);
  admin_json_object_end(&w);
  admin_json_key(&w, "list");
  admin_json_array_begin(&w);
  admin_json_object_begin(&w);
  admin_json_key(&w, "ok");
  admin_json_bool(&w, true);
  admin_json_object_end(&w);
  admin_json_null(&w);
  admin_json_bool(&w, false);
  admin_json_array_end(&w);
  admin_json_object_end(&w);
  size_t len = 0;
  char *out = admin_buf_take(&b, &len);
  assert_non_null(out);
  assert_string_equal(out, "{\"name\":\"t\",\"ids\":[1,18446744073709551615,-1],\"empty\":{},"
                           "\"list\":[{\"ok\":true},null,false]}");
  free(out);
}

static void test_admin_json_refuses_misuse(void **state)
{
  struct admin_buf b;
  admin_buf_init(&b, 4096);
  struct admin_json w;
  admin_json_init(&w, &b);
  admin_json_object_begin(&w);
  admin_json_u64(&w, 1); /* a value without its key */
  assert_true(b.failed);
  size_t len = 1;
  assert_null(admin_buf_take(&b, &len));
  assert_int_equal(len, 0);

  admin_buf_init(&b, 4096);
  admin_json_init(&w, &b);
  admin_json_array_begin(&w);
  admin_json_object_end(&w); /* closing what is not open */
  assert_true(b.failed);
  admin_buf_close(&b);

  admin_buf_init(&b, 4096);
  admin_json_init(&w, &b);
  for (int i = 0; i <= ADMIN_JSON_MAX_DEPTH; i++) {
    admin_json_array_begin(&w);
  }
  assert_true(b.failed);
  admin_buf_close(&b);
}

static void test_admin_buf_keeps_to_its_limit(void **state)
{
  struct admin_buf b;
  admin_buf_init(&b, 10);
  admin_buf_puts(&b, "0123456789");
  assert_false(b.failed);
  admin_buf_printf(&b, "%d", 1);
  assert_true(b.failed);
  size_t len = 0;
  assert_null(admin_buf_take(&b, &len));

  admin_buf_init(&b, 1 << 20);
  char big[1000];
  memset(big, 'x', sizeof big - 1);
  big[sizeof big - 1] = '\0';
  admin_buf_printf(&b, "[%s]", big); /* longer than printf's small buffer */
  char *out = admin_buf_take(&b, &len);
  assert_int_equal(len, 1001);
  assert_true(out[0] == '[' && out[1000] == ']' && out[1001] == '\0');
  free(out);
}

int main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_admin_json_escapes_quotes_backslashes_and_controls),
      cmocka_unit_test(test_admin_json_writes_nested_values_with_commas),
      cmocka_unit_test(test_admin_json_refuses_misuse),
      cmocka_unit_test(test_admin_buf_keeps_to_its_limit),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
