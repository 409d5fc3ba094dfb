/* transport.h - the node's one cluster port, shared by every Raft group on
 * the node. Each group gets a struct raft_uv_transport (canonical/raft's
 * transport interface) backed by this shared object:
 *
 *   connect(): dial the peer node's cluster port, send a preamble naming
 *              the group, the sender id and the sender's address, then hand
 *              the stream to Raft;
 *   listener:  read exactly one preamble from each accepted connection (with
 *              a deadline and a size limit), then hand the stream to the
 *              accept callback of the group it names.
 *
 * A wrong magic, version or checksum, an unknown group, or a peer that says
 * nothing before the deadline: the connection is closed with a log line;
 * no other group notices. See docs/replication.md for the limits (one
 * connection per group per peer pair).
 *
 * With a cluster key (transport_set_key, --cluster-secret-file) the
 * preamble travels inside the authenticated handshake of chs.h: the
 * listener sends a challenge first, the dialer answers with its preamble
 * and an HMAC, the listener proves the key back; only then does the stream
 * go to Raft or the fetch server (on both ends). A peer without the key, a
 * wrong MAC, or no handshake before the deadline: closed with a log line
 * (auth failures at most one line a second per end, with a count of the
 * ones not logged). Every node of a cluster must have the same key, or
 * none: the two modes do not talk to each other. docs/security.md.
 *
 * Preamble, little-endian, version TRANSPORT_VERSION = 1:
 *    0  u32 magic "CRN1" (TRANSPORT_MAGIC)
 *    4  u16 version
 *    6  u16 kind: TRANSPORT_KIND_RAFT (the stream goes to Raft),
 *           TRANSPORT_KIND_FETCH (a replica catching up reads the log) or
 *           TRANSPORT_KIND_WATCH (a node watching this node's liveness,
 *           nodewatch.h; group id 0)
 *    8  u64 group id
 *   16  u64 sender (Raft server) id
 *   24  u16 address length n (1..TRANSPORT_ADDRESS_MAX)
 *   26  n   sender's cluster address, "host:port", not NUL-terminated
 * 26+n  u32 CRC-32C of bytes [0, 26+n)
 *
 * Context: everything here runs on the loop thread. */
#ifndef CAIRN_TRANSPORT_H
#define CAIRN_TRANSPORT_H

#include <raft.h>
#include <raft/uv.h>
#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

#define TRANSPORT_MAGIC 0x314e5243u /* "CRN1" */
#define TRANSPORT_VERSION 1
#define TRANSPORT_ADDRESS_MAX 255
#define TRANSPORT_PREAMBLE_FIXED 26
#define TRANSPORT_KIND_RAFT 1
#define TRANSPORT_KIND_FETCH 2
#define TRANSPORT_KIND_WATCH 3
#define TRANSPORT_PREAMBLE_MAX (TRANSPORT_PREAMBLE_FIXED + TRANSPORT_ADDRESS_MAX + 4)
#define TRANSPORT_DEFAULT_PREAMBLE_TIMEOUT_MS 5000
#define TRANSPORT_USER_TIMEOUT_MS 2000 /* outbound: unacknowledged this long aborts (transport.c) */
#define TRANSPORT_MAX_PENDING 1024 /* inbound connections still in their preamble */
#define TRANSPORT_ERRMSG_SIZE 256

struct transport_group;
struct transport_inbound;

/* Handles an inbound stream of a kind that belongs to no group
 * (TRANSPORT_KIND_WATCH): takes the stream (a malloc'd uv_tcp_t: uv_close
 * it, then free it). address (the sender's cluster address from the
 * preamble) is borrowed, valid during the call only. */
typedef void (*transport_watch_cb)(void *data, uint64_t sender_id, const char *address,
                                   uv_stream_t *stream);

struct transport;
typedef void (*transport_close_cb)(struct transport *tr);

struct transport {
  uv_loop_t *loop;
  uv_tcp_t listener;
  uv_timer_t sweeper; /* closes inbound connections past their deadline */
  char *bind_address;
  unsigned preamble_timeout_ms;
  struct transport_route **routes; /* sorted by group id */
  size_t nroutes;
  size_t cap;
  struct transport_inbound *pending; /* doubly linked */
  size_t npending;
  int handles_open;
  bool closing;
  transport_close_cb close_cb;
  const uint8_t *key; /* cluster key (borrowed), NULL: no handshake */
  size_t key_len;
  struct transport_connect *handshaking; /* outbound, awaiting the listener's proof */
  transport_watch_cb watch_cb;           /* TRANSPORT_KIND_WATCH streams; NULL: refused */
  void *watch_data;
  uint64_t auth_log_ms;                  /* when an auth failure was last logged */
  uint64_t auth_unlogged;                /* auth failures since, not logged */
  /* Counters for tests and metrics. */
  uint64_t accepted;
  uint64_t rejected;
  uint64_t auth_failed; /* handshakes refused (either end) */
  char errmsg[TRANSPORT_ERRMSG_SIZE];
};

/* Initializes tr and starts listening on bind_address ("host:port", IPv4 or
 * IPv6 literal). Caller allocates tr. Returns 0, or a negative code with
 * tr->errmsg set (nothing to close then). */
