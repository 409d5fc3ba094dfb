/* test_kafka_rdkafka.c - librdkafka's idempotent producer against the
 * Kafka port of three real cairnd processes (docs/kafka.md): numbered,
 * keyed messages are produced with enable.idempotence=true (acks=all)
 * while the leader of partition 0 is SIGKILLed; every delivery report is
 * counted (failed ones are printed with their error), and a librdkafka
 * consumer then reads the whole topic back: no message is stored twice,
 * every acknowledged one is at the partition and offset it was
 * acknowledged with, and the numbers increase with the offsets in each
 * partition (no reordering).
 *
 * A second case freezes a majority under an idempotent producer until its
 * messages time out (librdkafka bumps its own epoch) and checks the stored
 * log's idempotence headers (test_idempotent_librdkafka_producer_bumps_
 * epoch_after_timeouts).
 *
 * Usage: test_kafka_rdkafka <path of cairnd>
 * CAIRN_KEEP_TEST_DIR=1 keeps the data dirs and node logs; in the second
 * case RK_DEBUG sets librdkafka's debug contexts (default eos) and RK_LOG
 * names a file for every librdkafka log line. */
#include "cairnd.h"
#include "format/batch.h"
#include "testutil.h"

#include <librdkafka/rdkafka.h>

#include <inttypes.h>
#include <stdbool.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <unistd.h>

#include <cmocka.h>

#define FAST "--heartbeat-ms 100 --election-ms 1000 --node-timeout-ms 2000"
#define TOPIC "rk"
#define PARTS 3
#define COUNT 3000 /* messages produced */
#define KEYS 17
#define WAIT_MS 60000
/* The timeout test: a message every PACE_US for RUN_MS; a majority frozen
 * from FREEZE_AT_MS for FREEZE_MS, longer than MSG_TIMEOUT_MS. */
#define TMO_TOPIC "rkt"
#define MSG_TIMEOUT_MS 1500
#define RUN_MS 14000
#define FREEZE_AT_MS 3000
#define FREEZE_MS 4500
#define PACE_US 2500
#define MAX_COUNT 8000

static const char *cairnd_bin;
static const char *topic = TOPIC; /* what rk_check reads */
static int count = COUNT;         /* messages produced, numbered 0..count-1 */

/* What became of message n: its delivery report. */
struct rk_sent {
  int reported; /* delivery reports received for it: must end at 1 */
  rd_kafka_resp_err_t err;
  int32_t partition;
  int64_t offset;
};

static struct rk_sent sent[MAX_COUNT];
static int reports;

static void rk_on_delivery(rd_kafka_t *rk, const rd_kafka_message_t *m, void *opaque)
{
  (void)rk;
  (void)opaque;
  int n = (int)(intptr_t)m->_private;
  assert_true(n >= 0 && n < count);
  struct rk_sent *s = &sent[n];
  s->reported++;
  s->err = m->err;
  s->partition = m->partition;
  s->offset = m->offset;
  reports++;
}

static void rk_set(rd_kafka_conf_t *conf, const char *key, const char *value)
{
  char err[256];
  if (rd_kafka_conf_set(conf, key, value, err, sizeof err) != RD_KAFKA_CONF_OK) {
    fail_msg("%s=%s: %s", key, value, err);
  }
}

static rd_kafka_conf_t *rk_conf(const char *bootstrap)
{
  rd_kafka_conf_t *conf = rd_kafka_conf_new();
  rk_set(conf, "bootstrap.servers", bootstrap);
  rk_set(conf, "log_level", "4");
  return conf;
}

/* The node id leading partition part of topic as the cluster tells
 * librdkafka, waiting for one to be known. */
