/* test_controller_wal.c - the metadata group (cluster/controller.c) on the
 * node-wide log (ctl_opts.wal), a real single-voter controller over the
 * cluster transport on loopback:
 *   - it bootstraps, applies enough commands for snapshots, leaves no
 *     raft_uv file in its directory (its snapshots go to wal-snapshots),
 *     and after a close and a reopen of the controller and of the log it
 *     holds every topic it acknowledged;
 *   - a failed write to the log (FAULT_WAL_WRITE) latches it: on_fatal
 *     fires once, it leads and proposes no more, it still closes (before
 *     the log), and a reopen from the disk holds everything acknowledged
 *     before the failure;
 *   - refused (its log was damaged, metaheal.h) it runs no Raft; rejoined
 *     or reopened with no_bootstrap it never bootstraps. */
#include "cluster/controller.h"
#include "cluster/meta_state.h"
#include "cluster/transport.h"
#include "cluster/wal.h"
#include "common/err.h"
#include "common/fault.h"
#include "testutil.h"

#include <dirent.h>
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#define WAIT_NS ((uint64_t)20 * 1000 * 1000 * 1000)

struct node {
  uv_loop_t *loop;
  struct transport tr;
  struct controller ctl;
  struct wal *w;
  char base[400];
  char address[64];
  bool ctl_closed, tr_closed;
  unsigned fatal_calls;
  /* the one proposal in flight */
  struct ctl_propose req;
  bool answered;
  int status;
  struct meta_result res;
  unsigned more_failed;
};

static void run_until(uv_loop_t *loop, bool (*done)(void *), void *arg, const char *what)
{
  uint64_t deadline = uv_hrtime() + WAIT_NS;
  while (!done(arg)) {
    if (uv_hrtime() > deadline) {
      fail_msg("timed out waiting for %s", what);
    }
    uv_run(loop, UV_RUN_ONCE);
  }
}

static int test_port(void)
{
  return 20000 + (int)(getpid() % 20000);
}

static void on_fatal(struct controller *ctl, void *data)
{
  (void)ctl;
  ((struct node *)data)->fatal_calls++;
}

static bool is_leader(void *arg)
{
  return ctl_is_leader(&((struct node *)arg)->ctl);
}

/* Everything committed before this leader's term is applied. */
static bool is_current(void *arg)
{
  return ctl_leader_applied_index(&((struct node *)arg)->ctl) != 0;
}

static void node_open_wal(struct node *n)
{
  char dir[512], errmsg[WAL_ERRMSG_SIZE];
  snprintf(dir, sizeof dir, "%s/wal", n->base);
  struct wal_opts o = {.segment_bytes = 64 * 1024};
  int rv = wal_open(n->loop, dir, &o, &n->w, errmsg);
  if (rv != 0) {
    fail_msg("wal_open: %s", errmsg);
  }
}

/* Opens the log, the transport and the controller, and waits until it
 * leads with everything applied. */
static void node_open(struct node *n)
{
  node_open_wal(n);
  assert_int_equal(transport_init(&n->tr, n->loop, n->address), 0);
  char dir[512];
  snprintf(dir, sizeof dir, "%s/meta", n->base);
  struct ctl_voter v = {.id = 1, .address = n->address};
  struct ctl_opts o = {.wal = n->w, .on_fatal = on_fatal, .heartbeat_ms = 20, .election_ms = 100};
  n->ctl_closed = n->tr_closed = false;
  n->fatal_calls = 0;
  int rv = ctl_open(&n->ctl, n->loop, &n->tr, 1, n->address, dir, &v, 1, &o, NULL, n);
  if (rv != 0) {
    fail_msg("ctl_open: %s", n->ctl.errmsg);
  }
  run_until(n->loop, is_leader, n, "leadership");
  run_until(n->loop, is_current, n, "the leader's barrier");
}

static void on_ctl_closed(struct controller *ctl)
{
  struct node *n = (struct node *)((char *)ctl - offsetof(struct node, ctl));
  n->ctl_closed = true;
}

static void on_tr_closed(struct transport *tr)
{
  struct node *n = (struct node *)((char *)tr - offsetof(struct node, tr));
  n->tr_closed = true;
}

static bool closed(void *arg)
{
  struct node *n = arg;
  return n->ctl_closed && n->tr_closed;
}

static void on_wal_closed(void *data)
{
  *(bool *)data = true;
}
static bool flag_set(void *arg)
{
  return *(bool *)arg;
}

static bool node_ctl_closed(void *arg)
{
  return ((struct node *)arg)->ctl_closed;
}

/* Closes in the node's order (src/server/node.c): the controller, then
 * the transport, then the log. The transport waits for the controller:
 * the controller's Raft closes its transport group only once its last
 * request in the log (a snapshot being recorded) has called back, which
 * may be after a transport closed at the same time is gone. */
