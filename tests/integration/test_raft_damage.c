/* test_raft_damage.c - cairnd restarted on damaged raft_uv files (issue 20,
 * item 2), with real processes on loopback: a partition replica whose open
 * segment lost its tail comes back (cut to its last whole batch) and the
 * node keeps serving; one with garbage in the middle of a segment is
 * refused and stays closed while the node serves its other replicas; a
 * metadata group with garbage in the middle of its open segment makes
 * cairnd exit 1 naming the file. A refused replica is rebuilt from its
 * peers: the leader removes it from the group, its node moves the files
 * aside and it rejoins empty, and comes back a voter holding every
 * acknowledged batch (also when the leader is killed meanwhile). Never an abort (raft 0.15's loader freed
 * a truncated open segment's buffer twice). Every acknowledged batch stays
 * readable, in order.
 *
 * Usage: test_raft_damage <path of cairnd>
 * CAIRN_TEST_FILTER='*meta*' runs a subset; CAIRN_KEEP_TEST_DIR=1 keeps the
 * data dirs and node logs; CAIRN_TEST_SEED replays the garbage. */
#include "acked.h"
#include "cairnd.h"
#include "common/fsutil.h"
#include "format/batch.h"
#include "storage/plog.h"
#include "storage/store.h"
#include "proc.h"
#include "testutil.h"

#include <dirent.h>
#include <inttypes.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#define WAIT_MS 30000
#define FAST "--raft-log group --heartbeat-ms 100 --election-ms 1000 --node-timeout-ms 2000 --replace-delay-ms 60000"
#define BATCH_RECORDS 3
#define BATCH_VALUE 40
#define TOPIC "t"
#define REBUILD_WAIT_MS 60000

static const char *cairnd_bin;
static long long restarted_ms; /* when damage_follower restarted its victim */

/* ---- acknowledged batches (tests/lib/acked.h) ---- */

static struct ak_log acked;

/* Produces one batch to TOPIC-0; it must be acknowledged, after the ones
 * before it. */
static void produce_one(struct cd_cluster *c) { ak_produce(&acked, c, 0, WAIT_MS); }

/* Every acknowledged batch is at its offset, in acknowledgment order. */
static void check_acked(struct cd_cluster *c) { ak_check_served(&acked, c, WAIT_MS); }

/* ---- files ---- */

/* The raft dir of node i's replica of TOPIC-0 (<node>/partitions/t-0.<id>/raft). */
static void replica_raft_dir(struct cd_cluster *c, int i, char *out, size_t n)
{
  char parts[700];
  snprintf(parts, sizeof parts, "%s/partitions", c->nodes[i].dir);
  DIR *d = opendir(parts);
  assert_non_null(d);
  struct dirent *de;
  out[0] = '\0';
  while ((de = readdir(d)) != NULL) {
    if (strncmp(de->d_name, TOPIC "-0.", strlen(TOPIC "-0.")) == 0) {
      /* A name longer than out would be a test bug: the check says so. */
      int w = snprintf(out, n, "%s/%.200s/raft", parts, de->d_name);
      assert_true(w > 0 && (size_t)w < n);
    }
  }
  closedir(d);
  assert_true(out[0] != '\0');
}

/* Offset after the last non-zero byte of dir/name. */
static int64_t data_end(const char *dir, const char *name)
{
  int64_t size = tu_file_size(dir, name);
  uint8_t *b = malloc((size_t)size + 1);
  assert_non_null(b);
  tu_read_at(dir, name, 0, b, (size_t)size);
  int64_t end = size;
  while (end > 0 && b[end - 1] == 0) {
    end--;
  }
  free(b);
  return end;
}

/* The open segment of dir holding the most data (name into out); returns
 * its data end, 0 if none holds any. */
static int64_t fullest_open_segment_or_none(const char *dir, char *out, size_t n)
{
  DIR *d = opendir(dir);
  assert_non_null(d);
  struct dirent *de;
  int64_t best = 0;
  out[0] = '\0';
  while ((de = readdir(d)) != NULL) {
    if (strncmp(de->d_name, "open-", 5) == 0) {
      int64_t end = data_end(dir, de->d_name);
      if (end > best) {
        best = end;
        int w = snprintf(out, n, "%.63s", de->d_name);
        assert_true(w > 0 && (size_t)w < n);
      }
    }
  }
  closedir(d);
  return best;
}