static int32_t rk_leader(rd_kafka_t *rk, int32_t part)
{
  rd_kafka_topic_t *t = rd_kafka_topic_new(rk, topic, NULL);
  assert_non_null(t);
  int32_t leader = -1;
  for (long long end = tu_now_ms() + WAIT_MS; leader < 0 && tu_now_ms() < end;) {
    const struct rd_kafka_metadata *md = NULL;
    if (rd_kafka_metadata(rk, 0, t, &md, 5000) == RD_KAFKA_RESP_ERR_NO_ERROR) {
      if (md->topic_cnt == 1 && md->topics[0].partition_cnt == PARTS) {
        leader = md->topics[0].partitions[part].leader;
      }
      rd_kafka_metadata_destroy(md);
    }
    if (leader < 0) {
      usleep(100 * 1000);
    }
  }
  rd_kafka_topic_destroy(t);
  assert_true(leader > 0);
  return leader;
}

/* Produces COUNT numbered messages, SIGKILLing the leader of partition 0
 * once a third are acknowledged. Returns how many were acknowledged. */
static int rk_produce(struct cd_cluster *c, const char *bootstrap)
{
  rd_kafka_conf_t *conf = rk_conf(bootstrap);
  rk_set(conf, "enable.idempotence", "true");
  rk_set(conf, "acks", "all");
  rk_set(conf, "linger.ms", "5");
  rk_set(conf, "retry.backoff.ms", "100");
  rk_set(conf, "message.timeout.ms", "60000");
  rd_kafka_conf_set_dr_msg_cb(conf, rk_on_delivery);
  char err[512];
  rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, err, sizeof err);
  if (rk == NULL) {
    fail_msg("rd_kafka_new: %s", err);
  }
  int victim = cd_index(c, (uint64_t)rk_leader(rk, 0));
  assert_true(victim >= 0);
  bool killed = false;
  int acked = 0;
  for (int n = 0; n < COUNT; n++) {
    char key[16], value[32];
    snprintf(key, sizeof key, "k%d", n % KEYS);
    snprintf(value, sizeof value, "n%06d", n);
    rd_kafka_resp_err_t e;
    do {
      e = rd_kafka_producev(rk, RD_KAFKA_V_TOPIC(TOPIC), RD_KAFKA_V_KEY(key, strlen(key)),
                            RD_KAFKA_V_VALUE(value, strlen(value)),
                            RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
                            RD_KAFKA_V_OPAQUE((void *)(intptr_t)n), RD_KAFKA_V_END);
      if (e == RD_KAFKA_RESP_ERR__QUEUE_FULL) {
        rd_kafka_poll(rk, 10);
      }
    } while (e == RD_KAFKA_RESP_ERR__QUEUE_FULL);
    assert_int_equal(e, RD_KAFKA_RESP_ERR_NO_ERROR);
    rd_kafka_poll(rk, 0);
    if (n % 10 == 9) {
      usleep(2000); /* spread the produce over a few seconds */
    }
    if (!killed && reports >= COUNT / 3) {
      printf("SIGKILL node %" PRIu64 " (leader of " TOPIC "/0) after %d reports\n",
             c->nodes[victim].id, reports);
      cd_kill(c, victim);
      killed = true;
    }
  }
  assert_int_equal(rd_kafka_flush(rk, WAIT_MS + 10000), RD_KAFKA_RESP_ERR_NO_ERROR);
  assert_true(killed);
  rd_kafka_resp_err_t fatal = rd_kafka_fatal_error(rk, err, sizeof err);
  if (fatal != RD_KAFKA_RESP_ERR_NO_ERROR) {
    fail_msg("the idempotent producer hit a fatal error: %s: %s", rd_kafka_err2name(fatal), err);
  }
  rd_kafka_destroy(rk);
  for (int n = 0; n < COUNT; n++) {
    assert_int_equal(sent[n].reported, 1);
    if (sent[n].err != RD_KAFKA_RESP_ERR_NO_ERROR) {
      printf("delivery of n%06d failed: %s\n", n, rd_kafka_err2str(sent[n].err));
      continue;
    }
    acked++;
  }
  printf("%d of %d acknowledged, %d failed\n", acked, COUNT, COUNT - acked);
  return acked;
}

