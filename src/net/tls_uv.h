/* tls_uv.h - the libuv side of a TLS session (prefix tls_uv_), the same
 * for every owner of one (the client port's conn.c, the node's peer.c,
 * libcairn's client/src/conn.c): the fixed buffer ciphertext is read into,
 * and the writes of what the session produced by itself (handshake
 * messages, alerts, close_notify). tls.c itself stays free of sockets and
 * of libuv.
 *
 * Context: the loop thread that runs the stream. */
#ifndef CAIRN_TLS_UV_H
#define CAIRN_TLS_UV_H

#include <stdint.h>
#include <uv.h>

/* The ciphertext read buffer: one TLS record and its overhead. */
#define TLS_UV_IN_SIZE (17u * 1024)

struct tls_session;

/* The target of a read of ciphertext (for a uv_alloc_cb): *in is
 * allocated on first use, TLS_UV_IN_SIZE bytes, and *buf points at it,
 * with length 0 when memory runs out (libuv then fails the read with
 * UV_ENOBUFS). One fixed buffer per read bounds what waits inside the
 * session. Ownership: *in is the caller's (free it once the stream is
 * closed). */
void tls_uv_in_buf(uint8_t **in, uv_buf_t *buf);

/* Writes all the ciphertext waiting in s (tls_out_pending) to stream in
 * one write of its own, so bytes leave in the order the session made
 * them. Call only while the stream is open (not closing).
 * Ownership: borrows s and stream; the bytes move into a write request
 * that frees itself when its callback fires (also when the stream's close
 * cancels it; a failed write shows as a read error or a close).
 * Returns 0 (also when nothing waits), CAIRN_ENOMEM (the bytes still wait
 * in s), or uv_write's negative code (the bytes are lost, so the session's
 * stream is broken). Owners may ignore a failure when a deadline or the
 * next read ends the connection anyway. */
int tls_uv_flush(struct tls_session *s, uv_stream_t *stream);

#endif
