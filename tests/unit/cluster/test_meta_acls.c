/* test_meta_acls.c - access control entries in the metadata state
 * machine: add (idempotent), remove, refusals that change nothing,
 * meta_acl_allows (deny wins, "*", prefixes, the cluster resource, default
 * deny), snapshots carrying entries exactly in their canonical order;
 * meta_acl_decide (which walks only the principal's and "*"'s entries)
 * against a walk over every entry, on seeded random entry sets. */
#include "cluster/meta_state.h"
#include "common/err.h"
#include "testutil.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

static void bootstrap(struct meta_state *st)
{
  meta_state_init(st);
  uint64_t voters[] = {1};
  uint8_t *cmd;
  size_t len;
  assert_int_equal(meta_cmd_bootstrap("c-1", voters, 1, &cmd, &len), 0);
  struct meta_result res;
  assert_int_equal(meta_apply(st, cmd, len, 0, &res), 0);
  free(cmd);
}

static struct meta_acl entry(const char *principal, uint32_t type, const char *resource,
                             bool prefix, uint32_t op, bool allow)
{
  struct meta_acl a;
  memset(&a, 0, sizeof a);
  snprintf(a.principal, sizeof a.principal, "%s", principal);
  a.resource_type = type;
  snprintf(a.resource, sizeof a.resource, "%s", resource);
  a.prefix = prefix;
  a.operation = op;
  a.allow = allow;
  return a;
}

static int acl(struct meta_state *st, struct meta_acl a, bool add)
{
  uint8_t *cmd;
  size_t len;
  int rv = meta_cmd_acl(&a, add, &cmd, &len);
  if (rv != 0) {
    return rv;
  }
  struct meta_result res;
  rv = meta_apply(st, cmd, len, 0, &res);
  free(cmd);
  return rv;
}

static void test_meta_acls_add_remove_and_refusals(void **state)
{
  struct meta_state st;
  bootstrap(&st);
  struct meta_acl a = entry("User:alice", META_ACL_TOPIC, "orders", false, META_ACL_WRITE, true);
  assert_int_equal(acl(&st, a, true), 0);
  assert_int_equal(acl(&st, a, true), 0); /* idempotent */
  assert_int_equal(st.nacls, 1);
  assert_int_equal(acl(&st, entry("*", META_ACL_TOPIC, "", true, META_ACL_DESCRIBE, true), true),
                   0);
  assert_int_equal(st.nacls, 2);
  assert_string_equal(st.acls[0].principal, "*"); /* canonical order */
  assert_int_equal(acl(&st, a, false), 0);
  assert_int_equal(acl(&st, a, false), CAIRN_EUNKNOWN_ACL);
  assert_int_equal(st.nacls, 1);
  /* bad entries: refused when encoded */
  assert_int_equal(acl(&st, entry("", META_ACL_TOPIC, "x", false, META_ACL_READ, true), true),
                   CAIRN_EINVAL);
  assert_int_equal(acl(&st, entry("User:a", 9, "x", false, META_ACL_READ, true), true),
                   CAIRN_EINVAL);
  assert_int_equal(acl(&st, entry("User:a", META_ACL_TOPIC, "x", false, 8, true), true),
                   CAIRN_EINVAL);
  assert_int_equal(
      acl(&st, entry("User:a", META_ACL_CLUSTER, "x", false, META_ACL_ALTER, true), true),
      CAIRN_EINVAL);
  assert_int_equal(acl(&st, entry("User:a", META_ACL_TOPIC, "", false, META_ACL_READ, true), true),
                   CAIRN_EINVAL);
  assert_int_equal(st.nacls, 1);
  meta_state_close(&st);
}

