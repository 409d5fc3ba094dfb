/* test_raft_io_wal.c - a real canonical/raft 0.15 instance whose storage
 * is the node-wide log (cluster/raft_io_wal.h, through riow_uv.h) and whose network, timers
 * and randomness are raft_uv's over TCP on loopback: a single-voter group
 * bootstraps, elects itself, applies commands, takes snapshots that
 * compact the log, is closed and reopened (also after its wal is reopened)
 * several times, and after each restart replays exactly the commands it
 * had applied, from the snapshot and the entries after it. A second test
 * runs several groups on one wal at once. */
#include "cluster/riow_uv.h"
#include "common/err.h"
#include "common/fsutil.h"
#include "proc.h"
#include "testutil.h"

#include <raft/uv.h>
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

struct rn {
  struct raft raft;
  struct riow_uv wio; /* the trampolines cairnd's groups use */
  struct raft_uv_transport tr;
  struct raft_fsm fsm;
  int (*snapshot_put)(struct raft_io *io, unsigned trailing, struct raft_io_snapshot_put *req,
                      const struct raft_snapshot *s, raft_io_snapshot_put_cb cb);
  uint64_t sum, count; /* the state machine: what was applied */
  unsigned applied_cbs, snapshots;
  bool closed;
  char address[64];
};

static struct rn *rn_of(struct raft_io *io)
{
  return (struct rn *)((char *)io - offsetof(struct rn, wio.io));
}

/* Counts the snapshots taken, over riow_uv's method. */
static int t_snapshot_put(struct raft_io *io, unsigned trailing, struct raft_io_snapshot_put *req,
                          const struct raft_snapshot *s, raft_io_snapshot_put_cb cb)
{
  struct rn *n = rn_of(io);
  n->snapshots++;
  return n->snapshot_put(io, trailing, req, s, cb);
}

/* ---- the state machine ---- */

static int fsm_apply(struct raft_fsm *fsm, const struct raft_buffer *buf, void **result)
{
  struct rn *n = fsm->data;
  uint64_t v;
  assert_int_equal(buf->len, sizeof v);
  memcpy(&v, buf->base, sizeof v);
  n->sum += v;
  n->count++;
  *result = NULL;
  return 0;
}

static int fsm_snapshot(struct raft_fsm *fsm, struct raft_buffer *bufs[], unsigned *n_bufs)
{
  struct rn *n = fsm->data;
  *bufs = raft_malloc(sizeof **bufs);
  uint64_t *v = raft_malloc(2 * sizeof *v);
  assert_non_null(*bufs);
  assert_non_null(v);
  v[0] = n->sum;
  v[1] = n->count;
  (*bufs)[0] = (struct raft_buffer){v, 2 * sizeof *v};
  *n_bufs = 1;
  return 0;
}

static int fsm_restore(struct raft_fsm *fsm, struct raft_buffer *buf)
{
  struct rn *n = fsm->data;
  uint64_t v[2];
  assert_int_equal(buf->len, sizeof v);
  memcpy(v, buf->base, sizeof v);
  n->sum = v[0];
  n->count = v[1];
  raft_free(buf->base);
  return 0;
}

/* ---- driving ---- */

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

static bool is_leader(void *arg)
{
  return raft_state(&((struct rn *)arg)->raft) == RAFT_LEADER;
}

static bool is_closed(void *arg)
{
  return ((struct rn *)arg)->closed;
}

