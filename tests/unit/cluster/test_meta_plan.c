/* test_meta_plan.c - the controller leader's repair planner, driven against a
 * real meta_state: nodes going silent and coming back, dead nodes' replicas
 * moved one change at a time after the delay, decommissions, and a seeded
 * random soak where the cluster must converge back to full replication. */
#include "cluster/meta_plan.h"
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

#define MAX_NODES 16
#define MAX_PARTS 256

/* The world the planner sees: the state, the leader's heartbeat view and the
 * configurations partition leaders reported. */
struct world {
  struct meta_state st;
  struct meta_plan_liveness live[MAX_NODES];
  size_t nlive;
  struct meta_plan_config configs[MAX_PARTS];
  uint64_t voters[MAX_PARTS][META_MAX_REPLICAS];
  size_t nconfigs;
  struct meta_plan_opts opts;
  uint64_t now_ms;
};

static int apply_bytes(struct meta_state *st, uint8_t *cmd, size_t len, struct meta_result *res)
{
  int rc = meta_apply(st, cmd, len, 0, res);
  free(cmd);
  return rc;
}

#define APPLY_OK(st, encoder, ...)                                                                 \
  do {                                                                                             \
    uint8_t *cmd_;                                                                                 \
    size_t len_;                                                                                   \
    struct meta_result res_;                                                                       \
    assert_int_equal(encoder(__VA_ARGS__, &cmd_, &len_), 0);                                       \
    int rc_ = apply_bytes((st), cmd_, len_, &res_);                                                \
    if (rc_ != 0)                                                                                  \
      fail_msg("%s: %s", cairn_errname(rc_), res_.msg);                                            \
  } while (0)

/* n nodes 1..n (incarnation 100+id, racks none), all heard just now. */
static void world_init(struct world *w, int n)
{
  memset(w, 0, sizeof *w);
  meta_state_init(&w->st);
  APPLY_OK(&w->st, meta_cmd_bootstrap, "c", (uint64_t[]){1}, 1);
  for (int i = 1; i <= n; i++) {
    struct meta_node_info info = {(uint64_t)i, 100 + (uint64_t)i, "h:1", "h:2", "", "", NULL, NULL, 0};
    APPLY_OK(&w->st, meta_cmd_register_node, &info, 0);
    w->live[w->nlive++] = (struct meta_plan_liveness){(uint64_t)i, 100 + (uint64_t)i, 0};
  }
  w->opts.node_timeout_ms = 10000;
  w->opts.replace_delay_ms = 60000;
  w->opts.max_commands = 64;
  w->now_ms = 1000000;
}

static struct meta_plan_liveness *world_live(struct world *w, uint64_t id)
{
  for (size_t i = 0; i < w->nlive; i++)
    if (w->live[i].node_id == id)
      return &w->live[i];
  fail_msg("no liveness entry for %llu", (unsigned long long)id);
  return NULL;
}

/* Every partition leader reports its configuration: the target replicas,
 * all voters (caught up), at the current epoch. */
static void world_report_all_caught_up(struct world *w)
{
  w->nconfigs = 0;
  for (size_t i = 0; i < w->st.ntopics; i++)
    for (uint32_t p = 0; p < w->st.topics[i].npartitions; p++) {
      const struct meta_partition *part = &w->st.topics[i].partitions[p];
      size_t k = w->nconfigs++;
      assert_true(k < MAX_PARTS);
      memcpy(w->voters[k], part->replicas, part->nreplicas * sizeof(uint64_t));
      w->configs[k] = (struct meta_plan_config){w->st.topics[i].id, p, part->replica_epoch,
                                                w->voters[k], part->nreplicas};
    }
}

/* Reports every partition's configuration with the newest replica of a
 * partition over rf (the one being added) not yet a voter. */
static void world_report_newest_not_caught_up(struct world *w)
{
  world_report_all_caught_up(w);
  for (size_t k = 0; k < w->nconfigs; k++) {
    const struct meta_topic *t = meta_topic_find_id(&w->st, w->configs[k].topic_id);
    if (w->configs[k].nvoters > t->replication_factor)
      w->configs[k].nvoters--;
  }
}

