/* group_reset.c - `cairn group reset-offsets`, `cairn group delete`,
 * `cairn group delete-offsets` and `cairn group remove-member`: changing a
 * consumer group's committed offsets or its membership from outside the
 * group.
 *
 * reset-offsets plans every partition's new offset first (to the log
 * start, the high watermark, an offset, the first record at a time, or the
 * committed offset shifted by N), checks each against the partition's
 * [log start, high watermark] as its leader gives them (outside is refused
 * unless --force: a committed offset past the end would make the next
 * consumer start over silently), then prints the plan (--dry-run stops
 * there) or sends it. Both are refused by the coordinator while the group
 * has members. */
#include "cli.h"
#include "output.h"

#include <cairn/group.h>

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

enum group_reset_to {
  GROUP_RESET_NONE,
  GROUP_RESET_EARLIEST,
  GROUP_RESET_LATEST,
  GROUP_RESET_OFFSET,
  GROUP_RESET_DATETIME,
  GROUP_RESET_SHIFT
};

struct group_reset {
  const char *cmd;
  const char *topic;
  int64_t partition; /* -1: all */
  enum group_reset_to to;
  int modes;     /* how many --to-* / --shift-by were given */
  int64_t value; /* the offset, the time (ms) or the shift */
  bool force;
  bool dry_run;
};

/* One partition's plan. */
struct group_reset_row {
  int32_t partition;
  int64_t current; /* committed now, -1: none */
  int64_t start;   /* the leader's log start */
  int64_t hw;      /* the leader's high watermark */
  int64_t offset;  /* the new committed offset */
};

#define GROUP_RESET_OPT_FORCE 4000
#define GROUP_RESET_OPT_DRY_RUN 4001

static int group_reset_opt(void *ctx, int o, const char *arg)
{
  struct group_reset *r = ctx;
  uint64_t v;
  switch (o) {
  case 't':
    r->topic = arg;
    return CLI_OK;
  case 'p':
    if (cli_parse_u64(r->cmd, "--partition", arg, 0, INT32_MAX, &v) != 0) {
      return CLI_USAGE;
    }
    r->partition = (int64_t)v;
    return CLI_OK;
  case 'E':
  case 'L':
    r->to = o == 'E' ? GROUP_RESET_EARLIEST : GROUP_RESET_LATEST;
    break;
  case 'O':
    if (cli_parse_u64(r->cmd, "--to-offset", arg, 0, INT64_MAX, &v) != 0) {
      return CLI_USAGE;
    }
    r->to = GROUP_RESET_OFFSET;
    r->value = (int64_t)v;
    break;
  case 'T':
    if (cli_parse_time(r->cmd, "--to-datetime", arg, &r->value) != 0) {
      return CLI_USAGE;
    }
    r->to = GROUP_RESET_DATETIME;
    break;
  case 'S': {
    char *end = NULL;
    long long n = strtoll(arg, &end, 10);
    if (arg[0] == '\0' || *end != '\0') {
      return cli_usage_error(r->cmd, "--shift-by: '%s' is not a whole number (e.g. -10, 5)", arg);
    }
    r->to = GROUP_RESET_SHIFT;
    r->value = n;
    break;
  }
  case GROUP_RESET_OPT_FORCE:
    r->force = true;
    return CLI_OK;
  case GROUP_RESET_OPT_DRY_RUN:
    r->dry_run = true;
    return CLI_OK;
  default:
    return CLI_USAGE;
  }
  r->modes++;
  return CLI_OK;
}

/* The group's committed offset of topic/partition, or -1. */
static int64_t group_reset_committed(const struct cairn_group_info *g, const char *topic,
                                     int32_t partition)
{
  for (size_t i = 0; g != NULL && i < g->offset_count; i++) {
    if (g->offsets[i].partition == partition && strcmp(g->offsets[i].topic, topic) == 0) {
      return g->offsets[i].committed;
    }
  }
  return -1;
}

/* Fills row's range and new offset. Returns CLI_OK, or CLI_FAIL after
 * saying why (a call failed, nothing to shift, out of range without
 * --force). */
