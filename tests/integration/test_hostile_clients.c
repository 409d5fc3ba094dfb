/* test_hostile_clients.c - a node's memory stays bounded against clients
 * that open many connections and each start a large frame they never
 * finish (issue 20, item 4), against a real cairnd:
 *   - 2,000 connections from four loopback addresses, each sending the
 *     header of a frame just under the 16 MiB limit and then 1 MiB of it:
 *     the node's RSS grows by less than its request budget plus a fixed
 *     margin (before the budget it grew by the bytes sent: GiBs);
 *   - a producer connected before the flood keeps being answered;
 *   - connections over the total and per-address limits are refused and
 *     counted, the trickling ones are closed after --frame-timeout-ms and
 *     counted (/metrics), and the node logs both;
 *   - with authentication required, a large frame before authenticating
 *     is refused at once.
 *
 * Usage: test_hostile_clients <path of cairnd>
 * CAIRN_KEEP_TEST_DIR=1 keeps the data dir and node log. */
#include "cairnd.h"
#include "proc.h"
#include "testutil.h"
#include "wire_client.h"

#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#define WAIT_MS 30000
#define BUDGET_MIB 48
#define FLOOD_CONNS 2000
#define FLOOD_SENT (1u << 20) /* bytes of the frame each connection sends */
#define FRAME_L (16u * 1024 * 1024) /* under the default limit (16 MiB + 64 KiB) */
#define MARGIN_MIB 96 /* read buffers of 1,024 conns, allocator slack, ASan */

static const char *cairnd_bin;

static long rss_kib(pid_t pid)
{
  char path[64], line[256];
  snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
  FILE *f = fopen(path, "r");
  if (f == NULL) {
    return -1;
  }
  long kib = -1;
  while (fgets(line, sizeof line, f) != NULL) {
    if (strncmp(line, "VmRSS:", 6) == 0) {
      kib = strtol(line + 6, NULL, 10);
    }
  }
  fclose(f);
  return kib;
}

/* A non-blocking connection from 127.0.0.<host> to port; -1 on failure. */
static int flood_connect(int host, int port)
{
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
  if (fd < 0) {
    return -1;
  }
  struct sockaddr_in src = {.sin_family = AF_INET};
  src.sin_addr.s_addr = htonl(0x7f000000u | (uint32_t)host);
  struct sockaddr_in dst = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
  dst.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (bind(fd, (struct sockaddr *)&src, sizeof src) != 0 ||
      (connect(fd, (struct sockaddr *)&dst, sizeof dst) != 0 && errno != EINPROGRESS)) {
    close(fd);
    return -1;
  }
  return fd;
}

/* Sends what the socket takes of the frame's next bytes; returns how many
 * of the FLOOD_SENT it has sent in all (*sent). */
static void flood_push(int fd, size_t *sent)
{
  static uint8_t chunk[65536];
  while (*sent < FLOOD_SENT) {
    uint8_t *p = chunk;
    size_t n = sizeof chunk;
    if (*sent == 0) {
      /* L just under the limit, E = 0: the rest is "payload". */
      uint8_t hdr[8] = {(uint8_t)(FRAME_L >> 24), (uint8_t)(FRAME_L >> 16),
                        (uint8_t)(FRAME_L >> 8), (uint8_t)FRAME_L, 0, 0, 0, 0};
      memcpy(chunk, hdr, sizeof hdr);
    } else {
      memset(chunk, 0x5a, 8);
    }
    if (n > FLOOD_SENT - *sent) {
      n = FLOOD_SENT - *sent;
    }
    ssize_t w = send(fd, p, n, MSG_DONTWAIT | MSG_NOSIGNAL);
    if (w <= 0) {
      return; /* the node stopped reading it, or closed it */
    }
    *sent += (size_t)w;
  }
}

/* One small produce on the producer's own connection, answered within
 * 5 s. Returns the wire code (0 OK) or a negative code. */
