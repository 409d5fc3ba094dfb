/* produce.c - `cairn produce TOPIC`: one message per line of stdin (or
 * per delimiter), with an optional key (literal, or split off each message
 * at a separator), partition and headers;
 * waits until every message is acknowledged (committed on a majority of
 * the partition's replicas) and says where they went. */
#include "cli.h"
#include "output.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#define PRODUCE_MAX_HEADERS 64
#define PRODUCE_MAX_SEP 64
#define PRODUCE_MAX_KEY 4096

static void produce_help(FILE *out)
{
  fprintf(out,
          "usage: cairn produce TOPIC [-k KEY | -K SEP] [-p N] [-H NAME=VALUE]...\n"
          "                           [-D SEP | --null] [-f FILE]\n"
          "\n"
          "Reads messages from stdin, one per line, and sends them to TOPIC; returns\n"
          "once every message is acknowledged (committed on a majority of its\n"
          "partition's replicas) and prints where they went. An empty line is an\n"
          "empty message; a last line without a newline is a message too.\n"
          "\n"
          "A message read by lines cannot contain a newline. For other bytes pick\n"
          "another separator with -D, or use --null with NUL-separated input\n"
          "(e.g. from `find -print0` or `printf 'a\\0b\\0'`): then any bytes but NUL\n"
          "go through unchanged.\n"
          "\n"
          "options:\n"
          "  -k, --key KEY            give every message the key KEY (as kcat and rpk)\n"
          "                           KEY must hold a letter or a digit: '-k :' was the\n"
          "                           separator's spelling before -K and is refused\n"
          "  -K, --key-separator SEP  split each message at the first SEP into key\n"
          "                           and value (\"user1:hello\" with -K :); a message\n"
          "                           without SEP has no key\n"
          "  -f, --file FILE          read the messages from FILE instead of stdin\n"
          "  -p, --partition N        send every message to partition N (default: by\n"
          "                           key hash, keyless messages batched together)\n"
          "  -H, --header NAME=VALUE  add this header to every message (repeatable)\n"
          "  -D, --delimiter SEP      the message separator, one byte (default \\n)\n"
          "  --null                   messages are separated by NUL bytes (-D '\\0')\n"
          "  --compression CODEC      none (default), lz4 or zstd\n"
          "\n"
          "SEP and the delimiter accept the escapes \\n \\t \\r \\0 \\\\ \\xHH.\n"
          "\n"
          "%s",
          cli_common_help);
}

struct produce_part {
  int32_t partition;
  uint64_t count;
  int64_t first; /* lowest offset acknowledged */
  int64_t last;  /* highest */
};

struct produce {
  const char *topic;
  char key_sep[PRODUCE_MAX_SEP];
  size_t key_sep_len;
  const char *key;  /* -k: every message's key, or NULL */
  const char *file; /* -f: read messages from this file, not stdin */
  FILE *in;
  int64_t partition; /* -1: the partitioner */
  char delim;
  struct cairn_header headers[PRODUCE_MAX_HEADERS];
  size_t header_count;
  enum cairn_compression compression;
  /* delivery results */
  uint64_t sent;
  uint64_t delivered;
  uint64_t failed;      /* delivery callbacks with an error */
  uint64_t send_failed; /* 1 if reading stopped at a send that failed at once */
  uint64_t too_large;   /* messages above the limit: reported, skipped */
  uint64_t read;        /* messages read so far (the line number with -D \n) */
  uint32_t max_bytes;   /* the producer's max_batch_bytes, for messages */
  int first_error;
  char first_error_text[768]; /* the delivery's words (addresses not reached) */
  struct produce_part *parts;
  size_t nparts;
  int nomem;
};

#define PRODUCE_OPT_NULL 3000
#define PRODUCE_OPT_COMPRESSION 3001

static bool produce_alnum(unsigned char b)
{
  return (b >= '0' && b <= '9') || (b >= 'a' && b <= 'z') || (b >= 'A' && b <= 'Z') || b >= 0x80;
}

