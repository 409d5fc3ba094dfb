/* test_pgstore.c - pgstore's own behaviour beyond the store model test
 * (test_plog_model runs the shared contract): the records view decodes
 * what batch_iter decodes, retention deletes rows by size and by time, an
 * unknown schema version is refused, a dropped connection latches the
 * store fatal and a reopen, or a revive in place, finds exactly what was
 * committed. Needs a
 * database: run through tests/lib/with_pg.sh (CAIRN_PG_CONNINFO). */
#include "common/err.h"
#include "format/batch.h"
#include "format/batch_builder.h"
#include "storage/pgstore.h"
#include "storage/pgstore_schema.h"
#include "pg_sql.h"
#include "testutil.h"

#include <libpq-fe.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

static struct store *open_store(uint32_t topic_id, uint64_t retention_bytes, int64_t retention_ms)
{
  struct pgstore_opts o = {.conninfo = pg_sql_conninfo(),
                           .topic = "pgunit",
                           .topic_id = topic_id,
                           .partition = 0,
                           .retention_bytes = retention_bytes,
                           .retention_ms = retention_ms};
  struct store *s = NULL;
  char err[512];
  int rv = pgstore_open(&o, &s, err, sizeof err);
  if (rv != 0) {
    fail_msg("pgstore_open: %s", err);
  }
  return s;
}

static void append_batch(struct store *s, uint8_t *data, size_t len, uint64_t index)
{
  struct store_batch b = {data, len};
  int64_t base;
  assert_int_equal(store_append(s, &b, 1, index, &base), 0);
  free(data);
}

/* ---- the records view ---- */

static uint8_t *build_view_batch(size_t *len)
{
  struct batch_builder b;
  assert_int_equal(batch_builder_init(&b, 1 << 20), 0);
  struct batch_kv h1 = {"h1", 2, "v1", 2};
  struct batch_kv h2[2] = {{"h1", 2, NULL, 0}, {"h2", 2, "x", 1}};
  assert_int_equal(batch_builder_add(&b, 1000, "k1", 2, "v1", 2, &h1, 1), 0);
  /* A timestamp that goes back: a negative zigzag delta. */
  assert_int_equal(batch_builder_add(&b, 999, NULL, 0, "two", 3, NULL, 0), 0);
  assert_int_equal(batch_builder_add(&b, 1700000000123, "", 0, NULL, 0, h2, 2), 0);
  uint8_t *out;
  assert_int_equal(batch_builder_finish(&b, &out, len), 0);
  batch_builder_close(&b);
  return out;
}

/* "k:v,k:v" in hex, null values as "null": what the view's query prints. */
static void format_headers(const struct batch_record *r, char *out, size_t outlen)
{
  out[0] = '\0';
  size_t pos = 0;
  for (int32_t i = 0; i < r->header_count; i++) {
    struct batch_kv kv;
    const uint8_t *hk, *hv;
    assert_int_equal(batch_record_header(r, i, &hk, &kv.key_len, &hv, &kv.value_len), 0);
    kv.key = hk;
    kv.value = hv;
    pos += (size_t)snprintf(out + pos, outlen - pos, "%s", i > 0 ? "," : "");
    for (size_t k = 0; k < kv.key_len; k++) {
      pos += (size_t)snprintf(out + pos, outlen - pos, "%02x", ((const uint8_t *)kv.key)[k]);
    }
    pos += (size_t)snprintf(out + pos, outlen - pos, ":");
    if (kv.value == NULL) {
      pos += (size_t)snprintf(out + pos, outlen - pos, "null");
    }
    for (size_t k = 0; kv.value != NULL && k < kv.value_len; k++) {
      pos += (size_t)snprintf(out + pos, outlen - pos, "%02x", ((const uint8_t *)kv.value)[k]);
    }
  }
}