__attribute__((warn_unused_result)) int transport_init(struct transport *tr, uv_loop_t *loop,
                                                       const char *bind_address);

/* Requires the authenticated handshake (chs.h) with key on every
 * connection from now on, both ways. Call it right after transport_init,
 * before any group listens. Ownership: borrows key, which must stay valid
 * until transport_close's callback. */
void transport_set_key(struct transport *tr, const uint8_t *key, size_t key_len);

/* Routes inbound TRANSPORT_KIND_WATCH streams to cb (NULL: refuse them,
 * the default). */
void transport_set_watch(struct transport *tr, transport_watch_cb cb, void *data);

/* The port actually bound (useful with port 0). */
int transport_port(const struct transport *tr);

/* Stops listening, closes inbound connections still in their preamble and
 * calls cb once every handle is closed. Every group transport must have been
 * closed (by Raft) before. Callback: fires exactly once. */
void transport_close(struct transport *tr, transport_close_cb cb);

/* Sets up rt, the transport Raft will use for group group_id; owned by the
 * caller, which hands it to raft_uv_init(). Raft calls its init, listen,
 * connect and close. Returns 0 or CAIRN_ENOMEM. */
__attribute__((warn_unused_result)) int transport_group_init(struct transport *tr,
                                                             struct raft_uv_transport *rt,
                                                             uint64_t group_id);

/* Frees what transport_group_init() allocated, after Raft closed rt. */
void transport_group_release(struct raft_uv_transport *rt);

/* Handles an inbound TRANSPORT_KIND_FETCH stream for a group: takes the
 * stream (a malloc'd uv_tcp_t: uv_close it, then free it). */
typedef void (*transport_fetch_cb)(void *data, uint64_t sender_id, uv_stream_t *stream);

/* Routes the group's fetch connections to cb (NULL: refuse them). Valid
 * once Raft listens on rt. */
void transport_group_set_fetch(struct raft_uv_transport *rt, transport_fetch_cb cb, void *data);

/* A group's entry in the routing of inbound connections: its fetches go
 * to fetch_cb (NULL: refused); Raft's connections to its raft_uv
 * transport (g: set by transport_group_init's listen; NULL for a group
 * whose Raft messages go over the multiplexer, which takes none). */
struct transport_route {
  uint64_t group_id;
  transport_fetch_cb fetch_cb;
  void *fetch_data;
  struct transport_group *g; /* private */
};

/* Routes group_id's fetch connections to cb, for a group without a
 * raft_uv transport (riow_mux.h); r is the caller's and stays in the
 * routing until transport_route_remove. Returns 0, CAIRN_EEXIST (the
 * group is routed already) or CAIRN_ENOMEM. Context: loop thread. */
__attribute__((warn_unused_result)) int transport_route_add(struct transport *tr,
                                                            struct transport_route *r,
                                                            uint64_t group_id,
                                                            transport_fetch_cb cb, void *data);

/* Takes r out of the routing (at once; no-op if it is not in it). */
void transport_route_remove(struct transport *tr, struct transport_route *r);

/* An outbound connection of any kind. */
struct transport_dial;
typedef void (*transport_dial_cb)(struct transport_dial *req, uv_stream_t *stream, int status);
struct transport_dial {
  void *data; /* for the caller */
  /* private */
  struct transport_connect *c;
  transport_dial_cb cb;
};

/* Dials peer_address and sends a preamble (kind, group, sender). The
 * callback fires exactly once if this returns 0: with status 0 and a
 * stream the caller owns (a malloc'd uv_tcp_t: uv_close it, then free it),
 * or a negative code and NULL (CAIRN_ESHUTDOWN after transport_dial_cancel).
 * Returns 0 or a negative code. */
__attribute__((warn_unused_result)) int transport_dial(struct transport *tr,
                                                       struct transport_dial *req, uint16_t kind,
                                                       uint64_t group_id, uint64_t sender_id,
                                                       const char *sender_address,
                                                       const char *peer_address,
                                                       transport_dial_cb cb);

/* Makes a running dial end as soon as it can, with CAIRN_ESHUTDOWN. */
void transport_dial_cancel(struct transport_dial *req);

/* Encodes a preamble into buf (TRANSPORT_PREAMBLE_MAX bytes). Returns its
 * length, or CAIRN_EINVAL if the address is empty or too long. */
int transport_preamble_encode(uint8_t *buf, uint16_t kind, uint64_t group_id, uint64_t sender_id,
                              const char *address);

/* Parses a preamble from buf[0..len). Returns the preamble's length when
 * whole (address copied NUL-terminated into address, which has
 * TRANSPORT_ADDRESS_MAX + 1 bytes), 0 if more bytes are needed, or
 * CAIRN_EBADMAGIC / CAIRN_EUNSUPPORTED (version or kind) / CAIRN_EBADLEN /
 * CAIRN_EBADCRC. */
int transport_preamble_decode(const uint8_t *buf, size_t len, uint16_t *kind, uint64_t *group_id,
                              uint64_t *sender_id, char *address);

#endif
