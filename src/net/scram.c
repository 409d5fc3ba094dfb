/* scram.c - SCRAM-SHA-256 and SCRAM-SHA-512 for both ends, pure
 * (scram.h); the crypto is OpenSSL's (PBKDF2, HMAC, SHA-2, base64 through
 * common/b64.h, constant-time compare). */
#include "net/scram.h"

#include "common/b64.h"
#include "common/err.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/sha.h>
#include <stdio.h>
#include <string.h>

void scram_nonce(const uint8_t *raw, char out[SCRAM_NONCE_TEXT])
{
  b64_encode(raw, SCRAM_NONCE_RAW, out);
}

bool scram_user_ok(const char *user)
{
  size_t n = strlen(user);
  if (n == 0 || n > SCRAM_USER_MAX) {
    return false;
  }
  for (size_t i = 0; i < n; i++) {
    char ch = user[i];
    bool ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
              ch == '.' || ch == '_' || ch == '-' || ch == '@';
    if (!ok) {
      return false;
    }
  }
  return true;
}

size_t scram_key_len(enum scram_mech m)
{
  return m == SCRAM_SHA_512 ? 64 : 32;
}

const char *scram_mech_name(enum scram_mech m)
{
  return m == SCRAM_SHA_512 ? "SCRAM-SHA-512" : "SCRAM-SHA-256";
}

bool scram_mech_from_name(const char *name, enum scram_mech *out)
{
  if (name != NULL && strcmp(name, "SCRAM-SHA-256") == 0) {
    *out = SCRAM_SHA_256;
    return true;
  }
  if (name != NULL && strcmp(name, "SCRAM-SHA-512") == 0) {
    *out = SCRAM_SHA_512;
    return true;
  }
  return false;
}

static const EVP_MD *scram_md(enum scram_mech m)
{
  return m == SCRAM_SHA_512 ? EVP_sha512() : EVP_sha256();
}

/* out: scram_key_len(m) bytes. */
static void scram_hmac(enum scram_mech m, const uint8_t *key, size_t key_len, const void *data,
                       size_t len, uint8_t *out)
{
  unsigned n = (unsigned)scram_key_len(m);
  if (HMAC(scram_md(m), key, (int)key_len, data, len, out, &n) == NULL) {
    memset(out, 0, scram_key_len(m));
  }
}

/* H(in): scram_key_len(m) bytes into out. */
static void scram_hash(enum scram_mech m, const uint8_t *in, size_t len, uint8_t *out)
{
  if (m == SCRAM_SHA_512) {
    SHA512(in, len, out);
  } else {
    SHA256(in, len, out);
  }
}

/* Decodes the base64 attribute text (n chars) into out (cap bytes);
 * returns the length, or -1 for empty or malformed text or more than cap. */
static int scram_unb64(const char *in, size_t n, uint8_t *out, size_t cap)
{
  size_t len = 0;
  if (n == 0 || b64_decode(in, n, out, cap, &len) != 0) {
    return -1;
  }
  return (int)len;
}

static int scram_salted(enum scram_mech m, const char *password, const uint8_t *salt,
                        size_t salt_len, uint32_t iterations, uint8_t *out)
{
  return PKCS5_PBKDF2_HMAC(password, (int)strlen(password), salt, (int)salt_len, (int)iterations,
                           scram_md(m), (int)scram_key_len(m), out) == 1
             ? 0
             : CAIRN_EINVAL;
}

