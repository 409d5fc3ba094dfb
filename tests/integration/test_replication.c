/* test_replication.c - per-partition Raft groups with real processes: three
 * cairn-rgroup-driver nodes on loopback TCP, each a real libuv loop with
 * canonical/raft's disk log. Checks that a batch is acknowledged only after
 * commit, that acknowledged batches survive SIGKILL of the leader and of
 * followers (present once, in order, on every replica), that a deleted group
 * leaves no data, that a damaged Raft directory is a clear error, and that
 * garbage on the cluster port disturbs no group. */
#include "cluster.h"
#include "cluster/transport.h"
#include "proc.h"
#include "testutil.h"

#include <arpa/inet.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

static const char *driver_bin;

/* The three-node fixture (tests/lib/cluster.h) with `groups` groups. */
static void cluster_start_with(struct tc_cluster *c, int groups, const char *const *extra)
{
  tc_init(c, driver_bin, "repl", groups, extra);
  tc_start_all(c);
}

static void cluster_start(struct tc_cluster *c, int groups) { cluster_start_with(c, groups, NULL); }

static void cluster_stop(struct tc_cluster *c)
{
  tc_kill_all(c);
  if (tc_finish(c) != 0) {
    fail_msg("a node reported a sanitizer error (its log is named above)");
  }
}

static void test_replicas_agree_on_every_acknowledged_batch(void **state)
{
  static struct tc_cluster c;
  cluster_start(&c, 1);
  int l = tc_find_leader(&c, 1);
  assert_int_equal(tc_produce_many(&c, l, 1, 300), 300);
  tc_check_all_agree(&c, 1);
  /* The 300 were sent at once: the leader had several entries in flight
   * (RGROUP_MAX_INFLIGHT) and still coalesced the rest into fewer entries
   * than batches, and every replica holds them once, in order (above). */
  char stats[256];
  unsigned open, leaders;
  uint64_t entries, batches, pipelined;
  assert_int_equal(tc_ask(&c, l, stats, sizeof stats, "stats"), 0);
  assert_int_equal(sscanf(stats, "stats %u %u %" SCNu64 " %" SCNu64 " %" SCNu64, &open, &leaders,
                          &entries, &batches, &pipelined),
                   5);
  printf("leader: %" PRIu64 " entries for %" PRIu64 " batches, %" PRIu64 " pipelined\n",
         entries, batches, pipelined);
  assert_true(pipelined > 0);
  assert_true(entries < batches);
  /* A follower refuses produce and names the leader. */
  int f = (l + 1) % TC_NODES;
  char line[256];
  assert_int_equal(tc_ask(&c, f, line, sizeof line, "produce 1 1 1 1"), 0);
  char want[64];
  snprintf(want, sizeof want, "err 1 1 CAIRN_ENOTLEADER %d", l + 1);
  assert_string_equal(line, want);
  cluster_stop(&c);
}

static void test_batch_is_acknowledged_only_after_commit(void **state)
{
  static struct tc_cluster c;
  cluster_start(&c, 1);
  int l = tc_find_leader(&c, 1);
  assert_int_equal(tc_produce_many(&c, l, 1, 10), 10);
  /* Freeze both followers: the leader alone is no majority. */
  for (int i = 0; i < TC_NODES; i++) {
    if (i != l) {
      tu_proc_signal(&c.n[i].proc, SIGSTOP);
    }
  }
  assert_int_equal(tu_ctl_send(&c.n[l].ctl, "produce 1 777 3 64"), 0);
  char line[256];
  /* Without a majority nothing commits, so nothing may be acknowledged.
   * The lone leader may give up leadership (it cannot reach a quorum within
   * an election timeout) and fail the request: that is no acknowledgement. */
  int got = tu_ctl_line(&c.n[l].ctl, line, sizeof line, 1500);
  bool answered = got == 1;
  if (answered) {
    /* In doubt: in the log, maybe committed by a later leader. */
    assert_non_null(strstr(line, "err 1 777 CAIRN_EINDOUBT"));
  }
  for (int i = 0; i < TC_NODES; i++) {
    tu_proc_signal(&c.n[i].proc, SIGCONT);
  }
  if (!answered) {
    assert_int_equal(tu_ctl_line(&c.n[l].ctl, line, sizeof line, TC_DEADLINE_MS), 1);
  }
  /* Once the majority is back, either the batch committed or the request
   * was refused: never silently dropped. */
  uint64_t tag;
  int64_t off;
  int g;
  if (sscanf(line, "ok %d %" SCNu64 " %" SCNd64, &g, &tag, &off) == 3) {
    tc_record_ack(&c, tag, off);
  } else {
    assert_non_null(strstr(line, "err 1 777"));
  }
  tc_check_all_agree(&c, 1);
  cluster_stop(&c);
}

static void test_leader_killed_loses_no_acknowledged_batch(void **state)
{
  static struct tc_cluster c;
  cluster_start(&c, 1);
  for (int round = 0; round < 3; round++) {
    int l = tc_find_leader(&c, 1);
    assert_true(tc_produce_many(&c, l, 1, 100) > 0);
    /* Requests in flight while the leader dies: unknown, not acked. */
    for (int k = 0; k < 50; k++) {
      tu_ctl_send(&c.n[l].ctl, "produce 1 %" PRIu64 " 3 64", c.next_tag++);
    }
    usleep(2000);
    long long killed_at = tu_now_ms();
    tc_node_kill(&c, l);
    int nl = tc_find_leader(&c, 1);
    printf("round %d: leader %d killed, node %d leads after %lld ms\n", round, l + 1, nl + 1,
           tu_now_ms() - killed_at);
    assert_true(tc_produce_many(&c, nl, 1, 100) == 100);
    tc_node_start(&c, l);
    tc_check_all_agree(&c, 1);
  }
  cluster_stop(&c);
}

static void test_restarted_follower_catches_up(void **state)
{
  static struct tc_cluster c;
  cluster_start(&c, 1);
  int l = tc_find_leader(&c, 1);
  int f = (l + 1) % TC_NODES;
  assert_int_equal(tc_produce_many(&c, l, 1, 50), 50);
  tc_node_kill(&c, f);
  assert_int_equal(tc_produce_many(&c, l, 1, 300), 300);
  tc_node_start(&c, f);
  tc_check_all_agree(&c, 1);
  cluster_stop(&c);
}

