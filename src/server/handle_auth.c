/* handle_auth.c - Authenticate (SCRAM-SHA-256 or -512 on the connection, against
 * the users in the metadata state; or SASL PLAIN over TLS, checked against
 * the same stored credential on the thread pool) and the user admin requests
 * (UpsertUser and DeleteUser through the controller leader, ListUsers from
 * any node's state). docs/security.md.
 *
 * Bad input: a SCRAM message is at most SCRAM_MSG_MAX bytes; a connection
 * with AUTH_CONN_FAILURES failed attempts is closed; a source address with
 * AUTH_ADDR_FAILURES failures within AUTH_ADDR_WINDOW_MS gets RATE_LIMITED
 * until the window passes (a fixed table of AUTH_ADDR_SLOTS addresses, the
 * oldest slot reused), so other clients are not affected. One log line per
 * failed connection. */
#include "server/handlers.h"

#include "cluster/chs.h"
#include "common/err.h"
#include "common/log.h"
#include "net/scram.h"
#include "net/wire_err.h"

#include <openssl/crypto.h>

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define AUTH_PLAIN_MECHANISM "PLAIN"     /* over TLS only, checked against the SCRAM credential */
#define AUTH_NODE_MECHANISM "CAIRN-NODE" /* nodes, with the cluster key */
#define AUTH_NODE_LABEL "cairn node auth v1"
#define AUTH_CONN_FAILURES 3
#define AUTH_ADDR_FAILURES 20
#define AUTH_ADDR_WINDOW_MS 60000
#define AUTH_ADDR_SLOTS 256

/* Failures per source address (the host part of the conn's peer). */
struct auth_slot {
  char host[64];
  uint64_t since_ms;
  uint32_t failures;
};

static struct auth_slot auth_slots[AUTH_ADDR_SLOTS];
static uint8_t auth_fake_key[32]; /* makes an unknown user's salt stable */
static bool auth_fake_key_set;

static void auth_host(const struct conn *c, char *host, size_t cap)
{
  snprintf(host, cap, "%s", c->peer);
  char *colon = strrchr(host, ':');
  if (colon != NULL) {
    *colon = '\0';
  }
}

/* The slot of host (made when missing); NULL never. */
static struct auth_slot *auth_slot_of(const char *host, uint64_t now)
{
  struct auth_slot *oldest = &auth_slots[0];
  for (size_t i = 0; i < AUTH_ADDR_SLOTS; i++) {
    struct auth_slot *s = &auth_slots[i];
    if (strcmp(s->host, host) == 0) {
      if (now - s->since_ms >= AUTH_ADDR_WINDOW_MS) {
        s->since_ms = now;
        s->failures = 0;
      }
      return s;
    }
    if (s->since_ms < oldest->since_ms) {
      oldest = s;
    }
  }
  snprintf(oldest->host, sizeof oldest->host, "%s", host);
  oldest->since_ms = now;
  oldest->failures = 0;
  return oldest;
}

static void auth_respond(struct conn_request *req, Cairn__Client__ErrorCode code, const char *msg,
                         const char *out, bool done, const char *principal)
{
  Cairn__Client__Error err = CAIRN__CLIENT__ERROR__INIT;
  err.code = code;
  err.message = (char *)(msg != NULL ? msg : "");
  Cairn__Client__AuthenticateResponse r = CAIRN__CLIENT__AUTHENTICATE_RESPONSE__INIT;
  r.error = &err;
  if (out != NULL) {
    r.message.data = (uint8_t *)out;
    r.message.len = strlen(out);
  }
  r.done = done;
  r.principal = (char *)(principal != NULL ? principal : "");
  Cairn__Client__Envelope env = CAIRN__CLIENT__ENVELOPE__INIT;
  env.body_case = CAIRN__CLIENT__ENVELOPE__BODY_AUTHENTICATE_RESP;
  env.authenticate_resp = &r;
  conn_respond(req, &env, NULL, 0);
}

static void auth_state_free(void *p)
{
  if (p != NULL) {
    memset(p, 0, sizeof(struct scram_server));
    free(p);
  }
}

