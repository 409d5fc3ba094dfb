/* fuzz_kafka.c - libFuzzer target: the Kafka port's request path over
 * arbitrary bytes, from the framing to every API's request decoder, with
 * the real kafka_dispatch.c and kafka_handle_*.c.
 *
 * Input: byte 0 chooses the conn's state (bit 0: the node requires
 * authentication; bit 1: the conn has a principal; bit 2: the conn is in
 * SASL raw-token mode; bits 3-7: how the core answers relayed requests:
 * 0 "could not start", else one of 31 native error codes); the rest is read twice: as a byte stream through the framing's
 * decoder (kafka_conn_framing, as conn.c reads it), and as one request
 * payload (what the framing hands over: header and body) dispatched to the
 * handler its api key names, flexible header or not, any version.
 *
 * The seam: the harness stands in for what lies under the Kafka port, the
 * conn layer (src/net/conn.c) and the native core: conn_request_relay and
 * dispatch_request answer a relayed native request at once, either "could
 * not start" (NULL) or with the native error code the input chose, so each
 * handler runs its decoder and then its answer encoder for that outcome.
 *
 * Checks, besides "no crash, no leak, no undefined behaviour": every
 * request is finished exactly once (answered, or unanswered), and an
 * answer's bytes are well formed as far as the framing goes (at most
 * KAFKA_BUF_MAX). */
#include "common/err.h"
#include "kafka/kafka_conn.h"
#include "kafka/kafka_handlers.h"
#include "kafka/kafka_port.h"
#include "net/frame.h"
#include "net/listener.h"
#include "server/authz.h"
#include "server/config_value.h"
#include "server/handlers.h"
#include "storage/plog.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static void fuzz_check(int ok)
{
  if (!ok) {
    abort();
  }
}

/* ---- the seam ---- */

static conn_dispatch_cb fuzz_dispatch;
static void *fuzz_dispatch_data;
static int fuzz_finished;    /* finishes of the current request */
static int fuzz_relay_mode;  /* 0: relay cannot start; else fuzz_codes[mode - 1] */
/* The native codes a relayed request may answer with (proto/client.proto). */
static const int fuzz_codes[31] = {1,  2,  3,  5,  6,  7,  8,  9,  10, 11, 12, 13, 14, 15, 16, 17,
                                   18, 22, 23, 25, 26, 27, 28, 40, 41, 42, 44, 46, 48, 61, 64};
static struct meta_state fuzz_meta;

int listener_init(struct listener *l, uv_loop_t *loop, const struct listener_config *cfg)
{
  (void)loop;
  memset(l, 0, sizeof *l);
  fuzz_dispatch = cfg->dispatch;
  fuzz_dispatch_data = cfg->data;
  return 0;
}

void listener_close(struct listener *l, listener_close_cb cb) { cb(l); }
void conn_limits_default(struct conn_limits *lim) { memset(lim, 0, sizeof *lim); }
bool config_addr_is_off(const struct config_addr *a) { (void)a; return false; }
int config_set_bound_port(struct config *cfg, enum config_listener which, uint16_t port)
{
  (void)cfg;
  (void)which;
  (void)port;
  return 0;
}
void conn_close(struct conn *c) { c->state = CONN_DRAINING; }
void conn_request_set_cancel(struct conn_request *req, conn_cancel_cb cb) { req->cancel_cb = cb; }
void conn_request_cancel(struct conn_request *req) { (void)req; }
const struct meta_state *ctl_state(const struct controller *ctl)
{
  (void)ctl;
  return &fuzz_meta;
}
const struct meta_node *meta_node_find(const struct meta_state *st, uint64_t node_id)
{
  (void)st;
  (void)node_id;
  return NULL;
}
/* Only the sizes' defaults are read (DescribeConfigs); their values do not
 * matter here, and plog.c would bring the storage layer along. */
void plog_opts_default(struct plog_opts *opts) { memset(opts, 0, sizeof *opts); }
/* The real rule (handle_auth.c) brings SCRAM and the users along; no
 * fuzzed conn has a certificate, so a principal means logged in. */
bool handle_auth_may_start(const struct conn *c) { return c->principal[0] == '\0'; }
/* Every fuzzed conn counts as TLS, so that the PLAIN handshake (offered on
 * TLS conns only) is reached too; the relay behind it is the stand-in's. */
bool conn_encrypted(const struct conn *c)
{
  (void)c;
  return true;
}
int authz_check(struct node *n, struct conn *c, uint32_t type, const char *name, uint32_t op,
                char *msg, size_t cap)
{
  (void)n;
  (void)c;
  (void)type;
  (void)name;
  (void)op;
  snprintf(msg, cap, "fuzz");
  return 0;
}