static void test_deleted_group_leaves_no_data_and_others_go_on(void **state)
{
  static struct tc_cluster c;
  cluster_start(&c, 2);
  int l1 = tc_find_leader(&c, 1);
  assert_int_equal(tc_produce_many(&c, l1, 1, 20), 20);
  for (int i = 0; i < TC_NODES; i++) {
    char line[256];
    assert_int_equal(tc_ask(&c, i, line, sizeof line, "delete 2"), 0);
    assert_string_equal(line, "deleted 2");
    char path[600];
    snprintf(path, sizeof path, "%s/group-2", c.n[i].dir);
    struct stat st;
    assert_int_not_equal(stat(path, &st), 0);
  }
  assert_int_equal(tc_produce_many(&c, tc_find_leader(&c, 1), 1, 20), 20);
  tc_check_all_agree(&c, 1);
  cluster_stop(&c);
}

static void test_damaged_raft_directory_is_a_clear_error(void **state)
{
  const char *raft_log = getenv("CAIRN_TEST_RAFT_LOG");
  if (raft_log != NULL && strcmp(raft_log, "node") == 0) {
    printf("raft_uv's files are not used with --raft-log node (test_wal_model covers its "
           "damage): skipping\n");
    skip();
  }
  static struct tc_cluster c;
  cluster_start(&c, 1);
  int l = tc_find_leader(&c, 1);
  assert_int_equal(tc_produce_many(&c, l, 1, 20), 20);
  int v = (l + 1) % TC_NODES;
  tc_node_kill(&c, v);
  char raft_dir[600];
  snprintf(raft_dir, sizeof raft_dir, "%s/group-1/raft", c.n[v].dir);
  /* Both metadata copies overwritten with garbage of the right size. */
  tu_write_at(raft_dir, "metadata1", 0, "garbage-garbage-garbage-garbage-", 32);
  tu_write_at(raft_dir, "metadata2", 0, "garbage-garbage-garbage-garbage-", 32);
  /* It may exit before a control connection could be made. */
  tc_node_spawn(&c, v);
  int status = tu_proc_wait(&c.n[v].proc, 10000);
  assert_true(status != -1);
  assert_true(WIFEXITED(status) && WEXITSTATUS(status) != 0);
  /* Refused by raft_files_check before raft reads it, naming the file. */
  assert_true(tu_file_contains(c.n[v].log, "group 1: replica"));
  assert_true(tu_file_contains(c.n[v].log, "/group-1/raft/metadata1: at byte 0: format version"));
  tu_ctl_close(&c.n[v].ctl);
  /* The other two go on. */
  assert_int_equal(tc_produce_many(&c, tc_find_leader(&c, 1), 1, 20), 20);
  cluster_stop(&c);
}

/* Opens a raw TCP connection to a cluster port. */
static int raw_connect(int port)
{
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                           .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof sa), 0);
  return fd;
}

/* The node closes the connection (read returns 0 or an error). */
static void expect_closed(int fd, int timeout_ms)
{
  struct timeval tv = {.tv_sec = timeout_ms / 1000, .tv_usec = (timeout_ms % 1000) * 1000};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  char b[16];
  ssize_t r = recv(fd, b, sizeof b, 0);
  assert_true(r <= 0);
  close(fd);
}

static void test_garbage_on_cluster_port_disturbs_no_group(void **state)
{
  static struct tc_cluster c;
  cluster_start(&c, 2);
  int l = tc_find_leader(&c, 1);
  int port = c.n[l].cluster_port;

  int fd = raw_connect(port); /* wrong magic */
  assert_int_equal(send(fd, "GET / HTTP/1.1\r\n\r\n", 18, MSG_NOSIGNAL), 18);
  expect_closed(fd, 5000);

  uint8_t pre[300];
  int n = transport_preamble_encode(pre, TRANSPORT_KIND_RAFT, 99, 7, "127.0.0.1:1"); /* unknown group */
  fd = raw_connect(port);
  assert_int_equal(send(fd, pre, (size_t)n, MSG_NOSIGNAL), n);
  expect_closed(fd, 5000);

  n = transport_preamble_encode(pre, TRANSPORT_KIND_RAFT, 1, 7, "127.0.0.1:1");
  pre[n - 1] ^= 1; /* bad checksum */
  fd = raw_connect(port);
  assert_int_equal(send(fd, pre, (size_t)n, MSG_NOSIGNAL), n);
  expect_closed(fd, 5000);

  int silent = raw_connect(port); /* says nothing */
  n = transport_preamble_encode(pre, TRANSPORT_KIND_RAFT, 1, 7, "127.0.0.1:1");
  fd = raw_connect(port); /* a preamble, then a truncated Raft frame */
  assert_int_equal(send(fd, pre, (size_t)n, MSG_NOSIGNAL), n);
  assert_int_equal(send(fd, "\x01\x00\x00", 3, MSG_NOSIGNAL), 3);
  close(fd);

  /* Both groups still replicate. */
  assert_int_equal(tc_produce_many(&c, tc_find_leader(&c, 1), 1, 30), 30);
  c.acks = 0; /* group 2's offsets are its own */
  assert_int_equal(tc_produce_many(&c, tc_find_leader(&c, 2), 2, 30), 30);
  tc_check_all_agree(&c, 2);
  expect_closed(silent, 8000);
  assert_true(tu_file_contains(c.n[l].log, "bad preamble"));
  assert_true(tu_file_contains(c.n[l].log, "unknown group 99"));
  assert_true(tu_file_contains(c.n[l].log, "no preamble before the deadline"));
  cluster_stop(&c);
}

/* Node i's "hash" answer: log end, CRC of all its bytes, catching up. */
static void node_hash(struct tc_cluster *c, int i, int g, int64_t *next, unsigned *crc, int *catching)
{
  char line[256];
  int gg;
  assert_int_equal(tc_ask(c, i, line, sizeof line, "hash %d", g), 0);
  assert_int_equal(sscanf(line, "hash %d %" SCNd64 " %x %d", &gg, next, crc, catching), 4);
}

