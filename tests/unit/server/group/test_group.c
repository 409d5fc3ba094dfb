/* test_group.c - the consumer group state machine: joins gather into one
 * generation, sessions expire and trigger a rebalance, generations fence
 * old members, strategies must be shared, added partitions rebalance, and
 * offsets are kept and expire. Random event orders print their seed. */
#include "common/err.h"
#include "server/group/group.h"
#include "testutil.h"

#include <inttypes.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

static uint32_t topic_count = 12;

static uint32_t env_partitions(void *ctx, const char *topic)
{
  (void)ctx;
  return strcmp(topic, "orders") == 0 ? topic_count : 0;
}

static const struct group_env env = {.partitions = env_partitions};
static const char *const topics[] = {"orders"};
static const char *const all_strategies[] = {"sticky", "range", "roundrobin"};

/* A Cairn-assigned JOIN; instance NULL: a dynamic member. */
static int join_as(struct group *g, const char *member, const char *new_id, const char *instance,
                   uint64_t now, struct group_actions *a)
{
  struct group_event ev = {.type = GROUP_EV_JOIN,
                           .now_ms = now,
                           .wall_ms = 1000000 + now,
                           .member_id = member,
                           .instance_id = instance,
                           .new_member_id = new_id,
                           .client_id = "t",
                           .session_timeout_ms = 3000,
                           .rebalance_timeout_ms = 5000,
                           .topics = topics,
                           .ntopics = 1,
                           .strategies = all_strategies,
                           .nstrategies = 3};
  return group_step(g, &env, &ev, a);
}

static int join(struct group *g, const char *member, const char *new_id, uint64_t now,
                struct group_actions *a)
{
  return join_as(g, member, new_id, NULL, now, a);
}

static int simple(struct group *g, enum group_event_type type, const char *member, int32_t gen,
                  uint64_t now, struct group_actions *a)
{
  struct group_event ev = {.type = type,
                           .now_ms = now,
                           .wall_ms = 1000000 + now,
                           .member_id = member,
                           .generation = gen};
  return group_step(g, &env, &ev, a);
}

static bool acted(const struct group_actions *a, const char *member, int err)
{
  for (size_t i = 0; i < a->n; i++) {
    if (a->v[i].type == GROUP_ACT_JOIN_DONE && strcmp(a->v[i].member_id, member) == 0 &&
        a->v[i].err == err) {
      return true;
    }
  }
  return false;
}

/* How many JOIN_DONE actions a holds. */
static size_t joins_done(const struct group_actions *a)
{
  size_t n = 0;
  for (size_t i = 0; i < a->n; i++) {
    n += a->v[i].type == GROUP_ACT_JOIN_DONE;
  }
  return n;
}

/* The generation a STORE action of a asks to keep; -1 none. */
static int32_t store_asked(const struct group_actions *a)
{
  int32_t gen = -1;
  for (size_t i = 0; i < a->n; i++) {
    if (a->v[i].type == GROUP_ACT_STORE) {
      assert_int_equal(gen, -1); /* one per step */
      gen = a->v[i].generation;
    }
  }
  return gen;
}

/* The outcome of the append a STORE asked for. */
static int stored(struct group *g, int32_t gen, int err, uint64_t now, struct group_actions *a)
{
  struct group_event ev = {.type = GROUP_EV_STORED,
                           .now_ms = now,
                           .wall_ms = 1000000 + now,
                           .member_id = "",
                           .generation = gen,
                           .err = err};
  return group_step(g, &env, &ev, a);
}

/* Three members join a new group together: one generation, 4 each. */
static void form_three(struct group *g, struct group_actions *a)
{
  assert_int_equal(group_init(g, "g1", 0, 0), 0);
  assert_int_equal(join(g, "", "a", 0, a), 0);
  assert_int_equal(join(g, "", "b", 100, a), 0);
  assert_int_equal(join(g, "", "c", 200, a), 0);
  assert_int_equal(a->n, 0); /* the initial delay gathers them */
  assert_int_equal(g->state, GROUP_PREPARING);
  assert_int_equal(simple(g, GROUP_EV_TICK, "", 0, 200 + GROUP_INITIAL_DELAY_MS, a), 0);
  assert_int_equal(joins_done(a), 3);
  assert_true(acted(a, "a", 0) && acted(a, "b", 0) && acted(a, "c", 0));
  /* The assignment is computed: it is kept before anyone reads it. */
  assert_int_equal(store_asked(a), 1);
  a->n = 0;
  assert_int_equal(g->state, GROUP_STORING);
  assert_int_equal(g->generation, 1);
  assert_int_equal(g->strategy, ASSIGN_STICKY);
  assert_string_equal(g->leader, "a");
  for (size_t i = 0; i < 3; i++) {
    assert_int_equal(g->members[i].nassigned, 4);
  }
  uint64_t now = 1300;
  assert_int_equal(simple(g, GROUP_EV_SYNC, "a", 1, now, a), 0);
  assert_int_equal(simple(g, GROUP_EV_SYNC, "b", 1, now, a), 0);
  assert_int_equal(g->state, GROUP_STORING); /* their answers wait */
  assert_int_equal(stored(g, 1, 0, now, a), 0);
  assert_int_equal(g->state, GROUP_STABLE);
  assert_int_equal(simple(g, GROUP_EV_SYNC, "c", 1, now, a), 0);
  assert_int_equal(g->state, GROUP_STABLE);
  assert_int_equal(a->n, 0);
}

static void test_group_three_joins_form_one_generation(void **state)
{
  struct group g;
  struct group_actions a = {0};
  form_three(&g, &a);
  group_actions_free(&a);
  group_close(&g);
}