static void rn_open(struct rn *n, uv_loop_t *loop, struct wal *w, uint64_t gid, const char *base,
                    int port, bool bootstrap)
{
  memset(n, 0, sizeof *n);
  char dir[512], snap[600];
  snprintf(dir, sizeof dir, "%s/g%llu", base, (unsigned long long)gid);
  snprintf(snap, sizeof snap, "%s/snap", dir);
  assert_int_equal(fs_mkdir_p(snap), 0);
  snprintf(n->address, sizeof n->address, "127.0.0.1:%d", port);
  assert_int_equal(raft_uv_tcp_init(&n->tr, loop), 0);
  assert_int_equal(raft_uv_init(&n->wio.io, loop, dir, &n->tr), 0);
  assert_int_equal(riow_uv_attach(&n->wio, loop, w, gid, snap), 0);
  n->snapshot_put = n->wio.io.snapshot_put;
  n->wio.io.snapshot_put = t_snapshot_put;
  n->fsm = (struct raft_fsm){.version = 1,
                             .data = n,
                             .apply = fsm_apply,
                             .snapshot = fsm_snapshot,
                             .restore = fsm_restore};
  assert_int_equal(raft_init(&n->raft, &n->wio.io, &n->fsm, 1, n->address), 0);
  n->raft.data = n;
  raft_set_election_timeout(&n->raft, 50);
  raft_set_heartbeat_timeout(&n->raft, 10);
  raft_set_snapshot_threshold(&n->raft, 32);
  raft_set_snapshot_trailing(&n->raft, 8);
  if (bootstrap) {
    struct raft_configuration conf;
    raft_configuration_init(&conf);
    assert_int_equal(raft_configuration_add(&conf, 1, n->address, RAFT_VOTER), 0);
    assert_int_equal(raft_bootstrap(&n->raft, &conf), 0);
    raft_configuration_close(&conf);
  }
  int rv = raft_start(&n->raft);
  if (rv != 0) {
    fail_msg("group %llu: raft_start: %s (%s)", (unsigned long long)gid, raft_strerror(rv),
             raft_errmsg(&n->raft));
  }
}

static void on_raft_closed(struct raft *r)
{
  struct rn *n = r->data;
  raft_uv_close(&n->wio.io);
  raft_uv_tcp_close(&n->tr);
  n->closed = true;
}

static void rn_close(struct rn *n, uv_loop_t *loop)
{
  raft_close(&n->raft, on_raft_closed);
  run_until(loop, is_closed, n, "raft to close");
}

static void on_applied(struct raft_apply *req, int status, void *result)
{
  (void)result;
  struct rn *n = req->data;
  assert_int_equal(status, 0);
  n->applied_cbs++;
  free(req);
}

struct want {
  struct rn *n;
  unsigned cbs;
};

static bool all_applied(void *arg)
{
  struct want *w = arg;
  return w->n->applied_cbs >= w->cbs;
}

/* Applies values from, from+1, ..., from+count-1 and waits for them. */
static void rn_apply(struct rn *n, uv_loop_t *loop, uint64_t from, unsigned count)
{
  unsigned before = n->applied_cbs;
  for (unsigned i = 0; i < count; i++) {
    struct raft_apply *req = calloc(1, sizeof *req);
    struct raft_buffer buf = {raft_malloc(8), 8};
    uint64_t v = from + i;
    memcpy(buf.base, &v, 8);
    req->data = n;
    assert_int_equal(raft_apply(&n->raft, req, &buf, 1, on_applied), 0);
    if (i % 7 == 0) {
      uv_run(loop, UV_RUN_NOWAIT);
    }
  }
  struct want w = {n, before + count};
  run_until(loop, all_applied, &w, "applies");
}

static void on_wal_closed(void *data)
{
  *(bool *)data = true;
}

static bool flag_set(void *arg)
{
  return *(bool *)arg;
}

static void close_wal(uv_loop_t *loop, struct wal *w)
{
  bool closed = false;
  wal_close(w, on_wal_closed, &closed);
  run_until(loop, flag_set, &closed, "the wal to close");
}

static void on_barrier(struct raft_barrier *req, int status)
{
  assert_int_equal(status, 0);
  *(bool *)req->data = true;
}

/* A barrier commits everything before it: the restarted leader has
 * applied its whole log once it calls back. */
static void rn_catch_up(struct rn *n, uv_loop_t *loop)
{
  bool done = false;
  struct raft_barrier req = {.data = &done};
  assert_int_equal(raft_barrier(&n->raft, &req, on_barrier), 0);
  run_until(loop, flag_set, &done, "a barrier");
}

static uint64_t tri(uint64_t n)
{
  return n * (n + 1) / 2;
}

/* Port k of this process, the same in every round (the configuration
 * holds the address): reserved once (tu_free_port), where a port derived
 * from the pid collided with another test's under ctest -j. */
static int test_port(int k)
{
  static int ports[32];
  assert_true(k >= 0 && k < 32);
  if (ports[k] == 0) {
    ports[k] = tu_free_port();
    assert_true(ports[k] > 0);
  }
  return ports[k];
}

