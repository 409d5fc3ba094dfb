/* rgroup_driver.c - `cairn-rgroup-driver`: runs Raft groups (partition
 * replicas) on one node without the full server, for the replication tests.
 * One process = one node: a cluster port shared by its groups, and a
 * line-based control port on loopback that the tests speak:
 *
 *   produce G TAG N VSIZE   -> later "ok G TAG OFFSET" or "err G TAG CODE LEADER"
 *   iproduce G TAG PID EPOCH SEQ -> the same for one record of 16 bytes, stamped
 *                              as producer PID's (EPOCH, SEQ)
 *   pstate G PID            -> "pstate G EPOCH SEQ OFFSET N": the producer's
 *                              epoch, its newest sequence and that batch's
 *                              offset, N batches in its window; or "pstate G none"
 *   leader G                -> "leader G ID ROLE CAUGHT" (ROLE: leader|follower|candidate|
 *                              unavailable; CAUGHT 1 once a leader has applied its
 *                              term's first entry, so everything committed before it)
 *   info G                  -> "info G START NEXT LAST_INDEX"
 *   pace G                  -> "pace G IDLE TERM QUIESCES WAKES": 1 while this replica
 *                              leads on the idle heartbeat (rgroup_pace.h), its
 *                              Raft term, and how often its pace dropped and rose
 *   dump G                  -> "b BASE COUNT KEY0 VALID" per batch, then "end"
 *   handoff G               -> "handoff G RV": as a stopping node does (rgroup_handoff):
 *                              the replica refuses leadership from now on and,
 *                              if it leads, hands leadership off; RV its result
 *   close G                 -> "closed G"  (closes the replica)
 *   delete G                -> "deleted G" (closes it and removes its data)
 *   stats                   -> "stats OPEN LEADERS ENTRIES BATCHES PIPELINED": open
 *                              groups, how many this node leads, the Raft entries
 *                              and batches its leaders proposed since start, and
 *                              of those entries the ones proposed while another
 *                              was in flight (summed over groups)
 *   hash G                  -> "hash G NEXT CRC CATCHING": CRC-32C of every byte of the
 *                              log's batches from its start, the log end, and
 *                              whether the replica is catching up (0/1)
 *   logstart G TAG OFFSET   -> later "ok G TAG START" or "err G TAG CODE LEADER": a
 *                              LOG_START command (rgroup_delete_records; -1: the
 *                              log end) through this node, the group's leader
 *   retain G BYTES          -> "retain G RV DELETED START": sets the replica's retention
 *                              to BYTES (0: none) and applies it now, as a node's
 *                              retention check does (rgroup_retention); RV its result,
 *                              DELETED the segments it removed, START the log start after
 *   snap G                  -> "snap G TAKEN INDEX": snapshots this replica has taken,
 *                              and the Raft index of the last one it has (taken or
 *                              installed; 0: none)
 *   quit                    -> "bye", then a clean shutdown
 * Batches are built like tests/lib's tu_make_batch(TAG, N, VSIZE), so a
 * test can tell which produce a stored batch came from by its first key.
 *
 * Groups open a few per loop iteration (cluster/gstart.h), so those open
 * keep their heartbeats while the rest open. The control port listens from
 * the start, but commands are read only once every group is open (then
 * "ready" is printed), so a test never sees a group still opening. At
 * start the driver raises its open-file limit to the hard limit. With
 * --raft-log group (the default here) every group's raft_uv probes its
 * directory at open and each open segment has a kernel AIO context, whose
 * io_destroy (~32 ms) runs on the loop thread, as in cairnd.
 *
 * SIGTERM shuts down cleanly, each group handing its leadership away
 * first (rgroup_shutdown); tests use SIGKILL for crashes. */
#include "cluster/gstart.h"
#include "cluster/nodewatch.h"
#include "cluster/raftmux.h"
#include "cluster/rgroup.h"
#include "cluster/rgroup_cmd.h"
#include "cluster/rgroup_pace.h"
#include "cluster/transport.h"
#include "common/err.h"
#include "common/fsutil.h"
#include "common/log.h"
#include "common/wallclock.h"
#include "format/batch.h"
#include "format/crc32c.h"
#include "testutil.h"

#include <arpa/inet.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#define DRIVER_MAX_GROUPS 16384
#define DRIVER_MAX_REPLICAS 7
#define DRIVER_LINE_MAX 512

struct driver_conn;

struct driver_group {
  struct rgroup rg;
  struct gstart_job job;
  uint64_t id;
  bool open;
  bool delete_after_close;
  struct driver_conn *closer; /* who asked for close/delete */
  char dir[PATH_MAX];
};