int scram_cred_make_mech(enum scram_mech m, const char *password, const uint8_t *salt,
                         size_t salt_len, uint32_t iterations, struct scram_cred *out)
{
  if ((m != SCRAM_SHA_256 && m != SCRAM_SHA_512) || salt_len == 0 || salt_len > SCRAM_SALT_MAX ||
      iterations < SCRAM_ITERATIONS_MIN || iterations > SCRAM_ITERATIONS_MAX) {
    return CAIRN_EINVAL;
  }
  uint8_t salted[SCRAM_KEY_MAX], client_key[SCRAM_KEY_MAX];
  int rv = scram_salted(m, password, salt, salt_len, iterations, salted);
  if (rv != 0) {
    return rv;
  }
  size_t klen = scram_key_len(m);
  memset(out, 0, sizeof *out);
  out->mech = m;
  memcpy(out->salt, salt, salt_len);
  out->salt_len = salt_len;
  out->iterations = iterations;
  scram_hmac(m, salted, klen, "Client Key", 10, client_key);
  scram_hash(m, client_key, klen, out->stored_key);
  scram_hmac(m, salted, klen, "Server Key", 10, out->server_key);
  OPENSSL_cleanse(salted, sizeof salted);
  OPENSSL_cleanse(client_key, sizeof client_key);
  return 0;
}

int scram_cred_make(const char *password, const uint8_t *salt, size_t salt_len, uint32_t iterations,
                    struct scram_cred *out)
{
  return scram_cred_make_mech(SCRAM_SHA_256, password, salt, salt_len, iterations, out);
}

bool scram_password_matches(const struct scram_cred *cred, const char *password)
{
  struct scram_cred made;
  if (scram_cred_make_mech(cred->mech, password, cred->salt, cred->salt_len, cred->iterations,
                           &made) != 0) {
    return false;
  }
  bool same = CRYPTO_memcmp(made.stored_key, cred->stored_key, scram_key_len(cred->mech)) == 0;
  OPENSSL_cleanse(&made, sizeof made);
  return same;
}

/* Finds "k=" attribute k in msg (comma separated, len bytes); returns its
 * value and length, or NULL. */
static const char *scram_attr(const char *msg, size_t len, char k, size_t *vlen)
{
  size_t i = 0;
  while (i < len) {
    size_t j = i;
    while (j < len && msg[j] != ',') {
      j++;
    }
    if (j - i >= 2 && msg[i] == k && msg[i + 1] == '=') {
      *vlen = j - i - 2;
      return msg + i + 2;
    }
    i = j + 1;
  }
  return NULL;
}

/* Every comma-separated part is "x=..." with x a letter (RFC 5802's
 * attr-val); anything else is malformed. */
static bool scram_well_formed(const char *msg, size_t len)
{
  size_t i = 0;
  while (i <= len) {
    size_t j = i;
    while (j < len && msg[j] != ',') {
      j++;
    }
    char a = j - i >= 2 ? msg[i] : '\0';
    if (!((a >= 'a' && a <= 'z') || (a >= 'A' && a <= 'Z')) || msg[i + 1] != '=') {
      return false;
    }
    i = j + 1;
  }
  return true;
}

static bool scram_printable(const char *s, size_t n)
{
  for (size_t i = 0; i < n; i++) {
    if (s[i] < 0x21 || s[i] > 0x7e || s[i] == ',') {
      return false;
    }
  }
  return true;
}

/* ---- server ---- */

int scram_server_parse_first(struct scram_server *s, enum scram_mech mech, const char *msg,
                             size_t len)
{
  memset(s, 0, sizeof *s);
  s->state = SCRAM_S_FAILED;
  s->mech = mech;
  /* gs2 header: "n,," (no channel binding, no authzid) */
  if (len > SCRAM_MSG_MAX || len < 3 || memcmp(msg, "n,,", 3) != 0) {
    return CAIRN_EBADREQUEST;
  }
  const char *bare = msg + 3;
  size_t blen = len - 3;
  if (!scram_well_formed(bare, blen)) {
    return CAIRN_EBADREQUEST;
  }
  size_t ulen, nlen;
  const char *user = scram_attr(bare, blen, 'n', &ulen);
  const char *nonce = scram_attr(bare, blen, 'r', &nlen);
  if (user == NULL || nonce == NULL || ulen == 0 || ulen > SCRAM_USER_MAX || nlen == 0 ||
      nlen > 255 || !scram_printable(nonce, nlen) || user != bare + 2) {
    return CAIRN_EBADREQUEST;
  }
  memcpy(s->user, user, ulen);
  s->user[ulen] = '\0';
  if (!scram_user_ok(s->user)) {
    return CAIRN_EBADREQUEST;
  }
  memcpy(s->client_first_bare, bare, blen);
  s->client_first_bare[blen] = '\0';
  memcpy(s->nonce, nonce, nlen);
  s->nonce[nlen] = '\0';
  s->state = SCRAM_S_START;
  return 0;
}

