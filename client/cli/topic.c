/* topic.c - `cairn topic create|list|describe|delete|add-partitions|alter-config|
 * delete-records`,
 * and how a topic and
 * its partitions are printed (also by `cairn cluster status`). */
#include "cli.h"
#include "output.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define TOPIC_NAME_MAX 249 /* the controller's bound (cluster/meta_state.h) */
#define TOPIC_MAX_PARTITIONS 10000
#define TOPIC_MAX_RF 7

static void topic_help(FILE *out)
{
  fprintf(out,
          "usage: cairn topic create NAME --partitions N --replication-factor R\n"
          "       cairn topic list\n"
          "       cairn topic describe NAME\n"
          "       cairn topic delete NAME\n"
          "       cairn topic add-partitions NAME --partitions N\n"
          "       cairn topic alter-config NAME --set KEY=VALUE [--set ...] [--delete KEY]\n"
          "       cairn topic delete-records NAME --offset N|end [--partition P]\n"
          "\n"
          "  create     a topic of N partitions (1..%d), each replicated on R nodes\n"
          "             (1..%d, at most the alive nodes); NAME is 1..%d of\n"
          "             A-Z a-z 0-9 . _ - (not . or ..)\n"
          "  list       every topic: name, partitions, replication factor\n"
          "  describe   one topic's partitions: leader, replicas, in-sync replicas,\n"
          "             log start and high watermark\n"
          "  delete     remove a topic and its data on every node\n"
          "  add-partitions\n"
          "             grow a topic to N partitions in all (a total, as rpk and\n"
          "             kafka-topics take it); partitions are never removed, and keys\n"
          "             hash to other partitions afterwards\n"
          "  alter-config\n"
          "             change a running topic's configuration, all keys or none:\n"
          "             -s, --set KEY=VALUE sets a key, -d, --delete KEY puts it back to\n"
          "             its default; retention.ms and retention.bytes (-1: no limit)\n"
          "             apply on every replica at its next retention pass\n"
          "  delete-records\n"
          "             delete every record below offset N (end: the high watermark)\n"
          "             of partition P, or of every partition, on every replica: the\n"
          "             log start moves to N (Kafka's kafka-delete-records)\n"
          "\n"
          "create options:\n"
          "  -P, --partitions N             partition count (required)\n"
          "  -r, --replication-factor R     replicas per partition (required)\n"
          "  --retention-ms N, --retention-bytes N\n"
          "                                 delete old data past this (default: keep all)\n"
          "  --segment-bytes N              roll the partitions' log files at N bytes\n"
          "                                 (retention deletes whole files; default 128 MiB)\n"
          "  --storage KIND                 where the partitions keep their log: file\n"
          "                                 (default) or postgresql (nodes with --pg-conninfo)\n"
          "\n"
          "%s",
          TOPIC_MAX_PARTITIONS, TOPIC_MAX_RF, TOPIC_NAME_MAX, cli_common_help);
}

void cli_id_list(char *buf, size_t n, const uint64_t *ids, size_t count)
{
  size_t off = 0;
  buf[0] = '\0';
  for (size_t i = 0; i < count && off < n; i++) {
    off += (size_t)snprintf(buf + off, n - off, "%s%" PRIu64, i > 0 ? "," : "", ids[i]);
  }
  if (count == 0) {
    snprintf(buf, n, "-");
  }
}

void cli_offset_str(char *buf, size_t n, int64_t v)
{
  if (v < 0) {
    snprintf(buf, n, "?");
  } else {
    snprintf(buf, n, "%" PRId64, v);
  }
}

static void topic_json_ids(struct oj *j, const uint64_t *ids, size_t count)
{
  oj_array_begin(j);
  for (size_t i = 0; i < count; i++) {
    oj_uint(j, ids[i]);
  }
  oj_array_end(j);
}

