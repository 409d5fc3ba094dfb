/* admin_server.c - the admin HTTP port: libmicrohttpd driven from the
 * node's libuv loop, and the routing of its few GET endpoints. See admin.h.
 *
 * Why libmicrohttpd: HTTP parsing (request lines, headers, chunking,
 * pipelining, malformed input) is the library's, well kept by Debian; this
 * file only routes. Its external-select mode (no thread of its own) gives
 * its epoll descriptor to a uv_poll_t and its timeout to a uv_timer_t, so
 * MHD_run() and the handlers below run on the loop thread. */
#include "admin/admin.h"

#include "admin/admin_actions.h"
#include "admin/admin_buf.h"
#include "admin/admin_history.h"
#include "admin/admin_json.h"
#include "admin/admin_page.h"
#include "admin/admin_state.h"
#include "admin/admin_views.h"
#include "admin/metrics_node.h"
#include "common/err.h"
#include "common/log.h"
#include "server/node.h"

#include <errno.h>
#include <microhttpd.h>
#include <netdb.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#define ADMIN_LOG "admin"
#define ADMIN_RUN_MAX_MS 1000 /* MHD_run at least this often */

struct admin {
  struct node *n;
  struct MHD_Daemon *d;
  uv_poll_t poll;               /* MHD's epoll descriptor */
  uv_timer_t timer;             /* MHD's next timeout */
  uv_timer_t sample;            /* replica-lag and term samples (metrics_node_sample) */
  uv_timer_t hist_timer;        /* traffic history samples (admin_history.h) */
  struct admin_history hist;    /* for the status page's charts */
  struct admin_actions actions; /* the console's actions in flight (admin_actions.h) */
  int handles_open;
  admin_close_cb close_cb;
  void *close_data;
};

/* ---- answers ---- */

/* Cross-origin reads for the status page of another node of the cluster
 * (it sums every node's history and lists every coordinator's groups):
 * allowed only to an Origin that is http://ADMIN-ADDRESS of a node in the
 * metadata, never to any site (a page elsewhere must not read the port
 * through an operator's browser). The token is still required. */
static void admin_cors(struct admin *a, struct MHD_Connection *mc, struct MHD_Response *r)
{
  const char *origin = MHD_lookup_connection_value(mc, MHD_HEADER_KIND, "Origin");
  if (origin == NULL || strncmp(origin, "http://", 7) != 0) {
    return;
  }
  const struct meta_state *st = ctl_state(&a->n->ctl);
  for (size_t i = 0; i < st->nnodes; i++) {
    if (st->nodes[i].admin_addr[0] != '\0' && strcmp(origin + 7, st->nodes[i].admin_addr) == 0) {
      MHD_add_response_header(r, "Access-Control-Allow-Origin", origin);
      MHD_add_response_header(r, "Access-Control-Allow-Headers", "Authorization");
      MHD_add_response_header(r, "Access-Control-Allow-Methods", "GET, HEAD, POST");
      MHD_add_response_header(r, "Vary", "Origin");
      return;
    }
  }
}

/* Queues body (owned: always consumed) with status and content type. */
static enum MHD_Result admin_answer(struct admin *a, struct MHD_Connection *mc, unsigned status,
                                    const char *type, char *body, size_t len)
{
  struct MHD_Response *r = MHD_create_response_from_buffer(len, body, MHD_RESPMEM_MUST_FREE);
  if (r == NULL) {
    free(body);
    return MHD_NO;
  }
  MHD_add_response_header(r, "Content-Type", type);
  MHD_add_response_header(r, "Cache-Control", "no-store");
  admin_cors(a, mc, r);
  if (status == MHD_HTTP_METHOD_NOT_ALLOWED) {
    MHD_add_response_header(r, "Allow", "GET, HEAD");
  }
  if (status == MHD_HTTP_UNAUTHORIZED) {
    MHD_add_response_header(r, "WWW-Authenticate", "Bearer realm=\"cairn\"");
  }
  enum MHD_Result rv = MHD_queue_response(mc, status, r);
  MHD_destroy_response(r);
  return rv;
}

