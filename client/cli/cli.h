/* cli.h - what the `cairn` command's parts share: the global options,
 * argument helpers, the connection to the cluster (libcairn's blocking
 * API) and the command groups' entry points.
 *
 * Exit codes of every command: CLI_OK (0), CLI_FAIL (1: the cluster said
 * no, could not be reached, or a message failed) and CLI_USAGE (2: the
 * command line is wrong; nothing was sent). Context: one thread. */
#ifndef CAIRN_CLI_H
#define CAIRN_CLI_H

#include <cairn/cairn.h>

#include <getopt.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#define CLI_OK 0
#define CLI_FAIL 1
#define CLI_USAGE 2

#define CLI_DEFAULT_BOOTSTRAP "127.0.0.1:7400"
#define CLI_DEFAULT_TIMEOUT_MS 10000

/* Options every command takes, before or after its own. */
struct cli {
  const char *bootstrap;   /* -b, else $CAIRN_BOOTSTRAP, else the default */
  uint32_t timeout_ms;     /* --timeout-ms */
  bool json;               /* --json */
  struct cairn_sync *sync; /* the cluster, once cli_connect() succeeded */
  bool tls;                /* --tls (implied by the three below) */
  const char *tls_ca;      /* --tls-ca FILE: CAs the nodes' certificates chain to */
  const char *tls_cert;    /* --tls-cert FILE: client certificate (mutual TLS) */
  const char *tls_key;     /* --tls-key FILE: its key */
  const char *user;        /* --user NAME: log in (password: $CAIRN_PASSWORD) */
};

/* The common options as getopt_long entries (long names only, plus -b):
 * each command's table starts with these. CLI_COMMON_SHORT is their
 * short-option string (it starts with ':' so that a missing value is told
 * apart from an unknown option). */
#define CLI_OPT_JSON 1000
#define CLI_OPT_TIMEOUT 1001
#define CLI_OPT_TLS 1002
#define CLI_OPT_TLS_CA 1003
#define CLI_OPT_TLS_CERT 1004
#define CLI_OPT_TLS_KEY 1005
#define CLI_OPT_USER 1006
#define CLI_COMMON_COUNT 9 /* entries in CLI_COMMON_LONG */
#define CLI_COMMON_SHORT ":b:h"
#define CLI_COMMON_LONG                                                                            \
  {"bootstrap", required_argument, NULL, 'b'}, {"json", no_argument, NULL, CLI_OPT_JSON},          \
      {"timeout-ms", required_argument, NULL, CLI_OPT_TIMEOUT},                                    \
      {"tls", no_argument, NULL, CLI_OPT_TLS},                                                     \
      {"tls-ca", required_argument, NULL, CLI_OPT_TLS_CA},                                         \
      {"tls-cert", required_argument, NULL, CLI_OPT_TLS_CERT},                                     \
      {"tls-key", required_argument, NULL, CLI_OPT_TLS_KEY},                                       \
      {"user", required_argument, NULL, CLI_OPT_USER},                                             \
  {                                                                                                \
    "help", no_argument, NULL, 'h'                                                                 \
  }

#define CLI_MAX_OPTS 16
#define CLI_HELP_DONE (-1)

/* A command's handler for one of its own options (o as getopt_long
 * returns it, arg its value or NULL): CLI_OK or CLI_USAGE (after printing
 * why). */
typedef int (*cli_opt_fn)(void *ctx, int o, const char *arg);

/* Parses a command's argv (argv[0] is the command's own word) with
 * getopt_long, options and operands in any order: the common options go
 * to c, the command's own (own_short, own: at most CLI_MAX_OPTS, may be
 * NULL) to on_opt. Returns CLI_OK with the operands in argv[*first ..
 * argc), CLI_HELP_DONE after printing help(stdout) for -h/--help, or
 * CLI_USAGE after printing what is wrong. */
__attribute__((warn_unused_result)) int cli_getopt(struct cli *c, const char *cmd, int argc,
                                                   char **argv, const char *own_short,
                                                   const struct option *own, cli_opt_fn on_opt,
                                                   void *ctx, void (*help)(FILE *), int *first);

/* Text about the common options, for every --help. */
extern const char cli_common_help[];

/* Handles one common option o (with optarg). Returns 1 if it was one and
 * was fine, 0 if o is not a common option, or -1 after printing what is
 * wrong with its value. 'h' is left to the caller (each prints its own
 * help). */
__attribute__((warn_unused_result)) int cli_common_opt(struct cli *c, const char *cmd, int o,
                                                       const char *arg);

/* For getopt_long's '?' (unknown option) and ':' (a value missing), with
 * opterr 0: prints which and returns CLI_USAGE. */
int cli_opt_error(const char *cmd, int o, char **argv);

/* Prints "cairn CMD: <message>" and a hint to run CMD --help to stderr;
 * returns CLI_USAGE. */
