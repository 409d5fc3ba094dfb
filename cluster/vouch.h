/* vouch.h - sparse coalesced beats: what a node knows of each peer's
 * beats, shared by the beat (hbeat.c, which writes it) and the replicas'
 * ticks (rgroup_pace.c, which read it) (docs/replication.md, "Sparse
 * beats").
 *
 * Why: a coalesced beat (hbeat.h) named every quiesced group in every beat
 * period, and each follower looked every named group up and restarted its
 * election timer; at 10,000 idle partitions that walk was most of an idle
 * node's CPU (docs/performance.md, "What remains"). Now a beat names only
 * what changed: a group once accepted by a follower at (term, last index)
 * stays vouched for by every later beat of its leader's node, as long as
 * nothing is missed in between. The follower applies the vouch to the
 * group lazily, at the group's own tick (rgroup_coal_vouch).
 *
 * What makes "nothing missed" checkable:
 *   - each beat frame from node L to node F carries L's epoch for F and a
 *     sequence number; F accepts vouches only while the numbers follow on
 *     from the last (in_next_seq) within one epoch. A gap or a new epoch
 *     bumps F's generation for L (in_gen): every group F accepted from L
 *     before is no longer vouched for. After a gap, and at the first beat
 *     F's process sees from L (F may have restarted without L noticing,
 *     while L still holds its acceptances), F's answer asks L to name them
 *     all again (HBEAT_F_RESET);
 *   - L bumps its epoch for F whenever a beat to F could not be sent or F
 *     asks for a reset; acceptances L holds from another epoch do not count.
 *   - a group L leads that stops being quiet at (term, index) (woken,
 *     stepped down) is revoked: the next beat tells each follower that had
 *     accepted it (vouch_revoke; VOUCH_REVOKED in the entry's index);
 *   - a follower's group whose state moved from what it accepted (another
 *     term or leader, a longer log) stops applying the vouch and is refused
 *     back to L at the next answer (vouch_nack), so L wakes it.
 * Every HBEAT_FULL_PERIODS periods a beat names every quiesced group again
 * anyway, so any disagreement the rules above miss lasts a few seconds.
 *
 * Ownership: the table is owned by struct parts (partitions.h), one per
 * node. Context: loop thread only. */
#ifndef CAIRN_VOUCH_H
#define CAIRN_VOUCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define VOUCH_REVOKED UINT64_MAX /* an entry's index: the group is no longer vouched for */

/* A (group, term, index) to put in a peer's next beat or answer. */
struct vouch_entry {
  uint64_t group_id, term, index;
};

struct vouch_list {
  struct vouch_entry *v;
  size_t n, cap;
};

struct vouch_peer {
  uint64_t id;
  /* This node as a follower of the peer's groups. */
  uint64_t in_gen;         /* acceptances made at another generation are void */
  uint64_t in_epoch;       /* the epoch of the peer's last beat */
  uint64_t in_next_seq;    /* the sequence number the next beat should carry; 0: none seen */
  uint64_t in_ms;          /* when the last beat in sequence arrived (uv_now); 0: none */
  bool in_reset;           /* the next answer asks the peer to name everything again */
  struct vouch_list nacks; /* refusals to add to the next answer */
  /* This node as the leader of groups the peer follows. */
  uint64_t out_epoch;        /* this node's epoch for the peer (never 0) */
  uint64_t out_seq;          /* the last beat's sequence number */
  uint64_t answered_ms;      /* when the peer last answered a beat of out_epoch (uv_now) */
  bool out_bumped;           /* out_epoch changed since the last beat: name everything */
  struct vouch_list revokes; /* revocations for the next beat */
};

struct vouch_table {
  struct vouch_peer *v;
  size_t n, cap;
  uint64_t seed; /* makes a restarted node's epochs differ from its last run's */
  /* Quiesced groups this node leads that some follower has not accepted
   * yet: the next beats name them (a group is on it at most once, see
   * rgroup.coal_to_name). */
  uint64_t *to_name;
  size_t nto_name, cap_to_name;
};

/* Initializes an empty table; seed should differ between runs of the node
 * (time and pid). */
void vouch_init(struct vouch_table *t, uint64_t seed);

/* Frees t's memory. */
void vouch_free(struct vouch_table *t);

/* The peer id, or NULL. */
struct vouch_peer *vouch_get(struct vouch_table *t, uint64_t id);

/* The peer id, added if new; NULL when out of memory. */
struct vouch_peer *vouch_add(struct vouch_table *t, uint64_t id);

/* Starts a new epoch of this node's beats to p: acceptances held from p so
 * far no longer count, and the next beat names everything. */
void vouch_bump(struct vouch_peer *p);

/* Appends an entry to l. Returns 0 or CAIRN_ENOMEM. */
__attribute__((warn_unused_result)) int vouch_list_add(struct vouch_list *l, uint64_t group_id,
                                                       uint64_t term, uint64_t index);

/* Queues a revocation of group_id (accepted at term) for follower node id's
 * next beat. Out of memory, or no such peer: the peer's epoch is bumped
 * instead (everything renamed, nothing vouched meanwhile). */
void vouch_revoke(struct vouch_table *t, uint64_t id, uint64_t group_id, uint64_t term);

/* Queues a refusal of group_id (at term, index) for leader node id's next
 * answer. Out of memory: dropped (the leader's next full beat names the
 * group and the follower refuses it then). */
void vouch_nack(struct vouch_table *t, uint64_t id, uint64_t group_id, uint64_t term,
                uint64_t index);

/* Puts group_id on the list of groups to name. Returns 0 or CAIRN_ENOMEM. */
__attribute__((warn_unused_result)) int vouch_to_name(struct vouch_table *t, uint64_t group_id);

#endif
