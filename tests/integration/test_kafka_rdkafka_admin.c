/* test_kafka_rdkafka_admin.c - librdkafka's ACL admin API (rd_kafka_
 * CreateAcls, DescribeAcls, DeleteAcls) against the Kafka port of three
 * real cairnd processes, bootstrapped from the last node (the requests
 * that change entries are forwarded to the controller leader): bindings
 * are created (one Cairn cannot hold is refused INVALID_REQUEST), every
 * node's native ListAcls then holds them as Cairn entries (User:* as "*",
 * LITERAL "*" as the prefix "", ALL as all), a MATCH filter describes the
 * bindings that apply to a topic, and DeleteAcls removes what its filter
 * matches on every node.
 *
 * Consumer groups: a librdkafka consumer group reads a topic and commits;
 * rd_kafka_ListConsumerGroups with a states filter (ListGroups v4,
 * flexible) finds it Stable while it runs and Empty once it left, and
 * rd_kafka_committed (OffsetFetch v7, flexible) reads back what it
 * committed, partition by partition. rd_kafka_DeleteConsumerGroupOffsets
 * (OffsetDelete) is refused NON_EMPTY_GROUP while the consumer is in the
 * group, then drops two partitions' offsets: rd_kafka_ListConsumerGroup-
 * Offsets shows them gone and the third kept.
 *
 * DeleteRecords: rd_kafka_DeleteRecords moves a partition's log start
 * (and empties another with OFFSET_END), refuses an offset above the high
 * watermark per partition, and the new start holds on the next leaders
 * after SIGKILLs of two leaders in turn: the records above it are read
 * from it once each, in order, and none below comes back.
 *
 * The idempotent producer's state across a delete: a librdkafka producer
 * with enable.idempotence writes batches, DeleteRecords removes all of
 * them, a follower is SIGKILLed and restarted (it rebuilds its producer
 * table from disk), and the same producer goes on with its next
 * sequences: every replica appends them (their logs end alike), none
 * refuses a producer it forgot.
 *
 * Usage: test_kafka_rdkafka_admin <path of cairnd>
 * CAIRN_KEEP_TEST_DIR=1 keeps the data dirs and node logs. */
#include "cairnd.h"
#include "testutil.h"

#include <librdkafka/rdkafka.h>

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#define FAST "--heartbeat-ms 100 --election-ms 1000 --node-timeout-ms 2000"
#define WAIT_MS 60000

static const char *cairnd_bin;

static void rk_set(rd_kafka_conf_t *conf, const char *key, const char *value)
{
  char err[256];
  if (rd_kafka_conf_set(conf, key, value, err, sizeof err) != RD_KAFKA_CONF_OK) {
    fail_msg("%s=%s: %s", key, value, err);
  }
}

/* A client of type on bootstrap; group: a consumer's group.id (NULL for
 * a producer). */
static rd_kafka_t *rk_new(rd_kafka_type_t type, const char *bootstrap, const char *group)
{
  char err[256];
  rd_kafka_conf_t *conf = rd_kafka_conf_new();
  rk_set(conf, "bootstrap.servers", bootstrap);
  if (group != NULL) {
    rk_set(conf, "group.id", group);
    rk_set(conf, "auto.offset.reset", "earliest");
    rk_set(conf, "enable.auto.commit", "false");
  }
  rd_kafka_t *rk = rd_kafka_new(type, conf, err, sizeof err);
  if (rk == NULL) {
    fail_msg("rd_kafka_new: %s", err);
  }
  return rk;
}

static rd_kafka_t *rk_admin(const char *bootstrap)
{
  return rk_new(RD_KAFKA_PRODUCER, bootstrap, NULL);
}

/* Three nodes with Kafka ports; bootstrap (cap bytes) names node last's. */
static void rk_cluster(struct cd_cluster *c, int last, char *bootstrap, size_t cap)
{
  assert_int_equal(cd_init(c, cairnd_bin, 3, 3, FAST), 0);
  int port[3];
  for (int i = 0; i < 3; i++) {
    port[i] = tu_free_port();
    assert_true(port[i] > 0);
    snprintf(c->nodes[i].extra, sizeof c->nodes[i].extra, "--kafka-listen 127.0.0.1:%d", port[i]);
  }
  assert_int_equal(cd_start_all(c, WAIT_MS), 0);
  snprintf(bootstrap, cap, "127.0.0.1:%d", port[last]);
}

/* The next admin result of type want on q, whatever its error (fails
 * after WAIT_MS). */
static rd_kafka_event_t *rk_wait_result(rd_kafka_queue_t *q, rd_kafka_event_type_t want)
{
  for (long long end = tu_now_ms() + WAIT_MS; tu_now_ms() < end;) {
    rd_kafka_event_t *ev = rd_kafka_queue_poll(q, 1000);
    if (ev != NULL && rd_kafka_event_type(ev) == want) {
      return ev;
    }
    if (ev != NULL) {
      rd_kafka_event_destroy(ev);
    }
  }
  fail_msg("no admin result of type %d within %d ms", (int)want, WAIT_MS);
  return NULL;
}

