/* fuzz_frame.c - libFuzzer target: the client port's frame decoder and
 * envelope unpacking over arbitrary bytes, read as a stream of frames the
 * way conn.c reads it. Checks, besides "no crash, no leak": a whole frame
 * lies inside the input and its parts add up; every proper prefix of a
 * whole frame asks for more bytes; an envelope that unpacks re-encodes into
 * a frame that decodes to the same envelope bytes. */
#include "common/err.h"
#include "net/frame.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define FUZZ_MAX_FRAME (1u << 20)

static void fuzz_check(int ok)
{
  if (!ok) {
    abort();
  }
}

static void fuzz_round_trip(const Cairn__Client__Envelope *env, const struct frame *f)
{
  size_t hlen = frame_header_size(env);
  uint8_t *buf = malloc(hlen + f->payload_len);
  fuzz_check(buf != NULL);
  fuzz_check(frame_encode_header(env, f->payload_len, buf) == 0);
  memcpy(buf + hlen, f->payload, f->payload_len);
  struct frame g;
  fuzz_check(frame_decode(buf, hlen + f->payload_len, FRAME_MAX_BYTES_LIMIT, &g) == FRAME_WHOLE);
  fuzz_check(g.size == hlen + f->payload_len);
  fuzz_check(g.payload_len == f->payload_len);
  Cairn__Client__Envelope *again;
  fuzz_check(frame_unpack_envelope(&g, &again) == 0);
  /* Packing is deterministic: the same message packs to the same bytes. */
  size_t n = cairn__client__envelope__get_packed_size(again);
  fuzz_check(n == g.envelope_len);
  uint8_t *repacked = malloc(n + 1);
  fuzz_check(cairn__client__envelope__pack(again, repacked) == n);
  fuzz_check(memcmp(repacked, g.envelope, n) == 0);
  free(repacked);
  cairn__client__envelope__free_unpacked(again, NULL);
  free(buf);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  size_t pos = 0;
  while (pos < size) {
    struct frame f;
    int rv = frame_decode(data + pos, size - pos, FUZZ_MAX_FRAME, &f);
    if (rv == FRAME_NEED_MORE) {
      fuzz_check(f.need > 0);
      break;
    }
    if (rv < 0) {
      fuzz_check(rv == CAIRN_ETOOLARGE || rv == CAIRN_EBADFRAME || rv == CAIRN_EFRAMEEMPTY);
      break;
    }
    fuzz_check(rv == FRAME_WHOLE);
    fuzz_check(f.size <= size - pos);
    fuzz_check(f.size == FRAME_HEADER_SIZE + f.envelope_len + f.payload_len);
    fuzz_check(f.envelope == data + pos + FRAME_HEADER_SIZE);
    /* Prefixes of the first frame (bounded, to keep each run fast). */
    if (pos == 0) {
      for (size_t k = 0; k < f.size && k < 64; k++) {
        struct frame p;
        fuzz_check(frame_decode(data, k, FUZZ_MAX_FRAME, &p) == FRAME_NEED_MORE);
        fuzz_check(p.need > 0 && k + p.need <= f.size);
      }
    }
    Cairn__Client__Envelope *env;
    rv = frame_unpack_envelope(&f, &env);
    if (rv == 0) {
      fuzz_round_trip(env, &f);
      cairn__client__envelope__free_unpacked(env, NULL);
    } else {
      fuzz_check(rv == CAIRN_EBADENVELOPE);
    }
    pos += f.size;
  }
  return 0;
}
