/* limits_bench.c - cairn-limits-bench: what this machine allows, measured
 * in the same run as the brokers (bench/compare), so ratios mean something:
 *   - fdatasync latency of a 4 KiB append (write at the end, fdatasync),
 *     and of a 4 KiB overwrite of a file written and synced before (what
 *     a log that reuses its segment files would see: no size or extent
 *     change for the filesystem's journal to commit);
 *   - sustained synced sequential writes: 1 MiB writes, fdatasync after
 *     each, over --mb MiB (default 256);
 *   - loopback TCP: MB/s of one stream of 256 KiB writes (1 GiB), and the
 *     round trip of a 1-byte ping-pong with TCP_NODELAY.
 *
 *   cairn-limits-bench --dir DIR [--mb N] [--json]
 *
 * The files are created in DIR (on the filesystem the brokers use) and
 * removed. Prints one JSON object with --json. */
#include "hist.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define LIM_SYNC_ROUNDS 400
#define LIM_TCP_BYTES (1024ull * 1024 * 1024)
#define LIM_TCP_CHUNK (256 * 1024)
#define LIM_RTT_ROUNDS 20000

static uint64_t lim_now_ns(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static int lim_write_all(int fd, const void *p, size_t n)
{
  const char *c = p;
  while (n > 0) {
    ssize_t w = write(fd, c, n);
    if (w < 0) {
      return -1;
    }
    c += w;
    n -= (size_t)w;
  }
  return 0;
}

/* Writes 4 KiB and fdatasyncs it, LIM_SYNC_ROUNDS times: appended at the
 * end of a new file, or (overwrite) over a file of that size written and
 * synced first. */
static int lim_fsync_latency(const char *dir, struct hist *h, bool overwrite)
{
  char path[4096];
  snprintf(path, sizeof path, "%s/limits-sync.%ld", dir, (long)getpid());
  int fd = open(path, O_CREAT | O_TRUNC | O_RDWR, 0600);
  if (fd < 0) {
    perror(path);
    return -1;
  }
  char buf[4096];
  memset(buf, 'x', sizeof buf);
  int rv = 0;
  for (int i = 0; overwrite && i < LIM_SYNC_ROUNDS && rv == 0; i++) {
    rv = lim_write_all(fd, buf, sizeof buf);
  }
  if (rv == 0 && overwrite) {
    rv = fsync(fd) == 0 && lseek(fd, 0, SEEK_SET) == 0 ? 0 : -1;
  }
  memset(buf, 'w', sizeof buf);
  for (int i = 0; i < LIM_SYNC_ROUNDS && rv == 0; i++) {
    uint64_t t = lim_now_ns();
    rv = lim_write_all(fd, buf, sizeof buf) != 0 || fdatasync(fd) != 0 ? -1 : 0;
    hist_record(h, lim_now_ns() - t);
  }
  close(fd);
  unlink(path);
  return rv;
}

static int lim_synced_write(const char *dir, uint64_t mb, double *mbps)
{
  char path[4096];
  snprintf(path, sizeof path, "%s/limits-seq.%ld", dir, (long)getpid());
  int fd = open(path, O_CREAT | O_TRUNC | O_WRONLY, 0600);
  if (fd < 0) {
    perror(path);
    return -1;
  }
  size_t chunk = 1024 * 1024;
  char *buf = malloc(chunk);
  memset(buf, 'y', chunk);
  int rv = 0;
  uint64_t t = lim_now_ns();
  for (uint64_t i = 0; i < mb && rv == 0; i++) {
    rv = lim_write_all(fd, buf, chunk) != 0 || fdatasync(fd) != 0 ? -1 : 0;
  }
  double secs = (double)(lim_now_ns() - t) / 1e9;
  *mbps = (double)mb * (double)chunk / secs / 1e6;
  free(buf);
  close(fd);
  unlink(path);
  return rv;
}

struct lim_srv {
  int lfd;
  bool echo;
};

static void *lim_server(void *arg)
{
  struct lim_srv *s = arg;
  int fd = accept(s->lfd, NULL, NULL);
  if (fd < 0) {
    return NULL;
  }
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  char *buf = malloc(LIM_TCP_CHUNK);
  for (;;) {
    ssize_t r = read(fd, buf, s->echo ? 1 : LIM_TCP_CHUNK);
    if (r <= 0) {
      break;
    }
    if (s->echo && lim_write_all(fd, buf, (size_t)r) != 0) {
      break;
    }
  }
  free(buf);
  close(fd);
  return NULL;
}

/* One loopback connection to a server thread; echo selects ping-pong. */
static int lim_tcp(bool echo, double *mbps, struct hist *rtt)
{
  struct lim_srv s = {.echo = echo};
  s.lfd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  socklen_t al = sizeof a;
  if (s.lfd < 0 || bind(s.lfd, (struct sockaddr *)&a, sizeof a) != 0 || listen(s.lfd, 1) != 0 ||
      getsockname(s.lfd, (struct sockaddr *)&a, &al) != 0) {
    perror("loopback listen");
    return -1;
  }
  pthread_t th;
  pthread_create(&th, NULL, lim_server, &s);
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
    perror("loopback connect");
    return -1;
  }
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  int rv = 0;
  if (echo) {
    char c = 'p';
    for (int i = 0; i < LIM_RTT_ROUNDS && rv == 0; i++) {
      uint64_t t = lim_now_ns();
      rv = write(fd, &c, 1) == 1 && read(fd, &c, 1) == 1 ? 0 : -1;
      hist_record(rtt, lim_now_ns() - t);
    }
  } else {
    char *buf = malloc(LIM_TCP_CHUNK);
    memset(buf, 'z', LIM_TCP_CHUNK);
    uint64_t t = lim_now_ns();
    for (uint64_t sent = 0; sent < LIM_TCP_BYTES && rv == 0; sent += LIM_TCP_CHUNK) {
      rv = lim_write_all(fd, buf, LIM_TCP_CHUNK);
    }
    shutdown(fd, SHUT_WR);
    char c;
    while (read(fd, &c, 1) > 0) {
    }
    *mbps = (double)LIM_TCP_BYTES / ((double)(lim_now_ns() - t) / 1e9) / 1e6;
    free(buf);
  }
  close(fd);
  pthread_join(th, NULL);
  close(s.lfd);
  return rv;
}