void cli_json_topic(struct oj *j, const struct cairn_topic_info *t, bool with_partitions)
{
  oj_object_begin(j);
  oj_key(j, "name");
  oj_str(j, t->name);
  oj_key(j, "topic_id");
  oj_uint(j, t->topic_id);
  oj_key(j, "partition_count");
  oj_uint(j, t->partition_count);
  oj_key(j, "replication_factor");
  oj_uint(j, t->replication_factor);
  oj_key(j, "config");
  oj_object_begin(j);
  oj_key(j, "retention_bytes");
  oj_int(j, t->config.retention_bytes);
  oj_key(j, "retention_ms");
  oj_int(j, t->config.retention_ms);
  oj_key(j, "segment_bytes");
  oj_uint(j, t->config.segment_bytes);
  oj_key(j, "max_batch_bytes");
  oj_uint(j, t->config.max_batch_bytes);
  oj_key(j, "storage");
  oj_str(j, t->config.storage[0] != '\0' ? t->config.storage : "file");
  oj_object_end(j);
  if (with_partitions) {
    oj_key(j, "partitions");
    oj_array_begin(j);
    for (size_t i = 0; i < t->partition_info_count; i++) {
      const struct cairn_partition_info *p = &t->partitions[i];
      oj_object_begin(j);
      oj_key(j, "partition");
      oj_uint(j, p->partition);
      oj_key(j, "leader_id");
      oj_uint(j, p->leader_id);
      oj_key(j, "leader_term");
      oj_uint(j, p->leader_term);
      oj_key(j, "replicas");
      topic_json_ids(j, p->replicas, p->replica_count);
      oj_key(j, "isr");
      topic_json_ids(j, p->isr, p->isr_count);
      oj_key(j, "log_start_offset");
      oj_int(j, p->log_start_offset);
      oj_key(j, "high_watermark");
      oj_int(j, p->high_watermark);
      oj_key(j, "store_failures");
      oj_array_begin(j);
      for (size_t k = 0; k < p->store_failure_count; k++) {
        const struct cairn_store_failure *sf = &p->store_failures[k];
        oj_object_begin(j);
        oj_key(j, "node_id");
        oj_uint(j, sf->node_id);
        oj_key(j, "reason");
        oj_str(j, sf->reason);
        oj_key(j, "since_ms");
        oj_uint(j, sf->since_ms);
        oj_object_end(j);
      }
      oj_array_end(j);
      oj_object_end(j);
    }
    oj_array_end(j);
  }
  oj_object_end(j);
}

int cli_partition_rows(struct tbl *tb, const struct cairn_topic_info *t, bool with_topic)
{
  for (size_t i = 0; i < t->partition_info_count; i++) {
    const struct cairn_partition_info *p = &t->partitions[i];
    char part[16], leader[24], reps[160], isr[160], start[24], hw[24];
    snprintf(part, sizeof part, "%" PRIu32, p->partition);
    if (p->leader_id == 0) {
      snprintf(leader, sizeof leader, "none");
    } else {
      snprintf(leader, sizeof leader, "%" PRIu64, p->leader_id);
    }
    cli_id_list(reps, sizeof reps, p->replicas, p->replica_count);
    cli_id_list(isr, sizeof isr, p->isr, p->isr_count);
    cli_offset_str(start, sizeof start, p->log_start_offset);
    cli_offset_str(hw, sizeof hw, p->high_watermark);
    const char *with[] = {t->name, part, leader, reps, isr, start, hw};
    int rv = tbl_row(tb, with_topic ? with : with + 1);
    if (rv != 0) {
      return rv;
    }
  }
  return 0;
}

/* The controller's rule, checked here so a typo is told at once. */
static bool topic_name_ok(const char *s)
{
  size_t n = strlen(s);
  if (n == 0 || n > TOPIC_NAME_MAX || strcmp(s, ".") == 0 || strcmp(s, "..") == 0) {
    return false;
  }
  for (size_t i = 0; i < n; i++) {
    char ch = s[i];
    bool ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
              ch == '.' || ch == '_' || ch == '-';
    if (!ok) {
      return false;
    }
  }
  return true;
}

struct topic_create_opts {
  uint64_t partitions;
  uint64_t rf;
  struct cairn_topic_config cfg;
};

#define TOPIC_OPT_RET_MS 2000
#define TOPIC_OPT_RET_BYTES 2001
#define TOPIC_OPT_STORAGE 2002
#define TOPIC_OPT_SEGMENT 2003

