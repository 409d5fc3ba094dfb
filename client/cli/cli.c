/* cli.c - the parts every `cairn` command shares: common options, number
 * and escape parsing, error messages that say what to do, and the
 * connection to the cluster. See cli.h. */
#include "cli.h"
#include "probe.h"

#include <errno.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

const char cli_common_help[] =
    "common options (before or after the command):\n"
    "  -b, --bootstrap HOST:PORT[,HOST:PORT...]\n"
    "                     any node(s) of the cluster (default: $CAIRN_BOOTSTRAP,\n"
    "                     else " CLI_DEFAULT_BOOTSTRAP ")\n"
    "  --json             print JSON for scripts instead of tables\n"
    "  --timeout-ms N     give up on the cluster after N ms (default 10000)\n"
    "  --tls              speak TLS to nodes started with --tls-cert\n"
    "  --tls-ca FILE      PEM CAs the nodes' certificates must chain to (implies\n"
    "                     --tls; default: the system's CAs)\n"
    "  --tls-cert FILE, --tls-key FILE\n"
    "                     a client certificate and key (mutual TLS; implies --tls)\n"
    "  --user NAME        log in as NAME (SCRAM-SHA-256); the password comes from\n"
    "                     $CAIRN_PASSWORD\n"
    "  -h, --help         help for this command\n";

int cli_usage_error(const char *cmd, const char *fmt, ...)
{
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "cairn%s%s: ", cmd[0] != '\0' ? " " : "", cmd);
  vfprintf(stderr, fmt, ap);
  fprintf(stderr, "\n(see: cairn%s%s --help)\n", cmd[0] != '\0' ? " " : "", cmd);
  va_end(ap);
  return CLI_USAGE;
}

int cli_fail(const char *cmd, const char *fmt, ...)
{
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "cairn %s: ", cmd);
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
  return CLI_FAIL;
}

int cli_parse_u64(const char *cmd, const char *name, const char *s, uint64_t min, uint64_t max,
                  uint64_t *out)
{
  uint64_t v = 0;
  bool ok = s[0] != '\0';
  for (const char *p = s; ok && *p != '\0'; p++) {
    if (*p < '0' || *p > '9' || v > (UINT64_MAX - (uint64_t)(*p - '0')) / 10) {
      ok = false;
    } else {
      v = v * 10 + (uint64_t)(*p - '0');
    }
  }
  if (!ok) {
    cli_usage_error(cmd, "%s: '%s' is not a number (decimal digits only)", name, s);
    return -1;
  }
  if (v < min || v > max) {
    cli_usage_error(cmd, "%s: %s is out of range (%llu..%llu)", name, s, (unsigned long long)min,
                    (unsigned long long)max);
    return -1;
  }
  *out = v;
  return 0;
}

/* "-1h" and the like: ms before now, or -1. */
static int64_t cli_relative_ms(const char *s)
{
  if (s[0] != '-' || s[1] < '0' || s[1] > '9') {
    return -1;
  }
  char *end = NULL;
  errno = 0;
  unsigned long long n = strtoull(s + 1, &end, 10);
  static const struct {
    const char *unit;
    int64_t ms;
  } units[] = {{"ms", 1}, {"s", 1000}, {"m", 60000}, {"h", 3600000}, {"d", 86400000}};
  for (size_t i = 0; errno == 0 && i < sizeof units / sizeof units[0]; i++) {
    if (strcmp(end, units[i].unit) == 0 && n <= (unsigned long long)(INT64_MAX / units[i].ms)) {
      return (int64_t)n * units[i].ms;
    }
  }
  return -1;
}

/* ISO 8601: YYYY-MM-DD[THH:MM[:SS[.fff]]](Z|+HH:MM|-HH:MM), the time part
 * optional (midnight UTC). Returns 0 with *ms, or -1. */
