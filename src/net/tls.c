/* tls.c - the client port's TLS over OpenSSL memory BIOs (tls.h): context
 * loading and reload, and the per-connection session the conn drives. */
#include "net/tls.h"

#include "common/err.h"

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <arpa/inet.h>
#include <sys/socket.h>

struct tls_ctx {
  SSL_CTX *ssl;
  bool client;
  char cert_file[TLS_PATH_MAX];
  char key_file[TLS_PATH_MAX];
  char ca_file[TLS_PATH_MAX];
  char ciphers[TLS_CIPHERS_MAX];
};

struct tls_session {
  SSL *ssl;
  BIO *rbio; /* ciphertext in (owned by ssl) */
  BIO *wbio; /* ciphertext out (owned by ssl) */
  char principal[TLS_PRINCIPAL_MAX];
  bool done;
};

/* OpenSSL's queued errors as one line, appended after what; clears them. */
static void tls_errmsg(char *errmsg, size_t errlen, const char *what)
{
  char reason[160] = "";
  unsigned long e = ERR_get_error();
  if (e != 0) {
    ERR_error_string_n(e, reason, sizeof reason);
  }
  ERR_clear_error();
  snprintf(errmsg, errlen, "%s%s%s", what, reason[0] != '\0' ? ": " : "", reason);
}

static SSL_CTX *tls_ctx_build(const struct tls_ctx *ctx, char *errmsg, size_t errlen)
{
  char what[2 * TLS_PATH_MAX + 64];
  SSL_CTX *ssl = SSL_CTX_new(ctx->client ? TLS_client_method() : TLS_server_method());
  if (ssl == NULL) {
    tls_errmsg(errmsg, errlen, "SSL_CTX_new");
    return NULL;
  }
  SSL_CTX_set_min_proto_version(ssl, TLS1_2_VERSION);
  SSL_CTX_set_options(ssl, SSL_OP_NO_RENEGOTIATION | SSL_OP_CIPHER_SERVER_PREFERENCE |
                               SSL_OP_NO_COMPRESSION);
  /* Answers are written whole; buffers are released as soon as possible. */
  SSL_CTX_set_mode(ssl, SSL_MODE_RELEASE_BUFFERS);
  if (ctx->ciphers[0] != '\0' && SSL_CTX_set_cipher_list(ssl, ctx->ciphers) != 1) {
    snprintf(what, sizeof what, "--tls-ciphers '%s'", ctx->ciphers);
    goto fail;
  }
  if (ctx->client) {
    /* The node's certificate is always checked: against the CA file, or
     * the system's CAs. */
    snprintf(what, sizeof what, "CA file %s", ctx->ca_file);
    if ((ctx->ca_file[0] != '\0' ? SSL_CTX_load_verify_locations(ssl, ctx->ca_file, NULL)
                                 : SSL_CTX_set_default_verify_paths(ssl)) != 1) {
      goto fail;
    }
    SSL_CTX_set_verify(ssl, SSL_VERIFY_PEER, NULL);
    if (ctx->cert_file[0] == '\0') {
      return ssl;
    }
  }
  if (SSL_CTX_use_certificate_chain_file(ssl, ctx->cert_file) != 1) {
    snprintf(what, sizeof what, "certificate %s", ctx->cert_file);
    goto fail;
  }
  if (SSL_CTX_use_PrivateKey_file(ssl, ctx->key_file, SSL_FILETYPE_PEM) != 1) {
    snprintf(what, sizeof what, "private key %s", ctx->key_file);
    goto fail;
  }
  if (SSL_CTX_check_private_key(ssl) != 1) {
    snprintf(what, sizeof what, "private key %s does not match certificate %s", ctx->key_file,
             ctx->cert_file);
    goto fail;
  }
  if (!ctx->client && ctx->ca_file[0] != '\0') {
    if (SSL_CTX_load_verify_locations(ssl, ctx->ca_file, NULL) != 1) {
      snprintf(what, sizeof what, "CA file %s", ctx->ca_file);
      goto fail;
    }
    SSL_CTX_set_verify(ssl, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, NULL);
    STACK_OF(X509_NAME) *names = SSL_load_client_CA_file(ctx->ca_file);
    if (names != NULL) {
      SSL_CTX_set_client_CA_list(ssl, names);
    }
  }
  return ssl;
fail:
  tls_errmsg(errmsg, errlen, what);
  SSL_CTX_free(ssl);
  return NULL;
}

