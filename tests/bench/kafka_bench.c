/* kafka_bench.c - cairn-kafka-bench: produce and read-back load through
 * Cairn's Kafka port with librdkafka, the Kafka-protocol side of
 * bench/compare's "kafka" stage (cairn-bench is the native side).
 *
 *   cairn-kafka-bench --bootstrap HOST:PORT[,...] --topic T [options]
 *
 * Produce (--producers N > 0): N threads, each its own librdkafka producer
 * (its own connections), send --count messages in all of --size bytes,
 * keyless (librdkafka's sticky partitioner), with acks=all, linger.ms
 * and batch.size as given (5 ms and 64 KiB
 * by default: the settings, and cairn-bench's defaults). The
 * topic is created through the Kafka port (CreateTopics) if missing.
 * --compression sets librdkafka's compression.codec (none by default).
 * Read back (--producers 0, --consumers M): M threads, each a librdkafka
 * simple consumer of every M-th partition from its start to the high
 * watermark seen at the start, tuned for throughput (kb_consume; the
 * settings and why are in docs/performance.md), or with librdkafka's
 * defaults under --consumer-defaults. Each record is handed to the
 * application (key and value pointers, as cairn-bench's records callback
 * gets them) through rd_kafka_consume_callback_queue.
 *
 * The summary goes to stdout, as text or with --json as one JSON object of
 * the same shape as cairn-bench's ("produce"/"consume" with messages,
 * seconds, msgs_per_s, mb_per_s), so bench/compare_table.py reads both;
 * "consume" also has first_record_s, the slowest consumer's wait from its
 * start to its first record (librdkafka's own start-up inside seconds).
 * Exit status 0 when every message was delivered (or read), 1 otherwise,
 * 2 on usage. */
#include <librdkafka/rdkafka.h>

#include <getopt.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define KB_MAX_WORKERS 64
#define KB_MAX_EXTRA 32 /* -X settings */
#define KB_MAX_PARTS_PER_CONSUMER 1024
#define KB_TIMEOUT_MS 120000  /* the longest a flush or a read-back may take */
#define KB_READ_IDLE_MS 10000 /* consumers give up after this long without records */
#define KB_POLL_EVERY 64      /* produce calls between two polls for delivery reports */

struct kb_opts {
  const char *bootstrap;
  const char *topic;
  int partitions;
  int rf;
  int producers;
  int consumers;
  size_t size;
  int batch_bytes;
  int linger_ms;
  uint64_t count;
  const char *compression;    /* librdkafka's compression.codec */
  const char *extra[KB_MAX_EXTRA]; /* -X key=value, applied last to every handle */
  int nextra;
  bool consumer_defaults;     /* read back with librdkafka's defaults, untuned */
  bool json;
  bool quiet;
};

struct kb_worker {
  const struct kb_opts *o;
  int index;
  uint64_t count; /* messages this producer sends */
  atomic_uint_least64_t acked;
  atomic_uint_least64_t failed;
  uint64_t consumed;
  uint64_t consumed_bytes;
  uint64_t expected;
  int64_t t_start_ns;
  int64_t t_end_ns;   /* last delivery report or last record */
  int64_t t_first_ns; /* first record read, 0 none */
  char error[600];
};

