/* acl.c - `cairn acl add|remove|list`: the access control entries that
 * nodes started with --authorizer acl check every request against
 * (docs/security.md, "Authorization"). */
#include "cli.h"
#include "output.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define ACL_OPT_PRINCIPAL 2000
#define ACL_OPT_TOPIC 2001
#define ACL_OPT_TOPIC_PREFIX 2002
#define ACL_OPT_GROUP 2003
#define ACL_OPT_GROUP_PREFIX 2004
#define ACL_OPT_CLUSTER 2005
#define ACL_OPT_OPERATION 2006
#define ACL_OPT_ALLOW 2007
#define ACL_OPT_DENY 2008
#define ACL_MAX_OPS 7

static const char *const acl_op_names[] = {NULL,     "read",     "write", "create",
                                           "delete", "describe", "alter", "all"};

static void acl_help(FILE *out)
{
  fprintf(out,
          "usage: cairn acl add    --principal P RESOURCE --operation OP[,OP...] [--allow|--deny]\n"
          "       cairn acl remove --principal P RESOURCE --operation OP[,OP...] [--allow|--deny]\n"
          "       cairn acl list   [--principal P] [RESOURCE]\n"
          "\n"
          "Access control entries, kept by the cluster's metadata. Nodes started with\n"
          "--authorizer acl check every request against them: a matching deny wins, then\n"
          "a matching allow; nothing matching means no (super-users and nodes pass).\n"
          "\n"
          "  --principal P        User:NAME, User:ANONYMOUS (not logged in), Node:ID, or *\n"
          "RESOURCE, one of:\n"
          "  --topic NAME         a topic\n"
          "  --topic-prefix P     every topic whose name starts with P (\"\" for all)\n"
          "  --group NAME         a consumer group\n"
          "  --group-prefix P     every group whose name starts with P\n"
          "  --cluster            the cluster (create topics, users, ACLs, nodes)\n"
          "  --operation OP       read, write, create, delete, describe, alter, or all\n"
          "                       (one entry for every operation); a comma-separated\n"
          "                       list adds (removes) one entry each\n"
          "  --allow | --deny     allow (the default) or deny\n"
          "\n"
          "`remove` removes the entry exactly as added. `list` filters on the principal\n"
          "and the resource given (every entry without them).\n"
          "\n"
          "  cairn acl add --principal User:alice --topic-prefix orders. --operation read,write\n"
          "  cairn acl add --principal User:alice --group billing --operation read\n"
          "  cairn acl add --principal '*' --topic audit --operation write --deny\n"
          "  cairn acl list --principal User:alice --json\n"
          "\n"
          "%s",
          cli_common_help);
}

struct acl_args {
  const char *cmd;
  const char *principal;
  int type; /* 0: none given */
  const char *resource;
  bool prefix;
  int nresources; /* resource options given */
  enum cairn_acl_op ops[ACL_MAX_OPS];
  int nops;
  int allow; /* -1 not given, 0 deny, 1 allow */
};

static int acl_parse_ops(struct acl_args *a, const char *arg)
{
  const char *p = arg;
  while (*p != '\0') {
    size_t len = strcspn(p, ",");
    int op = 0;
    for (int i = 1; i <= ACL_MAX_OPS; i++) {
      if (strlen(acl_op_names[i]) == len && strncasecmp(p, acl_op_names[i], len) == 0) {
        op = i;
      }
    }
    if (op == 0) {
      return cli_usage_error(a->cmd,
                             "--operation: '%.*s' is not read, write, create, delete, describe, "
                             "alter or all",
                             (int)(len < 40 ? len : 40), p);
    }
    bool dup = false;
    for (int i = 0; i < a->nops; i++) {
      dup = dup || a->ops[i] == (enum cairn_acl_op)op;
    }
    if (!dup) {
      a->ops[a->nops++] = (enum cairn_acl_op)op;
    }
    p += len;
    if (*p == ',') {
      p++;
    }
  }
  if (a->nops == 0) {
    return cli_usage_error(a->cmd, "--operation: which? (read, write, create, delete, "
                                   "describe, alter)");
  }
  return CLI_OK;
}

