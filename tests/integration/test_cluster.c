/* test_cluster.c - cairnd and the metadata group with real processes on
 * loopback: a cluster forms from empty data dirs, topics are placed evenly,
 * the controller survives the loss of its leader, a dead node's replicas
 * are re-placed and hold the whole log, a node joins and takes new
 * partitions, a decommissioned node is drained, a restart of everything
 * keeps metadata and data, a partition leader's configuration change cut
 * short by a new leader is rolled back (paused or SIGKILLed in its window)
 * and the move completes, and bad identities and topic requests are
 * refused with clear messages.
 *
 * Usage: test_cluster <path of cairnd> <path of cairn-log>
 * CAIRN_TEST_FILTER='*replaced*' runs a subset; CAIRN_KEEP_TEST_DIR=1 keeps
 * the data dirs and node logs. */
#include "cairnd.h"
#include "format/batch.h"
#include "proc.h"
#include "testutil.h"

#include <inttypes.h>
#include <limits.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>
#include <dirent.h>

#define WAIT_MS 30000
#define FAST "--heartbeat-ms 100 --election-ms 1000 --node-timeout-ms 2000 --replace-delay-ms 2000"
#define MAX_ACKED 1024

static const char *cairnd_bin;
static const char *cairn_log_bin;

/* ---- acknowledged batches ---- */

struct acked {
  char topic[64];
  uint32_t partition;
  int64_t offset;
  uint64_t tag;
  size_t vsize; /* of each of its BATCH_RECORDS values */
};

static struct acked acked[MAX_ACKED];
static int nacked;
static uint64_t next_tag = 1;

#define BATCH_RECORDS 3
#define BATCH_VALUE 40

/* Produces one batch of BATCH_RECORDS values of vsize bytes and records
 * it: it must be acknowledged. */
static void produce_sized(struct cd_cluster *c, const char *topic, uint32_t partition,
                          size_t vsize)
{
  size_t len = 0;
  uint64_t tag = next_tag++;
  uint8_t *b = tu_make_batch(tag, BATCH_RECORDS, vsize, 1000 + (int64_t)tag, &len);
  int64_t base = -1;
  int rv = cd_produce(c, topic, partition, b, len, WAIT_MS, &base);
  free(b);
  if (rv != 0) {
    fail_msg("produce to %s-%u: wire code %d", topic, partition, rv);
  }
  assert_true(nacked < MAX_ACKED);
  struct acked *a = &acked[nacked++];
  snprintf(a->topic, sizeof a->topic, "%s", topic);
  a->partition = partition;
  a->offset = base;
  a->tag = tag;
  a->vsize = vsize;
}

static void produce_one(struct cd_cluster *c, const char *topic, uint32_t partition)
{
  produce_sized(c, topic, partition, BATCH_VALUE);
}

/* Every acknowledged batch is at its offset, read from the partition's
 * leader. */
static void check_acked(struct cd_cluster *c)
{
  for (int i = 0; i < nacked; i++) {
    const struct acked *a = &acked[i];
    uint8_t *data = NULL;
    size_t len = 0;
    int64_t hw = -1;
    int rv = cd_fetch(c, a->topic, a->partition, a->offset, 1 << 20, WAIT_MS, &data, &len, &hw);
    if (rv != 0) {
      fail_msg("fetch %s-%u@%" PRId64 ": wire code %d", a->topic, a->partition, a->offset, rv);
    }
    assert_true(len > 0);
    /* The first batch returned is the one acknowledged at that offset. */
    size_t size = 0;
    int err = 0;
    assert_int_equal(batch_probe(data, len, len, &size, &err), BATCH_PROBE_OK);
    if (tu_check_batch(data, size, a->tag, BATCH_RECORDS, a->vsize) != 0) {
      fail_msg("%s-%u@%" PRId64 " does not hold batch %" PRIu64, a->topic, a->partition,
               a->offset, a->tag);
    }
    free(data);
  }
}

/* ---- metadata helpers ---- */

struct md {
  Cairn__Client__Envelope *env;
  Cairn__Client__MetadataResponse *m;
};

static bool md_get(struct cd_cluster *c, int i, struct md *md)
{
  md->env = NULL;
  md->m = cd_metadata(c, i, &md->env);
  return md->m != NULL;
}

static void md_free(struct md *md)
{
  if (md->env != NULL) {
    cairn__client__envelope__free_unpacked(md->env, NULL);
  }
  md->env = NULL;
  md->m = NULL;
}

static const Cairn__Client__TopicInfo *md_topic(const struct md *md, const char *name)
{
  for (size_t t = 0; t < md->m->n_topics; t++) {
    if (strcmp(md->m->topics[t]->name, name) == 0) {
      return md->m->topics[t];
    }
  }
  return NULL;
}

static const char *md_node_state(const struct md *md, uint64_t id)
{
  for (size_t k = 0; k < md->m->n_nodes; k++) {
    if (md->m->nodes[k]->id == id) {
      return md->m->nodes[k]->state;
    }
  }
  return "absent";
}

/* Metadata from node i once it shows topic (a node's copy of the metadata
 * follows the controller's by a heartbeat or so). */
static const Cairn__Client__TopicInfo *md_wait_topic(struct cd_cluster *c, int i, const char *name,
                                                     struct md *md)
{
  long long end = tu_now_ms() + WAIT_MS;
  while (tu_now_ms() < end) {
    if (md_get(c, i, md)) {
      const Cairn__Client__TopicInfo *ti = md_topic(md, name);
      if (ti != NULL) {
        return ti;
      }
      md_free(md);
    }
    usleep(50 * 1000);
  }
  fail_msg("node %d never showed topic %s", i + 1, name);
  return NULL;
}

static int running_node(struct cd_cluster *c)
{
  for (int i = 0; i < c->n; i++) {
    if (cd_running(c, i)) {
      return i;
    }
  }
  return -1;
}

/* Waits until every partition of topic has a reported leader. */
static void wait_leaders(struct cd_cluster *c, const char *topic)
{
  long long end = tu_now_ms() + WAIT_MS;
  while (tu_now_ms() < end) {
    struct md md;
    bool ok = false;
    if (md_get(c, running_node(c), &md)) {
      const Cairn__Client__TopicInfo *ti = md_topic(&md, topic);
      ok = ti != NULL && ti->n_partitions > 0;
      for (size_t p = 0; ok && p < ti->n_partitions; p++) {
        ok = ti->partitions[p]->leader_id != 0;
      }
    }
    md_free(&md);
    if (ok) {
      return;
    }
    usleep(100 * 1000);
  }
  fail_msg("topic %s: not every partition reported a leader", topic);
}

