/* test_client_protocol.c - the data-path APIs (Produce, Fetch, ListOffsets)
 * against real cairnd processes on loopback: offsets and bytes round-trip
 * on one node, request and partition errors are the documented codes, a
 * long-polling fetch wakes within milliseconds of a produce (the figure is
 * printed), compressed batches are stored as sent without being
 * decompressed (garbage records with a good CRC included), pipelined requests on one connection are each answered, and
 * SIGKILL of a 3-replica partition's leader during a stream of produces
 * loses no acknowledged batch (each sits at its acknowledged offset, once,
 * in acknowledgement order).
 *
 * Usage: test_client_protocol <path of cairnd>
 * CAIRN_TEST_FILTER='*long_poll*' runs a subset; CAIRN_KEEP_TEST_DIR=1 keeps
 * the data dirs and node logs. */
#include "cairnd.h"
#include "common/err.h"
#include "format/batch.h"
#include "format/codec.h"
#include "format/crc32c.h"
#include "format/endian.h"
#include "proc.h"
#include "testutil.h"
#include "wire_client.h"

#include <errno.h>
#include <inttypes.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#define WAIT_MS 30000
#define FAST "--heartbeat-ms 100 --election-ms 1000 --node-timeout-ms 2000"
#define REC 3    /* records per test batch */
#define VALUE 40 /* value bytes per record */
#define TOPIC "events"

#define CODE(name) CAIRN__CLIENT__ERROR_CODE__##name

static const char *cairnd_bin;

/* ---- requests ---- */

static int err_code(const Cairn__Client__Error *e)
{
  return e != NULL ? (int)e->code : 0;
}

static void env_produce(Cairn__Client__Envelope *env, Cairn__Client__ProduceRequest *r)
{
  cairn__client__envelope__init(env);
  env->api = CAIRN__CLIENT__API__API_PRODUCE;
  env->body_case = CAIRN__CLIENT__ENVELOPE__BODY_PRODUCE_REQ;
  env->produce_req = r;
}

static void env_fetch(Cairn__Client__Envelope *env, Cairn__Client__FetchRequest *r)
{
  cairn__client__envelope__init(env);
  env->api = CAIRN__CLIENT__API__API_FETCH;
  env->body_case = CAIRN__CLIENT__ENVELOPE__BODY_FETCH_REQ;
  env->fetch_req = r;
}

static void env_list_offsets(Cairn__Client__Envelope *env, Cairn__Client__ListOffsetsRequest *r)
{
  cairn__client__envelope__init(env);
  env->api = CAIRN__CLIENT__API__API_LIST_OFFSETS;
  env->body_case = CAIRN__CLIENT__ENVELOPE__BODY_LIST_OFFSETS_REQ;
  env->list_offsets_req = r;
}

/* A one-partition produce request of nbatches batches over lengths. */
struct one_produce {
  Cairn__Client__ProducePartition pp;
  Cairn__Client__ProducePartition *ppp;
  Cairn__Client__ProduceRequest r;
  Cairn__Client__Envelope env;
};

static void one_produce_init(struct one_produce *o, const char *topic, uint32_t partition,
                             uint32_t *lengths, size_t nbatches)
{
  cairn__client__produce_partition__init(&o->pp);
  o->pp.topic = (char *)topic;
  o->pp.partition = partition;
  o->pp.batch_lengths = lengths;
  o->pp.n_batch_lengths = nbatches;
  o->ppp = &o->pp;
  cairn__client__produce_request__init(&o->r);
  o->r.timeout_ms = 5000;
  o->r.partitions = &o->ppp;
  o->r.n_partitions = 1;
  env_produce(&o->env, &o->r);
}

/* One partition to fetch. */
struct one_fetch {
  Cairn__Client__FetchPartition fp;
  Cairn__Client__FetchPartition *fpp;
  Cairn__Client__FetchRequest r;
  Cairn__Client__Envelope env;
};

static void one_fetch_init(struct one_fetch *o, const char *topic, uint32_t partition,
                           int64_t offset, uint32_t max_bytes)
{
  cairn__client__fetch_partition__init(&o->fp);
  o->fp.topic = (char *)topic;
  o->fp.partition = partition;
  o->fp.offset = offset;
  o->fp.max_bytes = max_bytes;
  o->fpp = &o->fp;
  cairn__client__fetch_request__init(&o->r);
  o->r.partitions = &o->fpp;
  o->r.n_partitions = 1;
  env_fetch(&o->env, &o->r);
}

/* Sends env (+payload) on w and reads one answer; fails the test if none. */
static Cairn__Client__Envelope *call(struct wc *w, Cairn__Client__Envelope *env,
                                     const void *payload, size_t len, uint8_t **out,
                                     size_t *out_len)
{
  struct iovec iov = {.iov_base = (void *)payload, .iov_len = len};
  assert_int_equal(wc_send(w, env, &iov, len > 0 ? 1 : 0), 0);
  Cairn__Client__Envelope *resp = NULL;
  uint8_t *p = NULL;
  size_t plen = 0;
  int rv = wc_recv(w, 10000, &resp, &p, &plen);
  if (rv != 0) {
    fail_msg("no answer: %d (%s)", rv, w->errmsg);
  }
  if (out != NULL) {
    *out = p;
    *out_len = plen;
  } else {
    free(p);
  }
  return resp;
}

static int64_t last_timestamp; /* of the last list_offset() answer */

/* ListOffsets of one partition; returns the result's offset, *code the
 * partition's error. */
static int64_t list_offset(struct wc *w, const char *topic, uint32_t partition,
                           Cairn__Client__OffsetSpec spec, int64_t ts, int *code)
{
  Cairn__Client__ListOffsetsPartition lp = CAIRN__CLIENT__LIST_OFFSETS_PARTITION__INIT;
  lp.topic = (char *)topic;
  lp.partition = partition;
  lp.spec = spec;
  lp.timestamp = ts;
  Cairn__Client__ListOffsetsPartition *lpp = &lp;
  Cairn__Client__ListOffsetsRequest r = CAIRN__CLIENT__LIST_OFFSETS_REQUEST__INIT;
  r.partitions = &lpp;
  r.n_partitions = 1;
  Cairn__Client__Envelope env;
  env_list_offsets(&env, &r);
  Cairn__Client__Envelope *resp = call(w, &env, NULL, 0, NULL, NULL);
  assert_int_equal(resp->body_case, CAIRN__CLIENT__ENVELOPE__BODY_LIST_OFFSETS_RESP);
  assert_int_equal(resp->list_offsets_resp->n_partitions, 1);
  const Cairn__Client__ListOffsetsPartitionResult *res = resp->list_offsets_resp->partitions[0];
  *code = err_code(res->error);
  last_timestamp = res->timestamp;
  int64_t off = res->offset;
  cairn__client__envelope__free_unpacked(resp, NULL);
  return off;
}