/* True if s, read as the old -k SEP read it (the escapes \n \t \r \0 \\
 * and \xHH are one byte each), holds a letter, a digit or a non-ASCII
 * byte. */
static bool produce_old_sep_has_alnum(const char *s)
{
  for (; *s != '\0'; s++) {
    if (*s != '\\') {
      if (produce_alnum((unsigned char)*s)) {
        return true;
      }
      continue;
    }
    if (s[1] == 'x' && isxdigit((unsigned char)s[2]) && isxdigit((unsigned char)s[3])) {
      char hex[3] = {s[2], s[3], '\0'};
      if (produce_alnum((unsigned char)strtoul(hex, NULL, 16))) {
        return true;
      }
      s += 3;
    } else if (s[1] != '\0' && strchr("ntr0\\", s[1]) != NULL) {
      s++; /* a control byte or a backslash */
    }
  }
  return false;
}

/* -k KEY. Until -K existed, -k was the key separator (`-k :`, `-k '\t'`):
 * an old script must not silently send every message with the key ":".
 * A key with no letter or digit (read as the old option read escapes) is
 * what separators look like, so it is refused, naming -K; such a key can
 * still be sent through -K. */
static int produce_key_opt(struct produce *p, const char *arg)
{
  const char *cmd = "produce";
  bool alnum = produce_old_sep_has_alnum(arg);
  if (!alnum) {
    return cli_usage_error(cmd,
                           "-k '%s': -k is now the literal key of every message (as in kcat "
                           "and rpk) and a key needs a letter or digit; to split each line "
                           "into key and value at '%s' use -K '%s' (--key-separator), the "
                           "option -k used to be",
                           arg, arg, arg);
  }
  if (strlen(arg) > PRODUCE_MAX_KEY) {
    return cli_usage_error(cmd, "-k: the key is longer than %d bytes", PRODUCE_MAX_KEY);
  }
  p->key = arg;
  return CLI_OK;
}

static int produce_opt(void *ctx, int o, const char *arg)
{
  struct produce *p = ctx;
  const char *cmd = "produce";
  switch (o) {
  case 'k':
    return produce_key_opt(p, arg);
  case 'K': {
    char buf[PRODUCE_MAX_SEP * 4];
    size_t n;
    if (strlen(arg) >= sizeof buf) {
      return cli_usage_error(cmd, "-K: the key separator is too long");
    }
    if (cli_unescape(cmd, "-K", arg, buf, &n) != 0) {
      return CLI_USAGE;
    }
    if (n == 0 || n > PRODUCE_MAX_SEP) {
      return cli_usage_error(cmd, "-K: the key separator must be 1..%d bytes", PRODUCE_MAX_SEP);
    }
    memcpy(p->key_sep, buf, n);
    p->key_sep_len = n;
    return CLI_OK;
  }
  case 'f':
    p->file = arg;
    return CLI_OK;
  case 'p': {
    uint64_t v;
    if (cli_parse_u64(cmd, "-p", arg, 0, INT32_MAX, &v) != 0) {
      return CLI_USAGE;
    }
    p->partition = (int64_t)v;
    return CLI_OK;
  }
  case 'H': {
    const char *eq = strchr(arg, '=');
    if (eq == NULL || eq == arg) {
      return cli_usage_error(cmd, "-H: '%s' is not NAME=VALUE", arg);
    }
    if (p->header_count == PRODUCE_MAX_HEADERS) {
      return cli_usage_error(cmd, "-H: at most %d headers", PRODUCE_MAX_HEADERS);
    }
    struct cairn_header *h = &p->headers[p->header_count++];
    h->key = arg;
    h->key_len = (size_t)(eq - arg);
    h->value = eq + 1;
    h->value_len = strlen(eq + 1);
    return CLI_OK;
  }
  case 'D':
  case PRODUCE_OPT_NULL: {
    if (o == PRODUCE_OPT_NULL) {
      p->delim = '\0';
      return CLI_OK;
    }
    char buf[16];
    size_t n = 0;
    if (strlen(arg) < sizeof buf && cli_unescape(cmd, "-D", arg, buf, &n) != 0) {
      return CLI_USAGE;
    }
    if (n != 1) {
      return cli_usage_error(cmd, "-D: the delimiter must be one byte (e.g. '\\t', '\\0', ';')");
    }
    p->delim = buf[0];
    return CLI_OK;
  }
  case PRODUCE_OPT_COMPRESSION:
    if (strcmp(arg, "none") == 0) {
      p->compression = CAIRN_COMPRESSION_NONE;
    } else if (strcmp(arg, "lz4") == 0) {
      p->compression = CAIRN_COMPRESSION_LZ4;
    } else if (strcmp(arg, "zstd") == 0) {
      p->compression = CAIRN_COMPRESSION_ZSTD;
    } else {
      return cli_usage_error(cmd, "--compression: '%s' is not none, lz4 or zstd", arg);
    }
    return CLI_OK;
  default:
    return cli_usage_error(cmd, "unexpected option");
  }
}