struct driver {
  uv_loop_t *loop;
  struct transport tr;
  uv_tcp_t control;
  uv_signal_t sigterm;
  uint64_t self;
  const char *data_dir;
  struct rgroup_replica replicas[DRIVER_MAX_REPLICAS];
  unsigned nreplicas;
  struct driver_group *groups;
  unsigned ngroups;
  unsigned open_groups;
  struct gstart gs;
  unsigned opens_done; /* groups whose open ran (or was cancelled) */
  bool ready;          /* every group open: control connections are read */
  struct rgroup_opts opts;
  struct wal *wal; /* --raft-log node: every group's Raft log */
  struct nodewatch nw; /* --raft-mux: one connection per peer node */
  struct raftmux mx;   /* --raft-mux: the groups' Raft messages over nw */
  bool mux;
  struct driver_conn *conns;
  bool stopping;
  int exit_code;
};

struct driver_conn {
  uv_tcp_t tcp;
  struct driver *d;
  struct driver_conn *prev, *next; /* the open control connections */
  char line[DRIVER_LINE_MAX];
  size_t len;
  int pending; /* produce requests not answered yet */
  bool closed;
};

struct driver_produce {
  struct rgroup_produce req;
  struct driver_conn *c;
  uint64_t group;
  uint64_t tag;
  uint8_t *batch;
};

static struct driver g_driver;

static void driver_close_all(struct driver *d);

static void driver_free_conn(uv_handle_t *h)
{
  struct driver_conn *c = h->data;
  if (c->pending == 0) {
    free(c);
  }
}

/* Closes a control connection once (on EOF, error or shutdown). */
static void driver_conn_close(struct driver_conn *c)
{
  if (c->closed) {
    return;
  }
  c->closed = true;
  if (c->prev != NULL) {
    c->prev->next = c->next;
  } else if (c->d->conns == c) {
    c->d->conns = c->next;
  }
  if (c->next != NULL) {
    c->next->prev = c->prev;
  }
  uv_close((uv_handle_t *)&c->tcp, driver_free_conn);
}

static void driver_on_written(uv_write_t *w, int status)
{
  free(w->data);
  free(w);
}

