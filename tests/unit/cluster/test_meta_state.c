/* test_meta_state.c - the metadata state machine: every command and every
 * refusal, refused commands changing nothing, malformed bytes, snapshot round
 * trips and damage, and seeded random command sequences giving
 * byte-identical snapshots on two replicas. */
#include "cluster/meta_state.h"
#include "common/err.h"
#include "format/crc32c.h"
#include "format/endian.h"
#include "meta.pb-c.h"
#include "testutil.h"
#include "storage/store.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <limits.h>

/* ---- helpers ---- */

/* Applies an encoded command (takes it) and returns the result code. */
static int apply_cmd(struct meta_state *st, int enc_rc, uint8_t *cmd, size_t len,
                     struct meta_result *res)
{
  assert_int_equal(enc_rc, 0);
  int rc = meta_apply(st, cmd, len, 0, res);
  free(cmd);
  assert_int_equal(rc, res->code);
  return rc;
}

#define APPLY(st, res, encoder, ...)                                                               \
  ({                                                                                               \
    uint8_t *cmd_;                                                                                 \
    size_t len_;                                                                                   \
    int enc_ = encoder(__VA_ARGS__, &cmd_, &len_);                                                 \
    apply_cmd((st), enc_, cmd_, len_, (res));                                                      \
  })

static int do_bootstrap(struct meta_state *st, const char *id, struct meta_result *res)
{
  uint64_t voters[] = {1, 2, 3};
  return APPLY(st, res, meta_cmd_bootstrap, id, voters, 3);
}

/* Registers node id with addresses derived from it; with_kafka: a Kafka
 * address too (a node from before the Kafka port registers none). */
static int do_register_caps(struct meta_state *st, uint64_t id, uint64_t inc, const char *rack,
                            bool with_kafka, uint32_t caps, uint64_t replaces,
                            struct meta_result *res)
{
  char client[64], cluster[64], admin[64], kafka_buf[64];
  const char *kafka = with_kafka ? kafka_buf : NULL;
  snprintf(client, sizeof client, "10.0.0.%llu:9092", (unsigned long long)id);
  snprintf(kafka_buf, sizeof kafka_buf, "10.0.0.%llu:9095", (unsigned long long)id);
  snprintf(cluster, sizeof cluster, "10.0.0.%llu:9093", (unsigned long long)id);
  snprintf(admin, sizeof admin, "10.0.0.%llu:9094", (unsigned long long)id);
  struct meta_node_info info = {id, inc, client, cluster, admin, rack, kafka, NULL, caps};
  return APPLY(st, res, meta_cmd_register_node, &info, replaces);
}

/* Without capabilities, as a node before them registered. */
static int do_register_kafka(struct meta_state *st, uint64_t id, uint64_t inc, const char *rack,
                             bool with_kafka, uint64_t replaces, struct meta_result *res)
{
  return do_register_caps(st, id, inc, rack, with_kafka, 0, replaces, res);
}

/* A node with a Kafka port and a PostgreSQL database. */
static int do_register(struct meta_state *st, uint64_t id, uint64_t inc, const char *rack,
                       uint64_t replaces, struct meta_result *res)
{
  return do_register_caps(st, id, inc, rack, true, META_NODE_CAP_POSTGRESQL, replaces, res);
}

static int do_state(struct meta_state *st, uint64_t id, enum meta_node_state s, uint64_t inc,
                    struct meta_result *res)
{
  return APPLY(st, res, meta_cmd_set_node_state, id, s, inc, 1234);
}

static int do_create(struct meta_state *st, const char *name, uint32_t parts, uint32_t rf,
                     struct meta_result *res)
{
  return APPLY(st, res, meta_cmd_create_topic, name, parts, rf, NULL);
}

static int do_set_replicas(struct meta_state *st, uint32_t tid, uint32_t part,
                           const uint64_t *replicas, size_t n, uint64_t epoch,
                           struct meta_result *res)
{
  return APPLY(st, res, meta_cmd_set_replicas, tid, part, replicas, n, epoch);
}

/* A bootstrapped cluster of n ALIVE nodes 1..n, incarnation 100+id. */
static void make_cluster(struct meta_state *st, int n)
{
  struct meta_result res;
  meta_state_init(st);
  assert_int_equal(do_bootstrap(st, "c0ffee00-1111-2222-3333-444455556666", &res), 0);
  for (int i = 1; i <= n; i++)
    assert_int_equal(do_register(st, (uint64_t)i, 100 + (uint64_t)i, "", 0, &res), 0);
}

static uint8_t *snap(const struct meta_state *st, size_t *len)
{
  uint8_t *buf;
  assert_int_equal(meta_snapshot_encode(st, &buf, len), 0);
  return buf;
}

/* Asserts that two states encode to the same bytes. */
static void assert_same_state(const struct meta_state *a, const struct meta_state *b)
{
  size_t la, lb;
  uint8_t *sa = snap(a, &la), *sb = snap(b, &lb);
  assert_int_equal(la, lb);
  assert_memory_equal(sa, sb, la);
  free(sa);
  free(sb);
}

static void copy_state(const struct meta_state *from, struct meta_state *to)
{
  size_t len;
  uint8_t *buf = snap(from, &len);
  meta_state_init(to);
  assert_int_equal(meta_snapshot_decode(to, buf, len), 0);
  free(buf);
}

/* Applies a command expected to fail with `want`, and checks the state is
 * byte-identical afterwards. */
#define APPLY_REFUSED(st, want, encoder, ...)                                                      \
  do {                                                                                             \
    struct meta_state before_;                                                                     \
    struct meta_result r_;                                                                         \
    copy_state((st), &before_);                                                                    \
    int rc_ = APPLY((st), &r_, encoder, __VA_ARGS__);                                              \
    if (rc_ != (want))                                                                             \
      fail_msg("got %s (%s), want %s", cairn_errname(rc_), r_.msg, cairn_errname(want));           \
    assert_true(r_.msg[0] != '\0');                                                                \
    assert_same_state((st), &before_);                                                             \
    meta_state_close(&before_);                                                                    \
  } while (0)

/* Structural invariants every state must keep. */
static void check_invariants(const struct meta_state *st)
{
  char why[200];
  int rc = meta_state_check(st, why, sizeof why);
  if (rc != 0)
    fail_msg("invariant broken: %s", why);
  for (size_t i = 1; i < st->nnodes; i++)
    assert_true(st->nodes[i - 1].id < st->nodes[i].id);
  size_t total = 0;
  for (size_t i = 0; i < st->ntopics; i++) {
    const struct meta_topic *t = &st->topics[i];
    if (i > 0)
      assert_true(st->topics[i - 1].id < t->id);
    assert_true(t->id > 0 && t->id < st->next_topic_id);
    assert_true(meta_topic_name_valid(t->name));
    assert_ptr_equal(meta_topic_find(st, t->name), t);
    assert_ptr_equal(meta_topic_find_id(st, t->id), t);
    total += t->npartitions;
    for (uint32_t p = 0; p < t->npartitions; p++) {
      const struct meta_partition *part = &t->partitions[p];
      assert_int_equal(part->group_id, meta_group_id(t->id, p));
      assert_true(part->group_id != META_GROUP_ID);
      assert_true(part->nreplicas >= 1 && part->nreplicas <= META_MAX_REPLICAS);
      for (uint32_t r = 0; r < part->nreplicas; r++) {
        assert_true(part->replicas[r] != 0);
        assert_false(meta_replicas_contain(part->replicas, r, part->replicas[r]));
      }
    }
  }
  assert_int_equal(total, st->total_partitions);
}

/* ---- bootstrap ---- */

static void test_meta_bootstrap_names_the_cluster_once(void **state)
{
  struct meta_state st;
  struct meta_result res;
  meta_state_init(&st);
  /* Nothing but Bootstrap is accepted first. */
  APPLY_REFUSED(&st, CAIRN_EINVAL, meta_cmd_create_topic, "t", 1, 1, NULL);
  uint64_t none[1] = {0};
  APPLY_REFUSED(&st, CAIRN_EINVAL, meta_cmd_bootstrap, "", none, 0);
  APPLY_REFUSED(&st, CAIRN_EINVAL, meta_cmd_bootstrap, "has space", (uint64_t[]){1}, 1);
  APPLY_REFUSED(&st, CAIRN_EINVAL, meta_cmd_bootstrap, "c1", none, 0);
  APPLY_REFUSED(&st, CAIRN_EINVAL, meta_cmd_bootstrap, "c1", none, 1);
  APPLY_REFUSED(&st, CAIRN_EINVAL, meta_cmd_bootstrap, "c1", ((uint64_t[]){1, 2, 1}), 3);
  char longid[META_CLUSTER_ID_MAX + 2];
  memset(longid, 'a', sizeof longid - 1);
  longid[sizeof longid - 1] = '\0';
  APPLY_REFUSED(&st, CAIRN_EINVAL, meta_cmd_bootstrap, longid, (uint64_t[]){1}, 1);

  assert_int_equal(do_bootstrap(&st, "cluster-A", &res), 0);
  assert_string_equal(st.cluster_id, "cluster-A");
  assert_int_equal(st.nvoters, 3);
  assert_int_equal(st.voters[2], 3);
  assert_int_equal(st.next_topic_id, 1);
  /* The same id again is a no-op; another id is another cluster. */
  assert_int_equal(do_bootstrap(&st, "cluster-A", &res), 0);
  APPLY_REFUSED(&st, CAIRN_ECLUSTER_ID_MISMATCH, meta_cmd_bootstrap, "cluster-B", (uint64_t[]){1},
                1);
  meta_state_close(&st);
}