/* ---- cluster set-up ---- */

static void start_cluster(struct cd_cluster *c, int n)
{
  assert_int_equal(cd_init(c, cairnd_bin, n, n, FAST), 0);
  uint64_t ids[CD_MAX_NODES];
  for (int i = 0; i < n; i++) {
    assert_int_equal(cd_start(c, i), 0);
    ids[i] = c->nodes[i].id;
  }
  if (cd_wait_alive(c, 0, ids, (size_t)n, WAIT_MS) != 0) {
    fail_msg("the cluster did not form within %d ms (logs under %s)", WAIT_MS, c->root);
  }
}

static void create_topic(struct cd_cluster *c, const char *name, uint32_t partitions, uint32_t rf)
{
  char msg[256] = "";
  int code = cd_create_topic(c, 0, name, partitions, rf, WAIT_MS, msg, sizeof msg);
  if (code != 0) {
    fail_msg("create topic %s: code %d: %s", name, code, msg);
  }
}

/* Waits until the node behind w leads the partition and answers
 * ListOffsets (the replicas open shortly after the topic is created). */
static void wait_serving(struct wc *w, int i, const char *topic, uint32_t partition)
{
  long long end = tu_now_ms() + WAIT_MS;
  int code = -1;
  while (tu_now_ms() < end) {
    (void)list_offset(w, topic, partition, CAIRN__CLIENT__OFFSET_SPEC__OFFSET_LATEST, 0, &code);
    if (code == 0) {
      return;
    }
    usleep(50 * 1000);
  }
  fail_msg("%s/%u has no leader on node %d (last code %d)", topic, partition, i, code);
}

/* Connects to node i once it serves the partition. */
static void connect_leader(struct cd_cluster *c, int i, struct wc *w, const char *topic,
                           uint32_t partition)
{
  assert_int_equal(wc_connect(w, c->nodes[i].client_addr, 5000), 0);
  wait_serving(w, i, topic, partition);
}

/* ---- tests ---- */

/* One node: a two-partition produce, then fetch and list offsets see the
 * very batches at the offsets the produce answered. */
