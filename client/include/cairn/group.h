/* group.h - libcairn's consumer groups (include after <cairn/cairn.h>):
 * a group consumer that shares the partitions of its topics with the other
 * members of its group, follows rebalances and commits offsets, and the
 * group admin calls. docs/consumer-groups.md describes the protocol.
 *
 * A group consumer wraps a cairn_consumer: the coordinator's assignment
 * decides which partitions it reads, each starting at the group's
 * committed offset (or at offset_reset when none is committed).
 *
 * Delivery is at-least-once: a partition's position counts a record as
 * processed once the records callback it was handed to has returned, and
 * only such positions are committed (every auto_commit_interval_ms, on a
 * rebalance before the partitions are given up, and on close; or by
 * cairn_group_commit). A callback that processes only part of its records
 * seeks the partition (cairn_consumer_seek on the cons it was handed) to
 * the first one it did not process: the position committed is then that
 * offset. Rebalancing is eager: at every rebalance the member
 * gives up all its partitions (on_revoked), then gets its new ones
 * (on_assigned).
 *
 * Conventions: as <cairn/cairn.h> (return codes, callbacks, the loop
 * thread, ownership words). */
#ifndef CAIRN_GROUP_H
#define CAIRN_GROUP_H

#include <cairn/cairn.h>

