/* kafka_acl.c - Kafka's ACL bindings and filters over Cairn's entries
 * (kafka_acl.h has the mapping). */
#include "kafka/kafka_acl.h"

#include "server/authz_principal.h"

#include <stdio.h>
#include <string.h>

/* Cairn's operation for a Kafka one (0: none). Index: enum kafka_acl_op. */
static const uint32_t kafka_acl_op_to_cairn[] = {
    [KAFKA_ACL_OP_ALL] = META_ACL_ALL,           [KAFKA_ACL_OP_READ] = META_ACL_READ,
    [KAFKA_ACL_OP_WRITE] = META_ACL_WRITE,       [KAFKA_ACL_OP_CREATE] = META_ACL_CREATE,
    [KAFKA_ACL_OP_DELETE] = META_ACL_DELETE,     [KAFKA_ACL_OP_ALTER] = META_ACL_ALTER,
    [KAFKA_ACL_OP_DESCRIBE] = META_ACL_DESCRIBE,
};
#define KAFKA_ACL_NOPS (int)(sizeof kafka_acl_op_to_cairn / sizeof kafka_acl_op_to_cairn[0])

static int8_t kafka_acl_op_of_cairn(uint32_t op)
{
  for (int k = 0; k < KAFKA_ACL_NOPS; k++) {
    if (kafka_acl_op_to_cairn[k] == op && op != 0) {
      return (int8_t)k;
    }
  }
  return KAFKA_ACL_OP_UNKNOWN;
}

/* Copies a request string into dst (cap bytes with the NUL); *has false
 * for null; *too_long when it does not fit or holds a NUL. */
static void kafka_acl_copy(struct kafka_str s, char *dst, size_t cap, bool *has, bool *too_long)
{
  dst[0] = '\0';
  *has = s.ptr != NULL;
  if (s.ptr == NULL) {
    return;
  }
  if (s.len >= cap || memchr(s.ptr, '\0', s.len) != NULL) {
    *too_long = true;
    return;
  }
  memcpy(dst, s.ptr, s.len);
  dst[s.len] = '\0';
}

void kafka_acl_get_spec(struct kafka_reader *r, int16_t version, bool filter,
                        struct kafka_acl_spec *s)
{
  memset(s, 0, sizeof *s);
  s->resource_type = kafka_get_i8(r);
  kafka_acl_copy(kafka_get_string(r), s->name, sizeof s->name, &s->has_name, &s->too_long);
  s->pattern = version >= 1 ? kafka_get_i8(r) : KAFKA_ACL_PAT_LITERAL;
  kafka_acl_copy(kafka_get_string(r), s->principal, sizeof s->principal, &s->has_principal,
                 &s->too_long);
  kafka_acl_copy(kafka_get_string(r), s->host, sizeof s->host, &s->has_host, &s->too_long);
  s->operation = kafka_get_i8(r);
  s->permission = kafka_get_i8(r);
  if (!filter && (!s->has_name || !s->has_principal || !s->has_host)) {
    s->too_long = true; /* a binding's strings are not nullable: never created */
  }
}

void kafka_acl_of_entry(const Cairn__Client__AclEntry *e, struct kafka_acl_spec *out)
{
  memset(out, 0, sizeof *out);
  const char *res = e->resource != NULL ? e->resource : "";
  const char *who = e->principal != NULL ? e->principal : "";
  out->resource_type = (int8_t)(e->resource_type + 1); /* topic 1 -> 2, group, cluster */
  out->pattern = e->prefix && res[0] != '\0' ? KAFKA_ACL_PAT_PREFIXED : KAFKA_ACL_PAT_LITERAL;
  if (e->resource_type == META_ACL_CLUSTER) {
    res = KAFKA_ACL_CLUSTER_NAME;
  } else if (e->prefix && res[0] == '\0') {
    res = "*";
  }
  snprintf(out->name, sizeof out->name, "%s", res);
  snprintf(out->principal, sizeof out->principal, "%s", strcmp(who, "*") == 0 ? "User:*" : who);
  snprintf(out->host, sizeof out->host, "*");
  out->has_name = out->has_principal = out->has_host = true;
  out->operation = kafka_acl_op_of_cairn(e->operation);
  out->permission = e->allow ? KAFKA_ACL_PERM_ALLOW : KAFKA_ACL_PERM_DENY;
}

/* The resource part of kafka_acl_to_entry. */
static bool kafka_acl_resource_to(const struct kafka_acl_spec *b, struct meta_acl *a, char *why,
                                  size_t cap)
{
  if (b->resource_type < KAFKA_ACL_RES_TOPIC || b->resource_type > KAFKA_ACL_RES_CLUSTER) {
    snprintf(why, cap, "resource type %d: Cairn has topic (2), group (3) and cluster (4) entries",
             b->resource_type);
    return false;
  }
  if (b->pattern != KAFKA_ACL_PAT_LITERAL && b->pattern != KAFKA_ACL_PAT_PREFIXED) {
    snprintf(why, cap, "pattern type %d: not LITERAL (3) or PREFIXED (4)", b->pattern);
    return false;
  }
  a->resource_type = (uint32_t)(b->resource_type - 1);
  if (a->resource_type == META_ACL_CLUSTER) {
    if (b->pattern != KAFKA_ACL_PAT_LITERAL || strcmp(b->name, KAFKA_ACL_CLUSTER_NAME) != 0) {
      snprintf(why, cap, "the cluster resource is LITERAL '" KAFKA_ACL_CLUSTER_NAME "'");
      return false;
    }
    return true;
  }
  if (b->name[0] == '\0') {
    snprintf(why, cap, "an empty resource name");
    return false;
  }
  bool wildcard = b->pattern == KAFKA_ACL_PAT_LITERAL && strcmp(b->name, "*") == 0;
  a->prefix = b->pattern == KAFKA_ACL_PAT_PREFIXED || wildcard;
  snprintf(a->resource, sizeof a->resource, "%s", wildcard ? "" : b->name);
  return true;
}

