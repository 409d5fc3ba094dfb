/* test_idempotence.c - idempotent producers against real cairnd processes:
 * InitProducerId hands out distinct ids from any node (forwarded to the
 * controller leader) and bumps epochs; a stamped batch sent twice is stored
 * once and the retry is answered with the first offset; a sequence that
 * skips ahead is refused (OUT_OF_ORDER_SEQUENCE), an older epoch is fenced
 * (PRODUCER_FENCED); with several stamped batches in flight the partition
 * leader is SIGKILLed and every unacknowledged batch retried at the new
 * leader: each batch is stored exactly once, in sequence order; and after
 * every replica is killed and restarted, a retry is still answered as a
 * duplicate (the producer table is rebuilt from the log).
 *
 * Usage: test_idempotence <path of cairnd>
 * CAIRN_KEEP_TEST_DIR=1 keeps the data dirs and node logs. */
#include "cairnd.h"
#include "format/batch.h"
#include "proc.h"
#include "testutil.h"
#include "wire_client.h"

#include <inttypes.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#define WAIT_MS 30000
#define FAST "--heartbeat-ms 100 --election-ms 1000 --node-timeout-ms 2000"
#define REC 3
#define VALUE 40
#define TOPIC "idem"
#define STREAM 16 /* stamped batches of the stream the SIGKILL interrupts */
#define INFLIGHT                                                                                   \
  5 /* at most in flight: the partition's dedup window                                             \
       (PRODUCER_STATE_WINDOW), as libcairn's max_in_flight */
#define MAX_TAGS 64

#define CODE(name) CAIRN__CLIENT__ERROR_CODE__##name

static const char *cairnd_bin;

/* ---- helpers ---- */

/* The batch for tag, stamped with (producer id, epoch) as the producer's
 * batch number n: its REC records take sequences n * REC .. n * REC + REC - 1.
 * Returns owned (free()). */
static uint8_t *stamped_batch(uint64_t tag, int64_t pid, int16_t epoch, int32_t n, size_t *len)
{
  uint8_t *b = tu_make_batch(tag, REC, VALUE, 9000, len);
  tu_stamp_batch(b, *len, pid, epoch, n * REC);
  return b;
}

/* InitProducerId at node i, retried while the controller elects. Returns
 * the wire code; *pid and *epoch on success. */
static int init_producer_id(struct cd_cluster *c, int i, uint64_t bump, uint64_t *pid,
                            uint32_t *epoch)
{
  Cairn__Client__InitProducerIdRequest r = CAIRN__CLIENT__INIT_PRODUCER_ID_REQUEST__INIT;
  r.producer_id = bump;
  Cairn__Client__Envelope env = CAIRN__CLIENT__ENVELOPE__INIT;
  env.api = CAIRN__CLIENT__API__API_INIT_PRODUCER_ID;
  env.body_case = CAIRN__CLIENT__ENVELOPE__BODY_INIT_PRODUCER_ID_REQ;
  env.init_producer_id_req = &r;
  int code = -1;
  for (long long end = tu_now_ms() + WAIT_MS; tu_now_ms() < end; usleep(100 * 1000)) {
    Cairn__Client__Envelope *resp = NULL;
    if (cd_call(c, i, &env, NULL, 0, 5000, &resp, NULL, NULL) != 0) {
      continue;
    }
    assert_int_equal(resp->body_case, CAIRN__CLIENT__ENVELOPE__BODY_INIT_PRODUCER_ID_RESP);
    const Cairn__Client__InitProducerIdResponse *ir = resp->init_producer_id_resp;
    code = ir->error != NULL ? (int)ir->error->code : 0;
    *pid = ir->producer_id;
    *epoch = ir->producer_epoch;
    cairn__client__envelope__free_unpacked(resp, NULL);
    if (code != CODE(NOT_CONTROLLER)) {
      return code;
    }
  }
  return code;
}

/* The index of the node that serves produce for the partition: the one
 * whose ListOffsets answers OK. -1 if none right now. */
