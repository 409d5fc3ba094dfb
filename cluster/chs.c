/* chs.c - the cluster port's authenticated handshake: HMAC-SHA256 over both
 * ends' nonces and the preamble, as a pure state machine (chs.h). */
#include "cluster/chs.h"

#include "common/err.h"
#include "format/endian.h"

#include <errno.h>
#include <fcntl.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define CHS_LABEL_DIALER "cairn cluster dialer v1"
#define CHS_LABEL_LISTENER "cairn cluster listener v1"

const char *chs_state_name(enum chs_state s)
{
  switch (s) {
#define CHS_STATE_NAME(name)                                                                       \
  case name:                                                                                       \
    return #name;
    CHS_STATE_TABLE(CHS_STATE_NAME)
#undef CHS_STATE_NAME
  }
  return "?";
}

void chs_mac(const uint8_t *key, size_t key_len, const char *label, const uint8_t *data, size_t len,
             uint8_t mac[CHS_MAC_LEN])
{
  /* label || data in one buffer: the one-shot HMAC() is the OpenSSL 3 call
   * that is not deprecated. Callers pass at most a few hundred bytes. */
  size_t ln = strlen(label);
  uint8_t stack[CHS_ANSWER_MAX + 64];
  uint8_t *buf = ln + len <= sizeof stack ? stack : malloc(ln + len);
  unsigned out_len = CHS_MAC_LEN;
  if (buf == NULL) {
    memset(mac, 0, CHS_MAC_LEN); /* matches nothing a real key makes */
    return;
  }
  memcpy(buf, label, ln);
  if (len > 0) {
    memcpy(buf + ln, data, len);
  }
  if (HMAC(EVP_sha256(), key, (int)key_len, buf, ln + len, mac, &out_len) == NULL) {
    memset(mac, 0, CHS_MAC_LEN);
  }
  OPENSSL_cleanse(buf, ln + len);
  if (buf != stack) {
    free(buf);
  }
}

bool chs_mac_equal(const uint8_t *a, const uint8_t *b)
{
  return CRYPTO_memcmp(a, b, CHS_MAC_LEN) == 0;
}

int chs_random(uint8_t *buf, size_t len)
{
  return RAND_bytes(buf, (int)len) == 1 ? 0 : CAIRN_ECLUSTER_AUTH;
}

/* The MAC of one side over nonce_l || nonce_d || payload. */
static void chs_transcript_mac(const struct chs *h, const char *label, uint8_t mac[CHS_MAC_LEN])
{
  uint8_t t[2 * CHS_NONCE_LEN + CHS_PAYLOAD_MAX];
  memcpy(t, h->nonce_l, CHS_NONCE_LEN);
  memcpy(t + CHS_NONCE_LEN, h->nonce_d, CHS_NONCE_LEN);
  memcpy(t + 2 * CHS_NONCE_LEN, h->payload, h->payload_len);
  chs_mac(h->key, h->key_len, label, t, 2 * CHS_NONCE_LEN + h->payload_len, mac);
}

void chs_listener_init(struct chs *h, const uint8_t *key, size_t key_len,
                       const uint8_t nonce_l[CHS_NONCE_LEN])
{
  memset(h, 0, sizeof *h);
  h->role = CHS_LISTENER;
  h->state = CHS_WAIT_ANSWER;
  h->key = key;
  h->key_len = key_len;
  memcpy(h->nonce_l, nonce_l, CHS_NONCE_LEN);
  le_put32(h->challenge, CHS_MAGIC_CHALLENGE);
  le_put16(h->challenge + 4, CHS_VERSION);
  memcpy(h->challenge + 6, nonce_l, CHS_NONCE_LEN);
}

int chs_dialer_init(struct chs *h, const uint8_t *key, size_t key_len,
                    const uint8_t nonce_d[CHS_NONCE_LEN], const uint8_t *payload, size_t len)
{
  if (len == 0 || len > CHS_PAYLOAD_MAX) {
    return CAIRN_EINVAL;
  }
  memset(h, 0, sizeof *h);
  h->role = CHS_DIALER;
  h->state = CHS_WAIT_CHALLENGE;
  h->key = key;
  h->key_len = key_len;
  memcpy(h->nonce_d, nonce_d, CHS_NONCE_LEN);
  memcpy(h->payload, payload, len);
  h->payload_len = len;
  return 0;
}