static int tls_copy(char *dst, size_t cap, const char *src)
{
  size_t n = src != NULL ? strlen(src) : 0;
  if (n >= cap) {
    return CAIRN_ETLS;
  }
  memcpy(dst, src != NULL ? src : "", n);
  dst[n] = '\0';
  return 0;
}

static int tls_ctx_make(const struct tls_config *cfg, bool client, struct tls_ctx **out,
                        char *errmsg, size_t errlen)
{
  struct tls_ctx *ctx = calloc(1, sizeof *ctx);
  if (ctx == NULL) {
    snprintf(errmsg, errlen, "out of memory");
    return CAIRN_ENOMEM;
  }
  ctx->client = client;
  bool cert = cfg->cert_file != NULL && cfg->cert_file[0] != '\0';
  bool key = cfg->key_file != NULL && cfg->key_file[0] != '\0';
  if (client ? cert != key : !(cert && key)) {
    snprintf(errmsg, errlen, "TLS needs both a certificate and a key");
    free(ctx);
    return CAIRN_ETLS;
  }
  if (tls_copy(ctx->cert_file, sizeof ctx->cert_file, cfg->cert_file) != 0 ||
      tls_copy(ctx->key_file, sizeof ctx->key_file, cfg->key_file) != 0 ||
      tls_copy(ctx->ca_file, sizeof ctx->ca_file, cfg->ca_file) != 0 ||
      tls_copy(ctx->ciphers, sizeof ctx->ciphers, cfg->ciphers) != 0) {
    snprintf(errmsg, errlen, "a TLS path or cipher list is too long");
    free(ctx);
    return CAIRN_ETLS;
  }
  ctx->ssl = tls_ctx_build(ctx, errmsg, errlen);
  if (ctx->ssl == NULL) {
    free(ctx);
    return CAIRN_ETLS;
  }
  *out = ctx;
  return 0;
}

int tls_ctx_new(const struct tls_config *cfg, struct tls_ctx **out, char *errmsg, size_t errlen)
{
  return tls_ctx_make(cfg, false, out, errmsg, errlen);
}

int tls_client_ctx_new(const struct tls_config *cfg, struct tls_ctx **out, char *errmsg,
                       size_t errlen)
{
  return tls_ctx_make(cfg, true, out, errmsg, errlen);
}

int tls_ctx_reload(struct tls_ctx *ctx, char *errmsg, size_t errlen)
{
  SSL_CTX *ssl = tls_ctx_build(ctx, errmsg, errlen);
  if (ssl == NULL) {
    return CAIRN_ETLS;
  }
  SSL_CTX_free(ctx->ssl); /* open sessions hold their own reference */
  ctx->ssl = ssl;
  return 0;
}

bool tls_ctx_mutual(const struct tls_ctx *ctx)
{
  return ctx->client ? ctx->cert_file[0] != '\0' : ctx->ca_file[0] != '\0';
}

void tls_ctx_free(struct tls_ctx *ctx)
{
  if (ctx != NULL) {
    SSL_CTX_free(ctx->ssl);
    free(ctx);
  }
}

static int tls_session_make(struct tls_ctx *ctx, const char *host, struct tls_session **out);

int tls_session_new(struct tls_ctx *ctx, struct tls_session **out)
{
  return tls_session_make(ctx, NULL, out);
}

int tls_client_session_new(struct tls_ctx *ctx, const char *host, struct tls_session **out)
{
  return tls_session_make(ctx, host, out);
}

static int tls_session_make(struct tls_ctx *ctx, const char *host, struct tls_session **out)
{
  struct tls_session *s = calloc(1, sizeof *s);
  if (s == NULL) {
    return CAIRN_ENOMEM;
  }
  s->ssl = SSL_new(ctx->ssl);
  s->rbio = BIO_new(BIO_s_mem());
  s->wbio = BIO_new(BIO_s_mem());
  if (s->ssl == NULL || s->rbio == NULL || s->wbio == NULL) {
    SSL_free(s->ssl);
    BIO_free(s->rbio);
    BIO_free(s->wbio);
    free(s);
    ERR_clear_error();
    return CAIRN_ENOMEM;
  }
  /* An empty memory BIO reports "retry", not EOF. */
  BIO_set_mem_eof_return(s->rbio, -1);
  BIO_set_mem_eof_return(s->wbio, -1);
  SSL_set_bio(s->ssl, s->rbio, s->wbio);
  if (!ctx->client) {
    SSL_set_accept_state(s->ssl);
    *out = s;
    return 0;
  }
  /* The node's certificate must name the host or IP address dialed. */
  unsigned char ip[16];
  bool literal = inet_pton(AF_INET, host, ip) == 1 || inet_pton(AF_INET6, host, ip) == 1;
  X509_VERIFY_PARAM *param = SSL_get0_param(s->ssl);
  int ok = literal ? X509_VERIFY_PARAM_set1_ip_asc(param, host)
                   : (X509_VERIFY_PARAM_set1_host(param, host, 0) == 1 &&
                      SSL_set_tlsext_host_name(s->ssl, host) == 1);
  if (ok != 1) {
    tls_session_free(s);
    ERR_clear_error();
    return CAIRN_ENOMEM;
  }
  SSL_set_connect_state(s->ssl);
  *out = s;
  return 0;
}