/* ---- node identity ---- */

static void test_meta_register_node_adds_and_updates(void **state)
{
  struct meta_state st;
  struct meta_result res;
  make_cluster(&st, 0);
  assert_int_equal(do_register(&st, 7, 70, "r1", 0, &res), 0);
  assert_int_equal(do_register(&st, 3, 30, "", 0, &res), 0);
  assert_int_equal(st.nnodes, 2);
  assert_int_equal(st.nodes[0].id, 3); /* kept in id order */
  const struct meta_node *n = meta_node_find(&st, 7);
  assert_non_null(n);
  assert_int_equal(n->state, META_NODE_ALIVE);
  assert_int_equal(n->incarnation, 70);
  assert_string_equal(n->rack, "r1");
  assert_string_equal(n->client_addr, "10.0.0.7:9092");
  assert_string_equal(n->admin_addr, "10.0.0.7:9094");
  assert_string_equal(n->kafka_addr, "10.0.0.7:9095");
  assert_null(meta_node_find(&st, 5));
  /* Same incarnation: an update (new rack), still ALIVE. */
  assert_int_equal(do_register(&st, 7, 70, "r2", 0, &res), 0);
  assert_string_equal(meta_node_find(&st, 7)->rack, "r2");
  /* Shape errors. */
  struct meta_node_info bad = {0, 1, "a:1", "a:2", NULL, NULL, NULL, NULL, 0};
  APPLY_REFUSED(&st, CAIRN_EINVAL, meta_cmd_register_node, &bad, 0);
  bad.node_id = 9;
  bad.incarnation = 0;
  APPLY_REFUSED(&st, CAIRN_EINVAL, meta_cmd_register_node, &bad, 0);
  bad.incarnation = 1;
  bad.cluster_addr = "";
  APPLY_REFUSED(&st, CAIRN_EINVAL, meta_cmd_register_node, &bad, 0);
  char longrack[META_RACK_MAX + 2];
  memset(longrack, 'r', sizeof longrack - 1);
  longrack[sizeof longrack - 1] = '\0';
  bad.cluster_addr = "a:2";
  bad.rack = longrack;
  APPLY_REFUSED(&st, CAIRN_EINVAL, meta_cmd_register_node, &bad, 0);
  meta_state_close(&st);
}

static void test_meta_register_refuses_an_id_held_by_a_live_process(void **state)
{
  struct meta_state st;
  struct meta_result res;
  make_cluster(&st, 3);
  /* Another process (incarnation 999) claims id 2 while 102 is ALIVE. */
  struct meta_node_info info = {2, 999, "x:1", "x:2", "", "", NULL, NULL, 0};
  APPLY_REFUSED(&st, CAIRN_ENODE_ID_IN_USE, meta_cmd_register_node, &info, 0);
  /* Naming the wrong incarnation as silent does not help. */
  APPLY_REFUSED(&st, CAIRN_ENODE_ID_IN_USE, meta_cmd_register_node, &info, 555);
  /* The leader found 102 silent and says so: the new process takes over. */
  assert_int_equal(APPLY(&st, &res, meta_cmd_register_node, &info, 102), 0);
  const struct meta_node *n = meta_node_find(&st, 2);
  assert_int_equal(n->incarnation, 999);
  assert_string_equal(n->client_addr, "x:1");
  assert_int_equal(n->state, META_NODE_ALIVE);
  /* The old process coming back is now the stranger. */
  APPLY_REFUSED(&st, CAIRN_ENODE_ID_IN_USE, meta_cmd_register_node,
                (&(struct meta_node_info){2, 102, "y:1", "y:2", "", "", NULL, NULL, 0}), 0);

  /* A DEAD record is taken over by any new incarnation. */
  assert_int_equal(do_state(&st, 3, META_NODE_DEAD, 103, &res), 0);
  assert_int_equal(do_register(&st, 3, 333, "", 0, &res), 0);
  assert_int_equal(meta_node_find(&st, 3)->state, META_NODE_ALIVE);
  assert_int_equal(meta_node_find(&st, 3)->incarnation, 333);
  /* The same incarnation re-registering revives it too. */
  assert_int_equal(do_state(&st, 3, META_NODE_DEAD, 0, &res), 0);
  assert_int_equal(do_register(&st, 3, 333, "", 0, &res), 0);
  assert_int_equal(meta_node_find(&st, 3)->state, META_NODE_ALIVE);

  /* A DRAINING node restarted with replaces_incarnation keeps draining. */
  assert_int_equal(do_state(&st, 1, META_NODE_DRAINING, 0, &res), 0);
  APPLY_REFUSED(&st, CAIRN_ENODE_ID_IN_USE, meta_cmd_register_node,
                (&(struct meta_node_info){1, 111, "z:1", "z:2", "", "", NULL, NULL, 0}), 0);
  assert_int_equal(do_register(&st, 1, 111, "", 101, &res), 0);
  assert_int_equal(meta_node_find(&st, 1)->state, META_NODE_DRAINING);

  /* REMOVED: the same process may not rejoin, a restarted one may. */
  assert_int_equal(do_state(&st, 1, META_NODE_REMOVED, 0, &res), 0);
  APPLY_REFUSED(&st, CAIRN_EINVAL, meta_cmd_register_node,
                (&(struct meta_node_info){1, 111, "z:1", "z:2", "", "", NULL, NULL, 0}), 0);
  assert_int_equal(do_register(&st, 1, 1111, "", 0, &res), 0);
  assert_int_equal(meta_node_find(&st, 1)->state, META_NODE_ALIVE);
  meta_state_close(&st);
}

static void test_meta_set_node_state_follows_the_diagram(void **state)
{
  struct meta_state st;
  struct meta_result res;
  make_cluster(&st, 4);
  APPLY_REFUSED(&st, CAIRN_EUNKNOWN_NODE, meta_cmd_set_node_state, 9, META_NODE_DEAD, 0, 1);
  APPLY_REFUSED(&st, CAIRN_EINVAL, meta_cmd_set_node_state, 1, (enum meta_node_state)0, 0, 1);
  APPLY_REFUSED(&st, CAIRN_EINVAL, meta_cmd_set_node_state, 1, (enum meta_node_state)5, 0, 1);
  /* A mark planned against another incarnation is stale. */
  APPLY_REFUSED(&st, CAIRN_ESTALE, meta_cmd_set_node_state, 1, META_NODE_DEAD, 999, 1);
  /* ALIVE -> REMOVED skips the drain. */
  APPLY_REFUSED(&st, CAIRN_EINVAL, meta_cmd_set_node_state, 1, META_NODE_REMOVED, 0, 1);

  assert_int_equal(do_state(&st, 1, META_NODE_DEAD, 101, &res), 0);
  assert_int_equal(meta_node_find(&st, 1)->state, META_NODE_DEAD);
  assert_int_equal(meta_node_find(&st, 1)->state_since_ms, 1234);
  assert_int_equal(do_state(&st, 1, META_NODE_DEAD, 101, &res), 0); /* same state: no-op */
  assert_int_equal(do_state(&st, 1, META_NODE_ALIVE, 101, &res), 0);
  assert_int_equal(do_state(&st, 1, META_NODE_DRAINING, 0, &res), 0);
  APPLY_REFUSED(&st, CAIRN_EINVAL, meta_cmd_set_node_state, 1, META_NODE_DEAD, 0, 1);
  assert_int_equal(do_state(&st, 1, META_NODE_ALIVE, 0, &res), 0); /* drain cancelled */

  /* REMOVED needs the node empty. */
  assert_int_equal(do_create(&st, "t", 4, 4, &res), 0);
  assert_int_equal(do_state(&st, 2, META_NODE_DRAINING, 0, &res), 0);
  APPLY_REFUSED(&st, CAIRN_EINVALID_REPLICAS, meta_cmd_set_node_state, 2, META_NODE_REMOVED, 0, 1);
  assert_int_equal(do_state(&st, 3, META_NODE_DEAD, 0, &res), 0);
  APPLY_REFUSED(&st, CAIRN_EINVALID_REPLICAS, meta_cmd_set_node_state, 3, META_NODE_REMOVED, 0, 1);
  struct meta_node_info n5 = {5, 105, "a:1", "a:2", "", "", NULL, NULL, 0};
  assert_int_equal(APPLY(&st, &res, meta_cmd_register_node, &n5, 0), 0);
  assert_int_equal(do_state(&st, 5, META_NODE_DRAINING, 0, &res), 0);
  assert_int_equal(do_state(&st, 5, META_NODE_REMOVED, 0, &res), 0);
  /* REMOVED is final for SetNodeState. */
  APPLY_REFUSED(&st, CAIRN_EINVAL, meta_cmd_set_node_state, 5, META_NODE_ALIVE, 0, 1);
  APPLY_REFUSED(&st, CAIRN_EINVAL, meta_cmd_set_node_state, 5, META_NODE_DRAINING, 0, 1);
  meta_state_close(&st);
}

