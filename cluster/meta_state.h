/* meta_state.h - the controller's metadata state machine: nodes, topics and
 * partition assignments, changed only by applying MetaCommand entries
 * (proto/meta.proto) in Raft log order. Pure logic: no I/O, no clock, no
 * randomness, so every node that applies the same commands in the same order
 * holds the same state and encodes byte-identical snapshots. The controller
 * (cluster/controller.c) calls meta_apply() from its Raft FSM's apply and
 * meta_snapshot_encode()/decode() from its snapshot hooks. docs/metadata.md
 * describes the commands, the snapshot format and the rules.
 *
 * Node life cycle (enum meta_node_state), the command that makes each
 * transition, and who proposes it:
 *
 *   (unknown) --RegisterNode--> ALIVE        the node process, at start
 *   ALIVE     --SetNodeState--> DEAD         planner: silent > node_timeout
 *   DEAD      --SetNodeState--> ALIVE        planner: same incarnation heard again
 *   DEAD      --RegisterNode--> ALIVE        the node restarted (new incarnation)
 *   ALIVE     --SetNodeState--> DRAINING     operator: decommission
 *   DEAD      --SetNodeState--> DRAINING     operator: decommission a lost node
 *   DRAINING  --SetNodeState--> ALIVE        operator: cancel the decommission
 *   DRAINING  --SetNodeState--> REMOVED      planner: no replica left on it
 *   DEAD      --SetNodeState--> REMOVED      operator: only with no replica left
 *   REMOVED   --RegisterNode--> ALIVE        a new process (new incarnation)
 *   ALIVE, DRAINING --RegisterNode--> same state, new incarnation: only with
 *                                    replaces_incarnation = the registered one,
 *                                    which the controller leader found silent
 *
 * Every other transition is refused (CAIRN_EINVAL). A REMOVED node keeps its
 * record (so its id and addresses stay visible) but holds nothing.
 *
 * Invariants (meta_state_check; kept by every apply, checked on every
 * decoded snapshot):
 * - not bootstrapped: no voters, nodes or topics; bootstrapped: a valid
 *   cluster id, 1..META_MAX_VOTERS distinct non-zero voters;
 * - nodes ascending by id, ids != 0, a valid state, incarnation != 0;
 * - topics ascending by id, names valid and unique; topic ids come from
 *   next_topic_id, start at 1, and are never reused;
 * - every partition has 1..META_MAX_REPLICAS distinct non-zero replicas and
 *   1..META_MAX_RF distinct non-zero initial replicas; a replica added by
 *   SetReplicas was ALIVE when added;
 * - group id of a partition = meta_group_id(topic id, partition) > 1
 *   (META_GROUP_ID, the metadata group, is never a partition's);
 * - total_partitions is the sum, at most META_MAX_TOTAL_PARTITIONS;
 * - producer ids 1..producer_ids were handed out and are never handed out
 *   again; producer_epochs lists ids among them ascending, each with an
 *   epoch 1..META_MAX_PRODUCER_EPOCH, at most META_MAX_PRODUCER_EPOCHS.
 *
 * Context: none of these functions does I/O or keeps global state; a given
 * meta_state is used by one thread (the controller's loop thread). */
#ifndef CAIRN_META_STATE_H
#define CAIRN_META_STATE_H

#include "net/scram.h"
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define META_GROUP_ID 1u /* the metadata Raft group */
#define META_PARTITION_BITS 20
#define META_MAX_PARTITIONS 10000u        /* per topic; < 2^META_PARTITION_BITS */
#define META_MAX_TOTAL_PARTITIONS 200000u /* whole cluster */
#define META_MAX_TOPICS 100000u
#define META_MAX_NODES 1024u
#define META_MAX_VOTERS 16u
#define META_MAX_RF 7u
#define META_MAX_REPLICAS (META_MAX_RF + 1u) /* rf + one being added */
#define META_TOPIC_NAME_MAX 249u
#define META_CLUSTER_ID_MAX 64u
#define META_ADDR_MAX 255u
#define META_RACK_MAX 63u
#define META_CMD_MAX_BYTES (1u << 20)
#define META_MAX_PRODUCER_EPOCHS 100000u /* ids with a bumped epoch kept */
#define META_MAX_USERS 10000u            /* users of the client port */
#define META_MAX_ACLS 10000u             /* access control entries */
#define META_PRINCIPAL_MAX 128           /* "User:" + a user name, "Node:" + an id, "*" */
#define META_RESOURCE_MAX 255            /* a topic or group name or prefix */
#define META_MAX_PRODUCER_EPOCH 32767u   /* the batch header's epoch is an i16 */
#define META_MAX_PRODUCER_ID ((uint64_t)INT64_MAX) /* the batch header's id is an i64 */
#define META_SNAPSHOT_MAX_BYTES (256u << 20)
#define META_SNAPSHOT_MAGIC 0x4154454du /* the bytes "META" read little-endian */
#define META_SNAPSHOT_VERSION 1u
#define META_SNAPSHOT_HEADER_BYTES 16u

