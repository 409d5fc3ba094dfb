/* cairn_log.c - `cairn-log`: look inside and exercise a partition log
 * directory from the shell (append generated batches, dump batches and
 * records, verify/recover, look up by time). Opening a log runs its crash
 * recovery, so `verify` is also how an operator repairs one by hand. */
#include "common/err.h"
#include "common/fsutil.h"
#include "common/log.h"
#include "format/batch.h"
#include "format/batch_builder.h"
#include "storage/plog.h"

#include <ctype.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

struct cli {
  const char *cmd;
  const char *dir;
  long batches;
  long records;
  long value_size;
  int64_t from;
  int64_t time;
  uint64_t segment_bytes;
  bool show_records;
};

static void cli_usage(FILE *out)
{
  fprintf(out,
          "usage: cairn-log COMMAND DIR [options]\n"
          "\n"
          "commands:\n"
          "  append DIR   append generated batches, flush, print their offsets\n"
          "  dump DIR     print every batch (with --show-records, every record)\n"
          "  verify DIR   open the log (running crash recovery) and print what was found\n"
          "  lookup DIR   print the first offset whose timestamp is >= --time\n"
          "\n"
          "options:\n"
          "  --batches N        batches to append (default 10)\n"
          "  --records N        records per batch (default 10)\n"
          "  --value-size N     bytes per record value (default 100)\n"
          "  --segment-bytes N  roll segments at N bytes (default 128 MiB)\n"
          "  --from OFFSET      dump from this offset (default: log start)\n"
          "  --time MS          timestamp for lookup, ms since the epoch\n"
          "  --show-records     dump records too (key and value, printable part)\n"
          "  -h, --help         this help\n"
          "\n"
          "exit status: 0 ok, 1 failure, 2 usage error\n");
}

