/* group.c - consumer groups on the command line: `cairn group list`,
 * `cairn group describe GROUP` (reset-offsets, delete and remove-member:
 * group_reset.c), and
 * `cairn consume -g GROUP TOPIC...` (a member of the group: the partitions
 * are shared with the group's other members, offsets committed after each
 * record is printed). docs/consumer-groups.md has the protocol. */
#include "cli.h"
#include "output.h"
#include "record_print.h"

#include <cairn/group.h>

#include <inttypes.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#define GROUP_MAX_TOPICS 64

static void group_help(FILE *out)
{
  fprintf(out,
          "usage: cairn group list\n"
          "       cairn group describe GROUP\n"
          "       cairn group reset-offsets GROUP --topic TOPIC [--partition N]\n"
          "                 (--to-earliest | --to-latest | --to-offset N |\n"
          "                  --to-datetime TIME | --shift-by N) [--force] [--dry-run]\n"
          "       cairn group delete GROUP\n"
          "       cairn group delete-offsets GROUP --topic TOPIC [--partition N]\n"
          "       cairn group remove-member GROUP (--group-instance-id ID | --member-id ID)\n"
          "       cairn consume -g GROUP TOPIC... [-n COUNT] [-e] [-o beginning|end]\n"
          "                                       [-f FORMAT] [--group-instance-id ID]\n"
          "\n"
          "list           every consumer group of the cluster: state, members\n"
          "describe       the members with their partitions, and per partition the\n"
          "               committed offset, high watermark and lag\n"
          "reset-offsets  sets the committed offsets of TOPIC (every partition, or\n"
          "               N) while the group has no members (refused otherwise);\n"
          "               an offset outside the partition's log start..high\n"
          "               watermark is refused unless --force; --to-datetime\n"
          "               takes the first record at or after TIME (epoch ms,\n"
          "               2026-12-01T00:00:00Z, or -1h before now; the end if\n"
          "               none); --shift-by N moves the committed offset by N;\n"
          "               --dry-run prints the plan and changes nothing\n"
          "delete         drops the group and its committed offsets (refused\n"
          "               while it has members)\n"
          "delete-offsets drops the group's committed offsets of TOPIC (every\n"
          "               partition, or N) while it has no members (Kafka's\n"
          "               --delete-offsets); its consumers then start as -o says\n"
          "remove-member  takes one member out of the group now (the group\n"
          "               rebalances without it): a static member that is gone for\n"
          "               good, which never leaves by itself, by its instance id\n"
          "consume -g     joins GROUP and prints each record's value (--json: one\n"
          "               object per line) of the partitions the group assigns to\n"
          "               this member; offsets are committed once printed;\n"
          "               -o says where partitions without a committed offset start;\n"
          "               -n exits after exactly COUNT records and commits only\n"
          "               those (the rest of a batch is read again next time);\n"
          "               -e exits once every partition assigned to this member\n"
          "               is read up to its high watermark;\n"
          "               -f FORMAT prints as `cairn consume -f` does;\n"
          "               --group-instance-id ID makes a static member: started\n"
          "               again under ID within the session timeout it takes its\n"
          "               partitions back without a rebalance, and it does not\n"
          "               leave the group when it exits\n"
          "\n"
          "%s",
          cli_common_help);
}

/* ---- list ---- */

static int group_list(struct cli *c)
{
  const char *cmd = "group list";
  int rv = cli_connect(c, cmd);
  if (rv != CLI_OK) {
    return rv;
  }
  struct cairn_group_list *l = NULL;
  char err[256] = "";
  rv = cairn_sync_list_groups(c->sync, &l, err, sizeof err);
  if (rv != 0) {
    return cli_fail(cmd, "%s: %s", cairn_strerror(rv), err);
  }
  if (c->json) {
    struct oj j;
    oj_init(&j, stdout, true);
    oj_array_begin(&j);
    for (size_t i = 0; i < l->count; i++) {
      oj_object_begin(&j);
      oj_key(&j, "group");
      oj_str(&j, l->groups[i].group);
      oj_key(&j, "state");
      oj_str(&j, l->groups[i].state);
      oj_key(&j, "members");
      oj_uint(&j, l->groups[i].members);
      oj_key(&j, "coordinator");
      oj_uint(&j, l->groups[i].coordinator_id);
      oj_object_end(&j);
    }
    oj_array_end(&j);
    oj_end(&j);
  } else {
    static const char *const head[] = {"GROUP", "STATE", "MEMBERS", "COORDINATOR"};
    struct tbl tb;
    tbl_init(&tb, 4, head);
    for (size_t i = 0; i < l->count && rv == 0; i++) {
      char members[16], coord[24];
      snprintf(members, sizeof members, "%" PRIu32, l->groups[i].members);
      snprintf(coord, sizeof coord, "%" PRIu64, l->groups[i].coordinator_id);
      const char *row[] = {l->groups[i].group, l->groups[i].state, members, coord};
      rv = tbl_row(&tb, row);
    }
    tbl_print(&tb, stdout);
    tbl_free(&tb);
  }
  cairn_group_list_free(l);
  return rv == 0 ? CLI_OK : cli_fail(cmd, "out of memory");
}

