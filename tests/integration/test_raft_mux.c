/* test_raft_mux.c - the partitions' Raft messages over one connection per
 * peer node (--raft-mux on, cluster/raftmux.h) with real cairnd processes:
 *
 *  - 3 nodes, NPART partitions rf 3: every partition takes two produces at
 *    the offsets expected, the Raft messages went through the multiplexer
 *    (its frame counters), and each node holds O(peers) established TCP
 *    connections on the cluster ports, not O(partitions) (counted from
 *    /proc: its socket fds matched against /proc/net/tcp{,6}); the same
 *    cluster with --raft-mux off is counted first as the baseline (and to
 *    show the count sees raft_uv's per-group connections), then one
 *    without the flag (the default, auto, is on with the node-wide log);
 *    a fake peer's malformed Raft frame closes its connection with a log
 *    line, and every partition then takes a third produce;
 *  - a partition leader's node SIGKILLed while a producer writes: every
 *    acknowledged batch is there once, in order, served by the leaders and
 *    on every replica's log after all nodes stop.
 *
 * Usage: test_raft_mux <path of cairnd>. CAIRN_TEST_FILTER='*sigkill*' runs
 * a subset; CAIRN_KEEP_TEST_DIR=1 keeps the data dirs and node logs. */
#include "acked.h"
#include "cairnd.h"
#include "cluster/raftmux.h"
#include "cluster/transport.h"
#include "format/crc32c.h"
#include "format/endian.h"
#include "proc.h"
#include "testutil.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#define NPART 200
#define RECORDS 3
#define WAIT_MS 120000
#define OPTS                                                                                       \
  "--raft-log node --raft-mux on --heartbeat-ms 100 --election-ms 1000 --node-timeout-ms 2000"
#define OPTS_OFF                                                                                   \
  "--raft-log node --raft-mux off --heartbeat-ms 100 --election-ms 1000 --node-timeout-ms 2000"
/* No --raft-mux: the default (auto) is on with the node-wide log. */
#define OPTS_DEFAULT "--raft-log node --heartbeat-ms 100 --election-ms 1000 --node-timeout-ms 2000"
/* Per node: 2 watch connections per peer, the metadata group's raft_uv
 * connections (one group), the test's own client connections, slack. Far
 * below one per partition per peer (2 x 2 x NPART without the mux). */
#define MAX_CLUSTER_CONNS 40

static const char *cairnd_bin;

/* ---- counting a process's established TCP connections ---- */

#define MAX_INODES 65536

struct conn_table {
  unsigned long inode[MAX_INODES];
  int lport[MAX_INODES], rport[MAX_INODES];
  int n;
};

/* Adds the established sockets of /proc/net/<file> to t. */
static void read_tcp_table(struct conn_table *t, const char *file)
{
  char path[64];
  snprintf(path, sizeof path, "/proc/net/%s", file);
  FILE *f = fopen(path, "r");
  if (f == NULL) {
    return; /* no IPv6 here */
  }
  char line[512];
  if (fgets(line, sizeof line, f) == NULL) { /* the header */
    fclose(f);
    return;
  }
  while (fgets(line, sizeof line, f) != NULL && t->n < MAX_INODES) {
    char local[128], remote[128];
    unsigned st;
    unsigned long inode;
    if (sscanf(line, "%*d: %127s %127s %x %*s %*s %*s %*d %*d %lu", local, remote, &st, &inode) !=
            4 ||
        st != 1 /* TCP_ESTABLISHED */) {
      continue;
    }
    const char *lc = strrchr(local, ':'), *rc = strrchr(remote, ':');
    if (lc == NULL || rc == NULL) {
      continue;
    }
    t->inode[t->n] = inode;
    t->lport[t->n] = (int)strtol(lc + 1, NULL, 16);
    t->rport[t->n] = (int)strtol(rc + 1, NULL, 16);
    t->n++;
  }
  fclose(f);
}

static bool is_cluster_port(const struct cd_cluster *c, int port)
{
  for (int i = 0; i < c->n; i++) {
    if (c->nodes[i].cluster_port == port) {
      return true;
    }
  }
  return false;
}

