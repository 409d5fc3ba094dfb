/* rgroup_fsm.h - a partition replica's Raft state machine: applying an
 * entry appends its batches to the store; a snapshot is a small descriptor
 * of the log (its manifest), never the data. Internal to rgroup. */
#ifndef CAIRN_RGROUP_FSM_H
#define CAIRN_RGROUP_FSM_H

#include "cluster/rgroup.h"

/* Fills rg->fsm. */
void rgroup_fsm_init(struct rgroup *rg);

/* Frees the state machine's scratch memory. */
void rgroup_fsm_close(struct rgroup *rg);

/* Appends one Raft entry's batches to the store with its index: the apply
 * path, also used for entries held back during a catch-up. *base (if not
 * NULL) gets the first batch's offset, -1 for an entry applied before.
 * Returns 0 or a negative code (the replica is then fatal). */
int rgroup_fsm_apply_entry(struct rgroup *rg, const uint8_t *entry, size_t len, uint64_t index,
                           int64_t *base);

#endif
