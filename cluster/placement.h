/* placement.h - where a partition's replicas go: rf distinct ALIVE nodes,
 * spreading replicas and preferred leaders evenly over nodes (counting the
 * load already in the state) and replicas of one partition over distinct
 * racks where racks allow. Deterministic: the same state gives the same
 * choice on every node, which is what lets CreateTopic place inside
 * meta_apply().
 *
 * Rules (docs/metadata.md, "Placement"):
 * - eligible: nodes in state ALIVE (never DEAD, DRAINING or REMOVED) that
 *   have the capabilities the table requires (placement_table_require: a
 *   postgresql topic's replicas go only to nodes with a database);
 * - preferred leader of a new partition: the eligible node with the fewest
 *   preferred leaderships, then the fewest replicas, then the lowest id;
 * - each further replica: the eligible node not yet in the partition whose
 *   rack holds the fewest of the partition's replicas, then with the fewest
 *   replicas, then the lowest id. Nodes without a rack share the rack "".
 * Each choice updates the load table, so a many-partition topic balances
 * itself as well as against what the cluster already holds.
 *
 * Context: pure functions, any thread; the table borrows nothing after
 * placement_table_build returns. */
#ifndef CAIRN_PLACEMENT_H
#define CAIRN_PLACEMENT_H

#include "cluster/meta_state.h"

#include <stddef.h>
#include <stdint.h>

struct placement_node {
  uint64_t id;
  char rack[META_RACK_MAX + 1];
  bool eligible; /* ALIVE */
  uint32_t caps; /* META_NODE_CAP_* bits the node registered */
  uint32_t replicas;
  uint32_t leaders;
};

/* The load of every non-REMOVED node of a state. */
struct placement_table {
  struct placement_node *nodes; /* owned, ascending id */
  size_t nnodes;
  uint32_t need;      /* META_NODE_CAP_* bits a chosen node must have (0: none) */
  uint32_t neligible; /* eligible nodes that have `need` */
};

/* Builds the table from st (borrowed for the call only). t->nodes is owned
 * (free with placement_table_free). Returns 0 or CAIRN_ENOMEM. */
__attribute__((warn_unused_result)) int placement_table_build(const struct meta_state *st,
                                                              struct placement_table *t);
void placement_table_free(struct placement_table *t);

/* From now on only nodes with every bit of caps (META_NODE_CAP_*) are
 * chosen, e.g. meta_topic_needs() of the topic being placed; 0 lifts the
 * requirement. Loads are kept: one table serves topics of several kinds. */
void placement_table_require(struct placement_table *t, uint32_t caps);

/* Places `partitions` new partitions of rf replicas each: out receives
 * partitions * rf node ids, row p being partition p with its preferred
 * leader first. Updates t's loads. Returns 0, or CAIRN_EINVALID_RF when rf
 * is 0, above META_MAX_RF or above the number of eligible nodes (out is then
 * untouched). */
__attribute__((warn_unused_result)) int
placement_assign(struct placement_table *t, uint32_t partitions, uint32_t rf, uint64_t *out);

/* Picks one more replica for a partition whose replicas are
 * current[0..ncurrent): an eligible node not in current, spreading racks
 * over the replicas that stay (all of current but `leaving`, 0 = none).
 * Updates t's loads. Returns 0 and *out, or CAIRN_ENOTFOUND when no
 * eligible node is left. */
__attribute__((warn_unused_result)) int placement_pick(struct placement_table *t,
                                                       const uint64_t *current, uint32_t ncurrent,
                                                       uint64_t leaving, uint64_t *out);

/* Makes node id (in)eligible for the picks that follow, e.g. because the
 * caller is about to mark it DEAD. No-op for an unknown id. */
void placement_set_eligible(struct placement_table *t, uint64_t id, bool eligible);

/* Moves one replica's load from node `from` to nothing (a removal), so a
 * caller planning several changes keeps the table current. No-op for an
 * unknown id. */
void placement_unload(struct placement_table *t, uint64_t from, bool was_leader);

#endif
