/* test_wal_model.c - the node-wide log (cluster/wal.c) against an
 * in-memory model: random appends across many groups, truncations,
 * metadata, snapshots that compact the log (so segments are deleted),
 * group removals, clean reopens, and crashes at write and fsync
 * boundaries (src/common/fault.h fails the k-th write or fsync), with and
 * without a power loss that cuts the newest segment anywhere past what
 * the log had made durable, sometimes leaving garbage after the cut.
 *
 * The model is a list of per-group states; every record the log writes is
 * one model mutation (an append of n entries is n records). After a crash
 * the reopened log must equal the model after some prefix of the records
 * issued since the last check that holds every record acknowledged: the
 * log writes records in order, and a torn job can only lose a suffix.
 *
 * Cleaning (wal_clean.c) runs in most runs in its eager mode: after every
 * write job the oldest segment's live entries are copied forward (MOVE
 * records), while appends, truncations and snapshots of the same entries
 * go on and crashes land among the copies; the model does not change with
 * a copy, so the same prefix rule checks it.
 *
 * A last test SIGKILLs a process appending to 8 groups (with snapshots
 * that delete segments, and eager cleaning) at random moments and checks
 * that every entry it acknowledged is there, once, in order, with its
 * content; some kills must land while the newest segment is written over
 * a recycled file (its previous life's bytes after the records).
 *
 * Replay: the test prints its seed; CAIRN_TEST_SEED=<seed> replays.
 * CAIRN_MODEL_RUNS and CAIRN_MODEL_OPS change the random test's size. */
#include "cluster/wal.h"
#include "common/err.h"
#include "common/fault.h"
#include "common/log.h"
#include "testutil.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#define MG 12          /* groups */
#define MAX_PAYLOAD 48 /* small payloads: many records per segment */
#define MAX_RECS 4096  /* unchecked records kept (a check clears them) */

struct m_entry {
  uint64_t term;
  uint8_t type;
  uint32_t len;
  uint32_t salt;
};

struct m_group {
  bool exists;
  uint64_t term, vote, si, st, first;
  struct m_entry *e;
  size_t n, cap;
};

struct m_state {
  struct m_group g[MG];
};

enum m_kind { M_ENTRY, M_TRUNC, M_META, M_REMOVE };

struct m_rec {
  enum m_kind kind;
  int gi;
  uint64_t index;
  struct m_entry e;
  uint64_t meta[5];
  bool reset;
};

struct wm {
  uint64_t seed, rng;
  uv_loop_t loop;
  char *dir;
  struct wal *w;
  uint64_t seg_bytes;
  enum wal_clean_mode clean;
  struct m_state base; /* what the log held at the last check */
  struct m_state cur;  /* base + recs */
  struct m_rec recs[MAX_RECS];
  size_t nrecs;
  size_t acked;  /* records acknowledged (a prefix of recs) */
  size_t synced; /* records wal_flush_sync made durable */
  unsigned flushes;
  int outstanding;
  int failures;
  int op;
  unsigned crashes, power_cuts, reopens, revives;
  uint64_t deleted, cut_bytes, moved, cleaned, recycled;
};

struct wm_req {
  struct wal_req req;
  struct wm *m;
  size_t rec_end;
};

static uint64_t gid_of(int gi)
{
  return 1000003ull * (uint64_t)(gi + 1) + 7;
}

static uint32_t wm_rand(struct wm *m, uint32_t n)
{
  return (uint32_t)(tu_rand(&m->rng) % n);
}

static void payload_fill(uint8_t *p, const struct m_entry *e, uint64_t index)
{
  uint32_t h = e->salt ^ (uint32_t)(index * 2654435761u);
  for (uint32_t j = 0; j < e->len; j++) {
    p[j] = (uint8_t)(h + j * 31u);
  }
}

/* ---- the model ---- */

static void mg_clear(struct m_group *g)
{
  free(g->e);
  memset(g, 0, sizeof *g);
}

static void ms_free(struct m_state *s)
{
  for (int i = 0; i < MG; i++) {
    mg_clear(&s->g[i]);
  }
}

static void ms_copy(struct m_state *dst, const struct m_state *src)
{
  ms_free(dst);
  for (int i = 0; i < MG; i++) {
    dst->g[i] = src->g[i];
    dst->g[i].e = NULL;
    dst->g[i].cap = src->g[i].n;
    if (src->g[i].n) {
      dst->g[i].e = malloc(src->g[i].n * sizeof *src->g[i].e);
      assert_non_null(dst->g[i].e);
      memcpy(dst->g[i].e, src->g[i].e, src->g[i].n * sizeof *src->g[i].e);
    }
  }
}

static struct m_group *ms_get(struct m_state *s, int gi, uint64_t first)
{
  struct m_group *g = &s->g[gi];
  if (!g->exists) {
    mg_clear(g);
    g->exists = true;
    g->first = first;
  }
  return g;
}

static void ms_drop_front(struct m_group *g, uint64_t before)
{
  size_t k = 0;
  while (k < g->n && g->first + k < before) {
    k++;
  }
  memmove(g->e, g->e + k, (g->n - k) * sizeof *g->e);
  g->n -= k;
  g->first += k;
}

/* The same rules as wal_apply_* (wal_internal.h), written independently. */
static void ms_apply(struct m_state *s, const struct m_rec *r)
{
  struct m_group *g;
  switch (r->kind) {
  case M_ENTRY:
    g = ms_get(s, r->gi, r->index);
    if (g->n == 0) {
      g->first = r->index;
    }
    assert_int_equal(r->index, g->first + g->n);
    if (g->n == g->cap) {
      g->cap = g->cap ? g->cap * 2 : 8;
      g->e = realloc(g->e, g->cap * sizeof *g->e);
      assert_non_null(g->e);
    }
    g->e[g->n++] = r->e;
    break;
  case M_TRUNC:
    g = ms_get(s, r->gi, r->index);
    while (g->n > 0 && g->first + g->n - 1 >= r->index) {
      g->n--;
    }
    if (g->n == 0) {
      g->first = r->index;
    }
    break;
  case M_META:
    g = ms_get(s, r->gi, r->meta[4]);
    g->term = r->meta[0];
    g->vote = r->meta[1];
    g->si = r->meta[2];
    g->st = r->meta[3];
    if (r->reset || r->meta[4] >= g->first + g->n) {
      g->n = 0;
      g->first = r->meta[4];
    } else {
      ms_drop_front(g, r->meta[4]);
    }
    break;
  case M_REMOVE:
    mg_clear(&s->g[r->gi]);
    break;
  }
}