static void world_plan(struct world *w, struct meta_plan_out *out)
{
  struct meta_plan_input in = {&w->st,      w->live,   w->nlive, w->configs,
                               w->nconfigs, w->now_ms, w->opts};
  assert_int_equal(meta_plan_run(&in, out), 0);
}

/* Plans, applies everything planned (each must succeed), and returns how
 * many commands there were. */
static size_t world_step(struct world *w)
{
  struct meta_plan_out out;
  world_plan(w, &out);
  for (size_t i = 0; i < out.ncmds; i++) {
    struct meta_result res;
    int rc = meta_apply(&w->st, out.cmds[i].cmd, out.cmds[i].len, 0, &res);
    if (rc != 0)
      fail_msg("planned command '%s' refused: %s: %s", out.cmds[i].why, cairn_errname(rc), res.msg);
  }
  size_t n = out.ncmds;
  meta_plan_out_free(&out);
  char why[200];
  if (meta_state_check(&w->st, why, sizeof why) != 0)
    fail_msg("invariant broken: %s", why);
  return n;
}

static enum meta_node_state node_state(struct world *w, uint64_t id)
{
  return meta_node_find(&w->st, id)->state;
}

static uint32_t replicas_on(struct world *w, uint64_t id)
{
  uint32_t r, l;
  meta_node_load(&w->st, id, &r, &l);
  return r;
}

/* Every partition has rf replicas, none on `gone`, all on ALIVE nodes. */
static void assert_fully_replicated_without(struct world *w, uint64_t gone)
{
  for (size_t i = 0; i < w->st.ntopics; i++) {
    const struct meta_topic *t = &w->st.topics[i];
    for (uint32_t p = 0; p < t->npartitions; p++) {
      const struct meta_partition *part = &t->partitions[p];
      assert_int_equal(part->nreplicas, t->replication_factor);
      assert_false(meta_replicas_contain(part->replicas, part->nreplicas, gone));
      for (uint32_t r = 0; r < part->nreplicas; r++)
        assert_int_equal(node_state(w, part->replicas[r]), META_NODE_ALIVE);
    }
  }
}

static void test_meta_plan_quiet_cluster_proposes_nothing(void **state)
{
  struct world w;
  world_init(&w, 4);
  APPLY_OK(&w.st, meta_cmd_create_topic, "t", 8, 3, NULL);
  world_report_all_caught_up(&w);
  assert_int_equal(world_step(&w), 0);
  /* Without any report either: nothing to wait for, nothing to do. */
  w.nconfigs = 0;
  assert_int_equal(world_step(&w), 0);
  meta_state_close(&w.st);
}

static void test_meta_plan_marks_a_silent_node_dead_and_back(void **state)
{
  struct world w;
  world_init(&w, 3);
  world_live(&w, 2)->ms_since_heartbeat = 9999;
  assert_int_equal(world_step(&w), 0);
  world_live(&w, 2)->ms_since_heartbeat = 10000;
  struct meta_plan_out out;
  world_plan(&w, &out);
  assert_int_equal(out.ncmds, 1);
  printf("planned: %s\n", out.cmds[0].why);
  assert_non_null(strstr(out.cmds[0].why, "node 2 is dead"));
  meta_plan_out_free(&out);
  assert_int_equal(world_step(&w), 1);
  assert_int_equal(node_state(&w, 2), META_NODE_DEAD);
  assert_int_equal(meta_node_find(&w.st, 2)->state_since_ms, w.now_ms);
  assert_int_equal(world_step(&w), 0); /* dead, and no replicas to move */
  /* Heard again: ALIVE. */
  world_live(&w, 2)->ms_since_heartbeat = 50;
  assert_int_equal(world_step(&w), 1);
  assert_int_equal(node_state(&w, 2), META_NODE_ALIVE);
  /* Heartbeats of another incarnation say nothing about the registered one;
   * a node missing from the view is left alone too. */
  world_live(&w, 2)->incarnation = 999;
  world_live(&w, 2)->ms_since_heartbeat = 1000000;
  w.nlive = 2; /* drops node 3's entry */
  world_live(&w, 1)->ms_since_heartbeat = 1000000;
  assert_int_equal(world_step(&w), 1); /* node 1 only */
  assert_int_equal(node_state(&w, 1), META_NODE_DEAD);
  assert_int_equal(node_state(&w, 2), META_NODE_ALIVE);
  assert_int_equal(node_state(&w, 3), META_NODE_ALIVE);
  meta_state_close(&w.st);
}

