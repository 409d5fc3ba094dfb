/* wal_bench.c - cairn-wal-bench: G groups each keep one append of B bytes
 * in flight (a Raft leader waiting for its own durable write), N appends
 * in all, into (1) the node-wide log (cluster/wal.c: one write and one
 * fdatasync per loop turn for every group) and (2) the baseline measured
 * in the same run: one file per group, each append a write and an
 * fdatasync of its own on the thread pool (what a per-group log does).
 * Prints appends/s, appends per fdatasync and ack latency p50/p99.
 *
 *   cairn-wal-bench DIR [GROUPS=100] [APPENDS=20000] [BYTES=100] */
#include "cluster/wal.h"

#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <uv.h>

struct wb_slot {
  struct wal_req req; /* mode 1 */
  uv_fs_t fs;         /* mode 2 */
  struct wb *b;
  uint64_t gid, next, t0;
  int fd;
  uv_buf_t buf;
};

struct wb {
  uv_loop_t *loop;
  struct wal *w;
  struct wb_slot *slots;
  int groups, left, done;
  uint64_t *lat;
  uint8_t *payload;
  size_t bytes;
  uint64_t syncs;
};

static void wb_record(struct wb *b, struct wb_slot *s)
{
  b->lat[b->done++] = uv_hrtime() - s->t0;
}

static void wb_wal_issue(struct wb *b, struct wb_slot *s);

static void wb_on_wal(struct wal_req *req, int status)
{
  struct wb_slot *s = req->data;
  if (status != 0) {
    fprintf(stderr, "wal: %d\n", status);
    exit(1);
  }
  wb_record(s->b, s);
  wb_wal_issue(s->b, s);
}

static void wb_wal_issue(struct wb *b, struct wb_slot *s)
{
  if (b->left == 0) {
    return;
  }
  b->left--;
  struct wal_entry e = {1, 1, b->payload, (uint32_t)b->bytes};
  s->t0 = uv_hrtime();
  s->req.data = s;
  if (wal_append(b->w, &s->req, s->gid, s->next++, &e, 1, wb_on_wal) != 0) {
    exit(1);
  }
}

static void wb_file_issue(struct wb *b, struct wb_slot *s);

static void wb_on_sync(uv_fs_t *req)
{
  struct wb_slot *s = req->data;
  uv_fs_req_cleanup(req);
  s->b->syncs++;
  wb_record(s->b, s);
  wb_file_issue(s->b, s);
}

static void wb_on_write(uv_fs_t *req)
{
  struct wb_slot *s = req->data;
  uv_fs_req_cleanup(req);
  uv_fs_fdatasync(s->b->loop, &s->fs, s->fd, wb_on_sync);
}

static void wb_file_issue(struct wb *b, struct wb_slot *s)
{
  if (b->left == 0) {
    return;
  }
  b->left--;
  s->t0 = uv_hrtime();
  s->fs.data = s;
  s->buf = uv_buf_init((char *)b->payload, (unsigned)b->bytes);
  uv_fs_write(b->loop, &s->fs, s->fd, &s->buf, 1, -1, wb_on_write);
}

static int wb_cmp(const void *x, const void *y)
{
  uint64_t a = *(const uint64_t *)x, c = *(const uint64_t *)y;
  return a < c ? -1 : a > c;
}

static void wb_report(const char *name, struct wb *b, uint64_t ns, uint64_t syncs)
{
  qsort(b->lat, (size_t)b->done, sizeof *b->lat, wb_cmp);
  printf("%-28s %9.0f appends/s  %7.1f appends/fdatasync  ack p50 %7.0f us  p99 %7.0f us\n", name,
         b->done / (ns / 1e9), syncs ? (double)b->done / (double)syncs : 0,
         b->lat[b->done / 2] / 1e3, b->lat[(size_t)b->done * 99 / 100] / 1e3);
}

int main(int argc, char **argv)
{
  if (argc < 2) {
    fprintf(stderr, "usage: cairn-wal-bench DIR [GROUPS] [APPENDS] [BYTES]\n");
    return 2;
  }
  int groups = argc > 2 ? atoi(argv[2]) : 100, n = argc > 3 ? atoi(argv[3]) : 20000;
  struct wb b = {.loop = uv_default_loop(),
                 .groups = groups,
                 .left = n,
                 .bytes = argc > 4 ? (size_t)atoi(argv[4]) : 100};
  b.slots = calloc((size_t)groups, sizeof *b.slots);
  b.lat = calloc((size_t)n, sizeof *b.lat);
  b.payload = calloc(1, b.bytes + 1);
  char path[4096];
  snprintf(path, sizeof path, "%s/wal", argv[1]);
  char errmsg[WAL_ERRMSG_SIZE];
  if (wal_open(b.loop, path, NULL, &b.w, errmsg) != 0) {
    fprintf(stderr, "%s\n", errmsg);
    return 1;
  }
  uint64_t t0 = uv_hrtime();
  for (int i = 0; i < groups; i++) {
    b.slots[i] = (struct wb_slot){.b = &b, .gid = (uint64_t)i + 1, .next = 1};
    wb_wal_issue(&b, &b.slots[i]);
  }
  uv_run(b.loop, UV_RUN_DEFAULT);
  uint64_t wal_ns = uv_hrtime() - t0;
  struct wal_stats st;
  wal_get_stats(b.w, &st);
  printf("%d groups, %d appends of %zu bytes\n", groups, n, b.bytes);
  wb_report("node-wide wal (group commit)", &b, wal_ns, st.jobs);
  wal_close(b.w, NULL, NULL);
  uv_run(b.loop, UV_RUN_DEFAULT);

  b.left = n;
  b.done = 0;
  for (int i = 0; i < groups; i++) {
    snprintf(path, sizeof path, "%s/group-%d.log", argv[1], i);
    b.slots[i].fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND, 0644);
    if (b.slots[i].fd < 0) {
      perror(path);
      return 1;
    }
  }
  t0 = uv_hrtime();
  for (int i = 0; i < groups; i++) {
    wb_file_issue(&b, &b.slots[i]);
  }
  uv_run(b.loop, UV_RUN_DEFAULT);
  wb_report("baseline: a file per group", &b, uv_hrtime() - t0, b.syncs);
  for (int i = 0; i < groups; i++) {
    close(b.slots[i].fd);
  }
  free(b.slots);
  free(b.lat);
  free(b.payload);
  return 0;
}