/* Waits until nodes a and b hold byte-identical logs, not catching up. */
static void wait_identical(struct tc_cluster *c, int a, int b, int g)
{
  long long deadline = tu_now_ms() + TC_DEADLINE_MS;
  int64_t na = -1, nb = -2;
  unsigned ca = 0, cb = 1;
  int ka = 1, kb = 1;
  while (tu_now_ms() < deadline) {
    node_hash(c, a, g, &na, &ca, &ka);
    node_hash(c, b, g, &nb, &cb, &kb);
    if (na == nb && ca == cb && !ka && !kb) {
      return;
    }
    usleep(100000);
  }
  fail_msg("nodes %d and %d differ: end %" PRId64 "/%" PRId64 " crc %08x/%08x catching %d/%d",
           a + 1, b + 1, na, nb, ca, cb, ka, kb);
}

static const char *const small_raft_log[] = {"--raft-log-budget", "32768", "--no-preferred-leader",
                                             NULL};

static void test_follower_far_behind_catches_up_through_snapshot(void **state)
{
  static struct tc_cluster c;
  cluster_start_with(&c, 1, small_raft_log);
  int l = tc_find_leader(&c, 1);
  int f = (l + 1) % TC_NODES;
  assert_int_equal(tc_produce_many(&c, l, 1, 50), 50);
  tc_node_kill(&c, f);
  /* Far more entries than Raft keeps after a snapshot with a 32 KiB budget
   * (small rounds: group commit would fold big ones into few entries). */
  for (int k = 0; k < 150; k++) {
    assert_int_equal(tc_produce_many(&c, l, 1, 8), 8);
  }
  tc_node_start(&c, f);
  wait_identical(&c, l, f, 1);
  assert_true(tu_file_contains(c.n[f].log, "fetching from a peer"));
  assert_true(tu_file_contains(c.n[f].log, "caught up"));
  tc_check_all_agree(&c, 1);
  cluster_stop(&c);
}

/* Node i's view of producer pid in group g: "EPOCH SEQ OFFSET N" or "none". */
static void node_pstate(struct tc_cluster *c, int i, int g, int64_t pid, char *out, size_t n)
{
  char line[256];
  assert_int_equal(tc_ask(c, i, line, sizeof line, "pstate %d %" PRId64, g, pid), 0);
  const char *rest = strchr(line + strlen("pstate "), ' ');
  assert_non_null(rest);
  snprintf(out, n, "%s", rest + 1);
}

/* An idempotent produce of sequence seq through node i; returns the
 * answer line. An acknowledgement is recorded for the log checks unless
 * retry (a retry carries a new tag: the partition answers it with the
 * original batch's offset and does not store it). */
static void iproduce_as(struct tc_cluster *c, int i, int g, int64_t pid, int seq, bool retry,
                        char *out, size_t n)
{
  uint64_t tag = c->next_tag++;
  assert_int_equal(tu_ctl_send(&c->n[i].ctl, "iproduce %d %" PRIu64 " %" PRId64 " 0 %d", g, tag,
                               pid, seq),
                   0);
  assert_int_equal(tu_ctl_line(&c->n[i].ctl, out, n, 15000), 1);
  int64_t off;
  uint64_t got;
  int gg;
  if (!retry && sscanf(out, "ok %d %" SCNu64 " %" SCNd64, &gg, &got, &off) == 3) {
    tc_record_ack(c, got, off);
  }
}

static void iproduce(struct tc_cluster *c, int i, int g, int64_t pid, int seq, char *out,
                     size_t n)
{
  iproduce_as(c, i, g, pid, seq, false, out, n);
}

/* The producer table reaches a replica that catches up through a snapshot
 * (taken from the snapshot, plus what was fetched after it), and one that
 * restarts (from <replica>/producers plus the batches after it): a retry
 * is judged the same on every replica. */
static void test_producer_table_survives_snapshot_catch_up_and_restart(void **state)
{
  static struct tc_cluster c;
  cluster_start_with(&c, 1, small_raft_log);
  int l = tc_find_leader(&c, 1);
  int f = (l + 1) % TC_NODES;
  char line[256], want[128], got[128];
  iproduce(&c, l, 1, 42, 0, line, sizeof line);
  assert_true(strncmp(line, "ok ", 3) == 0);
  tc_node_kill(&c, f);
  /* Far more entries than Raft keeps with a 32 KiB budget: f will need
   * the snapshot, whose producer table includes producer 42. */
  int seq = 1;
  for (int k = 0; k < 150; k++) {
    assert_int_equal(tc_produce_many(&c, l, 1, 8), 8);
    if (k % 10 == 0) {
      iproduce(&c, l, 1, 42, seq++, line, sizeof line);
      assert_true(strncmp(line, "ok ", 3) == 0);
    }
  }
  iproduce(&c, l, 1, 43, 0, line, sizeof line); /* a producer only in the tail */
  assert_true(strncmp(line, "ok ", 3) == 0);
  tc_node_start(&c, f);
  wait_identical(&c, l, f, 1);
  assert_true(tu_file_contains(c.n[f].log, "caught up"));
  /* One more entry so that f applies after the catch-up (the table is
   * adopted before the first apply). */
  iproduce(&c, l, 1, 42, seq++, line, sizeof line);
  assert_true(strncmp(line, "ok ", 3) == 0);
  wait_identical(&c, l, f, 1);
  assert_true(tu_file_contains(c.n[f].log, "producer table of the snapshot adopted"));
  node_pstate(&c, l, 1, 42, want, sizeof want);
  node_pstate(&c, f, 1, 42, got, sizeof got);
  assert_string_equal(got, want);
  printf("  producer 42 after the catch-up (epoch, sequence, offset, window): %s on both\n",
         got);
  assert_int_equal(atoi(strchr(got, ' ') + 1), seq - 1);
  node_pstate(&c, l, 1, 43, want, sizeof want);
  node_pstate(&c, f, 1, 43, got, sizeof got);
  assert_string_equal(got, want);
  /* A restart of the follower: the file and the tail give the same table. */
  tc_node_kill(&c, f);
  tc_node_start(&c, f);
  node_pstate(&c, l, 1, 42, want, sizeof want);
  node_pstate(&c, f, 1, 42, got, sizeof got);
  assert_string_equal(got, want);
  /* A retry of the newest batch is a duplicate: the log does not grow. */
  struct tc_dump *d = malloc(sizeof *d);
  tc_dump_node(&c, l, 1, d);
  int64_t end = d->next;
  iproduce_as(&c, l, 1, 42, seq - 1, true, line, sizeof line);
  assert_true(strncmp(line, "ok ", 3) == 0);
  iproduce(&c, l, 1, 42, seq + 1, line, sizeof line);
  assert_non_null(strstr(line, "CAIRN_EOUT_OF_ORDER"));
  tc_dump_node(&c, l, 1, d);
  assert_int_equal(d->next, end);
  free(d);
  tc_check_all_agree(&c, 1);
  cluster_stop(&c);
}