static void test_meta_plan_moves_a_dead_nodes_replicas_after_the_delay(void **state)
{
  struct world w;
  world_init(&w, 4);
  APPLY_OK(&w.st, meta_cmd_create_topic, "t", 4, 3, NULL);
  /* Node 1 holds 3 partitions (one as preferred leader). */
  assert_int_equal(replicas_on(&w, 1), 3);
  uint64_t before[4][META_MAX_REPLICAS];
  for (uint32_t p = 0; p < 4; p++)
    memcpy(before[p], meta_partition_find(&w.st, 1, p)->replicas, sizeof before[p]);

  world_live(&w, 1)->ms_since_heartbeat = 10000;
  assert_int_equal(world_step(&w), 1);
  assert_int_equal(node_state(&w, 1), META_NODE_DEAD);
  /* Within the delay: nothing moves. */
  world_live(&w, 1)->ms_since_heartbeat = 10000 + 59999;
  world_report_all_caught_up(&w);
  assert_int_equal(world_step(&w), 0);
  /* Past it: one addition per partition that had node 1, of the one node
   * outside it. */
  world_live(&w, 1)->ms_since_heartbeat = 10000 + 60000;
  assert_int_equal(world_step(&w), 3);
  for (uint32_t p = 0; p < 4; p++) {
    const struct meta_partition *part = meta_partition_find(&w.st, 1, p);
    if (meta_replicas_contain(before[p], 3, 1)) {
      assert_int_equal(part->nreplicas, 4);
      assert_false(meta_replicas_contain(before[p], 3, part->replicas[3]));
      assert_int_not_equal(part->replicas[3], 1);
      assert_memory_equal(part->replicas, before[p], 3 * sizeof(uint64_t));
    } else {
      assert_int_equal(part->nreplicas, 3);
    }
  }
  /* The additions are not caught up (no report at the new epoch, then a
   * report without the new replica as a voter): nothing is removed. */
  assert_int_equal(world_step(&w), 0);
  world_report_newest_not_caught_up(&w);
  assert_int_equal(world_step(&w), 0);
  /* Caught up: node 1 goes, one partition at a time. */
  world_report_all_caught_up(&w);
  assert_int_equal(world_step(&w), 3);
  assert_fully_replicated_without(&w, 1);
  for (uint32_t p = 0; p < 4; p++) {
    const struct meta_partition *part = meta_partition_find(&w.st, 1, p);
    /* The preferred leader stays where it was unless it was node 1. */
    if (before[p][0] != 1)
      assert_int_equal(part->replicas[0], before[p][0]);
    else
      assert_int_equal(part->replicas[0], before[p][1]);
  }
  world_report_all_caught_up(&w);
  assert_int_equal(world_step(&w), 0);
  assert_int_equal(node_state(&w, 1), META_NODE_DEAD); /* the operator removes it */
  meta_state_close(&w.st);
}

static void test_meta_plan_run_twice_before_apply_is_harmless(void **state)
{
  struct world w;
  world_init(&w, 4);
  APPLY_OK(&w.st, meta_cmd_create_topic, "t", 4, 3, NULL);
  APPLY_OK(&w.st, meta_cmd_set_node_state, 2, META_NODE_DRAINING, 0, 0);
  struct meta_plan_out a, b;
  world_plan(&w, &a);
  world_plan(&w, &b);
  assert_int_equal(a.ncmds, b.ncmds);
  assert_true(a.ncmds > 0);
  for (size_t i = 0; i < a.ncmds; i++) {
    struct meta_result res;
    assert_int_equal(meta_apply(&w.st, a.cmds[i].cmd, a.cmds[i].len, 0, &res), 0);
  }
  for (size_t i = 0; i < b.ncmds; i++) {
    struct meta_result res;
    assert_int_equal(meta_apply(&w.st, b.cmds[i].cmd, b.cmds[i].len, 0, &res), CAIRN_ESTALE);
  }
  meta_plan_out_free(&a);
  meta_plan_out_free(&b);
  meta_state_close(&w.st);
}