/* ---- topics ---- */

static void test_meta_create_topic_places_inside_apply(void **state)
{
  struct meta_state st;
  struct meta_result res;
  make_cluster(&st, 5);
  struct meta_topic_config cfg = {1000, 2000, 3000, 4000, 1};
  assert_int_equal(APPLY(&st, &res, meta_cmd_create_topic, "orders", 8, 3, &cfg), 0);
  assert_int_equal(res.topic_id, 1);
  assert_int_equal(do_create(&st, "events.v1_x-y", 1, 1, &res), 0);
  assert_int_equal(res.topic_id, 2);
  const struct meta_topic *t = meta_topic_find(&st, "orders");
  assert_non_null(t);
  assert_ptr_equal(meta_topic_find_id(&st, 1), t);
  assert_int_equal(t->npartitions, 8);
  assert_int_equal(t->replication_factor, 3);
  assert_int_equal(t->config.retention_bytes, 1000);
  assert_int_equal(t->config.max_batch_bytes, 4000);
  assert_int_equal(t->config.storage, STORE_KIND_POSTGRESQL);
  for (uint32_t p = 0; p < 8; p++) {
    const struct meta_partition *part = meta_partition_find(&st, 1, p);
    assert_ptr_equal(part, &t->partitions[p]);
    assert_int_equal(part->group_id, ((uint64_t)1 << 20) | p);
    assert_int_equal(part->nreplicas, 3);
    assert_int_equal(part->ninitial, 3);
    assert_memory_equal(part->replicas, part->initial_replicas, 3 * sizeof(uint64_t));
    assert_int_equal(part->leader_id, 0);
    assert_int_equal(part->replica_epoch, 0);
  }
  assert_null(meta_partition_find(&st, 1, 8));
  assert_null(meta_partition_find(&st, 3, 0));
  assert_int_equal(st.total_partitions, 9);
  check_invariants(&st);
  uint32_t tid, part;
  assert_true(meta_group_split(meta_group_id(1, 7), &tid, &part));
  assert_int_equal(tid, 1);
  assert_int_equal(part, 7);
  assert_false(meta_group_split(META_GROUP_ID, &tid, &part));
  meta_state_close(&st);
}

static void test_meta_add_partitions_grows_and_never_shrinks(void **state)
{
  (void)state;
  struct meta_state st;
  struct meta_result res;
  make_cluster(&st, 4);
  assert_int_equal(do_create(&st, "orders", 2, 3, &res), 0);
  assert_int_equal(do_create(&st, "other", 1, 1, &res), 0);
  struct meta_partition before[2];
  memcpy(before, meta_topic_find(&st, "orders")->partitions, sizeof before);
  assert_int_equal(APPLY(&st, &res, meta_cmd_add_partitions, "orders", 5), 0);
  assert_int_equal(res.topic_id, 1);
  const struct meta_topic *t = meta_topic_find(&st, "orders");
  assert_int_equal(t->npartitions, 5);
  assert_int_equal(st.total_partitions, 6);
  /* the old partitions are untouched; the new ones are placed like a new
   * topic's: rf distinct nodes, bootstrapped by their initial replicas */
  assert_memory_equal(t->partitions, before, sizeof before);
  for (uint32_t p = 2; p < 5; p++) {
    const struct meta_partition *part = meta_partition_find(&st, 1, p);
    assert_non_null(part);
    assert_int_equal(part->group_id, meta_group_id(1, p));
    assert_int_equal(part->nreplicas, 3);
    assert_memory_equal(part->replicas, part->initial_replicas, 3 * sizeof(uint64_t));
    assert_true(part->replicas[0] != part->replicas[1] && part->replicas[1] != part->replicas[2] &&
                part->replicas[0] != part->replicas[2]);
  }
  check_invariants(&st);
  /* a snapshot carries them */
  struct meta_state copy;
  copy_state(&st, &copy);
  assert_int_equal(meta_topic_find(&copy, "orders")->npartitions, 5);
  meta_state_close(&copy);

  APPLY_REFUSED(&st, CAIRN_EINVALID_PARTITIONS, meta_cmd_add_partitions, "orders", 5);
  APPLY_REFUSED(&st, CAIRN_EINVALID_PARTITIONS, meta_cmd_add_partitions, "orders", 3);
  APPLY_REFUSED(&st, CAIRN_EINVALID_PARTITIONS, meta_cmd_add_partitions, "orders",
                META_MAX_PARTITIONS + 1);
  APPLY_REFUSED(&st, CAIRN_EUNKNOWN_TOPIC, meta_cmd_add_partitions, "nosuch", 3);
  assert_int_equal(do_create(&st, "__internal", 1, 1, &res), 0);
  APPLY_REFUSED(&st, CAIRN_EINTERNAL_TOPIC, meta_cmd_add_partitions, "__internal", 3);
  /* too few alive nodes for the topic's replication factor */
  assert_int_equal(do_state(&st, 1, META_NODE_DEAD, 0, &res), 0);
  assert_int_equal(do_state(&st, 2, META_NODE_DEAD, 0, &res), 0);
  APPLY_REFUSED(&st, CAIRN_EINVALID_RF, meta_cmd_add_partitions, "orders", 6);
  meta_state_close(&st);
}

static void test_meta_create_topic_refusals_create_nothing(void **state)
{
  struct meta_state st;
  struct meta_result res;
  make_cluster(&st, 3);
  assert_int_equal(do_create(&st, "a", 1, 1, &res), 0);
  static const char *bad_names[] = {"", ".", "..", "has space", "slash/name", "tab\tname", "é"};
  for (size_t i = 0; i < sizeof bad_names / sizeof *bad_names; i++)
    APPLY_REFUSED(&st, CAIRN_EINVALID_TOPIC_NAME, meta_cmd_create_topic, bad_names[i], 1, 1, NULL);
  char name[META_TOPIC_NAME_MAX + 2];
  memset(name, 'n', sizeof name - 1);
  name[sizeof name - 1] = '\0';
  APPLY_REFUSED(&st, CAIRN_EINVALID_TOPIC_NAME, meta_cmd_create_topic, name, 1, 1, NULL);
  name[META_TOPIC_NAME_MAX] = '\0'; /* 249 characters: fine */
  assert_int_equal(do_create(&st, name, 1, 1, &res), 0);
  assert_true(meta_topic_name_valid("..."));

  APPLY_REFUSED(&st, CAIRN_ETOPIC_EXISTS, meta_cmd_create_topic, "a", 1, 1, NULL);
  APPLY_REFUSED(&st, CAIRN_EINVALID_PARTITIONS, meta_cmd_create_topic, "b", 0, 1, NULL);
  APPLY_REFUSED(&st, CAIRN_EINVALID_PARTITIONS, meta_cmd_create_topic, "b", META_MAX_PARTITIONS + 1,
                1, NULL);
  APPLY_REFUSED(&st, CAIRN_EINVALID_RF, meta_cmd_create_topic, "b", 1, 0, NULL);
  APPLY_REFUSED(&st, CAIRN_EINVALID_RF, meta_cmd_create_topic, "b", 1, 4, NULL);
  /* DEAD and DRAINING nodes do not count as places for replicas. */
  assert_int_equal(do_state(&st, 1, META_NODE_DEAD, 0, &res), 0);
  assert_int_equal(do_state(&st, 2, META_NODE_DRAINING, 0, &res), 0);
  APPLY_REFUSED(&st, CAIRN_EINVALID_RF, meta_cmd_create_topic, "b", 1, 2, NULL);
  assert_int_equal(do_create(&st, "b", 2, 1, &res), 0);
  assert_int_equal(res.topic_id, 3); /* the refusals consumed no id */
  assert_int_equal(meta_topic_find(&st, "b")->partitions[1].replicas[0], 3);
  meta_state_close(&st);
}

static void test_meta_cluster_limits_are_enforced(void **state)
{
  struct meta_state st;
  struct meta_result res;
  make_cluster(&st, 1);
  /* 200,000 partitions in all: 20 topics of the per-topic maximum. */
  for (int i = 0; i < (int)(META_MAX_TOTAL_PARTITIONS / META_MAX_PARTITIONS); i++) {
    char name[16];
    snprintf(name, sizeof name, "big%d", i);
    assert_int_equal(do_create(&st, name, META_MAX_PARTITIONS, 1, &res), 0);
  }
  assert_int_equal(st.total_partitions, META_MAX_TOTAL_PARTITIONS);
  APPLY_REFUSED(&st, CAIRN_EINVALID_PARTITIONS, meta_cmd_create_topic, "one-more", 1, 1, NULL);
  /* Deleting one makes room again. */
  assert_int_equal(APPLY(&st, &res, meta_cmd_delete_topic, "big3"), 0);
  assert_int_equal(do_create(&st, "one-more", 1, 1, &res), 0);
  check_invariants(&st);
  meta_state_close(&st);

  /* At most META_MAX_NODES nodes. */
  make_cluster(&st, (int)META_MAX_NODES);
  APPLY_REFUSED(&st, CAIRN_ETOOLARGE, meta_cmd_register_node,
                (&(struct meta_node_info){META_MAX_NODES + 1, 1, "a:1", "a:2", "", "", NULL, NULL, 0}), 0);
  /* Re-registering a known node is still fine. */
  assert_int_equal(do_register(&st, 5, 105, "r", 0, &res), 0);
  meta_state_close(&st);
}