static int group_reset_plan_one(struct cli *c, const struct group_reset *r,
                                struct group_reset_row *row)
{
  const char *topic = r->topic;
  int rv = cairn_sync_list_offsets(c->sync, topic, row->partition, CAIRN_OFFSET_SPEC_EARLIEST, 0,
                                   &row->start, NULL);
  if (rv == 0) {
    rv = cairn_sync_list_offsets(c->sync, topic, row->partition, CAIRN_OFFSET_SPEC_LATEST, 0,
                                 &row->hw, NULL);
  }
  if (rv == 0 && r->to == GROUP_RESET_DATETIME) {
    rv = cairn_sync_list_offsets(c->sync, topic, row->partition, CAIRN_OFFSET_SPEC_TIMESTAMP,
                                 r->value, &row->offset, NULL);
    if (rv == 0 && row->offset < 0) {
      row->offset = row->hw; /* nothing at or after it: the end, as Kafka does */
    }
  }
  if (rv != 0) {
    char what[300];
    snprintf(what, sizeof what, "%s/%" PRId32, topic, row->partition);
    return cli_fail_call(c, r->cmd, what, rv);
  }
  switch (r->to) {
  case GROUP_RESET_EARLIEST:
    row->offset = row->start;
    break;
  case GROUP_RESET_LATEST:
    row->offset = row->hw;
    break;
  case GROUP_RESET_OFFSET:
    row->offset = r->value;
    break;
  case GROUP_RESET_SHIFT:
    if (row->current < 0) {
      return cli_fail(r->cmd,
                      "%s/%" PRId32 ": the group has no committed offset to shift (use "
                      "--to-offset, --to-earliest or --to-latest)",
                      topic, row->partition);
    }
    row->offset = row->current + r->value;
    break;
  default:
    break;
  }
  if ((row->offset < row->start || row->offset > row->hw) && !r->force) {
    return cli_fail(r->cmd,
                    "%s/%" PRId32 ": offset %" PRId64 " is outside the partition's offsets "
                    "%" PRId64 "..%" PRId64 " (log start..high watermark): a consumer of the "
                    "group would start elsewhere; give --force to commit it anyway",
                    topic, row->partition, row->offset, row->start, row->hw);
  }
  if (row->offset < 0) {
    return cli_fail(r->cmd, "%s/%" PRId32 ": offset %" PRId64 " is negative", topic,
                    row->partition, row->offset);
  }
  return CLI_OK;
}

static void group_reset_print(struct cli *c, const char *group, const struct group_reset *r,
                              const struct group_reset_row *rows, size_t n)
{
  if (c->json) {
    struct oj j;
    oj_init(&j, stdout, true);
    oj_array_begin(&j);
    for (size_t i = 0; i < n; i++) {
      oj_object_begin(&j);
      oj_key(&j, "topic");
      oj_str(&j, r->topic);
      oj_key(&j, "partition");
      oj_int(&j, rows[i].partition);
      oj_key(&j, "previous");
      oj_int(&j, rows[i].current);
      oj_key(&j, "offset");
      oj_int(&j, rows[i].offset);
      oj_key(&j, "log_start_offset");
      oj_int(&j, rows[i].start);
      oj_key(&j, "high_watermark");
      oj_int(&j, rows[i].hw);
      oj_key(&j, "dry_run");
      oj_bool(&j, r->dry_run);
      oj_object_end(&j);
    }
    oj_array_end(&j);
    oj_end(&j);
    return;
  }
  for (size_t i = 0; i < n; i++) {
    char prev[24];
    cli_offset_str(prev, sizeof prev, rows[i].current);
    printf("%s/%" PRId32 ": committed offset of %s %s %" PRId64 " (was %s; offsets %" PRId64
           "..%" PRId64 ")\n",
           r->topic, rows[i].partition, group, r->dry_run ? "would be set to" : "set to",
           rows[i].offset, rows[i].current >= 0 ? prev : "none", rows[i].start, rows[i].hw);
  }
  if (r->dry_run) {
    printf("dry run: nothing was changed\n");
  }
}