#ifdef __cplusplus
extern "C" {
#endif

struct cairn_group_consumer;

/* One partition of an assignment. */
struct cairn_group_partition {
  const char *topic;
  int32_t partition;
};

/* The partitions just assigned, or about to be given up. The array is
 * borrowed for the callback. */
typedef void (*cairn_group_partitions_cb)(struct cairn_group_consumer *gc,
                                          const struct cairn_group_partition *parts, size_t count,
                                          void *data);

/* A final error of the membership (CAIRN_EINCONSISTENT_PROTOCOL,
 * CAIRN_EINVALID_GROUP, ...): the consumer stops taking part; close it.
 * errmsg is borrowed for the callback. */
typedef void (*cairn_group_error_cb)(struct cairn_group_consumer *gc, int status,
                                     const char *errmsg, void *data);

struct cairn_group_options {
  uint32_t session_timeout_ms;           /* 10000 (500..300000) */
  uint32_t rebalance_timeout_ms;         /* 0: the session timeout */
  uint32_t heartbeat_interval_ms;        /* 0: a third of the session timeout */
  uint32_t auto_commit_interval_ms;      /* 5000; 0: commit only on cairn_group_commit */
  const char *strategy;                  /* "sticky" (default), "range" or "roundrobin":
                                            preferred; the other two are offered after it */
  int offset_reset;                      /* without a committed offset: CAIRN_OFFSET_SPEC_EARLIEST
                                            (default) or CAIRN_OFFSET_SPEC_LATEST */
  cairn_group_partitions_cb on_assigned; /* may be NULL */
  cairn_group_partitions_cb on_revoked;  /* may be NULL */
  cairn_group_error_cb on_error;         /* may be NULL */
  void *cb_data;
  struct cairn_consumer_options consumer;
  /* Static membership (Kafka's group.instance.id; NULL or "": a dynamic
   * member): a process that restarts under the same id within the
   * session timeout takes over its previous member and partitions without
   * a rebalance of the others; a static member does not leave the group
   * when closed (its restart or its session timeout decides), and one
   * replaced by a newer process under its id stops with
   * CAIRN_EFENCED_INSTANCE (on_error). Copied. docs/consumer-groups.md. */
  const char *group_instance_id;
};

/* Fills o with the defaults above. Context: any thread. */
void cairn_group_options_init(struct cairn_group_options *o);

/* Creates a member of group subscribed to topics[0..ntopics) and starts
 * joining (FindCoordinator, JoinGroup, SyncGroup, OffsetFetch). Records
 * flow once cairn_group_consumer_start is called. Ownership: borrows c (it
 * must outlive gc), group, topics and o (copied); *out returns owned
 * (close with cairn_group_consumer_close). Returns 0, CAIRN_EINVAL or
 * CAIRN_ENOMEM. Context: the loop thread. */
__attribute__((warn_unused_result)) int
cairn_group_consumer_new(struct cairn_client *c, const char *group, const char *const *topics,
                         size_t ntopics, const struct cairn_group_options *o,
                         struct cairn_group_consumer **out);

/* Hands records of the assigned partitions to cb (as cairn_consumer_start;
 * cons is the wrapped consumer). Returns 0 or CAIRN_ECLOSED. */
__attribute__((warn_unused_result)) int cairn_group_consumer_start(struct cairn_group_consumer *gc,
                                                                   cairn_records_cb cb, void *data);

/* Commits the position of every assigned partition (the offset after the
 * last record whose callback returned). cb gets 0 (also when there was
 * nothing to commit), or the coordinator's refusal (CAIRN_EREBALANCE,
 * CAIRN_EILLEGAL_GENERATION: the member was fenced; CAIRN_ENOT_ASSIGNED,
 * ...). cb may be NULL. Callback: as at the top of cairn.h. */
__attribute__((warn_unused_result)) int cairn_group_commit(struct cairn_group_consumer *gc,
                                                           cairn_done_cb cb, void *data);

/* The member id ("" before the first join) and generation (-1 before).
 * Returns borrowed (valid until the next rebalance). */
const char *cairn_group_member_id(const struct cairn_group_consumer *gc);
int32_t cairn_group_generation(const struct cairn_group_consumer *gc);

/* How many partitions are assigned now. */
size_t cairn_group_assigned_count(const struct cairn_group_consumer *gc);

/* True when the member is in a stable generation and every partition
 * assigned to it (none counts) has been handed out up to the high
 * watermark its last fetch saw: what `kcat -e` waits for. */
bool cairn_group_at_end(const struct cairn_group_consumer *gc);

typedef void (*cairn_group_close_cb)(struct cairn_group_consumer *gc, void *data);

/* Stops handing out records, commits (with auto commit), leaves the group
 * (the others rebalance at once; a static member stays until its session
 * expires or it restarts), closes the consumer, then cb (may be NULL) and
 * gc is freed. Context: the loop thread, not from inside the
 * records callback. */
void cairn_group_consumer_close(struct cairn_group_consumer *gc, cairn_group_close_cb cb,
                                void *data);

/* ------------------------------------------------------------------------
 * Group admin calls (at the group's coordinator, found by the library)
 * ------------------------------------------------------------------------ */

struct cairn_group_listing {
  char *group;
  char *state; /* "empty" "preparing" "completing" "storing" "stable" */
  uint32_t members;
  uint64_t coordinator_id;
};

struct cairn_group_list {
  struct cairn_group_listing *groups;
  size_t count;
};

struct cairn_group_member_info {
  char *member_id;
  char *client_id;
  struct cairn_group_partition *assignment; /* topics owned by the info */
  size_t assignment_count;
  char *group_instance_id; /* a static member's (Kafka's group.instance.id); "" dynamic */
};

/* One partition the group has committed or been assigned. */
struct cairn_group_offset_info {
  char *topic;
  int32_t partition;
  int64_t committed;      /* -1: nothing committed */
  int64_t high_watermark; /* -1: unknown to the coordinator's node */
  int64_t lag;            /* high_watermark - committed; -1 unknown */
  char *member_id;        /* owner now, "" none */
};

struct cairn_group_info {
  char *group;
  char *state;
  char *strategy;
  int32_t generation;
  char *leader_id;
  uint64_t coordinator_id;
  struct cairn_group_member_info *members;
  size_t member_count;
  struct cairn_group_offset_info *offsets;
  size_t offset_count;
};

/* One new committed offset for cairn_reset_offsets. */
struct cairn_group_reset {
  const char *topic;
  int32_t partition;
  int64_t offset; /* >= 0 */
};

/* Free what the calls return; NULL is fine. Context: any thread. */
void cairn_group_list_free(struct cairn_group_list *l);
void cairn_group_info_free(struct cairn_group_info *g);

typedef void (*cairn_group_list_cb)(struct cairn_client *c, int status, const char *errmsg,
                                    struct cairn_group_list *l, void *data);
typedef void (*cairn_group_info_cb)(struct cairn_client *c, int status, const char *errmsg,
                                    struct cairn_group_info *g, void *data);

/* Every group of the cluster: ListGroups at every alive node (each lists
 * the groups it coordinates), merged, by name. cb gets the list (returns
 * owned: free with cairn_group_list_free) or a code when no node answered.
 * Callback, context: as cairn.h's admin calls. */
__attribute__((warn_unused_result)) int cairn_list_groups(struct cairn_client *c,
                                                          cairn_group_list_cb cb, void *data);

/* DescribeGroups of one group at its coordinator: members, assignment,
 * committed offsets and lag. cb gets CAIRN_EUNKNOWN_GROUP for a group with
 * no members and no offsets. */
__attribute__((warn_unused_result)) int
cairn_describe_group(struct cairn_client *c, const char *group, cairn_group_info_cb cb, void *data);

/* ResetOffsets: sets the group's committed offsets (only while it has no
 * members: else CAIRN_EGROUP_NOT_EMPTY). A refused partition's code
 * (CAIRN_EUNKNOWN_TOPIC, ...) is the call's status. Ownership: borrows
 * group and resets for the call. */
__attribute__((warn_unused_result)) int cairn_reset_offsets(struct cairn_client *c,
                                                            const char *group,
                                                            const struct cairn_group_reset *resets,
                                                            size_t count, cairn_done_cb cb,
                                                            void *data);

/* Deletes the group's committed offsets of the partitions in parts, as
 * Kafka's OffsetDelete (kafka-consumer-groups.sh --delete-offsets; a
 * ResetOffsets with delete_offsets on the wire): its consumers then start
 * where their offset reset policy says. Only while the group has no
 * members: else CAIRN_EGROUP_NOT_EMPTY; CAIRN_EUNKNOWN_GROUP if there is
 * no such group; a refused partition's code (CAIRN_EUNKNOWN_TOPIC,
 * CAIRN_EAUTHZ, ...) is the call's status. Ownership: borrows group and
 * parts for the call. */
__attribute__((warn_unused_result)) int
cairn_delete_group_offsets(struct cairn_client *c, const char *group,
                           const struct cairn_group_partition *parts, size_t count,
                           cairn_done_cb cb, void *data);

/* Deletes group: every committed offset is dropped, as Kafka's
 * DeleteGroups (a ResetOffsets with delete_group on the wire). Only while
 * it has no members: else CAIRN_EGROUP_NOT_EMPTY; CAIRN_EUNKNOWN_GROUP if
 * there is none. Ownership: borrows group for the call. */
__attribute__((warn_unused_result)) int cairn_delete_group(struct cairn_client *c,
                                                           const char *group, cairn_done_cb cb,
                                                           void *data);

/* Removes one member from group at its coordinator, as Kafka's
 * AdminClient.removeMembersFromConsumerGroup: by member_id, or by
 * group_instance_id alone (member_id NULL or ""), which is how a static
 * member that is gone for good leaves before its session times out
 * (static members send no LeaveGroup of their own). The group rebalances
 * without it. CAIRN_EUNKNOWN_MEMBER if the group has no such member,
 * CAIRN_EFENCED_INSTANCE if both are given and the instance now has
 * another member id, CAIRN_EINVAL if neither is given. Ownership: borrows
 * the strings for the call. */
__attribute__((warn_unused_result)) int
cairn_remove_group_member(struct cairn_client *c, const char *group, const char *member_id,
                          const char *group_instance_id, cairn_done_cb cb, void *data);

/* The same, blocking, on a cairn_sync's client (errmsg, errmsg_len: the
 * failure's text, may be NULL). Results are returned owned. */
__attribute__((warn_unused_result)) int cairn_sync_list_groups(struct cairn_sync *s,
                                                               struct cairn_group_list **out,
                                                               char *errmsg, size_t errmsg_len);
__attribute__((warn_unused_result)) int
cairn_sync_delete_group_offsets(struct cairn_sync *s, const char *group,
                                const struct cairn_group_partition *parts, size_t count,
                                char *errmsg, size_t errmsg_len);
__attribute__((warn_unused_result)) int cairn_sync_delete_group(struct cairn_sync *s,
                                                                const char *group, char *errmsg,
                                                                size_t errmsg_len);
__attribute__((warn_unused_result)) int cairn_sync_describe_group(struct cairn_sync *s,
                                                                  const char *group,
                                                                  struct cairn_group_info **out,
                                                                  char *errmsg, size_t errmsg_len);
__attribute__((warn_unused_result)) int
cairn_sync_remove_group_member(struct cairn_sync *s, const char *group, const char *member_id,
                               const char *group_instance_id, char *errmsg, size_t errmsg_len);
__attribute__((warn_unused_result)) int
cairn_sync_reset_offsets(struct cairn_sync *s, const char *group,
                         const struct cairn_group_reset *resets, size_t count, char *errmsg,
                         size_t errmsg_len);

#ifdef __cplusplus
}
#endif

#endif
