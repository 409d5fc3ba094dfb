/* test_cli_output.c - the `cairn` command's JSON writer and tables: every
 * escape, nesting and separators, UTF-8 checks, base64, bytes that are not
 * text, table alignment. Output goes to a memory stream and is compared
 * byte for byte. */
#include "output.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

struct mem {
  char *buf;
  size_t len;
  FILE *f;
};

static void mem_open(struct mem *m)
{
  m->buf = NULL;
  m->len = 0;
  m->f = open_memstream(&m->buf, &m->len);
  assert_non_null(m->f);
}

/* Closes the stream and returns its text (owned by m, freed by mem_free). */
static const char *mem_text(struct mem *m)
{
  fclose(m->f);
  m->f = NULL;
  return m->buf;
}

static void mem_free(struct mem *m)
{
  free(m->buf);
}

static void test_oj_compact_document_has_commas_and_no_blanks(void **state)
{
  (void)state;
  struct mem m;
  mem_open(&m);
  struct oj j;
  oj_init(&j, m.f, false);
  oj_object_begin(&j);
  oj_key(&j, "a");
  oj_int(&j, -5);
  oj_key(&j, "b");
  oj_array_begin(&j);
  oj_uint(&j, 18446744073709551615ULL);
  oj_bool(&j, true);
  oj_null(&j);
  oj_array_begin(&j);
  oj_array_end(&j);
  oj_object_begin(&j);
  oj_object_end(&j);
  oj_array_end(&j);
  oj_key(&j, "c");
  oj_str(&j, "x");
  oj_key(&j, "d");
  oj_str(&j, NULL);
  oj_object_end(&j);
  oj_end(&j);
  assert_string_equal(mem_text(&m),
                      "{\"a\":-5,\"b\":[18446744073709551615,true,null,[],{}],\"c\":\"x\","
                      "\"d\":null}\n");
  mem_free(&m);
}

static void test_oj_pretty_document_indents_members(void **state)
{
  (void)state;
  struct mem m;
  mem_open(&m);
  struct oj j;
  oj_init(&j, m.f, true);
  oj_object_begin(&j);
  oj_key(&j, "nodes");
  oj_array_begin(&j);
  oj_object_begin(&j);
  oj_key(&j, "id");
  oj_uint(&j, 1);
  oj_object_end(&j);
  oj_array_end(&j);
  oj_key(&j, "empty");
  oj_array_begin(&j);
  oj_array_end(&j);
  oj_object_end(&j);
  oj_end(&j);
  assert_string_equal(mem_text(&m), "{\n"
                                    "  \"nodes\": [\n"
                                    "    {\n"
                                    "      \"id\": 1\n"
                                    "    }\n"
                                    "  ],\n"
                                    "  \"empty\": []\n"
                                    "}\n");
  mem_free(&m);
}

static void test_oj_escapes_quotes_backslashes_and_control_bytes(void **state)
{
  (void)state;
  struct mem m;
  mem_open(&m);
  struct oj j;
  oj_init(&j, m.f, false);
  const char s[] = "q\"b\\n\nr\rt\tb\bf\f\x01\x1f\x7f\0z\xc3\xa9";
  oj_strn(&j, s, sizeof s - 1);
  oj_end(&j);
  /* jansson's \u00XX is upper-case; DEL needs no escape (RFC 8259) */
  assert_memory_equal(mem_text(&m),
                      "\"q\\\"b\\\\n\\nr\\rt\\tb\\bf\\f\\u0001\\u001F\x7f\\u0000z\xc3\xa9\"\n",
                      m.len);
  assert_int_equal(m.len, strlen("\"q\\\"b\\\\n\\nr\\rt\\tb\\bf\\f\\u0001\\u001F\x7f\\u0000z"
                                 "\xc3\xa9\"\n"));
  mem_free(&m);
}

static void test_oj_keys_are_escaped_too(void **state)
{
  (void)state;
  struct mem m;
  mem_open(&m);
  struct oj j;
  oj_init(&j, m.f, false);
  oj_object_begin(&j);
  oj_key(&j, "a\"b");
  oj_int(&j, 1);
  oj_object_end(&j);
  oj_end(&j);
  assert_string_equal(mem_text(&m), "{\"a\\\"b\":1}\n");
  mem_free(&m);
}

