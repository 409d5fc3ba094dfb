/* fetch_serve.c - serving catch-up fetches from a group's store. */
#include "cluster/fetch_serve.h"

#include "cluster/fetch_proto.h"
#include "common/err.h"
#include "common/fsutil.h"
#include "common/log.h"
#include "format/crc32c.h"

#include <stdlib.h>
#include <string.h>

struct fetch_conn {
  struct fetch_server *srv;
  uv_tcp_t *tcp; /* malloc'd, from the transport */
  uint8_t req[FETCH_REQUEST_SIZE];
  size_t got;
  uv_write_t write;
  uint8_t *out;
  struct fetch_conn *prev, *next;
};

void fetch_server_init(struct fetch_server *srv, uv_loop_t *loop, struct store *store,
                       uint64_t group_id)
{
  memset(srv, 0, sizeof *srv);
  srv->loop = loop;
  srv->store = store;
  srv->group_id = group_id;
}

static void fetch_conn_on_closed(uv_handle_t *h)
{
  struct fetch_conn *fc = h->data;
  struct fetch_server *srv = fc->srv;
  free(fc->out);
  free(fc->tcp);
  free(fc);
  if (--srv->nconns == 0 && srv->closing && srv->close_cb != NULL) {
    srv->close_cb(srv);
  }
}

static void fetch_conn_close(struct fetch_conn *fc)
{
  struct fetch_server *srv = fc->srv;
  if (fc->prev != NULL) {
    fc->prev->next = fc->next;
  } else {
    srv->conns = fc->next;
  }
  if (fc->next != NULL) {
    fc->next->prev = fc->prev;
  }
  fc->prev = fc->next = NULL;
  uv_close((uv_handle_t *)fc->tcp, fetch_conn_on_closed);
}

static void fetch_conn_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
  struct fetch_conn *fc = h->data;
  *buf = uv_buf_init((char *)fc->req + fc->got, (unsigned)(FETCH_REQUEST_SIZE - fc->got));
}

static void fetch_conn_on_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf);

static void fetch_conn_on_written(uv_write_t *w, int status)
{
  struct fetch_conn *fc = w->data;
  free(fc->out);
  fc->out = NULL;
  if (status != 0 || fc->srv->closing) {
    if (fc->prev != NULL || fc->srv->conns == fc) {
      fetch_conn_close(fc);
    }
    return;
  }
  fc->got = 0;
  uv_read_start((uv_stream_t *)fc->tcp, fetch_conn_alloc, fetch_conn_on_read);
}

void fetch_server_set_table(struct fetch_server *srv, fetch_table_fn table, void *table_data)
{
  srv->table = table;
  srv->table_data = table_data;
}

/* Builds the answer to a table request: header plus the encoded table, or
 * a header with the owner's refusal. */
static int fetch_conn_answer_table(struct fetch_conn *fc, size_t *len)
{
  struct fetch_server *srv = fc->srv;
  struct store_info info;
  store_info(srv->store, &info);
  struct fetch_response r = {.log_start = info.start_offset, .log_next = info.next_offset};
  uint8_t *table = NULL;
  size_t n = 0;
  r.status = srv->table != NULL ? srv->table(srv->table_data, &table, &n) : CAIRN_EUNSUPPORTED;
  if (r.status == 0 && n > FETCH_MAX_PAYLOAD) {
    r.status = CAIRN_ETOOLARGE;
  }
  if (r.status != 0) {
    free(table);
    table = NULL;
    n = 0;
  }
  fc->out = malloc(FETCH_RESPONSE_SIZE + n);
  if (fc->out == NULL) {
    free(table);
    return CAIRN_ENOMEM;
  }
  if (n > 0) {
    memcpy(fc->out + FETCH_RESPONSE_SIZE, table, n);
  }
  free(table);
  r.nbytes = (uint32_t)n;
  r.payload_crc = crc32c(fc->out + FETCH_RESPONSE_SIZE, n);
  fetch_response_encode(&r, fc->out);
  *len = FETCH_RESPONSE_SIZE + n;
  return 0;
}