/* Does the log hold exactly state s? why says what differs. */
static bool wm_matches(struct wm *m, const struct m_state *s, char *why, size_t len)
{
  size_t exist = 0;
  for (int i = 0; i < MG; i++) {
    const struct m_group *g = &s->g[i];
    struct wal_group_info info;
    int rv = wal_group_info(m->w, gid_of(i), &info);
    exist += g->exists;
    if ((rv == 0) != g->exists) {
      snprintf(why, len, "group %d: exists %d in the model, wal says %s", i, g->exists,
               cairn_errname(rv));
      return false;
    }
    if (!g->exists) {
      continue;
    }
    if (info.term != g->term || info.vote != g->vote || info.snap_index != g->si ||
        info.snap_term != g->st || info.first != g->first || info.next != g->first + g->n) {
      snprintf(why, len,
               "group %d: wal term %llu vote %llu snap %llu/%llu [%llu,%llu), model %llu %llu "
               "%llu/%llu [%llu,%llu)",
               i, (unsigned long long)info.term, (unsigned long long)info.vote,
               (unsigned long long)info.snap_index, (unsigned long long)info.snap_term,
               (unsigned long long)info.first, (unsigned long long)info.next,
               (unsigned long long)g->term, (unsigned long long)g->vote, (unsigned long long)g->si,
               (unsigned long long)g->st, (unsigned long long)g->first,
               (unsigned long long)(g->first + g->n));
      return false;
    }
    for (size_t k = 0; k < g->n; k++) {
      struct wal_entry e;
      uint8_t want[MAX_PAYLOAD];
      payload_fill(want, &g->e[k], g->first + k);
      rv = wal_read(m->w, gid_of(i), g->first + k, &e);
      bool same = rv == 0 && e.term == g->e[k].term && e.type == g->e[k].type &&
                  e.len == g->e[k].len && (e.len == 0 || memcmp(e.buf, want, e.len) == 0);
      if (rv == 0) {
        free((void *)e.buf);
      }
      if (!same) {
        snprintf(why, len, "group %d entry %llu differs (%s)", i,
                 (unsigned long long)(g->first + k), cairn_errname(rv));
        return false;
      }
    }
  }
  size_t n = wal_groups(m->w, NULL, 0);
  if (n != exist) {
    snprintf(why, len, "wal has %zu groups, model %zu", n, exist);
    return false;
  }
  return true;
}

static void wm_fail(struct wm *m, const char *what, const char *why)
{
  fail_msg("%s at op %d of the run with seed %llu (replay with CAIRN_TEST_SEED): %s", what, m->op,
           (unsigned long long)m->seed, why);
}

static void wm_check_invariants(struct wm *m)
{
  char why[256];
  if (wal_check(m->w, why, sizeof why) != 0) {
    wm_fail(m, "wal_check", why);
  }
}

/* ---- driving the log ---- */

static void wm_on_done(struct wal_req *req, int status)
{
  struct wm_req *r = req->data;
  struct wm *m = r->m;
  m->outstanding--;
  if (status == 0) {
    /* Callbacks fire in order: every earlier record is durable too. */
    if (r->rec_end < m->acked) {
      wm_fail(m, "callback order", "an acknowledgement went backwards");
    }
    m->acked = r->rec_end;
  } else {
    m->failures++;
  }
  free(r);
}

static struct wm_req *wm_req_new(struct wm *m)
{
  struct wm_req *r = calloc(1, sizeof *r);
  assert_non_null(r);
  r->m = m;
  r->req.data = r;
  return r;
}

/* Records the model mutation of a call that returned 0. */
static void wm_push(struct wm *m, const struct m_rec *rec)
{
  assert_true(m->nrecs < MAX_RECS);
  m->recs[m->nrecs++] = *rec;
  ms_apply(&m->cur, rec);
}

static void wm_submitted(struct wm *m, struct wm_req *r, int rv)
{
  if (rv != 0) {
    free(r);
    return;
  }
  r->rec_end = m->nrecs;
  m->outstanding++;
}

static int wm_op_append(struct wm *m, int gi)
{
  struct m_group *g = &m->cur.g[gi];
  unsigned n = 1 + wm_rand(m, 4);
  uint64_t index = g->exists ? g->first + g->n : 1;
  if (g->exists && g->n == 0 && wm_rand(m, 4) == 0) {
    index += wm_rand(m, 5); /* an empty group may start anywhere */
  }
  struct wal_entry es[4];
  uint8_t bufs[4][MAX_PAYLOAD];
  struct m_rec recs[4];
  for (unsigned i = 0; i < n; i++) {
    struct m_entry e = {.term = g->exists ? g->term + wm_rand(m, 2) : 1,
                        .type = (uint8_t)(1 + wm_rand(m, 3)),
                        .len = wm_rand(m, MAX_PAYLOAD + 1),
                        .salt = (uint32_t)tu_rand(&m->rng)};
    payload_fill(bufs[i], &e, index + i);
    es[i] = (struct wal_entry){e.term, e.type, bufs[i], e.len};
    recs[i] = (struct m_rec){.kind = M_ENTRY, .gi = gi, .index = index + i, .e = e};
  }
  struct wm_req *r = wm_req_new(m);
  int rv = wal_append(m->w, &r->req, gid_of(gi), index, es, n, wm_on_done);
  if (rv == 0) {
    for (unsigned i = 0; i < n; i++) {
      wm_push(m, &recs[i]);
    }
  }
  wm_submitted(m, r, rv);
  return rv;
}

static int wm_op_truncate(struct wm *m, int gi)
{
  struct m_group *g = &m->cur.g[gi];
  if (!g->exists) {
    return wm_op_append(m, gi);
  }
  uint64_t index = g->first + wm_rand(m, (uint32_t)g->n + 1);
  struct wm_req *r = wm_req_new(m);
  int rv = wal_truncate(m->w, &r->req, gid_of(gi), index, wm_on_done);
  if (rv == 0) {
    wm_push(m, &(struct m_rec){.kind = M_TRUNC, .gi = gi, .index = index});
  }
  wm_submitted(m, r, rv);
  return rv;
}

static int wm_op_meta(struct wm *m, int gi)
{
  struct m_group *g = &m->cur.g[gi];
  uint64_t term = (g->exists ? g->term : 0) + wm_rand(m, 3);
  uint64_t vote = wm_rand(m, 4);
  struct wm_req *r = wm_req_new(m);
  int rv = wal_set_meta(m->w, &r->req, gid_of(gi), term, vote, wm_on_done);
  if (rv == 0) {
    struct m_rec rec = {.kind = M_META, .gi = gi};
    uint64_t meta[5] = {term, vote, g->exists ? g->si : 0, g->exists ? g->st : 0,
                        g->exists ? g->first : 1};
    memcpy(rec.meta, meta, sizeof meta);
    wm_push(m, &rec);
  }
  wm_submitted(m, r, rv);
  return rv;
}

/* A snapshot that keeps a few trailing entries, or (one in four) an
 * installed snapshot past everything held. */
static int wm_op_snapshot(struct wm *m, int gi)
{
  struct m_group *g = &m->cur.g[gi];
  if (!g->exists) {
    return wm_op_meta(m, gi);
  }
  uint64_t next = g->first + g->n;
  uint64_t si, first;
  if (wm_rand(m, 4) == 0) {
    si = next + wm_rand(m, 5);
    first = si + 1;
  } else {
    si = g->first + wm_rand(m, (uint32_t)g->n + 1);
    si = si > 0 ? si - 1 : 0;
    uint64_t trailing = wm_rand(m, 3);
    first = si + 1 > trailing ? si + 1 - trailing : 1;
  }
  uint64_t st = g->term + 1;
  bool reset = wm_rand(m, 5) == 0; /* installed: si may be below next */
  if (reset) {
    first = si + 1;
  }
  struct wm_req *r = wm_req_new(m);
  int rv = reset ? wal_reset(m->w, &r->req, gid_of(gi), si, st, wm_on_done)
                 : wal_snapshot(m->w, &r->req, gid_of(gi), si, st, first, wm_on_done);
  if (rv == 0) {
    struct m_rec rec = {.kind = M_META, .gi = gi, .reset = reset};
    uint64_t meta[5] = {g->term, g->vote, si, st, reset || first >= g->first ? first : g->first};
    memcpy(rec.meta, meta, sizeof meta);
    wm_push(m, &rec);
  }
  wm_submitted(m, r, rv);
  return rv;
}