static void test_group_silent_member_expires_and_its_partitions_move(void **state)
{
  struct group g;
  struct group_actions a = {0};
  form_three(&g, &a);
  const struct group_member *c = group_member_find(&g, "c");
  struct assign_tp cs[4];
  memcpy(cs, c->assigned, sizeof cs);
  /* a and b heartbeat; c is silent past its 3 s session. */
  uint64_t now = 1300;
  for (int i = 0; i < 5; i++) {
    now += 1000;
    int ra = simple(&g, GROUP_EV_HEARTBEAT, "a", 1, now, &a);
    int rb = simple(&g, GROUP_EV_HEARTBEAT, "b", 1, now, &a);
    assert_int_equal(simple(&g, GROUP_EV_TICK, "", 0, now, &a), 0);
    if (ra == CAIRN_EREBALANCE || rb == CAIRN_EREBALANCE) {
      break;
    }
  }
  assert_null(group_member_find(&g, "c"));
  assert_int_equal(g.state, GROUP_PREPARING);
  assert_int_equal(simple(&g, GROUP_EV_HEARTBEAT, "a", 1, now, &a), CAIRN_EREBALANCE);
  /* Commits of generation 1 still go through while preparing. */
  assert_int_equal(group_commit_check(&g, "a", NULL, 1, now), 0);
  assert_int_equal(join(&g, "a", NULL, now, &a), 0);
  assert_int_equal(a.n, 0);
  assert_int_equal(join(&g, "b", NULL, now, &a), 0);
  assert_int_equal(joins_done(&a), 2);
  assert_int_equal(g.generation, 2);
  assert_int_equal(group_member_find(&g, "a")->nassigned, 6);
  assert_int_equal(group_member_find(&g, "b")->nassigned, 6);
  for (int k = 0; k < 4; k++) {
    const struct group_member *o = group_owner(&g, "orders", cs[k].partition);
    assert_non_null(o);
    assert_string_not_equal(o->id, "c");
  }
  /* The old generation is fenced. */
  assert_int_equal(group_commit_check(&g, "a", NULL, 1, now), CAIRN_EILLEGAL_GENERATION);
  assert_int_equal(simple(&g, GROUP_EV_HEARTBEAT, "a", 1, now, &a), CAIRN_EILLEGAL_GENERATION);
  assert_int_equal(simple(&g, GROUP_EV_HEARTBEAT, "c", 2, now, &a), CAIRN_EUNKNOWN_MEMBER);
  assert_int_equal(group_commit_check(&g, "a", NULL, 2, now), 0);
  group_actions_free(&a);
  group_close(&g);
}

static void test_group_rebalance_deadline_drops_members_that_do_not_rejoin(void **state)
{
  struct group g;
  struct group_actions a = {0};
  form_three(&g, &a);
  uint64_t now = 2000;
  assert_int_equal(join(&g, "", "d", now, &a), 0);
  assert_int_equal(g.state, GROUP_PREPARING);
  assert_int_equal(join(&g, "a", NULL, now + 10, &a), 0);
  /* b heartbeats (alive) but never rejoins; c is silent. */
  assert_int_equal(simple(&g, GROUP_EV_HEARTBEAT, "b", 1, now + 100, &a), CAIRN_EREBALANCE);
  assert_int_equal(a.n, 0);
  assert_int_equal(simple(&g, GROUP_EV_TICK, "", 0, now + 5001, &a), 0);
  assert_int_equal(joins_done(&a), 2);
  assert_true(acted(&a, "a", 0) && acted(&a, "d", 0));
  assert_int_equal(g.nmembers, 2);
  assert_int_equal(g.generation, 2);
  group_actions_free(&a);
  group_close(&g);
}

static void test_group_bad_joins_are_refused_and_the_group_goes_on(void **state)
{
  struct group g;
  struct group_actions a = {0};
  form_three(&g, &a);
  static const char *const odd[] = {"cooperative-sticky"};
  struct group_event ev = {.type = GROUP_EV_JOIN,
                           .now_ms = 1400,
                           .member_id = "",
                           .new_member_id = "x",
                           .session_timeout_ms = 3000,
                           .topics = topics,
                           .ntopics = 1,
                           .strategies = odd,
                           .nstrategies = 1};
  assert_int_equal(group_step(&g, &env, &ev, &a), CAIRN_EINCONSISTENT_PROTOCOL);
  static const char *const rr[] = {"roundrobin"};
  ev.strategies = rr;
  struct group solo;
  assert_int_equal(group_init(&solo, "solo", 0, 0), 0);
  assert_int_equal(group_step(&solo, &env, &ev, &a), 0); /* alone, any known one */
  group_close(&solo);
  a.n = 0;
  /* The group's members speak sticky and range too, so roundrobin alone fits. */
  ev.new_member_id = "y";
  ev.session_timeout_ms = 10;
  assert_int_equal(group_step(&g, &env, &ev, &a), CAIRN_EINVALID_GROUP);
  ev.session_timeout_ms = 3000;
  ev.ntopics = 0;
  assert_int_equal(group_step(&g, &env, &ev, &a), CAIRN_EINVALID_GROUP);
  ev.ntopics = 1;
  ev.member_id = "nobody";
  assert_int_equal(group_step(&g, &env, &ev, &a), CAIRN_EUNKNOWN_MEMBER);
  assert_int_equal(g.state, GROUP_STABLE);
  assert_int_equal(g.nmembers, 3);
  assert_int_equal(simple(&g, GROUP_EV_HEARTBEAT, "a", 1, 1500, &a), 0);
  assert_int_equal(simple(&g, GROUP_EV_HEARTBEAT, "a", 7, 1500, &a), CAIRN_EILLEGAL_GENERATION);
  assert_int_equal(g.state, GROUP_STABLE);
  /* Ownership: each member owns only its 4. */
  const struct group_member *b = group_member_find(&g, "b");
  uint32_t bp = b->assigned[0].partition;
  assert_true(group_member_owns(&g, "b", "orders", bp));
  assert_false(group_member_owns(&g, "a", "orders", bp));
  assert_false(group_member_owns(&g, "a", "other", 0));
  /* A commit outside membership is refused while the group has members. */
  assert_int_equal(group_commit_check(&g, "", NULL, -1, 1500), CAIRN_EUNKNOWN_MEMBER);
  group_actions_free(&a);
  group_close(&g);
}

