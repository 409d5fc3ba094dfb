/* cairn_bench.c - cairn-bench: produce and consume load against a Cairn
 * cluster through libcairn's asynchronous API, in the spirit of
 * kafka-producer-perf-test and `nats bench`.
 *
 *   cairn-bench --bootstrap HOST:PORT[,...] --topic T [options]
 *
 * Each producer and each consumer is a thread with its own loop and its
 * own client (its own connections), so the client side uses every core.
 * A message's value starts with its send time (CLOCK_MONOTONIC, ns, 8
 * bytes little-endian) when it is at least 8 bytes long: producers record
 * the acknowledgement latency (send call -> delivery callback), consumers
 * the end-to-end latency (send call -> records callback).
 *
 * Modes, chosen by the counts:
 *   --producers N (>0), --consumers 0       produce only;
 *   --producers N, --consumers M, --from latest   produce while M consumers
 *                                           tail the topic: end-to-end latency;
 *   --producers 0, --consumers M            read back: every partition from
 *                                           --from (earliest) to the high
 *                                           watermark seen at the start.
 *
 * A progress line goes to stderr every second; the summary to stdout, as
 * text or with --json as one JSON object. Exit status 0 when every message
 * was delivered (and, when consuming, read), 1 otherwise, 2 on usage. */
#include "hist.h"

#include <cairn/cairn.h>

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define BENCH_MAX_WORKERS 256
#define BENCH_SEND_CHUNK 512    /* messages sent per loop turn flat out */
#define BENCH_RATE_TICK_MS 1    /* the paced sender's timer period */
#define BENCH_DRAIN_IDLE_MS 10000 /* consumers give up after this long without records */

struct bench_opts {
  const char *bootstrap;
  const char *topic;
  uint32_t partitions;
  uint32_t rf;
  int producers;
  int consumers;
  size_t size;
  uint32_t batch_bytes;
  uint32_t linger_ms;
  uint32_t max_in_flight;
  uint64_t buffer_bytes;
  const char *acks;
  double rate;     /* messages/s over all producers; 0 = flat out */
  uint64_t count;  /* messages over all producers; 0 = use duration */
  double duration; /* seconds */
  bool from_earliest;
  bool json;
  bool quiet;
  bool idempotence;
  enum cairn_compression compression; /* of produced batches */
  uint32_t backoff_max_ms; /* 0: the library's default */
  bool round_robin;        /* message i to partition i % P, not the sticky partitioner */
  bool fetch_pipeline;     /* consumers send the next fetch before an answer's payload */
  bool tls;                /* connections speak TLS (implied by tls_ca) */
  const char *tls_ca;      /* CA file the nodes' certificates chain to, or NULL */
  const char *tls_cert;    /* client certificate for mutual TLS, or NULL */
  const char *tls_key;
  const char *user;        /* SCRAM-SHA-256 login, or NULL */
  const char *password;
};

/* Totals shared by the threads, read by the progress line. */
struct bench_shared {
  atomic_uint_fast64_t sent;
  atomic_uint_fast64_t acked;
  atomic_uint_fast64_t failed;
  atomic_uint_fast64_t consumed;
  atomic_uint_fast64_t consumed_bytes;
  atomic_int producers_done;
  atomic_bool stop; /* set by main at the deadline or on a fatal error */
};

struct bench_worker {
  int index;
  bool producer;
  const struct bench_opts *o;
  struct bench_shared *sh;
  pthread_t thread;
  bool joined;
  uv_loop_t loop;
  struct cairn_client *client;
  /* producer */
  struct cairn_producer *prod;
  uv_idle_t idle;
  uv_timer_t timer;
  uint64_t quota;      /* messages to send (count mode), UINT64_MAX otherwise */
  uint64_t sent;
  uint64_t acked;
  uint64_t failed;
  uint64_t t_start_ns;
  uint64_t t_last_ack_ns;
  uint64_t *part_last_ack_ns; /* per partition: the last acknowledgement */
  uint64_t max_gap_ns;        /* longest silence of a partition between acks */
  int32_t max_gap_partition;
  bool sending_done;
  bool flushing;
  uint8_t *value;
  int first_error;
  /* consumer */
  struct cairn_consumer *cons;
  int32_t *parts;
  int64_t *end; /* per assigned partition: read-back stops here */
  size_t nparts;
  size_t parts_done;
  uint64_t consumed;
  uint64_t consumed_bytes;
  uint64_t t_first_rec_ns;
  uint64_t t_last_rec_ns;
  uv_timer_t check;
  bool closing;
  struct hist lat; /* ack latency (producer) or end-to-end (consumer) */
};

static _Thread_local struct bench_worker *bench_tl_worker; /* the producer of this thread */
static int64_t *bench_start_offsets; /* per partition: where consumers start */
static int64_t *bench_end_offsets;   /* per partition: read-back end */