static void start_all(struct cd_cluster *c)
{
  uint64_t ids[CD_MAX_NODES];
  for (int i = 0; i < c->n; i++) {
    assert_int_equal(cd_start(c, i), 0);
    ids[i] = c->nodes[i].id;
  }
  if (cd_wait_alive(c, 0, ids, (size_t)c->n, WAIT_MS) != 0) {
    fail_msg("the cluster did not form: see %s", c->root);
  }
}

/* A cluster of n voters (FAST timings) with topic `name` of parts
 * partitions at replication factor rf, every partition led. */
static void start_with_topic(struct cd_cluster *c, int n, const char *name, uint32_t parts, int rf)
{
  nacked = 0; /* a new cluster: nothing acknowledged (a failed test may have left some) */
  assert_int_equal(cd_init(c, cairnd_bin, n, n, FAST), 0);
  start_all(c);
  char msg[256];
  assert_int_equal(cd_create_topic(c, 0, name, parts, rf, WAIT_MS, msg, sizeof msg), 0);
  wait_leaders(c, name);
}

/* One acknowledged batch to each of topic's first parts partitions. */
static void produce_each(struct cd_cluster *c, const char *topic, uint32_t parts)
{
  for (uint32_t p = 0; p < parts; p++) {
    produce_one(c, topic, p);
  }
}

/* Does <node dir>/partitions hold an entry starting with prefix? */
static bool dir_has_prefix(const char *node_dir, const char *prefix)
{
  char path[700];
  snprintf(path, sizeof path, "%s/partitions", node_dir);
  DIR *d = opendir(path);
  if (d == NULL) {
    return false;
  }
  bool found = false;
  struct dirent *de;
  while ((de = readdir(d)) != NULL) {
    found = found || strncmp(de->d_name, prefix, strlen(prefix)) == 0;
  }
  closedir(d);
  return found;
}

/* Deletes topic "doomed" through node i. Returns the wire code. */
static int cd_delete_topic(struct cd_cluster *c, int i, int timeout_ms)
{
  long long end = tu_now_ms() + timeout_ms;
  int code = -1;
  while (tu_now_ms() < end) {
    Cairn__Client__DeleteTopicRequest r = CAIRN__CLIENT__DELETE_TOPIC_REQUEST__INIT;
    r.name = "doomed";
    Cairn__Client__Envelope env = CAIRN__CLIENT__ENVELOPE__INIT;
    env.api = CAIRN__CLIENT__API__API_DELETE_TOPIC;
    env.body_case = CAIRN__CLIENT__ENVELOPE__BODY_DELETE_TOPIC_REQ;
    env.delete_topic_req = &r;
    Cairn__Client__Envelope *resp = NULL;
    if (cd_call(c, i, &env, NULL, 0, 5000, &resp, NULL, NULL) == 0) {
      code = resp->body_case == CAIRN__CLIENT__ENVELOPE__BODY_DELETE_TOPIC_RESP &&
                     resp->delete_topic_resp->error != NULL
                 ? (int)resp->delete_topic_resp->error->code
                 : resp->body_case == CAIRN__CLIENT__ENVELOPE__BODY_DELETE_TOPIC_RESP ? 0 : -1;
      cairn__client__envelope__free_unpacked(resp, NULL);
      if (code != CAIRN__CLIENT__ERROR_CODE__NOT_CONTROLLER) {
        return code;
      }
    }
    usleep(100 * 1000);
  }
  return code;
}

static int exit_code_of(int status) { return WIFEXITED(status) ? WEXITSTATUS(status) : -1; }

/* Waits for node i, signalled to stop, to exit 0 (fails the test if it
 * does not within WAIT_MS; then it is killed). */
static void wait_clean_exit(struct cd_cluster *c, int i)
{
  int st = tu_proc_wait(&c->nodes[i].proc, WAIT_MS);
  if (st == -1) {
    tu_proc_kill(&c->nodes[i].proc);
  }
  if (exit_code_of(st) != 0) {
    fail_msg("node %d did not stop cleanly (wait status %d): see %s", i + 1, st, c->nodes[i].log);
  }
}

/* Asks node i to decommission node id, until it is accepted (the node
 * forwards it to the controller, which may be electing); fails the test
 * after WAIT_MS. */
static void decommission(struct cd_cluster *c, int i, uint64_t id)
{
  Cairn__Client__DecommissionNodeRequest dr = CAIRN__CLIENT__DECOMMISSION_NODE_REQUEST__INIT;
  dr.node_id = id;
  Cairn__Client__Envelope env = CAIRN__CLIENT__ENVELOPE__INIT;
  env.api = CAIRN__CLIENT__API__API_DECOMMISSION_NODE;
  env.body_case = CAIRN__CLIENT__ENVELOPE__BODY_DECOMMISSION_REQ;
  env.decommission_req = &dr;
  long long end = tu_now_ms() + WAIT_MS;
  while (tu_now_ms() < end) {
    Cairn__Client__Envelope *resp = NULL;
    bool done = false;
    if (cd_call(c, i, &env, NULL, 0, 5000, &resp, NULL, NULL) == 0) {
      done = resp->body_case == CAIRN__CLIENT__ENVELOPE__BODY_DECOMMISSION_RESP &&
             (resp->decommission_resp->error == NULL || resp->decommission_resp->error->code == 0);
      cairn__client__envelope__free_unpacked(resp, NULL);
    }
    if (done) {
      return;
    }
    usleep(200 * 1000);
  }
  fail_msg("node %d did not accept decommissioning node %llu: see %s", i + 1,
           (unsigned long long)id, c->root);
}

/* Waits (60 s) until node `ask` shows node id removed and in none of
 * topic's partitions, each of which has rf replicas, all in sync, and a
 * leader; fails the test otherwise. */
