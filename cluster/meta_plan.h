/* meta_plan.h - the controller leader's repair planner: from the metadata
 * state and what only the leader knows (heartbeats, the Raft configurations
 * partition leaders report), the next few commands to propose. Pure: no I/O,
 * no clock but the `now_ms` it is given; the leader runs it on a timer and
 * proposes what it returns. Running it twice before the first batch is
 * applied is harmless: SetNodeState names the incarnation and SetReplicas the
 * replica epoch it was planned against, so a stale duplicate is refused
 * (CAIRN_ESTALE) by meta_apply().
 *
 * Rules, in order (docs/metadata.md, "Repair planner"):
 * 1. Liveness. For each node with an entry in the liveness view whose
 *    incarnation is the registered one (entries of another incarnation, and
 *    nodes without an entry, are left alone):
 *    - ALIVE and silent for >= node_timeout_ms  -> SetNodeState DEAD;
 *    - DEAD and heard within node_timeout_ms    -> SetNodeState ALIVE.
 *    DRAINING nodes are never marked DEAD (they are leaving anyway).
 * 2. Replica moves, one change per partition per run, partitions in (topic
 *    id, partition) order. A replica is "leaving" when its node is DRAINING
 *    or REMOVED, or DEAD and silent for >= node_timeout_ms +
 *    replace_delay_ms, or lacks a capability the topic needs (a postgresql
 *    topic's replica on a node without a database: older metadata). With
 *    `staying` = replicas not leaving:
 *    - staying < rf, and placement finds an ALIVE node not in the partition
 *      (with the topic's capabilities: meta_topic_needs)
 *      -> SetReplicas appending it (replicas[0] stays preferred leader);
 *    - else, once the partition's reported configuration (same replica
 *      epoch) has every staying replica as a voter ("caught up"):
 *      a leaving replica -> SetReplicas without it (if it was replicas[0],
 *      the next replica becomes the preferred leader);
 *      no leaving replica but more than rf -> SetReplicas without the last.
 * 3. A DRAINING node that no partition lists any more -> SetNodeState REMOVED.
 * At most opts.max_commands commands per run. A move starts (an addition to
 * a partition with exactly rf replicas) only while fewer than
 * opts.max_moves partitions have more replicas than rf, counting the moves
 * this run starts: catch-up traffic stays bounded however many partitions a
 * dead node held. Additions to a partition already over rf (a move in
 * progress) or under rf (restoring redundancy) are not held back.
 *
 * Context: pure; any thread, as long as the state is not applied to meanwhile. */
#ifndef CAIRN_META_PLAN_H
#define CAIRN_META_PLAN_H

#include "cluster/meta_state.h"

#include <stddef.h>
#include <stdint.h>

struct meta_plan_opts {
  uint64_t node_timeout_ms;  /* silent this long: DEAD */
  uint64_t replace_delay_ms; /* DEAD this much longer: its replicas move */
  size_t max_commands;       /* per run */
  size_t max_moves;          /* partitions over rf at once; 0 = no limit */
};

/* node_timeout 10 s, replace_delay 5 min, 32 commands, 16 moves. */
void meta_plan_opts_default(struct meta_plan_opts *o);

/* What the leader knows of one node's heartbeats. A node the leader has not
 * heard from since it took office should be given ms_since_heartbeat = the
 * time since it took office (so a new leader waits a full timeout). */
struct meta_plan_liveness {
  uint64_t node_id;
  uint64_t incarnation; /* of the process that sent the heartbeats */
  uint64_t ms_since_heartbeat;
};

/* A partition's Raft configuration as its leader last reported it. */
struct meta_plan_config {
  uint32_t topic_id;
  uint32_t partition;
  uint64_t replica_epoch; /* the SetReplicas epoch the leader had applied */
  const uint64_t *voters; /* borrowed for the call */
  size_t nvoters;
};

struct meta_plan_input {
  const struct meta_state *st;
  const struct meta_plan_liveness *live;
  size_t nlive;
  const struct meta_plan_config *configs;
  size_t nconfigs;
  uint64_t now_ms; /* stamped into SetNodeState.at_ms */
  struct meta_plan_opts opts;
};

/* One command to propose, encoded, and why (for the log). */
struct meta_plan_cmd {
  uint8_t *cmd; /* owned by the meta_plan_out */
  size_t len;
  char why[160];
};

struct meta_plan_out {
  struct meta_plan_cmd *cmds; /* owned */
  size_t ncmds;
};

/* Runs the rules above. Borrows everything in `in`. On success *out holds
 * 0..opts.max_commands commands (free with meta_plan_out_free, also when it
 * is empty). Returns 0 or CAIRN_ENOMEM (then *out is empty). */
__attribute__((warn_unused_result)) int meta_plan_run(const struct meta_plan_input *in,
                                                      struct meta_plan_out *out);

void meta_plan_out_free(struct meta_plan_out *out);

#endif
