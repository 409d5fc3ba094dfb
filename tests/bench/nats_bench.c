/* nats_bench.c - cairn-nats-bench: the NATS JetStream side of bench/compare,
 * on libnats (Debian's libnats-dev 3.4), measuring what cairn-bench
 * measures for Cairn and printing the same JSON keys.
 *
 *   cairn-nats-bench --url nats://H:P[,nats://H:P...] --stream S [options]
 *     --replicas R   stream replicas when creating it (file storage). 1
 *     --create       create the stream (subject S.x) before producing
 *     --producers N  publisher threads, one connection each. 1
 *     --size B       message bytes (>= 8 carries the send time). 100
 *     --count C      messages over all publishers. 100000
 *     --window W     async publishes in flight per publisher (MaxPending). 4096
 *     --rate R       paced instead: R messages/s in all, each published
 *                    synchronously (one at a time, js_Publish)
 *     --read         read the whole stream back with a pull consumer
 *                    (AckNone) in fetches of --fetch messages (default 1024)
 *     --json         the summary as one JSON object
 *
 * Flat out, every publisher calls js_PublishAsync with at most W
 * acknowledgements pending; the ack handler records the latency (send ->
 * PubAck). JetStream 2.9 acknowledges once the stream's Raft group has the
 * message on a majority, before any fsync (sync_interval is 2 min). */
#include "hist.h"

#include <nats/nats.h>

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

struct nb_opts {
  const char *url;
  const char *stream;
  int replicas;
  bool create;
  int producers;
  size_t size;
  uint64_t count;
  int window;
  double rate;
  bool read;
  int fetch;
  bool json;
};

struct nb_pub {
  const struct nb_opts *o;
  int index;
  pthread_t thread;
  uint64_t quota;
  uint64_t acked;
  uint64_t failed;
  uint64_t t_start_ns;
  uint64_t t_end_ns;
  struct hist lat;
  pthread_mutex_t mu; /* the ack handler runs on libnats's thread */
  int error;
};

static char nb_subject[256];