static void wait_drained(struct cd_cluster *c, int ask, uint64_t id, const char *topic)
{
  long long end = tu_now_ms() + 60000;
  while (tu_now_ms() < end) {
    usleep(200 * 1000);
    struct md md;
    if (!md_get(c, ask, &md)) {
      continue;
    }
    bool drained = strcmp(md_node_state(&md, id), "removed") == 0;
    const Cairn__Client__TopicInfo *ti = md_topic(&md, topic);
    for (size_t p = 0; drained && ti != NULL && p < ti->n_partitions; p++) {
      const Cairn__Client__PartitionInfo *pi = ti->partitions[p];
      drained = pi->leader_id != 0 && pi->n_replicas == ti->replication_factor &&
                pi->n_isr == pi->n_replicas;
      for (size_t r = 0; drained && r < pi->n_replicas; r++) {
        drained = pi->replicas[r] != id;
      }
    }
    md_free(&md);
    if (drained) {
      return;
    }
  }
  fail_msg("node %llu was not drained from %s: see %s", (unsigned long long)id, topic, c->root);
}

/* ---- tests ---- */

/* Three voters form a cluster from empty dirs; a 6-partition, rf 3 topic is
 * placed evenly (6 replicas and 2 preferred leaderships per node); bad
 * topic requests are refused and create nothing; the controller survives
 * the loss of its leader; a full restart keeps metadata and data. */
static void test_cluster_forms_places_evenly_and_survives_restarts(void **state)
{
  struct cd_cluster c;
  assert_int_equal(cd_init(&c, cairnd_bin, 3, 3, FAST), 0);
  start_all(&c);
  char msg[256];
  assert_int_equal(cd_create_topic(&c, 1, "orders", 6, 3, WAIT_MS, msg, sizeof msg), 0);

  struct md md;
  const Cairn__Client__TopicInfo *ti = md_wait_topic(&c, 2, "orders", &md);
  assert_int_equal(ti->n_partitions, 6);
  int replicas[4] = {0}, preferred[4] = {0};
  for (size_t p = 0; p < ti->n_partitions; p++) {
    const Cairn__Client__PartitionInfo *pi = ti->partitions[p];
    assert_int_equal(pi->n_replicas, 3);
    assert_true(pi->replicas[0] != pi->replicas[1] && pi->replicas[1] != pi->replicas[2] &&
                pi->replicas[0] != pi->replicas[2]);
    for (size_t r = 0; r < pi->n_replicas; r++) {
      replicas[pi->replicas[r]]++;
    }
    preferred[pi->replicas[0]]++;
  }
  for (int id = 1; id <= 3; id++) {
    assert_int_equal(replicas[id], 6);
    assert_int_equal(preferred[id], 2);
  }
  md_free(&md);

  /* Refused, nothing created. */
  assert_int_equal(cd_create_topic(&c, 0, "bad name!", 1, 1, WAIT_MS, msg, sizeof msg),
                   CAIRN__CLIENT__ERROR_CODE__INVALID_TOPIC);
  assert_int_equal(cd_create_topic(&c, 0, "zero-rf", 1, 0, WAIT_MS, msg, sizeof msg),
                   CAIRN__CLIENT__ERROR_CODE__INVALID_REPLICATION_FACTOR);
  assert_int_equal(cd_create_topic(&c, 2, "too-many", 1, 4, WAIT_MS, msg, sizeof msg),
                   CAIRN__CLIENT__ERROR_CODE__INVALID_REPLICATION_FACTOR);
  assert_non_null(strstr(msg, "3"));
  assert_int_equal(cd_create_topic(&c, 0, "no-parts", 0, 1, WAIT_MS, msg, sizeof msg),
                   CAIRN__CLIENT__ERROR_CODE__INVALID_PARTITIONS);
  assert_int_equal(cd_create_topic(&c, 0, "orders", 6, 3, WAIT_MS, msg, sizeof msg),
                   CAIRN__CLIENT__ERROR_CODE__TOPIC_EXISTS);
  assert_true(md_get(&c, 0, &md));
  assert_int_equal(md.m->n_topics, 1);
  md_free(&md);

  wait_leaders(&c, "orders");
  for (uint32_t p = 0; p < 6; p++) {
    for (int k = 0; k < 4; k++) {
      produce_one(&c, "orders", p);
    }
  }

  /* Kill the controller leader: another takes over, topics still get made. */
  assert_true(md_get(&c, 0, &md));
  uint64_t ctl_id = md.m->controller_id;
  md_free(&md);
  assert_true(ctl_id >= 1 && ctl_id <= 3);
  int victim = cd_index(&c, ctl_id);
  cd_kill(&c, victim);
  int other = (victim + 1) % 3;
  assert_int_equal(cd_create_topic(&c, other, "after", 3, 3, WAIT_MS, msg, sizeof msg), 0);
  assert_true(md_get(&c, other, &md));
  assert_true(md.m->controller_id != ctl_id && md.m->controller_id != 0);
  md_free(&md);
  /* A deleted topic's groups and data go from every node. Created once
   * the killed node is marked dead, on the two alive nodes: "after"'s
   * answer may have waited for that (a partition whose preferred replica
   * was on the killed node is ready once that node is no longer alive,
   * src/server/topic_wait.h), and a node still alive in the metadata may
   * be given a replica. */
  long long dead_by = tu_now_ms() + WAIT_MS;
  bool dead = false;
  while (!dead && tu_now_ms() < dead_by) {
    if (md_get(&c, other, &md)) {
      dead = strcmp(md_node_state(&md, ctl_id), "dead") == 0;
      md_free(&md);
    }
    if (!dead) {
      usleep(100 * 1000);
    }
  }
  assert_true(dead);
  assert_int_equal(cd_create_topic(&c, other, "doomed", 2, 2, WAIT_MS, msg, sizeof msg), 0);
  wait_leaders(&c, "doomed");
  produce_one(&c, "doomed", 0);
  nacked--; /* not checked after the delete */
  assert_int_equal(cd_delete_topic(&c, other, WAIT_MS), 0);
  long long gone_by = tu_now_ms() + WAIT_MS;
  bool gone = false;
  while (!gone && tu_now_ms() < gone_by) {
    usleep(100 * 1000);
    gone = true;
    for (int i = 0; i < 3; i++) {
      if (i != victim) {
        gone = gone && !dir_has_prefix(c.nodes[i].dir, "doomed-");
      }
    }
  }
  assert_true(gone);
  assert_true(md_get(&c, other, &md));
  assert_null(md_topic(&md, "doomed"));
  md_free(&md);

  assert_int_equal(cd_start(&c, victim), 0);
  uint64_t all[3] = {1, 2, 3};
  assert_int_equal(cd_wait_alive(&c, victim, all, 3, WAIT_MS), 0);
  wait_leaders(&c, "after");
  produce_one(&c, "after", 1);

  /* A clean stop of everything, then a restart: same metadata, same data. */
  for (int i = 0; i < 3; i++) {
    assert_int_equal(exit_code_of(cd_term(&c, i, 30000)), 0);
  }
  start_all(&c);
  md_free(&md);
  md_wait_topic(&c, 1, "after", &md);
  assert_int_equal(md.m->n_topics, 2);
  ti = md_topic(&md, "orders");
  assert_non_null(ti);
  assert_int_equal(ti->n_partitions, 6);
  md_free(&md);
  wait_leaders(&c, "orders");
  check_acked(&c);
  nacked = 0;
  cd_destroy(&c);
}

