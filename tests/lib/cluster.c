/* cluster.c - the three-node driver fixture of the replication tests
 * (cluster.h). */
#include "cluster.h"

#include "testutil.h"

#include <inttypes.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

/* ---- processes ---- */

void tc_init(struct tc_cluster *c, const char *driver, const char *tag, int groups,
             const char *const *extra)
{
  memset(c, 0, sizeof *c);
  c->driver = driver;
  c->groups = groups;
  for (int k = 0; extra != NULL && extra[k] != NULL && k < TC_MAX_EXTRA - 1; k++) {
    c->extra[k] = extra[k];
  }
  c->root = tu_tmpdir(tag);
  c->next_tag = 1000;
  size_t off = 0;
  for (int i = 0; i < TC_NODES; i++) {
    struct tc_node *nd = &c->n[i];
    nd->ctl.fd = -1;
    nd->cluster_port = tu_free_port();
    nd->control_port = tu_free_port();
    snprintf(nd->dir, sizeof nd->dir, "%s/node%d", c->root, i + 1);
    snprintf(nd->log, sizeof nd->log, "%s/node%d.log", c->root, i + 1);
    off += (size_t)snprintf(c->replicas + off, sizeof c->replicas - off, "%s%d@127.0.0.1:%d",
                            i ? "," : "", i + 1, nd->cluster_port);
  }
}

void tc_node_spawn(struct tc_cluster *c, int i)
{
  struct tc_node *nd = &c->n[i];
  char id[16], cluster[64], control[64], groups[16];
  snprintf(id, sizeof id, "%d", i + 1);
  snprintf(cluster, sizeof cluster, "127.0.0.1:%d", nd->cluster_port);
  snprintf(control, sizeof control, "127.0.0.1:%d", nd->control_port);
  snprintf(groups, sizeof groups, "%d", c->groups);
  char *argv[40] = {(char *)c->driver, "--id",     id,      "--cluster",     cluster,
                    "--control",       control,    "--dir", nd->dir,         "--replicas",
                    c->replicas,       "--groups", groups,  "--election-ms", "600",
                    "--heartbeat-ms",  "60"};
  int argc = 17;
  if (c->no_preferred_leader) {
    argv[argc++] = "--no-preferred-leader";
  }
  /* The same tests over the node-wide Raft log (cluster/wal.h). */
  const char *raft_log = getenv("CAIRN_TEST_RAFT_LOG");
  if (raft_log != NULL && raft_log[0] != '\0') {
    argv[argc++] = "--raft-log";
    argv[argc++] = (char *)raft_log;
  }
  /* ... and with every group's Raft messages over one connection per peer
   * (cluster/raftmux.h). */
  const char *mux = getenv("CAIRN_TEST_RAFT_MUX");
  if (mux != NULL && strcmp(mux, "on") == 0) {
    argv[argc++] = "--raft-mux";
  }
  for (int k = 0; k < TC_MAX_EXTRA && c->extra[k] != NULL; k++) {
    argv[argc++] = (char *)c->extra[k];
  }
  argv[argc] = NULL;
  assert_int_equal(tu_proc_start(&nd->proc, argv, nd->log), 0);
  nd->stopped = false;
}

void tc_node_start(struct tc_cluster *c, int i)
{
  tc_node_spawn(c, i);
  assert_int_equal(tu_ctl_connect(&c->n[i].ctl, c->n[i].control_port, 10000), 0);
}

void tc_start_all(struct tc_cluster *c)
{
  for (int i = 0; i < TC_NODES; i++) {
    tc_node_start(c, i);
  }
}

void tc_node_kill(struct tc_cluster *c, int i)
{
  tu_ctl_close(&c->n[i].ctl);
  tu_proc_kill(&c->n[i].proc);
  c->n[i].stopped = false;
}

void tc_node_stop(struct tc_cluster *c, int i)
{
  tu_proc_signal(&c->n[i].proc, SIGSTOP);
  c->n[i].stopped = true;
}

void tc_node_cont(struct tc_cluster *c, int i)
{
  tu_proc_signal(&c->n[i].proc, SIGCONT);
  c->n[i].stopped = false;
}