static int wm_op_remove(struct wm *m, int gi)
{
  if (!m->cur.g[gi].exists) {
    return wm_op_append(m, gi);
  }
  struct wm_req *r = wm_req_new(m);
  int rv = wal_remove(m->w, &r->req, gid_of(gi), wm_on_done);
  if (rv == 0) {
    wm_push(m, &(struct m_rec){.kind = M_REMOVE, .gi = gi});
  }
  wm_submitted(m, r, rv);
  return rv;
}

/* One random call; returns its result. Snapshots are frequent so old
 * segments empty out and get deleted. */
static int wm_step(struct wm *m)
{
  int gi = (int)wm_rand(m, MG);
  uint32_t dice = wm_rand(m, 100);
  m->op++;
  if (dice < 55) {
    return wm_op_append(m, gi);
  }
  if (dice < 65) {
    return wm_op_truncate(m, gi);
  }
  if (dice < 75) {
    return wm_op_meta(m, gi);
  }
  if (dice < 97) {
    return wm_op_snapshot(m, gi);
  }
  return wm_op_remove(m, gi);
}

/* A blocking flush: everything issued so far is durable when it returns
 * 0 (its callbacks still come later, from the loop). */
static int wm_flush(struct wm *m)
{
  int rv = wal_flush_sync(m->w);
  if (rv == 0) {
    m->synced = m->nrecs;
    m->flushes++;
  }
  return rv;
}

static void wm_drain(struct wm *m)
{
  while (m->outstanding > 0) {
    uv_run(&m->loop, UV_RUN_ONCE);
  }
}

static void wm_on_closed(void *data)
{
  *(bool *)data = true;
}

/* Closes w and runs loop until it has. */
static void wm_close_wal(uv_loop_t *loop, struct wal *w)
{
  bool closed = false;
  wal_close(w, wm_on_closed, &closed);
  while (!closed) {
    uv_run(loop, UV_RUN_ONCE);
  }
}

static void wm_on_done_flag(struct wal_req *req, int status)
{
  assert_int_equal(status, 0);
  *(bool *)req->data = true;
}

static void wm_close(struct wm *m)
{
  struct wal_stats st;
  wal_get_stats(m->w, &st);
  m->deleted += st.segments_deleted;
  m->recycled += st.segments_recycled;
  m->moved += st.clean_moved;
  m->cleaned += st.segments_cleaned;
  wm_close_wal(&m->loop, m->w);
  assert_int_equal(m->outstanding, 0);
  m->w = NULL;
}

static void wm_open(struct wm *m)
{
  char errmsg[WAL_ERRMSG_SIZE];
  struct wal_opts o = {.segment_bytes = m->seg_bytes, .clean = m->clean};
  int rv = wal_open(&m->loop, m->dir, &o, &m->w, errmsg);
  if (rv != 0) {
    wm_fail(m, "wal_open", errmsg);
  }
  struct wal_stats st;
  wal_get_stats(m->w, &st);
  m->cut_bytes += st.torn_bytes_cut;
}

/* After every issued record is acknowledged: the log matches cur, which
 * becomes the new base. */
static void wm_settle(struct wm *m)
{
  wm_drain(m);
  char why[256];
  if (m->acked != m->nrecs || !wm_matches(m, &m->cur, why, sizeof why)) {
    wm_fail(m, "settled log differs from the model", m->acked != m->nrecs ? "unacked" : why);
  }
  wm_check_invariants(m);
  ms_copy(&m->base, &m->cur);
  m->nrecs = m->acked = m->synced = 0;
}

/* After a reopen: the log must equal base + recs[0..k) for some k that
 * covers every acknowledged record. That state becomes base and cur. */
static void wm_check_prefix(struct wm *m)
{
  struct m_state s = {0};
  ms_copy(&s, &m->base);
  size_t must = m->acked > m->synced ? m->acked : m->synced;
  for (size_t k = 0; k < must; k++) {
    ms_apply(&s, &m->recs[k]);
  }
  char why[256] = "", first_why[256] = "";
  size_t k = must;
  while (!wm_matches(m, &s, why, sizeof why)) {
    if (k == must) {
      memcpy(first_why, why, sizeof why);
    }
    if (k == m->nrecs) {
      ms_free(&s);
      char msg[700];
      snprintf(msg, sizeof msg,
               "no prefix of the %zu records issued (%zu acknowledged, %zu synced): with all of "
               "them: %s; with the acknowledged ones: %s",
               m->nrecs, m->acked, m->synced, why, first_why);
      wm_fail(m, "recovered log", msg);
    }
    ms_apply(&s, &m->recs[k++]);
  }
  wm_check_invariants(m);
  ms_copy(&m->base, &s);
  ms_copy(&m->cur, &s);
  ms_free(&s);
  m->nrecs = m->acked = m->synced = 0;
}

/* The newest segment file in dir, or 0. */
static uint64_t wm_newest(struct wm *m, char *name, size_t len)
{
  DIR *d = opendir(m->dir);
  assert_non_null(d);
  uint64_t best = 0;
  struct dirent *de;
  while ((de = readdir(d)) != NULL) {
    unsigned long long seq;
    if (sscanf(de->d_name, "wal-%16llx.log", &seq) == 1 && seq >= best) {
      best = seq;
      size_t l = strlen(de->d_name);
      assert_true(l < len);
      memcpy(name, de->d_name, l + 1);
    }
  }
  closedir(d);
  return best;
}

/* A power loss: the newest segment loses anything past what the log made
 * durable, at a random point, maybe followed by garbage. */
static void wm_power_cut(struct wm *m, uint64_t durable)
{
  char name[64];
  if (wm_newest(m, name, sizeof name) == 0) {
    return;
  }
  int64_t size = tu_file_size(m->dir, name);
  if ((int64_t)durable >= size) {
    return;
  }
  int64_t cut = (int64_t)durable + (int64_t)wm_rand(m, (uint32_t)(size - (int64_t)durable) + 1);
  tu_truncate(m->dir, name, cut);
  uint32_t tail = wm_rand(m, 3);
  if (tail > 0) {
    uint8_t junk[100];
    for (size_t i = 0; i < sizeof junk; i++) {
      junk[i] = tail == 1 ? 0 : (uint8_t)tu_rand(&m->rng);
    }
    tu_write_at(m->dir, name, cut, junk, 1 + wm_rand(m, sizeof junk));
  }
  m->power_cuts++;
}

/* Fails the skip-th write or fsync from now, runs steps until the log is
 * fatal (or nsteps pass), then crashes: drops the log without a clean
 * close (nothing more is written after the failure), maybe cuts power,
 * reopens and checks. Returns whether the fault fired. */