/* Bytes the whole message being received takes, as far as known yet. */
static size_t chs_message_len(const struct chs *h)
{
  switch (h->state) {
  case CHS_WAIT_CHALLENGE:
    return CHS_CHALLENGE_LEN;
  case CHS_WAIT_PROOF:
    return CHS_MAC_LEN;
  case CHS_WAIT_ANSWER:
    if (h->got < CHS_ANSWER_FIXED) {
      return CHS_ANSWER_FIXED;
    }
    return CHS_ANSWER_FIXED + le_get16(h->in + CHS_ANSWER_FIXED - 2) + CHS_MAC_LEN;
  case CHS_DONE:
  case CHS_FAILED:
    break;
  }
  return 0;
}

size_t chs_want(const struct chs *h)
{
  size_t n = chs_message_len(h);
  return n > h->got ? n - h->got : 0;
}

static int chs_fail(struct chs *h, int err)
{
  h->state = CHS_FAILED;
  return err;
}

/* Checks a message's magic and version as soon as they are in. */
static int chs_check_header(struct chs *h, uint32_t magic)
{
  if (h->got >= 4 && le_get32(h->in) != magic) {
    return CAIRN_EBADMAGIC;
  }
  if (h->got >= 6 && le_get16(h->in + 4) != CHS_VERSION) {
    return CAIRN_EUNSUPPORTED;
  }
  return 0;
}

/* Dialer: the challenge is in; build the answer. */
static int chs_on_challenge(struct chs *h)
{
  memcpy(h->nonce_l, h->in + 6, CHS_NONCE_LEN);
  uint8_t *a = h->answer;
  le_put32(a, CHS_MAGIC_ANSWER);
  le_put16(a + 4, CHS_VERSION);
  memcpy(a + 6, h->nonce_d, CHS_NONCE_LEN);
  le_put16(a + CHS_ANSWER_FIXED - 2, (uint16_t)h->payload_len);
  memcpy(a + CHS_ANSWER_FIXED, h->payload, h->payload_len);
  chs_transcript_mac(h, CHS_LABEL_DIALER, a + CHS_ANSWER_FIXED + h->payload_len);
  h->answer_len = CHS_ANSWER_FIXED + h->payload_len + CHS_MAC_LEN;
  h->state = CHS_WAIT_PROOF;
  h->got = 0;
  return CHS_SEND;
}

/* Listener: the answer is in; check mac_d, build the proof. */
static int chs_on_answer(struct chs *h)
{
  size_t n = le_get16(h->in + CHS_ANSWER_FIXED - 2);
  memcpy(h->nonce_d, h->in + 6, CHS_NONCE_LEN);
  memcpy(h->payload, h->in + CHS_ANSWER_FIXED, n);
  h->payload_len = n;
  uint8_t mac[CHS_MAC_LEN];
  chs_transcript_mac(h, CHS_LABEL_DIALER, mac);
  if (!chs_mac_equal(mac, h->in + CHS_ANSWER_FIXED + n)) {
    h->payload_len = 0;
    return chs_fail(h, CAIRN_ECLUSTER_AUTH);
  }
  chs_transcript_mac(h, CHS_LABEL_LISTENER, h->proof);
  h->state = CHS_DONE;
  h->got = 0;
  return CHS_OK;
}

/* Dialer: the proof is in; check mac_l. */
static int chs_on_proof(struct chs *h)
{
  uint8_t mac[CHS_MAC_LEN];
  chs_transcript_mac(h, CHS_LABEL_LISTENER, mac);
  if (!chs_mac_equal(mac, h->in)) {
    return chs_fail(h, CAIRN_ECLUSTER_AUTH);
  }
  h->state = CHS_DONE;
  h->got = 0;
  return CHS_OK;
}