/* rk_wait_result, failing on a request-level error. */
static rd_kafka_event_t *rk_wait(rd_kafka_queue_t *q, rd_kafka_event_type_t want)
{
  rd_kafka_event_t *ev = rk_wait_result(q, want);
  if (rd_kafka_event_error(ev) != RD_KAFKA_RESP_ERR_NO_ERROR) {
    fail_msg("admin request failed: %s", rd_kafka_event_error_string(ev));
  }
  return ev;
}

static rd_kafka_AclBinding_t *binding(rd_kafka_ResourceType_t t, const char *name,
                                      rd_kafka_ResourcePatternType_t pattern, const char *who,
                                      const char *host, rd_kafka_AclOperation_t op,
                                      rd_kafka_AclPermissionType_t perm)
{
  char err[256];
  rd_kafka_AclBinding_t *b =
      rd_kafka_AclBinding_new(t, name, pattern, who, host, op, perm, err, sizeof err);
  if (b == NULL) {
    fail_msg("rd_kafka_AclBinding_new: %s", err);
  }
  return b;
}

/* Whether node i's native ListAcls holds exactly n entries, one of them
 * (principal, type, resource, prefix, operation, allow). */
static bool native_has(struct cd_cluster *c, int i, size_t n, const char *principal, uint32_t type,
                       const char *resource, bool prefix, uint32_t op, bool allow)
{
  Cairn__Client__ListAclsRequest lr = CAIRN__CLIENT__LIST_ACLS_REQUEST__INIT;
  Cairn__Client__Envelope req = CAIRN__CLIENT__ENVELOPE__INIT;
  req.api = CAIRN__CLIENT__API__API_LIST_ACLS;
  req.body_case = CAIRN__CLIENT__ENVELOPE__BODY_LIST_ACLS_REQ;
  req.list_acls_req = &lr;
  Cairn__Client__Envelope *resp = NULL;
  if (cd_call(c, i, &req, NULL, 0, 5000, &resp, NULL, NULL) != 0 || resp == NULL) {
    return false;
  }
  bool found = false;
  if (resp->body_case == CAIRN__CLIENT__ENVELOPE__BODY_LIST_ACLS_RESP &&
      resp->list_acls_resp->n_entries == n) {
    for (size_t k = 0; k < n; k++) {
      const Cairn__Client__AclEntry *e = resp->list_acls_resp->entries[k];
      found = found || (strcmp(e->principal, principal) == 0 && e->resource_type == type &&
                        strcmp(e->resource, resource) == 0 && e->prefix == prefix &&
                        e->operation == op && e->allow == allow);
    }
  }
  cairn__client__envelope__free_unpacked(resp, NULL);
  return found;
}

/* native_has on every node, within WAIT_MS (a node's copy of the metadata
 * may lag the controller leader's). */
static void wait_native(struct cd_cluster *c, size_t n, const char *principal, uint32_t type,
                        const char *resource, bool prefix, uint32_t op, bool allow)
{
  for (int i = 0; i < 3; i++) {
    long long end = tu_now_ms() + WAIT_MS;
    while (!native_has(c, i, n, principal, type, resource, prefix, op, allow)) {
      if (tu_now_ms() > end) {
        fail_msg("node %d: no %s entry on '%s' among %zu: see %s", i, principal, resource, n,
                 c->root);
      }
      usleep(100 * 1000);
    }
  }
}

static void rk_create(rd_kafka_t *rk, rd_kafka_queue_t *q)
{
  rd_kafka_AclBinding_t *b[] = {
      binding(RD_KAFKA_RESOURCE_TOPIC, "orders", RD_KAFKA_RESOURCE_PATTERN_LITERAL, "User:alice",
              "*", RD_KAFKA_ACL_OPERATION_WRITE, RD_KAFKA_ACL_PERMISSION_TYPE_ALLOW),
      binding(RD_KAFKA_RESOURCE_TOPIC, "logs-", RD_KAFKA_RESOURCE_PATTERN_PREFIXED, "User:*", "*",
              RD_KAFKA_ACL_OPERATION_ALL, RD_KAFKA_ACL_PERMISSION_TYPE_DENY),
      binding(RD_KAFKA_RESOURCE_GROUP, "*", RD_KAFKA_RESOURCE_PATTERN_LITERAL, "User:bob", "*",
              RD_KAFKA_ACL_OPERATION_READ, RD_KAFKA_ACL_PERMISSION_TYPE_ALLOW),
      binding(RD_KAFKA_RESOURCE_TOPIC, "orders", RD_KAFKA_RESOURCE_PATTERN_LITERAL, "User:alice",
              "10.0.0.1", RD_KAFKA_ACL_OPERATION_READ, RD_KAFKA_ACL_PERMISSION_TYPE_ALLOW),
  };
  size_t nb = sizeof b / sizeof b[0];
  rd_kafka_CreateAcls(rk, b, nb, NULL, q);
  rd_kafka_event_t *ev = rk_wait(q, RD_KAFKA_EVENT_CREATEACLS_RESULT);
  size_t n = 0;
  const rd_kafka_acl_result_t **res =
      rd_kafka_CreateAcls_result_acls(rd_kafka_event_CreateAcls_result(ev), &n);
  assert_int_equal(n, nb);
  for (size_t i = 0; i < n; i++) {
    const rd_kafka_error_t *e = rd_kafka_acl_result_error(res[i]);
    print_message("binding %zu: %s\n", i, e != NULL ? rd_kafka_error_string(e) : "created");
    if (i < 3) {
      assert_null(e);
    } else {
      assert_non_null(e);
      assert_int_equal(rd_kafka_error_code(e), RD_KAFKA_RESP_ERR_INVALID_REQUEST);
      assert_non_null(strstr(rd_kafka_error_string(e), "host '10.0.0.1'"));
    }
  }
  rd_kafka_event_destroy(ev);
  rd_kafka_AclBinding_destroy_array(b, nb);
}