static void check_bytes_col(PGresult *res, int row, int col, const uint8_t *p, size_t len)
{
  if (p == NULL) {
    assert_true(PQgetisnull(res, row, col));
    return;
  }
  assert_false(PQgetisnull(res, row, col));
  char hex[256] = "";
  for (size_t i = 0; i < len; i++) {
    snprintf(hex + 2 * i, sizeof hex - 2 * i, "%02x", p[i]);
  }
  assert_string_equal(PQgetvalue(res, row, col), hex);
}

static void test_pgstore_records_view_returns_what_batch_iter_decodes(void **state)
{
  (void)state;
  struct store *s = open_store(101, 0, 0);
  size_t len;
  uint8_t *data = build_view_batch(&len);
  append_batch(s, data, len, 1);
  data = build_view_batch(&len);
  append_batch(s, data, len, 2);
  /* The log start inside the first batch hides its first record. */
  assert_int_equal(store_delete_before(s, 1), 0);
  assert_int_equal(store_flush(s, INT64_MAX), 0);

  PGconn *conn = pg_sql_connect();
  PGresult *res =
      pg_sql(conn, "SELECT \"offset\", \"timestamp\", encode(key, 'hex'), encode(value, 'hex'),"
                " coalesce((SELECT string_agg(encode(h.key, 'hex') || ':' ||"
                "  coalesce(encode(h.value, 'hex'), 'null'), ',') FROM unnest(headers) h), '')"
                " FROM cairn_records WHERE topic = 'pgunit' AND partition = 0"
                " ORDER BY \"offset\"");
  struct store_region r;
  assert_int_equal(store_read(s, 1, SIZE_MAX, &r), 0);
  int row = 0;
  size_t pos = 0;
  while (pos < r.len) {
    struct batch_header h;
    batch_header_decode(r.mem + pos, &h);
    size_t size = batch_total_size(h.batch_length);
    struct batch_iter it;
    assert_int_equal(batch_iter_init(&it, r.mem + pos, size), 0);
    struct batch_record rec;
    while (batch_iter_next(&it, &rec) == 1) {
      if (rec.offset < 1) {
        continue;
      }
      assert_true(row < PQntuples(res));
      assert_int_equal(strtoll(PQgetvalue(res, row, 0), NULL, 10), rec.offset);
      assert_int_equal(strtoll(PQgetvalue(res, row, 1), NULL, 10), rec.timestamp);
      check_bytes_col(res, row, 2, rec.key, rec.key_len);
      check_bytes_col(res, row, 3, rec.value, rec.value_len);
      char hdrs[512];
      format_headers(&rec, hdrs, sizeof hdrs);
      assert_string_equal(PQgetvalue(res, row, 4), hdrs);
      row++;
    }
    pos += size;
  }
  assert_int_equal(row, 5);
  assert_int_equal(PQntuples(res), 5);
  store_region_release(&r);
  PQclear(res);
  PQfinish(conn);
  store_close(s);
}

/* ---- retention ---- */

static int64_t count_rows(uint32_t topic_id)
{
  PGconn *conn = pg_sql_connect();
  char q[200];
  snprintf(q, sizeof q, "SELECT count(*) FROM cairn_batches WHERE topic_id = %u", topic_id);
  PGresult *res = pg_sql(conn, q);
  int64_t n = strtoll(PQgetvalue(res, 0, 0), NULL, 10);
  PQclear(res);
  PQfinish(conn);
  return n;
}