static void test_group_leave_and_added_partitions_rebalance(void **state)
{
  struct group g;
  struct group_actions a = {0};
  form_three(&g, &a);
  assert_int_equal(simple(&g, GROUP_EV_LEAVE, "b", 0, 1500, &a), 0);
  assert_int_equal(g.state, GROUP_PREPARING);
  assert_int_equal(join(&g, "a", NULL, 1600, &a), 0);
  assert_int_equal(join(&g, "c", NULL, 1600, &a), 0);
  assert_int_equal(g.generation, 2);
  assert_int_equal(simple(&g, GROUP_EV_SYNC, "a", 2, 1700, &a), 0);
  assert_int_equal(simple(&g, GROUP_EV_SYNC, "c", 2, 1700, &a), 0);
  assert_int_equal(g.state, GROUP_STORING);
  assert_int_equal(stored(&g, 2, 0, 1700, &a), 0);
  assert_int_equal(g.state, GROUP_STABLE);
  topic_count = 16;
  assert_int_equal(simple(&g, GROUP_EV_TICK, "", 0, 1800, &a), 0);
  assert_int_equal(g.state, GROUP_PREPARING);
  a.n = 0;
  assert_int_equal(join(&g, "a", NULL, 1900, &a), 0);
  assert_int_equal(join(&g, "c", NULL, 1900, &a), 0);
  assert_int_equal(joins_done(&a), 2);
  assert_int_equal(group_member_find(&g, "a")->nassigned, 8);
  topic_count = 12;
  /* Everyone leaves: empty, and a waiting join is answered on leave. */
  assert_int_equal(join(&g, "a", NULL, 2000, &a), 0);
  a.n = 0;
  assert_int_equal(simple(&g, GROUP_EV_LEAVE, "a", 0, 2100, &a), 0);
  assert_true(acted(&a, "a", CAIRN_EUNKNOWN_MEMBER));
  assert_int_equal(simple(&g, GROUP_EV_LEAVE, "c", 0, 2100, &a), 0);
  assert_int_equal(g.state, GROUP_EMPTY);
  assert_int_equal(g.nmembers, 0);
  assert_int_equal(group_commit_check(&g, "", NULL, -1, 2200), 0);
  group_actions_free(&a);
  group_close(&g);
}

static void test_group_offsets_are_kept_and_expire(void **state)
{
  struct group g;
  assert_int_equal(group_init(&g, "g", 5, 1000), 0);
  assert_int_equal(group_offset_set(&g, "orders", 3, 42, "m", 2000), 0);
  assert_int_equal(group_offset_set(&g, "orders", 1, 7, "", 2000), 0);
  assert_int_equal(group_offset_set(&g, "orders", 3, 43, "n", 3000), 0);
  const struct group_offset *o = group_offset_find(&g, "orders", 3);
  assert_non_null(o);
  assert_int_equal(o->offset, 43);
  assert_string_equal(o->metadata, "n");
  assert_int_equal(g.noffsets, 2);
  assert_null(group_offset_find(&g, "orders", 2));
  assert_false(group_expired(&g, 3000 + 999, 1000));
  assert_true(group_expired(&g, 3000 + 1000, 1000));
  group_offset_delete(&g, "orders", 3);
  assert_null(group_offset_find(&g, "orders", 3));
  assert_int_equal(g.noffsets, 1);
  group_close(&g);
}

/* A client-assigned (Kafka) member's JOIN: protocol "range". */
static int kjoin(struct group *g, const char *member, const char *new_id, uint64_t now,
                 struct group_actions *a)
{
  static const struct group_opaque_in protocols[] = {{"range", (const uint8_t *)"sub", 3}};
  struct group_event ev = {.type = GROUP_EV_JOIN,
                           .now_ms = now,
                           .wall_ms = 1000000 + now,
                           .member_id = member,
                           .new_member_id = new_id,
                           .client_id = "k",
                           .session_timeout_ms = 3000,
                           .rebalance_timeout_ms = 5000,
                           .protocol_type = "consumer",
                           .protocols = protocols,
                           .nprotocols = 1};
  return group_step(g, &env, &ev, a);
}

/* The leader's SYNC with bytes for a and b. */
static int ksync_leader(struct group *g, const char *leader, int32_t gen, uint64_t now,
                        struct group_actions *a)
{
  static const struct group_opaque_in as[] = {{"a", (const uint8_t *)"A", 1},
                                              {"b", (const uint8_t *)"B", 1}};
  struct group_event ev = {.type = GROUP_EV_SYNC,
                           .now_ms = now,
                           .wall_ms = 1000000 + now,
                           .member_id = leader,
                           .generation = gen,
                           .assignments = as,
                           .nassignments = 2};
  return group_step(g, &env, &ev, a);
}

