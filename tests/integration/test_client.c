/* test_client.c - libcairn against real cairnd processes on loopback:
 * admin calls and a produce/consume round trip (keys, values with any
 * bytes, headers, both codecs, seeks), a stream of produces across a
 * SIGKILL of the partition leader read back with nothing acknowledged
 * missing and order kept, the same with a paced load and the default Raft
 * timings (a survivor elects at once: nodewatch.h), NOT_LEADER and refused connections absorbed,
 * the delivery timeout with the cluster gone, pipelined fetches (every
 * record once and in order across a seek and a leader SIGKILL, the
 * prefetch bound kept), and the bad-input errors
 * (unreachable bootstrap list, unknown topic, oversized message).
 *
 * Usage: test_client <path of cairnd> [<directory of cairn-example-*>]
 * CAIRN_TEST_FILTER='*sigkill*' runs a subset; CAIRN_KEEP_TEST_DIR=1 keeps
 * the data dirs and node logs. */
#include "cairnd.h"
#include "lc_fixture.h"
#include "proc.h"
#include "testutil.h"
#include "tproxy.h"

#include <cairn/cairn.h>

#include "internal.h" /* lc_stats and lc_meta_set_leader, to force a NOT_LEADER */
#include "producer.h" /* the producer's kick timer, for the linger test */

#include <dirent.h>
#include <inttypes.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>

#include <cmocka.h>

#define WAIT_MS 30000
#define FAST "--heartbeat-ms 100 --election-ms 1000 --node-timeout-ms 2000"

static const char *cairnd_bin;
static const char *examples_dir; /* where cairn-example-* are, or NULL */

/* ---- cluster set-up ---- */

/* n voters started with flags; returns once every one is alive. */
static void start_cluster_with(struct cd_cluster *c, int n, const char *flags)
{
  assert_int_equal(cd_init(c, cairnd_bin, n, n, flags), 0);
  if (cd_start_all(c, WAIT_MS) != 0) {
    fail_msg("the cluster did not form within %d ms (logs under %s)", WAIT_MS, c->root);
  }
}

static void start_cluster(struct cd_cluster *c, int n)
{
  start_cluster_with(c, n, FAST);
}

static struct cairn_sync *connect_sync(const char *bootstrap, uint32_t delivery_ms)
{
  struct cairn_sync *s = lcf_connect_sync(bootstrap, "test_client", 10000, delivery_ms);
  assert_non_null(s);
  return s;
}

/* The leader of (topic, partition) as DescribeTopic reports it, waiting
 * for one to be known (the answering node may lag the election). */
static uint64_t leader_of(struct cairn_sync *s, const char *topic, int32_t partition)
{
  long long end = tu_now_ms() + WAIT_MS;
  while (tu_now_ms() < end) {
    struct cairn_topic_info *t;
    assert_int_equal(cairn_sync_describe_topic(s, topic, &t), 0);
    uint64_t leader = t->partitions[partition].leader_id;
    cairn_topic_info_free(t);
    if (leader != 0) {
      return leader;
    }
    usleep(50 * 1000);
  }
  fail_msg("%s/%d has no leader after %d ms", topic, partition, WAIT_MS);
  return 0;
}

/* The leader of (topic, partition) once it is the preferred replica (the
 * first listed), where leadership settles after a topic is created: a
 * test that forces a stale leader needs it not to move meanwhile. */
static uint64_t settled_leader_of(struct cairn_sync *s, const char *topic, int32_t partition)
{
  long long end = tu_now_ms() + WAIT_MS;
  while (tu_now_ms() < end) {
    struct cairn_topic_info *t;
    assert_int_equal(cairn_sync_describe_topic(s, topic, &t), 0);
    const struct cairn_partition_info *pi = &t->partitions[partition];
    uint64_t leader = pi->leader_id;
    bool settled = leader != 0 && pi->replica_count > 0 && leader == pi->replicas[0];
    cairn_topic_info_free(t);
    if (settled) {
      return leader;
    }
    usleep(100 * 1000);
  }
  fail_msg("%s/%d: leadership did not settle on the preferred replica in %d ms", topic, partition,
           WAIT_MS);
  return 0;
}

/* ---- delivery bookkeeping ---- */

/* Reads every record of (topic, partition) from the start until
 * `want` records arrived or nothing came for idle_ms. Returns how many;
 * calls fn on each. */
static size_t consume_all(struct cairn_sync *s, const char *topic, int32_t partition, size_t want,
                          int idle_ms, void (*fn)(const struct cairn_record *r, void *arg),
                          void *arg)
{
  struct cairn_consumer *cons;
  assert_int_equal(cairn_sync_consumer_new(s, NULL, &cons), 0);
  assert_int_equal(cairn_consumer_assign(cons, topic, partition, CAIRN_OFFSET_EARLIEST), 0);
  size_t n = 0;
  int64_t last = -1;
  while (n < want) {
    const struct cairn_record *r;
    int rv = cairn_sync_poll(s, cons, idle_ms, &r, NULL, NULL);
    if (rv == UV_ETIMEDOUT) {
      break;
    }
    assert_int_equal(rv, 0);
    assert_true(r->offset > last); /* offsets strictly increase */
    last = r->offset;
    assert_string_equal(r->topic, topic);
    assert_int_equal(r->partition, partition);
    fn(r, arg);
    n++;
  }
  cairn_sync_consumer_close(s, cons);
  return n;
}

/* ---- round trip ---- */

struct rt_check {
  size_t seen;
  int64_t first_ts;
};

/* Record i: key "key-i" (null for i % 10 == 9), value of i % 300 bytes
 * of (i * 7 + k) & 0xff (including zeros), headers "h" = "i" and "nul" =
 * null on even i. */
static void rt_message(struct cairn_message *m, int i, char *key, uint8_t *value,
                       struct cairn_header *h, char *hv)
{
  cairn_message_init(m);
  m->topic = "rt";
  m->partition = i % 2;
  int kl = snprintf(key, 32, "key-%d", i);
  if (i % 10 != 9) {
    m->key = key;
    m->key_len = (size_t)kl;
  }
  size_t vl = (size_t)(i % 300);
  for (size_t k = 0; k < vl; k++) {
    value[k] = (uint8_t)((size_t)i * 7 + k);
  }
  m->value = value;
  m->value_len = vl;
  int hl = snprintf(hv, 16, "%d", i);
  h[0] = (struct cairn_header){"h", 1, hv, (size_t)hl};
  h[1] = (struct cairn_header){"nul", 3, NULL, 0};
  m->headers = h;
  m->header_count = i % 2 == 0 ? 2 : 1;
  m->timestamp_ms = 1700000000000 + i;
}

static void rt_on_record(const struct cairn_record *r, void *arg)
{
  struct rt_check *ck = arg;
  /* Offsets map back to message numbers: partition p holds i = 2k + p,
   * produced three times (none, lz4, zstd) in order. */
  int i = (int)(r->offset % 150) * 2 + r->partition;
  struct cairn_message m;
  char key[32], hv[16];
  uint8_t value[300];
  struct cairn_header h[2];
  rt_message(&m, i, key, value, h, hv);
  if (m.key == NULL) {
    assert_null(r->key);
  } else {
    assert_int_equal(r->key_len, m.key_len);
    assert_memory_equal(r->key, m.key, m.key_len);
  }
  assert_non_null(r->value);
  assert_int_equal(r->value_len, m.value_len);
  if (m.value_len > 0) {
    assert_memory_equal(r->value, m.value, m.value_len);
  }
  assert_int_equal(r->timestamp_ms, m.timestamp_ms);
  assert_int_equal(r->header_count, m.header_count);
  assert_int_equal(r->headers[0].key_len, 1);
  assert_memory_equal(r->headers[0].value, hv, strlen(hv));
  if (m.header_count == 2) {
    assert_memory_equal(r->headers[1].key, "nul", 3);
    assert_null(r->headers[1].value);
  }
  ck->seen++;
}

/* Admin calls, then 300 records in two partitions produced three times
 * (uncompressed, lz4, zstd) and read back byte for byte; ListOffsets and
 * a timestamp seek. */