/* Values equal proto/meta.proto's NodeState. */
enum meta_node_state {
  META_NODE_ALIVE = 1,
  META_NODE_DEAD = 2,
  META_NODE_DRAINING = 3,
  META_NODE_REMOVED = 4,
};

/* What a node can do beyond the basics, as it registered it (bits of
 * meta_node.caps, RegisterNode.capabilities). A topic that needs one is
 * placed only on nodes that have it (meta_topic_needs, placement.h). */
#define META_NODE_CAP_POSTGRESQL 0x1u /* the node has a PostgreSQL database (--pg-conninfo) */
#define META_NODE_CAPS_KNOWN META_NODE_CAP_POSTGRESQL

struct meta_node {
  uint64_t id;
  uint64_t incarnation; /* random per process start, != 0 */
  char client_addr[META_ADDR_MAX + 1];
  char cluster_addr[META_ADDR_MAX + 1];
  char admin_addr[META_ADDR_MAX + 1];
  char kafka_addr[META_ADDR_MAX + 1]; /* "" = no Kafka port */
  char external_addr[META_ADDR_MAX + 1]; /* "" = no external client listener */
  char rack[META_RACK_MAX + 1]; /* "" = no rack */
  enum meta_node_state state;
  uint64_t state_since_ms; /* at_ms of the last SetNodeState; for operators */
  uint32_t caps;           /* META_NODE_CAP_* bits it registered; 0 from older nodes */
};

/* 0 in any field means "the broker's default". */
struct meta_topic_config {
  uint64_t retention_bytes;
  uint64_t retention_ms;
  uint64_t segment_bytes;
  uint64_t max_batch_bytes;
  uint32_t storage; /* enum store_kind: where the partitions keep their log */
};

struct meta_partition {
  uint64_t group_id; /* meta_group_id(topic id, index) */
  /* The target replica set; replicas[0] is the preferred leader. */
  uint64_t replicas[META_MAX_REPLICAS];
  uint32_t nreplicas;
  /* The Raft configuration the group was bootstrapped with: a node listed
   * here bootstraps the group with it; a node added later starts empty and
   * joins. Never changes after CreateTopic. */
  uint64_t initial_replicas[META_MAX_REPLICAS];
  uint32_t ninitial;
  /* Bit i set: initial_replicas[i] was removed from replicas at some point.
   * If it is added again it starts empty and joins like any new replica
   * (its old data was dropped with the removal); it never bootstraps. */
  uint32_t initial_gone;
  uint64_t leader_id;     /* last reported leader, 0 = none yet */
  uint64_t leader_term;   /* its Raft term */
  uint64_t replica_epoch; /* +1 on every SetReplicas */
};

/* A user of the client port: its SCRAM credential (src/net/scram.h),
 * never its password. */
struct meta_user {
  char name[SCRAM_USER_MAX + 1];
  struct scram_cred cred; /* SCRAM-SHA-256's (PLAIN is checked against it) */
  /* SCRAM-SHA-512's, same salt and iterations; salt_len 0: none (a user
   * made before SCRAM-SHA-512, or by a client that did not derive it). */
  struct scram_cred cred512;
};

/* A user's credential as the records and requests carry it (borrowed):
 * the SCRAM-SHA-512 keys are optional (both lengths 0). */
