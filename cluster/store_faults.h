/* store_faults.h - the cluster-wide table of partition replicas whose store
 * failed (a PostgreSQL store being revived, or a store latched fatal): which
 * node, which partition, why and since when. Live state, never in the Raft
 * log.
 *
 * Each node sends the failures of the replicas it hosts with every
 * heartbeat (the whole list, so an empty one says "recovered"); the
 * controller leader keeps the latest list of each node here (sfault_drop_node
 * then sfault_add) and drops a node's entries when it is declared dead. Its
 * heartbeat answers carry the whole table back, and every other node keeps
 * that copy (sfault_clear then sfault_add), so any node's Metadata names
 * every failed replica (docs/protocol.md).
 *
 * Bounds: at most SFAULT_MAX entries (the rest are left out) and
 * SFAULT_REASON_MAX bytes of each message (cut, never refused): a heartbeat
 * and its answer stay small whatever a peer sends.
 *
 * Context: loop thread only; no I/O. */
#ifndef CAIRN_STORE_FAULTS_H
#define CAIRN_STORE_FAULTS_H

#include "cluster/meta_state.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SFAULT_MAX 256        /* entries in the table, and in one message */
#define SFAULT_REASON_MAX 255 /* bytes of a reason kept (a store's errmsg is shorter) */

/* One replica whose store failed. */
struct sfault {
  uint64_t node_id; /* the node hosting the replica */
  uint32_t topic_id;
  uint32_t partition;
  uint64_t since_ms;                  /* wall clock (ms since 1970) of the failure; 0: not known */
  char reason[SFAULT_REASON_MAX + 1]; /* the store's message, NUL-terminated */
  /* The replica's Raft files were refused (raft_files.h) and it is being
   * rebuilt: since_ms then names the refusal (a new refusal, a new value). */
  bool raft_damaged;
  /* With raft_damaged: the partition's leader confirmed that the replica
   * is not in the group's committed Raft configuration, for this since_ms
   * (partitions.h, parts_replica_out): its node may discard the files. */
  bool rebuild_ready;
};

struct sfault_table {
  struct sfault v[SFAULT_MAX]; /* v[0..n), in no particular order */
  size_t n;
};

/* Empties t (caller allocates). */
void sfault_init(struct sfault_table *t);

/* Removes every entry: a new copy of the controller's table follows. */
void sfault_clear(struct sfault_table *t);

/* Adds one entry (reason copied, cut at SFAULT_REASON_MAX bytes; NULL:
 * ""). Returns false when the table is full (nothing added). */
bool sfault_add(struct sfault_table *t, uint64_t node_id, uint32_t topic_id, uint32_t partition,
                uint64_t since_ms, const char *reason);

/* node_id's entry for (topic_id, partition), NULL if none. Returns
 * borrowed, valid until t changes. */
struct sfault *sfault_find(struct sfault_table *t, uint64_t node_id, uint32_t topic_id,
                           uint32_t partition);

/* Is node_id's replica of (topic_id, partition) listed with raft_damaged? */
bool sfault_raft_damaged(const struct sfault_table *t, uint64_t node_id, uint32_t topic_id,
                         uint32_t partition);

/* Removes node_id's entries: before its new report is added, or when it
 * was declared dead or removed. */
void sfault_drop_node(struct sfault_table *t, uint64_t node_id);

/* Are node_id's entries shown? Only while the node is alive or draining:
 * one declared dead or removed serves nothing, and its entries go. */
bool sfault_node_counts(const struct meta_state *st, uint64_t node_id);

#endif