/* a and b form a client-assigned group: generation 1, COMPLETING, a leads. */
static void kform_two(struct group *g, struct group_actions *a)
{
  assert_int_equal(group_init(g, "k1", 0, 0), 0);
  assert_int_equal(kjoin(g, "", "a", 0, a), 0);
  assert_int_equal(kjoin(g, "", "b", 100, a), 0);
  assert_int_equal(simple(g, GROUP_EV_TICK, "", 0, 100 + GROUP_INITIAL_DELAY_MS, a), 0);
  assert_int_equal(joins_done(a), 2);
  assert_int_equal(store_asked(a), -1); /* the leader member assigns: nothing to keep yet */
  a->n = 0;
  assert_int_equal(g->state, GROUP_COMPLETING);
  assert_string_equal(g->leader, "a");
  assert_int_equal(g->generation, 1);
}

/* Kafka's storeGroup: the leader's SYNC asks for the membership to be kept,
 * every SYNC waits (STORING) until that commits, members waiting do not
 * expire however long it takes, a STORED of another generation changes
 * nothing, and once stored their sessions restart. */
static void test_group_client_assigned_syncs_wait_for_the_store(void **state)
{
  struct group g;
  struct group_actions a = {0};
  kform_two(&g, &a);
  uint64_t now = 1200;
  assert_int_equal(simple(&g, GROUP_EV_SYNC, "b", 1, now, &a), 0);
  assert_int_equal(g.state, GROUP_COMPLETING);
  assert_int_equal(a.n, 0);
  assert_int_equal(ksync_leader(&g, "a", 1, now, &a), 0);
  assert_int_equal(store_asked(&a), 1);
  a.n = 0;
  assert_int_equal(g.state, GROUP_STORING);
  assert_true(g.assigned);
  /* A slow store: far past every session, nobody expires. */
  now += 10 * 3000;
  assert_int_equal(simple(&g, GROUP_EV_TICK, "", 0, now, &a), 0);
  assert_int_equal(g.nmembers, 2);
  assert_int_equal(g.state, GROUP_STORING);
  assert_int_equal(simple(&g, GROUP_EV_HEARTBEAT, "b", 1, now, &a), 0);
  /* Another generation's outcome is not this one's. */
  assert_int_equal(stored(&g, 0, 0, now, &a), 0);
  assert_int_equal(g.state, GROUP_STORING);
  assert_int_equal(stored(&g, 1, 0, now, &a), 0);
  assert_int_equal(g.state, GROUP_STABLE);
  const struct group_member *b = group_member_find(&g, "b");
  assert_int_equal(b->assignment_len, 1);
  assert_memory_equal(b->assignment, "B", 1);
  /* Sessions restart from the answers: alive just under 3 s later. */
  assert_int_equal(simple(&g, GROUP_EV_TICK, "", 0, now + 2999, &a), 0);
  assert_int_equal(g.nmembers, 2);
  assert_int_equal(g.state, GROUP_STABLE);
  /* A late SYNC of the stable generation is answered at once. */
  assert_int_equal(simple(&g, GROUP_EV_SYNC, "b", 1, now + 100, &a), 0);
  assert_int_equal(g.state, GROUP_STABLE);
  group_actions_free(&a);
  group_close(&g);
}

/* The store fails: nobody may use the assignment (the bytes are dropped),
 * the group rebalances in the same generation, the waiting members'
 * sessions restart, and the next generation is assigned and stored anew;
 * the failed store's late success changes nothing. */
static void test_group_failed_store_rebalances(void **state)
{
  struct group g;
  struct group_actions a = {0};
  kform_two(&g, &a);
  uint64_t now = 1200;
  assert_int_equal(simple(&g, GROUP_EV_SYNC, "b", 1, now, &a), 0);
  assert_int_equal(ksync_leader(&g, "a", 1, now, &a), 0);
  assert_int_equal(store_asked(&a), 1);
  a.n = 0;
  now += 20000;
  assert_int_equal(stored(&g, 1, CAIRN_ENOTLEADER, now, &a), 0);
  assert_int_equal(g.state, GROUP_PREPARING);
  assert_int_equal(g.generation, 1);
  assert_false(g.assigned);
  assert_null(group_member_find(&g, "a")->assignment);
  assert_null(group_member_find(&g, "b")->assignment);
  assert_int_equal(simple(&g, GROUP_EV_HEARTBEAT, "b", 1, now, &a), CAIRN_EREBALANCE);
  assert_int_equal(simple(&g, GROUP_EV_TICK, "", 0, now + 2999, &a), 0);
  assert_int_equal(g.nmembers, 2); /* sessions restarted at the failure */
  assert_int_equal(kjoin(&g, "a", NULL, now + 3000, &a), 0);
  assert_int_equal(kjoin(&g, "b", NULL, now + 3000, &a), 0);
  assert_int_equal(joins_done(&a), 2);
  a.n = 0;
  assert_int_equal(g.generation, 2);
  assert_int_equal(g.state, GROUP_COMPLETING);
  assert_int_equal(stored(&g, 1, 0, now + 3000, &a), 0); /* the first store, late */
  assert_int_equal(g.state, GROUP_COMPLETING);
  assert_int_equal(ksync_leader(&g, "a", 2, now + 3100, &a), 0);
  assert_int_equal(store_asked(&a), 2);
  assert_int_equal(stored(&g, 2, 0, now + 3200, &a), 0);
  assert_int_equal(g.state, GROUP_STABLE);
  group_actions_free(&a);
  group_close(&g);
}

/* A JOIN or a LEAVE while the store is in flight starts the next
 * rebalance at once; the store's outcome then changes nothing. */
