/* coord.h - the group coordinator of one node: for each partition of the
 * internal topic __cairn_offsets that this node leads, the consumer groups
 * whose names hash to it (group.h), their committed offsets, and the
 * requests waiting on them. docs/consumer-groups.md describes the
 * protocol and the guarantees.
 *
 * Committed offsets are records in the offsets partition's log (Raft,
 * replicated like any partition): a commit is answered once its batch is
 * committed (rgroup_produce), and applied to the in-memory map then, in
 * log order. The map is rebuilt when the node becomes the partition's
 * leader:
 *
 *   slot state     event                                   next
 *   UNLOADED       tick: this replica leads (term T)       MARKING: a marker
 *                                                          record is produced
 *   MARKING        the marker commits at offset M          LOADING: read
 *                                                          [log start, M) a
 *                                                          bounded amount per
 *                                                          tick, last record
 *                                                          per key wins
 *   LOADING        everything read                         LOADED (term T)
 *   any            leadership lost, a new term, a failed   UNLOADED: groups
 *                  commit or load                          dropped, waiting
 *                                                          joins answered
 *                                                          NOT_COORDINATOR
 *
 * Every record appended in term T is applied to the map when it commits;
 * if one fails (in doubt), the slot unloads and reloads from the log, so
 * the map never differs from the log.
 *
 * Context: loop thread only. */
#ifndef CAIRN_GROUP_COORD_H
#define CAIRN_GROUP_COORD_H

#include "net/conn.h"
#include "server/group/group.h"

#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

#define COORD_OFFSETS_TOPIC "__cairn_offsets"
#define COORD_TICK_MS 100
#define COORD_LOAD_BYTES_PER_TICK (4u << 20)
#define COORD_MAX_COMMIT_PARTITIONS 10000u
#define COORD_EXPIRE_EVERY_MS 1000u

struct node;
struct coord_join;

enum coord_slot_state { COORD_UNLOADED, COORD_MARKING, COORD_LOADING, COORD_LOADED };

/* One partition of __cairn_offsets as this node coordinates it. */
struct coord_slot {
  uint32_t partition;
  enum coord_slot_state state;
  uint64_t term;         /* the Raft term the state belongs to */
  uint64_t epoch;        /* bumped on every unload: fences callbacks of older loads */
  int64_t load_next;     /* LOADING: next offset to read */
  int64_t load_end;      /* LOADING: the marker's offset */
  struct group **groups; /* owned */
  size_t ngroups;
  int32_t *load_gens;   /* LOADING: highest generation seen, per group */
  uint64_t next_member; /* for member ids */
  uint64_t last_expire_ms;
};

struct coord {
  struct node *n;
  uv_timer_t timer;
  bool closing;
  struct coord_slot *slots; /* indexed by partition; owned */
  size_t nslots;
  struct coord_join *joins; /* waiting JoinGroups, all slots */
  bool creating;            /* a CreateTopic of __cairn_offsets is in flight */
  uint64_t create_after_ms; /* no new attempt before this */
};

/* Starts the coordinator's timer. Caller allocates c (in the node). */
void coord_init(struct coord *c, struct node *n);

/* Answers waiting joins (SHUTTING_DOWN), drops every group, stops the
 * timer. Commits in flight keep their memory until their callbacks, which
 * the partitions' close fires (the slots array lives until coord_free). */
void coord_close(struct coord *c);

/* Frees the slots after every partition has closed. */
void coord_free(struct coord *c);

/* The partition of __cairn_offsets that group hashes to: FNV-1a 32 of the
 * name's bytes, modulo npartitions (docs/consumer-groups.md). */
uint32_t coord_partition_of(const char *group, uint32_t npartitions);

/* Where group is coordinated. Returns 0 with *slot (borrowed, valid until
 * the next loop iteration) when this node leads its offsets partition and
 * has loaded it; otherwise CAIRN_ENOT_COORDINATOR with *leader_id /
 * leader_address (a borrowed client address or NULL), or
 * CAIRN_ECOORDINATOR_LOADING (the topic is being created or the slot
 * loaded; retry), or CAIRN_EINVALID_GROUP (a bad name). */
__attribute__((warn_unused_result)) int coord_lookup(struct coord *c, const char *group,
                                                     struct coord_slot **slot, uint64_t *leader_id,
                                                     const char **leader_address);

/* The group in slot, or NULL; with create, made when absent (NULL only
 * when out of memory). Returns borrowed, valid until the next tick. */
struct group *coord_group(struct coord_slot *slot, const char *name, bool create);

/* Feeds ev to the group and carries out its actions: answers the joins
 * they finish, appends the membership a STORE asks for (its SyncGroups are
 * answered when the record commits), answers the parked syncs that can be.
 * Returns group_step's code. */
__attribute__((warn_unused_result)) int coord_step(struct coord *c, struct coord_slot *slot,
                                                   struct group *g, struct group_event *ev);

/* A SyncGroup (ev, type GROUP_EV_SYNC) of g: req is answered with the
 * member's assignment once g is STABLE in ev's generation, i.e. once the
 * group's membership with that assignment is committed in the log (at once
 * if it already is); with REBALANCE_IN_PROGRESS if the generation ends
 * first, NOT_COORDINATOR if the slot unloads (the append failed or the
 * leadership went), the append's error if it is refused at once, or
 * UNKNOWN_MEMBER_ID if the member goes. Kafka's doSyncGroup/storeGroup.
 * Returns 0 (req answered now or parked: the caller lets go of it), or
 * group_step's refusal or CAIRN_ENOMEM (req untouched: the caller answers). */