/* A node that joins takes part in new topics; a dead node's replicas move
 * to live nodes after the delay and the new replicas hold the whole log;
 * a decommissioned node is drained and removed. */
static void test_cluster_dead_node_replaced_join_and_decommission(void **state)
{
  struct cd_cluster c;
  assert_int_equal(cd_init(&c, cairnd_bin, 4, 3, FAST), 0);
  start_all(&c); /* node 4 joins through node 1 */
  char msg[256];
  assert_int_equal(cd_create_topic(&c, 3, "events", 4, 3, WAIT_MS, msg, sizeof msg), 0);
  struct md md;
  const Cairn__Client__TopicInfo *ti = md_wait_topic(&c, 0, "events", &md);
  int on4 = 0;
  for (size_t p = 0; p < ti->n_partitions; p++) {
    for (size_t r = 0; r < ti->partitions[p]->n_replicas; r++) {
      on4 += ti->partitions[p]->replicas[r] == 4;
    }
  }
  assert_int_equal(on4, 3); /* 12 replicas over 4 nodes */
  md_free(&md);
  wait_leaders(&c, "events");
  for (uint32_t p = 0; p < 4; p++) {
    for (int k = 0; k < 5; k++) {
      produce_one(&c, "events", p);
    }
  }

  /* Node 3 dies: marked dead, then its replicas move to the others. */
  cd_kill(&c, 2);
  long long end = tu_now_ms() + 60000;
  bool moved = false;
  while (!moved && tu_now_ms() < end) {
    usleep(200 * 1000);
    if (!md_get(&c, 0, &md)) {
      continue;
    }
    ti = md_topic(&md, "events");
    moved = strcmp(md_node_state(&md, 3), "dead") == 0 && ti != NULL;
    for (size_t p = 0; moved && p < ti->n_partitions; p++) {
      const Cairn__Client__PartitionInfo *pi = ti->partitions[p];
      moved = pi->n_replicas == 3 && pi->n_isr == 3;
      for (size_t r = 0; moved && r < pi->n_replicas; r++) {
        moved = pi->replicas[r] != 3;
      }
    }
    md_free(&md);
  }
  if (!moved) {
    fail_msg("node 3's replicas were not re-placed: see %s", c.root);
  }
  for (uint32_t p = 0; p < 4; p++) {
    produce_one(&c, "events", p);
  }
  check_acked(&c);

  /* Node 3 comes back (holding nothing now); node 4 is decommissioned:
   * its replicas move to node 3 and it ends removed. */
  assert_int_equal(cd_start(&c, 2), 0);
  uint64_t all[4] = {1, 2, 3, 4};
  assert_int_equal(cd_wait_alive(&c, 0, all, 4, WAIT_MS), 0);
  decommission(&c, 1, 4);
  wait_drained(&c, 0, 4, "events");
  check_acked(&c);
  nacked = 0;
  cd_destroy(&c);
}

/* The controller leader dies. Nodes report to the controller only what
 * changed since the report it acknowledged, so the new leader (which holds
 * no report) must get a full one from each node: it learns every
 * partition's new leader, sees the configurations the re-placement of the
 * dead node's replicas waits for, and that re-placement completes. */
static void test_cluster_new_controller_learns_every_partition(void **state)
{
  struct cd_cluster c;
  assert_int_equal(cd_init(&c, cairnd_bin, 4, 3, FAST), 0);
  start_all(&c);
  char msg[256];
  assert_int_equal(cd_create_topic(&c, 0, "ctl", 6, 3, WAIT_MS, msg, sizeof msg), 0);
  wait_leaders(&c, "ctl");
  for (uint32_t p = 0; p < 6; p++) {
    produce_one(&c, "ctl", p);
  }
  struct md md;
  uint64_t ctl_id = 0;
  long long end = tu_now_ms() + WAIT_MS;
  while (ctl_id == 0 && tu_now_ms() < end) {
    if (md_get(&c, 3, &md)) {
      ctl_id = md.m->controller_id;
    }
    md_free(&md);
    if (ctl_id == 0) {
      usleep(100 * 1000);
    }
  }
  int victim = -1;
  for (int i = 0; i < c.n; i++) {
    victim = c.nodes[i].id == ctl_id ? i : victim;
  }
  assert_true(victim >= 0);
  /* Some seconds of deltas (nothing changes) before the kill. */
  usleep(2500 * 1000);
  cd_kill(&c, victim);

  end = tu_now_ms() + 60000;
  bool done = false;
  while (!done && tu_now_ms() < end) {
    usleep(200 * 1000);
    if (!md_get(&c, running_node(&c), &md)) {
      continue;
    }
    const Cairn__Client__TopicInfo *ti = md_topic(&md, "ctl");
    done = md.m->controller_id != 0 && md.m->controller_id != ctl_id &&
           strcmp(md_node_state(&md, ctl_id), "dead") == 0 && ti != NULL;
    for (size_t p = 0; done && p < ti->n_partitions; p++) {
      const Cairn__Client__PartitionInfo *pi = ti->partitions[p];
      done = pi->leader_id != 0 && pi->leader_id != ctl_id && pi->n_replicas == 3 &&
             pi->n_isr == 3;
      for (size_t r = 0; done && r < pi->n_replicas; r++) {
        done = pi->replicas[r] != ctl_id;
      }
    }
    md_free(&md);
  }
  if (!done) {
    fail_msg("after the controller leader (node %llu) died, its replicas were not re-placed "
             "or a partition's leader was not reported: see %s",
             (unsigned long long)ctl_id, c.root);
  }
  for (uint32_t p = 0; p < 6; p++) {
    produce_one(&c, "ctl", p);
  }
  check_acked(&c);
  nacked = 0;
  cd_destroy(&c);
}

