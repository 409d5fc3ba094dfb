/* produce_plan.c - slicing and validation of a ProduceRequest's payload. */
#include "server/produce_plan.h"

#include "common/err.h"
#include "format/batch.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int produce_plan_build(struct produce_plan *plan, const Cairn__Client__ProduceRequest *pr,
                       const uint8_t *payload, size_t payload_len, char *errmsg, size_t errmsg_len)
{
  memset(plan, 0, sizeof *plan);
  if (pr->acks != CAIRN__CLIENT__ACKS__ACKS_ALL) {
    snprintf(errmsg, errmsg_len, "acks %d is not offered (only ACKS_ALL)", (int)pr->acks);
    return CAIRN_EBADREQUEST;
  }
  if (pr->n_partitions == 0) {
    snprintf(errmsg, errmsg_len, "no partitions");
    return CAIRN_EBADREQUEST;
  }
  /* Each length is a u32 and their number is bounded by the frame, so a
   * u64 sum cannot overflow. */
  uint64_t sum = 0;
  size_t nbatches = 0;
  for (size_t i = 0; i < pr->n_partitions; i++) {
    const Cairn__Client__ProducePartition *pp = pr->partitions[i];
    if (pp->n_batch_lengths == 0) {
      snprintf(errmsg, errmsg_len, "partition %s/%" PRIu32 " (entry %zu) has no batches", pp->topic,
               pp->partition, i);
      return CAIRN_EBADREQUEST;
    }
    for (size_t b = 0; b < pp->n_batch_lengths; b++) {
      sum += pp->batch_lengths[b];
    }
    nbatches += pp->n_batch_lengths;
  }
  if (sum != payload_len) {
    snprintf(errmsg, errmsg_len,
             "batch lengths add up to %" PRIu64 " bytes but the payload holds %zu", sum,
             payload_len);
    return CAIRN_EBADREQUEST;
  }
  plan->parts = calloc(pr->n_partitions, sizeof *plan->parts);
  plan->batches = calloc(nbatches, sizeof *plan->batches);
  if (plan->parts == NULL || plan->batches == NULL) {
    produce_plan_free(plan);
    return CAIRN_ENOMEM;
  }
  plan->nparts = pr->n_partitions;
  plan->nbatches = nbatches;
  size_t pos = 0, k = 0;
  for (size_t i = 0; i < pr->n_partitions; i++) {
    const Cairn__Client__ProducePartition *pp = pr->partitions[i];
    struct produce_plan_part *part = &plan->parts[i];
    part->req = pp;
    part->first = k;
    part->batches = &plan->batches[k];
    part->nbatches = pp->n_batch_lengths;
    for (size_t b = 0; b < pp->n_batch_lengths; b++, k++) {
      plan->batches[k].p = payload + pos;
      plan->batches[k].len = pp->batch_lengths[b];
      pos += pp->batch_lengths[b];
    }
  }
  return 0;
}

int produce_plan_validate_part(const struct produce_plan_part *pp, size_t max_batch_bytes,
                               char *errmsg, size_t errmsg_len)
{
  for (size_t b = 0; b < pp->nbatches; b++) {
    char why[160];
    int rv = batch_validate(pp->batches[b].p, pp->batches[b].len, max_batch_bytes, why, sizeof why);
    if (rv != 0) {
      snprintf(errmsg, errmsg_len, "batch %zu of %zu (%zu bytes): %s", b, pp->nbatches,
               pp->batches[b].len, why);
      return rv;
    }
  }
  return 0;
}

void produce_plan_free(struct produce_plan *plan)
{
  free(plan->parts);
  free(plan->batches);
  memset(plan, 0, sizeof *plan);
}
