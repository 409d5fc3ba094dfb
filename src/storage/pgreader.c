/* pgreader.c - a pgstore's reads, lookups by time and retention as jobs
 * on the thread pool over the reader's own connection (pgreader.h).
 *
 * Invariants:
 *   - at most one job is unfinished (r->job); the connection is touched
 *     by that job's worker only, or by nobody;
 *   - a job's outcome is delivered once, on the loop: by its after-work,
 *     or earlier by pgreader_stop, which waits on the job's condition
 *     variable for the worker to finish;
 *   - the cache and the kept answers are used only while their generation
 *     is the reader's (pgreader_invalidate moves it);
 *   - once the owner freed the reader (r->freed) with after-works
 *     queued, the last of them frees the reader;
 *   - at most PGREADER_MAX_JOBS jobs of the readers of one loop run at a
 *     time (the loop's pool counts them): the thread pool also runs the
 *     node's Raft log writes, which a database lock holding every worker
 *     would stall. A reader refused a slot is starved until a job of the
 *     loop ends, which wakes every starved reader's owner (on_done with
 *     CAIRN_EPENDING) to ask again. */
#include "storage/pgreader.h"

#include "common/err.h"
#include "storage/pgstore_schema.h"
#include "storage/store.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define PGREADER_ERRMSG_SIZE 256
#define PGREADER_CANCEL_MS 20 /* pgreader_stop: a cancel again this often */

struct pgreader_row {
  int64_t base;
  int64_t next;
  size_t pos; /* in the cache's bytes */
  size_t len;
};

/* A finished job's answer, kept until the call that asked for it comes
 * again (READ: failures only; a success fills the cache). */
struct pgreader_answer {
  bool set;
  uint64_t gen;
  int status;
  int64_t key;  /* READ: the offset; LOOKUP: the timestamp */
  int64_t key2; /* LOOKUP: the log start it looked from */
  bool found;
  int64_t value;   /* LOOKUP: the offset; SCAN: the point */
  int64_t scanned; /* LOOKUP, not found: every row below it was looked at */
  char errmsg[PGREADER_ERRMSG_SIZE];
};

struct pgreader_job {
  uv_work_t work;
  struct pgreader *r;
  enum pgreader_job_kind kind;
  uint64_t gen;
  bool sent; /* a statement succeeded: a failure after it is not retried */
  bool lost; /* the last statement failed for a lost connection */
  /* in */
  int64_t offset;               /* READ */
  int64_t timestamp;            /* LOOKUP */
  int64_t start;                /* LOOKUP */
  int64_t committed;            /* LOOKUP */
  struct pgreader_retention rt; /* SCAN, RETAIN */
  /* out */
  uint8_t *buf; /* READ: the rows' bytes back to back */
  size_t len;
  struct pgreader_row *rows;
  size_t nrows;
  bool found;
  int64_t value;
  bool truncated; /* READ: rows after the loaded ones were left out */
  struct pgreader_retained retained;
  /* delivery */
  pthread_mutex_t mu;
  pthread_cond_t cond;
  bool finished; /* under mu */
  bool delivered;
  int status;
  char errmsg[PGREADER_ERRMSG_SIZE];
};

/* The readers of one loop: how many jobs run, who waits for a slot. */
struct pgreader_pool {
  uv_loop_t *loop;
  unsigned refs;
  unsigned running;
  struct pgreader *starved; /* a list through next_starved */
  struct pgreader_pool *next;
};

/* Pools by loop; loops may live on several threads. */
static pthread_mutex_t pgreader_pools_mu = PTHREAD_MUTEX_INITIALIZER;
static struct pgreader_pool *pgreader_pools;

struct pgreader {
  uv_loop_t *loop;
  struct pgreader_pool *pool; /* NULL without a loop */
  struct pgreader *next_starved;
  bool starved;
  bool inline_jobs; /* pgreader_set_inline: jobs run at once, on the caller's thread */
  char *conninfo;
  char *password_file;
  char topic_id[16];
  char partition[16];
  size_t cache_max;
  void (*on_done)(void *arg, enum pgreader_job_kind kind, int status, const char *msg,
                  const struct pgreader_retained *retained);
  void *arg;
  PGconn *conn;
  pthread_mutex_t cancel_mu;
  PGcancel *cancel; /* for conn; under cancel_mu */
  struct pgreader_job *job;
  unsigned works; /* after-works queued */
  bool freed;
  uint64_t gen;
  /* The cache: the rows one READ job loaded. */
  uint64_t cache_gen;
  uint8_t *cache;
  struct pgreader_row *rows;
  size_t nrows;
  bool cache_truncated;              /* the load stopped at its bounds, not the rows' end */
  struct pgreader_answer answers[3]; /* READ, LOOKUP, SCAN */
};

