/* pgstore.c - the PostgreSQL partition store (pgstore.h): rows of
 * cairn_batches behind the store interface (store.h), with a bounded tail
 * of the newest batches in memory for reads.
 *
 * Invariants:
 *   - the rows of (topic id, partition), read inside the store's own
 *     transaction, are the batches [first held, next) back to back; the
 *     partition row holds start_saved (possibly inside the first batch)
 *     and prefix_index (the Raft index covered by the batches deleted from
 *     the front);
 *   - start_saved <= start: written behind, a delete_before within the
 *     log (a DeleteRecords applied) moves start in memory only, and the
 *     rows go at the owner's next retention pass, which moves start_saved
 *     (store_info's saved_start_offset; pgstore.h);
 *   - a row's raft_index is the Raft index wholly applied once the batch is
 *     in (its entry's index on the entry's last batch, the previous entry's
 *     otherwise), as memlog's covered_index;
 *   - without a writer, in_tx is false exactly when everything is
 *     committed, and then durable_offset == next (with one, the store's
 *     own statements run off the loop, in a job's shadow: a settle, a
 *     truncation, a deletion);
 *   - tail holds the newest batches, contiguous and ending at next, at most
 *     tail_max bytes; it may be empty;
 *   - fatal is sticky: after a failed statement nothing more is written;
 *   - the tail holds every batch at or above durable_offset (it trims
 *     only committed batches: the reader's connection sees no other);
 *   - written behind (writer != NULL): the batches
 *     [durable_offset, sent_offset) are in the writer's job in flight
 *     (member.inflight) or in a settle or op job (settling) and
 *     [sent_offset, next) wait for the next job; pending_bytes counts the
 *     bytes of [durable_offset, next);
 *   - while settling, conn belongs to the job (its worker's shadow): the
 *     loop runs no statement on it, and the writer collects nothing of
 *     the store; op is set while a truncate or delete_before job runs,
 *     and then nothing is appended.
 */
#include "storage/pgstore.h"

#include "common/err.h"
#include "format/batch.h"
#include "storage/pgreader.h"
#include "storage/pgstore_schema.h"
#include "storage/pgwriter.h"

#include <errno.h>
#include <inttypes.h>
#include <libpq-fe.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* How long one connection of a reconnect on the owner's thread may take
 * (pgstore_reconnect; at most PGSTORE_RECONNECT_TRIES of them) before the
 * store latches fatal and its owner revives it off the thread. */
#define PGSTORE_RECONNECT_MS 1000
/* How many new connections a reconnect makes when each is lost at once;
 * PGSTORE_LOST is pgstore_check_end's answer for such a loss (not an
 * error code: it never leaves pgstore_reconnect). */
#define PGSTORE_RECONNECT_TRIES 3
#define PGSTORE_LOST 1

/* A revive's write probe (pgstore_probe): what it writes into
 * cairn_batches' tablespace, in rows of PGSTORE_PROBE_ROW bytes, and how
 * long it waits for cairn_batches' write lock. 256 kB is more than what
 * PostgreSQL leaves free when it fails to extend a file (it extends by one
 * 8 kB page, or a few under contention), so a disk still full fails the
 * probe every time. */
#define PGSTORE_PROBE_BYTES (256 * 1024)
#define PGSTORE_PROBE_ROW 1900
#define PGSTORE_PROBE_LOCK_MS 2000

struct pgstore_batch {
  int64_t base;
  int64_t next;
  int64_t max_ts;   /* the row's max_timestamp */
  uint64_t covered; /* the row's raft_index */
  size_t len;
  uint8_t data[]; /* the stamped batch */
};

struct pgstore {
  struct store s; /* first: the store interface casts to it */
  PGconn *conn;
  char topic_id[16]; /* as text, the parameters every statement takes */
  char partition[16];
  size_t max_batch_bytes;
  bool in_tx;
  bool commit_sent; /* this transaction's COMMIT went out (its loss leaves it in doubt) */
  bool settling; /* a settle or an op job owns conn and the rows applied */
  bool closed;   /* store_close came while an op job ran: its end frees the store */
  uv_loop_t *loop;            /* written behind: where op jobs are queued */
  struct pgstore_settle *op;  /* a truncate or delete_before in flight, or NULL */
  /* The outcome of the last op job that was refused (not an entry
   * boundary, ...), answered once to the same call asked again. */
  int op_result;
  int op_result_kind; /* 0: none */
  int64_t op_result_offset;
  int64_t start;       /* the first offset readable */
  int64_t start_saved; /* the partition row's start_offset */
  /* A store_reset's last index: a delete_before above the log's end
   * counts every entry up to it as held (0: none asked). */
  uint64_t reset_index;
  int64_t next;
  uint64_t last_index;
  uint64_t prefix_index;
  int64_t durable_offset;
  uint64_t durable_index;
  uint64_t size_bytes;
  struct pgstore_batch **tail; /* [0, ntail) oldest first */
  size_t ntail;
  size_t captail;
  size_t tail_bytes;
  size_t tail_max;
  bool commit_each_append;
  /* Written behind (pgstore.h): NULL when every append commits itself. */
  struct pgwriter *writer;
  struct pgwriter_member member;
  uint32_t topic_id_num;
  int32_t partition_num;
  int64_t sent_offset;     /* batches below it are committed or in the job in flight */
  int64_t inflight_next;   /* the job in flight covers up to here ... */
  uint64_t inflight_index; /* ... and this Raft index */
  size_t inflight_bytes;
  size_t pending_bytes; /* of batches not committed */
  size_t pending_max;
  void (*on_fatal)(void *arg);
  void *on_fatal_arg;
  /* A store_flush that answered CAIRN_EPENDING waits for durable_offset
   * to reach flush_target (0: none waits); on_durable tells its owner. */
  int64_t flush_target;
  void (*on_durable)(void *arg);
  void *on_durable_arg;
  /* Reads below the tail, lookups and retention (pgreader.h). */
  struct pgreader *reader;
  void (*on_readable)(void *arg);
  void *on_readable_arg;
  uint32_t retained_unreported; /* rows a retention job deleted since store_retention asked */
  /* Kept from the options for a revive (pgstore_revive_begin); owned. */
  char *conninfo;
  char *password_file; /* NULL: libpq's own */
  char *topic;
};

/* A revive in flight: a shadow store, connected and loaded off the loop,
 * whose connection and partition state the real one adopts. */
struct pgstore_revive {
  struct pgstore shadow; /* conn, start, next, indexes, size, errmsg */
  int status;            /* of the run; CAIRN_EDATABASE before it ran */
};

static struct pgstore *pgstore_from(struct store *s)
{
  return (struct pgstore *)s;
}

static int pgstore_fail(struct pgstore *ps, int err, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int pgstore_fail(struct pgstore *ps, int err, const char *fmt, ...)
{
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(ps->s.errmsg, sizeof ps->s.errmsg, fmt, ap);
  va_end(ap);
  return err;
}

static void pgstore_tail_drop_front(struct pgstore *ps, size_t k);
static void pgstore_tail_trim(struct pgstore *ps);
static int pgstore_reconnect(struct pgstore *ps);

/* The store latches fatal. Its view falls back to what was committed:
 * the log ends at durable_offset and the tail, which may hold batches
 * never committed, is emptied. */
static void pgstore_latch(struct pgstore *ps)
{
  ps->s.fatal = true;
  pgstore_tail_drop_front(ps, ps->ntail);
  ps->next = ps->durable_offset;
  ps->last_index = ps->durable_index;
  ps->sent_offset = ps->durable_offset;
  ps->pending_bytes = 0;
  ps->flush_target = 0; /* a waiting flush fails: on_fatal tells the owner */
}

/* A statement failed: what was not committed is rolled back (by the
 * server, or by the lost connection), and the store latches fatal. */
static int pgstore_db_fail(struct pgstore *ps, const char *what)
{
  char msg[STORE_ERRMSG_SIZE];
  snprintf(msg, sizeof msg, "%s", PQerrorMessage(ps->conn));
  msg[strcspn(msg, "\n")] = '\0';
  if (PQstatus(ps->conn) == CONNECTION_OK) {
    PQclear(PQexec(ps->conn, "ROLLBACK"));
  }
  ps->in_tx = false;
  pgstore_latch(ps);
  return pgstore_fail(ps, CAIRN_EDATABASE, "postgresql: %s: %s", what, msg);
}

/* Runs one statement with text parameters (binary where lengths says so)
 * and checks its status. Returns the result (free with PQclear) or NULL
 * with the store fatal. */
static PGresult *pgstore_exec(struct pgstore *ps, const char *what, const char *sql, int n,
                              const char *const *values, const int *lengths, const int *formats,
                              int binary_result)
{
  PGresult *res = PQexecParams(ps->conn, sql, n, NULL, values, lengths, formats, binary_result);
  ExecStatusType st = PQresultStatus(res);
  int reconnect = 1; /* not tried */
  if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK && !ps->in_tx &&
      pgstore_schema_conn_lost(ps->conn, res)) {
    /* Lost between transactions (PostgreSQL restarted a backend, a proxy
     * dropped an idle connection): nothing was pending, so nothing is
     * lost, and each statement run outside a transaction is idempotent
     * (a read, BEGIN, or a DELETE/UPDATE that commits alone). */
    reconnect = pgstore_reconnect(ps);
    if (reconnect == 0) {
      PQclear(res);
      res = PQexecParams(ps->conn, sql, n, NULL, values, lengths, formats, binary_result);
      st = PQresultStatus(res);
    }
  }
  if (st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK) {
    return res;
  }
  PQclear(res);
  if (reconnect < 0) {
    char why[STORE_ERRMSG_SIZE];
    snprintf(why, sizeof why, "%s", ps->s.errmsg);
    (void)pgstore_db_fail(ps, what);
    (void)pgstore_fail(ps, CAIRN_EDATABASE, "postgresql: %s: the connection was lost; %s", what,
                       why);
    return NULL;
  }
  (void)pgstore_db_fail(ps, what);
  return NULL;
}

/* A statement whose only parameters are the topic id, the partition and
 * an optional int64 (NULL: none). */