static uint64_t bench_now_ns(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void bench_put_u64(uint8_t *p, uint64_t v)
{
  for (int i = 0; i < 8; i++) {
    p[i] = (uint8_t)(v >> (8 * i));
  }
}

static uint64_t bench_get_u64(const uint8_t *p)
{
  uint64_t v = 0;
  for (int i = 0; i < 8; i++) {
    v |= (uint64_t)p[i] << (8 * i);
  }
  return v;
}

/* ---- producer ---- */

static void bench_producer_closed(struct cairn_producer *p, int status, void *data)
{
  (void)p;
  (void)status;
  struct bench_worker *w = data;
  uv_close((uv_handle_t *)&w->idle, NULL);
  uv_close((uv_handle_t *)&w->timer, NULL);
  if (cairn_client_close(w->client, NULL, NULL) != 0) {
    fprintf(stderr, "producer %d: client close refused\n", w->index);
  }
}

static void bench_producer_flushed(struct cairn_producer *p, int status, void *data)
{
  struct bench_worker *w = data;
  if (status != 0 && w->first_error == 0) {
    w->first_error = status;
  }
  atomic_fetch_add(&w->sh->producers_done, 1);
  cairn_producer_close(p, bench_producer_closed, w);
}

/* Called when no more messages will be sent: flush, then close. */
static void bench_producer_finish(struct bench_worker *w)
{
  if (w->flushing) {
    return;
  }
  w->flushing = true;
  w->sending_done = true;
  uv_idle_stop(&w->idle);
  uv_timer_stop(&w->timer);
  int rv = cairn_producer_flush(w->prod, bench_producer_flushed, w);
  if (rv != 0) {
    fprintf(stderr, "producer %d: flush: %s\n", w->index, cairn_strerror(rv));
    w->first_error = rv;
    atomic_fetch_add(&w->sh->producers_done, 1);
    cairn_producer_close(w->prod, bench_producer_closed, w);
  }
}

static void bench_on_idle(uv_idle_t *idle);

/* Flat out and stalled on a full buffer: a delivery made room, resume. */
static void bench_on_delivery_resume(struct bench_worker *w)
{
  if (!w->sending_done && w->o->rate == 0 && !uv_is_active((uv_handle_t *)&w->idle)) {
    uv_idle_start(&w->idle, bench_on_idle);
  }
}

static void bench_on_delivery(struct cairn_producer *p, int status, const struct cairn_delivery *d,
                              void *data)
{
  (void)p;
  struct bench_worker *w = bench_tl_worker;
  uint64_t now = bench_now_ns();
  if (status == 0) {
    w->acked++;
    atomic_fetch_add_explicit(&w->sh->acked, 1, memory_order_relaxed);
    /* data is not a pointer: it carries the send time in ns (below). */
    hist_record(&w->lat, now - (uint64_t)(uintptr_t)data);
    w->t_last_ack_ns = now;
    /* The longest time a partition went without an acknowledgement while
     * this producer kept sending to it: a leader change shows here. */
    if (d->partition >= 0 && (uint32_t)d->partition < w->o->partitions) {
      uint64_t *last = &w->part_last_ack_ns[d->partition];
      if (*last != 0 && now - *last > w->max_gap_ns) {
        w->max_gap_ns = now - *last;
        w->max_gap_partition = d->partition;
      }
      *last = now;
    }
  } else if (status != UV_ECANCELED) {
    w->failed++;
    atomic_fetch_add_explicit(&w->sh->failed, 1, memory_order_relaxed);
    if (w->first_error == 0) {
      w->first_error = status;
      fprintf(stderr, "producer %d: delivery failed: %s\n", w->index, cairn_strerror(status));
    }
  }
  bench_on_delivery_resume(w);
}

/* Sends one message; returns 0, CAIRN_EQUEUE_FULL, or another error. */
static int bench_send_one(struct bench_worker *w)
{
  struct cairn_message m;
  cairn_message_init(&m);
  m.topic = w->o->topic;
  if (w->o->round_robin) {
    m.partition = (int32_t)(w->sent % w->o->partitions);
  }
  m.value = w->value;
  m.value_len = w->o->size;
  uint64_t now = bench_now_ns();
  if (w->o->size >= 8) {
    bench_put_u64(w->value, now);
  }
  /* The delivery callback's data carries the send time itself (uintptr_t
   * is 64 bits on the platforms this runs on), so nothing is allocated per
   * message. */
  int rv = cairn_producer_send(w->prod, &m, bench_on_delivery, (void *)(uintptr_t)now);
  if (rv == 0) {
    w->sent++;
    atomic_fetch_add_explicit(&w->sh->sent, 1, memory_order_relaxed);
  }
  return rv;
}

static bool bench_should_stop(struct bench_worker *w)
{
  return w->sent >= w->quota || atomic_load_explicit(&w->sh->stop, memory_order_relaxed);
}

/* Flat out: a chunk of messages per loop turn until the buffer is full. */
static void bench_on_idle(uv_idle_t *idle)
{
  struct bench_worker *w = idle->data;
  for (int i = 0; i < BENCH_SEND_CHUNK; i++) {
    if (bench_should_stop(w)) {
      bench_producer_finish(w);
      return;
    }
    int rv = bench_send_one(w);
    if (rv == CAIRN_EQUEUE_FULL) {
      uv_idle_stop(idle); /* a delivery restarts it */
      return;
    }
    if (rv != 0) {
      fprintf(stderr, "producer %d: send: %s\n", w->index, cairn_strerror(rv));
      w->first_error = rv;
      bench_producer_finish(w);
      return;
    }
  }
}

/* Paced: every tick, send what the schedule owes by now. */
static void bench_on_tick(uv_timer_t *t)
{
  struct bench_worker *w = t->data;
  double per_ns = w->o->rate / w->o->producers / 1e9;
  uint64_t due = (uint64_t)((double)(bench_now_ns() - w->t_start_ns) * per_ns) + 1;
  while (w->sent < due) {
    if (bench_should_stop(w)) {
      bench_producer_finish(w);
      return;
    }
    int rv = bench_send_one(w);
    if (rv == CAIRN_EQUEUE_FULL) {
      return; /* behind schedule: catch up on the next tick */
    }
    if (rv != 0) {
      fprintf(stderr, "producer %d: send: %s\n", w->index, cairn_strerror(rv));
      w->first_error = rv;
      bench_producer_finish(w);
      return;
    }
  }
  if (bench_should_stop(w)) {
    bench_producer_finish(w);
  }
}

/* Flat-out producers also watch the stop flag while stalled. */
static void bench_on_stop_check(uv_timer_t *t)
{
  struct bench_worker *w = t->data;
  if (bench_should_stop(w)) {
    bench_producer_finish(w);
  }
}


static int bench_producer_setup(struct bench_worker *w)
{
  const struct bench_opts *o = w->o;
  struct cairn_producer_options po;
  cairn_producer_options_init(&po);
  po.batch_bytes = o->batch_bytes;
  po.linger_ms = o->linger_ms;
  if (o->max_in_flight > 0) {
    po.max_in_flight = o->max_in_flight;
  }
  if (o->buffer_bytes > 0) {
    po.buffer_bytes = o->buffer_bytes;
  }
  if (po.max_batch_bytes < po.batch_bytes) {
    po.max_batch_bytes = po.batch_bytes;
  }
  po.idempotence = o->idempotence;
  po.compression = o->compression;
  int rv = cairn_producer_new(w->client, &po, &w->prod);
  if (rv != 0) {
    return rv;
  }
  w->value = calloc(1, o->size > 0 ? o->size : 1);
  w->part_last_ack_ns = calloc(o->partitions, sizeof *w->part_last_ack_ns);
  if (w->value == NULL || w->part_last_ack_ns == NULL) {
    return CAIRN_ENOMEM;
  }
  for (size_t i = 8; i < o->size; i++) {
    w->value[i] = (uint8_t)('a' + i % 26);
  }
  uv_idle_init(&w->loop, &w->idle);
  w->idle.data = w;
  uv_timer_init(&w->loop, &w->timer);
  w->timer.data = w;
  w->t_start_ns = bench_now_ns();
  if (o->rate > 0) {
    uv_timer_start(&w->timer, bench_on_tick, 0, BENCH_RATE_TICK_MS);
  } else {
    uv_idle_start(&w->idle, bench_on_idle);
    uv_timer_start(&w->timer, bench_on_stop_check, 10, 10);
  }
  return 0;
}

/* ---- consumer ---- */

static void bench_consumer_closed(struct cairn_consumer *cons, void *data)
{
  (void)cons;
  struct bench_worker *w = data;
  if (cairn_client_close(w->client, NULL, NULL) != 0) {
    fprintf(stderr, "consumer %d: client close refused\n", w->index);
  }
}

static void bench_consumer_finish(struct bench_worker *w)
{
  if (w->closing) {
    return;
  }
  w->closing = true;
  cairn_consumer_stop(w->cons);
  uv_close((uv_handle_t *)&w->check, NULL);
  cairn_consumer_close(w->cons, bench_consumer_closed, w);
}

static bool bench_consumer_complete(const struct bench_worker *w)
{
  if (w->o->producers == 0) {
    return w->parts_done == w->nparts;
  }
  /* Tailing: done once every producer finished and everything acked (over
   * all producers) has been read by the consumers together. */
  const struct bench_shared *sh = w->sh;
  return atomic_load(&sh->producers_done) == w->o->producers &&
         atomic_load(&sh->consumed) >= atomic_load(&sh->acked);
}

static void bench_on_records(struct cairn_consumer *cons, int status, const char *topic,
                             int32_t partition, const struct cairn_record *records, size_t count,
                             void *data)
{
  (void)cons;
  (void)topic;
  struct bench_worker *w = data;
  if (status != 0) {
    fprintf(stderr, "consumer %d: partition %" PRId32 ": %s\n", w->index, partition,
            cairn_strerror(status));
    if (w->first_error == 0) {
      w->first_error = status;
    }
    return;
  }
  uint64_t now = bench_now_ns();
  if (w->consumed == 0) {
    w->t_first_rec_ns = now;
  }
  w->t_last_rec_ns = now;
  uint64_t bytes = 0;
  for (size_t i = 0; i < count; i++) {
    const struct cairn_record *r = &records[i];
    bytes += r->value_len;
    if (w->o->producers > 0 && r->value_len >= 8 && r->value != NULL) {
      hist_record(&w->lat, now - bench_get_u64(r->value));
    }
  }
  w->consumed += count;
  w->consumed_bytes += bytes;
  atomic_fetch_add_explicit(&w->sh->consumed, count, memory_order_relaxed);
  atomic_fetch_add_explicit(&w->sh->consumed_bytes, bytes, memory_order_relaxed);
  if (w->o->producers == 0) {
    int64_t next = records[count - 1].offset + 1;
    for (size_t k = 0; k < w->nparts; k++) {
      if (w->parts[k] == partition && w->end[k] >= 0 && next >= w->end[k]) {
        w->end[k] = -1; /* done */
        w->parts_done++;
      }
    }
  }
}

/* Periodic: stop when complete, at the global stop, or when idle too long. */
static void bench_on_consumer_check(uv_timer_t *t)
{
  struct bench_worker *w = t->data;
  uint64_t now = bench_now_ns();
  uint64_t last = w->t_last_rec_ns != 0 ? w->t_last_rec_ns : w->t_start_ns;
  bool producers_done = atomic_load(&w->sh->producers_done) == w->o->producers;
  bool idle = producers_done && now - last > (uint64_t)BENCH_DRAIN_IDLE_MS * 1000000u;
  if (bench_consumer_complete(w) || idle ||
      (w->o->producers == 0 && atomic_load(&w->sh->stop))) {
    if (idle && !bench_consumer_complete(w)) {
      fprintf(stderr, "consumer %d: nothing new for %d ms; stopping\n", w->index,
              BENCH_DRAIN_IDLE_MS);
    }
    bench_consumer_finish(w);
  }
}

static int bench_consumer_setup(struct bench_worker *w)
{
  const struct bench_opts *o = w->o;
  struct cairn_consumer_options co;
  cairn_consumer_options_init(&co);
  co.fetch_max_wait_ms = 100;
  co.fetch_pipeline = o->fetch_pipeline ? 1 : 0;
  int rv = cairn_consumer_new(w->client, &co, &w->cons);
  if (rv != 0) {
    return rv;
  }
  w->parts = calloc(o->partitions, sizeof *w->parts);
  w->end = calloc(o->partitions, sizeof *w->end);
  if (w->parts == NULL || w->end == NULL) {
    return CAIRN_ENOMEM;
  }
  for (uint32_t p = (uint32_t)w->index; p < o->partitions; p += (uint32_t)o->consumers) {
    w->parts[w->nparts] = (int32_t)p;
    w->end[w->nparts] = bench_end_offsets[p];
    if (o->producers == 0 && bench_end_offsets[p] <= bench_start_offsets[p]) {
      w->end[w->nparts] = -1; /* nothing to read */
      w->parts_done++;
    }
    w->nparts++;
    rv = cairn_consumer_assign(w->cons, o->topic, (int32_t)p, bench_start_offsets[p]);
    if (rv != 0) {
      return rv;
    }
  }
  w->t_start_ns = bench_now_ns();
  rv = cairn_consumer_start(w->cons, bench_on_records, w);
  if (rv != 0) {
    return rv;
  }
  uv_timer_init(&w->loop, &w->check);
  w->check.data = w;
  uv_timer_start(&w->check, bench_on_consumer_check, 20, 20);
  return 0;
}

/* ---- threads ---- */

static void bench_worker_fail(struct bench_worker *w, int rv)
{
  fprintf(stderr, "%s %d: setup: %s\n", w->producer ? "producer" : "consumer", w->index,
          cairn_strerror(rv));
  w->first_error = rv;
  atomic_store(&w->sh->stop, true);
  if (w->producer) {
    atomic_fetch_add(&w->sh->producers_done, 1);
  }
  /* Whatever was made is torn down: producer or consumer first (their
   * close completes on the loop), then the client. */
  if (w->prod != NULL) {
    cairn_producer_close(w->prod, NULL, NULL);
  }
  if (w->cons != NULL) {
    cairn_consumer_close(w->cons, NULL, NULL);
  }
  if (w->client != NULL) {
    for (int i = 0; i < 1000 && cairn_client_close(w->client, NULL, NULL) == UV_EBUSY; i++) {
      uv_run(&w->loop, UV_RUN_NOWAIT);
    }
  }
}

/* The client reached the cluster (metadata known): start the load. */
static void bench_on_ready(struct cairn_client *c, int status, const char *errmsg, void *data)
{
  (void)c;
  struct bench_worker *w = data;
  if (status != 0) {
    fprintf(stderr, "%s %d: %s\n", w->producer ? "producer" : "consumer", w->index, errmsg);
  }
  int rv = status != 0 ? status : w->producer ? bench_producer_setup(w) : bench_consumer_setup(w);
  if (rv != 0) {
    bench_worker_fail(w, rv);
  }
}

/* The connection settings every client of the run shares: TLS and login. */
static void bench_client_options(const struct bench_opts *o, struct cairn_options *co)
{
  co->tls = o->tls ? 1 : 0;
  co->tls_ca_file = o->tls_ca;
  co->tls_cert_file = o->tls_cert;
  co->tls_key_file = o->tls_key;
  co->user = o->user;
  co->password = o->password;
}

static void *bench_worker_main(void *arg)
{
  struct bench_worker *w = arg;
  bench_tl_worker = w;
  hist_init(&w->lat);
  struct cairn_options co;
  cairn_options_init(&co);
  bench_client_options(w->o, &co);
  co.client_id = w->producer ? "cairn-bench-producer" : "cairn-bench-consumer";
  if (w->o->backoff_max_ms > 0) {
    co.retry_backoff_max_ms = w->o->backoff_max_ms;
    if (co.retry_backoff_ms > co.retry_backoff_max_ms) {
      co.retry_backoff_ms = co.retry_backoff_max_ms;
    }
  }
  int rv = uv_loop_init(&w->loop);
  if (rv == 0) {
    rv = cairn_client_new(&w->loop, w->o->bootstrap, &co, &w->client);
  }
  if (rv == 0) {
    rv = cairn_client_ready(w->client, bench_on_ready, w);
  }
  if (rv != 0) {
    bench_worker_fail(w, rv);
  }
  uv_run(&w->loop, UV_RUN_DEFAULT);
  if (uv_loop_close(&w->loop) != 0) {
    fprintf(stderr, "%s %d: loop has open handles at exit\n",
            w->producer ? "producer" : "consumer", w->index);
  }
  return NULL;
}

/* ---- setup through the blocking API ---- */

static int bench_prepare_topic(const struct bench_opts *o)
{
  struct cairn_options co;
  cairn_options_init(&co);
  bench_client_options(o, &co);
  co.client_id = "cairn-bench-admin";
  co.request_timeout_ms = 20000;
  struct cairn_sync *s;
  char err[512];
  int rv = cairn_sync_new(o->bootstrap, &co, &s, err, sizeof err);
  if (rv != 0) {
    fprintf(stderr, "cairn-bench: cannot reach %s: %s\n", o->bootstrap, err);
    return rv;
  }
  if (o->producers > 0) {
    /* A node just started answers before its cluster is bootstrapped or
     * its controller elected: retry for a while. */
    uint64_t deadline = bench_now_ns() + 30000000000u;
    for (;;) {
      rv = cairn_sync_create_topic(s, o->topic, o->partitions, o->rf, NULL);
      if (rv == 0 || rv == CAIRN_ETOPIC_EXISTS || bench_now_ns() > deadline) {
        break;
      }
      usleep(200000);
    }
    if (rv != 0 && rv != CAIRN_ETOPIC_EXISTS) {
      fprintf(stderr, "cairn-bench: create topic %s: %s (%s)\n", o->topic, cairn_strerror(rv),
              cairn_sync_errmsg(s));
      cairn_sync_free(s);
      return rv;
    }
  }
  /* Wait until every partition has a leader and answers ListOffsets; take
   * the start (and read-back end) offsets there. */
  for (uint32_t p = 0; p < o->partitions; p++) {
    uint64_t deadline = bench_now_ns() + 30000000000u;
    int64_t hw = -1, start = -1;
    for (;;) {
      rv = cairn_sync_list_offsets(s, o->topic, (int32_t)p, CAIRN_OFFSET_SPEC_LATEST, 0, &hw,
                                   NULL);
      if (rv == 0) {
        rv = cairn_sync_list_offsets(s, o->topic, (int32_t)p, CAIRN_OFFSET_SPEC_EARLIEST, 0,
                                     &start, NULL);
      }
      if (rv == 0 || bench_now_ns() > deadline) {
        break;
      }
      usleep(100000);
    }
    if (rv != 0) {
      fprintf(stderr, "cairn-bench: partition %" PRIu32 ": %s (%s)\n", p, cairn_strerror(rv),
              cairn_sync_errmsg(s));
      cairn_sync_free(s);
      return rv;
    }
    bench_end_offsets[p] = hw;
    bench_start_offsets[p] = o->from_earliest ? start : hw;
  }
  cairn_sync_free(s);
  return 0;
}

/* ---- output ---- */

static void bench_usage(FILE *f)
{
  fprintf(f,
          "usage: cairn-bench --bootstrap HOST:PORT[,...] --topic T [options]\n"
          "  --partitions P      topic partitions (created if missing). 1\n"
          "  --rf R              replication factor when creating. 1\n"
          "  --producers N       producer threads. 1\n"
          "  --consumers M       consumer threads. 0\n"
          "  --size B            message value bytes (>= 8 carries a timestamp). 100\n"
          "  --batch-bytes B     producer batch size. 65536\n"
          "  --linger-ms MS      producer linger. 5\n"
          "  --max-in-flight K   batches in flight per partition. 5\n"
          "  --buffer-bytes B    producer memory for undelivered messages. 33554432\n"
          "  --acks all          acknowledgement after commit on a majority (the only mode)\n"
          "  --no-idempotence    plain at-least-once producer\n"
          "  --compression none|lz4|zstd  codec of produced batches. none\n"
          "  --round-robin       message i goes to partition i %% P (every partition\n"
          "                      keeps getting messages, e.g. through a failover)\n"
          "  --retry-backoff-max-ms MS  cap of the client's retry delays (leader\n"
          "                      changes). The library's default: 1000\n"
          "  --fetch-pipeline    consumers send a partition's next fetch when an\n"
          "                      answer's envelope arrives, before its payload\n"
          "  --rate R            messages/s over all producers; 0 = flat out. 0\n"
          "  --count C           messages over all producers\n"
          "  --duration S        seconds of producing (when no --count). 10\n"
          "  --from earliest|latest  where consumers start. latest with producers,\n"
          "                      earliest without (read-back)\n"
          "  --tls               connections speak TLS (the system's CAs)\n"
          "  --tls-ca FILE       CA the nodes' certificates chain to (implies --tls)\n"
          "  --tls-cert FILE     client certificate for mutual TLS (with --tls-key)\n"
          "  --tls-key FILE      its private key\n"
          "  --user NAME         log in with SCRAM-SHA-256 (password from\n"
          "                      CAIRN_PASSWORD)\n"
          "  --json              the summary as one JSON object\n"
          "  --quiet             no progress lines\n");
}

static void bench_json_hist(const char *name, const struct hist *h, bool comma)
{
  printf("\"%s\":{\"count\":%" PRIu64 ",\"mean_us\":%.1f,\"p50_us\":%.1f,\"p90_us\":%.1f,"
         "\"p99_us\":%.1f,\"p999_us\":%.1f,\"max_us\":%.1f}%s",
         name, h->count, hist_mean(h) / 1e3, (double)hist_quantile(h, 0.5) / 1e3,
         (double)hist_quantile(h, 0.9) / 1e3, (double)hist_quantile(h, 0.99) / 1e3,
         (double)hist_quantile(h, 0.999) / 1e3, (double)hist_quantile(h, 1.0) / 1e3,
         comma ? "," : "");
}

static void bench_text_hist(const char *name, const struct hist *h)
{
  if (h->count == 0) {
    return;
  }
  printf("%-22s p50 %.0f us, p90 %.0f us, p99 %.0f us, p99.9 %.0f us, max %.0f us "
         "(mean %.0f us, %" PRIu64 " samples)\n",
         name, (double)hist_quantile(h, 0.5) / 1e3, (double)hist_quantile(h, 0.9) / 1e3,
         (double)hist_quantile(h, 0.99) / 1e3, (double)hist_quantile(h, 0.999) / 1e3,
         (double)hist_quantile(h, 1.0) / 1e3, hist_mean(h) / 1e3, h->count);
}

static int bench_parse(int argc, char **argv, struct bench_opts *o)
{
  *o = (struct bench_opts){.partitions = 1, .rf = 1, .producers = 1, .consumers = 0,
                           .size = 100, .batch_bytes = 65536, .linger_ms = 5, .acks = "all",
                           .duration = 10, .idempotence = true};
  int from = -1; /* -1: by mode */
  enum { O_BOOT = 1, O_TOPIC, O_PARTS, O_RF, O_PROD, O_CONS, O_SIZE, O_BATCH, O_LINGER, O_MIF,
         O_BUF, O_ACKS, O_RATE, O_COUNT, O_DUR, O_FROM, O_JSON, O_QUIET, O_NOIDEM, O_BACKOFF, O_RR, O_HELP,
         O_TLS, O_TLS_CA, O_TLS_CERT, O_TLS_KEY, O_USER, O_PIPE, O_CODEC };
  static const struct option lo[] = {
    {"bootstrap", 1, 0, O_BOOT},   {"topic", 1, 0, O_TOPIC},         {"partitions", 1, 0, O_PARTS},
    {"rf", 1, 0, O_RF},            {"producers", 1, 0, O_PROD},      {"consumers", 1, 0, O_CONS},
    {"size", 1, 0, O_SIZE},        {"batch-bytes", 1, 0, O_BATCH},   {"linger-ms", 1, 0, O_LINGER},
    {"max-in-flight", 1, 0, O_MIF}, {"buffer-bytes", 1, 0, O_BUF},   {"acks", 1, 0, O_ACKS},
    {"rate", 1, 0, O_RATE},        {"count", 1, 0, O_COUNT},         {"duration", 1, 0, O_DUR},
    {"from", 1, 0, O_FROM},        {"json", 0, 0, O_JSON},           {"quiet", 0, 0, O_QUIET},
    {"no-idempotence", 0, 0, O_NOIDEM}, {"retry-backoff-max-ms", 1, 0, O_BACKOFF},
    {"round-robin", 0, 0, O_RR},   {"help", 0, 0, O_HELP},           {"tls", 0, 0, O_TLS},
    {"tls-ca", 1, 0, O_TLS_CA},    {"tls-cert", 1, 0, O_TLS_CERT},   {"tls-key", 1, 0, O_TLS_KEY},
    {"user", 1, 0, O_USER},        {"fetch-pipeline", 0, 0, O_PIPE}, {"compression", 1, 0, O_CODEC},
    {0, 0, 0, 0}};
  int c;
  while ((c = getopt_long(argc, argv, "", lo, NULL)) != -1) {
    switch (c) {
    case O_BOOT: o->bootstrap = optarg; break;
    case O_TOPIC: o->topic = optarg; break;
    case O_PARTS: o->partitions = (uint32_t)strtoul(optarg, NULL, 10); break;
    case O_RF: o->rf = (uint32_t)strtoul(optarg, NULL, 10); break;
    case O_PROD: o->producers = atoi(optarg); break;
    case O_CONS: o->consumers = atoi(optarg); break;
    case O_SIZE: o->size = strtoull(optarg, NULL, 10); break;
    case O_BATCH: o->batch_bytes = (uint32_t)strtoul(optarg, NULL, 10); break;
    case O_LINGER: o->linger_ms = (uint32_t)strtoul(optarg, NULL, 10); break;
    case O_MIF: o->max_in_flight = (uint32_t)strtoul(optarg, NULL, 10); break;
    case O_BUF: o->buffer_bytes = strtoull(optarg, NULL, 10); break;
    case O_ACKS: o->acks = optarg; break;
    case O_RATE: o->rate = strtod(optarg, NULL); break;
    case O_COUNT: o->count = strtoull(optarg, NULL, 10); break;
    case O_DUR: o->duration = strtod(optarg, NULL); break;
    case O_FROM:
      if (strcmp(optarg, "earliest") == 0) {
        from = 1;
      } else if (strcmp(optarg, "latest") == 0) {
        from = 0;
      } else {
        fprintf(stderr, "cairn-bench: --from earliest|latest\n");
        return -1;
      }
      break;
    case O_JSON: o->json = true; break;
    case O_QUIET: o->quiet = true; break;
    case O_NOIDEM: o->idempotence = false; break;
    case O_CODEC:
      if (strcmp(optarg, "none") == 0) {
        o->compression = CAIRN_COMPRESSION_NONE;
      } else if (strcmp(optarg, "lz4") == 0) {
        o->compression = CAIRN_COMPRESSION_LZ4;
      } else if (strcmp(optarg, "zstd") == 0) {
        o->compression = CAIRN_COMPRESSION_ZSTD;
      } else {
        fprintf(stderr, "cairn-bench: --compression none|lz4|zstd\n");
        return -1;
      }
      break;
    case O_RR: o->round_robin = true; break;
    case O_PIPE: o->fetch_pipeline = true; break;
    case O_BACKOFF: o->backoff_max_ms = (uint32_t)strtoul(optarg, NULL, 10); break;
    case O_TLS: o->tls = true; break;
    case O_TLS_CA: o->tls = true; o->tls_ca = optarg; break;
    case O_TLS_CERT: o->tls_cert = optarg; break;
    case O_TLS_KEY: o->tls_key = optarg; break;
    case O_USER: o->user = optarg; o->password = getenv("CAIRN_PASSWORD"); break;
    case O_HELP: bench_usage(stdout); exit(0);
    default: return -1;
    }
  }
  if (o->bootstrap == NULL || o->topic == NULL) {
    fprintf(stderr, "cairn-bench: --bootstrap and --topic are required\n");
    return -1;
  }
  if ((o->tls_cert == NULL) != (o->tls_key == NULL)) {
    fprintf(stderr, "cairn-bench: --tls-cert and --tls-key go together\n");
    return -1;
  }
  if (o->user != NULL && o->password == NULL) {
    fprintf(stderr, "cairn-bench: --user needs the password in CAIRN_PASSWORD\n");
    return -1;
  }
  if (strcmp(o->acks, "all") != 0) {
    fprintf(stderr, "cairn-bench: --acks: only 'all' (Cairn acknowledges after commit)\n");
    return -1;
  }
  if (o->partitions == 0 || o->rf == 0 || o->producers < 0 || o->consumers < 0 ||
      o->producers + o->consumers == 0 || o->producers + o->consumers > BENCH_MAX_WORKERS ||
      o->batch_bytes == 0 || o->rate < 0 || o->duration <= 0) {
    fprintf(stderr, "cairn-bench: bad counts (partitions, rf, producers + consumers in 1..%d, "
                    "batch bytes, rate, duration)\n", BENCH_MAX_WORKERS);
    return -1;
  }
  if ((uint32_t)o->consumers > o->partitions) {
    o->consumers = (int)o->partitions; /* a consumer per partition at most */
  }
  o->from_earliest = from == 1 || (from == -1 && o->producers == 0);
  return 0;
}

int main(int argc, char **argv)
{
  struct bench_opts o;
  if (bench_parse(argc, argv, &o) != 0) {
    bench_usage(stderr);
    return 2;
  }
  bench_start_offsets = calloc(o.partitions, sizeof *bench_start_offsets);
  bench_end_offsets = calloc(o.partitions, sizeof *bench_end_offsets);
  int nw = o.producers + o.consumers;
  struct bench_worker *ws = calloc((size_t)nw, sizeof *ws);
  static struct bench_shared sh;
  if (bench_start_offsets == NULL || bench_end_offsets == NULL || ws == NULL) {
    fprintf(stderr, "cairn-bench: out of memory\n");
    return 1;
  }
  if (bench_prepare_topic(&o) != 0) {
    free(ws);
    free(bench_start_offsets);
    free(bench_end_offsets);
    return 1;
  }
  uint64_t t0 = bench_now_ns();
  /* Consumers first, so a tailing consumer is fetching before the first
   * message goes out. */
  for (int i = 0; i < nw; i++) {
    struct bench_worker *w = &ws[i];
    w->producer = i >= o.consumers;
    w->index = w->producer ? i - o.consumers : i;
    w->o = &o;
    w->sh = &sh;
    w->quota = UINT64_MAX;
    if (w->producer && o.count > 0) {
      w->quota = o.count / (uint64_t)o.producers +
                 ((uint64_t)w->index < o.count % (uint64_t)o.producers ? 1 : 0);
    }
    if (pthread_create(&w->thread, NULL, bench_worker_main, w) != 0) {
      fprintf(stderr, "cairn-bench: cannot start a thread\n");
      atomic_store(&sh.stop, true);
      nw = i;
      break;
    }
  }
  /* Progress, and the duration's deadline. */
  uint64_t deadline = o.count > 0 ? UINT64_MAX : t0 + (uint64_t)(o.duration * 1e9);
  uint64_t prev_sent = 0, prev_acked = 0, prev_cons = 0, prev_cbytes = 0, prev_t = t0;
  for (;;) {
    usleep(100000);
    uint64_t now = bench_now_ns();
    bool producers_done = atomic_load(&sh.producers_done) == o.producers;
    if (now >= deadline) {
      atomic_store(&sh.stop, true);
    }
    int alive = 0;
    for (int i = 0; i < nw; i++) {
      if (!ws[i].joined) {
        if (pthread_tryjoin_np(ws[i].thread, NULL) == EBUSY) {
          alive++;
        } else {
          ws[i].joined = true;
        }
      }
    }
    if (now - prev_t >= 1000000000u || alive == 0) {
      uint64_t s = atomic_load(&sh.sent), a = atomic_load(&sh.acked);
      uint64_t cn = atomic_load(&sh.consumed), cb = atomic_load(&sh.consumed_bytes);
      double dt = (double)(now - prev_t) / 1e9;
      if (!o.quiet && dt > 0.05) {
        fprintf(stderr,
                "[%5.1fs] sent %8.0f msg/s  acked %8.0f msg/s %7.2f MB/s  consumed %8.0f msg/s "
                "%7.2f MB/s  failed %" PRIu64 "%s\n",
                (double)(now - t0) / 1e9, (double)(s - prev_sent) / dt,
                (double)(a - prev_acked) / dt, (double)(a - prev_acked) * (double)o.size / dt / 1e6,
                (double)(cn - prev_cons) / dt, (double)(cb - prev_cbytes) / dt / 1e6,
                (uint64_t)atomic_load(&sh.failed), producers_done ? "  (producers done)" : "");
      }
      prev_sent = s;
      prev_acked = a;
      prev_cons = cn;
      prev_cbytes = cb;
      prev_t = now;
    }
    if (alive == 0) {
      break;
    }
  }
  /* Every thread was joined by the loop above. */
  struct hist ack, e2e;
  hist_init(&ack);
  hist_init(&e2e);
  uint64_t acked = 0, failed = 0, consumed = 0, cbytes = 0;
  uint64_t p_start = UINT64_MAX, p_end = 0, c_start = UINT64_MAX, c_end = 0;
  uint64_t max_gap = 0;
  int32_t max_gap_partition = -1;
  int errors = 0;
  for (int i = 0; i < nw; i++) {
    struct bench_worker *w = &ws[i];
    if (w->producer) {
      hist_merge(&ack, &w->lat);
      acked += w->acked;
      failed += w->failed;
      if (w->t_start_ns < p_start) {
        p_start = w->t_start_ns;
      }
      if (w->t_last_ack_ns > p_end) {
        p_end = w->t_last_ack_ns;
      }
      if (w->max_gap_ns > max_gap) {
        max_gap = w->max_gap_ns;
        max_gap_partition = w->max_gap_partition;
      }
    } else {
      hist_merge(&e2e, &w->lat);
      consumed += w->consumed;
      cbytes += w->consumed_bytes;
      if (w->t_start_ns < c_start) {
        c_start = w->t_start_ns;
      }
      if (w->t_last_rec_ns > c_end) {
        c_end = w->t_last_rec_ns;
      }
    }
    if (w->first_error != 0) {
      errors++;
    }
    free(w->value);
    free(w->part_last_ack_ns);
    free(w->parts);
    free(w->end);
  }
  double p_secs = p_end > p_start ? (double)(p_end - p_start) / 1e9 : 0;
  double c_secs = c_end > c_start ? (double)(c_end - c_start) / 1e9 : 0;
  double p_mps = p_secs > 0 ? (double)acked / p_secs : 0;
  double p_mbs = p_mps * (double)o.size / 1e6;
  double c_mps = c_secs > 0 ? (double)consumed / c_secs : 0;
  double c_mbs = c_secs > 0 ? (double)cbytes / c_secs / 1e6 : 0;
  uint64_t expected_reads = 0;
  if (o.producers == 0) {
    for (uint32_t p = 0; p < o.partitions; p++) {
      expected_reads += (uint64_t)(bench_end_offsets[p] - bench_start_offsets[p]);
    }
  } else {
    expected_reads = acked;
  }
  bool ok = errors == 0 && failed == 0 && (o.consumers == 0 || consumed >= expected_reads);
  if (o.json) {
    printf("{\"topic\":\"%s\",\"partitions\":%" PRIu32 ",\"rf\":%" PRIu32 ",\"producers\":%d,"
           "\"consumers\":%d,\"size\":%zu,\"batch_bytes\":%" PRIu32 ",\"linger_ms\":%" PRIu32 ","
           "\"rate\":%.0f,\"acks\":\"all\",",
           o.topic, o.partitions, o.rf, o.producers, o.consumers, o.size, o.batch_bytes,
           o.linger_ms, o.rate);
    printf("\"produce\":{\"messages\":%" PRIu64 ",\"failed\":%" PRIu64 ",\"seconds\":%.3f,"
           "\"msgs_per_s\":%.0f,\"mb_per_s\":%.2f,\"max_ack_gap_ms\":%.1f,"
           "\"max_ack_gap_partition\":%" PRId32 "},",
           acked, failed, p_secs, p_mps, p_mbs, (double)max_gap / 1e6, max_gap_partition);
    printf("\"consume\":{\"messages\":%" PRIu64 ",\"expected\":%" PRIu64 ",\"bytes\":%" PRIu64
           ",\"seconds\":%.3f,\"msgs_per_s\":%.0f,\"mb_per_s\":%.2f},",
           consumed, o.consumers > 0 ? expected_reads : 0, cbytes, c_secs, c_mps, c_mbs);
    bench_json_hist("ack_latency", &ack, true);
    bench_json_hist("e2e_latency", &e2e, true);
    printf("\"ok\":%s}\n", ok ? "true" : "false");
  } else {
    printf("cairn-bench: topic %s, %" PRIu32 " partitions (rf %" PRIu32 "), %d producers, %d "
           "consumers, %zu-byte messages, batch %" PRIu32 " B, linger %" PRIu32 " ms, %s\n",
           o.topic, o.partitions, o.rf, o.producers, o.consumers, o.size, o.batch_bytes,
           o.linger_ms, o.rate > 0 ? "paced" : "flat out");
    if (o.producers > 0) {
      printf("produced  %" PRIu64 " messages (%" PRIu64 " failed) in %.2f s: %.0f msg/s, "
             "%.2f MB/s\n",
             acked, failed, p_secs, p_mps, p_mbs);
      printf("longest silence of a partition between acknowledgements: %.1f ms (partition %" PRId32
             ")\n",
             (double)max_gap / 1e6, max_gap_partition);
    }
    if (o.consumers > 0) {
      printf("consumed  %" PRIu64 " of %" PRIu64 " messages in %.2f s: %.0f msg/s, %.2f MB/s\n",
             consumed, expected_reads, c_secs, c_mps, c_mbs);
    }
    bench_text_hist("ack latency", &ack);
    bench_text_hist("end-to-end latency", &e2e);
    printf("%s\n", ok ? "ok" : "FAILED");
  }
  free(ws);
  free(bench_start_offsets);
  free(bench_end_offsets);
  return ok ? 0 : 1;
}