/* Answers what b holds, or 500 if building it failed. Consumes b. */
static enum MHD_Result admin_answer_buf(struct admin *a, struct MHD_Connection *mc, unsigned status,
                                        const char *type, struct admin_buf *b)
{
  size_t len = 0;
  char *body = admin_buf_take(b, &len);
  if (body == NULL) {
    /* A constant, not the JSON writer: building the answer just failed,
     * maybe for want of memory. */
    static const char msg[] = "{\"error\":\"the answer could not be built (out of memory or "
                              "too large)\"}\n";
    char *copy = strdup(msg);
    return copy != NULL ? admin_answer(a, mc, MHD_HTTP_INTERNAL_SERVER_ERROR, "application/json",
                                       copy, strlen(copy))
                        : MHD_NO;
  }
  return admin_answer(a, mc, status, type, body, len);
}

/* {"error": msg, "path": url} with status. */
static enum MHD_Result admin_answer_error(struct admin *a, struct MHD_Connection *mc,
                                          unsigned status, const char *msg, const char *url)
{
  struct admin_buf b;
  admin_buf_init(&b, ADMIN_MAX_ANSWER);
  struct admin_json w;
  admin_json_init(&w, &b);
  admin_json_object_begin(&w);
  admin_json_key(&w, "error");
  admin_json_string(&w, msg);
  admin_json_key(&w, "path");
  admin_json_string(&w, url);
  admin_json_object_end(&w);
  admin_buf_puts(&b, "\n");
  return admin_answer_buf(a, mc, status, "application/json", &b);
}

/* ---- endpoints ---- */

static enum MHD_Result admin_get_health(struct admin *a, struct MHD_Connection *mc)
{
  struct admin_buf b;
  admin_buf_init(&b, ADMIN_MAX_ANSWER);
  struct admin_json w;
  admin_json_init(&w, &b);
  admin_json_object_begin(&w);
  admin_json_key(&w, "status");
  admin_json_string(&w, "up");
  admin_json_key(&w, "node_id");
  admin_json_u64(&w, a->n->cfg.node_id);
  admin_json_object_end(&w);
  admin_buf_puts(&b, "\n");
  return admin_answer_buf(a, mc, MHD_HTTP_OK, "application/json", &b);
}

static enum MHD_Result admin_get_ready(struct admin *a, struct MHD_Connection *mc)
{
  char why[256] = "";
  bool ready = admin_ready(a->n, why, sizeof why);
  struct admin_buf b;
  admin_buf_init(&b, ADMIN_MAX_ANSWER);
  struct admin_json w;
  admin_json_init(&w, &b);
  admin_json_object_begin(&w);
  admin_json_key(&w, "ready");
  admin_json_bool(&w, ready);
  if (!ready) {
    admin_json_key(&w, "reason");
    admin_json_string(&w, why);
  }
  admin_json_object_end(&w);
  admin_buf_puts(&b, "\n");
  return admin_answer_buf(a, mc, ready ? MHD_HTTP_OK : MHD_HTTP_SERVICE_UNAVAILABLE,
                          "application/json", &b);
}

static enum MHD_Result admin_get_metrics(struct admin *a, struct MHD_Connection *mc)
{
  struct admin_buf b;
  admin_buf_init(&b, ADMIN_MAX_ANSWER);
  metrics_node_write(a->n, &b);
  return admin_answer_buf(a, mc, MHD_HTTP_OK, "text/plain; version=0.0.4; charset=utf-8", &b);
}

static enum MHD_Result admin_get_page(struct admin *a, struct MHD_Connection *mc)
{
  struct admin_buf b;
  admin_buf_init(&b, ADMIN_MAX_ANSWER);
  admin_buf_puts(&b, admin_page_html);
  return admin_answer_buf(a, mc, MHD_HTTP_OK, "text/html; charset=utf-8", &b);
}

/* /v1/messages?topic=T&partition=P&offset=O|timestamp=MS&limit=N: the
 * message browser (admin_view_messages). */
