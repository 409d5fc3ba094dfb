/* group.h - one consumer group as its coordinator sees it: members,
 * generation, assignment and committed offsets, changed only by
 * group_step() (membership events) and the offset functions. Pure: no I/O;
 * the clock and the topics' partition counts come in with each event, so
 * unit tests replay any order of events (docs/consumer-groups.md).
 *
 * States (g->state) and the transitions group_step makes:
 *
 *   from        event                                      to
 *   EMPTY       JOIN                                       PREPARING (waits
 *                                                          GROUP_INITIAL_DELAY_MS
 *                                                          for more members)
 *   PREPARING   every member joined (and the initial delay
 *               passed), or the rebalance deadline: the
 *               generation is bumped, members that did not
 *               rejoin are dropped, the assignment computed,
 *               every waiting JOIN answered (JOIN_DONE),
 *               a STORE action                             STORING
 *   PREPARING   the same, client-assigned (the leader
 *               member assigns: no STORE yet)              COMPLETING
 *   PREPARING   the same with no member left               EMPTY
 *   COMPLETING  the leader member's SYNC brings the
 *               assignment (STORE action)                  STORING
 *   STABLE      a static member's JOIN with member id "" and
 *               its metadata unchanged: it takes over its
 *               instance's place, its JOIN answered at once
 *               (JOIN_DONE), a STORE action                STORING
 *   STORING     STORED of this generation, no error        STABLE
 *   STORING     STORED of this generation, an error        PREPARING
 *   COMPLETING,
 *   STORING,
 *   STABLE      JOIN, LEAVE, a session expiring (TICK),
 *               a subscribed topic's partition count
 *               changing (TICK)                            PREPARING
 *   any         the last member leaves or expires          EMPTY
 *
 * Storing (Kafka's storeGroup at the leader's SyncGroup): no member learns
 * its assignment before the group's membership with that assignment is in
 * the coordinator's log, so that a coordinator taking over knows the
 * member ids and generation every consuming member uses. A STORE action
 * asks the caller to append the membership (offset_record_add_group); the
 * caller feeds STORED with the append's outcome. SYNCs answer 0 in
 * COMPLETING and STORING but the caller holds their answers until the group
 * is STABLE in the same generation (or answers them with the error that
 * ended the wait). A STORED of another generation, or arriving after the
 * group left STORING, changes nothing (Kafka: "do nothing"). A member whose
 * SYNC waits (COMPLETING, STORING) does not expire; when the wait ends its
 * session restarts.
 *
 * Two modes, fixed while the group has members (a JOIN of the other mode
 * gets CAIRN_EINCONSISTENT_PROTOCOL):
 *   Cairn-assigned (protocol_type ""): the native model. Members name
 *     strategies Cairn implements (assign.h); the assignment is computed here
 *     when the rebalance completes, and SYNC just reads it.
 *   client-assigned (protocol_type set, e.g. Kafka's "consumer"): Kafka's
 *     model. Members offer protocols (a name and opaque metadata each); the
 *     first of the leader's that every member offers is chosen; the leader
 *     member computes the assignment and hands each member's opaque bytes
 *     over in its SYNC. Until it does (g->assigned false, COMPLETING), other
 *     members' SYNCs succeed but have nothing to read: the caller parks them
 *     until the group is STABLE, or leaves COMPLETING and STORING. Commits
 *     are checked for member and generation, not partition ownership (the
 *     bytes are opaque here).
 *
 * Static membership (Kafka's group.instance.id, KIP-345): a member may
 * name an instance id, unique in the group. A JOIN with member id "" and
 * a known instance id is that instance restarting: it takes over the
 * instance's member (subscription, assignment, leadership) under a new
 * member id, and the old id is fenced. In STABLE with the same metadata
 * (client-assigned: the chosen protocol's bytes; Cairn-assigned: the
 * subscription and the strategy in use) there is no rebalance: the JOIN
 * is answered at once in the current generation, naming as leader the
 * leader's id from before (so a restarted leader does not assign), and
 * the membership is stored again (STORING) so that a new coordinator
 * knows the new id; in any other state, or with other metadata, the
 * group rebalances as for any JOIN. An instance's member that expires
 * or leaves is removed as a dynamic one is.
 *
 * Fencing: SYNC, HEARTBEAT and commits name a member id and a generation
 * (and an instance id for static members); a known instance id held by
 * another member id gets CAIRN_EFENCED_INSTANCE, an unknown member
 * CAIRN_EUNKNOWN_MEMBER, another generation CAIRN_EILLEGAL_GENERATION. While PREPARING, HEARTBEAT
 * and SYNC answer CAIRN_EREBALANCE (join again), but commits of the current generation are still
 * accepted for the partitions the member holds: eager rebalancing, where a member commits and gives
 * up everything before rejoining.
 *
 * Context: none of these functions does I/O or keeps global state; a group
 * is used by one thread. */
