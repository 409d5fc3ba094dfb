/* test_pgwriter.c - pgstore written behind by the loop's writer
 * (pgwriter.h): a stalled database does not stop the loop, the batches of
 * two partitions go in one transaction, a failed transaction latches every
 * store in it and a revive takes Raft's replay with nothing twice, a
 * flush answers at once and completes when the writer commits (the loop
 * turning while the database is stalled), a close never waits (the job
 * in flight commits alone), a snapshot's settle runs off the loop, and
 * a snapshot install settles first, and a connection lost inside a
 * transaction (the writer's or a settle's) sends it once more. Needs a
 * database: run through tests/lib/with_pg.sh (CAIRN_PG_CONNINFO). */
#include "common/err.h"
#include "storage/pgstore.h"
#include "pg_sql.h"
#include "testutil.h"

#include <errno.h>
#include <libpq-fe.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include <cmocka.h>

static void sql_cmd(PGconn *conn, const char *q)
{
  PQclear(pg_sql(conn, q));
}

static int fatal_calls;
static int durable_calls;

static void on_fatal(void *arg)
{
  (void)arg;
  fatal_calls++;
}

static void on_durable(void *arg)
{
  (void)arg;
  durable_calls++;
}

/* A store on loop (written behind), or without a loop (synchronous). */
static struct store *open_store(uv_loop_t *loop, uint32_t topic_id, int32_t partition)
{
  struct pgstore_opts o = {.conninfo = pg_sql_conninfo(),
                           .topic = "pgwriter",
                           .topic_id = topic_id,
                           .partition = partition,
                           .loop = loop,
                           .on_fatal = on_fatal,
                           .on_durable = on_durable};
  struct store *s = NULL;
  char err[512];
  if (pgstore_open(&o, &s, err, sizeof err) != 0) {
    fail_msg("pgstore_open: %s", err);
  }
  return s;
}

static void append_batch(struct store *s, uint64_t tag, uint64_t index)
{
  size_t len;
  uint8_t *data = tu_make_batch(tag, 5, 20, 100 * (int64_t)tag, &len);
  struct store_batch b = {data, len};
  int64_t base;
  assert_int_equal(store_append(s, &b, 1, index, &base), 0);
  free(data);
}

static bool committed(struct store *s)
{
  struct store_info info;
  store_info(s, &info);
  return info.durable_offset == info.next_offset && info.durable_index == info.last_index;
}

/* Runs the loop until both stores are committed (or 10 s pass). */
static void run_until_committed(uv_loop_t *loop, struct store *a, struct store *b)
{
  for (int i = 0; i < 10000 && !(committed(a) && (b == NULL || committed(b))); i++) {
    uv_run(loop, UV_RUN_NOWAIT);
    uv_sleep(1);
  }
  assert_true(committed(a));
  assert_true(b == NULL || committed(b));
}

static void close_loop(uv_loop_t *loop)
{
  uv_run(loop, UV_RUN_DEFAULT); /* the writer's handle closes */
  assert_int_equal(uv_loop_close(loop), 0);
}

/* ---- a stalled database ---- */

struct stall {
  uv_timer_t timer;
  PGconn *locker; /* holds a lock that blocks the writer's COPY */
  struct store *a;
  struct store *b;
  int ticks;
  bool stalled_seen; /* at the release: nothing committed, reads served */
};

static void stall_on_tick(uv_timer_t *t)
{
  struct stall *st = t->data;
  st->ticks++;
  if (st->ticks < 20) {
    return;
  }
  /* 20 ticks of 10 ms on the same loop while the writer waits on the
   * lock: nothing is committed, yet reads see what was applied. */
  struct store_info ia, ib;
  store_info(st->a, &ia);
  store_info(st->b, &ib);
  struct store_region r;
  assert_int_equal(store_read(st->a, 0, SIZE_MAX, &r), 0);
  assert_int_equal(r.next_offset, 10);
  store_region_release(&r);
  st->stalled_seen = ia.durable_offset == 0 && ib.durable_offset == 0 && ia.next_offset == 10 &&
                     ib.next_offset == 5;
  sql_cmd(st->locker, "COMMIT");
  uv_timer_stop(t);
}