__attribute__((warn_unused_result)) int coord_sync(struct coord *c, struct coord_slot *slot,
                                                   struct group *g, struct group_event *ev,
                                                   struct conn_request *req);

/* Parks req, a JoinGroup of member_id in g, until its JOIN_DONE (or the
 * slot unloads, or the conn closes). Returns 0 or CAIRN_ENOMEM. */
__attribute__((warn_unused_result)) int coord_park_join(struct coord *c, struct coord_slot *slot,
                                                        struct group *g, const char *member_id,
                                                        struct conn_request *req);

/* Parks req, a SyncGroup of member_id in g (COMPLETING or STORING), until
 * g is STABLE in this generation (answered with the member's assignment),
 * the generation ends (REBALANCE_IN_PROGRESS), the member goes, the slot
 * unloads, or the conn closes (coord_sync's contract). Returns 0 or
 * CAIRN_ENOMEM. */
__attribute__((warn_unused_result)) int coord_park_sync(struct coord *c, struct coord_slot *slot,
                                                        struct group *g, const char *member_id,
                                                        struct conn_request *req);

/* Answers req (a SyncGroup) for member_id of g with err or its assignment
 * (Cairn's partitions, or the client-assigned bytes). */
void coord_answer_sync(struct group *g, const char *member_id, int err, struct conn_request *req);

/* Forgets the parked req without answering it (the caller answers). */
void coord_unpark_join(struct coord *c, struct conn_request *req);

/* Answers req (a JoinGroup) for member_id of g with err or the group's
 * generation, naming leader as its leader (NULL or "": the group's; a
 * static member's takeover names the one from before, group.h). */
void coord_answer_join(struct coord *c, struct group *g, const char *member_id, const char *leader,
                       int err, struct conn_request *req);

/* The partition counts the metadata has (for group_env). */
uint32_t coord_topic_partitions(void *node, const char *topic);

/* Fills ev's clocks. */
void coord_event_clock(struct coord *c, struct group_event *ev);

/* ---- commits (coord_commit.c) ---- */

/* One offset to append: value NULL means a tombstone. */
struct coord_record {
  const char *group;
  const char *topic;
  uint32_t partition;
  int64_t offset;
  const char *metadata;
  int32_t generation;
};

typedef void (*coord_append_cb)(void *data, int status);

/* Appends records (borrowed for the call) to slot's partition as one batch;
 * tombstones[i] true makes records[i] a deletion. When the batch commits,
 * the records are applied to the slot's groups, then cb(data, 0); on
 * failure the slot unloads and cb(data, code). Callback: fires exactly
 * once if this returns 0, never if it fails, and never before this returns
 * (a refusal inside the replica is returned instead). Returns 0, CAIRN_ETOOLARGE,
 * CAIRN_ENOTLEADER or CAIRN_ENOMEM. */
__attribute__((warn_unused_result)) int coord_append(struct coord *c, struct coord_slot *slot,
                                                     const struct coord_record *records,
                                                     const bool *tombstones, size_t n,
                                                     coord_append_cb cb, void *data);

/* Appends g's membership (offset_record_add_group) to slot's partition, so
 * that a coordinator loading the partition later restores the members and
 * generation (coord_step calls it for a STORE action, and when g becomes
 * empty). cb (may be NULL) as for coord_append: a failure unloads the
 * slot before cb(data, code). Returns 0, CAIRN_ENOTLEADER,
 * CAIRN_ETOOLARGE or CAIRN_ENOMEM (no callback then). */
__attribute__((warn_unused_result)) int coord_append_group(struct coord *c, struct coord_slot *slot,
                                                           const struct group *g,
                                                           coord_append_cb cb, void *data);

/* Unloads slot: its groups dropped, waiting joins answered NOT_COORDINATOR. */
void coord_unload(struct coord *c, struct coord_slot *slot, const char *why);

/* ---- views (coord_view.c) ---- */

typedef void (*coord_group_fn)(const struct group *g, void *data);

/* Calls fn(g, data) for every group of every loaded slot, slot by slot.
 * fn borrows g for the call and must not change the coordinator. */
void coord_each_group(struct coord *c, coord_group_fn fn, void *data);

/* One partition of a group's consumption: its committed offset (-1: none
 * yet, the partition is assigned only), the high watermark of this node's
 * replica (-1: not hosted here) and their difference (-1: unknown). */
struct coord_lag {
  const char *topic; /* borrowed from the group */
  uint32_t partition;
  int64_t committed;
  int64_t high_watermark;
  int64_t lag;
  const char *member_id; /* who holds it this generation, "" none; borrowed */
};

/* Every committed offset of g, then every assigned partition without one,
 * with their lag. Ownership: returns owned *out (free()); its strings are
 * borrowed from g, valid until g changes. Returns 0 or CAIRN_ENOMEM. */
__attribute__((warn_unused_result)) int coord_group_lag(struct coord *c, const struct group *g,
                                                        struct coord_lag **out, size_t *nout);

/* ---- loading (coord_load.c) ---- */

/* Drives slot towards LOADED or UNLOADED from this node's replica of its
 * partition; called every tick. */
void coord_load_step(struct coord *c, struct coord_slot *slot);

#endif
