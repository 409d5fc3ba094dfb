/* pgwriter.c - the node's write-behind of pgstore batches (pgwriter.h):
 * per loop turn one transaction with one binary COPY for every member's
 * new batches, run on the thread pool.
 *
 * Invariants:
 *   - at most one job is unfinished (w->job: collected, its worker not yet
 *     delivered); a member is inflight exactly while it has rows in it;
 *   - a job's outcome is delivered once, on the loop, by its after-work
 *     (nothing waits for a job: a member that leaves is taken out of it);
 *   - the writer's connection is touched only by the worker of w->job, or
 *     by nobody;
 *   - the writer is freed only when unreferenced, its idle handle closed
 *     and no after-work queued. */
#include "storage/pgwriter.h"

#include "common/err.h"
#include "storage/pgstore_schema.h"

#include <libpq-fe.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PGWRITER_ERRMSG_SIZE 256
#define PGWRITER_COPY_CHUNK (1u << 20) /* bytes per PQputCopyData */

struct pgwriter {
  uv_loop_t *loop;
  char *conninfo;
  char *password_file; /* NULL: libpq's own */
  unsigned refs;
  uv_idle_t idle; /* started while members are ready and no job runs */
  bool idle_open;
  unsigned works; /* after-works queued */
  PGconn *conn;   /* the worker's; NULL until the first job connects */
  struct pgwriter_member *ready; /* members with batches to send */
  struct pgwriter_job *job;      /* unfinished job, or NULL */
  uint64_t commits;
  struct pgwriter *next; /* in the registry */
};

struct pgwriter_job {
  uv_work_t work;
  struct pgwriter *w;
  uint8_t *copy; /* the COPY data: header, tuples, trailer */
  size_t len;
  size_t cap;
  size_t rows;
  struct pgwriter_member **members; /* with rows in this job */
  size_t nmembers;
  int status;
  char errmsg[PGWRITER_ERRMSG_SIZE];
};

/* Writers by (loop, database); loops may live on several threads. */
static pthread_mutex_t pgwriter_registry_mu = PTHREAD_MUTEX_INITIALIZER;
static struct pgwriter *pgwriter_registry;

static bool pgwriter_same(const char *a, const char *b)
{
  return (a == NULL && b == NULL) || (a != NULL && b != NULL && strcmp(a, b) == 0);
}

static void pgwriter_free(struct pgwriter *w)
{
  PQfinish(w->conn);
  free(w->conninfo);
  free(w->password_file);
  free(w);
}

static void pgwriter_unlink(struct pgwriter *w)
{
  pthread_mutex_lock(&pgwriter_registry_mu);
  for (struct pgwriter **p = &pgwriter_registry; *p != NULL; p = &(*p)->next) {
    if (*p == w) {
      *p = w->next;
      break;
    }
  }
  pthread_mutex_unlock(&pgwriter_registry_mu);
}

static void pgwriter_maybe_free(struct pgwriter *w)
{
  if (w->refs == 0 && !w->idle_open && w->works == 0) {
    pgwriter_free(w);
  }
}

static void pgwriter_on_idle_closed(uv_handle_t *h)
{
  struct pgwriter *w = h->data;
  w->idle_open = false;
  pgwriter_maybe_free(w);
}

static void pgwriter_on_idle(uv_idle_t *h);

int pgwriter_acquire(uv_loop_t *loop, const char *conninfo, const char *password_file,
                     struct pgwriter **out)
{
  pthread_mutex_lock(&pgwriter_registry_mu);
  for (struct pgwriter *w = pgwriter_registry; w != NULL; w = w->next) {
    if (w->loop == loop && pgwriter_same(w->conninfo, conninfo) &&
        pgwriter_same(w->password_file, password_file)) {
      w->refs++;
      pthread_mutex_unlock(&pgwriter_registry_mu);
      *out = w;
      return 0;
    }
  }
  pthread_mutex_unlock(&pgwriter_registry_mu);
  struct pgwriter *w = calloc(1, sizeof *w);
  if (w == NULL) {
    return CAIRN_ENOMEM;
  }
  w->loop = loop;
  w->conninfo = strdup(conninfo);
  w->password_file = password_file != NULL ? strdup(password_file) : NULL;
  if (w->conninfo == NULL || (password_file != NULL && w->password_file == NULL)) {
    pgwriter_free(w);
    return CAIRN_ENOMEM;
  }
  int rv = uv_idle_init(loop, &w->idle);
  if (rv != 0) {
    pgwriter_free(w);
    return rv;
  }
  w->idle.data = w;
  w->idle_open = true;
  w->refs = 1;
  pthread_mutex_lock(&pgwriter_registry_mu);
  w->next = pgwriter_registry;
  pgwriter_registry = w;
  pthread_mutex_unlock(&pgwriter_registry_mu);
  *out = w;
  return 0;
}