/* The same, failing the test when no open segment holds data. */
static int64_t fullest_open_segment(const char *dir, char *out, size_t n)
{
  int64_t best = fullest_open_segment_or_none(dir, out, n);
  if (best == 0) {
    fail_msg("%s: no open segment with data", dir);
  }
  return best;
}

/* A follower on a loaded machine may lag the majority that acknowledged
 * (or open its replica late): waits, WAIT_MS at most, until dir exists and
 * an open segment in it holds data, so that what the test damages is there
 * when it kills the node. */
static void wait_for_open_data(const char *dir)
{
  char seg[64];
  long long until = tu_now_ms() + WAIT_MS;
  while (tu_now_ms() < until) {
    DIR *d = opendir(dir);
    if (d != NULL) {
      closedir(d);
      if (fullest_open_segment_or_none(dir, seg, sizeof seg) > 0) {
        return;
      }
    }
    usleep(50 * 1000);
  }
}

/* Walks the whole batches of open segment dir/name (format in
 * cluster/raft_files.h); returns how many there are and, in *last, where
 * the last one starts. */
static int whole_batches(const char *dir, const char *name, int64_t *last)
{
  int64_t size = tu_file_size(dir, name);
  uint8_t *b = malloc((size_t)size + 1);
  assert_non_null(b);
  tu_read_at(dir, name, 0, b, (size_t)size);
  int count = 0;
  int64_t off = 8;
  *last = 0;
  while (off + 16 <= size) {
    uint64_t n = 0;
    memcpy(&n, b + off + 8, 8);
    if (n == 0 || n > 262144 || off + 16 + 16 * (int64_t)n > size) {
      break;
    }
    int64_t data = 0;
    for (uint64_t i = 0; i < n; i++) {
      uint32_t len = 0;
      memcpy(&len, b + off + 16 + 16 * (int64_t)i + 12, 4);
      data += ((int64_t)len + 7) / 8 * 8;
    }
    int64_t next = off + 16 + 16 * (int64_t)n + data;
    if (next > size) {
      break;
    }
    *last = off;
    count++;
    off = next;
  }
  free(b);
  return count;
}

static void write_garbage(const char *dir, const char *name, int64_t at, size_t len, uint64_t *rnd)
{
  uint8_t g[512];
  assert_true(len <= sizeof g);
  for (size_t k = 0; k < len; k++) {
    g[k] = (uint8_t)tu_rand(rnd);
  }
  tu_write_at(dir, name, at, g, len);
  print_message("wrote %zu random bytes at byte %" PRId64 " of %s/%s\n", len, at, dir, name);
}

/* ---- cluster ---- */

/* Three voters, TOPIC with one partition at rf 3, n batches acknowledged. */
static void setup(struct cd_cluster *c, int n)
{
  ak_init(&acked, TOPIC, 1, BATCH_RECORDS, BATCH_VALUE);
  assert_int_equal(cd_init(c, cairnd_bin, 3, 3, FAST), 0);
  if (cd_start_all(c, WAIT_MS) != 0) {
    fail_msg("the cluster did not form: see %s", c->root);
  }
  char msg[256];
  assert_int_equal(cd_create_topic(c, 0, TOPIC, 1, 3, WAIT_MS, msg, sizeof msg), 0);
  for (int k = 0; k < n; k++) {
    produce_one(c);
  }
}

/* Node i is alive after its restart, did not abort, and the cluster lists
 * it alive. */
static void expect_up(struct cd_cluster *c, int i)
{
  uint64_t all[3] = {1, 2, 3};
  if (cd_wait_alive(c, i, all, 3, WAIT_MS) != 0) {
    fail_msg("node %d did not come back: see %s", i, c->nodes[i].log);
  }
  usleep(2000 * 1000);
  if (tu_proc_wait(&c->nodes[i].proc, 0) != -1) {
    fail_msg("node %d exited: see %s", i, c->nodes[i].log);
  }
  assert_false(tu_file_contains(c->nodes[i].log, "double free"));
  assert_false(tu_file_contains(c->nodes[i].log, "AddressSanitizer"));
}