/* A second process with a live node's id, and a data dir of another
 * cluster, are refused: the process exits 2 and says why. */
static void test_cluster_refuses_duplicate_id_and_foreign_data_dir(void **state)
{
  struct cd_cluster c;
  assert_int_equal(cd_init(&c, cairnd_bin, 3, 3, FAST), 0);
  start_all(&c);

  /* Another single-node cluster, to make a foreign data dir. */
  struct cd_cluster other;
  assert_int_equal(cd_init(&other, cairnd_bin, 1, 1, FAST), 0);
  assert_int_equal(cd_start(&other, 0), 0);
  uint64_t one = 1;
  assert_int_equal(cd_wait_alive(&other, 0, &one, 1, WAIT_MS), 0);
  assert_int_equal(exit_code_of(cd_term(&other, 0, 30000)), 0);

  /* Node id 2 again, joining: refused while node 2 lives. */
  int dup = cd_add_node(&c);
  assert_true(dup >= 0);
  c.nodes[dup].id = 2;
  assert_int_equal(cd_start(&c, dup), 0);
  int st = tu_proc_wait(&c.nodes[dup].proc, WAIT_MS);
  assert_int_equal(exit_code_of(st), 2);
  assert_true(tu_file_contains(c.nodes[dup].log, "in use"));

  /* The other cluster's node-1 data dir, joining as node 1 of this one. */
  int foreign = cd_add_node(&c);
  assert_true(foreign >= 0);
  c.nodes[foreign].id = 1;
  snprintf(c.nodes[foreign].dir, sizeof c.nodes[foreign].dir, "%s", other.nodes[0].dir);
  assert_int_equal(cd_start(&c, foreign), 0);
  st = tu_proc_wait(&c.nodes[foreign].proc, WAIT_MS);
  assert_int_equal(exit_code_of(st), 2);
  assert_true(tu_file_contains(c.nodes[foreign].log, "cluster"));

  /* A node given another controller voter list than the cluster's. */
  int wrong = cd_add_node(&c);
  assert_true(wrong >= 0);
  snprintf(c.nodes[wrong].extra, sizeof c.nodes[wrong].extra, "--voters 1@127.0.0.1:%d,2@127.0.0.1:%d",
           c.nodes[0].cluster_port, c.nodes[1].cluster_port);
  assert_int_equal(cd_start(&c, wrong), 0);
  st = tu_proc_wait(&c.nodes[wrong].proc, WAIT_MS);
  assert_int_equal(exit_code_of(st), 2);
  assert_true(tu_file_contains(c.nodes[wrong].log, "same voter list"));

  /* The cluster is unharmed. */
  uint64_t all[3] = {1, 2, 3};
  assert_int_equal(cd_wait_alive(&c, 0, all, 3, WAIT_MS), 0);
  cd_destroy(&other);
  cd_destroy(&c);
}

/* cairnd refuses a bad configuration with exit code 2 and a message. */
static void test_cluster_bad_config_is_refused(void **state)
{
  struct tu_proc p = {0};
  char *root = tu_tmpdir("cairnd-cfg");
  char log[600];
  snprintf(log, sizeof log, "%s/out.log", root);
  char *argv[] = {(char *)cairnd_bin, "--node-id", "0", NULL};
  assert_int_equal(tu_proc_start(&p, argv, log), 0);
  assert_int_equal(exit_code_of(tu_proc_wait(&p, 10000)), 2);
  assert_true(tu_file_contains(log, "--node-id"));
  tu_tmpdir_free(root);
}

/* A node hosting many replicas with data stops cleanly on SIGTERM: its
 * raft instances close one at a time (canonical/raft 0.15 crashed when 4 or
 * more closed at once), after every leadership was handed off. */
static void test_cluster_sigterm_with_many_partitions_exits_cleanly(void **state)
{
  struct cd_cluster c;
  assert_int_equal(cd_init(&c, cairnd_bin, 1, 1, FAST), 0);
  start_all(&c);
  char msg[256];
  assert_int_equal(cd_create_topic(&c, 0, "many", 12, 1, WAIT_MS, msg, sizeof msg), 0);
  wait_leaders(&c, "many");
  for (uint32_t p = 0; p < 12; p++) {
    produce_one(&c, "many", p);
  }
  long long t0 = tu_now_ms();
  assert_int_equal(exit_code_of(cd_term(&c, 0, 30000)), 0);
  print_message("stop with 12 partitions: %lld ms\n", tu_now_ms() - t0);
  /* And it comes back with every batch. */
  start_all(&c);
  wait_leaders(&c, "many");
  check_acked(&c);
  nacked = 0;
  cd_destroy(&c);
}

/* Every node of a 3-node cluster SIGTERMed at once, twice. Each stops
 * cleanly (exit 0) without leaderships bouncing between stopping nodes
 * (their replicas refuse leadership: rgroup_handoff), the replicas close
 * unflushed and one syncfs per node follows; the second time node 2 is
 * SIGKILLed in the middle of its stop. Restarted, every acknowledged batch
 * is there. (At 10,000 partitions no node stopped within cairnd's 30 s
 * before: docs/performance.md.) */
static void test_cluster_all_nodes_stopped_at_once(void **state)
{
  enum { PARTS = 24 };
  struct cd_cluster c;
  start_with_topic(&c, 3, "all", PARTS, 3);
  for (int round = 0; round < 2; round++) {
    produce_each(&c, "all", PARTS);
    int handing0[3], synced0[3];
    for (int i = 0; i < 3; i++) {
      handing0[i] = tu_file_count(c.nodes[i].log, "handing leadership");
      synced0[i] = tu_file_count(c.nodes[i].log, "made durable by one syncfs");
      tu_proc_signal(&c.nodes[i].proc, SIGTERM);
    }
    if (round == 1) {
      usleep(30 * 1000);
      cd_kill(&c, 1);
    }
    for (int i = 0; i < 3; i++) {
      if (round == 1 && i == 1) {
        continue;
      }
      wait_clean_exit(&c, i);
      /* At most once per partition: none handed back and forth. */
      int handing = tu_file_count(c.nodes[i].log, "handing leadership") - handing0[i];
      print_message("round %d: node %d handed off %d leaderships\n", round, i + 1, handing);
      assert_true(handing <= PARTS);
      assert_int_equal(tu_file_count(c.nodes[i].log, "made durable by one syncfs"), synced0[i] + 1);
    }
    start_all(&c);
    wait_leaders(&c, "all");
    check_acked(&c);
  }
  nacked = 0;
  cd_destroy(&c);
}