/* DescribeAcls of the bindings that apply to topic logs-x: the deny. */
static void rk_describe_match(rd_kafka_t *rk, rd_kafka_queue_t *q)
{
  char err[256];
  rd_kafka_AclBindingFilter_t *f = rd_kafka_AclBindingFilter_new(
      RD_KAFKA_RESOURCE_TOPIC, "logs-x", RD_KAFKA_RESOURCE_PATTERN_MATCH, NULL, NULL,
      RD_KAFKA_ACL_OPERATION_ANY, RD_KAFKA_ACL_PERMISSION_TYPE_ANY, err, sizeof err);
  assert_non_null(f);
  rd_kafka_DescribeAcls(rk, f, NULL, q);
  rd_kafka_event_t *ev = rk_wait(q, RD_KAFKA_EVENT_DESCRIBEACLS_RESULT);
  size_t n = 0;
  const rd_kafka_AclBinding_t **acls =
      rd_kafka_DescribeAcls_result_acls(rd_kafka_event_DescribeAcls_result(ev), &n);
  assert_int_equal(n, 1);
  assert_string_equal(rd_kafka_AclBinding_name(acls[0]), "logs-");
  assert_int_equal(rd_kafka_AclBinding_resource_pattern_type(acls[0]),
                   RD_KAFKA_RESOURCE_PATTERN_PREFIXED);
  assert_string_equal(rd_kafka_AclBinding_principal(acls[0]), "User:*");
  assert_string_equal(rd_kafka_AclBinding_host(acls[0]), "*");
  assert_int_equal(rd_kafka_AclBinding_operation(acls[0]), RD_KAFKA_ACL_OPERATION_ALL);
  assert_int_equal(rd_kafka_AclBinding_permission_type(acls[0]), RD_KAFKA_ACL_PERMISSION_TYPE_DENY);
  rd_kafka_event_destroy(ev);
  rd_kafka_AclBinding_destroy(f);
}

/* DeleteAcls of alice's bindings: the one on orders. */
static void rk_delete_alice(rd_kafka_t *rk, rd_kafka_queue_t *q)
{
  char err[256];
  rd_kafka_AclBindingFilter_t *f = rd_kafka_AclBindingFilter_new(
      RD_KAFKA_RESOURCE_ANY, NULL, RD_KAFKA_RESOURCE_PATTERN_ANY, "User:alice", NULL,
      RD_KAFKA_ACL_OPERATION_ANY, RD_KAFKA_ACL_PERMISSION_TYPE_ANY, err, sizeof err);
  assert_non_null(f);
  rd_kafka_DeleteAcls(rk, &f, 1, NULL, q);
  rd_kafka_event_t *ev = rk_wait(q, RD_KAFKA_EVENT_DELETEACLS_RESULT);
  size_t nr = 0;
  const rd_kafka_DeleteAcls_result_response_t **rs =
      rd_kafka_DeleteAcls_result_responses(rd_kafka_event_DeleteAcls_result(ev), &nr);
  assert_int_equal(nr, 1);
  assert_null(rd_kafka_DeleteAcls_result_response_error(rs[0]));
  size_t nm = 0;
  const rd_kafka_AclBinding_t **m = rd_kafka_DeleteAcls_result_response_matching_acls(rs[0], &nm);
  assert_int_equal(nm, 1);
  assert_string_equal(rd_kafka_AclBinding_name(m[0]), "orders");
  assert_int_equal(rd_kafka_AclBinding_operation(m[0]), RD_KAFKA_ACL_OPERATION_WRITE);
  rd_kafka_event_destroy(ev);
  rd_kafka_AclBinding_destroy(f);
}

static void test_librdkafka_acls_are_cairn_entries(void **state)
{
  (void)state;
  static struct cd_cluster c;
  char bootstrap[64];
  rk_cluster(&c, 2, bootstrap, sizeof bootstrap);
  rd_kafka_t *rk = rk_admin(bootstrap);
  rd_kafka_queue_t *q = rd_kafka_queue_new(rk);

  rk_create(rk, q);
  wait_native(&c, 3, "User:alice", 1, "orders", false, 2, true);
  wait_native(&c, 3, "*", 1, "logs-", true, 7, false);
  wait_native(&c, 3, "User:bob", 2, "", true, 1, true);
  rk_describe_match(rk, q);
  rk_delete_alice(rk, q);
  wait_native(&c, 2, "User:bob", 2, "", true, 1, true);

  rd_kafka_queue_destroy(q);
  rd_kafka_destroy(rk);
  cd_destroy(&c);
}

#define CG_TOPIC "cg"
#define CG_GROUP "g-rk"
#define CG_PARTS 3
#define CG_COUNT 30

