/* admin_views.h - the admin port's JSON views (/v1/...): the same state as
 * the client protocol's DescribeCluster and DescribeTopic, from this
 * node's replica of the metadata completed with what it knows first hand
 * of the partitions it hosts (handle_metadata.c does the same for the
 * client port). docs/operations.md shows each document.
 *
 * Context: loop thread only. Each writes one complete JSON value into w. */
#ifndef CAIRN_ADMIN_VIEWS_H
#define CAIRN_ADMIN_VIEWS_H

#include "admin/admin_json.h"

#include <stdbool.h>

struct node;

/* {"cluster_id", "node_id", "controller_id", "summary", "nodes", "topics"}. */
void admin_view_cluster(struct node *n, struct admin_json *w);

/* {"nodes": [...]} */
void admin_view_nodes(struct node *n, struct admin_json *w);

/* {"topics": [...]} without partitions. */
void admin_view_topics(struct node *n, struct admin_json *w);

/* One topic with its partitions; false (nothing written) if unknown. */
bool admin_view_topic(struct node *n, const char *name, struct admin_json *w);

/* {"coordinator_id", "groups": [{"group", "state", "protocol_type",
 * "strategy", "generation", "leader_id", "members": [{"member_id",
 * "client_id", "session_timeout_ms", "topics", "assignment"}], "offsets":
 * [{"topic", "partition", "committed", "high_watermark", "lag",
 * "member_id"}], "lag_total"}]}: the groups this node coordinates (those
 * whose __cairn_offsets partition it leads; every node's view together
 * lists them all), from the coordinator (coord_each_group,
 * coord_group_lag). A lag of -1 is unknown: the partition is not hosted
 * here, or nothing is committed yet. */
void admin_view_groups(struct node *n, struct admin_json *w);

#endif
