/* fetch_serve.h - answers a group's catch-up fetches (fetch_proto.h) from
 * its store: each request gets whole batches as stored, read with one pread
 * into a buffer. A replica serves at most FETCH_SERVE_MAX_CONNS at once.
 * Context: loop thread. */
#ifndef CAIRN_FETCH_SERVE_H
#define CAIRN_FETCH_SERVE_H

#include "storage/store.h"

#include <stdint.h>
#include <uv.h>

#define FETCH_SERVE_MAX_CONNS 8

struct fetch_conn;
struct fetch_server;
typedef void (*fetch_server_close_cb)(struct fetch_server *srv);

struct fetch_server {
  uv_loop_t *loop;
  struct store *store; /* borrowed; must outlive the server */
  uint64_t group_id;
  struct fetch_conn *conns;
  unsigned nconns;
  bool closing;
  fetch_server_close_cb close_cb;
  uint64_t served_bytes;
};

void fetch_server_init(struct fetch_server *srv, uv_loop_t *loop, struct store *store,
                       uint64_t group_id);

/* A transport_fetch_cb: takes the stream and serves it. data is the
 * fetch_server. */
void fetch_server_accept(void *data, uint64_t sender_id, uv_stream_t *stream);

/* Closes every connection, then calls cb (exactly once, asynchronously when
 * connections were open, at once otherwise). */
void fetch_server_close(struct fetch_server *srv, fetch_server_close_cb cb);

#endif