bool pgreader_fits(size_t count, size_t len_so_far, size_t len, size_t max_bytes)
{
  if (count == 0) {
    return true;
  }
  if (count >= PGREADER_MAX_BATCHES || len_so_far > max_bytes || len > max_bytes - len_so_far) {
    return false;
  }
  return len_so_far + len <= PGREADER_MAX_BYTES;
}

static void pgreader_cache_drop(struct pgreader *r)
{
  free(r->cache);
  free(r->rows);
  r->cache = NULL;
  r->rows = NULL;
  r->nrows = 0;
}

static int pgreader_pool_acquire(uv_loop_t *loop, struct pgreader_pool **out)
{
  pthread_mutex_lock(&pgreader_pools_mu);
  struct pgreader_pool *pool = pgreader_pools;
  while (pool != NULL && pool->loop != loop) {
    pool = pool->next;
  }
  if (pool == NULL) {
    pool = calloc(1, sizeof *pool);
    if (pool != NULL) {
      pool->loop = loop;
      pool->next = pgreader_pools;
      pgreader_pools = pool;
    }
  }
  if (pool != NULL) {
    pool->refs++;
  }
  pthread_mutex_unlock(&pgreader_pools_mu);
  *out = pool;
  return pool != NULL ? 0 : CAIRN_ENOMEM;
}

static void pgreader_pool_release(struct pgreader_pool *pool)
{
  pthread_mutex_lock(&pgreader_pools_mu);
  if (--pool->refs == 0) {
    for (struct pgreader_pool **p = &pgreader_pools; *p != NULL; p = &(*p)->next) {
      if (*p == pool) {
        *p = pool->next;
        break;
      }
    }
    free(pool);
  }
  pthread_mutex_unlock(&pgreader_pools_mu);
}

static void pgreader_unstarve(struct pgreader *r)
{
  if (!r->starved) {
    return;
  }
  for (struct pgreader **p = &r->pool->starved; *p != NULL; p = &(*p)->next_starved) {
    if (*p == r) {
      *p = r->next_starved;
      break;
    }
  }
  r->starved = false;
  r->next_starved = NULL;
}

static void pgreader_free_now(struct pgreader *r)
{
  if (r->pool != NULL) {
    pgreader_unstarve(r);
    pgreader_pool_release(r->pool);
  }
  pgreader_cache_drop(r);
  PQfreeCancel(r->cancel);
  PQfinish(r->conn);
  pthread_mutex_destroy(&r->cancel_mu);
  free(r->conninfo);
  free(r->password_file);
  free(r);
}

int pgreader_new(const struct pgreader_opts *o, struct pgreader **out)
{
  struct pgreader *r = calloc(1, sizeof *r);
  if (r == NULL) {
    return CAIRN_ENOMEM;
  }
  pthread_mutex_init(&r->cancel_mu, NULL);
  r->loop = o->loop;
  r->conninfo = strdup(o->conninfo);
  r->password_file = o->password_file != NULL ? strdup(o->password_file) : NULL;
  if (r->conninfo == NULL || (o->password_file != NULL && r->password_file == NULL)) {
    pgreader_free_now(r);
    return CAIRN_ENOMEM;
  }
  snprintf(r->topic_id, sizeof r->topic_id, "%" PRIu32, o->topic_id);
  snprintf(r->partition, sizeof r->partition, "%" PRId32, o->partition);
  r->cache_max = o->cache_bytes ? o->cache_bytes : PGREADER_DEFAULT_CACHE_BYTES;
  r->on_done = o->on_done;
  r->arg = o->arg;
  if (o->loop != NULL && pgreader_pool_acquire(o->loop, &r->pool) != 0) {
    pgreader_free_now(r);
    return CAIRN_ENOMEM;
  }
  *out = r;
  return 0;
}

/* ---- the worker ---- */

static void pgreader_job_errmsg(struct pgreader_job *job, const char *what)
{
  char msg[200];
  snprintf(msg, sizeof msg, "%s", PQerrorMessage(job->r->conn));
  msg[strcspn(msg, "\n")] = '\0';
  snprintf(job->errmsg, sizeof job->errmsg, "postgresql (reader): %s: %s", what, msg);
}

/* One statement with text parameters. Returns the result (PQclear) or
 * NULL with the job's message set. */
