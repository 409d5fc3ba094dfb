/* kafka_conn.h - the Kafka port's framing for conn.c (struct
 * conn_framing) and the Kafka request header.
 *
 * Frame: int32 BE size N (the bytes after it, KAFKA_FRAME_MIN_SIZE <= N <=
 * the port's max_frame_bytes), then the request: request header, body.
 * Request header v1 (non-flexible versions) and v2 (flexible ones):
 *   int16 api_key, int16 api_version, int32 correlation_id,
 *   nullable string client_id, [v2: tagged fields]
 * Answer: int32 BE size, int32 correlation_id (response header v0: also
 * for ApiVersions v3, whose body alone is flexible), body. An answer whose
 * request's correlation id is KAFKA_CONN_RAW_ANSWER (no 32-bit id is) has
 * no correlation id: int32 BE size, body. That is a raw SASL token, the
 * answer to a token a client sends after a SaslHandshake v0
 * (src/kafka/kafka_handle_sasl.c).
 *
 * The decoder distinguishes FRAME_NEED_MORE from malformed frames
 * (CAIRN_EFRAMEEMPTY for N = 0, CAIRN_EBADFRAME for 0 < N < 8 or N < 0 as
 * int32: a 2 GiB length, CAIRN_ETOOLARGE above the limit, refused as soon
 * as the 4 size bytes are in; CAIRN_ETLS_ON_PLAIN for a TLS ClientHello,
 * a TLS client on a plaintext port, as soon as the 4 size bytes are in). A
 * malformed frame is logged and the conn drains: Kafka has no generic
 * error answer.
 *
 * Context: any thread (pure functions). */
#ifndef CAIRN_KAFKA_CONN_H
#define CAIRN_KAFKA_CONN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kafka/kafka_codec.h"
#include "net/conn.h"

#define KAFKA_FRAME_SIZE_FIELD 4
#define KAFKA_FRAME_MIN_SIZE 8 /* api_key, api_version, correlation_id */
#define KAFKA_CONN_RAW_ANSWER (UINT64_C(1) << 32)

/* The framing for the Kafka port's listener (conn_limits.framing). */
extern const struct conn_framing kafka_conn_framing;

struct kafka_header {
  int16_t api_key;
  int16_t api_version;
  int32_t correlation_id;
  struct kafka_str client_id; /* borrowed from the request; ptr NULL: null */
};

/* Reads the request header from req[0..len) (a request's payload as the
 * framing hands it over); flexible: a v2 header (tagged fields after the
 * client id). Returns 0 with *h and r positioned at the body, or the
 * reader's error. Borrows req. */
__attribute__((warn_unused_result)) int kafka_header_read(const uint8_t *req, size_t len,
                                                          bool flexible, struct kafka_header *h,
                                                          struct kafka_reader *r);

/* The api key and version at the start of a request payload (len >= 4:
 * the framing guarantees 8). */
void kafka_header_peek(const uint8_t *req, int16_t *api_key, int16_t *api_version);

#endif