/* How many of topic's partitions node i leads, and of those how many it
 * reports with n_isr in-sync replicas (its Metadata answer). */
static void isr_of_led(struct cd_cluster *c, int i, const char *topic, size_t n_isr, int *led,
                       int *with_n)
{
  *led = *with_n = 0;
  struct md md;
  if (!md_get(c, i, &md)) {
    return;
  }
  const Cairn__Client__TopicInfo *ti = md_topic(&md, topic);
  for (size_t p = 0; ti != NULL && p < ti->n_partitions; p++) {
    const Cairn__Client__PartitionInfo *pi = ti->partitions[p];
    if (pi->leader_id == c->nodes[i].id) {
      (*led)++;
      *with_n += pi->n_isr == n_isr;
    }
  }
  md_free(&md);
}

/* A leader's in-sync replicas stay every replica while its partitions sit
 * idle (quiet groups are kept by the node's coalesced beat, whose answers
 * count as hearing from a follower; raft clears its own flag at every
 * election timeout, so an idle leader showed only itself), and lose a
 * replica whose node is killed. */
static void test_cluster_idle_leaders_report_every_replica_in_sync(void **state)
{
  enum { PARTS = 6 };
  struct cd_cluster c;
  start_with_topic(&c, 3, "quiet", PARTS, 3);
  produce_each(&c, "quiet", PARTS);
  /* Idle for 8 s (quiet after ~2 s with FAST): every sample, every node. */
  int samples = 0, short_isr = 0;
  for (long long end = tu_now_ms() + 8000; tu_now_ms() < end; usleep(200 * 1000)) {
    for (int i = 0; i < 3; i++) {
      int led, full;
      isr_of_led(&c, i, "quiet", 3, &led, &full);
      samples += led;
      short_isr += led - full;
    }
  }
  print_message("%d leader samples, %d with fewer than 3 in sync\n", samples, short_isr);
  /* Before the fix 100 of 240 samples were short; a loop stalled for
   * over a second on a loaded machine may still cost a sample or two. */
  assert_true(samples > 0);
  assert_true(short_isr * 20 <= samples);
  /* Node 3 killed: the leaders left report 2 in sync within a few election
   * timeouts. */
  cd_kill(&c, 2);
  bool dropped = false;
  for (long long end = tu_now_ms() + WAIT_MS; !dropped && tu_now_ms() < end; usleep(200 * 1000)) {
    dropped = true;
    for (int i = 0; i < 2; i++) {
      int led, two;
      isr_of_led(&c, i, "quiet", 2, &led, &two);
      dropped = dropped && led > 0 && two == led;
    }
  }
  assert_true(dropped);
  nacked = 0;
  cd_destroy(&c);
}

/* Waits until every running node's node-wide log holds at most max_live
 * live bytes; returns whether it did within WAIT_MS. */
static bool wal_live_at_most(struct cd_cluster *c, long long max_live)
{
  for (long long end = tu_now_ms() + WAIT_MS; tu_now_ms() < end; usleep(200 * 1000)) {
    bool all = true;
    for (int i = 0; i < c->n && all; i++) {
      long long live = cd_metric(c->nodes[i].admin_port, "cairn_wal_bytes{kind=\"live\"}");
      all = !cd_running(c, i) || (live >= 0 && live <= max_live);
    }
    if (all) {
      return true;
    }
  }
  return false;
}

static void kill_all_and_restart(struct cd_cluster *c, const char *topic)
{
  for (int i = 0; i < c->n; i++) {
    cd_kill(c, i);
  }
  start_all(c);
  wait_leaders(c, topic);
  check_acked(c);
}

/* A group that goes quiet compacts its Raft log to one entry on every
 * replica (rgroup_compact.h), so the node-wide log drops what the
 * partition logs hold: its live bytes fall to a few hundred. Every node is
 * then SIGKILLed, at rest and, three times, while the groups go quiet
 * (the barrier, the snapshots and the log's cleaning in flight); each
 * time every acknowledged batch is back, once and in order. */
static void test_cluster_quiet_groups_compact_the_node_log(void **state)
{
  /* 40 batches of 6 KB per partition: above RGROUP_COMPACT_MIN_BYTES. */
  enum { PARTS = 3, PER_PART = 40, VSIZE = 2000 };
  struct cd_cluster c;
  start_with_topic(&c, 3, "q", PARTS, 3);
  for (int k = 0; k < PER_PART; k++) {
    for (uint32_t p = 0; p < PARTS; p++) {
      produce_sized(&c, "q", p, VSIZE);
    }
  }
  long long live = cd_metric(c.nodes[0].admin_port, "cairn_wal_bytes{kind=\"live\"}");
  print_message("node log live bytes after the writes: %lld\n", live);
  assert_true(live > 3 * 64 * 1024);
  /* Idle: compacted (a barrier and the configuration per group remain). */
  assert_true(wal_live_at_most(&c, 4096));
  long long compactions = 0;
  for (int i = 0; i < 3; i++) {
    compactions += cd_metric(c.nodes[i].admin_port, "cairn_raft_quiet_compactions_total");
  }
  assert_true(compactions >= PARTS);
  kill_all_and_restart(&c, "q");
  /* Killed while going quiet: FAST groups quiesce about 1-2 s after the
   * last write. */
  const int delays_ms[] = {800, 1600, 2400};
  for (int round = 0; round < 3; round++) {
    for (int k = 0; k < 12; k++) {
      for (uint32_t p = 0; p < PARTS; p++) {
        produce_sized(&c, "q", p, VSIZE);
      }
    }
    usleep((useconds_t)delays_ms[round] * 1000);
    kill_all_and_restart(&c, "q");
  }
  assert_true(wal_live_at_most(&c, 4096));
  /* Compacted replicas close cleanly (raft 0.15 double-freed an entry at
   * close after the trailing-0 attempt) and come back whole. */
  for (int i = 0; i < 3; i++) {
    tu_proc_signal(&c.nodes[i].proc, SIGTERM);
  }
  for (int i = 0; i < 3; i++) {
    wait_clean_exit(&c, i);
  }
  start_all(&c);
  wait_leaders(&c, "q");
  check_acked(&c);
  nacked = 0;
  cd_destroy(&c);
}