struct meta_user_fields {
  const char *name;
  const uint8_t *salt;
  size_t salt_len;
  uint32_t iterations;
  const uint8_t *stored_key, *server_key;
  size_t stored_len, server_len;
  const uint8_t *stored_key_512, *server_key_512;
  size_t stored_512_len, server_512_len;
};

/* Fills u from f: 0, or CAIRN_EINVAL for a bad name or credential (u
 * then untouched). */
__attribute__((warn_unused_result)) int meta_user_set(struct meta_user *u,
                                                      const struct meta_user_fields *f);

/* u's fields (pointing into u) for a record or request. */
void meta_user_fields_of(const struct meta_user *u, struct meta_user_fields *f);

/* An access control entry (docs/security.md). */
enum meta_acl_resource { META_ACL_TOPIC = 1, META_ACL_GROUP = 2, META_ACL_CLUSTER = 3 };
enum meta_acl_op {
  META_ACL_READ = 1,
  META_ACL_WRITE = 2,
  META_ACL_CREATE = 3,
  META_ACL_DELETE = 4,
  META_ACL_DESCRIBE = 5,
  META_ACL_ALTER = 6,
  META_ACL_ALL = 7 /* an entry for every operation (Kafka's ALL) */
};
struct meta_acl {
  char principal[META_PRINCIPAL_MAX + 1]; /* "User:NAME", "Node:ID" or "*" */
  uint32_t resource_type;                 /* enum meta_acl_resource */
  char resource[META_RESOURCE_MAX + 1];   /* "" for the cluster */
  bool prefix;                            /* resource is a name prefix */
  uint32_t operation;                     /* enum meta_acl_op */
  bool allow;                             /* false: deny */
};

/* An idempotent producer id whose epoch was bumped. */
struct meta_producer {
  uint64_t id;
  uint32_t epoch;
};

struct meta_topic {
  uint32_t id;
  char name[META_TOPIC_NAME_MAX + 1];
  uint32_t replication_factor;
  struct meta_topic_config config;
  struct meta_partition *partitions; /* owned, npartitions entries */
  uint32_t npartitions;
};

/* Read the fields directly; change them only through meta_apply() and
 * meta_snapshot_decode(). Pointers into it (nodes, topics, partitions) are
 * valid until the next meta_apply(), meta_snapshot_decode() or
 * meta_state_close() on it. */
struct meta_state {
  char cluster_id[META_CLUSTER_ID_MAX + 1]; /* "" until Bootstrap */
  uint64_t voters[META_MAX_VOTERS];         /* the metadata group's initial voters */
  uint32_t nvoters;
  uint32_t next_topic_id;
  uint64_t last_index;     /* Raft index of the last applied command */
  struct meta_node *nodes; /* owned, ascending id */
  size_t nnodes;
  struct meta_topic *topics; /* owned, ascending id */
  size_t ntopics;
  size_t total_partitions;
  uint64_t producer_ids;              /* ids 1..producer_ids were handed out */
  struct meta_producer *producers;    /* owned, ascending id: bumped epochs */
  size_t nproducers;
  struct meta_user *users; /* owned, ascending name */
  size_t nusers;
  struct meta_acl *acls; /* owned, ascending (meta_acl_cmp), no duplicates */
  size_t nacls;
};

/* The outcome of one command: code is 0 or the negative cairn code that
 * meta_apply() returned; msg says why in words; topic_id is the id a
 * CreateTopic assigned; producer_id and producer_epoch what an
 * AllocateProducerId handed out. */
struct meta_result {
  int code;
  uint32_t topic_id;
  uint64_t producer_id;
  uint32_t producer_epoch;
  char msg[200];
};

/* Caller allocates st; meta_state_init makes it empty (not bootstrapped).
 * meta_state_close frees what it owns; st may then be init'ed again. */
void meta_state_init(struct meta_state *st);
void meta_state_close(struct meta_state *st);

/* Applies one encoded MetaCommand at Raft index raft_index (0 = unchecked,
 * for tests; otherwise it must be greater than st->last_index). Borrows cmd.
 * Returns 0 or a negative code, also stored in res->code with a message.
 * A refused command changes nothing but st->last_index. Every result is a
 * deterministic function of (state, command) except CAIRN_ENOMEM: on that
 * one replicas may diverge, so the controller must stop (not go on). Malformed
 * bytes give CAIRN_ECORRUPT; the codes per command are in docs/metadata.md. */