static void test_meta_delete_topic_never_reuses_its_id(void **state)
{
  struct meta_state st;
  struct meta_result res;
  make_cluster(&st, 3);
  assert_int_equal(do_create(&st, "a", 2, 2, &res), 0);
  assert_int_equal(do_create(&st, "b", 3, 2, &res), 0);
  assert_int_equal(do_create(&st, "c", 1, 2, &res), 0);
  APPLY_REFUSED(&st, CAIRN_EUNKNOWN_TOPIC, meta_cmd_delete_topic, "zz");
  assert_int_equal(APPLY(&st, &res, meta_cmd_delete_topic, "b"), 0);
  assert_null(meta_topic_find(&st, "b"));
  assert_null(meta_topic_find_id(&st, 2));
  assert_non_null(meta_topic_find_id(&st, 3));
  assert_int_equal(st.total_partitions, 3);
  assert_int_equal(do_create(&st, "b", 1, 1, &res), 0);
  assert_int_equal(res.topic_id, 4);
  check_invariants(&st);
  meta_state_close(&st);
}

/* Users may not delete the cluster's own topics (__cairn_offsets holds the
 * groups' offsets); whatever request reaches the state machine. */
static void test_meta_delete_of_an_internal_topic_is_refused(void **state)
{
  struct meta_state st;
  struct meta_result res;
  make_cluster(&st, 3);
  assert_int_equal(do_create(&st, "__cairn_offsets", 2, 3, &res), 0);
  assert_int_equal(do_create(&st, "_one_underscore", 1, 1, &res), 0);
  APPLY_REFUSED(&st, CAIRN_EINTERNAL_TOPIC, meta_cmd_delete_topic, "__cairn_offsets");
  assert_non_null(meta_topic_find(&st, "__cairn_offsets"));
  assert_true(meta_topic_internal("__x"));
  assert_false(meta_topic_internal("_one_underscore"));
  assert_int_equal(APPLY(&st, &res, meta_cmd_delete_topic, "_one_underscore"), 0);
  check_invariants(&st);
  meta_state_close(&st);
}

static void test_meta_report_leader_keeps_the_newest_term(void **state)
{
  struct meta_state st;
  struct meta_result res;
  make_cluster(&st, 3);
  assert_int_equal(do_create(&st, "a", 2, 3, &res), 0);
  assert_int_equal(APPLY(&st, &res, meta_cmd_report_leader, 1, 1, 2, 5), 0);
  const struct meta_partition *p = meta_partition_find(&st, 1, 1);
  assert_int_equal(p->leader_id, 2);
  assert_int_equal(p->leader_term, 5);
  APPLY_REFUSED(&st, CAIRN_ESTALE, meta_cmd_report_leader, 1, 1, 3, 4);
  assert_int_equal(APPLY(&st, &res, meta_cmd_report_leader, 1, 1, 3, 5), 0);
  assert_int_equal(APPLY(&st, &res, meta_cmd_report_leader, 1, 1, 1, 9), 0);
  assert_int_equal(meta_partition_find(&st, 1, 1)->leader_id, 1);
  APPLY_REFUSED(&st, CAIRN_EUNKNOWN_TOPIC, meta_cmd_report_leader, 1, 2, 1, 9);
  APPLY_REFUSED(&st, CAIRN_EUNKNOWN_TOPIC, meta_cmd_report_leader, 2, 0, 1, 9);
  APPLY_REFUSED(&st, CAIRN_EINVAL, meta_cmd_report_leader, 1, 0, 0, 9);
  meta_state_close(&st);
}

static void test_meta_set_replicas_one_change_at_a_time(void **state)
{
  struct meta_state st;
  struct meta_result res;
  make_cluster(&st, 5);
  assert_int_equal(do_create(&st, "a", 1, 3, &res), 0);
  const struct meta_partition *p = meta_partition_find(&st, 1, 0);
  uint64_t cur[3];
  memcpy(cur, p->replicas, sizeof cur);
  uint64_t others[2];
  int k = 0;
  for (uint64_t id = 1; id <= 5; id++)
    if (!meta_replicas_contain(cur, 3, id))
      others[k++] = id;

  APPLY_REFUSED(&st, CAIRN_EUNKNOWN_TOPIC, meta_cmd_set_replicas, 1, 1, cur, 3, 0);
  /* Two additions at once. */
  uint64_t two[5] = {cur[0], cur[1], cur[2], others[0], others[1]};
  APPLY_REFUSED(&st, CAIRN_EINVALID_REPLICAS, meta_cmd_set_replicas, 1, 0, two, 5, 0);
  /* A swap is an addition and a removal. */
  uint64_t swap[3] = {cur[0], cur[1], others[0]};
  APPLY_REFUSED(&st, CAIRN_EINVALID_REPLICAS, meta_cmd_set_replicas, 1, 0, swap, 3, 0);
  uint64_t dup[4] = {cur[0], cur[1], cur[2], cur[1]};
  APPLY_REFUSED(&st, CAIRN_EINVALID_REPLICAS, meta_cmd_set_replicas, 1, 0, dup, 4, 0);
  uint64_t zero[4] = {cur[0], cur[1], cur[2], 0};
  APPLY_REFUSED(&st, CAIRN_EINVALID_REPLICAS, meta_cmd_set_replicas, 1, 0, zero, 4, 0);
  APPLY_REFUSED(&st, CAIRN_EINVALID_REPLICAS, meta_cmd_set_replicas, 1, 0, cur, 0, 0);
  uint64_t unknown[4] = {cur[0], cur[1], cur[2], 42};
  APPLY_REFUSED(&st, CAIRN_EUNKNOWN_NODE, meta_cmd_set_replicas, 1, 0, unknown, 4, 0);
  /* Only ALIVE nodes may be added. */
  assert_int_equal(do_state(&st, others[1], META_NODE_DRAINING, 0, &res), 0);
  uint64_t to_draining[4] = {cur[0], cur[1], cur[2], others[1]};
  APPLY_REFUSED(&st, CAIRN_EINVALID_REPLICAS, meta_cmd_set_replicas, 1, 0, to_draining, 4, 0);

  uint64_t add[4] = {cur[0], cur[1], cur[2], others[0]};
  APPLY_REFUSED(&st, CAIRN_ESTALE, meta_cmd_set_replicas, 1, 0, add, 4, 7);
  assert_int_equal(do_set_replicas(&st, 1, 0, add, 4, 0, &res), 0);
  p = meta_partition_find(&st, 1, 0);
  assert_int_equal(p->nreplicas, 4);
  assert_int_equal(p->replica_epoch, 1);
  assert_int_equal(p->replicas[3], others[0]);
  assert_memory_equal(p->initial_replicas, cur, sizeof cur); /* never changes */
  /* The same plan proposed twice: the second is stale. */
  APPLY_REFUSED(&st, CAIRN_ESTALE, meta_cmd_set_replicas, 1, 0, add, 4, 0);
  /* Remove the preferred leader; the next one takes its place. */
  uint64_t rm[3] = {cur[1], cur[2], others[0]};
  assert_int_equal(do_set_replicas(&st, 1, 0, rm, 3, 1, &res), 0);
  /* A pure reorder (preferred leader change) is allowed. */
  uint64_t reorder[3] = {others[0], cur[1], cur[2]};
  assert_int_equal(do_set_replicas(&st, 1, 0, reorder, 3, 2, &res), 0);
  p = meta_partition_find(&st, 1, 0);
  assert_int_equal(p->replicas[0], others[0]);
  assert_int_equal(p->replica_epoch, 3);

  /* Assignments follow the target list; only initial replicas bootstrap. */
  struct meta_assignment *as;
  size_t n;
  assert_int_equal(meta_node_assignments(&st, others[0], &as, &n), 0);
  assert_int_equal(n, 1);
  assert_int_equal(as[0].topic_id, 1);
  assert_int_equal(as[0].group_id, meta_group_id(1, 0));
  assert_false(as[0].bootstraps);
  free(as);
  assert_int_equal(meta_node_assignments(&st, cur[1], &as, &n), 0);
  assert_int_equal(n, 1);
  assert_true(as[0].bootstraps);
  free(as);
  assert_int_equal(meta_node_assignments(&st, cur[0], &as, &n), 0);
  assert_int_equal(n, 0);
  assert_null(as);
  /* An initial replica removed and added back starts empty: it must not
   * bootstrap the group again. */
  uint64_t back[4] = {others[0], cur[1], cur[2], cur[0]};
  assert_int_equal(do_set_replicas(&st, 1, 0, back, 4, 3, &res), 0);
  assert_int_equal(meta_node_assignments(&st, cur[0], &as, &n), 0);
  assert_int_equal(n, 1);
  assert_false(as[0].bootstraps);
  free(as);
  p = meta_partition_find(&st, 1, 0);
  assert_false(meta_partition_bootstraps(p, cur[0]));
  assert_true(meta_partition_bootstraps(p, cur[1]));
  assert_false(meta_partition_bootstraps(p, others[0]));
  assert_int_equal(p->initial_gone, 1u << 0);
  /* It survives a snapshot. */
  struct meta_state copy;
  copy_state(&st, &copy);
  assert_int_equal(meta_partition_find(&copy, 1, 0)->initial_gone, 1u << 0);
  meta_state_close(&copy);
  meta_state_close(&st);
}