static PGresult *pgstore_exec_tp(struct pgstore *ps, const char *what, const char *sql,
                                 const int64_t *arg, int binary_result)
{
  char a[24];
  const char *values[3] = {ps->topic_id, ps->partition, a};
  if (arg != NULL) {
    snprintf(a, sizeof a, "%" PRId64, *arg);
  }
  return pgstore_exec(ps, what, sql, arg != NULL ? 3 : 2, values, NULL, NULL, binary_result);
}

/* For statements whose rows nobody reads: frees the result, says whether
 * the statement succeeded. */
static int pgstore_done(PGresult *res)
{
  PQclear(res);
  return res != NULL ? 0 : CAIRN_EDATABASE;
}

static int pgstore_cmd(struct pgstore *ps, const char *what, const char *sql)
{
  return pgstore_done(pgstore_exec(ps, what, sql, 0, NULL, NULL, NULL, 0));
}

static int64_t pgstore_get_i64(const PGresult *res, int row, int col)
{
  return strtoll(PQgetvalue(res, row, col), NULL, 10);
}

static int pgstore_begin(struct pgstore *ps)
{
  if (ps->in_tx) {
    return 0;
  }
  int rv = pgstore_cmd(ps, "BEGIN", "BEGIN");
  ps->in_tx = rv == 0;
  ps->commit_sent = false;
  return rv;
}

/* Commits the store's own transaction. Without a writer everything
 * appended is in it, and becomes durable; written behind, appends are not
 * (a settle or op job writes them first where it matters). */
static int pgstore_commit(struct pgstore *ps)
{
  if (ps->in_tx) {
    ps->commit_sent = true;
    int rv = pgstore_cmd(ps, "COMMIT", "COMMIT");
    if (rv != 0) {
      return rv;
    }
    ps->in_tx = false;
  }
  if (ps->writer == NULL) {
    ps->durable_offset = ps->next;
    ps->durable_index = ps->last_index;
    pgstore_tail_trim(ps);
  }
  return 0;
}

/* ---- the tail ---- */

static void pgstore_tail_drop_front(struct pgstore *ps, size_t k)
{
  if (k == 0) {
    return;
  }
  for (size_t i = 0; i < k; i++) {
    ps->tail_bytes -= ps->tail[i]->len;
    free(ps->tail[i]);
  }
  memmove(ps->tail, ps->tail + k, (ps->ntail - k) * sizeof *ps->tail);
  ps->ntail -= k;
}

/* The first tail batch at or above offset (ntail if none). */
static size_t pgstore_tail_find(const struct pgstore *ps, int64_t offset)
{
  size_t i = ps->ntail;
  while (i > 0 && ps->tail[i - 1]->base >= offset) {
    i--;
  }
  return i;
}

/* Drops the tail's batches at or after offset (a truncation). */
static void pgstore_tail_drop_back(struct pgstore *ps, int64_t offset)
{
  while (ps->ntail > 0 && ps->tail[ps->ntail - 1]->base >= offset) {
    ps->ntail--;
    ps->tail_bytes -= ps->tail[ps->ntail]->len;
    free(ps->tail[ps->ntail]);
  }
}

/* Drops the oldest batches while the tail is above its bound; never one
 * PostgreSQL has not committed: reads need it (the reader's connection
 * sees committed rows only). */
static void pgstore_tail_trim(struct pgstore *ps)
{
  size_t k = 0;
  size_t bytes = ps->tail_bytes;
  while (k < ps->ntail && bytes > ps->tail_max && ps->tail[k]->next <= ps->durable_offset) {
    bytes -= ps->tail[k]->len;
    k++;
  }
  pgstore_tail_drop_front(ps, k);
}

/* Takes b (always: freed when it cannot be kept) as the newest batch.
 * Returns 0, or CAIRN_ENOMEM when b cannot be kept (it is not committed
 * yet, so the tail must hold it). */
static int pgstore_tail_push(struct pgstore *ps, struct pgstore_batch *b)
{
  if (ps->ntail == ps->captail) {
    size_t cap = ps->captail ? ps->captail * 2 : 64;
    struct pgstore_batch **grown = realloc(ps->tail, cap * sizeof *grown);
    if (grown == NULL) {
      free(b);
      return pgstore_fail(ps, CAIRN_ENOMEM, "append: growing the tail");
    }
    ps->tail = grown;
    ps->captail = cap;
  }
  ps->tail[ps->ntail++] = b;
  ps->tail_bytes += b->len;
  pgstore_tail_trim(ps);
  return 0;
}

/* ---- append ---- */

static int pgstore_insert(struct pgstore *ps, const struct pgstore_batch *b)
{
  char base[24], last[24], ts[24], idx[24];
  snprintf(base, sizeof base, "%" PRId64, b->base);
  snprintf(last, sizeof last, "%" PRId64, b->next - 1);
  snprintf(ts, sizeof ts, "%" PRId64, b->max_ts);
  snprintf(idx, sizeof idx, "%" PRIu64, b->covered);
  const char *values[7] = {ps->topic_id, ps->partition, base, last, ts, idx, (const char *)b->data};
  int lengths[7] = {0, 0, 0, 0, 0, 0, (int)b->len};
  int formats[7] = {0, 0, 0, 0, 0, 0, 1};
  return pgstore_done(pgstore_exec(ps, "inserting a batch",
                                   "INSERT INTO cairn_batches (topic_id, partition, base_offset,"
                                   " last_offset, max_timestamp, raft_index, batch)"
                                   " VALUES ($1, $2, $3, $4, $5, $6, $7)",
                                   7, values, lengths, formats, 0));
}

/* Stamps a copy of src at base and, without a writer, inserts it; the
 * copy goes to the tail (written behind: to be sent by the writer). */
static int pgstore_append_one(struct pgstore *ps, const struct store_batch *src, int64_t base,
                              uint64_t source_index, bool last, uint64_t covered)
{
  struct pgstore_batch *b = malloc(sizeof *b + src->len);
  if (b == NULL) {
    return pgstore_fail(ps, CAIRN_ENOMEM, "append: copying %zu bytes", src->len);
  }
  memcpy(b->data, src->data, src->len);
  batch_stamp(b->data, base, source_index, last ? BATCH_FLAG_ENTRY_END : 0);
  struct batch_header h;
  batch_header_decode(b->data, &h);
  b->base = base;
  b->next = base + h.record_count;
  b->max_ts = h.max_timestamp;
  b->covered = covered;
  b->len = src->len;
  int rv = ps->writer == NULL ? pgstore_insert(ps, b) : 0;
  if (rv != 0) {
    free(b);
    return rv;
  }
  ps->next = b->next;
  ps->size_bytes += b->len;
  if (ps->writer != NULL) {
    ps->pending_bytes += b->len;
  }
  return pgstore_tail_push(ps, b);
}

static int pgstore_append(struct store *s, struct store_batch *batches, size_t n,
                          uint64_t source_index, int64_t *base_offset)
{
  struct pgstore *ps = pgstore_from(s);
  if (ps->s.fatal) {
    return CAIRN_EFATAL;
  }
  if (batches == NULL || n == 0) {
    return pgstore_fail(ps, CAIRN_EINVAL, "append of no batches");
  }
  if (ps->op != NULL) {
    return pgstore_fail(ps, -EBUSY, "append: a truncate or delete_before is in flight");
  }
  if (source_index != 0 && source_index <= ps->last_index) {
    return pgstore_fail(ps, CAIRN_EEXIST,
                        "entry %" PRIu64 " already applied (last index %" PRIu64 ")", source_index,
                        ps->last_index);
  }
  if (ps->writer != NULL && ps->pending_bytes > ps->pending_max) {
    /* PostgreSQL is this far behind: refuse to grow memory further. The
     * owner revives the store once the job in flight has ended; Raft
     * replays what was not committed. */
    pgstore_latch(ps);
    return pgstore_fail(ps, CAIRN_EDB_BEHIND,
                        "postgresql: %zu bytes not committed yet (bound %zu): the database is "
                        "behind", ps->pending_bytes, ps->pending_max);
  }
  int rv = store_validate_entry(batches, n, ps->max_batch_bytes, ps->next, ps->s.errmsg,
                                sizeof ps->s.errmsg);
  if (rv == 0 && ps->writer == NULL) {
    rv = pgstore_begin(ps);
  }
  int64_t first = ps->next;
  uint64_t done = source_index != 0 ? source_index : ps->last_index;
  for (size_t i = 0; i < n && rv == 0; i++) {
    bool last = i == n - 1;
    rv = pgstore_append_one(ps, &batches[i], ps->next, source_index, last,
                            last ? done : ps->last_index);
  }
  if (rv != 0) {
    /* Half an entry may be in the transaction (or the tail): never commit
     * on top of it. */
    if (rv != CAIRN_EDATABASE && ps->next != first) {
      if (ps->writer != NULL) {
        pgstore_latch(ps);
      } else {
        ps->s.fatal = true;
      }
    }
    return rv;
  }
  ps->last_index = done;
  if (base_offset != NULL) {
    *base_offset = first;
  }
  if (ps->writer != NULL) {
    pgwriter_ready(ps->writer, &ps->member);
    return 0;
  }
  return ps->commit_each_append ? pgstore_commit(ps) : 0;
}

/* ---- read ---- */

static void pgstore_region_release(struct store_region *r)
{
  free(r->pin);
}

static int pgstore_region_alloc(struct pgstore *ps, int64_t offset, size_t len,
                                struct store_region *out)
{
  uint8_t *buf = malloc(len);
  if (buf == NULL) {
    return pgstore_fail(ps, CAIRN_ENOMEM, "read at %" PRId64 ": %zu bytes", offset, len);
  }
  out->mem = buf;
  out->len = len;
  out->pin = buf;
  out->release = pgstore_region_release;
  return 0;
}