static bool wm_crash(struct wm *m, enum fault_point point, int skip, int nsteps, bool power)
{
  fault_arm(point, skip, -EIO);
  for (int i = 0; i < nsteps && wal_fatal(m->w) == 0; i++) {
    int rv = wm_rand(m, 8) == 0 ? wm_flush(m) : wm_step(m);
    if (rv != 0 && rv != CAIRN_EFATAL) {
      wm_fail(m, "call", cairn_strerror(rv));
    }
    if (wm_rand(m, 3) == 0) {
      uv_run(&m->loop, UV_RUN_NOWAIT);
    }
  }
  wm_drain(m);
  fault_reset();
  bool fired = wal_fatal(m->w) != 0;
  if (fired) {
    struct wal_entry e = {1, 1, "x", 1};
    assert_int_equal(wal_append(m->w, NULL, gid_of(0), 1, &e, 1, NULL), CAIRN_EFATAL);
    assert_true(strstr(wal_errmsg(m->w), "wal-") != NULL || strstr(wal_errmsg(m->w), m->dir));
  }
  char name[64];
  uint64_t seq = wm_newest(m, name, sizeof name);
  uint64_t durable = seq ? wal_seg_durable(m->w, seq) : 0;
  if (!fired) {
    wm_drain(m);
    uv_run(&m->loop, UV_RUN_NOWAIT);
    durable = UINT64_MAX; /* everything settled: nothing may be cut */
    wm_drain(m);
  }
  m->crashes++;
  if (fired && !power && wm_rand(m, 2) == 0) {
    /* The process goes on: the log rebuilds itself from the disk. */
    char errmsg[WAL_ERRMSG_SIZE];
    int rv = CAIRN_EFATAL;
    for (int i = 0; i < 1000 && rv == CAIRN_EFATAL; i++) {
      rv = wal_revive(m->w, errmsg); /* CAIRN_EFATAL: the cleaner's read is in flight */
      if (rv == CAIRN_EFATAL) {
        uv_run(&m->loop, UV_RUN_ONCE);
      }
    }
    if (rv != 0 || wal_fatal(m->w) != 0) {
      wm_fail(m, "wal_revive", errmsg[0] ? errmsg : "still busy");
    }
    m->revives++;
    wm_check_prefix(m);
    return fired;
  }
  wm_close(m);
  if (power && fired) {
    wm_power_cut(m, durable);
  }
  wm_open(m);
  wm_check_prefix(m);
  return fired;
}

static void wm_init(struct wm *m, uint64_t seed, uint64_t seg_bytes, enum wal_clean_mode clean)
{
  memset(m, 0, sizeof *m);
  m->seed = seed;
  m->rng = seed ? seed : 1;
  m->seg_bytes = seg_bytes;
  m->clean = clean;
  assert_int_equal(uv_loop_init(&m->loop), 0);
  m->dir = tu_tmpdir("wal");
  wm_open(m);
}

static void wm_fini(struct wm *m)
{
  if (m->w) {
    wm_drain(m);
    wm_close(m);
  }
  ms_free(&m->base);
  ms_free(&m->cur);
  assert_int_equal(uv_loop_close(&m->loop), 0);
  tu_tmpdir_free(m->dir);
}

static int env_int(const char *name, int def)
{
  const char *v = getenv(name);
  return v ? atoi(v) : def;
}

/* ---- tests ---- */

static void test_wal_agrees_with_model_under_random_operations_and_crashes(void **state)
{
  (void)state;
  uint64_t seed = tu_seed("test_wal_model");
  int runs = env_int("CAIRN_MODEL_RUNS", 4), nops = env_int("CAIRN_MODEL_OPS", 2500);
  uint64_t moved = 0, recycled = 0;
  for (int run = 0; run < runs; run++) {
    struct wm m;
    /* Runs 1, 5, ...: no cleaning (the log as before it); others: eager.
     * Runs 3, 7, ...: segments large enough that the log is often one
     * segment, which the cleaner then seals and cleans (the head). */
    enum wal_clean_mode clean = run % 4 == 1 ? WAL_CLEAN_OFF : WAL_CLEAN_EAGER;
    uint64_t seg_bytes = run % 4 == 3 ? 64 * 1024 : 600 + 400 * (uint64_t)(run % 3);
    wm_init(&m, seed + (uint64_t)run, seg_bytes, clean);
    while (m.op < nops) {
      uint32_t dice = wm_rand(&m, 1000);
      if (dice < 8) {
        wm_settle(&m);
        wm_close(&m);
        m.reopens++;
        wm_open(&m);
        wm_check_prefix(&m);
      } else if (dice < 20) {
        enum fault_point p = wm_rand(&m, 2) ? FAULT_WAL_WRITE : FAULT_WAL_SYNC;
        wm_crash(&m, p, (int)wm_rand(&m, 6), 40, wm_rand(&m, 2) == 0);
      } else if (dice < 60) {
        wm_settle(&m);
      } else if (dice < 100) {
        if (wm_flush(&m) != 0) {
          wm_fail(&m, "flush", wal_errmsg(m.w));
        }
      } else {
        int rv = wm_step(&m);
        if (rv != 0) {
          wm_fail(&m, "call", cairn_strerror(rv));
        }
        if (wm_rand(&m, 3) == 0) {
          uv_run(&m.loop, UV_RUN_NOWAIT);
        }
      }
    }
    wm_settle(&m);
    print_message("run %d: %u blocking flushes, %u revived after a failure\n", run, m.flushes,
                  m.revives);
    wm_drain(&m);
    wm_close(&m);
    print_message("run %d: %d ops, %u reopens, %u crashes (%u power cuts, %llu torn bytes cut), "
                  "%llu segments deleted, %llu written over a recycled file, cleaning %s: %llu "
                  "entries moved, %llu segments read through\n",
                  run, m.op, m.reopens, m.crashes, m.power_cuts, (unsigned long long)m.cut_bytes,
                  (unsigned long long)m.deleted, (unsigned long long)m.recycled,
                  clean == WAL_CLEAN_OFF ? "off" : "eager", (unsigned long long)m.moved,
                  (unsigned long long)m.cleaned);
    assert_true(m.crashes > 0);
    if (clean == WAL_CLEAN_OFF) {
      assert_int_equal(m.moved, 0);
    }
    moved += m.moved;
    recycled += m.recycled;
    wm_fini(&m);
  }
  assert_true(moved > 0 || runs < 2);
  assert_true(recycled > 0 || runs < 2); /* the crashes also land on reused files */
}

/* One fixed workload, crashed at its k-th write and at its k-th fsync for
 * every k until the workload finishes without reaching k: every write and
 * fsync boundary, each with and without a power loss. */
static void test_wal_recovers_at_every_write_and_fsync_boundary(void **state)
{
  (void)state;
  uint64_t seed = tu_seed("test_wal_boundaries");
  enum fault_point points[2] = {FAULT_WAL_WRITE, FAULT_WAL_SYNC};
  unsigned cases = 0;
  uint64_t moved = 0;
  for (int ci = 0; ci < 2; ci++) {
    enum wal_clean_mode clean = ci == 0 ? WAL_CLEAN_OFF : WAL_CLEAN_EAGER;
    for (int pi = 0; pi < 2; pi++) {
      for (int power = 0; power < 2; power++) {
        for (int k = 0;; k++) {
          struct wm m;
          wm_init(&m, seed, 700, clean);
          for (int i = 0; i < 30; i++) { /* history to roll and compact over */
            assert_int_equal(wm_step(&m), 0);
          }
          wm_settle(&m);
          bool fired = wm_crash(&m, points[pi], k, 60, power);
          wm_settle(&m);
          wm_fini(&m);
          moved += m.moved;
          cases++;
          if (!fired) {
            break;
          }
        }
      }
    }
  }
  print_message("%u crash cases, %llu entries moved by the cleaner\n", cases,
                (unsigned long long)moved);
  assert_true(cases > 16);
  assert_true(moved > 0);
}