/* Whether ListConsumerGroups, filtered on state, lists CG_GROUP. */
static bool rk_group_listed(rd_kafka_t *rk, rd_kafka_queue_t *q,
                            rd_kafka_consumer_group_state_t state)
{
  rd_kafka_AdminOptions_t *o = rd_kafka_AdminOptions_new(rk, RD_KAFKA_ADMIN_OP_LISTCONSUMERGROUPS);
  rd_kafka_error_t *e = rd_kafka_AdminOptions_set_match_consumer_group_states(o, &state, 1);
  assert_null(e);
  rd_kafka_ListConsumerGroups(rk, o, q);
  rd_kafka_event_t *ev = rk_wait(q, RD_KAFKA_EVENT_LISTCONSUMERGROUPS_RESULT);
  const rd_kafka_ListConsumerGroups_result_t *res = rd_kafka_event_ListConsumerGroups_result(ev);
  size_t nerr = 0;
  const rd_kafka_error_t **errs = rd_kafka_ListConsumerGroups_result_errors(res, &nerr);
  for (size_t i = 0; i < nerr; i++) {
    print_message("ListConsumerGroups: %s\n", rd_kafka_error_string(errs[i]));
  }
  assert_int_equal(nerr, 0);
  size_t n = 0;
  const rd_kafka_ConsumerGroupListing_t **gs = rd_kafka_ListConsumerGroups_result_valid(res, &n);
  bool found = false;
  for (size_t i = 0; i < n; i++) {
    assert_int_equal(rd_kafka_ConsumerGroupListing_state(gs[i]), state);
    found = found || strcmp(rd_kafka_ConsumerGroupListing_group_id(gs[i]), CG_GROUP) == 0;
  }
  rd_kafka_event_destroy(ev);
  rd_kafka_AdminOptions_destroy(o);
  return found;
}

static void rk_wait_listed(rd_kafka_t *rk, rd_kafka_queue_t *q, rd_kafka_t *consumer,
                           rd_kafka_consumer_group_state_t state)
{
  for (long long end = tu_now_ms() + WAIT_MS; !rk_group_listed(rk, q, state);) {
    if (tu_now_ms() > end) {
      fail_msg("group %s is not listed in state %s", CG_GROUP,
               rd_kafka_consumer_group_state_name(state));
    }
    if (consumer != NULL) {
      rd_kafka_message_t *m = rd_kafka_consumer_poll(consumer, 200);
      if (m != NULL) {
        rd_kafka_message_destroy(m);
      }
    } else {
      usleep(200 * 1000);
    }
  }
}

static void rk_produce_cg(const char *bootstrap)
{
  rd_kafka_t *p = rk_new(RD_KAFKA_PRODUCER, bootstrap, NULL);
  for (int i = 0; i < CG_COUNT; i++) {
    char v[16];
    int n = snprintf(v, sizeof v, "m%d", i);
    rd_kafka_resp_err_t err = rd_kafka_producev(
        p, RD_KAFKA_V_TOPIC(CG_TOPIC), RD_KAFKA_V_PARTITION(i % CG_PARTS),
        RD_KAFKA_V_VALUE(v, (size_t)n), RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY), RD_KAFKA_V_END);
    assert_int_equal(err, RD_KAFKA_RESP_ERR_NO_ERROR);
  }
  assert_int_equal(rd_kafka_flush(p, WAIT_MS), RD_KAFKA_RESP_ERR_NO_ERROR);
  rd_kafka_destroy(p);
}

/* Consumes every message of CG_TOPIC in the group and commits. */
static void rk_consume_commit(rd_kafka_t *c)
{
  rd_kafka_topic_partition_list_t *sub = rd_kafka_topic_partition_list_new(1);
  rd_kafka_topic_partition_list_add(sub, CG_TOPIC, RD_KAFKA_PARTITION_UA);
  assert_int_equal(rd_kafka_subscribe(c, sub), RD_KAFKA_RESP_ERR_NO_ERROR);
  rd_kafka_topic_partition_list_destroy(sub);
  int got = 0;
  for (long long end = tu_now_ms() + WAIT_MS; got < CG_COUNT && tu_now_ms() < end;) {
    rd_kafka_message_t *m = rd_kafka_consumer_poll(c, 200);
    if (m != NULL) {
      got += m->err == RD_KAFKA_RESP_ERR_NO_ERROR;
      rd_kafka_message_destroy(m);
    }
  }
  assert_int_equal(got, CG_COUNT);
  assert_int_equal(rd_kafka_commit(c, NULL, 0), RD_KAFKA_RESP_ERR_NO_ERROR);
}

/* CG_PARTS partitions of CG_TOPIC, or the first n. */
static rd_kafka_topic_partition_list_t *cg_parts(int n)
{
  rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new(n);
  for (int i = 0; i < n; i++) {
    rd_kafka_topic_partition_list_add(l, CG_TOPIC, i);
  }
  return l;
}

/* DeleteConsumerGroupOffsets of CG_GROUP's partitions 0 and 1: the
 * group-level error (want), or each partition deleted. */