static void auth_fail(struct node *n, struct conn_request *req, const char *user, const char *why,
                      const char *out);

/* Marks a node exchange in c->auth (a SCRAM state never has it). */
#define AUTH_NODE_STATE 99

bool handle_auth_exempt(struct node *n, const struct conn_request *req)
{
  switch (req->api) {
  case CAIRN__CLIENT__API__API_HELLO:
  case CAIRN__CLIENT__API__API_AUTHENTICATE:
    return true;
  case CAIRN__CLIENT__API__API_NODE_REGISTER:
  case CAIRN__CLIENT__API__API_NODE_HEARTBEAT:
    return n->cluster_key != NULL; /* they carry a cluster proof, checked */
  case CAIRN__CLIENT__API__API_UPSERT_USER:
  case CAIRN__CLIENT__API__API_METADATA:
    /* The first user of a cluster can only be made this way (a client
     * library reads the metadata before its first request). */
    return ctl_state(&n->ctl)->nusers == 0;
  default:
    return false;
  }
}

/* A node's exchange: "node=ID", then HMAC(cluster key, label || nonce ||
 * "node=ID") over the nonce this node sent. */
struct auth_node {
  struct scram_server pad; /* freed by auth_state_free like a SCRAM state */
  char first[64];
  char nonce[SCRAM_NONCE_TEXT];
};

static void auth_node_step(struct node *n, struct conn_request *req, const char *msg, size_t len)
{
  struct conn *c = req->c;
  if (n->cluster_key == NULL) {
    auth_fail(n, req, "?", "node authentication needs the cluster secret", NULL);
    return;
  }
  if (c->auth == NULL) {
    struct auth_node *a = calloc(1, sizeof *a);
    uint8_t raw[SCRAM_NONCE_RAW];
    if (a == NULL || len < 6 || len >= sizeof a->first || memcmp(msg, "node=", 5) != 0 ||
        chs_random(raw, sizeof raw) != 0) {
      free(a);
      auth_fail(n, req, "?", "malformed node authentication", NULL);
      return;
    }
    memcpy(a->first, msg, len);
    a->pad.state = (enum scram_server_state)AUTH_NODE_STATE;
    scram_nonce(raw, a->nonce);
    c->auth = a;
    c->auth_free = auth_state_free;
    auth_respond(req, CAIRN__CLIENT__ERROR_CODE__OK, "", a->nonce, false, NULL);
    return;
  }
  struct auth_node *a = c->auth;
  if ((int)a->pad.state != AUTH_NODE_STATE) {
    auth_fail(n, req, "?", "mechanisms mixed in one exchange", NULL);
    return;
  }
  char t[sizeof a->nonce + sizeof a->first];
  int tn = snprintf(t, sizeof t, "%s%s", a->nonce, a->first);
  uint8_t mac[CHS_MAC_LEN];
  chs_mac(n->cluster_key, n->cluster_key_len, AUTH_NODE_LABEL, (const uint8_t *)t, (size_t)tn, mac);
  if (len != CHS_MAC_LEN || !chs_mac_equal(mac, (const uint8_t *)msg)) {
    auth_fail(n, req, a->first, "wrong cluster proof", NULL);
    return;
  }
  snprintf(c->principal, sizeof c->principal, "Node:%s", a->first + 5);
  auth_state_free(c->auth);
  c->auth = NULL;
  log_debug("auth", "conn %" PRIu64 " %s: authenticated as %s", c->id, c->peer, c->principal);
  auth_respond(req, CAIRN__CLIENT__ERROR_CODE__OK, "", NULL, true, c->principal);
}

/* A failed attempt: counted on the conn and its address, logged once per
 * conn; the conn closes at AUTH_CONN_FAILURES. */
