/* nodewatch.h - is a peer node's process still there? One connection per
 * peer node on the cluster port (preamble kind TRANSPORT_KIND_WATCH,
 * through the same handshake as Raft's), held open and never written to.
 * A process that dies (SIGKILL, a crash) has its sockets closed by its
 * kernel at once: this end reads EOF or a reset within milliseconds, dials
 * again, and when that dial fails (refused: nothing listens on the port
 * any more) reports the node gone. The partition replicas that follow a
 * leader on that node then elect at once (rgroup_leader_gone) instead of
 * waiting out the election timeout.
 *
 *   peer state   event                                   to          by
 *   IDLE         dial (at once, then every retry period) DIALING     nwatch_on_timer
 *   DIALING      the peer's accept byte read             UP          nwatch_on_read
 *   DIALING      the dial failed, or EOF before the byte IDLE        nwatch_on_dial, _on_read
 *   UP           EOF or error on the connection          CONFIRMING  nwatch_on_read
 *   UP           the same within NWATCH_RETRY_MS of UP   IDLE        nwatch_on_read
 *   CONFIRMING   the accept byte again (a blip)          UP          nwatch_on_read
 *   CONFIRMING   the dial failed, or EOF before the      IDLE        nwatch_on_dial, _on_read
 *                byte: report the node gone
 *
 * The listening end writes one byte when its nodewatch takes the
 * connection: a connection alone proves nothing, since a process being
 * killed may still complete one on its listening socket before the kernel
 * closes that too (seen: the redial "succeeded", then was reset).
 *
 * A connection that drops while its node still accepts a new one is not a
 * death (no report), so a network blip costs no election. A machine that
 * vanishes without closing its sockets (power loss, a cut link) is not
 * seen here: the dial then hangs until the transport's deadline, and Raft's
 * election timeout is what notices it, as before.
 *
 * The other end (nwatch_accept, given to transport_set_watch) writes its
 * accept byte, then reads until EOF, so its half closes with the peer.
 *
 * Frames: the dialing end may also send small messages to the peer on its
 * connection (nwatch_send; coalesced heartbeats, hbeat.h), each
 *    0  u32 payload length n (1..NWATCH_FRAME_MAX, or 1..the mux's limit
 *           for a tagged frame, below), little-endian
 *    4  u32 CRC-32C of the payload
 *    8  n   payload
 * The listening end hands each whole frame to the frame callback with the
 * sender's node id (from the preamble); a frame that is too long or fails
 * its checksum closes that connection with a log line (the dialer then
 * reconnects, as after a blip). A node without a frame callback (or of an
 * older version) reads and drops them. So each direction of a node pair
 * has its own connection: A's frames to B go on the connection A dialed,
 * B's answers on the one B dialed.
 *
 * A second consumer may claim the frames whose payload starts with one tag
 * byte (nwatch_set_mux_cb; the partitions' Raft messages, raftmux.h): they
 * go to its callback instead of the frame callback, and a frame it calls
 * malformed closes its connection like a bad checksum. Such a frame may be
 * longer than NWATCH_FRAME_MAX, up to the limit the consumer gave (a Raft
 * snapshot, raftmux.h "Sizes"), on a node where the consumer is set only:
 * the reader lets a frame past NWATCH_FRAME_MAX only once its first payload
 * byte shows the tag, so every other frame (and every frame on a node
 * without the consumer) keeps the 1 MiB limit.
 *
 * Writes are corked: the frames sent to a peer during one loop phase are
 * copied into one buffer and written with one uv_write before the loop
 * next waits for I/O (a prepare and a check handle), or at once when the
 * buffer reaches NWATCH_CORK_FLUSH bytes. At 10,000 partitions under
 * produce load a node sent over 100,000 frames a second; one write
 * syscall each (on loopback, with the receiver's TCP work in the
 * sender's syscall) was a third of its CPU (docs/performance.md).
 *
 * Queued frames belong to their connection: when it drops, libuv cancels
 * the writes still queued and they are freed, and the frames still
 * corked are freed with it, never sent on the next connection (a frame is
 * lost, never late by a reconnect).
 *
 * A peer not connected here (IDLE) that dials this node is up again: it
 * is dialed back at once instead of at the next retry tick, so this node's
 * frames reach a restarted peer within a round trip of its start.
 *
 * Context: loop thread only. */