/* Sends the plan as one ResetOffsets. */
static int group_reset_send(struct cli *c, const char *group, const struct group_reset *r,
                            const struct group_reset_row *rows, size_t n)
{
  struct cairn_group_reset *v = calloc(n, sizeof *v);
  if (v == NULL) {
    return cli_fail(r->cmd, "out of memory");
  }
  for (size_t i = 0; i < n; i++) {
    v[i] = (struct cairn_group_reset){r->topic, rows[i].partition, rows[i].offset};
  }
  char err[256] = "";
  int rv = cairn_sync_reset_offsets(c->sync, group, v, n, err, sizeof err);
  free(v);
  if (rv != 0) {
    return cli_fail(r->cmd, "%s: %s", group, err[0] != '\0' ? err : cairn_strerror(rv));
  }
  return CLI_OK;
}

static int group_reset_run(struct cli *c, const char *group, struct group_reset *r)
{
  struct cairn_topic_info *t = NULL;
  int rv = cli_describe_topic(c, r->topic, &t);
  if (rv != 0) {
    return cli_fail_call(c, r->cmd, r->topic, rv);
  }
  uint32_t count = t->partition_count;
  cairn_topic_info_free(t);
  if (r->partition >= (int64_t)count) {
    return cli_fail(r->cmd, "%s has partitions 0..%" PRIu32, r->topic, count - 1);
  }
  /* The current offsets: for --shift-by and to show what changes. A group
   * that does not exist yet has none. */
  struct cairn_group_info *g = NULL;
  char err[256] = "";
  rv = cairn_sync_describe_group(c->sync, group, &g, err, sizeof err);
  if (rv != 0 && rv != CAIRN_EUNKNOWN_GROUP) {
    return cli_fail(r->cmd, "%s: %s", group, err[0] != '\0' ? err : cairn_strerror(rv));
  }
  size_t n = r->partition >= 0 ? 1 : count;
  struct group_reset_row *rows = calloc(n, sizeof *rows);
  int code = rows != NULL ? CLI_OK : cli_fail(r->cmd, "out of memory");
  for (size_t i = 0; i < n && code == CLI_OK; i++) {
    rows[i].partition = r->partition >= 0 ? (int32_t)r->partition : (int32_t)i;
    rows[i].current = group_reset_committed(g, r->topic, rows[i].partition);
    code = group_reset_plan_one(c, r, &rows[i]);
  }
  cairn_group_info_free(g);
  if (code == CLI_OK && !r->dry_run) {
    code = group_reset_send(c, group, r, rows, n);
  }
  if (code == CLI_OK) {
    group_reset_print(c, group, r, rows, n);
  }
  free(rows);
  return code;
}

int cli_group_reset(struct cli *c, int argc, char **argv, void (*help)(FILE *))
{
  static const struct option own[] = {
      {"topic", required_argument, NULL, 't'},
      {"partition", required_argument, NULL, 'p'},
      {"to-earliest", no_argument, NULL, 'E'},
      {"to-latest", no_argument, NULL, 'L'},
      {"to-offset", required_argument, NULL, 'O'},
      {"to-datetime", required_argument, NULL, 'T'},
      {"shift-by", required_argument, NULL, 'S'},
      {"force", no_argument, NULL, GROUP_RESET_OPT_FORCE},
      {"dry-run", no_argument, NULL, GROUP_RESET_OPT_DRY_RUN},
      {NULL, 0, NULL, 0}};
  struct group_reset r = {.cmd = "group reset-offsets", .partition = -1};
  int first;
  int rv = cli_getopt(c, r.cmd, argc, argv, "t:p:", own, group_reset_opt, &r, help, &first);
  if (rv != CLI_OK) {
    return rv == CLI_HELP_DONE ? CLI_OK : rv;
  }
  if (argc - first != 1) {
    return cli_usage_error(r.cmd, argc == first ? "which group?" : "one group at a time");
  }
  if (r.topic == NULL) {
    return cli_usage_error(r.cmd, "which topic? (--topic TOPIC)");
  }
  if (r.modes != 1) {
    return cli_usage_error(r.cmd, "%s (--to-earliest, --to-latest, --to-offset N, "
                                  "--to-datetime TIME or --shift-by N)",
                           r.modes == 0 ? "to where?" : "one of these at a time");
  }
  if ((rv = cli_connect(c, r.cmd)) != CLI_OK) {
    return rv;
  }
  return group_reset_run(c, argv[first], &r);
}