static void auth_fail(struct node *n, struct conn_request *req, const char *user, const char *why,
                      const char *out)
{
  struct conn *c = req->c;
  char who[SCRAM_USER_MAX + 8];
  snprintf(who, sizeof who, "%s", user); /* user may point into c->auth */
  user = who;
  auth_state_free(c->auth);
  c->auth = NULL;
  c->auth_failures++;
  char host[64];
  auth_host(c, host, sizeof host);
  auth_slot_of(host, uv_now(n->loop))->failures++;
  if (c->auth_failures == 1) {
    log_warn("auth", "conn %" PRIu64 " %s: authentication of '%s' failed: %s", c->id, c->peer, user,
             why);
  }
  auth_respond(req, CAIRN__CLIENT__ERROR_CODE__AUTHENTICATION_FAILED, why, out, false, NULL);
  if (c->auth_failures >= AUTH_CONN_FAILURES) {
    log_warn("auth", "conn %" PRIu64 " %s: %u failed authentications, closing", c->id, c->peer,
             c->auth_failures);
    conn_close(c);
  }
}

/* ---- PLAIN (RFC 4616) ---- */

/* Marks a PLAIN check under way in c->auth (a SCRAM state never has it):
 * another Authenticate meanwhile is refused, not mixed in. */
#define AUTH_PLAIN_STATE 98

/* One PLAIN check on the thread pool: the password against the user's
 * SCRAM credential (PBKDF2 over its iterations, milliseconds: never on the
 * loop). req is NULL once the conn closed under it (auth_plain_on_cancel);
 * the work then only frees itself. */
struct auth_plain {
  uv_work_t work;
  struct node *n;
  struct conn_request *req;
  char user[SCRAM_USER_MAX + 1];
  char password[256];
  struct scram_cred cred; /* the user's, or made up (unknown users fail alike) */
  bool known;
  bool ok;
};

static void auth_plain_run(uv_work_t *w)
{
  struct auth_plain *p = w->data;
  p->ok = scram_password_matches(&p->cred, p->password) && p->known;
  OPENSSL_cleanse(p->password, sizeof p->password);
}

static void auth_plain_done(uv_work_t *w, int status)
{
  struct auth_plain *p = w->data;
  struct conn_request *req = p->req;
  if (req != NULL) {
    struct conn *c = req->c;
    conn_request_set_cancel(req, NULL);
    req->handler_data = NULL;
    auth_state_free(c->auth); /* the marker */
    c->auth = NULL;
    if (status != 0 || !p->ok) {
      auth_fail(p->n, req, p->user, "wrong password or unknown user", NULL);
    } else {
      snprintf(c->principal, sizeof c->principal, "User:%s", p->user);
      log_info("auth", "conn %" PRIu64 " %s: authenticated as %s (PLAIN)", c->id, c->peer,
               c->principal);
      auth_respond(req, CAIRN__CLIENT__ERROR_CODE__OK, "", NULL, true, c->principal);
    }
  }
  OPENSSL_cleanse(p, sizeof *p);
  free(p);
}

static void auth_plain_on_cancel(struct conn_request *req)
{
  struct auth_plain *p = req->handler_data;
  p->req = NULL; /* the work frees itself when it ends */
  req->handler_data = NULL;
  conn_respond_error(req, CAIRN__CLIENT__ERROR_CODE__SHUTTING_DOWN, "connection closing");
}

/* Splits "[authzid] NUL user NUL password" (len bytes) into p's user and
 * password. Returns false for another shape, a bad user name, a password
 * too long or with a NUL, or an authzid other than the user. */
static bool auth_plain_parse(struct auth_plain *p, const uint8_t *msg, size_t len)
{
  const uint8_t *z1 = len > 0 ? memchr(msg, 0, len) : NULL;
  if (z1 == NULL) {
    return false;
  }
  size_t azlen = (size_t)(z1 - msg);
  const uint8_t *user = z1 + 1;
  size_t rest = len - azlen - 1;
  const uint8_t *z2 = rest > 0 ? memchr(user, 0, rest) : NULL;
  if (z2 == NULL) {
    return false;
  }
  size_t ulen = (size_t)(z2 - user);
  size_t plen = rest - ulen - 1;
  if (ulen == 0 || ulen > SCRAM_USER_MAX || plen >= sizeof p->password ||
      memchr(z2 + 1, 0, plen) != NULL ||
      (azlen > 0 && (azlen != ulen || memcmp(msg, user, ulen) != 0))) {
    return false;
  }
  memcpy(p->user, user, ulen);
  p->user[ulen] = '\0';
  memcpy(p->password, z2 + 1, plen);
  p->password[plen] = '\0';
  return scram_user_ok(p->user);
}