/* ---- tests ---- */

/* A replica's open segment loses its last few hundred bytes (a torn
 * tail): the node comes back, the replica is cut to its last whole batch
 * and catches up, and with another node down it still serves every
 * acknowledged batch (so the repaired replica is a working member). */
static void test_raft_damage_truncated_open_segment_is_repaired(void **state)
{
  (void)state;
  struct cd_cluster c;
  setup(&c, 20);
  int victim = 2;
  char dir[800], seg[64];
  replica_raft_dir(&c, victim, dir, sizeof dir);
  wait_for_open_data(dir);
  cd_kill(&c, victim);
  int64_t end = fullest_open_segment(dir, seg, sizeof seg);
  int64_t cut = end - 300;
  assert_true(cut > 8);
  print_message("truncating %s/%s from %" PRId64 " to %" PRId64 " bytes (data ended at %" PRId64
                ")\n",
                dir, seg, tu_file_size(dir, seg), cut, end);
  tu_truncate(dir, seg, cut);
  assert_int_equal(cd_start(&c, victim), 0);
  expect_up(&c, victim);
  assert_true(tu_file_contains(c.nodes[victim].log, "torn tail"));
  for (int k = 0; k < 5; k++) {
    produce_one(&c);
  }
  check_acked(&c);
  /* The repaired replica and one other hold everything. */
  cd_kill(&c, 0);
  for (int k = 0; k < 3; k++) {
    produce_one(&c);
  }
  check_acked(&c);
  assert_true(tu_proc_wait(&c.nodes[victim].proc, 0) == -1);
  cd_destroy(&c);
}

/* Random bytes in the middle of a replica's open segment, with whole
 * batches after them: not a torn tail. The replica is refused (an error
 * line names the file and offset; it is then rebuilt, see below); the node
 * stays up and the cluster serves every acknowledged batch. */
static void test_raft_damage_garbage_mid_segment_is_refused(void **state)
{
  (void)state;
  uint64_t rnd = tu_seed("test_raft_damage_garbage_mid_segment_is_refused");
  struct cd_cluster c;
  setup(&c, 20);
  int victim = 1;
  char dir[800], seg[64];
  replica_raft_dir(&c, victim, dir, sizeof dir);
  wait_for_open_data(dir);
  cd_kill(&c, victim);
  int64_t end = fullest_open_segment(dir, seg, sizeof seg);
  int64_t at = 8 + (int64_t)(tu_rand(&rnd) % (uint64_t)(end / 2));
  write_garbage(dir, seg, at, 64, &rnd);
  assert_int_equal(cd_start(&c, victim), 0);
  expect_up(&c, victim);
  char want[900];
  snprintf(want, sizeof want, "%s/%s: batch at byte", dir, seg);
  long long until = tu_now_ms() + WAIT_MS;
  while (!tu_file_contains(c.nodes[victim].log, want) && tu_now_ms() < until) {
    usleep(100 * 1000);
  }
  if (!tu_file_contains(c.nodes[victim].log, want)) {
    fail_msg("no error line naming %s in %s", want, c.nodes[victim].log);
  }
  for (int k = 0; k < 5; k++) {
    produce_one(&c);
  }
  check_acked(&c);
  assert_true(tu_proc_wait(&c.nodes[victim].proc, 0) == -1);
  cd_destroy(&c);
}

/* Random bytes in the first batch of the metadata group's open segment
 * (more batches follow): cairnd cannot serve without its metadata, so it
 * exits 1 naming the file, and never aborts. */
