/* b64.h - base64 (RFC 4648 section 4: the standard alphabet, with '='
 * padding) over OpenSSL's EVP_EncodeBlock / EVP_DecodeBlock: the one
 * implementation for SCRAM's messages, the CLI's --json and anything else.
 *
 * No state; context: any thread. */
#ifndef CAIRN_B64_H
#define CAIRN_B64_H

#include <stddef.h>

/* Text length (without the NUL) of n bytes encoded. */
#define B64_ENCODED_LEN(n) (((n) + 2) / 3 * 4)

/* Encodes len bytes of in (borrowed) into out, which holds at least
 * B64_ENCODED_LEN(len) + 1 bytes; NUL-terminates it. Returns the text
 * length. Any len (OpenSSL's int limit is handled in chunks). */
size_t b64_encode(const void *in, size_t len, char *out);

/* Decodes n characters of base64 text (borrowed; no NUL needed) into out
 * (cap bytes) and sets *len to the bytes written. The text must be
 * canonical: a multiple of 4 characters, the alphabet only (no blanks or
 * line breaks), '=' only as one or two trailing pads. Empty text is 0
 * bytes. Returns 0, CAIRN_EINVAL (not such text) or CAIRN_ETOOLARGE (more
 * than cap bytes; out then holds a prefix). */
int b64_decode(const char *in, size_t n, void *out, size_t cap, size_t *len)
    __attribute__((warn_unused_result));

#endif