int cli_group_delete(struct cli *c, int argc, char **argv, void (*help)(FILE *))
{
  const char *cmd = "group delete";
  int first;
  int rv = cli_getopt(c, cmd, argc, argv, NULL, NULL, NULL, NULL, help, &first);
  if (rv != CLI_OK) {
    return rv == CLI_HELP_DONE ? CLI_OK : rv;
  }
  if (argc - first != 1) {
    return cli_usage_error(cmd, argc == first ? "which group?" : "one group at a time");
  }
  const char *group = argv[first];
  if ((rv = cli_connect(c, cmd)) != CLI_OK) {
    return rv;
  }
  char err[256] = "";
  rv = cairn_sync_delete_group(c->sync, group, err, sizeof err);
  if (rv != 0) {
    return cli_fail(cmd, "%s: %s", group, err[0] != '\0' ? err : cairn_strerror(rv));
  }
  if (c->json) {
    struct oj j;
    oj_init(&j, stdout, true);
    oj_object_begin(&j);
    oj_key(&j, "deleted");
    oj_str(&j, group);
    oj_object_end(&j);
    oj_end(&j);
  } else {
    printf("deleted group %s (its committed offsets are dropped)\n", group);
  }
  return CLI_OK;
}

/* ---- delete-offsets ---- */

struct group_delete_offsets {
  const char *topic;
  int64_t partition; /* -1: every partition */
};

static int group_delete_offsets_opt(void *ctx, int o, const char *arg)
{
  struct group_delete_offsets *d = ctx;
  uint64_t v;
  if (o == 't') {
    d->topic = arg;
    return CLI_OK;
  }
  if (cli_parse_u64("group delete-offsets", "--partition", arg, 0, INT32_MAX, &v) != 0) {
    return CLI_USAGE;
  }
  d->partition = (int64_t)v;
  return CLI_OK;
}

static void group_delete_offsets_print(struct cli *c, const char *group, const char *topic,
                                       const struct cairn_group_partition *parts, size_t n)
{
  if (c->json) {
    struct oj j;
    oj_init(&j, stdout, true);
    oj_object_begin(&j);
    oj_key(&j, "group");
    oj_str(&j, group);
    oj_key(&j, "topic");
    oj_str(&j, topic);
    oj_key(&j, "partitions");
    oj_array_begin(&j);
    for (size_t i = 0; i < n; i++) {
      oj_int(&j, parts[i].partition);
    }
    oj_array_end(&j);
    oj_object_end(&j);
    oj_end(&j);
    return;
  }
  printf("deleted the committed offsets of %s on %s, partition%s", group, topic, n > 1 ? "s" : "");
  for (size_t i = 0; i < n; i++) {
    printf("%s%" PRId32, i == 0 ? " " : ",", parts[i].partition);
  }
  printf(" (its consumers start there as their offset reset says)\n");
}