/* Node id registers again (same incarnation) with capabilities caps. */
static void world_set_caps(struct world *w, uint64_t id, uint32_t caps)
{
  struct meta_node_info info = {id, 100 + id, "h:1", "h:2", "", "", NULL, NULL, caps};
  APPLY_OK(&w->st, meta_cmd_register_node, &info, 0);
}

/* Plans and applies, every partition caught up each time, until nothing
 * is left to do (at most `rounds` runs). */
static void world_settle(struct world *w, int rounds)
{
  for (int i = 0; i < rounds; i++) {
    world_report_all_caught_up(w);
    if (world_step(w) == 0)
      return;
  }
  fail_msg("the planner did not settle in %d runs", rounds);
}

/* Every replica of topic name sits on a node with all of caps. */
static void assert_topic_on_caps(struct world *w, const char *name, uint32_t caps)
{
  const struct meta_topic *t = meta_topic_find(&w->st, name);
  assert_non_null(t);
  for (uint32_t p = 0; p < t->npartitions; p++) {
    assert_int_equal(t->partitions[p].nreplicas, t->replication_factor);
    for (uint32_t r = 0; r < t->partitions[p].nreplicas; r++) {
      const struct meta_node *n = meta_node_find(&w->st, t->partitions[p].replicas[r]);
      if ((n->caps & caps) != caps)
        fail_msg("%s/%u: replica on node %llu, which lacks the capability", name, p,
                 (unsigned long long)n->id);
    }
  }
}

/* A postgresql topic's replicas move only to nodes with a database: a drain
 * leaves the node without one alone, and a replica found on a node without
 * one (older metadata) moves to one that has it. */
static void test_meta_plan_moves_postgresql_replicas_only_to_nodes_with_a_database(void **state)
{
  struct world w;
  world_init(&w, 4);
  for (uint64_t id = 1; id <= 3; id++)
    world_set_caps(&w, id, META_NODE_CAP_POSTGRESQL);
  struct meta_topic_config pg = {0, 0, 0, 0, 1};
  APPLY_OK(&w.st, meta_cmd_create_topic, "pg", 6, 2, &pg);
  APPLY_OK(&w.st, meta_cmd_create_topic, "file", 2, 2, NULL);
  assert_topic_on_caps(&w, "pg", META_NODE_CAP_POSTGRESQL);
  APPLY_OK(&w.st, meta_cmd_set_node_state, 1, META_NODE_DRAINING, 0, 0);
  world_settle(&w, 40);
  assert_int_equal(node_state(&w, 1), META_NODE_REMOVED);
  assert_topic_on_caps(&w, "pg", META_NODE_CAP_POSTGRESQL);
  /* Node 3 loses its database; node 4 gets one: node 3's replicas move. */
  world_set_caps(&w, 3, 0);
  world_set_caps(&w, 4, META_NODE_CAP_POSTGRESQL);
  world_settle(&w, 40);
  assert_topic_on_caps(&w, "pg", META_NODE_CAP_POSTGRESQL);
  uint32_t replicas, leaders;
  meta_node_load(&w.st, 4, &replicas, &leaders);
  assert_true(replicas >= 6);
  meta_state_close(&w.st);
}