static void test_single_node_produce_fetch_list_offsets_round_trip(void **state)
{
  struct cd_cluster c;
  start_cluster(&c, 1);
  create_topic(&c, TOPIC, 2, 1);
  struct wc w;
  connect_leader(&c, 0, &w, TOPIC, 0);
  wait_serving(&w, 0, TOPIC, 1);
  int code;
  assert_int_equal(list_offset(&w, TOPIC, 0, CAIRN__CLIENT__OFFSET_SPEC__OFFSET_EARLIEST, 0, &code),
                   0);
  assert_int_equal(code, 0);

  /* Partition 0 gets batches 1..3, partition 1 batch 4. */
  uint8_t *b[4];
  uint32_t lens[4];
  size_t total = 0;
  for (int k = 0; k < 4; k++) {
    size_t len;
    b[k] = tu_make_batch((uint64_t)k + 1, REC, VALUE, 1000 * (k + 1), &len);
    lens[k] = (uint32_t)len;
    total += len;
  }
  uint8_t *payload = malloc(total);
  for (int k = 0, pos = 0; k < 4; pos += (int)lens[k], k++) {
    memcpy(payload + pos, b[k], lens[k]);
  }
  Cairn__Client__ProducePartition pp[2] = {CAIRN__CLIENT__PRODUCE_PARTITION__INIT,
                                           CAIRN__CLIENT__PRODUCE_PARTITION__INIT};
  pp[0].topic = TOPIC;
  pp[0].partition = 0;
  pp[0].batch_lengths = lens;
  pp[0].n_batch_lengths = 3;
  pp[1].topic = TOPIC;
  pp[1].partition = 1;
  pp[1].batch_lengths = &lens[3];
  pp[1].n_batch_lengths = 1;
  Cairn__Client__ProducePartition *ppp[2] = {&pp[0], &pp[1]};
  Cairn__Client__ProduceRequest pr = CAIRN__CLIENT__PRODUCE_REQUEST__INIT;
  pr.timeout_ms = 5000;
  pr.partitions = ppp;
  pr.n_partitions = 2;
  Cairn__Client__Envelope env;
  env_produce(&env, &pr);
  Cairn__Client__Envelope *resp = call(&w, &env, payload, total, NULL, NULL);
  assert_int_equal(resp->body_case, CAIRN__CLIENT__ENVELOPE__BODY_PRODUCE_RESP);
  Cairn__Client__ProduceResponse *prr = resp->produce_resp;
  assert_int_equal(err_code(prr->error), 0);
  assert_int_equal(prr->n_partitions, 2);
  assert_int_equal(err_code(prr->partitions[0]->error), 0);
  assert_int_equal(prr->partitions[0]->n_base_offsets, 3);
  for (int k = 0; k < 3; k++) {
    assert_int_equal(prr->partitions[0]->base_offsets[k], k * REC);
  }
  assert_int_equal(prr->partitions[0]->base_offset, 0);
  assert_int_equal(prr->partitions[0]->log_start_offset, 0);
  assert_int_equal(err_code(prr->partitions[1]->error), 0);
  assert_int_equal(prr->partitions[1]->base_offset, 0);
  cairn__client__envelope__free_unpacked(resp, NULL);

  assert_int_equal(list_offset(&w, TOPIC, 0, CAIRN__CLIENT__OFFSET_SPEC__OFFSET_LATEST, 0, &code),
                   3 * REC);
  assert_int_equal(list_offset(&w, TOPIC, 1, CAIRN__CLIENT__OFFSET_SPEC__OFFSET_LATEST, 0, &code),
                   REC);
  assert_int_equal(list_offset(&w, TOPIC, 0, CAIRN__CLIENT__OFFSET_SPEC__OFFSET_EARLIEST, 0, &code),
                   0);
  /* Batch k's records have timestamps 1000(k+1) + i. */
  assert_int_equal(
      list_offset(&w, TOPIC, 0, CAIRN__CLIENT__OFFSET_SPEC__OFFSET_TIMESTAMP, 2001, &code),
      REC + 1);
  assert_int_equal(code, 0);
  assert_int_equal(last_timestamp, 2001);
  assert_int_equal(
      list_offset(&w, TOPIC, 0, CAIRN__CLIENT__OFFSET_SPEC__OFFSET_TIMESTAMP, 1500, &code), REC);
  assert_int_equal(last_timestamp, 2000);
  assert_int_equal(
      list_offset(&w, TOPIC, 0, CAIRN__CLIENT__OFFSET_SPEC__OFFSET_TIMESTAMP, 999999, &code), -1);
  assert_int_equal(code, 0);

  /* Both partitions in one fetch: the payload is p0's three batches then
   * p1's, the bytes fields say where each ends. */
  Cairn__Client__FetchPartition fp[2] = {CAIRN__CLIENT__FETCH_PARTITION__INIT,
                                         CAIRN__CLIENT__FETCH_PARTITION__INIT};
  fp[0].topic = TOPIC;
  fp[0].partition = 0;
  fp[1].topic = TOPIC;
  fp[1].partition = 1;
  Cairn__Client__FetchPartition *fpp[2] = {&fp[0], &fp[1]};
  Cairn__Client__FetchRequest fr = CAIRN__CLIENT__FETCH_REQUEST__INIT;
  fr.partitions = fpp;
  fr.n_partitions = 2;
  env_fetch(&env, &fr);
  uint8_t *data = NULL;
  size_t dlen = 0;
  resp = call(&w, &env, NULL, 0, &data, &dlen);
  assert_int_equal(resp->body_case, CAIRN__CLIENT__ENVELOPE__BODY_FETCH_RESP);
  Cairn__Client__FetchResponse *frr = resp->fetch_resp;
  assert_int_equal(frr->n_partitions, 2);
  assert_int_equal(err_code(frr->partitions[0]->error), 0);
  assert_int_equal(frr->partitions[0]->high_watermark, 3 * REC);
  assert_int_equal(frr->partitions[0]->bytes, lens[0] + lens[1] + lens[2]);
  assert_int_equal(frr->partitions[1]->bytes, lens[3]);
  /* next_offset: after each partition's last batch sent. */
  assert_int_equal(frr->partitions[0]->next_offset, 3 * REC);
  assert_int_equal(frr->partitions[1]->next_offset, REC);
  assert_int_equal(dlen, total);
  for (int k = 0, pos = 0; k < 4; pos += (int)lens[k], k++) {
    assert_int_equal(tu_check_batch(data + pos, lens[k], (uint64_t)k + 1, REC, VALUE), 0);
    struct batch_header h;
    batch_header_decode(data + pos, &h);
    assert_int_equal(h.base_offset, k < 3 ? k * REC : 0);
  }
  free(data);
  cairn__client__envelope__free_unpacked(resp, NULL);

  /* The response's budget: p0's first batch fills it, p1 gets nothing
   * (its batch would pass the budget and is not the response's first). */
  fr.max_bytes = lens[0] + 1;
  resp = call(&w, &env, NULL, 0, &data, &dlen);
  frr = resp->fetch_resp;
  assert_int_equal(frr->partitions[0]->bytes, lens[0]);
  assert_int_equal(frr->partitions[0]->next_offset, REC);
  assert_int_equal(frr->partitions[1]->bytes, 0);
  assert_int_equal(frr->partitions[1]->next_offset, 0); /* nothing sent: not set */
  assert_int_equal(err_code(frr->partitions[1]->error), 0);
  assert_int_equal(dlen, lens[0]);
  free(data);
  cairn__client__envelope__free_unpacked(resp, NULL);
  /* Per-partition max_bytes 1: each partition still gets one whole batch. */
  fr.max_bytes = 0;
  fp[0].max_bytes = 1;
  fp[1].max_bytes = 1;
  resp = call(&w, &env, NULL, 0, &data, &dlen);
  frr = resp->fetch_resp;
  assert_int_equal(frr->partitions[0]->bytes, lens[0]);
  assert_int_equal(frr->partitions[1]->bytes, lens[3]);
  assert_int_equal(dlen, lens[0] + lens[3]);
  assert_int_equal(tu_check_batch(data + lens[0], lens[3], 4, REC, VALUE), 0);
  free(data);
  cairn__client__envelope__free_unpacked(resp, NULL);

  /* max_bytes 1: still the first whole batch, and only that. */
  struct one_fetch of;
  one_fetch_init(&of, TOPIC, 0, REC + 1, 1);
  of.r.max_bytes = 1;
  resp = call(&w, &of.env, NULL, 0, &data, &dlen);
  assert_int_equal(err_code(resp->fetch_resp->partitions[0]->error), 0);
  assert_int_equal(dlen, lens[1]);
  assert_int_equal(tu_check_batch(data, dlen, 2, REC, VALUE), 0);
  free(data);
  cairn__client__envelope__free_unpacked(resp, NULL);

  /* At the high watermark: empty. Past it: out of range, with the range. */
  one_fetch_init(&of, TOPIC, 0, 3 * REC, 0);
  resp = call(&w, &of.env, NULL, 0, &data, &dlen);
  assert_int_equal(err_code(resp->fetch_resp->partitions[0]->error), 0);
  assert_int_equal(dlen, 0);
  cairn__client__envelope__free_unpacked(resp, NULL);
  one_fetch_init(&of, TOPIC, 0, 3 * REC + 1, 0);
  resp = call(&w, &of.env, NULL, 0, &data, &dlen);
  const Cairn__Client__FetchPartitionResult *res = resp->fetch_resp->partitions[0];
  assert_int_equal(err_code(res->error), CODE(OFFSET_OUT_OF_RANGE));
  assert_int_equal(res->log_start_offset, 0);
  assert_int_equal(res->high_watermark, 3 * REC);
  cairn__client__envelope__free_unpacked(resp, NULL);

  /* Unknown topic and partition, on each API. */
  one_fetch_init(&of, "nosuch", 0, 0, 0);
  resp = call(&w, &of.env, NULL, 0, NULL, NULL);
  assert_int_equal(err_code(resp->fetch_resp->partitions[0]->error), CODE(UNKNOWN_TOPIC));
  cairn__client__envelope__free_unpacked(resp, NULL);
  one_fetch_init(&of, TOPIC, 7, 0, 0);
  resp = call(&w, &of.env, NULL, 0, NULL, NULL);
  assert_int_equal(err_code(resp->fetch_resp->partitions[0]->error), CODE(UNKNOWN_PARTITION));
  cairn__client__envelope__free_unpacked(resp, NULL);
  (void)list_offset(&w, TOPIC, 7, CAIRN__CLIENT__OFFSET_SPEC__OFFSET_LATEST, 0, &code);
  assert_int_equal(code, CODE(UNKNOWN_PARTITION));
  struct one_produce op;
  one_produce_init(&op, "nosuch", 0, lens, 1);
  resp = call(&w, &op.env, b[0], lens[0], NULL, NULL);
  assert_int_equal(err_code(resp->produce_resp->partitions[0]->error), CODE(UNKNOWN_TOPIC));
  cairn__client__envelope__free_unpacked(resp, NULL);

  /* Lengths that miss the payload: the whole request is refused. */
  one_produce_init(&op, TOPIC, 0, lens, 1);
  resp = call(&w, &op.env, b[0], lens[0] - 1, NULL, NULL);
  assert_int_equal(err_code(resp->produce_resp->error), CODE(MALFORMED_REQUEST));
  printf("  malformed: %s\n", resp->produce_resp->error->message);
  cairn__client__envelope__free_unpacked(resp, NULL);

  /* A corrupt batch fails its partition with the reason; nothing of it is
   * appended. */
  b[0][BATCH_HEADER_SIZE + 3] ^= 0x10;
  resp = call(&w, &op.env, b[0], lens[0], NULL, NULL);
  res = NULL;
  const Cairn__Client__ProducePartitionResult *ppr = resp->produce_resp->partitions[0];
  assert_int_equal(err_code(ppr->error), CODE(CORRUPT_BATCH));
  assert_int_equal(ppr->base_offset, -1);
  printf("  corrupt: %s\n", ppr->error->message);
  cairn__client__envelope__free_unpacked(resp, NULL);
  assert_int_equal(list_offset(&w, TOPIC, 0, CAIRN__CLIENT__OFFSET_SPEC__OFFSET_LATEST, 0, &code),
                   3 * REC);

  for (int k = 0; k < 4; k++) {
    free(b[k]);
  }
  free(payload);
  wc_close(&w);
  cd_destroy(&c);
}

