/* test_admin.c - the admin HTTP port of real cairnd processes: /health
 * answers at once, /ready turns 200 only once the node has joined the
 * cluster, /metrics parses as Prometheus text under a strict parser and its
 * counters move when produces flow, slow requests are logged with their
 * phases, the JSON views list what the client protocol's Metadata lists,
 * the status page carries the element ids its script fills and, loaded in
 * headless Chromium against a 3-node cluster with a dead node, lists the
 * nodes and highlights the under-replicated partitions (a screenshot is
 * kept in test-artifacts/ or $CAIRN_TEST_ARTIFACTS; skipped without
 * chromium), and unknown paths and other methods get 404 and 405 with a
 * JSON error.
 *
 * Usage: test_admin <path of cairnd> [<path of the cairn CLI>]
 * CAIRN_TEST_FILTER='*ready*' runs a subset; CAIRN_KEEP_TEST_DIR=1 keeps
 * the data dirs and node logs. */
#include "cairnd.h"
#include "proc.h"
#include "testutil.h"
#include "wire_client.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <unistd.h>

#include <cmocka.h>

#define WAIT_MS 30000
#define FAST "--heartbeat-ms 100 --election-ms 1000 --node-timeout-ms 2000"
#define HTTP_MAX (8u << 20)

static const char *cairnd_bin;
static const char *cairn_cli_bin; /* the cairn CLI, or NULL */

/* ---- a tiny HTTP/1.1 client: one request per connection ---- */

struct http_answer {
  int status;
  char *head; /* status line and headers, NUL-terminated */
  char *body; /* NUL-terminated */
  size_t body_len;
};

static void http_answer_free(struct http_answer *a)
{
  free(a->head);
  free(a->body);
  memset(a, 0, sizeof *a);
}

/* Sends method path to 127.0.0.1:port with an optional body and reads the
 * answer up to EOF. Returns 0, or -1 when the port does not answer. */
static int http_call(int port, const char *method, const char *path, const char *body,
                     struct http_answer *out)
{
  memset(out, 0, sizeof *out);
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) {
    return -1;
  }
  struct timeval tv = {.tv_sec = 10};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0) {
    close(fd);
    return -1;
  }
  size_t cap = strlen(path) + (body != NULL ? strlen(body) : 0) + 256;
  char *req = malloc(cap);
  int n = snprintf(req, cap,
                   "%s %s HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n"
                   "Content-Length: %zu\r\n\r\n%s",
                   method, path, body != NULL ? strlen(body) : 0, body != NULL ? body : "");
  ssize_t wrote = write(fd, req, (size_t)n);
  free(req);
  if (wrote != n) {
    close(fd);
    return -1;
  }
  char *buf = malloc(HTTP_MAX + 1);
  size_t len = 0;
  for (;;) {
    ssize_t r = read(fd, buf + len, HTTP_MAX - len);
    if (r <= 0) {
      break;
    }
    len += (size_t)r;
  }
  close(fd);
  buf[len] = '\0';
  char *sep = strstr(buf, "\r\n\r\n");
  if (sep == NULL || sscanf(buf, "HTTP/1.1 %d", &out->status) != 1) {
    free(buf);
    return -1;
  }
  *sep = '\0';
  out->head = strdup(buf);
  out->body_len = len - (size_t)(sep + 4 - buf);
  out->body = malloc(out->body_len + 1);
  memcpy(out->body, sep + 4, out->body_len);
  out->body[out->body_len] = '\0';
  free(buf);
  return 0;
}

/* Sends raw bytes and returns the status of the answer, 0 if the
 * connection closed without one, -1 if it could not connect. */
static int http_raw(int port, const char *bytes)
{
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  struct timeval tv = {.tv_sec = 10};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0) {
    close(fd);
    return -1;
  }
  ssize_t n = write(fd, bytes, strlen(bytes));
  (void)n;
  char buf[256] = "";
  ssize_t r = read(fd, buf, sizeof buf - 1);
  close(fd);
  int status = 0;
  if (r > 0) {
    buf[r] = '\0';
    if (sscanf(buf, "HTTP/1.%*d %d", &status) != 1) {
      status = 0;
    }
  }
  return status;
}

static int http_get(int port, const char *path, struct http_answer *out)
{
  return http_call(port, "GET", path, NULL, out);
}

/* Polls path until it answers want (or the time is up); returns the last
 * status seen (-1: no answer at all). */
static int http_wait_status(int port, const char *path, int want, int timeout_ms)
{
  long long end = tu_now_ms() + timeout_ms;
  int status = -1;
  do {
    struct http_answer a;
    if (http_get(port, path, &a) == 0) {
      status = a.status;
      http_answer_free(&a);
      if (status == want) {
        return status;
      }
    }
    usleep(100 * 1000);
  } while (tu_now_ms() < end);
  return status;
}

/* Polls path until its body contains needle; returns true if it did. */
static bool http_wait_body(int port, const char *path, const char *needle, int timeout_ms)
{
  long long end = tu_now_ms() + timeout_ms;
  do {
    struct http_answer a;
    if (http_get(port, path, &a) == 0) {
      bool found = a.status == 200 && strstr(a.body, needle) != NULL;
      http_answer_free(&a);
      if (found) {
        return true;
      }
    }
    usleep(100 * 1000);
  } while (tu_now_ms() < end);
  return false;
}

/* ---- a strict Prometheus text (0.0.4) parser ---- */

#define PROM_MAX_SAMPLES 4096

struct prom_sample {
  char name[128];
  char labels[512]; /* as written, without braces */
  double value;
};

struct prom {
  struct prom_sample *v;
  size_t n;
};

static bool prom_name_ok(const char *s, size_t len)
{
  if (len == 0 || !(isalpha((unsigned char)s[0]) || s[0] == '_' || s[0] == ':')) {
    return false;
  }
  for (size_t i = 1; i < len; i++) {
    if (!(isalnum((unsigned char)s[i]) || s[i] == '_' || s[i] == ':')) {
      return false;
    }
  }
  return true;
}

/* `k="v",k2="v2"` with only \\, \" and \n escapes; returns the length
 * consumed up to the closing brace, or -1. */