static void test_raft_over_wal_restarts_with_every_applied_command(void **state)
{
  (void)state;
  uv_loop_t loop;
  assert_int_equal(uv_loop_init(&loop), 0);
  char *base = tu_tmpdir("riow");
  char wdir[512];
  snprintf(wdir, sizeof wdir, "%s/wal", base);
  struct wal *w;
  char errmsg[WAL_ERRMSG_SIZE];
  struct wal_opts o = {.segment_bytes = 4096};
  assert_int_equal(wal_open(&loop, wdir, &o, &w, errmsg), 0);
  struct rn *n = calloc(1, sizeof *n);
  uint64_t applied = 0;
  raft_term last_term = 0;
  for (int round = 0; round < 4; round++) {
    rn_open(n, &loop, w, 42, base, test_port(0), round == 0);
    run_until(&loop, is_leader, n, "leadership");
    assert_true(n->raft.current_term >= last_term); /* a sole voter keeps its term */
    last_term = n->raft.current_term;
    /* A restarted leader applies its log again (from the snapshot on). */
    rn_catch_up(n, &loop);
    assert_int_equal(n->count, applied);
    assert_int_equal(n->sum, tri(applied));
    rn_apply(n, &loop, applied + 1, 100);
    applied += 100;
    assert_int_equal(n->count, applied);
    assert_int_equal(n->sum, tri(applied));
    assert_true(n->snapshots > 0);
    rn_close(n, &loop);
    if (round % 2 == 1) { /* the wal itself restarts too */
      close_wal(&loop, w);
      assert_int_equal(wal_open(&loop, wdir, &o, &w, errmsg), 0);
    }
    struct wal_group_info gi;
    assert_int_equal(wal_group_info(w, 42, &gi), 0);
    assert_true(gi.snap_index > 0);
    assert_true(gi.first > 1); /* compacted */
    struct wal_stats st;
    wal_get_stats(w, &st);
    print_message("round %d: term %llu, log [%llu, %llu), snapshot %llu, segments %llu..%llu\n",
                  round, (unsigned long long)last_term, (unsigned long long)gi.first,
                  (unsigned long long)gi.next, (unsigned long long)gi.snap_index,
                  (unsigned long long)st.first_seq, (unsigned long long)st.last_seq);
  }
  close_wal(&loop, w);
  free(n);
  uv_run(&loop, UV_RUN_DEFAULT);
  assert_int_equal(uv_loop_close(&loop), 0);
  tu_tmpdir_free(base);
}

/* Several groups on one log: each keeps its own entries and state. */
static void test_raft_groups_share_one_wal(void **state)
{
  (void)state;
  enum { G = 5 };
  uv_loop_t loop;
  assert_int_equal(uv_loop_init(&loop), 0);
  char *base = tu_tmpdir("riowg");
  char wdir[512];
  snprintf(wdir, sizeof wdir, "%s/wal", base);
  struct wal *w;
  char errmsg[WAL_ERRMSG_SIZE];
  assert_int_equal(wal_open(&loop, wdir, NULL, &w, errmsg), 0);
  struct rn *ns = calloc(G, sizeof *ns);
  for (int round = 0; round < 2; round++) {
    for (int g = 0; g < G; g++) {
      rn_open(&ns[g], &loop, w, 100 + (uint64_t)g, base, test_port(10 + g), round == 0);
    }
    for (int g = 0; g < G; g++) {
      run_until(&loop, is_leader, &ns[g], "leadership");
      rn_catch_up(&ns[g], &loop);
      assert_int_equal(ns[g].count, round * 40 * (g + 1));
    }
    for (int g = 0; g < G; g++) {
      uint64_t have = ns[g].count;
      rn_apply(&ns[g], &loop, have + 1, 40 * (unsigned)(g + 1));
      assert_int_equal(ns[g].sum, tri(have + 40 * (uint64_t)(g + 1)));
    }
    for (int g = 0; g < G; g++) {
      rn_close(&ns[g], &loop);
    }
  }
  assert_int_equal(wal_groups(w, NULL, 0), G);
  close_wal(&loop, w);
  free(ns);
  uv_run(&loop, UV_RUN_DEFAULT);
  assert_int_equal(uv_loop_close(&loop), 0);
  tu_tmpdir_free(base);
}

int main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_raft_over_wal_restarts_with_every_applied_command),
      cmocka_unit_test(test_raft_groups_share_one_wal),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