static void driver_reply(struct driver_conn *c, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void driver_reply(struct driver_conn *c, const char *fmt, ...)
{
  if (c->closed) {
    return;
  }
  char *buf = malloc(DRIVER_LINE_MAX);
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(buf, DRIVER_LINE_MAX - 1, fmt, ap);
  va_end(ap);
  if (n > DRIVER_LINE_MAX - 2) {
    n = DRIVER_LINE_MAX - 2;
  }
  buf[n++] = '\n';
  uv_write_t *w = malloc(sizeof *w);
  w->data = buf;
  uv_buf_t b = uv_buf_init(buf, (unsigned)n);
  if (uv_write(w, (uv_stream_t *)&c->tcp, &b, 1, driver_on_written) != 0) {
    free(buf);
    free(w);
  }
}

static struct driver_group *driver_group(struct driver *d, uint64_t id)
{
  for (unsigned i = 0; i < d->ngroups; i++) {
    if (d->groups[i].id == id && d->groups[i].open) {
      return &d->groups[i];
    }
  }
  return NULL;
}

static void driver_on_produced(struct rgroup_produce *req, int status, int64_t offset)
{
  struct driver_produce *p = req->data;
  struct driver_conn *c = p->c;
  struct driver_group *g = driver_group(&g_driver, p->group);
  if (status == 0) {
    driver_reply(c, "ok %" PRIu64 " %" PRIu64 " %" PRId64, p->group, p->tag, offset);
  } else {
    uint64_t lid = 0;
    const char *addr;
    if (g != NULL) {
      rgroup_leader(&g->rg, &lid, &addr);
    }
    driver_reply(c, "err %" PRIu64 " %" PRIu64 " %s %" PRIu64, p->group, p->tag,
                 cairn_errname(status), lid);
  }
  free(p->batch);
  free(p);
  if (--c->pending == 0 && c->closed) {
    free(c);
  }
}

/* A batch of n records; stamped as producer pid's (epoch, seq) when
 * pid >= 0. */
static void driver_cmd_produce(struct driver_conn *c, uint64_t gid, uint64_t tag, int n,
                               size_t vsize, int64_t pid, int epoch, int seq)
{
  struct driver_group *g = driver_group(c->d, gid);
  if (g == NULL || n < 1 || n > 100000 || vsize > (1u << 20)) {
    driver_reply(c, "err %" PRIu64 " %" PRIu64 " CAIRN_EINVAL 0", gid, tag);
    return;
  }
  struct driver_produce *p = calloc(1, sizeof *p);
  size_t len;
  p->batch = tu_make_batch(tag, n, vsize, 1700000000000 + (int64_t)tag, &len);
  if (pid >= 0) {
    tu_stamp_batch(p->batch, len, pid, (int16_t)epoch, seq);
  }
  p->c = c;
  p->group = gid;
  p->tag = tag;
  p->req.data = p;
  int rv = rgroup_produce(&g->rg, &p->req, p->batch, len, driver_on_produced);
  if (rv != 0) {
    uint64_t lid;
    const char *addr;
    rgroup_leader(&g->rg, &lid, &addr);
    driver_reply(c, "err %" PRIu64 " %" PRIu64 " %s %" PRIu64, gid, tag, cairn_errname(rv), lid);
    free(p->batch);
    free(p);
    return;
  }
  c->pending++;
}

/* logstart G TAG OFFSET: a LOG_START command through the group's leader
 * (rgroup_delete_records), answered like a produce with the new start. */
static void driver_cmd_logstart(struct driver_conn *c, uint64_t gid, uint64_t tag, int64_t offset)
{
  struct driver_group *g = driver_group(c->d, gid);
  struct driver_produce *p = calloc(1, sizeof *p);
  p->batch = malloc(RGROUP_CMD_SIZE);
  p->c = c;
  p->group = gid;
  p->tag = tag;
  p->req.data = p;
  int rv = g == NULL ? CAIRN_EINVAL
                     : rgroup_delete_records(&g->rg, &p->req, p->batch, offset, driver_on_produced);
  if (rv != 0) {
    driver_reply(c, "err %" PRIu64 " %" PRIu64 " %s 0", gid, tag, cairn_errname(rv));
    free(p->batch);
    free(p);
    return;
  }
  c->pending++;
}

static const char *driver_role(struct rgroup *rg)
{
  switch (raft_state(&rg->raft)) {
  case RAFT_LEADER: return "leader";
  case RAFT_FOLLOWER: return "follower";
  case RAFT_CANDIDATE: return "candidate";
  default: return "unavailable";
  }
}

/* Writes every batch of the group's store: base, count, first key. */
static void driver_cmd_dump(struct driver_conn *c, struct driver_group *g)
{
  struct store *s = rgroup_store(&g->rg);
  struct store_info info;
  store_info(s, &info);
  int64_t off = info.start_offset;
  while (off < info.next_offset) {
    struct store_region r;
    if (store_read(s, off, 1 << 20, &r) != 0 || r.len == 0) {
      driver_reply(c, "error reading offset %" PRId64, off);
      break;
    }
    uint8_t *buf = tu_read_region(r.fd, r.pos, r.len);
    size_t pos = 0;
    while (buf != NULL && pos < r.len) {
      struct batch_header h;
      batch_header_decode(buf + pos, &h);
      size_t size = batch_total_size(h.batch_length);
      struct batch_iter it;
      struct batch_record rec;
      char key[64] = "-";
      int valid = batch_validate(buf + pos, size, BATCH_DEFAULT_MAX_BYTES, NULL, 0) == 0;
      if (valid && batch_iter_init(&it, buf + pos, size) == 0 && batch_iter_next(&it, &rec) == 1 &&
          rec.key != NULL && rec.key_len < sizeof key) {
        memcpy(key, rec.key, rec.key_len);
        key[rec.key_len] = '\0';
      }
      driver_reply(c, "b %" PRId64 " %d %s %d", h.base_offset, h.record_count, key, valid);
      pos += size;
    }
    free(buf);
    off = r.next_offset;
    store_region_release(&r);
  }
  driver_reply(c, "end");
}

/* CRC-32C over the log's bytes, to compare replicas byte for byte. */
static void driver_cmd_hash(struct driver_conn *c, struct driver_group *g)
{
  struct store *s = rgroup_store(&g->rg);
  struct store_info info;
  store_info(s, &info);
  uint32_t crc = 0;
  int64_t off = info.start_offset;
  while (off < info.next_offset) {
    struct store_region r;
    if (store_read(s, off, 1 << 20, &r) != 0 || r.len == 0) {
      driver_reply(c, "error reading offset %" PRId64, off);
      return;
    }
    uint8_t *buf = tu_read_region(r.fd, r.pos, r.len);
    crc = buf != NULL ? crc32c_extend(crc, buf, r.len) : 0;
    free(buf);
    off = r.next_offset;
    store_region_release(&r);
  }
  driver_reply(c, "hash %" PRIu64 " %" PRId64 " %08x %d", g->id, info.next_offset, crc,
               rgroup_is_catching_up(&g->rg));
}

/* Node-wide counters, summed over the open groups. */
static void driver_cmd_stats(struct driver_conn *c)
{
  struct driver *d = c->d;
  unsigned open = 0, leaders = 0;
  uint64_t entries = 0, batches = 0, pipelined = 0;
  for (unsigned i = 0; i < d->ngroups && d->groups != NULL; i++) {
    struct driver_group *g = &d->groups[i];
    if (!g->open) {
      continue;
    }
    open++;
    leaders += rgroup_is_leader(&g->rg);
    entries += g->rg.entries_proposed;
    batches += g->rg.batches_proposed;
    pipelined += g->rg.entries_pipelined;
  }
  driver_reply(c, "stats %u %u %" PRIu64 " %" PRIu64 " %" PRIu64, open, leaders, entries, batches,
               pipelined);
}

static void driver_on_group_closed(struct rgroup *rg)
{
  struct driver_group *g = (struct driver_group *)rg;
  struct driver *d = &g_driver;
  d->open_groups--;
  if (g->delete_after_close) {
    int rv = rgroup_delete(g->dir);
    int wrv = d->wal != NULL ? wal_remove(d->wal, NULL, g->id, NULL) : 0;
    rv = rv != 0 ? rv : wrv == CAIRN_ENOTFOUND ? 0 : wrv;
    if (g->closer != NULL) {
      driver_reply(g->closer, rv == 0 ? "deleted %" PRIu64 : "delete-failed %" PRIu64, g->id);
    }
  } else if (g->closer != NULL) {
    driver_reply(g->closer, "closed %" PRIu64, g->id);
  }
  if (d->stopping && d->open_groups == 0) {
    driver_close_all(d);
  }
}

static void driver_close_group(struct driver_group *g, struct driver_conn *c, bool del)
{
  g->open = false;
  g->closer = c;
  g->delete_after_close = del;
  rgroup_close(&g->rg, driver_on_group_closed);
}

/* A node going down hands each group's leadership away first. */
static void driver_shutdown_group(struct driver_group *g)
{
  g->open = false;
  g->closer = NULL;
  rgroup_shutdown(&g->rg, driver_on_group_closed);
}

static void driver_on_node_gone(struct nodewatch *nw, uint64_t node_id, void *data)
{
  (void)nw;
  (void)node_id;
  (void)data; /* the driver leaves elections to Raft's timers */
}

/* --raft-mux: every group's Raft messages go over one watch connection
 * per peer driver (cluster/raftmux.h). */
static int driver_start_mux(struct driver *d)
{
  const char *self_address = NULL;
  uint64_t ids[DRIVER_MAX_REPLICAS];
  const char *addrs[DRIVER_MAX_REPLICAS];
  for (unsigned i = 0; i < d->nreplicas; i++) {
    ids[i] = d->replicas[i].id;
    addrs[i] = d->replicas[i].address;
    if (ids[i] == d->self) {
      self_address = addrs[i];
    }
  }
  int rv = self_address != NULL ? nwatch_init(&d->nw, d->loop, &d->tr, d->self, self_address,
                                              driver_on_node_gone, d)
                                : CAIRN_EINVAL;
  if (rv == 0) {
    rv = nwatch_set_peers(&d->nw, ids, addrs, d->nreplicas);
  }
  if (rv == 0) {
    rv = raftmux_init(&d->mx, d->loop, &d->nw);
  }
  if (rv != 0) {
    fprintf(stderr, "cairn-rgroup-driver: --raft-mux: %s\n", cairn_strerror(rv));
    return rv;
  }
  d->opts.mux = &d->mx;
  return 0;
}

/* The node is done: close the cluster port, the control port and every
 * control connection (a test may still hold one open). */
static void driver_close_all(struct driver *d)
{
  if (d->mux) {
    raftmux_close(&d->mx, NULL);
    nwatch_close(&d->nw, NULL);
    d->mux = false;
  }
  transport_close(&d->tr, NULL);
  if (d->gs.loop != NULL && !d->gs.closing) {
    gstart_close(&d->gs, NULL);
  }
  uv_close((uv_handle_t *)&d->control, NULL);
  uv_close((uv_handle_t *)&d->sigterm, NULL);
  if (d->wal != NULL) {
    wal_close(d->wal, NULL, NULL);
    d->wal = NULL;
  }
  while (d->conns != NULL) {
    driver_conn_close(d->conns);
  }
}

/* Logs a handle that is keeping the loop alive after shutdown. */
static void driver_log_handle(uv_handle_t *h, void *arg)
{
  if (uv_is_closing(h)) {
    return;
  }
  char local[64] = "-", peer[64] = "-";
  if (h->type == UV_TCP) {
    struct sockaddr_storage sa;
    int len = sizeof sa;
    if (uv_tcp_getsockname((uv_tcp_t *)h, (struct sockaddr *)&sa, &len) == 0) {
      uv_ip4_name((struct sockaddr_in *)&sa, local, sizeof local);
      snprintf(local + strlen(local), sizeof local - strlen(local), ":%d",
               ntohs(((struct sockaddr_in *)&sa)->sin_port));
    }
    len = sizeof sa;
    if (uv_tcp_getpeername((uv_tcp_t *)h, (struct sockaddr *)&sa, &len) == 0) {
      uv_ip4_name((struct sockaddr_in *)&sa, peer, sizeof peer);
      snprintf(peer + strlen(peer), sizeof peer - strlen(peer), ":%d",
               ntohs(((struct sockaddr_in *)&sa)->sin_port));
    }
  }
  log_warn("driver", "still open after shutdown: %s handle %p active=%d local=%s peer=%s data=%p",
           uv_handle_type_name(h->type), (void *)h, uv_is_active(h), local, peer, h->data);
}

static void driver_on_watchdog(uv_timer_t *t) { uv_walk(t->loop, driver_log_handle, NULL); }

static void driver_stop(struct driver *d)
{
  static uv_timer_t watchdog;
  uv_timer_init(d->loop, &watchdog);
  uv_timer_start(&watchdog, driver_on_watchdog, 3000, 0);
  uv_unref((uv_handle_t *)&watchdog); /* reports a hang, never causes one */
  if (d->stopping) {
    return;
  }
  d->stopping = true;
  log_info("driver", "node %" PRIu64 " shutting down", d->self);
  for (unsigned i = 0; i < d->ngroups && d->groups != NULL; i++) {
    if (d->groups[i].open) {
      driver_shutdown_group(&d->groups[i]);
    }
  }
  if (d->open_groups == 0) {
    driver_close_all(d);
  }
}

/* retain G BYTES (the header). */
static void driver_cmd_retain(struct driver_conn *c, struct driver_group *g, const char *line)
{
  unsigned long long bytes = 0;
  if (sscanf(line, "%*s %*u %llu", &bytes) != 1) {
    driver_reply(c, "error usage: retain G BYTES");
    return;
  }
  rgroup_set_retention(&g->rg, bytes, 0);
  uint32_t deleted = 0;
  int rv = rgroup_retention(&g->rg, wallclock_ms(), &deleted);
  struct store_info info;
  store_info(rgroup_store(&g->rg), &info);
  driver_reply(c, "retain %" PRIu64 " %d %u %" PRId64, g->id, rv, deleted, info.start_offset);
}

static void driver_command(struct driver_conn *c, char *line)
{
  char cmd[16];
  uint64_t gid = 0, tag = 0;
  int n = 0;
  size_t vsize = 0;
  if (sscanf(line, "%15s", cmd) != 1) {
    return;
  }
  if (strcmp(cmd, "produce") == 0 &&
      sscanf(line, "%*s %" SCNu64 " %" SCNu64 " %d %zu", &gid, &tag, &n, &vsize) == 4) {
    driver_cmd_produce(c, gid, tag, n, vsize, -1, -1, -1);
    return;
  }
  int64_t pid = -1;
  int epoch = -1, seq = -1;
  if (strcmp(cmd, "iproduce") == 0 &&
      sscanf(line, "%*s %" SCNu64 " %" SCNu64 " %" SCNd64 " %d %d", &gid, &tag, &pid, &epoch,
             &seq) == 5) {
    driver_cmd_produce(c, gid, tag, 1, 16, pid, epoch, seq);
    return;
  }
  int64_t offset = 0;
  if (strcmp(cmd, "logstart") == 0 &&
      sscanf(line, "%*s %" SCNu64 " %" SCNu64 " %" SCNd64, &gid, &tag, &offset) == 3) {
    driver_cmd_logstart(c, gid, tag, offset);
    return;
  }
  if (strcmp(cmd, "stats") == 0) {
    driver_cmd_stats(c);
    return;
  }
  if (strcmp(cmd, "quit") == 0) {
    driver_reply(c, "bye");
    driver_stop(c->d);
    return;
  }
  if (sscanf(line, "%*s %" SCNu64, &gid) != 1) {
    driver_reply(c, "error bad command");
    return;
  }
  struct driver_group *g = driver_group(c->d, gid);
  if (g == NULL) {
    driver_reply(c, "error no group %" PRIu64, gid);
  } else if (strcmp(cmd, "leader") == 0) {
    uint64_t lid;
    const char *addr;
    rgroup_leader(&g->rg, &lid, &addr);
    driver_reply(c, "leader %" PRIu64 " %" PRIu64 " %s %d", gid, lid, driver_role(&g->rg),
                 rgroup_leader_caught_up(&g->rg) ? 1 : 0);
  } else if (strcmp(cmd, "info") == 0) {
    struct store_info info;
    store_info(rgroup_store(&g->rg), &info);
    driver_reply(c, "info %" PRIu64 " %" PRId64 " %" PRId64 " %" PRIu64, gid, info.start_offset,
                 info.next_offset, info.last_index);
  } else if (strcmp(cmd, "pace") == 0) {
    driver_reply(c, "pace %" PRIu64 " %d %" PRIu64 " %" PRIu64 " %" PRIu64, gid,
                 rgroup_pace_idle(&g->rg) ? 1 : 0, (uint64_t)g->rg.raft.current_term,
                 g->rg.pace_quiesces, g->rg.pace_wakes);
  } else if (strcmp(cmd, "term") == 0) {
    /* term G: the current term, the last log entry's index and term. */
    driver_reply(c, "term %" PRIu64 " %" PRIu64 " %" PRIu64 " %" PRIu64, gid,
                 (uint64_t)g->rg.raft.current_term, (uint64_t)raft_last_index(&g->rg.raft),
                 (uint64_t)rgroup_elect_last_term(&g->rg.raft));
  } else if (strcmp(cmd, "pstate") == 0) {
    /* pstate G PID: the producer's epoch, newest sequence and its offset. */
    int64_t qpid = -1;
    const struct producer_entry *e = NULL;
    if (sscanf(line, "%*s %*u %" SCNd64, &qpid) == 1) {
      e = producer_state_find(&g->rg.producers, qpid);
    }
    if (e == NULL) {
      driver_reply(c, "pstate %" PRIu64 " none", gid);
    } else {
      const struct producer_batch *b = &e->batches[e->nbatches - 1];
      driver_reply(c, "pstate %" PRIu64 " %d %d %" PRId64 " %u", gid, (int)e->epoch,
                   (int)b->last_sequence, b->base_offset, e->nbatches);
    }
  } else if (strcmp(cmd, "handoff") == 0) {
    driver_reply(c, "handoff %" PRIu64 " %d", gid, rgroup_handoff(&g->rg));
  } else if (strcmp(cmd, "retain") == 0) {
    driver_cmd_retain(c, g, line);
  } else if (strcmp(cmd, "snap") == 0) {
    driver_reply(c, "snap %" PRIu64 " %" PRIu64 " %" PRIu64, gid, g->rg.snapshots,
                 (uint64_t)g->rg.raft.log.snapshot.last_index);
  } else if (strcmp(cmd, "dump") == 0) {
    driver_cmd_dump(c, g);
  } else if (strcmp(cmd, "hash") == 0) {
    driver_cmd_hash(c, g);
  } else if (strcmp(cmd, "close") == 0 || strcmp(cmd, "delete") == 0) {
    driver_close_group(g, c, strcmp(cmd, "delete") == 0);
  } else {
    driver_reply(c, "error unknown command %s", cmd);
  }
}

static void driver_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
  struct driver_conn *c = h->data;
  *buf = uv_buf_init(c->line + c->len, (unsigned)(sizeof c->line - 1 - c->len));
}