/* The broker never decompresses (docs/format.md, "Compressed batches"): an
 * lz4 and a zstd batch whose CRC is right but whose compressed records are
 * garbage are acknowledged and fetched back byte for byte as sent, beside
 * valid ones that decompress to the records produced. */
static void test_compressed_batches_stored_as_sent(void **state)
{
  (void)state;
  struct cd_cluster c;
  start_cluster(&c, 1);
  create_topic(&c, "codecs", 1, 1);
  struct wc w;
  connect_leader(&c, 0, &w, "codecs", 0);
  enum { NB = 4, NREC = 50 }; /* 50 records: enough for every codec to save bytes */
  uint8_t *b[NB];
  uint32_t lens[NB];
  for (int k = 0; k < NB; k++) {
    size_t len;
    b[k] = tu_make_batch((uint64_t)k + 1, NREC, VALUE, 1000, &len);
    /* 0, 1: valid lz4, zstd; 2, 3: lz4, zstd with garbage records. */
    enum batch_codec codec = k % 2 == 0 ? BATCH_CODEC_LZ4 : BATCH_CODEC_ZSTD;
    assert_int_equal(codec_batch_compress(codec, 0, &b[k], &len), 0);
    assert_int_equal(le_get16(b[k] + BATCH_OFF_ATTRIBUTES) & BATCH_ATTR_CODEC_MASK, codec);
    if (k >= 2) {
      memset(b[k] + BATCH_HEADER_SIZE, 0xEE, len - BATCH_HEADER_SIZE);
      le_put32(b[k] + BATCH_OFF_CRC, crc32c(b[k] + BATCH_CRC_START, len - BATCH_CRC_START));
    }
    lens[k] = (uint32_t)len;
  }
  for (int k = 0; k < NB; k++) {
    struct one_produce op;
    one_produce_init(&op, "codecs", 0, &lens[k], 1);
    Cairn__Client__Envelope *resp = call(&w, &op.env, b[k], lens[k], NULL, NULL);
    const Cairn__Client__ProducePartitionResult *ppr = resp->produce_resp->partitions[0];
    if (err_code(ppr->error) != 0) {
      fail_msg("batch %d refused: %s", k, ppr->error->message);
    }
    assert_int_equal(ppr->base_offset, k * NREC);
    cairn__client__envelope__free_unpacked(resp, NULL);
  }
  struct one_fetch of;
  one_fetch_init(&of, "codecs", 0, 0, 0);
  uint8_t *data = NULL;
  size_t dlen = 0;
  Cairn__Client__Envelope *resp = call(&w, &of.env, NULL, 0, &data, &dlen);
  assert_int_equal(err_code(resp->fetch_resp->partitions[0]->error), 0);
  size_t pos = 0;
  for (int k = 0; k < NB; k++) {
    assert_true(pos + lens[k] <= dlen);
    /* Everything but the broker's fields (offset, source index, flags). */
    assert_memory_equal(data + pos + BATCH_BROKER_FIELDS_SIZE, b[k] + BATCH_BROKER_FIELDS_SIZE,
                        lens[k] - BATCH_BROKER_FIELDS_SIZE);
    uint8_t *plain = NULL;
    size_t plen = 0;
    int rv = codec_batch_decompress(data + pos, lens[k], BATCH_DEFAULT_MAX_BYTES, &plain, &plen);
    if (k < 2) {
      assert_int_equal(rv, 0);
      assert_int_equal(tu_check_batch(plain, plen, (uint64_t)k + 1, NREC, VALUE), 0);
    } else {
      assert_int_equal(rv, CAIRN_ECOMPRESS);
    }
    free(plain);
    pos += lens[k];
  }
  assert_int_equal(pos, dlen);
  free(data);
  cairn__client__envelope__free_unpacked(resp, NULL);
  for (int k = 0; k < NB; k++) {
    free(b[k]);
  }
  wc_close(&w);
  cd_destroy(&c);
}

