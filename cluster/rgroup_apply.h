/* rgroup_apply.h - the pure core of a partition replica's state machine:
 * one committed Raft entry (record batches, zero-padded to 8 bytes) judged
 * batch by batch against the producer table and appended to the store.
 * No libuv, no Raft instance, no clock, no logging: rgroup_fsm.c applies
 * every entry of a running node through rgroup_apply_entry(), and the
 * deterministic simulation (tests/sim/) runs the same function on the
 * replicas of a raft_fixture, so both exercise one piece of code.
 *
 * Context: one thread per struct rgroup_apply (the loop thread in a node). */
#ifndef CAIRN_RGROUP_APPLY_H
#define CAIRN_RGROUP_APPLY_H

#include "cluster/producer_state.h"
#include "storage/store.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The outcome of one batch of the entry being applied. */
struct rgroup_batch_result {
  int status;     /* 0 or a refusal of the producer table */
  int64_t offset; /* its base offset (a duplicate's original), -1 if refused */
};

/* What the state machine hands to the apply callback: one result per
 * batch of the entry, n 0 for an entry applied before a restart. */
struct rgroup_applied {
  struct rgroup_batch_result *results; /* the apply's scratch, valid until its next entry */
  size_t n;
  size_t appended; /* batches written to the store (the others: duplicates, refusals) */
};

/* Scratch memory and counters of one replica's applies. Caller allocates
 * it; rgroup_apply_init() empties it, rgroup_apply_close() frees what it
 * owns. */
struct rgroup_apply {
  struct store_batch *batches; /* the entry's batches, then those to append */
  size_t batches_cap;
  struct rgroup_batch_result *results;
  size_t results_cap;
  uint64_t duplicates; /* batches answered as duplicates */
  uint64_t refusals;   /* batches refused by the table */
};

void rgroup_apply_init(struct rgroup_apply *ap);
void rgroup_apply_close(struct rgroup_apply *ap);

/* Applies the entry entry[0..len) at Raft index: splits it into batches
 * and commands (rgroup_cmd.h; trailing zero padding of fewer than 8 bytes
 * ends it), runs the commands first (a LOG_START deletes below its offset,
 * capped at the log's end; also when the store holds index already, as a
 * command is idempotent), then judges each batch with
 * producer_state_check() in entry order (a later batch of a producer sees
 * an earlier one of the same entry), records the accepted ones with
 * producer_state_record() at the offsets the store will give them, and
 * store_append()s them as one unit with index. ps must cover the store up
 * to its end (the caller brings it there: rgroup_apply_scan).
 *
 * *out gets one result per item (a command's: status 0 and the log start
 * after it), or n 0 when the store holds index
 * already (applied before a restart: nobody waits for it); its results
 * are borrowed from ap (valid until the next call). Borrows entry for the
 * call only.
 *
 * Returns 0, or a negative code: CAIRN_EINVAL (no batch), a batch probe
 * error (malformed entry), CAIRN_ENOMEM, CAIRN_ECORRUPT (the store numbered
 * the batches otherwise), or the store's error. After an error the caller
 * must apply nothing more (the table may already record batches the store
 * did not take). */
__attribute__((warn_unused_result)) int
rgroup_apply_entry(struct rgroup_apply *ap, struct store *store, struct producer_state *ps,
                   const uint8_t *entry, size_t len, uint64_t index, struct rgroup_applied *out);

/* Whether the entry entry[0..len) carries a command (rgroup_cmd.h): what
 * the node checks before applying it (a LOG_START needs the producer table
 * saved first, rgroup_fsm.c). Walks the items by their length fields; a
 * malformed entry answers false (rgroup_apply_entry refuses it). */
bool rgroup_apply_has_command(const uint8_t *entry, size_t len);

/* Records the batches of the store in [from, to) into ps, in order, from
 * their headers (base offset and source index as the store stamped them):
 * how a replica rebuilds its table from its log. Returns 0 or a negative
 * code (the store's read or a header read's). Blocks (reads the log). */
__attribute__((warn_unused_result)) int
rgroup_apply_scan(struct store *store, struct producer_state *ps, int64_t from, int64_t to);

#endif