static void test_pgwriter_loop_turns_while_the_database_is_stalled_and_one_transaction_takes_both(
    void **state)
{
  (void)state;
  uv_loop_t loop;
  assert_int_equal(uv_loop_init(&loop), 0);
  struct stall st = {0};
  st.a = open_store(&loop, 201, 0);
  st.b = open_store(&loop, 201, 1);
  st.locker = pg_sql_connect();
  sql_cmd(st.locker, "BEGIN");
  sql_cmd(st.locker, "LOCK TABLE cairn_batches IN EXCLUSIVE MODE"); /* reads go on, writes wait */
  /* Two partitions' entries in one loop turn. */
  append_batch(st.a, 1, 1);
  append_batch(st.a, 2, 2);
  append_batch(st.b, 3, 1);
  assert_int_equal(uv_timer_init(&loop, &st.timer), 0);
  st.timer.data = &st;
  assert_int_equal(uv_timer_start(&st.timer, stall_on_tick, 10, 10), 0);
  run_until_committed(&loop, st.a, st.b);
  assert_true(st.ticks >= 20);
  assert_true(st.stalled_seen);
  PQfinish(st.locker);
  assert_int_equal(pg_sql_value("SELECT count(*) FROM cairn_batches WHERE topic_id = 201"), 3);
  /* One transaction wrote the rows of both partitions. */
  assert_int_equal(pg_sql_value("SELECT count(DISTINCT xmin::text) FROM cairn_batches"
                                " WHERE topic_id = 201"),
                   1);
  uv_close((uv_handle_t *)&st.timer, NULL);
  store_close(st.a);
  store_close(st.b);
  close_loop(&loop);
}

/* ---- a failed transaction ---- */

static void revive(struct store *s)
{
  struct pgstore_revive *job = NULL;
  assert_int_equal(pgstore_revive_begin(s, &job), 0);
  assert_int_equal(pgstore_revive_run(job), 0);
  assert_int_equal(pgstore_revive_end(s, job), 0);
}

static void test_pgwriter_failed_transaction_latches_every_store_in_it_and_revives_to_the_commit(
    void **state)
{
  (void)state;
  uv_loop_t loop;
  assert_int_equal(uv_loop_init(&loop), 0);
  struct store *a = open_store(&loop, 202, 0);
  struct store *b = open_store(&loop, 202, 1);
  append_batch(a, 1, 1);
  append_batch(b, 2, 1);
  run_until_committed(&loop, a, b);
  /* A row in the way of b's next batch: the COPY holding both fails. */
  PGconn *conn = pg_sql_connect();
  sql_cmd(conn, "INSERT INTO cairn_batches SELECT topic_id, partition, 5, 9, max_timestamp,"
                " raft_index, batch FROM cairn_batches WHERE topic_id = 202 AND partition = 1");
  fatal_calls = 0;
  append_batch(a, 3, 2);
  append_batch(b, 4, 2);
  struct store_info ia, ib;
  for (int i = 0; i < 10000 && fatal_calls < 2; i++) {
    uv_run(&loop, UV_RUN_NOWAIT);
    uv_sleep(1);
  }
  assert_int_equal(fatal_calls, 2);
  store_info(a, &ia);
  store_info(b, &ib);
  assert_true(ia.fatal && ib.fatal);
  assert_int_equal(ia.next_offset, 5); /* back at the commit */
  assert_int_equal(ib.next_offset, 5);
  assert_non_null(strstr(store_errmsg(b), "postgresql"));
  sql_cmd(conn, "DELETE FROM cairn_batches WHERE topic_id = 202 AND partition = 1"
                " AND base_offset = 5");
  PQfinish(conn);
  revive(a);
  revive(b);
  /* Raft replays entry 2 on both: applied once each. */
  append_batch(a, 3, 2);
  append_batch(b, 4, 2);
  run_until_committed(&loop, a, b);
  assert_int_equal(pg_sql_value("SELECT count(*) FROM cairn_batches WHERE topic_id = 202"), 4);
  store_close(a);
  store_close(b);
  close_loop(&loop);
  struct store *again = open_store(NULL, 202, 1);
  struct store_region r;
  assert_int_equal(store_read(again, 5, SIZE_MAX, &r), 0);
  assert_int_equal(tu_check_batch(r.mem, r.len, 4, 5, 20), 0);
  store_region_release(&r);
  store_info(again, &ib);
  assert_int_equal(ib.next_offset, 10);
  assert_int_equal(ib.last_index, 2);
  store_close(again);
}

/* ---- close and flush ---- */