static int prom_labels(const char *s)
{
  const char *p = s;
  while (*p != '}') {
    const char *k = p;
    while (isalnum((unsigned char)*p) || *p == '_') {
      p++;
    }
    if (p == k || isdigit((unsigned char)*k) || p[0] != '=' || p[1] != '"') {
      return -1;
    }
    p += 2;
    while (*p != '"') {
      if (*p == '\0' || *p == '\n') {
        return -1;
      }
      if (*p == '\\') {
        if (p[1] != '\\' && p[1] != '"' && p[1] != 'n') {
          return -1;
        }
        p++;
      }
      p++;
    }
    p++;
    if (*p == ',') {
      p++;
    } else if (*p != '}') {
      return -1;
    }
  }
  return (int)(p - s);
}

static bool prom_value(const char *s, double *v)
{
  if (strcmp(s, "+Inf") == 0 || strcmp(s, "-Inf") == 0 || strcmp(s, "NaN") == 0) {
    *v = strcmp(s, "-Inf") == 0 ? -INFINITY : strcmp(s, "NaN") == 0 ? NAN : INFINITY;
    return true;
  }
  char *end = NULL;
  errno = 0;
  *v = strtod(s, &end);
  return end != s && *end == '\0' && errno == 0;
}

/* The family a sample belongs to: a histogram's _bucket, _sum and _count
 * series belong to the histogram's name. */
static bool prom_family_typed(char types[][128], size_t ntypes, const char *name)
{
  for (size_t i = 0; i < ntypes; i++) {
    size_t len = strlen(types[i]);
    if (strncmp(name, types[i], len) == 0 &&
        (name[len] == '\0' || strcmp(name + len, "_bucket") == 0 ||
         strcmp(name + len, "_sum") == 0 || strcmp(name + len, "_count") == 0)) {
      return true;
    }
  }
  return false;
}

/* Parses text strictly: every line a # HELP, a # TYPE (before the family's
 * samples) or `name{labels} value`; fails the test on anything else. */
static void prom_parse(const char *text, struct prom *out)
{
  static char types[512][128];
  size_t ntypes = 0;
  out->v = calloc(PROM_MAX_SAMPLES, sizeof *out->v);
  out->n = 0;
  size_t tlen = strlen(text);
  assert_true(tlen > 0 && text[tlen - 1] == '\n');
  char *copy = strdup(text);
  int lineno = 0;
  for (char *line = strtok(copy, "\n"); line != NULL; line = strtok(NULL, "\n")) {
    lineno++;
    if (line[0] == '#') {
      char kind[8], name[128], rest[256];
      if (sscanf(line, "# %7s %127s %255[^\n]", kind, name, rest) != 3 ||
          !prom_name_ok(name, strlen(name))) {
        fail_msg("line %d: a bad comment: %s", lineno, line);
      }
      if (strcmp(kind, "TYPE") == 0) {
        if (strcmp(rest, "counter") != 0 && strcmp(rest, "gauge") != 0 &&
            strcmp(rest, "histogram") != 0 && strcmp(rest, "summary") != 0 &&
            strcmp(rest, "untyped") != 0) {
          fail_msg("line %d: unknown type: %s", lineno, line);
        }
        assert_true(ntypes < 512);
        snprintf(types[ntypes++], sizeof types[0], "%s", name);
      } else if (strcmp(kind, "HELP") != 0) {
        fail_msg("line %d: a comment that is neither HELP nor TYPE: %s", lineno, line);
      }
      continue;
    }
    struct prom_sample *s = &out->v[out->n];
    size_t nl = strcspn(line, "{ ");
    if (!prom_name_ok(line, nl) || nl >= sizeof s->name) {
      fail_msg("line %d: bad metric name: %s", lineno, line);
    }
    memcpy(s->name, line, nl);
    s->name[nl] = '\0';
    const char *p = line + nl;
    if (*p == '{') {
      int ll = prom_labels(p + 1);
      if (ll < 0 || (size_t)ll >= sizeof s->labels) {
        fail_msg("line %d: bad labels: %s", lineno, line);
      }
      memcpy(s->labels, p + 1, (size_t)ll);
      s->labels[ll] = '\0';
      p += ll + 2;
    }
    if (*p != ' ' || !prom_value(p + 1, &s->value)) {
      fail_msg("line %d: bad value: %s", lineno, line);
    }
    if (!prom_family_typed(types, ntypes, s->name)) {
      fail_msg("line %d: sample before its # TYPE: %s", lineno, line);
    }
    assert_true(out->n + 1 < PROM_MAX_SAMPLES);
    out->n++;
  }
  free(copy);
}

/* The value of name{labels} (labels exactly as written), or dflt. */
static double prom_get(const struct prom *m, const char *name, const char *labels, double dflt)
{
  for (size_t i = 0; i < m->n; i++) {
    if (strcmp(m->v[i].name, name) == 0 && strcmp(m->v[i].labels, labels) == 0) {
      return m->v[i].value;
    }
  }
  return dflt;
}

/* The sum of every name series. */
static double prom_sum(const struct prom *m, const char *name)
{
  double s = 0;
  for (size_t i = 0; i < m->n; i++) {
    s += strcmp(m->v[i].name, name) == 0 ? m->v[i].value : 0;
  }
  return s;
}

static void prom_scrape(int port, struct prom *out)
{
  struct http_answer a;
  assert_int_equal(http_get(port, "/metrics", &a), 0);
  assert_int_equal(a.status, 200);
  assert_non_null(strstr(a.head, "Content-Type: text/plain; version=0.0.4"));
  prom_parse(a.body, out);
  http_answer_free(&a);
}

/* A produce histogram is cumulative: buckets never fall, +Inf == count. */
static void prom_check_histogram(const struct prom *m, const char *api)
{
  double prev = 0, inf = -1;
  char want[64];
  snprintf(want, sizeof want, "api=\"%s\",le=", api);
  for (size_t i = 0; i < m->n; i++) {
    const struct prom_sample *s = &m->v[i];
    if (strcmp(s->name, "cairn_request_duration_seconds_bucket") != 0 ||
        strncmp(s->labels, want, strlen(want)) != 0) {
      continue;
    }
    assert_true(s->value >= prev);
    prev = s->value;
    if (strstr(s->labels, "+Inf") != NULL) {
      inf = s->value;
    }
  }
  char labels[32];
  snprintf(labels, sizeof labels, "api=\"%s\"", api);
  assert_true(inf >= 0);
  assert_true(inf == prom_get(m, "cairn_request_duration_seconds_count", labels, -1));
}

