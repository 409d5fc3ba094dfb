/* test_client_group.c - libcairn's group consumer (<cairn/group.h>) against
 * real cairnd processes: two members on one loop share 12 partitions
 * evenly and read every record; one leaves mid-stream and the other takes
 * its partitions and reads the rest with nothing skipped (at-least-once:
 * every offset of every partition seen); a new member of the same group
 * resumes at the committed offsets (nothing read twice once the others
 * closed cleanly).
 *
 * Usage: test_client_group <path of cairnd>
 * CAIRN_KEEP_TEST_DIR=1 keeps the data dirs and node logs. */
#include "cairnd.h"
#include "proc.h"
#include "testutil.h"

#include <cairn/cairn.h>
#include <cairn/group.h>

#include <inttypes.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#define WAIT_MS 30000
#define FAST "--heartbeat-ms 100 --election-ms 1000 --node-timeout-ms 2000 --offsets-partitions 3"
#define TOPIC "clicks"
#define NPART 12
#define MAX_OFFSETS 4096

static const char *cairnd_bin;

/* What the members saw: per partition, how many times each offset. */
struct seen {
  int count[NPART][MAX_OFFSETS];
  int total;
  int by_member[3];
};

struct member {
  struct cairn_group_consumer *gc;
  struct seen *seen;
  int index;
  size_t assigned;
  bool closed;
};

static void on_records(struct cairn_consumer *cons, int status, const char *topic,
                       int32_t partition, const struct cairn_record *records, size_t count,
                       void *data)
{
  struct member *m = data;
  if (status != 0) {
    fail_msg("member %d: %s/%d: %s", m->index, topic, partition, cairn_strerror(status));
  }
  for (size_t i = 0; i < count; i++) {
    assert_true(partition >= 0 && partition < NPART);
    assert_true(records[i].offset >= 0 && records[i].offset < MAX_OFFSETS);
    m->seen->count[partition][records[i].offset]++;
    m->seen->total++;
    m->seen->by_member[m->index]++;
  }
}

static void on_assigned(struct cairn_group_consumer *gc, const struct cairn_group_partition *parts,
                        size_t count, void *data)
{
  struct member *m = data;
  m->assigned = count;
}

static void on_revoked(struct cairn_group_consumer *gc, const struct cairn_group_partition *parts,
                       size_t count, void *data)
{
  struct member *m = data;
  m->assigned = 0;
}

static void on_error(struct cairn_group_consumer *gc, int status, const char *errmsg, void *data)
{
  fail_msg("group error: %s: %s", cairn_strerror(status), errmsg);
}

static void on_closed(struct cairn_group_consumer *gc, void *data)
{
  ((struct member *)data)->closed = true;
}

static void member_open(struct cairn_client *c, struct member *m, int index, struct seen *seen)
{
  memset(m, 0, sizeof *m);
  m->index = index;
  m->seen = seen;
  struct cairn_group_options o;
  cairn_group_options_init(&o);
  o.session_timeout_ms = 3000;
  o.auto_commit_interval_ms = 300;
  o.on_assigned = on_assigned;
  o.on_revoked = on_revoked;
  o.on_error = on_error;
  o.cb_data = m;
  o.consumer.fetch_max_wait_ms = 100;
  const char *topics[] = {TOPIC};
  assert_int_equal(cairn_group_consumer_new(c, "workers", topics, 1, &o, &m->gc), 0);
  assert_int_equal(cairn_group_consumer_start(m->gc, on_records, m), 0);
}

/* Runs the loop until done(arg) or timeout_ms. */
static bool run_until(uv_loop_t *loop, bool (*done)(void *), void *arg, int timeout_ms)
{
  long long end = tu_now_ms() + timeout_ms;
  while (!done(arg) && tu_now_ms() < end) {
    uv_run(loop, UV_RUN_ONCE);
  }
  return done(arg);
}

struct want {
  struct member **ms;
  size_t n;
  size_t each; /* partitions per member */
  struct seen *seen;
  int64_t *hw; /* every offset below hw[p] seen */
};

static bool assigned_evenly(void *arg)
{
  struct want *w = arg;
  for (size_t i = 0; i < w->n; i++) {
    if (w->ms[i]->assigned != w->each) {
      return false;
    }
  }
  return true;
}

static bool all_seen(void *arg)
{
  struct want *w = arg;
  for (int p = 0; p < NPART; p++) {
    for (int64_t o = 0; o < w->hw[p]; o++) {
      if (w->seen->count[p][o] == 0) {
        return false;
      }
    }
  }
  return true;
}

static bool member_closed(void *arg)
{
  return ((struct member *)arg)->closed;
}

/* Produces `batches` batches of 3 records to every partition. */
static void produce(struct cd_cluster *c, int batches, int64_t *hw)
{
  static uint64_t tag = 1;
  for (int b = 0; b < batches; b++) {
    for (uint32_t p = 0; p < NPART; p++) {
      size_t len = 0;
      uint8_t *batch = tu_make_batch(tag++, 3, 16, 1000, &len);
      int64_t base = -1;
      int rv = cd_produce(c, TOPIC, p, batch, len, WAIT_MS, &base);
      free(batch);
      if (rv != 0) {
        fail_msg("produce to %s/%u: %d", TOPIC, p, rv);
      }
      hw[p] = base + 3;
    }
  }
}