static void test_meta_acls_deny_wins_prefix_wildcard_default_deny(void **state)
{
  struct meta_state st;
  bootstrap(&st);
  /* alice may read every "orders-" topic, but not orders-secret */
  assert_int_equal(
      acl(&st, entry("User:alice", META_ACL_TOPIC, "orders-", true, META_ACL_READ, true), true), 0);
  assert_int_equal(
      acl(&st, entry("User:alice", META_ACL_TOPIC, "orders-secret", false, META_ACL_READ, false),
          true),
      0);
  /* anyone may describe anything */
  assert_int_equal(acl(&st, entry("*", META_ACL_TOPIC, "", true, META_ACL_DESCRIBE, true), true),
                   0);
  /* everyone is denied deleting topics of "prod-" */
  assert_int_equal(
      acl(&st, entry("*", META_ACL_TOPIC, "prod-", true, META_ACL_DELETE, false), true), 0);
  assert_int_equal(
      acl(&st, entry("User:bob", META_ACL_TOPIC, "prod-a", false, META_ACL_DELETE, true), true), 0);
  /* bob may alter the cluster */
  assert_int_equal(
      acl(&st, entry("User:bob", META_ACL_CLUSTER, "", false, META_ACL_ALTER, true), true), 0);
  assert_true(meta_acl_allows(&st, "User:alice", META_ACL_TOPIC, "orders-eu", META_ACL_READ));
  assert_false(meta_acl_allows(&st, "User:alice", META_ACL_TOPIC, "orders-secret", META_ACL_READ));
  assert_false(meta_acl_allows(&st, "User:alice", META_ACL_TOPIC, "orders-eu", META_ACL_WRITE));
  assert_false(meta_acl_allows(&st, "User:alice", META_ACL_TOPIC, "billing", META_ACL_READ));
  assert_false(meta_acl_allows(&st, "User:carol", META_ACL_TOPIC, "orders-eu", META_ACL_READ));
  assert_true(meta_acl_allows(&st, "User:carol", META_ACL_TOPIC, "anything", META_ACL_DESCRIBE));
  assert_false(meta_acl_allows(&st, "User:bob", META_ACL_TOPIC, "prod-a", META_ACL_DELETE));
  assert_true(meta_acl_allows(&st, "User:bob", META_ACL_CLUSTER, "", META_ACL_ALTER));
  assert_false(meta_acl_allows(&st, "User:alice", META_ACL_CLUSTER, "", META_ACL_ALTER));
  /* a group entry is not a topic entry */
  assert_false(meta_acl_allows(&st, "User:alice", META_ACL_GROUP, "orders-eu", META_ACL_READ));
  meta_state_close(&st);
}

/* ALL matches every operation, in an allow and in a deny (which still
 * wins over an allow of one operation). */
static void test_meta_acls_all_matches_every_operation(void **state)
{
  (void)state;
  struct meta_state st;
  bootstrap(&st);
  assert_int_equal(
      acl(&st, entry("User:alice", META_ACL_TOPIC, "logs-", true, META_ACL_ALL, true), true), 0);
  assert_int_equal(
      acl(&st, entry("*", META_ACL_TOPIC, "logs-secret", false, META_ACL_ALL, false), true), 0);
  assert_int_equal(
      acl(&st, entry("User:alice", META_ACL_TOPIC, "logs-secret", false, META_ACL_READ, true),
          true),
      0);
  for (uint32_t op = META_ACL_READ; op <= META_ACL_ALTER; op++) {
    assert_true(meta_acl_allows(&st, "User:alice", META_ACL_TOPIC, "logs-a", op));
    assert_false(meta_acl_allows(&st, "User:alice", META_ACL_TOPIC, "logs-secret", op));
    assert_false(meta_acl_allows(&st, "User:bob", META_ACL_TOPIC, "logs-a", op));
    assert_false(meta_acl_allows(&st, "User:alice", META_ACL_GROUP, "logs-a", op));
  }
  meta_state_close(&st);
}

