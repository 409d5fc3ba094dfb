/* cluster.c - `cairn cluster status`: the nodes, the controller leader and
 * every partition's leader, replicas, in-sync replicas and high watermark,
 * as one node sees them (DescribeCluster). */
#include "cli.h"
#include "output.h"

#include <inttypes.h>
#include <string.h>

static void cluster_help(FILE *out)
{
  fprintf(out,
          "usage: cairn cluster status\n"
          "\n"
          "Shows the cluster as the node that answers sees it: its id, the\n"
          "controller leader, every node (id, state, addresses, rack) and every\n"
          "partition (leader, replicas, in-sync replicas, log start, high\n"
          "watermark). A leader of 'none' means an election is going on or too\n"
          "few replicas are up; in-sync replicas fewer than the replicas mean\n"
          "some are catching up or down. DATABASE says whether a node has a\n"
          "PostgreSQL database (--pg-conninfo): only those host replicas of\n"
          "postgresql topics. Replicas whose store failed, on any node (they\n"
          "stop applying until it is back), are listed last: the node holding\n"
          "the replica, since when and the store's reason.\n"
          "\n"
          "With --json: {\"cluster_id\", \"controller_id\" (0: none), \"nodes\": [{\"id\",\n"
          "\"state\", \"client_address\", \"cluster_address\", \"admin_address\", \"rack\",\n"
          "\"has_database\"}], \"topics\": [{\"name\", ..., \"partitions\": [{\"partition\",\n"
          "\"leader_id\", \"replicas\", \"isr\", \"log_start_offset\", \"high_watermark\",\n"
          "\"store_failures\": [{\"node_id\", \"reason\", \"since_ms\"}], ...}]}]}.\n"
          "\n"
          "%s",
          cli_common_help);
}

static void cluster_json(const struct cairn_cluster_info *ci)
{
  struct oj j;
  oj_init(&j, stdout, true);
  oj_object_begin(&j);
  oj_key(&j, "cluster_id");
  oj_str(&j, ci->cluster_id);
  oj_key(&j, "controller_id");
  oj_uint(&j, ci->controller_id);
  oj_key(&j, "nodes");
  oj_array_begin(&j);
  for (size_t i = 0; i < ci->node_count; i++) {
    const struct cairn_node_info *n = &ci->nodes[i];
    oj_object_begin(&j);
    oj_key(&j, "id");
    oj_uint(&j, n->id);
    oj_key(&j, "state");
    oj_str(&j, n->state);
    oj_key(&j, "client_address");
    oj_str(&j, n->client_address);
    oj_key(&j, "cluster_address");
    oj_str(&j, n->cluster_address);
    oj_key(&j, "admin_address");
    oj_str(&j, n->admin_address);
    oj_key(&j, "rack");
    oj_str(&j, n->rack);
    oj_key(&j, "has_database");
    oj_bool(&j, n->has_database);
    oj_object_end(&j);
  }
  oj_array_end(&j);
  oj_key(&j, "topics");
  oj_array_begin(&j);
  for (size_t i = 0; i < ci->topic_count; i++) {
    cli_json_topic(&j, &ci->topics[i], true);
  }
  oj_array_end(&j);
  oj_object_end(&j);
  oj_end(&j);
}

static int cluster_table(const struct cairn_cluster_info *ci)
{
  if (ci->controller_id == 0) {
    printf("cluster %s, controller leader: none (an election is going on, or too few voters "
           "are up)\n\n",
           ci->cluster_id != NULL && ci->cluster_id[0] != '\0' ? ci->cluster_id : "(unnamed)");
  } else {
    printf("cluster %s, controller leader: node %" PRIu64 "\n\n",
           ci->cluster_id != NULL && ci->cluster_id[0] != '\0' ? ci->cluster_id : "(unnamed)",
           ci->controller_id);
  }
  static const char *const nhead[] = {"NODE",  "STATE", "CLIENT",  "CLUSTER",
                                      "ADMIN", "RACK",  "DATABASE"};
  struct tbl tb;
  tbl_init(&tb, 7, nhead);
  int rv = 0;
  for (size_t i = 0; i < ci->node_count && rv == 0; i++) {
    const struct cairn_node_info *n = &ci->nodes[i];
    char id[24];
    snprintf(id, sizeof id, "%" PRIu64 "%s", n->id, n->id == ci->controller_id ? "*" : "");
    const char *rack = n->rack != NULL && n->rack[0] != '\0' ? n->rack : "-";
    const char *row[] = {id,   n->state, n->client_address, n->cluster_address, n->admin_address,
                         rack, n->has_database ? "yes" : "no"};
    rv = tbl_row(&tb, row);
  }
  if (rv == 0) {
    tbl_print(&tb, stdout);
    if (ci->controller_id != 0) {
      printf("(* the controller leader)\n");
    }
  }
  tbl_free(&tb);
  if (rv != 0) {
    return rv;
  }
  printf("\n");
  if (ci->topic_count == 0) {
    printf("no topics (create one: cairn topic create NAME --partitions N "
           "--replication-factor R)\n");
    return 0;
  }
  static const char *const phead[] = {"TOPIC",   "PARTITION", "LEADER",        "REPLICAS",
                                      "IN-SYNC", "LOG-START", "HIGH-WATERMARK"};
  tbl_init(&tb, 7, phead);
  for (size_t i = 0; i < ci->topic_count && rv == 0; i++) {
    rv = cli_partition_rows(&tb, &ci->topics[i], true);
  }
  if (rv == 0) {
    tbl_print(&tb, stdout);
  }
  tbl_free(&tb);
  return rv == 0 ? cli_store_failures_print(ci->topics, ci->topic_count) : rv;
}

int cli_cluster(struct cli *c, int argc, char **argv)
{
  if (argc < 2 || strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0) {
    cluster_help(argc < 2 ? stderr : stdout);
    return argc < 2 ? CLI_USAGE : CLI_OK;
  }
  if (strcmp(argv[1], "status") != 0) {
    return cli_usage_error("cluster", "unknown subcommand '%s' (status)", argv[1]);
  }
  const char *cmd = "cluster status";
  int first;
  int rv = cli_getopt(c, cmd, argc - 1, argv + 1, NULL, NULL, NULL, NULL, cluster_help, &first);
  if (rv != CLI_OK) {
    return rv == CLI_HELP_DONE ? CLI_OK : rv;
  }
  if (first < argc - 1) {
    return cli_usage_error(cmd, "takes no operand ('%s')", argv[1 + first]);
  }
  if ((rv = cli_connect(c, cmd)) != CLI_OK) {
    return rv;
  }
  struct cairn_cluster_info *ci = NULL;
  rv = cairn_sync_describe_cluster(c->sync, &ci);
  if (rv != 0) {
    return cli_fail_call(c, cmd, "describing the cluster", rv);
  }
  if (c->json) {
    cluster_json(ci);
  } else {
    rv = cluster_table(ci);
  }
  cairn_cluster_info_free(ci);
  return rv == 0 ? CLI_OK : cli_fail(cmd, "%s", cairn_strerror(rv));
}