static void driver_on_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf)
{
  struct driver_conn *c = s->data;
  if (n < 0) {
    driver_conn_close(c);
    return;
  }
  c->len += (size_t)n;
  char *nl;
  while ((nl = memchr(c->line, '\n', c->len)) != NULL) {
    *nl = '\0';
    driver_command(c, c->line);
    size_t used = (size_t)(nl + 1 - c->line);
    memmove(c->line, nl + 1, c->len - used);
    c->len -= used;
  }
  if (c->len == sizeof c->line - 1) {
    c->len = 0; /* a line too long for any command: drop it */
    driver_reply(c, "error line too long");
  }
}

static void driver_on_control(uv_stream_t *server, int status)
{
  struct driver *d = server->data;
  if (status != 0) {
    return;
  }
  struct driver_conn *c = calloc(1, sizeof *c);
  c->d = d;
  uv_tcp_init(d->loop, &c->tcp);
  c->tcp.data = c;
  if (uv_accept(server, (uv_stream_t *)&c->tcp) != 0) {
    uv_close((uv_handle_t *)&c->tcp, driver_free_conn);
    return;
  }
  c->next = d->conns;
  if (d->conns != NULL) {
    d->conns->prev = c;
  }
  d->conns = c;
  if (d->ready) {
    uv_read_start((uv_stream_t *)&c->tcp, driver_alloc, driver_on_read);
  }
}