static void test_client_admin_and_round_trip_with_both_codecs(void **state)
{
  struct cd_cluster c;
  start_cluster(&c, 1);
  char boot[256];
  lcf_bootstrap_list(&c, boot, sizeof boot);
  struct cairn_sync *s = connect_sync(boot, 30000);

  assert_int_equal(cairn_sync_create_topic(s, "rt", 2, 1, NULL), 0);
  assert_int_equal(cairn_sync_create_topic(s, "rt", 2, 1, NULL), CAIRN_ETOPIC_EXISTS);
  assert_true(strlen(cairn_sync_errmsg(s)) > 0);
  assert_int_equal(cairn_sync_create_topic(s, "bad name!", 1, 1, NULL), CAIRN_EINVALID_TOPIC_NAME);
  struct cairn_topic_info *t;
  assert_int_equal(cairn_sync_describe_topic(s, "rt", &t), 0);
  assert_string_equal(t->name, "rt");
  assert_int_equal(t->partition_count, 2);
  assert_int_equal(t->partition_info_count, 2);
  assert_int_equal(t->partitions[0].leader_id, c.nodes[0].id);
  cairn_topic_info_free(t);
  assert_int_equal(cairn_sync_describe_topic(s, "nope", &t), CAIRN_EUNKNOWN_TOPIC);
  struct cairn_topic_list *l;
  assert_int_equal(cairn_sync_list_topics(s, &l), 0);
  assert_int_equal(l->count, 1);
  assert_string_equal(l->topics[0].name, "rt");
  cairn_topic_list_free(l);
  struct cairn_cluster_info *ci;
  assert_int_equal(cairn_sync_describe_cluster(s, &ci), 0);
  assert_int_equal(ci->node_count, 1);
  assert_int_equal(ci->controller_id, c.nodes[0].id);
  assert_string_equal(ci->nodes[0].client_address, c.nodes[0].client_addr);
  cairn_cluster_info_free(ci);

  const enum cairn_compression codecs[3] = {CAIRN_COMPRESSION_NONE, CAIRN_COMPRESSION_LZ4,
                                            CAIRN_COMPRESSION_ZSTD};
  struct lcf_sent *sent = calloc(900, sizeof *sent);
  for (int round = 0; round < 3; round++) {
    struct cairn_producer_options po;
    cairn_producer_options_init(&po);
    po.compression = codecs[round];
    po.linger_ms = 20;
    struct cairn_producer *p;
    assert_int_equal(cairn_sync_producer_new(s, &po, &p), 0);
    for (int i = 0; i < 300; i++) {
      struct cairn_message m;
      char key[32], hv[16];
      uint8_t value[300];
      struct cairn_header h[2];
      rt_message(&m, i, key, value, h, hv);
      assert_int_equal(cairn_sync_send(s, p, &m, lcf_on_delivery, &sent[round * 300 + i]), 0);
    }
    assert_int_equal(cairn_sync_flush(s, p), 0);
    assert_int_equal(cairn_producer_pending(p), 0);
    cairn_sync_producer_close(s, p);
  }
  for (int k = 0; k < 900; k++) {
    int i = k % 300;
    assert_true(sent[k].done);
    assert_int_equal(sent[k].status, 0);
    assert_int_equal(sent[k].partition, i % 2);
    assert_int_equal(sent[k].offset, (k / 300) * 150 + i / 2);
  }
  free(sent);
  struct rt_check ck = {0, 0};
  for (int32_t part = 0; part < 2; part++) {
    assert_int_equal(consume_all(s, "rt", part, 450, 3000, rt_on_record, &ck), 450);
  }
  assert_int_equal(ck.seen, 900);

  int64_t off, ts;
  assert_int_equal(cairn_sync_list_offsets(s, "rt", 1, CAIRN_OFFSET_SPEC_LATEST, 0, &off, NULL), 0);
  assert_int_equal(off, 450);
  assert_int_equal(cairn_sync_list_offsets(s, "rt", 0, CAIRN_OFFSET_SPEC_TIMESTAMP,
                                           1700000000000 + 100, &off, &ts),
                   0);
  assert_int_equal(off, 50); /* message 100 is partition 0's 51st */
  /* A consumer seeking by timestamp starts at the first batch holding it. */
  struct cairn_consumer *cons;
  assert_int_equal(cairn_sync_consumer_new(s, NULL, &cons), 0);
  assert_int_equal(cairn_consumer_assign(cons, "rt", 0, CAIRN_OFFSET_LATEST), 0);
  assert_int_equal(cairn_consumer_seek_timestamp(cons, "rt", 0, 1700000000000 + 100), 0);
  const struct cairn_record *r;
  assert_int_equal(cairn_sync_poll(s, cons, 5000, &r, NULL, NULL), 0);
  assert_int_equal(r->offset, 50);
  assert_int_equal(cairn_consumer_seek(cons, "rt", 0, 449), 0);
  assert_int_equal(cairn_sync_poll(s, cons, 5000, &r, NULL, NULL), 0);
  assert_int_equal(r->offset, 449);
  int64_t pos, hw;
  assert_int_equal(cairn_consumer_position(cons, "rt", 0, &pos, &hw), 0);
  assert_int_equal(pos, 450);
  assert_int_equal(hw, 450);
  /* At the end: nothing within the timeout. */
  assert_int_equal(cairn_sync_poll(s, cons, 300, &r, NULL, NULL), UV_ETIMEDOUT);
  cairn_sync_consumer_close(s, cons);

  /* Keyless messages are sticky: one partition per batch, not one per
   * message. */
  struct cairn_producer_options po;
  cairn_producer_options_init(&po);
  po.batch_bytes = 1000;
  po.linger_ms = 1000;
  struct cairn_producer *p;
  assert_int_equal(cairn_sync_producer_new(s, &po, &p), 0);
  struct lcf_sent keyless[300];
  memset(keyless, 0, sizeof keyless);
  for (int i = 0; i < 300; i++) {
    struct cairn_message m;
    cairn_message_init(&m);
    m.topic = "rt";
    m.value = "twenty bytes of text";
    m.value_len = 20;
    assert_int_equal(cairn_sync_send(s, p, &m, lcf_on_delivery, &keyless[i]), 0);
  }
  assert_int_equal(cairn_sync_flush(s, p), 0);
  cairn_sync_producer_close(s, p);
  int switches = 0, used[2] = {0, 0};
  for (int i = 0; i < 300; i++) {
    assert_int_equal(keyless[i].status, 0);
    used[keyless[i].partition]++;
    switches += i > 0 && keyless[i].partition != keyless[i - 1].partition;
  }
  print_message("keyless: %d and %d messages, %d partition switches\n", used[0], used[1], switches);
  assert_true(used[0] > 0 && used[1] > 0);
  assert_true(switches >= 2 && switches <= 20); /* ~28 bytes a record: ~35 per batch */

  int rv = cairn_sync_delete_topic(s, "rt");
  assert_int_equal(rv, 0);
  rv = cairn_sync_delete_topic(s, "rt");
  if (rv != CAIRN_EUNKNOWN_TOPIC) {
    fail_msg("second delete: %s: %s", cairn_errname(rv), cairn_sync_errmsg(s));
  }
  cairn_sync_free(s);
  cd_destroy(&c);
}

/* ---- leader SIGKILL ---- */

#define KILL_N 2000
#define KILL_PARTS 2

struct kill_check {
  int *times_seen;            /* per message id */
  int last_first[KILL_PARTS]; /* last message id seen for the first time */
  int duplicates;
  int32_t partition;
  bool in_order;
};

static void kill_on_record(const struct cairn_record *r, void *arg)
{
  struct kill_check *k = arg;
  assert_true(r->value_len > 2 && r->value_len < 16);
  char buf[16];
  memcpy(buf, r->value, r->value_len);
  buf[r->value_len] = '\0';
  int id = atoi(buf + 2);
  assert_true(id >= 0 && id < KILL_N);
  if (k->times_seen[id]++ > 0) {
    k->duplicates++;
    return;
  }
  if (id < k->last_first[k->partition]) {
    k->in_order = false;
  }
  k->last_first[k->partition] = id;
}

/* Message i: key "k<i mod 40>", value "m-<i>", its outcome into *sent. */
static void send_kill_message(struct cairn_sync *s, struct cairn_producer *p, const char *topic,
                              int i, struct lcf_sent *sent)
{
  assert_int_equal(lcf_send_numbered(s, p, topic, i, 40, sent), 0);
}

/* 2000 keyed messages to a 3-replica topic; the leader of partition 0 is
 * SIGKILLed after the first 700 are acknowledged. Every message must be
 * delivered (no application error), every acknowledged offset must hold
 * its message, each partition must hold its messages in send order
 * (counting first occurrences), and duplicates (a non-idempotent retry
 * after IN_DOUBT) are counted and printed. */
/* extra: more flags for every node (NULL: none). With restart, the
 * killed node is started again at the end and everything is read back once
 * more with it in the cluster. */