__attribute__((warn_unused_result)) int meta_apply(struct meta_state *st, const uint8_t *cmd,
                                                   size_t len, uint64_t raft_index,
                                                   struct meta_result *res);

/* ---- command encoders: each returns 0 and *out owned by the caller (free
 * with free()), or CAIRN_ENOMEM / CAIRN_EINVAL (NULL where a value is
 * needed, or an encoding over META_CMD_MAX_BYTES). They check no meaning:
 * meta_apply does, on every replica alike. ---- */

__attribute__((warn_unused_result)) int meta_cmd_bootstrap(const char *cluster_id,
                                                           const uint64_t *voters, size_t nvoters,
                                                           uint8_t **out, size_t *len);

/* What a node announces about itself. Strings are borrowed. */
struct meta_node_info {
  uint64_t node_id;
  uint64_t incarnation;
  const char *client_addr;
  const char *cluster_addr;
  const char *admin_addr; /* may be NULL or "" */
  const char *rack;       /* may be NULL or "" */
  const char *kafka_addr; /* may be NULL or "" (last: older initializers stay valid) */
  const char *external_addr; /* may be NULL or "" */
  uint32_t caps;             /* META_NODE_CAP_* bits */
};

/* replaces_incarnation: 0, or the registered incarnation that the proposer
 * (the controller leader) found silent (docs/metadata.md, "Node identity"). */
__attribute__((warn_unused_result)) int meta_cmd_register_node(const struct meta_node_info *info,
                                                               uint64_t replaces_incarnation,
                                                               uint8_t **out, size_t *len);

/* incarnation: 0 = whatever is registered, else applies only to that one. */
__attribute__((warn_unused_result)) int
meta_cmd_set_node_state(uint64_t node_id, enum meta_node_state state, uint64_t incarnation,
                        uint64_t at_ms, uint8_t **out, size_t *len);

/* cfg may be NULL (all defaults). */
__attribute__((warn_unused_result)) int meta_cmd_create_topic(const char *name, uint32_t partitions,
                                                              uint32_t rf,
                                                              const struct meta_topic_config *cfg,
                                                              uint8_t **out, size_t *len);

__attribute__((warn_unused_result)) int meta_cmd_delete_topic(const char *name, uint8_t **out,
                                                              size_t *len);

/* Grows topic name to `partitions` partitions in all; applying it refuses
 * a count not above the current one (CAIRN_EINVALID_PARTITIONS) and an
 * internal topic (CAIRN_EINTERNAL_TOPIC). */
__attribute__((warn_unused_result)) int meta_cmd_add_partitions(const char *name,
                                                               uint32_t partitions,
                                                               uint8_t **out, size_t *len);

/* Changes topic name's configuration: the fields whose bits are in mask
 * (topic_conf.h: TOPIC_CONF_BIT) take their values in cfg. Applying it
 * refuses an unknown topic (CAIRN_EUNKNOWN_TOPIC), an internal one
 * (CAIRN_EINTERNAL_TOPIC) and a field that cannot change on a running
 * topic (CAIRN_EINVALID_CONFIG). Borrows everything. */
__attribute__((warn_unused_result)) int meta_cmd_alter_topic_config(const char *name,
                                                                    uint32_t mask,
                                                                    const struct meta_topic_config *cfg,
                                                                    uint8_t **out, size_t *len);

__attribute__((warn_unused_result)) int meta_cmd_report_leader(uint32_t topic_id,
                                                               uint32_t partition,
                                                               uint64_t leader_id, uint64_t term,
                                                               uint8_t **out, size_t *len);

/* replicas borrowed; expected_epoch = the partition's current replica_epoch. */
__attribute__((warn_unused_result)) int
meta_cmd_set_replicas(uint32_t topic_id, uint32_t partition, const uint64_t *replicas,
                      size_t nreplicas, uint64_t expected_epoch, uint8_t **out, size_t *len);

/* producer_id 0: a new producer id; else bump that id's epoch. */
__attribute__((warn_unused_result)) int meta_cmd_allocate_producer_id(uint64_t producer_id,
                                                                      uint8_t **out, size_t *len);