/* Waits until every node's estimate of its replicas' Raft entries in
 * memory is at most max and the nodes' leaders proposed at least
 * compactions quiet compactions; returns whether that was within ms. The
 * estimate is a node's sum at its last tick (every 500 ms). */
static bool raft_memory_compacted(struct cd_cluster *c, long long max, long long compactions,
                                  long long ms)
{
  for (long long end = tu_now_ms() + ms; tu_now_ms() < end; usleep(200 * 1000)) {
    bool all = true;
    long long k = 0;
    for (int i = 0; i < c->n && all; i++) {
      long long bytes = cd_metric(c->nodes[i].admin_port, "cairn_raft_log_memory_bytes");
      all = bytes >= 0 && bytes <= max;
      k += cd_metric(c->nodes[i].admin_port, "cairn_raft_quiet_compactions_total");
    }
    if (all && k >= compactions) {
      return true;
    }
  }
  return false;
}

/* Groups left idle below the quiet compaction's floor (48 KB each, under
 * RGROUP_COMPACT_MIN_BYTES) keep their entries in Raft's memory for as long
 * as they stay idle; under a node-wide budget below what they hold
 * (--raft-log-node-budget-bytes, rgroup_mem.h) the floor comes down, they
 * are compacted, each node's estimate falls under the budget, and every
 * acknowledged batch reads back. */
static void test_cluster_node_budget_compacts_small_quiet_logs(void **state)
{
  (void)state;
  enum { PARTS = 6, PER_PART = 8, VSIZE = 2000, BUDGET = 65536 };
  for (int bounded = 0; bounded < 2; bounded++) {
    struct cd_cluster c;
    nacked = 0;
    char flags[256];
    snprintf(flags, sizeof flags, "%s --raft-log-node-budget-bytes %d", FAST, bounded ? BUDGET : 0);
    assert_int_equal(cd_init(&c, cairnd_bin, 3, 3, flags), 0);
    start_all(&c);
    char msg[256];
    assert_int_equal(cd_create_topic(&c, 0, "m", PARTS, 3, WAIT_MS, msg, sizeof msg), 0);
    wait_leaders(&c, "m");
    for (int k = 0; k < PER_PART; k++) {
      for (uint32_t p = 0; p < PARTS; p++) {
        produce_sized(&c, "m", p, VSIZE);
      }
    }
    long long held = PARTS * PER_PART * BATCH_RECORDS * VSIZE * 3 / 4; /* 216 KB */
    if (!bounded) {
      long long compactions = 0;
      /* Quiet for 4 s, far longer than the FAST groups take to go quiet:
       * still held on every node. */
      usleep(4000 * 1000);
      for (int i = 0; i < c.n; i++) {
        long long bytes = cd_metric(c.nodes[i].admin_port, "cairn_raft_log_memory_bytes");
        print_message("node %d, no node budget: %lld bytes of entries held\n", i, bytes);
        assert_true(bytes > held);
        compactions += cd_metric(c.nodes[i].admin_port, "cairn_raft_quiet_compactions_total");
      }
      assert_int_equal(compactions, 0);
    } else {
      /* Each group's leader compacts it, and every node ends under the
       * budget. */
      assert_true(raft_memory_compacted(&c, BUDGET, PARTS, WAIT_MS));
      for (int i = 0; i < c.n; i++) {
        print_message("node %d, budget %d: %lld bytes of entries held\n", i, BUDGET,
                      cd_metric(c.nodes[i].admin_port, "cairn_raft_log_memory_bytes"));
      }
    }
    check_acked(&c);
    nacked = 0;
    cd_destroy(&c);
  }
}

/* ---- a configuration change cut short by a new leader ---- */

enum cut_how { CUT_PAUSED, CUT_KILLED };

/* The index of the first partition of topic whose followers hold at most
 * one controller voter (nodes [0, nvoters)) and not the controller's
 * leader: with both killed the controller still commits at once. Its
 * replicas go to a (the leader), b and f. */
static uint32_t pick_partition(struct cd_cluster *c, const char *topic, int *a, int *b, int *f)
{
  struct md md;
  const Cairn__Client__TopicInfo *ti = md_wait_topic(c, 0, topic, &md);
  for (size_t p = 0; p < ti->n_partitions; p++) {
    const Cairn__Client__PartitionInfo *pi = ti->partitions[p];
    if (pi->n_replicas != 3 || pi->leader_id == 0) {
      continue;
    }
    int fol[2], nf = 0, voters = 0;
    bool ctl = false;
    for (size_t r = 0; r < 3; r++) {
      if (pi->replicas[r] != pi->leader_id && nf < 2) {
        fol[nf++] = cd_index(c, pi->replicas[r]);
        voters += fol[nf - 1] < c->nvoters;
        ctl = ctl || pi->replicas[r] == md.m->controller_id;
      }
    }
    if (nf == 2 && voters <= 1 && !ctl && md.m->controller_id != 0) {
      *a = cd_index(c, pi->leader_id);
      *b = fol[0];
      *f = fol[1];
      md_free(&md);
      return (uint32_t)p;
    }
  }
  md_free(&md);
  fail_msg("no partition of %s has followers off the controller's majority: see %s", topic,
           c->root);
  return 0;
}

/* Waits until node `ask` shows partition p of topic led by node x or y. */
static void wait_led_by(struct cd_cluster *c, int ask, const char *topic, uint32_t p, int x, int y)
{
  long long end = tu_now_ms() + WAIT_MS;
  while (tu_now_ms() < end) {
    struct md md;
    uint64_t leader = 0;
    if (md_get(c, ask, &md)) {
      const Cairn__Client__TopicInfo *ti = md_topic(&md, topic);
      leader = ti != NULL && p < ti->n_partitions ? ti->partitions[p]->leader_id : 0;
    }
    md_free(&md);
    if (leader == c->nodes[x].id || leader == c->nodes[y].id) {
      return;
    }
    usleep(100 * 1000);
  }
  fail_msg("%s-%u: neither node %d nor %d took the lead: see %s", topic, p, x + 1, y + 1, c->root);
}