/* Node i's "info" of group g: log start, end and last Raft index. */
static void node_info(struct tc_cluster *c, int i, int g, int64_t *start, int64_t *next,
                      uint64_t *last)
{
  char line[256];
  int gg;
  assert_int_equal(tc_ask(c, i, line, sizeof line, "info %d", g), 0);
  assert_int_equal(sscanf(line, "info %d %" SCNd64 " %" SCNd64 " %" SCNu64, &gg, start, next, last),
                   4);
}

/* The Raft index of node i's last snapshot of group g. */
static uint64_t node_snapshot_index(struct tc_cluster *c, int i, int g)
{
  char line[256];
  int gg;
  uint64_t taken, index;
  assert_int_equal(tc_ask(c, i, line, sizeof line, "snap %d", g), 0);
  assert_int_equal(sscanf(line, "snap %d %" SCNu64 " %" SCNu64, &gg, &taken, &index), 3);
  return index;
}

/* One plain produce of one record of vsize bytes through node i, waited for. */
static void produce_one(struct tc_cluster *c, int i, int g, size_t vsize)
{
  tc_send_produce(c, i, g, 1, vsize);
  int acked = 0;
  tc_collect(c, i, 1, 15000, &acked);
  assert_int_equal(acked, 1);
}

/* Retention on node i down to its active segment; returns the log start. */
static int64_t node_retain_all(struct tc_cluster *c, int i, int g)
{
  char line[256];
  int gg, rv;
  unsigned deleted;
  int64_t start;
  assert_int_equal(tc_ask(c, i, line, sizeof line, "retain %d 1", g), 0);
  assert_int_equal(sscanf(line, "retain %d %d %u %" SCNd64, &gg, &rv, &deleted, &start), 4);
  assert_int_equal(rv, 0);
  return start;
}

/* A cluster of one group started with args: its leader l, the follower f
 * that is then SIGKILLed and the other follower o; idempotent producer 42
 * wrote its first batch before f went. */
static void start_and_leave_behind(struct tc_cluster *c, const char *const *args, int *l, int *f,
                                   int *o)
{
  cluster_start_with(c, 1, args);
  *l = tc_find_leader(c, 1);
  *f = (*l + 1) % TC_NODES;
  *o = (*l + 2) % TC_NODES;
  char line[256];
  iproduce(c, *l, 1, 42, 0, line, sizeof line);
  assert_true(strncmp(line, "ok ", 3) == 0);
  tc_node_kill(c, *f);
}

/* On the node-wide log with the mux in every variant: over raft_uv's own
 * transport the leader queues AppendEntries for a peer that is down and
 * delivers them once it is back, and a follower could then catch up from
 * that queue (entries the leader has compacted since) instead of the
 * snapshot this test is about; the mux drops frames for a peer that is
 * down, as cairnd's nodes (the default) do. */
static const char *const small_segments[] = {
    "--snapshot-threshold", "16",   "--segment-bytes", "65536", "--no-preferred-leader",
    "--raft-log",           "node", "--raft-mux",      NULL};

/* A follower far behind installs the leader's last snapshot, but its peers'
 * retention has since deleted past that snapshot's end: the follower's log
 * restarts at their log start, and the producers whose batches lay between
 * the snapshot's end and that start are in no snapshot and in no log it
 * can fetch. It gets them from a peer's producer table, or it would refuse
 * such a producer's next batch (UNKNOWN_PRODUCER) where its peers append
 * it, and the replicas' logs would part. Then the same after a SIGKILL and
 * restart of that follower (the table it adopted is on its disk). */
