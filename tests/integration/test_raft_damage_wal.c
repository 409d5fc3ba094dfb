/* test_raft_damage_wal.c - cairnd restarted on a damaged node-wide Raft log
 * (--raft-log node; issue 20, item 2), with real processes on loopback: a
 * node whose wal segment has garbage before a later write job's intact
 * records (not a torn tail) comes up and serves, sets the log aside, and
 * every partition replica it held is rebuilt from its peers (removed by
 * its leader, reopened empty, added back and promoted), also when a
 * partition leader's node is SIGKILLed during the rebuild, and when the
 * damaged node itself is SIGKILLed after setting its log aside; a
 * partition whose only replica was there stays refused. Every
 * acknowledged batch is then on every replica once, in order.
 *
 * Usage: test_raft_damage_wal <path of cairnd>
 * CAIRN_TEST_FILTER='*leader*' runs a subset; CAIRN_KEEP_TEST_DIR=1 keeps
 * the data dirs and node logs; CAIRN_TEST_SEED replays the garbage. */
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
#define FAST                                                                                       \
  "--raft-log node --heartbeat-ms 100 --election-ms 1000 --node-timeout-ms 2000 "                  \
  "--replace-delay-ms 60000"
#define NPART 4
#define BATCH_RECORDS 3
#define BATCH_VALUE 40
#define TOPIC "t"
#define REBUILD_WAIT_MS 90000
/* The node-wide log's layout (docs/format.md): a 24-byte segment header,
 * then records of a 40-byte header (u32 payload length at 4, u32 job_back
 * at 12) and the payload. */
#define WAL_SEG_HEADER 24
#define WAL_REC_HEADER 40
#define WAL_SEG "wal-0000000000000001.log"

static const char *cairnd_bin;
static long long restarted_ms;
static int want_rebuilds; /* replicas the victim's process moves aside */
static int want_refused;  /* replicas of the victim that stay refused */

/* ---- acknowledged batches, per partition (tests/lib/acked.h) ---- */

static struct ak_log acked;

static void produce_one(struct cd_cluster *c, uint32_t p) { ak_produce(&acked, c, p, WAIT_MS); }

/* One acknowledged batch to every partition, k times. */
static void produce_rounds(struct cd_cluster *c, int k)
{
  for (int r = 0; r < k; r++) {
    for (uint32_t p = 0; p < NPART; p++) {
      produce_one(c, p);
    }
  }
}

/* Every acknowledged batch is at its offset, as the leaders serve them. */
static void check_acked(struct cd_cluster *c) { ak_check_served(&acked, c, WAIT_MS); }

/* ---- the wal segment ---- */