void conn_respond_bytes(struct conn_request *req, const struct conn_part *parts, size_t nparts)
{
  (void)req;
  size_t total = 0;
  for (size_t i = 0; i < nparts; i++) {
    total += parts[i].len;
    if (parts[i].release != NULL) {
      parts[i].release(parts[i].arg, 0);
    }
  }
  fuzz_check(total <= KAFKA_BUF_MAX);
  fuzz_finished++;
}

void conn_finish_unanswered(struct conn_request *req)
{
  (void)req;
  fuzz_finished++;
}

/* A relayed request: answered by dispatch_request at once. */
struct conn_request *conn_request_relay(struct conn *c, Cairn__Client__Api api,
                                        Cairn__Client__Envelope *env, const uint8_t *payload,
                                        size_t payload_len, conn_relay_cb cb, void *data)
{
  (void)api;
  (void)env;
  (void)payload;
  (void)payload_len;
  if (fuzz_relay_mode == 0) {
    return NULL;
  }
  struct conn_request *inner = calloc(1, sizeof *inner);
  fuzz_check(inner != NULL);
  inner->c = c;
  inner->relay = cb;
  inner->relay_data = data;
  return inner;
}

void dispatch_request(struct node *n, struct conn_request *inner)
{
  (void)n;
  Cairn__Client__Error e = CAIRN__CLIENT__ERROR__INIT;
  e.code = (Cairn__Client__ErrorCode)fuzz_codes[fuzz_relay_mode - 1];
  e.message = "fuzz";
  Cairn__Client__Envelope env = CAIRN__CLIENT__ENVELOPE__INIT;
  env.body_case = CAIRN__CLIENT__ENVELOPE__BODY_ERROR_RESP;
  env.error_resp = &e;
  conn_relay_cb cb = inner->relay;
  cb(inner, &env, NULL, 0);
  free(inner);
}

/* ---- the target ---- */

static struct node *fuzz_node(void)
{
  static struct node *n;
  if (n == NULL) {
    n = calloc(1, sizeof *n);
    fuzz_check(n != NULL);
    n->state = NODE_RUNNING;
    n->cfg.node_id = 1;
    snprintf(n->cfg.kafka_listen.str, sizeof n->cfg.kafka_listen.str, "127.0.0.1:9092");
    snprintf(n->cfg.kafka_advertise.str, sizeof n->cfg.kafka_advertise.str, "127.0.0.1:9092");
    n->cfg.kafka_listen.port = 9092;
    fuzz_check(kafka_port_start(n) == 0);
    fuzz_check(fuzz_dispatch != NULL);
  }
  return n;
}

/* The bytes as a stream of frames, as conn.c cuts them. */
static void fuzz_frames(const uint8_t *p, size_t len)
{
  size_t at = 0;
  while (at < len) {
    struct frame f;
    int rv = kafka_conn_framing.decode(p + at, len - at, 1u << 20, &f);
    if (rv != FRAME_WHOLE) {
      fuzz_check(rv == FRAME_NEED_MORE ? f.need > 0 : rv < 0);
      return;
    }
    fuzz_check(f.size <= len - at && f.payload == p + at + KAFKA_FRAME_SIZE_FIELD);
    uint64_t corr;
    Cairn__Client__Api api;
    uint32_t version;
    Cairn__Client__Envelope *env;
    if (kafka_conn_framing.unpack(&f, &corr, &api, &version, &env) == 0) {
      fuzz_check(env == NULL && corr <= UINT32_MAX);
    }
    at += f.size;
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  if (size < 1 + KAFKA_FRAME_MIN_SIZE) {
    return 0;
  }
  struct node *n = fuzz_node();
  uint8_t flags = data[0];
  fuzz_frames(data + 1, size - 1);
  n->auth_required = (flags & 1) != 0;
  fuzz_relay_mode = flags >> 3;
  struct conn c;
  memset(&c, 0, sizeof c);
  c.state = CONN_OPEN;
  snprintf(c.peer, sizeof c.peer, "fuzz");
  if (flags & 2) {
    snprintf(c.principal, sizeof c.principal, "User:fuzz");
  }
  c.proto_state = (flags & 4) ? KAFKA_SASL_RAW : KAFKA_SASL_NONE;
  /* The payload in its own block, so ASan sees any read past it. */
  size_t len = size - 1;
  uint8_t *payload = malloc(len);
  fuzz_check(payload != NULL);
  memcpy(payload, data + 1, len);
  struct conn_request req;
  memset(&req, 0, sizeof req);
  req.c = &c;
  req.payload = payload;
  req.payload_len = len;
  req.correlation_id = kafka_be32(payload + 4);
  fuzz_finished = 0;
  fuzz_dispatch(&req, fuzz_dispatch_data);
  fuzz_check(fuzz_finished == 1); /* every request finished exactly once */
  free(c.auth);
  free(payload);
  return 0;
}