/* A close never waits for the database: with a job in flight (held on a
 * locked cairn_batches) it returns at once; the job goes on and commits
 * its rows once the lock goes, and the batch that was not sent is left to
 * the owner's Raft replay (the reopened store ends before it). */
static void test_pgwriter_close_never_waits_and_the_job_in_flight_commits_alone(void **state)
{
  (void)state;
  uv_loop_t loop;
  assert_int_equal(uv_loop_init(&loop), 0);
  struct store *s = open_store(&loop, 203, 0);
  append_batch(s, 1, 1);
  uv_run(&loop, UV_RUN_NOWAIT); /* the job starts */
  append_batch(s, 2, 2);        /* waits for the next one */
  durable_calls = 0;
  assert_int_equal(store_flush(s, INT64_MAX), CAIRN_EPENDING); /* never waits on the loop */
  for (int i = 0; i < 10000 && durable_calls == 0; i++) {
    uv_run(&loop, UV_RUN_NOWAIT);
    uv_sleep(1);
  }
  assert_int_equal(durable_calls, 1);
  assert_true(committed(s));
  assert_int_equal(store_flush(s, INT64_MAX), 0);
  PGconn *locker = pg_sql_connect();
  sql_cmd(locker, "BEGIN");
  sql_cmd(locker, "LOCK TABLE cairn_batches IN EXCLUSIVE MODE"); /* reads go on, writes wait */
  append_batch(s, 3, 3);
  uv_run(&loop, UV_RUN_NOWAIT); /* the job with batch 3 starts, and waits on the lock */
  append_batch(s, 4, 4);
  store_close(s); /* returns with the job still waiting: else this test hangs */
  assert_int_equal(pg_sql_value("SELECT count(*) FROM cairn_batches WHERE topic_id = 203"), 2);
  sql_cmd(locker, "COMMIT");
  PQfinish(locker);
  close_loop(&loop); /* the job's after-work */
  s = open_store(NULL, 203, 0);
  struct store_info info;
  store_info(s, &info);
  assert_int_equal(info.next_offset, 15);
  assert_int_equal(info.last_index, 3);
  store_close(s);
  assert_int_equal(pg_sql_value("SELECT count(*) FROM cairn_batches WHERE topic_id = 203"), 3);
}

/* store_flush on a stalled database (a session holds cairn_batches against
 * writes): it answers CAIRN_EPENDING at once, the loop keeps turning (a
 * timer fires, another partition's reads are served) while the commit
 * waits, nothing is committed under the lock, and once the lock goes the
 * writer commits, on_durable fires once and the flush answers 0. */
struct op_stall {
  uv_timer_t timer;
  PGconn *locker;
  struct store *s;     /* the store whose operation waits */
  struct store *other; /* another partition on the same loop, 5 records */
  int ticks;
  int reads_served; /* reads of other answered while the operation waited */
  bool stalled_seen; /* at the release: still pending, nothing changed */
};

/* A tick of the loop's timer while the operation waits: another
 * partition's read is served. Returns whether it is time to check and
 * release the lock (the 20th tick). */
static bool op_stall_tick(struct op_stall *st)
{
  st->ticks++;
  struct store_region r;
  if (store_read(st->other, 0, SIZE_MAX, &r) == 0 && r.next_offset == 5) {
    st->reads_served++;
  }
  store_region_release(&r);
  return st->ticks == 20;
}

static void flush_stall_on_tick(uv_timer_t *t)
{
  struct op_stall *st = t->data;
  if (!op_stall_tick(st)) {
    return;
  }
  struct store_info info;
  store_info(st->s, &info);
  st->stalled_seen = durable_calls == 0 && info.durable_offset == 0 && info.next_offset == 10 &&
                     store_flush(st->s, INT64_MAX) == CAIRN_EPENDING;
  sql_cmd(st->locker, "COMMIT");
  uv_timer_stop(t);
}