static int topic_create_opt(void *ctx, int o, const char *arg)
{
  struct topic_create_opts *t = ctx;
  const char *cmd = "topic create";
  uint64_t v;
  switch (o) {
  case 'P':
    return cli_parse_u64(cmd, "--partitions", arg, 1, TOPIC_MAX_PARTITIONS, &t->partitions) == 0
               ? CLI_OK
               : CLI_USAGE;
  case 'r':
    return cli_parse_u64(cmd, "--replication-factor", arg, 1, TOPIC_MAX_RF, &t->rf) == 0
               ? CLI_OK
               : CLI_USAGE;
  case TOPIC_OPT_RET_MS:
  case TOPIC_OPT_RET_BYTES:
    if (cli_parse_u64(cmd, o == TOPIC_OPT_RET_MS ? "--retention-ms" : "--retention-bytes", arg, 0,
                      INT64_MAX, &v) != 0) {
      return CLI_USAGE;
    }
    if (o == TOPIC_OPT_RET_MS) {
      t->cfg.retention_ms = (int64_t)v;
    } else {
      t->cfg.retention_bytes = (int64_t)v;
    }
    return CLI_OK;
  case TOPIC_OPT_SEGMENT:
    /* Retention deletes whole segments but the newest: smaller ones let
     * it delete in smaller steps. */
    return cli_parse_u64(cmd, "--segment-bytes", arg, 4096, (uint64_t)1 << 31,
                         &t->cfg.segment_bytes) == 0
               ? CLI_OK
               : CLI_USAGE;
  case TOPIC_OPT_STORAGE:
    if (strcmp(arg, "file") != 0 && strcmp(arg, "postgresql") != 0) {
      return cli_usage_error(cmd, "--storage must be file or postgresql");
    }
    snprintf(t->cfg.storage, sizeof t->cfg.storage, "%s", arg);
    return CLI_OK;
  default:
    return cli_usage_error(cmd, "unexpected option");
  }
}

/* The operands of a command that takes exactly one NAME. */
static int topic_one_name(const char *cmd, int argc, char **argv, int first, const char **name)
{
  if (first >= argc) {
    return cli_usage_error(cmd, "which topic? (cairn %s NAME)", cmd);
  }
  if (argc - first > 1) {
    return cli_usage_error(cmd, "one topic at a time: '%s' is extra", argv[first + 1]);
  }
  *name = argv[first];
  return CLI_OK;
}

static int topic_create(struct cli *c, int argc, char **argv)
{
  const char *cmd = "topic create";
  static const struct option own[] = {
      {"partitions", required_argument, NULL, 'P'},
      {"replication-factor", required_argument, NULL, 'r'},
      {"retention-ms", required_argument, NULL, TOPIC_OPT_RET_MS},
      {"retention-bytes", required_argument, NULL, TOPIC_OPT_RET_BYTES},
      {"storage", required_argument, NULL, TOPIC_OPT_STORAGE},
      {"segment-bytes", required_argument, NULL, TOPIC_OPT_SEGMENT},
      {NULL, 0, NULL, 0}};
  struct topic_create_opts t = {0};
  int first;
  int rv = cli_getopt(c, cmd, argc, argv, "P:r:", own, topic_create_opt, &t, topic_help, &first);
  if (rv != CLI_OK) {
    return rv == CLI_HELP_DONE ? CLI_OK : rv;
  }
  const char *name;
  if ((rv = topic_one_name(cmd, argc, argv, first, &name)) != CLI_OK) {
    return rv;
  }
  if (!topic_name_ok(name)) {
    return cli_usage_error(cmd,
                           "'%s' is not a valid topic name: 1..%d of A-Z a-z 0-9 . _ - "
                           "(not . or ..)",
                           name, TOPIC_NAME_MAX);
  }
  if (t.partitions == 0) {
    return cli_usage_error(cmd, "how many partitions? (--partitions N)");
  }
  if (t.rf == 0) {
    return cli_usage_error(cmd, "how many replicas? (--replication-factor R, e.g. 3)");
  }
  if ((rv = cli_connect(c, cmd)) != CLI_OK) {
    return rv;
  }
  rv = cairn_sync_create_topic(c->sync, name, (uint32_t)t.partitions, (uint32_t)t.rf, &t.cfg);
  if (rv != 0) {
    return cli_fail_call(c, cmd, name, rv);
  }
  if (c->json) {
    struct oj j;
    oj_init(&j, stdout, true);
    oj_object_begin(&j);
    oj_key(&j, "created");
    oj_str(&j, name);
    oj_key(&j, "partitions");
    oj_uint(&j, t.partitions);
    oj_key(&j, "replication_factor");
    oj_uint(&j, t.rf);
    oj_object_end(&j);
    oj_end(&j);
  } else {
    printf("created topic %s: %" PRIu64 " partition(s), replication factor %" PRIu64 "\n", name,
           t.partitions, t.rf);
  }
  return CLI_OK;
}