/* Reads topic from the beginning of every partition to its end and checks
 * each message against what the producer was told. */
static void rk_check(const char *bootstrap)
{
  rd_kafka_conf_t *conf = rk_conf(bootstrap);
  rk_set(conf, "group.id", "rk-check");
  rk_set(conf, "enable.auto.commit", "false");
  rk_set(conf, "enable.partition.eof", "true");
  char err[512];
  rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_CONSUMER, conf, err, sizeof err);
  if (rk == NULL) {
    fail_msg("rd_kafka_new: %s", err);
  }
  rd_kafka_topic_partition_list_t *tps = rd_kafka_topic_partition_list_new(PARTS);
  int64_t end[PARTS];
  for (int32_t p = 0; p < PARTS; p++) {
    int64_t lo = 0;
    rd_kafka_resp_err_t e = RD_KAFKA_RESP_ERR__TIMED_OUT;
    for (int t = 0; t < 20 && e != RD_KAFKA_RESP_ERR_NO_ERROR; t++) {
      e = rd_kafka_query_watermark_offsets(rk, topic, p, &lo, &end[p], 5000);
    }
    assert_int_equal(e, RD_KAFKA_RESP_ERR_NO_ERROR);
    rd_kafka_topic_partition_list_add(tps, topic, p)->offset = RD_KAFKA_OFFSET_BEGINNING;
  }
  assert_int_equal(rd_kafka_assign(rk, tps), RD_KAFKA_RESP_ERR_NO_ERROR);
  rd_kafka_topic_partition_list_destroy(tps);

  static int seen[MAX_COUNT];
  memset(seen, 0, sizeof seen);
  int last_n[PARTS] = {-1, -1, -1};
  bool eof[PARTS] = {false};
  int read = 0, done = 0;
  for (long long stop = tu_now_ms() + WAIT_MS; done < PARTS && tu_now_ms() < stop;) {
    rd_kafka_message_t *m = rd_kafka_consumer_poll(rk, 500);
    if (m == NULL) {
      continue;
    }
    int32_t p = m->partition;
    if (m->err == RD_KAFKA_RESP_ERR__PARTITION_EOF) {
      if (p >= 0 && p < PARTS && !eof[p] && m->offset >= end[p]) {
        eof[p] = true;
        done++;
      }
    } else if (m->err != RD_KAFKA_RESP_ERR_NO_ERROR) {
      printf("consumer: %s\n", rd_kafka_message_errstr(m));
    } else {
      assert_true(p >= 0 && p < PARTS);
      int n = -1;
      assert_int_equal(m->len, 7);
      assert_int_equal(sscanf((const char *)m->payload, "n%6d", &n), 1);
      assert_true(n >= 0 && n < count);
      if (seen[n]++ != 0) {
        fail_msg("n%06d stored twice (again at %d/%" PRId64 ")", n, p, m->offset);
      }
      if (n <= last_n[p]) {
        fail_msg("partition %d: n%06d at offset %" PRId64 " after n%06d", p, n, m->offset,
                 last_n[p]);
      }
      if (sent[n].err == RD_KAFKA_RESP_ERR_NO_ERROR &&
          (sent[n].partition != p || sent[n].offset != m->offset)) {
        fail_msg("n%06d at %d/%" PRId64 ", acknowledged at %d/%" PRId64, n, p, m->offset,
                 sent[n].partition, sent[n].offset);
      }
      last_n[p] = n;
      read++;
    }
    rd_kafka_message_destroy(m);
  }
  assert_int_equal(done, PARTS);
  int missing = 0;
  for (int n = 0; n < count; n++) {
    if (sent[n].err == RD_KAFKA_RESP_ERR_NO_ERROR && seen[n] == 0) {
      printf("n%06d acknowledged at %d/%" PRId64 " but not read\n", n, sent[n].partition,
             sent[n].offset);
      missing++;
    }
  }
  assert_int_equal(missing, 0);
  printf("read %d messages: each once, in order, every acknowledged one where acknowledged\n",
         read);
  rd_kafka_consumer_close(rk);
  rd_kafka_destroy(rk);
}

