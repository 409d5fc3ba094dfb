/* workload.c - cairn-fault-workload, the fault rig's client and checker.
 *
 * While the nemesis (tests/fault/nemesis.sh) injects faults, producer
 * threads write unique, checksummed values to the partitions of one topic
 * (value "p<producer> s<seq> q<partition> c<crc32c of the rest>", one
 * record per batch, one request in flight per producer) and consumer
 * threads read every partition from its leader. When the run is over and
 * the cluster is healed (--ready-file appears), a sentinel value is
 * produced to each partition (so its leader has committed in its own term)
 * and every partition is read back from its leader in full. With --kafka,
 * a librdkafka idempotent producer writes the same kind of values through
 * the nodes' Kafka ports and a librdkafka group consumer reads and commits
 * through them ("Kafka producers", "a Kafka group consumer" below); their
 * values and reads go through the same checks. Then it checks:
 *
 *  - every acknowledged value is in the final log, at its acknowledged offset;
 *  - no value appears twice (a value is never sent again once it may have
 *    been written, so a duplicate is the broker's doing);
 *  - no value refused with a definite error (NOT_LEADER, ...) appears;
 *  - a producer's acknowledged values of a partition appear in sequence order;
 *  - offsets run contiguous from the log start, every value's checksum holds;
 *  - every consumer read, at every offset, what the final log holds there;
 *  - the Kafka group's committed offsets never fall below a commit the
 *    coordinator acknowledged;
 *  - each partition's log start is where the nemesis's DeleteRecords put it
 *    (lines "delete pQ: OUTCOME target T ..." in --faults): at least the
 *    highest acknowledged target, at most the highest that may have been
 *    applied, 0 with no delete (with --retention-bytes, retention may have
 *    moved it anywhere above that floor). Acknowledged values and
 *    consumers' reads below the final log start are not compared (they
 *    were deleted).
 *
 * It prints a summary and writes OUT/history.json (every produce operation,
 * the faults of --faults, the availability gaps, the violations) and
 * OUT/final-p<P>.txt ("offset value" lines) for the replica comparison.
 * Exit status: 0 no violation, 1 violations, 2 usage or setup failure. */
#include "fault_client.h"

#include "common/jsonw.h"
#include "format/batch.h"
#include "format/batch_builder.h"
#include "format/crc32c.h"

#include <errno.h>
#include <getopt.h>
#include <librdkafka/rdkafka.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define WL_MAX_PARTS 64
#define WL_MAX_THREADS 32
#define WL_VALUE_LEN 48
#define WL_OP_DEADLINE_MS 10000 /* a produce retried on definite refusals this long */
#define WL_FETCH_BYTES (256 * 1024)
#define WL_GAP_MS 2000 /* a pause of acknowledgements this long is reported */
#define WL_ANSWER_MS 8000 /* a produce that may not be sent again waits this long */
/* An idempotent producer's produce unanswered this long is sent again, to
 * the leader Metadata names then (the same batch: the partition answers a
 * copy it holds with its offset), as libcairn's producer leaves a paused or
 * cut-off leader behind (LC_PROD_PROBE_MS). */
#define WL_IDEM_PROBE_MS 500
/* For WL_IDEM_SILENT_MS after a node left a produce unanswered (or until
 * it answers), a produce to a partition it led asks Metadata first, and
 * one sent to it anyway (Metadata still names it: no election yet, or it
 * was only slow) gets WL_IDEM_REPROBE_MS to answer before Metadata is
 * asked again, as libcairn probes a request to a silent node after
 * LC_PROD_REPROBE_MS (silent_node, producer.h). A paused leader's
 * followers time out 1-1.5 s after its last heartbeat. */
#define WL_IDEM_REPROBE_MS 100
#define WL_IDEM_SILENT_MS 1500
#define WL_TARGET_MS 2000 /* issue 20: writes acknowledged again within 2 s */
#define WL_MAX_VIOLATIONS_SHOWN 30

struct wl_op {
  int64_t seq;
  uint32_t partition;
  long long start, end; /* ms since the run started */
  enum fc_outcome out;
  int code;
  int64_t offset;
};

struct wl_producer {
  int id;
  pthread_t th;
  uint64_t rng;
  struct wl_op *ops;
  size_t n, cap;
  int leader[WL_MAX_PARTS];
  /* the node that last left a produce unanswered (-1: none) and when:
   * until it answers again, this producer's next produces to any
   * partition it led ask Metadata first (libcairn probes what it sends to
   * such a node after 100 ms instead of 500: silent_node, producer.h) */
  int silent;
  long long silent_at;
  int pinned; /* the one partition it writes, or -1: a random one per op */
  /* idempotent mode: the producer id and epoch, the next sequence per
   * partition, and whether the partitions' answers broke the sequence */
  int64_t pid;
  int16_t epoch;
  int32_t next_seq[WL_MAX_PARTS];
  bool broken;
  /* A Kafka producer (librdkafka's idempotent producer on the nodes'
   * Kafka ports; wl_kafka_main): the ops it has not heard back about, and
   * what librdkafka reported. */
  bool kafka;
  int outstanding;
  int kafka_errors;      /* error callbacks (transport and the like) */
  char kafka_fatal[300]; /* librdkafka's fatal error, "" if none */
  /* filled by the check: where each seq was found (-1: absent) */
  int64_t *found;
  /* Kafka producers: the later copy of a value stored twice across an
   * epoch bump (-1: none), and how many were (wl_check_kafka_copy). */
  int64_t *copy;
  long restamped;
};

struct wl_obs {
  uint32_t partition;
  int64_t offset;
  char value[WL_VALUE_LEN];
};

struct wl_consumer {
  int id;
  pthread_t th;
  uint64_t rng;
  struct wl_obs *obs;
  size_t n, cap;
  int64_t next[WL_MAX_PARTS];
  int leader[WL_MAX_PARTS];
  uint64_t fetches, errors;
  uint64_t skipped;  /* offsets jumped over: below a log start a delete moved */
  char problem[400]; /* the first thing it saw that was wrong, "" if none */
  /* A Kafka group consumer (wl_kafka_group_main): the highest offset the
   * coordinator acknowledged committing per partition (-1: none), and the
   * group's assignments and commits. */
  bool kafka;
  int64_t acked_commit[WL_MAX_PARTS];
  long commits_ok, commits_failed, assignments;
};

struct wl_log {
  char (*v)[WL_VALUE_LEN]; /* v[j]: the value at offset start + j */
  int64_t *pid;            /* pid[j], epoch[j]: its batch's producer id and epoch */
  int16_t *epoch;
  size_t n, cap;
  int64_t start, hw;
};

/* The nemesis's DeleteRecords of one partition, from --faults. */
struct wl_deletes {
  int64_t floor;   /* the highest acknowledged target: the log start is at least this */
  int64_t ceiling; /* the highest target acknowledged or in doubt: at most this */
  int acked, indeterminate, failed;
};

/* Where each partition's replicas were (a bit per node id) from ms t on,
 * as Metadata answered then: churn moves replicas during a run. */
struct wl_placement_sample {
  long long t;
  uint64_t replicas[WL_MAX_PARTS];
};

static struct {
  struct fc_nodes ns;
  const char *topic;
  uint32_t parts;
  uint32_t rf;
  int nproducers, nconsumers;
  int nrandom; /* producers 0..nrandom-1 pick a partition per op; the rest are pinned */
  int nkafka;  /* the last nkafka producers are Kafka producers (wl_kafka_main) */
  int nkafka_groups;           /* the last consumer is a Kafka group consumer when 1 */
  const char *kafka_bootstrap; /* the nodes' Kafka ports, HOST:PORT,... */
  int kafka_timeout_ms;        /* the Kafka producers' message.timeout.ms */
  int64_t claimed_commit;      /* --claim-commit: a commit of partition 0 never made (-1: none) */
  int seconds;
  double rate;
  int64_t retention_bytes; /* the topic's (0: unlimited); its segments a quarter of it */
  uint64_t seed;
  const char *idem_mode; /* "auto", "on", "off" */
  bool idem;
  const char *ready_file;
  const char *faults_file;
  const char *out_dir;
  long long t0;
  atomic_bool stop;
  struct wl_producer prod[WL_MAX_THREADS];
  struct wl_consumer cons[WL_MAX_THREADS];
  struct wl_log log[WL_MAX_PARTS];
  struct wl_deletes deletes[WL_MAX_PARTS];
  long acked_deleted; /* acknowledged values below their partition's final log start */
  long reads_deleted; /* consumers' reads below it */
  FILE *viol; /* violations, one JSON string per line (temp file) */
  long nviol;
  struct wl_placement_sample *placements; /* main thread only, in time order */
  size_t nplacements, placements_cap;
} wl;