static struct produce_part *produce_part(struct produce *p, int32_t partition)
{
  for (size_t i = 0; i < p->nparts; i++) {
    if (p->parts[i].partition == partition) {
      return &p->parts[i];
    }
  }
  struct produce_part *n = realloc(p->parts, (p->nparts + 1) * sizeof *n);
  if (n == NULL) {
    return NULL;
  }
  p->parts = n;
  n[p->nparts] = (struct produce_part){.partition = partition, .first = -1, .last = -1};
  return &n[p->nparts++];
}

static void produce_on_delivery(struct cairn_producer *pr, int status,
                                const struct cairn_delivery *d, void *data)
{
  struct produce *p = data;
  if (status != 0) {
    p->failed++;
    if (p->first_error == 0) {
      p->first_error = status;
      snprintf(p->first_error_text, sizeof p->first_error_text, "%s",
               d->error != NULL ? d->error : cairn_strerror(status));
    }
    return;
  }
  p->delivered++;
  struct produce_part *pp = produce_part(p, d->partition);
  if (pp == NULL) {
    p->nomem = 1;
    return;
  }
  pp->count++;
  if (pp->first < 0 || d->offset < pp->first) {
    pp->first = d->offset;
  }
  if (d->offset > pp->last) {
    pp->last = d->offset;
  }
}

static int produce_part_cmp(const void *a, const void *b)
{
  const struct produce_part *x = a, *y = b;
  return (x->partition > y->partition) - (x->partition < y->partition);
}

static void produce_report(struct cli *c, struct produce *p)
{
  if (p->nparts > 1) {
    qsort(p->parts, p->nparts, sizeof *p->parts, produce_part_cmp);
  }
  if (c->json) {
    struct oj j;
    oj_init(&j, stdout, true);
    oj_object_begin(&j);
    oj_key(&j, "topic");
    oj_str(&j, p->topic);
    oj_key(&j, "produced");
    oj_uint(&j, p->delivered);
    oj_key(&j, "failed");
    oj_uint(&j, p->sent - p->delivered + p->send_failed + p->too_large);
    oj_key(&j, "too_large");
    oj_uint(&j, p->too_large);
    oj_key(&j, "error");
    oj_str(&j, p->first_error != 0 ? (p->first_error_text[0] != '\0' ? p->first_error_text
                                                                      : cairn_strerror(p->first_error))
               : p->too_large > 0 ? cairn_strerror(CAIRN_ETOOLARGE)
                                  : NULL);
    oj_key(&j, "partitions");
    oj_array_begin(&j);
    for (size_t i = 0; i < p->nparts; i++) {
      oj_object_begin(&j);
      oj_key(&j, "partition");
      oj_int(&j, p->parts[i].partition);
      oj_key(&j, "count");
      oj_uint(&j, p->parts[i].count);
      oj_key(&j, "first_offset");
      oj_int(&j, p->parts[i].first);
      oj_key(&j, "last_offset");
      oj_int(&j, p->parts[i].last);
      oj_object_end(&j);
    }
    oj_array_end(&j);
    oj_object_end(&j);
    oj_end(&j);
    return;
  }
  printf("produced %" PRIu64 " message(s) to %s", p->delivered, p->topic);
  for (size_t i = 0; i < p->nparts; i++) {
    const struct produce_part *pp = &p->parts[i];
    printf("%s partition %" PRId32 " offsets %" PRId64 "..%" PRId64, i == 0 ? ":" : ",",
           pp->partition, pp->first, pp->last);
  }
  printf("\n");
}

