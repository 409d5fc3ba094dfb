/* test_raft_coalesce.c - coalesced heartbeats (cluster/hbeat.h) with real
 * cairnd processes: 3 nodes, NPART idle partitions rf 3.
 *
 * With --coalesce-heartbeats on, once the partitions are idle their
 * leaders send (next to) no Raft message at all, the per node pair beats
 * standing in; with it off they keep sending Raft heartbeats (and their
 * answers). Either way: a SIGSTOPped node's partitions all get a new
 * leader that acknowledges a produce; after SIGCONT the node rejoins; a
 * leader cut off from both followers (both frozen) steps down; every
 * produce lands right after the one before (nothing lost, nothing
 * doubled), and with coalescing every group goes quiet again. The times
 * are printed for both modes (no timed assertion).
 *
 * Usage: test_raft_coalesce <path of cairnd>. CAIRN_KEEP_TEST_DIR=1 keeps the
 * data dirs and node logs. */
#include "cairnd.h"
#include "format/batch.h"
#include "proc.h"
#include "testutil.h"

#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#define NPART 200
#define RECORDS 3
#define WAIT_MS 120000
#define TIMINGS "--heartbeat-ms 100 --election-ms 1000 --node-timeout-ms 2000"

static const char *cairnd_bin;

/* Sum over nodes [0, n) except `skip` of an unlabeled metric; -1 if one
 * does not answer. */
static long long metric_sum(struct cd_cluster *c, int skip, const char *name)
{
  long long sum = 0;
  for (int i = 0; i < c->n; i++) {
    if (i == skip) {
      continue;
    }
    long long v = cd_metric(c->nodes[i].admin_port, name);
    if (v < 0) {
      return -1;
    }
    sum += v;
  }
  return sum;
}

static void start_cluster(struct cd_cluster *c, const char *coalesce)
{
  char extra[256];
  snprintf(extra, sizeof extra, "%s --coalesce-heartbeats %s", TIMINGS, coalesce);
  assert_int_equal(cd_init(c, cairnd_bin, 3, 3, extra), 0);
  assert_int_equal(cd_start_all(c, WAIT_MS), 0);
  assert_int_equal(cd_create_topic(c, 0, "idle", NPART, 3, WAIT_MS, NULL, 0), 0);
  assert_int_equal(cd_wait_settled(c, "idle", WAIT_MS), 0);
}

/* Raft messages per second all nodes but `skip` sent over window_ms. */
static double raft_rate(struct cd_cluster *c, int skip, int window_ms)
{
  long long a = metric_sum(c, skip, "cairn_raft_messages_sent_total");
  usleep((useconds_t)window_ms * 1000);
  long long b = metric_sum(c, skip, "cairn_raft_messages_sent_total");
  assert_true(a >= 0 && b >= a);
  return (double)(b - a) * 1000.0 / window_ms;
}

/* Waits until `want` groups are coalesced on the nodes but `skip`; fails
 * the test otherwise. */
static void wait_coalesced(struct cd_cluster *c, int skip, long long want)
{
  long long end = tu_now_ms() + WAIT_MS;
  long long got = -1;
  while (tu_now_ms() < end) {
    got = metric_sum(c, skip, "cairn_raft_groups_coalesced");
    if (got == want) {
      return;
    }
    usleep(200 * 1000);
  }
  fail_msg("%lld of %lld groups coalesced after %d ms", got, want, WAIT_MS);
}

/* Does node 0's metadata name a leader other than node `gone` (an id) for
 * every partition of "idle"? */
static bool all_led_elsewhere(struct cd_cluster *c, uint64_t gone)
{
  Cairn__Client__Envelope *env = NULL;
  Cairn__Client__MetadataResponse *md = cd_metadata(c, 0, &env);
  bool ok = false;
  for (size_t t = 0; md != NULL && t < md->n_topics; t++) {
    const Cairn__Client__TopicInfo *ti = md->topics[t];
    if (strcmp(ti->name, "idle") != 0 || ti->n_partitions != NPART) {
      continue;
    }
    ok = true;
    for (size_t p = 0; p < ti->n_partitions; p++) {
      uint64_t l = ti->partitions[p]->leader_id;
      ok = ok && l != 0 && l != gone;
    }
  }
  if (env != NULL) {
    cairn__client__envelope__free_unpacked(env, NULL);
  }
  return ok;
}

/* After an IN_DOUBT answer (leadership moved with the batch in flight,
 * which a preferred-leader handoff after a fault can do even once the
 * metadata shows the cluster settled): 1 when the partition holds the
 * batch of tag at want_base, 0 when nothing is there yet (send it again),
 * -1 otherwise. */