bool kafka_acl_to_entry(const struct kafka_acl_spec *b, struct meta_acl *a, char *why, size_t cap)
{
  memset(a, 0, sizeof *a);
  if (b->too_long) {
    snprintf(why, cap, "a null string, or one too long for Cairn (names %u bytes, principals %u)",
             META_RESOURCE_MAX, META_PRINCIPAL_MAX);
    return false;
  }
  if (!kafka_acl_resource_to(b, a, why, cap)) {
    return false;
  }
  uint32_t op =
      b->operation >= 0 && b->operation < KAFKA_ACL_NOPS ? kafka_acl_op_to_cairn[b->operation] : 0;
  if (op == 0) {
    snprintf(why, cap,
             "operation %d: Cairn's entries are ALL, READ, WRITE, CREATE, DELETE, ALTER and "
             "DESCRIBE (configs are checked as DESCRIBE and ALTER, idempotent writes as WRITE)",
             b->operation);
    return false;
  }
  if (b->permission != KAFKA_ACL_PERM_ALLOW && b->permission != KAFKA_ACL_PERM_DENY) {
    snprintf(why, cap, "permission type %d: not DENY (2) or ALLOW (3)", b->permission);
    return false;
  }
  if (strcmp(b->host, "*") != 0) {
    snprintf(why, cap, "host '%.64s': Cairn's entries apply from every host ('*' only)", b->host);
    return false;
  }
  const char *who = b->principal;
  if (strcmp(who, "User:*") == 0) {
    who = "*"; /* Kafka's wildcard principal is Cairn's "*" */
  } else if (strcmp(who, "*") == 0 || !authz_principal_ok(who)) {
    snprintf(why, cap, "principal '%.80s': not User:NAME, User:* or Node:ID", b->principal);
    return false;
  }
  snprintf(a->principal, sizeof a->principal, "%s", who);
  a->operation = op;
  a->allow = b->permission == KAFKA_ACL_PERM_ALLOW;
  return true;
}

bool kafka_acl_filter_check(const struct kafka_acl_spec *f, char *why, size_t cap)
{
  if (f->resource_type == KAFKA_ACL_RES_UNKNOWN || f->pattern == KAFKA_ACL_PAT_UNKNOWN ||
      f->operation == KAFKA_ACL_OP_UNKNOWN || f->permission == KAFKA_ACL_PERM_UNKNOWN) {
    snprintf(why, cap,
             "the filter holds an UNKNOWN resource type, pattern type, operation or "
             "permission type");
    return false;
  }
  if (f->pattern < KAFKA_ACL_PAT_UNKNOWN || f->pattern > KAFKA_ACL_PAT_PREFIXED) {
    snprintf(why, cap, "pattern type %d is not one of Kafka's", f->pattern);
    return false;
  }
  return true;
}

/* The resource part of kafka_acl_matches. */
static bool kafka_acl_resource_matches(const struct kafka_acl_spec *f,
                                       const struct kafka_acl_spec *b)
{
  if (f->resource_type != KAFKA_ACL_RES_ANY && f->resource_type != b->resource_type) {
    return false;
  }
  bool same_name = !f->has_name || strcmp(f->name, b->name) == 0;
  switch (f->pattern) {
  case KAFKA_ACL_PAT_ANY:
    return same_name;
  case KAFKA_ACL_PAT_MATCH:
    if (!f->has_name) {
      return true;
    }
    if (b->pattern == KAFKA_ACL_PAT_PREFIXED) {
      return strncmp(f->name, b->name, strlen(b->name)) == 0;
    }
    return strcmp(f->name, b->name) == 0 || strcmp(b->name, "*") == 0;
  default:
    return f->pattern == b->pattern && same_name;
  }
}

bool kafka_acl_matches(const struct kafka_acl_spec *f, const struct kafka_acl_spec *b)
{
  if (f->too_long || !kafka_acl_resource_matches(f, b)) {
    return false;
  }
  if (f->has_principal && strcmp(f->principal, b->principal) != 0) {
    return false;
  }
  if (f->has_host && strcmp(f->host, b->host) != 0) {
    return false;
  }
  if (f->operation != KAFKA_ACL_OP_ANY && f->operation != b->operation) {
    return false;
  }
  return f->permission == KAFKA_ACL_PERM_ANY || f->permission == b->permission;
}

void kafka_acl_put_resource(struct kafka_buf *buf, int16_t version, const struct kafka_acl_spec *b)
{
  kafka_put_i8(buf, b->resource_type);
  kafka_put_string(buf, b->name);
  if (version >= 1) {
    kafka_put_i8(buf, b->pattern);
  }
}

void kafka_acl_put_entry(struct kafka_buf *buf, const struct kafka_acl_spec *b)
{
  kafka_put_string(buf, b->principal);
  kafka_put_string(buf, b->host);
  kafka_put_i8(buf, b->operation);
  kafka_put_i8(buf, b->permission);
}