static void test_meta_acls_snapshot_round_trip(void **state)
{
  struct meta_state st, back;
  bootstrap(&st);
  uint8_t *plain = NULL, *buf = NULL;
  size_t plain_len = 0, len = 0;
  assert_int_equal(meta_snapshot_encode(&st, &plain, &plain_len), 0);
  assert_int_equal(acl(&st, entry("User:b", META_ACL_GROUP, "g-", true, META_ACL_READ, true), true),
                   0);
  assert_int_equal(
      acl(&st, entry("User:a", META_ACL_TOPIC, "t", false, META_ACL_WRITE, false), true), 0);
  assert_int_equal(meta_snapshot_encode(&st, &buf, &len), 0);
  meta_state_init(&back);
  assert_int_equal(meta_snapshot_decode(&back, buf, len), 0);
  assert_int_equal(back.nacls, 2);
  for (size_t i = 0; i < 2; i++) {
    assert_int_equal(meta_acl_cmp(&back.acls[i], &st.acls[i]), 0);
  }
  assert_false(meta_acl_allows(&back, "User:a", META_ACL_TOPIC, "t", META_ACL_WRITE));
  assert_true(meta_acl_allows(&back, "User:b", META_ACL_GROUP, "g-1", META_ACL_READ));
  /* removing every entry gives back the bytes of a state that never had any */
  assert_int_equal(
      acl(&back, entry("User:b", META_ACL_GROUP, "g-", true, META_ACL_READ, true), false), 0);
  assert_int_equal(
      acl(&back, entry("User:a", META_ACL_TOPIC, "t", false, META_ACL_WRITE, false), false), 0);
  uint8_t *again = NULL;
  size_t again_len = 0;
  assert_int_equal(meta_snapshot_encode(&back, &again, &again_len), 0);
  assert_int_equal(again_len, plain_len);
  assert_memory_equal(again, plain, plain_len);
  char line[256];
  uint8_t *cmd;
  size_t clen;
  struct meta_acl a = entry("User:a", META_ACL_TOPIC, "t", false, META_ACL_WRITE, false);
  assert_int_equal(meta_cmd_acl(&a, true, &cmd, &clen), 0);
  meta_cmd_describe(cmd, clen, line, sizeof line);
  assert_string_equal(line, "AddAcl User:a deny type=1 resource=t op=2");
  free(cmd);
  free(again);
  free(buf);
  free(plain);
  meta_state_close(&back);
  meta_state_close(&st);
}

/* The decision over every entry, as the definition says. */
static int reference_decide(const struct meta_state *st, const char *principal, uint32_t type,
                            const char *name, uint32_t op)
{
  int d = 0;
  for (size_t i = 0; i < st->nacls; i++) {
    const struct meta_acl *a = &st->acls[i];
    if (a->resource_type != type || (a->operation != op && a->operation != META_ACL_ALL) ||
        (strcmp(a->principal, "*") != 0 && strcmp(a->principal, principal) != 0))
      continue;
    bool match = a->prefix ? strncmp(name, a->resource, strlen(a->resource)) == 0
                           : strcmp(name, a->resource) == 0;
    if (match && !a->allow)
      return -1;
    if (match)
      d = 1;
  }
  return d;
}

static void test_meta_acls_decide_matches_a_full_walk(void **state)
{
  uint64_t seed = tu_seed("test_meta_acls_decide_matches_a_full_walk");
  uint64_t rs = seed;
  static const char *const principals[] = {"*", "User:a", "User:b", "User:c", "Node:1"};
  static const char *const names[] = {"", "o", "or", "orders", "ord", "x", "xo"};
  for (int round = 0; round < 50; round++) {
    struct meta_state st;
    bootstrap(&st);
    int n = (int)(tu_rand(&rs) % 60);
    for (int k = 0; k < n; k++) {
      uint32_t type = 1 + (uint32_t)(tu_rand(&rs) % 2);
      bool prefix = tu_rand(&rs) % 2 == 0;
      const char *r = names[tu_rand(&rs) % 7];
      if (!prefix && r[0] == '\0')
        r = "o";
      assert_int_equal(acl(&st,
                           entry(principals[tu_rand(&rs) % 5], type, r, prefix,
                                 1 + (uint32_t)(tu_rand(&rs) % 7), tu_rand(&rs) % 3 != 0),
                           true),
                       0);
    }
    for (int q = 0; q < 200; q++) {
      const char *p = principals[tu_rand(&rs) % 5];
      uint32_t type = 1 + (uint32_t)(tu_rand(&rs) % 2);
      const char *name = names[1 + tu_rand(&rs) % 6];
      uint32_t op = 1 + (uint32_t)(tu_rand(&rs) % 6);
      int want = reference_decide(&st, p, type, name, op);
      if (meta_acl_decide(&st, p, type, name, op) != want) {
        fail_msg("seed %llu round %d: %s %u %s %u: want %d", (unsigned long long)seed, round, p,
                 type, name, op, want);
      }
      assert_true(meta_acl_allows(&st, p, type, name, op) == (want > 0));
    }
    meta_state_close(&st);
  }
}

int main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_meta_acls_add_remove_and_refusals),
      cmocka_unit_test(test_meta_acls_deny_wins_prefix_wildcard_default_deny),
      cmocka_unit_test(test_meta_acls_all_matches_every_operation),
      cmocka_unit_test(test_meta_acls_snapshot_round_trip),
      cmocka_unit_test(test_meta_acls_decide_matches_a_full_walk),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
