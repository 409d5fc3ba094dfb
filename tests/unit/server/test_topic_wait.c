/* test_topic_wait.c - twait_topic_ready: a new topic is ready when every
 * partition has a leader registered in the metadata, and that leader is
 * the preferred replica unless the preferred replica's node is not alive;
 * a topic this node has not applied yet is not ready. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "server/topic_wait.h"

#define NPARTS 3

struct fixture {
  struct meta_state st;
  struct meta_node nodes[3];
  struct meta_topic topic;
  struct meta_partition parts[NPARTS];
};

/* Three alive nodes; topic 7 of NPARTS partitions, partition k preferring
 * node k + 1, with no leader yet. */
static void fixture_init(struct fixture *f)
{
  memset(f, 0, sizeof *f);
  for (int i = 0; i < 3; i++) {
    f->nodes[i].id = (uint64_t)i + 1;
    f->nodes[i].state = META_NODE_ALIVE;
  }
  for (uint32_t k = 0; k < NPARTS; k++) {
    struct meta_partition *p = &f->parts[k];
    p->nreplicas = 3;
    for (uint32_t r = 0; r < 3; r++) {
      p->replicas[r] = (k + r) % 3 + 1;
    }
  }
  f->topic.id = 7;
  strcpy(f->topic.name, "t");
  f->topic.replication_factor = 3;
  f->topic.partitions = f->parts;
  f->topic.npartitions = NPARTS;
  f->st.nodes = f->nodes;
  f->st.nnodes = 3;
  f->st.topics = &f->topic;
  f->st.ntopics = 1;
}

static void test_twait_ready_needs_every_partition_led_by_its_preferred_replica(void **state)
{
  (void)state;
  struct fixture f;
  fixture_init(&f);
  assert_false(twait_topic_ready(&f.st, 7)); /* no leaders yet */
  for (uint32_t k = 0; k < NPARTS; k++) {
    f.parts[k].leader_id = f.parts[k].replicas[0];
  }
  assert_true(twait_topic_ready(&f.st, 7));
  f.parts[1].leader_id = 0; /* one partition still without a leader */
  assert_false(twait_topic_ready(&f.st, 7));
  assert_int_equal(twait_topic_stage(&f.st, 7), TWAIT_UNLED);
  f.parts[1].leader_id = f.parts[1].replicas[2]; /* led elsewhere: a hand-over is coming */
  assert_false(twait_topic_ready(&f.st, 7));
  assert_int_equal(twait_topic_stage(&f.st, 7), TWAIT_LED); /* enough at the deadline */
}

static void test_twait_ready_takes_any_leader_when_the_preferred_node_is_not_alive(void **state)
{
  (void)state;
  struct fixture f;
  fixture_init(&f);
  for (uint32_t k = 0; k < NPARTS; k++) {
    f.parts[k].leader_id = f.parts[k].replicas[0];
  }
  uint64_t preferred = f.parts[2].replicas[0];
  f.parts[2].leader_id = f.parts[2].replicas[1];
  assert_false(twait_topic_ready(&f.st, 7));
  f.nodes[preferred - 1].state = META_NODE_DEAD;
  assert_true(twait_topic_ready(&f.st, 7));
}

static void test_twait_ready_is_false_for_a_topic_not_applied_here(void **state)
{
  (void)state;
  struct fixture f;
  fixture_init(&f);
  for (uint32_t k = 0; k < NPARTS; k++) {
    f.parts[k].leader_id = f.parts[k].replicas[0];
  }
  assert_false(twait_topic_ready(&f.st, 8));
  f.st.ntopics = 0;
  assert_false(twait_topic_ready(&f.st, 7));
}

int main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_twait_ready_needs_every_partition_led_by_its_preferred_replica),
      cmocka_unit_test(test_twait_ready_takes_any_leader_when_the_preferred_node_is_not_alive),
      cmocka_unit_test(test_twait_ready_is_false_for_a_topic_not_applied_here),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
