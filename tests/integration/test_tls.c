/* test_tls.c - TLS on the client port of a real cairnd: certificates made
 * at test time by the openssl command; a blocking OpenSSL client speaks the
 * client protocol. Produce and fetch over TLS (the fetch's file regions are
 * read and encrypted instead of sendfile'd); plain TCP, garbage, a client
 * that trusts another CA, an expired certificate, and under mutual TLS a
 * client without a certificate or with one from another CA are refused;
 * SIGHUP reloads the certificate without dropping open connections.
 *
 * libcairn and the `cairn` CLI (--tls, --tls-ca, --tls-cert/--tls-key) are
 * checked through the CLI: the right CA works, another CA or plain TCP
 * fails, and under mutual TLS only the client with a certificate works.
 *
 * Usage: test_tls <path of cairnd> <path of cairn>
 * CAIRN_TEST_FILTER='*mutual*' runs a subset; CAIRN_KEEP_TEST_DIR=1 keeps
 * the data dirs, certificates and node logs. */
#include "cairnd.h"
#include "net/frame.h"
#include "proc.h"
#include "testutil.h"
#include "wire_client.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#define WAIT_MS 30000

static const char *cairnd_bin;
static const char *cairn_bin; /* the CLI, over libcairn */

/* ---- certificates ---- */

static void sh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static void sh(const char *fmt, ...)
{
  char cmd[4096];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(cmd, sizeof cmd, fmt, ap);
  va_end(ap);
  if (system(cmd) != 0) {
    fail_msg("command failed: %s", cmd);
  }
}

/* In dir: ca.pem/ca.key and rogue.pem/rogue.key (two CAs); server.pem/
 * server.key (signed by ca, for 127.0.0.1); expired.pem (same key, expired
 * yesterday); alice.pem/alice.key (a client signed by ca) and mallory.pem/
 * mallory.key (a client signed by rogue). */
static void make_certs(const char *dir)
{
  sh("cd %s && printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\\n' > san.ext && "
     "for ca in ca rogue; do openssl req -x509 -newkey rsa:2048 -nodes -keyout $ca.key "
     "-out $ca.pem -days 30 -subj /CN=$ca 2>/dev/null || exit 1; done && "
     "openssl req -newkey rsa:2048 -nodes -keyout server.key -out server.csr "
     "-subj /CN=localhost 2>/dev/null && "
     "openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial "
     "-out server.pem -days 30 -extfile san.ext 2>/dev/null && "
     "openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial "
     "-out expired.pem -days -1 -extfile san.ext 2>/dev/null && "
     "for who in alice:ca mallory:rogue; do u=${who%%:*}; c=${who#*:}; "
     "openssl req -newkey rsa:2048 -nodes -keyout $u.key -out $u.csr -subj /CN=$u "
     "2>/dev/null && openssl x509 -req -in $u.csr -CA $c.pem -CAkey $c.key "
     "-CAcreateserial -out $u.pem -days 30 2>/dev/null || exit 1; done",
     dir);
}

/* ---- a blocking TLS client ---- */

struct tc {
  int fd;
  SSL_CTX *ctx;
  SSL *ssl;
  char err[256];
};

