/* client.c - the client object: options, the bootstrap list, the tick
 * that drives timeouts, retries and linger, the connectivity check, and
 * close (cancel everything, then free once libuv is done). */
#include "internal.h"

#include "common/err.h"
#include "net/tls.h"

#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

void cairn_options_init(struct cairn_options *o)
{
  memset(o, 0, sizeof *o);
  o->client_id = "libcairn";
  o->request_timeout_ms = 30000;
  o->connect_timeout_ms = 5000;
  o->delivery_timeout_ms = 120000;
  o->metadata_max_age_ms = 300000;
  o->retry_backoff_ms = 100;
  o->retry_backoff_max_ms = 1000;
}

void cairn_message_init(struct cairn_message *m)
{
  memset(m, 0, sizeof *m);
  m->partition = CAIRN_PARTITION_ANY;
  m->timestamp_ms = CAIRN_TIMESTAMP_NOW;
}

uint64_t lc_rand(struct cairn_client *c)
{
  uint64_t x = c->rng;
  x ^= x >> 12;
  x ^= x << 25;
  x ^= x >> 27;
  c->rng = x;
  return x * 0x2545F4914F6CDD1Dull;
}

/* Splits the bootstrap list into c->bootstrap. */
static int lc_client_parse_bootstrap(struct cairn_client *c, const char *list)
{
  const char *p = list;
  while (*p != '\0') {
    const char *end = strchr(p, ',');
    size_t n = end != NULL ? (size_t)(end - p) : strlen(p);
    while (n > 0 && (*p == ' ' || *p == '\t')) {
      p++;
      n--;
    }
    while (n > 0 && (p[n - 1] == ' ' || p[n - 1] == '\t')) {
      n--;
    }
    if (n > 0) {
      const char *colon = memrchr(p, ':', n);
      if (n >= LC_ADDR_MAX || c->nbootstrap == LC_MAX_BOOTSTRAP || colon == NULL ||
          colon == p || colon == p + n - 1) {
        return CAIRN_EINVAL;
      }
      for (const char *d = colon + 1; d < p + n; d++) {
        if (*d < '0' || *d > '9') {
          return CAIRN_EINVAL;
        }
      }
      memcpy(c->bootstrap[c->nbootstrap], p, n);
      c->bootstrap[c->nbootstrap][n] = '\0';
      c->nbootstrap++;
    }
    if (end == NULL) {
      break;
    }
    p = end + 1;
  }
  return c->nbootstrap > 0 ? 0 : CAIRN_EINVAL;
}

static void lc_client_on_tick(uv_timer_t *t)
{
  struct cairn_client *c = t->data;
  lc_conn_sweep(c);
  lc_meta_tick(c);
  lc_op_tick(c);
  for (struct cairn_producer *p = c->producers; p != NULL;) {
    struct cairn_producer *next = lc_producer_next(p);
    lc_producer_tick(p);
    p = next;
  }
  for (struct cairn_consumer *cons = c->consumers; cons != NULL;) {
    struct cairn_consumer *next = lc_consumer_next(cons);
    lc_consumer_tick(cons);
    cons = next;
  }
}

/* A write to a node that just died raises SIGPIPE, whose default action
 * kills the process: ignore it unless the application chose a handler. */
static void lc_client_ignore_sigpipe(void)
{
  struct sigaction sa;
  if (sigaction(SIGPIPE, NULL, &sa) == 0 && sa.sa_handler == SIG_DFL) {
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = SIG_IGN;
    sigemptyset(&sa.sa_mask);
    (void)sigaction(SIGPIPE, &sa, NULL);
  }
}

int cairn_client_new(uv_loop_t *loop, const char *bootstrap, const struct cairn_options *o,
                     struct cairn_client **out)
{
  lc_client_ignore_sigpipe();
  if (loop == NULL || bootstrap == NULL || out == NULL) {
    return CAIRN_EINVAL;
  }
  struct cairn_client *c = calloc(1, sizeof *c);
  if (c == NULL) {
    return CAIRN_ENOMEM;
  }
  c->loop = loop;
  if (o != NULL) {
    c->opts = *o;
  } else {
    cairn_options_init(&c->opts);
  }
  struct cairn_options def;
  cairn_options_init(&def);
  /* Zero timeouts would make every call fail at once: read as defaults. */
  if (c->opts.request_timeout_ms == 0) {
    c->opts.request_timeout_ms = def.request_timeout_ms;
  }
  if (c->opts.connect_timeout_ms == 0) {
    c->opts.connect_timeout_ms = def.connect_timeout_ms;
  }
  if (c->opts.delivery_timeout_ms == 0) {
    c->opts.delivery_timeout_ms = def.delivery_timeout_ms;
  }
  if (c->opts.metadata_max_age_ms == 0) {
    c->opts.metadata_max_age_ms = def.metadata_max_age_ms;
  }
  if (c->opts.retry_backoff_max_ms < c->opts.retry_backoff_ms) {
    c->opts.retry_backoff_max_ms = c->opts.retry_backoff_ms;
  }
  lc_strlcpy(c->client_id, c->opts.client_id != NULL ? c->opts.client_id : def.client_id,
             sizeof c->client_id);
  c->opts.client_id = c->client_id;
  int rv = lc_client_parse_bootstrap(c, bootstrap);
  if (rv != 0) {
    free(c);
    return rv;
  }
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  c->rng = ((uint64_t)ts.tv_nsec << 20) ^ (uint64_t)ts.tv_sec ^ (uint64_t)(uintptr_t)c;
  if (c->rng == 0) {
    c->rng = 1;
  }
  if (c->opts.tls) {
    struct tls_config tc = {.ca_file = c->opts.tls_ca_file,
                            .cert_file = c->opts.tls_cert_file,
                            .key_file = c->opts.tls_key_file};
    char why[TLS_ERRMSG_SIZE];
    rv = tls_client_ctx_new(&tc, &c->tls, why, sizeof why);
    if (rv != 0) {
      free(c);
      return CAIRN_ETLS;
    }
  }
  c->opts.tls_ca_file = c->opts.tls_cert_file = c->opts.tls_key_file = NULL; /* not kept */
  if (c->opts.user != NULL) {
    if (strlen(c->opts.user) >= sizeof c->user || c->opts.password == NULL ||
        strlen(c->opts.password) >= sizeof c->password) {
      tls_ctx_free(c->tls);
      free(c);
      return CAIRN_EINVAL;
    }
    lc_strlcpy(c->user, c->opts.user, sizeof c->user);
    lc_strlcpy(c->password, c->opts.password, sizeof c->password);
  }
  c->opts.user = c->opts.password = NULL; /* copied */
  lc_meta_init(&c->meta);
  if ((rv = uv_timer_init(loop, &c->tick)) != 0) {
    tls_ctx_free(c->tls);
    free(c);
    return rv;
  }
  c->tick.data = c;
  c->handles = 1;
  uv_timer_start(&c->tick, lc_client_on_tick, LC_TICK_MS, LC_TICK_MS);
  *out = c;
  return 0;
}

