/* listener.h - the node's client port: accepts connections up to a limit,
 * keeps the list of live conns, and closes them all at shutdown, letting
 * in-flight requests finish within the conns' close grace.
 *
 * Over max_conns, or over max_conns_per_ip from the new connection's
 * address, a new connection is accepted and closed at once, with a log
 * line at most once a second (so the peer sees a clean close rather than a
 * full backlog, and a flood does not flood the log). The conns share the
 * request-bytes budget given in limits.budget (net/rbudget.h).
 *
 * Context: everything here runs on the loop thread. */
#ifndef CAIRN_LISTENER_H
#define CAIRN_LISTENER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "net/conn.h"

#define LISTENER_DEFAULT_MAX_CONNS 1024
#define LISTENER_DEFAULT_MAX_CONNS_PER_IP 512
#define LISTENER_BACKLOG 511
#define LISTENER_ERRMSG_SIZE 256

struct listener_config {
  const char *bind_address; /* "host:port" or "[v6]:port"; port 0 picks one */
  unsigned max_conns;       /* live conns; 0 means LISTENER_DEFAULT_MAX_CONNS */
  unsigned max_conns_per_ip; /* live conns from one address; 0 means
                              * LISTENER_DEFAULT_MAX_CONNS_PER_IP */
  struct conn_limits limits;
  conn_dispatch_cb dispatch; /* every conn's requests go here, with data */
  conn_answered_cb answered; /* may be NULL: every conn's answers, with data */
  void *data;
  struct tls_ctx *tls; /* NULL: plain TCP; else every conn speaks TLS with it
                          (borrowed: valid until the close callback) */
};

struct listener;
typedef void (*listener_close_cb)(struct listener *l);

struct listener {
  uv_loop_t *loop;
  uv_tcp_t *tcp;              /* owned; freed by its close callback */
  struct listener_config cfg; /* bind_address not kept */
  int port;                   /* the bound port */
  struct conn *conns;         /* live conns, doubly linked through conn->prev/next */
  unsigned nconns;
  bool closing;
  bool tcp_closed;
  listener_close_cb close_cb;
  /* Counters for tests and metrics. */
  uint64_t accepted;
  uint64_t rejected;        /* over max_conns or max_conns_per_ip */
  uint64_t rejected_per_ip; /* of which over max_conns_per_ip */
  uint64_t frames_timed_out; /* conns closed for trickling a frame */
  uint64_t reject_logged_ms; /* loop time of the last rejection logged */
  uint64_t reject_unlogged;  /* rejections since */
  char errmsg[LISTENER_ERRMSG_SIZE];
};

/* Binds and listens. Caller allocates l; cfg is copied (bind_address only
 * read here). Returns 0, or a negative code with l->errmsg set (nothing to
 * close then). Context: loop thread. */
__attribute__((warn_unused_result)) int listener_init(struct listener *l, uv_loop_t *loop,
                                                      const struct listener_config *cfg);

/* Stops accepting and closes every conn cleanly (conn_close(): answers to
 * dispatched requests are still sent within the close grace, then the rest
 * are canceled). cb fires once when the port and every conn are closed;
 * then l may be freed. Call once. Context: loop thread. */
void listener_close(struct listener *l, listener_close_cb cb);

#endif