/* SASL PLAIN: one message, checked on the thread pool. Only over TLS: the
 * password crosses the network as it is. */
static void auth_plain_start(struct node *n, struct conn_request *req, const uint8_t *msg,
                             size_t len)
{
  struct conn *c = req->c;
  if (!handle_auth_may_start(c)) {
    auth_respond(req, CAIRN__CLIENT__ERROR_CODE__AUTHENTICATION_FAILED,
                 "this connection is already authenticated", NULL, false, NULL);
    return;
  }
  if (c->auth != NULL) {
    auth_fail(n, req, "?", "mechanisms mixed in one exchange", NULL);
    return;
  }
  if (!conn_encrypted(c)) {
    auth_fail(n, req, "?",
              "PLAIN only over TLS (the password would cross in the clear): "
              "use SCRAM-SHA-256 or SCRAM-SHA-512",
              NULL);
    return;
  }
  if (len > SCRAM_MSG_MAX) {
    auth_fail(n, req, "?", "PLAIN message too large", NULL);
    return;
  }
  struct auth_plain *p = calloc(1, sizeof *p);
  struct scram_server *mark = calloc(1, sizeof *mark);
  if (p == NULL || mark == NULL) {
    free(p);
    free(mark);
    conn_respond_error(req, CAIRN__CLIENT__ERROR_CODE__UNKNOWN, "out of memory");
    return;
  }
  if (!auth_plain_parse(p, msg, len)) {
    free(p);
    free(mark);
    auth_fail(n, req, "?", "malformed PLAIN message", NULL);
    return;
  }
  const struct meta_user *u = meta_user_find(ctl_state(&n->ctl), p->user);
  p->known = u != NULL;
  if (u != NULL) {
    p->cred = u->cred;
  } else {
    /* An unknown user costs what a known one does (no user enumeration by
     * timing): a credential made up from the fake key. */
    if (!auth_fake_key_set) {
      auth_fake_key_set = chs_random(auth_fake_key, sizeof auth_fake_key) == 0;
    }
    p->cred.salt_len = 16;
    chs_mac(auth_fake_key, sizeof auth_fake_key, "cairn fake salt", (const uint8_t *)p->user,
            strlen(p->user), p->cred.salt);
    p->cred.iterations = SCRAM_ITERATIONS_DEFAULT;
  }
  p->n = n;
  p->req = req;
  p->work.data = p;
  mark->state = (enum scram_server_state)AUTH_PLAIN_STATE;
  if (uv_queue_work(n->loop, &p->work, auth_plain_run, auth_plain_done) != 0) {
    OPENSSL_cleanse(p, sizeof *p);
    free(p);
    free(mark);
    conn_respond_error(req, CAIRN__CLIENT__ERROR_CODE__UNKNOWN, "cannot queue the PLAIN check");
    return;
  }
  c->auth = mark;
  c->auth_free = auth_state_free;
  req->handler_data = p;
  conn_request_set_cancel(req, auth_plain_on_cancel);
}

/* The rule handlers.h states: a login replaces only a certificate's
 * principal, never another login's. */
bool handle_auth_may_start(const struct conn *c)
{
  if (c->principal[0] == '\0' || c->auth != NULL) {
    return true;
  }
  const char *cn = conn_tls_principal(c);
  return cn[0] != '\0' && strncmp(c->principal, "User:", 5) == 0 &&
         strcmp(c->principal + 5, cn) == 0;
}

/* u's credential for mech, or NULL (no such user, or one without a
 * credential of mech: both look alike to the client). */