static void produce_across_leader_sigkill(const char *extra, bool restart, size_t batch_bytes)
{
  struct cd_cluster c;
  char flags[512];
  snprintf(flags, sizeof flags, "%s%s%s", FAST, extra != NULL ? " " : "", extra ? extra : "");
  start_cluster_with(&c, 3, flags);
  char boot[256];
  lcf_bootstrap_list(&c, boot, sizeof boot);
  struct cairn_sync *s = connect_sync(boot, 60000);
  assert_int_equal(cairn_sync_create_topic(s, "kill", KILL_PARTS, 3, NULL), 0);
  uint64_t leader = leader_of(s, "kill", 0);

  struct cairn_producer_options po;
  cairn_producer_options_init(&po);
  po.linger_ms = 2;
  po.batch_bytes = batch_bytes; /* many small batches: several in flight */
  struct cairn_producer *p;
  assert_int_equal(cairn_sync_producer_new(s, &po, &p), 0);
  int64_t pid;
  int16_t epoch;
  struct lcf_sent *sent = calloc(KILL_N, sizeof *sent);
  long long t0 = tu_now_ms(), t_kill = 0;
  struct cairn_consumer *tail = NULL;
  int64_t tail_next = 0;
  for (int i = 0; i < KILL_N; i++) {
    send_kill_message(s, p, "kill", i, &sent[i]);
    if (i == 700) {
      assert_int_equal(cairn_sync_flush(s, p), 0);
      /* A consumer of partition 0 reads a little from the leader... */
      assert_int_equal(cairn_sync_consumer_new(s, NULL, &tail), 0);
      assert_int_equal(cairn_consumer_assign(tail, "kill", 0, CAIRN_OFFSET_EARLIEST), 0);
      for (int k = 0; k < 50; k++) {
        const struct cairn_record *r;
        assert_int_equal(cairn_sync_poll(s, tail, 5000, &r, NULL, NULL), 0);
        assert_int_equal(r->offset, tail_next);
        tail_next++;
      }
      cd_kill(&c, cd_index(&c, leader));
      t_kill = tu_now_ms();
      if (restart && !tu_file_contains(c.nodes[cd_index(&c, leader)].log, "on the thread pool")) {
        fail_msg("the leader took no snapshot before the kill (log %s)",
                 c.nodes[cd_index(&c, leader)].log);
      }
    }
  }
  assert_int_equal(cairn_sync_flush(s, p), 0);
  long long t_end = tu_now_ms();
  cairn_producer_id(p, &pid, &epoch);
  cairn_sync_producer_close(s, p);
  /* ... and goes on at the new leader, without an error, to the end. */
  int64_t end0;
  assert_int_equal(cairn_sync_list_offsets(s, "kill", 0, CAIRN_OFFSET_SPEC_LATEST, 0, &end0, NULL),
                   0);
  while (tail_next < end0) {
    const struct cairn_record *r;
    int rv = cairn_sync_poll(s, tail, 10000, &r, NULL, NULL);
    if (rv != 0) {
      fail_msg("the consumer stopped at %" PRId64 " of %" PRId64 ": %s", tail_next, end0,
               cairn_errname(rv));
    }
    assert_int_equal(r->offset, tail_next);
    tail_next++;
  }
  cairn_sync_consumer_close(s, tail);
  int failed = 0;
  for (int i = 0; i < KILL_N; i++) {
    assert_true(sent[i].done);
    if (sent[i].status != 0) {
      failed++;
      fprintf(stderr, "message %d: %s\n", i, cairn_errname(sent[i].status));
    }
  }
  assert_int_equal(failed, 0);
  struct lc_stats st = cairn_sync_client(s)->stats;

  struct kill_check k = {calloc(KILL_N, sizeof(int)), {-1, -1}, 0, 0, true};
  size_t total = 0;
  for (int32_t part = 0; part < KILL_PARTS; part++) {
    k.partition = part;
    total += consume_all(s, "kill", part, SIZE_MAX, 3000, kill_on_record, &k);
  }
  for (int i = 0; i < KILL_N; i++) {
    if (k.times_seen[i] == 0) {
      fail_msg("message %d (acknowledged at %d/%" PRId64 ") is missing", i, sent[i].partition,
               sent[i].offset);
    }
  }
  assert_true(k.in_order);
  if (pid >= 0) {
    assert_int_equal(k.duplicates, 0); /* idempotent: each batch once */
  }
  print_message("sigkill (%s, producer id %" PRId64
                "): %d messages in %lld ms (%lld ms after the kill), read %zu, "
                "duplicates %d; client: %" PRIu64 " NOT_LEADER followed, %" PRIu64
                " connection failures, %" PRIu64 " retries, %" PRIu64 " metadata refreshes\n",
                pid >= 0 ? "idempotent" : "not idempotent", pid, KILL_N, t_end - t0, t_end - t_kill,
                total, k.duplicates, st.not_leader, st.conn_failures, st.retries,
                st.meta_refreshes);
  /* Every acknowledged offset holds its message. */
  struct cairn_consumer *cons;
  assert_int_equal(cairn_sync_consumer_new(s, NULL, &cons), 0);
  for (int i = 0; i < KILL_N; i += 97) {
    assert_int_equal(cairn_consumer_assign(cons, "kill", sent[i].partition, sent[i].offset), 0);
    const struct cairn_record *r;
    assert_int_equal(cairn_sync_poll(s, cons, 5000, &r, NULL, NULL), 0);
    assert_int_equal(r->offset, sent[i].offset);
    char want[16];
    int wl = snprintf(want, sizeof want, "m-%d", i);
    assert_int_equal(r->value_len, (size_t)wl);
    assert_memory_equal(r->value, want, (size_t)wl);
    assert_int_equal(cairn_consumer_unassign(cons, "kill", sent[i].partition), 0);
  }
  cairn_sync_consumer_close(s, cons);
  if (restart) {
    /* The killed leader recovers from what the SIGKILL left (its store
     * and its Raft snapshots, possibly one whose sync was running) and
     * rejoins; the partitions still hold every message once, in order. */
    int victim = cd_index(&c, leader);
    uint64_t ids[3] = {c.nodes[0].id, c.nodes[1].id, c.nodes[2].id};
    assert_int_equal(cd_start(&c, victim), 0);
    if (cd_wait_alive(&c, victim == 0 ? 1 : 0, ids, 3, WAIT_MS) != 0) {
      fail_msg("node %d did not come back within %d ms (logs under %s)", victim + 1, WAIT_MS,
               c.root);
    }
    memset(k.times_seen, 0, KILL_N * sizeof(int));
    k.last_first[0] = k.last_first[1] = -1;
    k.duplicates = 0;
    k.in_order = true;
    for (int32_t part = 0; part < KILL_PARTS; part++) {
      k.partition = part;
      consume_all(s, "kill", part, SIZE_MAX, 3000, kill_on_record, &k);
    }
    for (int i = 0; i < KILL_N; i++) {
      if (k.times_seen[i] == 0) {
        fail_msg("after the restart, message %d is missing", i);
      }
    }
    assert_true(k.in_order);
    if (pid >= 0) {
      assert_int_equal(k.duplicates, 0);
    }
  }
  free(k.times_seen);
  free(sent);
  cairn_sync_free(s);
  cd_destroy(&c);
}

static void test_client_produce_across_leader_sigkill(void **state)
{
  (void)state;
  produce_across_leader_sigkill(NULL, false, 2048);
}

/* The same with a Raft log budget so small that every partition snapshots
 * every 16 entries or so: the SIGKILL lands among snapshots whose store
 * syncs run on the thread pool (rgroup_fsm.c), possibly during one. The
 * killed leader's log shows it took such snapshots; it is then restarted
 * and everything is read back again. */
static void test_client_produce_across_leader_sigkill_during_snapshots(void **state)
{
  (void)state;
  /* Batches of a message or two: hundreds of entries before the kill. */
  produce_across_leader_sigkill("--raft-log-budget-bytes 4096 --log-level debug", true, 32);
}

/* ---- a paced produce across a leader SIGKILL, default Raft timings ---- */

/* With the default Raft timings (election timeout 2.5 s): 2000 keyed
 * messages to a 3-replica topic, flushed every 10 with a pause between
 * (a paced load, every message acknowledged before the next ten go out);
 * the leader of partition 0 is SIGKILLed after the first 700. The
 * survivors see its process gone (nodewatch.h) and one of them starts an
 * election at once (cairn_raft_prompt_elections_total); the producer goes
 * on at the new leader. Every message is acknowledged, present once (an
 * idempotent producer) and in order in its partition. The time from the
 * kill to the next acknowledgement is printed, not asserted. */