static void test_meta_plan_drains_a_node_then_removes_it(void **state)
{
  struct world w;
  world_init(&w, 5);
  APPLY_OK(&w.st, meta_cmd_create_topic, "a", 6, 3, NULL);
  APPLY_OK(&w.st, meta_cmd_create_topic, "b", 3, 2, NULL);
  uint32_t held = replicas_on(&w, 3);
  assert_true(held > 0);
  APPLY_OK(&w.st, meta_cmd_set_node_state, 3, META_NODE_DRAINING, 0, 0);
  /* No delay for a drain: additions at once, removals once caught up. */
  world_report_all_caught_up(&w);
  assert_int_equal(world_step(&w), held);
  assert_int_equal(replicas_on(&w, 3), held);
  world_report_all_caught_up(&w);
  assert_int_equal(world_step(&w), held);
  assert_int_equal(replicas_on(&w, 3), 0);
  assert_int_equal(node_state(&w, 3), META_NODE_DRAINING);
  assert_fully_replicated_without(&w, 3);
  /* Empty: REMOVED. */
  assert_int_equal(world_step(&w), 1);
  assert_int_equal(node_state(&w, 3), META_NODE_REMOVED);
  world_report_all_caught_up(&w);
  assert_int_equal(world_step(&w), 0);
  /* The load of the other four nodes stays even-ish. */
  for (uint64_t id = 1; id <= 5; id++)
    if (id != 3)
      assert_true(replicas_on(&w, id) >= 5 && replicas_on(&w, id) <= 7);
  meta_state_close(&w.st);
}

static void test_meta_plan_node_back_in_time_keeps_its_replicas(void **state)
{
  struct world w;
  world_init(&w, 4);
  APPLY_OK(&w.st, meta_cmd_create_topic, "t", 4, 3, NULL);
  world_report_all_caught_up(&w);
  uint32_t held = replicas_on(&w, 2);
  world_live(&w, 2)->ms_since_heartbeat = 30000;
  assert_int_equal(world_step(&w), 1);
  assert_int_equal(node_state(&w, 2), META_NODE_DEAD);
  world_live(&w, 2)->ms_since_heartbeat = 20;
  assert_int_equal(world_step(&w), 1);
  assert_int_equal(node_state(&w, 2), META_NODE_ALIVE);
  assert_int_equal(replicas_on(&w, 2), held);
  assert_int_equal(world_step(&w), 0);
  meta_state_close(&w.st);
}

static void test_meta_plan_node_back_after_the_addition_trims_the_extra(void **state)
{
  struct world w;
  world_init(&w, 4);
  APPLY_OK(&w.st, meta_cmd_create_topic, "t", 1, 3, NULL);
  const struct meta_partition *p = meta_partition_find(&w.st, 1, 0);
  uint64_t victim = p->replicas[1];
  uint64_t outsider = 10 - p->replicas[0] - p->replicas[1] - p->replicas[2];
  world_live(&w, victim)->ms_since_heartbeat = 100000;
  assert_int_equal(world_step(&w), 1); /* DEAD */
  assert_int_equal(world_step(&w), 1); /* long past the delay: the addition */
  p = meta_partition_find(&w.st, 1, 0);
  assert_int_equal(p->nreplicas, 4);
  assert_int_equal(p->replicas[3], outsider);
  /* It comes back before the removal: ALIVE, and the partition, now over
   * rf with nobody leaving, drops its newest replica once caught up. */
  world_live(&w, victim)->ms_since_heartbeat = 10;
  assert_int_equal(world_step(&w), 1);
  assert_int_equal(node_state(&w, victim), META_NODE_ALIVE);
  world_report_all_caught_up(&w);
  assert_int_equal(world_step(&w), 1);
  p = meta_partition_find(&w.st, 1, 0);
  assert_int_equal(p->nreplicas, 3);
  assert_true(meta_replicas_contain(p->replicas, 3, victim));
  assert_false(meta_replicas_contain(p->replicas, 3, outsider));
  meta_state_close(&w.st);
}

