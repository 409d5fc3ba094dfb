/* test_pgreader.c - a pgstore's reads below its tail, lookups by time and
 * retention off the loop (pgreader.h): while another session holds a
 * lock that blocks them the loop keeps turning and the calls answer
 * CAIRN_EPENDING; once it is released the store wakes its owner and the
 * same calls answer with the right bytes; a statement that fails answers
 * the read with an error once, and the store stays usable. Needs a
 * database: run through tests/lib/with_pg.sh (CAIRN_PG_CONNINFO). */
#include "common/err.h"
#include "storage/pgstore.h"
#include "pg_sql.h"
#include "testutil.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include <cmocka.h>

static int readable_calls;

static void on_readable(void *arg)
{
  (void)arg;
  readable_calls++;
}

/* A store on loop whose tail keeps nothing committed: every read of a
 * committed batch goes to the database. conninfo_extra: appended to the
 * connection string (NULL: none). */
static struct store *open_store(uv_loop_t *loop, uint32_t topic_id, int64_t retention_ms,
                                const char *conninfo_extra)
{
  char conninfo[1024];
  snprintf(conninfo, sizeof conninfo, "%s %s", pg_sql_conninfo(),
           conninfo_extra != NULL ? conninfo_extra : "");
  struct pgstore_opts o = {.conninfo = conninfo,
                           .topic = "pgreader",
                           .topic_id = topic_id,
                           .partition = 0,
                           .retention_ms = retention_ms,
                           .tail_bytes = 1,
                           .loop = loop,
                           .on_readable = on_readable};
  struct store *s = NULL;
  char err[512];
  if (pgstore_open(&o, &s, err, sizeof err) != 0) {
    fail_msg("pgstore_open: %s", err);
  }
  return s;
}

/* Batch i (from 0): 5 records of 20 bytes, timestamps from 1000 * i. */
static void append_batches(struct store *s, int n)
{
  for (int i = 0; i < n; i++) {
    size_t len;
    uint8_t *data = tu_make_batch((uint64_t)i + 1, 5, 20, 1000 * (int64_t)i, &len);
    struct store_batch b = {data, len};
    int64_t base;
    assert_int_equal(store_append(s, &b, 1, (uint64_t)i + 1, &base), 0);
    free(data);
  }
}

static void run_until_committed(uv_loop_t *loop, struct store *s)
{
  struct store_info info;
  for (int i = 0; i < 10000; i++) {
    store_info(s, &info);
    if (info.durable_offset == info.next_offset) {
      break;
    }
    uv_run(loop, UV_RUN_NOWAIT);
    uv_sleep(1);
  }
  assert_int_equal(info.durable_offset, info.next_offset);
}

/* Runs the loop until on_readable has fired more than `seen` times. */
static void run_until_readable(uv_loop_t *loop, int seen)
{
  for (int i = 0; i < 10000 && readable_calls <= seen; i++) {
    uv_run(loop, UV_RUN_NOWAIT);
    uv_sleep(1);
  }
  assert_true(readable_calls > seen);
}

static void close_loop(uv_loop_t *loop)
{
  uv_run(loop, UV_RUN_DEFAULT); /* the writer's handle and the reader's job end */
  assert_int_equal(uv_loop_close(loop), 0);
}

static void on_tick(uv_timer_t *t)
{
  int *ticks = t->data;
  (*ticks)++;
}

/* Turns the loop until the timer has ticked n more times (10 ms each). */
static void tick(uv_loop_t *loop, int *ticks, int n)
{
  int until = *ticks + n;
  while (*ticks < until) {
    uv_run(loop, UV_RUN_ONCE);
  }
}

/* A session holding ACCESS EXCLUSIVE on cairn_batches: every SELECT of
 * it waits. */
static PGconn *lock_batches(void)
{
  PGconn *locker = pg_sql_connect();
  PQclear(pg_sql(locker, "BEGIN"));
  PQclear(pg_sql(locker, "LOCK TABLE cairn_batches IN ACCESS EXCLUSIVE MODE"));
  return locker;
}

static void unlock_batches(PGconn *locker)
{
  PQclear(pg_sql(locker, "COMMIT"));
  PQfinish(locker);
}