static void test_client_paced_produce_across_leader_sigkill_elects_at_once(void **state)
{
  (void)state;
  struct cd_cluster c;
  start_cluster_with(&c, 3, "--node-timeout-ms 3000");
  char boot[256];
  lcf_bootstrap_list(&c, boot, sizeof boot);
  struct cairn_sync *s = connect_sync(boot, 60000);
  assert_int_equal(cairn_sync_create_topic(s, "paced", KILL_PARTS, 3, NULL), 0);
  uint64_t leader = leader_of(s, "paced", 0);
  /* A new group's first leader may still hand over to the preferred
   * replica: kill the leader once it has been the same for a while. */
  for (int stable = 0; stable < 10;) {
    usleep(200 * 1000);
    uint64_t now = leader_of(s, "paced", 0);
    stable = now == leader ? stable + 1 : 0;
    leader = now;
  }
  int killed = cd_index(&c, leader);

  struct cairn_producer_options po;
  cairn_producer_options_init(&po);
  po.linger_ms = 1;
  struct cairn_producer *p;
  assert_int_equal(cairn_sync_producer_new(s, &po, &p), 0);
  struct lcf_sent *sent = calloc(KILL_N, sizeof *sent);
  long long t_kill = 0, gap_ms = -1;
  for (int i = 0; i < KILL_N; i++) {
    send_kill_message(s, p, "paced", i, &sent[i]);
    if (i % 10 != 9) {
      continue;
    }
    assert_int_equal(cairn_sync_flush(s, p), 0);
    if (t_kill != 0 && gap_ms < 0) {
      gap_ms = tu_now_ms() - t_kill;
    }
    if (i == 699) {
      cd_kill(&c, killed);
      t_kill = tu_now_ms();
    }
    usleep(2 * 1000);
  }
  int64_t pid;
  int16_t epoch;
  cairn_producer_id(p, &pid, &epoch);
  cairn_sync_producer_close(s, p);
  for (int i = 0; i < KILL_N; i++) {
    assert_true(sent[i].done);
    if (sent[i].status != 0) {
      fail_msg("message %d: %s", i, cairn_errname(sent[i].status));
    }
  }

  /* A new leader, elected at once by a survivor that saw the kill. */
  uint64_t now_leader = leader_of(s, "paced", 0);
  assert_int_not_equal(now_leader, leader);
  long long prompt = 0, gone = 0;
  for (int i = 0; i < 3; i++) {
    if (i == killed) {
      continue;
    }
    long long v = cd_metric(c.nodes[i].admin_port, "cairn_raft_prompt_elections_total");
    long long g = cd_metric(c.nodes[i].admin_port, "cairn_nodes_seen_gone_total");
    assert_true(v >= 0 && g >= 0);
    prompt += v;
    gone += g;
  }
  assert_true(gone >= 1);
  assert_true(prompt >= 1);

  struct kill_check k = {calloc(KILL_N, sizeof(int)), {-1, -1}, 0, 0, true};
  for (int32_t part = 0; part < KILL_PARTS; part++) {
    k.partition = part;
    (void)consume_all(s, "paced", part, SIZE_MAX, 3000, kill_on_record, &k);
  }
  for (int i = 0; i < KILL_N; i++) {
    if (k.times_seen[i] == 0) {
      fail_msg("message %d (acknowledged at %d/%" PRId64 ") is missing", i, sent[i].partition,
               sent[i].offset);
    }
  }
  assert_true(k.in_order);
  if (pid >= 0) {
    assert_int_equal(k.duplicates, 0);
  }
  print_message("paced sigkill: node %" PRIu64 " killed, node %" PRIu64 " leads; %lld prompt "
                "election(s), node seen gone %lld time(s); the flush across the kill took "
                "%lld ms; duplicates %d (%s)\n",
                leader, now_leader, prompt, gone, gap_ms, k.duplicates,
                pid >= 0 ? "idempotent" : "not idempotent");
  free(k.times_seen);
  free(sent);
  cairn_sync_free(s);
  cd_destroy(&c);
}

/* ---- NOT_LEADER and refused connections ---- */

/* The bootstrap list starts with a port nobody listens on, and the cached
 * leader of the partition is forced to a follower: produce and consume
 * succeed anyway, the client having followed a NOT_LEADER hint and
 * skipped the refused address. */
static void test_client_not_leader_and_refused_connection_are_absorbed(void **state)
{
  struct cd_cluster c;
  start_cluster(&c, 3);
  char boot[300];
  snprintf(boot, sizeof boot, "127.0.0.1:1,%s", c.nodes[1].client_addr);
  struct cairn_sync *s = connect_sync(boot, 30000);
  assert_int_equal(cairn_sync_create_topic(s, "nl", 1, 3, NULL), 0);
  uint64_t leader = settled_leader_of(s, "nl", 0);
  struct cairn_producer *p;
  assert_int_equal(cairn_sync_producer_new(s, NULL, &p), 0);
  struct cairn_message m;
  cairn_message_init(&m);
  m.topic = "nl";
  m.value = "first";
  m.value_len = 5;
  int32_t part;
  int64_t off;
  assert_int_equal(cairn_sync_produce(s, p, &m, &part, &off), 0);
  assert_int_equal(off, 0);
  /* Point the cache at a follower. */
  struct cairn_client *cl = cairn_sync_client(s);
  int fi = (cd_index(&c, leader) + 1) % 3;
  lc_meta_set_leader(cl, "nl", 0, c.nodes[fi].id, c.nodes[fi].client_addr);
  uint64_t before = cl->stats.not_leader;
  m.value = "second";
  m.value_len = 6;
  assert_int_equal(cairn_sync_produce(s, p, &m, &part, &off), 0);
  assert_int_equal(off, 1);
  assert_true(cl->stats.not_leader > before); /* the follower said so */
  /* And the consumer from a follower too. */
  lc_meta_set_leader(cl, "nl", 0, c.nodes[fi].id, c.nodes[fi].client_addr);
  struct cairn_consumer *cons;
  assert_int_equal(cairn_sync_consumer_new(s, NULL, &cons), 0);
  assert_int_equal(cairn_consumer_assign(cons, "nl", 0, 1), 0);
  const struct cairn_record *r;
  assert_int_equal(cairn_sync_poll(s, cons, 5000, &r, NULL, NULL), 0);
  assert_int_equal(r->offset, 1);
  assert_memory_equal(r->value, "second", 6);
  print_message("NOT_LEADER followed %" PRIu64 " times, %" PRIu64 " connection failures\n",
                cl->stats.not_leader, cl->stats.conn_failures);
  cairn_sync_free(s);
  cd_destroy(&c);
}

/* ---- timeouts and bad input ---- */

/* One node, killed after a first delivery: the next message fails with
 * CAIRN_EDELIVERY_TIMEOUT close to the 2 s delivery timeout. */
static void test_client_delivery_timeout_fires_when_cluster_is_gone(void **state)
{
  struct cd_cluster c;
  start_cluster(&c, 1);
  struct cairn_sync *s = connect_sync(c.nodes[0].client_addr, 2000);
  assert_int_equal(cairn_sync_create_topic(s, "gone", 1, 1, NULL), 0);
  struct cairn_producer *p;
  assert_int_equal(cairn_sync_producer_new(s, NULL, &p), 0);
  struct cairn_message m;
  cairn_message_init(&m);
  m.topic = "gone";
  m.value = "x";
  m.value_len = 1;
  assert_int_equal(cairn_sync_produce(s, p, &m, NULL, NULL), 0);
  cd_kill(&c, 0);
  long long t0 = tu_now_ms();
  assert_int_equal(cairn_sync_produce(s, p, &m, NULL, NULL), CAIRN_EDELIVERY_TIMEOUT);
  long long took = tu_now_ms() - t0;
  print_message("delivery timeout 2000 ms fired after %lld ms\n", took);
  assert_true(took >= 1900 && took < 4000);

  /* Bounded memory: with 1000 bytes of buffer, a second 500-byte message
   * is refused at once (CAIRN_EQUEUE_FULL); the blocking send waits until
   * the first one's delivery (a timeout here) frees the room. */
  struct cairn_producer_options po;
  cairn_producer_options_init(&po);
  po.buffer_bytes = 1000;
  struct cairn_producer *small;
  assert_int_equal(cairn_sync_producer_new(s, &po, &small), 0);
  char value[500];
  memset(value, 'v', sizeof value);
  m.value = value;
  m.value_len = sizeof value;
  struct lcf_sent first = {0}, second = {0};
  assert_int_equal(cairn_producer_send(small, &m, lcf_on_delivery, &first), 0);
  assert_int_equal(cairn_producer_send(small, &m, lcf_on_delivery, &second), CAIRN_EQUEUE_FULL);
  t0 = tu_now_ms();
  assert_int_equal(cairn_sync_send(s, small, &m, lcf_on_delivery, &second), 0);
  took = tu_now_ms() - t0;
  assert_true(first.done);
  assert_int_equal(first.status, CAIRN_EDELIVERY_TIMEOUT);
  print_message("a full buffer blocked the blocking send for %lld ms\n", took);
  assert_true(took >= 1500);
  assert_int_equal(cairn_sync_flush(s, small), 0);
  assert_int_equal(second.status, CAIRN_EDELIVERY_TIMEOUT);
  cairn_sync_free(s);
  cd_destroy(&c);
}