/* The tail holds offset: copy from it. */
static int pgstore_read_tail(struct pgstore *ps, int64_t offset, size_t max_bytes,
                             struct store_region *out)
{
  size_t first = 0;
  while (ps->tail[first]->next <= offset) {
    first++;
  }
  size_t end = first;
  size_t len = 0;
  while (end < ps->ntail && pgreader_fits(end - first, len, ps->tail[end]->len, max_bytes)) {
    len += ps->tail[end]->len;
    end++;
  }
  int rv = pgstore_region_alloc(ps, offset, len, out);
  if (rv != 0) {
    return rv;
  }
  size_t pos = 0;
  for (size_t i = first; i < end; i++) {
    memcpy((uint8_t *)out->mem + pos, ps->tail[i]->data, ps->tail[i]->len);
    pos += ps->tail[i]->len;
  }
  out->first_offset = ps->tail[first]->base;
  out->next_offset = ps->tail[end - 1]->next;
  return 0;
}

/* Below the tail: the reader's cache (then the tail, where the cache's
 * rows reach it), or CAIRN_EPENDING while its job loads the rows
 * (pgreader.h). A failed read leaves the store as it is: its state is not
 * in question, only this read. */
static int pgstore_read_db(struct pgstore *ps, int64_t offset, size_t max_bytes,
                           struct store_region *out)
{
  int64_t end = ps->ntail > 0 ? ps->tail[0]->base : ps->next;
  struct pgreader_slice sl;
  int rv =
      pgreader_read(ps->reader, offset, max_bytes, end, &sl, ps->s.errmsg, sizeof ps->s.errmsg);
  if (rv == CAIRN_EPENDING) {
    return pgstore_fail(ps, rv, "read at %" PRId64 ": reading it from PostgreSQL (ask again)",
                        offset);
  }
  if (rv != 0) {
    return rv;
  }
  size_t k = 0;
  size_t len = sl.len;
  while (sl.next == end && k < ps->ntail &&
         pgreader_fits(sl.count + k, len, ps->tail[k]->len, max_bytes)) {
    len += ps->tail[k]->len;
    k++;
  }
  rv = pgstore_region_alloc(ps, offset, len, out);
  if (rv != 0) {
    return rv;
  }
  memcpy((uint8_t *)out->mem, sl.data, sl.len);
  size_t pos = sl.len;
  for (size_t i = 0; i < k; i++) {
    memcpy((uint8_t *)out->mem + pos, ps->tail[i]->data, ps->tail[i]->len);
    pos += ps->tail[i]->len;
  }
  out->first_offset = sl.first;
  out->next_offset = k > 0 ? ps->tail[k - 1]->next : sl.next;
  return 0;
}

static int pgstore_read(struct store *s, int64_t offset, size_t max_bytes, struct store_region *out)
{
  struct pgstore *ps = pgstore_from(s);
  memset(out, 0, sizeof *out);
  out->fd = -1;
  if (offset < ps->start || offset > ps->next) {
    return pgstore_fail(ps, CAIRN_EOFFSET, "read at %" PRId64 " outside [%" PRId64 ", %" PRId64 "]",
                        offset, ps->start, ps->next);
  }
  if (offset == ps->next) {
    out->first_offset = offset;
    out->next_offset = offset;
    return 0;
  }
  if (ps->s.fatal) {
    return CAIRN_EFATAL; /* its view of the rows may be stale: reopen */
  }
  if (ps->ntail > 0 && offset >= ps->tail[0]->base) {
    return pgstore_read_tail(ps, offset, max_bytes, out);
  }
  return pgstore_read_db(ps, offset, max_bytes, out);
}

/* ---- lookup_time ---- */

/* Past the rows the reader looked at (below from): the tail holds them. */
static int pgstore_lookup_time_tail(struct pgstore *ps, int64_t timestamp, int64_t *offset,
                                    int64_t from)
{
  for (size_t i = pgstore_tail_find(ps, from); i < ps->ntail; i++) {
    int rv = store_batch_find_time(ps->tail[i]->data, ps->tail[i]->len, ps->start, timestamp,
                                   offset, ps->s.errmsg, sizeof ps->s.errmsg);
    if (rv != 0) {
      return rv < 0 ? rv : 0;
    }
  }
  *offset = ps->next;
  return 0;
}

static int pgstore_lookup_time(struct store *s, int64_t timestamp, int64_t *offset)
{
  struct pgstore *ps = pgstore_from(s);
  if (ps->s.fatal) {
    return CAIRN_EFATAL;
  }
  int64_t scanned;
  int rv = pgreader_lookup_time(ps->reader, timestamp, ps->start, ps->durable_offset, offset,
                                &scanned, ps->s.errmsg, sizeof ps->s.errmsg);
  if (rv == CAIRN_EPENDING) {
    return pgstore_fail(ps, rv, "lookup of time %" PRId64 ": in PostgreSQL (ask again)", timestamp);
  }
  if (rv != 0) {
    return rv < 0 ? rv : 0; /* found in the rows, or failed */
  }
  /* None in the rows the job saw, which are every row below scanned:
   * the tail holds the rest, unless it was trimmed past scanned since
   * (rows committed meanwhile): then look again. */
  if (ps->ntail > 0 && ps->tail[0]->base > scanned && scanned < ps->next) {
    pgreader_invalidate(ps->reader);
    return pgstore_lookup_time(s, timestamp, offset);
  }
  return pgstore_lookup_time_tail(ps, timestamp, offset, scanned);
}

/* ---- written behind (pgwriter.h) ---- */

static struct pgstore *pgstore_from_member(struct pgwriter_member *m)
{
  return (struct pgstore *)((char *)m - offsetof(struct pgstore, member));
}

/* Hands the batches not sent yet to the writer's job. */
static int pgstore_collect(struct pgwriter_member *m, struct pgwriter_job *job)
{
  struct pgstore *ps = pgstore_from_member(m);
  if (ps->s.fatal || ps->settling) {
    return 0; /* its revive reloads what is committed; the settle's end readies it again */
  }
  size_t bytes = 0;
  for (size_t i = pgstore_tail_find(ps, ps->sent_offset); i < ps->ntail; i++) {
    const struct pgstore_batch *b = ps->tail[i];
    int rv = pgwriter_job_add(job, ps->topic_id_num, ps->partition_num, b->base, b->next - 1,
                              b->max_ts, b->covered, b->data, b->len);
    if (rv != 0) {
      return rv;
    }
    bytes += b->len;
  }
  ps->inflight_next = ps->next;
  ps->inflight_index = ps->last_index;
  ps->inflight_bytes = bytes;
  ps->sent_offset = ps->next;
  return 0;
}

/* The writer's job holding this store's batches ended. */
static void pgstore_written(struct pgwriter_member *m, int status, const char *msg)
{
  struct pgstore *ps = pgstore_from_member(m);
  if (ps->s.fatal) {
    return; /* latched meanwhile: its revive reloads what is committed */
  }
  if (status == 0) {
    ps->durable_offset = ps->inflight_next;
    ps->durable_index = ps->inflight_index;
    ps->pending_bytes -= ps->inflight_bytes;
    pgstore_tail_trim(ps);
    if (ps->flush_target != 0 && ps->durable_offset >= ps->flush_target) {
      ps->flush_target = 0;
      if (ps->on_durable != NULL) {
        ps->on_durable(ps->on_durable_arg);
      }
    }
    return;
  }
  pgstore_latch(ps);
  (void)pgstore_fail(ps, status == CAIRN_EDATABASE ? status : CAIRN_EDATABASE, "%s", msg);
  if (ps->on_fatal != NULL) {
    ps->on_fatal(ps->on_fatal_arg);
  }
}

static const struct pgwriter_member_ops pgstore_member_ops = {
    .collect = pgstore_collect,
    .done = pgstore_written,
};

/* Everything applied went through the store's own transaction, which
 * committed: the log is durable up to next. */
static void pgstore_mark_settled(struct pgstore *ps)
{
  ps->sent_offset = ps->next;
  ps->durable_offset = ps->next;
  ps->durable_index = ps->last_index;
  ps->pending_bytes = 0;
  ps->flush_target = 0; /* a waiting flush is satisfied: it is answered 0 when asked again */
  pgstore_tail_trim(ps);
}

/* ---- a settle off the loop (pgstore_settle_*) ---- */

/* The batches [from, next) copied at begin, written by a worker over the
 * store's own connection through a shadow store (as a revive's): the
 * worker touches only the job. */
enum pgstore_op_kind { PGSTORE_OP_SETTLE = 1, PGSTORE_OP_TRUNCATE, PGSTORE_OP_DELETE_BEFORE };

struct pgstore_settle {
  struct pgstore *ps;
  enum pgstore_op_kind kind;
  int64_t offset;   /* of a truncate or delete_before */
  bool refused;     /* the op refused its offset: rolled back, nothing written */
  uv_work_t work;   /* an op job's, on the store's loop */
  struct pgstore shadow; /* conn (the store's, lent), ids, durable point; strings borrowed */
  struct pgstore_batch **rows;
  size_t nrows;
  int64_t from;   /* durable_offset at begin */
  int64_t next;   /* next_offset at begin: durable once committed */
  uint64_t index; /* last_index at begin */
  size_t bytes;
  bool ran;
  int status;
};

static void pgstore_settle_free(struct pgstore_settle *job)
{
  for (size_t i = 0; i < job->nrows; i++) {
    free(job->rows[i]);
  }
  free(job->rows);
  free(job);
}

/* Copies the tail's batches at or above from into the job. */
static int pgstore_settle_copy(struct pgstore *ps, struct pgstore_settle *job)
{
  size_t first = pgstore_tail_find(ps, job->from);
  job->rows = calloc(ps->ntail - first + 1, sizeof *job->rows);
  if (job->rows == NULL) {
    return CAIRN_ENOMEM;
  }
  for (size_t i = first; i < ps->ntail; i++) {
    const struct pgstore_batch *b = ps->tail[i];
    struct pgstore_batch *c = malloc(sizeof *c + b->len);
    if (c == NULL) {
      return CAIRN_ENOMEM;
    }
    memcpy(c, b, sizeof *c + b->len);
    job->rows[job->nrows++] = c;
    job->bytes += b->len;
  }
  return 0;
}

/* The shadow a worker runs the statements on: the store's connection and
 * what a reconnect checks (pgstore_reconnect), nothing it could race. */