static void
test_pgreader_read_below_the_tail_waits_off_the_loop_and_answers_after_the_lock(void **state)
{
  (void)state;
  uv_loop_t loop;
  assert_int_equal(uv_loop_init(&loop), 0);
  struct store *s = open_store(&loop, 301, 0, NULL);
  append_batches(s, 3);
  run_until_committed(&loop, s);
  PGconn *locker = lock_batches();
  int ticks = 0;
  uv_timer_t timer;
  assert_int_equal(uv_timer_init(&loop, &timer), 0);
  timer.data = &ticks;
  assert_int_equal(uv_timer_start(&timer, on_tick, 10, 10), 0);
  struct store_region r;
  assert_int_equal(store_read(s, 5, SIZE_MAX, &r), CAIRN_EPENDING);
  store_region_release(&r);
  int64_t offset = -1;
  assert_int_equal(store_lookup_time(s, 1500, &offset), CAIRN_EPENDING);
  int seen = readable_calls;
  /* 30 ticks of the loop while the job waits on the lock: the read is
   * still not answered, and asking again neither blocks nor answers. */
  tick(&loop, &ticks, 30);
  assert_int_equal(readable_calls, seen);
  assert_int_equal(store_read(s, 5, SIZE_MAX, &r), CAIRN_EPENDING);
  store_region_release(&r);
  unlock_batches(locker);
  run_until_readable(&loop, seen);
  assert_int_equal(store_read(s, 5, SIZE_MAX, &r), 0);
  assert_int_equal(r.first_offset, 5);
  assert_int_equal(r.next_offset, 15);
  store_region_release(&r);
  assert_int_equal(store_read(s, 5, 1, &r), 0); /* the first batch alone, from the cache */
  assert_int_equal(r.next_offset, 10);
  assert_int_equal(tu_check_batch(r.mem, r.len, 2, 5, 20), 0);
  store_region_release(&r);
  /* The lookup: its job runs now (the read's job held the connection). */
  int rv = store_lookup_time(s, 1500, &offset);
  if (rv == CAIRN_EPENDING) {
    run_until_readable(&loop, readable_calls);
    rv = store_lookup_time(s, 1500, &offset);
  }
  assert_int_equal(rv, 0);
  assert_int_equal(offset, 10); /* batch 2 starts at timestamp 2000 */
  uv_close((uv_handle_t *)&timer, NULL);
  store_close(s);
  close_loop(&loop);
}

/* The read's statement fails (statement_timeout while the lock is held):
 * the read is answered once with the error, the store is not latched, and
 * the next read after the lock is gone answers with the bytes. */
static void test_pgreader_failed_read_answers_an_error_once_and_the_store_goes_on(void **state)
{
  (void)state;
  uv_loop_t loop;
  assert_int_equal(uv_loop_init(&loop), 0);
  struct store *s = open_store(&loop, 302, 0, "options='-c statement_timeout=300'");
  append_batches(s, 2);
  run_until_committed(&loop, s);
  PGconn *locker = lock_batches();
  struct store_region r;
  assert_int_equal(store_read(s, 0, SIZE_MAX, &r), CAIRN_EPENDING);
  store_region_release(&r);
  run_until_readable(&loop, readable_calls);
  assert_int_equal(store_read(s, 0, SIZE_MAX, &r), CAIRN_EDATABASE);
  store_region_release(&r);
  assert_non_null(strstr(store_errmsg(s), "statement timeout"));
  struct store_info info;
  store_info(s, &info);
  assert_false(info.fatal);
  unlock_batches(locker);
  int seen = readable_calls;
  assert_int_equal(store_read(s, 0, SIZE_MAX, &r), CAIRN_EPENDING);
  store_region_release(&r);
  run_until_readable(&loop, seen);
  assert_int_equal(store_read(s, 0, SIZE_MAX, &r), 0);
  assert_int_equal(r.next_offset, 10);
  store_region_release(&r);
  store_close(s);
  close_loop(&loop);
}

/* Retention's scan and delete run on the thread pool: the loop turns
 * while the lock holds them, and the store's start moves when the
 * delete has committed. */
static void test_pgreader_retention_scans_and_deletes_off_the_loop(void **state)
{
  (void)state;
  uv_loop_t loop;
  assert_int_equal(uv_loop_init(&loop), 0);
  struct store *s = open_store(&loop, 303, 1000, NULL);
  append_batches(s, 6); /* max timestamps 4 .. 5004 */
  run_until_committed(&loop, s);
  PGconn *locker = lock_batches();
  int ticks = 0;
  uv_timer_t timer;
  assert_int_equal(uv_timer_init(&loop, &timer), 0);
  timer.data = &ticks;
  assert_int_equal(uv_timer_start(&timer, on_tick, 10, 10), 0);
  assert_int_equal(store_retention_point(s, 4000), 0); /* nothing known yet */
  int seen = readable_calls;
  tick(&loop, &ticks, 20);
  assert_int_equal(readable_calls, seen);
  unlock_batches(locker);
  run_until_readable(&loop, seen);
  /* Batches 0..2 (max timestamps below 3000) are due. */
  assert_int_equal(store_retention_point(s, 4000), 15);
  uint32_t deleted = 99;
  seen = readable_calls;
  assert_int_equal(store_retention(s, 4000, INT64_MAX, &deleted), 0);
  assert_int_equal(deleted, 0); /* started */
  run_until_readable(&loop, seen);
  struct store_info info;
  store_info(s, &info);
  assert_int_equal(info.start_offset, 15);
  assert_int_equal(store_retention(s, 4000, INT64_MAX, &deleted), 0);
  assert_int_equal(deleted, 3); /* the rows the job deleted */
  struct store_region r;
  assert_int_equal(store_read(s, 10, SIZE_MAX, &r), CAIRN_EOFFSET);
  store_region_release(&r);
  uv_close((uv_handle_t *)&timer, NULL);
  store_close(s);
  close_loop(&loop);
  /* The start is the database's. */
  s = open_store(NULL, 303, 1000, NULL);
  store_info(s, &info);
  assert_int_equal(info.start_offset, 15);
  store_close(s);
}