static void test_group_join_or_leave_while_storing_rebalances(void **state)
{
  struct group g;
  struct group_actions a = {0};
  assert_int_equal(group_init(&g, "g1", 0, 0), 0);
  assert_int_equal(join(&g, "", "a", 0, &a), 0);
  assert_int_equal(join(&g, "", "b", 0, &a), 0);
  assert_int_equal(simple(&g, GROUP_EV_TICK, "", 0, GROUP_INITIAL_DELAY_MS, &a), 0);
  assert_int_equal(store_asked(&a), 1);
  a.n = 0;
  assert_int_equal(g.state, GROUP_STORING);
  assert_int_equal(simple(&g, GROUP_EV_SYNC, "a", 1, 1100, &a), 0);
  assert_int_equal(join(&g, "", "c", 1200, &a), 0);
  assert_int_equal(g.state, GROUP_PREPARING);
  assert_int_equal(stored(&g, 1, 0, 1300, &a), 0);
  assert_int_equal(g.state, GROUP_PREPARING);
  assert_int_equal(simple(&g, GROUP_EV_SYNC, "a", 1, 1300, &a), CAIRN_EREBALANCE);
  /* Everyone rejoins: generation 2, stored again; b leaves meanwhile. */
  assert_int_equal(join(&g, "a", NULL, 1400, &a), 0);
  assert_int_equal(join(&g, "b", NULL, 1400, &a), 0);
  assert_int_equal(joins_done(&a), 3);
  assert_int_equal(store_asked(&a), 2);
  a.n = 0;
  assert_int_equal(simple(&g, GROUP_EV_LEAVE, "b", 0, 1500, &a), 0);
  assert_int_equal(g.state, GROUP_PREPARING);
  assert_int_equal(stored(&g, 2, 0, 1600, &a), 0);
  assert_int_equal(g.state, GROUP_PREPARING);
  group_actions_free(&a);
  group_close(&g);
}

/* ---- static membership (group.instance.id) ---- */

/* A client-assigned JOIN of a static member: instance, protocol bytes. */
static int sjoin(struct group *g, const char *member, const char *new_id, const char *instance,
                 const char *meta, uint64_t now, struct group_actions *a)
{
  struct group_opaque_in protocols[] = {{"range", (const uint8_t *)meta, strlen(meta)}};
  struct group_event ev = {.type = GROUP_EV_JOIN,
                           .now_ms = now,
                           .wall_ms = 1000000 + now,
                           .member_id = member,
                           .instance_id = instance,
                           .new_member_id = new_id,
                           .client_id = "k",
                           .session_timeout_ms = 3000,
                           .rebalance_timeout_ms = 5000,
                           .protocol_type = "consumer",
                           .protocols = protocols,
                           .nprotocols = 1};
  return group_step(g, &env, &ev, a);
}

/* A SYNC, HEARTBEAT or LEAVE naming an instance. */
static int sevent(struct group *g, enum group_event_type type, const char *member,
                  const char *instance, int32_t gen, uint64_t now, struct group_actions *a)
{
  struct group_event ev = {.type = type,
                           .now_ms = now,
                           .wall_ms = 1000000 + now,
                           .member_id = member,
                           .instance_id = instance,
                           .generation = gen};
  return group_step(g, &env, &ev, a);
}

/* The leader a JOIN_DONE of member names ("" the group's); NULL none. */
static const char *join_leader(const struct group_actions *a, const char *member)
{
  for (size_t i = 0; i < a->n; i++) {
    if (a->v[i].type == GROUP_ACT_JOIN_DONE && strcmp(a->v[i].member_id, member) == 0) {
      return a->v[i].leader;
    }
  }
  return NULL;
}

/* Static members a (instance ia) and b (ib) stable in generation 1, a
 * leading, holding "A" and "B". */
static void sform_two(struct group *g, struct group_actions *a)
{
  assert_int_equal(group_init(g, "s1", 0, 0), 0);
  assert_int_equal(sjoin(g, "", "a", "ia", "sub", 0, a), 0);
  assert_int_equal(sjoin(g, "", "b", "ib", "sub", 100, a), 0);
  assert_int_equal(simple(g, GROUP_EV_TICK, "", 0, 100 + GROUP_INITIAL_DELAY_MS, a), 0);
  assert_int_equal(joins_done(a), 2);
  a->n = 0;
  assert_string_equal(group_member_find(g, "b")->instance_id, "ib");
  assert_int_equal(sevent(g, GROUP_EV_SYNC, "b", "ib", 1, 1200, a), 0);
  assert_int_equal(ksync_leader(g, "a", 1, 1200, a), 0);
  assert_int_equal(store_asked(a), 1);
  assert_int_equal(stored(g, 1, 0, 1200, a), 0);
  a->n = 0;
  assert_int_equal(g->state, GROUP_STABLE);
}

/* KIP-345: a static member restarting (member id "", its instance id)
 * while the group is stable takes over its place and assignment in the
 * same generation: answered at once, naming the leader from before (so a
 * restarted leader does not assign), the membership stored again; the
 * old member id is fenced everywhere; other metadata rebalances. */