static void node_close(struct node *n)
{
  ctl_close(&n->ctl, on_ctl_closed);
  run_until(n->loop, node_ctl_closed, n, "the controller to close");
  transport_close(&n->tr, on_tr_closed);
  run_until(n->loop, closed, n, "the transport to close");
  bool wal_closed = false;
  wal_close(n->w, on_wal_closed, &wal_closed);
  run_until(n->loop, flag_set, &wal_closed, "the log to close");
  n->w = NULL;
}

static void on_proposed(struct ctl_propose *req, int status, const struct meta_result *res)
{
  struct node *n = req->data;
  n->answered = true;
  n->status = status;
  memset(&n->res, 0, sizeof n->res);
  if (res != NULL) {
    n->res = *res;
  }
}

/* The proposals in flight behind the one whose write fails: each must be
 * answered with a failure. */
static void on_more_proposed(struct ctl_propose *req, int status, const struct meta_result *res)
{
  (void)res;
  struct node *n = req->data;
  assert_true(status != 0);
  n->more_failed++;
}

static bool answered(void *arg)
{
  return ((struct node *)arg)->answered;
}

/* Proposes cmd (consumed) and waits for its answer; returns the status. */
static int node_propose(struct node *n, uint8_t *cmd, size_t len)
{
  n->answered = false;
  n->req.data = n;
  int rv = ctl_propose(&n->ctl, &n->req, cmd, len, on_proposed);
  free(cmd);
  if (rv != 0) {
    return rv;
  }
  run_until(n->loop, answered, n, "a proposal's answer");
  return n->status;
}

static void node_setup_cluster(struct node *n)
{
  uint8_t *cmd;
  size_t len;
  uint64_t voters[1] = {1};
  assert_int_equal(meta_cmd_bootstrap("ctlwal", voters, 1, &cmd, &len), 0);
  assert_int_equal(node_propose(n, cmd, len), 0);
  assert_int_equal(n->res.code, 0);
  struct meta_node_info info = {
      .node_id = 1, .incarnation = 7, .client_addr = "127.0.0.1:1", .cluster_addr = n->address};
  assert_int_equal(meta_cmd_register_node(&info, 0, &cmd, &len), 0);
  assert_int_equal(node_propose(n, cmd, len), 0);
  assert_int_equal(n->res.code, 0);
}

static void node_create_topic(struct node *n, const char *name)
{
  uint8_t *cmd;
  size_t len;
  assert_int_equal(meta_cmd_create_topic(name, 1, 1, NULL, &cmd, &len), 0);
  int rv = node_propose(n, cmd, len);
  if (rv != 0 || n->res.code != 0) {
    fail_msg("create topic %s: status %d, code %d: %s", name, rv, n->res.code, n->res.msg);
  }
}

/* How many entries of dir start with prefix. */
static int count_files(const char *dir, const char *prefix)
{
  DIR *d = opendir(dir);
  if (d == NULL) {
    return 0;
  }
  int count = 0;
  struct dirent *de;
  while ((de = readdir(d)) != NULL) {
    count += strncmp(de->d_name, prefix, strlen(prefix)) == 0;
  }
  closedir(d);
  return count;
}

static void check_topics(struct node *n, int count)
{
  const struct meta_state *st = ctl_state(&n->ctl);
  for (int k = 0; k < count; k++) {
    char name[32];
    snprintf(name, sizeof name, "t%d", k);
    if (meta_topic_find(st, name) == NULL) {
      fail_msg("topic %s (acknowledged) is gone", name);
    }
  }
  assert_int_equal(st->ntopics, (size_t)count);
}

static void node_init(struct node *n, uv_loop_t *loop, const char *tag)
{
  memset(n, 0, sizeof *n);
  n->loop = loop;
  char *base = tu_tmpdir(tag);
  snprintf(n->base, sizeof n->base, "%s", base);
  free(base);
  snprintf(n->address, sizeof n->address, "127.0.0.1:%d", test_port());
}

static void loop_finish(uv_loop_t *loop)
{
  uv_run(loop, UV_RUN_DEFAULT);
  assert_int_equal(uv_loop_close(loop), 0);
}