/* A DeleteRecords applied to a store written behind (delete_before within
 * the log): the start moves at once in memory, the rows stay until a
 * retention pass, which deletes them only below its bound (the owner's
 * saved producer table) and moves the partition row's start with them; a
 * reopen finds that saved start. No limits are set: the floor alone moves
 * the start. */
static void
test_pgreader_a_start_moved_in_memory_is_saved_by_retention_within_its_bound(void **state)
{
  (void)state;
  uv_loop_t loop;
  assert_int_equal(uv_loop_init(&loop), 0);
  struct store *s = open_store(&loop, 310, 0, NULL);
  append_batches(s, 4); /* [0, 20), 5 records each */
  run_until_committed(&loop, s);
  assert_int_equal(store_delete_before(s, 12), 0); /* at once, no job */
  struct store_info info;
  store_info(s, &info);
  assert_int_equal(info.start_offset, 12);
  assert_int_equal(info.saved_start_offset, 0);
  struct store_region r;
  assert_int_equal(store_read(s, 5, SIZE_MAX, &r), CAIRN_EOFFSET);
  store_region_release(&r);
  assert_int_equal(store_delete_before(s, 7), 0); /* below the start: nothing */
  assert_int_equal(pg_sql_value("SELECT count(*) FROM cairn_batches WHERE topic_id = 310"), 4);
  assert_int_equal(pg_sql_value("SELECT start_offset FROM cairn_partitions WHERE topic_id = 310"),
                   0);
  /* Nothing is due by the limits, but the start is unsaved: the scan's
   * point is the floor. */
  int seen = readable_calls;
  assert_int_equal(store_retention_point(s, 0), 12); /* the start while it runs */
  run_until_readable(&loop, seen);
  assert_int_equal(store_retention_point(s, 0), 12);
  /* Bounded at 8: the row [0, 5) goes, the row's start is 8. */
  uint32_t deleted = 99;
  seen = readable_calls;
  assert_int_equal(store_retention(s, 0, 8, &deleted), 0);
  run_until_readable(&loop, seen);
  store_info(s, &info);
  assert_int_equal(info.start_offset, 12);
  assert_int_equal(info.saved_start_offset, 8);
  assert_int_equal(pg_sql_value("SELECT count(*) FROM cairn_batches WHERE topic_id = 310"), 3);
  assert_int_equal(pg_sql_value("SELECT start_offset FROM cairn_partitions WHERE topic_id = 310"),
                   8);
  /* Unbounded: [5, 10) goes, [10, 15) holds the start. */
  seen = readable_calls;
  assert_int_equal(store_retention(s, 0, INT64_MAX, &deleted), 0);
  assert_int_equal(deleted, 1);
  run_until_readable(&loop, seen);
  store_info(s, &info);
  assert_int_equal(info.start_offset, 12);
  assert_int_equal(info.saved_start_offset, 12);
  assert_int_equal(pg_sql_value("SELECT count(*) FROM cairn_batches WHERE topic_id = 310"), 2);
  assert_int_equal(store_retention(s, 0, INT64_MAX, &deleted), 0);
  assert_int_equal(deleted, 1);
  /* The whole log: start at its end, no row read below it. */
  assert_int_equal(store_delete_before(s, 20), 0);
  assert_int_equal(store_read(s, 15, SIZE_MAX, &r), CAIRN_EOFFSET);
  store_region_release(&r);
  assert_int_equal(store_read(s, 20, SIZE_MAX, &r), 0);
  assert_int_equal(r.len, 0);
  store_region_release(&r);
  store_close(s);
  close_loop(&loop);
  /* Reopened: the saved start, and the rows above it. */
  s = open_store(NULL, 310, 0, NULL);
  store_info(s, &info);
  assert_int_equal(info.start_offset, 12);
  assert_int_equal(info.next_offset, 20);
  store_close(s);
}

/* What a replica's open does to rebuild its producer table
 * (rgroup_apply_scan): store_read_wait over the whole log, on the loop's
 * thread, the loop not running meanwhile. Each read needs a job (a cache
 * of one batch), and none may wait for a worker slot that only the loop
 * would free. */
