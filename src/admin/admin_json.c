/* admin_json.c - a small JSON writer. See admin_json.h. */
#include "admin/admin_json.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

void admin_json_init(struct admin_json *w, struct admin_buf *b)
{
  memset(w, 0, sizeof *w);
  w->b = b;
}

void admin_json_quote(struct admin_buf *b, const char *s)
{
  admin_buf_put(b, "\"", 1);
  const char *run = s; /* bytes that need no escape, not yet written */
  for (const char *p = s; *p != '\0'; p++) {
    unsigned char c = (unsigned char)*p;
    const char *esc = NULL;
    char hex[8];
    switch (c) {
    case '"':
      esc = "\\\"";
      break;
    case '\\':
      esc = "\\\\";
      break;
    case '\n':
      esc = "\\n";
      break;
    case '\r':
      esc = "\\r";
      break;
    case '\t':
      esc = "\\t";
      break;
    case '\b':
      esc = "\\b";
      break;
    case '\f':
      esc = "\\f";
      break;
    default:
      if (c < 0x20 || c == 0x7f) {
        snprintf(hex, sizeof hex, "\\u%04x", c);
        esc = hex;
      }
      break;
    }
    if (esc != NULL) {
      admin_buf_put(b, run, (size_t)(p - run));
      admin_buf_puts(b, esc);
      run = p + 1;
    }
  }
  admin_buf_puts(b, run);
  admin_buf_put(b, "\"", 1);
}

/* Writes the separator a new value needs; false on misuse. */
static bool admin_json_value_start(struct admin_json *w)
{
  if (w->depth > 0) {
    int d = w->depth - 1;
    if (w->in_object[d] && !w->after_key) {
      w->b->failed = true; /* a value in an object needs its key first */
      return false;
    }
    if (!w->in_object[d]) {
      if (w->has_items[d]) {
        admin_buf_put(w->b, ",", 1);
      }
      w->has_items[d] = true;
    }
  }
  w->after_key = false;
  return true;
}

void admin_json_key(struct admin_json *w, const char *key)
{
  int d = w->depth - 1;
  if (d < 0 || !w->in_object[d] || w->after_key) {
    w->b->failed = true;
    return;
  }
  if (w->has_items[d]) {
    admin_buf_put(w->b, ",", 1);
  }
  w->has_items[d] = true;
  admin_json_quote(w->b, key);
  admin_buf_put(w->b, ":", 1);
  w->after_key = true;
}

static void admin_json_open(struct admin_json *w, bool object)
{
  if (!admin_json_value_start(w)) {
    return;
  }
  if (w->depth >= ADMIN_JSON_MAX_DEPTH) {
    w->b->failed = true;
    return;
  }
  w->in_object[w->depth] = object;
  w->has_items[w->depth] = false;
  w->depth++;
  admin_buf_put(w->b, object ? "{" : "[", 1);
}

static void admin_json_close(struct admin_json *w, bool object)
{
  if (w->depth == 0 || w->in_object[w->depth - 1] != object || w->after_key) {
    w->b->failed = true;
    return;
  }
  w->depth--;
  admin_buf_put(w->b, object ? "}" : "]", 1);
}

void admin_json_object_begin(struct admin_json *w)
{
  admin_json_open(w, true);
}
void admin_json_object_end(struct admin_json *w)
{
  admin_json_close(w, true);
}
void admin_json_array_begin(struct admin_json *w)
{
  admin_json_open(w, false);
}
void admin_json_array_end(struct admin_json *w)
{
  admin_json_close(w, false);
}

void admin_json_string(struct admin_json *w, const char *s)
{
  if (admin_json_value_start(w)) {
    admin_json_quote(w->b, s != NULL ? s : "");
  }
}

void admin_json_u64(struct admin_json *w, uint64_t v)
{
  if (admin_json_value_start(w)) {
    admin_buf_printf(w->b, "%" PRIu64, v);
  }
}

void admin_json_i64(struct admin_json *w, int64_t v)
{
  if (admin_json_value_start(w)) {
    admin_buf_printf(w->b, "%" PRId64, v);
  }
}

void admin_json_bool(struct admin_json *w, bool v)
{
  if (admin_json_value_start(w)) {
    admin_buf_puts(w->b, v ? "true" : "false");
  }
}

void admin_json_null(struct admin_json *w)
{
  if (admin_json_value_start(w)) {
    admin_buf_puts(w->b, "null");
  }
}