static int tcp_connect(int port)
{
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  struct sockaddr_in sa = {.sin_family = AF_INET,
                           .sin_port = htons((uint16_t)port),
                           .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  if (connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0) {
    close(fd);
    return -1; /* not listening (yet) */
  }
  struct timeval tv = {.tv_sec = 15};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  return fd;
}

/* Connects with TLS, trusting ca_file, presenting cert/key when given.
 * Returns 0, or -1 with t->err (the handshake or verification failed). */
static int tc_connect(struct tc *t, int port, const char *ca_file, const char *cert,
                      const char *key)
{
  memset(t, 0, sizeof *t);
  t->ctx = SSL_CTX_new(TLS_client_method());
  assert_non_null(t->ctx);
  assert_int_equal(SSL_CTX_load_verify_locations(t->ctx, ca_file, NULL), 1);
  SSL_CTX_set_verify(t->ctx, SSL_VERIFY_PEER, NULL);
  if (cert != NULL) {
    assert_int_equal(SSL_CTX_use_certificate_file(t->ctx, cert, SSL_FILETYPE_PEM), 1);
    assert_int_equal(SSL_CTX_use_PrivateKey_file(t->ctx, key, SSL_FILETYPE_PEM), 1);
  }
  t->fd = tcp_connect(port);
  if (t->fd < 0) {
    t->fd = 0;
    snprintf(t->err, sizeof t->err, "connect refused");
    return -1;
  }
  t->ssl = SSL_new(t->ctx);
  SSL_set_fd(t->ssl, t->fd);
  X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(t->ssl), "127.0.0.1");
  int r = SSL_connect(t->ssl);
  if (r != 1) {
    unsigned long e = ERR_get_error();
    snprintf(t->err, sizeof t->err, "%s (verify: %s)", e != 0 ? ERR_error_string(e, NULL) : "?",
             X509_verify_cert_error_string(SSL_get_verify_result(t->ssl)));
    ERR_clear_error();
    return -1;
  }
  return 0;
}

static void tc_close(struct tc *t)
{
  if (t->ssl != NULL) {
    SSL_free(t->ssl);
  }
  if (t->ctx != NULL) {
    SSL_CTX_free(t->ctx);
  }
  if (t->fd > 0) {
    close(t->fd);
  }
  memset(t, 0, sizeof *t);
}

/* One request and its answer over TLS. Returns 0 with *resp (free with
 * cairn__client__envelope__free_unpacked) and the payload (free()), or -1
 * when the connection failed or closed. TLS 1.3 delivers a client's
 * refusal (mutual TLS) after the handshake, so it shows here. */
static int tc_call(struct tc *t, Cairn__Client__Envelope *env, const void *payload, size_t plen,
                   Cairn__Client__Envelope **resp, uint8_t **pout, size_t *pout_len)
{
  size_t hlen = frame_header_size(env);
  uint8_t *out = malloc(hlen + plen);
  assert_int_equal(frame_encode_header(env, plen, out), 0);
  if (plen > 0) {
    memcpy(out + hlen, payload, plen);
  }
  int w = SSL_write(t->ssl, out, (int)(hlen + plen));
  free(out);
  if (w != (int)(hlen + plen)) {
    ERR_clear_error();
    return -1;
  }
  size_t cap = 1 << 20, have = 0;
  uint8_t *buf = malloc(cap);
  for (;;) {
    struct frame f;
    int rv = have > 0 ? frame_decode(buf, have, 64u << 20, &f) : FRAME_NEED_MORE;
    if (rv == FRAME_WHOLE) {
      assert_int_equal(frame_unpack_envelope(&f, resp), 0);
      if (pout != NULL) {
        *pout = malloc(f.payload_len + 1);
        memcpy(*pout, f.payload, f.payload_len);
        *pout_len = f.payload_len;
      }
      free(buf);
      return 0;
    }
    assert_true(rv == FRAME_NEED_MORE);
    if (have == cap) {
      cap *= 2;
      buf = realloc(buf, cap);
    }
    int n = SSL_read(t->ssl, buf + have, (int)(cap - have));
    if (n <= 0) {
      ERR_clear_error();
      free(buf);
      return -1;
    }
    have += (size_t)n;
  }
}

/* Metadata over t: 0 when the node answered with its cluster id. */
static int tc_metadata(struct tc *t)
{
  Cairn__Client__MetadataRequest r = CAIRN__CLIENT__METADATA_REQUEST__INIT;
  Cairn__Client__Envelope env = CAIRN__CLIENT__ENVELOPE__INIT;
  env.correlation_id = 7;
  env.api = CAIRN__CLIENT__API__API_METADATA;
  env.body_case = CAIRN__CLIENT__ENVELOPE__BODY_METADATA_REQ;
  env.metadata_req = &r;
  Cairn__Client__Envelope *resp = NULL;
  if (tc_call(t, &env, NULL, 0, &resp, NULL, NULL) != 0) {
    return -1;
  }
  /* answered, and the cluster is bootstrapped */
  int ok =
      resp->correlation_id == 7 && resp->body_case == CAIRN__CLIENT__ENVELOPE__BODY_METADATA_RESP &&
              resp->metadata_resp->cluster_id != NULL && resp->metadata_resp->cluster_id[0] != '\0'
          ? 0
          : -1;
  cairn__client__envelope__free_unpacked(resp, NULL);
  return ok;
}