int cli_usage_error(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Prints "cairn CMD: <message>" to stderr; returns CLI_FAIL. */
int cli_fail(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* The message for a failed libcairn call: cairn_strerror(rv), the
 * library's text when it adds something, and what to do about it.
 * Prints "cairn CMD: WHAT: ..." and returns CLI_FAIL. */
int cli_fail_call(struct cli *c, const char *cmd, const char *what, int rv);

/* Parses decimal digits into [min, max]; prints the reason and returns -1
 * if s is not such a number. name is the option's name for the message. */
__attribute__((warn_unused_result)) int cli_parse_u64(const char *cmd, const char *name,
                                                      const char *s, uint64_t min, uint64_t max,
                                                      uint64_t *out);

/* Parses a point in time into ms since the epoch: decimal epoch ms
 * ("1764547200000"), ISO 8601 UTC or with an offset
 * ("2026-12-01T00:00:00Z", "2026-12-01T01:00:00.250+01:00",
 * "2026-12-01" for midnight UTC), or relative to now ("-1h", "-30m",
 * "-90s", "-2d", "-500ms"). Prints the reason (with cmd and name) and
 * returns -1 if s is none of these. */
__attribute__((warn_unused_result)) int cli_parse_time(const char *cmd, const char *name,
                                                       const char *s, int64_t *ms);

/* Connects to the cluster (cairn_sync_new with the options' timeouts).
 * Returns CLI_OK with c->sync set, or prints why not and returns
 * CLI_FAIL. */
__attribute__((warn_unused_result)) int cli_connect(struct cli *c, const char *cmd);

/* cairn_sync_describe_topic, except that CAIRN_EUNKNOWN_TOPIC is retried
 * for up to CLI_TOPIC_SETTLE_MS (bounded by the timeout): a topic created
 * a moment ago is known to the controller leader first and to the other
 * nodes, which may answer, after they apply it. Same results. */
#define CLI_TOPIC_SETTLE_MS 2000
#define CLI_TOPIC_RETRY_MS 100
__attribute__((warn_unused_result)) int cli_describe_topic(struct cli *c, const char *name,
                                                           struct cairn_topic_info **out);

/* Frees c->sync. */
void cli_close(struct cli *c);

/* Turns the escapes \n \t \r \0 \\ \xHH in s into bytes, in place-free
 * fashion: writes at most strlen(s) bytes to out, sets *len. Returns 0 or
 * -1 (an unknown escape or a cut \x; printed with cmd and name). */
__attribute__((warn_unused_result)) int cli_unescape(const char *cmd, const char *name,
                                                     const char *s, char *out, size_t *len);

struct oj;
struct tbl;

/* "1,2,3" (or "-" for none) into buf of n bytes. */
void cli_id_list(char *buf, size_t n, const uint64_t *ids, size_t count);
/* v in decimal, "?" when negative (unknown). */
void cli_offset_str(char *buf, size_t n, int64_t v);
/* A topic as a JSON object (name, ids, counts, config; its partitions
 * with leader, replicas, isr, watermarks when with_partitions). */
void cli_json_topic(struct oj *j, const struct cairn_topic_info *t, bool with_partitions);
/* One row per partition of t into tb, whose columns are [TOPIC,]
 * PARTITION, LEADER, REPLICAS, IN-SYNC, LOG-START, HIGH-WATERMARK.
 * Returns 0 or -ENOMEM. */
int cli_partition_rows(struct tbl *tb, const struct cairn_topic_info *t, bool with_topic);
/* The replicas of topics[0..ntopics) whose store failed, on any node, as a
 * table after a blank line and a heading (TOPIC, PARTITION, NODE, SINCE,
 * REASON); nothing when none. Returns 0 or -ENOMEM. */
int cli_store_failures_print(const struct cairn_topic_info *topics, size_t ntopics);

/* The command groups: argv[0] is the group's word ("topic", "produce"...).
 * Each returns an exit code. */
int cli_topic(struct cli *c, int argc, char **argv);
int cli_produce(struct cli *c, int argc, char **argv);
int cli_consume(struct cli *c, int argc, char **argv);
int cli_cluster(struct cli *c, int argc, char **argv);
int cli_node(struct cli *c, int argc, char **argv);
/* user.c: `cairn user create|delete|list`. */
int cli_user(struct cli *c, int argc, char **argv);
int cli_acl(struct cli *c, int argc, char **argv);
/* group.c: `cairn group ...`, and `cairn consume -g GROUP` (cli_consume
 * hands a command line with -g/--group to cli_group_consume). */
int cli_group(struct cli *c, int argc, char **argv);
int cli_group_consume(struct cli *c, int argc, char **argv);
/* group_reset.c: `cairn group reset-offsets`, `cairn group delete`,
 * `cairn group delete-offsets` and `cairn group remove-member` (argv[0] is
 * the subcommand's word; help prints group's help). */
int cli_group_reset(struct cli *c, int argc, char **argv, void (*help)(FILE *));
int cli_group_delete(struct cli *c, int argc, char **argv, void (*help)(FILE *));
int cli_group_delete_offsets(struct cli *c, int argc, char **argv, void (*help)(FILE *));
int cli_group_remove_member(struct cli *c, int argc, char **argv, void (*help)(FILE *));

#endif