static int topic_list(struct cli *c, int argc, char **argv)
{
  const char *cmd = "topic list";
  int first;
  int rv = cli_getopt(c, cmd, argc, argv, NULL, NULL, NULL, NULL, topic_help, &first);
  if (rv != CLI_OK) {
    return rv == CLI_HELP_DONE ? CLI_OK : rv;
  }
  if (first < argc) {
    return cli_usage_error(cmd,
                           "takes no operand ('%s'); describe one topic with "
                           "`cairn topic describe NAME`",
                           argv[first]);
  }
  if ((rv = cli_connect(c, cmd)) != CLI_OK) {
    return rv;
  }
  struct cairn_topic_list *l = NULL;
  rv = cairn_sync_list_topics(c->sync, &l);
  if (rv != 0) {
    return cli_fail_call(c, cmd, "listing topics", rv);
  }
  if (c->json) {
    struct oj j;
    oj_init(&j, stdout, true);
    oj_object_begin(&j);
    oj_key(&j, "topics");
    oj_array_begin(&j);
    for (size_t i = 0; i < l->count; i++) {
      cli_json_topic(&j, &l->topics[i], false);
    }
    oj_array_end(&j);
    oj_object_end(&j);
    oj_end(&j);
  } else if (l->count == 0) {
    printf("no topics (create one: cairn topic create NAME --partitions N "
           "--replication-factor R)\n");
  } else {
    static const char *const head[] = {"TOPIC", "PARTITIONS", "REPLICATION-FACTOR"};
    struct tbl tb;
    tbl_init(&tb, 3, head);
    for (size_t i = 0; i < l->count && rv == 0; i++) {
      char parts[16], rf[16];
      snprintf(parts, sizeof parts, "%" PRIu32, l->topics[i].partition_count);
      snprintf(rf, sizeof rf, "%" PRIu32, l->topics[i].replication_factor);
      const char *row[] = {l->topics[i].name, parts, rf};
      rv = tbl_row(&tb, row);
    }
    if (rv == 0) {
      tbl_print(&tb, stdout);
    }
    tbl_free(&tb);
  }
  cairn_topic_list_free(l);
  return rv == 0 ? CLI_OK : cli_fail(cmd, "%s", cairn_strerror(rv));
}

static void topic_print_config(const struct cairn_topic_config *cfg)
{
  if (cfg->retention_ms > 0) {
    printf(", retention %" PRId64 " ms", cfg->retention_ms);
  }
  if (cfg->retention_bytes > 0) {
    printf(", retention %" PRId64 " bytes per partition", cfg->retention_bytes);
  }
  if (cfg->retention_ms <= 0 && cfg->retention_bytes <= 0) {
    printf(", data kept forever");
  }
  if (strcmp(cfg->storage, "postgresql") == 0) {
    printf(", stored in PostgreSQL");
  }
}

/* "2026-12-02 07:50:01 UTC (35 s ago)", or "unknown" for 0. */
static void topic_since(char *buf, size_t cap, uint64_t since_ms)
{
  if (since_ms == 0) {
    snprintf(buf, cap, "unknown");
    return;
  }
  time_t t = (time_t)(since_ms / 1000);
  struct tm tm;
  char when[32] = "?";
  if (gmtime_r(&t, &tm) != NULL) {
    strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S UTC", &tm);
  }
  time_t now = time(NULL);
  long long ago = now > t ? (long long)(now - t) : 0;
  snprintf(buf, cap, "%s (%lld s ago)", when, ago);
}