/* A message above the producer's limit: said with where it is and its
 * size, and skipped, so that one bad line does not drop the ones after it
 * (the exit status still says something failed). */
static void produce_too_large(struct produce *p, size_t len)
{
  p->too_large++;
  fprintf(stderr,
          "cairn produce: %s %" PRIu64 ": %zu bytes, above the limit of %" PRIu32
          " bytes per message (with its key, headers and batch header): not sent\n",
          p->delim == '\n' ? "line" : "message", p->read, len, p->max_bytes);
}

/* Reads stdin and sends every message, skipping (and reporting) messages
 * above the limit and stopping at the first send that fails at once for
 * another reason. Returns 0 or that code (after printing it). */
static int produce_read_and_send(struct cli *c, struct produce *p, struct cairn_producer *pr)
{
  const char *cmd = "produce";
  char *line = NULL;
  size_t cap = 0;
  ssize_t n;
  int rv = 0;
  while ((n = getdelim(&line, &cap, p->delim, p->in)) >= 0) {
    size_t len = (size_t)n;
    if (len > 0 && line[len - 1] == p->delim) {
      len--;
    }
    p->read++;
    struct cairn_message m;
    cairn_message_init(&m);
    m.topic = p->topic;
    if (p->partition >= 0) {
      m.partition = (int32_t)p->partition;
    }
    m.value = line;
    m.value_len = len;
    if (p->key != NULL) {
      m.key = p->key;
      m.key_len = strlen(p->key);
    } else if (p->key_sep_len > 0) {
      char *sep = memmem(line, len, p->key_sep, p->key_sep_len);
      if (sep != NULL) {
        m.key = line;
        m.key_len = (size_t)(sep - line);
        m.value = sep + p->key_sep_len;
        m.value_len = len - m.key_len - p->key_sep_len;
      }
    }
    m.headers = p->header_count > 0 ? p->headers : NULL;
    m.header_count = p->header_count;
    rv = cairn_sync_send(c->sync, pr, &m, produce_on_delivery, p);
    if (rv == CAIRN_ETOOLARGE) {
      produce_too_large(p, len);
      rv = 0;
      continue;
    }
    if (rv != 0) {
      p->send_failed = 1;
      if (p->first_error == 0) {
        p->first_error = rv;
      }
      char what[64];
      snprintf(what, sizeof what, "%s %" PRIu64 " (%zu bytes)",
               p->delim == '\n' ? "line" : "message", p->read, len);
      cli_fail_call(c, cmd, what, rv);
      break;
    }
    p->sent++;
  }
  if (rv == 0 && ferror(p->in)) {
    rv = -errno;
    cli_fail(cmd, "reading %s: %s", p->file != NULL ? p->file : "stdin", strerror(errno));
  }
  free(line);
  return rv;
}

static int produce_run(struct cli *c, struct produce *pp);

