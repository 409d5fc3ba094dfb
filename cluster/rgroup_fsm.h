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

#endif