static void rk_delete_offsets(rd_kafka_t *rk, rd_kafka_queue_t *q, rd_kafka_resp_err_t want)
{
  rd_kafka_topic_partition_list_t *l = cg_parts(2);
  rd_kafka_DeleteConsumerGroupOffsets_t *d = rd_kafka_DeleteConsumerGroupOffsets_new(CG_GROUP, l);
  rd_kafka_topic_partition_list_destroy(l);
  rd_kafka_DeleteConsumerGroupOffsets(rk, &d, 1, NULL, q);
  rd_kafka_event_t *ev = rk_wait_result(q, RD_KAFKA_EVENT_DELETECONSUMERGROUPOFFSETS_RESULT);
  if (want != RD_KAFKA_RESP_ERR_NO_ERROR) {
    /* librdkafka gives a whole-request error as the event's */
    print_message("DeleteConsumerGroupOffsets: %s\n", rd_kafka_event_error_string(ev));
    assert_int_equal(rd_kafka_event_error(ev), want);
    rd_kafka_event_destroy(ev);
    rd_kafka_DeleteConsumerGroupOffsets_destroy(d);
    return;
  }
  assert_int_equal(rd_kafka_event_error(ev), RD_KAFKA_RESP_ERR_NO_ERROR);
  size_t n = 0;
  const rd_kafka_group_result_t **gs = rd_kafka_DeleteConsumerGroupOffsets_result_groups(
      rd_kafka_event_DeleteConsumerGroupOffsets_result(ev), &n);
  assert_int_equal(n, 1);
  const rd_kafka_error_t *e = rd_kafka_group_result_error(gs[0]);
  print_message("DeleteConsumerGroupOffsets: %s\n", e != NULL ? rd_kafka_error_string(e) : "ok");
  assert_int_equal(e != NULL ? rd_kafka_error_code(e) : RD_KAFKA_RESP_ERR_NO_ERROR, want);
  const rd_kafka_topic_partition_list_t *res = rd_kafka_group_result_partitions(gs[0]);
  for (int i = 0; want == RD_KAFKA_RESP_ERR_NO_ERROR && i < res->cnt; i++) {
    assert_int_equal(res->elems[i].err, RD_KAFKA_RESP_ERR_NO_ERROR);
  }
  rd_kafka_event_destroy(ev);
  rd_kafka_DeleteConsumerGroupOffsets_destroy(d);
}

/* ListConsumerGroupOffsets: partitions 0 and 1 have none, 2 its commit. */
static void rk_check_offsets_deleted(rd_kafka_t *rk, rd_kafka_queue_t *q)
{
  rd_kafka_topic_partition_list_t *l = cg_parts(CG_PARTS);
  rd_kafka_ListConsumerGroupOffsets_t *o = rd_kafka_ListConsumerGroupOffsets_new(CG_GROUP, l);
  rd_kafka_topic_partition_list_destroy(l);
  rd_kafka_ListConsumerGroupOffsets(rk, &o, 1, NULL, q);
  rd_kafka_event_t *ev = rk_wait(q, RD_KAFKA_EVENT_LISTCONSUMERGROUPOFFSETS_RESULT);
  size_t n = 0;
  const rd_kafka_group_result_t **gs = rd_kafka_ListConsumerGroupOffsets_result_groups(
      rd_kafka_event_ListConsumerGroupOffsets_result(ev), &n);
  assert_int_equal(n, 1);
  assert_null(rd_kafka_group_result_error(gs[0]));
  const rd_kafka_topic_partition_list_t *res = rd_kafka_group_result_partitions(gs[0]);
  assert_int_equal(res->cnt, CG_PARTS);
  for (int i = 0; i < res->cnt; i++) {
    int64_t want = res->elems[i].partition == 2 ? CG_COUNT / CG_PARTS : RD_KAFKA_OFFSET_INVALID;
    assert_int_equal(res->elems[i].offset, want);
  }
  rd_kafka_event_destroy(ev);
  rd_kafka_ListConsumerGroupOffsets_destroy(o);
}

static void test_librdkafka_lists_groups_and_reads_and_deletes_commits(void **state)
{
  (void)state;
  static struct cd_cluster c;
  char bootstrap[64];
  rk_cluster(&c, 0, bootstrap, sizeof bootstrap);
  char msg[256] = "";
  assert_int_equal(cd_create_topic(&c, 0, CG_TOPIC, CG_PARTS, 3, WAIT_MS, msg, sizeof msg), 0);
  assert_int_equal(cd_wait_settled(&c, CG_TOPIC, WAIT_MS), 0);
  rk_produce_cg(bootstrap);

  rd_kafka_t *consumer = rk_new(RD_KAFKA_CONSUMER, bootstrap, CG_GROUP);
  rk_consume_commit(consumer);
  rd_kafka_t *rk = rk_admin(bootstrap);
  rd_kafka_queue_t *q = rd_kafka_queue_new(rk);
  rk_wait_listed(rk, q, consumer, RD_KAFKA_CONSUMER_GROUP_STATE_STABLE);
  assert_false(rk_group_listed(rk, q, RD_KAFKA_CONSUMER_GROUP_STATE_EMPTY));

  /* OffsetFetch v7: what was committed, per partition (one in three of
   * the messages went to each). */
  rd_kafka_topic_partition_list_t *parts = rd_kafka_topic_partition_list_new(CG_PARTS);
  for (int i = 0; i < CG_PARTS; i++) {
    rd_kafka_topic_partition_list_add(parts, CG_TOPIC, i);
  }
  assert_int_equal(rd_kafka_committed(consumer, parts, 10000), RD_KAFKA_RESP_ERR_NO_ERROR);
  for (int i = 0; i < parts->cnt; i++) {
    assert_int_equal(parts->elems[i].err, RD_KAFKA_RESP_ERR_NO_ERROR);
    assert_int_equal(parts->elems[i].offset, CG_COUNT / CG_PARTS);
  }
  rd_kafka_topic_partition_list_destroy(parts);
  rk_delete_offsets(rk, q, RD_KAFKA_RESP_ERR_NON_EMPTY_GROUP);

  assert_int_equal(rd_kafka_consumer_close(consumer), RD_KAFKA_RESP_ERR_NO_ERROR);
  rd_kafka_destroy(consumer);
  rk_wait_listed(rk, q, NULL, RD_KAFKA_CONSUMER_GROUP_STATE_EMPTY);
  assert_false(rk_group_listed(rk, q, RD_KAFKA_CONSUMER_GROUP_STATE_STABLE));
  rk_delete_offsets(rk, q, RD_KAFKA_RESP_ERR_NO_ERROR);
  rk_check_offsets_deleted(rk, q);
  rd_kafka_queue_destroy(q);
  rd_kafka_destroy(rk);
  cd_destroy(&c);
}