#ifndef CAIRN_GROUP_H
#define CAIRN_GROUP_H

#include "server/group/assign.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define GROUP_NAME_MAX 249u
#define GROUP_MEMBER_ID_MAX 127u
#define GROUP_CLIENT_ID_MAX 63u
#define GROUP_INSTANCE_ID_MAX 249u /* as Kafka's: a topic name's bound */
#define GROUP_METADATA_MAX 4096u
#define GROUP_MAX_MEMBERS 1000u
#define GROUP_MAX_SUBSCRIPTION 100u /* topics per member */
#define GROUP_MAX_TOPICS 10000u     /* distinct topics a group names */
#define GROUP_DEFAULT_SESSION_MS 10000u
#define GROUP_MIN_SESSION_MS 500u
#define GROUP_MAX_SESSION_MS 300000u
#define GROUP_INITIAL_DELAY_MS 1000u /* a new group waits this for more joins */
#define GROUP_PROTOCOL_NAME_MAX 63u  /* protocol type and protocol names */
#define GROUP_MAX_PROTOCOLS 16u      /* protocols a member offers */
#define GROUP_OPAQUE_MAX 65536u      /* a protocol's metadata, an assignment */

#define GROUP_STATE_TABLE(X)                                                                       \
  X(GROUP_EMPTY, "empty")                                                                          \
  X(GROUP_PREPARING, "preparing")   /* rebalancing: waiting for joins */                           \
  X(GROUP_COMPLETING, "completing") /* client-assigned: waiting for the leader's SYNC */           \
  X(GROUP_STORING, "storing")       /* the assignment's membership record is being appended */     \
  X(GROUP_STABLE, "stable")

enum group_state {
#define GROUP_STATE_ENUM(name, text) name,
  GROUP_STATE_TABLE(GROUP_STATE_ENUM)
#undef GROUP_STATE_ENUM
};

/* A protocol a member of a client-assigned group offers. */
struct group_protocol {
  char name[GROUP_PROTOCOL_NAME_MAX + 1];
  uint8_t *meta; /* owned; NULL when len is 0 */
  size_t len;
};

struct group_member {
  char id[GROUP_MEMBER_ID_MAX + 1];
  char client_id[GROUP_CLIENT_ID_MAX + 1];
  char instance_id[GROUP_INSTANCE_ID_MAX + 1]; /* static members; "" dynamic */
  uint32_t session_timeout_ms;
  uint32_t rebalance_timeout_ms;
  uint8_t strategies[ASSIGN_NSTRATEGIES]; /* preference order */
  uint32_t nstrategies;
  uint32_t *topics; /* subscription: indices into g->topics; owned */
  size_t ntopics;
  uint64_t last_seen_ms;
  bool joining;               /* its JoinGroup of this rebalance waits for the answer */
  bool synced;                /* it has synced the current generation (COMPLETING, STORING:
                                 its SYNC waits for its answer) */
  struct assign_tp *assigned; /* of the current generation; owned, sorted */
  size_t nassigned;
  /* Client-assigned groups only: */
  struct group_protocol *protocols; /* offered, preferred first; owned */
  size_t nprotocols;
  uint8_t *assignment; /* the leader's bytes for it this generation; owned */
  size_t assignment_len;
};