/* Produces one batch over t; returns its base offset or -1. */
static int64_t tc_produce(struct tc *t, const char *topic, const uint8_t *batch, size_t len)
{
  struct wc_produce p;
  wc_produce_init(&p, topic, 0, len, 5000);
  Cairn__Client__Envelope *resp = NULL;
  if (tc_call(t, &p.env, batch, len, &resp, NULL, NULL) != 0) {
    return -1;
  }
  int64_t base = -1;
  if (resp->body_case == CAIRN__CLIENT__ENVELOPE__BODY_PRODUCE_RESP &&
      resp->produce_resp->n_partitions == 1 &&
      (resp->produce_resp->partitions[0]->error == NULL ||
       resp->produce_resp->partitions[0]->error->code == 0)) {
    base = resp->produce_resp->partitions[0]->base_offset;
  }
  cairn__client__envelope__free_unpacked(resp, NULL);
  return base;
}

/* Fetches from offset 0 over t; returns the batches' bytes (owned) or NULL. */
static uint8_t *tc_fetch(struct tc *t, const char *topic, size_t *len)
{
  Cairn__Client__FetchPartition fp = CAIRN__CLIENT__FETCH_PARTITION__INIT;
  fp.topic = (char *)topic;
  fp.max_bytes = 4 << 20;
  Cairn__Client__FetchPartition *fpp = &fp;
  Cairn__Client__FetchRequest r = CAIRN__CLIENT__FETCH_REQUEST__INIT;
  r.max_bytes = 4 << 20;
  r.n_partitions = 1;
  r.partitions = &fpp;
  Cairn__Client__Envelope env = CAIRN__CLIENT__ENVELOPE__INIT;
  env.api = CAIRN__CLIENT__API__API_FETCH;
  env.body_case = CAIRN__CLIENT__ENVELOPE__BODY_FETCH_REQ;
  env.fetch_req = &r;
  Cairn__Client__Envelope *resp = NULL;
  uint8_t *p = NULL;
  if (tc_call(t, &env, NULL, 0, &resp, &p, len) != 0) {
    return NULL;
  }
  bool ok = resp->body_case == CAIRN__CLIENT__ENVELOPE__BODY_FETCH_RESP &&
            resp->fetch_resp->n_partitions == 1 &&
            (resp->fetch_resp->partitions[0]->error == NULL ||
             resp->fetch_resp->partitions[0]->error->code == 0);
  cairn__client__envelope__free_unpacked(resp, NULL);
  if (!ok) {
    free(p);
    return NULL;
  }
  return p;
}

/* ---- the node ---- */

struct tls_node {
  struct cd_cluster c;
  char certs[600];
};