static void test_pgwriter_flush_never_waits_on_the_loop_and_completes_once_the_lock_goes(
    void **state)
{
  (void)state;
  uv_loop_t loop;
  assert_int_equal(uv_loop_init(&loop), 0);
  struct op_stall st = {0};
  st.s = open_store(&loop, 206, 0);
  st.other = open_store(&loop, 206, 1);
  append_batch(st.other, 9, 1);
  run_until_committed(&loop, st.other, NULL);
  st.locker = pg_sql_connect();
  sql_cmd(st.locker, "BEGIN");
  sql_cmd(st.locker, "LOCK TABLE cairn_batches IN EXCLUSIVE MODE"); /* reads go on, writes wait */
  append_batch(st.s, 1, 1);
  uv_run(&loop, UV_RUN_NOWAIT); /* the writer's job starts, and waits on the lock */
  append_batch(st.s, 2, 2);     /* waits for the next job */
  durable_calls = 0;
  assert_int_equal(store_flush(st.s, INT64_MAX), CAIRN_EPENDING); /* answered, not waited */
  assert_int_equal(uv_timer_init(&loop, &st.timer), 0);
  st.timer.data = &st;
  assert_int_equal(uv_timer_start(&st.timer, flush_stall_on_tick, 10, 10), 0);
  for (int i = 0; i < 20000 && durable_calls == 0; i++) {
    uv_run(&loop, UV_RUN_NOWAIT);
    uv_sleep(1);
  }
  assert_true(st.ticks >= 20);
  assert_true(st.stalled_seen);
  assert_true(st.reads_served >= 20);
  assert_int_equal(durable_calls, 1);
  assert_true(committed(st.s));
  assert_int_equal(store_flush(st.s, INT64_MAX), 0);
  PQfinish(st.locker);
  assert_int_equal(pg_sql_value("SELECT count(*) FROM cairn_batches WHERE topic_id = 206"
                                " AND partition = 0"),
                   2);
  uv_close((uv_handle_t *)&st.timer, NULL);
  store_close(st.s);
  store_close(st.other);
  close_loop(&loop);
}

/* Calls op until it answers something else than CAIRN_EPENDING, running
 * the loop meanwhile (as a caller that asks again). */
static int until_done(uv_loop_t *loop, struct store *s, int (*op)(struct store *, int64_t),
                      int64_t offset)
{
  int rv = CAIRN_EPENDING;
  for (int i = 0; i < 20000 && rv == CAIRN_EPENDING; i++) {
    rv = op(s, offset);
    if (rv == CAIRN_EPENDING) {
      uv_run(loop, UV_RUN_NOWAIT);
      uv_sleep(1);
    }
  }
  return rv;
}

static int do_delete_before(struct store *s, int64_t offset)
{
  return store_delete_before(s, offset);
}

static int do_truncate(struct store *s, int64_t offset)
{
  return store_truncate(s, offset);
}

/* A snapshot install (delete_before above next) on a store with batches
 * in flight and waiting: it answers CAIRN_EPENDING, waits for the job in
 * flight, commits the batch that waited and empties the store in one
 * transaction off the loop; asked again it answers 0, the store restarting
 * empty at the snapshot's offset, committed, and going on from there. */
static void test_pgwriter_snapshot_install_settles_then_restarts_committed(void **state)
{
  (void)state;
  uv_loop_t loop;
  assert_int_equal(uv_loop_init(&loop), 0);
  struct store *s = open_store(&loop, 204, 0);
  append_batch(s, 1, 1);
  uv_run(&loop, UV_RUN_NOWAIT);
  append_batch(s, 2, 2);
  durable_calls = 0;
  assert_int_equal(store_delete_before(s, 100), CAIRN_EPENDING);
  assert_int_equal(until_done(&loop, s, do_delete_before, 100), 0);
  assert_true(durable_calls >= 1); /* the op's end told the owner */
  assert_true(committed(s));
  struct store_info info;
  store_info(s, &info);
  assert_int_equal(info.start_offset, 100);
  assert_int_equal(info.next_offset, 100);
  append_batch(s, 3, 7);
  run_until_committed(&loop, s, NULL);
  store_close(s);
  close_loop(&loop);
  s = open_store(NULL, 204, 0);
  store_info(s, &info);
  assert_int_equal(info.start_offset, 100);
  assert_int_equal(info.next_offset, 105);
  assert_int_equal(info.last_index, 7);
  store_close(s);
  assert_int_equal(pg_sql_value("SELECT count(*) FROM cairn_batches WHERE topic_id = 204"), 1);
}

/* A truncate on a stalled database (a session holds cairn_batches against
 * writes): it answers CAIRN_EPENDING, the loop keeps turning (a timer
 * fires, another partition's reads are served) and appends are refused
 * while it waits; once the lock goes it commits the batch that was not
 * written yet and cuts in one transaction, and a reopened store ends at
 * the cut. A cut inside an entry is refused once asked again, and the
 * store is unchanged. */
