/* consume.c - `cairn consume TOPIC`: reads a topic's partitions from a
 * start position and prints each record, raw (one value per line by
 * default), through a format string, or as JSON Lines. */
#include "cli.h"
#include "output.h"

#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#define CONSUME_FORMAT_MAX 4096
#define CONSUME_POLL_MS 200

static void consume_help(FILE *out)
{
  fprintf(out,
          "usage: cairn consume TOPIC [-o POSITION] [-p N] [-n COUNT] [-e] [-f FORMAT]\n"
          "       cairn consume -g GROUP TOPIC...   (a group member: cairn group --help)\n"
          "\n"
          "Prints TOPIC's records, by default each value's raw bytes followed by a\n"
          "newline, as they arrive, until interrupted (Ctrl-C), COUNT records, or\n"
          "with -e the end. Records of one partition come in offset order.\n"
          "\n"
          "options:\n"
          "  -o, --offset POSITION  where each partition starts (default beginning):\n"
          "                           beginning   the oldest record kept\n"
          "                           end         only records produced from now on\n"
          "                           OFFSET      this offset (e.g. 42)\n"
          "                           -N          the last N records of each partition\n"
          "                           @TIMESTAMP  the first record at or after this time\n"
          "                                       (ms since the epoch)\n"
          "  -p, --partition N      only partition N (default: every partition)\n"
          "  -n, --count COUNT      exit after COUNT records\n"
          "  -e, --exit-at-end      exit once every partition's end (its high\n"
          "                         watermark when the command started) is reached\n"
          "  -f, --format FORMAT    print each record through FORMAT instead of \"%%v\\n\":\n"
          "                           %%v value    %%k key      %%o offset   %%p partition\n"
          "                           %%t timestamp (ms)       %%T topic\n"
          "                           %%h headers as name=value,name=value\n"
          "                           %%S value length, %%K key length (-1: null)\n"
          "                           %%%% a percent sign; escapes \\n \\t \\r \\0 \\\\ \\xHH\n"
          "                         keys and values are printed as raw bytes: to read\n"
          "                         back values with any bytes use e.g. -f '%%v\\0' or\n"
          "                         -f '%%S %%v', or --json\n"
          "  --json                 one JSON object per line (JSON Lines): topic,\n"
          "                         partition, offset, timestamp, key, value, headers;\n"
          "                         a key or value that is not UTF-8 text is null, its\n"
          "                         bytes in key_base64 / value_base64\n"
          "\n"
          "%s",
          cli_common_help);
}

enum consume_start { CONSUME_BEGINNING, CONSUME_END, CONSUME_OFFSET, CONSUME_LAST, CONSUME_TIME };

struct consume_part {
  int32_t partition;
  int64_t next; /* the offset after the last record printed (or the start) */
  int64_t end;  /* the high watermark when we started */
};

struct consume {
  const char *topic;
  enum consume_start start;
  uint64_t start_value;
  int64_t only_partition; /* -1: all */
  uint64_t count;         /* 0: no limit */
  bool exit_at_end;
  char format[CONSUME_FORMAT_MAX];
  size_t format_len;
  struct consume_part *parts;
  size_t nparts;
};

static volatile sig_atomic_t consume_interrupted;

static void consume_on_sigint(int sig)
{
  (void)sig;
  consume_interrupted = 1;
}