void pgwriter_release(struct pgwriter *w)
{
  if (--w->refs > 0) {
    return;
  }
  pgwriter_unlink(w);
  uv_close((uv_handle_t *)&w->idle, pgwriter_on_idle_closed);
}

void pgwriter_join(struct pgwriter *w, struct pgwriter_member *m,
                   const struct pgwriter_member_ops *ops)
{
  (void)w;
  memset(m, 0, sizeof *m);
  m->ops = ops;
}

void pgwriter_ready(struct pgwriter *w, struct pgwriter_member *m)
{
  if (!m->ready) {
    m->ready = true;
    m->next_ready = w->ready;
    w->ready = m;
  }
  if (w->job == NULL) {
    (void)uv_idle_start(&w->idle, pgwriter_on_idle); /* fails only on a closing handle */
  }
}

uint64_t pgwriter_commits(const struct pgwriter *w)
{
  return w->commits;
}

/* ---- the job's COPY data ---- */

static int pgwriter_job_reserve(struct pgwriter_job *job, size_t more)
{
  if (job->len + more <= job->cap) {
    return 0;
  }
  size_t cap = job->cap ? job->cap : 64 * 1024;
  while (cap < job->len + more) {
    cap *= 2;
  }
  uint8_t *grown = realloc(job->copy, cap);
  if (grown == NULL) {
    return CAIRN_ENOMEM;
  }
  job->copy = grown;
  job->cap = cap;
  return 0;
}

/* Big-endian, as PostgreSQL's binary COPY wants. */
static void pgwriter_put(struct pgwriter_job *job, uint64_t v, int bytes)
{
  for (int i = bytes - 1; i >= 0; i--) {
    job->copy[job->len++] = (uint8_t)(v >> (8 * i));
  }
}

/* A field: its length, then its bytes. */
static void pgwriter_put_field(struct pgwriter_job *job, uint64_t v, int bytes)
{
  pgwriter_put(job, (uint64_t)bytes, 4);
  pgwriter_put(job, v, bytes);
}

int pgwriter_job_add(struct pgwriter_job *job, int64_t topic_id, int32_t partition,
                     int64_t base_offset, int64_t last_offset, int64_t max_timestamp,
                     uint64_t raft_index, const uint8_t *data, size_t len)
{
  if (len > INT32_MAX || pgwriter_job_reserve(job, 2 + 7 * 4 + 5 * 8 + 4 + len) != 0) {
    return CAIRN_ENOMEM;
  }
  pgwriter_put(job, 7, 2); /* fields, in the COPY's column order */
  pgwriter_put_field(job, (uint64_t)topic_id, 8);
  pgwriter_put_field(job, (uint32_t)partition, 4);
  pgwriter_put_field(job, (uint64_t)base_offset, 8);
  pgwriter_put_field(job, (uint64_t)last_offset, 8);
  pgwriter_put_field(job, (uint64_t)max_timestamp, 8);
  pgwriter_put_field(job, raft_index, 8);
  pgwriter_put(job, len, 4);
  memcpy(job->copy + job->len, data, len);
  job->len += len;
  job->rows++;
  return 0;
}

/* The binary COPY header: signature, flags, header extension length. */
static int pgwriter_job_start(struct pgwriter_job *job)
{
  static const uint8_t sig[11] = {'P', 'G', 'C', 'O', 'P', 'Y', '\n', 0xff, '\r', '\n', 0};
  if (pgwriter_job_reserve(job, sizeof sig + 8) != 0) {
    return CAIRN_ENOMEM;
  }
  memcpy(job->copy, sig, sizeof sig);
  job->len = sizeof sig;
  pgwriter_put(job, 0, 4);
  pgwriter_put(job, 0, 4);
  return 0;
}

static void pgwriter_job_free(struct pgwriter_job *job)
{
  free(job->copy);
  free(job->members);
  free(job);
}

/* ---- the worker ---- */

static int pgwriter_job_fail(struct pgwriter_job *job, const char *what)
{
  char msg[200];
  snprintf(msg, sizeof msg, "%s", PQerrorMessage(job->w->conn));
  msg[strcspn(msg, "\n")] = '\0';
  snprintf(job->errmsg, sizeof job->errmsg, "postgresql (write-behind): %s: %s", what, msg);
  return CAIRN_EDATABASE;
}