static int cli_iso8601_ms(const char *s, int64_t *ms)
{
  struct tm tm = {0};
  int frac_ms = 0;
  const char *p = strptime(s, "%Y-%m-%d", &tm);
  if (p == NULL) {
    return -1;
  }
  if (*p == 'T' || *p == 't' || *p == ' ') {
    const char *q = strptime(p + 1, "%H:%M:%S", &tm);
    if (q == NULL) {
      q = strptime(p + 1, "%H:%M", &tm);
    }
    if (q == NULL) {
      return -1;
    }
    p = q;
    if (*p == '.') {
      int digits = 0;
      for (p++; *p >= '0' && *p <= '9'; p++, digits++) {
        if (digits < 3) {
          frac_ms = frac_ms * 10 + (*p - '0');
        }
      }
      for (; digits > 0 && digits < 3; digits++) {
        frac_ms *= 10;
      }
    }
  }
  int64_t offset_s = 0;
  if (*p == 'Z' || *p == 'z') {
    p++;
  } else if ((*p == '+' || *p == '-') && p[1] != '\0') {
    int hh = 0, mm = 0;
    if (sscanf(p + 1, "%2d:%2d", &hh, &mm) != 2 || strlen(p) != 6) {
      return -1;
    }
    offset_s = (int64_t)(hh * 3600 + mm * 60) * (*p == '+' ? 1 : -1);
    p += 6;
  } else if (strchr(s, 'T') != NULL || strchr(s, 't') != NULL) {
    return -1; /* a time without a zone is ambiguous: say Z */
  }
  if (*p != '\0') {
    return -1;
  }
  time_t t = timegm(&tm);
  if (t == (time_t)-1) {
    return -1;
  }
  *ms = ((int64_t)t - offset_s) * 1000 + frac_ms;
  return 0;
}

int cli_parse_time(const char *cmd, const char *name, const char *s, int64_t *ms)
{
  bool digits = s[0] != '\0';
  for (const char *p = s; *p != '\0'; p++) {
    digits = digits && *p >= '0' && *p <= '9';
  }
  if (digits) {
    uint64_t v;
    if (cli_parse_u64(cmd, name, s, 0, INT64_MAX, &v) != 0) {
      return -1;
    }
    *ms = (int64_t)v;
    return 0;
  }
  int64_t ago = cli_relative_ms(s);
  if (ago >= 0) {
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    *ms = (int64_t)now.tv_sec * 1000 + now.tv_nsec / 1000000 - ago;
    return 0;
  }
  if (cli_iso8601_ms(s, ms) == 0) {
    return 0;
  }
  cli_usage_error(cmd,
                  "%s: '%s' is not a time: give epoch ms (1764547200000), ISO 8601 "
                  "(2026-12-01T00:00:00Z, 2026-12-01T01:00:00+01:00, 2026-12-01) or a time "
                  "before now (-1h, -30m, -90s, -2d)",
                  name, s);
  return -1;
}

int cli_common_opt(struct cli *c, const char *cmd, int o, const char *arg)
{
  switch (o) {
  case 'b':
    if (arg[0] == '\0') {
      cli_usage_error(cmd, "-b needs HOST:PORT[,HOST:PORT...]");
      return -1;
    }
    c->bootstrap = arg;
    return 1;
  case CLI_OPT_JSON:
    c->json = true;
    return 1;
  case CLI_OPT_TLS:
    c->tls = true;
    return 1;
  case CLI_OPT_USER:
    c->user = arg;
    return 1;
  case CLI_OPT_TLS_CA:
  case CLI_OPT_TLS_CERT:
  case CLI_OPT_TLS_KEY:
    c->tls = true;
    *(o == CLI_OPT_TLS_CA ? &c->tls_ca : o == CLI_OPT_TLS_CERT ? &c->tls_cert : &c->tls_key) = arg;
    return 1;
  case CLI_OPT_TIMEOUT: {
    uint64_t v;
    if (cli_parse_u64(cmd, "--timeout-ms", arg, 1, 86400000, &v) != 0) {
      return -1;
    }
    c->timeout_ms = (uint32_t)v;
    return 1;
  }
  default:
    return 0;
  }
}

int cli_unescape(const char *cmd, const char *name, const char *s, char *out, size_t *len)
{
  size_t n = 0;
  for (const char *p = s; *p != '\0'; p++) {
    if (*p != '\\') {
      out[n++] = *p;
      continue;
    }
    p++;
    switch (*p) {
    case 'n':
      out[n++] = '\n';
      break;
    case 't':
      out[n++] = '\t';
      break;
    case 'r':
      out[n++] = '\r';
      break;
    case '0':
      out[n++] = '\0';
      break;
    case '\\':
      out[n++] = '\\';
      break;
    case 'x': {
      int v = 0;
      for (int k = 1; k <= 2; k++) {
        char h = p[k];
        int d = h >= '0' && h <= '9'   ? h - '0'
                : h >= 'a' && h <= 'f' ? h - 'a' + 10
                : h >= 'A' && h <= 'F' ? h - 'A' + 10
                                       : -1;
        if (d < 0) {
          cli_usage_error(cmd, "%s: \\x needs two hex digits, as in \\x1f", name);
          return -1;
        }
        v = v * 16 + d;
      }
      out[n++] = (char)v;
      p += 2;
      break;
    }
    case '\0':
      cli_usage_error(cmd, "%s: a lone \\ at the end (write \\\\ for a backslash)", name);
      return -1;
    default:
      cli_usage_error(cmd, "%s: unknown escape \\%c (known: \\n \\t \\r \\0 \\\\ \\xHH)", name, *p);
      return -1;
    }
  }
  *len = n;
  return 0;
}