static void truncate_stall_on_tick(uv_timer_t *t)
{
  struct op_stall *st = t->data;
  if (!op_stall_tick(st)) {
    return;
  }
  size_t len;
  uint8_t *data = tu_make_batch(9, 5, 20, 900, &len);
  struct store_batch b = {data, len};
  int64_t base;
  struct store_info info;
  store_info(st->s, &info);
  st->stalled_seen = store_append(st->s, &b, 1, 9, &base) == -EBUSY &&
                     store_truncate(st->s, 10) == CAIRN_EPENDING && info.next_offset == 15;
  free(data);
  sql_cmd(st->locker, "COMMIT");
  uv_timer_stop(t);
}

static void test_pgwriter_truncate_never_waits_on_the_loop_and_cuts_once_the_lock_goes(
    void **state)
{
  (void)state;
  uv_loop_t loop;
  assert_int_equal(uv_loop_init(&loop), 0);
  struct op_stall st = {0};
  st.s = open_store(&loop, 207, 0);
  st.other = open_store(&loop, 207, 1);
  append_batch(st.other, 8, 1);
  append_batch(st.s, 1, 1);
  append_batch(st.s, 2, 2);
  run_until_committed(&loop, st.s, st.other);
  append_batch(st.s, 3, 3); /* not written yet */
  st.locker = pg_sql_connect();
  sql_cmd(st.locker, "BEGIN");
  sql_cmd(st.locker, "LOCK TABLE cairn_batches IN EXCLUSIVE MODE");
  assert_int_equal(store_truncate(st.s, 10), CAIRN_EPENDING);
  assert_int_equal(uv_timer_init(&loop, &st.timer), 0);
  st.timer.data = &st;
  assert_int_equal(uv_timer_start(&st.timer, truncate_stall_on_tick, 10, 10), 0);
  assert_int_equal(until_done(&loop, st.s, do_truncate, 10), 0);
  assert_true(st.ticks >= 20);
  assert_true(st.stalled_seen);
  assert_true(st.reads_served >= 20);
  PQfinish(st.locker);
  struct store_info info;
  store_info(st.s, &info);
  assert_int_equal(info.next_offset, 10);
  assert_int_equal(info.last_index, 2);
  assert_true(committed(st.s));
  /* Inside a batch: refused, nothing changed. */
  assert_int_equal(until_done(&loop, st.s, do_truncate, 7), CAIRN_EINVAL);
  store_info(st.s, &info);
  assert_int_equal(info.next_offset, 10);
  append_batch(st.s, 4, 4);
  run_until_committed(&loop, st.s, NULL);
  uv_close((uv_handle_t *)&st.timer, NULL);
  store_close(st.s);
  store_close(st.other);
  close_loop(&loop);
  struct store *again = open_store(NULL, 207, 0);
  store_info(again, &info);
  assert_int_equal(info.next_offset, 15);
  assert_int_equal(info.last_index, 4);
  struct store_region r;
  assert_int_equal(store_read(again, 10, SIZE_MAX, &r), 0);
  assert_int_equal(tu_check_batch(r.mem, r.len, 4, 5, 20), 0);
  store_region_release(&r);
  store_close(again);
}

/* What a Raft snapshot asks for right after an apply: a settle, refused
 * while a job of the writer holds the store's rows; begun, it runs on the
 * thread pool (as rgroup's snapshot_async) over the store's connection
 * while a session holds cairn_batches against writes: the loop keeps
 * turning (a timer fires, the store takes appends, which the writer does
 * not send meanwhile), and once the lock goes the settle commits what was
 * applied at its begin, then the writer the rest. */
struct settle_run {
  uv_work_t work;
  uv_timer_t timer;
  struct pgstore_settle *job;
  struct store *s;
  PGconn *locker;
  int ticks;
  bool stalled_seen;
  bool ended;
  int end_status;
};

static void settle_work(uv_work_t *w)
{
  struct settle_run *sr = w->data;
  (void)pgstore_settle_run(sr->job); /* its status goes to end */
}

static void settle_after(uv_work_t *w, int status)
{
  struct settle_run *sr = w->data;
  assert_int_equal(status, 0);
  sr->end_status = pgstore_settle_end(sr->job);
  sr->ended = true;
}