static const struct scram_cred *auth_cred_of(const struct meta_user *u, enum scram_mech mech)
{
  if (u == NULL) {
    return NULL;
  }
  if (mech == SCRAM_SHA_512) {
    return u->cred512.salt_len != 0 ? &u->cred512 : NULL;
  }
  return &u->cred;
}

void handle_authenticate(struct node *n, struct conn_request *req)
{
  const Cairn__Client__AuthenticateRequest *r = req->env->authenticate_req;
  struct conn *c = req->c;
  char host[64];
  auth_host(c, host, sizeof host);
  struct auth_slot *slot = auth_slot_of(host, uv_now(n->loop));
  if (slot->failures >= AUTH_ADDR_FAILURES) {
    auth_respond(req, CAIRN__CLIENT__ERROR_CODE__RATE_LIMITED,
                 "too many failed authentications from this address: wait a minute", NULL, false,
                 NULL);
    return;
  }
  /* Nothing touches c->auth while a PLAIN check holds it. */
  if (c->auth != NULL && (int)((struct scram_server *)c->auth)->state == AUTH_PLAIN_STATE) {
    auth_respond(req, CAIRN__CLIENT__ERROR_CODE__AUTHENTICATION_FAILED,
                 "a PLAIN authentication of this connection is under way", NULL, false, NULL);
    return;
  }
  if (r->mechanism != NULL && strcmp(r->mechanism, AUTH_NODE_MECHANISM) == 0 &&
      r->message.len <= SCRAM_MSG_MAX && handle_auth_may_start(c)) {
    auth_node_step(n, req, (const char *)r->message.data, r->message.len);
    return;
  }
  if (r->mechanism != NULL && strcmp(r->mechanism, AUTH_PLAIN_MECHANISM) == 0) {
    auth_plain_start(n, req, r->message.data, r->message.len);
    return;
  }
  enum scram_mech mech;
  if (!scram_mech_from_name(r->mechanism, &mech)) {
    auth_fail(n, req, "?",
              "unsupported mechanism (SCRAM-SHA-256, SCRAM-SHA-512, or PLAIN over TLS)", NULL);
    return;
  }
  if (r->message.len > SCRAM_MSG_MAX) {
    auth_fail(n, req, "?", "SCRAM message too large", NULL);
    return;
  }
  if (!handle_auth_may_start(c)) {
    auth_respond(req, CAIRN__CLIENT__ERROR_CODE__AUTHENTICATION_FAILED,
                 "this connection is already authenticated", NULL, false, NULL);
    return;
  }
  const char *msg = (const char *)r->message.data;
  size_t len = r->message.len;
  char out[SCRAM_MSG_MAX + 1];
  if (c->auth == NULL) {
    /* client-first */
    struct scram_server *s = calloc(1, sizeof *s);
    if (s == NULL) {
      conn_respond_error(req, CAIRN__CLIENT__ERROR_CODE__UNKNOWN, "out of memory");
      return;
    }
    if (scram_server_parse_first(s, mech, msg != NULL ? msg : "", len) != 0) {
      free(s);
      auth_fail(n, req, "?", "malformed SCRAM client-first message", NULL);
      return;
    }
    uint8_t raw[SCRAM_NONCE_RAW];
    char snonce[SCRAM_NONCE_TEXT];
    if (!auth_fake_key_set) {
      auth_fake_key_set = chs_random(auth_fake_key, sizeof auth_fake_key) == 0;
    }
    uint8_t fake_salt[CHS_MAC_LEN];
    chs_mac(auth_fake_key, sizeof auth_fake_key, "cairn fake salt", (const uint8_t *)s->user,
            strlen(s->user), fake_salt);
    if (!auth_fake_key_set || chs_random(raw, sizeof raw) != 0) {
      free(s);
      conn_respond_error(req, CAIRN__CLIENT__ERROR_CODE__UNKNOWN, "no randomness");
      return;
    }
    scram_nonce(raw, snonce);
    const struct meta_user *u = meta_user_find(ctl_state(&n->ctl), s->user);
    int rv = scram_server_challenge(s, auth_cred_of(u, mech), snonce, fake_salt, out, sizeof out);
    if (rv < 0) {
      free(s);
      auth_fail(n, req, "?", "cannot answer that client-first message", NULL);
      return;
    }
    c->auth = s;
    c->auth_free = auth_state_free;
    auth_respond(req, CAIRN__CLIENT__ERROR_CODE__OK, "", out, false, NULL);
    return;
  }
  /* client-final */
  struct scram_server *s = c->auth;
  if ((int)s->state == AUTH_NODE_STATE || s->mech != mech) {
    auth_fail(n, req, "?", "mechanisms mixed in one exchange", NULL);
    return;
  }
  char user[SCRAM_USER_MAX + 1];
  snprintf(user, sizeof user, "%s", s->user);
  bool no512 =
      mech == SCRAM_SHA_512 && !s->known && meta_user_find(ctl_state(&n->ctl), user) != NULL;
  int rv = scram_server_final(s, msg != NULL ? msg : "", len, out, sizeof out);
  if (rv != 0) {
    if (no512) {
      /* The log, never the client (which must not learn that the user
       * exists), says why: made before SCRAM-SHA-512, its password must be
       * set again. */
      log_warn("auth",
               "conn %" PRIu64 " %s: user '%s' has no SCRAM-SHA-512 credential (created before "
               "Cairn offered it: `cairn user create` it again)",
               c->id, c->peer, user);
    }
    auth_fail(n, req, user,
              rv == CAIRN_EAUTH ? "wrong password or unknown user"
                                : "malformed or replayed SCRAM client-final message",
              rv == CAIRN_EAUTH ? out : NULL);
    return;
  }
  auth_state_free(c->auth);
  c->auth = NULL;
  snprintf(c->principal, sizeof c->principal, "User:%s", user);
  log_info("auth", "conn %" PRIu64 " %s: authenticated as %s", c->id, c->peer, c->principal);
  auth_respond(req, CAIRN__CLIENT__ERROR_CODE__OK, "", out, true, c->principal);
}