/* What a user can do about a failed call of cmd: one line, or NULL. */
static const char *cli_hint(const char *cmd, int rv)
{
  switch (rv) {
  case CAIRN_EUNREACHABLE:
    return "is the cluster running and is the address right? Give any node with "
           "-b HOST:PORT or CAIRN_BOOTSTRAP; a local cluster starts with "
           "`bash deploy/cluster.sh start`";
  case CAIRN_EUNKNOWN_TOPIC:
    if (strcmp(cmd, "topic delete") == 0) {
      return "`cairn topic list` shows the topics";
    }
    return "`cairn topic list` shows the topics; create one with "
           "`cairn topic create NAME --partitions N --replication-factor R`";
  case CAIRN_EUNKNOWN_PARTITION:
    return "`cairn topic describe TOPIC` shows its partitions";
  case CAIRN_ECORRUPT:
    if (strcmp(cmd, "consume") == 0) {
      return "the batch at that offset cannot be decoded (for example a Kafka producer's "
             "compressed records that do not decompress); the broker stored it as sent. "
             "-o OFFSET past it reads on";
    }
    return NULL;
  case CAIRN_ETOPIC_EXISTS:
    return "`cairn topic describe NAME` shows it; delete it first to recreate it";
  case CAIRN_EINTERNAL_TOPIC:
    return "topics whose names start with __ belong to the cluster (__cairn_offsets holds the "
           "consumer groups' offsets: `cairn group` manages them)";
  case CAIRN_EPOLICY:
    return "a node of a release before 2026-12-06 refuses to delete records of a postgresql "
           "topic: upgrade it";
  case CAIRN_EINVALID_CONFIG:
    return "`cairn topic describe TOPIC` shows the configuration; retention.ms and "
           "retention.bytes change on a running topic (-1: no limit)";
  case CAIRN_EINVALID_RF:
    if (strcmp(cmd, "node decommission") == 0) {
      return "`cairn topic describe TOPIC` shows where those partitions live; add a node "
             "(cairnd --join) so that they have somewhere to go";
    }
    return "the replication factor must be at most the number of alive nodes, and a "
           "postgresql topic's at most the number of alive nodes with a database "
           "(DATABASE yes in `cairn cluster status`)";
  case CAIRN_ENOT_CONTROLLER:
    return "the cluster has no controller leader: a majority of its voters must be up "
           "(`cairn cluster status`); retry in a moment";
  case CAIRN_EDELIVERY_TIMEOUT:
  case CAIRN_EREQUEST_TIMEOUT:
  case UV_ETIMEDOUT:
    return "the cluster did not answer in time: check it with `cairn cluster status`, or "
           "give it longer with --timeout-ms";
  case CAIRN_EUNKNOWN_NODE:
    return "`cairn cluster status` lists the node ids";
  case CAIRN_ETOOLARGE:
    return "a message is larger than the largest batch the producer sends (1 MiB)";
  case CAIRN_EAUTHZ:
    return "the cluster's ACLs do not allow it: a super-user can grant it with "
           "`cairn acl add` (`cairn acl list` shows the entries); log in with --user";
  default:
    return NULL;
  }
}

int cli_fail_call(struct cli *c, const char *cmd, const char *what, int rv)
{
  const char *detail = c->sync != NULL ? cairn_sync_errmsg(c->sync) : "";
  const char *text = cairn_strerror(rv);
  /* The library's text often is, or starts with, the code's own ("topic
   * already exists: create topic t: it exists"): say it once. */
  if (detail != NULL && detail[0] != '\0' && strstr(detail, text) != NULL) {
    fprintf(stderr, "cairn %s: %s: %s", cmd, what, detail);
  } else {
    fprintf(stderr, "cairn %s: %s: %s", cmd, what, text);
    if (detail != NULL && detail[0] != '\0') {
      fprintf(stderr, " (%s)", detail);
    }
  }
  fputc('\n', stderr);
  const char *hint = cli_hint(cmd, rv);
  if (hint != NULL) {
    fprintf(stderr, "cairn %s: %s\n", cmd, hint);
  }
  return CLI_FAIL;
}

/* Checks the shape of a bootstrap list before anything is dialed, so that
 * a typo is a usage error, not a timeout: HOST:PORT entries (HOST not
 * empty, [v6] allowed) with PORT 1..65535, separated by commas. */
