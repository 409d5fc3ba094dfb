/* rgroup_bench.c - cairn-rgroup-bench: what one Raft group (one partition
 * replica) costs a node, and produce throughput when writes are spread over
 * 1 to 1,000 partitions, beside the raw fdatasync rate of the same disk
 * measured in the same run. A program, not a test: it asserts nothing about
 * time. docs/replication.md, "Per-group cost" records the figures and how to read them.
 *
 * It starts --nodes cairn-rgroup-driver processes on loopback (3: every
 * group has a replica on every node, replication factor 3 as in
 * production; 1: single-replica groups), each running --groups groups, and
 * measures, in order:
 *   baseline  before any driver starts, in the same directory:
 *             sync-4k     4 KiB append + fdatasync, one at a time, one file:
 *                         the disk's serial sync rate;
 *             sync-4k xK  K threads doing the same on K files (K = the libuv
 *                         threadpool size the drivers run with: raft runs a
 *                         write that must allocate blocks there);
 *             batched     one thread per node, one file each; each round
 *                         appends INFLIGHT batches' bytes, then one
 *                         fdatasync: a node-wide write-ahead log with perfect
 *                         batching on this disk. INFLIGHT x rounds/s is what
 *                         such a design could acknowledge if the disk were
 *                         the only limit;
 *             io_destroy  io_setup(1) + io_destroy of a kernel AIO context:
 *                         raft 0.15 pays one on the loop thread per group
 *                         opened (its I/O probe) and per full open segment;
 *   startup   time until each driver answers (a driver opens its groups a
 *             few per loop iteration and reads commands once all are open), then until every group has a leader
 *             that every node agrees on. Every group lists the same replicas,
 *             so the drivers run with --no-preferred-leader (leaders stay
 *             where elections put them) unless --preferred-leader;
 *   touch     one produce per group, so every group has written its Raft
 *             log (raft creates its open segments at the first append);
 *   idle      after --settle seconds: per node RSS (VmRSS), open fds by kind
 *             (/proc/PID/fd), disk used (st_blocks) and apparent size
 *             (st_size) of its data directory, raft's open segments among
 *             them, and CPU (utime+stime of /proc/PID/stat) over --idle
 *             seconds;
 *   produce   for each P in --partitions (P <= groups): INFLIGHT requests
 *             in flight, request i to partition i mod P, each sent to that
 *             group's leader as "produce G TAG 16 100" (a batch of 16
 *             records with 100-byte values, built by the driver); after
 *             --warmup seconds, for --duration seconds: acknowledged
 *             batches/s and MB/s (batch bytes), ack latency p50/p99, CPU
 *             per node, and Raft entries/s from the drivers' "stats" (each
 *             entry is one synced write on the leader and on each follower).
 *             --repeat R runs the sweep R times and adds, for each P, the
 *             run with the median batches/s;
 *   restart   with --restart: SIGKILL every driver, start them again on the
 *             same data, and time them as at startup.
 *
 * Every run is bounded: each phase has a deadline, and the drivers are
 * killed and the directory removed at exit, also on failure or SIGINT. */
#include "common/err.h"
#include "common/fsutil.h"
#include "proc.h"
#include "testutil.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <linux/aio_abi.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#define BENCH_MAX_NODES 5
#define BENCH_MAX_GROUPS 16384 /* the driver's limit */
#define BENCH_MAX_POINTS 16
#define BENCH_MAX_REPEAT 9
#define BENCH_MAX_INFLIGHT 16384 /* the slot is the low 16 bits of a tag */
#define BENCH_RECORDS 16
#define BENCH_VALUE_BYTES 100
#define BENCH_OUTBUF (1 << 20)
#define BENCH_SYNC_BLOCK 4096
#define BENCH_MAX_SYNC_THREADS 64

struct bench_opts {
  const char *driver;
  const char *parent;
  int nodes;
  int groups;
  int partitions[BENCH_MAX_POINTS];
  int npartitions;
  int inflight;
  double duration;
  double warmup;
  double idle;
  double settle;
  double baseline;
  uint64_t segment_size; /* 0: the driver's default */
  unsigned heartbeat_ms;  /* 0: the driver's default */
  unsigned election_ms;   /* 0: the driver's default */
  int threadpool;         /* UV_THREADPOOL_SIZE for the drivers; 0: inherit */
  bool keep;
  bool no_produce;
  bool restart;
  int repeat; /* runs of the whole produce sweep */
  bool preferred_leader; /* leave the drivers' preferred leader (node 1) on */
  const char *raft_log;  /* --raft-log for the drivers: group (default) or node */
  bool raft_mux;         /* --raft-mux for the drivers (with --raft-log node) */
};

struct bench_node {
  struct tu_proc proc;
  struct tu_ctl ctl;
  int cluster_port;
  int control_port;
  char dir[PATH_MAX];
  char log[PATH_MAX];
  char *out; /* pending request lines */
  size_t outlen;
};

/* What /proc and the data directory say about one node. */
struct bench_usage {
  long rss_kb;
  int threads;
  int fds, fd_sockets, fd_files, fd_raft_open, fd_eventfd, fd_other;
  uint64_t disk_used, disk_apparent;
  uint64_t raft_open_used;
  int raft_open_files;
  int aio_contexts; /* kernel AIO contexts mapped: "[aio]" lines of /proc/PID/maps */
  double cpu_pct;   /* of one core */
};

struct bench_point {
  int partitions;
  double secs;
  uint64_t acked;
  uint64_t errors;
  double p50_ms, p99_ms, max_ms;
  double cpu_pct[BENCH_MAX_NODES];
  double bench_cpu_pct;
  double machine_pct; /* the whole machine, % of one core */
  uint64_t entries; /* Raft entries the leaders proposed in the window */
};

struct bench_baseline {
  double sync_rate;       /* 4 KiB append + fdatasync per second, one file */
  int par_threads;
  double par_rate;        /* the same, par_threads threads in total */
  int batched_threads;
  double batched_rounds;  /* rounds per second, per thread (their mean) */
  double batched_batches; /* INFLIGHT x batched_rounds */
  double batched_mb;      /* MB/s per thread */
  double aio_destroy_ms;  /* io_setup(1) + io_destroy, mean */
};

static struct bench_opts bench_o;
static size_t bench_batch_bytes; /* what the driver builds for a typical tag */
static struct bench_node bench_nodes[BENCH_MAX_NODES];
static int bench_leader[BENCH_MAX_GROUPS + 1]; /* node index, -1 unknown */
static char bench_workdir[PATH_MAX];
static volatile sig_atomic_t bench_stop;
static uint64_t bench_stats_entries[BENCH_MAX_NODES];
static int bench_stats_leaders[BENCH_MAX_NODES];
static int bench_stats_seen;

/* ---- plumbing ---- */

