/* admin_json.h - the admin port's JSON into an admin_buf: the project's one
 * JSON writer (common/jsonw.h) with an admin_buf as its sink, under the
 * names the admin code uses. Compact (one line, no blanks); commas and
 * nesting are kept by the writer, so callers only name values.
 *
 * Strings are encoded by jansson through jsonw: '"', '\\' and the C0
 * controls escaped (\n, \t, ... or \u00XX); UTF-8 as it is; text that is
 * not UTF-8 gets U+FFFD for each malformed byte, never raw bytes.
 *
 * Misuse (a value where a key is needed, deeper than ADMIN_JSON_MAX_DEPTH,
 * closing what is not open) latches the buffer as failed, like running
 * past its limit, and so does the writer's own failure (out of memory).
 *
 * Context: any thread; one writer per buffer. */
#ifndef CAIRN_ADMIN_JSON_H
#define CAIRN_ADMIN_JSON_H

#include "admin/admin_buf.h"
#include "common/jsonw.h"

#include <stdbool.h>
#include <stdint.h>

#define ADMIN_JSON_MAX_DEPTH JSONW_MAX_DEPTH

struct admin_json {
  struct admin_buf *b;
  struct jsonw jw;
};

/* Starts writing into b (borrowed until the last call). */
void admin_json_init(struct admin_json *w, struct admin_buf *b);

void admin_json_object_begin(struct admin_json *w);
void admin_json_object_end(struct admin_json *w);
void admin_json_array_begin(struct admin_json *w);
void admin_json_array_end(struct admin_json *w);

/* The key of the next member of the open object. */
void admin_json_key(struct admin_json *w, const char *key);

/* A NUL-terminated string (borrowed); NULL writes "". */
void admin_json_string(struct admin_json *w, const char *s);
void admin_json_u64(struct admin_json *w, uint64_t v);
void admin_json_i64(struct admin_json *w, int64_t v);
void admin_json_bool(struct admin_json *w, bool v);
void admin_json_null(struct admin_json *w);

/* Appends s as a quoted, escaped JSON string to b (no separators). */
void admin_json_quote(struct admin_buf *b, const char *s);

#endif