static int pgwriter_cmd(struct pgwriter_job *job, const char *sql)
{
  PGresult *res = PQexec(job->w->conn, sql);
  bool ok = PQresultStatus(res) == PGRES_COMMAND_OK;
  PQclear(res);
  return ok ? 0 : pgwriter_job_fail(job, sql);
}

static int pgwriter_connect(struct pgwriter_job *job)
{
  struct pgwriter *w = job->w;
  PQfinish(w->conn);
  w->conn = NULL;
  return pgstore_schema_connect(w->conninfo, w->password_file, PGWRITER_CONNECT_MS, &w->conn,
                                job->errmsg, sizeof job->errmsg);
}

/* BEGIN, on a connection made again if it dropped while idle (nothing
 * was sent on it since the last job ended). */
static int pgwriter_begin(struct pgwriter_job *job)
{
  struct pgwriter *w = job->w;
  if (w->conn == NULL || PQstatus(w->conn) != CONNECTION_OK) {
    int rv = pgwriter_connect(job);
    if (rv != 0) {
      return rv;
    }
  }
  PGresult *res = PQexec(w->conn, "BEGIN");
  bool ok = PQresultStatus(res) == PGRES_COMMAND_OK;
  bool lost = !ok && pgstore_schema_conn_lost(w->conn, res);
  PQclear(res);
  if (ok) {
    return 0;
  }
  if (!lost) {
    return pgwriter_job_fail(job, "BEGIN");
  }
  int rv = pgwriter_connect(job);
  if (rv == 0) {
    rv = pgwriter_cmd(job, "BEGIN");
  }
  return rv;
}

static int pgwriter_copy(struct pgwriter_job *job)
{
  PGconn *conn = job->w->conn;
  PGresult *res = PQexec(conn, "COPY cairn_batches (topic_id, partition, base_offset, last_offset,"
                               " max_timestamp, raft_index, batch) FROM STDIN (FORMAT binary)");
  bool ok = PQresultStatus(res) == PGRES_COPY_IN;
  PQclear(res);
  if (!ok) {
    return pgwriter_job_fail(job, "COPY");
  }
  for (size_t pos = 0; ok && pos < job->len; pos += PGWRITER_COPY_CHUNK) {
    size_t n = job->len - pos < PGWRITER_COPY_CHUNK ? job->len - pos : PGWRITER_COPY_CHUNK;
    ok = PQputCopyData(conn, (const char *)job->copy + pos, (int)n) == 1;
  }
  ok = PQputCopyEnd(conn, ok ? NULL : "cairn: sending the rows failed") == 1 && ok;
  int rv = 0;
  while ((res = PQgetResult(conn)) != NULL) {
    if (PQresultStatus(res) != PGRES_COMMAND_OK) {
      ok = false;
    }
    PQclear(res);
  }
  if (!ok) {
    rv = pgwriter_job_fail(job, "COPY data");
  }
  return rv;
}

/* BEGIN; COPY. Returns 0 with the transaction open, or a negative code
 * with *lost set if the connection was lost after BEGIN (the server then
 * rolled the transaction back: nothing of it committed). */
static int pgwriter_send(struct pgwriter_job *job, bool *lost)
{
  *lost = false;
  int rv = pgwriter_begin(job);
  if (rv != 0) {
    return rv; /* not connected, or BEGIN refused: no second try */
  }
  rv = pgwriter_copy(job);
  *lost = rv != 0 && PQstatus(job->w->conn) == CONNECTION_BAD;
  return rv;
}

static int pgwriter_run(struct pgwriter_job *job)
{
  bool lost;
  int rv = pgwriter_send(job, &lost);
  if (rv != 0 && lost) {
    /* Dropped before COMMIT was sent (a backend terminated, a proxy or a
     * failover cutting connections): the transaction died with it, so
     * sending it once more on a new connection cannot write a row twice. */
    rv = pgwriter_send(job, &lost);
  }
  if (rv == 0) {
    /* A COMMIT whose answer is lost is in doubt: reported as failed, and
     * each member's revive reads back what PostgreSQL holds. */
    rv = pgwriter_cmd(job, "COMMIT");
  }
  if (rv != 0 && job->w->conn != NULL && PQstatus(job->w->conn) == CONNECTION_OK) {
    PQclear(PQexec(job->w->conn, "ROLLBACK"));
  }
  return rv;
}

static void pgwriter_work(uv_work_t *req)
{
  struct pgwriter_job *job = req->data;
  job->status = pgwriter_run(job); /* read by the after-work, on the loop */
}

/* ---- delivering ---- */