/* Creates user u->name or replaces its credentials. CAIRN_EINVAL for a
 * bad name or credential (at encoding or, from another node, at apply). */
__attribute__((warn_unused_result)) int meta_cmd_upsert_user(const struct meta_user *u,
                                                             uint8_t **out, size_t *len);

/* Deletes user name: CAIRN_EUNKNOWN_USER at apply when there is none. */
__attribute__((warn_unused_result)) int meta_cmd_delete_user(const char *name, uint8_t **out,
                                                             size_t *len);

/* True when name and a credential's sizes are acceptable (used by apply,
 * the snapshot decoder and the command encoder). */
bool meta_user_cred_ok(const char *name, size_t salt_len, uint32_t iterations, size_t stored_len,
                       size_t server_len);

/* Adds an ACL entry (an existing identical one: no change) or removes one
 * (CAIRN_EUNKNOWN_ACL at apply when there is none). CAIRN_EINVAL for a bad
 * entry. Borrows a. */
__attribute__((warn_unused_result)) int meta_cmd_acl(const struct meta_acl *a, bool add,
                                                     uint8_t **out, size_t *len);

/* True when an entry's fields are acceptable. */
bool meta_acl_ok(const struct meta_acl *a);

/* An entry as the metadata's commands and snapshots carry it
 * (proto/meta.proto AclEntry) and back. meta_acl_to_record fills e
 * (initialized here) with strings pointing into a (a must outlive e's
 * use); meta_acl_of_record copies e into a (zeroed first) and returns
 * false when a string is missing or too long for a, checking nothing more
 * (meta_acl_ok does). */
struct Cairn__Meta__AclEntry;
void meta_acl_to_record(const struct meta_acl *a, struct Cairn__Meta__AclEntry *e);
bool meta_acl_of_record(const struct Cairn__Meta__AclEntry *e, struct meta_acl *a);

/* The total order of ACL entries (snapshots list them in it). */
int meta_acl_cmp(const struct meta_acl *a, const struct meta_acl *b);

/* Whether principal may do op on the resource (type, name): false when any
 * matching entry denies (a deny wins), true when one allows, false when
 * none matches. An entry matches when its principal is principal or "*",
 * its type is type, and its resource is name (or, with prefix, starts
 * name; the cluster's resource is ""). */
bool meta_acl_allows(const struct meta_state *st, const char *principal, uint32_t type,
                     const char *name, uint32_t op);

/* meta_acl_allows in three outcomes: -1 a matching entry denies, 1 one
 * allows and none denies, 0 none matches. Borrows everything. */
int meta_acl_decide(const struct meta_state *st, const char *principal, uint32_t type,
                    const char *name, uint32_t op);

/* The user called name, or NULL. Returns borrowed (valid as meta_node_find's). */
const struct meta_user *meta_user_find(const struct meta_state *st, const char *name);

/* The current epoch of a handed-out producer id (0 if never bumped). */
uint32_t meta_producer_epoch(const struct meta_state *st, uint64_t producer_id);

/* Writes a one-line description of an encoded command into buf[cap] (always
 * NUL-terminated), e.g. "CreateTopic orders partitions=8 rf=3", or
 * "malformed command (12 bytes)". For logs. Borrows cmd. Returns buf. */
const char *meta_cmd_describe(const uint8_t *cmd, size_t len, char *buf, size_t cap);

/* ---- snapshot ----
 * Layout (little-endian):
 *   [0..4)   magic META_SNAPSHOT_MAGIC
 *   [4..8)   version META_SNAPSHOT_VERSION
 *   [8..12)  payload length N
 *   [12..16) CRC-32C of the payload
 *   [16..16+N) payload: cairn.meta.MetaSnapshot (proto/meta.proto)
 * Equal states encode to equal bytes. */

/* Borrows st. *buf is owned by the caller (free with free()). Returns 0 or
 * CAIRN_ENOMEM. */
__attribute__((warn_unused_result)) int meta_snapshot_encode(const struct meta_state *st,
                                                             uint8_t **buf, size_t *len);