bool tc_node_live(const struct tc_cluster *c, int i)
{
  return c->n[i].proc.pid > 0 && !c->n[i].stopped;
}

void tc_kill_all(struct tc_cluster *c)
{
  for (int i = 0; i < TC_NODES; i++) {
    tc_node_kill(c, i);
  }
}

int tc_finish(struct tc_cluster *c)
{
  int rv = 0;
  /* The nodes run the sanitizer build too: any report is a failure. */
  for (int i = 0; i < TC_NODES; i++) {
    if (tu_file_contains(c->n[i].log, "Sanitizer") ||
        tu_file_contains(c->n[i].log, "runtime error")) {
      printf("node %d reported a sanitizer error, see %s\n", i + 1, c->n[i].log);
      rv = -1;
    }
  }
  if (getenv("CAIRN_KEEP_TEST_DIR") == NULL && rv == 0) {
    tu_tmpdir_free(c->root);
  } else {
    printf("kept %s\n", c->root);
    free(c->root);
  }
  c->root = NULL;
  return rv;
}

/* ---- control ---- */

int tc_ask(struct tc_cluster *c, int i, char *out, size_t n, const char *fmt, ...)
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

/* Asks node i for its role in group g; *caught_up says whether a leader
 * has applied its term's first entry. "down" when it does not answer. */
static const char *tc_node_role_ex(struct tc_cluster *c, int i, int g, char *buf, size_t n,
                                   bool *caught_up)
{
  char line[256];
  char role[32];
  unsigned long long gg, lid;
  int caught = 0;
  *caught_up = false;
  if (!tc_node_live(c, i) || tc_ask(c, i, line, sizeof line, "leader %d", g) != 0 ||
      sscanf(line, "leader %llu %llu %31s %d", &gg, &lid, role, &caught) != 4) {
    snprintf(buf, n, "down");
  } else {
    snprintf(buf, n, "%s", role);
    *caught_up = caught == 1;
  }
  return buf;
}

const char *tc_node_role(struct tc_cluster *c, int i, int g, char *buf, size_t n)
{
  bool caught_up;
  return tc_node_role_ex(c, i, g, buf, n, &caught_up);
}

/* The leader of group g, waiting up to ms; with caught_up, only one that
 * has applied everything committed before its term. */
static int tc_wait_leader_ex(struct tc_cluster *c, int g, int ms, bool caught_up)
{
  long long deadline = tu_now_ms() + ms;
  do {
    for (int i = 0; i < TC_NODES; i++) {
      char role[32];
      bool caught;
      if (strcmp(tc_node_role_ex(c, i, g, role, sizeof role, &caught), "leader") == 0 &&
          (caught || !caught_up)) {
        return i;
      }
    }
    usleep(50000);
  } while (tu_now_ms() < deadline);
  return -1;
}

int tc_wait_leader(struct tc_cluster *c, int g, int ms)
{
  return tc_wait_leader_ex(c, g, ms, false);
}

void tc_print_roles(struct tc_cluster *c, int g)
{
  for (int i = 0; i < TC_NODES; i++) {
    char role[32];
    printf("  node %d: %s (log %s)\n", i + 1, tc_node_role(c, i, g, role, sizeof role),
           c->n[i].log);
  }
}

int tc_find_leader(struct tc_cluster *c, int g)
{
  int l = tc_wait_leader(c, g, TC_DEADLINE_MS);
  if (l < 0) {
    tc_print_roles(c, g);
    fail_msg("no leader for group %d within %d ms", g, TC_DEADLINE_MS);
  }
  return l;
}

/* ---- produce ---- */

void tc_record_ack(struct tc_cluster *c, uint64_t tag, int64_t off)
{
  assert_true(c->acks < TC_MAX_ACKS);
  c->ack_tag[c->acks] = tag;
  c->ack_off[c->acks] = off;
  c->acks++;
}

void tc_record_doomed(struct tc_cluster *c, uint64_t tag)
{
  assert_true(c->ndoomed < TC_MAX_DOOMED);
  c->doomed[c->ndoomed++] = tag;
}

uint64_t tc_send_produce(struct tc_cluster *c, int i, int g, int records, size_t vsize)
{
  uint64_t tag = c->next_tag++;
  tu_ctl_send(&c->n[i].ctl, "produce %d %" PRIu64 " %d %zu", g, tag, records, vsize);
  return tag;
}

