/* frame.c - the client port's frame: incremental decoder and header encoder. */
#include "net/frame.h"

#include "common/err.h"

#include <stdlib.h>
#include <string.h>

static uint32_t frame_get_u32be(const uint8_t *p)
{
  return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | (uint32_t)p[3];
}

static void frame_put_u32be(uint8_t *p, uint32_t v)
{
  p[0] = (uint8_t)(v >> 24);
  p[1] = (uint8_t)(v >> 16);
  p[2] = (uint8_t)(v >> 8);
  p[3] = (uint8_t)v;
}

int frame_decode(const uint8_t *p, size_t len, uint32_t max_frame_bytes, struct frame *f)
{
  memset(f, 0, sizeof *f);
  if (max_frame_bytes > FRAME_MAX_BYTES_LIMIT) {
    max_frame_bytes = FRAME_MAX_BYTES_LIMIT;
  }
  if (len < FRAME_LENGTH_FIELD_SIZE) {
    f->need = FRAME_HEADER_SIZE - len;
    return FRAME_NEED_MORE;
  }
  /* Decide on L alone first: an oversized frame is refused before any more
   * of it is read, so the reader never has to buffer it. */
  uint32_t l = frame_get_u32be(p);
  f->length = l;
  if (l == 0) {
    return CAIRN_EFRAMEEMPTY;
  }
  if (l < FRAME_MIN_LENGTH) {
    return CAIRN_EBADFRAME;
  }
  if (l > max_frame_bytes) {
    return CAIRN_ETOOLARGE;
  }
  if (len < FRAME_HEADER_SIZE) {
    f->need = FRAME_HEADER_SIZE - len;
    return FRAME_NEED_MORE;
  }
  uint32_t e = frame_get_u32be(p + FRAME_LENGTH_FIELD_SIZE);
  if (e > l - 4) {
    return CAIRN_EBADFRAME;
  }
  size_t size = FRAME_LENGTH_FIELD_SIZE + (size_t)l;
  if (len < size) {
    f->need = size - len;
    return FRAME_NEED_MORE;
  }
  f->size = size;
  f->envelope = p + FRAME_HEADER_SIZE;
  f->envelope_len = e;
  f->payload = p + FRAME_HEADER_SIZE + e;
  f->payload_len = (size_t)l - 4 - e;
  return FRAME_WHOLE;
}

int frame_unpack_envelope(const struct frame *f, Cairn__Client__Envelope **env)
{
  *env = cairn__client__envelope__unpack(NULL, f->envelope_len, f->envelope);
  return *env != NULL ? 0 : CAIRN_EBADENVELOPE;
}

size_t frame_header_size(const Cairn__Client__Envelope *env)
{
  return FRAME_HEADER_SIZE + cairn__client__envelope__get_packed_size(env);
}

int frame_encode_header(const Cairn__Client__Envelope *env, uint64_t payload_len, uint8_t *buf)
{
  size_t e = cairn__client__envelope__get_packed_size(env);
  uint64_t l = 4 + (uint64_t)e + payload_len;
  if (l > FRAME_MAX_BYTES_LIMIT) {
    return CAIRN_ETOOLARGE;
  }
  frame_put_u32be(buf, (uint32_t)l);
  frame_put_u32be(buf + FRAME_LENGTH_FIELD_SIZE, (uint32_t)e);
  size_t packed = cairn__client__envelope__pack(env, buf + FRAME_HEADER_SIZE);
  return packed == e ? 0 : CAIRN_EINVAL;
}

uint64_t frame_iov_len(const struct iovec *iov, int n)
{
  uint64_t sum = 0;
  for (int i = 0; i < n; i++) {
    sum += iov[i].iov_len;
  }
  return sum;
}

int frame_encode(const Cairn__Client__Envelope *env, const struct iovec *payload, int npayload,
                 uint8_t **hdr, size_t *hdr_len)
{
  size_t n = frame_header_size(env);
  uint8_t *buf = malloc(n);
  if (buf == NULL) {
    return CAIRN_ENOMEM;
  }
  int rv = frame_encode_header(env, frame_iov_len(payload, npayload), buf);
  if (rv != 0) {
    free(buf);
    return rv;
  }
  *hdr = buf;
  *hdr_len = n;
  return 0;
}