/* ---- user admin ---- */

struct auth_op {
  struct ctl_propose prop;
  struct conn_request *req;
  Cairn__Client__Envelope__BodyCase resp_case;
};

static void auth_admin_respond(struct conn_request *req, Cairn__Client__Envelope__BodyCase body,
                               Cairn__Client__ErrorCode code, const char *msg)
{
  Cairn__Client__Error err = CAIRN__CLIENT__ERROR__INIT;
  err.code = code;
  err.message = (char *)(msg != NULL ? msg : "");
  Cairn__Client__Envelope env = CAIRN__CLIENT__ENVELOPE__INIT;
  Cairn__Client__UpsertUserResponse up = CAIRN__CLIENT__UPSERT_USER_RESPONSE__INIT;
  Cairn__Client__DeleteUserResponse del = CAIRN__CLIENT__DELETE_USER_RESPONSE__INIT;
  env.body_case = body;
  if (body == CAIRN__CLIENT__ENVELOPE__BODY_UPSERT_USER_RESP) {
    up.error = &err;
    env.upsert_user_resp = &up;
  } else {
    del.error = &err;
    env.delete_user_resp = &del;
  }
  if (req->canceled) {
    conn_respond_error(req, CAIRN__CLIENT__ERROR_CODE__SHUTTING_DOWN, "connection closing");
    return;
  }
  conn_respond(req, &env, NULL, 0);
}

static void auth_on_applied(struct ctl_propose *prop, int status, const struct meta_result *res)
{
  struct auth_op *op = prop->data;
  if (status != 0) {
    auth_admin_respond(op->req, op->resp_case, CAIRN__CLIENT__ERROR_CODE__NOT_CONTROLLER,
                       cairn_strerror(status));
  } else {
    auth_admin_respond(op->req, op->resp_case, wire_err_from(res->code),
                       res->code != 0 ? res->msg : "");
  }
  free(op);
}