int scram_server_challenge(struct scram_server *s, const struct scram_cred *cred,
                           const char *snonce, const uint8_t *fake_salt, char *out, size_t cap)
{
  if (s->state != SCRAM_S_START) {
    return CAIRN_EINVAL;
  }
  if (cred != NULL && cred->mech == s->mech) {
    s->cred = *cred;
    s->known = true;
  } else {
    /* Looks like a real user's challenge; no proof can match it. */
    memset(&s->cred, 0, sizeof s->cred);
    s->cred.mech = s->mech;
    memcpy(s->cred.salt, fake_salt, 16);
    s->cred.salt_len = 16;
    s->cred.iterations = SCRAM_ITERATIONS_DEFAULT;
    s->known = false;
  }
  if (strlen(snonce) == 0 || strlen(snonce) > 255 || !scram_printable(snonce, strlen(snonce))) {
    s->state = SCRAM_S_FAILED;
    return CAIRN_EINVAL;
  }
  s->cnonce_len = strlen(s->nonce);
  strncat(s->nonce, snonce, sizeof s->nonce - strlen(s->nonce) - 1);
  char salt[SCRAM_SALT_MAX * 2];
  b64_encode(s->cred.salt, s->cred.salt_len, salt);
  int n = snprintf(s->server_first, sizeof s->server_first, "r=%s,s=%s,i=%u", s->nonce, salt,
                   (unsigned)s->cred.iterations);
  if (n < 0 || (size_t)n >= sizeof s->server_first || (size_t)n >= cap) {
    s->state = SCRAM_S_FAILED;
    return CAIRN_EINVAL;
  }
  memcpy(out, s->server_first, (size_t)n + 1);
  s->state = SCRAM_S_CHALLENGED;
  return n;
}

/* AuthMessage = client-first-bare "," server-first "," client-final-without-proof */
static int scram_auth_message(const char *cfb, const char *sf, const char *cf, size_t cflen,
                              char *out, size_t cap)
{
  int n = snprintf(out, cap, "%s,%s,%.*s", cfb, sf, (int)cflen, cf);
  return n < 0 || (size_t)n >= cap ? -1 : n;
}

/* r is the exchange's nonce, or the client nonce followed by it (what
 * librdkafka sends; scram.h). */
static bool scram_nonce_ok(const struct scram_server *s, const char *r, size_t rlen)
{
  size_t nlen = strlen(s->nonce);
  if (rlen == nlen) {
    return CRYPTO_memcmp(r, s->nonce, nlen) == 0;
  }
  return rlen == s->cnonce_len + nlen && CRYPTO_memcmp(r, s->nonce, s->cnonce_len) == 0 &&
         CRYPTO_memcmp(r + s->cnonce_len, s->nonce, nlen) == 0;
}