static void test_meta_plan_waits_when_no_node_can_take_the_replica(void **state)
{
  struct world w;
  world_init(&w, 3);
  APPLY_OK(&w.st, meta_cmd_create_topic, "t", 3, 3, NULL);
  world_report_all_caught_up(&w);
  world_live(&w, 3)->ms_since_heartbeat = 1000000;
  assert_int_equal(world_step(&w), 1); /* DEAD; nowhere to move its replicas */
  assert_int_equal(world_step(&w), 0);
  assert_int_equal(replicas_on(&w, 3), 3); /* not removed: no quorum lost for nothing */
  /* A fourth node joins: the moves start. */
  struct meta_node_info info = {4, 104, "h:1", "h:2", "", "", NULL, NULL, 0};
  APPLY_OK(&w.st, meta_cmd_register_node, &info, 0);
  w.live[w.nlive++] = (struct meta_plan_liveness){4, 104, 0};
  assert_int_equal(world_step(&w), 3);
  world_report_all_caught_up(&w);
  assert_int_equal(world_step(&w), 3);
  assert_fully_replicated_without(&w, 3);
  meta_state_close(&w.st);
}

static void test_meta_plan_output_is_bounded(void **state)
{
  struct world w;
  world_init(&w, 4);
  APPLY_OK(&w.st, meta_cmd_create_topic, "t", 40, 3, NULL);
  APPLY_OK(&w.st, meta_cmd_set_node_state, 1, META_NODE_DRAINING, 0, 0);
  w.opts.max_commands = 5;
  size_t total = 0, steps = 0, n;
  while ((n = world_step(&w)) > 0) {
    assert_true(n <= 5);
    total += n;
    steps++;
    world_report_all_caught_up(&w);
  }
  /* 30 additions, 30 removals, REMOVED. */
  assert_int_equal(total, 61);
  assert_int_equal(steps, 13);
  assert_int_equal(node_state(&w, 1), META_NODE_REMOVED);
  meta_state_close(&w.st);
}

static void test_meta_plan_limits_moves_in_flight(void **state)
{
  struct world w;
  world_init(&w, 4);
  APPLY_OK(&w.st, meta_cmd_create_topic, "t", 40, 3, NULL);
  APPLY_OK(&w.st, meta_cmd_set_node_state, 1, META_NODE_DRAINING, 0, 0);
  w.opts.max_moves = 4;
  /* Nothing catches up: 4 additions, then nothing more, run after run. */
  assert_int_equal(world_step(&w), 4);
  assert_int_equal(world_step(&w), 0);
  world_report_newest_not_caught_up(&w);
  assert_int_equal(world_step(&w), 0);
  /* Caught up: the 4 removals finish those moves, and the next run may
   * start 4 more. */
  world_report_all_caught_up(&w);
  assert_int_equal(world_step(&w), 4);
  assert_int_equal(replicas_on(&w, 1), 26);
  assert_int_equal(world_step(&w), 4);
  size_t over = 0;
  for (uint32_t p = 0; p < 40; p++)
    over += meta_partition_find(&w.st, 1, p)->nreplicas > 3;
  assert_int_equal(over, 4);
  /* The default bounds it too. */
  struct meta_plan_opts o;
  meta_plan_opts_default(&o);
  assert_int_equal(o.max_moves, 16);
  meta_state_close(&w.st);
}

/* Two replicas of one partition leaving under a move limit of 1: the
 * second addition continues the move in progress instead of waiting for a
 * removal that cannot come first. */
static void test_meta_plan_move_limit_lets_a_move_in_progress_finish(void **state)
{
  struct world w;
  world_init(&w, 5);
  APPLY_OK(&w.st, meta_cmd_create_topic, "t", 1, 3, NULL);
  const struct meta_partition *p = meta_partition_find(&w.st, 1, 0);
  uint64_t a = p->replicas[1], b = p->replicas[2];
  APPLY_OK(&w.st, meta_cmd_set_node_state, a, META_NODE_DRAINING, 0, 0);
  APPLY_OK(&w.st, meta_cmd_set_node_state, b, META_NODE_DRAINING, 0, 0);
  w.opts.max_moves = 1;
  for (int round = 0; round < 10; round++) {
    world_report_all_caught_up(&w);
    if (world_step(&w) == 0)
      break;
  }
  assert_int_equal(node_state(&w, a), META_NODE_REMOVED);
  assert_int_equal(node_state(&w, b), META_NODE_REMOVED);
  assert_fully_replicated_without(&w, a);
  meta_state_close(&w.st);
}