static int acl_opt(void *ctx, int o, const char *arg)
{
  struct acl_args *a = ctx;
  switch (o) {
  case ACL_OPT_PRINCIPAL:
    a->principal = arg;
    return CLI_OK;
  case ACL_OPT_TOPIC:
  case ACL_OPT_TOPIC_PREFIX:
  case ACL_OPT_GROUP:
  case ACL_OPT_GROUP_PREFIX:
  case ACL_OPT_CLUSTER:
    a->nresources++;
    a->type = o == ACL_OPT_CLUSTER                               ? CAIRN_ACL_CLUSTER
              : o == ACL_OPT_TOPIC || o == ACL_OPT_TOPIC_PREFIX ? CAIRN_ACL_TOPIC
                                                                 : CAIRN_ACL_GROUP;
    a->resource = arg != NULL ? arg : "";
    a->prefix = o == ACL_OPT_TOPIC_PREFIX || o == ACL_OPT_GROUP_PREFIX;
    return CLI_OK;
  case ACL_OPT_OPERATION:
    return acl_parse_ops(a, arg);
  case ACL_OPT_ALLOW:
  case ACL_OPT_DENY:
    if (a->allow != -1 && a->allow != (o == ACL_OPT_ALLOW)) {
      return cli_usage_error(a->cmd, "--allow or --deny, not both");
    }
    a->allow = o == ACL_OPT_ALLOW;
    return CLI_OK;
  default:
    return CLI_USAGE;
  }
}

static const char *acl_type_name(int type)
{
  return type == CAIRN_ACL_TOPIC ? "topic" : type == CAIRN_ACL_GROUP ? "group" : "cluster";
}

static const char *acl_op_name(enum cairn_acl_op op)
{
  return op >= CAIRN_ACL_READ && op <= CAIRN_ACL_ALL ? acl_op_names[op] : "?";
}

/* "topic orders", "topic orders.*" (a prefix), "cluster". */
static void acl_resource_text(const struct cairn_acl *e, char *buf, size_t cap)
{
  if (e->resource_type == CAIRN_ACL_CLUSTER) {
    snprintf(buf, cap, "cluster");
  } else {
    snprintf(buf, cap, "%s %s%s", acl_type_name(e->resource_type), e->resource,
             e->prefix ? "*" : "");
  }
}

static int acl_list(struct cli *c, struct acl_args *a)
{
  struct cairn_acl_list *l = NULL;
  int rv = cairn_sync_list_acls(c->sync, a->principal, a->type,
                                a->type == CAIRN_ACL_CLUSTER ? NULL : a->resource, &l);
  if (rv != 0) {
    return cli_fail_call(c, a->cmd, "access control entries", rv);
  }
  struct oj j;
  struct tbl t;
  static const char *const head[] = {"PRINCIPAL", "PERMISSION", "OPERATION", "RESOURCE"};
  if (c->json) {
    oj_init(&j, stdout, true);
    oj_array_begin(&j);
  } else {
    tbl_init(&t, 4, head);
  }
  for (size_t i = 0; i < l->count && rv == 0; i++) {
    const struct cairn_acl *e = &l->entries[i];
    if (a->nresources > 0 && a->type != CAIRN_ACL_CLUSTER && e->prefix != a->prefix) {
      continue; /* --topic lists exact entries, --topic-prefix prefix ones */
    }
    if (c->json) {
      oj_object_begin(&j);
      oj_key(&j, "principal");
      oj_str(&j, e->principal);
      oj_key(&j, "resource_type");
      oj_str(&j, acl_type_name(e->resource_type));
      oj_key(&j, "resource");
      oj_str(&j, e->resource);
      oj_key(&j, "prefix");
      oj_bool(&j, e->prefix);
      oj_key(&j, "operation");
      oj_str(&j, acl_op_name(e->operation));
      oj_key(&j, "permission");
      oj_str(&j, e->allow ? "allow" : "deny");
      oj_object_end(&j);
      continue;
    }
    char res[300];
    acl_resource_text(e, res, sizeof res);
    const char *cells[] = {e->principal, e->allow ? "allow" : "deny", acl_op_name(e->operation),
                           res};
    rv = tbl_row(&t, cells);
  }
  if (c->json) {
    oj_array_end(&j);
    oj_end(&j);
  } else {
    if (rv == 0) {
      tbl_print(&t, stdout);
    }
    tbl_free(&t);
  }
  cairn_acl_list_free(l);
  return rv == 0 ? CLI_OK : cli_fail(a->cmd, "out of memory");
}