/* Reads answers until `count`, the node goes away, the total deadline
 * passes, or one answer takes longer than each_ms. */
static int tc_collect_within(struct tc_cluster *c, int i, int count, int total_ms, int each_ms,
                             int *acked)
{
  long long deadline = tu_now_ms() + total_ms;
  int answered = 0, ok = 0;
  while (answered < count) {
    long long left = deadline - tu_now_ms();
    char line[256];
    if (left <= 0 || c->n[i].ctl.fd < 0 ||
        tu_ctl_line(&c->n[i].ctl, line, sizeof line, (int)(left < each_ms ? left : each_ms)) != 1) {
      break;
    }
    answered++;
    uint64_t tag;
    int64_t off;
    int g;
    if (sscanf(line, "ok %d %" SCNu64 " %" SCNd64, &g, &tag, &off) == 3) {
      assert_true(tag < c->next_tag); /* one this cluster sent */
      tc_record_ack(c, tag, off);
      ok++;
    }
  }
  if (acked != NULL) {
    *acked = ok;
  }
  return answered;
}

int tc_collect(struct tc_cluster *c, int i, int count, int timeout_ms, int *acked)
{
  return tc_collect_within(c, i, count, timeout_ms, timeout_ms, acked);
}

int tc_produce_many(struct tc_cluster *c, int i, int g, int count)
{
  for (int k = 0; k < count; k++) {
    tc_send_produce(c, i, g, 3, 64);
  }
  int acked = 0;
  tc_collect_within(c, i, count, 15000 * count, 15000, &acked);
  return acked;
}

/* ---- checks ---- */

void tc_dump_node(struct tc_cluster *c, int i, int g, struct tc_dump *d)
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
    assert_int_equal(
        sscanf(line, "b %" SCNd64 " %d k%llu-%d %d", &base, &count, &tag, &idx, &valid), 5);
    assert_int_equal(valid, 1);
    assert_true(d->n < TC_MAX_ACKS * 2);
    d->base[d->n] = base;
    d->count[d->n] = count;
    d->tag[d->n] = tag;
    d->n++;
  }
  d->next = d->n ? d->base[d->n - 1] + d->count[d->n - 1] : 0;
}

bool tc_dump_has(const struct tc_dump *d, uint64_t tag)
{
  for (int k = 0; k < d->n; k++) {
    if (d->tag[k] == tag) {
      return true;
    }
  }
  return false;
}

bool tc_wait_applied(struct tc_cluster *c, int i, int g, int64_t next, int ms)
{
  long long deadline = tu_now_ms() + ms;
  do {
    char line[256];
    int64_t start, nx;
    uint64_t li;
    int gg;
    if (tc_ask(c, i, line, sizeof line, "info %d", g) == 0 &&
        sscanf(line, "info %d %" SCNd64 " %" SCNd64 " %" SCNu64, &gg, &start, &nx, &li) == 4 &&
        nx >= next) {
      return true;
    }
    usleep(50000);
  } while (tu_now_ms() < deadline);
  return false;
}

void tc_check_node(struct tc_cluster *c, int i, int g, struct tc_dump *d)
{
  tc_dump_node(c, i, g, d);
  int64_t expect = 0;
  for (int k = 0; k < d->n; k++) {
    assert_int_equal(d->base[k], expect);
    expect += d->count[k];
    for (int j = k + 1; j < d->n; j++) {
      if (d->tag[j] == d->tag[k]) {
        fail_msg("node %d holds batch tag %" PRIu64 " twice", i + 1, d->tag[k]);
      }
    }
  }
  for (int a = 0; a < c->acks; a++) {
    bool found = false;
    for (int k = 0; k < d->n && !found; k++) {
      if (d->tag[k] == c->ack_tag[a]) {
        if (d->base[k] != c->ack_off[a]) {
          fail_msg("node %d holds acknowledged batch tag %" PRIu64 " at offset %" PRId64
                   ", acknowledged at %" PRId64,
                   i + 1, c->ack_tag[a], d->base[k], c->ack_off[a]);
        }
        found = true;
      }
    }
    if (!found) {
      fail_msg("node %d lost acknowledged batch tag %" PRIu64 " at offset %" PRId64, i + 1,
               c->ack_tag[a], c->ack_off[a]);
    }
  }
  for (int k = 0; k < c->ndoomed; k++) {
    if (tc_dump_has(d, c->doomed[k])) {
      fail_msg("node %d holds batch tag %" PRIu64
               ", which was never acknowledged and whose Raft index a later leader overwrote",
               i + 1, c->doomed[k]);
    }
  }
}