static PGresult *pgreader_exec(struct pgreader_job *job, const char *what, const char *sql, int n,
                               const char *const *values, int binary)
{
  PGresult *res = PQexecParams(job->r->conn, sql, n, NULL, values, NULL, NULL, binary);
  ExecStatusType st = PQresultStatus(res);
  if (st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK) {
    job->sent = true;
    return res;
  }
  job->lost = pgstore_schema_conn_lost(job->r->conn, res);
  PQclear(res);
  pgreader_job_errmsg(job, what);
  return NULL;
}

/* A statement whose parameters are the topic, the partition and int64s. */
static PGresult *pgreader_exec_tp(struct pgreader_job *job, const char *what, const char *sql,
                                  const int64_t *args, int nargs, int binary)
{
  char a[3][24];
  const char *values[5] = {job->r->topic_id, job->r->partition, a[0], a[1], a[2]};
  for (int i = 0; i < nargs; i++) {
    snprintf(a[i], sizeof a[i], "%" PRId64, args[i]);
  }
  return pgreader_exec(job, what, sql, 2 + nargs, values, binary);
}

static int64_t pgreader_get_i64(const PGresult *res, int row, int col)
{
  return strtoll(PQgetvalue(res, row, col), NULL, 10);
}

/* In a binary result: a big-endian int8 column. */
static int64_t pgreader_get_bin_i64(const PGresult *res, int row, int col)
{
  const uint8_t *p = (const uint8_t *)PQgetvalue(res, row, col);
  uint64_t v = 0;
  for (int i = 0; i < 8; i++) {
    v = v << 8 | p[i];
  }
  return (int64_t)v;
}

/* READ: the rows from the one holding offset on, while the bytes before
 * each stay under the cache's bound (one statement: the sum runs in
 * PostgreSQL over at most PGREADER_SCAN_ROWS rows, by the last_offset
 * index; rows are contiguous, so last_offset order is offset order). */
static int pgreader_run_read(struct pgreader_job *job)
{
  int64_t args[2] = {job->offset, (int64_t)job->r->cache_max};
  PGresult *res = pgreader_exec_tp(
      job, "reading batches",
      "SELECT base_offset, last_offset, batch, n FROM (SELECT base_offset, last_offset, batch,"
      " sum(length(batch)) OVER (ORDER BY last_offset) - length(batch) AS before,"
      " count(*) OVER () AS n FROM"
      " (SELECT base_offset, last_offset, batch FROM cairn_batches WHERE topic_id = $1"
      " AND partition = $2 AND last_offset >= $3 ORDER BY last_offset LIMIT 256) a) b"
      " WHERE before < $4 ORDER BY last_offset",
      args, 2, 1);
  if (res == NULL) {
    return CAIRN_EDATABASE;
  }
  int rows = PQntuples(res);
  if (rows < 0 || rows > PGREADER_SCAN_ROWS) {
    rows = 0; /* never: the statement's LIMIT */
  }
  /* Cut by the LIMIT or the bytes: rows follow that the load left out
   * (otherwise it reached the rows' end). */
  int64_t inner = rows > 0 ? pgreader_get_bin_i64(res, 0, 3) : 0;
  job->truncated = inner >= PGREADER_SCAN_ROWS || inner > rows;
  size_t len = 0;
  for (int i = 0; i < rows; i++) {
    len += (size_t)PQgetlength(res, i, 2);
  }
  int rv = 0;
  if (rows == 0) {
    snprintf(job->errmsg, sizeof job->errmsg, "read at %" PRId64 ": no row holds it", job->offset);
    rv = CAIRN_ECORRUPT;
  } else {
    job->buf = malloc(len);
    job->rows = calloc((size_t)rows, sizeof *job->rows);
    if (job->buf == NULL || job->rows == NULL) {
      snprintf(job->errmsg, sizeof job->errmsg, "read at %" PRId64 ": %zu bytes", job->offset, len);
      rv = CAIRN_ENOMEM;
    }
  }
  for (int i = 0; rv == 0 && i < rows; i++) {
    struct pgreader_row *row = &job->rows[i];
    row->base = pgreader_get_bin_i64(res, i, 0);
    row->next = pgreader_get_bin_i64(res, i, 1) + 1;
    row->pos = job->len;
    row->len = (size_t)PQgetlength(res, i, 2);
    memcpy(job->buf + job->len, PQgetvalue(res, i, 2), row->len);
    job->len += row->len;
    job->nrows++;
  }
  PQclear(res);
  return rv;
}

/* LOOKUP: timestamps need not grow with offsets, so every row whose
 * max_timestamp qualifies is a candidate, in offset order
 * (cairn_batches_time). */