/* Builds the answer to one request: header plus whole batches. */
static int fetch_conn_answer(struct fetch_conn *fc, const struct fetch_request *q, size_t *len)
{
  if (q->kind == FETCH_KIND_TABLE) {
    return fetch_conn_answer_table(fc, len);
  }
  struct store_info info;
  store_info(fc->srv->store, &info);
  struct fetch_response r = {.log_start = info.start_offset, .log_next = info.next_offset};
  struct store_region region = {.fd = -1};
  size_t max = q->max_bytes < FETCH_MAX_BYTES ? q->max_bytes : FETCH_MAX_BYTES;
  r.status = store_read(fc->srv->store, q->offset, max ? max : 1, &region);
  size_t n = r.status == 0 ? region.len : 0;
  fc->out = malloc(FETCH_RESPONSE_SIZE + n);
  if (fc->out == NULL) {
    store_region_release(&region);
    return CAIRN_ENOMEM;
  }
  int rv = 0;
  if (n > 0 && region.fd >= 0) {
    size_t got = 0;
    rv = fs_pread_full(region.fd, fc->out + FETCH_RESPONSE_SIZE, n, region.pos, &got);
    if (rv == 0 && got != n) {
      rv = CAIRN_ETRUNCATED;
    }
  } else if (n > 0) {
    memcpy(fc->out + FETCH_RESPONSE_SIZE, region.mem, n);
  }
  store_region_release(&region);
  if (rv != 0) {
    r.status = rv;
    n = 0;
  }
  r.nbytes = (uint32_t)n;
  r.payload_crc = crc32c(fc->out + FETCH_RESPONSE_SIZE, n);
  fetch_response_encode(&r, fc->out);
  fc->srv->served_bytes += n;
  *len = FETCH_RESPONSE_SIZE + n;
  return 0;
}

static void fetch_conn_on_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf)
{
  struct fetch_conn *fc = s->data;
  if (n == 0) {
    return;
  }
  if (n < 0) {
    fetch_conn_close(fc);
    return;
  }
  fc->got += (size_t)n;
  if (fc->got < FETCH_REQUEST_SIZE) {
    return;
  }
  uv_read_stop(s);
  struct fetch_request q;
  size_t len;
  if (fetch_request_decode(fc->req, &q) != 0 || fetch_conn_answer(fc, &q, &len) != 0) {
    log_warn("fetch", "group %llu: closing a catch-up connection: bad request or no memory",
             (unsigned long long)fc->srv->group_id);
    fetch_conn_close(fc);
    return;
  }
  uv_buf_t b = uv_buf_init((char *)fc->out, (unsigned)len);
  fc->write.data = fc;
  if (uv_write(&fc->write, s, &b, 1, fetch_conn_on_written) != 0) {
    fetch_conn_close(fc);
  }
}

static void fetch_free_tcp(uv_handle_t *h) { free(h); }

void fetch_server_accept(void *data, uint64_t sender_id, uv_stream_t *stream)
{
  struct fetch_server *srv = data;
  struct fetch_conn *fc = srv->closing || srv->nconns >= FETCH_SERVE_MAX_CONNS
                              ? NULL
                              : calloc(1, sizeof *fc);
  if (fc == NULL) {
    log_warn("fetch", "group %llu: refusing a catch-up connection from node %llu",
             (unsigned long long)srv->group_id, (unsigned long long)sender_id);
    uv_close((uv_handle_t *)stream, fetch_free_tcp);
    return;
  }
  fc->srv = srv;
  fc->tcp = (uv_tcp_t *)stream;
  fc->tcp->data = fc;
  fc->next = srv->conns;
  if (srv->conns != NULL) {
    srv->conns->prev = fc;
  }
  srv->conns = fc;
  srv->nconns++;
  uv_read_start(stream, fetch_conn_alloc, fetch_conn_on_read);
}

void fetch_server_close(struct fetch_server *srv, fetch_server_close_cb cb)
{
  srv->closing = true;
  srv->close_cb = cb;
  if (srv->nconns == 0) {
    if (cb != NULL) {
      cb(srv);
    }
    return;
  }
  while (srv->conns != NULL) {
    fetch_conn_close(srv->conns);
  }
}