static void driver_on_sigterm(uv_signal_t *s, int signum) { driver_stop(s->data); }

/* Every group has had its turn: start reading the control connections. */
static void driver_opened_all(struct driver *d)
{
  if (d->stopping) {
    return;
  }
  d->ready = true;
  for (struct driver_conn *c = d->conns; c != NULL; c = c->next) {
    uv_read_start((uv_stream_t *)&c->tcp, driver_alloc, driver_on_read);
  }
  printf("ready\n");
  fflush(stdout);
}

/* "1@127.0.0.1:7001,2@127.0.0.1:7002" */
static int driver_parse_replicas(struct driver *d, char *list)
{
  for (char *tok = strtok(list, ","); tok != NULL; tok = strtok(NULL, ",")) {
    char *at = strchr(tok, '@');
    if (at == NULL || d->nreplicas == DRIVER_MAX_REPLICAS) {
      return -1;
    }
    *at = '\0';
    d->replicas[d->nreplicas].id = strtoull(tok, NULL, 10);
    d->replicas[d->nreplicas].address = at + 1;
    d->nreplicas++;
  }
  return d->nreplicas > 0 ? 0 : -1;
}

static int driver_listen_control(struct driver *d, const char *address)
{
  char host[64];
  int port;
  if (sscanf(address, "%63[^:]:%d", host, &port) != 2) {
    return CAIRN_EINVAL;
  }
  struct sockaddr_in sa;
  int rv = uv_ip4_addr(host, port, &sa);
  uv_tcp_init(d->loop, &d->control);
  d->control.data = d;
  if (rv == 0) {
    rv = uv_tcp_bind(&d->control, (struct sockaddr *)&sa, 0);
  }
  if (rv == 0) {
    rv = uv_listen((uv_stream_t *)&d->control, 16, driver_on_control);
  }
  return rv;
}