static void test_controller_wal_restarts_with_every_acknowledged_topic(void **state)
{
  (void)state;
  uv_loop_t loop;
  assert_int_equal(uv_loop_init(&loop), 0);
  static struct node n;
  node_init(&n, &loop, "ctlwal");
  node_open(&n);
  node_setup_cluster(&n);
  int topics = 0;
  /* Past the controller's snapshot threshold (256 entries) twice. */
  for (int round = 0; round < 3; round++) {
    for (int k = 0; k < 200; k++, topics++) {
      char name[32];
      snprintf(name, sizeof name, "t%d", topics);
      node_create_topic(&n, name);
    }
    node_close(&n);
    char meta[512], snaps[600];
    snprintf(meta, sizeof meta, "%s/meta", n.base);
    snprintf(snaps, sizeof snaps, "%s/wal-snapshots", meta);
    assert_int_equal(count_files(meta, "metadata"), 0);
    assert_int_equal(count_files(meta, "open-"), 0);
    assert_int_equal(count_files(meta, "snapshot-"), 0);
    if (round > 0) {
      assert_true(count_files(snaps, "snap-") >= 1);
    }
    node_open(&n);
    check_topics(&n, topics);
    struct wal_group_info gi;
    assert_int_equal(wal_group_info(n.w, CTL_GROUP_ID, &gi), 0);
    print_message("round %d: %d topics, metadata log [%llu, %llu), snapshot %llu\n", round, topics,
                  (unsigned long long)gi.first, (unsigned long long)gi.next,
                  (unsigned long long)gi.snap_index);
  }
  node_close(&n);
  loop_finish(&loop);
  tu_tmpdir_free(strdup(n.base));
}

static bool fatal_called(void *arg)
{
  return ((struct node *)arg)->fatal_calls > 0;
}

static void test_controller_wal_failed_write_latches_and_stops(void **state)
{
  (void)state;
  uv_loop_t loop;
  assert_int_equal(uv_loop_init(&loop), 0);
  static struct node n;
  node_init(&n, &loop, "ctlwal-fail");
  node_open(&n);
  node_setup_cluster(&n);
  for (int k = 0; k < 5; k++) {
    char name[32];
    snprintf(name, sizeof name, "t%d", k);
    node_create_topic(&n, name);
  }
  fault_arm(FAULT_WAL_WRITE, 0, -EIO);
  uint8_t *cmd;
  size_t len;
  assert_int_equal(meta_cmd_create_topic("lost", 1, 1, NULL, &cmd, &len), 0);
  n.answered = false;
  n.req.data = &n;
  assert_int_equal(ctl_propose(&n.ctl, &n.req, cmd, len, on_proposed), 0);
  free(cmd);
  /* More appends in flight in the same write: every one fails with it
   * (raft 0.15 must learn of them newest first: controller.c). */
  struct ctl_propose more[4];
  for (int k = 0; k < 4; k++) {
    char name[32];
    snprintf(name, sizeof name, "lost%d", k);
    assert_int_equal(meta_cmd_create_topic(name, 1, 1, NULL, &cmd, &len), 0);
    more[k].data = &n;
    assert_int_equal(ctl_propose(&n.ctl, &more[k], cmd, len, on_more_proposed), 0);
    free(cmd);
  }
  run_until(&loop, fatal_called, &n, "on_fatal");
  fault_reset();
  assert_true(ctl_failed(&n.ctl));
  assert_true(wal_fatal(n.w) != 0);
  assert_false(ctl_is_leader(&n.ctl));
  uint64_t id = 1;
  const char *addr = NULL;
  ctl_leader(&n.ctl, &id, &addr);
  assert_int_equal(id, 0);
  /* Nothing more is proposed or acknowledged. */
  struct ctl_propose again = {.data = &n};
  assert_int_equal(meta_cmd_create_topic("later", 1, 1, NULL, &cmd, &len), 0);
  assert_int_equal(ctl_propose(&n.ctl, &again, cmd, len, on_proposed), CAIRN_ENOTLEADER);
  free(cmd);
  /* A while latched: on_fatal once, and the failed proposal is never
   * reported applied. */
  uint64_t until = uv_now(&loop) + 300;
  while (uv_now(&loop) < until) {
    uv_run(&loop, UV_RUN_ONCE);
  }
  assert_int_equal(n.fatal_calls, 1);
  assert_true(!n.answered || n.status != 0);
  node_close(&n);
  assert_true(n.answered); /* the close answers it, at the latest */
  assert_true(n.status != 0);
  assert_int_equal(n.more_failed, 4);
  /* From the disk: every acknowledged topic. */
  node_open(&n);
  const struct meta_state *st = ctl_state(&n.ctl);
  for (int k = 0; k < 5; k++) {
    char name[32];
    snprintf(name, sizeof name, "t%d", k);
    assert_non_null(meta_topic_find(st, name));
  }
  assert_null(meta_topic_find(st, "later"));
  assert_false(ctl_failed(&n.ctl));
  node_create_topic(&n, "after");
  node_close(&n);
  loop_finish(&loop);
  tu_tmpdir_free(strdup(n.base));
}

static uint64_t run_deadline;
static void on_wake(uv_timer_t *t)
{
  (void)t; /* wakes the loop so that run_until looks at the clock */
}
static bool deadline_passed(void *arg)
{
  (void)arg;
  return uv_hrtime() > run_deadline;
}