static void test_follower_behind_retention_gets_the_producer_table_from_a_peer(void **state)
{
  static struct tc_cluster c;
  int l, f, o;
  char line[256], want[128], got[128];
  start_and_leave_behind(&c, small_segments, &l, &f, &o);
  /* Far more entries than the leader keeps after a snapshot (16 between
   * snapshots, 128 trailing): f will need one. */
  for (int k = 0; k < 200; k++) {
    produce_one(&c, l, 1, 4000);
  }
  /* A new producer's first batch after the leader's last snapshot, then a
   * few big batches, fewer than the snapshot threshold, so that its batch
   * is in a closed segment: retention deletes it and no snapshot holds it
   * yet. A snapshot may still fall among them: then try again. */
  int64_t pid = -1, pid_off = -1, start_l = -1, start_o = -1;
  for (int attempt = 0; attempt < 20 && pid < 0; attempt++) {
    int64_t p = 100 + attempt;
    iproduce(&c, l, 1, p, 0, line, sizeof line);
    assert_true(strncmp(line, "ok ", 3) == 0);
    int64_t off = -1;
    assert_int_equal(sscanf(line, "ok %*d %*u %" SCNd64, &off), 1);
    int64_t s, n;
    uint64_t p_index;
    node_info(&c, l, 1, &s, &n, &p_index);
    for (int k = 0; k < 3; k++) {
      produce_one(&c, l, 1, 30000);
    }
    if (node_snapshot_index(&c, l, 1) >= p_index) {
      continue;
    }
    start_l = node_retain_all(&c, l, 1);
    start_o = node_retain_all(&c, o, 1);
    if (start_l > off && start_o > off && node_snapshot_index(&c, l, 1) < p_index) {
      pid = p;
      pid_off = off;
    }
  }
  assert_true(pid >= 0);
  printf("  producer %" PRId64 "'s batch at offset %" PRId64 ": after the leader's snapshot, "
         "below the peers' log start (%" PRId64 ", %" PRId64 ")\n",
         pid, pid_off, start_l, start_o);
  tc_node_start(&c, f);
  wait_identical(&c, l, f, 1);
  assert_true(tu_file_contains(c.n[f].log, "restarts there"));
  assert_true(tu_file_contains(c.n[f].log, "producer table from a peer"));
  /* The producer goes on: every replica appends its next batch. */
  iproduce(&c, l, 1, pid, 1, line, sizeof line);
  assert_true(strncmp(line, "ok ", 3) == 0);
  wait_identical(&c, l, f, 1);
  wait_identical(&c, l, o, 1);
  node_pstate(&c, l, 1, pid, want, sizeof want);
  node_pstate(&c, f, 1, pid, got, sizeof got);
  assert_string_equal(got, want);
  node_pstate(&c, l, 1, 42, want, sizeof want);
  node_pstate(&c, f, 1, 42, got, sizeof got);
  assert_string_equal(got, want);
  /* f SIGKILLed and restarted: the table it adopted was saved. */
  tc_node_kill(&c, f);
  tc_node_start(&c, f);
  node_pstate(&c, l, 1, pid, want, sizeof want);
  node_pstate(&c, f, 1, pid, got, sizeof got);
  assert_string_equal(got, want);
  iproduce(&c, l, 1, pid, 2, line, sizeof line);
  assert_true(strncmp(line, "ok ", 3) == 0);
  wait_identical(&c, l, f, 1);
  /* As if f had been killed before it saved the peer's table: without its
   * table files its log (from the peers' start) names neither producer 42
   * nor the first batch of pid; it asks a peer for the table again. */
  tc_node_kill(&c, f);
  char path[700];
  snprintf(path, sizeof path, "%s/group-1/producers", c.n[f].dir);
  assert_int_equal(unlink(path), 0);
  snprintf(path, sizeof path, "%s/group-1/producers.cmd", c.n[f].dir);
  assert_int_equal(unlink(path), 0);
  tc_node_start(&c, f);
  wait_identical(&c, l, f, 1);
  assert_true(tu_file_contains(c.n[f].log, "lacks producers below the log's start"));
  node_pstate(&c, l, 1, 42, want, sizeof want);
  node_pstate(&c, f, 1, 42, got, sizeof got);
  assert_string_equal(got, want);
  node_pstate(&c, l, 1, pid, want, sizeof want);
  node_pstate(&c, f, 1, pid, got, sizeof got);
  assert_string_equal(got, want);
  iproduce(&c, l, 1, 42, 1, line, sizeof line);
  assert_true(strncmp(line, "ok ", 3) == 0);
  wait_identical(&c, l, f, 1);
  wait_identical(&c, l, o, 1);
  cluster_stop(&c);
}

/* A LOG_START through node i's replica of group g (its leader): every
 * record below offset (-1: the high watermark) deleted on every replica.
 * Returns the log start it answers. */
static int64_t delete_below(struct tc_cluster *c, int i, int g, int64_t offset)
{
  char line[256];
  assert_int_equal(
      tu_ctl_send(&c->n[i].ctl, "logstart %d %" PRIu64 " %" PRId64, g, c->next_tag++, offset), 0);
  assert_int_equal(tu_ctl_line(&c->n[i].ctl, line, sizeof line, 15000), 1);
  int64_t start = -1;
  assert_int_equal(sscanf(line, "ok %*d %*u %" SCNd64, &start), 1);
  return start;
}

/* Every record deleted (a LOG_START at the log's end) while a follower was
 * down and far behind: it installs the snapshot taken after the delete, its
 * log restarts at the peers' start, and there is nothing after it to
 * fetch. It must catch up all the same, and take the next batches. */
static void test_follower_behind_an_emptied_log_catches_up(void **state)
{
  static struct tc_cluster c;
  int l, f, o;
  char line[256], want[128], got[128];
  start_and_leave_behind(&c, small_raft_log, &l, &f, &o);
  for (int k = 0; k < 150; k++) {
    assert_int_equal(tc_produce_many(&c, l, 1, 8), 8);
  }
  int64_t s, n;
  uint64_t last;
  node_info(&c, l, 1, &s, &n, &last);
  assert_int_equal(delete_below(&c, l, 1, -1), n);
  /* Every live replica took its snapshot after the delete. */
  long long deadline = tu_now_ms() + TC_DEADLINE_MS;
  while ((node_snapshot_index(&c, l, 1) <= last || node_snapshot_index(&c, o, 1) <= last) &&
         tu_now_ms() < deadline) {
    usleep(50000);
  }
  assert_true(node_snapshot_index(&c, l, 1) > last);
  tc_node_start(&c, f);
  wait_identical(&c, l, f, 1);
  int64_t fs, fn;
  node_info(&c, f, 1, &fs, &fn, &last);
  assert_int_equal(fs, n);
  assert_int_equal(fn, n);
  /* A SIGKILL and restart of f before anything more is appended: its empty
   * log keeps the Raft index it took over (the checkpoint), so the
   * entries whose batches were deleted are not applied again. */
  tc_node_kill(&c, f);
  tc_node_start(&c, f);
  wait_identical(&c, l, f, 1);
  node_info(&c, f, 1, &fs, &fn, &last);
  assert_int_equal(fs, n);
  assert_int_equal(fn, n);
  /* Producer 42, whose one batch was deleted, goes on everywhere. */
  iproduce(&c, l, 1, 42, 1, line, sizeof line);
  assert_true(strncmp(line, "ok ", 3) == 0);
  assert_int_equal(tc_produce_many(&c, l, 1, 8), 8);
  wait_identical(&c, l, f, 1);
  wait_identical(&c, l, o, 1);
  node_pstate(&c, l, 1, 42, want, sizeof want);
  node_pstate(&c, f, 1, 42, got, sizeof got);
  assert_string_equal(got, want);
  cluster_stop(&c);
}

/* A LOG_START applied while a follower was down with its log already past
 * the new start: the follower comes back through the snapshot taken after
 * the delete (the command is inside it, an entry it never applies) and
 * fetches what follows. Its log must then start where its peers' do, not
 * keep the deleted records (and serve them again as leader), as Kafka's
 * followers take their leader's log start; and keep that start across a
 * SIGKILL and restart. */