static void start_tls_node(struct tls_node *tn, bool mutual)
{
  assert_int_equal(cd_init(&tn->c, cairnd_bin, 1, 1, NULL), 0);
  snprintf(tn->certs, sizeof tn->certs, "%s/certs", tn->c.root);
  sh("mkdir -p %s", tn->certs);
  make_certs(tn->certs);
  sh("cp %s/server.pem %s/live.pem", tn->certs, tn->certs);
  int n = snprintf(tn->c.nodes[0].extra, sizeof tn->c.nodes[0].extra,
                   "--tls-cert %.200s/live.pem --tls-key %.200s/server.key%s%.200s%s", tn->certs,
                   tn->certs, mutual ? " --tls-ca " : "", mutual ? tn->certs : "",
                   mutual ? "/ca.pem" : "");
  assert_true(n > 0 && (size_t)n < sizeof tn->c.nodes[0].extra);
  assert_int_equal(cd_start(&tn->c, 0), 0);
  /* Up once the port answers a TLS Metadata. */
  char ca[700];
  snprintf(ca, sizeof ca, "%s/ca.pem", tn->certs);
  char cert[700], key[700];
  snprintf(cert, sizeof cert, "%s/alice.pem", tn->certs);
  snprintf(key, sizeof key, "%s/alice.key", tn->certs);
  long long end = tu_now_ms() + WAIT_MS;
  for (;;) {
    struct tc t;
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET,
                             .sin_port = htons((uint16_t)tn->c.nodes[0].client_port),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    bool up = connect(fd, (struct sockaddr *)&sa, sizeof sa) == 0;
    close(fd);
    if (up &&
        tc_connect(&t, tn->c.nodes[0].client_port, ca, mutual ? cert : NULL, mutual ? key : NULL) ==
            0 &&
        tc_metadata(&t) == 0) {
      tc_close(&t);
      return;
    }
    if (up) {
      tc_close(&t);
    }
    assert_true(tu_now_ms() < end);
    usleep(200 * 1000);
  }
}

static void path(char *buf, size_t len, const struct tls_node *tn, const char *name)
{
  snprintf(buf, len, "%s/%s", tn->certs, name);
}

/* CreateTopic over t, retried while the controller elects. */
static void tc_create_topic(struct tc *t, const char *name)
{
  long long end = tu_now_ms() + WAIT_MS;
  for (;;) {
    Cairn__Client__CreateTopicRequest r = CAIRN__CLIENT__CREATE_TOPIC_REQUEST__INIT;
    r.name = (char *)name;
    r.partitions = 1;
    r.replication_factor = 1;
    Cairn__Client__Envelope env = CAIRN__CLIENT__ENVELOPE__INIT;
    env.api = CAIRN__CLIENT__API__API_CREATE_TOPIC;
    env.body_case = CAIRN__CLIENT__ENVELOPE__BODY_CREATE_TOPIC_REQ;
    env.create_topic_req = &r;
    Cairn__Client__Envelope *resp = NULL;
    assert_int_equal(tc_call(t, &env, NULL, 0, &resp, NULL, NULL), 0);
    const Cairn__Client__Error *e =
        resp->body_case == CAIRN__CLIENT__ENVELOPE__BODY_CREATE_TOPIC_RESP
            ? resp->create_topic_resp->error
            : resp->error_resp;
    int code = e != NULL ? (int)e->code : 0;
    char msg[256];
    snprintf(msg, sizeof msg, "%s", e != NULL && e->message != NULL ? e->message : "");
    cairn__client__envelope__free_unpacked(resp, NULL);
    if (code == 0) {
      return;
    }
    /* NOT_CONTROLLER or "not bootstrapped" while the node starts */
    if (tu_now_ms() >= end) {
      fail_msg("create topic %s: code %d: %s", name, code, msg);
    }
    usleep(200 * 1000);
  }
}

/* The node closed a plain connection (EOF or reset) within timeout_ms. */
static void expect_closed(int fd, int timeout_ms)
{
  struct timeval tv = {.tv_sec = timeout_ms / 1000, .tv_usec = (timeout_ms % 1000) * 1000};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  uint8_t b[256];
  ssize_t r;
  do {
    r = recv(fd, b, sizeof b, 0);
  } while (r > 0);
  assert_true(r == 0 || (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK));
  close(fd);
}

static void sighup_and_wait(struct tls_node *tn, int nth)
{
  tu_proc_signal(&tn->c.nodes[0].proc, SIGHUP);
  /* the nth "reloaded" line */
  long long end = tu_now_ms() + WAIT_MS;
  for (;;) {
    char cmd[800];
    snprintf(cmd, sizeof cmd, "test $(grep -c 'TLS certificate and key reloaded' %s) -ge %d",
             tn->c.nodes[0].log, nth);
    if (system(cmd) == 0) {
      return;
    }
    assert_true(tu_now_ms() < end);
    usleep(100 * 1000);
  }
}

