/* test_kafka_acl.c - Kafka ACL bindings over Cairn's entries
 * (src/kafka/kafka_acl.c): the mapping both ways (wildcards, the cluster,
 * User:*), what Cairn refuses to create and why, Kafka's filter matching
 * (ANY, MATCH, LITERAL, PREFIXED, null strings), and reading bindings and
 * filters of v0 and v1 off the wire. */
#include "kafka/kafka_acl.h"
#include "server/acl_wire.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

static struct kafka_acl_spec binding(int8_t type, const char *name, int8_t pattern,
                                     const char *principal, int8_t op, int8_t perm)
{
  struct kafka_acl_spec s;
  memset(&s, 0, sizeof s);
  s.resource_type = type;
  s.pattern = pattern;
  s.operation = op;
  s.permission = perm;
  s.has_name = s.has_principal = s.has_host = true;
  snprintf(s.name, sizeof s.name, "%s", name);
  snprintf(s.principal, sizeof s.principal, "%s", principal);
  snprintf(s.host, sizeof s.host, "*");
  return s;
}

/* A filter: NULL strings match any. */
static struct kafka_acl_spec filter(int8_t type, const char *name, int8_t pattern,
                                    const char *principal, int8_t op, int8_t perm)
{
  struct kafka_acl_spec s = binding(type, name != NULL ? name : "", pattern,
                                    principal != NULL ? principal : "", op, perm);
  s.has_name = name != NULL;
  s.has_principal = principal != NULL;
  s.has_host = false;
  return s;
}

/* b -> Cairn entry -> wire -> Kafka view: the same binding. */
static void round_trip(struct kafka_acl_spec b, struct meta_acl *out)
{
  char why[240];
  assert_true(kafka_acl_to_entry(&b, out, why, sizeof why));
  Cairn__Client__AclEntry e;
  acl_wire_of(out, &e);
  struct kafka_acl_spec back;
  kafka_acl_of_entry(&e, &back);
  assert_int_equal(back.resource_type, b.resource_type);
  assert_string_equal(back.name, b.name);
  assert_int_equal(back.pattern, b.pattern);
  assert_string_equal(back.principal, b.principal);
  assert_string_equal(back.host, "*");
  assert_int_equal(back.operation, b.operation);
  assert_int_equal(back.permission, b.permission);
  struct meta_acl again;
  acl_wire_to(&e, &again);
  assert_memory_equal(&again, out, sizeof again);
}

static void test_kafka_acl_mapping_both_ways(void **state)
{
  (void)state;
  struct meta_acl a;
  round_trip(binding(KAFKA_ACL_RES_TOPIC, "orders", KAFKA_ACL_PAT_LITERAL, "User:alice",
                     KAFKA_ACL_OP_WRITE, KAFKA_ACL_PERM_ALLOW),
             &a);
  assert_int_equal(a.resource_type, META_ACL_TOPIC);
  assert_string_equal(a.resource, "orders");
  assert_false(a.prefix);
  assert_int_equal(a.operation, META_ACL_WRITE);
  assert_true(a.allow);
  round_trip(binding(KAFKA_ACL_RES_TOPIC, "logs-", KAFKA_ACL_PAT_PREFIXED, "User:*",
                     KAFKA_ACL_OP_ALL, KAFKA_ACL_PERM_DENY),
             &a);
  assert_string_equal(a.principal, "*");
  assert_true(a.prefix);
  assert_int_equal(a.operation, META_ACL_ALL);
  assert_false(a.allow);
  /* LITERAL "*" is every group: Cairn's prefix "" */
  round_trip(binding(KAFKA_ACL_RES_GROUP, "*", KAFKA_ACL_PAT_LITERAL, "User:bob", KAFKA_ACL_OP_READ,
                     KAFKA_ACL_PERM_ALLOW),
             &a);
  assert_int_equal(a.resource_type, META_ACL_GROUP);
  assert_string_equal(a.resource, "");
  assert_true(a.prefix);
  round_trip(binding(KAFKA_ACL_RES_CLUSTER, "kafka-cluster", KAFKA_ACL_PAT_LITERAL, "Node:3",
                     KAFKA_ACL_OP_ALTER, KAFKA_ACL_PERM_ALLOW),
             &a);
  assert_int_equal(a.resource_type, META_ACL_CLUSTER);
  assert_string_equal(a.resource, "");
  assert_false(a.prefix);
  round_trip(binding(KAFKA_ACL_RES_TOPIC, "t", KAFKA_ACL_PAT_LITERAL, "User:ANONYMOUS",
                     KAFKA_ACL_OP_DESCRIBE, KAFKA_ACL_PERM_ALLOW),
             &a);
  assert_int_equal(a.operation, META_ACL_DESCRIBE);
}

static void refused(struct kafka_acl_spec b, const char *why_has)
{
  struct meta_acl a;
  char why[240] = "";
  assert_false(kafka_acl_to_entry(&b, &a, why, sizeof why));
  if (strstr(why, why_has) == NULL) {
    fail_msg("why '%s' lacks '%s'", why, why_has);
  }
}