/* ---- helpers ---- */

static void produce_batches(struct cd_cluster *c, const char *topic, int n, size_t *bytes)
{
  *bytes = 0;
  for (int i = 0; i < n; i++) {
    size_t len = 0;
    uint8_t *b = tu_make_batch((uint64_t)i + 1, 3, 40, 1000 + i, &len);
    int64_t base = -1;
    int rv = cd_produce(c, topic, (uint32_t)(i % 2), b, len, WAIT_MS, &base);
    free(b);
    if (rv != 0) {
      fail_msg("produce %d to %s: wire code %d", i, topic, rv);
    }
    *bytes += len;
  }
}

/* ---- tests ---- */

static void test_admin_metrics_move_with_produces_and_parse_strictly(void **state)
{
  struct cd_cluster c;
  assert_int_equal(cd_init(&c, cairnd_bin, 1, 1, FAST), 0);
  assert_int_equal(cd_start(&c, 0), 0);
  int port = c.nodes[0].admin_port;
  assert_int_equal(http_wait_status(port, "/health", 200, WAIT_MS), 200);
  assert_int_equal(http_wait_status(port, "/ready", 200, WAIT_MS), 200);
  assert_int_equal(cd_create_topic(&c, 0, "orders", 2, 1, WAIT_MS, NULL, 0), 0);

  struct prom before;
  prom_scrape(port, &before);
  double ok_before = prom_get(&before, "cairn_requests_total", "api=\"produce\",code=\"ok\"", 0);
  double bytes_before = prom_sum(&before, "cairn_partition_produced_bytes_total");
  double in_before = prom_get(&before, "cairn_client_received_bytes_total", "", -1);
  assert_true(in_before >= 0);
  assert_true(prom_get(&before, "cairn_controller_leader", "", -1) == 1);
  assert_true(prom_get(&before, "cairn_cluster_nodes", "state=\"alive\"", -1) == 1);
  assert_true(prom_get(&before, "cairn_cluster_partitions", "", -1) == 2);
  assert_true(prom_get(&before, "process_open_fds", "", -1) > 0);

  size_t bytes = 0;
  produce_batches(&c, "orders", 10, &bytes);

  struct prom after;
  prom_scrape(port, &after);
  double ok_after = prom_get(&after, "cairn_requests_total", "api=\"produce\",code=\"ok\"", 0);
  printf("produce ok: %.0f -> %.0f; produced bytes %.0f -> %.0f (sent %zu)\n", ok_before, ok_after,
         bytes_before, prom_sum(&after, "cairn_partition_produced_bytes_total"), bytes);
  assert_true(ok_after >= ok_before + 10);
  assert_true(prom_sum(&after, "cairn_partition_produced_bytes_total") ==
              bytes_before + (double)bytes);
  assert_true(prom_sum(&after, "cairn_partition_produced_batches_total") >= 10);
  assert_true(prom_get(&after, "cairn_client_received_bytes_total", "", -1) >=
              in_before + (double)bytes);
  assert_true(prom_get(&after, "cairn_client_sent_bytes_total", "", -1) > 0);
  assert_true(prom_get(&after, "cairn_request_duration_seconds_count", "api=\"produce\"", 0) >= 10);
  prom_check_histogram(&after, "produce");
  prom_check_histogram(&after, "fetch");
  assert_true(prom_sum(&after, "cairn_partition_high_watermark") >= 30);
  assert_true(prom_get(&after, "cairn_partition_leader", "topic=\"orders\",partition=\"0\"", -1) ==
              1);
  assert_true(prom_get(&after, "cairn_raft_groups", "role=\"leader\"", -1) == 2);

  /* The loop-lag timer fires every 100 ms: its histogram fills while the
   * node runs, cumulative, with +Inf == count. */
  struct prom lag = {0};
  for (int i = 0; i < 100; i++) {
    free(lag.v);
    prom_scrape(port, &lag);
    if (prom_get(&lag, "cairn_loop_lag_seconds_count", "", 0) >= 3) {
      break;
    }
    usleep(100 * 1000);
  }
  double lag_count = prom_get(&lag, "cairn_loop_lag_seconds_count", "", 0);
  assert_true(lag_count >= 3);
  assert_true(prom_get(&lag, "cairn_loop_lag_seconds_bucket", "le=\"+Inf\"", -1) == lag_count);
  assert_true(prom_get(&lag, "cairn_loop_lag_seconds_bucket", "le=\"0.000128\"", -1) <=
              prom_get(&lag, "cairn_loop_lag_seconds_bucket", "le=\"33.554432\"", -1));

  /* A fetch moves the partition's read counters. */
  uint8_t *data = NULL;
  size_t len = 0;
  int64_t hw = -1;
  assert_int_equal(cd_fetch(&c, "orders", 0, 0, 1 << 20, WAIT_MS, &data, &len, &hw), 0);
  free(data);
  struct prom third;
  prom_scrape(port, &third);
  assert_true(prom_get(&third, "cairn_partition_fetched_bytes_total",
                       "topic=\"orders\",partition=\"0\"", 0) >= (double)len);
  assert_true(prom_get(&third, "cairn_partition_fetches_total", "topic=\"orders\",partition=\"0\"",
                       0) >= 1);
  assert_true(prom_get(&third, "cairn_slow_requests_total", "", -1) == 0);
  free(before.v);
  free(after.v);
  free(third.v);
  free(lag.v);
  cd_destroy(&c);
}