static void settle_on_tick(uv_timer_t *t)
{
  struct settle_run *sr = t->data;
  sr->ticks++;
  if (sr->ticks == 5) {
    append_batch(sr->s, 4, 4); /* applied while the settle waits */
  }
  if (sr->ticks < 20) {
    return;
  }
  struct store_info info;
  store_info(sr->s, &info);
  sr->stalled_seen = !sr->ended && info.durable_offset == 5 && info.next_offset == 20 &&
                     store_truncate(sr->s, 5) == CAIRN_EPENDING;
  sql_cmd(sr->locker, "COMMIT");
  uv_timer_stop(t);
}

static void test_pgwriter_settle_runs_off_the_loop_unless_a_job_holds_the_rows(void **state)
{
  (void)state;
  uv_loop_t loop;
  assert_int_equal(uv_loop_init(&loop), 0);
  struct store *s = open_store(&loop, 205, 0);
  struct settle_run sr = {.s = s};
  sr.locker = pg_sql_connect();
  sql_cmd(sr.locker, "BEGIN");
  sql_cmd(sr.locker, "LOCK TABLE cairn_batches IN EXCLUSIVE MODE");
  append_batch(s, 1, 1);
  uv_run(&loop, UV_RUN_NOWAIT); /* the job starts, and waits on the lock */
  append_batch(s, 2, 2);
  assert_int_equal(pgstore_settle_begin(s, &sr.job), -EBUSY);
  assert_null(sr.job);
  assert_false(committed(s));
  sql_cmd(sr.locker, "COMMIT");
  struct store_info info;
  for (int i = 0; i < 10000; i++) {
    store_info(s, &info);
    if (info.durable_offset == 5) {
      break;
    }
    uv_run(&loop, UV_RUN_NOWAIT);
    uv_sleep(1);
  }
  assert_int_equal(info.durable_offset, 5); /* the job's batch; the second waits */
  sql_cmd(sr.locker, "BEGIN");
  sql_cmd(sr.locker, "LOCK TABLE cairn_batches IN EXCLUSIVE MODE");
  append_batch(s, 3, 3);
  assert_int_equal(pgstore_settle_begin(s, &sr.job), 0);
  sr.work.data = &sr;
  assert_int_equal(uv_queue_work(&loop, &sr.work, settle_work, settle_after), 0);
  assert_int_equal(uv_timer_init(&loop, &sr.timer), 0);
  sr.timer.data = &sr;
  assert_int_equal(uv_timer_start(&sr.timer, settle_on_tick, 10, 10), 0);
  for (int i = 0; i < 20000 && !sr.ended; i++) {
    uv_run(&loop, UV_RUN_NOWAIT);
    uv_sleep(1);
  }
  assert_true(sr.ended);
  assert_int_equal(sr.end_status, 0);
  assert_true(sr.stalled_seen);
  store_info(s, &info);
  assert_true(info.durable_offset >= 15); /* the settle's rows; the writer then takes the 4th */
  run_until_committed(&loop, s, NULL);
  store_info(s, &info);
  assert_int_equal(info.durable_offset, 20);
  assert_int_equal(info.last_index, 4);
  assert_int_equal(pg_sql_value("SELECT count(*) FROM cairn_batches WHERE topic_id = 205"), 4);
  PQfinish(sr.locker);
  uv_close((uv_handle_t *)&sr.timer, NULL);
  store_close(s);
  close_loop(&loop);
}

/* ---- a connection lost inside the transaction ---- */

/* A trigger on cairn_batches that terminates its own backend while it
 * inserts a row of topic_id, for the first kills rows (a sequence counts
 * them: it is not rolled back with the transaction it kills). */
static void kill_inserts_of(PGconn *conn, uint32_t topic_id, int kills)
{
  char q[512];
  sql_cmd(conn, "DROP SEQUENCE IF EXISTS cairn_test_kills");
  sql_cmd(conn, "CREATE SEQUENCE cairn_test_kills");
  sql_cmd(conn,
          "CREATE OR REPLACE FUNCTION cairn_test_kill() RETURNS trigger LANGUAGE plpgsql AS $$"
          " BEGIN IF NEW.topic_id = TG_ARGV[0]::bigint"
          " AND nextval('cairn_test_kills') <= TG_ARGV[1]::int THEN"
          " PERFORM pg_terminate_backend(pg_backend_pid()); PERFORM pg_sleep(5);"
          " END IF; RETURN NEW; END $$");
  sql_cmd(conn, "DROP TRIGGER IF EXISTS cairn_test_kill ON cairn_batches");
  snprintf(q, sizeof q,
           "CREATE TRIGGER cairn_test_kill BEFORE INSERT ON cairn_batches FOR EACH ROW"
           " EXECUTE FUNCTION cairn_test_kill('%u', '%d')",
           topic_id, kills);
  sql_cmd(conn, q);
}