/* One group's turn to open (gstart). */
static void driver_on_open_turn(struct gstart_job *job, int status)
{
  struct driver_group *g = job->data;
  struct driver *d = &g_driver;
  d->opens_done++;
  if (status == 0 && !d->stopping) {
    status = rgroup_open(&g->rg, d->loop, &d->tr, g->id, d->self, g->dir, d->replicas,
                         d->nreplicas, &d->opts);
    if (status == 0) {
      g->open = true;
      d->open_groups++;
    } else {
      /* As before the opens were staggered: the first failure stops the
       * node, and the opens still queued are cancelled. */
      fprintf(stderr, "cairn-rgroup-driver: %s\n", rgroup_errmsg(&g->rg));
      d->exit_code = 1;
      driver_stop(d);
    }
  }
  if (d->opens_done == d->ngroups) {
    driver_opened_all(d);
  }
}

/* Queues every group's open; they run a few per loop iteration. */
static int driver_open_groups(struct driver *d)
{
  d->groups = calloc(d->ngroups, sizeof *d->groups);
  if (d->groups == NULL) {
    return CAIRN_ENOMEM;
  }
  int rv = gstart_init(&d->gs, d->loop, 0);
  for (unsigned i = 0; i < d->ngroups && rv == 0; i++) {
    struct driver_group *g = &d->groups[i];
    g->id = i + 1;
    snprintf(g->dir, sizeof g->dir, "%s/group-%u", d->data_dir, i + 1);
    g->job.data = g;
    rv = gstart_push(&d->gs, &g->job, driver_on_open_turn);
  }
  return rv;
}

