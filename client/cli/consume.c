/* consume.c - `cairn consume TOPIC`: reads a topic's partitions from a
 * start position and prints each record, raw (one value per line by
 * default), through a format string, or as JSON Lines. */
#include "cli.h"
#include "record_print.h"

#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

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
          "                           @TIME       the first record at or after TIME: ms\n"
          "                                       since the epoch, ISO 8601 UTC\n"
          "                                       (@2026-12-01T00:00:00Z) or before now\n"
          "                                       (@-1h, @-30m, @-2d)\n"
          "  -p, --partition N      only partition N (default: every partition)\n"
          "  -n, -c, --count COUNT  exit after COUNT records (-c as in kcat)\n"
          "  -e, --exit-at-end      exit once every partition's end (its high\n"
          "                         watermark when the command started) is reached\n"
          "%s"
          "\n"
          "%s",
          rp_format_help, cli_common_help);
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
  struct rp_format format;
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
      int64_t ms = 0;
      if (cli_parse_time(cmd, "-o @TIME", arg + 1, &ms) != 0) {
        return CLI_USAGE;
      }
      cs->start_value = ms > 0 ? (uint64_t)ms : 0; /* before 1970: everything */
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
      return cli_usage_error(cmd, "-o: '%s' is not beginning, end, an OFFSET, -N or @TIME",
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
  case 'c': /* kcat's spelling */
  case 'n':
    return cli_parse_u64(cmd, "-n", arg, 1, UINT64_MAX, &cs->count) == 0 ? CLI_OK : CLI_USAGE;
  case 'e':
    cs->exit_at_end = true;
    return CLI_OK;
  case 'f':
    return rp_format_parse(cmd, arg, &cs->format);
  default:
    return cli_usage_error(cmd, "unexpected option");
  }
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
      int n = snprintf(what, sizeof what, "%s partition %" PRId32,
                       etopic != NULL ? etopic : cs->topic, epart);
      struct consume_part *bad = consume_part(cs, epart);
      if (bad != NULL && n > 0 && (size_t)n < sizeof what) {
        /* where the partition stopped: the next offset it would print */
        snprintf(what + n, sizeof what - (size_t)n, " at offset %" PRId64, bad->next);
      }
      fflush(stdout);
      return cli_fail_call(c, cmd, what, rv);
    }
    struct consume_part *pp = consume_part(cs, r->partition);
    if (pp != NULL && r->offset < pp->next) {
      continue; /* before the start asked for (should not happen: the library skips) */
    }
    rp_print(&cs->format, c->json, r);
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
  int rv = cli_getopt(c, cmd, argc, argv, "o:p:n:c:ef:", own, consume_opt, &cs, consume_help, &first);
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
