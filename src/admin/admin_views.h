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
#include <stdint.h>

#define ADMIN_VIEW_READ_MAX (1u << 20)   /* bytes of batches one browse reads */
#define ADMIN_VIEW_BATCH_MAX (16u << 20) /* a batch decompressed */
#define ADMIN_VIEW_VALUE_MAX 65536u      /* bytes of a key or value shown */
#define ADMIN_VIEW_MAX_RECORDS 500u

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

/* The message browser: {"topic", "partition", "offset", "log_start_offset",
 * "high_watermark", "records": [{"offset", "timestamp", "key", "value",
 * "value_size", "headers": [{"key", "value"}]}]} with keys and values as
 * hex (null: none; at most ADMIN_VIEW_VALUE_MAX bytes shown), at most
 * limit records from offset, or from the first at or after timestamp when
 * it is >= 0. Read by the client Fetch's rules (handle_fetch_copy): on the
 * partition's leader only; elsewhere the answer adds "error", "leader_id"
 * and "leader_admin_address". Returns the HTTP status: 200, 421 (not the
 * leader), 404 (no such topic or partition), 409 (out of range, not
 * available yet), 500. */
unsigned admin_view_messages(struct node *n, const char *topic, uint32_t partition, int64_t offset,
                             int64_t timestamp, unsigned limit, struct admin_json *w);

#endif
