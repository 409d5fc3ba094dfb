/* ctl_reports.h - the controller leader's table of partition reports:
 * for each partition, the Raft configuration its leader last reported
 * (leader, term, voters, replica epoch). Nodes report the partitions they
 * lead with every heartbeat, in full or as a delta (controller.h,
 * ctl_note_heartbeat); the planner reads the table (meta_plan.h).
 *
 * The table is kept sorted by group id, so a report of N partitions costs
 * O(N log N + table) rather than a scan of the table per partition: at
 * 10,000 partitions a full report took ~33 million comparisons on the
 * controller's leader, 16 % of an idle node's samples.
 *
 * Ownership: the table owns its array (ctl_reports_free). Context: the
 * loop thread; nothing here blocks or calls back. */
#ifndef CAIRN_CTL_REPORTS_H
#define CAIRN_CTL_REPORTS_H

#include "cluster/meta_state.h"

#include <stddef.h>
#include <stdint.h>

/* A partition's Raft configuration as its leader reported it. */
struct ctl_report {
  uint32_t topic_id;
  uint32_t partition;
  uint64_t replica_epoch; /* of the metadata the leader had applied */
  uint64_t leader_id;
  uint64_t term;          /* the leader's Raft term: a newer one replaces */
  uint64_t voters[META_MAX_REPLICAS];
  size_t nvoters;
};

struct ctl_reports {
  struct ctl_report *v; /* [0, n), ascending group id, one per partition */
  size_t n, cap;
};

/* An empty table (no allocation). */
void ctl_reports_init(struct ctl_reports *t);

/* Frees the array; t is empty after. */
void ctl_reports_free(struct ctl_reports *t);

/* Forgets every report (keeps the array). */
void ctl_reports_clear(struct ctl_reports *t);

/* node_id's reports rs[0, n) (copied; their leader_id is set to node_id):
 * each replaces its partition's report if that one's term is lower or
 * equal, and is added if there is none; a report of a higher term stays.
 * The same partition twice in rs: the higher term counts. Returns 0 or
 * CAIRN_ENOMEM (then the table is unchanged). */
__attribute__((warn_unused_result)) int ctl_reports_put(struct ctl_reports *t, uint64_t node_id,
                                                        const struct ctl_report *rs, size_t n);

/* Drops the report of partition group_id if node_id made it. */
void ctl_reports_drop(struct ctl_reports *t, uint64_t node_id, uint64_t group_id);

/* Drops every report node_id made. */
void ctl_reports_drop_node(struct ctl_reports *t, uint64_t node_id);

/* The report of partition group_id, or NULL. */
const struct ctl_report *ctl_reports_find(const struct ctl_reports *t, uint64_t group_id);

#endif