static void test_oj_is_utf8_accepts_text_and_refuses_malformed_sequences(void **state)
{
  (void)state;
  assert_true(oj_is_utf8("", 0));
  assert_true(oj_is_utf8("plain", 5));
  assert_true(oj_is_utf8("\xc3\xa9", 2));          /* é */
  assert_true(oj_is_utf8("\xe2\x82\xac", 3));      /* € */
  assert_true(oj_is_utf8("\xf0\x9f\x98\x80", 4));  /* U+1F600 */
  assert_true(oj_is_utf8("\xf4\x8f\xbf\xbf", 4));  /* U+10FFFF */
  assert_true(oj_is_utf8("a\0b", 3));              /* NUL is a character */
  assert_false(oj_is_utf8("\xff", 1));             /* never in UTF-8 */
  assert_false(oj_is_utf8("\x80", 1));             /* continuation first */
  assert_false(oj_is_utf8("\xc3", 1));             /* cut short */
  assert_false(oj_is_utf8("\xc0\xaf", 2));         /* overlong '/' */
  assert_false(oj_is_utf8("\xe0\x80\xaf", 3));     /* overlong */
  assert_false(oj_is_utf8("\xed\xa0\x80", 3));     /* surrogate D800 */
  assert_false(oj_is_utf8("\xf4\x90\x80\x80", 4)); /* above U+10FFFF */
  assert_false(oj_is_utf8("\xe2\x82", 2));         /* cut short */
  assert_false(oj_is_utf8("\xe2\x28\xa1", 3));     /* bad continuation */
}

static void test_oj_base64_pads_each_remainder(void **state)
{
  (void)state;
  static const struct {
    const char *in;
    const char *out;
  } cases[] = {{"", "\"\""},
               {"f", "\"Zg==\""},
               {"fo", "\"Zm8=\""},
               {"foo", "\"Zm9v\""},
               {"foob", "\"Zm9vYg==\""},
               {"fooba", "\"Zm9vYmE=\""},
               {"foobar", "\"Zm9vYmFy\""}};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    struct mem m;
    mem_open(&m);
    struct oj j;
    oj_init(&j, m.f, false);
    oj_base64(&j, cases[i].in, strlen(cases[i].in));
    const char *t = mem_text(&m);
    assert_string_equal(t, cases[i].out);
    mem_free(&m);
  }
  struct mem m;
  mem_open(&m);
  struct oj j;
  oj_init(&j, m.f, false);
  oj_base64(&j, "\x00\xff\xfe", 3);
  assert_string_equal(mem_text(&m), "\"AP/+\"");
  mem_free(&m);
}

static void test_oj_bytes_member_writes_text_or_null_plus_base64(void **state)
{
  (void)state;
  struct mem m;
  mem_open(&m);
  struct oj j;
  oj_init(&j, m.f, false);
  oj_object_begin(&j);
  oj_bytes_member(&j, "key", NULL, 0);
  oj_bytes_member(&j, "text", "h\xc3\xa9", 3);
  oj_bytes_member(&j, "value", "\xff\x00", 2);
  oj_object_end(&j);
  oj_end(&j);
  assert_string_equal(
      mem_text(&m),
      "{\"key\":null,\"text\":\"h\xc3\xa9\",\"value\":null,\"value_base64\":\"/wA=\"}\n");
  mem_free(&m);
}

static void test_tbl_aligns_columns_to_the_widest_cell(void **state)
{
  (void)state;
  static const char *const head[] = {"NODE", "STATE", "ADDRESS"};
  struct tbl t;
  tbl_init(&t, 3, head);
  const char *r1[] = {"1", "alive", "127.0.0.1:7400"};
  const char *r2[] = {"10", NULL, "h:1"};
  assert_int_equal(tbl_row(&t, r1), 0);
  assert_int_equal(tbl_row(&t, r2), 0);
  struct mem m;
  mem_open(&m);
  tbl_print(&t, m.f);
  assert_string_equal(mem_text(&m), "NODE  STATE  ADDRESS\n"
                                    "1     alive  127.0.0.1:7400\n"
                                    "10    -      h:1\n");
  mem_free(&m);
  tbl_free(&t);
}

static void test_tbl_grows_past_its_first_allocation(void **state)
{
  (void)state;
  static const char *const head[] = {"N"};
  struct tbl t;
  tbl_init(&t, 1, head);
  for (int i = 0; i < 100; i++) {
    char cell[16];
    snprintf(cell, sizeof cell, "%d", i);
    const char *row[] = {cell};
    assert_int_equal(tbl_row(&t, row), 0);
  }
  assert_int_equal(t.rows, 100);
  assert_string_equal(t.cells[99], "99");
  tbl_free(&t);
}

int main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_oj_compact_document_has_commas_and_no_blanks),
      cmocka_unit_test(test_oj_pretty_document_indents_members),
      cmocka_unit_test(test_oj_escapes_quotes_backslashes_and_control_bytes),
      cmocka_unit_test(test_oj_keys_are_escaped_too),
      cmocka_unit_test(test_oj_is_utf8_accepts_text_and_refuses_malformed_sequences),
      cmocka_unit_test(test_oj_base64_pads_each_remainder),
      cmocka_unit_test(test_oj_bytes_member_writes_text_or_null_plus_base64),
      cmocka_unit_test(test_tbl_aligns_columns_to_the_widest_cell),
      cmocka_unit_test(test_tbl_grows_past_its_first_allocation),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