static int landed(struct cd_cluster *c, uint32_t p, int64_t want_base, uint64_t tag)
{
  uint8_t *data = NULL;
  size_t len = 0;
  int64_t hw = -1;
  if (cd_fetch(c, "idle", p, want_base, 1 << 20, WAIT_MS, &data, &len, &hw) != 0) {
    return -1;
  }
  int found = len == 0 && hw == want_base ? 0 : -1;
  size_t size = 0;
  int err = 0;
  if (len > 0 && batch_probe(data, len, len, &size, &err) == BATCH_PROBE_OK &&
      tu_check_batch(data, size, tag, RECORDS, 40) == 0) {
    found = 1;
  }
  free(data);
  return found;
}

/* One batch of RECORDS records to every partition; each must be
 * acknowledged at base offset `want_base` (an in-doubt one is looked for
 * there and sent again only if absent). */
static void produce_everywhere(struct cd_cluster *c, int round, int64_t want_base)
{
  for (uint32_t p = 0; p < NPART; p++) {
    size_t len = 0;
    uint64_t tag = (uint64_t)round * 100000 + p + 1;
    uint8_t *b = tu_make_batch(tag, RECORDS, 40, 1000 + p, &len);
    int64_t base = -1;
    int rv = cd_produce(c, "idle", p, b, len, WAIT_MS, &base);
    for (int k = 0; k < 3 && rv == CAIRN__CLIENT__ERROR_CODE__IN_DOUBT; k++) {
      usleep(500 * 1000); /* the new leader's barrier commits what its log holds */
      int at = landed(c, p, want_base, tag);
      printf("round %d: partition %u: in doubt, %s\n", round, p,
             at == 1   ? "it landed"
             : at == 0 ? "absent: sent again"
                       : "something else there");
      if (at == 1) {
        rv = 0;
        base = want_base;
      } else if (at == 0) {
        rv = cd_produce(c, "idle", p, b, len, WAIT_MS, &base);
      } else {
        break;
      }
    }
    free(b);
    if (rv != 0 || base != want_base) {
      fail_msg("round %d: produce to partition %u: wire code %d, base offset %lld (want %lld)",
               round, p, rv, (long long)base, (long long)want_base);
    }
  }
}

/* Node 0's count of partition groups it leads; -1 if it does not answer. */
static long long leaders_on_node0(struct cd_cluster *c)
{
  return cd_metric(c->nodes[0].admin_port, "cairn_raft_groups{role=\"leader\"}");
}

/* Freezes node 3 (a leader of about a third of the partitions): every
 * partition gets a leader elsewhere and acknowledges a produce; then it is
 * thawed and a second produce follows the first everywhere. */
static void freeze_a_leader(struct cd_cluster *c, const char *mode)
{
  int s = 2;
  uint64_t sid = c->nodes[s].id;
  assert_int_equal(kill(c->nodes[s].proc.pid, SIGSTOP), 0);
  long long stopped_at = tu_now_ms();
  long long end = stopped_at + WAIT_MS;
  while (!all_led_elsewhere(c, sid) && tu_now_ms() < end) {
    usleep(50 * 1000);
  }
  long long took = tu_now_ms() - stopped_at;
  printf("%s: node %llu stopped: every partition led elsewhere after %lld ms\n", mode,
         (unsigned long long)sid, took);
  if (!all_led_elsewhere(c, sid)) {
    kill(c->nodes[s].proc.pid, SIGCONT);
    fail_msg("partitions still led by the stopped node %llu after %d ms", (unsigned long long)sid,
             WAIT_MS);
  }
  produce_everywhere(c, 1, 0);
  printf("%s: every partition acknowledged a produce %lld ms after the stop\n", mode,
         tu_now_ms() - stopped_at);
  assert_int_equal(kill(c->nodes[s].proc.pid, SIGCONT), 0);
  produce_everywhere(c, 2, RECORDS);
  assert_int_equal(cd_wait_settled(c, "idle", WAIT_MS), 0);
}

/* Cuts node 1 off from the others (both frozen): each of its leaders
 * steps down for lack of a majority; thawed, the cluster settles and a
 * third produce follows the second everywhere. */