static enum MHD_Result admin_get_messages(struct admin *a, struct MHD_Connection *mc,
                                          const char *url)
{
  const char *topic = MHD_lookup_connection_value(mc, MHD_GET_ARGUMENT_KIND, "topic");
  int64_t partition = 0, offset = 0, ts = -1, limit = 0;
  if (topic == NULL || topic[0] == '\0' ||
      !admin_actions_query_i64(mc, "partition", 0, UINT32_MAX, 0, &partition) ||
      !admin_actions_query_i64(mc, "offset", 0, INT64_MAX, 0, &offset) ||
      !admin_actions_query_i64(mc, "timestamp", 0, INT64_MAX, -1, &ts) ||
      !admin_actions_query_i64(mc, "limit", 1, ADMIN_VIEW_MAX_RECORDS, 20, &limit)) {
    return admin_answer_error(a, mc, MHD_HTTP_BAD_REQUEST,
                              "usage: /v1/messages?topic=T&partition=P&offset=O (or "
                              "timestamp=MS since the epoch)&limit=N (1..500)",
                              url);
  }
  struct admin_buf b;
  admin_buf_init(&b, ADMIN_MAX_ANSWER);
  struct admin_json w;
  admin_json_init(&w, &b);
  unsigned status =
      admin_view_messages(a->n, topic, (uint32_t)partition, offset, ts, (unsigned)limit, &w);
  admin_buf_puts(&b, "\n");
  return admin_answer_buf(a, mc, status, "application/json", &b);
}

/* /v1/...: the JSON views; an unknown view or topic is 404. */
static enum MHD_Result admin_get_view(struct admin *a, struct MHD_Connection *mc, const char *url)
{
  struct admin_buf b;
  admin_buf_init(&b, ADMIN_MAX_ANSWER);
  struct admin_json w;
  admin_json_init(&w, &b);
  const char *topic_prefix = "/v1/topics/";
  if (strcmp(url, "/v1/cluster") == 0) {
    admin_view_cluster(a->n, &w);
  } else if (strcmp(url, "/v1/nodes") == 0) {
    admin_view_nodes(a->n, &w);
  } else if (strcmp(url, "/v1/topics") == 0) {
    admin_view_topics(a->n, &w);
  } else if (strcmp(url, "/v1/groups") == 0) {
    admin_view_groups(a->n, &w);
  } else if (strcmp(url, "/v1/history") == 0) {
    admin_history_write(&a->hist, a->n, &w);
  } else if (strcmp(url, "/v1/messages") == 0) {
    admin_buf_close(&b);
    return admin_get_messages(a, mc, url);
  } else if (strncmp(url, topic_prefix, strlen(topic_prefix)) == 0 &&
             url[strlen(topic_prefix)] != '\0') {
    if (!admin_view_topic(a->n, url + strlen(topic_prefix), &w)) {
      admin_buf_close(&b);
      return admin_answer_error(a, mc, MHD_HTTP_NOT_FOUND, "no such topic", url);
    }
  } else {
    admin_buf_close(&b);
    return admin_answer_error(a, mc, MHD_HTTP_NOT_FOUND, "not found", url);
  }
  admin_buf_puts(&b, "\n");
  return admin_answer_buf(a, mc, MHD_HTTP_OK, "application/json", &b);
}

/* With --admin-token-file: does the request carry "Authorization: Bearer
 * TOKEN" with the node's token? Compared in constant time (the token's
 * length is not a secret worth hiding). Without a token: yes. */
static bool admin_authorized(const struct node *n, struct MHD_Connection *mc)
{
  if (n->admin_token == NULL) {
    return true;
  }
  const char *h = MHD_lookup_connection_value(mc, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION);
  static const char scheme[] = "Bearer ";
  if (h == NULL || strncasecmp(h, scheme, sizeof scheme - 1) != 0) {
    return false;
  }
  h += sizeof scheme - 1;
  if (strlen(h) != n->admin_token_len) {
    return false;
  }
  unsigned char diff = 0;
  for (size_t i = 0; i < n->admin_token_len; i++) {
    diff |= (unsigned char)h[i] ^ n->admin_token[i];
  }
  return diff == 0;
}

/* POST /v1/actions/...: the console's actions (admin_actions.h), only
 * behind the token. A later call for the same request (a body's bytes,
 * discarded unread; the resumed connection) answers once the action has. */
