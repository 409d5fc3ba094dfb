/* listener.c - the client port: accept up to a limit, track conns, close all. */
#include "net/listener.h"

#include "common/err.h"
#include "common/log.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LISTENER_LOG "listener"

static void listener_finish_check(struct listener *l)
{
  if (l->closing && l->tcp_closed && l->nconns == 0 && l->close_cb != NULL) {
    listener_close_cb cb = l->close_cb;
    l->close_cb = NULL;
    cb(l);
  }
}

static void listener_on_conn_closed(struct conn *c)
{
  struct listener *l = c->owner;
  if (c->prev != NULL) {
    c->prev->next = c->next;
  } else {
    l->conns = c->next;
  }
  if (c->next != NULL) {
    c->next->prev = c->prev;
  }
  l->nconns--;
  if (c->frame_timed_out) {
    l->frames_timed_out++;
  }
  listener_finish_check(l);
}

static void listener_count_reject(struct listener *l, const char *why);

static void listener_on_reject_closed(uv_handle_t *h)
{
  free(h);
}

/* Over the limit: take the connection off the backlog and close it. */
static void listener_reject(struct listener *l)
{
  uv_tcp_t *t = malloc(sizeof *t);
  if (t == NULL || uv_tcp_init(l->loop, t) != 0) {
    free(t);
    return;
  }
  int rv = uv_accept((uv_stream_t *)l->tcp, (uv_stream_t *)t);
  uv_close((uv_handle_t *)t, listener_on_reject_closed);
  if (rv == 0) {
    char why[96];
    snprintf(why, sizeof why, "%u client connections, the limit", l->nconns);
    listener_count_reject(l, why);
  }
}

/* Counts a refused connection; logs at most once a second, with how many
 * went unlogged since. */
static void listener_count_reject(struct listener *l, const char *why)
{
  l->rejected++;
  uint64_t now = uv_now(l->loop);
  if (l->reject_logged_ms != 0 && now - l->reject_logged_ms < 1000) {
    l->reject_unlogged++;
    return;
  }
  log_warn(LISTENER_LOG, "port %d: %s: closing a new connection (%" PRIu64
           " more refused since the last such line)",
           l->port, why, l->reject_unlogged);
  l->reject_logged_ms = now;
  l->reject_unlogged = 0;
}

/* The length of the host part of a conn's peer name ("host:port"). */
static size_t listener_host_len(const char *peer)
{
  const char *colon = strrchr(peer, ':');
  return colon != NULL ? (size_t)(colon - peer) : strlen(peer);
}

/* The live conns from c's address (the host part of its peer name). */
static unsigned listener_conns_from(const struct listener *l, const struct conn *c)
{
  size_t hl = listener_host_len(c->peer);
  unsigned n = 0;
  for (const struct conn *o = l->conns; o != NULL; o = o->next) {
    if (strncmp(o->peer, c->peer, hl) == 0 && (o->peer[hl] == ':' || o->peer[hl] == '\0')) {
      n++;
    }
  }
  return n;
}

static void listener_on_connection(uv_stream_t *server, int status)
{
  struct listener *l = server->data;
  if (status != 0) {
    log_warn(LISTENER_LOG, "port %d: accept: %s", l->port, uv_strerror(status));
    return;
  }
  if (l->closing) {
    return;
  }
  if (l->nconns >= l->cfg.max_conns) {
    listener_reject(l);
    return;
  }
  struct conn *c;
  int rv = conn_new(l->loop, server, &l->cfg.limits, l->cfg.dispatch, l->cfg.data,
                    listener_on_conn_closed, &c);
  if (rv != 0) {
    log_warn(LISTENER_LOG, "port %d: accepting a connection: %s", l->port, cairn_strerror(rv));
    return;
  }
  c->owner = l;
  c->answered = l->cfg.answered;
  c->prev = NULL;
  c->next = l->conns;
  if (l->conns != NULL) {
    l->conns->prev = c;
  }
  l->conns = c;
  l->nconns++;
  l->accepted++;
  if (listener_conns_from(l, c) > l->cfg.max_conns_per_ip) {
    char why[128];
    snprintf(why, sizeof why, "%u client connections from %.*s, the limit per address",
             l->cfg.max_conns_per_ip, (int)listener_host_len(c->peer), c->peer);
    l->rejected_per_ip++;
    listener_count_reject(l, why);
    conn_close(c); /* unlinked by its closed callback */
    return;
  }
  if (l->cfg.tls != NULL && conn_start_tls(c, l->cfg.tls) != 0) {
    log_warn(LISTENER_LOG, "port %d: %s", l->port, c->errmsg);
    conn_close(c);
  }
}