/* A committed offset; topic indexes g->topics. */
struct group_offset {
  uint32_t topic;
  uint32_t partition;
  int64_t offset;
  char *metadata; /* owned, never NULL */
  int64_t commit_time_ms;
};

struct group {
  char name[GROUP_NAME_MAX + 1];
  enum group_state state;
  int32_t generation;
  enum assign_strategy strategy;                   /* of the current generation */
  char protocol_type[GROUP_PROTOCOL_NAME_MAX + 1]; /* "": Cairn-assigned */
  char protocol[GROUP_PROTOCOL_NAME_MAX + 1];      /* client-assigned: chosen */
  bool assigned;                        /* client-assigned: the leader has synced this generation */
  char leader[GROUP_MEMBER_ID_MAX + 1]; /* member id, "" none */
  struct group_member *members;         /* by join order; owned */
  size_t nmembers;
  char **topics;    /* every topic the group names, interned; owned */
  uint32_t *counts; /* partition counts the current assignment used */
  size_t ntopics;
  uint64_t rebalance_deadline_ms;
  uint64_t initial_until_ms;
  uint64_t empty_since_wall_ms; /* wall clock: for the offsets' retention */
  struct group_offset *offsets; /* by (topic index, partition); owned */
  size_t noffsets, offsets_cap;
  bool dropping; /* for the coordinator: tombstones of every offset are in flight */
};

/* The topics' partition counts, as the metadata has them now: 0 for a topic
 * that does not exist. */
struct group_env {
  uint32_t (*partitions)(void *ctx, const char *topic);
  void *ctx;
};

enum group_event_type {
  GROUP_EV_JOIN,
  GROUP_EV_SYNC,
  GROUP_EV_HEARTBEAT,
  GROUP_EV_LEAVE,
  GROUP_EV_TICK,
  GROUP_EV_STORED, /* the outcome of a STORE action's append */
};

/* A protocol offered in a JOIN, or a member's assignment in a SYNC;
 * borrowed for the call. */
struct group_opaque_in {
  const char *name; /* protocol name, or member id */
  const uint8_t *data;
  size_t len;
};

/* One event; strings are borrowed for the call. */
struct group_event {
  enum group_event_type type;
  uint64_t now_ms;       /* monotonic: sessions and rebalance deadlines */
  uint64_t wall_ms;      /* wall clock: when the group became empty */
  const char *member_id; /* "" for a first JOIN (LEAVE: with instance_id) */
  const char *instance_id; /* JOIN, SYNC, HEARTBEAT, LEAVE: NULL or "" dynamic */
  int32_t generation;    /* SYNC, HEARTBEAT, STORED (the STORE action's) */
  int err;               /* STORED: 0 committed, else why the append failed */
  /* JOIN only: */
  const char *new_member_id; /* the id a first JOIN gets (unique: the caller's) */
  const char *client_id;
  uint32_t session_timeout_ms;   /* 0: GROUP_DEFAULT_SESSION_MS */
  uint32_t rebalance_timeout_ms; /* 0: the session timeout */
  const char *const *topics;
  size_t ntopics;
  const char *const *strategies; /* names, preferred first */
  size_t nstrategies;
  const char *protocol_type;               /* NULL or "": Cairn-assigned */
  const struct group_opaque_in *protocols; /* client-assigned */
  size_t nprotocols;
  /* SYNC of a client-assigned group's leader: */
  const struct group_opaque_in *assignments;
  size_t nassignments;
};

/* JOIN_DONE: answer the waiting JoinGroup of member_id with err (0: with
 * the group's generation, leader, strategy and members; the leader named
 * is `leader` when set: a static member's takeover, see above).
 * STORE: append the group's membership as it is now (generation
 * `generation`, STORING) to the log, then feed GROUP_EV_STORED with that
 * generation and the outcome. member_id is "". */
enum group_action_type { GROUP_ACT_JOIN_DONE, GROUP_ACT_STORE };

