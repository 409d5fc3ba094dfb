/* output.h - what the `cairn` command prints: JSON for --json (the
 * project's one JSON writer, common/jsonw.h, under the CLI's names: strings
 * escaped by jansson, bytes that are not UTF-8 never written as text) and
 * column-aligned tables for people.
 *
 * Both write to a FILE the caller owns and keep no other state than what
 * their struct holds. Context: the CLI's one thread. */
#ifndef CAIRN_CLI_OUTPUT_H
#define CAIRN_CLI_OUTPUT_H

#include "common/jsonw.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* ---- JSON ---- */

#define OJ_MAX_DEPTH JSONW_MAX_DEPTH

/* A JSON writer. Values are written in document order: inside an object,
 * oj_key() then one value; inside an array, values one after another.
 * pretty: two-space indentation and one member per line; otherwise the
 * whole document on one line (JSON Lines, as `consume --json` prints). A
 * misuse (a value without a key in an object, nesting deeper than
 * OJ_MAX_DEPTH) is a programming error caught by assert. A failed write to
 * f (a closed pipe) ends the document's output quietly. */
struct oj {
  FILE *f;
  struct jsonw jw;
};

/* Starts a document on f (borrowed; must outlive the writer). */
void oj_init(struct oj *j, FILE *f, bool pretty);

void oj_object_begin(struct oj *j);
void oj_object_end(struct oj *j);
void oj_array_begin(struct oj *j);
void oj_array_end(struct oj *j);
/* The next member's name (NUL-terminated, escaped as a string). */
void oj_key(struct oj *j, const char *key);
/* A NUL-terminated string; NULL writes null. */
void oj_str(struct oj *j, const char *s);
/* len bytes as a JSON string (NUL written as \u0000). Bytes that are not
 * well-formed UTF-8 come out as U+FFFD each (jsonw.h); to keep them, use
 * oj_bytes_member. */
void oj_strn(struct oj *j, const void *p, size_t len);
/* len bytes as a base64 string (RFC 4648, with padding). */
void oj_base64(struct oj *j, const void *p, size_t len);
void oj_int(struct oj *j, int64_t v);
void oj_uint(struct oj *j, uint64_t v);
void oj_bool(struct oj *j, bool v);
void oj_null(struct oj *j);
/* Ends the document: a newline after the top-level value. */
void oj_end(struct oj *j);

/* Whether len bytes are well-formed UTF-8 (no overlong forms, no
 * surrogates, nothing above U+10FFFF). */
bool oj_is_utf8(const void *p, size_t len);

/* key + bytes as JSON wants them: "key": "text" when the bytes are UTF-8,
 * else "key": null and "key_base64": "...". data NULL writes "key": null
 * (an absent key, as opposed to an empty one). */
void oj_bytes_member(struct oj *j, const char *key, const void *data, size_t len);

/* ---- tables ---- */

#define TBL_MAX_COLS 12

/* A table for people: a header row, then rows; columns are as wide as
 * their widest cell, separated by two blanks. Cells are copied. */
struct tbl {
  int ncols;
  const char *head[TBL_MAX_COLS];
  char **cells; /* rows * ncols, owned */
  size_t rows;
  size_t cap;
};

/* ncols headers (borrowed static strings). */
void tbl_init(struct tbl *t, int ncols, const char *const *head);
/* Appends a row of t->ncols cells (borrowed; copied; NULL prints "-").
 * Returns 0 or -ENOMEM. */
int tbl_row(struct tbl *t, const char *const *cells) __attribute__((warn_unused_result));
/* Prints the table to f. */
void tbl_print(const struct tbl *t, FILE *f);
void tbl_free(struct tbl *t);

#endif