static void test_follower_behind_a_delete_inside_a_snapshot_takes_its_start(void **state)
{
  static struct tc_cluster c;
  cluster_start_with(&c, 1, small_raft_log);
  int l = tc_find_leader(&c, 1);
  int f = (l + 1) % TC_NODES;
  int o = (l + 2) % TC_NODES;
  for (int k = 0; k < 20; k++) {
    assert_int_equal(tc_produce_many(&c, l, 1, 8), 8);
  }
  wait_identical(&c, l, f, 1);
  int64_t s, n;
  uint64_t last;
  node_info(&c, l, 1, &s, &n, &last);
  tc_node_kill(&c, f);
  int64_t want = n / 2;
  assert_int_equal(delete_below(&c, l, 1, want), want);
  for (int k = 0; k < 150; k++) {
    assert_int_equal(tc_produce_many(&c, l, 1, 8), 8);
  }
  node_info(&c, l, 1, &s, &n, &last);
  long long deadline = tu_now_ms() + TC_DEADLINE_MS;
  while ((node_snapshot_index(&c, l, 1) < last || node_snapshot_index(&c, o, 1) < last) &&
         tu_now_ms() < deadline) {
    assert_int_equal(tc_produce_many(&c, l, 1, 8), 8); /* until both snapshot past it all */
    node_info(&c, l, 1, &s, &n, &last);
    usleep(50000);
  }
  tc_node_start(&c, f);
  wait_identical(&c, l, f, 1);
  int64_t fs, fn;
  node_info(&c, f, 1, &fs, &fn, &last);
  assert_int_equal(fs, want);
  tc_node_kill(&c, f);
  tc_node_start(&c, f);
  wait_identical(&c, l, f, 1);
  node_info(&c, f, 1, &fs, &fn, &last);
  assert_int_equal(fs, want);
  wait_identical(&c, l, o, 1);
  cluster_stop(&c);
}

/* Pipelined idempotent produces, each sent twice in a row, so that group
 * commit puts originals and their duplicates into the same Raft entries:
 * every request gets its own answer, a duplicate the offset of its
 * original, and each batch is stored once. */
static void test_duplicates_within_one_entry_get_the_original_offset(void **state)
{
  static struct tc_cluster c;
  cluster_start(&c, 1);
  int l = tc_find_leader(&c, 1);
  enum { N = 40 };
  uint64_t tags[2 * N];
  for (int k = 0; k < N; k++) {
    for (int copy = 0; copy < 2; copy++) {
      tags[2 * k + copy] = c.next_tag++;
      assert_int_equal(tu_ctl_send(&c.n[l].ctl, "iproduce 1 %" PRIu64 " 7 0 %d",
                                   tags[2 * k + copy], k),
                       0);
    }
  }
  int64_t off[2 * N];
  for (int k = 0; k < 2 * N; k++) {
    off[k] = -2;
  }
  for (int k = 0; k < 2 * N; k++) {
    char line[256];
    assert_int_equal(tu_ctl_line(&c.n[l].ctl, line, sizeof line, 15000), 1);
    uint64_t tag;
    int64_t o;
    int g;
    if (sscanf(line, "ok %d %" SCNu64 " %" SCNd64, &g, &tag, &o) != 3) {
      fail_msg("answer %d: %s", k, line);
    }
    for (int j = 0; j < 2 * N; j++) {
      if (tags[j] == tag) {
        off[j] = o;
      }
    }
  }
  for (int k = 0; k < N; k++) {
    assert_int_equal(off[2 * k + 1], off[2 * k]); /* the duplicate: the original's offset */
    assert_int_equal(off[2 * k], k);              /* one record each, stored once, in order */
    tc_record_ack(&c, tags[2 * k], off[2 * k]);
  }
  char line[256];
  assert_int_equal(tc_ask(&c, l, line, sizeof line, "stats"), 0);
  printf("  %d produces (half of them duplicates) answered; leader stats: %s\n", 2 * N, line);
  tc_check_all_agree(&c, 1);
  cluster_stop(&c);
}

static void test_catch_up_completes_from_third_replica_when_leader_dies(void **state)
{
  static struct tc_cluster c;
  cluster_start_with(&c, 1, small_raft_log);
  int l = tc_find_leader(&c, 1);
  int f = (l + 1) % TC_NODES;
  int third = (l + 2) % TC_NODES;
  tc_node_kill(&c, f);
  for (int k = 0; k < 150; k++) {
    assert_int_equal(tc_produce_many(&c, l, 1, 8), 8);
  }
  /* The follower comes back and starts fetching; the leader dies. */
  tc_node_start(&c, f);
  long long deadline = tu_now_ms() + TC_DEADLINE_MS;
  while (!tu_file_contains(c.n[f].log, "fetching from a peer") && tu_now_ms() < deadline) {
    usleep(5000);
  }
  tc_node_kill(&c, l);
  tc_find_leader(&c, 1);
  wait_identical(&c, f, third, 1);
  assert_int_equal(tc_produce_many(&c, tc_find_leader(&c, 1), 1, 20), 20);
  tc_node_start(&c, l);
  tc_check_all_agree(&c, 1);
  wait_identical(&c, f, l, 1);
  cluster_stop(&c);
}

static void test_sigterm_hands_leadership_over_first(void **state)
{
  static struct tc_cluster c;
  cluster_start(&c, 1);
  int l = tc_find_leader(&c, 1);
  assert_int_equal(tc_produce_many(&c, l, 1, 50), 50);
  tu_ctl_close(&c.n[l].ctl);
  tu_proc_signal(&c.n[l].proc, SIGTERM);
  int status = tu_proc_wait(&c.n[l].proc, TC_DEADLINE_MS);
  if (status == -1 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    fail_msg("node %d did not exit cleanly after SIGTERM: wait status %d (see %s)", l + 1,
             status, c.n[l].log);
  }
  assert_true(tu_file_contains(c.n[l].log, "handing leadership to a caught-up replica (shutting down)"));
  char done[64];
  snprintf(done, sizeof done, "leadership transfer done, leader is now %d", (l + 1) % TC_NODES + 1);
  bool to_other = tu_file_contains(c.n[l].log, done);
  snprintf(done, sizeof done, "leadership transfer done, leader is now %d", (l + 2) % TC_NODES + 1);
  assert_true(to_other || tu_file_contains(c.n[l].log, done));
  int nl = tc_find_leader(&c, 1);
  assert_int_not_equal(nl, l);
  assert_int_equal(tc_produce_many(&c, nl, 1, 50), 50);
  tc_node_start(&c, l);
  tc_check_all_agree(&c, 1);
  cluster_stop(&c);
}