#define DR_TOPIC "dr"
#define DR_PER_PART 150
#define DR_START 100

/* The node leading DR_TOPIC/part as the cluster tells librdkafka, other
 * than not (a node just killed, which metadata may still name); 0 none
 * known yet. */
static int32_t dr_leader(rd_kafka_t *rk, int32_t part, int32_t not )
{
  rd_kafka_topic_t *t = rd_kafka_topic_new(rk, DR_TOPIC, NULL);
  const struct rd_kafka_metadata *md = NULL;
  int32_t leader = 0;
  if (rd_kafka_metadata(rk, 0, t, &md, 5000) == RD_KAFKA_RESP_ERR_NO_ERROR) {
    if (md->topic_cnt == 1 && md->topics[0].partition_cnt > part) {
      leader = md->topics[0].partitions[part].leader;
    }
    rd_kafka_metadata_destroy(md);
  }
  rd_kafka_topic_destroy(t);
  return leader > 0 && leader != not ? leader : 0;
}

static void dr_produce(const char *bootstrap)
{
  rd_kafka_t *p = rk_new(RD_KAFKA_PRODUCER, bootstrap, NULL);
  for (int part = 0; part < 2; part++) {
    for (int i = 0; i < DR_PER_PART; i++) {
      char v[32];
      int n = snprintf(v, sizeof v, "p%d-%d", part, i);
      assert_int_equal(rd_kafka_producev(p, RD_KAFKA_V_TOPIC(DR_TOPIC), RD_KAFKA_V_PARTITION(part),
                                         RD_KAFKA_V_VALUE(v, (size_t)n),
                                         RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY), RD_KAFKA_V_END),
                       RD_KAFKA_RESP_ERR_NO_ERROR);
    }
  }
  assert_int_equal(rd_kafka_flush(p, WAIT_MS), RD_KAFKA_RESP_ERR_NO_ERROR);
  rd_kafka_destroy(p);
}

/* rd_kafka_DeleteRecords of DR_TOPIC's partitions part[i] below
 * offset[i]: each partition's result is err[i], with the low watermark
 * want[i] when it succeeded. */
static void dr_delete(rd_kafka_t *rk, rd_kafka_queue_t *q, int n, const int32_t *part,
                      const int64_t *offset, const rd_kafka_resp_err_t *err, const int64_t *want)
{
  rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new(n);
  for (int i = 0; i < n; i++) {
    rd_kafka_topic_partition_list_add(l, DR_TOPIC, part[i])->offset = offset[i];
  }
  rd_kafka_DeleteRecords_t *d = rd_kafka_DeleteRecords_new(l);
  rd_kafka_topic_partition_list_destroy(l);
  rd_kafka_DeleteRecords(rk, &d, 1, NULL, q);
  rd_kafka_event_t *ev = rk_wait_result(q, RD_KAFKA_EVENT_DELETERECORDS_RESULT);
  const rd_kafka_topic_partition_list_t *res =
      rd_kafka_DeleteRecords_result_offsets(rd_kafka_event_DeleteRecords_result(ev));
  assert_non_null(res);
  assert_int_equal(res->cnt, n);
  for (int i = 0; i < n; i++) {
    const rd_kafka_topic_partition_t *r =
        rd_kafka_topic_partition_list_find(res, DR_TOPIC, part[i]);
    assert_non_null(r);
    print_message("DeleteRecords %s/%d below %lld: %s, low watermark %lld\n", DR_TOPIC,
                  (int)part[i], (long long)offset[i], rd_kafka_err2str(r->err),
                  (long long)r->offset);
    assert_int_equal(r->err, err[i]);
    if (err[i] == RD_KAFKA_RESP_ERR_NO_ERROR) {
      assert_int_equal(r->offset, want[i]);
    }
  }
  rd_kafka_event_destroy(ev);
  rd_kafka_DeleteRecords_destroy(d);
}

/* Waits for DR_TOPIC/part's watermarks from a leader other than not and
 * checks them. */