static int consume_opt(void *ctx, int o, const char *arg)
{
  struct consume *cs = ctx;
  const char *cmd = "consume";
  switch (o) {
  case 'o':
    if (strcmp(arg, "beginning") == 0) {
      cs->start = CONSUME_BEGINNING;
    } else if (strcmp(arg, "end") == 0) {
      cs->start = CONSUME_END;
    } else if (arg[0] == '@') {
      cs->start = CONSUME_TIME;
      if (cli_parse_u64(cmd, "-o @TIMESTAMP", arg + 1, 0, INT64_MAX, &cs->start_value) != 0) {
        return CLI_USAGE;
      }
    } else if (arg[0] == '-') {
      cs->start = CONSUME_LAST;
      if (cli_parse_u64(cmd, "-o -N", arg + 1, 1, INT64_MAX, &cs->start_value) != 0) {
        return CLI_USAGE;
      }
    } else if (arg[0] >= '0' && arg[0] <= '9') {
      cs->start = CONSUME_OFFSET;
      if (cli_parse_u64(cmd, "-o", arg, 0, INT64_MAX, &cs->start_value) != 0) {
        return CLI_USAGE;
      }
    } else {
      return cli_usage_error(cmd, "-o: '%s' is not beginning, end, an OFFSET, -N or @TIMESTAMP",
                             arg);
    }
    return CLI_OK;
  case 'p': {
    uint64_t v;
    if (cli_parse_u64(cmd, "-p", arg, 0, INT32_MAX, &v) != 0) {
      return CLI_USAGE;
    }
    cs->only_partition = (int64_t)v;
    return CLI_OK;
  }
  case 'n':
    return cli_parse_u64(cmd, "-n", arg, 1, UINT64_MAX, &cs->count) == 0 ? CLI_OK : CLI_USAGE;
  case 'e':
    cs->exit_at_end = true;
    return CLI_OK;
  case 'f':
    if (strlen(arg) >= sizeof cs->format) {
      return cli_usage_error(cmd, "-f: the format is longer than %d bytes", CONSUME_FORMAT_MAX);
    }
    if (cli_unescape(cmd, "-f", arg, cs->format, &cs->format_len) != 0) {
      return CLI_USAGE;
    }
    /* Check the conversions now rather than at the first record. */
    for (size_t i = 0; i < cs->format_len; i++) {
      if (cs->format[i] != '%') {
        continue;
      }
      if (++i == cs->format_len || strchr("vkoptThSK%", cs->format[i]) == NULL ||
          cs->format[i] == '\0') {
        return cli_usage_error(cmd,
                               "-f: '%%%c' is not a conversion (%%v %%k %%o %%p %%t %%T %%h %%S "
                               "%%K %%%%)",
                               i == cs->format_len ? ' ' : cs->format[i]);
      }
    }
    return CLI_OK;
  default:
    return cli_usage_error(cmd, "unexpected option");
  }
}

/* Writes bytes (NULL: nothing). */
static void consume_put(const void *p, size_t len)
{
  if (p != NULL && len > 0) {
    fwrite(p, 1, len, stdout);
  }
}

static void consume_print_format(const struct consume *cs, const struct cairn_record *r)
{
  for (size_t i = 0; i < cs->format_len; i++) {
    char ch = cs->format[i];
    if (ch != '%') {
      putchar(ch);
      continue;
    }
    switch (cs->format[++i]) {
    case 'v':
      consume_put(r->value, r->value_len);
      break;
    case 'k':
      consume_put(r->key, r->key_len);
      break;
    case 'o':
      printf("%" PRId64, r->offset);
      break;
    case 'p':
      printf("%" PRId32, r->partition);
      break;
    case 't':
      printf("%" PRId64, r->timestamp_ms);
      break;
    case 'T':
      fputs(r->topic, stdout);
      break;
    case 'S':
      printf("%lld", r->value == NULL ? -1LL : (long long)r->value_len);
      break;
    case 'K':
      printf("%lld", r->key == NULL ? -1LL : (long long)r->key_len);
      break;
    case 'h':
      for (size_t h = 0; h < r->header_count; h++) {
        if (h > 0) {
          putchar(',');
        }
        consume_put(r->headers[h].key, r->headers[h].key_len);
        putchar('=');
        consume_put(r->headers[h].value, r->headers[h].value_len);
      }
      break;
    default:
      putchar('%');
      break; /* %% */
    }
  }
}

static void consume_print_json(const struct cairn_record *r)
{
  struct oj j;
  oj_init(&j, stdout, false);
  oj_object_begin(&j);
  oj_key(&j, "topic");
  oj_str(&j, r->topic);
  oj_key(&j, "partition");
  oj_int(&j, r->partition);
  oj_key(&j, "offset");
  oj_int(&j, r->offset);
  oj_key(&j, "timestamp");
  oj_int(&j, r->timestamp_ms);
  oj_bytes_member(&j, "key", r->key, r->key_len);
  oj_bytes_member(&j, "value", r->value, r->value_len);
  oj_key(&j, "headers");
  oj_array_begin(&j);
  for (size_t h = 0; h < r->header_count; h++) {
    oj_object_begin(&j);
    oj_bytes_member(&j, "name", r->headers[h].key, r->headers[h].key_len);
    oj_bytes_member(&j, "value", r->headers[h].value, r->headers[h].value_len);
    oj_object_end(&j);
  }
  oj_array_end(&j);
  oj_object_end(&j);
  oj_end(&j);
}

