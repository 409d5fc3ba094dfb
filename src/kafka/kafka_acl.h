/* kafka_acl.h - Kafka's ACL bindings and binding filters over Cairn's
 * access control entries (CreateAcls, DescribeAcls, DeleteAcls;
 * docs/kafka.md "ACLs"): reading them from a request, the mapping both
 * ways, Kafka's filter matching. Pure functions: no I/O, no node.
 *
 * The mapping (a Cairn entry <-> a Kafka binding):
 *   topic, group, cluster           TOPIC (2), GROUP (3), CLUSTER (4)
 *   a name                          LITERAL name
 *   a prefix P (not "")             PREFIXED P
 *   the prefix "" (every one)       LITERAL "*" (Kafka's wildcard)
 *   the cluster                     LITERAL "kafka-cluster"
 *   principal "*"                   "User:*"; others as they are
 *   (no host)                       host "*"
 *   read, write, create, delete,    READ, WRITE, CREATE, DELETE,
 *   alter, describe, all            ALTER, DESCRIBE, ALL
 *   allow, deny                     ALLOW (3), DENY (2)
 * Kafka's CLUSTER_ACTION, DESCRIBE_CONFIGS, ALTER_CONFIGS and
 * IDEMPOTENT_WRITE, TRANSACTIONAL_ID and DELEGATION_TOKEN resources and
 * hosts other than "*" have no Cairn entry: creating one is refused, a
 * filter naming one matches nothing.
 *
 * Context: any thread (no shared state). */
#ifndef CAIRN_KAFKA_ACL_H
#define CAIRN_KAFKA_ACL_H

#include "client.pb-c.h"
#include "cluster/meta_state.h"
#include "kafka/kafka_codec.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Kafka's ResourceType, PatternType, AclOperation, AclPermissionType. */
enum kafka_acl_resource {
  KAFKA_ACL_RES_UNKNOWN = 0,
  KAFKA_ACL_RES_ANY = 1,
  KAFKA_ACL_RES_TOPIC = 2,
  KAFKA_ACL_RES_GROUP = 3,
  KAFKA_ACL_RES_CLUSTER = 4,
};
enum kafka_acl_pattern {
  KAFKA_ACL_PAT_UNKNOWN = 0,
  KAFKA_ACL_PAT_ANY = 1,
  KAFKA_ACL_PAT_MATCH = 2,
  KAFKA_ACL_PAT_LITERAL = 3,
  KAFKA_ACL_PAT_PREFIXED = 4,
};
enum kafka_acl_op {
  KAFKA_ACL_OP_UNKNOWN = 0,
  KAFKA_ACL_OP_ANY = 1,
  KAFKA_ACL_OP_ALL = 2,
  KAFKA_ACL_OP_READ = 3,
  KAFKA_ACL_OP_WRITE = 4,
  KAFKA_ACL_OP_CREATE = 5,
  KAFKA_ACL_OP_DELETE = 6,
  KAFKA_ACL_OP_ALTER = 7,
  KAFKA_ACL_OP_DESCRIBE = 8,
  KAFKA_ACL_OP_CLUSTER_ACTION = 9,
  KAFKA_ACL_OP_DESCRIBE_CONFIGS = 10,
  KAFKA_ACL_OP_ALTER_CONFIGS = 11,
  KAFKA_ACL_OP_IDEMPOTENT_WRITE = 12,
};
enum kafka_acl_perm {
  KAFKA_ACL_PERM_UNKNOWN = 0,
  KAFKA_ACL_PERM_ANY = 1,
  KAFKA_ACL_PERM_DENY = 2,
  KAFKA_ACL_PERM_ALLOW = 3,
};

#define KAFKA_ACL_CLUSTER_NAME "kafka-cluster"
#define KAFKA_ACL_HOST_MAX 64

/* A binding (CreateAcls; the Kafka view of an entry) or a binding filter
 * (DescribeAcls, DeleteAcls: a string that is absent, null on the wire,
 * matches any). */
struct kafka_acl_spec {
  int8_t resource_type; /* enum kafka_acl_resource */
  int8_t pattern;       /* enum kafka_acl_pattern */
  int8_t operation;     /* enum kafka_acl_op */
  int8_t permission;    /* enum kafka_acl_perm */
  bool has_name, has_principal, has_host;
  bool too_long; /* a string did not fit below: matches nothing, created never */
  char name[META_RESOURCE_MAX + 1];
  char principal[META_PRINCIPAL_MAX + 1];
  char host[KAFKA_ACL_HOST_MAX + 1];
};

/* Reads a binding (filter false: CreateAcls' creation) or a binding filter
 * (filter true: DescribeAcls' body, a DeleteAcls filter) of request
 * version (0: no pattern type, LITERAL implied) from r into s. Errors are
 * left in r->err (a malformed body). */
void kafka_acl_get_spec(struct kafka_reader *r, int16_t version, bool filter,
                        struct kafka_acl_spec *s);

/* The Kafka view of the native entry e. Borrows e. */
void kafka_acl_of_entry(const Cairn__Client__AclEntry *e, struct kafka_acl_spec *out);

/* The Cairn entry a binding creates, in a. Returns true, or false with
 * why (cap bytes) saying what Cairn cannot hold (the caller answers
 * INVALID_REQUEST). */
bool kafka_acl_to_entry(const struct kafka_acl_spec *b, struct meta_acl *a, char *why, size_t cap);

/* Whether filter f is one Kafka accepts (no UNKNOWN element): true, or
 * false with why. */
bool kafka_acl_filter_check(const struct kafka_acl_spec *f, char *why, size_t cap);

/* Whether filter f matches binding b (Kafka's AclBindingFilter.matches:
 * ANY, and MATCH for the bindings that apply to the named resource). */
bool kafka_acl_matches(const struct kafka_acl_spec *f, const struct kafka_acl_spec *b);

/* Writes binding b's resource part (type, name, v1+: pattern) or its
 * entry part (principal, host, operation, permission). */
void kafka_acl_put_resource(struct kafka_buf *buf, int16_t version, const struct kafka_acl_spec *b);
void kafka_acl_put_entry(struct kafka_buf *buf, const struct kafka_acl_spec *b);

#endif