static void test_tls_produce_fetch_refusals_and_reload(void **state)
{
  struct tls_node tn;
  start_tls_node(&tn, false);
  int port = tn.c.nodes[0].client_port;
  char ca[700], rogue[700];
  path(ca, sizeof ca, &tn, "ca.pem");
  path(rogue, sizeof rogue, &tn, "rogue.pem");

  struct tc t;
  assert_int_equal(tc_connect(&t, port, ca, NULL, NULL), 0);
  assert_true(strcmp(SSL_get_version(t.ssl), "TLSv1.2") == 0 ||
              strcmp(SSL_get_version(t.ssl), "TLSv1.3") == 0);
  /* Produce and fetch; batches larger than a TLS record. The fetch
   * answer's log region is read and encrypted, not sendfile'd. */
  tc_create_topic(&t, "tls-topic");
  size_t lens[3];
  uint8_t *batches[3];
  for (int i = 0; i < 3; i++) {
    batches[i] = tu_make_batch((uint64_t)i + 1, 10, 5000, 1000 + i, &lens[i]);
    /* (retried while the new partition's leader settles: NOT_LEADER,
     * REPLICA_NOT_AVAILABLE) */
    long long until = tu_now_ms() + WAIT_MS;
    while (tc_produce(&t, "tls-topic", batches[i], lens[i]) < 0) {
      assert_true(tu_now_ms() < until);
      usleep(100 * 1000);
    }
  }
  size_t got = 0;
  uint8_t *data = tc_fetch(&t, "tls-topic", &got);
  assert_non_null(data);
  assert_int_equal(got, lens[0] + lens[1] + lens[2]);
  size_t at = 0;
  for (int i = 0; i < 3; i++) {
    /* the node stamps offsets into the header; the records come back as sent */
    assert_memory_equal(data + at + lens[i] - 5000, batches[i] + lens[i] - 5000, 5000);
    at += lens[i];
    free(batches[i]);
  }
  free(data);

  /* Plain TCP to the TLS port: a client-protocol frame is no handshake. */
  struct wc w;
  char addr[64];
  snprintf(addr, sizeof addr, "127.0.0.1:%d", port);
  assert_int_equal(wc_connect(&w, addr, 5000), 0);
  Cairn__Client__MetadataRequest mr = CAIRN__CLIENT__METADATA_REQUEST__INIT;
  Cairn__Client__Envelope env = CAIRN__CLIENT__ENVELOPE__INIT;
  env.api = CAIRN__CLIENT__API__API_METADATA;
  env.body_case = CAIRN__CLIENT__ENVELOPE__BODY_METADATA_REQ;
  env.metadata_req = &mr;
  assert_int_equal(wc_send(&w, &env, NULL, 0), 0);
  int rv = wc_wait_closed(&w, 10000);
  assert_true(rv == 0 || rv == -ECONNRESET);
  wc_close(&w);

  /* A garbage handshake: a TLS record header, then nonsense. */
  int fd = tcp_connect(port);
  assert_int_equal(
      send(fd, "\x16\x03\x01\x00\x20garbage-garbage-garbage-garbage!", 37, MSG_NOSIGNAL), 37);
  expect_closed(fd, 10000);

  /* A client that trusts another CA refuses the node. */
  struct tc bad;
  assert_int_equal(tc_connect(&bad, port, rogue, NULL, NULL), -1);
  assert_non_null(strstr(bad.err, "certificate verify failed"));
  tc_close(&bad);

  /* Reload: an expired certificate, then the good one again; the open
   * connection t is never dropped. */
  sh("cp %s/expired.pem %s/live.pem", tn.certs, tn.certs);
  sighup_and_wait(&tn, 1);
  assert_int_equal(tc_connect(&bad, port, ca, NULL, NULL), -1);
  assert_non_null(strstr(bad.err, "expired"));
  tc_close(&bad);
  assert_int_equal(tc_metadata(&t), 0);
  sh("cp %s/server.pem %s/live.pem", tn.certs, tn.certs);
  sighup_and_wait(&tn, 2);
  struct tc again;
  assert_int_equal(tc_connect(&again, port, ca, NULL, NULL), 0);
  assert_int_equal(tc_metadata(&again), 0);
  tc_close(&again);
  assert_int_equal(tc_metadata(&t), 0);

  /* A reload that fails (a missing key) keeps the working certificate. */
  sh("mv %s/server.key %s/server.key.away", tn.certs, tn.certs);
  tu_proc_signal(&tn.c.nodes[0].proc, SIGHUP);
  long long end = tu_now_ms() + WAIT_MS;
  while (!tu_file_contains(tn.c.nodes[0].log, "TLS reload failed")) {
    assert_true(tu_now_ms() < end);
    usleep(100 * 1000);
  }
  sh("mv %s/server.key.away %s/server.key", tn.certs, tn.certs);
  assert_int_equal(tc_connect(&again, port, ca, NULL, NULL), 0);
  assert_int_equal(tc_metadata(&again), 0);
  tc_close(&again);

  /* A connection that never starts its handshake is closed. */
  fd = tcp_connect(port);
  expect_closed(fd, 25000);

  tc_close(&t);
  assert_true(tu_file_contains(tn.c.nodes[0].log, "TLS handshake failed"));
  assert_true(tu_file_contains(tn.c.nodes[0].log, "no TLS handshake within"));
  assert_int_equal(cd_term(&tn.c, 0, 30000), 0);
  cd_destroy(&tn.c);
}