static double bench_now(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void bench_cleanup(void)
{
  for (int i = 0; i < BENCH_MAX_NODES; i++) {
    tu_proc_kill(&bench_nodes[i].proc);
  }
  if (bench_workdir[0] == '\0') {
    return;
  }
  if (bench_o.keep) {
    fprintf(stderr, "cairn-rgroup-bench: kept %s\n", bench_workdir);
    return;
  }
  int rv = fs_remove_tree(bench_workdir);
  if (rv != 0) {
    fprintf(stderr, "cairn-rgroup-bench: removing %s: %s\n", bench_workdir, cairn_strerror(rv));
  }
  bench_workdir[0] = '\0';
}

/* Prints the end of a node's log, where a driver says why it stopped. */
static void bench_log_tail(const struct bench_node *nd)
{
  FILE *f = fopen(nd->log, "r");
  if (f == NULL) {
    return;
  }
  static char lines[12][512];
  int n = 0;
  while (fgets(lines[n % 12], sizeof lines[0], f) != NULL) {
    n++;
  }
  fclose(f);
  fprintf(stderr, "--- end of %s\n", nd->log);
  for (int i = n > 12 ? n - 12 : 0; i < n; i++) {
    fputs(lines[i % 12], stderr);
  }
}

__attribute__((noreturn, format(printf, 1, 2))) static void bench_die(const char *fmt, ...)
{
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "cairn-rgroup-bench: ");
  vfprintf(stderr, fmt, ap);
  fprintf(stderr, "\n");
  va_end(ap);
  /* A driver that failed says why at the end of its log; give one that
   * is dying (an abort, a sanitizer report) a moment to finish. */
  usleep(500000);
  for (int i = 0; i < bench_o.nodes; i++) {
    if (bench_nodes[i].proc.pid > 0) {
      int st = tu_proc_wait(&bench_nodes[i].proc, 2000);
      fprintf(stderr, "node %d: %s\n", i + 1, st == -1 ? "running" : "exited");
      bench_log_tail(&bench_nodes[i]);
    }
  }
  exit(1);
}

static void bench_on_signal(int sig) { bench_stop = 1; }

static void bench_check_stop(void)
{
  if (bench_stop) {
    bench_die("interrupted");
  }
}

/* Sleeps s seconds, waking for a signal. */
static void bench_sleep(double s)
{
  double end = bench_now() + s;
  while (!bench_stop && bench_now() < end) {
    double left = end - bench_now();
    usleep(left > 0.1 ? 100000 : (useconds_t)(left * 1e6) + 1);
  }
  bench_check_stop();
}

/* ---- /proc and the data directory ---- */

static double bench_proc_cpu_secs(pid_t pid)
{
  char path[64], buf[2048];
  snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
  FILE *f = fopen(path, "r");
  if (f == NULL) {
    return -1;
  }
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[n] = '\0';
  /* Fields after the command name, which is in parentheses and may hold
   * spaces: state is field 3, utime 14, stime 15. */
  char *p = strrchr(buf, ')');
  if (p == NULL) {
    return -1;
  }
  unsigned long long utime = 0, stime = 0;
  if (sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &utime, &stime) !=
      2) {
    return -1;
  }
  return (double)(utime + stime) / (double)sysconf(_SC_CLK_TCK);
}

/* CPU seconds the whole machine spent busy (all CPUs), from /proc/stat:
 * everything but idle and iowait. Shows whether something else ran. */
static double bench_machine_busy_secs(void)
{
  FILE *f = fopen("/proc/stat", "r");
  unsigned long long v[8] = {0};
  if (f == NULL) {
    return 0;
  }
  int n = fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2], &v[3],
                 &v[4], &v[5], &v[6], &v[7]);
  fclose(f);
  if (n < 5) {
    return 0;
  }
  unsigned long long busy = v[0] + v[1] + v[2] + v[5] + v[6] + v[7];
  return (double)busy / (double)sysconf(_SC_CLK_TCK);
}