#ifndef CAIRN_NODEWATCH_H
#define CAIRN_NODEWATCH_H

#include "cluster/transport.h"

#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

#define NWATCH_RETRY_MS 1000 /* a peer not connected is dialed again after this */
#define NWATCH_FRAME_HEADER 8
#define NWATCH_FRAME_MAX (1u << 20) /* payload bytes; a longer frame is malformed */
#define NWATCH_SENDQ_MAX (1u << 20) /* bytes queued on a connection before sends are refused */
#define NWATCH_STUCK_MS 500  /* writes pending this long with none completing... */
#define NWATCH_STUCK_LOOKS 2 /* ...seen by more than this many nwatch_queued_max calls */
#define NWATCH_CORK_FLUSH (256u << 10) /* corked bytes to a peer written at once, not at the phase's end */

#define NWATCH_STATE_TABLE(X)                                                                      \
  X(NWATCH_IDLE, "idle")             /* not connected; dialed at the next retry */                 \
  X(NWATCH_DIALING, "dialing")       /* dialing, or waiting for the accept byte */                 \
  X(NWATCH_UP, "up")                 /* connected: the process is there */                         \
  X(NWATCH_CONFIRMING, "confirming") /* it dropped: dialing again (and the byte) to tell */

enum nwatch_state {
#define NWATCH_STATE_ENUM(name, text) name,
  NWATCH_STATE_TABLE(NWATCH_STATE_ENUM)
#undef NWATCH_STATE_ENUM
};

struct nodewatch;

/* A peer node was seen gone. Called from a libuv callback of nw, never
 * from inside an nwatch_* call. */
typedef void (*nwatch_gone_cb)(struct nodewatch *nw, uint64_t node_id, void *data);
typedef void (*nwatch_close_cb)(struct nodewatch *nw);
/* A whole frame from node sender_id. Ownership: payload is borrowed, valid
 * until the callback returns. Called from a libuv read callback; it may
 * call nwatch_send but not nwatch_close. */
typedef void (*nwatch_frame_cb)(struct nodewatch *nw, uint64_t sender_id, const uint8_t *payload,
                                size_t len, void *data);

/* A whole frame whose payload starts with the mux tag, from node
 * sender_id. Same ownership and context as nwatch_frame_cb. Returns 0, or
 * a negative code when the payload is malformed: its connection is then
 * closed with a log line. */
typedef int (*nwatch_mux_cb)(struct nodewatch *nw, uint64_t sender_id, const uint8_t *payload,
                             size_t len, void *data);

struct nwatch_peer;
struct nwatch_inbound;

struct nodewatch {
  uv_loop_t *loop;
  struct transport *tr;
  uint64_t self_id;
  char self_address[TRANSPORT_ADDRESS_MAX + 1];
  uv_timer_t timer;
  uv_prepare_t flush_prepare; /* write the corked frames before the loop polls ... */
  uv_check_t flush_check;     /* ... and after the I/O callbacks that sent them */
  bool flush_armed;           /* both started: some peer has frames corked */
  struct nwatch_peer *peers;      /* singly linked */
  struct nwatch_inbound *inbound; /* peers watching this node; doubly linked */
  nwatch_gone_cb gone_cb;
  void *data;
  bool closing;
  unsigned open; /* the timer, the flush handles, dials, streams: nw is closed when 0 */
  nwatch_close_cb close_cb;
  uint64_t gone;            /* nodes reported gone, for metrics */
  uint64_t blips;           /* connections dropped while the node still answered */
  nwatch_frame_cb frame_cb; /* NULL: frames are dropped */
  void *frame_data;
  nwatch_mux_cb mux_cb; /* NULL: tagged frames go to frame_cb like others */
  void *mux_data;
  uint8_t mux_tag;
  size_t mux_frame_max; /* payload limit of a tagged frame while mux_cb is set */
  uint64_t frames_sent, frames_received, frames_refused; /* refused: not UP or queue full */
  uint64_t frames_bad; /* malformed frames (their connection closed) */
};

/* Initializes nw (caller allocates) and routes the transport's watch
 * streams to it (transport_set_watch). Ownership: borrows tr (open until
 * nwatch_close's callback) and copies self_address. cb fires once per
 * report. Returns 0 or CAIRN_EINVAL (address too long). */