/* Damage that a torn write cannot explain is refused with the file and
 * offset, and the log is left as it was. */
static void test_wal_refuses_damage_before_synced_records(void **state)
{
  (void)state;
  struct wm m;
  wm_init(&m, 42, 1 << 20, WAL_CLEAN_AUTO);
  for (int i = 0; i < 20; i++) {
    assert_int_equal(wm_op_append(&m, i % MG), 0);
    wm_settle(&m); /* one job per append: later records come from later jobs */
  }
  wm_close(&m);
  char name[64];
  assert_int_not_equal(wm_newest(&m, name, sizeof name), 0);
  int64_t size = tu_file_size(m.dir, name);
  uint8_t b;
  tu_read_at(m.dir, name, 24 + 20, &b, 1);
  b ^= 0x40;
  tu_write_at(m.dir, name, 24 + 20, &b, 1);
  char errmsg[WAL_ERRMSG_SIZE];
  struct wal *w = NULL;
  assert_int_equal(wal_open(&m.loop, m.dir, NULL, &w, errmsg), CAIRN_ECORRUPT);
  assert_non_null(strstr(errmsg, name));
  assert_non_null(strstr(errmsg, "record at byte 24"));
  assert_int_equal(tu_file_size(m.dir, name), size);
  b ^= 0x40;
  tu_write_at(m.dir, name, 24 + 20, &b, 1);
  wm_open(&m);
  wm_check_prefix(&m);
  wm_fini(&m);
}

/* An older segment that lost its tail at a record boundary (its END
 * record, here) is damage, not a short segment. */
static void test_wal_refuses_an_older_segment_without_its_end(void **state)
{
  (void)state;
  uv_loop_t loop;
  assert_int_equal(uv_loop_init(&loop), 0);
  char *dir = tu_tmpdir("walend");
  struct wal *w;
  char errmsg[WAL_ERRMSG_SIZE];
  struct wal_opts o = {.segment_bytes = 16 * 1024, .clean = WAL_CLEAN_OFF};
  assert_int_equal(wal_open(&loop, dir, &o, &w, errmsg), 0);
  for (uint64_t i = 1; i <= 40; i++) { /* about 3 segments */
    static uint8_t big[1000];
    struct wal_entry e = {1, 1, big, sizeof big};
    assert_int_equal(wal_append(w, NULL, 7, i, &e, 1, NULL), 0);
  }
  struct wal_req req;
  bool done = false;
  req.data = &done;
  assert_int_equal(wal_set_meta(w, &req, 7, 1, 0, wm_on_done_flag), 0);
  while (!done) {
    uv_run(&loop, UV_RUN_ONCE);
  }
  struct wal_stats st;
  wal_get_stats(w, &st);
  assert_true(st.last_seq >= 3);
  wm_close_wal(&loop, w);
  const char *name = "wal-0000000000000001.log";
  int64_t size = tu_file_size(dir, name);
  uint8_t end[40];
  tu_read_at(dir, name, size - 40, end, sizeof end);
  assert_int_equal(end[8], 6); /* the END record closes it */
  tu_truncate(dir, name, size - 40);
  assert_int_equal(wal_open(&loop, dir, &o, &w, errmsg), CAIRN_ECORRUPT);
  assert_non_null(strstr(errmsg, name));
  assert_non_null(strstr(errmsg, "without its END record"));
  assert_int_equal(uv_loop_close(&loop), 0);
  tu_tmpdir_free(dir);
}

/* ---- cleaning, directed ---- */

#define T_PAY 1000 /* payload of the tail tests' entries */

static uint32_t tail_payload(uint64_t gid, uint64_t index, uint32_t salt, uint8_t *p)
{
  uint32_t len = T_PAY - (uint32_t)((gid + index) % 16);
  for (uint32_t j = 0; j < len; j++) {
    p[j] = (uint8_t)(gid * 7 + index * 13 + salt + j);
  }
  return len;
}

static void tail_append(struct wal *w, uint64_t gid, uint64_t index, uint32_t salt)
{
  static uint8_t buf[T_PAY];
  struct wal_entry e = {1, 1, buf, tail_payload(gid, index, salt, buf)};
  assert_int_equal(wal_append(w, NULL, gid, index, &e, 1, NULL), 0);
}

/* Checks entries [from, to) of gid hold tail_payload(salt). */
static void tail_check_entries(struct wal *w, uint64_t gid, uint64_t from, uint64_t to,
                               uint32_t salt)
{
  for (uint64_t i = from; i < to; i++) {
    uint8_t want[T_PAY];
    uint32_t len = tail_payload(gid, i, salt, want);
    struct wal_entry e;
    assert_int_equal(wal_read(w, gid, i, &e), 0);
    assert_int_equal(e.len, len);
    assert_memory_equal(e.buf, want, len);
    free((void *)e.buf);
  }
}

/* Checks gid holds exactly [first, next), with tail_payload(salt). */
static void tail_check(struct wal *w, uint64_t gid, uint64_t first, uint64_t next, uint32_t salt)
{
  struct wal_group_info info;
  assert_int_equal(wal_group_info(w, gid, &info), 0);
  assert_int_equal(info.first, first);
  assert_int_equal(info.next, next);
  tail_check_entries(w, gid, first, next, salt);
}

/* Waits for a write job to take everything pending (its end is where the
 * log drops and cleans segments, as after Raft's appends in cairnd). */
static void tail_flush(uv_loop_t *loop, struct wal *w)
{
  struct wal_req req;
  bool done = false;
  req.data = &done;
  assert_int_equal(wal_set_meta(w, &req, 999, 1, 0, wm_on_done_flag), 0);
  while (!done) {
    uv_run(loop, UV_RUN_ONCE);
  }
}

static void tail_on_tick(uv_timer_t *t)
{
  (void)t;
}

/* Runs the loop for ms milliseconds (the cleaner's timer is unreferenced:
 * a ticking timer of the test's own keeps the loop running). */
static void tail_idle(uv_loop_t *loop, uint64_t ms)
{
  uv_timer_t t;
  assert_int_equal(uv_timer_init(loop, &t), 0);
  assert_int_equal(uv_timer_start(&t, tail_on_tick, 20, 20), 0);
  uint64_t end = uv_now(loop) + ms;
  while (uv_now(loop) < end) {
    uv_run(loop, UV_RUN_ONCE);
  }
  uv_close((uv_handle_t *)&t, NULL);
  uv_run(loop, UV_RUN_NOWAIT);
}

struct tail_run {
  uint64_t segs_before, bytes_before, segs_after, bytes_after, live_after, moved;
};

/* Six groups: group 0 goes idle after 100 entries, keeping 30..100 of them
 * (Raft's trailing entries behind a snapshot), the others append 600 each
 * and snapshot every 100, keeping 30. Then the node idles 2.5 s. */