/* The replicas of a stopping node refuse leadership (rgroup_handoff): with
 * both followers stopping, the leader's handoff at SIGTERM is refused, it
 * does not try a second time, and it exits cleanly; the stopping followers
 * elect no one after it is gone (no Raft tick, no prompt election), then
 * close unflushed; restarted, every node has every acknowledged batch once.
 * Before, at 10,000 partitions on three nodes stopped at once, leaderships
 * bounced between stopping nodes and no node stopped within 30 s. */
static void test_stopping_replicas_refuse_leadership(void **state)
{
  static struct tc_cluster c;
  c.no_preferred_leader = true; /* the preferred replica's tick would move it */
  cluster_start(&c, 1);
  int l = tc_find_leader(&c, 1);
  assert_int_equal(tc_produce_many(&c, l, 1, 50), 50);
  int f[2] = {(l + 1) % TC_NODES, (l + 2) % TC_NODES};
  char line[128];
  for (int k = 0; k < 2; k++) {
    assert_int_equal(tc_ask(&c, f[k], line, sizeof line, "handoff 1"), 0);
    assert_string_equal(line, "handoff 1 0");
  }
  tc_wait_applied(&c, f[0], 1, c.ack_off[c.acks - 1] + 1, TC_DEADLINE_MS);
  tc_wait_applied(&c, f[1], 1, c.ack_off[c.acks - 1] + 1, TC_DEADLINE_MS);
  tu_ctl_close(&c.n[l].ctl);
  tu_proc_signal(&c.n[l].proc, SIGTERM);
  int status = tu_proc_wait(&c.n[l].proc, TC_DEADLINE_MS);
  if (status == -1 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    fail_msg("node %d did not exit cleanly after SIGTERM: wait status %d (see %s)", l + 1, status,
             c.n[l].log);
  }
  assert_int_equal(tu_file_count(c.n[l].log, "handing leadership"), 1);
  assert_true(tu_file_contains(c.n[f[0]].log, "refuses leadership") ||
              tu_file_contains(c.n[f[1]].log, "refuses leadership"));
  /* Five election timeouts (600 ms) with the leader gone: still no one. */
  for (int t = 0; t < 30; t++) {
    usleep(100000);
    for (int k = 0; k < 2; k++) {
      char role[32];
      if (strcmp(tc_node_role(&c, f[k], 1, role, sizeof role), "follower") != 0) {
        fail_msg("stopping node %d is %s after the leader left", f[k] + 1, role);
      }
    }
  }
  for (int k = 0; k < 2; k++) {
    tu_ctl_close(&c.n[f[k]].ctl);
    tu_proc_signal(&c.n[f[k]].proc, SIGTERM);
  }
  for (int k = 0; k < 2; k++) {
    status = tu_proc_wait(&c.n[f[k]].proc, TC_DEADLINE_MS);
    if (status == -1 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      fail_msg("node %d did not exit cleanly after SIGTERM: wait status %d (see %s)", f[k] + 1,
               status, c.n[f[k]].log);
    }
  }
  for (int i = 0; i < TC_NODES; i++) {
    tc_node_start(&c, i);
  }
  tc_check_all_agree(&c, 1);
  assert_int_equal(tc_produce_many(&c, tc_find_leader(&c, 1), 1, 20), 20);
  tc_check_all_agree(&c, 1);
  cluster_stop(&c);
}

static void test_preferred_replica_takes_leadership_back(void **state)
{
  static struct tc_cluster c;
  cluster_start(&c, 1);
  tc_find_leader(&c, 1);
  tc_node_kill(&c, 0); /* node 1, the preferred replica, goes away */
  int l = tc_find_leader(&c, 1);
  assert_int_not_equal(l, 0);
  assert_int_equal(tc_produce_many(&c, l, 1, 100), 100);
  tc_node_start(&c, 0);
  long long deadline = tu_now_ms() + TC_DEADLINE_MS;
  char line[256] = "";
  while (tu_now_ms() < deadline) {
    if (tc_ask(&c, 0, line, sizeof line, "leader 1") == 0 && strstr(line, " leader") != NULL) {
      break;
    }
    usleep(100000);
  }
  assert_non_null(strstr(line, "leader 1 1 leader"));
  tc_check_all_agree(&c, 1);
  cluster_stop(&c);
}

/* The leader's heartbeat pace of group g on node i (rgroup_pace.h): fills
 * idle (0/1), term, quiesces and wakes; false if the node does not answer. */
static bool pace_of(struct tc_cluster *c, int i, int g, int *idle, uint64_t *term,
                    uint64_t *quiesces, uint64_t *wakes)
{
  char line[256];
  int gg;
  return tc_node_live(c, i) && tc_ask(c, i, line, sizeof line, "pace %d", g) == 0 &&
         sscanf(line, "pace %d %d %" SCNu64 " %" SCNu64 " %" SCNu64, &gg, idle, term, quiesces,
                wakes) == 5;
}

/* Waits until node i leads group g on the idle heartbeat, with more than
 * `after` quiesces so far; returns its term. Fails the test otherwise. */
static uint64_t wait_quiesced(struct tc_cluster *c, int i, int g, uint64_t after)
{
  long long deadline = tu_now_ms() + TC_DEADLINE_MS;
  int idle = 0;
  uint64_t term = 0, quiesces = 0, wakes = 0;
  while (tu_now_ms() < deadline) {
    if (pace_of(c, i, g, &idle, &term, &quiesces, &wakes) && idle == 1 && quiesces > after) {
      return term;
    }
    usleep(100000);
  }
  tc_print_roles(c, g);
  fail_msg("node %d did not quiesce group %d within %d ms (idle %d, quiesces %" PRIu64 ")",
           i + 1, g, TC_DEADLINE_MS, idle, quiesces);
  return 0;
}