/* Replaces the contents of st (an init'ed state) with the decoded snapshot.
 * Borrows buf (untrusted). On failure st is unchanged. Returns 0,
 * CAIRN_ETRUNCATED, CAIRN_EBADMAGIC (magic or version), CAIRN_EBADCRC,
 * CAIRN_ETOOLARGE, CAIRN_ECORRUPT (bad protobuf or a broken invariant) or
 * CAIRN_ENOMEM. */
__attribute__((warn_unused_result)) int meta_snapshot_decode(struct meta_state *st,
                                                             const uint8_t *buf, size_t len);

/* Checks every invariant above. Returns 0, CAIRN_ECORRUPT with the first
 * broken one described in why[cap] (may be NULL), or CAIRN_ENOMEM. O(size of
 * the state): for decoding and tests, not for every apply. */
__attribute__((warn_unused_result)) int meta_state_check(const struct meta_state *st, char *why,
                                                         size_t cap);

/* ---- lookups: returned pointers are borrowed from st, valid until the next
 * meta_apply(), meta_snapshot_decode() or meta_state_close(); NULL if absent. */

const struct meta_node *meta_node_find(const struct meta_state *st, uint64_t node_id);
const struct meta_topic *meta_topic_find(const struct meta_state *st, const char *name);
const struct meta_topic *meta_topic_find_id(const struct meta_state *st, uint32_t topic_id);
const struct meta_partition *meta_partition_find(const struct meta_state *st, uint32_t topic_id,
                                                 uint32_t partition);

/* The Raft group id of a partition: (topic_id << 20) | partition. */
static inline uint64_t meta_group_id(uint32_t topic_id, uint32_t partition)
{
  return ((uint64_t)topic_id << META_PARTITION_BITS) | partition;
}

/* Splits a partition group id; false for META_GROUP_ID or anything
 * meta_group_id() cannot produce. */
bool meta_group_split(uint64_t group_id, uint32_t *topic_id, uint32_t *partition);

/* True when replicas[0..n) contains node_id. */
bool meta_replicas_contain(const uint64_t *replicas, uint32_t n, uint64_t node_id);

/* True when node_id should bootstrap p's group with initial_replicas as its
 * configuration (when it has no data for the group): it is an initial
 * replica that never left. Any other replica starts empty and is added by
 * the group's leader. */
bool meta_partition_bootstraps(const struct meta_partition *p, uint64_t node_id);

/* One partition a node hosts. */
struct meta_assignment {
  uint32_t topic_id;
  uint32_t partition;
  uint64_t group_id;
  bool bootstraps; /* meta_partition_bootstraps(): bootstrap the group with
                      initial_replicas; otherwise start empty and wait to be
                      added by the group's leader */
};

/* The partitions whose target replicas include node_id, by (topic id,
 * partition). *out is owned by the caller (free with free(); NULL when
 * *n == 0). Returns 0 or CAIRN_ENOMEM. */
__attribute__((warn_unused_result)) int meta_node_assignments(const struct meta_state *st,
                                                              uint64_t node_id,
                                                              struct meta_assignment **out,
                                                              size_t *n);

/* How many partitions list node_id as a replica, and as replicas[0]. */
void meta_node_load(const struct meta_state *st, uint64_t node_id, uint32_t *replicas,
                    uint32_t *preferred_leaders);

/* Number of nodes in state ALIVE. */
uint32_t meta_alive_count(const struct meta_state *st);

/* The META_NODE_CAP_* bits a node needs to host a replica of a topic with
 * this config: META_NODE_CAP_POSTGRESQL for a postgresql topic, else 0. */
uint32_t meta_topic_needs(const struct meta_topic_config *cfg);

/* Number of nodes in state ALIVE that have every bit of caps. */
uint32_t meta_capable_count(const struct meta_state *st, uint32_t caps);

/* "ALIVE", "DEAD", ... ; "?" for anything else. Static string. */
const char *meta_node_state_name(int state);

/* True if name is a valid topic name: [A-Za-z0-9._-], 1..249 characters,
 * not "." or "..". */
bool meta_topic_name_valid(const char *name);

/* True if name is an internal topic's: it starts with "__" (as
 * __cairn_offsets does). The cluster keeps these itself; DeleteTopic (and
 * any alteration) of one is refused with CAIRN_EINTERNAL_TOPIC, as Kafka
 * refuses deleting __consumer_offsets. */
bool meta_topic_internal(const char *name);

#endif