static int64_t kb_now_ns(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int kb_set(rd_kafka_conf_t *conf, const char *key, const char *value, char *err,
                  size_t errlen)
{
  return rd_kafka_conf_set(conf, key, value, err, errlen) == RD_KAFKA_CONF_OK ? 0 : -1;
}

/* A configuration for the bootstrap servers plus pairs of (key, value),
 * NULL-terminated; NULL with err filled on a bad setting. Returns owned
 * (rd_kafka_new takes it on success; rd_kafka_conf_destroy otherwise). */
static rd_kafka_conf_t *kb_conf(const struct kb_opts *o, char *err, size_t errlen,
                                const char *const *kv)
{
  rd_kafka_conf_t *conf = rd_kafka_conf_new();
  if (kb_set(conf, "bootstrap.servers", o->bootstrap, err, errlen) != 0 ||
      kb_set(conf, "log_level", "3", err, errlen) != 0) {
    rd_kafka_conf_destroy(conf);
    return NULL;
  }
  for (; kv[0] != NULL; kv += 2) {
    if (kb_set(conf, kv[0], kv[1], err, errlen) != 0) {
      rd_kafka_conf_destroy(conf);
      return NULL;
    }
  }
  for (int i = 0; i < o->nextra; i++) {
    char key[256];
    const char *eq = strchr(o->extra[i], '=');
    size_t kl = eq != NULL ? (size_t)(eq - o->extra[i]) : 0;
    if (kl == 0 || kl >= sizeof key) {
      snprintf(err, errlen, "-X %s: not key=value", o->extra[i]);
      rd_kafka_conf_destroy(conf);
      return NULL;
    }
    memcpy(key, o->extra[i], kl);
    key[kl] = '\0';
    if (kb_set(conf, key, eq + 1, err, errlen) != 0) {
      rd_kafka_conf_destroy(conf);
      return NULL;
    }
  }
  return conf;
}

static void kb_on_delivery(rd_kafka_t *rk, const rd_kafka_message_t *m, void *opaque)
{
  (void)rk;
  struct kb_worker *w = opaque;
  if (m->err != RD_KAFKA_RESP_ERR_NO_ERROR) {
    if (atomic_fetch_add(&w->failed, 1) == 0) {
      snprintf(w->error, sizeof w->error, "delivery: %s", rd_kafka_err2str(m->err));
    }
  } else {
    atomic_fetch_add(&w->acked, 1);
  }
}

/* Serves the delivery reports queued (kb_on_delivery) and, when there
 * were any, dates the last one: one clock read per poll, not per message. */
static void kb_poll(rd_kafka_t *rk, struct kb_worker *w, int timeout_ms)
{
  if (rd_kafka_poll(rk, timeout_ms) > 0) {
    w->t_end_ns = kb_now_ns();
  }
}

static void *kb_produce(void *arg)
{
  struct kb_worker *w = arg;
  const struct kb_opts *o = w->o;
  char linger[16], batch[16], err[512];
  snprintf(linger, sizeof linger, "%d", o->linger_ms);
  snprintf(batch, sizeof batch, "%d", o->batch_bytes);
  /* Not idempotent (librdkafka's default): librdkafka 2.0.2's idempotent
   * producer keeps one ProduceRequest in flight per partition, against
   * Kafka too (it counts messages in flight against its limit of 5
   * requests), where the plain one pipelines; docs/kafka.md. */
  const char *kv[] = {"acks",
                      "all",
                      "linger.ms",
                      linger,
                      "batch.size",
                      batch,
                      "queue.buffering.max.kbytes",
                      "262144",
                      "compression.codec",
                      o->compression,
                      NULL};
  rd_kafka_conf_t *conf = kb_conf(o, err, sizeof err, kv);
  if (conf == NULL) {
    snprintf(w->error, sizeof w->error, "%s", err);
    return NULL;
  }
  rd_kafka_conf_set_dr_msg_cb(conf, kb_on_delivery);
  rd_kafka_conf_set_opaque(conf, w);
  rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, err, sizeof err);
  if (rk == NULL) {
    rd_kafka_conf_destroy(conf);
    snprintf(w->error, sizeof w->error, "rd_kafka_new: %s", err);
    return NULL;
  }
  char *value = calloc(1, o->size > 0 ? o->size : 1);
  memset(value, 'x', o->size);
  w->t_start_ns = kb_now_ns();
  for (uint64_t i = 0; i < w->count; i++) {
    rd_kafka_resp_err_t e;
    while ((e = rd_kafka_producev(rk, RD_KAFKA_V_TOPIC(o->topic), RD_KAFKA_V_VALUE(value, o->size),
                                  RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY), RD_KAFKA_V_END)) ==
           RD_KAFKA_RESP_ERR__QUEUE_FULL) {
      kb_poll(rk, w, 1); /* the local queue is full: let deliveries drain it */
    }
    if (e != RD_KAFKA_RESP_ERR_NO_ERROR) {
      snprintf(w->error, sizeof w->error, "produce: %s", rd_kafka_err2str(e));
      atomic_fetch_add(&w->failed, w->count - i);
      break;
    }
    if (i % KB_POLL_EVERY == 0) {
      kb_poll(rk, w, 0);
    }
  }
  if (rd_kafka_flush(rk, KB_TIMEOUT_MS) != RD_KAFKA_RESP_ERR_NO_ERROR) {
    snprintf(w->error, sizeof w->error, "flush timed out with %d messages left",
             rd_kafka_outq_len(rk));
  }
  w->t_end_ns = kb_now_ns(); /* flush returns on the last delivery report */
  rd_kafka_destroy(rk);
  free(value);
  return NULL;
}