/* Nobody listens: cairn_sync_new gives CAIRN_EUNREACHABLE within about
 * the request timeout, with a message naming the addresses; a malformed
 * list is CAIRN_EINVAL at once. */
static void test_client_unreachable_bootstrap_fails_within_timeout(void **state)
{
  struct cairn_options o;
  cairn_options_init(&o);
  o.request_timeout_ms = 1500;
  o.connect_timeout_ms = 500;
  o.retry_backoff_ms = 50;
  struct cairn_sync *s = NULL;
  char err[512] = "";
  long long t0 = tu_now_ms();
  int rv = cairn_sync_new("127.0.0.1:1,127.0.0.1:2", &o, &s, err, sizeof err);
  long long took = tu_now_ms() - t0;
  print_message("unreachable: %s after %lld ms: %s\n", cairn_errname(rv), took, err);
  assert_int_equal(rv, CAIRN_EUNREACHABLE);
  assert_null(s);
  assert_true(took < 3000);
  assert_non_null(strstr(err, "127.0.0.1:"));
  assert_int_equal(cairn_sync_new("localhost", &o, &s, err, sizeof err), CAIRN_EINVAL);
  assert_int_equal(cairn_sync_new("", &o, &s, err, sizeof err), CAIRN_EINVAL);
  assert_int_equal(cairn_sync_new("host:port", &o, &s, err, sizeof err), CAIRN_EINVAL);
}

/* An unknown topic fails the delivery (and a consumer's poll) with
 * CAIRN_EUNKNOWN_TOPIC; a message above max_batch_bytes is refused by the
 * send call; one above the node's 1 MiB entry bound (with a producer
 * allowed larger batches) fails its delivery with CAIRN_ETOOLARGE. */
static void test_client_unknown_topic_and_oversized_message_give_errors(void **state)
{
  struct cd_cluster c;
  start_cluster(&c, 1);
  struct cairn_sync *s = connect_sync(c.nodes[0].client_addr, 10000);
  struct cairn_producer *p;
  assert_int_equal(cairn_sync_producer_new(s, NULL, &p), 0);
  struct cairn_message m;
  cairn_message_init(&m);
  m.topic = "nope";
  m.value = "x";
  m.value_len = 1;
  int32_t part = 7;
  long long t0 = tu_now_ms();
  assert_int_equal(cairn_sync_produce(s, p, &m, &part, NULL), CAIRN_EUNKNOWN_TOPIC);
  assert_true(tu_now_ms() - t0 < 5000);
  assert_int_equal(part, -1);

  assert_int_equal(cairn_sync_create_topic(s, "big", 1, 1, NULL), 0);
  m.topic = "big";
  m.partition = 3;
  assert_int_equal(cairn_sync_produce(s, p, &m, NULL, NULL), CAIRN_EUNKNOWN_PARTITION);
  m.partition = CAIRN_PARTITION_ANY;
  size_t big = 2u * 1024 * 1024;
  uint8_t *v = calloc(1, big);
  m.value = v;
  m.value_len = big;
  assert_int_equal(cairn_sync_produce(s, p, &m, NULL, NULL), CAIRN_ETOOLARGE);
  struct cairn_producer_options po;
  cairn_producer_options_init(&po);
  po.max_batch_bytes = 4u * 1024 * 1024;
  struct cairn_producer *p2;
  assert_int_equal(cairn_sync_producer_new(s, &po, &p2), 0);
  assert_int_equal(cairn_sync_produce(s, p2, &m, NULL, NULL), CAIRN_ETOOLARGE);
  free(v);
  /* The producer still works after those. */
  m.value = "ok";
  m.value_len = 2;
  int64_t off = -1;
  assert_int_equal(cairn_sync_produce(s, p2, &m, NULL, &off), 0);
  assert_int_equal(off, 0);

  struct cairn_consumer *cons;
  assert_int_equal(cairn_sync_consumer_new(s, NULL, &cons), 0);
  assert_int_equal(cairn_consumer_assign(cons, "nope", 0, CAIRN_OFFSET_EARLIEST), 0);
  const struct cairn_record *r;
  const char *et = NULL;
  int32_t ep = -1;
  assert_int_equal(cairn_sync_poll(s, cons, 10000, &r, &et, &ep), CAIRN_EUNKNOWN_TOPIC);
  assert_string_equal(et, "nope");
  assert_int_equal(ep, 0);
  cairn_sync_free(s);
  cd_destroy(&c);
}

/* The example programs run against one node: the producer creates its
 * topic and delivers 50 messages, the consumer prints them back. */
static void test_client_examples_produce_and_consume(void **state)
{
  if (examples_dir == NULL) {
    skip();
  }
  struct cd_cluster c;
  start_cluster(&c, 1);
  char cmd[1024];
  snprintf(cmd, sizeof cmd, "%s/cairn-example-producer %s demo 50", examples_dir,
           c.nodes[0].client_addr);
  FILE *f = popen(cmd, "r");
  assert_non_null(f);
  char line[256];
  bool delivered = false;
  while (fgets(line, sizeof line, f) != NULL) {
    delivered = delivered || strcmp(line, "delivered 50, failed 0\n") == 0;
  }
  assert_int_equal(pclose(f), 0);
  assert_true(delivered);
  snprintf(cmd, sizeof cmd, "%s/cairn-example-consumer %s demo 0 50", examples_dir,
           c.nodes[0].client_addr);
  f = popen(cmd, "r");
  assert_non_null(f);
  int n = 0;
  while (fgets(line, sizeof line, f) != NULL) {
    char want[64];
    snprintf(want, sizeof want, "%d key-%d message-%d\n", n, n, n);
    assert_string_equal(line, want);
    n++;
  }
  assert_int_equal(pclose(f), 0);
  assert_int_equal(n, 50);
  cd_destroy(&c);
}

/* ---- retention ---- */

/* The lowest base offset of the segment files of replica (topic, 0) on
 * node i (<data>/partitions/<topic>-0.<id>/log/<base>.<ext>), or -1. */
static long long lowest_segment(const struct cd_cluster *c, int i, const char *topic)
{
  char path[1024];
  snprintf(path, sizeof path, "%s/partitions", c->nodes[i].dir);
  DIR *d = opendir(path);
  if (d == NULL) {
    return -1;
  }
  char prefix[128];
  snprintf(prefix, sizeof prefix, "%s-0.", topic);
  char rep[300] = "";
  for (struct dirent *e; (e = readdir(d)) != NULL;) {
    if (strncmp(e->d_name, prefix, strlen(prefix)) == 0) {
      snprintf(rep, sizeof rep, "%s", e->d_name);
    }
  }
  closedir(d);
  snprintf(path, sizeof path, "%s/partitions/%s/log", c->nodes[i].dir, rep);
  d = rep[0] != '\0' ? opendir(path) : NULL;
  if (d == NULL) {
    return -1;
  }
  long long low = -1;
  for (struct dirent *e; (e = readdir(d)) != NULL;) {
    if (strlen(e->d_name) > 21 && e->d_name[20] == '.') {
      long long b = strtoll(e->d_name, NULL, 10);
      low = low < 0 || b < low ? b : low;
    }
  }
  closedir(d);
  return low;
}

struct ret_check {
  int64_t next; /* the offset expected next */
  size_t bad;   /* records whose value is not "r<offset>" */
};

static void ret_collect(const struct cairn_record *r, void *arg)
{
  struct ret_check *k = arg;
  char want[32];
  int n = snprintf(want, sizeof want, "r%lld", (long long)r->offset);
  if (k->next >= 0 && r->offset != k->next) {
    k->bad++; /* a gap */
  }
  if (r->value_len < (size_t)n || memcmp(r->value, want, (size_t)n) != 0) {
    k->bad++;
  }
  k->next = r->offset + 1;
}