static struct consume_part *consume_part(struct consume *cs, int32_t partition)
{
  for (size_t i = 0; i < cs->nparts; i++) {
    if (cs->parts[i].partition == partition) {
      return &cs->parts[i];
    }
  }
  return NULL;
}

static bool consume_all_at_end(const struct consume *cs)
{
  for (size_t i = 0; i < cs->nparts; i++) {
    if (cs->parts[i].next < cs->parts[i].end) {
      return false;
    }
  }
  return true;
}

/* Finds where partition pp starts (and, for -e, where it ends). Returns
 * CLI_OK or an exit code after printing why. */
static int consume_resolve(struct cli *c, struct consume *cs, struct consume_part *pp)
{
  const char *cmd = "consume";
  int64_t earliest, latest, at, ts;
  char what[300];
  snprintf(what, sizeof what, "%s partition %" PRId32, cs->topic, pp->partition);
  int rv = cairn_sync_list_offsets(c->sync, cs->topic, pp->partition, CAIRN_OFFSET_SPEC_EARLIEST, 0,
                                   &earliest, &ts);
  if (rv == 0) {
    rv = cairn_sync_list_offsets(c->sync, cs->topic, pp->partition, CAIRN_OFFSET_SPEC_LATEST, 0,
                                 &latest, &ts);
  }
  if (rv != 0) {
    return cli_fail_call(c, cmd, what, rv);
  }
  pp->end = latest;
  switch (cs->start) {
  case CONSUME_BEGINNING:
    pp->next = earliest;
    break;
  case CONSUME_END:
    pp->next = latest;
    break;
  case CONSUME_OFFSET:
    if ((int64_t)cs->start_value > latest) {
      return cli_fail(cmd,
                      "-o %" PRIu64 ": %s holds offsets %" PRId64 "..%" PRId64
                      " (use -o end to wait for new records)",
                      cs->start_value, what, earliest, latest - 1);
    }
    pp->next = (int64_t)cs->start_value;
    if (pp->next < earliest) {
      fprintf(stderr,
              "cairn consume: %s: offset %" PRId64 " is no longer kept; starting at %" PRId64 "\n",
              what, pp->next, earliest);
      pp->next = earliest;
    }
    break;
  case CONSUME_LAST:
    pp->next =
        latest - earliest > (int64_t)cs->start_value ? latest - (int64_t)cs->start_value : earliest;
    break;
  case CONSUME_TIME:
    rv = cairn_sync_list_offsets(c->sync, cs->topic, pp->partition, CAIRN_OFFSET_SPEC_TIMESTAMP,
                                 (int64_t)cs->start_value, &at, &ts);
    if (rv != 0) {
      return cli_fail_call(c, cmd, what, rv);
    }
    pp->next = at < 0 ? latest : at; /* -1: nothing that recent yet */
    break;
  }
  return CLI_OK;
}

/* Prints records until the end, the count or an interrupt. */
static int consume_loop(struct cli *c, struct consume *cs, struct cairn_consumer *cons)
{
  const char *cmd = "consume";
  uint64_t printed = 0;
  while (!consume_interrupted) {
    if (cs->exit_at_end && consume_all_at_end(cs)) {
      break;
    }
    const struct cairn_record *r = NULL;
    const char *etopic = NULL;
    int32_t epart = -1;
    int rv = cairn_sync_poll(c->sync, cons, 0, &r, &etopic, &epart);
    if (rv == UV_ETIMEDOUT) {
      /* Nothing buffered: show what was printed, then wait a little. */
      if (fflush(stdout) != 0) {
        break;
      }
      rv = cairn_sync_poll(c->sync, cons, CONSUME_POLL_MS, &r, &etopic, &epart);
    }
    if (rv == UV_ETIMEDOUT) {
      continue;
    }
    if (rv != 0) {
      char what[300];
      snprintf(what, sizeof what, "%s partition %" PRId32, etopic != NULL ? etopic : cs->topic,
               epart);
      fflush(stdout);
      return cli_fail_call(c, cmd, what, rv);
    }
    struct consume_part *pp = consume_part(cs, r->partition);
    if (pp != NULL && r->offset < pp->next) {
      continue; /* before the start asked for (should not happen: the library skips) */
    }
    if (c->json) {
      consume_print_json(r);
    } else if (cs->format_len > 0) {
      consume_print_format(cs, r);
    } else {
      consume_put(r->value, r->value_len);
      putchar('\n');
    }
    if (ferror(stdout)) {
      break; /* the reader went away (EPIPE): that is the end */
    }
    if (pp != NULL) {
      pp->next = r->offset + 1;
    }
    if (cs->count > 0 && ++printed >= cs->count) {
      break;
    }
  }
  if (fflush(stdout) != 0 && errno != EPIPE) {
    return cli_fail(cmd, "writing stdout: %s", strerror(errno));
  }
  return CLI_OK;
}

