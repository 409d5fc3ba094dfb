/* fuzz_raftmux.c - libFuzzer target: raftmux_decode() (a peer node's Raft
 * message for one partition group, cluster/raftmux_codec.h) over
 * arbitrary bytes. The first input byte picks fix-ups so the fuzzer gets
 * past the header into the bodies: bit 0 writes the tag, the version and
 * a zero reserved word, bit 1 a message type (1 + byte 2 % 6) and an
 * address length that fits. A payload that decodes must encode again to
 * the same bytes (the codec has one encoding per message) and free
 * cleanly. */
#include "cluster/raftmux_codec.h"
#include "common/err.h"
#include "format/endian.h"
#include "fuzz_util.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  uint8_t mode;
  size_t len;
  uint8_t *p = fuzz_body(data, size, &mode, &len);
  if (p == NULL) {
    return 0;
  }
  if ((mode & 1) && len >= RAFTMUX_HEADER) {
    p[0] = RAFTMUX_TAG;
    p[1] = RAFTMUX_VERSION;
    le_put32(p + 4, 0);
  }
  if ((mode & 2) && len >= RAFTMUX_HEADER) {
    p[2] = (uint8_t)(1 + p[2] % 6);
    size_t room = len - RAFTMUX_HEADER;
    p[3] = (uint8_t)(room == 0 ? 1 : 1 + p[3] % (room < 255 ? room : 255));
  }
  struct raft_message m;
  uint64_t gid = 0;
  char addr[RAFTMUX_ADDRESS_MAX + 1];
  int rv = raftmux_decode(p, len, &m, &gid, addr);
  if (rv > 0) {
    abort(); /* 0 or a negative code */
  }
  if (rv == 0) {
    size_t need = raftmux_encoded_size(&m, strlen(addr));
    uint8_t *out = malloc(need + 1);
    if (out == NULL || need != len) {
      abort(); /* a decoded payload's size is the encoding's */
    }
    long n = raftmux_encode(out, need, gid, m.server_id, addr, &m);
    if (n != (long)len || memcmp(out, p, len) != 0) {
      abort(); /* one encoding per message */
    }
    free(out);
    raftmux_message_free(&m);
  }
  free(p);
  return 0;
}