static uint64_t nb_now_ns(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static int nb_connect(const struct nb_opts *o, natsConnection **nc, jsCtx **js, jsOptions *jo)
{
  natsOptions *no = NULL;
  natsStatus s = natsOptions_Create(&no);
  /* --url may list several servers, comma separated. */
  char *urls = strdup(o->url);
  const char *servers[16];
  int n = 0;
  for (char *save = NULL, *t = strtok_r(urls, ",", &save); t != NULL && n < 16;
       t = strtok_r(NULL, ",", &save)) {
    servers[n++] = t;
  }
  if (s == NATS_OK) {
    s = natsOptions_SetServers(no, servers, n);
  }
  if (s == NATS_OK) {
    s = natsOptions_SetTimeout(no, 10000);
  }
  if (s == NATS_OK) {
    s = natsConnection_Connect(nc, no);
  }
  if (s == NATS_OK) {
    s = natsConnection_JetStream(js, *nc, jo);
  }
  natsOptions_Destroy(no);
  free(urls);
  if (s != NATS_OK) {
    fprintf(stderr, "cairn-nats-bench: connect %s: %s\n", o->url, natsStatus_GetText(s));
    return -1;
  }
  return 0;
}

static void nb_on_ack(jsCtx *js, natsMsg *msg, jsPubAck *pa, jsPubAckErr *pae, void *closure)
{
  (void)js;
  struct nb_pub *p = closure;
  uint64_t now = nb_now_ns();
  pthread_mutex_lock(&p->mu);
  if (pa != NULL && natsMsg_GetDataLength(msg) >= 8) {
    uint64_t t;
    memcpy(&t, natsMsg_GetData(msg), 8);
    hist_record(&p->lat, now - t);
    p->acked++;
    p->t_end_ns = now;
  } else if (pa != NULL) {
    p->acked++;
    p->t_end_ns = now;
  } else {
    p->failed++;
    if (p->error == 0 && pae != NULL) {
      p->error = 1;
      fprintf(stderr, "cairn-nats-bench: publish failed: %s (%d)\n",
              pae->ErrText != NULL ? pae->ErrText : natsStatus_GetText(pae->Err), pae->ErrCode);
    }
  }
  pthread_mutex_unlock(&p->mu);
  natsMsg_Destroy(msg);
}

static void *nb_pub_main(void *arg)
{
  struct nb_pub *p = arg;
  const struct nb_opts *o = p->o;
  jsOptions jo;
  jsOptions_Init(&jo);
  jo.PublishAsync.MaxPending = o->window;
  jo.PublishAsync.AckHandler = nb_on_ack;
  jo.PublishAsync.AckHandlerClosure = p;
  jo.PublishAsync.StallWait = 60000;
  natsConnection *nc = NULL;
  jsCtx *js = NULL;
  if (nb_connect(o, &nc, &js, &jo) != 0) {
    p->error = 1;
    return NULL;
  }
  uint8_t *buf = calloc(1, o->size > 8 ? o->size : 8);
  for (size_t i = 8; i < o->size; i++) {
    buf[i] = (uint8_t)('a' + i % 26);
  }
  p->t_start_ns = nb_now_ns();
  double per_ns = o->rate > 0 ? o->rate / o->producers / 1e9 : 0;
  for (uint64_t i = 0; i < p->quota && p->error == 0; i++) {
    uint64_t now = nb_now_ns();
    if (per_ns > 0) {
      /* Paced: wait for this message's slot, then publish and wait for
       * its PubAck (one message at a time). */
      uint64_t slot = p->t_start_ns + (uint64_t)((double)i / per_ns);
      if (slot > now) {
        struct timespec ts = {(time_t)((slot - now) / 1000000000u),
                              (long)((slot - now) % 1000000000u)};
        nanosleep(&ts, NULL);
        now = nb_now_ns();
      }
      memcpy(buf, &now, 8);
      jsPubAck *pa = NULL;
      jsErrCode jerr = 0;
      natsStatus s = js_Publish(&pa, js, nb_subject, buf, (int)o->size, NULL, &jerr);
      uint64_t done = nb_now_ns();
      if (s == NATS_OK) {
        hist_record(&p->lat, done - now);
        p->acked++;
        p->t_end_ns = done;
      } else {
        p->failed++;
        fprintf(stderr, "cairn-nats-bench: publish: %s (%d)\n", natsStatus_GetText(s), jerr);
        p->error = 1;
      }
      jsPubAck_Destroy(pa);
      continue;
    }
    memcpy(buf, &now, 8);
    natsStatus s = js_PublishAsync(js, nb_subject, buf, (int)o->size, NULL);
    if (s != NATS_OK) {
      fprintf(stderr, "cairn-nats-bench: publish async: %s\n", natsStatus_GetText(s));
      p->error = 1;
    }
  }
  if (per_ns == 0) {
    jsPubOptions po;
    jsPubOptions_Init(&po);
    po.MaxWait = 120000;
    natsStatus s = js_PublishAsyncComplete(js, &po);
    if (s != NATS_OK) {
      fprintf(stderr, "cairn-nats-bench: waiting for acks: %s\n", natsStatus_GetText(s));
      p->error = 1;
    }
  }
  free(buf);
  jsCtx_Destroy(js);
  natsConnection_Destroy(nc);
  return NULL;
}

static int nb_create_stream(const struct nb_opts *o)
{
  natsConnection *nc = NULL;
  jsCtx *js = NULL;
  jsOptions jo;
  jsOptions_Init(&jo);
  jo.Wait = 30000;
  if (nb_connect(o, &nc, &js, &jo) != 0) {
    return -1;
  }
  jsStreamConfig sc;
  jsStreamConfig_Init(&sc);
  sc.Name = o->stream;
  const char *subjects[1] = {nb_subject};
  sc.Subjects = subjects;
  sc.SubjectsLen = 1;
  sc.Storage = js_FileStorage;
  sc.Replicas = o->replicas;
  jsStreamInfo *si = NULL;
  jsErrCode jerr = 0;
  natsStatus s = NATS_ERR;
  /* A fresh cluster may still be electing its meta leader: retry. */
  for (int i = 0; i < 60; i++) {
    s = js_AddStream(&si, js, &sc, NULL, &jerr);
    if (s == NATS_OK) {
      break;
    }
    usleep(500000);
  }
  if (s != NATS_OK) {
    fprintf(stderr, "cairn-nats-bench: add stream %s: %s (%d: %s)\n", o->stream,
            natsStatus_GetText(s), jerr, nats_GetLastError(NULL));
  }
  jsStreamInfo_Destroy(si);
  jsCtx_Destroy(js);
  natsConnection_Destroy(nc);
  return s == NATS_OK ? 0 : -1;
}

static int nb_read(const struct nb_opts *o, uint64_t *n_out, uint64_t *bytes_out, double *secs)
{
  natsConnection *nc = NULL;
  jsCtx *js = NULL;
  jsOptions jo;
  jsOptions_Init(&jo);
  jo.Wait = 30000;
  if (nb_connect(o, &nc, &js, &jo) != 0) {
    return -1;
  }
  /* How many messages the stream holds: read them all. */
  jsStreamInfo *si = NULL;
  jsErrCode jerr = 0;
  natsStatus s = js_GetStreamInfo(&si, js, o->stream, NULL, &jerr);
  if (s != NATS_OK) {
    fprintf(stderr, "cairn-nats-bench: stream info: %s\n", natsStatus_GetText(s));
    jsCtx_Destroy(js);
    natsConnection_Destroy(nc);
    return -1;
  }
  uint64_t want = si->State.Msgs;
  jsStreamInfo_Destroy(si);
  jsSubOptions so;
  jsSubOptions_Init(&so);
  so.Stream = o->stream;
  so.Config.AckPolicy = js_AckNone;
  so.Config.DeliverPolicy = js_DeliverAll;
  so.Config.MaxRequestBatch = 0;
  natsSubscription *sub = NULL;
  char durable[64];
  snprintf(durable, sizeof durable, "reader%ld", (long)getpid());
  s = js_PullSubscribe(&sub, js, nb_subject, durable, NULL, &so, &jerr);
  if (s != NATS_OK) {
    fprintf(stderr, "cairn-nats-bench: pull subscribe: %s (%d)\n", natsStatus_GetText(s), jerr);
    jsCtx_Destroy(js);
    natsConnection_Destroy(nc);
    return -1;
  }
  natsSubscription_SetPendingLimits(sub, -1, -1);
  uint64_t t0 = nb_now_ns(), n = 0, bytes = 0, last = t0;
  while (n < want) {
    natsMsgList list = {0};
    s = natsSubscription_Fetch(&list, sub, o->fetch, 5000, &jerr);
    if (s != NATS_OK) {
      fprintf(stderr, "cairn-nats-bench: fetch after %" PRIu64 " of %" PRIu64 ": %s\n", n, want,
              natsStatus_GetText(s));
      break;
    }
    for (int i = 0; i < list.Count; i++) {
      bytes += (uint64_t)natsMsg_GetDataLength(list.Msgs[i]);
    }
    n += (uint64_t)list.Count;
    last = nb_now_ns();
    natsMsgList_Destroy(&list);
  }
  *secs = (double)(last - t0) / 1e9;
  *n_out = n;
  *bytes_out = bytes;
  natsSubscription_Unsubscribe(sub);
  natsSubscription_Destroy(sub);
  js_DeleteConsumer(js, o->stream, durable, NULL, &jerr);
  jsCtx_Destroy(js);
  natsConnection_Destroy(nc);
  return n >= want ? 0 : -1;
}

static void nb_json_hist(const char *name, const struct hist *h)
{
  printf("\"%s\":{\"count\":%" PRIu64 ",\"mean_us\":%.1f,\"p50_us\":%.1f,\"p90_us\":%.1f,"
         "\"p99_us\":%.1f,\"p999_us\":%.1f,\"max_us\":%.1f}",
         name, h->count, hist_mean(h) / 1e3, (double)hist_quantile(h, 0.5) / 1e3,
         (double)hist_quantile(h, 0.9) / 1e3, (double)hist_quantile(h, 0.99) / 1e3,
         (double)hist_quantile(h, 0.999) / 1e3, (double)hist_quantile(h, 1.0) / 1e3);
}

int main(int argc, char **argv)
{
  struct nb_opts o = {.replicas = 1, .producers = 1, .size = 100, .count = 100000,
                      .window = 4096, .fetch = 1024};
  static const struct option lo[] = {
    {"url", 1, 0, 'u'},   {"stream", 1, 0, 's'}, {"replicas", 1, 0, 'r'}, {"create", 0, 0, 'c'},
    {"producers", 1, 0, 'p'}, {"size", 1, 0, 'b'}, {"count", 1, 0, 'n'}, {"window", 1, 0, 'w'},
    {"rate", 1, 0, 'R'},  {"read", 0, 0, 'x'},   {"fetch", 1, 0, 'f'},    {"json", 0, 0, 'j'},
    {0, 0, 0, 0}};
  int c;
  while ((c = getopt_long(argc, argv, "", lo, NULL)) != -1) {
    switch (c) {
    case 'u': o.url = optarg; break;
    case 's': o.stream = optarg; break;
    case 'r': o.replicas = atoi(optarg); break;
    case 'c': o.create = true; break;
    case 'p': o.producers = atoi(optarg); break;
    case 'b': o.size = strtoull(optarg, NULL, 10); break;
    case 'n': o.count = strtoull(optarg, NULL, 10); break;
    case 'w': o.window = atoi(optarg); break;
    case 'R': o.rate = strtod(optarg, NULL); break;
    case 'x': o.read = true; break;
    case 'f': o.fetch = atoi(optarg); break;
    case 'j': o.json = true; break;
    default:
      fprintf(stderr, "usage: cairn-nats-bench --url URLS --stream S [--replicas R] [--create] "
                      "[--producers N] [--size B] [--count C] [--window W] [--rate R] [--read] "
                      "[--fetch F] [--json]\n");
      return 2;
    }
  }
  if (o.url == NULL || o.stream == NULL || o.producers < 1 || o.window < 1 || o.size < 8) {
    fprintf(stderr, "cairn-nats-bench: --url and --stream are required; producers, window >= 1, "
                    "size >= 8\n");
    return 2;
  }
  snprintf(nb_subject, sizeof nb_subject, "%s.x", o.stream);
  if (o.create && nb_create_stream(&o) != 0) {
    return 1;
  }
  struct hist ack;
  hist_init(&ack);
  uint64_t acked = 0, failed = 0, p_start = UINT64_MAX, p_end = 0;
  int errors = 0;
  if (o.count > 0 && !o.read) {
    struct nb_pub *ps = calloc((size_t)o.producers, sizeof *ps);
    for (int i = 0; i < o.producers; i++) {
      ps[i].o = &o;
      ps[i].index = i;
      ps[i].quota = o.count / (uint64_t)o.producers + ((uint64_t)i < o.count % (uint64_t)o.producers);
      hist_init(&ps[i].lat);
      pthread_mutex_init(&ps[i].mu, NULL);
      pthread_create(&ps[i].thread, NULL, nb_pub_main, &ps[i]);
    }
    for (int i = 0; i < o.producers; i++) {
      pthread_join(ps[i].thread, NULL);
      hist_merge(&ack, &ps[i].lat);
      acked += ps[i].acked;
      failed += ps[i].failed;
      errors += ps[i].error;
      if (ps[i].t_start_ns < p_start) {
        p_start = ps[i].t_start_ns;
      }
      if (ps[i].t_end_ns > p_end) {
        p_end = ps[i].t_end_ns;
      }
      pthread_mutex_destroy(&ps[i].mu);
    }
    free(ps);
  }
  uint64_t consumed = 0, cbytes = 0;
  double c_secs = 0;
  if (o.read && nb_read(&o, &consumed, &cbytes, &c_secs) != 0) {
    errors++;
  }
  double p_secs = p_end > p_start ? (double)(p_end - p_start) / 1e9 : 0;
  double p_mps = p_secs > 0 ? (double)acked / p_secs : 0;
  double c_mps = c_secs > 0 ? (double)consumed / c_secs : 0;
  bool ok = errors == 0 && failed == 0;
  if (o.json) {
    printf("{\"stream\":\"%s\",\"replicas\":%d,\"producers\":%d,\"size\":%zu,\"window\":%d,"
           "\"rate\":%.0f,",
           o.stream, o.replicas, o.producers, o.size, o.window, o.rate);
    printf("\"produce\":{\"messages\":%" PRIu64 ",\"failed\":%" PRIu64 ",\"seconds\":%.3f,"
           "\"msgs_per_s\":%.0f,\"mb_per_s\":%.2f},",
           acked, failed, p_secs, p_mps, p_mps * (double)o.size / 1e6);
    printf("\"consume\":{\"messages\":%" PRIu64 ",\"bytes\":%" PRIu64 ",\"seconds\":%.3f,"
           "\"msgs_per_s\":%.0f,\"mb_per_s\":%.2f},",
           consumed, cbytes, c_secs, c_mps, c_secs > 0 ? (double)cbytes / c_secs / 1e6 : 0);
    nb_json_hist("ack_latency", &ack);
    printf(",\"ok\":%s}\n", ok ? "true" : "false");
  } else {
    if (acked + failed > 0) {
      printf("published %" PRIu64 " (%" PRIu64 " failed) in %.2f s: %.0f msg/s, %.2f MB/s\n",
             acked, failed, p_secs, p_mps, p_mps * (double)o.size / 1e6);
      printf("ack latency p50 %.0f us, p99 %.0f us, max %.0f us\n",
             (double)hist_quantile(&ack, 0.5) / 1e3, (double)hist_quantile(&ack, 0.99) / 1e3,
             (double)hist_quantile(&ack, 1.0) / 1e3);
    }
    if (o.read) {
      printf("read %" PRIu64 " in %.2f s: %.0f msg/s\n", consumed, c_secs, c_mps);
    }
    printf("%s\n", ok ? "ok" : "FAILED");
  }
  nats_Close();
  return ok ? 0 : 1;
}
