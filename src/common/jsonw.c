/* jsonw.c - the one JSON writer: structure here, strings by jansson,
 * base64 by common/b64.c. See jsonw.h. */
#include "common/jsonw.h"

#include "common/b64.h"
#include "common/err.h"

#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Input bytes base64-encoded per sink call: a multiple of 3, so the pieces
 * of text join into the text of the whole. */
#define JSONW_B64_CHUNK 3072u

void jsonw_init(struct jsonw *w, jsonw_sink_fn sink, void *data, bool pretty)
{
  memset(w, 0, sizeof *w);
  w->sink = sink;
  w->data = data;
  w->pretty = pretty;
}

int jsonw_sink_file(const char *p, size_t len, void *data)
{
  return fwrite(p, 1, len, data) == len ? 0 : -1;
}

static void jsonw_fail(struct jsonw *w, int err)
{
  if (w->err == 0) {
    w->err = err;
  }
}

static void jsonw_put(struct jsonw *w, const char *p, size_t len)
{
  if (w->err == 0 && w->sink(p, len, w->data) != 0) {
    jsonw_fail(w, -EIO);
  }
}

/* Pretty documents: a line break and the indentation of the current depth. */
static void jsonw_newline(struct jsonw *w)
{
  if (!w->pretty) {
    return;
  }
  jsonw_put(w, "\n", 1);
  for (int i = 0; i < w->depth; i++) {
    jsonw_put(w, "  ", 2);
  }
}

/* A new member or element of the open container: the comma after the
 * previous one and, in pretty documents, its own line. */
static void jsonw_item(struct jsonw *w)
{
  if (w->has_items[w->depth]) {
    jsonw_put(w, ",", 1);
  }
  w->has_items[w->depth] = true;
  jsonw_newline(w);
}

/* Before any value; false when none may be written here (an earlier
 * failure, or a value in an object without its key). */
static bool jsonw_value_start(struct jsonw *w)
{
  if (w->err != 0) {
    return false;
  }
  if (w->after_key) {
    w->after_key = false; /* the key wrote the separators */
    return true;
  }
  if (w->depth == 0) {
    return true;
  }
  if (w->in_object[w->depth]) {
    jsonw_fail(w, CAIRN_EINVAL);
    return false;
  }
  jsonw_item(w);
  return true;
}

/* Each byte of a malformed sequence as U+FFFD, well-formed ones as they
 * are. Returns owned text (free()) and its length, or NULL. */
static char *jsonw_repair(const unsigned char *s, size_t len, size_t *out_len);
static size_t jsonw_utf8_seq(const unsigned char *s, size_t left);

/* A JSON string of len bytes, encoded by jansson. */
static void jsonw_put_string(struct jsonw *w, const char *p, size_t len)
{
  if (len == 0) {
    p = ""; /* jansson refuses a NULL pointer even for no bytes */
  }
  json_t *js = json_stringn(p, len); /* NULL: not UTF-8, or no memory */
  char *fixed = NULL;
  if (js == NULL && !jsonw_is_utf8(p, len)) {
    size_t fixed_len = 0;
    fixed = jsonw_repair((const unsigned char *)p, len, &fixed_len);
    js = fixed != NULL ? json_stringn(fixed, fixed_len) : NULL;
  }
  if (js == NULL) {
    jsonw_fail(w, CAIRN_ENOMEM);
  } else if (w->err == 0 && json_dump_callback(js, w->sink, w->data, JSON_ENCODE_ANY) != 0) {
    jsonw_fail(w, -EIO);
  }
  json_decref(js);
  free(fixed);
}

void jsonw_key(struct jsonw *w, const char *key)
{
  if (w->err != 0) {
    return;
  }
  if (w->depth == 0 || !w->in_object[w->depth] || w->after_key) {
    jsonw_fail(w, CAIRN_EINVAL);
    return;
  }
  jsonw_item(w);
  jsonw_put_string(w, key, strlen(key));
  jsonw_put(w, w->pretty ? ": " : ":", w->pretty ? 2 : 1);
  w->after_key = true;
}

static void jsonw_open(struct jsonw *w, bool object)
{
  if (!jsonw_value_start(w)) {
    return;
  }
  if (w->depth >= JSONW_MAX_DEPTH) {
    jsonw_fail(w, CAIRN_EINVAL);
    return;
  }
  jsonw_put(w, object ? "{" : "[", 1);
  w->depth++;
  w->in_object[w->depth] = object;
  w->has_items[w->depth] = false;
}

static void jsonw_close(struct jsonw *w, bool object)
{
  if (w->err != 0) {
    return;
  }
  if (w->depth == 0 || w->in_object[w->depth] != object || w->after_key) {
    jsonw_fail(w, CAIRN_EINVAL);
    return;
  }
  bool had_items = w->has_items[w->depth];
  w->depth--;
  if (had_items) {
    jsonw_newline(w); /* an empty container stays "{}" / "[]" */
  }
  jsonw_put(w, object ? "}" : "]", 1);
}

void jsonw_object_begin(struct jsonw *w)
{
  jsonw_open(w, true);
}
void jsonw_object_end(struct jsonw *w)
{
  jsonw_close(w, true);
}
void jsonw_array_begin(struct jsonw *w)
{
  jsonw_open(w, false);
}
void jsonw_array_end(struct jsonw *w)
{
  jsonw_close(w, false);
}