/* Starts 3 nodes with Kafka ports (bootstrap gets their list) and creates
 * topic with PARTS partitions on all three. */
static void rk_start(struct cd_cluster *c, char *bootstrap, size_t cap)
{
  assert_int_equal(cd_init(c, cairnd_bin, 3, 3, FAST), 0);
  bootstrap[0] = '\0';
  for (int i = 0; i < 3; i++) {
    int port = tu_free_port();
    assert_true(port > 0);
    snprintf(c->nodes[i].extra, sizeof c->nodes[i].extra, "--kafka-listen 127.0.0.1:%d", port);
    size_t len = strlen(bootstrap);
    snprintf(bootstrap + len, cap - len, "%s127.0.0.1:%d", i ? "," : "", port);
  }
  assert_int_equal(cd_start_all(c, WAIT_MS), 0);
  char msg[256] = "";
  assert_int_equal(cd_create_topic(c, 0, topic, PARTS, 3, WAIT_MS, msg, sizeof msg), 0);
  assert_int_equal(cd_wait_settled(c, topic, WAIT_MS), 0);
}

static void test_idempotent_librdkafka_producer_survives_leader_kill(void **state)
{
  (void)state;
  static struct cd_cluster c;
  char bootstrap[256];
  topic = TOPIC;
  count = COUNT;
  memset(sent, 0, sizeof sent);
  reports = 0;
  rk_start(&c, bootstrap, sizeof bootstrap);

  int acked = rk_produce(&c, bootstrap);
  /* The failover takes a few seconds, the producer retries for a minute:
   * most messages, at least those before the kill, are acknowledged. */
  assert_true(acked >= COUNT / 3);
  rk_check(bootstrap);
  cd_destroy(&c);
}

/* librdkafka's own epoch bumps, seen in its EOS debug log. */
static int epoch_bumps;

static void rk_on_log(const rd_kafka_t *rk, int level, const char *fac, const char *buf)
{
  (void)rk;
  (void)level;
  (void)fac;
  static FILE *all;
  if (all == NULL && getenv("RK_LOG") != NULL) {
    all = fopen(getenv("RK_LOG"), "w");
  }
  if (all != NULL) {
    fprintf(all, "%lld %s %s\n", tu_now_ms(), fac, buf);
  }
  if (strstr(buf, "bumped epoch") != NULL) {
    epoch_bumps++;
    printf("librdkafka: %s\n", buf);
  }
}

/* One stored copy of a message, as the log holds it. */
struct rk_copy {
  int32_t partition;
  int64_t offset;
  int16_t epoch;
};

/* Reads every partition of topic through the native protocol (the stored
 * batches with their idempotence headers) and checks what Cairn
 * guarantees and what librdkafka was told:
 *  - no two batches of one producer id, epoch and base sequence (a retry
 *    is never stored twice);
 *  - per partition the epochs never go down (an older epoch's batch after
 *    a newer one is fenced), and within an epoch the numbers increase;
 *  - every acknowledged message is at its acknowledged partition and
 *    offset, and the acknowledged copies are in send order per partition.
 * A message stored twice is reported, and allowed only when its copies
 * are in different epochs: librdkafka renumbers the messages it still
 * holds from sequence 0 after its epoch bump, including one whose earlier
 * request may have been stored (its answer lost while the nodes were
 * frozen), which no broker can tell from a new message (librdkafka issue
 * #4953; Apache Kafka stores it twice as well). Returns how many such
 * copies there were. */
