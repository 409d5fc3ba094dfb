/* conn_bench.c - cairn-conn-bench: the client port's connection layer
 * alone (listener + conn on a libuv loop in one thread, a blocking wire
 * client in another, over loopback), with a dispatcher that answers at
 * once. Three workloads:
 *   small    requests with no payload, answered with none: requests/s;
 *   produce  requests carrying SIZE payload bytes, answered with none: MB/s in;
 *   fetch    small requests answered with SIZE bytes from memory, or
 *   fetchf   from a file region (sendfile on the thread pool): MB/s out.
 * The client keeps WINDOW requests in flight (pipelining).
 * Usage: cairn-conn-bench [small|produce|fetch|fetchf] [SIZE] [COUNT] [WINDOW] */
#include "common/err.h"
#include "net/conn.h"
#include "net/listener.h"
#include "wire_client.h"

#include <fcntl.h>
#include <pthread.h>
#include <sys/resource.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

struct bench {
  uv_loop_t loop;
  struct listener l;
  uv_async_t stop;
  const char *mode;
  size_t size;
  uint8_t *data; /* SIZE bytes answered by fetch */
  int fd;        /* SIZE bytes answered by fetchf */
};

static void bench_dispatch(struct conn_request *req, void *arg)
{
  struct bench *b = arg;
  Cairn__Client__Envelope env = CAIRN__CLIENT__ENVELOPE__INIT;
  struct conn_part part = {0};
  size_t nparts = 0;
  if (strcmp(b->mode, "fetch") == 0) {
    part = (struct conn_part){.kind = CONN_PART_MEM, .base = b->data, .len = b->size};
    nparts = 1;
  } else if (strcmp(b->mode, "fetchf") == 0) {
    part = (struct conn_part){.kind = CONN_PART_FILE, .fd = b->fd, .offset = 0, .len = b->size};
    nparts = 1;
  }
  conn_respond(req, &env, &part, nparts);
}

static void bench_on_stop(uv_async_t *a)
{
  struct bench *b = a->data;
  listener_close(&b->l, NULL);
  uv_close((uv_handle_t *)&b->stop, NULL);
}

static void *bench_loop(void *arg)
{
  struct bench *b = arg;
  uv_run(&b->loop, UV_RUN_DEFAULT);
  return NULL;
}

static double bench_cpu(void)
{
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
         (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
}

static double bench_now(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
  struct bench b = {.mode = argc > 1 ? argv[1] : "small", .fd = -1};
  if (strcmp(b.mode, "small") != 0 && strcmp(b.mode, "produce") != 0 &&
      strcmp(b.mode, "fetch") != 0 && strcmp(b.mode, "fetchf") != 0) {
    fprintf(stderr,
            "usage: cairn-conn-bench [small|produce|fetch|fetchf] [SIZE] [COUNT] [WINDOW]\n");
    return 2;
  }
  b.size = argc > 2 ? strtoul(argv[2], NULL, 10) : 1 << 20;
  long count =
      argc > 3 ? strtol(argv[3], NULL, 10) : (strcmp(b.mode, "small") == 0 ? 200000 : 2000);
  long window = argc > 4 ? strtol(argv[4], NULL, 10) : 64;
  if (strcmp(b.mode, "small") == 0) {
    b.size = 0;
  }
  b.data = malloc(b.size + 1);
  memset(b.data, 0x5a, b.size);
  if (strcmp(b.mode, "fetchf") == 0) {
    char path[] = "/tmp/cairn-conn-bench-XXXXXX";
    b.fd = mkstemp(path);
    unlink(path);
    if (b.fd < 0 || write(b.fd, b.data, b.size) != (ssize_t)b.size) {
      perror("temp file");
      return 1;
    }
  }
  if (uv_loop_init(&b.loop) != 0) {
    return 1;
  }
  struct listener_config cfg = {
      .bind_address = "127.0.0.1:0", .dispatch = bench_dispatch, .data = &b};
  conn_limits_default(&cfg.limits);
  int rv = listener_init(&b.l, &b.loop, &cfg);
  if (rv != 0) {
    fprintf(stderr, "%s\n", b.l.errmsg);
    return 1;
  }
  uv_async_init(&b.loop, &b.stop, bench_on_stop);
  b.stop.data = &b;
  pthread_t th;
  pthread_create(&th, NULL, bench_loop, &b);

  char address[64];
  snprintf(address, sizeof address, "127.0.0.1:%d", b.l.port);
  struct wc w;
  if (wc_connect(&w, address, 5000) != 0) {
    fprintf(stderr, "%s\n", w.errmsg);
    return 1;
  }
  Cairn__Client__Envelope env = CAIRN__CLIENT__ENVELOPE__INIT;
  env.api = CAIRN__CLIENT__API__API_PRODUCE;
  struct iovec iov = {.iov_base = b.data, .iov_len = b.size};
  int npayload = strcmp(b.mode, "produce") == 0 ? 1 : 0;
  long sent = 0, got = 0;
  double t0 = bench_now();
  double cpu0 = bench_cpu();
  while (got < count) {
    while (sent < count && sent - got < window) {
      env.correlation_id = (uint64_t)++sent;
      if (wc_send(&w, &env, &iov, npayload) != 0) {
        fprintf(stderr, "send failed\n");
        return 1;
      }
    }
    Cairn__Client__Envelope *ans;
    uint8_t *payload;
    size_t plen;
    rv = wc_recv(&w, 10000, &ans, &payload, &plen);
    if (rv != 0) {
      fprintf(stderr, "recv: %s\n", cairn_strerror(rv));
      return 1;
    }
    free(payload);
    cairn__client__envelope__free_unpacked(ans, NULL);
    got++;
  }
  double secs = bench_now() - t0;
  double cpu = bench_cpu() - cpu0;
  size_t moved = strcmp(b.mode, "small") == 0 ? 0 : b.size;
  printf("%s: %ld requests of %zu payload bytes, window %ld: %.3f s, %.0f requests/s, %.1f MB/s, "
         "CPU (client + node) %.2f s = %.2f us/request\n",
         b.mode, count, moved, window, secs, (double)count / secs,
         (double)count * (double)moved / secs / 1e6, cpu, cpu / (double)count * 1e6);
  wc_close(&w);
  uv_async_send(&b.stop);
  pthread_join(th, NULL);
  if (uv_loop_close(&b.loop) != 0) {
    fprintf(stderr, "handles left on the loop\n");
    return 1;
  }
  free(b.data);
  if (b.fd >= 0) {
    close(b.fd);
  }
  return 0;
}