static void kill_inserts_end(PGconn *conn)
{
  sql_cmd(conn, "DROP TRIGGER cairn_test_kill ON cairn_batches");
  PQfinish(conn);
}

/* The writer's job loses its connection inside COPY (after BEGIN, before
 * COMMIT): the server rolled it back, so it is sent once more on a new
 * connection and commits, every row once, no store failed. Lost twice in
 * one job, it fails: the store latches and its revive reads back. */
static void test_pgwriter_a_connection_lost_inside_the_transaction_sends_it_once_more(void **state)
{
  (void)state;
  uv_loop_t loop;
  assert_int_equal(uv_loop_init(&loop), 0);
  PGconn *conn = pg_sql_connect();
  kill_inserts_of(conn, 208, 1);
  struct store *s = open_store(&loop, 208, 0);
  fatal_calls = 0;
  append_batch(s, 1, 1);
  append_batch(s, 2, 2);
  run_until_committed(&loop, s, NULL);
  assert_int_equal(fatal_calls, 0);
  assert_int_equal(pg_sql_value("SELECT last_value FROM cairn_test_kills"),
                   3); /* killed, then 2 rows */
  assert_int_equal(pg_sql_value("SELECT count(*) FROM cairn_batches WHERE topic_id = 208"), 2);
  kill_inserts_of(conn, 208, 2);
  append_batch(s, 3, 3);
  for (int i = 0; i < 10000 && fatal_calls == 0; i++) {
    uv_run(&loop, UV_RUN_NOWAIT);
    uv_sleep(1);
  }
  assert_int_equal(fatal_calls, 1);
  struct store_info info;
  store_info(s, &info);
  assert_true(info.fatal);
  assert_int_equal(info.next_offset, 10); /* back at the commit */
  assert_non_null(strstr(store_errmsg(s), "postgresql"));
  kill_inserts_end(conn);
  revive(s);
  append_batch(s, 3, 3); /* Raft's replay */
  run_until_committed(&loop, s, NULL);
  assert_int_equal(pg_sql_value("SELECT count(*) FROM cairn_batches WHERE topic_id = 208"), 3);
  store_close(s);
  close_loop(&loop);
}

/* A settle's transaction loses its connection while it inserts: sent
 * once more on a new connection, it commits, every row once. */
static void test_pgwriter_a_settle_that_loses_its_connection_sends_its_rows_once_more(void **state)
{
  (void)state;
  uv_loop_t loop;
  assert_int_equal(uv_loop_init(&loop), 0);
  struct store *s = open_store(&loop, 209, 0);
  append_batch(s, 1, 1);
  run_until_committed(&loop, s, NULL);
  PGconn *conn = pg_sql_connect();
  kill_inserts_of(conn, 209, 1);
  append_batch(s, 2, 2);
  append_batch(s, 3, 3);
  struct settle_run sr = {.s = s};
  assert_int_equal(pgstore_settle_begin(s, &sr.job), 0);
  sr.work.data = &sr;
  assert_int_equal(uv_queue_work(&loop, &sr.work, settle_work, settle_after), 0);
  for (int i = 0; i < 20000 && !sr.ended; i++) {
    uv_run(&loop, UV_RUN_NOWAIT);
    uv_sleep(1);
  }
  assert_true(sr.ended);
  assert_int_equal(sr.end_status, 0);
  assert_true(committed(s));
  struct store_info info;
  store_info(s, &info);
  assert_false(info.fatal);
  assert_int_equal(info.durable_offset, 15);
  assert_int_equal(pg_sql_value("SELECT last_value FROM cairn_test_kills"), 3);
  assert_int_equal(pg_sql_value("SELECT count(*) FROM cairn_batches WHERE topic_id = 209"), 3);
  kill_inserts_end(conn);
  store_close(s);
  close_loop(&loop);
}

/* A truncate's and a delete_before's transaction (written behind: off
 * the loop, the rows PostgreSQL lacks first) lose their connection while
 * they insert those rows, before COMMIT: the server rolled them back, so
 * each is sent once more on a new connection and commits, every row once,
 * no store failed. Lost twice in one op, it fails: the store latches and
 * its revive reads back what is committed. */