static enum MHD_Result admin_on_post(struct admin *a, struct MHD_Connection *mc, const char *url,
                                     size_t *upload_data_size, void **con_cls)
{
  if (*con_cls != NULL) {
    if (*upload_data_size != 0) {
      *upload_data_size = 0;
      return MHD_YES;
    }
    return admin_action_answer(*con_cls, mc);
  }
  if (strncmp(url, "/v1/actions/", 12) != 0) {
    return admin_answer_error(a, mc, MHD_HTTP_METHOD_NOT_ALLOWED,
                              "only GET and HEAD are served here (POST is for /v1/actions/...)",
                              url);
  }
  if (a->n->admin_token == NULL) {
    return admin_answer_error(a, mc, MHD_HTTP_FORBIDDEN,
                              "actions need the admin token: start the node with "
                              "--admin-token-file",
                              url);
  }
  if (!admin_authorized(a->n, mc)) {
    return admin_answer_error(a, mc, MHD_HTTP_UNAUTHORIZED,
                              "this admin port asks for its token: Authorization: Bearer TOKEN "
                              "(--admin-token-file)",
                              url);
  }
  return admin_action_start(&a->actions, a->n, mc, url, con_cls);
}

static void admin_on_completed(void *cls, struct MHD_Connection *mc, void **con_cls,
                               enum MHD_RequestTerminationCode toe)
{
  if (*con_cls != NULL) {
    admin_action_completed(*con_cls);
    *con_cls = NULL;
  }
}

static enum MHD_Result admin_on_request(void *cls, struct MHD_Connection *mc, const char *url,
                                        const char *method, const char *version,
                                        const char *upload_data, size_t *upload_data_size,
                                        void **con_cls)
{
  struct admin *a = cls;
  if (strcmp(method, MHD_HTTP_METHOD_OPTIONS) == 0) {
    /* A cross-origin preflight from another node's status page (admin_cors
     * says whether it may). */
    return admin_answer(a, mc, MHD_HTTP_NO_CONTENT, "text/plain", NULL, 0);
  }
  if (strcmp(method, MHD_HTTP_METHOD_POST) == 0) {
    return admin_on_post(a, mc, url, upload_data_size, con_cls);
  }
  if (strcmp(method, MHD_HTTP_METHOD_GET) != 0 && strcmp(method, MHD_HTTP_METHOD_HEAD) != 0) {
    /* Answered at once: a body, if any, is never read. */
    return admin_answer_error(a, mc, MHD_HTTP_METHOD_NOT_ALLOWED,
                              "only GET, HEAD and POST (the console's actions) are served", url);
  }
  /* Open without the token: the probes (an orchestrator's kubelet has
   * none) and the page, which holds no data and sends the token it is
   * given in its URL's fragment with each request (admin_page.h). */
  if (strcmp(url, "/") == 0) {
    return admin_get_page(a, mc);
  }
  if (strcmp(url, "/health") == 0) {
    return admin_get_health(a, mc);
  }
  if (strcmp(url, "/ready") == 0) {
    return admin_get_ready(a, mc);
  }
  if (!admin_authorized(a->n, mc)) {
    return admin_answer_error(a, mc, MHD_HTTP_UNAUTHORIZED,
                              "this admin port asks for its token: Authorization: Bearer TOKEN "
                              "(--admin-token-file)",
                              url);
  }
  if (strcmp(url, "/metrics") == 0) {
    return admin_get_metrics(a, mc);
  }
  if (strncmp(url, "/v1/", 4) == 0) {
    return admin_get_view(a, mc, url);
  }
  return admin_answer_error(a, mc, MHD_HTTP_NOT_FOUND, "not found", url);
}

/* ---- the loop glue ---- */

static void admin_on_timer(uv_timer_t *t);

/* Runs MHD's pending work, then arms the timer for its next timeout. */
static void admin_run(struct admin *a)
{
  if (MHD_run(a->d) != MHD_YES) {
    log_warn(ADMIN_LOG, "MHD_run failed");
  }
  MHD_UNSIGNED_LONG_LONG ms = ADMIN_RUN_MAX_MS;
  if (MHD_get_timeout(a->d, &ms) != MHD_YES || ms > ADMIN_RUN_MAX_MS) {
    ms = ADMIN_RUN_MAX_MS;
  }
  uv_timer_start(&a->timer, admin_on_timer, (uint64_t)ms, 0);
}

static void admin_on_timer(uv_timer_t *t)
{
  admin_run(t->data);
}