/* What the application does with each record (a message with key and
 * value pointers): counts it and its value's bytes, as cairn-bench's
 * records callback does with each cairn_record libcairn hands it. */
static void kb_on_message(rd_kafka_message_t *m, void *opaque)
{
  struct kb_worker *w = opaque;
  if (m->err == RD_KAFKA_RESP_ERR_NO_ERROR) {
    w->consumed++;
    w->consumed_bytes += m->len;
  } else if (m->err != RD_KAFKA_RESP_ERR__PARTITION_EOF && w->error[0] == '\0') {
    snprintf(w->error, sizeof w->error, "consume: %s", rd_kafka_message_errstr(m));
  }
}

/* The read-back consumer's settings: a throughput-tuned simple consumer
 * (each setting's reason is in docs/performance.md, "Kafka read-back:
 * the consumer's settings"), or only partition EOF under
 * --consumer-defaults. */
static const char *const kb_consumer_tuned[] = {
    "enable.partition.eof",       "true",     /* the bench stops at the end */
    "fetch.message.max.bytes",    "1048576",  /* 1 MiB per partition: measured best */
    "fetch.max.bytes",            "52428800", /* 50 MiB per Fetch (the default, stated) */
    "queued.min.messages",        "1000000",  /* keep fetching ahead... */
    "queued.max.messages.kbytes", "262144",   /* ...up to 256 MiB queued per partition */
    "fetch.wait.max.ms",          "100",      /* as cairn-bench's consumer */
    "fetch.min.bytes",            "1",        /* answer as soon as there is data */
    "enable.auto.commit",         "false",    /* no group, nothing to commit */
    "enable.auto.offset.store",   "false",    /* no per-message offset store */
    NULL};
static const char *const kb_consumer_defaults[] = {"enable.partition.eof", "true", NULL};

/* librdkafka's simple consumer (no group: a group id would make the
 * assignment wait for a coordinator), every partition into one queue. */
static void *kb_consume(void *arg)
{
  struct kb_worker *w = arg;
  const struct kb_opts *o = w->o;
  char err[512];
  const char *const *kv = o->consumer_defaults ? kb_consumer_defaults : kb_consumer_tuned;
  rd_kafka_conf_t *conf = kb_conf(o, err, sizeof err, kv);
  if (conf == NULL) {
    snprintf(w->error, sizeof w->error, "%s", err);
    return NULL;
  }
  rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_CONSUMER, conf, err, sizeof err);
  if (rk == NULL) {
    rd_kafka_conf_destroy(conf);
    snprintf(w->error, sizeof w->error, "rd_kafka_new: %s", err);
    return NULL;
  }
  rd_kafka_topic_t *rkt = rd_kafka_topic_new(rk, o->topic, NULL);
  rd_kafka_queue_t *q = rd_kafka_queue_new(rk);
  int started[KB_MAX_PARTS_PER_CONSUMER], nstarted = 0;
  for (int p = w->index; p < o->partitions && w->error[0] == '\0'; p += o->consumers) {
    int64_t lo = 0, hi = 0;
    rd_kafka_resp_err_t e = rd_kafka_query_watermark_offsets(rk, o->topic, p, &lo, &hi, 10000);
    if (e != RD_KAFKA_RESP_ERR_NO_ERROR) {
      snprintf(w->error, sizeof w->error, "watermarks of %d: %s", p, rd_kafka_err2str(e));
    } else if (hi > lo && nstarted == KB_MAX_PARTS_PER_CONSUMER) {
      snprintf(w->error, sizeof w->error, "more than %d partitions for one consumer",
               KB_MAX_PARTS_PER_CONSUMER);
    } else if (hi > lo) {
      w->expected += (uint64_t)(hi - lo);
      if (rd_kafka_consume_start_queue(rkt, p, lo, q) != 0) {
        snprintf(w->error, sizeof w->error, "consume_start %d: %s", p,
                 rd_kafka_err2str(rd_kafka_last_error()));
      } else {
        started[nstarted++] = p;
      }
    }
  }
  w->t_start_ns = kb_now_ns();
  /* One call serves every record queued (up to the timeout), each handed
   * to kb_on_message; librdkafka destroys them after the callback. */
  while (w->error[0] == '\0' && w->consumed < w->expected &&
         kb_now_ns() - (w->t_end_ns != 0 ? w->t_end_ns : w->t_start_ns) <
             (int64_t)KB_READ_IDLE_MS * 1000000) {
    uint64_t before = w->consumed;
    if (rd_kafka_consume_callback_queue(q, 100, kb_on_message, w) < 0) {
      snprintf(w->error, sizeof w->error, "consume: %s", rd_kafka_err2str(rd_kafka_last_error()));
    }
    if (w->consumed > before) { /* timed per call, as cairn-bench per records callback */
      w->t_end_ns = kb_now_ns();
      if (w->t_first_ns == 0) {
        w->t_first_ns = w->t_end_ns;
      }
    }
  }
  for (int i = 0; i < nstarted; i++) {
    rd_kafka_consume_stop(rkt, started[i]);
  }
  rd_kafka_queue_destroy(q);
  rd_kafka_topic_destroy(rkt);
  rd_kafka_destroy(rk);
  return NULL;
}

