/* test_plog_model.c - a randomized model test of the partition log: one
 * seeded sequence of operations (append, read, time lookup, flush,
 * truncate, delete_before, retention, clean reopen, process crash, power
 * loss) drives plog, a plain array model kept here and memlog side by
 * side, and after each step checks that they agree.
 *
 * The model is the list of batches the log should hold, each with what it
 * was built from (tag, record count, value size, timestamp: enough for
 * tu_check_batch), its stamped broker fields and its size. It knows
 * nothing of segments; where an answer depends on them (where a read
 * stops, what retention deletes) the test lists the segment files and
 * checks only what the contract says.
 *
 * Crashes: a forked child goes on with a few steps (appends, flushes,
 * truncations, deletions, retention) on the inherited log, reports each
 * result through a pipe and kills itself (SIGKILL: no close, no flush).
 * The parent replays the same plan (same PRNG state, same model) into the
 * model and memlog, checks each report, drops its own copy of the log
 * without touching the files, and reopens. A killed process leaves all it
 * wrote in the page cache, so every entry must be there. For a power loss
 * the parent also cuts the newest segment anywhere past what the log had
 * claimed durable (or removes it when none of it was), and the reopened
 * log must be exactly the model's prefix that ends at the last whole entry
 * left, with the recovery report counting exactly the bytes and batches
 * cut. (Only the newest segment is cut: older ones were fsynced when they
 * were rolled, an invariant of plog.h this test takes as given.)
 *
 * Known gap, not checked: plog keeps no record of the Raft index of the
 * batches deleted from the front, so once no held batch came from Raft
 * its last_index / durable_index may fall short of memlog's (see
 * model_index_known).
 *
 * Replay: the test prints its seed; CAIRN_TEST_SEED=<seed> replays every
 * run. CAIRN_MODEL_RUNS and CAIRN_MODEL_OPS change how many runs of how
 * many operations (defaults 3 and 3000); CAIRN_MODEL_TRACE=1 prints each
 * operation. */
#include "common/err.h"
#include "common/log.h"
#include "format/batch.h"
#include "storage/memlog.h"
#include "storage/pgstore.h"
#include "storage/plog.h"
#include "storage/plog_internal.h" /* pm_abandon() only */
#include "testutil.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#define PM_DEFAULT_RUNS 3
#define PM_DEFAULT_OPS 3000
#define PM_MAX_ENTRY_BATCHES 4
#define PM_MAX_CRASH_STEPS 10

/* ---- the model ---- */

struct mbatch {
  int64_t base;
  int32_t n; /* records; record i has offset base + i and timestamp ts + i */
  uint32_t vsize;
  uint64_t tag;
  int64_t ts;
  uint64_t src;     /* source index stamped into it */
  uint64_t covered; /* Raft index wholly applied once this batch is in */
  size_t len;
  bool entry_end;
};

struct model {
  struct mbatch *b; /* the batches held, oldest first; b[0].base == start */
  size_t n;
  size_t cap;
  int64_t start;
  int64_t next;
  uint64_t last_index;
  uint64_t prefix_index; /* covered index of the last batch dropped from the front */
  bool start_on_entry;   /* start is an entry boundary */
  int64_t durable;       /* every batch below it was flushed: a lower bound */
};

/* The number of held batches whose base is below offset. */
static size_t model_count_below(const struct model *m, int64_t offset)
{
  size_t lo = 0, hi = m->n;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (m->b[mid].base < offset) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  return lo;
}

/* The index of the held batch that holds offset (start <= offset < next). */
static size_t model_find(const struct model *m, int64_t offset)
{
  size_t k = model_count_below(m, offset + 1);
  return k - 1;
}

static int64_t model_end(const struct mbatch *b) { return b->base + b->n; }

/* Is offset a batch boundary of the held batches (next included)? */
static bool model_is_boundary(const struct model *m, int64_t offset)
{
  size_t k = model_count_below(m, offset);
  return k < m->n ? m->b[k].base == offset : offset == m->next;
}

/* The Raft index applied once the first k held batches are in. */
static uint64_t model_index_at(const struct model *m, size_t k)
{
  return k == 0 ? m->prefix_index : m->b[k - 1].covered;
}

/* Can plog know model_index_at(k)? Only from a Raft batch it still holds:
 * it keeps no record of the index covered by batches deleted from the
 * front (memlog does), so when none of the first k held batches came from
 * Raft its answer may fall short of the model's. Reported to the lead. */
static bool model_index_known(const struct model *m, size_t k)
{
  if (m->prefix_index == 0) {
    return true;
  }
  for (size_t i = 0; i < k; i++) {
    if (m->b[i].src != 0) {
      return true;
    }
  }
  return false;
}

static uint64_t model_bytes(const struct model *m)
{
  uint64_t total = 0;
  for (size_t i = 0; i < m->n; i++) {
    total += m->b[i].len;
  }
  return total;
}

static void model_push(struct model *m, const struct mbatch *b)
{
  if (m->n == m->cap) {
    m->cap = m->cap ? m->cap * 2 : 256;
    m->b = realloc(m->b, m->cap * sizeof *m->b);
    assert_non_null(m->b);
  }
  m->b[m->n++] = *b;
}

static void model_truncate(struct model *m, int64_t offset)
{
  size_t k = model_count_below(m, offset);
  m->n = k;
  m->next = offset;
  m->last_index = model_index_at(m, k);
  if (m->durable > offset) {
    m->durable = offset;
  }
}

/* Drops the batches below offset, a batch boundary or past the end. */
static void model_drop_front(struct model *m, int64_t offset)
{
  if (offset <= m->start) {
    return;
  }
  if (offset > m->next) {
    m->prefix_index = m->last_index;
    m->n = 0;
    m->start = m->next = offset;
    m->start_on_entry = true;
    return;
  }
  size_t k = model_count_below(m, offset);
  bool on_entry = k == 0 ? m->start_on_entry : m->b[k - 1].entry_end;
  m->prefix_index = model_index_at(m, k);
  memmove(m->b, m->b + k, (m->n - k) * sizeof *m->b);
  m->n -= k;
  m->start = offset;
  m->start_on_entry = on_entry;
}

/* A flush to up_to makes every batch that ends at or below it durable. */
static void model_flush(struct model *m, int64_t up_to)
{
  int64_t target = up_to < m->next ? up_to : m->next;
  size_t k = model_count_below(m, target);
  while (k > 0 && model_end(&m->b[k - 1]) > target) {
    k--;
  }
  if (k > 0 && model_end(&m->b[k - 1]) > m->durable) {
    m->durable = model_end(&m->b[k - 1]);
  }
}

/* The first record at or after start whose timestamp is >= t. */
static int64_t model_lookup_time(const struct model *m, int64_t t)
{
  for (size_t i = 0; i < m->n; i++) {
    const struct mbatch *b = &m->b[i];
    if (t <= b->ts) {
      return b->base;
    }
    if (t - b->ts < b->n) {
      return b->base + (t - b->ts);
    }
  }
  return m->next;
}

/* ---- entries ---- */