static void pgwriter_deliver(struct pgwriter *w, struct pgwriter_job *job)
{
  w->job = NULL;
  if (job->status == 0) {
    w->commits++;
  }
  for (size_t i = 0; i < job->nmembers; i++) {
    struct pgwriter_member *m = job->members[i];
    if (m == NULL) {
      continue; /* it left while the job ran (pgwriter_leave) */
    }
    m->inflight = false;
    m->ops->done(m, job->status, job->errmsg);
  }
  if (w->ready != NULL && w->refs > 0) {
    (void)uv_idle_start(&w->idle, pgwriter_on_idle); /* the next turn's job */
  }
}

static void pgwriter_after_work(uv_work_t *req, int status)
{
  struct pgwriter_job *job = req->data;
  struct pgwriter *w = job->w;
  (void)status; /* a job is never canceled */
  pgwriter_deliver(w, job);
  pgwriter_job_free(job);
  w->works--;
  pgwriter_maybe_free(w);
}

void pgwriter_leave(struct pgwriter *w, struct pgwriter_member *m)
{
  struct pgwriter_job *job = w->job;
  if (job != NULL && m->inflight) {
    /* The job goes on without waiting: its rows commit or not, and m,
     * about to be freed, is told neither. */
    for (size_t i = 0; i < job->nmembers; i++) {
      if (job->members[i] == m) {
        job->members[i] = NULL;
      }
    }
    m->inflight = false;
  }
  for (struct pgwriter_member **p = &w->ready; *p != NULL; p = &(*p)->next_ready) {
    if (*p == m) {
      *p = m->next_ready;
      break;
    }
  }
  m->ready = false;
}

/* ---- gathering, once per loop turn ---- */

static int pgwriter_job_new(struct pgwriter *w, struct pgwriter_job **out)
{
  struct pgwriter_job *job = calloc(1, sizeof *job);
  if (job == NULL) {
    return CAIRN_ENOMEM;
  }
  job->w = w;
  job->work.data = job;
  if (pgwriter_job_start(job) != 0) {
    pgwriter_job_free(job);
    return CAIRN_ENOMEM;
  }
  *out = job;
  return 0;
}

/* Asks every ready member for its batches; a member whose collect fails
 * is told at once. Returns whether any member is in the job. */
static bool pgwriter_collect(struct pgwriter *w, struct pgwriter_job *job, size_t nready)
{
  job->members = calloc(nready, sizeof *job->members);
  struct pgwriter_member *m = w->ready;
  w->ready = NULL;
  while (m != NULL) {
    struct pgwriter_member *next = m->next_ready;
    m->ready = false;
    m->next_ready = NULL;
    size_t rows = job->rows;
    int rv = job->members != NULL ? m->ops->collect(m, job) : CAIRN_ENOMEM;
    if (rv != 0) {
      m->ops->done(m, rv, "write-behind: gathering the batches: out of memory");
    } else if (job->rows > rows) {
      m->inflight = true;
      job->members[job->nmembers++] = m;
    }
    m = next;
  }
  return job->nmembers > 0;
}

static void pgwriter_on_idle(uv_idle_t *h)
{
  struct pgwriter *w = h->data;
  uv_idle_stop(h);
  if (w->job != NULL || w->ready == NULL) {
    return; /* the job in flight's delivery starts the next */
  }
  size_t nready = 0;
  for (struct pgwriter_member *m = w->ready; m != NULL; m = m->next_ready) {
    nready++;
  }
  struct pgwriter_job *job;
  if (pgwriter_job_new(w, &job) != 0) {
    (void)uv_idle_start(h, pgwriter_on_idle); /* memory may come back; members keep their batches */
    return;
  }
  if (!pgwriter_collect(w, job, nready) || pgwriter_job_reserve(job, 2) != 0) {
    for (size_t i = 0; i < job->nmembers; i++) {
      job->members[i]->inflight = false;
      job->members[i]->ops->done(job->members[i], CAIRN_ENOMEM, "write-behind: out of memory");
    }
    pgwriter_job_free(job);
    return;
  }
  pgwriter_put(job, 0xffff, 2); /* the trailer: a field count of -1 */
  int rv = uv_queue_work(w->loop, &job->work, pgwriter_work, pgwriter_after_work);
  if (rv != 0) {
    job->status = rv;
    snprintf(job->errmsg, sizeof job->errmsg, "write-behind: queueing the job: %s",
             uv_strerror(rv));
    pgwriter_deliver(w, job);
    pgwriter_job_free(job);
    return;
  }
  w->job = job;
  w->works++;
}
