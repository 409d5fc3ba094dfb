/* jsonw.h - the one JSON writer of the project: the admin port's JSON
 * (admin_json.h) and the CLI's --json (client/cli/output.h) are thin
 * wrappers over it.
 *
 * A streaming writer: values go out in document order through a sink the
 * caller gives, so memory stays constant whatever the document's size, and
 * the writer keeps commas, nesting and (optionally) indentation. Strings are
 * encoded by jansson (RFC 8259 escaping: '"', '\\', \b \f \n \r \t, other
 * controls as \u00XX; UTF-8 checked). Text that is not well-formed UTF-8 is
 * never written as it is (that would not be JSON text): each byte of a
 * malformed sequence becomes U+FFFD. Callers that must keep such bytes use
 * jsonw_bytes_member (text, or null plus base64). Integers are written
 * exactly over the whole int64 and uint64 ranges.
 *
 * Errors latch: the first misuse (a value where a key is needed, a key
 * outside an object, deeper than JSONW_MAX_DEPTH, closing what is not
 * open) or sink failure is kept in err, and later calls write nothing.
 *
 * Context: any thread; one writer per document, used by one thread. */
#ifndef CAIRN_JSONW_H
#define CAIRN_JSONW_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define JSONW_MAX_DEPTH 16

/* Receives len bytes of output (borrowed for the call); returns 0, or -1
 * to fail the document. The same shape as jansson's json_dump_callback_t. */
typedef int (*jsonw_sink_fn)(const char *p, size_t len, void *data);

struct jsonw {
  jsonw_sink_fn sink;
  void *data;
  bool pretty;
  int depth; /* containers open */
  bool in_object[JSONW_MAX_DEPTH + 1];
  bool has_items[JSONW_MAX_DEPTH + 1];
  bool after_key; /* a key was written: its value comes next */
  int err;        /* 0, CAIRN_EINVAL (misuse), CAIRN_ENOMEM, or -EIO (the sink failed) */
};

/* Starts a document written through sink(..., data) (borrowed until the
 * last call). pretty: two-space indentation, one member per line and
 * "key": value; otherwise the whole document on one line, no blanks. */
void jsonw_init(struct jsonw *w, jsonw_sink_fn sink, void *data, bool pretty);

/* A sink for a stdio FILE * passed as data (fwrite; -1 on a short write). */
int jsonw_sink_file(const char *p, size_t len, void *data);

void jsonw_object_begin(struct jsonw *w);
void jsonw_object_end(struct jsonw *w);
void jsonw_array_begin(struct jsonw *w);
void jsonw_array_end(struct jsonw *w);

/* The next member's name in the open object (NUL-terminated, borrowed). */
void jsonw_key(struct jsonw *w, const char *key);

/* A NUL-terminated string (borrowed); NULL writes null. */
void jsonw_string(struct jsonw *w, const char *s);
/* len bytes (borrowed; may hold NUL, written \u0000) as a string. */
void jsonw_stringn(struct jsonw *w, const void *p, size_t len);
/* len bytes (borrowed) as a base64 string (b64.h). */
void jsonw_base64(struct jsonw *w, const void *p, size_t len);
void jsonw_i64(struct jsonw *w, int64_t v);
void jsonw_u64(struct jsonw *w, uint64_t v);
void jsonw_bool(struct jsonw *w, bool v);
void jsonw_null(struct jsonw *w);

/* key + bytes as JSON wants them: "key": "text" when the bytes are
 * well-formed UTF-8, else "key": null and "key_base64": "...". data NULL
 * writes "key": null (absent, as opposed to empty). */
void jsonw_bytes_member(struct jsonw *w, const char *key, const void *data, size_t len);

/* One string alone, as jsonw_stringn writes it, for a document that is
 * otherwise written by hand (the benchmarks' and test tools' reports).
 * Returns 0, CAIRN_ENOMEM or -EIO (the sink failed). */
int jsonw_quote(jsonw_sink_fn sink, void *data, const void *p, size_t len)
    __attribute__((warn_unused_result));

/* Ends the document: a newline after the top-level value. Returns w->err,
 * or CAIRN_EINVAL when a container is still open. */
int jsonw_end(struct jsonw *w) __attribute__((warn_unused_result));

/* Whether len bytes are well-formed UTF-8 (no overlong forms, no
 * surrogates, nothing above U+10FFFF; NUL is a character). */
bool jsonw_is_utf8(const void *p, size_t len);

#endif