static int64_t cli_now_ms(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int cli_parse(int argc, char **argv, struct cli *c)
{
  static const struct option opts[] = {
      {"batches", required_argument, NULL, 'b'},  {"records", required_argument, NULL, 'r'},
      {"value-size", required_argument, NULL, 'v'}, {"from", required_argument, NULL, 'f'},
      {"time", required_argument, NULL, 't'},     {"segment-bytes", required_argument, NULL, 's'},
      {"show-records", no_argument, NULL, 'R'},   {"help", no_argument, NULL, 'h'},
      {NULL, 0, NULL, 0}};
  *c = (struct cli){.batches = 10, .records = 10, .value_size = 100, .from = -1, .time = -1};
  int o;
  int which = 0;
  while ((o = getopt_long(argc, argv, "h", opts, &which)) != -1) {
    char *end = NULL;
    long long v = optarg == NULL ? 0 : strtoll(optarg, &end, 10);
    if (optarg != NULL && (end == optarg || *end != '\0' || v < 0)) {
      fprintf(stderr, "cairn-log: --%s needs a non-negative number, got '%s'\n",
              opts[which].name, optarg);
      return 2;
    }
    switch (o) {
    case 'b': c->batches = (long)v; break;
    case 'r': c->records = (long)v; break;
    case 'v': c->value_size = (long)v; break;
    case 'f': c->from = v; break;
    case 't': c->time = v; break;
    case 's': c->segment_bytes = (uint64_t)v; break;
    case 'R': c->show_records = true; break;
    case 'h': return -1; /* help asked for */
    default: return 2;
    }
  }
  if (argc - optind != 2) {
    cli_usage(stderr);
    return 2;
  }
  c->cmd = argv[optind];
  c->dir = argv[optind + 1];
  return 0;
}

static int cli_open(const struct cli *c, struct store **s)
{
  struct plog_opts opts;
  plog_opts_default(&opts);
  opts.segment_bytes = c->segment_bytes;
  char err[256];
  int rv = plog_open(c->dir, &opts, s, err, sizeof err);
  if (rv != 0) {
    fprintf(stderr, "cairn-log: cannot open %s: %s\n", c->dir, err);
  }
  return rv;
}

static int cli_append(const struct cli *c, struct store *s)
{
  if (c->records < 1) {
    fprintf(stderr, "cairn-log: --records must be at least 1\n");
    return 2;
  }
  struct batch_builder b;
  if (batch_builder_init(&b, BATCH_DEFAULT_MAX_BYTES) != 0) {
    return 1;
  }
  char *value = malloc((size_t)c->value_size + 1);
  int rv = 0;
  for (long i = 0; rv == 0 && i < c->batches; i++) {
    struct store_info info;
    store_info(s, &info);
    for (long r = 0; rv == 0 && r < c->records; r++) {
      char key[32];
      int kl = snprintf(key, sizeof key, "key-%" PRId64, info.next_offset + r);
      memset(value, 'a' + (int)((info.next_offset + r) % 26), (size_t)c->value_size);
      rv = batch_builder_add(&b, cli_now_ms(), key, (size_t)kl, value, (size_t)c->value_size,
                             NULL, 0);
    }
    uint8_t *buf = NULL;
    size_t len;
    if (rv == 0) {
      rv = batch_builder_finish(&b, &buf, &len);
    }
    int64_t base;
    if (rv == 0) {
      struct store_batch sb = {buf, len};
      rv = store_append(s, &sb, 1, 0, &base);
    }
    free(buf);
    if (rv == 0) {
      printf("appended batch: offsets %" PRId64 "..%" PRId64 " (%zu bytes)\n", base,
             base + c->records - 1, len);
    }
  }
  free(value);
  batch_builder_close(&b);
  if (rv == 0) {
    rv = store_flush(s, INT64_MAX);
  }
  if (rv != 0) {
    fprintf(stderr, "cairn-log: append: %s (%s)\n", cairn_strerror(rv), store_errmsg(s));
    return 1;
  }
  return 0;
}

static void cli_print_bytes(const char *label, const uint8_t *p, size_t n)
{
  if (p == NULL) {
    printf(" %s=null", label);
    return;
  }
  printf(" %s=\"", label);
  for (size_t i = 0; i < n && i < 40; i++) {
    putchar(isprint(p[i]) ? p[i] : '.');
  }
  printf(n > 40 ? "...\"(%zu bytes)" : "\"", n);
}

static int cli_dump_region(const struct cli *c, const uint8_t *buf, size_t len)
{
  size_t pos = 0;
  while (pos < len) {
    struct batch_header h;
    batch_header_decode(buf + pos, &h);
    size_t size = batch_total_size(h.batch_length);
    char why[160] = "ok";
    int v = batch_validate(buf + pos, size, BATCH_DEFAULT_MAX_BYTES, why, sizeof why);
    printf("batch offset=%" PRId64 " count=%d bytes=%zu first_ts=%" PRId64 " max_ts=%" PRId64
           " source_index=%" PRIu64 " entry_end=%d crc=0x%08x %s\n",
           h.base_offset, h.record_count, size, h.first_timestamp, h.max_timestamp,
           h.source_index, (h.entry_flags & BATCH_FLAG_ENTRY_END) != 0, h.crc,
           v == 0 ? "valid" : why);
    struct batch_iter it;
    if (c->show_records && v == 0 && batch_iter_init(&it, buf + pos, size) == 0) {
      struct batch_record r;
      while (batch_iter_next(&it, &r) == 1) {
        printf("  record offset=%" PRId64 " ts=%" PRId64, r.offset, r.timestamp);
        cli_print_bytes("key", r.key, r.key_len);
        cli_print_bytes("value", r.value, r.value_len);
        printf(" headers=%d\n", r.header_count);
      }
    }
    pos += size;
  }
  return 0;
}

static int cli_dump(const struct cli *c, struct store *s)
{
  struct store_info info;
  store_info(s, &info);
  int64_t off = c->from >= 0 ? c->from : info.start_offset;
  while (off < info.next_offset) {
    struct store_region r;
    int rv = store_read(s, off, 1 << 20, &r);
    if (rv != 0) {
      fprintf(stderr, "cairn-log: read at %" PRId64 ": %s\n", off, store_errmsg(s));
      return 1;
    }
    uint8_t *buf = malloc(r.len);
    size_t got = 0;
    if (buf == NULL || fs_pread_full(r.fd, buf, r.len, r.pos, &got) != 0 || got != r.len) {
      fprintf(stderr, "cairn-log: reading %zu bytes failed\n", r.len);
      free(buf);
      store_region_release(&r);
      return 1;
    }
    cli_dump_region(c, buf, r.len);
    off = r.next_offset;
    free(buf);
    store_region_release(&r);
  }
  return 0;
}

static int cli_verify(struct store *s)
{
  struct plog_recovery rec;
  plog_recovery_info(s, &rec);
  struct store_info info;
  store_info(s, &info);
  printf("log: offsets [%" PRId64 ", %" PRId64 "), %u segment(s), %" PRIu64
         " bytes, last raft index %" PRIu64 "\n",
         info.start_offset, info.next_offset, info.segments, info.size_bytes, info.last_index);
  printf("recovery: %u segment(s) scanned, %u index(es) rebuilt, %" PRIu64
         " byte(s) cut from a torn or corrupt tail, %u batch(es) of an incomplete entry cut, %u "
         "later segment(s) removed, %u unknown file(s) ignored\n",
         rec.segments_scanned, rec.indexes_rebuilt, rec.bytes_truncated, rec.batches_truncated,
         rec.segments_dropped, rec.files_ignored);
  return 0;
}

static int cli_lookup(const struct cli *c, struct store *s)
{
  if (c->time < 0) {
    fprintf(stderr, "cairn-log: lookup needs --time MS\n");
    return 2;
  }
  int64_t off;
  int rv = store_lookup_time(s, c->time, &off);
  if (rv != 0) {
    fprintf(stderr, "cairn-log: lookup: %s\n", store_errmsg(s));
    return 1;
  }
  printf("%" PRId64 "\n", off);
  return 0;
}

int main(int argc, char **argv)
{
  struct cli c;
  int rv = cli_parse(argc, argv, &c);
  if (rv < 0) {
    cli_usage(stdout);
    return 0;
  }
  if (rv != 0) {
    return rv;
  }
  if (strcmp(c.cmd, "append") != 0 && strcmp(c.cmd, "dump") != 0 &&
      strcmp(c.cmd, "verify") != 0 && strcmp(c.cmd, "lookup") != 0) {
    fprintf(stderr, "cairn-log: unknown command '%s'\n", c.cmd);
    cli_usage(stderr);
    return 2;
  }
  if (strcmp(c.cmd, "append") != 0 && access(c.dir, F_OK) != 0) {
    fprintf(stderr, "cairn-log: %s does not exist\n", c.dir);
    return 1;
  }
  struct store *s;
  if (cli_open(&c, &s) != 0) {
    return 1;
  }
  if (strcmp(c.cmd, "append") == 0) {
    rv = cli_append(&c, s);
  } else if (strcmp(c.cmd, "dump") == 0) {
    rv = cli_dump(&c, s);
  } else if (strcmp(c.cmd, "verify") == 0) {
    rv = cli_verify(s);
  } else {
    rv = cli_lookup(&c, s);
  }
  store_close(s);
  return rv;
}
