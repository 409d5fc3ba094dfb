/* handlers.h - the client port's request handlers, one file per API
 * (handle_<api>.c), reached through one table (dispatch.c).
 *
 * Every handler takes a request from the conn layer and finishes it with
 * exactly one conn_respond() or conn_respond_error(), now or later (see
 * conn.h: a request may be answered after later ones, and its cancel
 * callback tells the handler the conn is closing).
 *
 * Admin requests (topics, cluster, node registration) are served by the
 * controller leader; any other node forwards them there unchanged
 * (handle_forward) and relays the answer.
 *
 * Context: loop thread only. */
#ifndef CAIRN_HANDLERS_H
#define CAIRN_HANDLERS_H

#include "net/conn.h"
#include "server/handle_target.h"
#include "server/node.h"

#include <stdbool.h>

/* Routes req to its handler by api (dispatch.c); an unknown api gets
 * UNSUPPORTED_API. */
void dispatch_request(struct node *n, struct conn_request *req);

/* handle_hello.c */
void handle_hello(struct node *n, struct conn_request *req);

/* handle_metadata.c: Metadata, ListTopics, DescribeTopic, DescribeCluster
 * all describe the same state. */
void handle_metadata(struct node *n, struct conn_request *req);
void handle_list_topics(struct node *n, struct conn_request *req);
void handle_describe_topic(struct node *n, struct conn_request *req);
void handle_describe_cluster(struct node *n, struct conn_request *req);
/* A replica whose store failed, as Metadata and the admin views show it. */
struct handle_store_failure {
  uint64_t node_id;
  const char *reason; /* borrowed: valid until the loop runs again */
  uint64_t since_ms;  /* wall clock (ms since 1970); 0: not known */
};
/* The replicas of (topic_id, partition) whose store failed, into
 * out[0..cap), by node id: this node's own (p, may be NULL) first hand,
 * the other alive nodes' from the controller leader's table
 * (cluster/store_faults.h), unless this node has not heard it lately.
 * Returns how many. (Also the admin port's.) */
size_t handle_metadata_store_failures(struct node *n, uint32_t topic_id, uint32_t partition,
                                      struct part *p, struct handle_store_failure *out, size_t cap);
/* The in-sync replicas of mp into out[META_MAX_REPLICAS]: as its leader
 * sees them when p (this node's replica, may be NULL) leads, else the
 * replicas on alive nodes. Returns how many. (Also the admin port's.) */
size_t handle_metadata_isr(struct node *n, const struct meta_partition *mp, struct part *p,
                           uint64_t *out);

/* handle_admin.c: CreateTopic, DeleteTopic, DecommissionNode. */
void handle_create_topic(struct node *n, struct conn_request *req);
void handle_delete_topic(struct node *n, struct conn_request *req);
void handle_add_partitions(struct node *n, struct conn_request *req);
/* AlterTopicConfig: checks the keys and values (topic_conf.h) on the
 * controller leader, then proposes one AlterTopicConfig command. */
void handle_alter_topic_config(struct node *n, struct conn_request *req);
void handle_decommission(struct node *n, struct conn_request *req);

/* If this node is not the controller leader, forwards req there and
 * relays the answer (or answers NOT_CONTROLLER), and returns true: req is
 * finished or will be. Returns false when this node leads the controller
 * and must serve req itself. (handle_admin.c) */
bool handle_forward(struct node *n, struct conn_request *req);

/* handle_node.c: a node's registration and heartbeats, both as sender
 * (handle_node_tick, once per node tick) and as controller leader. */
void handle_node_register(struct node *n, struct conn_request *req);
void handle_node_heartbeat(struct node *n, struct conn_request *req);
void handle_node_tick(struct node *n);
/* Frees the buffers the heartbeats keep in n (n->hb_*); n stays usable. */
void handle_node_free(struct node *n);

/* handle_auth.c: Authenticate (SCRAM-SHA-256, state on the conn),
 * UpsertUser/DeleteUser (controller leader), ListUsers (any node). */