/* The log start of ("ret", 0) once retention has stopped moving it (the
 * same for 2 s, with a check every 200 ms): a consumer reading from it
 * then cannot find its next offset deleted under it. */
static int64_t ret_settled_start(struct cairn_sync *s)
{
  int64_t last = -1;
  int same = 0;
  for (long long end = tu_now_ms() + WAIT_MS; tu_now_ms() < end; usleep(250 * 1000)) {
    int64_t start = -1;
    assert_int_equal(
        cairn_sync_list_offsets(s, "ret", 0, CAIRN_OFFSET_SPEC_EARLIEST, 0, &start, NULL), 0);
    same = start == last ? same + 1 : 0;
    last = start;
    if (same >= 8 && start > 0) {
      return start;
    }
  }
  fail_msg("the log start of ret/0 kept moving (last %" PRId64 ")", last);
  return -1;
}

/* Produces records "r<offset>" padded to 1 KiB, from offset `from`, one at
 * a time acknowledged in a burst (the producer batches them). */
static void ret_produce(struct cairn_sync *s, struct cairn_producer *p, const char *topic,
                        int64_t from, int count)
{
  static char value[1024];
  for (int i = 0; i < count; i++) {
    memset(value, '.', sizeof value);
    int n = snprintf(value, sizeof value, "r%lld", (long long)(from + i));
    value[n] = ' ';
    struct cairn_message m = {
        .topic = topic, .partition = 0, .value = value, .value_len = sizeof value};
    assert_int_equal(cairn_sync_send(s, p, &m, NULL, NULL), 0);
  }
  assert_int_equal(cairn_sync_flush(s, p), 0);
}

/* A topic with small segments and a size limit: every replica deletes its
 * oldest segments by itself; what is left starts at the log start, is
 * contiguous and intact, and stays so across a SIGKILL and restart of the
 * leader (whose producer table, saved before the segments went, still
 * knows the producer). */
static void test_client_retention_deletes_old_segments_on_every_replica(void **state)
{
  (void)state;
  struct cd_cluster c;
  assert_int_equal(cd_init(&c, cairnd_bin, 3, 3, FAST " --retention-check-ms 200"), 0);
  uint64_t ids[3];
  for (int i = 0; i < 3; i++) {
    assert_int_equal(cd_start(&c, i), 0);
    ids[i] = c.nodes[i].id;
  }
  assert_int_equal(cd_wait_alive(&c, 0, ids, 3, WAIT_MS), 0);
  char boot[256];
  lcf_bootstrap_list(&c, boot, sizeof boot);
  struct cairn_sync *s = connect_sync(boot, 60000);
  struct cairn_topic_config cfg = {.retention_bytes = 256 * 1024, .segment_bytes = 64 * 1024};
  assert_int_equal(cairn_sync_create_topic(s, "ret", 1, 3, &cfg), 0);
  struct cairn_producer *p;
  assert_int_equal(cairn_sync_producer_new(s, NULL, &p), 0);
  const int n = 3000; /* 3 MiB: about 48 segments of 64 KiB */
  ret_produce(s, p, "ret", 0, n);

  /* Every replica lets its oldest segments go: most of 3 MiB, 256 KiB
   * kept (a replica may be caught between two unlinks: wait). */
  long long end = tu_now_ms() + WAIT_MS;
  bool all = false;
  while (!all && tu_now_ms() < end) {
    all = true;
    for (int i = 0; i < 3; i++) {
      all = all && lowest_segment(&c, i, "ret") > 1000;
    }
    if (!all) {
      usleep(200 * 1000);
    }
  }
  for (int i = 0; i < 3; i++) {
    long long low = lowest_segment(&c, i, "ret");
    print_message("node %d: log starts at segment %lld\n", i + 1, low);
    assert_true(low > 1000);
  }
  int64_t start = ret_settled_start(s), hw = -1;
  assert_int_equal(cairn_sync_list_offsets(s, "ret", 0, CAIRN_OFFSET_SPEC_LATEST, 0, &hw, NULL), 0);
  assert_true(start > 0);
  assert_int_equal(hw, n);
  struct ret_check k = {.next = -1};
  size_t got = consume_all(s, "ret", 0, (size_t)(hw - start), 3000, ret_collect, &k);
  assert_int_equal(got, (size_t)(hw - start));
  assert_int_equal(k.bad, 0);

  /* The leader SIGKILLed and restarted: still intact; the producer goes on
   * (its id and sequences are still known to every replica). */
  uint64_t leader = leader_of(s, "ret", 0);
  int li = cd_index(&c, leader);
  cd_kill(&c, li);
  ret_produce(s, p, "ret", n, 500);
  assert_int_equal(cd_start(&c, li), 0);
  assert_int_equal(cd_wait_alive(&c, li, ids, 3, WAIT_MS), 0);
  ret_produce(s, p, "ret", n + 500, 500);
  assert_int_equal(cairn_sync_list_offsets(s, "ret", 0, CAIRN_OFFSET_SPEC_LATEST, 0, &hw, NULL), 0);
  assert_int_equal(hw, n + 1000);
  start = ret_settled_start(s);
  k = (struct ret_check){.next = -1};
  got = consume_all(s, "ret", 0, (size_t)(hw - start), 3000, ret_collect, &k);
  assert_int_equal(got, (size_t)(hw - start));
  assert_int_equal(k.bad, 0);
  assert_int_equal(k.next, hw);
  cairn_sync_free(s);
  cd_destroy(&c);
}

/* ---- a batch in doubt when the epoch must change ---- */

struct doubt_read {
  char values[8][16];
  size_t n;
};

static void doubt_collect(const struct cairn_record *r, void *arg)
{
  struct doubt_read *d = arg;
  if (d->n < 8) {
    snprintf(d->values[d->n], sizeof d->values[d->n], "%.*s", (int)r->value_len,
             (const char *)r->value);
  }
  d->n++;
}

/* A one-node cluster whose client port is behind proxy *px (clients learn
 * the proxy as the node's address, so every connection goes through it),
 * topic with partitions created, and a sync client through the proxy with
 * a short request timeout (how long a lost frame is waited for). */
static struct cairn_sync *proxied_cluster(struct cd_cluster *c, struct tp **px, const char *topic,
                                          int partitions, const char *client_id)
{
  assert_int_equal(cd_init(c, cairnd_bin, 1, 1, FAST), 0);
  *px = tp_start(c->nodes[0].client_addr);
  assert_non_null(*px);
  snprintf(c->nodes[0].extra, sizeof c->nodes[0].extra, "--advertise-client 127.0.0.1:%d",
           tp_port(*px));
  assert_int_equal(cd_start(c, 0), 0);
  uint64_t id = c->nodes[0].id;
  assert_int_equal(cd_wait_alive(c, 0, &id, 1, WAIT_MS), 0);
  assert_int_equal(cd_create_topic(c, 0, topic, partitions, 1, WAIT_MS, NULL, 0), 0);
  char boot[64];
  snprintf(boot, sizeof boot, "127.0.0.1:%d", tp_port(*px));
  struct cairn_options o;
  cairn_options_init(&o);
  o.client_id = client_id;
  o.request_timeout_ms = 1500;
  o.delivery_timeout_ms = 30000;
  o.retry_backoff_ms = 50;
  o.retry_backoff_max_ms = 200;
  struct cairn_sync *s;
  char err[512];
  assert_int_equal(cairn_sync_new(boot, &o, &s, err, sizeof err), 0);
  return s;
}

/* The node writes batch m2 but its answer is lost (a proxy in front of the
 * client port drops it; the connection stays up, so the client's request
 * times out). Meanwhile another batch of the same producer fails for good
 * (REQUEST_TOO_LARGE), so the producer must take a new epoch and renumber.
 * m2 may be written: it must be resolved under the old epoch first (the
 * partition answers it as a duplicate, at its first offset), not renumbered
 * and written a second time. */
