/* storage_bench.c - cairn-storage-bench: append and sequential-read
 * throughput of the partition log (plog), each printed beside a raw
 * write()/read() of the same bytes to the same filesystem in the same run,
 * with the ratio. A program, not a test: it asserts nothing about time.
 * docs/performance.md records the figures and how to read them.
 *
 * For each workload (100 records x 100-byte values, 16 records x 1 KiB
 * values) and each repeat, in a fresh directory:
 *   append    one batch per store_append(), then store_flush() - vs one
 *             write() per batch, then fdatasync();
 *   group-16  16 batches per store_append() (one Raft entry, as group
 *             commit will append them), then store_flush() - vs one
 *             writev() of the same 16, then fdatasync();
 *   read      store_read() regions of <= 1 MiB, each pread() into a buffer
 *             (the fetch path without sendfile) - vs read() of the raw
 *             file in 1 MiB chunks;
 *   sendfile  the same regions sendfile()d to /dev/null - vs the raw file
 *             sendfile()d in 1 MiB chunks.
 * The final flush/fdatasync is inside the timed section: both sides end
 * with everything on disk. Reads are hot (page cache): nothing drops the
 * caches. The batches are built before timing, in a pool of BENCH_POOL
 * distinct batches used round-robin; store_append stamps the broker fields
 * in place, which leaves the CRC valid, so pool buffers are appended
 * directly, with no copy. Cairn and raw swap order from one repeat to the
 * next; each append starts after a syncfs() and a prefault (see
 * bench_prefault); the reads alternate sides in slices. Every run checks
 * that the log holds exactly what was appended. */
#include "common/err.h"
#include "common/fsutil.h"
#include "common/jsonw.h"
#include "common/log.h"
#include "format/batch.h"
#include "format/batch_builder.h"
#include "storage/plog.h"
#include "storage/store.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/statvfs.h>
#include <sys/sysmacros.h>
#include <sys/uio.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#define BENCH_POOL 64                /* distinct batches per workload, used round-robin */
#define BENCH_GROUP 16               /* batches per store_append in the group variant */
#define BENCH_READ_CHUNK (1u << 20)  /* bytes per store_read / read() */
#define BENCH_READ_SLICE (32u << 20) /* read measurements alternate sides every this many bytes */
#define BENCH_READ_PASSES 2          /* timed passes over each file per read measurement */
#define BENCH_DEFAULT_BYTES (1ull << 30)
#define BENCH_DEFAULT_REPEAT 4
#define BENCH_MAX_REPEAT 99
#define BENCH_WORKLOADS 2
#define BENCH_FIRST_TS INT64_C(1700000000000)

enum bench_measure { BM_APPEND, BM_GROUP, BM_READ, BM_SENDFILE, BM_COUNT };
enum bench_side { BS_CAIRN, BS_RAW, BS_COUNT };

static const char *const bench_measure_key[BM_COUNT] = {"append", "group16", "read_pread",
                                                        "read_sendfile"};
static const char *const bench_side_key[BS_COUNT] = {"cairn", "raw"};

struct bench_workload {
  const char *name;
  int records;
  size_t value_size;
  uint8_t *pool[BENCH_POOL];
  size_t batch_len;  /* every pool batch has this size */
  uint64_t nbatches; /* per run, a multiple of BENCH_GROUP */
};

/* One timed section. */
struct bench_sample {
  double secs;      /* wall time of the whole section */
  double sync_secs; /* of which the final store_flush / fdatasync */
  double max_call;  /* longest single append or write call, seconds */
  double cpu_secs;  /* user + system CPU of this process */
};

struct bench_opts {
  const char *parent; /* the work directory is created inside it */
  uint64_t bytes;
  int repeat;
  bool json;
};

static struct bench_workload bench_workloads[BENCH_WORKLOADS] = {
    {.name = "100x100B", .records = 100, .value_size = 100},
    {.name = "16x1KiB", .records = 16, .value_size = 1024},
};

static struct bench_sample bench_res[BENCH_WORKLOADS][BM_COUNT][BS_COUNT][BENCH_MAX_REPEAT];

static char bench_workdir[PATH_MAX]; /* removed at exit, also on failure */
static volatile sig_atomic_t bench_stop;

static void bench_cleanup(void)
{
  if (bench_workdir[0] != '\0') {
    int rv = fs_remove_tree(bench_workdir);
    if (rv != 0) {
      fprintf(stderr, "cairn-storage-bench: removing %s: %s\n", bench_workdir, cairn_strerror(rv));
    }
    bench_workdir[0] = '\0';
  }
}

__attribute__((noreturn, format(printf, 1, 2))) static void bench_die(const char *fmt, ...)
{
  va_list ap;
  va_start(ap, fmt);
  fputs("cairn-storage-bench: ", stderr);
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
  bench_cleanup();
  exit(1);
}

static void bench_on_signal(int sig)
{
  bench_stop = sig;
}

/* Called between timed sections: a signal stops the run cleanly. */
static void bench_check_stop(void)
{
  if (bench_stop) {
    fprintf(stderr, "cairn-storage-bench: interrupted\n");
    bench_cleanup();
    exit(130);
  }
}