static void tail_workload(enum wal_clean_mode clean, struct tail_run *out)
{
  uv_loop_t loop;
  assert_int_equal(uv_loop_init(&loop), 0);
  char *dir = tu_tmpdir("waltail");
  struct wal *w;
  char errmsg[WAL_ERRMSG_SIZE];
  struct wal_opts o = {.segment_bytes = 64 * 1024, .clean = clean};
  assert_int_equal(wal_open(&loop, dir, &o, &w, errmsg), 0);
  uint64_t first[6] = {1, 1, 1, 1, 1, 1};
  for (uint64_t i = 1; i <= 600; i++) {
    for (uint64_t g = 0; g < 6; g++) {
      if (g == 0 && i > 100) {
        continue;
      }
      tail_append(w, 100 + g, i, 0);
      if (i % 100 == 0) {
        first[g] = i - 30 + 1;
        assert_int_equal(wal_snapshot(w, NULL, 100 + g, i, 1, first[g], NULL), 0);
      }
    }
    if (i % 10 == 0) {
      tail_flush(&loop, w);
    }
  }
  tail_flush(&loop, w);
  struct wal_stats st;
  wal_get_stats(w, &st);
  out->segs_before = st.last_seq - st.first_seq + 1;
  out->bytes_before = st.total_bytes;
  tail_idle(&loop, 2500);
  wal_get_stats(w, &st);
  out->segs_after = st.last_seq - st.first_seq + 1;
  out->bytes_after = st.total_bytes;
  out->live_after = st.live_bytes;
  out->moved = st.clean_moved;
  char why[256];
  assert_int_equal(wal_check(w, why, sizeof why), 0);
  wm_close_wal(&loop, w);
  /* What a restart finds: every group's entries, where they were moved. */
  assert_int_equal(wal_open(&loop, dir, &o, &w, errmsg), 0);
  assert_int_equal(wal_check(w, why, sizeof why), 0);
  tail_check(w, 100, 71, 101, 0);
  for (uint64_t g = 1; g < 6; g++) {
    tail_check(w, 100 + g, first[g], 601, 0);
  }
  wm_close_wal(&loop, w);
  assert_int_equal(uv_loop_close(&loop), 0);
  tu_tmpdir_free(dir);
}

static void test_wal_cleaning_drops_segments_pinned_by_idle_tails(void **state)
{
  (void)state;
  struct tail_run off, on;
  tail_workload(WAL_CLEAN_OFF, &off);
  tail_workload(WAL_CLEAN_AUTO, &on);
  print_message("without cleaning: %llu segments, %llu bytes before idling, %llu and %llu after\n",
                (unsigned long long)off.segs_before, (unsigned long long)off.bytes_before,
                (unsigned long long)off.segs_after, (unsigned long long)off.bytes_after);
  print_message("with cleaning: %llu segments, %llu bytes before idling, %llu and %llu after "
                "(%llu live; %llu entries moved)\n",
                (unsigned long long)on.segs_before, (unsigned long long)on.bytes_before,
                (unsigned long long)on.segs_after, (unsigned long long)on.bytes_after,
                (unsigned long long)on.live_after, (unsigned long long)on.moved);
  /* Group 0's tail pins the first segment and every later one. */
  assert_true(off.segs_after >= 40);
  assert_true(off.segs_after == off.segs_before);
  /* Cleaned: the log shrinks to about what is live. */
  assert_true(on.moved > 0);
  assert_true(on.segs_after <= 6);
  assert_true(on.bytes_after <= 2 * on.live_after + 2 * 64 * 1024);
  assert_true(on.bytes_after * 5 < off.bytes_after);
}

/* The one spare-*.log file in dir: its name into name, its inode; false
 * if there is none. */
static bool recycle_spare(const char *dir, char *name, size_t len, ino_t *ino)
{
  DIR *d = opendir(dir);
  assert_non_null(d);
  struct dirent *de;
  bool found = false;
  while ((de = readdir(d)) != NULL) {
    if (strncmp(de->d_name, "spare-", 6) == 0) {
      assert_false(found);
      found = true;
      snprintf(name, len, "%s", de->d_name);
    }
  }
  closedir(d);
  if (found) {
    char path[PATH_MAX];
    struct stat st;
    snprintf(path, sizeof path, "%s/%s", dir, name);
    assert_int_equal(stat(path, &st), 0);
    *ino = st.st_ino;
  }
  return found;
}

/* A segment no group needs becomes the spare file, and the next new
 * segment is written over it (same inode, the file longer than the
 * segment's records): group 102's entries, removed, are still in the
 * file's old bytes and must not come back at a restart, nor must group
 * 101's old entries below its snapshot. */
static void test_wal_recycles_a_dropped_segment_file_and_replays_past_its_old_bytes(void **state)
{
  (void)state;
  uv_loop_t loop;
  assert_int_equal(uv_loop_init(&loop), 0);
  char *dir = tu_tmpdir("walrecycle");
  struct wal *w;
  char errmsg[WAL_ERRMSG_SIZE];
  struct wal_opts o = {.segment_bytes = 16 * 1024, .clean = WAL_CLEAN_OFF};
  assert_int_equal(wal_open(&loop, dir, &o, &w, errmsg), 0);
  for (uint64_t i = 1; i <= 200; i++) { /* about 6 segments */
    tail_append(w, 101, i, 0);
    tail_append(w, 102, i, 0);
  }
  tail_flush(&loop, w);
  struct wal_stats st;
  wal_get_stats(w, &st);
  assert_true(st.last_seq >= 4);
  /* Group 102 goes, 101 keeps 191..200 behind a snapshot at 190: every
   * segment but the head empties out. */
  assert_int_equal(wal_remove(w, NULL, 102, NULL), 0);
  assert_int_equal(wal_snapshot(w, NULL, 101, 190, 1, 191, NULL), 0);
  tail_flush(&loop, w); /* durable: the segments are dropped after it */
  tail_flush(&loop, w); /* the job that removes them */
  char spare[256];
  ino_t ino = 0;
  assert_true(recycle_spare(dir, spare, sizeof spare, &ino));
  wal_get_stats(w, &st);
  uint64_t head = st.last_seq;
  assert_int_equal(st.segments_recycled, 0);
  /* Appends until a new segment starts: it is written over the spare. */
  uint64_t next = 201;
  while (st.last_seq == head) {
    tail_append(w, 101, next++, 0);
    wal_get_stats(w, &st);
  }
  tail_flush(&loop, w);
  wal_get_stats(w, &st);
  assert_int_equal(st.segments_recycled, 1);
  char name[256], path[PATH_MAX];
  ino_t none;
  assert_false(recycle_spare(dir, name, sizeof name, &none));
  snprintf(path, sizeof path, "%s/wal-%016llx.log", dir, (unsigned long long)st.last_seq);
  struct stat sb;
  assert_int_equal(stat(path, &sb), 0);
  assert_int_equal(sb.st_ino, ino);
  assert_true((uint64_t)sb.st_size > 8 * 1024); /* its old life's bytes follow */
  char why[256];
  assert_int_equal(wal_check(w, why, sizeof why), 0);
  wm_close_wal(&loop, w);
  assert_int_equal(wal_open(&loop, dir, &o, &w, errmsg), 0);
  assert_int_equal(wal_check(w, why, sizeof why), 0);
  struct wal_group_info info;
  assert_int_equal(wal_group_info(w, 102, &info), CAIRN_ENOTFOUND);
  tail_check(w, 101, 191, next, 0);
  wal_get_stats(w, &st);
  assert_int_equal(st.torn_bytes_cut, 0); /* old bytes are not a torn tail to cut */
  /* And the log goes on in the same file. */
  tail_append(w, 101, next, 0);
  tail_flush(&loop, w);
  wm_close_wal(&loop, w);
  assert_int_equal(wal_open(&loop, dir, &o, &w, errmsg), 0);
  tail_check(w, 101, 191, next + 1, 0);
  wm_close_wal(&loop, w);
  assert_int_equal(uv_loop_close(&loop), 0);
  tu_tmpdir_free(dir);
}