/* ---- producer ids ---- */

static int do_alloc(struct meta_state *st, uint64_t id, struct meta_result *res)
{
  return APPLY(st, res, meta_cmd_allocate_producer_id, id);
}

static void test_meta_producer_ids_are_unique_and_epochs_bump(void **state)
{
  struct meta_state st;
  struct meta_result res;
  make_cluster(&st, 1);
  /* New ids count up from 1, each at epoch 0. */
  for (uint64_t want = 1; want <= 3; want++) {
    assert_int_equal(do_alloc(&st, 0, &res), 0);
    assert_int_equal(res.producer_id, want);
    assert_int_equal(res.producer_epoch, 0);
  }
  /* A bump keeps the id and raises its epoch. */
  assert_int_equal(do_alloc(&st, 2, &res), 0);
  assert_int_equal(res.producer_id, 2);
  assert_int_equal(res.producer_epoch, 1);
  assert_int_equal(do_alloc(&st, 2, &res), 0);
  assert_int_equal(res.producer_epoch, 2);
  assert_int_equal(meta_producer_epoch(&st, 2), 2);
  assert_int_equal(meta_producer_epoch(&st, 1), 0);
  /* An id never handed out is refused and changes nothing. */
  APPLY_REFUSED(&st, CAIRN_EUNKNOWN_PRODUCER, meta_cmd_allocate_producer_id, 4);
  /* It all survives a snapshot, and the counter goes on from there. */
  struct meta_state copy;
  copy_state(&st, &copy);
  assert_same_state(&st, &copy);
  assert_int_equal(meta_producer_epoch(&copy, 2), 2);
  assert_int_equal(do_alloc(&copy, 0, &res), 0);
  assert_int_equal(res.producer_id, 4);
  /* An exhausted epoch hands out a new id instead. */
  copy.producers[0].epoch = META_MAX_PRODUCER_EPOCH;
  assert_int_equal(do_alloc(&copy, 2, &res), 0);
  assert_int_equal(res.producer_id, 5);
  assert_int_equal(res.producer_epoch, 0);
  assert_int_equal(meta_producer_epoch(&copy, 2), META_MAX_PRODUCER_EPOCH);
  char why[200];
  assert_int_equal(meta_state_check(&copy, why, sizeof why), 0);
  /* A bumped id above the counter is a broken invariant. */
  copy.producers[0].id = copy.producer_ids + 1;
  assert_int_equal(meta_state_check(&copy, why, sizeof why), CAIRN_ECORRUPT);
  meta_state_close(&copy);
  meta_state_close(&st);
}

/* ---- malformed input, raft index ---- */

static void test_meta_malformed_commands_are_refused(void **state)
{
  struct meta_state st, before;
  struct meta_result res;
  make_cluster(&st, 3);
  assert_int_equal(do_create(&st, "a", 4, 3, &res), 0);
  copy_state(&st, &before);

  /* An empty command has no case set: unknown. */
  assert_int_equal(meta_apply(&st, (const uint8_t *)"", 0, 0, &res), CAIRN_EUNSUPPORTED);
  /* A field number this version does not know (a newer command). */
  uint8_t newer[] = {0x4a, 0x00}; /* field 9, length 0 */
  assert_int_equal(meta_apply(&st, newer, sizeof newer, 0, &res), CAIRN_EUNSUPPORTED);
  uint8_t garbage[] = {0xff, 0xff, 0xff, 0xff};
  assert_int_equal(meta_apply(&st, garbage, sizeof garbage, 0, &res), CAIRN_ECORRUPT);

  /* Every prefix of a valid command: refused or applied, never a crash. */
  uint8_t *cmd;
  size_t len;
  assert_int_equal(
      meta_cmd_create_topic("b", 2, 2, &(struct meta_topic_config){1, 2, 3, 4, 0}, &cmd, &len), 0);
  for (size_t cut = 1; cut < len; cut++) {
    int rc = meta_apply(&st, cmd, cut, 0, &res);
    assert_true(rc != 0); /* every proper prefix is malformed or an incomplete command */
  }
  free(cmd);

  /* Random bytes. */
  uint64_t seed = tu_seed("test_meta_malformed_commands_are_refused");
  uint64_t rnd = seed | 1;
  for (int i = 0; i < 20000; i++) {
    uint8_t buf[64];
    size_t n = tu_rand(&rnd) % sizeof buf;
    for (size_t j = 0; j < n; j++)
      buf[j] = (uint8_t)tu_rand(&rnd);
    int rc = meta_apply(&st, buf, n, 0, &res);
    assert_int_equal(rc, res.code);
    check_invariants(&st);
  }
  meta_state_close(&before);
  meta_state_close(&st);
}

static void test_meta_apply_refuses_an_index_going_backwards(void **state)
{
  struct meta_state st;
  struct meta_result res;
  meta_state_init(&st);
  uint8_t *cmd;
  size_t len;
  assert_int_equal(meta_cmd_bootstrap("c", (uint64_t[]){1}, 1, &cmd, &len), 0);
  assert_int_equal(meta_apply(&st, cmd, len, 5, &res), 0);
  assert_int_equal(st.last_index, 5);
  assert_int_equal(meta_apply(&st, cmd, len, 5, &res), CAIRN_EINDEX);
  assert_int_equal(meta_apply(&st, cmd, len, 4, &res), CAIRN_EINDEX);
  /* A refused command still consumes its index. */
  assert_int_equal(meta_apply(&st, (const uint8_t *)"\xff", 1, 6, &res), CAIRN_ECORRUPT);
  assert_int_equal(st.last_index, 6);
  free(cmd);
  meta_state_close(&st);
}

/* A postgresql topic needs nodes with a database: rf above their number is
 * refused with that number, and its replicas (also added partitions) go
 * only to them; a file topic still uses every node. A restart without a
 * database (new incarnation) takes the capability away. */
static void test_meta_postgresql_topic_only_on_nodes_with_a_database(void **state)
{
  struct meta_state st;
  struct meta_result res;
  make_cluster(&st, 0);
  for (uint64_t id = 1; id <= 4; id++)
    assert_int_equal(do_register_caps(&st, id, 100 + id, "", true,
                                      id % 2 == 0 ? META_NODE_CAP_POSTGRESQL : 0, 0, &res),
                     0);
  assert_int_equal(meta_capable_count(&st, META_NODE_CAP_POSTGRESQL), 2);
  assert_int_equal(meta_capable_count(&st, 0), 4);
  struct meta_topic_config pg = {0, 0, 0, 0, STORE_KIND_POSTGRESQL};
  APPLY_REFUSED(&st, CAIRN_EINVALID_RF, meta_cmd_create_topic, "pg", 2, 3, &pg);
  assert_int_equal(APPLY(&st, &res, meta_cmd_create_topic, "pg", 2, 3, &pg), CAIRN_EINVALID_RF);
  assert_non_null(strstr(res.msg, "only 2 alive nodes have a PostgreSQL database"));
  assert_int_equal(APPLY(&st, &res, meta_cmd_create_topic, "pg", 6, 2, &pg), 0);
  assert_int_equal(APPLY(&st, &res, meta_cmd_add_partitions, "pg", 9), 0);
  const struct meta_topic *t = meta_topic_find(&st, "pg");
  for (uint32_t p = 0; p < t->npartitions; p++)
    for (uint32_t r = 0; r < t->partitions[p].nreplicas; r++)
      assert_true(t->partitions[p].replicas[r] % 2 == 0);
  assert_int_equal(do_create(&st, "file", 1, 4, &res), 0);
  /* Node 2 restarts without a database: one capable node is left. */
  assert_int_equal(do_register_caps(&st, 2, 999, "", true, 0, 102, &res), 0);
  assert_int_equal(meta_node_find(&st, 2)->caps, 0);
  assert_int_equal(APPLY(&st, &res, meta_cmd_create_topic, "pg2", 1, 2, &pg), CAIRN_EINVALID_RF);
  assert_non_null(strstr(res.msg, "only 1 alive node has a PostgreSQL database"));
  /* Bits this version does not know are dropped. */
  assert_int_equal(do_register_caps(&st, 3, 103, "", true, 0x80000000u | 1u, 0, &res), 0);
  assert_int_equal(meta_node_find(&st, 3)->caps, META_NODE_CAP_POSTGRESQL);
  check_invariants(&st);
  meta_state_close(&st);
}