static void test_client_batch_in_doubt_at_an_epoch_bump_is_written_once(void **state)
{
  (void)state;
  struct cd_cluster c;
  struct tp *px;
  struct cairn_sync *s = proxied_cluster(&c, &px, "doubt", 2, "test_client_doubt");
  struct cairn_producer_options po;
  cairn_producer_options_init(&po);
  po.linger_ms = 0;
  po.max_batch_bytes = 4u << 20; /* past the node's 1 MiB: refused there, for good */
  struct cairn_producer *p;
  assert_int_equal(cairn_sync_producer_new(s, &po, &p), 0);

  struct cairn_message m = {.topic = "doubt", .partition = 0, .value = "m1", .value_len = 2};
  int32_t part;
  int64_t off = -1;
  assert_int_equal(cairn_sync_produce(s, p, &m, &part, &off), 0);
  assert_int_equal(off, 0);

  /* m2: written by the node, its answer dropped. */
  tp_drop_next(px, CAIRN__CLIENT__ENVELOPE__BODY_PRODUCE_RESP, 1);
  struct lcf_sent s2 = {0};
  m.value = "m2";
  assert_int_equal(cairn_sync_send(s, p, &m, lcf_on_delivery, &s2), 0);
  uv_loop_t *loop = cairn_client_loop(cairn_sync_client(s));
  for (long long end = tu_now_ms() + WAIT_MS; tp_dropped(px) == 0 && tu_now_ms() < end;) {
    uv_run(loop, UV_RUN_NOWAIT);
    usleep(1000);
  }
  assert_int_equal(tp_dropped(px), 1);
  assert_false(s2.done);

  /* While m2 waits for its answer: a batch refused for good. */
  size_t big_len = (size_t)3 << 19; /* 1.5 MiB */
  uint8_t *big = calloc(1, big_len);
  assert_non_null(big);
  struct lcf_sent sb = {0};
  struct cairn_message mb = {.topic = "doubt", .partition = 1, .value = big, .value_len = big_len};
  assert_int_equal(cairn_sync_send(s, p, &mb, lcf_on_delivery, &sb), 0);
  assert_int_equal(cairn_sync_flush(s, p), 0);
  free(big);
  assert_true(sb.done && s2.done);
  assert_int_equal(sb.status, CAIRN_ETOOLARGE);
  assert_int_equal(s2.status, 0);
  assert_int_equal(s2.offset, 1); /* the first copy's offset */

  m.value = "m3";
  assert_int_equal(cairn_sync_produce(s, p, &m, &part, &off), 0);
  assert_int_equal(off, 2);
  int64_t pid;
  int16_t epoch;
  cairn_producer_id(p, &pid, &epoch);
  assert_true(pid >= 0);
  assert_true(epoch >= 1); /* the epoch did change */

  struct doubt_read d = {0};
  consume_all(s, "doubt", 0, 8, 1500, doubt_collect, &d);
  assert_int_equal(d.n, 3);
  assert_string_equal(d.values[0], "m1");
  assert_string_equal(d.values[1], "m2");
  assert_string_equal(d.values[2], "m3");

  cairn_sync_free(s);
  assert_int_equal(cd_term(&c, 0, 10000), 0);
  tp_stop(px);
  cd_destroy(&c);
}

/* ---- a batch refused behind a lost one ---- */

/* Sends value as one batch to (topic "behind", partition) and runs the
 * loop until its ProduceRequest left the client. */
static void behind_send(struct cairn_sync *s, struct cairn_producer *p, int32_t partition,
                        const char *value, struct lcf_sent *sent)
{
  struct cairn_message m = {
      .topic = "behind", .partition = partition, .value = value, .value_len = strlen(value)};
  assert_int_equal(cairn_sync_send(s, p, &m, lcf_on_delivery, sent), 0);
  uv_loop_t *loop = cairn_client_loop(cairn_sync_client(s));
  for (int i = 0; i < 50; i++) { /* linger 0: sealed and sent within a few turns */
    uv_run(loop, UV_RUN_NOWAIT);
    usleep(1000);
  }
}

/* A ProduceRequest is lost on its way to the node (a proxy drops it; the
 * connection stays up), and the producer's next batches of the same
 * partition reach the node first. The node refuses them: out of order
 * behind the missing batch (partition 0, whose producer state exists) or
 * an unknown producer (partition 1, whose first batch was the lost one).
 * That refusal is the lost batch's gap, not theirs: they must go again
 * after it, and every message is delivered once, in order, with no new
 * epoch. (libcairn failed them for good and bumped the epoch; under
 * elections at 10,000 partitions that failed batches the application had
 * sent once.) */
static void test_client_batches_refused_behind_a_lost_one_are_retried(void **state)
{
  (void)state;
  struct cd_cluster c;
  struct tp *px;
  struct cairn_sync *s = proxied_cluster(&c, &px, "behind", 2, "test_client_behind");
  struct cairn_producer_options po;
  cairn_producer_options_init(&po);
  po.linger_ms = 0;
  struct cairn_producer *p;
  assert_int_equal(cairn_sync_producer_new(s, &po, &p), 0);
  struct cairn_message m = {.topic = "behind", .partition = 0, .value = "a0", .value_len = 2};
  int32_t part;
  int64_t off = -1;
  assert_int_equal(cairn_sync_produce(s, p, &m, &part, &off), 0);
  assert_int_equal(off, 0);

  const char *values[2][4] = {{"a0", "a1", "a2", "a3"}, {"b0", "b1", "b2", NULL}};
  struct lcf_sent sent[2][3] = {{{0}}};
  for (int32_t pt = 0; pt < 2; pt++) {
    const char *const *v = pt == 0 ? &values[0][1] : values[1];
    tp_drop_next_request(px, CAIRN__CLIENT__ENVELOPE__BODY_PRODUCE_REQ, 1);
    behind_send(s, p, pt, v[0], &sent[pt][0]);
    assert_int_equal(tp_requests_dropped(px), pt + 1);
    behind_send(s, p, pt, v[1], &sent[pt][1]);
    behind_send(s, p, pt, v[2], &sent[pt][2]);
    assert_int_equal(cairn_sync_flush(s, p), 0);
    for (int i = 0; i < 3; i++) {
      assert_true(sent[pt][i].done);
      if (sent[pt][i].status != 0) {
        fail_msg("partition %d, %s: %s", (int)pt, v[i], cairn_strerror(sent[pt][i].status));
      }
      assert_int_equal(sent[pt][i].offset, (pt == 0 ? 1 : 0) + i);
    }
  }
  int64_t pid;
  int16_t epoch;
  cairn_producer_id(p, &pid, &epoch);
  assert_true(pid >= 0);
  assert_int_equal(epoch, 0); /* nothing failed: no new epoch */

  for (int32_t pt = 0; pt < 2; pt++) {
    struct doubt_read d = {0};
    consume_all(s, "behind", pt, 8, 1500, doubt_collect, &d);
    size_t want = pt == 0 ? 4 : 3;
    assert_int_equal(d.n, want);
    for (size_t i = 0; i < want; i++) {
      assert_string_equal(d.values[i], values[pt][i]);
    }
  }
  cairn_sync_free(s);
  assert_int_equal(cd_term(&c, 0, 10000), 0);
  tp_stop(px);
  cd_destroy(&c);
}

/* ---- linger ---- */

/* A batch waiting out its linger when a round comes earlier (an answer's,
 * a probe's) must still be sealed at its linger time: that round re-arms
 * the producer's kick for it. The kick used to be left at the open
 * batch's delivery deadline, so the batch waited for the client's 10 ms
 * tick instead (linger 3 ms at 1,000 msg/s: 9 records per request, not
 * 3, and the median acknowledgement 6.4 ms instead of 2.8). */
static void test_client_linger_survives_an_earlier_round(void **state)
{
  (void)state;
  struct cd_cluster c;
  start_cluster_with(&c, 1, FAST);
  char boot[256];
  lcf_bootstrap_list(&c, boot, sizeof boot);
  struct cairn_sync *s = connect_sync(boot, 60000);
  assert_int_equal(cairn_sync_create_topic(s, "linger", 1, 1, NULL), 0);
  struct cairn_producer_options po;
  cairn_producer_options_init(&po);
  po.linger_ms = 300;
  struct cairn_producer *p;
  assert_int_equal(cairn_sync_producer_new(s, &po, &p), 0);
  struct cairn_message m = {.topic = "linger", .partition = 0, .value = "m1", .value_len = 2};
  int32_t part;
  int64_t off = -1;
  assert_int_equal(cairn_sync_produce(s, p, &m, &part, &off), 0); /* the producer id is known */

  struct cairn_client *cl = cairn_sync_client(s);
  uv_loop_t *loop = cairn_client_loop(cl);
  struct lcf_sent s2 = {0};
  m.value = "m2";
  assert_int_equal(cairn_sync_send(s, p, &m, lcf_on_delivery, &s2), 0);
  uint64_t opened_by = lc_now(cl); /* m2's batch opened at or before this */
  assert_true(p->kick_armed);
  assert_true(p->kick_due_ms <= opened_by + po.linger_ms);
  /* A round before the linger is out (as an answer arriving now makes). */
  lc_prod_kick(p);
  for (int i = 0; i < 5; i++) {
    uv_run(loop, UV_RUN_NOWAIT);
    usleep(2000);
  }
  assert_false(s2.done); /* still lingering */
  assert_true(lc_now(cl) < opened_by + po.linger_ms);
  assert_true(p->kick_armed);
  if (p->kick_due_ms > opened_by + po.linger_ms) {
    fail_msg("after an early round the kick is due %" PRIu64 " ms after the batch opened, not at "
             "its linger (%u ms)",
             p->kick_due_ms - opened_by, po.linger_ms);
  }
  assert_int_equal(cairn_sync_flush(s, p), 0);
  assert_true(s2.done);
  assert_int_equal(s2.status, 0);
  assert_int_equal(s2.offset, 1);
  cairn_sync_free(s);
  cd_destroy(&c);
}

