/* admin_json.h - a small JSON writer into an admin_buf: objects, arrays,
 * strings with RFC 8259 escaping, integers and booleans; commas and
 * nesting are kept by the writer, so callers only name values.
 *
 * Strings are escaped byte by byte: '"', '\\' and the C0 controls (as \n,
 * \t, ... or \u00XX) and DEL as \u007f; bytes >= 0x80 are copied (the
 * caller passes UTF-8; metadata names are ASCII by their own rules).
 *
 * Misuse (a value where a key is needed, deeper than ADMIN_JSON_MAX_DEPTH,
 * closing what is not open) latches the buffer as failed, like running
 * past its limit.
 *
 * Context: any thread; one writer per buffer. */
#ifndef CAIRN_ADMIN_JSON_H
#define CAIRN_ADMIN_JSON_H

#include "admin/admin_buf.h"

#include <stdbool.h>
#include <stdint.h>

#define ADMIN_JSON_MAX_DEPTH 16

struct admin_json {
  struct admin_buf *b;
  int depth;
  bool in_object[ADMIN_JSON_MAX_DEPTH];
  bool has_items[ADMIN_JSON_MAX_DEPTH];
  bool after_key; /* a key was written: its value comes next */
};

/* Starts writing into b (borrowed until the last call). */
void admin_json_init(struct admin_json *w, struct admin_buf *b);

void admin_json_object_begin(struct admin_json *w);
void admin_json_object_end(struct admin_json *w);
void admin_json_array_begin(struct admin_json *w);
void admin_json_array_end(struct admin_json *w);

/* The key of the next member of the open object. */
void admin_json_key(struct admin_json *w, const char *key);

void admin_json_string(struct admin_json *w, const char *s);
void admin_json_u64(struct admin_json *w, uint64_t v);
void admin_json_i64(struct admin_json *w, int64_t v);
void admin_json_bool(struct admin_json *w, bool v);
void admin_json_null(struct admin_json *w);

/* Appends s as a quoted, escaped JSON string to b (no separators). */
void admin_json_quote(struct admin_buf *b, const char *s);

#endif