static int pgreader_run_lookup(struct pgreader_job *job)
{
  int64_t from = INT64_MIN;
  for (;;) {
    int64_t args[2] = {job->timestamp, from};
    PGresult *res = pgreader_exec_tp(job, "looking up a timestamp",
                                     "SELECT base_offset, batch FROM cairn_batches"
                                     " WHERE topic_id = $1 AND partition = $2"
                                     " AND max_timestamp >= $3 AND base_offset > $4"
                                     " ORDER BY base_offset LIMIT 32", /* PGREADER_LOOKUP_ROWS */
                                     args, 2, 1);
    if (res == NULL) {
      return CAIRN_EDATABASE;
    }
    int rows = PQntuples(res);
    int rv = 0;
    for (int i = 0; i < rows && rv == 0; i++) {
      rv = store_batch_find_time((const uint8_t *)PQgetvalue(res, i, 1),
                                 (size_t)PQgetlength(res, i, 1), job->start, job->timestamp,
                                 &job->value, job->errmsg, sizeof job->errmsg);
      from = pgreader_get_bin_i64(res, i, 0);
    }
    PQclear(res);
    if (rv != 0) {
      job->found = rv > 0;
      return rv < 0 ? rv : 0;
    }
    if (rows < PGREADER_LOOKUP_ROWS) {
      return 0;
    }
  }
}

/* Where the limits move the start (pgreader_retention): the newest row
 * always stays, as plog keeps its active segment; a row goes when the
 * next one (which then holds the start) is within the bound and it is
 * expired. *count gets the rows below the point. */
static int pgreader_run_limits(struct pgreader_job *job, int64_t *point, uint32_t *count)
{
  const struct pgreader_retention *rt = &job->rt;
  *point = rt->start;
  *count = 0;
  if (rt->retention_bytes == 0 && rt->retention_ms == 0) {
    return 0;
  }
  int64_t cutoff = rt->now_ms - rt->retention_ms;
  if (rt->retention_ms > 0 && rt->now_ms < INT64_MIN + rt->retention_ms) {
    cutoff = INT64_MIN; /* nothing can be that old */
  }
  uint64_t held = rt->size_bytes;
  int64_t from = INT64_MIN;
  bool have_prev = false;
  uint64_t prev_len = 0;
  int64_t prev_ts = 0;
  for (;;) {
    PGresult *res = pgreader_exec_tp(job, "retention: scanning batches",
                                     "SELECT base_offset, length(batch), max_timestamp"
                                     " FROM cairn_batches WHERE topic_id = $1 AND partition = $2"
                                     " AND base_offset > $3 ORDER BY base_offset LIMIT 256",
                                     &from, 1, 0);
    if (res == NULL) {
      return CAIRN_EDATABASE;
    }
    int rows = PQntuples(res);
    for (int i = 0; i < rows; i++) {
      int64_t base = pgreader_get_i64(res, i, 0);
      bool expired = have_prev && ((rt->retention_bytes > 0 && held > rt->retention_bytes) ||
                                   (rt->retention_ms > 0 && prev_ts < cutoff));
      if (have_prev && (!expired || base > rt->below || *count == UINT32_MAX)) {
        PQclear(res);
        return 0;
      }
      if (have_prev) {
        held -= prev_len;
        (*count)++;
        *point = base;
      }
      have_prev = true;
      prev_len = (uint64_t)pgreader_get_i64(res, i, 1);
      prev_ts = pgreader_get_i64(res, i, 2);
      from = base;
    }
    PQclear(res);
    if (rows < PGREADER_SCAN_ROWS) {
      return 0;
    }
  }
}

/* Where retention moves the start: the limits' point, or the floor if
 * that is further. */
static int pgreader_run_scan(struct pgreader_job *job, int64_t *point, uint32_t *count)
{
  int rv = pgreader_run_limits(job, point, count);
  if (rv == 0 && job->rt.floor > *point) {
    *point = job->rt.floor;
  }
  return rv;
}

