/* test_security.c - security of real cairnd processes on loopback: the
 * cluster port's authenticated handshake (--cluster-secret-file). A
 * three-node cluster holding the secret forms and replicates; strangers on
 * its cluster port, a node with another secret and a node with none are
 * refused with a log line, and the cluster is not disturbed.
 *
 * SCRAM: users created, listed and deleted (through the wire and through
 * `cairn user`), logins right and wrong, replays, bad input and limits.
 *
 * Usage: test_security <path of cairnd> [<path of cairn>]
 * CAIRN_TEST_FILTER='*voter*' runs a subset; CAIRN_KEEP_TEST_DIR=1 keeps
 * the data dirs and node logs. */
#include "cairnd.h"
#include "format/endian.h"
#include "net/scram.h"
#include "wire_client.h"
#include "proc.h"
#include "testutil.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#define WAIT_MS 30000
#define FAST "--heartbeat-ms 100 --election-ms 1000 --node-timeout-ms 2000 --replace-delay-ms 2000"

static const char *cairnd_bin;
static const char *cairn_bin; /* the CLI: `cairn user` (optional second argument) */

static int exit_code_of(int st)
{
  return st >= 0 && WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* Writes a secret file (mode 0600) under the cluster's root; returns its path. */
static void write_secret(const struct cd_cluster *c, const char *name, const char *secret,
                         char *path, size_t len)
{
  snprintf(path, len, "%s/%s", c->root, name);
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  fprintf(f, "%s\n", secret);
  fclose(f);
  assert_int_equal(chmod(path, 0600), 0);
}

static void set_secret(struct cd_cluster *c, int i, const char *path)
{
  int n =
      snprintf(c->nodes[i].extra, sizeof c->nodes[i].extra, "--cluster-secret-file %.400s", path);
  assert_true(n > 0 && (size_t)n < sizeof c->nodes[i].extra && strlen(path) <= 400);
}

static int raw_connect(int port)
{
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  struct sockaddr_in sa = {.sin_family = AF_INET,
                           .sin_port = htons((uint16_t)port),
                           .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof sa), 0);
  struct timeval tv = {.tv_sec = 10};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  return fd;
}

/* Reads exactly n bytes; false on EOF, error or timeout. */
static bool read_full(int fd, uint8_t *buf, size_t n)
{
  size_t got = 0;
  while (got < n) {
    ssize_t r = recv(fd, buf + got, n - got, 0);
    if (r <= 0) {
      return false;
    }
    got += (size_t)r;
  }
  return true;
}

/* The node closes the connection (read returns 0 or an error). */
static void expect_closed(int fd)
{
  uint8_t b[64];
  ssize_t r;
  do {
    r = recv(fd, b, sizeof b, 0);
  } while (r > 0);
  assert_true(r == 0 || (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK));
  close(fd);
}

/* A batch, produced and read back through the partition's leader. */
static void produce_and_fetch(struct cd_cluster *c, const char *topic, uint64_t tag)
{
  size_t len = 0;
  uint8_t *b = tu_make_batch(tag, 3, 40, 1000, &len);
  int64_t base = -1;
  assert_int_equal(cd_produce(c, topic, 0, b, len, WAIT_MS, &base), 0);
  uint8_t *data = NULL;
  size_t dlen = 0;
  int64_t hw = 0;
  assert_int_equal(cd_fetch(c, topic, 0, base, 1 << 20, WAIT_MS, &data, &dlen, &hw), 0);
  assert_true(dlen >= len);
  /* The node stamps offsets into the header; the records come back as sent. */
  assert_memory_equal(data + len - 40, b + len - 40, 40);
  assert_true(hw > base);
  free(data);
  free(b);
}

/* Is node id alive in node i's metadata? */
static bool md_alive(struct cd_cluster *c, int i, uint64_t id)
{
  Cairn__Client__Envelope *env = NULL;
  Cairn__Client__MetadataResponse *md = cd_metadata(c, i, &env);
  bool alive = false;
  for (size_t j = 0; md != NULL && j < md->n_nodes; j++) {
    alive = alive || (md->nodes[j]->id == id && strcmp(md->nodes[j]->state, "alive") == 0);
  }
  if (env != NULL) {
    cairn__client__envelope__free_unpacked(env, NULL);
  }
  return alive;
}