void handle_authenticate(struct node *n, struct conn_request *req);
void handle_upsert_user(struct node *n, struct conn_request *req);
void handle_delete_user(struct node *n, struct conn_request *req);
void handle_list_users(struct node *n, struct conn_request *req);
/* handle_acl.c: AddAcl/RemoveAcl (controller leader), ListAcls (any
 * node). */
void handle_add_acl(struct node *n, struct conn_request *req);
void handle_remove_acl(struct node *n, struct conn_request *req);
void handle_list_acls(struct node *n, struct conn_request *req);
/* With --auth required: whether req may run on an unauthenticated conn
 * (Hello, Authenticate; node requests when they carry a cluster proof;
 * Metadata and the first UpsertUser while the cluster has no user). */
bool handle_auth_exempt(struct node *n, const struct conn_request *req);
/* Whether c may (still) log in: no principal yet, an exchange in progress,
 * or only its client certificate's principal (mutual TLS), which a login
 * (SCRAM or a node's proof) replaces. The Kafka port's SaslHandshake asks
 * the same. Borrows c. Context: loop thread. */
bool handle_auth_may_start(const struct conn *c);

/* handle_produce.c */
void handle_produce(struct node *n, struct conn_request *req);

/* handle_fetch.c (also node_wake_fetches, node.h) */
void handle_fetch(struct node *n, struct conn_request *req);
/* Answers every parked long-polling fetch with what it has (node stop). */
void handle_fetch_close_all(struct node *n);

/* A read of committed batches outside the client port (the admin port's
 * message browser), by Fetch's rules: the partition's leader here
 * (handle_find_reader), the offset within [log start, high watermark],
 * store_read regions; at timestamp >= 0 the offset is the first record at
 * or after it (as ListOffsets). The whole batches read (at least the first,
 * at most max_bytes otherwise) are copied into out. */
struct handle_fetch_copy {
  uint8_t *data; /* owned (free()); NULL when nothing was read */
  size_t len;
  int64_t offset; /* where the read started */
  int64_t log_start_offset, high_watermark;
  struct handle_target t; /* code OK, or why not (NOT_LEADER: with the leader hint) */
};

/* Fills out. Returns 0 (out->t.code says whether the partition could be
 * read here), or a negative code (out of memory, a failed read) with
 * out->t.message set. Ownership: returns owned out->data. Context: loop
 * thread (reads at most max_bytes from the page cache or disk). */
__attribute__((warn_unused_result)) int handle_fetch_copy(struct node *n, const char *topic,
                                                          uint32_t partition, int64_t offset,
                                                          int64_t timestamp, size_t max_bytes,
                                                          struct handle_fetch_copy *out);

/* handle_init_producer_id.c: served by the controller leader. */
void handle_init_producer_id(struct node *n, struct conn_request *req);

/* handle_list_offsets.c */
void handle_list_offsets(struct node *n, struct conn_request *req);

/* handle_delete_records.c: answers once every partition's command is
 * applied at its leader, or at the request's timeout. */
void handle_delete_records(struct node *n, struct conn_request *req);

/* Consumer groups (docs/consumer-groups.md), served by the group's
 * coordinator (server/group/coord.h); any other node answers
 * NOT_COORDINATOR with the coordinator it knows.
 * handle_group_admin.c: FindCoordinator (any node), ListGroups,
 * DescribeGroups. */
void handle_find_coordinator(struct node *n, struct conn_request *req);
void handle_list_groups(struct node *n, struct conn_request *req);
void handle_describe_groups(struct node *n, struct conn_request *req);
/* handle_group_member.c: a JoinGroup waits until its rebalance completes. */
void handle_join_group(struct node *n, struct conn_request *req);
void handle_sync_group(struct node *n, struct conn_request *req);
void handle_heartbeat(struct node *n, struct conn_request *req);
void handle_leave_group(struct node *n, struct conn_request *req);
/* handle_group_offsets.c: commits answer once committed by Raft. */
void handle_offset_commit(struct node *n, struct conn_request *req);
void handle_offset_fetch(struct node *n, struct conn_request *req);
void handle_reset_offsets(struct node *n, struct conn_request *req);

#endif