static void test_raft_damage_garbage_in_meta_exits_1(void **state)
{
  (void)state;
  uint64_t rnd = tu_seed("test_raft_damage_garbage_in_meta_exits_1");
  struct cd_cluster c;
  setup(&c, 3);
  int victim = 0;
  char dir[800], seg[64];
  snprintf(dir, sizeof dir, "%.600s/meta", c.nodes[victim].dir);
  cd_kill(&c, victim);
  int64_t end = fullest_open_segment(dir, seg, sizeof seg);
  print_message("%s/%s: data ends at %" PRId64 "\n", dir, seg, end);
  write_garbage(dir, seg, 16, 32, &rnd); /* the first batch's header */
  assert_int_equal(cd_start(&c, victim), 0);
  int st = tu_proc_wait(&c.nodes[victim].proc, WAIT_MS);
  if (st == -1) {
    fail_msg("cairnd kept running on a damaged metadata log: see %s", c.nodes[victim].log);
  }
  if (!WIFEXITED(st)) {
    fail_msg("cairnd died of signal %d: see %s", WTERMSIG(st), c.nodes[victim].log);
  }
  assert_int_equal(ak_exit_code(st), 1);
  char want[900];
  snprintf(want, sizeof want, "%s/%s: batch at byte 8", dir, seg);
  if (!tu_file_contains(c.nodes[victim].log, want)) {
    fail_msg("no message naming %s in %s", want, c.nodes[victim].log);
  }
  assert_false(tu_file_contains(c.nodes[victim].log, "AddressSanitizer"));
  /* The other two still serve. */
  check_acked(&c);
  cd_destroy(&c);
}

/* ---- rebuilds ---- */

/* TOPIC-0 as node i's Metadata shows it (NULL if not listed); *env to free. */
static Cairn__Client__PartitionInfo *partition_info(struct cd_cluster *c, int i,
                                                    Cairn__Client__Envelope **env)
{
  *env = NULL;
  Cairn__Client__MetadataResponse *md = cd_metadata(c, i, env);
  for (size_t t = 0; md != NULL && t < md->n_topics; t++) {
    if (strcmp(md->topics[t]->name, TOPIC) == 0 && md->topics[t]->n_partitions > 0) {
      return md->topics[t]->partitions[0];
    }
  }
  return NULL;
}

/* The index of TOPIC-0's leader, as running node `ask` sees it; -1: none. */
static int leader_index(struct cd_cluster *c, int ask)
{
  Cairn__Client__Envelope *env = NULL;
  Cairn__Client__PartitionInfo *pi = partition_info(c, ask, &env);
  int li = pi != NULL && pi->leader_id != 0 ? cd_index(c, pi->leader_id) : -1;
  if (env != NULL) {
    cairn__client__envelope__free_unpacked(env, NULL);
  }
  return li;
}

static bool ids_contain(const uint64_t *v, size_t n, uint64_t id)
{
  for (size_t i = 0; i < n; i++) {
    if (v[i] == id) {
      return true;
    }
  }
  return false;
}

/* Is node `victim` rebuilt, as TOPIC-0's leader sees it: a voter in sync
 * (the leader's ISR is its voters that are caught up) and no longer
 * listed with a failed store? */
static bool rebuilt(struct cd_cluster *c, int victim)
{
  uint64_t id = c->nodes[victim].id;
  if (!tu_file_contains(c->nodes[victim].log, "rejoins empty")) {
    return false; /* not discarded yet: the leader's view may be stale */
  }
  for (int i = 0; i < c->n; i++) {
    if (i == victim || !cd_running(c, i)) {
      continue;
    }
    int li = leader_index(c, i);
    if (li < 0 || li == victim || !cd_running(c, li)) {
      return false;
    }
    Cairn__Client__Envelope *env = NULL;
    Cairn__Client__PartitionInfo *pi = partition_info(c, li, &env);
    bool ok = pi != NULL && pi->leader_id == c->nodes[li].id && ids_contain(pi->isr, pi->n_isr, id);
    for (size_t k = 0; ok && k < pi->n_store_failures; k++) {
      ok = pi->store_failures[k]->node_id != id;
    }
    if (env != NULL) {
      cairn__client__envelope__free_unpacked(env, NULL);
    }
    return ok;
  }
  return false;
}

/* Waits until `victim` is rebuilt; returns how long after its restart. */
static long long wait_rebuilt(struct cd_cluster *c, int victim)
{
  long long until = tu_now_ms() + REBUILD_WAIT_MS;
  while (!rebuilt(c, victim)) {
    if (tu_now_ms() > until) {
      fail_msg("node %d's replica was not rebuilt within %d ms: see %s", victim, REBUILD_WAIT_MS,
               c->root);
    }
    usleep(100 * 1000);
  }
  return tu_now_ms() - restarted_ms;
}