static void test_pgstore_retention_deletes_rows_by_time_within_the_bound(void **state)
{
  (void)state;
  struct store *s = open_store(102, 0, 1000);
  for (int i = 0; i < 10; i++) {
    size_t len;
    uint8_t *data = tu_make_batch((uint64_t)i + 1, 1, 10, 1000 * i, &len);
    append_batch(s, data, len, (uint64_t)i + 1);
  }
  assert_int_equal(store_flush(s, INT64_MAX), 0);
  /* Batches with max_timestamp < 5000 are due: offsets 0..4. */
  assert_int_equal(store_retention_point(s, 6000), 5);
  uint32_t deleted = 0;
  assert_int_equal(store_retention(s, 6000, 3, &deleted), 0);
  assert_int_equal(deleted, 3); /* nothing at or above the bound 3 */
  assert_int_equal(count_rows(102), 7);
  assert_int_equal(store_retention(s, 6000, INT64_MAX, &deleted), 0);
  assert_int_equal(deleted, 2);
  struct store_info info;
  store_info(s, &info);
  assert_int_equal(info.start_offset, 5);
  assert_int_equal(count_rows(102), 5);
  struct store_region r;
  assert_int_equal(store_read(s, 4, 100, &r), CAIRN_EOFFSET);
  store_close(s);
  /* The start survives a reopen. */
  s = open_store(102, 0, 1000);
  store_info(s, &info);
  assert_int_equal(info.start_offset, 5);
  assert_int_equal(info.next_offset, 10);
  store_close(s);
}

static void test_pgstore_retention_deletes_rows_by_size_keeping_the_newest(void **state)
{
  (void)state;
  size_t len;
  uint8_t *probe = tu_make_batch(1, 4, 100, 0, &len);
  free(probe);
  struct store *s = open_store(103, 3 * len + len / 2, 0);
  for (int i = 0; i < 10; i++) {
    uint8_t *data = tu_make_batch((uint64_t)i + 1, 4, 100, i, &len);
    append_batch(s, data, len, 0);
  }
  uint32_t deleted = 0;
  assert_int_equal(store_retention(s, 0, INT64_MAX, &deleted), 0);
  assert_int_equal(deleted, 7);
  struct store_info info;
  store_info(s, &info);
  assert_int_equal(info.start_offset, 28);
  assert_true(info.size_bytes <= 3 * len + len / 2);
  assert_int_equal(count_rows(103), 3);
  store_close(s);
}

/* ---- schema versions ---- */

static void test_pgstore_refuses_a_database_at_an_unknown_schema_version(void **state)
{
  (void)state;
  struct store *s = open_store(104, 0, 0);
  store_close(s);
  PGconn *conn = pg_sql_connect();
  PQclear(pg_sql(conn, "INSERT INTO cairn_schema_version (version) VALUES (999)"));
  struct pgstore_opts o = {.conninfo = pg_sql_conninfo(), .topic = "pgunit", .topic_id = 104};
  char err[512] = "";
  assert_int_equal(pgstore_open(&o, &s, err, sizeof err), CAIRN_ESCHEMA);
  assert_non_null(strstr(err, "version 999"));
  PQclear(pg_sql(conn, "DELETE FROM cairn_schema_version WHERE version = 999"));
  PGresult *res = pg_sql(conn, "SELECT max(version) FROM cairn_schema_version");
  assert_int_equal(strtol(PQgetvalue(res, 0, 0), NULL, 10), PGSTORE_SCHEMA_VERSION);
  PQclear(res);
  PQfinish(conn);
}

/* ---- a dropped connection ---- */

/* Terminates every other session of the test database (the store's). */
static void drop_connections(void)
{
  PGconn *conn = pg_sql_connect();
  PQclear(pg_sql(conn, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                    " WHERE datname = current_database() AND pid <> pg_backend_pid()"));
  PQfinish(conn);
}


