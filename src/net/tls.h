/* tls.h - TLS for the client port with OpenSSL memory BIOs: no socket and
 * no blocking call here. The owner (conn.c) feeds the ciphertext it read
 * from the socket, takes plaintext out, puts plaintext in, and writes the
 * ciphertext that comes out; everything runs on the loop thread.
 *
 *   socket --read--> tls_feed --> [rbio] SSL [wbio] --> tls_take_out --write--> socket
 *                                   |   ^
 *                       tls_read <--+   +-- tls_write
 *
 * struct tls_ctx holds the node's settings (certificate, key, optional CA
 * for client certificates, ciphers) as an SSL_CTX; tls_ctx_reload() builds
 * a new SSL_CTX from the same files and swaps it in: sessions already open
 * keep the one they started with (OpenSSL counts its references), new
 * ones get the new one, so a reload drops no connection. TLS 1.2 is the
 * minimum; renegotiation is off (a TLS 1.2 peer cannot start a handshake
 * in the middle of the stream, so a tls_write never waits for input).
 *
 * The client side (libcairn) uses the same sessions from a client context
 * (tls_client_ctx_new): it verifies the node's certificate against a CA
 * file (or the system's CAs) and the host or IP address it dialed, and may
 * present a certificate of its own (mutual TLS).
 *
 * Context: the loop thread (a tls_ctx may be shared by every session of
 * that loop). */
#ifndef CAIRN_TLS_H
#define CAIRN_TLS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define TLS_ERRMSG_SIZE 256
#define TLS_PATH_MAX 4096
#define TLS_CIPHERS_MAX 512
#define TLS_PRINCIPAL_MAX 256
#define TLS_HANDSHAKE_TIMEOUT_MS 10000

struct tls_config {
  const char *cert_file; /* PEM: the node's certificate (chain); required */
  const char *key_file;  /* PEM: its private key; required */
  const char *ca_file;   /* PEM: CAs for client certificates; NULL or "": no client
                            certificates asked for (no mutual TLS) */
  const char *ciphers;   /* OpenSSL cipher list for TLS 1.2 (TLS 1.3 suites are
                            OpenSSL's defaults); NULL or "": OpenSSL's defaults */
};

struct tls_ctx;
struct tls_session;

/* Loads cfg's files into a new context. Returns 0 with *out (owned: free
 * with tls_ctx_free), or CAIRN_ETLS with errmsg naming the file and
 * OpenSSL's reason. cfg is copied. */
__attribute__((warn_unused_result)) int
tls_ctx_new(const struct tls_config *cfg, struct tls_ctx **out, char *errmsg, size_t errlen);

/* Reads the same files again (a renewed certificate or key) and, when they
 * load, makes new sessions use them; open sessions are untouched. Returns
 * 0, or CAIRN_ETLS with errmsg (the old settings stay in force). */
__attribute__((warn_unused_result)) int tls_ctx_reload(struct tls_ctx *ctx, char *errmsg,
                                                       size_t errlen);

/* True when the context asks for and verifies client certificates. */
bool tls_ctx_mutual(const struct tls_ctx *ctx);

/* Frees ctx; sessions still open keep what they need. NULL is fine. */
void tls_ctx_free(struct tls_ctx *ctx);

/* A client context: cfg->ca_file verifies the node (NULL or "": the
 * system's default CAs), cfg->cert_file/key_file (both or neither) are the
 * client's certificate for mutual TLS, cfg->ciphers as for the node.
 * Returns 0 with *out (free with tls_ctx_free) or CAIRN_ETLS with errmsg. */
__attribute__((warn_unused_result)) int
tls_client_ctx_new(const struct tls_config *cfg, struct tls_ctx **out, char *errmsg, size_t errlen);

/* A client-side session on ctx for host (a name or an IP literal: sent as
 * SNI for names, and the node's certificate must match it). Drive the
 * handshake with tls_read(s, NULL, 0, ...) at once: the ClientHello then
 * waits in tls_take_out(). Returns 0 with *out, or CAIRN_ENOMEM. */
__attribute__((warn_unused_result)) int
tls_client_session_new(struct tls_ctx *ctx, const char *host, struct tls_session **out);

/* A server-side session on ctx. Returns 0 with *out (owned: free with
 * tls_session_free) or CAIRN_ENOMEM. */
__attribute__((warn_unused_result)) int tls_session_new(struct tls_ctx *ctx,
                                                        struct tls_session **out);

void tls_session_free(struct tls_session *s);

/* Hands len bytes read from the socket to the session. Returns 0 or
 * CAIRN_ENOMEM. */
__attribute__((warn_unused_result)) int tls_feed(struct tls_session *s, const uint8_t *data,
                                                 size_t len);

/* Results of tls_read() besides a byte count. */
#define TLS_WANT_READ 0 /* no plaintext until more ciphertext is fed */
#define TLS_EOF (-1)    /* the peer sent close_notify */

/* Decrypts up to cap bytes into buf, driving the handshake first. Returns
 * the number of bytes (> 0), TLS_WANT_READ, TLS_EOF, or CAIRN_ETLS with
 * the reason in errmsg (a failed handshake, a bad record: close the
 * connection after sending tls_take_out()'s alert). Either way, check
 * tls_out_pending() after: the handshake has answers to send. */
__attribute__((warn_unused_result)) int tls_read(struct tls_session *s, uint8_t *buf, size_t cap,
                                                 char *errmsg, size_t errlen);

/* True when plaintext or ciphertext is buffered in the session, so
 * tls_read may return data without new input. */
bool tls_read_pending(const struct tls_session *s);

/* Encrypts len bytes (all of them: the handshake must be complete).
 * Returns 0, or CAIRN_ETLS. The ciphertext waits in the session:
 * take it with tls_take_out(). */
__attribute__((warn_unused_result)) int tls_write(struct tls_session *s, const uint8_t *data,
                                                  size_t len);

/* Queues a close_notify alert (take it with tls_take_out()). */
void tls_shutdown(struct tls_session *s);

/* Ciphertext bytes waiting to be written to the socket. */
size_t tls_out_pending(const struct tls_session *s);

/* Moves up to cap waiting ciphertext bytes into buf; returns how many. */
size_t tls_take_out(struct tls_session *s, uint8_t *buf, size_t cap);

/* True once the handshake completed. */
bool tls_handshake_done(const struct tls_session *s);

/* The verified client certificate's subject common name (mutual TLS), or
 * "" when there is none. Returns borrowed, valid until the session is
 * freed. */
const char *tls_peer_principal(const struct tls_session *s);

/* The negotiated protocol and cipher ("TLSv1.3 TLS_AES_256_GCM_SHA384"),
 * for logs. Static or session strings. */
const char *tls_version(const struct tls_session *s);
const char *tls_cipher(const struct tls_session *s);

#endif
