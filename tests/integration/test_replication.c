/* test_replication.c - per-partition Raft groups with real processes: three
 * cairn-rgroup-driver nodes on loopback TCP, each a real libuv loop with
 * canonical/raft's disk log. Checks that a batch is acknowledged only after
 * commit, that acknowledged batches survive SIGKILL of the leader and of
 * followers (present once, in order, on every replica), that a deleted group
 * leaves no data, that a damaged Raft directory is a clear error, and that
 * garbage on the cluster port disturbs no group. */
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

#define NODES 3
#define MAX_ACKS 4096
#define DEADLINE_MS 20000

static const char *driver_bin;

struct node {
  struct tu_proc proc;
  struct tu_ctl ctl;
  int cluster_port;
  int control_port;
  char dir[512];
  char log[512];
};

struct cluster {
  char *root;
  int groups;
  const char *extra[8]; /* more driver flags, NULL-terminated */
  struct node n[NODES];
  char replicas[512];
  /* acknowledged batches: tag -> offset */
  uint64_t ack_tag[MAX_ACKS];
  int64_t ack_off[MAX_ACKS];
  int acks;
  uint64_t next_tag;
};

/* Starts node i's driver without connecting to it (for a node expected to
 * exit at once). */
static void node_spawn(struct cluster *c, int i)
{
  struct node *nd = &c->n[i];
  char id[16], cluster[64], control[64], groups[16];
  snprintf(id, sizeof id, "%d", i + 1);
  snprintf(cluster, sizeof cluster, "127.0.0.1:%d", nd->cluster_port);
  snprintf(control, sizeof control, "127.0.0.1:%d", nd->control_port);
  snprintf(groups, sizeof groups, "%d", c->groups);
  char *argv[32] = {(char *)driver_bin, "--id", id, "--cluster", cluster, "--control", control,
                     "--dir", nd->dir, "--replicas", c->replicas, "--groups", groups,
                     "--election-ms", "600", "--heartbeat-ms", "60", NULL};
  int argc = 17;
  for (int k = 0; k < 8 && c->extra[k] != NULL; k++) {
    argv[argc++] = (char *)c->extra[k];
  }
  argv[argc] = NULL;
  assert_int_equal(tu_proc_start(&nd->proc, argv, nd->log), 0);
}

static void node_start(struct cluster *c, int i)
{
  node_spawn(c, i);
  assert_int_equal(tu_ctl_connect(&c->n[i].ctl, c->n[i].control_port, 10000), 0);
}

static void node_kill(struct cluster *c, int i)
{
  tu_ctl_close(&c->n[i].ctl);
  tu_proc_kill(&c->n[i].proc);
}

static void cluster_start_with(struct cluster *c, int groups, const char *const *extra)
{
  memset(c, 0, sizeof *c);
  for (int k = 0; extra != NULL && extra[k] != NULL && k < 7; k++) {
    c->extra[k] = extra[k];
  }
  c->root = tu_tmpdir("repl");
  c->groups = groups;
  c->next_tag = 1000;
  size_t off = 0;
  for (int i = 0; i < NODES; i++) {
    struct node *nd = &c->n[i];
    nd->ctl.fd = -1;
    nd->cluster_port = tu_free_port();
    nd->control_port = tu_free_port();
    snprintf(nd->dir, sizeof nd->dir, "%s/node%d", c->root, i + 1);
    snprintf(nd->log, sizeof nd->log, "%s/node%d.log", c->root, i + 1);
    off += (size_t)snprintf(c->replicas + off, sizeof c->replicas - off, "%s%d@127.0.0.1:%d",
                            i ? "," : "", i + 1, nd->cluster_port);
  }
  for (int i = 0; i < NODES; i++) {
    node_start(c, i);
  }
}

static void cluster_start(struct cluster *c, int groups) { cluster_start_with(c, groups, NULL); }

static void cluster_stop(struct cluster *c)
{
  for (int i = 0; i < NODES; i++) {
    node_kill(c, i);
  }
  /* The nodes run the sanitizer build too: any report is a failure. */
  for (int i = 0; i < NODES; i++) {
    if (tu_file_contains(c->n[i].log, "Sanitizer") || tu_file_contains(c->n[i].log, "runtime error")) {
      fail_msg("node %d reported a sanitizer error, see %s", i + 1, c->n[i].log);
    }
  }
  if (getenv("CAIRN_KEEP_TEST_DIR") == NULL) {
    tu_tmpdir_free(c->root);
  } else {
    printf("kept %s\n", c->root);
    free(c->root);
  }
}

static bool node_up(const struct cluster *c, int i) { return c->n[i].proc.pid > 0; }

