/* authz.h - authorization of client-port requests against the access
 * control entries of the metadata group (--authorizer acl,
 * docs/security.md "Authorization").
 *
 * Who is asking: the conn's principal ("User:NAME" after SCRAM or from a
 * client certificate, "Node:ID" after a node's cluster-key proof), or
 * "User:ANONYMOUS" on a conn that has not authenticated.
 *
 * The decision for (principal, operation, resource):
 *   1. authorization off (the default): yes;
 *   2. a super-user (--super-users) or a node ("Node:ID": only a holder
 *      of the cluster key can be one): yes;
 *   3. meta_acl_allows on the metadata's entries: a matching deny wins, a
 *      matching allow says yes, nothing matching says no. DESCRIBE is also
 *      granted by an allowed READ, WRITE, DELETE or ALTER on the same
 *      resource (unless DESCRIBE itself is denied), as Kafka does; CREATE
 *      of a topic is granted by CREATE on the cluster too.
 *
 * What each API needs (authz_request for the request-level checks; the
 * data-path handlers call authz_check per topic):
 *   Produce                         WRITE topic (per partition)
 *   Fetch, ListOffsets              READ topic (per partition)
 *   Metadata, ListTopics,           DESCRIBE topic: others are left out of
 *   DescribeCluster                 a listing, named ones refused
 *   DescribeTopic                   DESCRIBE topic
 *   CreateTopic                     CREATE topic, or CREATE cluster
 *   DeleteTopic                     DELETE topic
 *   AddPartitions                   ALTER topic
 *   AlterTopicConfig                ALTER topic
 *   InitProducerId                  WRITE cluster, or WRITE on any topic
 *   FindCoordinator                 DESCRIBE group
 *   JoinGroup, SyncGroup,           READ group
 *   Heartbeat, LeaveGroup,
 *   OffsetFetch
 *   OffsetCommit, ResetOffsets      READ group (DELETE group for a ResetOffsets
 *                                   with delete_group or delete_offsets); READ
 *                                   topic per partition (a
 *                                   refused partition is answered on its
 *                                   own, the others are committed)
 *   ListGroups                      DESCRIBE group: others left out
 *   DescribeGroups                  DESCRIBE group, per group
 *   DecommissionNode, UpsertUser,   ALTER cluster (UpsertUser open while the
 *   DeleteUser, AddAcl, RemoveAcl   cluster has no user: the first one)
 *   ListUsers, ListAcls             DESCRIBE cluster
 *   NodeRegister, NodeHeartbeat     their cluster proof (with a cluster
 *                                   key), else ALTER cluster
 *   Hello, Authenticate             open
 *
 * A refusal answers AUTHORIZATION_FAILED naming the principal, operation
 * and resource, and logs one line per conn and resource (the first
 * AUTHZ_LOG_PER_CONN resources of a conn; then one line saying further
 * refusals on it are not logged).
 *
 * Context: loop thread only (the conn's log memory, the metadata). */
#ifndef CAIRN_AUTHZ_H
#define CAIRN_AUTHZ_H

#include "cluster/meta_state.h"
#include "net/conn.h"
#include "server/authz_principal.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct node;

/* The principal c acts as: its authenticated principal, or
 * AUTHZ_ANONYMOUS. Returns borrowed (valid while c is). */
const char *authz_principal_of(const struct conn *c);

/* Whether c may do op on (type, name) ("" for the cluster): the decision
 * above, without logging. Borrows everything. */
bool authz_allows(struct node *n, const struct conn *c, uint32_t type, const char *name,
                  uint32_t op);

/* authz_allows, and on a refusal: fills msg (cap bytes) with who may not do
 * what on which resource and logs it once per conn and resource. Returns 0
 * or CAIRN_EAUTHZ. Borrows everything. */
__attribute__((warn_unused_result)) int authz_check(struct node *n, struct conn *c, uint32_t type,
                                                    const char *name, uint32_t op, char *msg,
                                                    size_t cap);

/* The request-level checks of req's api (the table above) before its
 * handler runs. Returns true when req may go on; false when it was refused
 * (answered AUTHORIZATION_FAILED: req is finished). With authorization off,
 * true. */
bool authz_request(struct node *n, struct conn_request *req);

#endif