static void test_security_cluster_with_secret_works_and_strangers_are_refused(void **state)
{
  struct cd_cluster c;
  assert_int_equal(cd_init(&c, cairnd_bin, 3, 3, FAST), 0);
  char good[600], bad[600];
  write_secret(&c, "secret", "6b1f0e9d2c3a4b5c6d7e8f90a1b2c3d4", good, sizeof good);
  write_secret(&c, "other", "00000000000000000000000000000000", bad, sizeof bad);
  for (int i = 0; i < 3; i++) {
    set_secret(&c, i, good);
    assert_int_equal(cd_start(&c, i), 0);
  }
  uint64_t all[3] = {1, 2, 3};
  assert_int_equal(cd_wait_alive(&c, 0, all, 3, WAIT_MS), 0);
  char msg[256];
  assert_int_equal(cd_create_topic(&c, 1, "secure", 1, 3, WAIT_MS, msg, sizeof msg), 0);
  produce_and_fetch(&c, "secure", 1);

  /* A stranger speaking the plain preamble (a node without the secret). */
  int port = c.nodes[0].cluster_port;
  int fd = raw_connect(port);
  uint8_t challenge[38];
  assert_true(read_full(fd, challenge, sizeof challenge)); /* the node speaks first */
  assert_memory_equal(challenge, "CRNH\x01\x00", 6);
  uint8_t pre[64] = "CRN1\x01\x00\x01\x00";
  assert_int_equal(send(fd, pre, sizeof pre, MSG_NOSIGNAL), (ssize_t)sizeof pre);
  expect_closed(fd);

  /* A stranger answering with a well-formed answer and a made-up MAC. */
  sleep(1); /* auth failures are logged at most once a second */
  fd = raw_connect(port);
  assert_true(read_full(fd, challenge, sizeof challenge));
  uint8_t answer[40 + 30 + 32];
  memset(answer, 0x5a, sizeof answer);
  memcpy(answer, "CRNA\x01\x00", 6);
  le_put16(answer + 38, 30);
  assert_int_equal(send(fd, answer, sizeof answer, MSG_NOSIGNAL), (ssize_t)sizeof answer);
  expect_closed(fd);

  /* Garbage, and a connection flood that says nothing: closed, bounded. */
  fd = raw_connect(port);
  assert_int_equal(send(fd, "GET / HTTP/1.1\r\n\r\n", 18, MSG_NOSIGNAL), 18);
  expect_closed(fd);
  int silent[50];
  for (int i = 0; i < 50; i++) {
    silent[i] = raw_connect(port);
  }

  /* A node with another secret, and one with none, joining: refused. */
  int wrong = cd_add_node(&c);
  assert_true(wrong >= 0);
  set_secret(&c, wrong, bad);
  assert_int_equal(cd_start(&c, wrong), 0);
  assert_int_equal(exit_code_of(tu_proc_wait(&c.nodes[wrong].proc, WAIT_MS)), 2);
  assert_true(tu_file_contains(c.nodes[wrong].log, "cluster secret"));
  int none = cd_add_node(&c);
  assert_true(none >= 0);
  assert_int_equal(cd_start(&c, none), 0);
  assert_int_equal(exit_code_of(tu_proc_wait(&c.nodes[none].proc, WAIT_MS)), 2);
  assert_false(md_alive(&c, 0, c.nodes[wrong].id));
  assert_false(md_alive(&c, 0, c.nodes[none].id));

  /* The cluster is undisturbed. */
  produce_and_fetch(&c, "secure", 2);
  for (int i = 0; i < 50; i++) {
    expect_closed(silent[i]); /* past the handshake deadline */
  }
  assert_true(tu_file_contains(c.nodes[0].log, "a plain preamble without the handshake"));
  assert_true(tu_file_contains(c.nodes[0].log, "cluster authentication failed"));
  assert_true(tu_file_contains(c.nodes[0].log, "no handshake before the deadline"));
  bool refused_logged = false;
  for (int i = 0; i < 3; i++) {
    refused_logged = refused_logged || tu_file_contains(c.nodes[i].log, "no valid cluster proof");
  }
  assert_true(refused_logged);
  assert_int_equal(cd_wait_alive(&c, 1, all, 3, WAIT_MS), 0);
  cd_destroy(&c);
}

/* A controller voter given another secret cannot take part in the
 * metadata group; the two others form it without it. */
static void test_security_voter_with_wrong_secret_cannot_join_raft(void **state)
{
  struct cd_cluster c;
  assert_int_equal(cd_init(&c, cairnd_bin, 3, 3, FAST), 0);
  char good[600], bad[600];
  write_secret(&c, "secret", "6b1f0e9d2c3a4b5c6d7e8f90a1b2c3d4", good, sizeof good);
  write_secret(&c, "other", "ffffffffffffffffffffffffffffffff", bad, sizeof bad);
  set_secret(&c, 0, good);
  set_secret(&c, 1, good);
  set_secret(&c, 2, bad);
  for (int i = 0; i < 3; i++) {
    assert_int_equal(cd_start(&c, i), 0);
  }
  uint64_t two[2] = {1, 2};
  assert_int_equal(cd_wait_alive(&c, 0, two, 2, WAIT_MS), 0);
  char msg[256];
  assert_int_equal(cd_create_topic(&c, 0, "pair", 1, 2, WAIT_MS, msg, sizeof msg), 0);
  produce_and_fetch(&c, "pair", 1);
  sleep(3);
  assert_false(md_alive(&c, 0, 3));
  /* Node 3 never learned the metadata: no cluster id in its answers. */
  Cairn__Client__Envelope *env = NULL;
  Cairn__Client__MetadataResponse *md = cd_metadata(&c, 2, &env);
  assert_true(md == NULL || md->cluster_id == NULL || md->cluster_id[0] == '\0');
  if (env != NULL) {
    cairn__client__envelope__free_unpacked(env, NULL);
  }
  /* Both sides logged the refusals. */
  assert_true(tu_file_contains(c.nodes[0].log, "cluster authentication failed") ||
              tu_file_contains(c.nodes[1].log, "cluster authentication failed"));
  /* (one line a second per node: whichever failure came first) */
  assert_true(tu_file_contains(c.nodes[2].log, "cluster handshake with") ||
              tu_file_contains(c.nodes[2].log, "cluster authentication failed"));
  cd_destroy(&c);
}

