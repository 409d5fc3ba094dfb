/* output.c - the CLI's names for the one JSON writer (common/jsonw.c) and
 * the tables of the `cairn` command. See output.h. */
#include "output.h"

#include "common/err.h"

#include <assert.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* ---- JSON ---- */

/* Misuse is the program's bug (assert); a failed write (EPIPE) is not. */
static void oj_check(const struct oj *j)
{
  assert(j->jw.err != CAIRN_EINVAL && "JSON writer misuse: a value without its key, or unbalanced");
  (void)j;
}

void oj_init(struct oj *j, FILE *f, bool pretty)
{
  j->f = f;
  jsonw_init(&j->jw, jsonw_sink_file, f, pretty);
}

void oj_object_begin(struct oj *j)
{
  jsonw_object_begin(&j->jw);
  oj_check(j);
}
void oj_object_end(struct oj *j)
{
  jsonw_object_end(&j->jw);
  oj_check(j);
}
void oj_array_begin(struct oj *j)
{
  jsonw_array_begin(&j->jw);
  oj_check(j);
}
void oj_array_end(struct oj *j)
{
  jsonw_array_end(&j->jw);
  oj_check(j);
}

void oj_key(struct oj *j, const char *key)
{
  jsonw_key(&j->jw, key);
  oj_check(j);
}

void oj_strn(struct oj *j, const void *p, size_t len)
{
  jsonw_stringn(&j->jw, p, len);
  oj_check(j);
}

void oj_str(struct oj *j, const char *s)
{
  jsonw_string(&j->jw, s);
  oj_check(j);
}

void oj_base64(struct oj *j, const void *p, size_t len)
{
  jsonw_base64(&j->jw, p, len);
  oj_check(j);
}

void oj_int(struct oj *j, int64_t v)
{
  jsonw_i64(&j->jw, v);
  oj_check(j);
}

void oj_uint(struct oj *j, uint64_t v)
{
  jsonw_u64(&j->jw, v);
  oj_check(j);
}

void oj_bool(struct oj *j, bool v)
{
  jsonw_bool(&j->jw, v);
  oj_check(j);
}

void oj_null(struct oj *j)
{
  jsonw_null(&j->jw);
  oj_check(j);
}

void oj_end(struct oj *j)
{
  int rv = jsonw_end(&j->jw);
  assert(rv != CAIRN_EINVAL && "JSON document ended with a container open");
  (void)rv;
}

bool oj_is_utf8(const void *p, size_t len)
{
  return jsonw_is_utf8(p, len);
}

void oj_bytes_member(struct oj *j, const char *key, const void *data, size_t len)
{
  jsonw_bytes_member(&j->jw, key, data, len);
  oj_check(j);
}

/* ---- tables ---- */

void tbl_init(struct tbl *t, int ncols, const char *const *head)
{
  assert(ncols > 0 && ncols <= TBL_MAX_COLS);
  memset(t, 0, sizeof *t);
  t->ncols = ncols;
  for (int i = 0; i < ncols; i++) {
    t->head[i] = head[i];
  }
}

int tbl_row(struct tbl *t, const char *const *cells)
{
  if (t->rows == t->cap) {
    size_t cap = t->cap == 0 ? 16 : t->cap * 2;
    char **n = realloc(t->cells, cap * (size_t)t->ncols * sizeof *n);
    if (n == NULL) {
      return -ENOMEM;
    }
    t->cells = n;
    t->cap = cap;
  }
  char **row = t->cells + t->rows * (size_t)t->ncols;
  for (int i = 0; i < t->ncols; i++) {
    row[i] = strdup(cells[i] != NULL ? cells[i] : "-");
    if (row[i] == NULL) {
      for (int k = 0; k < i; k++) {
        free(row[k]);
      }
      return -ENOMEM;
    }
  }
  t->rows++;
  return 0;
}

void tbl_print(const struct tbl *t, FILE *f)
{
  size_t w[TBL_MAX_COLS];
  for (int i = 0; i < t->ncols; i++) {
    w[i] = strlen(t->head[i]);
    for (size_t r = 0; r < t->rows; r++) {
      size_t n = strlen(t->cells[r * (size_t)t->ncols + (size_t)i]);
      w[i] = n > w[i] ? n : w[i];
    }
  }
  for (size_t r = 0; r <= t->rows; r++) {
    for (int i = 0; i < t->ncols; i++) {
      const char *s = r == 0 ? t->head[i] : t->cells[(r - 1) * (size_t)t->ncols + (size_t)i];
      bool last = i == t->ncols - 1;
      fprintf(f, "%-*s%s", last ? 0 : (int)w[i], s, last ? "\n" : "  ");
    }
  }
}

void tbl_free(struct tbl *t)
{
  for (size_t k = 0; k < t->rows * (size_t)t->ncols; k++) {
    free(t->cells[k]);
  }
  free(t->cells);
  memset(t, 0, sizeof *t);
}
