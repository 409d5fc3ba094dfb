/* authz.c - authorization of client-port requests against the metadata's
 * access control entries (authz.h has the rules and the table of APIs). */
#include "server/authz.h"

#include "common/err.h"
#include "common/log.h"
#include "net/scram.h"
#include "server/node.h"

#include <ctype.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

_Static_assert(AUTHZ_PRINCIPAL_MAX == META_PRINCIPAL_MAX, "one principal length");

const char *authz_principal_of(const struct conn *c)
{
  return c->principal[0] != '\0' ? c->principal : AUTHZ_ANONYMOUS;
}

static bool authz_super(const struct authz *az, const char *principal)
{
  if (strncmp(principal, "Node:", 5) == 0) {
    return true; /* only a holder of the cluster key proves a Node: principal */
  }
  for (size_t i = 0; i < az->nsuper; i++) {
    if (strcmp(az->super_users[i], principal) == 0) {
      return true;
    }
  }
  return false;
}

bool authz_allows(struct node *n, const struct conn *c, uint32_t type, const char *name,
                  uint32_t op)
{
  if (!n->authz.enabled) {
    return true;
  }
  const char *who = authz_principal_of(c);
  if (authz_super(&n->authz, who)) {
    return true;
  }
  const struct meta_state *st = ctl_state(&n->ctl);
  int d = meta_acl_decide(st, who, type, name, op);
  if (d != 0) {
    return d > 0;
  }
  if (op == META_ACL_DESCRIBE) {
    static const uint32_t implied[] = {META_ACL_READ, META_ACL_WRITE, META_ACL_DELETE,
                                       META_ACL_ALTER};
    for (size_t i = 0; i < sizeof implied / sizeof implied[0]; i++) {
      if (meta_acl_decide(st, who, type, name, implied[i]) > 0) {
        return true;
      }
    }
  }
  if (op == META_ACL_CREATE && type == META_ACL_TOPIC) {
    return meta_acl_decide(st, who, META_ACL_CLUSTER, "", META_ACL_CREATE) > 0;
  }
  return false;
}

/* FNV-1a over type and name: one resource's slot in c->authz_logged. */
static uint64_t authz_hash(uint32_t type, const char *name)
{
  uint64_t h = 1469598103934665603ull;
  h = (h ^ type) * 1099511628211ull;
  for (const char *p = name; *p != '\0'; p++) {
    h = (h ^ (uint8_t)*p) * 1099511628211ull;
  }
  return h;
}

/* Logs a refusal the first time this conn is refused on this resource. */
static void authz_log_once(struct conn *c, uint32_t type, const char *name, const char *msg)
{
  uint64_t h = authz_hash(type, name);
  uint32_t k = c->authz_nlogged < CONN_AUTHZ_LOGGED ? c->authz_nlogged : CONN_AUTHZ_LOGGED;
  for (uint32_t i = 0; i < k; i++) {
    if (c->authz_logged[i] == h) {
      return;
    }
  }
  if (c->authz_nlogged < CONN_AUTHZ_LOGGED) {
    c->authz_logged[c->authz_nlogged++] = h;
    log_warn("authz", "conn %" PRIu64 " %s: refused: %s", c->id, c->peer, msg);
  } else if (c->authz_nlogged == CONN_AUTHZ_LOGGED) {
    c->authz_nlogged++;
    log_warn("authz",
             "conn %" PRIu64 " %s: refused on more than %d resources; further refusals on this "
             "connection are not logged",
             c->id, c->peer, CONN_AUTHZ_LOGGED);
  }
}

int authz_check(struct node *n, struct conn *c, uint32_t type, const char *name, uint32_t op,
                char *msg, size_t cap)
{
  if (authz_allows(n, c, type, name, op)) {
    return 0;
  }
  if (type == META_ACL_CLUSTER) {
    snprintf(msg, cap, "%s may not %s the cluster", authz_principal_of(c),
             authz_op_name(op));
  } else {
    snprintf(msg, cap, "%s may not %s %s '%s'", authz_principal_of(c),
             authz_op_name(op), authz_type_name(type), name);
  }
  authz_log_once(c, type, name, msg);
  return CAIRN_EAUTHZ;
}

/* WRITE on the cluster, or on any existing topic (an idempotent producer's
 * id is worth nothing without a topic to write to). */
static bool authz_any_write(struct node *n, const struct conn *c)
{
  if (authz_allows(n, c, META_ACL_CLUSTER, "", META_ACL_WRITE)) {
    return true;
  }
  const struct meta_state *st = ctl_state(&n->ctl);
  for (size_t i = 0; i < st->ntopics; i++) {
    if (authz_allows(n, c, META_ACL_TOPIC, st->topics[i].name, META_ACL_WRITE)) {
      return true;
    }
  }
  return false;
}

static const char *authz_str(const char *s) { return s != NULL ? s : ""; }