/* A fetch parked at the high watermark answers as soon as a produce
 * commits; one with nothing to wake it answers at max_wait_ms. */
static void test_long_poll_fetch_wakes_on_produce(void **state)
{
  struct cd_cluster c;
  start_cluster(&c, 1);
  create_topic(&c, TOPIC, 1, 1);
  struct wc fw, pw;
  connect_leader(&c, 0, &fw, TOPIC, 0);
  connect_leader(&c, 0, &pw, TOPIC, 0);

  /* Nothing arrives: answered empty after max_wait_ms. */
  struct one_fetch of;
  one_fetch_init(&of, TOPIC, 0, 0, 0);
  of.r.min_bytes = 1;
  of.r.max_wait_ms = 300;
  long long t0 = tu_now_ms();
  Cairn__Client__Envelope *resp = call(&fw, &of.env, NULL, 0, NULL, NULL);
  long long waited = tu_now_ms() - t0;
  assert_int_equal(err_code(resp->fetch_resp->partitions[0]->error), 0);
  assert_int_equal(resp->fetch_resp->partitions[0]->bytes, 0);
  cairn__client__envelope__free_unpacked(resp, NULL);
  printf("  empty long poll answered after %lld ms (max_wait_ms 300)\n", waited);
  assert_true(waited >= 290);

  const int rounds = 5;
  long long worst = 0;
  for (int k = 0; k < rounds; k++) {
    of.r.max_wait_ms = 10000;
    of.fp.offset = k * REC;
    struct iovec none = {0};
    assert_int_equal(wc_send(&fw, &of.env, &none, 0), 0);
    /* Parked: no answer while nothing is produced. */
    Cairn__Client__Envelope *early = NULL;
    assert_int_equal(wc_recv(&fw, 200, &early, NULL, NULL), -ETIMEDOUT);

    size_t len;
    uint8_t *batch = tu_make_batch(100 + (uint64_t)k, REC, VALUE, 5000, &len);
    uint32_t blen = (uint32_t)len;
    struct one_produce op;
    one_produce_init(&op, TOPIC, 0, &blen, 1);
    struct iovec iov = {.iov_base = batch, .iov_len = len};
    long long sent = tu_now_ms();
    assert_int_equal(wc_send(&pw, &op.env, &iov, 1), 0);
    /* The fetch's answer is read first: its time since the produce was sent
     * includes the commit (a Raft round on one node, with fsync). */
    uint8_t *data = NULL;
    size_t dlen = 0;
    assert_int_equal(wc_recv(&fw, 5000, &resp, &data, &dlen), 0);
    long long woke = tu_now_ms() - sent;
    Cairn__Client__Envelope *presp = NULL;
    assert_int_equal(wc_recv(&pw, 5000, &presp, NULL, NULL), 0);
    long long acked = tu_now_ms() - sent;
    assert_int_equal(err_code(presp->produce_resp->partitions[0]->error), 0);
    assert_int_equal(presp->produce_resp->partitions[0]->base_offset, k * REC);
    cairn__client__envelope__free_unpacked(presp, NULL);
    worst = woke > worst ? woke : worst;
    printf("  long poll %d answered %lld ms after the produce was sent (its ack read at %lld ms)\n",
           k, woke, acked);
    assert_int_equal(err_code(resp->fetch_resp->partitions[0]->error), 0);
    assert_int_equal(dlen, len);
    assert_int_equal(tu_check_batch(data, dlen, 100 + (uint64_t)k, REC, VALUE), 0);
    free(data);
    free(batch);
    cairn__client__envelope__free_unpacked(resp, NULL);
  }
  printf("  worst wake-up: %lld ms\n", worst);
  assert_true(worst < 1000);

  /* A connection closed with a parked fetch leaves the node serving. */
  of.fp.offset = rounds * REC;
  struct iovec none = {0};
  assert_int_equal(wc_send(&fw, &of.env, &none, 0), 0);
  usleep(100 * 1000);
  wc_close(&fw);
  int code;
  assert_int_equal(list_offset(&pw, TOPIC, 0, CAIRN__CLIENT__OFFSET_SPEC__OFFSET_LATEST, 0, &code),
                   rounds * REC);
  wc_close(&pw);
  /* And a clean stop with a parked fetch answers it and exits 0. */
  struct wc lw;
  assert_int_equal(wc_connect(&lw, c.nodes[0].client_addr, 5000), 0);
  assert_int_equal(wc_send(&lw, &of.env, &none, 0), 0);
  usleep(100 * 1000);
  tu_proc_signal(&c.nodes[0].proc, SIGTERM);
  assert_int_equal(wc_recv(&lw, 10000, &resp, NULL, NULL), 0);
  printf("  parked fetch at stop: %s\n",
         resp->body_case == CAIRN__CLIENT__ENVELOPE__BODY_FETCH_RESP
             ? (resp->fetch_resp->partitions[0]->error != NULL
                    ? resp->fetch_resp->partitions[0]->error->message
                    : "OK")
             : "other answer");
  assert_int_equal(resp->body_case, CAIRN__CLIENT__ENVELOPE__BODY_FETCH_RESP);
  cairn__client__envelope__free_unpacked(resp, NULL);
  wc_close(&lw);
  int status = tu_proc_wait(&c.nodes[0].proc, 20000);
  assert_true(status >= 0 && WIFEXITED(status));
  assert_int_equal(WEXITSTATUS(status), 0);
  cd_destroy(&c);
}

/* Many requests written before any answer is read: each is answered once,
 * under its correlation id, and the produces got consecutive offsets in
 * the order sent. */
