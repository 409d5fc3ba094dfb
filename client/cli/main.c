/* main.c - `cairn`, the command line of Cairn: a thin program over
 * libcairn's blocking API. Reads the options common to every command,
 * then hands the rest to the command group (topic.c, produce.c,
 * consume.c, cluster.c, node.c). */
#include "cli.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CLI_VERSION "0.1.0"

static void main_usage(FILE *out)
{
  fprintf(out,
          "usage: cairn [options] COMMAND ...\n"
          "\n"
          "commands:\n"
          "  topic create NAME --partitions N --replication-factor R\n"
          "  topic list\n"
          "  topic describe NAME\n"
          "  topic delete NAME\n"
          "  topic add-partitions NAME --partitions N\n"
          "  topic alter-config NAME --set KEY=VALUE [--delete KEY]\n"
          "  topic delete-records NAME --offset N|end [--partition P]\n"
          "  produce TOPIC              send stdin to TOPIC, one message per line\n"
          "  consume TOPIC              print TOPIC's messages, one value per line\n"
          "  consume -g GROUP TOPIC...  the same as a member of a consumer group\n"
          "  group list                 consumer groups\n"
          "  group describe GROUP       members, committed offsets, lag\n"
          "  group reset-offsets GROUP --topic TOPIC ...\n"
          "  group delete GROUP         drop an empty group and its committed offsets\n"
          "  cluster status             nodes, controller leader, every partition's\n"
          "                             leader, replicas, in-sync replicas, watermarks\n"
          "  node decommission ID       move node ID's partitions away, then remove it\n"
          "  node recommission ID       cancel a decommission still under way\n"
          "  user create NAME           a user of the client port (SCRAM; the password\n"
          "                             comes from stdin)\n"
          "  user delete NAME\n"
          "  user list\n"
          "  acl add ...                access control entries (--authorizer acl)\n"
          "  acl remove ...\n"
          "  acl list\n"
          "\n"
          "`cairn COMMAND --help` says more about each.\n"
          "\n"
          "%s"
          "  --version          print the version\n"
          "\n"
          "exit status: 0 done; 1 the cluster refused, failed or could not be\n"
          "reached (the message says what to do); 2 a bad command line.\n",
          cli_common_help);
}

/* Reads "--name VALUE" or "--name=VALUE" at argv[*i]; returns the value,
 * advancing *i past it, or NULL if argv[*i] is not that option. */
static const char *main_opt_value(int argc, char **argv, int *i, const char *lname,
                                  const char *sname, bool *missing)
{
  const char *a = argv[*i];
  size_t n = strlen(lname);
  if (strncmp(a, lname, n) == 0 && a[n] == '=') {
    return a + n + 1;
  }
  if (sname != NULL && strncmp(a, sname, 2) == 0 && a[2] != '\0') {
    return a + 2; /* -bHOST:PORT */
  }
  if (strcmp(a, lname) == 0 || (sname != NULL && strcmp(a, sname) == 0)) {
    if (*i + 1 >= argc) {
      *missing = true;
      return NULL;
    }
    *i += 1;
    return argv[*i];
  }
  return NULL;
}

int main(int argc, char **argv)
{
  /* A reader of our output that goes away (`cairn consume ... | head`)
   * ends writes with EPIPE, which the commands treat as the end. */
  signal(SIGPIPE, SIG_IGN);
  struct cli c = {.bootstrap = getenv("CAIRN_BOOTSTRAP"), .timeout_ms = CLI_DEFAULT_TIMEOUT_MS};
  if (c.bootstrap == NULL || c.bootstrap[0] == '\0') {
    c.bootstrap = CLI_DEFAULT_BOOTSTRAP;
  }
  int i = 1;
  for (; i < argc && argv[i][0] == '-'; i++) {
    const char *a = argv[i];
    bool missing = false;
    const char *v;
    if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
      main_usage(stdout);
      return CLI_OK;
    }
    if (strcmp(a, "--version") == 0) {
      printf("cairn %s (libcairn %d.%d)\n", CLI_VERSION, CAIRN_VERSION_MAJOR, CAIRN_VERSION_MINOR);
      return CLI_OK;
    }
    if (strcmp(a, "--json") == 0) {
      c.json = true;
      continue;
    }
    if (strcmp(a, "--tls") == 0) {
      c.tls = true;
      continue;
    }
    static const struct {
      const char *name;
      int opt;
    } tls_opts[] = {{"--tls-ca", CLI_OPT_TLS_CA},
                    {"--tls-cert", CLI_OPT_TLS_CERT},
                    {"--tls-key", CLI_OPT_TLS_KEY},
                    {"--user", CLI_OPT_USER}};
    bool taken = false;
    for (size_t k = 0; k < 4 && !taken && !missing; k++) {
      if ((v = main_opt_value(argc, argv, &i, tls_opts[k].name, NULL, &missing)) != NULL) {
        taken = cli_common_opt(&c, "", tls_opts[k].opt, v) > 0;
      }
    }
    if (taken) {
      continue;
    }
    if ((v = main_opt_value(argc, argv, &i, "--bootstrap", "-b", &missing)) != NULL) {
      if (cli_common_opt(&c, "", 'b', v) < 0) {
        return CLI_USAGE;
      }
      continue;
    }
    if (!missing && (v = main_opt_value(argc, argv, &i, "--timeout-ms", NULL, &missing)) != NULL) {
      if (cli_common_opt(&c, "", CLI_OPT_TIMEOUT, v) < 0) {
        return CLI_USAGE;
      }
      continue;
    }
    if (missing) {
      fprintf(stderr, "cairn: %s needs a value (see: cairn --help)\n", a);
      return CLI_USAGE;
    }
    fprintf(stderr, "cairn: unknown option '%s' (see: cairn --help)\n", a);
    return CLI_USAGE;
  }
  if (i >= argc) {
    main_usage(stderr);
    return CLI_USAGE;
  }
  static const struct {
    const char *name;
    int (*run)(struct cli *, int, char **);
  } groups[] = {{"topic", cli_topic},
                {"produce", cli_produce},
                {"consume", cli_consume},
                {"cluster", cli_cluster},
                {"node", cli_node},
                {"user", cli_user},
                {"acl", cli_acl},
                {"group", cli_group}};
  for (size_t g = 0; g < sizeof groups / sizeof groups[0]; g++) {
    if (strcmp(argv[i], groups[g].name) == 0) {
      int code = groups[g].run(&c, argc - i, argv + i);
      cli_close(&c);
      return code;
    }
  }
  fprintf(stderr, "cairn: unknown command '%s' (commands:", argv[i]);
  for (size_t g = 0; g < sizeof groups / sizeof groups[0]; g++) {
    fprintf(stderr, "%s %s", g == 0 ? "" : ",", groups[g].name);
  }
  fprintf(stderr, "; see: cairn --help)\n");
  return CLI_USAGE;
}