/* Creates the topic through the Kafka port; an existing one is fine. */
static int kb_create_topic(const struct kb_opts *o)
{
  char err[512];
  const char *kv[] = {NULL};
  rd_kafka_conf_t *conf = kb_conf(o, err, sizeof err, kv);
  if (conf == NULL) {
    fprintf(stderr, "cairn-kafka-bench: %s\n", err);
    return -1;
  }
  rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, err, sizeof err);
  if (rk == NULL) {
    rd_kafka_conf_destroy(conf);
    fprintf(stderr, "cairn-kafka-bench: rd_kafka_new: %s\n", err);
    return -1;
  }
  rd_kafka_NewTopic_t *nt = rd_kafka_NewTopic_new(o->topic, o->partitions, o->rf, err, sizeof err);
  rd_kafka_queue_t *q = rd_kafka_queue_new(rk);
  rd_kafka_CreateTopics(rk, &nt, 1, NULL, q);
  rd_kafka_event_t *ev = rd_kafka_queue_poll(q, 60000);
  int rv = -1;
  if (ev == NULL) {
    fprintf(stderr, "cairn-kafka-bench: CreateTopics: no answer\n");
  } else if (rd_kafka_event_error(ev) != RD_KAFKA_RESP_ERR_NO_ERROR) {
    fprintf(stderr, "cairn-kafka-bench: CreateTopics: %s\n", rd_kafka_event_error_string(ev));
  } else {
    size_t n = 0;
    const rd_kafka_topic_result_t **res =
        rd_kafka_CreateTopics_result_topics(rd_kafka_event_CreateTopics_result(ev), &n);
    rd_kafka_resp_err_t e =
        n == 1 ? rd_kafka_topic_result_error(res[0]) : RD_KAFKA_RESP_ERR_UNKNOWN;
    rv = e == RD_KAFKA_RESP_ERR_NO_ERROR || e == RD_KAFKA_RESP_ERR_TOPIC_ALREADY_EXISTS ? 0 : -1;
    if (rv != 0) {
      fprintf(stderr, "cairn-kafka-bench: CreateTopics %s: %s\n", o->topic, rd_kafka_err2str(e));
    }
  }
  if (ev != NULL) {
    rd_kafka_event_destroy(ev);
  }
  rd_kafka_queue_destroy(q);
  rd_kafka_NewTopic_destroy(nt);
  rd_kafka_destroy(rk);
  return rv;
}

static void kb_usage(void)
{
  fprintf(stderr, "usage: cairn-kafka-bench --bootstrap HOST:PORT[,...] --topic T [options]\n"
                  "  --partitions N      partitions when creating the topic (3)\n"
                  "  --rf N              its replication factor (3)\n"
                  "  --producers N       producer threads (1); 0 reads back\n"
                  "  --consumers N       read-back threads (when --producers 0) (1)\n"
                  "  --size B            message size (100)\n"
                  "  --count N           messages in all (100000)\n"
                  "  --batch-bytes B     batch.size (65536)\n"
                  "  --linger-ms MS      linger.ms (5)\n"
                  "  --compression C     compression.codec: none, gzip, snappy, lz4, zstd (none)\n"
                  "  --consumer-defaults read back with librdkafka's consumer defaults\n"
                  "  -X key=value        a librdkafka setting, applied last (repeatable)\n"
                  "  --json              the summary as one JSON object\n"
                  "  --quiet             accepted for cairn-bench's command lines\n");
}

