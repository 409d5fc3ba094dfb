/* kafka_conn.c - the Kafka port's framing and request header (kafka_conn.h). */
#include "kafka/kafka_conn.h"

#include "common/err.h"
#include "net/frame.h"

#include <stdlib.h>
#include <string.h>

static int kafka_conn_decode(const uint8_t *p, size_t len, uint32_t max_frame_bytes,
                             struct frame *f)
{
  memset(f, 0, sizeof *f);
  if (len < KAFKA_FRAME_SIZE_FIELD) {
    f->need = KAFKA_FRAME_SIZE_FIELD - len;
    return FRAME_NEED_MORE;
  }
  uint32_t n = kafka_be32(p);
  f->length = n;
  if (n == 0) {
    return CAIRN_EFRAMEEMPTY;
  }
  /* A ClientHello: a client with security.protocol SSL or SASL_SSL on a
   * port without TLS. Said plainly rather than as a 369 MB frame. */
  if (frame_looks_like_tls(p, len)) {
    return CAIRN_ETLS_ON_PLAIN;
  }
  /* A negative int32 (2 GiB and up) is no size any client sends: malformed
   * rather than merely too large. */
  if (n < KAFKA_FRAME_MIN_SIZE || n > INT32_MAX) {
    return CAIRN_EBADFRAME;
  }
  if (n > max_frame_bytes || n > FRAME_MAX_BYTES_LIMIT) {
    return CAIRN_ETOOLARGE;
  }
  size_t size = KAFKA_FRAME_SIZE_FIELD + (size_t)n;
  if (len < size) {
    f->need = size - len;
    return FRAME_NEED_MORE;
  }
  f->size = size;
  f->payload = p + KAFKA_FRAME_SIZE_FIELD;
  f->payload_len = n;
  return FRAME_WHOLE;
}

static int kafka_conn_unpack(const struct frame *f, uint64_t *correlation_id,
                             Cairn__Client__Api *api, uint32_t *api_version,
                             Cairn__Client__Envelope **env)
{
  if (f->payload_len < KAFKA_FRAME_MIN_SIZE) {
    return CAIRN_EBADFRAME;
  }
  *correlation_id = kafka_be32(f->payload + 4);
  *api = CAIRN__CLIENT__API__API_NONE; /* the Kafka api key stays in the payload */
  *api_version = kafka_be16(f->payload + 2);
  *env = NULL;
  return 0;
}

static int kafka_conn_encode_header(uint64_t correlation_id, const Cairn__Client__Envelope *env,
                                    uint64_t payload_len, uint8_t **hdr, size_t *hdr_len)
{
  (void)env;
  if (payload_len > INT32_MAX - 4) {
    return CAIRN_ETOOLARGE;
  }
  uint8_t *buf = malloc(8);
  if (buf == NULL) {
    return CAIRN_ENOMEM;
  }
  if (correlation_id == KAFKA_CONN_RAW_ANSWER) {
    kafka_put_be32(buf, (uint32_t)payload_len);
    *hdr = buf;
    *hdr_len = 4;
    return 0;
  }
  kafka_put_be32(buf, (uint32_t)(payload_len + 4));
  kafka_put_be32(buf + 4, (uint32_t)correlation_id);
  *hdr = buf;
  *hdr_len = 8;
  return 0;
}

const struct conn_framing kafka_conn_framing = {
    .name = "kafka",
    .size_field_bytes = KAFKA_FRAME_SIZE_FIELD,
    .decode = kafka_conn_decode,
    .unpack = kafka_conn_unpack,
    .encode_header = kafka_conn_encode_header,
    .answers_protocol_errors = false,
    .ordered_answers = true,
};

void kafka_header_peek(const uint8_t *req, int16_t *api_key, int16_t *api_version)
{
  *api_key = (int16_t)kafka_be16(req);
  *api_version = (int16_t)kafka_be16(req + 2);
}

int kafka_header_read(const uint8_t *req, size_t len, bool flexible, struct kafka_header *h,
                      struct kafka_reader *r)
{
  kafka_reader_init(r, req, len);
  h->api_key = kafka_get_i16(r);
  h->api_version = kafka_get_i16(r);
  h->correlation_id = kafka_get_i32(r);
  h->client_id = kafka_get_string(r);
  if (flexible) {
    kafka_skip_tagged_fields(r);
  }
  return r->err;
}
