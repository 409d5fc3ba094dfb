/* fetch_proto.c - encoding of the replica catch-up protocol's frames. */
#include "cluster/fetch_proto.h"

#include "common/err.h"
#include "format/crc32c.h"
#include "format/endian.h"

#include <string.h>

void fetch_request_encode(const struct fetch_request *q, uint8_t *buf)
{
  memset(buf, 0, FETCH_REQUEST_SIZE);
  le_put32(buf, q->kind == FETCH_KIND_TABLE ? FETCH_TABLE_MAGIC : FETCH_REQUEST_MAGIC);
  le_put32(buf + 4, q->max_bytes);
  le_put64(buf + 8, (uint64_t)q->offset);
  le_put32(buf + 20, crc32c(buf, 20));
}

int fetch_request_decode(const uint8_t *buf, struct fetch_request *q)
{
  uint32_t magic = le_get32(buf);
  if (magic != FETCH_REQUEST_MAGIC && magic != FETCH_TABLE_MAGIC) {
    return CAIRN_EBADMAGIC;
  }
  if (le_get32(buf + 20) != crc32c(buf, 20)) {
    return CAIRN_EBADCRC;
  }
  q->kind = magic == FETCH_TABLE_MAGIC ? FETCH_KIND_TABLE : FETCH_KIND_BATCHES;
  q->max_bytes = le_get32(buf + 4);
  q->offset = (int64_t)le_get64(buf + 8);
  return 0;
}

void fetch_response_encode(const struct fetch_response *r, uint8_t *buf)
{
  memset(buf, 0, FETCH_RESPONSE_SIZE);
  le_put32(buf, FETCH_RESPONSE_MAGIC);
  le_put32(buf + 4, (uint32_t)r->status);
  le_put64(buf + 8, (uint64_t)r->log_start);
  le_put64(buf + 16, (uint64_t)r->log_next);
  le_put32(buf + 24, r->nbytes);
  le_put32(buf + 28, r->payload_crc);
  le_put32(buf + 36, crc32c(buf, 36));
}

int fetch_response_decode(const uint8_t *buf, struct fetch_response *r)
{
  if (le_get32(buf) != FETCH_RESPONSE_MAGIC) {
    return CAIRN_EBADMAGIC;
  }
  if (le_get32(buf + 36) != crc32c(buf, 36)) {
    return CAIRN_EBADCRC;
  }
  r->status = (int32_t)le_get32(buf + 4);
  r->log_start = (int64_t)le_get64(buf + 8);
  r->log_next = (int64_t)le_get64(buf + 16);
  r->nbytes = le_get32(buf + 24);
  r->payload_crc = le_get32(buf + 28);
  return r->nbytes > FETCH_MAX_PAYLOAD ? CAIRN_ETOOLARGE : 0;
}
