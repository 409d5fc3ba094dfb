/* raftmux.h - the partition groups' Raft messages over one connection per
 * peer node (--raft-mux on): every group's io->send encodes its message into
 * a frame tagged with the group id and the sender, and sends it on this
 * node's watch connection to the peer's node (nodewatch.h, "Frames"); the
 * peer hands it to that group's raft receive callback. So a node holds
 * O(peers) cluster connections for its Raft traffic instead of raft_uv's
 * one per group per peer (docs/replication.md, "Multiplexed Raft
 * messages").
 *
 * The frame payload and its codec: raftmux_codec.h.
 *
 * Sending: raftmux_attach replaces a group's io->send (and interposes
 * start, to learn raft's receive callback, and close). A send is encoded
 * at once (the message is not referenced after io->send returns) and its
 * callback fires from the loop after io->send returned, never inside it:
 * status 0 when the frame was queued, RAFT_NOCONNECTION when it was
 * dropped (the peer's node not connected, RAFTMUX_SENDQ_MAX bytes already
 * queued to it, a message above RAFTMUX_MSG_MAX). Raft retransmits what is
 * lost. A closing group's sends call back before its io closes.
 *
 * Holding (raftmux_hold / raftmux_release): while a group's owner has a
 * term or vote record in flight to the disk, the group's sends are encoded
 * at once but held, in order, and go out (or fail) when the owner releases
 * them: nothing this replica says reveals a term or vote it could forget
 * in a crash (riow_mux.h, "Term and vote"). Held bytes per group are
 * bounded by RAFTMUX_SENDQ_MAX (a send beyond it is dropped, as on a full
 * queue). A release with an error fails the held sends with it and every
 * later send of the group too: the record's outcome is unknown, so the
 * term or vote it carried must never be revealed.
 *
 * Receiving: a frame for a group not attached here (unknown, not started,
 * closing) is dropped before it is decoded.
 *
 * Context: loop thread only. */
#ifndef CAIRN_RAFTMUX_H
#define CAIRN_RAFTMUX_H

#include "cluster/nodewatch.h"
#include "cluster/raftmux_codec.h"

#include <raft.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

/* Bytes queued to a peer's node before sends drop (16 of the largest
 * AppendEntries). Raft retransmits what is dropped, but a drop costs more
 * than a wait: a lost AppendEntries puts its follower in probe and the
 * entries go again, a lost heartbeat or answer brings an election. When
 * one ProduceRequest spread over 10,000 partitions proposes an entry in
 * each, the frames it makes at once (two per partition, ~300 bytes each)
 * passed the former bound of two AppendEntries (2 MiB): a produce over
 * 10,000 partitions dropped 10^5-10^6 frames per node and elected by the
 * hundred thousand (docs/performance.md, "The producer's round, glibc's fastbins and
 * the queue to a peer").
 * Frames queued behind a stalled connection (a partition that drops
 * packets) are stale by the time it heals: the bound keeps that to 16 MiB
 * per peer, a fraction of a second of a healthy loopback or LAN link. */
#define RAFTMUX_SENDQ_MAX (16u * RAFTMUX_AE_MAX)

/* ---- the node-wide multiplexer ---- */

struct raftmux_send;
struct raftmux_group;

struct raftmux {
  uv_loop_t *loop;
  struct nodewatch *nw;
  uv_idle_t idle;                 /* fires the queued send callbacks */
  struct raftmux_send *done_head; /* callbacks due, FIFO */
  struct raftmux_send *done_tail;
  struct raftmux_group *defer_head; /* raftmux_defer's, FIFO */
  struct raftmux_group *defer_tail;
  struct raftmux_group **groups; /* attached groups, sorted by gid */
  size_t ngroups, cap;
  uint8_t *scratch; /* one encoding buffer, reused */
  size_t scratch_cap;
  bool open;
  void (*close_cb)(struct raftmux *mx);
  uint64_t bad_log_ms;
  /* Counters (metrics). */
  uint64_t sent, sent_bytes; /* frames queued */
  uint64_t dropped;          /* sends dropped: not connected, queue full, too large */
  uint64_t received;         /* frames handed to a group */
  uint64_t unknown;          /* frames for a group not attached here */
  uint64_t malformed;        /* frames that did not decode */
  uint64_t held;             /* sends that waited for a term or vote record */
};