/* The headers every answer of the port carries (admin_actions' too). */
static void admin_decorate(void *data, struct MHD_Connection *mc, struct MHD_Response *r)
{
  admin_cors(data, mc, r);
}

/* A suspended connection was resumed: run MHD from the loop soon. */
static void admin_kick(void *data)
{
  struct admin *a = data;
  uv_timer_start(&a->timer, admin_on_timer, 0, 0);
}

static void admin_on_poll(uv_poll_t *p, int status, int events)
{
  struct admin *a = p->data;
  if (status < 0) {
    log_warn(ADMIN_LOG, "polling the admin port: %s", uv_strerror(status));
  }
  admin_run(a);
}

static void admin_on_sample(uv_timer_t *t)
{
  struct admin *a = t->data;
  metrics_node_sample(a->n);
}

static void admin_on_history(uv_timer_t *t)
{
  struct admin *a = t->data;
  admin_history_sample(&a->hist, a->n);
}

static void admin_on_log(void *cls, const char *fmt, va_list ap)
    __attribute__((format(printf, 2, 0)));

static void admin_on_log(void *cls, const char *fmt, va_list ap)
{
  char msg[256];
  vsnprintf(msg, sizeof msg, fmt, ap);
  size_t len = strlen(msg);
  while (len > 0 && (msg[len - 1] == '\n' || msg[len - 1] == '\r')) {
    msg[--len] = '\0';
  }
  log_warn(ADMIN_LOG, "libmicrohttpd: %s", msg);
}

/* A listening TCP socket on host:port (blocking name lookup: at start
 * only). Returns the descriptor or a negative code with errmsg set. */
static int admin_listen_socket(struct node *n)
{
  const struct config_addr *la = &n->cfg.admin_listen;
  char port[8];
  snprintf(port, sizeof port, "%u", (unsigned)la->port);
  struct addrinfo hints = {
      .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE | AI_NUMERICSERV};
  struct addrinfo *res = NULL;
  int gai = getaddrinfo(la->host, port, &hints, &res);
  if (gai != 0) {
    snprintf(n->errmsg, sizeof n->errmsg, "admin port %s: %s", la->str, gai_strerror(gai));
    return CAIRN_EINVAL;
  }
  int rv = CAIRN_EINVAL;
  for (struct addrinfo *ai = res; ai != NULL; ai = ai->ai_next) {
    int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
      rv = -errno;
      continue;
    }
    int on = 1;
    (void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on);
    if (bind(fd, ai->ai_addr, ai->ai_addrlen) == 0 && listen(fd, 64) == 0) {
      freeaddrinfo(res);
      return fd;
    }
    rv = -errno;
    close(fd);
  }
  freeaddrinfo(res);
  snprintf(n->errmsg, sizeof n->errmsg, "admin port %s: %s", la->str, cairn_strerror(rv));
  return rv;
}

/* The port fd is bound to (for --admin-listen HOST:0). */
static int admin_bound_port(int fd)
{
  struct sockaddr_storage ss;
  socklen_t len = sizeof ss;
  if (getsockname(fd, (struct sockaddr *)&ss, &len) != 0) {
    return -errno;
  }
  if (ss.ss_family == AF_INET) {
    return ntohs(((struct sockaddr_in *)&ss)->sin_port);
  }
  return ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
}