static void test_kafka_acl_refusals_say_why(void **state)
{
  (void)state;
  int8_t T = KAFKA_ACL_RES_TOPIC, L = KAFKA_ACL_PAT_LITERAL, A = KAFKA_ACL_PERM_ALLOW;
  refused(binding(T, "t", L, "User:a", KAFKA_ACL_OP_DESCRIBE_CONFIGS, A), "configs are checked");
  refused(binding(T, "t", L, "User:a", KAFKA_ACL_OP_IDEMPOTENT_WRITE, A), "operation 12");
  refused(binding(T, "t", L, "User:a", KAFKA_ACL_OP_ANY, A), "operation 1");
  refused(binding(5, "tx", L, "User:a", KAFKA_ACL_OP_WRITE, A), "resource type 5");
  refused(binding(KAFKA_ACL_RES_ANY, "t", L, "User:a", KAFKA_ACL_OP_WRITE, A), "resource type 1");
  refused(binding(T, "t", KAFKA_ACL_PAT_MATCH, "User:a", KAFKA_ACL_OP_WRITE, A), "pattern type 2");
  refused(binding(T, "t", L, "User:a", KAFKA_ACL_OP_WRITE, KAFKA_ACL_PERM_ANY), "permission");
  refused(binding(T, "t", L, "Group:a", KAFKA_ACL_OP_WRITE, A), "principal 'Group:a'");
  refused(binding(T, "t", L, "*", KAFKA_ACL_OP_WRITE, A), "principal '*'");
  refused(binding(T, "", KAFKA_ACL_PAT_PREFIXED, "User:a", KAFKA_ACL_OP_WRITE, A), "empty");
  refused(binding(KAFKA_ACL_RES_CLUSTER, "other", L, "User:a", KAFKA_ACL_OP_ALTER, A),
          "kafka-cluster");
  struct kafka_acl_spec h = binding(T, "t", L, "User:a", KAFKA_ACL_OP_WRITE, A);
  snprintf(h.host, sizeof h.host, "10.0.0.1");
  refused(h, "host '10.0.0.1'");
  struct kafka_acl_spec long_one = binding(T, "t", L, "User:a", KAFKA_ACL_OP_WRITE, A);
  long_one.too_long = true;
  refused(long_one, "too long");
}

static void test_kafka_acl_filters_match_as_kafka(void **state)
{
  (void)state;
  int8_t T = KAFKA_ACL_RES_TOPIC, A = KAFKA_ACL_PERM_ALLOW, ANYP = KAFKA_ACL_PERM_ANY;
  struct kafka_acl_spec lit =
      binding(T, "orders", KAFKA_ACL_PAT_LITERAL, "User:alice", KAFKA_ACL_OP_READ, A);
  struct kafka_acl_spec pre =
      binding(T, "ord", KAFKA_ACL_PAT_PREFIXED, "User:alice", KAFKA_ACL_OP_READ, A);
  struct kafka_acl_spec wild =
      binding(T, "*", KAFKA_ACL_PAT_LITERAL, "User:*", KAFKA_ACL_OP_READ, KAFKA_ACL_PERM_DENY);
  struct kafka_acl_spec any =
      filter(KAFKA_ACL_RES_ANY, NULL, KAFKA_ACL_PAT_ANY, NULL, KAFKA_ACL_OP_ANY, ANYP);
  assert_true(kafka_acl_matches(&any, &lit) && kafka_acl_matches(&any, &pre) &&
              kafka_acl_matches(&any, &wild));
  /* ANY with a name: that exact name, any pattern type */
  struct kafka_acl_spec f = filter(T, "ord", KAFKA_ACL_PAT_ANY, NULL, KAFKA_ACL_OP_ANY, ANYP);
  assert_false(kafka_acl_matches(&f, &lit));
  assert_true(kafka_acl_matches(&f, &pre));
  /* MATCH: what applies to topic "orders" */
  f = filter(T, "orders", KAFKA_ACL_PAT_MATCH, NULL, KAFKA_ACL_OP_ANY, ANYP);
  assert_true(kafka_acl_matches(&f, &lit) && kafka_acl_matches(&f, &pre) &&
              kafka_acl_matches(&f, &wild));
  f = filter(T, "billing", KAFKA_ACL_PAT_MATCH, NULL, KAFKA_ACL_OP_ANY, ANYP);
  assert_false(kafka_acl_matches(&f, &lit) || kafka_acl_matches(&f, &pre));
  assert_true(kafka_acl_matches(&f, &wild));
  /* LITERAL and PREFIXED: that pattern type only */
  f = filter(T, NULL, KAFKA_ACL_PAT_PREFIXED, NULL, KAFKA_ACL_OP_ANY, ANYP);
  assert_false(kafka_acl_matches(&f, &lit) || kafka_acl_matches(&f, &wild));
  assert_true(kafka_acl_matches(&f, &pre));
  f = filter(T, "orders", KAFKA_ACL_PAT_LITERAL, NULL, KAFKA_ACL_OP_ANY, ANYP);
  assert_true(kafka_acl_matches(&f, &lit));
  assert_false(kafka_acl_matches(&f, &pre) || kafka_acl_matches(&f, &wild));
  /* principal, operation, permission, resource type, host */
  f = filter(KAFKA_ACL_RES_ANY, NULL, KAFKA_ACL_PAT_ANY, "User:*", KAFKA_ACL_OP_ANY, ANYP);
  assert_true(kafka_acl_matches(&f, &wild));
  assert_false(kafka_acl_matches(&f, &lit));
  f = filter(KAFKA_ACL_RES_ANY, NULL, KAFKA_ACL_PAT_ANY, NULL, KAFKA_ACL_OP_WRITE, ANYP);
  assert_false(kafka_acl_matches(&f, &lit));
  f = filter(KAFKA_ACL_RES_ANY, NULL, KAFKA_ACL_PAT_ANY, NULL, KAFKA_ACL_OP_ANY,
             KAFKA_ACL_PERM_DENY);
  assert_true(kafka_acl_matches(&f, &wild));
  assert_false(kafka_acl_matches(&f, &lit));
  f = filter(KAFKA_ACL_RES_GROUP, NULL, KAFKA_ACL_PAT_ANY, NULL, KAFKA_ACL_OP_ANY, ANYP);
  assert_false(kafka_acl_matches(&f, &lit));
  f = any;
  f.has_host = true;
  snprintf(f.host, sizeof f.host, "10.0.0.1");
  assert_false(kafka_acl_matches(&f, &lit));
  /* filters with UNKNOWN elements are refused */
  char why[200];
  assert_true(kafka_acl_filter_check(&any, why, sizeof why));
  f = any;
  f.operation = KAFKA_ACL_OP_UNKNOWN;
  assert_false(kafka_acl_filter_check(&f, why, sizeof why));
  f = any;
  f.pattern = 9;
  assert_false(kafka_acl_filter_check(&f, why, sizeof why));
}