int scram_server_final(struct scram_server *s, const char *msg, size_t len, char *out, size_t cap)
{
  if (s->state != SCRAM_S_CHALLENGED || len > SCRAM_MSG_MAX || cap < 64) {
    s->state = SCRAM_S_FAILED;
    return CAIRN_EBADREQUEST;
  }
  s->state = SCRAM_S_FAILED; /* until proven */
  if (!scram_well_formed(msg, len)) {
    return CAIRN_EBADREQUEST;
  }
  size_t clen, rlen, plen;
  const char *cb = scram_attr(msg, len, 'c', &clen);
  const char *r = scram_attr(msg, len, 'r', &rlen);
  const char *p = scram_attr(msg, len, 'p', &plen);
  /* c=biws is base64("n,,"); the proof is the last attribute */
  if (cb != msg + 2 || clen != 4 || memcmp(cb, "biws", 4) != 0 || r == NULL || p == NULL ||
      p + plen != msg + len || p < msg + 3) {
    return CAIRN_EBADREQUEST;
  }
  if (!scram_nonce_ok(s, r, rlen)) {
    return CAIRN_EBADREQUEST; /* not this exchange's nonce: a replay or a mix-up */
  }
  size_t klen = scram_key_len(s->mech);
  uint8_t proof[SCRAM_KEY_MAX + 4];
  if (scram_unb64(p, plen, proof, sizeof proof) != (int)klen) {
    return CAIRN_EBADREQUEST;
  }
  char am[3 * SCRAM_MSG_MAX + 8];
  size_t without = (size_t)(p - 3 - msg); /* up to ",p=" */
  if (scram_auth_message(s->client_first_bare, s->server_first, msg, without, am, sizeof am) < 0) {
    return CAIRN_EBADREQUEST;
  }
  /* ClientKey = ClientProof XOR HMAC(StoredKey, AuthMessage); H(ClientKey) must be StoredKey. */
  uint8_t sig[SCRAM_KEY_MAX], client_key[SCRAM_KEY_MAX], stored[SCRAM_KEY_MAX];
  scram_hmac(s->mech, s->cred.stored_key, klen, am, strlen(am), sig);
  for (size_t i = 0; i < klen; i++) {
    client_key[i] = proof[i] ^ sig[i];
  }
  scram_hash(s->mech, client_key, klen, stored);
  bool ok = CRYPTO_memcmp(stored, s->cred.stored_key, klen) == 0 && s->known;
  OPENSSL_cleanse(client_key, sizeof client_key);
  if (!ok) {
    snprintf(out, cap, "e=invalid-proof");
    return CAIRN_EAUTH;
  }
  uint8_t server_sig[SCRAM_KEY_MAX];
  scram_hmac(s->mech, s->cred.server_key, klen, am, strlen(am), server_sig);
  char b64[2 * SCRAM_KEY_MAX];
  b64_encode(server_sig, klen, b64);
  snprintf(out, cap, "v=%s", b64);
  s->state = SCRAM_S_DONE;
  return 0;
}

/* ---- client ---- */

int scram_client_start(struct scram_client *c, const char *user, const char *password,
                       const char *cnonce, char *out, size_t cap)
{
  return scram_client_start_mech(c, SCRAM_SHA_256, user, password, cnonce, out, cap);
}

int scram_client_start_mech(struct scram_client *c, enum scram_mech mech, const char *user,
                            const char *password, const char *cnonce, char *out, size_t cap)
{
  memset(c, 0, sizeof *c);
  c->mech = mech;
  if (!scram_user_ok(user) || strlen(password) >= sizeof c->password || cnonce[0] == '\0' ||
      strlen(cnonce) >= sizeof c->cnonce || !scram_printable(cnonce, strlen(cnonce))) {
    return CAIRN_EINVAL;
  }
  memcpy(c->password, password, strlen(password) + 1);
  memcpy(c->cnonce, cnonce, strlen(cnonce) + 1);
  int n = snprintf(c->client_first_bare, sizeof c->client_first_bare, "n=%s,r=%s", user, c->cnonce);
  int m = snprintf(out, cap, "n,,%s", c->client_first_bare);
  if (n < 0 || m < 0 || (size_t)m >= cap) {
    return CAIRN_EINVAL;
  }
  c->state = SCRAM_C_FIRST_SENT;
  return m;
}