static void test_tls_mutual_requires_a_client_certificate_from_the_ca(void **state)
{
  struct tls_node tn;
  start_tls_node(&tn, true);
  int port = tn.c.nodes[0].client_port;
  char ca[700], alice[700], alice_key[700], mallory[700], mallory_key[700];
  path(ca, sizeof ca, &tn, "ca.pem");
  path(alice, sizeof alice, &tn, "alice.pem");
  path(alice_key, sizeof alice_key, &tn, "alice.key");
  path(mallory, sizeof mallory, &tn, "mallory.pem");
  path(mallory_key, sizeof mallory_key, &tn, "mallory.key");

  struct tc t;
  assert_int_equal(tc_connect(&t, port, ca, alice, alice_key), 0);
  assert_int_equal(tc_metadata(&t), 0);
  tc_close(&t);

  /* No certificate, or one from another CA: refused (with TLS 1.3 the
   * client learns it at its first read). */
  struct tc bad;
  assert_true(tc_connect(&bad, port, ca, NULL, NULL) != 0 || tc_metadata(&bad) != 0);
  tc_close(&bad);
  assert_true(tc_connect(&bad, port, ca, mallory, mallory_key) != 0 || tc_metadata(&bad) != 0);
  tc_close(&bad);
  assert_true(tu_file_contains(tn.c.nodes[0].log, "TLS handshake failed"));

  /* The node still serves the good client. */
  assert_int_equal(tc_connect(&t, port, ca, alice, alice_key), 0);
  assert_int_equal(tc_metadata(&t), 0);
  tc_close(&t);
  assert_int_equal(cd_term(&tn.c, 0, 30000), 0);
  cd_destroy(&tn.c);
}

/* Runs the CLI against node 0 with the given options; returns its exit
 * code. out (may be NULL) gets its stdout. */
static int cli(struct tls_node *tn, const char *stdin_text, char *out, size_t outlen,
               const char *fmt, ...) __attribute__((format(printf, 5, 6)));