int pgreader_delete_below(PGconn *conn, const char *topic_id, const char *partition, int64_t offset,
                          uint64_t prefix_before, struct pgreader_retained *out, char *err,
                          size_t errlen)
{
  char off[24];
  snprintf(off, sizeof off, "%" PRId64, offset);
  const char *values[3] = {topic_id, partition, off};
  const char *what = "deleting rows below the start";
  PGresult *res =
      PQexecParams(conn,
                   "WITH d AS (DELETE FROM cairn_batches WHERE topic_id = $1 AND partition = $2"
                   " AND last_offset < $3 RETURNING base_offset, raft_index, length(batch) AS len)"
                   " SELECT count(*), coalesce(sum(len), 0),"
                   " (SELECT raft_index FROM d ORDER BY base_offset DESC LIMIT 1) FROM d",
                   3, NULL, values, NULL, NULL, 0);
  bool ok = PQresultStatus(res) == PGRES_TUPLES_OK;
  memset(out, 0, sizeof *out);
  out->start = offset;
  out->prefix_index = prefix_before;
  if (ok) {
    out->count = (uint32_t)pgreader_get_i64(res, 0, 0);
    out->bytes = (uint64_t)pgreader_get_i64(res, 0, 1);
    if (out->count > 0) {
      out->prefix_index = (uint64_t)pgreader_get_i64(res, 0, 2);
    }
    PQclear(res);
    char idx[24];
    snprintf(idx, sizeof idx, "%" PRIu64, out->prefix_index);
    const char *v4[4] = {topic_id, partition, off, idx};
    what = "moving the log start";
    res = PQexecParams(conn,
                       "UPDATE cairn_partitions SET start_offset = $3, prefix_index = $4"
                       " WHERE topic_id = $1 AND partition = $2",
                       4, NULL, v4, NULL, NULL, 0);
    ok = PQresultStatus(res) == PGRES_COMMAND_OK;
  }
  PQclear(res);
  if (!ok) {
    char msg[200];
    snprintf(msg, sizeof msg, "%s", PQerrorMessage(conn));
    msg[strcspn(msg, "\n")] = '\0';
    snprintf(err, errlen, "postgresql: %s: %s", what, msg);
    return CAIRN_EDATABASE;
  }
  return 0;
}

static int pgreader_cmd(struct pgreader_job *job, const char *sql)
{
  PGresult *res = pgreader_exec(job, sql, sql, 0, NULL, 0);
  PQclear(res);
  return res != NULL ? 0 : CAIRN_EDATABASE;
}

/* RETAIN: the scan again (with the caller's bound), then the delete and
 * the new start, committed together. */
static int pgreader_run_retain(struct pgreader_job *job)
{
  int rv = pgreader_cmd(job, "BEGIN");
  int64_t point = job->rt.start;
  uint32_t count = 0;
  if (rv == 0) {
    rv = pgreader_run_scan(job, &point, &count);
  }
  job->retained.start = job->rt.start;
  if (rv == 0 && point > job->rt.start) {
    rv = pgreader_delete_below(job->r->conn, job->r->topic_id, job->r->partition, point, 0,
                               &job->retained, job->errmsg, sizeof job->errmsg);
  }
  if (rv == 0) {
    rv = pgreader_cmd(job, "COMMIT");
  }
  if (rv != 0 && PQstatus(job->r->conn) == CONNECTION_OK) {
    PQclear(PQexec(job->r->conn, "ROLLBACK"));
  }
  return rv;
}

static int pgreader_run_kind(struct pgreader_job *job)
{
  switch (job->kind) {
  case PGREADER_READ:
    return pgreader_run_read(job);
  case PGREADER_LOOKUP:
    return pgreader_run_lookup(job);
  case PGREADER_SCAN: {
    uint32_t count;
    return pgreader_run_scan(job, &job->value, &count);
  }
  case PGREADER_RETAIN:
    return pgreader_run_retain(job);
  }
  return CAIRN_EINVAL;
}

/* Connects the reader, and makes the handle pgreader_stop cancels with. */
static int pgreader_connect(struct pgreader_job *job)
{
  struct pgreader *r = job->r;
  pthread_mutex_lock(&r->cancel_mu);
  PQfreeCancel(r->cancel);
  r->cancel = NULL;
  pthread_mutex_unlock(&r->cancel_mu);
  PQfinish(r->conn);
  r->conn = NULL;
  int rv = pgstore_schema_connect(r->conninfo, r->password_file, PGREADER_CONNECT_MS, &r->conn,
                                  job->errmsg, sizeof job->errmsg);
  if (rv == 0) {
    pthread_mutex_lock(&r->cancel_mu);
    r->cancel = PQgetCancel(r->conn);
    pthread_mutex_unlock(&r->cancel_mu);
  }
  return rv;
}

/* Runs the job; a connection found lost at the first statement (dropped
 * while idle: nothing was sent) is made again once. */