/* Does dir (a replica's raft dir) have a raft.damaged-* sibling? */
static bool discarded_beside(const char *raft_dir)
{
  char parent[800];
  snprintf(parent, sizeof parent, "%s", raft_dir);
  char *slash = strrchr(parent, '/');
  assert_non_null(slash);
  *slash = '\0';
  return fs_dir_has_prefix(parent, "raft.damaged-");
}

/* Every node stopped: the three replicas of TOPIC-0 hold the same
 * batches, and every acknowledged one once, at its offset, in
 * acknowledgment order. */
static void check_replicas_equal(struct cd_cluster *c)
{
  char logs[3][820];
  const char *dirs[3];
  for (int i = 0; i < 3; i++) {
    char raft[800];
    replica_raft_dir(c, i, raft, sizeof raft);
    snprintf(logs[i], sizeof logs[i], "%.*s/log", (int)(strrchr(raft, '/') - raft), raft);
    dirs[i] = logs[i];
  }
  ak_check_replicas(&acked, 0, dirs, 3);
}

/* Sets up, stops a follower (returned), produces more while it is down,
 * writes garbage into the middle of its Raft open segment (whole batches
 * after it: refused), restarts it and waits for the refusal's error line. */
static int damage_follower(struct cd_cluster *c, const char *seed, char *dir, size_t dirlen)
{
  uint64_t rnd = tu_seed(seed);
  setup(c, 20);
  int leader = -1;
  long long until = tu_now_ms() + WAIT_MS;
  while ((leader = leader_index(c, 0)) < 0 && tu_now_ms() < until) {
    usleep(100 * 1000);
  }
  assert_true(leader >= 0);
  int victim = (leader + 1) % 3;
  replica_raft_dir(c, victim, dir, dirlen);
  /* Refused, not repaired, needs a whole batch after the garbage: a
   * follower on a loaded machine may lag and then catch up with one big
   * batch, so wait until its segment holds two. */
  char seg[64];
  int64_t last = 0;
  until = tu_now_ms() + WAIT_MS;
  while ((fullest_open_segment_or_none(dir, seg, sizeof seg) == 0 ||
          whole_batches(dir, seg, &last) < 2) &&
         tu_now_ms() < until) {
    usleep(50 * 1000);
  }
  cd_kill(c, victim);
  for (int k = 0; k < 5; k++) {
    produce_one(c);
  }
  (void)fullest_open_segment(dir, seg, sizeof seg);
  if (whole_batches(dir, seg, &last) < 2) {
    fail_msg("%s/%s: fewer than two whole batches", dir, seg);
  }
  /* Anywhere before the last batch, which stays whole. */
  int64_t at = 8 + (int64_t)(tu_rand(&rnd) % (uint64_t)(last - 8));
  size_t len = last - at < 64 ? (size_t)(last - at) : 64;
  write_garbage(dir, seg, at, len, &rnd);
  restarted_ms = tu_now_ms();
  assert_int_equal(cd_start(c, victim), 0);
  char want[900];
  snprintf(want, sizeof want, "%s/%s: batch at byte", dir, seg);
  until = tu_now_ms() + WAIT_MS;
  while (!tu_file_contains(c->nodes[victim].log, want) && tu_now_ms() < until) {
    usleep(50 * 1000);
  }
  if (!tu_file_contains(c->nodes[victim].log, want)) {
    fail_msg("no error line naming %s in %s", want, c->nodes[victim].log);
  }
  return victim;
}

/* Stops every node cleanly and compares their replicas. */
static void stop_and_compare(struct cd_cluster *c)
{
  for (int i = 0; i < 3; i++) {
    assert_int_equal(ak_exit_code(cd_term(c, i, WAIT_MS)), 0);
    assert_false(tu_file_contains(c->nodes[i].log, "AddressSanitizer"));
  }
  check_replicas_equal(c);
}

/* A follower's replica refused for garbage in the middle of its Raft
 * segment is rebuilt: the leader removes it from the group, the node moves
 * its Raft files to raft.damaged-<time> and rejoins empty, the leader adds
 * it back and promotes it. It is a voter in sync again, no longer listed as
 * failed, and holds every acknowledged batch once, in order, as the other
 * two do; with either other node down the partition still serves all. */