static void test_admin_json_views_status_page_and_errors(void **state)
{
  struct cd_cluster c;
  assert_int_equal(cd_init(&c, cairnd_bin, 3, 3, FAST), 0);
  assert_int_equal(cd_start_all(&c, WAIT_MS), 0);
  assert_int_equal(cd_create_topic(&c, 0, "payments", 3, 3, WAIT_MS, NULL, 0), 0);
  int port = c.nodes[1].admin_port;
  assert_int_equal(http_wait_status(port, "/ready", 200, WAIT_MS), 200);
  /* This node's copy of the metadata may trail the controller a little. */
  assert_true(http_wait_body(port, "/v1/topics", "payments", WAIT_MS));

  struct http_answer a;
  assert_int_equal(http_get(port, "/v1/topics", &a), 0);
  assert_int_equal(a.status, 200);
  assert_non_null(strstr(a.head, "Content-Type: application/json"));
  assert_non_null(strstr(a.body, "{\"topics\":[{\"name\":\"payments\","));
  assert_non_null(strstr(a.body, "\"partition_count\":3,\"replication_factor\":3"));
  http_answer_free(&a);

  /* The same nodes and replicas as the client protocol's Metadata. */
  Cairn__Client__Envelope *env = NULL;
  Cairn__Client__MetadataResponse *md = cd_metadata(&c, 1, &env);
  assert_non_null(md);
  assert_int_equal(http_get(port, "/v1/cluster", &a), 0);
  assert_int_equal(a.status, 200);
  char want[256];
  snprintf(want, sizeof want, "{\"cluster_id\":\"%s\",\"node_id\":2,", md->cluster_id);
  assert_non_null(strstr(a.body, want));
  for (size_t i = 0; i < md->n_nodes; i++) {
    snprintf(want, sizeof want, "{\"id\":%" PRIu64 ",\"state\":\"%s\",\"client_address\":\"%s\"",
             md->nodes[i]->id, md->nodes[i]->state, md->nodes[i]->client_address);
    assert_non_null(strstr(a.body, want));
  }
  assert_int_equal(md->n_nodes, 3);
  http_answer_free(&a);
  cairn__client__envelope__free_unpacked(env, NULL);

  assert_int_equal(http_get(port, "/v1/topics/payments", &a), 0);
  assert_int_equal(a.status, 200);
  for (int p = 0; p < 3; p++) {
    snprintf(want, sizeof want, "{\"partition\":%d,", p);
    assert_non_null(strstr(a.body, want));
  }
  assert_non_null(strstr(a.body, "\"health\":\"ok\""));
  http_answer_free(&a);

  assert_int_equal(http_get(port, "/v1/nodes", &a), 0);
  assert_int_equal(a.status, 200);
  snprintf(want, sizeof want, "\"admin_address\":\"127.0.0.1:%d\"", c.nodes[2].admin_port);
  assert_non_null(strstr(a.body, want));
  http_answer_free(&a);

  /* The status page: HTML with every element id its script fills. */
  assert_int_equal(http_get(port, "/", &a), 0);
  assert_int_equal(a.status, 200);
  assert_non_null(strstr(a.head, "Content-Type: text/html"));
  static const char *const page_ids[] = {"summary",          "nodes",        "topics",
                                         "chart-throughput", "chart-topics", "groups",
                                         "messages",         "updated",      "error"};
  for (size_t i = 0; i < sizeof page_ids / sizeof page_ids[0]; i++) {
    snprintf(want, sizeof want, "id=\"%s\"", page_ids[i]);
    assert_non_null(strstr(a.body, want));
    /* ... and the script names it too (getElementById or the chart's draw). */
    snprintf(want, sizeof want, "\"%s\"", page_ids[i]);
    const char *first = strstr(a.body, want);
    assert_non_null(first);
    assert_non_null(strstr(first + 1, want));
  }
  assert_null(strstr(a.body, "src=\"http")); /* nothing fetched from elsewhere */
  http_answer_free(&a);

  /* Unknown paths: 404 with a JSON error; other methods: 405. */
  const char *missing[] = {"/nope", "/v1/topics/nope", "/v1/", "/metrics/x"};
  for (size_t i = 0; i < sizeof missing / sizeof missing[0]; i++) {
    assert_int_equal(http_get(port, missing[i], &a), 0);
    assert_int_equal(a.status, 404);
    assert_non_null(strstr(a.body, "{\"error\":"));
    http_answer_free(&a);
  }
  assert_int_equal(http_call(port, "POST", "/metrics", "x=1", &a), 0);
  assert_int_equal(a.status, 405);
  assert_non_null(strstr(a.head, "Allow: GET, HEAD"));
  http_answer_free(&a);
  assert_int_equal(http_call(port, "DELETE", "/v1/topics/payments", NULL, &a), 0);
  assert_int_equal(a.status, 405);
  http_answer_free(&a);

  /* Malformed HTTP is the library's to refuse (400, or a close), and the
   * port keeps serving. */
  static const char *const garbage[] = {"HELLO\r\n\r\n",
                                        "GET\r\n\r\n",
                                        "GET / HTTP/9.9\r\n\r\n",
                                        "GET / HTTP/1.1\r\nHost: x\r\nContent-Length: -5\r\n\r\n",
                                        "GET / HTTP/1.1\r\nBad header line\r\n\r\n",
                                        "\x01\x02\x03\xff\r\n\r\n"};
  for (size_t i = 0; i < sizeof garbage / sizeof garbage[0]; i++) {
    int st = http_raw(port, garbage[i]);
    printf("malformed request %zu: %d\n", i, st);
    assert_true(st == 0 || st >= 400);
  }
  assert_int_equal(http_wait_status(port, "/health", 200, WAIT_MS), 200);

  /* A request line past the connection's memory bound is refused by the
   * library, and the port keeps serving. */
  char *longpath = malloc(40000);
  longpath[0] = '/';
  memset(longpath + 1, 'a', 39998);
  longpath[39999] = '\0';
  if (http_get(port, longpath, &a) == 0) {
    assert_true(a.status >= 400);
    http_answer_free(&a);
  }
  free(longpath);
  assert_int_equal(http_wait_status(port, "/health", 200, WAIT_MS), 200);
  cd_destroy(&c);
}

struct resume_later {
  pid_t pids[2];
  int after_ms;
};

static void *resume_later_main(void *arg)
{
  struct resume_later *r = arg;
  usleep((useconds_t)r->after_ms * 1000);
  for (int i = 0; i < 2; i++) {
    kill(r->pids[i], SIGCONT);
  }
  return NULL;
}