static void pgstore_settle_shadow(struct pgstore *ps, struct pgstore *sh, bool full)
{
  sh->conn = ps->conn;
  memcpy(sh->topic_id, ps->topic_id, sizeof sh->topic_id);
  memcpy(sh->partition, ps->partition, sizeof sh->partition);
  sh->conninfo = ps->conninfo;
  sh->password_file = ps->password_file;
  sh->start = ps->start_saved; /* what PostgreSQL holds */
  sh->start_saved = ps->start_saved;
  sh->reset_index = ps->reset_index;
  sh->prefix_index = ps->prefix_index;
  sh->next = ps->durable_offset;
  sh->last_index = ps->durable_index;
  sh->durable_offset = ps->durable_offset;
  sh->durable_index = ps->durable_index;
  if (full) {
    /* An op works on the whole log: the rows it writes first included. */
    sh->next = ps->next;
    sh->last_index = ps->last_index;
    sh->size_bytes = ps->size_bytes;
  }
}

/* A job of kind: the batches PostgreSQL lacks copied, the shadow set up;
 * from now until its end the writer collects nothing of ps (so no later
 * row commits before these) and ps->conn is the job's. */
static int pgstore_job_new(struct pgstore *ps, enum pgstore_op_kind kind, int64_t offset,
                           struct pgstore_settle **out)
{
  struct pgstore_settle *job = calloc(1, sizeof *job);
  if (job == NULL) {
    return CAIRN_ENOMEM;
  }
  job->ps = ps;
  job->kind = kind;
  job->offset = offset;
  job->from = ps->durable_offset; /* == sent_offset: no job of the writer holds rows */
  job->next = ps->next;
  job->index = ps->last_index;
  job->status = CAIRN_ESYNC_CANCELED;
  if (pgstore_settle_copy(ps, job) != 0) {
    pgstore_settle_free(job);
    return CAIRN_ENOMEM;
  }
  pgstore_settle_shadow(ps, &job->shadow, kind != PGSTORE_OP_SETTLE);
  job->work.data = job;
  ps->settling = true;
  ps->sent_offset = ps->next;
  *out = job;
  return 0;
}

int pgstore_settle_begin(struct store *s, struct pgstore_settle **out)
{
  struct pgstore *ps = pgstore_from(s);
  *out = NULL;
  if (ps->s.fatal) {
    return CAIRN_EFATAL;
  }
  if (ps->writer == NULL || ps->member.inflight || ps->settling) {
    return -EBUSY; /* (without a writer: store_flush) */
  }
  return pgstore_job_new(ps, PGSTORE_OP_SETTLE, 0, out);
}

/* A job's transaction failed because its connection was lost after BEGIN
 * and before its COMMIT went out: the server rolled it back, nothing of it
 * committed, and it may be sent once more. */
static bool pgstore_lost_before_commit(const struct pgstore *sh)
{
  return sh->s.fatal && !sh->commit_sent && PQstatus(sh->conn) == CONNECTION_BAD;
}

/* The settle's transaction: BEGIN, its rows, COMMIT. */
static int pgstore_settle_tx(struct pgstore *sh, const struct pgstore_settle *job)
{
  int rv = job->nrows > 0 ? pgstore_begin(sh) : 0;
  if (rv != 0) {
    return rv; /* BEGIN already connects again once if the idle connection was lost */
  }
  for (size_t i = 0; i < job->nrows && rv == 0; i++) {
    rv = pgstore_insert(sh, job->rows[i]);
  }
  if (rv != 0) {
    return rv;
  }
  return pgstore_commit(sh); /* a COMMIT lost in flight is in doubt: the revive reads back */
}

int pgstore_settle_run(struct pgstore_settle *job)
{
  struct pgstore *sh = &job->shadow;
  job->ran = true;
  int rv = pgstore_settle_tx(sh, job);
  if (rv != 0 && job->nrows > 0 && pgstore_lost_before_commit(sh)) {
    /* Sent once more on a new connection (BEGIN makes it, and checks the
     * rows still end where they did): cannot write a row twice. The
     * shadow's latch undone: its view was already the committed one. */
    sh->s.fatal = false;
    sh->in_tx = false;
    rv = pgstore_settle_tx(sh, job);
  }
  job->status = rv;
  return rv;
}

int pgstore_settle_end(struct pgstore_settle *job)
{
  struct pgstore *ps = job->ps;
  struct pgstore *sh = &job->shadow;
  int status = job->status;
  ps->conn = sh->conn; /* the same, or the one a reconnect made */
  ps->settling = false;
  if (ps->s.fatal) {
    status = CAIRN_EFATAL; /* latched meanwhile: its revive reloads what is committed */
  } else if (!job->ran) {
    ps->sent_offset = job->from; /* nothing was sent: the writer takes them */
  } else if (status != 0) {
    /* Its COMMIT may or may not have happened: the revive reads back. */
    pgstore_latch(ps);
    snprintf(ps->s.errmsg, sizeof ps->s.errmsg, "%s", sh->s.errmsg);
  } else {
    ps->durable_offset = job->next;
    ps->durable_index = job->index;
    ps->pending_bytes -= job->bytes < ps->pending_bytes ? job->bytes : ps->pending_bytes;
    if (ps->flush_target != 0 && ps->durable_offset >= ps->flush_target) {
      ps->flush_target = 0; /* satisfied: answered 0 when asked again */
    }
    pgstore_tail_trim(ps);
  }
  if (!ps->s.fatal && ps->sent_offset < ps->next) {
    pgwriter_ready(ps->writer, &ps->member); /* what was applied meanwhile */
  }
  pgstore_settle_free(job);
  return status;
}

/* ---- flush and truncate ---- */

static int pgstore_flush(struct store *s, int64_t up_to)
{
  struct pgstore *ps = pgstore_from(s);
  if (ps->s.fatal) {
    return CAIRN_EFATAL;
  }
  int64_t target = up_to < ps->next ? up_to : ps->next;
  if (target <= ps->durable_offset) {
    return 0;
  }
  if (ps->writer != NULL) {
    /* Never on the loop: every batch below target is in the writer's job
     * in flight or waits for its next one (the tail holds them), whose
     * commit is reported in pgstore_written. */
    if (target > ps->flush_target) {
      ps->flush_target = target;
    }
    if (ps->sent_offset < ps->next) {
      pgwriter_ready(ps->writer, &ps->member);
    }
    return pgstore_fail(ps, CAIRN_EPENDING,
                        "flush to %" PRId64 ": PostgreSQL is committing it (ask again)", target);
  }
  return pgstore_commit(ps);
}

/* Checks that offset is an entry boundary; sets *index to the Raft index
 * covered below it. Returns 0, 1 (offset is next: nothing to cut) or a
 * negative code. */
static int pgstore_truncate_point(struct pgstore *ps, int64_t offset, uint64_t *index)
{
  PGresult *res = pgstore_exec_tp(ps, "truncate: finding the batch",
                                  "SELECT base_offset FROM cairn_batches WHERE topic_id = $1"
                                  " AND partition = $2 AND last_offset >= $3"
                                  " ORDER BY base_offset LIMIT 1",
                                  &offset, 0);
  if (res == NULL) {
    return CAIRN_EDATABASE;
  }
  bool none = PQntuples(res) == 0;
  int64_t base = none ? offset : pgstore_get_i64(res, 0, 0);
  PQclear(res);
  if (none) {
    return 1;
  }
  if (base != offset) {
    return pgstore_fail(ps, CAIRN_EINVAL, "truncate at %" PRId64 ": inside the batch at %" PRId64,
                        offset, base);
  }
  res = pgstore_exec_tp(ps, "truncate: finding the batch before",
                        "SELECT get_byte(batch, 20), raft_index FROM cairn_batches"
                        " WHERE topic_id = $1 AND partition = $2 AND base_offset < $3"
                        " ORDER BY base_offset DESC LIMIT 1",
                        &offset, 0);
  if (res == NULL) {
    return CAIRN_EDATABASE;
  }
  int rv = 0;
  if (PQntuples(res) == 0) {
    *index = ps->prefix_index;
  } else if ((pgstore_get_i64(res, 0, 0) & BATCH_FLAG_ENTRY_END) == 0) {
    rv = pgstore_fail(ps, CAIRN_EINVAL, "truncate at %" PRId64 ": inside a Raft entry", offset);
  } else {
    *index = (uint64_t)pgstore_get_i64(res, 0, 1);
  }
  PQclear(res);
  return rv;
}

/* Deletes the rows matching cond (on $3 = arg) and takes their bytes off
 * size_bytes; *newest_index gets the raft_index of the highest deleted row
 * (unchanged when none). Returns the rows deleted or a negative code. */
static int64_t pgstore_delete_rows(struct pgstore *ps, const char *what, const char *cond,
                                   int64_t arg, uint64_t *newest_index)
{
  char sql[512];
  snprintf(sql, sizeof sql,
           "WITH d AS (DELETE FROM cairn_batches WHERE topic_id = $1 AND partition = $2"
           " AND %s RETURNING base_offset, raft_index, length(batch) AS len)"
           " SELECT count(*), coalesce(sum(len), 0),"
           " (SELECT raft_index FROM d ORDER BY base_offset DESC LIMIT 1) FROM d",
           cond);
  PGresult *res = pgstore_exec_tp(ps, what, sql, &arg, 0);
  if (res == NULL) {
    return CAIRN_EDATABASE;
  }
  int64_t rows = pgstore_get_i64(res, 0, 0);
  ps->size_bytes -= (uint64_t)pgstore_get_i64(res, 0, 1);
  if (rows > 0 && newest_index != NULL) {
    *newest_index = (uint64_t)pgstore_get_i64(res, 0, 2);
  }
  PQclear(res);
  return rows;
}

/* In the store's transaction: cuts the rows at or after offset (an
 * entry boundary) and commits; next and last_index follow (not the tail).
 * Returns 0 or a negative code. */
static int pgstore_truncate_rows(struct pgstore *ps, int64_t offset)
{
  uint64_t index = ps->last_index;
  int rv = pgstore_begin(ps);
  if (rv == 0) {
    rv = pgstore_truncate_point(ps, offset, &index);
  }
  if (rv == 1) {
    return pgstore_commit(ps); /* offset is next: nothing to cut */
  }
  if (rv == 0) {
    int64_t rows = pgstore_delete_rows(ps, "truncate", "base_offset >= $3", offset, NULL);
    rv = rows < 0 ? (int)rows : 0;
  }
  if (rv != 0) {
    return rv;
  }
  ps->next = offset;
  ps->last_index = index;
  /* Committed at once: a restart must never bring back what Raft cut. */
  return pgstore_commit(ps);
}