static int cli(struct tls_node *tn, const char *stdin_text, char *out, size_t outlen,
               const char *fmt, ...)
{
  char args[2048];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(args, sizeof args, fmt, ap);
  va_end(ap);
  char outfile[800];
  snprintf(outfile, sizeof outfile, "%s/cli.out", tn->c.root);
  char cmd[4096];
  snprintf(cmd, sizeof cmd, "printf '%s' | %s -b 127.0.0.1:%d --timeout-ms 5000 %s > %s 2>&1",
           stdin_text != NULL ? stdin_text : "", cairn_bin, tn->c.nodes[0].client_port, args,
           outfile);
  int st = system(cmd);
  if (out != NULL) {
    FILE *f = fopen(outfile, "r");
    size_t n = f != NULL ? fread(out, 1, outlen - 1, f) : 0;
    out[n] = '\0';
    if (f != NULL) {
      fclose(f);
    }
  }
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static void test_tls_cli_and_libcairn(void **state)
{
  if (cairn_bin == NULL) {
    skip();
  }
  struct tls_node tn;
  start_tls_node(&tn, false);
  char out[4096];
  const char *d = tn.certs;
  /* (retried while the fresh node registers itself alive) */
  long long end = tu_now_ms() + WAIT_MS;
  while (cli(&tn, NULL, out, sizeof out,
             "--tls-ca %s/ca.pem topic create cli-tls --partitions 1 --replication-factor 1",
             d) != 0) {
    if (tu_now_ms() >= end) {
      fail_msg("cairn topic create over TLS: %s", out);
    }
    usleep(200 * 1000);
  }
  assert_int_equal(
      cli(&tn, "one\\ntwo\\n", out, sizeof out, "--tls-ca %s/ca.pem produce cli-tls", d), 0);
  assert_int_equal(cli(&tn, NULL, out, sizeof out, "--tls-ca %s/ca.pem consume cli-tls -e", d), 0);
  assert_string_equal(out, "one\ntwo\n");
  /* Another CA: the node's certificate is refused. Plain TCP: no answer. */
  assert_int_not_equal(cli(&tn, NULL, out, sizeof out, "--tls-ca %s/rogue.pem topic list", d), 0);
  assert_int_not_equal(cli(&tn, NULL, out, sizeof out, "topic list"), 0);
  /* A CA file that does not exist: a usage error, nothing dialed. */
  assert_int_equal(cli(&tn, NULL, out, sizeof out, "--tls-ca %s/missing.pem topic list", d), 2);
  assert_non_null(strstr(out, "TLS"));
  assert_int_equal(cd_term(&tn.c, 0, 30000), 0);
  cd_destroy(&tn.c);

  /* Mutual TLS: only with a certificate the node's CA signed. */
  start_tls_node(&tn, true);
  d = tn.certs;
  assert_int_equal(cli(&tn, NULL, out, sizeof out,
                       "--tls-ca %s/ca.pem --tls-cert %s/alice.pem --tls-key %s/alice.key "
                       "topic list",
                       d, d, d),
                   0);
  assert_int_not_equal(cli(&tn, NULL, out, sizeof out, "--tls-ca %s/ca.pem topic list", d), 0);
  assert_int_not_equal(cli(&tn, NULL, out, sizeof out,
                           "--tls-ca %s/ca.pem --tls-cert %s/mallory.pem --tls-key "
                           "%s/mallory.key topic list",
                           d, d, d),
                       0);
  assert_int_equal(cd_term(&tn.c, 0, 30000), 0);
  cd_destroy(&tn.c);
}

/* Nodes alive in node i's metadata, asked over TLS (-1: no answer). */
static int tc_alive(int port, const char *ca, const char *cert, const char *key)
{
  struct tc t;
  if (tc_connect(&t, port, ca, cert, key) != 0) {
    tc_close(&t);
    return -1;
  }
  Cairn__Client__MetadataRequest r = CAIRN__CLIENT__METADATA_REQUEST__INIT;
  Cairn__Client__Envelope env = CAIRN__CLIENT__ENVELOPE__INIT;
  env.api = CAIRN__CLIENT__API__API_METADATA;
  env.body_case = CAIRN__CLIENT__ENVELOPE__BODY_METADATA_REQ;
  env.metadata_req = &r;
  Cairn__Client__Envelope *resp = NULL;
  int alive = -1;
  if (tc_call(&t, &env, NULL, 0, &resp, NULL, NULL) == 0) {
    if (resp->body_case == CAIRN__CLIENT__ENVELOPE__BODY_METADATA_RESP) {
      alive = 0;
      for (size_t i = 0; i < resp->metadata_resp->n_nodes; i++) {
        alive += strcmp(resp->metadata_resp->nodes[i]->state, "alive") == 0;
      }
    }
    cairn__client__envelope__free_unpacked(resp, NULL);
  }
  tc_close(&t);
  return alive;
}

/* Three nodes whose client ports all speak mutual TLS: registration,
 * heartbeats and forwarded admin requests go node to node over TLS with
 * the nodes' own certificates. */
static void test_tls_three_nodes_talk_to_each_other_over_tls(void **state)
{
  if (cairn_bin == NULL) {
    skip();
  }
  struct tls_node tn;
  assert_int_equal(cd_init(&tn.c, cairnd_bin, 3, 3,
                           "--heartbeat-ms 100 --election-ms 1000 --node-timeout-ms 3000"),
                   0);
  snprintf(tn.certs, sizeof tn.certs, "%s/certs", tn.c.root);
  sh("mkdir -p %s", tn.certs);
  make_certs(tn.certs);
  const char *d = tn.certs;
  for (int i = 0; i < 3; i++) {
    snprintf(tn.c.nodes[i].extra, sizeof tn.c.nodes[i].extra,
             "--tls-cert %.150s/server.pem --tls-key %.150s/server.key --tls-ca %.150s/ca.pem", d,
             d, d);
    assert_int_equal(cd_start(&tn.c, i), 0);
  }
  char ca[700], cert[700], key[700];
  path(ca, sizeof ca, &tn, "ca.pem");
  path(cert, sizeof cert, &tn, "alice.pem");
  path(key, sizeof key, &tn, "alice.key");
  long long end = tu_now_ms() + WAIT_MS;
  while (tc_alive(tn.c.nodes[1].client_port, ca, cert, key) != 3) {
    assert_true(tu_now_ms() < end);
    usleep(300 * 1000);
  }
  /* Through the CLI (libcairn routes to each partition's leader). */
  char out[4096];
  char opts[2048];
  snprintf(opts, sizeof opts, "--tls-ca %s/ca.pem --tls-cert %s/alice.pem --tls-key %s/alice.key ",
           d, d, d);
  char args[3000];
  snprintf(args, sizeof args, "%stopic create tls3 --partitions 3 --replication-factor 3", opts);
  end = tu_now_ms() + WAIT_MS;
  while (cli(&tn, NULL, out, sizeof out, "%s", args) != 0) {
    if (tu_now_ms() >= end) {
      fail_msg("create over TLS: %s", out);
    }
    usleep(300 * 1000);
  }
  snprintf(args, sizeof args, "%sproduce tls3", opts);
  assert_int_equal(cli(&tn, "a\\nb\\nc\\n", out, sizeof out, "%s", args), 0);
  snprintf(args, sizeof args, "%sconsume tls3 -e -f '%%v,'", opts);
  assert_int_equal(cli(&tn, NULL, out, sizeof out, "%s", args), 0);
  assert_int_equal(strlen(out), 6); /* a, b, c in some partition order */
  for (int i = 0; i < 3; i++) {
    assert_int_equal(cd_term(&tn.c, i, 30000), 0);
  }
  cd_destroy(&tn.c);
}

int main(int argc, char **argv)
{
  if (argc < 2) {
    fprintf(stderr, "usage: %s CAIRND\n", argv[0]);
    return 2;
  }
  cairnd_bin = argv[1];
  cairn_bin = argc > 2 ? argv[2] : NULL;
  signal(SIGPIPE, SIG_IGN);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_tls_produce_fetch_refusals_and_reload),
      cmocka_unit_test(test_tls_mutual_requires_a_client_certificate_from_the_ca),
      cmocka_unit_test(test_tls_cli_and_libcairn),
      cmocka_unit_test(test_tls_three_nodes_talk_to_each_other_over_tls),
  };
  if (getenv("CAIRN_TEST_FILTER") != NULL) {
    cmocka_set_test_filter(getenv("CAIRN_TEST_FILTER"));
  }
  return cmocka_run_group_tests(tests, NULL, NULL);
}