static void test_admin_slow_produce_logs_its_phases(void **state)
{
  struct cd_cluster c;
  assert_int_equal(cd_init(&c, cairnd_bin, 3, 3, FAST " --slow-request-ms 300"), 0);
  assert_int_equal(cd_start_all(&c, WAIT_MS), 0);
  assert_int_equal(cd_create_topic(&c, 0, "slow", 1, 3, WAIT_MS, NULL, 0), 0);
  size_t bytes = 0;
  produce_batches(&c, "slow", 1, &bytes); /* the leader is known and caught up */
  /* The leader, as the nodes' own metrics say. */
  int leader = -1;
  for (int i = 0; i < 3; i++) {
    struct prom m;
    prom_scrape(c.nodes[i].admin_port, &m);
    if (prom_get(&m, "cairn_partition_leader", "topic=\"slow\",partition=\"0\"", 0) == 1) {
      leader = i;
    }
    free(m.v);
  }
  assert_true(leader >= 0);
  /* Both followers stop for 600 ms (less than an election timeout): the
   * next produce cannot commit until they resume. */
  struct resume_later r = {.after_ms = 600};
  for (int i = 0, k = 0; i < 3; i++) {
    if (i != leader) {
      r.pids[k++] = c.nodes[i].proc.pid;
      kill(c.nodes[i].proc.pid, SIGSTOP);
    }
  }
  pthread_t th;
  assert_int_equal(pthread_create(&th, NULL, resume_later_main, &r), 0);
  long long t0 = tu_now_ms();
  size_t len = 0;
  uint8_t *b = tu_make_batch(99, 3, 40, 5000, &len);
  /* Straight to the leader: asking a stopped node for it would wait. */
  struct wc_produce req;
  wc_produce_init(&req, "slow", 0, len, 10000);
  Cairn__Client__Envelope *resp = NULL;
  int rv = cd_call(&c, leader, &req.env, b, len, WAIT_MS, &resp, NULL, NULL);
  free(b);
  pthread_join(th, NULL);
  assert_int_equal(rv, 0);
  assert_int_equal(resp->body_case, CAIRN__CLIENT__ENVELOPE__BODY_PRODUCE_RESP);
  const Cairn__Client__Error *perr = resp->produce_resp->partitions[0]->error;
  assert_true(perr == NULL || perr->code == 0);
  cairn__client__envelope__free_unpacked(resp, NULL);
  printf("produce with stopped followers took %lld ms\n", tu_now_ms() - t0);

  /* One line on the leader, its Raft commit the longest phase. */
  struct prom m;
  prom_scrape(c.nodes[leader].admin_port, &m);
  assert_true(prom_get(&m, "cairn_slow_requests_total", "", 0) >= 1);
  free(m.v);
  FILE *f = fopen(c.nodes[leader].log, "r");
  assert_non_null(f);
  char line[2048];
  double total = -1, queue = -1, commit = -1, apply = -1, send = -1;
  while (fgets(line, sizeof line, f) != NULL) {
    const char *p = strstr(line, "slow request: API_PRODUCE");
    if (p != NULL) {
      p = strstr(p, " took ");
      assert_non_null(p);
      assert_int_equal(sscanf(p, " took %lf ms (queue %lf, raft commit %lf, apply %lf, send %lf",
                              &total, &queue, &commit, &apply, &send),
                       5);
      printf("logged: %s", line);
    }
  }
  fclose(f);
  assert_true(total >= 300);
  assert_true(commit >= 300 && commit > queue && commit > apply && commit > send);
  assert_true(queue + commit + apply + send <= total + 0.5);
  cd_destroy(&c);
}

/* The node whose metrics say it leads topic's partition 0, or -1. */
static int metrics_leader_of(struct cd_cluster *c, int nodes, const char *topic)
{
  char labels[128];
  snprintf(labels, sizeof labels, "topic=\"%s\",partition=\"0\"", topic);
  int leader = -1;
  for (int i = 0; i < nodes; i++) {
    struct prom m;
    prom_scrape(c->nodes[i].admin_port, &m);
    if (prom_get(&m, "cairn_partition_leader", labels, 0) == 1) {
      leader = i;
    }
    free(m.v);
  }
  return leader;
}