int cli_store_failures_print(const struct cairn_topic_info *topics, size_t ntopics)
{
  static const char *const head[] = {"TOPIC", "PARTITION", "NODE", "SINCE", "REASON"};
  struct tbl tb;
  tbl_init(&tb, 5, head);
  size_t count = 0;
  int rv = 0;
  for (size_t i = 0; i < ntopics && rv == 0; i++) {
    const struct cairn_topic_info *t = &topics[i];
    for (size_t k = 0; k < t->partition_info_count && rv == 0; k++) {
      const struct cairn_partition_info *p = &t->partitions[k];
      for (size_t f = 0; f < p->store_failure_count && rv == 0; f++) {
        const struct cairn_store_failure *sf = &p->store_failures[f];
        char part[16], node[24], since[64];
        snprintf(part, sizeof part, "%" PRIu32, p->partition);
        snprintf(node, sizeof node, "%" PRIu64, sf->node_id);
        topic_since(since, sizeof since, sf->since_ms);
        const char *row[] = {t->name, part, node, since, sf->reason};
        rv = tbl_row(&tb, row);
        count++;
      }
    }
  }
  if (rv == 0 && count > 0) {
    printf("\nstore failed (the replica stops applying until its store is back):\n");
    tbl_print(&tb, stdout);
  }
  tbl_free(&tb);
  return rv;
}

/* Replaces each partition's log start and high watermark (which the
 * answering node knows only for partitions it leads, or as of the last
 * leader report) with what the partition's leader says now: ListOffsets,
 * which libcairn routes to the leader. A partition whose leader cannot be
 * asked keeps -1 ("?"). Returns how many could not be asked. */
static size_t topic_ask_leaders(struct cli *c, struct cairn_topic_info *t)
{
  size_t unknown = 0;
  for (size_t i = 0; i < t->partition_info_count; i++) {
    struct cairn_partition_info *p = &t->partitions[i];
    int64_t start = -1, hw = -1;
    int rv = cairn_sync_list_offsets(c->sync, t->name, (int32_t)p->partition,
                                     CAIRN_OFFSET_SPEC_EARLIEST, 0, &start, NULL);
    if (rv == 0) {
      rv = cairn_sync_list_offsets(c->sync, t->name, (int32_t)p->partition,
                                   CAIRN_OFFSET_SPEC_LATEST, 0, &hw, NULL);
    }
    p->log_start_offset = rv == 0 ? start : -1;
    p->high_watermark = rv == 0 ? hw : -1;
    unknown += rv != 0;
  }
  return unknown;
}

static int topic_describe(struct cli *c, int argc, char **argv)
{
  const char *cmd = "topic describe";
  int first;
  int rv = cli_getopt(c, cmd, argc, argv, NULL, NULL, NULL, NULL, topic_help, &first);
  if (rv != CLI_OK) {
    return rv == CLI_HELP_DONE ? CLI_OK : rv;
  }
  const char *name;
  if ((rv = topic_one_name(cmd, argc, argv, first, &name)) != CLI_OK) {
    return rv;
  }
  if ((rv = cli_connect(c, cmd)) != CLI_OK) {
    return rv;
  }
  struct cairn_topic_info *t = NULL;
  rv = cli_describe_topic(c, name, &t);
  if (rv != 0) {
    return cli_fail_call(c, cmd, name, rv);
  }
  size_t unknown = topic_ask_leaders(c, t);
  if (c->json) {
    struct oj j;
    oj_init(&j, stdout, true);
    cli_json_topic(&j, t, true);
    oj_end(&j);
  } else {
    printf("topic %s (id %" PRIu32 "): %" PRIu32 " partition(s), replication factor %" PRIu32,
           t->name, t->topic_id, t->partition_count, t->replication_factor);
    topic_print_config(&t->config);
    printf("\n\n");
    static const char *const head[] = {"PARTITION", "LEADER",    "REPLICAS",
                                       "IN-SYNC",   "LOG-START", "HIGH-WATERMARK"};
    struct tbl tb;
    tbl_init(&tb, 6, head);
    rv = cli_partition_rows(&tb, t, false);
    if (rv == 0) {
      tbl_print(&tb, stdout);
    }
    tbl_free(&tb);
    if (rv == 0) {
      rv = cli_store_failures_print(t, 1);
    }
    if (unknown > 0) {
      printf("\n?: the partition's leader could not be asked for its log start and high "
             "watermark (no leader right now, or it did not answer within --timeout-ms); "
             "run describe again shortly\n");
    }
  }
  cairn_topic_info_free(t);
  return rv == 0 ? CLI_OK : cli_fail(cmd, "%s", cairn_strerror(rv));
}