int chs_feed(struct chs *h, const uint8_t *data, size_t len)
{
  if (h->state == CHS_DONE || h->state == CHS_FAILED) {
    return chs_fail(h, CAIRN_EINVAL);
  }
  if (len > chs_want(h)) {
    return chs_fail(h, CAIRN_EBADLEN);
  }
  memcpy(h->in + h->got, data, len);
  h->got += len;
  int rv = 0;
  if (h->state == CHS_WAIT_CHALLENGE) {
    rv = chs_check_header(h, CHS_MAGIC_CHALLENGE);
  } else if (h->state == CHS_WAIT_ANSWER) {
    rv = chs_check_header(h, CHS_MAGIC_ANSWER);
    if (rv == 0 && h->got >= CHS_ANSWER_FIXED) {
      size_t n = le_get16(h->in + CHS_ANSWER_FIXED - 2);
      if (n == 0 || n > CHS_PAYLOAD_MAX) {
        rv = CAIRN_EBADLEN;
      }
    }
  }
  if (rv != 0) {
    return chs_fail(h, rv);
  }
  if (chs_want(h) > 0) {
    return CHS_AGAIN;
  }
  switch (h->state) {
  case CHS_WAIT_CHALLENGE:
    return chs_on_challenge(h);
  case CHS_WAIT_ANSWER:
    return chs_on_answer(h);
  case CHS_WAIT_PROOF:
    return chs_on_proof(h);
  case CHS_DONE:
  case CHS_FAILED:
    break;
  }
  return chs_fail(h, CAIRN_EINVAL);
}

const uint8_t *chs_output(const struct chs *h, size_t *len)
{
  if (h->role == CHS_LISTENER) {
    if (h->state == CHS_DONE) {
      *len = CHS_MAC_LEN;
      return h->proof;
    }
    *len = CHS_CHALLENGE_LEN;
    return h->challenge;
  }
  *len = h->answer_len;
  return h->answer;
}

const uint8_t *chs_payload(const struct chs *h, size_t *len)
{
  *len = h->state == CHS_DONE ? h->payload_len : 0;
  return h->payload;
}

/* ---- the key file ---- */

int chs_key_load(const char *path, uint8_t **key, size_t *key_len, bool *warned, char *errmsg,
                 size_t errlen)
{
  *key = NULL;
  *key_len = 0;
  *warned = false;
  errmsg[0] = '\0';
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    int err = -errno;
    snprintf(errmsg, errlen, "cluster secret file %s: %s", path, strerror(errno));
    return err;
  }
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    close(fd);
    snprintf(errmsg, errlen, "cluster secret file %s: not a regular file", path);
    return CAIRN_EBADSECRET;
  }
  uint8_t *buf = malloc(CHS_KEY_MAX + 2);
  if (buf == NULL) {
    close(fd);
    return CAIRN_ENOMEM;
  }
  size_t n = 0;
  for (;;) {
    ssize_t r = read(fd, buf + n, CHS_KEY_MAX + 2 - n);
    if (r < 0 && errno == EINTR) {
      continue;
    }
    if (r < 0) {
      int err = -errno;
      snprintf(errmsg, errlen, "cluster secret file %s: %s", path, strerror(errno));
      close(fd);
      chs_key_free(buf, CHS_KEY_MAX + 2);
      return err;
    }
    if (r == 0 || (n += (size_t)r) == CHS_KEY_MAX + 2) {
      break;
    }
  }
  close(fd);
  while (n > 0 &&
         (buf[n - 1] == '\n' || buf[n - 1] == '\r' || buf[n - 1] == ' ' || buf[n - 1] == '\t')) {
    n--;
  }
  if (n < CHS_KEY_MIN || n > CHS_KEY_MAX) {
    snprintf(errmsg, errlen,
             "cluster secret file %s: %zu bytes; a cluster secret has %d to %d bytes (e.g. "
             "`openssl rand -hex 32`)",
             path, n, CHS_KEY_MIN, CHS_KEY_MAX);
    chs_key_free(buf, CHS_KEY_MAX + 2);
    return CAIRN_EBADSECRET;
  }
  if ((st.st_mode & (S_IRWXG | S_IRWXO)) != 0) {
    snprintf(errmsg, errlen,
             "cluster secret file %s can be read by others (mode %03o): chmod 600 it", path,
             (unsigned)(st.st_mode & 0777));
    *warned = true;
  }
  *key = buf;
  *key_len = n;
  return 0;
}

void chs_key_free(uint8_t *key, size_t key_len)
{
  if (key != NULL) {
    OPENSSL_cleanse(key, key_len);
    free(key);
  }
}