static int pgstore_op_request(struct pgstore *ps, enum pgstore_op_kind kind, int64_t offset);
static void pgstore_free(struct pgstore *ps);

static int pgstore_truncate(struct store *s, int64_t offset)
{
  struct pgstore *ps = pgstore_from(s);
  if (ps->s.fatal) {
    return CAIRN_EFATAL;
  }
  if (offset < ps->start || offset > ps->next) {
    return pgstore_fail(ps, CAIRN_EOFFSET,
                        "truncate at %" PRId64 " outside [%" PRId64 ", %" PRId64 "]", offset,
                        ps->start, ps->next);
  }
  if (ps->writer != NULL) {
    return pgstore_op_request(ps, PGSTORE_OP_TRUNCATE, offset);
  }
  /* No job of the reader races the cut, nor does its cache outlive it. */
  pgreader_stop(ps->reader);
  pgreader_invalidate(ps->reader);
  int rv = pgstore_truncate_rows(ps, offset);
  if (rv == 0) {
    pgstore_tail_drop_back(ps, offset);
  }
  return rv;
}

/* ---- deleting from the front ---- */

/* Written behind, a delete within the log moves the start in memory: reads
 * below it are refused from now on, and the rows go at the owner's next
 * retention pass (pgstore_retention_args' floor), once its producer table
 * covers them (a restart rebuilds the table from the rows still there).
 * Until then the command that asked it is in the owner's Raft log or
 * snapshot, and a reopen applies it again. */
static void pgstore_move_start(struct pgstore *ps, int64_t offset)
{
  ps->start = offset;
  size_t k = 0;
  while (k < ps->ntail && ps->tail[k]->next <= offset) {
    k++;
  }
  pgstore_tail_drop_front(ps, k);
}

/* Records the new start (and prefix_index) in the partition row and
 * commits. */
static int pgstore_set_start(struct pgstore *ps, int64_t start)
{
  char st[24], idx[24];
  snprintf(st, sizeof st, "%" PRId64, start);
  snprintf(idx, sizeof idx, "%" PRIu64, ps->prefix_index);
  const char *values[4] = {ps->topic_id, ps->partition, st, idx};
  if (pgstore_done(pgstore_exec(ps, "moving the log start",
                                "UPDATE cairn_partitions SET start_offset = $3, prefix_index = $4"
                                " WHERE topic_id = $1 AND partition = $2",
                                4, values, NULL, NULL, 0)) != 0) {
    return CAIRN_EDATABASE;
  }
  ps->start = start;
  ps->start_saved = start;
  return pgstore_commit(ps);
}

/* Deletes the batches wholly below offset (> start) and moves start. */
static int pgstore_drop_before(struct pgstore *ps, int64_t offset)
{
  int rv = pgstore_begin(ps);
  if (rv != 0) {
    return rv;
  }
  if (offset > ps->next) {
    /* A snapshot install: the entries below offset are applied elsewhere,
     * so last_index stays and the store restarts empty at offset. */
    int64_t rows = pgstore_delete_rows(ps, "delete_before", "$3::bigint IS NOT NULL", offset, NULL);
    if (rows < 0) {
      return (int)rows;
    }
    pgstore_tail_drop_front(ps, ps->ntail);
    if (ps->reset_index > ps->last_index) {
      ps->last_index = ps->reset_index; /* store_reset: the peer's entries counted as held */
    }
    ps->prefix_index = ps->last_index;
    ps->next = offset;
    return pgstore_set_start(ps, offset);
  }
  {
    struct pgreader_retained d;
    char err[STORE_ERRMSG_SIZE];
    if (pgreader_delete_below(ps->conn, ps->topic_id, ps->partition, offset, ps->prefix_index, &d,
                              err, sizeof err) != 0) {
      (void)pgstore_db_fail(ps, "delete_before");
      return pgstore_fail(ps, CAIRN_EDATABASE, "delete_before: %s", err);
    }
    ps->size_bytes -= d.bytes;
    ps->prefix_index = d.prefix_index;
    ps->start_saved = offset;
    pgstore_move_start(ps, offset > ps->start ? offset : ps->start);
  }
  return pgstore_commit(ps); /* the partition row moved with the delete */
}

static int pgstore_delete_before(struct store *s, int64_t offset)
{
  struct pgstore *ps = pgstore_from(s);
  if (ps->s.fatal) {
    return CAIRN_EFATAL;
  }
  if (offset < 0) {
    return pgstore_fail(ps, CAIRN_EOFFSET, "delete_before %" PRId64 ": negative", offset);
  }
  if (offset <= ps->start) {
    return 0; /* the start never moves back (and an op job that moved it is done) */
  }
  if (ps->writer != NULL && offset <= ps->next) {
    pgstore_move_start(ps, offset);
    return 0;
  }
  if (ps->writer != NULL) {
    return pgstore_op_request(ps, PGSTORE_OP_DELETE_BEFORE, offset);
  }
  pgreader_stop(ps->reader); /* no retention job races this one */
  int rv = ps->s.fatal ? CAIRN_EFATAL : 0; /* the stopped job was a failed retention */
  if (rv == 0) {
    rv = pgstore_drop_before(ps, offset);
  }
  pgreader_invalidate(ps->reader);
  return rv;
}

/* store_reset: delete_before above the log's end, with last_index (kept
 * in the partition row's prefix_index, which an empty log's last index is
 * read from at open). Asked again once its job has ended: 0. */
static int pgstore_reset(struct store *s, int64_t offset, uint64_t last_index)
{
  struct pgstore *ps = pgstore_from(s);
  if (ps->s.fatal) {
    return CAIRN_EFATAL;
  }
  if (ps->start >= offset && ps->next == ps->start && ps->last_index >= last_index) {
    return 0; /* done */
  }
  if (offset <= ps->next) {
    return pgstore_fail(ps, CAIRN_EINVAL, "reset at %" PRId64 ": not past the log's end", offset);
  }
  if (last_index > ps->reset_index) {
    ps->reset_index = last_index;
  }
  return pgstore_delete_before(s, offset);
}

/* ---- truncate and delete_before off the loop (written behind) ----
 *
 * The call starts a job on the loop's thread pool and answers
 * CAIRN_EPENDING; asked again it answers CAIRN_EPENDING until the job has
 * ended, then 0 (or, once, the job's refusal). The job runs in one
 * transaction over the store's connection (through a shadow, as a
 * settle): the batches PostgreSQL lacks first, then the cut or the delete,
 * then COMMIT. It starts only when no job of the writer holds rows of the
 * store (so no append queued before it lands after it) and no job of the
 * reader runs (no retention delete races it); until it has ended the
 * writer collects nothing of the store and appends are refused. */

static const char *pgstore_op_name(enum pgstore_op_kind kind)
{
  return kind == PGSTORE_OP_TRUNCATE ? "truncate" : "delete_before";
}

/* What an op job's transaction changes in its shadow, kept to run the
 * transaction once more (pgstore_op_work). */
struct pgstore_op_mark {
  int64_t start, next, durable_offset;
  uint64_t last_index, prefix_index, durable_index, size_bytes;
};

static void pgstore_op_mark(const struct pgstore *sh, struct pgstore_op_mark *m)
{
  *m = (struct pgstore_op_mark){.start = sh->start,
                                .next = sh->next,
                                .durable_offset = sh->durable_offset,
                                .last_index = sh->last_index,
                                .prefix_index = sh->prefix_index,
                                .durable_index = sh->durable_index,
                                .size_bytes = sh->size_bytes};
}

/* The shadow as at the mark, its latch undone: its view was the committed
 * one, and its connection (lost) is replaced by the next BEGIN. */
static void pgstore_op_rewind(struct pgstore *sh, const struct pgstore_op_mark *m)
{
  sh->start = m->start;
  sh->next = m->next;
  sh->durable_offset = m->durable_offset;
  sh->last_index = m->last_index;
  sh->prefix_index = m->prefix_index;
  sh->durable_index = m->durable_index;
  sh->size_bytes = m->size_bytes;
  sh->s.fatal = false;
  sh->in_tx = false;
  sh->commit_sent = false;
}

/* The op's transaction: BEGIN, the rows PostgreSQL lacks, the cut or the
 * delete, COMMIT. */
static int pgstore_op_tx(struct pgstore *sh, const struct pgstore_settle *job)
{
  int rv = pgstore_begin(sh);
  for (size_t i = 0; i < job->nrows && rv == 0; i++) {
    rv = pgstore_insert(sh, job->rows[i]);
  }
  if (rv == 0) {
    rv = job->kind == PGSTORE_OP_TRUNCATE ? pgstore_truncate_rows(sh, job->offset)
                                          : pgstore_drop_before(sh, job->offset);
  }
  return rv;
}

static void pgstore_op_work(uv_work_t *w)
{
  struct pgstore_settle *job = w->data;
  struct pgstore *sh = &job->shadow;
  job->ran = true;
  struct pgstore_op_mark mark;
  pgstore_op_mark(sh, &mark);
  int rv = pgstore_op_tx(sh, job);
  if (rv != 0 && pgstore_lost_before_commit(sh)) {
    /* The connection was lost inside the transaction, before its COMMIT
     * went out: the server rolled it back, nothing of it committed. Sent
     * once more on a new connection (BEGIN makes it, and checks the rows
     * still end where they did), as a settle is: no row twice. A COMMIT
     * lost in flight stays in doubt: the store latches, its revive reads
     * back. */
    pgstore_op_rewind(sh, &mark);
    rv = pgstore_op_tx(sh, job);
  }
  if (rv != 0 && !sh->s.fatal) {
    /* Refused (not an entry boundary): nothing of the job is written. */
    if (sh->in_tx) {
      PQclear(PQexec(sh->conn, "ROLLBACK"));
      sh->in_tx = false;
    }
    job->refused = true;
  }
  job->status = rv;
}