static int topic_add_partitions_opt(void *ctx, int o, const char *arg)
{
  uint64_t *partitions = ctx;
  if (o != 'P') {
    return cli_usage_error("topic add-partitions", "unexpected option");
  }
  return cli_parse_u64("topic add-partitions", "--partitions", arg, 1, TOPIC_MAX_PARTITIONS,
                       partitions) == 0
             ? CLI_OK
             : CLI_USAGE;
}

static int topic_add_partitions(struct cli *c, int argc, char **argv)
{
  const char *cmd = "topic add-partitions";
  static const struct option own[] = {{"partitions", required_argument, NULL, 'P'},
                                      {NULL, 0, NULL, 0}};
  uint64_t partitions = 0;
  int first;
  int rv = cli_getopt(c, cmd, argc, argv, "P:", own, topic_add_partitions_opt, &partitions,
                      topic_help, &first);
  if (rv != CLI_OK) {
    return rv == CLI_HELP_DONE ? CLI_OK : rv;
  }
  const char *name;
  if ((rv = topic_one_name(cmd, argc, argv, first, &name)) != CLI_OK) {
    return rv;
  }
  if (partitions == 0) {
    return cli_usage_error(cmd, "how many partitions in all? (--partitions N, the new total)");
  }
  if ((rv = cli_connect(c, cmd)) != CLI_OK) {
    return rv;
  }
  rv = cairn_sync_add_partitions(c->sync, name, (uint32_t)partitions);
  if (rv != 0) {
    return cli_fail_call(c, cmd, name, rv);
  }
  if (c->json) {
    struct oj j;
    oj_init(&j, stdout, true);
    oj_object_begin(&j);
    oj_key(&j, "topic");
    oj_str(&j, name);
    oj_key(&j, "partitions");
    oj_uint(&j, partitions);
    oj_object_end(&j);
    oj_end(&j);
  } else {
    printf("topic %s now has %" PRIu64 " partitions\n", name, partitions);
  }
  return CLI_OK;
}

struct topic_delrec {
  int64_t offset;    /* -1: the high watermark */
  int64_t partition; /* -1: every partition */
  bool have_offset;
};

static int topic_delrec_opt(void *ctx, int o, const char *arg)
{
  const char *cmd = "topic delete-records";
  struct topic_delrec *d = ctx;
  uint64_t v = 0;
  switch (o) {
  case 'o':
    d->have_offset = true;
    if (strcmp(arg, "end") == 0) {
      d->offset = -1;
      return CLI_OK;
    }
    if (cli_parse_u64(cmd, "--offset", arg, 0, INT64_MAX, &v) != 0) {
      return CLI_USAGE;
    }
    d->offset = (int64_t)v;
    return CLI_OK;
  case 'p':
    if (cli_parse_u64(cmd, "--partition", arg, 0, TOPIC_MAX_PARTITIONS - 1, &v) != 0) {
      return CLI_USAGE;
    }
    d->partition = (int64_t)v;
    return CLI_OK;
  default:
    return cli_usage_error(cmd, "unexpected option");
  }
}

/* One partition's delete: printed (or added to j), *failed on an error. */
static void topic_delrec_one(struct cli *c, const char *name, int32_t partition, int64_t offset,
                             struct oj *j, bool *failed)
{
  const char *cmd = "topic delete-records";
  int64_t start = -1;
  int rv = cairn_sync_delete_records(c->sync, name, partition, offset, &start);
  if (rv != 0) {
    char what[300];
    snprintf(what, sizeof what, "%s/%" PRId32, name, partition);
    (void)cli_fail_call(c, cmd, what, rv);
    *failed = true;
    return;
  }
  if (j != NULL) {
    oj_object_begin(j);
    oj_key(j, "topic");
    oj_str(j, name);
    oj_key(j, "partition");
    oj_uint(j, (uint64_t)partition);
    oj_key(j, "low_watermark");
    oj_int(j, start);
    oj_object_end(j);
  } else {
    printf("%s/%" PRId32 ": log start now %" PRId64 "\n", name, partition, start);
  }
}