/* ---- snapshots ---- */

static void build_rich_state(struct meta_state *st)
{
  struct meta_result res;
  make_cluster(st, 0);
  for (uint64_t id = 1; id <= 6; id++)
    assert_int_equal(do_register(st, id, 1000 + id, id % 2 ? "rack-a" : "rack-b", 0, &res), 0);
  struct meta_topic_config cfg = {1u << 30, 86400000, 1u << 26, 1u << 20, 1};
  assert_int_equal(APPLY(st, &res, meta_cmd_create_topic, "orders", 12, 3, &cfg), 0);
  assert_int_equal(do_create(st, "logs", 3, 2, &res), 0);
  assert_int_equal(do_create(st, "gone", 3, 2, &res), 0);
  assert_int_equal(APPLY(st, &res, meta_cmd_delete_topic, "gone"), 0);
  assert_int_equal(APPLY(st, &res, meta_cmd_report_leader, 1, 3, 2, 7), 0);
  assert_int_equal(do_state(st, 6, META_NODE_DRAINING, 0, &res), 0);
  const struct meta_partition *p = meta_partition_find(st, 2, 0);
  uint64_t next[3] = {p->replicas[0], p->replicas[1], 0};
  for (uint64_t id = 1; id <= 5; id++)
    if (!meta_replicas_contain(p->replicas, 2, id))
      next[2] = id;
  assert_int_equal(do_set_replicas(st, 2, 0, next, 3, 0, &res), 0);
}

static void test_meta_snapshot_round_trip_is_exact(void **state)
{
  struct meta_state st, back;
  build_rich_state(&st);
  size_t len;
  uint8_t *buf = snap(&st, &len);
  assert_int_equal(le_get32(buf), META_SNAPSHOT_MAGIC);
  assert_memory_equal(buf, "META", 4);
  assert_int_equal(le_get32(buf + 4), META_SNAPSHOT_VERSION);
  assert_int_equal(le_get32(buf + 8), len - META_SNAPSHOT_HEADER_BYTES);
  meta_state_init(&back);
  assert_int_equal(meta_snapshot_decode(&back, buf, len), 0);
  assert_same_state(&st, &back);
  check_invariants(&back);
  /* Field by field, not only bytes. */
  assert_string_equal(back.cluster_id, st.cluster_id);
  assert_int_equal(back.next_topic_id, 4);
  assert_int_equal(back.nnodes, 6);
  assert_int_equal(back.nodes[5].state, META_NODE_DRAINING);
  assert_string_equal(back.nodes[0].rack, "rack-a");
  assert_int_equal(back.nodes[0].incarnation, 1001);
  assert_int_equal(back.nodes[0].caps, META_NODE_CAP_POSTGRESQL);
  assert_int_equal(back.ntopics, 2);
  const struct meta_topic *t = meta_topic_find(&back, "orders");
  assert_int_equal(t->config.retention_ms, 86400000);
  assert_int_equal(t->partitions[3].leader_id, 2);
  assert_int_equal(t->partitions[3].leader_term, 7);
  const struct meta_partition *p = meta_partition_find(&back, 2, 0);
  assert_int_equal(p->nreplicas, 3);
  assert_int_equal(p->ninitial, 2);
  assert_int_equal(p->replica_epoch, 1);
  /* The decoded state goes on applying like the original. */
  struct meta_result r1, r2;
  assert_int_equal(do_create(&st, "more", 5, 3, &r1), 0);
  assert_int_equal(do_create(&back, "more", 5, 3, &r2), 0);
  assert_same_state(&st, &back);
  /* Decoding over a non-empty state replaces it. */
  assert_int_equal(meta_snapshot_decode(&back, buf, len), 0);
  assert_null(meta_topic_find(&back, "more"));
  free(buf);
  /* An empty state round-trips too. */
  struct meta_state empty, empty2;
  meta_state_init(&empty);
  copy_state(&empty, &empty2);
  assert_same_state(&empty, &empty2);
  meta_state_close(&empty);
  meta_state_close(&empty2);
  meta_state_close(&back);
  meta_state_close(&st);
}

static void test_meta_snapshot_damage_is_refused_and_changes_nothing(void **state)
{
  struct meta_state st, target;
  build_rich_state(&st);
  make_cluster(&target, 2);
  struct meta_state target_before;
  copy_state(&target, &target_before);
  size_t len;
  uint8_t *buf = snap(&st, &len);

  assert_int_equal(meta_snapshot_decode(&target, buf, 10), CAIRN_ETRUNCATED);
  assert_int_equal(meta_snapshot_decode(&target, buf, len - 1), CAIRN_ETRUNCATED);
  uint8_t *longer = calloc(len + 1, 1);
  memcpy(longer, buf, len);
  assert_int_equal(meta_snapshot_decode(&target, longer, len + 1), CAIRN_ECORRUPT);
  free(longer);
  for (size_t pos = 0; pos < len; pos += (pos < 32 ? 1 : 7)) {
    buf[pos] ^= 0x20;
    int rc = meta_snapshot_decode(&target, buf, len);
    buf[pos] ^= 0x20;
    if (pos < 8)
      assert_int_equal(rc, CAIRN_EBADMAGIC);
    else if (pos < 12)
      assert_true(rc == CAIRN_ETRUNCATED || rc == CAIRN_ECORRUPT || rc == CAIRN_ETOOLARGE);
    else
      assert_int_equal(rc, CAIRN_EBADCRC);
  }
  assert_same_state(&target, &target_before);
  free(buf);
  meta_state_close(&target_before);
  meta_state_close(&target);
  meta_state_close(&st);
}

/* Re-packs a (mutated) snapshot message with a valid header and CRC, so
 * only the invariant checks can refuse it. */
static uint8_t *wrap_snapshot(const Cairn__Meta__MetaSnapshot *m, size_t *len)
{
  size_t n = cairn__meta__meta_snapshot__get_packed_size(m);
  uint8_t *buf = malloc(16 + n);
  assert_non_null(buf);
  cairn__meta__meta_snapshot__pack(m, buf + 16);
  le_put32(buf, META_SNAPSHOT_MAGIC);
  le_put32(buf + 4, META_SNAPSHOT_VERSION);
  le_put32(buf + 8, (uint32_t)n);
  le_put32(buf + 12, crc32c(buf + 16, n));
  *len = 16 + n;
  return buf;
}

enum snap_damage {
  DAMAGE_NONE,
  DAMAGE_UNBOOTED_WITH_NODES,
  DAMAGE_NODES_OUT_OF_ORDER,
  DAMAGE_NODE_STATE,
  DAMAGE_NODE_ID_ZERO,
  DAMAGE_DUPLICATE_TOPIC_NAME,
  DAMAGE_TOPIC_ID_NOT_BELOW_NEXT,
  DAMAGE_TOPIC_NAME_INVALID,
  DAMAGE_NO_REPLICAS,
  DAMAGE_DUPLICATE_REPLICA,
  DAMAGE_RF_ZERO,
  DAMAGE_INITIAL_GONE_MASK,
  DAMAGE_INCARNATION_ZERO,
  DAMAGE_VOTER_ZERO,
  DAMAGE_COUNT
};

static void test_meta_snapshot_decode_checks_every_invariant(void **state)
{
  struct meta_state st;
  build_rich_state(&st);
  size_t len;
  uint8_t *good = snap(&st, &len);
  for (int d = DAMAGE_NONE; d < DAMAGE_COUNT; d++) {
    Cairn__Meta__MetaSnapshot *m = cairn__meta__meta_snapshot__unpack(NULL, len - 16, good + 16);
    assert_non_null(m);
    /* Mutations keep the message's own allocations (strings are overwritten
     * in place, counts restored) so free_unpacked frees exactly what unpack
     * allocated. */
    size_t n_voters = m->n_voters, n_topics = m->n_topics;
    size_t n_reps = m->topics[0]->partitions[2]->n_replicas;
    switch (d) {
    case DAMAGE_UNBOOTED_WITH_NODES:
      m->cluster_id[0] = '\0';
      m->n_voters = 0;
      m->next_topic_id = 0;
      m->n_topics = 0;
      break;
    case DAMAGE_NODES_OUT_OF_ORDER:
      m->nodes[0]->id = m->nodes[1]->id;
      break;
    case DAMAGE_NODE_STATE:
      m->nodes[2]->state = (Cairn__Meta__NodeState)9;
      break;
    case DAMAGE_NODE_ID_ZERO:
      m->nodes[0]->id = 0;
      break;
    case DAMAGE_DUPLICATE_TOPIC_NAME:
      strcpy(m->topics[0]->name, "logs"); /* "orders" becomes the other one's name */
      break;
    case DAMAGE_TOPIC_ID_NOT_BELOW_NEXT:
      m->topics[1]->id = m->next_topic_id;
      break;
    case DAMAGE_TOPIC_NAME_INVALID:
      m->topics[0]->name[1] = '/';
      break;
    case DAMAGE_NO_REPLICAS:
      m->topics[0]->partitions[2]->n_replicas = 0;
      break;
    case DAMAGE_DUPLICATE_REPLICA:
      m->topics[0]->partitions[1]->replicas[1] = m->topics[0]->partitions[1]->replicas[0];
      break;
    case DAMAGE_RF_ZERO:
      m->topics[0]->replication_factor = 0;
      break;
    case DAMAGE_INCARNATION_ZERO:
      m->nodes[1]->incarnation = 0;
      break;
    case DAMAGE_VOTER_ZERO:
      m->voters[0] = 0;
      break;
    case DAMAGE_INITIAL_GONE_MASK:
      m->topics[0]->partitions[0]->initial_gone =
          1u << m->topics[0]->partitions[0]->n_initial_replicas;
      break;
    default:
      break;
    }
    size_t wlen;
    uint8_t *w = wrap_snapshot(m, &wlen);
    m->n_voters = n_voters;
    m->n_topics = n_topics;
    m->topics[0]->partitions[2]->n_replicas = n_reps;
    cairn__meta__meta_snapshot__free_unpacked(m, NULL);
    struct meta_state target;
    meta_state_init(&target);
    int rc = meta_snapshot_decode(&target, w, wlen);
    if (d == DAMAGE_NONE) {
      assert_int_equal(rc, 0);
      assert_same_state(&target, &st);
    } else if (rc != CAIRN_ECORRUPT) {
      fail_msg("damage %d: got %s, want CAIRN_ECORRUPT", d, cairn_errname(rc));
    } else {
      assert_int_equal(target.nnodes, 0); /* untouched */
    }
    free(w);
    meta_state_close(&target);
  }
  free(good);
  meta_state_close(&st);
}