static void auth_propose(struct node *n, struct conn_request *req, uint8_t *cmd, size_t len,
                         int encode_rv, Cairn__Client__Envelope__BodyCase resp_case)
{
  if (encode_rv != 0) {
    auth_admin_respond(req, resp_case, CAIRN__CLIENT__ERROR_CODE__MALFORMED_REQUEST,
                       "a bad user name or credential (names: 1..64 of A-Z a-z 0-9 . _ @ -)");
    return;
  }
  struct auth_op *op = calloc(1, sizeof *op);
  if (op == NULL) {
    free(cmd);
    conn_respond_error(req, CAIRN__CLIENT__ERROR_CODE__UNKNOWN, "out of memory");
    return;
  }
  op->req = req;
  op->resp_case = resp_case;
  op->prop.data = op;
  int rv = ctl_propose(&n->ctl, &op->prop, cmd, len, auth_on_applied);
  free(cmd);
  if (rv != 0) {
    free(op);
    auth_admin_respond(req, resp_case, CAIRN__CLIENT__ERROR_CODE__NOT_CONTROLLER,
                       cairn_strerror(rv));
  }
}

void handle_upsert_user(struct node *n, struct conn_request *req)
{
  if (handle_forward(n, req)) {
    return;
  }
  const Cairn__Client__UpsertUserRequest *r = req->env->upsert_user_req;
  if (r->name != NULL && strcmp(r->name, "ANONYMOUS") == 0) {
    /* User:ANONYMOUS is every connection that did not log in (authz.h) */
    auth_admin_respond(req, CAIRN__CLIENT__ENVELOPE__BODY_UPSERT_USER_RESP,
                       CAIRN__CLIENT__ERROR_CODE__MALFORMED_REQUEST,
                       "the user name ANONYMOUS is reserved (connections that did not log in)");
    return;
  }
  struct meta_user u;
  struct meta_user_fields f = {r->name,
                               r->salt.data,
                               r->salt.len,
                               r->iterations,
                               r->stored_key.data,
                               r->server_key.data,
                               r->stored_key.len,
                               r->server_key.len,
                               r->stored_key_512.data,
                               r->server_key_512.data,
                               r->stored_key_512.len,
                               r->server_key_512.len};
  int rv = r->name != NULL ? meta_user_set(&u, &f) : CAIRN_EINVAL;
  uint8_t *cmd = NULL;
  size_t len = 0;
  if (rv == 0) {
    rv = meta_cmd_upsert_user(&u, &cmd, &len);
  }
  auth_propose(n, req, cmd, len, rv, CAIRN__CLIENT__ENVELOPE__BODY_UPSERT_USER_RESP);
}

void handle_delete_user(struct node *n, struct conn_request *req)
{
  if (handle_forward(n, req)) {
    return;
  }
  const Cairn__Client__DeleteUserRequest *r = req->env->delete_user_req;
  uint8_t *cmd = NULL;
  size_t len = 0;
  int rv = meta_cmd_delete_user(r->name, &cmd, &len);
  auth_propose(n, req, cmd, len, rv, CAIRN__CLIENT__ENVELOPE__BODY_DELETE_USER_RESP);
}

void handle_list_users(struct node *n, struct conn_request *req)
{
  const struct meta_state *st = ctl_state(&n->ctl);
  char **names = calloc(st->nusers + 1, sizeof *names);
  if (names == NULL) {
    conn_respond_error(req, CAIRN__CLIENT__ERROR_CODE__UNKNOWN, "out of memory");
    return;
  }
  for (size_t i = 0; i < st->nusers; i++) {
    names[i] = (char *)st->users[i].name;
  }
  Cairn__Client__Error err = CAIRN__CLIENT__ERROR__INIT;
  Cairn__Client__ListUsersResponse r = CAIRN__CLIENT__LIST_USERS_RESPONSE__INIT;
  r.error = &err;
  r.names = names;
  r.n_names = st->nusers;
  Cairn__Client__Envelope env = CAIRN__CLIENT__ENVELOPE__INIT;
  env.body_case = CAIRN__CLIENT__ENVELOPE__BODY_LIST_USERS_RESP;
  env.list_users_resp = &r;
  conn_respond(req, &env, NULL, 0);
  free(names);
}