static void test_pgreader_blocking_reads_walk_the_log_without_the_loop(void **state)
{
  (void)state;
  uv_loop_t loop;
  assert_int_equal(uv_loop_init(&loop), 0);
  struct pgstore_opts o = {.conninfo = pg_sql_conninfo(),
                           .topic = "pgreader",
                           .topic_id = 307,
                           .tail_bytes = 1,
                           .read_cache_bytes = 1,
                           .loop = &loop};
  struct store *s = NULL;
  char err[512];
  if (pgstore_open(&o, &s, err, sizeof err) != 0) {
    fail_msg("pgstore_open: %s", err);
  }
  append_batches(s, 2 * PGREADER_MAX_JOBS + 2);
  run_until_committed(&loop, s);
  int64_t off = 0;
  for (uint64_t tag = 1; tag <= 2 * PGREADER_MAX_JOBS + 2; tag++) {
    struct store_region r;
    assert_int_equal(store_read_wait(s, off, 1, &r), 0);
    assert_int_equal(r.first_offset, off);
    assert_int_equal(tu_check_batch(r.mem, r.len, tag, 5, 20), 0);
    off = r.next_offset;
    store_region_release(&r);
  }
  assert_int_equal(off, 5 * (2 * PGREADER_MAX_JOBS + 2));
  store_close(s);
  close_loop(&loop);
}

/* Backends of the test's database waiting on a lock. */
static int64_t lock_waiters(PGconn *conn)
{
  PGresult *res = pg_sql(conn, "SELECT count(*) FROM pg_stat_activity WHERE"
                               " datname = current_database() AND wait_event_type = 'Lock'");
  int64_t n = strtoll(PQgetvalue(res, 0, 0), NULL, 10);
  PQclear(res);
  return n;
}

/* Three stores on one loop, their reads all held by the lock: only
 * PGREADER_MAX_JOBS jobs take a worker of the thread pool (which the
 * node's Raft log writes share); the third read is started when a slot
 * frees, and every read gets its bytes. */
static void test_pgreader_one_loop_runs_at_most_two_jobs_and_the_starved_read_follows(void **state)
{
  (void)state;
  uv_loop_t loop;
  assert_int_equal(uv_loop_init(&loop), 0);
  struct store *s[3];
  for (int i = 0; i < 3; i++) {
    s[i] = open_store(&loop, 304 + (uint32_t)i, 0, NULL);
    append_batches(s[i], 2);
    run_until_committed(&loop, s[i]);
  }
  PGconn *locker = lock_batches();
  PGconn *probe = pg_sql_connect();
  struct store_region r;
  for (int i = 0; i < 3; i++) {
    assert_int_equal(store_read(s[i], 0, SIZE_MAX, &r), CAIRN_EPENDING);
    store_region_release(&r);
  }
  for (int i = 0; i < 5000 && lock_waiters(probe) < PGREADER_MAX_JOBS; i++) {
    uv_run(&loop, UV_RUN_NOWAIT);
    uv_sleep(1);
  }
  for (int i = 0; i < 50; i++) { /* time for a third to show up, if one ran */
    uv_run(&loop, UV_RUN_NOWAIT);
    uv_sleep(2);
  }
  assert_int_equal(lock_waiters(probe), PGREADER_MAX_JOBS);
  unlock_batches(locker);
  PQfinish(probe);
  bool done[3] = {false, false, false};
  int ndone = 0;
  for (int k = 0; k < 10000 && ndone < 3; k++) {
    uv_run(&loop, UV_RUN_NOWAIT);
    uv_sleep(1);
    for (int i = 0; i < 3; i++) {
      if (done[i]) {
        continue;
      }
      int rv = store_read(s[i], 0, SIZE_MAX, &r);
      if (rv == 0) {
        assert_int_equal(r.next_offset, 10);
        done[i] = true;
        ndone++;
      } else {
        assert_int_equal(rv, CAIRN_EPENDING);
      }
      store_region_release(&r);
    }
  }
  assert_int_equal(ndone, 3);
  for (int i = 0; i < 3; i++) {
    store_close(s[i]);
  }
  close_loop(&loop);
}

int main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(
          test_pgreader_read_below_the_tail_waits_off_the_loop_and_answers_after_the_lock),
      cmocka_unit_test(test_pgreader_failed_read_answers_an_error_once_and_the_store_goes_on),
      cmocka_unit_test(test_pgreader_retention_scans_and_deletes_off_the_loop),
      cmocka_unit_test(
          test_pgreader_a_start_moved_in_memory_is_saved_by_retention_within_its_bound),
      cmocka_unit_test(test_pgreader_one_loop_runs_at_most_two_jobs_and_the_starved_read_follows),
      cmocka_unit_test(test_pgreader_blocking_reads_walk_the_log_without_the_loop),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