/* The job's outcome into the store (see above). Returns the answer. */
static int pgstore_op_apply(struct pgstore *ps, struct pgstore_settle *job)
{
  struct pgstore *sh = &job->shadow;
  if (ps->s.fatal) {
    return CAIRN_EFATAL; /* latched meanwhile: its revive reloads what is committed */
  }
  if (!job->ran || job->refused) {
    ps->sent_offset = job->from; /* nothing was written: the writer takes them */
    snprintf(ps->s.errmsg, sizeof ps->s.errmsg, "%s", sh->s.errmsg);
    return job->ran ? job->status : CAIRN_EDATABASE;
  }
  if (job->status != 0) {
    pgstore_latch(ps); /* its COMMIT may or may not have happened: the revive reads back */
    snprintf(ps->s.errmsg, sizeof ps->s.errmsg, "%s", sh->s.errmsg);
    return job->status;
  }
  ps->size_bytes = sh->size_bytes;
  if (job->kind == PGSTORE_OP_TRUNCATE) {
    pgstore_tail_drop_back(ps, sh->next);
  } else {
    ps->start = sh->start > ps->start ? sh->start : ps->start;
    ps->start_saved = sh->start;
    ps->prefix_index = sh->prefix_index;
    size_t k = 0;
    while (k < ps->ntail && (ps->tail[k]->next <= ps->start || sh->next > ps->next)) {
      k++; /* below the new start; or everything, for a snapshot install */
    }
    pgstore_tail_drop_front(ps, k);
  }
  ps->next = sh->next;
  ps->last_index = sh->last_index;
  pgstore_mark_settled(ps);
  return 0;
}

static void pgstore_op_after(uv_work_t *w, int status)
{
  (void)status; /* never canceled: the store's state waits for it */
  struct pgstore_settle *job = w->data;
  struct pgstore *ps = job->ps;
  ps->op = NULL;
  ps->settling = false;
  ps->conn = job->shadow.conn; /* the same, or the one a reconnect made */
  if (ps->closed) {
    pgstore_settle_free(job);
    pgstore_free(ps);
    return;
  }
  pgreader_invalidate(ps->reader); /* nothing it cached survives the op */
  int rv = pgstore_op_apply(ps, job);
  ps->op_result = rv;
  ps->op_result_kind = (int)job->kind;
  ps->op_result_offset = job->offset;
  bool failed = rv != 0 && ps->s.fatal && job->status != 0 && job->ran && !job->refused;
  pgstore_settle_free(job);
  if (failed) {
    if (ps->on_fatal != NULL) {
      ps->on_fatal(ps->on_fatal_arg);
    }
    return;
  }
  if (!ps->s.fatal && ps->sent_offset < ps->next) {
    pgwriter_ready(ps->writer, &ps->member); /* what waited for the op */
  }
  if (ps->on_durable != NULL) {
    ps->on_durable(ps->on_durable_arg); /* the op is done: ask again */
  }
}

static int pgstore_op_request(struct pgstore *ps, enum pgstore_op_kind kind, int64_t offset)
{
  const char *name = pgstore_op_name(kind);
  if (ps->op_result_kind == (int)kind && ps->op_result_offset == offset) {
    ps->op_result_kind = 0;
    if (ps->op_result != 0) {
      return ps->op_result; /* errmsg says why since its end */
    }
  }
  if (ps->op != NULL && (ps->op->kind != kind || ps->op->offset != offset)) {
    return pgstore_fail(ps, -EBUSY, "%s at %" PRId64 ": another truncate or delete_before is "
                        "in flight", name, offset);
  }
  if (kind == PGSTORE_OP_TRUNCATE && ps->op == NULL && offset == ps->next) {
    return 0; /* nothing to cut */
  }
  if (ps->op == NULL && !ps->settling && !ps->member.inflight && !pgreader_busy(ps->reader)) {
    struct pgstore_settle *job;
    int rv = pgstore_job_new(ps, kind, offset, &job);
    if (rv == 0) {
      rv = uv_queue_work(ps->loop, &job->work, pgstore_op_work, pgstore_op_after);
      if (rv != 0) {
        ps->settling = false;
        ps->sent_offset = job->from;
        pgstore_settle_free(job);
      }
    }
    if (rv != 0) {
      return pgstore_fail(ps, rv, "%s at %" PRId64 ": starting it: %s", name, offset,
                          cairn_strerror(rv));
    }
    ps->op = job;
  }
  /* Waiting for the writer's job, a settle or the reader's job to end, or
   * the op's own to: the caller asks again (on_durable tells it the op's
   * end). */
  return pgstore_fail(ps, CAIRN_EPENDING, "%s at %" PRId64 ": in PostgreSQL, off the loop "
                      "(ask again)", name, offset);
}

/* The reader's view of a retention pass now. */
static void pgstore_retention_args(struct pgstore *ps, int64_t now_ms, int64_t below,
                                   struct pgreader_retention *rt)
{
  rt->now_ms = now_ms;
  rt->below = below;
  rt->retention_bytes = ps->s.retention_bytes;
  rt->retention_ms = ps->s.retention_ms;
  rt->size_bytes = ps->size_bytes;
  rt->start = ps->start_saved;
  /* A start moved in memory (pgstore_move_start): its rows go too, within
   * the owner's bound. */
  rt->floor = ps->start < below ? ps->start : below;
}

/* Without a writer, the reader's connection must see every row: the
 * store's own transaction commits first (retention commits at once
 * anyway, pgstore.h). */
static int pgstore_commit_for_reader(struct pgstore *ps)
{
  return ps->writer == NULL ? pgstore_commit(ps) : 0;
}

/* With a loop: the point a scan found, or the start while one runs (it
 * wakes nobody: the owner's next retention pass asks again). */
static int64_t pgstore_retention_point(struct store *s, int64_t now_ms)
{
  struct pgstore *ps = pgstore_from(s);
  struct pgreader_retention rt;
  pgstore_retention_args(ps, now_ms, INT64_MAX, &rt);
  int64_t point = ps->start_saved;
  if (ps->s.fatal || pgstore_commit_for_reader(ps) != 0 ||
      pgreader_scan(ps->reader, &rt, &point, ps->s.errmsg, sizeof ps->s.errmsg) != 0) {
    return ps->start; /* no answer (yet): nothing is due */
  }
  return point > ps->start ? point : ps->start;
}

/* Starts the reader's delete (with a loop it ends later, on the loop:
 * pgstore_on_reader_done applies it); *deleted gets the rows deleted by
 * jobs that ended since the last call. */
static int pgstore_retention(struct store *s, int64_t now_ms, int64_t below, uint32_t *deleted)
{
  struct pgstore *ps = pgstore_from(s);
  *deleted = 0;
  if (ps->s.fatal) {
    return CAIRN_EFATAL;
  }
  if (ps->op != NULL) {
    *deleted = ps->retained_unreported;
    ps->retained_unreported = 0;
    return 0; /* a truncate or delete_before runs: the next pass */
  }
  struct pgreader_retention rt;
  pgstore_retention_args(ps, now_ms, below, &rt);
  int rv = pgstore_commit_for_reader(ps);
  if (rv == 0) {
    rv = pgreader_retain(ps->reader, &rt);
  }
  *deleted = ps->retained_unreported;
  ps->retained_unreported = 0;
  if (rv == CAIRN_EPENDING) {
    return 0; /* a job runs: the next pass starts one */
  }
  return ps->s.fatal ? CAIRN_EFATAL : rv;
}

/* A job of the reader ended (on the loop; without one, inside the call
 * that ran it): a retention delete is applied to the store's state, and
 * the owner's waiting reads may now be answered. */
static void pgstore_on_reader_done(void *arg, enum pgreader_job_kind kind, int status,
                                   const char *msg, const struct pgreader_retained *retained)
{
  struct pgstore *ps = arg;
  if (kind == PGREADER_RETAIN && !ps->s.fatal) {
    if (status != 0) {
      /* The delete's COMMIT may or may not have happened: the revive
       * reloads the start PostgreSQL has. */
      pgstore_latch(ps);
      (void)pgstore_fail(ps, CAIRN_EDATABASE, "retention: %s", msg);
      if (ps->on_fatal != NULL && ps->writer != NULL) {
        ps->on_fatal(ps->on_fatal_arg);
      }
    } else if (retained != NULL && retained->start > ps->start_saved) {
      ps->start_saved = retained->start;
      ps->prefix_index = retained->prefix_index;
      ps->size_bytes -= retained->bytes < ps->size_bytes ? retained->bytes : ps->size_bytes;
      if (retained->start > ps->start) {
        pgstore_move_start(ps, retained->start);
      }
      ps->retained_unreported += retained->count;
    }
  }
  if (ps->on_readable != NULL) {
    ps->on_readable(ps->on_readable_arg);
  }
}

/* ---- info and close ---- */

static void pgstore_info(struct store *s, struct store_info *out)
{
  struct pgstore *ps = pgstore_from(s);
  memset(out, 0, sizeof *out);
  out->start_offset = ps->start;
  out->saved_start_offset = ps->start_saved;
  out->next_offset = ps->next;
  out->last_index = ps->last_index;
  out->durable_offset = ps->durable_offset;
  out->durable_index = ps->durable_index;
  out->size_bytes = ps->size_bytes;
  out->segments = 1;
  out->fatal = ps->s.fatal;
}

static void pgstore_free(struct pgstore *ps)
{
  if (ps->writer != NULL) {
    pgwriter_leave(ps->writer, &ps->member);
    pgwriter_release(ps->writer);
  }
  pgreader_free(ps->reader);
  pgstore_tail_drop_front(ps, ps->ntail);
  free(ps->tail);
  PQfinish(ps->conn);
  free(ps->conninfo);
  free(ps->password_file);
  free(ps->topic);
  free(ps);
}

/* Without a writer, commits the store's transaction (as plog's close
 * flushes). Written behind, never waits for the database: the writer's job
 * in flight goes on without the store (its rows commit or not) and what
 * was not sent is not written; both are above durable_offset, which the
 * owner's Raft log still covers, and its replay at the next open writes
 * them. */
