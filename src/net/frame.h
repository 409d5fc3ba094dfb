/* frame.h - the client port's frame: incremental decoding over a byte
 * buffer and encoding of a frame header for a gather write. Shared by the
 * node (src/net/conn.c) and the client library, so no libuv here.
 *
 * Byte layout (proto/client.proto, docs/protocol.md), big-endian,
 * version FRAME_VERSION = 1 (the protocol version itself is negotiated by
 * Hello; the layout below never changes):
 *
 *    0  u32 BE  frame length L: the bytes after this field (L >= 4)
 *    4  u32 BE  envelope length E (E <= L - 4)
 *    8  E bytes an Envelope, protobuf (cairn.client.Envelope)
 *  8+E  L-4-E   payload: raw record batches, never protobuf-encoded
 *
 * There is no checksum in the frame: TCP's covers transit, and every record
 * batch in the payload carries its own CRC-32C, checked at ingress.
 *
 * Decoding results, each distinct:
 *   FRAME_NEED_MORE      f->need more bytes are needed before anything can
 *                        be decided (the rest of the header or of the frame);
 *   FRAME_WHOLE          one whole frame, borrowed from the buffer;
 *   CAIRN_ETOOLARGE      L > max_frame_bytes, reported as soon as the 4
 *                        bytes of L are there (before the frame arrives);
 *   CAIRN_EFRAMEEMPTY    L == 0;
 *   CAIRN_EBADFRAME      0 < L < 4, or E > L - 4.
 */
#ifndef CAIRN_FRAME_H
#define CAIRN_FRAME_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#include "client.pb-c.h"

#define FRAME_VERSION 1
#define FRAME_HEADER_SIZE 8       /* L and E */
#define FRAME_LENGTH_FIELD_SIZE 4 /* L counts the bytes after this */
#define FRAME_MIN_LENGTH 4        /* the smallest valid L: E = 0, no payload */
/* The node's default limit on L (Hello tells clients the one in force):
 * a 16 MiB batch (BATCH_DEFAULT_MAX_BYTES) plus room for its envelope. */
#define FRAME_DEFAULT_MAX_BYTES (16u * 1024 * 1024 + 64 * 1024)
/* No limit may exceed this: frame sizes then always fit an int. */
#define FRAME_MAX_BYTES_LIMIT (1u << 30)

/* Envelope messages nest at most this deep (the schema needs 4). */
#define FRAME_ENVELOPE_MAX_DEPTH 16

/* Positive decode results (errors are negative). */
enum frame_status { FRAME_NEED_MORE = 1, FRAME_WHOLE = 2 };

/* One decoded frame. Every pointer is borrowed from the buffer passed to
 * frame_decode() and valid until that buffer is changed or freed. */
struct frame {
  size_t size;             /* bytes of the whole frame, 4 + L (FRAME_WHOLE) */
  size_t need;             /* FRAME_NEED_MORE: how many more bytes are needed
                            * at least (the header's rest, or the frame's) */
  uint32_t length;         /* L, once known (0 before) */
  const uint8_t *envelope; /* E bytes */
  size_t envelope_len;
  const uint8_t *payload; /* L - 4 - E bytes */
  size_t payload_len;
};

/* Decodes the frame at the start of p[0..len), never reading past len.
 * max_frame_bytes bounds L (at most FRAME_MAX_BYTES_LIMIT).
 * Returns FRAME_WHOLE (f filled; consume f->size bytes), FRAME_NEED_MORE
 * (f->need set, f->length set once the 4 bytes of L are there), or a
 * negative code listed at the top of this file (then f->length holds L when
 * it was read). Ownership: borrows p; f points into it. Context: any
 * thread. */
__attribute__((warn_unused_result)) int frame_decode(const uint8_t *p, size_t len,
                                                     uint32_t max_frame_bytes, struct frame *f);

/* True when p[0..len) starts like a TLS handshake record (content type
 * 22, protocol major version 3): a TLS client talking to a plaintext
 * port, whose first 4 bytes read as a length of about 369 MB. Needs
 * len >= 3 (false below). Borrows p. Context: any thread. */
bool frame_looks_like_tls(const uint8_t *p, size_t len);

/* Unpacks the envelope of a decoded frame. Returns 0 and *env (owned: free
 * with cairn__client__envelope__free_unpacked(*env, NULL)), or
 * CAIRN_EBADENVELOPE (not protobuf, a field number 0 anywhere, or nested
 * deeper than FRAME_ENVELOPE_MAX_DEPTH). The envelope copies what it needs: it stays valid
 * after the buffer is gone. Context: any thread. */
__attribute__((warn_unused_result)) int frame_unpack_envelope(const struct frame *f,
                                                              Cairn__Client__Envelope **env);

/* Bytes of the header that frame_encode_header() writes for env: 8 + the
 * packed envelope. Context: any thread. */
size_t frame_header_size(const Cairn__Client__Envelope *env);

/* The Error of env's body: the body message's field named "error" (every
 * answer has one, `Error error = 1`), found through the protobuf-c
 * descriptors so one function serves every answer. NULL when the body
 * has none or is not set. Returns borrowed (valid as long as env). */
const Cairn__Client__Error *frame_body_error(const Cairn__Client__Envelope *env);

/* Writes L, E and the packed env into buf (at least frame_header_size(env)
 * bytes), for a frame whose payload is payload_len bytes that the caller
 * sends right after the header (writev, uv_write, sendfile: the payload is
 * never copied here). Returns 0 or CAIRN_ETOOLARGE when L would pass
 * FRAME_MAX_BYTES_LIMIT. Ownership: borrows env and buf. Context: any
 * thread. */
__attribute__((warn_unused_result)) int frame_encode_header(const Cairn__Client__Envelope *env,
                                                            uint64_t payload_len, uint8_t *buf);

/* frame_encode_header() into a new buffer, with the payload given as iov
 * regions (only their lengths are read). Returns 0 with *hdr (owned: free
 * with free()) and *hdr_len, or CAIRN_ETOOLARGE / CAIRN_ENOMEM. Context:
 * any thread. */
__attribute__((warn_unused_result)) int frame_encode(const Cairn__Client__Envelope *env,
                                                     const struct iovec *payload, int npayload,
                                                     uint8_t **hdr, size_t *hdr_len);

/* Sum of the lengths of iov[0..n). */
uint64_t frame_iov_len(const struct iovec *iov, int n);

#endif