static uint64_t wl_rand(uint64_t *s)
{
  /* splitmix64 */
  uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

static long long wl_now(void)
{
  return fc_now_ms() - wl.t0;
}

static void wl_sleep_ms(long ms)
{
  struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

__attribute__((format(printf, 1, 2))) static void wl_violation(const char *fmt, ...)
{
  char buf[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  if (wl.nviol < WL_MAX_VIOLATIONS_SHOWN) {
    fprintf(stderr, "VIOLATION: %s\n", buf);
  }
  wl.nviol++;
  fprintf(wl.viol, "%s\n", buf);
}

/* "p<id> s<seq> q<part>" and its checksum. */
static void wl_value(char *out, size_t len, int producer, int64_t seq, uint32_t partition)
{
  char body[WL_VALUE_LEN];
  int n = snprintf(body, sizeof body, "p%d s%" PRId64 " q%" PRIu32, producer, seq, partition);
  if (n < 0 || (size_t)n >= sizeof body - 10) {
    n = (int)sizeof body - 11; /* not reached with ids and sequences in range */
    body[n] = '\0';
  }
  unsigned crc = crc32c(body, (size_t)n);
  int m = snprintf(out, len, "%.37s c%08x", body, crc);
  (void)m;
}

/* Parses and checks a value; returns 1 with the fields, 0 for a sentinel,
 * -1 for a value whose checksum or shape is wrong. */
static int wl_parse(const char *v, int *producer, int64_t *seq, uint32_t *partition)
{
  if (strncmp(v, "sentinel", 8) == 0) {
    return 0;
  }
  unsigned crc;
  if (sscanf(v, "p%d s%" SCNd64 " q%" SCNu32 " c%x", producer, seq, partition, &crc) != 4) {
    return -1;
  }
  char want[WL_VALUE_LEN];
  wl_value(want, sizeof want, *producer, *seq, *partition);
  return strcmp(want, v) == 0 ? 1 : -1;
}

/* One batch of one record holding value, stamped with p's producer id,
 * epoch and next sequence for partition q when p is idempotent (p may be
 * NULL); returns it (owned, free()) or NULL. */
static uint8_t *wl_batch(const char *value, size_t *len, const struct wl_producer *p, uint32_t q)
{
  struct batch_builder b;
  if (batch_builder_init(&b, 4096) != 0) {
    return NULL;
  }
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  int64_t now = (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
  if (p != NULL && wl.idem) {
    batch_builder_set_producer(&b, p->pid, p->epoch, p->next_seq[q]);
  }
  uint8_t *out = NULL;
  if (batch_builder_add(&b, now, NULL, 0, value, strlen(value), NULL, 0) != 0 ||
      batch_builder_finish(&b, &out, len) != 0) {
    out = NULL;
  }
  batch_builder_close(&b);
  return out;
}

static int wl_push_op(struct wl_producer *p, const struct wl_op *op)
{
  if (p->n == p->cap) {
    size_t cap = p->cap ? p->cap * 2 : 1024;
    struct wl_op *ops = realloc(p->ops, cap * sizeof *ops);
    if (ops == NULL) {
      return -1;
    }
    p->ops = ops;
    p->cap = cap;
  }
  p->ops[p->n++] = *op;
  return 0;
}

/* Produces value to partition until acknowledged, answered in doubt, or
 * refused for WL_OP_DEADLINE_MS (definite refusals are retried: nothing was
 * written). Never sends a value again once it may have been written. */
static void wl_produce(struct wl_producer *p, struct wl_op *op, const uint8_t *batch, size_t len)
{
  long long deadline = fc_now_ms() + WL_OP_DEADLINE_MS;
  int hint = -1;
  op->out = FC_FAIL;
  op->code = -1;
  while (fc_now_ms() < deadline) {
    int i = hint >= 0 ? hint : p->leader[op->partition];
    if (i < 0) {
      i = fc_find_leader(&wl.ns, (int)(wl_rand(&p->rng) % (uint64_t)wl.ns.n), wl.topic,
                         op->partition);
    }
    if (i < 0) {
      wl_sleep_ms(100);
      continue;
    }
    op->out = fc_produce_once(&wl.ns, i, wl.topic, op->partition, batch, len, WL_ANSWER_MS,
                              &op->code, &op->offset, &hint);
    if (op->out != FC_FAIL) {
      p->leader[op->partition] = op->out == FC_ACK ? i : -1;
      return;
    }
    p->leader[op->partition] = -1;
    wl_sleep_ms(50 + (long)(wl_rand(&p->rng) % 100));
  }
}

/* The idempotent producer's produce: every unacknowledged batch is sent
 * again, unchanged, until it is acknowledged (the partition answers a
 * resend of its last batch with the original offset), the run is over
 * (then retried WL_OP_DEADLINE_MS more), or the partition refuses the
 * sequence, which with one batch in flight it never should. */
static void wl_produce_idem(struct wl_producer *p, struct wl_op *op, const uint8_t *batch,
                            size_t len)
{
  long long stop_deadline = 0;
  bool sent = false;
  int hint = -1;
  op->code = -1;
  for (;;) {
    if (atomic_load(&wl.stop)) {
      if (stop_deadline == 0) {
        stop_deadline = fc_now_ms() + WL_OP_DEADLINE_MS;
      } else if (fc_now_ms() > stop_deadline) {
        break;
      }
    }
    int i = hint >= 0 ? hint : p->leader[op->partition];
    if (i >= 0 && hint < 0 && i == p->silent && fc_now_ms() - p->silent_at < WL_IDEM_SILENT_MS) {
      i = -1; /* it led this partition before it went silent: ask Metadata */
    }
    if (i < 0) {
      /* Not first at the node that just went silent: its Metadata would
       * cost a timeout too. */
      int first = p->silent >= 0 ? (p->silent + 1) % wl.ns.n
                                 : (int)(wl_rand(&p->rng) % (uint64_t)wl.ns.n);
      i = fc_find_leader_avoiding(&wl.ns, first, wl.topic, op->partition,
                                  fc_now_ms() - p->silent_at < WL_IDEM_SILENT_MS ? p->silent : -1);
    }
    if (i < 0) {
      wl_sleep_ms(100);
      continue;
    }
    /* Metadata still names the silent node: its followers have not
     * elected yet, or it was only slow. Sent there, but given only
     * WL_IDEM_REPROBE_MS to answer before Metadata is asked again. */
    bool to_silent = i == p->silent && fc_now_ms() - p->silent_at < WL_IDEM_SILENT_MS;
    enum fc_outcome o =
        fc_produce_once(&wl.ns, i, wl.topic, op->partition, batch, len,
                        to_silent ? WL_IDEM_REPROBE_MS : WL_IDEM_PROBE_MS, &op->code, &op->offset,
                        &hint);
    if (o == FC_INDETERMINATE && op->code < 0) {
      if (!to_silent) {
        p->silent = i;
        p->silent_at = fc_now_ms();
      }
    } else if (i == p->silent) {
      p->silent = -1; /* it answered */
    }
    if (o == FC_ACK) {
      p->leader[op->partition] = i;
      op->out = FC_ACK;
      return;
    }
    p->leader[op->partition] = -1;
    sent = sent || o == FC_INDETERMINATE;
    if (op->code == CAIRN__CLIENT__ERROR_CODE__OUT_OF_ORDER_SEQUENCE ||
        op->code == CAIRN__CLIENT__ERROR_CODE__UNKNOWN_PRODUCER ||
        op->code == CAIRN__CLIENT__ERROR_CODE__PRODUCER_FENCED) {
      wl_violation("producer %d (id %" PRId64 "): partition %" PRIu32 " answered code %d to "
                   "sequence %" PRId32 " with one batch in flight; the producer stops",
                   p->id, p->pid, op->partition, op->code, p->next_seq[op->partition]);
      p->broken = true;
      sent = true;
      break;
    }
    if (!to_silent) {
      wl_sleep_ms(50 + (long)(wl_rand(&p->rng) % 100)); /* the short probe waited already */
    }
  }
  op->out = sent ? FC_INDETERMINATE : FC_FAIL;
}

static void *wl_producer_main(void *arg)
{
  struct wl_producer *p = arg;
  long period_ms = wl.rate > 0 ? (long)(1000.0 / wl.rate) : 0;
  for (int64_t seq = 0; !atomic_load(&wl.stop) && !p->broken; seq++) {
    uint32_t q = (uint32_t)(wl_rand(&p->rng) % wl.parts);
    struct wl_op op = {.seq = seq, .partition = p->pinned >= 0 ? (uint32_t)p->pinned : q};
    char value[WL_VALUE_LEN];
    wl_value(value, sizeof value, p->id, seq, op.partition);
    size_t len;
    uint8_t *batch = wl_batch(value, &len, p, op.partition);
    if (batch == NULL) {
      break;
    }
    op.start = wl_now();
    if (wl.idem) {
      wl_produce_idem(p, &op, batch, len);
      if (op.out == FC_ACK) {
        p->next_seq[op.partition]++;
      }
    } else {
      wl_produce(p, &op, batch, len);
    }
    op.end = wl_now();
    free(batch);
    if (wl_push_op(p, &op) != 0) {
      break;
    }
    long spent = (long)(op.end - op.start);
    if (spent < period_ms) {
      wl_sleep_ms(period_ms - spent);
    }
  }
  return NULL;
}

/* ---- Kafka producers: librdkafka's idempotent producer on the Kafka port ----
 *
 * The same values as the native producers (so the same checks hold: every
 * acknowledged value at its offset, none twice, none refused yet present,
 * a producer's acknowledged values of a partition in order), sent by
 * librdkafka with enable.idempotence=true, many in flight, retried by
 * librdkafka itself through the faults: its retries, its epoch bump after a
 * message times out, and its NOT_LEADER / NOT_COORDINATOR handling are
 * what this exercises. With --idempotent off it is librdkafka's plain
 * producer (Kafka's producer id -1) with no retries, as the native
 * producers are then: every value in one request at most. An op's outcome is the delivery report's:
 * acknowledged with its offset (PERSISTED), refused (NOT_PERSISTED: never
 * written), or in doubt (POSSIBLY_PERSISTED, a timeout). A fatal error of
 * the idempotent producer (a sequence the broker should not have answered
 * so) is a violation. */

#define WL_KAFKA_RATE_X 5         /* a Kafka producer sends this many times a native one's rate */
#define WL_KAFKA_WINDOW 200       /* values awaiting their delivery report, at most */
/* message.timeout.ms by default: a value unacknowledged this long is
 * reported in doubt (or refused if never sent), and librdkafka starts its
 * producer over (epoch bump or new producer id) before sending more. Short
 * enough that the rig's 8-20 s partitions reach it. */
#define WL_KAFKA_TIMEOUT_MS 8000
#define WL_KAFKA_LOG_LINES 40     /* librdkafka log lines shown (warnings and worse) */

static atomic_int wl_kafka_log_lines;

static void wl_kafka_log(const rd_kafka_t *rk, int level, const char *fac, const char *buf)
{
  (void)rk;
  if (level > 4 || atomic_fetch_add(&wl_kafka_log_lines, 1) >= WL_KAFKA_LOG_LINES) {
    return;
  }
  fprintf(stderr, "workload: %lld ms librdkafka %s: %s\n", wl_now(), fac, buf);
}

static void wl_kafka_error(rd_kafka_t *rk, int err, const char *reason, void *opaque)
{
  struct wl_producer *p = opaque;
  p->kafka_errors++;
  if (err != RD_KAFKA_RESP_ERR__FATAL || p->kafka_fatal[0] != '\0') {
    return;
  }
  char why[256];
  rd_kafka_resp_err_t fe = rd_kafka_fatal_error(rk, why, sizeof why);
  snprintf(p->kafka_fatal, sizeof p->kafka_fatal, "%s: %s (%s)", rd_kafka_err2name(fe), why,
           reason);
}

/* A delivery report: the op whose seq is the message's opaque. */
static void wl_kafka_delivered(rd_kafka_t *rk, const rd_kafka_message_t *m, void *opaque)
{
  (void)rk;
  struct wl_producer *p = opaque;
  size_t seq = (size_t)(uintptr_t)m->_private;
  if (seq >= p->n) {
    return;
  }
  struct wl_op *op = &p->ops[seq];
  op->end = wl_now();
  op->code = m->err;
  if (m->err == RD_KAFKA_RESP_ERR_NO_ERROR) {
    op->out = FC_ACK;
    op->offset = m->offset;
  } else {
    op->out = rd_kafka_message_status(m) == RD_KAFKA_MSG_STATUS_NOT_PERSISTED ? FC_FAIL
                                                                              : FC_INDETERMINATE;
  }
  p->outstanding--;
}

static rd_kafka_t *wl_kafka_open(struct wl_producer *p)
{
  char timeout[16], err[512];
  snprintf(timeout, sizeof timeout, "%d", wl.kafka_timeout_ms);
  const char *kv[][2] = {
      {"bootstrap.servers", wl.kafka_bootstrap},
      {"enable.idempotence", wl.idem ? "true" : "false"},
      /* Not idempotent (--idempotent off): no resend, so a value is in at
       * most one request and never stored twice by a retry; a request
       * that fails is in doubt or refused, as the native producers' are. */
      {"message.send.max.retries", wl.idem ? "2147483647" : "0"},
      {"acks", "all"},
      {"linger.ms", "2"},
      {"message.timeout.ms", timeout},
      {"request.timeout.ms", "5000"}, /* a paused leader: sent again after this */
      {"retry.backoff.ms", "100"},
      {"reconnect.backoff.max.ms", "1000"}, /* a restarted node is dialled again soon */
      {"topic.metadata.refresh.interval.ms", "10000"},
      {"log.connection.close", "false"},
  };
  rd_kafka_conf_t *conf = rd_kafka_conf_new();
  for (size_t i = 0; i < sizeof kv / sizeof kv[0]; i++) {
    if (rd_kafka_conf_set(conf, kv[i][0], kv[i][1], err, sizeof err) != RD_KAFKA_CONF_OK) {
      fprintf(stderr, "workload: kafka producer %d: %s\n", p->id, err);
      rd_kafka_conf_destroy(conf);
      return NULL;
    }
  }
  rd_kafka_conf_set_opaque(conf, p);
  rd_kafka_conf_set_dr_msg_cb(conf, wl_kafka_delivered);
  rd_kafka_conf_set_error_cb(conf, wl_kafka_error);
  rd_kafka_conf_set_log_cb(conf, wl_kafka_log);
  rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, err, sizeof err);
  if (rk == NULL) {
    fprintf(stderr, "workload: kafka producer %d: rd_kafka_new: %s\n", p->id, err);
    rd_kafka_conf_destroy(conf);
  }
  return rk;
}

/* Sends the op's value; an op librdkafka refuses at once (never sent) is
 * a refusal. */
static void wl_kafka_send(struct wl_producer *p, rd_kafka_t *rk, struct wl_op *op)
{
  char value[WL_VALUE_LEN];
  wl_value(value, sizeof value, p->id, op->seq, op->partition);
  rd_kafka_resp_err_t e = rd_kafka_producev(
      rk, RD_KAFKA_V_TOPIC(wl.topic), RD_KAFKA_V_PARTITION((int32_t)op->partition),
      RD_KAFKA_V_VALUE(value, strlen(value)), RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
      RD_KAFKA_V_OPAQUE((void *)(uintptr_t)op->seq), RD_KAFKA_V_END);
  if (e == RD_KAFKA_RESP_ERR_NO_ERROR) {
    p->outstanding++;
    return;
  }
  op->out = FC_FAIL;
  op->code = e;
  op->end = wl_now();
}

static void *wl_kafka_main(void *arg)
{
  struct wl_producer *p = arg;
  rd_kafka_t *rk = wl_kafka_open(p);
  if (rk == NULL) {
    wl_violation("kafka producer %d could not start", p->id);
    return NULL;
  }
  double rate = wl.rate > 0 ? wl.rate * WL_KAFKA_RATE_X : 100;
  long long next = wl_now();
  while (!atomic_load(&wl.stop) && p->kafka_fatal[0] == '\0') {
    long long now = wl_now();
    if (now < next || p->outstanding >= WL_KAFKA_WINDOW) {
      rd_kafka_poll(rk, now < next ? (int)(next - now) : 10);
      continue;
    }
    next += (long long)(1000.0 / rate);
    next = next < now - 1000 ? now : next; /* no burst to catch up after a full window */
    struct wl_op op = {.seq = (int64_t)p->n,
                       .partition = (uint32_t)(wl_rand(&p->rng) % wl.parts),
                       .start = now,
                       .out = FC_INDETERMINATE,
                       .code = -1};
    if (wl_push_op(p, &op) != 0) {
      break;
    }
    wl_kafka_send(p, rk, &p->ops[p->n - 1]);
    rd_kafka_poll(rk, 0);
  }
  /* What is still unanswered gets WL_OP_DEADLINE_MS, as the native
   * producers' last op; then librdkafka's reports of the purge (in doubt
   * for what was in flight). What never gets a report stays in doubt. */
  rd_kafka_flush(rk, WL_OP_DEADLINE_MS);
  rd_kafka_purge(rk, RD_KAFKA_PURGE_F_QUEUE | RD_KAFKA_PURGE_F_INFLIGHT);
  for (int i = 0; i < 50 && p->outstanding > 0; i++) {
    rd_kafka_poll(rk, 100);
  }
  long long end = wl_now();
  for (size_t s = 0; s < p->n; s++) {
    if (p->ops[s].out == FC_INDETERMINATE && p->ops[s].code == -1) {
      p->ops[s].end = end;
    }
  }
  if (p->kafka_fatal[0] != '\0') {
    wl_violation("kafka producer %d: librdkafka's idempotent producer failed fatally: %s", p->id,
                 p->kafka_fatal);
  }
  rd_kafka_destroy(rk);
  return NULL;
}

static int wl_push_obs(struct wl_consumer *c, uint32_t partition, int64_t offset, const uint8_t *v,
                       size_t vlen)
{
  if (c->n == c->cap) {
    size_t cap = c->cap ? c->cap * 2 : 4096;
    struct wl_obs *obs = realloc(c->obs, cap * sizeof *obs);
    if (obs == NULL) {
      return -1;
    }
    c->obs = obs;
    c->cap = cap;
  }
  struct wl_obs *o = &c->obs[c->n++];
  o->partition = partition;
  o->offset = offset;
  size_t n = vlen < WL_VALUE_LEN - 1 ? vlen : WL_VALUE_LEN - 1;
  memcpy(o->value, v, n);
  o->value[n] = '\0';
  return 0;
}

/* Walks the batches of a fetch answer: calls back for each record, checks
 * each batch and that offsets continue from *next. Returns 0, or -1 with
 * why filled. */
typedef int (*wl_record_fn)(void *ctx, uint32_t partition, int64_t offset,
                            const struct batch_header *h, const uint8_t *v, size_t vlen);
static int wl_walk(const uint8_t *data, size_t len, uint32_t partition, int64_t *next,
                   wl_record_fn fn, void *ctx, char *why, size_t whylen)
{
  size_t pos = 0;
  while (pos < len) {
    if (len - pos < BATCH_HEADER_SIZE) {
      snprintf(why, whylen, "partition %" PRIu32 ": %zu trailing bytes", partition, len - pos);
      return -1;
    }
    struct batch_header h;
    batch_header_decode(data + pos, &h);
    size_t size = batch_total_size(h.batch_length);
    char vwhy[160] = "";
    if (h.batch_length <= 0 || size > len - pos ||
        batch_validate(data + pos, size, BATCH_DEFAULT_MAX_BYTES, vwhy, sizeof vwhy) != 0) {
      snprintf(why, whylen, "partition %" PRIu32 ": bad batch at offset %" PRId64 ": %s", partition,
               h.base_offset, vwhy);
      return -1;
    }
    struct batch_iter it;
    if (batch_iter_init(&it, data + pos, size) != 0) {
      snprintf(why, whylen, "partition %" PRIu32 ": batch at %" PRId64 " does not iterate",
               partition, h.base_offset);
      return -1;
    }
    struct batch_record r;
    while (batch_iter_next(&it, &r) == 1) {
      if (r.offset < *next) {
        continue; /* a fetch may start inside a batch */
      }
      if (r.offset != *next) {
        snprintf(why, whylen, "partition %" PRIu32 ": offset %" PRId64 " follows %" PRId64,
                 partition, r.offset, *next - 1);
        return -1;
      }
      if (fn(ctx, partition, r.offset, &h, r.value, r.value_len) != 0) {
        snprintf(why, whylen, "out of memory");
        return -1;
      }
      *next = r.offset + 1;
    }
    pos += size;
  }
  return 0;
}

static int wl_consumer_record(void *ctx, uint32_t partition, int64_t offset,
                              const struct batch_header *h, const uint8_t *v, size_t vlen)
{
  (void)h;
  return wl_push_obs(ctx, partition, offset, v, vlen);
}

static void *wl_consumer_main(void *arg)
{
  struct wl_consumer *c = arg;
  for (uint32_t q = 0; !atomic_load(&wl.stop); q = (q + 1) % wl.parts) {
    int i = c->leader[q];
    if (i < 0) {
      i = fc_find_leader(&wl.ns, (int)(wl_rand(&c->rng) % (uint64_t)wl.ns.n), wl.topic, q);
      c->leader[q] = i;
    }
    if (i < 0) {
      wl_sleep_ms(50);
      continue;
    }
    uint8_t *data = NULL;
    size_t len = 0;
    int64_t hw = 0, log_start;
    c->fetches++;
    int rv = fc_fetch_once(&wl.ns, i, wl.topic, q, c->next[q], WL_FETCH_BYTES, &data, &len, &hw,
                           &log_start);
    if (rv == CAIRN__CLIENT__ERROR_CODE__OFFSET_OUT_OF_RANGE && log_start > c->next[q]) {
      c->skipped += (uint64_t)(log_start - c->next[q]); /* deleted: go on from the start */
      c->next[q] = log_start;
      continue;
    }
    if (rv != 0) {
      c->errors++;
      c->leader[q] = -1;
      wl_sleep_ms(20);
      continue;
    }
    char why[256];
    if (wl_walk(data, len, q, &c->next[q], wl_consumer_record, c, why, sizeof why) != 0 &&
        c->problem[0] == '\0') {
      snprintf(c->problem, sizeof c->problem, "consumer %d from node %" PRIu64 ": %s", c->id,
               wl.ns.id[i], why);
    }
    free(data);
    if (len == 0) {
      wl_sleep_ms(20);
    }
  }
  return NULL;
}

/* ---- a Kafka group consumer: librdkafka's high-level consumer ----
 *
 * Subscribes to the topic in group WL_KAFKA_GROUP (alone in it, so it is
 * assigned every partition, again after each rebalance a fault causes),
 * records every record it is handed (checked against the final log as the
 * native consumers' reads are) and commits its position every
 * WL_KAFKA_COMMIT_MS. A commit the coordinator acknowledged is acknowledged
 * data: whenever the group hands the consumer its partitions again, their
 * committed offsets must be at least what it acknowledged (checked here), and
 * after the run too (wl_check_kafka_commits). */

#define WL_KAFKA_GROUP "fault-group"
#define WL_KAFKA_COMMIT_MS 500

static void wl_kafka_group_conf(rd_kafka_conf_t *conf, char *err, size_t errlen)
{
  const char *kv[][2] = {
      {"bootstrap.servers", wl.kafka_bootstrap}, {"group.id", WL_KAFKA_GROUP},
      {"enable.auto.commit", "false"},           {"session.timeout.ms", "6000"},
      {"heartbeat.interval.ms", "500"},          {"fetch.wait.max.ms", "100"},
      {"reconnect.backoff.max.ms", "1000"},      {"topic.metadata.refresh.interval.ms", "10000"},
      {"log.connection.close", "false"},
  };
  for (size_t i = 0; i < sizeof kv / sizeof kv[0]; i++) {
    if (rd_kafka_conf_set(conf, kv[i][0], kv[i][1], err, errlen) != RD_KAFKA_CONF_OK) {
      return;
    }
  }
  rd_kafka_conf_set_log_cb(conf, wl_kafka_log);
  /* A topic setting in librdkafka 2.0.2: from the start, with nothing
   * committed yet. */
  rd_kafka_topic_conf_t *tconf = rd_kafka_topic_conf_new();
  if (rd_kafka_topic_conf_set(tconf, "auto.offset.reset", "earliest", err, errlen) !=
      RD_KAFKA_CONF_OK) {
    rd_kafka_topic_conf_destroy(tconf);
    return;
  }
  rd_kafka_conf_set_default_topic_conf(conf, tconf);
}

/* The group's committed offsets in parts (as rd_kafka_committed, an
 * OffsetFetch from the coordinator, filled them) against what c had
 * acknowledged; a lower one is a lost commit. */
static void wl_kafka_check_committed(const struct wl_consumer *c,
                                     const rd_kafka_topic_partition_list_t *parts, const char *when)
{
  for (int i = 0; i < parts->cnt; i++) {
    const rd_kafka_topic_partition_t *tp = &parts->elems[i];
    if (tp->err != RD_KAFKA_RESP_ERR_NO_ERROR || tp->partition < 0 ||
        tp->partition >= WL_MAX_PARTS) {
      continue;
    }
    int64_t want = c->acked_commit[tp->partition];
    if (want >= 0 && tp->offset < want) {
      wl_violation("kafka group %s: partition %" PRId32 "'s committed offset is %" PRId64
                   " %s, below the %" PRId64 " the coordinator acknowledged: a commit was lost",
                   WL_KAFKA_GROUP, tp->partition, tp->offset, when, want);
    }
  }
}

static void wl_kafka_rebalance(rd_kafka_t *rk, rd_kafka_resp_err_t err,
                               rd_kafka_topic_partition_list_t *parts, void *opaque)
{
  struct wl_consumer *c = opaque;
  if (err == RD_KAFKA_RESP_ERR__ASSIGN_PARTITIONS) {
    c->assignments++;
    rd_kafka_topic_partition_list_t *copy = rd_kafka_topic_partition_list_copy(parts);
    if (rd_kafka_committed(rk, copy, 10000) == RD_KAFKA_RESP_ERR_NO_ERROR) {
      wl_kafka_check_committed(c, copy, "when the group assigned it");
    } /* else the coordinator is away: nothing learnt */
    rd_kafka_topic_partition_list_destroy(copy);
    rd_kafka_assign(rk, parts);
  } else {
    rd_kafka_assign(rk, NULL);
  }
}

/* Commits the consumer's position; an acknowledged commit raises
 * acked_commit. */
static void wl_kafka_commit(struct wl_consumer *c, rd_kafka_t *rk)
{
  rd_kafka_topic_partition_list_t *pos = NULL;
  int valid = 0;
  if (rd_kafka_assignment(rk, &pos) == RD_KAFKA_RESP_ERR_NO_ERROR && pos->cnt > 0 &&
      rd_kafka_position(rk, pos) == RD_KAFKA_RESP_ERR_NO_ERROR) {
    for (int i = 0; i < pos->cnt; i++) {
      valid += pos->elems[i].offset >= 0; /* nothing consumed yet: no position */
    }
  }
  if (valid == 0) {
    if (pos != NULL) {
      rd_kafka_topic_partition_list_destroy(pos);
    }
    return;
  }
  if (rd_kafka_commit(rk, pos, 0) != RD_KAFKA_RESP_ERR_NO_ERROR) {
    c->commits_failed++;
    rd_kafka_topic_partition_list_destroy(pos);
    return;
  }
  c->commits_ok++;
  for (int i = 0; i < pos->cnt; i++) {
    const rd_kafka_topic_partition_t *tp = &pos->elems[i];
    if (tp->offset >= 0 && tp->partition >= 0 && tp->partition < WL_MAX_PARTS &&
        tp->offset > c->acked_commit[tp->partition]) {
      c->acked_commit[tp->partition] = tp->offset;
    }
  }
  rd_kafka_topic_partition_list_destroy(pos);
}

static void *wl_kafka_group_main(void *arg)
{
  struct wl_consumer *c = arg;
  char err[512] = "";
  rd_kafka_conf_t *conf = rd_kafka_conf_new();
  wl_kafka_group_conf(conf, err, sizeof err);
  rd_kafka_conf_set_opaque(conf, c);
  rd_kafka_conf_set_rebalance_cb(conf, wl_kafka_rebalance);
  rd_kafka_t *rk = err[0] == '\0' ? rd_kafka_new(RD_KAFKA_CONSUMER, conf, err, sizeof err) : NULL;
  if (rk == NULL) {
    rd_kafka_conf_destroy(conf);
    snprintf(c->problem, sizeof c->problem, "kafka group consumer %d could not start: %.300s",
             c->id, err);
    return NULL;
  }
  rd_kafka_poll_set_consumer(rk);
  rd_kafka_topic_partition_list_t *sub = rd_kafka_topic_partition_list_new(1);
  rd_kafka_topic_partition_list_add(sub, wl.topic, RD_KAFKA_PARTITION_UA);
  rd_kafka_subscribe(rk, sub);
  rd_kafka_topic_partition_list_destroy(sub);
  long long next_commit = wl_now() + WL_KAFKA_COMMIT_MS;
  while (!atomic_load(&wl.stop)) {
    rd_kafka_message_t *m = rd_kafka_consumer_poll(rk, 100);
    if (m != NULL) {
      if (m->err == RD_KAFKA_RESP_ERR_NO_ERROR && m->partition >= 0 &&
          (uint32_t)m->partition < wl.parts) {
        c->fetches++;
        (void)wl_push_obs(c, (uint32_t)m->partition, m->offset, m->payload, m->len);
      } else if (m->err != RD_KAFKA_RESP_ERR_NO_ERROR) {
        c->errors++;
      }
      rd_kafka_message_destroy(m);
    }
    if (wl_now() >= next_commit) {
      wl_kafka_commit(c, rk);
      next_commit = wl_now() + WL_KAFKA_COMMIT_MS;
    }
  }
  wl_kafka_commit(c, rk);
  rd_kafka_consumer_close(rk);
  rd_kafka_destroy(rk);
  return NULL;
}

/* After the run: the group's committed offsets against every commit the
 * coordinator acknowledged (a fresh handle of the group, not a member). */
static void wl_check_kafka_commits(void)
{
  for (int k = 0; k < wl.nconsumers; k++) {
    struct wl_consumer *c = &wl.cons[k];
    if (!c->kafka) {
      continue;
    }
    if (wl.claimed_commit > c->acked_commit[0]) {
      c->acked_commit[0] = wl.claimed_commit; /* the checker's own check (selfcheck.sh) */
    }
    char err[512] = "";
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    wl_kafka_group_conf(conf, err, sizeof err);
    rd_kafka_t *rk = err[0] == '\0' ? rd_kafka_new(RD_KAFKA_CONSUMER, conf, err, sizeof err) : NULL;
    if (rk == NULL) {
      rd_kafka_conf_destroy(conf);
      wl_violation("kafka group %s: cannot read its committed offsets: %s", WL_KAFKA_GROUP, err);
      continue;
    }
    rd_kafka_topic_partition_list_t *parts = rd_kafka_topic_partition_list_new((int)wl.parts);
    for (uint32_t q = 0; q < wl.parts; q++) {
      rd_kafka_topic_partition_list_add(parts, wl.topic, (int32_t)q);
    }
    rd_kafka_resp_err_t e = RD_KAFKA_RESP_ERR__TIMED_OUT;
    for (int attempt = 0; attempt < 6 && e != RD_KAFKA_RESP_ERR_NO_ERROR; attempt++) {
      e = rd_kafka_committed(rk, parts, 10000);
    }
    if (e != RD_KAFKA_RESP_ERR_NO_ERROR) {
      wl_violation("kafka group %s: its committed offsets unreadable after healing: %s",
                   WL_KAFKA_GROUP, rd_kafka_err2str(e));
    } else {
      wl_kafka_check_committed(c, parts, "after the run");
    }
    rd_kafka_topic_partition_list_destroy(parts);
    rd_kafka_destroy(rk);
  }
}

static int wl_log_record(void *ctx, uint32_t partition, int64_t offset,
                         const struct batch_header *h, const uint8_t *v, size_t vlen)
{
  (void)partition;
  (void)offset;
  struct wl_log *lg = ctx;
  if (lg->n == lg->cap) {
    size_t cap = lg->cap ? lg->cap * 2 : 4096;
    void *nv = realloc(lg->v, cap * sizeof *lg->v);
    void *np = realloc(lg->pid, cap * sizeof *lg->pid);
    void *ne = realloc(lg->epoch, cap * sizeof *lg->epoch);
    lg->v = nv != NULL ? nv : lg->v;
    lg->pid = np != NULL ? np : lg->pid;
    lg->epoch = ne != NULL ? ne : lg->epoch;
    if (nv == NULL || np == NULL || ne == NULL) {
      return -1;
    }
    lg->cap = cap;
  }
  size_t n = vlen < WL_VALUE_LEN - 1 ? vlen : WL_VALUE_LEN - 1;
  memcpy(lg->v[lg->n], v, n);
  lg->v[lg->n][n] = '\0';
  lg->pid[lg->n] = h->producer_id;
  lg->epoch[lg->n] = h->producer_epoch;
  lg->n++;
  return 0;
}

/* Produces a sentinel to partition q until acknowledged: its leader has
 * then committed an entry of its own term, so its high watermark covers
 * everything committed before. Returns 0 or -1 after timeout_ms. */
static int wl_sentinel(uint32_t q, int timeout_ms)
{
  char value[WL_VALUE_LEN];
  snprintf(value, sizeof value, "sentinel q%" PRIu32, q);
  size_t len;
  uint8_t *batch = wl_batch(value, &len, NULL, q);
  long long end = fc_now_ms() + timeout_ms;
  int rv = -1;
  uint64_t rng = wl.seed ^ q;
  while (batch != NULL && rv != 0 && fc_now_ms() < end) {
    int i = fc_find_leader(&wl.ns, (int)(wl_rand(&rng) % (uint64_t)wl.ns.n), wl.topic, q);
    int code, hint;
    int64_t off;
    if (i >= 0 &&
        fc_produce_once(&wl.ns, i, wl.topic, q, batch, len, WL_ANSWER_MS, &code, &off, &hint) ==
            FC_ACK) {
      rv = 0;
    } else {
      wl_sleep_ms(200);
    }
  }
  free(batch);
  return rv;
}

/* Reads partition q from its leader, from its log start to the high
 * watermark, into wl.log[q]. Retries from scratch until timeout_ms. Returns 0 or -1. */
static int wl_read_back(uint32_t q, int timeout_ms)
{
  long long end = fc_now_ms() + timeout_ms;
  uint64_t rng = wl.seed ^ (q + 1000);
  struct wl_log *lg = &wl.log[q];
  while (fc_now_ms() < end) {
    lg->n = 0;
    lg->start = 0;
    int64_t next = 0;
    int64_t hw = -1;
    int i = fc_find_leader(&wl.ns, (int)(wl_rand(&rng) % (uint64_t)wl.ns.n), wl.topic, q);
    bool ok = i >= 0;
    while (ok && (hw < 0 || next < hw)) {
      uint8_t *data = NULL;
      size_t len = 0;
      int64_t log_start;
      int rv =
          fc_fetch_once(&wl.ns, i, wl.topic, q, next, WL_FETCH_BYTES, &data, &len, &hw, &log_start);
      char why[256];
      if (rv == CAIRN__CLIENT__ERROR_CODE__OFFSET_OUT_OF_RANGE && lg->n == 0 && log_start > next) {
        lg->start = next = log_start; /* a delete moved it: the log is read from there */
        hw = -1;
        continue;
      }
      if (rv != 0) {
        ok = false;
      } else if (wl_walk(data, len, q, &next, wl_log_record, lg, why, sizeof why) != 0) {
        wl_violation("final read-back of partition %" PRIu32 " from node %" PRIu64 ": %s", q,
                     wl.ns.id[i], why);
        free(data);
        return -1;
      } else if (len == 0 && next < hw) {
        ok = false;
      }
      free(data);
    }
    if (ok) {
      lg->hw = hw;
      return 0;
    }
    wl_sleep_ms(300);
  }
  return -1;
}

static int wl_cmp_i64(const void *a, const void *b)
{
  long long x = *(const long long *)a, y = *(const long long *)b;
  return (x > y) - (x < y);
}

static const char *wl_outcome_name(enum fc_outcome o)
{
  return o == FC_ACK ? "ack" : o == FC_FAIL ? "fail" : "indeterminate";
}

/* Reads the nemesis's DeleteRecords from --faults into wl.deletes (lines
 * "<ms> delete pQ: OUTCOME target T code C low L node N ..."). */
static void wl_read_deletes(void)
{
  FILE *ff = wl.faults_file != NULL ? fopen(wl.faults_file, "r") : NULL;
  char *line = NULL; /* whole lines: a lostcache or torn line can be long */
  size_t linecap = 0;
  while (ff != NULL && getline(&line, &linecap, ff) > 0) {
    long long t, target;
    unsigned q;
    char outcome[24];
    if (sscanf(line, "%lld delete p%u: %23s target %lld", &t, &q, outcome, &target) != 4 ||
        q >= wl.parts) {
      continue;
    }
    struct wl_deletes *d = &wl.deletes[q];
    if (strcmp(outcome, "fail") == 0) {
      d->failed++;
      continue;
    }
    bool ack = strcmp(outcome, "ack") == 0;
    d->acked += ack;
    d->indeterminate += !ack;
    d->floor = ack && target > d->floor ? target : d->floor;
    d->ceiling = target > d->ceiling ? target : d->ceiling;
  }
  free(line);
  if (ff != NULL) {
    fclose(ff);
  }
}

/* Partition q's final log start against its deletes (the file comment). */
static void wl_check_start(uint32_t q)
{
  const struct wl_deletes *d = &wl.deletes[q];
  int64_t start = wl.log[q].start;
  if (start < d->floor) {
    wl_violation("partition %" PRIu32 " starts at %" PRId64 " but an acknowledged DeleteRecords "
                 "moved its start to %" PRId64 ": deleted records came back",
                 q, start, d->floor);
  } else if (start > d->ceiling && wl.retention_bytes == 0) {
    wl_violation("partition %" PRIu32 " starts at %" PRId64 ", above every DeleteRecords sent "
                 "to it (the highest: %" PRId64 "): records were lost from its start",
                 q, start, d->ceiling);
  }
}

/* A Kafka producer's value found again at index j of lg, its first copy at
 * found[seq]: librdkafka renumbers every value it still holds from
 * sequence 0 after an epoch bump (or a new producer id), a retried one
 * whose earlier request was stored but whose answer was lost included, and
 * no broker can tell the two apart (librdkafka issue #4953; Apache Kafka
 * stores it twice too: docs/kafka.md). So a second copy under another
 * (producer id, epoch) is that, counted and allowed once; one under the
 * same is the broker's duplicate. Returns whether it was allowed. */
static bool wl_check_kafka_copy(struct wl_producer *p, const struct wl_log *lg, int64_t seq,
                                size_t j)
{
  if (!p->kafka || p->copy[seq] >= 0) {
    return false;
  }
  size_t i = (size_t)(p->found[seq] - lg->start);
  if (lg->pid[i] == lg->pid[j] && lg->epoch[i] == lg->epoch[j]) {
    return false;
  }
  p->copy[seq] = lg->start + (int64_t)j;
  p->restamped++;
  return true;
}

/* The checks of the file comment; fills each producer's found[]. */
static void wl_check(void)
{
  for (int k = 0; k < wl.nproducers; k++) {
    struct wl_producer *p = &wl.prod[k];
    p->found = malloc((p->n + 1) * sizeof *p->found);
    p->copy = p->kafka ? malloc((p->n + 1) * sizeof *p->copy) : NULL;
    for (size_t s = 0; s <= p->n; s++) {
      p->found[s] = -1;
      if (p->copy != NULL) {
        p->copy[s] = -1;
      }
    }
  }
  for (uint32_t q = 0; q < wl.parts; q++) {
    const struct wl_log *lg = &wl.log[q];
    wl_check_start(q);
    for (size_t j = 0; j < lg->n; j++) {
      int64_t off = lg->start + (int64_t)j;
      int producer;
      int64_t seq;
      uint32_t part;
      int rv = wl_parse(lg->v[j], &producer, &seq, &part);
      if (rv == 0) {
        continue;
      }
      if (rv < 0 || producer < 0 || producer >= wl.nproducers || part != q || seq < 0 ||
          (size_t)seq >= wl.prod[producer].n + 1) {
        wl_violation("partition %" PRIu32 " offset %" PRId64 ": value '%s' was never produced here",
                     q, off, lg->v[j]);
        continue;
      }
      struct wl_producer *p = &wl.prod[producer];
      if (p->found[seq] >= 0 && wl_check_kafka_copy(p, lg, seq, j)) {
        continue;
      }
      if (p->found[seq] >= 0) {
        wl_violation("value '%s' appears twice in partition %" PRIu32 ": offsets %" PRId64
                     " and %" PRId64,
                     lg->v[j], q, p->found[seq], off);
        continue;
      }
      p->found[seq] = off;
    }
  }
  for (int k = 0; k < wl.nproducers; k++) {
    struct wl_producer *p = &wl.prod[k];
    int64_t last_off[WL_MAX_PARTS];
    int64_t last_seq[WL_MAX_PARTS];
    for (uint32_t q = 0; q < wl.parts; q++) {
      last_off[q] = -1;
      last_seq[q] = -1;
    }
    for (size_t s = 0; s < p->n; s++) {
      const struct wl_op *op = &p->ops[s];
      int64_t f = p->found[s];
      if (p->copy != NULL && p->copy[s] >= 0 && op->out == FC_ACK && op->offset == p->copy[s]) {
        f = p->copy[s]; /* acknowledged as its later copy */
      }
      char value[WL_VALUE_LEN];
      wl_value(value, sizeof value, p->id, op->seq, op->partition);
      if (op->out == FC_ACK) {
        /* librdkafka's implicit acknowledgement carries no offset (a later
         * batch of the partition succeeded, so this one, whose answer was
         * lost, was stored): it must be in the log, anywhere before. With
         * a moved log start, a missing one may have been deleted. */
        bool no_offset = op->offset < 0;
        int64_t start = wl.log[op->partition].start;
        if (f < 0 && (no_offset ? start > 0 : op->offset < start)) {
          wl.acked_deleted++; /* below the log start: a DeleteRecords took it */
        } else if (f < 0) {
          wl_violation("acknowledged value '%s' (partition %" PRIu32 " offset %" PRId64
                       ", acked at %lld ms) is missing from the final log",
                       value, op->partition, op->offset, op->end);
        } else if (f != op->offset && !no_offset) {
          wl_violation("acknowledged value '%s' was acked at offset %" PRId64
                       " but is at offset %" PRId64 " of partition %" PRIu32,
                       value, op->offset, f, op->partition);
        }
        if (f >= 0) {
          if (f <= last_off[op->partition]) {
            wl_violation("order: producer %d's seq %" PRId64 " at offset %" PRId64
                         " of partition %" PRIu32 " is not after seq %" PRId64 " at %" PRId64,
                         p->id, op->seq, f, op->partition, last_seq[op->partition],
                         last_off[op->partition]);
          }
          last_off[op->partition] = f;
          last_seq[op->partition] = op->seq;
        }
      } else if (op->out == FC_FAIL && f >= 0) {
        wl_violation("value '%s' was refused (code %d) but is at offset %" PRId64
                     " of partition %" PRIu32,
                     value, op->code, f, op->partition);
      }
    }
  }
  for (int c = 0; c < wl.nconsumers; c++) {
    const struct wl_consumer *cs = &wl.cons[c];
    if (cs->problem[0] != '\0') {
      wl_violation("%s", cs->problem);
    }
    long bad = 0;
    for (size_t j = 0; j < cs->n; j++) {
      const struct wl_obs *o = &cs->obs[j];
      const struct wl_log *lg = &wl.log[o->partition];
      if (o->offset < lg->start) {
        wl.reads_deleted++; /* nothing left to compare it with */
        continue;
      }
      int64_t at = o->offset - lg->start;
      const char *final = at < (int64_t)lg->n ? lg->v[at] : NULL;
      if (final == NULL || strcmp(final, o->value) != 0) {
        if (bad++ < 5) {
          wl_violation("consumer %d read '%s' at offset %" PRId64 " of partition %" PRIu32
                       " but the final log has %s%s%s",
                       c, o->value, o->offset, o->partition, final ? "'" : "",
                       final ? final : "nothing there", final ? "'" : "");
        }
      }
    }
    if (bad > 5) {
      wl_violation("consumer %d: %ld more reads differ from the final log", c, bad - 5);
    }
  }
}

/* s as a JSON string on f (the report around it is fprintf'd). */
static void wl_json_str(FILE *f, const char *s)
{
  int rv = jsonw_quote(jsonw_sink_file, f, s, strlen(s));
  (void)rv; /* the report goes on regardless, as the printf calls around it do */
}

/* ---- availability per nemesis kind ---- */

#define WL_MAX_KINDS 24

/* One kind of fault event ("kill", "restart", ...) and how long the
 * worst partition waited for its next acknowledgement after each one. */
struct wl_kind {
  char name[24];
  long long *waits; /* ms */
  size_t n, cap;
};

/* The first acknowledgement on partition q ending at or after t (ms), or
 * -1. acks[q] is sorted. */
static long long wl_next_ack(long long *const *acks, const size_t *nacks, uint32_t q, long long t)
{
  size_t lo = 0, hi = nacks[q];
  while (lo < hi) {
    size_t mid = (lo + hi) / 2;
    if (acks[q][mid] < t) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  return lo < nacks[q] ? acks[q][lo] : -1;
}

static struct wl_kind *wl_kind_get(struct wl_kind *kinds, int *nkinds, const char *name)
{
  for (int i = 0; i < *nkinds; i++) {
    if (strcmp(kinds[i].name, name) == 0) {
      return &kinds[i];
    }
  }
  if (*nkinds == WL_MAX_KINDS) {
    return NULL;
  }
  struct wl_kind *k = &kinds[(*nkinds)++];
  memset(k, 0, sizeof *k);
  snprintf(k->name, sizeof k->name, "%s", name);
  return k;
}

/* The kind of a nemesis line's event: its first word ("kill",
 * "partition", ...), or for a heal the words before "healed" ("kill
 * healed: restart node 2" -> "kill healed"; "healed everything"). */
static void wl_event_kind(const char *what, char *kind, size_t len)
{
  const char *h = strstr(what, " healed");
  if (h != NULL) {
    snprintf(kind, len, "%.*s healed", (int)(h - what), what);
    return;
  }
  size_t n = strcspn(what, " :(");
  snprintf(kind, len, "%.*s%s", (int)n, what, strncmp(what, "healed", 6) == 0 ? " all" : "");
}

/* Where each partition's replicas are (a bit per node id), as the first
 * node from `first` on that answers Metadata says; 0 for a partition not
 * learned. Returns whether a node answered with the topic. */
static bool wl_placement(uint64_t *replicas, int first)
{
  memset(replicas, 0, WL_MAX_PARTS * sizeof *replicas);
  for (int j = 0; j < wl.ns.n; j++) {
    int i = (first + j) % wl.ns.n;
    Cairn__Client__Envelope *env = NULL;
    Cairn__Client__MetadataResponse *md = fc_metadata(&wl.ns, i, &env);
    bool found = false;
    for (size_t t = 0; md != NULL && t < md->n_topics; t++) {
      const Cairn__Client__TopicInfo *ti = md->topics[t];
      for (size_t k = 0; strcmp(ti->name, wl.topic) == 0 && k < ti->n_partitions; k++) {
        const Cairn__Client__PartitionInfo *pi = ti->partitions[k];
        for (size_t r = 0; pi->partition < WL_MAX_PARTS && r < pi->n_replicas; r++) {
          replicas[pi->partition] |= pi->replicas[r] < 64 ? 1ull << pi->replicas[r] : 0;
          found = true;
        }
      }
    }
    if (env != NULL) {
      cairn__client__envelope__free_unpacked(env, NULL);
    }
    if (found) {
      return true;
    }
  }
  return false;
}

/* Records the placement now if it changed since the last sample (main
 * thread, about once a second during the run; each time asks another node
 * first, so that a paused one does not hold every sample up). */
static void wl_placement_sample(void)
{
  static int first;
  uint64_t replicas[WL_MAX_PARTS];
  if (!wl_placement(replicas, first++ % (wl.ns.n > 0 ? wl.ns.n : 1))) {
    return;
  }
  struct wl_placement_sample *last =
      wl.nplacements > 0 ? &wl.placements[wl.nplacements - 1] : NULL;
  if (last != NULL && memcmp(last->replicas, replicas, sizeof replicas) == 0) {
    return;
  }
  if (wl.nplacements == wl.placements_cap) {
    wl.placements_cap = wl.placements_cap ? wl.placements_cap * 2 : 16;
    wl.placements = realloc(wl.placements, wl.placements_cap * sizeof *wl.placements);
  }
  struct wl_placement_sample *sm = &wl.placements[wl.nplacements++];
  sm->t = wl.nplacements == 1 ? 0 : wl_now();
  memcpy(sm->replicas, replicas, sizeof replicas);
}

/* The placement of partition q at ms t: the last sample at or before t
 * (the first one before any), or after the run's end when never sampled. */
static uint64_t wl_placement_at(uint32_t q, long long t, const uint64_t *final)
{
  uint64_t r = final[q];
  for (size_t i = 0; i < wl.nplacements && (i == 0 || wl.placements[i].t <= t); i++) {
    r = wl.placements[i].replicas[q];
  }
  return r;
}

/* The nodes a nemesis line says are not up after its event (its
 * "[down: 1 3]" suffix, by node id), as a bit per node id. */
static uint64_t wl_event_down(const char *what)
{
  const char *d = strstr(what, "[down:");
  uint64_t down = 0;
  for (d = d != NULL ? d + 6 : NULL; d != NULL && *d != '\0' && *d != ']';) {
    char *end;
    unsigned long id = strtoul(d, &end, 10);
    if (end == d) {
      d++;
      continue;
    }
    down |= id < 64 ? 1ull << id : 0;
    d = end;
  }
  return down;
}

/* The node pairs a nemesis line says cannot reach each other after its
 * event (its "[cut: 1-2 1-4]" suffix): cut[a] has a bit per node id that
 * a cannot reach, both ways. */
static void wl_event_cuts(const char *what, uint64_t cut[64])
{
  memset(cut, 0, 64 * sizeof *cut);
  const char *d = strstr(what, "[cut:");
  for (d = d != NULL ? d + 5 : NULL; d != NULL && *d != '\0' && *d != ']';) {
    char *end, *end2;
    unsigned long a = strtoul(d, &end, 10);
    if (end == d || *end != '-') {
      d++;
      continue;
    }
    unsigned long b = strtoul(end + 1, &end2, 10);
    if (end2 != end + 1 && a < 64 && b < 64) {
      cut[a] |= 1ull << b;
      cut[b] |= 1ull << a;
    }
    d = end2;
  }
}

/* Can a majority of the replicas (a bit per node id) be up and connected:
 * is there an up replica that reaches enough others (a leader needs its
 * followers, not a connected whole)? True when the placement is unknown. */
static bool wl_majority_up(uint64_t replicas, uint64_t down, const uint64_t cut[64])
{
  int n = __builtin_popcountll(replicas);
  uint64_t up = replicas & ~down;
  for (int r = 0; r < 64; r++) {
    if ((up >> r & 1) && 1 + __builtin_popcountll(up & ~(1ull << r) & ~cut[r]) > n / 2) {
      return true;
    }
  }
  return n == 0;
}

/* One nemesis event of --faults: "<ms> <what> [down: ids]", ms on this
 * program's clock; down: the nodes not up and connected after it. */
struct wl_event {
  long long t;
  uint64_t down;
  uint64_t cut[64];
  char kind[24];
  bool measured; /* false: no fault (a skip, churn's progress) or a conncut */
};

/* Reads --faults into *events (malloc'd; *n of them, in time order). */
static void wl_read_events(struct wl_event **events, size_t *n)
{
  size_t cap = 0;
  *events = NULL;
  *n = 0;
  FILE *ff = wl.faults_file != NULL ? fopen(wl.faults_file, "r") : NULL;
  /* Whole lines: a lostcache line names every replica cut and can run
   * past any fixed buffer; a line read in pieces made its rest an event of
   * its own ("<n> of <m> bytes ..." read as kind "of" at n ms) and left
   * the fault without its "[down: ...]". */
  char *line = NULL;
  size_t linecap = 0;
  while (ff != NULL && getline(&line, &linecap, ff) > 0) {
    char *what;
    long long t = strtoll(line, &what, 10); /* ms from the workload's start */
    while (*what == ' ') {
      what++;
    }
    if (*n == cap) {
      cap = cap ? cap * 2 : 64;
      *events = realloc(*events, cap * sizeof **events);
    }
    struct wl_event *e = &(*events)[(*n)++];
    e->t = t;
    e->down = wl_event_down(what);
    wl_event_cuts(what, e->cut);
    wl_event_kind(what, e->kind, sizeof e->kind);
    /* A conncut refuses clients at a leader whose group is healthy: no
     * election moves the partition away, so it is measured from its heal.
     * A delete is no fault (its follower's kill is measured as a kill). */
    e->measured = strstr(what, " skipped") == NULL && strncmp(what, "churn: node", 11) != 0 &&
                  strncmp(what, "conncut node", 12) != 0 && strncmp(what, "delete p", 8) != 0;
  }
  free(line);
  if (ff != NULL) {
    fclose(ff);
  }
}

/* Does an event after events[i] and before ms `until` leave partition
 * (replicas) without a majority up and connected? Then events[i]'s wait
 * on it is not the fault's: the later event's heal measures it. */
static bool wl_majority_lost_before(const struct wl_event *events, size_t n, size_t i,
                                    uint32_t q, const uint64_t *final, long long until)
{
  for (size_t j = i + 1; j < n && events[j].t < until; j++) {
    if (!wl_majority_up(wl_placement_at(q, events[j].t, final), events[j].down, events[j].cut)) {
      return true;
    }
  }
  return false;
}

/* For every nemesis event, how long until every partition that has a
 * majority of its replicas up and connected after the event acknowledged
 * a write again; printed per kind: count, median, worst, how many took
 * longer than the target (WL_TARGET_MS: issue 20 asks writes to be
 * acknowledged again within 2 s of a fault that leaves a majority up and
 * connected, and within 2 s of a majority returning) and whether it is
 * met. Placement is as sampled during the run (churn moves replicas). A
 * partition whose majority an event leaves down, paused or cut off
 * (killall, majority, a pause overlapping a kill) is measured from the
 * event that brings it back instead; so is one whose majority a later
 * event takes away before its next acknowledgement. An event after which
 * no partition is measured is not counted. A conncut is measured from its
 * heal. Faults that slow without stopping (netem, two in one step) lengthen
 * each other's figures: upper bounds. */
static void wl_report_availability(FILE *json)
{
  long long *acks[WL_MAX_PARTS] = {0};
  size_t nacks[WL_MAX_PARTS] = {0}, caps[WL_MAX_PARTS] = {0};
  for (int k = 0; k < wl.nproducers - wl.nkafka; k++) { /* the native client's failover */
    const struct wl_producer *p = &wl.prod[k];
    for (size_t s = 0; s < p->n; s++) {
      const struct wl_op *op = &p->ops[s];
      uint32_t q = op->partition;
      if (op->out != FC_ACK || q >= WL_MAX_PARTS) {
        continue;
      }
      if (nacks[q] == caps[q]) {
        caps[q] = caps[q] ? caps[q] * 2 : 256;
        acks[q] = realloc(acks[q], caps[q] * sizeof *acks[q]);
      }
      acks[q][nacks[q]++] = op->end;
    }
  }
  for (uint32_t q = 0; q < wl.parts && q < WL_MAX_PARTS; q++) {
    qsort(acks[q], nacks[q], sizeof *acks[q], wl_cmp_i64);
  }
  uint64_t final[WL_MAX_PARTS];
  wl_placement(final, 0);
  struct wl_kind kinds[WL_MAX_KINDS];
  int nkinds = 0;
  struct wl_event *events;
  size_t nevents;
  wl_read_events(&events, &nevents);
  long long run_end = (long long)wl.seconds * 1000;
  for (size_t i = 0; i < nevents; i++) {
    const struct wl_event *e = &events[i];
    if (!e->measured || e->t >= run_end) {
      continue; /* no fault, or after the run (the final heal) */
    }
    struct wl_kind *k = wl_kind_get(kinds, &nkinds, e->kind);
    long long worst = 0;
    int measured = 0;
    for (uint32_t q = 0; q < wl.parts && q < WL_MAX_PARTS && k != NULL; q++) {
      if (!wl_majority_up(wl_placement_at(q, e->t, final), e->down, e->cut)) {
        continue; /* measured from the event that brings its majority back */
      }
      long long a = wl_next_ack(acks, nacks, q, e->t);
      long long until = a < 0 ? run_end : a;
      if (wl_majority_lost_before(events, nevents, i, q, final, until)) {
        continue;
      }
      measured++;
      worst = until - e->t > worst ? until - e->t : worst;
    }
    if (k == NULL || measured == 0) {
      continue;
    }
    if (k->n == k->cap) {
      k->cap = k->cap ? k->cap * 2 : 16;
      k->waits = realloc(k->waits, k->cap * sizeof *k->waits);
    }
    k->waits[k->n++] = worst;
  }
  free(events);
  free(wl.placements);
  wl.placements = NULL;
  wl.nplacements = wl.placements_cap = 0;
  fprintf(json, "\"availability\": [");
  int nprinted = 0;
  for (int i = 0; i < nkinds; i++) {
    struct wl_kind *k = &kinds[i];
    if (k->n == 0) {
      continue;
    }
    qsort(k->waits, k->n, sizeof *k->waits, wl_cmp_i64);
    long long med = k->n > 0 ? k->waits[k->n / 2] : 0, max = k->n > 0 ? k->waits[k->n - 1] : 0;
    size_t over = 0;
    while (over < k->n && k->waits[k->n - 1 - over] > WL_TARGET_MS) {
      over++;
    }
    const char *verdict = over == 0 ? "met" : "NOT met";
    printf("workload: after %-18s n=%-3zu next acknowledgement on every partition: median %lld "
           "ms, worst %lld ms; over %d ms: %zu; target %s\n",
           k->name, k->n, med, max, WL_TARGET_MS, over, verdict);
    fprintf(json, "%s{\"event\": ", nprinted++ ? ", " : "");
    wl_json_str(json, k->name);
    fprintf(json, ", \"n\": %zu, \"median_ms\": %lld, \"worst_ms\": %lld, \"over_target\": %zu, "
                  "\"target_ms\": %d, \"target\": ",
            k->n, med, max, over, WL_TARGET_MS);
    wl_json_str(json, verdict);
    fprintf(json, ", \"waits_ms\": [");
    for (size_t j = 0; j < k->n; j++) {
      fprintf(json, "%s%lld", j ? ", " : "", k->waits[j]);
    }
    fprintf(json, "]}");
    free(k->waits);
  }
  fprintf(json, "],\n");
  for (uint32_t q = 0; q < WL_MAX_PARTS; q++) {
    free(acks[q]);
  }
}

/* One Kafka producer's line of the summary. */
static void wl_report_kafka(const struct wl_producer *p)
{
  long acked = 0, failed = 0, indet = 0, present = 0, implicit = 0;
  for (size_t s = 0; s < p->n; s++) {
    acked += p->ops[s].out == FC_ACK;
    implicit += p->ops[s].out == FC_ACK && p->ops[s].offset < 0;
    failed += p->ops[s].out == FC_FAIL;
    indet += p->ops[s].out == FC_INDETERMINATE;
    present += p->ops[s].out == FC_INDETERMINATE && p->found[s] >= 0;
  }
  printf("workload: kafka producer %d (librdkafka %s, %s): %zu sent, acknowledged %ld "
         "(%ld without an offset, implied by a later batch), refused %ld, in doubt %ld (%ld of "
         "them in the log), stored twice across an epoch "
         "bump %ld, %d errors reported%s%s\n",
         p->id, rd_kafka_version_str(), wl.idem ? "idempotent" : "not idempotent, no retries", p->n,
         acked, implicit, failed, indet, present, p->restamped,
         p->kafka_errors, p->kafka_fatal[0] != '\0' ? ", fatal: " : "", p->kafka_fatal);
}

static int wl_report(void)
{
  long attempted = 0, acked = 0, failed = 0, indet = 0, indet_present = 0;
  size_t nends = 0;
  for (int k = 0; k < wl.nproducers; k++) {
    nends += wl.prod[k].n;
  }
  long long *ends = malloc((nends + 2) * sizeof *ends);
  size_t ne = 0;
  ends[ne++] = 0;
  for (int k = 0; k < wl.nproducers; k++) {
    const struct wl_producer *p = &wl.prod[k];
    for (size_t s = 0; s < p->n; s++) {
      attempted++;
      switch (p->ops[s].out) {
      case FC_ACK:
        acked++;
        ends[ne++] = p->ops[s].end;
        break;
      case FC_FAIL:
        failed++;
        break;
      case FC_INDETERMINATE:
        indet++;
        indet_present += p->found[s] >= 0;
        break;
      }
    }
  }
  ends[ne++] = (long long)wl.seconds * 1000;
  qsort(ends, ne, sizeof *ends, wl_cmp_i64);
  long long reads = 0, fetches = 0, ferrs = 0;
  for (int c = 0; c < wl.nconsumers; c++) {
    reads += (long long)wl.cons[c].n;
    fetches += (long long)wl.cons[c].fetches;
    ferrs += (long long)wl.cons[c].errors;
  }
  char path[1024];
  snprintf(path, sizeof path, "%s/history.json", wl.out_dir);
  FILE *f = fopen(path, "w");
  if (f == NULL) {
    fprintf(stderr, "cairn-fault-workload: %s: %s\n", path, strerror(errno));
    free(ends);
    return -1;
  }
  fprintf(f, "{\"seed\": %" PRIu64 ", \"seconds\": %d, \"idempotent\": %s, \"topic\": ", wl.seed,
          wl.seconds, wl.idem ? "true" : "false");
  wl_json_str(f, wl.topic);
  fprintf(f, ", \"partitions\": %" PRIu32 ", \"producers\": %d, \"consumers\": %d,\n", wl.parts,
          wl.nproducers, wl.nconsumers);
  fprintf(f,
          "\"summary\": {\"attempted\": %ld, \"acknowledged\": %ld, \"failed\": %ld, "
          "\"indeterminate\": %ld, \"indeterminate_present\": %ld, \"consumer_reads\": %lld, "
          "\"violations\": %ld},\n",
          attempted, acked, failed, indet, indet_present, reads, wl.nviol);
  fprintf(f, "\"gaps\": [");
  int ngaps = 0;
  long long max_gap = 0;
  for (size_t j = 1; j < ne; j++) {
    long long g = ends[j] - ends[j - 1];
    max_gap = g > max_gap ? g : max_gap;
    if (g >= WL_GAP_MS) {
      fprintf(f, "%s{\"from_ms\": %lld, \"ms\": %lld}", ngaps++ ? ", " : "", ends[j - 1], g);
    }
  }
  fprintf(f, "],\n");
  wl_report_availability(f);
  fprintf(f, "\"final_log\": [");
  for (uint32_t q = 0; q < wl.parts; q++) {
    fprintf(f,
            "%s{\"partition\": %" PRIu32 ", \"records\": %zu, \"log_start\": %" PRId64
            ", \"high_watermark\": %" PRId64 "}",
            q ? ", " : "", q, wl.log[q].n, wl.log[q].start, wl.log[q].hw);
  }
  fprintf(f, "],\n\"faults\": [");
  FILE *ff = wl.faults_file != NULL ? fopen(wl.faults_file, "r") : NULL;
  char *line = NULL; /* whole lines (wl_read_events) */
  size_t linecap = 0;
  int nfaults = 0;
  while (ff != NULL && getline(&line, &linecap, ff) > 0) {
    line[strcspn(line, "\n")] = '\0';
    fprintf(f, "%s\n  ", nfaults++ ? "," : "");
    wl_json_str(f, line);
  }
  if (ff != NULL) {
    fclose(ff);
  }
  fprintf(f, "],\n\"violations\": [");
  rewind(wl.viol);
  int nv = 0;
  while (getline(&line, &linecap, wl.viol) > 0) {
    line[strcspn(line, "\n")] = '\0';
    fprintf(f, "%s\n  ", nv++ ? "," : "");
    wl_json_str(f, line);
  }
  free(line);
  fprintf(f, "],\n\"ops\": [");
  bool first = true;
  for (int k = 0; k < wl.nproducers; k++) {
    const struct wl_producer *p = &wl.prod[k];
    for (size_t s = 0; s < p->n; s++) {
      const struct wl_op *op = &p->ops[s];
      fprintf(f,
              "%s\n {\"producer\": %d, \"seq\": %" PRId64 ", \"partition\": %" PRIu32
              ", \"start_ms\": %lld, \"end_ms\": %lld, \"result\": \"%s\", \"code\": %d, "
              "\"offset\": %" PRId64 ", \"found_at\": %" PRId64 "}",
              first ? "" : ",", p->id, op->seq, op->partition, op->start, op->end,
              wl_outcome_name(op->out), op->code, op->out == FC_ACK ? op->offset : -1, p->found[s]);
      first = false;
    }
  }
  fprintf(f, "]}\n");
  fclose(f);

  printf("workload: seed %" PRIu64 ", %d s, %d producers (%d of them one per partition), %d "
         "consumers, topic %s with %" PRIu32 " partitions (rf %" PRIu32 ")\n",
         wl.seed, wl.seconds, wl.nproducers, wl.nproducers - wl.nrandom, wl.nconsumers, wl.topic,
         wl.parts, wl.rf);
  printf("workload: producers %s\n",
         wl.idem ? "idempotent (in-doubt batches resent; a duplicate is a violation)"
                 : "plain (a value that may be written is never resent; a duplicate is a "
                   "violation)");
  printf("workload: produces attempted %ld, acknowledged %ld, failed %ld, indeterminate %ld "
         "(%ld of them in the log)\n",
         attempted, acked, failed, indet, indet_present);
  for (int k = wl.nproducers - wl.nkafka; k < wl.nproducers; k++) {
    wl_report_kafka(&wl.prod[k]);
  }
  for (int c = wl.nconsumers - wl.nkafka_groups; c < wl.nconsumers; c++) {
    const struct wl_consumer *cs = &wl.cons[c];
    printf("workload: kafka group consumer %d (group %s): %zu records read, %ld assignments, "
           "commits acknowledged %ld, failed %ld\n",
           cs->id, WL_KAFKA_GROUP, cs->n, cs->assignments, cs->commits_ok, cs->commits_failed);
  }
  printf("workload: consumers read %lld records in %lld fetches (%lld failed)\n", reads, fetches,
         ferrs);
  printf("workload: nemesis events %d; acknowledgement gaps >= %d ms: %d, longest %lld ms\n",
         nfaults, WL_GAP_MS, ngaps, max_gap);
  int dacked = 0, dindet = 0, dfailed = 0;
  uint64_t skipped = 0;
  for (uint32_t q = 0; q < wl.parts; q++) {
    dacked += wl.deletes[q].acked;
    dindet += wl.deletes[q].indeterminate;
    dfailed += wl.deletes[q].failed;
  }
  for (int c = 0; c < wl.nconsumers; c++) {
    skipped += wl.cons[c].skipped;
  }
  if (dacked + dindet + dfailed > 0) {
    printf("workload: DeleteRecords acknowledged %d, in doubt %d, refused %d; acknowledged values "
           "deleted %ld; consumer reads below the final log start %ld, offsets skipped %" PRIu64
           "\n",
           dacked, dindet, dfailed, wl.acked_deleted, wl.reads_deleted, skipped);
  }
  printf("workload: violations %ld; history in %s\n", wl.nviol, path);
  free(ends);
  return 0;
}

/* Writes OUT/final-p<q>.<suffix> holding v and a newline. */
static int wl_write_number(uint32_t q, const char *suffix, int64_t v)
{
  char path[1024];
  snprintf(path, sizeof path, "%s/final-p%" PRIu32 ".%s", wl.out_dir, q, suffix);
  FILE *f = fopen(path, "w");
  if (f == NULL) {
    return -1;
  }
  fprintf(f, "%" PRId64 "\n", v);
  return fclose(f) == 0 ? 0 : -1;
}

static int wl_write_final(void)
{
  for (uint32_t q = 0; q < wl.parts; q++) {
    char path[1024];
    snprintf(path, sizeof path, "%s/final-p%" PRIu32 ".txt", wl.out_dir, q);
    FILE *f = fopen(path, "w");
    if (f == NULL) {
      return -1;
    }
    for (size_t j = 0; j < wl.log[q].n; j++) {
      fprintf(f, "%" PRId64 " %s\n", wl.log[q].start + (int64_t)j, wl.log[q].v[j]);
    }
    fclose(f);
    /* For run.sh's replica comparison: the log start, and the highest
     * DeleteRecords target that may have been applied (its retention
     * bound, retention_bound.sh). */
    if (wl_write_number(q, "start", wl.log[q].start) != 0 ||
        wl_write_number(q, "ceiling", wl.deletes[q].ceiling) != 0) {
      return -1;
    }
  }
  return 0;
}

static void wl_usage(void)
{
  fprintf(stderr, "usage: cairn-fault-workload --nodes ID@HOST:PORT,... --out DIR [--topic T]\n"
                  "  [--partitions N] [--rf N] [--producers N] [--consumers N] [--time SECONDS]\n"
                  "  [--rate OPS_PER_S_PER_PRODUCER] [--seed N] [--ready-file F] [--faults F]\n"
                  "  [--idempotent auto|on|off]   (auto: when the nodes offer InitProducerId)\n"
                  "  [--retention-bytes N]        (the topic's; segments of N/4 bytes)\n"
                  "  [--kafka HOST:PORT,...]      (the nodes' Kafka ports: Kafka producers too)\n"
                  "  [--kafka-producers N]        (with --kafka; 1 by default)\n"
                  "  [--kafka-timeout-ms MS]      (their message.timeout.ms; 8000)\n"
                  "  [--claim-commit OFFSET]      (selfcheck.sh: counts a commit of partition 0\n"
                  "                               at OFFSET as acknowledged, which never was)\n");
}

int main(int argc, char **argv)
{
  static const struct option opts[] = {{"nodes", required_argument, 0, 'n'},
                                       {"topic", required_argument, 0, 't'},
                                       {"partitions", required_argument, 0, 'p'},
                                       {"rf", required_argument, 0, 'r'},
                                       {"producers", required_argument, 0, 'P'},
                                       {"consumers", required_argument, 0, 'C'},
                                       {"time", required_argument, 0, 'T'},
                                       {"rate", required_argument, 0, 'R'},
                                       {"seed", required_argument, 0, 's'},
                                       {"ready-file", required_argument, 0, 'y'},
                                       {"faults", required_argument, 0, 'f'},
                                       {"out", required_argument, 0, 'o'},
                                       {"idempotent", required_argument, 0, 'i'},
                                       {"retention-bytes", required_argument, 0, 'B'},
                                       {"kafka", required_argument, 0, 'k'},
                                       {"kafka-producers", required_argument, 0, 'K'},
                                       {"kafka-timeout-ms", required_argument, 0, 'm'},
                                       {"claim-commit", required_argument, 0, 'c'},
                                       {0, 0, 0, 0}};
  wl.topic = "fault";
  wl.parts = 4;
  wl.rf = 3;
  wl.nproducers = 4;
  wl.nconsumers = 2;
  wl.seconds = 60;
  wl.rate = 20;
  wl.seed = 1;
  wl.idem_mode = "auto";
  wl.nkafka = -1;
  wl.kafka_timeout_ms = WL_KAFKA_TIMEOUT_MS;
  wl.claimed_commit = -1;
  const char *nodes = NULL;
  int c;
  while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
    switch (c) {
    case 'n':
      nodes = optarg;
      break;
    case 't':
      wl.topic = optarg;
      break;
    case 'p':
      wl.parts = (uint32_t)atoi(optarg);
      break;
    case 'r':
      wl.rf = (uint32_t)atoi(optarg);
      break;
    case 'P':
      wl.nproducers = atoi(optarg);
      break;
    case 'C':
      wl.nconsumers = atoi(optarg);
      break;
    case 'T':
      wl.seconds = atoi(optarg);
      break;
    case 'R':
      wl.rate = atof(optarg);
      break;
    case 's':
      wl.seed = strtoull(optarg, NULL, 10);
      break;
    case 'y':
      wl.ready_file = optarg;
      break;
    case 'f':
      wl.faults_file = optarg;
      break;
    case 'o':
      wl.out_dir = optarg;
      break;
    case 'i':
      if (strcmp(optarg, "auto") != 0 && strcmp(optarg, "on") != 0 && strcmp(optarg, "off") != 0) {
        fprintf(stderr, "cairn-fault-workload: --idempotent '%s' is not auto, on or off\n", optarg);
        return 2;
      }
      wl.idem_mode = optarg;
      break;
    case 'B':
      wl.retention_bytes = strtoll(optarg, NULL, 10);
      break;
    case 'k':
      wl.kafka_bootstrap = optarg;
      break;
    case 'K':
      wl.nkafka = atoi(optarg);
      break;
    case 'm':
      wl.kafka_timeout_ms = atoi(optarg);
      break;
    case 'c':
      wl.claimed_commit = strtoll(optarg, NULL, 10);
      break;
    default:
      wl_usage();
      return 2;
    }
  }
  if (nodes == NULL || wl.out_dir == NULL || fc_nodes_parse(&wl.ns, nodes) != 0 || wl.parts < 1 ||
      wl.parts > WL_MAX_PARTS || wl.nproducers < 1 || wl.nproducers > WL_MAX_THREADS ||
      wl.nconsumers < 0 || wl.nconsumers > WL_MAX_THREADS) {
    wl_usage();
    return 2;
  }
  /* One more producer pinned to each partition: a producer writing to a
   * random partition per operation waits, one operation at a time, on a
   * partition a fault left without a majority, and with all of them
   * waiting so, the partitions that have one would get no write and look
   * unavailable (wl_report_availability). */
  wl.nrandom = wl.nproducers;
  if (wl.nproducers + (int)wl.parts <= WL_MAX_THREADS) {
    wl.nproducers += (int)wl.parts;
  }
  /* The Kafka producers come last (their ids follow the native ones'). */
  if (wl.nkafka < 0) {
    wl.nkafka = wl.kafka_bootstrap != NULL ? 1 : 0;
  }
  if (wl.nkafka > 0 && (wl.kafka_bootstrap == NULL || wl.nproducers + wl.nkafka > WL_MAX_THREADS)) {
    wl_usage();
    return 2;
  }
  wl.nproducers += wl.nkafka;
  wl.nkafka_groups = wl.nkafka > 0 && wl.nconsumers < WL_MAX_THREADS ? 1 : 0;
  wl.nconsumers += wl.nkafka_groups;
  setvbuf(stdout, NULL, _IOLBF, 0);
  wl.viol = tmpfile();
  if (wl.viol == NULL || (mkdir(wl.out_dir, 0755) != 0 && errno != EEXIST)) {
    fprintf(stderr, "cairn-fault-workload: cannot set up %s\n", wl.out_dir);
    return 2;
  }
  /* Retention by size, with segments small enough that it deletes some
   * during the run (a replica deletes whole segments, on its own). */
  Cairn__Client__TopicConfig cfg = CAIRN__CLIENT__TOPIC_CONFIG__INIT;
  cfg.retention_bytes = wl.retention_bytes;
  cfg.segment_bytes = (uint64_t)(wl.retention_bytes / 4);
  int code = fc_create_topic(&wl.ns, wl.topic, wl.parts, wl.rf,
                             wl.retention_bytes > 0 ? &cfg : NULL, 120000);
  if (code != 0) {
    fprintf(stderr, "cairn-fault-workload: CreateTopic %s failed (code %d); seed %" PRIu64 "\n",
            wl.topic, code, wl.seed);
    return 2;
  }
  wl.idem = strcmp(wl.idem_mode, "off") != 0;
  for (int k = 0; k < wl.nproducers - wl.nkafka && wl.idem; k++) {
    int rc = fc_init_producer(&wl.ns, 60000, &wl.prod[k].pid, &wl.prod[k].epoch);
    if (rc != 0 && strcmp(wl.idem_mode, "on") == 0) {
      fprintf(stderr, "cairn-fault-workload: InitProducerId failed (code %d)\n", rc);
      return 2;
    }
    wl.idem = rc == 0;
  }
  for (uint32_t q = 0; q < wl.parts; q++) {
    if (wl_sentinel(q, 60000) != 0) {
      fprintf(stderr, "cairn-fault-workload: partition %" PRIu32 " never took a write\n", q);
      return 2;
    }
  }
  /* The nemesis stamps its events in ms from this moment (run.sh reads it
   * from this line): the wall clock's, read together with the monotonic
   * clock the operations are timed by. */
  struct timespec real;
  clock_gettime(CLOCK_REALTIME, &real);
  wl.t0 = fc_now_ms();
  printf("workload: topic %s ready; running %d s from %lld ms since the epoch\n", wl.topic,
         wl.seconds, (long long)real.tv_sec * 1000 + real.tv_nsec / 1000000);
  fflush(stdout);
  uint64_t rng = wl.seed;
  for (int k = 0; k < wl.nproducers; k++) {
    wl.prod[k].id = k;
    wl.prod[k].rng = wl_rand(&rng);
    wl.prod[k].silent = -1;
    wl.prod[k].kafka = k >= wl.nproducers - wl.nkafka;
    wl.prod[k].pinned = k < wl.nrandom || wl.prod[k].kafka ? -1 : k - wl.nrandom;
    for (int q = 0; q < WL_MAX_PARTS; q++) {
      wl.prod[k].leader[q] = -1;
    }
    pthread_create(&wl.prod[k].th, NULL, wl.prod[k].kafka ? wl_kafka_main : wl_producer_main,
                   &wl.prod[k]);
  }
  for (int k = 0; k < wl.nconsumers; k++) {
    wl.cons[k].id = k;
    wl.cons[k].rng = wl_rand(&rng);
    wl.cons[k].kafka = k >= wl.nconsumers - wl.nkafka_groups;
    for (int q = 0; q < WL_MAX_PARTS; q++) {
      wl.cons[k].leader[q] = -1;
      wl.cons[k].acked_commit[q] = -1;
    }
    pthread_create(&wl.cons[k].th, NULL, wl.cons[k].kafka ? wl_kafka_group_main : wl_consumer_main,
                   &wl.cons[k]);
  }
  long long next_sample = 0;
  while (wl_now() < (long long)wl.seconds * 1000) {
    if (wl_now() >= next_sample) {
      wl_placement_sample();
      next_sample = wl_now() + 1000;
    }
    wl_sleep_ms(200);
  }
  atomic_store(&wl.stop, true);
  for (int k = 0; k < wl.nproducers; k++) {
    pthread_join(wl.prod[k].th, NULL);
  }
  for (int k = 0; k < wl.nconsumers; k++) {
    pthread_join(wl.cons[k].th, NULL);
  }
  printf("workload: run over at %lld ms; waiting for the cluster to be healed\n", wl_now());
  long long wait_end = fc_now_ms() + 600000;
  while (wl.ready_file != NULL && access(wl.ready_file, F_OK) != 0 && fc_now_ms() < wait_end) {
    wl_sleep_ms(200);
  }
  int rv = 0;
  for (uint32_t q = 0; q < wl.parts; q++) {
    if (wl_sentinel(q, 120000) != 0 || wl_read_back(q, 120000) != 0) {
      wl_violation("partition %" PRIu32 " unavailable after healing (no write or full read in "
                   "120 s)",
                   q);
      rv = 1;
    }
  }
  wl_read_deletes();
  if (rv == 0) {
    wl_check();
    wl_check_kafka_commits();
  } else {
    for (int k = 0; k < wl.nproducers; k++) {
      wl.prod[k].found = calloc(wl.prod[k].n + 1, sizeof *wl.prod[k].found);
    }
  }
  if (wl_write_final() != 0 || wl_report() != 0) {
    return 2;
  }
  if (wl.nviol > 0) {
    printf("workload: FAILED with %ld violation(s); reproduce with seed %" PRIu64 "\n", wl.nviol,
           wl.seed);
    return 1;
  }
  return 0;
}