static void pgstore_close(struct store *s)
{
  struct pgstore *ps = pgstore_from(s);
  if (ps->op != NULL) {
    ps->closed = true; /* the op job has the connection: its end frees the store */
    return;
  }
  if (ps->writer == NULL && !ps->s.fatal) {
    (void)pgstore_commit(ps); /* a failure loses nothing Raft lacks */
  }
  pgstore_free(ps);
}

/* A read for a caller that may block (store_read_wait): the reader's job
 * runs on this thread, so it needs no worker of the thread pool. */
static int pgstore_read_blocking(struct store *s, int64_t offset, size_t max_bytes,
                                 struct store_region *out)
{
  struct pgstore *ps = pgstore_from(s);
  pgreader_set_inline(ps->reader, true);
  int rv = pgstore_read(s, offset, max_bytes, out);
  pgreader_set_inline(ps->reader, false);
  return rv;
}

static const struct store_ops pgstore_ops = {
    .append = pgstore_append,
    .read = pgstore_read,
    .lookup_time = pgstore_lookup_time,
    .flush = pgstore_flush,
    .truncate = pgstore_truncate,
    .delete_before = pgstore_delete_before,
    .reset = pgstore_reset,
    .retention = pgstore_retention,
    .retention_point = pgstore_retention_point,
    .read_blocking = pgstore_read_blocking,
    .info = pgstore_info,
    .close = pgstore_close,
};

/* ---- open ---- */

/* Connects ps->conn: within timeout_ms (0: as long as libpq takes, its
 * connect_timeout if the connection string sets one). */
static int pgstore_connect(struct pgstore *ps, int timeout_ms)
{
  ps->conn = NULL;
  return pgstore_schema_connect(ps->conninfo, ps->password_file, timeout_ms, &ps->conn,
                                ps->s.errmsg, sizeof ps->s.errmsg);
}

/* Where the partition's rows end, on the new connection, against what
 * this store committed: 0, CAIRN_EDATABASE (they differ, or the read
 * failed; the store is failed with why), or PGSTORE_LOST when the new
 * connection was lost too (the server dropping every connection again:
 * worth another try). */
static int pgstore_check_end(struct pgstore *ps)
{
  PGresult *res =
      PQexecParams(ps->conn,
                   "SELECT last_offset, raft_index FROM cairn_batches"
                   " WHERE topic_id = $1 AND partition = $2 ORDER BY base_offset DESC LIMIT 1",
                   2, NULL, (const char *const[]){ps->topic_id, ps->partition}, NULL, NULL, 0);
  if (PQresultStatus(res) != PGRES_TUPLES_OK) {
    bool lost = pgstore_schema_conn_lost(ps->conn, res);
    int rv = lost ? PGSTORE_LOST
                  : pgstore_fail(ps, CAIRN_EDATABASE,
                                 "postgresql: reconnected, but reading where the partition's "
                                 "rows end failed: %s",
                                 PQresultErrorMessage(res));
    PQclear(res);
    return rv;
  }
  bool none = PQntuples(res) == 0;
  int64_t next = none ? ps->start_saved : pgstore_get_i64(res, 0, 0) + 1;
  uint64_t index = none ? ps->prefix_index : (uint64_t)pgstore_get_i64(res, 0, 1);
  PQclear(res);
  if (next != ps->durable_offset || index != ps->durable_index) {
    return pgstore_fail(ps, CAIRN_EDATABASE,
                        "postgresql: reconnected, but the partition's rows end at offset %" PRId64
                        " (Raft index %" PRIu64 "), not %" PRId64 " (%" PRIu64 ") as committed",
                        next, index, ps->durable_offset, ps->durable_index);
  }
  return 0;
}

/* The connection was lost while nothing was pending (no transaction
 * open: everything this store wrote is committed). Connects again (each
 * connection within PGSTORE_RECONNECT_MS) and checks that the partition's rows still end
 * where this store's state says; then the failed statement may simply run
 * again. A new connection lost during that check (the server dropping
 * every connection more than once, as pg_terminate_backend in a loop
 * does) is tried again, up to PGSTORE_RECONNECT_TRIES connections.
 * Returns 0, or a negative code with the new connection dropped (the
 * caller then latches fatal: the owner revives off its thread). */
static int pgstore_reconnect(struct pgstore *ps)
{
  PGconn *old = ps->conn;
  int rv = PGSTORE_LOST;
  for (int tries = 0; rv == PGSTORE_LOST && tries < PGSTORE_RECONNECT_TRIES; tries++) {
    ps->conn = NULL;
    rv = pgstore_connect(ps, PGSTORE_RECONNECT_MS);
    if (rv == 0) {
      rv = pgstore_check_end(ps);
    }
    if (rv == PGSTORE_LOST) {
      PQfinish(ps->conn);
    }
  }
  if (rv == PGSTORE_LOST) {
    ps->conn = NULL;
    rv = pgstore_fail(ps, CAIRN_EDATABASE,
                      "postgresql: reconnected %d times, each new connection lost at once",
                      PGSTORE_RECONNECT_TRIES);
  }
  if (rv != 0) {
    PQfinish(ps->conn);
    ps->conn = old; /* its error message stays the one reported */
    return rv;
  }
  PQfinish(old);
  return 0;
}

/* Registers the topic and partition (idempotent) and reads start and
 * prefix_index. */
static int pgstore_load_partition(struct pgstore *ps, const char *topic)
{
  const char *tv[2] = {ps->topic_id, topic != NULL ? topic : ""};
  if (pgstore_done(pgstore_exec(ps, "registering the topic",
                                "INSERT INTO cairn_topics (topic_id, name) VALUES ($1, $2)"
                                " ON CONFLICT (topic_id) DO UPDATE SET name = EXCLUDED.name",
                                2, tv, NULL, NULL, 0)) != 0) {
    return CAIRN_EDATABASE;
  }
  if (pgstore_done(
          pgstore_exec_tp(ps, "registering the partition",
                          "INSERT INTO cairn_partitions (topic_id, partition, start_offset,"
                          " prefix_index) VALUES ($1, $2, 0, 0) ON CONFLICT DO NOTHING",
                          NULL, 0)) != 0) {
    return CAIRN_EDATABASE;
  }
  PGresult *res = pgstore_exec_tp(ps, "reading the partition",
                                  "SELECT start_offset, prefix_index FROM cairn_partitions"
                                  " WHERE topic_id = $1 AND partition = $2",
                                  NULL, 0);
  if (res == NULL) {
    return CAIRN_EDATABASE;
  }
  ps->start = pgstore_get_i64(res, 0, 0);
  ps->start_saved = ps->start;
  ps->prefix_index = (uint64_t)pgstore_get_i64(res, 0, 1);
  PQclear(res);
  return 0;
}

/* next, last_index and size from the rows. */
static int pgstore_load_rows(struct pgstore *ps)
{
  PGresult *res = pgstore_exec_tp(ps, "reading the log end",
                                  "SELECT last_offset, raft_index FROM cairn_batches"
                                  " WHERE topic_id = $1 AND partition = $2"
                                  " ORDER BY base_offset DESC LIMIT 1",
                                  NULL, 0);
  if (res == NULL) {
    return CAIRN_EDATABASE;
  }
  bool none = PQntuples(res) == 0;
  ps->next = none ? ps->start : pgstore_get_i64(res, 0, 0) + 1;
  ps->last_index = none ? ps->prefix_index : (uint64_t)pgstore_get_i64(res, 0, 1);
  PQclear(res);
  res = pgstore_exec_tp(ps, "reading the log size",
                        "SELECT coalesce(sum(length(batch)), 0) FROM cairn_batches"
                        " WHERE topic_id = $1 AND partition = $2",
                        NULL, 0);
  if (res == NULL) {
    return CAIRN_EDATABASE;
  }
  ps->size_bytes = (uint64_t)pgstore_get_i64(res, 0, 0);
  PQclear(res);
  ps->durable_offset = ps->next;
  ps->durable_index = ps->last_index;
  return 0;
}

/* Connects, migrates and loads the partition's state into ps (a new
 * store, or a revive's shadow). Blocks. */
static int pgstore_establish(struct pgstore *ps)
{
  int rv = pgstore_connect(ps, 0);
  if (rv == 0) {
    rv = pgstore_schema_migrate(ps->conn, ps->s.errmsg, sizeof ps->s.errmsg);
  }
  if (rv == 0) {
    rv = pgstore_load_partition(ps, ps->topic);
  }
  if (rv == 0) {
    rv = pgstore_load_rows(ps);
  }
  return rv;
}

/* Written behind: the loop's writer for this database. */
static int pgstore_join_writer(struct pgstore *ps, uv_loop_t *loop)
{
  int rv = pgwriter_acquire(loop, ps->conninfo, ps->password_file, &ps->writer);
  if (rv != 0) {
    ps->writer = NULL;
    return pgstore_fail(ps, rv, "postgresql: the write-behind: %s", cairn_strerror(rv));
  }
  pgwriter_join(ps->writer, &ps->member, &pgstore_member_ops);
  ps->sent_offset = ps->next;
  ps->loop = loop;
  return 0;
}

/* The reader of the rows below the tail (pgreader.h): jobs on the loop's
 * thread pool, or at once without a loop. */
static int pgstore_open_reader(struct pgstore *ps, const struct pgstore_opts *o)
{
  struct pgreader_opts ro = {
      .conninfo = ps->conninfo,
      .password_file = ps->password_file,
      .topic_id = o->topic_id,
      .partition = o->partition,
      .cache_bytes = o->read_cache_bytes,
      .loop = o->loop,
      .on_done = pgstore_on_reader_done,
      .arg = ps,
  };
  int rv = pgreader_new(&ro, &ps->reader);
  return rv != 0 ? pgstore_fail(ps, rv, "out of memory") : 0;
}

static char *pgstore_strdup_opt(const char *s, bool *oom)
{
  if (s == NULL) {
    return NULL;
  }
  char *d = strdup(s);
  *oom = *oom || d == NULL;
  return d;
}