static void test_pipelined_requests_each_answered(void **state)
{
  struct cd_cluster c;
  start_cluster(&c, 1);
  create_topic(&c, TOPIC, 1, 1);
  struct wc w;
  connect_leader(&c, 0, &w, TOPIC, 0);
  enum { N = 60 };
  size_t len;
  uint8_t *batches[N] = {0};
  uint32_t lens[N];
  for (int k = 0; k < N; k++) {
    Cairn__Client__Envelope env;
    struct one_produce op;
    struct one_fetch of;
    Cairn__Client__ListOffsetsPartition lp = CAIRN__CLIENT__LIST_OFFSETS_PARTITION__INIT;
    Cairn__Client__ListOffsetsPartition *lpp = &lp;
    Cairn__Client__ListOffsetsRequest lr = CAIRN__CLIENT__LIST_OFFSETS_REQUEST__INIT;
    struct iovec iov = {0};
    switch (k % 3) {
    case 0:
      batches[k] = tu_make_batch(1000 + (uint64_t)k, REC, VALUE, 7000, &len);
      lens[k] = (uint32_t)len;
      one_produce_init(&op, TOPIC, 0, &lens[k], 1);
      op.env.correlation_id = 1000 + (uint64_t)k;
      iov.iov_base = batches[k];
      iov.iov_len = len;
      assert_int_equal(wc_send(&w, &op.env, &iov, 1), 0);
      break;
    case 1:
      one_fetch_init(&of, TOPIC, 0, 0, 0);
      of.env.correlation_id = 1000 + (uint64_t)k;
      assert_int_equal(wc_send(&w, &of.env, &iov, 0), 0);
      break;
    default:
      lp.topic = TOPIC;
      lp.spec = CAIRN__CLIENT__OFFSET_SPEC__OFFSET_LATEST;
      lr.partitions = &lpp;
      lr.n_partitions = 1;
      env_list_offsets(&env, &lr);
      env.correlation_id = 1000 + (uint64_t)k;
      assert_int_equal(wc_send(&w, &env, &iov, 0), 0);
      break;
    }
  }
  bool seen[N] = {false};
  int64_t offsets[N];
  for (int got = 0; got < N; got++) {
    Cairn__Client__Envelope *resp = NULL;
    uint8_t *data = NULL;
    size_t dlen = 0;
    assert_int_equal(wc_recv(&w, 10000, &resp, &data, &dlen), 0);
    assert_true(resp->correlation_id >= 1000 && resp->correlation_id < 1000 + N);
    int k = (int)(resp->correlation_id - 1000);
    assert_false(seen[k]);
    seen[k] = true;
    switch (k % 3) {
    case 0:
      assert_int_equal(resp->body_case, CAIRN__CLIENT__ENVELOPE__BODY_PRODUCE_RESP);
      assert_int_equal(err_code(resp->produce_resp->partitions[0]->error), 0);
      offsets[k] = resp->produce_resp->partitions[0]->base_offset;
      break;
    case 1:
      assert_int_equal(resp->body_case, CAIRN__CLIENT__ENVELOPE__BODY_FETCH_RESP);
      assert_int_equal(err_code(resp->fetch_resp->partitions[0]->error), 0);
      assert_int_equal(resp->fetch_resp->partitions[0]->bytes, dlen);
      break;
    default:
      assert_int_equal(resp->body_case, CAIRN__CLIENT__ENVELOPE__BODY_LIST_OFFSETS_RESP);
      assert_int_equal(err_code(resp->list_offsets_resp->partitions[0]->error), 0);
      break;
    }
    free(data);
    cairn__client__envelope__free_unpacked(resp, NULL);
  }
  for (int k = 0, want = 0; k < N; k += 3, want += REC) {
    assert_int_equal(offsets[k], want);
  }
  /* The log holds them in that order. */
  struct one_fetch of;
  one_fetch_init(&of, TOPIC, 0, 0, 0);
  uint8_t *data = NULL;
  size_t dlen = 0;
  Cairn__Client__Envelope *resp = call(&w, &of.env, NULL, 0, &data, &dlen);
  size_t pos = 0;
  for (int k = 0; k < N; k += 3) {
    assert_true(pos + lens[k] <= dlen);
    assert_int_equal(tu_check_batch(data + pos, lens[k], 1000 + (uint64_t)k, REC, VALUE), 0);
    pos += lens[k];
    free(batches[k]);
  }
  assert_int_equal(pos, dlen);
  free(data);
  cairn__client__envelope__free_unpacked(resp, NULL);
  wc_close(&w);
  cd_destroy(&c);
}

/* ---- leader failure ---- */

#define STREAM_ACKS 150
#define KILL_AFTER 50
#define WINDOW 8 /* produces in flight on one connection */

struct ack {
  uint64_t tag;
  int64_t offset;
};

/* The index of the node that leads (topic, partition) by its own answer,
 * trying each running node; -1 if none does right now. */
static int find_serving_leader(struct cd_cluster *c, const char *topic, uint32_t partition)
{
  for (int i = 0; i < c->n; i++) {
    if (!cd_running(c, i)) {
      continue;
    }
    struct wc w;
    if (wc_connect(&w, c->nodes[i].client_addr, 1000) != 0) {
      continue;
    }
    int code = -1;
    (void)list_offset(&w, topic, partition, CAIRN__CLIENT__OFFSET_SPEC__OFFSET_LATEST, 0, &code);
    wc_close(&w);
    if (code == 0) {
      return i;
    }
  }
  return -1;
}

/* Sends a window of fresh batches (tags from *tag on, which it advances) pipelined on one
 * connection to node i, optionally SIGKILLs node kill right after, and
 * reads the answers. Batches are never retried: a retry after IN_DOUBT or
 * TIMEOUT could commit one twice. Acknowledged ones go to acks. Returns
 * the number of batches whose answer was not OK (or never came). */
static int produce_window(struct cd_cluster *c, int i, uint64_t *tag, int window, int kill,
                          struct ack *acks, int *nacks, int max_acks, int *not_leader)
{
  struct wc w;
  if (wc_connect(&w, c->nodes[i].client_addr, 2000) != 0) {
    return 0;
  }
  uint64_t first = *tag;
  int sent = 0;
  for (; sent < window; sent++) {
    size_t len;
    uint8_t *batch = tu_make_batch(*tag, REC, VALUE, 9000, &len);
    uint32_t blen = (uint32_t)len;
    struct one_produce op;
    one_produce_init(&op, TOPIC, 0, &blen, 1);
    op.env.correlation_id = *tag;
    struct iovec iov = {.iov_base = batch, .iov_len = len};
    int rv = wc_send(&w, &op.env, &iov, 1);
    free(batch);
    if (rv != 0) {
      break;
    }
    (*tag)++;
  }
  if (kill >= 0) {
    printf("  SIGKILL of node %" PRIu64 " (the leader) with %d produces in flight, after %d "
           "acknowledged\n",
           c->nodes[kill].id, sent, *nacks);
    cd_kill(c, kill);
  }
  int failed = 0;
  for (int k = 0; k < sent; k++) {
    Cairn__Client__Envelope *resp = NULL;
    if (wc_recv(&w, 8000, &resp, NULL, NULL) != 0) {
      failed += sent - k;
      break;
    }
    int code = -1;
    int64_t offset = -1;
    if (resp->body_case == CAIRN__CLIENT__ENVELOPE__BODY_PRODUCE_RESP &&
        resp->produce_resp->n_partitions == 1) {
      code = err_code(resp->produce_resp->partitions[0]->error);
      offset = resp->produce_resp->partitions[0]->base_offset;
    }
    assert_true(resp->correlation_id >= first && resp->correlation_id < first + (uint64_t)sent);
    if (code == 0 && *nacks < max_acks) {
      acks[*nacks].tag = resp->correlation_id;
      acks[*nacks].offset = offset;
      (*nacks)++;
    } else if (code != 0) {
      failed++;
      *not_leader += code == CODE(NOT_LEADER) || code == CODE(REPLICA_NOT_AVAILABLE);
    }
    cairn__client__envelope__free_unpacked(resp, NULL);
  }
  wc_close(&w);
  return failed;
}