int cli_acl(struct cli *c, int argc, char **argv)
{
  if (argc < 2 || strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0) {
    acl_help(argc < 2 ? stderr : stdout);
    return argc < 2 ? CLI_USAGE : CLI_OK;
  }
  const char *sub = argv[1];
  struct acl_args a = {.allow = -1};
  a.cmd = strcmp(sub, "add") == 0      ? "acl add"
          : strcmp(sub, "remove") == 0 ? "acl remove"
          : strcmp(sub, "list") == 0   ? "acl list"
                                       : NULL;
  if (a.cmd == NULL) {
    return cli_usage_error("acl", "unknown subcommand '%s' (add, remove, list)", sub);
  }
  static const struct option own[] = {
      {"principal", required_argument, NULL, ACL_OPT_PRINCIPAL},
      {"topic", required_argument, NULL, ACL_OPT_TOPIC},
      {"topic-prefix", required_argument, NULL, ACL_OPT_TOPIC_PREFIX},
      {"group", required_argument, NULL, ACL_OPT_GROUP},
      {"group-prefix", required_argument, NULL, ACL_OPT_GROUP_PREFIX},
      {"cluster", no_argument, NULL, ACL_OPT_CLUSTER},
      {"operation", required_argument, NULL, ACL_OPT_OPERATION},
      {"allow", no_argument, NULL, ACL_OPT_ALLOW},
      {"deny", no_argument, NULL, ACL_OPT_DENY},
      {NULL, 0, NULL, 0}};
  int first;
  int rv = cli_getopt(c, a.cmd, argc - 1, argv + 1, "", own, acl_opt, &a, acl_help, &first);
  if (rv != CLI_OK) {
    return rv == CLI_HELP_DONE ? CLI_OK : rv;
  }
  if (argc - 1 - first != 0) {
    return cli_usage_error(a.cmd, "unexpected argument '%s' (every value goes with an option)",
                           argv[1 + first]);
  }
  if (a.nresources > 1) {
    return cli_usage_error(a.cmd, "one resource: --topic, --topic-prefix, --group, "
                                  "--group-prefix or --cluster");
  }
  bool list = strcmp(sub, "list") == 0;
  if (list) {
    if (a.nops > 0 || a.allow != -1) {
      return cli_usage_error(a.cmd, "list filters on --principal and a resource only");
    }
  } else {
    if (a.principal == NULL) {
      return cli_usage_error(a.cmd, "whose entry? --principal User:NAME (or Node:ID, *)");
    }
    if (a.nresources == 0) {
      return cli_usage_error(a.cmd, "on what? --topic, --topic-prefix, --group, "
                                    "--group-prefix or --cluster");
    }
    if (a.nops == 0) {
      return cli_usage_error(a.cmd, "which --operation? (read, write, create, delete, "
                                    "describe, alter)");
    }
    if (!a.prefix && a.type != CAIRN_ACL_CLUSTER && a.resource[0] == '\0') {
      return cli_usage_error(a.cmd, "an empty name (--topic-prefix \"\" means every topic)");
    }
  }
  if ((rv = cli_connect(c, a.cmd)) != CLI_OK) {
    return rv;
  }
  if (list) {
    return acl_list(c, &a);
  }
  bool add = strcmp(sub, "add") == 0;
  for (int i = 0; i < a.nops; i++) {
    struct cairn_acl e = {.principal = a.principal,
                          .resource_type = (enum cairn_acl_resource)a.type,
                          .resource = a.type == CAIRN_ACL_CLUSTER ? "" : a.resource,
                          .prefix = a.prefix,
                          .operation = a.ops[i],
                          .allow = a.allow != 0};
    char what[400];
    struct cairn_acl shown = e;
    acl_resource_text(&shown, what, sizeof what);
    rv = add ? cairn_sync_acl_add(c->sync, &e) : cairn_sync_acl_remove(c->sync, &e);
    if (rv != 0) {
      char full[480];
      snprintf(full, sizeof full, "%s %s %s %.300s", e.allow ? "allow" : "deny", a.principal,
               acl_op_name(e.operation), what);
      return cli_fail_call(c, a.cmd, full, rv);
    }
    if (!c->json) {
      printf("%s: %s %s %s %s\n", add ? "added" : "removed", e.allow ? "allow" : "deny",
             a.principal, acl_op_name(e.operation), what);
    }
  }
  return CLI_OK;
}