static uint32_t le32(const uint8_t *b)
{
  return (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
}

/* One record of the segment: where it starts, its size, where its job's
 * bytes start. */
struct rec {
  int64_t off, size, job;
};

/* Walks node i's wal segment (the node stopped) into out (at most cap);
 * returns how many records. */
static int wal_records(const char *dir, struct rec *out, int cap)
{
  int64_t size = tu_file_size(dir, WAL_SEG);
  uint8_t *b = malloc((size_t)size + 1);
  assert_non_null(b);
  tu_read_at(dir, WAL_SEG, 0, b, (size_t)size);
  int n = 0;
  int64_t off = WAL_SEG_HEADER;
  while (off + WAL_REC_HEADER <= size && n < cap) {
    int64_t len = le32(b + off + 4);
    int64_t back = le32(b + off + 12);
    if (le32(b + off) == 0 || off + WAL_REC_HEADER + len > size || back > off) {
      break;
    }
    out[n++] = (struct rec){off, WAL_REC_HEADER + len, off - back};
    off += WAL_REC_HEADER + len;
  }
  free(b);
  return n;
}

/* Random bytes over a record in the first half of node i's wal segment
 * (in <node dir>/sub: "wal", the partitions' log, or "meta/wal", the
 * metadata group's) whose write job is not the last one: later jobs'
 * records after it stay intact, so the damage was synced and is refused,
 * never cut as a torn tail. Returns the record's offset (what the refusal
 * names). */
static bool garble_zeros;  /* zeros instead of random bytes (a lost sector) */
static bool meta_truncate; /* damage_meta_wal empties the segment instead */

static int64_t garble_wal_in(struct cd_cluster *c, int i, const char *sub, uint64_t *rnd)
{
  char dir[700];
  snprintf(dir, sizeof dir, "%s/%s", c->nodes[i].dir, sub);
  static struct rec v[200000];
  int n = wal_records(dir, v, (int)(sizeof v / sizeof v[0]));
  assert_true(n > 10);
  int64_t last_job = v[n - 1].job;
  int cand = 0;
  while (cand < n / 2 && v[cand].off < last_job) {
    cand++;
  }
  assert_true(cand > 2);
  const struct rec *r = &v[1 + tu_rand(rnd) % (uint64_t)(cand - 1)];
  uint8_t g[32];
  size_t len = r->size < (int64_t)sizeof g ? (size_t)r->size : sizeof g;
  for (size_t k = 0; k < len; k++) {
    g[k] = (uint8_t)tu_rand(rnd);
  }
  g[0] ^= 0x5a; /* the checksum field changes whatever the draw */
  if (garble_zeros) {
    memset(g, 0, len);
  }
  tu_write_at(dir, WAL_SEG, r->off, g, len);
  print_message("wrote %zu %s bytes at byte %" PRId64 " of %s/%s (%d records, last job at %" PRId64
                ")\n",
                len, garble_zeros ? "zero" : "random", r->off, dir, WAL_SEG, n, last_job);
  return r->off;
}

static int64_t garble_wal(struct cd_cluster *c, int i, uint64_t *rnd)
{
  return garble_wal_in(c, i, "wal", rnd);
}

/* ---- cluster ---- */

static void setup(struct cd_cluster *c, int rounds)
{
  ak_init(&acked, TOPIC, NPART, BATCH_RECORDS, BATCH_VALUE);
  assert_int_equal(cd_init(c, cairnd_bin, 3, 3, FAST), 0);
  if (cd_start_all(c, WAIT_MS) != 0) {
    fail_msg("the cluster did not form: see %s", c->root);
  }
  char msg[256];
  assert_int_equal(cd_create_topic(c, 0, TOPIC, NPART, 3, WAIT_MS, msg, sizeof msg), 0);
  produce_rounds(c, rounds);
}

static void expect_up(struct cd_cluster *c, int i)
{
  uint64_t all[3] = {1, 2, 3};
  if (cd_wait_alive(c, i, all, 3, WAIT_MS) != 0) {
    fail_msg("node %d did not come back: see %s", i, c->nodes[i].log);
  }
  if (tu_proc_wait(&c->nodes[i].proc, 0) != -1) {
    fail_msg("node %d exited: see %s", i, c->nodes[i].log);
  }
  assert_false(tu_file_contains(c->nodes[i].log, "AddressSanitizer"));
}

/* (topic, partition p) as node i's Metadata shows it; *env to free. */
static Cairn__Client__PartitionInfo *topic_partition_info(struct cd_cluster *c, int i,
                                                          const char *topic, uint32_t p,
                                                          Cairn__Client__Envelope **env)
{
  *env = NULL;
  Cairn__Client__MetadataResponse *md = cd_metadata(c, i, env);
  for (size_t t = 0; md != NULL && t < md->n_topics; t++) {
    if (strcmp(md->topics[t]->name, topic) == 0 && md->topics[t]->n_partitions > p) {
      for (size_t k = 0; k < md->topics[t]->n_partitions; k++) {
        if (md->topics[t]->partitions[k]->partition == p) {
          return md->topics[t]->partitions[k];
        }
      }
    }
  }
  return NULL;
}

static Cairn__Client__PartitionInfo *partition_info(struct cd_cluster *c, int i, uint32_t p,
                                                    Cairn__Client__Envelope **env)
{
  return topic_partition_info(c, i, TOPIC, p, env);
}

static int leader_index(struct cd_cluster *c, int ask, uint32_t p)
{
  Cairn__Client__Envelope *env = NULL;
  Cairn__Client__PartitionInfo *pi = partition_info(c, ask, p, &env);
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

/* Is victim's replica of partition p a voter in sync at p's leader (not
 * the victim, and running), and no longer listed with a failed store? */
static bool partition_rebuilt(struct cd_cluster *c, int victim, uint32_t p)
{
  uint64_t id = c->nodes[victim].id;
  int ask = (victim + 1) % 3;
  if (!cd_running(c, ask)) {
    ask = (victim + 2) % 3;
  }
  int li = leader_index(c, ask, p);
  if (li < 0 || !cd_running(c, li)) {
    return false;
  }
  Cairn__Client__Envelope *env = NULL;
  Cairn__Client__PartitionInfo *pi = partition_info(c, li, p, &env);
  bool ok = pi != NULL && pi->leader_id == c->nodes[li].id && ids_contain(pi->isr, pi->n_isr, id);
  for (size_t k = 0; ok && k < pi->n_store_failures; k++) {
    ok = pi->store_failures[k]->node_id != id;
  }
  if (env != NULL) {
    cairn__client__envelope__free_unpacked(env, NULL);
  }
  return ok;
}

/* Every replica of the victim rebuilt: its node moved each replica's Raft
 * state aside (the metric counts them) and every leader has it back. */
static bool all_rebuilt(struct cd_cluster *c, int victim)
{
  if (cd_metric(c->nodes[victim].admin_port, "cairn_raft_replicas_rebuilt_total") < want_rebuilds ||
      cd_metric(c->nodes[victim].admin_port, "cairn_raft_replicas_refused") != want_refused) {
    return false;
  }
  for (uint32_t p = 0; p < NPART; p++) {
    if (!partition_rebuilt(c, victim, p)) {
      return false;
    }
  }
  return true;
}

static long long wait_rebuilt(struct cd_cluster *c, int victim)
{
  long long until = tu_now_ms() + REBUILD_WAIT_MS;
  while (!all_rebuilt(c, victim)) {
    if (tu_now_ms() > until) {
      fail_msg("node %d's replicas were not rebuilt within %d ms: see %s", victim, REBUILD_WAIT_MS,
               c->root);
    }
    usleep(200 * 1000);
  }
  return tu_now_ms() - restarted_ms;
}

/* ---- comparing replicas ---- */

/* Every replica of TOPIC has applied what its peers have (a restarted one
 * caught up), waited for rather than slept. */
static void wait_caught_up(struct cd_cluster *c)
{
  if (cd_wait_replicas_equal(c, TOPIC, WAIT_MS) != 0) {
    fail_msg("the replicas of %s did not reach the same log end: see %s", TOPIC, c->root);
  }
}

/* Every node stopped cleanly: for each partition the three replicas hold
 * the same batches, and every acknowledged one once, at its offset, in
 * acknowledgment order. */
static void stop_and_compare(struct cd_cluster *c)
{
  for (int i = 0; i < 3; i++) {
    assert_int_equal(ak_exit_code(cd_term(c, i, WAIT_MS)), 0);
    assert_false(tu_file_contains(c->nodes[i].log, "AddressSanitizer"));
  }
  for (uint32_t p = 0; p < NPART; p++) {
    char logs[3][900];
    const char *dirs[3];
    for (int i = 0; i < 3; i++) {
      cd_replica_log_dir(c, i, TOPIC, p, logs[i], sizeof logs[i]);
      dirs[i] = logs[i];
    }
    ak_check_replicas(&acked, p, dirs, 3);
  }
}

/* Does a line of path from byte `from` on contain both a and b? */
static bool log_line_since(const char *path, long from, const char *a, const char *b)
{
  FILE *f = fopen(path, "r");
  if (f == NULL) {
    return false;
  }
  bool found = false;
  char line[4096];
  if (fseek(f, from, SEEK_SET) == 0) {
    while (!found && fgets(line, sizeof line, f) != NULL) {
      found = strstr(line, a) != NULL && strstr(line, b) != NULL;
    }
  }
  fclose(f);
  return found;
}

static long file_size(const char *path)
{
  struct stat sb;
  return stat(path, &sb) == 0 ? (long)sb.st_size : 0;
}

/* Does node i's replica dir of partition p hold the mark of a damaged log? */
static bool replica_marked(struct cd_cluster *c, int i, uint32_t p)
{
  char log[900], mark[960];
  cd_replica_log_dir(c, i, TOPIC, p, log, sizeof log);
  snprintf(mark, sizeof mark, "%.*s/raft.refused", (int)(strrchr(log, '/') - log), log);
  struct stat sb;
  return stat(mark, &sb) == 0;
}

/* Extra setup of the next damage_wal (NULL: none). */
static void (*solo_setup)(struct cd_cluster *c);

/* Sets up, SIGKILLs victim, produces more while it is down, garbles its
 * wal before the last write job's records, restarts it: it must come up,
 * log the file and byte, and set the log aside. */
static void damage_wal(struct cd_cluster *c, int victim, const char *seed)
{
  uint64_t rnd = tu_seed(seed);
  want_rebuilds = NPART;
  want_refused = 0;
  setup(c, 6);
  if (solo_setup != NULL) {
    solo_setup(c);
  }
  cd_kill(c, victim);
  produce_rounds(c, 2);
  int64_t at = garble_wal(c, victim, &rnd);
  restarted_ms = tu_now_ms();
  assert_int_equal(cd_start(c, victim), 0);
  expect_up(c, victim);
  char want[900];
  snprintf(want, sizeof want, "%s/wal/%s: record at byte %" PRId64, c->nodes[victim].dir, WAL_SEG,
           at);
  if (!tu_file_contains(c->nodes[victim].log, want)) {
    fail_msg("no line naming %s in %s", want, c->nodes[victim].log);
  }
  assert_true(fs_dir_has_prefix(c->nodes[victim].dir, "wal.damaged-"));
}

/* A node restarted on a node-wide log with garbage before a later job's
 * records comes up and serves, and each of its replicas (all of the
 * topic's partitions) is rebuilt from its peers: a voter in sync again,
 * not listed as failed; restartable; and with another node down every
 * partition still takes writes. Every acknowledged batch is on every
 * replica once, in order. */
static void test_raft_damage_wal_replicas_are_rebuilt(void **state)
{
  (void)state;
  struct cd_cluster c;
  int victim = 1;
  damage_wal(&c, victim, "test_raft_damage_wal_replicas_are_rebuilt");
  /* Serving at once: the other replicas hold every partition. */
  produce_rounds(&c, 1);
  long long took = wait_rebuilt(&c, victim);
  print_message("node %d's %d replicas rebuilt %lld ms after its restart\n", victim, NPART, took);
  assert_true(tu_file_contains(c.nodes[victim].log, "rejoins empty"));
  produce_rounds(&c, 2);
  check_acked(&c);
  /* Restarted, the rebuilt replicas join with their new state. */
  cd_kill(&c, victim);
  assert_int_equal(cd_start(&c, victim), 0);
  expect_up(&c, victim);
  assert_int_equal(cd_metric(c.nodes[victim].admin_port, "cairn_raft_replicas_refused"), 0);
  /* The rebuilt replicas count toward commits: with another node down
   * every partition still takes writes. */
  int other = (victim + 1) % 3;
  wait_caught_up(&c); /* the restarted replicas */
  cd_kill(&c, other);
  produce_rounds(&c, 2);
  check_acked(&c);
  assert_int_equal(cd_start(&c, other), 0);
  expect_up(&c, other);
  produce_rounds(&c, 1);
  wait_caught_up(&c); /* the restarted one */
  stop_and_compare(&c);
  cd_destroy(&c);
}

/* The same, with the node of a leader that starts removing a damaged
 * replica SIGKILLed at once and restarted a second later: the rebuild
 * resumes and completes. */
static void test_raft_damage_wal_rebuild_survives_leader_kill(void **state)
{
  (void)state;
  struct cd_cluster c;
  int victim = 2;
  damage_wal(&c, victim, "test_raft_damage_wal_rebuild_survives_leader_kill");
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
    fail_msg("no leader started removing node %d's replicas: see %s", victim, c.root);
  }
  cd_kill(&c, leader);
  print_message("killed node %d, which was removing a damaged replica\n", leader);
  usleep(1000 * 1000);
  assert_int_equal(cd_start(&c, leader), 0);
  long long took = wait_rebuilt(&c, victim);
  print_message("node %d's %d replicas rebuilt %lld ms after its restart\n", victim, NPART, took);
  produce_rounds(&c, 2);
  check_acked(&c);
  wait_caught_up(&c);
  stop_and_compare(&c);
  cd_destroy(&c);
}

/* The damaged node is SIGKILLed once it has set its log aside, before its
 * replicas are rebuilt, and restarted: it starts on its new, nearly empty
 * log, and every replica still marked is refused again (never opened with
 * empty Raft state, which would make it an empty voter); then all are
 * rebuilt and hold every acknowledged batch. */
static void test_raft_damage_wal_restart_before_rebuild_stays_refused(void **state)
{
  (void)state;
  struct cd_cluster c;
  int victim = 0;
  damage_wal(&c, victim, "test_raft_damage_wal_restart_before_rebuild_stays_refused");
  cd_kill(&c, victim);
  bool marked[NPART];
  int nmarked = 0;
  for (uint32_t p = 0; p < NPART; p++) {
    marked[p] = replica_marked(&c, victim, p);
    nmarked += marked[p];
  }
  print_message("killed node %d with %d of %d replicas still marked\n", victim, nmarked, NPART);
  assert_true(nmarked > 0);
  want_rebuilds = nmarked;
  produce_rounds(&c, 1);
  long from = file_size(c.nodes[victim].log);
  restarted_ms = tu_now_ms();
  assert_int_equal(cd_start(&c, victim), 0);
  expect_up(&c, victim);
  for (uint32_t p = 0; p < NPART; p++) {
    char name[32];
    snprintf(name, sizeof name, "] %s-%u: group ", TOPIC, p);
    long long until = tu_now_ms() + WAIT_MS;
    while (marked[p] && !log_line_since(c.nodes[victim].log, from, name, "stays closed") &&
           tu_now_ms() < until) {
      usleep(100 * 1000);
    }
    if (marked[p] && !log_line_since(c.nodes[victim].log, from, name, "stays closed")) {
      fail_msg("%s-%u: marked, but not refused after the restart: see %s", TOPIC, p,
               c.nodes[victim].log);
    }
  }
  /* The new log was not damaged: it is not set aside again. */
  assert_false(log_line_since(c.nodes[victim].log, from, "Raft log is damaged", ""));
  long long took = wait_rebuilt(&c, victim);
  print_message("node %d's replicas rebuilt %lld ms after its second restart\n", victim, took);
  produce_rounds(&c, 2);
  check_acked(&c);
  wait_caught_up(&c);
  stop_and_compare(&c);
  cd_destroy(&c);
}

/* ---- a partition whose only replica is on the damaged node ---- */

#define SOLO "solo"
#define SOLO_PARTS 3

/* SOLO: SOLO_PARTS partitions at rf 1 (spread over the nodes), one
 * acknowledged batch each. */
static void solo_create(struct cd_cluster *c)
{
  char msg[256];
  assert_int_equal(cd_create_topic(c, 0, SOLO, SOLO_PARTS, 1, WAIT_MS, msg, sizeof msg), 0);
  for (uint32_t p = 0; p < SOLO_PARTS; p++) {
    size_t len = 0;
    uint8_t *b =
        tu_make_batch(acked.next_tag, BATCH_RECORDS, BATCH_VALUE, 1000 + (int64_t)acked.next_tag, &len);
    acked.next_tag++;
    int64_t base = -1;
    assert_int_equal(cd_produce(c, SOLO, p, b, len, WAIT_MS, &base), 0);
    free(b);
  }
}

/* The partitions of SOLO whose one replica is node i's, as a bit set. */
static unsigned solo_on(struct cd_cluster *c, int ask, int i)
{
  unsigned set = 0;
  for (uint32_t p = 0; p < SOLO_PARTS; p++) {
    Cairn__Client__Envelope *env = NULL;
    Cairn__Client__PartitionInfo *pi = topic_partition_info(c, ask, SOLO, p, &env);
    assert_non_null(pi);
    assert_int_equal(pi->n_replicas, 1);
    if (pi->replicas[0] == c->nodes[i].id) {
      set |= 1u << p;
    }
    cairn__client__envelope__free_unpacked(env, NULL);
  }
  return set;
}

/* A partition whose only replica is the damaged node's has no peer to be
 * rebuilt from: it stays refused, and the log says why; the node's other
 * replicas are rebuilt, and the other nodes' rf-1 partitions still take
 * writes. */
static void test_raft_damage_wal_only_replica_stays_refused(void **state)
{
  (void)state;
  struct cd_cluster c;
  int victim = 1;
  solo_setup = solo_create;
  damage_wal(&c, victim, "test_raft_damage_wal_only_replica_stays_refused");
  solo_setup = NULL;
  unsigned mine = solo_on(&c, 0, victim);
  int nmine = __builtin_popcount(mine);
  print_message("node %d holds the only replica of %d of %s's %d partitions\n", victim, nmine, SOLO,
                SOLO_PARTS);
  assert_true(nmine > 0); /* placement spreads rf-1 partitions over the nodes */
  want_refused = nmine;
  long long took = wait_rebuilt(&c, victim);
  print_message("node %d's %d replicas of %s rebuilt %lld ms after its restart\n", victim, NPART,
                TOPIC, took);
  for (uint32_t p = 0; p < SOLO_PARTS; p++) {
    if ((mine & (1u << p)) != 0) {
      char name[64];
      snprintf(name, sizeof name, "] %s-%u: group ", SOLO, p);
      if (!log_line_since(c.nodes[victim].log, 0, name, "only replica: it stays refused")) {
        fail_msg("%s-%u: no line saying it stays refused in %s", SOLO, p, c.nodes[victim].log);
      }
      continue;
    }
    size_t len = 0;
    uint8_t *b =
        tu_make_batch(acked.next_tag, BATCH_RECORDS, BATCH_VALUE, 1000 + (int64_t)acked.next_tag, &len);
    acked.next_tag++;
    int64_t base = -1;
    assert_int_equal(cd_produce(&c, SOLO, p, b, len, WAIT_MS, &base), 0);
    free(b);
  }
  assert_int_equal(cd_metric(c.nodes[victim].admin_port, "cairn_raft_replicas_refused"), nmine);
  produce_rounds(&c, 1);
  check_acked(&c);
  cd_destroy(&c);
}

/* ---- the metadata group's log (meta/wal) ---- */

#define META_TOPICS 4 /* m0..m3 before the damage, m4 while the victim is down */

static void create_topic_rf(struct cd_cluster *c, int via, const char *name, uint32_t rf)
{
  char msg[256];
  int rv = cd_create_topic(c, via, name, 2, rf, WAIT_MS, msg, sizeof msg);
  if (rv != 0) {
    cd_print_log_lines(c, "[ctl]", 30);
    cd_print_log_lines(c, "[metaheal]", 10);
    cd_print_log_lines(c, " error ", 10); /* a latched metadata log would say so */
    for (int i = 0; i < c->n; i++) {
      print_message("node %d: cairn_controller_leader %lld cairn_meta_replica_voter %lld "
                    "cairn_meta_replica_state %lld\n",
                    i, cd_metric(c->nodes[i].admin_port, "cairn_controller_leader"),
                    cd_metric(c->nodes[i].admin_port, "cairn_meta_replica_voter"),
                    cd_metric(c->nodes[i].admin_port, "cairn_meta_replica_state"));
    }
    fail_msg("creating %s through node %d: %d %s", name, via, rv, msg);
  }
}

static void create_topic(struct cd_cluster *c, int via, const char *name)
{
  create_topic_rf(c, via, name, 3);
}

/* The topics (names, partitions, replicas in order, initial replicas)
 * node a's Metadata shows are node b's. */
static bool meta_same(struct cd_cluster *c, int a, int b)
{
  Cairn__Client__Envelope *ea = NULL, *eb = NULL;
  Cairn__Client__MetadataResponse *ma = cd_metadata(c, a, &ea);
  Cairn__Client__MetadataResponse *mb = cd_metadata(c, b, &eb);
  bool same = ma != NULL && mb != NULL && ma->n_topics == mb->n_topics &&
              ma->n_nodes == mb->n_nodes && strcmp(ma->cluster_id, mb->cluster_id) == 0;
  for (size_t t = 0; same && t < ma->n_topics; t++) {
    const Cairn__Client__TopicInfo *ta = ma->topics[t], *tb = mb->topics[t];
    same = strcmp(ta->name, tb->name) == 0 && ta->n_partitions == tb->n_partitions;
    for (size_t k = 0; same && k < ta->n_partitions; k++) {
      const Cairn__Client__PartitionInfo *pa = ta->partitions[k], *pb = tb->partitions[k];
      same = pa->partition == pb->partition && pa->n_replicas == pb->n_replicas &&
             memcmp(pa->replicas, pb->replicas, pa->n_replicas * sizeof pa->replicas[0]) == 0;
    }
  }
  if (ea != NULL) {
    cairn__client__envelope__free_unpacked(ea, NULL);
  }
  if (eb != NULL) {
    cairn__client__envelope__free_unpacked(eb, NULL);
  }
  return same;
}

static size_t meta_topics(struct cd_cluster *c, int i)
{
  Cairn__Client__Envelope *env = NULL;
  Cairn__Client__MetadataResponse *md = cd_metadata(c, i, &env);
  size_t n = md != NULL ? md->n_topics : 0;
  if (env != NULL) {
    cairn__client__envelope__free_unpacked(env, NULL);
  }
  return n;
}

/* The victim's metadata replica is a voter again and holds what the
 * others hold (1 + META_TOPICS + 1 topics, the same placement), and its
 * replicas of TOPIC are in sync. */
static long long wait_meta_rebuilt(struct cd_cluster *c, int victim)
{
  int other = (victim + 1) % 3;
  long long until = tu_now_ms() + REBUILD_WAIT_MS;
  for (;;) {
    bool ok = cd_metric(c->nodes[victim].admin_port, "cairn_meta_replica_voter") == 1 &&
              meta_topics(c, victim) == 2 + META_TOPICS && meta_same(c, victim, other);
    for (uint32_t p = 0; ok && p < NPART; p++) {
      ok = partition_rebuilt(c, victim, p);
    }
    if (ok) {
      return tu_now_ms() - restarted_ms;
    }
    if (tu_now_ms() > until) {
      fail_msg("node %d's metadata replica was not rebuilt within %d ms: see %s", victim,
               REBUILD_WAIT_MS, c->root);
    }
    usleep(200 * 1000);
  }
}

/* Sets up (TOPIC and META_TOPICS more topics), SIGKILLs victim, produces
 * and creates a topic while it is down, damages its meta/wal before the
 * last write job's records, restarts it: it must stay up, log the file and
 * byte, and set the metadata log aside. */
static void damage_meta_wal(struct cd_cluster *c, int victim, const char *seed)
{
  uint64_t rnd = tu_seed(seed);
  setup(c, 4);
  for (int k = 0; k < META_TOPICS; k++) {
    char name[16];
    snprintf(name, sizeof name, "m%d", k);
    create_topic(c, k % 3, name);
  }
  produce_rounds(c, 2);
  cd_kill(c, victim);
  produce_rounds(c, 2);
  create_topic(c, (victim + 1) % 3, "m4");
  char want[900];
  if (meta_truncate) {
    char seg[900];
    snprintf(seg, sizeof seg, "%.600s/meta/wal/%s", c->nodes[victim].dir, WAL_SEG);
    assert_int_equal(truncate(seg, 0), 0);
    print_message("truncated %s to 0 bytes\n", seg);
    snprintf(want, sizeof want, "%.600s/meta/wal: the metadata group's log holds nothing",
             c->nodes[victim].dir);
  } else {
    int64_t at = garble_wal_in(c, victim, "meta/wal", &rnd);
    snprintf(want, sizeof want, "%.600s/meta/wal/%s: record at byte %" PRId64, c->nodes[victim].dir,
             WAL_SEG, at);
  }
  restarted_ms = tu_now_ms();
  assert_int_equal(cd_start(c, victim), 0);
  long long until = tu_now_ms() + WAIT_MS;
  int status = -1;
  while (!tu_file_contains(c->nodes[victim].log, "the metadata replica is refused") &&
         (status = tu_proc_wait(&c->nodes[victim].proc, 0)) == -1 && tu_now_ms() < until) {
    usleep(50 * 1000);
  }
  if (status != -1 || tu_proc_wait(&c->nodes[victim].proc, 0) != -1 ||
      !tu_file_contains(c->nodes[victim].log, "the metadata replica is refused")) {
    fail_msg("node %d did not start on a damaged metadata log (%d): see %s", victim,
             ak_exit_code(status), c->nodes[victim].log);
  }
  if (!tu_file_contains(c->nodes[victim].log, want)) {
    fail_msg("no line naming %s in %s", want, c->nodes[victim].log);
  }
  char meta[700];
  snprintf(meta, sizeof meta, "%.600s/meta", c->nodes[victim].dir);
  assert_true(meta_truncate || fs_dir_has_prefix(meta, "wal.damaged-"));
}

/* Waits until node i's metadata shows topics topics, as node 0's does. */
static void wait_meta_same(struct cd_cluster *c, int i, size_t topics)
{
  long long until = tu_now_ms() + WAIT_MS;
  while (!(meta_topics(c, i) == topics && meta_same(c, i, 0))) {
    if (tu_now_ms() > until) {
      fail_msg("node %d's metadata did not catch up: see %s", i, c->root);
    }
    usleep(100 * 1000);
  }
}

/* The rebuilt replica counts: with another voter SIGKILLed, the metadata
 * group (a topic created through the victim) and every partition still
 * take writes; then everything is compared. */
static void meta_check_counts(struct cd_cluster *c, int victim)
{
  int other = (victim + 2) % 3;
  cd_kill(c, other);
  /* rf 2: the planner may have marked the killed node dead already */
  create_topic_rf(c, victim, "after", 2);
  produce_rounds(c, 2);
  check_acked(c);
  assert_int_equal(cd_start(c, other), 0);
  expect_up(c, other);
  produce_rounds(c, 1);
  for (int i = 1; i < 3; i++) {
    wait_meta_same(c, i, 3 + META_TOPICS); /* the restarted one catches up */
  }
  assert_true(meta_topics(c, 0) == 3 + META_TOPICS);
  wait_caught_up(c);
  stop_and_compare(c);
}

/* A voter restarted on a metadata log with garbage before a later job's
 * records stays up, refuses only its metadata replica, and is rebuilt:
 * removed from the group by the leader, rejoined empty, a voter again with
 * the others' metadata; its partitions serve; every acknowledged batch is
 * on every replica once, in order. */
static void test_meta_damage_wal_replica_is_rebuilt(void **state)
{
  (void)state;
  struct cd_cluster c;
  int victim = 1;
  damage_meta_wal(&c, victim, "test_meta_damage_wal_replica_is_rebuilt");
  produce_rounds(&c, 1); /* the others serve meanwhile */
  long long took = wait_meta_rebuilt(&c, victim);
  print_message("node %d's metadata replica rebuilt %lld ms after its restart\n", victim, took);
  long long until = tu_now_ms() + WAIT_MS; /* the node's next tick says so */
  while (cd_metric(c.nodes[victim].admin_port, "cairn_meta_replica_state") != 3 &&
         tu_now_ms() < until) {
    usleep(100 * 1000);
  }
  assert_int_equal(cd_metric(c.nodes[victim].admin_port, "cairn_meta_replica_state"), 3);
  assert_true(tu_file_contains(c.nodes[victim].log, "the metadata replica is rebuilt"));
  expect_up(&c, victim);
  produce_rounds(&c, 2);
  check_acked(&c);
  meta_check_counts(&c, victim);
  cd_destroy(&c);
}

/* The same with zeros over a record (a lost sector), and the node
 * restarted again once rebuilt: it joins on its new log (no refusal, no
 * bootstrap). */
static void test_meta_damage_wal_zeros_then_restart(void **state)
{
  (void)state;
  struct cd_cluster c;
  int victim = 0;
  garble_zeros = true;
  damage_meta_wal(&c, victim, "test_meta_damage_wal_zeros_then_restart");
  garble_zeros = false;
  long long took = wait_meta_rebuilt(&c, victim);
  print_message("node %d's metadata replica rebuilt %lld ms after its restart\n", victim, took);
  cd_kill(&c, victim);
  long from = file_size(c.nodes[victim].log);
  assert_int_equal(cd_start(&c, victim), 0);
  expect_up(&c, victim);
  assert_false(log_line_since(c.nodes[victim].log, from, "the metadata replica is refused", ""));
  assert_true(log_line_since(c.nodes[victim].log, from, "joins without bootstrapping", ""));
  wait_meta_rebuilt(&c, victim);
  meta_check_counts(&c, victim);
  cd_destroy(&c);
}

/* The metadata leader is SIGKILLed as it starts removing the refused
 * replica, and restarted a second later: the rebuild resumes (the new
 * leader hears the next report) and completes. */
static void test_meta_damage_wal_rebuild_survives_leader_kill(void **state)
{
  (void)state;
  struct cd_cluster c;
  int victim = 2;
  damage_meta_wal(&c, victim, "test_meta_damage_wal_rebuild_survives_leader_kill");
  char line[128];
  snprintf(line, sizeof line, "remove node %llu (its metadata replica is refused)",
           (unsigned long long)c.nodes[victim].id);
  int leader = -1;
  long long until = tu_now_ms() + WAIT_MS;
  while (leader < 0 && tu_now_ms() < until) {
    for (int i = 0; i < 3; i++) {
      if (i != victim && tu_file_contains(c.nodes[i].log, line)) {
        leader = i;
      }
    }
    usleep(20 * 1000);
  }
  if (leader < 0) {
    fail_msg("no metadata leader started removing node %d: see %s", victim, c.root);
  }
  cd_kill(&c, leader);
  print_message("killed node %d, the metadata leader removing node %d\n", leader, victim);
  usleep(1000 * 1000);
  assert_int_equal(cd_start(&c, leader), 0);
  long long took = wait_meta_rebuilt(&c, victim);
  print_message("node %d's metadata replica rebuilt %lld ms after its restart\n", victim, took);
  expect_up(&c, leader);
  produce_rounds(&c, 2);
  check_acked(&c);
  meta_check_counts(&c, victim);
  cd_destroy(&c);
}

/* The damaged node is SIGKILLed in its own rebuild, once it dropped its
 * refused state and started Raft on its empty log, and restarted, twice:
 * it never opens as a bootstrapping voter again (its log is a discarded
 * one); it joins, or is refused once more while its new log is empty, and
 * is rebuilt. */
static void test_meta_damage_wal_kill_during_rebuild(void **state)
{
  (void)state;
  struct cd_cluster c;
  int victim = 1;
  damage_meta_wal(&c, victim, "test_meta_damage_wal_kill_during_rebuild");
  /* Twice: at once when its Raft starts on the empty log (nothing received
   * yet: refused again, one more removal), then once it applied some of
   * the log (it joins on what it holds). Never a bootstrap. */
  long from = 0;
  for (int round = 0; round < 2; round++) {
    long long until = tu_now_ms() + WAIT_MS;
    while (!log_line_since(c.nodes[victim].log, from, "joins without bootstrapping", "") &&
           tu_now_ms() < until) {
      usleep(10 * 1000);
    }
    assert_true(log_line_since(c.nodes[victim].log, from, "joins without bootstrapping", ""));
    while (round == 1 && meta_topics(&c, victim) == 0 && tu_now_ms() < until) {
      usleep(20 * 1000); /* the second time, once it applied some of the log */
    }
    long long voter = cd_metric(c.nodes[victim].admin_port, "cairn_meta_replica_voter");
    cd_kill(&c, victim);
    print_message("round %d: killed while %s\n", round, voter == 1 ? "a voter already" : "joining");
    from = file_size(c.nodes[victim].log);
    restarted_ms = tu_now_ms();
    assert_int_equal(cd_start(&c, victim), 0);
    until = tu_now_ms() + WAIT_MS;
    while (!log_line_since(c.nodes[victim].log, from, "metadata replica ", " open in ") &&
           !log_line_since(c.nodes[victim].log, from, "the metadata replica is refused", "") &&
           tu_now_ms() < until) {
      usleep(10 * 1000);
    }
    print_message("killed node %d in its rebuild (round %d): restarted, it was %s\n", victim,
                  round,
                  log_line_since(c.nodes[victim].log, from, "the metadata replica is refused", "")
                      ? "refused again (its new log was empty)"
                      : "joining on its new log");
    assert_false(log_line_since(c.nodes[victim].log, from, "metadata replica ", "(voter, on"));
  }
  long long took = wait_meta_rebuilt(&c, victim);
  print_message("node %d's metadata replica rebuilt %lld ms after its last restart\n", victim,
                took);
  assert_true(log_line_since(c.nodes[victim].log, from, "joins without bootstrapping", ""));
  produce_rounds(&c, 1);
  meta_check_counts(&c, victim);
  cd_destroy(&c);
}

/* Stopped (SIGTERM, a clean exit) and then killed while refused (before
 * the leader's answer), restarted: the durable mark keeps it refused, then
 * it is rebuilt. */
static void test_meta_damage_wal_kill_while_refused(void **state)
{
  (void)state;
  struct cd_cluster c;
  int victim = 0;
  damage_meta_wal(&c, victim, "test_meta_damage_wal_kill_while_refused");
  char meta[700];
  snprintf(meta, sizeof meta, "%.600s/meta/raft.refused", c.nodes[victim].dir);
  struct stat sb;
  /* First a clean stop (SIGTERM) while refused: no Raft to close. */
  assert_int_equal(ak_exit_code(cd_term(&c, victim, WAIT_MS)), 0);
  bool marked = stat(meta, &sb) == 0;
  print_message("stopped node %d (SIGTERM, exit 0) while %s\n", victim,
                marked ? "refused" : "already rebuilding");
  long first = file_size(c.nodes[victim].log);
  assert_int_equal(cd_start(&c, victim), 0);
  long long until = tu_now_ms() + WAIT_MS;
  while (marked && !log_line_since(c.nodes[victim].log, first, "the metadata replica is refused", "") &&
         tu_now_ms() < until) {
    usleep(10 * 1000);
  }
  cd_kill(&c, victim);
  marked = stat(meta, &sb) == 0;
  print_message("killed node %d while %s\n", victim, marked ? "refused" : "already rebuilding");
  long from = file_size(c.nodes[victim].log);
  restarted_ms = tu_now_ms();
  assert_int_equal(cd_start(&c, victim), 0);
  long long took = wait_meta_rebuilt(&c, victim);
  print_message("node %d's metadata replica rebuilt %lld ms after its second restart\n", victim,
                took);
  if (marked) {
    assert_true(log_line_since(c.nodes[victim].log, from, "the metadata replica is refused", ""));
  }
  assert_false(
      log_line_since(c.nodes[victim].log, from, "metadata group's Raft log is damaged", ""));
  meta_check_counts(&c, victim);
  cd_destroy(&c);
}

/* A voter whose metadata log was lost whole (its segment cut to nothing
 * while it was down: what a torn-tail repair cannot tell from a new log)
 * would bootstrap and vote on an empty log: its data directory names the
 * cluster, so it is refused and rebuilt like a damaged one. */
static void test_meta_damage_wal_lost_log_is_rebuilt(void **state)
{
  (void)state;
  struct cd_cluster c;
  int victim = 2;
  meta_truncate = true;
  damage_meta_wal(&c, victim, "test_meta_damage_wal_lost_log_is_rebuilt");
  meta_truncate = false;
  long long took = wait_meta_rebuilt(&c, victim);
  print_message("node %d's metadata replica rebuilt %lld ms after its restart\n", victim, took);
  assert_true(tu_file_contains(c.nodes[victim].log, "joins without bootstrapping"));
  produce_rounds(&c, 1);
  meta_check_counts(&c, victim);
  cd_destroy(&c);
}

/* A node started without --voters (it joined through --join) has only the
 * nodes watching it to report to: its refused metadata replica is removed
 * by the leader all the same and rejoins as a standby with the others'
 * metadata; every acknowledged batch is served. */
static void test_meta_damage_wal_joined_node_is_rebuilt(void **state)
{
  (void)state;
  struct cd_cluster c;
  uint64_t rnd = tu_seed("test_meta_damage_wal_joined_node_is_rebuilt");
  ak_init(&acked, TOPIC, NPART, BATCH_RECORDS, BATCH_VALUE);
  assert_int_equal(cd_init(&c, cairnd_bin, 4, 3, FAST), 0);
  if (cd_start_all(&c, WAIT_MS) != 0) {
    fail_msg("the cluster did not form: see %s", c.root);
  }
  char msg[256];
  assert_int_equal(cd_create_topic(&c, 0, TOPIC, NPART, 3, WAIT_MS, msg, sizeof msg), 0);
  produce_rounds(&c, 3);
  int victim = 3;
  /* The joined node's replica gets the log in a few large appends at
   * first: its log grows record by record once it follows. */
  wait_meta_same(&c, victim, 1);
  /* It joined after the group's first snapshot (one every 16 entries,
   * controller.c) and took it whole: more topics until its log holds
   * enough records to damage one in its first half. */
  int topics = 0;
  char dir[700];
  snprintf(dir, sizeof dir, "%.600s/meta/wal", c.nodes[victim].dir);
  static struct rec v[4096];
  while (topics < META_TOPICS || (topics < 4 * META_TOPICS &&
                                  wal_records(dir, v, (int)(sizeof v / sizeof v[0])) <= 24)) {
    char name[16];
    snprintf(name, sizeof name, "m%d", topics);
    create_topic(&c, topics % 3, name);
    produce_rounds(&c, 1);
    topics++;
    wait_meta_same(&c, victim, 1 + (size_t)topics);
  }
  cd_kill(&c, victim);
  create_topic(&c, 0, "down");
  produce_rounds(&c, 1);
  int64_t at = garble_wal_in(&c, victim, "meta/wal", &rnd);
  restarted_ms = tu_now_ms();
  assert_int_equal(cd_start(&c, victim), 0);
  char want[900];
  snprintf(want, sizeof want, "%.600s/meta/wal/%s: record at byte %" PRId64, c.nodes[victim].dir,
           WAL_SEG, at);
  long long until = tu_now_ms() + REBUILD_WAIT_MS;
  while ((cd_metric(c.nodes[victim].admin_port, "cairn_meta_replica_state") != 3 ||
          !meta_same(&c, victim, 0)) &&
         tu_now_ms() < until) {
    if (tu_proc_wait(&c.nodes[victim].proc, 0) != -1) {
      fail_msg("node %d exited: see %s", victim, c.nodes[victim].log);
    }
    usleep(200 * 1000);
  }
  if (cd_metric(c.nodes[victim].admin_port, "cairn_meta_replica_state") != 3) {
    fail_msg("node %d's metadata replica was not rebuilt: see %s", victim, c.nodes[victim].log);
  }
  print_message("node %d's metadata replica rebuilt %lld ms after its restart\n", victim,
                tu_now_ms() - restarted_ms);
  assert_true(tu_file_contains(c.nodes[victim].log, want));
  assert_true(meta_same(&c, victim, 0));
  assert_int_equal(meta_topics(&c, victim), 2 + (size_t)topics);
  assert_int_equal(cd_metric(c.nodes[victim].admin_port, "cairn_meta_replica_voter"), 0);
  uint64_t all[4] = {1, 2, 3, 4};
  assert_int_equal(cd_wait_alive(&c, victim, all, 4, WAIT_MS), 0);
  produce_rounds(&c, 2);
  check_acked(&c);
  assert_false(tu_file_contains(c.nodes[victim].log, "AddressSanitizer"));
  cd_destroy(&c);
}

int main(int argc, char **argv)
{
  if (argc < 2) {
    fprintf(stderr, "usage: %s CAIRND [meta]\n", argv[0]);
    return 2;
  }
  cairnd_bin = argv[1];
  /* "meta": the metadata group's log (its own ctest, test_meta_damage_wal) */
  const struct CMUnitTest meta[] = {
      cmocka_unit_test(test_meta_damage_wal_replica_is_rebuilt),
      cmocka_unit_test(test_meta_damage_wal_zeros_then_restart),
      cmocka_unit_test(test_meta_damage_wal_rebuild_survives_leader_kill),
      cmocka_unit_test(test_meta_damage_wal_kill_during_rebuild),
      cmocka_unit_test(test_meta_damage_wal_kill_while_refused),
      cmocka_unit_test(test_meta_damage_wal_joined_node_is_rebuilt),
      cmocka_unit_test(test_meta_damage_wal_lost_log_is_rebuilt),
  };
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_raft_damage_wal_replicas_are_rebuilt),
      cmocka_unit_test(test_raft_damage_wal_rebuild_survives_leader_kill),
      cmocka_unit_test(test_raft_damage_wal_restart_before_rebuild_stays_refused),
      cmocka_unit_test(test_raft_damage_wal_only_replica_stays_refused),
  };
  if (getenv("CAIRN_TEST_FILTER") != NULL) {
    cmocka_set_test_filter(getenv("CAIRN_TEST_FILTER"));
  }
  if (argc > 2 && strcmp(argv[2], "meta") == 0) {
    /* The metadata group's elections are logged at info: a failure prints
     * them (create_topic_rf). */
    setenv("CAIRN_LOG_LEVEL", "info", 1);
    return cmocka_run_group_tests_name("test_meta_damage_wal", meta, NULL, NULL);
  }
  return cmocka_run_group_tests(tests, NULL, NULL);
}