/* ---- pipelined fetches ---- */

#define PIPE_N 3000
#define PIPE_VALUE 1024
#define PIPE_PART_MAX (128u * 1024)
#define PIPE_PREFETCH (512u * 1024)

/* Polls one record of pipe/0 from cons, checks it is `want` (offset and
 * value "p-<offset>" padded to PIPE_VALUE bytes) and that what the
 * partition holds or has coming stays within the prefetch bound. */
static void pipe_poll_one(struct cairn_sync *s, struct cairn_consumer *cons, int64_t want)
{
  const struct cairn_record *r;
  int rv = cairn_sync_poll(s, cons, 15000, &r, NULL, NULL);
  if (rv != 0) {
    fail_msg("the consumer stopped before offset %" PRId64 ": %s", want, cairn_errname(rv));
  }
  assert_int_equal(r->offset, want);
  assert_int_equal(r->value_len, PIPE_VALUE);
  char head[32];
  int hl = snprintf(head, sizeof head, "p-%" PRId64 "-", want);
  assert_memory_equal(r->value, head, (size_t)hl);
  size_t buffered, inflight;
  bool piped;
  assert_int_equal(lc_consumer_held(cons, "pipe", 0, &buffered, &inflight, &piped), 0);
  /* Without pipelining the bound is prefetch + one answer; pipelining
   * must keep it (a batch is far below PIPE_PART_MAX here). */
  assert_true(buffered + inflight <= PIPE_PREFETCH + PIPE_PART_MAX);
  if (piped) {
    assert_true(buffered + inflight < PIPE_PREFETCH + PIPE_PART_MAX);
  }
}

/* 3,000 records of 1 KiB on a 3-replica partition, read back by a
 * consumer with small answers (128 KiB) so that most of its fetches are
 * sent before the answer ahead has arrived (FetchPartitionResult's
 * next_offset, consumer.c): every record arrives once and in order, the
 * prefetch bound holds, a seek made while a pipelined fetch is in flight
 * drops that fetch's answer (the records after the seek are the seek's),
 * and a SIGKILL of the leader in the middle of the read loses and repeats
 * nothing. */
static void test_client_pipelined_fetch_reads_once_in_order_across_seek_and_sigkill(void **state)
{
  (void)state;
  struct cd_cluster c;
  start_cluster(&c, 3);
  char boot[256];
  lcf_bootstrap_list(&c, boot, sizeof boot);
  struct cairn_sync *s = connect_sync(boot, 60000);
  assert_int_equal(cairn_sync_create_topic(s, "pipe", 1, 3, NULL), 0);
  struct cairn_producer *p;
  assert_int_equal(cairn_sync_producer_new(s, NULL, &p), 0);
  struct lcf_sent *sent = calloc(PIPE_N, sizeof *sent);
  static uint8_t value[PIPE_VALUE];
  for (int i = 0; i < PIPE_N; i++) {
    memset(value, 'x', sizeof value);
    int hl = snprintf((char *)value, 32, "p-%d-", i);
    value[hl] = 'x'; /* no NUL inside the value's checked head */
    struct cairn_message m;
    cairn_message_init(&m);
    m.topic = "pipe";
    m.partition = 0;
    m.value = value;
    m.value_len = sizeof value;
    assert_int_equal(cairn_sync_send(s, p, &m, lcf_on_delivery, &sent[i]), 0);
  }
  assert_int_equal(cairn_sync_flush(s, p), 0);
  for (int i = 0; i < PIPE_N; i++) {
    assert_int_equal(sent[i].status, 0);
    assert_int_equal(sent[i].offset, i); /* one producer, one partition: offset = i */
  }
  cairn_sync_producer_close(s, p);
  uint64_t leader = leader_of(s, "pipe", 0);

  struct cairn_consumer_options co;
  cairn_consumer_options_init(&co);
  co.partition_max_bytes = PIPE_PART_MAX;
  co.prefetch_bytes = PIPE_PREFETCH;
  co.fetch_pipeline = 1;
  struct cairn_consumer *cons;
  assert_int_equal(cairn_sync_consumer_new(s, &co, &cons), 0);
  assert_int_equal(cairn_consumer_assign(cons, "pipe", 0, CAIRN_OFFSET_EARLIEST), 0);
  struct cairn_client *cl = cairn_sync_client(s);
  int64_t next = 0;
  /* Read until a pipelined fetch is in flight, then seek back to 100
   * while it is: its answer must be dropped. On a loaded machine every
   * answer may arrive whole before the consumer looks at it (nothing is
   * then sent early): it seeks back anyway, with one fetch in flight. */
  bool seeked_piped = false;
  while (next < PIPE_N / 2) {
    pipe_poll_one(s, cons, next++);
    size_t buffered, inflight;
    bool piped;
    assert_int_equal(lc_consumer_held(cons, "pipe", 0, &buffered, &inflight, &piped), 0);
    if (piped && next > 200) {
      seeked_piped = true;
      break;
    }
  }
  assert_int_equal(cairn_consumer_seek(cons, "pipe", 0, 100), 0);
  next = 100;
  print_message("seek back to 100 %s\n", seeked_piped ? "while a pipelined fetch was in flight"
                                                      : "(no pipelined fetch was seen in flight)");
  while (next < PIPE_N / 2) {
    pipe_poll_one(s, cons, next++);
  }
  cd_kill(&c, cd_index(&c, leader));
  while (next < PIPE_N) {
    pipe_poll_one(s, cons, next++);
  }
  const struct cairn_record *r;
  assert_int_equal(cairn_sync_poll(s, cons, 300, &r, NULL, NULL), UV_ETIMEDOUT); /* no more */
  print_message("pipelined read: %" PRIu64 " fetches sent before the answer ahead arrived, %" PRIu64
                " of their partitions' bytes dropped; %" PRIu64 " connection failures\n",
                cl->stats.fetch_piped, cl->stats.fetch_pipe_lost, cl->stats.conn_failures);
  assert_int_equal(cl->stats.fetch_pipe_lost, 0); /* next_offset is where the answer ahead ends */
  cairn_sync_consumer_close(s, cons);
  free(sent);
  cairn_sync_free(s);
  cd_destroy(&c);
}

int main(int argc, char **argv)
{
  if (argc < 2) {
    fprintf(stderr, "usage: %s <path of cairnd>\n", argv[0]);
    return 2;
  }
  cairnd_bin = argv[1];
  examples_dir = argc > 2 ? argv[2] : NULL;
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_client_examples_produce_and_consume),
      cmocka_unit_test(test_client_unreachable_bootstrap_fails_within_timeout),
      cmocka_unit_test(test_client_admin_and_round_trip_with_both_codecs),
      cmocka_unit_test(test_client_unknown_topic_and_oversized_message_give_errors),
      cmocka_unit_test(test_client_delivery_timeout_fires_when_cluster_is_gone),
      cmocka_unit_test(test_client_not_leader_and_refused_connection_are_absorbed),
      cmocka_unit_test(test_client_produce_across_leader_sigkill),
      cmocka_unit_test(test_client_produce_across_leader_sigkill_during_snapshots),
      cmocka_unit_test(test_client_batch_in_doubt_at_an_epoch_bump_is_written_once),
      cmocka_unit_test(test_client_batches_refused_behind_a_lost_one_are_retried),
      cmocka_unit_test(test_client_retention_deletes_old_segments_on_every_replica),
      cmocka_unit_test(test_client_paced_produce_across_leader_sigkill_elects_at_once),
      cmocka_unit_test(test_client_linger_survives_an_earlier_round),
      cmocka_unit_test(test_client_pipelined_fetch_reads_once_in_order_across_seek_and_sigkill),
  };
  const char *filter = getenv("CAIRN_TEST_FILTER");
  if (filter != NULL) {
    cmocka_set_test_filter(filter);
  }
  return cmocka_run_group_tests(tests, NULL, NULL);
}
