/* fetch_serve.h - answers a group's catch-up fetches (fetch_proto.h) from
 * its store: each request gets whole batches as stored, read with one pread
 * into a buffer; a table request gets the replica's producer table from
 * its owner (fetch_server_set_table). A replica serves at most
 * FETCH_SERVE_MAX_CONNS at once. Context: loop thread. */
#ifndef CAIRN_FETCH_SERVE_H
#define CAIRN_FETCH_SERVE_H

#include "storage/store.h"

#include <stdint.h>
#include <uv.h>

#define FETCH_SERVE_MAX_CONNS 8

struct fetch_conn;
struct fetch_server;
typedef void (*fetch_server_close_cb)(struct fetch_server *srv);
/* The replica's producer table, encoded (producer_state_encode) as of its
 * log's end: *out is malloc'd and the caller's. Returns 0 or a negative
 * code (CAIRN_EREPLICA_NOT_AVAILABLE: no table covering the log now),
 * which the answer carries. Called on the loop thread, synchronously. */
typedef int (*fetch_table_fn)(void *data, uint8_t **out, size_t *len);

struct fetch_server {
  uv_loop_t *loop;
  struct store *store; /* borrowed; must outlive the server */
  uint64_t group_id;
  struct fetch_conn *conns;
  unsigned nconns;
  bool closing;
  fetch_server_close_cb close_cb;
  uint64_t served_bytes;
  fetch_table_fn table; /* NULL: table requests are answered CAIRN_EUNSUPPORTED */
  void *table_data;
};

void fetch_server_init(struct fetch_server *srv, uv_loop_t *loop, struct store *store,
                       uint64_t group_id);

/* Where table requests are answered from; table(table_data, ...) is
 * called for each. */
void fetch_server_set_table(struct fetch_server *srv, fetch_table_fn table, void *table_data);

/* A transport_fetch_cb: takes the stream and serves it. data is the
 * fetch_server. */
void fetch_server_accept(void *data, uint64_t sender_id, uv_stream_t *stream);

/* Closes every connection, then calls cb (exactly once, asynchronously when
 * connections were open, at once otherwise). */
void fetch_server_close(struct fetch_server *srv, fetch_server_close_cb cb);

#endif