int main(int argc, char **argv)
{
  struct driver *d = &g_driver;
  const char *cluster = NULL, *control = NULL;
  char *replicas = NULL;
  d->ngroups = 1;
  memset(&d->opts, 0, sizeof d->opts);
  plog_opts_default(&d->opts.plog);
  static const struct option opts[] = {{"id", required_argument, NULL, 'i'},
                                       {"cluster", required_argument, NULL, 'c'},
                                       {"control", required_argument, NULL, 'C'},
                                       {"dir", required_argument, NULL, 'd'},
                                       {"replicas", required_argument, NULL, 'r'},
                                       {"groups", required_argument, NULL, 'g'},
                                       {"election-ms", required_argument, NULL, 'e'},
                                       {"heartbeat-ms", required_argument, NULL, 'h'},
                                       {"snapshot-threshold", required_argument, NULL, 's'},
                                       {"raft-segment-size", required_argument, NULL, 'S'},
                                       {"raft-log-budget", required_argument, NULL, 'B'},
                                       {"no-preferred-leader", no_argument, NULL, 'P'},
                                       {"raft-log", required_argument, NULL, 'L'},
                                       {"raft-mux", no_argument, NULL, 'M'},
                                       {"segment-bytes", required_argument, NULL, 'G'},
                                       {NULL, 0, NULL, 0}};
  const char *raft_log = "group";
  int o;
  while ((o = getopt_long(argc, argv, "", opts, NULL)) != -1) {
    switch (o) {
    case 'i': d->self = strtoull(optarg, NULL, 10); break;
    case 'c': cluster = optarg; break;
    case 'C': control = optarg; break;
    case 'd': d->data_dir = optarg; break;
    case 'r': replicas = optarg; break;
    case 'g': d->ngroups = (unsigned)atoi(optarg); break;
    case 'e': d->opts.election_ms = (unsigned)atoi(optarg); break;
    case 'h': d->opts.heartbeat_ms = (unsigned)atoi(optarg); break;
    case 's': d->opts.snapshot_threshold = (unsigned)atoi(optarg); break;
    case 'S': d->opts.raft_segment_size = (size_t)strtoull(optarg, NULL, 10); break;
    case 'B': d->opts.raft_log_budget = (size_t)strtoull(optarg, NULL, 10); break;
    case 'P': d->opts.no_preferred_leader = true; break;
    case 'L': raft_log = optarg; break;
    case 'M': d->mux = true; break;
    case 'G':
      d->opts.plog.segment_bytes = strtoull(optarg, NULL, 10);
      break;
    default: return 2;
    }
  }
  if (d->self == 0 || cluster == NULL || control == NULL || d->data_dir == NULL ||
      replicas == NULL || d->ngroups < 1 || d->ngroups > DRIVER_MAX_GROUPS ||
      driver_parse_replicas(d, replicas) != 0 ||
      (strcmp(raft_log, "group") != 0 && strcmp(raft_log, "node") != 0)) {
    fprintf(stderr, "usage: cairn-rgroup-driver --id N --cluster HOST:PORT --control HOST:PORT "
                    "--dir DIR --replicas ID@HOST:PORT,... [--groups N] [--election-ms MS] "
                    "[--heartbeat-ms MS] [--snapshot-threshold N] [--raft-segment-size BYTES] "
                    "[--raft-log-budget BYTES] [--no-preferred-leader] "
                    "[--raft-log group|node] [--raft-mux] [--segment-bytes BYTES]\n");
    return 2;
  }
  signal(SIGPIPE, SIG_IGN);
  uint64_t nofile = 0;
  int rv = fs_raise_nofile(&nofile);
  if (rv != 0 || nofile < (uint64_t)d->ngroups * 12 + 64) {
    /* ~11 per group with 3 replicas: say so now rather than fail later. */
    log_warn("driver", "open-file limit %" PRIu64 " (%s) may be too low for %u groups", nofile,
             cairn_strerror(rv), d->ngroups);
  }
  d->loop = uv_default_loop();
  rv = transport_init(&d->tr, d->loop, cluster);
  if (rv != 0) {
    fprintf(stderr, "cairn-rgroup-driver: %s\n", d->tr.errmsg);
    return 1;
  }
  rv = driver_listen_control(d, control);
  if (rv != 0) {
    fprintf(stderr, "cairn-rgroup-driver: control port %s: %s\n", control, cairn_strerror(rv));
    return 1;
  }
  uv_signal_init(d->loop, &d->sigterm);
  d->sigterm.data = d;
  uv_signal_start(&d->sigterm, driver_on_sigterm, SIGTERM);
  if (strcmp(raft_log, "node") == 0) {
    char wdir[PATH_MAX], why[WAL_ERRMSG_SIZE];
    snprintf(wdir, sizeof wdir, "%s/wal", d->data_dir);
    rv = wal_open(d->loop, wdir, NULL, &d->wal, why);
    if (rv != 0) {
      fprintf(stderr, "cairn-rgroup-driver: the node's Raft log: %s\n", why);
      return 1;
    }
    d->opts.wal = d->wal;
  }
  d->mux = d->mux && d->wal != NULL;
  if (d->mux && driver_start_mux(d) != 0) {
    return 1;
  }
  rv = driver_open_groups(d);
  if (rv != 0) {
    fprintf(stderr, "cairn-rgroup-driver: queueing group opens: %s\n", cairn_strerror(rv));
    d->exit_code = 1;
    driver_stop(d);
  }
  uv_run(d->loop, UV_RUN_DEFAULT);
  uv_loop_close(d->loop);
  for (unsigned i = 0; i < d->ngroups; i++) {
    rgroup_release(&d->groups[i].rg);
  }
  free(d->groups);
  return d->exit_code;
}