/* Random kills, revivals and drains with a leader that proposes what the
 * planner says and partitions that catch up at once: whenever the chaos
 * stops, the cluster converges to full replication on ALIVE nodes. */
static void test_meta_plan_random_failures_converge(void **state)
{
  uint64_t seed = tu_seed("test_meta_plan_random_failures_converge");
  uint64_t rnd = seed | 1;
  size_t planned = 0;
  for (int run = 0; run < 30; run++) {
    struct world w;
    world_init(&w, 7);
    APPLY_OK(&w.st, meta_cmd_create_topic, "a", 12, 3, NULL);
    APPLY_OK(&w.st, meta_cmd_create_topic, "b", 5, 2, NULL);
    APPLY_OK(&w.st, meta_cmd_create_topic, "c", 3, 1, NULL);
    w.opts.max_moves = tu_rand(&rnd) % 6; /* 0 = no limit */
    int drains = 0;
    for (int tick = 0; tick < 60; tick++) {
      uint64_t id = 1 + tu_rand(&rnd) % 7;
      struct meta_plan_liveness *l = world_live(&w, id);
      switch (tu_rand(&rnd) % 6) {
      case 0: /* goes silent for a while */
        l->ms_since_heartbeat += 20000 + tu_rand(&rnd) % 80000;
        break;
      case 1: /* heard again */
        l->ms_since_heartbeat = 0;
        break;
      case 2: /* an operator drains it (at most two, so rf 3 still fits) */
        if (drains < 2 && node_state(&w, id) == META_NODE_ALIVE) {
          APPLY_OK(&w.st, meta_cmd_set_node_state, id, META_NODE_DRAINING, 0, 0);
          drains++;
        }
        break;
      default:
        break;
      }
      if (tu_rand(&rnd) % 2)
        world_report_all_caught_up(&w);
      planned += world_step(&w);
    }
    /* Chaos over: everyone not drained is heard; time passes. */
    for (size_t i = 0; i < w.nlive; i++)
      w.live[i].ms_since_heartbeat = 0;
    for (int round = 0; round < 200; round++) {
      world_report_all_caught_up(&w);
      if (world_step(&w) == 0)
        break;
    }
    world_report_all_caught_up(&w);
    assert_int_equal(world_step(&w), 0);
    for (uint64_t id = 1; id <= 7; id++) {
      enum meta_node_state s = node_state(&w, id);
      assert_true(s == META_NODE_ALIVE || s == META_NODE_REMOVED);
    }
    assert_fully_replicated_without(&w, 0);
    meta_state_close(&w.st);
  }
  printf("%zu commands planned and applied during the failures\n", planned);
  assert_true(planned > 100);
}

int main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_meta_plan_quiet_cluster_proposes_nothing),
      cmocka_unit_test(test_meta_plan_marks_a_silent_node_dead_and_back),
      cmocka_unit_test(test_meta_plan_moves_a_dead_nodes_replicas_after_the_delay),
      cmocka_unit_test(test_meta_plan_run_twice_before_apply_is_harmless),
      cmocka_unit_test(test_meta_plan_drains_a_node_then_removes_it),
      cmocka_unit_test(test_meta_plan_moves_postgresql_replicas_only_to_nodes_with_a_database),
      cmocka_unit_test(test_meta_plan_node_back_in_time_keeps_its_replicas),
      cmocka_unit_test(test_meta_plan_node_back_after_the_addition_trims_the_extra),
      cmocka_unit_test(test_meta_plan_waits_when_no_node_can_take_the_replica),
      cmocka_unit_test(test_meta_plan_output_is_bounded),
      cmocka_unit_test(test_meta_plan_limits_moves_in_flight),
      cmocka_unit_test(test_meta_plan_move_limit_lets_a_move_in_progress_finish),
      cmocka_unit_test(test_meta_plan_random_failures_converge),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