int cli_produce(struct cli *c, int argc, char **argv)
{
  const char *cmd = "produce";
  static const struct option own[] = {
      {"key", required_argument, NULL, 'k'},
      {"key-separator", required_argument, NULL, 'K'},
      {"file", required_argument, NULL, 'f'},
      {"partition", required_argument, NULL, 'p'},
      {"header", required_argument, NULL, 'H'},
      {"delimiter", required_argument, NULL, 'D'},
      {"null", no_argument, NULL, PRODUCE_OPT_NULL},
      {"compression", required_argument, NULL, PRODUCE_OPT_COMPRESSION},
      {NULL, 0, NULL, 0}};
  struct produce p = {.partition = -1, .delim = '\n'};
  int first;
  int rv = cli_getopt(c, cmd, argc, argv, "k:K:p:H:D:f:", own, produce_opt, &p, produce_help, &first);
  if (rv != CLI_OK) {
    return rv == CLI_HELP_DONE ? CLI_OK : rv;
  }
  if (first >= argc) {
    return cli_usage_error(cmd, "which topic? (cairn produce TOPIC < messages)");
  }
  if (p.key != NULL && p.key_sep_len > 0) {
    return cli_usage_error(cmd, "-k KEY (one key for every message) and -K SEP (a key in each "
                                "message) do not go together");
  }
  if (argc - first > 1) {
    return cli_usage_error(cmd, "one topic at a time: '%s' is extra (messages come from stdin)",
                           argv[first + 1]);
  }
  p.topic = argv[first];
  p.in = p.file != NULL ? fopen(p.file, "r") : stdin;
  if (p.in == NULL) {
    return cli_usage_error(cmd, "-f %s: %s", p.file, strerror(errno));
  }
  rv = produce_run(c, &p);
  if (p.in != stdin) {
    fclose(p.in);
  }
  return rv;
}

/* Connects, checks the topic, sends p->in's messages and reports. */
static int produce_run(struct cli *c, struct produce *pp)
{
  const char *cmd = "produce";
  struct produce p = *pp;
  int rv;
  if ((rv = cli_connect(c, cmd)) != CLI_OK) {
    return rv;
  }
  /* Ask first, so that a wrong topic or partition is said once, before
   * stdin is read, rather than once per message. */
  struct cairn_topic_info *t = NULL;
  rv = cli_describe_topic(c, p.topic, &t);
  if (rv != 0) {
    return cli_fail_call(c, cmd, p.topic, rv);
  }
  uint32_t nparts = t->partition_count;
  cairn_topic_info_free(t);
  if (p.partition >= (int64_t)nparts) {
    return cli_fail(cmd, "-p %" PRId64 ": topic %s has partitions 0..%" PRIu32, p.partition,
                    p.topic, nparts - 1);
  }
  struct cairn_producer_options po;
  cairn_producer_options_init(&po);
  po.compression = p.compression;
  p.max_bytes = po.max_batch_bytes;
  struct cairn_producer *pr = NULL;
  rv = cairn_sync_producer_new(c->sync, &po, &pr);
  if (rv != 0) {
    return cli_fail_call(c, cmd, "creating the producer", rv);
  }
  int send_rv = produce_read_and_send(c, &p, pr);
  rv = cairn_sync_flush(c->sync, pr);
  if (rv != 0) {
    cli_fail_call(c, cmd, "waiting for acknowledgements", rv);
  }
  cairn_sync_producer_close(c->sync, pr);
  produce_report(c, &p);
  free(p.parts);
  if (p.nomem) {
    return cli_fail(cmd, "out of memory while counting deliveries");
  }
  if (p.too_large > 0) {
    fprintf(stderr, "cairn produce: %" PRIu64 " message(s) above the limit were not sent\n",
            p.too_large);
  }
  if (p.sent > p.delivered) {
    fprintf(stderr, "cairn produce: %" PRIu64 " of %" PRIu64 " message(s) not acknowledged",
            p.sent - p.delivered, p.sent);
    if (p.first_error != 0) {
      /* Not exiting through cli_fail_call: its detail text belongs to the
       * last sync call, not to this delivery. */
      fprintf(stderr, "; the first error: %s\n",
              p.first_error_text[0] != '\0' ? p.first_error_text : cairn_strerror(p.first_error));
      if (p.first_error == CAIRN_EAUTHZ) {
        fprintf(stderr,
                "cairn produce: nothing refused was written: the cluster's ACLs do not let "
                "this user write to %s (`cairn acl add ... --operation write`)\n",
                p.topic);
      } else {
        fprintf(stderr,
                "cairn produce: messages not acknowledged may or may not have been "
                "written; check with `cairn consume %s -o beginning -e` and "
                "`cairn cluster status`\n",
                p.topic);
      }
    } else {
      fprintf(stderr, "\n");
    }
    return CLI_FAIL;
  }
  return send_rv == 0 && rv == 0 && p.too_large == 0 ? CLI_OK : CLI_FAIL;
}