static int produce_one(struct wc *w, uint64_t corr, uint64_t tag, int i)
{
  size_t len;
  uint8_t *batch = tu_make_batch(tag, 1 + i % 3, 100, 0, &len);
  struct wc_produce p;
  wc_produce_init(&p, "t", 0, len, 5000);
  p.env.correlation_id = corr;
  struct iovec iov = {batch, len};
  int rv = wc_send(w, &p.env, &iov, 1);
  free(batch);
  if (rv != 0) {
    return rv;
  }
  Cairn__Client__Envelope *resp;
  rv = wc_recv(w, 5000, &resp, NULL, NULL);
  if (rv != 0) {
    return rv;
  }
  int code = -1;
  if (resp->body_case == CAIRN__CLIENT__ENVELOPE__BODY_PRODUCE_RESP &&
      resp->produce_resp->n_partitions == 1) {
    const Cairn__Client__ProducePartitionResult *r = resp->produce_resp->partitions[0];
    code = r->error != NULL ? (int)r->error->code : 0;
  }
  cairn__client__envelope__free_unpacked(resp, NULL);
  return code;
}

static void test_connection_flood_stays_within_the_request_budget(void **state)
{
  (void)state;
  struct cd_cluster c;
  char flags[256];
  snprintf(flags, sizeof flags,
           "--heartbeat-ms 100 --election-ms 1000 --max-queued-request-bytes %u "
           "--frame-timeout-ms 6000",
           BUDGET_MIB * 1024u * 1024u);
  assert_int_equal(cd_init(&c, cairnd_bin, 1, 1, flags), 0);
  if (cd_start_all(&c, WAIT_MS) != 0) {
    fail_msg("the node did not start (log %s)", c.nodes[0].log);
  }
  assert_int_equal(cd_create_topic(&c, 0, "t", 1, 1, WAIT_MS, NULL, 0), 0);
  struct wc w;
  assert_int_equal(wc_connect(&w, c.nodes[0].client_addr, 2000), 0);
  uint64_t corr = 1;
  /* Warm up: the producer's path is allocated before the baseline. */
  long long until = tu_now_ms() + WAIT_MS;
  int code;
  while ((code = produce_one(&w, corr++, 7, 0)) != 0 && tu_now_ms() < until) {
    usleep(100 * 1000);
  }
  assert_int_equal(code, 0);
  for (int i = 0; i < 20; i++) {
    assert_int_equal(produce_one(&w, corr++, 7, i), 0);
  }
  pid_t pid = c.nodes[0].proc.pid;
  long base = rss_kib(pid);
  assert_true(base > 0);

  int *fds = calloc(FLOOD_CONNS, sizeof *fds);
  size_t *sent = calloc(FLOOD_CONNS, sizeof *sent);
  int opened = 0;
  for (int i = 0; i < FLOOD_CONNS; i++) {
    fds[i] = flood_connect(2 + i % 4, c.nodes[0].client_port);
    opened += fds[i] >= 0;
  }
  assert_true(opened > FLOOD_CONNS / 2);
  /* Push the frames while the producer goes on; sample the RSS. */
  long peak = base;
  long long peak_open = 0; /* cairn_client_connections, sampled */
  int produced = 0, slow = 0;
  long long t0 = tu_now_ms();
  while (tu_now_ms() - t0 < 4000) {
    for (int i = 0; i < FLOOD_CONNS; i++) {
      if (fds[i] >= 0) {
        flood_push(fds[i], &sent[i]);
      }
    }
    long long a = tu_now_ms();
    code = produce_one(&w, corr++, 7, produced);
    if (code != 0) {
      fail_msg("a produce during the flood failed: %d", code);
    }
    slow += tu_now_ms() - a > 1000;
    produced++;
    long r = rss_kib(pid);
    peak = r > peak ? r : peak;
    long long open_now = cd_metric(c.nodes[0].admin_port, "cairn_client_connections");
    peak_open = open_now > peak_open ? open_now : peak_open;
  }
  size_t total = 0;
  for (int i = 0; i < FLOOD_CONNS; i++) {
    total += sent[i];
  }
  /* The trickling connections are closed once their frames are overdue. */
  long long deadline = tu_now_ms() + 20000;
  long long timed_out = 0;
  while ((timed_out = cd_metric(c.nodes[0].admin_port, "cairn_client_frames_timed_out_total")) <
             1 &&
         tu_now_ms() < deadline) {
    assert_int_equal(produce_one(&w, corr++, 7, produced++), 0);
    usleep(200 * 1000);
  }
  long long rejected = cd_metric(c.nodes[0].admin_port, "cairn_client_connections_rejected_total");
  long long waits = cd_metric(c.nodes[0].admin_port, "cairn_client_request_budget_waits_total");
  print_message("flood: %d connections opened, %zu MiB sent; node RSS %ld MiB before, peak "
                "%ld MiB (budget %d MiB); %d produces answered meanwhile (%d over 1 s); "
                "refused %lld, budget waits %lld, timed out %lld; at most %lld open\n",
                opened, total >> 20, base >> 10, peak >> 10, BUDGET_MIB, produced, slow,
                rejected, waits, timed_out, peak_open);
  if (peak - base > (long)(BUDGET_MIB + MARGIN_MIB) * 1024) {
    fail_msg("the node's RSS grew by %ld MiB, above the budget (%d MiB) plus %d MiB",
             (peak - base) >> 10, BUDGET_MIB, MARGIN_MIB);
  }
  assert_true(produced >= 10);
  /* Over the limit (--max-connections, 1,024 by default) the node refuses.
   * Not every connection the flood started reaches it: under load the
   * kernel's accept queue drops some, and a trickler closed for its overdue
   * frame frees a place, so the refusals are not 2,000 - 1,024 exactly; what
   * holds is that the node never holds more than its limit and refuses. */
  assert_true(peak_open > 0 && peak_open <= 1024);
  assert_true(rejected > 0);
  assert_true(waits > 0);
  assert_true(timed_out > 0);
  assert_true(tu_file_contains(c.nodes[0].log, "client connections, the limit"));
  assert_true(tu_file_contains(c.nodes[0].log, "not complete within"));
  for (int i = 0; i < FLOOD_CONNS; i++) {
    if (fds[i] >= 0) {
      close(fds[i]);
    }
  }
  free(fds);
  free(sent);
  wc_close(&w);
  assert_true(cd_running(&c, 0));
  cd_destroy(&c);
}