static int pgreader_run(struct pgreader_job *job)
{
  struct pgreader *r = job->r;
  if (r->conn == NULL || PQstatus(r->conn) != CONNECTION_OK) {
    int rv = pgreader_connect(job);
    if (rv != 0) {
      return rv;
    }
  }
  int rv = pgreader_run_kind(job);
  if (rv == CAIRN_EDATABASE && !job->sent &&
      (job->lost || pgstore_schema_conn_lost(r->conn, NULL))) {
    rv = pgreader_connect(job);
    if (rv == 0) {
      rv = pgreader_run_kind(job);
    }
  }
  return rv;
}

static void pgreader_work(uv_work_t *req)
{
  struct pgreader_job *job = req->data;
  int rv = pgreader_run(job);
  pthread_mutex_lock(&job->mu);
  job->status = rv;
  job->finished = true;
  pthread_cond_signal(&job->cond);
  pthread_mutex_unlock(&job->mu);
}

/* ---- delivering (loop) ---- */

static void pgreader_job_free(struct pgreader_job *job)
{
  pthread_mutex_destroy(&job->mu);
  pthread_cond_destroy(&job->cond);
  free(job->buf);
  free(job->rows);
  free(job);
}

static void pgreader_keep(struct pgreader *r, const struct pgreader_job *job)
{
  struct pgreader_answer *a = &r->answers[job->kind];
  memset(a, 0, sizeof *a);
  a->set = true;
  a->gen = job->gen;
  a->status = job->status;
  a->key = job->kind == PGREADER_READ ? job->offset : job->timestamp;
  a->key2 = job->start;
  a->found = job->found;
  a->value = job->value;
  a->scanned = job->committed;
  snprintf(a->errmsg, sizeof a->errmsg, "%s", job->errmsg);
}

static void pgreader_deliver(struct pgreader *r, struct pgreader_job *job)
{
  if (job->delivered) {
    return;
  }
  job->delivered = true;
  if (r->job == job) {
    r->job = NULL;
    r->pool->running--; /* its worker is done: the slot is free */
  }
  if (r->freed) {
    return;
  }
  bool current = job->gen == r->gen;
  if (job->kind == PGREADER_READ && job->status == 0 && current) {
    pgreader_cache_drop(r);
    r->cache = job->buf;
    r->rows = job->rows;
    r->nrows = job->nrows;
    r->cache_gen = job->gen;
    r->cache_truncated = job->truncated;
    job->buf = NULL;
    job->rows = NULL;
  } else if (job->kind != PGREADER_RETAIN) {
    pgreader_keep(r, job);
  }
  if (r->on_done != NULL) {
    bool deleted = job->kind == PGREADER_RETAIN && job->status == 0 &&
                   (job->retained.count > 0 || job->retained.start > job->rt.start);
    r->on_done(r->arg, job->kind, job->status, job->errmsg, deleted ? &job->retained : NULL);
  }
}

/* A slot of the loop's pool is free: every starved reader's owner asks
 * again (the first to ask gets it; the others starve again). */
static void pgreader_pool_wake(struct pgreader_pool *pool)
{
  struct pgreader *list = pool->starved;
  pool->starved = NULL;
  while (list != NULL) {
    struct pgreader *r = list;
    list = r->next_starved;
    r->next_starved = NULL;
    r->starved = false;
    if (!r->freed && r->on_done != NULL) {
      r->on_done(r->arg, PGREADER_READ, CAIRN_EPENDING, "", NULL);
    }
  }
}

static void pgreader_after_work(uv_work_t *req, int status)
{
  struct pgreader_job *job = req->data;
  struct pgreader *r = job->r;
  struct pgreader_pool *pool = r->pool;
  (void)status; /* never canceled: pgreader_stop and free wait for it */
  pgreader_deliver(r, job);
  pgreader_job_free(job);
  r->works--;
  pgreader_pool_wake(pool); /* before r may go: r holds a reference to the pool */
  if (r->freed && r->works == 0) {
    pgreader_free_now(r);
  }
}

/* Starts job (consumed) unless one runs. Without a loop it runs now and
 * is delivered before this returns 0; with one, CAIRN_EPENDING. */
static int pgreader_start(struct pgreader *r, struct pgreader_job *job)
{
  if (r->job != NULL) {
    free(job);
    return CAIRN_EPENDING;
  }
  if (r->pool != NULL && !r->inline_jobs && r->pool->running >= PGREADER_MAX_JOBS) {
    free(job);
    if (!r->starved) {
      r->starved = true;
      r->next_starved = r->pool->starved;
      r->pool->starved = r;
    }
    return CAIRN_EPENDING;
  }
  job->r = r;
  job->gen = r->gen;
  job->work.data = job;
  pthread_mutex_init(&job->mu, NULL);
  pthread_cond_init(&job->cond, NULL);
  if (r->loop == NULL || r->inline_jobs) {
    job->status = pgreader_run(job);
    job->finished = true;
    pgreader_deliver(r, job);
    pgreader_job_free(job);
    return 0;
  }
  int rv = uv_queue_work(r->loop, &job->work, pgreader_work, pgreader_after_work);
  if (rv != 0) {
    pgreader_job_free(job);
    return rv;
  }
  r->job = job;
  r->works++;
  r->pool->running++;
  return CAIRN_EPENDING;
}