static void
test_pgstore_latches_fatal_on_a_dropped_connection_and_reopens_to_the_commit(void **state)
{
  (void)state;
  struct store *s = open_store(105, 0, 0);
  size_t len;
  uint8_t *first = tu_make_batch(1, 5, 20, 100, &len);
  append_batch(s, first, len, 1);
  assert_int_equal(store_flush(s, INT64_MAX), 0);
  uint8_t *second = tu_make_batch(2, 5, 20, 200, &len);
  append_batch(s, second, len, 2); /* not committed */
  drop_connections();
  uint8_t *data = tu_make_batch(3, 5, 20, 300, &len);
  struct store_batch b = {data, len};
  int64_t base;
  assert_int_equal(store_append(s, &b, 1, 3, &base), CAIRN_EDATABASE);
  assert_non_null(strstr(store_errmsg(s), "postgresql"));
  struct store_info info;
  store_info(s, &info);
  assert_true(info.fatal);
  assert_int_equal(info.durable_offset, 5);
  assert_int_equal(info.next_offset, 5); /* the rolled-back entry is gone */
  struct store_region gone;
  assert_int_equal(store_read(s, 0, SIZE_MAX, &gone), CAIRN_EFATAL);
  store_region_release(&gone);
  assert_int_equal(store_append(s, &b, 1, 3, &base), CAIRN_EFATAL);
  assert_int_equal(store_flush(s, INT64_MAX), CAIRN_EFATAL);
  free(data);
  store_close(s);
  /* The reopened store is what was committed: the Raft log still holds
   * entry 2 and replays it. */
  s = open_store(105, 0, 0);
  store_info(s, &info);
  assert_int_equal(info.next_offset, 5);
  assert_int_equal(info.last_index, 1);
  assert_false(info.fatal);
  struct store_region r;
  assert_int_equal(store_read(s, 0, SIZE_MAX, &r), 0);
  assert_int_equal(r.next_offset, 5);
  assert_int_equal(tu_check_batch(r.mem, r.len, 1, 5, 20), 0);
  store_region_release(&r);
  store_close(s);
}

/* Dropped between transactions (everything committed): the store connects
 * again and goes on, for an append and for a read, without going fatal. */
static void test_pgstore_reconnects_when_dropped_between_transactions(void **state)
{
  (void)state;
  struct store *s = open_store(107, 0, 0);
  size_t len;
  uint8_t *data;
  data = tu_make_batch(1, 5, 20, 100, &len);
  append_batch(s, data, len, 1);
  assert_int_equal(store_flush(s, INT64_MAX), 0);
  drop_connections();
  data = tu_make_batch(2, 5, 20, 200, &len);
  append_batch(s, data, len, 2);
  assert_int_equal(store_flush(s, INT64_MAX), 0);
  struct store_info info;
  store_info(s, &info);
  assert_false(info.fatal);
  assert_int_equal(info.next_offset, 10);
  assert_int_equal(info.durable_offset, 10);
  drop_connections();
  /* Below the in-memory tail's reach: read from the database. */
  struct store_region r;
  assert_int_equal(store_read(s, 0, SIZE_MAX, &r), 0);
  assert_int_equal(r.first_offset, 0);
  store_region_release(&r);
  assert_int_equal(count_rows(107), 2);
  store_close(s);
}

/* Dropped between transactions, and meanwhile the rows changed under the
 * store (another writer, a restored backup): it does not carry on as if
 * nothing happened, it latches fatal and says why. */
static void test_pgstore_refuses_to_reconnect_to_rows_that_changed(void **state)
{
  (void)state;
  struct store *s = open_store(108, 0, 0);
  size_t len;
  uint8_t *data;
  data = tu_make_batch(1, 5, 20, 100, &len);
  append_batch(s, data, len, 1);
  data = tu_make_batch(2, 5, 20, 200, &len);
  append_batch(s, data, len, 2);
  assert_int_equal(store_flush(s, INT64_MAX), 0);
  PGconn *conn = pg_sql_connect();
  PQclear(pg_sql(conn, "DELETE FROM cairn_batches WHERE topic_id = 108 AND base_offset = 5"));
  PQfinish(conn);
  drop_connections();
  data = tu_make_batch(3, 5, 20, 300, &len);
  struct store_batch b = {data, len};
  int64_t base;
  assert_int_equal(store_append(s, &b, 1, 3, &base), CAIRN_EDATABASE);
  free(data);
  assert_non_null(strstr(store_errmsg(s), "reconnected, but"));
  struct store_info info;
  store_info(s, &info);
  assert_true(info.fatal);
  store_close(s);
}

