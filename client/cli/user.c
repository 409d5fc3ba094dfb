/* user.c - `cairn user create|delete|list`: the users of the client port
 * (docs/security.md). A password is read from stdin (its first line) and
 * turned into SCRAM-SHA-256 and SCRAM-SHA-512 credentials by libcairn; it
 * is never sent. */
#include "cli.h"
#include "output.h"

#include <stdlib.h>
#include <string.h>

static void user_help(FILE *out)
{
  fprintf(out,
          "usage: cairn user create NAME   (the password: the first line of stdin)\n"
          "       cairn user delete NAME\n"
          "       cairn user list\n"
          "\n"
          "Users of the client and Kafka ports, kept by the cluster's metadata as\n"
          "SCRAM-SHA-256 and SCRAM-SHA-512 credentials: the password itself is never\n"
          "sent to a node. `create` also\n"
          "changes the password of an existing user. Names: 1..64 of A-Z a-z 0-9 . _ @ -.\n"
          "\n"
          "  printf '%%s\\n' \"$PASSWORD\" | cairn user create alice\n"
          "\n"
          "%s",
          cli_common_help);
}

/* The first line of stdin, without its line break, into buf. */
static int user_read_password(const char *cmd, char *buf, size_t cap)
{
  if (fgets(buf, (int)cap, stdin) == NULL) {
    return cli_usage_error(cmd, "no password on stdin (its first line is the password)");
  }
  size_t n = strcspn(buf, "\r\n");
  if (buf[n] == '\0' && n == cap - 1) {
    return cli_usage_error(cmd, "the password is longer than %zu bytes", cap - 2);
  }
  buf[n] = '\0';
  if (n == 0) {
    return cli_usage_error(cmd, "an empty password");
  }
  return CLI_OK;
}

int cli_user(struct cli *c, int argc, char **argv)
{
  if (argc < 2 || strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0) {
    user_help(argc < 2 ? stderr : stdout);
    return argc < 2 ? CLI_USAGE : CLI_OK;
  }
  const char *sub = argv[1];
  const char *cmd = strcmp(sub, "create") == 0   ? "user create"
                    : strcmp(sub, "delete") == 0 ? "user delete"
                    : strcmp(sub, "list") == 0   ? "user list"
                                                 : NULL;
  if (cmd == NULL) {
    return cli_usage_error("user", "unknown subcommand '%s' (create, delete, list)", sub);
  }
  int first;
  int rv = cli_getopt(c, cmd, argc - 1, argv + 1, NULL, NULL, NULL, NULL, user_help, &first);
  if (rv != CLI_OK) {
    return rv == CLI_HELP_DONE ? CLI_OK : rv;
  }
  char **ops = argv + 1 + first;
  int nops = argc - 1 - first;
  bool list = strcmp(sub, "list") == 0;
  if (nops != (list ? 0 : 1)) {
    return cli_usage_error(cmd, list ? "no arguments" : "one user NAME");
  }
  char password[257];
  if (strcmp(sub, "create") == 0 &&
      (rv = user_read_password(cmd, password, sizeof password)) != CLI_OK) {
    return rv;
  }
  if ((rv = cli_connect(c, cmd)) != CLI_OK) {
    return rv;
  }
  if (list) {
    struct cairn_user_list *l = NULL;
    rv = cairn_sync_list_users(c->sync, &l);
    if (rv != 0) {
      return cli_fail_call(c, cmd, "users", rv);
    }
    if (c->json) {
      struct oj j;
      oj_init(&j, stdout, true);
      oj_array_begin(&j);
      for (size_t i = 0; i < l->count; i++) {
        oj_str(&j, l->names[i]);
      }
      oj_array_end(&j);
      oj_end(&j);
    } else {
      for (size_t i = 0; i < l->count; i++) {
        printf("%s\n", l->names[i]);
      }
    }
    cairn_user_list_free(l);
    return CLI_OK;
  }
  if (strcmp(sub, "create") == 0) {
    rv = cairn_sync_user_set(c->sync, ops[0], password);
    memset(password, 0, sizeof password);
  } else {
    rv = cairn_sync_user_delete(c->sync, ops[0]);
  }
  if (rv != 0) {
    char what[96];
    snprintf(what, sizeof what, "user %.64s", ops[0]);
    return cli_fail_call(c, cmd, what, rv);
  }
  if (!c->json) {
    printf("user %s %s\n", ops[0], strcmp(sub, "create") == 0 ? "set" : "deleted");
  }
  return CLI_OK;
}