/* Sends a command and returns its one-line answer. */
static int node_ask(struct cluster *c, int i, char *out, size_t n, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

static int node_ask(struct cluster *c, int i, char *out, size_t n, const char *fmt, ...)
{
  char cmd[256];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(cmd, sizeof cmd, fmt, ap);
  va_end(ap);
  if (tu_ctl_send(&c->n[i].ctl, "%s", cmd) != 0) {
    return -1;
  }
  return tu_ctl_line(&c->n[i].ctl, out, n, 10000) == 1 ? 0 : -1;
}

/* The node that says it leads group g, waiting until one does. */
static int find_leader(struct cluster *c, int g)
{
  long long deadline = tu_now_ms() + DEADLINE_MS;
  while (tu_now_ms() < deadline) {
    for (int i = 0; i < NODES; i++) {
      char line[256];
      if (node_up(c, i) && node_ask(c, i, line, sizeof line, "leader %d", g) == 0 &&
          strstr(line, " leader") != NULL) {
        return i;
      }
    }
    usleep(50000);
  }
  fail_msg("no leader for group %d within %d ms", g, DEADLINE_MS);
  return -1;
}

static void record_ack(struct cluster *c, uint64_t tag, int64_t off)
{
  assert_true(c->acks < MAX_ACKS);
  c->ack_tag[c->acks] = tag;
  c->ack_off[c->acks] = off;
  c->acks++;
}

/* Sends `count` produce requests to node i at once (pipelined) and collects
 * the answers; acknowledged ones are recorded. Returns how many were
 * acknowledged. Stops early if the node dies. */
static int produce_many(struct cluster *c, int i, int g, int count)
{
  uint64_t first = c->next_tag;
  for (int k = 0; k < count; k++) {
    if (tu_ctl_send(&c->n[i].ctl, "produce %d %" PRIu64 " 3 64", g, c->next_tag++) != 0) {
      break;
    }
  }
  int acked = 0;
  for (int k = 0; k < count; k++) {
    char line[256];
    if (tu_ctl_line(&c->n[i].ctl, line, sizeof line, 15000) != 1) {
      break; /* node gone: the rest are unknown, not acknowledged */
    }
    uint64_t tag;
    int64_t off;
    int gg;
    if (sscanf(line, "ok %d %" SCNu64 " %" SCNd64, &gg, &tag, &off) == 3) {
      assert_true(tag >= first && tag < c->next_tag);
      record_ack(c, tag, off);
      acked++;
    }
  }
  return acked;
}

struct dumped {
  int64_t base[MAX_ACKS * 2];
  int count[MAX_ACKS * 2];
  uint64_t tag[MAX_ACKS * 2];
  int n;
  int64_t next;
};

static void dump_node(struct cluster *c, int i, int g, struct dumped *d)
{
  d->n = 0;
  assert_int_equal(tu_ctl_send(&c->n[i].ctl, "dump %d", g), 0);
  for (;;) {
    char line[256];
    assert_int_equal(tu_ctl_line(&c->n[i].ctl, line, sizeof line, 10000), 1);
    if (strcmp(line, "end") == 0) {
      break;
    }
    int64_t base;
    int count, valid;
    unsigned long long tag;
    int idx;
    assert_int_equal(sscanf(line, "b %" SCNd64 " %d k%llu-%d %d", &base, &count, &tag, &idx, &valid),
                     5);
    assert_int_equal(valid, 1);
    assert_true(d->n < MAX_ACKS * 2);
    d->base[d->n] = base;
    d->count[d->n] = count;
    d->tag[d->n] = tag;
    d->n++;
  }
  d->next = d->n ? d->base[d->n - 1] + d->count[d->n - 1] : 0;
}

/* Waits until node i has applied up to `next`. */
static void wait_applied(struct cluster *c, int i, int g, int64_t next)
{
  long long deadline = tu_now_ms() + DEADLINE_MS;
  while (tu_now_ms() < deadline) {
    char line[256];
    int64_t start, nx;
    uint64_t li;
    int gg;
    if (node_ask(c, i, line, sizeof line, "info %d", g) == 0 &&
        sscanf(line, "info %d %" SCNd64 " %" SCNd64 " %" SCNu64, &gg, &start, &nx, &li) == 4 &&
        nx >= next) {
      return;
    }
    usleep(50000);
  }
  fail_msg("node %d did not apply up to %" PRId64 " in group %d", i + 1, next, g);
}

/* Every acknowledged batch is in node i's log exactly once, at the offset
 * it was acknowledged with; offsets are gap-free; no batch appears twice. */
static void check_node(struct cluster *c, int i, int g, struct dumped *out)
{
  struct dumped *d = out;
  dump_node(c, i, g, d);
  int64_t expect = 0;
  for (int k = 0; k < d->n; k++) {
    assert_int_equal(d->base[k], expect);
    expect += d->count[k];
    for (int j = k + 1; j < d->n; j++) {
      assert_true(d->tag[j] != d->tag[k]); /* at most once */
    }
  }
  for (int a = 0; a < c->acks; a++) {
    bool found = false;
    for (int k = 0; k < d->n && !found; k++) {
      if (d->tag[k] == c->ack_tag[a]) {
        assert_int_equal(d->base[k], c->ack_off[a]);
        found = true;
      }
    }
    if (!found) {
      fail_msg("node %d lost acknowledged batch tag %" PRIu64 " at offset %" PRId64, i + 1,
               c->ack_tag[a], c->ack_off[a]);
    }
  }
}

/* The log end every live node reports, once they all report the same one
 * (replicas apply at their own pace). */
static int64_t wait_same_end(struct cluster *c, int g)
{
  long long deadline = tu_now_ms() + DEADLINE_MS;
  while (tu_now_ms() < deadline) {
    int64_t end = -1;
    bool same = true;
    for (int i = 0; i < NODES && same; i++) {
      char line[256];
      int64_t start, nx;
      uint64_t li;
      int gg;
      if (!node_up(c, i)) {
        continue;
      }
      if (node_ask(c, i, line, sizeof line, "info %d", g) != 0 ||
          sscanf(line, "info %d %" SCNd64 " %" SCNd64 " %" SCNu64, &gg, &start, &nx, &li) != 4) {
        same = false;
        break;
      }
      same = end < 0 || nx == end;
      end = nx;
    }
    if (same) {
      return end;
    }
    usleep(50000);
  }
  fail_msg("replicas of group %d did not converge", g);
  return -1;
}

/* All live nodes hold the same log, containing every acknowledged batch. */
static void check_all_agree(struct cluster *c, int g)
{
  static struct dumped ref, d;
  int leader = find_leader(c, g);
  wait_same_end(c, g);
  dump_node(c, leader, g, &ref);
  for (int i = 0; i < NODES; i++) {
    if (!node_up(c, i)) {
      continue;
    }
    wait_applied(c, i, g, ref.next);
    check_node(c, i, g, &d);
    assert_int_equal(d.n, ref.n);
    assert_memory_equal(d.tag, ref.tag, sizeof(uint64_t) * (size_t)ref.n);
  }
}

static void test_replicas_agree_on_every_acknowledged_batch(void **state)
{
  static struct cluster c;
  cluster_start(&c, 1);
  int l = find_leader(&c, 1);
  assert_int_equal(produce_many(&c, l, 1, 300), 300);
  check_all_agree(&c, 1);
  /* A follower refuses produce and names the leader. */
  int f = (l + 1) % NODES;
  char line[256];
  assert_int_equal(node_ask(&c, f, line, sizeof line, "produce 1 1 1 1"), 0);
  char want[64];
  snprintf(want, sizeof want, "err 1 1 CAIRN_ENOTLEADER %d", l + 1);
  assert_string_equal(line, want);
  cluster_stop(&c);
}

static void test_batch_is_acknowledged_only_after_commit(void **state)
{
  static struct cluster c;
  cluster_start(&c, 1);
  int l = find_leader(&c, 1);
  assert_int_equal(produce_many(&c, l, 1, 10), 10);
  /* Freeze both followers: the leader alone is no majority. */
  for (int i = 0; i < NODES; i++) {
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
  for (int i = 0; i < NODES; i++) {
    tu_proc_signal(&c.n[i].proc, SIGCONT);
  }
  if (!answered) {
    assert_int_equal(tu_ctl_line(&c.n[l].ctl, line, sizeof line, DEADLINE_MS), 1);
  }
  /* Once the majority is back, either the batch committed or the request
   * was refused: never silently dropped. */
  uint64_t tag;
  int64_t off;
  int g;
  if (sscanf(line, "ok %d %" SCNu64 " %" SCNd64, &g, &tag, &off) == 3) {
    record_ack(&c, tag, off);
  } else {
    assert_non_null(strstr(line, "err 1 777"));
  }
  check_all_agree(&c, 1);
  cluster_stop(&c);
}

static void test_leader_killed_loses_no_acknowledged_batch(void **state)
{
  static struct cluster c;
  cluster_start(&c, 1);
  for (int round = 0; round < 3; round++) {
    int l = find_leader(&c, 1);
    assert_true(produce_many(&c, l, 1, 100) > 0);
    /* Requests in flight while the leader dies: unknown, not acked. */
    for (int k = 0; k < 50; k++) {
      tu_ctl_send(&c.n[l].ctl, "produce 1 %" PRIu64 " 3 64", c.next_tag++);
    }
    usleep(2000);
    long long killed_at = tu_now_ms();
    node_kill(&c, l);
    int nl = find_leader(&c, 1);
    printf("round %d: leader %d killed, node %d leads after %lld ms\n", round, l + 1, nl + 1,
           tu_now_ms() - killed_at);
    assert_true(produce_many(&c, nl, 1, 100) == 100);
    node_start(&c, l);
    check_all_agree(&c, 1);
  }
  cluster_stop(&c);
}

static void test_restarted_follower_catches_up(void **state)
{
  static struct cluster c;
  cluster_start(&c, 1);
  int l = find_leader(&c, 1);
  int f = (l + 1) % NODES;
  assert_int_equal(produce_many(&c, l, 1, 50), 50);
  node_kill(&c, f);
  assert_int_equal(produce_many(&c, l, 1, 300), 300);
  node_start(&c, f);
  check_all_agree(&c, 1);
  cluster_stop(&c);
}

static void test_deleted_group_leaves_no_data_and_others_go_on(void **state)
{
  static struct cluster c;
  cluster_start(&c, 2);
  int l1 = find_leader(&c, 1);
  assert_int_equal(produce_many(&c, l1, 1, 20), 20);
  for (int i = 0; i < NODES; i++) {
    char line[256];
    assert_int_equal(node_ask(&c, i, line, sizeof line, "delete 2"), 0);
    assert_string_equal(line, "deleted 2");
    char path[600];
    snprintf(path, sizeof path, "%s/group-2", c.n[i].dir);
    struct stat st;
    assert_int_not_equal(stat(path, &st), 0);
  }
  assert_int_equal(produce_many(&c, find_leader(&c, 1), 1, 20), 20);
  check_all_agree(&c, 1);
  cluster_stop(&c);
}

static void test_damaged_raft_directory_is_a_clear_error(void **state)
{
  static struct cluster c;
  cluster_start(&c, 1);
  int l = find_leader(&c, 1);
  assert_int_equal(produce_many(&c, l, 1, 20), 20);
  int v = (l + 1) % NODES;
  node_kill(&c, v);
  char raft_dir[600];
  snprintf(raft_dir, sizeof raft_dir, "%s/group-1/raft", c.n[v].dir);
  /* Both metadata copies overwritten with garbage of the right size. */
  tu_write_at(raft_dir, "metadata1", 0, "garbage-garbage-garbage-garbage-", 32);
  tu_write_at(raft_dir, "metadata2", 0, "garbage-garbage-garbage-garbage-", 32);
  /* It may exit before a control connection could be made. */
  node_spawn(&c, v);
  int status = tu_proc_wait(&c.n[v].proc, 10000);
  assert_true(status != -1);
  assert_true(WIFEXITED(status) && WEXITSTATUS(status) != 0);
  assert_true(tu_file_contains(c.n[v].log, "group 1: raft_init: io: decode content of metadata1"));
  tu_ctl_close(&c.n[v].ctl);
  /* The other two go on. */
  assert_int_equal(produce_many(&c, find_leader(&c, 1), 1, 20), 20);
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
  static struct cluster c;
  cluster_start(&c, 2);
  int l = find_leader(&c, 1);
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
  assert_int_equal(produce_many(&c, find_leader(&c, 1), 1, 30), 30);
  c.acks = 0; /* group 2's offsets are its own */
  assert_int_equal(produce_many(&c, find_leader(&c, 2), 2, 30), 30);
  check_all_agree(&c, 2);
  expect_closed(silent, 8000);
  assert_true(tu_file_contains(c.n[l].log, "bad preamble"));
  assert_true(tu_file_contains(c.n[l].log, "unknown group 99"));
  assert_true(tu_file_contains(c.n[l].log, "no preamble before the deadline"));
  cluster_stop(&c);
}

/* Node i's "hash" answer: log end, CRC of all its bytes, catching up. */
static void node_hash(struct cluster *c, int i, int g, int64_t *next, unsigned *crc, int *catching)
{
  char line[256];
  int gg;
  assert_int_equal(node_ask(c, i, line, sizeof line, "hash %d", g), 0);
  assert_int_equal(sscanf(line, "hash %d %" SCNd64 " %x %d", &gg, next, crc, catching), 4);
}

/* Waits until nodes a and b hold byte-identical logs, not catching up. */
static void wait_identical(struct cluster *c, int a, int b, int g)
{
  long long deadline = tu_now_ms() + DEADLINE_MS;
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
  static struct cluster c;
  cluster_start_with(&c, 1, small_raft_log);
  int l = find_leader(&c, 1);
  int f = (l + 1) % NODES;
  assert_int_equal(produce_many(&c, l, 1, 50), 50);
  node_kill(&c, f);
  /* Far more entries than Raft keeps after a snapshot with a 32 KiB budget
   * (small rounds: group commit would fold big ones into few entries). */
  for (int k = 0; k < 150; k++) {
    assert_int_equal(produce_many(&c, l, 1, 8), 8);
  }
  node_start(&c, f);
  wait_identical(&c, l, f, 1);
  assert_true(tu_file_contains(c.n[f].log, "fetching from a peer"));
  assert_true(tu_file_contains(c.n[f].log, "caught up"));
  check_all_agree(&c, 1);
  cluster_stop(&c);
}

static void test_catch_up_completes_from_third_replica_when_leader_dies(void **state)
{
  static struct cluster c;
  cluster_start_with(&c, 1, small_raft_log);
  int l = find_leader(&c, 1);
  int f = (l + 1) % NODES;
  int third = (l + 2) % NODES;
  node_kill(&c, f);
  for (int k = 0; k < 150; k++) {
    assert_int_equal(produce_many(&c, l, 1, 8), 8);
  }
  /* The follower comes back and starts fetching; the leader dies. */
  node_start(&c, f);
  long long deadline = tu_now_ms() + DEADLINE_MS;
  while (!tu_file_contains(c.n[f].log, "fetching from a peer") && tu_now_ms() < deadline) {
    usleep(5000);
  }
  node_kill(&c, l);
  find_leader(&c, 1);
  wait_identical(&c, f, third, 1);
  assert_int_equal(produce_many(&c, find_leader(&c, 1), 1, 20), 20);
  node_start(&c, l);
  check_all_agree(&c, 1);
  wait_identical(&c, f, l, 1);
  cluster_stop(&c);
}

static void test_sigterm_hands_leadership_over_first(void **state)
{
  static struct cluster c;
  cluster_start(&c, 1);
  int l = find_leader(&c, 1);
  assert_int_equal(produce_many(&c, l, 1, 50), 50);
  tu_ctl_close(&c.n[l].ctl);
  tu_proc_signal(&c.n[l].proc, SIGTERM);
  int status = tu_proc_wait(&c.n[l].proc, DEADLINE_MS);
  if (status == -1 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    fail_msg("node %d did not exit cleanly after SIGTERM: wait status %d (see %s)", l + 1,
             status, c.n[l].log);
  }
  assert_true(tu_file_contains(c.n[l].log, "handing leadership to a caught-up replica (shutting down)"));
  char done[64];
  snprintf(done, sizeof done, "leadership transfer done, leader is now %d", (l + 1) % NODES + 1);
  bool to_other = tu_file_contains(c.n[l].log, done);
  snprintf(done, sizeof done, "leadership transfer done, leader is now %d", (l + 2) % NODES + 1);
  assert_true(to_other || tu_file_contains(c.n[l].log, done));
  int nl = find_leader(&c, 1);
  assert_int_not_equal(nl, l);
  assert_int_equal(produce_many(&c, nl, 1, 50), 50);
  node_start(&c, l);
  check_all_agree(&c, 1);
  cluster_stop(&c);
}

static void test_preferred_replica_takes_leadership_back(void **state)
{
  static struct cluster c;
  cluster_start(&c, 1);
  find_leader(&c, 1);
  node_kill(&c, 0); /* node 1, the preferred replica, goes away */
  int l = find_leader(&c, 1);
  assert_int_not_equal(l, 0);
  assert_int_equal(produce_many(&c, l, 1, 100), 100);
  node_start(&c, 0);
  long long deadline = tu_now_ms() + DEADLINE_MS;
  char line[256] = "";
  while (tu_now_ms() < deadline) {
    if (node_ask(&c, 0, line, sizeof line, "leader 1") == 0 && strstr(line, " leader") != NULL) {
      break;
    }
    usleep(100000);
  }
  assert_non_null(strstr(line, "leader 1 1 leader"));
  check_all_agree(&c, 1);
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
  /* Some checks read the nodes' info lines (leadership moves, catch-up). */
  setenv("CAIRN_LOG_LEVEL", "info", 1);
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
      cmocka_unit_test(test_sigterm_hands_leadership_over_first),
      cmocka_unit_test(test_preferred_replica_takes_leadership_back),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