static void test_client_group_members_share_leave_and_resume(void **state)
{
  struct cd_cluster c;
  assert_int_equal(cd_init(&c, cairnd_bin, 3, 3, FAST), 0);
  uint64_t ids[3];
  for (int i = 0; i < 3; i++) {
    assert_int_equal(cd_start(&c, i), 0);
    ids[i] = c.nodes[i].id;
  }
  if (cd_wait_alive(&c, 0, ids, 3, WAIT_MS) != 0) {
    fail_msg("the cluster did not form (logs under %s)", c.root);
  }
  char msg[256] = "";
  assert_int_equal(cd_create_topic(&c, 0, TOPIC, NPART, 3, WAIT_MS, msg, sizeof msg), 0);
  int64_t hw[NPART] = {0};
  produce(&c, 4, hw);

  uv_loop_t loop;
  uv_loop_init(&loop);
  char boot[512] = "";
  for (int i = 0; i < 3; i++) {
    size_t used = strlen(boot);
    snprintf(boot + used, sizeof boot - used, "%s%s", i ? "," : "", c.nodes[i].client_addr);
  }
  struct cairn_options co;
  cairn_options_init(&co);
  co.request_timeout_ms = 10000;
  co.retry_backoff_ms = 50;
  co.retry_backoff_max_ms = 500;
  struct cairn_client *client = NULL;
  assert_int_equal(cairn_client_new(&loop, boot, &co, &client), 0);

  struct seen *seen = calloc(1, sizeof *seen);
  struct member m0, m1;
  member_open(client, &m0, 0, seen);
  member_open(client, &m1, 1, seen);
  struct member *both[2] = {&m0, &m1};
  struct want w = {.ms = both, .n = 2, .each = 6, .seen = seen, .hw = hw};
  if (!run_until(&loop, assigned_evenly, &w, WAIT_MS)) {
    fail_msg("not 6 + 6: %zu + %zu (logs under %s)", m0.assigned, m1.assigned, c.root);
  }
  if (!run_until(&loop, all_seen, &w, WAIT_MS)) {
    fail_msg("not every record read (%d seen)", seen->total);
  }
  printf("two members: 6 partitions each, %d records read (%d + %d)\n", seen->total,
         seen->by_member[0], seen->by_member[1]);
  assert_true(seen->by_member[0] > 0 && seen->by_member[1] > 0);

  /* m1 leaves; m0 takes all 12 and reads what comes next. */
  cairn_group_consumer_close(m1.gc, on_closed, &m1);
  assert_true(run_until(&loop, member_closed, &m1, WAIT_MS));
  produce(&c, 2, hw);
  struct member *one[1] = {&m0};
  struct want w1 = {.ms = one, .n = 1, .each = NPART, .seen = seen, .hw = hw};
  if (!run_until(&loop, assigned_evenly, &w1, WAIT_MS)) {
    fail_msg("the leaver's partitions did not move: %zu assigned", m0.assigned);
  }
  if (!run_until(&loop, all_seen, &w1, WAIT_MS)) {
    fail_msg("records skipped after the rebalance (%d seen)", seen->total);
  }
  int dup = 0;
  for (int p = 0; p < NPART; p++) {
    for (int64_t o = 0; o < hw[p]; o++) {
      dup += seen->count[p][o] > 1 ? seen->count[p][o] - 1 : 0;
    }
  }
  printf("after the leave: every record of 12 partitions read, %d read twice\n", dup);

  /* m0 closes (committing); a new member resumes: nothing old again. */
  cairn_group_consumer_close(m0.gc, on_closed, &m0);
  assert_true(run_until(&loop, member_closed, &m0, WAIT_MS));
  int before = seen->total;
  struct member m2;
  member_open(client, &m2, 2, seen);
  struct member *third[1] = {&m2};
  struct want w2 = {.ms = third, .n = 1, .each = NPART, .seen = seen, .hw = hw};
  assert_true(run_until(&loop, assigned_evenly, &w2, WAIT_MS));
  long long settle = tu_now_ms() + 1000;
  while (tu_now_ms() < settle) {
    uv_run(&loop, UV_RUN_ONCE);
  }
  assert_int_equal(seen->total, before); /* resumed at the committed offsets */
  produce(&c, 1, hw);
  assert_true(run_until(&loop, all_seen, &w2, WAIT_MS));
  assert_int_equal(seen->total, before + 3 * NPART);
  printf("a new member resumed at the committed offsets: %d new records, none old\n",
         seen->total - before);

  cairn_group_consumer_close(m2.gc, on_closed, &m2);
  assert_true(run_until(&loop, member_closed, &m2, WAIT_MS));
  assert_int_equal(cairn_client_close(client, NULL, NULL), 0);
  uv_run(&loop, UV_RUN_DEFAULT);
  assert_int_equal(uv_loop_close(&loop), 0);
  free(seen);
  cd_destroy(&c);
}

int main(int argc, char **argv)
{
  if (argc < 2) {
    fprintf(stderr, "usage: %s CAIRND\n", argv[0]);
    return 2;
  }
  cairnd_bin = argv[1];
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_client_group_members_share_leave_and_resume),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
