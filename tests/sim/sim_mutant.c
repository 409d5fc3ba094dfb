/* sim_mutant.c - a deliberate bug, linked only into sim_partition_mutant
 * (with -Wl,--wrap=producer_state_check): every call of
 * producer_state_check() from another object file (rgroup_apply.c's) gets
 * this copy of the check, which takes a retried batch of an idempotent
 * producer for a new one, so the state machine stores it a second time.
 * The mutant_check test requires the simulation to catch it. */
#include "cluster/producer_state.h"

int __real_producer_state_check(const struct producer_state *ps,
                                const struct producer_batch_info *b, bool *duplicate,
                                int64_t *base_offset);
int __wrap_producer_state_check(const struct producer_state *ps,
                                const struct producer_batch_info *b, bool *duplicate,
                                int64_t *base_offset);

int __wrap_producer_state_check(const struct producer_state *ps,
                                const struct producer_batch_info *b, bool *duplicate,
                                int64_t *base_offset)
{
  int rv = __real_producer_state_check(ps, b, duplicate, base_offset);
  if (rv == 0 && *duplicate) {
    *duplicate = false; /* the mutation: the duplicate check skipped */
    *base_offset = -1;
  }
  return rv;
}