struct gen_batch {
  uint64_t tag;
  int32_t n;
  uint32_t vsize;
  int64_t ts;
};

/* One Raft entry: its batches' parameters, then (pm_build) their bytes. */
struct entry {
  size_t nb;
  struct gen_batch g[PM_MAX_ENTRY_BATCHES];
  uint64_t src;
  uint8_t *data[PM_MAX_ENTRY_BATCHES];
  struct store_batch sb[PM_MAX_ENTRY_BATCHES];
};

static void entry_build(struct entry *e)
{
  for (size_t i = 0; i < e->nb; i++) {
    size_t len;
    e->data[i] = tu_make_batch(e->g[i].tag, e->g[i].n, e->g[i].vsize, e->g[i].ts, &len);
    e->sb[i].data = e->data[i];
    e->sb[i].len = len;
  }
}

static void entry_free(struct entry *e)
{
  for (size_t i = 0; i < e->nb; i++) {
    free(e->data[i]);
    e->data[i] = NULL;
  }
}

/* Adds an appended entry to the model at its next offset. */
static void model_add_entry(struct model *m, const struct entry *e)
{
  uint64_t before = m->last_index;
  uint64_t done = e->src != 0 ? e->src : before;
  for (size_t i = 0; i < e->nb; i++) {
    bool last = i + 1 == e->nb;
    struct mbatch b = {.base = m->next,
                       .n = e->g[i].n,
                       .vsize = e->g[i].vsize,
                       .tag = e->g[i].tag,
                       .ts = e->g[i].ts,
                       .src = e->src,
                       .covered = last ? done : before,
                       .len = e->sb[i].len,
                       .entry_end = last};
    model_push(m, &b);
    m->next += b.n;
  }
  m->last_index = done;
}

/* ---- the test's state ---- */

/* The steps a crashing child takes (see pm_op_crash). */
enum pm_step_kind {
  PM_STEP_APPEND = 1,
  PM_STEP_FLUSH,
  PM_STEP_TRUNCATE,
  PM_STEP_DELETE_BEFORE,
  PM_STEP_RETENTION
};


static int64_t pm_now;
static int64_t pm_clock(void) { return pm_now; }

struct pm {
  uint64_t seed;
  uint64_t rng;
  int op;
  const char *what; /* the operation under way, for failure messages */
  char *dir;
  struct plog_opts opts;
  struct store *pl; /* the log under test */
  struct store *ml; /* memlog, a second implementation of the contract */
  struct store *pg; /* pgstore, a third, when CAIRN_PG_CONNINFO names a database */
  struct store *refs[2]; /* ml, then pg if open: driven beside the log under test */
  size_t nrefs;
  uint32_t pg_topic; /* this run's topic id in the database */
  struct model m;
  uint64_t tag;   /* the next batch's tag */
  int64_t clock;  /* the next record timestamp */
  uint64_t raft;  /* the highest source index handed out */
  int src_mode;   /* 0: every entry from Raft, 1: none, 2: mixed */
  int64_t *bases; /* segment files, listed lazily (pm_bases) */
  size_t nbases;
  size_t capbases;
  bool bases_ok;
  /* what happened, for the summary line */
  unsigned crashes, power_losses, reopens, retentions_deleting;
  unsigned cuts, cut_entries, segments_lost; /* power losses that lost data */
  unsigned child_steps[PM_STEP_RETENTION + 1];
  uint64_t seg_sum; /* segments, summed over the operations */
  uint32_t seg_max;
  bool trace; /* CAIRN_MODEL_TRACE: print each operation */
};

static void pm_fail(const struct pm *p, const char *msg, const char *file, int line)
{
  print_error("%s:%d: %s\n  at op %d (%s) of the run with seed %llu\n", file, line, msg, p->op,
              p->what, (unsigned long long)p->seed);
  fail();
}

static void pm_check(const struct pm *p, bool ok, const char *expr, const char *file, int line)
{
  if (!ok) {
    char msg[512];
    snprintf(msg, sizeof msg, "check failed: %s", expr);
    pm_fail(p, msg, file, line);
  }
}

static void pm_check_eq(const struct pm *p, int64_t a, int64_t b, const char *ea, const char *eb,
                        const char *file, int line)
{
  if (a != b) {
    char msg[512];
    snprintf(msg, sizeof msg, "%s == %s failed: %lld != %lld", ea, eb, (long long)a,
             (long long)b);
    pm_fail(p, msg, file, line);
  }
}