static int topic_delete_records(struct cli *c, int argc, char **argv)
{
  const char *cmd = "topic delete-records";
  static const struct option own[] = {{"offset", required_argument, NULL, 'o'},
                                      {"partition", required_argument, NULL, 'p'},
                                      {NULL, 0, NULL, 0}};
  struct topic_delrec d = {.offset = -1, .partition = -1};
  int first;
  int rv = cli_getopt(c, cmd, argc, argv, "o:p:", own, topic_delrec_opt, &d, topic_help, &first);
  if (rv != CLI_OK) {
    return rv == CLI_HELP_DONE ? CLI_OK : rv;
  }
  const char *name;
  if ((rv = topic_one_name(cmd, argc, argv, first, &name)) != CLI_OK) {
    return rv;
  }
  if (!d.have_offset) {
    return cli_usage_error(cmd, "below which offset? (--offset N, or --offset end for "
                                "everything up to the high watermark)");
  }
  if ((rv = cli_connect(c, cmd)) != CLI_OK) {
    return rv;
  }
  uint32_t from = (uint32_t)d.partition, to = (uint32_t)d.partition + 1;
  if (d.partition < 0) {
    struct cairn_topic_info *t = NULL;
    rv = cli_describe_topic(c, name, &t);
    if (rv != 0) {
      return cli_fail_call(c, cmd, name, rv);
    }
    from = 0;
    to = t->partition_count;
    cairn_topic_info_free(t);
  }
  struct oj j;
  if (c->json) {
    oj_init(&j, stdout, true);
    oj_array_begin(&j);
  }
  bool failed = false;
  for (uint32_t p = from; p < to; p++) {
    topic_delrec_one(c, name, (int32_t)p, d.offset, c->json ? &j : NULL, &failed);
  }
  if (c->json) {
    oj_array_end(&j);
    oj_end(&j);
  }
  return failed ? CLI_FAIL : CLI_OK;
}

#define TOPIC_MAX_CHANGES 32

struct topic_alter {
  struct cairn_config_change changes[TOPIC_MAX_CHANGES];
  size_t n;
  char *owned[TOPIC_MAX_CHANGES]; /* the keys split from KEY=VALUE */
};

static int topic_alter_opt(void *ctx, int o, const char *arg)
{
  const char *cmd = "topic alter-config";
  struct topic_alter *ta = ctx;
  if (o != 's' && o != 'd') {
    return cli_usage_error(cmd, "unexpected option");
  }
  if (ta->n == TOPIC_MAX_CHANGES) {
    return cli_usage_error(cmd, "at most %d changes at once", TOPIC_MAX_CHANGES);
  }
  struct cairn_config_change *ch = &ta->changes[ta->n];
  if (o == 'd') {
    if (arg[0] == '\0' || strchr(arg, '=') != NULL) {
      return cli_usage_error(cmd, "--delete takes a key alone (--delete retention.ms)");
    }
    ch->key = arg;
    ch->value = NULL;
    ta->n++;
    return CLI_OK;
  }
  const char *eq = strchr(arg, '=');
  if (eq == NULL || eq == arg) {
    return cli_usage_error(cmd, "--set takes KEY=VALUE (--set retention.ms=3600000), not '%s'",
                           arg);
  }
  char *key = strndup(arg, (size_t)(eq - arg));
  if (key == NULL) {
    return cli_fail(cmd, "out of memory");
  }
  ta->owned[ta->n] = key;
  ch->key = key;
  ch->value = eq + 1;
  ta->n++;
  return CLI_OK;
}

static void topic_alter_print(const struct cli *c, const char *name, const struct topic_alter *ta)
{
  if (!c->json) {
    for (size_t i = 0; i < ta->n; i++) {
      const struct cairn_config_change *ch = &ta->changes[i];
      printf("topic %s: %s %s%s\n", name, ch->key, ch->value != NULL ? "= " : "back to its default",
             ch->value != NULL ? ch->value : "");
    }
    return;
  }
  struct oj j;
  oj_init(&j, stdout, true);
  oj_object_begin(&j);
  oj_key(&j, "topic");
  oj_str(&j, name);
  oj_key(&j, "set");
  oj_object_begin(&j);
  for (size_t i = 0; i < ta->n; i++) {
    if (ta->changes[i].value != NULL) {
      oj_key(&j, ta->changes[i].key);
      oj_str(&j, ta->changes[i].value);
    }
  }
  oj_object_end(&j);
  oj_key(&j, "deleted");
  oj_array_begin(&j);
  for (size_t i = 0; i < ta->n; i++) {
    if (ta->changes[i].value == NULL) {
      oj_str(&j, ta->changes[i].key);
    }
  }
  oj_array_end(&j);
  oj_object_end(&j);
  oj_end(&j);
}