static void test_group_static_member_restart_keeps_its_place(void **state)
{
  struct group g;
  struct group_actions a = {0};
  sform_two(&g, &a);
  uint64_t now = 2000;
  assert_int_equal(sjoin(&g, "", "b2", "ib", "sub", now, &a), 0);
  assert_true(acted(&a, "b2", 0));
  assert_string_equal(join_leader(&a, "b2"), "a");
  assert_int_equal(store_asked(&a), 1); /* the same generation, with b2 */
  a.n = 0;
  assert_int_equal(g.generation, 1);
  assert_int_equal(g.state, GROUP_STORING);
  assert_null(group_member_find(&g, "b"));
  const struct group_member *b2 = group_member_find(&g, "b2");
  assert_non_null(b2);
  assert_string_equal(b2->instance_id, "ib");
  assert_int_equal(b2->assignment_len, 1);
  assert_memory_equal(b2->assignment, "B", 1);
  /* The old id is fenced; without the instance id it is just unknown. */
  assert_int_equal(sevent(&g, GROUP_EV_HEARTBEAT, "b", "ib", 1, now, &a), CAIRN_EFENCED_INSTANCE);
  assert_int_equal(sevent(&g, GROUP_EV_SYNC, "b", "ib", 1, now, &a), CAIRN_EFENCED_INSTANCE);
  assert_int_equal(sevent(&g, GROUP_EV_LEAVE, "b", "ib", 0, now, &a), CAIRN_EFENCED_INSTANCE);
  assert_int_equal(group_commit_check(&g, "b", "ib", 1, now), CAIRN_EFENCED_INSTANCE);
  assert_int_equal(group_commit_check(&g, "b", NULL, 1, now), CAIRN_EUNKNOWN_MEMBER);
  assert_int_equal(sjoin(&g, "b", NULL, "ib", "sub", now, &a), CAIRN_EFENCED_INSTANCE);
  assert_int_equal(sjoin(&g, "b2", NULL, "other", "sub", now, &a), CAIRN_EUNKNOWN_MEMBER);
  assert_int_equal(a.n, 0);
  /* The others go on; b2's SYNC gets b's bytes once stored. */
  assert_int_equal(sevent(&g, GROUP_EV_HEARTBEAT, "a", "ia", 1, now, &a), 0);
  assert_int_equal(group_commit_check(&g, "b2", "ib", 1, now), 0);
  assert_int_equal(sevent(&g, GROUP_EV_SYNC, "b2", "ib", 1, now, &a), 0);
  assert_int_equal(stored(&g, 1, 0, now + 10, &a), 0);
  assert_int_equal(g.state, GROUP_STABLE);
  assert_int_equal(g.generation, 1);
  /* The leader restarts: it becomes a2, still the leader, but is told the
   * old id leads, so it syncs as a follower and keeps its bytes. */
  assert_int_equal(sjoin(&g, "", "a2", "ia", "sub", now + 100, &a), 0);
  assert_string_equal(join_leader(&a, "a2"), "a");
  assert_string_equal(g.leader, "a2");
  assert_int_equal(store_asked(&a), 1);
  a.n = 0;
  assert_int_equal(stored(&g, 1, 0, now + 110, &a), 0);
  assert_int_equal(g.state, GROUP_STABLE);
  assert_memory_equal(group_member_find(&g, "a2")->assignment, "A", 1);
  /* Other metadata: the assignment may change, so the group rebalances. */
  assert_int_equal(sjoin(&g, "", "b3", "ib", "sub2", now + 200, &a), 0);
  assert_int_equal(joins_done(&a), 0);
  assert_int_equal(g.state, GROUP_PREPARING);
  assert_int_equal(sjoin(&g, "a2", NULL, "ia", "sub", now + 300, &a), 0);
  assert_true(acted(&a, "a2", 0) && acted(&a, "b3", 0));
  assert_int_equal(g.generation, 2);
  assert_string_equal(g.leader, "a2");
  group_actions_free(&a);
  group_close(&g);
}

/* A restart during a rebalance: the replaced member's waiting JoinGroup is
 * answered FENCED_INSTANCE, the new one joins in its place; a static
 * member that goes silent expires and one that leaves by instance id (no
 * member id) is removed, each starting a rebalance as a dynamic one does. */
static void test_group_static_member_fenced_expires_and_leaves(void **state)
{
  struct group g;
  struct group_actions a = {0};
  sform_two(&g, &a);
  assert_int_equal(sjoin(&g, "a", NULL, "ia", "sub", 2000, &a), 0); /* a rebalance */
  assert_int_equal(g.state, GROUP_PREPARING);
  assert_int_equal(sjoin(&g, "", "a2", "ia", "sub", 2100, &a), 0);
  assert_true(acted(&a, "a", CAIRN_EFENCED_INSTANCE));
  assert_int_equal(g.nmembers, 2);
  a.n = 0;
  assert_int_equal(sjoin(&g, "b", NULL, "ib", "sub", 2200, &a), 0);
  assert_true(acted(&a, "a2", 0) && acted(&a, "b", 0));
  assert_int_equal(g.generation, 2);
  assert_string_equal(g.leader, "a2");
  a.n = 0;
  /* b goes silent past its session: removed, the group rebalances. */
  assert_int_equal(sevent(&g, GROUP_EV_HEARTBEAT, "a2", "ia", 2, 4000, &a), 0);
  assert_int_equal(simple(&g, GROUP_EV_TICK, "", 0, 2200 + 3001, &a), 0);
  assert_null(group_member_find(&g, "b"));
  assert_int_equal(g.state, GROUP_PREPARING);
  /* ib joins again as a new member; then a2 leaves by its instance id. */
  assert_int_equal(sjoin(&g, "", "b2", "ib", "sub", 5300, &a), 0);
  assert_int_equal(sevent(&g, GROUP_EV_LEAVE, "", "ia", 0, 5400, &a), 0);
  assert_null(group_member_find(&g, "a2"));
  assert_int_equal(sevent(&g, GROUP_EV_LEAVE, "", "ia", 0, 5400, &a), CAIRN_EUNKNOWN_MEMBER);
  assert_true(acted(&a, "b2", 0));
  assert_string_equal(g.leader, "b2");
  group_actions_free(&a);
  group_close(&g);
}

