/* peer.h - an outbound connection to another node's client port, for the
 * node's own requests: forwarding an admin request to the controller
 * leader, registering, heartbeating. Requests are pipelined; answers are
 * matched by correlation id.
 *
 *   PEER_IDLE --peer_call--> PEER_RESOLVING -> PEER_CONNECTING -> PEER_READY
 *       ^                                                            |
 *       +------- a read/write/connect error, or a call to another ---+
 *                address (every call in flight fails, handles close)
 *   peer_close: any state -> PEER_CLOSING -> cb -> PEER_CLOSED
 *
 * Memory: the read buffer is bounded by max_frame_bytes + 8; calls in
 * flight by PEER_MAX_CALLS.
 *
 * TLS (peer_set_tls, when the nodes' client ports speak TLS): CONNECTING
 * lasts until the handshake is done (src/net/tls.h over memory BIOs);
 * calls are encrypted when written, answers decrypted into the buffer.
 *
 * Context: loop thread only. */
#ifndef CAIRN_PEER_H
#define CAIRN_PEER_H

#include "client.pb-c.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#define PEER_ADDRESS_MAX 263
#define PEER_MAX_CALLS 1024
#define PEER_SWEEP_MS 100

enum peer_state {
  PEER_IDLE,
  PEER_RESOLVING,
  PEER_CONNECTING,
  PEER_AUTHING, /* proving the cluster key (peer_set_node_auth) before any call */
  PEER_READY,
  PEER_RESETTING, /* handles closing after an error; back to IDLE */
  PEER_CLOSING,
  PEER_CLOSED
};

struct peer;
struct peer_call;
struct peer_wbuf;
struct tls_ctx;
struct tls_session;

/* status 0 with the answer (resp and payload borrowed, valid during the
 * callback only), or a negative code: -ETIMEDOUT, CAIRN_ESHUTDOWN, a
 * connection error (negative errno / libuv code), CAIRN_EBADFRAME. */
typedef void (*peer_call_cb)(struct peer_call *call, int status,
                             const Cairn__Client__Envelope *resp, const uint8_t *payload,
                             size_t payload_len);
typedef void (*peer_close_cb)(struct peer *p);

/* One request; caller allocates it and keeps it until the callback. */
struct peer_call {
  void *data; /* for the caller */
  /* private */
  struct peer *p;
  uint64_t corr;
  uint64_t deadline;
  struct peer_wbuf *wb; /* the encoded request until it is handed to a write */
  peer_call_cb cb;
  struct peer_call *prev, *next;
};

struct peer {
  uv_loop_t *loop;
  enum peer_state state;
  char address[PEER_ADDRESS_MAX + 1];
  uint32_t max_frame_bytes;
  uv_tcp_t tcp;
  bool tcp_open;
  uv_connect_t connect_req;
  uv_getaddrinfo_t gai;
  uv_timer_t sweep;
  uint64_t next_corr;
  struct peer_call *calls; /* in flight, doubly linked, oldest first */
  struct peer_call *calls_tail;
  size_t ncalls;
  uint8_t *rbuf;
  size_t rlen, rcap;
  int handles_closing;
  peer_close_cb close_cb;
  uint64_t failures; /* connections that ended in an error */
  struct tls_ctx *tls_ctx;         /* borrowed; NULL: plain TCP */
  struct tls_session *tls;         /* the connection's session */
  uint8_t *tls_in;                 /* ciphertext read buffer */
  char host[PEER_ADDRESS_MAX + 1]; /* dialed: the node's certificate must name it */
  const uint8_t *node_key;         /* borrowed cluster key; NULL: no node authentication */
  size_t node_key_len;
  uint64_t node_id;
  uint64_t auth_corr; /* the Authenticate in flight */
};

/* Makes every later connection authenticate as node node_id with the
 * cluster key (Authenticate, mechanism CAIRN-NODE: "node=ID", then
 * HMAC-SHA256(key, "cairn node auth v1" || the node's nonce || "node=ID"))
 * before its first call, for nodes that require authentication. Borrows
 * key until peer_close's callback. */
void peer_set_node_auth(struct peer *p, uint64_t node_id, const uint8_t *key, size_t key_len);

/* Makes every later connection speak TLS with ctx (a client context:
 * tls_client_ctx_new). Ownership: borrows ctx until peer_close's callback.
 * Call before the first peer_call. */
void peer_set_tls(struct peer *p, struct tls_ctx *ctx);

/* Initializes an idle peer. Returns 0 or a negative code. */
__attribute__((warn_unused_result)) int peer_init(struct peer *p, uv_loop_t *loop,
                                                  uint32_t max_frame_bytes);

/* Sends env (its correlation id is set here) with payload to address
 * ("host:port"), connecting first if needed; a call to another address
 * than the current connection's drops that connection (its calls fail).
 * Copies env's encoding and the payload. Callback: fires exactly once if
 * this returns 0, within timeout_ms. Returns 0, CAIRN_ESHUTDOWN,
 * -EBUSY (PEER_MAX_CALLS in flight) or CAIRN_ENOMEM. */
__attribute__((warn_unused_result)) int peer_call(struct peer *p, const char *address,
                                                  struct peer_call *call,
                                                  Cairn__Client__Envelope *env,
                                                  const uint8_t *payload, size_t payload_len,
                                                  unsigned timeout_ms, peer_call_cb cb);

/* Fails every call (CAIRN_ESHUTDOWN), closes the connection, then cb.
 * Callback: fires exactly once. */
void peer_close(struct peer *p, peer_close_cb cb);

#endif