static void dr_check_watermarks(rd_kafka_t *rk, int32_t part, int32_t not, int64_t lo_want,
                                int64_t hi_want)
{
  int64_t lo = -1, hi = -1;
  rd_kafka_resp_err_t e = RD_KAFKA_RESP_ERR__TIMED_OUT;
  for (long long end = tu_now_ms() + WAIT_MS; tu_now_ms() < end;) {
    if (dr_leader(rk, part, not ) != 0 &&
        (e = rd_kafka_query_watermark_offsets(rk, DR_TOPIC, part, &lo, &hi, 5000)) ==
            RD_KAFKA_RESP_ERR_NO_ERROR) {
      break;
    }
    usleep(200 * 1000);
  }
  assert_int_equal(e, RD_KAFKA_RESP_ERR_NO_ERROR);
  assert_int_equal(lo, lo_want);
  assert_int_equal(hi, hi_want);
}

/* Reads DR_TOPIC/0 from its beginning to the end: exactly the records
 * DR_START.. in order, once each. */
static void dr_read_from_beginning(const char *bootstrap)
{
  rd_kafka_t *c = rk_new(RD_KAFKA_CONSUMER, bootstrap, NULL);
  rd_kafka_topic_t *t = rd_kafka_topic_new(c, DR_TOPIC, NULL);
  assert_int_equal(rd_kafka_consume_start(t, 0, RD_KAFKA_OFFSET_BEGINNING), 0);
  int64_t next = DR_START;
  for (long long end = tu_now_ms() + WAIT_MS; next < DR_PER_PART && tu_now_ms() < end;) {
    rd_kafka_message_t *m = rd_kafka_consume(t, 0, 500);
    if (m == NULL) {
      continue;
    }
    if (m->err == RD_KAFKA_RESP_ERR_NO_ERROR) {
      char want[32];
      int n = snprintf(want, sizeof want, "p0-%lld", (long long)next);
      assert_int_equal(m->offset, next);
      assert_int_equal(m->len, (size_t)n);
      assert_memory_equal(m->payload, want, (size_t)n);
      next++;
    } else if (m->err != RD_KAFKA_RESP_ERR__PARTITION_EOF) {
      print_message("consume: %s\n", rd_kafka_message_errstr(m));
    }
    rd_kafka_message_destroy(m);
  }
  assert_int_equal(next, DR_PER_PART);
  rd_kafka_consume_stop(t, 0);
  rd_kafka_topic_destroy(t);
  rd_kafka_destroy(c);
}

static void test_librdkafka_deletes_records_across_leader_kills(void **state)
{
  (void)state;
  static struct cd_cluster c;
  char bootstrap[64];
  rk_cluster(&c, 2, bootstrap, sizeof bootstrap);
  char msg[256] = "";
  assert_int_equal(cd_create_topic(&c, 0, DR_TOPIC, 2, 3, WAIT_MS, msg, sizeof msg), 0);
  assert_int_equal(cd_wait_settled(&c, DR_TOPIC, WAIT_MS), 0);
  dr_produce(bootstrap);
  rd_kafka_t *rk = rk_admin(bootstrap);
  rd_kafka_queue_t *q = rd_kafka_queue_new(rk);
  const rd_kafka_resp_err_t ok[] = {RD_KAFKA_RESP_ERR_NO_ERROR, RD_KAFKA_RESP_ERR_NO_ERROR};
  dr_delete(rk, q, 2, (const int32_t[]){0, 1}, (const int64_t[]){DR_START, RD_KAFKA_OFFSET_END}, ok,
            (const int64_t[]){DR_START, DR_PER_PART});
  /* Above the high watermark: refused, nothing moves; below the start:
   * nothing moves, the start is the answer. */
  dr_delete(rk, q, 1, (const int32_t[]){0}, (const int64_t[]){DR_PER_PART + 1},
            (const rd_kafka_resp_err_t[]){RD_KAFKA_RESP_ERR_OFFSET_OUT_OF_RANGE}, NULL);
  dr_delete(rk, q, 1, (const int32_t[]){0}, (const int64_t[]){40}, ok, (const int64_t[]){DR_START});
  dr_check_watermarks(rk, 0, 0, DR_START, DR_PER_PART);
  dr_check_watermarks(rk, 1, 0, DR_PER_PART, DR_PER_PART);
  dr_read_from_beginning(bootstrap);
  /* Every replica applied the command at the same point of its log: two
   * leaders in turn are SIGKILLed, each next one has the same start. */
  for (int round = 0; round < 2; round++) {
    int32_t victim = 0;
    for (long long end = tu_now_ms() + WAIT_MS; victim == 0 && tu_now_ms() < end;) {
      victim = dr_leader(rk, 0, 0);
    }
    assert_true(victim > 0);
    int vi = cd_index(&c, (uint64_t)victim);
    print_message("SIGKILL node %d, the leader of %s/0\n", (int)victim, DR_TOPIC);
    cd_kill(&c, vi);
    dr_check_watermarks(rk, 0, victim, DR_START, DR_PER_PART);
    dr_read_from_beginning(bootstrap);
    assert_int_equal(cd_start(&c, vi), 0);
  }
  rd_kafka_queue_destroy(q);
  rd_kafka_destroy(rk);
  cd_destroy(&c);
}