/* A Cairn-assigned static member restarting keeps its partitions; with
 * another subscription the group rebalances. */
static void test_group_static_member_keeps_its_partitions(void **state)
{
  struct group g;
  struct group_actions a = {0};
  assert_int_equal(group_init(&g, "s2", 0, 0), 0);
  struct group_event ev = {.type = GROUP_EV_JOIN,
                           .member_id = "",
                           .client_id = "t",
                           .session_timeout_ms = 3000,
                           .rebalance_timeout_ms = 5000,
                           .topics = topics,
                           .ntopics = 1,
                           .strategies = all_strategies,
                           .nstrategies = 3};
  ev.new_member_id = "a";
  ev.instance_id = "ia";
  assert_int_equal(group_step(&g, &env, &ev, &a), 0);
  ev.new_member_id = "b";
  ev.instance_id = "ib";
  assert_int_equal(group_step(&g, &env, &ev, &a), 0);
  assert_int_equal(simple(&g, GROUP_EV_TICK, "", 0, GROUP_INITIAL_DELAY_MS, &a), 0);
  assert_int_equal(stored(&g, 1, 0, 1100, &a), 0);
  a.n = 0;
  assert_int_equal(g.state, GROUP_STABLE);
  struct assign_tp held[12];
  size_t nheld = group_member_find(&g, "b")->nassigned;
  assert_int_equal(nheld, 6);
  memcpy(held, group_member_find(&g, "b")->assigned, nheld * sizeof held[0]);
  ev.now_ms = 1500;
  ev.new_member_id = "b2";
  assert_int_equal(group_step(&g, &env, &ev, &a), 0);
  assert_true(acted(&a, "b2", 0));
  assert_int_equal(g.state, GROUP_STORING);
  assert_int_equal(g.generation, 1);
  const struct group_member *b2 = group_member_find(&g, "b2");
  assert_int_equal(b2->nassigned, nheld);
  assert_memory_equal(b2->assigned, held, nheld * sizeof held[0]);
  assert_int_equal(stored(&g, 1, 0, 1600, &a), 0);
  a.n = 0;
  /* Another subscription: a rebalance. */
  static const char *const two[] = {"orders", "more"};
  ev.now_ms = 1700;
  ev.new_member_id = "b3";
  ev.topics = two;
  ev.ntopics = 2;
  assert_int_equal(group_step(&g, &env, &ev, &a), 0);
  assert_int_equal(joins_done(&a), 0);
  assert_int_equal(g.state, GROUP_PREPARING);
  group_actions_free(&a);
  group_close(&g);
}

/* A membership record whose leader is not one of its members (damage, or
 * a forged record) is refused: restored, the next rebalance with every
 * member rejoining looked for the missing leader's protocols (a NULL
 * dereference). Member ids and instance ids held twice are refused too
 * (fuzz_group found the first restored as two members). The group starts
 * empty and takes joins. */
static void test_group_restore_refuses_a_foreign_leader_or_a_shared_id(void **state)
{
  struct group g;
  struct group_actions a = {0};
  assert_int_equal(group_init(&g, "r1", 0, 0), 0);
  struct group_snapshot_member sm[2] = {
      {.id = "a", .client_id = "k", .instance_id = "ia", .session_timeout_ms = 3000},
      {.id = "b", .client_id = "k", .instance_id = "ib", .session_timeout_ms = 3000}};
  struct group_snapshot snap = {.generation = 4,
                                .protocol_type = "consumer",
                                .protocol = "range",
                                .leader = "x",
                                .members = sm,
                                .nmembers = 2};
  assert_int_equal(group_restore(&g, &snap, &env, 100, 100), CAIRN_EINVAL);
  assert_int_equal(g.nmembers, 0);
  assert_int_equal(g.state, GROUP_EMPTY);
  snap.leader = "b";
  sm[1].instance_id = "ia";
  assert_int_equal(group_restore(&g, &snap, &env, 100, 100), CAIRN_EINVAL);
  assert_int_equal(g.nmembers, 0);
  sm[1].instance_id = "ib";
  sm[1].id = "a";
  snap.leader = "a";
  assert_int_equal(group_restore(&g, &snap, &env, 100, 100), CAIRN_EINVAL);
  assert_int_equal(g.nmembers, 0);
  sm[1].id = "b";
  snap.leader = "b";
  assert_int_equal(group_restore(&g, &snap, &env, 100, 100), 0);
  assert_int_equal(g.state, GROUP_STABLE);
  /* Both rejoin: the rebalance completes with b leading. */
  assert_int_equal(sjoin(&g, "a", NULL, "ia", "sub", 200, &a), 0);
  assert_int_equal(sjoin(&g, "b", NULL, "ib", "sub", 200, &a), 0);
  assert_true(acted(&a, "a", 0) && acted(&a, "b", 0));
  assert_string_equal(g.leader, "b");
  group_actions_free(&a);
  group_close(&g);
}

/* Random orders of joins, heartbeats, syncs, leaves, ticks, store
 * outcomes (some failed) and static members' joins and restarts
 * (takeovers): every answered join of generation G sees an assignment that
 * covers the 12 partitions once, members of a stable group hold 4 or fewer
 * apart by at most one, generations only grow, a group that is STORING
 * always has the store of its generation in flight, and no two members
 * hold one instance id. */