/* Established TCP connections of node i's process with a cluster port at
 * either end; *all_tcp gets every established TCP socket it holds. */
static int cluster_conns(const struct cd_cluster *c, int i, int *all_tcp, int *fds)
{
  static struct conn_table t;
  t.n = 0;
  read_tcp_table(&t, "tcp");
  read_tcp_table(&t, "tcp6");
  char dir[64];
  snprintf(dir, sizeof dir, "/proc/%d/fd", (int)c->nodes[i].proc.pid);
  DIR *d = opendir(dir);
  assert_non_null(d);
  int cluster = 0;
  *all_tcp = 0;
  *fds = 0;
  struct dirent *de;
  while ((de = readdir(d)) != NULL) {
    if (de->d_name[0] == '.') {
      continue;
    }
    (*fds)++;
    char path[400], target[64];
    snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
    ssize_t n = readlink(path, target, sizeof target - 1);
    if (n <= 0) {
      continue;
    }
    target[n] = '\0';
    unsigned long inode;
    if (sscanf(target, "socket:[%lu]", &inode) != 1) {
      continue;
    }
    for (int k = 0; k < t.n; k++) {
      if (t.inode[k] == inode) {
        (*all_tcp)++;
        if (is_cluster_port(c, t.lport[k]) || is_cluster_port(c, t.rport[k])) {
          cluster++;
        }
        break;
      }
    }
  }
  closedir(d);
  return cluster;
}

/* Sum of one metric over every node; fails the test if one does not answer. */
static long long metric_sum(struct cd_cluster *c, const char *name)
{
  long long sum = 0;
  for (int i = 0; i < c->n; i++) {
    long long v = cd_metric(c->nodes[i].admin_port, name);
    assert_true(v >= 0);
    sum += v;
  }
  return sum;
}

/* One batch of RECORDS records to every partition of "many"; each must be
 * acknowledged at base offset want_base. */
static void produce_everywhere(struct cd_cluster *c, int round, int64_t want_base)
{
  for (uint32_t p = 0; p < NPART; p++) {
    size_t len = 0;
    uint8_t *b = tu_make_batch((uint64_t)round * 100000 + p + 1, RECORDS, 40, 1000 + p, &len);
    int64_t base = -1;
    int rv = cd_produce(c, "many", p, b, len, WAIT_MS, &base);
    free(b);
    if (rv != 0 || base != want_base) {
      fail_msg("round %d: produce to partition %u: wire code %d, base offset %lld (want %lld)",
               round, p, rv, (long long)base, (long long)want_base);
    }
  }
}

/* Starts 3 nodes with opts, NPART partitions rf 3, two produces to each;
 * returns the most established cluster connections a node holds. */
static int run_and_count(struct cd_cluster *c, const char *opts, const char *label)
{
  assert_int_equal(cd_init(c, cairnd_bin, 3, 3, opts), 0);
  assert_int_equal(cd_start_all(c, WAIT_MS), 0);
  assert_int_equal(cd_create_topic(c, 0, "many", NPART, 3, WAIT_MS, NULL, 0), 0);
  assert_int_equal(cd_wait_settled(c, "many", WAIT_MS), 0);
  produce_everywhere(c, 1, 0);
  produce_everywhere(c, 2, RECORDS);
  int most = 0;
  for (int i = 0; i < 3; i++) {
    int all = 0, fds = 0;
    int n = cluster_conns(c, i, &all, &fds);
    print_message("%s: node %d: %d established cluster connections (%d TCP in all, %d fds) "
                  "for %d partitions rf 3\n",
                  label, i + 1, n, all, fds, NPART);
    assert_true(n >= 4); /* at least the watch connections to and from both peers */
    most = n > most ? n : most;
  }
  return most;
}

/* ---- a malformed frame from a fake peer ---- */

static void write_all(int fd, const uint8_t *p, size_t n)
{
  while (n > 0) {
    ssize_t w = write(fd, p, n);
    assert_true(w > 0);
    p += w;
    n -= (size_t)w;
  }
}