/* One group's attachment; embedded by its owner next to the io. */
struct raftmux_group {
  struct raftmux *mx;
  struct raft_io *io;
  uint64_t gid;
  uint64_t self_id;                      /* this replica's server id, sent as the sender's */
  char *address; /* owned copy of this replica's, sent as the sender's (freed when unregistered) */
  raft_io_recv_cb recv_cb;               /* raft's, from io->start; NULL before */
  int (*uv_start)(struct raft_io *io, unsigned msecs, raft_io_tick_cb tick, raft_io_recv_cb recv);
  void (*uv_close)(struct raft_io *io, raft_io_close_cb cb);
  raft_io_close_cb close_cb;
  unsigned pending; /* sends whose callback has not fired (held ones too) */
  unsigned holds;   /* raftmux_hold calls not yet released */
  struct raftmux_send *held_head, *held_tail; /* held sends, FIFO */
  size_t held_bytes;                          /* their encoded bytes */
  int failed;                                 /* 0, or the RAFT_* code every send fails with */
  bool closing;
  void (*deferred)(struct raftmux_group *mg); /* raftmux_defer's callback, NULL: none */
  struct raftmux_group *defer_next;
};

/* Starts mx over nw: frames tagged RAFTMUX_TAG received on nw go to the
 * attached groups (nwatch_set_mux_cb). Ownership: borrows nw, which must
 * stay open until raftmux_close's callback. Caller allocates mx. Returns 0
 * or a negative libuv error. */
__attribute__((warn_unused_result)) int raftmux_init(struct raftmux *mx, uv_loop_t *loop,
                                                     struct nodewatch *nw);

/* Stops receiving, then cb from the loop once mx's handle closed. Every
 * group must have closed first. An mx never initialized (zeroed) calls cb
 * at once. Callback (may be NULL): fires exactly once. */
void raftmux_close(struct raftmux *mx, void (*cb)(struct raftmux *mx));

/* Registers group gid (this replica, server self_id at address, copied) for receive and
 * prepares mg to carry io's sends. The owner then points io->send,
 * io->start and io->close at trampolines that find mg from io and call
 * raftmux_io_send, raftmux_io_start and raftmux_io_close (as riow_uv.h does
 * for storage); do that before any other interposer wraps those methods:
 * mg saves io->start and io->close here and calls them. A group attached
 * under a gid already attached replaces the older one for receive.
 * Ownership: borrows mx (open until io's close callback) and io; mg stays
 * put until io's close callback. Returns 0, CAIRN_EINVAL (address empty or
 * too long) or CAIRN_ENOMEM (nothing registered then). */
__attribute__((warn_unused_result)) int raftmux_attach(struct raftmux *mx, struct raftmux_group *mg,
                                                       struct raft_io *io, uint64_t gid,
                                                       uint64_t self_id, const char *address);

/* Unregisters mg at once, for an io raft never started (raft_init failed):
 * no send was made, nothing is closed. */
void raftmux_detach(struct raftmux_group *mg);

/* io->send: encodes m and queues it to m->server_id's node. Ownership:
 * borrows m (not referenced after the return). Callback: req's cb fires
 * exactly once if this returned 0, from the loop, never inside this call.
 * Returns 0 or RAFT_NOMEM / RAFT_CANCELED (closing); a frame dropped on
 * the way still returns 0 and calls back with RAFT_NOCONNECTION; a held
 * one calls back after its release (raftmux_release). */
__attribute__((warn_unused_result)) int raftmux_io_send(struct raftmux_group *mg,
                                                        struct raft_io_send *req,
                                                        const struct raft_message *m,
                                                        raft_io_send_cb cb);

/* Holds mg's sends from now on until a matching raftmux_release (holds
 * nest: sends go out when every hold is released). */
void raftmux_hold(struct raftmux_group *mg);

/* Releases one hold. status 0: once no hold is left, the held sends go
 * out in the order they were made (their callbacks as for any send).
 * status a RAFT_* code: the held sends call back with it, unsent, and so
 * does every later send of mg (mg is latched failed). A closing group's
 * held sends call back with RAFT_CANCELED, unsent. */
void raftmux_release(struct raftmux_group *mg, int status);

/* Does mg hold its sends now (a hold not yet released)? */
bool raftmux_holding(const struct raftmux_group *mg);

/* io->start: remembers recv (frames for the group go to it from now on)
 * and calls the saved start with the same arguments. */
__attribute__((warn_unused_result)) int raftmux_io_start(struct raftmux_group *mg, unsigned msecs,
                                                         raft_io_tick_cb tick,
                                                         raft_io_recv_cb recv);

/* Calls cb(mg) from the loop (the idle phase of this or the next
 * iteration), after the send callbacks already due: an owner's way to
 * finish a close asynchronously, as raft expects, without a handle of its
 * own. At most one per group at a time; mg must stay allocated until cb.
 * After raftmux_close: cb at once. */
void raftmux_defer(struct raftmux_group *mg, void (*cb)(struct raftmux_group *mg));

/* io->close: unregisters the group, waits until every send of the group
 * called back, then calls the saved close with cb. */
void raftmux_io_close(struct raftmux_group *mg, raft_io_close_cb cb);

#endif
