/* producer_state.h - a partition's idempotent-producer table: per producer
 * id its epoch and its last PRODUCER_STATE_WINDOW appended batches, so that
 * the state machine can tell a retried batch (answered with its original
 * offset, not appended again) from the next one (appended) and from one
 * that skips ahead (refused). Pure logic: no I/O, no clock; every replica
 * that records the same appended batches in the same order holds the same
 * table and encodes the same bytes.
 *
 * Rules for a batch with producer id >= 0 (producer_state_check):
 *   unknown id          base sequence 0 appends; else CAIRN_EUNKNOWN_PRODUCER
 *   older epoch         CAIRN_EPRODUCER_FENCED
 *   newer epoch         base sequence 0 appends (the window restarts);
 *                       else CAIRN_EOUT_OF_ORDER
 *   same epoch          a batch of the window with the same first and last
 *                       sequence: a duplicate (its base offset); the
 *                       sequence after the newest batch's last: appends;
 *                       anything else: CAIRN_EOUT_OF_ORDER
 * A batch of n records takes the sequences base .. base + n - 1 (one per
 * record, as Kafka and libcairn count them; a retry must resend the same
 * batch); sequences wrap from INT32_MAX to 0. A batch without a producer id
 * (-1) always appends and is not recorded.
 *
 * Only appended batches change the table (producer_state_record), so the
 * table after a log prefix is a function of that prefix's batch headers:
 * a replica rebuilds it by recording the batches it holds in order.
 *
 * Bound (applied when a new producer id is recorded, so deterministically):
 * producers whose newest batch's max timestamp is more than
 * PRODUCER_STATE_IDLE_MS older than the newest timestamp recorded are
 * dropped, then, while more than PRODUCER_STATE_MAX remain, the one whose
 * last append has the lowest Raft index. A dropped producer's next batch
 * gets CAIRN_EUNKNOWN_PRODUCER unless it starts at sequence 0.
 *
 * Encoding (the same bytes in a replica's snapshot and in its file
 * <replica>/producers; docs/replication.md), little-endian:
 *   [0..4)   magic PRODUCER_STATE_MAGIC ("CPT1")
 *   [4..8)   version PRODUCER_STATE_VERSION
 *   [8..12)  payload length N
 *   [12..16) CRC-32C of the payload
 *   [16..16+N) cairn.storage.ProducerTable (proto/storage.proto), producers
 *            ascending by id
 * Equal tables encode to equal bytes.
 *
 * Context: a table is used by one thread; the functions keep no global
 * state. */
#ifndef CAIRN_PRODUCER_STATE_H
#define CAIRN_PRODUCER_STATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define PRODUCER_STATE_WINDOW 5
#define PRODUCER_STATE_MAX 10000u
#define PRODUCER_STATE_IDLE_MS (7LL * 24 * 3600 * 1000)
#define PRODUCER_STATE_MAX_BYTES (64u << 20) /* an encoded table, decode bound */
#define PRODUCER_STATE_MAGIC 0x31545043u     /* the bytes "CPT1" read little-endian */
#define PRODUCER_STATE_VERSION 1u
#define PRODUCER_STATE_HEADER_BYTES 16u

/* What the table needs of a batch header (format/batch.h). */
struct producer_batch_info {
  int64_t producer_id; /* -1: not idempotent */
  int16_t epoch;
  int32_t base_sequence;
  int32_t record_count;
  int64_t max_timestamp;
};

/* One appended batch of a producer. */
struct producer_batch {
  int32_t first_sequence;
  int32_t last_sequence; /* first_sequence + records - 1, wrapped */
  int64_t base_offset;
};

struct producer_entry {
  int64_t producer_id;
  int16_t epoch;
  uint32_t nbatches;                                    /* 1..WINDOW */
  struct producer_batch batches[PRODUCER_STATE_WINDOW]; /* oldest first */
  uint64_t last_index;                                  /* Raft index of its newest batch */
  int64_t last_timestamp;                               /* max timestamp of its newest batch */
};

/* Read the fields; change them only through the functions below. */
struct producer_state {
  struct producer_entry *entries; /* owned, ascending producer_id */
  size_t n, cap;
  int64_t max_timestamp; /* newest max timestamp recorded, INT64_MIN none */
  uint64_t expired;      /* producers dropped by the bound (not encoded) */
};

/* Caller allocates ps; init makes it empty. close frees what it owns; ps
 * may then be init'ed again. */
void producer_state_init(struct producer_state *ps);
void producer_state_close(struct producer_state *ps);

/* Judges one batch against the table without changing it. Returns 0 with
 * *duplicate false (append it), 0 with *duplicate true and *base_offset the
 * original batch's offset (do not append), or CAIRN_EUNKNOWN_PRODUCER,
 * CAIRN_EPRODUCER_FENCED, CAIRN_EOUT_OF_ORDER (do not append). Borrows b. */
__attribute__((warn_unused_result)) int producer_state_check(const struct producer_state *ps,
                                                             const struct producer_batch_info *b,
                                                             bool *duplicate, int64_t *base_offset);

/* Records an appended batch (one producer_state_check accepted, in append
 * order) at base_offset, from the entry at Raft index. A batch without a
 * producer id changes nothing. Returns 0 or CAIRN_ENOMEM (then the table is
 * unchanged). */
__attribute__((warn_unused_result)) int producer_state_record(struct producer_state *ps,
                                                              const struct producer_batch_info *b,
                                                              int64_t base_offset, uint64_t index);

/* The entry of producer_id, or NULL. Returns borrowed (valid until the next
 * change of ps). */
const struct producer_entry *producer_state_find(const struct producer_state *ps,
                                                 int64_t producer_id);

/* Encodes ps as a ProducerTable covering the log up to next_offset and
 * Raft index last_index. *out is owned by the caller (free with free()).
 * Returns 0 or CAIRN_ENOMEM. */
__attribute__((warn_unused_result)) int producer_state_encode(const struct producer_state *ps,
                                                              int64_t next_offset,
                                                              uint64_t last_index, uint8_t **out,
                                                              size_t *len);

/* Replaces ps's contents (an init'ed table) with the decoded buf[0..len)
 * (untrusted) and sets *next_offset and *last_index (may be NULL). On
 * failure ps is unchanged. Returns 0, CAIRN_ETOOLARGE, CAIRN_ETRUNCATED,
 * CAIRN_EBADMAGIC (magic or version), CAIRN_EBADCRC, CAIRN_ECORRUPT (bad
 * protobuf, ids not ascending, an empty or oversized window, a count over
 * the bound) or CAIRN_ENOMEM. */
__attribute__((warn_unused_result)) int producer_state_decode(struct producer_state *ps,
                                                              const uint8_t *buf, size_t len,
                                                              int64_t *next_offset,
                                                              uint64_t *last_index);

#endif
