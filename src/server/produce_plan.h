/* produce_plan.h - a ProduceRequest checked against its payload before any
 * partition is touched: the partitions' batch_lengths cut the payload into
 * batches, in order, and each partition's batches are validated as a unit
 * (so a partition is produced whole or not at all as far as the request's
 * own bytes go). Pure: no node, no I/O; handle_produce.c drives it.
 *
 * Request-level failures (CAIRN_EBADREQUEST, answered MALFORMED_REQUEST):
 *   - acks other than ACKS_ALL;
 *   - no partitions, or a partition with no batches;
 *   - the batch lengths do not add up to exactly the payload's length.
 * Partition-level failures (produce_plan_validate_part, answered
 * CORRUPT_BATCH or REQUEST_TOO_LARGE for that partition only): a batch that
 * fails batch_validate(). */
#ifndef CAIRN_PRODUCE_PLAN_H
#define CAIRN_PRODUCE_PLAN_H

#include <stddef.h>
#include <stdint.h>

#include "client.pb-c.h"

#define PRODUCE_PLAN_ERRMSG_SIZE 200

/* One batch of the payload. */
struct produce_plan_batch {
  const uint8_t *p; /* borrowed from the payload */
  size_t len;
};

/* One ProducePartition of the request, in request order. */
struct produce_plan_part {
  const Cairn__Client__ProducePartition *req; /* borrowed from the request */
  struct produce_plan_batch *batches;         /* into the plan's array */
  size_t nbatches;                            /* req->n_batch_lengths */
  size_t first;                               /* index of batches[0] in plan->batches */
};

struct produce_plan {
  struct produce_plan_part *parts; /* owned */
  size_t nparts;
  struct produce_plan_batch *batches; /* owned: every batch, payload order */
  size_t nbatches;
};

/* Slices payload[0..payload_len) by pr's batch lengths. Returns 0 with
 * *plan filled (free with produce_plan_free()), CAIRN_EBADREQUEST with a
 * message in errmsg (nothing to free), or CAIRN_ENOMEM. Ownership: borrows
 * pr and payload, which must outlive the plan. Context: any thread. */
__attribute__((warn_unused_result)) int
produce_plan_build(struct produce_plan *plan, const Cairn__Client__ProduceRequest *pr,
                   const uint8_t *payload, size_t payload_len, char *errmsg, size_t errmsg_len);

/* Validates every batch of one partition with batch_validate() against
 * max_batch_bytes. Returns 0, or the first failing batch's code with
 * errmsg saying which batch (its index within the partition) and why.
 * Context: any thread. */
__attribute__((warn_unused_result)) int
produce_plan_validate_part(const struct produce_plan_part *pp, size_t max_batch_bytes, char *errmsg,
                           size_t errmsg_len);

/* Frees what the plan owns. Safe on a zeroed plan. */
void produce_plan_free(struct produce_plan *plan);

#endif