uv_loop_t *cairn_client_loop(const struct cairn_client *c) { return c->loop; }

static void lc_client_on_close(uv_handle_t *h)
{
  struct cairn_client *c = h->data;
  lc_meta_close(&c->meta);
  tls_ctx_free(c->tls);
  memset(c->password, 0, sizeof c->password);
  if (c->close_cb != NULL) {
    c->close_cb(c, c->close_data);
  }
  free(c);
}

int cairn_client_close(struct cairn_client *c, cairn_client_close_cb cb, void *data)
{
  if (c->nproducers > 0 || c->nconsumers > 0) {
    return UV_EBUSY;
  }
  if (c->closing) {
    return CAIRN_ECLOSED;
  }
  c->closing = true;
  c->close_cb = cb;
  c->close_data = data;
  lc_op_cancel_all(c);
  while (c->conns != NULL) {
    lc_conn_fail(c->conns, UV_ECANCELED, "client closed");
  }
  uv_timer_stop(&c->tick);
  uv_close((uv_handle_t *)&c->tick, lc_client_on_close);
  return 0;
}

/* ---- cairn_client_ready: a Metadata op whose answer fills the cache ---- */

struct lc_ready {
  Cairn__Client__Envelope env;
  Cairn__Client__MetadataRequest mr;
  cairn_done_cb cb;
  void *data;
};

static void lc_ready_free(Cairn__Client__Envelope *env) { free(env); }

static enum lc_op_verdict lc_ready_on_answer(struct lc_op *op, Cairn__Client__Envelope *env)
{
  if (env->body_case != CAIRN__CLIENT__ENVELOPE__BODY_METADATA_RESP) {
    op->status = CAIRN_EPROTOCOL;
    return LC_OP_DONE;
  }
  const Cairn__Client__Error *e = env->metadata_resp->error;
  if (e != NULL && e->code != CAIRN__CLIENT__ERROR_CODE__OK) {
    op->status = lc_wire_err((int)e->code);
    lc_strlcpy(op->errmsg, e->message, sizeof op->errmsg);
    return lc_retriable(op->status) ? LC_OP_RETRY : LC_OP_DONE;
  }
  op->status = lc_meta_apply(op->c, env->metadata_resp);
  return LC_OP_DONE;
}

static void lc_ready_on_done(struct lc_op *op)
{
  struct lc_ready *r = op->data;
  r->cb(op->c, op->status, op->status == 0 ? "" : op->errmsg, r->data);
}

int cairn_client_ready(struct cairn_client *c, cairn_done_cb cb, void *data)
{
  if (cb == NULL) {
    return CAIRN_EINVAL;
  }
  if (c->closing) {
    return CAIRN_ECLOSED;
  }
  struct lc_ready *r = calloc(1, sizeof *r);
  struct lc_op *op = lc_op_new(c);
  if (r == NULL || op == NULL) {
    free(r);
    free(op);
    return CAIRN_ENOMEM;
  }
  cairn__client__envelope__init(&r->env);
  cairn__client__metadata_request__init(&r->mr);
  r->env.api = CAIRN__CLIENT__API__API_METADATA;
  r->env.body_case = CAIRN__CLIENT__ENVELOPE__BODY_METADATA_REQ;
  r->env.metadata_req = &r->mr;
  r->cb = cb;
  r->data = data;
  op->target = LC_OP_ANY;
  op->fail_refused = c->opts.fail_fast_refused != 0;
  op->req = &r->env;
  op->free_req = lc_ready_free;
  op->answer = lc_ready_on_answer;
  op->done = lc_ready_on_done;
  op->data = r;
  lc_op_start(c, op);
  return 0;
}