static int rk_check_log(struct cd_cluster *c)
{
  static struct rk_copy first[MAX_COUNT];
  static int copies[MAX_COUNT];
  memset(copies, 0, sizeof copies);
  int renumbered = 0, stored = 0;
  for (int32_t p = 0; p < PARTS; p++) {
    int64_t off = 0, hw = 1;
    int16_t epoch = -1;
    int last_n = -1, last_acked_n = -1;
    int64_t last_pid = -1;
    struct { int16_t epoch; int32_t seq; } seen_seq[4096];
    size_t nseen = 0;
    while (off < hw) {
      uint8_t *data = NULL;
      size_t len = 0;
      assert_int_equal(cd_fetch(c, topic, (uint32_t)p, off, 1 << 20, WAIT_MS, &data, &len, &hw), 0);
      size_t pos = 0;
      while (pos + BATCH_HEADER_SIZE <= len) {
        struct batch_header h;
        batch_header_decode(data + pos, &h);
        size_t size = batch_total_size(h.batch_length);
        assert_true(pos + size <= len);
        if (h.base_offset + h.last_offset_delta < off) {
          pos += size; /* before the fetch offset */
          continue;
        }
        assert_true(h.producer_id >= 0);
        assert_true(last_pid < 0 || h.producer_id == last_pid); /* one producer */
        last_pid = h.producer_id;
        if (h.producer_epoch < epoch) {
          fail_msg("partition %d offset %" PRId64 ": epoch %d after epoch %d", p, h.base_offset,
                   h.producer_epoch, epoch);
        }
        if (h.producer_epoch != epoch) {
          last_n = -1; /* librdkafka renumbers from 0 in a new epoch */
        }
        epoch = h.producer_epoch;
        for (size_t k = 0; k < nseen; k++) {
          if (seen_seq[k].epoch == h.producer_epoch && seen_seq[k].seq == h.base_sequence) {
            fail_msg("partition %d: epoch %d sequence %d stored twice (again at %" PRId64 ")", p,
                     h.producer_epoch, h.base_sequence, h.base_offset);
          }
        }
        if (nseen < sizeof seen_seq / sizeof seen_seq[0]) {
          seen_seq[nseen].epoch = h.producer_epoch;
          seen_seq[nseen++].seq = h.base_sequence;
        }
        struct batch_iter it;
        assert_int_equal(batch_iter_init(&it, data + pos, size), 0);
        struct batch_record r;
        int rv;
        while ((rv = batch_iter_next(&it, &r)) == 1) {
          int n = -1;
          assert_int_equal(r.value_len, 7);
          assert_int_equal(sscanf((const char *)r.value, "n%6d", &n), 1);
          assert_true(n >= 0 && n < count);
          if (n <= last_n) {
            fail_msg("partition %d: n%06d at offset %" PRId64 " after n%06d in epoch %d", p, n,
                     r.offset, last_n, epoch);
          }
          last_n = n;
          if (copies[n]++ == 0) {
            first[n] = (struct rk_copy){p, r.offset, epoch};
          } else if (first[n].epoch == epoch) {
            fail_msg("n%06d stored twice in epoch %d (%d/%" PRId64 " and %d/%" PRId64 ")", n, epoch,
                     first[n].partition, first[n].offset, p, r.offset);
          } else {
            renumbered++;
            printf("n%06d stored again at %d/%" PRId64 " (epoch %d; first at %d/%" PRId64
                   ", epoch %d): %s\n",
                   n, p, r.offset, epoch, first[n].partition, first[n].offset, first[n].epoch,
                   sent[n].err == RD_KAFKA_RESP_ERR_NO_ERROR ? "acknowledged" : "failed");
          }
          if (sent[n].err == RD_KAFKA_RESP_ERR_NO_ERROR && sent[n].partition == p &&
              sent[n].offset == r.offset) {
            if (n <= last_acked_n) {
              fail_msg("partition %d: acknowledged n%06d at %" PRId64 " after acknowledged n%06d",
                       p, n, r.offset, last_acked_n);
            }
            last_acked_n = n;
            copies[n] += 1000; /* marks the acknowledged copy as found */
          }
          stored++;
        }
        assert_int_equal(rv, 0);
        off = h.base_offset + h.last_offset_delta + 1;
        pos += size;
      }
      free(data);
    }
  }
  int missing = 0;
  for (int n = 0; n < count; n++) {
    if (sent[n].err == RD_KAFKA_RESP_ERR_NO_ERROR && copies[n] < 1000 && missing++ < 10) {
      printf("n%06d acknowledged at %d/%" PRId64 " but not there\n", n, sent[n].partition,
             sent[n].offset);
    }
  }
  assert_int_equal(missing, 0);
  printf("log: %d messages stored, every acknowledged one at its offset and in send order; "
         "%d stored again in a later epoch (librdkafka's renumbering)\n",
         stored, renumbered);
  return renumbered;
}