/* Runs the loop for ms (with a timer, so that it never blocks for good). */
static void run_for(uv_loop_t *loop, unsigned ms)
{
  uv_timer_t t;
  uv_timer_init(loop, &t);
  uv_timer_start(&t, on_wake, 10, 10);
  run_deadline = uv_hrtime() + (uint64_t)ms * 1000 * 1000;
  run_until(loop, deadline_passed, NULL, "the time to pass");
  uv_close((uv_handle_t *)&t, NULL);
  uv_run(loop, UV_RUN_NOWAIT);
}

/* Opens the controller (log and transport open) with opts refused /
 * no_bootstrap; fails the test on an error. */
static void node_open_ctl(struct node *n, bool refused, bool no_bootstrap)
{
  char dir[512];
  snprintf(dir, sizeof dir, "%s/meta", n->base);
  struct ctl_voter v = {.id = 1, .address = n->address};
  struct ctl_opts o = {.wal = n->w,
                       .on_fatal = on_fatal,
                       .heartbeat_ms = 20,
                       .election_ms = 100,
                       .refused = refused,
                       .no_bootstrap = no_bootstrap};
  n->ctl_closed = n->tr_closed = false;
  int rv = ctl_open(&n->ctl, n->loop, &n->tr, 1, n->address, dir, &v, 1, &o, NULL, n);
  if (rv != 0) {
    fail_msg("ctl_open: %s", n->ctl.errmsg);
  }
}

/* A refused replica (its log was damaged, metaheal.h) runs no Raft: the
 * configured single voter neither bootstraps nor leads, proposes nothing,
 * and closes. Rejoined, Raft runs on the empty log without bootstrapping
 * (a voter with none of its entries would elect itself here: with one
 * voter, it would make a new, empty cluster); a later open with
 * no_bootstrap (a crash after the rebuild started) does not bootstrap
 * either; only a plain open of the fresh log does. */
static void test_controller_wal_refused_runs_no_raft_and_never_bootstraps(void **state)
{
  (void)state;
  uv_loop_t loop;
  assert_int_equal(uv_loop_init(&loop), 0);
  static struct node n;
  node_init(&n, &loop, "ctlwal-refused");
  node_open_wal(&n);
  assert_int_equal(transport_init(&n.tr, n.loop, n.address), 0);
  node_open_ctl(&n, true, false);
  run_for(&loop, 500);
  assert_false(ctl_is_leader(&n.ctl));
  assert_int_equal(ctl_self_role(&n.ctl), -1);
  assert_int_equal(ctl_applied_index(&n.ctl), 0);
  uint64_t id = 9;
  const char *addr = "x";
  ctl_leader(&n.ctl, &id, &addr);
  assert_true(id == 0 && addr == NULL);
  struct ctl_propose req = {.data = &n};
  uint8_t cmd[8] = {0};
  assert_int_equal(ctl_propose(&n.ctl, &req, cmd, sizeof cmd, on_proposed), CAIRN_ESHUTDOWN);
  node_close(&n);
  /* Again refused, then rejoined: Raft runs, without a configuration. */
  node_open_wal(&n);
  assert_int_equal(transport_init(&n.tr, n.loop, n.address), 0);
  node_open_ctl(&n, true, false);
  assert_int_equal(ctl_rejoin(&n.ctl), 0);
  assert_int_equal(ctl_rejoin(&n.ctl), CAIRN_EINVAL); /* running already */
  run_for(&loop, 500);
  assert_false(ctl_is_leader(&n.ctl));
  assert_int_equal(ctl_self_role(&n.ctl), -1);
  node_close(&n);
  /* A restart of the rebuilt replica: no_bootstrap. */
  node_open_wal(&n);
  assert_int_equal(transport_init(&n.tr, n.loop, n.address), 0);
  node_open_ctl(&n, false, true);
  run_for(&loop, 500);
  assert_false(ctl_is_leader(&n.ctl));
  node_close(&n);
  /* The same fresh log opened plainly bootstraps and leads (the contrast). */
  node_open_wal(&n);
  assert_int_equal(transport_init(&n.tr, n.loop, n.address), 0);
  node_open_ctl(&n, false, false);
  run_until(&loop, is_leader, &n, "leadership");
  assert_int_equal(ctl_self_role(&n.ctl), RAFT_VOTER);
  node_close(&n);
  loop_finish(&loop);
}

int main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_controller_wal_restarts_with_every_acknowledged_topic),
      cmocka_unit_test(test_controller_wal_failed_write_latches_and_stops),
      cmocka_unit_test(test_controller_wal_refused_runs_no_raft_and_never_bootstraps),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