/* ---- SCRAM authentication on the client port ---- */

/* One request on w and its answer (owned: free_unpacked). */
static Cairn__Client__Envelope *wcall(struct wc *w, Cairn__Client__Envelope *env)
{
  if (wc_send(w, env, NULL, 0) != 0) {
    return NULL;
  }
  Cairn__Client__Envelope *resp = NULL;
  return wc_recv(w, 10000, &resp, NULL, NULL) == 0 ? resp : NULL;
}

/* One Authenticate step of mechanism (len bytes of msg); returns the
 * answer (owned) or NULL. */
static Cairn__Client__Envelope *auth_step_mech(struct wc *w, const char *mechanism, const char *msg,
                                               size_t len)
{
  Cairn__Client__AuthenticateRequest r = CAIRN__CLIENT__AUTHENTICATE_REQUEST__INIT;
  r.mechanism = (char *)mechanism;
  r.message.data = (uint8_t *)msg;
  r.message.len = len;
  Cairn__Client__Envelope env = CAIRN__CLIENT__ENVELOPE__INIT;
  env.api = CAIRN__CLIENT__API__API_AUTHENTICATE;
  env.body_case = CAIRN__CLIENT__ENVELOPE__BODY_AUTHENTICATE_REQ;
  env.authenticate_req = &r;
  Cairn__Client__Envelope *resp = wcall(w, &env);
  assert_true(resp == NULL || resp->body_case == CAIRN__CLIENT__ENVELOPE__BODY_AUTHENTICATE_RESP);
  return resp;
}

/* One SCRAM-SHA-256 step. */
static Cairn__Client__Envelope *auth_step(struct wc *w, const char *msg)
{
  return auth_step_mech(w, "SCRAM-SHA-256", msg, strlen(msg));
}

static int auth_code(const Cairn__Client__Envelope *resp)
{
  const Cairn__Client__Error *e = resp->authenticate_resp->error;
  return e != NULL ? (int)e->code : 0;
}

/* A whole SCRAM login of mech on w; returns the wire code (0:
 * authenticated) and, when final is not NULL, the client-final message
 * sent. */
static int login_mech(struct wc *w, enum scram_mech mech, const char *user, const char *password,
                      char *final, size_t cap)
{
  struct scram_client sc;
  char first[SCRAM_MSG_MAX], cf[SCRAM_MSG_MAX];
  const char *name = scram_mech_name(mech);
  assert_true(scram_client_start_mech(&sc, mech, user, password, "testclientnonce", first,
                                      sizeof first) > 0);
  Cairn__Client__Envelope *resp = auth_step_mech(w, name, first, strlen(first));
  assert_non_null(resp);
  int code = auth_code(resp);
  if (code != 0) {
    cairn__client__envelope__free_unpacked(resp, NULL);
    return code;
  }
  const ProtobufCBinaryData *m = &resp->authenticate_resp->message;
  int n = scram_client_final(&sc, (const char *)m->data, m->len, cf, sizeof cf);
  cairn__client__envelope__free_unpacked(resp, NULL);
  assert_true(n > 0);
  if (final != NULL) {
    snprintf(final, cap, "%s", cf);
  }
  resp = auth_step_mech(w, name, cf, strlen(cf));
  assert_non_null(resp);
  code = auth_code(resp);
  if (code == CAIRN__CLIENT__ERROR_CODE__AUTHENTICATION_FAILED) {
    /* The same answer for every refusal: nothing tells that the user exists. */
    assert_string_equal(resp->authenticate_resp->error->message, "wrong password or unknown user");
  }
  if (code == 0) {
    assert_true(resp->authenticate_resp->done);
    assert_string_equal(resp->authenticate_resp->principal, "User:alice");
    const ProtobufCBinaryData *v = &resp->authenticate_resp->message;
    assert_int_equal(scram_client_verify(&sc, (const char *)v->data, v->len), 0);
  }
  cairn__client__envelope__free_unpacked(resp, NULL);
  scram_client_wipe(&sc);
  return code;
}