static bool cli_bootstrap_ok(const char *list)
{
  const char *p = list;
  for (;;) {
    const char *end = strchr(p, ',');
    size_t len = end != NULL ? (size_t)(end - p) : strlen(p);
    const char *colon = NULL;
    for (size_t i = 0; i < len; i++) {
      if (p[i] == ':') {
        colon = p + i; /* the last one: [::1]:7400 */
      }
    }
    if (colon == NULL || colon == p || colon == p + len - 1) {
      return false;
    }
    unsigned long port = 0;
    for (const char *q = colon + 1; q < p + len; q++) {
      if (*q < '0' || *q > '9' || port > 65535) {
        return false;
      }
      port = port * 10 + (unsigned long)(*q - '0');
    }
    if (port == 0 || port > 65535) {
      return false;
    }
    if (end == NULL) {
      return true;
    }
    p = end + 1;
  }
}

/* After a failed connection: if an address of the list speaks HTTP, it is
 * a node's admin port; says so and returns true. */
static bool cli_admin_port_hint(const char *cmd, const char *list)
{
  for (const char *p = list; *p != '\0';) {
    size_t len = strcspn(p, ",");
    char addr[300];
    if (len < sizeof addr) {
      memcpy(addr, p, len);
      addr[len] = '\0';
      if (probe_is_http(addr, 1000)) {
        fprintf(stderr,
                "cairn %s: %s answers HTTP: it is a node's admin port (status page, /metrics), "
                "not its client port; give the client port (--listen of cairnd; with "
                "deploy/cluster.sh the admin port is the client port + 2)\n",
                cmd, addr);
        return true;
      }
    }
    p += len + (p[len] == ',');
  }
  return false;
}

int cli_connect(struct cli *c, const char *cmd)
{
  if (!cli_bootstrap_ok(c->bootstrap)) {
    fprintf(stderr,
            "cairn %s: bootstrap list '%s' is not HOST:PORT[,HOST:PORT...] (ports 1..65535), "
            "e.g. -b 127.0.0.1:7400\n",
            cmd, c->bootstrap);
    return CLI_USAGE;
  }
  struct cairn_options o;
  cairn_options_init(&o);
  o.client_id = "cairn-cli";
  o.request_timeout_ms = c->timeout_ms;
  o.delivery_timeout_ms = c->timeout_ms;
  o.fail_fast_refused = 1; /* refused everywhere: say so now, not after the timeout */
  if ((c->tls_cert != NULL) != (c->tls_key != NULL)) {
    return cli_usage_error(cmd, "--tls-cert and --tls-key go together");
  }
  o.tls = c->tls;
  if (c->user != NULL) {
    const char *pw = getenv("CAIRN_PASSWORD");
    if (pw == NULL) {
      return cli_usage_error(cmd, "--user needs the password in $CAIRN_PASSWORD");
    }
    o.user = c->user;
    o.password = pw;
  }
  o.tls_ca_file = c->tls_ca;
  o.tls_cert_file = c->tls_cert;
  o.tls_key_file = c->tls_key;
  if (o.connect_timeout_ms > c->timeout_ms) {
    o.connect_timeout_ms = c->timeout_ms;
  }
  char errmsg[512] = "";
  int rv = cairn_sync_new(c->bootstrap, &o, &c->sync, errmsg, sizeof errmsg);
  if (rv == 0) {
    return CLI_OK;
  }
  c->sync = NULL;
  if (rv == CAIRN_ETLS) {
    fprintf(stderr, "cairn %s: TLS settings: %s\n", cmd,
            errmsg[0] != '\0' ? errmsg : "a CA, certificate or key file does not load");
    return CLI_USAGE;
  }
  if (rv == CAIRN_EINVAL) {
    fprintf(stderr, "cairn %s: bootstrap list '%s' is not HOST:PORT[,HOST:PORT...]%s%s\n", cmd,
            c->bootstrap, errmsg[0] != '\0' ? ": " : "", errmsg);
    return CLI_USAGE;
  }
  if (errmsg[0] != '\0') {
    fprintf(stderr, "cairn %s: could not reach any node of %s: %s\n", cmd, c->bootstrap, errmsg);
  } else {
    fprintf(stderr, "cairn %s: could not reach any node of %s within %u ms: %s\n", cmd,
            c->bootstrap, c->timeout_ms, cairn_strerror(rv));
  }
  if (cli_admin_port_hint(cmd, c->bootstrap)) {
    return CLI_FAIL;
  }
  const char *hint = cli_hint(cmd, CAIRN_EUNREACHABLE);
  fprintf(stderr, "cairn %s: %s\n", cmd, hint);
  return CLI_FAIL;
}

