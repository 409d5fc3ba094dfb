/* metaheal.h - a node whose metadata group log (<data>/meta/wal) is
 * damaged beyond a torn tail keeps running: its metadata replica is
 * refused, removed from the metadata group by the controller leader,
 * and rejoins empty, rebuilt from its peers (docs/metadata.md, "A damaged
 * metadata log").
 *
 * States of this node's metadata replica (enum mheal_state), and the
 * function that makes each transition:
 *
 *   state       what runs                         event -> next          by
 *   OFF         the metadata group as usual        (none)
 *   REFUSED     no Raft at all (CTL_REFUSED):      leader's OUT frame     mheal_rebuild
 *               the replica neither votes nor      naming this refusal
 *               acknowledges; every tick a         -> state discarded,
 *               REFUSED frame goes to each         JOINING (node.c
 *               controller voter and each node     then calls
 *               watching this one (node.c)         ctl_rejoin)
 *   JOINING     Raft on an empty log, never        the replica applied    mheal_tick
 *               bootstrapping; every tick a        the leader's commit
 *               REJOINED frame to the same         and holds its role
 *               nodes                              -> DONE
 *   DONE        the metadata group as usual
 *
 * A log lost whole (no state of the group after wal_open) in a data dir
 * whose NODE file names the cluster is marked the same way (node.c,
 * node_meta_wal_lost): a configured voter would otherwise bootstrap and
 * vote on an empty log.
 *
 * Node start (node.c): wal_open of meta/wal refusing the log (damage
 * beyond a torn tail) -> waldamage_set_aside_log writes the mark
 * <data>/meta/raft.refused (the file and byte) durably, then moves the
 * log to meta/wal.damaged-<seconds>; a new empty log is opened. A meta
 * dir holding the mark starts REFUSED (also after a crash at any later
 * point before the mark moved); one holding raft.damaged-* (a rebuild
 * moved the mark) opens its group with ctl_opts.no_bootstrap, so a crash
 * after the move never bootstraps the initial voters again.
 *
 * The leader's side (controller.h, ctl_note_refused): a REFUSED frame from
 * node X records X as refused for CTL_REFUSED_HOLD_MS; its membership step
 * removes X from the group (voter or not) and adds no refused node back;
 * once the committed configuration lacks X (no change uncommitted) the
 * leader answers OUT with the frame's refusal id. Only then does X drop its
 * Raft state: up to that point X's lost votes and acknowledged entries
 * could still count. After that X is a new server to the group: added as a
 * spare, caught up, and assigned the voter role (a configured voter) or
 * the standby role.
 *
 * Frames ride the nodewatch connections (nodewatch.h, "Frames"), beside
 * the coalesced heartbeats (hbeat.h), told apart by their first byte.
 * Payload, little-endian, version MHEAL_VERSION = 1:
 *    0  u8  tag MHEAL_TAG (0x81: hbeat's version byte is 1)
 *    1  u8  type: MHEAL_REFUSED (refused node to voters), MHEAL_OUT
 *           (leader to refused node), MHEAL_REJOINED (joining node to voters)
 *    2  u16 version
 *    4  u32 0
 *    8  u64 refusal id (the refused process's; OUT echoes it)
 *
 * Context: loop thread only. mheal_begin and mheal_rebuild block on a few
 * renames and fsyncs. */
#ifndef CAIRN_METAHEAL_H
#define CAIRN_METAHEAL_H

#include "cluster/nodewatch.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define MHEAL_TAG 0x81
#define MHEAL_VERSION 1
#define MHEAL_FRAME 16
#define MHEAL_REASON_MAX 1024
#define MHEAL_PATH_MAX 4096

#define MHEAL_STATE_TABLE(X)                                                                       \
  X(MHEAL_OFF, "off")         /* the log was intact */                                             \
  X(MHEAL_REFUSED, "refused") /* no Raft; waiting for the leader's OUT */                          \
  X(MHEAL_JOINING, "joining") /* Raft on an empty log, being caught up */                          \
  X(MHEAL_DONE, "done")       /* rebuilt in this process */

enum mheal_state {
#define MHEAL_STATE_ENUM(name, text) name,
  MHEAL_STATE_TABLE(MHEAL_STATE_ENUM)
#undef MHEAL_STATE_ENUM
};

enum mheal_type { MHEAL_REFUSED_FRAME = 1, MHEAL_OUT_FRAME = 2, MHEAL_REJOINED_FRAME = 3 };

struct mheal {
  enum mheal_state state;
  char dir[MHEAL_PATH_MAX];      /* <data>/meta */
  char reason[MHEAL_REASON_MAX]; /* the mark's text */
  uint64_t refusal_id;           /* this process's refusal */
  uint64_t since_ms;             /* loop time of REFUSED or JOINING */
  uint64_t logged_ms;            /* last "still refused" line */
  bool rebuilt_before;           /* dir holds raft.damaged-*: never bootstrap */
};

/* At node start, before the metadata group opens: reads dir's mark.
 * Returns MHEAL_REFUSED (open the group with ctl_opts.refused) or
 * MHEAL_OFF; mh->rebuilt_before says whether to set
 * ctl_opts.no_bootstrap. Ownership: copies dir. */
enum mheal_state mheal_begin(struct mheal *mh, const char *dir, uint64_t refusal_id,
                             uint64_t now_ms);

/* Every node tick: REFUSED sends a REFUSED frame, JOINING a REJOINED
 * frame, to every id in voters (except self_id) over nw; JOINING becomes
 * DONE once synced (the replica applied what its leader committed and holds its
 * role again: node.c). */
void mheal_tick(struct mheal *mh, struct nodewatch *nw, uint64_t self_id, const uint64_t *voters,
                size_t nvoters, bool synced, uint64_t now_ms);

/* Parses a frame payload: 0 and *type, *refusal_id; CAIRN_EINVAL when it
 * is not one of these frames (another's: hbeat.h), CAIRN_ECORRUPT when it
 * is one but malformed. */
__attribute__((warn_unused_result)) int mheal_decode(const uint8_t *payload, size_t len,
                                                     enum mheal_type *type, uint64_t *refusal_id);

/* Encodes a frame into out (MHEAL_FRAME bytes). */
void mheal_encode(uint8_t out[MHEAL_FRAME], enum mheal_type type, uint64_t refusal_id);

/* An OUT frame for refusal_id arrived: in REFUSED with that id, moves the
 * replica's state (meta/wal-snapshots) and then the mark into
 * dir/raft.damaged-<seconds>, durably, and goes JOINING: returns 1, the
 * caller then starts the group's Raft (ctl_rejoin). 0: nothing to do (not
 * refused, or another refusal's answer). Negative: the move failed (the
 * mark is still there: the replica stays REFUSED and the next OUT
 * retries), logged. */
__attribute__((warn_unused_result)) int mheal_rebuild(struct mheal *mh, uint64_t refusal_id,
                                                      uint64_t now_ms);

const char *mheal_state_name(enum mheal_state s);

#endif
