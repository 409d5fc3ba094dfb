/* accumulator.h - a partition's queue of batches being built, sealed and
 * sent (pure: no loop, no I/O, so tests drive it directly). The producer
 * owns one lc_acc per partition.
 *
 * A batch's life: OPEN (records are added; only the tail may be open) ->
 * sealed by lc_acc_seal (bytes final: producer id, epoch, sequence,
 * compression, CRC; a retry resends exactly these bytes) -> in flight ->
 * delivered or failed (lc_acc_pop). Batches leave in queue order. */
#ifndef CAIRN_LC_ACCUMULATOR_H
#define CAIRN_LC_ACCUMULATOR_H

#include <cairn/cairn.h>

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "format/batch_builder.h"

/* Fixed bytes counted against buffer memory per message, besides its
 * key, value and headers. */
#define LC_ACC_MSG_OVERHEAD 64

/* One accepted message: who to tell and what to tell them. */
struct lc_msg {
  cairn_delivery_cb cb;
  void *data;
  int64_t timestamp;
  size_t mem;  /* bytes counted against buffer_bytes */
  uint64_t id; /* the producer's count of accepted messages, for flush */
};

struct lc_batch {
  struct lc_batch *next;
  struct batch_builder bb; /* while open */
  bool open;
  uint8_t *bytes; /* once sealed, owned */
  size_t len;
  struct lc_msg *msgs;
  size_t nmsgs, cap;
  uint64_t created_ms;
  uint64_t deadline_ms; /* the first message's send time + delivery timeout */
  size_t mem;
  int32_t base_seq; /* -1 unless idempotent */
  bool in_flight;
  bool done; /* answered for good: status and offset below */
  int status;
  int64_t base_offset;
  int attempts;
  int last_err;
  /* Sent, and no answer yet told whether it was written (a timeout, a
   * lost connection, IN_DOUBT): the partition may hold it. Such a batch
   * must not be renumbered under a new epoch, which the partition could
   * not match to the first copy; producer.c resolves it first. */
  bool maybe_written;
};

struct lc_acc {
  struct lc_batch *head, *tail;
  /* No batch before this one is open (NULL: none is). Sealing goes in
   * queue order, so the open batches are the queue's end: a round looks
   * for batches to seal from here, not from the head (at 10,000
   * partitions with sealed batches queued behind slow answers, walking
   * every queue from its head every round was most of a producer's CPU). */
  struct lc_batch *first_open;
  size_t nbatches;
  int in_flight; /* batches of this queue in flight */
  int32_t next_seq;
};

void lc_acc_init(struct lc_acc *a);

/* Frees every batch (their messages get no callback: the caller fails
 * them first). */
void lc_acc_close(struct lc_acc *a);

/* Appends one record to the open tail batch, or to a new one: the open
 * batch is closed to new records first when it already holds batch_bytes
 * or the record would push it past max_batch_bytes. Ownership: borrows
 * every pointer for the call (bytes are copied). Returns 0, CAIRN_ETOOLARGE
 * (the record alone passes max_batch_bytes; nothing changes) or
 * CAIRN_ENOMEM. *opened says whether a new batch was started. */
__attribute__((warn_unused_result)) int lc_acc_append(struct lc_acc *a, size_t batch_bytes,
                                                      size_t max_batch_bytes, uint64_t now_ms,
                                                      uint64_t deadline_ms,
                                                      const struct cairn_message *m,
                                                      int64_t timestamp, const struct lc_msg *msg,
                                                      bool *opened);

/* Whether the open tail batch should be sealed now: it holds batch_bytes,
 * it is linger_ms old, or force (flush). False when there is none. */
bool lc_acc_tail_ready(const struct lc_acc *a, size_t batch_bytes, uint64_t linger_ms,
                       uint64_t now_ms, bool force);

/* Seals batch b (open; every batch before it sealed): stamps producer_id/epoch and, for an
 * idempotent producer (producer_id >= 0), the next sequence of the
 * partition; compresses the records with codec when it saves bytes.
 * A batch whose compression fails goes uncompressed. Returns 0 or
 * CAIRN_ENOMEM (b stays open). */
__attribute__((warn_unused_result)) int lc_acc_seal(struct lc_acc *a, struct lc_batch *b,
                                                    int64_t producer_id, int16_t epoch,
                                                    enum cairn_compression codec, int level);

/* After the producer's epoch changed (or idempotence was dropped): sets
 * every sealed batch not yet done to (producer_id, epoch) and sequences
 * from 0 again, in queue order, rewriting its header and CRC (the records
 * stay as they are, compressed or not). No batch may be in flight. */
void lc_acc_restamp(struct lc_acc *a, int64_t producer_id, int16_t epoch);

/* Removes and returns the head batch (the caller delivers or fails its
 * messages, then frees it with lc_acc_batch_free). NULL when empty. */
struct lc_batch *lc_acc_pop(struct lc_acc *a);

void lc_acc_batch_free(struct lc_batch *b);

#endif