static void test_admin_replica_lag_follows_a_stopped_follower(void **state)
{
  struct cd_cluster c;
  assert_int_equal(cd_init(&c, cairnd_bin, 3, 3, FAST), 0);
  assert_int_equal(cd_start_all(&c, WAIT_MS), 0);
  long long created = tu_now_ms();
  assert_int_equal(cd_create_topic(&c, 0, "lag", 1, 3, WAIT_MS, NULL, 0), 0);
  size_t bytes = 0;
  produce_batches(&c, "lag", 1, &bytes); /* the leader is known and caught up */
  assert_int_equal(cd_wait_settled(&c, "lag", WAIT_MS), 0);
  int leader = metrics_leader_of(&c, 3, "lag");
  assert_true(leader >= 0);
  int stopped = (leader + 1) % 3, other = (leader + 2) % 3;
  char lagging[128], caught[128];
  snprintf(lagging, sizeof lagging, "topic=\"lag\",partition=\"0\",replica=\"%d\"", stopped + 1);
  snprintf(caught, sizeof caught, "topic=\"lag\",partition=\"0\",replica=\"%d\"", other + 1);
  /* One follower stops; the other keeps the majority: 5 batches of 3
   * records commit without it. The lag samples follow the leader's
   * applies (metrics_part_applied), not a walk over every group. */
  kill(c.nodes[stopped].proc.pid, SIGSTOP);
  long long t0 = tu_now_ms();
  for (int i = 0; i < 5; i++) {
    size_t len = 0;
    uint8_t *b = tu_make_batch(100 + (uint64_t)i, 3, 40, 6000 + i, &len);
    struct wc_produce req;
    wc_produce_init(&req, "lag", 0, len, 10000);
    Cairn__Client__Envelope *resp = NULL;
    int rv = cd_call(&c, leader, &req.env, b, len, WAIT_MS, &resp, NULL, NULL);
    free(b);
    assert_int_equal(rv, 0);
    assert_int_equal(resp->body_case, CAIRN__CLIENT__ENVELOPE__BODY_PRODUCE_RESP);
    const Cairn__Client__Error *perr = resp->produce_resp->partitions[0]->error;
    assert_true(perr == NULL || perr->code == 0);
    cairn__client__envelope__free_unpacked(resp, NULL);
  }
  usleep(1500 * 1000);
  struct prom m;
  prom_scrape(c.nodes[leader].admin_port, &m);
  double lag_ms = prom_get(&m, "cairn_partition_replica_lag_seconds", lagging, -1) * 1000;
  double lag_off = prom_get(&m, "cairn_partition_replica_lag_offsets", lagging, -1);
  double lag_entries = prom_get(&m, "cairn_partition_replica_lag_entries", lagging, -1);
  printf("stopped follower %d after %lld ms: lag %.0f entries, %.0f offsets, %.0f ms\n",
         stopped + 1, tu_now_ms() - t0, lag_entries, lag_off, lag_ms);
  assert_true(lag_entries >= 1);
  /* At least the 15 offsets it lacks; at most the 18 since the sample at or
   * below its match (the first batch and the five may share a period). */
  assert_true(lag_off >= 15 && lag_off <= 18);
  /* Within two sample periods (METRICS_LAG_SAMPLE_MS) of the truth; it may
   * have lacked a barrier or another entry from before it stopped. */
  assert_true(lag_ms >= 1500 - 2 * 250 && lag_ms <= (double)(tu_now_ms() - created));
  assert_true(prom_get(&m, "cairn_partition_replica_lag_seconds", caught, -1) == 0);
  assert_true(prom_get(&m, "cairn_partition_replica_lag_offsets", caught, -1) == 0);
  free(m.v);
  /* Resumed, it catches up and its lag falls back to 0. */
  kill(c.nodes[stopped].proc.pid, SIGCONT);
  long long deadline = tu_now_ms() + WAIT_MS;
  double now_off = -1;
  do {
    usleep(100 * 1000);
    prom_scrape(c.nodes[leader].admin_port, &m);
    now_off = prom_get(&m, "cairn_partition_replica_lag_offsets", lagging, -1);
    lag_ms = prom_get(&m, "cairn_partition_replica_lag_seconds", lagging, -1);
    free(m.v);
  } while ((now_off != 0 || lag_ms != 0) && tu_now_ms() < deadline);
  assert_true(now_off == 0 && lag_ms == 0);
  cd_destroy(&c);
}

/* GET path with "Authorization: Bearer token": the answer's status. */
static int http_get_bearer(int port, const char *path, const char *token)
{
  char req[512];
  snprintf(req, sizeof req,
           "GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer %s\r\n"
           "Connection: close\r\n\r\n",
           path, token);
  return http_raw(port, req);
}

static void test_admin_token_guards_all_but_the_probes(void **state)
{
  struct cd_cluster c;
  assert_int_equal(cd_init(&c, cairnd_bin, 1, 1, FAST), 0);
  static const char token[] = "s3cret-admin-token-0123456789";
  char path[600];
  snprintf(path, sizeof path, "%.500s/admin-token", c.root);
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  fprintf(f, "%s\n", token);
  fclose(f);
  assert_int_equal(chmod(path, 0600), 0);
  snprintf(c.nodes[0].extra, sizeof c.nodes[0].extra, "--admin-token-file %.480s", path);
  assert_int_equal(cd_start(&c, 0), 0);
  int port = c.nodes[0].admin_port;
  /* The probes and the page (which holds no data) are open. */
  assert_int_equal(http_wait_status(port, "/health", 200, WAIT_MS), 200);
  assert_int_equal(http_wait_status(port, "/ready", 200, WAIT_MS), 200);
  struct http_answer a;
  assert_int_equal(http_get(port, "/", &a), 0);
  assert_int_equal(a.status, 200);
  assert_non_null(strstr(a.body, "Bearer"));
  http_answer_free(&a);
  /* Metrics and views: the token or 401. */
  const char *paths[] = {"/metrics", "/v1/cluster", "/v1/nodes", "/v1/topics", "/v1/nope"};
  for (size_t i = 0; i < sizeof paths / sizeof paths[0]; i++) {
    assert_int_equal(http_get(port, paths[i], &a), 0);
    assert_int_equal(a.status, 401);
    assert_non_null(strstr(a.head, "WWW-Authenticate: Bearer"));
    assert_non_null(strstr(a.body, "--admin-token-file"));
    http_answer_free(&a);
    assert_int_equal(http_get_bearer(port, paths[i], "wrong"), 401);
    assert_int_equal(http_get_bearer(port, paths[i], "s3cret-admin-token-012345678"), 401);
    assert_int_equal(http_get_bearer(port, paths[i], "s3cret-admin-token-01234567890"), 401);
    assert_int_equal(http_get_bearer(port, paths[i], token),
                     strcmp(paths[i], "/v1/nope") == 0 ? 404 : 200);
  }
  cd_destroy(&c);
}

/* A connection to 127.0.0.1:port with a tiny receive buffer, or -1. */
static int stuck_client(int port)
{
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  int small = 1024;
  setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof small);
  struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