struct group_action {
  enum group_action_type type;
  char member_id[GROUP_MEMBER_ID_MAX + 1];
  int err;
  int32_t generation;                   /* STORE */
  char leader[GROUP_MEMBER_ID_MAX + 1]; /* JOIN_DONE: "" the group's */
};

/* Actions accumulate here (the caller empties it: n = 0). */
struct group_actions {
  struct group_action *v; /* owned: free with group_actions_free */
  size_t n, cap;
};

/* Caller allocates g. generation: the number the group's generations
 * continue from (the highest a previous coordinator used, from the commit
 * records). Returns 0 or CAIRN_EINVAL (name empty or too long). */
__attribute__((warn_unused_result)) int group_init(struct group *g, const char *name,
                                                   int32_t generation, uint64_t wall_ms);

/* Frees what g owns. */
void group_close(struct group *g);

void group_actions_free(struct group_actions *a);

/* Applies one event. Returns 0 or a negative code (nothing changed then,
 * except a member's last-seen time):
 *   JOIN: 0 = the answer comes as a JOIN_DONE action, in this call's
 *     actions or a later one's; CAIRN_EINVALID_GROUP (session timeout out of
 *     range, no topic, too many, a name too long), CAIRN_EINCONSISTENT_PROTOCOL
 *     (no known strategy, or none in common with the other members),
 *     CAIRN_EUNKNOWN_MEMBER (a member id this group does not know),
 *     CAIRN_ETOOLARGE (GROUP_MAX_MEMBERS), CAIRN_ENOMEM.
 *   SYNC: 0 (the member's assignment is m->assigned of group_member_find;
 *     client-assigned: m->assignment; to be answered once the group is
 *     STABLE, at once if it is now), CAIRN_EUNKNOWN_MEMBER,
 *     CAIRN_EILLEGAL_GENERATION, CAIRN_EREBALANCE, CAIRN_ETOOLARGE or
 *     CAIRN_ENOMEM (a leader's assignments).
 *   STORED: 0.
 *   HEARTBEAT: 0, CAIRN_EUNKNOWN_MEMBER, CAIRN_EILLEGAL_GENERATION,
 *     CAIRN_EREBALANCE.
 *   LEAVE: 0, CAIRN_EUNKNOWN_MEMBER or CAIRN_EFENCED_INSTANCE.
 *   JOIN, SYNC, HEARTBEAT also CAIRN_EFENCED_INSTANCE (static membership,
 *     above); JOIN CAIRN_EUNKNOWN_MEMBER for a member id with an instance
 *     id the group does not know.
 *   TICK: 0 (or CAIRN_ENOMEM computing an assignment: retried next tick).
 * env is consulted when a rebalance completes and on TICK. */
__attribute__((warn_unused_result)) int group_step(struct group *g, const struct group_env *env,
                                                   const struct group_event *ev,
                                                   struct group_actions *acts);

/* A group's membership as the coordinator's log keeps it (a GROUP record,
 * offset_record.h): what a new coordinator needs so that the members of a
 * stable group go on with their member ids and generation. Borrowed. */
struct group_snapshot_member {
  const char *id;
  const char *client_id;
  const char *instance_id; /* NULL or "": dynamic */
  uint32_t session_timeout_ms;
  uint32_t rebalance_timeout_ms;
  const char *const *topics; /* subscription */
  size_t ntopics;
  const uint8_t *assignment; /* client-assigned: the leader's bytes */
  size_t assignment_len;
  const uint8_t *metadata; /* client-assigned: its chosen protocol's metadata */
  size_t metadata_len;
  const char *const *assigned_topics; /* Cairn-assigned: held partitions */
  const uint32_t *assigned_partitions;
  size_t nassigned;
};

struct group_snapshot {
  int32_t generation;
  const char *protocol_type; /* "": Cairn-assigned */
  const char *protocol;      /* client-assigned: chosen */
  uint32_t strategy;         /* Cairn-assigned: enum assign_strategy */
  const char *leader;
  const struct group_snapshot_member *members; /* none: empty */
  size_t nmembers;
};