/* Prints where two dumps first differ. */
static void tc_print_difference(int a, const struct tc_dump *x, int b, const struct tc_dump *y)
{
  int k = 0;
  while (k < x->n && k < y->n && x->tag[k] == y->tag[k]) {
    k++;
  }
  printf("  node %d and node %d differ from batch #%d on:\n", a + 1, b + 1, k);
  for (int j = k; j < k + 4; j++) {
    printf("    #%d: node %d: %s", j, a + 1, j < x->n ? "" : "-");
    if (j < x->n) {
      printf("tag %" PRIu64 " @%" PRId64, x->tag[j], x->base[j]);
    }
    printf("   node %d: %s", b + 1, j < y->n ? "" : "-");
    if (j < y->n) {
      printf("tag %" PRIu64 " @%" PRId64, y->tag[j], y->base[j]);
    }
    printf("\n");
  }
}

int64_t tc_wait_same_end(struct tc_cluster *c, int g, int ms)
{
  long long deadline = tu_now_ms() + ms;
  do {
    int64_t end = -1;
    bool same = true;
    for (int i = 0; i < TC_NODES && same; i++) {
      char line[256];
      int64_t start, nx;
      uint64_t li;
      int gg;
      if (!tc_node_live(c, i)) {
        continue;
      }
      if (tc_ask(c, i, line, sizeof line, "info %d", g) != 0 ||
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
  } while (tu_now_ms() < deadline);
  return -1;
}

void tc_check_all_agree(struct tc_cluster *c, int g)
{
  static struct tc_dump ref, d;
  /* A leader new in its term applies what earlier terms committed only
   * once its own first entry commits: compared before that, it would lack
   * batches its followers already applied. */
  int leader = tc_wait_leader_ex(c, g, TC_DEADLINE_MS, true);
  if (leader < 0) {
    tc_print_roles(c, g);
    fail_msg("no leader of group %d applied its term's first entry within %d ms", g,
             TC_DEADLINE_MS);
  }
  /* Replicas apply at their own pace, and a new leader may not have applied
   * yet what an old one did: let the live ones reach the same end first.
   * One that does not is reported below, with where it differs. */
  (void)tc_wait_same_end(c, g, TC_DEADLINE_MS);
  /* Settle: what the leader applied, every live replica applies. */
  tc_dump_node(c, leader, g, &ref);
  for (int i = 0; i < TC_NODES; i++) {
    if (!tc_node_live(c, i)) {
      continue;
    }
    if (!tc_wait_applied(c, i, g, ref.next, TC_DEADLINE_MS)) {
      char role[32];
      tc_dump_node(c, i, g, &d);
      tc_print_roles(c, g);
      tc_print_difference(leader, &ref, i, &d);
      fail_msg("node %d (%s) did not apply group %d up to offset %" PRId64 " within %d ms", i + 1,
               tc_node_role(c, i, g, role, sizeof role), g, ref.next, TC_DEADLINE_MS);
    }
  }
  tc_dump_node(c, leader, g, &ref);
  tc_check_node(c, leader, g, &ref);
  for (int i = 0; i < TC_NODES; i++) {
    if (!tc_node_live(c, i) || i == leader) {
      continue;
    }
    tc_wait_applied(c, i, g, ref.next, TC_DEADLINE_MS);
    tc_dump_node(c, i, g, &d);
    if (d.n != ref.n || memcmp(d.tag, ref.tag, sizeof(uint64_t) * (size_t)ref.n) != 0) {
      tc_print_roles(c, g);
      tc_print_difference(leader, &ref, i, &d);
      fail_msg("node %d's log of group %d differs from the leader's (node %d)", i + 1, g,
               leader + 1);
    }
    tc_check_node(c, i, g, &d);
  }
}