/* ---- describe ---- */

static void group_describe_json(const struct cairn_group_info *g)
{
  struct oj j;
  oj_init(&j, stdout, true);
  oj_object_begin(&j);
  oj_key(&j, "group");
  oj_str(&j, g->group);
  oj_key(&j, "state");
  oj_str(&j, g->state);
  oj_key(&j, "strategy");
  oj_str(&j, g->strategy);
  oj_key(&j, "generation");
  oj_int(&j, g->generation);
  oj_key(&j, "leader");
  oj_str(&j, g->leader_id);
  oj_key(&j, "coordinator");
  oj_uint(&j, g->coordinator_id);
  oj_key(&j, "members");
  oj_array_begin(&j);
  for (size_t i = 0; i < g->member_count; i++) {
    const struct cairn_group_member_info *m = &g->members[i];
    oj_object_begin(&j);
    oj_key(&j, "member_id");
    oj_str(&j, m->member_id);
    oj_key(&j, "client_id");
    oj_str(&j, m->client_id);
    oj_key(&j, "group_instance_id");
    oj_str(&j, m->group_instance_id);
    oj_key(&j, "partitions");
    oj_array_begin(&j);
    for (size_t k = 0; k < m->assignment_count; k++) {
      oj_object_begin(&j);
      oj_key(&j, "topic");
      oj_str(&j, m->assignment[k].topic);
      oj_key(&j, "partition");
      oj_int(&j, m->assignment[k].partition);
      oj_object_end(&j);
    }
    oj_array_end(&j);
    oj_object_end(&j);
  }
  oj_array_end(&j);
  oj_key(&j, "offsets");
  oj_array_begin(&j);
  for (size_t i = 0; i < g->offset_count; i++) {
    const struct cairn_group_offset_info *o = &g->offsets[i];
    oj_object_begin(&j);
    oj_key(&j, "topic");
    oj_str(&j, o->topic);
    oj_key(&j, "partition");
    oj_int(&j, o->partition);
    oj_key(&j, "committed");
    oj_int(&j, o->committed);
    oj_key(&j, "high_watermark");
    oj_int(&j, o->high_watermark);
    oj_key(&j, "lag");
    oj_int(&j, o->lag);
    oj_key(&j, "member_id");
    oj_str(&j, o->member_id);
    oj_object_end(&j);
  }
  oj_array_end(&j);
  oj_object_end(&j);
  oj_end(&j);
}

static int group_describe_text(const struct cairn_group_info *g)
{
  printf("group %s: %s, strategy %s, generation %" PRId32 ", coordinator node %" PRIu64
         ", %zu members\n",
         g->group, g->state, g->strategy[0] != '\0' ? g->strategy : "-", g->generation,
         g->coordinator_id, g->member_count);
  int rv = 0;
  if (g->member_count > 0) {
    printf("\n");
    /* The INSTANCE column only where static members are (Kafka's
     * group.instance.id): the table stays as it was for the rest. */
    bool statics = false;
    for (size_t i = 0; i < g->member_count; i++) {
      statics = statics || g->members[i].group_instance_id[0] != '\0';
    }
    static const char *const head[] = {"MEMBER", "CLIENT", "PARTITIONS", "INSTANCE"};
    struct tbl tb;
    tbl_init(&tb, statics ? 4 : 3, head);
    for (size_t i = 0; i < g->member_count && rv == 0; i++) {
      const struct cairn_group_member_info *m = &g->members[i];
      char parts[1024] = "";
      size_t used = 0;
      for (size_t k = 0; k < m->assignment_count && used < sizeof parts; k++) {
        used +=
            (size_t)snprintf(parts + used, sizeof parts - used, "%s%s/%" PRId32, k > 0 ? "," : "",
                             m->assignment[k].topic, m->assignment[k].partition);
      }
      const char *instance = m->group_instance_id[0] != '\0' ? m->group_instance_id : "-";
      const char *row[] = {m->member_id, m->client_id, used > 0 ? parts : "-", instance};
      rv = tbl_row(&tb, row);
    }
    tbl_print(&tb, stdout);
    tbl_free(&tb);
  }
  if (g->offset_count > 0 && rv == 0) {
    printf("\n");
    static const char *const head[] = {"TOPIC",          "PARTITION", "COMMITTED",
                                       "HIGH-WATERMARK", "LAG",       "MEMBER"};
    struct tbl tb;
    tbl_init(&tb, 6, head);
    for (size_t i = 0; i < g->offset_count && rv == 0; i++) {
      const struct cairn_group_offset_info *o = &g->offsets[i];
      char part[16], committed[24], hw[24], lag[24];
      snprintf(part, sizeof part, "%" PRId32, o->partition);
      cli_offset_str(committed, sizeof committed, o->committed);
      cli_offset_str(hw, sizeof hw, o->high_watermark);
      cli_offset_str(lag, sizeof lag, o->lag);
      const char *row[] = {o->topic, part, committed,
                           hw,       lag,  o->member_id[0] != '\0' ? o->member_id : "-"};
      rv = tbl_row(&tb, row);
    }
    tbl_print(&tb, stdout);
    tbl_free(&tb);
  }
  return rv;
}