static int kb_parse(int argc, char **argv, struct kb_opts *o)
{
  *o = (struct kb_opts){.partitions = 3,
                        .rf = 3,
                        .producers = 1,
                        .consumers = 1,
                        .size = 100,
                        .batch_bytes = 65536,
                        .linger_ms = 5,
                        .count = 100000,
                        .compression = "none"};
  enum {
    O_BOOT = 1,
    O_TOPIC,
    O_PARTS,
    O_RF,
    O_PROD,
    O_CONS,
    O_SIZE,
    O_COUNT,
    O_BATCH,
    O_LINGER,
    O_JSON,
    O_QUIET,
    O_CODEC,
    O_CDEF
  };
  static const struct option opts[] = {{"bootstrap", 1, 0, O_BOOT},
                                       {"topic", 1, 0, O_TOPIC},
                                       {"partitions", 1, 0, O_PARTS},
                                       {"rf", 1, 0, O_RF},
                                       {"producers", 1, 0, O_PROD},
                                       {"consumers", 1, 0, O_CONS},
                                       {"size", 1, 0, O_SIZE},
                                       {"count", 1, 0, O_COUNT},
                                       {"batch-bytes", 1, 0, O_BATCH},
                                       {"linger-ms", 1, 0, O_LINGER},
                                       {"json", 0, 0, O_JSON},
                                       {"quiet", 0, 0, O_QUIET},
                                       {"compression", 1, 0, O_CODEC},
                                       {"consumer-defaults", 0, 0, O_CDEF},
                                       {0, 0, 0, 0}};
  int c;
  while ((c = getopt_long(argc, argv, "X:", opts, NULL)) != -1) {
    switch (c) {
    case 'X':
      if (o->nextra == KB_MAX_EXTRA) {
        return -1;
      }
      o->extra[o->nextra++] = optarg;
      break;
    case O_BOOT:
      o->bootstrap = optarg;
      break;
    case O_TOPIC:
      o->topic = optarg;
      break;
    case O_PARTS:
      o->partitions = atoi(optarg);
      break;
    case O_RF:
      o->rf = atoi(optarg);
      break;
    case O_PROD:
      o->producers = atoi(optarg);
      break;
    case O_CONS:
      o->consumers = atoi(optarg);
      break;
    case O_SIZE:
      o->size = strtoull(optarg, NULL, 10);
      break;
    case O_COUNT:
      o->count = strtoull(optarg, NULL, 10);
      break;
    case O_BATCH:
      o->batch_bytes = atoi(optarg);
      break;
    case O_LINGER:
      o->linger_ms = atoi(optarg);
      break;
    case O_JSON:
      o->json = true;
      break;
    case O_QUIET:
      o->quiet = true;
      break;
    case O_CODEC:
      o->compression = optarg;
      break;
    case O_CDEF:
      o->consumer_defaults = true;
      break;
    default:
      return -1;
    }
  }
  if (o->bootstrap == NULL || o->topic == NULL || o->partitions < 1 || o->rf < 1 ||
      o->producers < 0 || o->producers > KB_MAX_WORKERS || o->consumers < 1 ||
      o->consumers > KB_MAX_WORKERS || o->size > (1u << 20) || o->batch_bytes < 1 ||
      o->linger_ms < 0) {
    return -1;
  }
  return 0;
}

