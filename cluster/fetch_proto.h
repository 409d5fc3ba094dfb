/* fetch_proto.h - the replica catch-up protocol, spoken on a cluster-port
 * connection whose preamble kind is TRANSPORT_KIND_FETCH. A replica that
 * restored a snapshot descriptor ahead of its log asks a peer for batches,
 * one request at a time; the peer answers from its store with whole batches
 * exactly as stored. Little-endian, version FETCH_VERSION = 1.
 *
 * Request, FETCH_REQUEST_SIZE = 24 bytes:
 *    0 u32 magic     "CFQ1": batches; "CFT1": the peer's producer table
 *    4 u32 max_bytes (the peer caps it at FETCH_MAX_BYTES; 0 for a table)
 *    8 i64 offset    first offset wanted (0 for a table)
 *   16 u32 reserved, 0
 *   20 u32 CRC-32C of bytes [0, 20)
 *
 * Response header, FETCH_RESPONSE_SIZE = 40 bytes, then nbytes of batches:
 *    0 u32 magic "CFR1"
 *    4 i32 status     0, or a negative cairn code (CAIRN_EOFFSET: offset
 *                     outside [log_start, log_next])
 *    8 i64 log_start
 *   16 i64 log_next
 *   24 u32 nbytes     whole batches from the one holding offset; 0 when
 *                     offset == log_next. For a table: the table as
 *                     producer_state_encode() writes it (it names the
 *                     offset and Raft index it covers, the peer's log end),
 *                     or 0 with status CAIRN_EREPLICA_NOT_AVAILABLE when the
 *                     peer has none that covers its log (it is catching up
 *                     itself, or lacks producers below its own start)
 *   28 u32 payload CRC-32C of the nbytes that follow
 *   32 u32 reserved, 0
 *   36 u32 CRC-32C of bytes [0, 36)
 *
 * Why a table: a replica whose log restarts at its peer's log start
 * (retention or a LOG_START deleted what it lacks) cannot rebuild the
 * producers of the deleted batches from any log; the peer's table, taken
 * at its log end, covers them (docs/replication.md, "Catch-up"). A peer of
 * an older version closes the connection on the "CFT1" magic.
 */
#ifndef CAIRN_FETCH_PROTO_H
#define CAIRN_FETCH_PROTO_H

#include <stddef.h>
#include <stdint.h>

#define FETCH_VERSION 1
#define FETCH_REQUEST_MAGIC 0x31514643u  /* "CFQ1" */
#define FETCH_RESPONSE_MAGIC 0x31524643u /* "CFR1" */
#define FETCH_TABLE_MAGIC 0x31544643u    /* "CFT1" */
#define FETCH_REQUEST_SIZE 24
#define FETCH_RESPONSE_SIZE 40
#define FETCH_MAX_BYTES (4u << 20)
/* A response may exceed max_bytes by one batch (the first is always whole). */
#define FETCH_MAX_PAYLOAD (FETCH_MAX_BYTES + (16u << 20))

enum fetch_kind { FETCH_KIND_BATCHES, FETCH_KIND_TABLE };

struct fetch_request {
  enum fetch_kind kind;
  int64_t offset;
  uint32_t max_bytes;
};

struct fetch_response {
  int32_t status;
  int64_t log_start;
  int64_t log_next;
  uint32_t nbytes;
  uint32_t payload_crc;
};

void fetch_request_encode(const struct fetch_request *q, uint8_t *buf);

/* Returns 0, or CAIRN_EBADMAGIC / CAIRN_EBADCRC. */
int fetch_request_decode(const uint8_t *buf, struct fetch_request *q);

void fetch_response_encode(const struct fetch_response *r, uint8_t *buf);

/* Returns 0, or CAIRN_EBADMAGIC / CAIRN_EBADCRC / CAIRN_ETOOLARGE. */
int fetch_response_decode(const uint8_t *buf, struct fetch_response *r);

#endif
