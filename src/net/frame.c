/* frame.c - the client port's frame: incremental decoder and header encoder. */
#include "net/frame.h"

#include "common/err.h"

#include <stdbool.h>
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

/* A TLS record header: type 22 (handshake), version 3.0 to 3.4 (the
 * ClientHello's record says 3.1 or 3.3 whatever TLS version it offers). */
bool frame_looks_like_tls(const uint8_t *p, size_t len)
{
  return len >= 3 && p[0] == 22 && p[1] == 3 && p[2] <= 4;
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

/* protobuf-c 1.4 accepts a field number 0 written as an overlong varint
 * (0x80 0x00) and keeps it as an unknown field; packed again it becomes a
 * one-byte tag 0 that no parser accepts, so a forwarded envelope would be
 * refused downstream (found by tests/fuzz/fuzz_frame.c). Field 0 is not
 * valid protobuf: refuse it at any depth. */
static bool frame_message_ok(const ProtobufCMessage *m, int depth)
{
  if (depth > FRAME_ENVELOPE_MAX_DEPTH) {
    return false;
  }
  for (unsigned i = 0; i < m->n_unknown_fields; i++) {
    if (m->unknown_fields[i].tag == 0) {
      return false;
    }
  }
  const ProtobufCMessageDescriptor *d = m->descriptor;
  const char *base = (const char *)m;
  for (unsigned i = 0; i < d->n_fields; i++) {
    const ProtobufCFieldDescriptor *fd = &d->fields[i];
    if (fd->type != PROTOBUF_C_TYPE_MESSAGE) {
      continue;
    }
    if (fd->label == PROTOBUF_C_LABEL_REPEATED) {
      size_t n = *(const size_t *)(base + fd->quantifier_offset);
      ProtobufCMessage *const *items = *(ProtobufCMessage *const *const *)(base + fd->offset);
      for (size_t j = 0; j < n; j++) {
        if (!frame_message_ok(items[j], depth + 1)) {
          return false;
        }
      }
      continue;
    }
    if ((fd->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) &&
        *(const uint32_t *)(base + fd->quantifier_offset) != fd->id) {
      continue; /* another member of the oneof is set: this pointer is not ours */
    }
    const ProtobufCMessage *sub = *(ProtobufCMessage *const *)(base + fd->offset);
    if (sub != NULL && !frame_message_ok(sub, depth + 1)) {
      return false;
    }
  }
  return true;
}

int frame_unpack_envelope(const struct frame *f, Cairn__Client__Envelope **env)
{
  *env = cairn__client__envelope__unpack(NULL, f->envelope_len, f->envelope);
  if (*env == NULL) {
    return CAIRN_EBADENVELOPE;
  }
  if (!frame_message_ok(&(*env)->base, 0)) {
    cairn__client__envelope__free_unpacked(*env, NULL);
    *env = NULL;
    return CAIRN_EBADENVELOPE;
  }
  return 0;
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

const Cairn__Client__Error *frame_body_error(const Cairn__Client__Envelope *env)
{
  /* A oneof's case value is its field's number. */
  const ProtobufCFieldDescriptor *f =
      protobuf_c_message_descriptor_get_field(env->base.descriptor, (unsigned)env->body_case);
  if (f == NULL || f->type != PROTOBUF_C_TYPE_MESSAGE) {
    return NULL;
  }
  const ProtobufCMessage *body = *(ProtobufCMessage *const *)((const char *)env + f->offset);
  if (body == NULL) {
    return NULL;
  }
  const ProtobufCFieldDescriptor *e =
      protobuf_c_message_descriptor_get_field_by_name(body->descriptor, "error");
  if (e == NULL || e->type != PROTOBUF_C_TYPE_MESSAGE ||
      e->descriptor != &cairn__client__error__descriptor) {
    return NULL;
  }
  return *(const Cairn__Client__Error *const *)((const char *)body + e->offset);
}