static double bench_now(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static double bench_cpu(void)
{
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec * 1e-6 +
         (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec * 1e-6;
}

struct bench_clock {
  double wall;
  double cpu;
};

static void bench_clock_start(struct bench_clock *c)
{
  c->cpu = bench_cpu();
  c->wall = bench_now();
}

static void bench_clock_stop(const struct bench_clock *c, struct bench_sample *out)
{
  out->secs = bench_now() - c->wall;
  out->cpu_secs = bench_cpu() - c->cpu;
}

/* ---- setup ---- */

/* Parses "N", "NK", "NM", "NG" (binary multiples). Returns 0 or -1. */
static int bench_parse_size(const char *s, uint64_t *out)
{
  char *end;
  errno = 0;
  unsigned long long v = strtoull(s, &end, 10);
  if (errno != 0 || end == s || s[0] == '-') {
    return -1;
  }
  unsigned shift = 0;
  switch (*end) {
  case '\0':
    break;
  case 'k':
  case 'K':
    shift = 10;
    break;
  case 'm':
  case 'M':
    shift = 20;
    break;
  case 'g':
  case 'G':
    shift = 30;
    break;
  default:
    return -1;
  }
  if (*end != '\0' && end[1] != '\0') {
    return -1;
  }
  if (v > (UINT64_MAX >> shift)) {
    return -1;
  }
  *out = (uint64_t)v << shift;
  return 0;
}

static void bench_usage(FILE *f)
{
  fprintf(f,
          "usage: cairn-storage-bench [--dir DIR] [--bytes N] [--repeat R] [--json]\n"
          "\n"
          "Measures the partition log's append and sequential-read throughput beside a raw\n"
          "write()/read() of the same bytes to the same filesystem, in the same run.\n"
          "\n"
          "  --dir DIR    create the (temporary) work directory inside DIR\n"
          "               (default: $TMPDIR, else /tmp); it is removed at the end\n"
          "  --bytes N    bytes appended per run and workload, suffix K, M or G\n"
          "               (default 1G); the disk needs about 2N free\n"
          "  --repeat R   runs per measurement, the median is reported (default %d); cairn\n"
          "               and raw swap order from run to run, so an even R balances it\n"
          "  --json       print the results as JSON on stdout instead of a table\n"
          "  --help       print this help\n",
          BENCH_DEFAULT_REPEAT);
}

static void bench_parse_args(int argc, char **argv, struct bench_opts *o)
{
  static const struct option longopts[] = {
      {"dir", required_argument, NULL, 'd'},    {"bytes", required_argument, NULL, 'b'},
      {"repeat", required_argument, NULL, 'r'}, {"json", no_argument, NULL, 'j'},
      {"help", no_argument, NULL, 'h'},         {NULL, 0, NULL, 0},
  };
  const char *tmp = getenv("TMPDIR");
  o->parent = tmp != NULL && tmp[0] != '\0' ? tmp : "/tmp";
  o->bytes = BENCH_DEFAULT_BYTES;
  o->repeat = BENCH_DEFAULT_REPEAT;
  o->json = false;
  int c;
  while ((c = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
    switch (c) {
    case 'd':
      o->parent = optarg;
      break;
    case 'b':
      if (bench_parse_size(optarg, &o->bytes) != 0 || o->bytes == 0) {
        bench_die("--bytes: '%s' is not a size (N, NK, NM or NG)", optarg);
      }
      break;
    case 'r': {
      char *end;
      long v = strtol(optarg, &end, 10);
      if (*end != '\0' || end == optarg || v < 1 || v > BENCH_MAX_REPEAT) {
        bench_die("--repeat: '%s' is not a count from 1 to %d", optarg, BENCH_MAX_REPEAT);
      }
      o->repeat = (int)v;
      break;
    }
    case 'j':
      o->json = true;
      break;
    case 'h':
      bench_usage(stdout);
      exit(0);
    default:
      bench_usage(stderr);
      exit(2);
    }
  }
  if (optind != argc) {
    bench_usage(stderr);
    exit(2);
  }
}

/* Builds the workload's pool: BENCH_POOL distinct, valid batches of the
 * same size (null keys, pseudo-random values, timestamps one ms apart). */
static void bench_build_pool(struct bench_workload *w, uint64_t bytes)
{
  struct batch_builder b;
  if (batch_builder_init(&b, BATCH_DEFAULT_MAX_BYTES) != 0) {
    bench_die("out of memory");
  }
  uint8_t *value = malloc(w->value_size);
  if (value == NULL) {
    bench_die("out of memory");
  }
  uint64_t x = 0x9E3779B97F4A7C15ull;
  int64_t ts = BENCH_FIRST_TS;
  for (int i = 0; i < BENCH_POOL; i++) {
    for (int r = 0; r < w->records; r++) {
      for (size_t k = 0; k < w->value_size; k++) {
        x ^= x >> 12; /* xorshift64 */
        x ^= x << 25;
        x ^= x >> 27;
        value[k] = (uint8_t)(x * 0x2545F4914F6CDD1Dull >> 56);
      }
      if (batch_builder_add(&b, ts++, NULL, 0, value, w->value_size, NULL, 0) != 0) {
        bench_die("building a %s batch failed", w->name);
      }
    }
    size_t len;
    if (batch_builder_finish(&b, &w->pool[i], &len) != 0) {
      bench_die("building a %s batch failed", w->name);
    }
    if (i > 0 && len != w->batch_len) {
      bench_die("%s batches differ in size (%zu, %zu)", w->name, len, w->batch_len);
    }
    w->batch_len = len;
    char why[160];
    if (batch_validate(w->pool[i], len, BATCH_DEFAULT_MAX_BYTES, why, sizeof why) != 0) {
      bench_die("built an invalid %s batch: %s", w->name, why);
    }
  }
  free(value);
  batch_builder_close(&b);
  w->nbatches = bytes / w->batch_len / BENCH_GROUP * BENCH_GROUP;
  if (w->nbatches == 0) {
    w->nbatches = BENCH_GROUP;
  }
}

static void bench_path(char *buf, const char *name)
{
  if (snprintf(buf, PATH_MAX, "%s/%s", bench_workdir, name) >= PATH_MAX) {
    bench_die("path too long: %s/%s", bench_workdir, name);
  }
}

/* Writes back whatever an earlier section left dirty (a deleted file's
 * journal, say), so it is not charged to the next one. */
static void bench_quiesce(void)
{
  int fd = open(bench_workdir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0 || syncfs(fd) != 0) {
    bench_die("syncfs %s: %s", bench_workdir, strerror(errno));
  }
  close(fd);
}

/* Touches, then frees, bytes of anonymous memory, so the page cache the
 * next section fills comes from memory the host has just backed. On a VM
 * that reports free pages to its host (virtio-balloon free page
 * reporting), memory untouched for a few seconds costs a host page fault
 * on first use, which otherwise lands on whichever side writes second. */
static void bench_prefault(uint64_t bytes)
{
  void *p =
      mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
  if (p == MAP_FAILED) {
    bench_die("mmap of %llu bytes: %s", (unsigned long long)bytes, strerror(errno));
  }
  munmap(p, bytes);
}

/* ---- append ---- */

/* Appends w's batches to a fresh log in dir, group per store_append, and
 * flushes. The log is left open in *keep for the read sections. */
static void bench_append_cairn(const struct bench_workload *w, size_t group, const char *dir,
                               struct bench_sample *out, struct store **keep)
{
  struct plog_opts o;
  plog_opts_default(&o);
  struct store *s;
  char err[STORE_ERRMSG_SIZE];
  int rv = plog_open(dir, &o, &s, err, sizeof err);
  if (rv != 0) {
    bench_die("plog_open %s: %s", dir, err);
  }
  struct store_batch b[BENCH_GROUP];
  uint64_t calls = w->nbatches / group;
  double max_call = 0;
  struct bench_clock c;
  bench_clock_start(&c);
  double prev = c.wall;
  for (uint64_t k = 0; k < calls; k++) {
    for (size_t j = 0; j < group; j++) {
      b[j].data = w->pool[(k * group + j) % BENCH_POOL];
      b[j].len = w->batch_len;
    }
    int64_t base;
    rv = store_append(s, b, group, k + 1, &base);
    if (rv != 0) {
      bench_die("store_append: %s", store_errmsg(s));
    }
    double now = bench_now();
    if (now - prev > max_call) {
      max_call = now - prev;
    }
    prev = now;
  }
  double sync_start = bench_now();
  rv = store_flush(s, INT64_MAX);
  if (rv != 0) {
    bench_die("store_flush: %s", store_errmsg(s));
  }
  bench_clock_stop(&c, out);
  out->sync_secs = out->secs - (sync_start - c.wall);
  out->max_call = max_call;
  *keep = s;
}

static void bench_writev_all(int fd, struct iovec *iov, int n)
{
  while (n > 0) {
    ssize_t got = writev(fd, iov, n);
    if (got < 0) {
      if (errno == EINTR) {
        continue;
      }
      bench_die("raw write: %s", strerror(errno));
    }
    size_t left = (size_t)got;
    while (n > 0 && left >= iov->iov_len) {
      left -= iov->iov_len;
      iov++;
      n--;
    }
    if (n > 0) {
      iov->iov_base = (uint8_t *)iov->iov_base + left;
      iov->iov_len -= left;
    }
  }
}

/* The baseline: the same bytes in the same sizes, write() per batch or
 * writev() per group, then one fdatasync. */
static void bench_append_raw(const struct bench_workload *w, size_t group, const char *path,
                             struct bench_sample *out)
{
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    bench_die("open %s: %s", path, strerror(errno));
  }
  struct iovec iov[BENCH_GROUP];
  uint64_t calls = w->nbatches / group;
  double max_call = 0;
  struct bench_clock c;
  bench_clock_start(&c);
  double prev = c.wall;
  for (uint64_t k = 0; k < calls; k++) {
    if (group == 1) {
      uint8_t *p = w->pool[k % BENCH_POOL];
      ssize_t n = write(fd, p, w->batch_len);
      if (n != (ssize_t)w->batch_len) {
        /* A short write to a regular file: finish it the slow way. */
        iov[0].iov_base = p + (n > 0 ? n : 0);
        iov[0].iov_len = w->batch_len - (size_t)(n > 0 ? n : 0);
        if (n < 0 && errno != EINTR) {
          bench_die("raw write: %s", strerror(errno));
        }
        bench_writev_all(fd, iov, 1);
      }
    } else {
      for (size_t j = 0; j < group; j++) {
        iov[j].iov_base = w->pool[(k * group + j) % BENCH_POOL];
        iov[j].iov_len = w->batch_len;
      }
      bench_writev_all(fd, iov, (int)group);
    }
    double now = bench_now();
    if (now - prev > max_call) {
      max_call = now - prev;
    }
    prev = now;
  }
  double sync_start = bench_now();
  if (fdatasync(fd) != 0) {
    bench_die("fdatasync %s: %s", path, strerror(errno));
  }
  bench_clock_stop(&c, out);
  out->sync_secs = out->secs - (sync_start - c.wall);
  out->max_call = max_call;
  close(fd);
}

/* ---- read ---- */

static void bench_expect_bytes(const char *what, uint64_t got, uint64_t want)
{
  if (got != want) {
    bench_die("%s: %llu bytes read, %llu expected", what, (unsigned long long)got,
              (unsigned long long)want);
  }
}

static void bench_sendfile_all(int out_fd, int in_fd, off_t pos, size_t len)
{
  while (len > 0) {
    ssize_t n = sendfile(out_fd, in_fd, &pos, len);
    if (n < 0 && errno == EINTR) {
      continue;
    }
    if (n <= 0) {
      bench_die("sendfile: %s", n < 0 ? strerror(errno) : "no progress");
    }
    len -= (size_t)n;
  }
}

/* One side of a read measurement: where it is in its file and the time
 * it has spent. Both sides read in turns of BENCH_READ_SLICE bytes, each
 * going first in half the turns, so drift (a neighbour's load, warm-up)
 * and position effects fall on both alike. */
struct bench_reader {
  enum bench_side side;
  struct store *s; /* cairn: regions from offset off up to end */
  int64_t off;
  int64_t end;
  int fd; /* raw: the file, read from its current position */
  uint64_t total;
  bool done;
  double secs;
  double cpu_secs;
};

/* Reads the next slice: store_read regions of <= BENCH_READ_CHUNK, each
 * pread() or sendfile()d (cairn), or read()/sendfile() of BENCH_READ_CHUNK
 * (raw). */
static void bench_read_slice(struct bench_reader *rd, uint8_t *buf, size_t cap, int null_fd,
                             bool use_sendfile)
{
  uint64_t start = rd->total;
  struct bench_clock c;
  bench_clock_start(&c);
  while (!rd->done && rd->total - start < BENCH_READ_SLICE) {
    if (rd->side == BS_RAW) {
      ssize_t n = use_sendfile ? sendfile(null_fd, rd->fd, NULL, BENCH_READ_CHUNK)
                               : read(rd->fd, buf, BENCH_READ_CHUNK);
      if (n < 0 && errno != EINTR) {
        bench_die("raw %s: %s", use_sendfile ? "sendfile" : "read", strerror(errno));
      }
      rd->total += n > 0 ? (uint64_t)n : 0;
      rd->done = n == 0;
      continue;
    }
    if (rd->off >= rd->end) {
      rd->done = true;
      break;
    }
    struct store_region r;
    int rv = store_read(rd->s, rd->off, BENCH_READ_CHUNK, &r);
    if (rv != 0) {
      bench_die("store_read at %lld: %s", (long long)rd->off, store_errmsg(rd->s));
    }
    if (r.len == 0 || r.len > cap || r.fd < 0 || r.first_offset != rd->off) {
      bench_die("store_read at %lld: unexpected region (len %zu, fd %d, first %lld)",
                (long long)rd->off, r.len, r.fd, (long long)r.first_offset);
    }
    if (use_sendfile) {
      bench_sendfile_all(null_fd, r.fd, (off_t)r.pos, r.len);
    } else {
      size_t got;
      rv = fs_pread_full(r.fd, buf, r.len, (off_t)r.pos, &got);
      if (rv != 0 || got != r.len) {
        bench_die("pread of a region: %s", rv != 0 ? cairn_strerror(rv) : "short");
      }
    }
    rd->total += r.len;
    rd->off = r.next_offset;
    store_region_release(&r);
  }
  struct bench_sample t;
  bench_clock_stop(&c, &t);
  rd->secs += t.secs;
  rd->cpu_secs += t.cpu_secs;
}

/* One read measurement: BENCH_READ_PASSES passes over the log and over
 * the raw file, in alternating slices; each side's sample is its mean pass.
 * A pass with timing false only warms the caches. */
static void bench_read_pair(int wi, enum bench_measure m, int rep, bool cairn_first,
                            struct store *s, const char *rawpath, uint8_t *buf, size_t cap,
                            int null_fd, bool timing)
{
  const struct bench_workload *w = &bench_workloads[wi];
  uint64_t bytes = w->nbatches * w->batch_len;
  struct store_info info;
  store_info(s, &info);
  struct bench_reader rd[BS_COUNT];
  memset(rd, 0, sizeof rd);
  rd[BS_CAIRN].side = BS_CAIRN;
  rd[BS_CAIRN].s = s;
  rd[BS_RAW].side = BS_RAW;
  rd[BS_RAW].fd = open(rawpath, O_RDONLY | O_CLOEXEC);
  if (rd[BS_RAW].fd < 0) {
    bench_die("open %s: %s", rawpath, strerror(errno));
  }
  int passes = timing ? BENCH_READ_PASSES : 1;
  for (int pass = 0; pass < passes; pass++) {
    bench_check_stop();
    rd[BS_CAIRN].off = info.start_offset;
    rd[BS_CAIRN].end = info.next_offset;
    if (lseek(rd[BS_RAW].fd, 0, SEEK_SET) != 0) {
      bench_die("lseek %s: %s", rawpath, strerror(errno));
    }
    for (int k = 0; k < BS_COUNT; k++) {
      rd[k].total = 0;
      rd[k].done = false;
    }
    /* A B B A A B ...: each side goes first in half the pairs. */
    enum bench_side first = cairn_first ? BS_CAIRN : BS_RAW;
    while (!rd[BS_CAIRN].done || !rd[BS_RAW].done) {
      bench_read_slice(&rd[first], buf, cap, null_fd, m == BM_SENDFILE);
      bench_read_slice(&rd[!first], buf, cap, null_fd, m == BM_SENDFILE);
      first = !first;
    }
    bench_expect_bytes("cairn read", rd[BS_CAIRN].total, bytes);
    bench_expect_bytes("raw read", rd[BS_RAW].total, bytes);
  }
  close(rd[BS_RAW].fd);
  for (int k = 0; timing && k < BS_COUNT; k++) {
    struct bench_sample *out = &bench_res[wi][m][k][rep];
    out->secs = rd[k].secs / passes;
    out->cpu_secs = rd[k].cpu_secs / passes;
  }
}

/* Untimed: checks that the log holds exactly the batches appended, in
 * order, with the offsets, Raft indexes and entry ends the store stamped,
 * and that every byte outside the broker fields is the pool's. Reading it
 * all also leaves the log hot in the page cache for the read sections. */
static void bench_verify_log(struct store *s, const struct bench_workload *w, size_t group,
                             uint8_t *buf, size_t cap)
{
  struct store_info info;
  store_info(s, &info);
  uint64_t want_bytes = w->nbatches * w->batch_len;
  if (info.size_bytes != want_bytes ||
      info.next_offset - info.start_offset != (int64_t)(w->nbatches * (uint64_t)w->records) ||
      info.durable_offset != info.next_offset || info.fatal) {
    bench_die("log after append: %llu bytes, offsets [%lld, %lld), durable %lld; expected %llu "
              "bytes of %llu batches",
              (unsigned long long)info.size_bytes, (long long)info.start_offset,
              (long long)info.next_offset, (long long)info.durable_offset,
              (unsigned long long)want_bytes, (unsigned long long)w->nbatches);
  }
  int64_t off = info.start_offset;
  uint64_t i = 0;
  while (off < info.next_offset) {
    struct store_region r;
    size_t got = 0;
    int rv = store_read(s, off, BENCH_READ_CHUNK, &r);
    if (rv == 0 && r.len <= cap) {
      rv = fs_pread_full(r.fd, buf, r.len, (off_t)r.pos, &got);
    }
    if (rv != 0 || r.len > cap || got != r.len) {
      bench_die("verify: reading at %lld failed", (long long)off);
    }
    for (size_t pos = 0; pos < r.len; pos += w->batch_len, i++) {
      const uint8_t *p = buf + pos;
      const uint8_t *want = w->pool[i % BENCH_POOL];
      struct batch_header h;
      batch_header_decode(p, &h);
      bool end = i % group == group - 1;
      if (r.len - pos < w->batch_len || h.base_offset != off || h.source_index != i / group + 1 ||
          (h.entry_flags == BATCH_FLAG_ENTRY_END) != end || batch_check_crc(p, w->batch_len) != 0 ||
          memcmp(p + BATCH_OFF_LENGTH, want + BATCH_OFF_LENGTH, 4) != 0 ||
          memcmp(p + BATCH_OFF_MAGIC, want + BATCH_OFF_MAGIC, w->batch_len - BATCH_OFF_MAGIC) !=
              0) {
        bench_die("verify: batch %llu (offset %lld) is not what was appended",
                  (unsigned long long)i, (long long)off);
      }
      off += w->records;
    }
    if (off != r.next_offset) {
      bench_die("verify: region ends at %lld, its batches at %lld", (long long)r.next_offset,
                (long long)off);
    }
    store_region_release(&r);
  }
  if (i != w->nbatches) {
    bench_die("verify: %llu batches read back, %llu appended", (unsigned long long)i,
              (unsigned long long)w->nbatches);
  }
}

/* ---- one run ---- */

static void bench_remove_log(const char *dir)
{
  int rv = fs_remove_tree(dir);
  if (rv != 0) {
    bench_die("removing %s: %s", dir, cairn_strerror(rv));
  }
}

static void bench_unlink(const char *path)
{
  if (unlink(path) != 0) {
    bench_die("unlink %s: %s", path, strerror(errno));
  }
}

/* One append section pair (cairn and raw, in the given order). Leaves the
 * log open in *s and the raw file in place. */
static void bench_append_pair(int wi, enum bench_measure m, int rep, bool cairn_first,
                              const char *logdir, const char *rawpath, struct store **s)
{
  const struct bench_workload *w = &bench_workloads[wi];
  size_t group = m == BM_GROUP ? BENCH_GROUP : 1;
  for (int k = 0; k < 2; k++) {
    bench_check_stop();
    bench_quiesce();
    bench_prefault(w->nbatches * w->batch_len + (64u << 20));
    if ((k == 0) == cairn_first) {
      bench_append_cairn(w, group, logdir, &bench_res[wi][m][BS_CAIRN][rep], s);
    } else {
      bench_append_raw(w, group, rawpath, &bench_res[wi][m][BS_RAW][rep]);
    }
  }
}

static void bench_run(int wi, int rep, uint8_t *buf, size_t cap, int null_fd)
{
  const struct bench_workload *w = &bench_workloads[wi];
  bool cairn_first = rep % 2 == 0;
  char logdir[PATH_MAX], rawpath[PATH_MAX];
  bench_path(logdir, "log");
  bench_path(rawpath, "raw.bin");
  struct store *s = NULL;

  /* One batch per append, then the reads over what it wrote. The verify
   * pass and an untimed pass over both files come first, so no timed read
   * pays for the first access to freshly written pages. */
  bench_append_pair(wi, BM_APPEND, rep, cairn_first, logdir, rawpath, &s);
  bench_verify_log(s, w, 1, buf, cap);
  bench_read_pair(wi, BM_READ, rep, cairn_first, s, rawpath, buf, cap, null_fd, false);
  for (enum bench_measure m = BM_READ; m <= BM_SENDFILE; m++) {
    bench_read_pair(wi, m, rep, cairn_first, s, rawpath, buf, cap, null_fd, true);
  }
  store_close(s);
  bench_remove_log(logdir);
  bench_unlink(rawpath);

  /* Sixteen batches per append: one Raft entry of a group commit. */
  bench_append_pair(wi, BM_GROUP, rep, cairn_first, logdir, rawpath, &s);
  bench_verify_log(s, w, BENCH_GROUP, buf, cap);
  store_close(s);
  bench_remove_log(logdir);
  bench_unlink(rawpath);
}

/* ---- machine facts ---- */

struct bench_machine {
  char cpu[128];
  long cpus;
  uint64_t mem_bytes;
  char kernel[200];
  char fs[32];      /* from statfs, or the mount table */
  char device[128]; /* the mount's source */
  char mountpoint[256];
  char mount_opts[256];
  char rotational[8]; /* the block device's queue/rotational, "" if unknown */
  int dirty_background_ratio;
  int dirty_ratio;
};

static void bench_read_line(const char *path, char *buf, size_t n)
{
  buf[0] = '\0';
  FILE *f = fopen(path, "r");
  if (f == NULL) {
    return;
  }
  if (fgets(buf, (int)n, f) == NULL) {
    buf[0] = '\0';
  }
  buf[strcspn(buf, "\n")] = '\0';
  fclose(f);
}

static int bench_read_int(const char *path)
{
  char buf[32];
  bench_read_line(path, buf, sizeof buf);
  return buf[0] != '\0' ? atoi(buf) : -1;
}

static const char *bench_fs_name(long type)
{
  static const struct {
    unsigned long magic;
    const char *name;
  } names[] = {
      {0xEF53, "ext2/3/4"},      {0x58465342, "xfs"}, {0x9123683E, "btrfs"}, {0x01021994, "tmpfs"},
      {0x794C7630, "overlayfs"}, {0x2FC12FC1, "zfs"}, {0xF2F52010, "f2fs"},  {0x6969, "nfs"}};
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
    if (names[i].magic == (unsigned long)type) {
      return names[i].name;
    }
  }
  return "unknown";
}

/* Copies the n-th space-separated field of line (0-based) into out. */
static void bench_field(const char *line, int n, char *out, size_t cap)
{
  const char *p = line;
  for (int i = 0; i < n && p != NULL; i++) {
    p = strchr(p, ' ');
    p = p != NULL ? p + 1 : NULL;
  }
  out[0] = '\0';
  if (p == NULL) {
    return;
  }
  size_t len = strcspn(p, " \n");
  if (len >= cap) {
    len = cap - 1;
  }
  memcpy(out, p, len);
  out[len] = '\0';
}

static void bench_machine(const char *dir, struct bench_machine *m)
{
  memset(m, 0, sizeof *m);
  snprintf(m->cpu, sizeof m->cpu, "unknown");
  FILE *f = fopen("/proc/cpuinfo", "r");
  char line[1024];
  while (f != NULL && fgets(line, sizeof line, f) != NULL) {
    if (strncmp(line, "model name", 10) == 0 && strchr(line, ':') != NULL) {
      const char *v = strchr(line, ':') + 1;
      v += strspn(v, " \t");
      snprintf(m->cpu, sizeof m->cpu, "%.*s", (int)strcspn(v, "\n"), v);
      break;
    }
  }
  if (f != NULL) {
    fclose(f);
  }
  m->cpus = sysconf(_SC_NPROCESSORS_ONLN);
  m->mem_bytes = (uint64_t)sysconf(_SC_PHYS_PAGES) * (uint64_t)sysconf(_SC_PAGESIZE);
  struct utsname u;
  if (uname(&u) == 0) {
    snprintf(m->kernel, sizeof m->kernel, "%s %s %s", u.sysname, u.release, u.machine);
  }
  struct statfs sf;
  snprintf(m->fs, sizeof m->fs, "%s", statfs(dir, &sf) == 0 ? bench_fs_name(sf.f_type) : "?");
  /* The mount table line with the directory's device: its type, source and
   * options (the last such line wins, as later mounts shadow earlier). */
  struct stat st;
  if (stat(dir, &st) == 0 && (f = fopen("/proc/self/mountinfo", "r")) != NULL) {
    char want[32];
    snprintf(want, sizeof want, "%u:%u", major(st.st_dev), minor(st.st_dev));
    while (fgets(line, sizeof line, f) != NULL) {
      char dev[32];
      bench_field(line, 2, dev, sizeof dev);
      const char *sep = strstr(line, " - ");
      if (strcmp(dev, want) != 0 || sep == NULL) {
        continue;
      }
      bench_field(line, 4, m->mountpoint, sizeof m->mountpoint);
      bench_field(line, 5, m->mount_opts, sizeof m->mount_opts);
      bench_field(sep + 3, 0, m->fs, sizeof m->fs);
      bench_field(sep + 3, 1, m->device, sizeof m->device);
      char super[192];
      bench_field(sep + 3, 2, super, sizeof super);
      size_t used = strlen(m->mount_opts);
      snprintf(m->mount_opts + used, sizeof m->mount_opts - used, " (super: %s)", super);
    }
    fclose(f);
    char path[128];
    snprintf(path, sizeof path, "/sys/dev/block/%u:%u/queue/rotational", major(st.st_dev),
             minor(st.st_dev));
    bench_read_line(path, m->rotational, sizeof m->rotational);
  }
  m->dirty_background_ratio = bench_read_int("/proc/sys/vm/dirty_background_ratio");
  m->dirty_ratio = bench_read_int("/proc/sys/vm/dirty_ratio");
}

/* ---- report ---- */

static int bench_cmp_double(const void *a, const void *b)
{
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static double bench_median(const double *v, int n)
{
  double s[BENCH_MAX_REPEAT];
  memcpy(s, v, (size_t)n * sizeof *s);
  qsort(s, (size_t)n, sizeof *s, bench_cmp_double);
  return n % 2 == 1 ? s[n / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
}

static double bench_min(const double *v, int n)
{
  double x = v[0];
  for (int i = 1; i < n; i++) {
    x = v[i] < x ? v[i] : x;
  }
  return x;
}

static double bench_max(const double *v, int n)
{
  double x = v[0];
  for (int i = 1; i < n; i++) {
    x = v[i] > x ? v[i] : x;
  }
  return x;
}

/* What a table row shows of a sample. */
enum bench_metric {
  BX_MBS,        /* MB/s (10^6 bytes) over the whole section */
  BX_BATCHES,    /* batches per second */
  BX_MBS_NOSYNC, /* MB/s before the final flush/fdatasync */
  BX_CPU,        /* CPU seconds per GiB */
  BX_MAXCALL,    /* longest append/write call, ms */
};

static double bench_metric(const struct bench_workload *w, const struct bench_sample *s,
                           enum bench_metric x)
{
  double bytes = (double)(w->nbatches * w->batch_len);
  switch (x) {
  case BX_MBS:
    return bytes / s->secs / 1e6;
  case BX_BATCHES:
    return (double)w->nbatches / s->secs;
  case BX_MBS_NOSYNC:
    return bytes / (s->secs - s->sync_secs) / 1e6;
  case BX_CPU:
    return s->cpu_secs / (bytes / (double)(1u << 30));
  case BX_MAXCALL:
    return s->max_call * 1e3;
  }
  return 0;
}

struct bench_row {
  enum bench_measure m;
  enum bench_metric x;
  const char *label;
  bool target; /* the target: ratio >= 0.8 */
};

static const struct bench_row bench_rows[] = {
    {BM_APPEND, BX_MBS, "append MB/s", true},
    {BM_APPEND, BX_BATCHES, "append batches/s", true},
    {BM_APPEND, BX_MBS_NOSYNC, "  before the final sync, MB/s", false},
    {BM_APPEND, BX_CPU, "  CPU s per GiB", false},
    {BM_APPEND, BX_MAXCALL, "  longest call, ms", false},
    {BM_GROUP, BX_MBS, "group-16 append MB/s", true},
    {BM_GROUP, BX_BATCHES, "group-16 batches/s", true},
    {BM_GROUP, BX_MBS_NOSYNC, "  before the final sync, MB/s", false},
    {BM_GROUP, BX_CPU, "  CPU s per GiB", false},
    {BM_GROUP, BX_MAXCALL, "  longest call, ms", false},
    {BM_READ, BX_MBS, "read MB/s (pread)", true},
    {BM_READ, BX_CPU, "  CPU s per GiB", false},
    {BM_SENDFILE, BX_MBS, "read MB/s (sendfile)", false},
};
#define BENCH_NROWS (sizeof bench_rows / sizeof bench_rows[0])

/* A row's per-repeat values and paired cairn/raw ratios. */
static void bench_row_values(int wi, const struct bench_row *row, int n, double *cairn, double *raw,
                             double *ratio)
{
  const struct bench_workload *w = &bench_workloads[wi];
  for (int r = 0; r < n; r++) {
    cairn[r] = bench_metric(w, &bench_res[wi][row->m][BS_CAIRN][r], row->x);
    raw[r] = bench_metric(w, &bench_res[wi][row->m][BS_RAW][r], row->x);
    ratio[r] = raw[r] > 0 ? cairn[r] / raw[r] : 0;
  }
}

static const char *bench_fmt(double v, char *buf, size_t n)
{
  snprintf(buf, n, v >= 100 ? "%.0f" : v >= 10 ? "%.1f" : "%.2f", v);
  return buf;
}

static void bench_print_table(const struct bench_opts *o, const struct bench_machine *m)
{
  printf("cairn-storage-bench: %.2f GiB per run and workload, median of %d run(s)\n",
         (double)o->bytes / (double)(1u << 30), o->repeat);
  printf("machine:   %s, %ld CPUs, %.1f GiB RAM, %s\n", m->cpu, m->cpus,
         (double)m->mem_bytes / (double)(1u << 30), m->kernel);
  printf("directory: %s (%s on %s, mounted at %s, %s; rotational=%s)\n", bench_workdir, m->fs,
         m->device[0] ? m->device : "?", m->mountpoint[0] ? m->mountpoint : "?",
         m->mount_opts[0] ? m->mount_opts : "?", m->rotational[0] ? m->rotational : "?");
  printf("page cache: appends land in the page cache and reach the disk at the final\n"
         "  flush/fdatasync (inside the time) and, for cairn, at each 128 MiB segment roll;\n"
         "  reads are hot (files just written, caches not dropped). vm.dirty_background_ratio=%d"
         " vm.dirty_ratio=%d\n",
         m->dirty_background_ratio, m->dirty_ratio);
  for (int wi = 0; wi < BENCH_WORKLOADS; wi++) {
    const struct bench_workload *w = &bench_workloads[wi];
    printf("%s: batches of %d records x %zu-byte values (null keys), %zu bytes each; "
           "%llu batches, %.1f MB per run\n",
           w->name, w->records, w->value_size, w->batch_len, (unsigned long long)w->nbatches,
           (double)(w->nbatches * w->batch_len) / 1e6);
  }
  printf("\n%-10s %-30s %12s %12s %7s  %-13s %s\n", "workload", "measure", "cairn", "raw", "ratio",
         "ratio range", "target");
  for (int wi = 0; wi < BENCH_WORKLOADS; wi++) {
    for (size_t i = 0; i < BENCH_NROWS; i++) {
      const struct bench_row *row = &bench_rows[i];
      double cairn[BENCH_MAX_REPEAT], raw[BENCH_MAX_REPEAT], ratio[BENCH_MAX_REPEAT];
      bench_row_values(wi, row, o->repeat, cairn, raw, ratio);
      double rmed = bench_median(ratio, o->repeat);
      char a[32], b[32];
      printf("%-10s %-30s %12s %12s %7.2f  %5.2f-%-7.2f %s\n",
             i == 0 ? bench_workloads[wi].name : "", row->label,
             bench_fmt(bench_median(cairn, o->repeat), a, sizeof a),
             bench_fmt(bench_median(raw, o->repeat), b, sizeof b), rmed,
             bench_min(ratio, o->repeat), bench_max(ratio, o->repeat),
             !row->target  ? ""
             : rmed >= 0.8 ? ">=0.8 met"
                           : ">=0.8 NOT met");
    }
  }
  printf("\nratio = cairn / raw, the median of the per-run ratios (each run measures both);\n"
         "MB = 10^6 bytes; \"before the final sync\" excludes the closing flush/fdatasync;\n"
         "CPU counts this process only (writeback runs in kernel threads).\n");
}

/* s as a JSON string on stdout (the report around it is printf'd). */
static void bench_json_str(const char *s)
{
  int rv = jsonw_quote(jsonw_sink_file, stdout, s, strlen(s));
  (void)rv; /* the report goes on regardless, as the printf calls around it do */
}

static void bench_json_array(const double *v, int n)
{
  putchar('[');
  for (int i = 0; i < n; i++) {
    printf("%s%.6g", i ? "," : "", v[i]);
  }
  putchar(']');
}

static void bench_print_json(const struct bench_opts *o, const struct bench_machine *m)
{
  printf("{\"tool\":\"cairn-storage-bench\",\"bytes_per_run\":%llu,\"repeat\":%d,",
         (unsigned long long)o->bytes, o->repeat);
  printf("\"machine\":{\"cpu\":");
  bench_json_str(m->cpu);
  printf(",\"cpus\":%ld,\"mem_bytes\":%llu,\"kernel\":", m->cpus, (unsigned long long)m->mem_bytes);
  bench_json_str(m->kernel);
  printf(",\"fs\":");
  bench_json_str(m->fs);
  printf(",\"device\":");
  bench_json_str(m->device);
  printf(",\"mountpoint\":");
  bench_json_str(m->mountpoint);
  printf(",\"mount_options\":");
  bench_json_str(m->mount_opts);
  printf(",\"dirty_background_ratio\":%d,\"dirty_ratio\":%d},\"workloads\":[",
         m->dirty_background_ratio, m->dirty_ratio);
  for (int wi = 0; wi < BENCH_WORKLOADS; wi++) {
    const struct bench_workload *w = &bench_workloads[wi];
    printf("%s{\"name\":", wi ? "," : "");
    bench_json_str(w->name);
    printf(",\"records\":%d,\"value_bytes\":%zu,\"batch_bytes\":%zu,\"batches\":%llu,"
           "\"bytes\":%llu,\"measures\":{",
           w->records, w->value_size, w->batch_len, (unsigned long long)w->nbatches,
           (unsigned long long)(w->nbatches * w->batch_len));
    for (int mi = 0; mi < BM_COUNT; mi++) {
      printf("%s\"%s\":{", mi ? "," : "", bench_measure_key[mi]);
      for (int si = 0; si < BS_COUNT; si++) {
        double mbs[BENCH_MAX_REPEAT], secs[BENCH_MAX_REPEAT], sync[BENCH_MAX_REPEAT],
            cpu[BENCH_MAX_REPEAT], maxc[BENCH_MAX_REPEAT];
        for (int r = 0; r < o->repeat; r++) {
          const struct bench_sample *s = &bench_res[wi][mi][si][r];
          mbs[r] = bench_metric(w, s, BX_MBS);
          secs[r] = s->secs;
          sync[r] = s->sync_secs;
          cpu[r] = s->cpu_secs;
          maxc[r] = s->max_call;
        }
        printf("%s\"%s\":{\"median_mb_s\":%.6g,\"mb_s\":", si ? "," : "", bench_side_key[si],
               bench_median(mbs, o->repeat));
        bench_json_array(mbs, o->repeat);
        printf(",\"secs\":");
        bench_json_array(secs, o->repeat);
        printf(",\"sync_secs\":");
        bench_json_array(sync, o->repeat);
        printf(",\"cpu_secs\":");
        bench_json_array(cpu, o->repeat);
        printf(",\"max_call_secs\":");
        bench_json_array(maxc, o->repeat);
        putchar('}');
      }
      struct bench_row row = {(enum bench_measure)mi, BX_MBS, "", false};
      double cairn[BENCH_MAX_REPEAT], raw[BENCH_MAX_REPEAT], ratio[BENCH_MAX_REPEAT];
      bench_row_values(wi, &row, o->repeat, cairn, raw, ratio);
      printf(",\"median_ratio\":%.4f,\"ratio\":", bench_median(ratio, o->repeat));
      bench_json_array(ratio, o->repeat);
      putchar('}');
    }
    printf("}}");
  }
  printf("]}\n");
}

int main(int argc, char **argv)
{
  struct bench_opts o;
  bench_parse_args(argc, argv, &o);
  log_set_level(LOG_WARN);

  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = bench_on_signal;
  sa.sa_flags = (int)SA_RESETHAND; /* a second signal kills at once */
  sigaction(SIGINT, &sa, NULL);
  sigaction(SIGTERM, &sa, NULL);

  for (int wi = 0; wi < BENCH_WORKLOADS; wi++) {
    bench_build_pool(&bench_workloads[wi], o.bytes);
  }
  uint64_t run_bytes = 0; /* the most on disk at once: a log and a raw file */
  for (int wi = 0; wi < BENCH_WORKLOADS; wi++) {
    uint64_t b = bench_workloads[wi].nbatches * bench_workloads[wi].batch_len;
    run_bytes = b > run_bytes ? b : run_bytes;
  }
  struct statvfs vfs;
  if (statvfs(o.parent, &vfs) != 0) {
    bench_die("%s: %s", o.parent, strerror(errno));
  }
  uint64_t avail = (uint64_t)vfs.f_bavail * vfs.f_frsize;
  if (avail < 2 * run_bytes + (256u << 20)) {
    bench_die("%s has %.1f GiB free; a run needs %.1f GiB (use --bytes or --dir)", o.parent,
              (double)avail / (double)(1u << 30),
              (double)(2 * run_bytes + (256u << 20)) / (double)(1u << 30));
  }
  if (snprintf(bench_workdir, sizeof bench_workdir, "%s/cairn-bench-XXXXXX", o.parent) >=
          (int)sizeof bench_workdir ||
      mkdtemp(bench_workdir) == NULL) {
    int e = errno;
    bench_workdir[0] = '\0';
    bench_die("creating a directory in %s: %s", o.parent, strerror(e));
  }

  size_t cap = BENCH_READ_CHUNK;
  for (int wi = 0; wi < BENCH_WORKLOADS; wi++) {
    size_t need = BENCH_READ_CHUNK + bench_workloads[wi].batch_len;
    cap = need > cap ? need : cap;
  }
  uint8_t *buf = aligned_alloc(4096, (cap + 4095) / 4096 * 4096);
  int null_fd = open("/dev/null", O_WRONLY | O_CLOEXEC);
  if (buf == NULL || null_fd < 0) {
    bench_die("setup: %s", buf == NULL ? "out of memory" : strerror(errno));
  }
  memset(buf, 0, cap);

  for (int rep = 0; rep < o.repeat; rep++) {
    for (int wi = 0; wi < BENCH_WORKLOADS; wi++) {
      bench_run(wi, rep, buf, cap, null_fd);
      const struct bench_workload *w = &bench_workloads[wi];
      fprintf(stderr,
              "run %d/%d %-9s append %.0f/%.0f  group-16 %.0f/%.0f  read %.0f/%.0f  "
              "sendfile %.0f/%.0f MB/s (cairn/raw)\n",
              rep + 1, o.repeat, w->name,
              bench_metric(w, &bench_res[wi][BM_APPEND][BS_CAIRN][rep], BX_MBS),
              bench_metric(w, &bench_res[wi][BM_APPEND][BS_RAW][rep], BX_MBS),
              bench_metric(w, &bench_res[wi][BM_GROUP][BS_CAIRN][rep], BX_MBS),
              bench_metric(w, &bench_res[wi][BM_GROUP][BS_RAW][rep], BX_MBS),
              bench_metric(w, &bench_res[wi][BM_READ][BS_CAIRN][rep], BX_MBS),
              bench_metric(w, &bench_res[wi][BM_READ][BS_RAW][rep], BX_MBS),
              bench_metric(w, &bench_res[wi][BM_SENDFILE][BS_CAIRN][rep], BX_MBS),
              bench_metric(w, &bench_res[wi][BM_SENDFILE][BS_RAW][rep], BX_MBS));
    }
  }

  struct bench_machine m;
  bench_machine(bench_workdir, &m);
  if (o.json) {
    bench_print_json(&o, &m);
  } else {
    bench_print_table(&o, &m);
  }
  close(null_fd);
  free(buf);
  for (int wi = 0; wi < BENCH_WORKLOADS; wi++) {
    for (int i = 0; i < BENCH_POOL; i++) {
      free(bench_workloads[wi].pool[i]);
    }
  }
  bench_cleanup();
  return 0;
}
