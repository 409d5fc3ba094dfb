/* output.c - the JSON writer and the tables of the `cairn` command. See
 * output.h. */
#include "output.h"

#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

/* ---- JSON ---- */

void oj_init(struct oj *j, FILE *f, bool pretty)
{
  memset(j, 0, sizeof *j);
  j->f = f;
  j->pretty = pretty;
  j->first[0] = true;
}

static void oj_indent(struct oj *j)
{
  if (j->pretty) {
    fputc('\n', j->f);
    for (int i = 0; i < j->depth; i++) {
      fputs("  ", j->f);
    }
  }
}

/* Before any value: the separator from the previous member and, in an
 * array, the indentation. After a key, nothing (the key wrote both). */
static void oj_before_value(struct oj *j)
{
  if (j->after_key) {
    j->after_key = false;
    return;
  }
  assert(!j->in_object[j->depth] && "a value inside an object needs oj_key first");
  if (j->depth > 0) {
    if (!j->first[j->depth]) {
      fputc(',', j->f);
    }
    oj_indent(j);
  }
  j->first[j->depth] = false;
}

static void oj_open(struct oj *j, char c, bool object)
{
  oj_before_value(j);
  fputc(c, j->f);
  assert(j->depth < OJ_MAX_DEPTH);
  j->depth++;
  j->first[j->depth] = true;
  j->in_object[j->depth] = object;
}

static void oj_close(struct oj *j, char c)
{
  assert(j->depth > 0 && !j->after_key);
  bool empty = j->first[j->depth];
  j->depth--;
  if (!empty) {
    oj_indent(j);
  }
  fputc(c, j->f);
}

void oj_object_begin(struct oj *j)
{
  oj_open(j, '{', true);
}
void oj_object_end(struct oj *j)
{
  oj_close(j, '}');
}
void oj_array_begin(struct oj *j)
{
  oj_open(j, '[', false);
}
void oj_array_end(struct oj *j)
{
  oj_close(j, ']');
}

/* The escaped body of a string: the two-character escapes JSON has, \u00XX
 * for the other control characters, every other byte as it is. */
static void oj_escape(FILE *f, const unsigned char *s, size_t len)
{
  fputc('"', f);
  for (size_t i = 0; i < len; i++) {
    unsigned char c = s[i];
    switch (c) {
    case '"':
      fputs("\\\"", f);
      break;
    case '\\':
      fputs("\\\\", f);
      break;
    case '\n':
      fputs("\\n", f);
      break;
    case '\r':
      fputs("\\r", f);
      break;
    case '\t':
      fputs("\\t", f);
      break;
    case '\b':
      fputs("\\b", f);
      break;
    case '\f':
      fputs("\\f", f);
      break;
    default:
      if (c < 0x20 || c == 0x7f) {
        fprintf(f, "\\u%04x", c);
      } else {
        fputc(c, f);
      }
    }
  }
  fputc('"', f);
}

void oj_key(struct oj *j, const char *key)
{
  assert(j->in_object[j->depth] && !j->after_key);
  if (!j->first[j->depth]) {
    fputc(',', j->f);
  }
  j->first[j->depth] = false;
  oj_indent(j);
  oj_escape(j->f, (const unsigned char *)key, strlen(key));
  fputs(j->pretty ? ": " : ":", j->f);
  j->after_key = true;
}

void oj_strn(struct oj *j, const void *p, size_t len)
{
  oj_before_value(j);
  oj_escape(j->f, p, len);
}

void oj_str(struct oj *j, const char *s)
{
  if (s == NULL) {
    oj_null(j);
    return;
  }
  oj_strn(j, s, strlen(s));
}

void oj_base64(struct oj *j, const void *p, size_t len)
{
  static const char abc[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  const unsigned char *s = p;
  oj_before_value(j);
  fputc('"', j->f);
  size_t i = 0;
  for (; i + 3 <= len; i += 3) {
    uint32_t v = (uint32_t)s[i] << 16 | (uint32_t)s[i + 1] << 8 | s[i + 2];
    fputc(abc[v >> 18], j->f);
    fputc(abc[(v >> 12) & 63], j->f);
    fputc(abc[(v >> 6) & 63], j->f);
    fputc(abc[v & 63], j->f);
  }
  if (len - i == 1) {
    uint32_t v = (uint32_t)s[i] << 16;
    fprintf(j->f, "%c%c==", abc[v >> 18], abc[(v >> 12) & 63]);
  } else if (len - i == 2) {
    uint32_t v = (uint32_t)s[i] << 16 | (uint32_t)s[i + 1] << 8;
    fprintf(j->f, "%c%c%c=", abc[v >> 18], abc[(v >> 12) & 63], abc[(v >> 6) & 63]);
  }
  fputc('"', j->f);
}

void oj_int(struct oj *j, int64_t v)
{
  oj_before_value(j);
  fprintf(j->f, "%" PRId64, v);
}

void oj_uint(struct oj *j, uint64_t v)
{
  oj_before_value(j);
  fprintf(j->f, "%" PRIu64, v);
}

void oj_bool(struct oj *j, bool v)
{
  oj_before_value(j);
  fputs(v ? "true" : "false", j->f);
}

void oj_null(struct oj *j)
{
  oj_before_value(j);
  fputs("null", j->f);
}

void oj_end(struct oj *j)
{
  assert(j->depth == 0 && !j->after_key);
  fputc('\n', j->f);
}

bool oj_is_utf8(const void *p, size_t len)
{
  const unsigned char *s = p;
  size_t i = 0;
  while (i < len) {
    unsigned char c = s[i];
    size_t n;
    uint32_t cp;
    if (c < 0x80) {
      i++;
      continue;
    } else if (c >= 0xc2 && c <= 0xdf) {
      n = 1;
      cp = c & 0x1f;
    } else if (c >= 0xe0 && c <= 0xef) {
      n = 2;
      cp = c & 0x0f;
    } else if (c >= 0xf0 && c <= 0xf4) {
      n = 3;
      cp = c & 0x07;
    } else {
      return false; /* a continuation byte first, 0xc0/0xc1, or 0xf5.. */
    }
    if (len - i - 1 < n) {
      return false;
    }
    for (size_t k = 1; k <= n; k++) {
      if ((s[i + k] & 0xc0) != 0x80) {
        return false;
      }
      cp = cp << 6 | (s[i + k] & 0x3f);
    }
    if ((n == 2 && cp < 0x800) || (n == 3 && cp < 0x10000) || cp > 0x10ffff ||
        (cp >= 0xd800 && cp <= 0xdfff)) {
      return false;
    }
    i += n + 1;
  }
  return true;
}

void oj_bytes_member(struct oj *j, const char *key, const void *data, size_t len)
{
  oj_key(j, key);
  if (data == NULL) {
    oj_null(j);
    return;
  }
  if (oj_is_utf8(data, len)) {
    oj_strn(j, data, len);
    return;
  }
  oj_null(j);
  char k64[128];
  snprintf(k64, sizeof k64, "%s_base64", key);
  oj_key(j, k64);
  oj_base64(j, data, len);
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