#define PM_TRUE(p, cond) pm_check((p), (cond), #cond, __FILE__, __LINE__)
#define PM_EQ(p, a, b) \
  pm_check_eq((p), (int64_t)(a), (int64_t)(b), #a, #b, __FILE__, __LINE__)

static uint64_t pm_rand(struct pm *p, uint64_t n) { return n == 0 ? 0 : tu_rand(&p->rng) % n; }

/* True with probability 1/n. */
static bool pm_one_in(struct pm *p, uint64_t n) { return pm_rand(p, n) == 0; }

static void pm_open(struct pm *p)
{
  char err[256] = "";
  int rv = plog_open(p->dir, &p->opts, &p->pl, err, sizeof err);
  if (rv != 0) {
    char msg[400];
    snprintf(msg, sizeof msg, "plog_open: %s", err);
    pm_fail(p, msg, __FILE__, __LINE__);
  }
}

/* The process that owned the files was killed: drop this process's copy
 * of the log without touching them (a plain close would flush). A fatal
 * log closes without writing, as a failed open does. */
static void pm_abandon(struct pm *p)
{
  ((struct plog *)p->pl)->base.fatal = true;
  store_close(p->pl);
  p->pl = NULL;
}

static int pm_cmp_i64(const void *a, const void *b)
{
  int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return x < y ? -1 : x > y;
}

/* Lists the segment files' base offsets, sorted. */
static void pm_bases(struct pm *p)
{
  if (p->bases_ok) {
    return;
  }
  p->nbases = 0;
  DIR *d = opendir(p->dir);
  if (d == NULL) {
    char msg[400];
    snprintf(msg, sizeof msg, "opendir %s: %s", p->dir, strerror(errno));
    pm_fail(p, msg, __FILE__, __LINE__);
  }
  struct dirent *de;
  while ((de = readdir(d)) != NULL) {
    const char *name = de->d_name;
    if (strlen(name) != 24 || strcmp(name + 20, ".log") != 0 ||
        strspn(name, "0123456789") != 20) {
      continue;
    }
    if (p->nbases == p->capbases) {
      p->capbases = p->capbases ? p->capbases * 2 : 64;
      p->bases = realloc(p->bases, p->capbases * sizeof *p->bases);
      assert_non_null(p->bases);
    }
    p->bases[p->nbases++] = strtoll(name, NULL, 10);
  }
  closedir(d);
  qsort(p->bases, p->nbases, sizeof *p->bases, pm_cmp_i64);
  p->bases_ok = true;
}

static bool pm_is_seg_base(struct pm *p, int64_t offset)
{
  pm_bases(p);
  for (size_t i = 0; i < p->nbases; i++) {
    if (p->bases[i] == offset) {
      return true;
    }
  }
  return false;
}

/* ---- pgstore, when a database is given ---- */

static void pm_pg_open(struct pm *p)
{
  /* Its own PRNG stream: the run stays the same with or without pgstore. */
  uint64_t rng = p->seed ^ (p->reopens * 0x9E3779B97F4A7C15ull);
  uint64_t pick = tu_rand(&rng);
  struct pgstore_opts o = {
      .conninfo = getenv("CAIRN_PG_CONNINFO"),
      .topic = "model",
      .topic_id = p->pg_topic,
      .partition = 0,
      /* Small tails now and then, so reads go to the database too. */
      .tail_bytes = pick % 2 ? 1 + (pick >> 8) % 20000 : 0,
      .commit_each_append = (pick >> 40) & 1,
  };
  char err[STORE_ERRMSG_SIZE + 64] = "";
  int rv = pgstore_open(&o, &p->pg, err, sizeof err);
  if (rv != 0) {
    char msg[400];
    snprintf(msg, sizeof msg, "pgstore_open: %s", err);
    pm_fail(p, msg, __FILE__, __LINE__);
  }
}

/* Closes pgstore (which commits) and opens it again from its rows alone:
 * an empty tail, every read from the database. */
static void pm_pg_reopen(struct pm *p)
{
  store_close(p->pg);
  pm_pg_open(p);
  p->refs[p->nrefs - 1] = p->pg;
  struct store_info i;
  store_info(p->pg, &i);
  PM_EQ(p, i.durable_offset, i.next_offset);
}

/* pgstore's read at offset must be a prefix of memlog's (mr), cut short
 * only by its own limits (pgstore.h). */
static void pm_pg_check_read(struct pm *p, int64_t offset, size_t max_bytes,
                             const struct store_region *mr)
{
  struct store_region r;
  PM_EQ(p, store_read(p->pg, offset, max_bytes, &r), 0);
  PM_EQ(p, r.first_offset, mr->first_offset);
  PM_TRUE(p, r.len > 0 && r.len <= mr->len);
  PM_TRUE(p, memcmp(r.mem, mr->mem, r.len) == 0);
  if (r.len < mr->len) {
    size_t k = model_find(&p->m, offset), count = 0;
    while (k + count < p->m.n && p->m.b[k + count].base < r.next_offset) {
      count++;
    }
    size_t next_len = p->m.b[k + count].len;
    PM_TRUE(p, count == PGSTORE_READ_MAX_BATCHES || r.len + next_len > PGSTORE_READ_MAX_BYTES);
  }
  store_region_release(&r);
}

/* ---- generating entries ---- */

static void pm_gen_entry(struct pm *p, struct entry *e)
{
  memset(e, 0, sizeof *e);
  uint64_t r = pm_rand(p, 100);
  e->nb = r < 55 ? 1 : r < 75 ? 2 : r < 88 ? 3 : 4;
  for (size_t i = 0; i < e->nb; i++) {
    struct gen_batch *g = &e->g[i];
    g->tag = p->tag++;
    r = pm_rand(p, 100);
    g->n = r < 70 ? 1 + (int32_t)pm_rand(p, 8) : r < 95 ? 9 + (int32_t)pm_rand(p, 32)
                                                        : 41 + (int32_t)pm_rand(p, 80);
    r = pm_rand(p, 100);
    g->vsize = r < 55 ? (uint32_t)pm_rand(p, 65)
               : r < 88 ? 65 + (uint32_t)pm_rand(p, 336)
               : r < 98 ? 401 + (uint32_t)pm_rand(p, 1600)
                        : 2001 + (uint32_t)pm_rand(p, 6000);
    if ((uint64_t)g->n * g->vsize > 40000) {
      g->n = (int32_t)(40000 / g->vsize) + 1;
    }
    /* Mostly rising timestamps, now and then one that goes back. */
    if (pm_one_in(p, 20)) {
      g->ts = p->clock - (int64_t)pm_rand(p, 2000);
    } else {
      g->ts = p->clock;
      p->clock += g->n + (int64_t)pm_rand(p, 4);
    }
  }
  bool raft = p->src_mode == 0 || (p->src_mode == 2 && !pm_one_in(p, 4));
  if (raft) {
    p->raft += pm_one_in(p, 8) ? 2 + pm_rand(p, 3) : 1;
    e->src = p->raft;
  }
}

/* ---- checks ---- */

static uint8_t *pm_region_bytes(const struct store_region *r)
{
  if (r->fd >= 0) {
    return tu_read_region(r->fd, r->pos, r->len);
  }
  uint8_t *buf = malloc(r->len + 1);
  if (buf != NULL && r->len > 0) {
    memcpy(buf, r->mem, r->len);
  }
  return buf;
}

/* Checks the region read at offset with max_bytes against the model and
 * against memlog's answer to the same read. Returns its next offset. */
static int64_t pm_check_region(struct pm *p, int64_t offset, size_t max_bytes,
                               const struct store_region *r)
{
  const struct model *m = &p->m;
  size_t k = model_find(m, offset);
  PM_TRUE(p, r->len > 0);
  PM_EQ(p, r->first_offset, m->b[k].base);
  uint8_t *buf = pm_region_bytes(r);
  PM_TRUE(p, buf != NULL);
  size_t pos = 0, i = k;
  while (pos < r->len) {
    PM_TRUE(p, i < m->n);
    const struct mbatch *mb = &m->b[i];
    PM_TRUE(p, r->len - pos >= BATCH_HEADER_SIZE);
    struct batch_header h;
    batch_header_decode(buf + pos, &h);
    PM_TRUE(p, h.batch_length > 0);
    size_t size = batch_total_size(h.batch_length);
    PM_EQ(p, size, mb->len);
    PM_TRUE(p, size <= r->len - pos);
    PM_EQ(p, h.base_offset, mb->base);
    PM_EQ(p, h.source_index, mb->src);
    PM_EQ(p, h.entry_flags, mb->entry_end ? BATCH_FLAG_ENTRY_END : 0);
    PM_EQ(p, h.first_timestamp, mb->ts);
    PM_EQ(p, tu_check_batch(buf + pos, size, mb->tag, mb->n, mb->vsize), 0);
    pos += size;
    i++;
  }
  PM_EQ(p, r->next_offset, model_end(&m->b[i - 1]));
  if (i - k > 1) {
    PM_TRUE(p, r->len <= max_bytes); /* only a lone first batch may pass it */
  }
  if (i < m->n && r->len <= max_bytes && m->b[i].len <= max_bytes - r->len) {
    /* The next batch would have fitted: only a segment's end stops a read. */
    PM_TRUE(p, pm_is_seg_base(p, m->b[i].base));
  }
  struct store_region mr;
  PM_EQ(p, store_read(p->ml, offset, max_bytes, &mr), 0);
  PM_EQ(p, mr.first_offset, r->first_offset);
  PM_TRUE(p, mr.len >= r->len);
  PM_TRUE(p, memcmp(mr.mem, buf, r->len) == 0);
  if (mr.len > r->len) {
    PM_TRUE(p, pm_is_seg_base(p, r->next_offset));
  }
  if (p->pg != NULL) {
    pm_pg_check_read(p, offset, max_bytes, &mr);
  }
  store_region_release(&mr);
  free(buf);
  return r->next_offset;
}

static size_t pm_pick_max_bytes(struct pm *p)
{
  switch (pm_rand(p, 6)) {
  case 0:
    return pm_rand(p, 2); /* 0 or 1: one batch, whatever its size */
  case 1:
    return pm_rand(p, 600);
  case 2:
  case 3:
    return pm_rand(p, 8192);
  case 4:
    return pm_rand(p, 2 * p->opts.segment_bytes);
  default:
    return SIZE_MAX;
  }
}

static void pm_read_and_check(struct pm *p, int64_t offset, size_t max_bytes)
{
  struct store_region r;
  PM_EQ(p, store_read(p->pl, offset, max_bytes, &r), 0);
  pm_check_region(p, offset, max_bytes, &r);
  store_region_release(&r);
}

/* Reads the whole log in random steps and checks every batch. */
static void pm_verify_all(struct pm *p)
{
  const char *was = p->what;
  p->what = "verify the whole log";
  int64_t off = p->m.start;
  while (off < p->m.next) {
    size_t max_bytes = pm_pick_max_bytes(p);
    struct store_region r;
    PM_EQ(p, store_read(p->pl, off, max_bytes, &r), 0);
    int64_t next = pm_check_region(p, off, max_bytes, &r);
    store_region_release(&r);
    PM_TRUE(p, next > off);
    off = next;
  }
  struct store_region r;
  PM_EQ(p, store_read(p->pl, p->m.next, 100, &r), 0);
  PM_EQ(p, r.len, 0);
  store_region_release(&r);
  p->what = was;
}

static void pm_check_info(struct pm *p)
{
  const struct model *m = &p->m;
  struct store_info i;
  store_info(p->pl, &i);
  PM_EQ(p, i.start_offset, m->start);
  PM_EQ(p, i.next_offset, m->next);
  if (model_index_known(m, m->n)) {
    PM_EQ(p, i.last_index, m->last_index);
  }
  PM_TRUE(p, !i.fatal);
  PM_TRUE(p, i.durable_offset >= m->durable);
  PM_TRUE(p, i.durable_offset <= m->next);
  if (i.durable_offset >= m->start && model_is_boundary(m, i.durable_offset)) {
    size_t k = model_count_below(m, i.durable_offset);
    if (model_index_known(m, k)) {
      PM_EQ(p, i.durable_index, model_index_at(m, k));
    }
  }
  PM_TRUE(p, i.size_bytes >= model_bytes(m));
  for (size_t ri = 0; ri < p->nrefs; ri++) {
    struct store_info mi;
    store_info(p->refs[ri], &mi);
    PM_EQ(p, mi.start_offset, m->start);
    PM_EQ(p, mi.next_offset, m->next);
    PM_EQ(p, mi.last_index, m->last_index);
    PM_TRUE(p, !mi.fatal);
    PM_TRUE(p, mi.durable_offset <= m->next);
  }
}

/* ---- operations ---- */

static void pm_append_entry(struct pm *p, struct entry *e)
{
  int64_t base = -1, mbase = -1;
  PM_EQ(p, store_append(p->pl, e->sb, e->nb, e->src, &base), 0);
  PM_EQ(p, base, p->m.next);
  for (size_t ri = 0; ri < p->nrefs; ri++) {
    PM_EQ(p, store_append(p->refs[ri], e->sb, e->nb, e->src, &mbase), 0);
    PM_EQ(p, mbase, base);
  }
  model_add_entry(&p->m, e);
}

static void pm_op_append(struct pm *p)
{
  p->what = "append";
  struct entry e;
  pm_gen_entry(p, &e);
  entry_build(&e);
  if (p->m.last_index > 0 && pm_one_in(p, 25) && model_index_known(&p->m, p->m.n)) {
    /* A replayed Raft entry: refused by both, nothing written. */
    p->what = "append of an entry applied before";
    uint64_t src = 1 + pm_rand(p, p->m.last_index);
    int64_t base;
    PM_EQ(p, store_append(p->pl, e.sb, e.nb, src, &base), CAIRN_EEXIST);
    for (size_t ri = 0; ri < p->nrefs; ri++) {
      PM_EQ(p, store_append(p->refs[ri], e.sb, e.nb, src, &base), CAIRN_EEXIST);
    }
    pm_check_info(p);
  } else {
    pm_append_entry(p, &e);
  }
  entry_free(&e);
}

static void pm_op_read(struct pm *p)
{
  p->what = "read";
  const struct model *m = &p->m;
  if (m->n == 0) {
    return;
  }
  int64_t offset;
  if (pm_one_in(p, 2)) {
    offset = m->start + (int64_t)pm_rand(p, (uint64_t)(m->next - m->start));
  } else {
    const struct mbatch *b = &m->b[pm_rand(p, m->n)];
    offset = pm_one_in(p, 2) ? b->base : model_end(b) - 1;
  }
  pm_read_and_check(p, offset, pm_pick_max_bytes(p));
}

static void pm_op_read_end(struct pm *p)
{
  p->what = "read at the end";
  struct store_region r;
  PM_EQ(p, store_read(p->pl, p->m.next, pm_pick_max_bytes(p), &r), 0);
  PM_EQ(p, r.len, 0);
  PM_EQ(p, r.first_offset, p->m.next);
  PM_EQ(p, r.next_offset, p->m.next);
  store_region_release(&r);
  for (size_t ri = 0; ri < p->nrefs; ri++) {
    PM_EQ(p, store_read(p->refs[ri], p->m.next, 100, &r), 0);
    PM_EQ(p, r.len, 0);
    store_region_release(&r);
  }
}

static void pm_op_read_out_of_range(struct pm *p)
{
  p->what = "read out of range";
  const struct model *m = &p->m;
  int64_t offset;
  switch (pm_rand(p, 4)) {
  case 0:
    offset = m->next + 1 + (int64_t)pm_rand(p, 1000);
    break;
  case 1:
    offset = m->start > 0 ? m->start - 1 - (int64_t)pm_rand(p, (uint64_t)m->start) : -1;
    break;
  case 2:
    offset = -1 - (int64_t)pm_rand(p, 1000);
    break;
  default:
    offset = INT64_MAX;
    break;
  }
  struct store_region r;
  PM_EQ(p, store_read(p->pl, offset, pm_pick_max_bytes(p), &r), CAIRN_EOFFSET);
  store_region_release(&r);
  for (size_t ri = 0; ri < p->nrefs; ri++) {
    PM_EQ(p, store_read(p->refs[ri], offset, 100, &r), CAIRN_EOFFSET);
    store_region_release(&r);
  }
}

static void pm_op_lookup_time(struct pm *p)
{
  p->what = "lookup_time";
  const struct model *m = &p->m;
  int64_t t;
  uint64_t r = pm_rand(p, 10);
  if (r == 0) {
    t = pm_one_in(p, 2) ? INT64_MIN : INT64_MAX;
  } else if (r < 6 && m->n > 0) {
    const struct mbatch *b = &m->b[pm_rand(p, m->n)];
    t = b->ts - 2 + (int64_t)pm_rand(p, (uint64_t)b->n + 4);
  } else {
    t = p->clock - (int64_t)pm_rand(p, 100000) + 50;
  }
  int64_t off = -1, moff = -1;
  PM_EQ(p, store_lookup_time(p->pl, t, &off), 0);
  PM_EQ(p, off, model_lookup_time(m, t));
  for (size_t ri = 0; ri < p->nrefs; ri++) {
    PM_EQ(p, store_lookup_time(p->refs[ri], t, &moff), 0);
    PM_EQ(p, moff, off);
  }
}

/* A flush target: the end, an entry or batch boundary, or any offset. */
static int64_t pm_pick_flush_target(struct pm *p)
{
  const struct model *m = &p->m;
  uint64_t r = pm_rand(p, 10);
  if (r < 3 || m->n == 0) {
    return pm_one_in(p, 2) ? INT64_MAX : m->next;
  }
  if (r < 7) {
    return model_end(&m->b[pm_rand(p, m->n)]);
  }
  return m->start - 3 + (int64_t)pm_rand(p, (uint64_t)(m->next - m->start) + 6);
}

static void pm_op_flush(struct pm *p)
{
  p->what = "flush";
  int64_t up_to = pm_pick_flush_target(p);
  PM_EQ(p, store_flush(p->pl, up_to), 0);
  for (size_t ri = 0; ri < p->nrefs; ri++) {
    PM_EQ(p, store_flush(p->refs[ri], up_to), 0);
  }
  model_flush(&p->m, up_to);
  pm_check_info(p);
}

/* An entry boundary in [start, next] to truncate at, mostly near the end
 * (Raft cuts conflicting uncommitted entries); -1 if there is none. */
static int64_t pm_pick_truncate_offset(struct pm *p)
{
  const struct model *m = &p->m;
  size_t count = m->start_on_entry ? 1 : 0;
  for (size_t i = 0; i < m->n; i++) {
    count += m->b[i].entry_end;
  }
  if (count == 0) {
    return -1;
  }
  size_t want = !pm_one_in(p, 4) ? count - 1 - pm_rand(p, count < 4 ? count : 4)
                                 : pm_rand(p, count);
  int64_t offset = m->start;
  size_t seen = m->start_on_entry ? 1 : 0;
  for (size_t i = 0; i < m->n && seen <= want; i++) {
    if (m->b[i].entry_end) {
      if (seen == want) {
        offset = model_end(&m->b[i]);
      }
      seen++;
    }
  }
  return offset;
}

static void pm_op_truncate(struct pm *p)
{
  p->what = "truncate";
  int64_t offset = pm_pick_truncate_offset(p);
  if (offset < 0) {
    return;
  }
  PM_EQ(p, store_truncate(p->pl, offset), 0);
  for (size_t ri = 0; ri < p->nrefs; ri++) {
    PM_EQ(p, store_truncate(p->refs[ri], offset), 0);
  }
  model_truncate(&p->m, offset);
  pm_check_info(p);
}

static void pm_op_truncate_invalid(struct pm *p)
{
  p->what = "truncate at an invalid offset";
  const struct model *m = &p->m;
  int64_t offset;
  int want;
  const struct mbatch *b = m->n > 0 ? &m->b[pm_rand(p, m->n)] : NULL;
  if (b != NULL && b->n > 1 && !pm_one_in(p, 3)) {
    offset = b->base + 1 + (int64_t)pm_rand(p, (uint64_t)b->n - 1);
    want = CAIRN_EINVAL;
  } else if (m->start > 0 && pm_one_in(p, 2)) {
    offset = m->start - 1;
    want = CAIRN_EOFFSET;
  } else {
    offset = m->next + 1 + (int64_t)pm_rand(p, 100);
    want = CAIRN_EOFFSET;
  }
  PM_EQ(p, store_truncate(p->pl, offset), want);
  for (size_t ri = 0; ri < p->nrefs; ri++) {
    PM_EQ(p, store_truncate(p->refs[ri], offset), want);
  }
  pm_check_info(p);
}

/* A new log start: mostly a batch boundary in (start, next], older half
 * first, now and then past the end (a snapshot install); -1 for none. */
static int64_t pm_pick_delete_offset(struct pm *p)
{
  const struct model *m = &p->m;
  uint64_t r = pm_rand(p, 20);
  if (r == 0) {
    return m->next + 1 + (int64_t)pm_rand(p, 1000);
  }
  if (m->n == 0) {
    return -1;
  }
  size_t k = 1 + pm_rand(p, r < 14 ? (m->n + 1) / 2 : m->n);
  return k < m->n ? m->b[k].base : m->next;
}

static void pm_op_delete_before(struct pm *p)
{
  p->what = "delete_before";
  struct model *m = &p->m;
  int64_t offset = pm_pick_delete_offset(p);
  if (offset < 0) {
    return;
  }
  PM_EQ(p, store_delete_before(p->pl, offset), 0);
  for (size_t ri = 0; ri < p->nrefs; ri++) {
    PM_EQ(p, store_delete_before(p->refs[ri], offset), 0);
  }
  model_drop_front(m, offset);
  pm_check_info(p);
  pm_bases(p);
  /* The segments wholly below offset are gone, the one holding it is not. */
  PM_TRUE(p, p->nbases >= 1);
  PM_TRUE(p, p->bases[0] <= offset);
  PM_TRUE(p, p->nbases == 1 || p->bases[1] > offset);
  struct store_region r2;
  if (m->start > 0) {
    PM_EQ(p, store_read(p->pl, m->start - 1, 100, &r2), CAIRN_EOFFSET);
  }
}

static void pm_op_retention(struct pm *p)
{
  p->what = "retention";
  struct model *m = &p->m;
  pm_bases(p);
  size_t before = p->nbases;
  int64_t *was = malloc(before * sizeof *was);
  memcpy(was, p->bases, before * sizeof *was);
  int64_t start_before = m->start;
  int64_t now = p->clock + 100 - (int64_t)pm_rand(p, 1000);
  uint32_t deleted = 99;
  PM_EQ(p, store_retention(p->pl, now, INT64_MAX, &deleted), 0);
  p->bases_ok = false;
  pm_bases(p);
  PM_EQ(p, deleted, before - p->nbases);
  PM_TRUE(p, p->nbases >= 1); /* never the active segment */
  for (size_t i = 0; i < p->nbases; i++) {
    PM_EQ(p, p->bases[i], was[deleted + i]); /* oldest first */
  }
  free(was);
  struct store_info i;
  store_info(p->pl, &i);
  PM_TRUE(p, i.start_offset >= start_before);
  if (deleted == 0) {
    PM_EQ(p, i.start_offset, start_before);
  } else {
    p->retentions_deleting++;
    int64_t first = p->bases[0];
    PM_EQ(p, i.start_offset, first > start_before ? first : start_before);
    PM_TRUE(p, model_is_boundary(m, i.start_offset));
  }
  /* What retention kept, it had to keep. */
  if (p->nbases >= 2) {
    char name[40];
    int64_t first_size = tu_file_size(p->dir, tu_segname(name, p->bases[0], "log"));
    if (p->opts.retention_bytes > 0 && i.size_bytes > p->opts.retention_bytes) {
      PM_TRUE(p, i.size_bytes - p->opts.retention_bytes < (uint64_t)first_size);
    }
    if (p->opts.retention_ms > 0 && i.start_offset == p->bases[0]) {
      int64_t max_ts = INT64_MIN;
      for (size_t k = 0; k < m->n && m->b[k].base < p->bases[1]; k++) {
        int64_t ts = m->b[k].ts + m->b[k].n - 1;
        max_ts = ts > max_ts ? ts : max_ts;
      }
      PM_TRUE(p, max_ts >= now - p->opts.retention_ms);
    }
  }
  for (size_t ri = 0; ri < p->nrefs; ri++) {
    PM_EQ(p, store_delete_before(p->refs[ri], i.start_offset), 0);
  }
  model_drop_front(m, i.start_offset);
  pm_check_info(p);
}

static void pm_check_clean_recovery(struct pm *p)
{
  struct plog_recovery rec;
  plog_recovery_info(p->pl, &rec);
  PM_EQ(p, rec.bytes_truncated, 0);
  PM_EQ(p, rec.batches_truncated, 0);
  PM_EQ(p, rec.segments_dropped, 0);
  PM_EQ(p, rec.indexes_rebuilt, 0);
  PM_EQ(p, rec.files_ignored, 0);
}

/* After any reopen: everything is durable and the log is the model. */
static void pm_check_reopened(struct pm *p)
{
  p->m.durable = p->m.next;
  struct store_info i;
  store_info(p->pl, &i);
  PM_EQ(p, i.durable_offset, p->m.next);
  if (model_index_known(&p->m, p->m.n)) {
    PM_EQ(p, i.durable_index, p->m.last_index);
  }
  pm_check_info(p);
  pm_verify_all(p);
}

static void pm_op_reopen(struct pm *p)
{
  p->what = "clean reopen";
  p->reopens++;
  store_close(p->pl);
  p->pl = NULL;
  if (pm_one_in(p, 5)) {
    /* Other settings over the same files. */
    p->opts.index_interval = 256 + (uint32_t)pm_rand(p, 769);
    p->opts.segment_bytes = 8192 + 1024 * pm_rand(p, 25);
  }
  pm_open(p);
  pm_check_clean_recovery(p);
  if (p->pg != NULL) {
    pm_pg_reopen(p);
  }
  pm_check_reopened(p);
}

/* ---- crashes ---- */

/* The child's steps are planned from the PRNG and the model as it goes;
 * the parent replays the same plan from the same state afterwards, so both
 * know each step without sending it. */
struct crash_step {
  enum pm_step_kind kind;
  struct entry e; /* PM_STEP_APPEND */
  int64_t arg;    /* flush target, truncate or delete offset, retention's now */
};

/* What the child reports after each step. */
struct crash_report {
  int32_t kind;
  int32_t rv;
  int64_t base; /* PM_STEP_APPEND */
  int64_t start;
  int64_t next;
  int64_t durable;
};

static void pm_plan_step(struct pm *p, struct crash_step *st)
{
  memset(st, 0, sizeof *st);
  uint64_t r = pm_rand(p, 100);
  if (r < 20) {
    st->kind = PM_STEP_FLUSH;
    st->arg = pm_pick_flush_target(p);
    return;
  }
  if (r < 28 && (st->arg = pm_pick_truncate_offset(p)) >= 0) {
    st->kind = PM_STEP_TRUNCATE;
    return;
  }
  if (r >= 28 && r < 33 && (st->arg = pm_pick_delete_offset(p)) >= 0) {
    st->kind = PM_STEP_DELETE_BEFORE;
    return;
  }
  if (r >= 33 && r < 38) {
    st->kind = PM_STEP_RETENTION;
    st->arg = p->clock + 100 - (int64_t)pm_rand(p, 1000);
    return;
  }
  st->kind = PM_STEP_APPEND;
  pm_gen_entry(p, &st->e);
  entry_build(&st->e);
}

/* Runs a step on the log (in the child). */
static void pm_exec_step(struct pm *p, struct crash_step *st, struct crash_report *rep)
{
  memset(rep, 0, sizeof *rep);
  rep->kind = (int32_t)st->kind;
  rep->base = -1;
  uint32_t deleted;
  switch (st->kind) {
  case PM_STEP_APPEND:
    rep->rv = store_append(p->pl, st->e.sb, st->e.nb, st->e.src, &rep->base);
    break;
  case PM_STEP_FLUSH:
    rep->rv = store_flush(p->pl, st->arg);
    break;
  case PM_STEP_TRUNCATE:
    rep->rv = store_truncate(p->pl, st->arg);
    break;
  case PM_STEP_DELETE_BEFORE:
    rep->rv = store_delete_before(p->pl, st->arg);
    break;
  case PM_STEP_RETENTION:
    rep->rv = store_retention(p->pl, st->arg, INT64_MAX, &deleted);
    break;
  }
  struct store_info info;
  store_info(p->pl, &info);
  rep->start = info.start_offset;
  rep->next = info.next_offset;
  rep->durable = info.durable_offset;
}

/* Applies a step's outcome to the model; in the parent (check) also to
 * memlog, checking the child's report against them. */
static void pm_apply_step(struct pm *p, struct crash_step *st, const struct crash_report *rep,
                          bool check)
{
  struct model *m = &p->m;
  if (check) {
    PM_EQ(p, rep->kind, st->kind);
    PM_EQ(p, rep->rv, 0);
  }
  switch (st->kind) {
  case PM_STEP_APPEND:
    if (check) {
      int64_t mbase = -1;
      PM_EQ(p, rep->base, m->next);
      for (size_t ri = 0; ri < p->nrefs; ri++) {
        PM_EQ(p, store_append(p->refs[ri], st->e.sb, st->e.nb, st->e.src, &mbase), 0);
        PM_EQ(p, mbase, rep->base);
      }
    }
    model_add_entry(m, &st->e);
    entry_free(&st->e);
    break;
  case PM_STEP_FLUSH:
    model_flush(m, st->arg);
    if (check) {
      PM_TRUE(p, rep->durable >= m->durable);
    }
    break;
  case PM_STEP_TRUNCATE:
    if (check) {
      for (size_t ri = 0; ri < p->nrefs; ri++) {
        PM_EQ(p, store_truncate(p->refs[ri], st->arg), 0);
      }
    }
    model_truncate(m, st->arg);
    break;
  case PM_STEP_DELETE_BEFORE:
    if (check) {
      for (size_t ri = 0; ri < p->nrefs; ri++) {
        PM_EQ(p, store_delete_before(p->refs[ri], st->arg), 0);
      }
    }
    model_drop_front(m, st->arg);
    break;
  case PM_STEP_RETENTION:
    /* What it deletes depends on segments: take the new start as told. */
    if (check) {
      PM_TRUE(p, rep->start >= m->start);
      PM_TRUE(p, rep->start == m->start || model_is_boundary(m, rep->start));
      for (size_t ri = 0; ri < p->nrefs; ri++) {
        PM_EQ(p, store_delete_before(p->refs[ri], rep->start), 0);
      }
    }
    model_drop_front(m, rep->start);
    break;
  }
  if (check) {
    PM_EQ(p, rep->start, m->start);
    PM_EQ(p, rep->next, m->next);
    PM_TRUE(p, rep->durable <= m->next);
  }
}

/* The child: runs the planned steps on the inherited log, reports each
 * result, and dies without closing or flushing anything. */
static void pm_child(struct pm *p, size_t n, int fd)
{
  for (size_t i = 0; i < n; i++) {
    struct crash_step st;
    struct crash_report rep;
    pm_plan_step(p, &st);
    pm_exec_step(p, &st, &rep);
    if (write(fd, &rep, sizeof rep) != (ssize_t)sizeof rep) {
      _exit(3);
    }
    pm_apply_step(p, &st, &rep, false);
  }
  raise(SIGKILL);
  _exit(4);
}

/* Simulates losing what the page cache held past the durable point: cuts
 * the newest segment anywhere past what the log claimed durable, or, when
 * none of it was claimed, may remove it. The model and memlog already hold
 * the child's entries; they are cut to what must survive. */
static void pm_power_loss(struct pm *p, int64_t claimed)
{
  struct model *m = &p->m;
  p->power_losses++;
  p->bases_ok = false;
  pm_bases(p);
  PM_TRUE(p, p->nbases >= 1);
  int64_t base = p->bases[p->nbases - 1];
  char name[40];
  tu_segname(name, base, "log");
  int64_t size = tu_file_size(p->dir, name);
  PM_TRUE(p, size >= 0);

  /* The file holds batches below start (dead: deleted, not yet removed)
   * and then the model's batches from max(base, start) on. */
  size_t first = model_count_below(m, base);
  uint64_t tail = 0;
  for (size_t i = first; i < m->n; i++) {
    tail += m->b[i].len;
  }
  PM_TRUE(p, (uint64_t)size >= tail);
  if (base >= m->start) {
    PM_EQ(p, size, tail);
    PM_TRUE(p, model_is_boundary(m, base));
  }
  int64_t dead = size - (int64_t)tail;

  /* The lowest cut: nothing the log claimed durable may go, and (to keep
   * the log start meaningful) nothing below the first whole entry held. */
  int64_t lo = 0;
  if (claimed > base || base < m->start) {
    lo = dead;
    int64_t pos = dead;
    bool need_entry = base < m->start && !m->start_on_entry;
    for (size_t i = first; i < m->n; i++) {
      if (m->b[i].base >= claimed && !need_entry) {
        break;
      }
      pos += (int64_t)m->b[i].len;
      lo = pos;
      if (m->b[i].entry_end) {
        need_entry = false;
      }
    }
  }
  PM_TRUE(p, lo <= size);

  int64_t expect;
  uint64_t cut_bytes = 0;
  uint32_t cut_batches = 0; /* whole batches of an entry cut short */
  if (p->nbases >= 2 && claimed <= base && pm_one_in(p, 4)) {
    /* The segment's creation never reached the disk. */
    PM_TRUE(p, base >= m->start);
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/%s", p->dir, name);
    PM_EQ(p, unlink(path), 0);
    if (!pm_one_in(p, 3)) {
      snprintf(path, sizeof path, "%s/%s", p->dir, tu_segname(name, base, "index"));
      PM_EQ(p, unlink(path), 0);
      snprintf(path, sizeof path, "%s/%s", p->dir, tu_segname(name, base, "timeindex"));
      PM_EQ(p, unlink(path), 0);
    }
    expect = base;
    p->segments_lost++;
  } else {
    int64_t cut;
    uint64_t r = pm_rand(p, 3);
    if (r == 0 && first < m->n) {
      /* At a batch boundary or a few bytes either side of one. */
      size_t k = first + pm_rand(p, m->n - first + 1);
      int64_t pos = dead;
      for (size_t i = first; i < k; i++) {
        pos += (int64_t)m->b[i].len;
      }
      cut = pos + (int64_t)pm_rand(p, 5) - 2;
    } else if (r == 1) {
      cut = size - (int64_t)pm_rand(p, 300);
    } else {
      cut = lo + (int64_t)pm_rand(p, (uint64_t)(size - lo) + 1);
    }
    cut = cut < lo ? lo : cut > size ? size : cut;
    tu_truncate(p->dir, name, cut);
    /* What survives: the whole entries that end within the cut. */
    expect = base > m->start ? base : m->start;
    int64_t keep = base >= m->start ? 0 : dead;
    int64_t pos = dead;
    for (size_t i = first; i < m->n; i++) {
      pos += (int64_t)m->b[i].len;
      if (pos > cut) {
        break;
      }
      cut_batches++;
      if (m->b[i].entry_end) {
        expect = model_end(&m->b[i]);
        keep = pos;
        cut_batches = 0;
      }
    }
    cut_bytes = (uint64_t)(cut - keep);
    p->cuts += cut < size;
  }
  p->cut_entries += expect < m->next;
  PM_TRUE(p, expect >= claimed || claimed <= m->start);

  pm_open(p);
  struct plog_recovery rec;
  plog_recovery_info(p->pl, &rec);
  PM_EQ(p, rec.bytes_truncated, cut_bytes);
  PM_EQ(p, rec.batches_truncated, cut_batches);
  PM_EQ(p, rec.segments_dropped, 0);
  PM_EQ(p, rec.files_ignored, 0);
  for (size_t ri = 0; ri < p->nrefs; ri++) {
    PM_EQ(p, store_truncate(p->refs[ri], expect), 0);
  }
  model_truncate(m, expect);
}

static void pm_op_crash(struct pm *p)
{
  bool power = pm_one_in(p, 2);
  p->what = power ? "crash with power loss" : "process crash";
  p->crashes++;
  size_t n = 1 + pm_rand(p, PM_MAX_CRASH_STEPS);

  int fds[2];
  PM_EQ(p, pipe(fds), 0);
  fflush(stdout);
  fflush(stderr);
  pid_t pid = fork();
  PM_TRUE(p, pid >= 0);
  if (pid == 0) {
    close(fds[0]);
    pm_child(p, n, fds[1]);
  }
  close(fds[1]);
  struct crash_report reps[PM_MAX_CRASH_STEPS];
  size_t got = 0;
  for (;;) {
    ssize_t r = read(fds[0], (char *)reps + got, sizeof reps - got);
    if (r < 0 && errno == EINTR) {
      continue;
    }
    PM_TRUE(p, r >= 0);
    if (r == 0) {
      break;
    }
    got += (size_t)r;
  }
  close(fds[0]);
  int status;
  PM_EQ(p, waitpid(pid, &status, 0), pid);
  PM_TRUE(p, WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
  PM_EQ(p, got, n * sizeof *reps);

  /* Replay the child's plan into the model and memlog. */
  for (size_t i = 0; i < n; i++) {
    struct crash_step st;
    pm_plan_step(p, &st);
    p->child_steps[st.kind]++;
    if (p->trace) {
      printf("    child step %d (%lld): rv %d base %lld, log [%lld, %lld) durable %lld\n",
             (int)st.kind, (long long)st.arg, reps[i].rv, (long long)reps[i].base,
             (long long)reps[i].start, (long long)reps[i].next, (long long)reps[i].durable);
    }
    pm_apply_step(p, &st, &reps[i], true);
  }
  /* What the log claimed durable when it died: batches below this must
   * survive anything. */
  int64_t claimed = reps[n - 1].durable;

  pm_abandon(p);
  if (power) {
    pm_power_loss(p, claimed);
  } else {
    /* The process died, the machine did not: everything written is there. */
    pm_open(p);
    struct plog_recovery rec;
    plog_recovery_info(p->pl, &rec);
    PM_EQ(p, rec.bytes_truncated, 0);
    PM_EQ(p, rec.batches_truncated, 0);
    PM_EQ(p, rec.segments_dropped, 0);
    PM_EQ(p, rec.files_ignored, 0);
  }
  pm_check_reopened(p);
}

static void pm_op_verify(struct pm *p)
{
  p->what = "verify";
  pm_check_info(p);
  pm_verify_all(p);
}

/* ---- the run ---- */

struct pm_op {
  unsigned weight;
  void (*run)(struct pm *p);
};

static const struct pm_op pm_ops[] = {
    {450, pm_op_append},
    {200, pm_op_read},
    {15, pm_op_read_end},
    {15, pm_op_read_out_of_range},
    {60, pm_op_lookup_time},
    {60, pm_op_flush},
    {40, pm_op_truncate},
    {10, pm_op_truncate_invalid},
    {30, pm_op_delete_before},
    {30, pm_op_retention},
    {25, pm_op_reopen},
    {20, pm_op_crash},
    {8, pm_op_verify},
};

static void pm_run(uint64_t seed, int nops)
{
  struct pm *p = calloc(1, sizeof *p);
  assert_non_null(p);
  p->seed = seed;
  p->rng = seed;
  p->what = "open";
  p->trace = getenv("CAIRN_MODEL_TRACE") != NULL;
  p->dir = tu_tmpdir("plog-model");
  plog_opts_default(&p->opts);
  p->opts.segment_bytes = 8192 + 1024 * pm_rand(p, 25);
  p->opts.index_interval = 256 + (uint32_t)pm_rand(p, 769);
  p->opts.retention_bytes = p->opts.segment_bytes * (3 + pm_rand(p, 5));
  p->opts.retention_ms = pm_one_in(p, 2) ? 0 : 2000 + (int64_t)pm_rand(p, 20000);
  p->opts.now_ms = pm_clock;
  p->src_mode = (int)pm_rand(p, 3);
  pm_now = 1700000000000;
  p->clock = 1700000000000;
  p->tag = 1;
  p->m.start_on_entry = true;
  pm_open(p);
  struct memlog_opts mopts = {0};
  PM_EQ(p, memlog_new(&mopts, &p->ml), 0);
  p->refs[p->nrefs++] = p->ml;
  if (getenv("CAIRN_PG_CONNINFO") != NULL) {
    p->pg_topic = (uint32_t)(seed % 1000000000);
    pm_pg_open(p);
    p->refs[p->nrefs++] = p->pg;
  }

  unsigned total = 0;
  for (size_t i = 0; i < sizeof pm_ops / sizeof *pm_ops; i++) {
    total += pm_ops[i].weight;
  }
  for (p->op = 0; p->op < nops; p->op++) {
    p->bases_ok = false;
    unsigned r = (unsigned)pm_rand(p, total);
    size_t k = 0;
    while (r >= pm_ops[k].weight) {
      r -= pm_ops[k].weight;
      k++;
    }
    pm_ops[k].run(p);
    struct store_info si;
    store_info(p->pl, &si);
    p->seg_sum += si.segments;
    p->seg_max = si.segments > p->seg_max ? si.segments : p->seg_max;
    if (p->trace) {
      printf("  op %d %s: log [%lld, %lld) last index %llu\n", p->op, p->what,
             (long long)p->m.start, (long long)p->m.next, (unsigned long long)p->m.last_index);
    }
    pm_now += 1 + (int64_t)pm_rand(p, 50);
  }
  p->bases_ok = false;
  pm_op_reopen(p);
  printf("  run %llu: %d ops, segments %.1f on average, %u at most, segment %llu B, index every %u B, retention %llu B / %lld ms, "
         "source mode %d: log [%lld, %lld), %u reopens, %u crashes (%u with power loss), "
         "%u retentions deleted; power losses cut %u segments, lost %u, took entries %u times; "
         "child steps: %u appends %u flushes %u truncates %u deletes %u retentions\n",
         (unsigned long long)seed, nops, (double)p->seg_sum / nops, p->seg_max,
         (unsigned long long)p->opts.segment_bytes,
         p->opts.index_interval, (unsigned long long)p->opts.retention_bytes,
         (long long)p->opts.retention_ms, p->src_mode, (long long)p->m.start,
         (long long)p->m.next, p->reopens, p->crashes, p->power_losses, p->retentions_deleting,
         p->cuts, p->segments_lost, p->cut_entries, p->child_steps[PM_STEP_APPEND],
         p->child_steps[PM_STEP_FLUSH], p->child_steps[PM_STEP_TRUNCATE],
         p->child_steps[PM_STEP_DELETE_BEFORE], p->child_steps[PM_STEP_RETENTION]);
  fflush(stdout);
  store_close(p->pl);
  store_close(p->ml);
  if (p->pg != NULL) {
    store_close(p->pg);
  }
  tu_tmpdir_free(p->dir);
  free(p->m.b);
  free(p->bases);
  free(p);
}

static int pm_env_int(const char *name, int dflt)
{
  const char *v = getenv(name);
  return v != NULL && atoi(v) > 0 ? atoi(v) : dflt;
}

static void test_plog_agrees_with_model_under_random_operations_and_crashes(void **state)
{
  (void)state;
  if (getenv("CAIRN_LOG_LEVEL") == NULL) {
    log_set_level(LOG_ERROR); /* recoveries are the point here: no warning each */
  }
  uint64_t seed = tu_seed("test_plog_model");
  uint64_t r = seed;
  int runs = pm_env_int("CAIRN_MODEL_RUNS", PM_DEFAULT_RUNS);
  int nops = pm_env_int("CAIRN_MODEL_OPS", PM_DEFAULT_OPS);
  for (int i = 0; i < runs; i++) {
    uint64_t run_seed = tu_rand(&r) | 1;
    pm_run(run_seed, nops);
  }
}

int main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_plog_agrees_with_model_under_random_operations_and_crashes),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