static int login(struct wc *w, const char *user, const char *password, char *final, size_t cap)
{
  return login_mech(w, SCRAM_SHA_256, user, password, final, cap);
}

/* Creates user name (or sets its password): with SCRAM-SHA-512 keys
 * too if with512 (as libcairn sends them), else SHA-256 keys only (as a
 * client from before SCRAM-SHA-512). */
static int upsert_user_keys(struct wc *w, const char *name, const char *password, bool with512)
{
  static const uint8_t salt[16] = "per-user-salt-01";
  struct scram_cred cred, cred512;
  assert_int_equal(scram_cred_make(password, salt, sizeof salt, 4096, &cred), 0);
  assert_int_equal(scram_cred_make_mech(SCRAM_SHA_512, password, salt, sizeof salt, 4096, &cred512),
                   0);
  Cairn__Client__UpsertUserRequest r = CAIRN__CLIENT__UPSERT_USER_REQUEST__INIT;
  r.name = (char *)name;
  r.salt.data = cred.salt;
  r.salt.len = cred.salt_len;
  r.iterations = cred.iterations;
  r.stored_key.data = cred.stored_key;
  r.stored_key.len = SCRAM_KEY_LEN;
  r.server_key.data = cred.server_key;
  r.server_key.len = SCRAM_KEY_LEN;
  if (with512) {
    r.stored_key_512 = (ProtobufCBinaryData){64, cred512.stored_key};
    r.server_key_512 = (ProtobufCBinaryData){64, cred512.server_key};
  }
  Cairn__Client__Envelope env = CAIRN__CLIENT__ENVELOPE__INIT;
  env.api = CAIRN__CLIENT__API__API_UPSERT_USER;
  env.body_case = CAIRN__CLIENT__ENVELOPE__BODY_UPSERT_USER_REQ;
  env.upsert_user_req = &r;
  long long end = tu_now_ms() + WAIT_MS;
  for (;;) {
    Cairn__Client__Envelope *resp = wcall(w, &env);
    assert_non_null(resp);
    const Cairn__Client__Error *e =
        resp->body_case == CAIRN__CLIENT__ENVELOPE__BODY_UPSERT_USER_RESP
            ? resp->upsert_user_resp->error
        : resp->body_case == CAIRN__CLIENT__ENVELOPE__BODY_ERROR_RESP ? resp->error_resp
                                                                      : NULL;
    int code = e != NULL ? (int)e->code : 0;
    cairn__client__envelope__free_unpacked(resp, NULL);
    /* retried while the cluster starts: no controller yet, not bootstrapped */
    if ((code != CAIRN__CLIENT__ERROR_CODE__NOT_CONTROLLER &&
         code != CAIRN__CLIENT__ERROR_CODE__UNKNOWN) ||
        tu_now_ms() > end) {
      return code;
    }
    usleep(200 * 1000);
  }
}

static int upsert_user(struct wc *w, const char *name, const char *password)
{
  return upsert_user_keys(w, name, password, false);
}