static struct pgreader_job *pgreader_job_new(enum pgreader_job_kind kind)
{
  struct pgreader_job *job = calloc(1, sizeof *job);
  if (job != NULL) {
    job->kind = kind;
  }
  return job;
}

/* The kept answer of kind if it is for (key, key2) and current: taken. */
static struct pgreader_answer *pgreader_take(struct pgreader *r, enum pgreader_job_kind kind,
                                             int64_t key, int64_t key2)
{
  struct pgreader_answer *a = &r->answers[kind];
  if (!a->set || a->gen != r->gen || a->key != key || a->key2 != key2) {
    return NULL;
  }
  a->set = false;
  return a;
}

static int pgreader_fail(char *err, size_t errlen, const struct pgreader_answer *a)
{
  snprintf(err, errlen, "%s", a->errmsg);
  return a->status;
}

/* ---- the calls ---- */

/* The cache's rows from the one holding offset, within the bounds.
 * Returns 0, or 1 when rows the cache lacks belong in the read (a miss;
 * a load from offset itself answers, unless rows keep being committed
 * and leaving the tail faster than a load runs). */
static int pgreader_from_cache(struct pgreader *r, int64_t offset, size_t max_bytes, int64_t end,
                               struct pgreader_slice *out)
{
  size_t i = 0;
  while (r->rows[i].next <= offset) {
    i++;
  }
  size_t j = i;
  size_t bytes = 0;
  while (j < r->nrows && r->rows[j].next <= end &&
         pgreader_fits(j - i, bytes, r->rows[j].len, max_bytes)) {
    bytes += r->rows[j].len;
    j++;
  }
  /* The cache ran out before the bounds and before end: the rows after
   * it belong in this read. A miss, unless the load that filled the cache
   * started at this read's row and stopped at its own bounds (a cache
   * smaller than a read): then the read is as long as a load gives. A
   * load that reached the rows' end is stale here (rows were committed
   * and left the tail since): a new load sees them. */
  bool bounded = j - i >= PGREADER_MAX_BATCHES || bytes >= max_bytes || bytes >= PGREADER_MAX_BYTES;
  if (j == r->nrows && r->rows[j - 1].next < end && !bounded && !(r->cache_truncated && i == 0)) {
    return 1;
  }
  if (j == i) {
    return CAIRN_ECORRUPT; /* the row holding offset goes past end */
  }
  out->data = r->cache + r->rows[i].pos;
  out->len = bytes;
  out->count = j - i;
  out->first = r->rows[i].base;
  out->next = r->rows[j - 1].next;
  return 0;
}

int pgreader_read(struct pgreader *r, int64_t offset, size_t max_bytes, int64_t end,
                  struct pgreader_slice *out, char *err, size_t errlen)
{
  for (int tries = 0; tries < 2; tries++) {
    if (r->nrows > 0 && r->cache_gen == r->gen && r->rows[0].base <= offset &&
        offset < r->rows[r->nrows - 1].next) {
      int rv = pgreader_from_cache(r, offset, max_bytes, end, out);
      if (rv < 0) {
        snprintf(err, errlen, "read at %" PRId64 ": a row goes past %" PRId64, offset, end);
      }
      if (rv <= 0) {
        return rv;
      }
    }
    struct pgreader_answer *a = pgreader_take(r, PGREADER_READ, offset, 0);
    if (a != NULL && a->status != 0) {
      return pgreader_fail(err, errlen, a);
    }
    struct pgreader_job *job = pgreader_job_new(PGREADER_READ);
    if (job == NULL) {
      snprintf(err, errlen, "read at %" PRId64 ": out of memory", offset);
      return CAIRN_ENOMEM;
    }
    job->offset = offset;
    int rv = pgreader_start(r, job);
    if (rv != 0) {
      return rv; /* CAIRN_EPENDING (or a failure to queue) */
    }
  }
  snprintf(err, errlen, "read at %" PRId64 ": the rows changed while reading", offset);
  return CAIRN_EDATABASE;
}

