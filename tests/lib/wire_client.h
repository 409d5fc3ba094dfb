/* wire_client.h - a small blocking client of the client port, for tests and
 * tools: connect, send envelopes with payloads (several before reading is
 * fine: pipelining), read one frame back with a timeout. Built on
 * src/net/frame.c; no libuv. Not thread-safe: one thread per wc. */
#ifndef CAIRN_WIRE_CLIENT_H
#define CAIRN_WIRE_CLIENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#include "client.pb-c.h"

#define WC_ERRMSG_SIZE 256

struct wc {
  int fd;
  uint32_t max_frame_bytes; /* frames read back above this are refused */
  uint8_t *buf;             /* received, not yet returned: [start, end) */
  size_t cap, start, end;
  char errmsg[WC_ERRMSG_SIZE];
};

/* Connects to address ("host:port", IPv4 or IPv6 literal, or "localhost")
 * within timeout_ms. Caller allocates w. Returns 0, or a negative code with
 * w->errmsg set (nothing to close then). */
__attribute__((warn_unused_result)) int wc_connect(struct wc *w, const char *address,
                                                   int timeout_ms);

/* Sends one frame: env then the payload regions, blocking until all is
 * written to the socket. Returns 0 or a negative errno. Ownership: borrows
 * env and the payload. */
__attribute__((warn_unused_result)) int wc_send(struct wc *w, const Cairn__Client__Envelope *env,
                                                const struct iovec *payload, int npayload);

/* Sends raw bytes (for malformed-input tests). Returns 0 or a negative errno. */
__attribute__((warn_unused_result)) int wc_send_raw(struct wc *w, const void *p, size_t len);

/* Reads one frame within timeout_ms. Returns 0 with *env (owned: free with
 * cairn__client__envelope__free_unpacked(*env, NULL)) and, when payload is
 * not NULL, *payload (owned: free with free(); NULL when empty) and
 * *payload_len; or -ETIMEDOUT, CAIRN_ECLOSED (the peer closed first),
 * a frame error (CAIRN_ETOOLARGE, CAIRN_EBADFRAME, ...), or a negative
 * errno. */
__attribute__((warn_unused_result)) int wc_recv(struct wc *w, int timeout_ms,
                                                Cairn__Client__Envelope **env, uint8_t **payload,
                                                size_t *payload_len);

/* One request over a connection of its own: connects to address within
 * connect_ms, sends env and payload (len bytes, none when 0), reads the
 * answer within timeout_ms, closes. Returns 0 with *resp and, when
 * payload_out is not NULL, *payload_out and *payload_len_out owned by the
 * caller as for wc_recv; or a negative code from wc_connect, wc_send or
 * wc_recv. *sent (when not NULL) says whether the frame may have reached
 * the peer: true once a send was attempted, since a failed send may still
 * have delivered all of it. Blocks the calling thread. */
__attribute__((warn_unused_result)) int wc_call(const char *address, int connect_ms,
                                                const Cairn__Client__Envelope *env,
                                                const void *payload, size_t len, int timeout_ms,
                                                Cairn__Client__Envelope **resp,
                                                uint8_t **payload_out, size_t *payload_len_out,
                                                bool *sent);

/* Waits up to timeout_ms for the peer to close: returns 0 on EOF (any
 * bytes before it are discarded), -ETIMEDOUT, or a negative errno
 * (-ECONNRESET counts as closed too and is returned as is). */
__attribute__((warn_unused_result)) int wc_wait_closed(struct wc *w, int timeout_ms);

/* A Produce request of one batch to one partition, built in place: env
 * points into the struct (and borrows topic), so keep both where they are
 * until the request is sent. The batch itself travels as the frame's
 * payload (wc_send's payload, or cd_call's). */
struct wc_produce {
  uint32_t batch_len;
  Cairn__Client__ProducePartition part;
  Cairn__Client__ProducePartition *parts[1];
  Cairn__Client__ProduceRequest req;
  Cairn__Client__Envelope env;
};

/* Fills p: topic/partition, a batch of batch_len bytes, the node's wait
 * for the commit timeout_ms. Correlation id 0 (set p->env.correlation_id
 * to pipeline). */
void wc_produce_init(struct wc_produce *p, const char *topic, uint32_t partition,
                     size_t batch_len, uint32_t timeout_ms);

/* Closes the socket and frees the buffer. */
void wc_close(struct wc *w);

#endif