/* cairnd's default Raft timings (the driver's own are shorter): heartbeat
 * 100 ms, election 1,000 ms, so a quiesced leader beats every 400 ms. */
static const char *const default_timings[] = {"--heartbeat-ms", "100", "--election-ms", "1000",
                                              NULL};

/* An idle group's leader drops to the slow heartbeat and keeps its
 * leadership: over 15 minimum election timeouts, no replica's term moves.
 * A write to the quiesced group wakes it, is acknowledged and reaches every
 * replica; then the group quiesces again. */
static void test_idle_group_quiesces_keeps_leader_and_takes_writes(void **state)
{
  static struct tc_cluster c;
  tc_init(&c, driver_bin, "repl", 1, default_timings);
  c.no_preferred_leader = true; /* leadership moves only by elections */
  tc_start_all(&c);
  int l = tc_find_leader(&c, 1);
  assert_int_equal(tc_produce_many(&c, l, 1, 20), 20);
  uint64_t term = wait_quiesced(&c, l, 1, 0);
  int idle;
  uint64_t t, q0, w0, q, w;
  assert_true(pace_of(&c, l, 1, &idle, &t, &q0, &w0));
  usleep(15 * 1000 * 1000);
  for (int i = 0; i < TC_NODES; i++) {
    assert_true(pace_of(&c, i, 1, &idle, &t, &q, &w));
    printf("node %d: term %" PRIu64 " (was %" PRIu64 "), idle %d\n", i + 1, t, term, idle);
    assert_int_equal(t, term);
  }
  assert_true(pace_of(&c, l, 1, &idle, &t, &q, &w));
  printf("leader node %d: quiesces %" PRIu64 " -> %" PRIu64 ", wakes %" PRIu64 " -> %" PRIu64
         "\n",
         l + 1, q0, q, w0, w);
  assert_int_equal(idle, 1);
  assert_int_equal(tc_find_leader(&c, 1), l);

  /* The write wakes the pace, commits and is applied everywhere. */
  assert_int_equal(tc_produce_many(&c, l, 1, 50), 50);
  assert_true(pace_of(&c, l, 1, &idle, &t, &q0, &w0));
  assert_true(w0 > w);
  tc_check_all_agree(&c, 1);
  (void)wait_quiesced(&c, l, 1, q0);
  cluster_stop(&c);
}

/* SIGKILL of a quiesced leader: the followers' election timeout is what it
 * always was, so a new leader is elected; nothing acknowledged is lost. */
static void test_quiesced_leader_killed_loses_nothing(void **state)
{
  static struct tc_cluster c;
  tc_init(&c, driver_bin, "repl", 1, default_timings);
  c.no_preferred_leader = true; /* the leader found is the one that quiesces */
  tc_start_all(&c);
  for (int round = 0; round < 2; round++) {
    int l = tc_find_leader(&c, 1);
    assert_int_equal(tc_produce_many(&c, l, 1, 100), 100);
    (void)wait_quiesced(&c, l, 1, 0);
    long long killed_at = tu_now_ms();
    tc_node_kill(&c, l);
    int nl = tc_find_leader(&c, 1);
    printf("round %d: quiesced leader %d killed, node %d leads after %lld ms\n", round, l + 1,
           nl + 1, tu_now_ms() - killed_at);
    assert_int_not_equal(nl, l);
    assert_int_equal(tc_produce_many(&c, nl, 1, 100), 100);
    tc_node_start(&c, l);
    tc_check_all_agree(&c, 1);
  }
  cluster_stop(&c);
}

int main(int argc, char **argv)
{
  driver_bin = argc > 1 ? argv[1] : getenv("CAIRN_RGROUP_DRIVER");
  if (driver_bin == NULL) {
    fprintf(stderr, "usage: test_replication PATH-TO-cairn-rgroup-driver\n");
    return 2;
  }
  signal(SIGPIPE, SIG_IGN);
  /* Some checks read the nodes' info lines (leadership moves, catch-up);
   * CAIRN_TEST_DRIVER_LOG=debug gives the drivers more, to chase a flake. */
  const char *driver_log = getenv("CAIRN_TEST_DRIVER_LOG");
  setenv("CAIRN_LOG_LEVEL", driver_log != NULL ? driver_log : "info", 1);
  if (getenv("CAIRN_TEST_FILTER") != NULL) {
    cmocka_set_test_filter(getenv("CAIRN_TEST_FILTER"));
  }
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_replicas_agree_on_every_acknowledged_batch),
      cmocka_unit_test(test_batch_is_acknowledged_only_after_commit),
      cmocka_unit_test(test_leader_killed_loses_no_acknowledged_batch),
      cmocka_unit_test(test_restarted_follower_catches_up),
      cmocka_unit_test(test_deleted_group_leaves_no_data_and_others_go_on),
      cmocka_unit_test(test_damaged_raft_directory_is_a_clear_error),
      cmocka_unit_test(test_garbage_on_cluster_port_disturbs_no_group),
      cmocka_unit_test(test_follower_far_behind_catches_up_through_snapshot),
      cmocka_unit_test(test_catch_up_completes_from_third_replica_when_leader_dies),
      cmocka_unit_test(test_producer_table_survives_snapshot_catch_up_and_restart),
      cmocka_unit_test(test_follower_behind_retention_gets_the_producer_table_from_a_peer),
      cmocka_unit_test(test_follower_behind_an_emptied_log_catches_up),
      cmocka_unit_test(test_follower_behind_a_delete_inside_a_snapshot_takes_its_start),
      cmocka_unit_test(test_duplicates_within_one_entry_get_the_original_offset),
      cmocka_unit_test(test_sigterm_hands_leadership_over_first),
      cmocka_unit_test(test_stopping_replicas_refuse_leadership),
      cmocka_unit_test(test_preferred_replica_takes_leadership_back),
      cmocka_unit_test(test_idle_group_quiesces_keeps_leader_and_takes_writes),
      cmocka_unit_test(test_quiesced_leader_killed_loses_nothing),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