static void test_group_random_event_orders_keep_invariants(void **state)
{
  uint64_t seed = tu_seed("test_group_random");
  uint64_t rs = seed;
  for (int round = 0; round < 200; round++) {
    struct group g;
    struct group_actions a = {0};
    assert_int_equal(group_init(&g, "r", 0, 0), 0);
    uint64_t now = 0;
    int32_t last_gen = 0;
    int32_t pending[200]; /* generations whose STORE is in flight */
    size_t npending = 0;
    for (int step = 0; step < 200; step++) {
      now += tu_rand(&rs) % 700;
      int kind = (int)(tu_rand(&rs) % 8);
      char who[GROUP_MEMBER_ID_MAX + 1];
      snprintf(who, sizeof who, "m%d", (int)(tu_rand(&rs) % 6));
      if (g.nmembers > 0 && tu_rand(&rs) % 2 == 0) {
        snprintf(who, sizeof who, "%s", g.members[tu_rand(&rs) % g.nmembers].id);
      }
      int rv;
      switch (kind) {
      case 0:
        if (group_member_find(&g, who) != NULL) {
          rv = join(&g, who, NULL, now, &a);
        } else {
          rv = join(&g, "", who, now, &a);
        }
        assert_int_equal(rv, 0);
        break;
      case 1:
      case 2:
        rv = simple(&g, GROUP_EV_HEARTBEAT, who, g.generation, now, &a);
        break;
      case 3:
        rv = simple(&g, GROUP_EV_SYNC, who, g.generation, now, &a);
        break;
      case 4:
        rv = simple(&g, GROUP_EV_LEAVE, who, 0, now, &a);
        break;
      case 7: {
        /* A static member (instances s0..s2) joins, or restarts: member
         * id "" with a fresh id, taking over the instance's member. */
        char inst[8], fresh[24];
        snprintf(inst, sizeof inst, "s%d", (int)(tu_rand(&rs) % 3));
        snprintf(fresh, sizeof fresh, "%s-%d", inst, step);
        rv = join_as(&g, "", fresh, inst, now, &a);
        assert_int_equal(rv, 0);
        break;
      }
      case 5:
        if (npending > 0) {
          size_t k = (size_t)(tu_rand(&rs) % npending);
          int err = tu_rand(&rs) % 4 == 0 ? CAIRN_ENOTLEADER : 0;
          assert_int_equal(stored(&g, pending[k], err, now, &a), 0);
          pending[k] = pending[--npending];
        }
        break;
      default:
        rv = simple(&g, GROUP_EV_TICK, "", 0, now, &a);
        assert_int_equal(rv, 0);
        break;
      }
      (void)rv;
      int32_t asked = store_asked(&a);
      if (asked >= 0) {
        assert_int_equal(asked, g.generation);
        pending[npending++] = asked;
      }
      bool in_flight = false;
      for (size_t k = 0; k < npending; k++) {
        in_flight = in_flight || pending[k] == g.generation;
      }
      if (g.state == GROUP_STORING && !in_flight) {
        fail_msg("seed %" PRIu64 " round %d step %d: storing generation %" PRId32
                 " with no store in flight",
                 seed, round, step, g.generation);
      }
      if (g.state == GROUP_COMPLETING) {
        fail_msg("seed %" PRIu64 ": a Cairn-assigned group waits for a leader", seed);
      }
      if (g.generation < last_gen) {
        fail_msg("seed %" PRIu64 ": generation went back", seed);
      }
      last_gen = g.generation;
      for (size_t i = 0; i < g.nmembers; i++) {
        for (size_t k = i + 1; k < g.nmembers && g.members[i].instance_id[0] != '\0'; k++) {
          if (strcmp(g.members[i].instance_id, g.members[k].instance_id) == 0) {
            fail_msg("seed %" PRIu64 ": instance %s held twice", seed, g.members[i].instance_id);
          }
        }
      }
      if (g.state == GROUP_STORING || g.state == GROUP_STABLE) {
        size_t total = 0, lo = SIZE_MAX, hi = 0;
        for (size_t i = 0; i < g.nmembers; i++) {
          size_t k = g.members[i].nassigned;
          total += k;
          lo = k < lo ? k : lo;
          hi = k > hi ? k : hi;
        }
        if (total != 12 || hi - lo > 1) {
          fail_msg("seed %" PRIu64 " round %d step %d: %zu assigned, spread %zu", seed, round, step,
                   total, hi - lo);
        }
        for (uint32_t p = 0; p < 12; p++) {
          assert_non_null(group_owner(&g, "orders", p));
        }
      }
      a.n = 0;
    }
    group_actions_free(&a);
    group_close(&g);
  }
}

int main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_group_three_joins_form_one_generation),
      cmocka_unit_test(test_group_silent_member_expires_and_its_partitions_move),
      cmocka_unit_test(test_group_rebalance_deadline_drops_members_that_do_not_rejoin),
      cmocka_unit_test(test_group_bad_joins_are_refused_and_the_group_goes_on),
      cmocka_unit_test(test_group_leave_and_added_partitions_rebalance),
      cmocka_unit_test(test_group_offsets_are_kept_and_expire),
      cmocka_unit_test(test_group_client_assigned_syncs_wait_for_the_store),
      cmocka_unit_test(test_group_failed_store_rebalances),
      cmocka_unit_test(test_group_join_or_leave_while_storing_rebalances),
      cmocka_unit_test(test_group_static_member_restart_keeps_its_place),
      cmocka_unit_test(test_group_static_member_fenced_expires_and_leaves),
      cmocka_unit_test(test_group_static_member_keeps_its_partitions),
      cmocka_unit_test(test_group_restore_refuses_a_foreign_leader_or_a_shared_id),
      cmocka_unit_test(test_group_random_event_orders_keep_invariants),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