/* Splits "host:port" or "[v6]:port" into a socket address. */
static int listener_parse_address(const char *address, struct sockaddr_storage *ss)
{
  const char *colon = strrchr(address, ':');
  if (colon == NULL || colon == address || colon[1] == '\0') {
    return CAIRN_EINVAL;
  }
  char host[64];
  const char *h = address;
  size_t hlen = (size_t)(colon - address);
  if (h[0] == '[' && hlen >= 2 && h[hlen - 1] == ']') {
    h++;
    hlen -= 2;
  }
  if (hlen >= sizeof host) {
    return CAIRN_EINVAL;
  }
  memcpy(host, h, hlen);
  host[hlen] = '\0';
  char *end;
  long port = strtol(colon + 1, &end, 10);
  if (*end != '\0' || port < 0 || port > 65535) {
    return CAIRN_EINVAL;
  }
  if (uv_ip4_addr(host, (int)port, (struct sockaddr_in *)ss) == 0 ||
      uv_ip6_addr(host, (int)port, (struct sockaddr_in6 *)ss) == 0) {
    return 0;
  }
  return CAIRN_EINVAL;
}

static void listener_on_handle_freed(uv_handle_t *h)
{
  free(h);
}

int listener_init(struct listener *l, uv_loop_t *loop, const struct listener_config *cfg)
{
  memset(l, 0, sizeof *l);
  l->loop = loop;
  l->cfg = *cfg;
  l->cfg.bind_address = NULL;
  if (l->cfg.max_conns_per_ip == 0) {
    l->cfg.max_conns_per_ip = LISTENER_DEFAULT_MAX_CONNS_PER_IP;
  }
  if (l->cfg.max_conns == 0) {
    l->cfg.max_conns = LISTENER_DEFAULT_MAX_CONNS;
  }
  struct sockaddr_storage ss;
  int rv = listener_parse_address(cfg->bind_address, &ss);
  if (rv != 0) {
    snprintf(l->errmsg, sizeof l->errmsg, "client address '%s': not host:port", cfg->bind_address);
    return rv;
  }
  /* The handle is on the heap so that a failed init closes it without
   * keeping l: the caller may free l as soon as this returns. */
  l->tcp = malloc(sizeof *l->tcp);
  if (l->tcp == NULL) {
    return CAIRN_ENOMEM;
  }
  rv = uv_tcp_init(loop, l->tcp);
  if (rv != 0) {
    free(l->tcp);
    snprintf(l->errmsg, sizeof l->errmsg, "client port: %s", uv_strerror(rv));
    return rv;
  }
  l->tcp->data = l;
  rv = uv_tcp_bind(l->tcp, (struct sockaddr *)&ss, 0);
  if (rv == 0) {
    rv = uv_listen((uv_stream_t *)l->tcp, LISTENER_BACKLOG, listener_on_connection);
  }
  if (rv != 0) {
    snprintf(l->errmsg, sizeof l->errmsg, "client port %s: %s", cfg->bind_address, uv_strerror(rv));
    uv_close((uv_handle_t *)l->tcp, listener_on_handle_freed);
    l->tcp = NULL;
    return rv;
  }
  struct sockaddr_storage bound;
  int len = sizeof bound;
  if (uv_tcp_getsockname(l->tcp, (struct sockaddr *)&bound, &len) == 0) {
    l->port = ntohs(bound.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&bound)->sin6_port
                                                : ((struct sockaddr_in *)&bound)->sin_port);
  }
  log_info(LISTENER_LOG, "client port listening on %s (port %d, at most %u connections)",
           cfg->bind_address, l->port, l->cfg.max_conns);
  return 0;
}

static void listener_on_closed(uv_handle_t *h)
{
  struct listener *l = h->data;
  l->tcp_closed = true;
  free(h);
  listener_finish_check(l);
}

void listener_close(struct listener *l, listener_close_cb cb)
{
  l->closing = true;
  l->close_cb = cb;
  uv_close((uv_handle_t *)l->tcp, listener_on_closed);
  l->tcp = NULL;
  struct conn *c = l->conns;
  while (c != NULL) {
    struct conn *next = c->next;
    conn_close(c);
    c = next;
  }
}