int cli_group_delete_offsets(struct cli *c, int argc, char **argv, void (*help)(FILE *))
{
  static const struct option own[] = {{"topic", required_argument, NULL, 't'},
                                      {"partition", required_argument, NULL, 'p'},
                                      {NULL, 0, NULL, 0}};
  const char *cmd = "group delete-offsets";
  struct group_delete_offsets d = {NULL, -1};
  int first;
  int rv = cli_getopt(c, cmd, argc, argv, "t:p:", own, group_delete_offsets_opt, &d, help, &first);
  if (rv != CLI_OK) {
    return rv == CLI_HELP_DONE ? CLI_OK : rv;
  }
  if (argc - first != 1) {
    return cli_usage_error(cmd, argc == first ? "which group?" : "one group at a time");
  }
  if (d.topic == NULL) {
    return cli_usage_error(cmd, "which topic? (--topic TOPIC)");
  }
  const char *group = argv[first];
  if ((rv = cli_connect(c, cmd)) != CLI_OK) {
    return rv;
  }
  struct cairn_topic_info *t = NULL;
  if ((rv = cli_describe_topic(c, d.topic, &t)) != 0) {
    return cli_fail_call(c, cmd, d.topic, rv);
  }
  uint32_t count = t->partition_count;
  cairn_topic_info_free(t);
  if (d.partition >= (int64_t)count) {
    return cli_fail(cmd, "%s has partitions 0..%" PRIu32, d.topic, count - 1);
  }
  size_t n = d.partition >= 0 ? 1 : count;
  struct cairn_group_partition *parts = calloc(n, sizeof *parts);
  if (parts == NULL) {
    return cli_fail(cmd, "out of memory");
  }
  for (size_t i = 0; i < n; i++) {
    parts[i].topic = d.topic;
    parts[i].partition = d.partition >= 0 ? (int32_t)d.partition : (int32_t)i;
  }
  char err[256] = "";
  rv = cairn_sync_delete_group_offsets(c->sync, group, parts, n, err, sizeof err);
  int code =
      rv == 0 ? CLI_OK : cli_fail(cmd, "%s: %s", group, err[0] != '\0' ? err : cairn_strerror(rv));
  if (code == CLI_OK) {
    group_delete_offsets_print(c, group, d.topic, parts, n);
  }
  free(parts);
  return code;
}

/* ---- remove-member ---- */

#define GROUP_REMOVE_OPT_MEMBER 4100
#define GROUP_REMOVE_OPT_INSTANCE 4101

struct group_remove {
  const char *member_id;
  const char *instance_id;
};

static int group_remove_opt(void *ctx, int o, const char *arg)
{
  struct group_remove *r = ctx;
  if (o == GROUP_REMOVE_OPT_MEMBER) {
    r->member_id = arg;
  } else {
    r->instance_id = arg;
  }
  return CLI_OK;
}

int cli_group_remove_member(struct cli *c, int argc, char **argv, void (*help)(FILE *))
{
  static const struct option own[] = {
      {"member-id", required_argument, NULL, GROUP_REMOVE_OPT_MEMBER},
      {"group-instance-id", required_argument, NULL, GROUP_REMOVE_OPT_INSTANCE},
      {NULL, 0, NULL, 0}};
  const char *cmd = "group remove-member";
  struct group_remove r = {NULL, NULL};
  int first;
  int rv = cli_getopt(c, cmd, argc, argv, NULL, own, group_remove_opt, &r, help, &first);
  if (rv != CLI_OK) {
    return rv == CLI_HELP_DONE ? CLI_OK : rv;
  }
  if (argc - first != 1) {
    return cli_usage_error(cmd, argc == first ? "which group?" : "one group at a time");
  }
  if ((r.member_id == NULL || r.member_id[0] == '\0') &&
      (r.instance_id == NULL || r.instance_id[0] == '\0')) {
    return cli_usage_error(cmd, "which member? (--group-instance-id ID or --member-id ID)");
  }
  const char *group = argv[first];
  if ((rv = cli_connect(c, cmd)) != CLI_OK) {
    return rv;
  }
  char err[256] = "";
  rv = cairn_sync_remove_group_member(c->sync, group, r.member_id, r.instance_id, err, sizeof err);
  const char *who = r.instance_id != NULL && r.instance_id[0] != '\0' ? r.instance_id : r.member_id;
  if (rv != 0) {
    return cli_fail(cmd, "%s: %s: %s", group, who, err[0] != '\0' ? err : cairn_strerror(rv));
  }
  if (c->json) {
    struct oj j;
    oj_init(&j, stdout, true);
    oj_object_begin(&j);
    oj_key(&j, "group");
    oj_str(&j, group);
    oj_key(&j, "removed");
    oj_str(&j, who);
    oj_object_end(&j);
    oj_end(&j);
  } else {
    printf("removed %s from group %s (the group rebalances without it)\n", who, group);
  }
  return CLI_OK;
}
