/* test_err.c - the error table: every code has its own text and name,
 * negative errno passes through, 0 is success. */
#include "common/err.h"

#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>
#include <uv.h>

struct err_entry {
  int code;
  const char *name;
  const char *text;
};

/* The same X-macro table err.c is generated from. */
static const struct err_entry err_table[] = {
#define TEST_ERR_ENTRY(name, value, text) {value, #name, text},
    CAIRN_ERR_TABLE(TEST_ERR_ENTRY)
#undef TEST_ERR_ENTRY
};

#define ERR_TABLE_LEN (sizeof err_table / sizeof err_table[0])

static void test_err_table_is_not_empty(void **state)
{
  (void)state;
  assert_true(ERR_TABLE_LEN >= 19);
}

static void test_err_codes_are_distinct_and_below_errno_range(void **state)
{
  (void)state;
  for (size_t i = 0; i < ERR_TABLE_LEN; i++) {
    assert_true(err_table[i].code <= -10000);
    for (size_t j = i + 1; j < ERR_TABLE_LEN; j++) {
      assert_int_not_equal(err_table[i].code, err_table[j].code);
    }
  }
}

static void test_err_strerror_gives_table_text_for_every_code(void **state)
{
  (void)state;
  for (size_t i = 0; i < ERR_TABLE_LEN; i++) {
    const char *s = cairn_strerror(err_table[i].code);
    assert_non_null(s);
    assert_true(s[0] != '\0');
    assert_string_equal(s, err_table[i].text);
  }
}

static void test_err_strerror_texts_are_distinct(void **state)
{
  (void)state;
  for (size_t i = 0; i < ERR_TABLE_LEN; i++) {
    for (size_t j = i + 1; j < ERR_TABLE_LEN; j++) {
      assert_string_not_equal(cairn_strerror(err_table[i].code),
                              cairn_strerror(err_table[j].code));
    }
  }
}

static void test_err_errname_gives_symbol_for_every_code(void **state)
{
  (void)state;
  for (size_t i = 0; i < ERR_TABLE_LEN; i++) {
    const char *n = cairn_errname(err_table[i].code);
    assert_non_null(n);
    assert_true(n[0] != '\0');
    assert_string_equal(n, err_table[i].name);
    assert_true(strncmp(n, "CAIRN_E", 7) == 0);
  }
}

static void test_err_errnames_are_distinct(void **state)
{
  (void)state;
  for (size_t i = 0; i < ERR_TABLE_LEN; i++) {
    for (size_t j = i + 1; j < ERR_TABLE_LEN; j++) {
      assert_string_not_equal(cairn_errname(err_table[i].code),
                              cairn_errname(err_table[j].code));
    }
  }
}

static void test_err_known_codes_have_expected_text(void **state)
{
  (void)state;
  assert_string_equal(cairn_strerror(CAIRN_EBADCRC), "batch checksum mismatch");
  assert_string_equal(cairn_errname(CAIRN_EBADCRC), "CAIRN_EBADCRC");
  assert_int_equal(CAIRN_EINVAL, -10000);
  assert_int_equal(CAIRN_EINDEX, -10018);
}

static void test_err_strerror_passes_negative_errno_through(void **state)
{
  (void)state;
  assert_string_equal(cairn_strerror(-ENOSPC), "No space left on device");
  assert_string_equal(cairn_strerror(-ENOENT), "No such file or directory");
  assert_string_equal(cairn_strerror(-EIO), "Input/output error");
  assert_string_equal(cairn_strerror(-EAGAIN), strerror(EAGAIN));
}

static void test_err_errname_passes_negative_errno_through(void **state)
{
  (void)state;
  assert_string_equal(cairn_errname(-ENOSPC), "ENOSPC");
  assert_string_equal(cairn_errname(-ENOENT), "ENOENT");
  assert_string_equal(cairn_errname(-EIO), "EIO");
}

static void test_err_zero_is_success(void **state)
{
  (void)state;
  assert_string_equal(cairn_strerror(0), "success");
  assert_string_equal(cairn_errname(0), "OK");
}

static void test_err_unknown_codes_get_a_non_null_text(void **state)
{
  (void)state;
  const int unknown[] = {1, 42, -9999, -10019, -20000, -4096};
  for (size_t i = 0; i < sizeof unknown / sizeof unknown[0]; i++) {
    const char *s = cairn_strerror(unknown[i]);
    const char *n = cairn_errname(unknown[i]);
    assert_non_null(s);
    assert_non_null(n);
    assert_true(s[0] != '\0');
    assert_true(n[0] != '\0');
  }
  assert_string_equal(cairn_strerror(-20000), "unknown error");
  assert_string_equal(cairn_errname(-20000), "unknown");
  assert_string_equal(cairn_strerror(7), "unknown error");
}

/* libuv's getaddrinfo codes are not errno values: they get libuv's text,
 * not "Unknown error 3008". */
static void test_err_libuv_resolver_codes_have_their_text(void **state)
{
  (void)state;
  assert_string_equal(cairn_strerror(UV_EAI_NONAME), uv_strerror(UV_EAI_NONAME));
  assert_null(strstr(cairn_strerror(UV_EAI_NONAME), "Unknown error"));
}

int main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_err_libuv_resolver_codes_have_their_text),
      cmocka_unit_test(test_err_table_is_not_empty),
      cmocka_unit_test(test_err_codes_are_distinct_and_below_errno_range),
      cmocka_unit_test(test_err_strerror_gives_table_text_for_every_code),
      cmocka_unit_test(test_err_strerror_texts_are_distinct),
      cmocka_unit_test(test_err_errname_gives_symbol_for_every_code),
      cmocka_unit_test(test_err_errnames_are_distinct),
      cmocka_unit_test(test_err_known_codes_have_expected_text),
      cmocka_unit_test(test_err_strerror_passes_negative_errno_through),
      cmocka_unit_test(test_err_errname_passes_negative_errno_through),
      cmocka_unit_test(test_err_zero_is_success),
      cmocka_unit_test(test_err_unknown_codes_get_a_non_null_text),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