static int serving_leader(struct cd_cluster *c)
{
  for (int i = 0; i < c->n; i++) {
    if (!cd_running(c, i)) {
      continue;
    }
    Cairn__Client__ListOffsetsPartition lp = CAIRN__CLIENT__LIST_OFFSETS_PARTITION__INIT;
    lp.topic = TOPIC;
    lp.spec = CAIRN__CLIENT__OFFSET_SPEC__OFFSET_LATEST;
    Cairn__Client__ListOffsetsPartition *lpp = &lp;
    Cairn__Client__ListOffsetsRequest r = CAIRN__CLIENT__LIST_OFFSETS_REQUEST__INIT;
    r.partitions = &lpp;
    r.n_partitions = 1;
    Cairn__Client__Envelope env = CAIRN__CLIENT__ENVELOPE__INIT;
    env.api = CAIRN__CLIENT__API__API_LIST_OFFSETS;
    env.body_case = CAIRN__CLIENT__ENVELOPE__BODY_LIST_OFFSETS_REQ;
    env.list_offsets_req = &r;
    Cairn__Client__Envelope *resp = NULL;
    if (cd_call(c, i, &env, NULL, 0, 2000, &resp, NULL, NULL) != 0) {
      continue;
    }
    int code = -1;
    if (resp->body_case == CAIRN__CLIENT__ENVELOPE__BODY_LIST_OFFSETS_RESP &&
        resp->list_offsets_resp->n_partitions == 1) {
      const Cairn__Client__Error *e = resp->list_offsets_resp->partitions[0]->error;
      code = e != NULL ? (int)e->code : 0;
    }
    cairn__client__envelope__free_unpacked(resp, NULL);
    if (code == 0) {
      return i;
    }
  }
  return -1;
}

static int wait_serving_leader(struct cd_cluster *c)
{
  for (long long end = tu_now_ms() + WAIT_MS; tu_now_ms() < end; usleep(50 * 1000)) {
    int i = serving_leader(c);
    if (i >= 0) {
      return i;
    }
  }
  fail_msg("no leader serves %s/0 within %d ms", TOPIC, WAIT_MS);
  return -1;
}

/* Produces one batch at the serving leader, retrying IN_DOUBT, TIMEOUT,
 * NOT_LEADER and a missing answer until another answer (cd_produce would
 * also retry the producer refusals this test expects). Returns the wire
 * code (*offset on OK). */
static int produce_until_answered(struct cd_cluster *c, const uint8_t *batch, size_t len,
                                  int64_t *offset)
{
  int code = -1;
  for (long long end = tu_now_ms() + WAIT_MS; tu_now_ms() < end; usleep(100 * 1000)) {
    int i = serving_leader(c);
    if (i < 0) {
      continue;
    }
    struct wc_produce p;
    wc_produce_init(&p, TOPIC, 0, len, 5000);
    Cairn__Client__Envelope *resp = NULL;
    if (cd_call(c, i, &p.env, batch, len, 7000, &resp, NULL, NULL) != 0) {
      continue;
    }
    code = -1;
    if (resp->body_case == CAIRN__CLIENT__ENVELOPE__BODY_PRODUCE_RESP &&
        resp->produce_resp->n_partitions == 1) {
      const Cairn__Client__ProducePartitionResult *pr = resp->produce_resp->partitions[0];
      code = pr->error != NULL ? (int)pr->error->code : 0;
      *offset = pr->base_offset;
    }
    cairn__client__envelope__free_unpacked(resp, NULL);
    if (code != CODE(IN_DOUBT) && code != CODE(TIMEOUT) && code != CODE(NOT_LEADER) &&
        code != CODE(REPLICA_NOT_AVAILABLE) && code != CODE(SHUTTING_DOWN) && code != -1) {
      return code;
    }
  }
  return code;
}

/* The whole log of the partition. Returns owned (free()); *hw its end. */
static uint8_t *read_log(struct cd_cluster *c, size_t *log_len, int64_t *hw)
{
  uint8_t *log = NULL;
  *log_len = 0;
  *hw = -1;
  int64_t pos = 0;
  while (*hw < 0 || pos < *hw) {
    uint8_t *data = NULL;
    size_t dlen = 0;
    int code = cd_fetch(c, TOPIC, 0, pos, 1 << 20, WAIT_MS, &data, &dlen, hw);
    if (code != 0) {
      fail_msg("fetch at %" PRId64 ": code %d", pos, code);
    }
    if (dlen == 0) {
      free(data);
      break;
    }
    log = realloc(log, *log_len + dlen);
    memcpy(log + *log_len, data, dlen);
    *log_len += dlen;
    free(data);
    for (size_t at = 0; at < *log_len;) {
      struct batch_header h;
      batch_header_decode(log + at, &h);
      pos = h.base_offset + h.record_count;
      at += batch_total_size(h.batch_length);
    }
  }
  return log;
}

/* How often the batch of tag is in the log, and at which offset (last). */
static int count_tag(const uint8_t *log, size_t log_len, uint64_t tag, int64_t *offset)
{
  int found = 0;
  for (size_t at = 0; at < log_len;) {
    struct batch_header h;
    batch_header_decode(log + at, &h);
    size_t size = batch_total_size(h.batch_length);
    if (tu_check_batch(log + at, size, tag, REC, VALUE) == 0) {
      found++;
      *offset = h.base_offset;
    }
    at += size;
  }
  return found;
}