static void test_admin_stuck_scrapers_do_not_stall_produce(void **state)
{
  struct cd_cluster c;
  assert_int_equal(cd_init(&c, cairnd_bin, 1, 1, FAST), 0);
  assert_int_equal(cd_start(&c, 0), 0);
  int port = c.nodes[0].admin_port;
  assert_int_equal(http_wait_status(port, "/ready", 200, WAIT_MS), 200);
  assert_int_equal(cd_create_topic(&c, 0, "flow", 2, 1, WAIT_MS, NULL, 0), 0);
  size_t bytes = 0;
  produce_batches(&c, "flow", 2, &bytes);
  /* Scrapers that ask for /metrics and the page and never read the answer,
   * and connections that send half a request line, up to the port's
   * limit (64) and past it. */
  enum { STUCK = 80 };
  int fds[STUCK];
  for (int i = 0; i < STUCK; i++) {
    fds[i] = stuck_client(port);
    if (fds[i] < 0) {
      continue;
    }
    const char *req = i % 3 == 0   ? "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n"
                      : i % 3 == 1 ? "GET / HTTP/1.1\r\nHost: x\r\n\r\n"
                                   : "GET /metr";
    ssize_t n = write(fds[i], req, strlen(req));
    (void)n;
  }
  /* Produce and fetch go on at their usual pace meanwhile. */
  long long t0 = tu_now_ms();
  produce_batches(&c, "flow", 20, &bytes);
  long long took = tu_now_ms() - t0;
  uint8_t *data = NULL;
  size_t len = 0;
  int64_t hw = -1;
  assert_int_equal(cd_fetch(&c, "flow", 0, 0, 1 << 20, WAIT_MS, &data, &len, &hw), 0);
  free(data);
  printf("20 produces with %d stuck admin connections: %lld ms\n", STUCK, took);
  assert_true(took < 10000);
  for (int i = 0; i < STUCK; i++) {
    if (fds[i] >= 0) {
      close(fds[i]);
    }
  }
  /* Once they are gone the port serves again. */
  assert_int_equal(http_wait_status(port, "/health", 200, WAIT_MS), 200);
  cd_destroy(&c);
}

/* The chromium binary, or NULL when it is not installed. */
static const char *find_chromium(void)
{
  static const char *const paths[] = {"/usr/bin/chromium", "/usr/bin/chromium-browser"};
  for (size_t i = 0; i < sizeof paths / sizeof paths[0]; i++) {
    if (access(paths[i], X_OK) == 0) {
      return paths[i];
    }
  }
  return NULL;
}

/* Runs headless chromium on url with extra flags, its stdout to out_path.
 * Returns its exit status. */
static int run_chromium(const char *bin, const struct cd_cluster *c, const char *flags,
                        const char *url, const char *out_path)
{
  char cmd[2048];
  snprintf(cmd, sizeof cmd,
           "timeout 120 %s --headless --no-sandbox --disable-gpu --hide-scrollbars "
           "--user-data-dir=%s/chromium --virtual-time-budget=10000 %s %s > %s 2>%s/chromium.log",
           bin, c->root, flags, url, out_path, c->root);
  return system(cmd);
}

static char *read_all(const char *path)
{
  FILE *f = fopen(path, "r");
  if (f == NULL) {
    return NULL;
  }
  char *buf = malloc(HTTP_MAX + 1);
  size_t len = fread(buf, 1, HTTP_MAX, f);
  buf[len] = '\0';
  fclose(f);
  return buf;
}

static void test_admin_status_page_in_headless_chromium(void **state)
{
  const char *chromium = find_chromium();
  if (chromium == NULL) {
    printf("chromium is not installed (Debian package chromium): skipped\n");
    skip();
  }
  struct cd_cluster c;
  assert_int_equal(cd_init(&c, cairnd_bin, 3, 3, FAST), 0);
  assert_int_equal(cd_start_all(&c, WAIT_MS), 0);
  assert_int_equal(cd_create_topic(&c, 0, "payments", 3, 3, WAIT_MS, NULL, 0), 0);
  size_t bytes = 0;
  produce_batches(&c, "payments", 6, &bytes);
  /* Node 3 dies: the page must show it dead and every partition
   * under-replicated. */
  cd_kill(&c, 2);
  int port = c.nodes[0].admin_port;
  assert_true(http_wait_body(port, "/v1/cluster", "\"under_replicated_partitions\":3", WAIT_MS));

  char url[64], dom_path[600];
  snprintf(url, sizeof url, "http://127.0.0.1:%d/", port);
  snprintf(dom_path, sizeof dom_path, "%s/dom.html", c.root);
  assert_int_equal(run_chromium(chromium, &c, "--dump-dom", url, dom_path), 0);
  char *dom = read_all(dom_path);
  assert_non_null(dom);
  for (int i = 1; i <= 3; i++) {
    char want[64];
    snprintf(want, sizeof want, "<tr id=\"node-%d\">", i);
    assert_non_null(strstr(dom, want));
  }
  assert_non_null(strstr(dom, "class=\"state-dead\">dead</td>"));
  for (int p = 0; p < 3; p++) {
    char want[96];
    snprintf(want, sizeof want, "<tr id=\"part-payments-%d\" class=\"under_replicated\">", p);
    assert_non_null(strstr(dom, want));
  }
  assert_non_null(strstr(dom, "under-replicated: <b>3</b>"));
  assert_null(strstr(dom, "id=\"updated\">never<")); /* the script ran and polled */
  free(dom);

  /* The screenshot, kept as the test's artifact. */
  const char *dir =
      getenv("CAIRN_TEST_ARTIFACTS") != NULL ? getenv("CAIRN_TEST_ARTIFACTS") : "test-artifacts";
  char flags[700], shot[600];
  snprintf(shot, sizeof shot, "%s/status_page.png", dir);
  snprintf(flags, sizeof flags, "--window-size=1200,1100 --screenshot=%s", shot);
  char mk[700];
  snprintf(mk, sizeof mk, "mkdir -p %s", dir);
  assert_int_equal(system(mk), 0);
  assert_int_equal(run_chromium(chromium, &c, flags, url, "/dev/null"), 0);
  FILE *f = fopen(shot, "rb");
  assert_non_null(f);
  unsigned char magic[8] = {0};
  assert_int_equal(fread(magic, 1, 8, f), 8);
  fclose(f);
  assert_memory_equal(magic, "\x89PNG\r\n\x1a\n", 8);
  printf("status page screenshot: %s\n", shot);
  cd_destroy(&c);
}

/* s without blank space (outside strings: the CLI's strings have none). */
static void strip_space(char *s)
{
  char *o = s;
  for (char *p = s; *p != '\0'; p++) {
    if (!isspace((unsigned char)*p)) {
      *o++ = *p;
    }
  }
  *o = '\0';
}

/* Every object of the CLI's text that starts with `start` (up to its first
 * '}', or up to `end` when given) appears in the view. Returns how many. */