static void test_security_scram_login_wrong_password_replay_and_limits(void **state)
{
  struct cd_cluster c;
  assert_int_equal(cd_init(&c, cairnd_bin, 1, 1, FAST), 0);
  assert_int_equal(cd_start(&c, 0), 0);
  uint64_t one = 1;
  assert_int_equal(cd_wait_alive(&c, 0, &one, 1, WAIT_MS), 0);
  char addr[64];
  snprintf(addr, sizeof addr, "127.0.0.1:%d", c.nodes[0].client_port);
  struct wc w;
  assert_int_equal(wc_connect(&w, addr, 5000), 0);
  assert_int_equal(upsert_user(&w, "alice", "correct horse"), 0);
  assert_int_equal(upsert_user(&w, "bad name!", "x"), CAIRN__CLIENT__ERROR_CODE__MALFORMED_REQUEST);
  /* ListUsers names her; no credential in the answer. */
  Cairn__Client__ListUsersRequest lr = CAIRN__CLIENT__LIST_USERS_REQUEST__INIT;
  Cairn__Client__Envelope env = CAIRN__CLIENT__ENVELOPE__INIT;
  env.api = CAIRN__CLIENT__API__API_LIST_USERS;
  env.body_case = CAIRN__CLIENT__ENVELOPE__BODY_LIST_USERS_REQ;
  env.list_users_req = &lr;
  Cairn__Client__Envelope *resp = wcall(&w, &env);
  assert_non_null(resp);
  assert_int_equal(resp->list_users_resp->n_names, 1);
  assert_string_equal(resp->list_users_resp->names[0], "alice");
  cairn__client__envelope__free_unpacked(resp, NULL);
  wc_close(&w);

  /* The right password; the recorded client-final for the replay. */
  char recorded[SCRAM_MSG_MAX];
  assert_int_equal(wc_connect(&w, addr, 5000), 0);
  assert_int_equal(login(&w, "alice", "correct horse", recorded, sizeof recorded), 0);
  wc_close(&w);

  /* SCRAM-SHA-512: alice has no key of it (set by a client without
   * them): refused as an unknown user is. Set again with both, she logs
   * in with either; one exchange may not switch mechanism. */
  assert_int_equal(wc_connect(&w, addr, 5000), 0);
  assert_int_equal(login_mech(&w, SCRAM_SHA_512, "alice", "correct horse", NULL, 0),
                   CAIRN__CLIENT__ERROR_CODE__AUTHENTICATION_FAILED);
  wc_close(&w);
  assert_true(tu_file_contains(c.nodes[0].log, "user 'alice' has no SCRAM-SHA-512 credential"));
  assert_int_equal(wc_connect(&w, addr, 5000), 0);
  assert_int_equal(upsert_user_keys(&w, "alice", "correct horse", true), 0);
  assert_int_equal(login_mech(&w, SCRAM_SHA_512, "alice", "correct horse", NULL, 0), 0);
  wc_close(&w);
  assert_int_equal(wc_connect(&w, addr, 5000), 0);
  assert_int_equal(login(&w, "alice", "correct horse", recorded, sizeof recorded), 0);
  wc_close(&w);
  assert_int_equal(wc_connect(&w, addr, 5000), 0);
  assert_int_equal(login_mech(&w, SCRAM_SHA_512, "alice", "wrong", NULL, 0),
                   CAIRN__CLIENT__ERROR_CODE__AUTHENTICATION_FAILED);
  wc_close(&w);
  assert_int_equal(wc_connect(&w, addr, 5000), 0);
  {
    struct scram_client mix;
    char first[SCRAM_MSG_MAX], cf[SCRAM_MSG_MAX];
    assert_true(scram_client_start_mech(&mix, SCRAM_SHA_512, "alice", "correct horse", "mixnonce",
                                        first, sizeof first) > 0);
    resp = auth_step_mech(&w, "SCRAM-SHA-512", first, strlen(first));
    assert_int_equal(auth_code(resp), 0);
    const ProtobufCBinaryData *m = &resp->authenticate_resp->message;
    int n = scram_client_final(&mix, (const char *)m->data, m->len, cf, sizeof cf);
    cairn__client__envelope__free_unpacked(resp, NULL);
    assert_true(n > 0);
    resp = auth_step(&w, cf); /* named SCRAM-SHA-256 */
    assert_int_equal(auth_code(resp), CAIRN__CLIENT__ERROR_CODE__AUTHENTICATION_FAILED);
    assert_false(resp->authenticate_resp->done);
    cairn__client__envelope__free_unpacked(resp, NULL);
    scram_client_wipe(&mix);
  }
  wc_close(&w);

  /* PLAIN, even with the right password, only over TLS (the password
   * would cross in the clear): refused here, and nobody is logged in. */
  assert_int_equal(wc_connect(&w, addr, 5000), 0);
  static const char plain[] = "\0alice\0correct horse";
  resp = auth_step_mech(&w, "PLAIN", plain, sizeof plain - 1);
  assert_non_null(resp);
  assert_int_equal(auth_code(resp), CAIRN__CLIENT__ERROR_CODE__AUTHENTICATION_FAILED);
  assert_false(resp->authenticate_resp->done);
  assert_non_null(strstr(resp->authenticate_resp->error->message, "only over TLS"));
  cairn__client__envelope__free_unpacked(resp, NULL);
  wc_close(&w);

  /* A wrong password, and an unknown user: the same refusal. */
  assert_int_equal(wc_connect(&w, addr, 5000), 0);
  assert_int_equal(login(&w, "alice", "wrong", NULL, 0),
                   CAIRN__CLIENT__ERROR_CODE__AUTHENTICATION_FAILED);
  assert_int_equal(login(&w, "mallory", "x", NULL, 0),
                   CAIRN__CLIENT__ERROR_CODE__AUTHENTICATION_FAILED);
  wc_close(&w);

  /* A replay: the same client-first gets a fresh server nonce; the old
   * client-final is refused. */
  assert_int_equal(wc_connect(&w, addr, 5000), 0);
  struct scram_client sc;
  char first[SCRAM_MSG_MAX];
  assert_true(scram_client_start(&sc, "alice", "correct horse", "testclientnonce", first,
                                 sizeof first) > 0);
  resp = auth_step(&w, first);
  assert_int_equal(auth_code(resp), 0);
  cairn__client__envelope__free_unpacked(resp, NULL);
  resp = auth_step(&w, recorded);
  assert_int_equal(auth_code(resp), CAIRN__CLIENT__ERROR_CODE__AUTHENTICATION_FAILED);
  cairn__client__envelope__free_unpacked(resp, NULL);
  wc_close(&w);

  /* Oversized and garbage messages, then the third failure closes. */
  assert_int_equal(wc_connect(&w, addr, 5000), 0);
  char big[SCRAM_MSG_MAX + 100];
  memset(big, 'a', sizeof big - 1);
  big[sizeof big - 1] = '\0';
  resp = auth_step(&w, big);
  assert_int_equal(auth_code(resp), CAIRN__CLIENT__ERROR_CODE__AUTHENTICATION_FAILED);
  cairn__client__envelope__free_unpacked(resp, NULL);
  resp = auth_step(&w, "garbage");
  assert_int_equal(auth_code(resp), CAIRN__CLIENT__ERROR_CODE__AUTHENTICATION_FAILED);
  cairn__client__envelope__free_unpacked(resp, NULL);
  resp = auth_step(&w, "n,,n=x,r=y");
  assert_non_null(resp); /* the challenge for an unknown user */
  cairn__client__envelope__free_unpacked(resp, NULL);
  resp = auth_step(&w, "c=biws,r=y,p=AAAA");
  assert_int_equal(auth_code(resp), CAIRN__CLIENT__ERROR_CODE__AUTHENTICATION_FAILED);
  cairn__client__envelope__free_unpacked(resp, NULL);
  int rv = wc_wait_closed(&w, 10000);
  assert_true(rv == 0 || rv == -ECONNRESET);
  wc_close(&w);

  /* Attempts in a loop from one address: rate limited; the node and
   * other requests are fine. */
  int limited = 0;
  for (int i = 0; i < 30 && limited == 0; i++) {
    assert_int_equal(wc_connect(&w, addr, 5000), 0);
    int code = login(&w, "alice", "wrong", NULL, 0);
    if (code == CAIRN__CLIENT__ERROR_CODE__RATE_LIMITED) {
      limited = i + 1;
    } else {
      assert_int_equal(code, CAIRN__CLIENT__ERROR_CODE__AUTHENTICATION_FAILED);
    }
    wc_close(&w);
  }
  assert_true(limited > 0);
  assert_int_equal(cd_wait_alive(&c, 0, &one, 1, WAIT_MS), 0);
  assert_true(tu_file_contains(c.nodes[0].log, "authentication of 'alice' failed"));
  assert_false(tu_file_contains(c.nodes[0].log, "correct horse"));
  /* the default run says it serves this host only */
  assert_true(tu_file_contains(c.nodes[0].log, "this host only"));
  cd_destroy(&c);

  /* a node open to the network without TLS or authentication says so loudly */
  assert_int_equal(cd_init(&c, cairnd_bin, 1, 1, FAST), 0);
  snprintf(c.nodes[0].extra, sizeof c.nodes[0].extra, "--listen 0.0.0.0:%d --advertise 127.0.0.1",
           c.nodes[0].client_port);
  assert_int_equal(cd_start(&c, 0), 0);
  long long end = tu_now_ms() + WAIT_MS;
  while (!tu_file_contains(c.nodes[0].log, "WARNING: client port 0.0.0.0")) {
    assert_true(tu_now_ms() < end);
    usleep(100 * 1000);
  }
  assert_true(tu_file_contains(c.nodes[0].log, "without TLS and without authentication"));
  cd_destroy(&c);
}