int cli_opt_error(const char *cmd, int o, char **argv)
{
  const char *arg = argv[optind - 1];
  if (o == ':') {
    return cli_usage_error(cmd, "%s needs a value", arg);
  }
  if (optopt != 0) {
    return cli_usage_error(cmd, "unknown option -%c", optopt);
  }
  return cli_usage_error(cmd, "unknown option '%s'", arg);
}

/* getopt_long takes any unambiguous prefix of a long option ("--key" for
 * "--key-separator"), so that adding an option would silently change what
 * an old command line means. Returns true if the long option just parsed
 * (the table entry opt, its text at argv[optind-1], or argv[optind-2] when
 * its value was the next word) was spelled out in full. */
static bool cli_long_exact(const struct option *opt, char **argv)
{
  const char *text = argv[optind - 1];
  if (opt->has_arg != no_argument && optarg == text && optind >= 2) {
    text = argv[optind - 2];
  }
  if (strncmp(text, "--", 2) != 0) {
    return true; /* a short option */
  }
  size_t len = strcspn(text + 2, "=");
  return strlen(opt->name) == len && strncmp(opt->name, text + 2, len) == 0;
}

int cli_getopt(struct cli *c, const char *cmd, int argc, char **argv, const char *own_short,
               const struct option *own, cli_opt_fn on_opt, void *ctx, void (*help)(FILE *),
               int *first)
{
  struct option all[CLI_MAX_OPTS + CLI_COMMON_COUNT + 1] = {CLI_COMMON_LONG};
  size_t n = CLI_COMMON_COUNT;
  for (size_t k = 0; own != NULL && own[k].name != NULL; k++) {
    if (n >= CLI_MAX_OPTS + CLI_COMMON_COUNT) {
      abort(); /* a command with more options than CLI_MAX_OPTS: a programming error */
    }
    all[n++] = own[k];
  }
  all[n] = (struct option){NULL, 0, NULL, 0};
  char shorts[64];
  snprintf(shorts, sizeof shorts, "%s%s", CLI_COMMON_SHORT, own_short != NULL ? own_short : "");
  opterr = 0;
  optind = 0; /* glibc: start over (each command parses once) */
  int o;
  int li = -1;
  while ((o = getopt_long(argc, argv, shorts, all, &li)) != -1) {
    if (li >= 0 && o != '?' && o != ':' && !cli_long_exact(&all[li], argv)) {
      const char *text = argv[optind - 1];
      if (all[li].has_arg != no_argument && optarg == text && optind >= 2) {
        text = argv[optind - 2];
      }
      return cli_usage_error(cmd, "unknown option '%.*s' (long options are matched exactly: "
                                  "did you mean --%s?)",
                             (int)strcspn(text, "="), text, all[li].name);
    }
    li = -1;
    if (o == 'h') {
      help(stdout);
      return CLI_HELP_DONE;
    }
    if (o == '?' || o == ':') {
      return cli_opt_error(cmd, o, argv);
    }
    int r = cli_common_opt(c, cmd, o, optarg);
    if (r < 0) {
      return CLI_USAGE;
    }
    if (r == 0) {
      int rv = on_opt != NULL ? on_opt(ctx, o, optarg) : CLI_USAGE;
      if (rv != CLI_OK) {
        return rv;
      }
    }
  }
  *first = optind;
  return CLI_OK;
}

int cli_describe_topic(struct cli *c, const char *name, struct cairn_topic_info **out)
{
  struct timespec start, now;
  clock_gettime(CLOCK_MONOTONIC, &start);
  uint32_t settle = c->timeout_ms < CLI_TOPIC_SETTLE_MS ? c->timeout_ms : CLI_TOPIC_SETTLE_MS;
  for (;;) {
    int rv = cairn_sync_describe_topic(c->sync, name, out);
    if (rv != CAIRN_EUNKNOWN_TOPIC) {
      return rv;
    }
    clock_gettime(CLOCK_MONOTONIC, &now);
    int64_t ms =
        (int64_t)(now.tv_sec - start.tv_sec) * 1000 + (now.tv_nsec - start.tv_nsec) / 1000000;
    if (ms + CLI_TOPIC_RETRY_MS > (int64_t)settle) {
      return rv;
    }
    struct timespec d = {.tv_sec = 0, .tv_nsec = CLI_TOPIC_RETRY_MS * 1000000L};
    nanosleep(&d, NULL);
  }
}

void cli_close(struct cli *c)
{
  cairn_sync_free(c->sync);
  c->sync = NULL;
}