/* Dials node i's cluster port as node `as` watching it, sends one Raft
 * frame whose version no node speaks, and returns once node i closed the
 * connection (a read of 0 or an error within 10 s; fails otherwise). */
static void send_malformed_frame(struct cd_cluster *c, int i, int as)
{
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  assert_true(fd >= 0);
  struct sockaddr_in sa = {.sin_family = AF_INET,
                           .sin_port = htons((uint16_t)c->nodes[i].cluster_port)};
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof sa), 0);
  struct timeval tv = {.tv_sec = 10};
  assert_int_equal(setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv), 0);
  char addr[64];
  snprintf(addr, sizeof addr, "127.0.0.1:%d", c->nodes[as].cluster_port);
  uint8_t pre[TRANSPORT_PREAMBLE_MAX];
  int n = transport_preamble_encode(pre, TRANSPORT_KIND_WATCH, 0, c->nodes[as].id, addr);
  assert_true(n > 0);
  write_all(fd, pre, (size_t)n);
  uint8_t byte;
  assert_int_equal(read(fd, &byte, 1), 1); /* the watch's accept byte */
  uint8_t frame[8 + RAFTMUX_HEADER + 14] = {0};
  uint8_t *payload = frame + 8;
  payload[0] = RAFTMUX_TAG;
  payload[1] = RAFTMUX_VERSION + 1;
  payload[2] = RAFT_IO_TIMEOUT_NOW;
  payload[3] = 14;
  memcpy(payload + RAFTMUX_HEADER, "127.0.0.1:7001", 14);
  le_put32(frame, RAFTMUX_HEADER + 14);
  le_put32(frame + 4, crc32c(payload, RAFTMUX_HEADER + 14));
  write_all(fd, frame, sizeof frame);
  ssize_t r = read(fd, &byte, 1);
  assert_true(r == 0 || (r < 0 && errno == ECONNRESET));
  close(fd);
}

static void test_raft_mux_holds_connections_per_peer_not_per_partition(void **state)
{
  (void)state;
  struct cd_cluster c;
  /* The baseline, which also shows the count sees per-group connections:
   * raft_uv's, one per partition per peer each way. */
  int off = run_and_count(&c, OPTS_OFF, "--raft-mux off");
  assert_true(off > NPART);
  cd_destroy(&c);
  int on = run_and_count(&c, OPTS_DEFAULT, "--raft-mux auto (the default)");
  assert_true(on <= MAX_CLUSTER_CONNS);
  /* The replicas' Raft traffic went through the multiplexer, none of it
   * malformed. */
  long long received = metric_sum(&c, "cairn_raftmux_frames_total{outcome=\"received\"}");
  long long malformed = metric_sum(&c, "cairn_raftmux_frames_total{outcome=\"malformed\"}");
  print_message("raftmux frames: %lld received, %lld malformed\n", received, malformed);
  assert_true(received >= 2 * NPART * 2); /* two rounds, two followers each */
  assert_int_equal(malformed, 0);
  /* A malformed Raft frame closes its connection with a log line; the
   * node goes on, and the real peer's watch is untouched. */
  send_malformed_frame(&c, 0, 1);
  assert_int_equal(
      cd_metric(c.nodes[0].admin_port, "cairn_raftmux_frames_total{outcome=\"malformed\"}"), 1);
  assert_true(tu_file_contains(c.nodes[0].log, "Raft frame of"));
  produce_everywhere(&c, 3, 2 * RECORDS);
  /* One node stops cleanly with both peers up (its multiplexer closes
   * after every group). The others are killed: stopped one by one, each
   * would hand some ~100 leaderships to a stopped node first (raft 0.15
   * picks the first caught-up voter, live or not) and wait out a failed
   * transfer for each, mux or not. */
  assert_int_equal(ak_exit_code(cd_term(&c, 0, WAIT_MS)), 0);
  for (int i = 0; i < 3; i++) {
    assert_false(tu_file_contains(c.nodes[i].log, "AddressSanitizer"));
  }
  cd_destroy(&c);
}

