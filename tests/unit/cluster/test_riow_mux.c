/* test_riow_mux.c - real canonical/raft 0.15 instances on the replica's own
 * raft_io (cluster/riow_mux.h): three nodes in one process, each with its
 * cluster port (transport.h), node watch (nodewatch.h), Raft multiplexer
 * (raftmux.h) and node-wide log (wal.h) over loopback; several groups of
 * three replicas elect (ticks), replicate (sends and receives through the
 * multiplexer), lose a replica and elect again, take it back after a
 * reopen from its log, and close while traffic is in flight. Also: the io
 * closes and calls back from the loop when raft never started, its random
 * numbers stay in range and differ between ios, async_work runs on the
 * thread pool, the group's transport routes only while started, and a
 * raft_uv connection (a peer without the mux) is closed on arrival. */
#include "cluster/nodewatch.h"
#include "cluster/raftmux.h"
#include "cluster/riow_mux.h"
#include "cluster/transport.h"
#include "common/err.h"
#include "common/fault.h"
#include "common/fsutil.h"
#include "proc.h"
#include "testutil.h"

#include <dirent.h>
#include <errno.h>
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

#define WAIT_NS ((uint64_t)60 * 1000 * 1000 * 1000)
#define NODES 3
#define GROUPS 3

/* One replica: raft over a riow_mux. */
struct rn {
  struct raft raft;
  struct riow_mux m;
  struct raft_uv_transport rt;
  struct raft_fsm fsm;
  uint64_t sum, count; /* the state machine */
  unsigned applied_cbs;
  bool open, closed;
};

/* One node: what cairnd has once per process. */
struct node {
  uint64_t id;
  char address[64];
  char dir[600];
  struct transport tr;
  struct nodewatch nw;
  struct raftmux mx;
  struct wal *w;
  struct rn g[GROUPS];
  bool tr_closed, nw_closed, mx_closed;
};

struct world {
  uv_loop_t loop;
  char *base;
  struct node n[NODES];
};

/* A port reserved for this process, below the ephemeral range (a port
 * from the pid could be taken by another process's outgoing connection). */
static int test_port(void)
{
  int port = tu_free_port();
  assert_true(port > 0);
  return port;
}

/* ---- the state machine ---- */

static int fsm_apply(struct raft_fsm *fsm, const struct raft_buffer *buf, void **result)
{
  struct rn *r = fsm->data;
  uint64_t v;
  assert_int_equal(buf->len, sizeof v);
  memcpy(&v, buf->base, sizeof v);
  r->sum += v;
  r->count++;
  *result = NULL;
  return 0;
}

static int fsm_snapshot(struct raft_fsm *fsm, struct raft_buffer *bufs[], unsigned *n_bufs)
{
  struct rn *r = fsm->data;
  *bufs = raft_malloc(sizeof **bufs);
  uint64_t *v = raft_malloc(2 * sizeof *v);
  assert_non_null(*bufs);
  assert_non_null(v);
  v[0] = r->sum;
  v[1] = r->count;
  (*bufs)[0] = (struct raft_buffer){v, 2 * sizeof *v};
  *n_bufs = 1;
  return 0;
}