static double bench_self_cpu_secs(void)
{
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
         (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
}

static void bench_proc_status(pid_t pid, struct bench_usage *u)
{
  char path[64], line[256];
  snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
  FILE *f = fopen(path, "r");
  if (f == NULL) {
    return;
  }
  while (fgets(line, sizeof line, f) != NULL) {
    sscanf(line, "VmRSS: %ld", &u->rss_kb);
    sscanf(line, "Threads: %d", &u->threads);
  }
  fclose(f);
}

static void bench_proc_fds(pid_t pid, struct bench_usage *u)
{
  char path[64];
  snprintf(path, sizeof path, "/proc/%d/fd", (int)pid);
  int dfd = open(path, O_RDONLY | O_DIRECTORY);
  if (dfd < 0) {
    return;
  }
  DIR *d = fdopendir(dfd);
  struct dirent *de;
  while ((de = readdir(d)) != NULL) {
    if (de->d_name[0] == '.') {
      continue;
    }
    char target[PATH_MAX];
    ssize_t n = readlinkat(dfd, de->d_name, target, sizeof target - 1);
    if (n < 0) {
      continue;
    }
    target[n] = '\0';
    u->fds++;
    const char *base = strrchr(target, '/');
    if (strncmp(target, "socket:", 7) == 0) {
      u->fd_sockets++;
    } else if (strstr(target, "[eventfd]") != NULL) {
      u->fd_eventfd++;
    } else if (target[0] == '/' && base != NULL && strncmp(base + 1, "open-", 5) == 0) {
      u->fd_raft_open++;
    } else if (target[0] == '/' && strncmp(target, "/dev/", 5) != 0) {
      u->fd_files++;
    } else {
      u->fd_other++;
    }
  }
  closedir(d);
}

static struct bench_usage *bench_walk_usage; /* nftw has no user pointer */

static int bench_walk_cb(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
  if (type != FTW_F) {
    return 0;
  }
  struct bench_usage *u = bench_walk_usage;
  uint64_t used = (uint64_t)st->st_blocks * 512;
  u->disk_used += used;
  u->disk_apparent += (uint64_t)st->st_size;
  if (strncmp(path + ftw->base, "open-", 5) == 0) {
    u->raft_open_used += used;
    u->raft_open_files++;
  }
  return 0;
}

/* Each kernel AIO context (io_setup) maps its ring into the process as
 * "/[aio] (deleted)": a per-process count, unlike fs.aio-nr. */
static int bench_proc_aio_contexts(pid_t pid)
{
  char path[64], line[512];
  snprintf(path, sizeof path, "/proc/%d/maps", (int)pid);
  FILE *f = fopen(path, "r");
  int n = 0;
  while (f != NULL && fgets(line, sizeof line, f) != NULL) {
    n += strstr(line, "/[aio]") != NULL;
  }
  if (f != NULL) {
    fclose(f);
  }
  return n;
}

static void bench_usage_of(int i, struct bench_usage *u)
{
  memset(u, 0, sizeof *u);
  u->aio_contexts = bench_proc_aio_contexts(bench_nodes[i].proc.pid);
  bench_proc_status(bench_nodes[i].proc.pid, u);
  bench_proc_fds(bench_nodes[i].proc.pid, u);
  bench_walk_usage = u;
  nftw(bench_nodes[i].dir, bench_walk_cb, 64, FTW_PHYS);
}

static long bench_read_long(const char *path)
{
  FILE *f = fopen(path, "r");
  long v = -1;
  if (f != NULL) {
    if (fscanf(f, "%ld", &v) != 1) {
      v = -1;
    }
    fclose(f);
  }
  return v;
}

/* ---- the disk baseline ---- */

struct bench_sync_job {
  char path[PATH_MAX];
  size_t chunk;     /* bytes appended per fdatasync */
  double until;     /* bench_now() deadline */
  uint64_t rounds;  /* out */
  double secs;      /* out */
  int err;          /* out: 0 or errno */
};

static void *bench_sync_thread(void *arg)
{
  struct bench_sync_job *j = arg;
  int fd = open(j->path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  uint8_t *buf = malloc(j->chunk);
  if (fd < 0 || buf == NULL) {
    j->err = fd < 0 ? errno : ENOMEM;
    free(buf);
    if (fd >= 0) {
      close(fd);
    }
    return NULL;
  }
  memset(buf, 0xab, j->chunk);
  off_t off = 0;
  double t0 = bench_now(), t = t0;
  while (t < j->until && !bench_stop) {
    int rv = fs_pwrite_all(fd, buf, j->chunk, off);
    if (rv == 0 && fdatasync(fd) != 0) {
      rv = -errno;
    }
    if (rv != 0) {
      j->err = -rv;
      break;
    }
    off += (off_t)j->chunk;
    j->rounds++;
    t = bench_now();
  }
  j->secs = t - t0;
  close(fd);
  unlink(j->path);
  free(buf);
  return NULL;
}

/* Runs n threads appending chunk bytes + fdatasync for secs. Returns the
 * mean rounds per second per thread. */
static double bench_sync_run(const char *tag, int n, size_t chunk, double secs)
{
  static struct bench_sync_job jobs[BENCH_MAX_SYNC_THREADS];
  pthread_t th[BENCH_MAX_SYNC_THREADS];
  double until = bench_now() + secs;
  for (int i = 0; i < n; i++) {
    memset(&jobs[i], 0, sizeof jobs[i]);
    if (snprintf(jobs[i].path, sizeof jobs[i].path, "%s/baseline-%s-%d", bench_workdir, tag, i) >=
        (int)sizeof jobs[i].path) {
      bench_die("directory name too long");
    }
    jobs[i].chunk = chunk;
    jobs[i].until = until;
    if (pthread_create(&th[i], NULL, bench_sync_thread, &jobs[i]) != 0) {
      bench_die("pthread_create failed");
    }
  }
  double sum = 0;
  for (int i = 0; i < n; i++) {
    pthread_join(th[i], NULL);
    if (jobs[i].err != 0) {
      bench_die("baseline %s: %s", tag, strerror(jobs[i].err));
    }
    sum += jobs[i].secs > 0 ? (double)jobs[i].rounds / jobs[i].secs : 0;
  }
  bench_check_stop();
  return sum / n;
}

/* canonical/raft 0.15 gives each open segment's writer its own kernel AIO
 * context and destroys it on the loop thread when the segment is full;
 * io_destroy waits for an RCU grace period. Returns its mean duration. */
static double bench_aio_destroy_ms(int n)
{
  double sum = 0;
  for (int i = 0; i < n; i++) {
    aio_context_t ctx = 0;
    if (syscall(SYS_io_setup, 1, &ctx) != 0) {
      return -1;
    }
    double t0 = bench_now();
    syscall(SYS_io_destroy, ctx);
    sum += bench_now() - t0;
  }
  return sum / n * 1e3;
}

static int bench_threadpool_size(void)
{
  if (bench_o.threadpool > 0) {
    return bench_o.threadpool;
  }
  const char *v = getenv("UV_THREADPOOL_SIZE");
  int n = v != NULL ? atoi(v) : 0;
  return n > 0 ? n : 4; /* libuv's default */
}

static void bench_baseline(struct bench_baseline *b)
{
  double s = bench_o.baseline;
  b->sync_rate = bench_sync_run("sync", 1, BENCH_SYNC_BLOCK, s);
  b->par_threads = bench_threadpool_size();
  if (b->par_threads > BENCH_MAX_SYNC_THREADS) {
    b->par_threads = BENCH_MAX_SYNC_THREADS;
  }
  b->par_rate = bench_sync_run("par", b->par_threads, BENCH_SYNC_BLOCK, s) * b->par_threads;
  b->batched_threads = bench_o.nodes;
  size_t chunk = (size_t)bench_o.inflight * bench_batch_bytes;
  b->batched_rounds = bench_sync_run("batched", b->batched_threads, chunk, s);
  b->batched_batches = b->batched_rounds * bench_o.inflight;
  b->batched_mb = b->batched_rounds * (double)chunk / 1e6;
  b->aio_destroy_ms = bench_aio_destroy_ms(10);
}

/* ---- drivers and their control connections ---- */

static void bench_node_start(int i, const char *replicas)
{
  struct bench_node *nd = &bench_nodes[i];
  char id[16], cluster[64], control[64], groups[16], seg[32], hb[16], el[16];
  snprintf(id, sizeof id, "%d", i + 1);
  snprintf(cluster, sizeof cluster, "127.0.0.1:%d", nd->cluster_port);
  snprintf(control, sizeof control, "127.0.0.1:%d", nd->control_port);
  snprintf(groups, sizeof groups, "%d", bench_o.groups);
  char *argv[32] = {(char *)bench_o.driver, "--id", id, "--cluster", cluster, "--control",
                    control, "--dir", nd->dir, "--replicas", (char *)replicas, "--groups",
                    groups};
  int argc = 13;
  if (bench_o.segment_size != 0) {
    snprintf(seg, sizeof seg, "%" PRIu64, bench_o.segment_size);
    argv[argc++] = "--raft-segment-size";
    argv[argc++] = seg;
  }
  if (bench_o.heartbeat_ms != 0) {
    snprintf(hb, sizeof hb, "%u", bench_o.heartbeat_ms);
    argv[argc++] = "--heartbeat-ms";
    argv[argc++] = hb;
  }
  if (bench_o.election_ms != 0) {
    snprintf(el, sizeof el, "%u", bench_o.election_ms);
    argv[argc++] = "--election-ms";
    argv[argc++] = el;
  }
  /* Every group has the same replica list, so the preferred leader would be
   * node 1 for all of them; in production replica lists rotate it. Leaders
   * stay where elections put them unless asked. */
  if (!bench_o.preferred_leader) {
    argv[argc++] = "--no-preferred-leader";
  }
  if (bench_o.raft_log != NULL) {
    argv[argc++] = "--raft-log";
    argv[argc++] = (char *)bench_o.raft_log;
  }
  if (bench_o.raft_mux) {
    argv[argc++] = "--raft-mux";
  }
  argv[argc] = NULL;
  if (tu_proc_start(&nd->proc, argv, nd->log) != 0) {
    bench_die("starting %s failed", bench_o.driver);
  }
}

/* Queues one request line for node i; bench_flush() sends them. */
static void bench_queue(int i, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void bench_queue(int i, const char *fmt, ...)
{
  struct bench_node *nd = &bench_nodes[i];
  if (nd->outlen + 128 > BENCH_OUTBUF) {
    bench_die("request buffer of node %d is full", i + 1);
  }
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(nd->out + nd->outlen, BENCH_OUTBUF - nd->outlen, fmt, ap);
  va_end(ap);
  nd->outlen += (size_t)n;
  nd->out[nd->outlen++] = '\n';
}

/* Sends every queued line. The drivers read as fast as they answer and the
 * answers are bounded by what is in flight, so blocking sends cannot
 * deadlock against unread answers (up to BENCH_MAX_INFLIGHT). */
static void bench_flush(void)
{
  for (int i = 0; i < bench_o.nodes; i++) {
    struct bench_node *nd = &bench_nodes[i];
    size_t off = 0;
    while (off < nd->outlen) {
      ssize_t w = send(nd->ctl.fd, nd->out + off, nd->outlen - off, MSG_NOSIGNAL);
      if (w < 0 && errno == EINTR) {
        continue;
      }
      if (w <= 0) {
        bench_die("sending to node %d: %s", i + 1, strerror(errno));
      }
      off += (size_t)w;
    }
    nd->outlen = 0;
  }
}

typedef void (*bench_line_cb)(int node, char *line, double now);

/* Waits up to timeout_ms for answers and hands every whole line to cb.
 * Returns the number of lines. */
static int bench_poll(int timeout_ms, bench_line_cb cb)
{
  struct pollfd pfd[BENCH_MAX_NODES];
  for (int i = 0; i < bench_o.nodes; i++) {
    pfd[i].fd = bench_nodes[i].ctl.fd;
    pfd[i].events = POLLIN;
    pfd[i].revents = 0;
  }
  int pr = poll(pfd, (nfds_t)bench_o.nodes, timeout_ms);
  if (pr < 0 && errno != EINTR) {
    bench_die("poll: %s", strerror(errno));
  }
  bench_check_stop();
  int lines = 0;
  double now = bench_now();
  for (int i = 0; pr > 0 && i < bench_o.nodes; i++) {
    if ((pfd[i].revents & (POLLIN | POLLHUP | POLLERR)) == 0) {
      continue;
    }
    struct tu_ctl *c = &bench_nodes[i].ctl;
    ssize_t r = recv(c->fd, c->buf + c->len, sizeof c->buf - c->len, 0);
    if (r <= 0) {
      bench_die("node %d closed its control connection", i + 1);
    }
    c->len += (size_t)r;
    size_t pos = 0;
    char *nl;
    while ((nl = memchr(c->buf + pos, '\n', c->len - pos)) != NULL) {
      *nl = '\0';
      cb(i, c->buf + pos, now);
      lines++;
      pos = (size_t)(nl - c->buf) + 1;
    }
    memmove(c->buf, c->buf + pos, c->len - pos);
    c->len -= pos;
    if (c->len == sizeof c->buf) {
      bench_die("node %d sent a line longer than %zu bytes", i + 1, sizeof c->buf);
    }
  }
  return lines;
}

static void bench_on_stats(int node, const char *line)
{
  unsigned open, leaders;
  uint64_t entries, batches;
  if (sscanf(line, "stats %u %u %" SCNu64 " %" SCNu64, &open, &leaders, &entries, &batches) ==
      4) {
    bench_stats_entries[node] = entries;
    bench_stats_leaders[node] = (int)leaders;
    bench_stats_seen++;
  }
}

/* ---- startup: every group has a leader all nodes agree on ---- */

static int bench_says_leader[BENCH_MAX_GROUPS + 1];
static uint64_t bench_says_id[BENCH_MAX_NODES][BENCH_MAX_GROUPS + 1];
static int bench_answers;

static void bench_on_leader_line(int node, char *line, double now)
{
  uint64_t g, id;
  char role[24];
  bench_answers++;
  if (sscanf(line, "leader %" SCNu64 " %" SCNu64 " %23s", &g, &id, role) != 3 || g < 1 ||
      g > (uint64_t)bench_o.groups) {
    return;
  }
  bench_says_id[node][g] = id;
  if (strcmp(role, "leader") == 0) {
    bench_says_leader[g] = node;
  }
}

/* Asks every node about every group until each group has one leader that
 * every node names. Returns the seconds it took. */
static double bench_wait_leaders(double deadline_s)
{
  double t0 = bench_now();
  for (;;) {
    for (int g = 1; g <= bench_o.groups; g++) {
      bench_says_leader[g] = -1;
    }
    bench_answers = 0;
    for (int i = 0; i < bench_o.nodes; i++) {
      for (int g = 1; g <= bench_o.groups; g++) {
        bench_queue(i, "leader %d", g);
      }
    }
    bench_flush();
    double until = bench_now() + 30;
    while (bench_answers < bench_o.nodes * bench_o.groups) {
      if (bench_now() > until) {
        bench_die("no answer to \"leader\" within 30 s");
      }
      bench_poll(1000, bench_on_leader_line);
    }
    int missing = 0;
    for (int g = 1; g <= bench_o.groups; g++) {
      int l = bench_says_leader[g];
      bool agreed = l >= 0;
      for (int i = 0; agreed && i < bench_o.nodes; i++) {
        agreed = bench_says_id[i][g] == (uint64_t)(l + 1);
      }
      bench_leader[g] = agreed ? l : -1;
      missing += !agreed;
    }
    if (missing == 0) {
      return bench_now() - t0;
    }
    if (bench_now() - t0 > deadline_s) {
      bench_die("%d of %d groups still without an agreed leader after %.0f s", missing,
                bench_o.groups, deadline_s);
    }
    bench_sleep(0.5);
  }
}

/* ---- produce ---- */

struct bench_slot {
  double sent;
  int group;
  bool busy;
};

static struct bench_slot bench_slots[BENCH_MAX_INFLIGHT];
static uint64_t bench_seq;
static int bench_next_part;
static int bench_parts;
static int bench_busy;
static double bench_win_start, bench_win_end;
static uint64_t bench_acked, bench_errors, bench_errors_total;
static double *bench_lat;
static size_t bench_nlat, bench_cap_lat;
static bool bench_issue_more;
static char bench_last_error[256];

static void bench_issue(int s, double now)
{
  int g = bench_next_part % bench_parts + 1;
  bench_next_part = (bench_next_part + 1) % bench_parts;
  int node = bench_leader[g] >= 0 ? bench_leader[g] : 0;
  uint64_t tag = (++bench_seq << 16) | (uint64_t)s;
  bench_queue(node, "produce %d %" PRIu64 " %d %d", g, tag, BENCH_RECORDS, BENCH_VALUE_BYTES);
  bench_slots[s].sent = now;
  bench_slots[s].group = g;
  bench_slots[s].busy = true;
  bench_busy++;
}

static void bench_on_produce_line(int node, char *line, double now)
{
  uint64_t g, tag, leader;
  int64_t off;
  char code[64];
  bool ok;
  if (sscanf(line, "ok %" SCNu64 " %" SCNu64 " %" SCNd64, &g, &tag, &off) == 3) {
    ok = true;
  } else if (sscanf(line, "err %" SCNu64 " %" SCNu64 " %63s %" SCNu64, &g, &tag, code,
                    &leader) == 4) {
    ok = false;
    if (leader >= 1 && leader <= (uint64_t)bench_o.nodes && g <= (uint64_t)bench_o.groups) {
      bench_leader[g] = (int)leader - 1;
    }
    snprintf(bench_last_error, sizeof bench_last_error, "%s", line);
  } else {
    bench_on_stats(node, line);
    return;
  }
  int s = (int)(tag & 0xffff);
  if (s >= bench_o.inflight || !bench_slots[s].busy) {
    bench_die("answer for a request not in flight: %s", line);
  }
  struct bench_slot *sl = &bench_slots[s];
  sl->busy = false;
  bench_busy--;
  if (ok) {
    if (sl->sent >= bench_win_start && now <= bench_win_end) {
      bench_acked++;
      if (bench_nlat == bench_cap_lat) {
        bench_cap_lat = bench_cap_lat ? bench_cap_lat * 2 : 65536;
        bench_lat = realloc(bench_lat, bench_cap_lat * sizeof *bench_lat);
        if (bench_lat == NULL) {
          bench_die("out of memory");
        }
      }
      bench_lat[bench_nlat++] = now - sl->sent;
    }
  } else {
    bench_errors_total++;
    if (now >= bench_win_start && now <= bench_win_end) {
      bench_errors++;
    }
  }
  if (bench_issue_more) {
    bench_issue(s, now);
  }
}

static int bench_cmp_double(const void *a, const void *b)
{
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static double bench_pct(double p)
{
  if (bench_nlat == 0) {
    return 0;
  }
  size_t i = (size_t)(p * (double)(bench_nlat - 1) + 0.5);
  return bench_lat[i];
}

/* Collects one "stats" answer from every node; the answers arrive among
 * produce answers and are picked out by bench_on_produce_line. */
static void bench_collect_stats(uint64_t entries[], double timeout_s)
{
  bench_stats_seen = 0;
  for (int i = 0; i < bench_o.nodes; i++) {
    bench_queue(i, "stats");
  }
  bench_flush();
  double until = bench_now() + timeout_s;
  while (bench_stats_seen < bench_o.nodes) {
    if (bench_now() > until) {
      bench_die("no answer to \"stats\" within %.0f s", timeout_s);
    }
    bench_poll(100, bench_on_produce_line);
    bench_flush();
  }
  for (int i = 0; i < bench_o.nodes; i++) {
    entries[i] = bench_stats_entries[i];
  }
}

/* Runs until nothing is in flight. */
static void bench_drain(const char *what)
{
  double until = bench_now() + 60;
  while (bench_busy > 0) {
    if (bench_now() > until) {
      bench_die("%s: %d requests still unanswered after 60 s", what, bench_busy);
    }
    bench_poll(100, bench_on_produce_line);
    bench_flush();
  }
}

/* One produce request per group, so every group has written its log.
 * Retries a request that met no leader. */
static void bench_touch(void)
{
  bench_parts = bench_o.groups;
  bench_next_part = 0;
  bench_win_start = bench_win_end = 0;
  bench_issue_more = false;
  double until = bench_now() + 120;
  int done = 0;
  while (done < bench_o.groups) {
    int batch = bench_o.groups - done;
    if (batch > bench_o.inflight) {
      batch = bench_o.inflight;
    }
    uint64_t errors0 = bench_errors_total;
    for (int s = 0; s < batch; s++) {
      bench_next_part = done + s;
      bench_issue(s, bench_now());
    }
    bench_flush();
    bench_drain("touch");
    if (bench_errors_total == errors0) {
      done += batch;
    } else if (bench_now() > until) {
      bench_die("touch: produce still failing after 120 s: %s", bench_last_error);
    } else {
      bench_sleep(0.2); /* a leader moved: send this batch again */
    }
  }
}

static void bench_produce(int partitions, struct bench_point *pt)
{
  memset(pt, 0, sizeof *pt);
  pt->partitions = partitions;
  bench_parts = partitions;
  bench_next_part = 0;
  bench_acked = bench_errors = 0;
  bench_nlat = 0;
  bench_issue_more = true;
  double t0 = bench_now();
  bench_win_start = t0 + bench_o.warmup;
  bench_win_end = bench_win_start + bench_o.duration;
  for (int s = 0; s < bench_o.inflight; s++) {
    bench_issue(s, t0);
  }
  bench_flush();
  while (bench_now() < bench_win_start) {
    bench_poll(50, bench_on_produce_line);
    bench_flush();
  }
  uint64_t e0[BENCH_MAX_NODES], e1[BENCH_MAX_NODES];
  double cpu0[BENCH_MAX_NODES];
  bench_collect_stats(e0, 30);
  for (int i = 0; i < bench_o.nodes; i++) {
    cpu0[i] = bench_proc_cpu_secs(bench_nodes[i].proc.pid);
  }
  double self0 = bench_self_cpu_secs();
  double m0 = bench_machine_busy_secs();
  double w0 = bench_now();
  while (bench_now() < bench_win_end) {
    bench_poll(50, bench_on_produce_line);
    bench_flush();
  }
  double w1 = bench_now();
  double self1 = bench_self_cpu_secs();
  pt->machine_pct = (bench_machine_busy_secs() - m0) / (w1 - w0) * 100;
  for (int i = 0; i < bench_o.nodes; i++) {
    pt->cpu_pct[i] = (bench_proc_cpu_secs(bench_nodes[i].proc.pid) - cpu0[i]) / (w1 - w0) * 100;
  }
  pt->bench_cpu_pct = (self1 - self0) / (w1 - w0) * 100;
  bench_issue_more = false;
  bench_collect_stats(e1, 30);
  bench_drain("produce");
  for (int i = 0; i < bench_o.nodes; i++) {
    pt->entries += e1[i] - e0[i];
  }
  pt->secs = bench_win_end - bench_win_start;
  pt->acked = bench_acked;
  pt->errors = bench_errors;
  qsort(bench_lat, bench_nlat, sizeof *bench_lat, bench_cmp_double);
  pt->p50_ms = bench_pct(0.50) * 1e3;
  pt->p99_ms = bench_pct(0.99) * 1e3;
  pt->max_ms = bench_nlat ? bench_lat[bench_nlat - 1] * 1e3 : 0;
}

/* ---- report ---- */

static void bench_machine(void)
{
  char model[256] = "unknown", line[512];
  FILE *f = fopen("/proc/cpuinfo", "r");
  while (f != NULL && fgets(line, sizeof line, f) != NULL) {
    if (strncmp(line, "model name", 10) == 0) {
      char *v = strchr(line, ':');
      if (v != NULL) {
        snprintf(model, sizeof model, "%.*s", (int)strcspn(v + 2, "\n"), v + 2);
      }
      break;
    }
  }
  if (f != NULL) {
    fclose(f);
  }
  struct utsname u;
  uname(&u);
  struct statfs sf;
  const char *fs = "?";
  if (statfs(bench_workdir, &sf) == 0) {
    fs = sf.f_type == 0xEF53 ? "ext4" : sf.f_type == 0x58465342 ? "xfs"
       : sf.f_type == 0x9123683E ? "btrfs" : sf.f_type == 0x01021994 ? "tmpfs"
       : sf.f_type == 0x794c7630 ? "overlayfs" : "other";
  }
  printf("machine:   %s, %ld CPUs, %.1f GiB RAM, %s %s\n", model, sysconf(_SC_NPROCESSORS_ONLN),
         (double)sysconf(_SC_PHYS_PAGES) * (double)sysconf(_SC_PAGESIZE) / (1 << 30), u.sysname,
         u.release);
  printf("directory: %s (%s)\n", bench_workdir, fs);
}

static void bench_fmt_opt(char *buf, size_t n, uint64_t v, const char *dflt)
{
  if (v == 0) {
    snprintf(buf, n, "%s", dflt);
  } else {
    snprintf(buf, n, "%" PRIu64, v);
  }
}

static void bench_print_idle(const struct bench_usage *u, double startup_s, double leaders_s,
                             long aio_nr, double machine_pct)
{
  printf("\nstartup: drivers answered after %.1f s, every group had an agreed leader after "
         "%.1f s more; leaders per node:",
         startup_s, leaders_s);
  for (int i = 0; i < bench_o.nodes; i++) {
    printf(" %d", bench_stats_leaders[i]);
  }
  printf("\n\nidle, per node, after one produce per group and %.0f s of settling "
         "(CPU over %.0f s; %% of one core):\n",
         bench_o.settle, bench_o.idle);
  printf("%-5s %9s %8s %7s %6s %6s %6s %5s %5s %10s %10s %11s %7s\n", "node", "RSS MiB", "threads",
         "fds", "sock", "open-", "files", "evfd", "other", "used MiB", "apparent", "raft-open",
         "CPU %");
  double g = bench_o.groups;
  struct bench_usage sum = {0};
  for (int i = 0; i < bench_o.nodes; i++) {
    const struct bench_usage *x = &u[i];
    printf("%-5d %9.1f %8d %7d %6d %6d %6d %5d %5d %10.1f %10.1f %11.1f %7.1f\n", i + 1,
           x->rss_kb / 1024.0, x->threads, x->fds, x->fd_sockets, x->fd_raft_open, x->fd_files,
           x->fd_eventfd, x->fd_other, x->disk_used / 1048576.0, x->disk_apparent / 1048576.0,
           x->raft_open_used / 1048576.0, x->cpu_pct);
    sum.rss_kb += x->rss_kb;
    sum.fds += x->fds;
    sum.fd_sockets += x->fd_sockets;
    sum.disk_used += x->disk_used;
    sum.disk_apparent += x->disk_apparent;
    sum.raft_open_used += x->raft_open_used;
    sum.raft_open_files += x->raft_open_files;
    sum.aio_contexts += x->aio_contexts;
    sum.cpu_pct += x->cpu_pct;
  }
  double n = bench_o.nodes;
  printf("per group (node figure / %d groups, mean over nodes): RSS %.1f KiB, fds %.2f "
         "(sockets %.2f), disk used %.1f KiB (raft open segments %.1f KiB in %.2f files), "
         "apparent %.1f KiB, idle CPU %.4f %% of a core\n",
         bench_o.groups, sum.rss_kb / n / g, sum.fds / n / g, sum.fd_sockets / n / g,
         sum.disk_used / n / g / 1024, sum.raft_open_used / n / g / 1024,
         sum.raft_open_files / n / g, sum.disk_apparent / n / g / 1024, sum.cpu_pct / n / g);
  printf("all nodes: RSS %.1f MiB, fds %d, disk used %.1f MiB, idle CPU %.1f %% of a core "
         "(whole machine meanwhile: %.1f %%); AIO contexts the drivers hold (fs.aio-nr) %ld, "
         "mapped in their processes %d\n",
         sum.rss_kb / 1024.0, sum.fds, sum.disk_used / 1048576.0, sum.cpu_pct, machine_pct,
         aio_nr, sum.aio_contexts);
}

static void bench_print_aio(const struct bench_baseline *b)
{
  double seg = bench_o.segment_size != 0 ? (double)bench_o.segment_size : 1048576.0;
  bool raft_uv = bench_o.raft_log == NULL || strcmp(bench_o.raft_log, "group") == 0 ||
                 !bench_o.raft_mux;
  printf("  io_setup + io_destroy of one AIO context: %.1f ms (raft_uv does one per group "
         "opened and per full open segment, on the loop thread; %s)\n",
         b->aio_destroy_ms,
         raft_uv ? "these groups are on raft_uv" : "these groups have no raft_uv");
  if (b->aio_destroy_ms > 0 && raft_uv) {
    printf("  => with %.0f KiB segments%s, a node whose loop did nothing else could append at "
           "most %.1f MB/s of Raft log\n",
           seg / 1024, bench_o.segment_size != 0 ? "" : " (assuming the 1 MiB default)",
           seg / (b->aio_destroy_ms / 1e3) / 1e6);
  }
}

static void bench_print_point(const char *label, const struct bench_point *p)
{
  double bps = p->acked / p->secs;
  double eps = p->entries / p->secs;
  printf("%-7s %6d %10.0f %8.2f %9.1f %9.1f %9.1f %10.0f %9.2f %6" PRIu64 " ", label,
         p->partitions, bps, bps * bench_batch_bytes / 1e6, p->p50_ms, p->p99_ms, p->max_ms, eps,
         eps > 0 ? bps / eps : 0, p->errors);
  for (int j = 0; j < bench_o.nodes; j++) {
    printf(" %3.0f", p->cpu_pct[j]);
  }
  printf("  (%.0f) [%.0f]\n", p->bench_cpu_pct, p->machine_pct);
}

static int bench_cmp_point(const void *a, const void *b)
{
  const struct bench_point *x = *(const struct bench_point *const *)a;
  const struct bench_point *y = *(const struct bench_point *const *)b;
  double u = x->acked / x->secs, v = y->acked / y->secs;
  return u < v ? -1 : u > v;
}

/* pts holds `runs` sweeps of n points each, sweep after sweep. */
static void bench_print_produce(const struct bench_point *pts, int n, int runs,
                                const struct bench_baseline *b)
{
  printf("\nproduce: %d requests in flight, batches of %d records x %d-byte values "
         "(%zu bytes), round-robin over P partitions, %.0f s after %.0f s of warm-up:\n",
         bench_o.inflight, BENCH_RECORDS, BENCH_VALUE_BYTES, bench_batch_bytes, bench_o.duration,
         bench_o.warmup);
  printf("%-7s %6s %10s %8s %9s %9s %9s %10s %9s %6s  %s\n", "run", "P", "batches/s", "MB/s",
         "p50 ms", "p99 ms", "max ms", "entries/s", "b/entry", "errors",
         "CPU % per node (bench) [machine]");
  for (int r = 0; r < runs; r++) {
    char label[16];
    snprintf(label, sizeof label, "%d", r + 1);
    for (int i = 0; i < n; i++) {
      bench_print_point(label, &pts[r * n + i]);
    }
  }
  if (runs > 1) {
    /* The run with the median batches/s, whole, for each P. */
    for (int i = 0; i < n; i++) {
      const struct bench_point *sorted[BENCH_MAX_REPEAT];
      for (int r = 0; r < runs; r++) {
        sorted[r] = &pts[r * n + i];
      }
      qsort(sorted, (size_t)runs, sizeof sorted[0], bench_cmp_point);
      bench_print_point("median", sorted[runs / 2]);
    }
  }
  printf("(entries/s: Raft entries the leaders proposed; each is one synced append on the leader "
         "and on every follower. b/entry: batches per entry, what group commit coalesced. CPU: "
         "%% of one core; [machine]: the whole machine, all processes, %ld cores)\n",
         sysconf(_SC_NPROCESSORS_ONLN));
  printf("\nbaseline, same disk, same run (before the drivers started):\n");
  printf("  4 KiB append + fdatasync, 1 file:                %8.0f syncs/s\n", b->sync_rate);
  printf("  4 KiB append + fdatasync, %2d threads x 1 file:   %8.0f syncs/s in total\n",
         b->par_threads, b->par_rate);
  printf("  %d x %zu-byte batches (%zu KiB) + fdatasync, %d thread(s): %6.0f rounds/s each, %.1f MB/s "
         "each\n",
         bench_o.inflight, bench_batch_bytes, (size_t)bench_o.inflight * bench_batch_bytes / 1024,
         b->batched_threads, b->batched_rounds, b->batched_mb);
  printf("  => a node-wide log syncing every in-flight batch at once could acknowledge up to "
         "%.0f batches/s (%.1f MB/s) on this disk, if nothing but the disk limited it\n",
         b->batched_batches, b->batched_batches * bench_batch_bytes / 1e6);
  printf("  => one sync per batch at the serial rate: %.0f batches/s; with %d syncs in "
         "parallel: %.0f batches/s\n",
         b->sync_rate, b->par_threads, b->par_rate);
  bench_print_aio(b);
}

/* ---- main ---- */

static void bench_usage_text(FILE *f)
{
  fprintf(f,
          "usage: cairn-rgroup-bench [--driver PATH] [--nodes 1|3] [--groups G]\n"
          "         [--partitions 1,10,100,1000] [--inflight M] [--duration S] [--warmup S]\n"
          "         [--idle S] [--settle S] [--baseline S] [--segment-size BYTES]\n"
          "         [--heartbeat-ms MS] [--election-ms MS] [--threadpool N] [--dir DIR]\n"
          "         [--keep] [--no-produce] [--restart] [--repeat R] [--preferred-leader]\n"
          "         [--raft-log group|node] [--raft-mux]\n"
          "Starts NODES cairn-rgroup-driver processes with G Raft groups each, measures\n"
          "per-group memory, fds, disk and idle CPU, then produce throughput over P\n"
          "partitions, beside the fdatasync rate of the same disk. --restart: then kills\n"
          "the drivers (SIGKILL) and times their restart on the same data.\n"
          "--raft-log node: the drivers keep every group's Raft log in one node-wide wal.\n"
          "--raft-mux: (with --raft-log node) the groups' Raft messages go over one\n"
          "connection per peer node, each replica on its own raft_io (no raft_uv).\n");
}

static void bench_parse_list(const char *s, struct bench_opts *o)
{
  o->npartitions = 0;
  char *copy = strdup(s);
  for (char *t = strtok(copy, ","); t != NULL && o->npartitions < BENCH_MAX_POINTS;
       t = strtok(NULL, ",")) {
    o->partitions[o->npartitions++] = atoi(t);
  }
  free(copy);
}

static void bench_parse_args(int argc, char **argv, struct bench_opts *o)
{
  memset(o, 0, sizeof *o);
  o->nodes = 3;
  o->groups = 100;
  o->inflight = 256;
  o->duration = 10;
  o->warmup = 2;
  o->idle = 10;
  o->settle = 5;
  o->baseline = 3;
  o->repeat = 1;
  bench_parse_list("1,10,100,1000", o);
  static const struct option opts[] = {
      {"driver", required_argument, NULL, 'D'},     {"nodes", required_argument, NULL, 'n'},
      {"groups", required_argument, NULL, 'g'},     {"partitions", required_argument, NULL, 'p'},
      {"inflight", required_argument, NULL, 'm'},   {"duration", required_argument, NULL, 't'},
      {"warmup", required_argument, NULL, 'w'},     {"idle", required_argument, NULL, 'i'},
      {"settle", required_argument, NULL, 's'},     {"baseline", required_argument, NULL, 'b'},
      {"segment-size", required_argument, NULL, 'S'},
      {"heartbeat-ms", required_argument, NULL, 'H'},
      {"election-ms", required_argument, NULL, 'E'},
      {"threadpool", required_argument, NULL, 'T'}, {"dir", required_argument, NULL, 'd'},
      {"keep", no_argument, NULL, 'k'},             {"no-produce", no_argument, NULL, 'N'},
      {"restart", no_argument, NULL, 'R'},          {"repeat", required_argument, NULL, 'r'},
      {"preferred-leader", no_argument, NULL, 'P'},
      {"raft-log", required_argument, NULL, 'L'},
      {"raft-mux", no_argument, NULL, 'X'},
      {"help", no_argument, NULL, 'h'},             {NULL, 0, NULL, 0}};
  int c;
  while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
    switch (c) {
    case 'D': o->driver = optarg; break;
    case 'n': o->nodes = atoi(optarg); break;
    case 'g': o->groups = atoi(optarg); break;
    case 'p': bench_parse_list(optarg, o); break;
    case 'm': o->inflight = atoi(optarg); break;
    case 't': o->duration = atof(optarg); break;
    case 'w': o->warmup = atof(optarg); break;
    case 'i': o->idle = atof(optarg); break;
    case 's': o->settle = atof(optarg); break;
    case 'b': o->baseline = atof(optarg); break;
    case 'S': o->segment_size = strtoull(optarg, NULL, 10); break;
    case 'H': o->heartbeat_ms = (unsigned)atoi(optarg); break;
    case 'E': o->election_ms = (unsigned)atoi(optarg); break;
    case 'T': o->threadpool = atoi(optarg); break;
    case 'd': o->parent = optarg; break;
    case 'k': o->keep = true; break;
    case 'N': o->no_produce = true; break;
    case 'R': o->restart = true; break;
    case 'r': o->repeat = atoi(optarg); break;
    case 'P': o->preferred_leader = true; break;
    case 'L': o->raft_log = optarg; break;
    case 'X': o->raft_mux = true; break;
    case 'h': bench_usage_text(stdout); exit(0);
    default: bench_usage_text(stderr); exit(2);
    }
  }
  if (optind != argc || o->nodes < 1 || o->nodes > BENCH_MAX_NODES || o->groups < 1 ||
      o->groups > BENCH_MAX_GROUPS || o->inflight < 1 || o->inflight > BENCH_MAX_INFLIGHT ||
      o->duration <= 0 || o->warmup < 0 || o->idle <= 0 || o->settle < 0 || o->baseline <= 0 ||
      o->threadpool < 0 || o->threadpool > 1024 || o->repeat < 1 ||
      o->repeat > BENCH_MAX_REPEAT) {
    bench_usage_text(stderr);
    exit(2);
  }
}

/* Starts the drivers and times them until they answer and until every
 * group has a leader. Returns the first time; *leaders_s the second. */
static double bench_start_nodes(const char *replicas, double *leaders_s)
{
  double t0 = bench_now();
  for (int i = 0; i < bench_o.nodes; i++) {
    bench_node_start(i, replicas);
  }
  int connect_ms = 60000;
  for (int i = 0; i < bench_o.nodes; i++) {
    if (tu_ctl_connect(&bench_nodes[i].ctl, bench_nodes[i].control_port, connect_ms) != 0) {
      bench_die("node %d: no control port after %d s", i + 1, connect_ms / 1000);
    }
  }
  /* A driver reads commands once every group is open (with
   * raft_uv ~32 ms a group): the first answer says so. */
  uint64_t unused[BENCH_MAX_NODES];
  bench_collect_stats(unused, 60 + bench_o.groups * 0.5);
  double startup = bench_now() - t0;
  *leaders_s = bench_wait_leaders(120 + bench_o.groups * 0.1);
  return startup;
}

/* A crash of every node, then a restart on the data they left. */
static void bench_restart(const char *replicas)
{
  for (int i = 0; i < bench_o.nodes; i++) {
    tu_ctl_close(&bench_nodes[i].ctl);
    tu_proc_kill(&bench_nodes[i].proc);
  }
  double leaders;
  double startup = bench_start_nodes(replicas, &leaders);
  printf("\nrestart after SIGKILL of every node: drivers answered after %.1f s, every group had "
         "an agreed leader after %.1f s more\n",
         startup, leaders);
}

/* The driver next to this program, unless --driver says otherwise. */
static const char *bench_default_driver(const char *argv0)
{
  static char path[PATH_MAX];
  char self[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  if (n <= 0) {
    snprintf(self, sizeof self, "%s", argv0);
  } else {
    self[n] = '\0';
  }
  char *slash = strrchr(self, '/');
  if (slash == NULL) {
    return "cairn-rgroup-driver";
  }
  *slash = '\0';
  if (snprintf(path, sizeof path, "%s/cairn-rgroup-driver", self) >= (int)sizeof path) {
    return "cairn-rgroup-driver";
  }
  return path;
}

int main(int argc, char **argv)
{
  bench_parse_args(argc, argv, &bench_o);
  if (bench_o.driver == NULL) {
    bench_o.driver = bench_default_driver(argv[0]);
  }
  if (access(bench_o.driver, X_OK) != 0) {
    bench_die("%s is not an executable (use --driver)", bench_o.driver);
  }
  const char *parent = bench_o.parent;
  if (parent == NULL) {
    parent = getenv("TMPDIR") != NULL ? getenv("TMPDIR") : "/tmp";
  }
  snprintf(bench_workdir, sizeof bench_workdir, "%s/cairn-rgroup-bench-XXXXXX", parent);
  if (mkdtemp(bench_workdir) == NULL) {
    bench_workdir[0] = '\0';
    bench_die("mkdtemp in %s: %s", parent, strerror(errno));
  }
  atexit(bench_cleanup);
  struct sigaction sa = {.sa_handler = bench_on_signal};
  sigaction(SIGINT, &sa, NULL);
  sigaction(SIGTERM, &sa, NULL);
  signal(SIGPIPE, SIG_IGN);
  if (bench_o.threadpool > 0) {
    char v[16];
    snprintf(v, sizeof v, "%d", bench_o.threadpool);
    setenv("UV_THREADPOOL_SIZE", v, 1);
  }
  setvbuf(stdout, NULL, _IOLBF, 0);
  /* The driver builds each batch like tu_make_batch(TAG, 16, 100); its keys
   * hold the tag, so the size depends a little on the tag's digits. */
  free(tu_make_batch((uint64_t)100000 << 16, BENCH_RECORDS, BENCH_VALUE_BYTES, 0,
                     &bench_batch_bytes));

  bench_machine();
  char seg[32], hb[32], el[32];
  bench_fmt_opt(seg, sizeof seg, bench_o.segment_size, "default");
  bench_fmt_opt(hb, sizeof hb, bench_o.heartbeat_ms, "default");
  bench_fmt_opt(el, sizeof el, bench_o.election_ms, "default");
  printf("setup:     %d node(s) on loopback, %d groups (a replica of each on every node), "
         "raft segment size %s, heartbeat %s ms, election timeout %s ms, libuv threadpool %d, "
         "%s\n",
         bench_o.nodes, bench_o.groups, seg, hb, el, bench_threadpool_size(),
         bench_o.preferred_leader ? "preferred leader node 1" : "leaders where elected");

  struct bench_baseline base;
  bench_baseline(&base);

  char replicas[BENCH_MAX_NODES * 32] = "";
  size_t off = 0;
  for (int i = 0; i < bench_o.nodes; i++) {
    struct bench_node *nd = &bench_nodes[i];
    nd->ctl.fd = -1;
    nd->cluster_port = tu_free_port();
    nd->control_port = tu_free_port();
    nd->out = malloc(BENCH_OUTBUF);
    if (nd->out == NULL || nd->cluster_port < 0 || nd->control_port < 0) {
      bench_die("setting up node %d failed", i + 1);
    }
    if (snprintf(nd->dir, sizeof nd->dir, "%s/node%d", bench_workdir, i + 1) >=
            (int)sizeof nd->dir ||
        snprintf(nd->log, sizeof nd->log, "%s/node%d.log", bench_workdir, i + 1) >=
            (int)sizeof nd->log) {
      bench_die("directory name too long");
    }
    off += (size_t)snprintf(replicas + off, sizeof replicas - off, "%s%d@127.0.0.1:%d",
                            i ? "," : "", i + 1, nd->cluster_port);
  }
  long aio_before = bench_read_long("/proc/sys/fs/aio-nr");
  double leaders;
  double startup = bench_start_nodes(replicas, &leaders);

  bench_touch();
  bench_sleep(bench_o.settle);
  struct bench_usage usage[BENCH_MAX_NODES];
  double cpu0[BENCH_MAX_NODES];
  double i0 = bench_now();
  double m0 = bench_machine_busy_secs();
  for (int i = 0; i < bench_o.nodes; i++) {
    cpu0[i] = bench_proc_cpu_secs(bench_nodes[i].proc.pid);
  }
  bench_sleep(bench_o.idle);
  double i1 = bench_now();
  double idle_machine = (bench_machine_busy_secs() - m0) / (i1 - i0) * 100;
  for (int i = 0; i < bench_o.nodes; i++) {
    double cpu1 = bench_proc_cpu_secs(bench_nodes[i].proc.pid);
    bench_usage_of(i, &usage[i]);
    usage[i].cpu_pct = (cpu1 - cpu0[i]) / (i1 - i0) * 100;
  }
  long aio_now = bench_read_long("/proc/sys/fs/aio-nr");
  uint64_t unused[BENCH_MAX_NODES];
  bench_collect_stats(unused, 30);
  bench_print_idle(usage, startup, leaders,
                   aio_now >= 0 && aio_before >= 0 ? aio_now - aio_before : -1, idle_machine);

  if (!bench_o.no_produce) {
    static struct bench_point pts[BENCH_MAX_REPEAT * BENCH_MAX_POINTS];
    int npts = 0;
    for (int r = 0; r < bench_o.repeat; r++) {
      for (int k = 0; k < bench_o.npartitions; k++) {
        int p = bench_o.partitions[k];
        if (p >= 1 && p <= bench_o.groups) {
          bench_produce(p, &pts[npts++]);
        }
      }
    }
    bench_print_produce(pts, npts / bench_o.repeat, bench_o.repeat, &base);
    struct bench_usage after;
    printf("\ndisk after the produce runs, per node:");
    for (int i = 0; i < bench_o.nodes; i++) {
      bench_usage_of(i, &after);
      printf(" node %d %.1f MiB used (raft open segments %.1f MiB)", i + 1,
             after.disk_used / 1048576.0, after.raft_open_used / 1048576.0);
    }
    printf("\n");
  } else {
    printf("\nbaseline: 4 KiB append + fdatasync %.0f/s (1 file), %.0f/s (%d threads)\n",
           base.sync_rate, base.par_rate, base.par_threads);
    bench_print_aio(&base);
  }
  if (bench_o.restart) {
    bench_restart(replicas);
  }
  return 0;
}