static int cli_objects_in(const char *cli, const char *view, const char *start, const char *end)
{
  int n = 0;
  for (const char *p = strstr(cli, start); p != NULL; p = strstr(p + 1, start)) {
    const char *q = end != NULL ? strstr(p, end) : strchr(p, '}');
    assert_non_null(q);
    size_t len = (size_t)(q - p) + (end != NULL ? strlen(end) : 0);
    char *obj = strndup(p, len);
    if (strstr(view, obj) == NULL) {
      fail_msg("the CLI's %s is not in /v1/cluster:\n%s\nview: %s", start, obj, view);
    }
    free(obj);
    n++;
  }
  return n;
}

static void test_admin_json_matches_the_cli(void **state)
{
  if (cairn_cli_bin == NULL) {
    printf("no cairn CLI given: skipped\n");
    skip();
  }
  struct cd_cluster c;
  assert_int_equal(cd_init(&c, cairnd_bin, 3, 3, FAST), 0);
  assert_int_equal(cd_start_all(&c, WAIT_MS), 0);
  assert_int_equal(cd_create_topic(&c, 0, "ledger", 4, 3, WAIT_MS, NULL, 0), 0);
  assert_int_equal(cd_create_topic(&c, 0, "audit", 1, 2, WAIT_MS, NULL, 0), 0);
  size_t bytes = 0;
  produce_batches(&c, "ledger", 5, &bytes);
  int port = c.nodes[0].admin_port;
  assert_true(http_wait_body(port, "/v1/cluster", "\"name\":\"audit\"", WAIT_MS));
  assert_int_equal(http_wait_status(port, "/ready", 200, WAIT_MS), 200);
  /* Leaders settle, and the CLI and the view read the same node: retry
   * while a leader moves between the two reads. */
  char cmd[1024], out_path[600];
  snprintf(out_path, sizeof out_path, "%s/cli.json", c.root);
  snprintf(cmd, sizeof cmd, "%s -b %s --json cluster status > %s", cairn_cli_bin,
           c.nodes[0].client_addr, out_path);
  bool same = false;
  for (int attempt = 0; attempt < 20 && !same; attempt++) {
    assert_int_equal(system(cmd), 0);
    char *cli = read_all(out_path);
    assert_non_null(cli);
    strip_space(cli);
    struct http_answer a;
    assert_int_equal(http_get(port, "/v1/cluster", &a), 0);
    /* Compare only once both reads agree on every partition (leaders and
     * high watermarks: they are two reads, moments apart). */
    same = true;
    for (const char *p = strstr(cli, "{\"partition\":"); p != NULL && same;
         p = strstr(p + 1, "{\"partition\":")) {
      const char *q = strchr(p, '}');
      char *obj = strndup(p, (size_t)(q - p));
      same = strstr(a.body, obj) != NULL;
      free(obj);
    }
    if (same) {
      char head[256];
      const char *cid = strstr(cli, "\"cluster_id\":");
      assert_non_null(cid);
      snprintf(head, sizeof head, "%.*s", (int)(strchr(cid + 14, '"') - cid + 1), cid);
      assert_non_null(strstr(a.body, head));
      assert_int_equal(cli_objects_in(cli, a.body, "{\"id\":", NULL), 3);
      assert_int_equal(cli_objects_in(cli, a.body, "{\"name\":", "\"partitions\":["), 2);
      assert_int_equal(cli_objects_in(cli, a.body, "{\"partition\":", NULL), 5);
    } else {
      usleep(300 * 1000);
    }
    http_answer_free(&a);
    free(cli);
  }
  assert_true(same);
  cd_destroy(&c);
}

static void test_admin_ready_only_after_joining(void **state)
{
  struct cd_cluster c;
  /* Node 0 is the only voter; node 1 joins through it. */
  assert_int_equal(cd_init(&c, cairnd_bin, 2, 1, FAST), 0);
  assert_int_equal(cd_start(&c, 1), 0);
  int port = c.nodes[1].admin_port;
  assert_int_equal(http_wait_status(port, "/health", 200, WAIT_MS), 200);
  /* Nothing to join yet: not ready, for as long as that lasts. */
  long long end = tu_now_ms() + 2000;
  while (tu_now_ms() < end) {
    struct http_answer a;
    assert_int_equal(http_get(port, "/ready", &a), 0);
    assert_int_equal(a.status, 503);
    assert_non_null(strstr(a.body, "\"ready\":false,\"reason\":"));
    http_answer_free(&a);
    usleep(200 * 1000);
  }
  assert_int_equal(cd_start(&c, 0), 0);
  long long t0 = tu_now_ms();
  assert_int_equal(http_wait_status(port, "/ready", 200, WAIT_MS), 200);
  printf("node 2 ready %lld ms after the cluster's first node started\n", tu_now_ms() - t0);
  struct http_answer a;
  assert_int_equal(http_get(port, "/v1/cluster", &a), 0);
  assert_non_null(strstr(a.body, "{\"id\":2,\"state\":\"alive\""));
  http_answer_free(&a);
  cd_destroy(&c);
}

int main(int argc, char **argv)
{
  if (argc < 2) {
    fprintf(stderr, "usage: %s CAIRND [CAIRN-CLI]\n", argv[0]);
    return 2;
  }
  cairnd_bin = argv[1];
  cairn_cli_bin = argc > 2 ? argv[2] : NULL;
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_admin_metrics_move_with_produces_and_parse_strictly),
      cmocka_unit_test(test_admin_json_views_status_page_and_errors),
      cmocka_unit_test(test_admin_slow_produce_logs_its_phases),
      cmocka_unit_test(test_admin_replica_lag_follows_a_stopped_follower),
      cmocka_unit_test(test_admin_token_guards_all_but_the_probes),
      cmocka_unit_test(test_admin_json_matches_the_cli),
      cmocka_unit_test(test_admin_ready_only_after_joining),
      cmocka_unit_test(test_admin_stuck_scrapers_do_not_stall_produce),
      cmocka_unit_test(test_admin_status_page_in_headless_chromium),
  };
  if (getenv("CAIRN_TEST_FILTER") != NULL) {
    cmocka_set_test_filter(getenv("CAIRN_TEST_FILTER"));
  }
  return cmocka_run_group_tests(tests, NULL, NULL);
}