static int group_describe(struct cli *c, const char *group)
{
  const char *cmd = "group describe";
  int rv = cli_connect(c, cmd);
  if (rv != CLI_OK) {
    return rv;
  }
  struct cairn_group_info *g = NULL;
  char err[256] = "";
  rv = cairn_sync_describe_group(c->sync, group, &g, err, sizeof err);
  if (rv != 0) {
    return cli_fail(cmd, "%s: %s", group, err[0] != '\0' ? err : cairn_strerror(rv));
  }
  if (c->json) {
    group_describe_json(g);
  } else {
    rv = group_describe_text(g);
  }
  cairn_group_info_free(g);
  return rv == 0 ? CLI_OK : cli_fail(cmd, "out of memory");
}

int cli_group(struct cli *c, int argc, char **argv)
{
  if (argc < 2 || strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0) {
    group_help(argc < 2 ? stderr : stdout);
    return argc < 2 ? CLI_USAGE : CLI_OK;
  }
  const char *sub = argv[1];
  if (strcmp(sub, "reset-offsets") == 0) {
    return cli_group_reset(c, argc - 1, argv + 1, group_help); /* group_reset.c */
  }
  if (strcmp(sub, "delete") == 0) {
    return cli_group_delete(c, argc - 1, argv + 1, group_help);
  }
  if (strcmp(sub, "delete-offsets") == 0) {
    return cli_group_delete_offsets(c, argc - 1, argv + 1, group_help);
  }
  if (strcmp(sub, "remove-member") == 0) {
    return cli_group_remove_member(c, argc - 1, argv + 1, group_help);
  }
  if (strcmp(sub, "list") != 0 && strcmp(sub, "describe") != 0) {
    return cli_usage_error(
        "group",
        "unknown subcommand '%s' (list, describe, reset-offsets, delete, delete-offsets, "
        "remove-member)",
        sub);
  }
  char cmd[32];
  snprintf(cmd, sizeof cmd, "group %s", sub);
  int first;
  int rv = cli_getopt(c, cmd, argc - 1, argv + 1, NULL, NULL, NULL, NULL, group_help, &first);
  if (rv != CLI_OK) {
    return rv == CLI_HELP_DONE ? CLI_OK : rv;
  }
  char **ops = argv + 1 + first;
  int nops = argc - 1 - first;
  if (strcmp(sub, "list") == 0) {
    return nops == 0 ? group_list(c) : cli_usage_error(cmd, "'%s' is extra", ops[0]);
  }
  if (nops != 1) {
    return cli_usage_error(cmd, nops == 0 ? "which group?" : "one group at a time");
  }
  return group_describe(c, ops[0]);
}

/* ---- consume -g ---- */

struct group_consume {
  struct rp_format format;
  uint64_t count; /* 0: no limit */
  uint64_t printed;
  bool json;
  bool at_end; /* -e */
  bool latest;
  const char *group;
  const char *instance; /* --group-instance-id: NULL dynamic */
  bool closed;
  int error;
};

static volatile sig_atomic_t group_interrupted;

static void group_on_sigint(int sig)
{
  (void)sig;
  group_interrupted = 1;
}

static void group_on_records(struct cairn_consumer *cons, int status, const char *topic,
                             int32_t partition, const struct cairn_record *records, size_t count,
                             void *data)
{
  struct group_consume *gs = data;
  if (status != 0) {
    fprintf(stderr, "cairn consume: %s/%" PRId32 ": %s\n", topic, partition,
            cairn_strerror(status));
    return;
  }
  size_t n = count;
  if (gs->count > 0 && gs->count - gs->printed < n) {
    n = (size_t)(gs->count - gs->printed);
  }
  for (size_t i = 0; i < n; i++) {
    rp_print(&gs->format, gs->json, &records[i]);
    gs->printed++;
  }
  fflush(stdout);
  /* -n reached inside this batch: the seek tells the group consumer to
   * commit the first record not printed, so that the next reader of the
   * group starts there. */
  if (n < count && cairn_consumer_seek(cons, topic, partition, records[n].offset) != 0) {
    fprintf(stderr, "cairn consume: %s/%" PRId32 ": could not keep offset %" PRId64
                    " uncommitted\n", topic, partition, records[n].offset);
    gs->error = CAIRN_EINVAL;
  }
  if (gs->count > 0 && gs->printed >= gs->count) {
    cairn_consumer_stop(cons);
  }
}