/* ---- revive ---- */

/* A fatal store revived in place (the same object, as a replica keeps it):
 * it takes the committed state, the entry whose commit was lost is applied
 * again at the same offsets and Raft index, and nothing is there twice. */
static void test_pgstore_revives_in_place_to_the_commit_and_takes_the_replay(void **state)
{
  (void)state;
  struct store *s = open_store(106, 0, 0);
  struct pgstore_revive *job = NULL;
  assert_int_equal(pgstore_revive_begin(s, &job), CAIRN_EINVAL); /* not fatal */
  size_t len;
  uint8_t *one = tu_make_batch(1, 5, 20, 100, &len);
  append_batch(s, one, len, 1);
  assert_int_equal(store_flush(s, INT64_MAX), 0);
  uint8_t *two = tu_make_batch(2, 5, 20, 200, &len);
  append_batch(s, two, len, 2); /* not committed */
  drop_connections();
  assert_int_equal(store_flush(s, INT64_MAX), CAIRN_EDATABASE);
  struct store_info info;
  store_info(s, &info);
  assert_true(info.fatal);
  /* A revive that never ran leaves the store fatal, with a reason. */
  assert_int_equal(pgstore_revive_begin(s, &job), 0);
  assert_int_equal(pgstore_revive_end(s, job), CAIRN_EDATABASE);
  store_info(s, &info);
  assert_true(info.fatal);
  assert_true(store_errmsg(s)[0] != '\0');
  /* One that ran: the store is what PostgreSQL committed. */
  assert_int_equal(pgstore_revive_begin(s, &job), 0);
  assert_int_equal(pgstore_revive_run(job), 0);
  assert_int_equal(pgstore_revive_end(s, job), 0);
  store_info(s, &info);
  assert_false(info.fatal);
  assert_int_equal(info.next_offset, 5);
  assert_int_equal(info.last_index, 1);
  assert_int_equal(info.durable_offset, 5);
  /* Raft replays entries 1 (refused: applied) and 2 (applied again). */
  uint8_t *data = tu_make_batch(1, 5, 20, 100, &len);
  struct store_batch b = {data, len};
  int64_t base;
  assert_int_equal(store_append(s, &b, 1, 1, &base), CAIRN_EEXIST);
  free(data);
  two = tu_make_batch(2, 5, 20, 200, &len);
  append_batch(s, two, len, 2);
  assert_int_equal(store_flush(s, INT64_MAX), 0);
  store_close(s);
  s = open_store(106, 0, 0);
  store_info(s, &info);
  assert_int_equal(info.next_offset, 10);
  assert_int_equal(info.last_index, 2);
  struct store_region r;
  assert_int_equal(store_read(s, 5, SIZE_MAX, &r), 0);
  assert_int_equal(r.first_offset, 5);
  assert_int_equal(r.next_offset, 10);
  assert_int_equal(tu_check_batch(r.mem, r.len, 2, 5, 20), 0);
  store_region_release(&r);
  assert_int_equal(count_rows(106), 2);
  store_close(s);
}

int main(void)
{
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_pgstore_records_view_returns_what_batch_iter_decodes),
      cmocka_unit_test(test_pgstore_retention_deletes_rows_by_time_within_the_bound),
      cmocka_unit_test(test_pgstore_retention_deletes_rows_by_size_keeping_the_newest),
      cmocka_unit_test(test_pgstore_refuses_a_database_at_an_unknown_schema_version),
      cmocka_unit_test(
          test_pgstore_latches_fatal_on_a_dropped_connection_and_reopens_to_the_commit),
      cmocka_unit_test(test_pgstore_revives_in_place_to_the_commit_and_takes_the_replay),
      cmocka_unit_test(test_pgstore_reconnects_when_dropped_between_transactions),
      cmocka_unit_test(test_pgstore_refuses_to_reconnect_to_rows_that_changed),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
