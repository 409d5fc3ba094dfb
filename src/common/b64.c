/* b64.c - base64 over OpenSSL's block functions. See b64.h. */
#include "common/b64.h"

#include "common/err.h"

#include <openssl/evp.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

/* Bytes per EVP call: a multiple of 3 (no padding inside the text) far
 * below INT_MAX, whose text fits a small stack buffer when decoding. */
#define B64_CHUNK 3072u

size_t b64_encode(const void *in, size_t len, char *out)
{
  const unsigned char *p = in;
  size_t n = 0;
  out[0] = '\0';
  for (size_t done = 0; done < len;) {
    size_t k = len - done < B64_CHUNK ? len - done : B64_CHUNK;
    n += (size_t)EVP_EncodeBlock((unsigned char *)out + n, p + done, (int)k);
    done += k;
  }
  return n;
}

/* Whether in[0..n) is canonical base64 text (b64.h): EVP_DecodeBlock alone
 * skips blanks and takes '=' anywhere as a zero digit. */
static bool b64_canonical(const char *in, size_t n)
{
  static const char abc[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  if (n % 4 != 0) {
    return false;
  }
  size_t pad = 0;
  while (pad < 2 && pad < n && in[n - 1 - pad] == '=') {
    pad++;
  }
  for (size_t i = 0; i < n - pad; i++) {
    if (in[i] == '\0' || strchr(abc, in[i]) == NULL) {
      return false;
    }
  }
  return true;
}

int b64_decode(const char *in, size_t n, void *out, size_t cap, size_t *len)
{
  *len = 0;
  if (!b64_canonical(in, n)) {
    return CAIRN_EINVAL;
  }
  uint8_t *o = out;
  unsigned char tmp[B64_CHUNK];
  const size_t text_chunk = B64_CHUNK / 3 * 4;
  for (size_t done = 0; done < n;) {
    size_t k = n - done < text_chunk ? n - done : text_chunk;
    int got = EVP_DecodeBlock(tmp, (const unsigned char *)in + done, (int)k);
    if (got < 0) {
      return CAIRN_EINVAL;
    }
    done += k;
    size_t m = (size_t)got;
    if (done == n) { /* EVP_DecodeBlock counts each pad as a zero byte */
      m -= (in[n - 1] == '=') + (in[n - 2] == '=');
    }
    if (m > cap - *len) {
      memcpy(o + *len, tmp, cap - *len);
      *len = cap;
      return CAIRN_ETOOLARGE;
    }
    memcpy(o + *len, tmp, m);
    *len += m;
  }
  return 0;
}