/* Copies what the store keeps of o (none of it touches a loop). */
static int pgstore_take_opts(struct pgstore *ps, const struct pgstore_opts *o)
{
  ps->s.ops = &pgstore_ops;
  snprintf(ps->topic_id, sizeof ps->topic_id, "%" PRIu32, o->topic_id);
  snprintf(ps->partition, sizeof ps->partition, "%" PRId32, o->partition);
  store_set_retention(&ps->s, o->retention_bytes, o->retention_ms);
  ps->max_batch_bytes = o->max_batch_bytes ? o->max_batch_bytes : BATCH_DEFAULT_MAX_BYTES;
  ps->tail_max = o->tail_bytes ? o->tail_bytes : PGSTORE_DEFAULT_TAIL_BYTES;
  ps->commit_each_append = o->commit_each_append;
  ps->topic_id_num = o->topic_id;
  ps->partition_num = o->partition;
  ps->pending_max = o->pending_bytes ? o->pending_bytes : PGSTORE_DEFAULT_PENDING_BYTES;
  bool oom = false;
  ps->conninfo = pgstore_strdup_opt(o->conninfo, &oom);
  ps->password_file = pgstore_strdup_opt(o->password_file, &oom);
  ps->topic = pgstore_strdup_opt(o->topic != NULL ? o->topic : "", &oom);
  return oom ? pgstore_fail(ps, CAIRN_ENOMEM, "out of memory") : 0;
}

int pgstore_open_begin(const struct pgstore_opts *o, struct store **out, char *err,
                       size_t errlen)
{
  if (o == NULL || o->conninfo == NULL) {
    snprintf(err, errlen, "pgstore: no connection string");
    return CAIRN_EINVAL;
  }
  struct pgstore *ps = calloc(1, sizeof *ps);
  if (ps == NULL) {
    snprintf(err, errlen, "pgstore: out of memory");
    return CAIRN_ENOMEM;
  }
  int rv = pgstore_take_opts(ps, o);
  if (rv == 0) {
    rv = pgstore_establish(ps);
  }
  if (rv != 0) {
    snprintf(err, errlen, "topic %s partition %s: %s", ps->topic_id, ps->partition, ps->s.errmsg);
    pgstore_free(ps);
    return rv;
  }
  *out = &ps->s;
  return 0;
}

int pgstore_open_end(struct store *s, const struct pgstore_opts *o, char *err, size_t errlen)
{
  struct pgstore *ps = (struct pgstore *)s;
  ps->on_fatal = o->on_fatal;
  ps->on_fatal_arg = o->on_fatal_arg;
  ps->on_durable = o->on_durable;
  ps->on_durable_arg = o->on_durable_arg;
  ps->on_readable = o->on_readable;
  ps->on_readable_arg = o->on_readable_arg;
  int rv = pgstore_open_reader(ps, o);
  if (rv == 0 && o->loop != NULL) {
    rv = pgstore_join_writer(ps, o->loop);
  }
  if (rv != 0) {
    snprintf(err, errlen, "topic %s partition %s: %s", ps->topic_id, ps->partition, ps->s.errmsg);
    pgstore_free(ps);
    return rv;
  }
  return 0;
}

void pgstore_open_abandon(struct store *s)
{
  if (s != NULL) {
    pgstore_free((struct pgstore *)s);
  }
}

int pgstore_open(const struct pgstore_opts *o, struct store **out, char *err, size_t errlen)
{
  struct store *s = NULL;
  int rv = pgstore_open_begin(o, &s, err, errlen);
  if (rv == 0) {
    rv = pgstore_open_end(s, o, err, errlen);
  }
  if (rv == 0) {
    *out = s;
  }
  return rv;
}

/* ---- revive ---- */

int pgstore_revive_begin(struct store *s, struct pgstore_revive **out)
{
  struct pgstore *ps = pgstore_from(s);
  if (!ps->s.fatal) {
    return CAIRN_EINVAL;
  }
  if (ps->member.inflight || ps->settling) {
    return -EBUSY; /* the writer's job (or a settle) may still commit rows of this store */
  }
  /* A retention job of the reader must not commit after the revive has
   * read the partition's start: it ends (canceled) now. */
  pgreader_stop(ps->reader);
  struct pgstore_revive *job = calloc(1, sizeof *job);
  if (job == NULL) {
    return CAIRN_ENOMEM;
  }
  struct pgstore *sh = &job->shadow;
  memcpy(sh->topic_id, ps->topic_id, sizeof sh->topic_id);
  memcpy(sh->partition, ps->partition, sizeof sh->partition);
  bool oom = false;
  sh->conninfo = pgstore_strdup_opt(ps->conninfo, &oom);
  sh->password_file = pgstore_strdup_opt(ps->password_file, &oom);
  sh->topic = pgstore_strdup_opt(ps->topic, &oom);
  if (oom) {
    pgstore_revive_end(NULL, job);
    return CAIRN_ENOMEM;
  }
  job->status = CAIRN_EDATABASE;
  *out = job;
  return 0;
}

/* The probe's table: one per backend (its pid in the name), so that
 * revives of several partitions on one database never wait on each other
 * for the name; created and dropped inside one rolled-back transaction. */
static int pgstore_probe_create(struct pgstore *ps, char *table, size_t tablelen)
{
  PGresult *res = pgstore_exec(ps, "probe: finding cairn_batches' tablespace",
                               "SELECT coalesce(t.spcname, d.spcname) FROM pg_class c"
                               " LEFT JOIN pg_tablespace t ON t.oid = c.reltablespace"
                               " JOIN pg_database db ON db.datname = current_database()"
                               " JOIN pg_tablespace d ON d.oid = db.dattablespace"
                               " WHERE c.oid = 'cairn_batches'::regclass",
                               0, NULL, NULL, NULL, 0);
  if (res == NULL) {
    return CAIRN_EDATABASE;
  }
  char *space = PQescapeIdentifier(ps->conn, PQgetvalue(res, 0, 0), strlen(PQgetvalue(res, 0, 0)));
  PQclear(res);
  if (space == NULL) {
    return pgstore_fail(ps, CAIRN_ENOMEM, "probe: quoting the tablespace's name");
  }
  snprintf(table, tablelen, "cairn_probe_%d", PQbackendPID(ps->conn));
  char sql[256];
  snprintf(sql, sizeof sql, "CREATE UNLOGGED TABLE %s (pad text) TABLESPACE %s", table, space);
  PQfreemem(space);
  return pgstore_cmd(ps, "probe: creating its table", sql);
}

/* Proves the database takes writes before a revived store lets its owner
 * apply again (pgstore.h, "reviving"): in one transaction that is rolled
 * back, takes cairn_batches' write lock (a session holding the table, or
 * a statement timeout, fails it as it would fail the writer's COPY) and
 * writes PGSTORE_PROBE_BYTES into a new table in cairn_batches'
 * tablespace, which must extend a file there (a full disk fails it; a
 * plain read, or a row into a page with room, would not). Returns 0 or
 * the failure, with ps->s.errmsg naming it. Blocks. */
static int pgstore_probe(struct pgstore *ps)
{
  int rv = pgstore_begin(ps);
  if (rv == 0) {
    char ms[64];
    snprintf(ms, sizeof ms, "SET LOCAL lock_timeout = %d", PGSTORE_PROBE_LOCK_MS);
    rv = pgstore_cmd(ps, "probe: setting lock_timeout", ms);
  }
  if (rv == 0) {
    rv = pgstore_cmd(ps, "probe: taking cairn_batches' write lock",
                     "LOCK TABLE cairn_batches IN ROW EXCLUSIVE MODE");
  }
  char table[64];
  if (rv == 0) {
    rv = pgstore_probe_create(ps, table, sizeof table);
  }
  if (rv == 0) {
    /* Rows of PGSTORE_PROBE_ROW bytes stay inline and uncompressed (below
     * PostgreSQL's 2 kB TOAST threshold): four to a page. */
    char sql[256];
    snprintf(sql, sizeof sql, "INSERT INTO %s SELECT repeat('x', %d) FROM generate_series(1, %d)",
             table, PGSTORE_PROBE_ROW, PGSTORE_PROBE_BYTES / PGSTORE_PROBE_ROW);
    rv = pgstore_cmd(ps, "probe: writing to cairn_batches' tablespace", sql);
  }
  if (rv != 0) {
    return rv; /* rolled back (pgstore_db_fail) */
  }
  rv = pgstore_cmd(ps, "probe: rolling back", "ROLLBACK");
  ps->in_tx = false;
  return rv;
}

int pgstore_revive_run(struct pgstore_revive *job)
{
  job->status = pgstore_establish(&job->shadow);
  if (job->status == 0) {
    job->status = pgstore_probe(&job->shadow);
  }
  return job->status;
}

/* Frees what the shadow still owns (its connection unless adopted). */
static void pgstore_revive_free(struct pgstore_revive *job)
{
  struct pgstore *sh = &job->shadow;
  PQfinish(sh->conn);
  free(sh->conninfo);
  free(sh->password_file);
  free(sh->topic);
  free(job);
}

int pgstore_revive_end(struct store *s, struct pgstore_revive *job)
{
  struct pgstore *sh = &job->shadow;
  if (s == NULL) {
    pgstore_revive_free(job);
    return 0;
  }
  struct pgstore *ps = pgstore_from(s);
  int status = job->status;
  if (status != 0) {
    snprintf(ps->s.errmsg, sizeof ps->s.errmsg, "%s",
             sh->s.errmsg[0] ? sh->s.errmsg : "postgresql: reconnecting did not run");
    pgstore_revive_free(job);
    return status;
  }
  /* What PostgreSQL committed is the store now: the tail may hold rows a
   * failed transaction rolled back, so it starts again empty, and what
   * the reader kept is looked up again. */
  pgreader_invalidate(ps->reader);
  PQfinish(ps->conn);
  ps->conn = sh->conn;
  sh->conn = NULL;
  pgstore_tail_drop_front(ps, ps->ntail);
  ps->in_tx = false;
  ps->start = sh->start;
  ps->start_saved = sh->start;
  ps->prefix_index = sh->prefix_index;
  ps->next = sh->next;
  ps->last_index = sh->last_index;
  ps->size_bytes = sh->size_bytes;
  ps->durable_offset = sh->durable_offset;
  ps->durable_index = sh->durable_index;
  ps->sent_offset = sh->next;
  ps->pending_bytes = 0;
  ps->s.fatal = false;
  ps->s.errmsg[0] = '\0';
  pgstore_revive_free(job);
  return 0;
}
