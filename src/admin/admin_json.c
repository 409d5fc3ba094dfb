/* admin_json.c - the admin port's names for the one JSON writer
 * (common/jsonw.c), writing into an admin_buf. See admin_json.h. */
#include "admin/admin_json.h"

#include <string.h>

/* jsonw's sink: appends to the admin_buf, -1 once it failed (its limit,
 * or no memory). */
static int admin_json_sink(const char *p, size_t len, void *data)
{
  struct admin_buf *b = data;
  admin_buf_put(b, p, len);
  return b->failed ? -1 : 0;
}

/* A failure of the writer (misuse, no memory) fails the answer too: the
 * caller then sends 500, never a truncated document. */
static void admin_json_check(struct admin_json *w)
{
  if (w->jw.err != 0) {
    w->b->failed = true;
  }
}

void admin_json_init(struct admin_json *w, struct admin_buf *b)
{
  memset(w, 0, sizeof *w);
  w->b = b;
  jsonw_init(&w->jw, admin_json_sink, b, false);
}

void admin_json_quote(struct admin_buf *b, const char *s)
{
  if (jsonw_quote(admin_json_sink, b, s, strlen(s)) != 0) {
    b->failed = true;
  }
}

void admin_json_object_begin(struct admin_json *w)
{
  jsonw_object_begin(&w->jw);
  admin_json_check(w);
}
void admin_json_object_end(struct admin_json *w)
{
  jsonw_object_end(&w->jw);
  admin_json_check(w);
}
void admin_json_array_begin(struct admin_json *w)
{
  jsonw_array_begin(&w->jw);
  admin_json_check(w);
}
void admin_json_array_end(struct admin_json *w)
{
  jsonw_array_end(&w->jw);
  admin_json_check(w);
}

void admin_json_key(struct admin_json *w, const char *key)
{
  jsonw_key(&w->jw, key);
  admin_json_check(w);
}

void admin_json_string(struct admin_json *w, const char *s)
{
  jsonw_string(&w->jw, s != NULL ? s : "");
  admin_json_check(w);
}

void admin_json_u64(struct admin_json *w, uint64_t v)
{
  jsonw_u64(&w->jw, v);
  admin_json_check(w);
}

void admin_json_i64(struct admin_json *w, int64_t v)
{
  jsonw_i64(&w->jw, v);
  admin_json_check(w);
}

void admin_json_bool(struct admin_json *w, bool v)
{
  jsonw_bool(&w->jw, v);
  admin_json_check(w);
}

void admin_json_null(struct admin_json *w)
{
  jsonw_null(&w->jw);
  admin_json_check(w);
}