static size_t put_str(uint8_t *p, const char *s)
{
  if (s == NULL) {
    p[0] = 0xff;
    p[1] = 0xff;
    return 2;
  }
  size_t n = strlen(s);
  p[0] = (uint8_t)(n >> 8);
  p[1] = (uint8_t)n;
  memcpy(p + 2, s, n);
  return 2 + n;
}

static void test_kafka_acl_reads_v0_and_v1(void **state)
{
  (void)state;
  uint8_t buf[128];
  size_t n = 0;
  buf[n++] = KAFKA_ACL_RES_TOPIC;
  n += put_str(buf + n, "logs-");
  buf[n++] = KAFKA_ACL_PAT_PREFIXED; /* v1 only */
  n += put_str(buf + n, "User:alice");
  n += put_str(buf + n, "*");
  buf[n++] = KAFKA_ACL_OP_ALL;
  buf[n++] = KAFKA_ACL_PERM_ALLOW;
  struct kafka_reader r;
  struct kafka_acl_spec s;
  kafka_reader_init(&r, buf, n);
  kafka_acl_get_spec(&r, 1, false, &s);
  assert_int_equal(r.err, 0);
  assert_int_equal(kafka_reader_left(&r), 0);
  assert_string_equal(s.name, "logs-");
  assert_int_equal(s.pattern, KAFKA_ACL_PAT_PREFIXED);
  assert_string_equal(s.principal, "User:alice");
  assert_int_equal(s.operation, KAFKA_ACL_OP_ALL);
  assert_false(s.too_long);
  /* v0: no pattern type byte, LITERAL */
  n = 0;
  buf[n++] = KAFKA_ACL_RES_ANY;
  n += put_str(buf + n, NULL);
  n += put_str(buf + n, NULL);
  n += put_str(buf + n, NULL);
  buf[n++] = KAFKA_ACL_OP_ANY;
  buf[n++] = KAFKA_ACL_PERM_ANY;
  kafka_reader_init(&r, buf, n);
  kafka_acl_get_spec(&r, 0, true, &s);
  assert_int_equal(r.err, 0);
  assert_int_equal(kafka_reader_left(&r), 0);
  assert_int_equal(s.pattern, KAFKA_ACL_PAT_LITERAL);
  assert_false(s.has_name || s.has_principal || s.has_host);
  /* a binding's null string is never created; a truncated one is an error */
  kafka_reader_init(&r, buf, n);
  kafka_acl_get_spec(&r, 0, false, &s);
  assert_true(s.too_long);
  kafka_reader_init(&r, buf, n - 1);
  kafka_acl_get_spec(&r, 0, true, &s);
  assert_int_not_equal(r.err, 0);
}

int main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_kafka_acl_mapping_both_ways),
      cmocka_unit_test(test_kafka_acl_refusals_say_why),
      cmocka_unit_test(test_kafka_acl_filters_match_as_kafka),
      cmocka_unit_test(test_kafka_acl_reads_v0_and_v1),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