int main(int argc, char **argv)
{
  struct kb_opts o;
  if (kb_parse(argc, argv, &o) != 0) {
    kb_usage();
    return 2;
  }
  bool produce = o.producers > 0;
  if (produce && kb_create_topic(&o) != 0) {
    return 1;
  }
  int n = produce ? o.producers : o.consumers;
  struct kb_worker *ws = calloc((size_t)n, sizeof *ws);
  pthread_t *ts = calloc((size_t)n, sizeof *ts);
  if (ws == NULL || ts == NULL) {
    fprintf(stderr, "cairn-kafka-bench: out of memory\n");
    return 1;
  }
  for (int i = 0; i < n; i++) {
    ws[i].o = &o;
    ws[i].index = i;
    ws[i].count = o.count / (uint64_t)n + ((uint64_t)i < o.count % (uint64_t)n);
    if (pthread_create(&ts[i], NULL, produce ? kb_produce : kb_consume, &ws[i]) != 0) {
      fprintf(stderr, "cairn-kafka-bench: pthread_create failed\n");
      return 1;
    }
  }
  uint64_t acked = 0, failed = 0, consumed = 0, cbytes = 0, expected = 0;
  int64_t start = INT64_MAX, end = 0, first_wait = 0;
  int errors = 0;
  for (int i = 0; i < n; i++) {
    pthread_join(ts[i], NULL);
    struct kb_worker *w = &ws[i];
    acked += atomic_load(&w->acked);
    failed += atomic_load(&w->failed);
    consumed += w->consumed;
    cbytes += w->consumed_bytes;
    expected += w->expected;
    if (w->t_start_ns != 0 && w->t_start_ns < start) {
      start = w->t_start_ns;
    }
    if (w->t_end_ns > end) {
      end = w->t_end_ns;
    }
    if (w->t_first_ns != 0 && w->t_first_ns - w->t_start_ns > first_wait) {
      first_wait = w->t_first_ns - w->t_start_ns; /* the slowest consumer's start */
    }
    if (w->error[0] != '\0') {
      fprintf(stderr, "cairn-kafka-bench: worker %d: %s\n", i, w->error);
      errors++;
    }
  }
  double secs = end > start ? (double)(end - start) / 1e9 : 0;
  double p_mps = produce && secs > 0 ? (double)acked / secs : 0;
  double c_mps = !produce && secs > 0 ? (double)consumed / secs : 0;
  double c_mbs = !produce && secs > 0 ? (double)cbytes / secs / 1e6 : 0;
  bool ok = errors == 0 && failed == 0 && (produce ? acked == o.count : consumed >= expected);
  if (o.json) {
    printf("{\"topic\":\"%s\",\"partitions\":%d,\"rf\":%d,\"producers\":%d,\"consumers\":%d,"
           "\"size\":%zu,\"batch_bytes\":%d,\"linger_ms\":%d,\"acks\":\"all\","
           "\"compression\":\"%s\",\"consumer\":\"%s\",",
           o.topic, o.partitions, o.rf, o.producers, produce ? 0 : o.consumers, o.size,
           o.batch_bytes, o.linger_ms, o.compression, o.consumer_defaults ? "defaults" : "tuned");
    printf("\"produce\":{\"messages\":%" PRIu64 ",\"failed\":%" PRIu64 ",\"seconds\":%.3f,"
           "\"msgs_per_s\":%.0f,\"mb_per_s\":%.2f},",
           acked, failed, produce ? secs : 0, p_mps, p_mps * (double)o.size / 1e6);
    printf("\"consume\":{\"messages\":%" PRIu64 ",\"expected\":%" PRIu64 ",\"bytes\":%" PRIu64
           ",\"seconds\":%.3f,\"msgs_per_s\":%.0f,\"mb_per_s\":%.2f,\"first_record_s\":%.3f},",
           consumed, expected, cbytes, produce ? 0 : secs, c_mps, c_mbs, (double)first_wait / 1e9);
    printf("\"ok\":%s}\n", ok ? "true" : "false");
  } else if (produce) {
    printf("cairn-kafka-bench: produced %" PRIu64 " of %" PRIu64 " %zu-byte messages (%" PRIu64
           " failed) in %.2f s: %.0f msg/s, %.2f MB/s\n%s\n",
           acked, o.count, o.size, failed, secs, p_mps, p_mps * (double)o.size / 1e6,
           ok ? "ok" : "FAILED");
  } else {
    printf("cairn-kafka-bench: read %" PRIu64 " of %" PRIu64 " messages in %.2f s: %.0f msg/s, "
           "%.2f MB/s\n%s\n",
           consumed, expected, secs, c_mps, c_mbs, ok ? "ok" : "FAILED");
  }
  free(ws);
  free(ts);
  return ok ? 0 : 1;
}