static int fsm_restore(struct raft_fsm *fsm, struct raft_buffer *buf)
{
  struct rn *r = fsm->data;
  uint64_t v[2];
  assert_int_equal(buf->len, sizeof v);
  memcpy(v, buf->base, sizeof v);
  r->sum = v[0];
  r->count = v[1];
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

static bool flag_set(void *arg)
{
  return *(bool *)arg;
}

static void on_gone(struct nodewatch *nw, uint64_t node_id, void *data)
{
  (void)nw;
  (void)node_id;
  (void)data;
}

static void node_open(struct world *wd, int i)
{
  struct node *n = &wd->n[i];
  n->id = (uint64_t)i + 1;
  snprintf(n->address, sizeof n->address, "127.0.0.1:%d", test_port());
  snprintf(n->dir, sizeof n->dir, "%s/node%d", wd->base, i + 1);
  assert_int_equal(fs_mkdir_p(n->dir), 0);
  assert_int_equal(transport_init(&n->tr, &wd->loop, n->address), 0);
  assert_int_equal(nwatch_init(&n->nw, &wd->loop, &n->tr, n->id, n->address, on_gone, NULL), 0);
  assert_int_equal(raftmux_init(&n->mx, &wd->loop, &n->nw), 0);
  char wdir[700], errmsg[WAL_ERRMSG_SIZE];
  snprintf(wdir, sizeof wdir, "%s/wal", n->dir);
  assert_int_equal(wal_open(&wd->loop, wdir, NULL, &n->w, errmsg), 0);
}

static void nodes_watch(struct world *wd)
{
  uint64_t ids[NODES];
  const char *addrs[NODES];
  for (int i = 0; i < NODES; i++) {
    ids[i] = wd->n[i].id;
    addrs[i] = wd->n[i].address;
  }
  for (int i = 0; i < NODES; i++) {
    assert_int_equal(nwatch_set_peers(&wd->n[i].nw, ids, addrs, NODES), 0);
  }
}

static void rn_conf(struct world *wd, struct raft_configuration *conf)
{
  raft_configuration_init(conf);
  for (int i = 0; i < NODES; i++) {
    assert_int_equal(raft_configuration_add(conf, wd->n[i].id, wd->n[i].address, RAFT_VOTER), 0);
  }
}

/* Opens replica g of node i (group 100 + g) and starts it. */
static void rn_open(struct world *wd, int i, int g, bool bootstrap)
{
  struct node *n = &wd->n[i];
  struct rn *r = &n->g[g];
  memset(r, 0, sizeof *r);
  uint64_t gid = 100 + (uint64_t)g;
  char snap[800];
  snprintf(snap, sizeof snap, "%s/g%llu/snap", n->dir, (unsigned long long)gid);
  assert_int_equal(transport_group_init(&n->tr, &r->rt, gid), 0);
  assert_int_equal(
      riow_mux_init(&r->m, &wd->loop, n->w, gid, snap, &n->mx, n->id, n->address, &r->rt), 0);
  r->fsm = (struct raft_fsm){.version = 1,
                             .data = r,
                             .apply = fsm_apply,
                             .snapshot = fsm_snapshot,
                             .restore = fsm_restore};
  assert_int_equal(raft_init(&r->raft, &r->m.io, &r->fsm, n->id, n->address), 0);
  r->raft.data = r;
  raft_set_election_timeout(&r->raft, 1000);
  raft_set_heartbeat_timeout(&r->raft, 50);
  raft_set_snapshot_threshold(&r->raft, 64);
  raft_set_snapshot_trailing(&r->raft, 16);
  if (bootstrap) {
    struct raft_configuration conf;
    rn_conf(wd, &conf);
    assert_int_equal(raft_bootstrap(&r->raft, &conf), 0);
    raft_configuration_close(&conf);
  }
  assert_int_equal(raft_start(&r->raft), 0);
  r->open = true;
}

static void on_raft_closed(struct raft *raft)
{
  struct rn *r = raft->data;
  transport_group_release(&r->rt);
  r->closed = true;
}

static void rn_close_begin(struct rn *r)
{
  r->open = false;
  r->closed = false;
  raft_close(&r->raft, on_raft_closed);
}

static bool rn_is_closed(void *arg)
{
  return ((struct rn *)arg)->closed;
}

struct gwait {
  struct world *wd;
  int g;
  uint64_t count; /* for applied_everywhere */
};

static struct rn *leader_of(struct world *wd, int g)
{
  for (int i = 0; i < NODES; i++) {
    struct rn *r = &wd->n[i].g[g];
    if (r->open && raft_state(&r->raft) == RAFT_LEADER) {
      return r;
    }
  }
  return NULL;
}

static bool has_leader(void *arg)
{
  struct gwait *gw = arg;
  return leader_of(gw->wd, gw->g) != NULL;
}

static bool applied_everywhere(void *arg)
{
  struct gwait *gw = arg;
  for (int i = 0; i < NODES; i++) {
    struct rn *r = &gw->wd->n[i].g[gw->g];
    if (r->open && r->count < gw->count) {
      return false;
    }
  }
  return true;
}

static void on_applied(struct raft_apply *req, int status, void *result)
{
  (void)result;
  struct rn *r = req->data;
  if (status == 0) {
    r->applied_cbs++;
  }
  free(req);
}

/* Proposes values from..from+count-1 at group g's leader, without waiting. */
static void propose(struct world *wd, int g, uint64_t from, unsigned count)
{
  struct gwait gw = {wd, g, 0};
  run_until(&wd->loop, has_leader, &gw, "a leader");
  struct rn *r = leader_of(wd, g);
  for (unsigned k = 0; k < count; k++) {
    struct raft_apply *req = calloc(1, sizeof *req);
    struct raft_buffer buf = {raft_malloc(8), 8};
    uint64_t v = from + k;
    memcpy(buf.base, &v, 8);
    req->data = r;
    assert_int_equal(raft_apply(&r->raft, req, &buf, 1, on_applied), 0);
  }
}

static uint64_t tri(uint64_t n)
{
  return n * (n + 1) / 2;
}

/* Every open replica of g applied exactly 1..count. */
static void expect_applied(struct world *wd, int g, uint64_t count)
{
  struct gwait gw = {wd, g, count};
  run_until(&wd->loop, applied_everywhere, &gw, "every replica to apply");
  for (int i = 0; i < NODES; i++) {
    struct rn *r = &wd->n[i].g[g];
    if (r->open) {
      assert_int_equal(r->count, count);
      assert_int_equal(r->sum, tri(count));
    }
  }
}

static void on_mx_closed(struct raftmux *mx)
{
  struct node *n = (struct node *)((char *)mx - offsetof(struct node, mx));
  n->mx_closed = true;
}

static void on_nw_closed(struct nodewatch *nw)
{
  struct node *n = (struct node *)((char *)nw - offsetof(struct node, nw));
  n->nw_closed = true;
}

static void on_tr_closed(struct transport *tr)
{
  struct node *n = (struct node *)((char *)tr - offsetof(struct node, tr));
  n->tr_closed = true;
}

static void on_wal_closed(void *data)
{
  *(bool *)data = true;
}

static void node_close(struct world *wd, int i)
{
  struct node *n = &wd->n[i];
  raftmux_close(&n->mx, on_mx_closed);
  run_until(&wd->loop, flag_set, &n->mx_closed, "the mux to close");
  nwatch_close(&n->nw, on_nw_closed);
  run_until(&wd->loop, flag_set, &n->nw_closed, "the node watch to close");
  transport_close(&n->tr, on_tr_closed);
  run_until(&wd->loop, flag_set, &n->tr_closed, "the transport to close");
  bool closed = false;
  wal_close(n->w, on_wal_closed, &closed);
  run_until(&wd->loop, flag_set, &closed, "the wal to close");
}

static void world_open(struct world *wd, const char *tag)
{
  memset(wd, 0, sizeof *wd);
  assert_int_equal(uv_loop_init(&wd->loop), 0);
  wd->base = tu_tmpdir(tag);
  for (int i = 0; i < NODES; i++) {
    node_open(wd, i);
  }
  nodes_watch(wd);
}

static void world_close(struct world *wd)
{
  for (int i = 0; i < NODES; i++) {
    node_close(wd, i);
  }
  uv_run(&wd->loop, UV_RUN_DEFAULT);
  assert_int_equal(uv_loop_close(&wd->loop), 0); /* no handle of any io is left */
  tu_tmpdir_free(wd->base);
}

/* ---- tests ---- */

static void on_barrier(struct raft_barrier *req, int status)
{
  assert_int_equal(status, 0);
  *(bool *)req->data = true;
}

/* A barrier at g's leader: everything before it is committed and applied
 * there. Returns that leader. */
static struct rn *barrier(struct world *wd, int g)
{
  struct gwait gw = {wd, g, 0};
  run_until(&wd->loop, has_leader, &gw, "a leader");
  struct rn *r = leader_of(wd, g);
  bool done = false;
  struct raft_barrier req = {.data = &done};
  assert_int_equal(raft_barrier(&r->raft, &req, on_barrier), 0);
  run_until(&wd->loop, flag_set, &done, "a barrier");
  return r;
}

static int node_of(struct world *wd, const struct rn *r)
{
  for (int i = 0; i < NODES; i++) {
    if (r >= wd->n[i].g && r < wd->n[i].g + GROUPS) {
      return i;
    }
  }
  fail_msg("replica of no node");
  return -1;
}

/* A raft_uv connection, as a node with --raft-mux off would dial it. */
struct dial_probe {
  struct transport_dial req;
  uv_stream_t *stream;
  int status;
  bool dialed, ended;
};

static void probe_alloc(uv_handle_t *h, size_t size, uv_buf_t *buf)
{
  (void)h;
  buf->base = malloc(size);
  buf->len = buf->base != NULL ? size : 0;
}

static void probe_read(uv_stream_t *stream, ssize_t nread, const uv_buf_t *buf)
{
  struct dial_probe *p = stream->data;
  free(buf->base);
  if (nread < 0) {
    p->ended = true; /* closed by the replica's io */
    uv_read_stop(stream);
  }
}

static void probe_dialed(struct transport_dial *req, uv_stream_t *stream, int status)
{
  struct dial_probe *p = req->data;
  p->status = status;
  p->stream = stream;
  p->dialed = true;
  if (stream != NULL) {
    stream->data = p;
    assert_int_equal(uv_read_start(stream, probe_alloc, probe_read), 0);
  }
}

static void probe_free(uv_handle_t *h)
{
  free(h);
}

/* Node 2 dials node 1's replica of group 100 the raft_uv way: the
 * connection is closed, the replica counts it, nothing else changes. */
static void raft_uv_dial_refused(struct world *wd)
{
  struct dial_probe p = {0};
  p.req.data = &p;
  assert_int_equal(transport_dial(&wd->n[1].tr, &p.req, TRANSPORT_KIND_RAFT, 100, wd->n[1].id,
                                  wd->n[1].address, wd->n[0].address, probe_dialed),
                   0);
  run_until(&wd->loop, flag_set, &p.dialed, "the dial");
  assert_int_equal(p.status, 0);
  run_until(&wd->loop, flag_set, &p.ended, "the replica to close the connection");
  uv_close((uv_handle_t *)p.stream, probe_free);
  assert_int_equal(wd->n[0].g[0].m.refused, 1);
}

static void test_groups_elect_replicate_fail_over_and_catch_up(void **state)
{
  (void)state;
  struct world *wd = calloc(1, sizeof *wd);
  world_open(wd, "riowmux");
  for (int i = 0; i < NODES; i++) {
    for (int g = 0; g < GROUPS; g++) {
      rn_open(wd, i, g, true);
    }
    /* Each replica's transport routes (catch-up fetches) while started. */
    assert_int_equal(wd->n[i].tr.nroutes, GROUPS);
  }
  raft_uv_dial_refused(wd);
  uint64_t have[GROUPS];
  for (int g = 0; g < GROUPS; g++) {
    have[g] = 100 + 50 * (uint64_t)g;
    propose(wd, g, 1, (unsigned)have[g]);
  }
  for (int g = 0; g < GROUPS; g++) {
    expect_applied(wd, g, have[g]);
  }
  /* Group 0 loses its leader, with proposals in flight; the other two
   * elect and go on without it. */
  struct rn *old = leader_of(wd, 0);
  assert_non_null(old);
  int old_node = node_of(wd, old);
  raft_term term = old->raft.current_term;
  propose(wd, 0, have[0] + 1, 20);
  rn_close_begin(old);
  run_until(&wd->loop, rn_is_closed, old, "the replica to close");
  assert_int_equal(wd->n[old_node].tr.nroutes, GROUPS - 1);
  struct rn *now = barrier(wd, 0);
  assert_true(now->raft.current_term > term);
  /* The in-flight ones committed or not, as a prefix. */
  assert_true(now->count >= have[0] && now->count <= have[0] + 20);
  have[0] = now->count;
  expect_applied(wd, 0, have[0]);
  propose(wd, 0, have[0] + 1, 50);
  have[0] += 50;
  expect_applied(wd, 0, have[0]);
  /* Reopened from its log, the old leader catches up through the mux. */
  rn_open(wd, old_node, 0, false);
  expect_applied(wd, 0, have[0]);
  print_message("group 0: leader changed from term %llu to %llu; %llu applied everywhere\n",
                (unsigned long long)term, (unsigned long long)now->raft.current_term,
                (unsigned long long)have[0]);
  /* Every replica closes with proposals in flight. */
  for (int g = 0; g < GROUPS; g++) {
    propose(wd, g, have[g] + 1, 30);
  }
  for (int i = 0; i < NODES; i++) {
    for (int g = 0; g < GROUPS; g++) {
      rn_close_begin(&wd->n[i].g[g]);
    }
  }
  for (int i = 0; i < NODES; i++) {
    for (int g = 0; g < GROUPS; g++) {
      run_until(&wd->loop, rn_is_closed, &wd->n[i].g[g], "every replica to close");
    }
    assert_int_equal(wd->n[i].tr.nroutes, 0);
  }
  world_close(wd);
  free(wd);
}

static bool closed_flag;

static void on_closed_flag(struct raft *raft)
{
  (void)raft;
  closed_flag = true;
}

struct work_probe {
  struct raft_io_async_work req;
  uv_thread_t loop_thread;
  uv_thread_t worker;
  int status;
  bool done;
};

static int probe_work(struct raft_io_async_work *req)
{
  struct work_probe *p = req->data;
  p->worker = uv_thread_self();
  return 7;
}

static void probe_done(struct raft_io_async_work *req, int status)
{
  struct work_probe *p = req->data;
  p->status = status;
  p->done = true;
}

/* The io without a peer: close before start, release after a refused
 * init, random numbers, async_work. */
static void never_tick(struct raft_io *io)
{
  (void)io;
  fail_msg("an io started with msecs 0 ticked");
}

static void never_recv(struct raft_io *io, struct raft_message *m)
{
  (void)io;
  (void)m;
}

static bool io_closed;
static void on_io_closed(struct raft_io *io)
{
  (void)io;
  io_closed = true;
}

static void test_io_close_release_random_and_async_work(void **state)
{
  (void)state;
  struct world *wd = calloc(1, sizeof *wd);
  world_open(wd, "riowmux1");
  struct node *n = &wd->n[0];
  char snap[800];
  snprintf(snap, sizeof snap, "%s/solo/snap", n->dir);

  /* Set up, never given to raft: released at once. */
  struct rn *r = &n->g[0];
  memset(r, 0, sizeof *r);
  assert_int_equal(transport_group_init(&n->tr, &r->rt, 7), 0);
  assert_int_equal(
      riow_mux_init(&r->m, &wd->loop, n->w, 7, snap, &n->mx, n->id, n->address, &r->rt), 0);
  riow_mux_release(&r->m);
  transport_group_release(&r->rt);
  assert_int_equal(riow_mux_init(&r->m, &wd->loop, n->w, 7, snap, &n->mx, n->id, "", NULL),
                   CAIRN_EINVAL);

  /* raft_init, then raft_close without a start: calls back from the loop. */
  r->fsm = (struct raft_fsm){.version = 1,
                             .data = r,
                             .apply = fsm_apply,
                             .snapshot = fsm_snapshot,
                             .restore = fsm_restore};
  assert_int_equal(riow_mux_init(&r->m, &wd->loop, n->w, 7, snap, &n->mx, n->id, n->address, NULL),
                   0);
  assert_int_equal(raft_init(&r->raft, &r->m.io, &r->fsm, n->id, n->address), 0);
  closed_flag = false;
  raft_close(&r->raft, on_closed_flag);
  assert_false(closed_flag);
  run_until(&wd->loop, flag_set, &closed_flag, "an unstarted io to close");

  /* Started with msecs 0 (its owner ticks raft): no timer; the close
   * still calls back from the loop (raftmux_defer). */
  assert_int_equal(riow_mux_init(&r->m, &wd->loop, n->w, 7, snap, &n->mx, n->id, n->address, NULL),
                   0);
  assert_int_equal(r->m.io.start(&r->m.io, 0, never_tick, never_recv), 0);
  assert_null(r->m.timer);
  io_closed = false;
  r->m.io.close(&r->m.io, on_io_closed);
  assert_false(io_closed);
  run_until(&wd->loop, flag_set, &io_closed, "a timerless io to close");

  /* Random numbers: in [min, max), and each io has its own sequence. */
  struct riow_mux *a = calloc(1, sizeof *a), *b = calloc(1, sizeof *b);
  assert_int_equal(riow_mux_init(a, &wd->loop, n->w, 8, snap, &n->mx, n->id, n->address, NULL), 0);
  assert_int_equal(riow_mux_init(b, &wd->loop, n->w, 9, snap, &n->mx, n->id, n->address, NULL), 0);
  int lo = 1000, hi = 0, same = 0;
  for (int k = 0; k < 10000; k++) {
    int x = a->io.random(&a->io, 100, 150);
    int y = b->io.random(&b->io, 100, 150);
    assert_true(x >= 100 && x < 150);
    lo = x < lo ? x : lo;
    hi = x > hi ? x : hi;
    same += x == y;
  }
  assert_int_equal(lo, 100);
  assert_int_equal(hi, 149);
  assert_true(same < 1000); /* independent: about 200 of 10000 */
  assert_int_equal(a->io.random(&a->io, 5, 5), 5);
  riow_mux_release(a);
  riow_mux_release(b);
  free(a);
  free(b);

  /* A started io runs async_work on the thread pool and calls back on
   * the loop; its time is the loop's. */
  memset(r, 0, sizeof *r);
  assert_int_equal(transport_group_init(&n->tr, &r->rt, 7), 0);
  assert_int_equal(
      riow_mux_init(&r->m, &wd->loop, n->w, 7, snap, &n->mx, n->id, n->address, &r->rt), 0);
  assert_int_equal(raft_init(&r->raft, &r->m.io, &r->fsm, n->id, n->address), 0);
  r->raft.data = r;
  struct raft_configuration conf;
  raft_configuration_init(&conf);
  assert_int_equal(raft_configuration_add(&conf, n->id, n->address, RAFT_VOTER), 0);
  assert_int_equal(raft_bootstrap(&r->raft, &conf), 0);
  raft_configuration_close(&conf);
  raft_set_election_timeout(&r->raft, 50);
  raft_set_heartbeat_timeout(&r->raft, 10);
  assert_int_equal(raft_start(&r->raft), 0);
  r->open = true;
  assert_int_equal(n->tr.nroutes, 1);
  assert_int_equal(r->m.io.time(&r->m.io), uv_now(&wd->loop));
  struct gwait gw = {wd, 0, 0};
  run_until(&wd->loop, has_leader, &gw, "a sole voter to lead (ticks)");
  struct work_probe p = {.loop_thread = uv_thread_self()};
  p.req.data = &p;
  p.req.work = probe_work;
  assert_int_equal(r->m.io.async_work(&r->m.io, &p.req, probe_done), 0);
  assert_false(p.done);
  /* Closed with the work pending: raft's callback waits for it. */
  rn_close_begin(r);
  run_until(&wd->loop, rn_is_closed, r, "the io to close after its work");
  assert_true(p.done);
  assert_int_equal(p.status, 7);
  assert_false(uv_thread_equal(&p.worker, &p.loop_thread));
  assert_int_equal(n->tr.nroutes, 0);
  world_close(wd);
  free(wd);
}

/* ---- term and vote by group commit: held sends ---- */

#define HELD_GID 300
#define CRASH_ROUNDS 60
#define MAX_SEEN 64

/* What node 2's bare io (no raft) received for HELD_GID. */
struct seen {
  unsigned n;
  int type[MAX_SEEN];
  uint64_t term[MAX_SEEN];
  uint64_t durable_at[MAX_SEEN]; /* node 1's durable bytes when it arrived */
};

static struct seen seen;
static struct wal *seen_sender_wal; /* node 1's log, read at each arrival */

static void bare_tick(struct raft_io *io)
{
  (void)io;
}

static void bare_recv(struct raft_io *io, struct raft_message *m)
{
  (void)io;
  assert_true(seen.n < MAX_SEEN);
  struct wal_stats st;
  wal_get_stats(seen_sender_wal, &st);
  seen.type[seen.n] = m->type;
  seen.term[seen.n] = m->type == RAFT_IO_REQUEST_VOTE            ? m->request_vote.term
                      : m->type == RAFT_IO_APPEND_ENTRIES_RESULT ? m->append_entries_result.term
                                                                 : 0;
  seen.durable_at[seen.n] = st.durable_lsn;
  seen.n++;
}

static void bare_closed(struct raft_io *io)
{
  (void)io;
  closed_flag = true;
}

/* A riow_mux of group HELD_GID on node i, started without raft. */
static void bare_open(struct world *wd, int i, struct riow_mux *m)
{
  struct node *n = &wd->n[i];
  char snap[800];
  snprintf(snap, sizeof snap, "%s/g%d/snap", n->dir, HELD_GID);
  assert_int_equal(
      riow_mux_init(m, &wd->loop, n->w, HELD_GID, snap, &n->mx, n->id, n->address, NULL), 0);
  assert_int_equal(m->io.init(&m->io, n->id, n->address), 0);
  assert_int_equal(m->io.start(&m->io, 3600 * 1000, bare_tick, bare_recv), 0);
}

static void bare_close(struct world *wd, struct riow_mux *m)
{
  closed_flag = false;
  m->io.close(&m->io, bare_closed);
  run_until(&wd->loop, flag_set, &closed_flag, "a bare io to close");
}

/* One send and its outcome. */
struct bsend {
  struct raft_io_send req;
  int status;
  bool done;
};

static void bsend_cb(struct raft_io_send *req, int status)
{
  struct bsend *b = req->data;
  b->status = status;
  b->done = true;
}

static void bare_send(struct world *wd, struct riow_mux *m, struct bsend *b, int type,
                      uint64_t term)
{
  struct raft_message msg;
  memset(&msg, 0, sizeof msg);
  msg.type = type;
  msg.server_id = wd->n[1].id;
  msg.server_address = wd->n[1].address;
  if (type == RAFT_IO_REQUEST_VOTE) {
    msg.request_vote = (struct raft_request_vote){.term = term, .candidate_id = wd->n[0].id};
  } else {
    msg.append_entries_result = (struct raft_append_entries_result){.term = term};
  }
  *b = (struct bsend){.req = {.data = b}};
  assert_int_equal(m->io.send(&m->io, &b->req, &msg, bsend_cb), 0);
}

static bool seen_at_least(void *arg)
{
  return seen.n >= *(unsigned *)arg;
}

static bool peers_up(void *arg)
{
  struct world *wd = arg;
  return nwatch_peer_state(&wd->n[0].nw, wd->n[1].id) == NWATCH_UP &&
         nwatch_peer_state(&wd->n[1].nw, wd->n[0].id) == NWATCH_UP;
}

static void on_pause(uv_timer_t *t)
{
  *(bool *)t->data = true;
}

/* Runs the loop for ms of wall time (whatever else is due runs too). */
static void run_for(uv_loop_t *loop, unsigned ms)
{
  bool over = false;
  uv_timer_t t;
  uv_timer_init(loop, &t);
  t.data = &over;
  uv_timer_start(&t, on_pause, ms, 0);
  run_until(loop, flag_set, &over, "a pause");
  uv_close((uv_handle_t *)&t, NULL);
  uv_run(loop, UV_RUN_NOWAIT);
}

/* The thread pool's one worker (UV_THREADPOOL_SIZE=1, main) kept busy,
 * so the log's write job waits: the record is queued, not durable. */
struct pool_block {
  uv_work_t work;
  uv_sem_t go;
  bool done;
};

static void pool_block_run(uv_work_t *w)
{
  struct pool_block *pb = w->data;
  uv_sem_wait(&pb->go);
}

static void pool_block_done(uv_work_t *w, int status)
{
  (void)status;
  struct pool_block *pb = w->data;
  pb->done = true;
}

static void world_open_pair(struct world *wd, const char *tag)
{
  world_open(wd, tag);
  run_until(&wd->loop, peers_up, wd, "nodes 1 and 2 to connect");
  memset(&seen, 0, sizeof seen);
  seen_sender_wal = wd->n[0].w;
}

/* A message sent after set_term/set_vote leaves only once their records
 * are durable, after the messages sent before them, and in order; a
 * message sent with no record in flight leaves at once. */
static void test_sends_wait_until_the_term_and_vote_are_durable(void **state)
{
  (void)state;
  struct world *wd = calloc(1, sizeof *wd);
  world_open_pair(wd, "riowmux2");
  struct riow_mux *snd = calloc(1, sizeof *snd), *rcv = calloc(1, sizeof *rcv);
  bare_open(wd, 0, snd);
  bare_open(wd, 1, rcv);
  struct bsend b[4];

  /* Nothing in flight: straight out. */
  bare_send(wd, snd, &b[0], RAFT_IO_APPEND_ENTRIES_RESULT, 4);
  unsigned want = 1;
  run_until(&wd->loop, seen_at_least, &want, "an unheld message");
  assert_true(b[0].done);
  assert_int_equal(b[0].status, 0);

  struct pool_block pb = {.work = {.data = &pb}};
  assert_int_equal(uv_sem_init(&pb.go, 0), 0);
  assert_int_equal(uv_queue_work(&wd->loop, &pb.work, pool_block_run, pool_block_done), 0);
  assert_int_equal(snd->io.set_term(&snd->io, 5), 0);
  assert_int_equal(snd->io.set_vote(&snd->io, wd->n[0].id), 0);
  assert_true(riow_mux_meta_pending(snd));
  struct wal_stats st;
  wal_get_stats(wd->n[0].w, &st);
  uint64_t need = st.bytes; /* both records end here */
  assert_true(st.durable_lsn < need);
  bare_send(wd, snd, &b[1], RAFT_IO_REQUEST_VOTE, 5);
  bare_send(wd, snd, &b[2], RAFT_IO_APPEND_ENTRIES_RESULT, 5);
  assert_int_equal(wd->n[0].mx.held, 2);

  run_for(&wd->loop, 300);
  assert_int_equal(seen.n, 1); /* held: the records are not durable */
  assert_false(b[1].done);
  assert_false(b[2].done);
  wal_get_stats(wd->n[0].w, &st);
  assert_true(st.durable_lsn < need);

  uv_sem_post(&pb.go);
  want = 3;
  run_until(&wd->loop, seen_at_least, &want, "the held messages");
  assert_true(pb.done);
  uv_sem_destroy(&pb.go);
  assert_int_equal(seen.type[1], RAFT_IO_REQUEST_VOTE);
  assert_int_equal(seen.term[1], 5);
  assert_int_equal(seen.type[2], RAFT_IO_APPEND_ENTRIES_RESULT);
  for (unsigned k = 1; k < 3; k++) {
    assert_true(seen.durable_at[k] >= need);
  }
  run_until(&wd->loop, flag_set, &b[2].done, "the held sends' callbacks");
  assert_int_equal(b[1].status, 0);
  assert_int_equal(b[2].status, 0);
  assert_false(riow_mux_meta_pending(snd));
  struct wal_group_info gi;
  assert_int_equal(wal_group_info(wd->n[0].w, HELD_GID, &gi), 0);
  assert_int_equal(gi.term, 5);
  assert_int_equal(gi.vote, wd->n[0].id);

  /* Once durable, sends go straight out again. */
  bare_send(wd, snd, &b[3], RAFT_IO_APPEND_ENTRIES_RESULT, 5);
  want = 4;
  run_until(&wd->loop, seen_at_least, &want, "a message after the release");
  assert_int_equal(wd->n[0].mx.held, 2);

  bare_close(wd, snd);
  bare_close(wd, rcv);
  free(snd);
  free(rcv);
  world_close(wd);
  free(wd);
}

static int failed_status;

static void on_meta_failed(struct riow_mux *m, int status)
{
  (void)m;
  failed_status = status;
}

/* A failed fsync of the term record: the held sends fail unsent, so do
 * later ones, the owner hears of it, and the log is fatal. */
static void test_a_failed_term_record_fails_the_held_sends(void **state)
{
  (void)state;
  struct world *wd = calloc(1, sizeof *wd);
  world_open_pair(wd, "riowmux3");
  struct riow_mux *snd = calloc(1, sizeof *snd), *rcv = calloc(1, sizeof *rcv);
  bare_open(wd, 0, snd);
  bare_open(wd, 1, rcv);
  riow_mux_on_failed(snd, on_meta_failed);
  failed_status = 0;
  struct bsend b[3];

  fault_arm(FAULT_WAL_SYNC, 0, -EIO);
  assert_int_equal(snd->io.set_term(&snd->io, 7), 0);
  bare_send(wd, snd, &b[0], RAFT_IO_REQUEST_VOTE, 7);
  bare_send(wd, snd, &b[1], RAFT_IO_APPEND_ENTRIES_RESULT, 7);
  run_until(&wd->loop, flag_set, &b[1].done, "the held sends to fail");
  fault_reset();
  assert_int_equal(b[0].status, RAFT_IOERR);
  assert_int_equal(b[1].status, RAFT_IOERR);
  assert_int_not_equal(failed_status, 0);
  assert_int_equal(snd->meta_failures, 1);
  assert_int_not_equal(wal_fatal(wd->n[0].w), 0);
  assert_false(riow_mux_meta_pending(snd));
  /* Latched: the term is never revealed, whatever raft sends next. */
  bare_send(wd, snd, &b[2], RAFT_IO_APPEND_ENTRIES_RESULT, 7);
  run_until(&wd->loop, flag_set, &b[2].done, "a later send to fail");
  assert_int_equal(b[2].status, RAFT_IOERR);
  assert_int_equal(snd->io.set_vote(&snd->io, wd->n[0].id), RAFT_IOERR); /* the log is fatal */
  run_for(&wd->loop, 300);
  assert_int_equal(seen.n, 0);

  bare_close(wd, snd);
  bare_close(wd, rcv);
  free(snd);
  free(rcv);
  world_close(wd);
  free(wd);
}

/* The newest wal segment of dir: its name, 0 if none. */
static uint64_t newest_segment(const char *dir, char *name, size_t len)
{
  DIR *d = opendir(dir);
  assert_non_null(d);
  uint64_t best = 0;
  struct dirent *de;
  while ((de = readdir(d)) != NULL) {
    unsigned long long seq;
    size_t l = strlen(de->d_name);
    if (sscanf(de->d_name, "wal-%16llx.log", &seq) == 1 && seq >= best && l < len) {
      best = seq;
      memcpy(name, de->d_name, l + 1);
    }
  }
  closedir(d);
  return best;
}

/* Crashes at the boundaries of a term and vote record, many times: a
 * write that fails (nothing written), an fsync that fails (written, then
 * a power cut keeps a random part of what was not synced), or none (the
 * records durable). After each, node 1's log is reopened from disk: every
 * RequestVote node 2 received (term t, node 1's vote for itself) must be
 * there (term > t, or term t with that vote), and with no fault the last
 * term and vote are. */
static void test_a_crash_keeps_every_revealed_term_and_vote(void **state)
{
  (void)state;
  uint64_t seed = tu_seed("test_riow_mux_crash");
  uint64_t rng = seed ? seed : 1;
  struct world *wd = calloc(1, sizeof *wd);
  world_open_pair(wd, "riowmux4");
  struct node *n1 = &wd->n[0];
  char wdir[700];
  snprintf(wdir, sizeof wdir, "%s/wal", n1->dir);
  struct riow_mux *snd = calloc(1, sizeof *snd), *rcv = calloc(1, sizeof *rcv);
  bare_open(wd, 1, rcv);
  uint64_t term = 0;
  unsigned faults = 0, cuts = 0, revealed = 0;
  for (int round = 0; round < CRASH_ROUNDS; round++) {
    memset(&seen, 0, sizeof seen);
    seen_sender_wal = n1->w;
    bare_open(wd, 0, snd);
    int mode = (int)(tu_rand(&rng) % 3); /* 0 none, 1 write fails, 2 fsync fails */
    if (mode != 0) {
      fault_arm(mode == 1 ? FAULT_WAL_WRITE : FAULT_WAL_SYNC, (int)(tu_rand(&rng) % 2), -EIO);
    }
    struct bsend b[4];
    unsigned nsent = 0;
    for (int k = 0; k < 4; k++) {
      term++;
      if (snd->io.set_term(&snd->io, term) != 0 || snd->io.set_vote(&snd->io, n1->id) != 0) {
        break; /* the log went fatal */
      }
      bare_send(wd, snd, &b[nsent++], RAFT_IO_REQUEST_VOTE, term);
      if (tu_rand(&rng) % 2) {
        uv_run(&wd->loop, UV_RUN_NOWAIT); /* sometimes a job per record */
      }
    }
    for (unsigned k = 0; k < nsent; k++) {
      run_until(&wd->loop, flag_set, &b[k].done, "the sends' callbacks");
    }
    unsigned ok = 0;
    for (unsigned k = 0; k < nsent; k++) {
      ok += b[k].status == 0;
      assert_true(b[k].status == 0 || b[k].status == RAFT_IOERR);
    }
    run_until(&wd->loop, seen_at_least, &ok, "every sent message to arrive");
    bool fatal = wal_fatal(n1->w) != 0;
    fault_reset();
    faults += fatal;
    char name[64];
    uint64_t seq = newest_segment(wdir, name, sizeof name);
    uint64_t durable = seq != 0 ? wal_seg_durable(n1->w, seq) : 0;
    bare_close(wd, snd);
    bool closed = false;
    wal_close(n1->w, on_wal_closed, &closed);
    run_until(&wd->loop, flag_set, &closed, "the wal to close");
    if (fatal && seq != 0) {
      int64_t size = tu_file_size(wdir, name);
      if ((int64_t)durable < size) {
        int64_t cut =
            (int64_t)durable + (int64_t)(tu_rand(&rng) % (uint64_t)(size - (int64_t)durable + 1));
        tu_truncate(wdir, name, cut);
        cuts++;
      }
    }
    char errmsg[WAL_ERRMSG_SIZE];
    assert_int_equal(wal_open(&wd->loop, wdir, NULL, &n1->w, errmsg), 0);
    struct wal_group_info gi = {0};
    if (wal_group_info(n1->w, HELD_GID, &gi) != 0) {
      gi = (struct wal_group_info){0}; /* nothing of the group on disk */
    }
    for (unsigned k = 0; k < seen.n; k++) {
      assert_int_equal(seen.type[k], RAFT_IO_REQUEST_VOTE);
      uint64_t t = seen.term[k];
      if (gi.term < t || (gi.term == t && gi.vote != n1->id)) {
        fail_msg("round %d (seed %llu): term %llu and vote were revealed, the disk has term "
                 "%llu vote %llu",
                 round, (unsigned long long)seed, (unsigned long long)t,
                 (unsigned long long)gi.term, (unsigned long long)gi.vote);
      }
      revealed++;
    }
    if (!fatal) {
      assert_int_equal(gi.term, term);
      assert_int_equal(gi.vote, n1->id);
    }
    term = gi.term > term ? gi.term : term; /* never reuse a revealed term */
  }
  print_message("%d crash rounds: %u with a failed write or fsync, %u power cuts, %u votes "
                "revealed, all on disk after the crash\n",
                CRASH_ROUNDS, faults, cuts, revealed);
  assert_true(faults > 0 && cuts > 0 && revealed > 0);
  bare_close(wd, rcv);
  free(snd);
  free(rcv);
  world_close(wd);
  free(wd);
}

int main(void)
{
  /* One worker: a test can hold the log's write job back by keeping it
   * busy (test_sends_wait_until_the_term_and_vote_are_durable). */
  setenv("UV_THREADPOOL_SIZE", "1", 1);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_groups_elect_replicate_fail_over_and_catch_up),
      cmocka_unit_test(test_io_close_release_random_and_async_work),
      cmocka_unit_test(test_sends_wait_until_the_term_and_vote_are_durable),
      cmocka_unit_test(test_a_failed_term_record_fails_the_held_sends),
      cmocka_unit_test(test_a_crash_keeps_every_revealed_term_and_vote),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