#define DI_TOPIC "di"
#define DI_COUNT 50

static void di_produce(rd_kafka_t *p, int from)
{
  for (int i = from; i < from + DI_COUNT; i++) {
    char v[16];
    int n = snprintf(v, sizeof v, "i%d", i);
    assert_int_equal(rd_kafka_producev(p, RD_KAFKA_V_TOPIC(DI_TOPIC), RD_KAFKA_V_PARTITION(0),
                                       RD_KAFKA_V_VALUE(v, (size_t)n),
                                       RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY), RD_KAFKA_V_END),
                     RD_KAFKA_RESP_ERR_NO_ERROR);
  }
  assert_int_equal(rd_kafka_flush(p, WAIT_MS), RD_KAFKA_RESP_ERR_NO_ERROR);
}

static int di_failed; /* delivery reports with an error */

static void di_on_delivery(rd_kafka_t *rk, const rd_kafka_message_t *m, void *opaque)
{
  (void)rk;
  (void)opaque;
  if (m->err != RD_KAFKA_RESP_ERR_NO_ERROR) {
    print_message("delivery failed: %s\n", rd_kafka_err2str(m->err));
    di_failed++;
  }
}

static void test_idempotent_producer_state_survives_a_delete_and_a_restart(void **state)
{
  (void)state;
  static struct cd_cluster c;
  char bootstrap[64];
  rk_cluster(&c, 0, bootstrap, sizeof bootstrap);
  char msg[256] = "";
  assert_int_equal(cd_create_topic(&c, 0, DI_TOPIC, 1, 3, WAIT_MS, msg, sizeof msg), 0);
  assert_int_equal(cd_wait_settled(&c, DI_TOPIC, WAIT_MS), 0);
  char err[256];
  rd_kafka_conf_t *conf = rd_kafka_conf_new();
  rk_set(conf, "bootstrap.servers", bootstrap);
  rk_set(conf, "enable.idempotence", "true");
  rd_kafka_conf_set_dr_msg_cb(conf, di_on_delivery);
  rd_kafka_t *p = rd_kafka_new(RD_KAFKA_PRODUCER, conf, err, sizeof err);
  assert_non_null(p);
  di_produce(p, 0);
  /* Every batch of the producer goes. */
  rd_kafka_queue_t *q = rd_kafka_queue_new(p);
  rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new(1);
  rd_kafka_topic_partition_list_add(l, DI_TOPIC, 0)->offset = RD_KAFKA_OFFSET_END;
  rd_kafka_DeleteRecords_t *d = rd_kafka_DeleteRecords_new(l);
  rd_kafka_topic_partition_list_destroy(l);
  rd_kafka_DeleteRecords(p, &d, 1, NULL, q);
  rd_kafka_event_t *ev = rk_wait(q, RD_KAFKA_EVENT_DELETERECORDS_RESULT);
  const rd_kafka_topic_partition_list_t *res =
      rd_kafka_DeleteRecords_result_offsets(rd_kafka_event_DeleteRecords_result(ev));
  assert_int_equal(res->elems[0].err, RD_KAFKA_RESP_ERR_NO_ERROR);
  assert_int_equal(res->elems[0].offset, DI_COUNT);
  rd_kafka_event_destroy(ev);
  rd_kafka_DeleteRecords_destroy(d);
  rd_kafka_queue_destroy(q);
  assert_int_equal(cd_wait_replicas_start(&c, DI_TOPIC, 0, DI_COUNT, WAIT_MS), 0);
  /* A follower restarts: its producer table comes from its disk, its log
   * holds none of the producer's batches. */
  rd_kafka_topic_t *t = rd_kafka_topic_new(p, DI_TOPIC, NULL);
  const struct rd_kafka_metadata *md = NULL;
  assert_int_equal(rd_kafka_metadata(p, 0, t, &md, 5000), RD_KAFKA_RESP_ERR_NO_ERROR);
  int32_t leader = md->topics[0].partitions[0].leader;
  rd_kafka_metadata_destroy(md);
  rd_kafka_topic_destroy(t);
  int fi = cd_index(&c, (uint64_t)(leader % 3 + 1));
  print_message("SIGKILL and restart of node %d, a follower of %s/0 (leader %d)\n", fi + 1,
                DI_TOPIC, (int)leader);
  cd_kill(&c, fi);
  assert_int_equal(cd_start(&c, fi), 0);
  /* The producer's next sequences: appended by every replica alike. */
  di_produce(p, DI_COUNT);
  assert_int_equal(di_failed, 0);
  assert_int_equal(cd_wait_replicas_equal(&c, DI_TOPIC, WAIT_MS), 0);
  rd_kafka_destroy(p);
  cd_destroy(&c);
}

int main(int argc, char **argv)
{
  if (argc < 2) {
    fprintf(stderr, "usage: %s <path of cairnd>\n", argv[0]);
    return 2;
  }
  cairnd_bin = argv[1];
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_librdkafka_acls_are_cairn_entries),
      cmocka_unit_test(test_librdkafka_lists_groups_and_reads_and_deletes_commits),
      cmocka_unit_test(test_librdkafka_deletes_records_across_leader_kills),
      cmocka_unit_test(test_idempotent_producer_state_survives_a_delete_and_a_restart),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
