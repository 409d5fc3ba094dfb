/* kafka_handle_sasl.c - SaslHandshake v0-1 and SaslAuthenticate v0-1:
 * SCRAM-SHA-256, SCRAM-SHA-512, and PLAIN on a TLS conn (SASL_SSL), on the Kafka port
 * over the native Authenticate (the same users and credentials, the same
 * exchange state on the conn, the same failure counting;
 * src/server/handle_auth.c), after which the conn's principal is the
 * user's and the ACLs apply to it as to a native client. PLAIN is one
 * message ("[authzid] NUL user NUL password") and is not offered on a
 * plaintext conn, where the password would cross the network as it is.
 *
 * Two shapes, chosen by the handshake's version (Kafka's KIP-152):
 *   v1 (librdkafka): each SCRAM message in a SaslAuthenticate request and
 *      answer; a refusal is SASL_AUTHENTICATION_FAILED with a message.
 *   v0 (kafka-python): each SCRAM message as a raw frame, int32 size then
 *      the bytes, with no request header, answered the same way (no
 *      correlation id: KAFKA_CONN_RAW_ANSWER). A refusal has no error
 *      channel: logged and the conn closed, as Apache Kafka does.
 *
 * The conn's step (conn.proto_state):
 *
 *   NONE --SaslHandshake v0--> RAW --token...--> NONE (authenticated)
 *        \-SaslHandshake v1--> FRAMED --SaslAuthenticate...--> NONE
 *   (SCRAM-SHA-512: RAW_512 and FRAMED_512; PLAIN: RAW_PLAIN and
 *   FRAMED_PLAIN, one token each)
 *   any failure: RAW closes the conn; FRAMED answers the error and
 *   returns to NONE (the client may start again, within the native limit
 *   on failures per conn).
 *
 * With --auth required, kafka_dispatch.c lets nothing but ApiVersions and
 * these through before the conn has a principal. */
#include "kafka/kafka_handlers.h"

#include "common/log.h"
#include "server/handlers.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#define KAFKA_SASL_SCRAM "SCRAM-SHA-256"
#define KAFKA_SASL_SCRAM_512 "SCRAM-SHA-512"
#define KAFKA_SASL_PLAIN "PLAIN"

/* The mechanism of a conn's exchange (its state). */
static const char *kafka_sasl_mechanism(int state)
{
  switch (state) {
  case KAFKA_SASL_RAW_PLAIN:
  case KAFKA_SASL_FRAMED_PLAIN:
    return KAFKA_SASL_PLAIN;
  case KAFKA_SASL_RAW_512:
  case KAFKA_SASL_FRAMED_512:
    return KAFKA_SASL_SCRAM_512;
  default:
    return KAFKA_SASL_SCRAM;
  }
}

static bool kafka_sasl_is(struct kafka_str mech, const char *name)
{
  return mech.ptr != NULL && mech.len == strlen(name) && memcmp(mech.ptr, name, mech.len) == 0;
}

static void kafka_sasl_set_state(struct conn *c, enum kafka_sasl_state to)
{
  log_debug("kafka", "conn %" PRIu64 " %s: SASL step %d -> %d", c->id, c->peer, c->proto_state,
            (int)to);
  c->proto_state = (int)to;
}

/* ---- SaslHandshake ---- */

void kafka_handle_sasl_handshake(struct kafka_req *kr)
{
  struct conn *c = kr->req->c;
  struct kafka_str mech = kafka_get_string(&kr->body);
  if (kr->body.err != 0) {
    kafka_req_malformed(kr);
    return;
  }
  int16_t err = KAFKA_ERR_NONE;
  bool v0 = kr->h.api_version == 0;
  bool tls = conn_encrypted(c); /* PLAIN only there */
  /* Refused once logged in, or while an exchange is under way; a client
   * certificate's principal (SASL_SSL under mutual TLS) is replaced by the
   * login, as in Kafka and on the native port. */
  if (!handle_auth_may_start(c) || c->proto_state != KAFKA_SASL_NONE) {
    err = KAFKA_ERR_ILLEGAL_SASL_STATE;
  } else if (kafka_sasl_is(mech, KAFKA_SASL_SCRAM)) {
    kafka_sasl_set_state(c, v0 ? KAFKA_SASL_RAW : KAFKA_SASL_FRAMED);
  } else if (kafka_sasl_is(mech, KAFKA_SASL_SCRAM_512)) {
    kafka_sasl_set_state(c, v0 ? KAFKA_SASL_RAW_512 : KAFKA_SASL_FRAMED_512);
  } else if (tls && kafka_sasl_is(mech, KAFKA_SASL_PLAIN)) {
    kafka_sasl_set_state(c, v0 ? KAFKA_SASL_RAW_PLAIN : KAFKA_SASL_FRAMED_PLAIN);
  } else {
    err = KAFKA_ERR_UNSUPPORTED_SASL_MECHANISM;
  }
  struct kafka_buf b;
  kafka_buf_init(&b);
  kafka_put_err(&b, err);
  kafka_put_array_len(&b, tls ? 3 : 2);
  kafka_put_string(&b, KAFKA_SASL_SCRAM);
  kafka_put_string(&b, KAFKA_SASL_SCRAM_512);
  if (tls) {
    kafka_put_string(&b, KAFKA_SASL_PLAIN);
  }
  kafka_req_respond(kr, &b);
}

/* ---- one SASL message through the native Authenticate ---- */