/* Waits until node i's log holds more than `before` lines with text. */
static void wait_log_count(struct cd_cluster *c, int i, const char *text, int before)
{
  long long end = tu_now_ms() + WAIT_MS;
  while (tu_file_count(c->nodes[i].log, text) <= before && tu_now_ms() < end) {
    usleep(20 * 1000);
  }
  if (tu_file_count(c->nodes[i].log, text) <= before) {
    fail_msg("no line '%s' in %s", text, c->nodes[i].log);
  }
}

/* A partition's leader appends a configuration change (a replica added,
 * for a decommission) that it cannot commit: its two followers were
 * SIGKILLed. It is paused (or SIGKILLed) in turn, the followers restart
 * and elect one of them, whose first entry replaces the change in the old
 * leader's log when it comes back. The group had gone quiet first, so its
 * Raft log was compacted past the committed configuration's entry: raft
 * 0.15 rolled such a change back by decoding that entry (a NULL one:
 * SIGSEGV), and after a restart it kept the truncated change as its
 * configuration (cluster/raftfix.h). Here the old leader rolls back to the
 * configuration it kept aside, the move completes, and every acknowledged
 * batch is on every replica, once, in order. (Paused followers would not
 * do: they read the change from their sockets when they resume.) */
static void change_cut_short(enum cut_how how)
{
  enum { PARTS = 8, PER_PART = 30, VSIZE = 2000 };
  struct cd_cluster c;
  nacked = 0;
  /* A leader that lost its followers keeps leading for an election
   * timeout: long enough for the controller to plan the move and the
   * leader to start it. Dead nodes' replicas stay put (no re-placement)
   * for the test's length. */
  assert_int_equal(cd_init(&c, cairnd_bin, 5, 3,
                           "--heartbeat-ms 100 --election-ms 4000 --node-timeout-ms 2000 "
                           "--replace-delay-ms 120000"),
                   0);
  start_all(&c);
  char msg[256];
  assert_int_equal(cd_create_topic(&c, 0, "cut", PARTS, 3, WAIT_MS, msg, sizeof msg), 0);
  assert_int_equal(cd_wait_settled(&c, "cut", WAIT_MS), 0);
  /* Above the quiet compaction's floor, then idle until compacted. */
  for (int k = 0; k < PER_PART; k++) {
    for (uint32_t p = 0; p < PARTS; p++) {
      produce_sized(&c, "cut", p, VSIZE);
    }
  }
  assert_true(raft_memory_compacted(&c, LLONG_MAX, PARTS, WAIT_MS));
  int a = 0, b = 0, f = 0; /* (set by pick_partition, or the test fails) */
  uint32_t p = pick_partition(&c, "cut", &a, &b, &f);
  print_message("cut-%u: leader node %d, followers %d and %d (killed); node %d decommissioned\n", p,
                a + 1, b + 1, f + 1, f + 1);
  char add[64];
  snprintf(add, sizeof add, "cut-%u: add replica", p);
  int adds = tu_file_count(c.nodes[a].log, add);
  const char *rolled = "replace an uncommitted configuration change";
  int rollbacks = tu_file_count(c.nodes[a].log, rolled);
  cd_kill(&c, b);
  cd_kill(&c, f);
  decommission(&c, a, c.nodes[f].id);
  wait_log_count(&c, a, add, adds);
  usleep(300 * 1000); /* the change reaches a's log (one synced write) */
  if (how == CUT_PAUSED) {
    tu_proc_signal(&c.nodes[a].proc, SIGSTOP);
  } else {
    cd_kill(&c, a);
  }
  assert_int_equal(cd_start(&c, b), 0);
  assert_int_equal(cd_start(&c, f), 0);
  wait_led_by(&c, b, "cut", p, b, f);
  if (how == CUT_PAUSED) {
    tu_proc_signal(&c.nodes[a].proc, SIGCONT);
  } else {
    assert_int_equal(cd_start(&c, a), 0);
  }
  wait_log_count(&c, a, rolled, rollbacks);
  wait_drained(&c, a, c.nodes[f].id, "cut");
  produce_each(&c, "cut", PARTS);
  check_acked(&c);
  assert_int_equal(cd_wait_replicas_equal(&c, "cut", WAIT_MS), 0);
  assert_true(cd_running(&c, a));
  for (int i = 0; i < c.n; i++) {
    assert_false(tu_file_contains(c.nodes[i].log, "AddressSanitizer"));
  }
  nacked = 0;
  cd_destroy(&c);
}

static void test_cluster_change_cut_short_while_paused(void **state)
{
  change_cut_short(CUT_PAUSED);
}

static void test_cluster_change_cut_short_by_a_kill(void **state)
{
  change_cut_short(CUT_KILLED);
}

int main(int argc, char **argv)
{
  if (argc < 2) {
    fprintf(stderr, "usage: %s CAIRND [CAIRN-LOG]\n", argv[0]);
    return 2;
  }
  cairnd_bin = argv[1];
  cairn_log_bin = argc > 2 ? argv[2] : NULL;
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_cluster_bad_config_is_refused),
      cmocka_unit_test(test_cluster_sigterm_with_many_partitions_exits_cleanly),
      cmocka_unit_test(test_cluster_all_nodes_stopped_at_once),
      cmocka_unit_test(test_cluster_idle_leaders_report_every_replica_in_sync),
      cmocka_unit_test(test_cluster_quiet_groups_compact_the_node_log),
      cmocka_unit_test(test_cluster_node_budget_compacts_small_quiet_logs),
      cmocka_unit_test(test_cluster_forms_places_evenly_and_survives_restarts),
      cmocka_unit_test(test_cluster_dead_node_replaced_join_and_decommission),
      cmocka_unit_test(test_cluster_new_controller_learns_every_partition),
      cmocka_unit_test(test_cluster_refuses_duplicate_id_and_foreign_data_dir),
      cmocka_unit_test(test_cluster_change_cut_short_while_paused),
      cmocka_unit_test(test_cluster_change_cut_short_by_a_kill),
  };
  if (getenv("CAIRN_TEST_FILTER") != NULL) {
    cmocka_set_test_filter(getenv("CAIRN_TEST_FILTER"));
  }
  return cmocka_run_group_tests(tests, NULL, NULL);
}