void jsonw_stringn(struct jsonw *w, const void *p, size_t len)
{
  if (jsonw_value_start(w)) {
    jsonw_put_string(w, p, len);
  }
}

int jsonw_quote(jsonw_sink_fn sink, void *data, const void *p, size_t len)
{
  struct jsonw w;
  jsonw_init(&w, sink, data, false);
  jsonw_stringn(&w, p, len);
  return w.err;
}

void jsonw_string(struct jsonw *w, const char *s)
{
  if (s == NULL) {
    jsonw_null(w);
    return;
  }
  jsonw_stringn(w, s, strlen(s));
}

void jsonw_base64(struct jsonw *w, const void *p, size_t len)
{
  if (!jsonw_value_start(w)) {
    return;
  }
  const unsigned char *s = p;
  char text[B64_ENCODED_LEN(JSONW_B64_CHUNK) + 1];
  jsonw_put(w, "\"", 1);
  for (size_t done = 0; done < len;) {
    size_t k = len - done < JSONW_B64_CHUNK ? len - done : JSONW_B64_CHUNK;
    jsonw_put(w, text, b64_encode(s + done, k, text));
    done += k;
  }
  jsonw_put(w, "\"", 1);
}

/* A number's text; printf gives both ranges exactly (jansson's integers
 * stop at INT64_MAX). */
static void jsonw_number(struct jsonw *w, const char *text)
{
  if (jsonw_value_start(w)) {
    jsonw_put(w, text, strlen(text));
  }
}

void jsonw_i64(struct jsonw *w, int64_t v)
{
  char text[24];
  snprintf(text, sizeof text, "%" PRId64, v);
  jsonw_number(w, text);
}

void jsonw_u64(struct jsonw *w, uint64_t v)
{
  char text[24];
  snprintf(text, sizeof text, "%" PRIu64, v);
  jsonw_number(w, text);
}

void jsonw_bool(struct jsonw *w, bool v)
{
  jsonw_number(w, v ? "true" : "false");
}

void jsonw_null(struct jsonw *w)
{
  jsonw_number(w, "null");
}

void jsonw_bytes_member(struct jsonw *w, const char *key, const void *data, size_t len)
{
  jsonw_key(w, key);
  if (data == NULL) {
    jsonw_null(w);
    return;
  }
  if (jsonw_is_utf8(data, len)) {
    jsonw_stringn(w, data, len);
    return;
  }
  jsonw_null(w);
  char k64[128];
  int n = snprintf(k64, sizeof k64, "%s_base64", key);
  if (n < 0 || (size_t)n >= sizeof k64) {
    jsonw_fail(w, CAIRN_EINVAL); /* keys are the program's own short names */
    return;
  }
  jsonw_key(w, k64);
  jsonw_base64(w, data, len);
}

int jsonw_end(struct jsonw *w)
{
  if (w->err == 0 && (w->depth != 0 || w->after_key)) {
    jsonw_fail(w, CAIRN_EINVAL);
  }
  jsonw_put(w, "\n", 1);
  return w->err;
}

/* ---- UTF-8 ---- */

/* The length of the well-formed sequence at s (left > 0 bytes), or 0. */
static size_t jsonw_utf8_seq(const unsigned char *s, size_t left)
{
  unsigned char c = s[0];
  size_t n;
  uint32_t cp;
  if (c < 0x80) {
    return 1;
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
    return 0; /* a continuation byte first, 0xc0/0xc1, or 0xf5.. */
  }
  if (left - 1 < n) {
    return 0;
  }
  for (size_t k = 1; k <= n; k++) {
    if ((s[k] & 0xc0) != 0x80) {
      return 0;
    }
    cp = cp << 6 | (s[k] & 0x3f);
  }
  if ((n == 2 && cp < 0x800) || (n == 3 && cp < 0x10000) || cp > 0x10ffff ||
      (cp >= 0xd800 && cp <= 0xdfff)) {
    return 0; /* overlong, beyond Unicode, or a surrogate */
  }
  return n + 1;
}

bool jsonw_is_utf8(const void *p, size_t len)
{
  const unsigned char *s = p;
  for (size_t i = 0; i < len;) {
    size_t n = jsonw_utf8_seq(s + i, len - i);
    if (n == 0) {
      return false;
    }
    i += n;
  }
  return true;
}

static char *jsonw_repair(const unsigned char *s, size_t len, size_t *out_len)
{
  static const char replacement[] = "\xef\xbf\xbd"; /* U+FFFD */
  if (len > SIZE_MAX / 3) {
    return NULL;
  }
  char *out = malloc(len * 3 + 1);
  if (out == NULL) {
    return NULL;
  }
  size_t o = 0;
  for (size_t i = 0; i < len;) {
    size_t n = jsonw_utf8_seq(s + i, len - i);
    if (n == 0) {
      memcpy(out + o, replacement, 3);
      o += 3;
      i++;
      continue;
    }
    memcpy(out + o, s + i, n);
    o += n;
    i += n;
  }
  *out_len = o;
  return out;
}
