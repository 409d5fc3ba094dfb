/* node.c - `cairn node decommission ID`: the controller moves the node's
 * partition replicas to other nodes, then marks it removed; `cairn node
 * recommission ID` cancels that while the node is still draining. */
#include "cli.h"
#include "output.h"

#include <inttypes.h>
#include <string.h>

static void node_help(FILE *out)
{
  fprintf(out,
          "usage: cairn node decommission ID\n"
          "       cairn node recommission ID\n"
          "\n"
          "Asks the controller to move every partition replica of node ID to the\n"
          "other nodes; once it holds none, the node is marked removed and can be\n"
          "stopped. The command returns when the controller has accepted the\n"
          "request; follow the move with `cairn cluster status` (the node's state\n"
          "goes from draining to removed). Refused when a partition on node ID has\n"
          "no other alive node to move to (say 3 nodes and replication factor 3):\n"
          "the message names those partitions.\n"
          "\n"
          "recommission cancels a decommission still under way: the node is alive\n"
          "again and keeps the replicas not yet moved.\n"
          "\n"
          "%s",
          cli_common_help);
}

int cli_node(struct cli *c, int argc, char **argv)
{
  if (argc < 2 || strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0) {
    node_help(argc < 2 ? stderr : stdout);
    return argc < 2 ? CLI_USAGE : CLI_OK;
  }
  bool recommission = strcmp(argv[1], "recommission") == 0;
  if (!recommission && strcmp(argv[1], "decommission") != 0) {
    return cli_usage_error("node", "unknown subcommand '%s' (decommission, recommission)",
                           argv[1]);
  }
  const char *cmd = recommission ? "node recommission" : "node decommission";
  int first;
  int rv = cli_getopt(c, cmd, argc - 1, argv + 1, NULL, NULL, NULL, NULL, node_help, &first);
  if (rv != CLI_OK) {
    return rv == CLI_HELP_DONE ? CLI_OK : rv;
  }
  char **ops = argv + 1 + first;
  int nops = argc - 1 - first;
  if (nops != 1) {
    return cli_usage_error(cmd, nops == 0 ? "which node? (`cairn cluster status` lists the ids)"
                                          : "one node id at a time");
  }
  uint64_t id;
  if (cli_parse_u64(cmd, "ID", ops[0], 1, UINT64_MAX, &id) != 0) {
    return CLI_USAGE;
  }
  if ((rv = cli_connect(c, cmd)) != CLI_OK) {
    return rv;
  }
  rv = recommission ? cairn_sync_recommission_node(c->sync, id)
                    : cairn_sync_decommission_node(c->sync, id);
  if (rv != 0) {
    char what[48];
    snprintf(what, sizeof what, "node %" PRIu64, id);
    return cli_fail_call(c, cmd, what, rv);
  }
  if (c->json) {
    struct oj j;
    oj_init(&j, stdout, true);
    oj_object_begin(&j);
    oj_key(&j, recommission ? "recommissioned" : "decommissioning");
    oj_uint(&j, id);
    oj_object_end(&j);
    oj_end(&j);
  } else if (recommission) {
    printf("node %" PRIu64 " is alive again: its decommission is canceled\n", id);
  } else {
    printf("node %" PRIu64 " is being decommissioned: its partitions move to other nodes; "
           "`cairn cluster status` shows it as removed when done\n",
           id);
  }
  return CLI_OK;
}