int cli_consume(struct cli *c, int argc, char **argv)
{
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--") == 0) {
      break;
    }
    if (strncmp(argv[i], "-g", 2) == 0 || strncmp(argv[i], "--group", 7) == 0) {
      return cli_group_consume(c, argc, argv); /* a group member (group.c) */
    }
  }
  const char *cmd = "consume";
  static const struct option own[] = {
      {"offset", required_argument, NULL, 'o'}, {"partition", required_argument, NULL, 'p'},
      {"count", required_argument, NULL, 'n'},  {"exit-at-end", no_argument, NULL, 'e'},
      {"format", required_argument, NULL, 'f'}, {NULL, 0, NULL, 0}};
  struct consume cs = {.start = CONSUME_BEGINNING, .only_partition = -1};
  int first;
  int rv = cli_getopt(c, cmd, argc, argv, "o:p:n:ef:", own, consume_opt, &cs, consume_help, &first);
  if (rv != CLI_OK) {
    return rv == CLI_HELP_DONE ? CLI_OK : rv;
  }
  if (first >= argc) {
    return cli_usage_error(cmd, "which topic? (cairn consume TOPIC)");
  }
  if (argc - first > 1) {
    return cli_usage_error(cmd, "one topic at a time: '%s' is extra", argv[first + 1]);
  }
  cs.topic = argv[first];
  if ((rv = cli_connect(c, cmd)) != CLI_OK) {
    return rv;
  }
  struct cairn_topic_info *t = NULL;
  rv = cli_describe_topic(c, cs.topic, &t);
  if (rv != 0) {
    return cli_fail_call(c, cmd, cs.topic, rv);
  }
  uint32_t count = t->partition_count;
  cairn_topic_info_free(t);
  if (cs.only_partition >= (int64_t)count) {
    return cli_fail(cmd, "-p %" PRId64 ": topic %s has partitions 0..%" PRIu32, cs.only_partition,
                    cs.topic, count - 1);
  }
  cs.nparts = cs.only_partition >= 0 ? 1 : count;
  cs.parts = calloc(cs.nparts, sizeof *cs.parts);
  if (cs.parts == NULL) {
    return cli_fail(cmd, "out of memory");
  }
  struct cairn_consumer *cons = NULL;
  rv = cairn_sync_consumer_new(c->sync, NULL, &cons);
  if (rv != 0) {
    free(cs.parts);
    return cli_fail_call(c, cmd, "creating the consumer", rv);
  }
  int code = CLI_OK;
  for (size_t i = 0; i < cs.nparts && code == CLI_OK; i++) {
    struct consume_part *pp = &cs.parts[i];
    pp->partition = cs.only_partition >= 0 ? (int32_t)cs.only_partition : (int32_t)i;
    code = consume_resolve(c, &cs, pp);
    if (code == CLI_OK) {
      rv = cairn_consumer_assign(cons, cs.topic, pp->partition, pp->next);
      if (rv != 0) {
        code = cli_fail_call(c, cmd, "assigning a partition", rv);
      }
    }
  }
  if (code == CLI_OK) {
    struct sigaction sa = {.sa_handler = consume_on_sigint};
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    code = consume_loop(c, &cs, cons);
  }
  cairn_sync_consumer_close(c->sync, cons);
  free(cs.parts);
  return code;
}