static void kafka_sasl_relay(struct kafka_req *kr, struct kafka_str token, kafka_relay_fn fn)
{
  struct kafka_gop *op = kafka_gop_new(kr);
  Cairn__Client__AuthenticateRequest *r = op != NULL ? kafka_gop_alloc(op, sizeof *r) : NULL;
  if (r == NULL) {
    fn(kr, NULL, NULL, 0);
    return;
  }
  cairn__client__authenticate_request__init(r);
  r->mechanism = (char *)kafka_sasl_mechanism(kr->req->c->proto_state);
  r->message.data = (uint8_t *)token.ptr; /* borrowed from the request, which outlives the relay */
  r->message.len = token.len;
  op->env.body_case = CAIRN__CLIENT__ENVELOPE__BODY_AUTHENTICATE_REQ;
  op->env.authenticate_req = r;
  kafka_req_relay(kr, CAIRN__CLIENT__API__API_AUTHENTICATE, &op->env, NULL, 0, fn);
}

/* The native answer: its code, and its SCRAM message (borrowed from env). */
static Cairn__Client__ErrorCode kafka_sasl_outcome(const Cairn__Client__Envelope *env,
                                                   struct kafka_str *msg, bool *done)
{
  Cairn__Client__ErrorCode code =
      kafka_relay_code(env, CAIRN__CLIENT__ENVELOPE__BODY_AUTHENTICATE_RESP);
  *msg = (struct kafka_str){0};
  *done = false;
  if (code == CAIRN__CLIENT__ERROR_CODE__OK) {
    const Cairn__Client__AuthenticateResponse *a = env->authenticate_resp;
    *msg = (struct kafka_str){a->message.data, a->message.len};
    *done = a->done;
  }
  return code;
}

/* ---- SaslAuthenticate (after a v1 handshake) ---- */

static void kafka_sasl_auth_on_answer(struct kafka_req *kr, const Cairn__Client__Envelope *env,
                                      const struct conn_part *parts, size_t nparts)
{
  (void)parts;
  (void)nparts;
  struct conn *c = kr->req->c;
  struct kafka_str msg;
  bool done;
  Cairn__Client__ErrorCode code = kafka_sasl_outcome(env, &msg, &done);
  int16_t err = KAFKA_ERR_NONE;
  char text[200] = "";
  if (code != CAIRN__CLIENT__ERROR_CODE__OK) {
    err = KAFKA_ERR_SASL_AUTHENTICATION_FAILED;
    const char *why = kafka_relay_message(env);
    snprintf(text, sizeof text, "Authentication failed: %s",
             why != NULL ? why : "wrong password or unknown user");
    kafka_sasl_set_state(c, KAFKA_SASL_NONE);
  } else if (done) {
    kafka_sasl_set_state(c, KAFKA_SASL_NONE); /* authenticated: c->principal is set */
  }
  struct kafka_buf b;
  kafka_buf_init(&b);
  kafka_put_err(&b, err);
  kafka_put_string(&b, err != KAFKA_ERR_NONE ? text : NULL);
  kafka_put_bytes(&b, msg.ptr, msg.len);
  if (kr->h.api_version >= 1) {
    kafka_put_i64(&b, 0); /* session_lifetime_ms: no re-authentication */
  }
  kafka_req_respond(kr, &b);
}

void kafka_handle_sasl_authenticate(struct kafka_req *kr)
{
  struct conn *c = kr->req->c;
  struct kafka_str token = kafka_get_bytes(&kr->body);
  if (kr->body.err != 0) {
    kafka_req_malformed(kr);
    return;
  }
  if (c->proto_state != KAFKA_SASL_FRAMED && c->proto_state != KAFKA_SASL_FRAMED_PLAIN &&
      c->proto_state != KAFKA_SASL_FRAMED_512) {
    struct kafka_buf b;
    kafka_buf_init(&b);
    kafka_put_err(&b, KAFKA_ERR_ILLEGAL_SASL_STATE);
    kafka_put_string(&b, "SaslAuthenticate without a SaslHandshake v1 first");
    kafka_put_bytes(&b, NULL, 0);
    if (kr->h.api_version >= 1) {
      kafka_put_i64(&b, 0);
    }
    kafka_req_respond(kr, &b);
    return;
  }
  kafka_sasl_relay(kr, token, kafka_sasl_auth_on_answer);
}

/* ---- raw tokens (after a v0 handshake) ---- */

static void kafka_sasl_raw_on_answer(struct kafka_req *kr, const Cairn__Client__Envelope *env,
                                     const struct conn_part *parts, size_t nparts)
{
  (void)parts;
  (void)nparts;
  struct conn *c = kr->req->c;
  struct kafka_str msg;
  bool done;
  Cairn__Client__ErrorCode code = kafka_sasl_outcome(env, &msg, &done);
  if (code != CAIRN__CLIENT__ERROR_CODE__OK) {
    const char *why = kafka_relay_message(env);
    log_warn("kafka", "conn %" PRIu64 " %s: SASL (raw tokens) refused: %s; closing", c->id,
             c->peer, why != NULL ? why : "authentication failed");
    kafka_sasl_set_state(c, KAFKA_SASL_NONE);
    kafka_req_close(kr);
    return;
  }
  if (done) {
    kafka_sasl_set_state(c, KAFKA_SASL_NONE);
  }
  struct kafka_buf b;
  kafka_buf_init(&b);
  kafka_put_raw(&b, msg.ptr, msg.len);
  kafka_req_respond(kr, &b);
}

void kafka_sasl_raw_token(struct kafka_req *kr)
{
  /* The whole frame is the token; its answer has no correlation id. */
  kr->req->correlation_id = KAFKA_CONN_RAW_ANSWER;
  struct kafka_str token = {kr->body.p, kr->body.len};
  kafka_sasl_relay(kr, token, kafka_sasl_raw_on_answer);
}