static void remnant_reopen(uv_loop_t *loop, struct wal **w, const char *dir)
{
  wm_close_wal(loop, *w);
  char errmsg[WAL_ERRMSG_SIZE];
  struct wal_opts o = {.clean = WAL_CLEAN_OFF};
  assert_int_equal(wal_open(loop, dir, &o, w, errmsg), 0);
}

/* A torn job whose second record made it to disk whole after a damaged
 * first one: both go at the restart (a torn tail), and the second must not
 * come back when the log, going on from the first one's place, ends right
 * where it starts (the cut zeroes it; the file keeps its length). */
static void test_wal_torn_job_remnants_never_come_back(void **state)
{
  (void)state;
  uv_loop_t loop;
  assert_int_equal(uv_loop_init(&loop), 0);
  char *dir = tu_tmpdir("walremnant");
  struct wal *w;
  char errmsg[WAL_ERRMSG_SIZE];
  struct wal_opts o = {.clean = WAL_CLEAN_OFF};
  assert_int_equal(wal_open(&loop, dir, &o, &w, errmsg), 0);
  struct wal_entry e[2] = {{1, 1, "aaaa", 4}, {1, 1, "cccc", 4}};
  assert_int_equal(wal_append(w, NULL, 5, 1, e, 1, NULL), 0);
  tail_flush(&loop, w);
  uint64_t seq = 1;
  char name[32];
  snprintf(name, sizeof name, "wal-%016llx.log", (unsigned long long)seq);
  int64_t job2 = tu_file_size(dir, name); /* entries 2 and 3 in one job */
  struct wal_entry two[2] = {{1, 1, "bbbb", 4}, {1, 1, "cccc", 4}};
  assert_int_equal(wal_append(w, NULL, 5, 2, two, 2, NULL), 0);
  tail_flush(&loop, w);
  wm_close_wal(&loop, w);
  int64_t size = tu_file_size(dir, name);
  /* Entry 2's payload damaged (torn), entry 3's record intact. */
  tu_write_at(dir, name, job2 + 40, "X", 1);
  assert_int_equal(wal_open(&loop, dir, &o, &w, errmsg), 0);
  struct wal_group_info info;
  assert_int_equal(wal_group_info(w, 5, &info), 0);
  assert_int_equal(info.next, 2);
  assert_int_equal(tu_file_size(dir, name), size);
  /* The log goes on: entry 2 again, as long as before, ends where entry
   * 3's old record started. */
  struct wal_entry again = {1, 1, "dddd", 4};
  struct wal_req req;
  bool done = false;
  req.data = &done;
  assert_int_equal(wal_append(w, &req, 5, 2, &again, 1, wm_on_done_flag), 0);
  while (!done) {
    uv_run(&loop, UV_RUN_ONCE);
  }
  remnant_reopen(&loop, &w, dir);
  assert_int_equal(wal_group_info(w, 5, &info), 0);
  assert_int_equal(info.next, 3);
  struct wal_entry got;
  assert_int_equal(wal_read(w, 5, 2, &got), 0);
  assert_memory_equal(got.buf, "dddd", 4);
  free((void *)got.buf);
  wm_close_wal(&loop, w);
  assert_int_equal(uv_loop_close(&loop), 0);
  tu_tmpdir_free(dir);
}

/* A truncation and a rewrite of entries whose segment the cleaner is
 * reading: the copies made are of the entries still live, the truncated
 * ones do not come back at a restart, the rewritten ones read back new. */
static void test_wal_cleaning_does_not_resurrect_entries_truncated_meanwhile(void **state)
{
  (void)state;
  uv_loop_t loop;
  assert_int_equal(uv_loop_init(&loop), 0);
  char *dir = tu_tmpdir("walrace");
  struct wal *w;
  char errmsg[WAL_ERRMSG_SIZE];
  struct wal_opts o = {.segment_bytes = 16 * 1024, .clean = WAL_CLEAN_EAGER};
  assert_int_equal(wal_open(&loop, dir, &o, &w, errmsg), 0);
  for (uint64_t i = 1; i <= 10; i++) {
    tail_append(w, 7, i, 0); /* in the first segment */
  }
  tail_flush(&loop, w);
  for (uint64_t i = 1; i <= 40; i++) { /* rolls; group 8 keeps nothing old */
    tail_append(w, 8, i, 0);
    assert_int_equal(wal_snapshot(w, NULL, 8, i, 1, i + 1, NULL), 0);
  }
  /* The job's end starts the cleaner's read of the first segment. */
  struct wal_req req;
  bool done = false;
  req.data = &done;
  assert_int_equal(wal_set_meta(w, &req, 8, 1, 0, wm_on_done_flag), 0);
  while (!done) {
    uv_run(&loop, UV_RUN_ONCE);
  }
  struct wal_stats st;
  wal_get_stats(w, &st);
  assert_int_equal(st.clean_read_bytes, 0); /* the read has not ended yet */
  assert_int_equal(wal_truncate(w, NULL, 7, 5, NULL), 0);
  tail_append(w, 7, 5, 1);
  tail_append(w, 7, 6, 1);
  tail_flush(&loop, w);
  tail_idle(&loop, 300);
  wal_get_stats(w, &st);
  assert_true(st.clean_read_bytes > 0);
  assert_true(st.clean_moved >= 4);
  wm_close_wal(&loop, w);
  assert_int_equal(wal_open(&loop, dir, &o, &w, errmsg), 0);
  struct wal_group_info info;
  assert_int_equal(wal_group_info(w, 7, &info), 0);
  assert_int_equal(info.first, 1);
  assert_int_equal(info.next, 7);
  tail_check_entries(w, 7, 1, 5, 0); /* moved */
  tail_check_entries(w, 7, 5, 7, 1); /* rewritten: the old 5..10 did not come back */
  char why[256];
  assert_int_equal(wal_check(w, why, sizeof why), 0);
  wal_get_stats(w, &st);
  print_message("after the restart: segments %llu..%llu\n", (unsigned long long)st.first_seq,
                (unsigned long long)st.last_seq);
  wm_close_wal(&loop, w);
  assert_int_equal(uv_loop_close(&loop), 0);
  tu_tmpdir_free(dir);
}

/* ---- SIGKILL of a writing process ---- */

#define KG 8             /* groups the killed writer appends to */
#define K_KEEP 40        /* entries a snapshot leaves behind */
#define K_SNAP_EVERY 150 /* a snapshot per group every so many entries */

/* The payload of entry index of group g: a function of both, so a record
 * in the wrong place or a stale one is seen. */
static uint32_t kill_payload(uint64_t g, uint64_t index, uint8_t *p)
{
  uint32_t len = (uint32_t)((g * 31 + index * 7) % 60);
  for (uint32_t j = 0; j < len; j++) {
    p[j] = (uint8_t)(g * 13 + index * 3 + j);
  }
  return len;
}

struct kill_child {
  struct wal *w;
  int fd;
  uint64_t next[KG];
  struct wal_req reqs[KG];
  uint64_t want[KG]; /* the index the group's request acknowledges */
};

static void kill_child_issue(struct kill_child *k, int g);