static int ack_by_tag(const void *a, const void *b)
{
  const struct ack *x = a, *y = b;
  return x->tag < y->tag ? -1 : x->tag > y->tag;
}

static void test_leader_sigkill_loses_no_acknowledged_produce(void **state)
{
  struct cd_cluster c;
  start_cluster(&c, 3);
  create_topic(&c, TOPIC, 1, 3);
  /* A follower refuses both APIs with NOT_LEADER and names the leader. */
  int first = -1;
  long long until = tu_now_ms() + WAIT_MS;
  while ((first = find_serving_leader(&c, TOPIC, 0)) < 0 && tu_now_ms() < until) {
    usleep(50 * 1000);
  }
  assert_true(first >= 0);
  int follower = (first + 1) % c.n;
  struct wc fw;
  assert_int_equal(wc_connect(&fw, c.nodes[follower].client_addr, 2000), 0);
  struct one_fetch of;
  one_fetch_init(&of, TOPIC, 0, 0, 0);
  Cairn__Client__Envelope *resp = NULL;
  const Cairn__Client__FetchPartitionResult *fres = NULL;
  /* A follower learns the leader from its first heartbeat. */
  for (until = tu_now_ms() + 5000;; usleep(50 * 1000)) {
    resp = call(&fw, &of.env, NULL, 0, NULL, NULL);
    fres = resp->fetch_resp->partitions[0];
    assert_int_equal(err_code(fres->error), CODE(NOT_LEADER));
    if (fres->leader_id != 0 || tu_now_ms() > until) {
      break;
    }
    cairn__client__envelope__free_unpacked(resp, NULL);
  }
  printf("  fetch at a follower: %s\n", fres->error->message);
  assert_int_equal(fres->leader_id, c.nodes[first].id);
  assert_string_equal(fres->leader_address, c.nodes[first].client_addr);
  cairn__client__envelope__free_unpacked(resp, NULL);
  size_t len;
  uint8_t *batch = tu_make_batch(999999, REC, VALUE, 9000, &len);
  uint32_t blen = (uint32_t)len;
  struct one_produce op;
  one_produce_init(&op, TOPIC, 0, &blen, 1);
  resp = call(&fw, &op.env, batch, len, NULL, NULL);
  assert_int_equal(err_code(resp->produce_resp->partitions[0]->error), CODE(NOT_LEADER));
  assert_int_equal(resp->produce_resp->partitions[0]->leader_id, c.nodes[first].id);
  cairn__client__envelope__free_unpacked(resp, NULL);
  free(batch);
  wc_close(&fw);

  struct ack acks[STREAM_ACKS];
  int nacks = 0, failed = 0, not_leader = 0;
  uint64_t tag = 1;
  int killed = -1;
  long long end = tu_now_ms() + 120000;
  while (nacks < STREAM_ACKS && tu_now_ms() < end) {
    int leader = find_serving_leader(&c, TOPIC, 0);
    if (leader < 0) {
      usleep(50 * 1000);
      continue;
    }
    int kill = -1;
    if (nacks >= KILL_AFTER && killed < 0) {
      kill = killed = leader;
    }
    failed +=
        produce_window(&c, leader, &tag, WINDOW, kill, acks, &nacks, STREAM_ACKS, &not_leader);
  }
  printf("  %d acknowledged, %d not acknowledged (%d of them refused by a non-leader), %" PRIu64
         " sent\n",
         nacks, failed, not_leader, tag - 1);
  assert_int_equal(nacks, STREAM_ACKS);
  assert_true(killed >= 0);

  /* Read the whole log from the new leader. */
  int64_t hw = -1, pos = 0;
  uint8_t *log = NULL;
  size_t log_len = 0;
  while (hw < 0 || pos < hw) {
    uint8_t *data = NULL;
    size_t dlen = 0;
    int code = cd_fetch(&c, TOPIC, 0, pos, 1 << 20, WAIT_MS, &data, &dlen, &hw);
    if (code != 0) {
      fail_msg("fetch at %" PRId64 ": code %d", pos, code);
    }
    if (dlen == 0) {
      free(data);
      break;
    }
    log = realloc(log, log_len + dlen);
    memcpy(log + log_len, data, dlen);
    log_len += dlen;
    free(data);
    /* next offset: after the last batch fetched */
    size_t at = 0;
    while (at < log_len) {
      struct batch_header h;
      batch_header_decode(log + at, &h);
      pos = h.base_offset + h.record_count;
      at += batch_total_size(h.batch_length);
    }
  }
  /* Every acknowledged batch: at its offset, nowhere else, and in the
   * order it was sent. */
  qsort(acks, (size_t)nacks, sizeof acks[0], ack_by_tag);
  int64_t prev = -1;
  for (int k = 0; k < nacks; k++) {
    int found = 0;
    int64_t at_offset = -1;
    for (size_t at = 0; at < log_len;) {
      struct batch_header h;
      batch_header_decode(log + at, &h);
      size_t size = batch_total_size(h.batch_length);
      if (tu_check_batch(log + at, size, acks[k].tag, REC, VALUE) == 0) {
        found++;
        at_offset = h.base_offset;
      }
      at += size;
    }
    if (found != 1 || at_offset != acks[k].offset) {
      fail_msg("acknowledged batch %" PRIu64 " at %" PRId64 ": found %d times, at %" PRId64,
               acks[k].tag, acks[k].offset, found, at_offset);
    }
    assert_true(acks[k].offset > prev);
    prev = acks[k].offset;
  }
  printf("  all %d acknowledged batches found once at their offsets (log end %" PRId64 ")\n", nacks,
         hw);
  free(log);
  cd_destroy(&c);
}