/* ---- SIGKILL of a leader's node while producing ---- */

#define KPART 4
#define KTOPIC "k"

static struct ak_log acked;

/* The index of the node leading partition p as node `ask` sees it; -1. */
static int leader_index(struct cd_cluster *c, int ask, uint32_t p)
{
  Cairn__Client__Envelope *env = NULL;
  Cairn__Client__MetadataResponse *md = cd_metadata(c, ask, &env);
  int li = -1;
  for (size_t t = 0; md != NULL && t < md->n_topics; t++) {
    if (strcmp(md->topics[t]->name, KTOPIC) != 0) {
      continue;
    }
    for (size_t k = 0; k < md->topics[t]->n_partitions; k++) {
      const Cairn__Client__PartitionInfo *pi = md->topics[t]->partitions[k];
      if (pi->partition == p && pi->leader_id != 0) {
        li = cd_index(c, pi->leader_id);
      }
    }
  }
  if (env != NULL) {
    cairn__client__envelope__free_unpacked(env, NULL);
  }
  return li;
}

static void produce_round(struct cd_cluster *c)
{
  for (uint32_t p = 0; p < KPART; p++) {
    ak_produce(&acked, c, p, WAIT_MS);
  }
}

static void test_raft_mux_leader_sigkill_keeps_every_acknowledged_batch(void **state)
{
  (void)state;
  struct cd_cluster c;
  ak_init(&acked, KTOPIC, KPART, RECORDS, 40);
  assert_int_equal(cd_init(&c, cairnd_bin, 3, 3, OPTS), 0);
  assert_int_equal(cd_start_all(&c, WAIT_MS), 0);
  assert_int_equal(cd_create_topic(&c, 0, KTOPIC, KPART, 3, WAIT_MS, NULL, 0), 0);
  for (int r = 0; r < 5; r++) {
    produce_round(&c);
  }
  for (int kill = 0; kill < 2; kill++) {
    int victim = leader_index(&c, (kill + 1) % 3, 0);
    assert_true(victim >= 0);
    cd_kill(&c, victim);
    print_message("SIGKILLed node %d (leader of partition 0)\n", victim + 1);
    /* Produced through the survivors while the victim is down: each batch
     * is acknowledged once a new leader took over. */
    for (int r = 0; r < 5; r++) {
      produce_round(&c);
    }
    assert_int_equal(cd_start(&c, victim), 0);
    uint64_t all[3] = {1, 2, 3};
    assert_int_equal(cd_wait_alive(&c, victim, all, 3, WAIT_MS), 0);
    for (int r = 0; r < 3; r++) {
      produce_round(&c);
    }
  }
  ak_check_served(&acked, &c, WAIT_MS);
  usleep(5000 * 1000); /* the restarted replicas catch up */
  for (int i = 0; i < 3; i++) {
    assert_int_equal(ak_exit_code(cd_term(&c, i, WAIT_MS)), 0);
    assert_false(tu_file_contains(c.nodes[i].log, "AddressSanitizer"));
  }
  for (uint32_t p = 0; p < KPART; p++) {
    char logs[3][900];
    const char *dirs[3];
    for (int i = 0; i < 3; i++) {
      cd_replica_log_dir(&c, i, KTOPIC, p, logs[i], sizeof logs[i]);
      dirs[i] = logs[i];
    }
    ak_check_replicas(&acked, p, dirs, 3);
  }
  cd_destroy(&c);
}

int main(int argc, char **argv)
{
  if (argc < 2) {
    fprintf(stderr, "usage: test_raft_mux <path of cairnd>\n");
    return 2;
  }
  cairnd_bin = argv[1];
  if (getenv("CAIRN_TEST_FILTER") != NULL) {
    cmocka_set_test_filter(getenv("CAIRN_TEST_FILTER"));
  }
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_raft_mux_holds_connections_per_peer_not_per_partition),
      cmocka_unit_test(test_raft_mux_leader_sigkill_keeps_every_acknowledged_batch),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