/* Replaces g's membership with s (a new coordinator loading its log): the
 * members as of a stable generation, each synced, heard of at now_ms (their
 * sessions restart, as Kafka's coordinator does on loading), the group
 * STABLE (EMPTY with no member). A restored member offers only the chosen
 * protocol (client-assigned) or strategy until it joins again. Returns 0,
 * CAIRN_EINVAL (a bad name, protocol or strategy, too many members or
 * topics, a member id or an instance id twice, a leader that is not a
 * member; g then has no member) or CAIRN_ENOMEM (likewise). */
__attribute__((warn_unused_result)) int group_restore(struct group *g,
                                                      const struct group_snapshot *s,
                                                      const struct group_env *env, uint64_t now_ms,
                                                      uint64_t wall_ms);

/* May member_id (of instance_id: NULL or "" for a dynamic member) of
 * generation commit offsets now? Counts as a heartbeat. member_id "" with
 * generation -1 commits outside membership: allowed only while the group
 * has no member. Returns 0, CAIRN_EFENCED_INSTANCE, CAIRN_EUNKNOWN_MEMBER
 * or CAIRN_EILLEGAL_GENERATION. */
__attribute__((warn_unused_result)) int group_commit_check(struct group *g, const char *member_id,
                                                           const char *instance_id,
                                                           int32_t generation, uint64_t now_ms);

/* Does member_id hold (topic, partition) in the current generation? True
 * for any partition when member_id is "" (a commit outside membership), and
 * for any member of a client-assigned group (its assignment is opaque). */
bool group_member_owns(const struct group *g, const char *member_id, const char *topic,
                       uint32_t partition);

/* The member, or NULL. Returns borrowed, valid until the next group_step. */
const struct group_member *group_member_find(const struct group *g, const char *member_id);

/* Who holds (topic, partition) in the current generation; NULL none. */
const struct group_member *group_owner(const struct group *g, const char *topic,
                                       uint32_t partition);

/* The interned topic's index, adding it when add is true. Returns the index,
 * -1 if absent (add false), CAIRN_ETOOLARGE (GROUP_MAX_TOPICS) or
 * CAIRN_ENOMEM. */
__attribute__((warn_unused_result)) long group_topic_index(struct group *g, const char *topic,
                                                           bool add);

/* Sets the committed offset of (topic, partition). Copies metadata.
 * Returns 0, CAIRN_ETOOLARGE or CAIRN_ENOMEM. */
__attribute__((warn_unused_result)) int group_offset_set(struct group *g, const char *topic,
                                                         uint32_t partition, int64_t offset,
                                                         const char *metadata,
                                                         int64_t commit_time_ms);

/* The committed offset of (topic, partition), or NULL. Returns borrowed,
 * valid until the next change of g's offsets. */
const struct group_offset *group_offset_find(const struct group *g, const char *topic,
                                             uint32_t partition);

/* Forgets (topic, partition)'s offset; no-op if none. */
void group_offset_delete(struct group *g, const char *topic, uint32_t partition);

/* True when the group is empty and neither it nor any of its offsets has
 * changed for retention_ms of wall clock: its offsets may be dropped. */
bool group_expired(const struct group *g, uint64_t wall_ms, uint64_t retention_ms);

/* True when the group has no member and no offset: the coordinator's next
 * tick forgets it, and until then it is answered as unknown (so a group
 * DeleteGroups just emptied is gone at once, not one tick later). */
bool group_gone(const struct group *g);

/* Is g client-assigned (Kafka's model)? */
static inline bool group_client_assigned(const struct group *g)
{
  return g->protocol_type[0] != '\0';
}

/* The chosen protocol's metadata of m (client-assigned), or NULL/0. */
const struct group_protocol *group_member_protocol(const struct group *g,
                                                   const struct group_member *m);

/* "empty", "preparing", "completing", "stable". Static string. */
const char *group_state_name(enum group_state s);

#endif