int admin_start(struct node *n, struct admin **out)
{
  int fd = admin_listen_socket(n);
  if (fd < 0) {
    return fd;
  }
  if (n->cfg.admin_listen.port == 0) {
    int port = admin_bound_port(fd);
    int rv = port > 0 ? config_set_bound_port(&n->cfg, CONFIG_ADMIN, (uint16_t)port) : port;
    if (rv != 0) {
      snprintf(n->errmsg, sizeof n->errmsg, "admin port %s: %s", n->cfg.admin_listen.str,
               cairn_strerror(rv));
      close(fd);
      return rv;
    }
  }
  struct admin *a = calloc(1, sizeof *a);
  if (a == NULL) {
    close(fd);
    snprintf(n->errmsg, sizeof n->errmsg, "admin port: %s", cairn_strerror(CAIRN_ENOMEM));
    return CAIRN_ENOMEM;
  }
  a->n = n;
  admin_actions_init(&a->actions, admin_kick, admin_decorate, a);
  if (admin_history_init(&a->hist) != 0) {
    close(fd);
    free(a);
    snprintf(n->errmsg, sizeof n->errmsg, "admin port: %s", cairn_strerror(CAIRN_ENOMEM));
    return CAIRN_ENOMEM;
  }
  /* No thread of MHD's own: epoll, driven from the loop below. */
  a->d = MHD_start_daemon(
      MHD_USE_EPOLL | MHD_USE_ERROR_LOG | MHD_ALLOW_SUSPEND_RESUME, 0, NULL, NULL, admin_on_request,
      a, MHD_OPTION_NOTIFY_COMPLETED, admin_on_completed, a, MHD_OPTION_EXTERNAL_LOGGER,
      admin_on_log, a, /* first, so it gets every message */
      MHD_OPTION_LISTEN_SOCKET, (MHD_socket)fd, MHD_OPTION_CONNECTION_LIMIT,
      (unsigned)ADMIN_MAX_CONNS, MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)ADMIN_CONN_MEMORY,
      MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)ADMIN_CONN_TIMEOUT_S, MHD_OPTION_END);
  const union MHD_DaemonInfo *info =
      a->d != NULL ? MHD_get_daemon_info(a->d, MHD_DAEMON_INFO_EPOLL_FD) : NULL;
  if (info == NULL) {
    if (a->d != NULL) {
      MHD_stop_daemon(a->d); /* closes fd */
    } else {
      close(fd);
    }
    admin_history_close(&a->hist);
    free(a);
    snprintf(n->errmsg, sizeof n->errmsg, "admin port %s: libmicrohttpd would not start",
             n->cfg.admin_listen.str);
    return CAIRN_EHTTP;
  }
  int rv = uv_poll_init(n->loop, &a->poll, info->epoll_fd);
  if (rv != 0) {
    MHD_stop_daemon(a->d);
    admin_history_close(&a->hist);
    free(a);
    snprintf(n->errmsg, sizeof n->errmsg, "admin port %s: %s", n->cfg.admin_listen.str,
             uv_strerror(rv));
    return rv;
  }
  a->poll.data = a;
  uv_timer_init(n->loop, &a->timer);
  a->timer.data = a;
  uv_timer_init(n->loop, &a->sample);
  a->sample.data = a;
  uv_timer_init(n->loop, &a->hist_timer);
  a->hist_timer.data = a;
  a->handles_open = 4;
  uv_poll_start(&a->poll, UV_READABLE, admin_on_poll);
  uv_timer_start(&a->timer, admin_on_timer, 0, 0);
  uv_timer_start(&a->sample, admin_on_sample, METRICS_LAG_SAMPLE_MS, METRICS_LAG_SAMPLE_MS);
  admin_history_sample(&a->hist, n); /* the counters the first step starts from */
  uv_timer_start(&a->hist_timer, admin_on_history, ADMIN_HISTORY_STEP_MS, ADMIN_HISTORY_STEP_MS);
  log_info(ADMIN_LOG, "admin port %s: /metrics /health /ready /v1/ and the status page at /",
           n->cfg.admin_listen.str);
  *out = a;
  return 0;
}

static void admin_on_handle_closed(uv_handle_t *h)
{
  struct admin *a = h->data;
  if (--a->handles_open > 0) {
    return;
  }
  /* The loop no longer watches MHD's descriptors: stop it (this closes the
   * port and every admin connection; none may be suspended then). */
  admin_actions_close(&a->actions);
  MHD_stop_daemon(a->d);
  admin_history_close(&a->hist);
  admin_close_cb cb = a->close_cb;
  void *data = a->close_data;
  free(a);
  cb(data);
}

void admin_close(struct admin *a, admin_close_cb cb, void *data)
{
  a->close_cb = cb;
  a->close_data = data;
  uv_poll_stop(&a->poll);
  uv_close((uv_handle_t *)&a->poll, admin_on_handle_closed);
  uv_close((uv_handle_t *)&a->timer, admin_on_handle_closed);
  uv_close((uv_handle_t *)&a->sample, admin_on_handle_closed);
  uv_close((uv_handle_t *)&a->hist_timer, admin_on_handle_closed);
}