int pgreader_lookup_time(struct pgreader *r, int64_t timestamp, int64_t start, int64_t committed,
                         int64_t *offset, int64_t *scanned, char *err, size_t errlen)
{
  for (int tries = 0; tries < 2; tries++) {
    struct pgreader_answer *a = pgreader_take(r, PGREADER_LOOKUP, timestamp, start);
    if (a != NULL) {
      if (a->status != 0) {
        return pgreader_fail(err, errlen, a);
      }
      *offset = a->value;
      *scanned = a->scanned;
      return a->found ? 1 : 0;
    }
    struct pgreader_job *job = pgreader_job_new(PGREADER_LOOKUP);
    if (job == NULL) {
      snprintf(err, errlen, "lookup: out of memory");
      return CAIRN_ENOMEM;
    }
    job->timestamp = timestamp;
    job->start = start;
    job->committed = committed;
    int rv = pgreader_start(r, job);
    if (rv != 0) {
      return rv;
    }
  }
  snprintf(err, errlen, "lookup: no answer");
  return CAIRN_EDATABASE;
}

int pgreader_scan(struct pgreader *r, const struct pgreader_retention *rt, int64_t *point,
                  char *err, size_t errlen)
{
  for (int tries = 0; tries < 2; tries++) {
    struct pgreader_answer *a = pgreader_take(r, PGREADER_SCAN, 0, 0);
    if (a != NULL) {
      if (a->status != 0) {
        return pgreader_fail(err, errlen, a);
      }
      *point = a->value;
      return 0;
    }
    struct pgreader_job *job = pgreader_job_new(PGREADER_SCAN);
    if (job == NULL) {
      snprintf(err, errlen, "retention: out of memory");
      return CAIRN_ENOMEM;
    }
    job->rt = *rt;
    int rv = pgreader_start(r, job);
    if (rv != 0) {
      return rv;
    }
  }
  snprintf(err, errlen, "retention: no answer");
  return CAIRN_EDATABASE;
}

int pgreader_retain(struct pgreader *r, const struct pgreader_retention *rt)
{
  struct pgreader_job *job = pgreader_job_new(PGREADER_RETAIN);
  if (job == NULL) {
    return CAIRN_ENOMEM;
  }
  job->rt = *rt;
  return pgreader_start(r, job);
}

void pgreader_invalidate(struct pgreader *r)
{
  r->gen++;
  pgreader_cache_drop(r);
}

static void pgreader_cancel(struct pgreader *r)
{
  pthread_mutex_lock(&r->cancel_mu);
  if (r->cancel != NULL) {
    char buf[256];
    (void)PQcancel(r->cancel, buf, sizeof buf); /* best effort: the job ends either way */
  }
  pthread_mutex_unlock(&r->cancel_mu);
}

/* Waits for the worker of the job in flight and delivers its outcome;
 * with cancel, sends PQcancel every PGREADER_CANCEL_MS meanwhile (a
 * cancel that arrives between two statements of a job cancels nothing). */
static void pgreader_wait_job(struct pgreader *r, bool cancel)
{
  struct pgreader_job *job = r->job;
  if (job == NULL) {
    return;
  }
  pthread_mutex_lock(&job->mu);
  while (!job->finished) {
    if (!cancel) {
      pthread_cond_wait(&job->cond, &job->mu);
      continue;
    }
    pthread_mutex_unlock(&job->mu);
    pgreader_cancel(r);
    pthread_mutex_lock(&job->mu);
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_nsec += PGREADER_CANCEL_MS * 1000000L;
    if (until.tv_nsec >= 1000000000L) {
      until.tv_sec++;
      until.tv_nsec -= 1000000000L;
    }
    if (!job->finished) {
      (void)pthread_cond_timedwait(&job->cond, &job->mu, &until);
    }
  }
  pthread_mutex_unlock(&job->mu);
  pgreader_deliver(r, job); /* the after-work then only frees it */
}

void pgreader_stop(struct pgreader *r)
{
  pgreader_wait_job(r, true);
}

void pgreader_wait(struct pgreader *r)
{
  pgreader_wait_job(r, false);
}

void pgreader_set_inline(struct pgreader *r, bool on)
{
  if (on) {
    pgreader_wait(r); /* the connection is then the caller's */
  }
  r->inline_jobs = on;
}

bool pgreader_busy(const struct pgreader *r)
{
  return r->job != NULL;
}

void pgreader_free(struct pgreader *r)
{
  if (r == NULL) {
    return;
  }
  if (r->works == 0) {
    pgreader_free_now(r);
    return;
  }
  r->freed = true; /* the last after-work frees it */
  pgreader_cancel(r);
}