void tls_session_free(struct tls_session *s)
{
  if (s != NULL) {
    SSL_free(s->ssl); /* frees both BIOs */
    free(s);
  }
}

int tls_feed(struct tls_session *s, const uint8_t *data, size_t len)
{
  if (len == 0) {
    return 0;
  }
  int n = BIO_write(s->rbio, data, (int)len);
  return n == (int)len ? 0 : CAIRN_ENOMEM;
}

static void tls_note_peer(struct tls_session *s)
{
  X509 *peer = SSL_get1_peer_certificate(s->ssl);
  if (peer == NULL) {
    return;
  }
  X509_NAME *name = X509_get_subject_name(peer);
  if (name != NULL &&
      X509_NAME_get_text_by_NID(name, NID_commonName, s->principal, sizeof s->principal) < 0) {
    s->principal[0] = '\0';
  }
  X509_free(peer);
}

int tls_read(struct tls_session *s, uint8_t *buf, size_t cap, char *errmsg, size_t errlen)
{
  if (!s->done) {
    int r = SSL_do_handshake(s->ssl);
    if (r != 1) {
      int e = SSL_get_error(s->ssl, r);
      if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) {
        return TLS_WANT_READ;
      }
      long v = SSL_get_verify_result(s->ssl);
      char what[128];
      snprintf(what, sizeof what, "TLS handshake failed%s%s",
               v != X509_V_OK ? (SSL_is_server(s->ssl) ? ": client certificate: "
                                                       : ": the node's certificate: ")
                              : "",
               v != X509_V_OK ? X509_verify_cert_error_string(v) : "");
      tls_errmsg(errmsg, errlen, what);
      return CAIRN_ETLS;
    }
    s->done = true;
    tls_note_peer(s);
  }
  if (cap == 0) {
    return TLS_WANT_READ;
  }
  int n = SSL_read(s->ssl, buf, cap > INT32_MAX ? INT32_MAX : (int)cap);
  if (n > 0) {
    return n;
  }
  int e = SSL_get_error(s->ssl, n);
  if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) {
    return TLS_WANT_READ;
  }
  if (e == SSL_ERROR_ZERO_RETURN) {
    return TLS_EOF;
  }
  tls_errmsg(errmsg, errlen, "TLS record");
  return CAIRN_ETLS;
}

bool tls_read_pending(const struct tls_session *s)
{
  return SSL_pending(s->ssl) > 0 || BIO_ctrl_pending(s->rbio) > 0;
}

int tls_write(struct tls_session *s, const uint8_t *data, size_t len)
{
  while (len > 0) {
    int chunk = len > INT32_MAX ? INT32_MAX : (int)len;
    int n = SSL_write(s->ssl, data, chunk);
    if (n <= 0) {
      ERR_clear_error();
      return CAIRN_ETLS;
    }
    data += n;
    len -= (size_t)n;
  }
  return 0;
}

void tls_shutdown(struct tls_session *s)
{
  if (s->done) {
    (void)SSL_shutdown(s->ssl);
    ERR_clear_error();
  }
}

size_t tls_out_pending(const struct tls_session *s)
{
  return BIO_ctrl_pending(s->wbio);
}

size_t tls_take_out(struct tls_session *s, uint8_t *buf, size_t cap)
{
  int n = BIO_read(s->wbio, buf, cap > INT32_MAX ? INT32_MAX : (int)cap);
  return n > 0 ? (size_t)n : 0;
}

bool tls_handshake_done(const struct tls_session *s)
{
  return s->done;
}

const char *tls_peer_principal(const struct tls_session *s)
{
  return s->principal;
}

const char *tls_version(const struct tls_session *s)
{
  return SSL_get_version(s->ssl);
}

const char *tls_cipher(const struct tls_session *s)
{
  const char *c = SSL_get_cipher_name(s->ssl);
  return c != NULL ? c : "?";
}