/* A majority of the nodes frozen (SIGSTOP) for longer than
 * message.timeout.ms while librdkafka's idempotent producer (5 requests in
 * flight) sends keyed messages: the messages time out, librdkafka 2.0.2
 * drains, bumps its producer's epoch itself (no InitProducerId: KIP-360's
 * local bump for a producer without a transactional id) and restarts every
 * partition's sequences at 0. The broker must take the new epoch at
 * sequence 0: no fatal error, producing goes on after SIGCONT, and the
 * stored log (rk_check_log) holds every acknowledged message at its
 * acknowledged offset, in send order per partition, no retried batch twice,
 * no epoch going back; a failed (timed-out) one may be there (in doubt). */
static void test_idempotent_librdkafka_producer_bumps_epoch_after_timeouts(void **state)
{
  (void)state;
  static struct cd_cluster c;
  char bootstrap[256];
  topic = TMO_TOPIC;
  count = MAX_COUNT;
  memset(sent, 0, sizeof sent);
  reports = 0;
  epoch_bumps = 0;
  rk_start(&c, bootstrap, sizeof bootstrap);

  rd_kafka_conf_t *conf = rk_conf(bootstrap);
  rk_set(conf, "enable.idempotence", "true");
  rk_set(conf, "acks", "all");
  rk_set(conf, "max.in.flight.requests.per.connection", "5");
  rk_set(conf, "linger.ms", "5");
  rk_set(conf, "retry.backoff.ms", "100");
  char tmo[16];
  snprintf(tmo, sizeof tmo, "%d", MSG_TIMEOUT_MS);
  rk_set(conf, "message.timeout.ms", tmo);
  rk_set(conf, "debug", getenv("RK_DEBUG") ? getenv("RK_DEBUG") : "eos");
  rd_kafka_conf_set_log_cb(conf, rk_on_log);
  rd_kafka_conf_set_dr_msg_cb(conf, rk_on_delivery);
  char err[512];
  rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, err, sizeof err);
  if (rk == NULL) {
    fail_msg("rd_kafka_new: %s", err);
  }
  /* The leader of partition 0 and the next node: no partition has a
   * majority while they are frozen. */
  int a = cd_index(&c, (uint64_t)rk_leader(rk, 0));
  assert_true(a >= 0);
  int b = (a + 1) % 3;
  long long t0 = tu_now_ms();
  bool frozen = false, thawed = false;
  int sent_n = 0, thaw_n = -1;
  for (long long now = t0; now - t0 < RUN_MS && sent_n < MAX_COUNT; now = tu_now_ms()) {
    if (!frozen && now - t0 >= FREEZE_AT_MS) {
      printf("SIGSTOP nodes %" PRIu64 " and %" PRIu64 " after %d messages, %d reports\n",
             c.nodes[a].id, c.nodes[b].id, sent_n, reports);
      tu_proc_signal(&c.nodes[a].proc, SIGSTOP);
      tu_proc_signal(&c.nodes[b].proc, SIGSTOP);
      frozen = true;
    }
    if (frozen && !thawed && now - t0 >= FREEZE_AT_MS + FREEZE_MS) {
      tu_proc_signal(&c.nodes[a].proc, SIGCONT);
      tu_proc_signal(&c.nodes[b].proc, SIGCONT);
      thawed = true;
      thaw_n = sent_n;
      printf("SIGCONT after %d messages, %d reports\n", sent_n, reports);
    }
    int n = sent_n++;
    char key[16], value[32];
    snprintf(key, sizeof key, "k%d", n % KEYS);
    snprintf(value, sizeof value, "n%06d", n);
    rd_kafka_resp_err_t e;
    do {
      e = rd_kafka_producev(rk, RD_KAFKA_V_TOPIC(TMO_TOPIC), RD_KAFKA_V_KEY(key, strlen(key)),
                            RD_KAFKA_V_VALUE(value, strlen(value)),
                            RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
                            RD_KAFKA_V_OPAQUE((void *)(intptr_t)n), RD_KAFKA_V_END);
      if (e == RD_KAFKA_RESP_ERR__QUEUE_FULL) {
        rd_kafka_poll(rk, 10);
      }
    } while (e == RD_KAFKA_RESP_ERR__QUEUE_FULL);
    assert_int_equal(e, RD_KAFKA_RESP_ERR_NO_ERROR);
    rd_kafka_poll(rk, 0);
    if (rd_kafka_fatal_error(rk, err, sizeof err) != RD_KAFKA_RESP_ERR_NO_ERROR) {
      fail_msg("the idempotent producer hit a fatal error after %d messages: %s", n, err);
    }
    usleep(PACE_US);
  }
  assert_true(thawed);
  assert_int_equal(rd_kafka_flush(rk, WAIT_MS), RD_KAFKA_RESP_ERR_NO_ERROR);
  rd_kafka_resp_err_t fatal = rd_kafka_fatal_error(rk, err, sizeof err);
  if (fatal != RD_KAFKA_RESP_ERR_NO_ERROR) {
    fail_msg("the idempotent producer hit a fatal error: %s: %s", rd_kafka_err2name(fatal), err);
  }
  rd_kafka_destroy(rk);
  count = sent_n;
  int acked = 0, timed_out = 0, other = 0, acked_after = 0;
  for (int n = 0; n < count; n++) {
    assert_int_equal(sent[n].reported, 1);
    if (sent[n].err == RD_KAFKA_RESP_ERR_NO_ERROR) {
      acked++;
      acked_after += n >= thaw_n;
    } else if (sent[n].err == RD_KAFKA_RESP_ERR__MSG_TIMED_OUT) {
      timed_out++;
    } else if (other++ < 10) {
      printf("delivery of n%06d failed: %s\n", n, rd_kafka_err2name(sent[n].err));
    }
  }
  printf("%d messages: %d acknowledged (%d of the %d sent after SIGCONT), %d timed out, "
         "%d other failures; %d epoch bumps\n",
         count, acked, acked_after, count - thaw_n, timed_out, other, epoch_bumps);
  assert_true(timed_out > 0);   /* the freeze did time messages out */
  assert_true(epoch_bumps > 0); /* and librdkafka bumped its epoch */
  assert_int_equal(other, 0);
  assert_true(acked_after > 0); /* it went on producing */
  (void)rk_check_log(&c);
  cd_destroy(&c);
}

int main(int argc, char **argv)
{
  if (argc < 2) {
    fprintf(stderr, "usage: %s <path of cairnd>\n", argv[0]);
    return 2;
  }
  cairnd_bin = argv[1];
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_idempotent_librdkafka_producer_survives_leader_kill),
      cmocka_unit_test(test_idempotent_librdkafka_producer_bumps_epoch_after_timeouts),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