__attribute__((warn_unused_result)) int nwatch_init(struct nodewatch *nw, uv_loop_t *loop,
                                                    struct transport *tr, uint64_t self_id,
                                                    const char *self_address, nwatch_gone_cb cb,
                                                    void *data);

/* Watches exactly these peers from now on (ids[i] at addresses[i], "host:port"
 * cluster addresses): new ones are dialed at once, changed addresses
 * re-dialed, those no longer named dropped. self_id is skipped. Ownership:
 * borrows the arrays (copied). Returns 0 or CAIRN_ENOMEM (the peers
 * already watched stay). */
__attribute__((warn_unused_result)) int nwatch_set_peers(struct nodewatch *nw, const uint64_t *ids,
                                                         const char *const *addresses, size_t n);

/* Routes received frames to cb (NULL: drop them, the default). */
void nwatch_set_frame_cb(struct nodewatch *nw, nwatch_frame_cb cb, void *data);

/* Routes frames whose payload's first byte is tag to cb (NULL: stop), and
 * lets such frames carry up to frame_max payload bytes (NWATCH_FRAME_MAX
 * if smaller; at most UINT32_MAX) in both directions while cb is set:
 * nwatch_send takes them and the reader accepts them. Every other frame
 * keeps NWATCH_FRAME_MAX. */
void nwatch_set_mux_cb(struct nodewatch *nw, uint8_t tag, size_t frame_max, nwatch_mux_cb cb,
                       void *data);

/* The payload limit of a frame whose first payload byte is first: the
 * mux's limit for its tag while a mux callback is set, NWATCH_FRAME_MAX
 * otherwise. */
size_t nwatch_frame_limit(const struct nodewatch *nw, uint8_t first);

/* nwatch_send with queue_max in place of NWATCH_SENDQ_MAX. */
__attribute__((warn_unused_result)) int nwatch_send_bounded(struct nodewatch *nw, uint64_t node_id,
                                                            const uint8_t *payload, size_t len,
                                                            size_t queue_max);

/* Queues one frame with payload[0..len) to node_id on this node's
 * connection to it (corked: written before the loop next polls).
 * Ownership: borrows payload (copied). Returns 0, or
 * CAIRN_EUNREACHABLE (not UP), CAIRN_EQUEUE_FULL (NWATCH_SENDQ_MAX bytes
 * already queued or corked: the peer does not read), CAIRN_EINVAL (len 0 or above
 * nwatch_frame_limit(nw, payload[0])) or CAIRN_ENOMEM. A frame queued may still be lost
 * with its connection; nothing is retried. */
__attribute__((warn_unused_result)) int nwatch_send(struct nodewatch *nw, uint64_t node_id,
                                                    const uint8_t *payload, size_t len);

/* The nodes watching this one now (their connections to it), each once:
 * ids[i] at addresses[i] (their cluster addresses, borrowed: valid until
 * the loop runs again), at most cap. Returns how many. A node that knows
 * no peers yet (a refused metadata replica, metaheal.h) learns them here. */
size_t nwatch_watchers(const struct nodewatch *nw, uint64_t *ids, const char **addresses,
                       size_t cap);

/* The most bytes queued (written and not yet taken by the kernel, plus
 * corked) on any of this node's connections to its peers that is draining:
 * what a frame sent now waits behind (net/admit.h). A connection on which
 * no write has completed while writes were pending, over more than
 * NWATCH_STUCK_LOOKS calls spanning NWATCH_STUCK_MS, is left out: its peer
 * is not reading (SIGSTOPped, cut off), and holding the clients of this
 * node for it would stop what a majority can still do. Call it once per
 * loop turn, after the poll (it keeps what it saw per peer). */
size_t nwatch_queued_max(struct nodewatch *nw);

/* The state of the watch on node_id; NWATCH_IDLE if not watched. */
enum nwatch_state nwatch_peer_state(const struct nodewatch *nw, uint64_t node_id);

/* Closes every connection and dial, then calls cb. Call it before
 * transport_close. Callback: fires exactly once. */
void nwatch_close(struct nodewatch *nw, nwatch_close_cb cb);

/* The state's name, for logs. Static string. */
const char *nwatch_state_name(enum nwatch_state s);

#endif