static void cut_off_a_leader(struct cd_cluster *c, const char *mode)
{
  long long led = leaders_on_node0(c);
  assert_true(led > 0);
  assert_int_equal(kill(c->nodes[1].proc.pid, SIGSTOP), 0);
  assert_int_equal(kill(c->nodes[2].proc.pid, SIGSTOP), 0);
  long long stopped_at = tu_now_ms();
  long long end = stopped_at + WAIT_MS;
  long long now_led = led;
  while ((now_led = leaders_on_node0(c)) != 0 && tu_now_ms() < end) {
    usleep(50 * 1000);
  }
  printf("%s: node 1 cut off: its %lld leaders stepped down after %lld ms\n", mode, led,
         tu_now_ms() - stopped_at);
  kill(c->nodes[1].proc.pid, SIGCONT);
  kill(c->nodes[2].proc.pid, SIGCONT);
  assert_int_equal(now_led, 0);
  assert_int_equal(cd_wait_settled(c, "idle", WAIT_MS), 0);
  produce_everywhere(c, 3, 2 * RECORDS);
}

/* Off: the idle leaders keep Raft's (slowed) heartbeats, and their
 * answers: at least one message per group per second. The baseline for
 * the next test's figures. */
static void test_without_coalescing_idle_groups_send_raft_heartbeats(void **state)
{
  (void)state;
  static struct cd_cluster c;
  start_cluster(&c, "off");
  usleep(5 * 1000 * 1000); /* past RGROUP_PACE_QUIET_MS: on the idle pace */
  double rate = raft_rate(&c, -1, 5000);
  long long coalesced = metric_sum(&c, -1, "cairn_raft_groups_coalesced");
  printf("off: %.0f Raft messages/s for %d idle partitions, %lld groups coalesced\n", rate, NPART,
         coalesced);
  assert_int_equal(coalesced, 0);
  assert_true(rate >= NPART);
  freeze_a_leader(&c, "off");
  cut_off_a_leader(&c, "off");
  cd_destroy(&c);
}

/* On: idle groups go quiet, and Raft messages drop to near none. A frozen
 * leader's partitions are taken over and acknowledge, a cut-off leader
 * steps down, and after each the groups go quiet again. */
static void test_coalesced_idle_groups_go_silent_and_failures_are_still_seen(void **state)
{
  (void)state;
  static struct cd_cluster c;
  start_cluster(&c, "on");
  wait_coalesced(&c, -1, NPART);
  double rate = raft_rate(&c, -1, 5000);
  long long beats = metric_sum(&c, -1, "cairn_coalesced_beats_sent_total");
  printf("on: %.1f Raft messages/s for %d idle partitions (%lld coalesced beats sent so far)\n",
         rate, NPART, beats);
  assert_true(beats > 0);
  assert_true(rate < NPART / 20.0); /* under 1 message per group per 20 s */
  /* Sparse beats (vouch.h): once every follower has accepted a group, the
   * beats stop naming it, except every HBEAT_FULL_PERIODS beats (5 s here).
   * Naming every group in every beat would be 5 beats a second x 2
   * followers x NPART = 10,000 names in 5 s; allow two full beats and
   * some. Nothing elects meanwhile. */
  long long named = metric_sum(&c, -1, "cairn_coalesced_beat_groups_sent_total");
  long long elections = metric_sum(&c, -1, "cairn_raft_elections_total");
  usleep(5 * 1000 * 1000);
  long long named_after = metric_sum(&c, -1, "cairn_coalesced_beat_groups_sent_total");
  long long elections_after = metric_sum(&c, -1, "cairn_raft_elections_total");
  printf("on: %lld groups named in coalesced beats over 5 s, %lld elections\n", named_after - named,
         elections_after - elections);
  assert_true(named >= 0 && named_after - named <= 3 * 2 * NPART);
  assert_int_equal(elections_after - elections, 0);

  freeze_a_leader(&c, "on");
  wait_coalesced(&c, -1, NPART);
  rate = raft_rate(&c, -1, 5000);
  printf("on: after the freeze and thaw: %.1f Raft messages/s\n", rate);
  assert_true(rate < NPART / 20.0);

  cut_off_a_leader(&c, "on");
  wait_coalesced(&c, -1, NPART);
  cd_destroy(&c);
}

int main(int argc, char **argv)
{
  cairnd_bin = argc > 1 ? argv[1] : NULL;
  if (cairnd_bin == NULL) {
    fprintf(stderr, "usage: test_raft_coalesce PATH-TO-cairnd\n");
    return 2;
  }
  signal(SIGPIPE, SIG_IGN);
  if (getenv("CAIRN_TEST_FILTER") != NULL) {
    cmocka_set_test_filter(getenv("CAIRN_TEST_FILTER"));
  }
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_without_coalescing_idle_groups_send_raft_heartbeats),
      cmocka_unit_test(test_coalesced_idle_groups_go_silent_and_failures_are_still_seen),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