/* Sends one produce of batch on w without waiting, correlation id tag. */
static int send_produce(struct wc *w, uint64_t tag, const uint8_t *batch, size_t len)
{
  struct wc_produce p;
  wc_produce_init(&p, TOPIC, 0, len, 5000);
  p.env.correlation_id = tag;
  struct iovec iov = {.iov_base = (void *)batch, .iov_len = len};
  return wc_send(w, &p.env, &iov, 1);
}

/* ---- the test ---- */

static void test_idempotent_producer_stores_each_batch_once(void **state)
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
  int code = cd_create_topic(&c, 0, TOPIC, 1, 3, WAIT_MS, msg, sizeof msg);
  if (code != 0) {
    fail_msg("create topic: %d %s", code, msg);
  }

  /* Ids from two nodes (one of them forwards) differ; a bump keeps the id. */
  uint64_t pid = 0, pid2 = 0, bumped = 0;
  uint32_t epoch = 99, epoch2 = 99, bumped_epoch = 0;
  assert_int_equal(init_producer_id(&c, 0, 0, &pid, &epoch), 0);
  assert_int_equal(init_producer_id(&c, 2, 0, &pid2, &epoch2), 0);
  assert_true(pid != 0 && pid2 != 0 && pid != pid2);
  assert_int_equal(epoch, 0);
  assert_int_equal(epoch2, 0);
  assert_int_equal(init_producer_id(&c, 1, pid, &bumped, &bumped_epoch), 0);
  assert_int_equal(bumped, pid);
  assert_int_equal(bumped_epoch, 1);
  uint64_t none = 0;
  uint32_t none_epoch = 0;
  assert_int_equal(init_producer_id(&c, 1, pid2 + 1000, &none, &none_epoch),
                   CODE(UNKNOWN_PRODUCER));
  printf("  producer ids %" PRIu64 " and %" PRIu64 "; %" PRIu64 " bumped to epoch %u\n", pid, pid2,
         bumped, bumped_epoch);
  int16_t ep = (int16_t)bumped_epoch;

  /* A retry of the same stamped batch: the first offset, stored once. */
  uint64_t tags[MAX_TAGS]; /* tags[seq] */
  int64_t offs[MAX_TAGS];
  int nseq = 0;
  size_t len;
  uint8_t *b = stamped_batch(1, (int64_t)pid, ep, 0, &len);
  int64_t off0 = -1, off_again = -1;
  assert_int_equal(produce_until_answered(&c, b, len, &off0), 0);
  assert_int_equal(produce_until_answered(&c, b, len, &off_again), 0);
  assert_int_equal(off_again, off0);
  free(b);
  tags[nseq] = 1;
  offs[nseq++] = off0;
  /* Sequence 2 after 0 skips ahead: refused. */
  b = stamped_batch(1000, (int64_t)pid, ep, 2, &len);
  int64_t off = -1;
  assert_int_equal(produce_until_answered(&c, b, len, &off), CODE(OUT_OF_ORDER_SEQUENCE));
  free(b);
  /* The old epoch is fenced. */
  b = stamped_batch(1001, (int64_t)pid, 0, 1, &len);
  assert_int_equal(produce_until_answered(&c, b, len, &off), CODE(PRODUCER_FENCED));
  free(b);
  /* An unknown producer must start at 0. */
  b = stamped_batch(1002, (int64_t)pid2, 0, 5, &len);
  assert_int_equal(produce_until_answered(&c, b, len, &off), CODE(UNKNOWN_PRODUCER));
  free(b);
  /* The next sequence appends. */
  b = stamped_batch(2, (int64_t)pid, ep, 1, &len);
  assert_int_equal(produce_until_answered(&c, b, len, &offs[nseq]), 0);
  assert_true(offs[nseq] > off0);
  free(b);
  tags[nseq++] = 2;
  printf("  duplicate answered with offset %" PRId64 "; skip, old epoch and unknown producer "
         "refused\n",
         off0);

  /* Several stamped batches in flight, then the leader dies. */
  int leader = wait_serving_leader(&c);
  struct wc w;
  assert_int_equal(wc_connect(&w, c.nodes[leader].client_addr, 2000), 0);
  int first_seq = nseq;
  int acked = 0, outstanding = 0;
  /* A stream of STREAM batches, INFLIGHT at a time; the leader is killed
   * with the last INFLIGHT of them unanswered (some may be committed). */
  while (nseq < first_seq + STREAM || outstanding > 0) {
    if (outstanding < INFLIGHT && nseq < first_seq + STREAM) {
      int seq = nseq++;
      tags[seq] = 100 + (uint64_t)seq;
      offs[seq] = -1;
      b = stamped_batch(tags[seq], (int64_t)pid, ep, seq, &len);
      assert_int_equal(send_produce(&w, tags[seq], b, len), 0);
      free(b);
      outstanding++;
      if (nseq == first_seq + STREAM) {
        cd_kill(&c, leader);
      }
      continue;
    }
    Cairn__Client__Envelope *resp = NULL;
    if (wc_recv(&w, 8000, &resp, NULL, NULL) != 0) {
      break;
    }
    outstanding--;
    if (resp->body_case == CAIRN__CLIENT__ENVELOPE__BODY_PRODUCE_RESP &&
        resp->produce_resp->n_partitions == 1) {
      const Cairn__Client__ProducePartitionResult *pr = resp->produce_resp->partitions[0];
      if (pr->error == NULL || pr->error->code == 0) {
        int seq = (int)(resp->correlation_id - 100);
        assert_true(seq >= first_seq && seq < nseq);
        offs[seq] = pr->base_offset;
        acked++;
      }
    }
    cairn__client__envelope__free_unpacked(resp, NULL);
  }
  wc_close(&w);
  printf("  SIGKILL of the leader (node %" PRIu64 ") with %d of %d stamped batches in flight: "
         "%d acknowledged\n",
         c.nodes[leader].id, INFLIGHT, STREAM, acked);
  /* Retry every unacknowledged one, in sequence order, at the new leader
   * (some of them were committed before the SIGKILL: those are answered
   * with their offset, not written again). */
  int retried = 0;
  for (int seq = first_seq; seq < nseq; seq++) {
    if (offs[seq] >= 0) {
      continue;
    }
    b = stamped_batch(tags[seq], (int64_t)pid, ep, seq, &len);
    int64_t got = -1;
    code = produce_until_answered(&c, b, len, &got);
    free(b);
    if (code != 0) {
      fail_msg("retry of sequence %d: code %d", seq, code);
    }
    offs[seq] = got;
    retried++;
  }
  printf("  %d unacknowledged batches retried at the new leader\n", retried);

  /* Each batch exactly once, at its answered offset, in sequence order. */
  size_t log_len = 0;
  int64_t hw = -1;
  uint8_t *log = read_log(&c, &log_len, &hw);
  for (int seq = 0; seq < nseq; seq++) {
    int64_t at = -1;
    int found = count_tag(log, log_len, tags[seq], &at);
    if (found != 1 || at != offs[seq]) {
      fail_msg("sequence %d (tag %" PRIu64 "): found %d times, at %" PRId64 ", answered %" PRId64,
               seq, tags[seq], found, at, offs[seq]);
    }
    if (seq > 0) {
      assert_true(offs[seq] > offs[seq - 1]);
    }
  }
  int64_t at = -1;
  assert_int_equal(count_tag(log, log_len, 1000, &at), 0);
  assert_int_equal(count_tag(log, log_len, 1001, &at), 0);
  assert_int_equal(count_tag(log, log_len, 1002, &at), 0);
  free(log);
  printf("  all %d batches stored exactly once, in sequence order (log end %" PRId64 ")\n", nseq,
         hw);

  /* Every replica restarts: the table comes back from the log. */
  for (int i = 0; i < c.n; i++) {
    if (cd_running(&c, i)) {
      cd_kill(&c, i);
    }
  }
  for (int i = 0; i < c.n; i++) {
    assert_int_equal(cd_start(&c, i), 0);
  }
  (void)wait_serving_leader(&c);
  int last = nseq - 1;
  b = stamped_batch(tags[last], (int64_t)pid, ep, last, &len);
  int64_t got = -1;
  assert_int_equal(produce_until_answered(&c, b, len, &got), 0);
  assert_int_equal(got, offs[last]);
  free(b);
  b = stamped_batch(tags[last - 2], (int64_t)pid, ep, last - 2, &len);
  assert_int_equal(produce_until_answered(&c, b, len, &got), 0);
  assert_int_equal(got, offs[last - 2]);
  free(b);
  int next = nseq;
  b = stamped_batch(500, (int64_t)pid, ep, next, &len);
  assert_int_equal(produce_until_answered(&c, b, len, &got), 0);
  assert_int_equal(got, hw);
  free(b);
  b = stamped_batch(501, (int64_t)pid, ep, next + 2, &len);
  assert_int_equal(produce_until_answered(&c, b, len, &got), CODE(OUT_OF_ORDER_SEQUENCE));
  free(b);
  log = read_log(&c, &log_len, &hw);
  assert_int_equal(count_tag(log, log_len, tags[last], &at), 1);
  assert_int_equal(count_tag(log, log_len, 500, &at), 1);
  free(log);
  printf("  after a restart of every replica: retries answered as duplicates, the next "
         "sequence appended at %" PRId64 "\n",
         at);
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
      cmocka_unit_test(test_idempotent_producer_stores_each_batch_once),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