static void test_pgwriter_an_op_that_loses_its_connection_sends_it_once_more(void **state)
{
  (void)state;
  uv_loop_t loop;
  assert_int_equal(uv_loop_init(&loop), 0);
  struct store *s = open_store(&loop, 210, 0);
  fatal_calls = 0;
  append_batch(s, 1, 1);
  append_batch(s, 2, 2);
  run_until_committed(&loop, s, NULL);
  PGconn *conn = pg_sql_connect();
  kill_inserts_of(conn, 210, 1);
  append_batch(s, 3, 3); /* [10, 20): the truncate writes them first */
  append_batch(s, 4, 4);
  assert_int_equal(until_done(&loop, s, do_truncate, 15), 0);
  assert_int_equal(fatal_calls, 0);
  assert_true(committed(s));
  struct store_info info;
  store_info(s, &info);
  assert_int_equal(info.next_offset, 15);
  assert_int_equal(info.last_index, 3);
  assert_int_equal(pg_sql_value("SELECT last_value FROM cairn_test_kills"), 3); /* killed, 2 rows */
  assert_int_equal(pg_sql_value("SELECT count(*) FROM cairn_batches WHERE topic_id = 210"), 3);
  /* A delete_before above the log's end (a snapshot install) is an op
   * too; one within the log only moves the start in memory
   * (test_pgreader). */
  kill_inserts_of(conn, 210, 1);
  append_batch(s, 5, 5); /* [15, 20) */
  assert_int_equal(until_done(&loop, s, do_delete_before, 30), 0);
  assert_int_equal(fatal_calls, 0);
  store_info(s, &info);
  assert_int_equal(info.start_offset, 30);
  assert_int_equal(info.saved_start_offset, 30);
  assert_int_equal(info.next_offset, 30);
  assert_true(committed(s));
  assert_int_equal(pg_sql_value("SELECT count(*) FROM cairn_batches WHERE topic_id = 210"), 0);
  assert_int_equal(pg_sql_value("SELECT last_value FROM cairn_test_kills"), 2); /* killed, 1 row */
  /* Lost twice in one op: latched, back at the commit, revived. */
  kill_inserts_of(conn, 210, 2);
  append_batch(s, 6, 6); /* [30, 35) */
  for (int i = 0; i < 20000; i++) {
    int rv = store_delete_before(s, 40);
    if (rv != CAIRN_EPENDING) {
      assert_true(rv != 0);
      break;
    }
    uv_run(&loop, UV_RUN_NOWAIT);
    uv_sleep(1);
  }
  assert_int_equal(fatal_calls, 1);
  store_info(s, &info);
  assert_true(info.fatal);
  assert_int_equal(info.next_offset, 30);
  kill_inserts_end(conn);
  revive(s);
  store_info(s, &info);
  assert_int_equal(info.start_offset, 30);
  assert_int_equal(info.next_offset, 30);
  assert_int_equal(pg_sql_value("SELECT count(*) FROM cairn_batches WHERE topic_id = 210"), 0);
  store_close(s);
  close_loop(&loop);
}

int main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(
          test_pgwriter_loop_turns_while_the_database_is_stalled_and_one_transaction_takes_both),
      cmocka_unit_test(
          test_pgwriter_failed_transaction_latches_every_store_in_it_and_revives_to_the_commit),
      cmocka_unit_test(test_pgwriter_close_never_waits_and_the_job_in_flight_commits_alone),
      cmocka_unit_test(
          test_pgwriter_flush_never_waits_on_the_loop_and_completes_once_the_lock_goes),
      cmocka_unit_test(test_pgwriter_snapshot_install_settles_then_restarts_committed),
      cmocka_unit_test(test_pgwriter_truncate_never_waits_on_the_loop_and_cuts_once_the_lock_goes),
      cmocka_unit_test(test_pgwriter_settle_runs_off_the_loop_unless_a_job_holds_the_rows),
      cmocka_unit_test(test_pgwriter_a_connection_lost_inside_the_transaction_sends_it_once_more),
      cmocka_unit_test(test_pgwriter_a_settle_that_loses_its_connection_sends_its_rows_once_more),
      cmocka_unit_test(test_pgwriter_an_op_that_loses_its_connection_sends_it_once_more),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