int scram_client_final(struct scram_client *c, const char *msg, size_t len, char *out, size_t cap)
{
  if (c->state != SCRAM_C_FIRST_SENT || len > SCRAM_MSG_MAX || !scram_well_formed(msg, len)) {
    return CAIRN_EPROTOCOL;
  }
  size_t rlen, slen, ilen;
  const char *r = scram_attr(msg, len, 'r', &rlen);
  const char *sb = scram_attr(msg, len, 's', &slen);
  const char *it = scram_attr(msg, len, 'i', &ilen);
  size_t cn = strlen(c->cnonce);
  if (r != msg + 2 || sb == NULL || it == NULL || rlen <= cn || memcmp(r, c->cnonce, cn) != 0 ||
      !scram_printable(r, rlen) || ilen == 0 || ilen > 9) {
    return CAIRN_EPROTOCOL;
  }
  uint32_t iterations = 0;
  for (size_t i = 0; i < ilen; i++) {
    if (it[i] < '0' || it[i] > '9') {
      return CAIRN_EPROTOCOL;
    }
    iterations = iterations * 10 + (uint32_t)(it[i] - '0');
  }
  uint8_t salt[SCRAM_SALT_MAX + 4];
  int salt_len = scram_unb64(sb, slen, salt, sizeof salt);
  if (salt_len <= 0 || salt_len > SCRAM_SALT_MAX || iterations < SCRAM_ITERATIONS_MIN ||
      iterations > SCRAM_ITERATIONS_MAX) {
    return CAIRN_EPROTOCOL;
  }
  char without[SCRAM_MSG_MAX + 16];
  int wn = snprintf(without, sizeof without, "c=biws,r=%.*s", (int)rlen, r);
  char sf[SCRAM_MSG_MAX + 1];
  memcpy(sf, msg, len);
  sf[len] = '\0';
  char am[3 * SCRAM_MSG_MAX + 8];
  if (wn < 0 || (size_t)wn >= sizeof without ||
      scram_auth_message(c->client_first_bare, sf, without, (size_t)wn, am, sizeof am) < 0) {
    return CAIRN_EPROTOCOL;
  }
  enum scram_mech m = c->mech;
  size_t klen = scram_key_len(m);
  uint8_t salted[SCRAM_KEY_MAX], client_key[SCRAM_KEY_MAX], stored[SCRAM_KEY_MAX];
  uint8_t sig[SCRAM_KEY_MAX], proof[SCRAM_KEY_MAX], server_key[SCRAM_KEY_MAX];
  if (scram_salted(m, c->password, salt, (size_t)salt_len, iterations, salted) != 0) {
    return CAIRN_EPROTOCOL;
  }
  scram_hmac(m, salted, klen, "Client Key", 10, client_key);
  scram_hash(m, client_key, klen, stored);
  scram_hmac(m, stored, klen, am, strlen(am), sig);
  for (size_t i = 0; i < klen; i++) {
    proof[i] = client_key[i] ^ sig[i];
  }
  scram_hmac(m, salted, klen, "Server Key", 10, server_key);
  scram_hmac(m, server_key, klen, am, strlen(am), c->server_signature);
  OPENSSL_cleanse(salted, sizeof salted);
  OPENSSL_cleanse(client_key, sizeof client_key);
  OPENSSL_cleanse(server_key, sizeof server_key);
  char p64[2 * SCRAM_KEY_MAX];
  b64_encode(proof, klen, p64);
  int n = snprintf(out, cap, "%s,p=%s", without, p64);
  if (n < 0 || (size_t)n >= cap) {
    return CAIRN_EPROTOCOL;
  }
  c->state = SCRAM_C_FINAL_SENT;
  return n;
}

int scram_client_verify(struct scram_client *c, const char *msg, size_t len)
{
  if (c->state != SCRAM_C_FINAL_SENT) {
    return CAIRN_EPROTOCOL;
  }
  if (len >= 2 && msg[0] == 'e' && msg[1] == '=') {
    return CAIRN_EAUTH;
  }
  size_t klen = scram_key_len(c->mech);
  uint8_t v[SCRAM_KEY_MAX + 4];
  if (len < 2 || msg[0] != 'v' || msg[1] != '=' ||
      scram_unb64(msg + 2, len - 2, v, sizeof v) != (int)klen ||
      CRYPTO_memcmp(v, c->server_signature, klen) != 0) {
    return CAIRN_EPROTOCOL; /* the server does not know our credential */
  }
  c->state = SCRAM_C_DONE;
  return 0;
}

void scram_client_wipe(struct scram_client *c)
{
  OPENSSL_cleanse(c, sizeof *c);
}
