/* admin.h - the node's admin HTTP port: Prometheus metrics, health and
 * readiness probes, JSON views of the cluster, and a status page
 * (docs/operations.md lists every endpoint and metric).
 *
 * HTTP is Debian's libmicrohttpd, run in its external-event-loop mode: its
 * epoll descriptor is watched by a uv_poll_t and its timeouts by a
 * uv_timer_t, so MHD_run() and every request handler run on the node's
 * loop thread and read the node's state directly, without locks. Each
 * answer is built whole in memory before it is queued, and libmicrohttpd
 * writes it with non-blocking sends, so a slow scraper costs memory, never
 * loop time: produce and fetch are not held up by it.
 *
 * Bounds: ADMIN_MAX_CONNS connections, ADMIN_CONN_MEMORY bytes per
 * connection for the request line and headers (larger requests get 431/413
 * from the library), idle connections closed after ADMIN_CONN_TIMEOUT_S,
 * request bodies never read (only GET and HEAD are served, and OPTIONS for
 * a cross-origin preflight; others get 405), answers at most
 * ADMIN_MAX_ANSWER bytes. Cross-origin reads are allowed only to the admin
 * addresses of the cluster's own nodes (admin_server.c), for the console
 * that sums every node's history and groups.
 *
 * Lifecycle: admin_start -> running -> admin_close -> cb (handles closed,
 * the daemon stopped, everything freed).
 *
 * Context: loop thread only. */
#ifndef CAIRN_ADMIN_H
#define CAIRN_ADMIN_H

#include "net/conn.h"

#include <stdint.h>

#define ADMIN_MAX_CONNS 64
#define ADMIN_CONN_MEMORY (32u * 1024)
#define ADMIN_CONN_TIMEOUT_S 30
#define ADMIN_MAX_ANSWER (64u << 20)

struct node;
struct admin;
typedef void (*admin_close_cb)(void *data);

/* Binds n->cfg.admin_listen (port 0: a free port, recorded with
 * config_set_bound_port) and starts serving on n->loop. Ownership: borrows
 * n until the close callback; returns owned *out (freed by admin_close).
 * Returns 0, or a negative code with n->errmsg set (nothing to close). */
__attribute__((warn_unused_result)) int admin_start(struct node *n, struct admin **out);

/* Closes every admin connection and the port, then cb(data). Callback:
 * fires exactly once, from the loop; a is freed before it. */
void admin_close(struct admin *a, admin_close_cb cb, void *data);

/* The client port's answered hook (conn_answered_cb; data is the node):
 * counts the request by api and error code, its bytes and latency, and
 * logs it when slower than the node's slow_request_ms, with its phases.
 * (metrics_request.c) */
void admin_on_answered(const struct conn_request *req, const Cairn__Client__Envelope *env,
                       uint64_t bytes_out, void *data);

#endif