static void test_raft_damage_refused_replica_is_rebuilt(void **state)
{
  (void)state;
  struct cd_cluster c;
  char dir[800];
  int victim = damage_follower(&c, "test_raft_damage_refused_replica_is_rebuilt", dir, sizeof dir);
  long long took = wait_rebuilt(&c, victim);
  print_message("node %d's replica rebuilt %lld ms after its restart\n", victim, took);
  assert_true(discarded_beside(dir));
  assert_true(tu_file_contains(c.nodes[victim].log, "rejoins empty"));
  assert_int_equal(cd_metric(c.nodes[victim].admin_port, "cairn_raft_replicas_rebuilt_total"), 1);
  assert_int_equal(cd_metric(c.nodes[victim].admin_port, "cairn_raft_replicas_refused"), 0);
  for (int k = 0; k < 5; k++) {
    produce_one(&c);
  }
  check_acked(&c);
  /* Restarted (its dir holds raft.damaged-*: it joins, with its new log),
   * the rebuilt replica is a working voter: with another node down the
   * partition still takes writes and serves every acknowledged batch. */
  cd_kill(&c, victim);
  assert_int_equal(cd_start(&c, victim), 0);
  expect_up(&c, victim);
  int other = (victim + 1) % 3;
  cd_kill(&c, other);
  for (int k = 0; k < 3; k++) {
    produce_one(&c);
  }
  check_acked(&c);
  assert_int_equal(cd_start(&c, other), 0);
  expect_up(&c, other);
  produce_one(&c);
  /* the restarted one catches up */
  assert_int_equal(cd_wait_replicas_equal(&c, TOPIC, WAIT_MS), 0);
  stop_and_compare(&c);
  cd_destroy(&c);
}

/* The same, with the partition's leader SIGKILLed as soon as it starts
 * removing the damaged replica, and restarted: the next leader (or the
 * same one) finishes the rebuild. */
static void test_raft_damage_rebuild_survives_leader_kill(void **state)
{
  (void)state;
  struct cd_cluster c;
  char dir[800];
  int victim =
      damage_follower(&c, "test_raft_damage_rebuild_survives_leader_kill", dir, sizeof dir);
  int leader = -1;
  long long until = tu_now_ms() + WAIT_MS;
  while (leader < 0 && tu_now_ms() < until) {
    for (int i = 0; i < 3; i++) {
      if (i != victim && tu_file_contains(c.nodes[i].log, "remove damaged replica")) {
        leader = i;
      }
    }
    usleep(20 * 1000);
  }
  if (leader < 0) {
    fail_msg("no leader started removing node %d's replica: see %s", victim, c.root);
  }
  cd_kill(&c, leader);
  print_message("killed the leader, node %d\n", leader);
  usleep(1000 * 1000);
  assert_int_equal(cd_start(&c, leader), 0);
  long long took = wait_rebuilt(&c, victim);
  print_message("node %d's replica rebuilt %lld ms after its restart\n", victim, took);
  assert_true(discarded_beside(dir));
  for (int k = 0; k < 5; k++) {
    produce_one(&c);
  }
  check_acked(&c);
  assert_int_equal(cd_wait_replicas_equal(&c, TOPIC, WAIT_MS), 0);
  stop_and_compare(&c);
  cd_destroy(&c);
}

int main(int argc, char **argv)
{
  if (argc < 2) {
    fprintf(stderr, "usage: %s CAIRND\n", argv[0]);
    return 2;
  }
  cairnd_bin = argv[1];
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_raft_damage_truncated_open_segment_is_repaired),
      cmocka_unit_test(test_raft_damage_garbage_mid_segment_is_refused),
      cmocka_unit_test(test_raft_damage_garbage_in_meta_exits_1),
      cmocka_unit_test(test_raft_damage_refused_replica_is_rebuilt),
      cmocka_unit_test(test_raft_damage_rebuild_survives_leader_kill),
  };
  if (getenv("CAIRN_TEST_FILTER") != NULL) {
    cmocka_set_test_filter(getenv("CAIRN_TEST_FILTER"));
  }
  return cmocka_run_group_tests(tests, NULL, NULL);
}