int main(int argc, char **argv)
{
  const char *dir = ".";
  uint64_t mb = 256;
  bool json = false;
  static const struct option lo[] = {
      {"dir", 1, 0, 'd'}, {"mb", 1, 0, 'm'}, {"json", 0, 0, 'j'}, {0, 0, 0, 0}};
  int c;
  while ((c = getopt_long(argc, argv, "", lo, NULL)) != -1) {
    switch (c) {
    case 'd':
      dir = optarg;
      break;
    case 'm':
      mb = strtoull(optarg, NULL, 10);
      break;
    case 'j':
      json = true;
      break;
    default:
      fprintf(stderr, "usage: cairn-limits-bench [--dir DIR] [--mb N] [--json]\n");
      return 2;
    }
  }
  static struct hist sync_lat, over_lat, rtt;
  hist_init(&sync_lat);
  hist_init(&over_lat);
  hist_init(&rtt);
  double seq_mbps = 0, tcp_mbps = 0;
  if (lim_fsync_latency(dir, &sync_lat, false) != 0 ||
      lim_fsync_latency(dir, &over_lat, true) != 0 || lim_synced_write(dir, mb, &seq_mbps) != 0 ||
      lim_tcp(false, &tcp_mbps, NULL) != 0 || lim_tcp(true, NULL, &rtt) != 0) {
    fprintf(stderr, "cairn-limits-bench: a measurement failed\n");
    return 1;
  }
  if (json) {
    printf("{\"fdatasync_4k_p50_us\":%.1f,\"fdatasync_4k_p99_us\":%.1f,"
           "\"fdatasync_4k_overwrite_p50_us\":%.1f,\"fdatasync_4k_overwrite_p99_us\":%.1f,"
           "\"synced_seq_write_mb_per_s\":%.1f,\"loopback_tcp_mb_per_s\":%.1f,"
           "\"loopback_rtt_p50_us\":%.1f,\"loopback_rtt_p99_us\":%.1f}\n",
           (double)hist_quantile(&sync_lat, 0.5) / 1e3,
           (double)hist_quantile(&sync_lat, 0.99) / 1e3,
           (double)hist_quantile(&over_lat, 0.5) / 1e3,
           (double)hist_quantile(&over_lat, 0.99) / 1e3, seq_mbps, tcp_mbps,
           (double)hist_quantile(&rtt, 0.5) / 1e3, (double)hist_quantile(&rtt, 0.99) / 1e3);
  } else {
    printf("fdatasync of a 4 KiB append: p50 %.0f us, p99 %.0f us\n",
           (double)hist_quantile(&sync_lat, 0.5) / 1e3,
           (double)hist_quantile(&sync_lat, 0.99) / 1e3);
    printf("fdatasync of a 4 KiB overwrite (file written and synced before): p50 %.0f us, p99 "
           "%.0f us\n",
           (double)hist_quantile(&over_lat, 0.5) / 1e3,
           (double)hist_quantile(&over_lat, 0.99) / 1e3);
    printf("synced sequential write (1 MiB + fdatasync): %.0f MB/s\n", seq_mbps);
    printf("loopback TCP: %.0f MB/s; round trip p50 %.1f us, p99 %.1f us\n", tcp_mbps,
           (double)hist_quantile(&rtt, 0.5) / 1e3, (double)hist_quantile(&rtt, 0.99) / 1e3);
  }
  return 0;
}