static void test_meta_cmd_describe_names_each_command(void **state)
{
  char buf[160];
  uint8_t *cmd;
  size_t len;
  assert_int_equal(meta_cmd_create_topic("orders", 8, 3, NULL, &cmd, &len), 0);
  assert_string_equal(meta_cmd_describe(cmd, len, buf, sizeof buf),
                      "CreateTopic orders partitions=8 rf=3");
  free(cmd);
  uint64_t r[3] = {4, 5, 6};
  assert_int_equal(meta_cmd_set_replicas(2, 1, r, 3, 7, &cmd, &len), 0);
  assert_string_equal(meta_cmd_describe(cmd, len, buf, sizeof buf),
                      "SetReplicas 2/1 epoch=7 replicas=4,5,6");
  /* A short buffer truncates, never overflows. */
  char tiny[8];
  assert_int_equal(strlen(meta_cmd_describe(cmd, len, tiny, sizeof tiny)), 7);
  free(cmd);
  assert_int_equal(meta_cmd_set_node_state(3, META_NODE_DRAINING, 0, 0, &cmd, &len), 0);
  assert_string_equal(meta_cmd_describe(cmd, len, buf, sizeof buf), "SetNodeState 3 DRAINING");
  free(cmd);
  assert_int_equal(meta_cmd_bootstrap("c", (uint64_t[]){1, 2}, 2, &cmd, &len), 0);
  assert_string_equal(meta_cmd_describe(cmd, len, buf, sizeof buf),
                      "Bootstrap cluster=c voters=1,2");
  free(cmd);
  assert_int_equal(meta_cmd_allocate_producer_id(0, &cmd, &len), 0);
  assert_string_equal(meta_cmd_describe(cmd, len, buf, sizeof buf), "AllocateProducerId new");
  free(cmd);
  assert_int_equal(meta_cmd_allocate_producer_id(12, &cmd, &len), 0);
  assert_string_equal(meta_cmd_describe(cmd, len, buf, sizeof buf), "AllocateProducerId bump 12");
  free(cmd);
  assert_string_equal(meta_cmd_describe((const uint8_t *)"\xff\xff", 2, buf, sizeof buf),
                      "malformed command (2 bytes)");
  assert_string_equal(meta_cmd_describe((const uint8_t *)"", 0, buf, sizeof buf),
                      "unknown command (case 0)");
}

/* ---- replicas agree ---- */

/* One random command, valid or not, over a small id space so that many hit. */
static void random_command(uint64_t *rnd, const struct meta_state *st, uint8_t **cmd, size_t *len)
{
  int rc = 0;
  uint64_t node = 1 + tu_rand(rnd) % 8;
  static const char *names[] = {"a", "b", "c", "d", "e", "bad name"};
  const char *name = names[tu_rand(rnd) % 6];
  switch (tu_rand(rnd) % 9) {
  case 0: {
    static const char *racks[] = {"", "r1", "r2", "r3"};
    struct meta_node_info info = {node, 1 + tu_rand(rnd) % 3, "c:1", "c:2", "", racks[node % 4], NULL, NULL, 0};
    rc = meta_cmd_register_node(&info, tu_rand(rnd) % 4, cmd, len);
    break;
  }
  case 1:
    rc = meta_cmd_set_node_state(node, (enum meta_node_state)(1 + tu_rand(rnd) % 4),
                                 tu_rand(rnd) % 2 ? 0 : 1 + tu_rand(rnd) % 3, tu_rand(rnd), cmd,
                                 len);
    break;
  case 2:
  case 3:
    rc = meta_cmd_create_topic(name, 1 + (uint32_t)(tu_rand(rnd) % 6), (uint32_t)(tu_rand(rnd) % 5),
                               NULL, cmd, len);
    break;
  case 4:
    rc = meta_cmd_delete_topic(name, cmd, len);
    break;
  case 5:
    rc = meta_cmd_report_leader(1 + (uint32_t)(tu_rand(rnd) % (st->next_topic_id + 1)),
                                (uint32_t)(tu_rand(rnd) % 6), node, tu_rand(rnd) % 10, cmd, len);
    break;
  case 6:
    /* A new id, a bump of a handed-out one, or an unknown one. */
    rc = meta_cmd_allocate_producer_id(tu_rand(rnd) % (st->producer_ids + 2), cmd, len);
    break;
  default: {
    /* A replica change derived from the current state: add, remove or
     * reorder, sometimes with a wrong epoch. */
    if (st->ntopics == 0) {
      rc = meta_cmd_delete_topic("none", cmd, len);
      break;
    }
    const struct meta_topic *t = &st->topics[tu_rand(rnd) % st->ntopics];
    uint32_t pi = (uint32_t)(tu_rand(rnd) % t->npartitions);
    const struct meta_partition *p = &t->partitions[pi];
    uint64_t next[META_MAX_REPLICAS + 1];
    uint32_t n = p->nreplicas;
    memcpy(next, p->replicas, n * sizeof *next);
    uint64_t what = tu_rand(rnd) % 3;
    if (what == 0 && n < META_MAX_REPLICAS)
      next[n++] = node;
    else if (what == 1 && n > 1) {
      uint32_t victim = (uint32_t)(tu_rand(rnd) % n);
      next[victim] = next[n - 1];
      n--;
    } else if (n > 1) {
      uint64_t tmp = next[0];
      next[0] = next[n - 1];
      next[n - 1] = tmp;
    }
    uint64_t epoch = p->replica_epoch + (tu_rand(rnd) % 5 == 0 ? 1 : 0);
    rc = meta_cmd_set_replicas(t->id, pi, next, n, epoch, cmd, len);
    break;
  }
  }
  assert_int_equal(rc, 0);
}

static void test_meta_random_sequences_give_identical_snapshots(void **state)
{
  uint64_t seed = tu_seed("test_meta_random_sequences_give_identical_snapshots");
  uint64_t rnd = seed | 1;
  for (int run = 0; run < 20; run++) {
    struct meta_state a, b;
    make_cluster(&a, 0);
    make_cluster(&b, 0);
    int ok = 0;
    for (int i = 0; i < 400; i++) {
      uint8_t *cmd;
      size_t len;
      random_command(&rnd, &a, &cmd, &len);
      struct meta_result ra, rb;
      int rca = meta_apply(&a, cmd, len, 0, &ra);
      int rcb = meta_apply(&b, cmd, len, 0, &rb);
      free(cmd);
      assert_int_equal(rca, rcb);
      assert_string_equal(ra.msg, rb.msg);
      ok += rca == 0;
      check_invariants(&a);
      /* Now and then b restarts from a snapshot of itself. */
      if (tu_rand(&rnd) % 50 == 0) {
        struct meta_state c;
        copy_state(&b, &c);
        meta_state_close(&b);
        b = c;
      }
    }
    assert_true(ok > 50); /* the sequence did real work */
    assert_same_state(&a, &b);
    meta_state_close(&a);
    meta_state_close(&b);
  }
}

/* ---- golden files: the snapshot format and one command's bytes ---- */

#define GOLDEN_NAME "meta_snapshot_v1.bin"

/* A small fixed state: two nodes on two racks, one topic of two partitions
 * with a config, a reported leader and one replica change. */