bool authz_request(struct node *n, struct conn_request *req)
{
  if (!n->authz.enabled) {
    return true;
  }
  struct conn *c = req->c;
  const Cairn__Client__Envelope *env = req->env;
  char msg[META_RESOURCE_MAX + META_PRINCIPAL_MAX + 64];
  int rv = 0;
  switch (req->api) {
  case CAIRN__CLIENT__API__API_CREATE_TOPIC:
    rv = authz_check(n, c, META_ACL_TOPIC, authz_str(env->create_topic_req->name), META_ACL_CREATE,
                     msg, sizeof msg);
    break;
  case CAIRN__CLIENT__API__API_DELETE_TOPIC:
    rv = authz_check(n, c, META_ACL_TOPIC, authz_str(env->delete_topic_req->name), META_ACL_DELETE,
                     msg, sizeof msg);
    break;
  case CAIRN__CLIENT__API__API_ADD_PARTITIONS:
    rv = authz_check(n, c, META_ACL_TOPIC, authz_str(env->add_partitions_req->name), META_ACL_ALTER,
                     msg, sizeof msg);
    break;
  case CAIRN__CLIENT__API__API_ALTER_TOPIC_CONFIG:
    rv = authz_check(n, c, META_ACL_TOPIC, authz_str(env->alter_topic_config_req->name),
                     META_ACL_ALTER, msg, sizeof msg);
    break;
  case CAIRN__CLIENT__API__API_INIT_PRODUCER_ID:
    if (!authz_any_write(n, c)) {
      rv = authz_check(n, c, META_ACL_CLUSTER, "", META_ACL_WRITE, msg, sizeof msg);
    }
    break;
  case CAIRN__CLIENT__API__API_FIND_COORDINATOR:
    rv = authz_check(n, c, META_ACL_GROUP, authz_str(env->find_coordinator_req->group),
                     META_ACL_DESCRIBE, msg, sizeof msg);
    break;
  case CAIRN__CLIENT__API__API_JOIN_GROUP:
    rv = authz_check(n, c, META_ACL_GROUP, authz_str(env->join_group_req->group), META_ACL_READ,
                     msg, sizeof msg);
    break;
  case CAIRN__CLIENT__API__API_SYNC_GROUP:
    rv = authz_check(n, c, META_ACL_GROUP, authz_str(env->sync_group_req->group), META_ACL_READ,
                     msg, sizeof msg);
    break;
  case CAIRN__CLIENT__API__API_HEARTBEAT:
    rv = authz_check(n, c, META_ACL_GROUP, authz_str(env->heartbeat_req->group), META_ACL_READ,
                     msg, sizeof msg);
    break;
  case CAIRN__CLIENT__API__API_LEAVE_GROUP:
    rv = authz_check(n, c, META_ACL_GROUP, authz_str(env->leave_group_req->group), META_ACL_READ,
                     msg, sizeof msg);
    break;
  case CAIRN__CLIENT__API__API_OFFSET_FETCH:
    rv = authz_check(n, c, META_ACL_GROUP, authz_str(env->offset_fetch_req->group), META_ACL_READ,
                     msg, sizeof msg);
    break;
  case CAIRN__CLIENT__API__API_OFFSET_COMMIT:
    /* READ on each partition's topic: per partition in the handler. */
    rv = authz_check(n, c, META_ACL_GROUP, authz_str(env->offset_commit_req->group), META_ACL_READ,
                     msg, sizeof msg);
    break;
  case CAIRN__CLIENT__API__API_RESET_OFFSETS:
    rv = authz_check(n, c, META_ACL_GROUP, authz_str(env->reset_offsets_req->group),
                     env->reset_offsets_req->delete_group || env->reset_offsets_req->delete_offsets
                         ? META_ACL_DELETE
                         : META_ACL_READ,
                     msg, sizeof msg);
    break;
  case CAIRN__CLIENT__API__API_DESCRIBE_GROUPS: {
    const Cairn__Client__DescribeGroupsRequest *r = env->describe_groups_req;
    for (size_t i = 0; i < r->n_groups && rv == 0; i++) {
      rv = authz_check(n, c, META_ACL_GROUP, authz_str(r->groups[i]), META_ACL_DESCRIBE, msg,
                       sizeof msg);
    }
    break;
  }
  case CAIRN__CLIENT__API__API_UPSERT_USER:
    if (ctl_state(&n->ctl)->nusers == 0) {
      break; /* the first user of a cluster (docs/security.md) */
    }
    rv = authz_check(n, c, META_ACL_CLUSTER, "", META_ACL_ALTER, msg, sizeof msg);
    break;
  case CAIRN__CLIENT__API__API_DECOMMISSION_NODE:
  case CAIRN__CLIENT__API__API_DELETE_USER:
  case CAIRN__CLIENT__API__API_ADD_ACL:
  case CAIRN__CLIENT__API__API_REMOVE_ACL:
    rv = authz_check(n, c, META_ACL_CLUSTER, "", META_ACL_ALTER, msg, sizeof msg);
    break;
  case CAIRN__CLIENT__API__API_LIST_USERS:
  case CAIRN__CLIENT__API__API_LIST_ACLS:
    rv = authz_check(n, c, META_ACL_CLUSTER, "", META_ACL_DESCRIBE, msg, sizeof msg);
    break;
  case CAIRN__CLIENT__API__API_NODE_REGISTER:
  case CAIRN__CLIENT__API__API_NODE_HEARTBEAT:
    if (n->cluster_key == NULL) {
      rv = authz_check(n, c, META_ACL_CLUSTER, "", META_ACL_ALTER, msg, sizeof msg);
    }
    break;
  default:
    /* Hello, Authenticate: open. Produce, Fetch, ListOffsets, DeleteRecords, Metadata,
     * ListTopics, DescribeTopic, DescribeCluster, ListGroups: per topic or
     * group in their handlers. */
    break;
  }
  if (rv == 0) {
    return true;
  }
  conn_respond_error(req, CAIRN__CLIENT__ERROR_CODE__AUTHORIZATION_FAILED, msg);
  return false;
}