/* With --auth required, a client that has not authenticated cannot make
 * the node buffer a large frame: it is refused from its header. */
static void test_large_frame_before_authentication_is_refused(void **state)
{
  (void)state;
  struct cd_cluster c;
  assert_int_equal(cd_init(&c, cairnd_bin, 1, 1, "--auth required"), 0);
  if (cd_start_all(&c, WAIT_MS) != 0) {
    fail_msg("the node did not start (log %s)", c.nodes[0].log);
  }
  struct wc w;
  assert_int_equal(wc_connect(&w, c.nodes[0].client_addr, 2000), 0);
  uint8_t hdr[8] = {0, 0x10, 0, 0, 0, 0, 0, 0}; /* L = 1 MiB */
  assert_int_equal(wc_send_raw(&w, hdr, sizeof hdr), 0);
  Cairn__Client__Envelope *resp;
  assert_int_equal(wc_recv(&w, 5000, &resp, NULL, NULL), 0);
  assert_int_equal(resp->body_case, CAIRN__CLIENT__ENVELOPE__BODY_ERROR_RESP);
  assert_int_equal(resp->error_resp->code, CAIRN__CLIENT__ERROR_CODE__REQUEST_TOO_LARGE);
  assert_non_null(strstr(resp->error_resp->message, "before authentication"));
  cairn__client__envelope__free_unpacked(resp, NULL);
  assert_int_equal(wc_wait_closed(&w, 5000), 0);
  wc_close(&w);
  cd_destroy(&c);
}

int main(int argc, char **argv)
{
  if (argc < 2) {
    fprintf(stderr, "usage: %s <path of cairnd>\n", argv[0]);
    return 2;
  }
  cairnd_bin = argv[1];
  /* Under ASan, freed memory waits in a quarantine of up to 256 MiB before
   * it is reused, so a node's RSS then says more about how much it freed
   * than about what it holds: the nodes started here (they inherit the
   * environment) keep a small one, and the RSS bound measures the node.
   * (A fresh-clone run saw 157 MiB of growth with the default quarantine,
   * 85 MiB in another.) Without ASan the option is ignored. */
  const char *asan = getenv("ASAN_OPTIONS");
  char opts[512];
  snprintf(opts, sizeof opts, "%s%squarantine_size_mb=8", asan != NULL ? asan : "",
           asan != NULL && asan[0] != '\0' ? ":" : "");
  setenv("ASAN_OPTIONS", opts, 1);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_connection_flood_stays_within_the_request_budget),
      cmocka_unit_test(test_large_frame_before_authentication_is_refused),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