/* `cairn user ...` against node 0 with stdin; returns the exit code, out
 * gets stdout and stderr. */
static int cli_user(struct cd_cluster *c, const char *stdin_text, char *out, size_t cap,
                    const char *args)
{
  char file[700], cmd[2048];
  snprintf(file, sizeof file, "%s/cli.out", c->root);
  snprintf(cmd, sizeof cmd, "printf '%s' | %s -b 127.0.0.1:%d --timeout-ms 10000 user %s > %s 2>&1",
           stdin_text, cairn_bin, c->nodes[0].client_port, args, file);
  int st = system(cmd);
  FILE *f = fopen(file, "r");
  size_t n = f != NULL ? fread(out, 1, cap - 1, f) : 0;
  out[n] = '\0';
  if (f != NULL) {
    fclose(f);
  }
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static void test_security_cli_user_create_list_delete(void **state)
{
  if (cairn_bin == NULL) {
    skip();
  }
  struct cd_cluster c;
  assert_int_equal(cd_init(&c, cairnd_bin, 1, 1, FAST), 0);
  assert_int_equal(cd_start(&c, 0), 0);
  uint64_t one = 1;
  assert_int_equal(cd_wait_alive(&c, 0, &one, 1, WAIT_MS), 0);
  char out[4096];
  assert_int_equal(cli_user(&c, "s3cret pass\\n", out, sizeof out, "create alice"), 0);
  assert_int_equal(cli_user(&c, "", out, sizeof out, "list"), 0);
  assert_string_equal(out, "alice\n");
  assert_int_equal(cli_user(&c, "", out, sizeof out, "list --json"), 0);
  assert_non_null(strstr(out, "\"alice\""));
  /* The credential the CLI derived logs in with the password. */
  char addr[64];
  snprintf(addr, sizeof addr, "127.0.0.1:%d", c.nodes[0].client_port);
  struct wc w;
  assert_int_equal(wc_connect(&w, addr, 5000), 0);
  assert_int_equal(login(&w, "alice", "s3cret pass", NULL, 0), 0);
  wc_close(&w);
  /* Bad input: no password, a bad name; an unknown user to delete. */
  assert_int_equal(cli_user(&c, "", out, sizeof out, "create bob"), 2);
  assert_int_equal(cli_user(&c, "pw\\n", out, sizeof out, "create 'bad name'"), 1);
  assert_int_not_equal(cli_user(&c, "", out, sizeof out, "delete nobody"), 0);
  assert_non_null(strstr(out, "unknown user"));
  assert_int_equal(cli_user(&c, "", out, sizeof out, "delete alice"), 0);
  assert_int_equal(cli_user(&c, "", out, sizeof out, "list"), 0);
  assert_string_equal(out, "");
  assert_int_equal(wc_connect(&w, addr, 5000), 0);
  assert_int_equal(login(&w, "alice", "s3cret pass", NULL, 0),
                   CAIRN__CLIENT__ERROR_CODE__AUTHENTICATION_FAILED);
  wc_close(&w);
  assert_false(tu_file_contains(c.nodes[0].log, "s3cret"));
  cd_destroy(&c);
}

/* `cairn ARGS` against node i, with env (e.g. "CAIRN_PASSWORD=x") and
 * stdin; returns the exit code, out gets stdout and stderr. */
static int cli_run(struct cd_cluster *c, int i, const char *env, const char *stdin_text, char *out,
                   size_t cap, const char *args)
{
  char file[700], cmd[2048];
  snprintf(file, sizeof file, "%s/cli.out", c->root);
  snprintf(cmd, sizeof cmd,
           "printf '%s' | env %s %s -b 127.0.0.1:%d --timeout-ms 8000 %s > %s 2>&1", stdin_text,
           env, cairn_bin, c->nodes[i].client_port, args, file);
  int st = system(cmd);
  FILE *f = fopen(file, "r");
  size_t n = f != NULL ? fread(out, 1, cap - 1, f) : 0;
  out[n] = '\0';
  if (f != NULL) {
    fclose(f);
  }
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static int metadata_code(struct wc *w)
{
  Cairn__Client__MetadataRequest r = CAIRN__CLIENT__METADATA_REQUEST__INIT;
  Cairn__Client__Envelope env = CAIRN__CLIENT__ENVELOPE__INIT;
  env.api = CAIRN__CLIENT__API__API_METADATA;
  env.body_case = CAIRN__CLIENT__ENVELOPE__BODY_METADATA_REQ;
  env.metadata_req = &r;
  Cairn__Client__Envelope *resp = wcall(w, &env);
  assert_non_null(resp);
  int code =
      resp->body_case == CAIRN__CLIENT__ENVELOPE__BODY_ERROR_RESP ? (int)resp->error_resp->code : 0;
  cairn__client__envelope__free_unpacked(resp, NULL);
  return code;
}

static void test_security_auth_required_single_node(void **state)
{
  if (cairn_bin == NULL) {
    skip();
  }
  struct cd_cluster c;
  assert_int_equal(cd_init(&c, cairnd_bin, 1, 1, FAST " --auth required"), 0);
  assert_int_equal(cd_start(&c, 0), 0);
  char addr[64];
  snprintf(addr, sizeof addr, "127.0.0.1:%d", c.nodes[0].client_port);
  struct wc w;
  long long end = tu_now_ms() + WAIT_MS;
  while (wc_connect(&w, addr, 1000) != 0) {
    assert_true(tu_now_ms() < end);
    usleep(100 * 1000);
  }
  /* While the cluster has no user: Metadata (a client library's first
   * request) and the first UpsertUser (no one could log in otherwise)... */
  assert_int_equal(metadata_code(&w), 0);
  assert_int_equal(upsert_user(&w, "alice", "correct horse"), 0);
  /* ...then only Hello and Authenticate before logging in. */
  assert_int_equal(metadata_code(&w), CAIRN__CLIENT__ERROR_CODE__AUTHENTICATION_REQUIRED);
  assert_int_equal(upsert_user(&w, "eve", "x"), CAIRN__CLIENT__ERROR_CODE__AUTHENTICATION_REQUIRED);
  assert_int_equal(login(&w, "alice", "correct horse", NULL, 0), 0);
  assert_int_equal(metadata_code(&w), 0);
  wc_close(&w);
  /* The CLI, through libcairn: refused without a login, served with one. */
  char out[4096];
  assert_int_not_equal(cli_run(&c, 0, "", "", out, sizeof out, "topic list"), 0);
  end = tu_now_ms() + WAIT_MS; /* (while the fresh node registers itself alive) */
  while (cli_run(&c, 0, "CAIRN_PASSWORD='correct horse'", "", out, sizeof out,
                 "--user alice topic create t1 --partitions 1 --replication-factor 1") != 0) {
    if (tu_now_ms() >= end) {
      fail_msg("topic create as alice: %s", out);
    }
    usleep(300 * 1000);
  }
  assert_int_not_equal(
      cli_run(&c, 0, "CAIRN_PASSWORD=wrong", "", out, sizeof out, "--user alice topic list"), 0);
  assert_int_equal(cli_run(&c, 0, "CAIRN_PASSWORD='correct horse'", "b0b-pass\\n", out, sizeof out,
                           "--user alice user create bob"),
                   0);
  assert_int_equal(
      cli_run(&c, 0, "CAIRN_PASSWORD=b0b-pass", "", out, sizeof out, "--user bob topic list"), 0);
  assert_non_null(strstr(out, "t1"));
  cd_destroy(&c);
}

/* Three nodes requiring authentication: they prove the cluster key to
 * each other (registration, heartbeats, forwarded admin requests), and a
 * logged-in client is served through any of them. */
static void test_security_auth_required_three_nodes(void **state)
{
  if (cairn_bin == NULL) {
    skip();
  }
  struct cd_cluster c;
  assert_int_equal(cd_init(&c, cairnd_bin, 3, 3, FAST " --auth required"), 0);
  char good[600];
  write_secret(&c, "secret", "6b1f0e9d2c3a4b5c6d7e8f90a1b2c3d4", good, sizeof good);
  for (int i = 0; i < 3; i++) {
    set_secret(&c, i, good);
    assert_int_equal(cd_start(&c, i), 0);
  }
  char out[4096];
  char addr[64];
  snprintf(addr, sizeof addr, "127.0.0.1:%d", c.nodes[2].client_port);
  struct wc w;
  long long end = tu_now_ms() + WAIT_MS;
  while (wc_connect(&w, addr, 1000) != 0) {
    assert_true(tu_now_ms() < end);
    usleep(100 * 1000);
  }
  assert_int_equal(upsert_user(&w, "alice", "correct horse"), 0); /* forwarded */
  wc_close(&w);
  /* every node alive (their registrations went through) */
  end = tu_now_ms() + WAIT_MS;
  for (;;) {
    int rv = cli_run(&c, 1, "CAIRN_PASSWORD='correct horse'", "", out, sizeof out,
                     "--user alice cluster status --json");
    if (rv == 0 && strstr(out, "\"alive\"") != NULL) {
      const char *p = out;
      int alive = 0;
      while ((p = strstr(p, "\"alive\"")) != NULL) {
        alive++;
        p++;
      }
      if (alive >= 3) {
        break;
      }
    }
    assert_true(tu_now_ms() < end);
    usleep(300 * 1000);
  }
  assert_int_equal(cli_run(&c, 2, "CAIRN_PASSWORD='correct horse'", "", out, sizeof out,
                           "--user alice topic create t3 --partitions 3 --replication-factor 3"),
                   0);
  assert_int_equal(cli_run(&c, 1, "CAIRN_PASSWORD='correct horse'", "x\\ny\\n", out, sizeof out,
                           "--user alice produce t3"),
                   0);
  assert_int_equal(cli_run(&c, 0, "CAIRN_PASSWORD='correct horse'", "", out, sizeof out,
                           "--user alice consume t3 -e"),
                   0);
  assert_int_equal(strlen(out), 4);
  cd_destroy(&c);
}

int main(int argc, char **argv)
{
  if (argc < 2) {
    fprintf(stderr, "usage: %s CAIRND\n", argv[0]);
    return 2;
  }
  cairnd_bin = argv[1];
  cairn_bin = argc > 2 ? argv[2] : NULL;
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_security_cluster_with_secret_works_and_strangers_are_refused),
      cmocka_unit_test(test_security_voter_with_wrong_secret_cannot_join_raft),
      cmocka_unit_test(test_security_scram_login_wrong_password_replay_and_limits),
      cmocka_unit_test(test_security_cli_user_create_list_delete),
      cmocka_unit_test(test_security_auth_required_single_node),
      cmocka_unit_test(test_security_auth_required_three_nodes),
  };
  if (getenv("CAIRN_TEST_FILTER") != NULL) {
    cmocka_set_test_filter(getenv("CAIRN_TEST_FILTER"));
  }
  return cmocka_run_group_tests(tests, NULL, NULL);
}