static void kill_child_on_done(struct wal_req *req, int status)
{
  struct kill_child *k = req->data;
  int g = (int)(req - k->reqs);
  if (status != 0) {
    _exit(5);
  }
  uint64_t rep[2] = {(uint64_t)g, k->want[g]};
  if (write(k->fd, rep, sizeof rep) != (ssize_t)sizeof rep) {
    _exit(6);
  }
  kill_child_issue(k, g);
}

/* Appends 1-3 entries to group g; every K_SNAP_EVERY a snapshot (no
 * callback) compacts it, so segments are deleted while the kill lands. */
static void kill_child_issue(struct kill_child *k, int g)
{
  uint64_t gid = gid_of(g);
  struct wal_entry es[3];
  uint8_t bufs[3][64];
  unsigned n = 1 + (unsigned)(k->next[g] % 3);
  for (unsigned i = 0; i < n; i++) {
    uint64_t index = k->next[g] + i;
    es[i] = (struct wal_entry){1, 1, bufs[i], kill_payload(gid, index, bufs[i])};
  }
  k->reqs[g].data = k;
  k->want[g] = k->next[g] + n - 1;
  if (wal_append(k->w, &k->reqs[g], gid, k->next[g], es, n, kill_child_on_done) != 0) {
    _exit(7);
  }
  k->next[g] += n;
  if (k->next[g] % K_SNAP_EVERY < n && k->next[g] > K_KEEP) {
    uint64_t si = k->next[g] - 1;
    if (wal_snapshot(k->w, NULL, gid, si, 1, si + 1 - K_KEEP, NULL) != 0) {
      _exit(8);
    }
  }
}

static void kill_child_run(const char *dir, int fd)
{
  uv_loop_t loop;
  struct kill_child k = {.fd = fd};
  char errmsg[WAL_ERRMSG_SIZE];
  struct wal_opts o = {.segment_bytes = 16 * 1024, .clean = WAL_CLEAN_EAGER};
  if (uv_loop_init(&loop) != 0 || wal_open(&loop, dir, &o, &k.w, errmsg) != 0) {
    _exit(9);
  }
  for (int g = 0; g < KG; g++) {
    struct wal_group_info info;
    k.next[g] = wal_group_info(k.w, gid_of(g), &info) == 0 ? info.next : 1;
    kill_child_issue(&k, g);
  }
  uv_run(&loop, UV_RUN_DEFAULT);
  _exit(10);
}

/* Reads acknowledgements from fd until deadline_ms passes (or the child
 * is gone and the pipe empty); acked[g] is the highest per group. */
static unsigned kill_read_acks(int fd, uint64_t *acked, uint64_t deadline_ns)
{
  unsigned n = 0;
  for (;;) {
    uint64_t rep[2];
    ssize_t got = read(fd, rep, sizeof rep);
    if (got == (ssize_t)sizeof rep) {
      assert_true(rep[0] < KG);
      assert_true(rep[1] > acked[rep[0]]); /* in order, each once */
      acked[rep[0]] = rep[1];
      n++;
      continue;
    }
    if (got == 0 || uv_hrtime() > deadline_ns) {
      return n;
    }
    if (got < 0 && errno == EAGAIN) {
      usleep(1000);
      continue;
    }
    assert_true(got < 0 && errno == EINTR);
  }
}

static void test_wal_keeps_every_acknowledged_entry_across_sigkill(void **state)
{
  (void)state;
  uint64_t seed = tu_seed("test_wal_sigkill");
  uint64_t rng = seed ? seed : 1;
  char *dir = tu_tmpdir("walkill");
  uint64_t acked[KG] = {0};
  unsigned total = 0, on_recycled = 0;
  int round = 0;
  /* Six kills, and more (up to 30) until one lands in a recycled file. */
  for (; round < 6 || (on_recycled == 0 && round < 30); round++) {
    int fds[2];
    assert_int_equal(pipe(fds), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
      close(fds[0]);
      kill_child_run(dir, fds[1]);
    }
    close(fds[1]);
    assert_int_equal(fcntl(fds[0], F_SETFL, O_NONBLOCK), 0);
    uint64_t ms = 100 + tu_rand(&rng) % 300;
    total += kill_read_acks(fds[0], acked, uv_hrtime() + ms * 1000000);
    kill(pid, SIGKILL);
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
    assert_int_equal(fcntl(fds[0], F_SETFL, 0), 0);
    total += kill_read_acks(fds[0], acked, UINT64_MAX); /* what it wrote before dying */
    close(fds[0]);

    uv_loop_t loop;
    assert_int_equal(uv_loop_init(&loop), 0);
    struct wal *w;
    char errmsg[WAL_ERRMSG_SIZE];
    int rv = wal_open(&loop, dir, NULL, &w, errmsg);
    if (rv != 0) {
      fail_msg("round %d (seed %llu): reopen: %s", round, (unsigned long long)seed, errmsg);
    }
    for (int g = 0; g < KG; g++) {
      struct wal_group_info info;
      assert_int_equal(wal_group_info(w, gid_of(g), &info), 0);
      if (info.next <= acked[g]) {
        fail_msg("round %d (seed %llu): group %d holds up to %llu, %llu was acknowledged", round,
                 (unsigned long long)seed, g, (unsigned long long)info.next - 1,
                 (unsigned long long)acked[g]);
      }
      for (uint64_t i = info.first; i < info.next; i++) {
        struct wal_entry e;
        uint8_t want[64];
        uint32_t len = kill_payload(gid_of(g), i, want);
        assert_int_equal(wal_read(w, gid_of(g), i, &e), 0);
        assert_int_equal(e.len, len);
        assert_true(len == 0 || memcmp(e.buf, want, len) == 0);
        free((void *)e.buf);
      }
    }
    char why[256];
    assert_int_equal(wal_check(w, why, sizeof why), 0);
    /* A newest segment longer on disk than its records was written over
     * a recycled file: the kill landed among a previous life's bytes. */
    struct wal_stats st;
    wal_get_stats(w, &st);
    char name[64];
    snprintf(name, sizeof name, "wal-%016llx.log", (unsigned long long)st.last_seq);
    if (tu_file_size(dir, name) > (int64_t)wal_seg_durable(w, st.last_seq)) {
      on_recycled++;
    }
    wm_close_wal(&loop, w);
    assert_int_equal(uv_loop_close(&loop), 0);
  }
  print_message("%u acknowledgements checked over %d kills, %u of them in a recycled file\n", total,
                round, on_recycled);
  assert_true(total > 0);
  assert_true(on_recycled > 0);
  tu_tmpdir_free(dir);
}

int main(void)
{
  log_set_level(LOG_OFF); /* the crashes log expected errors */
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_wal_agrees_with_model_under_random_operations_and_crashes),
      cmocka_unit_test(test_wal_recovers_at_every_write_and_fsync_boundary),
      cmocka_unit_test(test_wal_refuses_damage_before_synced_records),
      cmocka_unit_test(test_wal_refuses_an_older_segment_without_its_end),
      cmocka_unit_test(test_wal_cleaning_drops_segments_pinned_by_idle_tails),
      cmocka_unit_test(test_wal_cleaning_does_not_resurrect_entries_truncated_meanwhile),
      cmocka_unit_test(test_wal_recycles_a_dropped_segment_file_and_replays_past_its_old_bytes),
      cmocka_unit_test(test_wal_torn_job_remnants_never_come_back),
      cmocka_unit_test(test_wal_keeps_every_acknowledged_entry_across_sigkill),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