static void group_on_error(struct cairn_group_consumer *gc, int status, const char *errmsg,
                           void *data)
{
  struct group_consume *gs = data;
  fprintf(stderr, "cairn consume: group %s: %s: %s\n", gs->group, cairn_strerror(status), errmsg);
  gs->error = status;
}

static void group_on_closed(struct cairn_group_consumer *gc, void *data)
{
  ((struct group_consume *)data)->closed = true;
}

static int group_consume_opt(void *ctx, int o, const char *arg)
{
  struct group_consume *gs = ctx;
  switch (o) {
  case 'g':
    gs->group = arg;
    return CLI_OK;
  case 'i':
    gs->instance = arg;
    return CLI_OK;
  case 'c': /* kcat's spelling */
  case 'n':
    return cli_parse_u64("consume", "-n", arg, 1, UINT64_MAX, &gs->count) == 0 ? CLI_OK : CLI_USAGE;
  case 'e':
    gs->at_end = true;
    return CLI_OK;
  case 'f':
    return rp_format_parse("consume", arg, &gs->format);
  case 'o':
    if (strcmp(arg, "beginning") == 0 || strcmp(arg, "end") == 0) {
      gs->latest = strcmp(arg, "end") == 0;
      return CLI_OK;
    }
    return cli_usage_error("consume", "with -g, -o is beginning or end (for partitions "
                                      "the group has no committed offset for)");
  default:
    return CLI_USAGE;
  }
}

int cli_group_consume(struct cli *c, int argc, char **argv)
{
  const char *cmd = "consume";
  static const struct option own[] = {{"group", required_argument, NULL, 'g'},
                                      {"count", required_argument, NULL, 'n'},
                                      {"offset", required_argument, NULL, 'o'},
                                      {"format", required_argument, NULL, 'f'},
                                      {"exit-at-end", no_argument, NULL, 'e'},
                                      {"group-instance-id", required_argument, NULL, 'i'},
                                      {NULL, 0, NULL, 0}};
  struct group_consume gs = {0};
  int first;
  int rv =
      cli_getopt(c, cmd, argc, argv, "g:n:c:o:f:e", own, group_consume_opt, &gs, group_help, &first);
  if (rv != CLI_OK) {
    return rv == CLI_HELP_DONE ? CLI_OK : rv;
  }
  if (first >= argc) {
    return cli_usage_error(cmd, "which topics? (cairn consume -g GROUP TOPIC...)");
  }
  if (argc - first > GROUP_MAX_TOPICS) {
    return cli_usage_error(cmd, "at most %d topics", GROUP_MAX_TOPICS);
  }
  gs.json = c->json;
  if ((rv = cli_connect(c, cmd)) != CLI_OK) {
    return rv;
  }
  struct cairn_client *client = cairn_sync_client(c->sync);
  struct cairn_group_options o;
  cairn_group_options_init(&o);
  o.offset_reset = gs.latest ? CAIRN_OFFSET_SPEC_LATEST : CAIRN_OFFSET_SPEC_EARLIEST;
  o.auto_commit_interval_ms = 1000;
  o.on_error = group_on_error;
  o.cb_data = &gs;
  o.group_instance_id = gs.instance;
  struct cairn_group_consumer *gc = NULL;
  rv = cairn_group_consumer_new(client, gs.group, (const char *const *)(argv + first),
                                (size_t)(argc - first), &o, &gc);
  if (rv != 0) {
    return cli_fail_call(c, cmd, gs.group, rv);
  }
  rv = cairn_group_consumer_start(gc, group_on_records, &gs);
  if (rv != 0) {
    cairn_group_consumer_close(gc, group_on_closed, &gs);
  }
  struct sigaction sa, old;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = group_on_sigint;
  sigaction(SIGINT, &sa, &old);
  uv_loop_t *loop = cairn_client_loop(client);
  while (rv == 0 && !group_interrupted && gs.error == 0 &&
         (gs.count == 0 || gs.printed < gs.count) && !(gs.at_end && cairn_group_at_end(gc))) {
    uv_run(loop, UV_RUN_ONCE);
  }
  sigaction(SIGINT, &old, NULL);
  if (rv == 0) {
    cairn_group_consumer_close(gc, group_on_closed, &gs); /* commits, then leaves */
  }
  while (!gs.closed) {
    uv_run(loop, UV_RUN_ONCE);
  }
  return rv != 0 || gs.error != 0 ? CLI_FAIL : CLI_OK;
}
