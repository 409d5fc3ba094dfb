/* admin_buf.c - a growing text buffer with a size limit. See admin_buf.h. */
#include "admin/admin_buf.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void admin_buf_init(struct admin_buf *b, size_t limit)
{
  memset(b, 0, sizeof *b);
  b->limit = limit;
}

void admin_buf_close(struct admin_buf *b)
{
  free(b->p);
  memset(b, 0, sizeof *b);
}

/* Makes room for len more bytes and a NUL. */
static bool admin_buf_reserve(struct admin_buf *b, size_t len)
{
  if (b->failed) {
    return false;
  }
  if (len > b->limit || b->len + len > b->limit) {
    b->failed = true;
    return false;
  }
  size_t need = b->len + len + 1;
  if (need <= b->cap) {
    return true;
  }
  size_t cap = b->cap ? b->cap : 4096;
  while (cap < need) {
    cap *= 2;
  }
  char *p = realloc(b->p, cap);
  if (p == NULL) {
    b->failed = true;
    return false;
  }
  b->p = p;
  b->cap = cap;
  return true;
}

void admin_buf_put(struct admin_buf *b, const char *s, size_t len)
{
  if (!admin_buf_reserve(b, len)) {
    return;
  }
  memcpy(b->p + b->len, s, len);
  b->len += len;
  b->p[b->len] = '\0';
}

void admin_buf_puts(struct admin_buf *b, const char *s)
{
  admin_buf_put(b, s, strlen(s));
}

void admin_buf_printf(struct admin_buf *b, const char *fmt, ...)
{
  char small[256];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(small, sizeof small, fmt, ap);
  va_end(ap);
  if (n < 0) {
    b->failed = true;
    return;
  }
  if ((size_t)n < sizeof small) {
    admin_buf_put(b, small, (size_t)n);
    return;
  }
  if (!admin_buf_reserve(b, (size_t)n)) {
    return;
  }
  va_start(ap, fmt);
  vsnprintf(b->p + b->len, (size_t)n + 1, fmt, ap);
  va_end(ap);
  b->len += (size_t)n;
}

char *admin_buf_take(struct admin_buf *b, size_t *len)
{
  if (b->failed || !admin_buf_reserve(b, 0)) {
    admin_buf_close(b);
    *len = 0;
    return NULL;
  }
  char *p = b->p;
  *len = b->len;
  size_t limit = b->limit;
  memset(b, 0, sizeof *b);
  b->limit = limit;
  return p;
}