static int topic_alter_run(struct cli *c, int argc, char **argv, struct topic_alter *ta)
{
  const char *cmd = "topic alter-config";
  static const struct option own[] = {{"set", required_argument, NULL, 's'},
                                      {"delete", required_argument, NULL, 'd'},
                                      {NULL, 0, NULL, 0}};
  int first;
  int rv = cli_getopt(c, cmd, argc, argv, "s:d:", own, topic_alter_opt, ta, topic_help, &first);
  if (rv != CLI_OK) {
    return rv == CLI_HELP_DONE ? CLI_OK : rv;
  }
  const char *name;
  if ((rv = topic_one_name(cmd, argc, argv, first, &name)) != CLI_OK) {
    return rv;
  }
  if (ta->n == 0) {
    return cli_usage_error(cmd, "what to change? (--set KEY=VALUE or --delete KEY)");
  }
  if ((rv = cli_connect(c, cmd)) != CLI_OK) {
    return rv;
  }
  rv = cairn_sync_alter_topic_config(c->sync, name, ta->changes, ta->n);
  if (rv != 0) {
    return cli_fail_call(c, cmd, name, rv);
  }
  topic_alter_print(c, name, ta);
  return CLI_OK;
}

static int topic_alter_config(struct cli *c, int argc, char **argv)
{
  struct topic_alter ta = {.n = 0};
  int rv = topic_alter_run(c, argc, argv, &ta);
  for (size_t i = 0; i < ta.n; i++) {
    free(ta.owned[i]);
  }
  return rv;
}

static int topic_delete(struct cli *c, int argc, char **argv)
{
  const char *cmd = "topic delete";
  int first;
  int rv = cli_getopt(c, cmd, argc, argv, NULL, NULL, NULL, NULL, topic_help, &first);
  if (rv != CLI_OK) {
    return rv == CLI_HELP_DONE ? CLI_OK : rv;
  }
  const char *name;
  if ((rv = topic_one_name(cmd, argc, argv, first, &name)) != CLI_OK) {
    return rv;
  }
  if ((rv = cli_connect(c, cmd)) != CLI_OK) {
    return rv;
  }
  rv = cairn_sync_delete_topic(c->sync, name);
  if (rv != 0) {
    return cli_fail_call(c, cmd, name, rv);
  }
  if (c->json) {
    struct oj j;
    oj_init(&j, stdout, true);
    oj_object_begin(&j);
    oj_key(&j, "deleted");
    oj_str(&j, name);
    oj_object_end(&j);
    oj_end(&j);
  } else {
    printf("deleted topic %s\n", name);
  }
  return CLI_OK;
}

int cli_topic(struct cli *c, int argc, char **argv)
{
  static const struct {
    const char *name;
    int (*run)(struct cli *, int, char **);
  } subs[] = {{"create", topic_create},
              {"list", topic_list},
              {"describe", topic_describe},
              {"delete", topic_delete},
              {"add-partitions", topic_add_partitions},
              {"alter-config", topic_alter_config},
              {"delete-records", topic_delete_records}};
  if (argc < 2 || strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0) {
    topic_help(argc < 2 ? stderr : stdout);
    return argc < 2 ? CLI_USAGE : CLI_OK;
  }
  for (size_t i = 0; i < sizeof subs / sizeof subs[0]; i++) {
    if (strcmp(argv[1], subs[i].name) == 0) {
      return subs[i].run(c, argc - 1, argv + 1);
    }
  }
  return cli_usage_error("topic",
                         "unknown subcommand '%s' (create, list, describe, delete, add-partitions, "
                         "alter-config or delete-records)",
                         argv[1]);
}
