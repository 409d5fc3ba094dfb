/* admin_buf.h - a growing text buffer with a size limit, for the admin
 * port's answers (Prometheus text, JSON, HTML).
 *
 * A write that fails (out of memory, or past the limit) latches the buffer
 * as failed: later writes do nothing, and the caller answers 500 instead of
 * a truncated document.
 *
 * Context: any thread; a buffer is used by one thread at a time. */
#ifndef CAIRN_ADMIN_BUF_H
#define CAIRN_ADMIN_BUF_H

#include <stdbool.h>
#include <stddef.h>

struct admin_buf {
  char *p; /* owned; NUL-terminated while not failed */
  size_t len;
  size_t cap;
  size_t limit; /* most bytes it may hold */
  bool failed;
};

/* An empty buffer that may grow to limit bytes. Caller allocates b. */
void admin_buf_init(struct admin_buf *b, size_t limit);

/* Frees what b owns; b may be init'ed again. */
void admin_buf_close(struct admin_buf *b);

/* Appends len bytes of s (borrowed). */
void admin_buf_put(struct admin_buf *b, const char *s, size_t len);

/* Appends a NUL-terminated string (borrowed). */
void admin_buf_puts(struct admin_buf *b, const char *s);

/* Appends printf-style text. */
void admin_buf_printf(struct admin_buf *b, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Hands the text over: returns owned (free with free()) and sets *len, or
 * NULL when b failed; b is empty afterwards. */
char *admin_buf_take(struct admin_buf *b, size_t *len);

#endif