/* A produce that cannot commit (both followers down) is answered TIMEOUT
 * at its timeout, another one is abandoned by closing its connection; the
 * node keeps their batches until the replica calls back, which happens
 * when the followers return (commit) or leadership is lost (IN_DOUBT):
 * nothing crashes or leaks (the nodes run under ASan and must stop with
 * status 0), and each batch is in the log at most once. */
static void test_produce_timeout_keeps_batches_until_the_replica_answers(void **state)
{
  struct cd_cluster c;
  start_cluster(&c, 3);
  create_topic(&c, TOPIC, 1, 3);
  int leader = -1;
  long long end = tu_now_ms() + WAIT_MS;
  while (leader < 0 && tu_now_ms() < end) {
    leader = find_serving_leader(&c, TOPIC, 0);
    usleep(50 * 1000);
  }
  assert_true(leader >= 0);
  struct wc w;
  assert_int_equal(wc_connect(&w, c.nodes[leader].client_addr, 2000), 0);
  for (int i = 0; i < c.n; i++) {
    if (i != leader) {
      cd_kill(&c, i);
    }
  }
  size_t len;
  uint8_t *batch = tu_make_batch(77, REC, VALUE, 9000, &len);
  uint32_t blen = (uint32_t)len;
  struct one_produce op;
  one_produce_init(&op, TOPIC, 0, &blen, 1);
  op.r.timeout_ms = 300;
  long long t0 = tu_now_ms();
  Cairn__Client__Envelope *resp = call(&w, &op.env, batch, len, NULL, NULL);
  long long took = tu_now_ms() - t0;
  const Cairn__Client__ProducePartitionResult *res = resp->produce_resp->partitions[0];
  int code = err_code(res->error);
  printf("  without a quorum: %s after %lld ms: %s\n",
         code == CODE(TIMEOUT)    ? "TIMEOUT"
         : code == CODE(IN_DOUBT) ? "IN_DOUBT"
                                  : "?",
         took, res->error != NULL ? res->error->message : "");
  assert_true(code == CODE(TIMEOUT) || code == CODE(IN_DOUBT) || code == CODE(NOT_LEADER));
  assert_int_equal(res->base_offset, -1);
  cairn__client__envelope__free_unpacked(resp, NULL);
  free(batch);

  /* A second one, abandoned: the connection closes before any answer. */
  batch = tu_make_batch(78, REC, VALUE, 9000, &len);
  blen = (uint32_t)len;
  op.r.timeout_ms = 60000;
  struct iovec iov = {.iov_base = batch, .iov_len = len};
  assert_int_equal(wc_send(&w, &op.env, &iov, 1), 0);
  usleep(100 * 1000);
  wc_close(&w);
  free(batch);

  /* The followers return: the leader (or a new one) goes on serving. */
  for (int i = 0; i < c.n; i++) {
    if (i != leader) {
      assert_int_equal(cd_start(&c, i), 0);
    }
  }
  assert_true(cd_running(&c, leader));
  uint8_t *data = NULL;
  size_t dlen = 0;
  int64_t hw = -1;
  end = tu_now_ms() + WAIT_MS;
  int fetched = -1;
  /* One fresh batch per attempt (a retry of the same one after IN_DOUBT or
   * TIMEOUT could commit it twice); the acknowledged one must be there once. */
  uint64_t acked_tag = 0;
  for (uint64_t attempt_tag = 1000; acked_tag == 0 && tu_now_ms() < end; attempt_tag++) {
    int i = find_serving_leader(&c, TOPIC, 0);
    if (i < 0) {
      usleep(50 * 1000);
      continue;
    }
    int nacks = 0, not_leader = 0;
    struct ack a;
    uint64_t t = attempt_tag;
    (void)produce_window(&c, i, &t, 1, -1, &a, &nacks, 1, &not_leader);
    if (nacks == 1) {
      acked_tag = a.tag;
    }
  }
  assert_true(acked_tag != 0);
  fetched = cd_fetch(&c, TOPIC, 0, 0, 1 << 20, WAIT_MS, &data, &dlen, &hw);
  assert_int_equal(fetched, 0);
  int seen[2] = {0}, seen_new = 0;
  for (size_t at = 0; at < dlen;) {
    struct batch_header h;
    batch_header_decode(data + at, &h);
    size_t bl = batch_total_size(h.batch_length);
    for (int k = 0; k < 2; k++) {
      seen[k] += tu_check_batch(data + at, bl, 77 + (uint64_t)k, REC, VALUE) == 0;
    }
    seen_new += tu_check_batch(data + at, bl, acked_tag, REC, VALUE) == 0;
    at += bl;
  }
  printf("  after the followers returned: timed-out batch %d time(s), abandoned %d, new %d\n",
         seen[0], seen[1], seen_new);
  assert_true(seen[0] <= 1 && seen[1] <= 1);
  assert_int_equal(seen_new, 1);
  free(data);
  for (int i = 0; i < c.n; i++) {
    int status = cd_term(&c, i, 20000);
    if (!(status >= 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0)) {
      fail_msg("node %d stopped with status %#x (log %s)", i + 1, status, c.nodes[i].log);
    }
  }
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
      cmocka_unit_test(test_single_node_produce_fetch_list_offsets_round_trip),
      cmocka_unit_test(test_compressed_batches_stored_as_sent),
      cmocka_unit_test(test_long_poll_fetch_wakes_on_produce),
      cmocka_unit_test(test_pipelined_requests_each_answered),
      cmocka_unit_test(test_leader_sigkill_loses_no_acknowledged_produce),
      cmocka_unit_test(test_produce_timeout_keeps_batches_until_the_replica_answers),
  };
  const char *filter = getenv("CAIRN_TEST_FILTER");
  if (filter != NULL) {
    cmocka_set_test_filter(filter);
  }
  return cmocka_run_group_tests(tests, NULL, NULL);
}