static void golden_state(struct meta_state *st)
{
  struct meta_result res;
  meta_state_init(st);
  uint64_t voters[] = {1};
  assert_int_equal(APPLY(st, &res, meta_cmd_bootstrap, "golden-cluster", voters, 1), 0);
  /* Registered as before the Kafka port: the golden bytes are v1's. */
  assert_int_equal(do_register_kafka(st, 1, 0x1111, "ra", false, 0, &res), 0);
  assert_int_equal(do_register_kafka(st, 2, 0x2222, "rb", false, 0, &res), 0);
  assert_int_equal(do_register_kafka(st, 3, 0x3333, "ra", false, 0, &res), 0);
  struct meta_topic_config cfg = {1000000, 3600000, 0, 65536, 0};
  assert_int_equal(APPLY(st, &res, meta_cmd_create_topic, "golden", 2, 2, &cfg), 0);
  assert_int_equal(APPLY(st, &res, meta_cmd_report_leader, 1, 0, 1, 3), 0);
  const struct meta_partition *p = meta_partition_find(st, 1, 1);
  uint64_t next[3] = {p->replicas[0], p->replicas[1], 6 - p->replicas[0] - p->replicas[1]};
  assert_int_equal(do_set_replicas(st, 1, 1, next, 3, 0, &res), 0);
  assert_int_equal(do_state(st, 2, META_NODE_DRAINING, 0, &res), 0);
  st->last_index = 9;
}

static void golden_path(char *buf, size_t n)
{
  const char *dir = getenv("CAIRN_GOLDEN_DIR");
  snprintf(buf, n, "%s/%s", dir != NULL && dir[0] != '\0' ? dir : "tests/golden", GOLDEN_NAME);
}

/* Reads the whole golden file. Returns owned (free with free()). */
static uint8_t *golden_read(size_t *len)
{
  char path[PATH_MAX];
  golden_path(path, sizeof path);
  FILE *f = fopen(path, "rb");
  if (f == NULL)
    fail_msg("cannot open golden file %s (set CAIRN_GOLDEN_DIR, or run from the repo root; "
             "CAIRN_GOLDEN_WRITE=1 regenerates it)",
             path);
  uint8_t *buf = malloc(4096);
  assert_non_null(buf);
  *len = fread(buf, 1, 4096, f);
  assert_int_equal(ferror(f), 0);
  assert_true(feof(f));
  fclose(f);
  return buf;
}

/* With CAIRN_GOLDEN_WRITE=1, rewrites the golden file. Only for a deliberate
 * format change, which also needs a new META_SNAPSHOT_VERSION. */
static int golden_setup(void **state)
{
  const char *w = getenv("CAIRN_GOLDEN_WRITE");
  if (w == NULL || strcmp(w, "1") != 0)
    return 0;
  struct meta_state st;
  golden_state(&st);
  size_t len;
  uint8_t *buf = snap(&st, &len);
  meta_state_close(&st);
  char path[PATH_MAX];
  golden_path(path, sizeof path);
  FILE *f = fopen(path, "wb");
  int ok = f != NULL && fwrite(buf, 1, len, f) == len;
  if (f != NULL && fclose(f) != 0)
    ok = 0;
  free(buf);
  fprintf(stderr, "%s %s\n", ok ? "wrote" : "FAILED to write", path);
  return ok ? 0 : -1;
}

static void test_meta_snapshot_matches_golden_file(void **state)
{
  struct meta_state st;
  golden_state(&st);
  size_t len, glen;
  uint8_t *buf = snap(&st, &len);
  uint8_t *g = golden_read(&glen);
  assert_int_equal(len, glen);
  assert_memory_equal(buf, g, len);
  free(buf);
  meta_state_close(&st);

  /* The golden bytes decode to known fields. */
  assert_memory_equal(g, "META", 4);
  assert_int_equal(le_get32(g + 4), 1);
  assert_int_equal(le_get32(g + 8), glen - 16);
  meta_state_init(&st);
  assert_int_equal(meta_snapshot_decode(&st, g, glen), 0);
  assert_string_equal(st.cluster_id, "golden-cluster");
  assert_int_equal(st.last_index, 9);
  assert_int_equal(st.next_topic_id, 2);
  assert_int_equal(st.nnodes, 3);
  assert_int_equal(st.nodes[1].incarnation, 0x2222);
  assert_int_equal(st.nodes[1].state, META_NODE_DRAINING);
  assert_string_equal(st.nodes[1].rack, "rb");
  assert_string_equal(st.nodes[1].kafka_addr, ""); /* older snapshots: no Kafka port */
  const struct meta_topic *t = meta_topic_find(&st, "golden");
  assert_non_null(t);
  assert_int_equal(t->config.retention_ms, 3600000);
  assert_int_equal(t->config.max_batch_bytes, 65536);
  assert_int_equal(t->partitions[0].leader_id, 1);
  assert_int_equal(t->partitions[0].leader_term, 3);
  assert_int_equal(t->partitions[1].nreplicas, 3);
  assert_int_equal(t->partitions[1].ninitial, 2);
  assert_int_equal(t->partitions[1].replicas[0] + t->partitions[1].replicas[1] +
                       t->partitions[1].replicas[2],
                   6);
  assert_int_equal(t->partitions[1].replica_epoch, 1);
  free(g);
  meta_state_close(&st);
}

/* A node's Kafka address is kept through a snapshot, and a node that
 * re-registers without one (an older binary, or --kafka-listen off) has
 * none afterwards. */
static void test_meta_snapshot_carries_kafka_addresses(void **state)
{
  (void)state;
  struct meta_state st, back;
  struct meta_result res;
  meta_state_init(&st);
  uint64_t voters[] = {1};
  assert_int_equal(APPLY(&st, &res, meta_cmd_bootstrap, "k", voters, 1), 0);
  assert_int_equal(do_register_kafka(&st, 1, 0x11, "", true, 0, &res), 0);
  assert_int_equal(do_register_kafka(&st, 2, 0x22, "", false, 0, &res), 0);
  size_t len;
  uint8_t *buf = snap(&st, &len);
  meta_state_init(&back);
  assert_int_equal(meta_snapshot_decode(&back, buf, len), 0);
  assert_string_equal(meta_node_find(&back, 1)->kafka_addr, "10.0.0.1:9095");
  assert_string_equal(meta_node_find(&back, 2)->kafka_addr, "");
  assert_same_state(&st, &back);
  free(buf);
  meta_state_close(&back);
  /* re-registered by a new incarnation without a Kafka port */
  assert_int_equal(do_state(&st, 1, META_NODE_DEAD, 0, &res), 0);
  assert_int_equal(do_register_kafka(&st, 1, 0x12, "", false, 0, &res), 0);
  assert_string_equal(meta_node_find(&st, 1)->kafka_addr, "");
  meta_state_close(&st);
}

/* The bytes of a command in the Raft log, by hand from proto/meta.proto:
 * MetaCommand.create_topic (field 4) = {name "ab", partitions 3, rf 2}. */
static void test_meta_command_bytes_are_stable(void **state)
{
  static const uint8_t want[] = {0x22, 0x08, 0x0a, 0x02, 'a', 'b', 0x10, 0x03, 0x18, 0x02};
  uint8_t *cmd;
  size_t len;
  assert_int_equal(meta_cmd_create_topic("ab", 3, 2, NULL, &cmd, &len), 0);
  assert_int_equal(len, sizeof want);
  assert_memory_equal(cmd, want, len);
  free(cmd);
}

int main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_meta_bootstrap_names_the_cluster_once),
      cmocka_unit_test(test_meta_register_node_adds_and_updates),
      cmocka_unit_test(test_meta_register_refuses_an_id_held_by_a_live_process),
      cmocka_unit_test(test_meta_set_node_state_follows_the_diagram),
      cmocka_unit_test(test_meta_create_topic_places_inside_apply),
      cmocka_unit_test(test_meta_create_topic_refusals_create_nothing),
      cmocka_unit_test(test_meta_cluster_limits_are_enforced),
    cmocka_unit_test(test_meta_delete_topic_never_reuses_its_id),
    cmocka_unit_test(test_meta_delete_of_an_internal_topic_is_refused),
      cmocka_unit_test(test_meta_report_leader_keeps_the_newest_term),
      cmocka_unit_test(test_meta_set_replicas_one_change_at_a_time),
      cmocka_unit_test(test_meta_malformed_commands_are_refused),
      cmocka_unit_test(test_meta_apply_refuses_an_index_going_backwards),
      cmocka_unit_test(test_meta_postgresql_topic_only_on_nodes_with_a_database),
      cmocka_unit_test(test_meta_snapshot_round_trip_is_exact),
      cmocka_unit_test(test_meta_snapshot_damage_is_refused_and_changes_nothing),
      cmocka_unit_test(test_meta_snapshot_decode_checks_every_invariant),
      cmocka_unit_test(test_meta_cmd_describe_names_each_command),
      cmocka_unit_test(test_meta_random_sequences_give_identical_snapshots),
      cmocka_unit_test(test_meta_snapshot_matches_golden_file),
      cmocka_unit_test(test_meta_producer_ids_are_unique_and_epochs_bump),
      cmocka_unit_test(test_meta_command_bytes_are_stable),
      cmocka_unit_test(test_meta_snapshot_carries_kafka_addresses),
      cmocka_unit_test(test_meta_add_partitions_grows_and_never_shrinks),
  };
  return cmocka_run_group_tests(tests, golden_setup, NULL);
}
